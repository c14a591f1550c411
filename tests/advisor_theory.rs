//! The advisor against the theory: simulated verify steps with a constant
//! per-position acceptance `alpha` and `cost(k) = 1 + c k`, where Leviathan,
//! Kalman and Matias (2023) give the truth in closed form.
//!
//! `cargo test --release --test tests advisor_theory:: -- --nocapture` prints the
//! grid: the recommended `k` next to the formula's optimum, and the true
//! speedups of both.

use crate::sim;

use sim::{expected_accepted, optimum, spread_histogram, true_speedup};
use specdec_metrics::{Advisor, Continuation, StepCost};

const MAX: usize = 32;
const STEPS: usize = 300_000;
const ALPHAS: [f64; 6] = [0.5, 0.6, 0.7, 0.8, 0.9, 0.95];
const COSTS: [f64; 5] = [0.02, 0.05, 0.1, 0.2, 0.4];

#[test]
fn expected_accepted_is_within_two_percent_of_the_formula() {
    for (i, &alpha) in ALPHAS.iter().enumerate() {
        let h = spread_histogram(MAX, alpha, STEPS, 100 + i as u64);
        let advice = Advisor::default()
            .recommend(&h, &StepCost::linear(1.0, 0.1).unwrap())
            .unwrap();
        for k in 1..=MAX {
            let truth = expected_accepted(alpha, k);
            // The posterior mean is defined for every k (positions without
            // trials take the prior); the raw chain wherever every position
            // up to k had trials, which the drafts spread over 1..=K
            // guarantee for the positions that matter.
            let posterior = advice.candidates[k].expected_accepted;
            assert!(
                (posterior - truth).abs() <= 0.02 * truth,
                "alpha {alpha}, k {k}: posterior mean {posterior} vs {truth}"
            );
            match Continuation::new(&h).expected_accepted(k) {
                Some(raw) => assert!(
                    (raw - truth).abs() <= 0.02 * truth,
                    "alpha {alpha}, k {k}: {raw} vs {truth}"
                ),
                None => assert!(
                    alpha.powi(k as i32) < 1e-4,
                    "alpha {alpha}, k {k}: undefined though alpha^k = {}",
                    alpha.powi(k as i32)
                ),
            }
        }
    }
}

#[test]
fn recommendation_is_within_one_percent_of_the_optimum() {
    println!("alpha     c   k(advisor)  k(formula)  speedup(advisor)  speedup(formula)  ratio");
    let mut worst: f64 = 1.0;
    for (i, &alpha) in ALPHAS.iter().enumerate() {
        let h = spread_histogram(MAX, alpha, STEPS, 200 + i as u64);
        for &c in &COSTS {
            let advice = Advisor::default()
                .recommend(&h, &StepCost::linear(1.0, c).unwrap())
                .unwrap();
            let (k_opt, s_opt) = optimum(alpha, c, MAX);
            let s_rec = true_speedup(alpha, c, advice.draft_len);
            println!(
                "{alpha:5} {c:5} {:11} {k_opt:11} {s_rec:17.4} {s_opt:17.4}  {:.4}",
                advice.draft_len,
                s_rec / s_opt
            );
            assert!(
                s_rec >= 0.99 * s_opt,
                "alpha {alpha}, c {c}: k {} gives {s_rec}, the optimum k {k_opt} gives {s_opt}",
                advice.draft_len
            );
            // The advisor's own estimate of the speedup is close to the truth.
            assert!((advice.expected_speedup - s_rec).abs() <= 0.02 * s_rec);
            worst = worst.min(s_rec / s_opt);
        }
    }
    println!("worst ratio {worst:.4}");
}
