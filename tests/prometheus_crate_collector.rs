//! `PrometheusCrateCollector` (feature `tikv-prometheus`, the `prometheus`
//! crate): the text a `prometheus::Registry` holding it encodes passes
//! `promtool check metrics` and is, line for line, the classic text of the
//! `prometheus-client` collector after the same observations.
//!
//! `promtool` must be on PATH (`.ci/install-prometheus.sh`), unless
//! `SPECDEC_SKIP_PROMTOOL=1` (see `tests/exposition_text/mod.rs`).

use crate::exposition_text;

use std::sync::Arc;

use exposition_text::{descriptor_lines, promtool_findings, sample_lines, value_of};
use rand::{RngCore, SeedableRng};
use rand_xoshiro::SplitMix64;
use specdec_metrics::{
    AcceptanceHistogram, DraftPlan, NameError, PrometheusCrateCollector, Recorder, SharedPlan,
    SpecDecodeCollector, TextFormat, VLLM_METRIC_PREFIX,
};
use tikv_prometheus::{Encoder as _, Registry, TextEncoder};

/// `steps` random steps into `recorder`: verify steps, undrafted steps,
/// scheduled budgets and a few rejected observations.
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

/// The text a `prometheus::Registry` holding `collector` encodes.
fn registry_text(collector: &PrometheusCrateCollector) -> String {
    let registry = Registry::new();
    registry.register(Box::new(collector.clone())).unwrap();
    let mut text = Vec::new();
    TextEncoder::new()
        .encode(&registry.gather(), &mut text)
        .unwrap();
    String::from_utf8(text).unwrap()
}

/// Both collectors over one recorder, with the same prefix, constant labels
/// and plan.
fn both(
    recorder: &Recorder,
    prefix: &str,
    labels: &[(&str, &str)],
    plan: Option<&Arc<SharedPlan>>,
) -> (PrometheusCrateCollector, SpecDecodeCollector) {
    let mut crate_collector = PrometheusCrateCollector::new(recorder.clone())
        .with_prefix(prefix)
        .unwrap()
        .with_const_labels(labels.iter().copied())
        .unwrap();
    let mut client_collector = SpecDecodeCollector::new(recorder.clone())
        .with_prefix(prefix)
        .unwrap()
        .with_const_labels(labels.iter().copied())
        .unwrap();
    if let Some(plan) = plan {
        crate_collector = crate_collector.with_plan(Arc::clone(plan));
        client_collector = client_collector.with_plan(Arc::clone(plan));
    }
    (crate_collector, client_collector)
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
fn the_same_families_and_samples_as_the_prometheus_client_collector() {
    let cases: [Case; 5] = [
        (1, 0, "spec_decode", &[], false),
        (1, 300, "spec_decode", &[], true),
        (
            5,
            5_000,
            VLLM_METRIC_PREFIX,
            &[("model_name", "llama"), ("engine", "0")],
            true,
        ),
        (
            8,
            20_000,
            "spec_decode",
            &[("model_name", "a \"b\" \\ c\nd")],
            false,
        ),
        (64, 20_000, VLLM_METRIC_PREFIX, &[("engine", "3")], true),
    ];
    for (seed, (k_max, steps, prefix, labels, with_plan)) in cases.into_iter().enumerate() {
        let recorder = Recorder::new(k_max).unwrap();
        record(&recorder, steps, seed as u64);
        let plan = Arc::new(SharedPlan::new(DraftPlan::new(k_max / 2, k_max).unwrap()));
        let (crate_collector, client_collector) =
            both(&recorder, prefix, labels, with_plan.then_some(&plan));
        let ours = registry_text(&crate_collector);
        let theirs = client_collector.encode_text(TextFormat::PrometheusText);
        let what = format!("K = {k_max}, {prefix}, labels {labels:?}, plan {with_plan}");
        assert_eq!(sample_lines(&ours), sample_lines(&theirs), "{what}");
        assert_eq!(descriptor_lines(&ours), descriptor_lines(&theirs), "{what}");
        let families = 9 + usize::from(with_plan);
        assert_eq!(descriptor_lines(&ours).len(), 2 * families, "{what}");
        assert_eq!(
            sample_lines(&ours).len(),
            5 + 2 * k_max + (k_max + 1) * (k_max + 2) / 2 + (k_max + 1) + usize::from(with_plan),
            "{what}"
        );
        // The collector's own encoding is the registry's.
        assert_eq!(crate_collector.encode_text(), ours, "{what}");
    }
}

#[test]
fn promtool_accepts_the_registrys_text() {
    let recorder = Recorder::new(8).unwrap();
    record(&recorder, 10_000, 7);
    let plan = Arc::new(SharedPlan::new(DraftPlan::new(3, 8).unwrap()));
    let labelled = PrometheusCrateCollector::new(recorder.clone())
        .with_const_labels([("model_name", "say \"hi\"\\ \n"), ("engine", "0")])
        .unwrap()
        .with_plan(plan);
    for collector in [PrometheusCrateCollector::new(recorder.clone()), labelled] {
        let text = registry_text(&collector);
        if let Some(findings) = promtool_findings(&text) {
            assert!(
                findings.is_empty(),
                "promtool findings {findings:?}\n{text}"
            );
        }
    }
    // vLLM's names: promtool's lint on ':' and nothing else, as for the
    // other exporters.
    let vllm = PrometheusCrateCollector::new(recorder)
        .with_prefix(VLLM_METRIC_PREFIX)
        .unwrap();
    let text = registry_text(&vllm);
    if let Some(findings) = promtool_findings(&text) {
        assert!(!findings.is_empty());
        for f in &findings {
            assert!(
                f.contains("metric names should not contain ':'"),
                "{f}\n{text}"
            );
        }
    }
}

#[test]
fn each_gather_takes_a_new_snapshot_of_the_recorder() {
    let recorder = Recorder::new(3).unwrap();
    let collector = PrometheusCrateCollector::new(recorder.clone());
    let registry = Registry::new();
    registry.register(Box::new(collector)).unwrap();
    let text = || {
        let mut out = String::new();
        TextEncoder::new()
            .encode_utf8(&registry.gather(), &mut out)
            .unwrap();
        out
    };
    assert_eq!(value_of(&text(), "spec_decode_num_drafts_total"), Some(0.0));
    recorder.observe(3, 2).unwrap();
    recorder.observe(3, 2).unwrap();
    let now = text();
    assert_eq!(value_of(&now, "spec_decode_num_drafts_total"), Some(2.0));
    assert_eq!(
        value_of(
            &now,
            "spec_decode_acceptance_by_draft_length_total{draft_length=\"3\",accepted=\"2\"}"
        ),
        Some(2.0)
    );
    assert_eq!(
        value_of(
            &now,
            "spec_decode_num_accepted_tokens_per_pos_total{position=\"2\"}"
        ),
        Some(0.0)
    );
}

#[test]
fn families_of_one_gather_agree_while_workers_record() {
    let recorder = Recorder::new(4).unwrap();
    let collector = PrometheusCrateCollector::new(recorder.clone());
    let stop = std::sync::atomic::AtomicBool::new(false);
    /// Stops the workers however the checks end (a failed assertion
    /// included), so that a failure fails instead of hanging.
    struct Stop<'a>(&'a std::sync::atomic::AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
    std::thread::scope(|s| {
        for t in 0..2 {
            let (recorder, stop) = (&recorder, &stop);
            s.spawn(move || {
                let worker = recorder.worker();
                let mut i = t;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    worker.observe(i % 5, (i / 5) % (i % 5 + 1)).unwrap();
                    i += 1;
                }
            });
        }
        let _stop = Stop(&stop);
        for _ in 0..200 {
            use tikv_prometheus::core::Collector as _;
            let families = collector.collect();
            let total = |name: &str| -> f64 {
                families
                    .iter()
                    .find(|f| f.name() == name)
                    .unwrap()
                    .get_metric()
                    .iter()
                    .map(|m| m.get_counter().get_value())
                    .sum()
            };
            assert_eq!(
                total("spec_decode_acceptance_by_draft_length_total"),
                total("spec_decode_num_drafts_total")
            );
            assert_eq!(
                total("spec_decode_num_accepted_tokens_per_pos_total"),
                total("spec_decode_num_accepted_tokens_total")
            );
        }
    });
}

#[test]
fn a_fixed_histogram_and_registry_composition() {
    let mut h = AcceptanceHistogram::new(2).unwrap();
    h.observe(2, 1).unwrap();
    let collector = PrometheusCrateCollector::from_histogram(h);
    // A registry's own prefix and common labels apply, as to its other metrics.
    let registry = Registry::new_custom(
        Some("engine".to_owned()),
        Some([("replica".to_owned(), "a".to_owned())].into()),
    )
    .unwrap();
    registry.register(Box::new(collector.clone())).unwrap();
    // The same descriptors twice are refused, as for any collector.
    assert!(registry.register(Box::new(collector)).is_err());
    let mut text = String::new();
    TextEncoder::new()
        .encode_utf8(&registry.gather(), &mut text)
        .unwrap();
    assert_eq!(
        value_of(&text, "engine_spec_decode_num_drafts_total{replica=\"a\"}"),
        Some(1.0)
    );
}

#[test]
fn names_and_labels_are_checked() {
    let recorder = Recorder::new(2).unwrap();
    assert_eq!(
        PrometheusCrateCollector::new(recorder.clone())
            .with_prefix("spec-decode")
            .unwrap_err(),
        NameError::Prefix("spec-decode".into())
    );
    for reserved in ["accepted", "num_spec_tokens", "__name"] {
        assert_eq!(
            PrometheusCrateCollector::new(recorder.clone())
                .with_const_labels([(reserved, "1")])
                .unwrap_err(),
            NameError::ReservedLabelName(reserved.into())
        );
    }
    let collector = PrometheusCrateCollector::new(recorder)
        .with_const_labels([("model_name", "m")])
        .unwrap()
        .with_prefix("x")
        .unwrap();
    assert_eq!(collector.prefix(), "x");
    assert_eq!(
        collector.const_labels(),
        [("model_name".to_owned(), "m".to_owned())]
    );
    assert!(collector.plan().is_none());
}
