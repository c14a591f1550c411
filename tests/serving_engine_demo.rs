//! The `serving_engine` example (the README's main command) as a process:
//! closed pipes end it quietly, bad values exit 2 with a message, and its
//! `/metrics` server times out clients that are slow to send their request
//! headers.
//!
//! The tests build the example with the `cargo` that runs them (a no-op
//! when `cargo test` has built it already) and start it on an ephemeral
//! port.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, ChildStderr, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

/// The example's executable, built once per test run.
fn demo_binary() -> &'static PathBuf {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let out = Command::new(env!("CARGO"))
            .args([
                "build",
                "--example",
                "serving_engine",
                "--message-format=json",
            ])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stderr(Stdio::inherit())
            .output()
            .expect("run cargo build");
        assert!(
            out.status.success(),
            "cargo build --example serving_engine failed"
        );
        let stdout = String::from_utf8(out.stdout).unwrap();
        let path = stdout
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|msg| msg["target"]["name"] == "serving_engine")
            .filter_map(|msg| msg["executable"].as_str().map(PathBuf::from))
            .next_back()
            .expect("cargo reported the example's executable");
        assert!(path.is_file(), "{} is not a file", path.display());
        path
    })
}

/// A running demo, killed (by its own handle) when dropped.
struct Demo(Child);

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Demo {
    /// Waits at most `limit` for the demo to exit.
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
}

/// The demo with `args` on an ephemeral port, one engine thread; standard
/// output and standard error piped.
fn spawn(args: &[&str]) -> Demo {
    let child = Command::new(demo_binary())
        .args(["--metrics-addr", "127.0.0.1:0", "--workers", "1"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the demo");
    Demo(child)
}

/// Reads the demo's first log line (it names the address it listens on).
fn first_line(stderr: &mut BufReader<ChildStderr>) -> String {
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert!(line.starts_with("serving_engine: "), "first line: {line:?}");
    line
}

/// The address in "metrics on http://ADDR/metrics".
fn metrics_addr(first_line: &str) -> SocketAddr {
    let rest = &first_line[first_line.find("http://").expect("an address") + 7..];
    rest[..rest.find("/metrics").unwrap()].parse().unwrap()
}

/// Keeps reading `stderr` on another thread, so the demo never blocks on a
/// full pipe; returns everything read once the demo closes it.
fn drain(mut stderr: BufReader<ChildStderr>) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut rest = String::new();
        let _ = stderr.read_to_string(&mut rest);
        rest
    })
}

// ---------------------------------------------------------------------------
// Closed pipes

#[test]
fn closed_stderr_and_stdout_pipes_end_the_demo_quietly() {
    // `serving_engine 2>&1 | head -1`: the reader takes the first line and
    // goes away. The next interval line (100 ms later) hits a closed pipe.
    let mut demo = spawn(&["--seconds", "60", "--interval-ms", "100"]);
    let mut stderr = BufReader::new(demo.0.stderr.take().unwrap());
    first_line(&mut stderr);
    drop(stderr);
    drop(demo.0.stdout.take());
    let status = demo
        .wait_at_most(Duration::from_secs(30))
        .expect("the demo ends once nobody reads its output, long before its 60 s");
    assert_eq!(status.code(), Some(0), "{status}");
}

#[test]
fn closed_stderr_ends_the_run_early_and_still_prints_the_report() {
    let mut demo = spawn(&["--seconds", "60", "--interval-ms", "100"]);
    let mut stderr = BufReader::new(demo.0.stderr.take().unwrap());
    first_line(&mut stderr);
    drop(stderr);
    let mut stdout = demo.0.stdout.take().unwrap();
    let report = thread::spawn(move || {
        let mut report = String::new();
        stdout.read_to_string(&mut report).map(|_| report)
    });
    let status = demo
        .wait_at_most(Duration::from_secs(30))
        .expect("the demo ends once nobody reads its logs, long before its 60 s");
    assert_eq!(status.code(), Some(0), "{status}");
    let report = report.join().unwrap().unwrap();
    // Standard output was still open: the whole run's report is there.
    let report: serde_json::Value = serde_json::from_str(&report).expect("a JSON report");
    assert_eq!(report["num_spec_tokens"], 5);
}

#[test]
fn closed_stdout_pipe_at_the_report_exits_0_without_a_panic() {
    // `serving_engine | head -c 1` with the reader gone before the report.
    let mut demo = spawn(&["--seconds", "1"]);
    drop(demo.0.stdout.take());
    let stderr = drain(BufReader::new(demo.0.stderr.take().unwrap()));
    let status = demo
        .wait_at_most(Duration::from_secs(30))
        .expect("the demo ends");
    let log = stderr.join().unwrap();
    assert_eq!(status.code(), Some(0), "{status}; log:\n{log}");
    assert!(!log.contains("panicked"), "{log}");
    assert!(log.contains("stopped (time limit)"), "{log}");
}

#[cfg(target_os = "linux")]
#[test]
fn a_report_that_cannot_be_written_is_an_error_exit_2() {
    let out = Command::new(demo_binary())
        .args([
            "--metrics-addr",
            "127.0.0.1:0",
            "--workers",
            "1",
            "--seconds",
            "1",
        ])
        .stdout(std::fs::File::create("/dev/full").unwrap())
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{log}");
    assert!(
        log.contains("cannot write the report to standard output"),
        "{log}"
    );
}

// ---------------------------------------------------------------------------
// Bad values

#[test]
fn invalid_values_exit_2_with_a_message() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_addr = taken.local_addr().unwrap().to_string();
    let cases: [(&[&str], &str); 5] = [
        (&["--max-draft-len", "0"], "1..=64"),
        (&["--max-draft-len", "65"], "1..=64"),
        (&["--max-draft-len", "x"], "not a whole number"),
        (&["--prefix", "bad prefix"], "prefix"),
        (&["--metrics-addr", &taken_addr], "cannot listen on"),
    ];
    for (args, message) in cases {
        let out = Command::new(demo_binary())
            .args(["--seconds", "1", "--workers", "1"])
            .args(args)
            .output()
            .unwrap();
        let log = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {log}");
        assert!(log.contains(message), "{args:?}: {log}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

// ---------------------------------------------------------------------------
// /metrics over HTTP

fn get_metrics(addr: SocketAddr) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: demo\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

/// Sends `request_line`, then one header byte every `every` until the
/// server closes the connection or `give_up` passes; returns how long the
/// connection stayed open, `None` if it never closed.
fn trickle(addr: SocketAddr, every: Duration, give_up: Duration) -> Option<Duration> {
    let mut stream = TcpStream::connect(addr).unwrap();
    let started = Instant::now();
    stream.write_all(b"GET /metrics HTTP/1.1\r\n").unwrap();
    stream.set_read_timeout(Some(every)).unwrap();
    let mut buf = [0u8; 256];
    while started.elapsed() < give_up {
        if stream.write_all(b"X").is_err() {
            return Some(started.elapsed());
        }
        match stream.read(&mut buf) {
            // End of file: closed by the server.
            Ok(0) => return Some(started.elapsed()),
            // Some bytes (an error response, say): the close comes next.
            Ok(_) => {}
            // Nothing within `every`: still open.
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            // Reset: closed.
            Err(_) => return Some(started.elapsed()),
        }
    }
    None
}

#[test]
fn a_client_trickling_header_bytes_is_disconnected_after_the_header_read_timeout() {
    let mut demo = spawn(&["--seconds", "120", "--header-read-timeout-ms", "500"]);
    let mut stderr = BufReader::new(demo.0.stderr.take().unwrap());
    let addr = metrics_addr(&first_line(&mut stderr));
    let _log = drain(stderr);

    // A request that arrives in time is served.
    let response = get_metrics(addr);
    assert!(response.starts_with("HTTP/1.1 200 OK"), "{response}");
    assert!(
        response.contains("spec_decode_num_drafts_total"),
        "{response}"
    );

    // One header byte every 100 ms never completes the head: the server
    // closes the connection once 500 ms have passed since the request line,
    // bytes or not. Without a timeout it would stay open for good (given up
    // after 20 s).
    let open_for = trickle(addr, Duration::from_millis(100), Duration::from_secs(20))
        .expect("the server closed the slow connection");
    assert!(
        open_for >= Duration::from_millis(400) && open_for < Duration::from_secs(10),
        "closed after {open_for:?}, the timeout is 500 ms"
    );

    // The server still serves others.
    assert!(get_metrics(addr).starts_with("HTTP/1.1 200 OK"));
}
