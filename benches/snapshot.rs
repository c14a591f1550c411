//! The reader side: what a snapshot costs, and what it costs the writers.
//!
//! - `snapshot`: `Recorder::snapshot()` against the number of live workers
//!   (1, 8, 64, 256) and K (4, 8, 16, 64). Every bucket of every shard has
//!   been written, so all the memory read is real, touched memory.
//! - `snapshot_vs_sum/N_workers`, N = 8, 64, 256, K = 8: a snapshot against
//!   the plain relaxed sum of the same counters, held in separately
//!   allocated padded arrays, one per worker (`common::relaxed_sum`,
//!   saturating as the snapshot is, and `relaxed_sum_wrapping`, a plain
//!   `+`). Every
//!   counter written. `snapshot_vs_sum/8_workers_4_states`: the same with
//!   four request states, for `snapshot` and `snapshot_by_state`.
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

use common::{BATCH, PaddedCounters, Pool, inputs, relaxed_sum, relaxed_sum_wrapping, run_batch};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use specdec_metrics::{Recorder, Worker};

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

/// A recorder at K = 8 with `workers` live workers, each of which wrote
/// every counter of its shard (every bucket of every state, both side
/// counters, every scheduled budget), and the workers.
fn filled_recorder(workers: usize, states: usize) -> (Recorder, Vec<Worker>) {
    let recorder = Recorder::with_states(8, states).unwrap();
    let handles: Vec<_> = (0..workers).map(|_| recorder.worker()).collect();
    for worker in &handles {
        for state in 0..states {
            for k in 0..=8 {
                for a in 0..=k {
                    worker.observe_in(state, k, a).unwrap();
                }
            }
        }
        worker.observe_undrafted();
        assert!(worker.observe(9, 0).is_err());
        for budget in 0..=8 {
            worker.observe_scheduled(budget).unwrap();
        }
    }
    assert_eq!(recorder.shard_count(), workers);
    (recorder, handles)
}

/// One group per number of live workers: `Recorder::snapshot()` and, as
/// its baseline, the plain relaxed sum of the same number of counters held
/// in separately allocated padded arrays, one per worker
/// (`common::relaxed_sum`). Compare the two within a group (ratios: the
/// machine is shared and noisy).
fn snapshot_vs_sum(c: &mut Criterion) {
    for workers in [8, 64, 256] {
        let mut group = c.benchmark_group(format!("snapshot_vs_sum/{workers}_workers"));
        group
            .warm_up_time(Duration::from_secs(1))
            .measurement_time(Duration::from_secs(3))
            .sample_size(50);
        let (recorder, handles) = filled_recorder(workers, 1);
        let n = counters_written(1);
        let arrays: Vec<PaddedCounters> = (0..workers)
            .map(|w| PaddedCounters::new(n, w as u64))
            .collect();
        group.bench_function("snapshot", |b| b.iter(|| recorder.snapshot()));
        group.bench_function("relaxed_sum", |b| {
            b.iter(|| relaxed_sum(black_box(&arrays), n))
        });
        group.bench_function("relaxed_sum_wrapping", |b| {
            b.iter(|| relaxed_sum_wrapping(black_box(&arrays), n))
        });
        drop(handles);
        group.finish();
    }
    // Four states at 8 workers: `snapshot_by_state()` and `snapshot()` (the
    // states folded into one triangle) against the sum of four triangles.
    let mut group = c.benchmark_group("snapshot_vs_sum/8_workers_4_states");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50);
    let (recorder, handles) = filled_recorder(8, 4);
    let n = counters_written(4);
    let arrays: Vec<PaddedCounters> = (0..8).map(|w| PaddedCounters::new(n, w)).collect();
    group.bench_function("snapshot", |b| b.iter(|| recorder.snapshot()));
    group.bench_function("snapshot_by_state", |b| {
        b.iter(|| recorder.snapshot_by_state())
    });
    group.bench_function("relaxed_sum", |b| {
        b.iter(|| relaxed_sum(black_box(&arrays), n))
    });
    drop(handles);
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
