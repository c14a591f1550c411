//! Integration tests of `specdec-metrics advise batch`: one report
//! and one cost per batch-size bucket into the draft length per bucket
//! (computed by hand and checked against the library), printed as vLLM's
//! and TensorRT-LLM's schedules; every error names the bucket or the file.

use std::fs;
use std::path::PathBuf;

use assert_cmd::Command;
use predicates::prelude::*;
use specdec_metrics::{AcceptanceHistogram, Advisor, BatchBucket, BatchTable, StepCost};
use tempfile::TempDir;

fn bin() -> Command {
    assert_cmd::cargo::cargo_bin_cmd!("specdec-metrics")
}

/// Replays `(k, a, steps)` rows (K = 2) into a report file `name.json`;
/// returns its path and the histogram it holds.
fn report(
    dir: &TempDir,
    name: &str,
    rows: &[(usize, usize, usize)],
) -> (String, AcceptanceHistogram) {
    let mut text = String::new();
    let mut h = AcceptanceHistogram::new(2).unwrap();
    for &(k, a, steps) in rows {
        for _ in 0..steps {
            text.push_str(&format!("{{\"drafted\":{k},\"accepted\":{a}}}\n"));
            h.observe(k, a).unwrap();
        }
    }
    let out = bin()
        .args(["replay", "--max-draft-len", "2"])
        .write_stdin(text)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let path = dir.path().join(format!("{name}.json"));
    fs::write(&path, out).unwrap();
    (path.display().to_string(), h)
}

/// `(2,0) x2, (2,1) x2, (2,2) x4`: under the uniform prior the rates are
/// 7/10 and 5/8, tokens per step 1, 1.7, 2.1375 for k = 0, 1, 2.
const GOOD: &[(usize, usize, usize)] = &[(2, 0, 2), (2, 1, 2), (2, 2, 4)];
/// `(2,0) x8, (2,1) x1, (2,2) x1`: rates 1/4 and 1/2, tokens 1, 1.25, 1.375.
const POOR: &[(usize, usize, usize)] = &[(2, 0, 8), (2, 1, 1), (2, 2, 1)];

/// Exit status 0, and on standard error nothing but warnings about the
/// buckets (the hand examples have few steps).
fn ok(code: Option<i32>, err: &str) {
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.lines().all(|l| l.starts_with("warning: bucket ")),
        "{err}"
    );
}

/// `advise batch --max-draft-len 2` with one `--bucket` per value and
/// `extra` flags; standard output, standard error, exit status.
fn batch(buckets: &[String], extra: &[&str]) -> (String, String, Option<i32>) {
    let mut cmd = bin();
    cmd.args(["advise", "batch", "--max-draft-len", "2"]);
    for b in buckets {
        cmd.arg("--bucket").arg(b);
    }
    let out = cmd.args(extra).output().unwrap();
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
        out.status.code(),
    )
}

/// The three buckets of the hand example: costs rising with the batch.
/// Goodput tokens / cost: 1-4 at 1 + 0.1 k: 1, 1.545, 1.781 -> 2; 5-8 at
/// costs 1, 1.5, 1.9: 1, 1.133, 1.125 -> 1; 9-64 at 1 + 0.8 k: 1, 0.944,
/// 0.822 -> 0.
fn falling(dir: &TempDir) -> (Vec<String>, Vec<BatchBucket>) {
    let (good, h) = report(dir, "good", GOOD);
    let buckets = vec![
        format!("1-4:linear:1,0.1:{good}"),
        format!("5-8:table:1,1.5,1.9:{good}"),
        format!("9-64:linear:1,0.8:{good}"),
    ];
    let lib = vec![
        BatchBucket::new(1, 4, h.clone(), StepCost::linear(1.0, 0.1).unwrap()),
        BatchBucket::new(
            5,
            8,
            h.clone(),
            StepCost::table(vec![1.0, 1.5, 1.9]).unwrap(),
        ),
        BatchBucket::new(9, 64, h, StepCost::linear(1.0, 0.8).unwrap()),
    ];
    (buckets, lib)
}

#[test]
fn vllm_and_trtllm_formats_print_the_hand_computed_schedules() {
    let dir = TempDir::new().unwrap();
    let (buckets, _) = falling(&dir);
    let (out, err, code) = batch(&buckets, &["--format", "vllm"]);
    ok(code, &err);
    assert_eq!(
        out,
        "{\"num_speculative_tokens\":2,\"num_speculative_tokens_per_batch_size\":[[1,4,2],[5,8,1],[9,64,0]]}\n"
    );
    let (out, err, code) = batch(&buckets, &["--format", "trtllm"]);
    ok(code, &err);
    assert_eq!(
        out,
        "{\"max_draft_len\":2,\"draft_len_schedule\":{\"4\":2,\"8\":1,\"64\":0}}\n"
    );
}

#[test]
fn json_is_the_library_table_with_both_schedules() {
    let dir = TempDir::new().unwrap();
    let (buckets, lib) = falling(&dir);
    let (out, err, code) = batch(&buckets, &[]);
    ok(code, &err);
    assert_eq!(out.lines().count(), 1);
    // Byte for byte the library's table, then both engines' keys.
    let table = BatchTable::recommend(&Advisor::default(), &lib).unwrap();
    let lib_json = serde_json::to_string(&table).unwrap();
    let expected = format!(
        "{},\"vllm\":{},\"trtllm\":{}}}\n",
        &lib_json[..lib_json.len() - 1],
        serde_json::to_string(&table.vllm_config()).unwrap(),
        serde_json::to_string(&table.trtllm_config().unwrap()).unwrap()
    );
    assert_eq!(out, expected);
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    let k: Vec<u64> = json["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["recommendation"]["draft_len"].as_u64().unwrap())
        .collect();
    assert_eq!(k, [2, 1, 0]);
    let keys: Vec<&str> = json
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys.len(), 4);
    for key in ["max_draft_len", "buckets", "vllm", "trtllm"] {
        assert!(keys.contains(&key), "{key} in {keys:?}");
    }
}

#[test]
fn prior_and_credible_level_reach_every_bucket() {
    let dir = TempDir::new().unwrap();
    let (buckets, lib) = falling(&dir);
    let (out, _, code) = batch(&buckets, &["--prior", "9,1", "--credible-level", "0.5"]);
    assert_eq!(code, Some(0));
    let advisor = Advisor::default()
        .with_prior(9.0, 1.0)
        .unwrap()
        .with_credible_level(0.5)
        .unwrap();
    let table = BatchTable::recommend(&advisor, &lib).unwrap();
    let lib_json = serde_json::to_string(&table).unwrap();
    assert!(out.starts_with(&lib_json[..lib_json.len() - 1]), "{out}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["buckets"][0]["recommendation"]["prior"]["alpha"], 9.0);
    assert_eq!(json["buckets"][2]["recommendation"]["credible_level"], 0.5);
}

#[test]
fn table_shows_one_row_per_bucket_and_both_schedules() {
    let dir = TempDir::new().unwrap();
    let (buckets, _) = falling(&dir);
    let (out, err, code) = batch(&buckets, &["--format", "table"]);
    ok(code, &err);
    let good = dir.path().join("good.json").display().to_string();
    assert!(out.starts_with(
        "Draft length by batch size (K = num_spec_tokens = 2; prior Beta(1, 1); 90% credible intervals)\n"
    ));
    // k = 2 at 1-4: E[accepted] 1.1375 (on the rounding boundary of three
    // decimals in binary: either neighbour is right), tokens 2.1375, cost 1.2, speedup
    // 2.1375 / 1.2 = 1.781; k = 1 at 5-8: 0.7, 1.7, 1.5, 1.133.
    let row = |bs: &str, rest: &str| {
        out.lines()
            .find(|l| l.trim_start().starts_with(&format!("{bs} ")))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_else(|| panic!("no row for {bs} in\n{out}"))
            == format!("{bs} {rest} {good}")
    };
    assert!(
        row("1-4", "8 2 1.137 2.138 1.2 1.781x") || row("1-4", "8 2 1.138 2.138 1.2 1.781x"),
        "{out}"
    );
    assert!(row("5-8", "8 1 0.700 1.700 1.5 1.133x"), "{out}");
    assert!(row("9-64", "8 0 0.000 1.000 1 1.000x"), "{out}");
    assert!(out.contains(
        "\nvLLM speculative_config: {\"num_speculative_tokens\":2,\"num_speculative_tokens_per_batch_size\":[[1,4,2],[5,8,1],[9,64,0]]}\n"
    ));
    assert!(out.contains(
        "\nTensorRT-LLM speculative config: {\"max_draft_len\":2,\"draft_len_schedule\":{\"4\":2,\"8\":1,\"64\":0}}\n"
    ));
    assert!(out.ends_with(
        "Above batch size 64, vLLM keeps draft length 0 and TensorRT-LLM drafts none: end the last bucket at the engine's largest batch size.\n"
    ));
}

#[test]
fn a_table_tensorrt_llm_cannot_hold_is_null_in_json_and_an_error_alone() {
    // Poor acceptance at small batches drafts 0 (cost 1 + 0.3 k: 1, 0.96,
    // 0.86), good acceptance at large batches 2 (1, 1.31, 1.34).
    let dir = TempDir::new().unwrap();
    let (poor, _) = report(&dir, "poor", POOR);
    let (good, _) = report(&dir, "good", GOOD);
    let buckets = [
        format!("1-4:linear:1,0.3:{poor}"),
        format!("5-8:linear:1,0.3:{good}"),
    ];
    let why = "bucket 2 (batch sizes 5-8) recommends draft length 2, more than the 0 of bucket 1 (batch sizes 1-4): TensorRT-LLM's draft_len_schedule needs its value at the smallest batch size to be max_draft_len and no value above it";
    let (out, err, code) = batch(&buckets, &[]);
    assert_eq!(code, Some(0));
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(json["trtllm"].is_null());
    assert_eq!(
        json["vllm"]["num_speculative_tokens_per_batch_size"],
        serde_json::json!([[1, 4, 0], [5, 8, 2]])
    );
    assert!(
        err.contains(&format!(
            "warning: TensorRT-LLM: {why}; \"trtllm\" is null\n"
        )),
        "{err}"
    );
    let (out, err, code) = batch(&buckets, &["--format", "trtllm"]);
    assert_eq!((code, out.as_str()), (Some(2), ""));
    assert!(err.contains(&format!("error: {why}\n")), "{err}");
    let (out, _, code) = batch(&buckets, &["--format", "table"]);
    assert_eq!(code, Some(0));
    assert!(
        out.contains(&format!("\nTensorRT-LLM: no draft_len_schedule: {why}\n")),
        "{out}"
    );
    let (out, _, code) = batch(&buckets, &["--format", "vllm"]);
    assert_eq!(code, Some(0));
    assert_eq!(
        out,
        "{\"num_speculative_tokens\":2,\"num_speculative_tokens_per_batch_size\":[[1,4,0],[5,8,2]]}\n"
    );
}

#[test]
fn warnings_name_their_bucket() {
    let dir = TempDir::new().unwrap();
    let (good, _) = report(&dir, "good", GOOD);
    let (_, err, code) = batch(
        &[
            format!("1-4:linear:1,0.1:{good}"),
            format!("5-6:linear:1,0.1:{good}"),
        ],
        &["--format", "vllm"],
    );
    assert_eq!(code, Some(0));
    for bucket in ["1-4", "5-6"] {
        assert!(
            err.contains(&format!(
                "warning: bucket {bucket} ({good}): only 8 steps drafted a token (fewer than 1,000)"
            )),
            "{err}"
        );
    }
}

/// `advise batch` with these buckets fails with status 2, nothing
/// on standard output, and `message` on standard error.
fn assert_error(buckets: &[String], extra: &[&str], message: &str) {
    let (out, err, code) = batch(buckets, extra);
    assert_eq!((code, out.as_str()), (Some(2), ""), "{err}");
    assert!(err.contains(message), "expected {message:?} in\n{err}");
}

#[test]
fn buckets_that_do_not_tile_the_batch_sizes_are_named_with_their_report() {
    let dir = TempDir::new().unwrap();
    let (good, _) = report(&dir, "good", GOOD);
    let b = |range: &str| format!("{range}:linear:1,0.1:{good}");
    assert_error(
        &[b("1-4"), b("6-8")],
        &[],
        &format!(
            "error: bucket 2 (batch sizes 6-8) leaves batch size 5 without a bucket after bucket 1 (batch sizes 1-4); vLLM would give them the draft length of the bucket below, TensorRT-LLM that of the bucket above (report {good})\n"
        ),
    );
    assert_error(
        &[b("1-4"), b("4-8")],
        &[],
        &format!(
            "error: bucket 2 (batch sizes 4-8) overlaps bucket 1 (batch sizes 1-4): each batch size belongs to one bucket (report {good})\n"
        ),
    );
    assert_error(
        &[b("1-4"), b("5-8"), b("2-3")],
        &[],
        "error: bucket 3 (batch sizes 2-3) starts below bucket 2 (batch sizes 5-8): give the buckets in order of batch size",
    );
    assert_error(
        &[b("2-4")],
        &[],
        "error: bucket 1 (batch sizes 2-4) does not start at batch size 1: the buckets must cover every batch size from 1",
    );
    assert_error(
        &[b("1-4"), b("9-5")],
        &[],
        "error: bucket 2 (batch sizes 9-5) starts above its end",
    );
}

#[test]
fn costs_reports_and_k_that_do_not_fit_are_named() {
    let dir = TempDir::new().unwrap();
    let (good, _) = report(&dir, "good", GOOD);
    // The cost is checked before any report is read.
    assert_error(
        &[
            format!("1-4:linear:1,0.1:{good}"),
            "5-8:table:1,1.1:missing.json".to_owned(),
        ],
        &[],
        "error: bucket 2 (batch sizes 5-8): the step cost table has 2 entries but max_draft_len 2 needs 3 (one per draft length 0..=2) (report missing.json)\n",
    );
    assert_error(
        &[
            format!("1-4:linear:1,0.1:{good}"),
            "5-8:linear:1,0.1:missing.json".to_owned(),
        ],
        &[],
        "error: cannot open missing.json",
    );
    let k3 = dir.path().join("k3.json");
    let out = bin()
        .args(["replay", "--max-draft-len", "3"])
        .write_stdin("{\"drafted\":3,\"accepted\":1}\n")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    fs::write(&k3, out).unwrap();
    let k3 = k3.display().to_string();
    assert_error(
        &[
            format!("1-4:linear:1,0.1:{good}"),
            format!("5-8:linear:1,0.1:{k3}"),
        ],
        &[],
        &format!("error: {k3} (bucket 5-8): num_spec_tokens (K) is 3 but --max-draft-len is 2"),
    );
    let tampered = dir.path().join("tampered.json");
    fs::write(
        &tampered,
        fs::read_to_string(&good)
            .unwrap()
            .replace("\"num_spec_steps\":8", "\"num_spec_steps\":9"),
    )
    .unwrap();
    let tampered = tampered.display().to_string();
    assert_error(
        &[format!("1-4:linear:1,0.1:{tampered}")],
        &[],
        &format!("error: {tampered}: not a valid report"),
    );
}

/// `advise batch` with one `--bucket` per value and `extra` flags, without
/// `--max-draft-len`.
fn batch_without_k(buckets: &[String], extra: &[&str]) -> (String, String, Option<i32>) {
    let mut cmd = bin();
    cmd.args(["advise", "batch"]);
    for b in buckets {
        cmd.arg("--bucket").arg(b);
    }
    let out = cmd.args(extra).output().unwrap();
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
        out.status.code(),
    )
}

#[test]
fn k_defaults_to_the_first_reports() {
    let dir = TempDir::new().unwrap();
    let (buckets, _) = falling(&dir);
    for format in ["json", "table", "vllm", "trtllm"] {
        let without = batch_without_k(&buckets, &["--format", format]);
        ok(without.2, &without.1);
        assert_eq!(without, batch(&buckets, &["--format", format]), "{format}");
    }

    let (good, _) = report(&dir, "good", GOOD);
    let k3 = dir.path().join("k3.json");
    let out = bin()
        .args(["replay", "--max-draft-len", "3"])
        .write_stdin("{\"drafted\":3,\"accepted\":1}\n")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    fs::write(&k3, out).unwrap();
    let k3 = k3.display().to_string();
    let (out, err, code) = batch_without_k(
        &[
            format!("1-4:linear:1,0.1:{good}"),
            format!("5-8:linear:1,0.1:{k3}"),
        ],
        &[],
    );
    assert_eq!((code, out.as_str()), (Some(2), ""));
    assert_eq!(
        err,
        format!(
            "error: {k3} (bucket 5-8): num_spec_tokens (K) is 3 but {good} (bucket 1-4) has 2; every bucket's report must have the same K\n"
        )
    );
    // Every cost is checked against the first report's K before the
    // other reports are read.
    let (out, err, code) = batch_without_k(
        &[
            format!("1-4:linear:1,0.1:{good}"),
            "5-8:table:1,1.1:missing.json".to_owned(),
        ],
        &[],
    );
    assert_eq!((code, out.as_str()), (Some(2), ""));
    assert_eq!(
        err,
        format!(
            "error: bucket 2 (batch sizes 5-8): the step cost table has 2 entries but max_draft_len 2 needs 3 (one per draft length 0..=2) (report missing.json; K = 2 is the num_spec_tokens of {good})\n"
        )
    );
}

#[test]
fn malformed_bucket_values_are_errors() {
    for (value, message) in [
        (
            "1-4:linear:1,0.1",
            "\"1-4:linear:1,0.1\" has 3 parts separated by ':'; expected START-END:linear:BASE,PER_TOKEN:REPORT or START-END:table:C0,...,CK:REPORT",
        ),
        (
            "4:linear:1,0.1:r.json",
            "the batch sizes \"4\" are not START-END (e.g. 1-8)",
        ),
        (
            "a-4:linear:1,0.1:r.json",
            "\"a\" is not a batch size (a whole number)",
        ),
        (
            "1--4:linear:1,0.1:r.json",
            "\"-4\" is not a batch size (a whole number)",
        ),
        (
            "1-4:quadratic:1,0.1:r.json",
            "the cost kind \"quadratic\" is neither linear nor table",
        ),
        (
            "1-4:linear:1,-0.1:r.json",
            "the cost per draft token is -0.1; it must be zero or more",
        ),
        (
            "1-4:linear:1:r.json",
            "1 value given; expected two numbers BASE,PER_TOKEN",
        ),
        (
            "1-4:table:1,0,1:r.json",
            "the cost of draft length 1 is 0; a step cost must be more than zero",
        ),
        ("1-4:linear:1,0.1:", "no report is given"),
    ] {
        assert_error(
            &[value.to_owned()],
            &[],
            &format!(
                "error: invalid value '{value}' for '--bucket <START-END:COST:REPORT>': {message}"
            ),
        );
    }
}

/// `advise batch` is a subcommand with flags of its own: the parser
/// refuses what belongs to `advise` of one report, and `advise` refuses
/// what belongs to `advise batch`, each with exit status 2.
#[test]
fn batch_flags_and_one_report_flags_do_not_mix() {
    let dir = TempDir::new().unwrap();
    let (good, _) = report(&dir, "good", GOOD);
    let bucket = [format!("1-4:linear:1,0.1:{good}")];
    assert_error(
        &bucket,
        &["--cost-linear", "1,0.1"],
        "error: unexpected argument '--cost-linear' found",
    );
    assert_error(
        &bucket,
        &[good.as_str()],
        &format!("error: unexpected argument '{good}' found"),
    );
    assert_error(
        &[],
        &[],
        "the following required arguments were not provided:\n  --bucket <START-END:COST:REPORT>",
    );
    let advise = |args: &[&str]| {
        let out = bin().arg("advise").args(args).output().unwrap();
        assert_eq!(
            (out.status.code(), out.stdout.as_slice()),
            (Some(2), &b""[..])
        );
        String::from_utf8(out.stderr).unwrap()
    };
    let one = ["--max-draft-len", "2", "--cost-linear", "1,0.1"];
    for format in ["vllm", "trtllm"] {
        let err = advise(&[&one[..], &["--format", format, &good]].concat());
        assert!(
            err.contains(&format!(
                "error: invalid value '{format}' for '--format <FORMAT>'\n  [possible values: json, table]"
            )),
            "{err}"
        );
    }
    let err = advise(&[&one[..], &["--bucket", &bucket[0], &good]].concat());
    assert!(
        err.contains("error: unexpected argument '--bucket' found"),
        "{err}"
    );
    // The flag of the first design is gone, not an alias.
    let err = advise(&[
        "--max-draft-len",
        "2",
        "--batch-table",
        "--bucket",
        &bucket[0],
    ]);
    assert!(
        err.contains("error: unexpected argument '--batch-table' found"),
        "{err}"
    );
    // After a flag of advise itself, "batch" is a report file.
    let err = advise(&[&one[..], &["batch"]].concat());
    assert!(err.contains("error: cannot open batch: "), "{err}");
}

#[test]
fn the_shipped_example_reports_give_the_manuals_schedule() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/batch");
    let mut cmd = bin();
    cmd.args([
        "advise",
        "batch",
        "--max-draft-len",
        "4",
        "--format",
        "vllm",
    ]);
    for (range, cost, file) in [
        ("1-8", "linear:1,0.05", "bs1-8.json"),
        ("9-32", "linear:1,0.3", "bs9-32.json"),
        ("33-256", "table:10,18,26,34,42", "bs33-256.json"),
    ] {
        cmd.arg("--bucket")
            .arg(format!("{range}:{cost}:{}", root.join(file).display()));
    }
    cmd.assert().success().stdout(predicate::eq(
        "{\"num_speculative_tokens\":4,\"num_speculative_tokens_per_batch_size\":[[1,8,4],[9,32,2],[33,256,0]]}\n",
    ));
}

#[test]
fn the_example_reports_are_what_generate_sh_makes() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/batch");
    let dir = TempDir::new().unwrap();
    fs::copy(root.join("generate.sh"), dir.path().join("generate.sh")).unwrap();
    let bin = assert_cmd::cargo::cargo_bin!("specdec-metrics");
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let status = std::process::Command::new("sh")
        .arg("generate.sh")
        .current_dir(dir.path())
        .env("PATH", path)
        .status()
        .unwrap();
    assert!(status.success());
    for name in ["bs1-8.json", "bs9-32.json", "bs33-256.json"] {
        assert_eq!(
            fs::read_to_string(dir.path().join(name)).unwrap(),
            fs::read_to_string(root.join(name)).unwrap(),
            "{name}"
        );
    }
}

#[test]
fn help_lists_advise_batch_and_its_flags() {
    bin().args(["advise", "--help"]).assert().success().stdout(
        predicate::str::contains("specdec-metrics advise <COMMAND>").and(predicate::str::contains(
            "  batch  One draft length per bucket of batch sizes",
        )),
    );
    bin()
        .args(["advise", "batch", "--help"])
        .assert()
        .success()
        .stdout(
            predicate::str::contains("Usage: specdec-metrics advise batch [OPTIONS]")
                .and(predicate::str::contains("--bucket <START-END:COST:REPORT>"))
                .and(predicate::str::contains("--max-draft-len <K>"))
                .and(predicate::str::contains("--prior <ALPHA,BETA>"))
                .and(predicate::str::contains("--credible-level <P>"))
                .and(predicate::str::contains("- trtllm:")),
        );
}

/// A report path holding control characters (a terminal title sequence,
/// ESC ... BEL) reaches neither the table nor a warning raw: it is shown
/// escaped, as every other input quoted by the command line.
#[test]
fn a_report_path_with_control_characters_is_escaped_everywhere() {
    let dir = TempDir::new().unwrap();
    let (good, _) = report(&dir, "good", GOOD);
    let hostile = dir.path().join("r\u{1b}]0;pwned\u{7}.json");
    fs::copy(&good, &hostile).unwrap();
    let shown = format!("{}/r\\u001b]0;pwned\\u0007.json", dir.path().display());
    let buckets = [
        format!("1-4:linear:1,0.1:{}", hostile.display()),
        format!("5-8:linear:1,0.1:{good}"),
    ];
    for format in ["table", "json", "vllm"] {
        let (out, err, code) = batch(&buckets, &["--format", format]);
        ok(code, &err);
        for text in [&out, &err] {
            assert!(
                !text.contains('\u{1b}') && !text.contains('\u{7}'),
                "{format}: raw control characters in\n{text}"
            );
        }
        // Every bucket's warnings name it, escaped.
        assert!(
            err.contains(&format!(
                "warning: bucket 1-4 ({shown}): only 8 steps drafted a token"
            )),
            "{format}: {err}"
        );
        if format == "table" {
            assert!(out.contains(&format!("1.781x  {shown}\n")), "{out}");
        }
    }
    // Errors that name the bucket's report escape it too.
    let (_, err, code) = batch(&[format!("1-4:table:1,1.1:{}", hostile.display())], &[]);
    assert_eq!(code, Some(2));
    assert_eq!(
        err,
        format!(
            "error: bucket 1 (batch sizes 1-4): the step cost table has 2 entries but max_draft_len 2 needs 3 (one per draft length 0..=2) (report {shown})\n"
        )
    );
}

/// A report path that is not UTF-8 (any bytes but NUL and `/` name a file
/// on unix) works in a `--bucket` as it works as the REPORT of `advise`.
#[cfg(unix)]
#[test]
fn a_report_path_that_is_not_utf8_is_taken() {
    use std::ffi::OsString;
    use std::os::unix::ffi::{OsStrExt, OsStringExt};

    let dir = TempDir::new().unwrap();
    let (good, _) = report(&dir, "good", GOOD);
    let mut name = dir.path().as_os_str().as_bytes().to_vec();
    name.extend_from_slice(b"/r\xff\xfe.json");
    let path = PathBuf::from(OsString::from_vec(name.clone()));
    fs::copy(&good, &path).unwrap();

    // As REPORT of advise: taken.
    bin()
        .args(["advise", "--cost-linear", "1,0.1"])
        .arg(&path)
        .assert()
        .success();
    // As a bucket's report: taken too, and named as the other errors and
    // warnings name it (the bytes that are not UTF-8 as U+FFFD).
    let mut bucket = b"1-4:linear:1,0.1:".to_vec();
    bucket.extend_from_slice(&name);
    let out = bin()
        .args(["advise", "batch", "--format", "table"])
        .arg("--bucket")
        .arg(OsString::from_vec(bucket))
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    );
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let shown = format!("{}/r\u{fffd}\u{fffd}.json", dir.path().display());
    assert!(stdout.contains(&format!("1.781x  {shown}\n")), "{stdout}");
    assert!(
        stderr.contains(&format!("warning: bucket 1-4 ({shown}): only 8 steps")),
        "{stderr}"
    );
    // The batch sizes and the cost are text: bytes that are not UTF-8
    // there are an error that says where they are.
    let out = bin()
        .args(["advise", "batch", "--bucket"])
        .arg(std::ffi::OsStr::from_bytes(b"1-4:linear:1,0.1\xff:r.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.starts_with(
            "error: invalid value '1-4:linear:1,0.1\u{fffd}:r.json' for '--bucket <START-END:COST:REPORT>': the cost values \"1,0.1\u{fffd}\" are not UTF-8 text"
        ),
        "{stderr}"
    );
}

/// Standard input can be read once: a second bucket reading `-` is refused
/// before any report is read, naming both buckets, instead of failing on
/// an empty "-" once the first bucket has read everything.
#[test]
fn only_one_bucket_reads_standard_input() {
    let dir = TempDir::new().unwrap();
    let (good, _) = report(&dir, "good", GOOD);
    let content = fs::read_to_string(&good).unwrap();
    let run = |buckets: &[&str]| {
        let mut cmd = bin();
        cmd.args(["advise", "batch", "--format", "vllm"]);
        for b in buckets {
            cmd.arg("--bucket").arg(b);
        }
        cmd.write_stdin(content.clone()).output().unwrap()
    };
    // One bucket from standard input: fine, and named as advise names it.
    let one = run(&["1-4:linear:1,0.1:-", &format!("5-8:linear:1,0.1:{good}")]);
    assert_eq!(one.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&one.stderr)
            .contains("warning: bucket 1-4 (<stdin>): only 8 steps drafted a token"),
        "{}",
        String::from_utf8_lossy(&one.stderr)
    );
    // Two: refused up front (bucket 1's missing report is never opened).
    let two = run(&[
        "1-4:linear:1,0.1:missing.json",
        "5-8:linear:1,0.1:-",
        "9-12:linear:1,0.1:-",
    ]);
    assert_eq!(
        (two.status.code(), two.stdout.as_slice()),
        (Some(2), &b""[..])
    );
    assert_eq!(
        String::from_utf8_lossy(&two.stderr),
        "error: bucket 3 reads standard input (-), which bucket 2 already reads; only one bucket can read standard input\n"
    );
}
