//! The two proposal families in every exporter: present, alike and
//! complete for a recorder that records proposals, absent for one that
//! does not.

use crate::exposition_text;

use exposition_text::{descriptor_lines, promtool_findings, sample_lines, value_of};
use metrics_exporter_prometheus::PrometheusBuilder;
use specdec_metrics::{
    MetricsPublisher, PROPOSAL_FAMILIES, PrometheusCrateCollector, ProposalTracker, Recorder,
    SpecDecodeCollector, TextFormat,
};
use std::sync::Arc;
use tikv_prometheus::{Encoder as _, Registry, TextEncoder};

/// A recorder of `K = k_max` with ordinary steps and proposal outcomes
/// (resolved and aborted) recorded through a tracker.
fn recorder(k_max: usize, proposals: bool) -> Recorder {
    let mut builder = Recorder::builder(k_max);
    if proposals {
        builder = builder.record_proposals();
    }
    let recorder = builder.build().unwrap();
    let worker = recorder.worker();
    worker.observe(1, 1).unwrap();
    if proposals {
        let mut tracker = ProposalTracker::new(k_max).unwrap();
        tracker.draft(&[1, 2], 1).unwrap();
        tracker.push_tokens(&[1, 9], &worker); // (2, 1)
        tracker.draft(&[3], 1).unwrap();
        tracker.push_tokens(&[3], &worker); // (1, 1)
        tracker.draft(&[4, 5], 2).unwrap();
        tracker.abort(&worker); // one aborted
        tracker.draft(&[6, 7], 1).unwrap();
        tracker.push_tokens(&[6, 7], &worker); // (2, 2)
    }
    recorder
}

fn tikv_text(collector: PrometheusCrateCollector) -> String {
    let registry = Registry::new();
    registry.register(Box::new(collector)).unwrap();
    let mut text = Vec::new();
    TextEncoder::new()
        .encode(&registry.gather(), &mut text)
        .unwrap();
    String::from_utf8(text).unwrap()
}

fn metrics_text(recorder: &Recorder) -> String {
    let exporter = PrometheusBuilder::new().build_recorder();
    let publisher = MetricsPublisher::new(Arc::new(recorder.clone()), "spec_decode").unwrap();
    metrics::with_local_recorder(&exporter, || publisher.publish());
    exporter.handle().render()
}

/// The lines of `text` about the proposal families.
fn proposal_lines(lines: Vec<String>) -> Vec<String> {
    lines
        .into_iter()
        .filter(|l| l.contains("proposal"))
        .collect()
}

#[test]
fn every_prometheus_exporter_writes_the_proposal_families_alike() {
    for k_max in [2, 8] {
        let recorder = recorder(k_max, true);
        let classic =
            SpecDecodeCollector::new(recorder.clone()).encode_text(TextFormat::PrometheusText);
        let samples = proposal_lines(sample_lines(&classic));
        // Every bucket of the proposal triangle, and the aborted count.
        assert_eq!(samples.len(), k_max * (k_max + 3) / 2 + 1, "{classic}");
        let bucket = |l: usize, m: usize| {
            value_of(
                &classic,
                &format!(
                    "spec_decode_acceptance_by_proposal_length_total{{proposal_length=\"{l}\",matched=\"{m}\"}}"
                ),
            )
        };
        assert_eq!(
            (bucket(2, 1), bucket(1, 1), bucket(2, 2)),
            (Some(1.0), Some(1.0), Some(1.0))
        );
        assert_eq!((bucket(2, 0), bucket(1, 0)), (Some(0.0), Some(0.0)));
        assert_eq!(bucket(0, 0), None);
        assert_eq!(
            value_of(&classic, "spec_decode_num_aborted_proposals_total"),
            Some(1.0)
        );
        assert!(
            classic.contains("# TYPE spec_decode_acceptance_by_proposal_length_total counter\n")
        );

        let open = SpecDecodeCollector::new(recorder.clone()).encode_text(TextFormat::OpenMetrics);
        assert!(open.contains("# TYPE spec_decode_num_aborted_proposals counter\n"));
        assert_eq!(proposal_lines(sample_lines(&open)), samples);

        let tikv = tikv_text(PrometheusCrateCollector::new(recorder.clone()));
        assert_eq!(proposal_lines(sample_lines(&tikv)), samples, "{tikv}");
        assert_eq!(
            proposal_lines(descriptor_lines(&tikv)),
            proposal_lines(descriptor_lines(&classic))
        );

        let rendered = metrics_text(&recorder);
        assert_eq!(
            proposal_lines(sample_lines(&rendered)),
            samples,
            "{rendered}"
        );
        assert_eq!(
            proposal_lines(descriptor_lines(&rendered)),
            proposal_lines(descriptor_lines(&classic))
        );
        assert_eq!(
            proposal_lines(descriptor_lines(&classic)).len(),
            2 * PROPOSAL_FAMILIES.len()
        );

        if let Some(findings) = promtool_findings(&classic) {
            assert!(
                findings.is_empty(),
                "promtool findings {findings:?}\n{classic}"
            );
        }
    }
}

#[test]
fn no_exporter_writes_proposal_families_for_a_recorder_without_them() {
    let recorder = recorder(4, false);
    let texts = [
        SpecDecodeCollector::new(recorder.clone()).encode_text(TextFormat::PrometheusText),
        SpecDecodeCollector::new(recorder.clone()).encode_text(TextFormat::OpenMetrics),
        tikv_text(PrometheusCrateCollector::new(recorder.clone())),
        metrics_text(&recorder),
    ];
    for text in texts {
        assert!(!text.contains("proposal"), "{text}");
        assert!(text.contains("spec_decode_num_drafts_total 1\n"), "{text}");
    }
}

#[test]
fn a_fixed_histogram_with_proposals_is_exported_too() {
    let snapshot = recorder(3, true).snapshot();
    let fixed = SpecDecodeCollector::from_histogram(snapshot.clone())
        .encode_text(TextFormat::PrometheusText);
    let tikv = tikv_text(PrometheusCrateCollector::from_histogram(snapshot));
    assert_eq!(proposal_lines(sample_lines(&fixed)).len(), 3 * 6 / 2 + 1);
    assert_eq!(
        proposal_lines(sample_lines(&tikv)),
        proposal_lines(sample_lines(&fixed))
    );
}
