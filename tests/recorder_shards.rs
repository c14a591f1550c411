//! Shards are reused, counts and all, and never outnumber the peak of live
//! workers.

use std::sync::{Arc, Barrier};
use std::thread;

use specdec_metrics::{AcceptanceHistogram, Recorder};

#[test]
fn shard_count_follows_the_peak_of_live_workers() {
    let recorder = Recorder::new(3).unwrap();
    assert_eq!(recorder.shard_count(), 0);
    let three: Vec<_> = (0..3).map(|_| recorder.worker()).collect();
    assert_eq!(recorder.shard_count(), 3);
    drop(three);
    for _ in 0..10 {
        let (a, b) = (recorder.worker(), recorder.worker());
        a.observe(1, 1).unwrap();
        b.observe(2, 0).unwrap();
    }
    assert_eq!(recorder.shard_count(), 3, "dropped shards were not reused");
    let four: Vec<_> = (0..4).map(|_| recorder.worker()).collect();
    assert_eq!(recorder.shard_count(), 4);
    drop(four);
    assert_eq!(recorder.live_workers(), 0);
    let s = recorder.snapshot();
    assert_eq!((s.count(1, 1), s.count(2, 0)), (10, 10));
}

#[test]
fn dropped_worker_counts_survive_reuse() {
    let recorder = Recorder::new(2).unwrap();
    let w = recorder.worker();
    for _ in 0..7 {
        w.observe(2, 1).unwrap();
    }
    let index = w.shard_index();
    drop(w);
    let w = recorder.worker();
    assert_eq!(w.shard_index(), index);
    w.observe(2, 1).unwrap();
    assert_eq!(recorder.snapshot().count(2, 1), 8);
    drop(w);
    assert_eq!(recorder.live_workers(), 0);
}

#[test]
fn live_workers_counts_the_workers_alive() {
    let recorder = Recorder::new(2).unwrap();
    assert_eq!(recorder.live_workers(), 0);
    let a = recorder.worker();
    let b = recorder.worker();
    let c = recorder.worker();
    assert_eq!(recorder.live_workers(), 3);
    drop(b);
    assert_eq!(recorder.live_workers(), 2);
    let clone = recorder.clone();
    let d = clone.worker();
    assert_eq!((recorder.live_workers(), clone.live_workers()), (3, 3));
    drop((a, c, d));
    assert_eq!(recorder.live_workers(), 0);
}

/// Many shards over several segments of the shard list: each worker gets a
/// shard of its own, every count lands in the snapshot once, released
/// shards are all reused (most recently released first) and the shard count
/// stays at the peak.
#[test]
fn thousands_of_workers_get_distinct_shards_and_all_are_reused() {
    const WORKERS: usize = 1_500; // shards 0..1500: segments 0 to 10
    const { assert!(WORKERS % 4 == 0) };
    let recorder = Recorder::new(3).unwrap();
    let workers: Vec<_> = (0..WORKERS).map(|_| recorder.worker()).collect();
    let mut indices: Vec<_> = workers.iter().map(|w| w.shard_index()).collect();
    indices.sort_unstable();
    assert_eq!(indices, (0..WORKERS).collect::<Vec<_>>());
    for (i, w) in workers.iter().enumerate() {
        // Shard i gets i % 4 steps (3, a), so any shard missed or counted
        // twice changes the snapshot.
        for _ in 0..i % 4 {
            w.observe(3, i % 4).unwrap();
        }
    }
    assert_eq!(recorder.shard_count(), WORKERS);
    assert_eq!(recorder.live_workers(), WORKERS);
    // WORKERS / 4 shards per residue a, each with a steps (3, a).
    let expected =
        |s: &AcceptanceHistogram| (0..4).all(|a| s.count(3, a) == (a * WORKERS / 4) as u64);
    let s = recorder.snapshot();
    assert!(expected(&s), "{s:?}");

    // Release every shard, in creation order; claims come back newest
    // first, each with its counts.
    drop(workers);
    assert_eq!(recorder.live_workers(), 0);
    let again: Vec<_> = (0..WORKERS).map(|_| recorder.worker()).collect();
    let order: Vec<_> = again.iter().map(|w| w.shard_index()).collect();
    assert_eq!(order, (0..WORKERS).rev().collect::<Vec<_>>());
    assert_eq!(
        recorder.shard_count(),
        WORKERS,
        "a free shard was not reused"
    );
    for w in &again {
        w.observe(1, 1).unwrap();
    }
    let s = recorder.snapshot();
    assert_eq!(s.count(1, 1), WORKERS as u64);
    assert!(expected(&s), "counts were lost in the hand-over: {s:?}");
    drop(again);
    assert_eq!(recorder.live_workers(), 0);
}

#[test]
fn getters_report_the_configured_max_draft_len() {
    for max in [1, 7, 64] {
        let recorder = Recorder::new(max).unwrap();
        assert_eq!(recorder.max_draft_len(), max);
        assert_eq!(recorder.worker().max_draft_len(), max);
    }
}

#[test]
fn debug_shows_what_a_recorder_and_a_worker_hold() {
    let recorder = Recorder::new(3).unwrap();
    let _a = recorder.worker();
    let b = recorder.worker();
    let text = format!("{recorder:?}");
    // One stripe per CPU (rounded up to a power of two, at most 16).
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let stripes = cpus.next_power_of_two().min(16);
    assert_eq!(
        text,
        format!("Recorder {{ max_draft_len: 3, shards: 2, live_workers: 2, stripes: {stripes} }}")
    );
    assert_eq!(
        format!("{b:?}"),
        "Worker { max_draft_len: 3, shard: 1, .. }"
    );
}

#[test]
fn concurrent_churn_never_allocates_more_shards_than_threads() {
    const THREADS: usize = 4;
    let recorder = Recorder::new(2).unwrap();
    let start = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let (recorder, start) = (recorder.clone(), Arc::clone(&start));
            thread::spawn(move || {
                start.wait();
                for i in 0..5_000 {
                    // At most one worker per thread at any time.
                    let w = recorder.worker();
                    w.observe(i % 3, 0).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert!(
        recorder.shard_count() <= THREADS,
        "{} shards for {THREADS} threads",
        recorder.shard_count()
    );
    assert_eq!(
        recorder.snapshot().num_spec_steps(),
        (THREADS * 5_000) as u64
    );
    assert_eq!(recorder.live_workers(), 0, "the live count drifted");
}

#[test]
fn worker_is_send_but_not_sync_and_recorder_is_send_sync() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Recorder>();
    send::<specdec_metrics::Worker>();
    // `Worker: !Sync` and `!Clone` are checked by the compile_fail doc test
    // on `Worker`.
}
