//! Driver for `benches/callgrind_snapshot.sh`: takes N snapshots of one
//! variant so callgrind can count the instructions per snapshot.
//!
//! ```text
//! callgrind_snapshot VARIANT N WORKERS
//! ```
//!
//! VARIANT is `snapshot` (`Recorder::snapshot()`) or `relaxed_sum` (the
//! plain relaxed sum of the same counters in separately allocated padded
//! arrays, one per worker: `common::relaxed_sum`), at K = 8 with WORKERS
//! live workers, each of which wrote every counter. The script runs each
//! variant with two values of N and divides the difference in instructions
//! by the difference in N, which cancels start-up and setup.
//!
//! Run without arguments, or by `cargo bench` (which passes `--bench`), it
//! prints this usage and exits successfully, so it never slows a bench run.

mod common;

use std::hint::black_box;

use common::{PaddedCounters, relaxed_sum};
use specdec_metrics::Recorder;

const USAGE: &str = "usage: callgrind_snapshot {snapshot|relaxed_sum} N WORKERS\n\
    (driver for benches/callgrind_snapshot.sh; does nothing under `cargo bench`)";

/// Counters of a shard at K = 8: 45 buckets, two side counters, nine
/// scheduled budgets.
const COUNTERS: usize = 45 + 2 + 9;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(variant), Some(n), Some(workers)) = (
        args.first(),
        args.get(1).and_then(|n| n.parse::<usize>().ok()),
        args.get(2).and_then(|w| w.parse::<usize>().ok()),
    ) else {
        eprintln!("{USAGE}");
        return;
    };
    let total = match variant.as_str() {
        "snapshot" => run_snapshot(n, workers),
        "relaxed_sum" => run_relaxed_sum(n, workers),
        other => {
            eprintln!("unknown variant {other:?}\n{USAGE}");
            std::process::exit(2);
        }
    };
    println!("{variant} workers={workers} snapshots={n} total={total}");
}

#[inline(never)]
fn run_snapshot(n: usize, workers: usize) -> u64 {
    let recorder = Recorder::new(8).unwrap();
    let handles: Vec<_> = (0..workers).map(|_| recorder.worker()).collect();
    for worker in &handles {
        for k in 0..=8 {
            for a in 0..=k {
                worker.observe(k, a).unwrap();
            }
        }
        worker.observe_undrafted();
        assert!(worker.observe(9, 0).is_err());
        for budget in 0..=8 {
            worker.observe_scheduled(budget).unwrap();
        }
    }
    let mut total = 0u64;
    for _ in 0..n {
        total = total.wrapping_add(black_box(recorder.snapshot()).num_spec_steps());
    }
    total
}

#[inline(never)]
fn run_relaxed_sum(n: usize, workers: usize) -> u64 {
    let arrays: Vec<PaddedCounters> = (0..workers)
        .map(|w| PaddedCounters::new(COUNTERS, w as u64))
        .collect();
    let mut total = 0u64;
    for _ in 0..n {
        total = total.wrapping_add(black_box(relaxed_sum(black_box(&arrays), COUNTERS))[0]);
    }
    total
}
