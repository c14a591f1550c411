//! [`PrometheusCrateCollector`]: the Prometheus families as a collector of
//! the `prometheus` crate (tikv's `rust-prometheus`; cargo feature
//! `tikv-prometheus`).

use std::collections::HashMap;
use std::sync::Arc;

use tikv_prometheus::core::{Collector, Desc};
use tikv_prometheus::proto::{Counter, Gauge, LabelPair, Metric, MetricFamily, MetricType};
use tikv_prometheus::{Encoder as _, Registry, TextEncoder};

use super::DraftLenGauge;
use super::error::NameError;
use super::names::{FAMILIES, HELP, PLAN_GAUGE_HELP};
use super::options::{Derived, Naming, Options};
use super::series::{Own, Source, own_label_names, series};
use crate::{AcceptanceHistogram, Recorder};

/// A [`prometheus::core::Collector`](tikv_prometheus::core::Collector) (the
/// `prometheus` crate, version 0.14) that collects the nine counter
/// families of a [`Recorder`] (or of a fixed histogram), one snapshot per
/// gather, and, given a [`SharedPlan`](crate::SharedPlan) ([`with_plan`](Self::with_plan)), the
/// gauge of the controller's current draft length.
///
/// The families, their names, `# HELP` texts, labels and values are those of
/// [`SpecDecodeCollector`](crate::SpecDecodeCollector) (feature
/// `prometheus`, `prometheus-client`) and of
/// [`MetricsPublisher`](crate::MetricsPublisher) (feature `metrics`): the
/// reference's "Prometheus families", derived by the same walk over the
/// histogram. For an engine whose registry is a `prometheus::Registry`
/// (as tikv's and many older Rust services): register the collector once,
/// and every `Registry::gather` takes **one** [`Recorder::snapshot`] for all
/// families, so the identities between them hold in every scrape.
///
/// The `prometheus` crate writes the classic text format 0.0.4
/// ([`TextEncoder`](tikv_prometheus::TextEncoder)), where a counter's
/// `# HELP` and `# TYPE` lines name the `_total` sample, so the families
/// are named `<prefix>_num_drafts_total` and so on, exactly the sample
/// names of the other exporters; the text passes `promtool check metrics`
/// (with `vllm:spec_decode`, up to promtool's lint on `:`).
///
/// Differences that come from the `prometheus` crate, not from the
/// families:
///
/// - `Registry::gather` sorts the families by name and the series of a
///   family by their label values as text (`draft_length="10"` before
///   `"2"`); the samples are the same.
/// - Values are `f64` in its data model: exact up to 2^53 per counter.
/// - A registry's own prefix and common labels
///   (`Registry::new_custom`) are applied by the registry, as to its other
///   metrics.
///
/// # Example
///
/// ```
/// use specdec_metrics::{PrometheusCrateCollector, Recorder};
/// // An engine names the crate `prometheus`; this crate's tests rename it.
/// use tikv_prometheus::{Encoder, Registry, TextEncoder};
///
/// let recorder = Recorder::new(2)?;
/// let collector = PrometheusCrateCollector::new(recorder.clone())
///     .with_prefix("vllm:spec_decode")?
///     .with_const_labels([("model_name", "llama"), ("engine", "0")])?;
/// let registry = Registry::new();
/// registry.register(Box::new(collector))?;
///
/// let worker = recorder.worker();
/// worker.observe(2, 1)?;
/// worker.observe(1, 1)?;
///
/// let mut text = Vec::new();
/// TextEncoder::new().encode(&registry.gather(), &mut text)?;
/// let text = String::from_utf8(text)?;
/// assert!(text.contains("# TYPE vllm:spec_decode_num_drafts_total counter\n"));
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
/// Cheap to clone (the recorder, the plan and the descriptors are shared).
#[derive(Clone, Debug)]
pub struct PrometheusCrateCollector {
    source: Source,
    options: Options<Descs>,
}

/// The families' descriptors, then the gauge's.
#[derive(Debug)]
struct Descs(Vec<Desc>);

impl Derived for Descs {
    fn derive(naming: &Naming) -> Result<Self, NameError> {
        let consts: HashMap<String, String> = naming.const_labels().iter().cloned().collect();
        // The prefix and the label names were checked, the help texts are
        // not empty: `Desc::new` accepts them.
        let desc = |name: &str, help: &str, variable: Vec<String>| {
            Desc::new(name.to_owned(), help.to_owned(), variable, consts.clone())
                .expect("checked names make a valid descriptor")
        };
        let mut descs: Vec<Desc> = naming
            .family_names
            .iter()
            .zip(HELP)
            .enumerate()
            .map(|(family, (name, help))| {
                let variable = own_label_names(family).map(str::to_owned).collect();
                desc(name, help, variable)
            })
            .collect();
        descs.push(desc(&naming.gauge_name, PLAN_GAUGE_HELP, Vec::new()));
        Ok(Self(descs))
    }
}

/// The constant labels, then the family's own, as label pairs.
fn label_pairs(naming: &Naming, own: Own) -> Vec<LabelPair> {
    let pair = |name: &str, value: String| {
        let mut pair = LabelPair::default();
        pair.set_name(name.to_owned());
        pair.set_value(value);
        pair
    };
    naming
        .const_labels()
        .iter()
        .map(|(name, value)| pair(name, value.clone()))
        .chain(
            own.labels()
                .map(|(name, value)| pair(name, value.to_string())),
        )
        .collect()
}

impl PrometheusCrateCollector {
    /// A collector over `recorder` with the prefix [`DEFAULT_METRIC_PREFIX`](crate::DEFAULT_METRIC_PREFIX)
    /// and no constant labels. Each gather takes one snapshot of the
    /// recorder.
    pub fn new(recorder: Recorder) -> Self {
        Self::with_source(Source::Live(recorder))
    }

    /// A collector that always collects `histogram`: for example a report
    /// read back with serde, or the merge of several replicas' reports.
    ///
    /// ```
    /// use specdec_metrics::{AcceptanceHistogram, PrometheusCrateCollector};
    ///
    /// let mut h = AcceptanceHistogram::new(1)?;
    /// h.observe(1, 1)?;
    /// h.observe_undrafted();
    /// let text = PrometheusCrateCollector::from_histogram(h).encode_text();
    /// assert!(text.contains("spec_decode_num_undrafted_steps_total 1\n"));
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

    /// Sets the name prefix: the families are named
    /// `<prefix>_num_drafts_total` and so on.
    /// [`VLLM_METRIC_PREFIX`](crate::VLLM_METRIC_PREFIX) gives vLLM's names.
    ///
    /// # Errors
    ///
    /// [`NameError::Prefix`] unless the prefix matches
    /// `[a-zA-Z_:][a-zA-Z0-9_:]*`.
    ///
    /// ```
    /// use specdec_metrics::{PrometheusCrateCollector, Recorder, VLLM_METRIC_PREFIX};
    /// let recorder = Recorder::new(2)?;
    /// let collector = PrometheusCrateCollector::new(recorder.clone()).with_prefix(VLLM_METRIC_PREFIX)?;
    /// assert_eq!(collector.prefix(), "vllm:spec_decode");
    /// assert!(PrometheusCrateCollector::new(recorder).with_prefix("spec-decode").is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_prefix(self, prefix: impl Into<String>) -> Result<Self, NameError> {
        Ok(Self {
            options: self.options.with_prefix(prefix)?,
            ..self
        })
    }

    /// Sets the constant labels put on every sample, before the families'
    /// own labels (replacing any set before). Values may be any text; the
    /// `prometheus` crate's encoder escapes them.
    ///
    /// # Errors
    ///
    /// [`NameError`] when a name is not a label name, is one of
    /// [`FAMILY_LABELS`](crate::FAMILY_LABELS) or starts with `__`, or is
    /// given twice.
    ///
    /// ```
    /// use specdec_metrics::{NameError, PrometheusCrateCollector, Recorder};
    /// let collector = PrometheusCrateCollector::new(Recorder::new(1)?)
    ///     .with_const_labels([("model_name", "llama"), ("engine", "0")])?;
    /// assert_eq!(collector.const_labels()[1], ("engine".to_owned(), "0".to_owned()));
    /// let err = collector.with_const_labels([("position", "1")]).unwrap_err();
    /// assert_eq!(err, NameError::ReservedLabelName("position".into()));
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

    /// Also collects the gauge `<prefix>_controller_draft_length`: the draft
    /// length of the plan in `plan` (see
    /// [`DraftPlan::draft_len`](crate::DraftPlan::draft_len)), read with one
    /// relaxed atomic load at each gather. It carries the constant labels
    /// and no label of its own. Replaces any plan set before.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use specdec_metrics::{DraftPlan, PrometheusCrateCollector, Recorder, SharedPlan};
    ///
    /// let plan = Arc::new(SharedPlan::new(DraftPlan::new(3, 8).unwrap()));
    /// let collector = PrometheusCrateCollector::new(Recorder::new(8)?).with_plan(Arc::clone(&plan));
    /// let text = collector.encode_text();
    /// assert!(text.contains("# TYPE spec_decode_controller_draft_length gauge\n"));
    /// assert!(text.contains("\nspec_decode_controller_draft_length 3\n"));
    /// plan.publish(DraftPlan::new(5, 8).unwrap());
    /// assert!(collector.encode_text().contains("\nspec_decode_controller_draft_length 5\n"));
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

    /// The name prefix.
    pub fn prefix(&self) -> &str {
        self.options.prefix()
    }

    /// The constant labels, in the order they are put on the samples.
    pub fn const_labels(&self) -> &[(String, String)] {
        self.options.const_labels()
    }

    /// What the next gather collects: a fresh snapshot of the recorder, or
    /// the fixed histogram.
    pub fn snapshot(&self) -> AcceptanceHistogram {
        self.source.snapshot()
    }

    /// These families alone, from one snapshot, in the classic text format
    /// 0.0.4 as a `prometheus::Registry` holding only this collector gathers
    /// them and its [`TextEncoder`](tikv_prometheus::TextEncoder) writes
    /// them (families sorted by name, series by label values): the body of a
    /// `/metrics` response whose `Content-Type` is
    /// `text/plain; version=0.0.4`.
    ///
    /// ```
    /// use specdec_metrics::{AcceptanceHistogram, PrometheusCrateCollector};
    /// let text = PrometheusCrateCollector::from_histogram(AcceptanceHistogram::new(1)?).encode_text();
    /// assert!(text.contains("# HELP spec_decode_num_drafts_total Speculative"));
    /// // K = 1: five unlabelled families, one position in each of two, the
    /// // three buckets of the triangle and the two scheduled budgets.
    /// assert_eq!(text.lines().filter(|l| !l.starts_with('#')).count(), 5 + 2 + 3 + 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn encode_text(&self) -> String {
        let registry = Registry::new();
        // A new registry holds nothing that these descriptors could clash with.
        registry
            .register(Box::new(self.clone()))
            .expect("a new registry accepts the collector");
        let mut text = Vec::new();
        // Writing into a `Vec` cannot fail, and every family has a name and
        // at least one sample (`K >= 1`).
        TextEncoder::new()
            .encode(&registry.gather(), &mut text)
            .expect("encoding these families into a Vec never fails");
        String::from_utf8(text).expect("the text encoder writes UTF-8")
    }
}

impl Collector for PrometheusCrateCollector {
    /// The nine families' descriptors, the two proposal families', then
    /// the gauge's (whether or not proposals are recorded or a plan is set,
    /// so that registering is independent of both).
    fn desc(&self) -> Vec<&Desc> {
        self.options.derived().0.iter().collect()
    }

    /// Every counter family from one snapshot, then the plan's gauge if
    /// there is a plan.
    fn collect(&self) -> Vec<MetricFamily> {
        let h = self.snapshot();
        let naming = self.options.naming();
        let mut families = Vec::with_capacity(FAMILIES.len() + 1);
        for (family, (name, help)) in naming.family_names.iter().zip(HELP).enumerate() {
            let metrics: Vec<Metric> = series(&h, family)
                .map(|(own, value)| {
                    let mut counter = Counter::default();
                    // Exact up to 2^53.
                    counter.set_value(value as f64);
                    let mut metric = Metric::default();
                    metric.set_label(label_pairs(naming, own));
                    metric.set_counter(counter);
                    metric
                })
                .collect();
            if metrics.is_empty() {
                // A proposal family of a histogram without proposals.
                continue;
            }
            families.push(family_of(name, help, MetricType::COUNTER, metrics));
        }
        if let Some(plan) = self.options.plan() {
            let mut gauge = Gauge::default();
            // At most 64: exact in `f64`.
            gauge.set_value(plan.draft_len() as f64);
            let mut metric = Metric::default();
            metric.set_label(label_pairs(naming, Own::None));
            metric.set_gauge(gauge);
            families.push(family_of(
                &naming.gauge_name,
                PLAN_GAUGE_HELP,
                MetricType::GAUGE,
                vec![metric],
            ));
        }
        families
    }
}

fn family_of(name: &str, help: &str, kind: MetricType, metrics: Vec<Metric>) -> MetricFamily {
    let mut family = MetricFamily::default();
    family.set_name(name.to_owned());
    family.set_help(help.to_owned());
    family.set_field_type(kind);
    family.set_metric(metrics);
    family
}
