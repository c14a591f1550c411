//! The demo and the policy table on an n-gram trace written here
//! (`--traces`): every policy runs on the logged requests, cycling through
//! the file.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A trace of requests that copy runs of 12 tokens, then find nothing.
fn write_trace(dir: &Path) -> PathBuf {
    let mut text = String::from(
        "{\"specdec_trace\":1,\"tokenizer\":\"o200k_base\",\"rule\":\"vllm\",\"min_n\":2,\
         \"max_n\":5,\"cap\":64,\"eos\":true,\"greedy\":true}\n",
    );
    for i in 0..12 {
        let m: usize = 80;
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
    let path = dir.join("traces.jsonl");
    std::fs::write(&path, text).unwrap();
    path
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("specdec-demo-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_policy_table_compares_every_policy_on_a_trace() {
    let dir = temp_dir("table");
    let out = Command::new(env!("CARGO_BIN_EXE_policy_table"))
        .args(["--phase-seconds", "1", "--traces"])
        .arg(write_trace(&dir))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let table = String::from_utf8(out.stdout).unwrap();
    for name in [
        "| none |",
        "| static:8 |",
        "| adaptive |",
        "| per-state |",
        "| sglang |",
        "| oracle |",
    ] {
        assert!(table.contains(name), "{name}: {table}");
    }
    assert!(table.contains("| 1.0000 |"), "the best static row: {table}");
    assert!(table.contains("12 requests"), "{table}");
    // The oracle picks each step's length afresh: its changes of length are
    // no switches of a choice, so the column has none for it, as in whatif.
    let oracle = table.lines().find(|l| l.starts_with("| oracle |")).unwrap();
    assert!(oracle.ends_with("| - |"), "{oracle}");
    assert!(
        table.contains("drafted lengths"),
        "the default cost rule: {table}"
    );
}

#[test]
fn a_bad_trace_is_refused_with_its_line() {
    let dir = temp_dir("bad");
    let bad = dir.join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"output_tokens\": 3, \"proposal\": [1], \"match\": [1]}\n",
    )
    .unwrap();
    for (program, args) in [
        (env!("CARGO_BIN_EXE_policy_table"), vec!["--traces"]),
        (
            env!("CARGO_BIN_EXE_serving_engine"),
            vec!["--virtual-time", "--seconds", "1", "--traces"],
        ),
    ] {
        let out = Command::new(program)
            .args(&args)
            .arg(&bad)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{program}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains("line 1"), "{program}: {err}");
    }
}

#[test]
fn the_demo_replays_a_trace_and_reports_it_as_the_workload() {
    let dir = temp_dir("demo");
    // The cost rule of a trace is drafted unless told, as in whatif and
    // the policy table.
    let out = Command::new(env!("CARGO_BIN_EXE_serving_engine"))
        .args(["--virtual-time", "--seconds", "3"])
        .args([
            "--metrics-addr",
            "127.0.0.1:0",
            "--max-draft-len",
            "16",
            "--traces",
        ])
        .arg(write_trace(&dir))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let summary: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(summary["workload"], "traces");
    assert_eq!(summary["cost_rule"], "drafted");
    // A 3-second run of 2 engine threads cycles through the 12 requests
    // (79 positions each) several times.
    let tokens = summary["overall"]["tokens"].as_u64().unwrap();
    assert!(tokens > 2 * 12 * 79, "{tokens}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("workload traces (12 requests"), "{stderr}");
}
