//! What leaves the process: the JSON report (`json.rs`, through serde) and
//! the Prometheus families, through `prometheus-client` (`prometheus.rs`,
//! cargo feature `prometheus`), the `metrics` facade (`facade.rs`, cargo
//! feature `metrics`), the `prometheus` crate (`prometheus_crate.rs`, cargo
//! feature `tikv-prometheus`) or OpenTelemetry (`otel.rs`, cargo feature
//! `opentelemetry`), with the metric names (`names.rs`), the options
//! (prefix, constant labels, plan: `options.rs`) and the series of a
//! histogram (`series.rs`) every exporter shares.

/// Compiles the items only with at least one exporter: the one list of the
/// exporters' cargo features (a new exporter's feature goes here, beside
/// its own `cfg` below and in `lib.rs`).
macro_rules! with_an_exporter {
    ($($item:item)*) => {$(
        #[cfg(any(
            feature = "prometheus",
            feature = "metrics",
            feature = "tikv-prometheus",
            feature = "opentelemetry"
        ))]
        $item
    )*};
}

mod error;
#[cfg(feature = "metrics")]
mod facade;
mod json;
mod names;
#[cfg(feature = "opentelemetry")]
mod otel;
mod plan_gauge;
#[cfg(feature = "prometheus")]
mod prometheus;
#[cfg(feature = "tikv-prometheus")]
mod prometheus_crate;
with_an_exporter! {
    mod options;
    mod series;
}

pub use error::{NameError, ReportError};
#[cfg(feature = "metrics")]
pub use facade::{MetricsPublisher, PublisherHandle};
pub use json::{PROPOSAL_REPORT_KEYS, REPORT_KEYS};
pub use names::{
    DEFAULT_METRIC_PREFIX, FAMILY_LABELS, METRIC_FAMILIES, PLAN_GAUGE, PROPOSAL_FAMILIES,
    PROPOSAL_FAMILY_LABELS, VLLM_METRIC_PREFIX,
};
#[cfg(feature = "opentelemetry")]
pub use otel::OpenTelemetryExporter;
pub use plan_gauge::DraftLenGauge;
#[cfg(feature = "prometheus")]
pub use prometheus::{SpecDecodeCollector, TextFormat, encode_registry};
#[cfg(feature = "tikv-prometheus")]
pub use prometheus_crate::PrometheusCrateCollector;
