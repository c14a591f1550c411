//! Property tests: `AcceptanceHistogram` against a plain reference model.
//!
//! The model keeps the list of observations and computes every figure of
//! the reference's "Derived figures" from it with naive loops, so it shares no code with the crate.

use proptest::prelude::*;
use serde_json::{Value, json};
use specdec_metrics::{AcceptanceHistogram, MergeError, ObserveError};

#[derive(Clone, Copy, Debug)]
enum Op {
    /// `observe(k, a)`, valid or not.
    Step(usize, usize),
    /// `observe_undrafted()`.
    Undrafted,
    /// `observe_scheduled(b)`, valid or not.
    Scheduled(usize),
}

/// The reference model: the valid steps and the valid scheduled budgets as
/// lists, plus two counters.
#[derive(Clone, Debug)]
struct Model {
    max: usize,
    steps: Vec<(usize, usize)>,
    budgets: Vec<usize>,
    undrafted: u64,
    rejected: u64,
}

impl Model {
    fn new(max: usize) -> Self {
        Model {
            max,
            steps: Vec::new(),
            budgets: Vec::new(),
            undrafted: 0,
            rejected: 0,
        }
    }

    /// Applies `op`; returns the error `observe` must give, if any.
    fn apply(&mut self, op: Op) -> Result<(), ObserveError> {
        match op {
            Op::Undrafted => {
                self.undrafted += 1;
                Ok(())
            }
            Op::Scheduled(b) if b > self.max => {
                self.rejected += 1;
                Err(ObserveError::BudgetExceedsMax {
                    budget: b,
                    max_draft_len: self.max,
                })
            }
            Op::Scheduled(b) => {
                self.budgets.push(b);
                Ok(())
            }
            Op::Step(k, a) if k > self.max => {
                self.rejected += 1;
                Err(ObserveError::DraftedExceedsMax {
                    drafted: k,
                    accepted: a,
                    max_draft_len: self.max,
                })
            }
            Op::Step(k, a) if a > k => {
                self.rejected += 1;
                Err(ObserveError::AcceptedExceedsDrafted {
                    drafted: k,
                    accepted: a,
                })
            }
            Op::Step(k, a) => {
                self.steps.push((k, a));
                Ok(())
            }
        }
    }

    fn from_ops(max: usize, ops: &[Op]) -> Self {
        let mut m = Model::new(max);
        for &op in ops {
            let _ = m.apply(op);
        }
        m
    }

    fn count(&self, k: usize, a: usize) -> u64 {
        self.steps.iter().filter(|&&s| s == (k, a)).count() as u64
    }

    fn row_steps(&self, k: usize) -> u64 {
        self.steps.iter().filter(|s| s.0 == k).count() as u64
    }

    fn row(&self, k: usize) -> Option<Vec<u64>> {
        if k > self.max {
            return None;
        }
        Some((0..=k).map(|a| self.count(k, a)).collect())
    }

    fn num_spec_steps(&self) -> u64 {
        self.steps.len() as u64
    }

    fn scheduled_steps_by_budget(&self) -> Vec<u64> {
        (0..=self.max)
            .map(|b| self.budgets.iter().filter(|&&x| x == b).count() as u64)
            .collect()
    }

    fn num_draft_tokens(&self) -> u64 {
        let mut sum = 0;
        for &(k, _) in &self.steps {
            sum += k as u64;
        }
        sum
    }

    fn num_accepted(&self) -> u64 {
        let mut sum = 0;
        for &(_, a) in &self.steps {
            sum += a as u64;
        }
        sum
    }

    fn acceptance_histogram(&self) -> Vec<u64> {
        let mut out = vec![0; self.max + 1];
        for &(_, a) in &self.steps {
            out[a] += 1;
        }
        out
    }

    fn accepted_per_pos(&self) -> Vec<u64> {
        (0..self.max)
            .map(|i| self.steps.iter().filter(|s| s.1 > i).count() as u64)
            .collect()
    }

    fn drafted_per_pos(&self) -> Vec<u64> {
        (0..self.max)
            .map(|i| self.steps.iter().filter(|s| s.0 > i).count() as u64)
            .collect()
    }

    fn mean_acceptance_length(&self) -> f64 {
        let steps = self.num_spec_steps();
        if steps == 0 {
            1.0
        } else {
            1.0 + (self.num_accepted() as f64 / steps as f64)
        }
    }

    fn draft_acceptance_rate(&self) -> f64 {
        let drafted = self.num_draft_tokens();
        if drafted == 0 {
            0.0
        } else {
            self.num_accepted() as f64 / drafted as f64
        }
    }

    fn full_acceptance_rate(&self, k: usize) -> Option<f64> {
        let row = self.row_steps(k);
        if k > self.max || row == 0 {
            None
        } else {
            Some(self.count(k, k) as f64 / row as f64)
        }
    }

    fn conditional_per_pos(&self) -> Vec<Option<f64>> {
        let acc = self.accepted_per_pos();
        let drafted = self.drafted_per_pos();
        (0..self.max)
            .map(|i| (drafted[i] != 0).then(|| acc[i] as f64 / drafted[i] as f64))
            .collect()
    }

    fn all_steps_per_pos(&self) -> Vec<f64> {
        let steps = self.num_spec_steps();
        self.accepted_per_pos()
            .into_iter()
            .map(|c| {
                if steps == 0 {
                    0.0
                } else {
                    c as f64 / steps as f64
                }
            })
            .collect()
    }

    /// The report of this model.
    fn report(&self) -> Value {
        let mut rows = serde_json::Map::new();
        for k in 0..=self.max {
            if self.row_steps(k) > 0 {
                rows.insert(k.to_string(), json!(self.row(k).unwrap()));
            }
        }
        json!({
            "mean_acceptance_length": self.mean_acceptance_length(),
            "draft_acceptance_rate": self.draft_acceptance_rate(),
            "acceptance_histogram": self.acceptance_histogram(),
            "acceptance_histogram_by_draft_length": rows,
            "num_spec_steps": self.num_spec_steps(),
            "num_accepted_draft_tokens": self.num_accepted(),
            "num_draft_tokens": self.num_draft_tokens(),
            "num_spec_tokens": self.max,
            "num_accepted_tokens_per_pos": self.accepted_per_pos(),
            "num_draft_tokens_per_pos": self.drafted_per_pos(),
            "num_undrafted_steps": self.undrafted,
            "num_rejected_observations": self.rejected,
            "scheduled_steps_by_budget": self.scheduled_steps_by_budget(),
        })
    }
}

/// Runs `ops` on a fresh histogram, ignoring the results.
fn build(max: usize, ops: &[Op]) -> AcceptanceHistogram {
    let mut h = AcceptanceHistogram::new(max).unwrap();
    for &op in ops {
        match op {
            Op::Step(k, a) => {
                let _ = h.observe(k, a);
            }
            Op::Undrafted => h.observe_undrafted(),
            Op::Scheduled(b) => {
                let _ = h.observe_scheduled(b);
            }
        }
    }
    h
}

/// Mostly valid steps, some invalid ones (`a > k`, `k > K`), some
/// undrafted steps and some scheduled budgets (a few above `K`).
fn op(max: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..=max).prop_flat_map(|k| (Just(k), 0..=k)).prop_map(|(k, a)| Op::Step(k, a)),
        2 => (0..=max + 2, 0..=max + 3).prop_map(|(k, a)| Op::Step(k, a)),
        1 => Just(Op::Undrafted),
        2 => (0..=max + 1).prop_map(Op::Scheduled),
    ]
}

fn ops(max: usize) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(max), 0..40)
}

/// `K` and one list of operations.
fn case() -> impl Strategy<Value = (usize, Vec<Op>)> {
    (1usize..=8).prop_flat_map(|max| (Just(max), ops(max)))
}

/// `K` and three lists of operations.
fn case3() -> impl Strategy<Value = (usize, Vec<Op>, Vec<Op>, Vec<Op>)> {
    (1usize..=8).prop_flat_map(|max| (Just(max), ops(max), ops(max), ops(max)))
}

proptest! {
    #[test]
    fn observe_results_match_the_model((max, ops) in case()) {
        let mut h = AcceptanceHistogram::new(max).unwrap();
        let mut m = Model::new(max);
        for op in ops {
            match op {
                Op::Step(k, a) => prop_assert_eq!(h.observe(k, a), m.apply(op)),
                Op::Undrafted => {
                    h.observe_undrafted();
                    m.apply(op).unwrap();
                }
                Op::Scheduled(b) => {
                    // `check_scheduled` gives the very result, recording nothing.
                    let checked = ObserveError::check_scheduled(max, b);
                    let recorded = h.observe_scheduled(b);
                    prop_assert_eq!(recorded, checked);
                    prop_assert_eq!(recorded, m.apply(op));
                }
            }
        }
        prop_assert_eq!(h.num_undrafted_steps(), m.undrafted);
        prop_assert_eq!(h.num_rejected_observations(), m.rejected);
    }

    #[test]
    fn every_figure_matches_the_model((max, ops) in case()) {
        let h = build(max, &ops);
        let m = Model::from_ops(max, &ops);
        prop_assert_eq!(h.max_draft_len(), max);
        for k in 0..=max + 2 {
            for a in 0..=k + 1 {
                prop_assert_eq!(h.count(k, a), m.count(k, a), "count({}, {})", k, a);
            }
            prop_assert_eq!(h.row(k).map(<[u64]>::to_vec), m.row(k), "row({})", k);
            prop_assert_eq!(h.full_acceptance_rate(k), m.full_acceptance_rate(k), "full({})", k);
        }
        prop_assert_eq!(h.num_spec_steps(), m.num_spec_steps());
        prop_assert_eq!(h.num_draft_tokens(), m.num_draft_tokens());
        prop_assert_eq!(h.num_accepted_draft_tokens(), m.num_accepted());
        prop_assert_eq!(h.num_undrafted_steps(), m.undrafted);
        prop_assert_eq!(h.num_rejected_observations(), m.rejected);
        prop_assert_eq!(h.acceptance_histogram(), m.acceptance_histogram());
        prop_assert_eq!(h.num_accepted_tokens_per_pos(), m.accepted_per_pos());
        prop_assert_eq!(h.num_draft_tokens_per_pos(), m.drafted_per_pos());
        prop_assert_eq!(h.mean_acceptance_length(), m.mean_acceptance_length());
        prop_assert_eq!(h.draft_acceptance_rate(), m.draft_acceptance_rate());
        prop_assert_eq!(h.conditional_acceptance_rate_per_pos(), m.conditional_per_pos());
        prop_assert_eq!(h.acceptance_rate_per_pos(), m.all_steps_per_pos());
        let by_budget = m.scheduled_steps_by_budget();
        prop_assert_eq!(h.scheduled_steps_by_budget(), &by_budget[..]);
        for b in 0..=max + 2 {
            prop_assert_eq!(h.scheduled_steps(b), by_budget.get(b).copied().unwrap_or(0));
        }
        prop_assert_eq!(h.num_scheduled_steps(), m.budgets.len() as u64);
        let recorded = m.steps.len() + m.budgets.len() + (m.undrafted + m.rejected) as usize;
        prop_assert_eq!(h.is_empty(), recorded == 0);
    }

    #[test]
    fn report_matches_the_model((max, ops) in case()) {
        let h = build(max, &ops);
        let m = Model::from_ops(max, &ops);
        prop_assert_eq!(serde_json::to_value(&h).unwrap(), m.report());
    }

    #[test]
    fn report_round_trips_to_an_equal_histogram((max, ops) in case()) {
        let h = build(max, &ops);
        let text = serde_json::to_string(&h).unwrap();
        let back: AcceptanceHistogram = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(&back, &h);
        // And the text it writes again is the same text.
        prop_assert_eq!(serde_json::to_string(&back).unwrap(), text);
    }

    #[test]
    fn merge_equals_the_concatenated_observations((max, xs, ys, _zs) in case3()) {
        let mut a = build(max, &xs);
        a.merge(&build(max, &ys)).unwrap();
        let all: Vec<Op> = xs.iter().chain(&ys).copied().collect();
        prop_assert_eq!(&a, &build(max, &all));
        prop_assert_eq!(serde_json::to_value(&a).unwrap(), Model::from_ops(max, &all).report());
    }

    #[test]
    fn merge_is_commutative((max, xs, ys, _zs) in case3()) {
        let (a, b) = (build(max, &xs), build(max, &ys));
        let mut ab = a.clone();
        ab.merge(&b).unwrap();
        let mut ba = b.clone();
        ba.merge(&a).unwrap();
        prop_assert_eq!(ab, ba);
    }

    #[test]
    fn merge_is_associative((max, xs, ys, zs) in case3()) {
        let (a, b, c) = (build(max, &xs), build(max, &ys), build(max, &zs));
        // (a + b) + c
        let mut left = a.clone();
        left.merge(&b).unwrap();
        left.merge(&c).unwrap();
        // a + (b + c)
        let mut bc = b.clone();
        bc.merge(&c).unwrap();
        let mut right = a.clone();
        right.merge(&bc).unwrap();
        prop_assert_eq!(left, right);
    }

    #[test]
    fn delta_since_undoes_merge((max, xs, ys, _zs) in case3()) {
        let (a, b) = (build(max, &xs), build(max, &ys));
        let mut merged = a.clone();
        merged.merge(&b).unwrap();
        prop_assert_eq!(merged.delta_since(&a).unwrap(), b.clone());
        prop_assert_eq!(merged.delta_since(&b).unwrap(), a);
    }

    #[test]
    fn delta_since_a_prefix_is_the_suffix((max, xs, ys, _zs) in case3()) {
        let all: Vec<Op> = xs.iter().chain(&ys).copied().collect();
        let later = build(max, &all);
        let earlier = build(max, &xs);
        prop_assert_eq!(later.delta_since(&earlier).unwrap(), build(max, &ys));
    }

    #[test]
    fn delta_since_a_strictly_later_histogram_fails(
        (max, xs, ys, _zs) in case3(),
        extra in prop_oneof![
            Just(Op::Step(0, 0)),
            Just(Op::Undrafted),
            Just(Op::Step(0, 1)),
            Just(Op::Scheduled(0)),
            Just(Op::Scheduled(9)),
        ],
    ) {
        // `earlier` has everything `h` has plus one more observation.
        let h = build(max, &xs);
        let mut more = xs.clone();
        more.extend(&ys);
        more.push(extra);
        let earlier = build(max, &more);
        let before = h.clone();
        let is_not_earlier = matches!(h.delta_since(&earlier), Err(MergeError::NotEarlier { .. }));
        prop_assert!(is_not_earlier);
        prop_assert_eq!(h, before);
    }

    #[test]
    fn merging_different_max_draft_len_fails_and_changes_nothing(
        max in 1usize..=8,
        shift in 1usize..8,
        seed_ops in prop::collection::vec((0usize..=8, 0usize..=8), 0..10),
    ) {
        let other_max = (max - 1 + shift) % 8 + 1; // in 1..=8, never `max`
        prop_assume!(other_max != max);
        let ops: Vec<Op> = seed_ops.iter().map(|&(k, a)| Op::Step(k, a)).collect();
        let mut a = build(max, &ops);
        let b = build(other_max, &ops);
        let before = a.clone();
        let mismatch = MergeError::MaxDraftLenMismatch { left: max, right: other_max };
        prop_assert_eq!(a.merge(&b), Err(mismatch));
        prop_assert_eq!(&a, &before);
        prop_assert_eq!(a.delta_since(&b), Err(mismatch));
    }
}

// ---------------------------------------------------------------------------
// Merging histograms with counts near u64::MAX (no observation list can
// build them: they come from reports).

/// Counts that make sums and `k`-weighted sums straddle `u64::MAX`.
fn big_count() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1),
        Just(1 << 61),
        Just(1 << 62),
        Just(1 << 63),
        Just(u64::MAX / 3),
        Just(u64::MAX - 1),
        Just(u64::MAX),
        any::<u64>(),
    ]
}

/// Bucket counts of a `K = max` triangle, row by row, that make a readable
/// report (every derived figure fits in `u64`): drawn with `big_count`,
/// then the largest count halved until the report fits, so that the totals
/// often end up just below `u64::MAX`.
fn readable_triangle(max: usize) -> impl Strategy<Value = Vec<Vec<u64>>> {
    (0..=max)
        .map(|k| prop::collection::vec(big_count(), k + 1))
        .collect::<Vec<_>>()
        .prop_map(move |mut rows| {
            while report_of_rows(max, &widen(&rows), &[]).is_none() {
                let largest = rows.iter_mut().flatten().max().unwrap();
                *largest /= 2;
            }
            rows
        })
}

/// `K + 1` scheduled-budget counts whose sum fits in `u64`, drawn like
/// `readable_triangle`'s.
fn readable_budgets(max: usize) -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(big_count(), max + 1).prop_map(|mut budgets| {
        while budgets
            .iter()
            .try_fold(0u64, |s, &c| s.checked_add(c))
            .is_none()
        {
            *budgets.iter_mut().max().unwrap() /= 2;
        }
        budgets
    })
}

/// A readable triangle and readable scheduled budgets.
type Counts = (Vec<Vec<u64>>, Vec<u64>);

/// `K` in `1..=3` and two readable sets of counts.
fn big_pair() -> impl Strategy<Value = (usize, Counts, Counts)> {
    (1usize..=3).prop_flat_map(|max| {
        let counts = move || (readable_triangle(max), readable_budgets(max));
        (Just(max), counts(), counts())
    })
}

/// The report of the bucket counts `rows` and the scheduled-budget counts
/// `budgets` (none: all zero), every figure computed in `u128` by naive
/// loops; `None` when a figure does not fit in `u64` (no such report can be
/// written or read).
fn report_of_rows(max: usize, rows: &[Vec<u128>], budgets: &[u128]) -> Option<Value> {
    let fit = |x: u128| u64::try_from(x).ok();
    let mut steps = 0u128;
    let mut drafted = 0u128;
    let mut accepted = 0u128;
    let mut by_accepted = vec![0u128; max + 1];
    let mut acc_pos = vec![0u128; max];
    let mut draft_pos = vec![0u128; max];
    let mut by_k = serde_json::Map::new();
    for (k, row) in rows.iter().enumerate() {
        for (a, &c) in row.iter().enumerate() {
            steps += c;
            drafted += k as u128 * c;
            accepted += a as u128 * c;
            by_accepted[a] += c;
            for i in 0..max {
                if a > i {
                    acc_pos[i] += c;
                }
                if k > i {
                    draft_pos[i] += c;
                }
            }
        }
        if row.iter().any(|&c| c != 0) {
            let row: Option<Vec<u64>> = row.iter().map(|&c| fit(c)).collect();
            by_k.insert(k.to_string(), json!(row?));
        }
    }
    let list = |v: &[u128]| v.iter().map(|&x| fit(x)).collect::<Option<Vec<u64>>>();
    let (steps, drafted, accepted) = (fit(steps)?, fit(drafted)?, fit(accepted)?);
    fit(budgets.iter().sum())?;
    let mut scheduled = list(budgets)?;
    scheduled.resize(max + 1, 0);
    Some(json!({
        "mean_acceptance_length": if steps == 0 { 1.0 } else { 1.0 + (accepted as f64 / steps as f64) },
        "draft_acceptance_rate": if drafted == 0 { 0.0 } else { accepted as f64 / drafted as f64 },
        "acceptance_histogram": list(&by_accepted)?,
        "acceptance_histogram_by_draft_length": by_k,
        "num_spec_steps": steps,
        "num_accepted_draft_tokens": accepted,
        "num_draft_tokens": drafted,
        "num_spec_tokens": max,
        "num_accepted_tokens_per_pos": list(&acc_pos)?,
        "num_draft_tokens_per_pos": list(&draft_pos)?,
        "num_undrafted_steps": 0,
        "num_rejected_observations": 0,
        "scheduled_steps_by_budget": scheduled,
    }))
}

fn widen(rows: &[Vec<u64>]) -> Vec<Vec<u128>> {
    rows.iter().map(|r| widen1(r)).collect()
}

fn widen1(counts: &[u64]) -> Vec<u128> {
    counts.iter().map(|&c| u128::from(c)).collect()
}

proptest! {
    #[test]
    fn merge_never_makes_a_histogram_that_cannot_be_written_and_read_back(
        (max, (xs, xb), (ys, yb)) in big_pair(),
    ) {
        let rx = report_of_rows(max, &widen(&xs), &widen1(&xb)).unwrap();
        let ry = report_of_rows(max, &widen(&ys), &widen1(&yb)).unwrap();
        let mut a: AcceptanceHistogram = serde_json::from_value(rx).unwrap();
        let b: AcceptanceHistogram = serde_json::from_value(ry).unwrap();
        let before = a.clone();
        let sum: Vec<Vec<u128>> = widen(&xs)
            .iter()
            .zip(widen(&ys))
            .map(|(r, s)| r.iter().zip(s).map(|(x, y)| x + y).collect())
            .collect();
        let budget_sum: Vec<u128> = widen1(&xb).iter().zip(widen1(&yb)).map(|(x, y)| x + y).collect();
        match (a.merge(&b), report_of_rows(max, &sum, &budget_sum)) {
            (Ok(()), Some(want)) => {
                // Written, it is the report of the summed rows; read back
                // from its text, the same histogram. (The report is compared
                // as a value: serde_json's default float parser may be one
                // ulp off, which the reader's rate tolerance absorbs.)
                prop_assert_eq!(serde_json::to_value(&a).unwrap(), want);
                let text = serde_json::to_string(&a).unwrap();
                prop_assert_eq!(serde_json::from_str::<AcceptanceHistogram>(&text).unwrap(), a);
            }
            (Err(e), None) => {
                let is_overflow = matches!(e, MergeError::Overflow { .. } | MergeError::TotalOverflow { .. });
                prop_assert!(is_overflow, "{:?}", e);
                prop_assert_eq!(a, before);
            }
            (got, want) => prop_assert!(false, "merge gave {:?}, the summed rows' report {:?}", got, want),
        }
    }
}
