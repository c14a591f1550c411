//! The simulator's random numbers: `rand_xoshiro`'s SplitMix64 generator,
//! seeded per engine thread, behind the three draws the simulation makes.
//!
//! SplitMix64 (Steele, Lea and Flood 2014) is small (one `u64` of state),
//! fast and deterministic: enough for a simulation, and a run is a function
//! of its seed. `SplitMix64::seed_from_u64(s)` starts from the state `s`
//! itself, so the streams (and every figure of the policy table) are those
//! of the generator the demo used to write out by hand.
//!
//! The draws on top are fixed here, not left to a distribution crate whose
//! algorithm could change under a version bump: a unit float from the top 53
//! bits, an integer below `n` by `% n` (its bias, below `n / 2^64`, is
//! irrelevant to a simulation).

use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::SplitMix64;

/// The golden-ratio increment of SplitMix64, `2^64 / phi` rounded to odd
/// (the generator's own step). Multiplied by a thread's index it spreads
/// the seeds of neighbouring threads across the whole `u64` range, as
/// SplitMix64 spreads its own successive states.
pub const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// The multiplier of Vigna's xorshift64* generator, an odd constant with
/// good bit mixing; it scales the run's seed before a thread's index is
/// added, so that seeds `s` and `s + 1` do not give overlapping engine
/// streams.
const SEED_MULTIPLIER: u64 = 0x2545_F491_4F6C_DD1D;

/// The seed of engine thread `index`'s generator (requests and verifier
/// draws) in a run seeded with `seed`.
pub fn engine_seed(seed: u64, index: usize) -> u64 {
    seed.wrapping_mul(SEED_MULTIPLIER)
        .wrapping_add(index as u64 + 1)
}

/// The seed of engine thread `index`'s vLLM #44336 probes in a run seeded
/// with `seed` (a stream apart from the engine's).
pub fn probe_seed(seed: u64, index: usize) -> u64 {
    seed ^ (index as u64 + 1).wrapping_mul(GOLDEN_GAMMA)
}

/// A seeded generator and the draws the simulation makes from it.
#[derive(Clone, Debug)]
pub struct Rng(SplitMix64);

impl Rng {
    /// The generator whose state starts at `seed`.
    pub fn new(seed: u64) -> Self {
        Self(SplitMix64::seed_from_u64(seed))
    }

    /// Uniform in `[0, 1)`: the top 53 bits of one output.
    pub fn unit(&mut self) -> f64 {
        (self.0.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `0..n` (`n > 0`), from one output.
    pub fn below(&mut self, n: usize) -> usize {
        (self.0.next_u64() % n as u64) as usize
    }

    /// True with probability `p`, from one [`unit`](Self::unit) draw.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_is_splitmix64_from_the_seed_itself() {
        // SplitMix64's first outputs from the state 1 (computed with the
        // reference algorithm): a generator seeded differently, or another
        // algorithm, would change every figure of every run.
        let mut rng = Rng::new(1);
        assert_eq!(
            [rng.0.next_u64(), rng.0.next_u64()],
            [0x910A_2DEC_8902_5CC1, 0xBEEB_8DA1_658E_EC67]
        );
        // The draws on top: the top 53 bits, and the remainder.
        let mut rng = Rng::new(1);
        assert_eq!(
            rng.unit(),
            (0x910A_2DEC_8902_5CC1u64 >> 11) as f64 / 2f64.powi(53)
        );
        assert_eq!(rng.below(1000), (0xBEEB_8DA1_658E_EC67u64 % 1000) as usize);
    }

    #[test]
    fn draws_stay_in_range() {
        let mut rng = Rng::new(3);
        for n in 1..50 {
            assert!(rng.below(n) < n);
            let u = rng.unit();
            assert!((0.0..1.0).contains(&u), "{u}");
        }
        assert!(!rng.chance(0.0));
        assert!(rng.chance(1.0));
    }
}
