//! Acceptance histograms by draft length for speculative decoding: recorded
//! lock-free from many worker threads, reported the way vLLM does, and
//! turned into the draft length to use.
//!
//! In speculative decoding a proposer drafts `k` tokens and the target model
//! accepts `a <= k` of them in one verify step. Engines with variable
//! drafting budgets choose `k` per step, so the classic totals (steps,
//! drafted, accepted) lose the shape of the outcome: the steps `(1,1),(3,2)`
//! and `(2,1),(2,2)` both give 2 steps, 4 drafted and 3 accepted tokens. This
//! crate keeps, for every observed draft length `k`, the `k + 1` counts of
//! accepted `0..=k` — at most `(K+1)(K+2)/2` counters for a maximum draft
//! length `K`, however long the run — and derives every classic figure from
//! them.
//!
//! # Three layers
//!
//! Data flows one way, record → report → draft, and the imports follow it:
//! `record` imports neither of the others, `report` imports only `record`
//! (its plan gauge reads any [`DraftLenGauge`], a trait of its own that the
//! draft layer's [`SharedPlan`] implements), and `draft` may import both.
//! Nothing downstream grows the API of what is upstream.
//!
//! | layer | what it does | main types |
//! | --- | --- | --- |
//! | **record** | what an engine thread touches: one relaxed load and store per verify step, snapshots at any time | [`Recorder`], [`Worker`], [`AcceptanceHistogram`]; for lookup drafters, opt-in: [`ProposalTracker`] |
//! | **report** | what leaves the process: vLLM's JSON report plus the histogram, Prometheus counters | serde on [`AcceptanceHistogram`] ([`REPORT_KEYS`]), `SpecDecodeCollector` (feature `prometheus`), `MetricsPublisher` (feature `metrics`), `PrometheusCrateCollector` (feature `tikv-prometheus`), `OpenTelemetryExporter` (feature `opentelemetry`) |
//! | **draft** | what the histogram is for: the draft length to use | [`Continuation`], [`StepCost`], [`Advisor`], [`DraftController`], [`SharedPlan`], [`BatchTable`]; per request state: [`StateSpace`], [`StateController`], [`SharedStateTable`] |
//!
//! Each layer's errors are made and defined in that layer (one error
//! module per layer):
//!
//! | layer | errors |
//! | --- | --- |
//! | **record** | [`ConfigError`] (a maximum draft length or state count out of range), [`ObserveError`] (an observation out of range), [`ProposalError`] (a proposal a tracker cannot take), [`MergeError`] (a sum that would overflow, naming a [`HistogramCounter`]) |
//! | **report** | [`ReportError`] (a JSON report that is not one), [`NameError`] (a metric prefix or label that is not a valid name) |
//! | **draft** | [`CostError`] (naming a [`CostTerm`]), [`ParameterError`], [`BatchTableError`] ([`BatchTableErrorKind`], [`BucketSpan`]), [`AdviceError`], [`EngineCountersError`] |
//!
//! Every public item is at the crate root (the modules are private), so
//! each has exactly one path: `specdec_metrics::Recorder`,
//! `specdec_metrics::DraftController`, and so on.
//!
//! # Vocabulary
//!
//! - `k`: a step's draft length, after grammar adjustment (`drafted` in
//!   [`Worker::observe`]); `a`: the drafts the verifier accepted, bonus
//!   token excluded (`accepted`).
//! - `K`, `max_draft_len`: the configured maximum draft length (vLLM's
//!   `num_spec_tokens` / `num_speculative_tokens`, TensorRT-LLM's
//!   `max_draft_len`), in `1..=64`.
//! - `budget`: the draft length a scheduler step gave its batch
//!   ([`Worker::observe_scheduled`]); `0` when it chose not to speculate.
//! - Positions: the theory of [`Continuation`] counts draft positions from
//!   1; the report's per-position lists and the Prometheus label `position`
//!   count from 0 (entry `i - 1` is position `i`).
//!
//! What every number means is specified in the reference, the file
//! `docs/reference.md` of the source repository (and of the published
//! crate).
//!
//! # Usage
//!
//! Engine-wide: one [`Recorder`], a [`Worker`] per engine thread, snapshots
//! from a metrics thread at any time:
//!
//! ```
//! use specdec_metrics::Recorder;
//!
//! let recorder = Recorder::new(4)?;
//! std::thread::scope(|s| {
//!     for t in 0..2 {
//!         let recorder = &recorder;
//!         s.spawn(move || {
//!             let worker = recorder.worker(); // once per thread
//!             for step in 0..1000 {
//!                 let k = (step + t) % 5;
//!                 worker.observe(k, k / 2).expect("valid step");
//!             }
//!         });
//!     }
//!     // A metrics thread may snapshot while the workers run.
//!     let _interval = recorder.snapshot();
//! });
//! let total = recorder.snapshot();
//! assert_eq!(total.num_spec_steps(), 2000);
//! # Ok::<(), specdec_metrics::ConfigError>(())
//! ```
//!
//! A per-request accumulator, serialized to vLLM's per-request
//! `speculative_decoding` keys plus the new histogram:
//!
//! ```
//! use specdec_metrics::AcceptanceHistogram;
//!
//! let mut request = AcceptanceHistogram::new(3)?;
//! for (drafted, accepted) in [(3, 0), (3, 3), (3, 2), (3, 3), (3, 1)] {
//!     request.observe(drafted, accepted)?;
//! }
//! assert_eq!(request.mean_acceptance_length(), 2.8);
//! let report = serde_json::to_value(&request)?;
//! assert_eq!(report["acceptance_histogram_by_draft_length"]["3"], serde_json::json!([1, 1, 1, 2]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Closing the loop: the metrics thread feeds each interval to a
//! [`DraftController`] and publishes its plan; engine threads read it with
//! one relaxed load per step:
//!
//! ```
//! use specdec_metrics::{DraftController, Recorder, SharedPlan, StepCost};
//!
//! let recorder = Recorder::new(8)?;
//! let mut controller = DraftController::new(8, StepCost::linear(1.0, 0.1)?)?;
//! let plan = SharedPlan::new(controller.plan());
//! let mut previous = recorder.snapshot();
//! let worker = recorder.worker();
//! for step in 0..10_000u64 {
//!     let k = plan.draft_len_for(step); // engine thread: what to draft
//!     worker.observe(k, k.min(5))?; // a drafter always right up to 5 tokens
//!     if step % 1000 == 999 {
//!         // metrics thread: once per interval
//!         let now = recorder.snapshot();
//!         controller.update(&now.delta_since(&previous)?);
//!         plan.publish(controller.plan());
//!         previous = now;
//!     }
//! }
//! assert_eq!(controller.draft_len(), 5);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Guarantees
//!
//! - **Recording is cheap.** [`Worker::observe`] is one relaxed load and one
//!   relaxed store of one counter in the worker's own cache-padded shard: no
//!   lock, no read-modify-write, no allocation, no system call.
//!   [`AcceptanceHistogram::observe`] is one plain increment.
//! - **Snapshots are consistent.** Each observation changes exactly one
//!   counter and every figure is derived from the counters, so every
//!   [`Recorder::snapshot`] is the histogram of some set of observations and
//!   contains every observation that happened-before it started; and no
//!   bucket or counter in it is smaller than in a snapshot that
//!   happened-before it, so a metrics thread that exports its successive
//!   snapshots never shows a counter going back.
//! - **Nothing is lost.** A dropped [`Worker`] (also during a panic) hands
//!   its shard, counts and all, to the next worker; counts are never moved,
//!   flushed or reset. Shards never outnumber the peak number of live
//!   workers, so memory is bounded by that peak times the shard size (plus a
//!   fixed set of stripes for [`Recorder::observe`]).
//! - **Bad input is counted, not dropped.** `a > k`, `k > K` or a
//!   scheduled budget above `K` returns an [`ObserveError`] naming the
//!   values and increments `num_rejected_observations`; nothing panics.
//! - **Reports are strict.** Reading a report back rebuilds the histogram
//!   and rejects any report whose figures disagree with its rows
//!   ([`ReportError`]), so reports of several replicas can be merged
//!   offline with [`AcceptanceHistogram::merge`].
//! - **Decisions are sound.** Estimates carry their uncertainty (Beta
//!   posteriors, exact moments of the chain); the controller switches only
//!   on strong evidence, explores so a choice can grow again, and follows a
//!   change of regime within its memory.
//!
//! # Comparison with similar approaches
//!
//! - *A `Mutex<[u64; N]>`* costs a lock round trip per step and serialises
//!   workers; *one shared array of `fetch_add` counters* bounces cache lines
//!   between cores. Both are measured against this crate in `benches/`.
//! - *A `prometheus-client` `Family` of counters labelled by
//!   `(draft_length, accepted)`* hashes the labels and takes a lock on every
//!   increment, and its per-family totals can be read torn from the buckets.
//! - *Thread-local counters flushed into a global* (folly's
//!   `ThreadCachedInt`, the `prometheus` crate's local counters) can lose or
//!   double-count while flushing; this crate never moves a count.
//!
//! # Performance
//!
//! See `benches/README.md` for the measured tables; in short, a
//! `Worker::observe` costs about what incrementing a local non-atomic array
//! costs.
//!
//! # Implementation notes
//!
//! The concurrency model — who writes which memory, every ordering and the
//! happens-before edge it provides — is documented at the top of
//! `src/record/recorder.rs` and `src/record/shard.rs`; `src/record/sync.rs`
//! is the only file that names atomics and locks, switching to `loom` under
//! `cfg(specdec_loom)` so the models in `loom-tests/` check the shipped code. The
//! crate has no `unsafe` code.
//!
//! # Cargo features
//!
//! - `prometheus`: `SpecDecodeCollector`, a `prometheus-client` collector
//!   for the nine counter families ([`METRIC_FAMILIES`]) and optionally the
//!   gauge of a [`SharedPlan`]'s draft length; `TextFormat` and
//!   `encode_registry` for a `/metrics` endpoint that serves both text
//!   formats.
//! - `metrics`: `MetricsPublisher`, which hands the same families (names,
//!   labels, help texts, values) to the recorder of the `metrics` facade
//!   that the engine installed, for example `metrics-exporter-prometheus`'s,
//!   from the engine's metrics loop or a background thread
//!   (`PublisherHandle`).
//! - `tikv-prometheus`: `PrometheusCrateCollector`, the same families as a
//!   collector of the `prometheus` crate (tikv's), for a
//!   `prometheus::Registry` (`docs/prometheus-crate.md`).
//! - `opentelemetry`: `OpenTelemetryExporter`, the same families as
//!   observable counters (and the plan's gauge) of an OpenTelemetry
//!   `Meter`, with `vllm:` mapped to `vllm_` (`docs/opentelemetry.md`).
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

mod draft;
mod record;
mod report;

pub use draft::{
    AdviceError, Advisor, BatchBucket, BatchEntry, BatchTable, BetaPrior, Candidate, Comparison,
    Continuation, ContinuationBounds, CounterSeries, DEFAULT_UPDATE_OBSERVATIONS, DraftController,
    DraftPlan, DraftSignal, EXPLORATION_PERIOD, EngineCounters, EngineCountersError, Exactness,
    Extrapolation, Identified, MAX_STEP_COST, MIN_ROW_STEPS, MIN_STEP_COST, PositionBounds,
    PositionEstimate, Recommendation, RequestState, SharedPlan, SharedStatePlan, SharedStateTable,
    StateController, StatePlan, StateSpace, StepCost, TrtllmSchedule, VllmSchedule,
};
pub use draft::{
    BatchTableError, BatchTableErrorKind, BucketSpan, CostError, CostTerm, ParameterError,
};
pub use record::{ConfigError, HistogramCounter, MergeError, ObserveError};
pub use report::{DraftLenGauge, NameError, ReportError};

/// The former name of [`HistogramCounter`]; it clashed with the counter
/// types of `metrics` and `prometheus-client`.
#[deprecated(since = "0.2.0", note = "renamed HistogramCounter")]
pub type Counter = HistogramCounter;
pub use record::{
    AcceptanceHistogram, MAX_MAX_DRAFT_LEN, MAX_STATES, MIN_MAX_DRAFT_LEN, ProposalError,
    ProposalOutcome, ProposalSink, ProposalTracker, Recorder, RecorderBuilder, Worker,
};
#[cfg(feature = "opentelemetry")]
#[cfg_attr(docsrs, doc(cfg(feature = "opentelemetry")))]
pub use report::OpenTelemetryExporter;
#[cfg(feature = "tikv-prometheus")]
#[cfg_attr(docsrs, doc(cfg(feature = "tikv-prometheus")))]
pub use report::PrometheusCrateCollector;
pub use report::{
    DEFAULT_METRIC_PREFIX, FAMILY_LABELS, METRIC_FAMILIES, PLAN_GAUGE, PROPOSAL_FAMILIES,
    PROPOSAL_FAMILY_LABELS, PROPOSAL_REPORT_KEYS, REPORT_KEYS, VLLM_METRIC_PREFIX,
};
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub use report::{MetricsPublisher, PublisherHandle};
#[cfg(feature = "prometheus")]
#[cfg_attr(docsrs, doc(cfg(feature = "prometheus")))]
pub use report::{SpecDecodeCollector, TextFormat, encode_registry};

/// The README's examples, run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The reference's examples, run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../docs/reference.md")]
pub struct ReferenceDoctests;

/// The `metrics` facade page's example, run as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../docs/metrics-facade.md")]
pub struct MetricsFacadeDoctests;

/// The `prometheus` crate page's example, run as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../docs/prometheus-crate.md")]
pub struct PrometheusCrateDoctests;

/// The OpenTelemetry page's example, run as a doc test.
#[cfg(doctest)]
#[doc = include_str!("../docs/opentelemetry.md")]
pub struct OpenTelemetryDoctests;
