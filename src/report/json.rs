//! The JSON report: serde for [`AcceptanceHistogram`], strict on reading.

use core::fmt;
use std::collections::BTreeMap;

use serde::de::{self, MapAccess, Visitor};
use serde::ser::{self, SerializeMap, SerializeStruct};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::error::ReportError;
use crate::AcceptanceHistogram;
use crate::record::ConfigError;
use crate::record::layout::{bucket_count, row_start};
use crate::record::proposal::{proposal_bucket_count, proposal_row_start};

/// The keys of the report, in the order they are written.
///
/// Writing emits vLLM's per-request `speculative_decoding` keys in vLLM's
/// order, `acceptance_histogram_by_draft_length` right after
/// `acceptance_histogram`, then our own keys: the two side counters, then
/// `scheduled_steps_by_budget`. Every figure is derived from the buckets at
/// the moment of writing.
///
/// Reading is strict: the histogram is rebuilt from `num_spec_tokens`, the
/// rows, our two side counters and the scheduled budgets, and every other
/// figure in the report must equal the one derived from those rows. A
/// report without `scheduled_steps_by_budget` (every report written before
/// the key existed) reads as all zero budgets. A report that parses but does not
/// describe one consistent histogram is rejected with a [`ReportError`]
/// message; unknown keys are rejected too, so a misspelt key is never
/// silently ignored.
///
/// ```
/// use specdec_metrics::{AcceptanceHistogram, REPORT_KEYS};
/// let report = serde_json::to_value(AcceptanceHistogram::new(2)?)?;
/// let keys: Vec<&str> = report.as_object().unwrap().keys().map(String::as_str).collect();
/// assert_eq!(keys.len(), REPORT_KEYS.len());
/// assert!(REPORT_KEYS.iter().all(|k| keys.contains(k)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub const REPORT_KEYS: [&str; 13] = [
    "mean_acceptance_length",
    "draft_acceptance_rate",
    "acceptance_histogram",
    "acceptance_histogram_by_draft_length",
    "num_spec_steps",
    "num_accepted_draft_tokens",
    "num_draft_tokens",
    "num_spec_tokens",
    "num_accepted_tokens_per_pos",
    "num_draft_tokens_per_pos",
    "num_undrafted_steps",
    "num_rejected_observations",
    "scheduled_steps_by_budget",
];

/// The keys a report has after [`REPORT_KEYS`] when the engine recorded
/// the proposal histogram of a lookup drafter (a
/// [`Recorder`](crate::Recorder) built with
/// [`record_proposals`](crate::RecorderBuilder::record_proposals), a
/// histogram made with
/// [`with_proposals`](crate::AcceptanceHistogram::with_proposals)), and
/// only then:
///
/// - `acceptance_by_proposal_length`: a map from the decimal string of each
///   proposal length `L` with at least one resolved outcome (ascending) to
///   the dense list of its `L + 1` counts, matched `0..=L`; `{}` when none;
/// - `num_aborted_proposals`: the outcomes left pending by aborted
///   requests.
///
/// Reading back requires both or neither.
///
/// ```
/// use specdec_metrics::{AcceptanceHistogram, PROPOSAL_REPORT_KEYS};
/// let mut h = AcceptanceHistogram::with_proposals(3)?;
/// h.observe_proposal(3, 2)?;
/// let report = serde_json::to_value(&h)?;
/// assert_eq!(report[PROPOSAL_REPORT_KEYS[0]], serde_json::json!({"3": [0, 0, 1, 0]}));
/// assert_eq!(report[PROPOSAL_REPORT_KEYS[1]], 0);
/// let plain = serde_json::to_value(AcceptanceHistogram::new(3)?)?;
/// assert!(plain.get(PROPOSAL_REPORT_KEYS[0]).is_none());
/// assert_eq!(serde_json::from_value::<AcceptanceHistogram>(report)?, h);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub const PROPOSAL_REPORT_KEYS: [&str; 2] =
    ["acceptance_by_proposal_length", "num_aborted_proposals"];

/// `acceptance_by_proposal_length`: observed proposal rows only, keyed by
/// the decimal string of `L`, ascending numerically.
struct RowsByProposalLength<'a>(&'a AcceptanceHistogram);

impl Serialize for RowsByProposalLength<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for (len, row) in self.0.observed_proposal_rows() {
            map.serialize_entry(&len.to_string(), row)?;
        }
        map.end()
    }
}

/// `acceptance_histogram_by_draft_length`: observed rows only, keyed by the
/// decimal string of `k`, ascending numerically.
struct RowsByDraftLength<'a>(&'a AcceptanceHistogram);

impl Serialize for RowsByDraftLength<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for (k, row) in self.0.observed_rows() {
            map.serialize_entry(&k.to_string(), row)?;
        }
        map.end()
    }
}

impl Serialize for AcceptanceHistogram {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // A total that does not fit would be written saturated, in a report
        // the reader rejects: refuse to write it instead.
        self.check_derived_totals()
            .map_err(|_| ser::Error::custom(ReportError::Overflow))?;
        let [
            mean,
            rate,
            hist,
            rows,
            steps,
            accepted,
            drafted,
            k,
            acc_pos,
            draft_pos,
            undrafted,
            rejected,
            scheduled,
        ] = REPORT_KEYS;
        let proposals = self.records_proposals();
        let len = REPORT_KEYS.len()
            + if proposals {
                PROPOSAL_REPORT_KEYS.len()
            } else {
                0
            };
        let mut s = serializer.serialize_struct("AcceptanceHistogram", len)?;
        s.serialize_field(mean, &self.mean_acceptance_length())?;
        s.serialize_field(rate, &self.draft_acceptance_rate())?;
        s.serialize_field(hist, &self.acceptance_histogram())?;
        s.serialize_field(rows, &RowsByDraftLength(self))?;
        s.serialize_field(steps, &self.num_spec_steps())?;
        s.serialize_field(accepted, &self.num_accepted_draft_tokens())?;
        s.serialize_field(drafted, &self.num_draft_tokens())?;
        s.serialize_field(k, &self.max_draft_len())?;
        s.serialize_field(acc_pos, &self.num_accepted_tokens_per_pos())?;
        s.serialize_field(draft_pos, &self.num_draft_tokens_per_pos())?;
        s.serialize_field(undrafted, &self.num_undrafted_steps())?;
        s.serialize_field(rejected, &self.num_rejected_observations())?;
        s.serialize_field(scheduled, self.scheduled_steps_by_budget())?;
        if proposals {
            let [by_len, aborted] = PROPOSAL_REPORT_KEYS;
            s.serialize_field(by_len, &RowsByProposalLength(self))?;
            s.serialize_field(aborted, &self.num_aborted_proposals())?;
        }
        s.end()
    }
}

/// The report as read, before it is checked.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReport {
    mean_acceptance_length: f64,
    draft_acceptance_rate: f64,
    acceptance_histogram: Vec<u64>,
    acceptance_histogram_by_draft_length: Rows,
    num_spec_steps: u64,
    num_accepted_draft_tokens: u64,
    num_draft_tokens: u64,
    num_spec_tokens: usize,
    num_accepted_tokens_per_pos: Vec<u64>,
    num_draft_tokens_per_pos: Vec<u64>,
    num_undrafted_steps: u64,
    num_rejected_observations: u64,
    /// Absent in reports written before the key existed: all zero then.
    /// Present, it must be a list (`null` is malformed, not absent).
    #[serde(default, deserialize_with = "present_list")]
    scheduled_steps_by_budget: Option<Vec<u64>>,
    /// Present only when the engine recorded proposals (with
    /// `num_aborted_proposals`).
    #[serde(default, deserialize_with = "present")]
    acceptance_by_proposal_length: Option<ProposalRows>,
    /// Present only when the engine recorded proposals.
    #[serde(default, deserialize_with = "present")]
    num_aborted_proposals: Option<u64>,
}

/// A key that may be absent but, when present, must hold a value (`null`
/// is malformed, not absent).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(deserializer).map(Some)
}

/// A key that may be absent but, when present, must hold a list of counts.
fn present_list<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Vec<u64>>, D::Error> {
    Vec::deserialize(deserializer).map(Some)
}

/// Rows keyed by canonical decimal draft lengths, each key at most once.
struct Rows(BTreeMap<usize, Vec<u64>>);

impl<'de> Deserialize<'de> for Rows {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct RowsVisitor;
        impl<'de> Visitor<'de> for RowsVisitor {
            type Value = Rows;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map from decimal draft lengths to lists of counts")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Rows, M::Error> {
                let mut rows = BTreeMap::new();
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    let k = parse_draft_length(&key).ok_or_else(|| {
                        de::Error::custom(format_args!(
                            "acceptance_histogram_by_draft_length: key {key:?} is not a draft length (a decimal number without sign or leading zeros)"
                        ))
                    })?;
                    let row: Vec<u64> = map.next_value()?;
                    if rows.insert(k, row).is_some() {
                        return Err(de::Error::custom(ReportError::DuplicateDraftLength {
                            drafted: k,
                        }));
                    }
                }
                Ok(Rows(rows))
            }
        }
        deserializer.deserialize_map(RowsVisitor)
    }
}

/// Proposal rows keyed by canonical decimal proposal lengths, each key at
/// most once.
struct ProposalRows(BTreeMap<usize, Vec<u64>>);

impl<'de> Deserialize<'de> for ProposalRows {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct RowsVisitor;
        impl<'de> Visitor<'de> for RowsVisitor {
            type Value = ProposalRows;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map from decimal proposal lengths to lists of counts")
            }
            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<ProposalRows, M::Error> {
                let mut rows = BTreeMap::new();
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    let len = parse_draft_length(&key).ok_or_else(|| {
                        de::Error::custom(format_args!(
                            "acceptance_by_proposal_length: key {key:?} is not a proposal length (a decimal number without sign or leading zeros)"
                        ))
                    })?;
                    let row: Vec<u64> = map.next_value()?;
                    if rows.insert(len, row).is_some() {
                        return Err(de::Error::custom(ReportError::DuplicateProposalLength {
                            proposal_len: len,
                        }));
                    }
                }
                Ok(ProposalRows(rows))
            }
        }
        deserializer.deserialize_map(RowsVisitor)
    }
}

/// Parses a canonical decimal (`"0"`, `"12"`; not `"+1"`, `"01"`, `" 1"`).
fn parse_draft_length(key: &str) -> Option<usize> {
    let canonical = !key.is_empty()
        && key.bytes().all(|b| b.is_ascii_digit())
        && (key == "0" || !key.starts_with('0'));
    canonical.then(|| key.parse().ok()).flatten()
}

impl<'de> Deserialize<'de> for AcceptanceHistogram {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Only a map (a JSON object) is a report: the derived struct
        // deserializer alone would also take a bare array of the values.
        struct ReportVisitor;
        impl<'de> Visitor<'de> for ReportVisitor {
            type Value = RawReport;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a speculative decoding report object")
            }
            fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<RawReport, M::Error> {
                RawReport::deserialize(de::value::MapAccessDeserializer::new(map))
            }
        }
        let raw = deserializer.deserialize_map(ReportVisitor)?;
        AcceptanceHistogram::try_from_report(raw).map_err(de::Error::custom)
    }
}

impl AcceptanceHistogram {
    fn try_from_report(mut raw: RawReport) -> Result<Self, ReportError> {
        let max = raw.num_spec_tokens;
        ConfigError::check_max_draft_len(max).map_err(ReportError::MaxDraftLen)?;
        let mut counts = vec![0u64; bucket_count(max)].into_boxed_slice();
        for (&k, row) in &raw.acceptance_histogram_by_draft_length.0 {
            if k > max {
                return Err(ReportError::DraftLengthAboveMax {
                    drafted: k,
                    max_draft_len: max,
                });
            }
            if row.len() != k + 1 {
                return Err(ReportError::RowLength {
                    drafted: k,
                    found: row.len(),
                });
            }
            counts[row_start(k)..row_start(k + 1)].copy_from_slice(row);
        }
        let scheduled = match raw.scheduled_steps_by_budget.take() {
            None => vec![0; max + 1],
            Some(list) if list.len() == max + 1 => list,
            Some(list) => {
                return Err(ReportError::ListLength {
                    field: "scheduled_steps_by_budget",
                    expected: max + 1,
                    found: list.len(),
                });
            }
        };
        let mut h = Self::from_parts(
            max,
            counts,
            raw.num_undrafted_steps,
            raw.num_rejected_observations,
            scheduled.into_boxed_slice(),
        );
        let [by_len, aborted] = PROPOSAL_REPORT_KEYS;
        match (
            raw.acceptance_by_proposal_length.take(),
            raw.num_aborted_proposals,
        ) {
            (None, None) => {}
            (Some(_), None) => return Err(ReportError::IncompleteProposals { missing: aborted }),
            (None, Some(_)) => return Err(ReportError::IncompleteProposals { missing: by_len }),
            (Some(rows), Some(aborted)) => {
                let mut counts = vec![0u64; proposal_bucket_count(max)].into_boxed_slice();
                for (&len, row) in &rows.0 {
                    if !(1..=max).contains(&len) {
                        return Err(ReportError::ProposalLengthOutOfRange {
                            proposal_len: len,
                            max_draft_len: max,
                        });
                    }
                    if row.len() != len + 1 {
                        return Err(ReportError::ProposalRowLength {
                            proposal_len: len,
                            found: row.len(),
                        });
                    }
                    counts[proposal_row_start(len)..proposal_row_start(len + 1)]
                        .copy_from_slice(row);
                }
                h.set_proposals(counts, aborted);
            }
        }
        h.check_derived_totals()
            .map_err(|_| ReportError::Overflow)?;
        check_derived_figures(&raw, &h)?;
        Ok(h)
    }
}

/// Every figure of the report that the histogram derives must equal the
/// one derived from its rows.
fn check_derived_figures(raw: &RawReport, h: &AcceptanceHistogram) -> Result<(), ReportError> {
    check_list(
        "acceptance_histogram",
        &raw.acceptance_histogram,
        &h.acceptance_histogram(),
    )?;
    check_count("num_spec_steps", raw.num_spec_steps, h.num_spec_steps())?;
    check_count(
        "num_accepted_draft_tokens",
        raw.num_accepted_draft_tokens,
        h.num_accepted_draft_tokens(),
    )?;
    check_count(
        "num_draft_tokens",
        raw.num_draft_tokens,
        h.num_draft_tokens(),
    )?;
    check_list(
        "num_accepted_tokens_per_pos",
        &raw.num_accepted_tokens_per_pos,
        &h.num_accepted_tokens_per_pos(),
    )?;
    check_list(
        "num_draft_tokens_per_pos",
        &raw.num_draft_tokens_per_pos,
        &h.num_draft_tokens_per_pos(),
    )?;
    check_rate(
        "mean_acceptance_length",
        raw.mean_acceptance_length,
        h.mean_acceptance_length(),
    )?;
    check_rate(
        "draft_acceptance_rate",
        raw.draft_acceptance_rate,
        h.draft_acceptance_rate(),
    )?;
    Ok(())
}

fn check_count(field: &'static str, reported: u64, derived: u64) -> Result<(), ReportError> {
    if reported == derived {
        Ok(())
    } else {
        Err(ReportError::CountMismatch {
            field,
            index: None,
            reported,
            derived,
        })
    }
}

fn check_list(field: &'static str, reported: &[u64], derived: &[u64]) -> Result<(), ReportError> {
    if reported.len() != derived.len() {
        return Err(ReportError::ListLength {
            field,
            expected: derived.len(),
            found: reported.len(),
        });
    }
    match reported.iter().zip(derived).position(|(r, d)| r != d) {
        None => Ok(()),
        Some(i) => Err(ReportError::CountMismatch {
            field,
            index: Some(i),
            reported: reported[i],
            derived: derived[i],
        }),
    }
}

/// Rates are compared with a relative tolerance of 1e-12: our own writer and
/// vLLM's reproduce the derived value to the last bit, but a report that
/// went through another JSON library may have been printed with fewer
/// digits.
fn check_rate(field: &'static str, reported: f64, derived: f64) -> Result<(), ReportError> {
    if (reported - derived).abs() <= 1e-12 * derived.abs().max(1.0) {
        Ok(())
    } else {
        Err(ReportError::RateMismatch {
            field,
            reported,
            derived,
        })
    }
}
