//! The engine model of a simulated speculative-decoding serving engine
//! that embeds `specdec-metrics` the way a real one would (see `README.md`
//! beside `Cargo.toml`): what the command line's `whatif` replays traces
//! through, and what the programs of the `specdec-demo` package (`demo/`:
//! the `serving_engine` demo and the `policy_table`) run. A plain library:
//! no features, no HTTP, runtime or flag parser.
//!
//! It is published only because the command line (`specdec-metrics-cli`)
//! needs it to install from crates.io: it is the library's test bed, and
//! its API follows the command line's and the demo's needs. For the
//! twenty lines an engine needs, read `examples/embed.rs` at the
//! repository root instead.
//!
//! # Modules
//!
//! - [`engine`]: the simulated engine. Engine threads, each with its own
//!   `Worker`, a continuous batch and a drafting [`policy::Policy`]; a
//!   coordinator (the metrics thread) that snapshots the `Recorder` every
//!   update period, feeds the controller and publishes its plan; real or
//!   virtual time. [`engine::run`] runs one simulation and returns its
//!   [`summary::Summary`].
//! - [`whatif`]: every policy replayed on the same traces through one
//!   engine model, and the result the command line's `whatif` renders
//!   ([`whatif::WhatIf`]).
//! - [`corpus`]: every policy against each trace's best static length
//!   over a grid of `K`, costs and batch sizes, on sets of traces (one
//!   per repository), summed up per cell by the median and the minimum
//!   over traces: what the command line's `corpus` prints.
//! - [`workload`]: what the requests look like: how well the proposer
//!   predicts them, by phase of the run and kind of request, and the fake
//!   verifier.
//! - [`policy`]: the one table of drafting policies (name, parsing, help
//!   text, per-request or batch, a stable index, how the engine builds
//!   each) that every program reads, and the `--policy` values.
//! - [`drafting`]: what a drafting policy is (the `Policy` trait and what
//!   it sees of a request), the engine model's own policies (a static
//!   draft length, the controller's shared plan, the state controller's
//!   per-state plan, the oracle), and the cost of a step whose requests
//!   draft different lengths.
//! - [`peers`]: the adaptive rules of SGLang and vLLM #44336 (one length
//!   per step), and the per-request rules of SmartSpec and vLLM's adaptive
//!   verification, as policies.
//! - [`state_rule`]: other definitions of a request's state than the
//!   library's `RequestState`, to measure it against (`--state-rule`).
//! - [`summary`]: what a run achieved, per phase and overall (the JSON
//!   summary the demo prints and the policy table compares).
//! - [`error`]: the simulator's errors, which name settings rather than
//!   any program's flags (each program names them by its own).
//! - [`barrier`]: the barrier of a virtual-time run, which a panicking
//!   thread breaks so the run fails instead of hanging.
//! - [`rng`]: the seeded random numbers every part draws from.
//! - [`stdio`]: whether standard output was closed before the start
//!   (`>&-`), for the programs.
//! - [`trace_set`]: exact n-gram what-if traces (what an n-gram drafter
//!   could propose at each output position and how much of it the output
//!   confirms) held for replay (`--traces`, the `traces` workload); their
//!   format, which `specdec-metrics ngram` writes, is
//!   `specdec_ingest::trace`.
//!
//! A virtual-time run is a function of its [`engine::Config`]: the same
//! settings and seed give the same summary, whatever the machine.

pub mod barrier;
pub mod corpus;
pub mod drafting;
pub mod engine;
pub mod error;
pub mod peers;
pub mod policy;
pub mod rng;
pub mod runs;
pub mod state_rule;
pub mod stdio;
pub mod step_states;
pub mod summary;
pub mod trace_set;
pub mod whatif;
pub mod workload;
