//! What exporting costs the metrics thread: one `MetricsPublisher::publish`
//! (the `metrics` facade, feature `metrics`) against the
//! `prometheus-client` collector's encoding, on the same recorder, at K = 8
//! and K = 64 with 8 and 256 live workers. Every bucket of every shard has
//! been written, the constant labels are vLLM's `model_name` and `engine`,
//! and both export the plan's gauge.
//!
//! - `snapshot`: `Recorder::snapshot()` alone, the floor of every variant.
//! - `metrics_publish`: `publish()` into `metrics-exporter-prometheus`'s
//!   recorder (handles bound by an earlier publish): a snapshot plus one
//!   `Counter::absolute` per series.
//! - `metrics_publish_render`: the same plus `PrometheusHandle::render()`,
//!   what the exporter does at each scrape (the engine's `/metrics`).
//! - `collector_encode_text`: `SpecDecodeCollector::encode_text` in the
//!   classic text format (snapshot, encode, convert).
//! - `collector_encode_registry`: `prometheus_client::encoding::text::encode`
//!   of a registry holding the collector: the OpenMetrics a scrape gets.
//! - `crate_gather_text`: `PrometheusCrateCollector` (feature
//!   `tikv-prometheus`) in a `prometheus::Registry`: `gather()` and the
//!   `TextEncoder`, what a scrape of such an engine costs.
//! - `otel_collect`: `OpenTelemetryExporter` (feature `opentelemetry`)
//!   registered with an SDK `MeterProvider` whose `PeriodicReader` exports
//!   into the SDK's in-memory exporter: one `force_flush()` (the callbacks,
//!   the SDK's aggregation and export, a round trip to the reader's thread)
//!   and the in-memory exporter's `reset()`. The cardinality limit is
//!   raised to every bucket, so K = 64 exports all 2,145.
//!
//! See `benches/README.md` for results.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use metrics_exporter_prometheus::PrometheusBuilder;
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_sdk::metrics::{
    InMemoryMetricExporter, Instrument, PeriodicReader, SdkMeterProvider, Stream,
};
use prometheus_client::registry::Registry;
use specdec_metrics::{
    DraftPlan, MetricsPublisher, OpenTelemetryExporter, PrometheusCrateCollector, Recorder,
    SharedPlan, SpecDecodeCollector, TextFormat, VLLM_METRIC_PREFIX,
};
use tikv_prometheus::Encoder as _;

const LABELS: [(&str, &str); 2] = [
    ("model_name", "meta-llama/Llama-3.1-8B-Instruct"),
    ("engine", "0"),
];

fn publish(c: &mut Criterion) {
    let mut group = c.benchmark_group("publish");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30);
    for max in [8, 64] {
        for workers in [8, 256] {
            let recorder = Arc::new(Recorder::new(max).unwrap());
            let handles: Vec<_> = (0..workers).map(|_| recorder.worker()).collect();
            for worker in &handles {
                for k in 0..=max {
                    for a in 0..=k {
                        worker.observe(k, a).unwrap();
                    }
                }
                worker.observe_undrafted();
                worker.observe_scheduled(max / 2).unwrap();
            }
            let plan = Arc::new(SharedPlan::new(DraftPlan::new(max / 2, max).unwrap()));
            let parameter = format!("K={max}/workers={workers}");

            let exporter = PrometheusBuilder::new().build_recorder();
            let scrape = exporter.handle();
            let publisher = MetricsPublisher::new(Arc::clone(&recorder), VLLM_METRIC_PREFIX)
                .unwrap()
                .with_const_labels(LABELS)
                .unwrap()
                .with_plan(Arc::clone(&plan));
            // Registers the handles; every measured publish reuses them.
            metrics::with_local_recorder(&exporter, || publisher.publish());

            let collector = SpecDecodeCollector::new((*recorder).clone())
                .with_prefix(VLLM_METRIC_PREFIX)
                .unwrap()
                .with_const_labels(LABELS)
                .unwrap()
                .with_plan(Arc::clone(&plan));
            let mut registry = Registry::default();
            registry.register_collector(Box::new(collector.clone()));

            let crate_registry = tikv_prometheus::Registry::new();
            crate_registry
                .register(Box::new(
                    PrometheusCrateCollector::new((*recorder).clone())
                        .with_prefix(VLLM_METRIC_PREFIX)
                        .unwrap()
                        .with_const_labels(LABELS)
                        .unwrap()
                        .with_plan(Arc::clone(&plan)),
                ))
                .unwrap();

            let otel = OpenTelemetryExporter::new((*recorder).clone())
                .with_prefix(VLLM_METRIC_PREFIX)
                .unwrap()
                .with_const_labels(LABELS)
                .unwrap()
                .with_plan(Arc::clone(&plan));
            let limit = otel.max_series_per_instrument();
            let exported = InMemoryMetricExporter::default();
            let provider = SdkMeterProvider::builder()
                .with_reader(PeriodicReader::builder(exported.clone()).build())
                .with_view(move |_: &Instrument| {
                    Stream::builder().with_cardinality_limit(limit).build().ok()
                })
                .build();
            otel.register(&provider.meter("specdec-metrics"));

            group.bench_function(BenchmarkId::new("snapshot", &parameter), |b| {
                b.iter(|| recorder.snapshot());
            });
            group.bench_function(BenchmarkId::new("metrics_publish", &parameter), |b| {
                b.iter(|| publisher.publish());
            });
            group.bench_function(
                BenchmarkId::new("metrics_publish_render", &parameter),
                |b| {
                    b.iter(|| {
                        publisher.publish();
                        scrape.render()
                    });
                },
            );
            group.bench_function(BenchmarkId::new("collector_encode_text", &parameter), |b| {
                b.iter(|| collector.encode_text(black_box(TextFormat::PrometheusText)));
            });
            group.bench_function(
                BenchmarkId::new("collector_encode_registry", &parameter),
                |b| {
                    b.iter(|| {
                        let mut text = String::new();
                        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
                        text
                    });
                },
            );
            group.bench_function(BenchmarkId::new("crate_gather_text", &parameter), |b| {
                b.iter(|| {
                    let mut text = Vec::new();
                    tikv_prometheus::TextEncoder::new()
                        .encode(&crate_registry.gather(), &mut text)
                        .unwrap();
                    text
                });
            });
            group.bench_function(BenchmarkId::new("otel_collect", &parameter), |b| {
                b.iter(|| {
                    provider.force_flush().unwrap();
                    exported.reset();
                });
            });
            provider.shutdown().unwrap();
            drop(handles);
        }
    }
    group.finish();
}

criterion_group!(benches, publish);
criterion_main!(benches);
