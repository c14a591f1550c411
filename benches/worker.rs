//! What `Recorder::worker()` costs against the number of live workers.
//!
//! Group `worker`, K = 8, at 1, 1,000 and 20,000 live workers:
//!
//! - `claim_free_shard/n`: `n - 1` workers are alive and hold their shards,
//!   one shard is free (the one created last, so a claim that scans the
//!   shards in creation order walks all of them). One iteration is
//!   `drop(recorder.worker())`: claim the free shard, release it. This is
//!   the steady state of an engine that starts and stops workers.
//! - `create_all/n`: a fresh recorder, then `n` workers created one after
//!   another and kept alive, so every call creates a shard. Reported per
//!   worker (throughput `n` elements), so a constant cost per claim shows
//!   as the same figure at every `n`, and a cost that grows with the
//!   number of shards shows as a figure that grows with `n`.
//!
//! See `benches/README.md` for results.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{
    BenchmarkId, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use specdec_metrics::{Recorder, Worker};

const MAX_DRAFT_LEN: usize = 8;
const LIVE: [usize; 3] = [1, 1_000, 20_000];

fn claim_free_shard(c: &mut Criterion) {
    let mut group = c.benchmark_group("worker");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
        .throughput(Throughput::Elements(1));
    for live in LIVE {
        let recorder = Recorder::new(MAX_DRAFT_LEN).unwrap();
        let mut held: Vec<Worker> = (0..live).map(|_| recorder.worker()).collect();
        // Free the shard created last; the others stay held.
        drop(held.pop());
        assert_eq!(recorder.shard_count(), live);
        group.bench_function(BenchmarkId::new("claim_free_shard", live), |b| {
            b.iter(|| drop(black_box(recorder.worker())));
        });
        assert_eq!(recorder.shard_count(), live, "a claim created a shard");
        drop(held);
    }
    group.finish();
}

fn create_all(c: &mut Criterion) {
    let mut group = c.benchmark_group("worker");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10);
    for live in LIVE {
        group.throughput(Throughput::Elements(live as u64));
        group.bench_function(BenchmarkId::new("create_all", live), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let recorder = Recorder::new(MAX_DRAFT_LEN).unwrap();
                    let mut held = Vec::with_capacity(live);
                    let start = Instant::now();
                    for _ in 0..live {
                        held.push(recorder.worker());
                    }
                    total += start.elapsed();
                    assert_eq!(recorder.shard_count(), live);
                    drop(black_box(held));
                }
                total
            });
        });
    }
    group.finish();
}

criterion_group!(benches, claim_free_shard, create_all);
criterion_main!(benches);
