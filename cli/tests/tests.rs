//! The command line's integration tests, one test binary (as ripgrep's
//! `tests/tests.rs`): each module is one subject, run against the built
//! `specdec-metrics` binary. `cargo test -p specdec-metrics-cli --test
//! tests MODULE::` runs one of them.

mod advise;
mod batch_table;
mod cli;
mod corpus;
mod corpus_script;
mod demo;
mod engines;
mod manual;
mod merge_overflow;
mod ngram;
mod vllm_log_formats;
mod whatif;
