//! What leaves the process: the JSON report (`json.rs`, through serde) and
//! the Prometheus exposition (`prometheus.rs`, cargo feature `prometheus`),
//! with the metric names (`names.rs`) and the series of a histogram
//! (`series.rs`) the exporters share.

mod json;
mod names;
#[cfg(feature = "prometheus")]
mod prometheus;
#[cfg(any(feature = "prometheus", test))]
mod series;

pub use json::REPORT_KEYS;
pub use names::{
    DEFAULT_METRIC_PREFIX, FAMILY_LABELS, METRIC_FAMILIES, PLAN_GAUGE, VLLM_METRIC_PREFIX,
};
#[cfg(feature = "prometheus")]
pub use prometheus::{SpecDecodeCollector, TextFormat, encode_registry};
