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
//!
//! # Files
//!
//! `config.rs` (the settings, [`Config`], and their checks), `events.rs`
//! (what a run tells its caller, [`Events`], and returns, [`Outcome`]),
//! this file (setting a run up and [`run`]), `coordinator.rs` (the metrics
//! thread), `engine_thread.rs` (an engine thread and its batch),
//! `live.rs` (the running totals each engine thread publishes for the
//! coordinator),
//! `tests.rs`. The children read what they share through this module
//! (`use super::*`); none imports a sibling that imports it back.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::barrier::{Barrier, BreakOnPanic, panic_message};
use crate::error::{Error, Setting};

use specdec_metrics::{
    AcceptanceHistogram, DraftController, DraftPlan, DraftSignal, Recorder, RequestState,
    SharedPlan, SharedStatePlan, SharedStateTable, StateController, StateSpace, StepCost, Worker,
};

use crate::drafting::{
    Adaptive, Oracle, PerState, PerStateTable, Policy, RequestMemory, RequestView, Static,
    mean_draft_len, scheduled_budget,
};
use crate::policy::{Build, Feedback, PolicySpec, RuleSettings};
use crate::rng::{self, Rng};
use crate::runs::{CopyRuns, RunSettings, RunSignal};
use crate::state_rule::{RuleState, StateRule};
use crate::step_states::{StepSettings, StepStates};
use crate::summary::{
    ControllerFigures, CostLinear, Counts, EngineStats, Figures, Phase, StateControllerFigures,
    Summary,
};
use crate::trace_set::{Position, TraceSet};
use crate::workload::{
    Phases, RequestTraits, UNDRAFTED_SHARE, Workload, grammar_cut, grammar_rejects, verify,
};

mod config;
mod coordinator;
mod engine_thread;
mod events;
mod live;

pub use config::*;
pub use events::*;

use coordinator::Coordinator;
use engine_thread::Engine;
use live::Live;

/// Whether the run's controller learns from copy runs (`adaptive` or
/// `per-state` on a trace): no metrics-thread controller then.
pub fn copy_runs(config: &Config) -> bool {
    config.traces.is_some()
        && matches!(
            config.policy.build(),
            Build::Adaptive(Feedback::Runs) | Build::PerState(Feedback::Runs)
        )
}

/// The controller of `adaptive` (`None` for the other policies).
fn controller(config: &Config) -> Result<Option<DraftController>, Error> {
    if copy_runs(config) {
        return Ok(None);
    }
    match config.policy.build() {
        Build::Adaptive(_) => DraftController::new(config.max_draft_len, config.step_cost()?)
            .map(|c| match config.model.update_observations {
                Some(n) => Some(c.with_update_observations(n)),
                None => Some(c),
            })
            .map_err(Error::from),
        _ => Ok(None),
    }
}

/// The state controller of `per-state` (`None` for the other policies).
fn state_controller(config: &Config) -> Result<Option<StateController>, Error> {
    let observations = |c: StateController| match config.model.update_observations {
        Some(n) => c.with_update_observations(n),
        None => c,
    };
    if copy_runs(config) {
        return Ok(None);
    }
    match (config.policy.build(), config.state_space) {
        (Build::PerState(_), None) => {
            StateController::new(config.max_draft_len, config.step_cost()?)
                .map(|c| Some(observations(c)))
                .map_err(Error::from)
        }
        (Build::PerState(_), Some(space)) => {
            StateController::with_states(config.max_draft_len, config.step_cost()?, space.count())
                .map(|c| Some(observations(c)))
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
    match config.policy.build() {
        Build::PerState(_) if !copy_runs(config) => {
            Recorder::with_states(config.max_draft_len, state_count(config))
        }
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
    Ok(match (config.policy.build(), config.policy.static_len()) {
        (Build::Adaptive(_), _) => controller(config)?.map(|c| Arc::new(SharedPlan::new(c.plan()))),
        (Build::Static, Some(k)) => {
            DraftPlan::new(k, config.max_draft_len).map(|p| Arc::new(SharedPlan::new(p)))
        }
        _ => None,
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
        chosen_lens: total.lens.clone(),
        drain: total.drain,
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
    if copy_runs(config) {
        let per_state = matches!(config.policy.build(), Build::PerState(_));
        let meta = config.traces.as_ref().and_then(|t| t.meta());
        let max_n = meta.map_or(5, |m| m.max_n);
        // The drafting rule the traces were made with (`None`: n-gram).
        let rule = meta.map(|m| m.rule.as_str());
        let mut settings =
            RunSettings::new(config.max_draft_len, config.linear_cost(), per_state, max_n);
        settings.signal = config
            .model
            .run_signal
            .unwrap_or_else(|| crate::runs::default_signal(rule));
        if let (true, Some(signal)) = (per_state, settings.signal.step_signal(max_n)) {
            let mut step = StepSettings::new(config.max_draft_len, config.linear_cost(), signal);
            step.first_len = crate::step_states::default_first_len(rule, config.max_draft_len);
            step.recent_match &= settings.signal != RunSignal::ShortMatchSteps;
            step.previous_outcome &= settings.signal == RunSignal::MatchSteps;
            step.fixed_plan = config.model.step_plan;
            if let Some(n) = config.model.update_observations {
                step.observations = n.max(1);
            }
            return Ok(Box::new(StepStates::new(step)));
        }
        settings.first_len = crate::runs::default_first_len(rule, config.max_draft_len);
        settings.within = crate::runs::default_within(rule);
        if let Some(n) = config.model.update_observations {
            // 0: every observation (as the controllers' "every call").
            settings.observations = n.max(1);
        }
        return Ok(Box::new(CopyRuns::new(settings)));
    }
    match config.policy.build() {
        Build::PerState(_) => match state_table {
            Some(table) => Ok(Box::new(PerStateTable::new(Arc::clone(table)))),
            None => Ok(Box::new(PerState::new(Arc::clone(
                state_plan.ok_or(Error::MissingPlan("per-state needs a state plan"))?,
            )))),
        },
        Build::Static => Ok(Box::new(Static::new(
            config.policy.static_len().unwrap_or(0),
        ))),
        Build::Adaptive(_) => Ok(Box::new(Adaptive::new(Arc::clone(
            plan.ok_or(Error::MissingPlan("adaptive needs a plan"))?,
        )))),
        Build::Oracle => Ok(Box::new(Oracle::default())),
        Build::Rule(build) => Ok(build(&RuleSettings {
            max_draft_len: config.max_draft_len,
            // The peer rules take a linear cost (a table's end points).
            cost: config.linear_cost(),
            max_batch: config.max_batch,
            seed: rng::probe_seed(config.seed, index),
        })),
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

#[cfg(test)]
mod tests;
