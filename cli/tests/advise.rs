//! Integration tests of `specdec-metrics advise`: the advice on reports that
//! `replay` wrote from traces written here, checked by hand and against the
//! library's `Advisor`; both formats; standard input; every error; the
//! warnings.

use std::fs;
use std::path::PathBuf;

use assert_cmd::Command;
use predicates::prelude::*;
use rand_xoshiro::SplitMix64;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use specdec_metrics::{AcceptanceHistogram, Advisor, Recommendation, StepCost};
use tempfile::TempDir;

fn bin() -> Command {
    assert_cmd::cargo::cargo_bin_cmd!("specdec-metrics")
}

/// A trace of `(k, a, steps)`: `steps` lines `{"drafted":k,"accepted":a}`
/// each, and the histogram it should give.
fn trace(max: usize, rows: &[(usize, usize, usize)]) -> (String, AcceptanceHistogram) {
    let mut text = String::new();
    let mut h = AcceptanceHistogram::new(max).unwrap();
    for &(k, a, steps) in rows {
        for _ in 0..steps {
            text.push_str(&format!("{{\"drafted\":{k},\"accepted\":{a}}}\n"));
            let _ = h.observe(k, a); // invalid steps are counted, as replay does
        }
    }
    (text, h)
}

/// Writes `trace` to a file, replays it into a report file, returns that.
fn replayed(dir: &TempDir, name: &str, max: usize, trace: &str) -> PathBuf {
    let steps = dir.path().join(format!("{name}.jsonl"));
    fs::write(&steps, trace).unwrap();
    let out = bin()
        .args([
            "replay",
            "--max-draft-len",
            &max.to_string(),
            "--max-warnings",
            "0",
        ])
        .arg(&steps)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let report = dir.path().join(format!("{name}.json"));
    fs::write(&report, out).unwrap();
    report
}

/// `advise ARGS`; its standard output, standard error, and exit status.
fn advise(args: &[&str], report: &PathBuf) -> (String, String, Option<i32>) {
    let out = bin().arg("advise").args(args).arg(report).output().unwrap();
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
        out.status.code(),
    )
}

/// What the library advises on `h`: the tests' one call of the advisor.
fn library_advice(advisor: &Advisor, h: &AcceptanceHistogram, cost: &StepCost) -> Recommendation {
    advisor.recommend(h, cost).unwrap()
}

/// The hand example, K = 2:
///
/// | steps | (k, a) | pos 1   | pos 2     |
/// |   5   | (2, 2) | success | success   |
/// |   2   | (2, 1) | success | failure   |
/// |   2   | (2, 0) | failure | -         |
/// |   1   | (1, 0) | failure | -         |
///
/// `n_1 = 10, s_1 = 7`: posterior `Beta(8, 4)`, mean 2/3; `n_2 = 7, s_2 =
/// 5`: `Beta(6, 3)`, mean 2/3. `E[a | 1] = 2/3`, `E[a | 2] = 2/3 + 4/9 =
/// 10/9`.
const HAND: &[(usize, usize, usize)] = &[(2, 2, 5), (2, 1, 2), (2, 0, 2), (1, 0, 1)];

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

#[test]
fn json_is_the_library_advice_and_matches_the_hand_computation() {
    let dir = TempDir::new().unwrap();
    let (text, h) = trace(2, HAND);
    let report = replayed(&dir, "hand", 2, &text);

    // cost(k) = 1 + 0.2 k: g(0) = 1, g(1) = (5/3) / 1.2 = 1.389,
    // g(2) = (19/9) / 1.4 = 1.508: draft 2, speedup 95/63.
    let (stdout, _, code) = advise(&["--max-draft-len", "2", "--cost-linear", "1,0.2"], &report);
    assert_eq!(code, Some(0));
    let library = library_advice(
        &Advisor::default(),
        &h,
        &StepCost::linear(1.0, 0.2).unwrap(),
    );
    assert_eq!(stdout, serde_json::to_string(&library).unwrap() + "\n");
    assert_eq!(stdout.lines().count(), 1);

    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["draft_len"], 2);
    assert!(close(
        v["expected_speedup"].as_f64().unwrap(),
        95.0 / 63.0,
        1e-12
    ));
    assert_eq!(v["num_spec_steps"], 10);
    let k1 = &v["candidates"][1];
    assert!(close(
        k1["expected_accepted"].as_f64().unwrap(),
        2.0 / 3.0,
        1e-12
    ));
    // Var(Beta(8, 4)) = 32 / (144 * 13); the 90% interval is mean ± 1.6449 sd.
    let half = 1.644_853_627 * (32.0_f64 / (144.0 * 13.0)).sqrt();
    let interval = k1["accepted_interval"].as_array().unwrap();
    assert!(close(interval[0].as_f64().unwrap(), 2.0 / 3.0 - half, 1e-8));
    assert!(close(interval[1].as_f64().unwrap(), 2.0 / 3.0 + half, 1e-8));
    let k2 = &v["candidates"][2];
    assert!(close(
        k2["expected_accepted"].as_f64().unwrap(),
        10.0 / 9.0,
        1e-12
    ));
    assert_eq!(k2["row_steps"], 9);
    // Row 2's own mean: (5 * 2 + 2 * 1) / 9.
    assert!(close(
        k2["row_mean_accepted"].as_f64().unwrap(),
        12.0 / 9.0,
        1e-12
    ));
    assert_eq!(v["positions"][1]["successes"], 5);
    assert_eq!(v["positions"][1]["trials"], 7);

    // Dearer drafts, cost(k) = 1 + 0.5 k: g(1) = 1.111 > g(2) = 1.056.
    let (stdout, _, _) = advise(&["--max-draft-len", "2", "--cost-linear", "1,0.5"], &report);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["draft_len"], 1);
    assert!(close(
        v["expected_speedup"].as_f64().unwrap(),
        10.0 / 9.0,
        1e-12
    ));
}

#[test]
fn json_follows_the_cost_table_prior_and_credible_level() {
    let dir = TempDir::new().unwrap();
    let (text, h) = trace(
        4,
        &[
            (4, 0, 40),
            (4, 1, 30),
            (4, 2, 30),
            (4, 4, 100),
            (2, 2, 50),
            (1, 0, 20),
        ],
    );
    let report = replayed(&dir, "r", 4, &text);
    let (stdout, _, code) = advise(
        &[
            "--max-draft-len",
            "4",
            "--cost-table",
            "20, 22.5,24,26.5,29",
            "--prior",
            "2,3",
            "--credible-level",
            "0.95",
        ],
        &report,
    );
    assert_eq!(code, Some(0));
    let advisor = Advisor::default()
        .with_prior(2.0, 3.0)
        .unwrap()
        .with_credible_level(0.95)
        .unwrap();
    let cost = StepCost::table(vec![20.0, 22.5, 24.0, 26.5, 29.0]).unwrap();
    let library = library_advice(&advisor, &h, &cost);
    assert_eq!(stdout, serde_json::to_string(&library).unwrap() + "\n");
    // Not the defaults: the flags reached the advisor.
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["prior"]["alpha"], 2.0);
    assert_eq!(v["credible_level"], 0.95);
    assert_eq!(v["candidates"][3]["cost"], 26.5);
}

#[test]
fn table_marks_the_choice_and_says_the_recommendation() {
    let dir = TempDir::new().unwrap();
    let (text, _) = trace(2, HAND);
    let report = replayed(&dir, "hand", 2, &text);
    let args = [
        "--max-draft-len",
        "2",
        "--cost-linear",
        "1,0.2",
        "--format",
        "table",
    ];
    let (stdout, _, code) = advise(&args, &report);
    assert_eq!(code, Some(0));
    let lines: Vec<&str> = stdout.lines().collect();
    let row = |k: &str| {
        lines
            .iter()
            .find(|l| l.split_whitespace().nth(usize::from(l.starts_with('*'))) == Some(k))
            .unwrap_or_else(|| panic!("no row k = {k}:\n{stdout}"))
    };
    assert!(row("2").starts_with('*'), "{stdout}");
    assert!(!row("1").starts_with('*'), "{stdout}");
    assert!(!row("0").starts_with('*'), "{stdout}");
    // k, E[accepted], interval, tokens/step, cost ...: E[a | 2] = 10/9.
    let cells: Vec<&str> = row("2").split_whitespace().collect();
    assert_eq!(&cells[1..3], ["2", "1.111"], "{stdout}");
    assert!(row("2").contains(" 1.508x "), "{stdout}");
    assert!(
        stdout.contains(
            "Recommendation: draft 2 tokens per step: expected speedup 1.51x over not speculating."
        ),
        "{stdout}"
    );
    // No position lacks trials here: nothing is marked as the prior's.
    assert!(!stdout.contains("prior:"), "{stdout}");

    let (stdout, _, _) = advise(
        &[
            "--max-draft-len",
            "2",
            "--cost-linear",
            "1,0.5",
            "--format",
            "table",
        ],
        &report,
    );
    assert!(stdout.contains("Recommendation: draft 1 token per step: expected speedup 1.11x"));
    let (stdout, _, _) = advise(
        &[
            "--max-draft-len",
            "2",
            "--cost-linear",
            "1,5",
            "--format",
            "table",
        ],
        &report,
    );
    assert!(
        stdout.contains("Recommendation: do not speculate (k = 0)"),
        "{stdout}"
    );
    assert!(stdout.lines().any(|l| l.starts_with("*  0 ")), "{stdout}");
}

#[test]
fn report_from_a_file_from_dash_and_from_standard_input() {
    let dir = TempDir::new().unwrap();
    let (text, _) = trace(2, HAND);
    let report = replayed(&dir, "hand", 2, &text);
    let content = fs::read_to_string(&report).unwrap();
    for format in ["json", "table"] {
        let args = [
            "advise",
            "--max-draft-len",
            "2",
            "--cost-linear",
            "1,0.2",
            "--format",
            format,
        ];
        let from_file = bin().args(args).arg(&report).output().unwrap();
        assert!(from_file.status.success());
        assert!(!from_file.stdout.is_empty());
        let from_dash = bin()
            .args(args)
            .arg("-")
            .write_stdin(content.clone())
            .output()
            .unwrap();
        let from_stdin = bin()
            .args(args)
            .write_stdin(content.clone())
            .output()
            .unwrap();
        assert_eq!(from_dash.stdout, from_file.stdout, "{format}");
        assert_eq!(from_stdin.stdout, from_file.stdout, "{format}");
        assert_eq!(from_stdin.stderr, from_file.stderr, "{format}");
    }
    // Straight from replay through a pipe.
    let piped = bin()
        .args(["advise", "--max-draft-len", "2", "--cost-linear", "1,0.2"])
        .write_stdin(content)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    assert!(
        String::from_utf8(piped)
            .unwrap()
            .starts_with("{\"draft_len\":2,")
    );
}

/// `advise ARGS REPORT` fails with status 2, prints nothing on standard
/// output and `message` on standard error.
fn assert_error(args: &[&str], report: &PathBuf, message: &str) {
    bin()
        .arg("advise")
        .args(args)
        .arg(report)
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains(message));
}

#[test]
fn bad_costs_are_errors_that_name_the_problem() {
    let dir = TempDir::new().unwrap();
    let (text, _) = trace(2, HAND);
    let report = replayed(&dir, "hand", 2, &text);
    let linear = |v: &str| ["--max-draft-len", "2", "--cost-linear", v].map(str::to_owned);
    let table = |v: &str| ["--max-draft-len", "2", "--cost-table", v].map(str::to_owned);
    let cases: Vec<([String; 4], &str)> = vec![
        (
            linear("1"),
            "1 value given; expected two numbers BASE,PER_TOKEN",
        ),
        (
            linear("1,0.1,2"),
            "3 values given; expected two numbers BASE,PER_TOKEN",
        ),
        (
            linear("1,abc"),
            "\"abc\" is not a number; expected two numbers BASE,PER_TOKEN",
        ),
        (linear("1;0.1"), "\"1;0.1\" is not a number"),
        (linear("1,"), "value 2 is empty"),
        (linear(""), "it is empty"),
        (
            linear("NaN,0.1"),
            "the base cost is NaN; a step cost must be a finite number",
        ),
        (
            linear("inf,0.1"),
            "the base cost is inf; a step cost must be a finite number",
        ),
        (
            linear("0,0.1"),
            "the base cost is 0; a step cost must be more than zero",
        ),
        (
            linear("-1,0.1"),
            "the base cost is -1; a step cost must be more than zero",
        ),
        (
            linear("1,-0.1"),
            "the cost per draft token is -0.1; it must be zero or more",
        ),
        (
            linear("1,1e308"),
            "the cost per draft token is 1e308; a step cost must be between 1e-150 and 1e150",
        ),
        (
            table("1,x,2"),
            "\"x\" is not a number; expected one cost per draft length 0..=K",
        ),
        (
            table("1,0,2"),
            "the cost of draft length 1 is 0; a step cost must be more than zero",
        ),
        (table("1,1.1,-2"), "the cost of draft length 2 is -2"),
        (table("1,NaN,2"), "the cost of draft length 1 is NaN"),
        (
            table("1,1.1"),
            "error: --cost-table: the step cost table has 2 entries but max_draft_len 2 needs 3 (one per draft length 0..=2)",
        ),
        (
            table("1,1.1,1.2,1.3"),
            "error: --cost-table: the step cost table has 4 entries but max_draft_len 2 needs 3",
        ),
    ];
    for (args, message) in &cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_error(&args, &report, message);
    }
}

#[test]
fn exactly_one_cost_flag_is_required() {
    let dir = TempDir::new().unwrap();
    let (text, _) = trace(2, HAND);
    let report = replayed(&dir, "hand", 2, &text);
    assert_error(
        &[
            "--max-draft-len",
            "2",
            "--cost-linear",
            "1,0.1",
            "--cost-table",
            "1,1.1,1.2",
        ],
        &report,
        "'--cost-linear <BASE,PER_TOKEN>' cannot be used with '--cost-table <C0,...,CK>'",
    );
    assert_error(
        &["--max-draft-len", "2"],
        &report,
        "the following required arguments were not provided:\n  <--cost-linear <BASE,PER_TOKEN>|--cost-table <C0,...,CK>>",
    );
}

#[test]
fn k_defaults_to_the_reports() {
    let dir = TempDir::new().unwrap();
    let (text, _) = trace(2, HAND);
    let report = replayed(&dir, "hand", 2, &text);
    let content = fs::read_to_string(&report).unwrap();
    for cost in [["--cost-linear", "1,0.2"], ["--cost-table", "1,1.3,1.4"]] {
        for format in ["json", "table"] {
            let without = advise(&[&cost[..], &["--format", format]].concat(), &report);
            let with = advise(
                &[&cost[..], &["--format", format, "--max-draft-len", "2"]].concat(),
                &report,
            );
            assert_eq!(without.2, Some(0), "{}", without.1);
            assert_eq!(without, with, "{cost:?} {format}");
            let piped = bin()
                .arg("advise")
                .args(cost)
                .args(["--format", format])
                .write_stdin(content.clone())
                .output()
                .unwrap();
            assert_eq!(String::from_utf8(piped.stdout).unwrap(), with.0);
        }
    }
    // A cost table is checked against --max-draft-len before the report is
    // read; without it, against the report's K, naming the report.
    let missing = dir.path().join("missing.json");
    assert_error(
        &["--max-draft-len", "2", "--cost-table", "1,1.1"],
        &missing,
        "error: --cost-table: the step cost table has 2 entries but max_draft_len 2 needs 3 (one per draft length 0..=2)\n",
    );
    assert_error(&["--cost-table", "1,1.1"], &missing, "error: cannot open ");
    assert_error(
        &["--cost-table", "1,1.1"],
        &report,
        &format!(
            "error: --cost-table: the step cost table has 2 entries but max_draft_len 2 needs 3 (one per draft length 0..=2); K = 2 is the num_spec_tokens of {}\n",
            report.display()
        ),
    );
}

#[test]
fn bad_prior_credible_level_and_k_are_errors() {
    let dir = TempDir::new().unwrap();
    let (text, _) = trace(2, HAND);
    let report = replayed(&dir, "hand", 2, &text);
    let with = |extra: &[&'static str]| {
        let mut args = vec!["--max-draft-len", "2", "--cost-linear", "1,0.1"];
        args.extend_from_slice(extra);
        args
    };
    assert_error(
        &with(&["--prior", "0,1"]),
        &report,
        "prior alpha is 0; expected a finite number above 0",
    );
    assert_error(&with(&["--prior", "1,inf"]), &report, "prior beta is inf");
    assert_error(
        &with(&["--prior", "1"]),
        &report,
        "expected two numbers ALPHA,BETA",
    );
    assert_error(
        &with(&["--credible-level", "1"]),
        &report,
        "credible level is 1; expected a probability strictly between 0 and 1",
    );
    assert_error(
        &with(&["--credible-level", "NaN"]),
        &report,
        "credible level is NaN",
    );
    assert_error(
        &with(&["--credible-level", "90%"]),
        &report,
        "\"90%\" is not a number",
    );
    assert_error(
        &with(&["--credible-level", "-0.9"]),
        &report,
        "credible level is -0.9",
    );
    assert_error(&with(&["--prior", "-1,1"]), &report, "prior alpha is -1");
    assert_error(
        &["--max-draft-len", "0", "--cost-linear", "1,0.1"],
        &report,
        "max_draft_len (num_spec_tokens) must be in 1..=64, got 0",
    );
    assert_error(
        &with(&["--format", "xml"]),
        &report,
        "invalid value 'xml' for '--format",
    );
}

#[test]
fn k_must_be_the_reports() {
    let dir = TempDir::new().unwrap();
    let (text, _) = trace(2, HAND);
    let report = replayed(&dir, "hand", 2, &text);
    assert_error(
        &["--max-draft-len", "3", "--cost-linear", "1,0.1"],
        &report,
        &format!(
            "error: {}: num_spec_tokens (K) is 2 but --max-draft-len is 3",
            report.display()
        ),
    );
    // A cost table fit for the flag's K, not the report's.
    assert_error(
        &["--max-draft-len", "3", "--cost-table", "1,1.1,1.2,1.3"],
        &report,
        "num_spec_tokens (K) is 2 but --max-draft-len is 3",
    );
    bin()
        .args(["advise", "--max-draft-len", "1", "--cost-linear", "1,0.1"])
        .write_stdin(fs::read_to_string(&report).unwrap())
        .assert()
        .code(2)
        .stdout("")
        .stderr("error: <stdin>: num_spec_tokens (K) is 2 but --max-draft-len is 1; give the report's K (and, with --cost-table, one cost per draft length 0..=K)\n");
}

#[test]
fn malformed_inconsistent_and_missing_reports_are_errors() {
    let dir = TempDir::new().unwrap();
    let (text, _) = trace(2, HAND);
    let report = replayed(&dir, "hand", 2, &text);
    let good = fs::read_to_string(&report).unwrap();
    let args = ["--max-draft-len", "2", "--cost-linear", "1,0.1"];

    let write = |name: &str, content: &str| {
        let p = dir.path().join(name);
        fs::write(&p, content).unwrap();
        p
    };
    let inconsistent = write(
        "inconsistent.json",
        &good.replace("\"num_spec_steps\":10", "\"num_spec_steps\":11"),
    );
    assert_ne!(fs::read_to_string(&inconsistent).unwrap(), good);
    assert_error(
        &args,
        &inconsistent,
        &format!(
            "error: {}: not a valid report: num_spec_steps is 11 but the histogram rows give 10",
            inconsistent.display()
        ),
    );
    let bad_row = write(
        "bad-row.json",
        &good.replace("\"2\":[2,2,5]", "\"2\":[2,2,5,0]"),
    );
    assert_ne!(fs::read_to_string(&bad_row).unwrap(), good);
    assert_error(
        &args,
        &bad_row,
        &format!("{}: not a valid report", bad_row.display()),
    );
    let trace_line = write("steps.jsonl", "{\"drafted\":1,\"accepted\":1}\n");
    assert_error(
        &args,
        &trace_line,
        &format!("{}: not a valid report", trace_line.display()),
    );
    let not_json = write("not.json", "hello\n");
    assert_error(
        &args,
        &not_json,
        &format!("{}: not a valid report", not_json.display()),
    );
    let empty = write("empty.json", "");
    assert_error(
        &args,
        &empty,
        &format!("{}: not a valid report", empty.display()),
    );
    let missing = dir.path().join("missing.json");
    assert_error(
        &args,
        &missing,
        &format!("error: cannot open {}: ", missing.display()),
    );
    bin()
        .args([
            "advise",
            "--max-draft-len",
            "2",
            "--cost-linear",
            "1,0.1",
            "-",
        ])
        .write_stdin("{\"num_spec_tokens\": 2}")
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::starts_with(
            "error: <stdin>: not a valid report: ",
        ));
}

// ---------------------------------------------------------------------------
// Warnings

/// `advise` on a trace; its standard output and standard error.
fn advise_trace(
    max: usize,
    rows: &[(usize, usize, usize)],
    cost: &str,
    format: &str,
) -> (String, String) {
    let dir = TempDir::new().unwrap();
    let (text, _) = trace(max, rows);
    let report = replayed(&dir, "t", max, &text);
    let (stdout, stderr, code) = advise(
        &[
            "--max-draft-len",
            &max.to_string(),
            "--cost-linear",
            cost,
            "--format",
            format,
        ],
        &report,
    );
    assert_eq!(code, Some(0), "{stderr}");
    (stdout, stderr)
}

/// Drafts of 2, 4 and 6 tokens, `n` steps each, with an acceptance of 0.8
/// at every position whatever `k`: of the steps drafting `k`, a share
/// `0.8^a 0.2` accepted exactly `a < k`, and `0.8^k` all `k` (rounded).
fn steady(n: usize) -> Vec<(usize, usize, usize)> {
    let mut rows = Vec::new();
    for k in [2, 4, 6] {
        for a in 0..=k {
            let share = 0.8f64.powi(a as i32) * if a < k { 0.2 } else { 1.0 };
            rows.push((k, a, (n as f64 * share).round() as usize));
        }
    }
    rows
}

#[test]
fn few_steps_are_warned_about_and_many_are_not() {
    let (_, stderr) = advise_trace(2, HAND, "1,0.2", "json");
    assert_eq!(
        stderr,
        "warning: only 10 steps drafted a token (fewer than 1,000): the intervals are wide and the advice may change with more data\n"
    );
    // 999 drafting steps (and k = 0 steps, which do not count): warned.
    let (_, stderr) = advise_trace(
        2,
        &[(2, 2, 500), (2, 1, 499), (0, 0, 600)],
        "1,0.1",
        "table",
    );
    assert!(
        stderr.contains("only 999 steps drafted a token"),
        "{stderr}"
    );
    let (_, stderr) = advise_trace(2, &[(2, 2, 500), (2, 1, 500)], "1,0.1", "json");
    assert_eq!(stderr, "");
    let (_, stderr) = advise_trace(8, &steady(1000), "1,0.1", "json");
    assert!(!stderr.contains("drafted a token"), "{stderr}");
    // Nothing drafted at all: every estimate is the prior.
    let (_, stderr) = advise_trace(3, &[(0, 0, 50)], "1,0.1", "json");
    assert!(
        stderr.starts_with(
            "warning: no step drafted a token: every estimate is the prior's, not data"
        ),
        "{stderr}"
    );
}

#[test]
fn a_recommendation_that_leans_on_the_prior_is_warned_about_and_marked() {
    // Every draft of 2 accepted: positions 3 and 4 never tried. With h_1,
    // h_2 near 1 and the prior's 1/2 above, g(3) = (1 + ~2.5) / 1.3 beats
    // g(2) = 3 / 1.2.
    let rows = [(2, 2, 2000)];
    let (stdout, stderr) = advise_trace(4, &rows, "1,0.1", "table");
    assert!(
        stderr.contains(
            "warning: the recommended draft length 3 leans on the prior: no step tried position 3 (reached it with every earlier draft accepted), so the estimate there is the prior Beta(1, 1), not data"
        ),
        "{stderr}"
    );
    let line = |start: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no line {start:?}:\n{stdout}"))
    };
    assert!(line("*  3 ").ends_with("  prior"), "{stdout}");
    assert!(line("   4 ").ends_with("  prior"), "{stdout}");
    assert!(!line("   2 ").contains("prior"), "{stdout}");
    assert!(
        stdout.contains("prior: a position up to k has no trials"),
        "{stdout}"
    );
    // Positions: 3 and 4 are the prior's.
    assert!(line("  3 ").ends_with("  prior"), "{stdout}");
    assert!(line("  4 ").ends_with("  prior"), "{stdout}");
    assert!(!line("  2 ").ends_with("prior"), "{stdout}");

    // The same data with dear drafts: 2 is best and has data; no warning.
    let (_, stderr) = advise_trace(4, &rows, "1,0.5", "json");
    assert_eq!(stderr, "");
}

#[test]
fn rows_whose_own_mean_disagrees_with_the_chain_are_warned_about() {
    // Drafting 1 accepts 90%; drafting 4 accepts 30% at the first
    // position and then everything: acceptance depends on k.
    let rows = [(1, 1, 900), (1, 0, 100), (4, 0, 700), (4, 4, 300)];
    let (stdout, stderr) = advise_trace(4, &rows, "1,0.1", "table");
    // k = 1 by hand: the row's mean 0.9, sample variance 0.9 * 0.1 *
    // 1000 / 999, over 1,000 steps; the chain's E[a | 1] is
    // h_1 ~ Beta(1 + 1200, 1 + 800).
    let (a, b) = (1201.0_f64, 801.0_f64);
    let chain_mean = a / (a + b);
    let chain_var = a * b / ((a + b) * (a + b) * (a + b + 1.0));
    let distance = (0.9 - chain_mean) / (0.09 / 999.0 + chain_var).sqrt();
    // Two rows compared: the bound is the normal quantile at 1 - 0.01 / 4.
    let expected = format!(
        "warning: k = 1: the row's own mean accepted 0.900 (1,000 steps) is {distance:.1} standard deviations from the chain's {chain_mean:.3} (the bound for 2 rows compared is 2.81): acceptance seems to depend on the draft length; trust the rows with data over the chain\n"
    );
    assert!(stderr.contains(&expected), "{stderr}\nexpected {expected}");
    assert!(
        stderr.contains("warning: k = 4: the row's own mean accepted 1.200 (1,000 steps) is "),
        "{stderr}"
    );
    assert!(
        stdout.contains(
            "row differs: the row's own mean is further from E[accepted] than chance allows"
        ),
        "{stdout}"
    );
    let marked: Vec<&str> = stdout
        .lines()
        .filter(|l| l.ends_with("  row differs"))
        .collect();
    assert_eq!(marked.len(), 2, "{stdout}");
    assert!(
        marked[0].starts_with("   1 ") && marked[1].starts_with("*  4 "),
        "{stdout}"
    );

    // Row 2 (100 steps) accepts its first draft 75% of the time against
    // 80% pooled: its mean, 1.35, is below the chain's narrow interval,
    // but within its own noise (se 0.085): not a disagreement.
    let rows = [
        (1, 1, 8000),
        (1, 0, 2000),
        (2, 0, 25),
        (2, 1, 15),
        (2, 2, 60),
    ];
    let (_, h) = trace(2, &rows);
    let k2 = &library_advice(
        &Advisor::default(),
        &h,
        &StepCost::linear(1.0, 0.1).unwrap(),
    )
    .candidates[2];
    assert!(k2.row_mean_accepted.unwrap() < k2.accepted_interval[0]);
    let (_, stderr) = advise_trace(2, &rows, "1,0.1", "json");
    assert!(!stderr.contains("row's own mean"), "{stderr}");

    // A row with fewer than 100 steps is not compared, however far off:
    // drafting 3 never accepts, where the chain expects 2.3.
    for (steps, warned) in [(99, false), (100, true)] {
        let rows = [(1, 1, 900), (1, 0, 100), (2, 2, 2000), (3, 0, steps)];
        let (_, stderr) = advise_trace(3, &rows, "1,0.1", "json");
        assert_eq!(
            stderr.contains(&format!(
                "k = 3: the row's own mean accepted 0.000 ({steps} steps)"
            )),
            warned,
            "{steps} steps: {stderr}"
        );
    }
}

/// Uniforms in `[0, 1)` from the top 53 bits of the seeded generator.
struct Uniform(SplitMix64);

impl Uniform {
    fn new(seed: u64) -> Self {
        Self(SplitMix64::seed_from_u64(seed))
    }

    fn next(&mut self) -> f64 {
        (self.0.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The generator is splitmix64 as published (Steele, Lea, Flood 2014),
/// seeded with its state: the first numbers of seed 1, computed by hand
/// from its definition, so the rows below are the ones the test was
/// written against.
#[test]
fn the_uniforms_are_splitmix64s() {
    let mut rng = SplitMix64::seed_from_u64(1);
    assert_eq!(rng.next_u64(), 0x910a_2dec_8902_5cc1);
    assert_eq!(rng.next_u64(), 0xbeeb_8da1_658e_ec67);
    let mut u = Uniform::new(1);
    assert_eq!(
        u.next(),
        (0x910a_2dec_8902_5cc1u64 >> 11) as f64 / 9_007_199_254_740_992.0
    );
}

/// With acceptance independent of k, no row is flagged, however many rows
/// there are: the check is calibrated for all rows together. (Comparing the
/// row's and the chain's 90% intervals flags several of these 64 rows.)
#[test]
fn acceptance_independent_of_k_draws_no_row_warning_on_many_rows() {
    for seed in [1, 2, 3] {
        let mut u = Uniform::new(seed);
        let mut counts = vec![vec![0usize; 65]; 65];
        for i in 0..20_000 {
            let k = 1 + i % 64;
            let mut a = 0;
            while a < k && u.next() < 0.92 {
                a += 1;
            }
            counts[k][a] += 1;
        }
        let rows: Vec<(usize, usize, usize)> = (1..=64)
            .flat_map(|k| (0..=k).map(move |a| (k, a)))
            .map(|(k, a)| (k, a, counts[k][a]))
            .filter(|r| r.2 > 0)
            .collect();
        let (stdout, stderr) = advise_trace(64, &rows, "1,0.02", "table");
        assert!(!stderr.contains("row's own mean"), "seed {seed}: {stderr}");
        assert!(!stdout.contains("row differs"), "seed {seed}");
        // 64 rows of about 312 steps each were compared.
    }
    let (stdout, stderr) = advise_trace(8, &steady(1000), "1,0.1", "table");
    assert!(!stderr.contains("row's own mean"), "{stderr}");
    assert!(!stdout.contains("row differs"), "{stdout}");
}

#[test]
fn rejected_observations_in_the_report_are_warned_about() {
    let mut rows = steady(1000);
    rows.push((2, 3, 2)); // a > k: rejected by replay, counted in the report
    let (_, stderr) = advise_trace(8, &rows, "1,0.1", "json");
    assert_eq!(
        stderr,
        "warning: the report counts 2 rejected observations (invalid steps the engine recorded: a bug to look into); rejected observations are in no estimate\n"
    );
}

// ---------------------------------------------------------------------------
// Output

#[test]
fn k_64_stays_one_aligned_row_per_draft_length() {
    let rows: Vec<_> = (0..=64).map(|a| (64, a, 10 + a)).collect();
    let (stdout, _) = advise_trace(64, &rows, "1,0.01", "table");
    let table: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("k "))
        .take(66)
        .collect();
    assert_eq!(table.len(), 66, "{stdout}");
    let speedup_at = table[0].find("speedup").unwrap() + "speedup".len() - 1;
    for (k, line) in table[1..].iter().enumerate() {
        let cells: Vec<&str> = line.trim_start_matches('*').split_whitespace().collect();
        assert_eq!(cells[0], k.to_string(), "{line}");
        assert_eq!(
            line.as_bytes()[speedup_at],
            b'x',
            "column moved in {line:?}"
        );
    }
    let positions = stdout
        .lines()
        .skip_while(|l| !l.starts_with("Continuation by position"))
        .count();
    assert_eq!(positions, 1 + 1 + 64, "{stdout}");
}

#[test]
fn a_reader_that_leaves_early_is_not_an_error() {
    use std::io::Write as _;
    use std::process::Stdio;
    // Drafts of 2 always accepted: the advice (k = 3) leans on the prior.
    let (text, _) = trace(64, &[(2, 2, 2000)]);
    let dir = TempDir::new().unwrap();
    let report = fs::read_to_string(replayed(&dir, "r", 64, &text)).unwrap();
    for format in ["json", "table"] {
        let mut child =
            std::process::Command::new(assert_cmd::cargo::cargo_bin!("specdec-metrics"))
                .args([
                    "advise",
                    "--max-draft-len",
                    "64",
                    "--cost-linear",
                    "1,0.1",
                    "--format",
                    format,
                ])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
        // The advice is written after the report is read: it meets a pipe
        // without a reader (EPIPE).
        drop(child.stdout.take());
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(report.as_bytes()).unwrap();
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(!stderr.contains("panicked"), "{stderr}");
        // The warnings still reach standard error.
        assert!(stderr.contains("leans on the prior"), "{stderr}");
    }
    // Through a shell pipe into head.
    let bin = assert_cmd::cargo::cargo_bin!("specdec-metrics");
    let out = std::process::Command::new("sh")
        .args([
            "-c",
            &format!(
                "{} advise --max-draft-len 64 --cost-linear 1,0.1 --format table {} | head -1",
                bin.display(),
                dir.path().join("r.json").display()
            ),
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        stdout,
        "Draft length advice (K = num_spec_tokens = 64, 2,000 verify steps)\n"
    );
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        !stderr.contains("panicked") && !stderr.contains("error"),
        "{stderr}"
    );
}

#[test]
fn closed_standard_output_is_an_error() {
    let dir = TempDir::new().unwrap();
    let (text, _) = trace(2, HAND);
    let report = replayed(&dir, "hand", 2, &text);
    let bin = assert_cmd::cargo::cargo_bin!("specdec-metrics");
    let out = std::process::Command::new("sh")
        .args([
            "-c",
            &format!(
                "exec {} advise --max-draft-len 2 --cost-linear 1,0.2 {} >&-",
                bin.display(),
                report.display()
            ),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    // The warnings are still given, then the error.
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "warning: only 10 steps drafted a token (fewer than 1,000): the intervals are wide and the advice may change with more data\n\
         error: standard output is closed; the advice was not written\n"
    );
}

#[test]
fn help_lists_advise_and_its_flags() {
    bin()
        .arg("--help")
        .assert()
        .success()
        .stdout(predicate::str::contains("advise"));
    bin().args(["advise", "--help"]).assert().success().stdout(
        predicate::str::contains("--max-draft-len <K>")
            .and(predicate::str::contains("--cost-linear <BASE,PER_TOKEN>"))
            .and(predicate::str::contains("--cost-table <C0,...,CK>"))
            .and(predicate::str::contains("--prior <ALPHA,BETA>"))
            .and(predicate::str::contains("--credible-level <P>"))
            .and(predicate::str::contains("[default: 0.9]"))
            .and(predicate::str::contains("--format <FORMAT>"))
            .and(predicate::str::contains("[REPORT]")),
    );
}

/// Several reports are windows of one engine: pooled, with intervals
/// widened by how much they differ; one report says its intervals assume
/// independent steps; windows of different K are refused.
#[test]
fn several_reports_are_windows() {
    let dir = TempDir::new().unwrap();
    let (easy, _) = trace(2, &[(2, 2, 400), (2, 1, 100)]);
    let (hard, _) = trace(2, &[(2, 0, 400), (2, 1, 100)]);
    let a = replayed(&dir, "easy", 2, &easy);
    let b = replayed(&dir, "hard", 2, &hard);
    let advice = |paths: &[&PathBuf]| -> serde_json::Value {
        let out = bin()
            .args(["advise", "--cost-linear", "1,0.1"])
            .args(paths)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        serde_json::from_slice(&out).unwrap()
    };
    let one = advice(&[&a]);
    assert_eq!(one["windows"], 1);
    assert_eq!(one["intervals_assume_independent_steps"], true);
    let two = advice(&[&a, &b]);
    assert_eq!(
        (two["windows"].as_u64(), two["num_spec_steps"].as_u64()),
        (Some(2), Some(1000))
    );
    assert!(
        two["dispersion"].as_f64().unwrap() > 10.0,
        "{}",
        two["dispersion"]
    );
    let width = |v: &serde_json::Value| {
        let i = &v["candidates"][2]["accepted_interval"];
        i[1].as_f64().unwrap() - i[0].as_f64().unwrap()
    };
    // The pooled report alone, as merge would write it: narrower intervals.
    let merged = dir.path().join("merged.json");
    let out = bin()
        .arg("merge")
        .arg(&a)
        .arg(&b)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    fs::write(&merged, out).unwrap();
    assert!(width(&two) > 3.0 * width(&advice(&[&merged])));
    // The table says which.
    let table = |paths: &[&PathBuf]| {
        String::from_utf8(
            bin()
                .args(["advise", "--cost-linear", "1,0.1", "--format", "table"])
                .args(paths)
                .assert()
                .success()
                .get_output()
                .stdout
                .clone(),
        )
        .unwrap()
    };
    assert!(table(&[&a]).contains("the intervals assume independent steps"));
    assert!(table(&[&a, &b]).contains("2 windows pooled"));
    // Another K.
    let (other, _) = trace(3, &[(3, 1, 10)]);
    let c = replayed(&dir, "other", 3, &other);
    bin()
        .args(["advise", "--cost-linear", "1,0.1"])
        .arg(&a)
        .arg(&c)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "num_spec_tokens (K) is 3 but the first report's is 2",
        ));
}

/// One report given twice is refused (it would fake a perfect agreement
/// and collapse the intervals); windows that agree more closely than
/// binomial noise keep the binomial width, and the table says so rather
/// than "widened".
#[test]
fn the_same_report_twice_is_refused_and_close_windows_are_not_narrowed() {
    let dir = TempDir::new().unwrap();
    let (steps, _) = trace(2, &[(2, 2, 400), (2, 1, 100)]);
    let a = replayed(&dir, "a", 2, &steps);
    let copy = dir.path().join("copy.json");
    fs::copy(&a, &copy).unwrap();
    for second in [&a, &copy] {
        bin()
            .args(["advise", "--cost-linear", "1,0.1"])
            .arg(&a)
            .arg(second)
            .assert()
            .code(2)
            .stdout("")
            .stderr(
                predicate::str::contains("(window 2) holds exactly the counts of")
                    .and(predicate::str::contains("the same report given twice?")),
            );
    }
    // Two windows a step apart: far less varied than binomial noise.
    let (near, _) = trace(2, &[(2, 2, 401), (2, 1, 99)]);
    let b = replayed(&dir, "b", 2, &near);
    let out = bin()
        .args(["advise", "--cost-linear", "1,0.1", "--format", "table"])
        .arg(&a)
        .arg(&b)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let out = String::from_utf8(out).unwrap();
    assert!(
        out.contains("the intervals are still at least the binomial width (never narrowed)")
            && !out.contains("widened"),
        "{out}"
    );
}
