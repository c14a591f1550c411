//! Hand-computed vectors for `AcceptanceHistogram` (the reference's
//! "The histogram" to "The report", and the public API).
//!
//! Every expected value below is worked out by hand in the comments next to
//! it; none is produced by calling the code under test.

use serde_json::json;
use specdec_metrics::{
    AcceptanceHistogram, ConfigError, HistogramCounter, MergeError, ObserveError,
};

/// A histogram of maximum draft length `max` holding `steps`, each observed
/// once (all must be valid).
fn hist(max: usize, steps: &[(usize, usize)]) -> AcceptanceHistogram {
    let mut h = AcceptanceHistogram::new(max).expect("valid max_draft_len");
    for &(k, a) in steps {
        h.observe(k, a).expect("valid observation");
    }
    h
}

/// The `acceptance_histogram_by_draft_length` value of `h`'s report.
fn rows_json(h: &AcceptanceHistogram) -> serde_json::Value {
    serde_json::to_value(h).unwrap()["acceptance_histogram_by_draft_length"].clone()
}

// ---------------------------------------------------------------------------
// The motivating pair of the README.
// ---------------------------------------------------------------------------

#[test]
fn motivating_pair_shares_every_classic_counter() {
    // A = (1,1),(3,2); B = (2,1),(2,2); K = 3.
    let a = hist(3, &[(1, 1), (3, 2)]);
    let b = hist(3, &[(2, 1), (2, 2)]);

    // steps: 2 and 2.
    assert_eq!(a.num_spec_steps(), 2);
    assert_eq!(b.num_spec_steps(), 2);
    // drafted: 1 + 3 = 4 and 2 + 2 = 4.
    assert_eq!(a.num_draft_tokens(), 4);
    assert_eq!(b.num_draft_tokens(), 4);
    // accepted: 1 + 2 = 3 and 1 + 2 = 3.
    assert_eq!(a.num_accepted_draft_tokens(), 3);
    assert_eq!(b.num_accepted_draft_tokens(), 3);
    // by accepted j (K + 1 = 4 entries): one step at j = 1, one at j = 2.
    assert_eq!(a.acceptance_histogram(), vec![0, 1, 1, 0]);
    assert_eq!(b.acceptance_histogram(), vec![0, 1, 1, 0]);
    // accepted per position, steps with a > i: a in {1, 2} -> [2, 1, 0].
    assert_eq!(a.num_accepted_tokens_per_pos(), vec![2, 1, 0]);
    assert_eq!(b.num_accepted_tokens_per_pos(), vec![2, 1, 0]);
    // mean 1 + 3/2 = 2.5, rate 3/4 = 0.75 (both exact in binary).
    assert_eq!(a.mean_acceptance_length(), 2.5);
    assert_eq!(b.mean_acceptance_length(), 2.5);
    assert_eq!(a.draft_acceptance_rate(), 0.75);
    assert_eq!(b.draft_acceptance_rate(), 0.75);
}

#[test]
fn motivating_pair_differs_in_drafted_per_position() {
    // Checked by hand: the pair is NOT identical in num_draft_tokens_per_pos.
    // A: k in {1, 3}: k > 0 -> 2, k > 1 -> 1 (k=3), k > 2 -> 1 (k=3): [2, 1, 1].
    // B: k in {2, 2}: k > 0 -> 2, k > 1 -> 2,        k > 2 -> 0:      [2, 2, 0].
    let a = hist(3, &[(1, 1), (3, 2)]);
    let b = hist(3, &[(2, 1), (2, 2)]);
    assert_eq!(a.num_draft_tokens_per_pos(), vec![2, 1, 1]);
    assert_eq!(b.num_draft_tokens_per_pos(), vec![2, 2, 0]);
}

#[test]
fn motivating_pair_has_different_rows_and_is_unequal() {
    let a = hist(3, &[(1, 1), (3, 2)]);
    let b = hist(3, &[(2, 1), (2, 2)]);
    // A: row 1 = [0, 1] (accepted 1 of 1), row 3 = [0, 0, 1, 0] (2 of 3).
    assert_eq!(a.row(1), Some(&[0, 1][..]));
    assert_eq!(a.row(2), Some(&[0, 0, 0][..]));
    assert_eq!(a.row(3), Some(&[0, 0, 1, 0][..]));
    // B: row 2 = [0, 1, 1] (1 of 2 and 2 of 2).
    assert_eq!(b.row(1), Some(&[0, 0][..]));
    assert_eq!(b.row(2), Some(&[0, 1, 1][..]));
    assert_eq!(b.row(3), Some(&[0, 0, 0, 0][..]));
    assert_eq!(rows_json(&a), json!({"1": [0, 1], "3": [0, 0, 1, 0]}));
    assert_eq!(rows_json(&b), json!({"2": [0, 1, 1]}));
    assert_ne!(a, b);
}

#[test]
fn pair_identical_in_every_vllm_figure_still_differs_by_draft_length() {
    // A stronger pair than the README's: (1,1),(2,0) vs (1,0),(2,1), K = 2.
    // steps 2/2, drafted 3/3, accepted 1/1, by accepted [1,1,0]/[1,1,0],
    // accepted per pos (a > i) [1,0]/[1,0], drafted per pos (k > i) [2,1]/[2,1].
    let a = hist(2, &[(1, 1), (2, 0)]);
    let b = hist(2, &[(1, 0), (2, 1)]);
    for h in [&a, &b] {
        assert_eq!(h.num_spec_steps(), 2);
        assert_eq!(h.num_draft_tokens(), 3);
        assert_eq!(h.num_accepted_draft_tokens(), 1);
        assert_eq!(h.acceptance_histogram(), vec![1, 1, 0]);
        assert_eq!(h.num_accepted_tokens_per_pos(), vec![1, 0]);
        assert_eq!(h.num_draft_tokens_per_pos(), vec![2, 1]);
        assert_eq!(h.mean_acceptance_length(), 1.5); // 1 + 1/2
    }
    // Only the rows tell them apart: A fully accepts at k = 1, B never does.
    assert_eq!(rows_json(&a), json!({"1": [0, 1], "2": [1, 0, 0]}));
    assert_eq!(rows_json(&b), json!({"1": [1, 0], "2": [0, 1, 0]}));
    assert_eq!(a.full_acceptance_rate(1), Some(1.0));
    assert_eq!(b.full_acceptance_rate(1), Some(0.0));
    assert_ne!(a, b);
}

// ---------------------------------------------------------------------------
// vLLM's published vectors.
// ---------------------------------------------------------------------------

fn vllm_k3() -> AcceptanceHistogram {
    hist(3, &[(3, 0), (3, 3), (3, 2), (3, 3), (3, 1)])
}

#[test]
fn vllm_k3_vector_figures() {
    let h = vllm_k3();
    // steps 5, drafted 5 * 3 = 15, accepted 0+3+2+3+1 = 9.
    assert_eq!(h.num_spec_steps(), 5);
    assert_eq!(h.num_draft_tokens(), 15);
    assert_eq!(h.num_accepted_draft_tokens(), 9);
    // 1 + 9/5 = 2.8; 9/15 = 0.6.
    assert_eq!(h.mean_acceptance_length(), 2.8);
    assert_eq!(h.draft_acceptance_rate(), 0.6);
    // a = 0, 1, 2 once each, a = 3 twice.
    assert_eq!(h.acceptance_histogram(), vec![1, 1, 1, 2]);
    // a > 0: 4, a > 1: 3 (3, 2, 3), a > 2: 2 (3, 3).
    assert_eq!(h.num_accepted_tokens_per_pos(), vec![4, 3, 2]);
    // every step drafted all three positions.
    assert_eq!(h.num_draft_tokens_per_pos(), vec![5, 5, 5]);
    assert_eq!(h.row(3), Some(&[1, 1, 1, 2][..]));
    // full acceptance at k = 3: 2 of 5.
    assert_eq!(h.full_acceptance_rate(3), Some(0.4));
}

#[test]
fn vllm_k3_vector_report_is_exactly_the_spec_example() {
    let h = vllm_k3();
    let expected = json!({
      "mean_acceptance_length": 2.8,
      "draft_acceptance_rate": 0.6,
      "acceptance_histogram": [1, 1, 1, 2],
      "acceptance_histogram_by_draft_length": {"3": [1, 1, 1, 2]},
      "num_spec_steps": 5,
      "num_accepted_draft_tokens": 9,
      "num_draft_tokens": 15,
      "num_spec_tokens": 3,
      "num_accepted_tokens_per_pos": [4, 3, 2],
      "num_draft_tokens_per_pos": [5, 5, 5],
      "num_undrafted_steps": 0,
      "num_rejected_observations": 0,
      "scheduled_steps_by_budget": [0, 0, 0, 0]
    });
    assert_eq!(serde_json::to_value(&h).unwrap(), expected);
}

#[test]
fn vllm_k3_vector_report_text_has_spec_key_order() {
    let text = serde_json::to_string(&vllm_k3()).unwrap();
    // The reference's example report, compact, keys in vLLM's order then our own.
    let expected = concat!(
        r#"{"mean_acceptance_length":2.8,"#,
        r#""draft_acceptance_rate":0.6,"#,
        r#""acceptance_histogram":[1,1,1,2],"#,
        r#""acceptance_histogram_by_draft_length":{"3":[1,1,1,2]},"#,
        r#""num_spec_steps":5,"#,
        r#""num_accepted_draft_tokens":9,"#,
        r#""num_draft_tokens":15,"#,
        r#""num_spec_tokens":3,"#,
        r#""num_accepted_tokens_per_pos":[4,3,2],"#,
        r#""num_draft_tokens_per_pos":[5,5,5],"#,
        r#""num_undrafted_steps":0,"#,
        r#""num_rejected_observations":0,"#,
        r#""scheduled_steps_by_budget":[0,0,0,0]}"#,
    );
    assert_eq!(text, expected);

    // And the order, key by key, independently of the exact text.
    let keys = [
        "mean_acceptance_length",
        "draft_acceptance_rate",
        "acceptance_histogram",
        "acceptance_histogram_by_draft_length",
        "num_spec_steps",
        "num_accepted_draft_tokens",
        "num_draft_tokens",
        "num_spec_tokens",
        "num_accepted_tokens_per_pos",
        "num_draft_tokens_per_pos",
        "num_undrafted_steps",
        "num_rejected_observations",
        "scheduled_steps_by_budget",
    ];
    let positions: Vec<usize> = keys
        .iter()
        .map(|k| text.find(&format!("\"{k}\":")).expect(k))
        .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{positions:?}");
    assert_eq!(specdec_metrics::REPORT_KEYS, keys);
}

#[test]
fn vllm_k2_vector_nothing_accepted() {
    // four (2,0): steps 4, drafted 8, accepted 0 -> 1 + 0/4 = 1.0, 0/8 = 0.0.
    let h = hist(2, &[(2, 0), (2, 0), (2, 0), (2, 0)]);
    assert_eq!(h.num_spec_steps(), 4);
    assert_eq!(h.num_draft_tokens(), 8);
    assert_eq!(h.num_accepted_draft_tokens(), 0);
    assert_eq!(h.mean_acceptance_length(), 1.0);
    assert_eq!(h.draft_acceptance_rate(), 0.0);
    assert_eq!(h.acceptance_histogram(), vec![4, 0, 0]);
    assert_eq!(h.num_accepted_tokens_per_pos(), vec![0, 0]);
    assert_eq!(h.num_draft_tokens_per_pos(), vec![4, 4]);
    assert_eq!(h.full_acceptance_rate(2), Some(0.0));
}

#[test]
fn vllm_empty_vector_uses_empty_values() {
    let h = AcceptanceHistogram::new(3).unwrap();
    assert_eq!(h.num_spec_steps(), 0);
    assert_eq!(h.num_draft_tokens(), 0);
    assert_eq!(h.num_accepted_draft_tokens(), 0);
    assert_eq!(h.mean_acceptance_length(), 1.0);
    assert_eq!(h.draft_acceptance_rate(), 0.0);
    assert_eq!(h.acceptance_histogram(), vec![0, 0, 0, 0]);
    assert_eq!(h.num_accepted_tokens_per_pos(), vec![0, 0, 0]);
    assert_eq!(h.num_draft_tokens_per_pos(), vec![0, 0, 0]);
    assert_eq!(
        h.conditional_acceptance_rate_per_pos(),
        vec![None, None, None]
    );
    assert_eq!(h.acceptance_rate_per_pos(), vec![0.0, 0.0, 0.0]);
    for k in 0..=4 {
        assert_eq!(h.full_acceptance_rate(k), None, "k = {k}");
    }
    assert_eq!(rows_json(&h), json!({}));
    assert_eq!(
        serde_json::to_value(&h).unwrap(),
        json!({
            "mean_acceptance_length": 1.0,
            "draft_acceptance_rate": 0.0,
            "acceptance_histogram": [0, 0, 0, 0],
            "acceptance_histogram_by_draft_length": {},
            "num_spec_steps": 0,
            "num_accepted_draft_tokens": 0,
            "num_draft_tokens": 0,
            "num_spec_tokens": 3,
            "num_accepted_tokens_per_pos": [0, 0, 0],
            "num_draft_tokens_per_pos": [0, 0, 0],
            "num_undrafted_steps": 0,
            "num_rejected_observations": 0,
            "scheduled_steps_by_budget": [0, 0, 0, 0]
        })
    );
}

#[test]
fn vllm_k3_mixed_vector_floats_are_bit_exact() {
    // 39 x (3,0), 1 x (3,1), 3 x (3,3).
    let mut h = AcceptanceHistogram::new(3).unwrap();
    for _ in 0..39 {
        h.observe(3, 0).unwrap();
    }
    h.observe(3, 1).unwrap();
    for _ in 0..3 {
        h.observe(3, 3).unwrap();
    }
    // steps 43, drafted 129, accepted 1 + 9 = 10.
    assert_eq!(h.num_spec_steps(), 43);
    assert_eq!(h.num_draft_tokens(), 129);
    assert_eq!(h.num_accepted_draft_tokens(), 10);
    // 1 + 10/43 and 10/129, vLLM's published values, bit for bit.
    assert_eq!(h.mean_acceptance_length(), 1.2325581395348837);
    assert_eq!(h.draft_acceptance_rate(), 0.07751937984496124);
    assert_eq!(h.acceptance_histogram(), vec![39, 1, 0, 3]);
    // a > 0: 4, a > 1: 3, a > 2: 3.
    assert_eq!(h.num_accepted_tokens_per_pos(), vec![4, 3, 3]);
    assert_eq!(h.num_draft_tokens_per_pos(), vec![43, 43, 43]);
    // The report prints the same shortest round-trip digits vLLM prints.
    let text = serde_json::to_string(&h).unwrap();
    assert!(text.starts_with(
        r#"{"mean_acceptance_length":1.2325581395348837,"draft_acceptance_rate":0.07751937984496124,"#
    ));
}

/// K = 4: (1,0),(1,1),(2,2),(3,1),(4,4),(4,0).
fn vllm_k4() -> AcceptanceHistogram {
    hist(4, &[(1, 0), (1, 1), (2, 2), (3, 1), (4, 4), (4, 0)])
}

#[test]
fn vllm_k4_variable_budget_vector() {
    let h = vllm_k4();
    // steps 6; drafted 1+1+2+3+4+4 = 15; accepted 0+1+2+1+4+0 = 8.
    assert_eq!(h.num_spec_steps(), 6);
    assert_eq!(h.num_draft_tokens(), 15);
    assert_eq!(h.num_accepted_draft_tokens(), 8);
    // 1 + 8/6 and 8/15, vLLM's published values.
    assert_eq!(h.mean_acceptance_length(), 2.333333333333333);
    assert_eq!(h.draft_acceptance_rate(), 0.5333333333333333);
    // by accepted: a=0: (1,0),(4,0); a=1: (1,1),(3,1); a=2: (2,2); a=4: (4,4).
    assert_eq!(h.acceptance_histogram(), vec![2, 2, 1, 0, 1]);
    // a > 0: 4; a > 1: (2,2),(4,4) = 2; a > 2: (4,4) = 1; a > 3: (4,4) = 1.
    assert_eq!(h.num_accepted_tokens_per_pos(), vec![4, 2, 1, 1]);
    // k > 0: 6; k > 1: 2,3,4,4 = 4; k > 2: 3,4,4 = 3; k > 3: 4,4 = 2.
    assert_eq!(h.num_draft_tokens_per_pos(), vec![6, 4, 3, 2]);
    assert_eq!(
        rows_json(&h),
        json!({"1": [1, 1], "2": [0, 0, 1], "3": [0, 1, 0, 0], "4": [1, 0, 0, 0, 1]})
    );
}

// ---------------------------------------------------------------------------
// Derived figures: the rates.
// ---------------------------------------------------------------------------

#[test]
fn full_acceptance_rate_per_draft_length_and_none_when_unobserved() {
    let h = vllm_k4();
    // k = 0 never observed; K = 4 so k = 5 is outside.
    assert_eq!(h.full_acceptance_rate(0), None);
    // row 1 = [1, 1]: 1 of 2.
    assert_eq!(h.full_acceptance_rate(1), Some(0.5));
    // row 2 = [0, 0, 1]: 1 of 1.
    assert_eq!(h.full_acceptance_rate(2), Some(1.0));
    // row 3 = [0, 1, 0, 0]: 0 of 1.
    assert_eq!(h.full_acceptance_rate(3), Some(0.0));
    // row 4 = [1, 0, 0, 0, 1]: 1 of 2.
    assert_eq!(h.full_acceptance_rate(4), Some(0.5));
    assert_eq!(h.full_acceptance_rate(5), None);
    assert_eq!(h.full_acceptance_rate(usize::MAX), None);
}

#[test]
fn conditional_and_all_steps_per_position_rates_differ_under_variable_budgets() {
    let h = vllm_k4();
    // accepted per pos [4, 2, 1, 1], drafted per pos [6, 4, 3, 2], steps 6.
    // Conditional: divided by the steps that drafted position i.
    assert_eq!(
        h.conditional_acceptance_rate_per_pos(),
        vec![
            Some(4.0 / 6.0),
            Some(2.0 / 4.0),
            Some(1.0 / 3.0),
            Some(1.0 / 2.0)
        ]
    );
    // vLLM's log line: divided by all 6 steps.
    assert_eq!(
        h.acceptance_rate_per_pos(),
        vec![4.0 / 6.0, 2.0 / 6.0, 1.0 / 6.0, 1.0 / 6.0]
    );
    // Position 0 is drafted by every step, so the two agree there only.
    let cond = h.conditional_acceptance_rate_per_pos();
    let all = h.acceptance_rate_per_pos();
    assert_eq!(cond[0], Some(all[0]));
    for i in 1..4 {
        assert_ne!(cond[i], Some(all[i]), "position {i}");
    }
}

#[test]
fn conditional_rate_is_none_where_no_draft_reached_the_position() {
    // K = 4, steps (1,1) and (2,0): drafted per pos [2, 1, 0, 0],
    // accepted per pos [1, 0, 0, 0].
    let h = hist(4, &[(1, 1), (2, 0)]);
    assert_eq!(h.num_draft_tokens_per_pos(), vec![2, 1, 0, 0]);
    assert_eq!(h.num_accepted_tokens_per_pos(), vec![1, 0, 0, 0]);
    assert_eq!(
        h.conditional_acceptance_rate_per_pos(),
        vec![Some(0.5), Some(0.0), None, None]
    );
    // The all-steps rate reports 0.0 there, mixing "never drafted" in.
    assert_eq!(h.acceptance_rate_per_pos(), vec![0.5, 0.0, 0.0, 0.0]);
}

#[test]
fn draft_acceptance_rate_is_zero_when_only_k0_rows_were_drafted() {
    // Two (0,0) steps: steps 2, drafted 0 -> rate 0.0 (no division by 0),
    // mean 1 + 0/2 = 1.0.
    let h = hist(2, &[(0, 0), (0, 0)]);
    assert_eq!(h.num_spec_steps(), 2);
    assert_eq!(h.num_draft_tokens(), 0);
    assert_eq!(h.draft_acceptance_rate(), 0.0);
    assert_eq!(h.mean_acceptance_length(), 1.0);
    assert_eq!(h.full_acceptance_rate(0), Some(1.0)); // H[0][0] / 2 = 1
    assert_eq!(h.conditional_acceptance_rate_per_pos(), vec![None, None]);
}

// ---------------------------------------------------------------------------
// k = 0 rows versus undrafted steps.
// ---------------------------------------------------------------------------

#[test]
fn k0_row_and_undrafted_step_are_reported_apart() {
    let mut h = AcceptanceHistogram::new(2).unwrap();
    h.observe(0, 0).unwrap(); // grammar invalidated every draft
    h.observe_undrafted(); // the policy proposed nothing
    assert_eq!(h.count(0, 0), 1);
    assert_eq!(h.row(0), Some(&[1][..]));
    // Only the k = 0 row is a spec step.
    assert_eq!(h.num_spec_steps(), 1);
    assert_eq!(h.num_undrafted_steps(), 1);
    assert_eq!(h.num_draft_tokens(), 0);
    assert_eq!(h.acceptance_histogram(), vec![1, 0, 0]);
    let v = serde_json::to_value(&h).unwrap();
    assert_eq!(v["acceptance_histogram_by_draft_length"], json!({"0": [1]}));
    assert_eq!(v["num_spec_steps"], json!(1));
    assert_eq!(v["num_undrafted_steps"], json!(1));
    assert_eq!(v["num_rejected_observations"], json!(0));
}

#[test]
fn undrafted_steps_alone_leave_the_histogram_empty() {
    let mut only_undrafted = AcceptanceHistogram::new(2).unwrap();
    only_undrafted.observe_undrafted();
    only_undrafted.observe_undrafted();
    let only_k0 = hist(2, &[(0, 0), (0, 0)]);
    assert_eq!(only_undrafted.num_spec_steps(), 0);
    assert_eq!(only_undrafted.num_undrafted_steps(), 2);
    assert_eq!(only_undrafted.count(0, 0), 0);
    assert_eq!(rows_json(&only_undrafted), json!({}));
    assert_eq!(only_k0.num_undrafted_steps(), 0);
    assert_ne!(only_undrafted, only_k0);
}

#[test]
fn k0_row_next_to_drafted_steps_counts_in_steps_but_not_in_positions() {
    // K = 2: (0,0), (2,1) and one undrafted step.
    // steps 2; drafted 2; accepted 1; mean 1 + 1/2 = 1.5; rate 1/2 = 0.5;
    // by accepted [1, 1, 0]; accepted per pos [1, 0]; drafted per pos [1, 1].
    let mut h = hist(2, &[(0, 0), (2, 1)]);
    h.observe_undrafted();
    assert_eq!(h.num_spec_steps(), 2);
    assert_eq!(h.num_draft_tokens(), 2);
    assert_eq!(h.num_accepted_draft_tokens(), 1);
    assert_eq!(h.mean_acceptance_length(), 1.5);
    assert_eq!(h.draft_acceptance_rate(), 0.5);
    assert_eq!(h.acceptance_histogram(), vec![1, 1, 0]);
    assert_eq!(h.num_accepted_tokens_per_pos(), vec![1, 0]);
    assert_eq!(h.num_draft_tokens_per_pos(), vec![1, 1]);
    // vLLM style divides by both steps, conditional only by the (2,1) one.
    assert_eq!(h.acceptance_rate_per_pos(), vec![0.5, 0.0]);
    assert_eq!(
        h.conditional_acceptance_rate_per_pos(),
        vec![Some(1.0), Some(0.0)]
    );
    assert_eq!(rows_json(&h), json!({"0": [1], "2": [0, 1, 0]}));
}

// ---------------------------------------------------------------------------
// Invalid input.
// ---------------------------------------------------------------------------

#[test]
fn accepted_above_drafted_is_an_error_naming_the_values() {
    let mut h = AcceptanceHistogram::new(3).unwrap();
    let err = h.observe(2, 3).unwrap_err();
    assert_eq!(
        err,
        ObserveError::AcceptedExceedsDrafted {
            drafted: 2,
            accepted: 3
        }
    );
    assert_eq!((err.drafted(), err.accepted()), (2, 3));
    let msg = err.to_string();
    assert!(msg.contains("drafted=2"), "{msg}");
    assert!(msg.contains("accepted=3"), "{msg}");
}

#[test]
fn drafted_above_max_is_an_error_naming_the_values() {
    let mut h = AcceptanceHistogram::new(3).unwrap();
    let err = h.observe(4, 1).unwrap_err();
    assert_eq!(
        err,
        ObserveError::DraftedExceedsMax {
            drafted: 4,
            accepted: 1,
            max_draft_len: 3
        }
    );
    let msg = err.to_string();
    assert!(msg.contains("drafted=4"), "{msg}");
    assert!(msg.contains("accepted=1"), "{msg}");
    assert!(msg.contains("max_draft_len=3"), "{msg}");
}

#[test]
fn drafted_above_max_takes_precedence_when_both_are_wrong() {
    // (5, 6): k > K and a > k; the error reports k > K.
    let mut h = AcceptanceHistogram::new(3).unwrap();
    assert_eq!(
        h.observe(5, 6),
        Err(ObserveError::DraftedExceedsMax {
            drafted: 5,
            accepted: 6,
            max_draft_len: 3
        })
    );
}

#[test]
fn observe_error_check_is_exact_for_every_input() {
    // Only comparisons decide validity: a `K` or `k` near `usize::MAX` (or
    // 2^32, where `k (k + 1) / 2` no longer fits) gives the exact answer,
    // never an overflow.
    let m = usize::MAX;
    assert_eq!(ObserveError::check(m, 1 << 32, 0), Ok(()));
    assert_eq!(ObserveError::check(m, 1 << 32, 1 << 32), Ok(()));
    assert_eq!(ObserveError::check(m, m, m), Ok(()));
    assert_eq!(
        ObserveError::check(m, m - 1, m),
        Err(ObserveError::AcceptedExceedsDrafted {
            drafted: m - 1,
            accepted: m
        })
    );
    assert_eq!(
        ObserveError::check(m - 1, m, 0),
        Err(ObserveError::DraftedExceedsMax {
            drafted: m,
            accepted: 0,
            max_draft_len: m - 1
        })
    );
    assert_eq!(
        ObserveError::check(0, 1 << 32, 0),
        Err(ObserveError::DraftedExceedsMax {
            drafted: 1 << 32,
            accepted: 0,
            max_draft_len: 0
        })
    );
}

#[test]
fn rejected_observations_are_counted_and_change_no_bucket() {
    let mut h = hist(3, &[(3, 2)]);
    let before: Vec<Vec<u64>> = (0..=3).map(|k| h.row(k).unwrap().to_vec()).collect();
    assert!(h.observe(2, 3).is_err());
    assert!(h.observe(4, 0).is_err());
    assert!(h.observe(0, 1).is_err());
    assert!(h.observe(usize::MAX, usize::MAX).is_err());
    assert!(h.observe(3, usize::MAX).is_err());
    assert_eq!(h.num_rejected_observations(), 5);
    let after: Vec<Vec<u64>> = (0..=3).map(|k| h.row(k).unwrap().to_vec()).collect();
    assert_eq!(before, after);
    // Still exactly the one valid step (3,2).
    assert_eq!(h.num_spec_steps(), 1);
    assert_eq!(h.num_draft_tokens(), 3);
    assert_eq!(h.num_accepted_draft_tokens(), 2);
    assert_eq!(h.num_undrafted_steps(), 0);
    let v = serde_json::to_value(&h).unwrap();
    assert_eq!(v["num_rejected_observations"], json!(5));
    assert_eq!(
        v["acceptance_histogram_by_draft_length"],
        json!({"3": [0, 0, 1, 0]})
    );
}

#[test]
fn max_draft_len_outside_1_to_64_is_a_config_error_naming_the_range() {
    for bad in [0usize, 65, 1000, usize::MAX] {
        let err: ConfigError = AcceptanceHistogram::new(bad).unwrap_err();
        assert_eq!(err, ConfigError::MaxDraftLen { max_draft_len: bad });
        let msg = err.to_string();
        assert!(msg.contains("1..=64"), "{msg}");
        assert!(msg.contains(&bad.to_string()), "{msg}");
    }
}

#[test]
fn max_draft_len_bounds_1_and_64_are_accepted() {
    let one = AcceptanceHistogram::new(1).unwrap();
    assert_eq!(one.max_draft_len(), 1);
    assert_eq!(one.acceptance_histogram().len(), 2);
    assert_eq!(one.num_accepted_tokens_per_pos().len(), 1);
    let sixty_four = AcceptanceHistogram::new(64).unwrap();
    assert_eq!(sixty_four.max_draft_len(), 64);
    assert_eq!(sixty_four.acceptance_histogram().len(), 65);
    assert_eq!(sixty_four.num_draft_tokens_per_pos().len(), 64);
}

#[test]
fn debug_shows_k_the_observed_rows_and_the_side_counters() {
    // K = 3; rows 1 and 3 observed (row 1: one (1,1); row 3: two (3,0)),
    // rows 0 and 2 left out; one undrafted step, one rejected (2,3); one
    // scheduler step of budget 2.
    let mut h = hist(3, &[(1, 1), (3, 0), (3, 0)]);
    h.observe_undrafted();
    assert!(h.observe(2, 3).is_err());
    h.observe_scheduled(2).unwrap();
    assert_eq!(
        format!("{h:?}"),
        "AcceptanceHistogram { max_draft_len: 3, rows: {1: [0, 1], 3: [2, 0, 0, 0]}, \
         undrafted: 1, rejected: 1, scheduled: [0, 0, 1, 0] }"
    );
    assert_eq!(
        format!("{:?}", AcceptanceHistogram::new(1).unwrap()),
        "AcceptanceHistogram { max_draft_len: 1, rows: {}, undrafted: 0, rejected: 0, scheduled: [0, 0] }"
    );
}

#[test]
fn count_is_zero_outside_the_triangle() {
    let mut h = hist(3, &[(2, 2), (3, 3), (0, 0)]);
    h.observe_undrafted();
    assert_eq!(h.count(2, 2), 1);
    assert_eq!(h.count(3, 3), 1);
    assert_eq!(h.count(0, 0), 1);
    assert_eq!(h.count(2, 3), 0); // a > k
    assert_eq!(h.count(0, 1), 0);
    assert_eq!(h.count(4, 0), 0); // k > K
    assert_eq!(h.count(4, 4), 0);
    assert_eq!(h.count(usize::MAX, 0), 0);
    assert_eq!(h.count(3, usize::MAX), 0);
}

#[test]
fn rows_have_k_plus_one_counts_and_none_above_max() {
    let h = AcceptanceHistogram::new(5).unwrap();
    for k in 0..=5 {
        assert_eq!(h.row(k).map(<[u64]>::len), Some(k + 1), "k = {k}");
    }
    assert_eq!(h.row(6), None);
    assert_eq!(h.row(usize::MAX), None);
}

#[test]
fn max_draft_len_64_records_a_full_length_draft() {
    // Steps (64,64), (64,0), (10,3), (2,2):
    // steps 4; drafted 64+64+10+2 = 140; accepted 64+0+3+2 = 69.
    let h = hist(64, &[(64, 64), (64, 0), (10, 3), (2, 2)]);
    assert_eq!(h.count(64, 64), 1);
    assert_eq!(h.count(64, 0), 1);
    assert_eq!(h.row(64).unwrap().len(), 65);
    assert_eq!(h.num_spec_steps(), 4);
    assert_eq!(h.num_draft_tokens(), 140);
    assert_eq!(h.num_accepted_draft_tokens(), 69);
    // accepted per pos: i = 0, 1 -> 3 (64, 3, 2 accepted); i = 2 -> 2 (64, 3);
    // i in 3..64 -> 1 (only the 64).
    let mut acc = vec![1u64; 64];
    acc[0] = 3;
    acc[1] = 3;
    acc[2] = 2;
    assert_eq!(h.num_accepted_tokens_per_pos(), acc);
    // drafted per pos: i in 0..2 -> 4; i in 2..10 -> 3; i in 10..64 -> 2.
    let drafted: Vec<u64> = (0..64)
        .map(|i| {
            if i < 2 {
                4
            } else if i < 10 {
                3
            } else {
                2
            }
        })
        .collect();
    assert_eq!(h.num_draft_tokens_per_pos(), drafted);
    assert_eq!(h.full_acceptance_rate(64), Some(0.5));
    assert!(h.clone().observe(65, 0).is_err());
}

#[test]
fn report_row_keys_are_in_numeric_order_for_large_max() {
    let h = hist(64, &[(64, 64), (10, 3), (2, 2), (9, 0)]);
    let text = serde_json::to_string(&h).unwrap();
    let rows_at = text
        .find("\"acceptance_histogram_by_draft_length\":{")
        .unwrap();
    let rows = &text[rows_at..];
    let pos = |key: &str| rows.find(&format!("\"{key}\":[")).expect(key);
    // Numeric order: 2 < 9 < 10 < 64 (string order would put "10" first).
    assert!(pos("2") < pos("9"), "{rows}");
    assert!(pos("9") < pos("10"), "{rows}");
    assert!(pos("10") < pos("64"), "{rows}");
    assert!(rows.starts_with(r#""acceptance_histogram_by_draft_length":{"2":[0,0,1],"9":["#));
}

// ---------------------------------------------------------------------------
// merge / delta_since.
// ---------------------------------------------------------------------------

#[test]
fn merge_adds_every_counter() {
    // a: (1,1), undrafted; b: (1,1), (3,0), rejected (2,3).
    let mut a = hist(3, &[(1, 1)]);
    a.observe_undrafted();
    let mut b = hist(3, &[(1, 1), (3, 0)]);
    assert!(b.observe(2, 3).is_err());
    a.merge(&b).unwrap();
    assert_eq!(a.count(1, 1), 2);
    assert_eq!(a.count(3, 0), 1);
    assert_eq!(a.num_spec_steps(), 3);
    assert_eq!(a.num_draft_tokens(), 5); // 1 + 1 + 3
    assert_eq!(a.num_accepted_draft_tokens(), 2);
    assert_eq!(a.num_undrafted_steps(), 1);
    assert_eq!(a.num_rejected_observations(), 1);
}

#[test]
fn merge_with_different_max_fails_and_leaves_self_unchanged() {
    let mut a = hist(3, &[(3, 1)]);
    let b = hist(4, &[(4, 4)]);
    let before = a.clone();
    assert_eq!(
        a.merge(&b),
        Err(MergeError::MaxDraftLenMismatch { left: 3, right: 4 })
    );
    assert_eq!(a, before);
    let msg = a.merge(&b).unwrap_err().to_string();
    assert!(msg.contains('3') && msg.contains('4'), "{msg}");
}

#[test]
fn delta_since_with_different_max_fails() {
    let a = hist(2, &[(2, 1)]);
    let b = hist(5, &[]);
    assert_eq!(
        a.delta_since(&b),
        Err(MergeError::MaxDraftLenMismatch { left: 2, right: 5 })
    );
}

#[test]
fn delta_since_gives_the_interval() {
    let mut h = hist(3, &[(1, 1), (3, 2)]);
    let earlier = h.clone();
    h.observe(3, 2).unwrap();
    h.observe(0, 0).unwrap();
    h.observe_undrafted();
    assert!(h.observe(1, 2).is_err());
    let d = h.delta_since(&earlier).unwrap();
    // Interval: (3,2), (0,0), one undrafted, one rejected.
    let mut expected = hist(3, &[(3, 2), (0, 0)]);
    expected.observe_undrafted();
    assert!(expected.observe(9, 0).is_err());
    assert_eq!(d, expected);
    assert_eq!(d.num_spec_steps(), 2);
    assert_eq!(d.num_draft_tokens(), 3);
    assert_eq!(d.count(1, 1), 0);
}

#[test]
fn delta_since_a_later_histogram_is_not_earlier_and_changes_nothing() {
    let later = hist(2, &[(2, 1)]);
    let not_earlier = hist(2, &[(2, 1), (2, 1)]);
    let before = later.clone();
    assert_eq!(
        later.delta_since(&not_earlier),
        Err(MergeError::NotEarlier {
            counter: HistogramCounter::Bucket {
                drafted: 2,
                accepted: 1
            },
            earlier: 2,
            later: 1
        })
    );
    assert_eq!(later, before);
    let msg = later.delta_since(&not_earlier).unwrap_err().to_string();
    assert!(msg.contains("drafted=2, accepted=1"), "{msg}");
}

#[test]
fn delta_since_detects_decreased_side_counters() {
    let later = AcceptanceHistogram::new(2).unwrap();
    let mut undrafted = AcceptanceHistogram::new(2).unwrap();
    undrafted.observe_undrafted();
    assert_eq!(
        later.delta_since(&undrafted),
        Err(MergeError::NotEarlier {
            counter: HistogramCounter::UndraftedSteps,
            earlier: 1,
            later: 0
        })
    );
    let mut rejected = AcceptanceHistogram::new(2).unwrap();
    assert!(rejected.observe(3, 0).is_err());
    assert_eq!(
        later.delta_since(&rejected),
        Err(MergeError::NotEarlier {
            counter: HistogramCounter::RejectedObservations,
            earlier: 1,
            later: 0
        })
    );
}

/// A K = 1 histogram whose counters hold `u64::MAX` where asked, built from
/// a report (observing 2^64 steps is not an option). With `H[1][1] = MAX`:
/// steps = drafted = accepted = MAX, mean 1 + MAX/MAX = 2.0, rate 1.0.
fn near_full(bucket_1_1: u64, undrafted: u64, rejected: u64) -> AcceptanceHistogram {
    let (mean, rate) = if bucket_1_1 == 0 {
        (1.0, 0.0)
    } else {
        (2.0, 1.0)
    };
    let b = bucket_1_1;
    let rows = if b == 0 {
        json!({})
    } else {
        json!({"1": [0, b]})
    };
    let report = json!({
        "mean_acceptance_length": mean,
        "draft_acceptance_rate": rate,
        "acceptance_histogram": [0, b],
        "acceptance_histogram_by_draft_length": rows,
        "num_spec_steps": b,
        "num_accepted_draft_tokens": b,
        "num_draft_tokens": b,
        "num_spec_tokens": 1,
        "num_accepted_tokens_per_pos": [b],
        "num_draft_tokens_per_pos": [b],
        "num_undrafted_steps": undrafted,
        "num_rejected_observations": rejected
    });
    serde_json::from_str(&report.to_string()).expect("consistent report")
}

#[test]
fn merge_overflowing_a_bucket_fails_and_leaves_self_unchanged() {
    let mut big = near_full(u64::MAX, 0, 0);
    assert_eq!(big.count(1, 1), u64::MAX);
    let before = big.clone();
    // (0,0) comes before (1,1) in the triangle: it must not be added either.
    let other = hist(1, &[(0, 0), (1, 1)]);
    assert_eq!(
        big.merge(&other),
        Err(MergeError::Overflow {
            counter: HistogramCounter::Bucket {
                drafted: 1,
                accepted: 1
            }
        })
    );
    assert_eq!(big, before);
    assert_eq!(big.count(0, 0), 0);
}

#[test]
fn merge_overflowing_side_counters_fails_and_leaves_self_unchanged() {
    let mut big = near_full(0, u64::MAX, 0);
    let before = big.clone();
    let mut other = hist(1, &[(1, 0)]);
    other.observe_undrafted();
    assert_eq!(
        big.merge(&other),
        Err(MergeError::Overflow {
            counter: HistogramCounter::UndraftedSteps
        })
    );
    assert_eq!(big, before);

    let mut big = near_full(0, 0, u64::MAX);
    let before = big.clone();
    let mut other = hist(1, &[]);
    assert!(other.observe(0, 1).is_err());
    let err = big.merge(&other).unwrap_err();
    assert_eq!(
        err,
        MergeError::Overflow {
            counter: HistogramCounter::RejectedObservations
        }
    );
    assert!(
        err.to_string().contains("num_rejected_observations"),
        "{err}"
    );
    assert_eq!(big, before);
}

#[test]
fn merge_whose_step_total_would_overflow_fails_and_leaves_self_unchanged() {
    // H[1][1] = MAX plus one step (0,0): no bucket overflows (MAX and 1),
    // but num_spec_steps would be MAX + 1.
    let mut big = near_full(u64::MAX, 0, 0);
    let before = big.clone();
    let err = big.merge(&hist(1, &[(0, 0)])).unwrap_err();
    assert_eq!(
        err,
        MergeError::TotalOverflow {
            field: "num_spec_steps"
        }
    );
    assert!(err.to_string().contains("num_spec_steps"), "{err}");
    assert_eq!(big, before);
    assert_eq!(big.count(0, 0), 0);
}

/// A K = 2 histogram with `c` steps `(2, 0)`, from a report: steps c,
/// drafted 2c, nothing accepted (mean 1.0, rate 0.0), both draft positions
/// reached c times.
fn k2_undrafted_row(c: u64) -> AcceptanceHistogram {
    let report = json!({
        "mean_acceptance_length": 1.0,
        "draft_acceptance_rate": 0.0,
        "acceptance_histogram": [c, 0, 0],
        "acceptance_histogram_by_draft_length": {"2": [c, 0, 0]},
        "num_spec_steps": c,
        "num_accepted_draft_tokens": 0,
        "num_draft_tokens": 2 * c,
        "num_spec_tokens": 2,
        "num_accepted_tokens_per_pos": [0, 0],
        "num_draft_tokens_per_pos": [c, c],
        "num_undrafted_steps": 0,
        "num_rejected_observations": 0
    });
    serde_json::from_str(&report.to_string()).expect("consistent report")
}

#[test]
fn merge_whose_draft_token_total_would_overflow_fails_and_leaves_self_unchanged() {
    // 2^62 + 2^62 = 2^63 steps (2, 0) fit, and so does every bucket; but
    // num_draft_tokens = 2 * 2^63 = 2^64 does not.
    let half = 1u64 << 62;
    let mut a = k2_undrafted_row(half);
    assert_eq!(a.num_draft_tokens(), 1 << 63);
    let before = a.clone();
    assert_eq!(
        a.merge(&k2_undrafted_row(half)),
        Err(MergeError::TotalOverflow {
            field: "num_draft_tokens"
        })
    );
    assert_eq!(a, before);
    // One step fewer fits exactly: 2 * (2^63 - 1) = 2^64 - 2.
    a.merge(&k2_undrafted_row(half - 1)).unwrap();
    assert_eq!(a.num_draft_tokens(), u64::MAX - 1);
}

#[test]
fn a_merged_histogram_always_reads_back() {
    // The largest histogram merge lets through is still a readable report.
    let mut a = k2_undrafted_row(1 << 62);
    a.merge(&k2_undrafted_row((1 << 62) - 1)).unwrap();
    let text = serde_json::to_string(&a).unwrap();
    let back: AcceptanceHistogram = serde_json::from_str(&text).unwrap();
    assert_eq!(back, a);
}

#[test]
fn merge_up_to_exactly_u64_max_succeeds() {
    // MAX - 1 + 1 = MAX fits.
    let mut big = near_full(u64::MAX - 1, 0, 0);
    big.merge(&hist(1, &[(1, 1)])).unwrap();
    assert_eq!(big.count(1, 1), u64::MAX);
}

/// The former root name still resolves, to the same type, for one release.
#[test]
#[allow(deprecated)]
fn the_former_counter_name_is_a_deprecated_alias() {
    let old: specdec_metrics::Counter = HistogramCounter::UndraftedSteps;
    assert_eq!(old, HistogramCounter::UndraftedSteps);
    assert_eq!(old.to_string(), "num_undrafted_steps");
}
