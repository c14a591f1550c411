//! Driver for `benches/callgrind.sh`: records N observations of one variant
//! so callgrind can count the instructions per observation.
//!
//! ```text
//! callgrind_observe VARIANT N [K]
//! ```
//!
//! VARIANT is one of `noop` (the loop and the input table alone), `local`
//! (the non-atomic array, the physical limit), `worker`, `histogram`,
//! `recorder`, `worker_scheduled` (`Worker::observe_scheduled(k)` with the
//! table's `k` as the budget), `worker_opted` (`Worker::observe` on a
//! recorder that records proposals), `worker_proposal`
//! (`Worker::observe_proposal(k + 1, a)` on a recorder of `K + 1` that
//! records proposals: one add more than the pair), `tracker` (one verify
//! step of a `ProposalTracker` per pair: `draft` of a `k`-token proposal
//! whose first mismatch is at `a`, then `a + 1` output tokens through
//! `push_token` into a worker; the driver prints the tokens), and the baselines `fetch_add` (a `fetch_add` array; on one
//! thread per-worker and shared are the same code), `parking_lot`,
//! `std_mutex` (these two for K = 8 or 32 only) and `prometheus`. N is
//! rounded up to whole passes over the 1024-pair table; K defaults to 8.
//! The script runs each variant with two values of N and divides the
//! difference in instructions by the difference in N, which cancels
//! start-up, table construction and setup.
//!
//! Run without arguments, or by `cargo bench` (which passes `--bench`), it
//! prints this usage and exits successfully, so it never slows a bench run.

mod common;

use std::hint::black_box;

use common::{
    AtomicArray, BATCH, LocalArray, ParkingLotArray, PromFamily, StdMutexArray, inputs, run_batch,
    slots,
};
use specdec_metrics::{AcceptanceHistogram, Recorder, RequestState, SharedStatePlan, StatePlan};

const USAGE: &str = "usage: callgrind_observe {noop|local|worker|histogram|recorder|worker_scheduled|worker_opted|worker_proposal|tracker|worker_in_state|state_plan|request_state|fetch_add|parking_lot|std_mutex|prometheus} N [K]\n\
    (driver for benches/callgrind.sh; does nothing under `cargo bench`)";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(variant), Some(n)) = (
        args.first(),
        args.get(1).and_then(|n| n.parse::<usize>().ok()),
    ) else {
        eprintln!("{USAGE}");
        return;
    };
    let max: usize = args.get(2).and_then(|k| k.parse().ok()).unwrap_or(8);
    let passes = n.div_ceil(BATCH);
    let table = inputs(max, 0x5eed);
    let table = &table[..];

    let rejected = match variant.as_str() {
        "noop" => run_noop(table, passes),
        "local" => run_local(table, passes, max),
        "worker" => run_worker(table, passes, max),
        "histogram" => run_histogram(table, passes, max),
        "recorder" => run_recorder(table, passes, max),
        "worker_scheduled" => run_worker_scheduled(table, passes, max),
        "worker_opted" => run_worker_opted(table, passes, max),
        "worker_proposal" => run_worker_proposal(table, passes, max),
        "tracker" => run_tracker(table, passes, max),
        "worker_in_state" => run_worker_in_state(table, passes, max),
        "state_plan" => run_state_plan(table, passes, max),
        "request_state" => run_request_state(table, passes),
        "fetch_add" => run_fetch_add(table, passes, max),
        "parking_lot" => run_parking_lot(table, passes, max),
        "std_mutex" => run_std_mutex(table, passes, max),
        "prometheus" => run_prometheus(table, passes, max),
        other => {
            eprintln!("unknown variant {other:?}\n{USAGE}");
            std::process::exit(2);
        }
    };
    assert_eq!(rejected, 0, "the input table holds valid pairs only");
    println!("{variant} K={max} observations={}", passes * BATCH);
}

// One function per variant, never inlined, so `objdump -d --disassemble=...`
// or `callgrind_annotate` shows each hot loop on its own.

#[inline(never)]
fn run_noop(table: &[(u8, u8)], passes: usize) -> usize {
    let mut sum = 0usize;
    let mut rejected = 0;
    for _ in 0..passes {
        rejected += run_batch(black_box(table), |k, a| {
            sum = sum.wrapping_add(k ^ a);
            true
        });
    }
    black_box(sum);
    rejected
}

#[inline(never)]
fn run_local(table: &[(u8, u8)], passes: usize, max: usize) -> usize {
    let mut local = LocalArray::new(max);
    let mut rejected = 0;
    for _ in 0..passes {
        rejected += run_batch(black_box(table), |k, a| local.observe(k, a));
    }
    black_box(local.total());
    rejected
}

#[inline(never)]
fn run_worker(table: &[(u8, u8)], passes: usize, max: usize) -> usize {
    let recorder = Recorder::new(max).unwrap();
    let worker = recorder.worker();
    let mut rejected = 0;
    for _ in 0..passes {
        rejected += run_batch(black_box(table), |k, a| worker.observe(k, a).is_ok());
    }
    drop(worker);
    assert_eq!(
        recorder.snapshot().num_spec_steps(),
        (passes * BATCH) as u64
    );
    rejected
}

/// `Worker::observe` on a recorder built with `record_proposals`: the
/// same code as `worker`, on a longer block.
#[inline(never)]
fn run_worker_opted(table: &[(u8, u8)], passes: usize, max: usize) -> usize {
    let recorder = Recorder::builder(max).record_proposals().build().unwrap();
    let worker = recorder.worker();
    let mut rejected = 0;
    for _ in 0..passes {
        rejected += run_batch(black_box(table), |k, a| worker.observe(k, a).is_ok());
    }
    drop(worker);
    assert_eq!(
        recorder.snapshot().num_spec_steps(),
        (passes * BATCH) as u64
    );
    rejected
}

/// `Worker::observe_proposal(k + 1, a)`: every pair of the table is a
/// valid proposal outcome of a recorder of `K + 1`.
#[inline(never)]
fn run_worker_proposal(table: &[(u8, u8)], passes: usize, max: usize) -> usize {
    let recorder = Recorder::builder(max + 1)
        .record_proposals()
        .build()
        .unwrap();
    let worker = recorder.worker();
    let mut rejected = 0;
    for _ in 0..passes {
        rejected += run_batch(black_box(table), |k, a| {
            worker.observe_proposal(k + 1, a).is_ok()
        });
    }
    drop(worker);
    assert_eq!(
        recorder.snapshot().num_resolved_proposals(),
        (passes * BATCH) as u64
    );
    rejected
}

/// A `ProposalTracker` per verify step: for the pair `(k, a)` it takes a
/// `k`-token proposal whose first mismatch with the output (all zeros)
/// is at `a` (none when `a = k`), then the `a + 1` output tokens the step
/// emits, resolving into a worker. Prints the tokens pushed.
#[inline(never)]
fn run_tracker(table: &[(u8, u8)], passes: usize, max: usize) -> usize {
    use specdec_metrics::ProposalTracker;
    let recorder = Recorder::builder(max).record_proposals().build().unwrap();
    let worker = recorder.worker();
    let mut tracker: ProposalTracker = ProposalTracker::new(max).unwrap();
    // The proposal of each pair, built before the loop.
    let proposals: Vec<Vec<u32>> = table
        .iter()
        .map(|&(k, a)| (0..k).map(|i| u32::from(i == a)).collect())
        .collect();
    let mut rejected = 0;
    let mut tokens = 0u64;
    for _ in 0..passes {
        for (&(_, a), proposal) in black_box(table).iter().zip(&proposals) {
            let k = proposal.len();
            rejected += usize::from(tracker.draft(proposal, k).is_err());
            for _ in 0..=a {
                tracker.push_token(black_box(0), &worker);
            }
            tokens += u64::from(a) + 1;
        }
    }
    tracker.finish(&worker);
    drop(worker);
    let s = recorder.snapshot();
    assert_eq!(s.num_rejected_observations(), 0);
    eprintln!(
        "tracker: {tokens} tokens, {} outcomes",
        s.num_resolved_proposals()
    );
    println!("tracker tokens={tokens}");
    rejected
}

/// `Worker::observe_in` with a recorder of four states, the state taken
/// from the table's pair (`k ^ a`, two bits).
#[inline(never)]
fn run_worker_in_state(table: &[(u8, u8)], passes: usize, max: usize) -> usize {
    let recorder = Recorder::with_states(max, 4).unwrap();
    let worker = recorder.worker();
    let mut rejected = 0;
    for _ in 0..passes {
        rejected += run_batch(black_box(table), |k, a| {
            worker.observe_in((k ^ a) & 3, k, a).is_ok()
        });
    }
    drop(worker);
    assert_eq!(
        recorder.snapshot().num_spec_steps(),
        (passes * BATCH) as u64
    );
    rejected
}

/// A request-step's read of the per-state plan:
/// `SharedStatePlan::draft_len_for` (one relaxed load), for the state the
/// table's pair gives (two bits of `k ^ a`).
#[inline(never)]
fn run_state_plan(table: &[(u8, u8)], passes: usize, max: usize) -> usize {
    let plan = StatePlan::new([1, 2, 3, 4].map(|k: usize| k.min(max)), max).unwrap();
    let shared = SharedStatePlan::new(plan);
    let states: [RequestState; 4] =
        core::array::from_fn(|s| RequestState::with_score((s as f64 + 0.5) / 4.0));
    let (mut step, mut drafted) = (0u64, 0usize);
    for _ in 0..passes {
        run_batch(black_box(table), |k, a| {
            drafted += black_box(&shared).draft_len_for(states[(k ^ a) & 3], step);
            step += 1;
            true
        });
    }
    black_box(drafted);
    0
}

/// A request's state update after a verify step: `RequestState::after`.
#[inline(never)]
fn run_request_state(table: &[(u8, u8)], passes: usize) -> usize {
    let mut state = RequestState::new();
    for _ in 0..passes {
        run_batch(black_box(table), |k, a| {
            state = state.after(k, a);
            true
        });
    }
    black_box(state);
    0
}

#[inline(never)]
fn run_worker_scheduled(table: &[(u8, u8)], passes: usize, max: usize) -> usize {
    let recorder = Recorder::new(max).unwrap();
    let worker = recorder.worker();
    let mut rejected = 0;
    for _ in 0..passes {
        rejected += run_batch(black_box(table), |k, _| worker.observe_scheduled(k).is_ok());
    }
    drop(worker);
    assert_eq!(
        recorder.snapshot().num_scheduled_steps(),
        (passes * BATCH) as u64
    );
    rejected
}

#[inline(never)]
fn run_histogram(table: &[(u8, u8)], passes: usize, max: usize) -> usize {
    let mut histogram = AcceptanceHistogram::new(max).unwrap();
    let mut rejected = 0;
    for _ in 0..passes {
        rejected += run_batch(black_box(table), |k, a| histogram.observe(k, a).is_ok());
    }
    black_box(histogram.num_spec_steps());
    rejected
}

#[inline(never)]
fn run_recorder(table: &[(u8, u8)], passes: usize, max: usize) -> usize {
    let recorder = Recorder::new(max).unwrap();
    let mut rejected = 0;
    for _ in 0..passes {
        rejected += run_batch(black_box(table), |k, a| recorder.observe(k, a).is_ok());
    }
    black_box(recorder.snapshot().num_spec_steps());
    rejected
}

#[inline(never)]
fn run_fetch_add(table: &[(u8, u8)], passes: usize, max: usize) -> usize {
    let array = AtomicArray::new(max);
    let mut rejected = 0;
    for _ in 0..passes {
        rejected += run_batch(black_box(table), |k, a| array.observe(k, a));
    }
    rejected
}

/// The mutex arrays have a compile-time size: K = 8 or 32 only.
fn mutex_k<R>(max: usize, k8: impl FnOnce() -> R, k32: impl FnOnce() -> R) -> R {
    match max {
        8 => k8(),
        32 => k32(),
        _ => {
            eprintln!("the mutex variants support K = 8 and K = 32 only");
            std::process::exit(2);
        }
    }
}

#[inline(never)]
fn run_parking_lot(table: &[(u8, u8)], passes: usize, max: usize) -> usize {
    fn run<const N: usize>(table: &[(u8, u8)], passes: usize, max: usize) -> usize {
        let array = ParkingLotArray::<N>::new(max);
        let mut rejected = 0;
        for _ in 0..passes {
            rejected += run_batch(black_box(table), |k, a| array.observe(k, a));
        }
        rejected
    }
    mutex_k(
        max,
        || run::<{ slots(8) }>(table, passes, max),
        || run::<{ slots(32) }>(table, passes, max),
    )
}

#[inline(never)]
fn run_std_mutex(table: &[(u8, u8)], passes: usize, max: usize) -> usize {
    fn run<const N: usize>(table: &[(u8, u8)], passes: usize, max: usize) -> usize {
        let array = StdMutexArray::<N>::new(max);
        let mut rejected = 0;
        for _ in 0..passes {
            rejected += run_batch(black_box(table), |k, a| array.observe(k, a));
        }
        rejected
    }
    mutex_k(
        max,
        || run::<{ slots(8) }>(table, passes, max),
        || run::<{ slots(32) }>(table, passes, max),
    )
}

#[inline(never)]
fn run_prometheus(table: &[(u8, u8)], passes: usize, max: usize) -> usize {
    let family = PromFamily::new(max);
    family.prefill();
    let mut rejected = 0;
    for _ in 0..passes {
        rejected += run_batch(black_box(table), |k, a| family.observe(k, a));
    }
    rejected
}
