//! Many threads, many worker lives (some ending in a panic), and a metrics
//! thread snapshotting all the time: snapshots never go back, and the final
//! snapshot is exactly what every thread recorded.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use specdec_metrics::{AcceptanceHistogram, Recorder};

const MAX_DRAFT_LEN: usize = 5;

/// A small deterministic generator (xorshift64*), seeded per thread.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> usize {
        (self.next() % n) as usize
    }
}

/// One thread's life: `lives` workers one after another, each recording a
/// few hundred steps (valid, invalid and undrafted) and mirroring them into
/// `mine`; every fifth life panics while it holds its worker.
fn worker_thread(recorder: &Recorder, seed: u64, lives: usize) -> AcceptanceHistogram {
    let mut rng = Rng(seed);
    let mut mine = AcceptanceHistogram::new(MAX_DRAFT_LEN).unwrap();
    for life in 0..lives {
        let steps = 50 + rng.below(200);
        let mut batch = Vec::with_capacity(steps);
        for _ in 0..steps {
            batch.push(match rng.below(20) {
                0 => None,                                        // undrafted
                1 => Some((MAX_DRAFT_LEN + 1 + rng.below(3), 0)), // k > K
                2 => Some((1, 2)),                                // a > k
                _ => {
                    let k = rng.below(MAX_DRAFT_LEN as u64 + 1);
                    Some((k, rng.below(k as u64 + 1)))
                }
            });
        }
        for step in &batch {
            match *step {
                None => mine.observe_undrafted(),
                Some((k, a)) => {
                    let _ = mine.observe(k, a);
                }
            }
        }
        let panics = life % 5 == 4;
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let worker = recorder.worker();
            for step in &batch {
                match *step {
                    None => worker.observe_undrafted(),
                    Some((k, a)) => {
                        let _ = worker.observe(k, a);
                    }
                }
            }
            if panics {
                panic!("intentional panic while holding a Worker");
            }
        }));
        assert_eq!(result.is_err(), panics);
    }
    mine
}

#[test]
fn snapshots_are_monotonic_and_the_final_one_is_exact() {
    // Silence the intentional panics; anything else still reports.
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let intentional = info
            .payload()
            .downcast_ref::<&str>()
            .is_some_and(|m| m.starts_with("intentional panic"));
        if !intentional {
            default_hook(info);
        }
    }));

    const THREADS: usize = 4;
    let recorder = Recorder::new(MAX_DRAFT_LEN).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let start = Arc::new(Barrier::new(THREADS + 1));

    let metrics = {
        let (recorder, done, start) = (recorder.clone(), Arc::clone(&done), Arc::clone(&start));
        thread::spawn(move || {
            start.wait();
            let mut previous = recorder.snapshot();
            let mut snapshots = 0u64;
            // Relaxed: only a stop signal; the joins below order the rest.
            while !done.load(Ordering::Relaxed) {
                let next = recorder.snapshot();
                if let Err(e) = next.delta_since(&previous) {
                    panic!("snapshot went backwards: {e}");
                }
                previous = next;
                snapshots += 1;
            }
            snapshots
        })
    };
    let writers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (recorder, start) = (recorder.clone(), Arc::clone(&start));
            thread::spawn(move || {
                start.wait();
                worker_thread(&recorder, 0x9E37_79B9_7F4A_7C15 ^ (t as u64 + 1), 2_000)
            })
        })
        .collect();

    let mut expected = AcceptanceHistogram::new(MAX_DRAFT_LEN).unwrap();
    for w in writers {
        expected.merge(&w.join().unwrap()).unwrap();
    }
    done.store(true, Ordering::Relaxed);
    let snapshots = metrics.join().unwrap();

    let fin = recorder.snapshot();
    assert_eq!(
        fin, expected,
        "final snapshot differs from what the threads recorded"
    );
    assert!(expected.num_rejected_observations() > 0 && expected.num_undrafted_steps() > 0);
    assert!(snapshots > 0, "the metrics thread never took a snapshot");
    assert!(
        recorder.shard_count() <= THREADS,
        "{} shards for at most {THREADS} live workers",
        recorder.shard_count()
    );
}
