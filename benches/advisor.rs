//! The advisor's cost, off the recording path: what a metrics thread pays
//! per interval.
//!
//! - `advisor/recommend`: `Advisor::recommend` on a histogram with every
//!   bucket observed, K = 8 and K = 64 (the full report: every position and
//!   every draft length with its interval).
//! - `advisor/controller_update`: `DraftController::update` with one
//!   interval's histogram, K = 8 and K = 64.
//! - `advisor/draft_len_for`: what an engine thread pays per step to ask
//!   the controller what to draft, and `advisor/shared_plan_draft_len_for`
//!   the same through the `SharedPlan` the metrics thread publishes to (one
//!   relaxed atomic load more).
//!
//! See `benches/README.md` for results.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use specdec_metrics::{AcceptanceHistogram, Advisor, DraftController, SharedPlan, StepCost};

/// Every bucket `(k, a)` observed `1 + (k + a) % 7` times.
fn full_histogram(max: usize) -> AcceptanceHistogram {
    let mut h = AcceptanceHistogram::new(max).unwrap();
    for k in 0..=max {
        for a in 0..=k {
            for _ in 0..1 + (k + a) % 7 {
                h.observe(k, a).unwrap();
            }
        }
    }
    h
}

fn advisor(c: &mut Criterion) {
    let mut group = c.benchmark_group("advisor");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(40);
    let cost = StepCost::linear(1.0, 0.1).unwrap();
    for max in [8, 64] {
        let h = full_histogram(max);
        let advisor = Advisor::default();
        group.bench_function(BenchmarkId::new("recommend", format!("K={max}")), |b| {
            b.iter(|| advisor.recommend(black_box(&h), &cost));
        });
        let mut controller = DraftController::new(max, cost.clone()).unwrap();
        group.bench_function(
            BenchmarkId::new("controller_update", format!("K={max}")),
            |b| {
                b.iter(|| controller.update(black_box(&h)));
            },
        );
        let controller = DraftController::new(max, cost.clone()).unwrap();
        group.bench_function(BenchmarkId::new("draft_len_for", format!("K={max}")), |b| {
            let mut step = 0u64;
            b.iter(|| {
                step = step.wrapping_add(1);
                controller.draft_len_for(black_box(step))
            });
        });
        let plan = SharedPlan::new(controller.plan());
        group.bench_function(
            BenchmarkId::new("shared_plan_draft_len_for", format!("K={max}")),
            |b| {
                let mut step = 0u64;
                b.iter(|| {
                    step = step.wrapping_add(1);
                    black_box(&plan).draft_len_for(black_box(step))
                });
            },
        );
    }
    group.finish();
}

criterion_group!(benches, advisor);
criterion_main!(benches);
