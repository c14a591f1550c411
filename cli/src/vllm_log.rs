//! `advise --vllm-log FILE|-`: the counts behind what vLLM prints about
//! speculative decoding, in every format it has printed, each read from
//! the code that writes it. A file holds records of one format (the two
//! `SpecDecoding metrics` line formats that carry per-position rates may
//! share one, as a log that spans an upgrade does); each record is told
//! apart by its own words.
//!
//! # Interval lines, reconstructed
//!
//! **The current line** (`Format::V1Current`), written by
//! `SpecDecodingLogging.log` in `vllm/v1/spec_decode/metrics.py` (read at
//! vllm-project/vllm ee4ceaae5953d367d8edd2132fd86d6c42506e1e and
//! 016a8587edb04ae53c913a1da9355a07dc0ca4ae):
//!
//! ```text
//! SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f tokens/s,
//! Drafted throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d tokens,
//! Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%
//! ```
//!
//! vllm-ascend prints no line of its own: its scheduler fills vLLM's
//! `SpecDecodingStats` (`vllm_ascend/core/recompute_scheduler.py`) and
//! vLLM's logger prints them, so its logs hold this same line (checked on
//! vllm-project/vllm-ascend's history to
//! 182b75ea84ff13ece27b57391331ef8935410aea: `git log -S` finds no
//! `SpecDecoding metrics`, `SpecDecodingLogging` or `Draft acceptance
//! rate` in `vllm_ascend/` or `examples/`).
//!
//! **The rate-first line** (`Format::V1RateFirst`), the same writer from
//! vllm-project/vllm PR #16665 (April 2025, which added the drafts and the
//! per-position counts) until the order above; the version read is the
//! file of the code index whose `SpecDecodingLogging.log` prints
//!
//! ```text
//! SpecDecoding metrics: Draft acceptance rate: %.1f%%, Mean acceptance length: %.2f,
//! Accepted: %d tokens, Drafted: %d tokens, Per-position acceptance rate: %s
//! ```
//!
//! (its commit is not named by the index). PR #24127 (September 2025,
//! "update spec decode metrics to use throughput") shows, in its test
//! output, this order with `Accepted throughput: %.2f tokens/s, Drafted
//! throughput: %.2f tokens/s, ` after the mean acceptance length; its
//! writer code was not among what could be read here, so that variant is
//! read on the word of that output, and a note says so.
//!
//! In both, the per-position rates are `f"{p:.3f}"` joined by `", "`, each
//! the accepted count at that position over the interval's drafts. Each
//! line covers one logging interval of one engine (the logger resets after
//! it), so the file's lines add up, whatever engines interleave them: a
//! data-parallel server's `LoggingStatLogger` prints, per engine, its
//! `Engine 001: Avg prompt throughput ...` line and then this one (or one
//! line for all engines, `AggregatedLoggingStatLogger`), and the logs of
//! several servers may be put together (`(APIServer pid=N)` tells them
//! apart). A note counts the engines pooled, by process tag and the
//! engine line before. vLLM itself prints none of these lines with
//! `--api-server-count` above 1 (`StatLoggerManager` in
//! `vllm/v1/metrics/loggers.py`: "disabling stats logging to avoid
//! incomplete stats"), so no two API servers print the same engine's
//! window. A file must hold one `K`. Whatever precedes the marker on a line
//! (time, level, logger, process) is ignored, and so are colour codes (SGR
//! sequences).
//!
//! The lines do not print the number of drafts. With `K` the number of
//! rates, a line is reconstructed as if every draft had `K` tokens: drafts
//! `N = Drafted / K`, which must be whole, and `1 + Accepted / N` must be
//! the printed mean acceptance length to within its rounding (±0.005);
//! otherwise the drafts had different lengths and the counts cannot be
//! told (exit status 3). The accepted count at position `i` is `r_i N`
//! rounded, kept within the rounding of `r_i` (±0.0005 N) and adjusted
//! there so that the positions add up to the printed `Accepted` exactly
//! and never grow with the position. The true count and the
//! reconstructed one both lie in that rounding window, 0.001 N wide: each
//! count is within ±0.001 N of the true one per line, each `P_i` within
//! ±0.001 over the whole log (reported, with the lines read).
//!
//! # Summaries with the drafts: drafts exact, positions reconstructed
//!
//! **vLLM's offline example** (`Format::OfflineExample`),
//! `examples/offline_inference/spec_decode.py` (read at vllm-project/vllm
//! eb987dffa144e73e064c00de74f60f54da54ff99), prints after its run, from
//! `LLM.get_metrics()`:
//!
//! ```text
//! num_drafts: {num_drafts}
//! num_draft_tokens: {num_draft_tokens}
//! num_accepted_tokens: {num_accepted_tokens}
//! mean acceptance length: {acceptance_length:.2f}
//! acceptance at token {i}: {acceptance_counts[i] / num_drafts:.2f}
//! ```
//!
//! (with `total_num_output_tokens: ...` and rules of `-` around, ignored).
//! The drafts are printed, so they are exact; the rates have 2 decimals,
//! so each count is reconstructed within ±0.01 N.
//!
//! **`vllm bench serve`'s speculative section** (`Format::BenchServe`),
//! `vllm/benchmarks/serve.py` (the section is absent at vllm-project/vllm
//! def9ce85ba1079af970a58ed3d42dd861ae35d58; read in the later versions of
//! the code index, commit not named):
//!
//! ```text
//! ---------------Speculative Decoding---------------
//! Acceptance rate (%):                     {:<10.2f}
//! Acceptance length:                       {:<10.2f}
//! Drafts:                                  {:<10}
//! Draft tokens:                            {:<10}
//! Accepted tokens:                         {:<10}
//! Per-position acceptance (%):
//!   Position {i}:                          {rate * 100:<10.2f}
//! ```
//!
//! (the per-position part only when the server's counters give it). Rates
//! are percentages to 2 decimals: counts within ±0.0001 N.
//!
//! A summary covers one run; several summaries in one file are several
//! runs, and add up. When `Drafted` is not drafts × `K` the drafts had
//! different lengths and the counts give bounds (exit status 3), as
//! vLLM's counters do.
//!
//! # Means only (exit status 2, with what they identify)
//!
//! - **vLLM V0's line** (`Format::V0Speculative`),
//!   `LoggingStatLogger._format_spec_decode_metrics_str` in
//!   `vllm/engine/metrics.py` (read at vllm-project/vllm
//!   f0afa0c28a3160de7a2ece6eeda2afc8abba8b39), from
//!   `SpecDecodeWorkerMetrics` (`vllm/spec_decode/metrics.py` at
//!   027b4855494f178fa4745d3e84fed815b7b935a8): `Speculative metrics: Draft
//!   acceptance rate: {:.3f}, System efficiency: {:.3f}, Number of
//!   speculative tokens: {k}, Number of accepted tokens: {}, Number of draft
//!   tokens: {}, Number of emitted tokens: {}.` Its counts are the
//!   sampler's totals since start-up (each line repeats and extends the one
//!   before; a drop is a restart). They identify `K`, the drafts (draft
//!   tokens / `K`, which vLLM asserts whole), the mean acceptance length
//!   (emitted / drafts, exactly: each draft emits its accepted prefix and
//!   one more token; checked against the printed system efficiency) and
//!   the share of draft tokens accepted anywhere (not only as a prefix);
//!   nothing per position.
//! - **vLLM V1's first lines**: `Speculative metrics: Draft acceptance
//!   rate: %.3f, Number of accepted tokens: %d, Number of draft tokens: %d, `
//!   (`Format::V1EarlySpeculative`, V1 before PR #15902 of April 2025, as
//!   that PR quotes it) and then `SpecDecoding metrics: Draft acceptance
//!   rate: %.1f%%, Accepted: %d tokens, Drafted: %d tokens`
//!   (`Format::V1Totals`, `SpecDecodingMetrics.log` in
//!   `vllm/v1/spec_decode/metrics.py` until PR #16665; the logger at
//!   vllm-project/vllm a6f0308cfe806b7731ad4979c9bea6e470c35efd calls it).
//!   Per interval, they add up to the share of draft tokens accepted:
//!   neither the drafts nor `K` are printed, not even the mean acceptance
//!   length is known.
//! - **vllm-ascend's k tuner** (`Format::OfflineNoDrafts`),
//!   `examples/offline_DSD_k_tuner/generate_config.py` (vllm-project/
//!   vllm-ascend 9a52ca5fc36c1852241822863c50717bee5dc761): vLLM's offline
//!   summary without the `num_...` lines, `mean acceptance length: %.2f`
//!   and `acceptance at token {i}: %.2f`: rates without a count of drafts,
//!   so no sample size.
//! - **An offline stats block** (`Format::OfflineStatsBlock`), the variant
//!   of `examples/offline_inference/spec_decode.py` stored at
//!   vllm-project/vllm 02772aacb7f7408ae5f08a76bf66e72a33263114:
//!   `Number of drafts:`, `Draft tokens generated:`, `Draft utilization
//!   rate:`, `Accepted tokens:`, `Mean acceptance length:` (its per-position
//!   counts are computed but not printed).
//! - **`vllm bench serve`'s section without its per-position part**.
//!
//! Each says what is missing and what prints it. Any other line with one
//! of the markers, or a summary that contradicts itself, is refused with
//! its line number, an excerpt and the reason (exit status 2).

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use serde::Serialize;
use specdec_metrics::{CounterSeries, EngineCounters, VLLM_METRIC_PREFIX};

use crate::engines::{Built, Engine, Families};
use crate::error::CliError;
use crate::format::{excerpt, group_digits};
use crate::io::{input_name, is_stdin, note_reading_stdin};
use crate::source::SourceError;
use crate::sources::{Counted, Group};

/// The marker of vLLM V1's line.
const MARKER: &str = "SpecDecoding metrics: ";
/// The marker of vLLM V0's line (and of V1's first).
const V0_MARKER: &str = "Speculative metrics: ";
/// The most per-position rates a record may hold.
const MAX_POSITIONS: usize = 4096;
/// The most process tags kept for the note.
const MAX_PROCESSES: usize = 1000;

/// Which of vLLM's writers printed a record (module docs: each writer,
/// where it was read, and what it identifies).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// `SpecDecoding metrics: Mean acceptance length: ...` (today's).
    V1Current,
    /// `SpecDecoding metrics: Draft acceptance rate: ..., Mean acceptance
    /// length: ..., [throughputs, ]Accepted: ..., Per-position ...`.
    V1RateFirst,
    /// `SpecDecoding metrics: Draft acceptance rate: ..., Accepted: ...,
    /// Drafted: ...` (totals only).
    V1Totals,
    /// `Speculative metrics: Draft acceptance rate: ..., Number of accepted
    /// tokens: ..., Number of draft tokens: ..., ` (V1's first; totals).
    V1EarlySpeculative,
    /// `Speculative metrics: ..., System efficiency: ...` (V0; cumulative).
    V0Speculative,
    /// `num_drafts: ...` (vLLM's offline example).
    OfflineExample,
    /// `mean acceptance length: ...` without `num_drafts` (vllm-ascend's
    /// k tuner).
    OfflineNoDrafts,
    /// `Number of drafts: ...` (an offline stats block).
    OfflineStatsBlock,
    /// `---Speculative Decoding---` (`vllm bench serve`).
    BenchServe,
}

impl Format {
    /// The writer, as the notes and messages name it.
    ///
    /// ```
    /// use specdec_metrics_cli::vllm_log::Format;
    ///
    /// assert!(Format::V0Speculative.describe().starts_with("vLLM V0's"));
    /// ```
    pub fn describe(self) -> &'static str {
        match self {
            Format::V1Current => {
                "vLLM's current SpecDecoding metrics line (Mean acceptance length first, with the throughputs of PR #24127, September 2025; vllm/v1/spec_decode/metrics.py; vllm-ascend prints vLLM's)"
            }
            Format::V1RateFirst => {
                "vLLM's rate-first SpecDecoding metrics line (Draft acceptance rate first; vllm/v1/spec_decode/metrics.py from PR #16665, April 2025, until the current order of late 2025)"
            }
            Format::V1Totals => {
                "vLLM V1's totals line (SpecDecoding metrics: Draft acceptance rate, Accepted, Drafted; vllm/v1/spec_decode/metrics.py from PR #15902 to PR #16665, April 2025)"
            }
            Format::V1EarlySpeculative => {
                "vLLM V1's first line (Speculative metrics: Draft acceptance rate, Number of accepted tokens, Number of draft tokens; before PR #15902, April 2025)"
            }
            Format::V0Speculative => {
                "vLLM V0's Speculative metrics line (vllm/engine/metrics.py; totals since start-up)"
            }
            Format::OfflineExample => {
                "vLLM's offline example summary (examples/offline_inference/spec_decode.py: num_drafts, num_draft_tokens, num_accepted_tokens, acceptance at token i)"
            }
            Format::OfflineNoDrafts => {
                "vllm-ascend's k tuner summary (examples/offline_DSD_k_tuner/generate_config.py: mean acceptance length, acceptance at token i, no counts)"
            }
            Format::OfflineStatsBlock => {
                "an offline Speculative Decoding Stats block (Number of drafts, Draft tokens generated, Accepted tokens, Mean acceptance length)"
            }
            Format::BenchServe => {
                "vllm bench serve's Speculative Decoding section (vllm/benchmarks/serve.py)"
            }
        }
    }

    /// Formats that may share a file: the two interval lines with rates.
    fn family(self) -> Format {
        match self {
            Format::V1RateFirst => Format::V1Current,
            f => f,
        }
    }
}

/// How precise the reconstruction is, and what was read.
#[derive(Clone, Debug, Serialize)]
pub struct Reconstruction {
    /// Interval lines read (`SpecDecoding metrics` lines with rates).
    pub lines: u64,
    /// Summaries read (offline example, `vllm bench serve`).
    pub summaries: u64,
    /// Lines or summaries with no drafted token (nothing to reconstruct).
    pub lines_without_drafts: u64,
    /// The most any reconstructed per-position count can be off by: one
    /// unit of the rates' last decimal times each record's drafts, added
    /// up.
    pub max_count_error: u64,
    /// The same, over all drafts: the precision of each `P_i`.
    pub max_rate_error: f64,
    /// Always true: the advice's intervals are the posterior's given the
    /// reconstructed counts, and leave `max_rate_error` out (the table
    /// says so, with how it compares with them).
    pub intervals_exclude_reconstruction_error: bool,
    /// The formats read, each as it is named in the notes.
    pub formats: Vec<Format>,
}

/// One record's figures, drafts printed or not.
#[derive(Debug, PartialEq)]
struct Line {
    format: Format,
    /// Printed by summaries; `None` in interval lines (`Drafted / K`).
    drafts: Option<u64>,
    mean_acceptance_length: f64,
    accepted: u64,
    drafted: u64,
    rates: Vec<f64>,
    /// 10^decimals of the rates as fractions (1000 for `%.3f`).
    scale: u64,
    /// The rate-first line with the throughput fields.
    throughput: bool,
}

/// What a record of a means-only format says.
#[derive(Debug, PartialEq)]
enum Means {
    /// V0's totals since start-up.
    V0 {
        k: u64,
        accepted: u64,
        drafted: u64,
        emitted: u64,
    },
    /// Accepted and drafted tokens of one interval (or run).
    Tokens {
        accepted: u64,
        drafted: u64,
        drafts: Option<u64>,
    },
    /// Rates without counts.
    Rates { mal: f64, rates: Vec<f64> },
}

/// A parsed record.
#[derive(Debug, PartialEq)]
enum Record {
    Counts(Line),
    Means(Format, Means),
}

/// Reads the log at `path` (`-`: standard input): its counters as one
/// group.
pub fn read(
    path: &Path,
    max_draft_len: Option<usize>,
) -> Result<(Counted, Reconstruction), SourceError> {
    let name = input_name(path);
    if is_stdin(path) {
        note_reading_stdin("vLLM's log");
        read_from(std::io::stdin().lock(), name, max_draft_len)
    } else {
        let file = std::fs::File::open(path)
            .map_err(|e| CliError::new(format!("cannot open {name}: {e}")))?;
        read_from(file, name, max_draft_len)
    }
}

/// Reads a log from `input`, called `name` in every message: what
/// [`read`] does once the input is open.
///
/// ```
/// use specdec_metrics_cli::vllm_log::read_from;
///
/// let log = "num_drafts: 1000\nnum_draft_tokens: 2000\nnum_accepted_tokens: 1100\n\
///            mean acceptance length: 2.10\nacceptance at token 0: 0.70\nacceptance at token 1: 0.40\n";
/// let (counted, rec) = read_from(log.as_bytes(), "run.txt".to_owned(), None).unwrap();
/// assert_eq!(counted.groups[0].built.counters.drafts(), 1000);
/// assert_eq!(rec.summaries, 1);
/// assert_eq!(rec.max_count_error, 10); // 2 decimals: ±0.01 × 1,000 drafts
/// ```
pub fn read_from(
    input: impl Read,
    name: String,
    max_draft_len: Option<usize>,
) -> Result<(Counted, Reconstruction), SourceError> {
    let mut reader = BufReader::new(input);
    let mut acc = Accumulator::new(&name);
    let mut block: Option<Block> = None;
    let mut buf = Vec::new();
    let mut number = 0u64;
    loop {
        buf.clear();
        // Lines are cut at 1 MiB: a log line is far shorter.
        let n = (&mut reader)
            .take(1 << 20)
            .read_until(b'\n', &mut buf)
            .map_err(|e| CliError::new(format!("{name}: read error after line {number}: {e}")))?;
        if n == 0 {
            break;
        }
        number += 1;
        let text = strip_sgr(&String::from_utf8_lossy(&buf));
        let text = text.trim_end_matches(['\n', '\r']);
        if let Some(b) = block.as_mut() {
            match b.feed(text) {
                Ok(true) => continue,
                Ok(false) => {
                    let done = block.take().expect("open block");
                    acc.add_block(done)?;
                }
                Err(msg) => return Err(acc.refuse(number, text, msg).into()),
            }
        }
        if let Some(at) = text.find(MARKER) {
            let rest = text[at + MARKER.len()..].trim_end();
            let record = parse_line(rest).map_err(|m| acc.refuse(number, &text[at..], m))?;
            acc.note_process(&text[..at]);
            acc.add(number, &text[at..], record)?;
        } else if let Some(at) = text.find(V0_MARKER) {
            let rest = text[at + V0_MARKER.len()..].trim_end();
            let record = parse_speculative(rest).map_err(|m| acc.refuse(number, &text[at..], m))?;
            acc.note_process(&text[..at]);
            acc.add(number, &text[at..], record)?;
        } else if let Some(b) = Block::start(number, text) {
            block = Some(b.map_err(|m| acc.refuse(number, text, m))?);
        } else {
            acc.note_engine_line(text);
        }
    }
    if let Some(b) = block.take() {
        acc.add_block(b)?;
    }
    Ok(acc.finish(max_draft_len)?)
}

/// Adds records up, one family of formats per file.
struct Accumulator<'a> {
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
    last_engine: std::collections::BTreeMap<String, String>,
    means: Vec<(u64, Means)>,
}

impl<'a> Accumulator<'a> {
    fn new(name: &'a str) -> Self {
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
            last_engine: std::collections::BTreeMap::new(),
            means: Vec::new(),
        }
    }

    /// The error for line `number`, quoting it.
    fn refuse(&self, number: u64, text: &str, msg: String) -> CliError {
        CliError::new(self.at_line(number, text, msg))
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
    fn note_process(&mut self, before: &str) {
        let tag = process_tag(before);
        let engine = self.last_engine.get(&tag).cloned().unwrap_or_default();
        if self.processes.len() < MAX_PROCESSES {
            self.processes.insert((tag, engine));
        }
    }

    /// Remembers the engine of an `Engine NNN: Avg prompt throughput` line.
    fn note_engine_line(&mut self, text: &str) {
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

    fn add_block(&mut self, block: Block) -> Result<(), SourceError> {
        let (start, text) = (block.start, block.first_line.clone());
        match block.finish().map_err(|m| self.refuse(start, &text, m))? {
            Some(record) => self.add(start, &text, record),
            None => Ok(()),
        }
    }

    fn add(&mut self, number: u64, text: &str, record: Record) -> Result<(), SourceError> {
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
        if line.drafted == 0 || line.drafts == Some(0) {
            self.rec.lines_without_drafts += 1;
            return Ok(());
        }
        let (n, counts) = reconstruct(&line).map_err(|refusal| match refusal {
            Refusal::Contradiction(msg) => self.refuse(number, text, msg).into(),
            Refusal::NotIdentified(msg) => {
                SourceError::NotIdentified(self.at_line(number, text, msg))
            }
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

    fn finish(
        mut self,
        max_draft_len: Option<usize>,
    ) -> Result<(Counted, Reconstruction), CliError> {
        let name = self.name;
        let Some((first, _)) = self.first else {
            return Err(CliError::new(format!(
                "{name}: no line with \"{}\" or \"{}\", and no summary of vLLM's offline example or of vllm bench serve (vLLM logs one line per interval while it speculates)",
                MARKER.trim_end(),
                V0_MARKER.trim_end()
            )));
        };
        if !self.means.is_empty() {
            return Err(CliError::new(format!(
                "{name}: means only: {}",
                means_only(first, &self.means)
            )));
        }
        let k = self.k.expect("a record with counts sets K");
        if let Some(given) = max_draft_len.filter(|&g| g != k) {
            return Err(CliError::new(format!(
                "{name}: the records have {k} per-position rates (K = {k}) but --max-draft-len is {given}"
            )));
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
    fn counters(&mut self, k: usize) -> Result<EngineCounters, CliError> {
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
            .map_err(|e| CliError::new(format!("{name}: {}", e.to_string_with(series))))
    }

    /// What the records were read as, how precise the reconstruction is,
    /// and the engines pooled.
    fn notes(&self) -> Vec<String> {
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
        notes.extend(self.pooled_note());
        notes
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
fn means_only(format: Format, means: &[(u64, Means)]) -> String {
    let head = format!("read as {}", format.describe());
    match format {
        Format::V0Speculative => v0_totals(&head, means),
        Format::V1EarlySpeculative | Format::V1Totals => v1_tokens(&head, means),
        Format::OfflineNoDrafts => rates_without_drafts(&head, means),
        Format::OfflineExample | Format::OfflineStatsBlock | Format::BenchServe => {
            summaries_without_rates(format, &head, means)
        }
        _ => format!("{head}: {NOTHING_PER_POSITION}"),
    }
}

/// Why means-only records give no advice.
const NOTHING_PER_POSITION: &str =
    "nothing per position is printed, so no draft length can be advised";

/// [`means_only`] of vLLM V0's lines: totals since start-up, the last of
/// each run counting.
fn v0_totals(head: &str, means: &[(u64, Means)]) -> String {
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
    format!(
        "{head}; {} line{}, totals since start-up (the last of each of {} run{} counts): K = {k}, {} drafts (draft tokens / K), mean acceptance length {mal} (emitted tokens / drafts, exact), {} of {} draft tokens accepted anywhere in their draft (not only as a prefix); {advise}. Run the workload on vLLM V1, whose SpecDecoding metrics line prints per-position acceptance rates, or scrape its /metrics (vllm:spec_decode_num_accepted_tokens_per_pos) and use --metrics",
        group_digits(means.len() as u64),
        if means.len() == 1 { "" } else { "s" },
        runs.len(),
        if runs.len() == 1 { "" } else { "s" },
        group_digits(drafts),
        group_digits(accepted),
        group_digits(drafted),
    )
}

/// [`means_only`] of vLLM V1's first lines: accepted and drafted tokens.
fn v1_tokens(head: &str, means: &[(u64, Means)]) -> String {
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
    format!(
        "{head}; {} line{}: {} of {} draft tokens accepted{}; neither the drafts nor K are printed, so not even the mean acceptance length is known, and {advise}. vLLM from PR #16665 (April 2025) on prints the mean acceptance length and the per-position rates in its SpecDecoding metrics line: upgrade, or scrape /metrics and use --metrics",
        group_digits(means.len() as u64),
        if means.len() == 1 { "" } else { "s" },
        group_digits(a),
        group_digits(d),
        if d > 0 {
            format!(" ({:.1}%)", a as f64 / d as f64 * 100.0)
        } else {
            String::new()
        },
    )
}

/// [`means_only`] of summaries with rates but not the drafts.
fn rates_without_drafts(head: &str, means: &[(u64, Means)]) -> String {
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
    format!(
        "{head}; {}: {}: per-position rates without the number of drafts carry no sample size, so no count and no draft length can be told. Print num_drafts, num_draft_tokens and num_accepted_tokens as vLLM's examples/offline_inference/spec_decode.py does, or read the engine's counters with --metrics",
        plural(means.len() as u64, "summary"),
        shown.join("; ")
    )
}

/// [`means_only`] of summaries with the drafts but no per-position rates.
fn summaries_without_rates(format: Format, head: &str, means: &[(u64, Means)]) -> String {
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
    let fix = if format == Format::BenchServe {
        "This vllm bench serve printed no Per-position acceptance (%) part: a version that prints it, against a server exporting vllm:spec_decode_num_accepted_tokens_per_pos, does; or scrape /metrics before and after the run and use --metrics FILE --since FILE"
    } else {
        "Print acceptance at token i as vLLM's examples/offline_inference/spec_decode.py does, or read the engine's counters with --metrics"
    };
    format!(
        "{head}; {}: {} drafts, {} draft tokens, {} accepted: mean acceptance length {mal} (exact); the per-position rates are missing, so no draft length can be advised. {fix}",
        plural(means.len() as u64, "summary"),
        group_digits(n),
        group_digits(d),
        group_digits(a),
    )
}

/// `text` without its SGR sequences (`ESC [ params m`: the colours a
/// logger or `--color` wraps a line in), which vLLM's figures never hold.
pub(crate) fn strip_sgr(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("\u{1b}[") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let params = after
            .find(|c: char| !(c.is_ascii_digit() || c == ';'))
            .unwrap_or(after.len());
        if after[params..].starts_with('m') {
            rest = &after[params + 1..];
        } else {
            // Not SGR: kept, to be reported as it is.
            out.push_str("\u{1b}[");
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// The record after `SpecDecoding metrics: `, strictly in one of vLLM's
/// orders.
fn parse_line(rest: &str) -> Result<Record, String> {
    if rest.starts_with("Mean acceptance length: ") {
        return parse_current(rest).map(Record::Counts);
    }
    let s = expect(rest, "Draft acceptance rate: ")?;
    let (_, s) = number_until(s, "%")?;
    let s = expect(s, "%, ")?;
    if let Some(s) = s.strip_prefix("Accepted: ") {
        let (accepted, s) = count_until(s, " tokens")?;
        let s = expect(s, " tokens, Drafted: ")?;
        let (drafted, s) = count_until(s, " tokens")?;
        if s != " tokens" {
            return Err(format!(
                "{} after the drafted tokens: not one of vLLM's SpecDecoding metrics lines",
                excerpt(s)
            ));
        }
        return Ok(Record::Means(
            Format::V1Totals,
            Means::Tokens {
                accepted,
                drafted,
                drafts: None,
            },
        ));
    }
    let s = expect(s, "Mean acceptance length: ")?;
    let (mal, mut s) = number_until(s, ", ")?;
    let throughput = s.starts_with(", Accepted throughput: ");
    if let Some(r) = s.strip_prefix(", Accepted throughput: ") {
        let (_, r) = number_until(r, " tokens/s")?;
        let r = expect(r, " tokens/s, Drafted throughput: ")?;
        let (_, r) = number_until(r, " tokens/s")?;
        s = expect(r, " tokens/s")?;
    }
    let s = expect(s, ", Accepted: ")?;
    let (accepted, s) = count_until(s, " tokens")?;
    let s = expect(s, " tokens, Drafted: ")?;
    let (drafted, s) = count_until(s, " tokens")?;
    let s = expect(s, " tokens, Per-position acceptance rate: ")?;
    let rates = rates(s, 3)?;
    Ok(Record::Counts(Line {
        format: Format::V1RateFirst,
        drafts: None,
        mean_acceptance_length: mal,
        accepted,
        drafted,
        rates,
        scale: 1000,
        throughput,
    }))
}

/// The current order (module docs).
fn parse_current(rest: &str) -> Result<Line, String> {
    let mut s = rest;
    s = expect(s, "Mean acceptance length: ")?;
    let (mal, r) = number_until(s, ", ")?;
    s = r;
    s = expect(s, ", Accepted throughput: ")?;
    let (_, r) = number_until(s, " tokens/s")?;
    s = r;
    s = expect(s, " tokens/s, Drafted throughput: ")?;
    let (_, r) = number_until(s, " tokens/s")?;
    s = r;
    s = expect(s, " tokens/s, Accepted: ")?;
    let (accepted, r) = count_until(s, " tokens")?;
    s = r;
    s = expect(s, " tokens, Drafted: ")?;
    let (drafted, r) = count_until(s, " tokens")?;
    s = r;
    s = expect(s, " tokens, Per-position acceptance rate: ")?;
    let end = s.find(", Avg Draft acceptance rate: ").ok_or_else(|| {
        "no \"Avg Draft acceptance rate\" after the per-position rates".to_owned()
    })?;
    let rates = rates(&s[..end], 3)?;
    s = &s[end..];
    s = expect(s, ", Avg Draft acceptance rate: ")?;
    let pct = s
        .strip_suffix('%')
        .ok_or_else(|| format!("{} does not end in %", excerpt(s)))?;
    if pct != "nan" {
        pct.parse::<f64>()
            .map_err(|_| format!("{} is not a percentage", excerpt(pct)))?;
    }
    Ok(Line {
        format: Format::V1Current,
        drafts: None,
        mean_acceptance_length: mal,
        accepted,
        drafted,
        rates,
        scale: 1000,
        throughput: true,
    })
}

/// The record after `Speculative metrics: ` (V0's, or V1's first).
fn parse_speculative(rest: &str) -> Result<Record, String> {
    let s = expect(rest, "Draft acceptance rate: ")?;
    let (_, s) = number_until(s, ", ")?;
    if let Some(s) = s.strip_prefix(", System efficiency: ") {
        let (efficiency, s) = number_until(s, ", ")?;
        let s = expect(s, ", Number of speculative tokens: ")?;
        let (k, s) = count_until(s, ", ")?;
        let s = expect(s, ", Number of accepted tokens: ")?;
        let (accepted, s) = count_until(s, ", ")?;
        let s = expect(s, ", Number of draft tokens: ")?;
        let (drafted, s) = count_until(s, ", ")?;
        let s = expect(s, ", Number of emitted tokens: ")?;
        let (emitted, s) = count_until(s, ".")?;
        if s != "." {
            return Err(format!(
                "{} after the emitted tokens: not vLLM V0's Speculative metrics line",
                excerpt(s)
            ));
        }
        if k == 0 {
            return Err("Number of speculative tokens is 0".to_owned());
        }
        if drafted % k != 0 {
            return Err(format!(
                "Number of draft tokens {drafted} is not a multiple of the {k} speculative tokens (vLLM V0 asserts it is)"
            ));
        }
        let drafts = drafted / k;
        if accepted > drafted
            || emitted > drafts.saturating_mul(k.saturating_add(1))
            || emitted < drafts
        {
            return Err(format!(
                "{accepted} accepted and {emitted} emitted tokens cannot come from {drafts} drafts of {k}"
            ));
        }
        if !efficiency.is_nan() && drafts > 0 {
            let e = emitted as f64 / (drafts as f64 * (k as f64 + 1.0));
            if (e - efficiency).abs() > 0.0005 + 1e-9 {
                return Err(format!(
                    "System efficiency {efficiency:.3} is not emitted / (drafts × (K + 1)) = {e:.4}: the line contradicts itself"
                ));
            }
        }
        return Ok(Record::Means(
            Format::V0Speculative,
            Means::V0 {
                k,
                accepted,
                drafted,
                emitted,
            },
        ));
    }
    let s = expect(s, ", Number of accepted tokens: ")?;
    let (accepted, s) = count_until(s, ", ")?;
    let s = expect(s, ", Number of draft tokens: ")?;
    let (drafted, s) = count_until(s, ",")?;
    if s != "," {
        return Err(format!(
            "{} after the draft tokens: not one of vLLM's Speculative metrics lines",
            excerpt(s)
        ));
    }
    Ok(Record::Means(
        Format::V1EarlySpeculative,
        Means::Tokens {
            accepted,
            drafted,
            drafts: None,
        },
    ))
}

/// Rates `0.xxx` (`decimals` of them) joined by `", "`.
fn rates(s: &str, decimals: usize) -> Result<Vec<f64>, String> {
    let out = s
        .split(", ")
        .map(|r| rate(r, decimals))
        .collect::<Result<Vec<f64>, String>>()?;
    if out.len() > MAX_POSITIONS {
        return Err(format!(
            "{} per-position rates: more than {MAX_POSITIONS}",
            out.len()
        ));
    }
    Ok(out)
}

/// One rate in `[0, 1]` printed with `decimals` decimals.
fn rate(r: &str, decimals: usize) -> Result<f64, String> {
    let ok = r.len() == decimals + 2
        && r.as_bytes()[1] == b'.'
        && r.bytes().filter(u8::is_ascii_digit).count() == decimals + 1;
    ok.then(|| r.parse::<f64>().ok())
        .flatten()
        .filter(|v| (0.0..=1.0).contains(v))
        .ok_or_else(|| {
            format!(
                "per-position rate {} is not a rate printed to {decimals} decimals",
                excerpt(r)
            )
        })
}

/// `s` after `literal`, which it must start with.
fn expect<'a>(s: &'a str, literal: &str) -> Result<&'a str, String> {
    s.strip_prefix(literal).ok_or_else(|| {
        format!(
            "expected {} at {}: not one of vLLM's formats",
            excerpt(literal),
            excerpt(s)
        )
    })
}

/// A decimal number (or `nan`, as Python prints one) before `end`.
fn number_until<'a>(s: &'a str, end: &str) -> Result<(f64, &'a str), String> {
    let at = s
        .find(end)
        .ok_or_else(|| format!("{} has no {}", excerpt(s), excerpt(end)))?;
    let word = &s[..at];
    Ok((number(word)?, &s[at..]))
}

fn number(word: &str) -> Result<f64, String> {
    if word == "nan" {
        return Ok(f64::NAN);
    }
    let ok = !word.is_empty()
        && word.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && word.bytes().filter(|&b| b == b'.').count() <= 1;
    ok.then(|| word.parse::<f64>().ok())
        .flatten()
        .ok_or_else(|| format!("{} is not a number", excerpt(word)))
}

fn count_until<'a>(s: &'a str, end: &str) -> Result<(u64, &'a str), String> {
    let at = s
        .find(end)
        .ok_or_else(|| format!("{} has no {}", excerpt(s), excerpt(end)))?;
    Ok((count(&s[..at])?, &s[at..]))
}

fn count(word: &str) -> Result<u64, String> {
    word.parse::<u64>()
        .ok()
        .filter(|_| word.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| format!("{} is not a count", excerpt(word)))
}

/// A summary being read, line by line.
#[derive(Debug)]
struct Block {
    format: Format,
    /// Its first line's number and text, for messages.
    start: u64,
    first_line: String,
    /// `(key, value, the value as a count)`: counts are kept exact.
    fields: Vec<(&'static str, f64, u64)>,
    rates: Vec<f64>,
    /// `vllm bench serve`: the `Per-position acceptance (%):` line was read.
    per_position: bool,
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
    fn start(number: u64, text: &str) -> Option<Result<Block, String>> {
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
    fn feed(&mut self, text: &str) -> Result<bool, String> {
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
    fn finish(self) -> Result<Option<Record>, String> {
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
        Record::Counts(Line {
            format: self.format,
            drafts: Some(drafts),
            mean_acceptance_length: mal,
            accepted,
            drafted,
            rates: self.rates,
            scale,
            throughput: false,
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

/// Why a record gives no counts.
#[derive(Debug)]
enum Refusal {
    /// The record contradicts itself: an error (exit status 2).
    Contradiction(String),
    /// Its drafts were not all of length K and it does not print their
    /// number, so the counts cannot be told (exit status 3).
    NotIdentified(String),
}

/// Drafts and accepted-per-position counts of one record (see the module
/// docs), or why there are none.
fn reconstruct(line: &Line) -> Result<(u64, Vec<u64>), Refusal> {
    let n = drafts_of(line)?;
    check_tokens_and_rates(line)?;
    let counts = fit_counts(line, n)?;
    Ok((n, counts))
}

/// The drafts of a record: printed (a summary), or `Drafted / K` (an
/// interval line); either checked against the mean acceptance length.
fn drafts_of(line: &Line) -> Result<u64, Refusal> {
    let k = line.rates.len() as u64;
    let mean = line.mean_acceptance_length;
    if mean.is_nan() {
        return Err(Refusal::Contradiction(format!(
            "the mean acceptance length is nan, but {} tokens were drafted",
            line.drafted
        )));
    }
    let n = match line.drafts {
        Some(n) => {
            let mal = 1.0 + line.accepted as f64 / n as f64;
            if (mal - mean).abs() > 0.005 + 1e-9 {
                return Err(Refusal::Contradiction(format!(
                    "the mean acceptance length {mean:.2} is not 1 + accepted / drafts = {mal:.4}: the summary contradicts itself"
                )));
            }
            n
        }
        None => {
            if line.drafted % k != 0 {
                return Err(Refusal::NotIdentified(format!(
                    "Drafted: {} tokens is not a multiple of K = {k}: drafts had different lengths, and the line does not print the number of drafts, so the counts cannot be told (not identifiable); use the Prometheus counters (--metrics, --prometheus) instead",
                    line.drafted
                )));
            }
            let n = line.drafted / k;
            if line.accepted <= line.drafted {
                let mal = 1.0 + line.accepted as f64 / n as f64;
                if (mal - mean).abs() > 0.005 + 1e-9 {
                    return Err(Refusal::NotIdentified(format!(
                        "the mean acceptance length {mean:.2} is not 1 + Accepted / (Drafted / K) = {mal:.4}: the drafts were not all K = {k} tokens long, and the line does not print their number, so the counts cannot be told (not identifiable); use the Prometheus counters (--metrics, --prometheus) instead"
                    )));
                }
            }
            n
        }
    };
    Ok(n)
}

/// No more accepted tokens than drafted, and rates that are numbers and
/// never grow with the position.
fn check_tokens_and_rates(line: &Line) -> Result<(), Refusal> {
    if line.accepted > line.drafted {
        return Err(Refusal::Contradiction(format!(
            "Accepted {} is above Drafted {}",
            line.accepted, line.drafted
        )));
    }
    if line.rates.iter().any(|r| r.is_nan()) {
        return Err(Refusal::Contradiction(
            "a per-position rate is nan".to_owned(),
        ));
    }
    for (i, w) in line.rates.windows(2).enumerate() {
        if w[1] > w[0] {
            return Err(Refusal::Contradiction(format!(
                "per-position rate {} ({}) is above rate {} ({}): a token is accepted only after every earlier one",
                i + 2,
                w[1],
                i + 1,
                w[0]
            )));
        }
    }
    Ok(())
}

/// The accepted count at each position over `n` drafts: each within the
/// rounding of its rate and the drafts, never growing with the position,
/// adding up to the accepted tokens; or why no such counts exist.
fn fit_counts(line: &Line, n: u64) -> Result<Vec<u64>, Refusal> {
    let k = line.rates.len() as u64;
    let nf = n as f64;
    // Each count within the rounding of its rate, and within the drafts.
    let half = 0.5 / line.scale as f64;
    let window = |r: f64| {
        let lo = (((r - half) * nf) - 1e-6).ceil().max(0.0) as u64;
        let hi = ((((r + half) * nf) + 1e-6).floor() as u64).min(n);
        (lo, hi)
    };
    let mut counts: Vec<u64> = line
        .rates
        .iter()
        .map(|&r| {
            let (lo, hi) = window(r);
            ((r * nf).round() as u64).clamp(lo, hi.max(lo))
        })
        .collect();
    let target = line.accepted;
    let mut sum: u64 = counts.iter().sum();
    while sum != target {
        let up = sum < target;
        let pick = (0..counts.len())
            .filter(|&i| {
                let (lo, hi) = window(line.rates[i]);
                if up {
                    counts[i] < hi && (i == 0 || counts[i] < counts[i - 1])
                } else {
                    counts[i] > lo && (i + 1 == counts.len() || counts[i] > counts[i + 1])
                }
            })
            .max_by(|&a, &b| {
                let gap = |i: usize| {
                    let d = line.rates[i] * nf - counts[i] as f64;
                    if up { d } else { -d }
                };
                gap(a).total_cmp(&gap(b))
            });
        let Some(i) = pick else {
            return Err(Refusal::Contradiction(format!(
                "the per-position rates ({}) cannot add up to {} accepted tokens over {} drafts, even within their rounding",
                line.rates
                    .iter()
                    .map(|r| r.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                line.accepted,
                n
            )));
        };
        // As far as the window, the order and what is left allow, and
        // toward the rate first: a few steps however many drafts.
        let (lo, hi) = window(line.rates[i]);
        let room = if up {
            hi.min(if i == 0 { u64::MAX } else { counts[i - 1] }) - counts[i]
        } else {
            counts[i] - lo.max(counts.get(i + 1).copied().unwrap_or(0))
        };
        let left = sum.abs_diff(target);
        let gap = (line.rates[i] * nf - counts[i] as f64).abs().floor() as u64;
        let step = room.min(left).min(gap.max(left.div_ceil(k)).max(1));
        if up {
            counts[i] += step;
            sum += step;
        } else {
            counts[i] -= step;
            sum -= step;
        }
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line as vLLM formats it from exact counts.
    pub fn format_line(drafts: u64, k: usize, per_pos: &[u64]) -> String {
        let accepted: u64 = per_pos.iter().sum();
        let drafted = drafts * k as u64;
        format!(
            "INFO 05-01 12:00:00 [metrics.py:95] SpecDecoding metrics: Mean acceptance length: {:.2}, Accepted throughput: {:.2} tokens/s, Drafted throughput: {:.2} tokens/s, Accepted: {accepted} tokens, Drafted: {drafted} tokens, Per-position acceptance rate: {}, Avg Draft acceptance rate: {:.1}%",
            1.0 + accepted as f64 / drafts as f64,
            accepted as f64 / 10.0,
            drafted as f64 / 10.0,
            per_pos
                .iter()
                .map(|&c| format!("{:.3}", c as f64 / drafts as f64))
                .collect::<Vec<_>>()
                .join(", "),
            accepted as f64 / drafted as f64 * 100.0
        )
    }

    fn counts_of(rest: &str) -> Line {
        match parse_line(rest).unwrap() {
            Record::Counts(l) => l,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_line_is_read_and_reconstructed_within_its_rounding() {
        let text = format_line(12_345, 3, &[9_007, 6_429, 4_376]);
        let at = text.find(MARKER).unwrap();
        let line = counts_of(&text[at + MARKER.len()..]);
        assert_eq!(line.rates, vec![0.730, 0.521, 0.354]);
        let (n, counts) = reconstruct(&line).unwrap();
        assert_eq!(n, 12_345);
        assert_eq!(counts.iter().sum::<u64>(), 9_007 + 6_429 + 4_376);
        for (c, t) in counts.iter().zip([9_007u64, 6_429, 4_376]) {
            assert!(c.abs_diff(t) <= 12_345u64.div_ceil(1000), "{c} vs {t}");
        }
        assert!(counts.windows(2).all(|w| w[1] <= w[0]));
    }

    #[test]
    fn lines_that_cannot_be_told_or_contradict_themselves_are_refused() {
        let good = format_line(1000, 3, &[700, 500, 300]);
        let at = good.find(MARKER).unwrap() + MARKER.len();
        // Drafts of different lengths: 2,950 tokens is not a multiple of 3.
        let short = good[at..].replace("Drafted: 3000 tokens", "Drafted: 2950 tokens");
        let e = reconstruct(&counts_of(&short)).unwrap_err();
        assert!(matches!(e, Refusal::NotIdentified(_)), "{e:?}");
        let e = reconstruct(&counts_of(
            &good[at..].replace("Drafted: 3000 tokens", "Drafted: 3300 tokens"),
        ))
        .unwrap_err();
        assert!(
            matches!(&e, Refusal::NotIdentified(m) if m.contains("not 1 + Accepted")),
            "{e:?}"
        );
        let rising = good[at..].replace("0.500, 0.300", "0.500, 0.600");
        let e = reconstruct(&counts_of(&rising)).unwrap_err();
        assert!(matches!(e, Refusal::Contradiction(_)), "{e:?}");
        for bad in [
            good[at..].replace("Accepted: 1500", "Accepted: x"),
            good[at..].replace("0.700", "0.7"),
            good[at..].replace("%", ""),
            good[at..].replace("Mean acceptance", "Mean accept"),
        ] {
            assert!(parse_line(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sgr_sequences_are_stripped_and_others_kept() {
        assert_eq!(strip_sgr("\u{1b}[1;32mINFO\u{1b}[0m x"), "INFO x");
        assert_eq!(strip_sgr("a\u{1b}[2Kb"), "a\u{1b}[2Kb");
    }

    /// `read_from` of `text` on another thread, or `None` after 10 s.
    fn read_within_10s(text: String) -> Option<Result<(), String>> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let got = read_from(text.as_bytes(), "log".into(), None)
                .map(|_| ())
                .map_err(|e| e.to_string());
            let _ = tx.send(got);
        });
        rx.recv_timeout(std::time::Duration::from_secs(10)).ok()
    }

    /// Found while fuzzing: a line of 100,000 rates took minutes, each
    /// step of the reconstruction going over every position.
    #[test]
    fn a_line_with_more_rates_than_any_k_is_refused_at_once() {
        let (k, n) = (100_000u64, 2000u64);
        let accepted = k * 1000 + 65_536;
        let text = format!(
            "SpecDecoding metrics: Mean acceptance length: {:.6}, Accepted throughput: 1.00 tokens/s, Drafted throughput: 1.00 tokens/s, Accepted: {accepted} tokens, Drafted: {} tokens, Per-position acceptance rate: {}, Avg Draft acceptance rate: 50.0%\n",
            1.0 + accepted as f64 / n as f64,
            k * n,
            vec!["0.500"; k as usize].join(", ")
        );
        let e = read_within_10s(text).expect("within 10 s").unwrap_err();
        assert!(e.contains("per-position rates") || e.contains("64"), "{e}");
    }

    /// Found while fuzzing: counts in the 10^15 moved one token a step.
    #[test]
    fn enormous_counts_are_reconstructed_in_bounded_time() {
        let n = 1_000_000_000_000_000u64;
        let accepted = 500_400_000_000_000u64;
        let text = format!(
            "SpecDecoding metrics: Mean acceptance length: 1.50, Accepted throughput: 1.00 tokens/s, Drafted throughput: 1.00 tokens/s, Accepted: {accepted} tokens, Drafted: {n} tokens, Per-position acceptance rate: 0.500, Avg Draft acceptance rate: 50.0%\n"
        );
        assert!(read_within_10s(text).is_some(), "more than 10 s");
    }
}
