//! [`MetricsPublisher`]: the Prometheus families handed to the `metrics`
//! facade (cargo feature `metrics`), for engines that export through
//! `metrics` and `metrics-exporter-prometheus` rather than
//! `prometheus-client`.
//!
//! The publisher derives the series with the collector's own walk
//! (`series.rs`), so both exporters expose the same series with the same
//! names, labels, help texts and values. It registers one handle per series
//! with the `metrics` recorder at its first publish and, from then on, a
//! publish is one snapshot plus one `Counter::absolute` per series: no
//! key, label or string is built again.

use core::fmt;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, OnceLock};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use metrics::{Counter, Gauge, Key, KeyName, Label, Level, Metadata, SharedString};

use super::DraftLenGauge;
use super::error::NameError;
use super::names::{FAMILIES, HELP, PLAN_GAUGE_HELP};
use super::options::Options;
use super::series::series;
use crate::{AcceptanceHistogram, Recorder};

/// What the handles are registered with: the `metrics` macros of this
/// module would give the same.
static METADATA: Metadata<'static> =
    Metadata::new(module_path!(), Level::INFO, Some(module_path!()));

/// Hands the counter families of a [`Recorder`], and optionally the gauge
/// of a [`SharedPlan`](crate::SharedPlan)'s draft length, to the recorder of the `metrics`
/// facade that the engine installed (`metrics-exporter-prometheus`'s, for
/// example): the families of [`SpecDecodeCollector`], under the same names,
/// with the same labels, help texts and values, in the registry the engine
/// already serves.
///
/// Each [`publish`](Self::publish) takes **one** [`Recorder::snapshot`] and
/// sets every counter to its absolute total ([`Counter::absolute`]): the
/// `<prefix>_num_drafts_total` family and the others of the reference's
/// "Prometheus families", every bucket of the triangle, every position and
/// every scheduled budget `0..=K`, zero or not, and, with a plan
/// ([`with_plan`](Self::with_plan)), the gauge
/// `<prefix>_controller_draft_length`. The engine either calls `publish`
/// from its own metrics loop, or lets a background thread do it
/// ([`spawn`](Self::spawn)).
///
/// [`SpecDecodeCollector`]: crate::SpecDecodeCollector
///
/// # Guarantees
///
/// - **The families of one publish agree**: they come from one snapshot.
///   A scrape that renders while a publish is under way may mix two
///   publishes (the exporter reads each series on its own), which the
///   `prometheus-client` collector, encoding one snapshot per scrape, never
///   does; both are monotonic, so only the identities between families can
///   be off, by what was recorded between the two snapshots.
/// - **Counters never go down**: a snapshot is never smaller than one that
///   happened-before it, and `metrics-exporter-prometheus` keeps the
///   largest value an absolute counter was set to.
/// - **Series never appear or vanish**: every series is registered and set
///   at the first publish, and set again at every publish (so even an
///   exporter configured with an idle timeout sees them as live while the
///   engine publishes).
/// - **Cheap after the first publish**: the handles (keys, labels, the
///   recorder's storage) are registered once, at the first publish. A later
///   publish allocates nothing per series: only the snapshot
///   ([`Recorder::snapshot`]) and the temporary lists of `K + 1` counts
///   behind the figures derived from it (the accepted-token total and the
///   two per-position lists), the same few allocations at any `K` and any
///   number of workers (`tests/metrics_publisher.rs` counts them).
///
/// # Which recorder, which labels
///
/// The handles are registered with the recorder that is current at the
/// **first** publish (`metrics::with_recorder`: a local recorder if one is
/// set on that thread, else the global one), and used from then on: install
/// the engine's recorder before the first publish. The sample labels are
/// the exporter's global labels (`PrometheusBuilder::add_global_label`)
/// first, then the constant labels of [`with_const_labels`](Self::with_const_labels),
/// then the family's own (`position`; `draft_length`, `accepted`;
/// `num_spec_tokens`). A constant label of the same name as a global label
/// replaces its value, in the global label's place.
///
/// The names keep their `_total`: `metrics-exporter-prometheus` writes the
/// classic text format, whose `# HELP` and `# TYPE` lines name the
/// `_total` sample, and adds a `_total` suffix (with recommended naming
/// on) only to names that lack it, so the samples are
/// `<prefix>_num_drafts_total` and so on, as the collector's.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use metrics_exporter_prometheus::PrometheusBuilder;
/// use specdec_metrics::{DraftPlan, MetricsPublisher, Recorder, SharedPlan};
///
/// // The engine's exporter; an engine would `install_recorder()` it globally.
/// let exporter = PrometheusBuilder::new().build_recorder();
/// let scrape = exporter.handle();
///
/// let recorder = Arc::new(Recorder::new(4)?);
/// let plan = Arc::new(SharedPlan::new(DraftPlan::new(3, 4).unwrap()));
/// let publisher = MetricsPublisher::new(Arc::clone(&recorder), "vllm:spec_decode")?
///     .with_const_labels([("model_name", "llama"), ("engine", "0")])?
///     .with_plan(plan);
///
/// let worker = recorder.worker(); // on an engine thread
/// worker.observe(4, 2)?;
/// worker.observe(2, 2)?;
///
/// // The metrics loop: the first publish registers, every publish sets.
/// metrics::with_local_recorder(&exporter, || publisher.publish());
/// let text = scrape.render();
/// assert!(text.contains("# TYPE vllm:spec_decode_num_drafts_total counter\n"));
/// assert!(text.contains("vllm:spec_decode_num_drafts_total{model_name=\"llama\",engine=\"0\"} 2\n"));
/// assert!(text.contains(
///     "vllm:spec_decode_acceptance_by_draft_length_total\
///      {model_name=\"llama\",engine=\"0\",draft_length=\"4\",accepted=\"2\"} 1\n"
/// ));
/// assert!(text.contains("vllm:spec_decode_controller_draft_length{model_name=\"llama\",engine=\"0\"} 3\n"));
///
/// worker.observe(1, 0)?;
/// publisher.publish(); // the handles are bound: no recorder lookup any more
/// assert!(scrape.render().contains("vllm:spec_decode_num_drafts_total{model_name=\"llama\",engine=\"0\"} 3\n"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct MetricsPublisher {
    recorder: Arc<Recorder>,
    options: Options,
    /// Set by the first publish.
    handles: OnceLock<Handles>,
}

/// The registered handles.
struct Handles {
    /// One per series: the families in `FAMILIES` order, each
    /// family's series in the order [`series`] lists them.
    counters: Vec<Counter>,
    /// The plan's gauge, when there is a plan.
    gauge: Option<Gauge>,
}

impl MetricsPublisher {
    /// The shortest interval [`spawn`](Self::spawn) publishes at: a shorter
    /// one, [`Duration::ZERO`] included, is raised to it. A publish is a
    /// snapshot and one call per series; back to back, with no pause, the
    /// thread would take a whole core for nothing (no scraper reads a
    /// value a millisecond old, let alone newer).
    ///
    /// ```
    /// use std::time::Duration;
    /// use specdec_metrics::MetricsPublisher;
    /// assert_eq!(MetricsPublisher::MIN_INTERVAL, Duration::from_millis(1));
    /// ```
    pub const MIN_INTERVAL: Duration = Duration::from_millis(1);

    /// A publisher of `recorder`'s families named `<prefix>_<family>`
    /// ([`DEFAULT_METRIC_PREFIX`](crate::DEFAULT_METRIC_PREFIX) gives
    /// `spec_decode_num_drafts_total`, [`VLLM_METRIC_PREFIX`](crate::VLLM_METRIC_PREFIX)
    /// vLLM's names), without constant labels or plan. Registers nothing
    /// yet: the first [`publish`](Self::publish) does.
    ///
    /// # Errors
    ///
    /// [`NameError::Prefix`] unless the prefix matches
    /// `[a-zA-Z_:][a-zA-Z0-9_:]*`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use specdec_metrics::{MetricsPublisher, NameError, Recorder};
    /// let recorder = Arc::new(Recorder::new(2)?);
    /// let publisher = MetricsPublisher::new(Arc::clone(&recorder), "spec_decode")?;
    /// assert_eq!(publisher.prefix(), "spec_decode");
    /// assert_eq!(
    ///     MetricsPublisher::new(recorder, "spec-decode").unwrap_err(),
    ///     NameError::Prefix("spec-decode".into())
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(recorder: Arc<Recorder>, prefix: &str) -> Result<Self, NameError> {
        Ok(Self {
            recorder,
            options: Options::default().with_prefix(prefix)?,
            handles: OnceLock::new(),
        })
    }

    /// Sets the constant labels put on every series, before the family's
    /// own (replacing any set before), as
    /// [`SpecDecodeCollector::with_const_labels`](crate::SpecDecodeCollector::with_const_labels)
    /// does: for example `model_name` and `engine`, as vLLM labels its
    /// series. Labels the engine sets on every metric should rather be the
    /// exporter's global labels; both come through.
    ///
    /// # Errors
    ///
    /// [`NameError`] when a name is not a label name, is one of
    /// [`FAMILY_LABELS`](crate::FAMILY_LABELS) or starts with `__`, or is
    /// given twice.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use specdec_metrics::{MetricsPublisher, NameError, Recorder};
    /// let publisher = MetricsPublisher::new(Arc::new(Recorder::new(2)?), "spec_decode")?
    ///     .with_const_labels([("model_name", "llama"), ("engine", "0")])?;
    /// assert_eq!(publisher.const_labels()[1], ("engine".to_owned(), "0".to_owned()));
    /// let err = publisher.with_const_labels([("accepted", "1")]).unwrap_err();
    /// assert_eq!(err, NameError::ReservedLabelName("accepted".into()));
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
            // New labels, new series: the next publish registers again.
            handles: OnceLock::new(),
            ..self
        })
    }

    /// Also publishes the gauge `<prefix>_controller_draft_length`: the
    /// draft length of the plan in `plan` (see
    /// [`DraftPlan::draft_len`](crate::DraftPlan::draft_len)), read with one
    /// relaxed atomic load at each publish. It carries the constant labels
    /// and no label of its own. Replaces any plan set before.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use specdec_metrics::{DraftPlan, MetricsPublisher, Recorder, SharedPlan};
    /// let plan = Arc::new(SharedPlan::new(DraftPlan::new(2, 8).unwrap()));
    /// let publisher = MetricsPublisher::new(Arc::new(Recorder::new(8)?), "spec_decode")?
    ///     .with_plan(Arc::clone(&plan));
    /// assert!(publisher.plan().is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_plan(self, plan: Arc<impl DraftLenGauge + 'static>) -> Self {
        Self {
            options: self.options.with_plan(plan),
            handles: OnceLock::new(),
            ..self
        }
    }

    /// The name prefix.
    pub fn prefix(&self) -> &str {
        self.options.prefix()
    }

    /// The constant labels, in the order they are put on the series.
    pub fn const_labels(&self) -> &[(String, String)] {
        self.options.const_labels()
    }

    /// The plan whose draft length is published as a gauge, if one was set
    /// with [`with_plan`](Self::with_plan).
    pub fn plan(&self) -> Option<&Arc<dyn DraftLenGauge>> {
        self.options.plan()
    }

    /// The recorder whose families are published.
    pub fn recorder(&self) -> &Arc<Recorder> {
        &self.recorder
    }

    /// Takes one snapshot of the recorder and sets every series to it (and
    /// the gauge to the plan's draft length). The first call registers the
    /// series, with their help texts, with the current `metrics` recorder
    /// (see [Which recorder, which labels](Self#which-recorder-which-labels)).
    pub fn publish(&self) {
        let snapshot = self.recorder.snapshot();
        let handles = self.handles.get_or_init(|| self.register(&snapshot));
        // The same series as registered: whether the recorder records
        // proposals is fixed when it is built.
        let values = (0..FAMILIES.len()).flat_map(|family| series(&snapshot, family));
        for ((_, value), counter) in values.zip(&handles.counters) {
            counter.absolute(value);
        }
        if let (Some(plan), Some(gauge)) = (self.plan(), &handles.gauge) {
            // At most 64: exact in `f64`.
            gauge.set(plan.draft_len() as f64);
        }
    }

    /// Publishes now and then every `interval` on a background thread, until
    /// the returned handle is dropped; then publishes once more (so what was
    /// recorded up to the stop is handed over) and ends. The thread is named
    /// `specdec-metrics-publisher`.
    ///
    /// The thread registers with the global `metrics` recorder, unless this
    /// publisher has published before (it then keeps the handles it has).
    ///
    /// An `interval` shorter than [`MIN_INTERVAL`](Self::MIN_INTERVAL) (1
    /// ms), [`Duration::ZERO`] included, is refused as a period and raised
    /// to it: the thread never publishes back to back.
    ///
    /// # Panics
    ///
    /// If the operating system cannot create the thread.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use specdec_metrics::{MetricsPublisher, Recorder};
    ///
    /// let recorder = Arc::new(Recorder::new(8)?);
    /// let publishing = MetricsPublisher::new(Arc::clone(&recorder), "spec_decode")?
    ///     .spawn(Duration::from_secs(1));
    /// // ... the engine runs and records into `recorder` ...
    /// drop(publishing); // stops the thread without waiting for the interval, and joins it
    /// assert_eq!(Arc::strong_count(&recorder), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn spawn(self, interval: Duration) -> PublisherHandle {
        let interval = interval.max(Self::MIN_INTERVAL);
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = thread::Builder::new()
            .name("specdec-metrics-publisher".to_owned())
            .spawn(move || {
                loop {
                    self.publish();
                    match stopped.recv_timeout(interval) {
                        Err(RecvTimeoutError::Timeout) => {}
                        // The handle sends nothing: it stops by dropping the
                        // sender, which ends the wait at once.
                        Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
                    }
                }
                self.publish();
            })
            .expect("could not spawn the metrics publisher thread");
        PublisherHandle {
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Registers every series, and the gauge if there is a plan, with the
    /// current recorder, with their help texts.
    #[cold]
    fn register(&self, shape: &AcceptanceHistogram) -> Handles {
        let naming = self.options.naming();
        metrics::with_recorder(|recorder| {
            let const_labels: Vec<Label> = naming
                .const_labels()
                .iter()
                .map(|(name, value)| Label::new(name.clone(), value.clone()))
                .collect();
            let mut counters = Vec::new();
            for (family, help) in HELP.iter().enumerate() {
                if series(shape, family).next().is_none() {
                    // A proposal family of a recorder without proposals.
                    continue;
                }
                let name = naming.family_names[family].clone();
                recorder.describe_counter(
                    KeyName::from(name.clone()),
                    None,
                    SharedString::const_str(help),
                );
                for (own, _) in series(shape, family) {
                    let mut labels = const_labels.clone();
                    labels.extend(
                        own.labels()
                            .map(|(name, value)| Label::new(name, value.to_string())),
                    );
                    let key = Key::from_parts(name.clone(), labels);
                    counters.push(recorder.register_counter(&key, &METADATA));
                }
            }
            let gauge = self.plan().map(|_| {
                let name = naming.gauge_name.clone();
                recorder.describe_gauge(
                    KeyName::from(name.clone()),
                    None,
                    SharedString::const_str(PLAN_GAUGE_HELP),
                );
                recorder.register_gauge(&Key::from_parts(name, const_labels), &METADATA)
            });
            Handles { counters, gauge }
        })
    }
}

impl fmt::Debug for MetricsPublisher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetricsPublisher")
            .field("recorder", &self.recorder)
            .field("prefix", &self.prefix())
            .field("const_labels", &self.const_labels())
            .field("plan", &self.plan())
            .field(
                "registered_series",
                &self.handles.get().map(|h| h.counters.len()),
            )
            .finish()
    }
}

/// The background thread of [`MetricsPublisher::spawn`]. Dropping it stops
/// the thread at once (it does not wait for the rest of the interval), lets
/// it publish a last time, and joins it; a panic of the thread (a panicking
/// `metrics` recorder) is not propagated into the drop, the panic hook has
/// already reported it.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use metrics_exporter_prometheus::PrometheusBuilder;
/// use specdec_metrics::{MetricsPublisher, Recorder};
///
/// let exporter = PrometheusBuilder::new().build_recorder();
/// let scrape = exporter.handle();
/// let recorder = Arc::new(Recorder::new(2)?);
/// let publisher = MetricsPublisher::new(Arc::clone(&recorder), "spec_decode")?;
/// // Bind the handles to this (non-global) recorder, then hand over.
/// metrics::with_local_recorder(&exporter, || publisher.publish());
/// let publishing = publisher.spawn(Duration::from_secs(10));
/// recorder.observe(2, 2)?;
/// drop(publishing); // the last publish hands the step over
/// assert!(scrape.render().contains("spec_decode_num_drafts_total 1\n"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct PublisherHandle {
    /// Dropped to stop the thread.
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for PublisherHandle {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
