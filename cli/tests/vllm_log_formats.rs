//! `advise --vllm-log` on every format vLLM has printed about speculative
//! decoding. Each writer below is the format string of vLLM's own code
//! path (cited in `ingest/src/source/vllm_log/`), rewritten in Rust and fed exact
//! counts chosen here: the counts each format yields are checked against
//! those, by hand. The files in `tests/fixtures/vllm_logs/` are these
//! writers' output (`fixtures_are_what_the_writers_print` keeps them so;
//! `VLLM_LOG_FIXTURES_WRITE=1` rewrites them).

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;
use specdec_ingest::Counted;
use specdec_ingest::Reconstruction;
use specdec_ingest::source::vllm_log::{Format, read_from};
use specdec_metrics::Identified;

fn bin() -> assert_cmd::Command {
    let mut c = assert_cmd::cargo::cargo_bin_cmd!("specdec-metrics");
    c.timeout(Duration::from_secs(60));
    c
}

/// `advise --vllm-log - --cost-linear 1,0.1 EXTRA` on `text`.
fn advise(text: &str, extra: &[&str]) -> (String, String, i32) {
    let out = bin()
        .args(["advise", "--vllm-log", "-", "--cost-linear", "1,0.1"])
        .args(extra)
        .write_stdin(text.as_bytes().to_vec())
        .output()
        .unwrap();
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
        out.status.code().unwrap_or(-1),
    )
}

fn read(text: &str) -> Result<(Counted, Reconstruction), String> {
    read_from(text.as_bytes(), "log".to_owned(), None).map_err(|e| e.to_string())
}

/// `(drafts, [(s_i, n_i)])` of the one group, which must be exact.
fn exact(counted: &Counted) -> (u64, Vec<(u64, u64)>) {
    let c = &counted.groups[0].built.counters;
    match c.identify().unwrap() {
        Identified::Exact { continuation, .. } => (c.drafts(), continuation.counts().to_vec()),
        other => panic!("{other:?}"),
    }
}

fn notes(counted: &Counted) -> String {
    let notes: Vec<String> = counted.groups[0]
        .built
        .notes
        .iter()
        .map(ToString::to_string)
        .collect();
    notes.join("\n")
}

fn rates(drafts: u64, per_pos: &[u64], decimals: usize) -> String {
    per_pos
        .iter()
        .map(|&c| format!("{:.*}", decimals, c as f64 / drafts as f64))
        .collect::<Vec<_>>()
        .join(", ")
}

// The writers. `drafts` drafts of `per_pos.len()` tokens each unless
// `drafted` says otherwise; `per_pos[i]` drafts accepted position i + 1.

/// `SpecDecodingLogging.log` today (vllm/v1/spec_decode/metrics.py).
fn current(prefix: &str, drafts: u64, per_pos: &[u64]) -> String {
    let a: u64 = per_pos.iter().sum();
    let d = drafts * per_pos.len() as u64;
    format!(
        "{prefix}SpecDecoding metrics: Mean acceptance length: {:.2}, Accepted throughput: {:.2} tokens/s, Drafted throughput: {:.2} tokens/s, Accepted: {a} tokens, Drafted: {d} tokens, Per-position acceptance rate: {}, Avg Draft acceptance rate: {:.1}%\n",
        1.0 + a as f64 / drafts as f64,
        a as f64 / 10.0,
        d as f64 / 10.0,
        rates(drafts, per_pos, 3),
        a as f64 / d as f64 * 100.0
    )
}

/// The rate-first order (PR #16665), with the throughputs PR #24127's
/// test output shows when `throughput`.
fn rate_first(prefix: &str, drafts: u64, per_pos: &[u64], throughput: bool) -> String {
    let a: u64 = per_pos.iter().sum();
    let d = drafts * per_pos.len() as u64;
    let t = if throughput {
        format!(
            "Accepted throughput: {:.2} tokens/s, Drafted throughput: {:.2} tokens/s, ",
            a as f64 / 10.0,
            d as f64 / 10.0
        )
    } else {
        String::new()
    };
    format!(
        "{prefix}SpecDecoding metrics: Draft acceptance rate: {:.1}%, Mean acceptance length: {:.2}, {t}Accepted: {a} tokens, Drafted: {d} tokens, Per-position acceptance rate: {}\n",
        a as f64 / d as f64 * 100.0,
        1.0 + a as f64 / drafts as f64,
        rates(drafts, per_pos, 3)
    )
}

/// `SpecDecodingMetrics.log` from PR #15902 to PR #16665.
fn totals(prefix: &str, accepted: u64, drafted: u64) -> String {
    format!(
        "{prefix}SpecDecoding metrics: Draft acceptance rate: {:.1}%, Accepted: {accepted} tokens, Drafted: {drafted} tokens\n",
        accepted as f64 / drafted as f64 * 100.0
    )
}

/// V1 before PR #15902, as that PR quotes it.
fn v1_early(prefix: &str, accepted: u64, drafted: u64) -> String {
    format!(
        "{prefix}Speculative metrics: Draft acceptance rate: {:.3}, Number of accepted tokens: {accepted}, Number of draft tokens: {drafted}, \n",
        accepted as f64 / drafted as f64
    )
}

/// `_format_spec_decode_metrics_str` (vllm/engine/metrics.py): totals
/// since start-up.
fn v0(prefix: &str, k: u64, accepted: u64, drafted: u64, emitted: u64) -> String {
    let drafts = drafted / k;
    format!(
        "{prefix}Speculative metrics: Draft acceptance rate: {:.3}, System efficiency: {:.3}, Number of speculative tokens: {k}, Number of accepted tokens: {accepted}, Number of draft tokens: {drafted}, Number of emitted tokens: {emitted}.\n",
        accepted as f64 / drafted as f64,
        emitted as f64 / (drafts * (k + 1)) as f64
    )
}

/// examples/offline_inference/spec_decode.py's summary.
fn offline(drafts: u64, drafted: u64, per_pos: &[u64]) -> String {
    let a: u64 = per_pos.iter().sum();
    let rule = "-".repeat(50);
    let mut s = format!(
        "{rule}\ntotal_num_output_tokens: {}\nnum_drafts: {drafts}\nnum_draft_tokens: {drafted}\nnum_accepted_tokens: {a}\nmean acceptance length: {:.2}\n{rule}\n",
        drafts + a,
        1.0 + a as f64 / drafts as f64
    );
    for (i, &c) in per_pos.iter().enumerate() {
        s += &format!("acceptance at token {i}: {:.2}\n", c as f64 / drafts as f64);
    }
    s
}

/// vllm-ascend's examples/offline_DSD_k_tuner/generate_config.py.
fn ascend(drafts: u64, per_pos: &[u64]) -> String {
    let a: u64 = per_pos.iter().sum();
    let mal = 1.0 + a as f64 / drafts as f64;
    let mut s = format!(
        "[VERIFY] Spec decode metrics present: True\nmean acceptance length: {mal:.2}\n{}\n",
        "-".repeat(50)
    );
    for (i, &c) in per_pos.iter().enumerate() {
        s += &format!("acceptance at token {i}: {:.2}\n", c as f64 / drafts as f64);
    }
    s + &format!("Acceptance length: {mal}\n")
}

/// The stats block of the example at 02772aacb7f7408ae5f08a76bf66e72a33263114.
fn stats_block(drafts: u64, drafted: u64, accepted: u64) -> String {
    format!(
        "=========== Speculative Decoding Stats ============\nTotal input tokens:                      {:<10}\nTotal output tokens:                     {:<10}\n\nInput token throughput (tok/s):          {:<10.2}\nOutput token throughput (tok/s):         {:<10.2}\n\nNumber of drafts:                        {drafts:<10}\nDraft tokens generated:                  {drafted:<10}\nDraft utilization rate:                  {:<10.1}\nAccepted tokens:                         {accepted:<10}\nMean acceptance length:                  {:<10.2}\n====================================================\n",
        12345,
        drafts + accepted,
        1234.5,
        234.5,
        accepted as f64 / drafted as f64 * 100.0,
        1.0 + accepted as f64 / drafts as f64
    )
}

/// `vllm bench serve`'s result, its speculative section last.
fn bench(drafts: u64, drafted: u64, per_pos: &[u64], print_per_pos: bool) -> String {
    let a: u64 = per_pos.iter().sum();
    let row = |label: &str, v: String| format!("{label:<40} {v:<10}\n");
    let mut s = format!("{:=^50}\n", " Serving Benchmark Result ");
    s += &row("Successful requests:", "80".to_owned());
    s += &format!("{:-^50}\n", "Inter-token Latency");
    s += &row("Mean ITL (ms):", format!("{:.2}", 12.34));
    s += &format!("{:-^50}\n", "Speculative Decoding");
    s += &row(
        "Acceptance rate (%):",
        format!("{:.2}", a as f64 / drafted as f64 * 100.0),
    );
    s += &row(
        "Acceptance length:",
        format!("{:.2}", 1.0 + a as f64 / drafts as f64),
    );
    s += &row("Drafts:", drafts.to_string());
    s += &row("Draft tokens:", drafted.to_string());
    s += &row("Accepted tokens:", a.to_string());
    if print_per_pos {
        s += "Per-position acceptance (%):\n";
        for (i, &c) in per_pos.iter().enumerate() {
            s += &row(
                &format!("  Position {i}:"),
                format!("{:.2}", c as f64 / drafts as f64 * 100.0),
            );
        }
    }
    s + &"=".repeat(50) + "\n"
}

const API: &str = "(APIServer pid=1234) INFO 05-01 12:00:00 [metrics.py:96] ";
/// A second server's log, put together with the first.
const API2: &str = "(APIServer pid=77) INFO 09-09 11:51:36 [metrics.py:96] ";

/// The line `LoggingStatLogger.log` prints for each engine before its
/// SpecDecoding line (vllm/v1/metrics/loggers.py).
fn engine_line(prefix: &str, engine: u32) -> String {
    format!(
        "{}Engine {engine:03}: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 310.2 tokens/s, Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.2%, Prefix cache hit rate: 0.0%\n",
        prefix.replace("metrics.py:96", "loggers.py:271")
    )
}
const V0: &str = "INFO 10-16 19:05:47 metrics.py:367] ";

/// The fixtures: each format's writer on counts chosen by hand.
fn fixtures() -> Vec<(&'static str, String)> {
    vec![
        (
            "v1_current_dp2.log",
            format!(
                "{}{}{}{}{}\u{1b}[32m{}\u{1b}[0m\n",
                engine_line(API, 0),
                current(API, 1000, &[700, 500, 300]),
                engine_line(API, 1),
                current(API, 800, &[600, 420, 251]),
                engine_line(API2, 0),
                current(API2, 500, &[400, 300, 200]).trim_end(),
            ),
        ),
        (
            "v1_rate_first.log",
            rate_first(API, 900, &[810, 630, 450], false)
                + &rate_first(API, 600, &[420, 300, 150], false),
        ),
        (
            "v1_rate_first_throughput.log",
            rate_first(API, 70, &[68, 64, 60, 55, 40], true),
        ),
        (
            "v1_totals.log",
            totals(API, 70, 80) + &totals(API, 1200, 3000),
        ),
        (
            "v1_early.log",
            v1_early(API, 70, 80) + &v1_early(API, 1200, 3000),
        ),
        (
            "v0.log",
            v0(V0, 3, 8000, 12000, 9001) + &v0(V0, 3, 8600, 13500, 10700),
        ),
        ("offline_example.txt", offline(950, 2850, &[760, 570, 380])),
        ("vllm_ascend_k_tuner.txt", ascend(950, &[760, 570, 380])),
        ("offline_stats_block.txt", stats_block(950, 2850, 1710)),
        (
            "bench_serve.txt",
            bench(20011, 60033, &[14730, 9900, 6280], true),
        ),
        (
            "bench_serve_no_per_position.txt",
            bench(20011, 60033, &[14730, 9900, 6280], false),
        ),
    ]
}

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/vllm_logs")
}

#[test]
fn fixtures_are_what_the_writers_print() {
    let dir = fixture_dir();
    for (name, text) in fixtures() {
        let path = dir.join(name);
        if std::env::var_os("VLLM_LOG_FIXTURES_WRITE").is_some() {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &text).unwrap();
        }
        let stored = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(stored, text, "{name}");
    }
}

/// Interval lines of a data-parallel server's two engines and of a second
/// server (and a colour code) pool: drafts 1000 + 800 + 500, position 1 accepted by 700 + 600 + 400 = 1,700 of them, and
/// so on; every N is under 1,000, so each rate's rounding window holds
/// one whole count and the reconstruction is exact.
#[test]
fn current_lines_of_interleaved_engines_pool_exactly() {
    let text = &fixtures()[0].1;
    assert!(text.contains('\u{1b}'));
    let (counted, rec) = read(text).unwrap();
    assert_eq!(
        exact(&counted),
        (2300, vec![(1700, 2300), (1220, 1700), (751, 1220)])
    );
    assert_eq!(rec.lines, 3);
    assert_eq!(rec.formats, vec![Format::V1Current]);
    // ±0.001 N per line, rounded up: 1 + 1 + 1.
    assert_eq!(rec.max_count_error, 3);
    let n = notes(&counted);
    assert!(
        n.contains("read as vLLM's current SpecDecoding metrics line"),
        "{n}"
    );
    assert!(
        n.contains("lines of 3 engines pooled ((APIServer pid=1234) Engine 000, (APIServer pid=1234) Engine 001, (APIServer pid=77) Engine 000)"),
        "{n}"
    );
    // The same text without the colour: the same counts.
    let plain = text.replace("\u{1b}[32m", "").replace("\u{1b}[0m", "");
    assert_eq!(exact(&read(&plain).unwrap().0), exact(&counted));
}

/// The rate-first order, with and without the throughputs: 900 + 600
/// drafts; position 1 accepted by 810 + 420, and so on.
#[test]
fn rate_first_lines_are_read_with_and_without_throughput() {
    let (counted, rec) = read(&fixtures()[1].1).unwrap();
    assert_eq!(
        exact(&counted),
        (1500, vec![(1230, 1500), (930, 1230), (600, 930)])
    );
    assert_eq!(rec.formats, vec![Format::V1RateFirst]);
    let n = notes(&counted);
    assert!(
        n.contains("read as vLLM's rate-first SpecDecoding metrics line"),
        "{n}"
    );
    assert!(!n.contains("PR #24127's test output"), "{n}");
    // PR #24127's shape: 70 drafts of 5, and a note that says on whose
    // word it is read.
    let text = &fixtures()[2].1;
    assert!(
        text.contains("Draft acceptance rate: 82.0%, Mean acceptance length: 5.10, Accepted throughput: 28.70 tokens/s, Drafted throughput: 35.00 tokens/s, Accepted: 287 tokens, Drafted: 350 tokens, Per-position acceptance rate: 0.971, 0.914, 0.857, 0.786, 0.571\n"),
        "{text}"
    );
    let (counted, _) = read(text).unwrap();
    assert_eq!(
        exact(&counted),
        (70, vec![(68, 70), (64, 68), (60, 64), (55, 60), (40, 55)])
    );
    assert!(notes(&counted).contains("PR #24127's test output"));
    // A log that spans the upgrade: both orders, one pool.
    let both = fixtures()[1].1.clone() + &current(API, 1000, &[700, 500, 300]);
    let (counted, rec) = read(&both).unwrap();
    assert_eq!(exact(&counted).0, 2500);
    assert_eq!(rec.formats, vec![Format::V1Current, Format::V1RateFirst]);
}

/// The offline example prints the drafts: 950 exactly, rates to 2
/// decimals (0.80, 0.60, 0.40 × 950 are whole); its precision is ±0.01 N.
#[test]
fn offline_example_gives_exact_drafts_and_reconstructed_positions() {
    let (counted, rec) = read(&fixtures()[6].1).unwrap();
    assert_eq!(
        exact(&counted),
        (950, vec![(760, 950), (570, 760), (380, 570)])
    );
    assert_eq!(rec.summaries, 1);
    assert_eq!(rec.lines, 0);
    assert_eq!(rec.max_count_error, 10);
    let n = notes(&counted);
    assert!(n.contains("read as vLLM's offline example summary"), "{n}");
    assert!(
        n.contains("rates printed to 2 decimals, drafts as printed"),
        "{n}"
    );
    // Rates to 2 decimals do not pin the counts: 0.71 × 1,000 drafts is
    // any of 705..=715; the printed accepted total fixes their sum.
    let coarse = offline(1000, 3000, &[713, 502, 296]);
    let (counted, rec) = read(&coarse).unwrap();
    let (_, c) = exact(&counted);
    assert_eq!(c[0].0 + c[1].0 + c[2].0, 713 + 502 + 296);
    for (got, truth) in c.iter().zip([713u64, 502, 296]) {
        assert!(got.0.abs_diff(truth) <= rec.max_count_error, "{c:?}");
    }
    // Two runs in one file add up.
    let two = fixtures()[6].1.clone() + &fixtures()[6].1;
    let (counted, rec) = read(&two).unwrap();
    assert_eq!(exact(&counted).0, 1900);
    assert_eq!(rec.summaries, 2);
}

/// The offline example prints every entry of its counts array, which can
/// be longer than the drafts (an EAGLE-3 run printed six rates for drafts
/// of three).
#[test]
fn offline_summary_longer_than_its_drafts_is_advised_at_the_drafted_k() {
    let rule = "-".repeat(50);
    let summary = |drafted: u64, rates: &str| {
        format!(
            "{rule}\ntotal_num_output_tokens: 2396\nnum_drafts: 675\nnum_draft_tokens: {drafted}\nnum_accepted_tokens: 1721\nmean acceptance length: 3.55\n{rule}\n{rates}"
        )
    };
    let six = "acceptance at token 0: 0.85\nacceptance at token 1: 0.85\nacceptance at token 2: 0.85\nacceptance at token 3: 0.00\nacceptance at token 4: 0.00\nacceptance at token 5: 0.00\n";
    // 2,025 = 3 × 675 draft tokens and nothing accepted beyond position
    // 3: K = 3, said so.
    let (out, err, code) = advise(&summary(2025, six), &["--format", "table"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("== K = 3, 675 drafts"), "{out}");
    assert!(!out.contains("different lengths"), "{out}");
    assert!(
        out.contains("the array is longer than the drafts: positions 4-6 never accepted a token and the draft tokens are exactly 3 per draft"),
        "{out}"
    );
    // Draft tokens not a multiple of the drafts: bounds, without the
    // inference.
    let (out, err, code) = advise(&summary(2030, six), &["--format", "table"]);
    assert_eq!(code, 3, "{err}");
    assert!(
        !out.contains("the array is longer than the drafts"),
        "{out}"
    );
    // A rate beyond position 3 that is not zero: not forced either.
    let nonzero = six.replacen("token 3: 0.00", "token 3: 0.01", 1);
    let (out, err, _) = advise(&summary(2025, &nonzero), &["--format", "table"]);
    assert!(
        !out.contains("the array is longer than the drafts"),
        "{out}{err}"
    );
    assert!(!out.contains("== K = 3,"), "{out}");
    // One position beyond the drafts: named alone.
    let four = "acceptance at token 0: 0.85\nacceptance at token 1: 0.85\nacceptance at token 2: 0.85\nacceptance at token 3: 0.00\n";
    let (out, err, code) = advise(&summary(2025, four), &["--format", "table"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("the array is longer than the drafts: position 4 never accepted a token"),
        "{out}"
    );
    // No drafts, or drafts of no tokens: nothing to infer, the array as
    // printed (and no division by zero drafts).
    let zero = "acceptance at token 0: 0.00\nacceptance at token 1: 0.00\n";
    for drafts in [0, 675] {
        let text = format!(
            "{rule}\ntotal_num_output_tokens: 2396\nnum_drafts: {drafts}\nnum_draft_tokens: 0\nnum_accepted_tokens: 0\nmean acceptance length: 1.00\n{rule}\n{zero}"
        );
        let (out, err, code) = advise(&text, &["--format", "table"]);
        assert_eq!(code, 0, "{drafts}: {err}");
        assert!(out.contains("== K = 2,"), "{drafts}: {out}");
        assert!(!out.contains("the array is longer"), "{drafts}: {out}");
    }
}

/// `vllm bench serve` prints drafts and percentages to 2 decimals (rates
/// to 4): 20,011 drafts, 14,730 accepting position 1 (73.61%), ...; the
/// windows are 2.0 counts wide, and the printed sum picks the counts.
#[test]
fn bench_serve_section_is_read() {
    let text = &fixtures()[9].1;
    assert!(
        text.contains("---------------Speculative Decoding---------------\nAcceptance rate (%):                     51.49     \nAcceptance length:                       2.54      \nDrafts:                                  20011     \n"),
        "{text}"
    );
    assert!(
        text.contains("73.61") && text.contains("49.47") && text.contains("31.38"),
        "{text}"
    );
    let (counted, rec) = read(text).unwrap();
    let (n, c) = exact(&counted);
    assert_eq!(n, 20011);
    assert_eq!(c.iter().map(|x| x.0).sum::<u64>(), 14730 + 9900 + 6280);
    for (got, truth) in c.iter().zip([14730u64, 9900, 6280]) {
        assert!(got.0.abs_diff(truth) <= 3, "{c:?}");
    }
    assert_eq!(rec.max_count_error, 3);
    assert!(notes(&counted).contains("vllm bench serve's Speculative Decoding section"));
}

/// Drafts of different lengths in a summary (draft tokens not drafts ×
/// K): the counts give bounds, exit status 3, as vLLM's counters do.
#[test]
fn a_summary_of_drafts_of_different_lengths_gives_bounds() {
    let (out, err, code) = advise(
        &bench(1000, 2500, &[700, 450, 200], true),
        &["--format", "table"],
    );
    assert_eq!(code, 3, "{out}{err}");
    assert!(
        out.contains("NOT ADVISED: the counters give bounds only"),
        "{out}"
    );
    // An interval line cannot say as much: it is refused, exit status 3,
    // with one message and nothing on standard output.
    let line = current(API, 1000, &[700, 500, 300]).replace("Drafted: 3000", "Drafted: 2950");
    let (out, err, code) = advise(&line, &[]);
    assert_eq!(code, 3, "{out}{err}");
    assert!(out.is_empty(), "{out}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: ")
            && err.contains("not a multiple of K = 3")
            && err.contains("(the line: \"SpecDecoding metrics:"),
        "{err}"
    );
}

/// Formats with no per-position count: exit status 2, what they identify,
/// what is missing, what prints it.
#[test]
fn means_only_formats_say_what_they_identify_and_what_to_turn_on() {
    let f = fixtures();
    let case = |i: usize, says: &[&str]| {
        let (out, err, code) = advise(&f[i].1, &[]);
        assert_eq!(code, 2, "{}: {out}{err}", f[i].0);
        assert!(out.is_empty());
        assert!(err.contains("means only: read as"), "{err}");
        for s in says {
            assert!(err.contains(s), "{}: {s:?} not in {err}", f[i].0);
        }
    };
    // Totals lines: 70 + 1,200 of 80 + 3,000 tokens.
    case(
        3,
        &[
            "vLLM V1's totals line",
            "1,270 of 3,080 draft tokens accepted (41.2%)",
            "not even the mean acceptance length",
            "PR #16665",
        ],
    );
    case(4, &["vLLM V1's first line", "1,270 of 3,080 draft tokens"]);
    // V0: totals since start-up, the last line counts: 13,500 / 3 = 4,500
    // drafts, 10,700 emitted: mean acceptance length 2.3778.
    case(
        5,
        &[
            "vLLM V0's Speculative metrics line",
            "(the last of each of 1 run counts)",
            "K = 3, 4,500 drafts",
            "mean acceptance length 2.3778",
            "8,600 of 13,500 draft tokens accepted anywhere",
            "vLLM V1",
        ],
    );
    case(
        7,
        &[
            "vllm-ascend's k tuner",
            "mean acceptance length 2.80, rates 0.80, 0.60, 0.40",
            "no sample size",
            "num_drafts",
        ],
    );
    case(
        8,
        &[
            "Speculative Decoding Stats block",
            "950 drafts, 2,850 draft tokens, 1,710 accepted: mean acceptance length 2.8000",
            "acceptance at token i",
        ],
    );
    case(
        10,
        &[
            "vllm bench serve's Speculative Decoding section",
            "20,011 drafts, 60,033 draft tokens, 30,910 accepted",
            "Per-position acceptance (%)",
            "--since",
        ],
    );
    // A V0 restart (the totals drop): two runs, added.
    let restart = f[5].1.clone() + &v0(V0, 3, 300, 600, 500);
    let (_, err, _) = advise(&restart, &[]);
    assert!(
        err.contains("(the last of each of 2 runs counts)") && err.contains("K = 3, 4,700 drafts"),
        "{err}"
    );
}

/// Every refused line is named by its number, quoted, and given a reason.
#[test]
fn refused_lines_are_quoted_with_the_reason() {
    let good = current(API, 1000, &[700, 500, 300]);
    let cases: Vec<(String, &str)> = vec![
        // A fork's extra field.
        (
            good.replace(", Avg Draft", ", Draft length histogram: 3:10, Avg Draft"),
            "per-position rate \"Draft length histogram: 3:10\" is not a rate printed to 3 decimals",
        ),
        (
            good.replace("Accepted: 1500", "Accepted: 1.5e3"),
            "\"1.5e3\" is not a count",
        ),
        (
            good.replace("0.500, 0.300", "0.500, 0.600"),
            "per-position rate 3 (0.6) is above rate 2 (0.5)",
        ),
        (
            v0(V0, 3, 8600, 13500, 10700).replace("0.594", "0.700"),
            "System efficiency 0.700 is not emitted / (drafts × (K + 1))",
        ),
        (
            v0(V0, 3, 8600, 13501, 10700),
            "not a multiple of the 3 speculative tokens",
        ),
        (
            "SpecDecoding metrics: Mean acceptance: 2.0\n".to_owned(),
            "expected \"Draft acceptance rate: \" at \"Mean acceptance: 2.0\": not one of vLLM's formats",
        ),
        // Two kinds of record in one file.
        (
            good.clone() + &offline(950, 2850, &[760, 570, 380]),
            "but line 1 is vLLM's current SpecDecoding metrics line",
        ),
        // Two K.
        (
            good.clone() + &current(API, 100, &[50, 20]),
            "2 per-position rates, but earlier records have 3",
        ),
        // A summary that contradicts itself.
        (
            offline(950, 2850, &[760, 570, 380]).replace(
                "mean acceptance length: 2.80",
                "mean acceptance length: 2.90",
            ),
            "the mean acceptance length 2.90 is not 1 + accepted / drafts = 2.8000",
        ),
        (
            offline(950, 2850, &[760, 570, 380]).replace("num_drafts: 950", "num_drafts: 0"),
            "0 drafts but 2850 draft tokens: the summary contradicts itself",
        ),
        (
            bench(20011, 60033, &[14730, 9900, 6280], true)
                .replace("  Position 1:", "  Position 2:"),
            "position \"2\" where position 1 was expected",
        ),
        (
            bench(20011, 60033, &[14730, 9900, 6280], true).replace("Drafts:  ", "Drafs:   "),
            "this vllm bench serve section has no \"Drafts\" line",
        ),
    ];
    for (text, reason) in cases {
        let (out, err, code) = advise(&text, &[]);
        assert_eq!(code, 2, "{text}\n{err}");
        assert!(out.is_empty());
        assert!(err.contains(reason), "{reason:?} not in {err}");
        assert!(
            err.contains("<stdin>: line ") && err.contains("(the line: \""),
            "{err}"
        );
    }
    // A title alone is no section; nothing of vLLM's: said so.
    let (_, err, code) = advise(
        "Speculative Decoding\n== Speculative Decoding ==\nINFO nothing here\n",
        &[],
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("no line with \"SpecDecoding metrics:\""),
        "{err}"
    );
    // Nothing of vLLM's: said so.
    let (_, err, code) = advise("INFO nothing here\n", &[]);
    assert_eq!(code, 2);
    assert!(
        err.contains("no line with \"SpecDecoding metrics:\""),
        "{err}"
    );
}

/// The JSON says which formats it read, and the table gives the advice.
#[test]
fn the_output_names_the_format_it_took() {
    let (out, err, code) = advise(&fixtures()[9].1, &[]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["reconstruction"]["formats"][0], "bench_serve");
    assert_eq!(v["reconstruction"]["summaries"], 1);
    assert_eq!(v["groups"][0]["drafts"], 20011);
    let notes = v["groups"][0]["notes"].to_string();
    assert!(notes.contains("read as vllm bench serve's"), "{notes}");
    let (out, _, code) = advise(&fixtures()[1].1, &["--format", "table"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("note: read as vLLM's rate-first SpecDecoding metrics line"),
        "{out}"
    );
    assert!(out.contains("Recommendation: draft"), "{out}");
}

/// Huge counts are read as exactly as small ones, and quickly: the
/// adjustment into the rounding windows moves counts in bulk (a window of
/// 10^13 counts is not walked one by one), the counts stay exact u64s.
#[test]
fn huge_counts_are_reconstructed_without_walking_the_windows() {
    let drafts = 1_000_000_000_000_000u64;
    // 0.71, 0.50, 0.30 of 10^15 sum to 1.51e15; 1.4e13 more still fits
    // the windows (±0.005 × 10^15 each).
    let accepted = 1_510_000_000_000_000u64 + 14_000_000_000_000;
    let text = format!(
        "num_drafts: {drafts}\nnum_draft_tokens: {}\nnum_accepted_tokens: {accepted}\nmean acceptance length: 2.52\nacceptance at token 0: 0.71\nacceptance at token 1: 0.50\nacceptance at token 2: 0.30\n",
        drafts * 3
    );
    let start = std::time::Instant::now();
    let (counted, rec) = read(&text).unwrap();
    assert!(start.elapsed() < Duration::from_secs(5));
    let (n, c) = exact(&counted);
    assert_eq!(n, drafts);
    assert_eq!(c.iter().map(|x| x.0).sum::<u64>(), accepted);
    for (got, r) in c.iter().zip([0.71, 0.50, 0.30]) {
        let ideal = r * drafts as f64;
        assert!(
            (got.0 as f64 - ideal).abs() <= 0.005 * drafts as f64 + 1.0,
            "{c:?}"
        );
    }
    assert_eq!(rec.max_count_error, drafts / 100);
    // An interval line of 10^18 drafts of 3, likewise.
    let line = "SpecDecoding metrics: Mean acceptance length: 2.50, Accepted throughput: 1.00 tokens/s, Drafted throughput: 1.00 tokens/s, Accepted: 1500400000000000000 tokens, Drafted: 3000000000000000000 tokens, Per-position acceptance rate: 0.700, 0.500, 0.300, Avg Draft acceptance rate: 50.0%\n";
    let (counted, _) = read(line).unwrap();
    let (n, c) = exact(&counted);
    assert_eq!(n, 1_000_000_000_000_000_000);
    assert_eq!(
        c.iter().map(|x| x.0).sum::<u64>(),
        1_500_400_000_000_000_000
    );
}

/// A summary that drafted nothing (0 drafts, 0 draft tokens) is read as
/// one without drafts; 0 drafts beside draft tokens is refused (above).
#[test]
fn a_summary_of_no_drafts_is_read_as_one_without_drafts() {
    let rule = "-".repeat(50);
    let text = format!(
        "{rule}\ntotal_num_output_tokens: 100\nnum_drafts: 0\nnum_draft_tokens: 0\nnum_accepted_tokens: 0\nmean acceptance length: 1.00\n{rule}\nacceptance at token 0: 0.00\nacceptance at token 1: 0.00\n"
    );
    let (counted, rec) = read(&text).unwrap();
    assert_eq!((rec.summaries, rec.lines_without_drafts), (1, 1));
    assert_eq!(counted.groups[0].built.counters.drafts(), 0);
}
