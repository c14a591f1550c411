//! `OpenTelemetryExporter` (feature `opentelemetry`), through the SDK and
//! its in-memory exporter: after the same steps, every point equals the
//! sample of the `prometheus-client` collector of the same name (`:` as
//! `_`, without `_total`) and labels; one snapshot per collection; and the
//! SDK's cardinality limit against the largest `K`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{
    InMemoryMetricExporter, Instrument, PeriodicReader, SdkMeterProvider, Stream, Temporality,
};
use rand::{RngCore, SeedableRng};
use rand_xoshiro::SplitMix64;
use specdec_metrics::{
    DraftPlan, METRIC_FAMILIES, NameError, OpenTelemetryExporter, Recorder, SharedPlan,
    SpecDecodeCollector, TextFormat, VLLM_METRIC_PREFIX,
};

/// A point: the instrument name and the sorted attributes, with its value.
type Points = BTreeMap<(String, Vec<(String, String)>), u64>;

/// `steps` random steps into `recorder` (verify steps, undrafted steps,
/// scheduled budgets, a few rejected observations).
fn record(recorder: &Recorder, steps: usize, seed: u64) {
    let k_max = recorder.max_draft_len();
    let mut rng = SplitMix64::seed_from_u64(seed);
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
                let a = below(k + 1);
                worker.observe(k, a).unwrap();
            }
        }
    }
}

/// An SDK provider exporting into memory, with the cardinality limit of
/// every instrument set to `limit` (the SDK's default 2000 when `None`).
fn provider(limit: Option<usize>) -> (SdkMeterProvider, InMemoryMetricExporter) {
    let exported = InMemoryMetricExporter::default();
    let mut builder =
        SdkMeterProvider::builder().with_reader(PeriodicReader::builder(exported.clone()).build());
    if let Some(limit) = limit {
        builder = builder.with_view(move |_: &Instrument| {
            Stream::builder().with_cardinality_limit(limit).build().ok()
        });
    }
    (builder.build(), exported)
}

/// What one collection exports: every point of every instrument, and each
/// instrument's description, after checking that the counters are
/// cumulative monotonic sums and the gauge a gauge.
fn collect(
    provider: &SdkMeterProvider,
    exported: &InMemoryMetricExporter,
) -> (Points, BTreeMap<String, String>) {
    provider.force_flush().unwrap();
    let all = exported.get_finished_metrics().unwrap();
    exported.reset();
    let last = all.last().expect("one export");
    let mut points = Points::new();
    let mut descriptions = BTreeMap::new();
    for metric in last.scope_metrics().flat_map(|s| s.metrics()) {
        let name = metric.name().to_owned();
        descriptions.insert(name.clone(), metric.description().to_owned());
        let mut add = |attributes: Vec<(String, String)>, value: u64| {
            let mut attributes = attributes;
            attributes.sort();
            let old = points.insert((name.clone(), attributes), value);
            assert!(old.is_none(), "a point twice in {name}");
        };
        let attributes = |kvs: &mut dyn Iterator<Item = &opentelemetry::KeyValue>| {
            kvs.map(|kv| (kv.key.as_str().to_owned(), kv.value.as_str().into_owned()))
                .collect::<Vec<_>>()
        };
        match metric.data() {
            AggregatedMetrics::U64(MetricData::Sum(sum)) => {
                assert!(sum.is_monotonic(), "{name}");
                assert_eq!(sum.temporality(), Temporality::Cumulative, "{name}");
                assert!(!name.ends_with("draft_length") || name.contains("acceptance"));
                for p in sum.data_points() {
                    add(attributes(&mut p.attributes()), p.value());
                }
            }
            AggregatedMetrics::U64(MetricData::Gauge(gauge)) => {
                assert!(name.ends_with("_controller_draft_length"), "{name}");
                for p in gauge.data_points() {
                    add(attributes(&mut p.attributes()), p.value());
                }
            }
            _ => panic!("{name}: not a u64 sum or gauge"),
        }
    }
    (points, descriptions)
}

/// The classic text of the `prometheus-client` collector as points under
/// the OpenTelemetry names (`:` as `_`, no `_total`), and its help texts.
/// Label values must not hold `"`, `\` or `,` (the tests' do not).
fn collector_points(text: &str) -> (Points, BTreeMap<String, String>) {
    let otel_name = |name: &str| {
        let name = name.strip_suffix("_total").unwrap_or(name);
        name.replace(':', "_")
    };
    let mut points = Points::new();
    let mut help = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, text) = rest.split_once(' ').unwrap();
            help.insert(otel_name(name), text.to_owned());
            continue;
        }
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap();
        let (name, labels) = match series.split_once('{') {
            Some((name, labels)) => {
                let labels = labels.strip_suffix('}').unwrap();
                let mut labels: Vec<(String, String)> = labels
                    .split(',')
                    .map(|l| {
                        let (k, v) = l.split_once('=').unwrap();
                        (k.to_owned(), v.trim_matches('"').to_owned())
                    })
                    .collect();
                labels.sort();
                (name, labels)
            }
            None => (series, Vec::new()),
        };
        points.insert((otel_name(name), labels), value.parse().unwrap());
    }
    (points, help)
}

/// `K`, steps, prefix, constant labels, with a plan.
type Case = (
    usize,
    usize,
    &'static str,
    &'static [(&'static str, &'static str)],
    bool,
);

#[test]
fn every_point_equals_the_prometheus_client_collectors_sample() {
    let cases: [Case; 4] = [
        (1, 200, "spec_decode", &[], false),
        (
            5,
            5_000,
            VLLM_METRIC_PREFIX,
            &[("model_name", "llama"), ("engine", "0")],
            true,
        ),
        (8, 20_000, "spec_decode", &[("engine", "1")], true),
        (32, 20_000, VLLM_METRIC_PREFIX, &[], false),
    ];
    for (seed, (k_max, steps, prefix, labels, with_plan)) in cases.into_iter().enumerate() {
        let what = format!("K = {k_max}, {prefix}, labels {labels:?}, plan {with_plan}");
        let recorder = Recorder::new(k_max).unwrap();
        let plan = Arc::new(SharedPlan::new(DraftPlan::new(k_max / 2, k_max).unwrap()));
        let mut exporter = OpenTelemetryExporter::new(recorder.clone())
            .with_prefix(prefix)
            .unwrap()
            .with_const_labels(labels.iter().copied())
            .unwrap();
        let mut collector = SpecDecodeCollector::new(recorder.clone())
            .with_prefix(prefix)
            .unwrap()
            .with_const_labels(labels.iter().copied())
            .unwrap();
        if with_plan {
            exporter = exporter.with_plan(Arc::clone(&plan));
            collector = collector.with_plan(Arc::clone(&plan));
        }
        let (provider, exported) = provider(None);
        exporter.register(&provider.meter("specdec-metrics"));

        // Zero at first, every series present; then after the steps; then
        // after more steps and a new plan: the same as the collector each time.
        for round in 0..3 {
            if round > 0 {
                record(&recorder, steps, (seed * 10 + round) as u64);
                plan.publish(DraftPlan::new(round.min(k_max), k_max).unwrap());
            }
            let (points, descriptions) = collect(&provider, &exported);
            let (want, help) = collector_points(&collector.encode_text(TextFormat::PrometheusText));
            assert_eq!(points, want, "{what}, round {round}");
            assert_eq!(descriptions, help, "{what}");
            assert_eq!(
                points.len(),
                5 + 2 * k_max
                    + (k_max + 1) * (k_max + 2) / 2
                    + (k_max + 1)
                    + usize::from(with_plan),
                "{what}"
            );
        }
        let names: Vec<String> = descriptions_names(&provider, &exported);
        let mut expected: Vec<String> =
            exporter.instrument_names()[..9 + usize::from(with_plan)].to_vec();
        expected.sort();
        assert_eq!(names, expected, "{what}");
    }
}

/// The instrument names of one collection, sorted.
fn descriptions_names(
    provider: &SdkMeterProvider,
    exported: &InMemoryMetricExporter,
) -> Vec<String> {
    collect(provider, exported).1.into_keys().collect()
}

#[test]
fn names_map_the_colon_of_the_prefix_to_an_underscore() {
    let recorder = Recorder::new(2).unwrap();
    let vllm = OpenTelemetryExporter::new(recorder.clone())
        .with_prefix(VLLM_METRIC_PREFIX)
        .unwrap();
    let want: Vec<String> = METRIC_FAMILIES
        .iter()
        .map(|f| format!("vllm_spec_decode_{}", f.strip_suffix("_total").unwrap()))
        .chain(["vllm_spec_decode_controller_draft_length".to_owned()])
        .collect();
    assert_eq!(vllm.instrument_names(), want);
    assert_eq!(
        OpenTelemetryExporter::new(recorder.clone()).instrument_names()[0],
        "spec_decode_num_drafts"
    );
    // Valid Prometheus prefixes that make no OpenTelemetry name.
    for bad in ["_spec", ":spec", &"a".repeat(230)] {
        assert_eq!(
            OpenTelemetryExporter::new(recorder.clone())
                .with_prefix(bad)
                .unwrap_err(),
            NameError::Prefix(bad.to_owned()),
            "{bad}"
        );
    }
    assert_eq!(
        OpenTelemetryExporter::new(recorder.clone())
            .with_prefix("spec-decode")
            .unwrap_err(),
        NameError::Prefix("spec-decode".into())
    );
    assert_eq!(
        OpenTelemetryExporter::new(recorder)
            .with_const_labels([("position", "1")])
            .unwrap_err(),
        NameError::ReservedLabelName("position".into())
    );
}

#[test]
fn the_families_of_one_collection_come_from_one_snapshot() {
    let recorder = Recorder::new(4).unwrap();
    let (provider, exported) = provider(None);
    OpenTelemetryExporter::new(recorder.clone()).register(&provider.meter("specdec-metrics"));
    let stop = AtomicBool::new(false);
    /// Stops the workers however the checks end.
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let family_sum = |points: &Points, name: &str| -> u64 {
        points
            .iter()
            .filter(|((n, _), _)| n == name)
            .map(|(_, v)| v)
            .sum()
    };
    std::thread::scope(|s| {
        {
            let (recorder, stop) = (&recorder, &stop);
            s.spawn(move || {
                let worker = recorder.worker();
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    worker.observe(i % 5, (i / 5) % (i % 5 + 1)).unwrap();
                    i += 1;
                }
            });
        }
        let _stop = Stop(&stop);
        while recorder.snapshot().num_spec_steps() == 0 {
            std::thread::yield_now();
        }
        let mut previous = 0;
        for _ in 0..500 {
            let (points, _) = collect(&provider, &exported);
            let drafts = family_sum(&points, "spec_decode_num_drafts");
            assert_eq!(
                family_sum(&points, "spec_decode_acceptance_by_draft_length"),
                drafts
            );
            assert_eq!(
                family_sum(&points, "spec_decode_num_accepted_tokens_per_pos"),
                family_sum(&points, "spec_decode_num_accepted_tokens")
            );
            assert!(drafts >= previous);
            previous = drafts;
        }
        assert!(previous > 0, "the workers recorded");
    });
}

#[test]
fn at_k_64_the_default_cardinality_limit_folds_buckets_and_a_view_keeps_them() {
    let k_max = 64;
    let recorder = Recorder::new(k_max).unwrap();
    record(&recorder, 50_000, 99);
    let exporter = OpenTelemetryExporter::new(recorder.clone());
    assert_eq!(exporter.max_series_per_instrument(), 2145);
    let (want, _) = collector_points(
        &SpecDecodeCollector::new(recorder.clone()).encode_text(TextFormat::PrometheusText),
    );
    let buckets = |points: &Points| -> Points {
        points
            .iter()
            .filter(|((n, _), _)| n == "spec_decode_acceptance_by_draft_length")
            .map(|(k, v)| (k.clone(), *v))
            .collect()
    };

    // The SDK's default: 2000 attribute sets kept, the other 145 buckets
    // folded into one overflow point. For an observable counter the SDK
    // sets that point to one folded bucket's value (it does not add them
    // up), so those buckets' counts are lost, not only their labels.
    let (provider_default, exported) = provider(None);
    exporter.register(&provider_default.meter("specdec-metrics"));
    let (points, _) = collect(&provider_default, &exported);
    let folded = buckets(&points);
    let overflow_key = (
        "spec_decode_acceptance_by_draft_length".to_owned(),
        vec![("otel.metric.overflow".to_owned(), "true".to_owned())],
    );
    assert_eq!(folded.len(), 2000 + 1);
    let overflow = folded[&overflow_key];
    for (key, value) in &folded {
        if *key != overflow_key {
            assert_eq!(Some(value), want.get(key), "{key:?}");
        }
    }
    let all: u64 = buckets(&want).values().sum();
    let kept: u64 = folded.values().sum::<u64>() - overflow;
    assert!(
        kept + overflow < all,
        "kept {kept} + overflow {overflow} of {all}"
    );
    // The other families are far below the limit, and whole.
    for (key, value) in &want {
        if key.0 != "spec_decode_acceptance_by_draft_length" {
            assert_eq!(points.get(key), Some(value), "{key:?}");
        }
    }

    // A view raising the limit to what the exporter says it needs: every
    // bucket, equal to the collector's, and every other family too.
    let (provider_raised, exported) = provider(Some(exporter.max_series_per_instrument()));
    exporter.register(&provider_raised.meter("specdec-metrics"));
    let (points, _) = collect(&provider_raised, &exported);
    assert_eq!(buckets(&points).len(), 2145);
    assert_eq!(points, want);
}

/// The points of the by-draft-length instrument after one collection of
/// `models` exporters of `K = k_max` registered on one meter, each model
/// with its own constant label `model_name` (the pattern of
/// docs/opentelemetry.md), under the cardinality limit `limit` (the SDK's
/// default when `None`): how many points were exported, and whether one is
/// the overflow point.
fn buckets_of_models_on_one_meter(
    k_max: usize,
    models: usize,
    limit: Option<usize>,
) -> (usize, bool) {
    let (provider, exported) = provider(limit);
    let meter = provider.meter("specdec-metrics");
    for model in 0..models {
        let recorder = Recorder::new(k_max).unwrap();
        recorder.observe(k_max, model % (k_max + 1)).unwrap();
        OpenTelemetryExporter::new(recorder)
            .with_const_labels([("model_name", format!("model-{model}"))])
            .unwrap()
            .register(&meter);
    }
    let (points, _) = collect(&provider, &exported);
    let buckets: Vec<&Vec<(String, String)>> = points
        .keys()
        .filter(|(name, _)| name == "spec_decode_acceptance_by_draft_length")
        .map(|(_, attributes)| attributes)
        .collect();
    let overflow = buckets.iter().any(|a| {
        a.iter()
            .any(|(k, v)| k == "otel.metric.overflow" && v == "true")
    });
    (buckets.len(), overflow)
}

/// The cardinality limit counts every attribute set of an instrument name,
/// whichever exporter observed it: two models on one meter (one exporter
/// each, told apart by a constant label) share one instrument, so the
/// SDK's default of 2000 is passed from `K = 44` (2 × 1,035 sets), and a
/// view at one exporter's `max_series_per_instrument()` keeps 2,146 points
/// (2,145 and the overflow point) of the 4,290 at `K = 64`. A limit of
/// the sum over the exporters keeps every one.
#[test]
fn exporters_sharing_an_instrument_share_its_cardinality_limit() {
    let triangle = |k: usize| (k + 1) * (k + 2) / 2;
    // The SDK's default limit: whole at K = 43, folded from K = 44.
    assert_eq!(
        buckets_of_models_on_one_meter(43, 2, None),
        (2 * triangle(43), false)
    );
    assert_eq!(2 * triangle(44), 2070);
    assert_eq!(
        buckets_of_models_on_one_meter(44, 2, None),
        (2000 + 1, true)
    );
    // One model alone is whole up to K = 61.
    assert_eq!(
        buckets_of_models_on_one_meter(61, 1, None),
        (triangle(61), false)
    );

    // K = 64: the limit one exporter asks for is half of what two need.
    let one = OpenTelemetryExporter::new(Recorder::new(64).unwrap()).max_series_per_instrument();
    assert_eq!(one, 2145);
    assert_eq!(
        buckets_of_models_on_one_meter(64, 2, Some(one)),
        (2146, true)
    );
    assert_eq!(
        buckets_of_models_on_one_meter(64, 2, Some(2 * one)),
        (4290, false)
    );
}

/// Prefixes that differ only in `:` against `_` name the same instruments
/// (`spec:decode` and `spec_decode` both give `spec_decode_num_drafts`):
/// two exporters so named on one meter feed one instrument, and without
/// constant labels to tell them apart their points merge, one value each.
#[test]
fn prefixes_that_differ_only_in_colon_and_underscore_merge() {
    let colon = OpenTelemetryExporter::new(Recorder::new(2).unwrap())
        .with_prefix("spec:decode")
        .unwrap();
    let underscore = OpenTelemetryExporter::new(Recorder::new(2).unwrap())
        .with_prefix("spec_decode")
        .unwrap();
    assert_eq!(colon.instrument_names(), underscore.instrument_names());

    let (provider, exported) = provider(None);
    let meter = provider.meter("specdec-metrics");
    let (first, second) = (Recorder::new(2).unwrap(), Recorder::new(2).unwrap());
    first.observe(2, 2).unwrap();
    for _ in 0..3 {
        second.observe(1, 0).unwrap();
    }
    OpenTelemetryExporter::new(first)
        .with_prefix("spec:decode")
        .unwrap()
        .register(&meter);
    OpenTelemetryExporter::new(second)
        .with_prefix("spec_decode")
        .unwrap()
        .register(&meter);
    let (points, _) = collect(&provider, &exported);
    let drafts: Vec<u64> = points
        .iter()
        .filter(|((name, _), _)| name == "spec_decode_num_drafts")
        .map(|(_, v)| *v)
        .collect();
    // One point where the two exporters recorded 1 and 3 drafts: neither
    // their sum nor both.
    assert_eq!(drafts.len(), 1);
    assert!(drafts[0] == 1 || drafts[0] == 3, "{drafts:?}");
}

/// A recorder of `K = k_max` that records proposals, with every proposal
/// bucket and the aborted count set to distinct values.
fn proposal_recorder(k_max: usize) -> Recorder {
    let recorder = Recorder::builder(k_max).record_proposals().build().unwrap();
    let worker = recorder.worker();
    worker.observe(k_max, 1).unwrap();
    for l in 1..=k_max {
        for m in 0..=l {
            for _ in 0..(l + m) % 3 {
                worker.observe_proposal(l, m).unwrap();
            }
        }
    }
    worker.observe_aborted_proposals(7).unwrap();
    recorder
}

#[test]
fn the_proposal_families_are_the_collectors_and_only_when_recorded() {
    for (k_max, proposals) in [(4, true), (4, false)] {
        let recorder = if proposals {
            proposal_recorder(k_max)
        } else {
            Recorder::new(k_max).unwrap()
        };
        let (provider, exported) = provider(None);
        let exporter = OpenTelemetryExporter::new(recorder.clone());
        exporter.register(&provider.meter("test"));
        let (points, descriptions) = collect(&provider, &exported);
        let collector = SpecDecodeCollector::new(recorder);
        let (want, help) = collector_points(&collector.encode_text(TextFormat::PrometheusText));
        assert_eq!(points, want);
        assert_eq!(descriptions, help);
        let proposal_points = points
            .keys()
            .filter(|(name, _)| name.contains("proposal"))
            .count();
        let names = exporter.proposal_instrument_names();
        assert_eq!(
            names,
            [
                "spec_decode_acceptance_by_proposal_length",
                "spec_decode_num_aborted_proposals"
            ]
        );
        if proposals {
            assert_eq!(proposal_points, k_max * (k_max + 3) / 2 + 1);
            assert!(
                names.iter().all(|n| descriptions.contains_key(n)),
                "{descriptions:?}"
            );
            let aborted = ("spec_decode_num_aborted_proposals".to_owned(), Vec::new());
            assert_eq!(points[&aborted], 7);
        } else {
            assert_eq!(proposal_points, 0);
            assert!(names.iter().all(|n| !descriptions.contains_key(n)));
        }
    }
}

/// At `K = 64` the proposal family has 2,144 series: folded into the
/// overflow point under the default limit of 2,000, whole under the
/// limit the by-draft-length family already needs
/// (`max_series_per_instrument`).
#[test]
fn at_k_64_the_proposal_family_fits_the_limit_the_draft_family_needs() {
    let recorder = proposal_recorder(64);
    let exporter = OpenTelemetryExporter::new(recorder.clone());
    let limit = exporter.max_series_per_instrument();
    assert_eq!(limit, 2145);
    let count = |limit: Option<usize>| {
        let (provider, exported) = provider(limit);
        exporter.register(&provider.meter("test"));
        let (points, _) = collect(&provider, &exported);
        let family: Vec<_> = points
            .keys()
            .filter(|(name, _)| name == "spec_decode_acceptance_by_proposal_length")
            .collect();
        let overflow = family
            .iter()
            .any(|(_, attributes)| attributes.iter().any(|(k, _)| k == "otel.metric.overflow"));
        (family.len(), overflow)
    };
    assert_eq!(count(Some(limit)), (2144, false));
    let (folded, overflow) = count(None);
    assert!(overflow && folded < 2144, "{folded}");
}
