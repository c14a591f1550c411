//! Shared by the bench targets: the input table, the baseline recorders the
//! library is compared with, and a pool of long-lived threads for the
//! multi-thread benches.
//!
//! Every baseline uses the library's own triangle math
//! ([`checked_bucket_index`]) and handles invalid input the same way (count
//! it in a `num_rejected_observations` slot after the buckets and report
//! it), so the only thing that differs between variants is how the one
//! counter is incremented.

#![allow(dead_code)] // each bench target uses a different subset

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use rand::{Rng as _, SeedableRng as _};
use rand_xoshiro::SplitMix64;

// The library's own triangle math, included from its source: the index
// functions are crate-private (exact only for K <= 64, which every caller
// here respects), and every baseline must index the same triangle.
#[path = "../../src/record/layout.rs"]
mod layout;
use layout::{bucket_count, checked_bucket_index};

/// Observations per criterion iteration: one pass over the input table.
/// 1024 pairs of bytes (2 KiB) stay in L1, so the benches measure the
/// recording, not the input.
pub const BATCH: usize = 1024;

/// `BATCH` pseudo-random valid `(drafted, accepted)` pairs for a maximum
/// draft length `max`: `k` uniform in `0..=max`, `a` uniform in `0..=k`.
/// Deterministic per `seed` (`rand_xoshiro`'s SplitMix64), so every
/// variant and every run sees the same sequence.
pub fn inputs(max: usize, seed: u64) -> Vec<(u8, u8)> {
    assert!(max <= u8::MAX as usize);
    let mut rng = SplitMix64::seed_from_u64(seed);
    (0..BATCH)
        .map(|_| {
            let k = rng.random_range(0..=max as u8);
            let a = rng.random_range(0..=k);
            (k, a)
        })
        .collect()
}

/// One pass over `table`, recording each pair with `observe` (which returns
/// whether the pair was valid). Returns the number of rejected pairs so the
/// caller can hand it to `black_box`, like an engine that checks the result.
#[inline(always)]
pub fn run_batch(table: &[(u8, u8)], mut observe: impl FnMut(usize, usize) -> bool) -> usize {
    let mut rejected = 0;
    for &(k, a) in table {
        rejected += usize::from(!observe(usize::from(k), usize::from(a)));
    }
    rejected
}

/// Index of the `num_rejected_observations` slot, after the buckets and the
/// undrafted slot, as in the library's counter blocks.
#[inline(always)]
pub const fn rejected_index(max: usize) -> usize {
    bucket_count(max) + 1
}

/// Number of slots: the triangle, undrafted, rejected.
pub const fn slots(max: usize) -> usize {
    bucket_count(max) + 2
}

/// Slot for `(k, a)`: its bucket, or the rejected slot.
#[inline(always)]
fn slot(max: usize, k: usize, a: usize) -> (usize, bool) {
    match checked_bucket_index(max, k, a) {
        Some(i) => (i, true),
        None => (rejected_index(max), false),
    }
}

/// The physical limit: a thread-local, non-atomic array of `u64`, one
/// `+= 1` per observation. `max` is a runtime value and the array a boxed
/// slice, like the library's, so the same bounds checks remain.
pub struct LocalArray {
    max: usize,
    counts: Box<[u64]>,
}

impl LocalArray {
    pub fn new(max: usize) -> Self {
        // Opaque, so the compiler cannot fold K and the length into
        // constants: the library reads both at run time.
        let max = black_box(max);
        Self {
            max,
            counts: vec![0; slots(max)].into_boxed_slice(),
        }
    }

    /// The same job as `Worker::observe` in its tightest plain form: a
    /// predicted branch on validity, the bucket's bounds-checked `+= 1`,
    /// the rejection out of line. (Written like `Worker::observe`,
    /// `unwrap_or` the rejected slot then one `+= 1`, it compiles to a
    /// branch-free `cmov` sequence one instruction longer.)
    #[inline(always)]
    pub fn observe(&mut self, k: usize, a: usize) -> bool {
        match checked_bucket_index(self.max, k, a) {
            Some(i) => {
                self.counts[i] += 1;
                true
            }
            None => {
                reject(&mut self.counts[rejected_index(self.max)]);
                false
            }
        }
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// The out-of-line rejection of [`LocalArray::observe`]. Takes the counter,
/// not the array, so the array's address does not escape the hot loop.
#[cold]
#[inline(never)]
fn reject(counter: &mut u64) {
    *counter += 1;
}

/// Counters per 128-byte line, as in the library.
const PER_LINE: usize = 16;

/// An array of atomic counters incremented with `fetch_add(Relaxed)`,
/// padded to 128-byte lines at both ends (same layout as the library's
/// shards). Used per worker (one each, never shared: the cost of a locked
/// instruction alone) and shared by all threads (the cost of contention).
pub struct AtomicArray {
    max: usize,
    lines: Box<[CachePadded<[AtomicU64; PER_LINE]>]>,
}

impl AtomicArray {
    pub fn new(max: usize) -> Self {
        let max = black_box(max);
        Self {
            max,
            lines: (0..slots(max).div_ceil(PER_LINE))
                .map(|_| CachePadded::new(core::array::from_fn(|_| AtomicU64::new(0))))
                .collect(),
        }
    }

    #[inline(always)]
    pub fn observe(&self, k: usize, a: usize) -> bool {
        let (i, ok) = slot(self.max, k, a);
        self.lines[i / PER_LINE][i % PER_LINE].fetch_add(1, Ordering::Relaxed);
        ok
    }
}

/// `parking_lot::Mutex<[u64; N]>`: lock, `+= 1`, unlock.
pub struct ParkingLotArray<const N: usize> {
    max: usize,
    counts: parking_lot::Mutex<[u64; N]>,
}

impl<const N: usize> ParkingLotArray<N> {
    pub fn new(max: usize) -> Self {
        assert_eq!(N, slots(max));
        let max = black_box(max);
        Self {
            max,
            counts: parking_lot::Mutex::new([0; N]),
        }
    }

    #[inline(always)]
    pub fn observe(&self, k: usize, a: usize) -> bool {
        let (i, ok) = slot(self.max, k, a);
        self.counts.lock()[i] += 1;
        ok
    }
}

/// `std::sync::Mutex<[u64; N]>`: lock, `+= 1`, unlock.
pub struct StdMutexArray<const N: usize> {
    max: usize,
    counts: std::sync::Mutex<[u64; N]>,
}

impl<const N: usize> StdMutexArray<N> {
    pub fn new(max: usize) -> Self {
        assert_eq!(N, slots(max));
        let max = black_box(max);
        Self {
            max,
            counts: std::sync::Mutex::new([0; N]),
        }
    }

    #[inline(always)]
    pub fn observe(&self, k: usize, a: usize) -> bool {
        let (i, ok) = slot(self.max, k, a);
        // A poisoned lock only means another bench thread panicked.
        self.counts.lock().unwrap_or_else(|e| e.into_inner())[i] += 1;
        ok
    }
}

/// The labels a user of prometheus-client would write for the histogram.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BucketLabels {
    pub draft_length: u64,
    pub accepted: u64,
}

/// What a user writes today: a `Family` of counters labelled by draft
/// length and accepted count, one `get_or_create(&labels).inc()` per
/// observation, and a plain counter for rejected input.
pub struct PromFamily {
    max: usize,
    buckets: Family<BucketLabels, Counter>,
    rejected: Counter,
}

impl PromFamily {
    pub fn new(max: usize) -> Self {
        let max = black_box(max);
        Self {
            max,
            buckets: Family::default(),
            rejected: Counter::default(),
        }
    }

    /// Creates every label set once, as a long-running server would have.
    pub fn prefill(&self) {
        for k in 0..=self.max {
            for a in 0..=k {
                self.observe(k, a);
            }
        }
    }

    #[inline(always)]
    pub fn observe(&self, k: usize, a: usize) -> bool {
        if k <= self.max && a <= k {
            self.buckets
                .get_or_create(&BucketLabels {
                    draft_length: k as u64,
                    accepted: a as u64,
                })
                .inc();
            true
        } else {
            self.rejected.inc();
            false
        }
    }
}

/// A fixed set of threads, spawned once, that run a closure on command.
///
/// [`run`](Self::run) lets every thread past a start barrier, each one
/// times its own `iters` passes with its own clock, then they meet at an end
/// barrier; `run` returns the slowest thread's time. Criterion's
/// `iter_custom` calls `run`; no thread is ever spawned inside a
/// measurement.
pub struct Pool {
    shared: Arc<PoolShared>,
    handles: Vec<JoinHandle<()>>,
}

struct PoolShared {
    start: Barrier,
    end: Barrier,
    iters: AtomicU64,
    stop: AtomicBool,
    elapsed_ns: Vec<AtomicU64>,
}

impl Pool {
    /// Spawns `threads` threads. Thread `t` builds its state with
    /// `make(t)` (on that thread, so `!Sync` handles such as `Worker` are
    /// fine), then each pass calls `work(&mut state)`.
    pub fn new<S, M, W>(threads: usize, make: M, work: W) -> Self
    where
        S: 'static,
        M: Fn(usize) -> S + Send + Sync + 'static,
        W: Fn(&mut S) -> usize + Send + Sync + 'static,
    {
        let shared = Arc::new(PoolShared {
            start: Barrier::new(threads + 1),
            end: Barrier::new(threads + 1),
            iters: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            elapsed_ns: (0..threads).map(|_| AtomicU64::new(0)).collect(),
        });
        let make = Arc::new(make);
        let work = Arc::new(work);
        let handles = (0..threads)
            .map(|t| {
                let (shared, make, work) =
                    (Arc::clone(&shared), Arc::clone(&make), Arc::clone(&work));
                std::thread::spawn(move || {
                    let mut state = make(t);
                    loop {
                        shared.start.wait();
                        // The barrier orders these loads after `run`'s stores.
                        if shared.stop.load(Ordering::Relaxed) {
                            break;
                        }
                        let iters = shared.iters.load(Ordering::Relaxed);
                        let mut sink = 0usize;
                        let started = Instant::now();
                        for _ in 0..iters {
                            sink = sink.wrapping_add(work(&mut state));
                        }
                        let elapsed = started.elapsed();
                        black_box(sink);
                        shared.elapsed_ns[t].store(elapsed.as_nanos() as u64, Ordering::Relaxed);
                        shared.end.wait();
                    }
                })
            })
            .collect();
        Self { shared, handles }
    }

    /// Runs `iters` passes on every thread; the slowest thread's time.
    pub fn run(&self, iters: u64) -> Duration {
        self.shared.iters.store(iters, Ordering::Relaxed);
        self.shared.start.wait();
        self.shared.end.wait();
        let slowest = self
            .shared
            .elapsed_ns
            .iter()
            .map(|e| e.load(Ordering::Relaxed))
            .max()
            .unwrap_or(0);
        Duration::from_nanos(slowest)
    }

    pub fn threads(&self) -> usize {
        self.handles.len()
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.shared.start.wait();
        for handle in self.handles.drain(..) {
            handle.join().expect("bench thread panicked");
        }
    }
}

/// Spare counters at each end of a [`PaddedCounters`]: 16 × 8 bytes, the
/// 128-byte pair of lines x86-64 and aarch64 prefetch together (the
/// library's shards pad the same way).
const COUNTER_PAD: usize = 16;

/// One worker's counters as a hand-written recorder would keep them, the
/// baseline of a snapshot: an array of atomics of its own allocation, with
/// 128 bytes of spare counters at each end.
pub struct PaddedCounters {
    counters: Box<[AtomicU64]>,
}

impl PaddedCounters {
    /// `len` counters, counter `i` holding `i + seed`.
    pub fn new(len: usize, seed: u64) -> Self {
        let counters = (0..COUNTER_PAD + len + COUNTER_PAD)
            .map(|i| {
                let live = (COUNTER_PAD..COUNTER_PAD + len).contains(&i);
                AtomicU64::new(if live {
                    (i - COUNTER_PAD) as u64 + seed
                } else {
                    0
                })
            })
            .collect();
        Self { counters }
    }

    fn live(&self) -> &[AtomicU64] {
        &self.counters[COUNTER_PAD..self.counters.len() - COUNTER_PAD]
    }
}

/// The plain relaxed sum a snapshot is measured against: every counter of
/// every array, one relaxed load each, added (saturating, as the library
/// does) into a fresh array of totals.
#[inline(never)]
pub fn relaxed_sum(arrays: &[PaddedCounters], len: usize) -> Vec<u64> {
    let mut totals = vec![0u64; len];
    for array in arrays {
        for (total, counter) in totals.iter_mut().zip(array.live()) {
            *total = total.saturating_add(counter.load(Ordering::Relaxed));
        }
    }
    totals
}

/// [`relaxed_sum`] with a plain (wrapping) `+`: the cheapest sum of the
/// counters, one add per counter, no saturation.
#[inline(never)]
pub fn relaxed_sum_wrapping(arrays: &[PaddedCounters], len: usize) -> Vec<u64> {
    let mut totals = vec![0u64; len];
    for array in arrays {
        for (total, counter) in totals.iter_mut().zip(array.live()) {
            *total = total.wrapping_add(counter.load(Ordering::Relaxed));
        }
    }
    totals
}
