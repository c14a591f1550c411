//! The peer rules of the simulator ([`specdec_sim::peers`]): SGLang's EMA
//! tiers, vLLM #44336's per-position goodput rule, the SmartSpec-style
//! per-request rule and vLLM's adaptive verification, checked against
//! sequences computed by hand from the engines' published rules.

use specdec_metrics::RequestState;
use specdec_sim::peers::{Sglang, SmartSpec, Vllm44336, VllmAdaptiveVerification};
use specdec_sim::policy::{Policy, RequestMemory, RequestView};
use specdec_sim::rng::Rng;
use specdec_test_support::allocations_during;

/// `n` requests that drafted `drafted` and had `accepted` accepted.
fn same(n: usize, drafted: usize, accepted: usize) -> Vec<(usize, usize)> {
    vec![(drafted, accepted); n]
}

/// One engine step: the budget, then the outcomes.
fn step(policy: &mut impl Policy, index: u64, outcomes: &[(usize, usize)]) -> usize {
    let budget = policy.budget(index);
    policy.after_step(budget, outcomes);
    budget
}

fn close(actual: f64, expected: f64) -> bool {
    (actual - expected).abs() < 1e-9
}

/// A request with `memory` (its state is not read by the peer rules).
fn view(memory: RequestMemory) -> RequestView {
    RequestView {
        state: RequestState::new(),
        memory,
        position: None,
        state_index: 0,
        left: 100,
    }
}

// ---------------------------------------------------------------- SGLang

#[test]
fn sglang_tiers_are_the_defaults_clipped_to_k_plus_k_itself() {
    for (k, tiers) in [
        (0, &[0][..]),
        (1, &[1][..]),
        (2, &[1, 2][..]),
        (3, &[1, 3][..]),
        (5, &[1, 3, 5][..]),
        (7, &[1, 3, 7][..]),
        (10, &[1, 3, 7, 10][..]),
    ] {
        let mut sglang = Sglang::new(k);
        assert_eq!(sglang.tiers(), tiers, "K = {k}");
        // Starts at K, the average seeded at K - 1.
        assert_eq!(sglang.chosen(), k);
        assert_eq!(sglang.budget(0), k);
        assert!(close(sglang.ema(), k as f64 - 1.0));
    }
}

#[test]
fn sglang_ema_sequence_warmup_interval_and_multi_tier_moves() {
    // K = 7: tiers [1, 3, 7], start at 7 with the average at 6.
    let mut sglang = Sglang::new(7);
    // Batches 1..=15 accept nothing: ema_n = 6 * 0.8^n.
    let ema_by_batch = [
        4.8,
        3.84,
        3.072,
        2.4576,
        1.96608,
        1.572864,
        1.2582912,
        1.00663296,
        0.805306368,
        0.6442450944,
        0.51539607552,
        0.412316860416,
        0.3298534883328,
        0.26388279066624,
        0.211106232532992,
    ];
    for (i, &ema) in ema_by_batch.iter().enumerate() {
        let batch = i as u64 + 1;
        assert_eq!(step(&mut sglang, batch, &same(4, 7, 0)), 7);
        assert!(close(sglang.ema(), ema), "batch {batch}: {}", sglang.ema());
        if batch < 15 {
            // Warmup (1..=10), then no decision before batch 15, although
            // the average has been below the step-down threshold 2.25
            // since batch 5.
            assert_eq!(sglang.chosen(), 7, "batch {batch}");
        }
    }
    // Batch 15 decides: 0.2111 <= 3 - 0.75 and <= 1 - 0.75: two tiers down.
    // (Decided at batch 14, 0.2639 > 0.25 would have stopped at 3.)
    assert_eq!(sglang.chosen(), 1);
    assert_eq!(sglang.budget(15), 1);

    // Batches 16..=20 accept the one draft: ema = 0.8 ema + 0.2.
    let ema_by_batch = [
        0.3688849860263936,
        0.4951079888211149,
        0.5960863910568919,
        0.6768691128455135,
        0.7414952902764108,
    ];
    for (i, &ema) in ema_by_batch.iter().enumerate() {
        let batch = i as u64 + 16;
        step(&mut sglang, batch, &same(4, 1, 1));
        assert!(close(sglang.ema(), ema), "batch {batch}: {}", sglang.ema());
        if batch < 20 {
            // Above the step-up threshold 0.5 from batch 18, no decision.
            assert_eq!(sglang.chosen(), 1, "batch {batch}");
        }
    }
    // Batch 20: 0.7415 > 1 - 0.5, not > 3 - 0.5: one tier up.
    assert_eq!(sglang.chosen(), 3);

    // Batches 21..=30 accept all three drafts: ema = 0.8 ema + 0.6.
    for batch in 21..=30 {
        step(&mut sglang, batch, &same(4, 3, 3));
        match batch {
            // 2.2599 at batch 25: not > 2.5, stays.
            25 => {
                assert!(close(sglang.ema(), 2.259933176717775));
                assert_eq!(sglang.chosen(), 3);
            }
            // 2.5264 at batch 27 is above 2.5, but no decision before 30.
            21..=29 => assert_eq!(sglang.chosen(), 3, "batch {batch}"),
            // 2.7575 > 3 - 0.5: up to 7.
            _ => {
                assert!(close(sglang.ema(), 2.757494903346881));
                assert_eq!(sglang.chosen(), 7);
            }
        }
    }
}

#[test]
fn sglang_batch_mean_is_over_requests_and_empty_batches_do_not_count() {
    let mut sglang = Sglang::new(7);
    // Mean of 0, 1, 2, 7 (a grammar cut one draft to 2) = 2.5.
    step(&mut sglang, 0, &[(7, 0), (7, 1), (2, 2), (7, 7)]);
    assert!(close(sglang.ema(), 0.8 * 6.0 + 0.2 * 2.5));
    // No request drafted: neither the average nor the batch count moves.
    for i in 1..100 {
        step(&mut sglang, i, &[]);
    }
    assert!(close(sglang.ema(), 5.3));
    // So the first decision still comes at the 15th batch with requests.
    for i in 2..=14 {
        step(&mut sglang, 100 + i, &same(2, 7, 0));
        assert_eq!(sglang.chosen(), 7, "batch {i}");
    }
    step(&mut sglang, 115, &same(2, 7, 0));
    assert_eq!(sglang.chosen(), 1);
}

/// The thresholds exactly at the boundary, both sides. With the averaging
/// weight 1 and a decision every batch, the average is the batch mean, and
/// the means 2.25, 2.5, 0.25 and 0.5 are exact.
#[test]
fn sglang_hysteresis_thresholds_at_the_boundary() {
    let exact = |k| Sglang::with_schedule(k, 1.0, 0, 1);

    // Down from 7 needs ema <= 3 - 0.75 = 2.25.
    let mut sglang = exact(7);
    step(&mut sglang, 0, &[(7, 2), (7, 3), (7, 2), (7, 3), (7, 3)]); // 2.6
    assert_eq!(sglang.chosen(), 7);
    step(&mut sglang, 1, &[(7, 2), (7, 2), (7, 3), (7, 3)]); // 2.5
    assert_eq!(sglang.chosen(), 7);
    step(&mut sglang, 2, &[(7, 2), (7, 2), (7, 2), (7, 3)]); // 2.25
    assert_eq!(sglang.chosen(), 3, "2.25 <= 2.25 steps down");

    // Up from 3 needs ema > 3 - 0.5 = 2.5; 2.5 itself stays.
    step(&mut sglang, 3, &[(3, 2), (3, 3)]); // 2.5
    assert_eq!(sglang.chosen(), 3, "2.5 is not > 2.5");
    let mut outcomes = same(99, 3, 3);
    outcomes.push((3, 2));
    step(&mut sglang, 4, &outcomes); // 2.99
    assert_eq!(sglang.chosen(), 7);

    // Down from 3 to 1 needs ema <= 1 - 0.75 = 0.25.
    let mut sglang = exact(3);
    step(&mut sglang, 0, &[(3, 1), (3, 0), (3, 0)]); // 0.333..
    assert_eq!(sglang.chosen(), 3);
    step(&mut sglang, 1, &[(3, 1), (3, 0), (3, 0), (3, 0)]); // 0.25
    assert_eq!(sglang.chosen(), 1, "0.25 <= 0.25 steps down");

    // Up from 1 needs ema > 1 - 0.5 = 0.5; 0.5 itself stays.
    step(&mut sglang, 2, &[(1, 1), (1, 0)]); // 0.5
    assert_eq!(sglang.chosen(), 1, "0.5 is not > 0.5");
    step(&mut sglang, 3, &[(1, 1), (1, 1), (1, 0)]); // 0.667
    assert_eq!(sglang.chosen(), 3);
}

#[test]
fn sglang_clipped_tiers_move_within_k() {
    // K = 5: tiers [1, 3, 5]; nothing accepted: ema_15 = 4 * 0.8^15 =
    // 0.1407 <= 0.25: straight down to 1.
    let mut sglang = Sglang::new(5);
    for i in 0..15 {
        assert_eq!(step(&mut sglang, i, &same(3, 5, 0)), 5);
    }
    assert!(close(sglang.ema(), 4.0 * 0.8f64.powi(15)));
    assert_eq!(sglang.chosen(), 1);
    // Everything accepted from there: up through 3 to 5, never above.
    let mut seen = Vec::new();
    for i in 15..200 {
        let budget = sglang.budget(i);
        sglang.after_step(budget, &same(3, budget, budget));
        if seen.last() != Some(&budget) {
            seen.push(budget);
        }
    }
    assert_eq!(seen, [1, 3, 5]);
}

// ------------------------------------------------------------ vLLM #44336

#[test]
fn vllm_starts_at_k_until_a_window_of_ten_requests_closes() {
    let mut vllm = Vllm44336::new(3, 1.0, 1.0, 7);
    // Nine rejected drafts: no window yet, the averages stay at the prior.
    step(&mut vllm, 0, &same(5, 3, 0));
    step(&mut vllm, 1, &same(4, 3, 0));
    vllm.budget(2);
    assert_eq!(vllm.chosen(), 3);
    assert_eq!(vllm.alpha(1), 0.85);
    // Requests without a draft do not count toward the window.
    vllm.after_step(0, &same(50, 0, 0));
    assert_eq!(vllm.alpha(1), 0.85);
    // The tenth closes it: position 1 moves to 0.85 + 0.3 (0 - 0.85).
    vllm.after_step(3, &same(1, 3, 0));
    assert!(close(vllm.alpha(1), 0.595));
    assert_eq!(vllm.alpha(2), 0.85, "position 2 was never reached");
    // The next window starts empty: nine more leave the averages alone,
    // the tenth moves position 1 to 0.595 + 0.3 (1 - 0.595) = 0.7165.
    vllm.after_step(3, &same(9, 1, 1));
    assert!(close(vllm.alpha(1), 0.595));
    vllm.after_step(3, &same(1, 1, 1));
    assert!(close(vllm.alpha(1), 0.7165));
}

#[test]
fn vllm_averages_are_clamped_to_a_thousandth_in_the_goodput() {
    // K = 1, cost 1 + 0.1 k. After 40 rejected windows alpha_1 is
    // 0.85 * 0.7^40 (about 5e-7) but counts as 0.001.
    let mut vllm = Vllm44336::new(1, 1.0, 0.1, 4);
    for i in 0..40 {
        step(&mut vllm, i, &same(10, 1, 0));
    }
    assert!(vllm.alpha(1) < 1e-6);
    assert!(close(vllm.goodput(1), 1.001 / 1.1));
    // After 100 accepted windows it is within 1e-15 of 1 but counts as
    // 0.999.
    for i in 40..140 {
        step(&mut vllm, i, &same(10, 1, 1));
    }
    assert!(vllm.alpha(1) > 0.999_999);
    assert!(close(vllm.goodput(1), 1.999 / 1.1));
}

/// The goodput on a hand-computed case: K = 3, cost 1 + 0.5 k.
#[test]
fn vllm_goodput_and_choice_hand_computed() {
    let mut vllm = Vllm44336::new(3, 2.0, 1.0, 1);
    assert_eq!(vllm.budget(0), 3);
    // 4 requests accept all 3, 3 accept 1, 3 accept none.
    // Position 1: reached 10, accepted 7 -> 0.85 + 0.3 (0.7 - 0.85) = 0.805.
    // Position 2: reached 7, accepted 4 -> 0.85 + 0.3 (4/7 - 0.85) = 0.76642857.
    // Position 3: reached 4, accepted 4 -> 0.85 + 0.3 (1 - 0.85) = 0.895.
    let mut outcomes = same(4, 3, 3);
    outcomes.extend(same(3, 3, 1));
    outcomes.extend(same(3, 3, 0));
    vllm.after_step(3, &outcomes);
    assert!(close(vllm.alpha(1), 0.805));
    assert!(close(vllm.alpha(2), 0.85 + 0.3 * (4.0 / 7.0 - 0.85)));
    assert!(close(vllm.alpha(3), 0.895));
    // E_acc: 1.805, 1.805 + 0.805 * 0.766429 = 2.421975,
    // 2.421975 + 0.616975 * 0.895 = 2.974168; over 1.5, 2, 2.5.
    assert!((vllm.goodput(1) - 1.203333).abs() < 1e-6);
    assert!((vllm.goodput(2) - 1.210987).abs() < 1e-6);
    assert!((vllm.goodput(3) - 1.189667).abs() < 1e-6);
    vllm.budget(1);
    assert_eq!(vllm.chosen(), 2);
}

#[test]
fn vllm_unseen_positions_keep_the_prior_in_the_goodput() {
    // K = 4, cost 1 + 0.1 k; a grammar cuts every draft to 2, all accepted.
    let mut vllm = Vllm44336::new(4, 10.0, 1.0, 3);
    step(&mut vllm, 0, &same(10, 2, 2));
    assert!(close(vllm.alpha(1), 0.895));
    assert!(close(vllm.alpha(2), 0.895));
    assert_eq!(vllm.alpha(3), 0.85);
    assert_eq!(vllm.alpha(4), 0.85);
    // E_acc(4) = 1 + .895 + .895^2 + .895^2 .85 + .895^2 .85^2
    //          = 3.9556368125, over 1.4.
    assert!((vllm.goodput(4) - 2.825454866).abs() < 1e-8);
    // With positions 3 and 4 at the prior, 4 is best (2.8255 > 2.5976 at
    // 3); had they counted as failures, 2 would be.
    vllm.budget(1);
    assert_eq!(vllm.chosen(), 4);
}

#[test]
fn vllm_chooses_no_speculation_when_it_does_not_pay() {
    // Everything rejected at position 1: alpha_1 = 0.595, others 0.85.
    // Cost 1 + k: goodput 1.595/2, 2.10075/3, 2.53064/4, all below 1.
    let mut vllm = Vllm44336::new(3, 1.0, 1.0, 5);
    step(&mut vllm, 0, &same(10, 3, 0));
    assert!(vllm.goodput(1) < 1.0 && vllm.goodput(2) < 1.0 && vllm.goodput(3) < 1.0);
    vllm.budget(1);
    assert_eq!(vllm.chosen(), 0);
    // The same data at cost 1 + 0.5 k pays at k = 1 (1.595 / 1.5 = 1.0633,
    // 2.10075 / 2 = 1.0504, 2.53064 / 2.5 = 1.0123).
    let mut cheaper = Vllm44336::new(3, 2.0, 1.0, 5);
    step(&mut cheaper, 0, &same(10, 3, 0));
    cheaper.budget(1);
    assert_eq!(cheaper.chosen(), 1);
    // At cost 1 + alpha_1 k the goodput of k = 1 is exactly 1, that of not
    // speculating: only a goodput below 1 stops speculation (and 2, 3 are
    // below 1: 2.10075 / 2.19, 2.53064 / 2.785).
    let alpha_1 = 0.85 + 0.3 * (0.0 - 0.85);
    let mut even = Vllm44336::new(3, 1.0, alpha_1, 5);
    step(&mut even, 0, &same(10, 3, 0));
    assert_eq!(even.goodput(1), 1.0);
    even.budget(1);
    assert_eq!(even.chosen(), 1);
}

/// A measured table whose last cost is below its first (`1, 1.2, 1.1,
/// 0.999`) gives the peer a negative slope: drafting is taken to cost
/// nothing (vLLM's draft cost is a time, never below zero).
#[test]
fn vllm_a_negative_draft_cost_counts_as_free() {
    let slope = (0.999 - 1.0) / 3.0;
    let mut vllm = Vllm44336::new(3, 1.0, slope, 5);
    let mut free = Vllm44336::new(3, 1.0, 0.0, 5);
    for policy in [&mut vllm, &mut free] {
        step(policy, 0, &same(10, 3, 0));
        policy.budget(1);
    }
    // alpha = (0.595, 0.85, 0.85): E_acc over 1 at every k.
    assert_eq!(vllm.goodput(1), 1.595);
    for k in 1..=3 {
        assert_eq!(vllm.goodput(k), free.goodput(k));
    }
    assert_eq!(vllm.chosen(), 3);
}

/// Cost 1 + 0.65 k, K = 3. A move of more than one starts a cooldown of
/// two decisions; a move of one does not.
#[test]
fn vllm_cooldown_follows_only_moves_of_more_than_one() {
    let mut vllm = Vllm44336::new(3, 1.0, 0.65, 11);
    vllm.budget(0);
    // All rejected: alpha = (0.595, 0.85, 0.85), goodput 0.967, 0.913, 0.858.
    vllm.after_step(3, &same(10, 3, 0));
    vllm.budget(1);
    assert_eq!(vllm.chosen(), 0, "3 -> 0: a move of 3 starts a cooldown");
    // All accepted: alpha = (0.7165, 0.895, 0.895), goodput 1.0403, 1.0251,
    // 0.9938: the best is now 1, but two decisions are skipped.
    vllm.after_step(3, &same(10, 3, 3));
    vllm.budget(2);
    assert_eq!(vllm.chosen(), 0, "first decision of the cooldown");
    vllm.after_step(0, &[]);
    vllm.budget(3);
    assert_eq!(vllm.chosen(), 0, "second decision of the cooldown");
    vllm.after_step(0, &[]);
    vllm.budget(4);
    assert_eq!(vllm.chosen(), 1, "cooldown over");
    // All rejected again: alpha_1 = 0.50155, goodput 0.910, 0.848, 0.797:
    // 1 -> 0 is a move of one, so the very next decision makes it.
    vllm.after_step(3, &same(10, 3, 0));
    vllm.budget(5);
    assert_eq!(vllm.chosen(), 0, "a move of one needs no cooldown");

    // A move of exactly two starts a cooldown too.
    let mut vllm = Vllm44336::new(3, 1.0, 0.65, 11);
    vllm.budget(0);
    // 7 accept 1, 3 accept none: alpha = (0.805, 0.595, 0.85), goodput
    // 1.0939, 0.9930, 0.9122: best 1, a move of 2 from 3.
    let mut outcomes = same(7, 3, 1);
    outcomes.extend(same(3, 3, 0));
    vllm.after_step(3, &outcomes);
    vllm.budget(1);
    assert_eq!(vllm.chosen(), 1);
    // All rejected: alpha_1 = 0.5635, every goodput below 1: best 0.
    vllm.after_step(1, &same(10, 3, 0));
    vllm.budget(2);
    assert_eq!(vllm.chosen(), 1, "cooldown after the move of 2");
    vllm.budget(3);
    assert_eq!(vllm.chosen(), 1, "cooldown after the move of 2");
    vllm.budget(4);
    assert_eq!(vllm.chosen(), 0);
}

#[test]
fn vllm_probes_draft_k_on_about_a_tenth_of_the_steps() {
    // Cost 1 + k and everything rejected: the choice is 0 and stays 0.
    let mut vllm = Vllm44336::new(3, 1.0, 1.0, 2026);
    step(&mut vllm, 0, &same(10, 3, 0));
    let steps = 20_000;
    let mut probes = 0;
    for i in 1..=steps {
        let budget = vllm.budget(i);
        assert_eq!(vllm.chosen(), 0, "a probe is not a switch");
        match budget {
            0 => {}
            3 => probes += 1,
            other => panic!("budget {other} is neither the choice nor K"),
        }
    }
    let share = probes as f64 / steps as f64;
    assert!((0.09..=0.11).contains(&share), "probe share {share}");
}

#[test]
fn vllm_probes_are_deterministic_for_a_seed() {
    let run = |seed| {
        let mut vllm = Vllm44336::new(4, 1.0, 1.0, seed);
        step(&mut vllm, 0, &same(10, 4, 0));
        (1..500).map(|i| vllm.budget(i)).collect::<Vec<_>>()
    };
    assert_eq!(run(42), run(42));
    assert_ne!(run(42), run(43));
}

#[test]
fn vllm_probe_data_lets_the_choice_grow_again() {
    // Acceptance collapses, the rule stops speculating, then acceptance
    // recovers: only probes can show it. Drafts follow each step's budget.
    let mut vllm = Vllm44336::new(4, 1.0, 0.2, 9);
    for i in 0..200 {
        let budget = vllm.budget(i);
        vllm.after_step(budget, &same(4, budget, 0));
    }
    assert_eq!(vllm.chosen(), 0);
    for i in 200..600 {
        let budget = vllm.budget(i);
        vllm.after_step(budget, &same(4, budget, budget));
    }
    assert_eq!(vllm.chosen(), 4);
}

// ----------------------------------------------------------------- both

/// Random outcomes that follow each budget; neither rule ever asks for more
/// than K.
#[test]
fn budgets_never_exceed_k() {
    per_request_lengths_never_exceed_k();
    let mut rng = Rng::new(0x5EED);
    let mut next = move |n: usize| rng.below(n);
    for k in 0..=9 {
        let mut policies: Vec<Box<dyn Policy>> = vec![
            Box::new(Sglang::new(k)),
            Box::new(Vllm44336::new(k, 1.0, 0.1, k as u64)),
        ];
        for policy in &mut policies {
            let mut outcomes = Vec::new();
            for i in 0..3_000 {
                let budget = policy.budget(i);
                assert!(budget <= k, "budget {budget} above K = {k}");
                assert!(policy.chosen() <= k);
                outcomes.clear();
                for _ in 0..next(6) {
                    let drafted = next(budget + 1);
                    outcomes.push((drafted, next(drafted + 1)));
                }
                policy.after_step(budget, &outcomes);
            }
        }
    }
}

/// The per-request rules, fed random outcomes of their own lengths.
fn per_request_lengths_never_exceed_k() {
    let mut rng = Rng::new(0x5EEE);
    for k in 1..=9 {
        let mut policies: Vec<Box<dyn Policy>> = vec![
            Box::new(SmartSpec::new(k, 1.0, 0.1, 8)),
            Box::new(VllmAdaptiveVerification::new(k, 1.0, 0.1, 8)),
        ];
        for policy in &mut policies {
            let mut memories = [[0.0; 6]; 8];
            let mut lens = [0; 8];
            for i in 0..1_000 {
                let views: Vec<RequestView> = memories.iter().map(|&m| view(m)).collect();
                policy.draft_lens(i, &views, &mut lens);
                for (r, &len) in lens.iter().enumerate() {
                    assert!(len <= k, "length {len} above K = {k}");
                    let drafted = rng.below(len + 1);
                    policy.after_request(r, &mut memories[r], drafted, rng.below(drafted + 1));
                }
                policy.after_step(0, &[]);
            }
        }
    }
}

#[test]
fn the_counting_allocator_sees_allocations() {
    // Without this, a broken counter would make the next test pass.
    let n = allocations_during(|| {
        std::hint::black_box(vec![1u8; 16]);
    });
    assert!(n >= 1, "counting allocator saw {n} allocations");
}

#[test]
fn steps_never_allocate() {
    // Outcomes for every budget up to K = 7, made before counting.
    let outcomes: Vec<Vec<(usize, usize)>> = (0..=7)
        .map(|b| (0..=b).map(|a| (b, a)).chain([(b / 2, 0)]).collect())
        .collect();
    let mut sglang = Sglang::new(7);
    let mut vllm = Vllm44336::new(7, 1.0, 0.1, 8);
    let n = allocations_during(|| {
        for i in 0..2_000 {
            for policy in [&mut sglang as &mut dyn Policy, &mut vllm] {
                let budget = policy.budget(i);
                policy.after_step(budget, &outcomes[budget]);
                std::hint::black_box(policy.chosen());
            }
        }
    });
    assert_eq!(n, 0, "{n} allocations in 2,000 steps");

    // The per-request rules, with full batches of 32 (warm-up, refits and
    // allocation included).
    let mut smartspec = SmartSpec::new(7, 1.0, 0.1, 32);
    let mut av = VllmAdaptiveVerification::new(7, 1.0, 0.1, 32);
    let mut memories = [[0.0; 6]; 32];
    let mut views = [view([0.0; 6]); 32];
    let mut lens = [0usize; 32];
    let n = allocations_during(|| {
        for i in 0..2_000u64 {
            for policy in [&mut smartspec as &mut dyn Policy, &mut av] {
                for (v, m) in views.iter_mut().zip(&memories) {
                    v.memory = *m;
                }
                policy.draft_lens(i, &views, &mut lens);
                for (r, &len) in lens.iter().enumerate() {
                    let accepted = (r + i as usize) % (len + 1);
                    policy.after_request(r, &mut memories[r], len, accepted);
                }
                policy.after_step(3, &[]);
            }
        }
    });
    assert_eq!(n, 0, "{n} allocations in 2,000 per-request steps");
    assert!(av.refits() >= 3, "the estimator was refitted");
}

// ------------------------------------------------------------- SmartSpec

#[test]
fn smartspec_gives_tokens_where_they_are_likeliest_while_the_goodput_rises() {
    // K = 3, cost 1 + 0.1 mean k, two requests at alpha 0.9 and 0.3
    // (memories whose ratio is alpha). Survivals 0.9, 0.81, 0.729 and 0.3,
    // 0.09, 0.027; the goodput (2 + best B) / (1 + 0.05 B) for B = 0..=6 is
    // 2, 2.762, 3.373, 3.860, 3.949, 3.863, 3.735: B = 4, all three of the
    // first request's and the second's first.
    let mut rule = SmartSpec::new(3, 1.0, 0.1, 2);
    let requests = [
        view([0.9, 1.0, 0.0, 0.0, 0.0, 0.0]),
        view([0.3, 1.0, 0.0, 0.0, 0.0, 0.0]),
    ];
    assert!(close(rule.alpha(&requests[0].memory), 0.9));
    let mut lens = [0; 2];
    rule.draft_lens(0, &requests, &mut lens);
    assert_eq!(lens, [3, 1]);
    // Drafting is free: every slot. Ten times a step without drafts per
    // token: none (from 0: no speculation).
    let mut free = SmartSpec::new(3, 1.0, 0.0, 2);
    free.draft_lens(0, &requests, &mut lens);
    assert_eq!(lens, [3, 3]);
    let mut dear = SmartSpec::new(3, 1.0, 10.0, 2);
    dear.draft_lens(0, &requests, &mut lens);
    assert_eq!(lens, [0, 0]);
    // A request whose drafts are all rejected gets nothing.
    rule.draft_lens(
        1,
        &[
            view([0.0, 1.0, 0.0, 0.0, 0.0, 0.0]),
            view([0.9, 1.0, 0.0, 0.0, 0.0, 0.0]),
        ],
        &mut lens,
    );
    assert_eq!(lens, [0, 3]);
}

#[test]
fn smartspec_estimates_alpha_from_the_engine_then_the_requests_own_steps() {
    let mut rule = SmartSpec::new(4, 1.0, 0.1, 4);
    let mut memory = [0.0; 6];
    // No verify step yet: the engine's rate, 1/2 at first.
    assert!(close(rule.alpha(&memory), 0.5));
    // Drafted 4, accepted 2: 3 tested. From the engine's (0.5, 1), a
    // quarter of the way: (0.875, 1.5), alpha 0.5833.
    rule.after_request(0, &mut memory, 4, 2);
    assert!(
        close(memory[0], 0.875) && close(memory[1], 1.5),
        "{memory:?}"
    );
    assert!(close(rule.alpha(&memory), 0.875 / 1.5));
    // The engine's rate moves 1/100 toward the step's (2 of 3).
    rule.after_step(2, &[(4, 2)]);
    assert!(close(rule.alpha(&[0.0; 6]), 0.515 / 1.02));
    // All 4 accepted: 4 tested. (1.65625, 2.125), alpha 0.7794.
    rule.after_request(0, &mut memory, 4, 4);
    assert!(
        close(memory[0], 1.65625) && close(memory[1], 2.125),
        "{memory:?}"
    );
    // A step that drafted nothing says nothing.
    let before = memory;
    rule.after_request(0, &mut memory, 0, 0);
    assert_eq!(memory, before);
    // chosen and budget: the latest step's scheduled budget.
    rule.after_step(3, &[]);
    assert_eq!((rule.chosen(), rule.budget(9)), (3, 3));
}

// ------------------------------------------------- vLLM adaptive verification

#[test]
fn vllm_av_verifies_whole_drafts_until_its_third_refit_then_allocates_by_survival() {
    // Nothing observed: the first coefficients stay (slope 0, bias 1.5),
    // every position at sigmoid(1.5) = 0.8176.
    let mut av = VllmAdaptiveVerification::new(3, 1.0, 0.6, 2);
    let requests = [view([0.0; 6]); 2];
    let mut lens = [0; 2];
    assert!(close(av.acceptance(2, 0.3), 1.0 / (1.0 + (-1.5f64).exp())));
    for step in 0..300 {
        assert!(av.warming_up());
        av.draft_lens(step, &requests, &mut lens);
        assert_eq!(lens, [3, 3], "step {step}: whole drafts");
        av.after_step(6, &[]);
    }
    assert_eq!(av.refits(), 3);
    assert!(!av.warming_up());
    // Survivals 0.8176, 0.6684, 0.5465 per request; cost 1 + 0.6 B / 2:
    // goodput 2, 2.167, 2.272, 2.265, 2.260, ... for B = 0, 1, 2, 3, 4:
    // B = 2, one slot each.
    av.draft_lens(300, &requests, &mut lens);
    assert_eq!(lens, [1, 1]);
    // Cheaper drafts (0.1 per token): every slot.
    let mut cheap = VllmAdaptiveVerification::new(3, 1.0, 0.1, 2);
    for _ in 0..300 {
        cheap.after_step(6, &[]);
    }
    cheap.draft_lens(300, &requests, &mut lens);
    assert_eq!(lens, [3, 3]);
}

/// 100 requests with feature 0 (20 accepted at position 1) and 100 with
/// feature 1 (`accepted_at_1` accepted), K = 1, then the 100 steps of a
/// round: the estimator's first refit.
fn av_after_one_round(accepted_at_0: usize, accepted_at_1: usize) -> VllmAdaptiveVerification {
    let mut av = VllmAdaptiveVerification::new(1, 1.0, 0.1, 200);
    let mut memories: Vec<RequestMemory> = (0..200)
        .map(|r| [if r < 100 { 0.0 } else { 1.0 }, 1.0, 0.0, 0.0, 0.0, 0.0])
        .collect();
    let views: Vec<RequestView> = memories.iter().map(|&m| view(m)).collect();
    let mut lens = vec![0; 200];
    av.draft_lens(0, &views, &mut lens);
    assert!(lens.iter().all(|&k| k == 1), "warm-up: whole drafts");
    for (r, memory) in memories.iter_mut().enumerate() {
        let accepted = if r < 100 {
            usize::from(r < accepted_at_0)
        } else {
            usize::from(r - 100 < accepted_at_1)
        };
        av.after_request(r, memory, 1, accepted);
    }
    for _ in 0..100 {
        av.after_step(1, &[]);
    }
    assert_eq!(av.refits(), 1);
    av
}

#[test]
fn vllm_av_refits_one_newton_step_per_position_from_the_round() {
    // Predictions p = sigmoid(1.5) = 0.81757 at draft time, IRLS weight
    // p (1 - p) = 0.14915. Information [[14.9156, 14.9146], [14.9146,
    // 29.8302]] (ridge 1e-3), gradient [90 - 81.757, 110 - 163.515] =
    // [8.2426, -53.5149]: the step (4.69247, -4.14013), so slope 4.69247
    // and bias -2.64013: p(0) = 0.06660, p(1) = 0.88618.
    let av = av_after_one_round(20, 90);
    assert!((av.acceptance(1, 0.0) - 0.066_599_766).abs() < 1e-6);
    assert!((av.acceptance(1, 1.0) - 0.886_183_205).abs() < 1e-6);
    // The other way round (recent acceptance predicting rejection) would
    // need a negative slope: rejected, the coefficients stay.
    let av = av_after_one_round(90, 20);
    assert!(close(av.acceptance(1, 0.0), 1.0 / (1.0 + (-1.5f64).exp())));
    assert!(close(av.acceptance(1, 1.0), 1.0 / (1.0 + (-1.5f64).exp())));
}

#[test]
fn vllm_av_feature_is_the_requests_recent_acceptance() {
    let mut av = VllmAdaptiveVerification::new(4, 1.0, 0.1, 1);
    let mut memory = [0.0; 6];
    assert_eq!(VllmAdaptiveVerification::feature(&memory), 0.5);
    // 4 drafted, 3 accepted: a quarter of the way from 1/2 to 3/4.
    av.after_request(0, &mut memory, 4, 3);
    assert!(close(VllmAdaptiveVerification::feature(&memory), 0.5625));
    // 2 drafted, 0 accepted: a quarter of the way to 0.
    av.after_request(0, &mut memory, 2, 0);
    assert!(close(VllmAdaptiveVerification::feature(&memory), 0.421875));
    // Nothing drafted: unchanged.
    av.after_request(0, &mut memory, 0, 0);
    assert!(close(VllmAdaptiveVerification::feature(&memory), 0.421875));
}
