//! What an engine thread touches: the lock-free recording core.
//!
//! - [`AcceptanceHistogram`] (`histogram.rs`): owned counts of one request
//!   or one snapshot, and every figure derived from them.
//! - [`Recorder`] and [`Worker`] (`recorder.rs`): recording from many
//!   threads, snapshots for a metrics thread.
//! - `shard.rs`: the padded counter blocks, the append-only list of shards
//!   and the free list that hands a dropped worker's shard to the next one.
//! - `sum.rs`: the inner loop of a snapshot (summing many blocks of
//!   counters into owned totals).
//! - `layout.rs`: where each `(k, a)` lives in a flat array of counters.
//! - [`ProposalTracker`] (`proposal.rs`): a request's pending proposals
//!   of a lookup drafter, resolved against its output tokens into the
//!   proposal histogram.
//! - `sync.rs`: the only file that names atomics and locks (`std` or
//!   `loom`).

mod error;
mod histogram;
pub(crate) mod layout;
pub(crate) mod proposal;
mod recorder;
mod shard;
mod sum;
pub(crate) mod sync;

pub use error::{ConfigError, HistogramCounter, MergeError, ObserveError};
pub use histogram::AcceptanceHistogram;
pub use layout::{MAX_MAX_DRAFT_LEN, MIN_MAX_DRAFT_LEN};
pub use proposal::{ProposalError, ProposalOutcome, ProposalSink, ProposalTracker};
pub use recorder::{MAX_STATES, Recorder, RecorderBuilder, Worker};
