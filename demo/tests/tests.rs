//! The demo's integration tests, one test binary (as ripgrep's
//! `tests/tests.rs` and the command line's `cli/tests/tests.rs`): each
//! module runs the programs as processes.
//! `cargo test -p specdec-demo --test tests MODULE::` runs one of them.

mod policy_table_pipes;
mod serving_engine_demo;
mod traces;
