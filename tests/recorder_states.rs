//! Recording per request state: each state's histogram holds exactly the
//! steps recorded in it, the engine-wide snapshot is their sum, and a
//! snapshot reads no more than the memory that holds data.

use std::thread;

use specdec_metrics::{AcceptanceHistogram, MAX_STATES, ObserveError, Recorder};

#[test]
fn each_state_holds_its_steps_and_the_snapshot_is_their_sum() {
    const STATES: usize = 4;
    let recorder = Recorder::with_states(6, STATES).unwrap();
    assert_eq!(recorder.states(), STATES);
    // Thread t records step (k, a) = (i % 7, i % 7 / 2) in state (i + t) % 4,
    // through its worker and through the any-thread path.
    thread::scope(|s| {
        for t in 0..3 {
            let recorder = &recorder;
            s.spawn(move || {
                let worker = recorder.worker();
                for i in 0..2000usize {
                    let (k, state) = (i % 7, (i + t) % STATES);
                    worker.observe_in(state, k, k / 2).unwrap();
                    recorder.observe_in(state, k, k).unwrap();
                }
                worker.observe_undrafted();
                worker.observe_scheduled(3).unwrap();
            });
        }
    });
    let mut expected: Vec<AcceptanceHistogram> = (0..STATES)
        .map(|_| AcceptanceHistogram::new(6).unwrap())
        .collect();
    for t in 0..3 {
        for i in 0..2000usize {
            let (k, state) = (i % 7, (i + t) % STATES);
            expected[state].observe(k, k / 2).unwrap();
            expected[state].observe(k, k).unwrap();
        }
    }
    let states = recorder.snapshot_by_state();
    assert_eq!(states, expected);
    let mut sum = AcceptanceHistogram::new(6).unwrap();
    for s in &states {
        sum.merge(s).unwrap();
    }
    let total = recorder.snapshot();
    assert_eq!(total.delta_since(&sum).unwrap().num_spec_steps(), 0);
    assert_eq!(total.num_spec_steps(), 12_000);
    assert_eq!(
        (total.num_undrafted_steps(), total.scheduled_steps(3)),
        (3, 3)
    );
    // Side counters belong to no state.
    assert!(
        states
            .iter()
            .all(|s| s.num_undrafted_steps() == 0 && s.num_scheduled_steps() == 0)
    );
}

#[test]
fn a_state_out_of_range_is_rejected_and_counted() {
    let recorder = Recorder::with_states(2, 2).unwrap();
    let worker = recorder.worker();
    assert_eq!(
        worker.observe_in(2, 1, 1),
        Err(ObserveError::StateOutOfRange {
            state: 2,
            states: 2,
            drafted: 1,
            accepted: 1
        })
    );
    // A bad state wins over a bad step; a bad step in a good state is as
    // without states.
    assert!(matches!(
        worker.observe_in(9, 1, 5),
        Err(ObserveError::StateOutOfRange { .. })
    ));
    assert_eq!(
        worker.observe_in(1, 1, 5),
        Err(ObserveError::AcceptedExceedsDrafted {
            drafted: 1,
            accepted: 5
        })
    );
    assert!(recorder.observe_in(usize::MAX, 0, 0).is_err());
    let total = recorder.snapshot();
    assert_eq!(
        (total.num_spec_steps(), total.num_rejected_observations()),
        (0, 4)
    );
}

#[test]
fn without_states_everything_is_state_zero() {
    let recorder = Recorder::new(3).unwrap();
    assert_eq!(recorder.states(), 1);
    recorder.worker().observe(3, 2).unwrap();
    recorder.worker().observe_in(0, 3, 1).unwrap();
    let states = recorder.snapshot_by_state();
    assert_eq!(states.len(), 1);
    assert_eq!(states[0].row(3), Some(&[0, 1, 1, 0][..]));
    assert_eq!(states[0].row(3), recorder.snapshot().row(3));
    assert!(recorder.worker().observe_in(1, 0, 0).is_err());
}

#[test]
fn the_number_of_states_is_checked() {
    for bad in [0, MAX_STATES + 1] {
        let err = Recorder::with_states(4, bad).unwrap_err();
        assert!(err.to_string().contains("1..=128"), "{err}");
    }
    assert!(Recorder::with_states(4, MAX_STATES).is_ok());
    assert!(Recorder::with_states(65, 2).is_err());
}
