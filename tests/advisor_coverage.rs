//! The advisor's 90% intervals for `E[a | k]` against the truth, when
//! acceptance persists within requests (runs of easy and hard stretches)
//! and when it does not. One histogram cannot see the persistence and its
//! intervals are too narrow; several windows can, and
//! `Advisor::recommend_windows` widens the intervals by what they show.

use crate::sim;

use sim::{Rng, expected_accepted, verify};
use specdec_metrics::{AcceptanceHistogram, Advisor, StepCost};

const K: usize = 4;
const REQUESTS: usize = 16;
const WINDOWS: usize = 8;
const STEPS: usize = 4000;
const REPLICATIONS: usize = 200;

/// `WINDOWS` windows of `STEPS` verify steps drafting `K`, from `REQUESTS`
/// requests in turn, each easy (acceptance `easy`) or hard (`hard`) and
/// switching with probability `switch` at each of its steps.
fn windows(rng: &mut Rng, easy: f64, hard: f64, switch: f64) -> Vec<AcceptanceHistogram> {
    let mut is_easy: Vec<bool> = (0..REQUESTS).map(|_| rng.unit() < 0.5).collect();
    (0..WINDOWS)
        .map(|_| {
            let mut h = AcceptanceHistogram::new(K).unwrap();
            for step in 0..STEPS {
                let r = step % REQUESTS;
                if rng.unit() < switch {
                    is_easy[r] = !is_easy[r];
                }
                let alpha = if is_easy[r] { easy } else { hard };
                h.observe(K, verify(rng, K, alpha)).unwrap();
            }
            h
        })
        .collect()
}

/// The share of replications whose interval for `E[a | K]` holds the
/// truth: from the windows pooled into one histogram, and from the windows.
fn coverage(easy: f64, hard: f64, switch: f64, seed: u64) -> (f64, f64) {
    let truth = (expected_accepted(easy, K) + expected_accepted(hard, K)) / 2.0;
    let cost = StepCost::linear(1.0, 0.1).unwrap();
    let mut rng = Rng::new(seed);
    let (mut single, mut multi) = (0, 0);
    for _ in 0..REPLICATIONS {
        let windows = windows(&mut rng, easy, hard, switch);
        let mut pooled = windows[0].clone();
        for w in &windows[1..] {
            pooled.merge(w).unwrap();
        }
        let one = Advisor::default().recommend(&pooled, &cost).unwrap();
        assert!(one.intervals_assume_independent_steps);
        let [lo, hi] = one.candidates[K].accepted_interval;
        single += usize::from(lo <= truth && truth <= hi);
        let many = Advisor::default()
            .recommend_windows(&windows, &cost)
            .unwrap();
        assert!(!many.intervals_assume_independent_steps && many.windows == WINDOWS);
        let [lo, hi] = many.candidates[K].accepted_interval;
        multi += usize::from(lo <= truth && truth <= hi);
    }
    let n = REPLICATIONS as f64;
    (single as f64 / n, multi as f64 / n)
}

#[test]
fn intervals_cover_the_truth_when_acceptance_comes_in_runs() {
    // Easy 0.9, hard 0.3, about 30 steps in each.
    let (single, multi) = coverage(0.9, 0.3, 1.0 / 30.0, 1);
    println!("runs: one histogram covers {single:.3}, the windows {multi:.3}");
    assert!(
        single < 0.6,
        "one histogram already covers {single}: the test shows nothing"
    );
    assert!(
        multi >= 0.85,
        "the windows' intervals cover {multi} of the time"
    );
}

#[test]
fn intervals_stay_as_they_were_on_independent_steps() {
    let (single, multi) = coverage(0.6, 0.6, 0.0, 2);
    println!("independent: one histogram covers {single:.3}, the windows {multi:.3}");
    for c in [single, multi] {
        assert!(
            (0.85..=0.95).contains(&c),
            "coverage {c} on independent steps"
        );
    }
}

#[test]
fn windows_of_another_k_or_none_are_errors() {
    use specdec_metrics::AdviceError;
    let cost = StepCost::linear(1.0, 0.1).unwrap();
    assert_eq!(
        Advisor::default()
            .recommend_windows(&[], &cost)
            .unwrap_err(),
        AdviceError::NoWindows
    );
    let two = [
        AcceptanceHistogram::new(2).unwrap(),
        AcceptanceHistogram::new(3).unwrap(),
    ];
    assert!(matches!(
        Advisor::default().recommend_windows(&two, &cost),
        Err(AdviceError::Merge(_))
    ));
    let table = StepCost::table(vec![1.0, 1.1]).unwrap();
    let one = [AcceptanceHistogram::new(2).unwrap()];
    assert!(matches!(
        Advisor::default().recommend_windows(&one, &table),
        Err(AdviceError::Cost(_))
    ));
    // One window: as recommend, intervals assuming independent steps.
    let r = Advisor::default().recommend_windows(&one, &cost).unwrap();
    assert!(r.intervals_assume_independent_steps && r.dispersion == 1.0);
}
