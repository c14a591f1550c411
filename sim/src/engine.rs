//! The simulated engine: engine threads that each own a [`Worker`] and a
//! drafting [`Policy`], and a coordinator (the metrics thread) that turns
//! the histogram of every update period into the next plan.
//!
//! # The loop
//!
//! Every update period (`--update-ms`, 250 ms by default) the coordinator
//! takes a snapshot of the [`Recorder`], subtracts the one of the previous
//! update (`delta_since`), and, for `--policy adaptive`, feeds that window
//! to a [`DraftController`] and publishes its plan in a [`SharedPlan`];
//! every interval (`--interval-ms`, a whole number of update periods or
//! the first tick after its end) it reports the interval; every engine thread reads the plan at each
//! step through its [`Adaptive`] policy (one atomic load). Each engine step
//! records its scheduled budget (`Worker::observe_scheduled`) and each
//! drafting request's `(k, a)` (`Worker::observe`).
//!
//! For `--policy per-state` the same loop runs per request state: each
//! request keeps a `RequestState`, replaced after each of its verify steps;
//! the engine records each verify step in the state the request drafted in
//! (`Worker::observe_in`, into a recorder with one histogram per state:
//! [`recorder`]); every update the coordinator takes
//! `Recorder::snapshot_by_state`, feeds the per-state deltas to a
//! `StateController` and publishes its plan in a `SharedStatePlan`, which
//! the [`PerState`] policy reads at every request-step.
//!
//! # Time
//!
//! A step costs `base + per_token * b` cost units, `b` being the mean draft
//! length per request of its batch (the budget, for a policy that gives
//! every request the same; see the policy module's "The step's cost with
//! per-request lengths"), one unit being `step_us` microseconds of
//! simulated time.
//!
//! - Real time: an engine thread sleeps for the cost of each step, and the
//!   coordinator wakes on the wall clock.
//! - Virtual time: each engine thread keeps its own clock and adds the cost
//!   of each step to it instead of sleeping; it runs steps until its clock
//!   reaches the end of the update period, then waits at a barrier; once every
//!   thread is there, the coordinator updates the controller and publishes
//!   the plan, and a second barrier lets them all go on. Each thread draws
//!   from its own generator (seeded by `seed` and its index), so a run is a
//!   function of its settings and seed, whatever the thread scheduling, and
//!   as fast as the machine allows.
//!
//! The workload's phase of a step is the phase of the moment it starts
//! (virtual or wall-clock time since the start).
//!
//! # The batch
//!
//! Each engine thread keeps a continuous batch of `max_batch` requests: a
//! request that finishes is replaced at the next step (a saturated server,
//! whose throughput is its goodput). Every request of the batch takes one
//! verify step per engine step; see the workload module for what it
//! drafts and what the verifier accepts.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use crate::barrier::{Barrier, BreakOnPanic, panic_message};
use crate::error::{Error, Setting};
use std::thread;
use std::time::{Duration, Instant};

use specdec_metrics::{
    AcceptanceHistogram, DraftController, DraftPlan, DraftSignal, Recorder, RequestState,
    SharedPlan, SharedStatePlan, SharedStateTable, StateController, StateSpace, StepCost, Worker,
};

use crate::peers::{Sglang, SmartSpec, Vllm44336, VllmAdaptiveVerification};
use crate::policy::{
    Adaptive, Oracle, PerState, PerStateTable, Policy, PolicySpec, RequestMemory, RequestView,
    Static, mean_draft_len, scheduled_budget,
};
use crate::rng::{self, Rng};
use crate::state_rule::{RuleState, StateRule};
use crate::summary::{
    ControllerFigures, CostLinear, Counts, EngineStats, Figures, Phase, StateControllerFigures,
    Summary,
};
use crate::trace_set::{Position, TraceSet};
use crate::workload::{
    Phases, RequestTraits, UNDRAFTED_SHARE, Workload, grammar_cut, grammar_rejects, verify,
};

/// The settings of one simulation.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub policy: PolicySpec,
    pub workload: Workload,
    /// Length of one phase of `transition`, seconds.
    pub phase_secs: f64,
    /// Mean steps a `bursty` request stays in one condition (at least 1).
    pub persistence: f64,
    /// What a request's state is, for `per-state` (the library's
    /// `RequestState` by default).
    pub state_rule: StateRule,
    /// Engine threads.
    pub workers: usize,
    /// `K`.
    pub max_draft_len: usize,
    /// Requests in each engine thread's batch.
    pub max_batch: usize,
    /// The metrics interval: one `Interval` event (a log line) each.
    pub interval: Duration,
    /// The controller's update period (the coordinator's tick): every
    /// `update` the coordinator snapshots the recorder, updates the
    /// controller with what was recorded since its last update and
    /// publishes the plan. At most `interval`; an interval ends at the first
    /// tick at or after its nominal end.
    pub update: Duration,
    /// Microseconds of simulated time per cost unit.
    pub step_us: u64,
    pub cost: CostLinear,
    /// Run length in seconds (virtual or wall-clock); 0: until stopped.
    pub seconds: u64,
    pub virtual_time: bool,
    pub seed: u64,
    /// Intervals at the start of each phase left out of its settled part.
    pub settle_intervals: u32,
    /// The requests of the `traces` workload (`None` for the others).
    pub traces: Option<Arc<TraceSet>>,
    /// For `per-state`: the states (what the drafter knows at draft time
    /// composed with the request's recent acceptance), one controller and
    /// one histogram each, the plan in a `SharedStateTable`; `None`: the
    /// four levels of `RequestState` in a `SharedStatePlan`.
    pub state_space: Option<StateSpace>,
    /// How steps are costed and the loop is clocked (the defaults are the
    /// simulator's own).
    pub model: EngineModel,
}

/// What a step costs: the mean draft length of its requests, which one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CostRule {
    /// The lengths the policy scheduled, whether or not the proposer had
    /// anything to propose: an engine whose verification has a fixed shape
    /// pays for them (the simulator's rule).
    #[default]
    Scheduled,
    /// The tokens actually drafted, `min(k, L_t)` on a trace: a request
    /// whose drafter found no match costs nothing beyond the base (the
    /// what-if's rule).
    Drafted,
}

impl std::fmt::Display for CostRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CostRule::Scheduled => "scheduled",
            CostRule::Drafted => "drafted",
        })
    }
}

impl std::str::FromStr for CostRule {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "scheduled" => Ok(CostRule::Scheduled),
            "drafted" => Ok(CostRule::Drafted),
            _ => Err(format!("{s:?} is not a cost rule (scheduled or drafted)")),
        }
    }
}

/// The engine model's settings beyond the workload: its cost rule and
/// table, and whether the controller is updated by time or every `n`
/// engine steps.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EngineModel {
    pub cost_rule: CostRule,
    /// Measured costs by draft length `0..=K`, interpolated linearly at a
    /// fractional mean; `None`: `cost` (linear).
    pub cost_table: Option<Arc<[f64]>>,
    /// Update the controller (and end an interval) every this many engine
    /// steps of each engine thread instead of every `update` of time
    /// (virtual time only).
    pub steps_per_update: Option<u64>,
    /// Replay each traced request once, in file order, and end the run when
    /// the last one has finished (rather than cycling through the file for
    /// `seconds`).
    pub exhaust: bool,
}

/// The controller's default update period, milliseconds: four updates per
/// one-second metrics interval. An update costs microseconds; updating
/// more often than the log shortens the time a new regime runs on the old
/// draft length (the `policy_table` program compares periods).
pub const DEFAULT_UPDATE_MS: u64 = 250;

/// The most engine steps one engine thread may take in one metrics
/// interval of virtual time. A virtual clock advances by each step's cost:
/// with a tiny cost (`--cost-linear 1e-9,0`) an interval would take so many
/// steps that the run would show nothing for hours (or, when the cost
/// underflows to 0, never end). 10^6 steps of a 32-request batch take about
/// a second of a release build; `--step-us 1` with the default cost and
/// 1-second interval is exactly at the limit.
pub const MAX_STEPS_PER_INTERVAL: f64 = 1e6;

/// The most phases a run of the `transition` workload may have. Each
/// engine thread counts every phase apart and the summary has one entry
/// per phase; `--phase-seconds 1e-9` in a 2-second run would be 2e9 of
/// them (the run grew until the machine ran out of memory). 10,000 phases
/// of the default 4 s are 11 hours.
pub const MAX_PHASES: u64 = 10_000;

/// Intervals at the start of a phase not counted as settled: the change is
/// seen at the end of the first, and a move to a length beyond twice the
/// current one takes one more interval per doubling.
pub const SETTLE_INTERVALS: u32 = 3;

/// `table` (costs by draft length `0..table.len()`) at a fractional
/// length, linearly between its neighbours; clamped to its ends.
pub fn interpolate(table: &[f64], len: f64) -> f64 {
    let last = table.len() - 1;
    let len = len.clamp(0.0, last as f64);
    let below = (len.floor() as usize).min(last);
    let above = (below + 1).min(last);
    let weight = len - below as f64;
    table[below] + (table[above] - table[below]) * weight
}

impl Config {
    /// The step cost as the library checks it (the controller's cost).
    pub fn step_cost(&self) -> Result<StepCost, Error> {
        if let Some(table) = &self.model.cost_table {
            if table.len() != self.max_draft_len + 1 {
                return Err(Error::CostTableLength {
                    len: table.len(),
                    max_draft_len: self.max_draft_len,
                });
            }
            return StepCost::table(table.to_vec()).map_err(|source| Error::StepCost {
                setting: Setting::CostTable,
                linear: None,
                source,
            });
        }
        StepCost::linear(self.cost.base, self.cost.per_token).map_err(|source| Error::StepCost {
            setting: Setting::CostLinear,
            linear: Some((self.cost.base, self.cost.per_token)),
            source,
        })
    }

    /// The cost of a step whose requests draft `mean` tokens on average:
    /// linear, or the table interpolated between its neighbouring lengths.
    pub fn cost_at(&self, mean: f64) -> f64 {
        match &self.model.cost_table {
            None => self.cost.step(mean),
            Some(table) => interpolate(table, mean),
        }
    }

    /// The linear cost the peer rules assume (they take a base and a
    /// per-token cost): the table's end points with a table.
    pub fn linear_cost(&self) -> CostLinear {
        match &self.model.cost_table {
            None => self.cost,
            Some(table) => {
                let (first, last) = (table[0], table[table.len() - 1]);
                CostLinear {
                    base: first,
                    per_token: (last - first) / (table.len() - 1).max(1) as f64,
                }
            }
        }
    }

    /// Checks the settings that depend on each other.
    pub fn validate(&self) -> Result<(), Error> {
        AcceptanceHistogram::new(self.max_draft_len)?;
        self.policy.check(self.max_draft_len)?;
        self.step_cost()?;
        if !(self.phase_secs.is_finite() && self.phase_secs > 0.0) {
            return Err(Error::PhaseSecs(self.phase_secs));
        }
        if !(self.persistence.is_finite() && self.persistence >= 1.0) {
            return Err(Error::Persistence(self.persistence));
        }
        if self.virtual_time && self.step_us == 0 {
            return Err(Error::VirtualTimeWithoutStepTime);
        }
        self.check_traces()?;
        if self.virtual_time && self.model.steps_per_update.is_none() {
            self.check_steps_per_interval()?;
        }
        if self.workload == Workload::Transition {
            self.check_phases()?;
        }
        if self.workers == 0
            || self.max_batch == 0
            || self.interval.is_zero()
            || self.update.is_zero()
        {
            return Err(Error::ZeroCounts);
        }
        if self.update > self.interval {
            return Err(Error::UpdateLongerThanInterval {
                update_ms: self.update.as_millis(),
                interval_ms: self.interval.as_millis(),
            });
        }
        Ok(())
    }

    /// The `traces` workload has its traces, and what needs a trace (the
    /// oracle, replaying each request once) has one; the controller is
    /// clocked by steps only in virtual time.
    fn check_traces(&self) -> Result<(), Error> {
        match (&self.traces, self.workload == Workload::Traces) {
            (Some(traces), true) => {
                let requests = traces.requests();
                if let Some(w) = (0..self.workers).find(|&w| {
                    !requests
                        .iter()
                        .skip(w)
                        .step_by(self.workers.max(1))
                        .any(|r| !r.positions.is_empty())
                }) {
                    return Err(Error::TooFewTracedRequests {
                        requests: requests.iter().filter(|r| !r.positions.is_empty()).count(),
                        workers: self.workers,
                        idle: w,
                    });
                }
                if self.max_draft_len > traces.cap() {
                    return Err(Error::DraftAboveTraceCap {
                        max_draft_len: self.max_draft_len,
                        cap: traces.cap(),
                    });
                }
            }
            (None, true) => return Err(Error::TracesMissing),
            (Some(_), false) => {
                return Err(Error::TracesForAnotherWorkload(self.workload));
            }
            (None, false) => {
                if self.policy == PolicySpec::Oracle {
                    return Err(Error::OracleWithoutTraces);
                }
                if self.model.exhaust {
                    return Err(Error::ExhaustWithoutTraces);
                }
            }
        }
        match self.model.steps_per_update {
            Some(0) => return Err(Error::ZeroStepsPerUpdate),
            Some(_) if !self.virtual_time => {
                return Err(Error::StepsPerUpdateInRealTime);
            }
            None if self.model.exhaust => {
                return Err(Error::ExhaustWithoutStepUpdates);
            }
            _ => {}
        }
        Ok(())
    }

    /// In virtual time, the shortest step (without drafts: the base cost)
    /// must leave at most [`MAX_STEPS_PER_INTERVAL`] steps per interval.
    fn check_steps_per_interval(&self) -> Result<(), Error> {
        let shortest_step_secs = self.cost_at(0.0) * self.step_us as f64 * 1e-6;
        let steps = self.interval.as_secs_f64() / shortest_step_secs;
        // Also false for a product that underflowed to 0 (steps infinite).
        if steps <= MAX_STEPS_PER_INTERVAL {
            return Ok(());
        }
        Err(Error::TooManyStepsPerInterval {
            base: self.cost_at(0.0),
            step_us: self.step_us,
            shortest_step_secs,
            interval_ms: self.interval.as_millis(),
            steps,
        })
    }

    /// At most [`MAX_PHASES`] phases in a run of `--seconds N`; in a run
    /// without end (`--seconds 0`) no phase shorter than the metrics
    /// interval, so that the phases counted grow no faster than the
    /// intervals logged.
    fn check_phases(&self) -> Result<(), Error> {
        if self.seconds > 0 {
            let phases = (self.seconds as f64 / self.phase_secs).ceil();
            if phases > MAX_PHASES as f64 {
                return Err(Error::TooManyPhases {
                    phase_secs: self.phase_secs,
                    seconds: self.seconds,
                    phases,
                });
            }
        } else if self.phase_secs < self.interval.as_secs_f64() {
            return Err(Error::PhasesShorterThanInterval {
                phase_secs: self.phase_secs,
                interval_ms: self.interval.as_millis(),
            });
        }
        Ok(())
    }

    /// Whether the coordinator's tick is a number of engine steps (every
    /// tick then ends an interval) rather than a period of time.
    fn ticks_by_steps(&self) -> bool {
        self.model.steps_per_update.is_some()
    }

    fn phases(&self) -> Phases {
        Phases {
            workload: self.workload,
            phase_secs: self.phase_secs,
            persistence: self.persistence,
        }
    }

    fn settle_secs(&self) -> f64 {
        f64::from(self.settle_intervals) * self.interval.as_secs_f64()
    }

    /// The end of the coordinator's tick `i` (from 0), seconds.
    fn tick_end(&self, i: u64) -> f64 {
        let end = (i + 1) as f64 * self.update.as_secs_f64();
        if self.seconds == 0 {
            end
        } else {
            end.min(self.seconds as f64)
        }
    }

    /// The nominal end of interval `i` (from 0), seconds.
    fn interval_end(&self, i: u64) -> f64 {
        (i + 1) as f64 * self.interval.as_secs_f64()
    }
}

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
}

/// The controller of `adaptive` (`None` for the other policies).
fn controller(config: &Config) -> Result<Option<DraftController>, Error> {
    match config.policy {
        PolicySpec::Adaptive => DraftController::new(config.max_draft_len, config.step_cost()?)
            .map(Some)
            .map_err(Error::from),
        _ => Ok(None),
    }
}

/// The state controller of `per-state` (`None` for the other policies).
fn state_controller(config: &Config) -> Result<Option<StateController>, Error> {
    match (config.policy, config.state_space) {
        (PolicySpec::PerState, None) => {
            StateController::new(config.max_draft_len, config.step_cost()?)
                .map(Some)
                .map_err(Error::from)
        }
        (PolicySpec::PerState, Some(space)) => {
            StateController::with_states(config.max_draft_len, config.step_cost()?, space.count())
                .map(Some)
                .map_err(Error::from)
        }
        _ => Ok(None),
    }
}

/// The states a `per-state` run records in.
fn state_count(config: &Config) -> usize {
    config
        .state_space
        .map_or(RequestState::COUNT, StateSpace::count)
}

/// The recorder a run of `config` records in: one histogram per request
/// state for `per-state` (`Recorder::with_states`, whose engine-wide
/// snapshot is their sum), one for the other policies.
pub fn recorder(config: &Config) -> Result<Recorder, Error> {
    match config.policy {
        PolicySpec::PerState => Recorder::with_states(config.max_draft_len, state_count(config)),
        _ => Recorder::new(config.max_draft_len),
    }
    .map_err(Error::from)
}

/// The plan that holds the policy's choice, for a `/metrics` gauge: for
/// `adaptive`, the cell the controller publishes in and every engine thread
/// reads (to pass to [`run`]), holding the controller's first plan; for
/// `static:K`, a plan of `K` that never changes; `None` for the peer rules,
/// which choose per engine thread, and for `per-state`, which has one length
/// per state.
pub fn shared_plan(config: &Config) -> Result<Option<Arc<SharedPlan>>, Error> {
    config.validate()?;
    Ok(match config.policy {
        PolicySpec::Adaptive => controller(config)?.map(|c| Arc::new(SharedPlan::new(c.plan()))),
        PolicySpec::Static(k) => {
            DraftPlan::new(k, config.max_draft_len).map(|p| Arc::new(SharedPlan::new(p)))
        }
        PolicySpec::Sglang
        | PolicySpec::Vllm44336
        | PolicySpec::PerState
        | PolicySpec::SmartSpec
        | PolicySpec::VllmAv
        | PolicySpec::Oracle => None,
    })
}

/// Runs a simulation on `recorder` (whose `K` must be the config's; see
/// [`recorder`]) until `config.seconds` have passed or `stop` is set. For
/// `adaptive`, the controller publishes in `plan` when given (see
/// [`shared_plan`]), in a cell of its own otherwise; other policies ignore
/// it.
pub fn run(
    config: &Config,
    recorder: &Recorder,
    plan: Option<&Arc<SharedPlan>>,
    stop: &AtomicBool,
    events: &dyn Events,
) -> Result<Outcome, Error> {
    config.validate()?;
    if recorder.max_draft_len() != config.max_draft_len {
        return Err(Error::RecorderLength);
    }
    let mut plans = Plans::new(config, recorder, plan)?;
    let policies = (0..config.workers)
        .map(|index| {
            make_policy(
                config,
                index,
                plans.plan.as_ref(),
                plans.state_plan.as_ref(),
                plans.state_table.as_ref(),
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let record_states = plans.state_plan.is_some() || plans.state_table.is_some();
    let live: Vec<Live> = policies.iter().map(|p| Live::new(p.chosen())).collect();
    let mut coordinator = Coordinator {
        config,
        recorder,
        events,
        live: &live,
        controller: plans.controller.as_mut(),
        plan: plans.plan.as_deref(),
        state_controller: plans.state_controller.as_mut(),
        state_plan: plans.state_plan.as_deref(),
        state_table: plans.state_table.as_deref(),
        previous: recorder.snapshot(),
        previous_update: recorder.snapshot(),
        previous_states: recorder.snapshot_by_state(),
        previous_update_states: recorder.snapshot_by_state(),
        previous_live: vec![Counts::default(); config.workers],
        chosen: vec![0; config.workers],
        index: 0,
        start_s: 0.0,
        tick: 0,
        interval_controller: None,
        interval_state_controller: None,
    };
    let Ran {
        stats,
        run_secs,
        ran_to_the_end,
    } = coordinator.run_with_engines(policies, record_states, stop)?;

    let requests_finished = stats.iter().map(|s| s.1).sum();
    let mut total = EngineStats::default();
    for (s, _) in &stats {
        total.add(s);
    }
    let controller = plans.controller.map(|c| ControllerFigures {
        updates: c.updates(),
        switches: c.switches(),
        regime_changes: c.regime_changes(),
        draft_len: c.draft_len(),
    });
    let state_controller = plans.state_controller.map(|c| {
        let states = || (0..c.states()).filter_map(|s| c.controller_at(s));
        StateControllerFigures {
            updates: c.controller(RequestState::new()).updates(),
            switches: c.switches(),
            regime_changes: states().map(DraftController::regime_changes).sum(),
            draft_lens: states().map(DraftController::draft_len).collect(),
        }
    });
    Ok(Outcome {
        summary: summarize(config, &total, run_secs, controller, state_controller),
        requests_finished,
        ran_to_the_end,
    })
}

/// What the engine threads and the coordinator did: each engine thread's
/// counts and requests finished, the run's length (seconds) and whether it
/// ran to its end.
struct Ran {
    stats: Vec<(EngineStats, u64)>,
    run_secs: f64,
    ran_to_the_end: bool,
}

/// The controllers of a run and the plans they publish (each `None` when
/// the policy has none): the controller's shared plan (`plan`, if given,
/// else a new one), and the state controller's per-state plan or, with a
/// state space, its table.
struct Plans {
    controller: Option<DraftController>,
    plan: Option<Arc<SharedPlan>>,
    state_controller: Option<StateController>,
    state_table: Option<Arc<SharedStateTable>>,
    state_plan: Option<Arc<SharedStatePlan>>,
}

impl Plans {
    fn new(
        config: &Config,
        recorder: &Recorder,
        plan: Option<&Arc<SharedPlan>>,
    ) -> Result<Self, Error> {
        let controller = controller(config)?;
        let plan = controller.as_ref().map(|c| {
            let plan = plan.map_or_else(|| Arc::new(SharedPlan::new(c.plan())), Arc::clone);
            plan.publish(c.plan());
            plan
        });
        let state_controller = state_controller(config)?;
        if state_controller.is_some() && recorder.states() < state_count(config) {
            return Err(Error::RecorderStates {
                needed: state_count(config),
            });
        }
        let state_table = match (&state_controller, config.state_space) {
            (Some(c), Some(_)) => Some(Arc::new(c.shared_table())),
            _ => None,
        };
        let state_plan = match (&state_controller, config.state_space) {
            (Some(c), None) => Some(Arc::new(SharedStatePlan::new(c.plan()))),
            _ => None,
        };
        Ok(Self {
            controller,
            plan,
            state_controller,
            state_table,
            state_plan,
        })
    }
}

/// What the trace says of request `index`'s output position `t` (`None`
/// past its end).
fn traced_position(traces: &TraceSet, index: usize, t: usize) -> Option<Position> {
    traces.requests()[index]
        .positions
        .get(t.checked_sub(1)?)
        .copied()
}

/// A request state whose index is `index` (the middle of its quarter).
pub fn state_of(index: usize) -> RequestState {
    RequestState::with_score((index as f64 + 0.5) / RequestState::COUNT as f64)
}

/// The policy of engine thread `index`: each thread has its own (a peer
/// rule learns from its own steps, as in its engine), except that every
/// `Adaptive` reads the one shared plan, and every `PerState` the one
/// shared state plan.
fn make_policy(
    config: &Config,
    index: usize,
    plan: Option<&Arc<SharedPlan>>,
    state_plan: Option<&Arc<SharedStatePlan>>,
    state_table: Option<&Arc<SharedStateTable>>,
) -> Result<Box<dyn Policy>, Error> {
    // The peer rules take a linear cost (a table's end points).
    let cost = config.linear_cost();
    match config.policy {
        PolicySpec::PerState => match state_table {
            Some(table) => Ok(Box::new(PerStateTable::new(Arc::clone(table)))),
            None => Ok(Box::new(PerState::new(Arc::clone(
                state_plan.ok_or(Error::MissingPlan("per-state needs a state plan"))?,
            )))),
        },
        PolicySpec::Static(k) => Ok(Box::new(Static::new(k))),
        PolicySpec::Adaptive => Ok(Box::new(Adaptive::new(Arc::clone(
            plan.ok_or(Error::MissingPlan("adaptive needs a plan"))?,
        )))),
        PolicySpec::Sglang => Ok(Box::new(Sglang::new(config.max_draft_len))),
        PolicySpec::Oracle => Ok(Box::new(Oracle::default())),
        PolicySpec::SmartSpec => Ok(Box::new(SmartSpec::new(
            config.max_draft_len,
            cost.base,
            cost.per_token,
            config.max_batch,
        ))),
        PolicySpec::VllmAv => Ok(Box::new(VllmAdaptiveVerification::new(
            config.max_draft_len,
            cost.base,
            cost.per_token,
            config.max_batch,
        ))),
        // `new` panics on a cost that `validate` has already rejected.
        PolicySpec::Vllm44336 => Ok(Box::new(Vllm44336::new(
            config.max_draft_len,
            cost.base,
            cost.per_token,
            rng::probe_seed(config.seed, index),
        ))),
    }
}

fn summarize(
    config: &Config,
    total: &EngineStats,
    run_secs: f64,
    controller: Option<ControllerFigures>,
    state_controller: Option<StateControllerFigures>,
) -> Summary {
    let phases_of = config.phases();
    let workers = config.workers;
    let mut overall = Counts::default();
    let phases = total
        .phases
        .iter()
        .enumerate()
        .map(|(index, counts)| {
            overall.add(&counts.all);
            let end = match config.workload {
                Workload::Transition => phases_of.phase_start(index + 1).min(run_secs),
                _ => run_secs,
            };
            Phase {
                index,
                name: phases_of.phase_name(index),
                start_s: phases_of.phase_start(index),
                end_s: end,
                figures: Figures::new(&counts.all, workers),
                settled: Figures::new(&counts.settled, workers),
            }
        })
        .collect();
    Summary {
        policy: config.policy.to_string(),
        workload: config.workload.name(),
        seed: config.seed,
        max_draft_len: config.max_draft_len,
        workers,
        max_batch: config.max_batch,
        cost_linear: config.cost,
        cost_rule: config.model.cost_rule.to_string(),
        step_us: config.step_us,
        interval_ms: config.interval.as_millis() as u64,
        update_ms: config.update.as_millis() as u64,
        phase_seconds: config.phase_secs,
        persistence: config.persistence,
        state_rule: config.state_rule.to_string(),
        virtual_time: config.virtual_time,
        seconds: run_secs,
        settle_seconds: config.settle_secs(),
        overall: Figures::new(&overall, workers),
        phases,
        controller,
        state_controller,
    }
}

// ---------------------------------------------------------------------------
// Live counters: what each engine thread has done so far, for the interval
// lines.

/// Running totals one engine thread publishes after every step. Each field
/// has one writer (its engine thread); the coordinator reads them.
struct Live {
    steps: AtomicU64,
    /// `f64` bits.
    budget_sum: AtomicU64,
    tokens: AtomicU64,
    switches: AtomicU64,
    /// `f64` bits.
    cost_units: AtomicU64,
    chosen: AtomicUsize,
    /// Virtual time: the engine thread's clock at the latest barrier
    /// (`f64` bits).
    clock: AtomicU64,
    /// Replaying each traced request once: this thread has none left.
    drained: AtomicBool,
}

impl Live {
    fn new(chosen: usize) -> Self {
        Self {
            steps: AtomicU64::new(0),
            budget_sum: AtomicU64::new(0.0f64.to_bits()),
            tokens: AtomicU64::new(0),
            switches: AtomicU64::new(0),
            cost_units: AtomicU64::new(0.0f64.to_bits()),
            chosen: AtomicUsize::new(chosen),
            clock: AtomicU64::new(0.0f64.to_bits()),
            drained: AtomicBool::new(false),
        }
    }

    fn publish_drained(&self, drained: bool) {
        // Relaxed: stored before the barrier, read after it.
        self.drained.store(drained, Ordering::Relaxed);
    }

    fn drained(&self) -> bool {
        // Relaxed: see `publish_drained`.
        self.drained.load(Ordering::Relaxed)
    }

    fn publish_clock(&self, clock: f64) {
        // Relaxed: stored before the barrier, read after it.
        self.clock.store(clock.to_bits(), Ordering::Relaxed);
    }

    fn clock(&self) -> f64 {
        // Relaxed: see `publish_clock`.
        f64::from_bits(self.clock.load(Ordering::Relaxed))
    }

    fn publish(&self, counts: &Counts, chosen: usize) {
        // Relaxed: figures for a log line. In virtual time the barrier
        // (a mutex inside) orders them before the coordinator's reads; in
        // real time a read may see one field a step ahead of another,
        // which a log line can live with.
        self.steps.store(counts.steps, Ordering::Relaxed);
        self.budget_sum
            .store(counts.budget_sum.to_bits(), Ordering::Relaxed);
        self.tokens.store(counts.tokens, Ordering::Relaxed);
        self.switches.store(counts.switches, Ordering::Relaxed);
        self.cost_units
            .store(counts.cost_units.to_bits(), Ordering::Relaxed);
        self.chosen.store(chosen, Ordering::Relaxed);
    }

    /// The counts an interval line shows (steps, budgets, tokens,
    /// switches, cost).
    fn read(&self) -> (Counts, usize) {
        // Relaxed: see `publish`.
        (
            Counts {
                steps: self.steps.load(Ordering::Relaxed),
                budget_sum: f64::from_bits(self.budget_sum.load(Ordering::Relaxed)),
                tokens: self.tokens.load(Ordering::Relaxed),
                switches: self.switches.load(Ordering::Relaxed),
                cost_units: f64::from_bits(self.cost_units.load(Ordering::Relaxed)),
                ..Counts::default()
            },
            self.chosen.load(Ordering::Relaxed),
        )
    }
}

// ---------------------------------------------------------------------------
// The coordinator (metrics thread)

struct Coordinator<'a> {
    config: &'a Config,
    recorder: &'a Recorder,
    events: &'a dyn Events,
    live: &'a [Live],
    controller: Option<&'a mut DraftController>,
    plan: Option<&'a SharedPlan>,
    state_controller: Option<&'a mut StateController>,
    state_plan: Option<&'a SharedStatePlan>,
    state_table: Option<&'a SharedStateTable>,
    /// The snapshot at the end of the last interval.
    previous: AcceptanceHistogram,
    /// The snapshot at the last controller update.
    previous_update: AcceptanceHistogram,
    /// The same, per request state (one state without `per-state`).
    previous_states: Vec<AcceptanceHistogram>,
    previous_update_states: Vec<AcceptanceHistogram>,
    previous_live: Vec<Counts>,
    chosen: Vec<usize>,
    /// The interval (from 0), and when it started.
    index: u64,
    start_s: f64,
    /// The coordinator's tick (from 0).
    tick: u64,
    /// The controller during the current interval: its draft length before
    /// the interval's first update, and whether an update detected a change
    /// of regime.
    interval_controller: Option<(usize, bool)>,
    /// The same for the state controller: every state's length.
    interval_state_controller: Option<(Vec<usize>, bool)>,
}

impl Coordinator<'_> {
    /// Runs one engine thread per policy (recording in request states if
    /// `record_states`) and this coordinator beside them until the run ends
    /// or `stop` is set; returns each engine thread's counts and requests
    /// finished, the run's length and whether it ran to its end ([`Ran`]).
    fn run_with_engines(
        &mut self,
        policies: Vec<Box<dyn Policy>>,
        record_states: bool,
        stop: &AtomicBool,
    ) -> Result<Ran, Error> {
        let (config, recorder, events, live) = (self.config, self.recorder, self.events, self.live);
        let done = AtomicBool::new(false);
        // Set by an engine thread that panics, so that a real-time coordinator
        // stops (in virtual time the broken barrier stops it).
        let failed = AtomicBool::new(false);
        let barrier = Barrier::new(config.workers + 1);
        let started = Instant::now();
        thread::scope(|scope| {
            let handles: Vec<_> = policies
                .into_iter()
                .enumerate()
                .map(|(index, policy)| {
                    let (live, done, barrier, failed) = (&live[index], &done, &barrier, &failed);
                    let mut engine =
                        Engine::new(index, config, recorder.worker(), policy, live, events);
                    engine.record_states = record_states;
                    thread::Builder::new()
                        .name(format!("engine-{index}"))
                        .spawn_scoped(scope, move || {
                            // Relaxed: the coordinator polls it; the join orders
                            // the rest.
                            let _guard = BreakOnPanic::new(barrier, || {
                                failed.store(true, Ordering::Relaxed)
                            });
                            if config.virtual_time {
                                engine.run_virtual(barrier, done, stop);
                            } else {
                                engine.run_real(started, done);
                            }
                            (engine.stats, engine.finished)
                        })
                })
                .collect::<Result<_, _>>()
                .map_err(|source| Error::Spawn {
                    what: "an engine thread",
                    source,
                })?;
            // A panic of the coordinator (this thread) must not leave the
            // engine threads waiting at the barrier or polling `done`, or the
            // scope's joins would hang instead of the panic going on.
            // Relaxed: as `done` below.
            let guard = BreakOnPanic::new(&barrier, || done.store(true, Ordering::Relaxed));
            let (run_secs, ran_to_the_end) = if config.virtual_time {
                self.run_virtual(&barrier, &done, stop)
            } else {
                self.run_real(started, &failed, stop)
            };
            drop(guard);
            // Relaxed: real-time engine threads poll it; the joins below order
            // everything they did before our reads.
            done.store(true, Ordering::Relaxed);
            let stats = handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .map_err(|p| Error::Panicked(panic_message(&*p).to_owned()))
                })
                .collect::<Result<Vec<_>, _>>()?;
            if !config.virtual_time {
                // Every step is recorded now: the last, partial interval.
                self.tick(run_secs, true);
            }
            Ok(Ran {
                stats,
                run_secs,
                ran_to_the_end,
            })
        })
    }

    /// Every tick: wait for every engine thread at the barrier, update,
    /// let them go on. Returns the run's length and whether it ran to its
    /// end.
    fn run_virtual(
        &mut self,
        barrier: &Barrier,
        done: &AtomicBool,
        stop: &AtomicBool,
    ) -> (f64, bool) {
        loop {
            let mut end = self.config.tick_end(self.tick);
            if barrier.wait().is_err() {
                // An engine thread panicked: the join reports it.
                return (end, false);
            }
            if self.config.ticks_by_steps() {
                // The tick ended after a number of steps: at the furthest
                // clock.
                end = self.live.iter().map(Live::clock).fold(0.0, f64::max);
            }
            let to_the_end = (self.config.seconds > 0 && end >= self.config.seconds as f64)
                || (self.config.model.exhaust && self.live.iter().all(Live::drained));
            // Relaxed: a flag from the main thread, read once per tick; an
            // engine thread that saw it set (and left its tick early) did so
            // before the barrier, which orders its load before ours.
            let stopped = !to_the_end && stop.load(Ordering::Relaxed);
            if stopped {
                // Engine threads that left the tick early stopped their
                // clocks short of its end: the run lasted as long as the
                // furthest clock.
                end = self
                    .live
                    .iter()
                    .map(Live::clock)
                    .fold(0.0, f64::max)
                    .min(end);
            }
            let last = to_the_end || stopped;
            self.tick(end, last);
            // Relaxed: the barrier below orders it before the engine
            // threads read it.
            done.store(last, Ordering::Relaxed);
            if barrier.wait().is_err() || last {
                return (end, to_the_end);
            }
        }
    }

    /// Every tick of wall-clock time until the run's end or `stop`;
    /// returns the run's length and whether it ran to its end. The last,
    /// partial interval is left to the caller (once the engine threads
    /// have stopped).
    fn run_real(
        &mut self,
        started: Instant,
        failed: &AtomicBool,
        stop: &AtomicBool,
    ) -> (f64, bool) {
        let interval = self.config.update.as_secs_f64();
        let end_of_run = if self.config.seconds == 0 {
            f64::INFINITY
        } else {
            self.config.seconds as f64
        };
        let mut deadline = interval;
        loop {
            let target = deadline.min(end_of_run);
            loop {
                let now = started.elapsed().as_secs_f64();
                // Relaxed: flags from the main thread and from a panicking
                // engine thread, polled; the joins order the rest.
                if stop.load(Ordering::Relaxed) || failed.load(Ordering::Relaxed) {
                    return (now, false);
                }
                if now >= end_of_run {
                    return (now, true);
                }
                if now >= target {
                    break;
                }
                thread::sleep(Duration::from_secs_f64((target - now).min(0.02)));
            }
            self.tick(started.elapsed().as_secs_f64(), false);
            deadline += interval;
            // A long stall (suspended process) should not cause a burst of
            // interval lines.
            let now = started.elapsed().as_secs_f64();
            if deadline < now {
                deadline = now + interval;
            }
        }
    }

    /// One tick ending at `end_s`: snapshot, the controller updated with
    /// what was recorded since its last update and its plan published;
    /// then, when the tick ends an interval (or the run), the interval's
    /// event.
    fn tick(&mut self, end_s: f64, last: bool) {
        let now = self.recorder.snapshot();
        let since_update = now
            .delta_since(&self.previous_update)
            .expect("snapshots of one recorder never decrease");
        // A real-time run stopped right after a tick leaves an empty last
        // tick: nothing to update.
        if !(last && since_update.is_empty()) {
            self.update_controller(&since_update);
            self.update_state_controller();
            self.previous_update = now.clone();
        }
        self.tick += 1;
        // Float tolerance: tick and interval ends are sums of milliseconds.
        let interval_ends =
            self.config.ticks_by_steps() || end_s >= self.config.interval_end(self.index) - 1e-9;
        if interval_ends || last {
            self.end_interval(now, end_s, last);
        }
    }

    /// Feeds the controller (if any) what was recorded since its last
    /// update, and publishes its plan.
    fn update_controller(&mut self, since_update: &AcceptanceHistogram) {
        if let (Some(controller), Some(plan)) = (self.controller.as_deref_mut(), self.plan) {
            let regime_changes = controller.regime_changes();
            let (_, regime) = self
                .interval_controller
                .get_or_insert((controller.draft_len(), false));
            controller.update(since_update);
            plan.publish(controller.plan());
            *regime |= controller.regime_changes() > regime_changes;
        }
    }

    /// Feeds the state controller (if any) every state's window since its
    /// last update, and publishes its plan or table.
    fn update_state_controller(&mut self) {
        if let Some(controller) = self.state_controller.as_deref_mut() {
            // The windows of every state since the last update, in
            // `RequestState::index` order.
            let states = self.recorder.snapshot_by_state();
            let windows: Vec<AcceptanceHistogram> = states
                .iter()
                .zip(&self.previous_update_states)
                .map(|(now, before)| {
                    now.delta_since(before)
                        .expect("snapshots of one recorder never decrease")
                })
                .collect();
            let regime_changes = state_regime_changes(controller);
            let (_, regime) = self
                .interval_state_controller
                .get_or_insert((state_draft_lens(controller), false));
            controller.update(&windows);
            if let Some(plan) = self.state_plan {
                plan.publish(controller.plan());
            }
            if let Some(table) = self.state_table {
                controller.publish(table);
            }
            *regime |= state_regime_changes(controller) > regime_changes;
            self.previous_update_states = states;
        }
    }

    /// Ends the interval at `end_s` (`now` being the recorder's snapshot):
    /// reports it to the events, unless it is a real-time run's empty last
    /// one.
    fn end_interval(&mut self, now: AcceptanceHistogram, end_s: f64, last: bool) {
        let delta = now
            .delta_since(&self.previous)
            .expect("snapshots of one recorder never decrease");
        // A real-time run stopped right after an interval leaves an empty
        // last interval: nothing to say.
        if last && !self.config.virtual_time && delta.is_empty() {
            return;
        }
        let controller = self.controller_step();
        let sum = self.live_since_interval();
        let start_s = self.start_s;
        let phases = self.config.phases();
        // The phase the interval is mostly in (its middle's).
        let phase = phases.phase_at((start_s + end_s) / 2.0);
        let state_controller = self.state_controller_step();
        self.events.interval(&Interval {
            start_s,
            end_s,
            delta: &delta,
            phase,
            phase_name: phases.phase_name(phase),
            chosen: &self.chosen,
            steps: sum.steps,
            budget_sum: sum.budget_sum,
            tokens: sum.tokens,
            switches: sum.switches as f64 / self.config.workers as f64,
            cost_units: sum.cost_units,
            controller,
            state_controller,
            last,
        });
        self.previous = now;
        self.index += 1;
        self.start_s = end_s;
    }

    /// What the controller did in the interval now ending.
    fn controller_step(&mut self) -> Option<ControllerStep> {
        match (self.controller.as_deref(), self.interval_controller.take()) {
            (Some(controller), Some((previous, regime_change))) => Some(ControllerStep {
                draft_len: controller.draft_len(),
                explore_len: controller.plan().explore_len(),
                previous,
                regime_change,
                dispersion: controller.dispersion(),
            }),
            _ => None,
        }
    }

    /// The engine threads' counts since the last interval ended (and the
    /// length each chose last).
    fn live_since_interval(&mut self) -> Counts {
        let mut sum = Counts::default();
        for (i, live) in self.live.iter().enumerate() {
            let (counts, chosen) = live.read();
            sum.add(&counts.since(&self.previous_live[i]));
            self.previous_live[i] = counts;
            self.chosen[i] = chosen;
        }
        sum
    }

    /// What the state controller did in the interval now ending, and the
    /// verify steps of each state in it.
    fn state_controller_step(&mut self) -> Option<StateControllerStep> {
        match (
            self.state_controller.as_deref(),
            self.interval_state_controller.take(),
        ) {
            (Some(controller), Some((previous, regime_change))) => {
                let states = self.recorder.snapshot_by_state();
                let steps_by_state = states
                    .iter()
                    .zip(&self.previous_states)
                    .map(|(now, before)| now.num_spec_steps() - before.num_spec_steps())
                    .collect();
                self.previous_states = states;
                Some(StateControllerStep {
                    draft_lens: state_draft_lens(controller),
                    previous,
                    regime_change,
                    steps_by_state,
                })
            }
            _ => None,
        }
    }
}

/// Every state's draft length, in state order (`RequestState::index`
/// order without a state space).
fn state_draft_lens(controller: &StateController) -> Vec<usize> {
    (0..controller.states())
        .map(|s| {
            controller
                .controller_at(s)
                .map_or(0, DraftController::draft_len)
        })
        .collect()
}

/// Changes of regime any state's controller has seen.
fn state_regime_changes(controller: &StateController) -> u64 {
    (0..controller.states())
        .filter_map(|s| controller.controller_at(s))
        .map(DraftController::regime_changes)
        .sum()
}

// ---------------------------------------------------------------------------
// The engine threads

/// One request in a batch.
struct Request {
    id: u64,
    /// When it was admitted, seconds.
    started: f64,
    /// Output tokens to generate before it finishes.
    output_len: usize,
    generated: usize,
    traits: RequestTraits,
    /// How well its drafts have been doing lately, updated after each of
    /// its verify steps.
    state: RequestState,
    /// The same under the config's state rule, when it is not the
    /// library's.
    rule_state: RuleState,
    /// What the policy keeps for it.
    memory: RequestMemory,
    /// The request's own metrics, allocated once here; reported at the end.
    metrics: AcceptanceHistogram,
    /// On a trace: the request's index in it (its output position is
    /// `generated`).
    trace: Option<usize>,
}

/// What an engine step does with each request's verify step: record it
/// engine-wide (in the state the request drafted in, for per-state) and
/// per request, move the request's states on, and tell the policy.
struct Recording<'a> {
    worker: &'a Worker,
    record_states: bool,
    policy: &'a mut dyn Policy,
    outcomes: &'a mut Vec<(usize, usize)>,
    rule: StateRule,
    /// The engine thread's draws, and the workload of a step in `phase`
    /// (for a request not on a trace).
    rng: &'a mut Rng,
    phases: &'a Phases,
    phase: usize,
    /// A traced request that found no match moves its state on (a state
    /// space tells the step after a no-match).
    after_no_match: bool,
}

impl Recording<'_> {
    /// Request `index` (in state `state_index`) on a trace, given `len`
    /// tokens to draft at output position `position`: the trace says what
    /// the drafter proposes and the verifier accepts (no draw). Returns the
    /// tokens generated and the tokens drafted.
    fn traced(
        &mut self,
        index: usize,
        state_index: usize,
        request: &mut Request,
        len: usize,
        position: Position,
    ) -> (u64, u64) {
        let drafted = len.min(usize::from(position.proposal));
        let gain = if drafted == 0 {
            // Nothing proposed (no match, or the policy drafted
            // nothing): an undrafted step, not a k = 0 row.
            self.worker.observe_undrafted();
            request.metrics.observe_undrafted();
            if position.proposal == 0 && self.after_no_match {
                // The drafter found no match: its next step is
                // one "after a no-match".
                request.state = request.state.after_undrafted();
            }
            1
        } else {
            let accepted = drafted.min(usize::from(position.matched));
            // Never an error: drafted <= K (the lengths are clamped)
            // and accepted <= drafted.
            self.verify_step(index, state_index, request, drafted, accepted, accepted);
            accepted + 1
        };
        // The bonus token too, but never past the output's end.
        let gain = gain.min(request.output_len - request.generated);
        request.generated += gain;
        (gain as u64, drafted as u64)
    }

    /// Request `index` (in state `state_index`) of the drawn workload, given
    /// `len` tokens to draft: its condition, a grammar's cut, the
    /// verifier's acceptance, drawn. Returns the tokens generated and the
    /// tokens drafted.
    fn drawn(
        &mut self,
        index: usize,
        state_index: usize,
        request: &mut Request,
        len: usize,
    ) -> (u64, u64) {
        // A bursty request may change condition (one draw, bursty only).
        self.phases.advance(self.rng, &mut request.traits);
        if self.rng.chance(UNDRAFTED_SHARE) {
            // Nothing drafted: not a k = 0 row (an undrafted step).
            self.worker.observe_undrafted();
            request.metrics.observe_undrafted();
            request.generated += 1;
            return (1, 0);
        }
        // The grammar of a structured-output request cuts some drafts
        // short, sometimes to nothing (k = 0).
        let drafted = if request.traits.structured {
            grammar_cut(self.rng, len)
        } else {
            len
        };
        let accepted = verify(
            self.rng,
            drafted,
            self.phases.acceptance(self.phase, &request.traits),
        );
        // Rarely, a grammar invalidates drafts after the verifier
        // sampled them, so the engine reports a > k: rejected and
        // counted in num_rejected_observations, never in a bucket.
        let reported = if request.traits.structured && drafted < len && grammar_rejects(self.rng) {
            drafted + 1
        } else {
            accepted
        };
        self.verify_step(index, state_index, request, drafted, reported, accepted);
        request.generated += accepted + 1; // the bonus token
        (accepted as u64 + 1, drafted as u64)
    }

    /// Request `index` (in state `state_index`) drafted `drafted` and the
    /// verifier accepted `accepted`; the engine reports `reported` (a
    /// grammar may make it `drafted + 1`: rejected and counted, never in a
    /// bucket, so an error is already counted and ignored here).
    fn verify_step(
        &mut self,
        index: usize,
        state_index: usize,
        request: &mut Request,
        drafted: usize,
        reported: usize,
        accepted: usize,
    ) {
        let _ = if self.record_states {
            self.worker.observe_in(state_index, drafted, reported)
        } else {
            self.worker.observe(drafted, reported)
        };
        let _ = request.metrics.observe(drafted, reported);
        request.state = request.state.after(drafted, accepted);
        request.rule_state = self.rule.after(request.rule_state, drafted, accepted);
        self.policy
            .after_request(index, &mut request.memory, drafted, accepted);
        self.outcomes.push((drafted, accepted));
    }
}

/// One engine thread: a continuous batch of requests, one verify step per
/// request per engine step.
struct Engine<'a> {
    index: usize,
    config: &'a Config,
    phases: Phases,
    settle_secs: f64,
    worker: Worker,
    policy: Box<dyn Policy>,
    /// Record each verify step in the request's state
    /// (`Worker::observe_in`), for `per-state`.
    record_states: bool,
    live: &'a Live,
    events: &'a dyn Events,
    rng: Rng,
    batch: Vec<Request>,
    /// `(drafted, accepted)` of the latest step's drafting requests.
    outcomes: Vec<(usize, usize)>,
    /// What the policy sees of each request before a step, and the lengths
    /// it gives them (allocated once, for a full batch).
    views: Vec<RequestView>,
    lens: Vec<usize>,
    next_request: u64,
    /// On a trace: the index of the next request to admit (this thread
    /// takes every `workers`-th request from its own index on).
    next_trace: usize,
    step: u64,
    /// The policy's plan at the latest step (a change is a switch).
    plan_key: u64,
    counts: Counts,
    /// Requests admitted since the latest step.
    admitted: usize,
    /// The drafter's longest n-gram (the trace's `max_n`; 5, vLLM's
    /// default, without one): a shorter match is a signal.
    max_n: usize,
    stats: EngineStats,
    finished: u64,
}

impl<'a> Engine<'a> {
    fn new(
        index: usize,
        config: &'a Config,
        worker: Worker,
        policy: Box<dyn Policy>,
        live: &'a Live,
        events: &'a dyn Events,
    ) -> Self {
        let rng = Rng::new(rng::engine_seed(config.seed, index));
        let plan_key = policy.plan_key();
        Self {
            index,
            config,
            phases: config.phases(),
            settle_secs: config.settle_secs(),
            worker,
            policy,
            record_states: false,
            live,
            events,
            rng,
            batch: Vec::with_capacity(config.max_batch),
            outcomes: Vec::with_capacity(config.max_batch),
            views: Vec::with_capacity(config.max_batch),
            lens: Vec::with_capacity(config.max_batch),
            next_request: 0,
            next_trace: index,
            step: 0,
            plan_key,
            counts: Counts::default(),
            admitted: 0,
            max_n: config
                .traces
                .as_ref()
                .and_then(|t| t.meta())
                .map_or(5, |m| m.max_n),
            stats: EngineStats::default(),
            finished: 0,
        }
    }

    /// Steps until the clock reaches each tick's end, or `stop` is set,
    /// then meets the coordinator at the barrier (twice: before and after
    /// its update).
    ///
    /// `stop` is read at every step, not only at the barrier: a tick may
    /// hold many steps (a small step cost), and a signal must not wait for
    /// its end.
    fn run_virtual(&mut self, barrier: &Barrier, done: &AtomicBool, stop: &AtomicBool) {
        let step_secs = self.config.step_us as f64 * 1e-6;
        let mut clock = 0.0;
        for tick in 0.. {
            match self.config.model.steps_per_update {
                Some(steps) => {
                    // Relaxed: as below.
                    for _ in 0..steps {
                        if stop.load(Ordering::Relaxed) || !self.fill(clock) {
                            break;
                        }
                        clock += self.step(clock) * step_secs;
                    }
                    self.live.publish_drained(!self.fill(clock));
                }
                None => {
                    let end = self.config.tick_end(tick);
                    // Relaxed: a flag polled once per step; the barrier
                    // orders everything the coordinator reads after it.
                    while clock < end && !stop.load(Ordering::Relaxed) {
                        self.fill(clock);
                        clock += self.step(clock) * step_secs;
                    }
                }
            }
            self.live.publish_clock(clock);
            // A broken barrier: another thread panicked; stop.
            if barrier.wait().is_err() || barrier.wait().is_err() {
                return;
            }
            // Relaxed: stored before the barrier that just let us through.
            if done.load(Ordering::Relaxed) {
                return;
            }
        }
    }

    /// Steps and sleeps for each step's cost until `done`.
    fn run_real(&mut self, started: Instant, done: &AtomicBool) {
        let step_secs = self.config.step_us as f64 * 1e-6;
        // Relaxed: a stop flag, polled; the join orders everything after.
        while !done.load(Ordering::Relaxed) {
            let now = started.elapsed().as_secs_f64();
            self.fill(now);
            let cost = self.step(now);
            if step_secs > 0.0 {
                thread::sleep(Duration::from_secs_f64(cost * step_secs));
            }
        }
    }

    /// Fills the batch's free slots before a step at `now`; whether the
    /// batch has a request to step (always, but when each traced request
    /// is replayed once and the last have finished).
    fn fill(&mut self, now: f64) -> bool {
        while self.batch.len() < self.config.max_batch && self.admit(now) {
            self.admitted += 1;
        }
        !self.batch.is_empty()
    }

    /// One engine step starting at `now` (on the batch [`fill`](Self::fill)
    /// made); returns its cost in cost units.
    fn step(&mut self, now: f64) -> f64 {
        let admitted = std::mem::take(&mut self.admitted);
        let phase = self.phases.phase_at(now);
        let settled = now >= self.phases.phase_start(phase) + self.settle_secs;
        self.choose_lens();
        // The step's cost is paid for the mean drafted per request; it
        // records that mean, rounded, as its scheduled budget (see the
        // policy module's docs).
        let draft_len = mean_draft_len(&self.lens);
        let budget = scheduled_budget(&self.lens);
        let chosen = self.policy.chosen();
        let plan_key = self.policy.plan_key();
        let switched = plan_key != self.plan_key;
        self.plan_key = plan_key;
        // The scheduler's own choice, 0 included; never above K (the
        // lengths are clamped above), so never an error.
        let _ = self.worker.observe_scheduled(budget);

        let (tokens, drafted_sum) = self.verify_batch(phase);
        self.policy.after_step(budget, &self.outcomes);
        let cost = match self.config.model.cost_rule {
            CostRule::Scheduled => self.config.cost_at(draft_len),
            CostRule::Drafted => self
                .config
                .cost_at(drafted_sum as f64 / self.batch.len().max(1) as f64),
        };
        let counts = Counts {
            steps: 1,
            budget_sum: draft_len,
            tokens,
            switches: u64::from(switched),
            cost_units: cost,
            request_steps: self.batch.len() as u64,
            drafted: drafted_sum,
        };
        self.stats.record(phase, settled, &counts);
        self.counts.add(&counts);
        self.live.publish(&self.counts, chosen);
        self.step += 1;
        let seconds = cost * self.config.step_us as f64 * 1e-6;
        let batch = self.batch.len();
        let finished = self.retire(now + seconds);
        self.events.engine_step(&EngineStep {
            engine: self.index,
            seconds,
            batch,
            tokens,
            admitted,
            finished,
            budget,
            draft_len,
        });
        cost
    }

    /// What the policy sees of each request of the batch (`views`), and the
    /// length it gives each (`lens`).
    fn choose_lens(&mut self) {
        // The policy's length for each request of the batch, never above K
        // (clamped, not rejected: the step still happens).
        let rule = self.config.state_rule;
        self.views.clear();
        let traces = self.config.traces.as_deref();
        let (space, max_n, max_draft_len) = (
            self.config.state_space,
            self.max_n,
            self.config.max_draft_len,
        );
        self.views.extend(self.batch.iter().map(|r| {
            let state = match rule {
                StateRule::Library => r.state,
                // A request state in the rule's state.
                _ => state_of(rule.index(r.rule_state)),
            };
            let position = r
                .trace
                .and_then(|i| traced_position(traces?, i, r.generated));
            // What the drafter knows as it drafts: the n it matched, and
            // whether it has fewer tokens to propose than K.
            let signal = position.map_or(DraftSignal::NONE, |p| {
                DraftSignal::ngram(usize::from(p.ngram), max_n)
                    .with_short_proposal(usize::from(p.proposal) < max_draft_len)
            });
            RequestView {
                state,
                memory: r.memory,
                position,
                state_index: space.map_or(state.index(), |space| space.index(state, signal)),
            }
        }));
        self.lens.clear();
        self.lens.resize(self.batch.len(), 0);
        self.policy
            .draft_lens(self.step, &self.views, &mut self.lens);
        for len in &mut self.lens {
            *len = (*len).min(self.config.max_draft_len);
        }
    }

    /// Every request's verify step of a step in phase `phase`, at the
    /// lengths [`choose_lens`](Self::choose_lens) gave: recorded, and told
    /// to the policy (`outcomes`). Returns the tokens generated and the
    /// tokens drafted.
    fn verify_batch(&mut self, phase: usize) -> (u64, u64) {
        self.outcomes.clear();
        let mut recording = Recording {
            worker: &self.worker,
            record_states: self.record_states,
            policy: self.policy.as_mut(),
            outcomes: &mut self.outcomes,
            rule: self.config.state_rule,
            rng: &mut self.rng,
            phases: &self.phases,
            phase,
            after_no_match: self.config.state_space.is_some(),
        };
        let (mut tokens, mut drafted_sum) = (0u64, 0u64);
        for (index, request) in self.batch.iter_mut().enumerate() {
            let view = &self.views[index];
            let len = self.lens[index];
            let (gained, drafted) = match view.position {
                Some(position) => recording.traced(index, view.state_index, request, len, position),
                None => recording.drawn(index, view.state_index, request, len),
            };
            tokens += gained;
            drafted_sum += drafted;
        }
        (tokens, drafted_sum)
    }

    /// Admits the next request; `false` when there is none (each traced
    /// request replayed once, and this thread's are all admitted).
    fn admit(&mut self, now: f64) -> bool {
        let traits = self.phases.new_request(&mut self.rng);
        let (output_len, generated, trace) = match &self.config.traces {
            None => (32 + self.rng.below(481), 0, None),
            Some(traces) => match self.next_traced(traces) {
                // Position 0 came from prefill: the request drafts at 1.
                Some(i) => (traces.requests()[i].output_tokens, 1, Some(i)),
                None => return false,
            },
        };
        self.batch.push(Request {
            id: self.next_request,
            started: now,
            output_len,
            generated,
            traits,
            state: RequestState::new(),
            rule_state: self.config.state_rule.start(),
            memory: RequestMemory::default(),
            metrics: AcceptanceHistogram::new(self.config.max_draft_len).expect("K was validated"),
            trace,
        });
        self.next_request += 1;
        true
    }

    /// The index of this thread's next traced request with a position to
    /// replay (`M >= 2`), cycling through the file unless each is replayed
    /// once; `None` when none is left.
    fn next_traced(&mut self, traces: &TraceSet) -> Option<usize> {
        let requests = traces.requests();
        let workers = self.config.workers;
        // At most one pass over the file: `TraceSet` holds a request with
        // a position, but maybe not among this thread's.
        for _ in 0..requests.len().div_ceil(workers) + 1 {
            if self.next_trace >= requests.len() {
                if self.config.model.exhaust {
                    return None;
                }
                self.next_trace = self.index % workers;
            }
            let i = self.next_trace;
            self.next_trace += workers;
            if !requests[i].positions.is_empty() {
                return Some(i);
            }
        }
        None
    }

    /// Removes the requests that are done; returns how many.
    fn retire(&mut self, now: f64) -> usize {
        let before = self.batch.len();
        let mut i = 0;
        while i < self.batch.len() {
            if self.batch[i].generated < self.batch[i].output_len {
                i += 1;
                continue;
            }
            let request = self.batch.swap_remove(i);
            self.finished += 1;
            if self.events.wants_requests() {
                self.events.request_finished(&FinishedRequest {
                    engine: self.index,
                    id: request.id,
                    tokens: request.generated,
                    seconds: now - request.started,
                    structured: request.traits.structured,
                    metrics: &request.metrics,
                });
            }
        }
        before - self.batch.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(policy: PolicySpec) -> Config {
        Config {
            policy,
            workload: Workload::Transition,
            phase_secs: 4.0,
            persistence: crate::workload::DEFAULT_PERSISTENCE,
            state_rule: StateRule::Library,
            workers: 2,
            max_draft_len: 8,
            max_batch: 8,
            interval: Duration::from_millis(500),
            update: Duration::from_millis(250),
            step_us: 8000,
            cost: CostLinear {
                base: 1.0,
                per_token: 0.1,
            },
            seconds: 8,
            virtual_time: true,
            seed: 5,
            settle_intervals: SETTLE_INTERVALS,
            traces: None,
            state_space: None,
            model: EngineModel::default(),
        }
    }

    fn run_virtual(config: &Config, plan: Option<&Arc<SharedPlan>>) -> Outcome {
        let recorder = Recorder::new(config.max_draft_len).unwrap();
        run(config, &recorder, plan, &AtomicBool::new(false), &NoEvents).unwrap()
    }

    /// Panics in engine 1's 20th step, or in the coordinator's first
    /// interval line.
    struct Panics {
        in_engine: bool,
        steps: std::sync::atomic::AtomicUsize,
    }
    impl Events for Panics {
        fn engine_step(&self, step: &EngineStep) {
            // Relaxed: a counter of this test's own.
            if self.in_engine
                && step.engine == 1
                && self.steps.fetch_add(1, Ordering::Relaxed) == 20
            {
                panic!("engine 1 broke");
            }
        }
        fn interval(&self, _interval: &Interval<'_>) {
            if !self.in_engine {
                panic!("the metrics thread broke");
            }
        }
    }

    /// Runs `config` with a panicking `Events` on its own thread; what the
    /// run returned (or its panic), or a failure if it hangs.
    fn run_panicking(
        config: Config,
        in_engine: bool,
    ) -> std::thread::Result<Result<Outcome, Error>> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let outcome = std::panic::catch_unwind(|| {
                let recorder = Recorder::new(config.max_draft_len).unwrap();
                let events = Panics {
                    in_engine,
                    steps: Default::default(),
                };
                run(&config, &recorder, None, &AtomicBool::new(false), &events)
            });
            let _ = tx.send(outcome);
        });
        rx.recv_timeout(Duration::from_secs(20))
            .expect("the run hung after a thread of it panicked")
    }

    #[test]
    fn a_panicking_engine_thread_fails_the_run_instead_of_hanging_it() {
        for virtual_time in [true, false] {
            let mut config = config(PolicySpec::Static(3));
            config.virtual_time = virtual_time;
            config.step_us = if virtual_time { 8000 } else { 100 };
            config.seconds = if virtual_time { 8 } else { 0 };
            let error = run_panicking(config, true)
                .expect("an engine's panic is an error, not a panic of the run")
                .expect_err("a run whose engine panicked cannot succeed");
            assert!(
                matches!(&error, Error::Panicked(m) if m.contains("engine 1 broke")),
                "{error}"
            );
        }
    }

    #[test]
    fn a_panicking_coordinator_ends_the_engine_threads() {
        for virtual_time in [true, false] {
            let mut config = config(PolicySpec::Static(3));
            config.virtual_time = virtual_time;
            config.step_us = 100;
            config.seconds = if virtual_time { 8 } else { 0 };
            config.interval = Duration::from_millis(50);
            config.update = Duration::from_millis(50);
            let panic = run_panicking(config, false).expect_err("the coordinator's panic goes on");
            assert_eq!(
                crate::barrier::panic_message(&*panic),
                "the metrics thread broke"
            );
        }
    }

    #[test]
    fn the_shared_plan_holds_the_policys_choice() {
        let adaptive = shared_plan(&config(PolicySpec::Adaptive)).unwrap().unwrap();
        // The controller's first choice under its uniform prior.
        assert_eq!(adaptive.load().draft_len(), 2);
        let fixed = shared_plan(&config(PolicySpec::Static(3)))
            .unwrap()
            .unwrap();
        assert_eq!(fixed.load().draft_len(), 3);
        assert!(shared_plan(&config(PolicySpec::Sglang)).unwrap().is_none());
        assert!(shared_plan(&config(PolicySpec::Static(9))).is_err());
    }

    #[test]
    fn the_controller_publishes_in_the_plan_it_is_given() {
        let config = config(PolicySpec::Adaptive);
        let plan = shared_plan(&config).unwrap().unwrap();
        let outcome = run_virtual(&config, Some(&plan));
        let controller = outcome.summary.controller.unwrap();
        // 4 s low, 4 s high: the run ends on a long draft, in the plan.
        assert!(controller.draft_len >= 5, "{controller:?}");
        assert_eq!(plan.load().draft_len(), controller.draft_len);
        // 8 s of 250 ms updates (two per 500 ms interval).
        assert_eq!(controller.updates, 32);
        assert!(outcome.ran_to_the_end);
    }

    #[test]
    fn a_virtual_run_is_a_function_of_its_config() {
        let config = config(PolicySpec::Adaptive);
        let (a, b) = (run_virtual(&config, None), run_virtual(&config, None));
        assert_eq!(a.summary, b.summary);
        assert_eq!(a.requests_finished, b.requests_finished);
        let other = run_virtual(&Config { seed: 6, ..config }, None);
        assert_ne!(a.summary, other.summary);
    }

    /// Adds up what `engine_step` reports.
    #[derive(Default)]
    struct StepTotals(std::sync::Mutex<(u64, u64, u64, u64, u64, f64)>);
    impl Events for StepTotals {
        fn engine_step(&self, step: &EngineStep) {
            let mut t = self.0.lock().unwrap();
            t.0 += 1;
            t.1 += step.tokens;
            t.2 += step.budget as u64;
            t.3 += step.admitted as u64;
            t.4 += step.finished as u64;
            t.5 += step.seconds;
            assert_eq!(step.batch, 8);
        }
    }

    #[test]
    fn engine_steps_add_up_to_the_summary() {
        let config = config(PolicySpec::Adaptive);
        let recorder = Recorder::new(8).unwrap();
        let events = StepTotals::default();
        let outcome = run(&config, &recorder, None, &AtomicBool::new(false), &events).unwrap();
        let (steps, tokens, budgets, admitted, finished, seconds) = *events.0.lock().unwrap();
        let s = &outcome.summary;
        assert_eq!(steps, s.overall.steps);
        assert_eq!(tokens, s.overall.tokens);
        assert!((s.overall.mean_draft_len.unwrap() - budgets as f64 / steps as f64).abs() < 1e-12);
        assert_eq!(finished, outcome.requests_finished);
        // Still running at the end: the two batches of 8, less the
        // requests their last steps finished (refilled at the next step).
        assert!(
            (1..=16).contains(&(admitted - finished)),
            "{admitted} {finished}"
        );
        // Each thread's steps cover its 8 s, and at most one step (14.4 ms
        // at k = 8) more.
        assert!((16.0..16.0 + 2.0 * 0.0144).contains(&seconds), "{seconds}");
    }

    #[test]
    fn every_engine_thread_runs_to_the_end_of_every_interval() {
        let config = config(PolicySpec::Static(4));
        let outcome = run_virtual(&config, None);
        let s = &outcome.summary;
        assert_eq!(s.seconds, 8.0);
        assert_eq!(s.phases.len(), 2);
        // Each thread runs until its clock passes 8 s, a step costing
        // (1 + 0.4) * 8 ms: 715 steps of 11.2 ms reach 8.008 s.
        assert_eq!(s.overall.steps, 2 * 715);
        assert_eq!(s.overall.mean_draft_len, Some(4.0));
        assert_eq!(s.overall.switches, 0.0);
    }

    /// A trace of the given requests, each `(proposal, match)` by position
    /// `1..M` (`M` one more than their length).
    fn traces(requests: &[&[(u8, u8)]]) -> Arc<TraceSet> {
        let mut text = String::new();
        for (i, positions) in requests.iter().enumerate() {
            let (proposal, matched): (Vec<u8>, Vec<u8>) = positions.iter().copied().unzip();
            text += &serde_json::json!({
                "id": i, "prompt_tokens": 5, "output_tokens": positions.len() + 1,
                "proposal": proposal, "match": matched,
            })
            .to_string();
            text.push('\n');
        }
        Arc::new(TraceSet::read(text.as_bytes(), "test").unwrap())
    }

    fn replay(policy: PolicySpec, traces: Arc<TraceSet>, rule: CostRule, batch: usize) -> Outcome {
        let config = Config {
            workload: Workload::Traces,
            workers: 1,
            max_batch: batch,
            seconds: 0,
            traces: Some(traces),
            model: EngineModel {
                cost_rule: rule,
                steps_per_update: Some(4),
                exhaust: true,
                ..EngineModel::default()
            },
            ..config(policy)
        };
        let recorder = recorder(&config).unwrap();
        run(&config, &recorder, None, &AtomicBool::new(false), &NoEvents).unwrap()
    }

    #[test]
    fn a_traced_request_moves_by_what_its_verifier_accepts() {
        // M = 10, the drafter proposes the rest of the output everywhere:
        // static 3 gains 4, 4, then the one token left.
        let copy: Vec<(u8, u8)> = (1..10).map(|t| (64, 10 - t as u8 - 1)).collect();
        let outcome = replay(
            PolicySpec::Static(3),
            traces(&[&copy]),
            CostRule::Drafted,
            4,
        );
        let o = &outcome.summary.overall;
        assert_eq!((o.steps, o.tokens), (3, 9));
        // 3 drafted in every step: cost 1.3 each.
        assert!((o.cost_units - 3.9).abs() < 1e-12, "{o:?}");
        assert_eq!(outcome.requests_finished, 1);
        assert!(outcome.ran_to_the_end);
    }

    #[test]
    fn a_position_without_a_match_costs_nothing_under_the_drafted_rule_only() {
        // Position 1 has no match, then a proposal of 2 of which 1 holds.
        let positions = [(0, 0), (2, 1), (0, 0), (0, 0)];
        let drafted = replay(
            PolicySpec::Static(4),
            traces(&[&positions]),
            CostRule::Drafted,
            1,
        );
        let o = &drafted.summary.overall;
        // t = 1: nothing (1 token); t = 2: d = 2, a = 1 (2 tokens); t = 4:
        // nothing (1 token).
        assert_eq!((o.steps, o.tokens), (3, 4));
        assert!((o.cost_units - (1.0 + 1.2 + 1.0)).abs() < 1e-12, "{o:?}");
        assert_eq!(o.drafted_per_request_step, Some(2.0 / 3.0));
        let scheduled = replay(
            PolicySpec::Static(4),
            traces(&[&positions]),
            CostRule::Scheduled,
            1,
        );
        let o = &scheduled.summary.overall;
        assert_eq!((o.steps, o.tokens), (3, 4));
        assert!((o.cost_units - 3.0 * 1.4).abs() < 1e-12, "{o:?}");
    }

    #[test]
    fn the_oracle_drafts_what_is_accepted_and_beats_every_static_length() {
        let a: Vec<(u8, u8)> = [(5, 0), (5, 3), (3, 2), (2, 1), (1, 0), (0, 0), (4, 4)]
            .into_iter()
            .cycle()
            .take(60)
            .collect();
        // A full run of 8 every third position (never past the output's end).
        let b: Vec<(u8, u8)> = (0..40u8)
            .map(|t| {
                if t % 3 == 0 {
                    (8, 8.min(40 - t))
                } else {
                    (8, 0)
                }
            })
            .collect();
        let set = traces(&[&a, &b, &a]);
        let goodput = |p| {
            replay(p, Arc::clone(&set), CostRule::Drafted, 2)
                .summary
                .overall
                .goodput
                .unwrap()
        };
        let oracle = goodput(PolicySpec::Oracle);
        for k in 0..=8 {
            assert!(goodput(PolicySpec::Static(k)) < oracle, "static:{k}");
        }
        // Every request replayed once: the tokens are the outputs' positions.
        let outcome = replay(PolicySpec::Oracle, Arc::clone(&set), CostRule::Drafted, 2);
        assert_eq!(outcome.summary.overall.tokens, 60 + 40 + 60);
        assert_eq!(outcome.requests_finished, 3);
    }

    #[test]
    fn traces_are_checked_against_the_settings() {
        let set = traces(&[&[(1, 1)]]);
        let base = Config {
            workload: Workload::Traces,
            traces: Some(Arc::clone(&set)),
            workers: 1,
            ..config(PolicySpec::Static(2))
        };
        assert!(base.validate().is_ok());
        let two = Config {
            workers: 2,
            ..base.clone()
        };
        assert!(matches!(
            two.validate(),
            Err(Error::TooFewTracedRequests { idle: 1, .. })
        ));
        let above = Config {
            max_draft_len: 65,
            ..base.clone()
        };
        assert!(above.validate().is_err());
        let oracle = config(PolicySpec::Oracle);
        assert!(matches!(oracle.validate(), Err(Error::OracleWithoutTraces)));
        let untraced = Config {
            traces: None,
            ..base.clone()
        };
        assert!(untraced.validate().is_err());
        let real_time_steps = Config {
            virtual_time: false,
            model: EngineModel {
                steps_per_update: Some(3),
                ..EngineModel::default()
            },
            ..base
        };
        assert!(matches!(
            real_time_steps.validate(),
            Err(Error::StepsPerUpdateInRealTime)
        ));
    }

    #[test]
    fn a_cost_table_is_interpolated_between_lengths() {
        let table = [1.0, 1.5, 3.0];
        assert_eq!(interpolate(&table, 0.0), 1.0);
        assert_eq!(interpolate(&table, 0.5), 1.25);
        assert_eq!(interpolate(&table, 1.5), 2.25);
        assert_eq!(interpolate(&table, 2.0), 3.0);
        assert_eq!(interpolate(&table, 7.0), 3.0);
    }
}
