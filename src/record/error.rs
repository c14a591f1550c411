//! The record layer's errors: what [`Recorder`](crate::Recorder),
//! [`Worker`](crate::Worker) and
//! [`AcceptanceHistogram`](crate::AcceptanceHistogram) return. Each is a
//! small `Copy` value: making one never allocates, so the recording paths
//! can return them from inside a hot loop.

use core::fmt;

use super::MAX_STATES;
use super::layout::{MAX_MAX_DRAFT_LEN, MIN_MAX_DRAFT_LEN, in_triangle, is_valid_max_draft_len};

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
    /// A step cost table without exactly one cost per draft length
    /// `0..=K` ([`DraftController::new`](crate::DraftController::new)).
    ///
    /// ```
    /// use specdec_metrics::{ConfigError, DraftController, StepCost};
    /// let cost = StepCost::table(vec![1.0, 1.1, 1.2])?; // k = 0..=2
    /// let err = DraftController::new(4, cost).unwrap_err();
    /// assert_eq!(err, ConfigError::CostTable { max_draft_len: 4, found: 3 });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    CostTable {
        /// The `K` given.
        max_draft_len: usize,
        /// The number of costs in the table.
        found: usize,
    },
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
            Self::CostTable {
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
    /// A resolved proposal outcome outside the proposal triangle: a
    /// proposal length `L` outside `1..=K`, or more matched tokens than
    /// proposed (`m > L`), from
    /// [`observe_proposal`](crate::Worker::observe_proposal).
    ///
    /// ```
    /// use specdec_metrics::{ObserveError, Recorder};
    /// let recorder = Recorder::builder(4).record_proposals().build()?;
    /// let err = recorder.worker().observe_proposal(3, 4).unwrap_err();
    /// assert_eq!(err, ObserveError::ProposalOutOfRange { proposal_len: 3, matched: 4, max_draft_len: 4 });
    /// assert_eq!(
    ///     err.to_string(),
    ///     "rejected proposal outcome (proposal_len=3, matched=4): needs 1 <= proposal_len <= max_draft_len=4 and matched <= proposal_len"
    /// );
    /// assert_eq!(recorder.snapshot().num_rejected_observations(), 1);
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    ProposalOutOfRange {
        /// The proposal length `L` given.
        proposal_len: usize,
        /// The matched count `m` given.
        matched: usize,
        /// The configured maximum `K`.
        max_draft_len: usize,
    },
    /// A proposal outcome (resolved or aborted) given to a recorder or
    /// histogram built without proposal recording (see
    /// [`RecorderBuilder::record_proposals`](crate::RecorderBuilder::record_proposals)).
    ///
    /// ```
    /// use specdec_metrics::{ObserveError, Recorder};
    /// let recorder = Recorder::new(4)?;
    /// let err = recorder.observe_proposal(2, 1).unwrap_err();
    /// assert_eq!(err, ObserveError::ProposalsNotRecorded);
    /// assert_eq!(recorder.snapshot().num_rejected_observations(), 1);
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    ProposalsNotRecorded,
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

    /// A proposal outcome that no counter can hold: proposal recording off,
    /// or `(proposal_len, matched)` outside the proposal triangle. Cold
    /// path.
    #[cold]
    #[inline(never)]
    pub(crate) fn proposal(
        recorded: bool,
        max_draft_len: usize,
        proposal_len: usize,
        matched: usize,
    ) -> Self {
        if recorded {
            Self::ProposalOutOfRange {
                proposal_len,
                matched,
                max_draft_len,
            }
        } else {
            Self::ProposalsNotRecorded
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
    /// scheduled budget, the budget (the draft length the scheduler chose);
    /// for a rejected proposal outcome, its proposal length `L` (0 when
    /// proposal recording is off).
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
            Self::ProposalOutOfRange { proposal_len, .. } => proposal_len,
            Self::ProposalsNotRecorded => 0,
        }
    }

    /// The accepted count `a` of the rejected observation; 0 for a rejected
    /// scheduled budget (a scheduler step verifies nothing by itself); for a
    /// rejected proposal outcome, its matched count `m` (0 when proposal
    /// recording is off).
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
            Self::ProposalOutOfRange { matched, .. } => matched,
            Self::ProposalsNotRecorded => 0,
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
            Self::ProposalOutOfRange {
                proposal_len,
                matched,
                max_draft_len,
            } => write!(
                f,
                "rejected proposal outcome (proposal_len={proposal_len}, matched={matched}): needs 1 <= proposal_len <= max_draft_len={max_draft_len} and matched <= proposal_len"
            ),
            Self::ProposalsNotRecorded => f.write_str(
                "rejected proposal outcome: proposal recording is off (RecorderBuilder::record_proposals)",
            ),
        }
    }
}

impl std::error::Error for ObserveError {}

/// One counter of an [`AcceptanceHistogram`](crate::AcceptanceHistogram),
/// named in [`MergeError`] (formerly `Counter`, a name that clashed with
/// the counter types of `metrics` and `prometheus-client`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HistogramCounter {
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
    /// The resolved proposals of length `proposal_len` whose first
    /// `matched` tokens matched the output (`acceptance_by_proposal_length`).
    ProposalBucket {
        /// Proposal length `L`.
        proposal_len: usize,
        /// Matched count `m`.
        matched: usize,
    },
    /// `num_aborted_proposals`.
    AbortedProposals,
}

impl fmt::Display for HistogramCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Bucket { drafted, accepted } => {
                write!(f, "bucket (drafted={drafted}, accepted={accepted})")
            }
            Self::UndraftedSteps => f.write_str("num_undrafted_steps"),
            Self::RejectedObservations => f.write_str("num_rejected_observations"),
            Self::ScheduledSteps { budget } => write!(f, "scheduled_steps_by_budget[{budget}]"),
            Self::ProposalBucket {
                proposal_len,
                matched,
            } => write!(
                f,
                "proposal bucket (proposal_len={proposal_len}, matched={matched})"
            ),
            Self::AbortedProposals => f.write_str("num_aborted_proposals"),
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
        counter: HistogramCounter,
        /// Its value in `earlier`.
        earlier: u64,
        /// Its value in the later histogram.
        later: u64,
    },
    /// `merge`: a counter would exceed `u64::MAX`.
    Overflow {
        /// The counter that overflowed.
        counter: HistogramCounter,
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
