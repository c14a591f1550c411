//! The reader side: what a snapshot costs, and what it costs the writers.
//!
//! - `snapshot`: `Recorder::snapshot()` against the number of live workers
//!   (1, 8, 64, 256) and K (4, 8, 16, 64). Every bucket of every shard has
//!   been written, so all the memory read is real, touched memory.
//! - `snapshot_vs_sum`: at 8 workers, K = 8, a snapshot against the
//!   plainest read of the same data: summing, without atomics, one array per
//!   worker of the counters it wrote into one array of totals. With one
//!   state and with four (`snapshot_by_state`), every counter written.
//! - `reader_under_load`: `Worker::observe` throughput of one writer thread
//!   alone, with a metrics thread calling `snapshot()` in a tight loop (the
//!   worst case), with one snapshotting every millisecond (still far
//!   more often than a Prometheus scrape), and, as a control, with the same
//!   tight loop on an unrelated recorder (CPU sharing without any shared
//!   cache line).
//!
//! See `benches/README.md` for results.

mod common;

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use common::{BATCH, Pool, inputs, run_batch};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use specdec_metrics::Recorder;

fn snapshot(c: &mut Criterion) {
    let mut group = c.benchmark_group("snapshot");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30);
    for max in [4, 8, 16, 64] {
        for workers in [1, 8, 64, 256] {
            let recorder = Recorder::new(max).unwrap();
            let handles: Vec<_> = (0..workers).map(|_| recorder.worker()).collect();
            for worker in &handles {
                for k in 0..=max {
                    for a in 0..=k {
                        worker.observe(k, a).unwrap();
                    }
                }
                worker.observe_undrafted();
            }
            assert_eq!(recorder.shard_count(), workers);
            group.bench_function(BenchmarkId::new(format!("K={max}"), workers), |b| {
                b.iter(|| recorder.snapshot());
            });
            drop(handles);
        }
    }
    group.finish();
}

/// Counters a worker writes at K = 8 with `states` states: the triangles,
/// two side counters, nine scheduled budgets.
fn counters_written(states: usize) -> usize {
    states * 45 + 2 + 9
}

fn snapshot_vs_sum(c: &mut Criterion) {
    const WORKERS: usize = 8;
    let mut group = c.benchmark_group("snapshot_vs_sum");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50);
    for states in [1, 4] {
        let recorder = Recorder::with_states(8, states).unwrap();
        let handles: Vec<_> = (0..WORKERS).map(|_| recorder.worker()).collect();
        for worker in &handles {
            for state in 0..states {
                for k in 0..=8 {
                    for a in 0..=k {
                        worker.observe_in(state, k, a).unwrap();
                    }
                }
            }
            worker.observe_undrafted();
            worker.observe_scheduled(8).unwrap();
        }
        let name = format!("states={states}");
        if states == 1 {
            group.bench_function(BenchmarkId::new("snapshot", &name), |b| {
                b.iter(|| recorder.snapshot());
            });
        } else {
            group.bench_function(BenchmarkId::new("snapshot_by_state", &name), |b| {
                b.iter(|| recorder.snapshot_by_state());
            });
        }
        let n = counters_written(states);
        let arrays: Vec<Vec<u64>> = (0..WORKERS)
            .map(|w| (0..n as u64).map(|i| i + w as u64).collect())
            .collect();
        group.bench_function(BenchmarkId::new("plain_sum", &name), |b| {
            b.iter(|| {
                let mut totals = vec![0u64; n];
                for array in black_box(&arrays) {
                    for (t, &c) in totals.iter_mut().zip(array) {
                        *t = t.saturating_add(c);
                    }
                }
                totals
            });
        });
        drop(handles);
    }
    group.finish();
}

/// A metrics thread that snapshots until stopped, sleeping `pause` between
/// snapshots (not at all when zero).
struct Reader {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<u64>>,
}

impl Reader {
    fn start(recorder: &Arc<Recorder>, pause: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let handle = {
            let (recorder, stop) = (Arc::clone(recorder), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut snapshots = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    black_box(recorder.snapshot());
                    snapshots += 1;
                    if !pause.is_zero() {
                        std::thread::sleep(pause);
                    }
                }
                snapshots
            })
        };
        Self {
            stop,
            handle: Some(handle),
        }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(handle) = self.handle.take() {
            let snapshots = handle.join().expect("reader thread panicked");
            eprintln!("  (metrics thread took {snapshots} snapshots)");
        }
    }
}

/// Max draft length and number of writer threads of `reader_under_load`.
/// One writer plus one reader fill this 2-vCPU machine exactly.
const LOAD_MAX: usize = 8;
const WRITERS: usize = 1;

fn reader_under_load(c: &mut Criterion) {
    let mut group = c.benchmark_group("reader_under_load");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(40)
        .throughput(Throughput::Elements((WRITERS * BATCH) as u64));

    // The control: the same metrics thread, snapshotting a recorder the
    // writer never touches. It costs the writer CPU time (a sibling
    // hyperthread, or a time slice) but shares no cache line with it, so
    // `snapshot_loop` minus `busy_loop_elsewhere` is the price of reading
    // the writer's counters.
    let elsewhere = Arc::new(Recorder::new(LOAD_MAX).unwrap());
    let _idle = elsewhere.worker();
    for (name, pause, target) in [
        ("no_reader", None, None),
        (
            "busy_loop_elsewhere",
            Some(Duration::ZERO),
            Some(&elsewhere),
        ),
        ("snapshot_loop", Some(Duration::ZERO), None),
        ("snapshot_every_1ms", Some(Duration::from_millis(1)), None),
    ] {
        let recorder = Arc::new(Recorder::new(LOAD_MAX).unwrap());
        let pool = Pool::new(
            WRITERS,
            {
                let recorder = Arc::clone(&recorder);
                move |t| (inputs(LOAD_MAX, 0x5eed + t as u64), recorder.worker())
            },
            |(table, worker)| run_batch(black_box(table), |k, a| worker.observe(k, a).is_ok()),
        );
        let reader = pause.map(|pause| Reader::start(target.unwrap_or(&recorder), pause));
        group.bench_function(BenchmarkId::new("worker", name), |b| {
            b.iter_custom(|iters| pool.run(iters));
        });
        drop(reader);
        drop(pool);
    }
    group.finish();
}

criterion_group!(benches, snapshot, snapshot_vs_sum, reader_under_load);
criterion_main!(benches);
