//! Loom model of `SharedStateTable`: the plan of many request states in
//! several atomic words, published by the metrics thread and read by
//! engine threads with one relaxed load per request-step.
//!
//! Run with the other models (see `recorder.rs`). As there, the reader runs
//! in a spawned thread, the outcomes seen over all executions are
//! collected, and the model asserts that every outcome it is about did
//! occur.
#![cfg(specdec_loom)]

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use loom::thread;
use specdec_metrics::{DraftPlan, SharedStateTable};

/// Five states: 0..4 in word 0, state 4 alone in word 1.
const STATES: usize = 5;

/// Generation `g`'s plan of state `s`: every generation and state gives a
/// different (draft, explore) pair, so a torn entry (the draft length of
/// one publish with the exploration length of another) matches no plan.
fn plan(g: usize, s: usize) -> DraftPlan {
    let d = g * 10 + s;
    DraftPlan::with_explore_len(d, d + 1 + g, 64).unwrap()
}

fn generation(g: usize) -> Vec<DraftPlan> {
    (0..STATES).map(|s| plan(g, s)).collect()
}

/// The generation a read of state `s` came from; panics on a torn entry.
fn generation_of(s: usize, p: Option<DraftPlan>) -> usize {
    let p = p.unwrap_or_else(|| panic!("state {s} missing"));
    (0..3)
        .find(|&g| plan(g, s) == p)
        .unwrap_or_else(|| panic!("state {s}: a torn or foreign plan {p:?}"))
}

/// A reader loading state 0 (word 0), state 4 (word 1), state 0 again and
/// state 1 (word 0) while the metrics thread publishes two new
/// generations sees, for each state, a whole plan of one generation, never
/// an older one after a newer one for the same state, and the two states
/// of one word from the same publish; across the two words it sees every
/// mix (state 0 newer than state 4 and the reverse), which the docs say
/// is allowed.
#[test]
fn shared_state_table_entries_are_whole_and_never_go_back() {
    let seen = Arc::new(Mutex::new(BTreeSet::new()));
    let executions = Arc::new(Mutex::new(0_u64));
    {
        let (seen, executions) = (Arc::clone(&seen), Arc::clone(&executions));
        loom::model(move || {
            *executions.lock().unwrap() += 1;
            let table = Arc::new(SharedStateTable::new(&generation(0)).unwrap());
            let reader = {
                let table = Arc::clone(&table);
                thread::spawn(move || {
                    let a = table.load(0);
                    let b = table.load(4);
                    let c = table.load(0);
                    let d = table.load(1);
                    (a, b, c, d)
                })
            };
            table.publish(&generation(1));
            table.publish(&generation(2));
            let (a, b, c, d) = reader.join().unwrap();
            let (a, b, c, d) = (
                generation_of(0, a),
                generation_of(4, b),
                generation_of(0, c),
                generation_of(1, d),
            );
            assert!(a <= c, "state 0: generation {c} read after {a}");
            assert!(
                c <= d,
                "word 0: state 1 of generation {d} read after state 0 of {c}"
            );
            for s in 0..STATES {
                assert_eq!(table.load(s), Some(plan(2, s)), "the last publish");
            }
            seen.lock().unwrap().insert((a, b, c));
        });
    }
    let seen = seen.lock().unwrap();
    println!(
        "loom model shared_state_table_entries_are_whole_and_never_go_back: {} executions, \
         (state 0, state 4, state 0 again) generations seen {seen:?}",
        executions.lock().unwrap()
    );
    // Before, between and after the publishes, and both mixes across words:
    // (0, 2, _): state 4 newer than state 0 read before it; (2, 0, 2):
    // state 0 newer than state 4 read after it.
    for outcome in [
        (0, 0, 0),
        (0, 0, 1),
        (1, 1, 1),
        (2, 2, 2),
        (0, 2, 2),
        (2, 0, 2),
        (1, 0, 2),
    ] {
        assert!(
            seen.contains(&outcome),
            "{outcome:?} never occurred; seen {seen:?}"
        );
    }
}
