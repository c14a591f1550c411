//! vLLM's interval lines: the record after `SpecDecoding metrics: ` or
//! `Speculative metrics: `, read strictly in one of the orders vLLM has
//! printed (the [module docs](super)), and the number formats shared with
//! the summaries.

use crate::text::excerpt;

use super::{Format, Line, MAX_POSITIONS, Means, Record};

/// The record after `SpecDecoding metrics: `, strictly in one of vLLM's
/// orders.
pub(super) fn parse_line(rest: &str) -> Result<Record, String> {
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
        beyond: 0,
    }))
}

/// The current order (module docs).
pub(super) fn parse_current(rest: &str) -> Result<Line, String> {
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
        beyond: 0,
    })
}

/// The record after `Speculative metrics: ` (V0's, or V1's first).
pub(super) fn parse_speculative(rest: &str) -> Result<Record, String> {
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
pub(super) fn rates(s: &str, decimals: usize) -> Result<Vec<f64>, String> {
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
pub(super) fn rate(r: &str, decimals: usize) -> Result<f64, String> {
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
pub(super) fn expect<'a>(s: &'a str, literal: &str) -> Result<&'a str, String> {
    s.strip_prefix(literal).ok_or_else(|| {
        format!(
            "expected {} at {}: not one of vLLM's formats",
            excerpt(literal),
            excerpt(s)
        )
    })
}

/// A decimal number (or `nan`, as Python prints one) before `end`.
pub(super) fn number_until<'a>(s: &'a str, end: &str) -> Result<(f64, &'a str), String> {
    let at = s
        .find(end)
        .ok_or_else(|| format!("{} has no {}", excerpt(s), excerpt(end)))?;
    let word = &s[..at];
    Ok((number(word)?, &s[at..]))
}

pub(super) fn number(word: &str) -> Result<f64, String> {
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

pub(super) fn count_until<'a>(s: &'a str, end: &str) -> Result<(u64, &'a str), String> {
    let at = s
        .find(end)
        .ok_or_else(|| format!("{} has no {}", excerpt(s), excerpt(end)))?;
    Ok((count(&s[..at])?, &s[at..]))
}

pub(super) fn count(word: &str) -> Result<u64, String> {
    word.parse::<u64>()
        .ok()
        .filter(|_| word.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| format!("{} is not a count", excerpt(word)))
}
