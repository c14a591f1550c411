//! `advise --vllm-log FILE`: the counts behind vLLM's periodic log line,
//! as `SpecDecodingLogging.log` writes it in `vllm/v1/spec_decode/metrics.py`
//! (read at vllm-project/vllm ee4ceaae5953d367d8edd2132fd86d6c42506e1e):
//!
//! ```text
//! SpecDecoding metrics: Mean acceptance length: %.2f, Accepted throughput: %.2f tokens/s,
//! Drafted throughput: %.2f tokens/s, Accepted: %d tokens, Drafted: %d tokens,
//! Per-position acceptance rate: %s, Avg Draft acceptance rate: %.1f%%
//! ```
//!
//! (one line; the per-position rates are `f"{p:.3f}"` joined by `", "`,
//! each the accepted count at that position over the interval's drafts).
//! Each line covers one logging interval (the logger resets after it), so
//! the file's lines add up. Whatever precedes `SpecDecoding metrics: ` on
//! a line (time, level, logger) is ignored, and so are lines without it.
//!
//! The line does not print the number of drafts. With `K` the number of
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

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use serde::Serialize;
use specdec_metrics::{CounterSeries, EngineCounters, MAX_MAX_DRAFT_LEN, VLLM_METRIC_PREFIX};

use crate::engines::{Built, Engine, Families};
use crate::error::CliError;
use crate::format::{excerpt, group_digits};
use crate::io::{input_name, is_stdin, note_reading_stdin};
use crate::sources::{Counted, Group};

/// The marker of the line.
const MARKER: &str = "SpecDecoding metrics: ";

/// How precise the reconstruction is.
#[derive(Clone, Debug, Serialize)]
pub struct Reconstruction {
    /// Lines read.
    pub lines: u64,
    /// Lines with no drafted token (nothing to reconstruct).
    pub lines_without_drafts: u64,
    /// The most any reconstructed per-position count can be off by: one
    /// unit of the third decimal times each line's drafts, added up.
    pub max_count_error: u64,
    /// The same, over all drafts: the precision of each `P_i`.
    pub max_rate_error: f64,
    /// Always true: the advice's intervals are the posterior's given the
    /// reconstructed counts, and leave `max_rate_error` out (the table
    /// says so, with how it compares with them).
    pub intervals_exclude_reconstruction_error: bool,
}

/// One line's figures.
#[derive(Debug, PartialEq)]
struct Line {
    mean_acceptance_length: f64,
    accepted: u64,
    drafted: u64,
    rates: Vec<f64>,
}

/// Reads the log at `path`: its counters as one group.
pub fn read(
    path: &Path,
    max_draft_len: Option<usize>,
) -> Result<(Counted, Reconstruction), CliError> {
    let name = input_name(path);
    let input: Box<dyn Read> = if is_stdin(path) {
        note_reading_stdin("vLLM's log");
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(
            std::fs::File::open(path)
                .map_err(|e| CliError::new(format!("cannot open {name}: {e}")))?,
        )
    };
    read_from(name, input, max_draft_len)
}

/// [`read`] of a log already open: `input`, which messages call `name`
/// (the fuzz targets, `fuzz/`, read logs from memory through it).
pub fn read_from(
    name: String,
    input: impl Read,
    max_draft_len: Option<usize>,
) -> Result<(Counted, Reconstruction), CliError> {
    let mut reader = BufReader::new(input);
    let (mut k, mut drafts, mut drafted, mut accepted) = (None::<usize>, 0u64, 0u64, 0u64);
    let mut per_pos: Vec<u64> = Vec::new();
    let mut rec = Reconstruction {
        lines: 0,
        lines_without_drafts: 0,
        max_count_error: 0,
        max_rate_error: 0.0,
        intervals_exclude_reconstruction_error: true,
    };
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
        let Some(at) = text.find(MARKER) else {
            continue;
        };
        let at_line = |msg: String| CliError::new(format!("{name}: line {number}: {msg}"));
        let line = parse_line(text[at + MARKER.len()..].trim_end()).map_err(&at_line)?;
        rec.lines += 1;
        let kk = line.rates.len();
        // Refused here, not only by the counters at the end: each step of
        // the reconstruction takes time in proportion to K.
        if kk > MAX_MAX_DRAFT_LEN {
            return Err(at_line(format!(
                "{kk} per-position rates: K = num_speculative_tokens is at most {MAX_MAX_DRAFT_LEN}"
            )));
        }
        match k {
            None => k = Some(kk),
            Some(k) if k != kk => {
                return Err(at_line(format!(
                    "{kk} per-position rates, but earlier lines have {k}: the log mixes runs of different num_speculative_tokens; advise them apart"
                )));
            }
            Some(_) => {}
        }
        if line.drafted == 0 {
            rec.lines_without_drafts += 1;
            continue;
        }
        let (n, counts) =
            reconstruct(&line).map_err(|(msg, status)| at_line(msg).with_status(status))?;
        drafts = drafts.saturating_add(n);
        drafted = drafted.saturating_add(line.drafted);
        accepted = accepted.saturating_add(line.accepted);
        per_pos.resize(kk, 0);
        for (total, c) in per_pos.iter_mut().zip(counts) {
            *total = total.saturating_add(c);
        }
        rec.max_count_error += n.div_ceil(1000);
    }
    let Some(k) = k else {
        return Err(CliError::new(format!(
            "{name}: no line with \"{}\" (vLLM logs one per interval while it speculates)",
            MARKER.trim_end()
        )));
    };
    if let Some(given) = max_draft_len.filter(|&g| g != k) {
        return Err(CliError::new(format!(
            "{name}: the lines have {k} per-position rates (K = {k}) but --max-draft-len is {given}"
        )));
    }
    rec.max_rate_error = if drafts > 0 {
        rec.max_count_error as f64 / drafts as f64
    } else {
        0.0
    };
    let families = Families {
        engine: Engine::Vllm,
        prefix: VLLM_METRIC_PREFIX.to_owned(),
    };
    let series = |s: CounterSeries| match s {
        CounterSeries::Drafts => "drafts (Drafted / K)".to_owned(),
        CounterSeries::DraftTokens => "Drafted".to_owned(),
        CounterSeries::AcceptedTokens => "Accepted".to_owned(),
        CounterSeries::AcceptedPerPos { position } => {
            format!("Per-position acceptance rate {}", position + 1)
        }
        other => other.to_string(),
    };
    let counters = EngineCounters::new(k, drafts, drafted, accepted, per_pos)
        .map_err(|e| CliError::new(format!("{name}: {}", e.to_string_with(series))))?;
    let notes = vec![format!(
        "reconstructed from {} log line{} (rates printed to 3 decimals, drafts = Drafted / K, checked against each line's mean acceptance length): every per-position count is within ±{} of the true one (±{:.5} of each rate P_i)",
        group_digits(rec.lines),
        if rec.lines == 1 { "" } else { "s" },
        group_digits(rec.max_count_error),
        rec.max_rate_error,
    )];
    Ok((
        Counted {
            source: name,
            families,
            groups: vec![Group {
                label: None,
                built: Built { counters, notes },
            }],
        },
        rec,
    ))
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

/// The figures of the text after the marker, strictly in vLLM's order.
fn parse_line(rest: &str) -> Result<Line, String> {
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
    let rates = s[..end]
        .split(", ")
        .map(|r| {
            let ok = r.len() == 5
                && r.as_bytes()[1] == b'.'
                && r.bytes().filter(u8::is_ascii_digit).count() == 4;
            ok.then(|| r.parse::<f64>().ok())
                .flatten()
                .filter(|v| (0.0..=1.0).contains(v))
                .ok_or_else(|| {
                    format!(
                        "per-position rate {} is not a rate printed to 3 decimals",
                        excerpt(r)
                    )
                })
        })
        .collect::<Result<Vec<f64>, String>>()?;
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
        mean_acceptance_length: mal,
        accepted,
        drafted,
        rates,
    })
}

/// `s` after `literal`, which it must start with.
fn expect<'a>(s: &'a str, literal: &str) -> Result<&'a str, String> {
    s.strip_prefix(literal).ok_or_else(|| {
        format!(
            "expected {} at {}: not vLLM's SpecDecoding metrics line",
            excerpt(literal),
            excerpt(s)
        )
    })
}

fn number_until<'a>(s: &'a str, end: &str) -> Result<(f64, &'a str), String> {
    let at = s
        .find(end)
        .ok_or_else(|| format!("{} has no {}", excerpt(s), excerpt(end)))?;
    let word = &s[..at];
    let ok = !word.is_empty() && word.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    let v = ok
        .then(|| word.parse::<f64>().ok())
        .flatten()
        .ok_or_else(|| format!("{} is not a number", excerpt(word)))?;
    Ok((v, &s[at..]))
}

fn count_until<'a>(s: &'a str, end: &str) -> Result<(u64, &'a str), String> {
    let at = s
        .find(end)
        .ok_or_else(|| format!("{} has no {}", excerpt(s), excerpt(end)))?;
    let word = &s[..at];
    let v = word
        .parse::<u64>()
        .ok()
        .filter(|_| word.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| format!("{} is not a count", excerpt(word)))?;
    Ok((v, &s[at..]))
}

/// Drafts and accepted-per-position counts of one line (see the module
/// docs). The error carries its exit status: 3 when the drafts cannot be
/// told (not all of length K), 2 when the line contradicts itself.
fn reconstruct(line: &Line) -> Result<(u64, Vec<u64>), (String, u8)> {
    let k = line.rates.len() as u64;
    if line.drafted % k != 0 {
        return Err((
            format!(
                "Drafted: {} tokens is not a multiple of K = {k}: drafts had different lengths, and the line does not print the number of drafts, so the counts cannot be told (not identifiable); use the Prometheus counters (--metrics, --prometheus) instead",
                line.drafted
            ),
            3,
        ));
    }
    let n = line.drafted / k;
    if line.accepted > line.drafted {
        return Err((
            format!(
                "Accepted {} is above Drafted {}",
                line.accepted, line.drafted
            ),
            2,
        ));
    }
    let mal = 1.0 + line.accepted as f64 / n as f64;
    if (mal - line.mean_acceptance_length).abs() > 0.005 + 1e-9 {
        return Err((
            format!(
                "the mean acceptance length {:.2} is not 1 + Accepted / (Drafted / K) = {mal:.4}: the drafts were not all K = {k} tokens long, and the line does not print their number, so the counts cannot be told (not identifiable); use the Prometheus counters (--metrics, --prometheus) instead",
                line.mean_acceptance_length
            ),
            3,
        ));
    }
    let nf = n as f64;
    for (i, w) in line.rates.windows(2).enumerate() {
        if w[1] > w[0] {
            return Err((
                format!(
                    "per-position rate {} ({:.3}) is above rate {} ({:.3}): a token is accepted only after every earlier one",
                    i + 2,
                    w[1],
                    i + 1,
                    w[0]
                ),
                2,
            ));
        }
    }
    // Each count within the rounding of its rate, and within the drafts.
    let window = |r: f64| {
        let lo = (((r - 0.0005) * nf) - 1e-6).ceil().max(0.0) as u64;
        let hi = ((((r + 0.0005) * nf) + 1e-6).floor() as u64).min(n);
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
            return Err((
                format!(
                    "the per-position rates ({}) cannot add up to Accepted: {} tokens over {} drafts, even within their rounding",
                    line.rates
                        .iter()
                        .map(|r| format!("{r:.3}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    line.accepted,
                    n
                ),
                2,
            ));
        };
        // One token at a time to the largest gap, as long as the distance
        // to `Accepted` is small (every log of real traffic); further away
        // (counts in the billions, which only a damaged or forged line has)
        // a share of the distance at a time, so that the work stays within
        // O(K^2 log N) whatever the counts. Either way the count stays in
        // its window and below the one before it.
        let (lo, hi) = window(line.rates[i]);
        let distance = target.abs_diff(sum);
        let room = if up {
            hi.min(if i == 0 { hi } else { counts[i - 1] }) - counts[i]
        } else {
            counts[i] - lo.max(counts.get(i + 1).copied().unwrap_or(lo))
        };
        let step = if distance <= 1 << 16 {
            1
        } else {
            (distance / (2 * k)).max(1)
        }
        .min(room);
        if up {
            counts[i] += step;
            sum += step;
        } else {
            counts[i] -= step;
            sum -= step;
        }
    }
    Ok((n, counts))
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

    #[test]
    fn a_line_is_read_and_reconstructed_within_its_rounding() {
        let text = format_line(12_345, 3, &[9_007, 6_429, 4_376]);
        let at = text.find(MARKER).unwrap();
        let line = parse_line(&text[at + MARKER.len()..]).unwrap();
        assert_eq!(line.rates, vec![0.730, 0.521, 0.354]);
        let (n, counts) = reconstruct(&line).unwrap();
        assert_eq!(n, 12_345);
        assert_eq!(counts.iter().sum::<u64>(), 9_007 + 6_429 + 4_376);
        for (c, t) in counts.iter().zip([9_007u64, 6_429, 4_376]) {
            assert!(c.abs_diff(t) <= 12_345u64.div_ceil(1000), "{c} vs {t}");
        }
        assert!(counts.windows(2).all(|w| w[1] <= w[0]));
    }

    /// What [`reconstruct`] returns.
    type Reconstructed = Result<(u64, Vec<u64>), (String, u8)>;

    /// `reconstruct` of the line with these figures, on a thread: `None`
    /// when it takes more than ten seconds.
    fn reconstruct_within_10s(
        mal: &str,
        accepted: u64,
        drafted: u64,
        rates: &str,
    ) -> Option<Reconstructed> {
        let text = format!(
            "Mean acceptance length: {mal}, Accepted throughput: 1.00 tokens/s, Drafted throughput: 1.00 tokens/s, Accepted: {accepted} tokens, Drafted: {drafted} tokens, Per-position acceptance rate: {rates}, Avg Draft acceptance rate: 50.0%"
        );
        let line = parse_line(&text).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(reconstruct(&line)));
        rx.recv_timeout(std::time::Duration::from_secs(10)).ok()
    }

    /// Counts far from `Accepted` were moved one token per step: 4 * 10^11
    /// steps for the first line here, and more than any run can wait for
    /// with larger counts (a hang, which the `vllm_log` fuzz target reports
    /// as a timeout on such a line).
    #[test]
    fn enormous_counts_are_reconstructed_in_bounded_time() {
        let n = 1_000_000_000_000_000u64;
        // Feasible: the count is Accepted itself, 4 * 10^11 from r N.
        let got = reconstruct_within_10s("1.5004", 500_400_000_000_000, n, "0.500");
        assert_eq!(got, Some(Ok((n, vec![500_400_000_000_000]))));
        // Infeasible: Accepted is twice the most the rate allows.
        let got = reconstruct_within_10s("2.00", n, n, "0.500").expect("within 10 s");
        assert!(got.unwrap_err().0.contains("cannot add up"));
        // Many positions, each far from its share.
        let accepted = 501_600_000_000_000;
        let got = reconstruct_within_10s("1.5016", accepted, 4 * n, "0.200, 0.150, 0.100, 0.050")
            .expect("within 10 s")
            .unwrap();
        assert_eq!(got.1.iter().sum::<u64>(), accepted);
        assert!(got.1.windows(2).all(|w| w[1] <= w[0]));
    }

    /// A line of 100,000 rates took each step of the reconstruction over
    /// every position, 65,536 steps of them (a hang: the `vllm_log` fuzz
    /// target reports it as a timeout); such a K is refused at once.
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
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(read_from("log".into(), text.as_bytes(), None).map(|_| ()));
        });
        let got = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("within 10 s");
        let e = got.unwrap_err().to_string();
        assert!(e.contains("100000 per-position rates"), "{e}");
    }

    #[test]
    fn lines_that_cannot_be_told_or_contradict_themselves_are_refused() {
        let good = format_line(1000, 3, &[700, 500, 300]);
        let at = good.find(MARKER).unwrap() + MARKER.len();
        // Drafts of different lengths: 2,950 tokens is not a multiple of 3.
        let short = good[at..].replace("Drafted: 3000 tokens", "Drafted: 2950 tokens");
        let e = reconstruct(&parse_line(&short).unwrap()).unwrap_err();
        assert_eq!(e.1, 3);
        let e = reconstruct(
            &parse_line(&good[at..].replace("Drafted: 3000 tokens", "Drafted: 3300 tokens"))
                .unwrap(),
        )
        .unwrap_err();
        assert!(e.0.contains("not 1 + Accepted") && e.1 == 3, "{e:?}");
        let rising = good[at..].replace("0.500, 0.300", "0.500, 0.600");
        assert_eq!(reconstruct(&parse_line(&rising).unwrap()).unwrap_err().1, 2);
        for bad in [
            good[at..].replace("Accepted: 1500", "Accepted: x"),
            good[at..].replace("0.700", "0.7"),
            good[at..].replace("%", ""),
            good[at..].replace("Mean acceptance", "Mean accept"),
        ] {
            assert!(parse_line(&bad).is_err(), "{bad}");
        }
    }
}
