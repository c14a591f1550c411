//! Integration tests of the `specdec-metrics` binary: `replay` (`docs/cli.md`),
//! its output formats and plot, `merge`, and every kind of bad input.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;
use rand_xoshiro::SplitMix64;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use specdec_metrics::AcceptanceHistogram;
use tempfile::TempDir;

fn bin() -> Command {
    assert_cmd::cargo::cargo_bin_cmd!("specdec-metrics")
}

/// `replay --max-draft-len K` with `input` on standard input.
fn replay_stdin(k: usize, input: &str) -> Command {
    let mut cmd = bin();
    cmd.args(["replay", "--max-draft-len", &k.to_string()])
        .write_stdin(input.to_owned());
    cmd
}

fn write(dir: &TempDir, name: &str, content: &str) -> PathBuf {
    let path = dir.path().join(name);
    fs::write(&path, content).unwrap();
    path
}

fn stdout_of(cmd: &mut Command) -> String {
    let out = cmd.assert().success().get_output().stdout.clone();
    String::from_utf8(out).unwrap()
}

fn report(h: &AcceptanceHistogram) -> String {
    serde_json::to_string(h).unwrap() + "\n"
}

const EXAMPLE_TRACE: &str = r#"{"drafted":3,"accepted":0}
{"drafted":3,"accepted":3}
{"drafted":3,"accepted":2}
{"drafted":3,"accepted":3}
{"drafted":3,"accepted":1}
"#;

/// The report of the reference's example, byte for byte.
const EXAMPLE_REPORT: &str = r#"{"mean_acceptance_length":2.8,"draft_acceptance_rate":0.6,"acceptance_histogram":[1,1,1,2],"acceptance_histogram_by_draft_length":{"3":[1,1,1,2]},"num_spec_steps":5,"num_accepted_draft_tokens":9,"num_draft_tokens":15,"num_spec_tokens":3,"num_accepted_tokens_per_pos":[4,3,2],"num_draft_tokens_per_pos":[5,5,5],"num_undrafted_steps":0,"num_rejected_observations":0,"scheduled_steps_by_budget":[0,0,0,0]}
"#;

// ---------------------------------------------------------------------------
// replay: shapes and sources

#[test]
fn replay_spec_example_from_stdin_gives_the_spec_report() {
    replay_stdin(3, EXAMPLE_TRACE)
        .assert()
        .success()
        .stdout(EXAMPLE_REPORT)
        .stderr("");
}

#[test]
fn replay_from_a_file_and_from_dash() {
    let dir = TempDir::new().unwrap();
    let path = write(&dir, "trace.jsonl", EXAMPLE_TRACE);
    bin()
        .args(["replay", "--max-draft-len", "3"])
        .arg(&path)
        .assert()
        .success()
        .stdout(EXAMPLE_REPORT);
    bin()
        .args(["replay", "--max-draft-len", "3", "-"])
        .write_stdin(EXAMPLE_TRACE)
        .assert()
        .success()
        .stdout(EXAMPLE_REPORT);
}

#[test]
fn replay_undrafted_k0_and_detailed_reports() {
    let input = r#"{"undrafted":true}
{"drafted":0,"accepted":0}
{"accepted": 1, "drafted": 2}
{"mean_acceptance_length":1.5,"draft_acceptance_rate":0.25,"acceptance_histogram":[1,1,0],"num_spec_steps":2,"num_accepted_draft_tokens":1,"num_draft_tokens":4,"num_spec_tokens":2,"per_step_drafted":[2,0,1],"per_step_accepted":[1,0,1],"extra":{"nested":[1,"x",null]}}
{"undrafted": true}
"#;
    let mut h = AcceptanceHistogram::new(2).unwrap();
    h.observe_undrafted();
    h.observe(0, 0).unwrap();
    h.observe(2, 1).unwrap();
    for (k, a) in [(2, 1), (0, 0), (1, 1)] {
        h.observe(k, a).unwrap();
    }
    h.observe_undrafted();
    let out = stdout_of(&mut replay_stdin(2, input));
    assert_eq!(out, report(&h));
    assert!(
        out.contains(r#""acceptance_histogram_by_draft_length":{"0":[2],"1":[0,1],"2":[0,2,0]}"#),
        "{out}"
    );
    assert!(out.contains(r#""num_undrafted_steps":2"#), "{out}");
}

#[test]
fn replay_empty_input_gives_the_empty_report() {
    let empty = report(&AcceptanceHistogram::new(4).unwrap());
    assert!(empty.contains(r#""acceptance_histogram_by_draft_length":{}"#));
    replay_stdin(4, "")
        .assert()
        .success()
        .stdout(empty.clone())
        .stderr("");
    // Blank and whitespace-only lines are skipped.
    replay_stdin(4, "\n  \n\t\r\n\n")
        .assert()
        .success()
        .stdout(empty);
}

#[test]
fn replay_skips_blank_lines_but_counts_them_in_line_numbers() {
    let input =
        "\n{\"drafted\":1,\"accepted\":1}\n   \n\r\n{\"drafted\":1,\"accepted\":1}\n\nnot json\n";
    replay_stdin(1, input)
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains("<stdin>: line 7: not valid JSON"));
}

#[test]
fn replay_accepts_crlf_and_a_last_line_without_newline() {
    let input = "{\"drafted\":3,\"accepted\":0}\r\n{\"drafted\":3,\"accepted\":3}\r\n{\"drafted\":3,\"accepted\":2}\r\n{\"drafted\":3,\"accepted\":3}\r\n{\"drafted\":3,\"accepted\":1}";
    replay_stdin(3, input)
        .assert()
        .success()
        .stdout(EXAMPLE_REPORT);
}

// ---------------------------------------------------------------------------
// --workers: byte-for-byte the one-thread output

/// A deterministic mix of every kind of line: valid steps (k = 0 included),
/// invalid steps (a > k, k > K), undrafted steps, detailed reports (some
/// with invalid steps), scheduler steps (some with a budget above K), blank
/// lines. Returns the input and the expected
/// histogram.
fn random_trace(lines: usize, max: usize, seed: u64) -> (String, AcceptanceHistogram) {
    let mut rng = SplitMix64::seed_from_u64(seed);
    let mut next = move |n: u64| rng.next_u64() % n;
    let mut h = AcceptanceHistogram::new(max).unwrap();
    let mut s = String::new();
    let k_max = max as u64;
    for _ in 0..lines {
        match next(100) {
            0..=59 => {
                let k = next(k_max + 1);
                let a = next(k + 1);
                let _ = h.observe(k as usize, a as usize);
                let _ = writeln!(s, r#"{{"drafted":{k},"accepted":{a}}}"#);
            }
            60..=64 => {
                let k = next(3);
                let a = next(3);
                let _ = h.observe(k as usize, a as usize);
                let _ = writeln!(s, r#"{{ "accepted": {a}, "drafted": {k} }}"#);
            }
            65..=66 => {
                // Invalid: a > k, or k > K.
                let (k, a) = if next(2) == 0 {
                    let k = next(k_max);
                    (k, k + 1 + next(3))
                } else {
                    (k_max + 1 + next(100), 0)
                };
                let _ = h.observe(k as usize, a as usize);
                let _ = writeln!(s, r#"{{"drafted":{k},"accepted":{a}}}"#);
            }
            67..=79 => {
                h.observe_undrafted();
                s.push_str("{\"undrafted\":true}\n");
            }
            80..=94 => {
                let n = next(40);
                let (mut ks, mut acc) = (Vec::new(), Vec::new());
                for _ in 0..n {
                    let k = next(k_max + 1);
                    let a = if next(50) == 0 { k + 1 } else { next(k + 1) };
                    let _ = h.observe(k as usize, a as usize);
                    ks.push(k);
                    acc.push(a);
                }
                let _ = writeln!(
                    s,
                    r#"{{"num_spec_tokens":{max},"per_step_drafted":{ks:?},"per_step_accepted":{acc:?},"mean_acceptance_length":1.0}}"#
                );
            }
            95..=96 => {
                let b = next(k_max + 1);
                h.observe_scheduled(b as usize).unwrap();
                let _ = if next(2) == 0 {
                    writeln!(s, r#"{{"scheduled":{b}}}"#)
                } else {
                    writeln!(s, r#" {{ "scheduled" : {b} }}"#)
                };
            }
            97 => {
                // Invalid: above K (some far above, where packing saturates).
                let b = if next(2) == 0 {
                    k_max + 1 + next(3)
                } else {
                    u64::MAX - next(3)
                };
                assert!(
                    h.observe_scheduled(usize::try_from(b).unwrap_or(usize::MAX))
                        .is_err()
                );
                let _ = writeln!(s, r#"{{"scheduled":{b}}}"#);
            }
            _ => s.push('\n'),
        }
    }
    (s, h)
}

#[test]
fn replay_workers_output_is_byte_for_byte_the_one_thread_output() {
    let dir = TempDir::new().unwrap();
    for (seed, max) in [(1u64, 5usize), (0x9e37_79b9_7f4a_7c15, 8), (42, 1)] {
        let (input, expected) = random_trace(4000, max, seed);
        assert!(expected.num_spec_steps() > 8192, "several batches per run");
        assert!(expected.num_rejected_observations() > 0);
        assert!(expected.num_scheduled_steps() > 0);
        let path = write(&dir, &format!("trace-{seed}.jsonl"), &input);
        let run = |workers: Option<&str>| {
            let mut cmd = bin();
            cmd.args(["replay", "--max-draft-len", &max.to_string()]);
            if let Some(n) = workers {
                cmd.args(["--workers", n]);
            }
            let out = cmd.arg(&path).assert().success().get_output().clone();
            (
                String::from_utf8(out.stdout).unwrap(),
                String::from_utf8(out.stderr).unwrap(),
            )
        };
        let (one, warnings) = run(None);
        assert_eq!(one, report(&expected));
        for n in ["1", "2", "3"] {
            let (out, err) = run(Some(n));
            assert_eq!(out, one, "--workers {n}, seed {seed}");
            assert_eq!(err, warnings, "same warnings, same line numbers");
        }
        // Standard input too.
        let out = stdout_of(
            bin()
                .args([
                    "replay",
                    "--max-draft-len",
                    &max.to_string(),
                    "--workers",
                    "2",
                ])
                .write_stdin(input),
        );
        assert_eq!(out, one);
    }
}

#[test]
fn replay_workers_stop_on_malformed_lines_too() {
    let mut input = EXAMPLE_TRACE.repeat(3000);
    input.push_str("{\"drafted\":3}\n");
    input.push_str(EXAMPLE_TRACE);
    for n in ["1", "2", "3"] {
        bin()
            .args(["replay", "--max-draft-len", "3", "--workers", n])
            .write_stdin(input.clone())
            .assert()
            .code(2)
            .stdout("")
            .stderr(predicate::str::contains(
                "line 15001: step without \"accepted\"",
            ));
    }
}

// ---------------------------------------------------------------------------
// Bad input: malformed lines stop the run with exit status 2 and the line

#[test]
fn replay_malformed_lines_name_the_line_and_what_was_expected() {
    let cases: &[(&str, &str)] = &[
        ("{\"drafted\":1,\"accepted\":1", "not valid JSON"),
        ("drafted=1 accepted=1", "not valid JSON"),
        ("[1, 1]", "found an array, not a JSON object"),
        ("42", "found a number, not a JSON object"),
        ("{}", "empty object"),
        (r#"{"drafted":2}"#, "step without \"accepted\""),
        (r#"{"accepted":2}"#, "step without \"drafted\""),
        (
            r#"{"drafted":-1,"accepted":0}"#,
            "\"drafted\" must be an integer >= 0, got the negative integer -1",
        ),
        (
            r#"{"drafted":2,"accepted":1.5}"#,
            "\"accepted\" must be an integer >= 0, got the fraction 1.5",
        ),
        (
            r#"{"drafted":"2","accepted":1}"#,
            "\"drafted\" must be an integer >= 0, got a string",
        ),
        (
            r#"{"drafted":18446744073709551616,"accepted":1}"#,
            "\"drafted\" is too large",
        ),
        (
            r#"{"scheduled":-2}"#,
            "\"scheduled\" must be an integer >= 0, got the negative integer -2",
        ),
        (
            r#"{"scheduled":0.5}"#,
            "\"scheduled\" must be an integer >= 0, got the fraction 0.5",
        ),
        (
            r#"{"scheduled":"3"}"#,
            "\"scheduled\" must be an integer >= 0, got a string",
        ),
        (
            r#"{"scheduled":18446744073709551616}"#,
            "\"scheduled\" is too large",
        ),
        (
            r#"{"scheduled":1,"drafted":1,"accepted":0}"#,
            "a line is one verify step, one undrafted step or one scheduler step",
        ),
        (
            r#"{"drafted":2,"accepted":1,"request":"r1"}"#,
            "unexpected key \"request\"",
        ),
        (r#"{"draftd":2,"accepted":1}"#, "unexpected key \"draftd\""),
        (r#"{"steps":2}"#, "unknown key \"steps\""),
        (r#"{"drafted":2,"drafted":1}"#, "duplicate key \"drafted\""),
        (r#"{"undrafted":false}"#, "\"undrafted\" must be true"),
        (
            r#"{"undrafted":true,"drafted":0,"accepted":0}"#,
            "\"undrafted\" together with \"drafted\"/\"accepted\"",
        ),
        (
            r#"{"per_step_drafted":[3,2],"per_step_accepted":[1]}"#,
            "2 entries in \"per_step_drafted\" but 1 in \"per_step_accepted\"",
        ),
        (
            r#"{"per_step_drafted":[3,2]}"#,
            "without \"per_step_accepted\"",
        ),
        (
            r#"{"per_step_drafted":[3,-2],"per_step_accepted":[1,1]}"#,
            "\"per_step_drafted\"[1] must be an integer >= 0",
        ),
        (
            r#"{"per_step_drafted":"3","per_step_accepted":[1]}"#,
            "array of integers",
        ),
        (
            r#"{"drafted":1,"accepted":1}{"drafted":1,"accepted":1}"#,
            "trailing characters",
        ),
    ];
    for (bad, message) in cases {
        let input = format!("{EXAMPLE_TRACE}\n{bad}\n{EXAMPLE_TRACE}");
        replay_stdin(3, &input)
            .assert()
            .code(2)
            .stdout("")
            .stderr(predicate::str::starts_with("error: <stdin>: line 7: "))
            .stderr(predicate::str::contains(*message))
            .stderr(predicate::str::contains("line 1 column").not());
    }
    // The generic messages say what every line may be.
    replay_stdin(3, "nope\n")
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            r#"expected {"drafted": k, "accepted": a}, {"undrafted": true}, {"scheduled": b}, or a vLLM detailed report"#,
        ));
}

#[test]
fn replay_malformed_line_in_a_file_names_the_file() {
    let dir = TempDir::new().unwrap();
    let path = write(
        &dir,
        "bad.jsonl",
        "{\"drafted\":1,\"accepted\":0}\n{oops}\n",
    );
    bin()
        .args(["replay", "--max-draft-len", "2"])
        .arg(&path)
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains(format!(
            "{}: line 2: not valid JSON",
            path.display()
        )));
}

#[test]
fn replay_invalid_utf8_is_malformed() {
    let mut input = b"{\"drafted\":1,\"accepted\":0}\n".to_vec();
    input.extend_from_slice(b"{\"drafted\":1,\"acc\xffepted\":0}\n");
    bin()
        .args(["replay", "--max-draft-len", "2"])
        .write_stdin(input)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "line 2: not valid UTF-8 (byte FF at column 18)",
        ));
}

/// One rule: a line is UTF-8 text throughout, and a lone surrogate escape
/// is malformed in a key and in an ignored value alike.
#[test]
fn replay_invalid_text_is_malformed_in_ignored_values_too() {
    let report = |extra: &[u8]| {
        let mut line = br#"{"per_step_drafted":[1],"per_step_accepted":[1],"#.to_vec();
        line.extend_from_slice(extra);
        line.extend_from_slice(b"}\n");
        line
    };
    for (extra, message) in [
        (
            &b"\"prompt\":\"caf\xe9\""[..],
            "line 1: not valid UTF-8 (byte E9 at column 62)",
        ),
        (
            b"\"caf\xe9\":0",
            "line 1: not valid UTF-8 (byte E9 at column 53)",
        ),
        (
            br#""prompt":"\ud800""#,
            "line 1: a \\u escape that is half a surrogate pair, alone",
        ),
        (
            br#""\ud800":0"#,
            "line 1: a \\u escape that is half a surrogate pair, alone",
        ),
    ] {
        bin()
            .args(["replay", "--max-draft-len", "2"])
            .write_stdin(report(extra))
            .assert()
            .code(2)
            .stdout("")
            .stderr(predicate::str::contains(message));
    }
    // Well-formed text anywhere is fine.
    bin()
        .args(["replay", "--max-draft-len", "2"])
        .write_stdin(report("\"prompt\":\"café ✓ \\ud83d\\ude00\"".as_bytes()))
        .assert()
        .success();
}

/// A count with a minus sign is a negative number, whatever its value:
/// `-0` (and `-0.0`, `-0e3`, which serde reads as the same -0.0) is told to
/// be written as 0, never called "a whole number written with a decimal
/// point or an exponent"; other negatives are named as negative, in every
/// place a count goes, on the fast path's shapes and the others alike.
#[test]
fn replay_names_negative_zero_and_negative_numbers_as_such() {
    let negative_zero = "must be an integer >= 0, got -0, a zero with a minus sign (write it as 0)";
    for (line, message) in [
        (r#"{"drafted":-0,"accepted":0}"#, format!("\"drafted\" {negative_zero}")),
        (r#"{"drafted":0,"accepted":-0}"#, format!("\"accepted\" {negative_zero}")),
        (r#"{"accepted":-0,"drafted":1}"#, format!("\"accepted\" {negative_zero}")),
        (r#"{"scheduled":-0}"#, format!("\"scheduled\" {negative_zero}")),
        (r#"{"scheduled":-0.0}"#, format!("\"scheduled\" {negative_zero}")),
        (r#"{"scheduled":-0e3}"#, format!("\"scheduled\" {negative_zero}")),
        (
            r#"{"per_step_drafted":[1,-0],"per_step_accepted":[0,0]}"#,
            format!("\"per_step_drafted\"[1] {negative_zero}"),
        ),
        (
            r#"{"drafted":-1.0,"accepted":0}"#,
            "\"drafted\" must be an integer >= 0, got the negative number -1".to_owned(),
        ),
        (
            r#"{"drafted":-18446744073709551616,"accepted":0}"#,
            "\"drafted\" must be an integer >= 0, got the negative number -18446744073709552000".to_owned(),
        ),
        (
            r#"{"per_step_drafted":-0,"per_step_accepted":[]}"#,
            "\"per_step_drafted\" must be an array of integers >= 0, got -0, a zero with a minus sign (write it as 0)".to_owned(),
        ),
    ] {
        replay_stdin(3, &format!("{line}\n"))
            .assert()
            .code(2)
            .stdout("")
            .stderr(format!("error: <stdin>: line 1: {message}\n"));
    }
}

#[test]
fn replay_messages_say_what_is_wrong_with_a_number() {
    for (line, message) in [
        (
            r#"{"drafted": 1.0, "accepted": 0}"#,
            "error: <stdin>: line 1: \"drafted\" must be an integer >= 0, got 1.0, a whole number written with a decimal point or an exponent (write it as 1)\n",
        ),
        (
            r#"{"drafted": 18446744073709551616, "accepted": 0}"#,
            "error: <stdin>: line 1: \"drafted\" is too large: a count is at most 18446744073709551615\n",
        ),
        (
            r#"{"per_step_drafted": [2, 0.5], "per_step_accepted": [0, 0]}"#,
            "error: <stdin>: line 1: \"per_step_drafted\"[1] must be an integer >= 0, got the fraction 0.5\n",
        ),
    ] {
        replay_stdin(3, &format!("{line}\n"))
            .assert()
            .code(2)
            .stdout("")
            .stderr(message);
    }
}

#[test]
fn replay_names_a_byte_order_mark() {
    let dir = TempDir::new().unwrap();
    let path = write(&dir, "bom.jsonl", &format!("\u{feff}{EXAMPLE_TRACE}"));
    bin()
        .args(["replay", "--max-draft-len", "3"])
        .arg(&path)
        .assert()
        .code(2)
        .stdout("")
        .stderr(format!(
            "error: {}: line 1: the line starts with a byte-order mark (bytes EF BB BF), which JSON does not allow; remove it (an editor's \"UTF-8 without BOM\")\n",
            path.display()
        ));
}

#[test]
fn replay_messages_escape_and_cut_the_input_they_quote() {
    let out = replay_stdin(3, "{\"\\u001b]0;pwned\\u0007\": 1}\n")
        .assert()
        .code(2)
        .get_output()
        .clone();
    let stderr = out.stderr;
    assert!(
        !stderr.iter().any(|&b| b < 0x20 && b != b'\n'),
        "control bytes reach the terminal: {:?}",
        String::from_utf8_lossy(&stderr)
    );
    assert!(
        String::from_utf8_lossy(&stderr)
            .starts_with(r#"error: <stdin>: line 1: unknown key "\u001b]0;pwned\u0007" and none"#),
        "{}",
        String::from_utf8_lossy(&stderr)
    );
    // A 4 MB key: a short excerpt, not the key.
    let key = "k".repeat(4 << 20);
    let out = replay_stdin(
        3,
        &format!("{{\"drafted\":1,\"accepted\":1,\"{key}\":0}}\n"),
    )
    .assert()
    .code(2)
    .get_output()
    .clone();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.len() < 300, "{} bytes of message", stderr.len());
    assert!(
        stderr.contains(&format!(
            "unexpected key \"{}…\" (4,194,304 bytes)",
            "k".repeat(40)
        )),
        "{stderr}"
    );
}

// ---------------------------------------------------------------------------
// Line length limit

/// A step line padded with spaces to exactly `len` bytes (newline excluded).
fn padded_step(len: usize) -> String {
    let step = r#"{"drafted":1,"accepted":1}"#;
    format!("{step}{}", " ".repeat(len - step.len()))
}

#[test]
fn replay_line_longer_than_the_limit_stops_the_run_and_names_the_line() {
    let ok = EXAMPLE_TRACE.lines().next().unwrap();
    for workers in [None, Some("2")] {
        let run = |input: String| {
            let mut cmd = replay_stdin(3, &input);
            cmd.args(["--max-line-bytes", "1K"]);
            if let Some(n) = workers {
                cmd.args(["--workers", n]);
            }
            cmd.assert()
        };
        // At the limit: accepted, with or without a newline after it.
        run(format!("{ok}\n{}\n{ok}\n", padded_step(1024))).success();
        run(format!("{ok}\n{}", padded_step(1024))).success();
        // One byte over: exit 2, no report, the line named.
        for input in [
            format!("{ok}\n{ok}\n{}\n{ok}\n", padded_step(1025)),
            format!("{ok}\n{ok}\n{}", padded_step(1025)),
            format!("{ok}\n{ok}\n{}\n", "x".repeat(100_000)),
        ] {
            run(input).code(2).stdout("").stderr(
                "error: <stdin>: line 3 is longer than 1 KiB (--max-line-bytes); the rest of the input was not read\n",
            );
        }
    }
}

/// `replay < /dev/zero` under a 1 GiB address-space limit: one endless
/// line, which must be cut at the default limit (64 MiB) with exit status 2
/// instead of growing until an allocation fails.
#[test]
fn replay_endless_line_stops_at_the_default_limit_in_bounded_memory() {
    let bin = assert_cmd::cargo::cargo_bin!("specdec-metrics");
    for workers in ["", "--workers 2"] {
        let sh = format!(
            "ulimit -v 1048576 && exec {} replay --max-draft-len 5 {workers} < /dev/zero",
            bin.display()
        );
        let out = std::process::Command::new("sh")
            .args(["-c", &sh])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "error: <stdin>: line 1 is longer than 64 MiB (--max-line-bytes); the rest of the input was not read\n",
            "{out:?}"
        );
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn max_line_bytes_takes_sizes_with_units() {
    let long_line = format!("{}\n", padded_step(3000));
    for (size, ok) in [
        ("2999", false),
        ("3000", true),
        ("2K", false),
        ("3KiB", true),
        ("1M", true),
        ("1MiB", true),
        ("1G", true),
    ] {
        let assert = replay_stdin(3, &long_line)
            .args(["--max-line-bytes", size])
            .assert();
        if ok {
            assert.success();
        } else {
            assert
                .code(2)
                .stderr(predicate::str::contains("line 1 is longer than"));
        }
    }
}

// ---------------------------------------------------------------------------
// Invalid steps: counted and warned, or --strict

#[test]
fn replay_invalid_steps_are_counted_and_warned_with_their_line() {
    let input = r#"{"drafted":3,"accepted":3}
{"drafted":2,"accepted":3}
{"drafted":5,"accepted":1}
{"per_step_drafted":[1,1,4],"per_step_accepted":[1,2,0]}
"#;
    let out = replay_stdin(3, input)
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "warning: <stdin>: line 2: rejected observation (drafted=2, accepted=3): accepted exceeds drafted",
        ))
        .stderr(predicate::str::contains(
            "warning: <stdin>: line 3: rejected observation (drafted=5, accepted=1): drafted exceeds max_draft_len=3",
        ))
        .stderr(predicate::str::contains(
            "warning: <stdin>: line 4 (detailed report, step index 1): rejected observation (drafted=1, accepted=2)",
        ))
        .stderr(predicate::str::contains("line 4 (detailed report, step index 2): rejected observation (drafted=4, accepted=0)"))
        .get_output()
        .stdout
        .clone();
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains(r#""num_rejected_observations":4"#), "{out}");
    assert!(out.contains(r#""num_spec_steps":2"#), "{out}");
    assert!(
        out.contains(r#""acceptance_histogram_by_draft_length":{"1":[0,1],"3":[0,0,0,1]}"#),
        "{out}"
    );
}

#[test]
fn replay_strict_stops_at_the_first_invalid_step() {
    let input = "{\"drafted\":3,\"accepted\":3}\n{\"drafted\":2,\"accepted\":3}\n{\"drafted\":5,\"accepted\":1}\n";
    for workers in [None, Some("2")] {
        let mut cmd = replay_stdin(3, input);
        cmd.arg("--strict");
        if let Some(n) = workers {
            cmd.args(["--workers", n]);
        }
        cmd.assert()
            .code(2)
            .stdout("")
            .stderr(predicate::str::contains(
                "error: <stdin>: line 2: rejected observation (drafted=2, accepted=3): accepted exceeds drafted (--strict)",
            ))
            .stderr(predicate::str::contains("line 3").not());
    }
    for workers in [None, Some("2")] {
        let mut cmd = replay_stdin(
            3,
            "{\"scheduled\":3}\n{\"scheduled\":4}\n{\"scheduled\":0}\n",
        );
        cmd.arg("--strict");
        if let Some(n) = workers {
            cmd.args(["--workers", n]);
        }
        cmd.assert()
            .code(2)
            .stdout("")
            .stderr(predicate::str::contains(
                "error: <stdin>: line 2: rejected observation (scheduled budget=4): budget exceeds max_draft_len=3 (--strict)",
            ));
    }
    replay_stdin(3, r#"{"per_step_drafted":[1,9],"per_step_accepted":[0,0]}"#)
        .arg("--strict")
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "line 1 (detailed report, step index 1): rejected observation (drafted=9, accepted=0): drafted exceeds max_draft_len=3 (--strict)",
        ));
    // Valid input passes --strict.
    replay_stdin(3, EXAMPLE_TRACE)
        .arg("--strict")
        .assert()
        .success()
        .stdout(EXAMPLE_REPORT);
}

#[test]
fn replay_warns_about_a_detailed_report_with_another_k() {
    let input = r#"{"num_spec_tokens":3,"per_step_drafted":[3],"per_step_accepted":[1]}
{"num_spec_tokens":5,"per_step_drafted":[3,2],"per_step_accepted":[3,0]}
{"num_spec_tokens":2,"per_step_drafted":[2],"per_step_accepted":[2]}
{"per_step_drafted":[1],"per_step_accepted":[1]}
"#;
    let mut expected = AcceptanceHistogram::new(3).unwrap();
    for (k, a) in [(3, 1), (3, 3), (2, 0), (2, 2), (1, 1)] {
        expected.observe(k, a).unwrap();
    }
    for workers in [None, Some("2")] {
        let mut cmd = replay_stdin(3, input);
        if let Some(n) = workers {
            cmd.args(["--workers", n]);
        }
        // Warned, line by line; the steps are replayed against K = 3.
        cmd.assert().success().stdout(report(&expected)).stderr(
            "warning: <stdin>: line 2: the detailed report's num_spec_tokens is 5, not --max-draft-len 3; its steps are replayed with K = 3
warning: <stdin>: line 3: the detailed report's num_spec_tokens is 2, not --max-draft-len 3; its steps are replayed with K = 3
",
        );
        let mut cmd = replay_stdin(3, input);
        cmd.arg("--strict");
        if let Some(n) = workers {
            cmd.args(["--workers", n]);
        }
        cmd.assert().code(2).stdout("").stderr(
            "error: <stdin>: line 2: the detailed report's num_spec_tokens is 5, not --max-draft-len 3 (--strict)\n",
        );
    }
    // At most --max-warnings of them, then their count.
    let many = r#"{"num_spec_tokens":4,"per_step_drafted":[1],"per_step_accepted":[0]}
"#
    .repeat(5);
    replay_stdin(3, &many)
        .args(["--max-warnings", "2"])
        .assert()
        .success()
        .stderr(
            "warning: <stdin>: line 1: the detailed report's num_spec_tokens is 4, not --max-draft-len 3; its steps are replayed with K = 3
warning: <stdin>: line 2: the detailed report's num_spec_tokens is 4, not --max-draft-len 3; its steps are replayed with K = 3
warning: 3 more detailed reports whose num_spec_tokens is not --max-draft-len not shown (5 in all)
",
        );
}

#[test]
fn replay_many_warnings_do_not_flood_stderr() {
    let input = "{\"drafted\":1,\"accepted\":2}\n".repeat(500);
    let out = replay_stdin(3, &input)
        .assert()
        .success()
        .get_output()
        .clone();
    let stderr = String::from_utf8(out.stderr).unwrap();
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 11, "{stderr}");
    assert!(lines[9].contains("line 10:"));
    assert_eq!(
        lines[10],
        "warning: 490 more rejected observations not shown (500 in all, all counted in num_rejected_observations)"
    );
    assert!(
        String::from_utf8(out.stdout)
            .unwrap()
            .contains(r#""num_rejected_observations":500"#)
    );

    let out = replay_stdin(3, &input)
        .args(["--max-warnings", "0"])
        .assert()
        .success()
        .get_output()
        .clone();
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        "warning: 500 more rejected observations not shown (500 in all, all counted in num_rejected_observations)\n"
    );
}

// ---------------------------------------------------------------------------
// Files and flags

#[test]
fn replay_missing_file_is_an_error() {
    let dir = TempDir::new().unwrap();
    let missing = dir.path().join("nope.jsonl");
    bin()
        .args(["replay", "--max-draft-len", "3"])
        .arg(&missing)
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains(format!(
            "error: cannot open {}",
            missing.display()
        )));
}

#[test]
fn bad_flag_values_are_errors_with_status_2() {
    let cases: &[(&[&str], &str)] = &[
        (&["replay"], "--max-draft-len"),
        (&["replay", "--max-draft-len", "0"], "1..=64"),
        (&["replay", "--max-draft-len", "65"], "1..=64"),
        (
            &["replay", "--max-draft-len", "three"],
            "\"three\" is not a whole number: K must be a whole number in 1..=64",
        ),
        (
            &["replay", "--max-draft-len", "18446744073709551616"],
            "\"18446744073709551616\" is too large: K must be in 1..=64",
        ),
        (
            &["replay", "--max-draft-len", "1.0"],
            "\"1.0\" is not a whole number",
        ),
        (
            &["replay", "--max-draft-len", "3", "--workers", "0"],
            "--workers",
        ),
        (
            &["replay", "--max-draft-len", "3", "--workers", "x"],
            "--workers",
        ),
        (
            &["replay", "--max-draft-len", "3", "--format", "xml"],
            "--format",
        ),
        (
            &["replay", "--max-draft-len", "3", "--max-warnings=-1"],
            "--max-warnings",
        ),
        (&["replay", "--max-draft-len", "3", "--bogus"], "--bogus"),
        (
            &["replay", "--max-draft-len", "3", "--max-line-bytes", "0"],
            "at least 1 byte",
        ),
        (
            &["replay", "--max-draft-len", "3", "--max-line-bytes", "12X"],
            "\"12X\" is not a size",
        ),
        (
            &["replay", "--max-draft-len", "3", "--max-line-bytes", "M"],
            "it needs a number",
        ),
        (
            &[
                "replay",
                "--max-draft-len",
                "3",
                "--max-line-bytes",
                "99999999999G",
            ],
            "\"99999999999G\" is too large",
        ),
        (&["merge"], "REPORT"),
        (&["frobnicate"], "frobnicate"),
    ];
    for (args, message) in cases {
        bin()
            .args(*args)
            .write_stdin(EXAMPLE_TRACE)
            .assert()
            .code(2)
            .stdout("")
            .stderr(predicate::str::contains(*message));
    }
}

#[test]
fn help_lists_the_commands() {
    bin()
        .arg("--help")
        .assert()
        .success()
        .stdout(predicate::str::contains("replay").and(predicate::str::contains("merge")));
    bin().args(["replay", "--help"]).assert().success().stdout(
        predicate::str::contains("--max-draft-len")
            .and(predicate::str::contains("--workers"))
            .and(predicate::str::contains("--strict"))
            .and(predicate::str::contains("--format"))
            .and(predicate::str::contains("--plot")),
    );
}

// ---------------------------------------------------------------------------
// Large input, progress

#[test]
fn replay_large_input_prints_no_progress_when_stderr_is_not_a_terminal() {
    let input = "{\"drafted\":2,\"accepted\":1}\n{\"undrafted\":true}\n".repeat(100_000);
    for workers in [None, Some("2")] {
        let mut cmd = replay_stdin(2, &input);
        if let Some(n) = workers {
            cmd.args(["--workers", n]);
        }
        let out = cmd
            .assert()
            .success()
            .stderr("")
            .get_output()
            .stdout
            .clone();
        let out = String::from_utf8(out).unwrap();
        assert!(out.contains(r#""num_spec_steps":100000"#), "{out}");
        assert!(out.contains(r#""num_undrafted_steps":100000"#), "{out}");
    }
}

/// Runs `sh_command` under `script`, which gives it a terminal, and returns
/// what the terminal showed. `script` comes with util-linux (Debian's
/// `bsdutils`, part of every base image); without it the test fails rather
/// than pass unchecked.
fn on_a_terminal(sh_command: &str) -> String {
    let out = std::process::Command::new("script")
        .args(["-qec", sh_command, "/dev/null"])
        .output()
        .expect("`script` (util-linux) is needed to give the run a terminal");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A flag value with control characters (a terminal title sequence, ESC
/// ... BEL) is escaped in the argument parser's errors too: on a terminal,
/// where clap would write it raw among its colours, as in a pipe, where it
/// would strip it.
#[test]
fn flag_errors_escape_the_value_they_quote() {
    let bin = assert_cmd::cargo::cargo_bin!("specdec-metrics");
    for args in [
        "replay --max-draft-len \"$v\"",
        "advise batch --bucket \"1-4:x$v:1:r.json\"",
        "merge --format \"$v\" r.json",
        "\"$v\"",
    ] {
        let sh = format!(
            "v=$(printf 'x\\033]0;pwned\\007'); {} {args}; echo \"exit $?\"",
            bin.display()
        );
        let screen = on_a_terminal(&sh);
        assert!(!screen.contains('\x1b'), "{args}: {screen:?}");
        assert!(!screen.contains("\\u001b["), "{args}: {screen:?}");
        assert!(
            screen.contains("x\\u001b]0;pwned\\u0007"),
            "{args}: {screen:?}"
        );
        assert!(screen.contains("exit 2"), "{args}: {screen:?}");
        let piped = std::process::Command::new("sh")
            .args(["-c", &sh])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&piped.stderr);
        assert!(
            stderr.contains("x\\u001b]0;pwned\\u0007"),
            "{args}: {stderr}"
        );
    }
    // Version and help are not errors: standard output, status 0.
    for flag in ["--version", "--help"] {
        let out = std::process::Command::new(bin).arg(flag).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{flag}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("specdec-metrics"),
            "{flag}"
        );
        assert!(out.stderr.is_empty(), "{flag}");
    }
}

#[test]
fn replay_shows_progress_when_stderr_is_a_terminal() {
    let dir = TempDir::new().unwrap();
    let part = write(
        &dir,
        "part.jsonl",
        &"{\"drafted\":2,\"accepted\":1}\n".repeat(3000),
    );
    let bin = assert_cmd::cargo::cargo_bin!("specdec-metrics");
    let out_file = dir.path().join("report.json");
    // The input pauses after 3000 lines, so the run lasts long enough for
    // the progress line (redrawn at most every 250 ms) to appear.
    let sh = format!(
        "(cat {p}; sleep 0.6; cat {p}) | {b} replay --max-draft-len 2 > {o}",
        p = part.display(),
        b = bin.display(),
        o = out_file.display()
    );
    let screen = on_a_terminal(&sh);
    assert!(screen.contains("replay: "), "{screen:?}");
    assert!(screen.contains("steps/s"), "{screen:?}");
    assert!(
        screen.contains("\r\x1b[2K"),
        "the line is cleared: {screen:?}"
    );
    let report = fs::read_to_string(&out_file).unwrap();
    assert!(report.contains(r#""num_spec_steps":6000"#), "{report}");
}

// ---------------------------------------------------------------------------
// --format table, --plot

#[test]
fn replay_table_format() {
    let input =
        format!("{EXAMPLE_TRACE}{{\"drafted\":1,\"accepted\":1}}\n{{\"undrafted\":true}}\n");
    let out = stdout_of(replay_stdin(3, &input).args(["--format", "table"]));
    let expected_rows = "\
Acceptance histogram by draft length (K = num_spec_tokens = 3)
    k  steps  a=0 a=1 a=2 a=3  full-accept  mean-accepted
    1      1    0   1              100.00%          1.000
    3      5    1   1   1   2       40.00%          1.800
  all      6    1   2   1   2
";
    assert!(out.starts_with(expected_rows), "{out}");
    for line in [
        "verify steps (num_spec_steps)      6",
        "undrafted steps                    1",
        "rejected observations              0",
        "mean acceptance length        2.6667",
        "draft acceptance rate         62.50%",
        "    0         6         5      83.33%        83.33%",
        "    1         5         3      50.00%        60.00%",
    ] {
        assert!(out.contains(line), "missing {line:?} in\n{out}");
    }
}

#[test]
fn replay_plot_writes_an_svg_heatmap() {
    let dir = TempDir::new().unwrap();
    let svg = dir.path().join("hist.svg");
    let input = format!("{EXAMPLE_TRACE}{{\"drafted\":0,\"accepted\":0}}\n");
    replay_stdin(3, &input)
        .arg("--plot")
        .arg(&svg)
        .assert()
        .success();
    let text = fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg"), "{}", &text[..80]);
    assert!(text.trim_end().ends_with("</svg>"));
    for label in [">40%</text>", ">20%</text>", ">n/a</text>", "3 (n=5)"] {
        assert!(text.contains(label), "missing text {label:?}");
    }
    assert!(text.contains("row-normalised (K = 3, 6 steps)"));
    assert!(
        text.contains("share of the steps of row k"),
        "a titled colour bar"
    );
    assert_eq!(text.matches("<title>").count(), 10, "a tooltip per cell");
    assert!(text.contains("<title>k = 3, a = 3: 2 of 5 steps (40.0%)</title>"));
}

#[test]
fn replay_plot_to_an_unwritable_path_is_an_error_after_the_report() {
    let dir = TempDir::new().unwrap();
    let svg = dir.path().join("no-such-dir").join("hist.svg");
    replay_stdin(3, EXAMPLE_TRACE)
        .arg("--plot")
        .arg(&svg)
        .assert()
        .code(2)
        .stdout(EXAMPLE_REPORT)
        .stderr(predicate::str::contains("cannot write the plot to"));
}

// ---------------------------------------------------------------------------
// Standard output that cannot take the report

/// Runs `replay --max-draft-len 3 ARGS` on EXAMPLE_TRACE through `sh`, with
/// `redirect` applied to its standard output.
fn replay_redirected(args: &str, redirect: &str) -> std::process::Output {
    let dir = TempDir::new().unwrap();
    let input = write(&dir, "in.jsonl", EXAMPLE_TRACE);
    let bin = assert_cmd::cargo::cargo_bin!("specdec-metrics");
    let sh = format!(
        "exec {} replay --max-draft-len 3 {args} {} {redirect}",
        bin.display(),
        input.display()
    );
    std::process::Command::new("sh")
        .args(["-c", &sh])
        .output()
        .unwrap()
}

#[test]
fn replay_with_standard_output_closed_is_an_error_and_still_plots() {
    let out = replay_redirected("", ">&-");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: standard output is closed; the report was not written\n"
    );
    let dir = TempDir::new().unwrap();
    let svg = dir.path().join("hist.svg");
    let out = replay_redirected(&format!("--plot {}", svg.display()), ">&-");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(fs::read_to_string(&svg).unwrap().starts_with("<svg"));
    // Standard output on /dev/null, deliberately: not an error.
    let out = replay_redirected("", ">/dev/null");
    assert!(out.status.success(), "{out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");
    // Neither is the same through Command (write-only /dev/null).
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin!("specdec-metrics"))
        .args(["replay", "--max-draft-len", "3"])
        .stdin(fs::File::open(write(&dir, "in.jsonl", EXAMPLE_TRACE)).unwrap())
        .stdout(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");
}

#[test]
fn merge_with_standard_output_closed_is_an_error() {
    let dir = TempDir::new().unwrap();
    let r = write(&dir, "r.json", EXAMPLE_REPORT);
    let bin = assert_cmd::cargo::cargo_bin!("specdec-metrics");
    let out = std::process::Command::new("sh")
        .args([
            "-c",
            &format!("exec {} merge {} >&-", bin.display(), r.display()),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: standard output is closed; the report was not written\n"
    );
}

#[test]
fn replay_to_a_full_disk_is_an_error_and_still_plots() {
    let dir = TempDir::new().unwrap();
    let svg = dir.path().join("hist.svg");
    let out = replay_redirected(&format!("--plot {}", svg.display()), ">/dev/full");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: cannot write to standard output: No space left on device (os error 28); the report was not written\n"
    );
    assert!(fs::read_to_string(&svg).unwrap().starts_with("<svg"));
    // Both lost: both said.
    let out = replay_redirected(
        &format!("--plot {}", dir.path().join("no-dir/h.svg").display()),
        ">/dev/full",
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert!(lines[0].starts_with("error: cannot write to standard output"));
    assert!(lines[1].starts_with("error: cannot write the plot to"));
}

/// `| true`: the reader is gone before the report is written. Nothing to
/// say about that, but the plot is written all the same.
#[test]
fn replay_to_a_reader_that_left_still_plots_and_stays_quiet() {
    use std::io::Write as _;
    use std::process::Stdio;
    let dir = TempDir::new().unwrap();
    let svg = dir.path().join("hist.svg");
    for format in ["json", "table"] {
        let mut child =
            std::process::Command::new(assert_cmd::cargo::cargo_bin!("specdec-metrics"))
                .args([
                    "replay",
                    "--max-draft-len",
                    "3",
                    "--format",
                    format,
                    "--plot",
                ])
                .arg(&svg)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
        // Close the read end first: the report is written only after the
        // whole input is read, so it meets a pipe without a reader (EPIPE).
        drop(child.stdout.take());
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(EXAMPLE_TRACE.as_bytes()).unwrap();
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
        assert!(out.stderr.is_empty(), "{out:?}");
        let text = fs::read_to_string(&svg).unwrap();
        assert!(text.starts_with("<svg"));
        fs::remove_file(&svg).unwrap();
    }
}

// ---------------------------------------------------------------------------
// merge

#[test]
fn merge_equals_replay_of_all_the_input() {
    let dir = TempDir::new().unwrap();
    let (a, ha) = random_trace(500, 4, 7);
    let (b, hb) = random_trace(700, 4, 8);
    let ra = write(
        &dir,
        "a.json",
        &stdout_of(replay_stdin(4, &a).args(["--max-warnings", "0"])),
    );
    let rb = write(
        &dir,
        "b.json",
        &stdout_of(replay_stdin(4, &b).args(["--max-warnings", "0"])),
    );
    let mut all = ha.clone();
    all.merge(&hb).unwrap();
    let merged = stdout_of(bin().arg("merge").arg(&ra).arg(&rb));
    assert_eq!(merged, report(&all));
    let together = stdout_of(replay_stdin(4, &(a + &b)).args(["--max-warnings", "0"]));
    assert_eq!(merged, together);
    // One file: the report itself; standard input with "-".
    assert_eq!(stdout_of(bin().arg("merge").arg(&ra)), report(&ha));
    let from_stdin = stdout_of(
        bin()
            .args(["merge", "-"])
            .arg(&rb)
            .write_stdin(fs::read_to_string(&ra).unwrap()),
    );
    assert_eq!(from_stdin, merged);
    // Table output works on merged reports too.
    let table = stdout_of(bin().args(["merge", "--format", "table"]).arg(&ra).arg(&rb));
    assert!(table.starts_with("Acceptance histogram by draft length (K = num_spec_tokens = 4)"));
}

/// Standard input can be read once: `merge - -` is refused before any
/// report is read, instead of failing on an empty second "-".
#[test]
fn merge_reads_standard_input_once() {
    let dir = TempDir::new().unwrap();
    let report = write(&dir, "r.json", EXAMPLE_REPORT);
    bin()
        .args(["merge", "missing.json", "-"])
        .arg(&report)
        .arg("-")
        .write_stdin(EXAMPLE_REPORT)
        .assert()
        .code(2)
        .stdout("")
        .stderr("error: report 4 reads standard input (-), which report 2 already reads; only one report can read standard input\n");
}

#[test]
fn merge_spec_report_with_itself_doubles_the_counts() {
    let dir = TempDir::new().unwrap();
    let r = write(&dir, "r.json", EXAMPLE_REPORT);
    let out = stdout_of(bin().arg("merge").arg(&r).arg(&r));
    assert!(
        out.contains(r#""acceptance_histogram_by_draft_length":{"3":[2,2,2,4]}"#),
        "{out}"
    );
    assert!(out.contains(r#""mean_acceptance_length":2.8,"#), "{out}");
}

fn assert_merge_error(files: &[&Path], message: &str) {
    bin()
        .arg("merge")
        .args(files)
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains(message));
}

#[test]
fn merge_errors_name_the_file() {
    let dir = TempDir::new().unwrap();
    let k3 = write(&dir, "k3.json", EXAMPLE_REPORT);
    let k4 = write(
        &dir,
        "k4.json",
        &report(&AcceptanceHistogram::new(4).unwrap()),
    );
    assert_merge_error(
        &[&k3, &k4],
        &format!(
            "error: {}: num_spec_tokens (K) is 4 but {} has 3",
            k4.display(),
            k3.display()
        ),
    );
    let inconsistent = write(
        &dir,
        "inconsistent.json",
        &EXAMPLE_REPORT.replace(r#""num_spec_steps":5"#, r#""num_spec_steps":6"#),
    );
    assert_merge_error(
        &[&k3, &inconsistent],
        &format!(
            "error: {}: not a valid report: num_spec_steps is 6 but the histogram rows give 5",
            inconsistent.display()
        ),
    );
    let bad_row = write(
        &dir,
        "bad-row.json",
        &EXAMPLE_REPORT.replace(r#"{"3":[1,1,1,2]}"#, r#"{"3":[1,1,1,2,0]}"#),
    );
    assert_merge_error(
        &[&bad_row],
        &format!("{}: not a valid report", bad_row.display()),
    );
    let not_json = write(&dir, "not.json", "{\"drafted\":1,\"accepted\":1}\n");
    assert_merge_error(
        &[&k3, &not_json],
        &format!("{}: not a valid report", not_json.display()),
    );
    let missing = dir.path().join("missing.json");
    assert_merge_error(
        &[&k3, &missing],
        &format!("cannot open {}", missing.display()),
    );
}

#[test]
fn merge_messages_escape_and_cut_what_the_report_holds() {
    let dir = TempDir::new().unwrap();
    let key = format!("\\u001b]0;pwned\\u0007{}", "k".repeat(1 << 20));
    let bad = write(
        &dir,
        "bad.json",
        &EXAMPLE_REPORT.replace(
            "\"num_spec_steps\"",
            &format!("\"{key}\":1,\"num_spec_steps\""),
        ),
    );
    let out = bin()
        .arg("merge")
        .arg(&bad)
        .assert()
        .code(2)
        .get_output()
        .clone();
    let stderr = out.stderr;
    assert!(
        !stderr.iter().any(|&b| b < 0x20 && b != b'\n'),
        "control bytes reach the terminal"
    );
    assert!(stderr.len() < 1200, "{} bytes of message", stderr.len());
    let stderr = String::from_utf8(stderr).unwrap();
    assert!(
        stderr.starts_with(&format!(
            "error: {}: not a valid report: unknown field `\\u001b]0;pwned\\u0007kkk",
            bad.display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("characters cut]"), "{stderr}");
}

#[test]
fn merge_plot() {
    let dir = TempDir::new().unwrap();
    let r = write(&dir, "r.json", EXAMPLE_REPORT);
    let svg = dir.path().join("merged.svg");
    bin()
        .arg("merge")
        .arg(&r)
        .arg("--plot")
        .arg(&svg)
        .assert()
        .success()
        .stdout(EXAMPLE_REPORT);
    assert!(fs::read_to_string(&svg).unwrap().starts_with("<svg"));
}

// ---------------------------------------------------------------------------
// scheduler steps

#[test]
fn replay_scheduled_lines_count_budgets_and_warn_above_k() {
    let input = "{\"scheduled\":0}\n{\"scheduled\":3}\n{\"drafted\":3,\"accepted\":2}\n\
                 {\"scheduled\":4}\n{ \"scheduled\" : 3 }\n{\"scheduled\":18446744073709551615}\n";
    let mut expected = AcceptanceHistogram::new(3).unwrap();
    expected.observe(3, 2).unwrap();
    for b in [0, 3, 3] {
        expected.observe_scheduled(b).unwrap();
    }
    for workers in [None, Some("1"), Some("3")] {
        let mut cmd = replay_stdin(3, input);
        if let Some(n) = workers {
            cmd.args(["--workers", n]);
        }
        let out = cmd
            .assert()
            .success()
            .stderr(predicate::str::contains(
                "warning: <stdin>: line 4: rejected observation (scheduled budget=4): budget exceeds max_draft_len=3; counted in num_rejected_observations",
            ))
            .stderr(predicate::str::contains(
                "warning: <stdin>: line 6: rejected observation (scheduled budget=18446744073709551615): budget exceeds max_draft_len=3",
            ))
            .get_output()
            .stdout
            .clone();
        let out = String::from_utf8(out).unwrap();
        assert!(
            out.ends_with(
                r#""num_rejected_observations":2,"scheduled_steps_by_budget":[1,0,0,2]}
"#
            ),
            "{workers:?}: {out}"
        );
        let mut with_rejected = expected.clone();
        assert!(with_rejected.observe_scheduled(4).is_err());
        assert!(with_rejected.observe_scheduled(usize::MAX).is_err());
        assert_eq!(out, report(&with_rejected), "{workers:?}");
    }
}
