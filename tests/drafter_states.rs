//! Per-request states the drafter knows ([`StateSpace`], [`DraftSignal`]),
//! states whose length is 0 that still explore, and the multi-word plan
//! ([`SharedStateTable`]) of a [`StateController`] over many states.

use proptest::prelude::*;
use rand::{RngCore, SeedableRng};
use rand_xoshiro::SplitMix64;
use specdec_metrics::{
    AcceptanceHistogram, ConfigError, DraftController, DraftPlan, DraftSignal, MAX_STATES,
    Recorder, RequestState, SharedStateTable, StateController, StateSpace, StepCost,
};
use specdec_test_support::allocations_during;

/// Counts near `usize::MAX` used to wrap: `after(usize::MAX, usize::MAX)`
/// divided by zero (`accepted + 1` wrapped to 0) and `after(1 << 50, 1 <<
/// 50)` moved the score down (`accepted * 2^14` wrapped to 0).
#[test]
fn huge_counts_saturate_instead_of_wrapping() {
    for start in [0.0, 0.5, 1.0] {
        let state = RequestState::with_score(start);
        for (k, a) in [
            (usize::MAX, usize::MAX),
            (1 << 50, 1 << 50),
            (1 << 50, usize::MAX),
        ] {
            let next = state.after(k, a);
            assert!(
                next.score() >= state.score(),
                "after({k}, {a}) from {start}: all accepted moved the score down to {}",
                next.score()
            );
            if start < 1.0 {
                assert!(
                    next.score() > state.score(),
                    "after({k}, {a}) from {start}: stuck"
                );
            }
        }
        // Huge drafts with nothing accepted move the score down as a small one does.
        assert_eq!(state.after(usize::MAX, 0), state.after(4, 0));
        assert_eq!(state.after(1 << 50, 0), state.after(4, 0));
        // All but the last of 2^50 tested positions accepted: within the
        // score's precision of full acceptance.
        for (k, a) in [(1 << 50, (1 << 50) - 1), (usize::MAX, usize::MAX - 1)] {
            let near = state.after(k, a).score();
            assert!((near - state.after(4, 4).score()).abs() <= 1e-3, "{near}");
        }
    }
}

/// `true` with probability `p`: the top 53 bits of one draw as a fraction.
fn chance(rng: &mut SplitMix64, p: f64) -> bool {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
}

/// A step of `k` drafts accepted position by position with probability
/// `p`: the accepted count.
fn accepted(rng: &mut SplitMix64, k: usize, p: f64) -> usize {
    (0..k).take_while(|_| chance(rng, p)).count()
}

/// One state of a `StateController::with_states` whose requests accept
/// nothing for `bad` intervals, then 90% per position: the updates after
/// the change until its ordinary draft length leaves 0 (`None`: never, in
/// `limit` updates), and its choice before the change.
fn updates_to_leave_zero(
    steps_per_interval: u64,
    seed: u64,
    bad: usize,
    limit: usize,
) -> (usize, Option<usize>) {
    // A decision per interval (the bound is in decisions): a lone state at
    // 0 records only its exploration steps, which would otherwise be
    // pooled over many intervals before each decision.
    let mut controller = StateController::with_states(4, StepCost::linear(1.0, 0.1).unwrap(), 1)
        .unwrap()
        .with_update_observations(0);
    let table = controller.shared_table();
    let mut rng = SplitMix64::seed_from_u64(seed);
    let mut step = 0u64;
    let mut before = usize::MAX;
    for interval in 0..bad + limit {
        let p = if interval < bad { 0.0 } else { 0.9 };
        let mut window = AcceptanceHistogram::new(4).unwrap();
        for _ in 0..steps_per_interval {
            let k = table.draft_len_for(0, step);
            step += 1;
            if k > 0 {
                window.observe(k, accepted(&mut rng, k, p)).unwrap();
            }
        }
        controller.update(&[window]);
        controller.publish(&table);
        if interval + 1 == bad {
            before = table.load(0).unwrap().draft_len();
        }
        if interval >= bad && table.load(0).unwrap().draft_len() > 0 {
            return (before, Some(interval + 1 - bad));
        }
    }
    (before, None)
}

/// A state where drafting does not pay chooses 0 and is not trapped there:
/// its exploration steps (one in 32) still draft one token, and when its
/// acceptance turns from none to 90% it leaves 0 at the first update with
/// about 1,000 request-steps per interval (about 31 exploration steps),
/// within 4 with 250 (about 8). The bounds are those documented on
/// `StateController` ("Many states").
#[test]
fn a_state_at_zero_explores_and_leaves_zero_within_a_bounded_number_of_updates() {
    for (steps, bound) in [(1000, 1), (250, 4)] {
        let mut worst = 0;
        for seed in 0..20 {
            let (before, after) = updates_to_leave_zero(steps, seed, 10, 20);
            assert_eq!(
                before, 0,
                "seed {seed}: nothing accepted, yet it drafts {before}"
            );
            let after = after.unwrap_or_else(|| panic!("seed {seed}, {steps} steps: trapped at 0"));
            worst = worst.max(after);
        }
        println!("{steps} request-steps per interval: leaves 0 within {worst} updates");
        assert!(
            worst <= bound,
            "{steps} steps per interval: {worst} updates > {bound}"
        );
    }
}

/// The state index by the documented formula, written apart from the
/// library: `level + levels × signal`, the signal the mixed-radix number
/// of (matched n, short match, after undrafted, confidence, score), first
/// most significant.
fn expected_index(
    levels: usize,
    (n_buckets, conf_buckets, score_buckets): (usize, usize, usize),
    state: RequestState,
    signal: DraftSignal,
) -> usize {
    let level = ((state.score() * levels as f64) as usize).min(levels - 1);
    let n = signal.matched_n().clamp(1, n_buckets) - 1;
    let short = usize::from(signal.short_match());
    let undrafted = usize::from(state.after_undrafted_step());
    let conf = ((signal.confidence() * conf_buckets as f64) as usize).min(conf_buckets - 1);
    let score = (signal.score().floor() as usize).min(score_buckets - 1);
    let s = (((n * 2 + short) * 2 + undrafted) * conf_buckets + conf) * score_buckets + score;
    level + levels * s
}

proptest! {
    /// Every request-step maps to the documented index, below `count()`,
    /// and `split` inverts `compose`.
    #[test]
    fn the_state_index_is_the_documented_mixed_radix_number(
        levels in 1usize..=4,
        n_buckets in 1usize..=4,
        conf_buckets in 1usize..=2,
        score_buckets in 1usize..=3,
        draft_score in -1.0f64..=4.0,
        score in 0.0f64..=1.0,
        undrafted: bool,
        matched in 0usize..=10,
        max_n in 0usize..=6,
        confidence in -0.5f64..=1.5,
    ) {
        // Past 128 states the space is refused (the next test).
        prop_assume!(levels * n_buckets * 4 * conf_buckets * score_buckets <= 128);
        let space = StateSpace::new(levels).unwrap()
            .by_match_length(n_buckets).unwrap()
            .by_short_match().unwrap()
            .by_after_undrafted().unwrap()
            .by_confidence(conf_buckets).unwrap()
            .by_score(score_buckets).unwrap();
        prop_assert_eq!(space.count(), levels * n_buckets * 4 * conf_buckets * score_buckets);
        let mut state = RequestState::with_score(score);
        if undrafted {
            state = state.after_undrafted();
        }
        let signal = DraftSignal::ngram(matched, max_n)
            .with_confidence(confidence)
            .with_score(draft_score);
        let index = space.index(state, signal);
        prop_assert!(index < space.count());
        let buckets = (n_buckets, conf_buckets, score_buckets);
        prop_assert_eq!(index, expected_index(levels, buckets, state, signal));
        let (level, s) = space.split(index);
        prop_assert_eq!((level, s), (state.level(levels), space.signal(state, signal)));
        prop_assert_eq!(space.compose(level, s), index);
    }

    /// Every table of up to 128 states gives back each state's plan, after
    /// creation and after a publish, and a partial publish keeps the
    /// states it does not cover.
    #[test]
    fn a_table_gives_back_every_states_plan(
        lens in prop::collection::vec((0usize..=64, 0usize..=64), 1..=128),
        covered in 0usize..=130,
        max in 1usize..=64,
    ) {
        let plan = |(d, e): (usize, usize)| {
            let d = d.min(max);
            DraftPlan::with_explore_len(d, e.clamp(d.max(1), max), max).unwrap()
        };
        let first: Vec<DraftPlan> = lens.iter().map(|&x| plan(x)).collect();
        let second: Vec<DraftPlan> = lens.iter().map(|&(d, e)| plan((e, d))).collect();
        let table = SharedStateTable::new(&first).unwrap();
        prop_assert_eq!(table.states(), first.len());
        for (s, &p) in first.iter().enumerate() {
            prop_assert_eq!(table.load(s), Some(p));
        }
        let covered = covered.min(second.len() + 2);
        let mut given = second.clone();
        given.extend([plan((1, 1)), plan((2, 2))]); // beyond the table: ignored
        table.publish(&given[..covered]);
        for s in 0..first.len() {
            let expected = if s < covered { second[s] } else { first[s] };
            prop_assert_eq!(table.load(s), Some(expected));
            for step in [0, 31] {
                prop_assert_eq!(table.draft_len_for(s, step), expected.draft_len_for(step));
            }
        }
        prop_assert_eq!(table.load(first.len()), None);
        prop_assert_eq!(table.draft_len_for(first.len(), 31), 0);
    }
}

#[test]
fn state_counts_outside_1_to_128_are_refused() {
    let cost = || StepCost::linear(1.0, 0.1).unwrap();
    for bad in [0, MAX_STATES + 1] {
        assert_eq!(
            StateController::with_states(4, cost(), bad).unwrap_err(),
            ConfigError::States { states: bad }
        );
        assert!(Recorder::with_states(4, bad).is_err());
    }
    let plans = vec![DraftPlan::new(1, 4).unwrap(); MAX_STATES + 1];
    assert!(SharedStateTable::new(&plans[..0]).is_err());
    assert!(SharedStateTable::new(&plans).is_err());
    assert_eq!(
        SharedStateTable::new(&plans[..MAX_STATES])
            .unwrap()
            .states(),
        128
    );
    // A space of 16 levels × 8 buckets is 128 states; one bucket more is refused.
    let full = StateSpace::new(16).unwrap().by_bucket(8).unwrap();
    assert_eq!(full.count(), 128);
    assert_eq!(
        full.by_short_match().unwrap_err(),
        ConfigError::States { states: 256 }
    );
    // Adding a dimension again replaces it.
    assert_eq!(full.by_bucket(2).unwrap().count(), 32);
    assert!(StateSpace::new(1).unwrap().by_bucket(0).is_err());
    assert!(StateSpace::new(1).unwrap().by_confidence(129).is_err());
    assert!(StateSpace::new(17).is_err());
}

/// 128 states end to end: recorded in their own histograms, each state's
/// controller fed its own window exactly as a lone `DraftController`, and
/// the published table equal to the controllers' plans.
#[test]
fn a_controller_of_128_states_learns_each_state_apart() {
    const STATES: usize = 128;
    let cost = || StepCost::linear(1.0, 0.1).unwrap();
    let recorder = Recorder::with_states(4, STATES).unwrap();
    let mut controller = StateController::with_states(4, cost(), STATES).unwrap();
    // Each state's windows decided on alone, as the state controller passes
    // them on.
    let mut alone: Vec<DraftController> = (0..STATES)
        .map(|_| {
            DraftController::new(4, cost())
                .unwrap()
                .with_update_observations(0)
        })
        .collect();
    let table = controller.shared_table();
    let worker = recorder.worker();
    let mut rng = SplitMix64::seed_from_u64(7);
    let mut previous = recorder.snapshot_by_state();
    let mut step = 0u64;
    for _ in 0..6 {
        for _ in 0..20_000 {
            let state = (rng.next_u64() % STATES as u64) as usize;
            // State s accepts s / 128 per position.
            let k = table.draft_len_for(state, step);
            step += 1;
            if k > 0 {
                let a = accepted(&mut rng, k, state as f64 / STATES as f64);
                worker.observe_in(state, k, a).unwrap();
            }
        }
        let now = recorder.snapshot_by_state();
        assert_eq!(now.len(), STATES);
        let windows: Vec<AcceptanceHistogram> = now
            .iter()
            .zip(&previous)
            .map(|(n, p)| n.delta_since(p).unwrap())
            .collect();
        controller.update(&windows);
        for (c, w) in alone.iter_mut().zip(&windows) {
            c.update(w);
        }
        controller.publish(&table);
        previous = now;
    }
    for (s, c) in alone.iter().enumerate() {
        assert_eq!(
            controller.controller_at(s).unwrap().plan(),
            c.plan(),
            "state {s}"
        );
        assert_eq!(table.load(s), Some(c.plan()), "state {s}");
        assert_eq!(controller.draft_len_at(s, 31), c.draft_len_for(31));
    }
    assert_eq!(controller.plans().len(), STATES);
    // Hard states do not draft, easy ones draft long.
    assert_eq!(table.load(0).unwrap().draft_len(), 0);
    assert!(table.load(STATES - 1).unwrap().draft_len() >= 3);
    assert!(controller.controller_at(STATES).is_none());
    assert_eq!(controller.draft_len_at(STATES, 0), 0);
    // The engine-wide snapshot is still the sum.
    let total: u64 = previous
        .iter()
        .map(AcceptanceHistogram::num_spec_steps)
        .sum();
    assert_eq!(recorder.snapshot().num_spec_steps(), total);
}

/// The `RequestState` methods of a controller of fewer than 4 states read
/// its last state, and its 4-state plan reads 0 for the missing ones.
#[test]
fn a_controller_of_fewer_states_never_panics_on_a_request_state() {
    let c = StateController::with_states(4, StepCost::linear(1.0, 0.1).unwrap(), 2).unwrap();
    let top = RequestState::with_score(1.0);
    assert_eq!(c.draft_len(top), c.controller_at(1).unwrap().draft_len());
    assert_eq!(
        c.draft_len_for(top, 31),
        c.controller_at(1).unwrap().draft_len_for(31)
    );
    let first = c.controller_at(0).unwrap().draft_len();
    let plan = c.plan();
    let lens: Vec<usize> = (0..4)
        .map(|s| plan.draft_len(RequestState::with_score((s as f64 + 0.5) / 4.0)))
        .collect();
    assert_eq!(lens, [first, c.controller_at(1).unwrap().draft_len(), 0, 0]);
    // The existing four-state controller is unchanged: a floor of 1.
    let four = StateController::new(4, StepCost::linear(1.0, 0.1).unwrap()).unwrap();
    assert_eq!(four.states(), RequestState::COUNT);
    assert!((0..4).all(|s| four.controller_at(s).unwrap().min_draft_len() == 1));
    assert_eq!(
        StateController::with_states(4, StepCost::linear(1.0, 0.1).unwrap(), 4)
            .unwrap()
            .controller_at(0)
            .unwrap()
            .min_draft_len(),
        0
    );
}

/// Reading the table, computing the state index and publishing allocate
/// nothing.
#[test]
fn the_request_step_and_the_publish_never_allocate() {
    assert!(
        allocations_during(|| {
            std::hint::black_box(vec![1u8; 8]);
        }) >= 1
    );
    let space = StateSpace::new(4)
        .unwrap()
        .by_match_length(4)
        .unwrap()
        .by_after_undrafted()
        .unwrap()
        .by_confidence(2)
        .unwrap();
    let controller =
        StateController::with_states(8, StepCost::linear(1.0, 0.1).unwrap(), space.count())
            .unwrap();
    let table = controller.shared_table();
    let mut request = RequestState::new();
    let mut drafted = 0;
    let n = allocations_during(|| {
        for step in 0..10_000u64 {
            let signal = DraftSignal::ngram((step % 6) as usize, 4)
                .with_short_proposal(step % 5 == 0)
                .with_confidence((step % 10) as f64 / 10.0);
            let index = space.index(std::hint::black_box(request), signal);
            let k = table.draft_len_for(std::hint::black_box(index), step);
            drafted += k;
            let plan = table.load(index);
            std::hint::black_box(plan);
            request = if k == 0 {
                request.after_undrafted()
            } else {
                request.after(k, k / 2)
            };
            if step % 1000 == 0 {
                controller.publish(&table);
            }
        }
    });
    assert_eq!(n, 0, "the request-step or the publish allocated {n} times");
    assert!(drafted > 0);
}

proptest! {
    /// Each constructor keeps what it was given (saturated or clamped as
    /// documented), and the builders change only their own field.
    #[test]
    fn a_signal_keeps_what_the_drafter_knew(
        matched in 0usize..=1000,
        max_n in 0usize..=1000,
        short: bool,
        confidence in -1.0f64..=2.0,
        bucket in 0usize..=1000,
        score in -1.0f64..=300.0,
    ) {
        let signal = DraftSignal::ngram(matched, max_n)
            .with_short_proposal(short)
            .with_confidence(confidence)
            .with_bucket(bucket)
            .with_score(score);
        prop_assert_eq!(signal.matched_n(), matched.min(255));
        prop_assert_eq!(signal.short_match(), matched < max_n);
        prop_assert_eq!(signal.short_proposal(), short);
        let c = confidence.clamp(0.0, 1.0);
        prop_assert!((signal.confidence() - c).abs() <= 1.0 / 65536.0, "{}", signal.confidence());
        prop_assert_eq!(signal.bucket(), bucket.min(255));
        // The score: 1/256 of a token, rounded down, in 0..=65535/256.
        let kept = score.clamp(0.0, 65535.0 / 256.0);
        prop_assert!(signal.score() <= kept && kept - signal.score() < 1.0 / 256.0, "{}", signal.score());
        prop_assert_eq!(DraftSignal::suffix(matched, max_n, score), DraftSignal::ngram(matched, max_n).with_score(score));
        // A builder leaves the other fields alone.
        let plain = DraftSignal::ngram(matched, max_n);
        prop_assert_eq!(
            plain.with_bucket(0).with_confidence(0.0).with_short_proposal(false).with_score(0.0),
            plain
        );
    }
}

#[test]
fn the_empty_signal_knows_nothing() {
    let none = DraftSignal::NONE;
    assert_eq!(
        (
            none.matched_n(),
            none.short_match(),
            none.short_proposal(),
            none.confidence(),
            none.bucket()
        ),
        (0, false, false, 0.0, 0)
    );
    assert_eq!(DraftSignal::default(), none);
    assert_eq!(
        DraftSignal::NONE.with_confidence(f64::NAN).confidence(),
        0.0
    );
    // Each dimension alone, at its documented buckets.
    let s = RequestState::new();
    let at = |space: StateSpace, signal| space.index(s, signal);
    let one = StateSpace::new(1).unwrap();
    let short_prop = one.by_short_proposal().unwrap();
    assert_eq!(at(short_prop, none.with_short_proposal(true)), 1);
    assert_eq!(at(short_prop, none), 0);
    let buckets = one.by_bucket(4).unwrap();
    assert_eq!(
        (0..7)
            .map(|b| at(buckets, none.with_bucket(b)))
            .collect::<Vec<_>>(),
        [0, 1, 2, 3, 3, 3, 3]
    );
    // The order of the dimensions decides the radix: the first added is the
    // most significant.
    let a = one.by_short_match().unwrap().by_bucket(3).unwrap();
    let b = one.by_bucket(3).unwrap().by_short_match().unwrap();
    let signal = DraftSignal::ngram(1, 2).with_bucket(2);
    assert_eq!((at(a, signal), at(b, signal)), (3 + 2, 2 * 2 + 1));
}
