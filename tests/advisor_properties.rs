//! Property tests: the advisor's estimates against a naive model that walks
//! every step position by position, as the verifier does, and shares no
//! code with the crate.

use proptest::prelude::*;
use specdec_metrics::{AcceptanceHistogram, Advisor, Continuation, DraftController, StepCost};

/// `(k, a)` pairs with `a <= k <= max`.
fn steps(max: usize, len: usize) -> impl Strategy<Value = Vec<(usize, usize)>> {
    prop::collection::vec((0..=max).prop_flat_map(|k| (Just(k), 0..=k)), 0..len)
}

/// The verifier's walk: a step that drafted `k` and accepted `a` tries
/// position `i` if every earlier draft was accepted (`a >= i - 1`, `i <=
/// k`), and succeeds if draft `i` was accepted too (`a >= i`).
fn naive_continuation(steps: &[(usize, usize)], position: usize) -> (u64, u64) {
    let (mut s, mut n) = (0, 0);
    for &(k, a) in steps {
        for i in 1..=k {
            if i == position {
                n += 1;
                if a >= i {
                    s += 1;
                }
            }
            if a < i {
                break; // rejected here: no later position is tried
            }
        }
    }
    (s, n)
}

fn histogram(max: usize, steps: &[(usize, usize)]) -> AcceptanceHistogram {
    let mut h = AcceptanceHistogram::new(max).unwrap();
    for &(k, a) in steps {
        h.observe(k, a).unwrap();
    }
    h
}

proptest! {
    #[test]
    fn continuation_matches_the_walk(max in 1usize..=7, steps in steps(7, 60)) {
        let steps: Vec<_> = steps.into_iter().filter(|&(k, _)| k <= max).collect();
        let c = Continuation::new(&histogram(max, &steps));
        for i in 0..=max + 1 {
            prop_assert_eq!(c.at(i), naive_continuation(&steps, i), "position {}", i);
        }
    }

    #[test]
    fn expected_accepted_is_the_chain_of_naive_rates(max in 1usize..=7, steps in steps(7, 60)) {
        let steps: Vec<_> = steps.into_iter().filter(|&(k, _)| k <= max).collect();
        let c = Continuation::new(&histogram(max, &steps));
        let mut sum = Some(0.0);
        let mut product = 1.0;
        for k in 0..=max {
            let got = c.expected_accepted(k);
            match (got, sum) {
                (Some(g), Some(e)) => prop_assert!((g - e).abs() <= 1e-12 * e.max(1.0), "k {}: {} vs {}", k, g, e),
                (None, None) => {}
                _ => prop_assert!(false, "k {}: {:?} vs {:?}", k, got, sum),
            }
            let (s, n) = naive_continuation(&steps, k + 1);
            if n == 0 {
                sum = None;
            } else {
                product *= s as f64 / n as f64;
                sum = sum.map(|x| x + product);
            }
        }
        prop_assert_eq!(c.expected_accepted(max + 1), None);
    }

    #[test]
    fn row_mean_is_the_plain_mean(max in 1usize..=7, steps in steps(7, 60)) {
        let steps: Vec<_> = steps.into_iter().filter(|&(k, _)| k <= max).collect();
        let h = histogram(max, &steps);
        let advice = Advisor::default().recommend(&h, &StepCost::linear(1.0, 0.1).unwrap()).unwrap();
        for k in 0..=max {
            let row: Vec<usize> = steps.iter().filter(|s| s.0 == k).map(|s| s.1).collect();
            let expected = (!row.is_empty()).then(|| row.iter().sum::<usize>() as f64 / row.len() as f64);
            match (advice.candidates[k].row_mean_accepted, expected) {
                (Some(g), Some(e)) => prop_assert!((g - e).abs() < 1e-12),
                (g, e) => prop_assert_eq!(g, e),
            }
        }
    }

    /// The recommendation against a naive posterior: Beta(alpha0 + s, beta0
    /// + n - s) per position, the chain of posterior means, goodput, argmax
    /// with ties (relative 1e-12) to the shorter draft.
    #[test]
    fn recommendation_matches_the_naive_posterior(
        max in 1usize..=7,
        steps in steps(7, 80),
        prior in (0.1f64..5.0, 0.1f64..5.0),
        base in 0.1f64..10.0,
        per in 0.0f64..3.0,
    ) {
        let steps: Vec<_> = steps.into_iter().filter(|&(k, _)| k <= max).collect();
        let h = histogram(max, &steps);
        let cost = StepCost::linear(base, per).unwrap();
        let r = Advisor::default().with_prior(prior.0, prior.1).unwrap().recommend(&h, &cost).unwrap();
        prop_assert_eq!(r.candidates.len(), max + 1);
        prop_assert_eq!(r.num_spec_steps, steps.len() as u64);
        let (mut mean, mut product) = (0.0, 1.0);
        let mut best = (0, 1.0 / base);
        for k in 0..=max {
            if k > 0 {
                let (s, n) = naive_continuation(&steps, k);
                let (a, b) = (prior.0 + s as f64, prior.1 + (n - s) as f64);
                product *= a / (a + b);
                mean += product;
                prop_assert_eq!(r.positions[k - 1].from_prior, n == 0);
            }
            let c = &r.candidates[k];
            prop_assert!((c.expected_accepted - mean).abs() <= 1e-12 * mean.max(1.0));
            let g = (1.0 + mean) / (base + per * k as f64);
            prop_assert!((c.goodput - g).abs() <= 1e-12 * g);
            prop_assert!((c.speedup - g * base).abs() <= 1e-12 * g * base);
            prop_assert!(c.accepted_interval[0] <= c.expected_accepted + 1e-12);
            prop_assert!(c.accepted_interval[1] >= c.expected_accepted - 1e-12);
            prop_assert!(c.accepted_interval[0] >= 0.0 && c.accepted_interval[1] <= k as f64);
            prop_assert!((0.0..=1.0).contains(&c.prob_beats_choice));
            if g > best.1 * (1.0 + 1e-12) {
                best = (k, g);
            }
        }
        prop_assert_eq!(r.draft_len, best.0);
        prop_assert_eq!(r.candidates[r.draft_len].prob_beats_choice, 0.5);
        prop_assert!((r.expected_speedup - best.1 * base).abs() <= 1e-12 * best.1 * base);
    }

    /// Whatever the windows, the controller's memory is the sum of the
    /// continuation counts of the windows since it last forgot (at most
    /// `memory` of them), and its plan stays within `0..=K`.
    #[test]
    fn controller_memory_is_the_last_windows(
        max in 1usize..=6,
        memory in 1usize..=4,
        windows in prop::collection::vec(steps(8, 40), 1..12),
    ) {
        // Every window decided on alone, however small.
        let mut c = DraftController::new(max, StepCost::linear(1.0, 0.2).unwrap())
            .unwrap()
            .with_memory(memory)
            .unwrap()
            .with_update_observations(0);
        let mut remembered: Vec<Vec<(usize, usize)>> = Vec::new();
        for window in windows {
            // Windows may come from a histogram with another K: only
            // positions up to the controller's own count.
            let wide = histogram(8, &window);
            let changes = c.regime_changes();
            c.update(&wide);
            if c.regime_changes() > changes {
                remembered.clear();
            }
            remembered.push(window);
            if remembered.len() > memory {
                remembered.remove(0);
            }
            let all: Vec<(usize, usize)> = remembered.iter().flatten().copied().collect();
            let expected: Vec<(u64, u64)> = (1..=max).map(|i| naive_continuation(&all, i)).collect();
            let remembered = c.remembered();
            prop_assert_eq!(remembered.counts(), &expected[..]);
            prop_assert!(c.draft_len() <= max);
            for step in 0..64 {
                let k = c.draft_len_for(step);
                prop_assert!(k <= max && k >= c.draft_len());
            }
        }
    }
}
