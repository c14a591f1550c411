//! The library's integration tests, one test binary (as ripgrep's
//! `tests/tests.rs`): each module is one subject. Kept apart, each in a
//! binary of its own: the tests that install a global allocator that
//! counts (`no_allocation`, `drafter_states`, `metrics_publisher`) or a
//! global `metrics` recorder (`metrics_global`).
//! `cargo test --test tests MODULE::` runs one subject.

mod exposition_text;
mod sim;

mod advisor_coverage;
mod advisor_estimates;
mod advisor_properties;
mod advisor_theory;
mod batch_table;
mod controller;
mod controller_faults;
mod doc_links;
mod embed_example;
mod engine_counters;
mod histogram_properties;
mod histogram_vectors;
mod metrics_exporter_example;
mod opentelemetry_exporter;
mod prometheus_crate_collector;
mod prometheus_exposition;
mod proposal_exporters;
mod proposals;
mod recorder_shards;
mod recorder_states;
mod recorder_stress;
mod report_malformed;
mod request_state;
mod shared_plan;
