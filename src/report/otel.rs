//! [`OpenTelemetryExporter`]: the Prometheus families as observable
//! instruments of an OpenTelemetry `Meter` (cargo feature `opentelemetry`).

use core::fmt;
use std::sync::Arc;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{AsyncInstrument, Meter};
use parking_lot::Mutex;

use super::DraftLenGauge;
use super::error::NameError;
use super::names::{HELP, METRIC_FAMILIES, NUM_DRAFTS, PLAN_GAUGE_HELP};
use super::options::{Derived, Naming, Options};
use super::series::{Own, series};
use crate::{AcceptanceHistogram, Recorder};

/// The longest instrument name OpenTelemetry accepts.
const MAX_INSTRUMENT_NAME_LEN: usize = 255;

/// Registers the nine counter families of a [`Recorder`] (and the two
/// proposal families when it
/// [records proposals](crate::Recorder::records_proposals)) as observable
/// counters of an OpenTelemetry [`Meter`] (and, with a [`SharedPlan`](crate::SharedPlan), the
/// controller's draft length as an observable gauge): the families of
/// [`SpecDecodeCollector`](crate::SpecDecodeCollector), with their help
/// texts as descriptions and their labels (the constant labels, then the
/// family's own) as attributes, read from a [`Recorder::snapshot`] in the
/// instruments' callbacks, at each collection of the engine's
/// `MeterProvider`.
///
/// # Names
///
/// OpenTelemetry instrument names match `[A-Za-z][A-Za-z0-9_./-]{0,254}`:
/// no `:`. Each instrument is named after the family as the OpenMetrics
/// text names it, `<prefix>_<family>` **without `_total`**, with every `:`
/// of the prefix replaced by `_`: `vllm:spec_decode` gives
/// `vllm_spec_decode_num_drafts`. This is the rule of the OpenTelemetry
/// specification's "Prometheus and OpenMetrics Compatibility", section
/// "OTLP Metric points to Prometheus": a character a name cannot hold
/// becomes `_` ("Metric Metadata"), and a monotonic sum gets the suffix
/// `_total` ("Sums"). So an OpenTelemetry Prometheus exporter, or
/// Prometheus's own OTLP receiver, turns these instruments back into
/// `vllm_spec_decode_num_drafts_total` and so on: the other exporters'
/// names with `vllm_` for `vllm:` (dashboards written for vLLM's names need
/// that prefix), and exactly their names for the default prefix
/// `spec_decode`. [`instrument_names`](Self::instrument_names) lists them.
///
/// # One snapshot per collection
///
/// The instruments are registered in the families' order, the first one
/// (`<prefix>_num_drafts`) taking a snapshot in its callback and the others
/// reading it. The SDK (`opentelemetry_sdk`) runs a reader's callbacks in
/// registration order, one collection at a time, so the families of one
/// collection come from one snapshot and the identities between them
/// hold, as in a scrape of the collector. With several readers on one
/// `MeterProvider` collecting at the same moment, one reader may see two
/// snapshots mixed: every counter still never goes down.
///
/// # Cardinality limit
///
/// The SDK (`opentelemetry_sdk` 0.33) keeps at most 2000 attribute sets per
/// instrument by default; the sets beyond are folded into one point with
/// the attribute `otel.metric.overflow = true`, whose value, for an
/// observable counter, is that of **one** of the folded sets (the SDK sets
/// a precomputed value, it does not add them up). The largest family, by
/// draft length, has `(K + 1)(K + 2) / 2` series per exporter: 45 at
/// `K = 8`, 1,953 at `K = 61`, and **2,016 at `K = 62`, 2,145 at
/// `K = 64`**, over the default.
///
/// The limit counts **every exporter that registers the instrument name**
/// on the provider, not one: exporters of the same prefix on one meter feed
/// the same instruments, and their sets add up. Two models on one meter,
/// told apart by a constant label, pass the default from `K = 44`
/// (2 × 1,035 sets), and a limit of one exporter's
/// [`max_series_per_instrument`](Self::max_series_per_instrument) keeps
/// 2,146 of their 4,290 points at `K = 64` (2,145 and the overflow point).
/// The engine must raise the limit with a view to at least the sum over
/// those exporters (`docs/opentelemetry.md` shows the view;
/// `tests/opentelemetry_exporter.rs` measures each figure). The exporter
/// cannot set the limit itself: it belongs to the engine's
/// `MeterProvider`. The proposal family
/// `<prefix>_acceptance_by_proposal_length` (recorded only on request) has
/// `K (K + 3) / 2` series, one fewer than the by-draft-length family: 44 at
/// `K = 8`, 2,144 at `K = 64`, past the default from `K = 62` (2,015) as
/// well, so the same view covers it. Every other family has at most `K + 1
/// = 65` series per exporter.
///
/// Prefixes that differ only in `:` and `_` (`spec:decode`, `spec_decode`)
/// give the same instrument names, so two exporters so named on one meter
/// merge silently: with the same constant labels each point keeps one of
/// their values, not the sum.
///
/// # Example
///
/// ```
/// use opentelemetry::metrics::MeterProvider as _;
/// use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
/// use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
/// use specdec_metrics::{OpenTelemetryExporter, Recorder, VLLM_METRIC_PREFIX};
///
/// // The engine's provider (here with the SDK's in-memory exporter).
/// let exported = InMemoryMetricExporter::default();
/// let provider = SdkMeterProvider::builder()
///     .with_reader(PeriodicReader::builder(exported.clone()).build())
///     .build();
///
/// let recorder = Recorder::new(4)?;
/// OpenTelemetryExporter::new(recorder.clone())
///     .with_prefix(VLLM_METRIC_PREFIX)?
///     .with_const_labels([("model_name", "llama")])?
///     .register(&provider.meter("specdec-metrics"));
///
/// recorder.observe(4, 2)?;
/// recorder.observe(2, 2)?;
/// provider.force_flush()?; // a collection: the callbacks run
///
/// let metrics = exported.get_finished_metrics()?;
/// let drafts = metrics[0]
///     .scope_metrics()
///     .flat_map(|scope| scope.metrics())
///     .find(|m| m.name() == "vllm_spec_decode_num_drafts")
///     .expect("the drafts counter");
/// let AggregatedMetrics::U64(MetricData::Sum(sum)) = drafts.data() else { panic!() };
/// assert!(sum.is_monotonic());
/// assert_eq!(sum.data_points().next().unwrap().value(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct OpenTelemetryExporter {
    recorder: Recorder,
    options: Options<InstrumentNames>,
}

impl fmt::Debug for OpenTelemetryExporter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenTelemetryExporter")
            .field("recorder", &self.recorder)
            .field("prefix", &self.prefix())
            .field("const_labels", &self.const_labels())
            .field("plan", &self.plan())
            .finish_non_exhaustive()
    }
}

/// The instrument names: the OpenMetrics family names (without `_total`)
/// with `:` replaced by `_`, in [`METRIC_FAMILIES`] order, then the
/// gauge's, then the two proposal families'.
struct InstrumentNames(Vec<String>);

impl InstrumentNames {
    /// The instrument name of family `family` (an index into `FAMILIES`).
    fn family(&self, family: usize) -> &str {
        if family < METRIC_FAMILIES.len() {
            &self.0[family]
        } else {
            &self.0[family + 1]
        }
    }
}

impl Derived for InstrumentNames {
    /// The names, or [`NameError::Prefix`] when one is not a valid
    /// OpenTelemetry instrument name.
    fn derive(naming: &Naming) -> Result<Self, NameError> {
        let (metric, proposal) = naming.family_names.split_at(METRIC_FAMILIES.len());
        let names: Vec<String> = metric
            .iter()
            .map(String::as_str)
            .chain([naming.gauge_name.as_str()])
            .chain(proposal.iter().map(String::as_str))
            .map(|name| name.strip_suffix("_total").unwrap_or(name))
            .map(|name| name.replace(':', "_"))
            .collect();
        let valid = |name: &String| {
            name.len() <= MAX_INSTRUMENT_NAME_LEN
                && name.starts_with(|c: char| c.is_ascii_alphabetic())
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_./-".contains(c))
        };
        if names.iter().all(valid) {
            Ok(Self(names))
        } else {
            Err(NameError::Prefix(naming.prefix().to_owned()))
        }
    }
}

impl OpenTelemetryExporter {
    /// An exporter of `recorder`'s families with the prefix
    /// [`DEFAULT_METRIC_PREFIX`](crate::DEFAULT_METRIC_PREFIX) (instruments `spec_decode_num_drafts` and
    /// so on), no constant labels and no plan. Registers nothing yet:
    /// [`register`](Self::register) does.
    pub fn new(recorder: Recorder) -> Self {
        Self {
            recorder,
            options: Options::default(),
        }
    }

    /// Sets the name prefix, given as for the Prometheus exporters
    /// ([`VLLM_METRIC_PREFIX`](crate::VLLM_METRIC_PREFIX) included); the
    /// instruments are named `<prefix>_num_drafts` and so on with every `:`
    /// replaced by `_` (see [Names](Self#names)).
    ///
    /// # Errors
    ///
    /// [`NameError::Prefix`] unless the prefix matches
    /// `[a-zA-Z_:][a-zA-Z0-9_:]*` and the instrument names are valid
    /// OpenTelemetry names: starting with a letter, at most 255 characters.
    ///
    /// ```
    /// use specdec_metrics::{NameError, OpenTelemetryExporter, Recorder, VLLM_METRIC_PREFIX};
    /// let recorder = Recorder::new(2)?;
    /// let exporter = OpenTelemetryExporter::new(recorder.clone()).with_prefix(VLLM_METRIC_PREFIX)?;
    /// assert_eq!(exporter.prefix(), "vllm:spec_decode");
    /// assert_eq!(exporter.instrument_names()[0], "vllm_spec_decode_num_drafts");
    /// // A Prometheus name, but not an OpenTelemetry one once `:` is `_`.
    /// assert_eq!(
    ///     OpenTelemetryExporter::new(recorder).with_prefix(":spec").unwrap_err(),
    ///     NameError::Prefix(":spec".into())
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_prefix(self, prefix: impl Into<String>) -> Result<Self, NameError> {
        Ok(Self {
            options: self.options.with_prefix(prefix)?,
            ..self
        })
    }

    /// Sets the constant labels, put on every point as attributes (string
    /// values) before the family's own (replacing any set before).
    ///
    /// # Errors
    ///
    /// [`NameError`] when a name is not a label name, is one of
    /// [`FAMILY_LABELS`](crate::FAMILY_LABELS) or starts with `__`, or is
    /// given twice: the rules of the Prometheus exporters, so the
    /// attributes stay valid Prometheus labels.
    ///
    /// ```
    /// use specdec_metrics::{NameError, OpenTelemetryExporter, Recorder};
    /// let exporter = OpenTelemetryExporter::new(Recorder::new(2)?)
    ///     .with_const_labels([("model_name", "llama"), ("engine", "0")])?;
    /// assert_eq!(exporter.const_labels()[0], ("model_name".to_owned(), "llama".to_owned()));
    /// let err = exporter.with_const_labels([("draft_length", "1")]).unwrap_err();
    /// assert_eq!(err, NameError::ReservedLabelName("draft_length".into()));
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

    /// Also registers the observable gauge `<prefix>_controller_draft_length`
    /// (`:` replaced by `_`): the draft length of the plan in `plan` (see
    /// [`DraftPlan::draft_len`](crate::DraftPlan::draft_len)), read with one
    /// relaxed atomic load at each collection, with the constant labels and
    /// no attribute of its own. Replaces any plan set before.
    pub fn with_plan(self, plan: Arc<impl DraftLenGauge + 'static>) -> Self {
        Self {
            options: self.options.with_plan(plan),
            ..self
        }
    }

    /// The name prefix, as given (with its `:`).
    pub fn prefix(&self) -> &str {
        self.options.prefix()
    }

    /// The constant labels, in the order they are put on the points.
    pub fn const_labels(&self) -> &[(String, String)] {
        self.options.const_labels()
    }

    /// The plan whose draft length is registered as a gauge, if one was set
    /// with [`with_plan`](Self::with_plan).
    pub fn plan(&self) -> Option<&Arc<dyn DraftLenGauge>> {
        self.options.plan()
    }

    /// The instrument names: the nine counters in
    /// [`METRIC_FAMILIES`](crate::METRIC_FAMILIES) order, then the gauge's
    /// (registered only with a plan).
    ///
    /// ```
    /// use specdec_metrics::{OpenTelemetryExporter, Recorder};
    /// let names = OpenTelemetryExporter::new(Recorder::new(2)?).instrument_names().to_vec();
    /// assert_eq!(names[5], "spec_decode_acceptance_by_draft_length");
    /// assert_eq!(names[9], "spec_decode_controller_draft_length");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn instrument_names(&self) -> &[String] {
        &self.options.derived().0[..=METRIC_FAMILIES.len()]
    }

    /// The instrument names of the two proposal families
    /// ([`PROPOSAL_FAMILIES`](crate::PROPOSAL_FAMILIES), without `_total`,
    /// `:` replaced by `_`), registered only when the recorder
    /// [records proposals](crate::Recorder::records_proposals).
    ///
    /// ```
    /// use specdec_metrics::{OpenTelemetryExporter, Recorder};
    /// let recorder = Recorder::builder(2).record_proposals().build()?;
    /// let names = OpenTelemetryExporter::new(recorder).proposal_instrument_names().to_vec();
    /// assert_eq!(names, ["spec_decode_acceptance_by_proposal_length", "spec_decode_num_aborted_proposals"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn proposal_instrument_names(&self) -> &[String] {
        &self.options.derived().0[METRIC_FAMILIES.len() + 1..]
    }

    /// The most attribute sets this exporter reports on one instrument:
    /// the `(K + 1)(K + 2) / 2` buckets of the by-draft-length family (the
    /// proposal family, when recorded, has one fewer: `K (K + 3) / 2`).
    /// Exporters registering the same instrument names on one provider add
    /// up: a `MeterProvider` whose cardinality limit is below the sum of
    /// theirs folds the excess into its overflow point (see
    /// [Cardinality limit](Self#cardinality-limit)).
    ///
    /// ```
    /// use specdec_metrics::{OpenTelemetryExporter, Recorder};
    /// assert_eq!(OpenTelemetryExporter::new(Recorder::new(8)?).max_series_per_instrument(), 45);
    /// assert_eq!(OpenTelemetryExporter::new(Recorder::new(64)?).max_series_per_instrument(), 2145);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_series_per_instrument(&self) -> usize {
        let k = self.recorder.max_draft_len();
        (k + 1) * (k + 2) / 2
    }

    /// Registers the observable counters (and the gauge, with a plan) with
    /// `meter`. Their callbacks run at every collection of the meter's
    /// provider, for the provider's life (OpenTelemetry has no way to
    /// unregister them): register once per recorder.
    ///
    /// The attribute sets are built here, once; a callback then costs the
    /// snapshot (the first instrument's) and one `observe` per series.
    pub fn register(&self, meter: &Meter) {
        let shared = Arc::new(Shared {
            recorder: self.recorder.clone(),
            last: Mutex::new(None),
        });
        let consts: Vec<KeyValue> = self
            .options
            .naming()
            .const_labels()
            .iter()
            .map(|(name, value)| KeyValue::new(name.clone(), value.clone()))
            .collect();
        let shape = self.recorder.snapshot();
        let names = self.options.derived();
        for (family, help) in HELP.iter().enumerate() {
            let attributes: Vec<Vec<KeyValue>> = series(&shape, family)
                .map(|(own, _)| attributes_of(&consts, own))
                .collect();
            if attributes.is_empty() {
                // A proposal family of a recorder without proposals.
                continue;
            }
            let shared = Arc::clone(&shared);
            meter
                .u64_observable_counter(names.family(family).to_owned())
                .with_description(*help)
                .with_callback(move |observer| shared.observe(family, &attributes, observer))
                .build();
        }
        if let Some(plan) = self.plan() {
            let plan = Arc::clone(plan);
            meter
                .u64_observable_gauge(self.instrument_names()[METRIC_FAMILIES.len()].clone())
                .with_description(PLAN_GAUGE_HELP)
                .with_callback(move |observer| {
                    // At most 64.
                    observer.observe(plan.draft_len() as u64, &consts);
                })
                .build();
        }
    }
}

/// The constant labels, then the family's own, as attributes.
fn attributes_of(consts: &[KeyValue], own: Own) -> Vec<KeyValue> {
    consts
        .iter()
        .cloned()
        .chain(
            own.labels()
                .map(|(name, value)| KeyValue::new(name, value.to_string())),
        )
        .collect()
}

/// What the callbacks of one registration share: the recorder and the
/// snapshot of the current collection.
struct Shared {
    recorder: Recorder,
    /// Taken by the first family's callback, read by the others.
    last: Mutex<Option<AcceptanceHistogram>>,
}

impl Shared {
    /// The callback of family `family`: one `observe` per series, with the
    /// prebuilt `attributes` (in [`series`] order).
    fn observe(
        &self,
        family: usize,
        attributes: &[Vec<KeyValue>],
        observer: &dyn AsyncInstrument<u64>,
    ) {
        let mut last = self.last.lock();
        if family == NUM_DRAFTS || last.is_none() {
            *last = Some(self.recorder.snapshot());
        }
        let h = last.as_ref().expect("a snapshot was just stored");
        for ((_, value), attributes) in series(h, family).zip(attributes) {
            observer.observe(value, attributes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::names::{BY_DRAFT_LENGTH, BY_PROPOSAL_LENGTH};

    #[test]
    fn proposal_families_take_their_own_names_after_the_gauge() {
        let names = InstrumentNames::derive(&Naming::new_for_test("p")).unwrap();
        assert_eq!(
            names.family(BY_DRAFT_LENGTH),
            "p_acceptance_by_draft_length"
        );
        assert_eq!(names.0[METRIC_FAMILIES.len()], "p_controller_draft_length");
        assert_eq!(
            names.family(BY_PROPOSAL_LENGTH),
            "p_acceptance_by_proposal_length"
        );
        assert_eq!(
            names.family(BY_PROPOSAL_LENGTH + 1),
            "p_num_aborted_proposals"
        );
    }

    /// What one callback hands the SDK.
    #[derive(Default)]
    struct Seen(Mutex<Vec<(u64, Vec<KeyValue>)>>);

    impl AsyncInstrument<u64> for Seen {
        fn observe(&self, measurement: u64, attributes: &[KeyValue]) {
            self.0.lock().push((measurement, attributes.to_vec()));
        }
    }

    /// The sum of what family `family`'s callback observes now.
    fn observed_sum(shared: &Shared, family: usize) -> u64 {
        let attributes: Vec<Vec<KeyValue>> = series(&shared.recorder.snapshot(), family)
            .map(|(own, _)| attributes_of(&[], own))
            .collect();
        let seen = Seen::default();
        shared.observe(family, &attributes, &seen);
        let points = seen.0.into_inner();
        assert_eq!(points.len(), attributes.len());
        points.iter().map(|(v, _)| v).sum()
    }

    #[test]
    fn the_other_families_read_the_first_familys_snapshot() {
        let recorder = Recorder::new(2).unwrap();
        let shared = Shared {
            recorder: recorder.clone(),
            last: Mutex::new(None),
        };
        // Before any first-family callback, a callback takes its own.
        recorder.observe(2, 1).unwrap();
        assert_eq!(observed_sum(&shared, BY_DRAFT_LENGTH), 1);
        // A collection: the first family snapshots, a step lands between
        // two callbacks, the buckets still add up to the drafts observed.
        recorder.observe(1, 1).unwrap();
        assert_eq!(observed_sum(&shared, NUM_DRAFTS), 2);
        recorder.observe(2, 2).unwrap();
        assert_eq!(observed_sum(&shared, BY_DRAFT_LENGTH), 2);
        // The next collection sees the step.
        assert_eq!(observed_sum(&shared, NUM_DRAFTS), 3);
        assert_eq!(observed_sum(&shared, BY_DRAFT_LENGTH), 3);
    }

    #[test]
    fn attributes_are_the_constant_labels_then_the_familys_own() {
        let consts = [KeyValue::new("model_name", "m")];
        let attributes = attributes_of(&consts, Own::Bucket(3, 1));
        let pairs: Vec<(String, String)> = attributes
            .iter()
            .map(|kv| (kv.key.to_string(), kv.value.to_string()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("model_name".to_owned(), "m".to_owned()),
                ("draft_length".to_owned(), "3".to_owned()),
                ("accepted".to_owned(), "1".to_owned())
            ]
        );
    }
}
