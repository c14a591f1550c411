//! The engine model's integration tests, one test binary (as ripgrep's
//! `tests/tests.rs` and the command line's `cli/tests/tests.rs`): each
//! module is one subject. `cargo test -p specdec-sim --test tests MODULE::`
//! runs one of them. The peer rules' tests (`peer_rules.rs`) are a binary
//! of their own: they install a counting global allocator
//! (`specdec-test-support`), which would count every other test's allocations
//! too.

mod step_cost;
mod workloads;
