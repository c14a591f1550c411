//! `advise --metrics/--prometheus/--vllm-log --format table`: per group,
//! a heading (the group, `K`, the drafts, how the counts are known), the
//! notes, then either the advice's tables ([`super::advice`]) followed by
//! the comparison with the current `K`, the engine's setting, the
//! positions never drafted and any extrapolation (labelled as one), or the
//! bounds, labelled as bounds.

use std::fmt::Write as _;

use specdec_ingest::RequestFigures;
use specdec_ingest::source::responses::quantile;
use specdec_metrics::{Recommendation, StepCost};

use super::table::{Column, Table};
use crate::advice::{EngineAdvice, ExactBecause, GroupAdvice, PositionBounds, Verdict};
use crate::format::{group_digits, level_percent, percent};

/// The text, ending in a newline.
pub fn render(view: &EngineAdvice, cost: &StepCost) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Source: {} ({})", view.source, view.read_as);
    for g in &view.groups {
        out.push('\n');
        group_header(view, g, &mut out);
        if let Some(rec) = &g.recommendation {
            recommendation(view, g, rec, cost, &mut out);
        }
        if let Some(bounds) = &g.bounds {
            bounds_table(view, bounds, &mut out);
        }
    }
    if let Some(requests) = &view.requests {
        out.push('\n');
        out.push_str(&request_spread(requests));
    }
    out
}

/// The group's heading line and its notes.
fn group_header(view: &EngineAdvice, g: &GroupAdvice, out: &mut String) {
    let k = g.max_draft_len;
    let known = match (g.identified, g.exact_because, view.exact_from) {
        (Verdict::Bounds, _, _) => "NOT ADVISED: the counters give bounds only".to_owned(),
        (_, _, Some(from)) => format!("counts exact ({from})"),
        (_, Some(ExactBecause::ByDraftLength), None) => {
            "counts exact (the by-draft-length family)".to_owned()
        }
        _ if view.reconstruction.is_some() => {
            "counts reconstructed from the log, every draft of K tokens".to_owned()
        }
        _ => "counts exact (every draft had K tokens)".to_owned(),
    };
    let name = g.name();
    let _ = writeln!(
        out,
        "== {}K = {k}, {} drafts; {known} ==",
        if name.is_empty() {
            String::new()
        } else {
            format!("{name}: ")
        },
        group_digits(g.drafts)
    );
    for note in &g.notes {
        let _ = writeln!(out, "note: {note}");
    }
}

/// The advice of a group whose counts are identified.
fn recommendation(
    view: &EngineAdvice,
    g: &GroupAdvice,
    rec: &Recommendation,
    cost: &StepCost,
    out: &mut String,
) {
    let k = g.max_draft_len;
    let level = level_percent(view.credible_level);
    out.push('\n');
    out.push_str(&super::advice::render(rec, cost));
    out.push('\n');
    if let Some(r) = &view.reconstruction {
        let _ = writeln!(out, "{}\n", reconstruction_caveat(rec, r.max_rate_error));
    }
    if let Some(v) = &g.versus_current {
        let (current, ratio, interval, prob) = (v.draft_len, v.ratio, v.interval, v.prob_better);
        if rec.draft_len == current {
            let _ = writeln!(
                out,
                "Versus the current K = {current}: keep it; no shorter draft is expected to do better."
            );
        } else {
            let _ = writeln!(
                out,
                "Versus the current K = {current}: drafting {} is expected to give {ratio:.3}x the goodput of drafting {current} ({level} interval {:.3}x to {:.3}x; probability it is better {}).",
                rec.draft_len,
                interval[0],
                interval[1],
                percent(prob)
            );
        }
    }
    if let Some(setting) = &g.setting {
        let _ = writeln!(out, "Set: {setting}");
    }
    let _ = writeln!(
        out,
        "Positions above K = {k} were never drafted: nothing measured says how drafts longer than {k} would do."
    );
    if let Some(x) = &g.extrapolation {
        let _ = writeln!(
            out,
            "Extrapolation (a guess, not a measurement): if every position above {} continued at the rate measured there ({}), drafting {} would be best (speedup {:.2}x over not speculating). Raise K to {} and measure before trusting it.",
            x.from_position,
            percent(x.rate),
            x.draft_len,
            x.expected_speedup,
            x.draft_len
        );
    }
}

/// The bounds of a group whose counts are not identified.
fn bounds_table(view: &EngineAdvice, bounds: &[PositionBounds], out: &mut String) {
    if view.requests.is_some() || view.exact_from.is_some() {
        // Responses: a request's counts may fit drafts of one length as
        // well as of several, so "had different lengths" may be untrue.
        let _ = writeln!(
            out,
            "The responses' counts do not fix every request's draft lengths (see the notes): how many drafts reached position i with every earlier token accepted (the trials) is known only between bounds, so no continuation rate and no advice is given. Draft K tokens every time, or give the rows by draft length, to be advised."
        );
    } else {
        let _ = writeln!(
            out,
            "Drafts had different lengths, and {}'s counters do not say which: how many drafts reached position i with every earlier token accepted (the trials) is known only between bounds, so no continuation rate and no advice is given. Export this crate's by-draft-length family, or draft K tokens every time, to be advised.",
            view.engine.name()
        );
    }
    out.push('\n');
    out.push_str("Continuation bounds by position i (bounds, not estimates)\n");
    let mut table = Table::new(vec![
        Column::right(""),
        Column::right("i"),
        Column::right("accepted"),
        Column::right("trials min"),
        Column::right("trials max"),
        Column::right("rate min"),
        Column::right("rate max"),
    ]);
    for b in bounds {
        table.row(vec![
            String::new(),
            b.position.to_string(),
            group_digits(b.successes),
            group_digits(b.trials_min),
            group_digits(b.trials_max),
            b.rate_min.map_or("-".into(), percent),
            b.rate_max.map_or("-".into(), percent),
        ]);
    }
    table.render(out);
}

/// The spread of the requests' mean acceptance lengths, and the requests
/// furthest below the rest.
fn request_spread(requests: &[RequestFigures]) -> String {
    let mut out = String::new();
    let drafted: Vec<&RequestFigures> = requests.iter().filter(|r| r.steps > 0).collect();
    let mut lengths: Vec<f64> = drafted.iter().map(|r| r.mean_acceptance_length).collect();
    lengths.sort_by(f64::total_cmp);
    let q = |p: f64| quantile(&lengths, p).map_or("-".to_owned(), |v| format!("{v:.2}"));
    let _ = writeln!(
        out,
        "Across {} requests that drafted ({} in all), mean acceptance length per request: min {}, 10% {}, median {}, 90% {}, max {}",
        group_digits(drafted.len() as u64),
        group_digits(requests.len() as u64),
        q(0.0),
        q(0.1),
        q(0.5),
        q(0.9),
        q(1.0)
    );
    let mut lowest = drafted.clone();
    lowest.sort_by(|a, b| {
        a.mean_acceptance_length
            .total_cmp(&b.mean_acceptance_length)
    });
    let mut table = Table::new(vec![
        Column::left("request"),
        Column::right("steps"),
        Column::right("drafted"),
        Column::right("accepted"),
        Column::right("mean acceptance length"),
        Column::right("acceptance rate"),
    ]);
    for r in lowest.iter().take(10) {
        table.row(vec![
            r.id.clone(),
            group_digits(r.steps),
            group_digits(r.draft_tokens),
            group_digits(r.accepted),
            format!("{:.2}", r.mean_acceptance_length),
            r.draft_acceptance_rate.map_or("-".into(), percent),
        ]);
    }
    let _ = writeln!(
        out,
        "The {} lowest (every request's figures are in --format json):",
        lowest.len().min(10)
    );
    table.render(&mut out);
    out
}

/// What the intervals of counts reconstructed from vLLM's log leave out:
/// the rounding of its printed rates, which no interval here includes.
pub fn reconstruction_caveat(rec: &Recommendation, error: f64) -> String {
    let narrowest = rec
        .positions
        .iter()
        .filter(|p| !p.from_prior)
        .map(|p| (p.interval[1] - p.interval[0]) / 2.0)
        .fold(f64::INFINITY, f64::min);
    let mut text = format!(
        "The intervals EXCLUDE the reconstruction error: the log prints its rates rounded, so every P_i (the share of drafts accepting positions 1 to i) is known only to ±{error:.5}"
    );
    if narrowest.is_finite() && narrowest > 0.0 {
        let _ = write!(
            text,
            ", {} times the half-width of the narrowest position interval (±{narrowest:.5}); differences smaller than ±{error:.5} are not measured",
            super::super::format::significant(error / narrowest, 2)
        );
    }
    text.push('.');
    text
}
