//! `advise --metrics/--prometheus/--vllm-log` on the real engines'
//! exposition formats, built from real measured profiles (each cited in
//! `cli/tests/fixtures/generate.py`, which writes the fixtures), against
//! Leviathan et al.'s formula; and every kind of bad input, from files and
//! from tiny HTTP servers on loopback (HTML, errors, slow and huge
//! answers), each bounded in time.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::thread;
use std::time::{Duration, Instant};

use assert_cmd::Command;
use serde_json::Value;
use specdec_metrics::{AcceptanceHistogram, SpecDecodeCollector, TextFormat};

fn bin() -> Command {
    let mut c = assert_cmd::cargo::cargo_bin_cmd!("specdec-metrics");
    c.timeout(Duration::from_secs(60));
    c
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// `advise ARGS`: standard output, standard error, exit status.
fn advise(args: &[&str]) -> (String, String, i32) {
    let out = bin().arg("advise").args(args).output().unwrap();
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
        out.status.code().unwrap_or(-1),
    )
}

/// The k in `0..=K` maximising `(1 + P_1 + ... + P_k) / (1 + c k)`
/// (Leviathan, Kalman and Matias 2023, with the profile's rates), and how
/// far the runner-up is behind (relative).
fn leviathan(p: &[f64], c: f64) -> (usize, f64) {
    let g: Vec<f64> = (0..=p.len())
        .map(|k| (1.0 + p[..k].iter().sum::<f64>()) / (1.0 + c * k as f64))
        .collect();
    let best = (0..g.len()).fold(0, |b, k| if g[k] > g[b] { k } else { b });
    let runner_up = (0..g.len())
        .filter(|&k| k != best)
        .map(|k| g[k])
        .fold(0.0, f64::max);
    (best, (g[best] - runner_up) / g[best])
}

/// The fixtures, their profile, and how they are read.
const PROFILES: &[(&str, &[f64], &str)] = &[
    (
        "vllm_llama31_8b_mtbench_k3.prom",
        &[0.7296, 0.5208, 0.3545],
        "--metrics",
    ),
    (
        "vllm_qwen3_vl_30b_mtbench_k3.prom",
        &[0.2900, 0.0620, 0.0115],
        "--metrics",
    ),
    (
        "vllm_qwen3_8b_code_k7.om",
        &[0.81, 0.59, 0.40, 0.26, 0.16, 0.08, 0.03],
        "--metrics",
    ),
    (
        "mistralrs_qwen3_8b_mtbench_k3.prom",
        &[0.6541, 0.3993, 0.2020],
        "--metrics",
    ),
    (
        "mistralrs_qwen3_8b_summarization_k7.prom",
        &[0.69, 0.42, 0.24, 0.11, 0.04, 0.02, 0.00],
        "--metrics",
    ),
    (
        "specdec_eagle3_llama31_8b_mtbench_k10.om",
        &[0.74, 0.54, 0.41, 0.30, 0.22, 0.16, 0.12, 0.08, 0.05, 0.02],
        "--metrics",
    ),
    (
        "vllm_llama31_8b_mtbench_k3.log",
        &[0.7296, 0.5208, 0.3545],
        "--vllm-log",
    ),
];

/// Step costs per draft token tried on every profile.
const COSTS: &[f64] = &[0.02, 0.05, 0.1, 0.2, 0.4, 1.0];

#[test]
fn advice_on_each_real_profile_is_leviathans_optimum() {
    let mut checked = 0;
    for &(file, p, flag) in PROFILES {
        for &c in COSTS {
            let (best, margin) = leviathan(p, c);
            let cost = format!("1,{c}");
            let path = fixture(file);
            let (out, err, code) = advise(&[flag, path.to_str().unwrap(), "--cost-linear", &cost]);
            assert_eq!(code, 0, "{file} c={c}: {err}");
            let v: Value = serde_json::from_str(&out).unwrap();
            let g = &v["groups"][0];
            assert_eq!(g["identified"], "exact", "{file}");
            let got = g["recommendation"]["draft_len"].as_u64().unwrap() as usize;
            // Rounding to whole counts moves goodputs by ~1e-5: only an
            // optimum clearer than that is a fair test.
            if margin > 1e-4 {
                assert_eq!(got, best, "{file}, c = {c}: advised {got}, formula {best}");
                checked += 1;
            }
            eprintln!("{file:45} c={c:<5} advised {got}  formula {best}  (margin {margin:.4})");
        }
    }
    assert!(checked >= 35, "only {checked} clear optima");
}

/// This crate's fixture is what the library's collector writes for 100,000
/// drafts of K = 10 with the profile of vLLM PR #26498 (MT-Bench): every
/// draft of K tokens, round(N P_a) - round(N P_(a+1)) accepting exactly a.
/// `SPECDEC_WRITE_FIXTURES=1` writes it.
#[test]
fn the_specdec_fixture_is_the_collectors_own_text() {
    let p = [0.74, 0.54, 0.41, 0.30, 0.22, 0.16, 0.12, 0.08, 0.05, 0.02];
    let n = 100_000.0_f64;
    let at_least = |a: usize| if a == 0 { n } else { (n * p[a - 1]).round() };
    let mut h = AcceptanceHistogram::new(10).unwrap();
    for a in 0..=10 {
        let exactly = at_least(a) - if a == 10 { 0.0 } else { at_least(a + 1) };
        for _ in 0..exactly as u64 {
            h.observe(10, a).unwrap();
        }
    }
    let text = SpecDecodeCollector::from_histogram(h)
        .with_prefix("spec_decode")
        .unwrap()
        .with_const_labels([("model_name", "meta-llama/Llama-3.1-8B-Instruct")])
        .unwrap()
        .encode_text(TextFormat::OpenMetrics);
    let path = fixture("specdec_eagle3_llama31_8b_mtbench_k10.om");
    if std::env::var_os("SPECDEC_WRITE_FIXTURES").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
}

#[test]
fn engines_groups_and_settings() {
    // Two engines of one model are summed into one group.
    let path = fixture("vllm_llama31_8b_mtbench_k3.prom");
    let (out, _, code) = advise(&[
        "--metrics",
        path.to_str().unwrap(),
        "--cost-linear",
        "1,0.1",
    ]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["engine"], "vllm");
    assert_eq!(v["groups"].as_array().unwrap().len(), 1);
    assert_eq!(
        v["groups"][0]["labels"]["model_name"],
        "meta-llama/Llama-3.1-8B-Instruct"
    );
    assert_eq!(v["groups"][0]["drafts"], 100_000);
    assert_eq!(v["groups"][0]["exact_because"], "same_length");
    assert!(
        v["groups"][0]["setting"]
            .as_str()
            .unwrap()
            .contains("\"num_speculative_tokens\": 3")
    );
    // Position 3 continues at 68%: a longer draft is extrapolated, labelled.
    assert_eq!(v["groups"][0]["extrapolation"]["draft_len"], 4);
    // --by engine: one group per engine.
    let (out, _, _) = advise(&[
        "--metrics",
        path.to_str().unwrap(),
        "--by",
        "engine",
        "--cost-linear",
        "1,0.1",
    ]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["groups"].as_array().unwrap().len(), 2);
    assert_eq!(v["groups"][1]["labels"]["engine"], "1");
    // mistral.rs: K from drafted tokens / drafts, lazily missing position 7.
    let path = fixture("mistralrs_qwen3_8b_summarization_k7.prom");
    let (out, _, code) = advise(&[
        "--metrics",
        path.to_str().unwrap(),
        "--cost-linear",
        "1,0.3",
        "--format",
        "table",
    ]);
    assert_eq!(code, 0);
    assert!(
        out.contains("== K = 7, 100,000 drafts; counts exact (every draft had K tokens) =="),
        "{out}"
    );
    assert!(out.contains("Set: mistral.rs: --mtp-n-predict 2"), "{out}");
    assert!(
        out.contains("Versus the current K = 7: drafting 2 is expected to give"),
        "{out}"
    );
    assert!(
        out.contains("Positions above K = 7 were never drafted"),
        "{out}"
    );
    // The log: counts within their stated precision.
    let path = fixture("vllm_llama31_8b_mtbench_k3.log");
    let (out, _, code) = advise(&[
        "--vllm-log",
        path.to_str().unwrap(),
        "--cost-linear",
        "1,0.1",
    ]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["reconstruction"]["lines"], 10);
    assert_eq!(v["reconstruction"]["max_count_error"], 100);
    let s1 = v["groups"][0]["recommendation"]["positions"][0]["successes"]
        .as_u64()
        .unwrap();
    assert!(s1.abs_diff(72_960) <= 100, "{s1}");
}

/// Writes `text` to a temporary file and advises on it.
/// `advise FLAG FILE --cost-linear 1,0.1 EXTRA...` on `text` written to a
/// temporary file named `file`.
fn advise_file(flag: &str, file: &str, text: &str, extra: &[&str]) -> (String, String, i32) {
    let dir = tempfile::TempDir::new().unwrap();
    let path = dir.path().join(file);
    std::fs::write(&path, text).unwrap();
    let mut args = vec![flag, path.to_str().unwrap(), "--cost-linear", "1,0.1"];
    args.extend_from_slice(extra);
    advise(&args)
}

fn advise_text(text: &str, extra: &[&str]) -> (String, String, i32) {
    advise_file("--metrics", "metrics.prom", text, extra)
}

/// A vLLM exposition with these values.
fn vllm(drafts: &str, tokens: &str, accepted: &str, per_pos: &[(&str, &str)]) -> String {
    let mut s = format!(
        "vllm:spec_decode_num_drafts_total{{model_name=\"m\"}} {drafts}\n\
         vllm:spec_decode_num_draft_tokens_total{{model_name=\"m\"}} {tokens}\n\
         vllm:spec_decode_num_accepted_tokens_total{{model_name=\"m\"}} {accepted}\n"
    );
    for (pos, v) in per_pos {
        s.push_str(&format!(
            "vllm:spec_decode_num_accepted_tokens_per_pos_total{{model_name=\"m\",position=\"{pos}\"}} {v}\n"
        ));
    }
    s
}

#[test]
fn bad_counters_are_errors_naming_the_series() {
    let cases: Vec<(String, &str)> = vec![
        (
            vllm("100", "300", "100", &[("0", "50"), ("2", "20")]),
            "vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"m\",position=\"1\"} is missing, though position 2 is there",
        ),
        (
            vllm("100", "300", "100", &[("0", "30"), ("1", "40"), ("2", "10")]),
            "vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"m\",position=\"1\"} is 40, above the 30 of vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"m\",position=\"0\"}",
        ),
        (
            vllm("100", "300", "100", &[("0", "NaN"), ("1", "40"), ("2", "10")]),
            "vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"m\",position=\"0\"} is NaN: a counter is a finite number >= 0",
        ),
        (
            vllm("+Inf", "300", "100", &[("0", "1")]),
            "vllm:spec_decode_num_drafts_total{model_name=\"m\"} is inf",
        ),
        (
            vllm("100", "-3", "100", &[("0", "1")]),
            "vllm:spec_decode_num_draft_tokens_total{model_name=\"m\"} is -3",
        ),
        (
            vllm("100", "300", "100", &[("0", "1.5")]),
            "is 1.5: a count is a whole number",
        ),
        (
            "vllm:spec_decode_num_drafts_total{model_name=\"m\"} 100\n\
             vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"m\",position=\"0\"} 5\n"
                .to_owned(),
            "vllm:spec_decode_num_draft_tokens_total{model_name=\"m\"} is missing",
        ),
        (
            "# TYPE vllm:spec_decode_num_drafts_total gauge\n".to_owned()
                + &vllm("100", "300", "100", &[("0", "1")]),
            "vllm:spec_decode_num_drafts_total is a gauge, not a counter",
        ),
        (
            vllm("100", "300", "301", &[("0", "1"), ("1", "1"), ("2", "1")]),
            "vllm:spec_decode_num_accepted_tokens_total{model_name=\"m\"} is 301, above the 300 of vllm:spec_decode_num_draft_tokens_total{model_name=\"m\"}",
        ),
        ("up 1\n".to_owned(), "no speculative-decoding counters found"),
        ("<html><body>Login</body></html>".to_owned(), "this is HTML"),
        (
            vllm("100", "300", "100", &[("0", "1")]) + "garbage line here\n",
            "line 5:",
        ),
    ];
    for (text, says) in cases {
        let (out, err, code) = advise_text(&text, &[]);
        assert_eq!(code, 2, "{text}\n{err}");
        assert_eq!(out, "");
        assert!(err.contains(says), "{text}\nwanted {says}\ngot {err}");
        assert!(err.starts_with("error: "), "{err}");
    }
}

#[test]
fn varying_draft_lengths_give_bounds_and_exit_status_3() {
    // 100 drafts, 250 tokens (not 300): lengths varied.
    let text = vllm(
        "100",
        "250",
        "120",
        &[("0", "60"), ("1", "40"), ("2", "20")],
    );
    let (out, err, code) = advise_text(&text, &[]);
    assert_eq!(code, 3, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["groups"][0]["identified"], "bounds");
    assert!(v["groups"][0]["recommendation"].is_null());
    assert_eq!(v["groups"][0]["bounds"][0]["trials_max"], 100);
    assert!(err.contains("not advised: the counters give bounds only"));
    let (out, _, code) = advise_text(&text, &["--format", "table"]);
    assert_eq!(code, 3);
    assert!(
        out.contains("NOT ADVISED") && out.contains("(bounds, not estimates)"),
        "{out}"
    );
}

#[test]
fn since_gives_the_counts_between_two_scrapes_and_refuses_a_reset() {
    let dir = tempfile::TempDir::new().unwrap();
    let before = dir.path().join("before.prom");
    let after = dir.path().join("after.prom");
    std::fs::write(
        &before,
        vllm(
            "1000",
            "3000",
            "1500",
            &[("0", "700"), ("1", "500"), ("2", "300")],
        ),
    )
    .unwrap();
    std::fs::write(
        &after,
        vllm(
            "3000",
            "9000",
            "3600",
            &[("0", "1900"), ("1", "1100"), ("2", "600")],
        ),
    )
    .unwrap();
    let (out, _, code) = advise(&[
        "--metrics",
        after.to_str().unwrap(),
        "--since",
        before.to_str().unwrap(),
        "--cost-linear",
        "1,0.1",
    ]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["groups"][0]["drafts"], 2000);
    assert_eq!(
        v["groups"][0]["recommendation"]["positions"][0]["successes"],
        1200
    );
    let (_, err, code) = advise(&[
        "--metrics",
        before.to_str().unwrap(),
        "--since",
        after.to_str().unwrap(),
        "--cost-linear",
        "1,0.1",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("the counter was reset"), "{err}");
    let other = fixture("mistralrs_qwen3_8b_mtbench_k3.prom");
    let (_, err, code) = advise(&[
        "--metrics",
        after.to_str().unwrap(),
        "--since",
        other.to_str().unwrap(),
        "--cost-linear",
        "1,0.1",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("not a scrape of the same engine"), "{err}");
}

/// A server on loopback that answers every connection with `respond`, for
/// at most `connections` connections; its URL.
fn serve(
    connections: usize,
    respond: impl Fn(&mut std::net::TcpStream) + Send + 'static,
) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for stream in listener.incoming().take(connections) {
            let Ok(mut stream) = stream else { return };
            stream.set_read_timeout(Some(Duration::from_secs(5))).ok();
            let mut buf = [0u8; 4096];
            let mut head = Vec::new();
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            respond(&mut stream);
        }
    });
    format!("http://{addr}")
}

fn answer(
    status: &str,
    content_type: &str,
    body: &'static str,
) -> impl Fn(&mut std::net::TcpStream) + Send + 'static {
    let status = status.to_owned();
    let content_type = content_type.to_owned();
    move |s| {
        let _ = write!(
            s,
            "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
    }
}

#[test]
fn http_sources_that_misbehave_are_errors_naming_the_source_and_nothing_hangs() {
    // HTML from a /metrics URL.
    let url = serve(
        1,
        answer("200 OK", "text/html; charset=utf-8", "<html>login</html>"),
    );
    let (_, err, code) = advise(&[
        "--metrics",
        &format!("{url}/metrics"),
        "--cost-linear",
        "1,0.1",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains(&format!("{url}/metrics: the answer is an HTML page")),
        "{err}"
    );
    // An error status.
    let url = serve(
        1,
        answer("503 Service Unavailable", "text/plain", "metrics disabled"),
    );
    let (_, err, code) = advise(&[
        "--metrics",
        &format!("{url}/metrics"),
        "--cost-linear",
        "1,0.1",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("HTTP status 503: \"metrics disabled\""),
        "{err}"
    );
    // Prometheus' JSON error.
    let url = serve(
        1,
        answer(
            "400 Bad Request",
            "application/json",
            r#"{"status":"error","errorType":"bad_data","error":"1:2: parse error: unexpected character"}"#,
        ),
    );
    let (_, err, code) = advise(&[
        "--prometheus",
        &url,
        "--window",
        "1h",
        "--cost-linear",
        "1,0.1",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("/api/v1/series: Prometheus answered an error (HTTP status 400): bad_data: \"1:2: parse error"), "{err}");
    // Not Prometheus at all.
    let url = serve(1, answer("200 OK", "text/html", "<html>Grafana</html>"));
    let (_, err, code) = advise(&[
        "--prometheus",
        &url,
        "--window",
        "1h",
        "--cost-linear",
        "1,0.1",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("not a Prometheus API answer"), "{err}");
    // A server that sends its headers and then one byte a second.
    let url = serve(1, |s| {
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\n"
        );
        for _ in 0..30 {
            if s.write_all(b"#").is_err() {
                return;
            }
            thread::sleep(Duration::from_millis(500));
        }
    });
    let start = Instant::now();
    let (_, err, code) = advise(&[
        "--metrics",
        &format!("{url}/metrics"),
        "--timeout",
        "1.5",
        "--cost-linear",
        "1,0.1",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("no complete response within --timeout 1.5 s"),
        "{err}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
    // A server that would send 1 GiB.
    let url = serve(1, |s| {
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1073741824\r\n\r\n"
        );
        let chunk = vec![b'#'; 1 << 16];
        for _ in 0..(1 << 14) {
            if s.write_all(&chunk).is_err() {
                return;
            }
        }
    });
    let start = Instant::now();
    let (_, err, code) = advise(&[
        "--metrics",
        &format!("{url}/metrics"),
        "--max-bytes",
        "1M",
        "--cost-linear",
        "1,0.1",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("the response is larger than --max-bytes 1 MiB"),
        "{err}"
    );
    assert!(start.elapsed() < Duration::from_secs(10));
    // Nobody listening.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (_, err, code) = advise(&[
        "--metrics",
        &format!("http://127.0.0.1:{port}/metrics"),
        "--timeout",
        "2",
        "--cost-linear",
        "1,0.1",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains(&format!("http://127.0.0.1:{port}/metrics: ")),
        "{err}"
    );
    // A file past --max-bytes.
    let (_, err, code) = advise_text(&"# x\n".repeat(1000), &["--max-bytes", "1K"]);
    assert_eq!(code, 2);
    assert!(err.contains("larger than --max-bytes 1 KiB"), "{err}");
}

#[test]
fn prometheus_answers_become_fleet_advice() {
    // A fake Prometheus: the series endpoint, then one answer per query
    // (drafts, draft tokens, accepted, per position), by model.
    let answers: Vec<&'static str> = vec![
        r#"{"status":"success","data":[{"__name__":"vllm:spec_decode_num_drafts_total"},{"__name__":"vllm:spec_decode_num_accepted_tokens_per_pos_total"}]}"#,
        r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"model_name":"a"},"value":[1,"1000.4"]},{"metric":{"model_name":"b"},"value":[1,"500"]}]}}"#,
        r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"model_name":"a"},"value":[1,"2003.2"]},{"metric":{"model_name":"b"},"value":[1,"1000"]}]}}"#,
        r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"model_name":"a"},"value":[1,"1300"]},{"metric":{"model_name":"b"},"value":[1,"300"]}]}}"#,
        r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"model_name":"a","position":"0"},"value":[1,"800.2"]},{"metric":{"model_name":"a","position":"1"},"value":[1,"500"]},{"metric":{"model_name":"b","position":"0"},"value":[1,"200"]},{"metric":{"model_name":"b","position":"1"},"value":[1,"100"]}]}}"#,
    ];
    let answers = std::sync::Mutex::new(answers.into_iter());
    let url = serve(5, move |s| {
        let body = answers.lock().unwrap().next().unwrap_or("{}");
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
    });
    let (out, err, code) = advise(&[
        "--prometheus",
        &url,
        "--window",
        "1h",
        "--at",
        "1700000000",
        "--cost-linear",
        "1,0.1",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let groups = v["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[0]["labels"]["model_name"], "a");
    // 2003 draft tokens is within increase()'s slack of 1000 x 2: noted.
    assert_eq!(groups[0]["exact_because"], "same_length");
    assert!(
        groups[0]["notes"][0]
            .as_str()
            .unwrap()
            .contains("extrapolation slack"),
        "{}",
        groups[0]["notes"]
    );
    assert_eq!(groups[1]["recommendation"]["positions"][1]["trials"], 200);
    assert!(
        v["source"]
            .as_str()
            .unwrap()
            .contains("increase() over 1h ending at 1700000000.000")
    );
}

/// Two vLLM engines of one model, as one scrape gives them.
fn two_engines(cut_engine_1_positions: bool, accepted_0: &str) -> String {
    let mut s = String::new();
    for (e, drafts, acc, per_pos) in [
        ("0", 100, accepted_0, [40, 20, 10]),
        ("1", 100, "70", [40, 20, 10]),
    ] {
        let l = format!("engine=\"{e}\",model_name=\"m\"");
        s += &format!("vllm:spec_decode_num_drafts_total{{{l}}} {drafts}\n");
        s += &format!("vllm:spec_decode_num_draft_tokens_total{{{l}}} 300\n");
        s += &format!("vllm:spec_decode_num_accepted_tokens_total{{{l}}} {acc}\n");
        if e == "1" && cut_engine_1_positions {
            continue;
        }
        for (p, v) in per_pos.iter().enumerate() {
            s += &format!(
                "vllm:spec_decode_num_accepted_tokens_per_pos_total{{{l},position=\"{p}\"}} {v}\n"
            );
        }
    }
    s
}

/// A scrape cut before one engine's per-position series (an HTTP/1.0
/// close-delimited body, a partial copy) is not read as exact counts with
/// that engine's drafts as trials without acceptances; an accepted total
/// other than the positions' sum is an error naming it.
#[test]
fn a_scrape_missing_an_engines_positions_or_disagreeing_totals_is_an_error() {
    let (out, err, code) = advise_text(&two_engines(false, "70"), &[]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["groups"][0]["identified"], "exact");
    let (out, err, code) = advise_text(&two_engines(true, "70"), &[]);
    assert_eq!((out.as_str(), code), ("", 2), "{err}");
    assert!(
        err.contains(
            "vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"1\",model_name=\"m\",position=\"0\"} is missing, though vllm:spec_decode_num_drafts_total{engine=\"1\",model_name=\"m\"} is 100"
        ),
        "{err}"
    );
    let (out, err, code) = advise_text(&two_engines(false, "80"), &[]);
    assert_eq!((out.as_str(), code), ("", 2), "{err}");
    assert!(err.contains("add up to 140"), "{err}");
    // One engine, accepted total 2,900 against positions 1,500.
    let text = vllm(
        "1000",
        "3000",
        "2900",
        &[("0", "700"), ("1", "500"), ("2", "300")],
    );
    let (_, err, code) = advise_text(&text, &[]);
    assert_eq!(code, 2);
    assert!(
        err.contains("vllm:spec_decode_num_accepted_tokens_total{model_name=\"m\"} is 2900 but the accepted counts per position")
            && err.contains("add up to 1500"),
        "{err}"
    );
}

const VLLM_OK: &str = "vllm:spec_decode_num_drafts_total{model_name=\"m\"} 100\n\
vllm:spec_decode_num_draft_tokens_total{model_name=\"m\"} 200\n\
vllm:spec_decode_num_accepted_tokens_total{model_name=\"m\"} 90\n\
vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"m\",position=\"0\"} 60\n\
vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"m\",position=\"1\"} 30\n";

/// A password in a URL's userinfo is never printed: not in the JSON
/// `source`, the table, nor any error (an HTTP error status, a refused
/// connection, a Prometheus that answers garbage).
#[test]
fn a_password_in_the_url_is_never_printed() {
    let with_password = |url: &str| url.replacen("http://", "http://user:s3cr3t@", 1);
    let mut outputs = Vec::new();
    for format in ["json", "table"] {
        let url = serve(1, answer("200 OK", "text/plain", VLLM_OK));
        let (out, err, code) = advise(&[
            "--metrics",
            &with_password(&format!("{url}/metrics")),
            "--cost-linear",
            "1,0.1",
            "--format",
            format,
        ]);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("http://***@127.0.0.1"), "{out}");
        outputs.push(out + &err);
    }
    let url = serve(1, answer("500 Internal Server Error", "text/plain", "boom"));
    outputs.push(advise(&["--metrics", &with_password(&url), "--cost-linear", "1,0.1"]).1);
    let url = serve(1, answer("200 OK", "application/json", "not json"));
    outputs.push(
        advise(&[
            "--prometheus",
            &with_password(&url),
            "--window",
            "1h",
            "--cost-linear",
            "1,0.1",
        ])
        .1,
    );
    // Nothing listens there: the connection is refused.
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    outputs.push(
        advise(&[
            "--metrics",
            &format!("http://user:s3cr3t@{closed}/metrics"),
            "--cost-linear",
            "1,0.1",
        ])
        .1,
    );
    for o in &outputs {
        assert!(!o.contains("s3cr3t") && !o.contains("user:"), "{o}");
    }
    assert!(
        outputs[2].contains("http://***@127.0.0.1") && outputs[2].contains("HTTP status 500"),
        "{}",
        outputs[2]
    );
}

/// Label values holding terminal controls or bidi overrides reach the
/// terminal escaped: in the table's group header, in the JSON and in the
/// warnings (here: too few drafts), as in errors.
#[test]
fn control_and_bidi_characters_in_labels_never_reach_the_terminal() {
    for model in ["\u{1b}]0;pwn\u{7}", "abc\u{202e}fed", "x\u{9b}31m"] {
        let text = VLLM_OK.replace("model_name=\"m\"", &format!("model_name=\"{model}\""));
        for format in ["table", "json"] {
            let (out, err, code) = advise_text(&text, &["--format", format]);
            assert_eq!(code, 0, "{err}");
            for o in [&out, &err] {
                assert!(
                    !o.chars()
                        .any(|c| (c.is_control() && c != '\n') || c == '\u{202e}'),
                    "{o:?}"
                );
            }
            assert!(err.contains("warning: model_name="), "{err}");
            if format == "json" {
                // The same string, escaped: the JSON still holds the value.
                let v: Value = serde_json::from_str(&out).unwrap();
                assert_eq!(v["groups"][0]["labels"]["model_name"], model);
            } else {
                assert!(out.contains("== model_name=\""), "{out}");
            }
        }
    }
}

/// `--since` on the same live URL as `--metrics` is the earlier scrape: it
/// is fetched first, so the counts between the two are the growth, not a
/// reset. `--metrics - --since -` is refused before anything is read.
#[test]
fn since_on_the_same_live_url_is_fetched_first_and_stdin_is_read_once() {
    let scrapes = std::sync::atomic::AtomicU64::new(0);
    let url = serve(2, move |s| {
        // Relaxed: one server thread; the count only orders its answers.
        let n = scrapes.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let body = vllm(
            &(1000 * n).to_string(),
            &(3000 * n).to_string(),
            &(1500 * n).to_string(),
            &[
                ("0", &(700 * n).to_string()),
                ("1", &(500 * n).to_string()),
                ("2", &(300 * n).to_string()),
            ],
        );
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
    });
    let url = format!("{url}/metrics");
    let (out, err, code) = advise(&["--metrics", &url, "--since", &url, "--cost-linear", "1,0.1"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["groups"][0]["drafts"], 1000);
    assert_eq!(
        v["groups"][0]["recommendation"]["positions"][0]["successes"],
        700
    );

    let out = bin()
        .args([
            "advise",
            "--metrics",
            "-",
            "--since",
            "-",
            "--cost-linear",
            "1,0.1",
        ])
        .write_stdin(vllm("1", "3", "0", &[("0", "0"), ("1", "0"), ("2", "0")]))
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--metrics - and --since - both read standard input")
            && !err.contains("reading"),
        "{err}"
    );
}

/// `advise ARGS` with `stdin` on standard input.
fn advise_stdin(args: &[&str], stdin: Vec<u8>) -> (String, String, i32) {
    let out = bin()
        .arg("advise")
        .args(args)
        .write_stdin(stdin)
        .output()
        .unwrap();
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
        out.status.code().unwrap_or(-1),
    )
}

/// The messages say what is wrong and where: which source holds a NaN,
/// a huge value in scientific notation, why 2^64 - 1 cannot be read, why
/// text that looks like OpenMetrics was not read as such, that a body is
/// gzip; a way to pick one of two prefixes; that `position` is an index
/// label. `--vllm-log -` reads standard input, colour codes and all.
#[test]
fn messages_name_the_source_the_reason_and_the_way_out() {
    let cost = ["--cost-linear", "1,0.1"];
    let dir = tempfile::TempDir::new().unwrap();
    let file = |name: &str, body: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, body).unwrap();
        p.to_str().unwrap().to_owned()
    };
    // A NaN in the --since scrape: named as there.
    let now = file("now.prom", VLLM_OK.as_bytes());
    let then = file("then.prom", VLLM_OK.replace("} 60\n", "} NaN\n").as_bytes());
    let (_, err, code) = advise(&[&["--metrics", &now, "--since", &then], &cost[..]].concat());
    assert_eq!(code, 2);
    assert!(
        err.contains(&format!("--since {then}: ")) && err.contains("is NaN"),
        "{err}"
    );
    // 1e308 and u64::MAX.
    let huge = file(
        "huge.prom",
        VLLM_OK.replace("} 100\n", "} 1e308\n").as_bytes(),
    );
    let (_, err, _) = advise(&[&["--metrics", &huge], &cost[..]].concat());
    assert!(
        err.contains("is 1e308: a count") || err.contains("is 1e308:"),
        "{err}"
    );
    assert!(!err.contains("00000000000000000000"), "{err}");
    let max = file(
        "max.prom",
        VLLM_OK
            .replace("} 100\n", "} 18446744073709551615\n")
            .as_bytes(),
    );
    let (_, err, _) = advise(&[&["--metrics", &max], &cost[..]].concat());
    assert!(err.contains("values are 64-bit floats"), "{err}");
    // OpenMetrics that is not quite: a blank line after # EOF, CRLF, no
    // # EOF (each with an exemplar, which the classic format lacks).
    let om = VLLM_OK.replace("} 60\n", "} 60 # {trace_id=\"a\"} 1\n") + "# EOF\n";
    for (body, says) in [
        (om.clone() + "\n", "is followed by 1 more line (blank)"),
        (om.replace('\n', "\r\n"), "its lines end in CRLF"),
        (om.replace("# EOF\n", ""), "it has no # EOF line"),
    ] {
        let (_, err, code) =
            advise(&[&["--metrics", &file("om.prom", body.as_bytes())], &cost[..]].concat());
        assert_eq!(code, 2);
        assert!(
            err.contains("not OpenMetrics: ") && err.contains(says),
            "{err}"
        );
    }
    // A gzip body.
    let gz = file(
        "m.prom.gz",
        &[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 0xff, 0xfe],
    );
    let (_, err, _) = advise(&[&["--metrics", &gz], &cost[..]].concat());
    assert!(
        err.contains("gzip-compressed") && !err.contains("not UTF-8"),
        "{err}"
    );
    // Two prefixes: --prefix picks one.
    let two = file(
        "two.prom",
        (VLLM_OK.to_owned() + &VLLM_OK.replace("vllm:spec_decode", "other:spec_decode")).as_bytes(),
    );
    let (_, err, code) = advise(&[&["--metrics", &two], &cost[..]].concat());
    assert_eq!(code, 2);
    assert!(
        err.contains("pick one with --prefix PREFIX") && err.contains("\"other:spec_decode\""),
        "{err}"
    );
    let (out, err, code) = advise(
        &[
            &["--metrics", &two, "--prefix", "other:spec_decode"],
            &cost[..],
        ]
        .concat(),
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"prefix\":\"other:spec_decode\""), "{out}");
    let (_, err, code) = advise(&[&["--metrics", &two, "--prefix", "nope"], &cost[..]].concat());
    assert_eq!(code, 2);
    assert!(err.contains("--prefix \"nope\": no such prefix"), "{err}");
    // --by position.
    let (_, err, code) = advise(&[&["--metrics", &now, "--by", "position"], &cost[..]].concat());
    assert_eq!(code, 2);
    assert!(
        err.contains("--by position: position is an index label"),
        "{err}"
    );
    // vLLM's log on standard input, plain and in colour: the same advice.
    let log = std::fs::read_to_string(fixture("vllm_llama31_8b_mtbench_k3.log")).unwrap();
    let coloured: String = log
        .lines()
        .map(|l| format!("\u{1b}[32mINFO\u{1b}[0m \u{1b}[1;36m{l}\u{1b}[0m\n"))
        .collect();
    let (plain, err, code) = advise_stdin(
        &[&["--vllm-log", "-"], &cost[..]].concat(),
        log.into_bytes(),
    );
    assert_eq!(code, 0, "{err}");
    let (colour, err, code) = advise_stdin(
        &[&["--vllm-log", "-"], &cost[..]].concat(),
        coloured.into_bytes(),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(plain, colour);
    assert!(plain.contains("\"source\":\"<stdin>\""), "{plain}");
}

/// `--selector` is label matchers and nothing else, `--window` a duration
/// Prometheus accepts, `--at` a time it can hold: anything else is refused
/// before a request is sent (nothing listens at the URL).
#[test]
fn selectors_windows_and_times_prometheus_would_reject_are_never_sent() {
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let url = format!("http://{closed}");
    for (flags, says) in [
        (
            vec![
                "--window",
                "1h",
                "--selector",
                r#"{job="a"}) or vector(1) or (x{y="z"}"#,
            ],
            "--selector",
        ),
        (vec!["--window", "30m1h"], "largest first"),
        (vec!["--window", "99999999999999999999y"], "out of range"),
        (vec!["--window", "1h", "--at", "1e300"], "--at \"1e300\""),
    ] {
        let (out, err, code) = advise(
            &[
                &["--prometheus", &url, "--cost-linear", "1,0.1"],
                &flags[..],
            ]
            .concat(),
        );
        assert_eq!((out.as_str(), code), ("", 2), "{flags:?}: {err}");
        assert!(
            err.contains(says) && !err.contains("onnect"),
            "{flags:?}: {err}"
        );
    }
}

/// A fake Prometheus answering `answers` in turn, one per connection.
fn fake_prometheus(answers: Vec<String>) -> String {
    let n = answers.len();
    let answers = std::sync::Mutex::new(answers.into_iter());
    serve(n, move |s| {
        let body = answers.lock().unwrap().next().unwrap_or_default();
        let _ = write!(
            s,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
    })
}

/// The answers of a Prometheus for one model: drafts 1000, tokens 2000,
/// accepted 900 (600 and 300); `warning` in the per-position answer.
fn prometheus_answers(warning: Option<&str>) -> Vec<String> {
    let vector = |result: &str, extra: &str| {
        format!(
            r#"{{"status":"success","data":{{"resultType":"vector","result":[{result}]}}{extra}}}"#
        )
    };
    let one = |v: &str| {
        vector(
            &format!(r#"{{"metric":{{"model_name":"a"}},"value":[1,"{v}"]}}"#),
            "",
        )
    };
    let extra = warning.map_or(String::new(), |w| format!(r#","warnings":["{w}"]"#));
    vec![
        r#"{"status":"success","data":[{"__name__":"vllm:spec_decode_num_drafts_total"},{"__name__":"vllm:spec_decode_num_accepted_tokens_per_pos_total"}]}"#.to_owned(),
        one("1000"),
        one("2000"),
        one("900"),
        vector(
            r#"{"metric":{"model_name":"a","position":"0"},"value":[1,"600"]},{"metric":{"model_name":"a","position":"1"},"value":[1,"300"]}"#,
            &extra,
        ),
    ]
}

/// Thanos and Mimir send `warnings` with a partial response: the advice
/// says its data may be partial, in the JSON and the table, quoting them.
#[test]
fn prometheus_warnings_of_a_partial_response_reach_the_advice() {
    let args = |url: &str, format: &str| {
        advise(&[
            "--prometheus",
            url,
            "--window",
            "1h",
            "--at",
            "1700000000",
            "--cost-linear",
            "1,0.1",
            "--format",
            format,
        ])
    };
    let (out, err, code) = args(&fake_prometheus(prometheus_answers(None)), "json");
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("PARTIAL"), "{out}");
    let w = "partial response: store eu-1 unavailable";
    let (out, err, code) = args(&fake_prometheus(prometheus_answers(Some(w))), "json");
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let notes = v["groups"][0]["notes"].as_array().unwrap();
    assert!(
        notes[0].as_str().unwrap().starts_with("PARTIAL DATA?"),
        "{notes:?}"
    );
    assert!(
        notes.iter().any(|n| n.as_str().unwrap().contains(w)),
        "{notes:?}"
    );
    let (out, _, code) = args(&fake_prometheus(prometheus_answers(Some(w))), "table");
    assert_eq!(code, 0);
    assert!(
        out.contains("note: PARTIAL DATA?") && out.contains(w),
        "{out}"
    );
}

/// Counts reconstructed from vLLM's log are known only to the rounding of
/// its rates (±0.001 of each P_i), however many drafts: with 10^8 drafts
/// the intervals are far narrower than that, and the table says they
/// exclude it, by how much; the JSON says so too.
#[test]
fn reconstructed_intervals_say_they_exclude_the_reconstruction_error() {
    let line = "INFO [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 2.50, Accepted throughput: 1.00 tokens/s, Drafted throughput: 1.00 tokens/s, Accepted: 150000000 tokens, Drafted: 300000000 tokens, Per-position acceptance rate: 0.700, 0.500, 0.300, Avg Draft acceptance rate: 50.0%\n";
    let args = |format: &str| {
        advise_stdin(
            &[
                "--vllm-log",
                "-",
                "--cost-linear",
                "1,0.1",
                "--format",
                format,
            ],
            line.as_bytes().to_vec(),
        )
    };
    let (out, err, code) = args("table");
    assert_eq!(code, 0, "{err}");
    let at = out
        .find("The intervals EXCLUDE the reconstruction error")
        .unwrap_or_else(|| panic!("{out}"));
    let said = &out[at..];
    assert!(said.contains("known only to ±0.00100"), "{said}");
    // 1.645 sqrt(0.7 * 0.3 / 1e8) = 0.0000754 at position 1, narrower
    // still further on: the error is more than 10 times the half-width.
    let times: f64 = said
        .split("±0.00100, ")
        .nth(1)
        .and_then(|s| s.split(" times").next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{said}"));
    assert!(times > 10.0, "{said}");
    let (out, err, code) = args("json");
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["reconstruction"]["intervals_exclude_reconstruction_error"],
        true
    );
}

/// An answer of `n` samples, each its own `model_name`.
fn many_samples(n: usize, position: bool) -> String {
    let mut s = String::from(r#"{"status":"success","data":{"resultType":"vector","result":["#);
    for i in 0..n {
        if i > 0 {
            s.push(',');
        }
        let pos = if position { r#","position":"0""# } else { "" };
        s.push_str(&format!(
            r#"{{"metric":{{"model_name":"m{i}"{pos}}},"value":[1,"10"]}}"#
        ));
    }
    s + "]}}"
}

/// A Prometheus answer of more series than advice needs is refused while
/// it is read (its memory bounded), and more groups than one run advises
/// are refused before advising any, each with a way to narrow the query.
#[test]
fn huge_prometheus_answers_are_refused_with_a_way_to_narrow_them() {
    let series = r#"{"status":"success","data":[{"__name__":"vllm:spec_decode_num_drafts_total"},{"__name__":"vllm:spec_decode_num_accepted_tokens_per_pos_total"}]}"#.to_owned();
    let args = |url: &str| {
        advise(&[
            "--prometheus",
            url,
            "--window",
            "1h",
            "--at",
            "1700000000",
            "--cost-linear",
            "1,0.1",
        ])
    };
    let url = fake_prometheus(vec![series.clone(), many_samples(100_001, false)]);
    let (out, err, code) = args(&url);
    assert_eq!((out.as_str(), code), ("", 2), "{err}");
    assert!(
        err.contains("has more than 100,000 series") && err.contains("--selector"),
        "{err}"
    );
    // 1,001 models: within the series cap, above the groups one run advises.
    let url = fake_prometheus(vec![
        series,
        many_samples(1001, false),
        many_samples(1001, false),
        many_samples(1001, false),
        many_samples(1001, true),
    ]);
    let (out, err, code) = args(&url);
    assert_eq!((out.as_str(), code), ("", 2), "{err}");
    assert!(
        err.contains("1,001 groups (values of --by model_name), more than the 1,000"),
        "{err}"
    );
}

/// llama.cpp's server (llama.cpp PR #26389) as its `/metrics` handler
/// writes it: vLLM's four counters under `llamacpp:`, no labels, the
/// per-position series only once reached.
fn llamacpp(drafts: u64, tokens: u64, accepted: u64, per_pos: &[(usize, u64)]) -> String {
    let mut t = String::new();
    for (name, help, v) in [
        (
            "spec_decode_num_drafts_total",
            "Number of draft verification steps.",
            drafts,
        ),
        (
            "spec_decode_num_draft_tokens_total",
            "Total draft tokens generated.",
            tokens,
        ),
        (
            "spec_decode_num_accepted_tokens_total",
            "Total draft tokens accepted.",
            accepted,
        ),
    ] {
        t += &format!(
            "# HELP llamacpp:{name} {help}\n# TYPE llamacpp:{name} counter\nllamacpp:{name} {v}\n"
        );
    }
    t += "# HELP llamacpp:spec_decode_num_accepted_tokens_per_pos_total Accepted draft tokens per position.\n";
    t += "# TYPE llamacpp:spec_decode_num_accepted_tokens_per_pos_total counter\n";
    for (p, v) in per_pos {
        t += &format!(
            "llamacpp:spec_decode_num_accepted_tokens_per_pos_total{{position=\"{p}\"}} {v}\n"
        );
    }
    t += "# HELP llamacpp:n_decode_total Total number of llama_decode() calls\n# TYPE llamacpp:n_decode_total counter\nllamacpp:n_decode_total 4242\n";
    t
}

#[test]
fn llamacpp_counters_are_advised_with_its_own_flag() {
    // Every draft had 3 tokens: exact.
    let text = llamacpp(1000, 3000, 1500, &[(0, 700), (1, 500), (2, 300)]);
    let (out, err, code) = advise_text(&text, &["--format", "table"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("llama.cpp"), "{out}");
    assert!(out.contains("--spec-draft-n-max"), "{out}");
    assert!(out.contains("counts exact"), "{out}");
    // K from the highest position exported, said in a note.
    let (out, _, _) = advise_text(&text, &[]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["groups"][0]["max_draft_len"], 3, "{out}");
    assert!(out.contains("the highest position exported is 2"), "{out}");
    // Drafts shorter than K (p-min, n-gram matches): bounds.
    let text = llamacpp(1000, 2500, 1500, &[(0, 700), (1, 500), (2, 300)]);
    let (out, err, code) = advise_text(&text, &[]);
    assert_eq!(code, 3, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["groups"][0]["identified"], "bounds");
    // A position not reached yet reads 0; given K, it is there as 0.
    let text = llamacpp(1000, 3000, 1200, &[(0, 700), (1, 500)]);
    let (out, err, code) = advise_text(&text, &["--max-draft-len", "3"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["groups"][0]["recommendation"]["positions"][2]["successes"],
        0
    );
    // The accepted total is still the positions' sum.
    let text = llamacpp(1000, 3000, 1600, &[(0, 700), (1, 500), (2, 300)]);
    let (out, err, code) = advise_text(&text, &[]);
    assert_eq!((out.as_str(), code), ("", 2));
    assert!(
        err.contains("llamacpp:spec_decode_num_accepted_tokens_total"),
        "{err}"
    );
    // Drafts but no per-position series: cut.
    let text = llamacpp(1000, 3000, 0, &[]);
    let (_, err, code) = advise_text(&text, &[]);
    assert_eq!(code, 2);
    assert!(err.contains("cut or partial"), "{err}");
}

#[test]
fn an_older_llamacpp_and_sglang_gauges_are_refused_with_what_to_do() {
    let text = "# TYPE llamacpp:n_decode_total counter\nllamacpp:n_decode_total 10\n# TYPE llamacpp:tokens_predicted_total counter\nllamacpp:tokens_predicted_total 99\n";
    let (out, err, code) = advise_text(text, &[]);
    assert_eq!((out.as_str(), code), ("", 2));
    assert!(
        err.contains("older llama.cpp") && err.contains("#26389"),
        "{err}"
    );
    let text = "# TYPE sglang:spec_accept_length gauge\nsglang:spec_accept_length{model_name=\"m\"} 3.1\n# TYPE sglang:spec_accept_rate gauge\nsglang:spec_accept_rate{model_name=\"m\"} 0.7\n";
    let (out, err, code) = advise_text(text, &[]);
    assert_eq!((out.as_str(), code), ("", 2));
    assert!(
        err.contains("means") && err.contains("meta_info") && err.contains("--responses"),
        "{err}"
    );
    let (_, err, code) = advise_text(text, &["--engine", "sglang"]);
    assert_eq!(code, 2);
    assert!(err.contains("--engine sglang"), "{err}");
}

/// TensorRT-LLM's `MetricsCollector` as prometheus_client writes it: the
/// per-position drafted and accepted counters (`token_position` from 0,
/// a series only once positive) and the iteration totals.
fn trtllm(drafted: &[u64], accepted: &[u64], totals: Option<(u64, u64)>) -> String {
    let labels = "engine_type=\"trtllm\",model_name=\"m\"";
    let mut t = String::new();
    for (family, counts) in [("drafted", drafted), ("accepted", accepted)] {
        t += &format!(
            "# HELP trtllm_spec_decode_{family}_tokens_total Total {family} tokens per speculative decoding position.\n# TYPE trtllm_spec_decode_{family}_tokens counter\n"
        );
        for (p, &n) in counts.iter().enumerate().filter(|(_, n)| **n > 0) {
            t += &format!(
                "trtllm_spec_decode_{family}_tokens_total{{{labels},token_position=\"{p}\"}} {n}.0\n"
            );
            t += &format!(
                "trtllm_spec_decode_{family}_tokens_created{{{labels},token_position=\"{p}\"}} 1.7e9\n"
            );
        }
    }
    if let Some((d, a)) = totals {
        t += &format!(
            "# TYPE trtllm_spec_decode_num_draft_tokens counter\ntrtllm_spec_decode_num_draft_tokens_total{{{labels}}} {d}.0\n"
        );
        t += &format!(
            "# TYPE trtllm_spec_decode_num_accepted_tokens counter\ntrtllm_spec_decode_num_accepted_tokens_total{{{labels}}} {a}.0\n"
        );
    }
    t
}

#[test]
fn trtllm_per_position_drafted_and_accepted_identify_what_they_can() {
    // Every draft 3 long: exact, drafts = drafted at position 0.
    let text = trtllm(&[1000, 1000, 1000], &[700, 500, 300], Some((3000, 1500)));
    let (out, err, code) = advise_text(&text, &["--format", "table"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("TensorRT-LLM") && out.contains("max_draft_len: 3"),
        "{out}"
    );
    assert!(out.contains("1,000 drafts"), "{out}");
    // Drafts of varying length (1000 reached position 0, 600 position 2):
    // bounds, and the trials at position 3 are at most the drafts there.
    let text = trtllm(&[1000, 800, 600], &[700, 500, 300], None);
    let (out, err, code) = advise_text(&text, &[]);
    assert_eq!(code, 3, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["groups"][0]["identified"], "bounds");
    assert_eq!(v["groups"][0]["bounds"][2]["trials_max"], 500);
    assert_eq!(v["groups"][0]["bounds"][0]["trials_max"], 1000);
    // Iteration totals that differ from the per-position sums: a note.
    let text = trtllm(&[1000, 1000, 1000], &[700, 500, 300], Some((3300, 1650)));
    let (out, err, code) = advise_text(&text, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("the per-position counters are used"), "{out}");
    // A position whose accepted count passes its drafted count: refused.
    let text = trtllm(&[1000, 400, 300], &[700, 500, 300], None);
    let (out, err, code) = advise_text(&text, &[]);
    assert_eq!((out.as_str(), code), ("", 2));
    assert!(err.contains("token_position"), "{err}");
}

#[test]
fn trtllm_drafted_tokens_rising_with_the_position_and_huge_positions_are_named() {
    // Drafted tokens cannot rise with the position (a draft reaching
    // position 1 reached position 0): refused, naming the series the
    // scrape has, not the iteration totals it lacks.
    let text = trtllm(&[1000, 1200, 1000], &[700, 500, 300], None);
    let (out, err, code) = advise_text(&text, &[]);
    assert_eq!((out.as_str(), code), ("", 2), "{err}");
    assert!(!err.contains("num_draft_tokens"), "{err}");
    assert!(
        err.contains("trtllm_spec_decode_drafted_tokens_total")
            && err.contains("token_position=\"1\""),
        "{err}"
    );
    // A position past the largest K: "above 63", not "not an index".
    let text =
        trtllm(&[1000], &[700], None).replace("token_position=\"0\"", "token_position=\"100000\"");
    let (out, err, code) = advise_text(&text, &[]);
    assert_eq!((out.as_str(), code), ("", 2), "{err}");
    assert!(
        !err.contains("not an index") && err.contains("above 63"),
        "{err}"
    );
}

/// A vLLM response (`--per-request-spec-decode-metrics summary`) with its
/// derived figures computed as vLLM computes them.
fn vllm_response(id: &str, k: usize, by_accepted: &[u64], drafted: u64) -> String {
    let steps: u64 = by_accepted.iter().sum();
    let accepted: u64 = by_accepted
        .iter()
        .enumerate()
        .map(|(j, &n)| j as u64 * n)
        .sum();
    let spec = serde_json::json!({
        "mean_acceptance_length": 1.0 + accepted as f64 / steps as f64,
        "draft_acceptance_rate": accepted as f64 / drafted as f64,
        "acceptance_histogram": by_accepted,
        "num_spec_steps": steps,
        "num_accepted_draft_tokens": accepted,
        "num_draft_tokens": drafted,
        "num_spec_tokens": k,
    });
    serde_json::json!({"id": id, "model": "m", "choices": [], "metrics": {"speculative_decoding": spec}})
        .to_string()
}

fn advise_responses(text: &str, extra: &[&str]) -> (String, String, i32) {
    advise_file("--responses", "responses.jsonl", text, extra)
}

#[test]
fn vllm_responses_pool_into_exact_counts_and_spread_by_request() {
    // Two requests of K = 3, every draft 3 long; one streamed (chunks
    // before the last carry no figures).
    let text = format!(
        "{}\ndata: {{\"id\":\"r2\",\"choices\":[{{\"delta\":{{}}}}]}}\ndata: {}\ndata: [DONE]\n\n",
        vllm_response("r1", 3, &[39, 1, 0, 3], 129),
        vllm_response("r2", 3, &[1, 2, 3, 14], 60)
    );
    let (out, err, code) = advise_responses(&text, &["--by-request"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let g = &v["groups"][0];
    assert_eq!(g["labels"]["model"], "m");
    assert_eq!(g["drafts"], 63);
    assert_eq!(g["identified"], "exact");
    // Position 1: 63 trials, 23 accepted (1 + 3 + 2 + 3 + 14); position 2:
    // 23 trials, 20 accepted.
    let p = &g["recommendation"]["positions"];
    assert_eq!(
        (p[0]["trials"].as_u64(), p[0]["successes"].as_u64()),
        (Some(63), Some(23))
    );
    assert_eq!(
        (p[1]["trials"].as_u64(), p[1]["successes"].as_u64()),
        (Some(23), Some(20))
    );
    assert!(
        out.contains("1 line without per-request figures skipped"),
        "{out}"
    );
    let requests = v["requests"].as_array().unwrap();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1]["id"], "r2");
    assert_eq!(requests[1]["mean_acceptance_length"], 3.5);
    let (out, _, _) = advise_responses(&text, &["--by-request", "--format", "table"]);
    assert!(
        out.contains("median 1.23") && out.contains("max 3.50"),
        "{out}"
    );
    // Exact because of the responses' histograms, not a Prometheus family.
    assert!(
        out.contains("== model=\"m\": K = 3, 63 drafts; counts exact (the responses' acceptance histograms) =="),
        "{out}"
    );
    // Without --by-request, no per-request list.
    let (out, _, _) = advise_responses(&text, &[]);
    assert!(!out.contains("\"requests\""), "{out}");
}

#[test]
fn responses_of_varying_length_give_bounds_and_this_crates_rows_are_exact() {
    // 10 steps, 25 drafted tokens of at most 3: lengths varied.
    let text = vllm_response("r1", 3, &[2, 3, 3, 2], 25);
    let (out, err, code) = advise_responses(&text, &[]);
    assert_eq!(code, 3, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["groups"][0]["identified"], "bounds");
    // This crate's per-request object carries the rows: exact.
    let mut h = AcceptanceHistogram::new(3).unwrap();
    for (k, a) in [(1, 1), (3, 0), (3, 3), (2, 1), (2, 2)] {
        h.observe(k, a).unwrap();
    }
    let line = serde_json::json!({"id": "x", "metrics": {"speculative_decoding": h}}).to_string();
    let (out, err, code) = advise_responses(&line, &[]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["groups"][0]["exact_because"], "by_draft_length");
    // Position 2: reached by (3,3), (2,1), (2,2) and (3,0)? No: (3,0)
    // stopped at 1. Trials 3, accepted 2.
    let p = &v["groups"][0]["recommendation"]["positions"];
    assert_eq!(
        (p[1]["trials"].as_u64(), p[1]["successes"].as_u64()),
        (Some(3), Some(2))
    );
}

#[test]
fn a_multiple_of_the_steps_claims_one_length_only_where_the_counts_force_it() {
    // K = 3, two steps accepting 0 and 2, 4 drafted: drafts of 2 + 2 fit,
    // and so do 1 + 3: bounds, not "one length".
    let (out, err, code) = advise_responses(&vllm_response("r1", 3, &[1, 0, 1, 0], 4), &[]);
    assert_eq!(code, 3, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["groups"][0]["identified"], "bounds");
    assert!(!out.contains("had one length"), "{out}");
    assert!(out.contains("so do drafts of several"), "{out}");
    assert!(!out.contains("varying length"), "{out}");
    // 5 drafted in 2 steps: not one length whatever K; the note says so,
    // and only it.
    let (out, err, code) = advise_responses(&vllm_response("r1", 3, &[1, 0, 1, 0], 5), &[]);
    assert_eq!(code, 3, "{err}");
    assert!(
        out.contains("1 request drafted tokens of varying length"),
        "{out}"
    );
    assert!(!out.contains("drafted a multiple"), "{out}");
    let (out, _, _) = advise_responses(
        &vllm_response("r1", 3, &[1, 0, 1, 0], 4),
        &["--format", "table"],
    );
    assert!(!out.contains("Drafts had different lengths"), "{out}");
    // K = 4, accepting 0 and 3, 4 drafted: only drafts of 1 and 3 fit
    // (a draft is at least what it accepted): exact, with those rows.
    let (out, err, code) = advise_responses(&vllm_response("r1", 4, &[1, 0, 0, 1, 0], 4), &[]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("acceptance_by_draft_length"), "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["groups"][0]["identified"], "exact");
    assert!(!out.contains("had one length"), "{out}");
    let p = &v["groups"][0]["recommendation"]["positions"];
    assert_eq!(
        (p[0]["trials"].as_u64(), p[0]["successes"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(
        (p[1]["trials"].as_u64(), p[1]["successes"].as_u64()),
        (Some(1), Some(1))
    );
    // Every draft K long, and a one-step request: one length.
    for (k, hist, drafted) in [(3, &[1u64, 0, 1, 0][..], 6), (3, &[0, 0, 1, 0][..], 2)] {
        let (out, err, code) = advise_responses(&vllm_response("r1", k, hist, drafted), &[]);
        assert_eq!(code, 0, "{hist:?} {drafted}: {err}");
        assert!(out.contains("had one length"), "{out}");
    }
}

#[test]
fn responses_refuse_wrong_types_skip_sse_fields_and_pool_this_crates_objects() {
    let good = vllm_response("r1", 3, &[39, 1, 0, 3], 129);
    // A mean or rate that is not a number is refused like a wrong number.
    for (from, to, key) in [
        ("1.2325581395348837", "\"bogus\"", "mean_acceptance_length"),
        ("1.2325581395348837", "null", "mean_acceptance_length"),
        ("0.07751937984496124", "\"0.5\"", "draft_acceptance_rate"),
    ] {
        assert!(good.contains(from), "{good}");
        let (out, err, code) = advise_responses(&good.replace(from, to), &[]);
        assert_eq!((out.as_str(), code), ("", 2), "{to}: {err}");
        assert!(err.contains(key) && err.contains("not a number"), "{err}");
    }
    // Server-sent events' other fields are skipped.
    let sse = format!("event: message\nid: 7\nretry: 1000\ndata: {good}\n\n");
    let (_, err, code) = advise_responses(&sse, &[]);
    assert_eq!(code, 0, "{err}");
    // This crate's object pools with vLLM's (the same object plus rows).
    let mut h = AcceptanceHistogram::new(3).unwrap();
    for (k, a) in [(3, 0), (3, 3), (3, 1)] {
        h.observe(k, a).unwrap();
    }
    let ours = serde_json::json!({"id": "x", "model": "m", "metrics": {"speculative_decoding": h}});
    let (out, err, code) = advise_responses(&format!("{good}\n{ours}\n"), &["--format", "table"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("per-request responses"), "{out}");
    assert!(out.contains("K = 3, 46 drafts"), "{out}");
}

#[test]
fn sglang_meta_info_is_read_per_choice() {
    // SGLang's OpenAI endpoint: meta_info per choice; the histogram grows
    // only to the largest count seen (here 2 of K = 3).
    let meta = |id: &str, hist: &[u64], steps: u64| {
        let accepted: u64 = hist.iter().enumerate().map(|(j, &n)| j as u64 * n).sum();
        serde_json::json!({"id": id, "spec_verify_ct": steps, "spec_num_correct_drafts": accepted,
            "spec_num_proposed_drafts": steps * 3, "spec_correct_drafts_histogram": hist})
    };
    let line = serde_json::json!({"id": "c", "model": "s", "choices": [
        {"index": 0, "meta_info": meta("a", &[2, 3, 5], 10)},
        {"index": 1, "meta_info": meta("b", &[1, 0, 0, 9], 10)},
    ]})
    .to_string();
    let (out, err, code) = advise_responses(&line, &["--format", "table"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("SGLang responses (meta_info)"), "{out}");
    assert!(
        out.contains("20 drafts") && out.contains("--speculative-num-steps"),
        "{out}"
    );
    // 3 drafted tokens every step: one length, the counts exact.
    let (out, err, code) = advise_responses(&line, &[]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["groups"][0]["identified"], "exact", "{out}");
    assert!(out.contains("had one length"), "{out}");
    // 3 drafted in 2 steps: no K divides them, so no length is claimed
    // (though drafts as short as their accepted tokens would fit).
    let odd = serde_json::json!({"id": "c", "model": "s", "choices": [{"index": 0, "meta_info":
        {"id": "a", "spec_verify_ct": 2, "spec_num_correct_drafts": 3,
         "spec_num_proposed_drafts": 3, "spec_correct_drafts_histogram": [0, 1, 1]}}]})
    .to_string();
    let (out, err, code) = advise_responses(&odd, &[]);
    assert_eq!(code, 3, "{err}");
    assert!(out.contains("varying length"), "{out}");
}

#[test]
fn bad_responses_are_refused_with_the_line_and_the_reason() {
    let good = vllm_response("r1", 3, &[39, 1, 0, 3], 129);
    for (text, wanted) in [
        (format!("{good}\n{{not json\n"), "line 2: not JSON"),
        (
            good.replace("[39,1,0,3]", "[39,1,0,4]"),
            "the histogram holds 44 steps",
        ),
        (
            good.replace("\"num_spec_tokens\":3", "\"num_spec_tokens\":2"),
            "acceptance_histogram has 4 counts",
        ),
        (
            good.replace("1.2325581395348837", "1.5"),
            "mean_acceptance_length is 1.5",
        ),
        (
            "{\"id\":\"x\",\"choices\":[]}\n".to_owned(),
            "no response holds per-request",
        ),
    ] {
        let (out, err, code) = advise_responses(&text, &[]);
        assert_eq!((out.as_str(), code), ("", 2), "{wanted}: {err}");
        assert!(err.contains(wanted), "wanted {wanted:?}: {err}");
    }
}

/// llama.cpp's statistics line (llama.cpp PR #24536) for the counts given.
fn llamacpp_statistics(drafter: &str, drafts: u64, drafted: u64, per_pos: &[u64]) -> String {
    let accepted: u64 = per_pos.iter().sum();
    let rates: Vec<String> = per_pos
        .iter()
        .map(|&c| format!("{:.3}", c as f64 / drafts as f64))
        .collect();
    format!(
        "0.06.896.057 I statistics {drafter:>16}: #calls(b,g,a) =    1 {drafts:6} {drafts:6}, #gen drafts = {drafts:6}, #acc drafts = {:5}, #gen tokens = {drafted:6}, #acc tokens = {accepted:5}, #mean acc len = {:.2}, #acc rate/pos = ({}), dur(b,g,a) = 0.005, 325.555, 0.114 ms\n",
        per_pos[0],
        1.0 + accepted as f64 / drafts as f64,
        rates.join(", ")
    )
}

fn advise_llamacpp_log(text: &str, extra: &[&str]) -> (String, String, i32) {
    advise_file("--llamacpp-log", "llama.log", text, extra)
}

#[test]
fn llamacpp_log_statistics_accumulate_per_drafter_across_restarts() {
    // Cumulative lines: the latest counts; after a restart (counts fall)
    // the life before it counts too. Every draft 3 long: exact.
    let text = [
        "0.01.000.000 I srv  update_slots: all slots are idle\n".to_owned(),
        llamacpp_statistics("draft-eagle3", 100, 300, &[80, 60, 40]),
        format!(
            "\x1b[32m{}\x1b[0m",
            llamacpp_statistics("draft-eagle3", 1000, 3000, &[800, 600, 400])
        ),
        llamacpp_statistics("draft-eagle3", 500, 1500, &[400, 300, 200]),
    ]
    .concat();
    let (out, err, code) = advise_llamacpp_log(&text, &[]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let g = &v["groups"][0];
    assert_eq!(g["labels"]["drafter"], "draft-eagle3");
    assert_eq!(g["drafts"], 1500);
    let p = &g["recommendation"]["positions"];
    assert_eq!(
        (p[0]["trials"].as_u64(), p[0]["successes"].as_u64()),
        (Some(1500), Some(1200))
    );
    assert_eq!(
        (p[2]["trials"].as_u64(), p[2]["successes"].as_u64()),
        (Some(900), Some(600))
    );
    assert!(
        g["setting"]
            .as_str()
            .unwrap()
            .contains("--spec-draft-n-max"),
        "{out}"
    );
    // Drafts of varying length (p-min): bounds.
    let (_, err, code) = advise_llamacpp_log(
        &llamacpp_statistics("draft-simple", 87, 259, &[70, 55, 42]),
        &[],
    );
    assert_eq!(code, 3, "{err}");
    // An older llama.cpp: totals only, refused with what to update.
    let old = "I statistics ngram_simple: #calls = 1, #gen drafts = 87, #acc drafts = 70, #gen tokens = 259, #acc tokens = 167, dur = 1 ms\n";
    let (out, err, code) = advise_llamacpp_log(old, &[]);
    assert_eq!((out.as_str(), code), ("", 2));
    assert!(
        err.contains("line 1") && err.contains("update llama.cpp"),
        "{err}"
    );
    let (_, err, code) = advise_llamacpp_log("nothing here\n", &[]);
    assert_eq!(code, 2);
    assert!(
        err.contains("no llama.cpp speculative-decoding line"),
        "{err}"
    );
}

/// One series of a fake Prometheus: its name, its labels, its
/// `increase()` over any window.
type Series = (&'static str, Vec<(&'static str, String)>, f64);

/// `%XX` and `+` of a query string decoded.
fn url_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).unwrap()
}

/// A fake Prometheus holding `series`, answering `connections` requests
/// as Prometheus would the two `advise --prometheus` sends: the names of
/// `/api/v1/series` matching `match[]`'s `__name__=~"..."` (anchored, as
/// Prometheus anchors it), and `/api/v1/query`'s
/// `sum by (LABELS) (increase(NAME[WINDOW]))`, summed by those labels.
/// Every query is kept, in order.
fn prometheus_of(
    series: Vec<Series>,
    connections: usize,
) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = std::sync::Arc::clone(&asked);
    let query =
        regex::Regex::new(r"^sum by \(([^)]*)\) \(increase\(([A-Za-z0-9_:]+)\[[0-9a-z]+\]\)\)$")
            .unwrap();
    thread::spawn(move || {
        for stream in listener.incoming().take(connections) {
            let Ok(mut stream) = stream else { return };
            stream.set_read_timeout(Some(Duration::from_secs(5))).ok();
            let mut buf = [0u8; 4096];
            let mut head = Vec::new();
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let head = String::from_utf8_lossy(&head);
            let target = head.split(' ').nth(1).unwrap_or_default();
            let (path, params) = target.split_once('?').unwrap_or((target, ""));
            let params: Vec<(String, String)> = params
                .split('&')
                .filter_map(|p| p.split_once('='))
                .map(|(k, v)| (url_decode(k), url_decode(v)))
                .collect();
            let param = |k: &str| {
                params
                    .iter()
                    .find(|(name, _)| name == k)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default()
            };
            let body = if path.ends_with("/api/v1/series") {
                let matcher = param("match[]");
                let pattern = matcher
                    .strip_prefix("{__name__=~\"")
                    .and_then(|m| m.strip_suffix("\"}"))
                    .expect("a name matcher alone");
                let names = regex::Regex::new(&format!("^(?:{pattern})$")).unwrap();
                let found: std::collections::BTreeSet<&str> = series
                    .iter()
                    .map(|(name, _, _)| *name)
                    .filter(|name| names.is_match(name))
                    .collect();
                let data: Vec<Value> = found
                    .into_iter()
                    .map(|name| serde_json::json!({ "__name__": name }))
                    .collect();
                serde_json::json!({ "status": "success", "data": data })
            } else {
                let q = param("query");
                kept.lock().unwrap().push(q.clone());
                let caps = query.captures(&q).expect("a query advise sends");
                let by: Vec<&str> = caps[1].split(", ").collect();
                let mut sums: std::collections::BTreeMap<Vec<(String, String)>, f64> =
                    std::collections::BTreeMap::new();
                for (name, labels, value) in &series {
                    if *name != &caps[2] {
                        continue;
                    }
                    let key = labels
                        .iter()
                        .filter(|(l, _)| by.contains(l))
                        .map(|(l, v)| ((*l).to_owned(), v.clone()))
                        .collect();
                    *sums.entry(key).or_insert(0.0) += value;
                }
                let result: Vec<Value> = sums
                    .into_iter()
                    .map(|(labels, v)| {
                        let metric: serde_json::Map<String, Value> = labels
                            .into_iter()
                            .map(|(l, v)| (l, Value::String(v)))
                            .collect();
                        serde_json::json!({ "metric": metric, "value": [1700000000, v.to_string()] })
                    })
                    .collect();
                serde_json::json!({
                    "status": "success",
                    "data": { "resultType": "vector", "result": result }
                })
            }
            .to_string();
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (format!("http://{addr}"), asked)
}

/// TensorRT-LLM's families through Prometheus: found among the series
/// names, and their per-position counters summed by `token_position`
/// (two instances of one model), as a scrape of them reads.
#[test]
fn trtllm_through_prometheus_reads_as_its_scrape() {
    let mut series: Vec<Series> = Vec::new();
    for instance in ["a:8000", "b:8000"] {
        let labels = |p: Option<usize>| {
            let mut l = vec![
                ("instance", instance.to_owned()),
                ("model_name", "m".to_owned()),
            ];
            l.extend(p.map(|p| ("token_position", p.to_string())));
            l
        };
        for (p, (d, a)) in [(500.0, 350.0), (500.0, 250.0), (500.0, 150.0)]
            .into_iter()
            .enumerate()
        {
            series.push((
                "trtllm_spec_decode_drafted_tokens_total",
                labels(Some(p)),
                d,
            ));
            series.push((
                "trtllm_spec_decode_accepted_tokens_total",
                labels(Some(p)),
                a,
            ));
        }
        series.push((
            "trtllm_spec_decode_num_draft_tokens_total",
            labels(None),
            1500.0,
        ));
        series.push((
            "trtllm_spec_decode_num_accepted_tokens_total",
            labels(None),
            750.0,
        ));
    }
    // One series answer and one per query.
    let (url, asked) = prometheus_of(series, 5);
    let (out, err, code) = advise(&[
        "--prometheus",
        &url,
        "--window",
        "1h",
        "--at",
        "1700000000",
        "--cost-linear",
        "1,0.1",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["engine"], "trtllm", "{out}");
    let group = &v["groups"][0];
    assert_eq!(group["labels"]["model_name"], "m", "{out}");
    assert_eq!(group["identified"], "exact", "{out}");
    assert_eq!(group["max_draft_len"], 3, "{out}");
    assert_eq!(group["drafts"], 1000, "{out}");
    let positions = group["recommendation"]["positions"].as_array().unwrap();
    let counts: Vec<(u64, u64)> = positions
        .iter()
        .map(|p| {
            (
                p["successes"].as_u64().unwrap(),
                p["trials"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(counts, [(700, 1000), (500, 700), (300, 500)], "{out}");
    // The drafted family is asked for once, by position.
    let asked = asked.lock().unwrap();
    assert!(
        asked.contains(&"sum by (model_name, token_position) (increase(trtllm_spec_decode_drafted_tokens_total[1h]))".to_owned()),
        "{asked:?}"
    );
    assert_eq!(asked.len(), 4, "{asked:?}");
}
