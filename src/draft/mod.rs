//! What the histogram is for: choosing the draft length.
//!
//! - `stats.rs`: the numeric core — Beta posteriors, the chain of
//!   continuation rates with its exact moments, goodput and the variance
//!   of a goodput difference, normal quantiles.
//! - [`Continuation`] (`continuation.rs`): the continuation counts
//!   `(s_i, n_i)` of a histogram and the chain estimate `E[a | k]`.
//! - [`EngineCounters`] (`engine.rs`): the same counts from the
//!   per-position counters engines export, with a verdict on exactness.
//! - [`StepCost`] (`cost.rs`): what a step costs at each draft length.
//! - [`Advisor`] (`advisor.rs`): one histogram and a cost to a
//!   [`Recommendation`].
//! - [`DraftController`] (`controller.rs`): the draft length interval by
//!   interval; [`DraftPlan`] and [`SharedPlan`] (`plan.rs`) hand it to
//!   engine threads.
//! - [`RequestState`], [`StateController`], [`StatePlan`],
//!   [`SharedStatePlan`] (`state.rs`): a draft length per request state.
//! - [`DraftSignal`], [`StateSpace`] (`space.rs`): states the drafter
//!   knows (matched n-gram length, short proposal, confidence) crossed
//!   with the recent-acceptance level; [`SharedStateTable`] (`table.rs`):
//!   the plan of up to 128 states, one relaxed load per request-step.
//! - [`BatchTable`] (`batch_table.rs`): one recommendation per batch-size
//!   bucket, as vLLM's and TensorRT-LLM's schedules.

mod advisor;
mod batch_table;
mod continuation;
mod controller;
mod cost;
mod engine;
mod error;
mod plan;
mod space;
mod state;
mod stats;
mod table;

pub use advisor::{
    AdviceError, Advisor, Candidate, Comparison, Extrapolation, MIN_ROW_STEPS, PositionEstimate,
    Recommendation,
};
pub use batch_table::{BatchBucket, BatchEntry, BatchTable, TrtllmSchedule, VllmSchedule};
pub use continuation::Continuation;
pub use controller::DEFAULT_UPDATE_OBSERVATIONS;
pub use controller::DraftController;
pub use cost::{MAX_STEP_COST, MIN_STEP_COST, StepCost};
pub use engine::{
    ContinuationBounds, CounterSeries, EngineCounters, EngineCountersError, Exactness, Identified,
    PositionBounds,
};
pub use error::{
    BatchTableError, BatchTableErrorKind, BucketSpan, CostError, CostTerm, ParameterError,
};
pub use plan::{DraftPlan, EXPLORATION_PERIOD, SharedPlan};
pub use space::{DraftSignal, StateSpace};
pub use state::{RequestState, SharedStatePlan, StateController, StatePlan};
pub use stats::BetaPrior;
pub use table::SharedStateTable;
