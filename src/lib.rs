//! placeholder crate docs
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod error;
mod histogram;
pub mod layout;
mod report;

pub use error::{ConfigError, Counter, MergeError, ObserveError, ReportError};
pub use histogram::AcceptanceHistogram;
pub use report::REPORT_KEYS;
