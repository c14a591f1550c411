//! A record's counts from its figures: the drafts (printed, or `Drafted /
//! K` checked against the mean acceptance length), checks of the tokens
//! and rates, and the per-position counts fitted within the rates'
//! rounding ([`crate::fit`]).

use crate::error::{Message, Setting};
use crate::fit::{self, NoFit, Rule};
use crate::message;

use super::Line;

/// Why a record gives no counts.
#[derive(Debug)]
pub(super) enum Refusal {
    /// The record contradicts itself: an error.
    Contradiction(String),
    /// Its drafts were not all of length K and it does not print their
    /// number, so the counts cannot be told.
    NotIdentified(Message),
}

/// Drafts and accepted-per-position counts of one record (see the module
/// docs), or why there are none.
pub(super) fn reconstruct(line: &Line) -> Result<(u64, Vec<u64>), Refusal> {
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
                return Err(Refusal::NotIdentified(message![
                    format!(
                        "Drafted: {} tokens is not a multiple of K = {k}: drafts had different lengths, and the line does not print the number of drafts, so the counts cannot be told (not identifiable); use the Prometheus counters (",
                        line.drafted
                    ),
                    Setting::Metrics,
                    ", ",
                    Setting::Prometheus,
                    ") instead",
                ]));
            }
            let n = line.drafted / k;
            if line.accepted <= line.drafted {
                let mal = 1.0 + line.accepted as f64 / n as f64;
                if (mal - mean).abs() > 0.005 + 1e-9 {
                    return Err(Refusal::NotIdentified(message![
                        format!(
                            "the mean acceptance length {mean:.2} is not 1 + Accepted / (Drafted / K) = {mal:.4}: the drafts were not all K = {k} tokens long, and the line does not print their number, so the counts cannot be told (not identifiable); use the Prometheus counters ("
                        ),
                        Setting::Metrics,
                        ", ",
                        Setting::Prometheus,
                        ") instead",
                    ]));
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

/// The accepted count at each position over `n` drafts ([`fit`], by
/// [`Rule::TowardRate`]), or why no such counts exist.
fn fit_counts(line: &Line, n: u64) -> Result<Vec<u64>, Refusal> {
    let half = 0.5 / line.scale as f64;
    fit::fit(&line.rates, half, n, line.accepted, None, Rule::TowardRate).map_err(|e| match e {
        NoFit::First | NoFit::Sum { .. } => Refusal::Contradiction(format!(
            "the per-position rates ({}) cannot add up to {} accepted tokens over {} drafts, even within their rounding",
            line.rates
                .iter()
                .map(|r| r.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            line.accepted,
            n
        )),
    })
}
