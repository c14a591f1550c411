//! The copy-run controllers, and per-state's step states (its default on
//! lookup traces), on sequences built against them: regimes that
//! alternate, a sudden switch, and a goodput curve with two peaks. Their
//! learners (the least discounted cost, the largest discounted value so
//! far) have no regret bound against such sequences, so these measure the
//! worst case instead, and hold it to a floor. `cargo test -p specdec-sim --test copy_runs_adversarial --
//! --nocapture` prints every figure.

use std::sync::Arc;

use specdec_metrics::StepCost;
use specdec_sim::policy::PolicySpec;
use specdec_sim::runs::RunSignal;
use specdec_sim::trace_set::TraceSet;
use specdec_sim::whatif::{Settings, best_static, policies};

/// A request of copy runs of `runs` predicted tokens each (cycled) until
/// `m` output tokens: each position of a run knows the rest of it (`m_t`),
/// the drafter proposes up to 64 tokens everywhere.
fn request(id: usize, m: usize, runs: &[usize]) -> String {
    let (mut proposal, mut matched) = (Vec::new(), Vec::new());
    let (mut t, mut j) = (1, 0);
    while t < m {
        let r = runs[j % runs.len()];
        for left in (0..=r).rev() {
            if t >= m {
                break;
            }
            proposal.push(64u8);
            matched.push(left.min(64).min(m - t) as u8);
            t += 1;
        }
        j += 1;
    }
    let line = serde_json::json!({
        "id": id, "output_tokens": m, "proposal": proposal, "match": matched,
    });
    format!("{line}\n")
}

/// The traces: `kind(i)` gives request `i`'s runs.
fn traces(requests: usize, kind: impl Fn(usize) -> Vec<usize>) -> Arc<TraceSet> {
    let text: String = (0..requests).map(|i| request(i, 400, &kind(i))).collect();
    Arc::new(TraceSet::read(text.as_bytes(), "adversarial").unwrap())
}

/// The what-if at `K = 64`, cost `1 + c d` and `batch`, every default.
fn settings(traces: &Arc<TraceSet>, c: f64, batch: usize) -> Settings {
    Settings {
        traces: Arc::clone(traces),
        max_draft_len: 64,
        cost: StepCost::linear(1.0, c).unwrap(),
        batch,
        interval: specdec_sim::whatif::DEFAULT_INTERVAL,
        update_observations: None,
        seed: 1,
        state_space: None,
        run_signal: None,
        load: Default::default(),
    }
}

/// Goodput over the best static length's, and switches per 1000 engine
/// steps, of `adaptive`, `per-state` from copy runs and `per-state` from
/// step states.
fn ratios(traces: &Arc<TraceSet>, c: f64, batch: usize) -> [(f64, f64); 3] {
    let s = settings(traces, c, batch);
    let mut all = policies(64);
    all.retain(|p| p.static_len().is_some());
    let statics = s.replay_all(&all, 2, &|_, _, _| {}).unwrap();
    let best = best_static(&statics).unwrap().goodput();
    let runs = Settings {
        run_signal: Some(RunSignal::ShortMatch),
        ..s.clone()
    };
    [
        (&runs, PolicySpec::adaptive()),
        (&runs, PolicySpec::per_state()),
        (&s, PolicySpec::per_state()),
    ]
    .map(|(s, p)| {
        let r = s.replay(p).unwrap();
        let o = &r.summary.overall;
        (
            r.goodput() / best,
            1000.0 * o.switches / o.steps.max(1) as f64,
        )
    })
}

/// The step states' floor on every sequence: their worst measured, less
/// a margin.
const STEP_FLOOR: f64 = 0.8;

fn check(name: &str, traces: &Arc<TraceSet>, floor: f64) {
    for c in [0.1, 0.3] {
        for batch in [1, 32] {
            let [(a, sa), (p, sp), (q, sq)] = ratios(traces, c, batch);
            eprintln!(
                "{name}, c = {c}, batch {batch}: adaptive {a:.3} ({sa:.1} switches / 1000 steps), \
                 per-state from runs {p:.3} ({sp:.1}), from steps {q:.3} ({sq:.1})"
            );
            assert!(
                a >= floor && p >= floor && q >= STEP_FLOOR,
                "{name} c = {c} batch {batch}: {a} {p} {q}"
            );
        }
    }
}

/// Blocks of 10 requests that copy runs of 40 tokens, then 10 whose
/// proposals all fail at once.
#[test]
fn alternating_regimes() {
    let t = traces(80, |i| if (i / 10) % 2 == 0 { vec![40] } else { vec![0] });
    check("alternating", &t, 0.85);
}

/// Long copies for the first half of the requests, failing proposals for
/// the second.
#[test]
fn a_sudden_switch() {
    let t = traces(80, |i| if i < 40 { vec![40] } else { vec![0] });
    check("switch", &t, 0.85);
}

/// Runs of 2 and of 30 tokens in turn: a goodput curve with a peak at
/// each, so a search by local steps stops on the wrong one.
#[test]
fn a_bimodal_curve() {
    let t = traces(60, |_| vec![2, 30]);
    check("bimodal", &t, 0.9);
}

/// Requests of short runs and requests of long ones, mixed.
#[test]
fn two_kinds_of_request() {
    let t = traces(60, |i| if i % 2 == 0 { vec![2] } else { vec![30] });
    check("two kinds", &t, 0.85);
}

/// Per-state's goodput over the best static length's on `s`, with the
/// step states of `signal` (`None`: the default).
fn per_state_ratio(s: &Settings, signal: Option<RunSignal>) -> f64 {
    let mut statics = policies(64);
    statics.retain(|p| p.static_len().is_some());
    let best = best_static(&s.replay_all(&statics, 2, &|_, _, _| {}).unwrap())
        .unwrap()
        .goodput();
    let s = Settings {
        run_signal: signal,
        ..s.clone()
    };
    s.replay(PolicySpec::per_state()).unwrap().goodput() / best
}

/// What tells the two kinds apart is the request's recent matched length:
/// without it (`short-match-steps`, the drafter's state alone) per-state
/// drafts one length for both kinds.
#[test]
fn the_recent_matched_length_tells_two_kinds_apart() {
    let t = traces(60, |i| if i % 2 == 0 { vec![2] } else { vec![30] });
    let s = settings(&t, 0.1, 32);
    let default = per_state_ratio(&s, None);
    assert_eq!(default, per_state_ratio(&s, Some(RunSignal::MatchSteps)));
    let alone = per_state_ratio(&s, Some(RunSignal::ShortMatchSteps));
    eprintln!(
        "two kinds, c = 0.1, batch 32: per-state {default:.3}, the drafter's state alone {alone:.3}"
    );
    // See `step_states` for the figures.
    assert!(default > 1.2 * alone, "{default} against {alone}");
}

/// What tells the two-peaked curve's peaks apart is the previous draft's
/// outcome: a run of 2 tokens ends in a draft that holds in part, and a
/// run of 30 starts after it. The recent matched length mixes both runs
/// (`recent-match-steps`, without the previous outcome).
#[test]
fn the_previous_outcome_tells_two_peaks_apart() {
    let t = traces(60, |_| vec![2, 30]);
    let s = settings(&t, 0.1, 32);
    let default = per_state_ratio(&s, None);
    let without = per_state_ratio(&s, Some(RunSignal::RecentMatchSteps));
    eprintln!(
        "bimodal, c = 0.1, batch 32: per-state {default:.3}, without the previous outcome {without:.3}"
    );
    // See `step_states` for the figures.
    assert!(default > 1.1 * without, "{default} against {without}");
}
