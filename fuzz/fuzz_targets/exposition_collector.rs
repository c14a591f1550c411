//! The exposition parser on what the library's Prometheus collector
//! (`SpecDecodeCollector`) writes from a structured input: a histogram
//! (any `K` up to 12, any steps), any prefix and any constant labels (any
//! Unicode in their values), either format.
//!
//! Properties: no panic; whatever the collector writes, the parser
//! accepts, in the format written, and reads back as the histogram's
//! counters; and written back by the parser's own round trip (the
//! `exposition` target) the samples stay the same.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use specdec_ingest::exposition::{Format, Sample, parse};
use specdec_metrics::{AcceptanceHistogram, SpecDecodeCollector, TextFormat};

#[derive(Arbitrary, Debug)]
struct Input {
    max_draft_len: u8,
    steps: Vec<(u8, u8)>,
    undrafted: u8,
    scheduled: Vec<u8>,
    prefix: String,
    labels: Vec<(String, String)>,
    open_metrics: bool,
}

fuzz_target!(|input: Input| {
    let max = usize::from(input.max_draft_len % 12) + 1;
    let mut h = AcceptanceHistogram::new(max).unwrap();
    for &(k, a) in &input.steps {
        let k = usize::from(k) % (max + 1);
        let _ = h.observe(k, usize::from(a) % (k + 1));
    }
    for _ in 0..input.undrafted % 8 {
        h.observe_undrafted();
    }
    for &b in &input.scheduled {
        let _ = h.observe_scheduled(usize::from(b) % (max + 1));
    }
    let mut collector = SpecDecodeCollector::from_histogram(h.clone());
    let prefix = if input.prefix.is_empty() {
        "spec_decode".to_owned()
    } else {
        input.prefix.clone()
    };
    collector = match collector.with_prefix(prefix.clone()) {
        Ok(c) => c,
        Err(_) => return,
    };
    collector = match collector
        .with_const_labels(input.labels.iter().map(|(n, v)| (n.as_str(), v.as_str())))
    {
        Ok(c) => c,
        Err(_) => return,
    };
    let labels = collector.const_labels().to_vec();
    let format = if input.open_metrics {
        TextFormat::OpenMetrics
    } else {
        TextFormat::PrometheusText
    };
    let text = collector.encode_text(format);
    let e = parse(&text).unwrap_or_else(|err| panic!("the collector's text: {err}\n{text}"));
    assert_eq!(e.format == Format::OpenMetrics, input.open_metrics);
    let value = |family: &str, own: &[(&str, String)]| -> f64 {
        let name = format!("{prefix}_{family}");
        let found: Vec<&Sample> = e
            .samples
            .iter()
            .filter(|s| {
                s.name == name
                    && labels.iter().all(|(n, v)| s.label(n) == Some(v.as_str()))
                    && own.iter().all(|(n, v)| s.label(n) == Some(v.as_str()))
            })
            .collect();
        assert_eq!(found.len(), 1, "{name} {own:?}\n{text}");
        found[0].value
    };
    assert_eq!(value("num_drafts_total", &[]), h.num_spec_steps() as f64);
    assert_eq!(
        value("num_draft_tokens_total", &[]),
        h.num_draft_tokens() as f64
    );
    assert_eq!(
        value("num_accepted_tokens_total", &[]),
        h.num_accepted_draft_tokens() as f64
    );
    for (i, &n) in h.num_accepted_tokens_per_pos().iter().enumerate() {
        assert_eq!(
            value(
                "num_accepted_tokens_per_pos_total",
                &[("position", i.to_string())]
            ),
            n as f64
        );
    }
    for k in 0..=max {
        for a in 0..=k {
            assert_eq!(
                value(
                    "acceptance_by_draft_length_total",
                    &[("draft_length", k.to_string()), ("accepted", a.to_string())]
                ),
                h.count(k, a) as f64
            );
        }
    }
    assert_eq!(
        e.type_of(&format!("{prefix}_num_drafts_total")),
        Some("counter")
    );
});
