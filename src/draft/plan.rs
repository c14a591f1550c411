//! [`DraftPlan`]: what an engine drafts at each step, and [`SharedPlan`]:
//! a plan published by the metrics thread and read by every engine thread
//! with one relaxed atomic load.

use crate::record::MAX_MAX_DRAFT_LEN;
use crate::record::sync::{AtomicU64, Ordering};

/// One engine step in this many drafts the exploration length.
pub const EXPLORATION_PERIOD: u64 = 32;

/// What an engine drafts at each step: the current draft length, and the
/// exploration length on one step in [`EXPLORATION_PERIOD`]. A small `Copy`
/// value, so a metrics thread can hand it to engine threads (see
/// [`to_bits`](Self::to_bits)).
///
/// ```
/// use specdec_metrics::DraftPlan;
/// let plan = DraftPlan::new(3, 8).unwrap();
/// assert_eq!(plan.draft_len_for(0), 3);
/// assert_eq!(plan.draft_len_for(31), 7); // exploration: min(2 * 3 + 1, 8)
/// assert_eq!(DraftPlan::from_bits(plan.to_bits()), Some(plan));
/// assert_eq!(DraftPlan::new(9, 8), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DraftPlan {
    draft_len: u8,
    explore_len: u8,
}

impl DraftPlan {
    /// The plan that drafts `draft_len` and explores `min(2 draft_len + 1,
    /// max_draft_len)`.
    ///
    /// `None` when `max_draft_len` is outside `1..=64` or `draft_len` above
    /// it.
    pub fn new(draft_len: usize, max_draft_len: usize) -> Option<Self> {
        ((1..=MAX_MAX_DRAFT_LEN).contains(&max_draft_len) && draft_len <= max_draft_len)
            .then(|| Self::new_unchecked(draft_len, max_draft_len))
    }

    pub(crate) fn new_unchecked(draft_len: usize, max_draft_len: usize) -> Self {
        Self::with_explore_len_unchecked(draft_len, (2 * draft_len + 1).min(max_draft_len))
    }

    /// The plan that drafts `draft_len` and explores `explore_len`.
    ///
    /// `None` when `max_draft_len` is outside `1..=64`, `draft_len` above
    /// it, or `explore_len` outside `max(draft_len, 1)..=max_draft_len`
    /// (an exploration step drafts at least one token and at least the
    /// ordinary draft length).
    ///
    /// ```
    /// use specdec_metrics::DraftPlan;
    /// let plan = DraftPlan::with_explore_len(2, 8, 8).unwrap();
    /// assert_eq!((plan.draft_len_for(0), plan.draft_len_for(31)), (2, 8));
    /// assert_eq!(DraftPlan::with_explore_len(0, 0, 8), None);
    /// assert_eq!(DraftPlan::with_explore_len(3, 2, 8), None);
    /// assert_eq!(DraftPlan::with_explore_len(3, 9, 8), None);
    /// ```
    pub fn with_explore_len(
        draft_len: usize,
        explore_len: usize,
        max_draft_len: usize,
    ) -> Option<Self> {
        let valid = (1..=MAX_MAX_DRAFT_LEN).contains(&max_draft_len)
            && draft_len <= max_draft_len
            && (draft_len.max(1)..=max_draft_len).contains(&explore_len);
        valid.then(|| Self::with_explore_len_unchecked(draft_len, explore_len))
    }

    pub(crate) fn with_explore_len_unchecked(draft_len: usize, explore_len: usize) -> Self {
        // Both at most 64, so `u8` holds them.
        Self {
            draft_len: draft_len as u8,
            explore_len: explore_len as u8,
        }
    }

    /// The draft length on ordinary steps.
    #[inline]
    pub fn draft_len(self) -> usize {
        usize::from(self.draft_len)
    }

    /// The draft length on exploration steps.
    #[inline]
    pub fn explore_len(self) -> usize {
        usize::from(self.explore_len)
    }

    /// The draft length for engine step `step`: [`explore_len`] when `step %
    /// 32 == 31`, else [`draft_len`]. No allocation, no lock, no branch on
    /// shared state.
    ///
    /// [`explore_len`]: Self::explore_len
    /// [`draft_len`]: Self::draft_len
    #[inline]
    pub fn draft_len_for(self, step: u64) -> usize {
        if step % EXPLORATION_PERIOD == EXPLORATION_PERIOD - 1 {
            self.explore_len()
        } else {
            self.draft_len()
        }
    }

    /// The plan packed in one word (for an `AtomicU64`): never 0, so 0 can
    /// mean "no plan yet".
    #[inline]
    pub fn to_bits(self) -> u64 {
        1 << 16 | u64::from(self.explore_len) << 8 | u64::from(self.draft_len)
    }

    /// The plan packed by [`to_bits`](Self::to_bits); `None` for any word
    /// that no plan packs to: a plan of draft length `d` explores a length
    /// `e` in `max(d, 1)..=64`.
    ///
    /// ```
    /// use specdec_metrics::DraftPlan;
    /// for (d, k) in [(0, 1), (0, 8), (3, 3), (3, 8), (64, 64)] {
    ///     let plan = DraftPlan::new(d, k).unwrap();
    ///     assert_eq!(DraftPlan::from_bits(plan.to_bits()), Some(plan));
    /// }
    /// assert_eq!(DraftPlan::from_bits(0), None);
    /// assert_eq!(DraftPlan::from_bits(0x1_0000), None); // explores 0: no K gives that
    /// assert_eq!(DraftPlan::from_bits(0x1_0102), None); // explores 1 < 2
    /// assert_eq!(DraftPlan::from_bits(0x3_0302), None); // a stray high bit
    /// assert_eq!(DraftPlan::from_bits(0x1_4141), None); // explores 65 > 64
    /// ```
    #[inline]
    pub fn from_bits(bits: u64) -> Option<Self> {
        let (d, e) = (bits as u8, (bits >> 8) as u8);
        let valid = bits >> 16 == 1 && usize::from(e) <= MAX_MAX_DRAFT_LEN && e >= d.max(1);
        valid.then_some(Self {
            draft_len: d,
            explore_len: e,
        })
    }
}

/// A [`DraftPlan`] published by one thread (the metrics thread) and read by
/// every engine thread at each step, in one atomic word: no lock, no
/// allocation, one load per read.
///
/// A plan is two lengths (the draft and the exploration length); packed
/// together by [`DraftPlan::to_bits`], a reader always gets both from the
/// same [`publish`](Self::publish), never the draft length of one plan with
/// the exploration length of another. Share it with an `Arc` (or a
/// `static`).
///
/// ```
/// use std::sync::Arc;
/// use specdec_metrics::{DraftController, SharedPlan, StepCost};
///
/// let mut controller = DraftController::new(8, StepCost::linear(1.0, 0.1)?)?;
/// let plan = Arc::new(SharedPlan::new(controller.plan()));
///
/// // An engine thread, at every step:
/// let engine_plan = Arc::clone(&plan);
/// let k = std::thread::spawn(move || engine_plan.draft_len_for(0)).join().unwrap();
/// assert_eq!(k, controller.draft_len());
///
/// // The metrics thread, after every update:
/// # let window = specdec_metrics::AcceptanceHistogram::new(8)?;
/// controller.update(&window);
/// plan.publish(controller.plan());
/// assert_eq!(plan.load(), controller.plan());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct SharedPlan {
    bits: AtomicU64,
}

impl SharedPlan {
    /// A cell holding `plan`.
    pub fn new(plan: DraftPlan) -> Self {
        Self {
            bits: AtomicU64::new(plan.to_bits()),
        }
    }

    /// Replaces the plan; readers see the new one from their next load on.
    #[inline]
    pub fn publish(&self, plan: DraftPlan) {
        // Relaxed: the plan is the whole message. Nothing else is published
        // with it (a reader needs no other write to be visible when it sees
        // this word), and both lengths travel in this one word, so no
        // ordering is needed for a reader to see them together. Coherence
        // alone guarantees that a reader never sees an older plan after a
        // newer one. (The loom model `shared_plan_is_never_mixed` checks both.)
        self.bits.store(plan.to_bits(), Ordering::Relaxed);
    }

    /// The plan last published (or an earlier one, for a reader that has
    /// not yet seen the latest store).
    #[inline]
    pub fn load(&self) -> DraftPlan {
        // Relaxed: see `publish`.
        let bits = self.bits.load(Ordering::Relaxed);
        // Every word stored came from `DraftPlan::to_bits`, so unpacking
        // needs no check (and costs no branch).
        DraftPlan {
            draft_len: bits as u8,
            explore_len: (bits >> 8) as u8,
        }
    }

    /// The draft length for engine step `step` under the current plan (see
    /// [`DraftPlan::draft_len_for`]): one atomic load.
    #[inline]
    pub fn draft_len_for(&self, step: u64) -> usize {
        self.load().draft_len_for(step)
    }
}

impl crate::report::DraftLenGauge for SharedPlan {
    /// The published plan's draft length, with one relaxed load (as
    /// [`load`](Self::load)).
    fn draft_len(&self) -> usize {
        self.load().draft_len()
    }
}
