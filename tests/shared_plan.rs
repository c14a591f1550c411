//! `SharedPlan`: what engine threads read is what the metrics thread
//! published, for every plan and step.

use std::sync::Arc;
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
