//! The observe hot path against its physical limit and the usual
//! alternatives, on one thread and on several.
//!
//! - `observe_single_thread`: one thread, K = 8 and K = 32, every variant.
//! - `observe_threads`: 1, 2 and 4 threads (spawned once per variant, timed
//!   inside the threads between barriers), K = 8.
//!
//! Each criterion iteration records one pass over a table of [`BATCH`]
//! pseudo-random valid pairs (read through `black_box`); the throughput is
//! reported in observations, so time per observation = time / 1024.
//! See `benches/README.md` for results.

mod common;

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use common::{
    AtomicArray, BATCH, LocalArray, ParkingLotArray, Pool, PromFamily, StdMutexArray, inputs,
    run_batch, slots,
};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use specdec_metrics::{AcceptanceHistogram, Recorder};

const SEED: u64 = 0x5eed;

fn single_thread_for<const N: usize>(
    c: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    max: usize,
) {
    assert_eq!(N, slots(max));
    let table = inputs(max, SEED);
    let table = &table[..];
    let param = format!("K={max}");

    // State is built once per variant, outside the timed closure, and
    // lives across criterion's samples (steady state, as in a server).
    let mut local = LocalArray::new(max);
    c.bench_function(BenchmarkId::new("local_array", &param), |b| {
        b.iter(|| run_batch(black_box(table), |k, a| local.observe(k, a)));
    });
    black_box(local.total());

    let recorder = Recorder::new(max).unwrap();
    let worker = recorder.worker();
    c.bench_function(BenchmarkId::new("worker", &param), |b| {
        b.iter(|| run_batch(black_box(table), |k, a| worker.observe(k, a).is_ok()));
    });

    let mut histogram = AcceptanceHistogram::new(max).unwrap();
    c.bench_function(BenchmarkId::new("histogram", &param), |b| {
        b.iter(|| run_batch(black_box(table), |k, a| histogram.observe(k, a).is_ok()));
    });
    black_box(histogram.num_spec_steps());

    let recorder = Recorder::new(max).unwrap();
    c.bench_function(BenchmarkId::new("recorder", &param), |b| {
        b.iter(|| run_batch(black_box(table), |k, a| recorder.observe(k, a).is_ok()));
    });

    let array = AtomicArray::new(max);
    c.bench_function(BenchmarkId::new("fetch_add_per_worker", &param), |b| {
        b.iter(|| run_batch(black_box(table), |k, a| array.observe(k, a)));
    });

    // On one thread the shared array is the same code as the per-worker
    // one; it is here so the group lists every baseline. The difference
    // shows only in `observe_threads`.
    let array = Arc::new(AtomicArray::new(max));
    c.bench_function(BenchmarkId::new("fetch_add_shared", &param), |b| {
        b.iter(|| run_batch(black_box(table), |k, a| array.observe(k, a)));
    });

    let array = ParkingLotArray::<N>::new(max);
    c.bench_function(BenchmarkId::new("parking_lot_mutex", &param), |b| {
        b.iter(|| run_batch(black_box(table), |k, a| array.observe(k, a)));
    });

    let array = StdMutexArray::<N>::new(max);
    c.bench_function(BenchmarkId::new("std_mutex", &param), |b| {
        b.iter(|| run_batch(black_box(table), |k, a| array.observe(k, a)));
    });

    let family = PromFamily::new(max);
    family.prefill();
    c.bench_function(BenchmarkId::new("prometheus_family", &param), |b| {
        b.iter(|| run_batch(black_box(table), |k, a| family.observe(k, a)));
    });
}

fn observe_single_thread(c: &mut Criterion) {
    let mut group = c.benchmark_group("observe_single_thread");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(40)
        .throughput(Throughput::Elements(BATCH as u64));
    single_thread_for::<{ slots(8) }>(&mut group, 8);
    single_thread_for::<{ slots(32) }>(&mut group, 32);
    group.finish();
}

/// Max draft length of the multi-thread group.
const MT_MAX: usize = 8;
const MT_SLOTS: usize = slots(MT_MAX);

/// Per-thread state: its own input table (seeded by thread) and handle.
struct Local<H> {
    table: Vec<(u8, u8)>,
    handle: H,
}

fn local<H>(t: usize, handle: H) -> Local<H> {
    Local {
        table: inputs(MT_MAX, SEED + t as u64),
        handle,
    }
}

fn bench_pool(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    pool: Pool,
) {
    let threads = pool.threads();
    group.throughput(Throughput::Elements((threads * BATCH) as u64));
    group.bench_function(BenchmarkId::new(name, threads), |b| {
        b.iter_custom(|iters| pool.run(iters));
    });
}

fn observe_threads(c: &mut Criterion) {
    let mut group = c.benchmark_group("observe_threads");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30);

    for threads in [1, 2, 4] {
        bench_pool(
            &mut group,
            "local_array",
            Pool::new(
                threads,
                |t| local(t, LocalArray::new(MT_MAX)),
                |s| {
                    let h = &mut s.handle;
                    run_batch(black_box(&s.table), |k, a| h.observe(k, a))
                },
            ),
        );

        let recorder = Arc::new(Recorder::new(MT_MAX).unwrap());
        bench_pool(
            &mut group,
            "worker",
            Pool::new(
                threads,
                {
                    let recorder = Arc::clone(&recorder);
                    move |t| local(t, recorder.worker())
                },
                |s| run_batch(black_box(&s.table), |k, a| s.handle.observe(k, a).is_ok()),
            ),
        );

        let recorder = Arc::new(Recorder::new(MT_MAX).unwrap());
        bench_pool(
            &mut group,
            "recorder",
            Pool::new(
                threads,
                move |t| local(t, Arc::clone(&recorder)),
                |s| run_batch(black_box(&s.table), |k, a| s.handle.observe(k, a).is_ok()),
            ),
        );

        bench_pool(
            &mut group,
            "fetch_add_per_worker",
            Pool::new(
                threads,
                |t| local(t, AtomicArray::new(MT_MAX)),
                |s| run_batch(black_box(&s.table), |k, a| s.handle.observe(k, a)),
            ),
        );

        let shared = Arc::new(AtomicArray::new(MT_MAX));
        bench_pool(
            &mut group,
            "fetch_add_shared",
            Pool::new(
                threads,
                move |t| local(t, Arc::clone(&shared)),
                |s| run_batch(black_box(&s.table), |k, a| s.handle.observe(k, a)),
            ),
        );

        let shared = Arc::new(ParkingLotArray::<MT_SLOTS>::new(MT_MAX));
        bench_pool(
            &mut group,
            "parking_lot_mutex",
            Pool::new(
                threads,
                move |t| local(t, Arc::clone(&shared)),
                |s| run_batch(black_box(&s.table), |k, a| s.handle.observe(k, a)),
            ),
        );

        let shared = Arc::new(StdMutexArray::<MT_SLOTS>::new(MT_MAX));
        bench_pool(
            &mut group,
            "std_mutex",
            Pool::new(
                threads,
                move |t| local(t, Arc::clone(&shared)),
                |s| run_batch(black_box(&s.table), |k, a| s.handle.observe(k, a)),
            ),
        );

        let shared = Arc::new(PromFamily::new(MT_MAX));
        shared.prefill();
        bench_pool(
            &mut group,
            "prometheus_family",
            Pool::new(
                threads,
                move |t| local(t, Arc::clone(&shared)),
                |s| run_batch(black_box(&s.table), |k, a| s.handle.observe(k, a)),
            ),
        );
    }
    group.finish();
}

criterion_group!(benches, observe_single_thread, observe_threads);
criterion_main!(benches);
