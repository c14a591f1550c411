//! [`SpecDecodeCollector`]: the Prometheus exposition through
//! `prometheus-client` (cargo feature `prometheus`).

use core::fmt::{self, Write as _};
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelSet, EncodeMetric, LabelSetEncoder,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use super::DraftLenGauge;
use super::error::NameError;
use super::names::{HELP, PLAN_GAUGE_HELP};
use super::options::{Naming, Options};
use super::series::{Own, Source, series};
use crate::{AcceptanceHistogram, Recorder};

/// The text exposition formats [`SpecDecodeCollector::encode_text`] writes.
///
/// ```
/// use specdec_metrics::TextFormat;
/// // What Prometheus sends when it scrapes:
/// let accept = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;\
///               version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
/// assert_eq!(TextFormat::from_accept(accept), TextFormat::OpenMetrics);
/// // What curl sends (and what promtool reads):
/// assert_eq!(TextFormat::from_accept("*/*"), TextFormat::PrometheusText);
/// assert!(TextFormat::OpenMetrics.content_type().starts_with("application/openmetrics-text"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TextFormat {
    /// OpenMetrics 1.0 text, as `prometheus-client` writes it (ends with
    /// `# EOF`). What Prometheus asks for first.
    OpenMetrics,
    /// The classic Prometheus text format 0.0.4 (`# HELP` and `# TYPE` name
    /// the `_total` sample; no `# EOF`). What `promtool check metrics`
    /// parses.
    PrometheusText,
}

impl TextFormat {
    /// The HTTP `Content-Type` of this format.
    pub const fn content_type(self) -> &'static str {
        match self {
            Self::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Self::PrometheusText => "text/plain; version=0.0.4; charset=utf-8",
        }
    }

    /// Content negotiation from an HTTP `Accept` header: OpenMetrics when
    /// the client accepts `application/openmetrics-text` (with a nonzero
    /// `q`), the classic text format otherwise (including a missing or
    /// unparsable header).
    pub fn from_accept(accept: &str) -> Self {
        let openmetrics = accept.split(',').any(|range| {
            let mut parts = range.split(';').map(str::trim);
            let media_type = parts.next().unwrap_or("");
            let q = parts
                .filter_map(|p| p.strip_prefix("q="))
                .find_map(|q| q.parse::<f64>().ok())
                .unwrap_or(1.0);
            media_type.eq_ignore_ascii_case("application/openmetrics-text") && q > 0.0
        });
        if openmetrics {
            Self::OpenMetrics
        } else {
            Self::PrometheusText
        }
    }
}

/// A [`Collector`] that encodes the nine counter families of a
/// [`Recorder`] (or of a fixed histogram), one snapshot per scrape, and,
/// given a [`SharedPlan`](crate::SharedPlan) ([`with_plan`](Self::with_plan)), the gauge of
/// the controller's current draft length.
///
/// [`SpecDecodeCollector`] implements
/// [`prometheus_client::collector::Collector`]: register it once with the
/// engine's [`Registry`] and every scrape encodes these counters, all from
/// **one** [`Recorder::snapshot`] taken for that scrape:
///
/// | family | labels | value |
/// | --- | --- | --- |
/// | `<prefix>_num_drafts_total` | | verify steps (`num_spec_steps`) |
/// | `<prefix>_num_draft_tokens_total` | | draft tokens |
/// | `<prefix>_num_accepted_tokens_total` | | accepted draft tokens |
/// | `<prefix>_num_accepted_tokens_per_pos_total` | `position` = `0..K` | steps whose draft token at `position` was accepted |
/// | `<prefix>_num_draft_tokens_per_pos_total` | `position` = `0..K` | steps whose draft reached `position` |
/// | `<prefix>_acceptance_by_draft_length_total` | `draft_length` = `k`, `accepted` = `a` | the bucket `H[k][a]` |
/// | `<prefix>_num_undrafted_steps_total` | | steps that drafted nothing |
/// | `<prefix>_num_rejected_observations_total` | | invalid observations |
/// | `<prefix>_scheduled_steps_total` | `num_spec_tokens` = `0..=K` | scheduler steps by draft budget (`scheduled_steps_by_budget`) |
///
/// and, for a recorder built with
/// [`record_proposals`](crate::RecorderBuilder::record_proposals) (or a
/// histogram with the proposal part), the two families of
/// [`PROPOSAL_FAMILIES`](crate::PROPOSAL_FAMILIES):
///
/// | family | labels | value |
/// | --- | --- | --- |
/// | `<prefix>_acceptance_by_proposal_length_total` | `proposal_length` = `L`, `matched` = `m` | resolved proposals of length `L` whose first `m` tokens matched the output |
/// | `<prefix>_num_aborted_proposals_total` | | proposals left pending by aborted requests |
///
/// plus the engine's constant labels on every sample (vLLM uses
/// `model_name` and `engine`). With the prefix [`VLLM_METRIC_PREFIX`](crate::VLLM_METRIC_PREFIX) the last
/// family is `vllm:spec_decode_scheduled_steps_total{num_spec_tokens}`, the
/// family of vLLM pull request #54748.
///
/// A collector given the engine's [`SharedPlan`](crate::SharedPlan) with
/// [`with_plan`](SpecDecodeCollector::with_plan) also exports the gauge
/// `<prefix>_controller_draft_length`: the draft length the plan holds at
/// the moment of the scrape.
///
/// # Guarantees
///
/// - **The families of one scrape agree.** They are all derived from the
///   same snapshot, so `sum(<prefix>_acceptance_by_draft_length_total)`
///   equals `<prefix>_num_drafts_total` in every scrape, and likewise for
///   tokens and per-position counts.
/// - **Series never appear or vanish.** Every bucket of the triangle
///   (`(K + 1)(K + 2) / 2` series), every position (`K` series) and every
///   scheduled budget (`K + 1` series) is encoded in every scrape, zero or
///   not, so `rate()` and `increase()` see
///   a series from the first scrape of the process on.
/// - **Counters never go down** while the [`Recorder`] lives: every scrape
///   takes a snapshot, and no counter of a snapshot is smaller than in a
///   snapshot that happened-before it (one scrape's encoding happens-before
///   the next one's answer, since the scraper waits for the first before
///   sending the second); no figure is ever reset. A restarted process starts again from zero, which
///   Prometheus handles as an ordinary counter reset.
/// - **Fleet aggregation is exact.** Every family is a plain counter, so
///   `sum by (draft_length, accepted) (...)` over replicas is the histogram
///   of the fleet.
///
/// # Names, `_total` and the two text formats
///
/// The sample names are exactly `<prefix>_num_drafts_total` and so on; with
/// the prefix [`VLLM_METRIC_PREFIX`](crate::VLLM_METRIC_PREFIX) (`vllm:spec_decode`) they are the names vLLM's
/// dashboards query. `prometheus-client` writes OpenMetrics 1.0, where a
/// counter *family* is named without the suffix (`# TYPE
/// spec_decode_num_drafts counter`) and its *samples* carry `_total`; this
/// module therefore hands it the family name without `_total` and lets the
/// encoder add the suffix, so no name ever ends in `_total_total`. A
/// [`Registry`] prefix, if the engine uses one, is prepended as
/// `<registry prefix>_<prefix>_...` by `prometheus-client` itself.
///
/// Prometheus scrapes OpenMetrics. `promtool check metrics`, however, parses
/// only the classic Prometheus text format 0.0.4, where the `# HELP` and
/// `# TYPE` lines name the sample (`spec_decode_num_drafts_total`); fed
/// OpenMetrics it reports every family as lacking help text. For a
/// `/metrics` endpoint that serves both, [`SpecDecodeCollector::encode_text`]
/// writes either format from the same encoding ([`TextFormat`]), and
/// [`TextFormat::from_accept`] picks one from the scraper's `Accept` header,
/// as the official client libraries do. The 0.0.4 text passes
/// `promtool check metrics` without findings for the default prefix; with
/// `vllm:spec_decode` the only findings are promtool's lint "metric names
/// should not contain ':'", which vLLM's own names draw as well.
///
/// The gauge is the one family that is not a counter: its sample has no
/// `_total`, in either format.
///
/// Constant label values are escaped for the text formats (`\`, `"` and
/// newline), which `prometheus-client` 0.24 does not do by itself.
///
/// # Example
///
/// ```
/// use prometheus_client::encoding::text::encode;
/// use prometheus_client::registry::Registry;
/// use specdec_metrics::Recorder;
/// use specdec_metrics::SpecDecodeCollector;
///
/// let recorder = Recorder::new(2)?;
/// let collector = SpecDecodeCollector::new(recorder.clone())
///     .with_prefix("vllm:spec_decode")?
///     .with_const_labels([("model_name", "llama"), ("engine", "0")])?;
/// let mut registry = Registry::default();
/// registry.register_collector(Box::new(collector));
///
/// let worker = recorder.worker();
/// worker.observe(2, 1)?;
/// worker.observe(1, 1)?;
///
/// let mut text = String::new();
/// encode(&mut text, &registry)?; // what a scrape gets: OpenMetrics 1.0
/// assert!(text.contains("# TYPE vllm:spec_decode_num_drafts counter\n"));
/// assert!(text.contains("vllm:spec_decode_num_drafts_total{model_name=\"llama\",engine=\"0\"} 2\n"));
/// assert!(text.contains(
///     "vllm:spec_decode_acceptance_by_draft_length_total\
///      {model_name=\"llama\",engine=\"0\",draft_length=\"2\",accepted=\"1\"} 1\n"
/// ));
/// // Unobserved buckets are there too, at zero.
/// assert!(text.contains(
///     "vllm:spec_decode_acceptance_by_draft_length_total\
///      {model_name=\"llama\",engine=\"0\",draft_length=\"0\",accepted=\"0\"} 0\n"
/// ));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Cheap to clone (the recorder, the plan and the names are shared).
///
/// ```
/// use specdec_metrics::Recorder;
/// use specdec_metrics::{SpecDecodeCollector, TextFormat};
///
/// let recorder = Recorder::new(3)?;
/// recorder.observe(3, 2)?;
/// let collector = SpecDecodeCollector::new(recorder);
/// let text = collector.encode_text(TextFormat::PrometheusText);
/// assert!(text.contains("# TYPE spec_decode_num_drafts_total counter\n"));
/// assert!(text.contains("spec_decode_num_drafts_total 1\n"));
/// assert!(text.contains("spec_decode_num_accepted_tokens_per_pos_total{position=\"1\"} 1\n"));
/// assert!(text.contains("spec_decode_num_accepted_tokens_per_pos_total{position=\"2\"} 0\n"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct SpecDecodeCollector {
    source: Source,
    options: Options,
}

impl SpecDecodeCollector {
    /// A collector over `recorder` with the prefix [`DEFAULT_METRIC_PREFIX`](crate::DEFAULT_METRIC_PREFIX) and no
    /// constant labels. Each scrape takes one snapshot of the recorder.
    pub fn new(recorder: Recorder) -> Self {
        Self::with_source(Source::Live(recorder))
    }

    /// A collector that always encodes `histogram`: for example a report
    /// read back with serde, or the merge of several replicas' reports.
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// use specdec_metrics::{SpecDecodeCollector, TextFormat};
    ///
    /// let mut h = AcceptanceHistogram::new(1)?;
    /// h.observe(1, 1)?;
    /// h.observe_undrafted();
    /// let text = SpecDecodeCollector::from_histogram(h).encode_text(TextFormat::OpenMetrics);
    /// assert!(text.contains("spec_decode_num_undrafted_steps_total 1\n"));
    /// assert!(text.ends_with("# EOF\n"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_histogram(histogram: AcceptanceHistogram) -> Self {
        Self::with_source(Source::Fixed(histogram))
    }

    fn with_source(source: Source) -> Self {
        Self {
            source,
            options: Options::default(),
        }
    }

    /// Also exports the gauge `<prefix>_controller_draft_length`: the draft
    /// length of the plan in `plan` (see [`DraftPlan::draft_len`]), read with
    /// one relaxed atomic load at each scrape, so the dashboard shows the
    /// choice the engine threads follow from then on. Replaces any plan set
    /// before. The plan's exploration length is not exported: it follows
    /// from the draft length and `K` ([`DraftPlan::explore_len`]).
    ///
    /// The gauge carries the constant labels and no label of its own.
    ///
    /// [`DraftPlan::draft_len`]: crate::DraftPlan::draft_len
    /// [`DraftPlan::explore_len`]: crate::DraftPlan::explore_len
    ///
    /// ```
    /// use std::sync::Arc;
    /// use specdec_metrics::{SpecDecodeCollector, TextFormat};
    /// use specdec_metrics::{DraftPlan, Recorder, SharedPlan};
    ///
    /// let recorder = Recorder::new(8)?;
    /// let plan = Arc::new(SharedPlan::new(DraftPlan::new(3, 8).unwrap()));
    /// let collector = SpecDecodeCollector::new(recorder).with_plan(Arc::clone(&plan));
    /// let text = collector.encode_text(TextFormat::PrometheusText);
    /// assert!(text.contains("# TYPE spec_decode_controller_draft_length gauge\n"));
    /// assert!(text.contains("\nspec_decode_controller_draft_length 3\n"));
    ///
    /// // The metrics thread publishes a new choice; the next scrape shows it.
    /// plan.publish(DraftPlan::new(5, 8).unwrap());
    /// let text = collector.encode_text(TextFormat::OpenMetrics);
    /// assert!(text.contains("\nspec_decode_controller_draft_length 5\n"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_plan(self, plan: Arc<impl DraftLenGauge + 'static>) -> Self {
        Self {
            options: self.options.with_plan(plan),
            ..self
        }
    }

    /// The plan whose draft length is exported as a gauge, if one was set
    /// with [`with_plan`](Self::with_plan).
    pub fn plan(&self) -> Option<&Arc<dyn DraftLenGauge>> {
        self.options.plan()
    }

    /// Sets the name prefix: samples are named `<prefix>_num_drafts_total`
    /// and so on. [`VLLM_METRIC_PREFIX`](crate::VLLM_METRIC_PREFIX) gives vLLM's names.
    ///
    /// # Errors
    ///
    /// [`NameError::Prefix`] unless the prefix matches
    /// `[a-zA-Z_:][a-zA-Z0-9_:]*`.
    ///
    /// ```
    /// use specdec_metrics::Recorder;
    /// use specdec_metrics::{SpecDecodeCollector, VLLM_METRIC_PREFIX};
    /// let recorder = Recorder::new(2)?;
    /// let collector = SpecDecodeCollector::new(recorder.clone()).with_prefix(VLLM_METRIC_PREFIX)?;
    /// assert_eq!(collector.prefix(), "vllm:spec_decode");
    /// assert!(SpecDecodeCollector::new(recorder).with_prefix("spec-decode").is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_prefix(self, prefix: impl Into<String>) -> Result<Self, NameError> {
        Ok(Self {
            options: self.options.with_prefix(prefix)?,
            ..self
        })
    }

    /// Sets the constant labels put on every sample, before the families'
    /// own labels (replacing any set before). Values may be any text; they
    /// are escaped when encoded.
    ///
    /// # Errors
    ///
    /// [`NameError`] when a name is not a label name, is one of
    /// [`FAMILY_LABELS`](crate::FAMILY_LABELS) or starts with `__`, or is given twice.
    ///
    /// ```
    /// use specdec_metrics::Recorder;
    /// use specdec_metrics::{SpecDecodeCollector, TextFormat};
    /// let recorder = Recorder::new(1)?;
    /// let collector = SpecDecodeCollector::new(recorder)
    ///     .with_const_labels([("model_name", "say \"hi\""), ("engine", "0")])?;
    /// let text = collector.encode_text(TextFormat::PrometheusText);
    /// assert!(text.contains("spec_decode_num_drafts_total{model_name=\"say \\\"hi\\\"\",engine=\"0\"} 0\n"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_const_labels<I, K, V>(self, labels: I) -> Result<Self, NameError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        Ok(Self {
            options: self.options.with_const_labels(labels)?,
            ..self
        })
    }

    /// The name prefix.
    pub fn prefix(&self) -> &str {
        self.options.prefix()
    }

    /// The constant labels, in the order they are encoded.
    pub fn const_labels(&self) -> &[(String, String)] {
        self.options.const_labels()
    }

    /// What the next scrape encodes: a fresh snapshot of the recorder, or
    /// the fixed histogram.
    pub fn snapshot(&self) -> AcceptanceHistogram {
        self.source.snapshot()
    }

    /// A complete exposition of these families alone, from one snapshot, in
    /// `format`: the body of a `/metrics` response whose `Content-Type` is
    /// [`format.content_type()`](TextFormat::content_type).
    ///
    /// Both formats come from the same `prometheus-client` encoding; the
    /// classic format differs only in the `# HELP`/`# TYPE` names and the
    /// missing `# EOF` (see [`SpecDecodeCollector`]).
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// use specdec_metrics::{SpecDecodeCollector, TextFormat};
    /// let collector = SpecDecodeCollector::from_histogram(AcceptanceHistogram::new(1)?);
    /// let open = collector.encode_text(TextFormat::OpenMetrics);
    /// let classic = collector.encode_text(TextFormat::PrometheusText);
    /// assert!(open.starts_with("# HELP spec_decode_num_drafts Speculative"));
    /// assert!(classic.starts_with("# HELP spec_decode_num_drafts_total Speculative"));
    /// // K = 1: five unlabelled families, one position in each of two, the
    /// // three buckets of the triangle and the two scheduled budgets.
    /// assert_eq!(classic.lines().filter(|l| !l.starts_with('#')).count(), 5 + 2 + 3 + 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn encode_text(&self, format: TextFormat) -> String {
        let frozen = Self {
            source: Source::Fixed(self.snapshot()),
            options: self.options.clone(),
        };
        let mut registry = Registry::default();
        registry.register_collector(Box::new(frozen));
        encode_registry(&registry, format)
    }
}

/// A whole `prometheus-client` [`Registry`] in `format`: the body of a
/// `/metrics` response whose `Content-Type` is
/// [`format.content_type()`](TextFormat::content_type), for an engine that
/// registers a [`SpecDecodeCollector`] next to metrics of its own.
///
/// `prometheus-client` writes OpenMetrics 1.0; for counters, gauges and
/// histograms without units or exemplars the classic format 0.0.4 differs
/// only in that a counter's `# HELP` and `# TYPE` lines name its `_total`
/// sample, and in the missing `# EOF`. (Other metric types, units and
/// exemplars are passed through as OpenMetrics writes them.)
///
/// ```
/// use prometheus_client::metrics::gauge::Gauge;
/// use prometheus_client::registry::Registry;
/// use specdec_metrics::Recorder;
/// use specdec_metrics::{SpecDecodeCollector, TextFormat, encode_registry};
///
/// let mut registry = Registry::default();
/// registry.register_collector(Box::new(SpecDecodeCollector::new(Recorder::new(4)?)));
/// let running = Gauge::<i64>::default();
/// registry.register("num_requests_running", "Requests in the batch.", running.clone());
/// running.set(3);
/// let text = encode_registry(&registry, TextFormat::PrometheusText);
/// assert!(text.contains("# TYPE spec_decode_num_drafts_total counter\n"));
/// assert!(text.contains("# TYPE num_requests_running gauge\nnum_requests_running 3\n"));
/// assert!(!text.contains("# EOF"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn encode_registry(registry: &Registry, format: TextFormat) -> String {
    let mut open_metrics = String::new();
    // Writing into a `String` cannot fail, and neither can our encoding
    // (it only propagates the writer's errors).
    prometheus_client::encoding::text::encode(&mut open_metrics, registry)
        .expect("encoding into a String never fails");
    match format {
        TextFormat::OpenMetrics => open_metrics,
        TextFormat::PrometheusText => classic_from_open_metrics(&open_metrics),
    }
}

impl Collector for SpecDecodeCollector {
    /// Encodes every counter family from one snapshot, then the plan's
    /// gauge if there is a plan.
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let snapshot = self.snapshot();
        let naming = self.options.naming();
        encode_families(&snapshot, naming, &mut encoder)?;
        match self.options.plan() {
            Some(plan) => encode_plan_gauge(plan.as_ref(), naming, &mut encoder),
            None => Ok(()),
        }
    }
}

/// Writes the gauge of the plan's current draft length.
fn encode_plan_gauge(
    plan: &dyn DraftLenGauge,
    naming: &Naming,
    encoder: &mut DescriptorEncoder,
) -> fmt::Result {
    let mut metric =
        encoder.encode_descriptor(&naming.gauge_name, PLAN_GAUGE_HELP, None, MetricType::Gauge)?;
    // At most 64, so exact in `i64`.
    let gauge = ConstGauge::new(plan.draft_len() as i64);
    if naming.const_labels().is_empty() {
        gauge.encode(metric)
    } else {
        let labels = Labels {
            consts: naming.const_labels(),
            own: Own::None,
        };
        gauge.encode(metric.encode_family(&labels)?)
    }
}

/// Writes the families of `h`, in `FAMILIES` order, each with the series
/// [`series`] lists: the nine of `METRIC_FAMILIES`, then the two proposal
/// families when `h` records proposals.
fn encode_families(
    h: &AcceptanceHistogram,
    naming: &Naming,
    encoder: &mut DescriptorEncoder,
) -> fmt::Result {
    for (family, (name, help)) in naming.family_names.iter().zip(HELP).enumerate() {
        let mut values = series(h, family).peekable();
        if values.peek().is_none() {
            // A proposal family of a histogram without proposals.
            continue;
        }
        // The OpenMetrics family name: the encoder adds `_total` to the
        // samples of a counter.
        let name = name.strip_suffix("_total").unwrap_or(name);
        let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
        for (own, value) in values {
            let counter = ConstCounter::new(value);
            if own == Own::None && naming.const_labels().is_empty() {
                // The family's only series, without labels: encoded through
                // a family with an empty label set it would read `name{}`.
                counter.encode(metric)?;
                break;
            }
            let labels = Labels {
                consts: naming.const_labels(),
                own,
            };
            counter.encode(metric.encode_family(&labels)?)?;
        }
    }
    Ok(())
}

/// The constant labels, then the family's own.
struct Labels<'a> {
    consts: &'a [(String, String)],
    own: Own,
}

impl EncodeLabelSet for Labels<'_> {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> fmt::Result {
        for (name, value) in self.consts {
            write_label(encoder, name, EscapedLabelValue(value))?;
        }
        for (name, value) in self.own.labels() {
            write_label(encoder, name, value)?;
        }
        Ok(())
    }
}

fn write_label(encoder: &mut LabelSetEncoder, name: &str, value: impl fmt::Display) -> fmt::Result {
    let mut label = encoder.encode_label();
    let mut key = label.encode_label_key()?;
    key.write_str(name)?;
    let mut value_encoder = key.encode_label_value()?;
    write!(value_encoder, "{value}")?;
    value_encoder.finish()
}

/// A label value escaped for the text formats: `\` → `\\`, `"` → `\"`,
/// newline → `\n` (the same rule in OpenMetrics and in format 0.0.4).
struct EscapedLabelValue<'a>(&'a str);

impl fmt::Display for EscapedLabelValue<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest = self.0;
        while let Some(i) = rest.find(['\\', '"', '\n']) {
            f.write_str(&rest[..i])?;
            f.write_str(match rest.as_bytes()[i] {
                b'\\' => "\\\\",
                b'"' => "\\\"",
                _ => "\\n",
            })?;
            rest = &rest[i + 1..];
        }
        f.write_str(rest)
    }
}

/// Rewrites OpenMetrics text as Prometheus text format 0.0.4: the `# HELP`
/// and `# TYPE` lines of a counter (a family whose `# TYPE` says
/// `counter`) name the `_total` sample, and the `# EOF` line goes. Exact
/// for counters, gauges and histograms without units or exemplars; not a
/// general converter.
fn classic_from_open_metrics(open_metrics: &str) -> String {
    let counters: Vec<&str> = open_metrics
        .lines()
        .filter_map(|line| line.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(open_metrics.len() + 2 * 6 * counters.len());
    for line in open_metrics.lines() {
        if line == "# EOF" {
            continue;
        }
        let descriptor = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|tag| Some((tag, line.strip_prefix(tag)?)));
        match descriptor {
            Some((tag, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                out.push_str(tag);
                out.push_str(name);
                if counters.contains(&name) {
                    out.push_str("_total");
                }
                out.push(' ');
                out.push_str(tail);
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_covers_backslash_quote_newline() {
        let escaped = EscapedLabelValue("a\\b\"c\nd").to_string();
        assert_eq!(escaped, "a\\\\b\\\"c\\nd");
    }

    #[test]
    fn classic_text_renames_descriptors_only() {
        let open = "# HELP x_a Help text.\n# TYPE x_a counter\nx_a_total{l=\"# HELP \"} 1\n\
                    # HELP x_g Gauge.\n# TYPE x_g gauge\nx_g 2\n# EOF\n";
        assert_eq!(
            classic_from_open_metrics(open),
            "# HELP x_a_total Help text.\n# TYPE x_a_total counter\nx_a_total{l=\"# HELP \"} 1\n\
             # HELP x_g Gauge.\n# TYPE x_g gauge\nx_g 2\n"
        );
    }
}
