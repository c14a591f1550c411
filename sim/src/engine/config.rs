//! A simulation's settings ([`Config`]) and their limits, each checked
//! by [`Config::validate`] with the error that names it.

use super::*;

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
    /// The fewest observations a controller decides from (`None`: the
    /// library's default, `DraftController::update_observations`).
    pub update_observations: Option<u64>,
    /// Replay each traced request once, in file order, and end the run when
    /// the last one has finished (rather than cycling through the file for
    /// `seconds`).
    pub exhaust: bool,
    /// With `exhaust`: once the last request was admitted, a freed slot
    /// takes the file's requests again from the first (a copy, learned
    /// from as any request), and the run ends when every request of the
    /// first pass has finished, the copies still in flight with it: every
    /// step runs a full batch (a saturated server, none of a finite
    /// replay's drain). Without `exhaust` a run cycles anyway.
    pub saturate: bool,
    /// What splits the per-state copy-run controller's runs first (`None`:
    /// the default for the trace's rule, [`crate::runs::default_signal`]).
    pub run_signal: Option<crate::runs::RunSignal>,
    /// `per-state`'s lengths per step state, fixed: never chosen again
    /// ([`crate::step_states::StepSettings::fixed_plan`]; `None`: learned).
    pub step_plan: Option<[usize; crate::step_states::STEP_STATES]>,
}

/// The controller's default update period, milliseconds: four updates per
/// one-second metrics interval. An update costs microseconds; updating
/// more often than the log shortens the time a new regime runs on the old
/// draft length (the `policy_table` program compares periods).
pub const DEFAULT_UPDATE_MS: u64 = 250;

// The limits whose messages are the errors' (they live with them).
pub use crate::error::{MAX_PHASES, MAX_STEPS_PER_INTERVAL};

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
    pub(super) fn check_traces(&self) -> Result<(), Error> {
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
                if matches!(self.policy.build(), Build::Oracle) {
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
    pub(super) fn check_steps_per_interval(&self) -> Result<(), Error> {
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
    pub(super) fn check_phases(&self) -> Result<(), Error> {
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
    pub(super) fn ticks_by_steps(&self) -> bool {
        self.model.steps_per_update.is_some()
    }

    pub(super) fn phases(&self) -> Phases {
        Phases {
            workload: self.workload,
            phase_secs: self.phase_secs,
            persistence: self.persistence,
        }
    }

    pub(super) fn settle_secs(&self) -> f64 {
        f64::from(self.settle_intervals) * self.interval.as_secs_f64()
    }

    /// The end of the coordinator's tick `i` (from 0), seconds.
    pub(super) fn tick_end(&self, i: u64) -> f64 {
        let end = (i + 1) as f64 * self.update.as_secs_f64();
        if self.seconds == 0 {
            end
        } else {
            end.min(self.seconds as f64)
        }
    }

    /// The nominal end of interval `i` (from 0), seconds.
    pub(super) fn interval_end(&self, i: u64) -> f64 {
        (i + 1) as f64 * self.interval.as_secs_f64()
    }
}
