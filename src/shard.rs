//! Fixed-size blocks of atomic counters, and the shard: one block owned by
//! at most one [`Worker`](crate::Worker) at a time.
//!
//! # Layout
//!
//! A [`CounterBlock`] holds `bucket_count(K) + 2` counters: the triangle of
//! buckets, then `num_undrafted_steps`, then `num_rejected_observations`.
//! The block is one flat `Arc<[AtomicU64]>` with 16 spare counters (128
//! bytes) before and after the live ones. Whatever the allocation's
//! alignment, no other data lies within 128 bytes of a live counter, so no
//! cache line, nor the 128-byte line pairs that x86-64 and aarch64
//! prefetchers fetch together, is shared with another block or anything else
//! on the heap: two workers never contend. (This replaces wrapping lines of
//! counters in [`crossbeam_utils::CachePadded`], which keeps the same
//! isolation but costs a divide-and-modulo split of every index on the hot
//! path; `CachePadded` still pads the shard's `claimed` flag.)
//!
//! # Invariants
//!
//! - A shard's counters are written only by the worker that holds its
//!   `claimed` flag ([`Shard::try_claim`] succeeded and
//!   [`Shard::release`] has not run yet). Counters only grow.
//! - Stripes (the any-thread path) are written by any thread, always with a
//!   read-modify-write.
//! - Readers only load. Nothing ever resets or moves a count.
//!
//! # Happens-before edges
//!
//! - `release` (Release store of `claimed = false`) → `try_claim` (Acquire
//!   compare-exchange that reads it): the next owner's relaxed load of a
//!   counter sees at least the last value the previous owner stored, so its
//!   load-plus-one-store continues from there and no count is lost.
//! - A counter's relaxed store → a reader's relaxed load: no edge needed.
//!   The reader needs only atomicity (no torn value) and coherence (a later
//!   load of the same counter never returns an older value), which every
//!   atomic access has.

use crossbeam_utils::CachePadded;

use crate::error::ObserveError;
use crate::layout::{bucket_count, checked_bucket_index};
use crate::sync::{Arc, AtomicBool, AtomicU64, Ordering};

/// Spare counters at each end of a block: 16 × 8 bytes = 128 bytes, the
/// span of a prefetched pair of 64-byte cache lines.
const PAD: usize = 16;

/// `len` atomic counters, isolated from other memory by `PAD` spare
/// counters at each end.
///
/// Cloning shares the counters (an `Arc`): a [`Worker`] holds its shard's
/// block by value, so `observe` reaches a counter through one pointer, with
/// the bounds held inline.
///
/// [`Worker`]: crate::Worker
#[derive(Clone)]
pub(crate) struct CounterBlock {
    /// `PAD` spare counters, the live ones, `PAD` spare counters.
    counters: Arc<[AtomicU64]>,
}

/// Which counter of a block each observation goes to, for one `K`:
/// computed once, copied into every `Worker` so the hot path does no
/// multiplication for the side counters.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slots {
    pub(crate) max_draft_len: usize,
    /// Index of the `num_undrafted_steps` counter.
    pub(crate) undrafted: usize,
    /// Index of the `num_rejected_observations` counter; the last one.
    pub(crate) rejected: usize,
}

impl Slots {
    pub(crate) const fn new(max_draft_len: usize) -> Self {
        Self {
            max_draft_len,
            undrafted: bucket_count(max_draft_len),
            rejected: bucket_count(max_draft_len) + 1,
        }
    }

    /// Counters in a block.
    pub(crate) const fn len(self) -> usize {
        self.rejected + 1
    }

    /// Records `(drafted, accepted)` with `increment`: on its bucket when
    /// valid, else on the rejected counter and returning the error. Either
    /// way exactly one counter is incremented; the error is built on a cold
    /// path.
    #[inline(always)]
    pub(crate) fn observe_with(
        self,
        drafted: usize,
        accepted: usize,
        increment: impl FnOnce(usize),
    ) -> Result<(), ObserveError> {
        let valid = checked_bucket_index(self.max_draft_len, drafted, accepted);
        increment(valid.unwrap_or(self.rejected));
        match valid {
            Some(_) => Ok(()),
            None => Err(ObserveError::new(self.max_draft_len, drafted, accepted)),
        }
    }
}

impl CounterBlock {
    /// A zeroed block of `slots.len()` counters.
    pub(crate) fn new(slots: Slots) -> Self {
        Self {
            counters: (0..PAD + slots.len() + PAD)
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }

    #[inline]
    fn counter(&self, index: usize) -> &AtomicU64 {
        &self.counters[PAD + index]
    }

    /// The live counters, without the padding.
    fn live(&self) -> &[AtomicU64] {
        &self.counters[PAD..self.counters.len() - PAD]
    }

    /// Adds one to counter `index`, for the block's only writer.
    ///
    /// A plain load and store, no read-modify-write: correct only while the
    /// caller is the one thread that writes this block (the claimed
    /// shard's worker).
    #[inline]
    pub(crate) fn increment_exclusive(&self, index: usize) {
        let counter = self.counter(index);
        // Relaxed load: we are the only writer, so this reads our own last
        // store (or, right after a claim, the previous owner's, made visible
        // by the Acquire in `Shard::try_claim`).
        let value = counter.load(Ordering::Relaxed);
        // Relaxed store: readers need atomicity and per-counter coherence
        // only; no other memory is published through a counter.
        counter.store(value.wrapping_add(1), Ordering::Relaxed);
    }

    /// Adds one to counter `index` from any thread.
    #[inline]
    pub(crate) fn increment_shared(&self, index: usize) {
        // Relaxed RMW: atomicity makes concurrent increments add up; nothing
        // else is ordered by a counter.
        self.counter(index).fetch_add(1, Ordering::Relaxed);
    }

    /// Adds every counter's current value to `totals` (saturating).
    pub(crate) fn add_to(&self, totals: &mut [u64]) {
        debug_assert_eq!(totals.len(), self.live().len());
        for (counter, total) in self.live().iter().zip(totals) {
            // Relaxed: see the module docs; coherence alone keeps successive
            // snapshots monotonic.
            *total = total.saturating_add(counter.load(Ordering::Relaxed));
        }
    }
}

/// One worker's counters and the flag saying whether a worker holds them.
pub(crate) struct Shard {
    claimed: CachePadded<AtomicBool>,
    counters: CounterBlock,
    /// Position in the recorder's shard list.
    index: usize,
}

impl Shard {
    /// A new shard, already claimed by the caller.
    pub(crate) fn new_claimed(slots: Slots, index: usize) -> Self {
        Self {
            claimed: CachePadded::new(AtomicBool::new(true)),
            counters: CounterBlock::new(slots),
            index,
        }
    }

    pub(crate) fn index(&self) -> usize {
        self.index
    }

    pub(crate) fn counters(&self) -> &CounterBlock {
        &self.counters
    }

    /// Takes the shard if it is free.
    pub(crate) fn try_claim(&self) -> bool {
        // Relaxed pre-check: skip shards that are plainly taken without a
        // locked instruction; the compare-exchange below decides.
        if self.claimed.load(Ordering::Relaxed) {
            return false;
        }
        // Acquire on success: pairs with the Release in `release`, so the
        // previous owner's counter stores happen-before ours. Relaxed on
        // failure: we touch nothing of the shard then.
        self.claimed
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Gives the shard back, counts and all, for the next worker.
    pub(crate) fn release(&self) {
        // Release: pairs with the Acquire in `try_claim`; every counter
        // store of this owner happens-before the next owner's first load.
        self.claimed.store(false, Ordering::Release);
    }
}
