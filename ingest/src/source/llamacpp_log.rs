//! llama.cpp's speculative-decoding log
//! lines, as llama.cpp PR #24536 (merged 2026-06) prints them (read from
//! the pull request's description and its examples: the snapshot of
//! llama.cpp this project can read predates it):
//!
//! ```text
//! I statistics     draft-eagle3: #calls(b,g,a) =    1     87     87, #gen drafts =     87, #acc drafts =    70, #gen tokens =    259, #acc tokens =   167, #mean acc len = 2.92, #acc rate/pos = (0.805, 0.632, 0.483), dur(b,g,a) = ...
//! I slot print_timing: id  1 | task 0 | draft acceptance = 0.64479 (  167 accepted /   259 generated), mean acceptance length =  2.92, acceptance rate per position = (0.805, 0.632, 0.483)
//! ```
//!
//! - `statistics <drafter>:` accumulates over the server's life, per
//!   drafter: `#gen drafts` the verify steps that drafted, `#acc drafts`
//!   those that accepted at least one token (the accepted count at
//!   position 1, exactly), `#gen tokens` / `#acc tokens` the drafted and
//!   accepted tokens, `#acc rate/pos` each position's accepted count over
//!   the drafts, to 3 decimals. The latest line of a drafter holds all
//!   before it; a line lower than the one before is a restart, and the
//!   lines before it count too. One group per drafter.
//! - `print_timing` is one request's: the same figures without the draft
//!   count, which is taken from the mean acceptance length (2 decimals)
//!   where exactly one whole number fits it and every rate; read only
//!   when the log has no `statistics` line (they count the same drafts).
//!
//! Counts at each position are the rates times the drafts, rounded, kept
//! within the rates' rounding (±0.0005 per draft) and adjusted there so
//! that they add up to the accepted tokens ([`crate::fit`], by
//! [`Rule::InOrder`]); position 1 is `#acc drafts`.
//! llama.cpp's drafts vary in length (`--spec-draft-p-min` stops a draft
//! early, n-gram drafts end with the match): the counts identify the
//! continuation counts only when every draft had `K` tokens (`#gen tokens`
//! = drafts × `K`, `K` the number of rates); otherwise bounds (exit status
//! 3). Lines of a llama.cpp before that pull request (without `#acc
//! rate/pos`) give totals only, and are refused with what to update.

use std::collections::BTreeMap;
use std::io::BufRead;

use specdec_metrics::{EngineCounters, MAX_MAX_DRAFT_LEN};

use crate::counters::Built;
use crate::error::{Error, Message, Setting, SourceError};
use crate::fit::{self, NoFit, Rule};
use crate::lines::{Lines, Overlong, strip_sgr};
use crate::schema::{Engine, Families};
use crate::text::{excerpt, group_digits};
use crate::{Counted, Group, Read, message};

/// Lines are cut at 1 MiB: a log line is far shorter.
const MAX_LINE_BYTES: usize = 1 << 20;

/// One line's figures.
#[derive(Clone, Debug, PartialEq)]
struct Figures {
    drafts: u64,
    drafted: u64,
    accepted: u64,
    /// Drafts that accepted at least one token, where printed.
    accepted_drafts: Option<u64>,
    rates: Vec<f64>,
}

/// Reads a log from `input`, called `name` in every message: what its
/// row of [`LOG_SOURCES`](super::LOG_SOURCES) reads once the input is open. `max_draft_len` is `K`
/// where given (the lines must agree with it).
///
/// ```
/// use specdec_ingest::source::llamacpp_log::read_from;
///
/// let log = "I statistics draft: #gen drafts = 1000, #acc drafts = 800, #gen tokens = 2000, \
///            #acc tokens = 1300, #acc rate/pos = (0.800, 0.500)\n";
/// let read = read_from(log.as_bytes(), "llama.log".into(), None).unwrap();
/// assert_eq!(read.counted.groups[0].built.counters.drafts(), 1000);
/// ```
pub fn read_from(
    input: impl BufRead,
    name: String,
    max_draft_len: Option<usize>,
) -> Result<Read, SourceError> {
    {
        let (drafters, requests, number) = read_lines(input, &name)?;
        let mut groups = Vec::new();
        let mut read_as = "llama.cpp log: statistics lines";
        if !drafters.is_empty() {
            for (drafter, (mut lives, last)) in drafters {
                lives.extend(last);
                let built = build(&lives, max_draft_len, "statistics")
                    .map_err(|e| e.after(format!("{name}: {drafter}: ")))?;
                groups.push(Group {
                    label: Some(("drafter".to_owned(), drafter)),
                    built,
                });
            }
        } else if !requests.is_empty() {
            read_as = "llama.cpp log: print_timing lines (one per request)";
            let built = build(&requests, max_draft_len, "print_timing")
                .map_err(|e| e.after(format!("{name}: ")))?;
            groups.push(Group { label: None, built });
        } else {
            return Err(Error::new(format!(
                "{name}: no llama.cpp speculative-decoding line (\"statistics <drafter>: ... #gen drafts = ...\" or \"slot print_timing: ... draft acceptance = ...\") in {} lines",
                group_digits(number)
            ))
            .into());
        }
        Ok(Read {
            counted: Counted {
                source: name,
                families: Families {
                    engine: Engine::Llamacpp,
                    prefix: String::new(),
                },
                groups,
            },
            reconstruction: None,
            by: Some("drafter".to_owned()),
            read_as: Some(read_as.to_owned()),
            requests: None,
            exact_from: None,
        })
    }
}

/// Per drafter, the figures of each of its finished lives and its latest
/// `statistics` line.
type Drafters = BTreeMap<String, (Vec<Figures>, Option<Figures>)>;

/// The log's `statistics` lines per drafter, its `print_timing` lines, and
/// the number of lines read.
fn read_lines(input: impl BufRead, name: &str) -> Result<(Drafters, Vec<Figures>, u64), Error> {
    let mut lines = Lines::new(input, MAX_LINE_BYTES, Overlong::Split);
    // Per drafter: the figures of the finished lives, the latest line.
    let mut drafters: Drafters = BTreeMap::new();
    let mut requests: Vec<Figures> = Vec::new();
    let mut number = 0;
    while let Some((n, buf)) = lines
        .next_numbered()
        .map_err(|e| Error::new(format!("{name}: {e}")))?
    {
        number = n;
        let raw = String::from_utf8_lossy(buf);
        let text = strip_sgr(&raw);
        let at_line = |msg: String| Error::new(format!("{name}: line {number}: {msg}"));
        if let Some(at) = text.find("statistics ") {
            let rest = &text[at + "statistics ".len()..];
            let Some((drafter, body)) = rest.split_once(':') else {
                continue;
            };
            if !body.contains("#gen drafts") {
                continue;
            }
            let f = parse_statistics(body).map_err(at_line)?;
            let (lives, last) = drafters.entry(drafter.trim().to_owned()).or_default();
            if let Some(prev) = last.take() {
                if f.drafts < prev.drafts || f.accepted < prev.accepted {
                    lives.push(prev);
                }
            }
            *last = Some(f);
        } else if let Some(at) = text.find("draft acceptance") {
            if text.contains("print_timing") {
                requests.push(parse_timing(&text[at..]).map_err(at_line)?);
            }
        }
    }
    Ok((drafters, requests, number))
}

/// The number after `key =` in `body`.
fn number_after(body: &str, key: &str) -> Result<u64, String> {
    let at = body
        .find(key)
        .ok_or_else(|| format!("no \"{key}\" in {}", excerpt(body.trim())))?;
    let rest = body[at + key.len()..].trim_start();
    let rest = rest.strip_prefix('=').unwrap_or(rest).trim_start();
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits
        .parse()
        .map_err(|_| format!("\"{key}\" is not followed by a count: {}", excerpt(rest)))
}

/// The parenthesised rates after `key`, each in `[0, 1]`.
fn rates_after(body: &str, key: &str) -> Result<Vec<f64>, String> {
    let at = body.find(key).ok_or_else(|| {
        format!(
            "no \"{key}\": this llama.cpp prints totals only (per-position rates came with llama.cpp PR #24536, June 2026), which cannot be advised on; update llama.cpp"
        )
    })?;
    let rest = &body[at + key.len()..];
    let open = rest
        .find('(')
        .ok_or_else(|| format!("\"{key}\" without (...)"))?;
    let close = rest[open..]
        .find(')')
        .ok_or_else(|| format!("\"{key}\" without a closing )"))?;
    let rates: Vec<f64> = rest[open + 1..open + close]
        .split(',')
        .map(|r| {
            r.trim()
                .parse::<f64>()
                .ok()
                .filter(|r| (0.0..=1.0).contains(r))
                .ok_or_else(|| format!("{} is not a rate in [0, 1]", excerpt(r.trim())))
        })
        .collect::<Result<_, _>>()?;
    if rates.is_empty() || rates.len() > MAX_MAX_DRAFT_LEN {
        return Err(format!(
            "{} rates: K is 1..={MAX_MAX_DRAFT_LEN}",
            rates.len()
        ));
    }
    Ok(rates)
}

fn parse_statistics(body: &str) -> Result<Figures, String> {
    Ok(Figures {
        drafts: number_after(body, "#gen drafts")?,
        accepted_drafts: Some(number_after(body, "#acc drafts")?),
        drafted: number_after(body, "#gen tokens")?,
        accepted: number_after(body, "#acc tokens")?,
        rates: rates_after(body, "#acc rate/pos")?,
    })
}

/// `draft acceptance = 0.64479 (  167 accepted /   259 generated), mean
/// acceptance length =  2.92, acceptance rate per position = (...)`.
fn parse_timing(text: &str) -> Result<Figures, String> {
    let open = text.find('(').ok_or("no (N accepted / N generated)")?;
    let inner = &text[open + 1..];
    let accepted: u64 = inner
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("no accepted count in {}", excerpt(inner)))?;
    let drafted = number_after(inner, "/")?;
    let rates = rates_after(text, "acceptance rate per position")?;
    let mal_at = text
        .find("mean acceptance length")
        .ok_or("no mean acceptance length")?;
    let mal: f64 = text[mal_at + "mean acceptance length".len()..]
        .trim_start()
        .trim_start_matches('=')
        .trim_start()
        .split(|c: char| c == ',' || c.is_whitespace())
        .next()
        .and_then(|m| m.parse().ok())
        .ok_or("mean acceptance length is not a number")?;
    // Drafts: the whole numbers N with 1 + accepted / N within the mean's
    // rounding, and every rate times N within its rounding of a whole
    // count; exactly one must fit.
    let fits = |n: u64| {
        let m = 1.0 + accepted as f64 / n as f64;
        (m - mal).abs() <= 0.005 + 1e-9
            && rates.iter().all(|&r| {
                let c = (r * n as f64).round();
                (c / n as f64 - r).abs() <= 0.0005 + 1e-9
            })
    };
    let lo = if mal - 1.0 + 0.005 > 0.0 {
        (accepted as f64 / (mal - 1.0 + 0.005)).floor() as u64
    } else {
        1
    };
    let hi = if mal - 1.0 - 0.005 > 0.0 {
        (accepted as f64 / (mal - 1.0 - 0.005)).ceil() as u64
    } else {
        drafted
    };
    let candidates: Vec<u64> = (lo.max(1)..=hi.min(drafted).max(lo.max(1)))
        .take(100_000)
        .filter(|&n| fits(n))
        .collect();
    match candidates.as_slice() {
        [n] => Ok(Figures {
            drafts: *n,
            drafted,
            accepted,
            accepted_drafts: None,
            rates,
        }),
        [] => Err(format!(
            "no draft count fits the mean acceptance length {mal} and the rates ({accepted} accepted)"
        )),
        many => Err(format!(
            "{} draft counts ({} to {}) fit the mean acceptance length {mal} and the rates: the line does not tell the drafts; the statistics lines do",
            many.len(),
            many[0],
            many[many.len() - 1]
        )),
    }
}

/// The accepted count at each position of one line: the rates times the
/// drafts, rounded within their rounding, non-increasing, adding up to the
/// accepted tokens; position 1 is the accepted drafts where printed.
fn reconstruct(f: &Figures) -> Result<Vec<u64>, String> {
    fit::fit(
        &f.rates,
        0.0005,
        f.drafts,
        f.accepted,
        f.accepted_drafts,
        Rule::InOrder,
    )
    .map_err(|e| match e {
        NoFit::First => format!(
            "#acc drafts {} is not the first rate {} times #gen drafts {}",
            f.accepted_drafts.unwrap_or(0),
            f.rates[0],
            f.drafts
        ),
        NoFit::Sum { sum } => format!(
            "the rates times {} drafts add up to {sum}, and no count within their rounding gives the {} accepted tokens",
            f.drafts, f.accepted
        ),
    })
}

fn build(lines: &[Figures], max_draft_len: Option<usize>, what: &str) -> Result<Built, Error> {
    let k = lines.iter().map(|f| f.rates.len()).max().unwrap_or(0);
    if let Some(other) = lines.iter().find(|f| f.rates.len() != k) {
        return Err(Error::new(format!(
            "lines of {} and of {k} per-position rates: runs of different --spec-draft-n-max; advise them apart",
            other.rates.len()
        )));
    }
    if let Some(given) = max_draft_len.filter(|&g| g != k) {
        return Err(message![
            format!("the lines have {k} per-position rates (K = {k}) but "),
            Setting::MaxDraftLen,
            format!(" is {given}"),
        ]);
    }
    let (mut drafts, mut drafted, mut accepted, mut error) = (0u64, 0u64, 0u64, 0u64);
    let mut per_pos = vec![0u64; k];
    for f in lines.iter().filter(|f| f.drafts > 0) {
        let counts = reconstruct(f).map_err(Error::new)?;
        drafts = drafts.saturating_add(f.drafts);
        drafted = drafted.saturating_add(f.drafted);
        accepted = accepted.saturating_add(f.accepted);
        for (p, c) in per_pos.iter_mut().zip(counts) {
            *p = p.saturating_add(c);
        }
        error += f.drafts.div_ceil(1000);
    }
    let counters = EngineCounters::new(k, drafts, drafted, accepted, per_pos)
        .map_err(|e| Error::new(e.to_string()))?;
    let notes = vec![Message::new(format!(
        "reconstructed from {} {what} line{} (rates printed to 3 decimals): every per-position count is within ±{} of the true one (±{:.5} of each rate)",
        group_digits(lines.len() as u64),
        if lines.len() == 1 { "" } else { "s" },
        group_digits(error),
        if drafts > 0 {
            error as f64 / drafts as f64
        } else {
            0.0
        },
    ))];
    Ok(Built { counters, notes })
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATS: &str = " #calls(b,g,a) =    1     87     87, #gen drafts =     87, #acc drafts =    70, #gen tokens =    259, #acc tokens =   167, #mean acc len = 2.92, #acc rate/pos = (0.805, 0.632, 0.483), dur(b,g,a) = 0.005, 325.555, 0.114 ms";

    #[test]
    fn the_statistics_line_of_the_pull_request_is_read_and_reconstructed() {
        let f = parse_statistics(STATS).unwrap();
        assert_eq!(
            (f.drafts, f.accepted_drafts, f.drafted, f.accepted),
            (87, Some(70), 259, 167)
        );
        assert_eq!(f.rates, vec![0.805, 0.632, 0.483]);
        // 0.805 x 87 = 70.0, 0.632 x 87 = 55.0, 0.483 x 87 = 42.0: 167.
        assert_eq!(reconstruct(&f).unwrap(), vec![70, 55, 42]);
    }

    #[test]
    fn a_print_timing_line_gives_its_drafts_when_one_count_fits() {
        let f = parse_timing("draft acceptance = 0.64479 (  167 accepted /   259 generated), mean acceptance length =  2.92, acceptance rate per position = (0.805, 0.632, 0.483)").unwrap();
        assert_eq!((f.drafts, f.drafted, f.accepted), (87, 259, 167));
    }

    #[test]
    fn totals_only_and_impossible_sums_are_refused_with_the_reason() {
        let old = " #calls = 1, #gen drafts = 87, #acc drafts = 70, #gen tokens = 259, #acc tokens = 167, dur = 1 ms";
        let e = parse_statistics(old).unwrap_err();
        assert!(e.contains("#24536") && e.contains("totals only"), "{e}");
        let mut f = parse_statistics(STATS).unwrap();
        f.accepted = 200;
        assert!(reconstruct(&f).unwrap_err().contains("200 accepted"));
        f.accepted = 167;
        f.accepted_drafts = Some(60);
        assert!(reconstruct(&f).unwrap_err().contains("#acc drafts 60"));
    }

    /// Found writing its fuzz target: counts in the 10^15 moved one token
    /// a step, 4 x 10^11 steps for this line.
    #[test]
    fn enormous_counts_are_reconstructed_in_bounded_time() {
        let log = "I statistics d: #gen drafts = 1000000000000000, #acc drafts = 500000000000000, #gen tokens = 2000000000000000, #acc tokens = 750400000000000, #acc rate/pos = (0.500, 0.250)\n";
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(read_from(log.as_bytes(), "log".into(), None).is_ok());
        });
        let read = rx.recv_timeout(std::time::Duration::from_secs(10));
        assert_eq!(read, Ok(true), "not read within 10 s");
    }
}
