//! Loom models of the interleavings `Recorder` and `Worker` rely on.
//!
//! Run with
//! `LOOM_MAX_PREEMPTIONS=2 RUSTFLAGS="--cfg specdec_loom" cargo test --release -p loom-tests`
//! (`.ci/test-all` adds `CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true` so the
//! library's debug assertions run too).
//!
//! Every model runs its reader in a spawned thread (loom issue #392: a
//! reader on the model's main thread can make loom explore a single
//! execution), records the outcomes the reader saw across all executions,
//! and asserts at the end that each outcome the model is about did occur,
//! so a model cannot pass while exploring nothing. Each also prints how many
//! executions it explored.
#![cfg(specdec_loom)]

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use loom::sync::atomic::AtomicBool;
use loom::thread;
use specdec_metrics::{AcceptanceHistogram, Recorder};

/// Outcomes seen across the executions of one model.
#[derive(Default)]
struct Seen {
    outcomes: Mutex<BTreeSet<String>>,
    executions: AtomicUsize,
}

impl Seen {
    fn record(&self, outcome: impl Into<String>) {
        self.outcomes.lock().unwrap().insert(outcome.into());
    }

    fn finish(&self, model: &str, expected: &[&str]) {
        let outcomes = self.outcomes.lock().unwrap();
        println!(
            "loom model {model}: {} executions, outcomes {:?}",
            self.executions.load(Ordering::Relaxed),
            outcomes
        );
        for e in expected {
            assert!(
                outcomes.contains(*e),
                "{model}: outcome {e:?} never occurred; seen {outcomes:?}"
            );
        }
    }
}

/// Runs `f` under loom, counting executions.
fn model(seen: &Arc<Seen>, f: impl Fn(&Arc<Seen>) + Sync + Send + 'static) {
    let seen = Arc::clone(seen);
    loom::model(move || {
        seen.executions.fetch_add(1, Ordering::Relaxed);
        f(&seen);
    });
}

/// A snapshot is a valid histogram between `lower` and `upper`, counter by
/// counter (each is a state some set of observations could produce).
fn assert_between(
    lower: &AcceptanceHistogram,
    s: &AcceptanceHistogram,
    upper: &AcceptanceHistogram,
) {
    s.delta_since(lower)
        .unwrap_or_else(|e| panic!("snapshot below the state before: {e}; {s:?}"));
    upper
        .delta_since(s)
        .unwrap_or_else(|e| panic!("snapshot above the state after: {e}; {s:?}"));
}

fn histogram(max: usize, steps: &[(usize, usize)], undrafted: u64) -> AcceptanceHistogram {
    let mut h = AcceptanceHistogram::new(max).unwrap();
    for &(k, a) in steps {
        h.observe(k, a).unwrap();
    }
    for _ in 0..undrafted {
        h.observe_undrafted();
    }
    h
}

/// Two workers observe while a reader takes two snapshots: every snapshot
/// lies between the empty and the final state, the second never below the
/// first, and the final counts are exact.
#[test]
fn two_workers_observe_while_snapshot_runs() {
    let seen = Arc::new(Seen::default());
    model(&seen, |seen| {
        let recorder = Recorder::new(1).unwrap();
        let w1 = recorder.worker();
        let w2 = recorder.worker();
        let empty = recorder.snapshot();
        let full = histogram(1, &[(1, 1), (1, 1), (1, 0)], 0);

        let a = thread::spawn(move || {
            w1.observe(1, 1).unwrap();
            w1.observe(1, 0).unwrap();
        });
        let b = thread::spawn(move || {
            w2.observe(1, 1).unwrap();
        });
        let reader = {
            let recorder = recorder.clone();
            let (empty, full) = (empty.clone(), full.clone());
            let seen = Arc::clone(seen);
            thread::spawn(move || {
                let s1 = recorder.snapshot();
                let s2 = recorder.snapshot();
                assert_between(&empty, &s1, &full);
                assert_between(&s1, &s2, &full);
                seen.record(format!("steps={}", s1.num_spec_steps()));
                seen.record(format!("(1,1)={}", s1.count(1, 1)));
            })
        };
        a.join().unwrap();
        b.join().unwrap();
        reader.join().unwrap();
        assert_eq!(recorder.snapshot(), full);
        assert_eq!(recorder.live_workers(), 0);
    });
    seen.finish(
        "two_workers_observe_while_snapshot_runs",
        &["steps=0", "steps=1", "steps=2", "steps=3", "(1,1)=1"],
    );
}

/// A worker is dropped on one thread while another thread takes a new
/// worker and a reader snapshots. Whether the new worker reuses the shard
/// or gets a fresh one, nothing is lost and nothing is counted twice.
#[test]
fn dropped_worker_shard_reclaimed_loses_nothing() {
    let seen = Arc::new(Seen::default());
    model(&seen, |seen| {
        let recorder = Recorder::new(1).unwrap();
        let w1 = recorder.worker();
        let full = histogram(1, &[(1, 1), (1, 1)], 0);
        let empty = recorder.snapshot();

        let a = thread::spawn(move || {
            w1.observe(1, 1).unwrap();
            drop(w1);
        });
        let b = {
            let recorder = recorder.clone();
            thread::spawn(move || {
                let w2 = recorder.worker();
                w2.observe(1, 1).unwrap();
                w2.shard_index()
            })
        };
        let reader = {
            let recorder = recorder.clone();
            let (empty, full) = (empty.clone(), full.clone());
            thread::spawn(move || {
                let s1 = recorder.snapshot();
                let s2 = recorder.snapshot();
                assert_between(&empty, &s1, &full);
                assert_between(&s1, &s2, &full);
                s1.count(1, 1)
            })
        };
        a.join().unwrap();
        let index = b.join().unwrap();
        let read = reader.join().unwrap();
        assert_eq!(recorder.snapshot(), full, "a count was lost or doubled");
        assert_eq!(recorder.live_workers(), 0);
        seen.record(format!("new worker on shard {index}"));
        seen.record(format!("reader saw {read}"));
    });
    seen.finish(
        "dropped_worker_shard_reclaimed_loses_nothing",
        &[
            "new worker on shard 0",
            "new worker on shard 1",
            "reader saw 0",
            "reader saw 1",
            "reader saw 2",
        ],
    );
}

/// The memory bound at its tightest: a worker is dropped on one thread, and
/// another thread that then reads `live_workers() == 0` takes a worker. At
/// most one worker was ever alive, so it must get shard 0 back, counts and
/// all, even if its first look at the free list missed the release: a
/// second shard would break the bound (shards never outnumber the peak of
/// live workers).
#[test]
fn worker_taken_after_live_reads_zero_reuses_shard_zero() {
    let seen = Arc::new(Seen::default());
    model(&seen, |seen| {
        let recorder = Recorder::new(1).unwrap();
        let w0 = recorder.worker();
        w0.observe(1, 1).unwrap();

        let a = thread::spawn(move || drop(w0));
        let b = {
            let recorder = recorder.clone();
            thread::spawn(move || {
                if recorder.live_workers() != 0 {
                    return false;
                }
                let w = recorder.worker();
                w.observe(1, 0).unwrap();
                assert_eq!(w.shard_index(), 0, "live was 0, yet shard 0 was not reused");
                assert_eq!(
                    recorder.shard_count(),
                    1,
                    "a second shard for one live worker"
                );
                true
            })
        };
        a.join().unwrap();
        let saw_zero = b.join().unwrap();
        assert_eq!(recorder.live_workers(), 0);
        assert_eq!(recorder.shard_count(), 1);
        let steps: &[(usize, usize)] = if saw_zero {
            &[(1, 1), (1, 0)]
        } else {
            &[(1, 1)]
        };
        assert_eq!(recorder.snapshot(), histogram(1, steps, 0));
        seen.record(format!("saw live_workers() == 0: {saw_zero}"));
    });
    seen.finish(
        "worker_taken_after_live_reads_zero_reuses_shard_zero",
        &[
            "saw live_workers() == 0: true",
            "saw live_workers() == 0: false",
        ],
    );
}

/// Two threads race `worker()` for one free shard: exactly one claims it
/// (and carries on from its counts), the other gets a fresh shard.
#[test]
fn racing_workers_claim_one_free_shard_once() {
    let seen = Arc::new(Seen::default());
    model(&seen, |seen| {
        let recorder = Recorder::new(1).unwrap();
        let w0 = recorder.worker();
        w0.observe(0, 0).unwrap();
        drop(w0);

        let spawn = || {
            let recorder = recorder.clone();
            thread::spawn(move || {
                let w = recorder.worker();
                w.observe(1, 0).unwrap();
                w
            })
        };
        let (a, b) = (spawn(), spawn());
        let (wa, wb) = (a.join().unwrap(), b.join().unwrap());
        let mut indices = [wa.shard_index(), wb.shard_index()];
        indices.sort_unstable();
        assert_eq!(
            indices,
            [0, 1],
            "both workers on one shard, or a shard too many"
        );
        assert_eq!(recorder.shard_count(), 2);
        assert_eq!(
            recorder.snapshot(),
            histogram(1, &[(0, 0), (1, 0), (1, 0)], 0)
        );
        seen.record(format!("first thread got shard {}", wa.shard_index()));
        drop((wa, wb));
        assert_eq!(recorder.live_workers(), 0);
    });
    seen.finish(
        "racing_workers_claim_one_free_shard_once",
        &["first thread got shard 0", "first thread got shard 1"],
    );
}

/// The any-thread path from two threads with a concurrent snapshot: the
/// read-modify-writes on a shared stripe add up.
#[test]
fn any_thread_path_adds_up_under_concurrent_snapshot() {
    let seen = Arc::new(Seen::default());
    model(&seen, |seen| {
        let recorder = Recorder::new(1).unwrap();
        let full = histogram(1, &[(1, 1), (1, 1)], 1);
        let empty = recorder.snapshot();
        let a = {
            let recorder = recorder.clone();
            thread::spawn(move || {
                recorder.observe(1, 1).unwrap();
                recorder.observe_undrafted();
            })
        };
        let b = {
            let recorder = recorder.clone();
            thread::spawn(move || recorder.observe(1, 1).unwrap())
        };
        let reader = {
            let recorder = recorder.clone();
            let (empty, full) = (empty.clone(), full.clone());
            thread::spawn(move || {
                let s = recorder.snapshot();
                assert_between(&empty, &s, &full);
                s.count(1, 1)
            })
        };
        a.join().unwrap();
        b.join().unwrap();
        let read = reader.join().unwrap();
        assert_eq!(recorder.snapshot(), full);
        assert_eq!(recorder.live_workers(), 0);
        seen.record(format!("reader saw {read}"));
    });
    seen.finish(
        "any_thread_path_adds_up_under_concurrent_snapshot",
        &["reader saw 0", "reader saw 1", "reader saw 2"],
    );
}

/// A new shard is published while a reader walks the list: the reader sees
/// it or not, never before it is initialised (loom fails a model that reads
/// an atomic whose creation does not happen-before the read), and no bucket
/// of the second snapshot is smaller than in the first. Shards 0 and 1
/// exist, so the new shard 2 is the second of its segment: only the
/// publication of its own slot orders it, not that of the segment.
#[test]
fn new_shard_published_while_snapshot_walks_list() {
    let seen = Arc::new(Seen::default());
    model(&seen, |seen| {
        let recorder = Recorder::new(1).unwrap();
        let (w0, w1) = (recorder.worker(), recorder.worker());
        w0.observe(1, 1).unwrap();
        let before = recorder.snapshot();
        let full = histogram(1, &[(1, 1), (1, 0)], 0);

        let a = {
            let recorder = recorder.clone();
            thread::spawn(move || {
                let w2 = recorder.worker(); // w0 and w1 are alive: a new shard
                w2.observe(1, 0).unwrap();
                w2.shard_index()
            })
        };
        let reader = {
            let recorder = recorder.clone();
            let (before, full) = (before.clone(), full.clone());
            thread::spawn(move || {
                let shards = recorder.shard_count();
                let s1 = recorder.snapshot();
                let s2 = recorder.snapshot();
                assert_between(&before, &s1, &full);
                assert_between(&s1, &s2, &full);
                (shards, s2.count(1, 0))
            })
        };
        assert_eq!(a.join().unwrap(), 2);
        let (shards, read) = reader.join().unwrap();
        assert_eq!(recorder.shard_count(), 3);
        assert_eq!(recorder.snapshot(), full);
        drop((w0, w1));
        assert_eq!(recorder.live_workers(), 0);
        seen.record(format!("reader saw {shards} shards"));
        seen.record(format!("reader saw {read}"));
    });
    seen.finish(
        "new_shard_published_while_snapshot_walks_list",
        &[
            "reader saw 2 shards",
            "reader saw 3 shards",
            "reader saw 0",
            "reader saw 1",
        ],
    );
}

/// Two threads need a new shard at once (the only shard is held): the
/// registry mutex serialises them, the second sees the list grew and scans
/// again, and each ends with a shard of its own.
#[test]
fn concurrent_registrations_create_one_shard_each() {
    let seen = Arc::new(Seen::default());
    model(&seen, |seen| {
        let recorder = Recorder::new(1).unwrap();
        let w0 = recorder.worker();
        let spawn = || {
            let recorder = recorder.clone();
            thread::spawn(move || {
                let w = recorder.worker();
                w.observe(1, 1).unwrap();
                w
            })
        };
        let (a, b) = (spawn(), spawn());
        let (wa, wb) = (a.join().unwrap(), b.join().unwrap());
        let mut indices = [wa.shard_index(), wb.shard_index()];
        indices.sort_unstable();
        assert_eq!(indices, [1, 2]);
        assert_eq!(recorder.shard_count(), 3);
        assert_eq!(recorder.snapshot(), histogram(1, &[(1, 1), (1, 1)], 0));
        seen.record(format!("first thread got shard {}", wa.shard_index()));
        drop((w0, wa, wb));
        assert_eq!(recorder.live_workers(), 0);
    });
    seen.finish(
        "concurrent_registrations_create_one_shard_each",
        &["first thread got shard 1", "first thread got shard 2"],
    );
}

/// An observation that happened-before a snapshot started (here through a
/// Release/Acquire flag, while the writer thread is still running) is in
/// that snapshot, whichever shard or stripe holds it.
#[test]
fn snapshot_contains_what_happened_before_it() {
    let seen = Arc::new(Seen::default());
    model(&seen, |seen| {
        let recorder = Recorder::new(1).unwrap();
        let flag = loom::sync::Arc::new(AtomicBool::new(false));
        let w = recorder.worker();
        let writer = {
            let (recorder, flag) = (recorder.clone(), flag.clone());
            thread::spawn(move || {
                w.observe(1, 1).unwrap();
                recorder.observe(1, 0).unwrap();
                // Release: publishes both observations to the Acquire below.
                flag.store(true, std::sync::atomic::Ordering::Release);
                w.observe_undrafted();
            })
        };
        let reader = {
            let recorder = recorder.clone();
            thread::spawn(move || {
                // Acquire: pairs with the Release store in the writer.
                let published = flag.load(std::sync::atomic::Ordering::Acquire);
                let s = recorder.snapshot();
                if published {
                    assert_eq!((s.count(1, 1), s.count(1, 0)), (1, 1), "{s:?}");
                }
                (published, s.num_undrafted_steps())
            })
        };
        writer.join().unwrap();
        let (published, undrafted) = reader.join().unwrap();
        assert_eq!(recorder.live_workers(), 0);
        seen.record(format!("published={published} undrafted={undrafted}"));
    });
    seen.finish(
        "snapshot_contains_what_happened_before_it",
        &[
            "published=false undrafted=0",
            "published=true undrafted=0",
            "published=true undrafted=1",
        ],
    );
}

fn with_budgets(mut h: AcceptanceHistogram, budgets: &[usize]) -> AcceptanceHistogram {
    for &b in budgets {
        h.observe_scheduled(b).unwrap();
    }
    h
}

/// Scheduled budgets live in the same block as the buckets: a worker
/// records a budget and a step, another thread a budget through the
/// any-thread path, while a reader takes two snapshots. Every snapshot lies
/// between the empty and the final state in every counter (budgets
/// included), the second never below the first, and the final counts are
/// exact.
#[test]
fn scheduled_budgets_snapshot_lies_between_two_states() {
    let seen = Arc::new(Seen::default());
    model(&seen, |seen| {
        let recorder = Recorder::new(1).unwrap();
        let w1 = recorder.worker();
        let empty = recorder.snapshot();
        let full = with_budgets(histogram(1, &[(1, 0)], 0), &[1, 0]);

        let a = thread::spawn(move || {
            w1.observe_scheduled(1).unwrap();
            w1.observe(1, 0).unwrap();
        });
        let b = {
            let recorder = recorder.clone();
            thread::spawn(move || recorder.observe_scheduled(0).unwrap())
        };
        let reader = {
            let recorder = recorder.clone();
            let (empty, full) = (empty.clone(), full.clone());
            thread::spawn(move || {
                let s1 = recorder.snapshot();
                let s2 = recorder.snapshot();
                assert_between(&empty, &s1, &full);
                assert_between(&s1, &s2, &full);
                // A set of observations, not a prefix in time: the step may
                // be seen without the budget its worker recorded first
                // (relaxed counters; the reference's "Snapshots", point 1).
                (
                    s1.num_scheduled_steps(),
                    s1.scheduled_steps(1),
                    s1.num_spec_steps(),
                )
            })
        };
        a.join().unwrap();
        b.join().unwrap();
        let (scheduled, budget_1, steps) = reader.join().unwrap();
        assert_eq!(recorder.snapshot(), full);
        assert_eq!(recorder.live_workers(), 0);
        seen.record(format!("scheduled={scheduled}"));
        seen.record(format!("budget 1={budget_1} steps={steps}"));
    });
    seen.finish(
        "scheduled_budgets_snapshot_lies_between_two_states",
        &[
            "scheduled=0",
            "scheduled=1",
            "scheduled=2",
            "budget 1=0 steps=0",
            "budget 1=1 steps=0",
            "budget 1=0 steps=1",
            "budget 1=1 steps=1",
        ],
    );
}

/// A worker records a scheduled budget and exits while another thread takes
/// a worker (reusing the released shard or not) and records the same
/// budget: no scheduled count is lost or counted twice.
#[test]
fn exiting_worker_loses_no_scheduled_count() {
    let seen = Arc::new(Seen::default());
    model(&seen, |seen| {
        let recorder = Recorder::new(1).unwrap();
        let w1 = recorder.worker();
        let full = with_budgets(AcceptanceHistogram::new(1).unwrap(), &[1, 1]);
        let empty = recorder.snapshot();

        let a = thread::spawn(move || {
            w1.observe_scheduled(1).unwrap();
            drop(w1);
        });
        let b = {
            let recorder = recorder.clone();
            thread::spawn(move || {
                let w2 = recorder.worker();
                w2.observe_scheduled(1).unwrap();
                w2.shard_index()
            })
        };
        let reader = {
            let recorder = recorder.clone();
            let (empty, full) = (empty.clone(), full.clone());
            thread::spawn(move || {
                let s = recorder.snapshot();
                assert_between(&empty, &s, &full);
                s.scheduled_steps(1)
            })
        };
        a.join().unwrap();
        let index = b.join().unwrap();
        let read = reader.join().unwrap();
        assert_eq!(
            recorder.snapshot(),
            full,
            "a scheduled count was lost or doubled"
        );
        assert_eq!(recorder.live_workers(), 0);
        seen.record(format!("new worker on shard {index}"));
        seen.record(format!("reader saw {read}"));
    });
    seen.finish(
        "exiting_worker_loses_no_scheduled_count",
        &[
            "new worker on shard 0",
            "new worker on shard 1",
            "reader saw 0",
            "reader saw 1",
            "reader saw 2",
        ],
    );
}

/// The proposal histogram rides on the same counters: a worker resolves a
/// proposal through a `ProposalTracker` and aborts another (one relaxed
/// load and store each, `add_exclusive` adding the aborted count), then is
/// dropped; a second worker, which may take over its shard and then
/// continues its aborted counter, aborts two more; a thread without a
/// worker adds one aborted outcome on a stripe (`fetch_add` of the count).
/// A reader's snapshot lies between the empty and the full state, and at
/// the end nothing was lost or counted twice. (Kept small: 2 preemptions
/// already make it the largest model of the file.) These paths add no ordering (Relaxed on the
/// counters); they rely on the shard hand-over's Release push and Acquire
/// pop: weakening the Acquire load in `Shards::peek` to Relaxed fails this
/// model ("a proposal count was lost or doubled": the new owner continues
/// from a stale count).
#[test]
fn proposal_outcomes_survive_shard_hand_over_and_stripes() {
    use specdec_metrics::ProposalTracker;
    let seen = Arc::new(Seen::default());
    model(&seen, |seen| {
        let recorder = Recorder::builder(1).record_proposals().build().unwrap();
        let w1 = recorder.worker();
        let mut full = AcceptanceHistogram::with_proposals(1).unwrap();
        full.observe_proposal(1, 1).unwrap();
        full.observe_aborted_proposals(4).unwrap();
        let empty = recorder.snapshot();

        let a = thread::spawn(move || {
            let mut tracker = ProposalTracker::new(1).unwrap();
            tracker.draft(&[7], 1).unwrap();
            tracker.push_token(7, &w1); // (1, 1)
            tracker.draft(&[8], 1).unwrap();
            tracker.abort(&w1); // one aborted
            drop(w1);
        });
        let b = {
            let recorder = recorder.clone();
            thread::spawn(move || {
                let w2 = recorder.worker();
                w2.observe_aborted_proposals(2).unwrap();
                recorder.observe_aborted_proposals(1).unwrap();
                w2.shard_index()
            })
        };
        let reader = {
            let recorder = recorder.clone();
            let (empty, full) = (empty.clone(), full.clone());
            thread::spawn(move || {
                let s = recorder.snapshot();
                assert_between(&empty, &s, &full);
                s.num_aborted_proposals()
            })
        };
        a.join().unwrap();
        let index = b.join().unwrap();
        let read = reader.join().unwrap();
        assert_eq!(
            recorder.snapshot(),
            full,
            "a proposal count was lost or doubled"
        );
        seen.record(format!("new worker on shard {index}"));
        seen.record(format!("reader saw {read} aborted"));
    });
    seen.finish(
        "proposal_outcomes_survive_shard_hand_over_and_stripes",
        &[
            "new worker on shard 0",
            "new worker on shard 1",
            "reader saw 0 aborted",
            "reader saw 4 aborted",
        ],
    );
}
