//! The numeric core of the deciding layer, each formula written once:
//!
//! - [`BetaPrior`] and [`Beta`]: the posterior of one continuation rate and
//!   its first two moments;
//! - [`Chain`]: the posterior of `E[a | k]` for every `k`, with exact means,
//!   variances and covariances;
//! - [`goodput`] and [`GoodputDifference`]: tokens per unit of cost, and the
//!   posterior mean and variance of the difference of two draft lengths'
//!   goodputs (what both the advisor and the controller decide with);
//! - [`best_by_mean`]: the draft length of highest posterior mean goodput;
//! - [`normal_quantile`], [`normal_cdf`], [`chi_square_1_quantile`].
//!
//! Costs enter as [`BoundCost`]: bound to `K` and relative to the cost of a
//! step without speculation, so no formula here depends on the engine's unit.

use serde::Serialize;

use super::cost::BoundCost;
use super::error::ParameterError;

/// The Beta prior of every continuation rate `h_i`: `Beta(alpha, beta)`,
/// worth `alpha + beta` pseudo-trials of which `alpha` succeeded.
///
/// ```
/// use specdec_metrics::{Advisor, BetaPrior};
/// assert_eq!(Advisor::default().prior(), BetaPrior::UNIFORM);
/// assert_eq!((BetaPrior::UNIFORM.alpha, BetaPrior::UNIFORM.beta), (1.0, 1.0));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct BetaPrior {
    /// Pseudo-successes, above 0.
    pub alpha: f64,
    /// Pseudo-failures, above 0.
    pub beta: f64,
}

impl BetaPrior {
    /// The default prior, `Beta(1, 1)`: uniform on `[0, 1]`, mean 1/2, worth
    /// two trials, so a handful of real trials outweighs it.
    pub const UNIFORM: Self = Self {
        alpha: 1.0,
        beta: 1.0,
    };

    /// Checks a prior: both parameters finite and above zero, and their sum
    /// finite (a prior whose `alpha + beta` overflows has no mean).
    pub(crate) fn new(alpha: f64, beta: f64) -> Result<Self, ParameterError> {
        for (name, v) in [("prior alpha", alpha), ("prior beta", beta)] {
            if !(v.is_finite() && v > 0.0) {
                return Err(ParameterError::new(name, v, "a finite number above 0"));
            }
        }
        if !(alpha + beta).is_finite() {
            return Err(ParameterError::new(
                "prior alpha + beta",
                alpha + beta,
                "a finite sum (the prior's weight in trials)",
            ));
        }
        Ok(Self { alpha, beta })
    }

    /// The posterior after `successes` in `trials` (`successes <= trials`;
    /// a larger count is read as `trials`).
    pub(crate) fn posterior(self, successes: f64, trials: f64) -> Beta {
        Beta {
            a: self.alpha + successes,
            b: self.beta + (trials - successes).max(0.0),
        }
    }
}

/// A `Beta(a, b)` distribution: the posterior of one continuation rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Beta {
    a: f64,
    b: f64,
}

impl Beta {
    /// `a / (a + b)`.
    pub(crate) fn mean(self) -> f64 {
        self.a / (self.a + self.b)
    }

    /// `m (1 - m) / (a + b + 1)`, written so that it neither overflows nor
    /// cancels for large `a + b`.
    pub(crate) fn variance(self) -> f64 {
        let m = self.mean();
        m * (1.0 - m) / (self.a + self.b + 1.0)
    }

    /// `E[h^2] = m (a + 1) / (a + b + 1)`.
    pub(crate) fn second_moment(self) -> f64 {
        self.mean() * (self.a + 1.0) / (self.a + self.b + 1.0)
    }

    /// The central interval of probability `1 - 2 (1 - Phi(z))`: `mean ±
    /// z sd` (normal approximation), clipped to `[0, 1]`.
    pub(crate) fn interval(self, z: f64) -> [f64; 2] {
        let (m, sd) = (self.mean(), self.variance().sqrt());
        [(m - z * sd).max(0.0), (m + z * sd).min(1.0)]
    }
}

/// Per position `i = 1..=K` (index `i`; index 0 unused), the first two
/// moments of the posterior of `h_i`, and from them the exact mean and
/// variance of `S_k = h_1 + h_1 h_2 + ... + h_1 ... h_k` (the posterior of
/// `E[a | k]`) and covariances between draft lengths.
///
/// With independent positions, `m_j = E[h_j]`, `q_j = E[h_j^2]`,
/// `P_i = h_1 ... h_i`: for `l <= i`, `E[P_l P_i] = (q_1 ... q_l)(m_{l+1} ...
/// m_i)`. Hence with `C_k = sum over l <= k of E[P_l P_k] = m_k C_{k-1} + Q_k`
/// (`Q_k = q_1 ... q_k`): `E[S_k^2] = sum over i <= k of (2 C_i - Q_i)`, and
/// for `c < k`, `E[S_k S_c] = E[S_c^2] + C_c G`, `G = sum over i = c+1..=k of
/// m_{c+1} ... m_i`. Everything is `O(K)`.
#[derive(Clone, Debug)]
pub(crate) struct Chain {
    /// `m[j] = E[h_j]`, `m[0] = 1`.
    m: Vec<f64>,
    /// `E[S_k]`, `k = 0..=K`.
    mean: Vec<f64>,
    /// `E[S_k^2]`.
    second: Vec<f64>,
    /// `C_k`.
    c: Vec<f64>,
}

impl Chain {
    /// The chain for continuation counts `(s_i, n_i)`, `i = 1..=K` (entry
    /// `i - 1`), under `prior`.
    pub(crate) fn new(counts: impl ExactSizeIterator<Item = (f64, f64)>, prior: BetaPrior) -> Self {
        let len = counts.len() + 1;
        let mut chain = Self {
            m: Vec::with_capacity(len),
            mean: Vec::with_capacity(len),
            second: Vec::with_capacity(len),
            c: Vec::with_capacity(len),
        };
        chain.m.push(1.0);
        chain.mean.push(0.0);
        chain.second.push(0.0);
        chain.c.push(0.0);
        let (mut m_prod, mut q_prod, mut c, mut mean, mut second) = (1.0, 1.0, 0.0, 0.0, 0.0);
        for (s, n) in counts {
            let posterior = prior.posterior(s, n);
            let m = posterior.mean();
            m_prod *= m;
            q_prod *= posterior.second_moment();
            c = m * c + q_prod;
            mean += m_prod;
            second += 2.0 * c - q_prod;
            chain.m.push(m);
            chain.mean.push(mean);
            chain.second.push(second);
            chain.c.push(c);
        }
        chain
    }

    /// The chain for integer continuation counts.
    pub(crate) fn from_counts(counts: &[(u64, u64)], prior: BetaPrior) -> Self {
        Self::new(counts.iter().map(|&(s, n)| (s as f64, n as f64)), prior)
    }

    /// The largest draft length covered.
    pub(crate) fn max_draft_len(&self) -> usize {
        self.m.len() - 1
    }

    /// Posterior mean of `E[a | k]`.
    pub(crate) fn mean(&self, k: usize) -> f64 {
        self.mean[k]
    }

    /// Posterior variance of `E[a | k]`.
    pub(crate) fn variance(&self, k: usize) -> f64 {
        (self.second[k] - self.mean[k] * self.mean[k]).max(0.0)
    }

    /// `out[k] = Cov(S_k, S_c)` for every `k = 0..=K`, in `O(K)`.
    pub(crate) fn covariances_with(&self, c: usize, out: &mut Vec<f64>) {
        out.clear();
        out.resize(self.max_draft_len() + 1, 0.0);
        // k < c: E[S_k S_c] = E[S_k^2] + C_k G_k, G_k = m_{k+1} (1 + G_{k+1}).
        let mut g = 0.0;
        for k in (0..c).rev() {
            g = self.m[k + 1] * (1.0 + g);
            out[k] = self.second[k] + self.c[k] * g - self.mean[k] * self.mean[c];
        }
        out[c] = self.variance(c);
        // k > c: E[S_k S_c] = E[S_c^2] + C_c G, G = sum of m_{c+1} ... m_k.
        let (mut run, mut g) = (1.0, 0.0);
        for (k, cov) in out.iter_mut().enumerate().skip(c + 1) {
            run *= self.m[k];
            g += run;
            *cov = self.second[c] + self.c[c] * g - self.mean[k] * self.mean[c];
        }
    }
}

/// Posterior mean goodput of drafting `k`, in tokens per step without
/// speculation: `(1 + E[a | k]) / (cost(k) / cost(0))`. Its ratio to
/// `goodput(chain, cost, 0) = 1` is the speedup.
pub(crate) fn goodput(chain: &Chain, cost: &BoundCost, k: usize) -> f64 {
    goodput_of(chain.mean(k), cost, k)
}

/// Goodput of drafting `k` with `expected_accepted` accepted drafts per
/// step, in the unit of [`goodput`].
pub(crate) fn goodput_of(expected_accepted: f64, cost: &BoundCost, k: usize) -> f64 {
    (1.0 + expected_accepted) / cost.relative(k)
}

/// `g(k) - g(c)`: the posterior mean and variance of the difference of two
/// draft lengths' goodputs (in the unit of [`goodput`]), from the chain's
/// exact moments. Positions shared by `k` and `c` make the two correlated;
/// the covariance accounts for it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GoodputDifference {
    /// `E[g(k)] - E[g(c)]`.
    pub(crate) mean: f64,
    /// `Var[g(k) - g(c)]`, at least 0.
    pub(crate) variance: f64,
}

impl GoodputDifference {
    /// For `k` against `c`, given `cov_kc = Cov(S_k, S_c)` (from
    /// [`Chain::covariances_with`]`(c)`).
    pub(crate) fn new(chain: &Chain, cost: &BoundCost, k: usize, c: usize, cov_kc: f64) -> Self {
        let (rk, rc) = (cost.relative(k), cost.relative(c));
        let variance = chain.variance(k) / (rk * rk) + chain.variance(c) / (rc * rc)
            - 2.0 * cov_kc / (rk * rc);
        Self {
            mean: goodput(chain, cost, k) - goodput(chain, cost, c),
            variance: variance.max(0.0),
        }
    }
}

/// Goodputs within this relative distance are a tie, so rounding never
/// decides between two draft lengths.
const TIE: f64 = 1e-12;

/// The draft length with the highest posterior mean goodput; the shorter on
/// a tie (within a relative [`TIE`]).
pub(crate) fn best_by_mean(chain: &Chain, cost: &BoundCost) -> usize {
    best_by_mean_from(chain, cost, 0)
}

/// As [`best_by_mean`], among the draft lengths `min..=K` (`min <= K`).
pub(crate) fn best_by_mean_from(chain: &Chain, cost: &BoundCost, min: usize) -> usize {
    let mut best = (min, goodput(chain, cost, min));
    for k in min + 1..=chain.max_draft_len() {
        let g = goodput(chain, cost, k);
        if g > best.1 * (1.0 + TIE) {
            best = (k, g);
        }
    }
    best.0
}

/// The standard normal quantile `Phi^-1(p)` for `0 < p < 1` (Acklam's
/// rational approximation, relative error below `1.2e-9`).
pub(crate) fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    /// Below this probability (and above `1 - LOW`) Acklam's tail
    /// approximation applies, between them the central one.
    const LOW: f64 = 0.02425;
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < LOW {
        tail((-2.0 * p.ln()).sqrt())
    } else if p <= 1.0 - LOW {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    }
}

/// The quantile at probability `p` of the chi-square distribution with one
/// degree of freedom (the square of a standard normal): `Phi^-1((1 + p) /
/// 2)^2`.
pub(crate) fn chi_square_1_quantile(p: f64) -> f64 {
    normal_quantile(0.5 + p / 2.0).powi(2)
}

/// The quantile at probability `p` of Student's t with `df` degrees of
/// freedom: exact for 1 and 2, otherwise the Cornish-Fisher expansion in
/// the normal quantile to the order `1 / df^3` (within 0.01 of the tables
/// at 3 degrees of freedom and `p <= 0.975`, and closer as they grow).
pub(crate) fn t_quantile(p: f64, df: f64) -> f64 {
    if df <= 1.0 {
        return (core::f64::consts::PI * (p - 0.5)).tan();
    }
    if df <= 2.0 {
        return (2.0 * p - 1.0) / (2.0 * p * (1.0 - p)).sqrt();
    }
    let z = normal_quantile(p);
    let (z2, n) = (z * z, df);
    let g1 = (z2 + 1.0) * z / 4.0;
    let g2 = ((5.0 * z2 + 16.0) * z2 + 3.0) * z / 96.0;
    let g3 = (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) * z / 384.0;
    z + g1 / n + g2 / (n * n) + g3 / (n * n * n)
}

/// The standard normal distribution function `Phi(x)` (from the
/// complementary error function of Numerical Recipes, fractional error below
/// `1.2e-7`).
pub(crate) fn normal_cdf(x: f64) -> f64 {
    let z = (x / core::f64::consts::SQRT_2).abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let erfc = t * poly.exp();
    if x >= 0.0 {
        1.0 - 0.5 * erfc
    } else {
        0.5 * erfc
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngCore, SeedableRng};
    use rand_xoshiro::SplitMix64;

    /// Uniform in `[0, 1)`.
    fn unit(rng: &mut SplitMix64) -> f64 {
        (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `Beta(a, b)` for whole `a, b`: the `a`-th smallest of `a + b - 1`
    /// uniforms.
    fn beta(rng: &mut SplitMix64, a: usize, b: usize, scratch: &mut Vec<f64>) -> f64 {
        scratch.clear();
        scratch.extend((0..a + b - 1).map(|_| unit(rng)));
        scratch.sort_by(f64::total_cmp);
        scratch[a - 1]
    }

    /// The closed-form moments of the chain against sampling the posteriors:
    /// means, variances and every covariance of `S_k`.
    #[test]
    fn chain_moments_match_monte_carlo() {
        // (successes, trials) per position under the uniform prior:
        // Beta(4, 2), Beta(2, 3), Beta(6, 2), Beta(1, 2).
        let counts = [(3.0, 4.0), (1.0, 3.0), (5.0, 6.0), (0.0, 1.0)];
        let chain = Chain::new(counts.iter().copied(), BetaPrior::UNIFORM);
        let max = counts.len();
        let samples = 200_000;
        let mut rng = SplitMix64::seed_from_u64(42);
        let mut scratch = Vec::new();
        let (mut sum, mut prod) = (vec![0.0; max + 1], vec![vec![0.0; max + 1]; max + 1]);
        for _ in 0..samples {
            let mut s = vec![0.0; max + 1];
            let mut p = 1.0;
            for (j, &(succ, trials)) in counts.iter().enumerate() {
                let (a, b) = (succ as usize + 1, (trials - succ) as usize + 1);
                p *= beta(&mut rng, a, b, &mut scratch);
                s[j + 1] = s[j] + p;
            }
            for k in 0..=max {
                sum[k] += s[k];
                for c in 0..=max {
                    prod[k][c] += s[k] * s[c];
                }
            }
        }
        let n = samples as f64;
        let mut cov = Vec::new();
        for c in 0..=max {
            chain.covariances_with(c, &mut cov);
            for k in 0..=max {
                let mean_k = sum[k] / n;
                let sampled = prod[k][c] / n - mean_k * (sum[c] / n);
                assert!(
                    (cov[k] - sampled).abs() < 0.01 * chain.variance(max).max(1e-9) + 2e-4,
                    "Cov(S_{k}, S_{c}): closed form {} sampled {sampled}",
                    cov[k]
                );
                if k == c {
                    assert_eq!(cov[k], chain.variance(k));
                }
            }
            assert!((chain.mean(c) - sum[c] / n).abs() < 3e-3, "E[S_{c}]");
        }
        // And by hand: E[S_1] = 4/6, E[S_2] = 2/3 + (2/3)(2/5).
        assert!((chain.mean(1) - 2.0 / 3.0).abs() < 1e-15);
        assert!((chain.mean(2) - (2.0 / 3.0) * (1.0 + 0.4)).abs() < 1e-15);
        // Var(S_1) = Var(Beta(4, 2)) = 4 * 2 / (36 * 7) = 2 / 63.
        assert!((chain.variance(1) - 2.0 / 63.0).abs() < 1e-15);
    }

    #[test]
    fn beta_moments_are_exact_and_stable() {
        // Beta(4, 2): mean 2/3, variance 8 / (36 * 7), E[h^2] = 4 * 5 / (6 * 7).
        let b = BetaPrior::UNIFORM.posterior(3.0, 4.0);
        assert!((b.mean() - 2.0 / 3.0).abs() < 1e-15);
        assert!((b.variance() - 8.0 / 252.0).abs() < 1e-15);
        assert!((b.second_moment() - 20.0 / 42.0).abs() < 1e-15);
        // A prior worth 1e300 trials: no overflow, the mean stays 1/2.
        let heavy = BetaPrior::new(1e300, 1e300).unwrap().posterior(0.0, 0.0);
        assert_eq!(heavy.mean(), 0.5);
        assert!(heavy.variance() > 0.0 && heavy.variance().is_finite());
        // An interval is clipped to [0, 1].
        assert_eq!(
            BetaPrior::UNIFORM.posterior(10.0, 10.0).interval(10.0)[1],
            1.0
        );
    }

    #[test]
    fn a_prior_whose_weight_overflows_is_refused() {
        let err = BetaPrior::new(1e308, 1e308).unwrap_err();
        assert_eq!(err.name(), "prior alpha + beta");
        assert!(BetaPrior::new(1e307, 1e307).is_ok());
        assert!(BetaPrior::new(0.0, 1.0).is_err());
        assert!(BetaPrior::new(1.0, f64::NAN).is_err());
    }

    #[test]
    fn chi_square_1_quantile_matches_tables() {
        for (p, exact) in [
            (0.5, 0.454_936_423),
            (0.99, 6.634_896_601),
            (0.999, 10.827_566_17),
        ] {
            let q = chi_square_1_quantile(p);
            assert!((q - exact).abs() < 1e-7, "p {p}: {q} vs {exact}");
        }
    }

    #[test]
    fn t_quantile_matches_tables() {
        // (p, df, t) from the tables.
        for (p, df, t) in [
            (0.95, 1.0, 6.313_752),
            (0.95, 2.0, 2.919_986),
            (0.95, 3.0, 2.353_363),
            (0.95, 7.0, 1.894_579),
            (0.975, 7.0, 2.364_624),
            (0.95, 30.0, 1.697_261),
            (0.05, 7.0, -1.894_579),
        ] {
            let q = t_quantile(p, df);
            assert!((q - t).abs() < 0.01, "p {p}, df {df}: {q} vs {t}");
        }
    }

    #[test]
    fn normal_quantile_matches_tables() {
        for (p, z) in [
            (0.5, 0.0),
            (0.95, 1.644_853_626_951_472_2),
            (0.975, 1.959_963_984_540_054),
            (0.99, 2.326_347_874_040_841),
            (0.999, 3.090_232_306_167_813_5),
            (0.01, -2.326_347_874_040_841),
            (0.001, -3.090_232_306_167_813_5),
        ] {
            assert!(
                (normal_quantile(p) - z).abs() < 1e-8,
                "{p}: {}",
                normal_quantile(p)
            );
            assert!((normal_cdf(z) - p).abs() < 1e-7, "{z}: {}", normal_cdf(z));
        }
    }
}
