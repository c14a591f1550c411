//! The report layer's errors: reading a report back ([`ReportError`])
//! and the names an exporter is given ([`NameError`], which holds the name
//! it refuses and so allocates).

use core::fmt;

use crate::record::ConfigError;

/// Why a report could not be read back into a histogram. Serde
/// format errors (wrong JSON types, negative or fractional counts, missing
/// keys) are reported by the format itself; this type covers reports that
/// parse but are not a consistent histogram.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum ReportError {
    /// `num_spec_tokens` is outside `1..=64`.
    MaxDraftLen(ConfigError),
    /// A key of `acceptance_histogram_by_draft_length` is above
    /// `num_spec_tokens`.
    DraftLengthAboveMax {
        /// The row's draft length `k`.
        drafted: usize,
        /// `num_spec_tokens`.
        max_draft_len: usize,
    },
    /// A row's length is not `k + 1`.
    RowLength {
        /// The row's draft length `k`.
        drafted: usize,
        /// The row's length in the report.
        found: usize,
    },
    /// The same draft length appears twice.
    DuplicateDraftLength {
        /// The repeated draft length.
        drafted: usize,
    },
    /// A list has the wrong length for `num_spec_tokens`.
    ListLength {
        /// The key of the list.
        field: &'static str,
        /// The length `num_spec_tokens` requires.
        expected: usize,
        /// The length in the report.
        found: usize,
    },
    /// A count disagrees with the one derived from the rows.
    CountMismatch {
        /// The key of the figure.
        field: &'static str,
        /// The position in a list, `None` for a single number.
        index: Option<usize>,
        /// The value in the report.
        reported: u64,
        /// The value derived from the rows.
        derived: u64,
    },
    /// A rate disagrees with the one derived from the rows.
    RateMismatch {
        /// The key of the figure.
        field: &'static str,
        /// The value in the report.
        reported: f64,
        /// The value derived from the rows.
        derived: f64,
    },
    /// The counts are so large that a derived total exceeds `u64::MAX`.
    Overflow,
    /// A key of `acceptance_by_proposal_length` outside `1..=num_spec_tokens`.
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// let mut report = serde_json::to_value(AcceptanceHistogram::with_proposals(2)?)?;
    /// report["acceptance_by_proposal_length"] = serde_json::json!({"3": [0, 0, 0, 1]});
    /// let err = serde_json::from_value::<AcceptanceHistogram>(report).unwrap_err();
    /// assert!(err.to_string().contains("proposal length 3, outside 1..=num_spec_tokens=2"), "{err}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ProposalLengthOutOfRange {
        /// The row's proposal length `L`.
        proposal_len: usize,
        /// `num_spec_tokens`.
        max_draft_len: usize,
    },
    /// A row of `acceptance_by_proposal_length` whose length is not `L + 1`.
    ProposalRowLength {
        /// The row's proposal length `L`.
        proposal_len: usize,
        /// The row's length in the report.
        found: usize,
    },
    /// The same proposal length appears twice.
    DuplicateProposalLength {
        /// The repeated proposal length.
        proposal_len: usize,
    },
    /// One of the two proposal keys (`acceptance_by_proposal_length`,
    /// `num_aborted_proposals`) without the other: a report has both (the
    /// engine recorded proposals) or neither.
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// let mut report = serde_json::to_value(AcceptanceHistogram::with_proposals(2)?)?;
    /// report.as_object_mut().unwrap().remove("num_aborted_proposals");
    /// let err = serde_json::from_value::<AcceptanceHistogram>(report).unwrap_err();
    /// assert!(err.to_string().contains("num_aborted_proposals is missing"), "{err}");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    IncompleteProposals {
        /// The key that is missing.
        missing: &'static str,
    },
}

impl fmt::Display for ReportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::MaxDraftLen(e) => write!(f, "num_spec_tokens: {e}"),
            Self::DraftLengthAboveMax {
                drafted,
                max_draft_len,
            } => write!(
                f,
                "acceptance_histogram_by_draft_length has a row for draft length {drafted}, above num_spec_tokens={max_draft_len}"
            ),
            Self::RowLength { drafted, found } => write!(
                f,
                "acceptance_histogram_by_draft_length[\"{drafted}\"] has {found} counts, expected {}",
                drafted + 1
            ),
            Self::DuplicateDraftLength { drafted } => write!(
                f,
                "acceptance_histogram_by_draft_length has draft length {drafted} more than once"
            ),
            Self::ListLength {
                field,
                expected,
                found,
            } => write!(f, "{field} has {found} entries, expected {expected}"),
            Self::CountMismatch {
                field,
                index: Some(i),
                reported,
                derived,
            } => write!(
                f,
                "{field}[{i}] is {reported} but the histogram rows give {derived}"
            ),
            Self::CountMismatch {
                field,
                index: None,
                reported,
                derived,
            } => write!(
                f,
                "{field} is {reported} but the histogram rows give {derived}"
            ),
            Self::RateMismatch {
                field,
                reported,
                derived,
            } => write!(
                f,
                "{field} is {reported} but the histogram rows give {derived}"
            ),
            Self::Overflow => f.write_str("counts too large: a derived total exceeds u64::MAX"),
            Self::ProposalLengthOutOfRange {
                proposal_len,
                max_draft_len,
            } => write!(
                f,
                "acceptance_by_proposal_length has a row for proposal length {proposal_len}, outside 1..=num_spec_tokens={max_draft_len}"
            ),
            Self::ProposalRowLength {
                proposal_len,
                found,
            } => write!(
                f,
                "acceptance_by_proposal_length[\"{proposal_len}\"] has {found} counts, expected {}",
                proposal_len + 1
            ),
            Self::DuplicateProposalLength { proposal_len } => write!(
                f,
                "acceptance_by_proposal_length has proposal length {proposal_len} more than once"
            ),
            Self::IncompleteProposals { missing } => write!(
                f,
                "{missing} is missing: a report has both acceptance_by_proposal_length and num_aborted_proposals, or neither"
            ),
        }
    }
}

impl std::error::Error for ReportError {}

/// An invalid metric name prefix or constant label given to an exporter
/// (such as `SpecDecodeCollector`, cargo feature `prometheus`).
///
/// ```
/// # #[cfg(feature = "prometheus")] {
/// use specdec_metrics::{NameError, Recorder, SpecDecodeCollector};
/// let collector = SpecDecodeCollector::new(Recorder::new(2)?);
/// let err = collector.with_const_labels([("position", "x")]).unwrap_err();
/// assert_eq!(err, NameError::ReservedLabelName("position".into()));
/// # }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NameError {
    /// The prefix is not a metric name (`[a-zA-Z_:][a-zA-Z0-9_:]*`).
    Prefix(String),
    /// The label name is not a label name (`[a-zA-Z_][a-zA-Z0-9_]*`).
    LabelName(String),
    /// The label name is one the families set themselves
    /// ([`FAMILY_LABELS`](crate::FAMILY_LABELS), [`PROPOSAL_FAMILY_LABELS`](crate::PROPOSAL_FAMILY_LABELS)) or starts with `__` (reserved by Prometheus).
    ReservedLabelName(String),
    /// The label name is given twice.
    DuplicateLabelName(String),
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Prefix(p) => write!(
                f,
                "invalid metric name prefix {p:?}: expected [a-zA-Z_:][a-zA-Z0-9_:]*"
            ),
            Self::LabelName(n) => write!(
                f,
                "invalid label name {n:?}: expected [a-zA-Z_][a-zA-Z0-9_]*"
            ),
            Self::ReservedLabelName(n) => write!(
                f,
                "label name {n:?} is reserved (set by the families themselves: position, draft_length, accepted, num_spec_tokens, proposal_length, matched; or starting with __)"
            ),
            Self::DuplicateLabelName(n) => write!(f, "label name {n:?} given twice"),
        }
    }
}

impl std::error::Error for NameError {}
