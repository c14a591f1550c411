//! [`Advisor`]: one histogram and a step cost to a [`Recommendation`].

use serde::Serialize;

use super::continuation::Continuation;
use super::cost::{BoundCost, StepCost};
use super::error::{CostError, ParameterError};
use super::stats::{
    BetaPrior, Chain, GoodputDifference, best_by_mean, goodput, normal_cdf, normal_quantile,
    t_quantile,
};
use crate::AcceptanceHistogram;
use crate::record::MergeError;

/// The credible level of [`Advisor::default`]'s intervals.
const DEFAULT_CREDIBLE_LEVEL: f64 = 0.9;

/// Turns a histogram and a [`StepCost`] into a [`Recommendation`]: the draft
/// length with the highest posterior mean goodput, and for every draft
/// length the estimates behind it.
///
/// # The estimates and their uncertainty
///
/// The advisor reads the histogram's [`Continuation`] counts `(s_i, n_i)`
/// and gives each continuation rate `h_i` a Beta posterior: the prior
/// `Beta(alpha_0, beta_0)` (by default `Beta(1, 1)`, uniform: no opinion,
/// mean 1/2) updated with `s_i` successes in `n_i` trials. A position
/// without trials keeps the prior; nothing is extrapolated from other
/// positions. The positions' posteriors are independent, so the posterior
/// mean of `E[a | k]` is the chain of posterior means, and its variance,
/// and the covariance between two draft lengths, follow exactly from the
/// first two moments of each posterior: `O(K)` work per draft length, no
/// sampling. Intervals are the normal approximation `mean ± z sd` from
/// those exact moments, clipped to the possible range.
///
/// These intervals treat the steps as independent. When acceptance persists
/// within requests (runs of easy and hard stretches), steps are correlated
/// and one histogram cannot show it: the intervals are then too narrow.
///
/// # Cost, goodput and the choice
///
/// Goodput is `g(k) = (1 + E[a | k]) / cost(k)` tokens per unit of cost and
/// speedup `g(k) / g(0)` (`k = 0`: not speculating). Decisions use costs
/// relative to `cost(0)`, so they do not depend on the unit. The advisor
/// recommends the `k` with the highest posterior mean goodput; ties go to
/// the shorter draft, so `k = 0` wins when nothing beats not speculating.
/// Each [`Candidate`] also carries the posterior probability that it beats
/// the recommendation, from the exact variance of the difference of the two
/// goodputs.
///
/// # Rows that disagree with the chain
///
/// The chain assumes acceptance at a position does not depend on the draft
/// length. A row with at least [`MIN_ROW_STEPS`] steps of its own has a
/// direct estimate, its plain mean; the advisor reports it next to the
/// chain and flags a row whose distance from the chain exceeds a Bonferroni
/// bound (see [`Recommendation::row_distance_bound`]), so a drafter whose
/// acceptance falls with `k` (MTP heads often accept less at position 0
/// when drafting 8 than when drafting 1) shows up.
///
/// # Checked against the theory
///
/// With a constant per-position acceptance `alpha`, `E[a | k] = alpha (1 -
/// alpha^k) / (1 - alpha)` and the walltime improvement of Leviathan,
/// Kalman and Matias (2023) at `cost(k) = 1 + c k` is `(1 - alpha^(k+1)) /
/// ((1 - alpha)(1 + c k))`. On 300,000 simulated steps per `alpha` (drafts
/// spread over `1..=32`), the crate's tests check every `E[a | k]` within 2%
/// of the formula and the recommendation within 1% of the formula's optimum
/// for `alpha` in 0.5..0.95 and `c` in 0.02..0.4.
///
/// # When not to trust the advice
///
/// - *Too few steps.* With a few hundred steps the intervals are wide and
///   positions above the drafted lengths are prior alone
///   ([`Candidate::uses_prior`], [`PositionEstimate::from_prior`]). The
///   advice is then the prior's opinion; look at the intervals, and let the
///   controller, which waits for evidence, decide.
/// - *Costs not measured.* The choice is only as good as `cost(k)`. A
///   linear guess is fine for a sanity check; for a decision, time real
///   steps at a few draft lengths and batch sizes, and use a table.
/// - *Acceptance that depends on `k`.* See "Rows that disagree with the
///   chain" above: for a flagged row, trust the row's own mean.
/// - *A histogram that mixes regimes* (a day's report across load levels):
///   advise per regime (one [`Recorder`](crate::Recorder) per batch-size
///   bucket, say, and a [`BatchTable`](crate::BatchTable)), or let the
///   controller follow the regimes live.
/// - *Acceptance that comes in runs* within requests: the intervals assume
///   independent steps and are then too narrow (see above).
///
/// Stateless and cheap (`O(K^2)` for the continuation counts, `O(K)` per
/// draft length after that); for a choice that persists across intervals
/// and only switches on strong evidence, see
/// [`DraftController`](crate::DraftController).
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
/// let advice = Advisor::default().recommend(&h, &cost)?;
/// assert_eq!(advice.draft_len, 4);
/// assert!(advice.expected_speedup > 1.5);
/// // Every draft length 0..=K is scored; k = 0 is the baseline.
/// assert_eq!(advice.candidates.len(), 5);
/// assert_eq!(advice.candidates[0].speedup, 1.0);
///
/// // Expensive drafts: not speculating is best.
/// let advice = Advisor::default().recommend(&h, &StepCost::linear(1.0, 2.0)?)?;
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
            credible_level: DEFAULT_CREDIBLE_LEVEL,
        }
    }
}

impl Advisor {
    /// The same advisor with the prior `Beta(alpha, beta)` on every
    /// continuation rate.
    ///
    /// # Errors
    ///
    /// [`ParameterError`] unless both are finite and above zero, and their
    /// sum finite.
    ///
    /// ```
    /// use specdec_metrics::Advisor;
    /// // An optimistic prior worth 10 trials with mean 0.8.
    /// let advisor = Advisor::default().with_prior(8.0, 2.0)?;
    /// assert_eq!(advisor.prior().alpha, 8.0);
    /// assert!(Advisor::default().with_prior(1e308, 1e308).is_err());
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

    /// The recommendation for `h` under `cost`: every draft length `0..=K`
    /// scored, the best one chosen.
    ///
    /// # Errors
    ///
    /// [`CostError::TableLength`] when `cost` is a table without exactly one
    /// cost per draft length `0..=K` of `h`.
    ///
    /// ```
    /// use specdec_metrics::{AcceptanceHistogram, Advisor, StepCost};
    /// let mut h = AcceptanceHistogram::new(3)?;
    /// for _ in 0..100 {
    ///     h.observe(3, 3)?; // every draft accepted
    /// }
    /// let advice = Advisor::default().recommend(&h, &StepCost::table(vec![1.0, 1.1, 1.2, 1.3])?)?;
    /// assert_eq!(advice.draft_len, 3);
    /// let k3 = &advice.candidates[3];
    /// assert!(k3.expected_accepted > 2.9 && k3.accepted_interval[1] <= 3.0);
    /// assert_eq!(k3.row_mean_accepted, Some(3.0));
    ///
    /// // A table for another K is an error, not truncated.
    /// let short = StepCost::table(vec![1.0, 1.1])?;
    /// assert!(Advisor::default().recommend(&h, &short).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn recommend(
        &self,
        h: &AcceptanceHistogram,
        cost: &StepCost,
    ) -> Result<Recommendation, CostError> {
        self.recommend_from(&Continuation::new(h), Some(h), cost, Spread::ONE_WINDOW)
    }

    /// The recommendation for several windows of the same engine (a series
    /// of intervals or reports, a range of scrapes), pooled, with intervals
    /// that account for how much the windows differ.
    ///
    /// One histogram cannot show whether its steps are independent. When
    /// acceptance persists within requests (runs of easy and hard
    /// stretches), they are not, and intervals that assume they are come
    /// out too narrow. Several windows show it: the advisor measures how
    /// much more the windows' figures vary than binomial noise explains
    /// (`dispersion`: the squared differences of each window's `E[a | k]`
    /// from the pooled one over their binomial variances, summed over `W -
    /// 1` degrees of freedom), scales every variance by it
    /// (quasi-likelihood) and takes the quantiles of Student's t with `W -
    /// 1` degrees of freedom, since the dispersion is itself estimated.
    /// With steps independent the dispersion scatters around 1 and the
    /// intervals keep their nominal level. No interval is made narrower
    /// than the pooled window's binomial one (the dispersion is floored at
    /// `(z / t)^2` for them, at 1 for the probabilities of beating the
    /// choice), so windows that agree too well (one window given twice)
    /// cannot collapse them, and a position without trials keeps the
    /// prior's interval.
    ///
    /// # Errors
    ///
    /// [`AdviceError::NoWindows`] for an empty list,
    /// [`AdviceError::Merge`] for windows of different `K`,
    /// [`AdviceError::Cost`] for a cost table of another `K`.
    ///
    /// ```
    /// use specdec_metrics::{AcceptanceHistogram, Advisor, StepCost};
    /// // Two windows of the same engine: one easy, one hard.
    /// let mut easy = AcceptanceHistogram::new(2)?;
    /// let mut hard = AcceptanceHistogram::new(2)?;
    /// for _ in 0..500 {
    ///     easy.observe(2, 2)?;
    ///     hard.observe(2, 0)?;
    /// }
    /// let cost = StepCost::linear(1.0, 0.1)?;
    /// let pooled = Advisor::default().recommend_windows(&[easy, hard], &cost)?;
    /// assert_eq!(pooled.windows, 2);
    /// assert!(pooled.dispersion > 100.0); // far more than binomial noise
    /// assert!(!pooled.intervals_assume_independent_steps);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn recommend_windows(
        &self,
        windows: &[AcceptanceHistogram],
        cost: &StepCost,
    ) -> Result<Recommendation, AdviceError> {
        let first = windows.first().ok_or(AdviceError::NoWindows)?;
        let mut pooled = first.clone();
        for w in &windows[1..] {
            pooled.merge(w).map_err(AdviceError::Merge)?;
        }
        let continuations: Vec<Continuation> = windows.iter().map(Continuation::new).collect();
        let spread = Spread {
            dispersion: self.dispersion(&continuations),
            windows: windows.len(),
        };
        self.recommend_from(&Continuation::new(&pooled), Some(&pooled), cost, spread)
            .map_err(AdviceError::Cost)
    }

    /// How much the windows' `E[a | e]` vary over binomial noise, at the
    /// longest length `e` every window has trials up to; 1 for fewer than
    /// two windows with data.
    fn dispersion(&self, windows: &[Continuation]) -> f64 {
        let reached = |c: &Continuation| c.counts().iter().take_while(|c| c.1 > 0).count();
        let with_data: Vec<&Continuation> = windows.iter().filter(|c| reached(c) > 0).collect();
        let Some(e) = with_data.iter().map(|c| reached(c)).min() else {
            return 1.0;
        };
        if with_data.len() < 2 {
            return 1.0;
        }
        let figures: Vec<(f64, f64)> = with_data
            .iter()
            .map(|c| {
                let chain = Chain::from_counts(&c.counts()[..e], self.prior);
                (chain.mean(e), chain.variance(e))
            })
            .collect();
        // The pooled figure weighs each window by its precision.
        let weight: f64 = figures.iter().map(|&(_, v)| 1.0 / v).sum();
        let pooled = figures.iter().map(|&(x, v)| x / v).sum::<f64>() / weight;
        let pearson: f64 = figures.iter().map(|&(x, v)| (x - pooled).powi(2) / v).sum();
        // The estimate itself, which may be below 1 (windows that agree
        // more closely than binomial noise, or the same window twice):
        // with independent steps it scatters around 1, and with the t
        // quantile that scatter keeps the intervals at their nominal level;
        // only where it would make them narrower than binomial is it
        // floored (`Spread::interval_scale`).
        pearson / (figures.len() - 1) as f64
    }

    /// The recommendation from continuation counts alone, such as those
    /// [`EngineCounters`](crate::EngineCounters) identifies from another
    /// engine's per-position counters. Without the histogram's rows there
    /// is no row check: every candidate's `row_*` fields are empty, and
    /// `num_spec_steps` is the trials at position 1 (the steps that drafted
    /// at least one token).
    ///
    /// # Errors
    ///
    /// [`CostError::TableLength`] for a cost table of another `K`.
    ///
    /// ```
    /// use specdec_metrics::{Advisor, EngineCounters, Identified, StepCost};
    /// // vLLM's counters at K = 3: 1000 drafts, acceptance 0.8 per position.
    /// let counters = EngineCounters::new(3, 1000, 3000, 800 + 640 + 512, vec![800, 640, 512])?;
    /// let Identified::Exact { continuation, .. } = counters.identify()? else { panic!() };
    /// let advice = Advisor::default().recommend_continuation(&continuation, &StepCost::linear(1.0, 0.1)?)?;
    /// assert_eq!(advice.draft_len, 3);
    /// assert_eq!(advice.candidates[3].row_mean_accepted, None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn recommend_continuation(
        &self,
        continuation: &Continuation,
        cost: &StepCost,
    ) -> Result<Recommendation, CostError> {
        self.recommend_from(continuation, None, cost, Spread::ONE_WINDOW)
    }

    fn recommend_from(
        &self,
        continuation: &Continuation,
        h: Option<&AcceptanceHistogram>,
        cost: &StepCost,
        spread: Spread,
    ) -> Result<Recommendation, CostError> {
        let cost = cost.bind(continuation.max_draft_len())?;
        let chain = Chain::from_counts(continuation.counts(), self.prior);
        let p = 0.5 + self.credible_level / 2.0;
        let z = spread.quantile(p);
        let best = best_by_mean(&chain, &cost);
        let mut candidates = self.candidates(&chain, &cost, continuation, best, spread, h);
        let row_distance_bound = flag_disagreeing_rows(&mut candidates);
        Ok(Recommendation {
            draft_len: best,
            expected_speedup: goodput(&chain, &cost, best),
            num_spec_steps: h.map_or(continuation.at(1).1, AcceptanceHistogram::num_spec_steps),
            prior: self.prior,
            credible_level: self.credible_level,
            positions: self.positions(
                continuation,
                z * spread.interval_scale(p).sqrt(),
                normal_quantile(p),
            ),
            candidates,
            row_distance_bound,
            windows: spread.windows,
            dispersion: spread.dispersion,
            intervals_assume_independent_steps: spread.windows < 2,
        })
    }

    /// How drafting `k` compares with drafting `baseline` (for example the
    /// recommendation against the length an engine runs now): the ratio of
    /// their posterior mean goodputs, its central credible interval (delta
    /// method on the chain's exact moments, normal approximation), and the
    /// posterior probability that `k` has the higher goodput.
    ///
    /// # Errors
    ///
    /// [`CostError::TableLength`] for a cost table of another `K`.
    ///
    /// # Panics
    ///
    /// When `k` or `baseline` is above `K`.
    ///
    /// ```
    /// use specdec_metrics::{Advisor, EngineCounters, Identified, StepCost};
    /// let counters = EngineCounters::new(3, 1000, 3000, 800 + 640 + 512, vec![800, 640, 512])?;
    /// let Identified::Exact { continuation, .. } = counters.identify()? else { panic!() };
    /// let cost = StepCost::linear(1.0, 0.1)?;
    /// let vs_one = Advisor::default().compare(&continuation, &cost, 3, 1)?;
    /// assert!(vs_one.ratio > 1.2 && vs_one.interval[0] < vs_one.ratio && vs_one.ratio < vs_one.interval[1]);
    /// assert!(vs_one.prob_better > 0.99);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn compare(
        &self,
        continuation: &Continuation,
        cost: &StepCost,
        k: usize,
        baseline: usize,
    ) -> Result<Comparison, CostError> {
        let cost = cost.bind(continuation.max_draft_len())?;
        let chain = Chain::from_counts(continuation.counts(), self.prior);
        let z = normal_quantile(0.5 + self.credible_level / 2.0);
        let mut cov = Vec::new();
        chain.covariances_with(baseline, &mut cov);
        let (gk, gb) = (goodput(&chain, &cost, k), goodput(&chain, &cost, baseline));
        let ratio = gk / gb;
        let (rk, rb) = (cost.relative(k), cost.relative(baseline));
        // Var(g_k / g_b) by the delta method, from Var g_k, Var g_b and
        // their covariance.
        let (vk, vb, c) = (
            chain.variance(k) / (rk * rk),
            chain.variance(baseline) / (rb * rb),
            cov[k] / (rk * rb),
        );
        let sd = ((vk + ratio * ratio * vb - 2.0 * ratio * c) / (gb * gb))
            .max(0.0)
            .sqrt();
        let d = GoodputDifference::new(&chain, &cost, k, baseline, cov[k]);
        Ok(Comparison {
            ratio,
            interval: [(ratio - z * sd).max(0.0), ratio + z * sd],
            prob_better: if k == baseline {
                0.5
            } else {
                normal_cdf(d.mean / d.variance.max(f64::MIN_POSITIVE).sqrt())
            },
        })
    }

    /// A guess beyond the data, for draft lengths above `K` that were never
    /// drafted: the best length in `0..=up_to` if every position above the
    /// last one with trials continued at that position's posterior mean
    /// rate. `None` when that length is not above `K` (the data does not
    /// suggest drafting longer) or no position has trials.
    ///
    /// This is an **extrapolation**, not an estimate: positions above `K`
    /// may accept less (or more) than the last one measured. Raise `K` to
    /// the suggested length and measure before trusting it.
    ///
    /// # Errors
    ///
    /// [`CostError::TableLength`] when `cost` does not cover `0..=up_to` (a
    /// table covers only its own `K`).
    ///
    /// ```
    /// use specdec_metrics::{Advisor, EngineCounters, Identified, StepCost};
    /// // K = 3, every position accepted 90% of the time: longer would pay.
    /// let counters = EngineCounters::new(3, 10_000, 30_000, 9000 + 8100 + 7290, vec![9000, 8100, 7290])?;
    /// let Identified::Exact { continuation, .. } = counters.identify()? else { panic!() };
    /// let guess = Advisor::default()
    ///     .extrapolate(&continuation, &StepCost::linear(1.0, 0.05)?, 16)?
    ///     .expect("rates this high suggest a longer draft");
    /// assert!(guess.draft_len > 3 && guess.from_position == 3);
    /// assert!((guess.rate - 0.9).abs() < 0.01);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn extrapolate(
        &self,
        continuation: &Continuation,
        cost: &StepCost,
        up_to: usize,
    ) -> Result<Option<Extrapolation>, CostError> {
        let max = continuation.max_draft_len();
        let up_to = up_to.min(crate::MAX_MAX_DRAFT_LEN);
        if up_to <= max {
            return Ok(None);
        }
        let cost = cost.bind(up_to)?;
        let Some(last) = continuation.counts().iter().rposition(|&(_, n)| n > 0) else {
            return Ok(None);
        };
        let chain = Chain::from_counts(&continuation.counts()[..=last], self.prior);
        let (s, n) = continuation.counts()[last];
        let rate = self.prior.posterior(s as f64, n as f64).mean();
        let (mut expected, mut product) = (
            chain.mean(last + 1),
            chain.mean(last + 1) - chain.mean(last),
        );
        let speedup = |expected: f64, k: usize| (1.0 + expected) / cost.relative(k);
        let mut best = (0, 1.0);
        for k in 1..=last + 1 {
            let g = speedup(chain.mean(k), k);
            if g > best.1 * (1.0 + 1e-12) {
                best = (k, g);
            }
        }
        for k in last + 2..=up_to {
            product *= rate;
            expected += product;
            let g = speedup(expected, k);
            if g > best.1 * (1.0 + 1e-12) {
                best = (k, g);
            }
        }
        Ok((best.0 > max).then_some(Extrapolation {
            draft_len: best.0,
            expected_speedup: best.1,
            rate,
            from_position: last + 1,
        }))
    }

    /// Positions `1..=K`: counts and the posterior of each rate; `z` for
    /// positions with trials, `z_prior` for those without (the prior's own
    /// interval, which no dispersion between windows widens or narrows).
    fn positions(
        &self,
        continuation: &Continuation,
        z: f64,
        z_prior: f64,
    ) -> Vec<PositionEstimate> {
        continuation
            .counts()
            .iter()
            .enumerate()
            .map(|(i, &(s, n))| {
                let posterior = self.prior.posterior(s as f64, n as f64);
                PositionEstimate {
                    position: i + 1,
                    successes: s,
                    trials: n,
                    rate: (n != 0).then(|| s as f64 / n as f64),
                    posterior_mean: posterior.mean(),
                    interval: posterior.interval(if n == 0 { z_prior } else { z }),
                    from_prior: n == 0,
                }
            })
            .collect()
    }

    /// Draft lengths `0..=K`: what drafting each is expected to give, and
    /// how likely it beats `best`. `row_disagrees` is left `false`.
    fn candidates(
        &self,
        chain: &Chain,
        cost: &BoundCost,
        continuation: &Continuation,
        best: usize,
        spread: Spread,
        h: Option<&AcceptanceHistogram>,
    ) -> Vec<Candidate> {
        let p = 0.5 + self.credible_level / 2.0;
        let (z, dispersion, prob_dispersion) = (
            spread.quantile(p),
            spread.interval_scale(p),
            spread.probability_scale(),
        );
        let mut cov = Vec::new();
        chain.covariances_with(best, &mut cov);
        let mut uses_prior = false;
        (0..=chain.max_draft_len())
            .map(|k| {
                uses_prior |= k > 0 && continuation.at(k).1 == 0;
                // Widened by the dispersion between windows (quasi-likelihood).
                let (mean, sd) = (chain.mean(k), (chain.variance(k) * dispersion).sqrt());
                // Two different lengths always have a positive variance of
                // their difference; the floor only keeps rounding from
                // turning it into a NaN.
                let prob_beats_choice = if k == best {
                    0.5
                } else {
                    let d = GoodputDifference::new(chain, cost, k, best, cov[k]);
                    normal_cdf(
                        d.mean / (d.variance * prob_dispersion).max(f64::MIN_POSITIVE).sqrt(),
                    )
                };
                let row = h.map_or(RowCheck::NONE, |h| RowCheck::new(h, k, mean, sd));
                Candidate {
                    draft_len: k,
                    expected_accepted: mean,
                    accepted_sd: sd,
                    accepted_interval: [(mean - z * sd).max(0.0), (mean + z * sd).min(k as f64)],
                    tokens_per_step: 1.0 + mean,
                    cost: cost.cost(k),
                    goodput: (1.0 + mean) / cost.cost(k),
                    speedup: goodput(chain, cost, k),
                    prob_beats_choice,
                    uses_prior,
                    row_steps: h.map_or(0, |h| h.row_steps(k)),
                    row_mean_accepted: row.mean,
                    row_mean_sd: row.mean_sd,
                    row_distance: row.distance,
                    row_disagrees: false,
                }
            })
            .collect()
    }
}

/// Flags the candidates whose row disagrees with the chain, and returns the
/// bound used: Bonferroni over the rows compared, so that when acceptance
/// does not depend on `k` some row is flagged in at most
/// [`ROW_FALSE_ALARM`] of reports.
fn flag_disagreeing_rows(candidates: &mut [Candidate]) -> f64 {
    let compared = candidates
        .iter()
        .filter(|c| c.row_distance.is_some())
        .count();
    let bound = normal_quantile(1.0 - ROW_FALSE_ALARM / (2.0 * compared.max(1) as f64));
    for c in candidates {
        c.row_disagrees = c.row_distance.is_some_and(|d| d > bound);
    }
    bound
}

/// How one draft length compares with another ([`Advisor::compare`]).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Comparison {
    /// Posterior mean goodput of `k` over that of the baseline.
    pub ratio: f64,
    /// Central credible interval of the ratio, at the advisor's level.
    pub interval: [f64; 2],
    /// Posterior probability that `k` has the higher goodput.
    pub prob_better: f64,
}

/// A draft length beyond the data, from [`Advisor::extrapolate`]: a guess
/// to test by raising `K`, not a measurement.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Extrapolation {
    /// The draft length that would be best under the guess.
    pub draft_len: usize,
    /// Its goodput over not speculating, under the guess.
    pub expected_speedup: f64,
    /// The continuation rate assumed above the data.
    pub rate: f64,
    /// The last position measured (from 1), whose rate is continued.
    pub from_position: usize,
}

/// Rows with fewer steps are not compared with the chain.
pub const MIN_ROW_STEPS: u64 = 100;

/// The share of reports in which some row is flagged as disagreeing with the
/// chain although acceptance does not depend on `k`.
const ROW_FALSE_ALARM: f64 = 0.01;

/// A row's own mean against the chain's estimate.
struct RowCheck {
    mean: Option<f64>,
    mean_sd: Option<f64>,
    distance: Option<f64>,
}

impl RowCheck {
    /// No row to check.
    const NONE: Self = Self {
        mean: None,
        mean_sd: None,
        distance: None,
    };

    /// For row `k`: its plain mean of accepted drafts; the standard error of
    /// that mean (its sample standard deviation over the square root of its
    /// steps, from 2 steps); and from [`MIN_ROW_STEPS`] steps the distance
    /// `|row mean - chain mean| / sqrt(se^2 + chain_sd^2)`.
    fn new(h: &AcceptanceHistogram, k: usize, chain_mean: f64, chain_sd: f64) -> Self {
        let steps = h.row_steps(k);
        let row = h.row(k).unwrap_or(&[]);
        if steps == 0 {
            return Self::NONE;
        }
        let n = steps as f64;
        let mean = row
            .iter()
            .enumerate()
            .map(|(a, &c)| a as f64 * c as f64)
            .sum::<f64>()
            / n;
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
        Self {
            mean: Some(mean),
            mean_sd,
            distance,
        }
    }
}

/// What the [`Advisor`] recommends, with the figures behind it. Serializes
/// (serde) to a JSON object with these field names.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
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
    /// The windows the estimates pool: 1 for [`Advisor::recommend`].
    pub windows: usize,
    /// How much more the windows vary than binomial noise explains (about 1
    /// when steps are independent; 1 for one window). Every variance of a
    /// position with trials is scaled by it, but no interval is made
    /// narrower than the pooled window's binomial one (see
    /// [`Advisor::recommend_windows`]): windows closer than binomial noise,
    /// such as one window given twice, give the binomial width.
    pub dispersion: f64,
    /// The intervals assume the steps are independent: one window, which
    /// cannot show that acceptance persists within requests. Where it does,
    /// such intervals are too narrow; give
    /// [`Advisor::recommend_windows`] several windows.
    pub intervals_assume_independent_steps: bool,
}

/// How the estimates' uncertainty is scaled: by the dispersion between
/// windows, with Student's t quantiles for an estimated dispersion.
#[derive(Clone, Copy, Debug)]
struct Spread {
    dispersion: f64,
    windows: usize,
}

impl Spread {
    const ONE_WINDOW: Self = Self {
        dispersion: 1.0,
        windows: 1,
    };

    /// What the variances of the intervals at level `p` are multiplied by:
    /// the dispersion, but at least `(z / t)^2` (the normal over the t
    /// quantile), so that with the t quantile no interval is narrower than
    /// the binomial one of the pooled window. Windows that agree more
    /// closely than binomial noise (one window given twice: a dispersion
    /// of 0) then give the binomial width, not none.
    fn interval_scale(self, p: f64) -> f64 {
        let floor = (normal_quantile(p) / self.quantile(p)).powi(2);
        self.dispersion.max(floor)
    }

    /// What the variance of a difference of goodputs is multiplied by (the
    /// probabilities take the normal distribution): the dispersion, but at
    /// least 1, for the same reason.
    fn probability_scale(self) -> f64 {
        self.dispersion.max(1.0)
    }

    /// The quantile at `p` for the intervals: the normal one for one
    /// window, Student's t with `windows - 1` degrees of freedom otherwise.
    fn quantile(self, p: f64) -> f64 {
        if self.windows < 2 {
            normal_quantile(p)
        } else {
            t_quantile(p, (self.windows - 1) as f64)
        }
    }
}

/// Why [`Advisor::recommend_windows`] could not advise.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum AdviceError {
    /// No window was given.
    NoWindows,
    /// The windows cannot be pooled (another `K`, or counts that overflow).
    Merge(MergeError),
    /// The cost does not fit `K`.
    Cost(CostError),
}

impl core::fmt::Display for AdviceError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::NoWindows => f.write_str("no window to advise from"),
            Self::Merge(e) => write!(f, "the windows cannot be pooled: {e}"),
            Self::Cost(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for AdviceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::NoWindows => None,
            Self::Merge(e) => Some(e),
            Self::Cost(e) => Some(e),
        }
    }
}

/// The estimate of the continuation rate `h_i` at one draft position.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
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
#[non_exhaustive]
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
