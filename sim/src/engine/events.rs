//! What a run tells its caller while it runs ([`Events`]: intervals,
//! controller updates, steps, finished requests) and what it returns
//! ([`Outcome`]).

use super::*;

/// One interval, as the coordinator saw it.
#[derive(Debug)]
pub struct Interval<'a> {
    /// Start and end, seconds since the start of the run (virtual or
    /// wall-clock).
    pub start_s: f64,
    pub end_s: f64,
    /// The interval's histogram.
    pub delta: &'a AcceptanceHistogram,
    /// The phase of the middle of the interval.
    pub phase: usize,
    pub phase_name: &'static str,
    /// Each engine thread's chosen draft length at its latest step.
    pub chosen: &'a [usize],
    /// Steps, budgets (the sum of each step's mean draft length per
    /// request) and tokens of every engine thread in the interval, and the
    /// switches per engine thread.
    pub steps: u64,
    pub budget_sum: f64,
    pub tokens: u64,
    pub switches: f64,
    pub cost_units: f64,
    /// For `adaptive`: the controller after its update.
    pub controller: Option<ControllerStep>,
    /// For `per-state`: the state controller after its update.
    pub state_controller: Option<StateControllerStep>,
    /// The last interval of the run (possibly partial).
    pub last: bool,
}

/// What the controller did during one interval (one update or more).
#[derive(Clone, Copy, Debug)]
pub struct ControllerStep {
    pub draft_len: usize,
    pub explore_len: usize,
    /// The draft length before the interval's first update.
    pub previous: usize,
    /// An update of the interval found its data incompatible with the
    /// memory (forgotten).
    pub regime_change: bool,
    pub dispersion: f64,
}

/// What the state controller did during one interval (one update or
/// more).
#[derive(Clone, Debug)]
pub struct StateControllerStep {
    /// The draft length of each state, in state order (`RequestState::index`
    /// order without a state space): every state, however many.
    pub draft_lens: Vec<usize>,
    /// The same before the interval's first update.
    pub previous: Vec<usize>,
    /// An update of the interval found a state's data incompatible with
    /// its memory.
    pub regime_change: bool,
    /// Verify steps recorded in each state during the interval.
    pub steps_by_state: Vec<u64>,
}

/// A request that finished.
#[derive(Debug)]
pub struct FinishedRequest<'a> {
    pub engine: usize,
    pub id: u64,
    pub tokens: usize,
    /// Seconds from admission to finish (virtual or wall-clock).
    pub seconds: f64,
    pub structured: bool,
    pub metrics: &'a AcceptanceHistogram,
}

/// One engine step, as an engine's own metrics see it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EngineStep {
    pub engine: usize,
    /// The step's simulated duration, seconds (virtual or slept): every
    /// request of the batch waited that long for its next tokens.
    pub seconds: f64,
    /// Requests in the batch during the step.
    pub batch: usize,
    /// Tokens the step produced (accepted drafts plus one per request).
    pub tokens: u64,
    /// Requests admitted just before the step, and finished by it.
    pub admitted: usize,
    pub finished: usize,
    /// The draft budget the step recorded (`observe_scheduled`): its mean
    /// draft length per request, rounded half up.
    pub budget: usize,
    /// The step's mean draft length per request, unrounded: its cost is
    /// `base + per_token × draft_len`.
    pub draft_len: f64,
    /// Tokens drafted over the step's requests (`min(k, L_t)` on a trace):
    /// under the `drafted` cost rule the step pays for their mean over
    /// `batch`.
    pub drafted: u64,
}

/// What the simulation tells its caller while it runs (the demo logs it;
/// the policy table ignores it). Called from the engine threads
/// (`engine_step`, `request_finished`) and the metrics thread (`interval`).
pub trait Events: Sync {
    fn interval(&self, _interval: &Interval<'_>) {}
    /// After every engine step (for engine-level metrics: running requests,
    /// generated tokens, inter-token latency).
    fn engine_step(&self, _step: &EngineStep) {}
    fn request_finished(&self, _request: &FinishedRequest<'_>) {}
    /// Whether `request_finished` should be called at all.
    fn wants_requests(&self) -> bool {
        false
    }
}

/// Ignores everything.
pub struct NoEvents;
impl Events for NoEvents {}

/// How a simulation ended.
#[derive(Debug)]
pub struct Outcome {
    pub summary: Summary,
    /// Requests that finished.
    pub requests_finished: u64,
    /// It ran its `seconds` (rather than being stopped).
    pub ran_to_the_end: bool,
    /// Request-steps by the draft length the policy chose for them.
    pub chosen_lens: Vec<u64>,
    /// The steps run with fewer requests in flight than the batch holds:
    /// on a finite replay, how it drains once no request waits.
    pub drain: Counts,
}
