//! Summaries of a run, read line by line: vLLM's offline example, the
//! offline stats block, vllm-ascend's k tuner and `vllm bench serve`'s
//! speculative section (the [module docs](super)).

use crate::text::excerpt;

use super::line::{count, number, rate};
use super::{Format, Line, MAX_POSITIONS, Means, Record};

/// A summary being read, line by line.
#[derive(Debug)]
pub(super) struct Block {
    pub(super) format: Format,
    /// Its first line's number and text, for messages.
    pub(super) start: u64,
    pub(super) first_line: String,
    /// `(key, value, the value as a count)`: counts are kept exact.
    pub(super) fields: Vec<(&'static str, f64, u64)>,
    pub(super) rates: Vec<f64>,
    /// `vllm bench serve`: the `Per-position acceptance (%):` line was read.
    pub(super) per_position: bool,
}

/// The keys of each summary, as printed (before the colon).
const OFFLINE_KEYS: &[&str] = &[
    "num_drafts",
    "num_draft_tokens",
    "num_accepted_tokens",
    "mean acceptance length",
];
const STATS_KEYS: &[&str] = &[
    "Number of drafts",
    "Draft tokens generated",
    "Draft utilization rate",
    "Accepted tokens",
    "Mean acceptance length",
];
/// The keys whose values are counts.
const COUNT_KEYS: &[&str] = &[
    "num_drafts",
    "num_draft_tokens",
    "num_accepted_tokens",
    "Number of drafts",
    "Draft tokens generated",
    "Accepted tokens",
    "Drafts",
    "Draft tokens",
];
const BENCH_KEYS: &[&str] = &[
    "Acceptance rate (%)",
    "Acceptance length",
    "Drafts",
    "Draft tokens",
    "Accepted tokens",
];

impl Block {
    /// The summary `text` starts, if any.
    pub(super) fn start(number: u64, text: &str) -> Option<Result<Block, String>> {
        let t = text.trim();
        let format = if t.starts_with("num_drafts:") {
            Format::OfflineExample
        } else if t.starts_with("mean acceptance length:") {
            Format::OfflineNoDrafts
        } else if t.starts_with("Number of drafts:") {
            Format::OfflineStatsBlock
        } else if t.trim_matches(['-', '=', ' ']) == "Speculative Decoding" {
            // `print("{s:{c}^{n}}".format(s="Speculative Decoding", n=50,
            // c="-"))`, or a later version's section title.
            Format::BenchServe
        } else {
            return None;
        };
        let mut b = Block {
            format,
            start: number,
            first_line: t.to_owned(),
            fields: Vec::new(),
            rates: Vec::new(),
            per_position: false,
        };
        if format == Format::BenchServe {
            return Some(Ok(b));
        }
        Some(b.feed(t).map(|taken| {
            debug_assert!(taken);
            b
        }))
    }

    /// Reads `text` into the summary: `Ok(false)` when it is not one of
    /// its lines (the summary ends before it).
    pub(super) fn feed(&mut self, text: &str) -> Result<bool, String> {
        let t = text.trim();
        let Some((key, value)) = t.split_once(':') else {
            // The rules of `-` the offline example prints around.
            let rule = t.len() >= 3 && t.bytes().all(|b| b == b'-');
            return Ok(rule && self.format != Format::BenchServe);
        };
        let value = value.trim();
        let position = |prefix: &str| -> Option<&str> { key.strip_prefix(prefix) };
        let (keys, pos_prefix): (&[&str], Option<&str>) = match self.format {
            Format::OfflineExample => (OFFLINE_KEYS, Some("acceptance at token ")),
            Format::OfflineNoDrafts => (&OFFLINE_KEYS[3..], Some("acceptance at token ")),
            Format::OfflineStatsBlock => (STATS_KEYS, None),
            _ => (
                BENCH_KEYS,
                if self.per_position {
                    Some("Position ")
                } else {
                    None
                },
            ),
        };
        if let Some(&k) = keys.iter().find(|&&k| k == key) {
            if !self.rates.is_empty() || self.per_position {
                return Ok(false);
            }
            if self.fields.iter().any(|(f, _, _)| *f == k) {
                return Ok(false);
            }
            let (v, c) = if COUNT_KEYS.contains(&k) {
                let c = count(value)?;
                (c as f64, c)
            } else {
                (number(value)?, 0)
            };
            self.fields.push((k, v, c));
            return Ok(true);
        }
        if self.format == Format::BenchServe
            && key == "Per-position acceptance (%)"
            && value.is_empty()
        {
            self.per_position = true;
            return Ok(true);
        }
        if let Some(i) = pos_prefix.and_then(position) {
            if i != self.rates.len().to_string() {
                return Err(format!(
                    "position {} where position {} was expected",
                    excerpt(i),
                    self.rates.len()
                ));
            }
            if self.rates.len() >= MAX_POSITIONS {
                return Err(format!("more than {MAX_POSITIONS} positions"));
            }
            let r = if self.format == Format::BenchServe {
                percent(value)?
            } else {
                rate(value, 2)?
            };
            self.rates.push(r);
            return Ok(true);
        }
        Ok(false)
    }

    fn field(&self, key: &str) -> Option<f64> {
        self.fields
            .iter()
            .find(|(k, _, _)| *k == key)
            .map(|&(_, v, _)| v)
    }

    fn count_field(&self, key: &str) -> Option<u64> {
        self.fields
            .iter()
            .find(|(k, _, _)| *k == key)
            .map(|&(_, _, c)| c)
    }

    /// The record the summary makes (none for a title with nothing of
    /// `vllm bench serve`'s section after it), or why it makes none.
    pub(super) fn finish(self) -> Result<Option<Record>, String> {
        if self.format == Format::BenchServe && self.fields.is_empty() && !self.per_position {
            return Ok(None);
        }
        self.record().map(Some)
    }

    /// The record of a complete summary, or why it makes none.
    fn record(self) -> Result<Record, String> {
        match self.format {
            Format::OfflineExample => {
                let drafts = self.need_count("num_drafts")?;
                let drafted = self.need_count("num_draft_tokens")?;
                let accepted = self.need_count("num_accepted_tokens")?;
                let mal = self.need("mean acceptance length")?;
                Ok(self.summary_record(drafts, drafted, accepted, mal, 100))
            }
            Format::OfflineNoDrafts => Ok(Record::Means(
                Format::OfflineNoDrafts,
                Means::Rates {
                    mal: self.need("mean acceptance length")?,
                    rates: self.rates,
                },
            )),
            Format::OfflineStatsBlock => Ok(Record::Means(
                Format::OfflineStatsBlock,
                Means::Tokens {
                    drafts: Some(self.need_count("Number of drafts")?),
                    drafted: self.need_count("Draft tokens generated")?,
                    accepted: self.need_count("Accepted tokens")?,
                },
            )),
            _ => self.bench_serve_record(),
        }
    }

    /// The record of `vllm bench serve`'s section, its acceptance rate
    /// checked against its counts.
    fn bench_serve_record(self) -> Result<Record, String> {
        let drafts = self.need_count("Drafts")?;
        let drafted = self.need_count("Draft tokens")?;
        let accepted = self.need_count("Accepted tokens")?;
        let mal = self.need("Acceptance length")?;
        if let Some(pct) = self.field("Acceptance rate (%)").filter(|_| drafted > 0) {
            let p = accepted as f64 / drafted as f64 * 100.0;
            if (p - pct).abs() > 0.005 + 1e-9 {
                return Err(format!(
                    "Acceptance rate (%) {pct:.2} is not Accepted tokens / Draft tokens = {p:.4}%: the section contradicts itself"
                ));
            }
        }
        Ok(self.summary_record(drafts, drafted, accepted, mal, 10_000))
    }

    /// A summary with the drafts: its counts, with its per-position rates
    /// (printed to 1 / `scale`), or its means when it prints none.
    fn summary_record(
        self,
        drafts: u64,
        drafted: u64,
        accepted: u64,
        mal: f64,
        scale: u64,
    ) -> Record {
        if self.rates.is_empty() {
            return Record::Means(
                self.format,
                Means::Tokens {
                    accepted,
                    drafted,
                    drafts: Some(drafts),
                },
            );
        }
        // The offline example prints every entry of its counts array,
        // which can be longer than the drafts. vLLM's model drafters draft
        // K tokens at every step: draft tokens exactly k per draft with
        // every rate beyond k at 0 mean K = k.
        let mut rates = self.rates;
        let mut beyond = 0;
        if self.format == Format::OfflineExample && drafts > 0 && drafted % drafts == 0 {
            let k = usize::try_from(drafted / drafts).unwrap_or(usize::MAX);
            if k > 0 && k < rates.len() && rates[k..].iter().all(|&r| r == 0.0) {
                beyond = rates.len() - k;
                rates.truncate(k);
            }
        }
        Record::Counts(Line {
            format: self.format,
            drafts: Some(drafts),
            mean_acceptance_length: mal,
            accepted,
            drafted,
            rates,
            scale,
            throughput: false,
            beyond,
        })
    }

    /// The value of field `key`, which the summary must print.
    fn need(&self, key: &str) -> Result<f64, String> {
        self.field(key).ok_or_else(|| self.missing(key))
    }

    /// The count of field `key`, which the summary must print.
    fn need_count(&self, key: &str) -> Result<u64, String> {
        self.count_field(key).ok_or_else(|| self.missing(key))
    }

    /// The error for a missing field `key`.
    fn missing(&self, key: &str) -> String {
        let what = match self.format {
            Format::BenchServe => "vllm bench serve section",
            _ => "summary",
        };
        format!("this {what} has no {key:?} line")
    }
}

/// A percentage `{:.2f}` in `[0, 100]`, as a rate.
fn percent(value: &str) -> Result<f64, String> {
    let ok = value.len() >= 4
        && value.as_bytes()[value.len() - 3] == b'.'
        && value.bytes().filter(|&b| b == b'.').count() == 1
        && value.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    ok.then(|| value.parse::<f64>().ok())
        .flatten()
        .filter(|v| (0.0..=100.0).contains(v))
        .map(|v| v / 100.0)
        .ok_or_else(|| {
            format!(
                "{} is not a percentage printed to 2 decimals",
                excerpt(value)
            )
        })
}
