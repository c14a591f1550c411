//! `specdec-metrics corpus`: sets of traces (the repository's example
//! requests through `ngram`, and traces written here) judged over a grid;
//! each figure against `whatif`'s for the same cell; bad sets refused.

use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;
use tempfile::TempDir;

fn cli() -> Command {
    Command::cargo_bin("specdec-metrics").unwrap()
}

fn json_of(out: &[u8]) -> Value {
    serde_json::from_slice(out).unwrap()
}

/// The repository's example requests through `ngram`, into `dir/name`.
fn example_trace(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    let requests = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/requests.jsonl");
    cli()
        .arg("ngram")
        .arg(&requests)
        .arg("--output")
        .arg(&path)
        .assert()
        .success();
    path
}

/// A trace of `requests` requests copying runs whose lengths `seed`
/// varies, with a metadata line of cap `cap`, at `path`.
fn write_trace(path: &Path, requests: usize, cap: u8, seed: usize) {
    let mut text = serde_json::json!({
        "specdec_trace": 1, "tokenizer": "o200k_base", "rule": "vllm", "min_n": 2,
        "max_n": 5, "cap": cap, "eos": true, "greedy": true,
    })
    .to_string();
    text.push('\n');
    for i in 0..requests {
        let m = 40 + (i * 5 + seed) % 20;
        let (mut proposal, mut matched) = (Vec::new(), Vec::new());
        for t in 1..m {
            let left = (m - t) as u8;
            let copying = (t / (3 + seed) + i) % 3 != 0;
            proposal.push(if copying || t % 2 == 0 { cap } else { 0 });
            matched.push(if copying {
                left.min(cap).min((2 + 3 * seed) as u8)
            } else {
                0
            });
        }
        text += &serde_json::json!({
            "id": format!("r{i}"), "prompt_tokens": 100, "output_tokens": m,
            "proposal": proposal, "match": matched,
        })
        .to_string();
        text.push('\n');
    }
    fs::write(path, text).unwrap();
}

/// `corpus ARGS --format json`, which must succeed.
fn corpus_json(args: &[&str]) -> Value {
    let out = cli()
        .arg("corpus")
        .args(args)
        .args(["--format", "json", "--jobs", "2"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    json_of(&out)
}

/// Every policy's ratio in a one-trace set is `whatif`'s
/// `ratio_to_best_static` for that cell, to the bit, and the best static
/// length is whatif's: the static replays shared across `K` and `c`, the
/// oracle's across `c`, and the peers replayed with one update change no
/// figure.
#[test]
fn a_one_trace_set_gives_whatifs_ratios_exactly() {
    let dir = TempDir::new().unwrap();
    let trace = example_trace(dir.path(), "example.jsonl");
    let trace_arg = trace.to_str().unwrap();
    // corpus keeps the batch full unless told otherwise; whatif replays
    // each request once unless told otherwise.
    for (corpus_load, whatif_load) in [(None, Some("saturated")), (Some("once"), None)] {
        let mut args = vec![
            trace_arg,
            "--max-draft-lens",
            "8,16",
            "--costs",
            "0.02,0.3",
            "--batches",
            "1,4",
            "--sample",
            "0",
        ];
        args.extend(corpus_load.iter().flat_map(|l| ["--load", l]));
        let report = corpus_json(&args);
        let load = corpus_load.or(whatif_load).unwrap();
        assert_eq!(report["load"], load);
        let set = &report["sets"][0];
        assert_eq!(set["set"], trace_arg);
        let cells = set["cells"].as_array().unwrap();
        assert_eq!(cells.len(), 8);
        for cell in cells {
            let (k, c, b) = (&cell["max_draft_len"], &cell["cost"], &cell["batch"]);
            let out = cli()
                .args(["whatif", trace_arg, "--format", "json", "--jobs", "2"])
                .args(["--max-draft-len", &k.to_string()])
                .args(["--cost-linear", &format!("1,{c}")])
                .args(["--batch", &b.to_string()])
                .args(whatif_load.iter().flat_map(|l| ["--load", l]))
                .assert()
                .success()
                .get_output()
                .stdout
                .clone();
            let whatif = json_of(&out);
            assert_eq!(whatif["load"], load);
            assert_eq!(
                cell["best_static_draft_lens"][0],
                whatif["best_static_draft_len"]
            );
            let policies = cell["policies"].as_array().unwrap();
            // none and every policy but the static lengths.
            assert_eq!(policies.len(), 8);
            for p in policies {
                let row = whatif["policies"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|r| r["policy"] == p["policy"])
                    .unwrap();
                let ratio = &row["ratio_to_best_static"];
                assert_eq!(
                    &p["median"], ratio,
                    "{} at K {k}, c {c}, batch {b}, {load}",
                    p["policy"]
                );
                assert_eq!(&p["min"], ratio);
                assert_eq!(p["ratios"], serde_json::json!([ratio]));
                assert_eq!(p["min_trace"], trace_arg);
                assert_eq!(p["kind"], row["kind"]);
            }
        }
    }
}

/// A directory's traces are its `*.jsonl` files by name; the median and
/// the minimum are over them, each trace's ratio its own what-if's.
#[test]
fn median_and_minimum_over_three_traces() {
    let dir = TempDir::new().unwrap();
    let set = dir.path().join("set");
    fs::create_dir(&set).unwrap();
    for (name, seed) in [("c.jsonl", 2), ("a.jsonl", 0), ("b.jsonl", 1)] {
        write_trace(&set.join(name), 12, 16, seed);
    }
    fs::write(set.join("notes.txt"), "not a trace\n").unwrap();
    let args = [
        "--max-draft-lens",
        "8",
        "--costs",
        "0.1",
        "--batches",
        "4",
        "--policies",
        "adaptive,sglang,oracle",
        // A drain to take the median of.
        "--load",
        "once",
    ];
    let set_arg = set.to_str().unwrap();
    let report = corpus_json(&[&[set_arg][..], &args].concat());
    let traces: Vec<&str> = report["sets"][0]["traces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["trace"].as_str().unwrap())
        .collect();
    let names: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|n| format!("{set_arg}/{n}.jsonl"))
        .collect();
    assert_eq!(traces, names);
    let cell = &report["sets"][0]["cells"][0];
    assert_eq!(cell["traces"], 3);
    // Each trace alone gives its own ratio.
    let alone: Vec<Value> = names
        .iter()
        .map(|n| corpus_json(&[&[n.as_str()][..], &args].concat()))
        .collect();
    let mut best = Vec::new();
    for a in &alone {
        best.push(
            a["sets"][0]["cells"][0]["best_static_draft_lens"][0]
                .as_u64()
                .unwrap(),
        );
    }
    assert_eq!(cell["best_static_draft_lens"], serde_json::json!(best));
    let mut sorted_best = best.clone();
    sorted_best.sort_unstable();
    assert_eq!(cell["best_static_draft_len_median"], sorted_best[1] as f64);
    // One figure of each trace's single cell, replayed alone.
    let of_each = |pointer: &str| -> Vec<f64> {
        alone
            .iter()
            .map(|a| {
                a["sets"][0]["cells"][0]
                    .pointer(pointer)
                    .unwrap()
                    .as_f64()
                    .unwrap()
            })
            .collect()
    };
    let drains = of_each("/best_static_drain_shares/0");
    assert_eq!(cell["best_static_drain_shares"], serde_json::json!(drains));
    let mut sorted_drains = drains.clone();
    sorted_drains.sort_by(f64::total_cmp);
    assert_eq!(
        cell["best_static_drain_share_median"].as_f64(),
        Some(sorted_drains[1])
    );
    for (i, p) in cell["policies"].as_array().unwrap().iter().enumerate() {
        let ratios = of_each(&format!("/policies/{i}/median"));
        assert_eq!(p["ratios"], serde_json::json!(ratios));
        let mut sorted = ratios.clone();
        sorted.sort_by(f64::total_cmp);
        assert_eq!(p["median"].as_f64(), Some(sorted[1]), "{}", p["policy"]);
        assert_eq!(p["min"].as_f64(), Some(sorted[0]));
        let at = ratios.iter().position(|&r| r == sorted[0]).unwrap();
        assert_eq!(p["min_trace"], names[at].as_str());
    }
    // The three traces do not all agree, or the test would prove little.
    let first = &cell["policies"][0]["ratios"];
    assert_ne!(first[0], first[1]);
}

/// `--sample N` keeps at most N requests of each trace, the same ones on
/// every run, and the figures are those of the sample.
#[test]
fn a_sample_is_deterministic_and_bounds_the_requests() {
    let dir = TempDir::new().unwrap();
    let trace = dir.path().join("t.jsonl");
    write_trace(&trace, 40, 16, 1);
    let t = trace.to_str().unwrap();
    let grid = ["--max-draft-lens", "8", "--costs", "0.1", "--batches", "4"];
    // `corpus PATH --format json` on the grid, with `flags`.
    let json = |path: &Path, flags: &[&str]| {
        let out = cli()
            .args(["corpus", path.to_str().unwrap(), "--format", "json"])
            .args(flags)
            .args(grid)
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        json_of(&out)
    };
    let run = |sample: &str| json(&trace, &["--sample", sample]);
    let (a, b) = (run("7"), run("7"));
    assert_eq!(a, b);
    assert_eq!(a["sample"], 7);
    let traced = &a["sets"][0]["traces"][0];
    assert_eq!(
        (&traced["requests"], &traced["requests_in_file"]),
        (&7.into(), &40.into())
    );
    let all = run("0");
    let whole = &all["sets"][0]["traces"][0];
    assert_eq!(
        (&whole["requests"], &whole["requests_in_file"]),
        (&40.into(), &40.into())
    );
    assert!(traced["positions"].as_u64() < whole["positions"].as_u64());
    assert_eq!(run("40")["sets"][0]["traces"], all["sets"][0]["traces"]);
    // The sample is not the first seven requests: their positions differ.
    let mut first = String::new();
    for line in fs::read_to_string(&trace).unwrap().lines().take(8) {
        first.push_str(line);
        first.push('\n');
    }
    let head = dir.path().join("head.jsonl");
    fs::write(&head, first).unwrap();
    assert_ne!(
        json(&head, &[])["sets"][0]["traces"][0]["positions"],
        traced["positions"]
    );
    // Unless told otherwise, every request is replayed, past twice the
    // largest default batch too.
    let many = dir.path().join("many.jsonl");
    write_trace(&many, 300, 16, 1);
    let default = json(&many, &[]);
    assert_eq!(default["sample"], 0);
    assert_eq!(default["sets"][0]["traces"][0]["requests"], 300);
    // The table says what was sampled.
    cli()
        .args(["corpus", t, "--sample", "7"])
        .args(grid)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "7 of 40 requests (at most 7 per trace, chosen by a hash of their ids)",
        ));
}

/// The table: one block per set, one table per K, rows of (c, batch),
/// the default policies in at most 100 columns, the minimum under the
/// median; a batch larger than the traces is warned about.
#[test]
fn the_table_has_a_block_per_set_and_a_table_per_k() {
    let dir = TempDir::new().unwrap();
    let set = dir.path().join("set");
    fs::create_dir(&set).unwrap();
    write_trace(&set.join("one.jsonl"), 6, 64, 0);
    write_trace(&set.join("two.jsonl"), 6, 64, 2);
    let single = dir.path().join("single.jsonl");
    write_trace(&single, 6, 64, 1);
    let out = cli()
        .arg("corpus")
        .arg(&set)
        .arg(&single)
        .args([
            "--costs",
            "0.02,0.3",
            "--batches",
            "1,128",
            "--load",
            "once",
        ])
        .assert()
        .success()
        .stderr(predicate::str::contains(format!(
            "warning: {}: 2 of 2 traces replay fewer requests than a batch of 128 (the fewest \
             6): at that batch they are all in flight at once and the batch never fills\n",
            set.display()
        )))
        .stderr(predicate::str::contains("a batch of 1 ").not())
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(text.matches("\ncorpus ").count() + 1, 2, "{text}");
    assert!(text.starts_with(&format!("corpus {}: 2 traces, 12 requests", set.display())));
    assert!(text.contains(&format!("corpus {}: 1 trace, 6 requests", single.display())));
    assert_eq!(text.matches("\nK = 8\n").count(), 2);
    assert_eq!(text.matches("\nK = 64\n").count(), 2);
    assert!(text.contains("median over the 2 traces, minimum under it"));
    assert!(text.contains("(one trace: its ratio)"));
    let header = text.lines().find(|l| l.contains("adaptive")).unwrap();
    for name in [
        "c",
        "batch",
        "best k",
        "none",
        "per-state",
        "sglang",
        "vllm-44336",
        "smartspec",
        "vllm-av",
        "oracle",
    ] {
        assert!(header.contains(name), "{header}");
    }
    // Every line but those naming the (temporary) paths.
    let tmp = dir.path().to_str().unwrap();
    assert!(
        text.lines()
            .filter(|l| !l.contains(tmp))
            .all(|l| l.chars().count() <= 100),
        "{text}"
    );
    // The two-trace set has a line of minimums under each row, the single
    // trace none: 2 Ks x 4 cells of each.
    let minimums = text
        .lines()
        .filter(|l| l.trim_start().starts_with('('))
        .count();
    assert_eq!(minimums, 2 * 4);
    let rows = text
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with("0.3 ") || l.starts_with("0.02 "))
        .count();
    assert_eq!(rows, 2 * 2 * 4);
    // Six requests never fill a batch of 128, and one request alone
    // always fills a batch of 1: the best k is starred at 128 only.
    let starred: Vec<bool> = text
        .lines()
        .map(str::split_whitespace)
        .filter_map(|mut w| {
            let (c, batch, best) = (w.next()?, w.next()?, w.next()?);
            (c == "0.3" || c == "0.02").then(|| {
                assert_eq!(best.ends_with('*'), batch == "128", "{text}");
                best.ends_with('*')
            })
        })
        .collect();
    assert_eq!(starred.len(), 2 * 2 * 4);
    assert!(text.contains(
        "best k*: the median share of the best static k's cost spent below a full batch is half"
    ));
    assert!(text.contains("best k*: half or more of the best static k's cost is spent below"));
    assert!(text.contains("\nbatch fed each request once, draining at the end\n"));
}

/// By default the batch is kept full: copies of a trace's requests fill a
/// batch larger than it, and nothing is spent draining.
#[test]
fn saturated_cells_have_no_drain() {
    let dir = TempDir::new().unwrap();
    let single = dir.path().join("single.jsonl");
    write_trace(&single, 6, 64, 1);
    let single_arg = single.to_str().unwrap();
    let grid = [
        "--costs",
        "0.3",
        "--batches",
        "4,128",
        "--max-draft-lens",
        "8",
    ];
    let out = cli()
        .arg("corpus")
        .arg(single_arg)
        .args(grid)
        .assert()
        .success()
        .stderr(predicate::str::contains(format!(
            "warning: {single_arg}: 1 of 1 traces replay fewer requests than a batch of 128 (the \
             fewest 6): at that batch copies of the same requests are in flight at once\n"
        )))
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains(
            "\nbatch fed saturated: the first requests again until each has finished once\n"
        ),
        "{text}"
    );
    let bests: Vec<&str> = text
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            (w.next()? == "0.3").then(|| w.nth(1)).flatten()
        })
        .collect();
    assert_eq!(bests.len(), 2, "{text}");
    assert!(bests.iter().all(|b| !b.ends_with('*')), "{text}");
    assert!(!text.contains("best k*"), "{text}");
    let report = corpus_json(&[&[single_arg][..], &grid].concat());
    for cell in report["sets"][0]["cells"].as_array().unwrap() {
        assert_eq!(cell["best_static_drain_share_median"], 0.0, "{cell}");
    }
}

#[test]
fn bad_sets_and_flags_are_refused() {
    let dir = TempDir::new().unwrap();
    let empty = dir.path().join("empty");
    fs::create_dir(&empty).unwrap();
    fs::write(empty.join("readme.txt"), "no traces here\n").unwrap();
    let refused = |args: &[&str], message: &str| {
        cli()
            .arg("corpus")
            .args(args)
            .assert()
            .code(2)
            .stdout("")
            .stderr(predicate::str::contains(message));
    };
    let empty_arg = empty.to_str().unwrap();
    refused(
        &[empty_arg],
        &format!("error: {empty_arg}: no trace in this directory"),
    );
    let missing = dir.path().join("missing.jsonl");
    refused(&[missing.to_str().unwrap()], missing.to_str().unwrap());
    // A bad line, named with its file and line.
    let bad = dir.path().join("bad");
    fs::create_dir(&bad).unwrap();
    write_trace(&bad.join("a.jsonl"), 3, 64, 0);
    let mut text = fs::read_to_string(bad.join("a.jsonl")).unwrap();
    text.push_str("{\"id\": 9, \"output_tokens\": 3}\n");
    fs::write(bad.join("b.jsonl"), text).unwrap();
    let b = bad.join("b.jsonl");
    refused(
        &[bad.to_str().unwrap()],
        &format!("{}: line 5", b.display()),
    );
    // A K above a trace's cap names the trace and the flag.
    let capped = dir.path().join("capped.jsonl");
    write_trace(&capped, 3, 16, 0);
    let capped_arg = capped.to_str().unwrap();
    refused(
        &[capped_arg],
        &format!("{capped_arg}: --max-draft-lens 64 is above the trace's cap 16"),
    );
    // A replay trace is named as one.
    let replay = dir.path().join("steps.jsonl");
    fs::write(&replay, "{\"drafted\": 3, \"accepted\": 1}\n").unwrap();
    refused(&[replay.to_str().unwrap()], "a replay trace");
    let good = dir.path().join("good.jsonl");
    write_trace(&good, 3, 64, 0);
    let g = good.to_str().unwrap();
    refused(&[g, "--costs", "0.1,-1"], "--costs");
    refused(&[g, "--batches", "0"], "--batches");
    refused(&[g, "--max-draft-lens", "8,65"], "--max-draft-lens");
    refused(&[g, "--batches", "8,1,8"], "--batches: 8 is given twice");
    refused(
        &[
            g,
            "--max-draft-lens",
            "8,64",
            "--policies",
            "adaptive,static:9",
        ],
        "--policies static:9: above the smallest of --max-draft-lens, 8",
    );
    refused(&[g, "--policies", "sideways"], "--policies");
    refused(&[g, "--format", "vllm"], "--format");
    refused(&[], "SET");
}
