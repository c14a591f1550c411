//! The peer rules of the demo (`examples/serving_engine/peers.rs`): SGLang's
//! EMA tiers, checked against sequences computed by hand from the engine's
//! published rule.

#[path = "../examples/serving_engine/peers.rs"]
mod peers;
#[path = "../examples/serving_engine/policy.rs"]
mod policy;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use peers::Sglang;
use policy::Policy;

/// Counts, per thread, every allocation and reallocation (as in
/// `tests/no_allocation.rs`), so a step can be shown to allocate nothing.
struct CountingAllocator;

thread_local! {
    // `const` initialisation: no lazy init and no destructor, so the
    // allocator can use it without recursing into itself.
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

fn bump() {
    // `try_with`: during thread teardown the slot may be gone; ignore then.
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged, so `System`'s guarantees carry over; counting has no effect on
// the memory returned.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        bump();
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        bump();
        // SAFETY: the caller upholds `GlobalAlloc::alloc_zeroed`'s contract.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        bump();
        // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller upholds `GlobalAlloc::dealloc`'s contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// Allocations made by the calling thread while `f` runs.
fn allocations_during(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

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
    let exact = |k| Sglang::with_test_schedule(k, 1.0, 0, 1);

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

// ----------------------------------------------------------------- both

/// Random outcomes that follow each budget; neither rule ever asks for more
/// than K.
#[test]
fn budgets_never_exceed_k() {
    let mut state = 0x5EED_u64;
    let mut next = move |n: usize| {
        // SplitMix64, reduced to 0..n.
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) % n as u64) as usize
    };
    for k in 0..=9 {
        let mut policies: Vec<Box<dyn Policy>> = vec![Box::new(Sglang::new(k))];
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
    let n = allocations_during(|| {
        for i in 0..2_000 {
            let budget = sglang.budget(i);
            sglang.after_step(budget, &outcomes[budget]);
            std::hint::black_box(sglang.chosen());
        }
    });
    assert_eq!(n, 0, "{n} allocations in 2,000 steps");
}
