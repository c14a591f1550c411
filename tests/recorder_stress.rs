//! Many threads, many worker lives (some ending in a panic), steps and
//! scheduled budgets recorded through each thread's `Worker` and through
//! `Recorder::observe`/`observe_scheduled`, and a metrics thread
//! snapshotting all the time: no bucket and no budget counter is ever
//! smaller than in a snapshot that happened-before (the metrics thread's
//! previous one), and the final snapshot is exactly what every thread
//! recorded.

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

/// One step of a worker's life.
#[derive(Clone, Copy)]
enum Step {
    Verify(usize, usize),
    Undrafted,
    Scheduled(usize),
}

/// One thread's life: `lives` workers one after another, each recording a
/// few hundred steps (valid, invalid, undrafted, and scheduled budgets valid
/// and not), about one in four through the `Recorder` instead of the
/// worker, and mirroring them into `mine`; every fifth life panics while it
/// holds its worker.
fn worker_thread(recorder: &Recorder, seed: u64, lives: usize) -> AcceptanceHistogram {
    let mut rng = Rng(seed);
    let mut mine = AcceptanceHistogram::new(MAX_DRAFT_LEN).unwrap();
    for life in 0..lives {
        let steps = 50 + rng.below(200);
        let mut batch = Vec::with_capacity(steps);
        for _ in 0..steps {
            let any_thread = rng.below(4) == 0;
            let step = match rng.below(20) {
                0 => Step::Undrafted,
                1 => Step::Verify(MAX_DRAFT_LEN + 1 + rng.below(3), 0), // k > K
                2 => Step::Verify(1, 2),                                // a > k
                3..=6 => Step::Scheduled(rng.below(MAX_DRAFT_LEN as u64 + 1)),
                7 => Step::Scheduled(MAX_DRAFT_LEN + 1 + rng.below(3)), // b > K
                _ => {
                    let k = rng.below(MAX_DRAFT_LEN as u64 + 1);
                    Step::Verify(k, rng.below(k as u64 + 1))
                }
            };
            batch.push((any_thread, step));
        }
        for (_, step) in &batch {
            match *step {
                Step::Undrafted => mine.observe_undrafted(),
                Step::Verify(k, a) => {
                    let _ = mine.observe(k, a);
                }
                Step::Scheduled(b) => {
                    let _ = mine.observe_scheduled(b);
                }
            }
        }
        let panics = life % 5 == 4;
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let worker = recorder.worker();
            for &(any_thread, step) in &batch {
                match (any_thread, step) {
                    (false, Step::Undrafted) => worker.observe_undrafted(),
                    (false, Step::Verify(k, a)) => {
                        let _ = worker.observe(k, a);
                    }
                    (false, Step::Scheduled(b)) => {
                        let _ = worker.observe_scheduled(b);
                    }
                    (true, Step::Undrafted) => recorder.observe_undrafted(),
                    (true, Step::Verify(k, a)) => {
                        let _ = recorder.observe(k, a);
                    }
                    (true, Step::Scheduled(b)) => {
                        let _ = recorder.observe_scheduled(b);
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
fn no_bucket_shrinks_between_snapshots_and_the_final_one_is_exact() {
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
                // `delta_since` checks every counter: buckets, side counters
                // and scheduled budgets.
                if let Err(e) = next.delta_since(&previous) {
                    panic!("a counter is smaller than in the previous snapshot: {e}");
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
    assert!(
        expected.scheduled_steps_by_budget().iter().all(|&c| c > 0),
        "every budget recorded: {:?}",
        expected.scheduled_steps_by_budget()
    );
    assert!(snapshots > 0, "the metrics thread never took a snapshot");
    assert!(
        recorder.shard_count() <= THREADS,
        "{} shards for at most {THREADS} live workers",
        recorder.shard_count()
    );
    assert_eq!(recorder.live_workers(), 0, "the live count drifted");
}

/// `Recorder::observe` from four times as many threads as there can be
/// stripes, all recording at once: every step lands in its own bucket once,
/// whichever stripe each thread was given.
#[test]
fn any_thread_path_from_more_threads_than_stripes_adds_up() {
    const THREADS: usize = 64; // 4 x the largest stripe count
    const STEPS: usize = 500;
    let recorder = Recorder::new(MAX_DRAFT_LEN).unwrap();
    let start = Arc::new(Barrier::new(THREADS));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (recorder, start) = (recorder.clone(), Arc::clone(&start));
            thread::spawn(move || {
                // Each thread its own bucket (and some undrafted and
                // rejected steps), so a count landing in the wrong stripe
                // position shows up as a wrong bucket.
                let k = t % (MAX_DRAFT_LEN + 1);
                let a = (t / (MAX_DRAFT_LEN + 1)) % (k + 1);
                let b = (t / 3) % (MAX_DRAFT_LEN + 1);
                let mut mine = AcceptanceHistogram::new(MAX_DRAFT_LEN).unwrap();
                start.wait();
                for i in 0..STEPS {
                    recorder.observe(k, a).unwrap();
                    mine.observe(k, a).unwrap();
                    if i % 3 == t % 3 {
                        recorder.observe_scheduled(b).unwrap();
                        mine.observe_scheduled(b).unwrap();
                    }
                    if i % 100 == 0 {
                        assert!(recorder.observe_scheduled(MAX_DRAFT_LEN + 1).is_err());
                        assert!(mine.observe_scheduled(MAX_DRAFT_LEN + 1).is_err());
                    }
                    if i % 7 == t % 7 {
                        recorder.observe_undrafted();
                        mine.observe_undrafted();
                    }
                    if i % 50 == 0 {
                        assert!(recorder.observe(k, k + 1).is_err());
                        assert!(mine.observe(k, k + 1).is_err());
                    }
                }
                mine
            })
        })
        .collect();
    let mut expected = AcceptanceHistogram::new(MAX_DRAFT_LEN).unwrap();
    for t in threads {
        expected.merge(&t.join().unwrap()).unwrap();
    }
    assert_eq!(recorder.snapshot(), expected);
    assert_eq!(recorder.shard_count(), 0);
}
