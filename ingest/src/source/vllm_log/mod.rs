//! vLLM's log: the counts behind what vLLM prints about
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
//! so each count is reconstructed within ±0.01 N. The counts array can be
//! longer than the drafts (an EAGLE-3 run printed six rates, the last
//! three 0.00, for 3 draft tokens per draft): draft tokens exactly `k`
//! per draft with every rate beyond `k` at 0 are read as `K = k` (vLLM's
//! model drafters draft `K` tokens at every step), with a note.
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

use std::io::BufRead;

use crate::error::{Error, SourceError};
use crate::lines::{Lines, Overlong, strip_sgr};
use crate::{Counted, Reconstruction};

mod accumulate;
pub mod format;
mod line;
mod reconstruct;
mod summary;

pub use format::Format;

use accumulate::Accumulator;
use line::{parse_line, parse_speculative};
use summary::Block;

/// Lines are cut at 1 MiB: a log line is far shorter.
const MAX_LINE_BYTES: usize = 1 << 20;

/// The marker of vLLM V1's line.
const MARKER: &str = "SpecDecoding metrics: ";
/// The marker of vLLM V0's line (and of V1's first).
const V0_MARKER: &str = "Speculative metrics: ";
/// The most per-position rates a record may hold.
const MAX_POSITIONS: usize = 4096;
/// The most process tags kept for the note.
const MAX_PROCESSES: usize = 1000;

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
    /// Positions printed beyond the drafts and dropped (an offline example
    /// summary whose counts array is longer than its drafts), else 0.
    beyond: usize,
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

/// Reads a log from `input`, called `name` in every message: what
/// its row of [`LOG_SOURCES`](super::LOG_SOURCES) reads once the input is
/// open: the counters as one group.
///
/// ```
/// use specdec_ingest::source::vllm_log::read_from;
///
/// let log = "num_drafts: 1000\nnum_draft_tokens: 2000\nnum_accepted_tokens: 1100\n\
///            mean acceptance length: 2.10\nacceptance at token 0: 0.70\nacceptance at token 1: 0.40\n";
/// let (counted, rec) = read_from(log.as_bytes(), "run.txt".to_owned(), None).unwrap();
/// assert_eq!(counted.groups[0].built.counters.drafts(), 1000);
/// assert_eq!(rec.summaries, 1);
/// assert_eq!(rec.max_count_error, 10); // 2 decimals: ±0.01 × 1,000 drafts
/// ```
pub fn read_from(
    input: impl BufRead,
    name: String,
    max_draft_len: Option<usize>,
) -> Result<(Counted, Reconstruction), SourceError> {
    let mut lines = Lines::new(input, MAX_LINE_BYTES, Overlong::Split);
    let mut acc = Accumulator::new(&name);
    let mut block: Option<Block> = None;
    while let Some((number, buf)) = lines
        .next_numbered()
        .map_err(|e| Error::new(format!("{name}: {e}")))?
    {
        let raw = String::from_utf8_lossy(buf);
        let text = strip_sgr(&raw);
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

#[cfg(test)]
mod tests {
    use super::reconstruct::{Refusal, reconstruct};
    use super::*;

    /// A line as vLLM formats it from exact counts.
    fn format_line(drafts: u64, k: usize, per_pos: &[u64]) -> String {
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
            matches!(&e, Refusal::NotIdentified(m) if m.to_string().contains("not 1 + Accepted")),
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
