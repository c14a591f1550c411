//! What leaves the process: the JSON report (`json.rs`, through serde) and
//! the Prometheus exposition, through `prometheus-client` (`prometheus.rs`,
//! cargo feature `prometheus`) or the `metrics` facade (`facade.rs`, cargo
//! feature `metrics`), with the metric names (`names.rs`) and the series of
//! a histogram (`series.rs`) both exporters share.

mod error;
#[cfg(feature = "metrics")]
mod facade;
mod json;
mod names;
#[cfg(feature = "prometheus")]
mod prometheus;
#[cfg(any(feature = "prometheus", feature = "metrics", test))]
mod series;

pub use error::{NameError, ReportError};
#[cfg(feature = "metrics")]
pub use facade::{MetricsPublisher, PublisherHandle};
pub use json::REPORT_KEYS;
pub use names::{
    DEFAULT_METRIC_PREFIX, FAMILY_LABELS, METRIC_FAMILIES, PLAN_GAUGE, VLLM_METRIC_PREFIX,
};
#[cfg(feature = "prometheus")]
pub use prometheus::{SpecDecodeCollector, TextFormat, encode_registry};
