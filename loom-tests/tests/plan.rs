//! Loom model of `SharedPlan`: engine threads read the plan the metrics
//! thread publishes, with one relaxed load per step.
//!
//! Run with the other models (see `recorder.rs`). As there, the reader runs
//! in a spawned thread, the outcomes seen over all executions are collected,
//! and the model asserts that every outcome it is about did occur.
#![cfg(specdec_loom)]

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use loom::thread;
use specdec_metrics::{DraftPlan, SharedPlan};

/// A worker reading twice while the metrics thread publishes two new plans
/// sees only whole plans (the draft and the exploration length of the same
/// `publish`), and never an older plan after a newer one.
#[test]
fn shared_plan_is_never_mixed() {
    // Three plans whose fields all differ, so a mix of two is visible:
    // (draft, explore) = (1, 3), (4, 8) and (0, 1).
    let plans = [
        DraftPlan::new(1, 8).unwrap(),
        DraftPlan::new(4, 8).unwrap(),
        DraftPlan::new(0, 8).unwrap(),
    ];
    let seen = Arc::new(Mutex::new(BTreeSet::new()));
    let executions = Arc::new(Mutex::new(0_u64));
    {
        let (seen, executions) = (Arc::clone(&seen), Arc::clone(&executions));
        loom::model(move || {
            *executions.lock().unwrap() += 1;
            let cell = Arc::new(SharedPlan::new(plans[0]));
            let reader = {
                let cell = Arc::clone(&cell);
                thread::spawn(move || {
                    let first = cell.load();
                    let second = cell.load();
                    // Exploration steps read the same word.
                    let explore = cell.draft_len_for(31);
                    (first, second, explore)
                })
            };
            cell.publish(plans[1]);
            cell.publish(plans[2]);
            let (first, second, explore) = reader.join().unwrap();
            let index = |p: DraftPlan| {
                plans
                    .iter()
                    .position(|&q| q == p)
                    .unwrap_or_else(|| panic!("a mixed plan: {p:?}"))
            };
            let (i, j) = (index(first), index(second));
            assert!(i <= j, "plan {j} read after the newer plan {i}");
            assert!(
                plans[j..].iter().any(|p| p.explore_len() == explore),
                "exploration length {explore} of no plan as new as {j}"
            );
            assert_eq!(cell.load(), plans[2], "the last plan published");
            seen.lock().unwrap().insert((i, j));
        });
    }
    let seen = seen.lock().unwrap();
    println!(
        "loom model shared_plan_is_never_mixed: {} executions, (first, second) plans seen {seen:?}",
        executions.lock().unwrap()
    );
    // The reader ran before, between and after the publications.
    for pair in [(0, 0), (0, 1), (1, 2), (2, 2), (0, 2)] {
        assert!(
            seen.contains(&pair),
            "{pair:?} never occurred; seen {seen:?}"
        );
    }
}

/// The per-state plan: a reader loading while two plans are published sees
/// only whole plans (every state's length and K from the same publish) and
/// never an older plan after a newer one.
#[test]
fn shared_state_plan_is_never_mixed() {
    use specdec_metrics::{RequestState, SharedStatePlan, StatePlan};
    // Three plans whose every field differs.
    let plans = [
        StatePlan::new([1, 2, 3, 4], 8).unwrap(),
        StatePlan::new([5, 6, 7, 8], 8).unwrap(),
        StatePlan::new([2, 1, 0, 3], 4).unwrap(),
    ];
    let seen = Arc::new(Mutex::new(BTreeSet::new()));
    {
        let seen = Arc::clone(&seen);
        loom::model(move || {
            let cell = Arc::new(SharedStatePlan::new(plans[0]));
            let reader = {
                let cell = Arc::clone(&cell);
                thread::spawn(move || {
                    let first = cell.load();
                    // A request-step's read: one load of the same word.
                    let k = cell.draft_len_for(RequestState::with_score(1.0), 0);
                    (first, k, cell.load())
                })
            };
            cell.publish(plans[1]);
            cell.publish(plans[2]);
            let (first, k, second) = reader.join().unwrap();
            let index = |p: StatePlan| {
                plans
                    .iter()
                    .position(|&q| q == p)
                    .unwrap_or_else(|| panic!("a mixed plan: {p:?}"))
            };
            let (i, j) = (index(first), index(second));
            assert!(i <= j, "plan {j} read after the newer plan {i}");
            let top = RequestState::with_score(1.0);
            assert!(
                plans[i..=j].iter().any(|p| p.draft_len(top) == k),
                "draft length {k} of no plan between {i} and {j}"
            );
            seen.lock().unwrap().insert((i, j));
        });
    }
    let seen = seen.lock().unwrap();
    println!("loom model shared_state_plan_is_never_mixed: (first, second) plans seen {seen:?}");
    for pair in [(0, 0), (0, 1), (1, 2), (2, 2), (0, 2)] {
        assert!(
            seen.contains(&pair),
            "{pair:?} never occurred; seen {seen:?}"
        );
    }
}
