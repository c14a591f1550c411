//! The recording paths never allocate: a counting global allocator wraps
//! `System` and counts, per thread, every allocation and reallocation.

use specdec_metrics::{AcceptanceHistogram, Recorder};
use specdec_test_support::allocations_during;

/// Valid steps over the whole triangle of K = 8, then invalid ones of both
/// kinds.
fn inputs() -> Vec<(usize, usize)> {
    let mut v: Vec<(usize, usize)> = (0..=8).flat_map(|k| (0..=k).map(move |a| (k, a))).collect();
    v.extend([(2, 3), (9, 0), (usize::MAX, 1), (0, usize::MAX)]);
    v
}

/// Every valid scheduled budget of K = 8, then three invalid ones.
const BUDGETS: [usize; 12] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 1 << 40, usize::MAX];

#[test]
fn the_counting_allocator_sees_allocations() {
    // Without this, a broken counter would make every test below pass.
    let n = allocations_during(|| {
        std::hint::black_box(vec![1u8; 16]);
    });
    assert!(n >= 1, "counting allocator saw {n} allocations");
}

#[test]
fn worker_observe_never_allocates() {
    let recorder = Recorder::new(8).unwrap();
    let worker = recorder.worker();
    let inputs = inputs();
    let mut rejected = 0;
    let n = allocations_during(|| {
        for _ in 0..100 {
            for &(k, a) in &inputs {
                if let Err(e) = std::hint::black_box(worker.observe(k, a)) {
                    std::hint::black_box(e.drafted());
                    rejected += 1;
                }
            }
            for &b in &BUDGETS {
                if let Err(e) = std::hint::black_box(worker.observe_scheduled(b)) {
                    std::hint::black_box(e.drafted());
                    rejected += 1;
                }
            }
            worker.observe_undrafted();
        }
    });
    assert_eq!(
        n, 0,
        "Worker::observe or observe_scheduled allocated {n} times"
    );
    assert_eq!(rejected, 700);
    let s = recorder.snapshot();
    assert_eq!(s.num_spec_steps(), 4500);
    assert_eq!(s.num_rejected_observations(), 700);
    assert_eq!(s.num_undrafted_steps(), 100);
    assert_eq!(s.scheduled_steps_by_budget(), &[100; 9]);
}

#[test]
fn recorder_observe_never_allocates() {
    let recorder = Recorder::new(8).unwrap();
    let inputs = inputs();
    let n = allocations_during(|| {
        for _ in 0..100 {
            for &(k, a) in &inputs {
                let _ = std::hint::black_box(recorder.observe(k, a));
            }
            for &b in &BUDGETS {
                let _ = std::hint::black_box(recorder.observe_scheduled(b));
            }
            recorder.observe_undrafted();
        }
    });
    assert_eq!(
        n, 0,
        "Recorder::observe or observe_scheduled allocated {n} times"
    );
    let s = recorder.snapshot();
    assert_eq!(
        (
            s.num_spec_steps(),
            s.num_rejected_observations(),
            s.num_undrafted_steps()
        ),
        (4500, 700, 100)
    );
    assert_eq!(s.scheduled_steps_by_budget(), &[100; 9]);
}

#[test]
fn histogram_observe_never_allocates() {
    let mut h = AcceptanceHistogram::new(8).unwrap();
    let inputs = inputs();
    let n = allocations_during(|| {
        for _ in 0..100 {
            for &(k, a) in &inputs {
                let _ = std::hint::black_box(h.observe(k, a));
            }
            for &b in &BUDGETS {
                let _ = std::hint::black_box(h.observe_scheduled(b));
            }
            h.observe_undrafted();
        }
    });
    assert_eq!(
        n, 0,
        "AcceptanceHistogram::observe or observe_scheduled allocated {n} times"
    );
    assert_eq!(
        (
            h.num_spec_steps(),
            h.num_rejected_observations(),
            h.num_undrafted_steps()
        ),
        (4500, 700, 100)
    );
    assert_eq!(h.scheduled_steps_by_budget(), &[100; 9]);
}

#[test]
fn reusing_a_shard_does_not_allocate_a_new_one() {
    let recorder = Recorder::new(8).unwrap();
    drop(recorder.worker());
    // Claiming the free shard may clone an `Arc` or two, never allocate a
    // new block of counters (at K = 8 a shard is 47 counters).
    let n = allocations_during(|| drop(recorder.worker()));
    assert_eq!(n, 0, "reusing a shard allocated {n} times");
    assert_eq!(recorder.shard_count(), 1);
}

#[test]
fn draft_len_for_never_allocates() {
    use specdec_metrics::{DraftController, SharedPlan, StepCost};
    let controller = DraftController::new(8, StepCost::linear(1.0, 0.1).unwrap()).unwrap();
    let plan = controller.plan();
    let shared = SharedPlan::new(plan);
    let mut total = 0;
    let n = allocations_during(|| {
        for step in 0..10_000u64 {
            total += std::hint::black_box(controller.draft_len_for(step));
            total += std::hint::black_box(plan.draft_len_for(step));
            total += std::hint::black_box(shared.draft_len_for(step));
            shared.publish(plan);
        }
    });
    assert_eq!(n, 0, "draft_len_for allocated {n} times");
    // 2 on ordinary steps, 5 on the 312 exploration steps (step % 32 == 31),
    // from the controller, its plan and the shared plan.
    let explored = 10_000 / 32;
    assert_eq!(total, 3 * (2 * (10_000 - explored) + 5 * explored));
}

#[test]
fn per_state_recording_never_allocates() {
    let recorder = Recorder::with_states(8, 4).unwrap();
    let worker = recorder.worker();
    let inputs = inputs();
    let mut rejected = 0;
    let n = allocations_during(|| {
        for state in 0..5 {
            for &(k, a) in &inputs {
                if std::hint::black_box(worker.observe_in(state, k, a)).is_err() {
                    rejected += 1;
                }
                if std::hint::black_box(recorder.observe_in(state, k, a)).is_err() {
                    rejected += 1;
                }
            }
        }
    });
    assert_eq!(n, 0, "observe_in allocated {n} times");
    // 4 invalid pairs in each valid state, every pair in state 4; twice.
    assert_eq!(rejected, 2 * (4 * 4 + inputs.len()));
    let states = recorder.snapshot_by_state();
    assert!(states.iter().all(|s| s.num_spec_steps() == 2 * 45));
}

#[test]
fn reading_the_per_state_plan_and_updating_a_request_state_never_allocate() {
    use specdec_metrics::{RequestState, SharedStatePlan, StateController, StepCost};
    let controller = StateController::new(8, StepCost::linear(1.0, 0.1).unwrap()).unwrap();
    let shared = SharedStatePlan::new(controller.plan());
    let mut state = RequestState::new();
    let mut drafted = 0;
    let n = allocations_during(|| {
        for step in 0..10_000u64 {
            let k = std::hint::black_box(&shared).draft_len_for(state, step);
            drafted += k;
            state = state.after(k, (step % 3) as usize);
        }
        shared.publish(controller.plan());
    });
    assert_eq!(n, 0, "the per-state plan allocated {n} times");
    assert!(drafted > 0);
}

#[test]
fn tracking_and_recording_proposals_never_allocate() {
    use specdec_metrics::ProposalTracker;
    let recorder = Recorder::builder(8).record_proposals().build().unwrap();
    let worker = recorder.worker();
    let mut h = AcceptanceHistogram::with_proposals(8).unwrap();
    // Built before the counting starts: the only allocation of a tracker.
    let mut tracker = ProposalTracker::new(8).unwrap();
    let mut other: ProposalTracker<u64> = ProposalTracker::new(8).unwrap();
    let proposal: Vec<u32> = (0..8).collect();
    let wide: Vec<u64> = (0..8).collect();
    let n = allocations_during(|| {
        for request in 0..50u32 {
            for step in 0..8 {
                // A drifting proposal, so some match and some do not.
                let k = (step + request as usize) % 9;
                tracker
                    .draft(&proposal[step % 3..], k.min(8 - step % 3))
                    .unwrap();
                other.draft(&wide[..step], step).unwrap();
                for t in 0..(step as u32 % 3 + 1) {
                    tracker.push_token(t + (step % 3) as u32, &worker);
                    other.push_token(u64::from(t), &mut h);
                }
            }
            if request % 2 == 0 {
                tracker.finish(&recorder);
                other.finish(&mut h);
            } else {
                tracker.abort(&worker);
                other.abort(&mut h);
            }
            // The recording calls themselves, valid and not.
            let _ = std::hint::black_box(worker.observe_proposal(8, 3));
            let _ = std::hint::black_box(worker.observe_proposal(9, 0));
            let _ = std::hint::black_box(recorder.observe_proposal(0, 0));
            let _ = std::hint::black_box(worker.observe_aborted_proposals(2));
            let _ = std::hint::black_box(h.observe_proposal(3, 4));
        }
    });
    assert_eq!(n, 0, "tracking or recording proposals allocated {n} times");
    let s = recorder.snapshot();
    assert!(
        s.num_resolved_proposals() > 50 && s.num_aborted_proposals() > 100,
        "{s:?}"
    );
    assert_eq!(s.num_rejected_observations(), 100);
    assert!(h.num_resolved_proposals() > 100 && h.num_aborted_proposals() > 0);
    assert_eq!(h.num_rejected_observations(), 50);
}
