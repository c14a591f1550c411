//! `policy_table` as a process with its pipes closed, as `| head` and
//! `2>&1 | head` close them: it exits 0 without a panic, and a closed
//! standard error (progress) does not cost the table on standard output.

use std::io::Read;
use std::process::{Command, Stdio};
use std::thread;

/// A short table: one seed, 1-second phases (a few seconds in all).
fn policy_table() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_policy_table"));
    c.args(["--seeds", "1", "--phase-seconds", "1"]);
    c
}

#[test]
fn closed_stderr_still_prints_the_table_and_exits_0() {
    let mut child = policy_table()
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reader of the progress lines is gone before the first one.
    drop(child.stderr.take());
    let mut table = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut table)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status}");
    assert!(table.contains("| workload | policy |"), "{table}");
    assert!(table.contains("| bursty | **per-state** |"), "{table}");
}

#[test]
fn closed_stdout_exits_0_without_a_panic() {
    let mut child = policy_table()
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reader of the table is gone before it is written.
    drop(child.stdout.take());
    let mut stderr = child.stderr.take().unwrap();
    let log = thread::spawn(move || {
        let mut log = String::new();
        stderr.read_to_string(&mut log).map(|_| log)
    });
    let status = child.wait().unwrap();
    let log = log.join().unwrap().unwrap();
    assert_eq!(status.code(), Some(0), "{status}; log:\n{log}");
    assert!(!log.contains("panicked"), "{log}");
    assert!(
        log.contains("policy_table: seed 1 bursty per-state"),
        "{log}"
    );
}
