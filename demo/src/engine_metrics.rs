//! The engine metrics vLLM's dashboards read besides the speculative-decoding
//! families: the running-requests gauge, the generated-tokens counter and the
//! inter-token-latency histogram, exported with vLLM's names, help texts,
//! labels and buckets so that vLLM's own Grafana dashboards work unmodified
//! against the demo.
//!
//! vLLM defines them in `PrometheusStatLogger.__init__`
//! (`vllm/v1/metrics/loggers.py`), each labelled `model_name` and `engine`
//! (the served model name and the engine core's index as text):
//!
//! | vLLM's definition | exposed samples |
//! | --- | --- |
//! | `Gauge("vllm:num_requests_running", "Number of requests in model execution batches.")` | `vllm:num_requests_running` |
//! | `Counter("vllm:generation_tokens", "Number of generation tokens processed.")` | `vllm:generation_tokens_total` |
//! | `Histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", buckets=[0.01, ..., 80.0])` | `vllm:inter_token_latency_seconds_{bucket,sum,count}` |
//!
//! vLLM's dashboards use the gauge for their variable menus (`label_values(
//! vllm:num_requests_running, model_name)` and so on), so without it a
//! dashboard's `$job`, `$model_name`, `$instance` and `$engine` stay empty.
//!
//! # Names follow the demo's `--prefix`
//!
//! [`namespace_for`] derives the names from the prefix of the
//! speculative-decoding families:
//!
//! - a prefix with a `:` keeps everything up to and including its **last**
//!   `:` as the namespace: `vllm:spec_decode` gives `vllm:`, hence
//!   `vllm:num_requests_running`, exactly vLLM's names;
//! - a prefix without `:` (the default `spec_decode`) is used whole, followed
//!   by `_`: `spec_decode_num_requests_running`,
//!   `spec_decode_generation_tokens_total`,
//!   `spec_decode_inter_token_latency_seconds`. Every series the demo
//!   exports then starts with the one prefix it was given, and no bare
//!   generic name (`num_requests_running`) can collide with another
//!   exporter's.
//!
//! # One registry, one scrape
//!
//! [`EngineMetrics`] is a [`Collector`]: [`EngineMetrics::register`] puts it
//! in the same [`Registry`] as the `SpecDecodeCollector`, and
//! [`encode_registry`] writes the whole registry in the format the scraper
//! asked for (`TextFormat`): OpenMetrics for Prometheus, the classic text
//! format 0.0.4 for `curl` and `promtool check metrics`.

use std::fmt::{self, Write as _};
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelSet, EncodeMetric, LabelSetEncoder,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Upper bounds (seconds) of the buckets of `inter_token_latency_seconds`,
/// as vLLM declares them (a `+Inf` bucket follows).
pub const INTER_TOKEN_LATENCY_BUCKETS: [f64; 19] = [
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];

/// The metric names without namespace, and vLLM's help texts.
const RUNNING: (&str, &str) = (
    "num_requests_running",
    "Number of requests in model execution batches.",
);
/// The counter's family name: the encoder appends `_total` to the sample.
const GENERATION_TOKENS: (&str, &str) = (
    "generation_tokens",
    "Number of generation tokens processed.",
);
const INTER_TOKEN_LATENCY: (&str, &str) = (
    "inter_token_latency_seconds",
    "Histogram of inter-token latency in seconds.",
);

/// The namespace of the engine metrics for a speculative-decoding prefix:
/// up to and including the last `:` if there is one, else the prefix and
/// `_` (see the [module docs](self)).
pub fn namespace_for(prefix: &str) -> String {
    match prefix.rfind(':') {
        Some(i) => prefix[..=i].to_owned(),
        None => format!("{prefix}_"),
    }
}

/// The three engine metrics of one engine, labelled `model_name` and
/// `engine`.
///
/// Cheap to clone; clones share the metrics (every engine thread holds one
/// and updates the same series). All updates are atomic operations or a
/// short lock inside `prometheus-client`, safe from any thread.
#[derive(Clone, Debug)]
pub struct EngineMetrics {
    running: Gauge,
    generation_tokens: Counter,
    inter_token_latency: Histogram,
    naming: Arc<Naming>,
}

#[derive(Debug)]
struct Naming {
    running: String,
    generation_tokens: String,
    inter_token_latency: String,
    model_name: String,
    engine: String,
}

impl EngineMetrics {
    /// The metrics named `<namespace>num_requests_running` and so on (pass
    /// [`namespace_for`] of the prefix), with the constant labels
    /// `model_name` and `engine`.
    pub fn new(namespace: &str, model_name: &str, engine: &str) -> Self {
        Self {
            running: Gauge::default(),
            generation_tokens: Counter::default(),
            inter_token_latency: Histogram::new(INTER_TOKEN_LATENCY_BUCKETS),
            naming: Arc::new(Naming {
                running: format!("{namespace}{}", RUNNING.0),
                generation_tokens: format!("{namespace}{}", GENERATION_TOKENS.0),
                inter_token_latency: format!("{namespace}{}", INTER_TOKEN_LATENCY.0),
                model_name: model_name.to_owned(),
                engine: engine.to_owned(),
            }),
        }
    }

    /// Registers these metrics with `registry` (they are encoded on every
    /// scrape of it, after whatever was registered before).
    pub fn register(&self, registry: &mut Registry) {
        registry.register_collector(Box::new(self.clone()));
    }

    /// `admitted` requests joined the running batches and `finished` left
    /// them (engine threads report their own changes; the gauge is their
    /// sum).
    pub fn add_running(&self, admitted: usize, finished: usize) {
        self.running.inc_by(admitted as i64);
        self.running.dec_by(finished as i64);
    }

    /// `tokens` more output tokens generated (accepted draft tokens plus the
    /// bonus token of each verify step, one per undrafted step).
    pub fn add_generation_tokens(&self, tokens: u64) {
        self.generation_tokens.inc_by(tokens);
    }

    /// The time between two consecutive outputs of a request, in seconds,
    /// for each of `requests` requests: one observation per request per
    /// engine step, as vLLM observes it (with speculative decoding one
    /// output can carry several tokens).
    pub fn observe_inter_token_latency(&self, seconds: f64, requests: usize) {
        for _ in 0..requests {
            self.inter_token_latency.observe(seconds);
        }
    }
}

impl Collector for EngineMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let naming = &*self.naming;
        let labels = ConstLabels(naming);
        let mut metric =
            encoder.encode_descriptor(&naming.running, RUNNING.1, None, MetricType::Gauge)?;
        self.running.encode(metric.encode_family(&labels)?)?;
        let mut metric = encoder.encode_descriptor(
            &naming.generation_tokens,
            GENERATION_TOKENS.1,
            None,
            MetricType::Counter,
        )?;
        self.generation_tokens
            .encode(metric.encode_family(&labels)?)?;
        let mut metric = encoder.encode_descriptor(
            &naming.inter_token_latency,
            INTER_TOKEN_LATENCY.1,
            None,
            MetricType::Histogram,
        )?;
        self.inter_token_latency
            .encode(metric.encode_family(&labels)?)
    }
}

/// `model_name` then `engine`, in vLLM's order, values escaped.
struct ConstLabels<'a>(&'a Naming);

impl EncodeLabelSet for ConstLabels<'_> {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> fmt::Result {
        for (name, value) in [
            ("model_name", &self.0.model_name),
            ("engine", &self.0.engine),
        ] {
            let mut label = encoder.encode_label();
            let mut key = label.encode_label_key()?;
            key.write_str(name)?;
            let mut value_encoder = key.encode_label_value()?;
            write!(value_encoder, "{}", Escaped(value))?;
            value_encoder.finish()?;
        }
        Ok(())
    }
}

/// A label value escaped for both text formats: `\` → `\\`, `"` → `\"`,
/// newline → `\n` (`prometheus-client` 0.24 writes values as given).
struct Escaped<'a>(&'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            match c {
                '\\' => f.write_str("\\\\")?,
                '"' => f.write_str("\\\"")?,
                '\n' => f.write_str("\\n")?,
                c => f.write_char(c)?,
            }
        }
        Ok(())
    }
}

// The library's Prometheus items the simulator uses, named in this one
// place: the collector of the speculative-decoding families, the default
// prefix of their names, the text formats, and `encode_registry`, which
// writes a whole registry (the collector and these metrics) in either
// format, renaming a counter's `# HELP`/`# TYPE` lines for the classic one.
pub use specdec_metrics::{
    DEFAULT_METRIC_PREFIX as DEFAULT_PREFIX, SpecDecodeCollector, TextFormat, encode_registry,
};

#[cfg(test)]
mod tests {
    use super::*;
    use specdec_metrics::Recorder;

    /// The sample lines of `text` (no comments), as `(name, labels, value)`.
    fn samples(text: &str) -> Vec<(String, String, String)> {
        text.lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(|l| {
                let (series, value) = l.rsplit_once(' ').expect("sample line has a value");
                let (name, labels) = match series.split_once('{') {
                    Some((n, rest)) => (n, rest.trim_end_matches('}')),
                    None => (series, ""),
                };
                (name.to_owned(), labels.to_owned(), value.to_owned())
            })
            .collect()
    }

    fn value_of(text: &str, name: &str, label: &str) -> Option<String> {
        samples(text)
            .into_iter()
            .find(|(n, l, _)| n == name && l.contains(label))
            .map(|(_, _, v)| v)
    }

    fn registry_with(metrics: &EngineMetrics) -> Registry {
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        registry
    }

    #[test]
    fn namespace_is_up_to_the_last_colon_or_the_prefix_and_underscore() {
        assert_eq!(namespace_for("vllm:spec_decode"), "vllm:");
        assert_eq!(namespace_for("a:b:spec"), "a:b:");
        assert_eq!(namespace_for("vllm:"), "vllm:");
        assert_eq!(namespace_for("spec_decode"), "spec_decode_");
        assert_eq!(namespace_for("my_engine_sd"), "my_engine_sd_");
    }

    #[test]
    fn vllm_namespace_gives_vllms_names_help_and_types() {
        let metrics = EngineMetrics::new("vllm:", "m", "0");
        let text = encode_registry(&registry_with(&metrics), TextFormat::OpenMetrics);
        for line in [
            "# HELP vllm:num_requests_running Number of requests in model execution batches.",
            "# TYPE vllm:num_requests_running gauge",
            "# HELP vllm:generation_tokens Number of generation tokens processed.",
            "# TYPE vllm:generation_tokens counter",
            "# HELP vllm:inter_token_latency_seconds Histogram of inter-token latency in seconds.",
            "# TYPE vllm:inter_token_latency_seconds histogram",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        let names: Vec<String> = samples(&text).into_iter().map(|(n, _, _)| n).collect();
        assert!(names.contains(&"vllm:num_requests_running".to_owned()));
        assert!(names.contains(&"vllm:generation_tokens_total".to_owned()));
        for suffix in ["_bucket", "_sum", "_count"] {
            assert!(names.contains(&format!("vllm:inter_token_latency_seconds{suffix}")));
        }
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn every_sample_carries_model_name_and_engine() {
        let metrics = EngineMetrics::new("vllm:", "llama", "3");
        let text = encode_registry(&registry_with(&metrics), TextFormat::PrometheusText);
        let all = samples(&text);
        // 1 gauge + 1 counter + sum, count and 19 + 1 buckets.
        assert_eq!(all.len(), 1 + 1 + 2 + INTER_TOKEN_LATENCY_BUCKETS.len() + 1);
        for (name, labels, _) in all {
            let mut pairs: Vec<&str> = labels.split(',').collect();
            pairs.retain(|p| !p.starts_with("le="));
            assert_eq!(pairs, ["model_name=\"llama\"", "engine=\"3\""], "{name}");
        }
    }

    #[test]
    fn histogram_has_vllms_buckets_and_counts_cumulatively() {
        let metrics = EngineMetrics::new("vllm:", "m", "0");
        metrics.observe_inter_token_latency(0.005, 1);
        metrics.observe_inter_token_latency(0.01, 1);
        metrics.observe_inter_token_latency(0.012, 1);
        metrics.observe_inter_token_latency(0.3, 1);
        metrics.observe_inter_token_latency(100.0, 1);
        metrics.observe_inter_token_latency(0.02, 0);
        let text = encode_registry(&registry_with(&metrics), TextFormat::PrometheusText);
        let buckets: Vec<(String, u64)> = samples(&text)
            .into_iter()
            .filter(|(n, _, _)| n == "vllm:inter_token_latency_seconds_bucket")
            .map(|(_, labels, v)| {
                let le = labels
                    .split(',')
                    .find_map(|p| p.strip_prefix("le=\""))
                    .expect("le label")
                    .trim_end_matches('"')
                    .to_owned();
                (le, v.parse().expect("integer count"))
            })
            .collect();
        let bounds: Vec<f64> = buckets[..buckets.len() - 1]
            .iter()
            .map(|(le, _)| le.parse().expect("numeric bound"))
            .collect();
        // vLLM's list (vllm/v1/metrics/loggers.py), not our constant.
        let vllm = [
            0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
            10.0, 20.0, 40.0, 80.0,
        ];
        assert_eq!(bounds, vllm);
        assert_eq!(buckets.last().map(|(le, _)| le.as_str()), Some("+Inf"));
        let counts: Vec<u64> = buckets.iter().map(|(_, c)| *c).collect();
        let count_at = |bound: f64| {
            let i = INTER_TOKEN_LATENCY_BUCKETS.iter().position(|b| *b == bound);
            counts[i.expect("a bucket bound")]
        };
        // `le` is inclusive: 0.01 falls in the 0.01 bucket.
        assert_eq!(count_at(0.01), 2);
        assert_eq!(count_at(0.025), 3);
        assert_eq!(count_at(0.2), 3);
        assert_eq!(count_at(0.3), 4);
        assert_eq!(count_at(80.0), 4);
        assert_eq!(counts.last(), Some(&5));
        assert_eq!(
            value_of(&text, "vllm:inter_token_latency_seconds_count", "").as_deref(),
            Some("5")
        );
        let sum: f64 = value_of(&text, "vllm:inter_token_latency_seconds_sum", "")
            .expect("sum")
            .parse()
            .expect("float");
        assert!((sum - 100.327).abs() < 1e-9, "{sum}");
    }

    #[test]
    fn running_gauge_and_token_counter_follow_updates_through_clones() {
        let metrics = EngineMetrics::new("spec_decode_", "m", "0");
        let engine_thread = metrics.clone();
        engine_thread.add_running(2, 0);
        metrics.add_running(1, 0);
        engine_thread.add_running(0, 1);
        engine_thread.add_generation_tokens(7);
        metrics.add_generation_tokens(5);
        let text = encode_registry(&registry_with(&metrics), TextFormat::PrometheusText);
        assert_eq!(
            value_of(&text, "spec_decode_num_requests_running", "").as_deref(),
            Some("2")
        );
        assert_eq!(
            value_of(&text, "spec_decode_generation_tokens_total", "").as_deref(),
            Some("12")
        );
        metrics.add_running(3, 5);
        let text = encode_registry(&registry_with(&metrics), TextFormat::PrometheusText);
        assert_eq!(
            value_of(&text, "spec_decode_num_requests_running", "").as_deref(),
            Some("0")
        );
    }

    #[test]
    fn one_inter_token_latency_per_request() {
        let metrics = EngineMetrics::new("vllm:", "m", "0");
        metrics.observe_inter_token_latency(0.04, 32);
        metrics.observe_inter_token_latency(0.5, 3);
        let text = encode_registry(&registry_with(&metrics), TextFormat::PrometheusText);
        let count = |name: &str, le: &str| value_of(&text, name, le);
        assert_eq!(
            count("vllm:inter_token_latency_seconds_count", "").as_deref(),
            Some("35")
        );
        assert_eq!(
            count("vllm:inter_token_latency_seconds_bucket", "le=\"0.05\"").as_deref(),
            Some("32")
        );
        let sum: f64 = count("vllm:inter_token_latency_seconds_sum", "")
            .expect("sum")
            .parse()
            .expect("float");
        assert!((sum - (32.0 * 0.04 + 1.5)).abs() < 1e-9, "{sum}");
    }

    #[test]
    fn label_values_are_escaped() {
        let metrics = EngineMetrics::new("vllm:", "say \"hi\"\\\n", "0");
        let text = encode_registry(&registry_with(&metrics), TextFormat::OpenMetrics);
        let want = "vllm:num_requests_running{model_name=\"say \\\"hi\\\"\\\\\\n\",engine=\"0\"} 0";
        assert!(text.lines().any(|l| l == want), "{text}");
    }

    #[test]
    fn classic_text_names_the_total_sample_for_counters_only() {
        let recorder = Recorder::new(2).expect("K = 2 is valid");
        let collector = SpecDecodeCollector::new(recorder)
            .with_prefix("vllm:spec_decode")
            .and_then(|c| c.with_const_labels([("model_name", "m"), ("engine", "0")]))
            .expect("valid names");
        let mut registry = Registry::default();
        registry.register_collector(Box::new(collector));
        EngineMetrics::new("vllm:", "m", "0").register(&mut registry);
        let text = encode_registry(&registry, TextFormat::PrometheusText);
        assert!(!text.contains("# EOF"));
        for line in [
            "# TYPE vllm:spec_decode_num_drafts_total counter",
            "# TYPE vllm:generation_tokens_total counter",
            "# HELP vllm:generation_tokens_total Number of generation tokens processed.",
            "# TYPE vllm:num_requests_running gauge",
            "# TYPE vllm:inter_token_latency_seconds histogram",
            "# HELP vllm:inter_token_latency_seconds Histogram of inter-token latency in seconds.",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        // Every sample belongs to the family its last # TYPE line names (a
        // histogram's samples add _bucket, _sum or _count).
        let mut family = String::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                family = rest.split(' ').next().unwrap_or("").to_owned();
            } else if !line.starts_with('#') {
                let name = line.split(['{', ' ']).next().unwrap_or("");
                let base = ["_bucket", "_sum", "_count"]
                    .into_iter()
                    .find_map(|s| name.strip_suffix(s))
                    .filter(|base| *base == family)
                    .unwrap_or(name);
                assert_eq!(base, family, "sample {line:?} under # TYPE {family}");
            }
        }
        // The OpenMetrics text of the same registry keeps the family names.
        let open = encode_registry(&registry, TextFormat::OpenMetrics);
        assert!(open.contains("# TYPE vllm:generation_tokens counter\n"));
        assert!(open.contains("# TYPE vllm:spec_decode_num_drafts counter\n"));
        assert!(open.ends_with("# EOF\n"));
    }
}
