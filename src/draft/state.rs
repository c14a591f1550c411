//! Drafting per request state: [`RequestState`] (what a request keeps),
//! [`StateController`] (a draft length per state), [`StatePlan`] and
//! [`SharedStatePlan`] (the plan engine threads read in one load).

use super::continuation::Continuation;
use super::controller::{DEFAULT_UPDATE_OBSERVATIONS, DraftController};
use super::cost::StepCost;
use super::error::ParameterError;
use super::plan::{DraftPlan, EXPLORATION_PERIOD};
#[cfg(doc)]
use super::space::StateSpace;
use super::table::SharedStateTable;
use crate::record::ConfigError;
use crate::record::MAX_MAX_DRAFT_LEN;
use crate::record::sync::{AtomicU64, Ordering};
use crate::{AcceptanceHistogram, MAX_STATES};

/// Fixed-point one: a score of `SCALE` is an acceptance of 100%.
const SCALE: i32 = 1 << 14;
/// The score's exponential weight on the newest verify step is
/// `1 / 2^SHIFT`: 1/4, a memory of about four steps.
const SHIFT: u32 = 2;
/// The bit of [`RequestState`]'s word that says the request's latest step
/// proposed no draft ([`RequestState::after_undrafted`]); the score
/// (`0..=SCALE`, 15 bits) lives below it.
const UNDRAFTED: u16 = 1 << 15;
/// The score's bits.
const SCORE_MASK: u16 = UNDRAFTED - 1;
/// The most recent-acceptance levels a [`RequestState::level`] splits the
/// score into (a [`StateSpace`](crate::StateSpace) accepts `1..=16`).
pub(crate) const MAX_LEVELS: usize = 16;

/// What a request knows about how well its drafts have been doing lately:
/// an exponentially weighted score of its recent acceptance (each verify
/// step weighs 1/4, so the score forgets a step in about four), in
/// [`COUNT`](Self::COUNT) levels. A step's acceptance is the share of the
/// positions the verifier reached that it accepted: `accepted / min(drafted,
/// accepted + 1)`, the request's own continuation rate, which does not fall
/// just because drafts got longer (accepted over drafted would: a request
/// accepting 80% per position scores 0.72 at a draft of 2 and 0.49 at 6,
/// and a state would then mean something else under another plan).
///
/// Measured in the simulator (`sim/README.md`, "What a request's state
/// should be"): on requests that switch between an easy and a hard
/// condition every few tens of steps, this score in four levels earned
/// 1.5 to 2 points of goodput more than the same score of accepted over
/// drafted, and more than weights 1/2 and 1/8 and than the previous
/// step's outcome in three levels, except on the fastest switching (weight
/// 1/2 leads there by under a point); on independent acceptance and on
/// requests of fixed kinds all rules tie. A small `Copy` value the engine keeps
/// with the request and replaces after each verify step; no sharing, no
/// atomics.
///
/// Acceptance comes in runs: a request alternates between stretches its
/// drafts predict well (boilerplate, text copied from the prompt) and
/// stretches they do not. A request's recent acceptance predicts its next
/// step, so a draft length chosen per state ([`StateController`]) follows
/// the runs where one length for the whole batch cannot.
///
/// An engine that knows a request's kind (an adapter, an endpoint) can
/// start it where that kind usually is ([`with_score`](Self::with_score),
/// for example the kind's mean acceptance) instead of in the middle.
///
/// ```
/// use specdec_metrics::RequestState;
/// let mut state = RequestState::new();
/// assert_eq!(state.index(), 2); // the middle: score 1/2
/// for _ in 0..8 {
///     state = state.after(4, 4); // every draft accepted
/// }
/// assert_eq!(state.index(), RequestState::COUNT - 1);
/// for _ in 0..8 {
///     state = state.after(4, 0); // nothing accepted
/// }
/// assert_eq!(state.index(), 0);
/// // 3 of 6 accepted: 3 of the 4 positions reached.
/// assert_eq!(RequestState::new().after(6, 3).score(), 0.5 + (0.75 - 0.5) / 4.0);
/// assert_eq!(state.after(0, 0), state); // no draft, no news
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RequestState {
    /// Bits 0..15: the weighted acceptance, fixed point, `0..=SCALE`; bit
    /// 15 ([`UNDRAFTED`]): the latest step proposed no draft.
    score: u16,
}

impl Default for RequestState {
    fn default() -> Self {
        Self::new()
    }
}

impl RequestState {
    /// The number of states: [`index`](Self::index) is in `0..COUNT`.
    pub const COUNT: usize = 4;

    /// A new request's state: score 1/2, the middle.
    pub const fn new() -> Self {
        Self {
            score: (SCALE / 2) as u16,
        }
    }

    /// A request starting at acceptance `score` (clamped to `[0, 1]`; NaN
    /// reads as 1/2), for an engine that knows what the request's kind
    /// usually accepts.
    ///
    /// ```
    /// use specdec_metrics::RequestState;
    /// assert_eq!(RequestState::with_score(0.9).index(), 3);
    /// assert_eq!(RequestState::with_score(0.1).index(), 0);
    /// assert_eq!(RequestState::with_score(f64::NAN), RequestState::new());
    /// ```
    pub fn with_score(score: f64) -> Self {
        if score.is_nan() {
            return Self::new();
        }
        Self {
            score: (score.clamp(0.0, 1.0) * f64::from(SCALE)).round() as u16,
        }
    }

    /// The state after a verify step that drafted `drafted` tokens and
    /// accepted `accepted` of them (clamped to `drafted`): the score moves a
    /// quarter of the way to `accepted / tested`, `tested = min(drafted,
    /// accepted + 1)` the positions the verifier reached. A step that
    /// drafted nothing leaves it unchanged. Any counts are accepted and
    /// never panic: the arithmetic is exact up to `usize::MAX`.
    ///
    /// ```
    /// use specdec_metrics::RequestState;
    /// let state = RequestState::new();
    /// assert_eq!(state.after(usize::MAX, usize::MAX), state.after(4, 4));
    /// assert_eq!(state.after(1 << 50, 0), state.after(4, 0));
    /// ```
    #[inline]
    #[must_use]
    pub fn after(self, drafted: usize, accepted: usize) -> Self {
        if drafted == 0 {
            return self;
        }
        let accepted = accepted.min(drafted);
        // `accepted / tested`, `tested = min(drafted, accepted + 1)`, in
        // fixed point, without overflow for any counts: a full step is 1;
        // otherwise `tested = accepted + 1`, and `accepted × SCALE`
        // (which wraps from `accepted = 2^50` on) is needed only below
        // `SCALE`: from there on `SCALE × accepted / (accepted + 1)` is
        // `SCALE - 1` after rounding down.
        let target = if accepted == drafted {
            SCALE
        } else if accepted >= SCALE as usize {
            SCALE - 1
        } else {
            (accepted * SCALE as usize / (accepted + 1)) as i32
        };
        let score = i32::from(self.score & SCORE_MASK);
        // Rounds towards the target, so a run of full (or no) acceptance
        // reaches the top (or bottom) level, never stopping a step short.
        let step = (target - score) >> SHIFT;
        let step = if step == 0 {
            (target - score).signum()
        } else {
            step
        };
        // A drafted step clears the "no draft" flag.
        Self {
            score: (score + step) as u16,
        }
    }

    /// The state after a step on which the drafter proposed nothing (an
    /// n-gram drafter found no match): the score is unchanged, and
    /// [`after_undrafted_step`](Self::after_undrafted_step) says so until
    /// the next drafted step ([`after`](Self::after) with `drafted > 0`
    /// clears it). For state definitions that want "the previous step had
    /// no draft" as a signal ([`StateSpace::by_after_undrafted`]); a
    /// definition that does not want it ignores the flag, and
    /// [`after`](Self::after)`(0, _)` (the default for a step without a
    /// draft) leaves the state exactly as it was.
    ///
    /// Call it when the *drafter* had nothing to propose. A step on which
    /// the plan chose not to draft (`k = 0`) is better left as
    /// `after(0, 0)`: the request's next step is not one after a failed
    /// lookup.
    ///
    /// [`StateSpace::by_after_undrafted`]: crate::StateSpace::by_after_undrafted
    ///
    /// ```
    /// use specdec_metrics::RequestState;
    /// let state = RequestState::new();
    /// let missed = state.after_undrafted();
    /// assert!(missed.after_undrafted_step() && !state.after_undrafted_step());
    /// assert_eq!((missed.score(), missed.index()), (state.score(), state.index()));
    /// assert!(missed.after(0, 0).after_undrafted_step()); // no draft, no news
    /// assert!(!missed.after(3, 1).after_undrafted_step()); // a drafted step clears it
    /// assert_eq!(missed.after(3, 1), state.after(3, 1));
    /// ```
    #[inline]
    #[must_use]
    pub const fn after_undrafted(self) -> Self {
        Self {
            score: self.score | UNDRAFTED,
        }
    }

    /// Whether the latest step proposed no draft
    /// ([`after_undrafted`](Self::after_undrafted)) and no drafted step
    /// came since.
    ///
    /// ```
    /// use specdec_metrics::RequestState;
    /// assert!(!RequestState::new().after_undrafted_step());
    /// assert!(RequestState::new().after_undrafted().after_undrafted_step());
    /// ```
    #[inline]
    pub const fn after_undrafted_step(self) -> bool {
        self.score & UNDRAFTED != 0
    }

    /// The score's level among `levels` equal parts of `[0, 1]`:
    /// `floor(score × levels)`, at most `levels - 1` (`0` for `levels`
    /// 0). [`index`](Self::index) is `level(COUNT)`.
    ///
    /// ```
    /// use specdec_metrics::RequestState;
    /// let state = RequestState::with_score(0.7);
    /// assert_eq!((state.level(2), state.level(3), state.level(10)), (1, 2, 7));
    /// assert_eq!(state.level(RequestState::COUNT), state.index());
    /// assert_eq!(RequestState::with_score(1.0).level(3), 2);
    /// assert_eq!(state.level(1), 0);
    /// ```
    #[inline]
    pub const fn level(self, levels: usize) -> usize {
        let level = (self.score & SCORE_MASK) as usize * levels / SCALE as usize;
        if level < levels {
            level
        } else {
            levels.saturating_sub(1)
        }
    }

    /// The state's number, `0..COUNT`: the score's quarter (`0`: under 1/4
    /// of recent drafts accepted, `3`: at least 3/4).
    #[inline]
    pub fn index(self) -> usize {
        self.level(Self::COUNT)
    }

    /// The score, the weighted recent acceptance, in `[0, 1]`.
    pub fn score(self) -> f64 {
        f64::from(self.score & SCORE_MASK) / f64::from(SCALE)
    }
}

/// What an engine drafts for a request in each [`RequestState`]: a draft
/// length per state, and on one step in [`EXPLORATION_PERIOD`] the
/// exploration length `min(2 k + 1, K)`. Packs into one `u64`
/// ([`to_bits`](Self::to_bits)) for a [`SharedStatePlan`].
///
/// ```
/// use specdec_metrics::{RequestState, StatePlan};
/// let plan = StatePlan::new([1, 2, 4, 7], 8).unwrap();
/// let easy = RequestState::with_score(1.0);
/// assert_eq!(plan.draft_len_for(easy, 0), 7);
/// assert_eq!(plan.draft_len_for(easy, 31), 8); // exploration: min(15, 8)
/// assert_eq!(StatePlan::from_bits(plan.to_bits()), Some(plan));
/// assert_eq!(StatePlan::new([1, 2, 9, 1], 8), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StatePlan {
    draft_lens: [u8; RequestState::COUNT],
    max_draft_len: u8,
}

/// Bits of one draft length in [`StatePlan::to_bits`]: 7 hold `0..=64`.
const LEN_BITS: u32 = 7;
/// The marker bit of a packed plan, above the lengths and `K`, so that no
/// plan packs to 0.
const MARKER: u32 = LEN_BITS * (RequestState::COUNT as u32 + 1);

impl StatePlan {
    /// The plan drafting `draft_lens[s]` in state `s`; `None` when
    /// `max_draft_len` is outside `1..=64` or a length is above it.
    pub fn new(draft_lens: [usize; RequestState::COUNT], max_draft_len: usize) -> Option<Self> {
        let valid = (1..=MAX_MAX_DRAFT_LEN).contains(&max_draft_len)
            && draft_lens.iter().all(|&k| k <= max_draft_len);
        // At most 64, so `u8` holds them.
        valid.then(|| Self {
            draft_lens: draft_lens.map(|k| k as u8),
            max_draft_len: max_draft_len as u8,
        })
    }

    /// The draft length of state `state` on ordinary steps.
    #[inline]
    pub fn draft_len(self, state: RequestState) -> usize {
        usize::from(self.draft_lens[state.index()])
    }

    /// The draft length of state `state` on exploration steps.
    #[inline]
    pub fn explore_len(self, state: RequestState) -> usize {
        (2 * self.draft_len(state) + 1).min(usize::from(self.max_draft_len))
    }

    /// The draft length for a request in `state` at engine step `step`:
    /// the exploration length when `step % 32 == 31`, else the state's
    /// draft length.
    #[inline]
    pub fn draft_len_for(self, state: RequestState, step: u64) -> usize {
        if step % EXPLORATION_PERIOD == EXPLORATION_PERIOD - 1 {
            self.explore_len(state)
        } else {
            self.draft_len(state)
        }
    }

    /// The maximum draft length `K`.
    pub fn max_draft_len(self) -> usize {
        usize::from(self.max_draft_len)
    }

    /// The plan in one word: 7 bits per state's length, then `K`, then a
    /// marker bit (so never 0).
    #[inline]
    pub fn to_bits(self) -> u64 {
        let lens = self
            .draft_lens
            .iter()
            .enumerate()
            .fold(0u64, |bits, (s, &k)| {
                bits | u64::from(k) << (LEN_BITS * s as u32)
            });
        1 << MARKER
            | u64::from(self.max_draft_len) << (LEN_BITS * RequestState::COUNT as u32)
            | lens
    }

    /// The plan packed by [`to_bits`](Self::to_bits); `None` for any word
    /// no plan packs to.
    ///
    /// ```
    /// use specdec_metrics::StatePlan;
    /// assert_eq!(StatePlan::from_bits(0), None);
    /// let bits = StatePlan::new([0, 1, 2, 3], 4).unwrap().to_bits();
    /// assert_eq!(StatePlan::from_bits(bits | 1 << 40), None); // a stray bit
    /// assert_eq!(StatePlan::from_bits(bits & !(1 << 35)), None); // no marker
    /// ```
    pub fn from_bits(bits: u64) -> Option<Self> {
        let field = |i: u32| ((bits >> (LEN_BITS * i)) & ((1 << LEN_BITS) - 1)) as usize;
        if bits >> MARKER != 1 {
            return None;
        }
        let lens = core::array::from_fn(|s| field(s as u32));
        Self::new(lens, field(RequestState::COUNT as u32))
    }

    /// Unpacks a word that [`to_bits`](Self::to_bits) made, without
    /// checking it (what every word in a [`SharedStatePlan`] is).
    #[inline]
    fn from_bits_unchecked(bits: u64) -> Self {
        let field = |i: u32| (bits >> (LEN_BITS * i)) as u8 & ((1 << LEN_BITS) - 1) as u8;
        Self {
            draft_lens: core::array::from_fn(|s| field(s as u32)),
            max_draft_len: field(RequestState::COUNT as u32),
        }
    }
}

/// A [`StatePlan`] published by the metrics thread and read by engine
/// threads at every request-step, in one atomic word: one relaxed load per
/// read, no lock, no allocation. A reader never sees a mix of two plans
/// (the whole plan is one word) nor an older plan after a newer one.
///
/// ```
/// use std::sync::Arc;
/// use specdec_metrics::{RequestState, SharedStatePlan, StateController, StepCost};
///
/// let controller = StateController::new(8, StepCost::linear(1.0, 0.1)?)?;
/// let plan = Arc::new(SharedStatePlan::new(controller.plan()));
/// // An engine thread, for each request of its batch at each step:
/// let state = RequestState::new();
/// let k = plan.draft_len_for(state, 0);
/// assert_eq!(k, controller.draft_len_for(state, 0));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct SharedStatePlan {
    bits: AtomicU64,
}

impl SharedStatePlan {
    /// A cell holding `plan`.
    pub fn new(plan: StatePlan) -> Self {
        Self {
            bits: AtomicU64::new(plan.to_bits()),
        }
    }

    /// Replaces the plan; readers see the new one from their next load on.
    #[inline]
    pub fn publish(&self, plan: StatePlan) {
        // Relaxed: the word is the whole message (every state's length and
        // K travel together), nothing else is published with it, and
        // coherence alone keeps a reader from seeing an older plan after a
        // newer one. (The loom model `shared_state_plan_is_never_mixed`
        // checks both.)
        self.bits.store(plan.to_bits(), Ordering::Relaxed);
    }

    /// The plan last published (or an earlier one, for a reader that has
    /// not yet seen the latest store).
    #[inline]
    pub fn load(&self) -> StatePlan {
        // Relaxed: see `publish`. Every word stored came from `to_bits`.
        StatePlan::from_bits_unchecked(self.bits.load(Ordering::Relaxed))
    }

    /// The draft length for a request in `state` at engine step `step`
    /// under the current plan: one atomic load.
    #[inline]
    pub fn draft_len_for(&self, state: RequestState, step: u64) -> usize {
        self.load().draft_len_for(state, step)
    }
}

/// A draft length per [`RequestState`], each chosen from that state's
/// histogram with the statistics of a [`DraftController`]: posteriors, a
/// switch only on strong evidence, exploration, change-of-regime detection.
///
/// The metrics thread feeds it one window per state each interval (the
/// recorder's [`snapshot_by_state`](crate::Recorder::snapshot_by_state),
/// minus the previous one) and publishes its [`plan`](Self::plan) in a
/// [`SharedStatePlan`]; engine threads record each verify step in the
/// request's state ([`Worker::observe_in`](crate::Worker::observe_in)) and
/// update the state with [`RequestState::after`].
///
/// # What it optimises
///
/// Each state's draft length maximises that state's own goodput, `(1 +
/// E[a | k]) / cost(k)`. That is the long-run optimum for requests that each
/// need their tokens: with a step cost of `base + c × mean k` over the
/// batch, a request in state `s` drafting `k` pays `(base + c k) / B` per
/// step for `1 + E_s[a | k]` tokens, so every token is cheapest when each
/// state maximises its own goodput, whatever the mix. Choosing instead the
/// lengths that maximise the current step's throughput for the current mix
/// prices a draft token at the batch's goodput rather than the state's:
/// it drafts longer for easy requests, which then finish sooner and leave
/// the batch to the hard ones — better for the step, worse for the run.
///
/// # No state traps its requests
///
/// Every state drafts at least one token
/// ([`DraftController::with_min_draft_len`]): a state that drafted nothing
/// would never be verified, its requests would never leave it, and its
/// histogram would never show that drafting pays again.
///
/// ```
/// use specdec_metrics::{Recorder, RequestState, SharedStatePlan, StateController, StepCost};
///
/// let recorder = Recorder::with_states(8, RequestState::COUNT)?;
/// let mut controller = StateController::new(8, StepCost::linear(1.0, 0.1)?)?;
/// let plan = SharedStatePlan::new(controller.plan());
/// let worker = recorder.worker();
/// let mut previous = recorder.snapshot_by_state();
/// // Two requests: one whose drafts are always right, one always wrong.
/// let mut requests = [RequestState::new(), RequestState::new()];
/// for step in 0..20_000u64 {
///     for (r, state) in requests.iter_mut().enumerate() {
///         let k = plan.draft_len_for(*state, step);
///         let a = if r == 0 { k } else { 0 };
///         worker.observe_in(state.index(), k, a)?;
///         *state = state.after(k, a);
///     }
///     if step % 1000 == 999 {
///         let now = recorder.snapshot_by_state();
///         let windows: Vec<_> = now.iter().zip(&previous).map(|(n, p)| n.delta_since(p)).collect::<Result<_, _>>()?;
///         controller.update(&windows);
///         plan.publish(controller.plan());
///         previous = now;
///     }
/// }
/// assert_eq!(controller.draft_len(RequestState::with_score(1.0)), 8);
/// assert_eq!(controller.draft_len(RequestState::with_score(0.0)), 1); // never 0
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Many states, and states that do not draft
///
/// [`with_states`](Self::with_states) makes a controller over any number
/// of states up to [`MAX_STATES`] (128), for a [`StateSpace`]'s
/// [`count`](StateSpace::count); its states are numbered by the space's
/// [`index`](StateSpace::index), and its plan is published in a
/// [`SharedStateTable`] ([`publish`](Self::publish)). Its states may
/// choose `k = 0` where drafting does not pay (a state of the space whose
/// drafts mostly fail, such as a short match right after a no-match
/// step), and they are not trapped there: a state at 0 still drafts one
/// token on its exploration steps (`step % 32 == 31`, one request-step in
/// [`EXPLORATION_PERIOD`]), so its histogram keeps receiving data and its
/// choice leaves 0 once drafting pays again. The exploration steps are
/// those whose `step` is 31 modulo 32, so `step` must not be correlated
/// with the state: a state entered only on even engine steps would never
/// explore. The engine step is fine for states that do not follow a
/// schedule; `engine_step + request_id` also spreads one batch's
/// exploration over 32 steps. `tests/drafter_states.rs`
/// checks the bound: a state whose acceptance turns from none to 90%
/// leaves 0 at the first update after the change once an interval holds
/// about 1,000 request-steps of the state (about 30 exploration steps),
/// and within 4 updates from about 250.
///
/// ```
/// use specdec_metrics::{
///     DraftSignal, Recorder, RequestState, SharedStateTable, StateController, StateSpace, StepCost,
/// };
///
/// // Recent acceptance in 2 levels × a full or a short n-gram match: 4 states.
/// let space = StateSpace::new(2)?.by_short_match()?;
/// let recorder = Recorder::with_states(4, space.count())?;
/// let mut controller = StateController::with_states(4, StepCost::linear(1.0, 0.3)?, space.count())?;
/// let table = controller.shared_table();
/// let worker = recorder.worker();
/// let mut previous = recorder.snapshot_by_state();
/// let mut request = RequestState::new();
/// for step in 0..40_000u64 {
///     // The drafter matched 1 token of max_n = 3 on every third step, else 3.
///     let signal = DraftSignal::ngram(if step % 3 == 0 { 1 } else { 3 }, 3);
///     let state = space.index(request, signal);
///     let k = table.draft_len_for(state, step);
///     let a = if signal.short_match() { 0 } else { k }; // short matches always fail
///     if k > 0 {
///         worker.observe_in(state, k, a)?;
///     }
///     request = request.after(k, a);
///     if step % 2000 == 1999 {
///         let now = recorder.snapshot_by_state();
///         let windows: Vec<_> = now.iter().zip(&previous).map(|(n, p)| n.delta_since(p)).collect::<Result<_, _>>()?;
///         controller.update(&windows);
///         controller.publish(&table);
///         previous = now;
///     }
/// }
/// let level = request.level(space.levels());
/// assert_eq!(table.draft_len_for(space.index(request, DraftSignal::ngram(3, 3)), 0), 4);
/// assert_eq!(table.draft_len_for(space.index(request, DraftSignal::ngram(1, 3)), 0), 0);
/// assert_eq!(table.draft_len_for(space.compose(level, 1), 31), 1); // 0 still explores
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct StateController {
    controllers: Box<[DraftController]>,
    /// The fewest observations, over all states, a decision is made from.
    update_observations: u64,
    /// Continuation counts per state (`states × K`, state-major) of the
    /// windows taken in since the last decision.
    pending: Box<[(u64, u64)]>,
    /// Observations of every state in those windows.
    pending_observations: u64,
}

impl StateController {
    /// A controller per [`RequestState`] (its [`COUNT`](RequestState::COUNT)
    /// states), each as [`DraftController::new`] with a floor of one draft
    /// token.
    ///
    /// # Errors
    ///
    /// As [`DraftController::new`].
    pub fn new(max_draft_len: usize, cost: StepCost) -> Result<Self, ConfigError> {
        let one = DraftController::new(max_draft_len, cost)?
            .with_min_draft_len(1)
            .expect("K >= 1");
        Ok(Self::of(one, RequestState::COUNT))
    }

    /// `states` copies of `one`, each deciding whenever the state
    /// controller passes a window on: the state controller counts the
    /// observations, over all states.
    fn of(one: DraftController, states: usize) -> Self {
        let k = one.max_draft_len();
        Self {
            controllers: vec![one.with_update_observations(0); states].into_boxed_slice(),
            update_observations: DEFAULT_UPDATE_OBSERVATIONS,
            pending: vec![(0, 0); states * k].into_boxed_slice(),
            pending_observations: 0,
        }
    }

    /// A controller per state `0..states` (`1..=128`, for example a
    /// [`StateSpace::count`]), each as [`DraftController::new`]: no floor,
    /// so a state where drafting does not pay chooses 0 and still explores
    /// one token on one request-step in 32 (see "Many states" above). Give
    /// it a floor with [`configure`](Self::configure) (`|c|
    /// c.with_min_draft_len(1)`).
    ///
    /// # Errors
    ///
    /// As [`DraftController::new`]; [`ConfigError::States`] for `states`
    /// outside `1..=128`.
    ///
    /// ```
    /// use specdec_metrics::{StateController, StepCost};
    /// let c = StateController::with_states(8, StepCost::linear(1.0, 0.1)?, 24)?;
    /// assert_eq!((c.states(), c.plans().len()), (24, 24));
    /// assert!(StateController::with_states(8, StepCost::linear(1.0, 0.1)?, 129).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_states(
        max_draft_len: usize,
        cost: StepCost,
        states: usize,
    ) -> Result<Self, ConfigError> {
        if !(1..=MAX_STATES).contains(&states) {
            return Err(ConfigError::States { states });
        }
        let one = DraftController::new(max_draft_len, cost)?;
        Ok(Self::of(one, states))
    }

    /// Every state's controller with the memory, evidence and prior set by
    /// `configure` (for example `|c| c.with_memory(16)`).
    ///
    /// # Errors
    ///
    /// The first [`ParameterError`] `configure` returns.
    ///
    /// ```
    /// use specdec_metrics::{RequestState, StateController, StepCost};
    /// let c = StateController::new(8, StepCost::linear(1.0, 0.1)?)?.configure(|c| c.with_memory(4))?;
    /// assert_eq!(c.controller(RequestState::new()).memory(), 4);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn configure(
        self,
        configure: impl FnMut(DraftController) -> Result<DraftController, ParameterError>,
    ) -> Result<Self, ParameterError> {
        Ok(Self {
            controllers: self
                .controllers
                .into_vec()
                .into_iter()
                .map(configure)
                .collect::<Result<_, _>>()?,
            ..self
        })
    }

    /// The same controller deciding only once the windows taken in since
    /// its last decision hold at least `observations` observations over
    /// all states together (default 256; `0`: on every call), as
    /// [`DraftController::with_update_observations`] does for one
    /// controller. Its states' controllers then decide together, each on
    /// its own state's pooled windows (so leave theirs at 0 in
    /// [`configure`](Self::configure)). Takes effect from the next window.
    ///
    /// ```
    /// use specdec_metrics::{StateController, StepCost};
    /// let c = StateController::new(8, StepCost::linear(1.0, 0.1)?)?.with_update_observations(2048);
    /// assert_eq!(c.update_observations(), 2048);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_update_observations(mut self, observations: u64) -> Self {
        self.update_observations = observations;
        self
    }

    /// The fewest observations, over all states, a decision is made from.
    pub fn update_observations(&self) -> u64 {
        self.update_observations
    }

    /// Observations taken in since the last decision, not yet decided on.
    pub fn pending_observations(&self) -> u64 {
        self.pending_observations
    }

    /// The number of states.
    ///
    /// ```
    /// use specdec_metrics::{StateController, StepCost};
    /// let cost = StepCost::linear(1.0, 0.1)?;
    /// assert_eq!(StateController::new(8, cost.clone())?.states(), 4);
    /// assert_eq!(StateController::with_states(8, cost, 12)?.states(), 12);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn states(&self) -> usize {
        self.controllers.len()
    }

    /// Takes in the latest interval's histogram of each state, in state
    /// order ([`RequestState::index`], or [`StateSpace::index`] for
    /// [`with_states`](Self::with_states)). A missing window (fewer than
    /// [`states`](Self::states)) is an interval without steps for that
    /// state; extra ones are ignored.
    ///
    /// The windows are pooled until they hold at least
    /// [`update_observations`](Self::update_observations) observations over
    /// all states (256 by default), then every state decides on its own
    /// pooled windows, as [`DraftController::update`] does.
    ///
    /// ```
    /// use specdec_metrics::{AcceptanceHistogram, RequestState, StateController, StepCost};
    /// let mut c = StateController::new(4, StepCost::linear(1.0, 0.1)?)?;
    /// let mut window = AcceptanceHistogram::new(4)?;
    /// for _ in 0..200 {
    ///     window.observe(2, 2)?;
    /// }
    /// c.update(&[window.clone()]); // 200 observations: pooled
    /// assert_eq!(c.pending_observations(), 200);
    /// c.update(&[window]); // 400: every state decides
    /// assert_eq!(c.pending_observations(), 0);
    /// assert_eq!(c.controller(RequestState::new()).updates(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn update(&mut self, windows: &[AcceptanceHistogram]) {
        let k = self.controllers[0].max_draft_len();
        for (window, pending) in windows.iter().zip(self.pending.chunks_mut(k)) {
            for (p, &(s, n)) in pending.iter_mut().zip(Continuation::new(window).counts()) {
                // Saturating, as in `DraftController::take_in`.
                p.0 = p.0.saturating_add(s);
                p.1 = p.1.saturating_add(n);
            }
            self.pending_observations = self
                .pending_observations
                .saturating_add(window.num_spec_steps())
                .saturating_add(window.num_undrafted_steps());
        }
        if self.pending_observations < self.update_observations {
            return;
        }
        for (controller, pending) in self.controllers.iter_mut().zip(self.pending.chunks_mut(k)) {
            controller.take_in(pending, 0);
            pending.fill((0, 0));
        }
        self.pending_observations = 0;
    }

    /// The controller of state number `index`, the last state's for an
    /// index beyond them (so the [`RequestState`] methods never panic).
    #[inline]
    fn at(&self, index: usize) -> &DraftController {
        &self.controllers[index.min(self.controllers.len() - 1)]
    }

    /// The draft length for a request in `state` at engine step `step`
    /// (state [`state.index()`](RequestState::index), or the last state
    /// when the controller has fewer).
    #[inline]
    pub fn draft_len_for(&self, state: RequestState, step: u64) -> usize {
        self.at(state.index()).draft_len_for(step)
    }

    /// The current choice for `state` (as in
    /// [`draft_len_for`](Self::draft_len_for)).
    pub fn draft_len(&self, state: RequestState) -> usize {
        self.at(state.index()).draft_len()
    }

    /// The draft length for state number `index` at engine step `step`; 0
    /// for a state the controller does not have.
    ///
    /// ```
    /// use specdec_metrics::{StateController, StepCost};
    /// let c = StateController::with_states(8, StepCost::linear(1.0, 0.1)?, 6)?;
    /// assert_eq!(c.draft_len_at(5, 0), c.plans().last().unwrap().draft_len());
    /// assert_eq!(c.draft_len_at(6, 0), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn draft_len_at(&self, index: usize, step: u64) -> usize {
        self.controllers
            .get(index)
            .map_or(0, |c| c.draft_len_for(step))
    }

    /// The plan of every state, in state order.
    ///
    /// ```
    /// use specdec_metrics::{StateController, StepCost};
    /// let c = StateController::with_states(8, StepCost::linear(1.0, 0.1)?, 3)?;
    /// assert!(c.plans().all(|p| p.draft_len() <= 8));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn plans(&self) -> impl ExactSizeIterator<Item = DraftPlan> + '_ {
        self.controllers.iter().map(DraftController::plan)
    }

    /// The current plan of the first [`RequestState::COUNT`] states, to
    /// publish in a [`SharedStatePlan`]: every state of a controller made
    /// by [`new`](Self::new). A controller of fewer states reads 0 for the
    /// missing ones; one of more publishes its plans in a
    /// [`SharedStateTable`] instead ([`publish`](Self::publish)).
    ///
    /// ```
    /// use specdec_metrics::{RequestState, StateController, StepCost};
    /// let c = StateController::new(8, StepCost::linear(1.0, 0.1)?)?;
    /// let state = RequestState::new();
    /// assert_eq!(c.plan().draft_len(state), c.draft_len(state));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn plan(&self) -> StatePlan {
        let max = self.controllers[0].max_draft_len();
        StatePlan::new(
            core::array::from_fn(|s| self.controllers.get(s).map_or(0, |c| c.draft_len())),
            max,
        )
        .expect("every choice is at most K")
    }

    /// A [`SharedStateTable`] holding every state's current plan (draft
    /// and exploration length), sized for this controller.
    ///
    /// ```
    /// use specdec_metrics::{StateController, StepCost};
    /// let c = StateController::with_states(8, StepCost::linear(1.0, 0.1)?, 9)?;
    /// let table = c.shared_table();
    /// assert_eq!(table.states(), 9);
    /// assert!((0..9).all(|s| table.load(s) == c.controller_at(s).map(|c| c.plan())));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn shared_table(&self) -> SharedStateTable {
        let mut plans = [DraftPlan::with_explore_len_unchecked(0, 1); MAX_STATES];
        for (slot, plan) in plans.iter_mut().zip(self.plans()) {
            *slot = plan;
        }
        SharedStateTable::new(&plans[..self.states()]).expect("1..=128 states")
    }

    /// Publishes every state's current plan in `table` (states beyond the
    /// table's are ignored), without allocating: one relaxed store per
    /// four states.
    ///
    /// ```
    /// use specdec_metrics::{AcceptanceHistogram, StateController, StepCost};
    /// let mut c = StateController::with_states(4, StepCost::linear(1.0, 0.1)?, 2)?;
    /// let table = c.shared_table();
    /// let mut hard = AcceptanceHistogram::new(4)?;
    /// for _ in 0..5000 {
    ///     hard.observe(2, 0)?; // state 0: nothing accepted
    /// }
    /// c.update(&[hard]); // state 1: no window, an empty interval
    /// c.publish(&table);
    /// assert_eq!(table.draft_len_for(0, 0), 0);
    /// assert_eq!(table.load(1), c.controller_at(1).map(|c| c.plan()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn publish(&self, table: &SharedStateTable) {
        let mut plans = [DraftPlan::with_explore_len_unchecked(0, 1); MAX_STATES];
        for (slot, plan) in plans.iter_mut().zip(self.plans()) {
            *slot = plan;
        }
        table.publish(&plans[..self.states()]);
    }

    /// The controller of `state` (its memory, switches, regime changes;
    /// the last state's when the controller has fewer).
    pub fn controller(&self, state: RequestState) -> &DraftController {
        self.at(state.index())
    }

    /// The controller of state number `index`, if there is one.
    ///
    /// ```
    /// use specdec_metrics::{StateController, StepCost};
    /// let c = StateController::with_states(4, StepCost::linear(1.0, 0.1)?, 2)?;
    /// assert_eq!(c.controller_at(1).map(|c| c.min_draft_len()), Some(0));
    /// assert!(c.controller_at(2).is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn controller_at(&self, index: usize) -> Option<&DraftController> {
        self.controllers.get(index)
    }

    /// Switches of any state's draft length so far.
    pub fn switches(&self) -> u64 {
        self.controllers.iter().map(DraftController::switches).sum()
    }
}
