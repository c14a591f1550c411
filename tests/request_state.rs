//! `RequestState`, `StatePlan` and `StateController`: the state follows a
//! request's recent acceptance, a plan survives its packing, and the
//! controller learns a length per state.

use proptest::prelude::*;
use specdec_metrics::{
    AcceptanceHistogram, DraftController, RequestState, SharedStatePlan, StateController,
    StatePlan, StepCost,
};

proptest! {
    /// The score moves towards the step's acceptance, never past it, and
    /// the index is the score's quarter.
    #[test]
    fn the_score_moves_towards_each_steps_acceptance(
        start in 0.0f64..=1.0,
        steps in prop::collection::vec((0usize..=8, 0usize..=8), 1..40),
    ) {
        let mut state = RequestState::with_score(start);
        for (k, a) in steps {
            let before = state.score();
            let next = state.after(k, a);
            if k == 0 {
                prop_assert_eq!(next, state);
            } else {
                let a = a.min(k);
                let target = a as f64 / k.min(a + 1) as f64;
                let after = next.score();
                // The score is fixed point (1/16384 apart): its own target
                // is within one unit below the exact one, so a score that
                // starts between the two may move one unit off the exact.
                prop_assert!((after - target).abs() <= (before - target).abs() + 1e-4);
                prop_assert!((after - before).abs() <= (target - before).abs() / 4.0 + 1e-4);
            }
            prop_assert_eq!(next.index(), ((next.score() * 4.0) as usize).min(3));
            state = next;
        }
    }

    /// Every plan survives packing into one word, and each state reads its
    /// own length.
    #[test]
    fn state_plans_pack_into_one_word(lens in prop::array::uniform4(0usize..=64), max in 1usize..=64) {
        let lens = lens.map(|k| k.min(max));
        let plan = StatePlan::new(lens, max).unwrap();
        prop_assert_eq!(plan.max_draft_len(), max);
        prop_assert_eq!(StatePlan::from_bits(plan.to_bits()), Some(plan));
        // The shared cell gives back the plan, whether it was the first or
        // a later one published.
        let first = SharedStatePlan::new(plan);
        let later = SharedStatePlan::new(StatePlan::new([max; 4], max).unwrap());
        later.publish(plan);
        prop_assert_eq!((first.load(), later.load()), (plan, plan));
        for (s, &k) in lens.iter().enumerate() {
            let state = RequestState::with_score((s as f64 + 0.5) / 4.0);
            prop_assert_eq!(state.index(), s);
            prop_assert_eq!(plan.draft_len(state), k);
            prop_assert_eq!(plan.draft_len_for(state, 30), k);
            prop_assert_eq!(plan.draft_len_for(state, 31), (2 * k + 1).min(max));
            for step in [0, 30, 31, 63] {
                prop_assert_eq!(later.draft_len_for(state, step), plan.draft_len_for(state, step));
            }
        }
    }
}

#[test]
fn runs_of_full_or_no_acceptance_reach_the_extreme_states() {
    let mut state = RequestState::new();
    let mut steps = 0;
    while state.index() != RequestState::COUNT - 1 {
        state = state.after(3, 3);
        steps += 1;
    }
    // 1/2 to 3/4 with weight 1/4: two or three steps.
    assert!(steps <= 3, "{steps} steps");
    for _ in 0..200 {
        state = state.after(3, 3);
    }
    assert_eq!(state.score(), 1.0, "a long run reaches the top exactly");
    for _ in 0..200 {
        state = state.after(5, 0);
    }
    assert_eq!(state.score(), 0.0);
    // Accepted counts above the draft read as the whole draft.
    assert_eq!(state.after(2, 9), state.after(2, 2));
}

/// Two kinds of requests: the controller learns a long draft for the state
/// of the easy ones and the floor of one token for the hard ones; a state
/// without windows keeps its choice.
#[test]
fn the_controller_learns_a_length_per_state() {
    let mut c = StateController::new(8, StepCost::linear(1.0, 0.1).unwrap()).unwrap();
    let (easy, hard) = (RequestState::with_score(1.0), RequestState::with_score(0.0));
    for _ in 0..5 {
        let mut windows: Vec<_> = (0..RequestState::COUNT)
            .map(|_| AcceptanceHistogram::new(8).unwrap())
            .collect();
        for _ in 0..2000 {
            windows[easy.index()].observe(8, 8).unwrap();
            windows[hard.index()].observe(4, 0).unwrap();
        }
        c.update(&windows);
    }
    assert_eq!((c.draft_len(easy), c.draft_len(hard)), (8, 1));
    let plan = c.plan();
    assert_eq!((plan.draft_len(easy), plan.draft_len(hard)), (8, 1));
    for step in [0, 31] {
        for state in [easy, hard] {
            assert_eq!(
                c.draft_len_for(state, step),
                plan.draft_len_for(state, step)
            );
        }
    }
    assert_eq!(
        (c.draft_len_for(easy, 0), c.draft_len_for(hard, 31)),
        (8, 3)
    );
    // No window: nothing to decide on yet.
    c.update(&[]);
    assert_eq!(
        (c.controller(easy).updates(), c.pending_observations()),
        (5, 0)
    );
    // Fewer windows than states: the others had an empty interval, and
    // every state decides once the given ones hold enough observations.
    let mut few: Vec<_> = (0..=easy.index())
        .map(|_| AcceptanceHistogram::new(8).unwrap())
        .collect();
    for _ in 0..c.update_observations() {
        few[easy.index()].observe(8, 8).unwrap();
    }
    let befores: Vec<usize> = (0..RequestState::COUNT)
        .map(|i| c.controller_at(i).unwrap().draft_len())
        .collect();
    c.update(&few);
    for (i, before) in befores.iter().enumerate().skip(easy.index() + 1) {
        assert_eq!(
            c.controller_at(i).unwrap().draft_len(),
            *before,
            "state {i}"
        );
        assert_eq!(c.controller_at(i).unwrap().updates(), 6, "state {i}");
    }
    assert_eq!(c.controller(easy).updates(), 6);
    assert!(c.switches() >= 2);
}

/// The state controller counts the observations of every state together:
/// four states of 100 observations a call decide on every second call,
/// each state on its own two windows pooled (the memory of a lone
/// controller handed them at once).
#[test]
fn the_state_controller_pools_windows_over_all_states() {
    let cost = || StepCost::linear(1.0, 0.1).unwrap();
    let mut c = StateController::new(8, cost())
        .unwrap()
        .with_update_observations(512);
    assert_eq!(c.update_observations(), 512);
    let mut alone: Vec<DraftController> = (0..RequestState::COUNT)
        .map(|_| {
            DraftController::new(8, cost())
                .unwrap()
                .with_min_draft_len(1)
                .unwrap()
                .with_update_observations(0)
        })
        .collect();
    let mut pooled: Vec<AcceptanceHistogram> = Vec::new();
    for call in 0..8 {
        let windows: Vec<AcceptanceHistogram> = (0..RequestState::COUNT)
            .map(|state| {
                let mut w = AcceptanceHistogram::new(8).unwrap();
                for i in 0..100 {
                    // State s accepts up to s + call % 3 tokens of 8.
                    w.observe(8, (state + call % 3 + i % 2).min(8)).unwrap();
                }
                w
            })
            .collect();
        if pooled.is_empty() {
            pooled = windows.clone();
        } else {
            for (p, w) in pooled.iter_mut().zip(&windows) {
                p.merge(w).unwrap();
            }
        }
        c.update(&windows);
        let decided = call % 2 == 1;
        assert_eq!(c.pending_observations(), if decided { 0 } else { 400 });
        if decided {
            for (a, w) in alone.iter_mut().zip(pooled.drain(..)) {
                a.update(&w);
            }
        }
        for (i, a) in alone.iter().enumerate() {
            let s = c.controller_at(i).unwrap();
            assert_eq!(
                s.updates(),
                (call as u64).div_ceil(2),
                "state {i}, call {call}"
            );
            assert_eq!(s.remembered(), a.remembered(), "state {i}, call {call}");
            assert_eq!(s.plan(), a.plan(), "state {i}, call {call}");
        }
    }
    // Inclusive: 511 observations wait, the 512th decides.
    let mut window = AcceptanceHistogram::new(8).unwrap();
    for _ in 0..511 {
        window.observe(8, 8).unwrap();
    }
    c.update(&[window]);
    assert_eq!(
        (
            c.pending_observations(),
            c.controller_at(0).unwrap().updates()
        ),
        (511, 4)
    );
    let mut one = AcceptanceHistogram::new(8).unwrap();
    one.observe_undrafted();
    c.update(&[one]);
    assert_eq!(
        (
            c.pending_observations(),
            c.controller_at(0).unwrap().updates()
        ),
        (0, 5)
    );
}
