//! What `corpus` prints: per set, one table per `K` whose rows are the
//! cells (`c`, batch) and whose columns are the policies, each the median
//! over the set's traces of the policy's goodput over the trace's best
//! static length, with the minimum under it; or one JSON object with every
//! trace's ratio.

use std::fmt::Write as _;

use serde::Serialize;
use specdec_sim::corpus::{CellResult, Report, SetResult};

use crate::format::{group_digits, sanitize};
use crate::render::table::{Column, Table};
use crate::render::whatif::{DRAIN_NOTE, kind, policy_name};

/// A ratio to the best static length, as the table prints it.
fn ratio(v: f64) -> String {
    format!("{v:.3}")
}

/// The median best static length: whole, or halfway between two.
fn best_k(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// The set's header: its traces and what each figure is.
fn header(out: &mut String, report: &Report, set: &SetResult) {
    let traces = &set.set.traces;
    let replayed: usize = traces.iter().map(|t| t.traces.requests().len()).sum();
    let in_files: usize = traces.iter().map(|t| t.file_requests).sum();
    let positions: u64 = traces.iter().map(|t| t.traces.positions()).sum();
    let sample = if report.sample == 0 || replayed == in_files {
        format!("{} requests", group_digits(replayed as u64))
    } else {
        format!(
            "{} of {} requests (at most {} per trace, chosen by a hash of their ids)",
            group_digits(replayed as u64),
            group_digits(in_files as u64),
            group_digits(report.sample as u64)
        )
    };
    let _ = writeln!(
        out,
        "corpus {}: {} trace{}, {sample}, {} output positions",
        sanitize(&set.set.name),
        traces.len(),
        if traces.len() == 1 { "" } else { "s" },
        group_digits(positions)
    );
    let _ = writeln!(
        out,
        "step cost 1 + c d (d: mean tokens drafted per request)\n\
         batch fed {}\n\
         controllers updated every {} engine steps, deciding on at least {} request-steps",
        crate::render::whatif::load_text(report.grid.load),
        report.grid.interval,
        report
            .grid
            .update_observations
            .unwrap_or(specdec_metrics::DEFAULT_UPDATE_OBSERVATIONS)
    );
    let of = if traces.len() == 1 {
        "(one trace: its ratio)".to_string()
    } else {
        format!("median over the {} traces, minimum under it", traces.len())
    };
    let _ = writeln!(
        out,
        "each policy: goodput / the trace's best static k (0..=K), {of}"
    );
    // Kept full, no step runs below a full batch: no k is ever starred.
    if report.grid.load == specdec_sim::whatif::Load::Once {
        let _ = writeln!(
            out,
            "best k*: {}",
            if traces.len() == 1 {
                "half or more of the best static k's cost is spent below a full batch"
            } else {
                "the median share of the best static k's cost spent below a full batch is half \
                 or more"
            }
        );
    }
}

/// One table: the cells of one `K`.
fn k_table(out: &mut String, report: &Report, cells: &[&CellResult], traces: usize) {
    let mut columns = vec![
        Column::right("c"),
        Column::right("batch"),
        Column::right("best k"),
    ];
    columns.extend(
        report
            .grid
            .policies
            .iter()
            .map(|&p| Column::right(policy_name(p)).min_width(7)),
    );
    let mut table = Table::new(columns);
    for cell in cells {
        let mut median = vec![
            format!("{}", cell.cell.cost),
            cell.cell.batch.to_string(),
            format!(
                "{}{}",
                best_k(cell.best_static_median),
                // An unmarked length keeps the marked ones' digits in line.
                if cell.best_static_drain_share_median >= DRAIN_NOTE {
                    "*"
                } else {
                    " "
                }
            ),
        ];
        // The closing parenthesis of the minimum sticks out: the medians'
        // digits line up with the minimums'.
        median.extend(
            cell.policies
                .iter()
                .map(|p| format!("{} ", ratio(p.spread.median))),
        );
        let mut min = vec![String::new(); 3];
        min.extend(
            cell.policies
                .iter()
                .map(|p| format!("({})", ratio(p.spread.min))),
        );
        table.row(median);
        // Of one trace, the minimum is the median.
        if traces > 1 {
            table.row(min);
        }
    }
    table.render(out);
}

/// The table for people: per set, its header, one table per `K`, and its
/// traces.
pub fn table(report: &Report) -> String {
    let mut out = String::new();
    for (i, set) in report.sets.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        header(&mut out, report, set);
        for &k in &report.grid.max_draft_lens {
            let cells: Vec<&CellResult> = set
                .cells
                .iter()
                .filter(|c| c.cell.max_draft_len == k)
                .collect();
            let _ = writeln!(out, "\nK = {k}");
            k_table(&mut out, report, &cells, set.set.traces.len());
        }
        out.push_str("\ntraces (requests replayed, in the file, output positions replayed):\n");
        let mut traces = Table::new(vec![
            Column::left(""),
            Column::left(""),
            Column::right(""),
            Column::right(""),
            Column::right(""),
        ])
        .without_header();
        for t in &set.set.traces {
            traces.row(vec![
                String::new(),
                sanitize(&t.name),
                group_digits(t.traces.requests().len() as u64),
                group_digits(t.file_requests as u64),
                group_digits(t.traces.positions()),
            ]);
        }
        traces.render(&mut out);
    }
    out
}

#[derive(Serialize)]
struct JsonTrace<'a> {
    trace: &'a str,
    requests: usize,
    requests_in_file: usize,
    positions: u64,
}

#[derive(Serialize)]
struct JsonPolicy<'a> {
    policy: String,
    kind: &'static str,
    median: f64,
    min: f64,
    min_trace: &'a str,
    /// One per trace, in the set's order.
    ratios: &'a [f64],
}

#[derive(Serialize)]
struct JsonCell<'a> {
    max_draft_len: usize,
    cost: f64,
    batch: usize,
    traces: usize,
    best_static_draft_len_median: f64,
    best_static_draft_lens: &'a [usize],
    best_static_drain_share_median: f64,
    best_static_drain_shares: &'a [f64],
    best_static_goodputs: &'a [f64],
    policies: Vec<JsonPolicy<'a>>,
}

#[derive(Serialize)]
struct JsonSet<'a> {
    set: &'a str,
    traces: Vec<JsonTrace<'a>>,
    cells: Vec<JsonCell<'a>>,
}

#[derive(Serialize)]
struct Json<'a> {
    max_draft_lens: &'a [usize],
    costs: &'a [f64],
    batches: &'a [usize],
    interval_steps: u64,
    update_observations: u64,
    cost_rule: &'static str,
    load: &'static str,
    sample: usize,
    policies: Vec<String>,
    sets: Vec<JsonSet<'a>>,
}

/// The object of `--format json`.
pub fn json(report: &Report) -> impl Serialize + '_ {
    let grid = &report.grid;
    Json {
        max_draft_lens: &grid.max_draft_lens,
        costs: &grid.costs,
        batches: &grid.batches,
        interval_steps: grid.interval,
        update_observations: grid
            .update_observations
            .unwrap_or(specdec_metrics::DEFAULT_UPDATE_OBSERVATIONS),
        cost_rule: "drafted",
        load: grid.load.as_str(),
        sample: report.sample,
        policies: grid.policies.iter().map(|&p| policy_name(p)).collect(),
        sets: report
            .sets
            .iter()
            .map(|set| {
                let traces = &set.set.traces;
                JsonSet {
                    set: &set.set.name,
                    traces: traces
                        .iter()
                        .map(|t| JsonTrace {
                            trace: &t.name,
                            requests: t.traces.requests().len(),
                            requests_in_file: t.file_requests,
                            positions: t.traces.positions(),
                        })
                        .collect(),
                    cells: set
                        .cells
                        .iter()
                        .map(|c| JsonCell {
                            max_draft_len: c.cell.max_draft_len,
                            cost: c.cell.cost,
                            batch: c.cell.batch,
                            traces: traces.len(),
                            best_static_draft_len_median: c.best_static_median,
                            best_static_draft_lens: &c.best_static,
                            best_static_drain_share_median: c.best_static_drain_share_median,
                            best_static_drain_shares: &c.best_static_drain_share,
                            best_static_goodputs: &c.best_static_goodput,
                            policies: c
                                .policies
                                .iter()
                                .map(|p| JsonPolicy {
                                    policy: policy_name(p.policy),
                                    kind: kind(p.policy),
                                    median: p.spread.median,
                                    min: p.spread.min,
                                    min_trace: &traces[p.spread.min_trace].name,
                                    ratios: &p.ratios,
                                })
                                .collect(),
                        })
                        .collect(),
                }
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_median_length_is_whole_or_halfway() {
        assert_eq!(best_k(4.0), "4");
        assert_eq!(best_k(0.0), "0");
        assert_eq!(best_k(39.5), "39.5");
        assert_eq!(ratio(0.98765), "0.988");
        assert_eq!(ratio(1.0), "1.000");
    }
}
