//! Adding a policy is one file and one row of the engine model's table of
//! policies: a toy policy of this test's own, registered before anything
//! reads the table (`specdec_sim::policy::register`), reaches
//! `whatif --policies`, `whatif --help`, the table, the report and the
//! plot (in a colour of its own) with no other edit. A test binary of its
//! own: the registered row joins every what-if of the process.

use clap::FromArgMatches as _;
use specdec_sim::policy::{self, Build, Policy, PolicyDef};

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
fn a_registered_policy_reaches_help_policies_table_report_and_plot() {
    policy::register(&TOY).expect("registered before the table is read");
    let dir = std::env::temp_dir().join(format!("specdec-toy-policy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let traces = dir.join("traces.jsonl");
    std::fs::write(&traces, trace()).unwrap();

    // --help: the list of --policies and the description.
    let mut command = specdec_metrics_cli::command();
    let help = command
        .find_subcommand_mut("whatif")
        .unwrap()
        .render_long_help()
        .to_string();
    assert!(help.contains("smartspec, vllm-av, oracle, toy);"), "{help}");
    assert!(
        help.contains(
            "SmartSpec, vLLM's adaptive verification and the test's toy, and per-step hindsight \
             (`oracle`)"
        ),
        "{help}"
    );

    // whatif --policies static:2,toy, with its report and plot.
    let (report, plot) = (dir.join("toy.json"), dir.join("plot.svg"));
    let matches = specdec_metrics_cli::command()
        .try_get_matches_from([
            "specdec-metrics".as_ref(),
            "whatif".as_ref(),
            "--max-draft-len".as_ref(),
            "4".as_ref(),
            "--cost-linear".as_ref(),
            "1,0.1".as_ref(),
            "--policies".as_ref(),
            "static:2,toy,adaptive".as_ref(),
            "--report".as_ref(),
            "toy".as_ref(),
            report.as_os_str(),
            "--plot".as_ref(),
            plot.as_os_str(),
            "--format".as_ref(),
            "json".as_ref(),
            traces.as_os_str(),
        ])
        .expect("--policies takes the toy");
    let args = specdec_metrics_cli::cmd::whatif::Args::from_arg_matches(
        matches.subcommand_matches("whatif").unwrap(),
    )
    .unwrap();
    specdec_metrics_cli::cmd::whatif::run(args).unwrap();
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    // The toy's own steps: two tokens drafted whenever there was a match.
    assert_eq!(report["num_spec_tokens"], 4, "{report}");
    let by_len = report["acceptance_histogram_by_draft_length"]
        .as_object()
        .unwrap();
    assert_eq!(by_len.keys().collect::<Vec<_>>(), ["2"], "{report}");
    let svg = std::fs::read_to_string(&plot).unwrap();
    // Its name at the right edge, in the colour of index 10 (orange).
    // (An SVG text element's opening tag, then its text on the next line.)
    let lines: Vec<&str> = svg.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("toy "))
        .unwrap_or_else(|| panic!("no toy label in the plot"));
    assert!(
        lines[at - 1].contains("fill=\"#FF7F0E\""),
        "{}",
        lines[at - 1]
    );

    // The table: a row of its own, of kind peer.
    let settings = specdec_sim::whatif::Settings {
        traces: std::sync::Arc::new(
            specdec_sim::trace_set::TraceSet::read(trace().as_bytes(), "toy").unwrap(),
        ),
        max_draft_len: 4,
        cost: specdec_metrics::StepCost::linear(1.0, 0.1).unwrap(),
        batch: 4,
        interval: 16,
        update_observations: None,
        seed: 1,
        state_space: None,
        run_signal: None,
        load: Default::default(),
    };
    let all = specdec_sim::whatif::policies(4);
    assert_eq!(all.last().unwrap().to_string(), "toy");
    let results = settings.replay_all(&all, 1, &|_, _, _| {}).unwrap();
    let whatif = specdec_sim::whatif::WhatIf {
        source: "toy".into(),
        traces: std::sync::Arc::clone(&settings.traces),
        settings,
        results,
    };
    let table = specdec_metrics_cli::render::whatif::table(&whatif);
    let row = table
        .lines()
        .find(|l| l.starts_with("toy "))
        .unwrap_or_else(|| panic!("no toy row:\n{table}"));
    assert!(row.ends_with(" 0"), "a static rule never switches: {row}");
    let json = serde_json::to_value(specdec_metrics_cli::render::whatif::json(&whatif)).unwrap();
    let toy = json["policies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["policy"] == "toy")
        .unwrap();
    assert_eq!(toy["kind"], "peer");
    let _ = std::fs::remove_dir_all(&dir);
}
