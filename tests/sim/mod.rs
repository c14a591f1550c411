//! A simulated speculative decoder for the advisor and controller tests:
//! constant per-position acceptance `alpha`, so the truth is known in closed
//! form (Leviathan, Kalman and Matias 2023).

#![allow(dead_code)]

use rand::{RngCore, SeedableRng};
use rand_xoshiro::SplitMix64;
use specdec_metrics::AcceptanceHistogram;

/// The tests' seeded generator (SplitMix64 from the rand project), with
/// the few draws the simulation needs.
pub struct Rng(SplitMix64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(SplitMix64::seed_from_u64(seed))
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in `lo..=hi`.
    pub fn between(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as usize
    }
}

/// One verify step drafting `k` with per-position acceptance `alpha`: the
/// verifier accepts the longest prefix, each draft independently with
/// probability `alpha`.
pub fn verify(rng: &mut Rng, k: usize, alpha: f64) -> usize {
    let mut a = 0;
    while a < k && rng.unit() < alpha {
        a += 1;
    }
    a
}

/// `E[a | k] = alpha (1 - alpha^k) / (1 - alpha)`.
pub fn expected_accepted(alpha: f64, k: usize) -> f64 {
    alpha * (1.0 - alpha.powi(k as i32)) / (1.0 - alpha)
}

/// Leviathan et al.'s walltime improvement with `cost(k) = 1 + c k`:
/// `(1 - alpha^(k+1)) / ((1 - alpha)(1 + c k))`.
pub fn true_speedup(alpha: f64, c: f64, k: usize) -> f64 {
    (1.0 - alpha.powi(k as i32 + 1)) / ((1.0 - alpha) * (1.0 + c * k as f64))
}

/// The formula's best `k` in `0..=max` and its speedup.
pub fn optimum(alpha: f64, c: f64, max: usize) -> (usize, f64) {
    (0..=max)
        .map(|k| (k, true_speedup(alpha, c, k)))
        .fold(
            (0, 1.0),
            |best, (k, s)| if s > best.1 { (k, s) } else { best },
        )
}

/// `steps` steps with drafts uniform over `1..=max`.
pub fn spread_histogram(max: usize, alpha: f64, steps: usize, seed: u64) -> AcceptanceHistogram {
    let mut rng = Rng::new(seed);
    let mut h = AcceptanceHistogram::new(max).unwrap();
    for _ in 0..steps {
        let k = rng.between(1, max);
        h.observe(k, verify(&mut rng, k, alpha)).unwrap();
    }
    h
}
