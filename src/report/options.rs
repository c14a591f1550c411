//! What every exporter is configured with, written once: the name prefix,
//! the constant labels and the plan whose draft length is exported as a
//! gauge ([`Options`]), the names derived from them ([`Naming`]), and the
//! checks on a prefix and on constant labels. Each exporter's public
//! `with_prefix`, `with_const_labels`, `with_plan`, `prefix`,
//! `const_labels` and `plan` hand over to these, so they validate and name
//! alike.

use core::fmt;
use std::sync::Arc;

use super::DraftLenGauge;
use super::error::NameError;
use super::names::{DEFAULT_METRIC_PREFIX, FAMILIES, FAMILY_LABELS, PLAN_GAUGE, PROPOSAL_FAMILY_LABELS};

/// The names every exporter derives from the prefix, with the constant
/// labels they go with.
#[derive(Debug)]
pub(crate) struct Naming {
    prefix: String,
    const_labels: Vec<(String, String)>,
    /// `<prefix>_<family>`: the sample names, with `_total`, in
    /// [`FAMILIES`] order (the nine of `METRIC_FAMILIES`, then the two
    /// proposal families).
    pub(crate) family_names: [String; 11],
    /// `<prefix>_controller_draft_length`.
    pub(crate) gauge_name: String,
}

impl Naming {
    fn new(prefix: String, const_labels: Vec<(String, String)>) -> Self {
        Self {
            family_names: FAMILIES.map(|family| format!("{prefix}_{family}")),
            gauge_name: format!("{prefix}_{PLAN_GAUGE}"),
            prefix,
            const_labels,
        }
    }

    /// The names of `prefix`, without constant labels (unchecked).
    #[cfg(test)]
    pub(crate) fn new_for_test(prefix: &str) -> Self {
        Self::new(prefix.to_owned(), Vec::new())
    }

    /// The prefix, as given.
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The constant labels, in the order they are put on every series.
    pub(crate) fn const_labels(&self) -> &[(String, String)] {
        &self.const_labels
    }
}

/// What an exporter derives from its [`Naming`] beyond it, once per change
/// of prefix or labels (the `prometheus` crate's descriptors, the
/// OpenTelemetry instrument names), and may refuse.
pub(crate) trait Derived: Sized {
    /// What `naming` gives, or why its prefix cannot name this exporter's
    /// metrics.
    fn derive(naming: &Naming) -> Result<Self, NameError>;
}

/// Nothing beyond the [`Naming`].
impl Derived for () {
    fn derive(_: &Naming) -> Result<Self, NameError> {
        Ok(())
    }
}

/// The prefix, the constant labels and the plan of one exporter, with
/// what they name. Cheap to clone: the names are shared.
pub(crate) struct Options<D = ()> {
    names: Arc<(Naming, D)>,
    /// The plan whose draft length is exported as a gauge, if any.
    plan: Option<Arc<dyn DraftLenGauge>>,
}

impl<D> Clone for Options<D> {
    fn clone(&self) -> Self {
        Self {
            names: Arc::clone(&self.names),
            plan: self.plan.clone(),
        }
    }
}

/// The figures the exporters' own `Debug` showed: the prefix, the
/// constant labels and the plan.
impl<D> fmt::Debug for Options<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("prefix", &self.prefix())
            .field("const_labels", &self.const_labels())
            .field("plan", &self.plan)
            .finish()
    }
}

impl<D: Derived> Default for Options<D> {
    /// The prefix [`DEFAULT_METRIC_PREFIX`], no constant labels, no plan.
    fn default() -> Self {
        Self {
            names: Self::named(DEFAULT_METRIC_PREFIX.to_owned(), Vec::new())
                .expect("the default prefix names every exporter's metrics"),
            plan: None,
        }
    }
}

impl<D: Derived> Options<D> {
    /// The names of `prefix` with `const_labels`, and what `D` derives
    /// from them.
    fn named(
        prefix: String,
        const_labels: Vec<(String, String)>,
    ) -> Result<Arc<(Naming, D)>, NameError> {
        check_prefix(&prefix)?;
        let naming = Naming::new(prefix, const_labels);
        let derived = D::derive(&naming)?;
        Ok(Arc::new((naming, derived)))
    }

    /// The same with the prefix `prefix`.
    ///
    /// # Errors
    ///
    /// [`NameError::Prefix`] unless `prefix` is a metric name
    /// (`[a-zA-Z_:][a-zA-Z0-9_:]*`) that `D` accepts.
    pub(crate) fn with_prefix(self, prefix: impl Into<String>) -> Result<Self, NameError> {
        let const_labels = self.names.0.const_labels.clone();
        Ok(Self {
            names: Self::named(prefix.into(), const_labels)?,
            ..self
        })
    }

    /// The same with the constant labels `labels`, replacing any set
    /// before.
    ///
    /// # Errors
    ///
    /// Those of [`check_const_labels`].
    pub(crate) fn with_const_labels<I, K, V>(self, labels: I) -> Result<Self, NameError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        let const_labels = check_const_labels(labels)?;
        Ok(Self {
            names: Self::named(self.names.0.prefix.clone(), const_labels)?,
            ..self
        })
    }
}

impl<D> Options<D> {
    /// The same with the plan `plan`, replacing any set before.
    pub(crate) fn with_plan(self, plan: Arc<impl DraftLenGauge + 'static>) -> Self {
        Self {
            plan: Some(plan),
            ..self
        }
    }

    /// The name prefix, as given.
    pub(crate) fn prefix(&self) -> &str {
        self.names.0.prefix()
    }

    /// The constant labels, in the order they are put on every series.
    pub(crate) fn const_labels(&self) -> &[(String, String)] {
        self.names.0.const_labels()
    }

    /// The plan whose draft length is exported as a gauge, if any.
    pub(crate) fn plan(&self) -> Option<&Arc<dyn DraftLenGauge>> {
        self.plan.as_ref()
    }

    /// The names derived from the prefix, with the constant labels.
    pub(crate) fn naming(&self) -> &Naming {
        &self.names.0
    }

    /// What the exporter derived from the names.
    #[cfg_attr(
        not(any(feature = "tikv-prometheus", feature = "opentelemetry")),
        allow(dead_code, reason = "only these two exporters derive anything")
    )]
    pub(crate) fn derived(&self) -> &D {
        &self.names.1
    }
}

/// `Ok` when `prefix` is a metric name (`[a-zA-Z_:][a-zA-Z0-9_:]*`).
pub(crate) fn check_prefix(prefix: &str) -> Result<(), NameError> {
    if is_metric_name(prefix) {
        Ok(())
    } else {
        Err(NameError::Prefix(prefix.to_owned()))
    }
}

/// Checks constant labels: each name a label name, none of
/// [`FAMILY_LABELS`] or [`PROPOSAL_FAMILY_LABELS`] nor starting with `__`,
/// none given twice.
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
        if name.starts_with("__")
            || FAMILY_LABELS.contains(&name.as_str())
            || PROPOSAL_FAMILY_LABELS.contains(&name.as_str())
        {
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
            "proposal_length",
            "matched",
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
