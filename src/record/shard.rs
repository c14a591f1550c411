//! Counter blocks; the shard, one block owned by at most one
//! [`Worker`](crate::Worker) at a time; and [`Shards`], where every shard
//! lives and how a new worker finds a free one.
//!
//! # Layout
//!
//! A [`CounterBlock`] holds `bucket_count(K) + 2 + (K + 1)` counters: the
//! triangle of buckets, then `num_undrafted_steps`, then
//! `num_rejected_observations`, then the `K + 1` scheduled-budget counters
//! (`scheduled_steps_by_budget`, budget `0..=K`). Every observation, of
//! any kind, adds one to exactly one of them.
//! The block is one flat `Arc<[AtomicU64]>` with 16 spare counters (128
//! bytes) before and after the live ones. Whatever the allocation's
//! alignment, no other data lies within 128 bytes of a live counter, so no
//! cache line, nor the 128-byte line pairs that x86-64 and aarch64
//! prefetchers fetch together, is shared with another block or anything else
//! on the heap: two workers never contend. (This replaces wrapping lines of
//! counters in [`CachePadded`], which keeps the same isolation but costs a
//! divide-and-modulo split of every index on the hot path.)
//!
//! # Where shards live: a segmented list, append-only
//!
//! Shard `i` lives in segment `s = ⌊log2(i + 1)⌋`, at offset
//! `i + 1 - 2^s`; segment `s` has `2^s` slots. Each segment and each slot
//! is set once ([`SetOnce`], a `std::sync::OnceLock`) and never changes or
//! moves, so
//!
//! - a new shard costs the same whatever the number of shards: set one slot
//!   (and, once per doubling, allocate a segment of empty slots); nothing is
//!   copied;
//! - readers (`snapshot`, a claim) reach any shard without a lock, through
//!   two acquire loads;
//! - the slots never hold more than twice the shards there are, and shards
//!   themselves are created one at a time, so the memory bound of
//!   [`Recorder`](crate::Recorder) (shards never outnumber the peak of live
//!   workers) holds.
//!
//! Only shard creation takes a lock (the registry mutex): it allocates a
//! block of counters anyway. 32 segments hold `2^32 - 1` shards, the most
//! the free list can name.
//!
//! # Who may write a shard: a free list
//!
//! A shard is held by the worker that created it or took it from the free
//! list, until that worker releases it back onto the free list. The free
//! list is a Treiber stack of shard indices: one `AtomicU64` head holding
//! the top shard's index + 1 (0: empty) in its low half and a tag in its
//! high half, and in each free shard the index + 1 of the shard below it.
//! Taking or returning a shard is one compare-exchange on the head,
//! whatever the number of shards.
//!
//! The tag defeats ABA: between a claimer's read of the head (top `A`, `A`'s
//! next `B`) and its compare-exchange, others may take `A` and `B` and put
//! `A` back; the head names `A` again but `B` is held. Every successful
//! push and pop adds one to the tag, so the stale compare-exchange fails.
//! (It would succeed again only after exactly `2^32` operations in
//! between, while the claimer is stalled between two instructions.)
//! Shards are never freed, so reading a shard named by a stale head is
//! always memory-safe: there is nothing to reclaim, and no hazard pointers
//! or epochs are needed.
//!
//! # Invariants
//!
//! - A shard's counters are written only by the worker that holds it. A
//!   shard is on the free list or held, never both; counters only grow.
//! - Stripes (the any-thread path) are written by any thread, always with a
//!   read-modify-write.
//! - Readers only load. Nothing ever resets or moves a count.
//!
//! # Happens-before edges
//!
//! - Release (push, Release compare-exchange on the head) → claim (pop:
//!   the Acquire load of the head that reads that push or a later
//!   read-modify-write of its release sequence): the next owner's relaxed
//!   load of a counter sees at least the last value the previous owner
//!   stored, so its load-plus-one-store continues from there and no count
//!   is lost; and the claimer reads the link the pusher wrote.
//! - Publication of a shard (its slot set under the registry mutex, a
//!   Release inside `OnceLock`) → anyone who reaches it through the list
//!   (Acquire inside `OnceLock::get`): the shard is fully initialised
//!   first. Slots are set in index order, so a reader that walks the list
//!   and stops at the first empty slot still sees every shard whose
//!   creation happened-before the walk.
//! - A counter's relaxed store → a reader's relaxed load: no edge needed.
//!   The reader needs only atomicity (no torn value) and coherence (a load
//!   never returns a value older than one that happened-before it), which
//!   every atomic access has. So no bucket is ever smaller than in a
//!   snapshot that happened-before.

use crossbeam_utils::CachePadded;

use super::layout::{bucket_count, checked_bucket_index};
use super::proposal::{checked_proposal_index, proposal_bucket_count};
use super::sync::{Arc, AtomicU64, AtomicUsize, Mutex, Ordering, SetOnce};

/// The most stripes of the any-thread path (see `Recorder::new`): beyond
/// 16 the memory (16 × ~17 KiB at K = 64) buys little for a path meant to
/// be rare.
pub(crate) const MAX_STRIPES: usize = 16;
use super::error::ObserveError;

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

/// Which counter of a block each observation goes to, for one `K` and
/// number of states: computed once, copied into every `Worker` so the hot
/// path does no multiplication for the side counters.
///
/// A block holds one triangle of buckets per state (state `s` at `s *
/// triangle`), then the side counters. With one state the layout is a
/// single triangle, as the recording paths without a state use.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Slots {
    pub(crate) max_draft_len: usize,
    /// Request states with a triangle of their own (at least 1).
    pub(crate) states: usize,
    /// Buckets of one triangle: `bucket_count(K)`.
    pub(crate) triangle: usize,
    /// Index of the `num_undrafted_steps` counter.
    pub(crate) undrafted: usize,
    /// Index of the `num_rejected_observations` counter.
    pub(crate) rejected: usize,
    /// Index of the counter of scheduled budget 0; budget `b` is at
    /// `scheduled + b`, up to `K` (the last counter of the block unless
    /// proposals are recorded).
    pub(crate) scheduled: usize,
    /// Whether the block holds the proposal counters (opted in with
    /// `RecorderBuilder::record_proposals`); without them the block ends
    /// with the scheduled budgets, exactly as before they existed.
    pub(crate) records_proposals: bool,
    /// Index of the proposal bucket `(L = 1, m = 0)`, right after the
    /// scheduled budgets; the proposal triangle (`proposal.rs`) follows.
    /// Meaningful only when `records_proposals`.
    pub(crate) proposals: usize,
    /// Index of the `num_aborted_proposals` counter, after the proposal
    /// triangle: the last counter of a block that records proposals.
    pub(crate) aborted: usize,
}

impl Slots {
    #[cfg(test)]
    pub(crate) const fn new(max_draft_len: usize) -> Self {
        Self::with_states(max_draft_len, 1)
    }

    /// The slots of `states` triangles (`states >= 1`, checked by the
    /// caller).
    #[cfg(test)]
    pub(crate) const fn with_states(max_draft_len: usize, states: usize) -> Self {
        Self::with_options(max_draft_len, states, false)
    }

    /// The slots of `states` triangles, with the proposal counters when
    /// `records_proposals`.
    pub(crate) const fn with_options(
        max_draft_len: usize,
        states: usize,
        records_proposals: bool,
    ) -> Self {
        let triangle = bucket_count(max_draft_len);
        let buckets = states * triangle;
        let proposals = buckets + 2 + max_draft_len + 1;
        Self {
            max_draft_len,
            states,
            triangle,
            undrafted: buckets,
            rejected: buckets + 1,
            scheduled: buckets + 2,
            records_proposals,
            proposals,
            aborted: proposals + proposal_bucket_count(max_draft_len),
        }
    }

    /// Counters in a block.
    pub(crate) const fn len(self) -> usize {
        if self.records_proposals {
            self.aborted + 1
        } else {
            self.scheduled + self.max_draft_len + 1
        }
    }

    /// Records a resolved proposal outcome `(proposal_len, matched)` with
    /// `increment`: on its proposal bucket when the block records proposals
    /// and the pair is in the proposal triangle, else on the rejected
    /// counter and returning the error. Either way exactly one counter is
    /// incremented; the error is built on a cold path.
    #[inline(always)]
    pub(crate) fn observe_proposal_with(
        self,
        proposal_len: usize,
        matched: usize,
        increment: impl FnOnce(usize),
    ) -> Result<(), ObserveError> {
        let valid = checked_proposal_index(self.max_draft_len, proposal_len, matched)
            .filter(|_| self.records_proposals);
        increment(valid.map_or(self.rejected, |i| self.proposals + i));
        match valid {
            Some(_) => Ok(()),
            None => Err(ObserveError::proposal(
                self.records_proposals,
                self.max_draft_len,
                proposal_len,
                matched,
            )),
        }
    }

    /// Records `count` aborted proposal outcomes with `add(index, n)`: `n =
    /// count` on the aborted counter when the block records proposals,
    /// else `n = 1` on the rejected counter (one rejected call) and
    /// returning the error. Either way one counter changes.
    #[inline(always)]
    pub(crate) fn observe_aborted_with(
        self,
        count: u64,
        add: impl FnOnce(usize, u64),
    ) -> Result<(), ObserveError> {
        if self.records_proposals {
            add(self.aborted, count);
            Ok(())
        } else {
            add(self.rejected, 1);
            Err(ObserveError::ProposalsNotRecorded)
        }
    }

    /// Records a scheduler step of draft budget `budget` with `increment`:
    /// on its budget's counter when `budget <= K`, else on the rejected
    /// counter and returning the error. Either way exactly one counter is
    /// incremented (one bounds check, no row arithmetic); the error is
    /// built on a cold path.
    #[inline(always)]
    pub(crate) fn observe_scheduled_with(
        self,
        budget: usize,
        increment: impl FnOnce(usize),
    ) -> Result<(), ObserveError> {
        let valid = budget <= self.max_draft_len;
        increment(if valid {
            self.scheduled + budget
        } else {
            self.rejected
        });
        if valid {
            Ok(())
        } else {
            Err(ObserveError::budget(self.max_draft_len, budget))
        }
    }

    /// Records `(drafted, accepted)` of request state `state` with
    /// `increment`: on its bucket in that state's triangle when valid, else
    /// on the rejected counter and returning the error. Either way exactly
    /// one counter is incremented; the error is built on a cold path.
    #[inline(always)]
    pub(crate) fn observe_in_with(
        self,
        state: usize,
        drafted: usize,
        accepted: usize,
        increment: impl FnOnce(usize),
    ) -> Result<(), ObserveError> {
        let valid = checked_bucket_index(self.max_draft_len, drafted, accepted)
            .filter(|_| state < self.states);
        increment(valid.map_or(self.rejected, |i| state * self.triangle + i));
        match valid {
            Some(_) => Ok(()),
            None => Err(ObserveError::in_state(
                self.max_draft_len,
                self.states,
                state,
                drafted,
                accepted,
            )),
        }
    }

    /// Records `(drafted, accepted)` with `increment`: on its bucket (of
    /// state 0) when valid, else on the rejected counter and returning the
    /// error. Either way exactly one counter is incremented; the error is
    /// built on a cold path.
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

    /// Adds `n` to counter `index`, for the block's only writer: as
    /// [`increment_exclusive`](Self::increment_exclusive), by `n`.
    #[inline]
    pub(crate) fn add_exclusive(&self, index: usize, n: u64) {
        let counter = self.counter(index);
        // Relaxed load and store: as in `increment_exclusive` (we are the
        // only writer; readers need atomicity and coherence only).
        let value = counter.load(Ordering::Relaxed);
        counter.store(value.wrapping_add(n), Ordering::Relaxed);
    }

    /// The live counters, without the padding: what a snapshot sums.
    pub(crate) fn live(&self) -> &[AtomicU64] {
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
}

/// The any-thread counters: `count` blocks of `slots.len()` counters in one
/// flat array, `PAD` spare counters before, between and after them, so no
/// two stripes share a line.
///
/// A thread always uses stripe `hint & (count - 1)` for its
/// `thread_hint` (`sync.rs`): threads that started apart
/// get different stripes until there are more threads than stripes. Held by
/// value in the [`Recorder`](crate::Recorder) (one pointer, two numbers),
/// so `Recorder::observe` reaches a counter through one pointer, like
/// `Worker::observe`.
///
/// The last spare counter before each stripe is its *used* flag: 0 until a
/// thread first counts in the stripe, then 1. A snapshot reads only the
/// stripes whose flag is set, so unused stripes cost it one load each. The
/// flag lies in the stripe's own padding: it is written once, by the
/// stripe's own threads, and only read after that.
#[derive(Clone)]
pub(crate) struct Stripes {
    /// `PAD`, then per stripe its live counters and `PAD` spare ones.
    counters: Arc<[AtomicU64]>,
    /// `count - 1`, `count` a power of two.
    mask: usize,
    /// Live counters of a stripe plus the `PAD` after them.
    stride: usize,
}

impl Stripes {
    /// `count` zeroed stripes of `slots.len()` counters; `count` must be a
    /// power of two.
    pub(crate) fn new(slots: Slots, count: usize) -> Self {
        debug_assert!(count.is_power_of_two());
        let stride = slots.len() + PAD;
        debug_assert!(count <= MAX_STRIPES);
        Self {
            counters: (0..PAD + count * stride)
                .map(|_| AtomicU64::new(0))
                .collect(),
            mask: count - 1,
            stride,
        }
    }

    /// Number of stripes.
    pub(crate) fn count(&self) -> usize {
        self.mask + 1
    }

    /// Adds one to counter `index` of the calling thread's stripe.
    #[inline]
    pub(crate) fn increment(&self, hint: usize, index: usize) {
        let start = PAD + (hint & self.mask) * self.stride;
        let used = &self.counters[start - 1];
        // Relaxed load and store: the flag only has to be visible to every
        // snapshot that the increment below happens-before, and the store
        // is sequenced before that increment, so coherence gives it to
        // them; no other memory is published with it. Stored once per
        // stripe: later calls only load it.
        if used.load(Ordering::Relaxed) == 0 {
            used.store(1, Ordering::Relaxed);
        }
        let at = start + index;
        // Relaxed RMW: atomicity makes concurrent increments add up; nothing
        // else is ordered by a counter.
        self.counters[at].fetch_add(1, Ordering::Relaxed);
    }

    /// Adds `n` to counter `index` of the calling thread's stripe: as
    /// [`increment`](Self::increment), by `n`.
    #[inline]
    pub(crate) fn add(&self, hint: usize, index: usize, n: u64) {
        let start = PAD + (hint & self.mask) * self.stride;
        let used = &self.counters[start - 1];
        // Relaxed load and store: as in `increment`.
        if used.load(Ordering::Relaxed) == 0 {
            used.store(1, Ordering::Relaxed);
        }
        // Relaxed RMW: as in `increment`.
        self.counters[start + index].fetch_add(n, Ordering::Relaxed);
    }

    /// The live counters of every stripe that was used, for a snapshot to
    /// sum. A stripe whose flag reads unset holds no observation that
    /// happened-before this call (see `increment`), so skipping it keeps
    /// every guarantee of a snapshot: it is the sum of some set of
    /// observations, and a later snapshot reads the flag set if this one
    /// did.
    pub(crate) fn used(&self, len: usize) -> impl Iterator<Item = &[AtomicU64]> {
        (0..self.count()).filter_map(move |stripe| {
            let start = PAD + stripe * self.stride;
            // Relaxed: see `increment`.
            let used = self.counters[start - 1].load(Ordering::Relaxed) != 0;
            used.then(|| &self.counters[start..start + len])
        })
    }
}

/// One worker's counters, while a worker holds it; on the free list
/// otherwise.
pub(crate) struct Shard {
    counters: CounterBlock,
    /// Position in creation order; the shard's name on the free list.
    index: usize,
    /// While on the free list: index + 1 of the shard below it, 0 if none.
    next_free: AtomicU64,
}

impl Shard {
    fn new(slots: Slots, index: usize) -> Self {
        Self {
            counters: CounterBlock::new(slots),
            index,
            next_free: AtomicU64::new(0),
        }
    }

    pub(crate) fn index(&self) -> usize {
        self.index
    }

    pub(crate) fn counters(&self) -> &CounterBlock {
        &self.counters
    }
}

/// Segments in the list: segment `s` holds `2^s` shards.
const SEGMENTS: usize = 32;

/// Low half of the free list's head: the top shard's index + 1.
const TOP: u64 = 0xFFFF_FFFF;

/// One in the high half of the free list's head: the tag.
const TAG_ONE: u64 = 1 << 32;

type Segment = Box<[SetOnce<Arc<Shard>>]>;

/// Every shard of a recorder, in creation order, and the free list.
pub(crate) struct Shards {
    slots: Slots,
    segments: [SetOnce<Segment>; SEGMENTS],
    /// Shards created so far; written under `registry` only.
    len: AtomicUsize,
    /// Serialises shard creation (the one slow path).
    registry: Mutex<()>,
    /// The free list's head: tag in the high half, top shard's index + 1
    /// (0: empty) in the low half. Padded: every claim and release writes
    /// it, and it must not share a line with the recorder's read-mostly
    /// fields.
    free: CachePadded<AtomicU64>,
}

/// A look at the free list's top: the head word read, the top shard, and
/// the link below it read after that.
pub(crate) struct Top<'a> {
    head: u64,
    shard: &'a Arc<Shard>,
    next: u64,
}

/// Segment and offset of shard `index`.
fn locate(index: usize) -> (usize, usize) {
    let n = index + 1;
    let segment = n.ilog2() as usize;
    (segment, n - (1 << segment))
}

/// The head word after one more successful operation on top `top`.
fn next_head(head: u64, top: u64) -> u64 {
    (head & !TOP).wrapping_add(TAG_ONE) + top
}

impl Shards {
    /// No shard yet; shards of `slots.len()` counters.
    pub(crate) fn new(slots: Slots) -> Self {
        Self {
            slots,
            segments: core::array::from_fn(|_| SetOnce::new()),
            len: AtomicUsize::new(0),
            registry: Mutex::new(()),
            free: CachePadded::new(AtomicU64::new(0)),
        }
    }

    /// Shards created so far.
    pub(crate) fn len(&self) -> usize {
        // Relaxed: an informational reading (registry holders read it under
        // the mutex, which orders them).
        self.len.load(Ordering::Relaxed)
    }

    /// Shard `index`, if it has been published.
    fn get(&self, index: usize) -> Option<&Arc<Shard>> {
        let (segment, offset) = locate(index);
        // Acquire (inside both `get`s): pairs with the Release inside the
        // `set`s of `create_if`; the shard is initialised before we see it.
        self.segments.get(segment)?.get()?.get(offset)?.get()
    }

    /// Every published shard, in creation order. Stops at the first slot
    /// not yet set (see "Happens-before edges").
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Arc<Shard>> {
        // Acquire (inside `get`): as in `Shards::get`.
        self.segments
            .iter()
            .map_while(SetOnce::get)
            .flat_map(|segment| segment.iter().map_while(SetOnce::get))
    }

    /// Creates, publishes and returns a new shard, held by the caller, if
    /// `allowed(n)` says so for the `n` shards there are. Runs under the
    /// registry mutex, so no shard is created between the check and the
    /// creation.
    #[cold]
    #[inline(never)]
    pub(crate) fn create_if(&self, allowed: impl FnOnce(usize) -> bool) -> Option<Arc<Shard>> {
        let _registry = self.registry.lock();
        let index = self.len();
        if !allowed(index) {
            return None;
        }
        let (segment, offset) = locate(index);
        // Release (inside `get_or_init`, when it sets): pairs with the
        // Acquire in `get` and `iter`; the empty slots are initialised first.
        let segment = self.segments[segment]
            .get_or_init(|| (0..1usize << segment).map(|_| SetOnce::new()).collect());
        let shard = Arc::new(Shard::new(self.slots, index));
        // Release (inside `set`): pairs with the Acquire in `get` and `iter`.
        let published = segment[offset].set(Arc::clone(&shard)).is_ok();
        assert!(published, "shard {index} created twice");
        // Relaxed: only registry holders write `len`; the mutex orders them.
        self.len.store(index + 1, Ordering::Relaxed);
        Some(shard)
    }

    /// Takes a shard off the free list, if there is one.
    pub(crate) fn claim(&self) -> Option<Arc<Shard>> {
        loop {
            let top = self.peek()?;
            if self.try_pop(&top) {
                return Some(Arc::clone(top.shard));
            }
        }
    }

    /// The free list's top shard and its link, or `None` if the list is
    /// empty.
    pub(crate) fn peek(&self) -> Option<Top<'_>> {
        // Acquire: pairs with the Release compare-exchange of the `release`
        // that wrote this head (or heads the release sequence we read from):
        // its link below, and every counter store of the shard's previous
        // owner, happen-before what we do next.
        let head = self.free.load(Ordering::Acquire);
        let top = usize::try_from(head & TOP).ok()?.checked_sub(1)?;
        let shard = self.get(top)?;
        // Relaxed: ordered after the pusher's store by the Acquire above.
        let next = shard.next_free.load(Ordering::Relaxed);
        Some(Top { head, shard, next })
    }

    /// Pops `top` if the head is still the one `peek` read.
    pub(crate) fn try_pop(&self, top: &Top<'_>) -> bool {
        // Relaxed on success: the Acquire load in `peek` read this very head
        // word (the tag makes it unique), so the pusher's edge is already
        // ours. Relaxed on failure: we only retry. Strong, not weak: a
        // failure always means the head moved on.
        self.free
            .compare_exchange(
                top.head,
                next_head(top.head, top.next),
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .is_ok()
    }

    /// Puts `shard`, counts and all, on the free list for the next worker.
    pub(crate) fn release(&self, shard: &Shard) {
        // `index < 2^32 - 1`: 32 segments hold no more shards.
        let top = shard.index as u64 + 1;
        // Relaxed: a guess of the head; the compare-exchange checks it.
        let mut head = self.free.load(Ordering::Relaxed);
        loop {
            // Relaxed: published by the Release compare-exchange below.
            shard.next_free.store(head & TOP, Ordering::Relaxed);
            // Release on success: pairs with the Acquire load in `peek`; our
            // counter stores and the link above happen-before the next
            // owner's loads. Relaxed on failure: we only retry.
            match self.free.compare_exchange_weak(
                head,
                next_head(head, top),
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(current) => head = current,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    /// The exact layout at K = 8: without proposals the block is what it
    /// was before they existed (45 buckets, 2 side counters, 9 budgets);
    /// with them, the 44 proposal buckets and the aborted counter follow.
    #[test]
    fn proposal_counters_follow_the_budgets_only_when_recorded() {
        let off = Slots::with_options(8, 1, false);
        assert_eq!(off.len(), 45 + 2 + 9);
        let on = Slots::with_options(8, 1, true);
        assert_eq!((on.proposals, on.aborted, on.len()), (56, 100, 101));
        assert_eq!((on.undrafted, on.rejected, on.scheduled), (45, 46, 47));
        let states = Slots::with_options(2, 3, true);
        assert_eq!(
            (states.proposals, states.aborted, states.len()),
            (23, 28, 29)
        );
    }

    use super::super::sum::{Dest, sum_blocks};
    use super::*;

    /// What a snapshot reads of the stripes: the sum of the used ones.
    fn stripe_totals(stripes: &Stripes, len: usize) -> Vec<u64> {
        let mut totals = vec![0; len];
        sum_blocks(stripes.used(len), &mut [Dest::new(0, &mut totals)]);
        totals
    }

    fn shards(n: usize) -> (Shards, Vec<Arc<Shard>>) {
        let shards = Shards::new(Slots::new(1));
        let created = (0..n)
            .map(|_| shards.create_if(|_| true).unwrap())
            .collect();
        (shards, created)
    }

    #[test]
    fn shards_fill_segments_of_doubling_size() {
        let at = [
            (0, (0, 0)),
            (1, (1, 0)),
            (2, (1, 1)),
            (3, (2, 0)),
            (6, (2, 3)),
            (7, (3, 0)),
            (1_000, (9, 489)),
            ((1 << 32) - 2, (31, (1 << 31) - 1)),
        ];
        for (index, expected) in at {
            assert_eq!(locate(index), expected, "shard {index}");
        }
    }

    #[test]
    fn created_shards_are_listed_in_order() {
        let (shards, created) = shards(20);
        assert_eq!(shards.len(), 20);
        let listed: Vec<_> = shards.iter().map(|s| s.index()).collect();
        assert_eq!(listed, (0..20).collect::<Vec<_>>());
        for (i, shard) in created.iter().enumerate() {
            assert!(Arc::ptr_eq(shards.get(i).unwrap(), shard));
        }
        assert!(shards.get(20).is_none());
        assert!(shards.create_if(|n| n < 20).is_none());
        assert_eq!(shards.len(), 20);
    }

    #[test]
    fn the_free_list_hands_back_the_most_recently_released_first() {
        let (shards, created) = shards(3);
        assert!(shards.claim().is_none());
        for shard in &created {
            shards.release(shard);
        }
        let order: Vec<_> = (0..3).map(|_| shards.claim().unwrap().index()).collect();
        assert_eq!(order, [2, 1, 0]);
        assert!(shards.claim().is_none());
    }

    #[test]
    fn each_hint_below_the_stripe_count_gets_a_stripe_of_its_own() {
        let slots = Slots::new(2);
        let stripes = Stripes::new(slots, 4);
        assert_eq!(stripes.count(), 4);
        // Hint h adds h % 4 + 1 to counter h % 4 + 1: stripe s (from hints s
        // and s + 4) ends with 2 (s + 1) in counter s + 1, nothing else.
        for hint in 0..8 {
            for _ in 0..=hint % 4 {
                stripes.increment(hint, hint % 4 + 1);
            }
        }
        for stripe in 0..4 {
            let start = PAD + stripe * stripes.stride;
            let live: Vec<u64> = stripes.counters[start..start + slots.len()]
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect();
            let mut expected = vec![0; slots.len()];
            expected[stripe + 1] = 2 * (stripe as u64 + 1);
            assert_eq!(live, expected, "stripe {stripe}");
        }
        // The padding is untouched but for each used stripe's flag, the
        // spare counter right before it.
        let flags: Vec<usize> = (0..4).map(|s| PAD + s * stripes.stride - 1).collect();
        for (i, c) in stripes.counters.iter().enumerate() {
            let padding = i < PAD || (i - PAD) % stripes.stride >= slots.len();
            let expected = u64::from(flags.contains(&i));
            if padding {
                assert_eq!(c.load(Ordering::Relaxed), expected, "spare counter {i}");
            }
        }
        let totals = stripe_totals(&stripes, slots.len());
        assert_eq!(totals, [0, 2, 4, 6, 8, 0, 0, 0, 0, 0, 0]);
    }

    /// A snapshot reads only the stripes that were used: a stripe whose
    /// flag is unset is skipped, whatever its counters hold.
    #[test]
    fn unused_stripes_are_not_read() {
        let slots = Slots::new(1);
        let stripes = Stripes::new(slots, 4);
        stripes.increment(1, 0);
        // Stripe 2 was never used; a value planted in it is not read.
        let start = PAD + 2 * stripes.stride;
        stripes.counters[start].store(7, Ordering::Relaxed);
        let totals = stripe_totals(&stripes, slots.len());
        assert_eq!(totals[0], 1);
        // Once its flag is set (its first increment), it is read.
        stripes.increment(2, 1);
        let totals = stripe_totals(&stripes, slots.len());
        assert_eq!((totals[0], totals[1]), (8, 1));
    }

    /// The ABA case: a claimer reads top `a` with `b` below it; meanwhile
    /// others take `a` and `b` and give `a` back. The head names `a` again,
    /// but the stale pop must fail, or `b` (held) would be handed out twice.
    #[test]
    fn a_stale_pop_fails_after_the_top_was_taken_and_given_back() {
        let (shards, created) = shards(2);
        let (a, b) = (&created[0], &created[1]);
        shards.release(b);
        shards.release(a);
        let stale = shards.peek().unwrap();
        assert_eq!((stale.shard.index(), stale.next), (0, 2), "top a, then b");

        let taken_a = shards.claim().unwrap();
        let taken_b = shards.claim().unwrap();
        assert_eq!((taken_a.index(), taken_b.index()), (0, 1));
        shards.release(&taken_a);

        assert!(!shards.try_pop(&stale), "a stale pop succeeded");
        assert_eq!(shards.claim().unwrap().index(), 0);
        assert!(shards.claim().is_none(), "b is held, yet on the free list");
    }
}
