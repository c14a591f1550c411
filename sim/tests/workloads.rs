//! The workloads with runs and kinds ([`specdec_sim::workload`]): `bursty`
//! makes a request's acceptance come in runs (autocorrelated from step to
//! step, with the U-shaped histogram of vLLM #48915's example request), and
//! `classes` reproduces each measured profile's `P_i` within sampling
//! error. Drawn straight from the workload and its verifier, seeded.

use specdec_sim::rng::Rng;
use specdec_sim::workload::{
    Acceptance, CLASS_PROFILES, Class, DEFAULT_PERSISTENCE, Phases, Workload, verify,
};

fn phases(workload: Workload, persistence: f64) -> Phases {
    Phases {
        workload,
        phase_secs: 20.0,
        persistence,
    }
}

/// `requests` requests of `steps` verify steps each, drafting `k` at every
/// step: each request's accepted counts, in order.
fn runs(phases: &Phases, seed: u64, requests: usize, steps: usize, k: usize) -> Vec<Vec<usize>> {
    let mut rng = Rng::new(seed);
    (0..requests)
        .map(|_| {
            let mut traits = phases.new_request(&mut rng);
            (0..steps)
                .map(|_| {
                    phases.advance(&mut rng, &mut traits);
                    verify(&mut rng, k, phases.acceptance(0, &traits))
                })
                .collect()
        })
        .collect()
}

/// The lag-1 correlation of consecutive steps' accepted counts within
/// requests.
fn lag1_correlation(runs: &[Vec<usize>]) -> f64 {
    let all: Vec<f64> = runs.iter().flatten().map(|&a| a as f64).collect();
    let mean = all.iter().sum::<f64>() / all.len() as f64;
    let var = all.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / all.len() as f64;
    let (mut cov, mut pairs) = (0.0, 0usize);
    for run in runs {
        for w in run.windows(2) {
            cov += (w[0] as f64 - mean) * (w[1] as f64 - mean);
            pairs += 1;
        }
    }
    cov / pairs as f64 / var
}

/// Shares of the steps that accepted `0..=k` drafts.
fn histogram(runs: &[Vec<usize>], k: usize) -> Vec<f64> {
    let mut counts = vec![0usize; k + 1];
    for &a in runs.iter().flatten() {
        counts[a] += 1;
    }
    let n = counts.iter().sum::<usize>() as f64;
    counts.iter().map(|&c| c as f64 / n).collect()
}

/// The per-position rate `p` at which independent positions give a mean of
/// `mean` accepted out of `k` (bisection on `sum_{i=1..k} p^i`).
fn independent_rate(mean: f64, k: usize) -> f64 {
    let accepted = |p: f64| (1..=k).map(|i| p.powi(i as i32)).sum::<f64>();
    let (mut lo, mut hi) = (0.0, 1.0);
    for _ in 0..60 {
        let mid = (lo + hi) / 2.0;
        if accepted(mid) < mean {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

#[test]
fn bursty_acceptance_comes_in_runs_and_steady_does_not() {
    let bursty = runs(
        &phases(Workload::Bursty, DEFAULT_PERSISTENCE),
        1,
        400,
        200,
        8,
    );
    let steady = runs(
        &phases(Workload::Steady, DEFAULT_PERSISTENCE),
        1,
        400,
        200,
        8,
    );
    // Consecutive steps of a request share its condition 29 times in 30:
    // their outcomes are strongly correlated (about 0.6 expected); in
    // `steady` only the request's small offset links them.
    let (b, s) = (lag1_correlation(&bursty), lag1_correlation(&steady));
    assert!(b > 0.45, "bursty lag-1 correlation {b}");
    assert!(s.abs() < 0.1, "steady lag-1 correlation {s}");

    // Far more full acceptances than independent positions at the same
    // mean would give (about 0.22 against 0.11 at K = 8).
    let shares = histogram(&bursty, 8);
    let mean: f64 = shares.iter().enumerate().map(|(a, s)| a as f64 * s).sum();
    let p = independent_rate(mean, 8);
    assert!(
        shares[8] > 1.6 * p.powi(8),
        "full acceptance {} vs independent {} at mean {mean}",
        shares[8],
        p.powi(8)
    );
    // Steady, at its own mean, is close to independent (offsets widen it
    // a little).
    let shares = histogram(&steady, 8);
    let mean: f64 = shares.iter().enumerate().map(|(a, s)| a as f64 * s).sum();
    let p = independent_rate(mean, 8);
    assert!(
        shares[8] < 1.2 * p.powi(8),
        "steady full acceptance {} vs independent {}",
        shares[8],
        p.powi(8)
    );
}

#[test]
fn bursty_at_k_3_has_the_u_shape_of_vllm_48915() {
    // #48915's request: [39, 1, 0, 3] of 43 steps, many more steps with
    // nothing or everything accepted than with some.
    let shares = histogram(
        &runs(
            &phases(Workload::Bursty, DEFAULT_PERSISTENCE),
            2,
            400,
            200,
            3,
        ),
        3,
    );
    assert!(
        shares[0] > shares[1] && shares[3] > shares[1] && shares[3] > shares[2],
        "{shares:?}"
    );
    // Independent positions at the same mean give far fewer full
    // acceptances per step that accepted one draft.
    let mean: f64 = shares.iter().enumerate().map(|(a, s)| a as f64 * s).sum();
    let p = independent_rate(mean, 3);
    let independent = [1.0 - p, p * (1.0 - p), p * p * (1.0 - p), p.powi(3)];
    assert!(
        shares[3] / shares[1] > 1.5 * independent[3] / independent[1],
        "{shares:?} vs independent {independent:?}"
    );
}

#[test]
fn bursty_conditions_last_persistence_steps_on_average() {
    for persistence in [5.0, 30.0] {
        let phases = phases(Workload::Bursty, persistence);
        let mut rng = Rng::new(9);
        let (mut steps, mut switches, mut easy) = (0u64, 0u64, 0u64);
        for _ in 0..200 {
            let mut traits = phases.new_request(&mut rng);
            for _ in 0..500 {
                let before = traits.easy;
                phases.advance(&mut rng, &mut traits);
                steps += 1;
                switches += u64::from(traits.easy != before);
                easy += u64::from(traits.easy);
            }
        }
        let mean = steps as f64 / switches as f64;
        assert!(
            (mean - persistence).abs() < 0.1 * persistence,
            "mean duration {mean} for persistence {persistence}"
        );
        let share = easy as f64 / steps as f64;
        assert!((share - 0.5).abs() < 0.05, "easy share {share}");
    }
}

#[test]
fn classes_reproduce_each_profile_within_sampling_error() {
    let phases = phases(Workload::Classes, DEFAULT_PERSISTENCE);
    let mut rng = Rng::new(4);
    let k = 7;
    let mut drafts = [0u64; 3];
    // reached[class][i]: drafts whose first i + 1 positions were accepted.
    let mut reached = [[0u64; 7]; 3];
    for _ in 0..300_000 {
        let traits = phases.new_request(&mut rng);
        let class = traits.class.expect("every classes request has a kind");
        assert_eq!(phases.acceptance(0, &traits), Acceptance::Class(class));
        let a = verify(&mut rng, k, phases.acceptance(0, &traits));
        drafts[class as usize] += 1;
        for r in reached[class as usize].iter_mut().take(a) {
            *r += 1;
        }
    }
    for class in Class::ALL {
        let c = class as usize;
        let n = drafts[c] as f64;
        // A third each.
        assert!(
            (n / 300_000.0 - 1.0 / 3.0).abs() < 0.01,
            "{}: {n}",
            class.name()
        );
        for (i, &want) in CLASS_PROFILES[c].iter().enumerate() {
            let got = reached[c][i] as f64 / n;
            // Four standard errors of a share from n draws.
            let tolerance = 4.0 * (want * (1.0 - want) / n).sqrt() + 1e-12;
            assert!(
                (got - want).abs() <= tolerance,
                "{} P_{}: {got:.4} vs {want} (tolerance {tolerance:.4})",
                class.name(),
                i + 1
            );
        }
    }
    // Beyond 7, code and math go on at their last rate; summarization
    // accepts nothing there.
    let mut rng = Rng::new(5);
    let mut beyond = [0u64; 3];
    for class in Class::ALL {
        for _ in 0..20_000 {
            if verify(&mut rng, 9, Acceptance::Class(class)) > 7 {
                beyond[class as usize] += 1;
            }
        }
    }
    assert!(beyond[Class::Code as usize] > 0 && beyond[Class::Math as usize] > 0);
    assert_eq!(beyond[Class::Summarization as usize], 0);
}
