//! `specdec-metrics whatif`: traces written here, replayed through every
//! policy; its outputs read back; bad input refused.

use std::fs;
use std::path::Path;

use assert_cmd::Command;
use predicates::prelude::*;
use tempfile::TempDir;

fn cli() -> Command {
    Command::cargo_bin("specdec-metrics").unwrap()
}

/// A trace of `requests` requests that copy long runs and then find no
/// match, as code edits do; with a metadata line of cap `cap`.
fn write_trace(dir: &Path, requests: usize, cap: u8, greedy: bool) -> std::path::PathBuf {
    write_trace_with(
        dir,
        requests,
        cap,
        Some(&meta("o200k_base", "vllm", cap, greedy)),
    )
}

/// A trace's metadata line.
fn meta(tokenizer: &str, rule: &str, cap: u8, greedy: bool) -> String {
    serde_json::json!({
        "specdec_trace": 1, "tokenizer": tokenizer, "rule": rule, "min_n": 2,
        "max_n": 5, "cap": cap, "eos": true, "greedy": greedy,
    })
    .to_string()
}

/// As [`write_trace`], with this metadata line (or none).
fn write_trace_with(
    dir: &Path,
    requests: usize,
    cap: u8,
    meta: Option<&str>,
) -> std::path::PathBuf {
    let mut text = meta.map_or_else(String::new, |m| format!("{m}\n"));
    for i in 0..requests {
        let m = 50 + i % 7;
        let (mut proposal, mut matched) = (Vec::new(), Vec::new());
        for t in 1..m {
            let left = (m - t) as u8;
            let copying = (t / 12 + i) % 3 != 0;
            proposal.push(if copying || t % 2 == 0 { cap } else { 0 });
            matched.push(if copying { left.min(cap) } else { 0 });
        }
        text += &serde_json::json!({
            "id": format!("r{i}"), "prompt_tokens": 100, "output_tokens": m,
            "proposal": proposal, "match": matched,
        })
        .to_string();
        text.push('\n');
    }
    let path = dir.join("traces.jsonl");
    fs::write(&path, text).unwrap();
    path
}

fn json_of(out: &[u8]) -> serde_json::Value {
    serde_json::from_slice(out).unwrap()
}

#[test]
fn every_policy_is_replayed_and_compared_with_the_best_static_length() {
    let dir = TempDir::new().unwrap();
    let traces = write_trace(dir.path(), 60, 16, true);
    let out = cli()
        .args([
            "whatif",
            "--max-draft-len",
            "16",
            "--cost-linear",
            "1,0.1",
            "--format",
            "json",
        ])
        .arg(&traces)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v = json_of(&out);
    let policies = v["policies"].as_array().unwrap();
    // none, static:1..=16, two controllers and their censored
    // versions, four peers, the oracle.
    assert_eq!(policies.len(), 1 + 16 + 4 + 4 + 1);
    let names: Vec<&str> = policies
        .iter()
        .map(|p| p["policy"].as_str().unwrap())
        .collect();
    for name in [
        "none",
        "static:1",
        "static:16",
        "adaptive",
        "per-state",
        "sglang",
        "vllm-44336",
        "smartspec",
        "vllm-av",
        "oracle",
    ] {
        assert!(names.contains(&name), "{name} in {names:?}");
    }
    let best = v["best_static_draft_len"].as_u64().unwrap() as usize;
    let ratio = |name: &str| {
        policies.iter().find(|p| p["policy"] == name).unwrap()["ratio_to_best_static"]
            .as_f64()
            .unwrap()
    };
    let best_name = if best == 0 {
        "none".to_string()
    } else {
        format!("static:{best}")
    };
    assert_eq!(ratio(&best_name), 1.0);
    for k in 1..=16 {
        assert!(ratio(&format!("static:{k}")) <= 1.0);
    }
    assert!(ratio("oracle") > 1.0);
    assert!(v["oracle_headroom"].as_f64().unwrap() > 0.0);
    // Copy-heavy traces at a low cost: a long draft pays.
    assert!(best >= 8, "best static {best}");
    let setting = v["settings"][0]["setting"].as_str().unwrap();
    assert!(
        setting.contains(&format!("\"num_speculative_tokens\": {best}")),
        "{setting}"
    );
    assert!(setting.contains("\"prompt_lookup_min\": 2"), "{setting}");
}

#[test]
fn the_table_names_the_settings_and_the_winner() {
    let dir = TempDir::new().unwrap();
    let traces = write_trace(dir.path(), 20, 8, true);
    cli()
        .args([
            "whatif",
            "--max-draft-len",
            "8",
            "--cost-linear",
            "1,0.1",
            "--batch",
            "4",
            "--interval",
            "2",
        ])
        .arg(&traces)
        .assert()
        .success()
        .stdout(
            predicate::str::contains("20 requests")
                .and(predicate::str::contains(
                    "K = 8, 4 requests in flight (each request once, draining at the end)",
                ))
                .and(predicate::str::contains("every 2 engine steps"))
                .and(predicate::str::contains("best static draft length"))
                .and(predicate::str::contains("setting (vLLM)"))
                .and(predicate::str::contains("oracle")),
        );
    // Kept full, the header says so and nothing is spent draining.
    for format in ["table", "json"] {
        let out = cli()
            .args(["whatif", "--max-draft-len", "8", "--cost-linear", "1,0.1"])
            .args(["--batch", "4", "--load", "saturated", "--format", format])
            .arg(&traces)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let text = String::from_utf8(out).unwrap();
        if format == "table" {
            assert!(
                text.contains(
                    "K = 8, 4 requests in flight (saturated: the first requests again until \
                     each has finished once)"
                ),
                "{text}"
            );
        } else {
            let json: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(json["load"], "saturated");
            for row in json["policies"].as_array().unwrap() {
                assert_eq!(row["drain_share"], 0.0, "{row}");
            }
        }
    }
    cli()
        .args(["whatif", "--max-draft-len", "8", "--cost-linear", "1,0.1"])
        .args(["--load", "full"])
        .arg(&traces)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "\"full\" is not a load (once or saturated)",
        ));
}

#[test]
fn the_traces_metadata_is_printed_escaped() {
    let dir = TempDir::new().unwrap();
    let hostile = "tok\u{1b}[31m\u{1b}]0;title\u{7}\u{202e}en";
    let traces = write_trace_with(dir.path(), 10, 8, Some(&meta(hostile, "vllm", 8, true)));
    for format in ["table", "json"] {
        let out = cli()
            .args(["whatif", "--max-draft-len", "4", "--cost-linear", "1,0.1"])
            .args(["--format", format])
            .arg(&traces)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let out = String::from_utf8(out).unwrap();
        assert!(
            !out.chars()
                .any(|c| matches!(c, '\u{1b}' | '\u{7}' | '\u{202e}')),
            "{format}: {out}"
        );
        assert!(
            out.contains(r"tok\u001b[31m\u001b]0;title\u0007\u202een"),
            "{out}"
        );
    }
}

#[test]
fn llamacpps_setting_keeps_m_and_sets_the_draft_length() {
    let dir = TempDir::new().unwrap();
    let meta = serde_json::json!({
        "specdec_trace": 1, "tokenizer": "o200k_base", "rule": "llamacpp-simple",
        "min_n": 12, "max_n": 12, "cap": 16, "eos": true, "greedy": true,
    })
    .to_string();
    let traces = write_trace_with(dir.path(), 20, 16, Some(&meta));
    let out = cli()
        .args(["whatif", "--max-draft-len", "8", "--cost-linear", "1,0.1"])
        .args(["--format", "json"])
        .arg(&traces)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v = json_of(&out);
    let k = v["best_static_draft_len"].as_u64().unwrap();
    assert!(k > 0 && k < 16, "{v}");
    let setting = v["settings"][0]["setting"].as_str().unwrap();
    assert!(
        setting.contains("--spec-ngram-simple-size-n 12 --spec-ngram-simple-size-m 16"),
        "{setting}"
    );
    assert!(
        setting.contains(&format!("--spec-draft-n-max {k}")),
        "{setting}"
    );
    assert!(setting.contains(&format!("--draft-max {k}")), "{setting}");
}

#[test]
fn no_setting_is_invented_for_an_unknown_rule() {
    let dir = TempDir::new().unwrap();
    // Without a metadata line the rule is unknown: no engine's setting.
    let traces = write_trace_with(dir.path(), 10, 8, None);
    let args = ["whatif", "--max-draft-len", "4", "--cost-linear", "1,0.1"];
    cli().args(args).arg(&traces).assert().success().stdout(
        predicate::str::contains("best static draft length")
            .and(predicate::str::contains("setting (").not())
            .and(predicate::str::contains("prompt_lookup").not())
            .and(predicate::str::contains("no setting: no metadata line")),
    );
    let out = cli()
        .args(args)
        .args(["--format", "json"])
        .arg(&traces)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v = json_of(&out);
    assert!(v["best_static_draft_len"].is_u64(), "{v}");
    assert_eq!(v["settings"], serde_json::json!([]), "{v}");
    // A rule this version does not know is refused, not taken for vLLM's.
    let traces = write_trace_with(
        dir.path(),
        10,
        8,
        Some(&meta("o200k_base", "vllm-next", 8, true)),
    );
    cli()
        .args(args)
        .arg(&traces)
        .assert()
        .failure()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains(
            "line 1: field \"rule\": \"vllm-next\" is not a rule ngram writes \
             (vllm, trtllm, llamacpp-simple, hf, suffix)",
        ));
}

#[test]
fn hindsight_is_not_called_an_optimum_nor_a_negative_headroom() {
    let dir = TempDir::new().unwrap();
    let traces = write_trace(dir.path(), 20, 8, true);
    // Drafting costs twice a step: the myopic per-step choice loses to
    // drafting nothing.
    let args = ["whatif", "--max-draft-len", "8", "--cost-linear", "1,2"];
    let out = cli().args(args).arg(&traces).assert().success();
    let table = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let last = table
        .lines()
        .find(|l| l.starts_with("best static draft length"))
        .unwrap();
    assert!(
        !last.contains("above it") && last.contains("per-step hindsight"),
        "{table}"
    );
    assert!(!last.contains("+-") && !last.contains(" -"), "{table}");
    let out = cli()
        .args(args)
        .args(["--format", "json"])
        .arg(&traces)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v = json_of(&out);
    assert!(v["oracle_headroom"].is_null(), "{v}");
    let help = cli().args(["whatif", "--help"]).assert().success();
    let help = String::from_utf8(help.get_output().stdout.clone()).unwrap();
    assert!(
        help.contains("per-step hindsight") && !help.contains("per-step oracle"),
        "{help}"
    );
    assert!(!help.contains("beat"), "{help}");
}

#[test]
fn a_replay_trace_is_named_as_one() {
    let trace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/trace.jsonl");
    cli()
        .args(["whatif", "--max-draft-len", "4", "--cost-linear", "1,0.1"])
        .arg(&trace)
        .assert()
        .failure()
        .code(2)
        .stderr(predicate::str::contains(
            "line 1: a replay trace (steps drafted and accepted, as `replay` reads), not an \
             `ngram` trace",
        ));
}

#[test]
fn the_lengths_within_one_percent_of_the_best_are_printed() {
    let dir = TempDir::new().unwrap();
    // The drafter proposes 4 tokens everywhere, all of them right: every
    // k from 4 drafts the same.
    let mut text = meta("o200k_base", "vllm", 16, true) + "\n";
    for i in 0..20 {
        let m = 41u8;
        let matched: Vec<u8> = (1..m).map(|t| 4.min(m - t)).collect();
        text += &serde_json::json!({
            "id": i, "prompt_tokens": 10, "output_tokens": m,
            "proposal": vec![4u8; usize::from(m) - 1], "match": matched,
        })
        .to_string();
        text.push('\n');
    }
    let traces = dir.path().join("plateau.jsonl");
    fs::write(&traces, text).unwrap();
    let args = ["whatif", "--max-draft-len", "16", "--cost-linear", "1,0.02"];
    let json = cli()
        .args(args)
        .args(["--format", "json"])
        .arg(&traces)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v = json_of(&json);
    let goodput = |k: usize| v["policies"][k]["goodput"].as_f64().unwrap();
    let best = v["best_static_draft_len"].as_u64().unwrap() as usize;
    // The run of static lengths around the best within 1% of its goodput.
    let near = |k: usize| goodput(k) >= 0.99 * goodput(best);
    let lo = (0..=best).rev().take_while(|&k| near(k)).last().unwrap();
    let hi = (best..=16).take_while(|&k| near(k)).last().unwrap();
    assert!(hi > lo, "a plateau to show: {v}");
    assert_eq!(v["best_static_within_1pct"], serde_json::json!([lo, hi]));
    let table = cli().args(args).arg(&traces).assert().success();
    let table = String::from_utf8(table.get_output().stdout.clone()).unwrap();
    assert!(
        table.contains(&format!(
            "best static draft length: k = {best} (every k in {lo}..={hi} within 1% of it)"
        )),
        "{table}"
    );
    assert!(
        table.contains(&format!("k = {best} is one point of {lo}..={hi}")),
        "{table}"
    );
}

#[test]
fn a_replay_that_is_mostly_its_drain_says_so() {
    let dir = TempDir::new().unwrap();
    let traces = write_trace(dir.path(), 40, 16, true);
    let run = |batch: &str, format: &str| {
        let out = cli()
            .args(["whatif", "--max-draft-len", "16", "--cost-linear", "1,0.05"])
            .args(["--batch", batch, "--format", format])
            .arg(&traces)
            .assert()
            .success();
        String::from_utf8(out.get_output().stdout.clone()).unwrap()
    };
    let shares = |batch: &str| -> Vec<f64> {
        let v = json_of(run(batch, "json").as_bytes());
        v["policies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["drain_share"].as_f64().unwrap())
            .collect()
    };
    // 40 requests never fill a batch of 64: every step is the drain.
    assert!(shares("64").iter().all(|&s| s == 1.0), "{:?}", shares("64"));
    let table = run("64", "table");
    assert!(
        table.contains("note: 100% of the best static length's cost is spent with fewer than 64"),
        "{table}"
    );
    // One request at a time is always a full batch.
    assert!(shares("1").iter().all(|&s| s == 0.0), "{:?}", shares("1"));
    assert!(!run("1", "table").contains("note:"));
    // Between the two, a share of the cost.
    let eight = shares("8");
    assert!(eight.iter().all(|&s| (0.0..1.0).contains(&s)), "{eight:?}");
    assert!(eight.iter().any(|&s| s > 0.0), "{eight:?}");
    // The note is the best static length's share, from half on.
    let best_share = |batch: &str| -> f64 {
        let v = json_of(run(batch, "json").as_bytes());
        let k = v["best_static_draft_len"].as_u64().unwrap();
        let name = if k == 0 {
            "none".to_string()
        } else {
            format!("static:{k}")
        };
        let rows = v["policies"].as_array().unwrap();
        let row = rows.iter().find(|r| r["policy"] == name.as_str()).unwrap();
        row["drain_share"].as_f64().unwrap()
    };
    let (below, above) = (best_share("8"), best_share("32"));
    assert!(below < 0.5 && above >= 0.5, "{below} {above}");
    assert!(!run("8", "table").contains("note:"));
    let note = format!(
        "note: {:.0}% of the best static length's cost is spent with fewer than 32",
        above * 100.0
    );
    assert!(run("32", "table").contains(&note), "{note}");
}

/// The drain's share of the cost, on a trace whose steps are known: the
/// steps are weighted by their cost, not counted.
#[test]
fn the_drain_share_weighs_each_step_by_its_cost() {
    let dir = TempDir::new().unwrap();
    let trace = dir.path().join("t.jsonl");
    // At k = 2: request a drafts 2 and takes them (one step), request b
    // proposes nothing for four steps, request c drafts 1 and takes it.
    // Two in flight: steps of 1 + 0.5 * (2 + 0) / 2 and 1 + 0.5 * (0 + 1)
    // / 2, then b alone for two steps of 1: 2 of 4.75 in the drain.
    fs::write(
        &trace,
        concat!(
            r#"{"specdec_trace":2,"tokenizer":"o200k_base","rule":"vllm","min_n":2,"max_n":5,"cap":8,"eos":true,"greedy":true}"#,
            "\n",
            r#"{"id":"a","output_tokens":4,"proposal":[2,2,2],"match":[2,0,0]}"#,
            "\n",
            r#"{"id":"b","output_tokens":5,"proposal":[0,0,0,0],"match":[0,0,0,0]}"#,
            "\n",
            r#"{"id":"c","output_tokens":3,"proposal":[1,1],"match":[1,0]}"#,
            "\n",
            // One output token: no position, no step.
            r#"{"id":"d","output_tokens":1,"proposal":[],"match":[]}"#,
            "\n",
        ),
    )
    .unwrap();
    let row = |batch: &str, policy: &str| {
        let out = cli()
            .args(["whatif", "--max-draft-len", "2", "--cost-linear", "1,0.5"])
            .args(["--batch", batch, "--policies", policy, "--format", "json"])
            .arg(&trace)
            .assert()
            .success();
        json_of(&out.get_output().stdout)["policies"][0].clone()
    };
    let two = row("2", "static:2");
    assert!(
        (two["drain_share"].as_f64().unwrap() - 2.0 / 4.75).abs() < 1e-12,
        "{two}"
    );
    // Nine tokens at positions 1 and on, over the cost of the four steps.
    assert!(
        (two["goodput"].as_f64().unwrap() - 9.0 / 4.75).abs() < 1e-12,
        "{two}"
    );
    // Without drafting, three in flight: a, b and c take 3, 4 and 2 steps
    // of 1, so the batch is below three from the third step on.
    let none = row("3", "none");
    assert_eq!(none["drain_share"].as_f64(), Some(0.5), "{none}");
}

#[test]
fn a_controller_row_prints_the_length_it_used_not_where_it_ended() {
    let dir = TempDir::new().unwrap();
    let traces = write_trace(dir.path(), 40, 16, true);
    let args = ["whatif", "--max-draft-len", "16", "--cost-linear", "1,0.05"];
    let json = cli()
        .args(args)
        .args(["--format", "json"])
        .arg(&traces)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v = json_of(&json);
    let rows = v["policies"].as_array().unwrap();
    let row = |name: &str| rows.iter().find(|r| r["policy"] == name).unwrap();
    // A static length uses its k at every request-step.
    assert_eq!(row("static:5")["median_draft_len"], 5, "{v}");
    assert_eq!(row("none")["median_draft_len"], 0, "{v}");
    let median = row("adaptive")["median_draft_len"].as_u64().unwrap();
    let table = cli().args(args).arg(&traces).assert().success();
    let table = String::from_utf8(table.get_output().stdout.clone()).unwrap();
    let adaptive = table.lines().find(|l| l.starts_with("adaptive ")).unwrap();
    assert!(
        adaptive.ends_with(&format!("(median k = {median} over request-steps)")),
        "{table}"
    );
    assert!(!table.contains("ends at"), "{table}");
}

#[test]
fn a_policys_report_is_written_and_advise_reads_it() {
    let dir = TempDir::new().unwrap();
    let traces = write_trace(dir.path(), 30, 8, true);
    let report = dir.path().join("adaptive.json");
    let plot = dir.path().join("whatif.svg");
    cli()
        .args([
            "whatif",
            "--max-draft-len",
            "8",
            "--cost-table",
            "1,1.1,1.2,1.3,1.4,1.5,1.6,1.7,1.8",
        ])
        .arg(&traces)
        .arg("--report")
        .arg("adaptive")
        .arg(&report)
        .arg("--plot")
        .arg(&plot)
        .assert()
        .success();
    let h: specdec_metrics::AcceptanceHistogram =
        serde_json::from_str(&fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(h.max_draft_len(), 8);
    assert!(h.num_spec_steps() > 0 && h.num_undrafted_steps() > 0);
    cli()
        .args(["advise", "--cost-linear", "1,0.1"])
        .arg(&report)
        .assert()
        .success();
    let svg = fs::read_to_string(&plot).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("oracle") && svg.contains("best static"));
}

#[test]
fn a_trace_from_sampled_outputs_is_warned_about() {
    let dir = TempDir::new().unwrap();
    let traces = write_trace(dir.path(), 10, 8, false);
    cli()
        .args(["whatif", "--max-draft-len", "4", "--cost-linear", "1,0.1"])
        .arg(&traces)
        .assert()
        .success()
        .stderr(predicate::str::contains("sampled outputs"))
        .stdout(predicate::str::contains("estimates only"));
}

#[test]
fn bad_input_is_refused_with_the_line_or_the_flag() {
    let dir = TempDir::new().unwrap();
    let traces = write_trace(dir.path(), 10, 8, true);
    let run = |args: &[&str], path: &Path| {
        cli()
            .arg("whatif")
            .args(args)
            .arg(path)
            .assert()
            .failure()
            .code(2)
    };
    // K above the traces' cap.
    run(&["--max-draft-len", "9", "--cost-linear", "1,0.1"], &traces).stderr(
        predicate::str::contains("--max-draft-len 9 is above the trace's cap 8"),
    );
    // A cost table of the wrong length.
    run(&["--max-draft-len", "2", "--cost-table", "1,1.1"], &traces)
        .stderr(predicate::str::contains("cost"));
    // An unknown policy for --report, and a zero batch.
    run(
        &[
            "--max-draft-len",
            "4",
            "--cost-linear",
            "1,0.1",
            "--report",
            "fastest",
            "x.json",
        ],
        &traces,
    )
    .stderr(predicate::str::contains("fastest"));
    run(
        &[
            "--max-draft-len",
            "4",
            "--cost-linear",
            "1,0.1",
            "--batch",
            "0",
        ],
        &traces,
    )
    .stderr(predicate::str::contains("--batch"));
    run(
        &[
            "--max-draft-len",
            "4",
            "--cost-linear",
            "1,0.1",
            "--interval",
            "0",
        ],
        &traces,
    )
    .stderr(predicate::str::contains("--interval"));
    // A missing file; a line whose arrays differ in length.
    run(
        &["--max-draft-len", "4", "--cost-linear", "1,0.1"],
        &dir.path().join("absent.jsonl"),
    )
    .stderr(predicate::str::contains("absent.jsonl"));
    let bad = dir.path().join("bad.jsonl");
    fs::write(
        &bad,
        "{\"id\":1,\"output_tokens\":3,\"proposal\":[1,1],\"match\":[1,1]}\n\
         {\"id\":2,\"output_tokens\":4,\"proposal\":[1,1],\"match\":[1,1]}\n",
    )
    .unwrap();
    run(&["--max-draft-len", "4", "--cost-linear", "1,0.1"], &bad)
        .stderr(predicate::str::contains("line 2"));
    // Nothing to replay.
    let empty = dir.path().join("empty.jsonl");
    fs::write(
        &empty,
        "{\"output_tokens\":1,\"proposal\":[],\"match\":[]}\n",
    )
    .unwrap();
    run(&["--max-draft-len", "4", "--cost-linear", "1,0.1"], &empty)
        .stderr(predicate::str::contains("no request"));
}

#[test]
fn a_closed_reader_is_not_an_error() {
    let dir = TempDir::new().unwrap();
    let traces = write_trace(dir.path(), 10, 8, true);
    // `| head -1`: standard output closed early by the reader.
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("specdec-metrics"))
        .args(["whatif", "--max-draft-len", "8", "--cost-linear", "1,0.1"])
        .arg(&traces)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    assert!(child.wait().unwrap().success());
}

#[test]
fn a_cost_table_ending_below_its_start_is_replayed() {
    // The peers' linear cost from the table's ends has a negative slope.
    let dir = TempDir::new().unwrap();
    let traces = write_trace(dir.path(), 10, 8, true);
    cli()
        .args([
            "whatif",
            "--max-draft-len",
            "3",
            "--cost-table",
            "1,1.2,1.1,0.999",
        ])
        .arg(&traces)
        .assert()
        .success()
        .stdout(predicate::str::contains("vllm-44336"));
}

#[test]
fn outputs_onto_the_traces_or_onto_each_other_are_refused() {
    let dir = TempDir::new().unwrap();
    let trace = write_trace(dir.path(), 4, 8, true);
    let before = fs::read(&trace).unwrap();
    let link = dir.path().join("link.jsonl");
    fs::hard_link(&trace, &link).unwrap();
    let other = dir.path().join("out.svg");
    let base = ["whatif", "--max-draft-len", "4", "--cost-linear", "1,0.1"];
    for (outputs, wanted) in [
        (vec!["--plot", trace.to_str().unwrap()], "--plot"),
        (vec!["--plot", link.to_str().unwrap()], "is the traces"),
        (
            vec!["--report", "adaptive", trace.to_str().unwrap()],
            "--report",
        ),
        (
            vec![
                "--plot",
                other.to_str().unwrap(),
                "--report",
                "adaptive",
                other.to_str().unwrap(),
            ],
            "--plot and --report name one file",
        ),
    ] {
        cli()
            .args(base)
            .args(&outputs)
            .arg(&trace)
            .assert()
            .failure()
            .code(2)
            .stdout("")
            .stderr(predicate::str::contains(wanted));
        assert_eq!(fs::read(&trace).unwrap(), before, "{outputs:?}");
        assert!(!other.exists(), "{outputs:?}");
    }
}

#[test]
fn the_plots_title_names_the_traces_the_step_cost_and_the_load() {
    // Plots of one trace at several costs, or of several traces, must not
    // look alike.
    let dir = TempDir::new().unwrap();
    let trace = write_trace(dir.path(), 4, 8, true);
    let name = trace.file_name().unwrap().to_str().unwrap().to_owned();
    for (cost, load, words) in [
        (
            "1,0.2",
            "once",
            "step cost 1 + 0.2 d, 32 in flight (4 requests)",
        ),
        (
            "1,0.05",
            "saturated",
            "step cost 1 + 0.05 d, 32 in flight kept full (4 requests)",
        ),
    ] {
        let svg = dir.path().join("plot.svg");
        cli()
            .args([
                "whatif",
                "--max-draft-len",
                "4",
                "--cost-linear",
                cost,
                "--load",
                load,
                "--plot",
            ])
            .arg(&svg)
            .arg(&trace)
            .assert()
            .success();
        let text = fs::read_to_string(&svg).unwrap();
        assert!(
            text.contains(&format!("{name}: goodput by policy")),
            "{name}"
        );
        assert!(text.contains(words), "{words}");
    }
}

/// Code-edit-like requests, as `ngram` reads them.
fn requests_file(dir: &Path) -> std::path::PathBuf {
    let body = "fn add(a: u32, b: u32) -> u32 { a + b }\nfn sub(a: u32, b: u32) -> u32 { a - b }\n";
    let text: String = (0..16)
        .map(|i| {
            let prompt = format!("Rename in {i}:\n{}", body.repeat(1 + i % 3));
            let output = body
                .replace("add", &format!("plus{}", i % 5))
                .repeat(1 + i % 3);
            serde_json::json!({"id": format!("e{i}"), "prompt": prompt, "output": output})
                .to_string()
                + "\n"
        })
        .collect();
    let path = dir.join("requests.jsonl");
    fs::write(&path, text).unwrap();
    path
}

/// `ngram` with these flags on `requests`, into `dir/name`.
fn ngram(dir: &Path, requests: &Path, name: &str, flags: &[&str]) -> std::path::PathBuf {
    let out = dir.join(name);
    cli()
        .arg("ngram")
        .args(flags)
        .arg("--output")
        .arg(&out)
        .arg(requests)
        .assert()
        .success();
    out
}

#[test]
fn compare_prints_both_rules_side_by_side_and_the_winners_setting() {
    let dir = TempDir::new().unwrap();
    let requests = requests_file(dir.path());
    let a = ngram(
        dir.path(),
        &requests,
        "a.jsonl",
        &["--min-n", "2", "--max-n", "5"],
    );
    let b = ngram(dir.path(), &requests, "b.jsonl", &["--rule", "suffix"]);
    let plot = dir.path().join("both.svg");
    let run = |format: &str| {
        cli()
            .args(["whatif", "--compare"])
            .args([&a, &b])
            .args([
                "--max-draft-len",
                "30",
                "--cost-linear",
                "1,0.1",
                "--batch",
                "4",
            ])
            .args(["--format", format, "--plot"])
            .arg(&plot)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone()
    };
    let json = json_of(&run("json"));
    // Each side's K is at most its cap: the suffix traces' cap is 24.
    assert_eq!(json["a"]["max_draft_len"], 30);
    assert_eq!(json["b"]["max_draft_len"], 24);
    assert_eq!(json["a"]["engine_default"], serde_json::Value::Null);
    assert_eq!(json["b"]["engine_default"][0], 24);
    assert!(json["b"]["engine_default"][1].as_f64().unwrap() > 0.0);
    let winner = json["winner"].as_str().unwrap();
    let (ga, gb) = (
        json["a"]["best_static"][1].as_f64().unwrap(),
        json["b"]["best_static"][1].as_f64().unwrap(),
    );
    assert_eq!(winner, if gb > ga { "B" } else { "A" });
    let setting = json["settings"][0]["setting"].as_str().unwrap();
    let method = if winner == "B" {
        "\"method\": \"suffix\""
    } else {
        "\"method\": \"ngram\""
    };
    assert!(setting.contains(method), "{setting}");
    let others: Vec<&str> = json["b"]["others"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o[0].as_str().unwrap())
        .collect();
    // Every controller, then the oracle.
    assert!(
        others.contains(&"adaptive") && others.contains(&"per-state"),
        "{others:?}"
    );
    assert_eq!(others.last(), Some(&"oracle"), "{others:?}");
    // 16 requests at batch 4: the last ones finish below a full batch.
    let drain = |side: &str| json[side]["best_static_drain_share"].as_f64().unwrap();
    for side in ["a", "b"] {
        assert!(drain(side) > 0.0 && drain(side) < 1.0, "{json}");
    }
    let table = String::from_utf8(run("table")).unwrap();
    let drain_row = table
        .lines()
        .find(|l| l.starts_with("  in the drain"))
        .unwrap();
    for side in ["a", "b"] {
        let cell = format!("{:.0}% of its cost", drain(side) * 100.0);
        assert!(drain_row.contains(&cell), "{cell:?} not in {drain_row:?}");
    }
    for needle in [
        "compare on the same 16 requests",
        "(vllm, n 2..=5)",
        "(suffix, depth 24)",
        "engine default",
        "best static",
        "oracle",
        &format!("winner: {winner} ("),
        "setting (vLLM): --speculative-config",
    ] {
        assert!(table.contains(needle), "{needle:?} not in\n{table}");
    }
    let svg = fs::read_to_string(&plot).unwrap();
    assert!(
        svg.contains("A: vllm, n 2..=5 static k") && svg.contains("B: suffix, depth 24 static k")
    );
    assert!(svg.contains("B: oracle") && svg.contains("A: per-state"));
}

#[test]
fn the_engines_default_row_is_labelled() {
    let dir = TempDir::new().unwrap();
    let requests = requests_file(dir.path());
    let b = ngram(
        dir.path(),
        &requests,
        "b.jsonl",
        &["--rule", "suffix", "--cap", "8"],
    );
    let out = cli()
        .arg("whatif")
        .arg(&b)
        .args([
            "--max-draft-len",
            "8",
            "--cost-linear",
            "1,0.1",
            "--batch",
            "4",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let table = String::from_utf8(out).unwrap();
    let labelled: Vec<&str> = table
        .lines()
        .filter(|l| l.contains("<- the engine's default"))
        .collect();
    assert_eq!(labelled.len(), 1, "{table}");
    assert!(labelled[0].starts_with("static:8 "), "{table}");
    assert!(table.contains("\"method\": \"suffix\""), "{table}");
    assert!(
        table.contains("\"suffix_decoding_max_tree_depth\": 24"),
        "{table}"
    );
    // Above K: said, not replayed.
    let out = cli()
        .arg("whatif")
        .arg(&b)
        .args([
            "--max-draft-len",
            "4",
            "--cost-linear",
            "1,0.1",
            "--format",
            "json",
        ])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let json = json_of(&out);
    assert_eq!(json["engine_default_draft_len"], 8);
    assert!(
        json["policies"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["engine_default"] == false)
    );
}

#[test]
fn compare_refuses_traces_of_other_requests() {
    let dir = TempDir::new().unwrap();
    let requests = requests_file(dir.path());
    let a = ngram(dir.path(), &requests, "a.jsonl", &[]);
    let b = ngram(dir.path(), &requests, "b.jsonl", &["--rule", "suffix"]);
    let text = fs::read_to_string(&b).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let write = |name: &str, lines: &[String]| {
        let path = dir.path().join(name);
        fs::write(&path, lines.join("\n") + "\n").unwrap();
        path
    };
    let owned: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    let mut renamed = owned.clone();
    renamed[3] = renamed[3].replace("\"e2\"", "\"x2\"");
    let fewer = owned[..owned.len() - 1].to_vec();
    let eos_no = ngram(
        dir.path(),
        &requests,
        "c.jsonl",
        &["--rule", "suffix", "--eos", "no"],
    );
    for (other, why) in [
        (
            write("renamed.jsonl", &renamed),
            "request 3 is \"e2\" in A but \"x2\" in B",
        ),
        (write("fewer.jsonl", &fewer), "A has 16 requests, B 15"),
        (eos_no, "request 1 (\"e0\") has"),
    ] {
        cli()
            .args(["whatif", "--compare"])
            .args([&a, &other])
            .args(["--max-draft-len", "8", "--cost-linear", "1,0.1"])
            .assert()
            .code(2)
            .stderr(predicate::str::contains(
                "are not traces of the same requests",
            ))
            .stderr(predicate::str::contains(why));
    }
    // One trace, or --report with two: refused by the flags.
    cli()
        .args(["whatif", "--compare"])
        .arg(&a)
        .args(["--max-draft-len", "8", "--cost-linear", "1,0.1"])
        .assert()
        .code(2);
}

#[test]
fn per_states_run_signal_defaults_by_the_traces_rule_and_bad_ones_stop() {
    let dir = TempDir::new().unwrap();
    let requests = requests_file(dir.path());
    let suffix = ngram(dir.path(), &requests, "s.jsonl", &["--rule", "suffix"]);
    let vllm = ngram(
        dir.path(),
        &requests,
        "v.jsonl",
        &["--min-n", "2", "--max-n", "5"],
    );
    let per_state = |trace: &Path, signal: Option<&str>| -> serde_json::Value {
        let mut cmd = cli();
        cmd.arg("whatif")
            .arg(trace)
            .args(["--max-draft-len", "12", "--cost-linear", "1,0.3"])
            .args([
                "--batch",
                "1",
                "--policies",
                "per-state",
                "--format",
                "json",
            ])
            .args(["--update-observations", "1"]);
        if let Some(signal) = signal {
            cmd.args(["--run-signal", signal]);
        }
        let out = cmd.assert().success().get_output().stdout.clone();
        let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
        json["policies"][0].clone()
    };
    // States read at every step (not copy runs: those give another
    // outcome): the score on suffix traces, a short match on n-gram ones.
    let default = per_state(&suffix, None);
    assert_eq!(default, per_state(&suffix, Some("score-steps")));
    assert_ne!(default, per_state(&suffix, Some("none")));
    assert_ne!(
        per_state(&suffix, Some("none")),
        per_state(&suffix, Some("score-below=1"))
    );
    assert_eq!(
        per_state(&vllm, None),
        per_state(&vllm, Some("match-steps"))
    );
    // Not copy runs, split or not; nor the short match alone (without the
    // request's recent matched length).
    for runs in ["short-match", "none", "short-match-steps"] {
        assert_ne!(per_state(&vllm, None), per_state(&vllm, Some(runs)));
    }
    for bad in [
        "score-below=0",
        "score-below=0.01",
        "match-below=1",
        "sideways",
    ] {
        cli()
            .arg("whatif")
            .arg(&suffix)
            .args(["--max-draft-len", "12", "--cost-linear", "1,0.3"])
            .args(["--run-signal", bad])
            .assert()
            .failure()
            .code(2)
            .stderr(predicate::str::contains("--run-signal"));
    }
}
