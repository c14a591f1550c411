//! placeholder crate docs
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod error;
mod histogram;
pub mod layout;
mod recorder;
mod report;
mod shard;
mod sync;

pub use error::{ConfigError, Counter, MergeError, ObserveError, ReportError};
pub use histogram::AcceptanceHistogram;
pub use recorder::{Recorder, Worker};
pub use report::REPORT_KEYS;
