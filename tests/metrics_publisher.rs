//! `MetricsPublisher` (cargo feature `metrics`) against the real parts:
//! `metrics-exporter-prometheus`'s recorder renders exactly the series,
//! values, help texts and types that `SpecDecodeCollector` encodes for the
//! same recorder, promtool accepts the rendering, a publish after the first
//! allocates nothing per series, and the background thread publishes and
//! stops. `metrics-util`'s debugging recorder checks what is registered.
//!
//! No test here installs a global recorder (each uses
//! `metrics::with_local_recorder` for the first publish, which binds the
//! handles); `tests/metrics_global.rs` does, in its own process.

mod exposition_text;

use std::sync::Arc;
use std::time::Duration;

use exposition_text::{descriptor_lines, promtool_findings, sample_lines, value_of};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusRecorder};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use rand::{RngCore, SeedableRng};
use rand_xoshiro::SplitMix64;
use specdec_metrics::{
    DEFAULT_METRIC_PREFIX, DraftPlan, METRIC_FAMILIES, MetricsPublisher, NameError, PLAN_GAUGE,
    Recorder, SharedPlan, SpecDecodeCollector, TextFormat, VLLM_METRIC_PREFIX,
};
use specdec_test_support::allocations_during;

// ---------------------------------------------------------------------------
// helpers

/// `workers` threads, each with its own `Worker`, record `steps` random
/// steps: valid ones over the whole triangle, undrafted ones, scheduled
/// budgets and a few invalid observations of both kinds.
fn record(recorder: &Recorder, workers: usize, steps: usize, seed: u64) {
    let k_max = recorder.max_draft_len();
    std::thread::scope(|s| {
        for t in 0..workers {
            s.spawn(move || {
                let mut rng = SplitMix64::seed_from_u64(seed + t as u64);
                let mut below = |n: usize| (rng.next_u64() % n as u64) as usize;
                let worker = recorder.worker();
                for _ in 0..steps {
                    match below(20) {
                        0 => worker.observe_undrafted(),
                        1 => assert!(worker.observe(k_max + 1, 0).is_err()),
                        2..=4 => {
                            let b = below(k_max + 2);
                            assert_eq!(worker.observe_scheduled(b).is_ok(), b <= k_max);
                        }
                        _ => {
                            let k = below(k_max + 1);
                            worker.observe(k, below(k + 1)).unwrap();
                        }
                    }
                }
            });
        }
    });
}

fn plan(draft_len: usize, max_draft_len: usize) -> Arc<SharedPlan> {
    Arc::new(SharedPlan::new(
        DraftPlan::new(draft_len, max_draft_len).unwrap(),
    ))
}

/// What `metrics-exporter-prometheus` renders after one publish bound to
/// `exporter`.
fn publish_and_render(publisher: &MetricsPublisher, exporter: &PrometheusRecorder) -> String {
    metrics::with_local_recorder(exporter, || publisher.publish());
    exporter.handle().render()
}

/// The number of counter series at `K`: five unlabelled families, two
/// per-position ones, the triangle and the budgets.
fn counter_series(k: usize) -> usize {
    5 + 2 * k + (k + 1) * (k + 2) / 2 + (k + 1)
}

// ---------------------------------------------------------------------------
// the exporter renders what the collector encodes

#[test]
fn the_exporter_renders_exactly_the_collectors_series_values_and_descriptors() {
    let recorder = Arc::new(Recorder::new(5).unwrap());
    record(&recorder, 3, 4_000, 1);
    let shared_plan = plan(3, 5);
    let labels = [
        ("model_name", "meta-llama/Llama-3.1-8B \"q\""),
        ("engine", "0"),
    ];
    for prefix in [DEFAULT_METRIC_PREFIX, VLLM_METRIC_PREFIX, "my_engine:spec"] {
        for with_labels in [false, true] {
            for with_plan in [false, true] {
                let what = format!("prefix {prefix}, labels {with_labels}, plan {with_plan}");
                let mut collector = SpecDecodeCollector::new((*recorder).clone())
                    .with_prefix(prefix)
                    .unwrap();
                let mut publisher = MetricsPublisher::new(Arc::clone(&recorder), prefix).unwrap();
                if with_labels {
                    collector = collector.with_const_labels(labels).unwrap();
                    publisher = publisher.with_const_labels(labels).unwrap();
                }
                if with_plan {
                    collector = collector.with_plan(Arc::clone(&shared_plan));
                    publisher = publisher.with_plan(Arc::clone(&shared_plan));
                }
                let exporter = PrometheusBuilder::new().build_recorder();
                let rendered = publish_and_render(&publisher, &exporter);
                let encoded = collector.encode_text(TextFormat::PrometheusText);

                let samples = sample_lines(&rendered);
                assert_eq!(samples, sample_lines(&encoded), "{what}\n{rendered}");
                assert_eq!(
                    samples.len(),
                    counter_series(5) + usize::from(with_plan),
                    "{what}"
                );
                assert_eq!(
                    descriptor_lines(&rendered),
                    descriptor_lines(&encoded),
                    "{what}"
                );
                assert_eq!(
                    descriptor_lines(&rendered).len(),
                    2 * (METRIC_FAMILIES.len() + usize::from(with_plan)),
                    "{what}"
                );
            }
        }
    }
}

#[test]
fn every_publish_renders_the_recorders_current_totals() {
    let recorder = Arc::new(Recorder::new(4).unwrap());
    let shared_plan = plan(2, 4);
    let collector = SpecDecodeCollector::new((*recorder).clone())
        .with_prefix(VLLM_METRIC_PREFIX)
        .unwrap()
        .with_plan(Arc::clone(&shared_plan));
    let publisher = MetricsPublisher::new(Arc::clone(&recorder), VLLM_METRIC_PREFIX)
        .unwrap()
        .with_plan(Arc::clone(&shared_plan));
    let exporter = PrometheusBuilder::new().build_recorder();
    // Empty first: every series is there at zero from the first publish on.
    let first = publish_and_render(&publisher, &exporter);
    assert_eq!(sample_lines(&first).len(), counter_series(4) + 1);
    assert_eq!(
        sample_lines(&first),
        sample_lines(&collector.encode_text(TextFormat::PrometheusText))
    );
    for (round, draft_len) in [(1, 4), (2, 0), (3, 1)] {
        record(&recorder, 2, 1_000, 10 + round);
        shared_plan.publish(DraftPlan::new(draft_len, 4).unwrap());
        // Bound at the first publish: later ones need no local recorder.
        publisher.publish();
        let rendered = exporter.handle().render();
        assert_eq!(
            sample_lines(&rendered),
            sample_lines(&collector.encode_text(TextFormat::PrometheusText)),
            "round {round}"
        );
        assert_eq!(
            value_of(&rendered, "vllm:spec_decode_num_drafts_total"),
            Some(recorder.snapshot().num_spec_steps() as f64)
        );
        assert_eq!(
            value_of(&rendered, &format!("vllm:spec_decode_{PLAN_GAUGE}")),
            Some(draft_len as f64)
        );
    }
}

#[test]
fn global_labels_come_first_then_const_labels_then_the_familys_own() {
    let recorder = Arc::new(Recorder::new(2).unwrap());
    record(&recorder, 1, 200, 3);
    let publisher = MetricsPublisher::new(Arc::clone(&recorder), DEFAULT_METRIC_PREFIX)
        .unwrap()
        .with_const_labels([("model_name", "m"), ("engine", "1")])
        .unwrap()
        .with_plan(plan(1, 2));
    let exporter = PrometheusBuilder::new()
        .add_global_label("replica", "r7")
        .add_global_label("engine", "global")
        .build_recorder();
    let rendered = publish_and_render(&publisher, &exporter);
    let samples = sample_lines(&rendered);
    assert_eq!(samples.len(), counter_series(2) + 1);
    for line in &samples {
        // The publisher's `engine` replaces the global value in its place.
        assert!(
            line.contains("{replica=\"r7\",engine=\"1\",model_name=\"m\""),
            "{line}"
        );
    }
    let bucket = "spec_decode_acceptance_by_draft_length_total\
                  {replica=\"r7\",engine=\"1\",model_name=\"m\",draft_length=\"2\",accepted=\"1\"}";
    assert_eq!(
        value_of(&rendered, bucket),
        Some(recorder.snapshot().count(2, 1) as f64)
    );
}

#[test]
fn label_values_with_a_backslash_are_the_exporters_to_escape() {
    // docs/metrics-facade.md: metrics-exporter-prometheus 0.18 reads `\\`
    // and `\"` in a value as already escaped; other values render as the
    // collector encodes them.
    let recorder = Arc::new(Recorder::new(1).unwrap());
    let render = |value: &str| {
        let publisher = MetricsPublisher::new(Arc::clone(&recorder), "x")
            .unwrap()
            .with_const_labels([("model_name", value)])
            .unwrap();
        let collector = SpecDecodeCollector::new((*recorder).clone())
            .with_prefix("x")
            .unwrap()
            .with_const_labels([("model_name", value)])
            .unwrap();
        let rendered = publish_and_render(&publisher, &PrometheusBuilder::new().build_recorder());
        (
            sample_lines(&rendered),
            sample_lines(&collector.encode_text(TextFormat::PrometheusText)),
        )
    };
    for same in ["say \"hi\"", "a\\b", "line\nbreak", "é"] {
        let (rendered, encoded) = render(same);
        assert_eq!(rendered, encoded, "{same:?}");
    }
    for differs in ["a\\\\b", "a\\\"b"] {
        let (rendered, encoded) = render(differs);
        assert_ne!(rendered, encoded, "{differs:?}");
    }
}

// ---------------------------------------------------------------------------
// promtool

#[test]
fn promtool_accepts_the_rendered_text() {
    let recorder = Arc::new(Recorder::new(8).unwrap());
    record(&recorder, 4, 2_000, 4);
    for labels in [vec![], vec![("model_name", "m"), ("engine", "0")]] {
        let publisher = MetricsPublisher::new(Arc::clone(&recorder), DEFAULT_METRIC_PREFIX)
            .unwrap()
            .with_const_labels(labels.clone())
            .unwrap()
            .with_plan(plan(5, 8));
        let exporter = PrometheusBuilder::new().build_recorder();
        let rendered = publish_and_render(&publisher, &exporter);
        assert!(rendered.contains("# TYPE spec_decode_num_drafts_total counter\n"));
        if let Some(findings) = promtool_findings(&rendered) {
            assert!(
                findings.is_empty(),
                "{labels:?}: promtool findings {findings:?}\n{rendered}"
            );
        }
    }
    // With vLLM's names, only the lint on ':' (once per family), as for the
    // collector.
    let publisher = MetricsPublisher::new(Arc::clone(&recorder), VLLM_METRIC_PREFIX)
        .unwrap()
        .with_plan(plan(5, 8));
    let rendered = publish_and_render(&publisher, &PrometheusBuilder::new().build_recorder());
    if let Some(findings) = promtool_findings(&rendered) {
        assert_eq!(findings.len(), METRIC_FAMILIES.len() + 1, "{findings:?}");
        assert!(
            findings
                .iter()
                .all(|f| f.ends_with("metric names should not contain ':'")),
            "{findings:?}"
        );
    }
}

// ---------------------------------------------------------------------------
// allocations

/// What a publish may allocate: the snapshot, and the temporary lists of
/// `K + 1` counts behind the figures it derives (the accepted-token total
/// and the two per-position lists).
fn snapshot_allocations(recorder: &Recorder) -> usize {
    allocations_during(|| {
        let snapshot = recorder.snapshot();
        std::hint::black_box(snapshot.num_accepted_draft_tokens());
        std::hint::black_box(snapshot.num_accepted_tokens_per_pos());
        std::hint::black_box(snapshot.num_draft_tokens_per_pos());
    })
}

#[test]
fn a_publish_after_the_first_allocates_only_the_snapshot() {
    let mut per_publish = Vec::new();
    for k in [1, 8, 64] {
        for workers in [1, 8, 256] {
            let recorder = Arc::new(Recorder::new(k).unwrap());
            let held: Vec<_> = (0..workers).map(|_| recorder.worker()).collect();
            for (i, worker) in held.iter().enumerate() {
                worker.observe(i % (k + 1), 0).unwrap();
            }
            let publisher = MetricsPublisher::new(Arc::clone(&recorder), VLLM_METRIC_PREFIX)
                .unwrap()
                .with_const_labels([("model_name", "m"), ("engine", "0")])
                .unwrap()
                .with_plan(plan(1, k));
            let exporter = PrometheusBuilder::new().build_recorder();
            let first = allocations_during(|| {
                metrics::with_local_recorder(&exporter, || publisher.publish());
            });
            held[0].observe(k, k).unwrap();
            let later = allocations_during(|| publisher.publish());
            let snapshot = snapshot_allocations(&recorder);
            // The first publish registers a key per series; later ones
            // only take the snapshot.
            assert!(
                first > counter_series(k),
                "K={k}, {workers} workers: first publish {first}"
            );
            assert_eq!(later, snapshot, "K={k}, {workers} workers");
            per_publish.push(later);
            // And the publish did set the new value.
            let rendered = exporter.handle().render();
            let bucket = format!(
                "vllm:spec_decode_acceptance_by_draft_length_total\
                 {{model_name=\"m\",engine=\"0\",draft_length=\"{k}\",accepted=\"{k}\"}}"
            );
            assert_eq!(value_of(&rendered, &bucket), Some(1.0));
        }
    }
    // Neither K nor the number of workers changes it.
    assert!(
        per_publish.iter().all(|&n| n == per_publish[0]),
        "{per_publish:?}"
    );
    assert!(per_publish[0] > 0, "the counting allocator counts nothing");
}

// ---------------------------------------------------------------------------
// what is registered (the debugging recorder)

/// A counter or gauge the debugging recorder holds: name, labels,
/// description, value.
type Registered = (String, Vec<(String, String)>, String, f64);

/// Every counter and gauge the debugging recorder holds, sorted.
fn registered(snapshotter: &Snapshotter) -> Vec<Registered> {
    let mut out: Vec<_> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _unit, description, value)| {
            let labels = key
                .key()
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            let value = match value {
                DebugValue::Counter(v) => v as f64,
                DebugValue::Gauge(v) => v.into_inner(),
                DebugValue::Histogram(_) => panic!("no histogram is published"),
            };
            (
                key.key().name().to_owned(),
                labels,
                description.map(|d| d.to_string()).unwrap_or_default(),
                value,
            )
        })
        .collect();
    out.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    out
}

#[test]
fn registers_each_series_once_with_its_labels_and_help_text() {
    let recorder = Arc::new(Recorder::new(3).unwrap());
    record(&recorder, 2, 500, 5);
    let publisher = MetricsPublisher::new(Arc::clone(&recorder), "x")
        .unwrap()
        .with_const_labels([("model_name", "m")])
        .unwrap()
        .with_plan(plan(2, 3));
    assert!(format!("{publisher:?}").contains("registered_series: None"));
    let debugging = DebuggingRecorder::new();
    let snapshotter = debugging.snapshotter();
    metrics::with_local_recorder(&debugging, || {
        publisher.publish();
        publisher.publish(); // registers nothing more
    });
    assert!(
        format!("{publisher:?}")
            .contains(&format!("registered_series: Some({})", counter_series(3))),
        "{publisher:?}"
    );
    let series = registered(&snapshotter);
    assert_eq!(series.len(), counter_series(3) + 1);
    let snapshot = recorder.snapshot();
    let help = |name: &str| {
        let text = SpecDecodeCollector::from_histogram(snapshot.clone())
            .encode_text(TextFormat::PrometheusText);
        let wanted = format!("# HELP spec_decode_{name} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&wanted).map(str::to_owned))
            .unwrap()
    };
    for (name, labels, description, value) in &series {
        assert_eq!(labels[0], ("model_name".to_owned(), "m".to_owned()));
        let family = name.strip_prefix("x_").unwrap();
        if family == PLAN_GAUGE {
            assert_eq!(labels.len(), 1);
            assert_eq!(*value, 2.0);
            assert!(description.starts_with("The draft length the drafting controller"));
            continue;
        }
        assert_eq!(*description, help(family), "{name}");
        let own: Vec<(&str, usize)> = labels[1..]
            .iter()
            .map(|(n, v)| (n.as_str(), v.parse().unwrap()))
            .collect();
        let expected = match (family, own.as_slice()) {
            ("num_drafts_total", []) => snapshot.num_spec_steps(),
            ("num_draft_tokens_total", []) => snapshot.num_draft_tokens(),
            ("num_accepted_tokens_total", []) => snapshot.num_accepted_draft_tokens(),
            ("num_undrafted_steps_total", []) => snapshot.num_undrafted_steps(),
            ("num_rejected_observations_total", []) => snapshot.num_rejected_observations(),
            ("num_accepted_tokens_per_pos_total", [("position", i)]) => {
                snapshot.num_accepted_tokens_per_pos()[*i]
            }
            ("num_draft_tokens_per_pos_total", [("position", i)]) => {
                snapshot.num_draft_tokens_per_pos()[*i]
            }
            ("acceptance_by_draft_length_total", [("draft_length", k), ("accepted", a)]) => {
                snapshot.count(*k, *a)
            }
            ("scheduled_steps_total", [("num_spec_tokens", b)]) => snapshot.scheduled_steps(*b),
            _ => panic!("unexpected series {name} {labels:?}"),
        };
        assert_eq!(*value, expected as f64, "{name} {labels:?}");
    }
    assert!(snapshot.num_spec_steps() > 0 && snapshot.num_rejected_observations() > 0);
}

#[test]
fn changing_labels_or_plan_registers_the_new_series_at_the_next_publish() {
    let recorder = Arc::new(Recorder::new(1).unwrap());
    let publisher = MetricsPublisher::new(Arc::clone(&recorder), "x").unwrap();
    let first = DebuggingRecorder::new();
    metrics::with_local_recorder(&first, || publisher.publish());
    assert_eq!(registered(&first.snapshotter()).len(), counter_series(1));

    let publisher = publisher.with_const_labels([("engine", "2")]).unwrap();
    let second = DebuggingRecorder::new();
    metrics::with_local_recorder(&second, || publisher.publish());
    let series = registered(&second.snapshotter());
    assert_eq!(series.len(), counter_series(1));
    assert!(
        series
            .iter()
            .all(|s| s.1[0] == ("engine".into(), "2".into()))
    );

    let publisher = publisher.with_plan(plan(1, 1));
    let third = DebuggingRecorder::new();
    metrics::with_local_recorder(&third, || publisher.publish());
    assert_eq!(
        registered(&third.snapshotter()).len(),
        counter_series(1) + 1
    );
}

#[test]
fn builders_check_names_and_keep_what_they_are_given() {
    let recorder = Arc::new(Recorder::new(2).unwrap());
    for bad in ["", "9x", "spec-decode", "a b"] {
        assert_eq!(
            MetricsPublisher::new(Arc::clone(&recorder), bad).unwrap_err(),
            NameError::Prefix(bad.into())
        );
    }
    let publisher = MetricsPublisher::new(Arc::clone(&recorder), VLLM_METRIC_PREFIX).unwrap();
    assert!(Arc::ptr_eq(publisher.recorder(), &recorder));
    assert_eq!(publisher.prefix(), VLLM_METRIC_PREFIX);
    assert!(publisher.plan().is_none() && publisher.const_labels().is_empty());
    let shared_plan = plan(1, 2);
    let publisher = publisher
        .with_plan(Arc::clone(&shared_plan))
        .with_const_labels([("model_name", "m"), ("engine", "0")])
        .unwrap();
    assert!(std::ptr::addr_eq(
        Arc::as_ptr(publisher.plan().unwrap()),
        Arc::as_ptr(&shared_plan)
    ));
    assert_eq!(
        publisher.const_labels(),
        [
            ("model_name".to_owned(), "m".to_owned()),
            ("engine".to_owned(), "0".to_owned())
        ]
    );
    assert_eq!(
        publisher
            .with_const_labels([("m", "1"), ("m", "2")])
            .unwrap_err(),
        NameError::DuplicateLabelName("m".into())
    );
}

// ---------------------------------------------------------------------------
// the background thread

/// The drafts counter of `snapshotter`, if registered.
fn drafts(snapshotter: &Snapshotter) -> Option<f64> {
    registered(snapshotter)
        .into_iter()
        .find(|s| s.0 == "x_num_drafts_total")
        .map(|s| s.3)
}

#[test]
fn the_thread_publishes_every_interval_and_once_more_when_stopped() {
    let recorder = Arc::new(Recorder::new(2).unwrap());
    let publisher = MetricsPublisher::new(Arc::clone(&recorder), "x").unwrap();
    // Bind the handles to a local recorder before handing the publisher
    // to the thread (which would otherwise use the global recorder).
    let debugging = DebuggingRecorder::new();
    let snapshotter = debugging.snapshotter();
    metrics::with_local_recorder(&debugging, || publisher.publish());
    assert_eq!(drafts(&snapshotter), Some(0.0));

    let handle = publisher.spawn(Duration::from_millis(2));
    let worker = recorder.worker();
    worker.observe(2, 1).unwrap();
    // Without any further call, the thread hands the step over (bounded
    // wait: a thread that never publishes fails the test).
    let mut seen = false;
    for _ in 0..5_000 {
        if drafts(&snapshotter) == Some(1.0) {
            seen = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(seen, "the thread did not publish within 10 s");

    // Recorded just before the stop: the last publish hands it over.
    for _ in 0..41 {
        worker.observe(1, 1).unwrap();
    }
    drop(handle);
    assert_eq!(drafts(&snapshotter), Some(42.0));
    // The thread ended and dropped the publisher with its recorder.
    assert_eq!(Arc::strong_count(&recorder), 1);
}

#[test]
fn dropping_the_handle_does_not_wait_for_the_interval() {
    let recorder = Arc::new(Recorder::new(2).unwrap());
    let publisher = MetricsPublisher::new(Arc::clone(&recorder), "x").unwrap();
    let debugging = DebuggingRecorder::new();
    let snapshotter = debugging.snapshotter();
    metrics::with_local_recorder(&debugging, || publisher.publish());
    let handle = publisher.spawn(Duration::from_secs(3600));
    recorder.observe(1, 0).unwrap();
    // Drop from another thread and wait a bounded time for it: a drop that
    // waited for the hour-long interval fails here instead of hanging.
    let (done, dropped) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(handle);
        done.send(()).unwrap();
    });
    dropped
        .recv_timeout(Duration::from_secs(60))
        .expect("dropping the handle waited for the interval");
    assert_eq!(drafts(&snapshotter), Some(1.0));
    assert_eq!(Arc::strong_count(&recorder), 1);
}

/// A `metrics` recorder that counts the `Counter::absolute` calls of every
/// counter it registered: a publish makes one per series.
struct CountingRecorder(Arc<std::sync::atomic::AtomicU64>);

struct AbsoluteCalls(Arc<std::sync::atomic::AtomicU64>);

impl metrics::CounterFn for AbsoluteCalls {
    fn increment(&self, _: u64) {}
    fn absolute(&self, _: u64) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl metrics::Recorder for CountingRecorder {
    fn describe_counter(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_gauge(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_histogram(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn register_counter(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        metrics::Counter::from_arc(Arc::new(AbsoluteCalls(Arc::clone(&self.0))))
    }
    fn register_gauge(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        metrics::Gauge::noop()
    }
    fn register_histogram(
        &self,
        _: &metrics::Key,
        _: &metrics::Metadata<'_>,
    ) -> metrics::Histogram {
        metrics::Histogram::noop()
    }
}

#[test]
fn a_zero_interval_is_raised_to_the_minimum_and_does_not_spin() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Instant;
    let recorder = Arc::new(Recorder::new(1).unwrap());
    let publisher = MetricsPublisher::new(Arc::clone(&recorder), "x").unwrap();
    let calls = Arc::new(AtomicU64::new(0));
    let counting = CountingRecorder(Arc::clone(&calls));
    metrics::with_local_recorder(&counting, || publisher.publish());
    let per_publish = calls.load(Ordering::Relaxed);
    assert!(per_publish > 0, "the first publish made no call");

    let started = Instant::now();
    let handle = publisher.spawn(Duration::ZERO);
    std::thread::sleep(Duration::from_millis(300));
    drop(handle);
    let elapsed = started.elapsed();
    let publishes = calls.load(Ordering::Relaxed) / per_publish - 1;
    // At least the first and the last; at most one per elapsed millisecond
    // (MIN_INTERVAL) and those two. Publishing back to back makes
    // thousands.
    let most = elapsed.as_millis() as u64 / MetricsPublisher::MIN_INTERVAL.as_millis() as u64 + 2;
    assert!(
        (2..=most).contains(&publishes),
        "{publishes} publishes in {elapsed:?} (at most {most})"
    );
}
