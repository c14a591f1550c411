//! `advise --format table`: the recommendation for a person to read.
//!
//! Two header lines (`K`, verify steps, the step cost, the prior, the
//! credible level); one row per draft length `k = 0..=K` with every field
//! of its candidate, `*` on the recommendation; a legend for the marks
//! present; the recommendation in a sentence; one row per position with its
//! continuation counts, rate and posterior.

use std::fmt::Write as _;

use specdec_metrics::{Recommendation, StepCost};

use super::table::{Column, Table};
use crate::format::{group_digits, level_percent, percent, significant, trimmed};

/// The tables for people, ending in a newline.
pub fn render(rec: &Recommendation, cost: &StepCost) -> String {
    let mut out = String::new();
    let level = level_percent(rec.credible_level);
    header(rec, cost, &level, &mut out);
    out.push('\n');
    candidates(rec, &level, &mut out);
    out.push('\n');
    sentence(rec, &mut out);
    out.push('\n');
    positions(rec, &level, &mut out);
    out
}

/// The header lines: `K` and the steps, the cost, the prior, the level,
/// and what the intervals assume.
fn header(rec: &Recommendation, cost: &StepCost, level: &str, out: &mut String) {
    let max = rec.candidates.len() - 1;
    let _ = writeln!(
        out,
        "Draft length advice (K = num_spec_tokens = {max}, {} verify steps)",
        group_digits(rec.num_spec_steps)
    );
    let _ = writeln!(
        out,
        "step cost: {cost}; prior Beta({}, {}) on every continuation rate; {level} credible intervals",
        rec.prior.alpha, rec.prior.beta
    );
    if rec.intervals_assume_independent_steps {
        let _ = writeln!(
            out,
            "the intervals assume independent steps (one window; give several reports of successive intervals to account for acceptance that persists within requests)"
        );
    } else {
        let effect = if rec.dispersion > 1.0 {
            "the intervals are widened by that"
        } else {
            "less than binomial noise: the intervals are still at least the binomial width (never narrowed)"
        };
        let _ = writeln!(
            out,
            "{} windows pooled; they vary {:.2} times as much as binomial noise; {effect}",
            rec.windows, rec.dispersion
        );
    }
}

/// One row per draft length, `*` on the recommendation, and the legend of
/// the marks present.
fn candidates(rec: &Recommendation, level: &str, out: &mut String) {
    let mut table = Table::new(vec![
        Column::right(""),
        Column::right("k"),
        Column::right("E[accepted]"),
        Column::right(format!("{level} interval")),
        Column::right("tokens/step"),
        Column::right("cost"),
        Column::right("goodput"),
        Column::right("speedup"),
        Column::right("P(beats)"),
        Column::right("row steps"),
        Column::right("row mean"),
        Column::left("notes"),
    ]);
    let mut any_prior = false;
    for c in &rec.candidates {
        let chosen = c.draft_len == rec.draft_len;
        let mut notes = Vec::new();
        if c.uses_prior {
            notes.push("prior");
            any_prior = true;
        }
        if c.row_disagrees {
            notes.push("row differs");
        }
        table.row(vec![
            if chosen { "*" } else { "" }.to_owned(),
            c.draft_len.to_string(),
            format!("{:.3}", c.expected_accepted),
            format!(
                "[{:.3}, {:.3}]",
                c.accepted_interval[0], c.accepted_interval[1]
            ),
            format!("{:.3}", c.tokens_per_step),
            trimmed(significant(c.cost, 6)),
            significant(c.goodput, 4),
            format!("{:.3}x", c.speedup),
            if chosen {
                "-".to_owned()
            } else {
                percent(c.prob_beats_choice)
            },
            group_digits(c.row_steps),
            c.row_mean_accepted
                .map_or("-".to_owned(), |m| format!("{m:.3}")),
            notes.join(", "),
        ]);
    }
    table.render(out);
    out.push_str(
        "* the recommendation. P(beats): posterior probability that k has a higher goodput than it.\n",
    );
    if any_prior {
        let _ = writeln!(
            out,
            "prior: a position up to k has no trials; E[accepted] leans on the prior there, not on data."
        );
    }
    if rec.candidates.iter().any(|c| c.row_disagrees) {
        out.push_str(
            "row differs: the row's own mean is further from E[accepted] than chance allows (see the warning).\n",
        );
    }
}

/// The recommendation in a sentence.
fn sentence(rec: &Recommendation, out: &mut String) {
    match rec.draft_len {
        0 => out.push_str(
            "Recommendation: do not speculate (k = 0): no draft length is expected to beat a step without drafts.\n",
        ),
        k => {
            let _ = writeln!(
                out,
                "Recommendation: draft {k} token{} per step: expected speedup {:.2}x over not speculating.",
                if k == 1 { "" } else { "s" },
                rec.expected_speedup
            );
        }
    }
}

/// One row per position: its continuation counts, rate and posterior.
fn positions(rec: &Recommendation, level: &str, out: &mut String) {
    out.push_str(
        "Continuation by position i (trials: steps that reached i with every earlier draft accepted)\n",
    );
    let mut table = Table::new(vec![
        Column::right(""),
        Column::right("i"),
        Column::right("accepted"),
        Column::right("trials"),
        Column::right("rate"),
        Column::right("posterior"),
        Column::right(format!("{level} interval")),
        Column::left("notes"),
    ]);
    for p in &rec.positions {
        table.row(vec![
            String::new(),
            p.position.to_string(),
            group_digits(p.successes),
            group_digits(p.trials),
            p.rate.map_or("-".to_owned(), percent),
            percent(p.posterior_mean),
            format!("[{}, {}]", percent(p.interval[0]), percent(p.interval[1])),
            if p.from_prior { "prior" } else { "" }.to_owned(),
        ]);
    }
    table.render(out);
}
