//! [`AcceptanceHistogram`]: owned counts of one request or one snapshot, and
//! every figure of the reference's "Derived figures" computed from them.
//!
//! Only the buckets `H[k][a]`, the two side counters (undrafted steps,
//! rejected observations) and the `K + 1` scheduled-budget counters are
//! stored. Totals, per-position counts and rates
//! are computed from the buckets each time they are asked for, so no figure
//! can disagree with the histogram it comes from.

use core::fmt;

use super::error::{ConfigError, HistogramCounter, MergeError, ObserveError};
use super::layout::{bucket_count, checked_bucket_index, is_valid_max_draft_len, row_start};
use super::proposal::{checked_proposal_index, proposal_bucket_count, proposal_row_start};

/// Verify-step outcomes by draft length: for each draft length `k` in
/// `0..=K`, `k + 1` counts, bucket `a` counting the steps that drafted `k`
/// tokens and accepted `a` of them.
///
/// It is both the per-request accumulator (allocated once when the request
/// starts; [`observe`](Self::observe) never allocates) and the snapshot type
/// returned by [`Recorder::snapshot`](crate::Recorder::snapshot). It
/// serializes to the vLLM-compatible report (see [`REPORT_KEYS`](crate::REPORT_KEYS)).
///
/// ```
/// use specdec_metrics::AcceptanceHistogram;
///
/// let mut h = AcceptanceHistogram::new(3)?;
/// for (k, a) in [(3, 0), (3, 3), (3, 2), (3, 3), (3, 1)] {
///     h.observe(k, a)?;
/// }
/// assert_eq!(h.row(3), Some(&[1, 1, 1, 2][..]));
/// assert_eq!(h.mean_acceptance_length(), 2.8);
/// assert_eq!(h.draft_acceptance_rate(), 0.6);
/// assert_eq!(h.num_accepted_tokens_per_pos(), vec![4, 3, 2]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct AcceptanceHistogram {
    max_draft_len: usize,
    /// `H[k][a]` at `layout::row_start(k) + a`; `layout::bucket_count(K)` long.
    counts: Box<[u64]>,
    undrafted: u64,
    rejected: u64,
    /// Scheduler steps by draft budget `0..=K`; `K + 1` long.
    scheduled: Box<[u64]>,
    /// The proposal histogram, when recorded (opt-in).
    proposals: Option<Proposals>,
}

/// Resolved proposal outcomes by proposal length `L` and matched count `m`
/// (at `proposal::proposal_row_start(L) + m`), and the aborted ones.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct Proposals {
    /// `proposal_bucket_count(K)` long.
    pub(crate) counts: Box<[u64]>,
    pub(crate) aborted: u64,
}

impl Proposals {
    fn zero(max_draft_len: usize) -> Self {
        Self {
            counts: vec![0; proposal_bucket_count(max_draft_len)].into_boxed_slice(),
            aborted: 0,
        }
    }
}

impl AcceptanceHistogram {
    /// An empty histogram for draft lengths `0..=max_draft_len` (vLLM's
    /// `num_spec_tokens`). Allocates its `(K + 1)(K + 2) / 2` counters once.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] unless `1 <= max_draft_len <= 64`.
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// assert_eq!(AcceptanceHistogram::new(4)?.max_draft_len(), 4);
    /// assert!(AcceptanceHistogram::new(65).is_err());
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    pub fn new(max_draft_len: usize) -> Result<Self, ConfigError> {
        ConfigError::check_max_draft_len(max_draft_len)?;
        Ok(Self {
            max_draft_len,
            counts: vec![0; bucket_count(max_draft_len)].into_boxed_slice(),
            undrafted: 0,
            rejected: 0,
            scheduled: vec![0; max_draft_len + 1].into_boxed_slice(),
            proposals: None,
        })
    }

    /// An empty histogram that also keeps the proposal histogram of a
    /// lookup drafter (see [`ProposalTracker`](crate::ProposalTracker)):
    /// for a request's own accumulator, as
    /// [`RecorderBuilder::record_proposals`](crate::RecorderBuilder::record_proposals)
    /// is for a recorder. Allocates its `K (K + 3) / 2` proposal counters
    /// once, with the rest.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] unless `1 <= max_draft_len <= 64`.
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// let h = AcceptanceHistogram::with_proposals(4)?;
    /// assert!(h.records_proposals());
    /// assert!(!AcceptanceHistogram::new(4)?.records_proposals());
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    pub fn with_proposals(max_draft_len: usize) -> Result<Self, ConfigError> {
        let mut h = Self::new(max_draft_len)?;
        h.proposals = Some(Proposals::zero(max_draft_len));
        Ok(h)
    }

    /// Sets the proposal part (a snapshot of a recorder that records
    /// proposals, a report that has one). `counts` must be
    /// `proposal_bucket_count(K)` long.
    pub(crate) fn set_proposals(&mut self, counts: Box<[u64]>, aborted: u64) {
        debug_assert_eq!(counts.len(), proposal_bucket_count(self.max_draft_len));
        self.proposals = Some(Proposals { counts, aborted });
    }

    /// Whether this histogram keeps the proposal histogram (built with
    /// [`with_proposals`](Self::with_proposals), a snapshot of a recorder
    /// that records proposals, or a report or merge that has one).
    pub fn records_proposals(&self) -> bool {
        self.proposals.is_some()
    }

    /// Records one resolved proposal outcome of a lookup drafter: a
    /// proposal of `proposal_len` tokens (`L`, `1..=K`) whose first
    /// `matched` (`m <= L`) equal the output tokens that followed. Usually
    /// called by a [`ProposalTracker`](crate::ProposalTracker).
    ///
    /// # Errors
    ///
    /// [`ObserveError::ProposalOutOfRange`] outside the proposal triangle,
    /// [`ObserveError::ProposalsNotRecorded`] unless the histogram
    /// [records proposals](Self::records_proposals); the outcome is then
    /// counted in [`num_rejected_observations`](Self::num_rejected_observations).
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// let mut h = AcceptanceHistogram::with_proposals(4)?;
    /// h.observe_proposal(4, 3)?;
    /// assert!(h.observe_proposal(0, 0).is_err());
    /// assert_eq!((h.proposal_count(4, 3), h.num_rejected_observations()), (1, 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn observe_proposal(
        &mut self,
        proposal_len: usize,
        matched: usize,
    ) -> Result<(), ObserveError> {
        let index = checked_proposal_index(self.max_draft_len, proposal_len, matched);
        match (&mut self.proposals, index) {
            (Some(p), Some(i)) => {
                p.counts[i] += 1;
                Ok(())
            }
            (recorded, _) => {
                let recorded = recorded.is_some();
                self.rejected += 1;
                Err(ObserveError::proposal(
                    recorded,
                    self.max_draft_len,
                    proposal_len,
                    matched,
                ))
            }
        }
    }

    /// Records `count` proposal outcomes left pending by aborted requests
    /// (`num_aborted_proposals`): counted apart, never as matches.
    ///
    /// # Errors
    ///
    /// [`ObserveError::ProposalsNotRecorded`] unless the histogram
    /// [records proposals](Self::records_proposals); the call is then
    /// counted once in
    /// [`num_rejected_observations`](Self::num_rejected_observations).
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// let mut h = AcceptanceHistogram::with_proposals(4)?;
    /// h.observe_aborted_proposals(3)?;
    /// assert_eq!(h.num_aborted_proposals(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn observe_aborted_proposals(&mut self, count: u64) -> Result<(), ObserveError> {
        match &mut self.proposals {
            Some(p) => {
                p.aborted = p.aborted.saturating_add(count);
                Ok(())
            }
            None => {
                self.rejected += 1;
                Err(ObserveError::ProposalsNotRecorded)
            }
        }
    }

    /// The `L + 1` counts of proposal length `proposal_len` (`L`), matched
    /// `0..=L`; `None` for `L` outside `1..=K` or when proposals are not
    /// recorded.
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// let mut h = AcceptanceHistogram::with_proposals(3)?;
    /// h.observe_proposal(2, 2)?;
    /// assert_eq!(h.proposal_row(2), Some(&[0, 0, 1][..]));
    /// assert_eq!(h.proposal_row(0), None);
    /// assert_eq!(AcceptanceHistogram::new(3)?.proposal_row(2), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn proposal_row(&self, proposal_len: usize) -> Option<&[u64]> {
        let p = self.proposals.as_ref()?;
        (1..=self.max_draft_len).contains(&proposal_len).then(|| {
            &p.counts[proposal_row_start(proposal_len)..proposal_row_start(proposal_len + 1)]
        })
    }

    /// The resolved proposals of length `proposal_len` with `matched`
    /// tokens matched; 0 outside the proposal triangle or when proposals
    /// are not recorded.
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// let mut h = AcceptanceHistogram::with_proposals(3)?;
    /// h.observe_proposal(3, 0)?;
    /// assert_eq!((h.proposal_count(3, 0), h.proposal_count(3, 4)), (1, 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn proposal_count(&self, proposal_len: usize, matched: usize) -> u64 {
        match (
            &self.proposals,
            checked_proposal_index(self.max_draft_len, proposal_len, matched),
        ) {
            (Some(p), Some(i)) => p.counts[i],
            _ => 0,
        }
    }

    /// The rows of the proposal lengths with at least one resolved outcome,
    /// ascending: the entries of `acceptance_by_proposal_length`. Empty when
    /// proposals are not recorded.
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// let mut h = AcceptanceHistogram::with_proposals(3)?;
    /// h.observe_proposal(2, 1)?;
    /// let rows: Vec<_> = h.observed_proposal_rows().collect();
    /// assert_eq!(rows, [(2, &[0, 1, 0][..])]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn observed_proposal_rows(&self) -> impl Iterator<Item = (usize, &[u64])> + '_ {
        (1..=self.max_draft_len).filter_map(move |len| {
            let row = self.proposal_row(len)?;
            row.iter().any(|&c| c != 0).then_some((len, row))
        })
    }

    /// Resolved proposal outcomes: the sum of the proposal histogram
    /// (saturating); 0 when proposals are not recorded.
    pub fn num_resolved_proposals(&self) -> u64 {
        self.proposals.as_ref().map_or(0, |p| {
            p.counts.iter().fold(0u64, |s, &c| s.saturating_add(c))
        })
    }

    /// Proposal outcomes dropped unresolved because their request was
    /// aborted; 0 when proposals are not recorded.
    pub fn num_aborted_proposals(&self) -> u64 {
        self.proposals.as_ref().map_or(0, |p| p.aborted)
    }

    /// Builds a histogram from raw counts. `counts` must be
    /// `bucket_count(max_draft_len)` long, `scheduled` `max_draft_len + 1`
    /// long, and `max_draft_len` valid.
    pub(crate) fn from_parts(
        max_draft_len: usize,
        counts: Box<[u64]>,
        undrafted: u64,
        rejected: u64,
        scheduled: Box<[u64]>,
    ) -> Self {
        debug_assert!(is_valid_max_draft_len(max_draft_len));
        debug_assert_eq!(counts.len(), bucket_count(max_draft_len));
        debug_assert_eq!(scheduled.len(), max_draft_len + 1);
        Self {
            max_draft_len,
            counts,
            undrafted,
            rejected,
            scheduled,
            proposals: None,
        }
    }

    /// Records one verify step that drafted `drafted` tokens (after grammar
    /// adjustment; `0` when the grammar invalidated every draft) and of which
    /// the verifier accepted `accepted` (bonus token excluded).
    ///
    /// # Errors
    ///
    /// [`ObserveError`] naming the values when `accepted > drafted` or
    /// `drafted > max_draft_len`; the step is then counted in
    /// [`num_rejected_observations`](Self::num_rejected_observations) and in
    /// no bucket.
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// let mut h = AcceptanceHistogram::new(2)?;
    /// h.observe(2, 1)?;
    /// h.observe(0, 0)?; // drafts scheduled, all invalidated by the grammar
    /// assert!(h.observe(3, 0).is_err()); // above K = 2: rejected and counted
    /// assert_eq!((h.count(2, 1), h.count(0, 0), h.num_rejected_observations()), (1, 1, 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn observe(&mut self, drafted: usize, accepted: usize) -> Result<(), ObserveError> {
        match checked_bucket_index(self.max_draft_len, drafted, accepted) {
            Some(i) => {
                self.counts[i] += 1;
                Ok(())
            }
            None => {
                self.rejected += 1;
                Err(ObserveError::new(self.max_draft_len, drafted, accepted))
            }
        }
    }

    /// Records a step where the drafting policy proposed nothing at all (not
    /// a `k = 0` row: a `k = 0` row is a step whose drafts the grammar all
    /// invalidated). Reported as `num_undrafted_steps`.
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// let mut h = AcceptanceHistogram::new(2)?;
    /// h.observe_undrafted();
    /// assert_eq!((h.num_undrafted_steps(), h.num_spec_steps()), (1, 0));
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    #[inline]
    pub fn observe_undrafted(&mut self) {
        self.undrafted += 1;
    }

    /// Records one scheduler step whose draft budget was `budget` (`0`: the
    /// schedule chose not to speculate). A scheduler step is not a verify
    /// step: it changes no bucket and no acceptance figure, only
    /// [`scheduled_steps_by_budget`](Self::scheduled_steps_by_budget).
    /// Record the steps of the requests it verified with
    /// [`observe`](Self::observe).
    ///
    /// # Errors
    ///
    /// [`ObserveError::BudgetExceedsMax`] when `budget > max_draft_len`; the
    /// step is then counted in
    /// [`num_rejected_observations`](Self::num_rejected_observations) and in
    /// no budget counter.
    ///
    /// ```
    /// use specdec_metrics::{AcceptanceHistogram, ObserveError};
    /// let mut h = AcceptanceHistogram::new(2)?;
    /// h.observe_scheduled(2)?;
    /// h.observe_scheduled(0)?; // the schedule chose not to speculate
    /// assert_eq!(
    ///     h.observe_scheduled(3),
    ///     Err(ObserveError::BudgetExceedsMax { budget: 3, max_draft_len: 2 })
    /// );
    /// assert_eq!(h.scheduled_steps_by_budget(), &[1, 0, 1]);
    /// assert_eq!((h.num_spec_steps(), h.num_rejected_observations()), (0, 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn observe_scheduled(&mut self, budget: usize) -> Result<(), ObserveError> {
        match self.scheduled.get_mut(budget) {
            Some(count) => {
                *count += 1;
                Ok(())
            }
            None => {
                self.rejected += 1;
                Err(ObserveError::budget(self.max_draft_len, budget))
            }
        }
    }

    /// Scheduler steps by draft budget: dense, `K + 1` long, entry `b` the
    /// steps recorded with [`observe_scheduled(b)`](Self::observe_scheduled)
    /// (the report key `scheduled_steps_by_budget`).
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// let mut h = AcceptanceHistogram::new(3)?;
    /// h.observe_scheduled(1)?;
    /// h.observe_scheduled(1)?;
    /// assert_eq!(h.scheduled_steps_by_budget(), &[0, 2, 0, 0]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn scheduled_steps_by_budget(&self) -> &[u64] {
        &self.scheduled
    }

    /// Scheduler steps whose draft budget was `budget`; 0 when `budget > K`.
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// let mut h = AcceptanceHistogram::new(3)?;
    /// h.observe_scheduled(0)?;
    /// assert_eq!((h.scheduled_steps(0), h.scheduled_steps(3), h.scheduled_steps(9)), (1, 0, 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn scheduled_steps(&self, budget: usize) -> u64 {
        self.scheduled.get(budget).copied().unwrap_or(0)
    }

    /// Scheduler steps recorded, whatever their budget: the sum of
    /// [`scheduled_steps_by_budget`](Self::scheduled_steps_by_budget)
    /// (saturating; a histogram built by `merge` or read from a report
    /// always has a sum that fits).
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// let mut h = AcceptanceHistogram::new(3)?;
    /// h.observe_scheduled(0)?;
    /// h.observe_scheduled(3)?;
    /// assert_eq!(h.num_scheduled_steps(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn num_scheduled_steps(&self) -> u64 {
        self.scheduled.iter().fold(0, |s, &c| s.saturating_add(c))
    }

    /// The count of bucket `(drafted, accepted)`; 0 outside the triangle.
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// let mut h = AcceptanceHistogram::new(2)?;
    /// h.observe(2, 2)?;
    /// assert_eq!((h.count(2, 2), h.count(2, 3), h.count(9, 0)), (1, 0, 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn count(&self, drafted: usize, accepted: usize) -> u64 {
        checked_bucket_index(self.max_draft_len, drafted, accepted).map_or(0, |i| self.counts[i])
    }

    /// The `drafted + 1` counts of row `drafted` (accepted `0..=drafted`), or
    /// `None` when `drafted > max_draft_len`.
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// let mut h = AcceptanceHistogram::new(3)?;
    /// h.observe(1, 1)?;
    /// assert_eq!(h.row(1), Some(&[0, 1][..]));
    /// assert_eq!(h.row(2), Some(&[0, 0, 0][..]));
    /// assert_eq!(h.row(4), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn row(&self, drafted: usize) -> Option<&[u64]> {
        (drafted <= self.max_draft_len)
            .then(|| &self.counts[row_start(drafted)..row_start(drafted + 1)])
    }

    /// The rows of the observed draft lengths (at least one step), ascending
    /// by draft length: the entries of `acceptance_histogram_by_draft_length`.
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// let mut h = AcceptanceHistogram::new(4)?;
    /// h.observe(3, 1)?;
    /// h.observe(1, 0)?;
    /// let rows: Vec<_> = h.observed_rows().collect();
    /// assert_eq!(rows, vec![(1, &[1, 0][..]), (3, &[0, 1, 0, 0][..])]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn observed_rows(&self) -> impl Iterator<Item = (usize, &[u64])> + '_ {
        (0..=self.max_draft_len).filter_map(move |k| {
            let row = &self.counts[row_start(k)..row_start(k + 1)];
            row.iter().any(|&c| c != 0).then_some((k, row))
        })
    }

    /// The configured maximum draft length `K` (vLLM's `num_spec_tokens`).
    pub fn max_draft_len(&self) -> usize {
        self.max_draft_len
    }

    /// Whether nothing at all was recorded: no step, no undrafted step, no
    /// scheduled step, no rejected observation, no proposal outcome.
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// let mut h = AcceptanceHistogram::new(1)?;
    /// assert!(h.is_empty());
    /// h.observe_undrafted();
    /// assert!(!h.is_empty());
    /// let mut scheduled = AcceptanceHistogram::new(1)?;
    /// scheduled.observe_scheduled(0)?;
    /// assert!(!scheduled.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn is_empty(&self) -> bool {
        self.undrafted == 0
            && self.rejected == 0
            && self.counts.iter().all(|&c| c == 0)
            && self.scheduled.iter().all(|&c| c == 0)
            && self
                .proposals
                .as_ref()
                .is_none_or(|p| p.aborted == 0 && p.counts.iter().all(|&c| c == 0))
    }

    /// Verify steps recorded in the histogram: the sum of all buckets
    /// (vLLM's engine-wide `num_drafts`).
    pub fn num_spec_steps(&self) -> u64 {
        self.counts.iter().fold(0, |s, &c| s.saturating_add(c))
    }

    /// Steps in row `drafted` (the sum of its buckets); 0 when `drafted > K`.
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// let mut h = AcceptanceHistogram::new(2)?;
    /// h.observe(2, 0)?;
    /// h.observe(2, 2)?;
    /// assert_eq!(h.row_steps(2), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn row_steps(&self, drafted: usize) -> u64 {
        self.row(drafted)
            .map_or(0, |r| r.iter().fold(0, |s, &c| s.saturating_add(c)))
    }

    /// Draft tokens: the sum of `k * H[k][a]`.
    pub fn num_draft_tokens(&self) -> u64 {
        (1..=self.max_draft_len).fold(0u64, |s, k| {
            s.saturating_add((k as u64).saturating_mul(self.row_steps(k)))
        })
    }

    /// Accepted draft tokens: the sum of `a * H[k][a]` (vLLM's engine-wide
    /// `num_accepted_tokens`; the bonus token is not counted).
    pub fn num_accepted_draft_tokens(&self) -> u64 {
        self.acceptance_histogram()
            .iter()
            .enumerate()
            .fold(0u64, |s, (a, &c)| {
                s.saturating_add((a as u64).saturating_mul(c))
            })
    }

    /// Steps where the drafting policy proposed nothing.
    pub fn num_undrafted_steps(&self) -> u64 {
        self.undrafted
    }

    /// Observations rejected as invalid (`a > k` or `k > K`).
    pub fn num_rejected_observations(&self) -> u64 {
        self.rejected
    }

    /// Steps by accepted count `j` over all draft lengths: dense, `K + 1`
    /// long, entry `j` the sum over `k` of `H[k][j]`.
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// let mut h = AcceptanceHistogram::new(3)?;
    /// h.observe(1, 1)?;
    /// h.observe(3, 1)?;
    /// h.observe(3, 0)?;
    /// assert_eq!(h.acceptance_histogram(), vec![1, 2, 0, 0]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acceptance_histogram(&self) -> Vec<u64> {
        let mut out = vec![0u64; self.max_draft_len + 1];
        for k in 0..=self.max_draft_len {
            let row = &self.counts[row_start(k)..row_start(k + 1)];
            for (slot, &c) in out.iter_mut().zip(row) {
                *slot = slot.saturating_add(c);
            }
        }
        out
    }

    /// Entry `i` (`0..K`): steps that accepted more than `i` tokens, i.e.
    /// whose draft token at position `i` was accepted.
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// let mut h = AcceptanceHistogram::new(3)?;
    /// h.observe(3, 2)?;
    /// h.observe(1, 1)?;
    /// assert_eq!(h.num_accepted_tokens_per_pos(), vec![2, 1, 0]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn num_accepted_tokens_per_pos(&self) -> Vec<u64> {
        suffix_sums_after(&self.acceptance_histogram())
    }

    /// Entry `i` (`0..K`): steps whose draft reached position `i`, i.e. that
    /// drafted more than `i` tokens.
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// let mut h = AcceptanceHistogram::new(3)?;
    /// h.observe(3, 0)?;
    /// h.observe(1, 1)?;
    /// assert_eq!(h.num_draft_tokens_per_pos(), vec![2, 1, 1]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn num_draft_tokens_per_pos(&self) -> Vec<u64> {
        let rows: Vec<u64> = (0..=self.max_draft_len)
            .map(|k| self.row_steps(k))
            .collect();
        suffix_sums_after(&rows)
    }

    /// `1.0 + accepted / steps` in `f64`, the division first (the bonus
    /// token included, as vLLM computes it); `1.0` when no step was recorded.
    pub fn mean_acceptance_length(&self) -> f64 {
        let steps = self.num_spec_steps();
        if steps == 0 {
            1.0
        } else {
            1.0 + (self.num_accepted_draft_tokens() as f64 / steps as f64)
        }
    }

    /// `accepted / drafted` draft tokens, in `[0, 1]`; `0.0` when nothing was
    /// drafted.
    pub fn draft_acceptance_rate(&self) -> f64 {
        let drafted = self.num_draft_tokens();
        if drafted == 0 {
            0.0
        } else {
            self.num_accepted_draft_tokens() as f64 / drafted as f64
        }
    }

    /// Share of the steps of row `drafted` that accepted every draft:
    /// `H[k][k] / sum_a H[k][a]`; `None` for an unobserved or out-of-range
    /// draft length.
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// let mut h = AcceptanceHistogram::new(2)?;
    /// h.observe(2, 2)?;
    /// h.observe(2, 0)?;
    /// assert_eq!(h.full_acceptance_rate(2), Some(0.5));
    /// assert_eq!(h.full_acceptance_rate(1), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn full_acceptance_rate(&self, drafted: usize) -> Option<f64> {
        let row = self.row(drafted)?;
        let steps = self.row_steps(drafted);
        (steps != 0).then(|| row[drafted] as f64 / steps as f64)
    }

    /// Per-position acceptance as vLLM's log line defines it: entry `i` is
    /// `num_accepted_tokens_per_pos[i] / num_spec_steps` (all steps, drafted
    /// at `i` or not); all zero when no step was recorded.
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// let mut h = AcceptanceHistogram::new(2)?;
    /// h.observe(1, 1)?;
    /// h.observe(2, 2)?;
    /// assert_eq!(h.acceptance_rate_per_pos(), vec![1.0, 0.5]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acceptance_rate_per_pos(&self) -> Vec<f64> {
        let steps = self.num_spec_steps();
        self.num_accepted_tokens_per_pos()
            .into_iter()
            .map(|c| {
                if steps == 0 {
                    0.0
                } else {
                    c as f64 / steps as f64
                }
            })
            .collect()
    }

    /// Acceptance at each position among the steps that drafted it: entry
    /// `i` is `num_accepted_tokens_per_pos[i] / num_draft_tokens_per_pos[i]`,
    /// `None` where no draft reached position `i`.
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// let mut h = AcceptanceHistogram::new(3)?;
    /// h.observe(1, 1)?;
    /// h.observe(2, 2)?;
    /// assert_eq!(h.conditional_acceptance_rate_per_pos(), vec![Some(1.0), Some(1.0), None]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn conditional_acceptance_rate_per_pos(&self) -> Vec<Option<f64>> {
        self.num_accepted_tokens_per_pos()
            .into_iter()
            .zip(self.num_draft_tokens_per_pos())
            .map(|(acc, drafted)| (drafted != 0).then(|| acc as f64 / drafted as f64))
            .collect()
    }

    /// Adds `other`'s counts to these (for example the reports of several
    /// replicas). On error nothing is changed, so a merged histogram always
    /// has a report that reads back. The proposal histogram is merged too;
    /// a histogram without one counts as all zero there, and the sum has
    /// one if either side has.
    ///
    /// # Errors
    ///
    /// [`MergeError::MaxDraftLenMismatch`] when the two `K` differ;
    /// [`MergeError::Overflow`] when a counter would pass `u64::MAX`;
    /// [`MergeError::TotalOverflow`] when a total derived from the merged
    /// buckets would.
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// let mut a = AcceptanceHistogram::new(2)?;
    /// let mut b = AcceptanceHistogram::new(2)?;
    /// a.observe(2, 1)?;
    /// b.observe(2, 1)?;
    /// b.observe_undrafted();
    /// a.merge(&b)?;
    /// assert_eq!((a.count(2, 1), a.num_undrafted_steps()), (2, 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn merge(&mut self, other: &AcceptanceHistogram) -> Result<(), MergeError> {
        self.check_same_max(other)?;
        // Check everything first so an error leaves `self` untouched: every
        // counter of the sum, then every total derived from its buckets.
        self.zip_counters(other, |counter, mine, theirs| {
            mine.checked_add(theirs)
                .map(drop)
                .ok_or(MergeError::Overflow { counter })
        })?;
        // Each sum fits: checked counter by counter above.
        fn sums<'a>(mine: &'a [u64], theirs: &'a [u64]) -> impl Iterator<Item = u64> + 'a {
            mine.iter().zip(theirs).map(|(&m, &t)| m + t)
        }
        check_derived_totals(
            self.max_draft_len,
            sums(&self.counts, &other.counts),
            sums(&self.scheduled, &other.scheduled),
        )
        .map_err(|field| MergeError::TotalOverflow { field })?;
        for (mine, &theirs) in self.counts.iter_mut().zip(other.counts.iter()) {
            *mine += theirs;
        }
        for (mine, &theirs) in self.scheduled.iter_mut().zip(other.scheduled.iter()) {
            *mine += theirs;
        }
        self.undrafted += other.undrafted;
        self.rejected += other.rejected;
        if let Some(theirs) = &other.proposals {
            // A histogram without the proposal part counts as all zero
            // there: the sum keeps it if either side has it.
            let max_draft_len = self.max_draft_len;
            let mine = self
                .proposals
                .get_or_insert_with(|| Proposals::zero(max_draft_len));
            for (m, &t) in mine.counts.iter_mut().zip(theirs.counts.iter()) {
                *m += t;
            }
            mine.aborted += theirs.aborted;
        }
        Ok(())
    }

    /// The observations recorded after `earlier`, an earlier snapshot of the
    /// same source: counter by counter, `self - earlier`. Nothing is reset;
    /// this is how a metrics thread gets interval figures for a log line.
    /// The delta has a proposal histogram when `self` has one (`earlier`
    /// without one counts as all zero there).
    ///
    /// # Errors
    ///
    /// [`MergeError::MaxDraftLenMismatch`] when the two `K` differ;
    /// [`MergeError::NotEarlier`] when `earlier` holds more in some counter.
    ///
    /// ```
    /// use specdec_metrics::AcceptanceHistogram;
    /// let mut h = AcceptanceHistogram::new(2)?;
    /// h.observe(1, 1)?;
    /// let earlier = h.clone();
    /// h.observe(2, 0)?;
    /// let interval = h.delta_since(&earlier)?;
    /// assert_eq!((interval.num_spec_steps(), interval.count(2, 0)), (1, 1));
    /// assert!(earlier.delta_since(&h).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn delta_since(
        &self,
        earlier: &AcceptanceHistogram,
    ) -> Result<AcceptanceHistogram, MergeError> {
        self.check_same_max(earlier)?;
        self.zip_counters(earlier, |counter, later, before| {
            if before > later {
                Err(MergeError::NotEarlier {
                    counter,
                    earlier: before,
                    later,
                })
            } else {
                Ok(())
            }
        })?;
        let counts = self
            .counts
            .iter()
            .zip(earlier.counts.iter())
            .map(|(&later, &before)| later - before)
            .collect();
        let scheduled = self
            .scheduled
            .iter()
            .zip(earlier.scheduled.iter())
            .map(|(&later, &before)| later - before)
            .collect();
        let mut delta = Self::from_parts(
            self.max_draft_len,
            counts,
            self.undrafted - earlier.undrafted,
            self.rejected - earlier.rejected,
            scheduled,
        );
        if let Some(later) = &self.proposals {
            // Checked above: no proposal counter of `earlier` (all zero
            // when it has none) exceeds ours.
            let counts = match &earlier.proposals {
                Some(before) => later
                    .counts
                    .iter()
                    .zip(before.counts.iter())
                    .map(|(&l, &b)| l - b)
                    .collect(),
                None => later.counts.clone(),
            };
            let aborted = later.aborted - earlier.num_aborted_proposals();
            delta.set_proposals(counts, aborted);
        }
        Ok(delta)
    }

    fn check_same_max(&self, other: &AcceptanceHistogram) -> Result<(), MergeError> {
        if self.max_draft_len == other.max_draft_len {
            Ok(())
        } else {
            Err(MergeError::MaxDraftLenMismatch {
                left: self.max_draft_len,
                right: other.max_draft_len,
            })
        }
    }

    /// Calls `check(counter, self's value, other's value)` for every counter
    /// of two histograms of the same `K`, stopping at the first error.
    fn zip_counters(
        &self,
        other: &AcceptanceHistogram,
        mut check: impl FnMut(HistogramCounter, u64, u64) -> Result<(), MergeError>,
    ) -> Result<(), MergeError> {
        for k in 0..=self.max_draft_len {
            for a in 0..=k {
                let i = row_start(k) + a;
                check(
                    HistogramCounter::Bucket {
                        drafted: k,
                        accepted: a,
                    },
                    self.counts[i],
                    other.counts[i],
                )?;
            }
        }
        check(
            HistogramCounter::UndraftedSteps,
            self.undrafted,
            other.undrafted,
        )?;
        check(
            HistogramCounter::RejectedObservations,
            self.rejected,
            other.rejected,
        )?;
        for (budget, (&mine, &theirs)) in self.scheduled.iter().zip(&*other.scheduled).enumerate() {
            check(HistogramCounter::ScheduledSteps { budget }, mine, theirs)?;
        }
        if self.proposals.is_some() || other.proposals.is_some() {
            // Either side may lack the proposal part: all zero there.
            for proposal_len in 1..=self.max_draft_len {
                for matched in 0..=proposal_len {
                    check(
                        HistogramCounter::ProposalBucket {
                            proposal_len,
                            matched,
                        },
                        self.proposal_count(proposal_len, matched),
                        other.proposal_count(proposal_len, matched),
                    )?;
                }
            }
            check(
                HistogramCounter::AbortedProposals,
                self.num_aborted_proposals(),
                other.num_aborted_proposals(),
            )?;
        }
        Ok(())
    }
}

impl AcceptanceHistogram {
    /// Whether every figure derived from this histogram fits in `u64`; else
    /// the name of a total that does not. A histogram that fails this
    /// has no faithful report: its derived getters saturate.
    pub(crate) fn check_derived_totals(&self) -> Result<(), &'static str> {
        check_derived_totals(
            self.max_draft_len,
            self.counts.iter().copied(),
            self.scheduled.iter().copied(),
        )
    }
}

/// The one check that every figure derived from the bucket `counts` (in
/// layout order, `bucket_count(max_draft_len)` of them) and from the
/// `scheduled` budget counters fits in `u64`: the report reader, the report
/// writer and `merge` all use it. On failure, the name of the first total
/// that does not fit.
///
/// Two totals bound all the figures of the buckets: `num_spec_steps` (the
/// sum of the buckets) bounds every entry of `acceptance_histogram`, every
/// row and both per-position lists; `num_draft_tokens` (the sum of
/// `k * H[k][a]`) bounds `num_accepted_draft_tokens`, since `a <= k`. The
/// scheduled budgets have one total, `num_scheduled_steps`. Where all three
/// fit, no derived figure saturates.
fn check_derived_totals(
    max_draft_len: usize,
    counts: impl IntoIterator<Item = u64>,
    scheduled: impl IntoIterator<Item = u64>,
) -> Result<(), &'static str> {
    let draft_lengths = (0..=max_draft_len).flat_map(|k| core::iter::repeat_n(k as u64, k + 1));
    let mut steps = 0u64;
    let mut draft_tokens = 0u64;
    for (k, c) in draft_lengths.zip(counts) {
        steps = steps.checked_add(c).ok_or("num_spec_steps")?;
        draft_tokens = c
            .checked_mul(k)
            .and_then(|tokens| draft_tokens.checked_add(tokens))
            .ok_or("num_draft_tokens")?;
    }
    scheduled
        .into_iter()
        .try_fold(0u64, u64::checked_add)
        .ok_or("num_scheduled_steps")?;
    Ok(())
}

/// `out[i] = sum of v[j] for j > i`, for `i` in `0..v.len() - 1`.
fn suffix_sums_after(v: &[u64]) -> Vec<u64> {
    let mut out = vec![0u64; v.len().saturating_sub(1)];
    let mut acc = 0u64;
    for i in (0..out.len()).rev() {
        acc = acc.saturating_add(v[i + 1]);
        out[i] = acc;
    }
    out
}

impl fmt::Debug for AcceptanceHistogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Rows<'a>(&'a AcceptanceHistogram);
        struct ProposalRows<'a>(&'a AcceptanceHistogram);
        impl fmt::Debug for ProposalRows<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                struct Observed<'a>(&'a AcceptanceHistogram);
                impl fmt::Debug for Observed<'_> {
                    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.debug_map()
                            .entries(self.0.observed_proposal_rows())
                            .finish()
                    }
                }
                f.debug_struct("Proposals")
                    .field("rows", &Observed(self.0))
                    .field("aborted", &self.0.num_aborted_proposals())
                    .finish()
            }
        }
        impl fmt::Debug for Rows<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_map().entries(self.0.observed_rows()).finish()
            }
        }
        let mut s = f.debug_struct("AcceptanceHistogram");
        s.field("max_draft_len", &self.max_draft_len)
            .field("rows", &Rows(self))
            .field("undrafted", &self.undrafted)
            .field("rejected", &self.rejected)
            .field("scheduled", &self.scheduled);
        // Shown only when recorded: a histogram without it reads as before.
        if self.proposals.is_some() {
            s.field("proposals", &ProposalRows(self));
        }
        s.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A K = 2 histogram from raw buckets, which only the crate can build
    /// (in principle a snapshot summing many shards could get there too).
    fn raw_k2(bucket: (usize, usize), count: u64, plus_one_at_0_0: bool) -> AcceptanceHistogram {
        let mut counts = vec![0u64; bucket_count(2)].into_boxed_slice();
        counts[row_start(bucket.0) + bucket.1] = count;
        if plus_one_at_0_0 {
            counts[0] += 1;
        }
        AcceptanceHistogram::from_parts(2, counts, 0, 0, Box::new([0; 3]))
    }

    #[test]
    fn derived_totals_that_do_not_fit_are_named() {
        // 2^63 steps (2, 0): 2^63 steps fit, 2^64 draft tokens do not.
        assert_eq!(
            raw_k2((2, 0), 1 << 63, false).check_derived_totals(),
            Err("num_draft_tokens")
        );
        // (2^63 - 1) * 2 = 2^64 - 2 fits.
        assert_eq!(
            raw_k2((2, 0), (1 << 63) - 1, false).check_derived_totals(),
            Ok(())
        );
        // u64::MAX steps (2, 2) overflow the draft tokens at once (2 * MAX).
        assert_eq!(
            raw_k2((2, 2), u64::MAX, false).check_derived_totals(),
            Err("num_draft_tokens")
        );
        // u64::MAX steps (1, 1) plus one (0, 0): MAX + 1 steps.
        assert_eq!(
            raw_k2((1, 1), u64::MAX, true).check_derived_totals(),
            Err("num_spec_steps")
        );
        assert_eq!(
            raw_k2((1, 1), u64::MAX - 1, true).check_derived_totals(),
            Ok(())
        );
    }

    #[test]
    fn a_histogram_whose_totals_do_not_fit_is_never_written() {
        for h in [
            raw_k2((2, 0), 1 << 63, false),
            raw_k2((1, 1), u64::MAX, true),
        ] {
            let err = serde_json::to_string(&h).unwrap_err();
            assert!(err.to_string().contains("exceeds u64::MAX"), "{err}");
        }
        // Just below the limit it is written, and reads back.
        let h = raw_k2((2, 0), (1 << 63) - 1, false);
        let back: AcceptanceHistogram =
            serde_json::from_str(&serde_json::to_string(&h).unwrap()).unwrap();
        assert_eq!(back, h);
    }
}
