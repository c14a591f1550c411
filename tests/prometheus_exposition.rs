//! The Prometheus exposition (the reference's "Prometheus families"):
//! promtool accepts it, its numbers are the snapshot's, every bucket is
//! always there, names and labels are exact.
//!
//! `promtool` (Debian package `prometheus`; `.ci/install-prometheus.sh`) must
//! be on PATH: without it the promtool tests fail, unless
//! `SPECDEC_SKIP_PROMTOOL=1` is set, in which case they say so and skip the
//! promtool check only.

use crate::exposition_text;

use std::collections::{BTreeMap, BTreeSet};

use exposition_text::promtool_findings;

use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;
use std::sync::Arc;

use rand::{RngCore, SeedableRng};
use rand_xoshiro::SplitMix64;
use specdec_metrics::{
    AcceptanceHistogram, DEFAULT_METRIC_PREFIX, DraftPlan, METRIC_FAMILIES, NameError, PLAN_GAUGE,
    Recorder, SharedPlan, SpecDecodeCollector, TextFormat, VLLM_METRIC_PREFIX,
};

// ---------------------------------------------------------------------------
// helpers

/// Deterministic inputs: the seeded generator of the tests.
struct Rng(SplitMix64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(SplitMix64::seed_from_u64(seed))
    }
    fn below(&mut self, n: usize) -> usize {
        (self.0.next_u64() % n as u64) as usize
    }
}

/// A histogram of `steps` random valid steps, some undrafted and rejected,
/// and scheduled budgets (a few rejected).
fn random_histogram(max_draft_len: usize, steps: usize, seed: u64) -> AcceptanceHistogram {
    let mut rng = Rng::new(seed);
    let mut h = AcceptanceHistogram::new(max_draft_len).unwrap();
    for _ in 0..steps {
        match rng.below(20) {
            0 => h.observe_undrafted(),
            1 => assert!(h.observe(max_draft_len + 1, 0).is_err()),
            2..=4 => {
                let b = rng.below(max_draft_len + 2);
                assert_eq!(h.observe_scheduled(b).is_ok(), b <= max_draft_len);
            }
            _ => {
                let k = rng.below(max_draft_len + 1);
                let a = rng.below(k + 1);
                h.observe(k, a).unwrap();
            }
        }
    }
    h
}

/// The histograms every test runs over: empty, small, typical, the largest.
fn histograms() -> Vec<(&'static str, AcceptanceHistogram)> {
    let mut only_undrafted = AcceptanceHistogram::new(3).unwrap();
    only_undrafted.observe_undrafted();
    vec![
        ("empty K=1", AcceptanceHistogram::new(1).unwrap()),
        ("empty K=4", AcceptanceHistogram::new(4).unwrap()),
        ("only undrafted K=3", only_undrafted),
        ("random K=1", random_histogram(1, 500, 1)),
        ("random K=5", random_histogram(5, 10_000, 2)),
        ("random K=8", random_histogram(8, 50_000, 3)),
        ("random K=64", random_histogram(64, 20_000, 4)),
    ]
}

/// A series: its name and labels.
type SeriesKey = (String, Vec<(String, String)>);

#[derive(Debug, Clone, PartialEq, Eq)]
struct Sample {
    name: String,
    labels: Vec<(String, String)>,
    value: u64,
}

impl Sample {
    fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
    fn label_usize(&self, name: &str) -> usize {
        self.label(name)
            .unwrap_or_else(|| panic!("{self:?} has no label {name}"))
            .parse()
            .unwrap()
    }
}

/// Parses the sample lines of either text format (comments skipped),
/// unescaping label values.
fn parse_samples(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(parse_sample)
        .collect()
}

fn parse_sample(line: &str) -> Sample {
    let name_end = line
        .find(['{', ' '])
        .unwrap_or_else(|| panic!("no value in {line:?}"));
    let name = line[..name_end].to_owned();
    let mut labels = Vec::new();
    let mut chars = line[name_end..].chars().peekable();
    if chars.peek() == Some(&'{') {
        chars.next();
        loop {
            match chars.peek() {
                Some('}') => {
                    chars.next();
                    break;
                }
                Some(',') => {
                    chars.next();
                    continue;
                }
                None => panic!("unterminated labels in {line:?}"),
                _ => {}
            }
            let label: String = chars.by_ref().take_while(|&c| c != '=').collect();
            assert_eq!(chars.next(), Some('"'), "{line:?}");
            let mut value = String::new();
            loop {
                match chars.next() {
                    Some('\\') => match chars.next() {
                        Some('n') => value.push('\n'),
                        Some(c) => value.push(c),
                        None => panic!("bad escape in {line:?}"),
                    },
                    Some('"') => break,
                    Some(c) => value.push(c),
                    None => panic!("unterminated value in {line:?}"),
                }
            }
            labels.push((label, value));
        }
    }
    let value: String = chars.collect();
    let value = value.trim();
    Sample {
        name,
        labels,
        value: value
            .parse()
            .unwrap_or_else(|e| panic!("bad value {value:?} in {line:?}: {e}")),
    }
}

/// The samples of one family (full name), by their own labels.
fn family<'a>(samples: &'a [Sample], name: &str) -> Vec<&'a Sample> {
    samples.iter().filter(|s| s.name == name).collect()
}

fn scalar(samples: &[Sample], name: &str) -> u64 {
    let f = family(samples, name);
    assert_eq!(f.len(), 1, "{name} should be one sample, got {f:?}");
    f[0].value
}

fn per_pos(samples: &[Sample], name: &str) -> Vec<u64> {
    by_label(samples, name, "position")
}

/// The values of a family with one label of its own, which must take the
/// values `0..n` once each: the values in that order.
fn by_label(samples: &[Sample], name: &str, label: &str) -> Vec<u64> {
    let f = family(samples, name);
    let mut by_pos: BTreeMap<usize, u64> = BTreeMap::new();
    for s in &f {
        assert!(by_pos.insert(s.label_usize(label), s.value).is_none());
    }
    assert_eq!(
        by_pos.keys().copied().collect::<Vec<_>>(),
        (0..by_pos.len()).collect::<Vec<_>>()
    );
    by_pos.into_values().collect()
}

/// Checks that `samples` (under `prefix`) state exactly the figures of `h`.
fn assert_samples_match(samples: &[Sample], prefix: &str, h: &AcceptanceHistogram, what: &str) {
    let n = |family: &str| format!("{prefix}_{family}");
    assert_eq!(
        scalar(samples, &n("num_drafts_total")),
        h.num_spec_steps(),
        "{what}"
    );
    assert_eq!(
        scalar(samples, &n("num_draft_tokens_total")),
        h.num_draft_tokens(),
        "{what}"
    );
    assert_eq!(
        scalar(samples, &n("num_accepted_tokens_total")),
        h.num_accepted_draft_tokens(),
        "{what}"
    );
    assert_eq!(
        scalar(samples, &n("num_undrafted_steps_total")),
        h.num_undrafted_steps(),
        "{what}"
    );
    assert_eq!(
        scalar(samples, &n("num_rejected_observations_total")),
        h.num_rejected_observations(),
        "{what}"
    );
    assert_eq!(
        per_pos(samples, &n("num_accepted_tokens_per_pos_total")),
        h.num_accepted_tokens_per_pos(),
        "{what}"
    );
    assert_eq!(
        per_pos(samples, &n("num_draft_tokens_per_pos_total")),
        h.num_draft_tokens_per_pos(),
        "{what}"
    );
    let buckets = family(samples, &n("acceptance_by_draft_length_total"));
    let mut seen = BTreeSet::new();
    for s in &buckets {
        let (k, a) = (s.label_usize("draft_length"), s.label_usize("accepted"));
        assert!(seen.insert((k, a)), "{what}: bucket ({k},{a}) twice");
        assert_eq!(s.value, h.count(k, a), "{what}: bucket ({k},{a})");
    }
    let triangle: BTreeSet<_> = (0..=h.max_draft_len())
        .flat_map(|k| (0..=k).map(move |a| (k, a)))
        .collect();
    assert_eq!(seen, triangle, "{what}: every bucket of the triangle, once");
    assert_eq!(
        by_label(samples, &n("scheduled_steps_total"), "num_spec_tokens"),
        h.scheduled_steps_by_budget(),
        "{what}: every scheduled budget 0..=K, once"
    );
    // Nothing else is exposed.
    let names: BTreeSet<&str> = samples.iter().map(|s| s.name.as_str()).collect();
    let expected: BTreeSet<String> = METRIC_FAMILIES.iter().map(|f| n(f)).collect();
    assert_eq!(
        names,
        expected.iter().map(String::as_str).collect(),
        "{what}: family names"
    );
}

/// Checks that every family of one scrape equals what its buckets imply
/// (the arithmetic of the reference's "Derived figures", done here
/// independently of the library).
fn assert_families_agree(samples: &[Sample], max_draft_len: usize) {
    let mut steps = 0u64;
    let mut drafted = 0u64;
    let mut accepted = 0u64;
    let mut accepted_per_pos = vec![0u64; max_draft_len];
    let mut drafted_per_pos = vec![0u64; max_draft_len];
    for b in family(samples, "spec_decode_acceptance_by_draft_length_total") {
        let (k, a, v) = (
            b.label_usize("draft_length"),
            b.label_usize("accepted"),
            b.value,
        );
        steps += v;
        drafted += k as u64 * v;
        accepted += a as u64 * v;
        for slot in &mut accepted_per_pos[..a] {
            *slot += v;
        }
        for slot in &mut drafted_per_pos[..k] {
            *slot += v;
        }
    }
    assert_eq!(scalar(samples, "spec_decode_num_drafts_total"), steps);
    assert_eq!(
        scalar(samples, "spec_decode_num_draft_tokens_total"),
        drafted
    );
    assert_eq!(
        scalar(samples, "spec_decode_num_accepted_tokens_total"),
        accepted
    );
    assert_eq!(
        per_pos(samples, "spec_decode_num_accepted_tokens_per_pos_total"),
        accepted_per_pos
    );
    assert_eq!(
        per_pos(samples, "spec_decode_num_draft_tokens_per_pos_total"),
        drafted_per_pos
    );
}

// ---------------------------------------------------------------------------
// promtool

#[test]
fn promtool_accepts_the_classic_text_without_findings() {
    for (what, h) in histograms() {
        for labels in [
            vec![],
            vec![("model_name", "meta-llama/Llama-3.1-8B"), ("engine", "0")],
        ] {
            let text = SpecDecodeCollector::from_histogram(h.clone())
                .with_const_labels(labels.clone())
                .unwrap()
                .encode_text(TextFormat::PrometheusText);
            if let Some(findings) = promtool_findings(&text) {
                assert!(
                    findings.is_empty(),
                    "{what}, labels {labels:?}: promtool findings {findings:?}\n{text}"
                );
            }
        }
    }
}

#[test]
fn promtool_accepts_escaped_label_values() {
    let text = SpecDecodeCollector::from_histogram(random_histogram(3, 100, 9))
        .with_const_labels([("model_name", "a \"quoted\" \\ back\nslash")])
        .unwrap()
        .encode_text(TextFormat::PrometheusText);
    if let Some(findings) = promtool_findings(&text) {
        assert!(findings.is_empty(), "{findings:?}\n{text}");
    }
    let samples = parse_samples(&text);
    assert!(
        samples
            .iter()
            .all(|s| s.label("model_name") == Some("a \"quoted\" \\ back\nslash"))
    );
}

#[test]
fn promtool_only_flags_the_colon_of_vllm_names() {
    // vLLM's own names draw promtool's "should not contain ':'" lint; that is
    // the only finding the vLLM prefix may cause.
    let text = SpecDecodeCollector::from_histogram(random_histogram(5, 1000, 5))
        .with_prefix(VLLM_METRIC_PREFIX)
        .unwrap()
        .encode_text(TextFormat::PrometheusText);
    if let Some(findings) = promtool_findings(&text) {
        assert_eq!(findings.len(), METRIC_FAMILIES.len(), "{findings:?}");
        for f in &findings {
            assert!(
                f.starts_with("vllm:spec_decode_")
                    && f.ends_with("metric names should not contain ':'"),
                "unexpected promtool finding {f:?}"
            );
        }
    }
}

#[test]
fn promtool_flags_openmetrics_text_which_is_why_the_classic_format_exists() {
    // Documents the reason for TextFormat::PrometheusText: promtool parses
    // format 0.0.4 only and misreads OpenMetrics counter families.
    let text = SpecDecodeCollector::from_histogram(random_histogram(2, 10, 6))
        .encode_text(TextFormat::OpenMetrics);
    if let Some(findings) = promtool_findings(&text) {
        assert!(
            !findings.is_empty(),
            "promtool now accepts OpenMetrics counters; the classic text may be unnecessary"
        );
    }
}

// ---------------------------------------------------------------------------
// numbers

#[test]
fn exposed_numbers_equal_the_snapshot_in_both_formats() {
    for (what, h) in histograms() {
        for format in [TextFormat::PrometheusText, TextFormat::OpenMetrics] {
            let text = SpecDecodeCollector::from_histogram(h.clone()).encode_text(format);
            assert_samples_match(&parse_samples(&text), DEFAULT_METRIC_PREFIX, &h, what);
        }
    }
}

#[test]
fn live_collector_encodes_the_recorders_snapshot() {
    let recorder = Recorder::new(5).unwrap();
    let collector = SpecDecodeCollector::new(recorder.clone());
    let mut rng = Rng::new(7);
    std::thread::scope(|s| {
        for t in 0..3 {
            let recorder = &recorder;
            s.spawn(move || {
                let worker = recorder.worker();
                let mut rng = Rng::new(100 + t);
                for _ in 0..5_000 {
                    let k = rng.below(6);
                    worker.observe(k, rng.below(k + 1)).unwrap();
                    worker.observe_scheduled(k).unwrap();
                }
                worker.observe_undrafted();
            });
        }
    });
    recorder.observe(2, 1).unwrap();
    recorder.observe_scheduled(0).unwrap();
    let _ = recorder.observe(rng.below(3), 4); // rejected, counted
    let _ = recorder.observe_scheduled(6 + rng.below(3)); // rejected, counted
    let snapshot = recorder.snapshot();
    let text = collector.encode_text(TextFormat::PrometheusText);
    assert_samples_match(
        &parse_samples(&text),
        DEFAULT_METRIC_PREFIX,
        &snapshot,
        "live",
    );
    assert_eq!(snapshot.num_spec_steps(), 15_001);
    assert_eq!(snapshot.num_scheduled_steps(), 15_001);
    assert_eq!(snapshot.num_rejected_observations(), 2);
}

#[test]
fn families_of_one_scrape_agree_while_workers_record() {
    // The collector takes one snapshot per scrape, so the totals always equal
    // what the buckets imply, even with writers running; and successive
    // scrapes never decrease.
    let recorder = Recorder::new(4).unwrap();
    let mut registry = Registry::default();
    registry.register_collector(Box::new(SpecDecodeCollector::new(recorder.clone())));
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for t in 0..2 {
            let (recorder, stop) = (&recorder, &stop);
            s.spawn(move || {
                let worker = recorder.worker();
                let mut rng = Rng::new(t);
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let k = rng.below(5);
                    worker.observe(k, rng.below(k + 1)).unwrap();
                    if rng.below(10) == 0 {
                        worker.observe_undrafted();
                    }
                    if rng.below(4) == 0 {
                        worker.observe_scheduled(rng.below(5)).unwrap();
                    }
                }
            });
        }
        // Stops the writers however this thread leaves the scope: a failed
        // assertion below must fail the test, not leave the scope waiting
        // for writers that never stop.
        struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        }
        let _stop = StopOnDrop(&stop);
        let mut previous: Option<BTreeMap<SeriesKey, u64>> = None;
        for _ in 0..200 {
            let mut text = String::new();
            encode(&mut text, &registry).unwrap();
            let samples = parse_samples(&text);
            assert_families_agree(&samples, 4);
            let now: BTreeMap<_, _> = samples
                .iter()
                .map(|s| ((s.name.clone(), s.labels.clone()), s.value))
                .collect();
            if let Some(before) = &previous {
                assert_eq!(before.len(), now.len(), "series appeared or vanished");
                for (key, v) in before {
                    assert!(now[key] >= *v, "{key:?} decreased from {v} to {}", now[key]);
                }
            }
            previous = Some(now);
        }
    });
}

// ---------------------------------------------------------------------------
// series, names, labels

#[test]
fn every_bucket_and_position_is_present_even_when_zero() {
    for k_max in [1usize, 2, 5, 16, 64] {
        let text = SpecDecodeCollector::from_histogram(AcceptanceHistogram::new(k_max).unwrap())
            .encode_text(TextFormat::PrometheusText);
        let samples = parse_samples(&text);
        assert!(samples.iter().all(|s| s.value == 0));
        assert_eq!(
            family(&samples, "spec_decode_acceptance_by_draft_length_total").len(),
            (k_max + 1) * (k_max + 2) / 2
        );
        for f in [
            "spec_decode_num_accepted_tokens_per_pos_total",
            "spec_decode_num_draft_tokens_per_pos_total",
        ] {
            assert_eq!(family(&samples, f).len(), k_max, "{f}");
        }
        // Every budget 0..=K, from the first scrape on.
        assert_eq!(
            by_label(
                &samples,
                "spec_decode_scheduled_steps_total",
                "num_spec_tokens"
            ),
            vec![0; k_max + 1]
        );
        assert_eq!(
            samples.len(),
            5 + 2 * k_max + (k_max + 1) * (k_max + 2) / 2 + (k_max + 1)
        );
    }
}

#[test]
fn collector_says_its_prefix_and_constant_labels() {
    let c = SpecDecodeCollector::from_histogram(random_histogram(2, 10, 1));
    assert_eq!(c.prefix(), "spec_decode");
    assert!(c.const_labels().is_empty());
    let c = c
        .with_prefix(VLLM_METRIC_PREFIX)
        .unwrap()
        .with_const_labels([("model_name", "m"), ("engine", "0")])
        .unwrap();
    assert_eq!(c.prefix(), "vllm:spec_decode");
    assert_eq!(
        c.const_labels(),
        &[
            ("model_name".to_owned(), "m".to_owned()),
            ("engine".to_owned(), "0".to_owned())
        ]
    );
}

#[test]
fn vllm_prefix_gives_vllms_exact_names() {
    let h = random_histogram(3, 300, 8);
    for format in [TextFormat::PrometheusText, TextFormat::OpenMetrics] {
        let text = SpecDecodeCollector::from_histogram(h.clone())
            .with_prefix(VLLM_METRIC_PREFIX)
            .unwrap()
            .encode_text(format);
        let samples = parse_samples(&text);
        let names: BTreeSet<&str> = samples.iter().map(|s| s.name.as_str()).collect();
        let expected: BTreeSet<&str> = [
            "vllm:spec_decode_num_drafts_total",
            "vllm:spec_decode_num_draft_tokens_total",
            "vllm:spec_decode_num_accepted_tokens_total",
            "vllm:spec_decode_num_accepted_tokens_per_pos_total",
            "vllm:spec_decode_num_draft_tokens_per_pos_total",
            "vllm:spec_decode_acceptance_by_draft_length_total",
            "vllm:spec_decode_num_undrafted_steps_total",
            "vllm:spec_decode_num_rejected_observations_total",
            "vllm:spec_decode_scheduled_steps_total",
        ]
        .into();
        assert_eq!(names, expected, "{format:?}");
        assert_samples_match(&samples, VLLM_METRIC_PREFIX, &h, "vllm prefix");
        assert!(!text.contains("_total_total"));
    }
}

#[test]
fn descriptor_lines_name_the_family_as_each_format_requires() {
    let collector = SpecDecodeCollector::from_histogram(random_histogram(2, 50, 10));
    let open = collector.encode_text(TextFormat::OpenMetrics);
    let classic = collector.encode_text(TextFormat::PrometheusText);
    for f in METRIC_FAMILIES {
        let base = f.strip_suffix("_total").unwrap();
        // OpenMetrics: family without the suffix, samples with it.
        assert!(
            open.contains(&format!("# TYPE spec_decode_{base} counter\n")),
            "{f}"
        );
        assert!(open.contains(&format!("# HELP spec_decode_{base} ")), "{f}");
        // 0.0.4: HELP and TYPE name the sample; every family has HELP text.
        assert!(
            classic.contains(&format!("# TYPE spec_decode_{f} counter\n")),
            "{f}"
        );
        let help = classic
            .lines()
            .find_map(|l| l.strip_prefix(&format!("# HELP spec_decode_{f} ")))
            .unwrap_or_else(|| panic!("no HELP for {f}"));
        assert!(help.len() > 10, "{f}: help {help:?}");
    }
    assert!(open.ends_with("# EOF\n"));
    assert!(!classic.contains("# EOF"));
    // The sample lines are identical.
    let samples = |t: &str| {
        t.lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(samples(&open), samples(&classic));
}

#[test]
fn const_labels_appear_on_every_sample_before_the_familys_own() {
    let labels = [("model_name", "m"), ("engine", "3"), ("zone", "")];
    for format in [TextFormat::PrometheusText, TextFormat::OpenMetrics] {
        let text = SpecDecodeCollector::from_histogram(random_histogram(4, 400, 11))
            .with_const_labels(labels)
            .unwrap()
            .encode_text(format);
        let samples = parse_samples(&text);
        assert_eq!(samples.len(), 5 + 2 * 4 + 15 + 5);
        for s in &samples {
            let head: Vec<(&str, &str)> = s.labels[..3]
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_str()))
                .collect();
            assert_eq!(head, labels, "{s:?}");
        }
    }
}

#[test]
fn registry_prefix_and_labels_compose_with_the_collectors() {
    let mut registry =
        Registry::with_prefix_and_labels("myengine", [("replica".into(), "r1".into())].into_iter());
    registry.register_collector(Box::new(
        SpecDecodeCollector::from_histogram(random_histogram(2, 20, 12))
            .with_const_labels([("model_name", "m")])
            .unwrap(),
    ));
    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    let samples = parse_samples(&text);
    assert!(
        samples
            .iter()
            .all(|s| s.name.starts_with("myengine_spec_decode_") && s.name.ends_with("_total"))
    );
    assert!(
        samples
            .iter()
            .all(|s| s.labels[0] == ("replica".into(), "r1".into())
                && s.labels[1] == ("model_name".into(), "m".into()))
    );
}

#[test]
fn invalid_prefix_and_labels_are_rejected_with_clear_errors() {
    let c = || SpecDecodeCollector::from_histogram(AcceptanceHistogram::new(1).unwrap());
    for bad in ["", "9lives", "spec-decode", "spec decode", "é"] {
        assert_eq!(
            c().with_prefix(bad).unwrap_err(),
            NameError::Prefix(bad.into())
        );
    }
    assert!(c().with_prefix("_ok:name_9").is_ok());
    assert_eq!(
        c().with_const_labels([("a:b", "x")]).unwrap_err(),
        NameError::LabelName("a:b".into())
    );
    for reserved in [
        "position",
        "draft_length",
        "accepted",
        "num_spec_tokens",
        "__name__",
    ] {
        assert_eq!(
            c().with_const_labels([(reserved, "x")]).unwrap_err(),
            NameError::ReservedLabelName(reserved.into())
        );
    }
    assert_eq!(
        c().with_const_labels([("m", "1"), ("m", "2")]).unwrap_err(),
        NameError::DuplicateLabelName("m".into())
    );
    let msg = c().with_prefix("a-b").unwrap_err().to_string();
    assert!(msg.contains("a-b") && msg.contains("[a-zA-Z_:]"), "{msg}");
}

#[test]
fn content_negotiation_follows_the_accept_header() {
    let prometheus_2_42 = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    assert_eq!(
        TextFormat::from_accept(prometheus_2_42),
        TextFormat::OpenMetrics
    );
    assert_eq!(TextFormat::from_accept(""), TextFormat::PrometheusText);
    assert_eq!(TextFormat::from_accept("*/*"), TextFormat::PrometheusText);
    assert_eq!(
        TextFormat::from_accept("text/plain;version=0.0.4"),
        TextFormat::PrometheusText
    );
    assert_eq!(
        TextFormat::from_accept("application/openmetrics-text; q=0"),
        TextFormat::PrometheusText
    );
    assert_eq!(
        TextFormat::PrometheusText.content_type(),
        "text/plain; version=0.0.4; charset=utf-8"
    );
    assert_eq!(
        TextFormat::OpenMetrics.content_type(),
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
}

// ---------------------------------------------------------------------------
// the plan's gauge

fn plan(draft_len: usize, max_draft_len: usize) -> Arc<SharedPlan> {
    Arc::new(SharedPlan::new(
        DraftPlan::new(draft_len, max_draft_len).unwrap(),
    ))
}

/// The one sample of the gauge, and its `# TYPE` line, in `text`.
fn gauge_in(text: &str, prefix: &str) -> (Sample, bool) {
    let name = format!("{prefix}_{PLAN_GAUGE}");
    let samples = parse_samples(text);
    let gauge = family(&samples, &name);
    assert_eq!(gauge.len(), 1, "{gauge:?}\n{text}");
    let typed = text.contains(&format!("# TYPE {name} gauge\n"));
    (gauge[0].clone(), typed)
}

#[test]
fn plan_gauge_shows_the_published_draft_length_at_each_scrape() {
    let recorder = Recorder::new(8).unwrap();
    let shared = plan(2, 8);
    let collector = SpecDecodeCollector::new(recorder.clone()).with_plan(Arc::clone(&shared));
    assert!(std::ptr::addr_eq(
        Arc::as_ptr(collector.plan().unwrap()),
        Arc::as_ptr(&shared)
    ));
    let mut registry = Registry::default();
    registry.register_collector(Box::new(collector.clone()));
    for k in [2, 7, 0, 8] {
        shared.publish(DraftPlan::new(k, 8).unwrap());
        for format in [TextFormat::PrometheusText, TextFormat::OpenMetrics] {
            let (gauge, typed) = gauge_in(&collector.encode_text(format), DEFAULT_METRIC_PREFIX);
            assert_eq!(gauge.value, k as u64, "{format:?}");
            assert!(gauge.labels.is_empty());
            assert!(typed, "{format:?}: not typed as a gauge");
        }
        // Through a registry, as a scrape gets it.
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert_eq!(gauge_in(&text, DEFAULT_METRIC_PREFIX).0.value, k as u64);
    }
    // The counter families are all there too, and nothing else.
    let text = collector.encode_text(TextFormat::PrometheusText);
    let samples = parse_samples(&text);
    let without_gauge: Vec<Sample> = samples
        .iter()
        .filter(|s| !s.name.ends_with(PLAN_GAUGE))
        .cloned()
        .collect();
    assert_eq!(without_gauge.len() + 1, samples.len());
    assert_samples_match(
        &without_gauge,
        DEFAULT_METRIC_PREFIX,
        &recorder.snapshot(),
        "with plan",
    );
}

#[test]
fn without_a_plan_there_is_no_gauge() {
    let collector = SpecDecodeCollector::from_histogram(random_histogram(3, 100, 13));
    assert!(collector.plan().is_none());
    for format in [TextFormat::PrometheusText, TextFormat::OpenMetrics] {
        assert!(!collector.encode_text(format).contains(PLAN_GAUGE));
    }
}

#[test]
fn plan_gauge_keeps_its_name_and_labels_through_prefix_and_const_labels() {
    // `with_plan` first or last: the prefix and labels apply to the gauge too.
    let shared = plan(3, 5);
    let h = random_histogram(5, 500, 14);
    let labels = [("model_name", "m"), ("engine", "0")];
    let first = SpecDecodeCollector::from_histogram(h.clone())
        .with_plan(Arc::clone(&shared))
        .with_prefix(VLLM_METRIC_PREFIX)
        .unwrap()
        .with_const_labels(labels)
        .unwrap();
    let last = SpecDecodeCollector::from_histogram(h)
        .with_prefix(VLLM_METRIC_PREFIX)
        .unwrap()
        .with_const_labels(labels)
        .unwrap()
        .with_plan(shared);
    for collector in [first, last] {
        for format in [TextFormat::PrometheusText, TextFormat::OpenMetrics] {
            let text = collector.encode_text(format);
            let (gauge, typed) = gauge_in(&text, VLLM_METRIC_PREFIX);
            assert!(typed, "{format:?}");
            assert_eq!(gauge.value, 3);
            let labels_seen: Vec<(&str, &str)> = gauge
                .labels
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_str()))
                .collect();
            assert_eq!(labels_seen, labels);
            assert!(!text.contains("controller_draft_length_total"), "{text}");
        }
    }
}

#[test]
fn promtool_accepts_the_plan_gauge() {
    for labels in [vec![], vec![("model_name", "m"), ("engine", "0")]] {
        let text = SpecDecodeCollector::from_histogram(random_histogram(4, 300, 15))
            .with_const_labels(labels.clone())
            .unwrap()
            .with_plan(plan(4, 4))
            .encode_text(TextFormat::PrometheusText);
        assert!(text.contains("# TYPE spec_decode_controller_draft_length gauge\n"));
        if let Some(findings) = promtool_findings(&text) {
            assert!(findings.is_empty(), "{labels:?}: {findings:?}\n{text}");
        }
    }
    // With vLLM's prefix, only the colon lint, once per family.
    let text = SpecDecodeCollector::from_histogram(random_histogram(4, 300, 16))
        .with_prefix(VLLM_METRIC_PREFIX)
        .unwrap()
        .with_plan(plan(1, 4))
        .encode_text(TextFormat::PrometheusText);
    if let Some(findings) = promtool_findings(&text) {
        assert_eq!(findings.len(), METRIC_FAMILIES.len() + 1, "{findings:?}");
        assert!(
            findings
                .iter()
                .all(|f| f.ends_with("metric names should not contain ':'")),
            "{findings:?}"
        );
    }
}
