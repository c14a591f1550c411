//! Helpers for the tests that compare two expositions in the classic text
//! format 0.0.4: the sample lines and the `# HELP`/`# TYPE` lines, each as
//! a sorted list, and `promtool check metrics`.
//!
//! `promtool` (Debian package `prometheus`; `.ci/install-prometheus.sh`) must
//! be on PATH: without it the promtool checks fail, unless
//! `SPECDEC_SKIP_PROMTOOL=1` is set, in which case they say so and skip the
//! promtool check only (as in `tests/prometheus_exposition.rs`).

#![allow(dead_code)] // each test binary uses its own part

use std::io::Write as _;
use std::process::{Command, Stdio};

/// The sample lines of `text`, sorted (exporters order families and series
/// differently; the lines themselves must be equal).
pub fn sample_lines(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines
}

/// The `# HELP` and `# TYPE` lines of `text`, sorted.
pub fn descriptor_lines(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with("# HELP ") || l.starts_with("# TYPE "))
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines
}

/// The value of the one sample line of `text` that starts with `series`
/// followed by a space (`series` is the name with its label set as
/// written), parsed.
pub fn value_of(text: &str, series: &str) -> Option<f64> {
    let mut values = text
        .lines()
        .filter_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .map(|v| v.parse::<f64>().expect("a number"));
    let value = values.next();
    assert!(values.next().is_none(), "{series} twice in\n{text}");
    value
}

/// Runs `promtool check metrics` on `text`; returns its findings (empty when
/// it is clean), or `None` when promtool is missing and
/// `SPECDEC_SKIP_PROMTOOL=1`. Fails the test when promtool is missing
/// otherwise.
pub fn promtool_findings(text: &str) -> Option<Vec<String>> {
    let child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if std::env::var("SPECDEC_SKIP_PROMTOOL").as_deref() == Ok("1") {
                eprintln!(
                    "SKIPPED promtool check: promtool not on PATH and SPECDEC_SKIP_PROMTOOL=1"
                );
                return None;
            }
            panic!(
                "promtool is not on PATH: install Debian's `prometheus` package \
                 (bash .ci/install-prometheus.sh), or set SPECDEC_SKIP_PROMTOOL=1 \
                 to skip the promtool checks explicitly"
            );
        }
        Err(e) => panic!("could not run promtool: {e}"),
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let findings: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .chain(String::from_utf8_lossy(&out.stderr).lines())
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect();
    // promtool exits 0 when clean, 3 on lint findings, 1 on a parse error.
    assert_eq!(
        out.status.success(),
        findings.is_empty(),
        "promtool status {:?} disagrees with its output {findings:?}\n{text}",
        out.status
    );
    Some(findings)
}
