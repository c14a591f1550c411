//! `advise` against the live demo: `advise --metrics http://127.0.0.1:PORT/metrics
//! --cost-linear 1,0.1` against the running demo (`serving_engine --prefix
//! vllm:spec_decode`) recommends what `advise` on the demo's own final
//! report does; and `--engine vllm`, which reads only vLLM's four families,
//! gives bounds (the demo's draft lengths vary), not advice.
//!
//! The demo runs in virtual time (a few seconds of simulated serving in
//! well under a second), then lingers serving its final counters, which
//! the test scrapes; it prints its report on standard output at exit.

use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The demo binary beside this crate's binary (`cargo test --workspace`
/// builds both); built here when absent.
fn demo_binary() -> PathBuf {
    let cli = assert_cmd::cargo::cargo_bin!("specdec-metrics");
    let dir = cli.parent().unwrap();
    let demo = dir.join(format!("serving_engine{}", std::env::consts::EXE_SUFFIX));
    if !demo.exists() {
        let release = dir.ends_with("release");
        let mut build = Command::new(env!("CARGO"));
        build.args(["build", "-p", "specdec-demo", "--bin", "serving_engine"]);
        if release {
            build.arg("--release");
        }
        let status = build.status().expect("cargo build of the demo");
        assert!(
            status.success(),
            "cargo build -p specdec-demo --bin serving_engine failed"
        );
    }
    assert!(demo.exists(), "no demo binary at {}", demo.display());
    demo
}

/// Kills the demo if the test fails before it exits.
struct Demo(Child);

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn advise(args: &[&str]) -> (String, String, i32) {
    let out = assert_cmd::cargo::cargo_bin_cmd!("specdec-metrics")
        .timeout(Duration::from_secs(60))
        .arg("advise")
        .args(args)
        .output()
        .unwrap();
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
        out.status.code().unwrap_or(-1),
    )
}

#[test]
fn advice_from_the_running_demos_metrics_is_the_advice_on_its_report() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new(demo_binary())
        .args([
            "--prefix",
            "vllm:spec_decode",
            "--metrics-addr",
            &format!("127.0.0.1:{port}"),
            "--virtual-time",
            "--seconds",
            "12",
            "--workers",
            "2",
            "--linger-seconds",
            "20",
            "--workload",
            "transition",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut demo = Demo(child);

    // Wait (bounded) for the demo to say it serves its final counters.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if line.contains("serving the final counters") {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(120))
        .expect("the demo did not finish its run within 120 s");

    let url = format!("http://127.0.0.1:{port}/metrics");
    let cost = ["--cost-linear", "1,0.1"];
    let (scraped, err, code) = advise(&["--metrics", &url, cost[0], cost[1]]);
    assert_eq!(code, 0, "{err}");
    let (bounds, bounds_err, bounds_code) =
        advise(&["--metrics", &url, "--engine", "vllm", cost[0], cost[1]]);

    // Stop the demo and read its report (the first JSON value of stdout).
    let deadline = Instant::now() + Duration::from_secs(30);
    terminate(&mut demo.0);
    let mut text = String::new();
    stdout.read_to_string(&mut text).unwrap();
    while demo.0.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let report: Value = serde_json::Deserializer::from_str(&text)
        .into_iter::<Value>()
        .next()
        .expect("the demo printed its report")
        .unwrap();
    let dir = tempfile::TempDir::new().unwrap();
    let report_path = dir.path().join("report.json");
    std::fs::write(&report_path, report.to_string()).unwrap();
    let (own, err, code) = advise(&[cost[0], cost[1], report_path.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");

    let scraped: Value = serde_json::from_str(&scraped).unwrap();
    let own: Value = serde_json::from_str(&own).unwrap();
    let group = &scraped["groups"][0];
    assert_eq!(scraped["engine"], "specdec");
    assert_eq!(group["labels"]["model_name"], "demo-model");
    assert_eq!(group["exact_because"], "by_draft_length");
    let rec = &group["recommendation"];
    assert_eq!(
        rec["draft_len"], own["draft_len"],
        "scraped {rec}\nreport {own}"
    );
    // The same histogram, so the same chain: the same figures.
    let (a, b) = (
        rec["expected_speedup"].as_f64().unwrap(),
        own["expected_speedup"].as_f64().unwrap(),
    );
    assert!((a - b).abs() <= 1e-12 * b, "{a} vs {b}");
    assert_eq!(rec["positions"], own["positions"]);
    assert_eq!(group["drafts"], report["num_spec_steps"]);

    // vLLM's four families alone: the demo's lengths vary, so bounds.
    assert_eq!(bounds_code, 3, "{bounds_err}");
    let bounds: Value = serde_json::from_str(&bounds).unwrap();
    assert_eq!(bounds["engine"], "vllm");
    assert_eq!(bounds["groups"][0]["identified"], "bounds");
    assert!(bounds["groups"][0]["recommendation"].is_null());
}

/// Ends the demo's linger with SIGTERM (its report is printed before it
/// lingers), through the `kill` command: no unsafe code, no libc crate.
fn terminate(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
}
