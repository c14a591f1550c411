//! The simulator's errors: [`Error`], what refused a simulation's settings
//! or stopped a run.
//!
//! A message names the settings it is about by [`Setting`], not by any
//! program's flags: [`Error`]'s `Display` names them by their
//! `engine::Config` field (`` `update` (ms) ``),
//! and a program shows them as its flags with [`Error::naming`]
//! (`--update-ms`), so that the message is the one its user can act on.

use std::fmt;

use specdec_ingest::trace::TraceError;

use crate::workload::Workload;

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

/// A setting an [`Error`] names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Setting {
    /// `max_draft_len`: `K`.
    MaxDraftLen,
    /// `model.cost_table`: the cost of a step at each draft length.
    CostTable,
    /// `cost`: the linear step cost.
    CostLinear,
    /// `phase_secs`.
    PhaseSecs,
    /// `persistence`.
    Persistence,
    /// `step_us`.
    StepUs,
    /// `virtual_time`.
    VirtualTime,
    /// `workers`.
    Workers,
    /// `max_batch`.
    MaxBatch,
    /// `interval`, milliseconds.
    Interval,
    /// `update`, milliseconds.
    Update,
    /// `policy`.
    Policy,
    /// `traces`.
    Traces,
    /// `seconds`.
    Seconds,
}

impl Setting {
    /// Its name in `engine::Config` (with its unit
    /// when it is a duration): how `Display` names it.
    pub fn field(self) -> &'static str {
        match self {
            Setting::MaxDraftLen => "`max_draft_len`",
            Setting::CostTable => "`cost_table`",
            Setting::CostLinear => "`cost`",
            Setting::PhaseSecs => "`phase_secs`",
            Setting::Persistence => "`persistence`",
            Setting::StepUs => "`step_us`",
            Setting::VirtualTime => "`virtual_time`",
            Setting::Workers => "`workers`",
            Setting::MaxBatch => "`max_batch`",
            Setting::Interval => "`interval` (ms)",
            Setting::Update => "`update` (ms)",
            Setting::Policy => "`policy`",
            Setting::Traces => "`traces`",
            Setting::Seconds => "`seconds`",
        }
    }
}

/// Why a simulation's settings were refused, or why a run failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A setting the metrics library refuses (`K`, a controller's or a
    /// recorder's settings).
    Metrics(specdec_metrics::ConfigError),
    /// The cost table does not have one cost per draft length `0..=K`.
    CostTableLength {
        /// Its costs.
        len: usize,
        /// `K`.
        max_draft_len: usize,
    },
    /// The step cost the library refuses: a table, or a linear cost.
    StepCost {
        /// [`Setting::CostTable`] or [`Setting::CostLinear`].
        setting: Setting,
        /// The linear cost's base and per-token cost (`None` for a table).
        linear: Option<(f64, f64)>,
        /// Why.
        source: specdec_metrics::CostError,
    },
    /// A static draft length above `K`.
    StaticAboveMax {
        /// The static length.
        k: usize,
        /// `K`.
        max_draft_len: usize,
    },
    /// A phase length that is not a number of seconds above 0.
    PhaseSecs(f64),
    /// A persistence that is not a number of steps of at least 1.
    Persistence(f64),
    /// Virtual time with steps that take no time.
    VirtualTimeWithoutStepTime,
    /// No engine thread, batch, interval or update period.
    ZeroCounts,
    /// The controller would be updated less than once per interval.
    UpdateLongerThanInterval {
        /// The update period, milliseconds.
        update_ms: u128,
        /// The interval, milliseconds.
        interval_ms: u128,
    },
    /// Too few traced requests for the engine threads.
    TooFewTracedRequests {
        /// The requests with an output position to replay.
        requests: usize,
        /// The engine threads.
        workers: usize,
        /// The first engine thread that would have none.
        idle: usize,
    },
    /// `K` above the trace's cap.
    DraftAboveTraceCap {
        /// `K`.
        max_draft_len: usize,
        /// The trace's cap.
        cap: usize,
    },
    /// The `traces` workload without traces.
    TracesMissing,
    /// Traces given for another workload.
    TracesForAnotherWorkload(Workload),
    /// The oracle without a trace.
    OracleWithoutTraces,
    /// Replaying each request once without traces.
    ExhaustWithoutTraces,
    /// A controller updated every 0 steps.
    ZeroStepsPerUpdate,
    /// Updates every N steps in real time.
    StepsPerUpdateInRealTime,
    /// Replaying each request once without updates every N steps.
    ExhaustWithoutStepUpdates,
    /// A virtual-time interval of too many engine steps.
    TooManyStepsPerInterval {
        /// The cost of a step without drafts, cost units.
        base: f64,
        /// One cost unit, microseconds.
        step_us: u64,
        /// That step, seconds.
        shortest_step_secs: f64,
        /// The interval, milliseconds.
        interval_ms: u128,
        /// The steps of one interval.
        steps: f64,
    },
    /// A run of too many phases.
    TooManyPhases {
        /// The phase length, seconds.
        phase_secs: f64,
        /// The run's length, seconds.
        seconds: u64,
        /// Its phases.
        phases: f64,
    },
    /// A run without end whose phases are shorter than its interval.
    PhasesShorterThanInterval {
        /// The phase length, seconds.
        phase_secs: f64,
        /// The interval, milliseconds.
        interval_ms: u128,
    },
    /// A plan the policy needs was not built (`"adaptive needs a plan"`).
    MissingPlan(&'static str),
    /// The recorder given has another `K` than the settings.
    RecorderLength,
    /// The recorder given has too few request states for `per-state`.
    RecorderStates {
        /// The states needed.
        needed: usize,
    },
    /// A thread could not be started.
    Spawn {
        /// Which (`"an engine thread"`).
        what: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// An engine thread panicked, with this message.
    Panicked(String),
    /// A trace that cannot be read, named `name`.
    Trace {
        /// The trace's name (its path, `<stdin>`).
        name: String,
        /// Why.
        source: TraceError,
    },
    /// A trace file that cannot be opened.
    TraceFile {
        /// Its path.
        name: String,
        /// Why.
        source: std::io::Error,
    },
    /// A trace without an output position to replay.
    TraceEmpty {
        /// The trace's name.
        name: String,
    },
    /// A `K` the metrics library refuses.
    MaxDraftLen {
        /// `K`.
        max_draft_len: usize,
        /// Why.
        source: specdec_metrics::ConfigError,
    },
    /// The what-if replay's step cost, refused for its `K`.
    WhatIfCost(specdec_metrics::CostError),
}

impl Error {
    /// The message, the settings named by `name` (a program's flags).
    pub fn naming<'a>(&'a self, name: &'a dyn Fn(Setting) -> &'static str) -> Named<'a> {
        Named { error: self, name }
    }

    /// Writes the message, naming settings with `n`. One arm per variant,
    /// the table of messages: long for that.
    fn write(
        &self,
        f: &mut fmt::Formatter<'_>,
        n: &dyn Fn(Setting) -> &'static str,
    ) -> fmt::Result {
        use Setting as S;
        match self {
            Error::Metrics(e) => write!(f, "{e}"),
            Error::CostTableLength { len, max_draft_len } => write!(
                f,
                "{} has {len} costs: one for every draft length 0..={max_draft_len} is needed",
                n(S::CostTable)
            ),
            Error::StepCost {
                setting,
                linear: None,
                source,
            } => write!(f, "{}: {source}", n(*setting)),
            Error::StepCost {
                setting,
                linear: Some((base, per_token)),
                source,
            } => write!(f, "{} {base},{per_token}: {source}", n(*setting)),
            Error::StaticAboveMax { k, max_draft_len } => write!(
                f,
                "{} static:{k}: the draft length is above {} {max_draft_len}",
                n(S::Policy),
                n(S::MaxDraftLen)
            ),
            Error::PhaseSecs(v) => write!(
                f,
                "{} {v}: must be a number of seconds above 0",
                n(S::PhaseSecs)
            ),
            Error::Persistence(v) => write!(
                f,
                "{} {v}: must be a number of steps of at least 1",
                n(S::Persistence)
            ),
            Error::VirtualTimeWithoutStepTime => write!(
                f,
                "{} needs {} of at least 1 (a step must take time)",
                n(S::VirtualTime),
                n(S::StepUs)
            ),
            Error::ZeroCounts => write!(
                f,
                "{}, {}, {} and {} must be at least 1",
                n(S::Workers),
                n(S::MaxBatch),
                n(S::Interval),
                n(S::Update)
            ),
            Error::UpdateLongerThanInterval {
                update_ms,
                interval_ms,
            } => write!(
                f,
                "{} {update_ms} is longer than {} {interval_ms}: the controller is updated at \
                 least once per metrics interval",
                n(S::Update),
                n(S::Interval)
            ),
            Error::TooFewTracedRequests {
                requests,
                workers,
                idle,
            } => write!(
                f,
                "the trace has {requests} requests with an output position to replay: too few \
                 for {workers} engine threads (engine thread {idle} would have none); use fewer \
                 {}",
                n(S::Workers)
            ),
            Error::DraftAboveTraceCap { max_draft_len, cap } => write!(
                f,
                "{} {max_draft_len} is above the trace's cap {cap}: a proposal of the cap's \
                 length may have been longer, so longer drafts cannot be replayed (generate the \
                 trace with a larger --cap)",
                n(S::MaxDraftLen)
            ),
            Error::TracesMissing => write!(
                f,
                "the traces workload needs traces ({} FILE)",
                n(S::Traces)
            ),
            Error::TracesForAnotherWorkload(w) => {
                write!(f, "traces are given, but the workload is {w}")
            }
            Error::OracleWithoutTraces => write!(
                f,
                "{} oracle needs a trace ({} FILE): it drafts what the trace says the verifier \
                 accepts",
                n(S::Policy),
                n(S::Traces)
            ),
            Error::ExhaustWithoutTraces => write!(f, "replaying each request once needs traces"),
            Error::ZeroStepsPerUpdate => {
                write!(f, "the controller's update period must be at least 1 step")
            }
            Error::StepsPerUpdateInRealTime => {
                write!(f, "updates every N engine steps need virtual time")
            }
            Error::ExhaustWithoutStepUpdates => write!(
                f,
                "replaying each request once needs updates every N engine steps"
            ),
            Error::TooManyStepsPerInterval {
                base,
                step_us,
                shortest_step_secs,
                interval_ms,
                steps,
            } => write!(
                f,
                "{} with BASE {base:e} and {} {step_us}: in virtual time a step without drafts \
                 lasts {shortest_step_secs:.3e} s, so one {interval_ms} ms metrics interval \
                 would take {steps:.3e} engine steps per engine thread (at most {} steps, so \
                 that every interval is logged within about a second): raise BASE or {}",
                n(S::CostLinear),
                n(S::StepUs),
                MAX_STEPS_PER_INTERVAL,
                n(S::StepUs)
            ),
            Error::TooManyPhases {
                phase_secs,
                seconds,
                phases,
            } => write!(
                f,
                "{} {phase_secs:e}: a {seconds} s run would have {phases:.3e} phases of the \
                 transition workload (at most {} phases, one summary entry each): make the \
                 phases longer or the run shorter",
                n(S::PhaseSecs),
                MAX_PHASES
            ),
            Error::PhasesShorterThanInterval {
                phase_secs,
                interval_ms,
            } => write!(
                f,
                "{} {phase_secs} is shorter than the metrics interval ({} {interval_ms}): a run \
                 without end ({} 0) may not count phases, one summary entry each, faster than it \
                 logs intervals",
                n(S::PhaseSecs),
                n(S::Interval),
                n(S::Seconds)
            ),
            Error::MissingPlan(what) => write!(f, "{what}"),
            Error::RecorderLength => write!(f, "the recorder's K is not the config's"),
            Error::RecorderStates { needed } => write!(
                f,
                "per-state needs a recorder with {needed} request states (engine::recorder)"
            ),
            Error::Spawn { what, source } => write!(f, "cannot start {what}: {source}"),
            Error::Panicked(message) => write!(f, "an engine thread panicked: {message}"),
            Error::Trace { name, source } => write!(f, "{name}: {source}"),
            Error::TraceFile { name, source } => write!(f, "{name}: {source}"),
            Error::TraceEmpty { name } => write!(
                f,
                "{name}: no request has an output position to replay (every output_tokens is 0 \
                 or 1)"
            ),
            Error::MaxDraftLen {
                max_draft_len,
                source,
            } => write!(f, "{} {max_draft_len}: {source}", n(S::MaxDraftLen)),
            Error::WhatIfCost(e) => write!(f, "the step cost: {e}"),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, &Setting::field)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Metrics(e) | Error::MaxDraftLen { source: e, .. } => Some(e),
            Error::StepCost { source, .. } => Some(source),
            Error::Spawn { source, .. } | Error::TraceFile { source, .. } => Some(source),
            Error::Trace { source, .. } => Some(source),
            Error::WhatIfCost(e) => Some(e),
            _ => None,
        }
    }
}

impl From<specdec_metrics::ConfigError> for Error {
    fn from(e: specdec_metrics::ConfigError) -> Self {
        Error::Metrics(e)
    }
}

/// An [`Error`]'s message with the settings named by a program
/// ([`Error::naming`]).
pub struct Named<'a> {
    error: &'a Error,
    name: &'a dyn Fn(Setting) -> &'static str,
}

impl fmt::Display for Named<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.write(f, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_names_settings_by_field_or_by_the_programs_names() {
        let e = Error::UpdateLongerThanInterval {
            update_ms: 2000,
            interval_ms: 1000,
        };
        assert_eq!(
            e.to_string(),
            "`update` (ms) 2000 is longer than `interval` (ms) 1000: the controller is updated \
             at least once per metrics interval"
        );
        let flag = |s: Setting| match s {
            Setting::Update => "--update-ms",
            Setting::Interval => "--interval-ms",
            other => other.field(),
        };
        assert_eq!(
            e.naming(&flag).to_string(),
            "--update-ms 2000 is longer than --interval-ms 1000: the controller is updated at \
             least once per metrics interval"
        );
    }

    #[test]
    fn the_library_errors_are_the_sources() {
        let e = Error::from(k_of_zero());
        assert!(std::error::Error::source(&e).is_some());
        assert_eq!(e.to_string(), k_of_zero().to_string());
    }

    fn k_of_zero() -> specdec_metrics::ConfigError {
        specdec_metrics::AcceptanceHistogram::new(0).unwrap_err()
    }
}
