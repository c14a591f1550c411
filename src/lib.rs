//! Acceptance histograms by draft length for speculative decoding, recorded
//! lock-free from many worker threads and reported the way vLLM does.
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
//! What every number means is specified in the reference, the file
//! `docs/reference.md` of the source repository (and of the published
//! crate): what one observation means (grammar-adjusted `k`, `k = 0` rows,
//! undrafted steps, the scheduler's draft budgets
//! ([`Worker::observe_scheduled`]), rejected observations), every derived figure and its
//! value when empty, every report key, the concurrency guarantees, the
//! Prometheus families and the command line's input and output formats.
//!
//! # Usage
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
//!   happened-before it (for example an earlier snapshot on the same
//!   thread), so a metrics thread that exports its successive snapshots
//!   never shows a counter going back.
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
//! See `benches/README.md` for the measured table; in short, a
//! `Worker::observe` costs about what incrementing a local non-atomic array
//! costs.
//!
//! # Implementation notes
//!
//! The concurrency model — who writes which memory, every ordering and the
//! happens-before edge it provides — is documented at the top of
//! `src/recorder.rs` and `src/shard.rs`; `src/sync.rs` is the only file that
//! names atomics and locks, switching to `loom` under `cfg(loom)` so the
//! models in `loom-tests/` check the shipped code. The crate has no
//! `unsafe` code.
//!
//! # Cargo features
//!
//! - `prometheus`: `prometheus::SpecDecodeCollector`, a `prometheus-client`
//!   collector for the nine counter families listed in the reference
//!   (`docs/reference.md`, section "Prometheus families"), and optionally
//!   the gauge of a [`SharedPlan`]'s draft length.
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

pub mod advisor;
pub mod batch_table;
pub mod controller;
mod error;
mod histogram;
pub mod layout;
#[cfg(feature = "prometheus")]
pub mod prometheus;
mod recorder;
mod report;
mod shard;
mod sync;

pub use advisor::{
    Advisor, BetaPrior, Candidate, MIN_ROW_STEPS, PositionEstimate, Recommendation, StepCost,
};
pub use batch_table::{
    BatchBucket, BatchEntry, BatchTable, BatchTableError, TrtllmSchedule, VllmSchedule,
};
pub use controller::{DraftController, DraftPlan, EXPLORATION_PERIOD, SharedPlan};
pub use error::{
    ConfigError, CostError, CostTerm, Counter, MergeError, ObserveError, ParameterError,
    ReportError,
};
pub use histogram::AcceptanceHistogram;
pub use recorder::{Recorder, Worker};
pub use report::REPORT_KEYS;

/// The README's examples, run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The reference's examples, run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../docs/reference.md")]
pub struct ReferenceDoctests;
