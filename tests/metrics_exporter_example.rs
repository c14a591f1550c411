//! `examples/metrics_exporter.rs` as a process: it prints the address it
//! actually bound (port 0 included) and serves `/metrics` there, refuses
//! number flags outside their ranges (exit 2, the flag and the range
//! named), and an interval longer than the run does not make it outlast
//! `--seconds`.
//!
//! The test builds the example with the `cargo` that runs it (a no-op when
//! `cargo test` has built it already).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// The example's executable, as cargo reports it.
fn exporter_binary() -> PathBuf {
    let out = Command::new(env!("CARGO"))
        .args([
            "build",
            "--example",
            "metrics_exporter",
            "--message-format=json",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stderr(Stdio::inherit())
        .output()
        .expect("run cargo build");
    assert!(
        out.status.success(),
        "cargo build --example metrics_exporter failed"
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|msg| msg["target"]["name"] == "metrics_exporter")
        .find_map(|msg| msg["executable"].as_str().map(PathBuf::from))
        .expect("cargo reported the example's executable")
}

/// The example, killed (by its own handle) when dropped.
struct Exporter(Child);

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Exporter {
    fn spawn(args: &[&str]) -> Self {
        let child = Command::new(exporter_binary())
            .args(["--addr", "127.0.0.1:0", "--workers", "1"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the example");
        Self(child)
    }

    /// Waits at most `limit` for the example to exit.
    fn wait_at_most(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.0.try_wait().unwrap() {
                return Some(status);
            }
            thread::sleep(Duration::from_millis(20));
        }
        None
    }

    /// The address of its first line, "serving /metrics on http://ADDR".
    fn address(&mut self) -> SocketAddr {
        let mut stderr = BufReader::new(self.0.stderr.take().unwrap());
        let mut first = String::new();
        stderr.read_line(&mut first).unwrap();
        // Keep draining, so the example never blocks on a full pipe.
        thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        first
            .trim_end()
            .strip_prefix("serving /metrics on http://")
            .unwrap_or_else(|| panic!("first line: {first:?}"))
            .parse()
            .unwrap()
    }
}

#[test]
fn the_bound_address_is_printed_and_serves_metrics() {
    let mut exporter = Exporter::spawn(&["--seconds", "5", "--interval-ms", "50"]);
    let addr = exporter.address();
    assert_ne!(
        addr.port(),
        0,
        "printed the requested port 0, not the bound one"
    );
    // The families appear at the publisher's first publish (every
    // `--interval-ms`), which a loaded machine may delay past the first
    // scrape: scrape again until they do, while the example runs (5 s).
    let scrape = || {
        let mut stream = TcpStream::connect(addr).expect("connect to the printed address");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream
            .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        response
    };
    let deadline = Instant::now() + Duration::from_secs(4);
    let mut response = scrape();
    while !response.contains("vllm:spec_decode_num_drafts_total") && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(50));
        response = scrape();
    }
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(
        response.contains("vllm:spec_decode_num_drafts_total"),
        "{response}"
    );
    let status = exporter.wait_at_most(Duration::from_secs(30));
    assert_eq!(status.and_then(|s| s.code()), Some(0));
}

#[test]
fn number_flags_outside_their_range_exit_2_naming_flag_and_range() {
    let huge = u64::MAX.to_string();
    for (flag, value, range) in [
        ("--workers", "0", "1..=256"),
        ("--workers", "257", "1..=256"),
        ("--interval-ms", "0", "1..=3600000"),
        ("--interval-ms", huge.as_str(), "1..=3600000"),
        ("--seconds", "0", "1..=31536000"),
        ("--seconds", huge.as_str(), "1..=31536000"),
        ("--linger-seconds", huge.as_str(), "0..=31536000"),
        ("--max-draft-len", "65", "1..=64"),
    ] {
        let out = Command::new(exporter_binary())
            .args(["--addr", "127.0.0.1:0", flag, value])
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {log}");
        assert!(
            log.contains(&format!("{flag} \"{value}\"")),
            "{flag} {value}: {log}"
        );
        assert!(log.contains(range), "{flag} {value}: {log}");
        assert!(out.stdout.is_empty(), "{flag} {value}");
    }
}

#[test]
fn an_interval_longer_than_the_run_does_not_outlast_it() {
    // An hour-long interval and a one-second run: the run ends after about
    // a second, not after the first interval.
    let mut exporter = Exporter::spawn(&["--seconds", "1", "--interval-ms", "3600000"]);
    exporter.address();
    let status = exporter
        .wait_at_most(Duration::from_secs(30))
        .expect("still running 30 s into a 1-second run");
    assert_eq!(status.code(), Some(0));
}
