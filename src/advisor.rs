//! From the histogram to a draft length: continuation estimates with their
//! uncertainty, the engine's step cost, and the draft length that maximises
//! expected goodput.
//!
//! # The estimates
//!
//! **Continuation at position `i`** (`1 <= i <= K`): of the steps whose draft
//! reached position `i` with every earlier draft accepted, the share whose
//! draft `i` was accepted too. Trials `n_i` are the steps with `k >= i` and
//! `a >= i - 1`; successes `s_i` the steps with `a >= i`. A fully accepted
//! draft (`a = k`) says nothing about positions above `k`: it is *censored*
//! there, not counted as a failure, which is what lets short and long drafts
//! be pooled without bias ([`AcceptanceHistogram::continuation`]).
//!
//! **Expected accepted drafts at length `k`**: `E[a | k] = sum over i = 1..=k
//! of the product of h_1..h_i`, where `h_i = s_i / n_i`
//! ([`AcceptanceHistogram::expected_accepted`]). Under a constant
//! per-position acceptance `alpha` this is `alpha (1 - alpha^k) / (1 -
//! alpha)`, and `1 + E[a | k]` is the expected tokens per step of Leviathan,
//! Kalman and Matias (2023).
//!
//! The chain pools every row, so it is defined for draft lengths never
//! drafted and it is what the [`Advisor`] decides with. It assumes that the
//! acceptance at position `i` does not depend on how many drafts follow it.
//! Where a row has steps of its own, its plain mean
//! ([`AcceptanceHistogram::row_mean_accepted`]) is a direct estimate without
//! that assumption; the advisor reports it next to the chain, so a drafter
//! whose acceptance falls with `k` (MTP heads often accept less at position
//! 0 when drafting 8 than when drafting 1) shows up as a row mean below the
//! chain.
//!
//! # Uncertainty
//!
//! Each `h_i` gets a Beta posterior: the prior `Beta(alpha_0, beta_0)` (by
//! default `Beta(1, 1)`, uniform: no opinion, mean 1/2) updated with `s_i`
//! successes in `n_i` trials. A position without trials keeps the prior;
//! nothing is extrapolated from other positions. The positions' posteriors
//! are independent, so the posterior mean of `E[a | k]` is the chain of
//! posterior means, and its variance, and the covariance between two draft
//! lengths, follow exactly from the first two moments of each posterior (see
//! `Chain` below): `O(K)` work per draft length, no sampling. Intervals are
//! the normal approximation `mean ± z sd` from those exact moments, clipped to
//! the possible range.
//!
//! # Cost and goodput
//!
//! The engine supplies [`StepCost`]: `cost(k)` for `k = 0..=K`, where `k = 0`
//! is a step without speculation. Goodput is `g(k) = (1 + E[a | k]) /
//! cost(k)` tokens per unit of cost and speedup `g(k) / g(0)`. The
//! [`Advisor`] recommends the `k` with the highest posterior mean goodput;
//! ties go to the shorter draft, so `k = 0` wins when nothing beats not
//! speculating.

use serde::Serialize;

use crate::error::{CostError, CostTerm, ParameterError};
use crate::histogram::AcceptanceHistogram;

impl AcceptanceHistogram {
    /// The continuation counts `(s_i, n_i)` at draft position `position`
    /// (`1..=K`): `n_i` steps reached position `i` with every earlier draft
    /// accepted (`k >= i` and `a >= i - 1`), and `s_i` of them had draft `i`
    /// accepted (`a >= i`). `(0, 0)` for position 0 or above `K`.
    ///
    /// A step that accepted its whole draft is not a trial above its length
    /// (censored), so rows of different lengths pool without bias.
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// let mut h = AcceptanceHistogram::new(3)?;
    /// for (k, a) in [(1, 1), (3, 0), (3, 2), (2, 2)] {
    ///     h.observe(k, a)?;
    /// }
    /// // Position 1: all four steps drafted it, three accepted it.
    /// assert_eq!(h.continuation(1), (3, 4));
    /// // Position 2: (1, 1) is censored, (3, 0) stopped before; (3, 2) and
    /// // (2, 2) reached it and accepted it.
    /// assert_eq!(h.continuation(2), (2, 2));
    /// // Position 3: only (3, 2) reached it, and rejected it.
    /// assert_eq!(h.continuation(3), (0, 1));
    /// assert_eq!(h.continuation(4), (0, 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn continuation(&self, position: usize) -> (u64, u64) {
        match position.checked_sub(1) {
            Some(i) if position <= self.max_draft_len() => self.continuation_counts()[i],
            _ => (0, 0),
        }
    }

    /// `(s_i, n_i)` for every position `i = 1..=K` at once (entry `i - 1`),
    /// in one pass over the buckets.
    pub(crate) fn continuation_counts(&self) -> Vec<(u64, u64)> {
        let max = self.max_draft_len();
        // successes_at[a]: steps with exactly a accepted; trials_end[j]:
        // steps whose last trial is position j (min(k, a + 1)).
        let mut accepted_exactly = vec![0u64; max + 1];
        let mut last_trial = vec![0u64; max + 1];
        for k in 0..=max {
            for (a, &count) in self.row(k).unwrap_or(&[]).iter().enumerate() {
                accepted_exactly[a] = accepted_exactly[a].saturating_add(count);
                let j = k.min(a + 1);
                last_trial[j] = last_trial[j].saturating_add(count);
            }
        }
        let mut out = vec![(0, 0); max];
        let (mut successes, mut trials) = (0u64, 0u64);
        for i in (1..=max).rev() {
            successes = successes.saturating_add(accepted_exactly[i]);
            trials = trials.saturating_add(last_trial[i]);
            out[i - 1] = (successes, trials);
        }
        out
    }

    /// The continuation rate `h_i = s_i / n_i` at position `position`
    /// ([`continuation`](Self::continuation)); `None` without trials.
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// let mut h = AcceptanceHistogram::new(2)?;
    /// h.observe(2, 1)?;
    /// h.observe(2, 2)?;
    /// assert_eq!(h.continuation_rate(1), Some(1.0));
    /// assert_eq!(h.continuation_rate(2), Some(0.5));
    /// assert_eq!(AcceptanceHistogram::new(2)?.continuation_rate(1), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn continuation_rate(&self, position: usize) -> Option<f64> {
        let (s, n) = self.continuation(position);
        (n != 0).then(|| s as f64 / n as f64)
    }

    /// Expected accepted drafts when drafting `k`, from the chain of
    /// continuation rates: `sum over i = 1..=k of h_1 h_2 ... h_i`. `Some(0.0)`
    /// for `k = 0`; `None` above `K` or when a position `<= k` has no
    /// trials.
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// let mut h = AcceptanceHistogram::new(3)?;
    /// for (k, a) in [(1, 1), (3, 0), (3, 2), (2, 2)] {
    ///     h.observe(k, a)?;
    /// }
    /// // h_1 = 3/4, h_2 = 2/2, h_3 = 0/1
    /// assert_eq!(h.expected_accepted(1), Some(0.75));
    /// assert_eq!(h.expected_accepted(2), Some(0.75 + 0.75));
    /// assert_eq!(h.expected_accepted(3), Some(1.5));
    /// assert_eq!(h.expected_accepted(0), Some(0.0));
    /// assert_eq!(AcceptanceHistogram::new(3)?.expected_accepted(1), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn expected_accepted(&self, k: usize) -> Option<f64> {
        if k > self.max_draft_len() {
            return None;
        }
        let counts = self.continuation_counts();
        let (mut sum, mut product) = (0.0, 1.0);
        for &(s, n) in &counts[..k] {
            if n == 0 {
                return None;
            }
            product *= s as f64 / n as f64;
            sum += product;
        }
        Some(sum)
    }

    /// The plain mean of accepted drafts over the steps of row `drafted`:
    /// `sum_a a H[k][a] / sum_a H[k][a]`. A direct estimate of `E[a | k]`
    /// that, unlike [`expected_accepted`](Self::expected_accepted), does not
    /// assume acceptance is independent of the draft length; `None` for a
    /// row without steps.
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// let mut h = AcceptanceHistogram::new(3)?;
    /// h.observe(3, 0)?;
    /// h.observe(3, 3)?;
    /// h.observe(3, 2)?;
    /// assert_eq!(h.row_mean_accepted(3), Some(5.0 / 3.0));
    /// assert_eq!(h.row_mean_accepted(2), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn row_mean_accepted(&self, drafted: usize) -> Option<f64> {
        let row = self.row(drafted)?;
        let steps = self.row_steps(drafted);
        (steps != 0).then(|| {
            let accepted: f64 = row
                .iter()
                .enumerate()
                .map(|(a, &c)| a as f64 * c as f64)
                .sum();
            accepted / steps as f64
        })
    }
}

// ---------------------------------------------------------------------------
// Step cost

/// What one engine step costs, by draft length `k` (`k = 0`: a step without
/// speculation), in any unit the engine likes (milliseconds, GPU-seconds,
/// relative to a plain decode step): only ratios matter.
///
/// Only the engine knows it: it depends on the hardware, the model pair and
/// the batch size. Measure it (time steps at a few draft lengths) rather than
/// guessing; advice from a made-up cost is only as good as the guess.
///
/// ```
/// use specdec_metrics::StepCost;
/// // A decode step costs 1; each draft token adds 0.1 (drafting plus the
/// // verifier's extra work).
/// let linear = StepCost::linear(1.0, 0.1)?;
/// assert_eq!(linear.cost(3), 1.3);
/// // Measured step times in ms, for k = 0..=3.
/// let table = StepCost::table(vec![20.0, 22.5, 24.0, 26.5])?;
/// assert_eq!(table.cost(2), 24.0);
/// assert!(StepCost::linear(0.0, 0.1).is_err());
/// # Ok::<(), specdec_metrics::CostError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct StepCost {
    model: CostModel,
}

#[derive(Clone, Debug, PartialEq)]
enum CostModel {
    Linear { base: f64, per_draft_token: f64 },
    Table(Box<[f64]>),
}

impl StepCost {
    /// `cost(k) = base + per_draft_token * k`.
    ///
    /// # Errors
    ///
    /// [`CostError`] unless `base` is finite and above zero and
    /// `per_draft_token` finite and not negative (and `cost(64)` finite).
    ///
    /// ```
    /// use specdec_metrics::StepCost;
    /// assert!(StepCost::linear(1.0, 0.0).is_ok()); // free drafts
    /// assert!(StepCost::linear(1.0, -0.1).is_err());
    /// assert!(StepCost::linear(f64::INFINITY, 0.1).is_err());
    /// ```
    pub fn linear(base: f64, per_draft_token: f64) -> Result<Self, CostError> {
        check_cost(CostTerm::Base, base)?;
        if !per_draft_token.is_finite() {
            return Err(CostError::NotFinite {
                term: CostTerm::PerDraftToken,
                value: per_draft_token,
            });
        }
        if per_draft_token < 0.0 {
            return Err(CostError::NotPositive {
                term: CostTerm::PerDraftToken,
                value: per_draft_token,
            });
        }
        let max = crate::layout::MAX_MAX_DRAFT_LEN;
        if !(base + per_draft_token * max as f64).is_finite() {
            let first = (1..=max)
                .find(|&k| !(base + per_draft_token * k as f64).is_finite())
                .unwrap_or(max);
            return Err(CostError::Overflow { draft_len: first });
        }
        Ok(Self {
            model: CostModel::Linear {
                base,
                per_draft_token,
            },
        })
    }

    /// Measured costs, entry `k` for draft length `k = 0..=K`.
    ///
    /// # Errors
    ///
    /// [`CostError`] when an entry is not a finite number above zero, or the
    /// table is empty.
    ///
    /// ```
    /// use specdec_metrics::{CostError, CostTerm, StepCost};
    /// assert_eq!(
    ///     StepCost::table(vec![1.0, -2.0]),
    ///     Err(CostError::NotPositive { term: CostTerm::Table { draft_len: 1 }, value: -2.0 })
    /// );
    /// ```
    pub fn table(costs: Vec<f64>) -> Result<Self, CostError> {
        if costs.is_empty() {
            return Err(CostError::EmptyTable);
        }
        for (draft_len, &value) in costs.iter().enumerate() {
            check_cost(CostTerm::Table { draft_len }, value)?;
        }
        Ok(Self {
            model: CostModel::Table(costs.into_boxed_slice()),
        })
    }

    /// The cost of a step that drafts `k` tokens. For a table, `k` must be
    /// below its length; beyond it the last entry is returned (use
    /// [`check`](Self::check) first).
    pub fn cost(&self, k: usize) -> f64 {
        match &self.model {
            CostModel::Linear {
                base,
                per_draft_token,
            } => base + per_draft_token * k as f64,
            CostModel::Table(t) => t[k.min(t.len() - 1)],
        }
    }

    /// The largest draft length the cost is given for: `None` for a linear
    /// cost (any), the table's length minus one for a table.
    ///
    /// ```
    /// use specdec_metrics::StepCost;
    /// assert_eq!(StepCost::linear(1.0, 0.1)?.max_draft_len(), None);
    /// assert_eq!(StepCost::table(vec![1.0, 1.2, 1.4])?.max_draft_len(), Some(2));
    /// # Ok::<(), specdec_metrics::CostError>(())
    /// ```
    pub fn max_draft_len(&self) -> Option<usize> {
        match &self.model {
            CostModel::Linear { .. } => None,
            CostModel::Table(t) => Some(t.len() - 1),
        }
    }

    /// Whether the cost covers exactly the draft lengths `0..=max_draft_len`
    /// (always true for a linear cost).
    ///
    /// # Errors
    ///
    /// [`CostError::TableLength`] for a table whose length is not
    /// `max_draft_len + 1`.
    ///
    /// ```
    /// use specdec_metrics::StepCost;
    /// let table = StepCost::table(vec![1.0, 1.2, 1.4])?;
    /// assert!(table.check(2).is_ok());
    /// assert!(table.check(3).is_err());
    /// # Ok::<(), specdec_metrics::CostError>(())
    /// ```
    pub fn check(&self, max_draft_len: usize) -> Result<(), CostError> {
        match &self.model {
            CostModel::Table(t) if t.len() != max_draft_len + 1 => Err(CostError::TableLength {
                max_draft_len,
                found: t.len(),
            }),
            _ => Ok(()),
        }
    }
}

impl core::fmt::Display for StepCost {
    /// `linear, cost(k) = 1 + 0.1 k` or `table, cost(0..=3) = 20, 22, 24,
    /// 26`.
    ///
    /// ```
    /// use specdec_metrics::StepCost;
    /// assert_eq!(StepCost::linear(1.0, 0.1)?.to_string(), "linear, cost(k) = 1 + 0.1 k");
    /// assert_eq!(
    ///     StepCost::table(vec![20.0, 22.5, 24.0])?.to_string(),
    ///     "table, cost(0..=2) = 20, 22.5, 24"
    /// );
    /// # Ok::<(), specdec_metrics::CostError>(())
    /// ```
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match &self.model {
            CostModel::Linear {
                base,
                per_draft_token,
            } => write!(f, "linear, cost(k) = {base} + {per_draft_token} k"),
            CostModel::Table(t) => {
                write!(f, "table, cost(0..={}) = ", t.len() - 1)?;
                for (i, c) in t.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{c}")?;
                }
                Ok(())
            }
        }
    }
}

fn check_cost(term: CostTerm, value: f64) -> Result<(), CostError> {
    if !value.is_finite() {
        Err(CostError::NotFinite { term, value })
    } else if value <= 0.0 {
        Err(CostError::NotPositive { term, value })
    } else {
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Posteriors

/// The Beta prior of every continuation rate `h_i`: `Beta(alpha, beta)`,
/// worth `alpha + beta` pseudo-trials of which `alpha` succeeded.
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

    pub(crate) fn new(alpha: f64, beta: f64) -> Result<Self, ParameterError> {
        for (name, v) in [("prior alpha", alpha), ("prior beta", beta)] {
            if !(v.is_finite() && v > 0.0) {
                return Err(ParameterError::new(name, v, "a finite number above 0"));
            }
        }
        Ok(Self { alpha, beta })
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
        let (mut m_prod, mut q_prod) = (1.0, 1.0);
        for (s, n) in counts {
            let a = prior.alpha + s;
            let b = prior.beta + (n - s).max(0.0);
            let m = a / (a + b);
            let q = m * (a + 1.0) / (a + b + 1.0);
            m_prod *= m;
            q_prod *= q;
            let c = m * chain.c.last().copied().unwrap_or(0.0) + q_prod;
            let mean = chain.mean.last().copied().unwrap_or(0.0) + m_prod;
            let second = chain.second.last().copied().unwrap_or(0.0) + 2.0 * c - q_prod;
            chain.m.push(m);
            chain.mean.push(mean);
            chain.second.push(second);
            chain.c.push(c);
        }
        chain
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

// ---------------------------------------------------------------------------
// The advisor

/// Turns a histogram and a [`StepCost`] into a [`Recommendation`]: the draft
/// length with the highest posterior mean goodput, and for every draft
/// length the estimates behind it.
///
/// Stateless and cheap (`O(K^2)` for the continuation counts, `O(K)` per draft
/// length after that); for a choice that persists across intervals and only
/// switches on strong evidence, see [`DraftController`](crate::DraftController).
///
/// ```
/// use specdec_metrics::{AcceptanceHistogram, Advisor, StepCost};
///
/// let mut h = AcceptanceHistogram::new(4)?;
/// // Steps that drafted 4 and accepted 0..=4: acceptance falls with position.
/// for (a, steps) in [(0, 200), (1, 150), (2, 150), (3, 100), (4, 400)] {
///     for _ in 0..steps {
///         h.observe(4, a)?;
///     }
/// }
/// let cost = StepCost::linear(1.0, 0.15)?;
/// let advice = Advisor::default().recommend(&h, &cost);
/// assert_eq!(advice.draft_len, 4);
/// assert!(advice.expected_speedup > 1.5);
/// // Every draft length 0..=K is scored; k = 0 is the baseline.
/// assert_eq!(advice.candidates.len(), 5);
/// assert_eq!(advice.candidates[0].speedup, 1.0);
///
/// // Expensive drafts: not speculating is best.
/// let advice = Advisor::default().recommend(&h, &StepCost::linear(1.0, 2.0)?);
/// assert_eq!(advice.draft_len, 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Advisor {
    prior: BetaPrior,
    credible_level: f64,
}

impl Default for Advisor {
    /// Prior `Beta(1, 1)` on every continuation rate, 90% intervals.
    fn default() -> Self {
        Self {
            prior: BetaPrior::UNIFORM,
            credible_level: 0.9,
        }
    }
}

impl Advisor {
    /// The same advisor with the prior `Beta(alpha, beta)` on every
    /// continuation rate.
    ///
    /// # Errors
    ///
    /// [`ParameterError`] unless both are finite and above zero.
    ///
    /// ```
    /// use specdec_metrics::Advisor;
    /// // An optimistic prior worth 10 trials with mean 0.8.
    /// let advisor = Advisor::default().with_prior(8.0, 2.0)?;
    /// assert_eq!(advisor.prior().alpha, 8.0);
    /// # Ok::<(), specdec_metrics::ParameterError>(())
    /// ```
    pub fn with_prior(self, alpha: f64, beta: f64) -> Result<Self, ParameterError> {
        Ok(Self {
            prior: BetaPrior::new(alpha, beta)?,
            ..self
        })
    }

    /// The same advisor with central credible intervals of probability
    /// `level` (default 0.9).
    ///
    /// # Errors
    ///
    /// [`ParameterError`] unless `0 < level < 1`.
    ///
    /// ```
    /// use specdec_metrics::Advisor;
    /// assert!(Advisor::default().with_credible_level(0.95).is_ok());
    /// assert!(Advisor::default().with_credible_level(1.0).is_err());
    /// ```
    pub fn with_credible_level(self, level: f64) -> Result<Self, ParameterError> {
        if !(level > 0.0 && level < 1.0) {
            return Err(ParameterError::new(
                "credible level",
                level,
                "a probability strictly between 0 and 1",
            ));
        }
        Ok(Self {
            credible_level: level,
            ..self
        })
    }

    /// The prior of every continuation rate.
    pub fn prior(&self) -> BetaPrior {
        self.prior
    }

    /// The probability of the credible intervals.
    pub fn credible_level(&self) -> f64 {
        self.credible_level
    }

    /// The recommendation for `h` under `cost`. Every draft length
    /// `0..=K` is scored (for a cost table shorter than `K + 1` entries,
    /// only the lengths it covers: check with [`try_recommend`]).
    ///
    /// ```
    /// use specdec_metrics::{AcceptanceHistogram, Advisor, StepCost};
    /// let mut h = AcceptanceHistogram::new(3)?;
    /// for _ in 0..100 {
    ///     h.observe(3, 3)?; // every draft accepted
    /// }
    /// let advice = Advisor::default().recommend(&h, &StepCost::table(vec![1.0, 1.1, 1.2, 1.3])?);
    /// assert_eq!(advice.draft_len, 3);
    /// let k3 = &advice.candidates[3];
    /// assert!(k3.expected_accepted > 2.9 && k3.accepted_interval[1] <= 3.0);
    /// assert_eq!(k3.row_mean_accepted, Some(3.0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// [`try_recommend`]: Self::try_recommend
    pub fn recommend(&self, h: &AcceptanceHistogram, cost: &StepCost) -> Recommendation {
        let max = cost
            .max_draft_len()
            .map_or(h.max_draft_len(), |m| m.min(h.max_draft_len()));
        let counts = h.continuation_counts();
        self.recommend_counts(&counts[..max], cost, h)
    }

    /// As [`recommend`](Self::recommend), but a cost table that does not
    /// have exactly one cost per draft length `0..=K` is an error.
    ///
    /// # Errors
    ///
    /// [`CostError::TableLength`].
    ///
    /// ```
    /// use specdec_metrics::{AcceptanceHistogram, Advisor, StepCost};
    /// let h = AcceptanceHistogram::new(3)?;
    /// let short = StepCost::table(vec![1.0, 1.1])?;
    /// assert!(Advisor::default().try_recommend(&h, &short).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_recommend(
        &self,
        h: &AcceptanceHistogram,
        cost: &StepCost,
    ) -> Result<Recommendation, CostError> {
        cost.check(h.max_draft_len())?;
        Ok(self.recommend(h, cost))
    }

    fn recommend_counts(
        &self,
        counts: &[(u64, u64)],
        cost: &StepCost,
        h: &AcceptanceHistogram,
    ) -> Recommendation {
        let chain = Chain::new(
            counts.iter().map(|&(s, n)| (s as f64, n as f64)),
            self.prior,
        );
        let max = chain.max_draft_len();
        let z = normal_quantile(0.5 + self.credible_level / 2.0);
        let goodput = |k: usize| (1.0 + chain.mean(k)) / cost.cost(k);
        let best = best_by_mean(&chain, cost);
        let mut cov = Vec::new();
        chain.covariances_with(best, &mut cov);
        let g0 = goodput(0);

        let positions = counts
            .iter()
            .enumerate()
            .map(|(i, &(s, n))| {
                let a = self.prior.alpha + s as f64;
                let b = self.prior.beta + (n - s) as f64;
                let mean = a / (a + b);
                let sd = (a * b / ((a + b) * (a + b) * (a + b + 1.0))).sqrt();
                PositionEstimate {
                    position: i + 1,
                    successes: s,
                    trials: n,
                    rate: (n != 0).then(|| s as f64 / n as f64),
                    posterior_mean: mean,
                    interval: [(mean - z * sd).max(0.0), (mean + z * sd).min(1.0)],
                    from_prior: n == 0,
                }
            })
            .collect();

        let mut uses_prior = false;
        let mut candidates = (0..=max)
            .map(|k| {
                if k > 0 {
                    uses_prior |= counts[k - 1].1 == 0;
                }
                let mean = chain.mean(k);
                let sd = chain.variance(k).sqrt();
                let c = cost.cost(k);
                let g = goodput(k);
                let cb = cost.cost(best);
                let var_diff = chain.variance(k) / (c * c) + chain.variance(best) / (cb * cb)
                    - 2.0 * cov[k] / (c * cb);
                let diff = g - goodput(best);
                // Two different lengths always have a positive variance of
                // their difference; the floor only keeps rounding from
                // turning it into a NaN.
                let prob_beats_choice = if k == best {
                    0.5
                } else {
                    normal_cdf(diff / var_diff.max(f64::MIN_POSITIVE).sqrt())
                };
                let row = RowCheck::new(h, k, mean, sd);
                Candidate {
                    draft_len: k,
                    expected_accepted: mean,
                    accepted_sd: sd,
                    accepted_interval: [(mean - z * sd).max(0.0), (mean + z * sd).min(k as f64)],
                    tokens_per_step: 1.0 + mean,
                    cost: c,
                    goodput: g,
                    speedup: g / g0,
                    prob_beats_choice,
                    uses_prior,
                    row_steps: h.row_steps(k),
                    row_mean_accepted: h.row_mean_accepted(k),
                    row_mean_sd: row.mean_sd,
                    row_distance: row.distance,
                    row_disagrees: false,
                }
            })
            .collect::<Vec<_>>();
        // Bonferroni over the rows compared: when acceptance does not depend
        // on k, some row disagrees in at most ROW_FALSE_ALARM of reports.
        let compared = candidates
            .iter()
            .filter(|c| c.row_distance.is_some())
            .count();
        let row_distance_bound =
            normal_quantile(1.0 - ROW_FALSE_ALARM / (2.0 * compared.max(1) as f64));
        for c in &mut candidates {
            c.row_disagrees = c.row_distance.is_some_and(|d| d > row_distance_bound);
        }
        Recommendation {
            draft_len: best,
            expected_speedup: goodput(best) / g0,
            num_spec_steps: h.num_spec_steps(),
            prior: self.prior,
            credible_level: self.credible_level,
            positions,
            candidates,
            row_distance_bound,
        }
    }
}

/// Rows with fewer steps are not compared with the chain.
pub const MIN_ROW_STEPS: u64 = 100;

/// The share of reports in which some row is flagged as disagreeing with the
/// chain although acceptance does not depend on `k`.
const ROW_FALSE_ALARM: f64 = 0.01;

/// A row's own mean against the chain's estimate.
struct RowCheck {
    mean_sd: Option<f64>,
    distance: Option<f64>,
}

impl RowCheck {
    /// For row `k`, the standard error of its mean accepted count (its
    /// sample standard deviation over the square root of its steps, from 2
    /// steps), and from [`MIN_ROW_STEPS`] steps the distance `|row mean -
    /// chain mean| / sqrt(se^2 + chain_sd^2)`.
    fn new(h: &AcceptanceHistogram, k: usize, chain_mean: f64, chain_sd: f64) -> Self {
        let steps = h.row_steps(k);
        let (Some(row), Some(mean)) = (h.row(k), h.row_mean_accepted(k)) else {
            return Self {
                mean_sd: None,
                distance: None,
            };
        };
        let n = steps as f64;
        let mean_sd = (steps >= 2).then(|| {
            let squares: f64 = row
                .iter()
                .enumerate()
                .map(|(a, &c)| c as f64 * (a as f64 - mean).powi(2))
                .sum();
            (squares / (n - 1.0) / n).sqrt()
        });
        let distance = mean_sd
            .filter(|_| k > 0 && steps >= MIN_ROW_STEPS)
            .map(|se| {
                let sd = (se * se + chain_sd * chain_sd).sqrt();
                let diff = (mean - chain_mean).abs();
                if sd > 0.0 {
                    diff / sd
                } else if diff > 0.0 {
                    f64::INFINITY
                } else {
                    0.0
                }
            });
        Self { mean_sd, distance }
    }
}

/// Goodputs within this relative distance are a tie.
const TIE: f64 = 1e-12;

/// The draft length with the highest posterior mean goodput; the shorter on
/// a tie (within a relative `1e-12`, so rounding does not decide).
pub(crate) fn best_by_mean(chain: &Chain, cost: &StepCost) -> usize {
    let mut best = (0, 1.0 / cost.cost(0));
    for k in 1..=chain.max_draft_len() {
        let g = (1.0 + chain.mean(k)) / cost.cost(k);
        if g > best.1 * (1.0 + TIE) {
            best = (k, g);
        }
    }
    best.0
}

/// What the [`Advisor`] recommends, with the figures behind it. Serializes
/// (serde) to a JSON object with these field names.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Recommendation {
    /// The draft length to use: the highest posterior mean goodput, the
    /// shorter on a tie (`0`: do not speculate).
    pub draft_len: usize,
    /// Goodput at `draft_len` over goodput without speculation (`k = 0`).
    pub expected_speedup: f64,
    /// Verify steps in the histogram the estimates come from.
    pub num_spec_steps: u64,
    /// The prior of every continuation rate.
    pub prior: BetaPrior,
    /// The probability of every interval.
    pub credible_level: f64,
    /// Positions `1..=K`: continuation counts and rate estimates.
    pub positions: Vec<PositionEstimate>,
    /// Draft lengths `0..=K`: what drafting `k` is expected to give.
    pub candidates: Vec<Candidate>,
    /// The distance (in standard deviations) beyond which a row's own mean
    /// is said to disagree with the chain: the normal quantile at `1 - 0.01
    /// / (2 m)` for the `m` rows compared (Bonferroni), so that when
    /// acceptance does not depend on `k` a report flags some row at most 1%
    /// of the time, however many rows it has.
    pub row_distance_bound: f64,
}

/// The estimate of the continuation rate `h_i` at one draft position.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PositionEstimate {
    /// The position `i`, from 1.
    pub position: usize,
    /// `s_i`: steps that accepted draft `i`.
    pub successes: u64,
    /// `n_i`: steps that drafted position `i` with every earlier draft
    /// accepted.
    pub trials: u64,
    /// `s_i / n_i`; `None` without trials.
    pub rate: Option<f64>,
    /// The posterior mean of `h_i`.
    pub posterior_mean: f64,
    /// Central credible interval of `h_i` (normal approximation, clipped to
    /// `[0, 1]`).
    pub interval: [f64; 2],
    /// No trials: the estimate is the prior alone.
    pub from_prior: bool,
}

/// What drafting `k` tokens per step is expected to give.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Candidate {
    /// The draft length `k`.
    pub draft_len: usize,
    /// Posterior mean of the accepted drafts per step, `E[a | k]`, from the
    /// chain of continuation rates.
    pub expected_accepted: f64,
    /// Central credible interval of `E[a | k]` (normal approximation from the
    /// exact posterior variance, clipped to `[0, k]`).
    pub accepted_interval: [f64; 2],
    /// Posterior standard deviation of `E[a | k]`.
    pub accepted_sd: f64,
    /// Expected tokens per step, `1 + E[a | k]` (the bonus token included).
    pub tokens_per_step: f64,
    /// `cost(k)`.
    pub cost: f64,
    /// Expected tokens per unit of cost, `tokens_per_step / cost`.
    pub goodput: f64,
    /// `goodput / goodput(0)`.
    pub speedup: f64,
    /// Posterior probability that `k` has a higher goodput than the
    /// recommended draft length (normal approximation; 0.5 for the
    /// recommendation itself).
    pub prob_beats_choice: f64,
    /// Some position `<= k` had no trials: the estimate leans on the prior.
    pub uses_prior: bool,
    /// Steps recorded with exactly this draft length.
    pub row_steps: u64,
    /// Their plain mean of accepted drafts (a direct estimate of `E[a | k]`
    /// that does not assume acceptance independent of `k`); `None` without
    /// steps.
    pub row_mean_accepted: Option<f64>,
    /// Standard error of `row_mean_accepted` (the row's sample standard
    /// deviation over the square root of its steps); `None` below 2 steps.
    pub row_mean_sd: Option<f64>,
    /// For `k >= 1` and rows of at least 100 steps ([`MIN_ROW_STEPS`]):
    /// `|row_mean_accepted - expected_accepted| / sqrt(row_mean_sd^2 +
    /// accepted_sd^2)`. The row's steps are part of the chain, so when
    /// acceptance does not depend on `k` the two agree more closely than
    /// this allows: the test errs towards silence.
    pub row_distance: Option<f64>,
    /// `row_distance` is above the recommendation's `row_distance_bound`:
    /// this row accepts differently from what the chain of positions says,
    /// so acceptance depends on the draft length (trust the row's own mean
    /// for it).
    pub row_disagrees: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SplitMix64 uniforms in `[0, 1)`.
    struct Uniform(u64);
    impl Uniform {
        fn next(&mut self) -> f64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
        }
        /// `Beta(a, b)` for whole `a, b`: the `a`-th smallest of `a + b - 1`
        /// uniforms.
        fn beta(&mut self, a: usize, b: usize, scratch: &mut Vec<f64>) -> f64 {
            scratch.clear();
            scratch.extend((0..a + b - 1).map(|_| self.next()));
            scratch.sort_by(f64::total_cmp);
            scratch[a - 1]
        }
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
        let mut rng = Uniform(42);
        let mut scratch = Vec::new();
        let (mut sum, mut prod) = (vec![0.0; max + 1], vec![vec![0.0; max + 1]; max + 1]);
        for _ in 0..samples {
            let mut s = vec![0.0; max + 1];
            let mut p = 1.0;
            for (j, &(succ, trials)) in counts.iter().enumerate() {
                let (a, b) = (succ as usize + 1, (trials - succ) as usize + 1);
                p *= rng.beta(a, b, &mut scratch);
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
