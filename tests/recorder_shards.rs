//! Shards are reused, counts and all, and never outnumber the peak of live
//! workers.

use std::sync::{Arc, Barrier};
use std::thread;

use specdec_metrics::Recorder;

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
