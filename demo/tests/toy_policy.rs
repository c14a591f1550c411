//! Adding a policy is one file and one row of the engine model's table of
//! policies: a toy policy of this test's own, registered before anything
//! reads the table (`specdec_sim::policy::register`), is among the policy
//! table's policies and gets a row of its own on a trace, with no other
//! edit. A test binary of its own: the registered row joins every list of
//! policies of the process.

use std::sync::Arc;

use clap::Parser as _;
use specdec_demo::policy_table::{self, Args};
use specdec_sim::policy::{self, Build, Policy, PolicyDef, PolicySpec};
use specdec_sim::trace_set::TraceSet;

/// Drafts two tokens (at most `K`) at every step.
struct Toy {
    k: usize,
}

impl Policy for Toy {
    fn budget(&mut self, _step: u64) -> usize {
        self.k
    }
    fn after_step(&mut self, _budget: usize, _outcomes: &[(usize, usize)]) {}
    fn chosen(&self) -> usize {
        self.k
    }
}

/// The toy's row: index 10, the first the engine model leaves free.
static TOY: PolicyDef = PolicyDef {
    name: "toy",
    index: 10,
    per_request: false,
    help: "the test's toy rule, two tokens",
    about: "the test's toy",
    build: Build::Rule(|s| {
        Box::new(Toy {
            k: s.max_draft_len.min(2),
        })
    }),
};

/// Requests that copy runs of 12 tokens, then find nothing.
fn trace() -> String {
    let mut text = String::from(
        "{\"specdec_trace\":1,\"tokenizer\":\"o200k_base\",\"rule\":\"vllm\",\"min_n\":2,\
         \"max_n\":5,\"cap\":64,\"eos\":true,\"greedy\":true}\n",
    );
    for i in 0..6 {
        let m: usize = 60;
        let (mut proposal, mut matched) = (Vec::new(), Vec::new());
        for t in 1..m {
            let copying = (t / 12 + i) % 2 == 0;
            proposal.push(if copying { 64 } else { 0 });
            matched.push(if copying { (12 - t % 12).min(m - t) } else { 0 });
        }
        text += &serde_json::json!({
            "id": i, "output_tokens": m, "proposal": proposal, "match": matched,
        })
        .to_string();
        text.push('\n');
    }
    text
}

#[test]
fn a_registered_policy_is_in_the_policy_table_and_the_demos_help() {
    policy::register(&TOY).expect("registered before the table is read");
    let toy: PolicySpec = "toy".parse().unwrap();
    let all = policy_table::policies();
    assert_eq!(all.last(), Some(&toy), "{all:?}");
    assert!(
        policy::choices_help().ends_with(" or toy (the test's toy rule, two tokens)"),
        "{}",
        policy::choices_help()
    );
    let traces = Arc::new(TraceSet::read(trace().as_bytes(), "toy").unwrap());
    let args =
        Args::try_parse_from(["policy_table", "--phase-seconds", "1", "--jobs", "2"]).unwrap();
    let table = policy_table::traces_table(&args, traces);
    let row = table
        .lines()
        .find(|l| l.starts_with("| toy |"))
        .unwrap_or_else(|| panic!("no toy row:\n{table}"));
    // A static rule: no switches.
    assert!(row.ends_with("| 0 |"), "{row}");
}
