//! Every parser of text from outside the process: engines' `/metrics`
//! scrapes and Prometheus API answers, their log lines and per-request
//! responses, `replay`'s JSON-lines steps and the what-if trace format.
//!
//! Everything here is fuzzed (`fuzz/`), bounded in memory per line, and
//! returns typed errors that name settings, never a program's flags: the
//! command line maps them to its own.

#![deny(missing_docs)]

pub mod excerpt;
pub mod lines;
pub mod steps;
pub mod trace;
