//! The programs that show `specdec-metrics` embedded in a serving engine,
//! built on the engine model of `specdec-sim` (see `sim/README.md`):
//!
//! - `serving_engine` (`cargo run --release -p specdec-demo`): the demo.
//!   Engine threads record every verify step, a metrics thread logs
//!   vLLM-style interval lines and closes the drafting loop, `/metrics` is
//!   served over HTTP, and the engine-wide report and a summary are printed
//!   at the end;
//! - `policy_table` (`cargo run --release -p specdec-demo --bin
//!   policy_table`): every drafting policy on every workload, in virtual
//!   time with the same seeds, as one markdown table.
//!
//! This crate is not published: it is the library's showcase. For the
//! twenty lines an engine needs, read `examples/embed.rs` at the
//! repository root instead.
//!
//! # Modules
//!
//! - [`policy_table`]: the `policy_table` program (its binary only calls
//!   [`policy_table::main`]), here so that its list of policies and its
//!   tables can be tested against a table of policies with a policy
//!   registered by the test.
//! - [`engine_metrics`]: vLLM's engine metrics (running requests, generated
//!   tokens, inter-token latency) exported next to the
//!   speculative-decoding families, so vLLM's dashboards work against the
//!   demo.

pub mod engine_metrics;
pub mod policy_table;
