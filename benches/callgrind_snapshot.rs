//! Driver for `benches/callgrind_snapshot.sh`: takes N snapshots of one
//! variant so callgrind can count the instructions per snapshot.
//!
//! ```text
//! callgrind_snapshot VARIANT N WORKERS
//! ```
//!
//! VARIANT is `snapshot` (`Recorder::snapshot()`), `relaxed_sum` (the
//! plain relaxed sum of the same counters in separately allocated padded
//! arrays, one per worker: `common::relaxed_sum`, saturating as a snapshot
//! is) or `relaxed_sum_wrapping` (the same with a plain `+`), at K = 8 with WORKERS
//! live workers, each of which wrote every counter. The script runs each
//! variant with two values of N and divides the difference in instructions
//! by the difference in N, which cancels start-up and setup.
//!
//! `callgrind_snapshot interleaved WORKERS ROUNDS` times the three
//! variants instead, for this shared machine: in each round 200 calls of
//! each, in turn, so a burst of load from elsewhere hits all of them; it
//! prints per variant the fastest and the median round (ns per call) and
//! the snapshot's ratios to both sums.
//!
//! Run without arguments, or by `cargo bench` (which passes `--bench`), it
//! prints this usage and exits successfully, so it never slows a bench run.

mod common;

use std::hint::black_box;

use common::{PaddedCounters, relaxed_sum, relaxed_sum_wrapping};
use specdec_metrics::Recorder;

const USAGE: &str = "usage: callgrind_snapshot {snapshot|relaxed_sum|relaxed_sum_wrapping} N WORKERS\n\
    (driver for benches/callgrind_snapshot.sh; does nothing under `cargo bench`)";

/// Counters of a shard at K = 8: 45 buckets, two side counters, nine
/// scheduled budgets.
const COUNTERS: usize = 45 + 2 + 9;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("interleaved") {
        let number = |i: usize| args.get(i).and_then(|n| n.parse::<usize>().ok());
        let (Some(workers), Some(rounds)) = (number(1), number(2)) else {
            eprintln!("{USAGE}");
            std::process::exit(2);
        };
        interleaved(workers, rounds);
        return;
    }
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
        "relaxed_sum" => run_relaxed_sum(n, workers, relaxed_sum),
        "relaxed_sum_wrapping" => run_relaxed_sum(n, workers, relaxed_sum_wrapping),
        other => {
            eprintln!("unknown variant {other:?}\n{USAGE}");
            std::process::exit(2);
        }
    };
    println!("{variant} workers={workers} snapshots={n} total={total}");
}

/// A recorder at K = 8 whose `workers` live workers wrote every counter.
fn filled(workers: usize) -> (Recorder, Vec<specdec_metrics::Worker>) {
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
    (recorder, handles)
}

#[inline(never)]
fn run_snapshot(n: usize, workers: usize) -> u64 {
    let (recorder, _handles) = filled(workers);
    let mut total = 0u64;
    for _ in 0..n {
        total = total.wrapping_add(black_box(recorder.snapshot()).num_undrafted_steps());
    }
    total
}

#[inline(never)]
fn run_relaxed_sum(n: usize, workers: usize, sum: fn(&[PaddedCounters], usize) -> Vec<u64>) -> u64 {
    let arrays: Vec<PaddedCounters> = (0..workers)
        .map(|w| PaddedCounters::new(COUNTERS, w as u64))
        .collect();
    let mut total = 0u64;
    for _ in 0..n {
        total = total.wrapping_add(black_box(sum(black_box(&arrays), COUNTERS))[0]);
    }
    total
}

/// See the module docs.
fn interleaved(workers: usize, rounds: usize) {
    use std::time::Instant;
    const CALLS: u32 = 200;
    let (recorder, _handles) = filled(workers);
    let arrays: Vec<PaddedCounters> = (0..workers)
        .map(|w| PaddedCounters::new(COUNTERS, w as u64))
        .collect();
    let variants: [(&str, &dyn Fn() -> u64); 3] = [
        ("snapshot", &|| {
            black_box(recorder.snapshot()).num_undrafted_steps()
        }),
        ("relaxed_sum", &|| {
            black_box(relaxed_sum(black_box(&arrays), COUNTERS))[0]
        }),
        ("relaxed_sum_wrapping", &|| {
            black_box(relaxed_sum_wrapping(black_box(&arrays), COUNTERS))[0]
        }),
    ];
    let mut times: [Vec<f64>; 3] = Default::default();
    for round in 0..rounds {
        for i in 0..3 {
            // A different variant first in each round.
            let v = (i + round) % 3;
            let started = Instant::now();
            for _ in 0..CALLS {
                black_box(variants[v].1());
            }
            times[v].push(started.elapsed().as_nanos() as f64 / f64::from(CALLS));
        }
    }
    let mut stats = [(0.0, 0.0); 3];
    for (v, t) in times.iter_mut().enumerate() {
        t.sort_by(f64::total_cmp);
        stats[v] = (t[0], t[t.len() / 2]);
        println!(
            "workers={workers} {:<22} min {:>10.1} ns  median {:>10.1} ns",
            variants[v].0, stats[v].0, stats[v].1
        );
    }
    for (v, name) in [(1, "relaxed_sum"), (2, "relaxed_sum_wrapping")] {
        println!(
            "workers={workers} snapshot / {name:<20} min {:.3}x  median {:.3}x",
            stats[0].0 / stats[v].0,
            stats[0].1 / stats[v].1
        );
    }
}
