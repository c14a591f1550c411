//! What the `metrics` exporter promises, end to end: a program with
//! `metrics-exporter-prometheus` installed as the **global** `metrics`
//! recorder, a `Recorder` with a few workers, and a `MetricsPublisher` on its
//! background thread serves the families and values the
//! `prometheus-client` collector encodes for the same steps, and promtool
//! accepts it. Its own test binary: the global recorder is per process.

mod exposition_text;

use std::sync::Arc;
use std::time::Duration;

use exposition_text::{descriptor_lines, promtool_findings, sample_lines, value_of};
use metrics_exporter_prometheus::PrometheusBuilder;
use specdec_metrics::{
    DraftPlan, MetricsPublisher, Recorder, SharedPlan, SpecDecodeCollector, TextFormat,
};

#[test]
fn the_global_exporter_serves_what_the_collector_encodes() {
    let scrape = PrometheusBuilder::new()
        .install_recorder()
        .expect("the only global recorder of this process");
    // The engine's own metric, through the same recorder.
    metrics::describe_counter!("engine_requests_total", "Requests the engine served.");
    metrics::counter!("engine_requests_total").increment(7);

    let recorder = Arc::new(Recorder::new(6).unwrap());
    let plan = Arc::new(SharedPlan::new(DraftPlan::new(4, 6).unwrap()));
    let labels = [("model_name", "m"), ("engine", "0")];
    let publishing = MetricsPublisher::new(Arc::clone(&recorder), "spec_decode")
        .unwrap()
        .with_const_labels(labels)
        .unwrap()
        .with_plan(Arc::clone(&plan))
        .spawn(Duration::from_millis(5));

    std::thread::scope(|s| {
        for t in 0..4usize {
            let recorder = &recorder;
            s.spawn(move || {
                let worker = recorder.worker();
                for step in 0..5_000usize {
                    let k = (step * 7 + t) % 7;
                    worker.observe(k, (step + t) % (k + 1)).unwrap();
                    if step % 9 == 0 {
                        worker.observe_scheduled(step % 7).unwrap();
                    }
                    if step % 13 == t {
                        worker.observe_undrafted();
                    }
                }
                assert!(worker.observe(3, 4).is_err());
            });
        }
    });
    plan.publish(DraftPlan::new(2, 6).unwrap());

    // The thread publishes while the workers run, and keeps publishing.
    let total = recorder.snapshot().num_spec_steps();
    assert_eq!(total, 20_000);
    let drafts = "spec_decode_num_drafts_total{model_name=\"m\",engine=\"0\"}";
    let mut seen = false;
    for _ in 0..5_000 {
        if value_of(&scrape.render(), drafts) == Some(total as f64) {
            seen = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    assert!(
        seen,
        "the publisher thread did not hand over the steps within 10 s"
    );
    drop(publishing);

    let rendered = scrape.render();
    let collector = SpecDecodeCollector::new((*recorder).clone())
        .with_const_labels(labels)
        .unwrap()
        .with_plan(plan);
    let encoded = collector.encode_text(TextFormat::PrometheusText);
    // Everything the collector encodes, plus the engine's own counter.
    let mut expected = sample_lines(&encoded);
    expected.push("engine_requests_total 7".to_owned());
    expected.sort();
    assert_eq!(sample_lines(&rendered), expected, "{rendered}");
    let mut expected = descriptor_lines(&encoded);
    expected.push("# HELP engine_requests_total Requests the engine served.".to_owned());
    expected.push("# TYPE engine_requests_total counter".to_owned());
    expected.sort();
    assert_eq!(descriptor_lines(&rendered), expected);
    if let Some(findings) = promtool_findings(&rendered) {
        assert!(findings.is_empty(), "{findings:?}\n{rendered}");
    }
}
