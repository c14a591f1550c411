//! Error types. Each is a small `Copy` value: making one never allocates, so
//! the recording paths can return them from inside a hot loop.

use core::fmt;

use crate::layout::{MAX_MAX_DRAFT_LEN, MIN_MAX_DRAFT_LEN};

/// A configuration that cannot be used: a maximum draft length `K` outside
/// `1..=64`, or (for a [`DraftController`](crate::DraftController)) a step
/// cost table without exactly one cost per draft length `0..=K`.
///
/// ```
/// use specdec_metrics::AcceptanceHistogram;
/// let err = AcceptanceHistogram::new(0).unwrap_err();
/// assert_eq!(err.max_draft_len(), 0);
/// assert!(err.to_string().contains("1..=64"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConfigError {
    max_draft_len: usize,
    /// `Some(len)`: `K` is valid but a cost table has `len` entries, not
    /// `K + 1`.
    cost_table_len: Option<usize>,
}

impl ConfigError {
    pub(crate) const fn new(max_draft_len: usize) -> Self {
        Self {
            max_draft_len,
            cost_table_len: None,
        }
    }

    pub(crate) const fn cost_table(max_draft_len: usize, len: usize) -> Self {
        Self {
            max_draft_len,
            cost_table_len: Some(len),
        }
    }

    /// The maximum draft length `K` of the rejected configuration.
    pub const fn max_draft_len(&self) -> usize {
        self.max_draft_len
    }

    /// When `K` itself is valid but a step cost table does not have `K + 1`
    /// entries: the table's length.
    ///
    /// ```
    /// use specdec_metrics::{DraftController, StepCost};
    /// let cost = StepCost::table(vec![1.0, 1.1, 1.2])?; // k = 0..=2
    /// let err = DraftController::new(4, cost).unwrap_err();
    /// assert_eq!((err.max_draft_len(), err.cost_table_len()), (4, Some(3)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub const fn cost_table_len(&self) -> Option<usize> {
        self.cost_table_len
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.cost_table_len {
            None => write!(
                f,
                "max_draft_len (num_spec_tokens) must be in {MIN_MAX_DRAFT_LEN}..={MAX_MAX_DRAFT_LEN}, got {}",
                self.max_draft_len
            ),
            Some(len) => write!(
                f,
                "the step cost table has {len} entries but max_draft_len {} needs {} (one per draft length 0..={})",
                self.max_draft_len,
                self.max_draft_len + 1,
                self.max_draft_len
            ),
        }
    }
}

impl std::error::Error for ConfigError {}

/// An observation that no counter can hold: a verify step outside the
/// triangle or a scheduled budget above `K`. It was counted in
/// `num_rejected_observations`, not in the histogram.
///
/// ```
/// use specdec_metrics::{AcceptanceHistogram, ObserveError};
/// let mut h = AcceptanceHistogram::new(3).unwrap();
/// let err = h.observe(2, 3).unwrap_err();
/// assert_eq!(err, ObserveError::AcceptedExceedsDrafted { drafted: 2, accepted: 3 });
/// assert_eq!(h.num_rejected_observations(), 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObserveError {
    /// The verifier accepted more tokens than were drafted (`a > k`); this
    /// happens when a grammar invalidates drafts after they were sampled.
    AcceptedExceedsDrafted {
        /// The draft length `k` given.
        drafted: usize,
        /// The accepted count `a` given.
        accepted: usize,
    },
    /// The draft length is above the configured maximum (`k > K`).
    DraftedExceedsMax {
        /// The draft length `k` given.
        drafted: usize,
        /// The accepted count `a` given.
        accepted: usize,
        /// The configured maximum `K`.
        max_draft_len: usize,
    },
    /// A scheduled draft budget above the configured maximum (`budget >
    /// K`), from [`observe_scheduled`](crate::Worker::observe_scheduled).
    ///
    /// ```
    /// use specdec_metrics::{ObserveError, Recorder};
    /// let recorder = Recorder::new(4)?;
    /// let err = recorder.worker().observe_scheduled(5).unwrap_err();
    /// assert_eq!(err, ObserveError::BudgetExceedsMax { budget: 5, max_draft_len: 4 });
    /// assert_eq!(
    ///     err.to_string(),
    ///     "rejected observation (scheduled budget=5): budget exceeds max_draft_len=4"
    /// );
    /// assert_eq!(recorder.snapshot().num_rejected_observations(), 1);
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    BudgetExceedsMax {
        /// The scheduled budget given.
        budget: usize,
        /// The configured maximum `K`.
        max_draft_len: usize,
    },
}

impl ObserveError {
    /// Classifies an invalid `(drafted, accepted)` pair. Called only on the
    /// cold path, after the bounds check failed.
    #[cold]
    #[inline(never)]
    pub(crate) fn new(max_draft_len: usize, drafted: usize, accepted: usize) -> Self {
        if drafted > max_draft_len {
            Self::DraftedExceedsMax {
                drafted,
                accepted,
                max_draft_len,
            }
        } else {
            Self::AcceptedExceedsDrafted { drafted, accepted }
        }
    }

    /// Checks one observation against a maximum draft length `K` without
    /// recording it: the error every `observe` would return for it, or
    /// `Ok`. For callers that validate before handing steps to another
    /// thread (and want the same error text the recorder gives).
    ///
    /// ```
    /// use specdec_metrics::ObserveError;
    /// assert_eq!(ObserveError::check(3, 3, 2), Ok(()));
    /// assert_eq!(
    ///     ObserveError::check(3, 4, 0),
    ///     Err(ObserveError::DraftedExceedsMax { drafted: 4, accepted: 0, max_draft_len: 3 })
    /// );
    /// ```
    #[inline]
    pub fn check(max_draft_len: usize, drafted: usize, accepted: usize) -> Result<(), Self> {
        if crate::layout::in_triangle(max_draft_len, drafted, accepted) {
            Ok(())
        } else {
            Err(Self::new(max_draft_len, drafted, accepted))
        }
    }

    /// A scheduled budget that no counter can hold: `budget > max_draft_len`.
    /// Called only on the cold path, after the bounds check failed.
    #[cold]
    #[inline(never)]
    pub(crate) fn budget(max_draft_len: usize, budget: usize) -> Self {
        Self::BudgetExceedsMax {
            budget,
            max_draft_len,
        }
    }

    /// Checks one scheduled budget against a maximum draft length `K`
    /// without recording it: the error every `observe_scheduled` would
    /// return for it, or `Ok`.
    ///
    /// ```
    /// use specdec_metrics::ObserveError;
    /// assert_eq!(ObserveError::check_scheduled(3, 0), Ok(()));
    /// assert_eq!(ObserveError::check_scheduled(3, 3), Ok(()));
    /// assert_eq!(
    ///     ObserveError::check_scheduled(3, 4),
    ///     Err(ObserveError::BudgetExceedsMax { budget: 4, max_draft_len: 3 })
    /// );
    /// ```
    #[inline]
    pub fn check_scheduled(max_draft_len: usize, budget: usize) -> Result<(), Self> {
        if budget <= max_draft_len {
            Ok(())
        } else {
            Err(Self::budget(max_draft_len, budget))
        }
    }

    /// The draft length `k` of the rejected observation; for a rejected
    /// scheduled budget, the budget (the draft length the scheduler chose).
    ///
    /// ```
    /// use specdec_metrics::ObserveError;
    /// assert_eq!(ObserveError::check(2, 1, 3).unwrap_err().drafted(), 1);
    /// assert_eq!(ObserveError::check_scheduled(2, 7).unwrap_err().drafted(), 7);
    /// ```
    pub const fn drafted(&self) -> usize {
        match *self {
            Self::AcceptedExceedsDrafted { drafted, .. }
            | Self::DraftedExceedsMax { drafted, .. } => drafted,
            Self::BudgetExceedsMax { budget, .. } => budget,
        }
    }

    /// The accepted count `a` of the rejected observation; 0 for a rejected
    /// scheduled budget (a scheduler step verifies nothing by itself).
    ///
    /// ```
    /// use specdec_metrics::ObserveError;
    /// assert_eq!(ObserveError::check(2, 1, 3).unwrap_err().accepted(), 3);
    /// assert_eq!(ObserveError::check_scheduled(2, 7).unwrap_err().accepted(), 0);
    /// ```
    pub const fn accepted(&self) -> usize {
        match *self {
            Self::AcceptedExceedsDrafted { accepted, .. }
            | Self::DraftedExceedsMax { accepted, .. } => accepted,
            Self::BudgetExceedsMax { .. } => 0,
        }
    }
}

impl fmt::Display for ObserveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::AcceptedExceedsDrafted { drafted, accepted } => write!(
                f,
                "rejected observation (drafted={drafted}, accepted={accepted}): accepted exceeds drafted"
            ),
            Self::DraftedExceedsMax {
                drafted,
                accepted,
                max_draft_len,
            } => write!(
                f,
                "rejected observation (drafted={drafted}, accepted={accepted}): drafted exceeds max_draft_len={max_draft_len}"
            ),
            Self::BudgetExceedsMax {
                budget,
                max_draft_len,
            } => write!(
                f,
                "rejected observation (scheduled budget={budget}): budget exceeds max_draft_len={max_draft_len}"
            ),
        }
    }
}

impl std::error::Error for ObserveError {}

/// One counter of a histogram, named in [`MergeError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    /// The bucket of steps that drafted `drafted` and accepted `accepted`.
    Bucket {
        /// Draft length `k`.
        drafted: usize,
        /// Accepted count `a`.
        accepted: usize,
    },
    /// `num_undrafted_steps`.
    UndraftedSteps,
    /// `num_rejected_observations`.
    RejectedObservations,
    /// The scheduler steps whose draft budget was `budget`
    /// (`scheduled_steps_by_budget[budget]`).
    ScheduledSteps {
        /// The scheduled budget.
        budget: usize,
    },
}

impl fmt::Display for Counter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Bucket { drafted, accepted } => {
                write!(f, "bucket (drafted={drafted}, accepted={accepted})")
            }
            Self::UndraftedSteps => f.write_str("num_undrafted_steps"),
            Self::RejectedObservations => f.write_str("num_rejected_observations"),
            Self::ScheduledSteps { budget } => write!(f, "scheduled_steps_by_budget[{budget}]"),
        }
    }
}

/// Two histograms that cannot be combined. The histogram operated on is left
/// unchanged.
///
/// ```
/// use specdec_metrics::{AcceptanceHistogram, MergeError};
/// let mut a = AcceptanceHistogram::new(3).unwrap();
/// let b = AcceptanceHistogram::new(4).unwrap();
/// assert_eq!(a.merge(&b), Err(MergeError::MaxDraftLenMismatch { left: 3, right: 4 }));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MergeError {
    /// The histograms were configured with different maximum draft lengths.
    MaxDraftLenMismatch {
        /// `K` of the histogram operated on.
        left: usize,
        /// `K` of the argument.
        right: usize,
    },
    /// `delta_since(earlier)`: `earlier` holds more in this counter than the
    /// later histogram, so it is not an earlier snapshot of the same source.
    NotEarlier {
        /// The counter that decreased.
        counter: Counter,
        /// Its value in `earlier`.
        earlier: u64,
        /// Its value in the later histogram.
        later: u64,
    },
    /// `merge`: a counter would exceed `u64::MAX`.
    Overflow {
        /// The counter that overflowed.
        counter: Counter,
    },
    /// `merge`: every counter fits, but a total derived from the merged
    /// buckets would exceed `u64::MAX`, so the merged histogram could not
    /// report it (nor be read back from its report).
    ///
    /// ```
    /// use specdec_metrics::{AcceptanceHistogram, MergeError};
    /// # use serde_json::json;
    /// // A report with u64::MAX steps (0, 0): a total of its own that fits.
    /// let full: AcceptanceHistogram = serde_json::from_value(json!({
    ///     "mean_acceptance_length": 1.0, "draft_acceptance_rate": 0.0,
    ///     "acceptance_histogram": [u64::MAX, 0],
    ///     "acceptance_histogram_by_draft_length": {"0": [u64::MAX]},
    ///     "num_spec_steps": u64::MAX, "num_accepted_draft_tokens": 0, "num_draft_tokens": 0,
    ///     "num_spec_tokens": 1, "num_accepted_tokens_per_pos": [0], "num_draft_tokens_per_pos": [0],
    ///     "num_undrafted_steps": 0, "num_rejected_observations": 0
    /// }))?;
    /// let mut merged = full.clone();
    /// let mut one = AcceptanceHistogram::new(1)?;
    /// one.observe(1, 0)?; // a bucket of its own, but one step more in total
    /// assert_eq!(merged.merge(&one), Err(MergeError::TotalOverflow { field: "num_spec_steps" }));
    /// assert_eq!(merged, full);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    TotalOverflow {
        /// The name of the total: `num_spec_steps` or `num_draft_tokens`
        /// (every other figure derived from the buckets is at most one of
        /// these two), or `num_scheduled_steps` (the sum of
        /// `scheduled_steps_by_budget`).
        field: &'static str,
    },
}

impl fmt::Display for MergeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::MaxDraftLenMismatch { left, right } => write!(
                f,
                "cannot combine histograms with different max_draft_len (num_spec_tokens): {left} and {right}"
            ),
            Self::NotEarlier {
                counter,
                earlier,
                later,
            } => write!(
                f,
                "not an earlier snapshot: {counter} is {earlier} in the earlier histogram but {later} in the later one"
            ),
            Self::Overflow { counter } => write!(f, "merge overflows {counter}"),
            Self::TotalOverflow { field } => write!(
                f,
                "merge overflows {field}: the merged histogram's {field} would exceed u64::MAX"
            ),
        }
    }
}

impl std::error::Error for MergeError {}

/// Why a report could not be read back into a histogram. Serde
/// format errors (wrong JSON types, negative or fractional counts, missing
/// keys) are reported by the format itself; this type covers reports that
/// parse but are not a consistent histogram.
#[derive(Clone, Copy, Debug, PartialEq)]
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
        }
    }
}

impl std::error::Error for ReportError {}

/// Which term of a step cost a [`CostError`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CostTerm {
    /// The `base` of [`StepCost::linear`](crate::StepCost::linear): the cost
    /// of a step without speculation.
    Base,
    /// The `per_draft_token` of [`StepCost::linear`](crate::StepCost::linear).
    PerDraftToken,
    /// The entry for draft length `draft_len` of
    /// [`StepCost::table`](crate::StepCost::table).
    Table {
        /// The draft length `k` (the index in the table).
        draft_len: usize,
    },
}

impl fmt::Display for CostTerm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Base => f.write_str("the base cost"),
            Self::PerDraftToken => f.write_str("the cost per draft token"),
            Self::Table { draft_len } => write!(f, "the cost of draft length {draft_len}"),
        }
    }
}

/// A step cost that cannot be used: every cost must be a positive, finite
/// number (a per-draft-token cost may also be zero), and a table needs one
/// entry per draft length `0..=K`.
///
/// ```
/// use specdec_metrics::{CostError, CostTerm, StepCost};
/// let err = StepCost::table(vec![1.0, f64::NAN]).unwrap_err();
/// assert!(matches!(err, CostError::NotFinite { term: CostTerm::Table { draft_len: 1 }, .. }));
/// assert_eq!(err.to_string(), "the cost of draft length 1 is NaN; a step cost must be a finite number");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CostError {
    /// A cost is NaN or infinite.
    NotFinite {
        /// Which cost.
        term: CostTerm,
        /// The value given.
        value: f64,
    },
    /// A cost is zero or negative (a per-draft-token cost: negative).
    NotPositive {
        /// Which cost.
        term: CostTerm,
        /// The value given.
        value: f64,
    },
    /// A linear cost whose value at some draft length overflows to infinity.
    Overflow {
        /// The first draft length whose cost is not finite.
        draft_len: usize,
    },
    /// An empty table.
    EmptyTable,
    /// A table without exactly one entry per draft length `0..=K`.
    TableLength {
        /// The maximum draft length `K` the table is used with.
        max_draft_len: usize,
        /// The number of entries given.
        found: usize,
    },
}

impl fmt::Display for CostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::NotFinite { term, value } => {
                write!(f, "{term} is {value}; a step cost must be a finite number")
            }
            Self::NotPositive {
                term: term @ CostTerm::PerDraftToken,
                value,
            } => write!(f, "{term} is {value}; it must be zero or more"),
            Self::NotPositive { term, value } => {
                write!(f, "{term} is {value}; a step cost must be more than zero")
            }
            Self::Overflow { draft_len } => write!(
                f,
                "the linear step cost overflows at draft length {draft_len}"
            ),
            Self::EmptyTable => f.write_str(
                "the step cost table is empty; it needs one cost per draft length 0..=K",
            ),
            Self::TableLength {
                max_draft_len,
                found,
            } => write!(
                f,
                "the step cost table has {found} entries but max_draft_len {max_draft_len} needs {} (one per draft length 0..={max_draft_len})",
                max_draft_len + 1
            ),
        }
    }
}

impl std::error::Error for CostError {}

/// A tuning parameter of the [`Advisor`](crate::Advisor) or the
/// [`DraftController`](crate::DraftController) outside its range.
///
/// ```
/// use specdec_metrics::Advisor;
/// let err = Advisor::default().with_prior(0.0, 1.0).unwrap_err();
/// assert_eq!(err.to_string(), "prior alpha is 0; expected a finite number above 0");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ParameterError {
    name: &'static str,
    value: f64,
    expected: &'static str,
}

impl ParameterError {
    pub(crate) const fn new(name: &'static str, value: f64, expected: &'static str) -> Self {
        Self {
            name,
            value,
            expected,
        }
    }

    /// The parameter's name, as in the message.
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// The value given.
    pub const fn value(&self) -> f64 {
        self.value
    }
}

impl fmt::Display for ParameterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} is {}; expected {}",
            self.name, self.value, self.expected
        )
    }
}

impl std::error::Error for ParameterError {}
