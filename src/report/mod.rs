//! What leaves the process: the JSON report (`json.rs`, through serde) and
//! the Prometheus families, through `prometheus-client` (`prometheus.rs`,
//! cargo feature `prometheus`), the `metrics` facade (`facade.rs`, cargo
//! feature `metrics`), the `prometheus` crate (`prometheus_crate.rs`, cargo
//! feature `tikv-prometheus`) or OpenTelemetry (`otel.rs`, cargo feature
//! `opentelemetry`), with the metric names (`names.rs`) and the series of a
//! histogram (`series.rs`) every exporter shares.

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
#[cfg(any(
    feature = "prometheus",
    feature = "metrics",
    feature = "tikv-prometheus",
    feature = "opentelemetry",
    test
))]
mod series;

pub use error::{NameError, ReportError};
#[cfg(feature = "metrics")]
pub use facade::{MetricsPublisher, PublisherHandle};
pub use json::REPORT_KEYS;
pub use names::{
    DEFAULT_METRIC_PREFIX, FAMILY_LABELS, METRIC_FAMILIES, PLAN_GAUGE, VLLM_METRIC_PREFIX,
};
#[cfg(feature = "opentelemetry")]
pub use otel::OpenTelemetryExporter;
pub use plan_gauge::DraftLenGauge;
#[cfg(feature = "prometheus")]
pub use prometheus::{SpecDecodeCollector, TextFormat, encode_registry};
#[cfg(feature = "tikv-prometheus")]
pub use prometheus_crate::PrometheusCrateCollector;
