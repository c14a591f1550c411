//! `SharedPlan`: what engine threads read is what the metrics thread
//! published, for every plan and step.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

use specdec_metrics::{DraftController, DraftPlan, EXPLORATION_PERIOD, SharedPlan, StepCost};

#[test]
fn load_returns_every_plan_published() {
    for max in [1, 2, 8, 64] {
        let cell = SharedPlan::new(DraftPlan::new(max, max).unwrap());
        for draft in (0..=max).rev() {
            let plan = DraftPlan::new(draft, max).unwrap();
            cell.publish(plan);
            assert_eq!(cell.load(), plan, "K = {max}, draft {draft}");
            for step in 0..2 * EXPLORATION_PERIOD {
                assert_eq!(cell.draft_len_for(step), plan.draft_len_for(step));
            }
        }
    }
}

#[test]
fn a_new_cell_holds_its_first_plan() {
    let plan = DraftPlan::new(5, 12).unwrap();
    let cell = SharedPlan::new(plan);
    assert_eq!(cell.load(), plan);
    assert_eq!(cell.draft_len_for(EXPLORATION_PERIOD - 1), 11);
}

/// `with_explore_len` accepts exactly the plans an engine can run: `K` in
/// `1..=64`, the draft length at most `K`, exploration between
/// `max(draft, 1)` and `K`.
#[test]
fn explicit_exploration_lengths_are_checked() {
    for max in 0..=65 {
        for draft in 0..=max + 1 {
            for explore in 0..=max + 1 {
                let valid = (1..=64).contains(&max)
                    && draft <= max
                    && draft.max(1) <= explore
                    && explore <= max;
                let plan = DraftPlan::with_explore_len(draft, explore, max);
                assert_eq!(plan.is_some(), valid, "{draft}, {explore}, K = {max}");
                if let Some(plan) = plan {
                    assert_eq!((plan.draft_len(), plan.explore_len()), (draft, explore));
                    assert_eq!(plan.draft_len_for(EXPLORATION_PERIOD - 1), explore);
                }
            }
        }
    }
}

/// The closed loop of an engine: a controller's plan published once, read
/// by other threads.
#[test]
fn engine_threads_read_the_controllers_plan() {
    let controller = DraftController::new(8, StepCost::linear(1.0, 0.05).unwrap()).unwrap();
    let cell = Arc::new(SharedPlan::new(DraftPlan::new(0, 8).unwrap()));
    cell.publish(controller.plan());
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let cell = Arc::clone(&cell);
            thread::spawn(move || (0..64).map(|s| cell.draft_len_for(s)).collect::<Vec<_>>())
        })
        .collect();
    let expected: Vec<_> = (0..64).map(|s| controller.draft_len_for(s)).collect();
    for r in readers {
        assert_eq!(r.join().unwrap(), expected);
    }
}

/// Readers read while the metrics thread publishes: every plan they load is
/// a whole plan that was published (never the draft length of one with the
/// exploration length of another), no reader ever reads an older plan after
/// a newer one, and every plan is read by some reader before the next one
/// is published (the publisher waits for it), so the reads really
/// interleave with the publications.
#[test]
fn readers_reading_during_publication_see_whole_plans_in_order() {
    // Every distinct plan, in the order they are published.
    let mut plans: Vec<DraftPlan> = Vec::new();
    for max in 1..=64 {
        for draft in 0..=max {
            let plan = DraftPlan::new(draft, max).unwrap();
            if !plans.contains(&plan) {
                plans.push(plan);
            }
        }
    }
    let index: Arc<HashMap<DraftPlan, usize>> =
        Arc::new(plans.iter().enumerate().map(|(i, &p)| (p, i)).collect());
    let last = plans.len() - 1;
    let cell = Arc::new(SharedPlan::new(plans[0]));
    // The newest plan index any reader has read.
    let newest_read = Arc::new(AtomicUsize::new(0));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (cell, index, newest_read) = (
                Arc::clone(&cell),
                Arc::clone(&index),
                Arc::clone(&newest_read),
            );
            let plans = plans.clone();
            thread::spawn(move || {
                let (mut previous, mut reads) = (0, 0u64);
                while previous != last {
                    let plan = cell.load();
                    let i = *index
                        .get(&plan)
                        .unwrap_or_else(|| panic!("read {plan:?}, a plan never published"));
                    assert!(
                        i >= previous,
                        "read plan {i} after the newer plan {previous}"
                    );
                    // An exploration step's read: this plan's exploration
                    // length or a newer plan's.
                    let explore = cell.draft_len_for(EXPLORATION_PERIOD - 1);
                    assert!(
                        plans[i..].iter().any(|p| p.explore_len() == explore),
                        "exploration length {explore} of no plan as new as {i}"
                    );
                    // Relaxed: a progress signal for the publisher only.
                    newest_read.fetch_max(i, Ordering::Relaxed);
                    previous = i;
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    for (i, &plan) in plans.iter().enumerate().skip(1) {
        cell.publish(plan);
        // Wait until a reader has read this plan (or a newer one, which
        // cannot exist yet): reads and publications interleave.
        while newest_read.load(Ordering::Relaxed) < i {
            thread::yield_now();
        }
    }
    let reads: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    assert!(
        reads as usize >= last,
        "{reads} reads for {last} publications"
    );
}
