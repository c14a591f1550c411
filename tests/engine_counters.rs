//! `EngineCounters`: the continuation counts an engine's per-position
//! counters identify, against the histogram that produced them.

use proptest::prelude::*;
use specdec_metrics::{
    AcceptanceHistogram, Advisor, Continuation, CounterSeries, EngineCounters, Exactness,
    Identified, StepCost,
};

fn histogram(max: usize, steps: &[(usize, usize)]) -> AcceptanceHistogram {
    let mut h = AcceptanceHistogram::new(max).unwrap();
    for &(k, a) in steps {
        h.observe(k, a).unwrap();
    }
    h
}

/// What an engine such as vLLM exports for the steps of `h` (drafts of
/// length 0 included in the drafts, as this crate counts them).
fn counters(h: &AcceptanceHistogram) -> EngineCounters {
    EngineCounters::new(
        h.max_draft_len(),
        h.num_spec_steps(),
        h.num_draft_tokens(),
        h.num_accepted_draft_tokens(),
        h.num_accepted_tokens_per_pos(),
    )
    .unwrap()
}

/// Steps `(k, a)`, `a <= k <= max`.
fn steps(max: usize, len: usize) -> impl Strategy<Value = Vec<(usize, usize)>> {
    prop::collection::vec((0..=max).prop_flat_map(|k| (Just(k), 0..=k)), 0..len)
}

proptest! {
    /// Drafts all of length `K`: the counters identify the continuation
    /// exactly, and it is the histogram's.
    #[test]
    fn drafts_of_one_length_are_identified_exactly(max in 1usize..=8, accepted in prop::collection::vec(0usize..=8, 0..80)) {
        let steps: Vec<_> = accepted.into_iter().map(|a| (max, a.min(max))).collect();
        let h = histogram(max, &steps);
        match counters(&h).identify().unwrap() {
            Identified::Exact { continuation, because } => {
                prop_assert_eq!(because, Exactness::SameLength);
                prop_assert_eq!(continuation, Continuation::new(&h));
            }
            other => prop_assert!(false, "not exact: {:?}", other),
        }
        // Per-position draft counts say the same.
        let with_per_pos = counters(&h).with_draft_tokens_per_pos(h.num_draft_tokens_per_pos()).unwrap();
        let exact = matches!(with_per_pos.identify().unwrap(), Identified::Exact { .. });
        prop_assert!(exact, "per-position counts all equal to the drafts are exact");
    }

    /// Drafts of any length: the bounds hold the true trials, and with the
    /// by-draft-length family the counts are the histogram's exactly.
    #[test]
    fn bounds_hold_the_truth_and_the_family_makes_it_exact(max in 1usize..=6, steps in steps(6, 80)) {
        let steps: Vec<_> = steps.into_iter().filter(|&(k, _)| k <= max).collect();
        let h = histogram(max, &steps);
        let truth = Continuation::new(&h);
        for c in [
            counters(&h),
            counters(&h).with_draft_tokens_per_pos(h.num_draft_tokens_per_pos()).unwrap(),
        ] {
            match c.identify().unwrap() {
                Identified::Exact { continuation, .. } => prop_assert_eq!(continuation, truth.clone()),
                Identified::Bounds(bounds) => {
                    for i in 1..=max {
                        let at = bounds.at(i).unwrap();
                        let (s, lo, hi) = (at.successes, at.trials_min, at.trials_max);
                        let (true_s, true_n) = truth.at(i);
                        prop_assert_eq!(s, true_s, "position {}", i);
                        prop_assert!(lo <= true_n && true_n <= hi, "position {}: {} not in {}..={}", i, true_n, lo, hi);
                    }
                }
                other => prop_assert!(false, "unexpected: {:?}", other),
            }
        }
        let exact = counters(&h).with_by_draft_length(h.clone()).unwrap();
        prop_assert_eq!(
            exact.identify().unwrap(),
            Identified::Exact { continuation: truth, because: Exactness::ByDraftLength }
        );
    }
}

#[test]
fn drafts_of_varying_length_give_bounds_not_a_point() {
    // (1, 1) and (2, 0): the counters cannot tell them from (2, 1) and
    // (1, 0), whose continuation at position 2 differs.
    let a = histogram(2, &[(1, 1), (2, 0)]);
    let b = histogram(2, &[(2, 1), (1, 0)]);
    assert_eq!(counters(&a), counters(&b));
    assert_ne!(Continuation::new(&a), Continuation::new(&b));
    let Identified::Bounds(bounds) = counters(&a).identify().unwrap() else {
        panic!("a point estimate from unidentifiable counters");
    };
    // One success at position 1 out of 2; position 2: no success, 0 or 1 trial.
    assert_eq!(
        bounds
            .at(1)
            .map(|b| (b.successes, b.trials_min, b.trials_max)),
        Some((1, 2, 2))
    );
    assert_eq!(
        bounds
            .at(2)
            .map(|b| (b.successes, b.trials_min, b.trials_max)),
        Some((0, 0, 1))
    );
    assert_eq!(bounds.rate(1), Some((0.5, 0.5)));
    assert_eq!(bounds.rate(2), None);
    assert_eq!(bounds.max_draft_len(), 2);
}

#[test]
fn inconsistent_counters_name_the_series() {
    let cases: [(Result<EngineCounters, _>, CounterSeries); 6] = [
        // Accepted counts rising with the position.
        (
            EngineCounters::new(3, 10, 30, 9, vec![3, 4, 2]),
            CounterSeries::AcceptedPerPos { position: 1 },
        ),
        // More accepted at position 0 than drafts.
        (
            EngineCounters::new(2, 10, 20, 11, vec![11, 0]),
            CounterSeries::AcceptedPerPos { position: 0 },
        ),
        // More accepted than drafted.
        (
            EngineCounters::new(2, 10, 5, 6, vec![5, 1]),
            CounterSeries::AcceptedTokens,
        ),
        // Drafts longer than K.
        (
            EngineCounters::new(2, 10, 21, 0, vec![]),
            CounterSeries::DraftTokens,
        ),
        // More positions than K.
        (
            EngineCounters::new(2, 10, 20, 0, vec![0, 0, 0]),
            CounterSeries::AcceptedPerPos { position: 2 },
        ),
        // Accepted at a position more than reached it.
        (
            EngineCounters::new(2, 10, 15, 9, vec![6, 3])
                .and_then(|c| c.with_draft_tokens_per_pos(vec![10, 2])),
            CounterSeries::AcceptedPerPos { position: 1 },
        ),
    ];
    for (result, series) in cases {
        let err = result.unwrap_err();
        assert_eq!(err.series(), series, "{err}");
        assert!(err.to_string().starts_with(&series.to_string()), "{err}");
    }
    // A by-draft-length family that disagrees with the totals.
    let h = histogram(2, &[(2, 1)]);
    let err = EngineCounters::new(2, 2, 4, 1, vec![1, 0])
        .unwrap()
        .with_by_draft_length(h)
        .unwrap_err();
    assert_eq!(err.series(), CounterSeries::Drafts);
    assert_eq!(
        err.to_string(),
        "num_drafts is 2 but the acceptance_by_draft_length family gives 1"
    );
    assert!(EngineCounters::new(0, 0, 0, 0, vec![]).is_err());
    assert!(EngineCounters::new(65, 0, 0, 0, vec![]).is_err());
}

/// The messages say which rule the counters break, with the offending value.
#[test]
fn errors_say_why_with_the_value() {
    let per_pos = |d: Vec<u64>| {
        EngineCounters::new(2, 10, 15, 9, vec![6, 3]).and_then(|c| c.with_draft_tokens_per_pos(d))
    };
    let cases = [
        (
            EngineCounters::new(3, 10, 30, 9, vec![3, 4, 2]),
            4,
            "num_accepted_tokens_per_pos{position=\"1\"} is 4, above the 3 of \
             num_accepted_tokens_per_pos{position=\"0\"}: a draft token is accepted only \
             after every earlier one",
        ),
        (
            EngineCounters::new(2, 10, 20, 11, vec![11, 0]),
            11,
            "num_accepted_tokens_per_pos{position=\"0\"} is 11, above the 10 of num_drafts: \
             a position is counted at most once per draft",
        ),
        (
            per_pos(vec![11, 5]),
            11,
            "num_draft_tokens_per_pos{position=\"0\"} is 11, above the 10 of num_drafts: \
             a position is counted at most once per draft",
        ),
        (
            per_pos(vec![5, 6]),
            6,
            "num_draft_tokens_per_pos{position=\"1\"} is 6, above the 5 of \
             num_draft_tokens_per_pos{position=\"0\"}: a draft that reaches a position \
             reached every earlier one",
        ),
        (
            per_pos(vec![10, 5, 1]),
            3,
            "num_draft_tokens_per_pos{position=\"2\"} has 3 positions; expected 2, one per \
             draft position",
        ),
    ];
    for (result, value, message) in cases {
        let err = result.unwrap_err();
        assert_eq!((err.value(), err.to_string().as_str()), (value, message));
    }
    // Fewer per-position counts than positions read as zeros: here below
    // the 3 accepted at position 1.
    assert!(per_pos(vec![10, 5]).is_ok() && per_pos(vec![10]).is_err());
    let c = per_pos(vec![10, 5]).unwrap();
    assert_eq!((c.max_draft_len(), c.drafts()), (2, 10));
}

/// Per-position draft counts narrow the bounds to what they imply.
#[test]
fn per_position_draft_counts_narrow_the_bounds() {
    // K = 2: 10 drafts of 15 tokens, 8 accepted at position 0, 3 at 1.
    let c = EngineCounters::new(2, 10, 15, 11, vec![8, 3]).unwrap();
    let Identified::Bounds(bounds) = c.identify().unwrap() else {
        panic!("drafts of varying length")
    };
    // At least 15 / 2 rounded up reached position 1, of which 8 accepted;
    // of those 8, between 3 (the accepted) and 8 drafted position 2.
    assert_eq!(
        bounds
            .at(1)
            .map(|b| (b.successes, b.trials_min, b.trials_max)),
        Some((8, 8, 10))
    );
    assert_eq!(bounds.rate(1), Some((0.8, 1.0)));
    assert_eq!(
        bounds
            .at(2)
            .map(|b| (b.successes, b.trials_min, b.trials_max)),
        Some((3, 3, 8))
    );
    assert_eq!(bounds.rate(2), Some((3.0 / 8.0, 1.0)));
    // 5 drafts of length 1 fully accepted, 5 of length 2 accepting one:
    // the counts say all 10 reached position 1 and 5 reached 2.
    let h = histogram(2, &[[(1, 1); 5], [(2, 1); 5]].concat());
    let c = counters(&h)
        .with_draft_tokens_per_pos(h.num_draft_tokens_per_pos())
        .unwrap();
    let Identified::Bounds(bounds) = c.identify().unwrap() else {
        panic!("drafts of varying length")
    };
    // Of the 10 that accepted position 1, 5 ended there (length 1): the
    // other 5 are the trials at position 2, which none accepted.
    assert_eq!(
        bounds
            .at(2)
            .map(|b| (b.successes, b.trials_min, b.trials_max)),
        Some((0, 5, 5))
    );
    assert_eq!(Continuation::new(&h).at(2), (0, 5));
}

/// A shorter accepted list (mistral.rs creates a position's series only
/// once something is counted there) reads as zeros.
#[test]
fn missing_trailing_positions_are_zero() {
    let c = EngineCounters::new(4, 10, 40, 5, vec![5]).unwrap();
    let Identified::Exact { continuation, .. } = c.identify().unwrap() else {
        panic!()
    };
    assert_eq!(continuation.counts(), &[(5, 10), (0, 5), (0, 0), (0, 0)]);
}

/// Measured profiles (`P_i`, the share of drafts whose first `i` tokens
/// were all accepted, vLLM's convention): the advice from the counters an
/// engine would export for 100,000 drafts is the `k` that maximises
/// `(1 + P_1 + ... + P_k) / (1 + c k)`, Leviathan et al.'s goodput
/// generalised to per-position rates.
#[test]
fn advice_from_real_profiles_matches_the_formula() {
    const DRAFTS: u64 = 100_000;
    let profiles: [(&str, &[f64]); 5] = [
        (
            "EAGLE3 / Llama-3.1-8B, MT-Bench (vLLM test)",
            &[0.7296, 0.5208, 0.3545],
        ),
        (
            "EAGLE3 / Qwen3-VL-30B (vLLM test)",
            &[0.2900, 0.0620, 0.0115],
        ),
        (
            "EAGLE3 / Llama-3.1-8B, MT-Bench, K = 10 (vLLM PR 26498)",
            &[0.74, 0.54, 0.41, 0.30, 0.22, 0.16, 0.12, 0.08, 0.05, 0.02],
        ),
        (
            "EAGLE3 / Qwen3-8B, code (speculators 563)",
            &[0.81, 0.59, 0.40, 0.26, 0.16, 0.08, 0.03],
        ),
        (
            "EAGLE3 / Qwen3-8B, summarization (speculators 563)",
            &[0.69, 0.42, 0.24, 0.11, 0.04, 0.02, 0.00],
        ),
    ];
    for (name, p) in profiles {
        let max = p.len();
        let accepted: Vec<u64> = p
            .iter()
            .map(|&x| (x * DRAFTS as f64).round() as u64)
            .collect();
        let c = EngineCounters::new(
            max,
            DRAFTS,
            DRAFTS * max as u64,
            accepted.iter().sum(),
            accepted,
        )
        .unwrap();
        let Identified::Exact { continuation, .. } = c.identify().unwrap() else {
            panic!("{name}: drafts of one length are exact")
        };
        for per_token in [0.02, 0.1, 0.3] {
            let goodput =
                |k: usize| (1.0 + p[..k].iter().sum::<f64>()) / (1.0 + per_token * k as f64);
            let best = (0..=max)
                .max_by(|&a, &b| goodput(a).total_cmp(&goodput(b)))
                .unwrap();
            let advice = Advisor::default()
                .recommend_continuation(&continuation, &StepCost::linear(1.0, per_token).unwrap())
                .unwrap();
            assert_eq!(
                advice.draft_len, best,
                "{name}, c = {per_token}: advice {} vs formula {best}",
                advice.draft_len
            );
            let speedup = goodput(best);
            assert!(
                (advice.expected_speedup - speedup).abs() < 0.01 * speedup,
                "{name}, c = {per_token}: {} vs {speedup}",
                advice.expected_speedup
            );
        }
    }
}

/// The accepted total counts each accepted token once, as the positions
/// do: a total other than their sum (a partial or torn scrape) is an error
/// naming the total, with the sum.
#[test]
fn an_accepted_total_other_than_the_positions_sum_is_an_error() {
    for (total, per_pos) in [
        (5, vec![10, 10, 10]),
        (28, vec![9, 9, 9]),
        (29, vec![10, 10, 8]),
    ] {
        let err = EngineCounters::new(3, 10, 30, total, per_pos.clone()).unwrap_err();
        assert_eq!(err.series(), CounterSeries::AcceptedTokens);
        assert_eq!(err.value(), total);
        let sum: u64 = per_pos.iter().sum();
        assert_eq!(
            err.to_string(),
            format!(
                "num_accepted_tokens is {total} but the accepted counts per position, \
                 num_accepted_tokens_per_pos{{position=\"0\"}} to \
                 num_accepted_tokens_per_pos{{position=\"2\"}}, add up to {sum}: every \
                 accepted draft token is counted once, at its position"
            )
        );
    }
    // Lazily created positions (a shorter list) are zeros in the sum too.
    assert!(EngineCounters::new(3, 10, 30, 10, vec![10]).is_ok());
    assert!(EngineCounters::new(3, 10, 30, 11, vec![10]).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// TensorRT-LLM's view of a histogram: drafted and accepted per
    /// position, no drafts counter (the drafts are those that reached
    /// position 0, so steps that drafted nothing are not seen). Whatever
    /// the lengths, the bounds hold the true continuation counts, and
    /// drafts all of one length are exact.
    #[test]
    fn drafted_and_accepted_per_position_bound_the_truth(max in 1usize..=6, steps in steps(6, 80)) {
        let steps: Vec<(usize, usize)> = steps.into_iter().map(|(k, a)| (k.min(max), a.min(k.min(max)))).collect();
        let h = histogram(max, &steps);
        let drafted: Vec<u64> = (0..max).map(|j| steps.iter().filter(|s| s.0 > j).count() as u64).collect();
        let accepted: Vec<u64> = (0..max).map(|j| steps.iter().filter(|s| s.1 > j).count() as u64).collect();
        let c = EngineCounters::new(max, drafted[0], drafted.iter().sum(), accepted.iter().sum(), accepted.clone())
            .unwrap()
            .with_draft_tokens_per_pos(drafted.clone())
            .unwrap();
        let truth = Continuation::new(&h);
        match c.identify().unwrap() {
            Identified::Exact { continuation, .. } => prop_assert_eq!(continuation.counts(), truth.counts()),
            Identified::Bounds(b) => {
                prop_assert!(drafted.iter().any(|&d| d != drafted[0]), "bounds with every draft of one length");
                for i in 1..=max {
                    let at = b.at(i).unwrap();
                    let (s, lo, hi) = (at.successes, at.trials_min, at.trials_max);
                    let (ts, tn) = truth.at(i);
                    prop_assert_eq!(s, ts);
                    prop_assert!(lo <= tn && tn <= hi, "position {}: {} not in [{}, {}]", i, tn, lo, hi);
                }
            }
            other => prop_assert!(false, "{:?}", other),
        }
    }
}
