//! Error types. Each is a small `Copy` value: making one never allocates, so
//! the recording paths can return them from inside a hot loop.

use core::fmt;

use crate::{MAX_STATES, MAX_STEP_COST, MIN_STEP_COST};

use crate::record::layout::{
    MAX_MAX_DRAFT_LEN, MIN_MAX_DRAFT_LEN, in_triangle, is_valid_max_draft_len,
};

/// A configuration that cannot be used.
///
/// ```
/// use specdec_metrics::{AcceptanceHistogram, ConfigError};
/// let err = AcceptanceHistogram::new(0).unwrap_err();
/// assert_eq!(err, ConfigError::MaxDraftLen { max_draft_len: 0 });
/// assert!(err.to_string().contains("1..=64"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum ConfigError {
    /// The maximum draft length `K` is outside `1..=64`.
    MaxDraftLen {
        /// The `K` given.
        max_draft_len: usize,
    },
    /// A number of request states outside `1..=128`
    /// ([`Recorder::with_states`](crate::Recorder::with_states)).
    States {
        /// The number given.
        states: usize,
    },
    /// The step cost cannot be used with `K` (a
    /// [`DraftController`](crate::DraftController)'s cost table without
    /// exactly one cost per draft length `0..=K`).
    ///
    /// ```
    /// use specdec_metrics::{ConfigError, CostError, DraftController, StepCost};
    /// let cost = StepCost::table(vec![1.0, 1.1, 1.2])?; // k = 0..=2
    /// let err = DraftController::new(4, cost).unwrap_err();
    /// assert_eq!(err, ConfigError::Cost(CostError::TableLength { max_draft_len: 4, found: 3 }));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    Cost(CostError),
}

impl ConfigError {
    /// `Ok` for a maximum draft length `K` in `1..=64`.
    pub(crate) const fn check_max_draft_len(max_draft_len: usize) -> Result<(), Self> {
        if is_valid_max_draft_len(max_draft_len) {
            Ok(())
        } else {
            Err(Self::MaxDraftLen { max_draft_len })
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::MaxDraftLen { max_draft_len } => write!(
                f,
                "max_draft_len (num_spec_tokens) must be in {MIN_MAX_DRAFT_LEN}..={MAX_MAX_DRAFT_LEN}, got {max_draft_len}"
            ),
            Self::States { states } => write!(
                f,
                "the number of request states must be in 1..={MAX_STATES}, got {states}"
            ),
            Self::Cost(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Cost(e) => Some(e),
            Self::MaxDraftLen { .. } | Self::States { .. } => None,
        }
    }
}

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
#[non_exhaustive]
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
    /// A request state the recorder has no triangle for (`state >=
    /// states`), from [`observe_in`](crate::Worker::observe_in).
    ///
    /// ```
    /// use specdec_metrics::{ObserveError, Recorder};
    /// let recorder = Recorder::with_states(4, 2)?;
    /// let err = recorder.worker().observe_in(2, 4, 1).unwrap_err();
    /// assert_eq!(err, ObserveError::StateOutOfRange { state: 2, states: 2, drafted: 4, accepted: 1 });
    /// assert_eq!(
    ///     err.to_string(),
    ///     "rejected observation (state=2, drafted=4, accepted=1): the recorder has 2 states"
    /// );
    /// assert_eq!(recorder.snapshot().num_rejected_observations(), 1);
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    StateOutOfRange {
        /// The state given.
        state: usize,
        /// The recorder's number of states.
        states: usize,
        /// The draft length `k` given.
        drafted: usize,
        /// The accepted count `a` given.
        accepted: usize,
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
        if in_triangle(max_draft_len, drafted, accepted) {
            Ok(())
        } else {
            Err(Self::new(max_draft_len, drafted, accepted))
        }
    }

    /// Classifies an invalid `(state, drafted, accepted)`: a state out of
    /// range first, else as [`new`](Self::new). Cold path.
    #[cold]
    #[inline(never)]
    pub(crate) fn in_state(
        max_draft_len: usize,
        states: usize,
        state: usize,
        drafted: usize,
        accepted: usize,
    ) -> Self {
        if state >= states {
            Self::StateOutOfRange {
                state,
                states,
                drafted,
                accepted,
            }
        } else {
            Self::new(max_draft_len, drafted, accepted)
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
            | Self::DraftedExceedsMax { drafted, .. }
            | Self::StateOutOfRange { drafted, .. } => drafted,
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
            | Self::DraftedExceedsMax { accepted, .. }
            | Self::StateOutOfRange { accepted, .. } => accepted,
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
            Self::StateOutOfRange {
                state,
                states,
                drafted,
                accepted,
            } => write!(
                f,
                "rejected observation (state={state}, drafted={drafted}, accepted={accepted}): the recorder has {states} states"
            ),
        }
    }
}

impl std::error::Error for ObserveError {}

/// One counter of a histogram, named in [`MergeError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
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
#[non_exhaustive]
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
#[non_exhaustive]
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

/// A step cost that cannot be used: every cost must be a finite number
/// between `1e-150` and `1e150` (a per-draft-token cost may also be zero),
/// and a table needs one entry per draft length `0..=K` of the `K` it is
/// used with.
///
/// ```
/// use specdec_metrics::{CostError, CostTerm, StepCost};
/// let err = StepCost::table(vec![1.0, f64::NAN]).unwrap_err();
/// assert!(matches!(err, CostError::NotFinite { term: CostTerm::Table { draft_len: 1 }, .. }));
/// assert_eq!(err.to_string(), "the cost of draft length 1 is NaN; a step cost must be a finite number");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
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
    /// A cost outside [`MIN_STEP_COST`]`..=`[`MAX_STEP_COST`] (`1e-150` to
    /// `1e150`: only ratios of costs matter; the bounds keep every ratio
    /// and every goodput a finite number).
    ///
    /// ```
    /// use specdec_metrics::{CostError, CostTerm, StepCost};
    /// let err = StepCost::linear(5e-324, 0.0).unwrap_err();
    /// assert_eq!(err, CostError::OutOfRange { term: CostTerm::Base, value: 5e-324 });
    /// assert_eq!(
    ///     err.to_string(),
    ///     "the base cost is 5e-324; a step cost must be between 1e-150 and 1e150 (only ratios of costs matter: use another unit)"
    /// );
    /// ```
    ///
    /// [`MIN_STEP_COST`]: crate::MIN_STEP_COST
    /// [`MAX_STEP_COST`]: crate::MAX_STEP_COST
    OutOfRange {
        /// Which cost.
        term: CostTerm,
        /// The value given.
        value: f64,
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
            Self::OutOfRange { term, value } => write!(
                f,
                "{term} is {value:e}; a step cost must be between {MIN_STEP_COST:e} and {MAX_STEP_COST:e} (only ratios of costs matter: use another unit)"
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

/// A batch-size bucket named in a [`BatchTableError`]: its position in the
/// list given (`index`, from 0; messages count from 1) and its batch sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BucketSpan {
    /// The bucket's position in the list, from 0.
    pub index: usize,
    /// Its first batch size.
    pub start_bs: usize,
    /// Its last batch size.
    pub end_bs: usize,
}

impl fmt::Display for BucketSpan {
    /// `bucket 2 (batch sizes 5-8)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bucket {} (batch sizes {}-{})",
            self.index + 1,
            self.start_bs,
            self.end_bs
        )
    }
}

/// Why buckets cannot make a [`BatchTable`](crate::BatchTable), or a table
/// cannot be written as TensorRT-LLM's schedule: the bucket it is about (if
/// any) and what is wrong, in the shape of `std::io::Error` (context and
/// kind).
///
/// ```
/// use specdec_metrics::{Advisor, BatchTable, BatchTableErrorKind};
/// let err = BatchTable::recommend(&Advisor::default(), &[]).unwrap_err();
/// assert_eq!(err.kind(), &BatchTableErrorKind::Empty);
/// assert_eq!(err.bucket(), None);
/// assert_eq!(err.to_string(), "no batch-size buckets were given");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct BatchTableError {
    bucket: Option<BucketSpan>,
    kind: BatchTableErrorKind,
}

/// What is wrong, in a [`BatchTableError`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum BatchTableErrorKind {
    /// No buckets.
    Empty,
    /// The bucket's first batch size is above its last.
    StartAfterEnd,
    /// The first bucket does not start at batch size 1 (vLLM refuses such a
    /// schedule, and no data would support the smaller batch sizes).
    FirstNotOne,
    /// The bucket starts below the bucket before it.
    Unsorted {
        /// The bucket before it.
        previous: BucketSpan,
    },
    /// The bucket starts at or below the last batch size of the bucket
    /// before it.
    Overlap {
        /// The bucket before it.
        previous: BucketSpan,
    },
    /// Batch sizes between the bucket and the one before it belong to
    /// neither.
    Gap {
        /// The bucket before it.
        previous: BucketSpan,
    },
    /// The bucket's histogram has another maximum draft length than the
    /// first bucket's.
    MaxDraftLen {
        /// Its histogram's `K`.
        found: usize,
        /// The first bucket's `K`.
        expected: usize,
    },
    /// The bucket's cost does not fit `K` (a table without `K + 1` entries).
    Cost(CostError),
    /// The bucket recommends a longer draft than the first bucket, which
    /// TensorRT-LLM's `draft_len_schedule` cannot say.
    TrtllmIncreasing {
        /// The first bucket.
        first: BucketSpan,
        /// The first bucket's draft length.
        first_draft_len: usize,
        /// The bucket's draft length.
        draft_len: usize,
    },
    /// Every bucket recommends not speculating.
    TrtllmNoSpeculation,
}

impl BatchTableError {
    pub(crate) const fn new(bucket: Option<BucketSpan>, kind: BatchTableErrorKind) -> Self {
        Self { bucket, kind }
    }

    /// The bucket the error is about; `None` when it is about no single
    /// bucket.
    ///
    /// ```
    /// use specdec_metrics::{AcceptanceHistogram, Advisor, BatchBucket, BatchTable, BucketSpan, StepCost};
    /// let b = BatchBucket::new(3, 1, AcceptanceHistogram::new(2)?, StepCost::linear(1.0, 0.1)?);
    /// let err = BatchTable::recommend(&Advisor::default(), &[b]).unwrap_err();
    /// assert_eq!(err.bucket(), Some(BucketSpan { index: 0, start_bs: 3, end_bs: 1 }));
    /// assert_eq!(err.to_string(), "bucket 1 (batch sizes 3-1) starts above its end");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub const fn bucket(&self) -> Option<BucketSpan> {
        self.bucket
    }

    /// What is wrong.
    pub const fn kind(&self) -> &BatchTableErrorKind {
        &self.kind
    }

    /// The position (from 0) of the bucket the error is about; `None` when
    /// it is about no single bucket.
    pub const fn index(&self) -> Option<usize> {
        match self.bucket {
            Some(b) => Some(b.index),
            None => None,
        }
    }
}

impl fmt::Display for BatchTableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use BatchTableErrorKind as Kind;
        let Some(bucket) = self.bucket else {
            return match self.kind {
                Kind::TrtllmNoSpeculation => f.write_str(
                    "every bucket recommends draft length 0: TensorRT-LLM's draft_len_schedule would need max_draft_len 0; run without speculative decoding instead",
                ),
                // `Empty`, the only other kind without a bucket.
                _ => f.write_str("no batch-size buckets were given"),
            };
        };
        match self.kind {
            Kind::Empty | Kind::TrtllmNoSpeculation => write!(f, "{bucket}"),
            Kind::StartAfterEnd => write!(f, "{bucket} starts above its end"),
            Kind::FirstNotOne => write!(
                f,
                "{bucket} does not start at batch size 1: the buckets must cover every batch size from 1"
            ),
            Kind::Unsorted { previous } => write!(
                f,
                "{bucket} starts below {previous}: give the buckets in order of batch size"
            ),
            Kind::Overlap { previous } => write!(
                f,
                "{bucket} overlaps {previous}: each batch size belongs to one bucket"
            ),
            Kind::Gap { previous } => {
                let (first, last) = (previous.end_bs + 1, bucket.start_bs - 1);
                write!(f, "{bucket}")?;
                if first == last {
                    write!(f, " leaves batch size {first}")?;
                } else {
                    write!(f, " leaves batch sizes {first}-{last}")?;
                }
                write!(
                    f,
                    " without a bucket after {previous}; vLLM would give them the draft length of the bucket below, TensorRT-LLM that of the bucket above"
                )
            }
            Kind::MaxDraftLen { found, expected } => write!(
                f,
                "{bucket}: its histogram's num_spec_tokens (K) is {found} but the first bucket's is {expected}; every bucket must have the engine's K"
            ),
            Kind::Cost(error) => write!(f, "{bucket}: {error}"),
            Kind::TrtllmIncreasing {
                first,
                first_draft_len,
                draft_len,
            } => write!(
                f,
                "{bucket} recommends draft length {draft_len}, more than the {first_draft_len} of {first}: TensorRT-LLM's draft_len_schedule needs its value at the smallest batch size to be max_draft_len and no value above it"
            ),
        }
    }
}

impl std::error::Error for BatchTableError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            BatchTableErrorKind::Cost(e) => Some(e),
            _ => None,
        }
    }
}

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
    /// ([`FAMILY_LABELS`](crate::FAMILY_LABELS)) or starts with `__` (reserved by Prometheus).
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
                "label name {n:?} is reserved (set by the families themselves: position, draft_length, accepted, num_spec_tokens; or starting with __)"
            ),
            Self::DuplicateLabelName(n) => write!(f, "label name {n:?} given twice"),
        }
    }
}

impl std::error::Error for NameError {}
