//! [`Recorder`] and [`Worker`]: lock-free recording from many threads,
//! snapshots for a metrics thread.
//!
//! # Who writes what
//!
//! | memory | written by | how |
//! | --- | --- | --- |
//! | a shard's counters | the one `Worker` holding it | relaxed load + relaxed store |
//! | the free list (head, links) | `worker()` (claim), `Worker::drop` (release) | compare-exchange: Acquire load + Relaxed CAS / Release CAS |
//! | the stripes | any thread, through `Recorder::observe` | relaxed `fetch_add` |
//! | the shard list | `worker()` when no shard is free, under the registry mutex | set one slot (Release, in `OnceLock`) |
//! | `live` (workers alive) | `worker()` and `Worker::drop` | Relaxed `fetch_add` / Release `fetch_sub` |
//!
//! How shards are stored and handed over (a segmented, append-only list and
//! a tagged Treiber stack of free shards) is described in `shard.rs`.
//!
//! # Why one counter per observation
//!
//! Every figure of a report (steps, tokens, per-position counts, rates) is
//! derived from the buckets when read; invalid input, undrafted steps and
//! scheduled budgets have counters of their own in the same block. So an observation changes
//! exactly one counter, and a snapshot, which reads every counter once, is
//! the histogram of *some* set of observations: the ones whose single store
//! it happened to read. There is no pair of counters that could be seen
//! half-updated, so no seqlock and no retry.
//!
//! # What `worker()` costs
//!
//! The same whatever the number of shards or live workers. A claim is one
//! Acquire load and one compare-exchange on the free list's head, where a
//! scan of the shards for a free one would cost 20 µs per claim at 20,000
//! live workers. A new shard sets one slot of an append-only list, where
//! republishing a copied list would cost `n` `Arc` clones per new shard
//! and make creating `n` workers `O(n²)`. The claim takes no lock; only
//! creating a shard takes the registry mutex, and it allocates the shard's
//! counters anyway. Figures: `benches/README.md`, group `worker`.
//!
//! # Happens-before edges
//!
//! - Shard publication: a new shard is initialised, then its slot is set
//!   (Release); `snapshot` and claims reach it through `get` (Acquire). A
//!   shard is therefore fully initialised before anyone reads or claims it,
//!   and once a `Worker` exists its shard is in every later walk of the
//!   list.
//! - Shard hand-over: `Worker::drop` pushes its shard on the free list
//!   (Release compare-exchange); the next `worker()` reads the head
//!   (Acquire) before it pops it. The new owner continues from the exact
//!   counts the old one left: nothing is lost or counted twice, and the
//!   counts are never moved anywhere.
//! - Observations → snapshot: none needed beyond coherence. An observation
//!   that happened-before `snapshot()` started is seen because a load can
//!   never read a value older than one that happens-before it; and no
//!   bucket is ever smaller than in a snapshot that happened-before it,
//!   because a later load of the same counter never reads an older value
//!   and counters only grow.
//!
//! # Memory bound
//!
//! Shards are never freed while the recorder lives. `live` counts workers
//! alive or being created, from the start of `worker()` to the end of
//! `Worker::drop`. A new shard is created, under the registry mutex, only
//! when the free list was empty and `live` reads more than the `n` shards
//! there are: every value `live` takes is a real count (one modification
//! order), so at that moment more than `n` workers existed and the shard
//! count never exceeds the peak of `live`.
//!
//! When `live` reads `n` or less, the caller is counted and holds no shard,
//! so at most `n - 1` shards are held and some shard is free or being
//! released: `worker()` tries the free list again instead of allocating. It
//! retries at most once for that release: `Worker::drop` pushes its shard
//! before its Release decrement of `live`, and `register` reads `live` with
//! Acquire (the caller's own increment continues the decrement's release
//! sequence), so a count that no longer includes a dropped worker comes
//! with that worker's shard visibly free. A claim that still fails means
//! another worker took a shard in the meantime.

use core::cell::Cell;
use core::fmt;
use core::marker::PhantomData;

use crossbeam_utils::CachePadded;

use super::histogram::AcceptanceHistogram;
use super::shard::{CounterBlock, MAX_STRIPES, Shard, Shards, Slots, Stripes};
use super::sum::{Dest, sum_blocks};

/// The most request states a [`Recorder`] keeps histograms for (and a
/// `StateController`, a `StateSpace` or a `SharedStateTable` has): 128,
/// 32 words of a `SharedStateTable`.
pub const MAX_STATES: usize = 128;
use super::error::{ConfigError, ObserveError};
use super::sync::{self, Arc, AtomicUsize, Ordering};

/// Records verify steps from every thread of an engine and produces
/// snapshots of the engine-wide [`AcceptanceHistogram`].
///
/// Share it (`&Recorder`, `Arc<Recorder>`, or a clone: clones are handles to
/// the same counters). Each engine worker thread takes a [`Worker`] with
/// [`worker`](Self::worker) and records through it; other threads may call
/// [`observe`](Self::observe) directly. A metrics thread calls
/// [`snapshot`](Self::snapshot) whenever it likes.
///
/// ```
/// use specdec_metrics::Recorder;
///
/// let recorder = Recorder::new(4)?;
/// std::thread::scope(|s| {
///     for _ in 0..2 {
///         s.spawn(|| {
///             let worker = recorder.worker();
///             for k in 0..=4 {
///                 worker.observe(k, k / 2).unwrap();
///             }
///             worker.observe_undrafted();
///         });
///     }
/// });
/// let snapshot = recorder.snapshot();
/// assert_eq!(snapshot.num_spec_steps(), 10);
/// assert_eq!(snapshot.count(4, 2), 2);
/// assert_eq!(snapshot.num_undrafted_steps(), 2);
/// # Ok::<(), specdec_metrics::ConfigError>(())
/// ```
///
/// # Async runtimes
///
/// A Tokio-style runtime moves tasks between its threads, and a task may
/// live much longer than one step. Do not give each task a [`Worker`]: a
/// `Worker` is `Send`, so the compiler lets a task hold one across an
/// `.await`, but each live task then holds a shard of its own (10,000
/// concurrent requests, 10,000 shards). Two ways are right:
///
/// **A `Worker` per runtime thread**, kept in a thread-local, created when
/// the runtime starts the thread and dropped when it stops it. Tasks
/// record through whatever thread they run on at that moment; a thread
/// without a worker (such as the one inside `block_on`) falls back on
/// [`observe`](Self::observe). Shards: one per runtime thread.
///
/// ```
/// use std::cell::RefCell;
/// use specdec_metrics::{Recorder, Worker};
///
/// thread_local! {
///     /// This thread's worker, while it is a runtime thread.
///     static WORKER: RefCell<Option<Worker>> = const { RefCell::new(None) };
/// }
///
/// /// Records through this thread's worker if it has one.
/// fn observe(recorder: &Recorder, drafted: usize, accepted: usize) {
///     let result = WORKER.with_borrow(|worker| match worker {
///         Some(worker) => worker.observe(drafted, accepted),
///         None => recorder.observe(drafted, accepted),
///     });
///     if let Err(e) = result {
///         eprintln!("engine bug: {e}"); // also counted in the snapshot
///     }
/// }
///
/// let recorder = Recorder::new(4)?;
/// let runtime = tokio::runtime::Builder::new_multi_thread()
///     .worker_threads(2)
///     .on_thread_start({
///         let recorder = recorder.clone();
///         move || WORKER.set(Some(recorder.worker()))
///     })
///     .on_thread_stop(|| drop(WORKER.take()))
///     .build()?;
/// runtime.block_on(async {
///     let requests: Vec<_> = (0..100)
///         .map(|i| {
///             let recorder = recorder.clone();
///             tokio::spawn(async move {
///                 observe(&recorder, 4, i % 5);
///                 tokio::task::yield_now().await; // may resume on another thread
///                 observe(&recorder, 4, 4);
///             })
///         })
///         .collect();
///     for request in requests {
///         request.await.unwrap();
///     }
/// });
/// drop(runtime); // stops the runtime threads: each drops its worker
/// let snapshot = recorder.snapshot();
/// assert_eq!(snapshot.num_spec_steps(), 200);
/// assert_eq!(snapshot.count(4, 4), 120);
/// assert!((1..=2).contains(&recorder.shard_count()), "a shard per runtime thread");
/// assert_eq!(recorder.live_workers(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// **[`Recorder::observe`] from tasks**: no handle to manage, one relaxed
/// `fetch_add` on the calling thread's stripe (threads get different
/// stripes, up to the number of CPUs, so runtime threads do not contend).
/// It costs about as much as an uncontended shared `fetch_add`, against a
/// plain load and store for a `Worker`; see `benches/README.md`. No shard
/// is created at all.
///
/// ```
/// use specdec_metrics::Recorder;
///
/// let recorder = Recorder::new(4)?;
/// let runtime = tokio::runtime::Builder::new_multi_thread()
///     .worker_threads(2)
///     .build()?;
/// runtime.block_on(async {
///     let requests: Vec<_> = (0..100)
///         .map(|i| {
///             let recorder = recorder.clone();
///             tokio::spawn(async move {
///                 recorder.observe(4, i % 5).unwrap();
///                 tokio::task::yield_now().await;
///                 recorder.observe_undrafted();
///             })
///         })
///         .collect();
///     for request in requests {
///         request.await.unwrap();
///     }
/// });
/// let snapshot = recorder.snapshot();
/// assert_eq!((snapshot.num_spec_steps(), snapshot.num_undrafted_steps()), (100, 100));
/// assert_eq!(snapshot.count(4, 4), 20);
/// assert_eq!(recorder.shard_count(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Recorder {
    inner: Arc<Inner>,
    /// The any-thread counters, held by value (they are shared, an `Arc`
    /// inside) with `slots`, so `observe` reaches a counter through one
    /// pointer.
    stripes: Stripes,
    slots: Slots,
}

struct Inner {
    slots: Slots,
    /// Every shard ever created, and the free list.
    shards: Shards,
    /// Workers alive or being created; see "Memory bound". Padded: every
    /// `worker()` and drop writes it.
    live: CachePadded<AtomicUsize>,
}

impl Recorder {
    /// A recorder for draft lengths `0..=max_draft_len` (vLLM's
    /// `num_spec_tokens`), with no shard yet.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] unless `1 <= max_draft_len <= 64`.
    ///
    /// ```
    /// use specdec_metrics::Recorder;
    /// assert!(Recorder::new(8).is_ok());
    /// assert!(Recorder::new(0).is_err());
    /// ```
    pub fn new(max_draft_len: usize) -> Result<Self, ConfigError> {
        Self::with_states(max_draft_len, 1)
    }

    /// A recorder that keeps one histogram per request state `0..states`
    /// (`1..=128`; [`MAX_STATES`]), recorded with
    /// [`Worker::observe_in`] and read with
    /// [`snapshot_by_state`](Self::snapshot_by_state), for a drafting
    /// policy that chooses the draft length per request state (see
    /// `RequestState` and `StateController`). [`snapshot`](Self::snapshot)
    /// stays the engine-wide histogram: the sum over the states. A
    /// recording call without a state records in state 0. Each shard holds
    /// `states` triangles of buckets (`states × (K + 1)(K + 2) / 2`
    /// counters of 8 bytes: 45 KiB at 128 states and `K = 8`, 2.1 MiB at
    /// 128 states and `K = 64`), and so does each stripe of
    /// [`observe`](Self::observe) (one per CPU, at most 16), so keep
    /// `states` as small as the policy needs.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] unless `1 <= max_draft_len <= 64` and `1 <= states
    /// <= 128`.
    ///
    /// ```
    /// use specdec_metrics::Recorder;
    /// let recorder = Recorder::with_states(4, 4)?;
    /// let worker = recorder.worker();
    /// worker.observe_in(0, 4, 0)?; // a request in a hard stretch
    /// worker.observe_in(3, 4, 4)?; // one in an easy stretch
    /// let states = recorder.snapshot_by_state();
    /// assert_eq!((states[0].count(4, 0), states[3].count(4, 4)), (1, 1));
    /// assert_eq!(recorder.snapshot().num_spec_steps(), 2); // the sum
    /// assert!(Recorder::with_states(4, 129).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_states(max_draft_len: usize, states: usize) -> Result<Self, ConfigError> {
        Self::builder(max_draft_len).states(states).build()
    }

    /// A [`RecorderBuilder`] for draft lengths `0..=max_draft_len`: one
    /// request state and no proposal recording unless asked for. Checked
    /// by [`build`](RecorderBuilder::build).
    ///
    /// ```
    /// use specdec_metrics::Recorder;
    /// let recorder = Recorder::builder(8).states(4).record_proposals().build()?;
    /// assert_eq!((recorder.max_draft_len(), recorder.states()), (8, 4));
    /// assert!(recorder.records_proposals());
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    pub fn builder(max_draft_len: usize) -> RecorderBuilder {
        RecorderBuilder {
            max_draft_len,
            states: 1,
            record_proposals: false,
        }
    }

    fn from_builder(builder: RecorderBuilder) -> Result<Self, ConfigError> {
        let RecorderBuilder {
            max_draft_len,
            states,
            record_proposals,
        } = builder;
        ConfigError::check_max_draft_len(max_draft_len)?;
        if !(1..=MAX_STATES).contains(&states) {
            return Err(ConfigError::States { states });
        }
        let stripes = sync::parallelism().next_power_of_two().min(MAX_STRIPES);
        let slots = Slots::with_options(max_draft_len, states, record_proposals);
        Ok(Self {
            inner: Arc::new(Inner {
                slots,
                shards: Shards::new(slots),
                live: CachePadded::new(AtomicUsize::new(0)),
            }),
            stripes: Stripes::new(slots, stripes),
            slots,
        })
    }

    /// The configured maximum draft length `K`.
    pub fn max_draft_len(&self) -> usize {
        self.slots.max_draft_len
    }

    /// The number of request states (1 for [`Recorder::new`]).
    pub fn states(&self) -> usize {
        self.slots.states
    }

    /// Whether this recorder keeps the proposal histogram
    /// ([`RecorderBuilder::record_proposals`]).
    pub fn records_proposals(&self) -> bool {
        self.slots.records_proposals
    }

    /// A recording handle for the calling thread (movable to another).
    ///
    /// Claims a free shard when there is one, counts and all, without
    /// allocating or locking, in the same time whatever the number of
    /// shards. Only when every shard is held by a live worker does it
    /// create one (its counters and one slot of the shard list, under a
    /// mutex that only shard creation takes). Never blocks a snapshot or an
    /// `observe`.
    ///
    /// ```
    /// use specdec_metrics::Recorder;
    /// let recorder = Recorder::new(2)?;
    /// let w = recorder.worker();
    /// w.observe(2, 2).unwrap();
    /// drop(w);
    /// let w = recorder.worker(); // takes over the same shard and its counts
    /// w.observe(2, 2).unwrap();
    /// assert_eq!(recorder.shard_count(), 1);
    /// assert_eq!(recorder.snapshot().count(2, 2), 2);
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    pub fn worker(&self) -> Worker {
        let inner = &*self.inner;
        // Relaxed: the memory bound needs only that `live` takes true
        // counts (its single modification order); it publishes nothing.
        inner.live.fetch_add(1, Ordering::Relaxed);
        let shard = loop {
            if let Some(shard) = inner.shards.claim() {
                break shard;
            }
            if let Some(shard) = inner.register() {
                break shard;
            }
            // A shard is free but its release is not visible to us yet, or
            // another worker took it: look again.
            sync::yield_now();
        };
        Worker {
            counters: shard.counters().clone(),
            slots: inner.slots,
            shard,
            recorder: Arc::clone(&self.inner),
            _not_sync: PhantomData,
        }
    }

    /// Records one verify step from any thread, without a [`Worker`]:
    /// one relaxed `fetch_add` on a stripe picked per thread. Prefer a
    /// `Worker` on hot threads.
    ///
    /// # Errors
    ///
    /// As [`AcceptanceHistogram::observe`]: invalid input is counted in
    /// `num_rejected_observations` and returned as an [`ObserveError`].
    ///
    /// ```
    /// use specdec_metrics::Recorder;
    /// let recorder = Recorder::new(3)?;
    /// recorder.observe(3, 1).unwrap();
    /// assert!(recorder.observe(1, 2).is_err());
    /// let s = recorder.snapshot();
    /// assert_eq!((s.count(3, 1), s.num_rejected_observations()), (1, 1));
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    #[inline]
    pub fn observe(&self, drafted: usize, accepted: usize) -> Result<(), ObserveError> {
        self.slots.observe_with(drafted, accepted, |index| {
            self.stripes.increment(sync::thread_hint(), index);
        })
    }

    /// Records one verify step of a request in state `state` from any
    /// thread, without a [`Worker`]: as [`observe`](Self::observe), in
    /// that state's histogram (see [`with_states`](Self::with_states)).
    ///
    /// # Errors
    ///
    /// As [`Worker::observe_in`].
    #[inline]
    pub fn observe_in(
        &self,
        state: usize,
        drafted: usize,
        accepted: usize,
    ) -> Result<(), ObserveError> {
        self.slots
            .observe_in_with(state, drafted, accepted, |index| {
                self.stripes.increment(sync::thread_hint(), index);
            })
    }

    /// Records one scheduler step whose draft budget was `budget` (`0`: the
    /// schedule chose not to speculate), from any thread: one relaxed
    /// `fetch_add` on a stripe picked per thread. Prefer a `Worker` on hot
    /// threads.
    ///
    /// # Errors
    ///
    /// As [`AcceptanceHistogram::observe_scheduled`]: `budget > K` is
    /// counted in `num_rejected_observations` and returned as an
    /// [`ObserveError`].
    ///
    /// ```
    /// use specdec_metrics::Recorder;
    /// let recorder = Recorder::new(3)?;
    /// recorder.observe_scheduled(0)?;
    /// recorder.observe_scheduled(3)?;
    /// assert!(recorder.observe_scheduled(4).is_err());
    /// let s = recorder.snapshot();
    /// assert_eq!(s.scheduled_steps_by_budget(), &[1, 0, 0, 1]);
    /// assert_eq!(s.num_rejected_observations(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn observe_scheduled(&self, budget: usize) -> Result<(), ObserveError> {
        self.slots.observe_scheduled_with(budget, |index| {
            self.stripes.increment(sync::thread_hint(), index);
        })
    }

    /// Records one resolved proposal outcome `(L, m)` from any thread,
    /// without a [`Worker`]: one relaxed `fetch_add` on the calling
    /// thread's stripe. Usually called by a
    /// [`ProposalTracker`](crate::ProposalTracker) given `&recorder` as its
    /// sink.
    ///
    /// # Errors
    ///
    /// As [`Worker::observe_proposal`].
    ///
    /// ```
    /// use specdec_metrics::Recorder;
    /// let recorder = Recorder::builder(3).record_proposals().build()?;
    /// recorder.observe_proposal(3, 1).unwrap();
    /// assert!(recorder.observe_proposal(2, 3).is_err());
    /// let s = recorder.snapshot();
    /// assert_eq!((s.proposal_count(3, 1), s.num_rejected_observations()), (1, 1));
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    #[inline]
    pub fn observe_proposal(
        &self,
        proposal_len: usize,
        matched: usize,
    ) -> Result<(), ObserveError> {
        self.slots
            .observe_proposal_with(proposal_len, matched, |index| {
                self.stripes.increment(sync::thread_hint(), index);
            })
    }

    /// Records `count` proposal outcomes of aborted requests from any
    /// thread, without a [`Worker`]: one relaxed `fetch_add` of `count`.
    ///
    /// # Errors
    ///
    /// As [`Worker::observe_aborted_proposals`].
    ///
    /// ```
    /// use specdec_metrics::Recorder;
    /// let recorder = Recorder::builder(3).record_proposals().build()?;
    /// recorder.observe_aborted_proposals(2).unwrap();
    /// assert_eq!(recorder.snapshot().num_aborted_proposals(), 2);
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    #[inline]
    pub fn observe_aborted_proposals(&self, count: u64) -> Result<(), ObserveError> {
        self.slots.observe_aborted_with(count, |index, n| {
            self.stripes.add(sync::thread_hint(), index, n);
        })
    }

    /// Records a step whose drafting policy proposed nothing, from any
    /// thread.
    ///
    /// ```
    /// use specdec_metrics::Recorder;
    /// let recorder = Recorder::new(3)?;
    /// recorder.observe_undrafted();
    /// assert_eq!(recorder.snapshot().num_undrafted_steps(), 1);
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    #[inline]
    pub fn observe_undrafted(&self) {
        self.stripes
            .increment(sync::thread_hint(), self.slots.undrafted);
    }

    /// The engine-wide histogram now: the sum of every shard and stripe.
    ///
    /// Takes no lock and never makes a writer wait. Guarantees:
    ///
    /// - it is the histogram of some set of observations (each observation
    ///   changes one counter, read once here), so every derived figure
    ///   agrees with its buckets;
    /// - it contains every observation that happened-before the call (for
    ///   example, everything recorded by workers that were joined, dropped
    ///   before a channel send the caller received, …);
    /// - no bucket and no counter is ever smaller than in a snapshot that
    ///   happened-before it, so counters exported from it never go back.
    ///
    /// ```
    /// use specdec_metrics::Recorder;
    /// let recorder = Recorder::new(2)?;
    /// let before = recorder.snapshot();
    /// recorder.worker().observe(1, 0).unwrap();
    /// let after = recorder.snapshot();
    /// assert_eq!(after.delta_since(&before).unwrap().count(1, 0), 1);
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    pub fn snapshot(&self) -> AcceptanceHistogram {
        let slots = self.slots;
        if slots.records_proposals {
            return self.snapshot_with_proposals();
        }
        // Exactly the reading of a recorder without proposals: no proposal
        // counter exists, none is read or allocated.
        let mut counts = vec![0u64; slots.triangle].into_boxed_slice();
        let mut sides = [0u64; 2];
        let mut scheduled = vec![0u64; slots.max_draft_len + 1].into_boxed_slice();
        self.read_counters(&mut [
            // The states' triangles folded into one.
            Dest {
                offset: 0,
                reps: slots.states,
                stride: slots.triangle,
                totals: &mut counts,
            },
            Dest::new(slots.undrafted, &mut sides),
            Dest::new(slots.scheduled, &mut scheduled),
        ]);
        debug_assert_eq!(slots.rejected, slots.undrafted + 1);
        let [undrafted, rejected] = sides;
        AcceptanceHistogram::from_parts(slots.max_draft_len, counts, undrafted, rejected, scheduled)
    }

    /// [`snapshot`](Self::snapshot) of a recorder that records proposals:
    /// the same reading, with the proposal triangle and the aborted count.
    #[inline(never)]
    fn snapshot_with_proposals(&self) -> AcceptanceHistogram {
        let slots = self.slots;
        let mut counts = vec![0u64; slots.triangle].into_boxed_slice();
        let mut sides = [0u64; 2];
        let mut scheduled = vec![0u64; slots.max_draft_len + 1].into_boxed_slice();
        let mut proposals = vec![0u64; slots.aborted - slots.proposals].into_boxed_slice();
        let mut aborted = [0u64; 1];
        self.read_counters(&mut [
            Dest {
                offset: 0,
                reps: slots.states,
                stride: slots.triangle,
                totals: &mut counts,
            },
            Dest::new(slots.undrafted, &mut sides),
            Dest::new(slots.scheduled, &mut scheduled),
            Dest::new(slots.proposals, &mut proposals),
            Dest::new(slots.aborted, &mut aborted),
        ]);
        let [undrafted, rejected] = sides;
        let mut h = AcceptanceHistogram::from_parts(
            slots.max_draft_len,
            counts,
            undrafted,
            rejected,
            scheduled,
        );
        h.set_proposals(proposals, aborted[0]);
        h
    }

    /// One histogram per request state, `0..states()`, from one reading of
    /// every counter (with the guarantees of [`snapshot`](Self::snapshot)):
    /// the verify steps recorded in each state. Undrafted steps, rejected
    /// observations and scheduled budgets belong to no state; they are in
    /// [`snapshot`](Self::snapshot) only, and zero here. So do proposal
    /// outcomes: these histograms have no proposal part.
    ///
    /// ```
    /// use specdec_metrics::Recorder;
    /// let recorder = Recorder::with_states(2, 3)?;
    /// recorder.observe_in(1, 2, 1)?;
    /// recorder.observe(2, 2)?; // no state: state 0
    /// let states = recorder.snapshot_by_state();
    /// assert_eq!(states.len(), 3);
    /// assert_eq!((states[0].count(2, 2), states[1].count(2, 1), states[2].num_spec_steps()), (1, 1, 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn snapshot_by_state(&self) -> Vec<AcceptanceHistogram> {
        let slots = self.slots;
        let mut states: Vec<Box<[u64]>> = (0..slots.states)
            .map(|_| vec![0u64; slots.triangle].into_boxed_slice())
            .collect();
        let mut dests: Vec<Dest<'_>> = states
            .iter_mut()
            .enumerate()
            .map(|(state, counts)| Dest::new(state * slots.triangle, counts))
            .collect();
        self.read_counters(&mut dests);
        drop(dests);
        states
            .into_iter()
            .map(|counts| {
                AcceptanceHistogram::from_parts(
                    slots.max_draft_len,
                    counts,
                    0,
                    0,
                    vec![0; slots.max_draft_len + 1].into_boxed_slice(),
                )
            })
            .collect()
    }

    /// Adds every counter `dests` name, summed over the shards and the
    /// stripes that were used, to its total: each counter is read once.
    fn read_counters(&self, dests: &mut [Dest<'_>]) {
        let len = self.slots.len();
        // Acquire (inside `iter`): pairs with the publication of each shard.
        let shards = self
            .inner
            .shards
            .iter()
            .map(|shard| shard.counters().live());
        sum_blocks(shards.chain(self.stripes.used(len)), dests);
    }

    /// Shards created so far. Never more than the peak number of workers
    /// alive at once.
    ///
    /// ```
    /// use specdec_metrics::Recorder;
    /// let recorder = Recorder::new(2)?;
    /// let (a, b) = (recorder.worker(), recorder.worker());
    /// drop((a, b));
    /// let _c = recorder.worker();
    /// assert_eq!(recorder.shard_count(), 2);
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    pub fn shard_count(&self) -> usize {
        self.inner.shards.len()
    }

    /// Workers currently alive (including ones being created).
    pub fn live_workers(&self) -> usize {
        // Relaxed: an informational reading; orders nothing.
        self.inner.live.load(Ordering::Relaxed)
    }
}

/// Configures a [`Recorder`]: `K`, the number of request states, and
/// whether it records the proposal histogram of a lookup drafter. Made by
/// [`Recorder::builder`].
///
/// ```
/// use specdec_metrics::Recorder;
/// let recorder = Recorder::builder(4).build()?; // as Recorder::new(4)
/// assert!(!recorder.records_proposals());
/// assert!(Recorder::builder(4).states(0).build().is_err());
/// # Ok::<(), specdec_metrics::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct RecorderBuilder {
    max_draft_len: usize,
    states: usize,
    record_proposals: bool,
}

impl RecorderBuilder {
    /// Keeps one histogram per request state `0..states` (`1..=128`; see
    /// [`Recorder::with_states`]). Default 1.
    ///
    /// ```
    /// use specdec_metrics::Recorder;
    /// assert_eq!(Recorder::builder(4).states(3).build()?.states(), 3);
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    pub fn states(self, states: usize) -> Self {
        Self { states, ..self }
    }

    /// Also keeps the **proposal histogram** of a lookup drafter: resolved
    /// proposal outcomes by proposal length `L` (`1..=K`) and matched
    /// count `m` (`0..=L`), and the outcomes of aborted requests, recorded
    /// with [`Worker::observe_proposal`] and
    /// [`Worker::observe_aborted_proposals`], usually through a
    /// [`ProposalTracker`](crate::ProposalTracker) (which says when the
    /// outcomes mean what they say).
    ///
    /// Opt-in so that engines that do not use it pay nothing: without it,
    /// each shard and stripe holds exactly the counters it held before the
    /// proposal histogram existed, `observe` runs the same instructions
    /// (23 at `K = 8`, callgrind) and `snapshot` the same reading after one
    /// test of the option (7 instructions; `benches/README.md`). With it, each shard and stripe holds `K (K +
    /// 3) / 2 + 1` more counters (45 at `K = 8`, 2,145 at `K = 64`), and a
    /// snapshot sums them.
    ///
    /// ```
    /// use specdec_metrics::Recorder;
    /// let recorder = Recorder::builder(8).record_proposals().build()?;
    /// recorder.worker().observe_proposal(8, 5)?;
    /// assert_eq!(recorder.snapshot().proposal_count(8, 5), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn record_proposals(self) -> Self {
        Self {
            record_proposals: true,
            ..self
        }
    }

    /// The recorder, with no shard yet.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] unless `1 <= max_draft_len <= 64` and `1 <= states
    /// <= 128`.
    ///
    /// ```
    /// use specdec_metrics::Recorder;
    /// assert!(Recorder::builder(65).build().is_err());
    /// ```
    pub fn build(self) -> Result<Recorder, ConfigError> {
        Recorder::from_builder(self)
    }
}

impl Inner {
    /// Creates and publishes a new shard, held by the caller, if more
    /// workers are counted than there are shards; else `None` (a shard is
    /// free or about to be) and the caller claims again.
    fn register(&self) -> Option<Arc<Shard>> {
        self.shards.create_if(|shards| {
            // Acquire: pairs with the Release decrement in `Worker::drop`;
            // if we read a count without a dropped worker, its shard's
            // release is visible to the caller's next claim (see "Memory
            // bound"). Progress only, not the bound: with Relaxed the caller
            // would retry until the release became visible, which is why no
            // loom model (loom always lets the release become visible) or
            // test fails when it is weakened; it makes that one retry
            // enough.
            self.live.load(Ordering::Acquire) > shards
        })
    }
}

impl fmt::Debug for Recorder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("Recorder");
        s.field("max_draft_len", &self.slots.max_draft_len)
            .field("shards", &self.shard_count())
            .field("live_workers", &self.live_workers())
            .field("stripes", &self.stripes.count());
        if self.slots.records_proposals {
            s.field("records_proposals", &true);
        }
        s.finish()
    }
}

/// One engine worker's recording handle: records into a shard that only it
/// writes, so [`observe`](Self::observe) is a relaxed load and a relaxed
/// store of one counter, with no lock, no read-modify-write and no
/// allocation.
///
/// `Send` (move it to the thread that uses it) but neither `Sync` nor
/// `Clone`: the single-writer rule is enforced by the type system. Dropping
/// it — also while a panic unwinds — gives the shard, counts and all, to
/// the next [`Recorder::worker`] call; nothing recorded is lost.
///
/// ```
/// use specdec_metrics::Recorder;
/// let recorder = Recorder::new(4)?;
/// let worker = recorder.worker();
/// worker.observe(4, 3).unwrap();
/// worker.observe(0, 0).unwrap(); // the grammar invalidated every draft
/// worker.observe_undrafted(); // the policy proposed nothing
/// let err = worker.observe(2, 3).unwrap_err();
/// assert_eq!(err.to_string(), "rejected observation (drafted=2, accepted=3): accepted exceeds drafted");
/// let s = recorder.snapshot();
/// assert_eq!((s.num_spec_steps(), s.num_undrafted_steps(), s.num_rejected_observations()), (2, 1, 1));
/// # Ok::<(), specdec_metrics::ConfigError>(())
/// ```
///
/// A `Worker` cannot be shared between threads or cloned:
///
/// ```compile_fail
/// fn shared<T: Sync>() {}
/// shared::<specdec_metrics::Worker>();
/// ```
///
/// ```compile_fail
/// let recorder = specdec_metrics::Recorder::new(2).unwrap();
/// let w = recorder.worker();
/// let copy = w.clone();
/// ```
pub struct Worker {
    /// The shard's counters, held by value (a fat `Arc` pointer and the
    /// length) so `observe` reaches a counter through one pointer.
    counters: CounterBlock,
    shard: Arc<Shard>,
    recorder: Arc<Inner>,
    /// `K` and the side counters' indices, copied from the recorder.
    slots: Slots,
    /// `Cell` is `Send + !Sync`: makes `Worker` the same.
    _not_sync: PhantomData<Cell<()>>,
}

impl Worker {
    /// Records one verify step: drafted `drafted` tokens (after grammar
    /// adjustment), the verifier accepted `accepted`.
    ///
    /// # Errors
    ///
    /// As [`AcceptanceHistogram::observe`]: invalid input is counted in
    /// `num_rejected_observations` (still one counter) and returned.
    #[inline]
    pub fn observe(&self, drafted: usize, accepted: usize) -> Result<(), ObserveError> {
        self.slots.observe_with(drafted, accepted, |index| {
            self.counters.increment_exclusive(index);
        })
    }

    /// Records one verify step of a request in state `state`
    /// (`0..Recorder::states()`): as [`observe`](Self::observe), in that
    /// state's histogram. Still one relaxed load and store of one counter.
    ///
    /// # Errors
    ///
    /// [`ObserveError::StateOutOfRange`] for a state the recorder has no
    /// histogram for, and the errors of [`observe`](Self::observe); the
    /// step is then counted in `num_rejected_observations`.
    ///
    /// ```
    /// use specdec_metrics::Recorder;
    /// let recorder = Recorder::with_states(3, 2)?;
    /// let worker = recorder.worker();
    /// worker.observe_in(1, 3, 2)?;
    /// assert!(worker.observe_in(1, 2, 3).is_err()); // a > k
    /// assert!(worker.observe_in(2, 3, 0).is_err()); // no state 2
    /// assert_eq!(recorder.snapshot_by_state()[1].count(3, 2), 1);
    /// assert_eq!(recorder.snapshot().num_rejected_observations(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn observe_in(
        &self,
        state: usize,
        drafted: usize,
        accepted: usize,
    ) -> Result<(), ObserveError> {
        self.slots
            .observe_in_with(state, drafted, accepted, |index| {
                self.counters.increment_exclusive(index);
            })
    }

    /// Records a step whose drafting policy proposed nothing.
    #[inline]
    pub fn observe_undrafted(&self) {
        self.counters.increment_exclusive(self.slots.undrafted);
    }

    /// Records one resolved proposal outcome of a lookup drafter: a
    /// proposal of `proposal_len` tokens (`L`, `1..=K`) whose first
    /// `matched` (`m <= L`) equal the output tokens that followed. Usually
    /// called by a [`ProposalTracker`](crate::ProposalTracker) given
    /// `&worker` as its sink. Like [`observe`](Self::observe): one relaxed
    /// load and store of one counter of this worker's shard.
    ///
    /// # Errors
    ///
    /// [`ObserveError::ProposalOutOfRange`] outside the proposal triangle,
    /// [`ObserveError::ProposalsNotRecorded`] when the recorder was built
    /// without [`RecorderBuilder::record_proposals`]; the outcome is then
    /// counted in `num_rejected_observations` (still one counter).
    ///
    /// ```
    /// use specdec_metrics::{ObserveError, Recorder};
    /// let recorder = Recorder::builder(4).record_proposals().build()?;
    /// let worker = recorder.worker();
    /// worker.observe_proposal(4, 1)?; // proposed 4, the output matched 1
    /// assert!(worker.observe_proposal(5, 0).is_err()); // L > K
    /// let s = recorder.snapshot();
    /// assert_eq!((s.proposal_count(4, 1), s.num_rejected_observations()), (1, 1));
    /// let plain = Recorder::new(4)?;
    /// assert_eq!(plain.worker().observe_proposal(4, 1), Err(ObserveError::ProposalsNotRecorded));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn observe_proposal(
        &self,
        proposal_len: usize,
        matched: usize,
    ) -> Result<(), ObserveError> {
        self.slots
            .observe_proposal_with(proposal_len, matched, |index| {
                self.counters.increment_exclusive(index);
            })
    }

    /// Records `count` proposal outcomes left pending by aborted requests
    /// (`num_aborted_proposals`): counted apart, never as matches. One
    /// relaxed load and store of one counter.
    ///
    /// # Errors
    ///
    /// [`ObserveError::ProposalsNotRecorded`] when the recorder was built
    /// without [`RecorderBuilder::record_proposals`]; the call is then
    /// counted once in `num_rejected_observations`.
    ///
    /// ```
    /// use specdec_metrics::Recorder;
    /// let recorder = Recorder::builder(4).record_proposals().build()?;
    /// recorder.worker().observe_aborted_proposals(3)?;
    /// assert_eq!(recorder.snapshot().num_aborted_proposals(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn observe_aborted_proposals(&self, count: u64) -> Result<(), ObserveError> {
        self.slots.observe_aborted_with(count, |index, n| {
            self.counters.add_exclusive(index, n);
        })
    }

    /// Records one scheduler step whose draft budget was `budget`: the
    /// draft length the schedule gave the step before any grammar
    /// adjustment, `0` when it chose not to speculate. One per scheduler
    /// step (a batch step counts once, however many requests it holds);
    /// the verify steps of its requests are recorded apart with
    /// [`observe`](Self::observe). Like `observe`: one relaxed load and
    /// store of one counter of this worker's shard, no lock, no allocation.
    ///
    /// # Errors
    ///
    /// [`ObserveError::BudgetExceedsMax`] when `budget > K`; the step is
    /// then counted in `num_rejected_observations` (still one counter).
    ///
    /// ```
    /// use specdec_metrics::Recorder;
    /// let recorder = Recorder::new(4)?;
    /// let worker = recorder.worker();
    /// worker.observe_scheduled(4)?; // the schedule gave this step 4 drafts
    /// worker.observe(4, 2)?; // ...and a request of the batch accepted 2
    /// worker.observe_scheduled(0)?; // the schedule chose not to speculate
    /// assert!(worker.observe_scheduled(5).is_err());
    /// let s = recorder.snapshot();
    /// assert_eq!(s.scheduled_steps_by_budget(), &[1, 0, 0, 0, 1]);
    /// assert_eq!((s.num_spec_steps(), s.num_rejected_observations()), (1, 1));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn observe_scheduled(&self, budget: usize) -> Result<(), ObserveError> {
        self.slots.observe_scheduled_with(budget, |index| {
            self.counters.increment_exclusive(index);
        })
    }

    /// The configured maximum draft length `K`.
    pub fn max_draft_len(&self) -> usize {
        self.slots.max_draft_len
    }

    /// The number of request states (1 for [`Recorder::new`]).
    pub fn states(&self) -> usize {
        self.slots.states
    }

    /// Which shard this worker records into: its position, from 0, in the
    /// order shards were created. A worker that reuses a released shard
    /// reports that shard's index.
    ///
    /// ```
    /// use specdec_metrics::Recorder;
    /// let recorder = Recorder::new(2)?;
    /// let a = recorder.worker();
    /// let b = recorder.worker();
    /// assert_eq!((a.shard_index(), b.shard_index()), (0, 1));
    /// drop(a);
    /// assert_eq!(recorder.worker().shard_index(), 0);
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    pub fn shard_index(&self) -> usize {
        self.shard.index()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.recorder.shards.release(&self.shard);
        // Release: pairs with the Acquire load in `Inner::register`; the
        // shard's release above is visible to whoever reads the lower count
        // (progress only, like that Acquire: see its comment).
        self.recorder.live.fetch_sub(1, Ordering::Release);
    }
}

impl fmt::Debug for Worker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker")
            .field("max_draft_len", &self.slots.max_draft_len)
            .field("shard", &self.shard_index())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorder_and_worker_report_their_configuration() {
        let recorder = Recorder::with_states(3, 2).unwrap();
        assert_eq!((recorder.max_draft_len(), recorder.states()), (3, 2));
        let (a, b) = (recorder.worker(), recorder.worker());
        assert_eq!((a.max_draft_len(), a.states()), (3, 2));
        assert_eq!((a.shard_index(), b.shard_index()), (0, 1));
        assert_eq!((recorder.shard_count(), recorder.live_workers()), (2, 2));
        let debug = format!("{recorder:?} {b:?}");
        assert!(debug.contains("max_draft_len: 3"), "{debug}");
        assert!(debug.contains("shard: 1"), "{debug}");
        drop(a);
        assert_eq!(recorder.live_workers(), 1);
        // The dropped worker's shard, counts and all, goes to the next one.
        assert_eq!(recorder.worker().shard_index(), 0);
    }

    /// Every recording path of both handles: a valid call lands in its
    /// bucket, an invalid one is returned as an error and counted as
    /// rejected, exactly one counter either way.
    #[test]
    fn every_path_records_valid_input_and_counts_invalid_input() {
        let recorder = Recorder::with_states(2, 2).unwrap();
        let worker = recorder.worker();
        for handle_is_worker in [false, true] {
            let observe = |k, a| {
                if handle_is_worker {
                    worker.observe(k, a)
                } else {
                    recorder.observe(k, a)
                }
            };
            let observe_in = |s, k, a| {
                if handle_is_worker {
                    worker.observe_in(s, k, a)
                } else {
                    recorder.observe_in(s, k, a)
                }
            };
            let scheduled = |b| {
                if handle_is_worker {
                    worker.observe_scheduled(b)
                } else {
                    recorder.observe_scheduled(b)
                }
            };
            observe(2, 1).unwrap();
            assert!(observe(1, 2).is_err());
            assert!(observe(3, 0).is_err());
            observe_in(1, 2, 2).unwrap();
            assert!(observe_in(2, 1, 0).is_err());
            assert!(observe_in(0, 1, 2).is_err());
            scheduled(2).unwrap();
            assert!(scheduled(3).is_err());
            if handle_is_worker {
                worker.observe_undrafted();
            } else {
                recorder.observe_undrafted();
            }
        }
        let s = recorder.snapshot();
        assert_eq!(
            (s.count(2, 1), s.count(2, 2), s.num_spec_steps()),
            (2, 2, 4)
        );
        assert_eq!(s.num_rejected_observations(), 10);
        assert_eq!(s.num_undrafted_steps(), 2);
        assert_eq!(s.scheduled_steps_by_budget(), &[0, 0, 2]);
        let states = recorder.snapshot_by_state();
        assert_eq!(states.len(), 2);
        assert_eq!((states[0].count(2, 1), states[0].num_spec_steps()), (2, 2));
        assert_eq!((states[1].count(2, 2), states[1].num_spec_steps()), (2, 2));
        assert_eq!(states[1].num_rejected_observations(), 0);
    }

    /// The snapshot sums every shard once and every used stripe once, the
    /// states of each folded into one histogram, over more shards than a
    /// gathering and lanes take at once (37: one gathering of 32 and 5
    /// more, lanes of four and a remainder).
    #[test]
    fn snapshots_sum_every_shard_and_stripe_once_whatever_their_number() {
        let recorder = Recorder::with_states(2, 3).unwrap();
        let workers: Vec<_> = (0..37).map(|_| recorder.worker()).collect();
        for (i, worker) in workers.iter().enumerate() {
            for _ in 0..=i {
                worker.observe_in(i % 3, 2, i % 3).unwrap();
            }
        }
        recorder.observe_in(2, 1, 1).unwrap();
        let steps = |state: usize| {
            (0..37)
                .filter(|i| i % 3 == state)
                .map(|i| i as u64 + 1)
                .sum::<u64>()
        };
        let s = recorder.snapshot();
        assert_eq!(
            (s.count(2, 0), s.count(2, 1), s.count(2, 2)),
            (steps(0), steps(1), steps(2))
        );
        assert_eq!((s.count(1, 1), s.num_spec_steps()), (1, 37 * 38 / 2 + 1));
        let states = recorder.snapshot_by_state();
        for (state, h) in states.iter().enumerate() {
            assert_eq!(h.count(2, state), steps(state), "state {state}");
        }
        assert_eq!(states[2].count(1, 1), 1);
    }

    /// A claim can miss a release it does not see yet. `register` must then
    /// leave shard creation to the count: a new shard only when more
    /// workers are counted than there are shards. Driven by hand (no
    /// `worker()`), each step as `worker()` and `Worker::drop` do it.
    #[test]
    fn register_creates_a_shard_only_when_more_workers_are_counted_than_shards() {
        let recorder = Recorder::new(1).unwrap();
        let inner = &*recorder.inner;
        assert!(inner.register().is_none(), "a shard with no worker counted");
        inner.live.fetch_add(1, Ordering::Relaxed);
        let first = inner.register().expect("one worker counted, no shard");
        assert_eq!((first.index(), recorder.shard_count()), (0, 1));
        // That worker is dropped: shard released, then uncounted.
        inner.shards.release(&first);
        inner.live.fetch_sub(1, Ordering::Relaxed);
        // A new worker counts itself; say its claim missed the release.
        inner.live.fetch_add(1, Ordering::Relaxed);
        assert!(inner.register().is_none(), "a second shard for one worker");
        assert_eq!(recorder.shard_count(), 1);
        // Two counted, one shard: the second worker needs a new one.
        inner.live.fetch_add(1, Ordering::Relaxed);
        let second = inner.register().expect("two workers counted, one shard");
        assert_eq!((second.index(), recorder.shard_count()), (1, 2));
    }
}
