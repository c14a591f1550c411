//! A step's cost with per-request draft lengths (`base + per_token × mean
//! drafted per request`) is the old batch-level cost (`base + per_token ×
//! k`) when every request drafts the same `k`, and the budget the step
//! records is the mean rounded half up.

use specdec_sim::policy::{mean_draft_len, scheduled_budget};
use specdec_sim::summary::CostLinear;

#[test]
fn equal_lengths_cost_what_a_batch_level_budget_costs() {
    for (base, per_token) in [(1.0, 0.1), (2.0, 0.25), (1.0, 0.0), (0.3, 1.7)] {
        let cost = CostLinear { base, per_token };
        for k in 0..=64 {
            for n in 1..=40 {
                let lens = vec![k; n];
                // Exactly: the mean of n equal integers is the integer.
                assert_eq!(mean_draft_len(&lens), k as f64);
                assert_eq!(
                    cost.step(mean_draft_len(&lens)),
                    base + per_token * k as f64
                );
                assert_eq!(scheduled_budget(&lens), k, "k = {k}, n = {n}");
            }
        }
    }
}

#[test]
fn unequal_lengths_pay_for_the_mean_and_record_it_rounded_half_up() {
    let cost = CostLinear {
        base: 1.0,
        per_token: 0.1,
    };
    for (lens, mean, budget) in [
        (&[1, 8][..], 4.5, 5),
        (&[1, 2][..], 1.5, 2),
        (&[1, 1, 2][..], 4.0 / 3.0, 1),
        (&[1, 2, 2][..], 5.0 / 3.0, 2),
        (&[0, 0, 0, 1][..], 0.25, 0),
        (&[0, 8, 8, 8][..], 6.0, 6),
        (&[8][..], 8.0, 8),
    ] {
        assert_eq!(mean_draft_len(lens), mean, "{lens:?}");
        assert_eq!(scheduled_budget(lens), budget, "{lens:?}");
        assert!((cost.step(mean_draft_len(lens)) - (1.0 + 0.1 * mean)).abs() < 1e-15);
    }
    // Not the longest draft: one easy request drafting 8 among 31 drafting
    // 1 is a budget of 1 (mean 1.22), not 8.
    let mut lens = vec![1; 32];
    lens[0] = 8;
    assert_eq!(scheduled_budget(&lens), 1);
    assert!((mean_draft_len(&lens) - 39.0 / 32.0).abs() < 1e-15);
}
