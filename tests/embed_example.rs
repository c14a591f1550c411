//! `examples/embed.rs` as a process: it serves `/metrics` while it runs
//! (the drafts counter and the controller's gauge), logs its intervals,
//! and exits 0 after `--seconds` with the engine report on standard output.
//!
//! The test builds the example with the `cargo` that runs it (a no-op when
//! `cargo test` has built it already) and starts it on an ephemeral port.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// The example's executable, as cargo reports it.
fn embed_binary() -> PathBuf {
    let out = Command::new(env!("CARGO"))
        .args(["build", "--example", "embed", "--message-format=json"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stderr(Stdio::inherit())
        .output()
        .expect("run cargo build");
    assert!(out.status.success(), "cargo build --example embed failed");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|msg| msg["target"]["name"] == "embed")
        .find_map(|msg| msg["executable"].as_str().map(PathBuf::from))
        .expect("cargo reported the example's executable")
}

fn get_metrics(addr: SocketAddr) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: embed\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

#[test]
fn embed_serves_metrics_while_it_runs_and_prints_the_report() {
    let mut child = Command::new(embed_binary())
        .args(["--seconds", "2", "--port", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the example");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    stderr.read_line(&mut first).unwrap();
    let addr: SocketAddr = first
        .trim_end()
        .strip_prefix("embed: metrics on http://")
        .and_then(|rest| rest.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("first line: {first:?}"))
        .parse()
        .unwrap();

    let response = get_metrics(addr);
    assert!(response.starts_with("HTTP/1.1 200 OK"), "{response}");
    assert!(
        response.contains("\nspec_decode_num_drafts_total "),
        "{response}"
    );
    assert!(
        response.contains("\nspec_decode_controller_draft_length "),
        "{response}"
    );

    let log = thread::spawn(move || {
        let mut rest = String::new();
        stderr.read_to_string(&mut rest).map(|_| rest)
    });
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the example did not exit within 30 s");
        }
        thread::sleep(Duration::from_millis(20));
    };
    let log = log.join().unwrap().unwrap();
    assert_eq!(status.code(), Some(0), "{log}");
    // One line per interval: each at least 250 ms, in a 2 s run.
    let intervals = log.lines().filter(|l| l.contains("verify steps")).count();
    assert!((1..=8).contains(&intervals), "{log}");
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("the report");
    assert_eq!(report["num_spec_tokens"], 8);
    assert!(report["num_spec_steps"].as_u64().unwrap() > 0, "{report}");
    assert_eq!(report["num_rejected_observations"], 0);
}
