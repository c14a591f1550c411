//! Adds a log's records up, one family of formats per file: the counts,
//! the engines pooled, the notes on how precise the reconstruction is,
//! and what means-only records identify.

use std::collections::{BTreeMap, BTreeSet};

use specdec_metrics::{CounterSeries, EngineCounters, VLLM_METRIC_PREFIX};

use crate::counters::Built;
use crate::error::{Error, Message, Setting, SourceError};
use crate::schema::{Engine, Families};
use crate::text::{excerpt, group_digits};
use crate::{Counted, Group, Reconstruction, message};

use super::reconstruct::{Refusal, reconstruct};
use super::summary::Block;
use super::{Format, Line, MARKER, MAX_PROCESSES, Means, Record, V0_MARKER};

/// Adds records up, one family of formats per file.
pub(super) struct Accumulator<'a> {
    name: &'a str,
    /// The first record's format and line.
    first: Option<(Format, u64)>,
    formats: BTreeSet<Format>,
    rates_first_with_throughput: bool,
    k: Option<usize>,
    drafts: u64,
    drafted: u64,
    accepted: u64,
    per_pos: Vec<u64>,
    rec: Reconstruction,
    /// The coarsest rates read (the smallest scale).
    coarsest: u64,
    drafts_printed: bool,
    /// `(process tag, engine)` of the interval lines.
    processes: BTreeSet<(String, String)>,
    /// The engine each process printed a line for last.
    last_engine: BTreeMap<String, String>,
    means: Vec<(u64, Means)>,
    /// `(K, positions printed)` of summaries printing more positions than
    /// they drafted.
    beyond: Option<(usize, usize)>,
}

impl<'a> Accumulator<'a> {
    pub(super) fn new(name: &'a str) -> Self {
        Self {
            name,
            first: None,
            formats: BTreeSet::new(),
            rates_first_with_throughput: false,
            k: None,
            drafts: 0,
            drafted: 0,
            accepted: 0,
            per_pos: Vec::new(),
            rec: Reconstruction {
                lines: 0,
                summaries: 0,
                lines_without_drafts: 0,
                max_count_error: 0,
                max_rate_error: 0.0,
                intervals_exclude_reconstruction_error: true,
                formats: Vec::new(),
            },
            coarsest: u64::MAX,
            drafts_printed: false,
            processes: BTreeSet::new(),
            last_engine: BTreeMap::new(),
            means: Vec::new(),
            beyond: None,
        }
    }

    /// The error for line `number`, quoting it.
    pub(super) fn refuse(&self, number: u64, text: &str, msg: String) -> Error {
        Error::new(self.at_line(number, text, msg))
    }

    /// `msg` about line `number`, quoting it.
    fn at_line(&self, number: u64, text: &str, msg: String) -> String {
        format!(
            "{}: line {number}: {msg} (the line: {})",
            self.name,
            excerpt(text.trim())
        )
    }

    /// Remembers which engine a line came from: the process, as vLLM's
    /// multiprocess logging tags it (`(APIServer pid=1)`), and the engine
    /// of the `Engine 001: Avg prompt throughput` line its logger printed
    /// last in that process (`LoggingStatLogger.log` prints that line, then
    /// this one, for each engine of a data-parallel server).
    pub(super) fn note_process(&mut self, before: &str) {
        let tag = process_tag(before);
        let engine = self.last_engine.get(&tag).cloned().unwrap_or_default();
        if self.processes.len() < MAX_PROCESSES {
            self.processes.insert((tag, engine));
        }
    }

    /// Remembers the engine of an `Engine NNN: Avg prompt throughput` line.
    pub(super) fn note_engine_line(&mut self, text: &str) {
        let Some(at) = text.find("Engine ") else {
            return;
        };
        let after = &text[at + "Engine ".len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || !after[digits..].starts_with(": Avg prompt throughput") {
            return;
        }
        let tag = process_tag(&text[..at]);
        if self.last_engine.len() < MAX_PROCESSES || self.last_engine.contains_key(&tag) {
            self.last_engine
                .insert(tag, format!("Engine {}", &after[..digits]));
        }
    }

    pub(super) fn add_block(&mut self, block: Block) -> Result<(), SourceError> {
        let (start, text) = (block.start, block.first_line.clone());
        match block.finish().map_err(|m| self.refuse(start, &text, m))? {
            Some(record) => self.add(start, &text, record),
            None => Ok(()),
        }
    }

    pub(super) fn add(
        &mut self,
        number: u64,
        text: &str,
        record: Record,
    ) -> Result<(), SourceError> {
        let format = match &record {
            Record::Counts(l) => l.format,
            Record::Means(f, _) => *f,
        };
        match self.first {
            None => self.first = Some((format, number)),
            Some((f, at)) if f.family() != format.family() => {
                let msg = format!(
                    "this is {}, but line {at} is {}: a file must hold one kind of record (interval lines and the summaries of a run count the same drafts twice; different formats are different runs); advise them apart",
                    format.describe(),
                    f.describe()
                );
                return Err(self.refuse(number, text, msg).into());
            }
            Some(_) => {}
        }
        self.formats.insert(format);
        match record {
            Record::Means(_, m) => {
                self.means.push((number, m));
                Ok(())
            }
            Record::Counts(line) => self.add_counts(number, text, line),
        }
    }

    fn add_counts(&mut self, number: u64, text: &str, line: Line) -> Result<(), SourceError> {
        if line.format == Format::V1RateFirst && line.throughput {
            self.rates_first_with_throughput = true;
        }
        if line.drafts.is_some() {
            self.rec.summaries += 1;
            self.drafts_printed = true;
        } else {
            self.rec.lines += 1;
        }
        let kk = line.rates.len();
        if line.beyond > 0 {
            self.beyond = Some((kk, kk + line.beyond));
        }
        match self.k {
            None => self.k = Some(kk),
            Some(k) if k != kk => {
                let msg = format!(
                    "{kk} per-position rates, but earlier records have {k}: the file mixes runs of different num_speculative_tokens; advise them apart"
                );
                return Err(self.refuse(number, text, msg).into());
            }
            Some(_) => {}
        }
        if line.drafts == Some(0) && line.drafted > 0 {
            let msg = format!(
                "0 drafts but {} draft tokens: the summary contradicts itself",
                line.drafted
            );
            return Err(self.refuse(number, text, msg).into());
        }
        if line.drafted == 0 || line.drafts == Some(0) {
            self.rec.lines_without_drafts += 1;
            return Ok(());
        }
        let (n, counts) = reconstruct(&line).map_err(|refusal| match refusal {
            Refusal::Contradiction(msg) => self.refuse(number, text, msg).into(),
            Refusal::NotIdentified(msg) => SourceError::NotIdentified(
                msg.after(format!("{}: line {number}: ", self.name))
                    .then(format!(" (the line: {})", excerpt(text.trim()))),
            ),
        })?;
        self.drafts = self.drafts.saturating_add(n);
        self.drafted = self.drafted.saturating_add(line.drafted);
        self.accepted = self.accepted.saturating_add(line.accepted);
        self.per_pos.resize(kk, 0);
        for (total, c) in self.per_pos.iter_mut().zip(counts) {
            *total = total.saturating_add(c);
        }
        self.rec.max_count_error = self
            .rec
            .max_count_error
            .saturating_add(n.div_ceil(line.scale));
        self.coarsest = self.coarsest.min(line.scale);
        Ok(())
    }

    pub(super) fn finish(
        mut self,
        max_draft_len: Option<usize>,
    ) -> Result<(Counted, Reconstruction), Error> {
        let name = self.name;
        let Some((first, _)) = self.first else {
            return Err(Error::new(format!(
                "{name}: no line with \"{}\" or \"{}\", and no summary of vLLM's offline example or of vllm bench serve (vLLM logs one line per interval while it speculates)",
                MARKER.trim_end(),
                V0_MARKER.trim_end()
            )));
        };
        if !self.means.is_empty() {
            return Err(means_only(first, &self.means).after(format!("{name}: means only: ")));
        }
        let k = self.k.expect("a record with counts sets K");
        if let Some(given) = max_draft_len.filter(|&g| g != k) {
            return Err(message![
                format!("{name}: the records have {k} per-position rates (K = {k}) but "),
                Setting::MaxDraftLen,
                format!(" is {given}"),
            ]);
        }
        self.rec.max_rate_error = if self.drafts > 0 {
            self.rec.max_count_error as f64 / self.drafts as f64
        } else {
            0.0
        };
        self.rec.formats = self.formats.iter().copied().collect();
        let families = Families {
            engine: Engine::Vllm,
            prefix: VLLM_METRIC_PREFIX.to_owned(),
        };
        let counters = self.counters(k)?;
        let notes = self.notes();
        Ok((
            Counted {
                source: name.to_owned(),
                families,
                groups: vec![Group {
                    label: None,
                    built: Built { counters, notes },
                }],
            },
            self.rec,
        ))
    }

    /// The counters the records add up to, `K = k`; an error names the
    /// counts as the log prints them.
    fn counters(&mut self, k: usize) -> Result<EngineCounters, Error> {
        let name = self.name;
        let printed = self.drafts_printed;
        let series = |s: CounterSeries| match s {
            CounterSeries::Drafts if printed => "the drafts printed".to_owned(),
            CounterSeries::Drafts => "drafts (Drafted / K)".to_owned(),
            CounterSeries::DraftTokens => "Drafted".to_owned(),
            CounterSeries::AcceptedTokens => "Accepted".to_owned(),
            CounterSeries::AcceptedPerPos { position } => {
                format!("per-position acceptance rate {}", position + 1)
            }
            other => other.to_string(),
        };
        let per_pos = std::mem::take(&mut self.per_pos);
        EngineCounters::new(k, self.drafts, self.drafted, self.accepted, per_pos)
            .map_err(|e| Error::new(format!("{name}: {}", e.to_string_with(series))))
    }

    /// What the records were read as, how precise the reconstruction is,
    /// and the engines pooled.
    fn notes(&self) -> Vec<Message> {
        let printed = self.drafts_printed;
        let mut notes: Vec<String> = self
            .formats
            .iter()
            .map(|f| {
                let mut s = format!("read as {}", f.describe());
                if *f == Format::V1RateFirst && self.rates_first_with_throughput {
                    s.push_str(
                        "; with the throughput fields, as PR #24127's test output prints it (its writer code was not read)",
                    );
                }
                s
            })
            .collect();
        let decimals = self.coarsest.max(1).ilog10();
        let how = if printed {
            "drafts as printed"
        } else {
            "drafts = Drafted / K, checked against each line's mean acceptance length"
        };
        let records = match (self.rec.lines, self.rec.summaries) {
            (l, 0) => plural(l, "log line"),
            (0, s) => plural(s, "summary"),
            (l, s) => format!("{} and {}", plural(l, "log line"), plural(s, "summary")),
        };
        notes.push(format!(
            "reconstructed from {records} (rates printed to {decimals} decimals, {how}): every per-position count is within ±{} of the true one (±{:.5} of each rate P_i)",
            group_digits(self.rec.max_count_error),
            self.rec.max_rate_error,
        ));
        if let Some((k, printed)) = self.beyond {
            let positions = if printed == k + 1 {
                format!("position {printed}")
            } else {
                format!("positions {}-{printed}", k + 1)
            };
            notes.push(format!(
                "K = {k}: the array is longer than the drafts: {positions} never accepted a token and the draft tokens are exactly {k} per draft (vLLM's model drafters draft K tokens at every step)"
            ));
        }
        notes.extend(self.pooled_note());
        notes.into_iter().map(Message::new).collect()
    }

    /// The note on the engines whose lines were pooled, when there are
    /// several.
    fn pooled_note(&self) -> Option<String> {
        if self.processes.len() > 1 {
            let shown: Vec<String> = self
                .processes
                .iter()
                .take(4)
                .map(|(tag, engine)| match (tag.is_empty(), engine.is_empty()) {
                    (false, false) => format!("{tag} {engine}"),
                    (false, true) => tag.clone(),
                    (true, false) => engine.clone(),
                    (true, true) => "untagged".to_owned(),
                })
                .collect();
            return Some(format!(
                "lines of {} engines pooled ({}{}): each line is one logging interval of one engine, so they add up",
                self.processes.len(),
                shown.join(", "),
                if self.processes.len() > 4 {
                    ", ..."
                } else {
                    ""
                }
            ));
        }
        None
    }
}

/// The `(Name pid=N)` tag vLLM's multiprocess logging starts a line with,
/// or "".
fn process_tag(before: &str) -> String {
    let t = before.trim_start();
    match t.strip_prefix('(').and_then(|r| r.find(')')) {
        Some(end) if t[..end + 2].contains(" pid=") => t[..end + 2].to_owned(),
        _ => String::new(),
    }
}

fn plural(n: u64, what: &str) -> String {
    let many = match what.strip_suffix('y') {
        Some(stem) => format!("{stem}ies"),
        None => format!("{what}s"),
    };
    format!("{} {}", group_digits(n), if n == 1 { what } else { &many })
}

/// What the means-only records of `format` identify, and what is missing.
fn means_only(format: Format, means: &[(u64, Means)]) -> Message {
    let head = format!("read as {}", format.describe());
    match format {
        Format::V0Speculative => v0_totals(&head, means),
        Format::V1EarlySpeculative | Format::V1Totals => v1_tokens(&head, means),
        Format::OfflineNoDrafts => rates_without_drafts(&head, means),
        Format::OfflineExample | Format::OfflineStatsBlock | Format::BenchServe => {
            summaries_without_rates(format, &head, means)
        }
        _ => Message::new(format!("{head}: {NOTHING_PER_POSITION}")),
    }
}

/// Why means-only records give no advice.
const NOTHING_PER_POSITION: &str =
    "nothing per position is printed, so no draft length can be advised";

/// [`means_only`] of vLLM V0's lines: totals since start-up, the last of
/// each run counting.
fn v0_totals(head: &str, means: &[(u64, Means)]) -> Message {
    let advise = NOTHING_PER_POSITION;
    // Totals since start-up: a drop starts a new run.
    let mut runs: Vec<(u64, u64, u64, u64)> = Vec::new();
    let mut last: Option<(u64, u64, u64, u64)> = None;
    for (_, m) in means {
        if let Means::V0 {
            k,
            accepted,
            drafted,
            emitted,
            ..
        } = *m
        {
            if let Some(l) = last.filter(|l| l.0 != k || drafted < l.2 || emitted < l.3) {
                runs.push(l);
            }
            last = Some((k, accepted, drafted, emitted));
        }
    }
    runs.extend(last);
    let ks: BTreeSet<u64> = runs.iter().map(|r| r.0).collect();
    let (mut drafts, mut accepted, mut drafted, mut emitted) = (0u64, 0u64, 0u64, 0u64);
    for &(k, a, d, e) in &runs {
        drafts = drafts.saturating_add(d / k.max(1));
        accepted = accepted.saturating_add(a);
        drafted = drafted.saturating_add(d);
        emitted = emitted.saturating_add(e);
    }
    let k = ks.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
    let mal = if drafts > 0 {
        format!("{:.4}", emitted as f64 / drafts as f64)
    } else {
        "none (no drafts)".to_owned()
    };
    message![
        format!(
            "{head}; {} line{}, totals since start-up (the last of each of {} run{} counts): K = {k}, {} drafts (draft tokens / K), mean acceptance length {mal} (emitted tokens / drafts, exact), {} of {} draft tokens accepted anywhere in their draft (not only as a prefix); {advise}. Run the workload on vLLM V1, whose SpecDecoding metrics line prints per-position acceptance rates, or scrape its /metrics (vllm:spec_decode_num_accepted_tokens_per_pos) and use ",
            group_digits(means.len() as u64),
            if means.len() == 1 { "" } else { "s" },
            runs.len(),
            if runs.len() == 1 { "" } else { "s" },
            group_digits(drafts),
            group_digits(accepted),
            group_digits(drafted),
        ),
        Setting::Metrics,
    ]
}

/// [`means_only`] of vLLM V1's first lines: accepted and drafted tokens.
fn v1_tokens(head: &str, means: &[(u64, Means)]) -> Message {
    let advise = NOTHING_PER_POSITION;
    let (mut a, mut d) = (0u64, 0u64);
    for (_, m) in means {
        if let Means::Tokens {
            accepted, drafted, ..
        } = m
        {
            a = a.saturating_add(*accepted);
            d = d.saturating_add(*drafted);
        }
    }
    message![
        format!(
            "{head}; {} line{}: {} of {} draft tokens accepted{}; neither the drafts nor K are printed, so not even the mean acceptance length is known, and {advise}. vLLM from PR #16665 (April 2025) on prints the mean acceptance length and the per-position rates in its SpecDecoding metrics line: upgrade, or scrape /metrics and use ",
            group_digits(means.len() as u64),
            if means.len() == 1 { "" } else { "s" },
            group_digits(a),
            group_digits(d),
            if d > 0 {
                format!(" ({:.1}%)", a as f64 / d as f64 * 100.0)
            } else {
                String::new()
            },
        ),
        Setting::Metrics,
    ]
}

/// [`means_only`] of summaries with rates but not the drafts.
fn rates_without_drafts(head: &str, means: &[(u64, Means)]) -> Message {
    let shown: Vec<String> = means
        .iter()
        .filter_map(|(_, m)| match m {
            Means::Rates { mal, rates } => Some(format!(
                "mean acceptance length {mal:.2}, rates {}",
                rates
                    .iter()
                    .map(|r| format!("{r:.2}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            _ => None,
        })
        .take(3)
        .collect();
    message![
        format!(
            "{head}; {}: {}: per-position rates without the number of drafts carry no sample size, so no count and no draft length can be told. Print num_drafts, num_draft_tokens and num_accepted_tokens as vLLM's examples/offline_inference/spec_decode.py does, or read the engine's counters with ",
            plural(means.len() as u64, "summary"),
            shown.join("; ")
        ),
        Setting::Metrics,
    ]
}

/// [`means_only`] of summaries with the drafts but no per-position rates.
fn summaries_without_rates(format: Format, head: &str, means: &[(u64, Means)]) -> Message {
    let (mut n, mut a, mut d) = (0u64, 0u64, 0u64);
    for (_, m) in means {
        if let Means::Tokens {
            accepted,
            drafted,
            drafts,
        } = m
        {
            n = n.saturating_add(drafts.unwrap_or(0));
            a = a.saturating_add(*accepted);
            d = d.saturating_add(*drafted);
        }
    }
    let mal = if n > 0 {
        format!("{:.4}", 1.0 + a as f64 / n as f64)
    } else {
        "none (no drafts)".to_owned()
    };
    let msg = Message::new(format!(
        "{head}; {}: {} drafts, {} draft tokens, {} accepted: mean acceptance length {mal} (exact); the per-position rates are missing, so no draft length can be advised. ",
        plural(means.len() as u64, "summary"),
        group_digits(n),
        group_digits(d),
        group_digits(a),
    ));
    if format == Format::BenchServe {
        msg.then("This vllm bench serve printed no Per-position acceptance (%) part: a version that prints it, against a server exporting vllm:spec_decode_num_accepted_tokens_per_pos, does; or scrape /metrics before and after the run and use ")
            .then(Setting::Metrics)
            .then(" FILE ")
            .then(Setting::Since)
            .then(" FILE")
    } else {
        msg.then("Print acceptance at token i as vLLM's examples/offline_inference/spec_decode.py does, or read the engine's counters with ")
            .then(Setting::Metrics)
    }
}
