//! `merge` of reports whose sum does not fit in `u64`: it must fail with
//! exit status 2 and a message, and write nothing, rather than write a
//! saturated report that `merge` itself would then refuse to read.

use std::fs;
use std::path::PathBuf;

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::{Value, json};
use tempfile::TempDir;

fn bin() -> Command {
    assert_cmd::cargo::cargo_bin_cmd!("specdec-metrics")
}

/// A K = 1 report with `c00` steps (0, 0) and `c10` steps (1, 0); every
/// figure worked out by hand: steps c00 + c10, drafted c10, nothing
/// accepted (mean 1.0, rate 0.0).
fn k1_report(c00: u64, c10: u64) -> Value {
    let mut rows = serde_json::Map::new();
    if c00 != 0 {
        rows.insert("0".into(), json!([c00]));
    }
    if c10 != 0 {
        rows.insert("1".into(), json!([c10, 0]));
    }
    json!({
        "mean_acceptance_length": 1.0,
        "draft_acceptance_rate": 0.0,
        "acceptance_histogram": [c00 + c10, 0],
        "acceptance_histogram_by_draft_length": rows,
        "num_spec_steps": c00 + c10,
        "num_accepted_draft_tokens": 0,
        "num_draft_tokens": c10,
        "num_spec_tokens": 1,
        "num_accepted_tokens_per_pos": [0],
        "num_draft_tokens_per_pos": [c10],
        "num_undrafted_steps": 0,
        "num_rejected_observations": 0
    })
}

fn write(dir: &TempDir, name: &str, report: &Value) -> PathBuf {
    let path = dir.path().join(name);
    fs::write(&path, report.to_string()).unwrap();
    path
}

#[test]
fn merge_whose_step_total_overflows_exits_2_and_writes_nothing() {
    let dir = TempDir::new().unwrap();
    // u64::MAX steps (0, 0), and one step (1, 0): no bucket overflows, but
    // num_spec_steps would be u64::MAX + 1.
    let full = write(&dir, "full.json", &k1_report(u64::MAX, 0));
    let one = write(&dir, "one.json", &k1_report(0, 1));
    for (first, second) in [(&full, &one), (&one, &full)] {
        bin()
            .arg("merge")
            .arg(first)
            .arg(second)
            .assert()
            .code(2)
            .stdout("")
            .stderr(
                predicate::str::contains("num_spec_steps").and(predicate::str::contains(
                    second.file_name().unwrap().to_str().unwrap(),
                )),
            );
    }
}

#[test]
fn merge_up_to_u64_max_steps_writes_a_report_merge_reads_back() {
    let dir = TempDir::new().unwrap();
    let almost = write(&dir, "almost.json", &k1_report(u64::MAX - 1, 0));
    let one = write(&dir, "one.json", &k1_report(0, 1));
    let out = bin()
        .arg("merge")
        .arg(&almost)
        .arg(&one)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let merged: Value = serde_json::from_slice(&out).unwrap();
    // (u64::MAX - 1) + 1 steps: u64::MAX exactly; 1 draft token.
    assert_eq!(merged["num_spec_steps"], json!(u64::MAX));
    assert_eq!(merged["num_draft_tokens"], json!(1));
    // What merge wrote, merge reads: merging it alone gives it back.
    let again = write(&dir, "merged.json", &merged);
    bin()
        .arg("merge")
        .arg(&again)
        .assert()
        .success()
        .stdout(String::from_utf8(out).unwrap());
}
