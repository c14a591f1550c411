//! The `serving_engine` demo (the simulator's main command) as a process:
//! closed pipes end it quietly, bad values exit 2 with a message, its
//! `/metrics` server times out clients that are slow to send their request
//! headers, a virtual-time run is a function of its seed, the summary after
//! the report has its documented keys and consistent figures, and the
//! policies do what they say (a static one drafts its `K`, the adaptive one
//! follows a transition).
//!
//! The tests run the binary cargo built for them and start it on an
//! ephemeral port.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, ChildStderr, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

/// The demo's executable, built by cargo for this package's tests.
fn demo_binary() -> &'static str {
    env!("CARGO_BIN_EXE_serving_engine")
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
    let stdout = report.join().unwrap().unwrap();
    // Standard output was still open: the whole run's report is there, and
    // the summary after it.
    let (report, summary) = report_and_summary(&stdout);
    assert_eq!(report["num_spec_tokens"], 5);
    assert_eq!(summary["max_draft_len"], 5);
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

#[test]
fn lingering_serves_the_final_counters_then_exits_0() {
    let mut demo = spawn(&["--seconds", "1", "--linger-seconds", "1"]);
    let mut stderr = BufReader::new(demo.0.stderr.take().unwrap());
    let addr = metrics_addr(&first_line(&mut stderr));
    let mut stdout = demo.0.stdout.take().unwrap();
    let report = thread::spawn(move || {
        let mut report = String::new();
        stdout.read_to_string(&mut report).map(|_| report)
    });
    // Once the demo says it lingers, the run is over and the report
    // printed: the counters served now are the report's.
    let mut log = String::new();
    while !log.contains("serving the final counters") {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "log ended:\n{log}"
        );
        log.push_str(&line);
    }
    let metrics = get_metrics(addr);
    let rest = drain(stderr);
    let status = demo
        .wait_at_most(Duration::from_secs(30))
        .expect("the demo ends after lingering");
    log.push_str(&rest.join().unwrap());
    assert_eq!(status.code(), Some(0), "{status}; log:\n{log}");
    assert!(!log.contains("panicked"), "{log}");
    let (report, _) = report_and_summary(&report.join().unwrap().unwrap());
    assert_eq!(Some(drafts_in(&metrics)), report["num_spec_steps"].as_u64());
}

/// The value of the first `spec_decode_num_drafts_total` series.
fn drafts_in(metrics: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("spec_decode_num_drafts_total{"))
        .and_then(|l| l.split_whitespace().last())
        .expect("num_drafts in /metrics")
        .parse()
        .unwrap()
}

#[cfg(unix)]
#[test]
fn a_delay_serves_zero_counters_before_the_first_step() {
    // --delay-seconds 30, stopped by SIGTERM while it waits: every scrape
    // read zero, no step ran, and the report (all zeros) is printed.
    let mut demo = spawn(&["--seconds", "1", "--delay-seconds", "30"]);
    let mut stderr = BufReader::new(demo.0.stderr.take().unwrap());
    let addr = metrics_addr(&first_line(&mut stderr));
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert!(line.contains("zero counters"), "{line}");
    let mut stdout = demo.0.stdout.take().unwrap();
    let report = thread::spawn(move || {
        let mut report = String::new();
        stdout.read_to_string(&mut report).map(|_| report)
    });
    for _ in 0..3 {
        assert_eq!(drafts_in(&get_metrics(addr)), 0);
        thread::sleep(Duration::from_millis(200));
    }
    let rest = drain(stderr);
    send_signal(&demo, "TERM");
    let status = demo
        .wait_at_most(Duration::from_secs(30))
        .expect("SIGTERM ends the wait");
    let log = rest.join().unwrap();
    assert_eq!(status.code(), Some(0), "{status}; log:\n{log}");
    assert!(log.contains("stopped (SIGTERM)"), "{log}");
    let (report, _) = report_and_summary(&report.join().unwrap().unwrap());
    assert_eq!(report["num_spec_steps"], 0);
}

#[test]
fn after_a_delay_the_engine_runs() {
    let mut demo = spawn(&["--seconds", "1", "--delay-seconds", "1"]);
    let stdout = demo.0.stdout.take().unwrap();
    let rest = drain(BufReader::new(demo.0.stderr.take().unwrap()));
    let status = demo
        .wait_at_most(Duration::from_secs(30))
        .expect("the demo ends");
    let log = rest.join().unwrap();
    assert_eq!(status.code(), Some(0), "{status}; log:\n{log}");
    let mut out = String::new();
    BufReader::new(stdout).read_to_string(&mut out).unwrap();
    let (report, _) = report_and_summary(&out);
    assert!(report["num_spec_steps"].as_u64().unwrap() > 0, "{log}");
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

/// One table of cases (each bad value and its message): long for that.
#[test]
fn invalid_values_exit_2_with_a_message() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_addr = taken.local_addr().unwrap().to_string();
    let huge = u64::MAX.to_string();
    let huge = huge.as_str();
    let cases: [(&[&str], &str); 37] = [
        (&["--max-draft-len", "0"], "1..=64"),
        (&["--max-draft-len", "65"], "1..=64"),
        (&["--max-draft-len", "x"], "not a whole number"),
        (&["--prefix", "bad prefix"], "prefix"),
        (&["--metrics-addr", &taken_addr], "cannot listen on"),
        (&["--policy", "greedy"], "not a policy"),
        (&["--policy", "static:x"], "whole number"),
        (&["--policy", "static:6"], "above --max-draft-len 5"),
        (
            &["--policy", "static:9", "--max-draft-len", "8"],
            "above --max-draft-len 8",
        ),
        (&["--policy", "vllm-44337"], "not a policy"),
        (&["--workload", "burst"], "not a workload"),
        (&["--persistence", "0.5"], "at least 1"),
        (&["--persistence", "nan"], "at least 1"),
        (&["--state-rule", "ewma:3"], "power of two"),
        (&["--state-rule", "newest"], "not a state rule"),
        (&["--phase-seconds", "0"], "above 0"),
        (&["--phase-seconds", "inf"], "above 0"),
        (&["--cost-linear", "1"], "BASE,PER_TOKEN"),
        (&["--cost-linear", "1,x"], "not a number"),
        (
            &["--cost-linear", "0,0.1"],
            "a step cost must be more than zero",
        ),
        (&["--cost-linear", "1,-0.1"], "it must be zero or more"),
        (&["--virtual-time", "--step-us", "0"], "--step-us"),
        (
            &["--update-ms", "2000", "--interval-ms", "1000"],
            "--update-ms 2000 is longer than --interval-ms 1000",
        ),
        (&["--update-ms", "0"], "--update-ms"),
        // Flags bounded so that nothing panics, aborts or hangs: each
        // message names the flag and its accepted range.
        (
            &["--max-batch", huge],
            "'--max-batch <N>': \"18446744073709551615\" is not a whole number in 1..=4096",
        ),
        (&["--max-batch", "100000000000"], "'--max-batch <N>'"),
        (&["--max-batch", "4097"], "in 1..=4096"),
        (
            &["--workers", "257"],
            "'--workers <N>': \"257\" is not a whole number in 1..=256",
        ),
        (
            &["--workers", "32", "--max-batch", "4096"],
            "--workers 32 with --max-batch 4096 is 131072 requests in flight (at most 65536)",
        ),
        (
            &["--step-us", huge],
            "'--step-us <N>': 18446744073709551615 is not in 0..=1000000",
        ),
        (
            &["--step-us", "1000000"],
            "--step-us 1000000 with --cost-linear 1,0.1: a step of budget 5 would sleep 1.500 s (at most 1 s",
        ),
        (
            &["--seconds", "31536001"],
            "'--seconds <N>': 31536001 is not in 0..=31536000",
        ),
        (&["--linger-seconds", huge], "'--linger-seconds <N>'"),
        (&["--delay-seconds", huge], "'--delay-seconds <N>'"),
        (
            &["--interval-ms", huge],
            "'--interval-ms <N>': 18446744073709551615 is not in 1..=3600000",
        ),
        (
            &["--header-read-timeout-ms", huge],
            "'--header-read-timeout-ms <N>'",
        ),
        (&["--max-connections", huge], "'--max-connections <N>'"),
    ];
    for (args, message) in cases {
        // Defaults first, so that a case may set them again.
        let defaults = [
            ["--seconds", "1"],
            ["--workers", "1"],
            ["--metrics-addr", "127.0.0.1:0"],
        ];
        let out = Command::new(demo_binary())
            .args(
                defaults
                    .iter()
                    .filter(|[flag, _]| !args.contains(flag))
                    .flatten(),
            )
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
// Virtual time, the summary and the policies

/// Standard output's two JSON values: the report, then the summary (its
/// last line).
fn report_and_summary(stdout: &str) -> (serde_json::Value, serde_json::Value) {
    let values: Vec<serde_json::Value> = serde_json::Deserializer::from_str(stdout)
        .into_iter()
        .collect::<Result<_, _>>()
        .expect("standard output is JSON values");
    assert_eq!(values.len(), 2, "the report and the summary: {stdout}");
    let last_line = stdout.trim_end().lines().last().unwrap();
    let summary: serde_json::Value = serde_json::from_str(last_line).unwrap();
    assert_eq!(summary, values[1], "the summary is the last line");
    let mut values = values.into_iter();
    (values.next().unwrap(), values.next().unwrap())
}

/// Runs the demo to its end with `args` (in virtual time, two engine
/// threads unless overridden); returns standard output and standard error.
fn run_virtual(args: &[&str]) -> (String, String) {
    let out = Command::new(demo_binary())
        .args([
            "--metrics-addr",
            "127.0.0.1:0",
            "--workers",
            "2",
            "--virtual-time",
        ])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    );
    assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
    (stdout, stderr)
}

fn f64_of(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("{v} is not a number"))
}

#[test]
fn a_virtual_time_run_is_the_same_for_the_same_seed_and_differs_for_another() {
    let args = [
        "--seconds",
        "6",
        "--phase-seconds",
        "2",
        "--interval-ms",
        "500",
    ];
    let (first, first_log) = run_virtual(&[&args[..], &["--seed", "7"]].concat());
    let (second, second_log) = run_virtual(&[&args[..], &["--seed", "7"]].concat());
    let (other, _) = run_virtual(&[&args[..], &["--seed", "8"]].concat());
    assert_eq!(first, second, "report and summary of two runs with seed 7");
    // The interval lines too (the first line names the random port).
    let intervals = |log: &str| log.lines().skip(1).map(str::to_owned).collect::<Vec<_>>();
    let (mut a, mut b) = (intervals(&first_log), intervals(&second_log));
    // The last line says how long the run took in wall-clock time.
    assert!(a.pop().unwrap().contains("stopped (time limit)"));
    assert!(b.pop().unwrap().contains("stopped (time limit)"));
    assert_eq!(a, b);
    assert_ne!(first, other, "seed 8 gave the output of seed 7");
}

#[test]
fn the_summary_has_the_documented_keys_and_consistent_figures() {
    let (stdout, _) = run_virtual(&[
        "--seconds",
        "10",
        "--phase-seconds",
        "4",
        "--seed",
        "3",
        "--max-draft-len",
        "6",
        "--cost-linear",
        "2,0.25",
    ]);
    let (report, summary) = report_and_summary(&stdout);
    summary_keys_and_settings(&summary);
    summary_phases_add_up(&summary);
    summary_matches_the_report(&report, &summary);
}

/// The keys of a summary's figures (overall, per phase, settled).
const FIGURE_KEYS: [&str; 8] = [
    "steps",
    "tokens",
    "cost_units",
    "goodput",
    "mean_draft_len",
    "switches",
    "tokens_per_request_step",
    "drafted_per_request_step",
];

/// An object's keys, sorted.
fn keys(v: &serde_json::Value) -> Vec<String> {
    let mut k: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
    k.sort();
    k
}

fn sorted(list: &[&str]) -> Vec<String> {
    let mut k: Vec<_> = list.iter().map(|s| s.to_string()).collect();
    k.sort();
    k
}

/// The summary of `the_summary_has_...`'s run: its keys and settings.
fn summary_keys_and_settings(summary: &serde_json::Value) {
    assert_eq!(
        keys(summary),
        sorted(&[
            "policy",
            "workload",
            "seed",
            "max_draft_len",
            "workers",
            "max_batch",
            "cost_linear",
            "cost_rule",
            "step_us",
            "interval_ms",
            "update_ms",
            "phase_seconds",
            "persistence",
            "state_rule",
            "virtual_time",
            "seconds",
            "settle_seconds",
            "overall",
            "phases",
            "controller",
            "state_controller",
        ])
    );
    assert_eq!(summary["state_controller"], serde_json::Value::Null);
    assert_eq!(summary["policy"], "adaptive");
    assert_eq!(summary["workload"], "transition");
    assert_eq!(summary["seed"], 3);
    assert_eq!(summary["max_draft_len"], 6);
    assert_eq!(summary["cost_linear"]["base"], 2.0);
    assert_eq!(summary["cost_linear"]["per_token"], 0.25);
    assert_eq!(summary["virtual_time"], true);
    assert_eq!(summary["cost_rule"], "scheduled");
    assert_eq!(summary["seconds"], 10.0);
    assert_eq!(summary["settle_seconds"], 3.0);
    assert_eq!(keys(&summary["overall"]), sorted(&FIGURE_KEYS));
    assert_eq!(
        keys(&summary["controller"]),
        sorted(&["updates", "switches", "regime_changes", "draft_len"])
    );
    // 10 one-second intervals of four updates each.
    assert_eq!(summary["controller"]["updates"], 40);
}

/// Figures that hold together: goodput, cost and mean draft length of the
/// run's step cost `2 + 0.25 b`, `K = 6`.
fn check_figures(f: &serde_json::Value) {
    for key in FIGURE_KEYS {
        assert!(f.get(key).is_some(), "{key} in {f}");
    }
    let (tokens, cost) = (f64_of(&f["tokens"]), f64_of(&f["cost_units"]));
    let (steps, mean) = (f64_of(&f["steps"]), f64_of(&f["mean_draft_len"]));
    assert!(steps > 0.0, "{f}");
    assert!(
        (f64_of(&f["goodput"]) - tokens / cost).abs() < 1e-9 * tokens,
        "{f}"
    );
    // cost = base * steps + per_token * (sum of budgets)
    assert!(
        (cost - (2.0 * steps + 0.25 * mean * steps)).abs() < 1e-6 * cost,
        "{f}"
    );
    assert!((0.0..=6.0).contains(&mean), "{f}");
}

/// The phases of `the_summary_has_...`'s run: their names and bounds, each
/// one's figures and settled part, and that they add up to `overall`.
fn summary_phases_add_up(summary: &serde_json::Value) {
    // 10 s of 4-second phases: low, high, low (half).
    let phases = summary["phases"].as_array().unwrap();
    let names: Vec<_> = phases.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["low", "high", "low"]);
    let bounds: Vec<_> = phases
        .iter()
        .map(|p| (f64_of(&p["start_s"]), f64_of(&p["end_s"])))
        .collect();
    assert_eq!(bounds, [(0.0, 4.0), (4.0, 8.0), (8.0, 10.0)]);

    check_figures(&summary["overall"]);
    let sum = |key: &str| phases.iter().map(|p| f64_of(&p[key])).sum::<f64>();
    for key in ["steps", "tokens", "cost_units", "switches"] {
        let overall = f64_of(&summary["overall"][key]);
        assert!(
            (sum(key) - overall).abs() <= 1e-9 * overall.max(1.0),
            "{key}"
        );
    }
    for p in phases {
        assert_eq!(
            keys(p),
            sorted(
                &[
                    &FIGURE_KEYS[..],
                    &["index", "name", "start_s", "end_s", "settled"]
                ]
                .concat()
            )
        );
        assert_eq!(keys(&p["settled"]), sorted(&FIGURE_KEYS));
        check_figures(p);
        for key in ["steps", "tokens", "switches"] {
            assert!(f64_of(&p["settled"][key]) <= f64_of(&p[key]), "{key}: {p}");
        }
        assert!(f64_of(&p["settled"]["steps"]) < f64_of(&p["steps"]), "{p}");
    }
    // The first two phases settle after 3 s of their 4; the last phase
    // lasts 2 s, too short to settle: no settled steps, no figures.
    check_figures(&phases[0]["settled"]);
    check_figures(&phases[1]["settled"]);
    assert_eq!(phases[2]["settled"]["steps"], 0);
    assert_eq!(phases[2]["settled"]["goodput"], serde_json::Value::Null);
    assert_eq!(
        phases[2]["settled"]["mean_draft_len"],
        serde_json::Value::Null
    );
}

/// The summary against the engine-wide report of the same run.
fn summary_matches_the_report(report: &serde_json::Value, summary: &serde_json::Value) {
    // The scheduled budgets of the report are the summary's steps and
    // budgets.
    let scheduled: Vec<u64> = report["scheduled_steps_by_budget"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap())
        .collect();
    assert_eq!(scheduled.len(), 7);
    let engine_steps: u64 = scheduled.iter().sum();
    assert_eq!(summary["overall"]["steps"].as_u64(), Some(engine_steps));
    let budget_sum: u64 = scheduled
        .iter()
        .enumerate()
        .map(|(b, &n)| b as u64 * n)
        .sum();
    let mean = f64_of(&summary["overall"]["mean_draft_len"]);
    assert!((mean - budget_sum as f64 / engine_steps as f64).abs() < 1e-12);
    // The tokens are the report's: one per request-step plus the accepted
    // drafts, except for rejected observations (a > k), whose step produced
    // at most K + 1 = 7 tokens the report cannot see.
    let report_tokens = report["num_spec_steps"].as_u64().unwrap()
        + report["num_undrafted_steps"].as_u64().unwrap()
        + report["num_accepted_draft_tokens"].as_u64().unwrap();
    let rejected = report["num_rejected_observations"].as_u64().unwrap();
    let tokens = summary["overall"]["tokens"].as_u64().unwrap();
    assert!(
        tokens >= report_tokens && tokens <= report_tokens + 7 * rejected,
        "summary {tokens} tokens, report {report_tokens} (+ {rejected} rejected)"
    );
}

#[test]
fn a_static_policy_schedules_only_its_draft_length() {
    let (stdout, log) = run_virtual(&[
        "--seconds",
        "4",
        "--policy",
        "static:3",
        "--workload",
        "steady",
    ]);
    let (report, summary) = report_and_summary(&stdout);
    assert_eq!(summary["policy"], "static:3");
    assert_eq!(summary["controller"], serde_json::Value::Null);
    assert_eq!(summary["overall"]["mean_draft_len"], 3.0);
    assert_eq!(summary["overall"]["switches"], 0.0);
    // Drafts of 3, and shorter ones only where a grammar cut them.
    let rows = report["acceptance_histogram_by_draft_length"]
        .as_object()
        .unwrap();
    let lengths: Vec<usize> = rows.keys().map(|k| k.parse().unwrap()).collect();
    assert!(lengths.contains(&3), "{lengths:?}");
    assert!(lengths.iter().all(|&k| k <= 3), "{lengths:?}");
    let steps = |k: &str| {
        rows[k]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_u64().unwrap())
            .sum::<u64>()
    };
    let shorter: u64 = lengths
        .iter()
        .filter(|&&k| k < 3)
        .map(|k| steps(&k.to_string()))
        .sum();
    assert!(steps("3") > 10 * shorter, "{rows:?}");
    assert!(log.contains("Draft length: k = 3;"), "{log}");
    // The scheduler's own record: every engine step had the budget 3.
    let engine_steps = summary["overall"]["steps"].as_u64().unwrap();
    assert!(engine_steps > 0);
    assert_eq!(
        report["scheduled_steps_by_budget"],
        serde_json::json!([0, 0, 0, engine_steps, 0, 0])
    );
}

#[test]
fn the_per_state_policy_drafts_by_request_state_and_reports_it() {
    let args = |policy: &str| {
        run_virtual(&[
            "--seconds",
            "30",
            "--max-draft-len",
            "8",
            "--workload",
            "bursty",
            "--policy",
            policy,
        ])
    };
    let (stdout, log) = args("per-state");
    let (report, summary) = report_and_summary(&stdout);
    assert_eq!(summary["policy"], "per-state");
    assert_eq!(summary["workload"], "bursty");
    assert_eq!(summary["controller"], serde_json::Value::Null);
    let state = &summary["state_controller"];
    let mut keys: Vec<_> = state.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    assert_eq!(
        keys,
        ["draft_lens", "regime_changes", "switches", "updates"]
    );
    // 30 one-second intervals of four updates each.
    assert_eq!(state["updates"], 120);
    let lens: Vec<u64> = state["draft_lens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_u64().unwrap())
        .collect();
    assert_eq!(lens.len(), 4, "{state}");
    // Requests whose recent drafts were mostly rejected draft short, those
    // whose drafts were mostly accepted draft long; none drafts nothing.
    assert!(lens.iter().all(|&k| (1..=8).contains(&k)), "{lens:?}");
    assert!(lens[0] <= 2 && lens[3] >= 6, "{lens:?}");
    assert!(log.contains("k by request state"), "{log}");
    assert!(log.contains("verify steps by state"), "{log}");
    // The engine-wide report is the sum over the states: its scheduled
    // budgets are one per engine step, each the step's mean length
    // rounded, so their mean is within half a token of the summary's.
    let scheduled: Vec<u64> = report["scheduled_steps_by_budget"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap())
        .collect();
    let steps: u64 = scheduled.iter().sum();
    assert_eq!(summary["overall"]["steps"].as_u64(), Some(steps));
    let rounded_mean = scheduled
        .iter()
        .enumerate()
        .map(|(b, &n)| b as f64 * n as f64)
        .sum::<f64>()
        / steps as f64;
    let mean = f64_of(&summary["overall"]["mean_draft_len"]);
    assert!(
        (rounded_mean - mean).abs() <= 0.5,
        "{rounded_mean} vs {mean}"
    );
    // Per-request lengths: steps whose lengths differ have a mean that is
    // not a whole number.
    assert!(mean.fract() != 0.0, "{mean}");
    // Drafting by state pays on bursty requests: well ahead of the
    // batch-level controller on the same seed.
    let (adaptive, _) = args("adaptive");
    let (_, adaptive) = report_and_summary(&adaptive);
    let (g, a) = (
        f64_of(&summary["overall"]["goodput"]),
        f64_of(&adaptive["overall"]["goodput"]),
    );
    assert!(g > 1.04 * a, "per-state {g} vs adaptive {a}");
}

#[test]
fn the_per_request_peers_run_in_the_demo_and_say_they_choose_per_request() {
    for policy in ["smartspec", "vllm-av"] {
        let (stdout, log) =
            run_virtual(&["--seconds", "8", "--workload", "bursty", "--policy", policy]);
        let (report, summary) = report_and_summary(&stdout);
        assert_eq!(summary["policy"], policy);
        assert_eq!(summary["controller"], serde_json::Value::Null);
        assert_eq!(summary["state_controller"], serde_json::Value::Null);
        assert!(log.contains("chosen per request"), "{policy}: {log}");
        // Lengths differ between requests: the mean is not a whole number,
        // and the engine-wide report saw drafts of several lengths.
        let mean = f64_of(&summary["overall"]["mean_draft_len"]);
        assert!(mean.fract() != 0.0, "{policy}: {mean}");
        let rows = report["acceptance_histogram_by_draft_length"]
            .as_object()
            .unwrap();
        assert!(rows.len() >= 3, "{policy}: {rows:?}");
    }
}

#[test]
fn a_state_rule_decides_the_states_per_state_records_in() {
    // The previous step's outcome in three levels: the fourth state is
    // never used, so no interval has a verify step in it.
    let (stdout, log) = run_virtual(&[
        "--seconds",
        "5",
        "--workload",
        "bursty",
        "--policy",
        "per-state",
        "--state-rule",
        "last-outcome",
    ]);
    let (_, summary) = report_and_summary(&stdout);
    assert_eq!(summary["state_rule"], "last-outcome");
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("verify steps by state"))
        .collect();
    assert_eq!(lines.len(), 5, "{log}");
    for line in lines {
        let shares = &line[line.find("verify steps by state ").unwrap() + 22..];
        let shares: Vec<&str> = shares.split(';').next().unwrap().split(" / ").collect();
        assert_eq!(shares.len(), 4, "{line}");
        assert_eq!(shares[3], "0%", "{line}");
        assert_ne!(shares[0], "0%", "{line}");
    }
}

#[test]
fn the_adaptive_policy_follows_a_transition_and_says_so() {
    let (stdout, log) = run_virtual(&[
        "--seconds",
        "24",
        "--phase-seconds",
        "8",
        "--max-draft-len",
        "8",
    ]);
    let (_, summary) = report_and_summary(&stdout);
    let phases = summary["phases"].as_array().unwrap();
    let settled_k = |i: usize| f64_of(&phases[i]["settled"]["mean_draft_len"]);
    // Low acceptance: about 2; high: 6 or more (exploration included).
    assert!(settled_k(0) < 3.0, "{summary}");
    assert!(settled_k(1) > 6.0, "{summary}");
    assert!(settled_k(2) < 3.0, "{summary}");
    let switches = f64_of(&summary["overall"]["switches"]);
    assert!((2.0..=6.0).contains(&switches), "{summary}");
    assert_eq!(summary["controller"]["switches"].as_f64(), Some(switches));
    assert!(summary["controller"]["regime_changes"].as_u64().unwrap() >= 2);
    assert!(log.contains("switched from 2"), "{log}");
    assert!(log.contains("regime change detected"), "{log}");
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
    // The schedule: budgets, and the controller's choice (adaptive by
    // default, K = 5: its first choice is 2).
    assert!(
        response.contains("spec_decode_scheduled_steps_total{"),
        "{response}"
    );
    let gauge = response
        .lines()
        .find_map(|l| l.strip_prefix("spec_decode_controller_draft_length"))
        .expect("the controller's gauge");
    let k: usize = gauge.split_whitespace().last().unwrap().parse().unwrap();
    assert!(k <= 5, "{gauge}");

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

#[test]
fn the_controller_update_period_defaults_to_250_ms_and_may_not_exceed_the_interval() {
    let (out, _) = run_virtual(&["--seconds", "3"]);
    let (_, summary) = report_and_summary(&out);
    assert_eq!(summary["update_ms"], 250);
    assert_eq!(summary["interval_ms"], 1000);
    // Four updates per interval.
    assert_eq!(summary["controller"]["updates"], 12);
    // A shorter interval shortens the default update period with it.
    let (out, _) = run_virtual(&["--seconds", "1", "--interval-ms", "100"]);
    let (_, summary) = report_and_summary(&out);
    assert_eq!(summary["update_ms"], 100);
    assert_eq!(summary["controller"]["updates"], 10);
}

// ---------------------------------------------------------------------------
// Stopping

/// Sends `signal` (`TERM`, `INT`) to the demo.
#[cfg(unix)]
fn send_signal(demo: &Demo, signal: &str) {
    let status = Command::new("kill")
        .args([format!("-{signal}"), demo.0.id().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{signal}");
}

#[cfg(unix)]
#[test]
fn sigterm_and_sigint_stop_a_virtual_run_in_the_middle_of_a_tick() {
    for (signal, why) in [("TERM", "stopped (SIGTERM)"), ("INT", "stopped (Ctrl-C)")] {
        // 2 us per cost unit: a one-second update period is about 400,000
        // engine steps of 1,024 requests each, far longer than the test
        // waits. The signal has to stop the steps, not wait for the end of
        // the tick.
        let mut demo = spawn(&[
            "--virtual-time",
            "--seconds",
            "0",
            "--step-us",
            "2",
            "--update-ms",
            "1000",
            "--interval-ms",
            "1000",
            "--max-batch",
            "1024",
        ]);
        let mut stderr = BufReader::new(demo.0.stderr.take().unwrap());
        first_line(&mut stderr);
        let log = drain(stderr);
        let mut stdout = demo.0.stdout.take().unwrap();
        let report = thread::spawn(move || {
            let mut report = String::new();
            stdout.read_to_string(&mut report).map(|_| report)
        });
        thread::sleep(Duration::from_millis(300));
        send_signal(&demo, signal);
        let status = demo
            .wait_at_most(Duration::from_secs(10))
            .unwrap_or_else(|| panic!("SIG{signal}: still running 10 s after the signal"));
        let log = log.join().unwrap();
        assert_eq!(status.code(), Some(0), "SIG{signal}: {status}; log:\n{log}");
        assert!(log.contains(why), "SIG{signal}: {log}");
        let (report, summary) = report_and_summary(&report.join().unwrap().unwrap());
        assert!(report["num_spec_steps"].as_u64().unwrap() > 0, "{report}");
        // The run's length is the virtual time the engine threads reached,
        // inside the first tick.
        let seconds = f64_of(&summary["seconds"]);
        assert!(seconds > 0.0 && seconds < 1.0, "SIG{signal}: {summary}");
        assert_eq!(
            summary["overall"]["steps"],
            report["scheduled_steps_by_budget"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c.as_u64().unwrap())
                .sum::<u64>()
        );
    }
}

/// The longest step allowed in real time (1 s: `--step-us 1000000` with
/// a cost of one unit) is one sleep; a SIGTERM in the middle of it ends
/// the run after that step, within about a second (a longer step is
/// refused at the flag: see `invalid_values_exit_2_with_a_message`).
#[cfg(unix)]
#[test]
fn sigterm_during_the_longest_step_stops_the_run_within_seconds() {
    let mut demo = spawn(&[
        "--seconds",
        "0",
        "--step-us",
        "1000000",
        "--cost-linear",
        "1,0",
        "--max-batch",
        "1",
    ]);
    let mut stderr = BufReader::new(demo.0.stderr.take().unwrap());
    first_line(&mut stderr);
    let log = drain(stderr);
    drop(demo.0.stdout.take());
    thread::sleep(Duration::from_millis(300));
    send_signal(&demo, "TERM");
    let status = demo
        .wait_at_most(Duration::from_secs(5))
        .expect("still running 5 s after SIGTERM");
    let log = log.join().unwrap();
    assert_eq!(status.code(), Some(0), "{log}");
    assert!(log.contains("stopped (SIGTERM)"), "{log}");
}

/// Runs the demo with `args` (ephemeral port, one engine thread) for at
/// most `limit`; its exit status, or `None` if it was still running (then
/// killed), and its standard error.
fn run_at_most(args: &[&str], limit: Duration) -> (Option<ExitStatus>, String) {
    let mut demo = spawn(args);
    let stderr = drain(BufReader::new(demo.0.stderr.take().unwrap()));
    drop(demo.0.stdout.take());
    let status = demo.wait_at_most(limit);
    drop(demo);
    (status, stderr.join().unwrap())
}

#[test]
fn a_step_cost_too_small_for_virtual_time_is_refused_at_once() {
    // A step without drafts of 1e-9 cost units of 8 ms lasts 8e-12 s of
    // virtual time: a one-second interval would be 1.25e14 steps, a run
    // without end and without output. 1e-320 is subnormal: the library's
    // step cost refuses it (costs must lie in 1e-150..=1e150).
    for (cost, why) in [
        ("1e-9,0", "at most 1000000 steps"),
        ("1e-320,0", "between 1e-150 and 1e150"),
    ] {
        let (status, log) = run_at_most(
            &["--virtual-time", "--seconds", "1", "--cost-linear", cost],
            Duration::from_secs(20),
        );
        let status = status.unwrap_or_else(|| panic!("{cost}: still running after 20 s"));
        assert_eq!(status.code(), Some(2), "{cost}: {log}");
        assert!(log.contains("--cost-linear"), "{cost}: {log}");
        assert!(log.contains(why), "{cost}: {log}");
    }
    // The most steps an interval may take is allowed: 1 us per unit, a
    // 1-second interval of steps without drafts (static:0), 10^6 steps.
    let (status, log) = run_at_most(
        &[
            "--virtual-time",
            "--seconds",
            "1",
            "--step-us",
            "1",
            "--policy",
            "static:0",
            "--max-batch",
            "1",
        ],
        Duration::from_secs(120),
    );
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{log}");
}

#[test]
fn more_phases_than_the_limit_are_refused_at_once() {
    // 2 s of 1-nanosecond phases: 2e9 phases, one summary entry each.
    let (status, log) = run_at_most(
        &[
            "--virtual-time",
            "--seconds",
            "2",
            "--phase-seconds",
            "1e-9",
        ],
        Duration::from_secs(20),
    );
    let status = status.unwrap_or_else(|| panic!("still running after 20 s: {log}"));
    assert_eq!(status.code(), Some(2), "{log}");
    assert!(log.contains("--phase-seconds 1e-9"), "{log}");
    assert!(log.contains("at most 10000 phases"), "{log}");
    // 10,000 phases are allowed.
    let (status, log) = run_at_most(
        &[
            "--virtual-time",
            "--seconds",
            "10",
            "--phase-seconds",
            "0.001",
            "--policy",
            "static:1",
        ],
        Duration::from_secs(60),
    );
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{log}");
    // A run without end may not count phases faster than it logs intervals.
    let (status, log) = run_at_most(
        &["--seconds", "0", "--phase-seconds", "0.5"],
        Duration::from_secs(20),
    );
    let status = status.unwrap_or_else(|| panic!("still running after 20 s: {log}"));
    assert_eq!(status.code(), Some(2), "{log}");
    assert!(
        log.contains("--phase-seconds 0.5 is shorter than the metrics interval"),
        "{log}"
    );
}

#[cfg(unix)]
#[test]
fn closed_stdout_is_an_error_exit_2_before_the_run() {
    // `serving_engine >&-`: the report would go nowhere (Rust reopens the
    // descriptor on /dev/null). The demo says so at once rather than run
    // for nothing; `> /dev/null` is a choice, and runs.
    let out = Command::new("sh")
        .args(["-c", r#"exec "$0" "$@" >&-"#, demo_binary()])
        .args([
            "--metrics-addr",
            "127.0.0.1:0",
            "--workers",
            "1",
            "--seconds",
            "5",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{log}");
    assert!(log.contains("standard output is closed"), "{log}");
    // Refused before anything runs (no listening line).
    assert!(!log.contains("metrics on http://"), "{log}");
    let out = Command::new("sh")
        .args(["-c", r#"exec "$0" "$@" > /dev/null"#, demo_binary()])
        .args([
            "--metrics-addr",
            "127.0.0.1:0",
            "--workers",
            "1",
            "--seconds",
            "1",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{log}");
}

/// Reads `stream` until the server closes it (end of file or reset);
/// panics if it is still open after `limit`. Returns what was read.
fn read_until_closed(stream: &mut TcpStream, limit: Duration) -> Vec<u8> {
    stream.set_read_timeout(Some(limit)).unwrap();
    let mut received = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return received,
            Ok(n) => received.extend_from_slice(&buf[..n]),
            // A signal to this process, not the server: read again.
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                panic!("the connection is still open {limit:?} after the last byte")
            }
            Err(_) => return received,
        }
    }
}

#[test]
fn a_client_that_never_reads_its_responses_is_disconnected() {
    // K = 64: a response is about 200 KB, so 300 pipelined requests ask
    // for 60 MB, more than the socket buffers of a loopback connection
    // hold: the server's writes block until the client reads.
    let mut demo = spawn(&[
        "--seconds",
        "120",
        "--max-draft-len",
        "64",
        "--connection-timeout-ms",
        "500",
    ]);
    let mut stderr = BufReader::new(demo.0.stderr.take().unwrap());
    let addr = metrics_addr(&first_line(&mut stderr));
    let _log = drain(stderr);

    const REQUESTS: usize = 300;
    let mut stream = TcpStream::connect(addr).unwrap();
    let writer = {
        let mut stream = stream.try_clone().unwrap();
        // Blocks once the server stops reading; fails once it closes.
        thread::spawn(move || {
            for _ in 0..REQUESTS {
                if stream
                    .write_all(b"GET /metrics HTTP/1.1\r\nHost: demo\r\n\r\n")
                    .is_err()
                {
                    return;
                }
            }
        })
    };
    // Longer than the connection's lifetime and its grace (2 x 500 ms).
    thread::sleep(Duration::from_secs(3));
    // A server that gave up has closed the connection: what the buffers
    // held, then the end. One that waited serves all 300 once we read.
    let received = read_until_closed(&mut stream, Duration::from_secs(20));
    let text = String::from_utf8_lossy(&received);
    let responses = text.matches("HTTP/1.1 200 OK").count();
    assert!(
        responses < REQUESTS,
        "the server kept the stalled connection: {responses} responses"
    );
    writer.join().unwrap();
    // The server still serves others.
    assert!(get_metrics(addr).starts_with("HTTP/1.1 200 OK"));
}

#[test]
fn connections_beyond_the_cap_wait_for_one_to_end() {
    let mut demo = spawn(&[
        "--seconds",
        "120",
        "--max-connections",
        "1",
        "--header-read-timeout-ms",
        "60000",
    ]);
    let mut stderr = BufReader::new(demo.0.stderr.take().unwrap());
    let addr = metrics_addr(&first_line(&mut stderr));
    let _log = drain(stderr);

    // The one connection allowed: served once (so it holds the slot, an
    // event rather than a guess at how long accepting takes), then idle.
    let mut first = TcpStream::connect(addr).unwrap();
    first
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: demo\r\n\r\n")
        .unwrap();
    first
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut head = [0u8; 15];
    first.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 200 OK");
    // A second one is not served while the first is open...
    let mut second = TcpStream::connect(addr).unwrap();
    second
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: demo\r\nConnection: close\r\n\r\n")
        .unwrap();
    second
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let mut buf = [0u8; 64];
    // A signal to this process (another test's child exiting) interrupts
    // the read: read again, as `read_exact` would.
    let read = loop {
        match second.read(&mut buf) {
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            other => break other,
        }
    };
    match read {
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
        other => panic!("served beyond the cap: {other:?}"),
    }
    // ...and is once the first ends.
    drop(first);
    let response =
        String::from_utf8_lossy(&read_until_closed(&mut second, Duration::from_secs(20)))
            .into_owned();
    assert!(response.starts_with("HTTP/1.1 200 OK"), "{response}");
}
