//! The names every exporter gives the families: the metric name prefixes,
//! the families and their help texts, the labels they set, and the checks
//! on a prefix and on constant labels. Plain strings, available without any
//! cargo feature (a program that reads another engine's exposition can
//! match them).

// The help texts, family indices and checks serve the exporters, which are
// behind cargo features.
#![cfg_attr(
    not(any(
        feature = "prometheus",
        feature = "metrics",
        feature = "tikv-prometheus",
        feature = "opentelemetry"
    )),
    allow(dead_code)
)]

use super::error::NameError;

/// The default name prefix: samples are named `spec_decode_num_drafts_total`
/// and so on.
pub const DEFAULT_METRIC_PREFIX: &str = "spec_decode";

/// The prefix that gives the exact names vLLM exposes and its dashboards
/// query (`vllm:spec_decode_num_drafts_total`, ...).
pub const VLLM_METRIC_PREFIX: &str = "vllm:spec_decode";

/// The sample names of the nine counter families, without the
/// prefix: the exposed names are `<prefix>_<family>`, in this order.
///
/// ```
/// use specdec_metrics::METRIC_FAMILIES;
/// assert_eq!(METRIC_FAMILIES[0], "num_drafts_total");
/// assert_eq!(METRIC_FAMILIES[8], "scheduled_steps_total");
/// assert!(METRIC_FAMILIES.iter().all(|f| f.ends_with("_total")));
/// ```
pub const METRIC_FAMILIES: [&str; 9] = [
    "num_drafts_total",
    "num_draft_tokens_total",
    "num_accepted_tokens_total",
    "num_accepted_tokens_per_pos_total",
    "num_draft_tokens_per_pos_total",
    "acceptance_by_draft_length_total",
    "num_undrafted_steps_total",
    "num_rejected_observations_total",
    "scheduled_steps_total",
];

/// The sample name, without the prefix, of the gauge of the controller's
/// draft length (exported by `SpecDecodeCollector::with_plan`, cargo
/// feature `prometheus`).
///
/// ```
/// use specdec_metrics::PLAN_GAUGE;
/// assert_eq!(PLAN_GAUGE, "controller_draft_length");
/// ```
pub const PLAN_GAUGE: &str = "controller_draft_length";

/// The labels the families set themselves; constant labels may not reuse
/// them. `position` counts draft positions from 0 (`position="0"` is the
/// first draft token); `draft_length` is `k`, `accepted` is `a`, and
/// `num_spec_tokens` is a scheduled step's draft budget (vLLM's label name,
/// though vLLM's configuration calls `K` itself `num_spec_tokens`).
pub const FAMILY_LABELS: [&str; 4] = ["position", "draft_length", "accepted", "num_spec_tokens"];

/// `# HELP` text of the gauge.
pub(crate) const PLAN_GAUGE_HELP: &str = "The draft length the drafting controller chose for ordinary engine steps, read from its published plan at scrape time.";

/// `# HELP` text of each family, in [`METRIC_FAMILIES`] order.
pub(crate) const HELP: [&str; 9] = [
    "Speculative decoding verify steps (drafts), over all draft lengths including 0.",
    "Draft tokens sent to verification, after structured-output adjustment.",
    "Draft tokens accepted by the verifier (bonus token excluded).",
    "Verify steps whose draft token at this position was accepted.",
    "Verify steps whose draft reached this position.",
    "Verify steps by draft length and accepted draft tokens; every bucket with accepted <= draft_length is present.",
    "Decode steps where the drafting policy proposed no draft (not counted as drafts).",
    "Observations rejected as invalid (accepted > drafted, drafted > num_spec_tokens, or a scheduled budget > num_spec_tokens); nonzero means an engine bug.",
    "Scheduler steps by the draft budget the schedule gave them (num_spec_tokens = 0: chose not to speculate); every budget 0..=K is present.",
];

pub(crate) const NUM_DRAFTS: usize = 0;
pub(crate) const NUM_DRAFT_TOKENS: usize = 1;
pub(crate) const NUM_ACCEPTED_TOKENS: usize = 2;
pub(crate) const ACCEPTED_PER_POS: usize = 3;
pub(crate) const DRAFT_TOKENS_PER_POS: usize = 4;
pub(crate) const BY_DRAFT_LENGTH: usize = 5;
pub(crate) const UNDRAFTED_STEPS: usize = 6;
pub(crate) const REJECTED_OBSERVATIONS: usize = 7;
pub(crate) const SCHEDULED_STEPS: usize = 8;

/// `Ok` when `prefix` is a metric name (`[a-zA-Z_:][a-zA-Z0-9_:]*`).
pub(crate) fn check_prefix(prefix: &str) -> Result<(), NameError> {
    if is_metric_name(prefix) {
        Ok(())
    } else {
        Err(NameError::Prefix(prefix.to_owned()))
    }
}

/// Checks constant labels: each name a label name, none of
/// [`FAMILY_LABELS`] nor starting with `__`, none given twice.
pub(crate) fn check_const_labels<I, K, V>(labels: I) -> Result<Vec<(String, String)>, NameError>
where
    I: IntoIterator<Item = (K, V)>,
    K: Into<String>,
    V: Into<String>,
{
    let mut const_labels: Vec<(String, String)> = Vec::new();
    for (name, value) in labels {
        let name = name.into();
        if !is_label_name(&name) {
            return Err(NameError::LabelName(name));
        }
        if name.starts_with("__") || FAMILY_LABELS.contains(&name.as_str()) {
            return Err(NameError::ReservedLabelName(name));
        }
        if const_labels.iter().any(|(n, _)| *n == name) {
            return Err(NameError::DuplicateLabelName(name));
        }
        const_labels.push((name, value.into()));
    }
    Ok(const_labels)
}

/// `[a-zA-Z_:][a-zA-Z0-9_:]*`
pub(crate) fn is_metric_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// `[a-zA-Z_][a-zA-Z0-9_]*`
pub(crate) fn is_label_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(is_metric_name("vllm:spec_decode"));
        assert!(is_metric_name("_x9"));
        assert!(!is_metric_name(""));
        assert!(!is_metric_name("9x"));
        assert!(!is_metric_name("a-b"));
        assert!(is_label_name("model_name"));
        assert!(!is_label_name("a:b"));
        assert!(!is_label_name(""));
    }

    #[test]
    fn const_labels_are_checked_in_order() {
        assert_eq!(
            check_const_labels([("model_name", "m"), ("engine", "0")]),
            Ok(vec![
                ("model_name".into(), "m".into()),
                ("engine".into(), "0".into())
            ])
        );
        assert_eq!(
            check_const_labels([("a", "1"), ("a", "2")]),
            Err(NameError::DuplicateLabelName("a".into()))
        );
        for reserved in [
            "position",
            "draft_length",
            "accepted",
            "num_spec_tokens",
            "__x",
        ] {
            assert_eq!(
                check_const_labels([(reserved, "1")]),
                Err(NameError::ReservedLabelName(reserved.into()))
            );
        }
        assert_eq!(
            check_const_labels([("a-b", "1")]),
            Err(NameError::LabelName("a-b".into()))
        );
        assert_eq!(check_prefix("a:b_c"), Ok(()));
        assert_eq!(check_prefix("a-b"), Err(NameError::Prefix("a-b".into())));
    }
}
