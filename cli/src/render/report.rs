//! `--format table`: the report for a person to read.
//!
//! One row per observed draft length `k`: its steps, its `k + 1` counts by
//! accepted `a`, its full-acceptance rate (`H[k][k]` over the row's steps;
//! `n/a` for `k = 0`, where nothing was drafted and the rate would be a
//! meaningless 100%) and its mean accepted count; then the totals by
//! accepted count, the summary figures (steps, tokens, mean acceptance
//! length, acceptance rate), and per position both acceptance rates (over
//! all steps, as vLLM's log line, and over the steps that drafted the
//! position). Every count has thousands separators.

use std::fmt::Write as _;

use specdec_metrics::AcceptanceHistogram;

use super::table::{Column, Table};
use crate::format::{group_digits, percent};

/// Renders `h` as text, ending in a newline.
pub fn render(h: &AcceptanceHistogram) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Acceptance histogram by draft length (K = num_spec_tokens = {})",
        h.max_draft_len()
    );
    rows_table(h, &mut out);
    out.push('\n');
    summary(h, &mut out);
    out.push('\n');
    positions_table(h, &mut out);
    out
}

/// One row per observed draft length, then the totals by accepted count.
fn rows_table(h: &AcceptanceHistogram, out: &mut String) {
    let rows: Vec<(usize, &[u64])> = h.observed_rows().collect();
    let Some(&(last, _)) = rows.last() else {
        out.push_str("  no verify step observed\n");
        return;
    };
    // Counts are shown only up to the longest observed draft length, all
    // in columns of one width.
    let totals = &h.acceptance_histogram()[..=last];
    let count_w = rows
        .iter()
        .flat_map(|(_, r)| r.iter())
        .chain(totals)
        .map(|&c| group_digits(c).len())
        .chain(std::iter::once(format!("a={last}").len()))
        .max()
        .unwrap_or(1);
    let mut columns = vec![Column::right("k").min_width(5), Column::right("steps")];
    columns.extend((0..=last).map(|a| {
        Column::right(format!("a={a}"))
            .min_width(count_w)
            .gap(if a == 0 { 2 } else { 1 })
    }));
    columns.extend([Column::right("full-accept"), Column::right("mean-accepted")]);
    let mut table = Table::new(columns);
    for &(k, row) in &rows {
        let row_steps = h.row_steps(k);
        let accepted: u64 = row.iter().enumerate().map(|(a, &c)| a as u64 * c).sum();
        let mean = accepted as f64 / row_steps as f64;
        // At k = 0 every step "accepts all" of nothing: not a rate.
        let full = match k {
            0 => "n/a".into(),
            _ => h.full_acceptance_rate(k).map_or("-".into(), percent),
        };
        let mut cells = vec![k.to_string(), group_digits(row_steps)];
        cells.extend((0..=last).map(|a| row.get(a).map_or(String::new(), |&c| group_digits(c))));
        cells.extend([full, format!("{mean:.3}")]);
        table.row(cells);
    }
    let mut all = vec!["all".to_owned(), group_digits(h.num_spec_steps())];
    all.extend(totals.iter().map(|&c| group_digits(c)));
    table.row(all);
    table.render(out);
}

/// The summary figures, one per line, values aligned to the right.
fn summary(h: &AcceptanceHistogram, out: &mut String) {
    let mut table = Table::new(vec![
        Column::left("").min_width(30),
        Column::right("").gap(0),
    ])
    .without_header();
    for (name, value) in [
        (
            "verify steps (num_spec_steps)",
            group_digits(h.num_spec_steps()),
        ),
        ("undrafted steps", group_digits(h.num_undrafted_steps())),
        (
            "rejected observations",
            group_digits(h.num_rejected_observations()),
        ),
        ("draft tokens", group_digits(h.num_draft_tokens())),
        (
            "accepted draft tokens",
            group_digits(h.num_accepted_draft_tokens()),
        ),
        (
            "mean acceptance length",
            format!("{:.4}", h.mean_acceptance_length()),
        ),
        ("draft acceptance rate", percent(h.draft_acceptance_rate())),
    ] {
        table.row(vec![name.to_owned(), value]);
    }
    table.render(out);
}

/// Both acceptance rates of every position up to the last one drafted.
fn positions_table(h: &AcceptanceHistogram, out: &mut String) {
    let drafted = h.num_draft_tokens_per_pos();
    let accepted = h.num_accepted_tokens_per_pos();
    let all_steps = h.acceptance_rate_per_pos();
    let conditional = h.conditional_acceptance_rate_per_pos();
    let Some(last_pos) = drafted.iter().rposition(|&d| d != 0) else {
        out.push_str("Acceptance by position: no draft token observed\n");
        return;
    };
    out.push_str(
        "Acceptance by position (of all steps, as vLLM logs it; of the steps that drafted it)\n",
    );
    // The two count columns share one width.
    let w = drafted
        .iter()
        .map(|&c| group_digits(c).len())
        .max()
        .unwrap_or(1)
        .max("accepted".len());
    let mut table = Table::new(vec![
        Column::right("pos").min_width(5),
        Column::right("drafted").min_width(w),
        Column::right("accepted").min_width(w),
        Column::right("of-all").min_width(10),
        Column::right("of-drafted").min_width(12),
    ]);
    for i in 0..=last_pos {
        table.row(vec![
            i.to_string(),
            group_digits(drafted[i]),
            group_digits(accepted[i]),
            percent(all_steps[i]),
            conditional[i].map_or("-".into(), percent),
        ]);
    }
    table.render(out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_example_as_a_table() {
        let mut h = AcceptanceHistogram::new(3).unwrap();
        for (k, a) in [(3, 0), (3, 3), (3, 2), (3, 3), (3, 1), (1, 1), (0, 0)] {
            h.observe(k, a).unwrap();
        }
        h.observe_undrafted();
        let _ = h.observe(2, 3);
        let t = render(&h);
        let expected = "\
Acceptance histogram by draft length (K = num_spec_tokens = 3)
    k  steps  a=0 a=1 a=2 a=3  full-accept  mean-accepted
    0      1    1                      n/a          0.000
    1      1    0   1              100.00%          1.000
    3      5    1   1   1   2       40.00%          1.800
  all      7    2   2   1   2

verify steps (num_spec_steps)      7
undrafted steps                    1
rejected observations              1
draft tokens                      16
accepted draft tokens             10
mean acceptance length        2.4286
draft acceptance rate         62.50%

Acceptance by position (of all steps, as vLLM logs it; of the steps that drafted it)
  pos   drafted  accepted      of-all    of-drafted
    0         6         5      71.43%        83.33%
    1         5         3      42.86%        60.00%
    2         5         2      28.57%        40.00%
";
        assert_eq!(t, expected, "\n{t}");
    }

    #[test]
    fn counts_have_thousands_separators_in_every_column() {
        let mut h = AcceptanceHistogram::new(2).unwrap();
        for _ in 0..1_234_567 {
            h.observe(2, 1).unwrap();
        }
        for _ in 0..1_000 {
            h.observe(0, 0).unwrap();
        }
        h.observe(2, 2).unwrap();
        let t = render(&h);
        let expected_rows = "\
Acceptance histogram by draft length (K = num_spec_tokens = 2)
    k      steps        a=0       a=1       a=2  full-accept  mean-accepted
    0      1,000      1,000                              n/a          0.000
    2  1,234,568          0 1,234,567         1        0.00%          1.000
  all  1,235,568      1,000 1,234,567         1
";
        assert!(t.starts_with(expected_rows), "\n{t}");
        assert!(
            t.contains("verify steps (num_spec_steps) 1,235,568\n"),
            "\n{t}"
        );
        assert!(
            t.contains("    0  1,234,568  1,234,568      99.92%       100.00%\n"),
            "\n{t}"
        );
        assert!(
            t.contains("    1  1,234,568          1       0.00%         0.00%\n"),
            "\n{t}"
        );
    }

    #[test]
    fn empty_table() {
        let t = render(&AcceptanceHistogram::new(2).unwrap());
        assert!(t.contains("no verify step observed"), "{t}");
        assert!(t.contains("no draft token observed"), "{t}");
        assert!(t.contains("mean acceptance length        1.0000"), "{t}");
    }
}
