//! How the samples of an engine's [families](crate::schema::Families)
//! become the library's [`EngineCounters`]: each sample a count
//! ([`count`]), the counts summed per group ([`group`]), a group's counts
//! checked and built, with notes of what was assumed ([`build`]).

use std::collections::{BTreeMap, BTreeSet};

use specdec_metrics::{CounterSeries, EngineCounters, MAX_MAX_DRAFT_LEN};

use crate::error::{Error, Message, Setting};
use crate::exposition::{Sample, series_name};
use crate::message;
use crate::schema::{Families, KFrom};
use crate::text::excerpt;

/// How sample values become counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Values {
    /// Counters as an engine exports them: whole numbers `>= 0`; anything
    /// else is an error naming the series.
    Exact,
    /// Prometheus' `increase()`: extrapolated, so fractional; rounded to
    /// the nearest count (still finite and `>= 0`).
    Extrapolated,
}

/// A count from a sample value, or an error naming the series.
pub fn count(sample: &Sample, values: Values) -> Result<u64, Error> {
    let v = sample.value;
    let series = || series_name(&sample.name, &sample.labels);
    let shown = value_text(v);
    if !v.is_finite() || v < 0.0 {
        return Err(Error::new(format!(
            "{} is {shown}: a counter is a finite number >= 0",
            series()
        )));
    }
    let v = match values {
        Values::Exact if v.fract() != 0.0 => {
            return Err(Error::new(format!(
                "{} is {shown}: a count is a whole number",
                series()
            )));
        }
        Values::Exact => v,
        Values::Extrapolated => v.round(),
    };
    if v >= 18_446_744_073_709_551_616.0 {
        return Err(Error::new(format!(
            "{} is {shown}: above the largest count, 18446744073709551615 (2^64 - 1); an exposition's values are 64-bit floats, in which that count itself reads as 2^64 = 1.8446744073709552e19, one past it (and a count above 2^53 is no longer exact)",
            series()
        )));
    }
    Ok(v as u64)
}

/// A sample value for a message: as written for ordinary numbers, in
/// scientific notation from 1e16 on (never 309 digits for `1e308`).
pub fn value_text(v: f64) -> String {
    if v.is_finite() && v.abs() >= 1e16 {
        format!("{v:e}")
    } else {
        v.to_string()
    }
}

/// A series set: a family's name and its labels but the index labels.
type SeriesSet = (String, Vec<(String, String)>);

/// The counts of one group (one `by` label value), summed over the
/// group's series (engines, instances).
#[derive(Clone, Debug, Default)]
pub struct GroupCounts {
    /// Drafts.
    pub drafts: Option<u64>,
    /// Drafted tokens.
    pub draft_tokens: Option<u64>,
    /// Accepted tokens.
    pub accepted_tokens: Option<u64>,
    /// Accepted tokens by position.
    pub accepted_per_pos: BTreeMap<usize, u64>,
    /// Drafted tokens by position.
    pub draft_tokens_per_pos: BTreeMap<usize, u64>,
    /// By-draft-length buckets by `(draft_length, accepted)`.
    pub buckets: BTreeMap<(usize, usize), u64>,
    /// The positions of each label set of the per-position families (for
    /// the gap check).
    position_sets: BTreeMap<SeriesSet, BTreeSet<usize>>,
    /// The drafts of each label set of the drafts family (for the check
    /// that each has its per-position series).
    draft_sets: BTreeMap<Vec<(String, String)>, u64>,
    bucket_sets: BTreeMap<Vec<(String, String)>, usize>,
}

/// The samples of `families` grouped by the label `by` (a sample without
/// it is in the group ""), each series checked and counted. `source` names
/// the input in errors.
pub fn group(
    samples: &[Sample],
    families: &Families,
    by: &str,
    values: Values,
) -> Result<BTreeMap<String, GroupCounts>, Error> {
    let mut groups: BTreeMap<String, GroupCounts> = BTreeMap::new();
    let (drafts, tokens, accepted, per_pos) = (
        families.drafts(),
        families.draft_tokens(),
        families.accepted_tokens(),
        families.accepted_per_pos(),
    );
    let drafted_per_pos = families.draft_tokens_per_pos();
    let by_length = families.by_draft_length();
    let add = |slot: &mut Option<u64>, n: u64, s: &Sample| -> Result<(), Error> {
        *slot = Some(checked_sum(slot.unwrap_or(0), n, s)?);
        Ok(())
    };
    for s in samples {
        let name = s.name.as_str();
        let known = [&drafts, &tokens, &accepted, &per_pos].contains(&&s.name)
            || drafted_per_pos.as_deref() == Some(name)
            || by_length.as_deref() == Some(name);
        if !known {
            continue;
        }
        let n = count(s, values)?;
        let g = groups
            .entry(s.label(by).unwrap_or("").to_owned())
            .or_default();
        let rest = |skip: &[&str]| -> Vec<(String, String)> {
            let mut v: Vec<(String, String)> = s
                .labels
                .iter()
                .filter(|(l, _)| !skip.contains(&l.as_str()))
                .cloned()
                .collect();
            v.sort();
            v
        };
        if *name == per_pos || drafted_per_pos.as_deref() == Some(name) {
            let label = families.position_label();
            let position = index_label(s, label)?;
            let map = if *name == per_pos {
                &mut g.accepted_per_pos
            } else {
                &mut g.draft_tokens_per_pos
            };
            let slot = map.entry(position).or_insert(0);
            *slot = checked_sum(*slot, n, s)?;
            g.position_sets
                .entry((s.name.clone(), rest(&[label])))
                .or_default()
                .insert(position);
        } else if *name == drafts {
            add(&mut g.drafts, n, s)?;
            let slot = g.draft_sets.entry(rest(&[])).or_insert(0);
            *slot = checked_sum(*slot, n, s)?;
        } else if *name == tokens {
            add(&mut g.draft_tokens, n, s)?;
        } else if *name == accepted {
            add(&mut g.accepted_tokens, n, s)?;
        } else {
            let k = index_label(s, "draft_length")?;
            let a = index_label(s, "accepted")?;
            let slot = g.buckets.entry((k, a)).or_insert(0);
            *slot = checked_sum(*slot, n, s)?;
            *g.bucket_sets
                .entry(rest(&["draft_length", "accepted"]))
                .or_default() += 1;
        }
    }
    Ok(groups)
}

/// Where every position is exported from start-up (vLLM, this crate), a
/// label set of the drafts family with drafts but no per-position series,
/// or per-position series without drafts, is a cut or partial scrape
/// (HTTP/1.0 close-delimited bodies, partial copies): reading it would
/// count one engine's drafts as trials without their acceptances.
fn check_every_label_set_has_positions(families: &Families, g: &GroupCounts) -> Result<(), Error> {
    let per_pos = families.accepted_per_pos();
    let positioned = |labels: &Vec<(String, String)>| {
        g.position_sets
            .contains_key(&(per_pos.clone(), labels.clone()))
    };
    let cut = "the scrape is cut or partial (an HTTP/1.0 body closed early, a partial copy)";
    if let Some((labels, n)) = g
        .draft_sets
        .iter()
        .find(|(labels, n)| **n > 0 && !positioned(labels))
    {
        let mut at0 = labels.clone();
        at0.push(("position".into(), "0".into()));
        return Err(Error::new(format!(
            "{} is missing, though {} is {n}: {} exports every position from start-up, so {cut}",
            series_name(&per_pos, &at0),
            series_name(&families.drafts(), labels),
            families.engine.name()
        )));
    }
    if let Some(((_, labels), _)) = g
        .position_sets
        .iter()
        .find(|((name, labels), _)| *name == per_pos && !g.draft_sets.contains_key(labels))
    {
        return Err(Error::new(format!(
            "{} is missing, though {} is there: {} exports both, so {cut}",
            series_name(&families.drafts(), labels),
            series_name(&per_pos, labels),
            families.engine.name()
        )));
    }
    Ok(())
}

fn checked_sum(a: u64, b: u64, s: &Sample) -> Result<u64, Error> {
    a.checked_add(b).ok_or_else(|| {
        Error::new(format!(
            "the sum of {} and its group passes 18446744073709551615",
            series_name(&s.name, &s.labels)
        ))
    })
}

/// A label that holds an index (`position`, `draft_length`, `accepted`).
fn index_label(s: &Sample, label: &str) -> Result<usize, Error> {
    let v = s.label(label).ok_or_else(|| {
        Error::new(format!(
            "{} has no {label} label",
            series_name(&s.name, &s.labels)
        ))
    })?;
    let digits =
        !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) && (v == "0" || !v.starts_with('0'));
    if digits && v.len() > 3 {
        // An index, but past any draft: positions go up to K - 1, draft
        // lengths and accepted counts up to K.
        let max = if label == "draft_length" || label == "accepted" {
            MAX_MAX_DRAFT_LEN
        } else {
            MAX_MAX_DRAFT_LEN - 1
        };
        return Err(Error::new(format!(
            "{}: {label} {} is above {max}: draft lengths go up to {MAX_MAX_DRAFT_LEN}",
            series_name(&s.name, &s.labels),
            excerpt(v)
        )));
    }
    let canonical = digits && v.len() <= 3;
    canonical.then(|| v.parse().ok()).flatten().ok_or_else(|| {
        Error::new(format!(
            "{}: {label} {} is not an index (0, 1, 2, ...)",
            series_name(&s.name, &s.labels),
            excerpt(v)
        ))
    })
}

/// The counters of one group, ready to identify, and what was assumed to
/// build them.
#[derive(Debug)]
pub struct Built {
    /// The counters.
    pub counters: EngineCounters,
    /// What was assumed to build them.
    pub notes: Vec<Message>,
}

/// The relative slack given to Prometheus' extrapolated counts, with
/// [`EXTRAPOLATION_SLACK_COUNTS`]: see [`build`].
pub const EXTRAPOLATION_SLACK: f64 = 0.01;
/// The absolute slack (counts) given to extrapolated counts.
pub const EXTRAPOLATION_SLACK_COUNTS: u64 = 2;

fn slack(x: u64) -> u64 {
    EXTRAPOLATION_SLACK_COUNTS.max((x as f64 * EXTRAPOLATION_SLACK).ceil() as u64)
}

/// Builds the group's [`EngineCounters`].
///
/// `K` is the number of positions (vLLM, this crate; every position must
/// be there, `0..K` without a gap, in every label set), the drafted tokens
/// over the drafts (mistral.rs, whose positions appear lazily), or
/// `max_draft_len` when given (which the others must then agree with).
/// `group_label` is `by="value"` for the messages ("" for the group of
/// series without the label).
///
/// With [`Values::Extrapolated`] (Prometheus' `increase()`), every series
/// is extrapolated on its own, so sums that agree exactly in the engine
/// agree only roughly here. The by-draft-length family then gives every
/// other figure (its own totals, consistent by construction); without it,
/// drafted tokens within [`EXTRAPOLATION_SLACK`] (1%, at least 2 counts)
/// of drafts × `K` count as every draft having `K` tokens, and accepted
/// counts that exceed the drafts or the position before by no more than
/// that are clipped; each such adjustment is a note.
pub fn build(
    families: &Families,
    group_label: &str,
    g: &GroupCounts,
    max_draft_len: Option<usize>,
    values: Values,
) -> Result<Built, Error> {
    let mut b = Builder {
        families,
        group_label,
        g,
        max_draft_len,
        values,
        by_length_source: values == Values::Extrapolated && families.by_draft_length().is_some(),
        notes: Vec::new(),
    };
    let (drafts, mut draft_tokens, accepted) = b.totals()?;
    let k = b.max_draft_len(drafts, &mut draft_tokens)?;
    if !(1..=specdec_metrics::MAX_MAX_DRAFT_LEN).contains(&k) {
        return Err(Error::new(format!(
            "K = {k} ({}): advice takes K in 1..=64",
            b.in_group(&families.accepted_per_pos(), "")
        )));
    }
    let mut figures = Figures {
        k,
        drafts,
        draft_tokens,
        accepted,
        per_pos: b.accepted_per_pos(k)?,
    };
    let buckets = b.buckets(&mut figures)?;
    if values == Values::Extrapolated && buckets.is_none() {
        b.within_slack(&mut figures);
    }
    b.counters(figures, buckets)
}

/// A by-draft-length bucket: `(draft_length, accepted, count)`.
type Bucket = (usize, usize, u64);

/// The figures [`EngineCounters::new`] takes, as [`build`] gathers them.
struct Figures {
    k: usize,
    drafts: u64,
    draft_tokens: u64,
    accepted: u64,
    per_pos: Vec<u64>,
}

/// One group's build: what it reads, and the notes of what it assumed.
struct Builder<'a> {
    families: &'a Families,
    group_label: &'a str,
    g: &'a GroupCounts,
    max_draft_len: Option<usize>,
    values: Values,
    /// Every figure from the by-draft-length buckets (`increase()` of this
    /// crate's families: one extrapolation, consistent).
    by_length_source: bool,
    notes: Vec<Message>,
}

impl Builder<'_> {
    /// `name{group_label,extra}` as the series is named.
    fn in_group(&self, name: &str, extra: &str) -> String {
        let group_label = self.group_label;
        match (group_label.is_empty(), extra.is_empty()) {
            (true, true) => name.to_owned(),
            (true, false) => format!("{name}{{{extra}}}"),
            (false, true) => format!("{name}{{{group_label}}}"),
            (false, false) => format!("{name}{{{group_label},{extra}}}"),
        }
    }

    fn missing(&self, name: String) -> Error {
        Error::new(format!(
            "{} is missing: {} exports it, and advice needs it",
            self.in_group(&name, ""),
            self.families.engine.name()
        ))
    }

    /// Drafts, drafted and accepted tokens.
    fn totals(&mut self) -> Result<(u64, u64, u64), Error> {
        let (families, g) = (self.families, self.g);
        if self.by_length_source {
            return Ok((0, 0, 0));
        }
        if families.has_drafts_family() {
            return Ok((
                g.drafts.ok_or_else(|| self.missing(families.drafts()))?,
                g.draft_tokens
                    .ok_or_else(|| self.missing(families.draft_tokens()))?,
                g.accepted_tokens
                    .ok_or_else(|| self.missing(families.accepted_tokens()))?,
            ));
        }
        // TensorRT-LLM: every figure from the per-position counters (the
        // iteration totals beside them count unfinished requests too).
        if g.draft_tokens_per_pos.is_empty() {
            return Err(self.missing(families.draft_tokens_per_pos().unwrap_or_default()));
        }
        // A draft that reached position i reached every position before
        // it: drafted tokens cannot rise with the position (a missing
        // position is 0). Checked first, so the error names these series.
        let highest = g.draft_tokens_per_pos.keys().max().copied().unwrap_or(0);
        let at = |p: usize| g.draft_tokens_per_pos.get(&p).copied().unwrap_or(0);
        if let Some(p) = (1..=highest).find(|&p| at(p) > at(p - 1)) {
            let name = families.draft_tokens_per_pos().unwrap_or_default();
            let label = families.position_label();
            return Err(Error::new(format!(
                "{} is {}, above the {} of {}: a draft that reached position {p} reached position {} too, so the drafted tokens cannot rise with the position",
                self.in_group(&name, &format!("{label}=\"{p}\"")),
                at(p),
                at(p - 1),
                self.in_group(&name, &format!("{label}=\"{}\"", p - 1)),
                p - 1
            )));
        }
        let sum = |m: &BTreeMap<usize, u64>| m.values().fold(0u64, |a, &n| a.saturating_add(n));
        let (d, a) = (sum(&g.draft_tokens_per_pos), sum(&g.accepted_per_pos));
        for (total, per_pos, name) in [
            (g.draft_tokens, d, families.draft_tokens()),
            (g.accepted_tokens, a, families.accepted_tokens()),
        ] {
            if let Some(total) = total.filter(|&t| t != per_pos) {
                let note = format!(
                    "{} is {total}, the per-position counters add up to {per_pos}: the total counts every iteration (enable_iter_perf_stats), the per-position counters the requests that finished with return_perf_metrics; the per-position counters are used",
                    self.in_group(&name, "")
                );
                self.notes.push(Message::new(note));
            }
        }
        Ok((g.draft_tokens_per_pos.get(&0).copied().unwrap_or(0), d, a))
    }

    /// `K`, as the engine's families tell it (see [`build`]).
    fn max_draft_len(&mut self, drafts: u64, draft_tokens: &mut u64) -> Result<usize, Error> {
        if self.by_length_source {
            return self.k_from_buckets();
        }
        match (self.families.k_from(), self.max_draft_len) {
            (KFrom::Positions, _) => self.k_from_positions(),
            (KFrom::HighestPosition, _) => self.k_from_highest_position(drafts),
            (KFrom::Drafts, Some(given)) => Ok(given),
            (KFrom::Drafts, None) => self.k_from_drafts(drafts, draft_tokens),
        }
    }

    /// From the buckets alone: the largest draft length.
    fn k_from_buckets(&self) -> Result<usize, Error> {
        let name = self.families.by_draft_length().unwrap_or_default();
        let k = self
            .g
            .buckets
            .keys()
            .map(|&(k, _)| k)
            .max()
            .ok_or_else(|| self.missing(name.clone()))?;
        if let Some(given) = self.max_draft_len.filter(|&m| m != k) {
            return Err(message![
                format!(
                    "{} has draft lengths 0..={k} (K = {k}) but ",
                    self.in_group(&name, "")
                ),
                Setting::MaxDraftLen,
                format!(" is {given}"),
            ]);
        }
        Ok(k)
    }

    /// The number of positions, every one there in every label set.
    fn k_from_positions(&self) -> Result<usize, Error> {
        let families = self.families;
        check_every_label_set_has_positions(families, self.g)?;
        let mut k = None;
        for ((name, labels), positions) in &self.g.position_sets {
            let n = positions.last().map_or(0, |&p| p + 1);
            if let Some(gap) = (0..n).find(|p| !positions.contains(p)) {
                let mut labels = labels.clone();
                labels.push(("position".into(), gap.to_string()));
                return Err(Error::new(format!(
                    "{} is missing, though position {} is there: {} exports every position from 0 to K - 1",
                    series_name(name, &labels),
                    n - 1,
                    families.engine.name()
                )));
            }
            match k {
                None => k = Some(n),
                Some(k) if k != n => {
                    return Err(message![
                        format!(
                            "{} has positions 0..{} in one series set and 0..{} in another: engines of one {} have different K; advise them apart (",
                            self.in_group(name, ""),
                            k.min(n),
                            k.max(n),
                            if self.group_label.is_empty() {
                                "group"
                            } else {
                                self.group_label
                            },
                        ),
                        Setting::By,
                        ", ",
                        Setting::Selector,
                        ")",
                    ]);
                }
                Some(_) => {}
            }
        }
        let k = k
            .filter(|&k| k > 0)
            .ok_or_else(|| self.missing(families.accepted_per_pos()))?;
        if let Some(given) = self.max_draft_len.filter(|&m| m != k) {
            return Err(message![
                format!(
                    "{} has positions 0..{} (K = {k}) but ",
                    self.in_group(&families.accepted_per_pos(), ""),
                    k - 1
                ),
                Setting::MaxDraftLen,
                format!(" is {given}"),
            ]);
        }
        Ok(k)
    }

    /// Engines whose drafts vary and whose positions appear as reached
    /// (llama.cpp, TensorRT-LLM): `max_draft_len`, else the highest
    /// position exported plus one, with a note.
    fn k_from_highest_position(&mut self, drafts: u64) -> Result<usize, Error> {
        let (families, g) = (self.families, self.g);
        let highest = g
            .accepted_per_pos
            .keys()
            .chain(g.draft_tokens_per_pos.keys())
            .max()
            .map(|&p| p + 1);
        match (self.max_draft_len, highest) {
            (Some(given), Some(h)) if h > given => Err(message![
                format!(
                    "{} exists but ",
                    self.in_group(
                        &families.accepted_per_pos(),
                        &format!("{}=\"{}\"", families.position_label(), h - 1)
                    )
                ),
                Setting::MaxDraftLen,
                format!(" is {given}"),
            ]),
            (Some(given), _) => Ok(given),
            (None, Some(h)) => {
                self.notes.push(message![
                    format!(
                        "K = {h}: the highest position exported is {}; {} creates a position's series only once it is reached, so the configured maximum may be higher (give it with ",
                        h - 1,
                        families.engine.name()
                    ),
                    Setting::MaxDraftLen,
                    ")",
                ]);
                Ok(h)
            }
            (None, None) => Err(Error::new(format!(
                "{} has no series: {} creates them with the first finished speculative request{}",
                self.in_group(&families.accepted_per_pos(), ""),
                families.engine.name(),
                if drafts > 0 {
                    format!(
                        ", yet {} is {drafts}: the scrape is cut or partial",
                        self.in_group(&families.drafts(), "")
                    )
                } else {
                    " (nothing drafted yet)".to_owned()
                }
            ))),
        }
    }

    /// mistral.rs: the drafted tokens over the drafts, which must be whole
    /// (within the extrapolation slack under `increase()`, then set so).
    fn k_from_drafts(&mut self, drafts: u64, draft_tokens: &mut u64) -> Result<usize, Error> {
        let families = self.families;
        if drafts == 0 {
            return Err(message![
                format!(
                    "{} is 0: {} does not export K, which only drafts show (drafted tokens / drafts); give ",
                    self.in_group(&families.drafts(), ""),
                    families.engine.name()
                ),
                Setting::MaxDraftLen,
                " K",
            ]);
        }
        let tokens = *draft_tokens;
        let k = (tokens as f64 / drafts as f64).round() as u64;
        let exact = tokens == drafts.saturating_mul(k);
        let close = self.values == Values::Extrapolated
            && tokens.abs_diff(drafts.saturating_mul(k)) <= slack(tokens);
        if k == 0 || !(exact || close) {
            return Err(message![
                format!(
                    "{} ({tokens}) over {} ({drafts}) is not a whole number: drafts had different lengths (mistral.rs adapts its draft depth unless --mtp-n-predict is set), and mistral.rs does not export K; give ",
                    self.in_group(&families.draft_tokens(), ""),
                    self.in_group(&families.drafts(), ""),
                ),
                Setting::MaxDraftLen,
                " K (its --mtp-n-predict, or the largest depth)",
            ]);
        }
        if !exact {
            self.notes.push(Message::new(format!(
                "K = {k} taken from drafted tokens {tokens} / drafts {drafts} within the extrapolation slack of increase()"
            )));
            *draft_tokens = drafts * k;
        }
        let k = usize::try_from(k).unwrap_or(usize::MAX);
        if let Some((&p, _)) = self
            .g
            .accepted_per_pos
            .iter()
            .next_back()
            .filter(|(p, _)| **p >= k)
        {
            return Err(message![
                format!(
                    "{} exists but K (drafted tokens / drafts) is {k}: drafts had different lengths; give ",
                    self.in_group(&families.accepted_per_pos(), &format!("position=\"{p}\""))
                ),
                Setting::MaxDraftLen,
                " K",
            ]);
        }
        Ok(k)
    }

    /// The accepted count at each position `0..k` (a missing one is 0).
    fn accepted_per_pos(&self, k: usize) -> Result<Vec<u64>, Error> {
        let g = self.g;
        if let Some((&p, _)) = g
            .accepted_per_pos
            .iter()
            .next_back()
            .filter(|(p, _)| **p >= k)
        {
            return Err(Error::new(format!(
                "{} exists but K is {k}",
                self.in_group(
                    &self.families.accepted_per_pos(),
                    &format!("position=\"{p}\"")
                )
            )));
        }
        Ok((0..k)
            .map(|p| g.accepted_per_pos.get(&p).copied().unwrap_or(0))
            .collect())
    }

    /// This crate's by-draft-length buckets, checked whole; the figures
    /// from them alone when they are the source.
    fn buckets(&self, f: &mut Figures) -> Result<Option<Vec<Bucket>>, Error> {
        let Some(name) = self.families.by_draft_length() else {
            return Ok(None);
        };
        let buckets: Vec<(usize, usize, u64)> = self
            .g
            .buckets
            .iter()
            .map(|(&(k, a), &n)| (k, a, n))
            .collect();
        if buckets.is_empty() {
            return Err(self.missing(name));
        }
        let k = f.k;
        let triangle = (k + 1) * (k + 2) / 2;
        if let Some((labels, &n)) = self.g.bucket_sets.iter().find(|(_, n)| **n != triangle) {
            return Err(Error::new(format!(
                "{} has {n} buckets but K = {k} has {triangle} (every accepted <= draft_length <= K): this crate exports every bucket",
                series_name(&name, labels)
            )));
        }
        if self.by_length_source {
            f.per_pos = vec![0; k];
            for &(kk, a, n) in &buckets {
                f.drafts = f.drafts.saturating_add(n);
                f.draft_tokens = f.draft_tokens.saturating_add(n.saturating_mul(kk as u64));
                f.accepted = f.accepted.saturating_add(n.saturating_mul(a as u64));
                for p in f.per_pos.iter_mut().take(a) {
                    *p = p.saturating_add(n);
                }
            }
        }
        Ok(Some(buckets))
    }

    /// Under `increase()` without buckets: figures within the
    /// extrapolation slack of agreeing are made to agree, each with a note.
    fn within_slack(&mut self, f: &mut Figures) {
        let full = f.drafts.saturating_mul(f.k as u64);
        if f.draft_tokens != full && f.draft_tokens.abs_diff(full) <= slack(full) {
            self.notes.push(Message::new(format!(
                "drafted tokens {} are within the extrapolation slack of increase() (1%) of drafts × K = {full}: every draft is taken to have had K = {} tokens",
                f.draft_tokens, f.k
            )));
            f.draft_tokens = full;
        }
        let mut bound = f.drafts;
        for (p, v) in f.per_pos.iter_mut().enumerate() {
            if *v > bound && *v - bound <= slack(bound) {
                self.notes.push(Message::new(format!(
                    "accepted at position {p} ({v}) clipped to {bound} (within the extrapolation slack of increase())"
                )));
                *v = bound;
            }
            bound = *v;
        }
        let sum = f.per_pos.iter().fold(0u64, |a, &n| a.saturating_add(n));
        if f.accepted != sum && f.accepted.abs_diff(sum) <= slack(sum) {
            self.notes.push(Message::new(format!(
                "accepted tokens {} taken as the sum of the accepted counts per position, {sum} (within the extrapolation slack of increase())",
                f.accepted
            )));
            f.accepted = sum;
        }
        f.accepted = f.accepted.min(f.draft_tokens);
    }

    /// The series an error of the library's names, as the engine names it.
    fn name_series(&self, s: CounterSeries) -> String {
        let families = self.families;
        let at = |position: usize| format!("{}=\"{position}\"", families.position_label());
        match s {
            CounterSeries::Drafts => self.in_group(&families.drafts(), ""),
            CounterSeries::DraftTokens => self.in_group(&families.draft_tokens(), ""),
            CounterSeries::AcceptedTokens => self.in_group(&families.accepted_tokens(), ""),
            CounterSeries::AcceptedPerPos { position } => {
                self.in_group(&families.accepted_per_pos(), &at(position))
            }
            CounterSeries::DraftTokensPerPos { position } => self.in_group(
                &families.draft_tokens_per_pos().unwrap_or_default(),
                &at(position),
            ),
            _ => self.in_group(&families.by_draft_length().unwrap_or_default(), ""),
        }
    }

    /// The library's counters from the figures, the drafted counts per
    /// position and the buckets where the engine exports them.
    fn counters(self, f: Figures, buckets: Option<Vec<Bucket>>) -> Result<Built, Error> {
        let g = self.g;
        let k = f.k;
        let fail = |e: specdec_metrics::EngineCountersError| {
            Error::new(e.to_string_with(|s| self.name_series(s)))
        };
        let mut counters = EngineCounters::new(k, f.drafts, f.draft_tokens, f.accepted, f.per_pos)
            .map_err(fail)?;
        if !self.by_length_source && !g.draft_tokens_per_pos.is_empty() {
            if let Some((&p, _)) = g
                .draft_tokens_per_pos
                .iter()
                .next_back()
                .filter(|(p, _)| **p >= k)
            {
                return Err(Error::new(format!(
                    "{} exists but K is {k}",
                    self.in_group(
                        &self.families.draft_tokens_per_pos().unwrap_or_default(),
                        &format!("{}=\"{p}\"", self.families.position_label())
                    )
                )));
            }
            let drafted: Vec<u64> = (0..k)
                .map(|p| g.draft_tokens_per_pos.get(&p).copied().unwrap_or(0))
                .collect();
            counters = counters.with_draft_tokens_per_pos(drafted).map_err(fail)?;
        }
        if let Some(buckets) = buckets {
            counters = counters
                .with_by_draft_length_buckets(buckets)
                .map_err(fail)?;
        }
        Ok(Built {
            counters,
            notes: self.notes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_whole_finite_and_not_negative() {
        let s = |v: f64| Sample {
            name: "a_total".into(),
            labels: vec![("m".into(), "x".into())],
            value: v,
        };
        assert_eq!(count(&s(3.0), Values::Exact).unwrap(), 3);
        assert_eq!(count(&s(2.6), Values::Extrapolated).unwrap(), 3);
        for (v, says) in [
            (f64::NAN, "is NaN"),
            (f64::INFINITY, "is inf"),
            (-1.0, "is -1"),
            (1.5, "a whole number"),
            (1e20, "above the largest count"),
        ] {
            let e = count(&s(v), Values::Exact).unwrap_err().to_string();
            assert!(
                e.starts_with("a_total{m=\"x\"} ") && e.contains(says),
                "{e}"
            );
        }
    }

    #[test]
    fn an_index_label_is_a_canonical_number_up_to_the_longest_draft() {
        let index = |label: &str, v: &str| {
            let s = Sample {
                name: "a_total".into(),
                labels: vec![(label.into(), v.into())],
                value: 1.0,
            };
            index_label(&s, label).map_err(|e| e.to_string())
        };
        assert_eq!(index("position", "0"), Ok(0));
        assert_eq!(index("position", "12"), Ok(12));
        assert_eq!(index("position", "100"), Ok(100));
        for v in ["", "01", "0000", "x", "-1", "1.5", "abcd", "12a4"] {
            let e = index("position", v).unwrap_err();
            assert!(e.ends_with("is not an index (0, 1, 2, ...)"), "{v:?}: {e}");
        }
        // Past any draft: positions go up to K - 1, lengths up to K.
        let max = MAX_MAX_DRAFT_LEN;
        let above = |label: &str, top: usize| {
            format!(
                "a_total{{{label}=\"100000\"}}: {label} \"100000\" is above {top}: draft lengths go up to {max}"
            )
        };
        assert_eq!(index("position", "100000"), Err(above("position", max - 1)));
        assert_eq!(
            index("draft_length", "100000"),
            Err(above("draft_length", max))
        );
        assert_eq!(index("accepted", "100000"), Err(above("accepted", max)));
        assert!(index("position", "1000").unwrap_err().contains("is above"));
        let s = Sample {
            name: "a_total".into(),
            labels: vec![("m".into(), "x".into())],
            value: 1.0,
        };
        let e = index_label(&s, "position").unwrap_err().to_string();
        assert_eq!(e, "a_total{m=\"x\"} has no position label");
    }
}
