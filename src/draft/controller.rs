//! [`DraftController`]: the draft length an engine uses, updated once per
//! interval from that interval's histogram, deciding once it has seen
//! enough observations, switching only on strong evidence.

use std::collections::VecDeque;

use super::continuation::Continuation;
use super::cost::{BoundCost, StepCost};
use super::error::ParameterError;
use super::plan::DraftPlan;
use super::stats::{
    BetaPrior, Chain, GoodputDifference, best_by_mean_from, chi_square_1_quantile, goodput,
    goodput_of, normal_cdf, normal_quantile,
};
use crate::AcceptanceHistogram;
use crate::record::ConfigError;

/// Chooses the draft length interval by interval from the engine's own
/// histogram.
///
/// The metrics thread calls [`update`](Self::update) once per interval with
/// that interval's histogram (`snapshot.delta_since(&previous)`) and hands
/// the [`plan`](Self::plan) to engine threads (through a
/// [`SharedPlan`](crate::SharedPlan)), which ask it what to draft at each
/// step ([`DraftPlan::draft_len_for`]).
///
/// # Memory
///
/// The controller remembers the continuation counts `(s_i, n_i)` of the last
/// `memory` intervals (default 8) in a ring, and their sum. On every
/// [`update`](Self::update) the oldest interval drops out and
/// the new one comes in; from the sum it forms the same Beta posteriors as
/// the [`Advisor`](crate::Advisor) (prior `Beta(1, 1)` unless set).
///
/// # Evidence counted in observations
///
/// An engine calls [`update`](Self::update) once per metrics interval, but
/// an interval of one request in flight holds 32 times less data than one
/// of 32. So the controller pools windows until they hold at least
/// [`update_observations`](Self::update_observations) observations (256 by
/// default: 8 engine steps of 32 requests) and decides once on their sum:
/// one remembered interval, one update, always holds about as much data,
/// whatever the batch size. (A window that alone holds more is taken in
/// whole.)
///
/// # The switching rule
///
/// Let `c` be the current draft length and `g(k)` the goodput of drafting
/// `k`. The controller switches to another `k` only when the posterior
/// probability that `g(k) > g(c)` reaches `evidence` (default 0.99):
/// `E[g(k) - g(c)] >= z sd[g(k) - g(c)]`, `z` the normal quantile of
/// `evidence`, from the exact posterior means, variances and covariance
/// (positions shared by `k` and `c` are correlated, and that is accounted
/// for). Among the draft lengths that pass, it takes the one with the
/// highest mean goodput (the shorter on a tie); when none passes it holds.
/// There is no other hysteresis: two draft lengths whose goodputs are close
/// never pass the test against each other, so a steady workload converges
/// and then holds, while a clear difference passes as soon as there is data
/// to show it. Before any data the posterior is the prior, and the first
/// choice is the draft length with the best goodput under the prior.
///
/// A choice held for long is tested again on every update, on memories
/// that overlap; at one level per test, noise would move a choice between
/// two near-equal lengths every few hundred updates. So the level is spent
/// over the time a choice is held: in the `n`-th span of `2 memory`
/// updates since the last switch or change of regime, a switch must pass
/// level `(1 - evidence) / n^2`. The levels of all spans sum to
/// `(1 - evidence) pi^2 / 6` (1.6% at 0.99), however long a choice is
/// held; a clear difference still passes at once, a change of regime
/// restarts the count.
///
/// The two parameters trade reaction time (`memory`) against stability
/// (`evidence`); both are statistical, not thresholds on the acceptance
/// length.
///
/// # Change of regime
///
/// Before taking in an interval, the controller compares it with its memory
/// on the figure the choice depends on: the expected accepted drafts at the
/// exploration length. When the two posterior means differ by more than the
/// evidence level allows (a squared z-score, over the dispersion below,
/// above the level-`evidence` quantile it has when nothing changed),
/// acceptance has changed: the memory
/// is forgotten and restarts from the new interval, so the next decision is
/// made on the new regime alone instead of a blend of old and new. A change
/// is therefore followed at the first update after it (to the best length
/// within the exploration range, when the new regime makes one clearly
/// better; a farther one takes one more switch, see "Climbing"). A
/// change too small to be detected is still out of the memory after
/// `memory` updates: **within `memory` updates of a change, every remembered
/// interval is of the new regime.**
///
/// # Intervals that vary more than chance
///
/// Real intervals differ more than binomial noise explains (a different mix
/// of requests each interval). The controller measures this: each interval
/// is compared with the straight line through the four intervals before it
/// (in the same figure, `E[a | e]`), and the squared distance over its
/// variance under binomial noise, over that ratio's median under binomial
/// noise, goes into a history of the last 9 intervals; their median, at
/// least 1, is the *dispersion*. Both tests above widen the posterior
/// variance by it (quasi-likelihood), so an engine whose intervals jitter
/// does not mistake jitter for evidence or for a change of regime; the
/// median keeps one real change from inflating it.
///
/// Measuring the noise around a line rather than around the memory keeps
/// a steady drift out of it. Acceptance that falls a little every interval
/// is a change the controller must follow, not noise: measured against the
/// memory, such a drift used to read as noise thousands of times binomial,
/// and the controller froze, behind the optimum by several updates. Around
/// a line the drift leaves only the noise, the change test sees the drift
/// for what it is, and the controller follows it at least as closely as
/// drafting the previous interval's best length.
///
/// A dispersion estimated from a few intervals is itself uncertain, and an
/// underestimate makes jitter look like a change. The change test allows
/// for it: its threshold is the level-`evidence` quantile of the statistic
/// over a dispersion that is the median of `n` earlier intervals (`n` up to
/// 9), computed once from the evidence level, not the chi-square quantile
/// that would hold for a known dispersion. At 0.99 it is 16.4 with 9
/// intervals of history instead of 6.63, and a steady engine whose
/// intervals vary three times more than chance is taken for a change of
/// regime on about 1% of updates instead of 3–4%. (No history yet: the
/// chi-square quantile, binomial noise assumed.)
///
/// # Exploration
///
/// Positions above `c` are drafted only on exploration steps: on one engine
/// step in [`EXPLORATION_PERIOD`](crate::EXPLORATION_PERIOD) (32, about 3%:
/// the steps `step % 32 == 31`), [`draft_len_for`](Self::draft_len_for)
/// returns the exploration length instead of `c`: `min(2c + 1, K)`, or
/// further when the remembered rates say a longer draft could pay (the
/// length that would be best if the positions beyond the data continued at
/// the last measured rate, taken at the upper end of its interval: a guess
/// used only to decide where to look). It is deterministic, costs one step
/// in 32 at a longer draft, and keeps data flowing above the current
/// choice, so the choice can grow again (from `c = 0` it explores `k = 1`:
/// not speculating is a choice the controller can leave). Thanks to
/// censoring, these longer drafts are pooled with the rest without bias.
///
/// # Climbing
///
/// After a change to high acceptance the optimum may be far above the
/// current choice. The controller switches to the best length the data
/// shows; the wider exploration then measures the positions up to the
/// guessed optimum, and among the lengths that beat the current choice it
/// takes the longest one the evidence cannot tell from the best (on a flat
/// top several are as good; the longest measures every position the others
/// do on every step). So a far optimum is reached in about two switches,
/// where doubling the exploration took one per doubling.
///
/// ```
/// use specdec_metrics::{AcceptanceHistogram, DraftController, StepCost};
///
/// let mut controller = DraftController::new(8, StepCost::linear(1.0, 0.1)?)?;
/// let mut step = 0u64;
/// for _interval in 0..20 {
///     let mut window = AcceptanceHistogram::new(8)?;
///     for _ in 0..2000 {
///         let k = controller.draft_len_for(step);
///         step += 1;
///         // The engine drafts k tokens and verifies them; here every draft
///         // is accepted up to position 4, and never beyond.
///         window.observe(k, k.min(4))?;
///     }
///     controller.update(&window);
/// }
/// assert_eq!(controller.draft_len(), 4);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Embedding it
///
/// ```
/// use specdec_metrics::{DraftController, Recorder, StepCost};
///
/// let recorder = Recorder::new(4)?;
/// let mut controller = DraftController::new(4, StepCost::linear(1.0, 0.1)?)?;
/// let mut previous = recorder.snapshot();
/// // ... engine threads record through their Workers, then every interval:
/// let now = recorder.snapshot();
/// controller.update(&now.delta_since(&previous)?);
/// previous = now;
/// let k = controller.draft_len_for(1234); // what to draft at step 1234
/// assert!(k <= 4);
/// # let _ = previous;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct DraftController {
    max_draft_len: usize,
    /// The shortest draft length the controller chooses (0 unless set).
    min_draft_len: usize,
    cost: BoundCost,
    prior: BetaPrior,
    evidence: f64,
    /// `normal_quantile(evidence)`.
    z: f64,
    /// `change_threshold(evidence, n)` for `n = 0..=DISPERSION_HISTORY`
    /// intervals in the dispersion's history.
    change_thresholds: [f64; DISPERSION_HISTORY + 1],
    /// `memory` intervals of `K` continuation counts `(s_i, n_i)`.
    ring: Box<[(u64, u64)]>,
    /// The sum of the ring, per position: exact in `u128` (at most 1024
    /// intervals of `u64` counts), so taking an interval out never wraps.
    totals: Box<[(u128, u128)]>,
    /// Next ring slot to overwrite.
    slot: usize,
    plan: DraftPlan,
    /// Between-interval variability over binomial noise (at least 1): the
    /// median of `dispersion_history`.
    dispersion: f64,
    /// The latest intervals' change statistic (`window_statistic`), each over
    /// its median under binomial noise.
    dispersion_history: Box<[f64]>,
    /// Intervals recorded in `dispersion_history` so far.
    dispersion_slot: usize,
    /// The continuation counts of the latest intervals (newest last, at
    /// most `max(memory, 2)`), kept across changes of regime: how well a
    /// straight line through them predicts the next interval measures the
    /// intervals' noise, a steady drift excluded.
    history: VecDeque<Box<[(u64, u64)]>>,
    updates: u64,
    switches: u64,
    regime_changes: u64,
    /// Updates since the choice last changed or the memory was last
    /// forgotten: how many times the current choice has been tested on
    /// the data of its regime (see [`switch_z`](Self::switch_z)).
    held: u64,
    /// The fewest observations an update decides from (0: every call).
    update_observations: u64,
    /// Continuation counts of the windows taken in since the last decision.
    pending: Box<[(u64, u64)]>,
    /// Observations in those windows.
    pending_observations: u64,
}

/// The length of one span of a held choice's test level, in memories (see
/// [`DraftController::switch_z`]). One memory tightened the test so fast
/// that on real code edits (n-gram traces of three repositories, `K = 64`,
/// cost `1 + 0.1 d`) a choice of 10 held against a best static length of 32
/// (0.976 of its goodput; 0.983 with two memories, as without spending),
/// while two keep a flat near-tie settled as well (24 of 24 seeds with at
/// most one switch); eight let one seed switch twice again.
const HELD_SPAN: u64 = 2;

/// Default number of remembered intervals.
const DEFAULT_MEMORY: usize = 8;
/// The fewest observations (verify steps plus undrafted steps) a
/// [`DraftController`] or [`StateController`](crate::StateController)
/// decides from unless told otherwise
/// ([`DraftController::with_update_observations`]): 8 engine steps of 32
/// requests. Chosen on the tuning half of a corpus of n-gram traces (short
/// and long code edits and agent calls, `K = 64`, step cost `1 + c d` for
/// `c` in 0.02 / 0.1 / 0.3, 1 to 128 requests in flight, an update every
/// 16 engine steps) among 128, 256, 512, 1024 and 2048: the highest mean
/// over cells of both controllers' median goodput ratio to the best static
/// length (adaptive 0.971, per-state 1.005; 0.965 and 1.004 at 512;
/// 0.929 and 0.947 deciding at every update).
///
/// ```
/// use specdec_metrics::{DEFAULT_UPDATE_OBSERVATIONS, DraftController, StepCost};
/// let c = DraftController::new(8, StepCost::linear(1.0, 0.1)?)?;
/// assert_eq!(c.update_observations(), DEFAULT_UPDATE_OBSERVATIONS);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub const DEFAULT_UPDATE_OBSERVATIONS: u64 = 256;
/// The most intervals a controller remembers ([`DraftController::with_memory`]).
const MAX_MEMORY: usize = 1024;
// The error message of `with_memory` spells the range out.
const _: () = assert!(MAX_MEMORY == 1024);
/// Earlier intervals the trend residual's line goes through. Two make it a
/// second difference, which misses noise that persists from one interval
/// to the next (a request mix that lasts a few intervals) and then reads
/// such noise as a change; many make the line's slope noisy and its
/// extension overshoot. Four passed both the drift and the jitter tests of
/// `tests/controller_faults.rs` and `tests/controller.rs`, where 2, 3 and
/// 8 each failed one.
const TREND_WINDOWS: usize = 4;
/// Intervals whose variability the dispersion is the median of.
const DISPERSION_HISTORY: usize = 9;
/// Default evidence level.
const DEFAULT_EVIDENCE: f64 = 0.99;

/// Points of the quadrature in [`change_threshold`].
const QUADRATURE_POINTS: usize = 128;
/// Halvings of the bracket in [`change_threshold`]'s bisection: the
/// bracket spans at most a factor of 300 in `ln q`, so 50 halvings leave a
/// relative error far below `f64`'s.
const BISECTION_STEPS: usize = 50;

/// The median of chi-square with one degree of freedom (0.4549): what a
/// change statistic is divided by to measure the dispersion.
fn chi_square_1_median() -> f64 {
    chi_square_1_quantile(0.5)
}

/// [`change_threshold`] for every length of the dispersion's history.
fn change_thresholds(evidence: f64) -> [f64; DISPERSION_HISTORY + 1] {
    core::array::from_fn(|n| change_threshold(evidence, n))
}

/// The level-`evidence` quantile of the change statistic over the
/// dispersion, `X / phi`, when nothing changed and `phi` is the median of
/// `n` earlier statistics over `m0`, the median of chi-square with one
/// degree of freedom: the threshold that a steady engine passes with
/// probability `1 - evidence`, its extra variability included.
///
/// Nothing changed: every statistic is `sigma^2` (the true dispersion)
/// times an independent chi-square with one degree of freedom, so `X /
/// phi` does not depend on `sigma^2`, and `P(X / phi > q) = E[1 - F(q M /
/// m0)]`, `M` the sample median of `n` chi-square variables and `F` their
/// distribution function, `1 - F(x) = 2 (1 - Phi(sqrt x))`.
///
/// - `n = 0` (no history: binomial noise assumed): the chi-square quantile.
/// - `n = 1, 2`: `X / M` is Fisher's F with (1, 1) degrees of freedom (for
///   `n = 2`, conservatively, see below): `q = m0 tan^2(pi evidence / 2)`.
/// - odd `n = 2r + 1`: `F(M)` is Beta(r + 1, r + 1); the expectation is a
///   midpoint rule over it (128 points; the weights vanish at both ends),
///   and `q` is found by bisection on its logarithm.
/// - even `n`: the median is the mean of the two middle values, less
///   variable than the median of `n - 1` values, whose threshold is used:
///   a steady engine then passes it slightly less often than `1 -
///   evidence`.
///
/// At the default 0.99: 6.63 (`n = 0`), 1843 (`n = 1, 2`), 80.9 (3), 32.3
/// (5), 21.0 (7), 16.4 (9). The floor of 1 on the dispersion only makes
/// the test stricter.
fn change_threshold(evidence: f64, n: usize) -> f64 {
    let m0 = chi_square_1_median();
    if n == 0 {
        return chi_square_1_quantile(evidence);
    }
    if n <= 2 {
        return m0 * (core::f64::consts::FRAC_PI_2 * evidence).tan().powi(2);
    }
    // An even n gets the r of n - 1: the threshold of n - 1 values.
    let r = ((n - 1) / 2) as i32;
    // Quadrature nodes: the median's value M = F^-1(u) and the weight of u
    // under Beta(r + 1, r + 1), for u at the midpoints of 128 equal cells.
    let mut nodes = [(0.0, 0.0); QUADRATURE_POINTS];
    let mut total = 0.0;
    for (i, node) in nodes.iter_mut().enumerate() {
        let u = (i as f64 + 0.5) / QUADRATURE_POINTS as f64;
        let weight = (u * (1.0 - u)).powi(r);
        *node = (normal_quantile(0.5 + u / 2.0).powi(2), weight);
        total += weight;
    }
    let tail = |q: f64| {
        nodes
            .iter()
            .map(|&(m, w)| w * 2.0 * (1.0 - normal_cdf((q * m / m0).sqrt())))
            .sum::<f64>()
            / total
    };
    // The tail falls as q grows; it passes 1 - evidence between the
    // chi-square quantile (where the estimate's error puts the tail above
    // 1 - evidence) and the n = 1 threshold.
    let (mut lo, mut hi) = (
        chi_square_1_quantile(evidence).ln(),
        change_threshold(evidence, 1).ln(),
    );
    for _ in 0..BISECTION_STEPS {
        let mid = (lo + hi) / 2.0;
        if tail(mid.exp()) > 1.0 - evidence {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    ((lo + hi) / 2.0).exp()
}

impl DraftController {
    /// A controller for draft lengths `0..=max_draft_len`, remembering 8
    /// intervals, switching at evidence 0.99, prior `Beta(1, 1)`. Its first
    /// choice is the draft length with the best goodput under the prior.
    ///
    /// # Errors
    ///
    /// [`ConfigError::MaxDraftLen`] when `max_draft_len` is outside
    /// `1..=64`; [`ConfigError::CostTable`] when `cost` is a table without exactly
    /// `max_draft_len + 1` entries.
    ///
    /// ```
    /// use specdec_metrics::{ConfigError, DraftController, StepCost};
    /// let controller = DraftController::new(5, StepCost::linear(1.0, 0.1)?)?;
    /// assert_eq!(controller.draft_len(), 2); // prior mean 1/2 per position
    /// assert!(DraftController::new(0, StepCost::linear(1.0, 0.1)?).is_err());
    /// let table = StepCost::table(vec![1.0, 1.1, 1.2])?; // k = 0..=2
    /// assert_eq!(
    ///     DraftController::new(4, table).unwrap_err(),
    ///     ConfigError::CostTable { max_draft_len: 4, found: 3 }
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(max_draft_len: usize, cost: StepCost) -> Result<Self, ConfigError> {
        ConfigError::check_max_draft_len(max_draft_len)?;
        // `bind` fails only on a table of another length (a cost is
        // checked when it is made).
        let cost = cost
            .bind(max_draft_len)
            .map_err(|_| ConfigError::CostTable {
                max_draft_len,
                found: cost.table_len().unwrap_or(0),
            })?;
        let mut controller = Self {
            max_draft_len,
            min_draft_len: 0,
            cost,
            prior: BetaPrior::UNIFORM,
            evidence: DEFAULT_EVIDENCE,
            z: normal_quantile(DEFAULT_EVIDENCE),
            change_thresholds: change_thresholds(DEFAULT_EVIDENCE),
            ring: vec![(0, 0); DEFAULT_MEMORY * max_draft_len].into_boxed_slice(),
            totals: vec![(0, 0); max_draft_len].into_boxed_slice(),
            slot: 0,
            plan: DraftPlan::new_unchecked(0, max_draft_len),
            dispersion: 1.0,
            dispersion_history: vec![1.0; DISPERSION_HISTORY].into_boxed_slice(),
            dispersion_slot: 0,
            history: VecDeque::new(),
            updates: 0,
            switches: 0,
            regime_changes: 0,
            held: 0,
            update_observations: DEFAULT_UPDATE_OBSERVATIONS,
            pending: vec![(0, 0); max_draft_len].into_boxed_slice(),
            pending_observations: 0,
        };
        controller.reset_choice();
        Ok(controller)
    }

    /// The same controller remembering the last `intervals` intervals
    /// (`1..=1024`): it follows a change of regime within that many updates.
    /// Forgets what it remembered so far.
    ///
    /// # Errors
    ///
    /// [`ParameterError`] outside `1..=1024`.
    ///
    /// ```
    /// use specdec_metrics::{DraftController, StepCost};
    /// let c = DraftController::new(4, StepCost::linear(1.0, 0.1)?)?.with_memory(16)?;
    /// assert_eq!(c.memory(), 16);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_memory(mut self, intervals: usize) -> Result<Self, ParameterError> {
        if !(1..=MAX_MEMORY).contains(&intervals) {
            return Err(ParameterError::new(
                "memory",
                intervals as f64,
                "a number of intervals in 1..=1024",
            ));
        }
        self.ring = vec![(0, 0); intervals * self.max_draft_len].into_boxed_slice();
        self.totals.fill((0, 0));
        self.slot = 0;
        self.reset_choice();
        Ok(self)
    }

    /// The same controller switching only when the posterior probability
    /// that another draft length has a higher goodput reaches `evidence`
    /// (`0.5 < evidence < 1`; default 0.99).
    ///
    /// # Errors
    ///
    /// [`ParameterError`] outside that range.
    ///
    /// ```
    /// use specdec_metrics::{DraftController, StepCost};
    /// let c = DraftController::new(4, StepCost::linear(1.0, 0.1)?)?.with_evidence(0.999)?;
    /// assert_eq!(c.evidence(), 0.999);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_evidence(mut self, evidence: f64) -> Result<Self, ParameterError> {
        if !(evidence > 0.5 && evidence < 1.0) {
            return Err(ParameterError::new(
                "evidence",
                evidence,
                "a probability strictly between 0.5 and 1",
            ));
        }
        self.evidence = evidence;
        self.z = normal_quantile(evidence);
        self.change_thresholds = change_thresholds(evidence);
        Ok(self)
    }

    /// The same controller with the prior `Beta(alpha, beta)` on every
    /// continuation rate; its first choice is recomputed from it.
    ///
    /// # Errors
    ///
    /// [`ParameterError`] unless both are finite and above zero.
    ///
    /// ```
    /// use specdec_metrics::{DraftController, StepCost};
    /// // Expect 90% acceptance per position until data says otherwise.
    /// let c = DraftController::new(8, StepCost::linear(1.0, 0.1)?)?.with_prior(9.0, 1.0)?;
    /// assert!(c.draft_len() > 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_prior(mut self, alpha: f64, beta: f64) -> Result<Self, ParameterError> {
        self.prior = BetaPrior::new(alpha, beta)?;
        self.reset_choice();
        Ok(self)
    }

    /// The same controller never choosing a draft length below
    /// `min_draft_len` (`0..=K`; default 0). With 1, it always speculates:
    /// for a policy whose choice decides whether data keeps coming (a
    /// request state that is never drafted for is never verified and never
    /// leaves its state), or an engine that must not stop drafting. Its
    /// choice is recomputed from what it remembers.
    ///
    /// # Errors
    ///
    /// [`ParameterError`] above `K`.
    ///
    /// ```
    /// use specdec_metrics::{AcceptanceHistogram, DraftController, StepCost};
    /// let mut c = DraftController::new(4, StepCost::linear(1.0, 0.1)?)?.with_min_draft_len(1)?;
    /// let mut window = AcceptanceHistogram::new(4)?;
    /// for _ in 0..5000 {
    ///     window.observe(2, 0)?; // nothing is ever accepted
    /// }
    /// c.update(&window);
    /// assert_eq!(c.draft_len(), 1); // without the floor: 0
    /// assert!(DraftController::new(4, StepCost::linear(1.0, 0.1)?)?.with_min_draft_len(5).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_min_draft_len(mut self, min_draft_len: usize) -> Result<Self, ParameterError> {
        if min_draft_len > self.max_draft_len {
            return Err(ParameterError::new(
                "min_draft_len",
                min_draft_len as f64,
                "a draft length no longer than max_draft_len",
            ));
        }
        self.min_draft_len = min_draft_len;
        self.reset_choice();
        Ok(self)
    }

    /// The same controller deciding only once the windows taken in since
    /// its last decision hold at least `observations` observations (verify
    /// steps plus undrafted steps; default 256); fewer are pooled with the
    /// next windows. `0` decides on every [`update`](Self::update), empty
    /// windows included: evidence counted in calls, as a controller
    /// without this setting would. Every figure of the controller counts
    /// decisions ([`updates`](Self::updates), the memory of
    /// [`with_memory`](Self::with_memory) intervals), so this sets how much
    /// data one remembered interval holds whatever the batch size. An
    /// engine that never reaches it never decides: keep it well below the
    /// observations of a few metrics intervals at the lowest load that
    /// matters. Takes effect from the next window; what is pending stays.
    ///
    /// ```
    /// use specdec_metrics::{AcceptanceHistogram, DraftController, StepCost};
    /// let mut c = DraftController::new(4, StepCost::linear(1.0, 0.1)?)?.with_update_observations(0);
    /// assert_eq!(c.update_observations(), 0);
    /// let mut window = AcceptanceHistogram::new(4)?;
    /// for _ in 0..300 {
    ///     window.observe(2, 0)?;
    /// }
    /// c.update(&window); // decides at once
    /// assert_eq!((c.updates(), c.draft_len()), (1, 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_update_observations(mut self, observations: u64) -> Self {
        self.update_observations = observations;
        self
    }

    /// The fewest observations a decision is made from (see
    /// [`with_update_observations`](Self::with_update_observations)).
    pub fn update_observations(&self) -> u64 {
        self.update_observations
    }

    /// Observations taken in since the last decision, not yet decided on.
    pub fn pending_observations(&self) -> u64 {
        self.pending_observations
    }

    /// The shortest draft length the controller chooses.
    pub fn min_draft_len(&self) -> usize {
        self.min_draft_len
    }

    /// Sets the choice to the best under the current memory, unconditionally.
    fn reset_choice(&mut self) {
        let chain = self.chain();
        let best = best_by_mean_from(&chain, &self.cost, self.min_draft_len);
        self.plan = DraftPlan::new_unchecked(best, self.max_draft_len);
    }

    fn chain(&self) -> Chain {
        Chain::new(
            self.totals.iter().map(|&(s, n)| (s as f64, n as f64)),
            self.prior,
        )
    }

    /// Takes in the histogram of the latest interval (any `K`: only positions
    /// up to the controller's own are used) and, once the windows taken in
    /// since the last decision hold at least
    /// [`update_observations`](Self::update_observations) observations
    /// (verify steps plus undrafted steps, 256 by default), decides from
    /// all of them whether to switch. Call it once per metrics interval,
    /// however many requests the engine runs: the controller counts
    /// evidence in observations, not in calls, so an engine with one
    /// request in flight decides from as much data per decision as one
    /// with 32 (it decides 32 times less often).
    ///
    /// ```
    /// use specdec_metrics::{AcceptanceHistogram, DraftController, StepCost};
    /// let mut c = DraftController::new(4, StepCost::linear(1.0, 0.1)?)?;
    /// let mut window = AcceptanceHistogram::new(4)?;
    /// for _ in 0..200 {
    ///     window.observe(2, 0)?; // nothing is ever accepted
    /// }
    /// c.update(&window); // 200 observations: not enough to decide on
    /// assert_eq!((c.updates(), c.draft_len()), (0, 2));
    /// c.update(&window); // 400, pooled: one decision
    /// assert_eq!(c.draft_len(), 0);
    /// assert_eq!((c.updates(), c.switches()), (1, 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn update(&mut self, window: &AcceptanceHistogram) {
        let observations = window
            .num_spec_steps()
            .saturating_add(window.num_undrafted_steps());
        self.take_in(Continuation::new(window).counts(), observations);
    }

    /// [`update`](Self::update) from a window's continuation counts and
    /// its number of observations.
    pub(crate) fn take_in(&mut self, counts: &[(u64, u64)], observations: u64) {
        for (pending, &(s, n)) in self.pending.iter_mut().zip(counts) {
            // Saturating: counts near u64::MAX are far beyond any engine's
            // lifetime, and a saturated count still decides the same way.
            pending.0 = pending.0.saturating_add(s);
            pending.1 = pending.1.saturating_add(n);
        }
        self.pending_observations = self.pending_observations.saturating_add(observations);
        if self.pending_observations < self.update_observations {
            return;
        }
        let counts = self.pending.to_vec();
        self.pending.fill((0, 0));
        self.pending_observations = 0;
        self.decide(counts);
    }

    /// One decision on `K` continuation counts pooled from one or more
    /// windows.
    fn decide(&mut self, counts: Vec<(u64, u64)>) {
        let k_max = self.max_draft_len;
        if let Some(z2) = self.window_statistic(&counts) {
            // The threshold for a dispersion that is the median of the
            // earlier statistics.
            if z2 / self.dispersion > self.change_threshold() {
                self.ring.fill((0, 0));
                self.totals.fill((0, 0));
                self.regime_changes += 1;
                self.held = 0;
            }
        }
        if let Some(r) = self.trend_residual(&counts) {
            self.record_dispersion(r / chi_square_1_median());
        }
        if self.history.len() >= self.memory().max(2) {
            self.history.pop_front();
        }
        self.history.push_back(counts.clone().into_boxed_slice());
        let old = &mut self.ring[self.slot * k_max..(self.slot + 1) * k_max];
        for ((total, slot), &new) in self.totals.iter_mut().zip(old.iter_mut()).zip(&counts) {
            // The ring's entries are part of the totals, which are exact, so
            // the subtraction never wraps.
            total.0 = total.0 - u128::from(slot.0) + u128::from(new.0);
            total.1 = total.1 - u128::from(slot.1) + u128::from(new.1);
            *slot = new;
        }
        self.slot = (self.slot + 1) % self.memory();
        self.updates += 1;

        self.held += 1;
        let chain = self.chain();
        let mut current = self.plan.draft_len();
        if let Some(next) = self.better_than(&chain, current) {
            current = next;
            self.switches += 1;
            self.held = 0;
        }
        let explore = self.exploration_len(&chain, current);
        self.plan = DraftPlan::with_explore_len_unchecked(current, explore);
    }

    /// How far exploration steps draft when the choice is `c`: `min(2c + 1,
    /// K)`, or further when the remembered rates say a longer draft could
    /// pay: the length that would be best if every position beyond the last
    /// one with trials continued at that position's posterior mean rate.
    /// That continuation is a guess, used only to decide where to look; no
    /// estimate is made from it. It lets the choice reach a far optimum in
    /// two steps after a change (one to the best length the data shows, one
    /// to the best the exploration then shows) instead of doubling its way
    /// there.
    fn exploration_len(&self, chain: &Chain, c: usize) -> usize {
        let k_max = self.max_draft_len;
        let doubling = (2 * c + 1).min(k_max);
        let Some(last) = self.totals.iter().rposition(|&(_, n)| n > 0) else {
            return doubling;
        };
        let (s, n) = self.totals[last];
        // Optimistic: the upper end of the rate's interval at the evidence
        // level, so a rate estimated from few trials does not stop the
        // exploration short of where the optimum may be.
        let rate = self.prior.posterior(s as f64, n as f64).interval(self.z)[1];
        // E[a | k] on the data up to position `last + 1`, then at `rate`.
        let (mut expected, mut product) = (
            chain.mean(last + 1),
            chain.mean(last + 1) - chain.mean(last),
        );
        let mut best = (last + 1, goodput_of(expected, &self.cost, last + 1));
        for k in last + 2..=k_max {
            product *= rate;
            expected += product;
            let g = goodput_of(expected, &self.cost, k);
            if g > best.1 {
                best = (k, g);
            }
        }
        doubling.max(best.0).max(c.max(1))
    }

    /// How far the latest interval is from the memory, in the one figure
    /// that sums up what the choice depends on: the expected accepted drafts
    /// at the exploration length `e` (which covers every position with
    /// regular data). The squared difference of the two posterior means over
    /// the sum of their variances: about chi-square with one degree of
    /// freedom (times the dispersion) when nothing changed. `None` when the
    /// memory or the interval has no trial at position 1.
    fn window_statistic(&self, counts: &[(u64, u64)]) -> Option<f64> {
        if counts.first().is_none_or(|c| c.1 == 0) || self.totals.first().is_none_or(|c| c.1 == 0) {
            return None;
        }
        // Up to the last position the memory has trials at: beyond it the
        // memory's figure is the prior's, and a window that measures such a
        // position (the exploration reaching further after a switch) has
        // not changed from anything; that read as a change of regime on the
        // update after a first switch (a window with no trial there leans on
        // the prior's wide variance instead, which only dilutes the test).
        let e = self
            .plan
            .explore_len()
            .min(self.totals.iter().take_while(|c| c.1 > 0).count());
        let window = Chain::from_counts(&counts[..e], self.prior);
        let memory = Chain::new(
            self.totals[..e].iter().map(|&(s, n)| (s as f64, n as f64)),
            self.prior,
        );
        let diff = window.mean(e) - memory.mean(e);
        let var = window.variance(e) + memory.variance(e);
        (var > 0.0).then(|| diff * diff / var)
    }

    /// The noise of the intervals, a steady drift removed: how far the
    /// latest interval's figure (its own posterior mean of `E[a | e]`, as
    /// in [`window_statistic`](Self::window_statistic)) is from the straight
    /// line fitted by least squares through the figures of the intervals
    /// before it, extended one interval; squared, over its variance under
    /// binomial noise (`v + sum w_j^2 v_j`, `w_j` the line's weights). About
    /// chi-square with one degree of freedom times the dispersion whether
    /// acceptance holds still or drifts steadily, so a drift is not
    /// mistaken for noise (it is a change the memory must follow); with two
    /// earlier intervals it is their second difference. `None` until two
    /// earlier intervals with trials at position 1 are known.
    fn trend_residual(&self, counts: &[(u64, u64)]) -> Option<f64> {
        // The figure at a length every interval has trials up to, so that
        // no interval's figure leans on the prior where another's has data.
        let reached = |counts: &[(u64, u64)]| counts.iter().take_while(|c| c.1 > 0).count();
        let e = self
            .history
            .iter()
            .map(|c| reached(c))
            .fold(reached(counts), usize::min)
            .min(self.plan.explore_len());
        if e == 0 {
            return None;
        }
        let figure = |counts: &[(u64, u64)]| {
            (counts.first()?.1 > 0).then(|| {
                let chain = Chain::from_counts(&counts[..e], self.prior);
                (chain.mean(e), chain.variance(e))
            })
        };
        let (x, v) = figure(counts)?;
        let earlier: Vec<(f64, f64)> = self
            .history
            .iter()
            .skip(self.history.len().saturating_sub(TREND_WINDOWS))
            .filter_map(|c| figure(c))
            .collect();
        let m = earlier.len();
        if m < 2 {
            return None;
        }
        // The line through (j, x_j), j = 0..m, read at j = m: weights
        // w_j = 1/m + (m - t)(j - t) / S, t the mean index, S the sum of
        // (j - t)^2.
        let t = (m as f64 - 1.0) / 2.0;
        let spread: f64 = (0..m).map(|j| (j as f64 - t).powi(2)).sum();
        let (mut predicted, mut var) = (0.0, v);
        for (j, &(xj, vj)) in earlier.iter().enumerate() {
            let w = 1.0 / m as f64 + (m as f64 - t) * (j as f64 - t) / spread;
            predicted += w * xj;
            var += w * w * vj;
        }
        let d = x - predicted;
        (var > 0.0).then(|| d * d / var)
    }

    /// Adds one interval's statistic over its median under binomial noise (about 1
    /// without extra variability, about the variance ratio with it) to the
    /// history, and sets the dispersion to the history's median, at least 1.
    /// The median ignores the rare interval that starts a new regime.
    fn record_dispersion(&mut self, ratio: f64) {
        let len = self.dispersion_history.len();
        self.dispersion_history[self.dispersion_slot % len] = ratio;
        self.dispersion_slot += 1;
        let filled = self.dispersion_slot.min(len);
        let mut sorted = self.dispersion_history[..filled].to_vec();
        sorted.sort_by(f64::total_cmp);
        let median = if filled % 2 == 1 {
            sorted[filled / 2]
        } else {
            (sorted[filled / 2 - 1] + sorted[filled / 2]) / 2.0
        };
        self.dispersion = median.max(1.0);
    }

    /// The normal quantile a switch must pass: `z` at the evidence level
    /// while the current choice is in its first [`HELD_SPAN`] `memory`
    /// updates, and at level `(1 - evidence) / n^2` in its `n`-th span of
    /// that many updates.
    ///
    /// Each update tests the held choice again, on a memory that overlaps
    /// the one before by all but one interval; at one level for every test
    /// a choice held for long is moved by noise sooner or later (a near-tie
    /// flipped back and forth once every few hundred updates). Spending the
    /// error over the spans instead (each span's data is new) keeps the sum
    /// of the levels at `(1 - evidence) pi^2 / 6` (1.6% at 0.99), however
    /// long a choice is held. The price is a stricter test for a choice held
    /// long: 3.6 instead of 2.3 standard deviations after 8 spans at 0.99,
    /// 4.2 after 30. A change of regime restarts the count (its memory is
    /// new), so a change is still followed at the first update's evidence
    /// level.
    fn switch_z(&self) -> f64 {
        let span_len = HELD_SPAN * self.memory() as u64;
        let span = (self.held.saturating_sub(1) / span_len).saturating_add(1);
        if span == 1 {
            return self.z;
        }
        let level = (1.0 - self.evidence) / (span as f64 * span as f64);
        // The upper quantile through the lower one: `1 - level` would round
        // a small level away.
        -normal_quantile(level)
    }

    /// The draft length with the highest mean goodput among those whose
    /// goodput beats `current`'s at the evidence level; `None` if none does.
    fn better_than(&self, chain: &Chain, current: usize) -> Option<usize> {
        let mut cov = Vec::with_capacity(self.max_draft_len + 1);
        chain.covariances_with(current, &mut cov);
        // The posterior variance assumes binomial noise; intervals that vary
        // more than that widen it by the dispersion (quasi-likelihood).
        let z = self.switch_z();
        let z2 = z * z * self.dispersion;
        // Every length that beats the current one at the evidence level.
        let beats: Vec<(usize, f64)> = cov
            .iter()
            .enumerate()
            .filter(|&(k, _)| k != current && k >= self.min_draft_len)
            .filter_map(|(k, &cov_k)| {
                let d = GoodputDifference::new(chain, &self.cost, k, current, cov_k);
                (d.mean > 0.0 && d.mean * d.mean >= z2 * d.variance)
                    .then(|| (k, goodput(chain, &self.cost, k)))
            })
            .collect();
        // The one with the highest mean goodput, the shorter on a tie.
        let &(best, _) = beats.iter().reduce(|a, b| if b.1 > a.1 { b } else { a })?;
        // `beats` never holds `current`, so `best <= current` would be the
        // same test.
        if best < current {
            return Some(best);
        }
        // Climbing: of those, the longest the evidence cannot tell from the
        // best. On a flat top several lengths are as good as the best; the
        // longest drafts every position the others do, so the positions it
        // adds are measured on every step from now on, and the choice does
        // not creep up one length at a time as exploration measures them.
        chain.covariances_with(best, &mut cov);
        let longest = beats
            .iter()
            .map(|&(k, _)| k)
            // `k >= best` would be the same: `best` differs from itself by
            // nothing, `0 < 0` is false, and it is the fallback anyway.
            .filter(|&k| k > best)
            .filter(|&k| {
                let d = GoodputDifference::new(chain, &self.cost, best, k, cov[k]);
                d.mean * d.mean < z2 * d.variance
            })
            .max()
            .unwrap_or(best);
        Some(longest)
    }

    /// The draft length for engine step `step`: the current choice, or the
    /// exploration length on one step in
    /// [`EXPLORATION_PERIOD`](crate::EXPLORATION_PERIOD). Never
    /// above `K`; no allocation, no lock.
    #[inline]
    pub fn draft_len_for(&self, step: u64) -> usize {
        self.plan.draft_len_for(step)
    }

    /// The current choice.
    pub fn draft_len(&self) -> usize {
        self.plan.draft_len()
    }

    /// The current plan (choice and exploration length), to hand to engine
    /// threads.
    pub fn plan(&self) -> DraftPlan {
        self.plan
    }

    /// The maximum draft length `K`.
    pub fn max_draft_len(&self) -> usize {
        self.max_draft_len
    }

    /// Intervals remembered.
    pub fn memory(&self) -> usize {
        self.ring.len() / self.max_draft_len
    }

    /// The evidence level a switch needs.
    pub fn evidence(&self) -> f64 {
        self.evidence
    }

    /// Decisions so far: updates that held enough observations (see
    /// [`update`](Self::update)), not calls.
    pub fn updates(&self) -> u64 {
        self.updates
    }

    /// Switches of the draft length so far.
    pub fn switches(&self) -> u64 {
        self.switches
    }

    /// Times the latest interval was incompatible with the memory, which was
    /// then forgotten.
    pub fn regime_changes(&self) -> u64 {
        self.regime_changes
    }

    /// How much more the remembered intervals vary than binomial noise
    /// explains (1: not at all); posterior variances are widened by it.
    pub fn dispersion(&self) -> f64 {
        self.dispersion
    }

    /// The threshold the next update's change-of-regime statistic, over
    /// the dispersion, must pass for the memory to be forgotten: the
    /// `evidence` quantile of that ratio on a steady engine, which depends
    /// on how many earlier intervals the dispersion was estimated from (the
    /// chi-square quantile with none, 6.63 at 0.99; 16.4 with the full
    /// history of 9).
    fn change_threshold(&self) -> f64 {
        self.change_thresholds[self.dispersion_slot.min(DISPERSION_HISTORY)]
    }

    /// What the controller decides on: the continuation counts `(s_i, n_i)`
    /// of the intervals it remembers, summed (saturating at `u64::MAX`).
    ///
    /// ```
    /// use specdec_metrics::{AcceptanceHistogram, DraftController, StepCost};
    /// let mut c = DraftController::new(2, StepCost::linear(1.0, 0.1)?)?;
    /// let mut window = AcceptanceHistogram::new(2)?;
    /// for _ in 0..128 {
    ///     window.observe(2, 1)?;
    /// }
    /// c.update(&window);
    /// assert_eq!(c.remembered().counts(), &[(0, 0), (0, 0)]); // 128: pending
    /// c.update(&window);
    /// assert_eq!(c.remembered().counts(), &[(256, 256), (0, 256)]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn remembered(&self) -> Continuation {
        let saturate = |x: u128| u64::try_from(x).unwrap_or(u64::MAX);
        Continuation::from_counts(
            self.totals
                .iter()
                .map(|&(s, n)| (saturate(s), saturate(n)))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Beta(1, 1) posterior moments of a rate with `s` successes in `n`
    /// trials: (mean, E[h^2]).
    fn beta_moments(s: u64, n: u64) -> (f64, f64) {
        let (a, b) = (1.0 + s as f64, 1.0 + (n - s) as f64);
        let m = a / (a + b);
        (m, m * (a + 1.0) / (a + b + 1.0))
    }

    /// The standard normal distribution function (Abramowitz and Stegun
    /// 7.1.26, absolute error below 1.5e-7), written apart from the library's.
    fn phi(x: f64) -> f64 {
        let z = x.abs() / std::f64::consts::SQRT_2;
        let t = 1.0 / (1.0 + 0.327_591_1 * z);
        let poly = t
            * (0.254_829_592
                + t * (-0.284_496_736
                    + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
        let erfc = poly * (-z * z).exp();
        if x >= 0.0 {
            1.0 - erfc / 2.0
        } else {
            erfc / 2.0
        }
    }

    /// The threshold of the change test at evidence 0.99 when the dispersion is
    /// the median of `n` earlier statistics, computed independently of the
    /// library: `P(X > q M / m0) = 0.01` for `X` chi-square (1 degree of
    /// freedom) and `M` the median of `n` more (of `n - 1` for an even `n`),
    /// integrated over `y = sqrt(M)` with Simpson's rule (the library
    /// integrates over the median's quantile instead); `n <= 2` is the F(1, 1)
    /// quantile, `n = 0` the chi-square quantile.
    fn change_threshold_099(n: usize) -> f64 {
        const M0: f64 = 0.454_936_423;
        match n {
            0 => return 6.634_896_601,
            1 | 2 => return M0 * 4_052.180_695,
            _ => {}
        }
        let r = ((n - 1) / 2) as i32;
        // The density of sqrt(M) for M the median of 2r + 1 chi-square(1):
        // (2r+1)!/(r!)^2 G^r (1 - G)^r g, with G(y) = 2 Phi(y) - 1 and
        // g(y) = 2 phi'(y), up to the constant (normalized numerically).
        let tail = |q: f64| {
            let (steps, top) = (4000, 9.0);
            let h = top / steps as f64;
            let (mut num, mut den) = (0.0, 0.0);
            for i in 0..=steps {
                let y = i as f64 * h;
                let w = if i == 0 || i == steps {
                    1.0
                } else if i % 2 == 1 {
                    4.0
                } else {
                    2.0
                };
                let g = 2.0 * phi(y) - 1.0;
                let density = (g * (1.0 - g)).powi(r) * (-y * y / 2.0).exp();
                num += w * density * 2.0 * (1.0 - phi(y * (q / M0).sqrt()));
                den += w * density;
            }
            num / den
        };
        let (mut lo, mut hi) = (1.0f64, 1e4f64);
        for _ in 0..60 {
            let mid = (lo * hi).sqrt();
            if tail(mid) > 0.01 { lo = mid } else { hi = mid }
        }
        lo
    }

    /// The change-of-regime statistic and the dispersion against an independent
    /// computation for K = 1 (exploration length 1): `d^2 / (v_w + v_m)` with
    /// Beta(1, 1) posteriors of the window and of the memory; the dispersion is
    /// the median of the last 9 trend residuals (the window against the line
    /// through the up to 4 intervals before it, over its binomial variance)
    /// over 0.45494 (the median of chi-square with one degree of freedom),
    /// at least 1; the memory is
    /// forgotten when the statistic over the dispersion before it passes the
    /// 0.99 quantile of that ratio when nothing changed, which depends on how
    /// many statistics the dispersion is the median of
    /// ([`change_threshold_099`]).
    #[test]
    fn change_statistic_and_dispersion_by_hand() {
        let windows: [(u64, u64); 14] = [
            (50, 100),
            (55, 100),
            (45, 100),
            (70, 100),
            (52, 100),
            (48, 100),
            (60, 100),
            (40, 100),
            (51, 100),
            (90, 100),
            (10, 100),
            (50, 100),
            (49, 100),
            (53, 100),
        ];
        // Windows of 100 observations, each decided on alone.
        let mut c = DraftController::new(1, StepCost::linear(1.0, 0.01).unwrap())
            .unwrap()
            .with_memory(4)
            .unwrap()
            .with_update_observations(0);
        let mut memory: Vec<(u64, u64)> = Vec::new();
        let mut seen: Vec<(u64, u64)> = Vec::new();
        let mut history: Vec<f64> = Vec::new();
        let mut dispersion = 1.0;
        let mut changes = 0;
        for &(s, n) in &windows {
            let (s_m, n_m) = memory.iter().fold((0, 0), |t, w| (t.0 + w.0, t.1 + w.1));
            // The threshold the controller will use, against the independent
            // computation (two quadratures of the same integral, which agree
            // within 0.2%: the library's 128 points are coarse where the
            // median is large).
            let expected = change_threshold_099(history.len().min(9));
            assert!(
                (c.change_threshold() - expected).abs() <= 5e-3 * expected,
                "threshold with {} earlier statistics: {} vs {expected}",
                history.len(),
                c.change_threshold()
            );
            if n_m > 0 {
                let (mw, qw) = beta_moments(s, n);
                let (mm, qm) = beta_moments(s_m, n_m);
                let z2 = (mw - mm).powi(2) / ((qw - mw * mw) + (qm - mm * mm));
                if z2 / dispersion > change_threshold_099(history.len().min(9)) {
                    memory.clear();
                    changes += 1;
                }
            }
            let earlier = &seen[seen.len().saturating_sub(4)..];
            if earlier.len() >= 2 {
                // Posterior mean and variance of h_1 under Beta(1, 1).
                let figure = |(s, n): (u64, u64)| {
                    let m = (s as f64 + 1.0) / (n as f64 + 2.0);
                    (m, m * (1.0 - m) / (n as f64 + 3.0))
                };
                let m = earlier.len() as f64;
                let t = (m - 1.0) / 2.0;
                let spread: f64 = (0..earlier.len()).map(|j| (j as f64 - t).powi(2)).sum();
                let (x, v) = figure((s, n));
                let (mut predicted, mut var) = (0.0, v);
                for (j, &w) in earlier.iter().enumerate() {
                    let (xj, vj) = figure(w);
                    let weight = 1.0 / m + (m - t) * (j as f64 - t) / spread;
                    predicted += weight * xj;
                    var += weight * weight * vj;
                }
                history.push((x - predicted).powi(2) / var / 0.454_936_423);
                let mut last: Vec<f64> = history.iter().rev().take(9).copied().collect();
                last.sort_by(f64::total_cmp);
                let mid = last.len() / 2;
                let median = if last.len() % 2 == 1 {
                    last[mid]
                } else {
                    (last[mid - 1] + last[mid]) / 2.0
                };
                dispersion = median.max(1.0);
            }
            seen.push((s, n));
            memory.push((s, n));
            if memory.len() > 4 {
                memory.remove(0);
            }
            let mut window = AcceptanceHistogram::new(1).unwrap();
            for i in 0..n {
                window.observe(1, usize::from(i < s)).unwrap();
            }
            c.update(&window);
            let remembered = memory.iter().fold((0, 0), |t, w| (t.0 + w.0, t.1 + w.1));
            assert_eq!(c.remembered().counts(), &[remembered]);
            assert!(
                (c.dispersion() - dispersion).abs() <= 1e-9 * dispersion,
                "{} vs {dispersion}",
                c.dispersion()
            );
            assert_eq!(c.regime_changes(), changes);
        }
        // The example exercises what it is about: the dispersion rose above 1
        // and the jumps to 90% and 10% were changes of regime.
        assert!(
            dispersion > 1.0 && changes >= 2,
            "dispersion {dispersion}, {changes} changes"
        );
    }

    /// The thresholds of every history length, at 0.99, against the
    /// independent quadrature.
    #[test]
    fn change_thresholds_match_an_independent_quadrature() {
        let thresholds = change_thresholds(0.99);
        for (n, &t) in thresholds.iter().enumerate() {
            let expected = change_threshold_099(n);
            assert!(
                (t - expected).abs() <= 5e-3 * expected,
                "{n} earlier statistics: {t} vs {expected}"
            );
        }
    }

    /// Windows whose counts are near `u64::MAX` used to make the memory
    /// subtraction overflow (a panic in debug builds, more successes than
    /// trials in release builds); the totals are exact now.
    #[test]
    fn windows_near_u64_max_never_overflow_the_memory() {
        let mut c = DraftController::new(1, StepCost::linear(1.0, 0.1).unwrap())
            .unwrap()
            .with_memory(2)
            .unwrap();
        let huge = |s: u64, n: u64| {
            AcceptanceHistogram::from_parts(
                1,
                vec![0, n - s, s].into_boxed_slice(),
                0,
                0,
                vec![0, 0].into_boxed_slice(),
            )
        };
        for round in 0..6u64 {
            c.update(&huge(u64::MAX - 1 - round, u64::MAX - round));
            let (s, n) = c.remembered().at(1);
            assert!(s <= n, "round {round}: {s} successes in {n} trials");
            assert_eq!(n, u64::MAX, "two huge intervals saturate the sum");
        }
        assert_eq!(c.memory(), 2);
    }

    /// A controller over the cost table `costs` (entry `k` for `k =
    /// 0..=K`) whose memory holds the continuation counts `counts` (position
    /// 1 first) and whose intervals vary as binomial noise does.
    fn remembering(costs: &[f64], counts: &[(u128, u128)]) -> DraftController {
        let table = StepCost::table(costs.to_vec()).unwrap();
        let mut c = DraftController::new(costs.len() - 1, table).unwrap();
        c.totals.copy_from_slice(counts);
        c
    }

    /// What `better_than` says of `current` on the memory.
    fn better(c: &DraftController, current: usize) -> Option<usize> {
        c.better_than(&c.chain(), current)
    }

    /// The difference of goodputs `g(k) - g(c)` on the memory.
    fn difference(c: &DraftController, k: usize, current: usize) -> GoodputDifference {
        let chain = c.chain();
        let mut cov = Vec::new();
        chain.covariances_with(current, &mut cov);
        GoodputDifference::new(&chain, &c.cost, k, current, cov[k])
    }

    /// Many trials: a rate known to far better than any test needs.
    const MANY: u128 = 1 << 40;
    /// So many trials that a position never accepted adds less than an
    /// `f64`'s precision to the expected acceptance: lengths that differ
    /// only by it accept exactly as much.
    const ALL: u128 = 1 << 100;

    /// The level is spent span by span: `z` for the first `2 memory`
    /// updates a choice is held, then the upper quantile of `(1 -
    /// evidence) / n^2` in the `n`-th span, always positive (a test level,
    /// not its lower tail).
    #[test]
    fn a_held_choice_is_tested_at_a_level_spent_span_by_span() {
        for memory in [1, 3, 8] {
            let mut c = DraftController::new(4, StepCost::linear(1.0, 0.1).unwrap())
                .unwrap()
                .with_memory(memory)
                .unwrap();
            let span_len = 2 * memory as u64;
            let upper = |level: f64| normal_quantile(1.0 - level);
            for held in 0..=7 * span_len {
                c.held = held;
                let span = if held == 0 {
                    1
                } else {
                    (held - 1) / span_len + 1
                };
                let expected = if span == 1 {
                    c.z
                } else {
                    upper(0.01 / (span * span) as f64)
                };
                let z = c.switch_z();
                assert!(z > 0.0, "memory {memory}, held {held}: {z}");
                // `normal_quantile` is within 1.2e-9 relative.
                assert!(
                    (z - expected).abs() <= 1e-6 * expected,
                    "memory {memory}, held {held}: {z} against {expected} (span {span})"
                );
            }
            // Three spans in: 3.06 standard deviations (the first span's
            // 2.33, the second's 2.81, the fourth's 3.23).
            c.held = 2 * span_len + 1;
            assert!((c.switch_z() - 3.059).abs() < 1e-3, "{}", c.switch_z());
        }
    }

    /// A choice held across spans switches only on the evidence of its
    /// span: a difference that passes at 2.33 standard deviations but not
    /// at the third span's 3.06 moves a fresh choice and not one held for
    /// two spans.
    #[test]
    fn a_choice_held_across_spans_needs_more_evidence_to_move() {
        // Position 1 accepts 0.5 of many trials, position 2 0.5 of 400;
        // drafting 2 costs a little more than drafting 1, and pays off by
        // about 2.6 standard deviations.
        let mut c = remembering(&[1.0, 1.0, 1.145], &[(MANY / 2, MANY), (200, 400)]);
        let d = difference(&c, 2, 1);
        let sd = d.variance.sqrt();
        assert!(d.mean > 2.4 * sd && d.mean < 3.0 * sd, "{} sd", d.mean / sd);
        c.held = 1;
        assert_eq!(better(&c, 1), Some(2));
        c.held = 2 * c.memory() as u64; // the last update of the first span
        assert_eq!(better(&c, 1), Some(2));
        c.held = 4 * c.memory() as u64 + 1; // the first of the third
        assert_eq!(better(&c, 1), None);
    }

    /// Of the lengths that beat the current one, the best by mean goodput,
    /// the shorter on an exact tie, is taken when it is shorter than the
    /// current one: no climbing down past it.
    #[test]
    fn a_shorter_best_is_taken_the_shorter_on_a_tie() {
        // Position 1 accepts half, position 2 almost never: drafting 1 and
        // 2 give the same expected acceptance (in `f64`) at the same cost,
        // an exact tie; drafting 4 costs ten times as much.
        let c = remembering(
            &[1.0, 1.0, 1.0, 10.0, 10.0],
            &[(MANY / 2, MANY), (0, ALL), (0, 0), (0, 0)],
        );
        let chain = c.chain();
        assert_eq!(goodput(&chain, &c.cost, 1), goodput(&chain, &c.cost, 2));
        assert!(difference(&c, 2, 4).mean > 0.0);
        assert_eq!(better(&c, 4), Some(1));
    }

    /// When the best is shorter than the current choice it is taken as it
    /// is, even when a longer length that also beats the current one cannot
    /// be told from it (climbing is for a best above the current choice).
    #[test]
    fn a_shorter_best_is_not_climbed_from() {
        // 1 is best; 2, at a slightly higher cost, is as good within the
        // uncertainty of position 2's few trials; 4 is far worse.
        let c = remembering(
            &[1.0, 1.0, 1.15, 10.0, 10.0],
            &[(MANY / 2, MANY), (2, 6), (0, 0), (0, 0)],
        );
        let chain = c.chain();
        assert!(goodput(&chain, &c.cost, 1) > goodput(&chain, &c.cost, 2));
        let d = difference(&c, 1, 2);
        assert!(
            d.mean * d.mean < c.z * c.z * d.variance,
            "2 is as good as 1"
        );
        assert!(difference(&c, 2, 4).mean > 0.0);
        assert_eq!(better(&c, 4), Some(1));
    }

    /// Climbing a flat top: of the lengths that beat the current choice,
    /// the longest that cannot be told from the best, not the best itself
    /// and not a longer one the evidence shows worse than the best.
    #[test]
    fn a_flat_top_is_climbed_to_its_longest_equivalent_length() {
        // 0 is the current choice. 2 is the best; 3 adds a position of
        // few trials at a little more cost, as good within its
        // uncertainty; 4 adds one that is never accepted at half as much
        // again: clearly worse than 2, still better than not drafting.
        let c = remembering(
            &[1.0, 1.0, 1.0, 1.1, 1.5],
            &[(MANY / 2, MANY), (MANY / 2, MANY), (2, 5), (0, ALL)],
        );
        let z2 = c.z * c.z;
        for k in [2, 3, 4] {
            let d = difference(&c, k, 0);
            assert!(
                d.mean > 0.0 && d.mean * d.mean >= z2 * d.variance,
                "{k} beats 0"
            );
        }
        let chain = c.chain();
        let g = |k| goodput(&chain, &c.cost, k);
        assert!(g(2) > g(3) && g(2) > g(4), "2 is the best");
        let flat = difference(&c, 2, 3);
        assert!(
            flat.mean * flat.mean < z2 * flat.variance,
            "3 is as good as 2"
        );
        let worse = difference(&c, 2, 4);
        assert!(worse.mean * worse.mean >= z2 * worse.variance, "4 is worse");
        assert_eq!(better(&c, 0), Some(3));
    }

    /// A length that ties the current choice exactly (the same expected
    /// acceptance to the last bit at the same cost, nothing uncertain
    /// between them) does not beat it: a switch needs a gain.
    #[test]
    fn an_exact_tie_with_the_current_choice_is_no_switch() {
        let c = remembering(&[1.0, 1.0, 1.0], &[(MANY / 2, MANY), (0, ALL)]);
        let d = difference(&c, 2, 1);
        assert_eq!((d.mean, d.variance), (0.0, 0.0));
        assert_eq!(better(&c, 1), None);
        assert_eq!(better(&c, 2), None);
    }

    /// Intervals that vary more than chance widen the test by the
    /// dispersion (a factor on the variance): a gain of about 4 standard
    /// deviations under binomial noise switches at dispersion 1 and not at
    /// dispersion 4, where it is 2 (the test needs 2.33).
    #[test]
    fn the_dispersion_widens_the_switching_test() {
        let mut c = remembering(&[1.0, 1.0, 1.133], &[(MANY / 2, MANY), (200, 400)]);
        let d = difference(&c, 2, 1);
        let sd = d.variance.sqrt();
        assert!(d.mean > 3.3 * sd && d.mean < 4.5 * sd, "{} sd", d.mean / sd);
        c.held = 1;
        assert_eq!(better(&c, 1), Some(2));
        c.dispersion = 4.0;
        assert_eq!(better(&c, 1), None);
    }

    /// Lengths below the floor never beat the current choice, however
    /// much better they are.
    #[test]
    fn no_length_below_the_floor_is_chosen() {
        // Nothing is ever accepted: not drafting is best, then 1.
        let c = remembering(&[1.0, 1.1, 1.2, 1.3], &[(0, MANY), (0, MANY), (0, MANY)])
            .with_min_draft_len(1)
            .unwrap();
        assert_eq!(better(&c, 3), Some(1));
    }

    /// Climbing stops at an exact tie known for certain: a longer length
    /// whose added position is never accepted, at the same cost, adds
    /// nothing the evidence could still find, and the shorter is taken.
    #[test]
    fn climbing_stops_at_an_exact_tie_known_for_certain() {
        let c = remembering(
            &[1.0, 1.1, 1.2, 1.2],
            &[(MANY / 2, MANY), (MANY / 2, MANY), (0, ALL)],
        );
        let d = difference(&c, 2, 3);
        assert_eq!((d.mean, d.variance), (0.0, 0.0));
        assert!(difference(&c, 3, 0).mean > 0.0);
        assert_eq!(better(&c, 0), Some(2));
    }
}
