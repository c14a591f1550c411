//! What `per-state`'s step states can give at best: the best fixed plan
//! (one length per state, kept for the whole replay) in hindsight, per
//! trace, beside what the learning `per-state` earns, both over the trace's
//! best static `k`.
//!
//! ```sh
//! cargo run --release -p specdec-sim --example per_state_hindsight -- \
//!     8 0.1 32 traces/*.jsonl
//! ```
//!
//! Arguments: `K`, the cost per drafted token `c` (a step costs `1 + c d`),
//! the batch, then one or more traces (`ngram`'s JSON Lines); first, `--load
//! once` replays each request once (the batch drains at the end) instead
//! of keeping the batch full, as `corpus` does by default. The search
//! is coordinate ascent: from every state at `K`, at `K / 2` and at 1, each
//! state in turn takes the length that earns most with the others held,
//! three sweeps; the best plan found is a lower bound of the best there is.
//! A plan per trace is hindsight twice over (it is chosen on the replay it
//! is judged on, per trace), so it bounds what any controller reading
//! these states could earn with one length per state.

use std::io::Write as _;
use std::sync::Arc;

use specdec_metrics::StepCost;
use specdec_sim::corpus::Spread;
use specdec_sim::policy::PolicySpec;
use specdec_sim::step_states::STEP_STATES;
use specdec_sim::trace_set::TraceSet;
use specdec_sim::whatif::{DEFAULT_INTERVAL, Load, Settings, best_static, policies};

const USAGE: &str = "usage: per_state_hindsight [--load once|saturated] K COST BATCH TRACE...";

fn main() {
    specdec_sim::stdio::finish("per_state_hindsight", run());
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut load = Load::Saturated;
    if args.first().is_some_and(|a| a == "--load") {
        let name = args.get(1).ok_or(USAGE)?;
        load = name.parse().map_err(|e| format!("--load: {e}"))?;
        args.drain(..2);
    }
    if args.len() < 4 {
        return Err(USAGE.into());
    }
    let k: usize = args[0].parse().map_err(|_| format!("K: {USAGE}"))?;
    let c: f64 = args[1].parse().map_err(|_| format!("COST: {USAGE}"))?;
    let batch: usize = args[2].parse().map_err(|_| format!("BATCH: {USAGE}"))?;
    // Every trace read (and refused) before anything is printed.
    let mut sets = Vec::new();
    for path in &args[3..] {
        let text = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
        sets.push((path, Arc::new(TraceSet::read(&text[..], path)?)));
    }
    let (mut learned_all, mut fixed_all) = (Vec::new(), Vec::new());
    let mut out = std::io::stdout().lock();
    let mut header = Some("trace\tper-state\tbest fixed plan\tplan");
    for (path, traces) in sets {
        let settings = Settings {
            traces,
            max_draft_len: k,
            cost: StepCost::linear(1.0, c)?,
            batch,
            interval: DEFAULT_INTERVAL,
            update_observations: None,
            seed: 1,
            state_space: None,
            run_signal: None,
            load,
        };
        let mut statics = policies(k);
        statics.retain(|p| p.static_len().is_some());
        let statics = settings.replay_all(&statics, 2, &|_, _, _| {})?;
        let best = best_static(&statics).ok_or("no static length")?.goodput();
        let learned = settings.replay(PolicySpec::per_state())?.goodput() / best;
        if let Some(h) = header.take() {
            writeln!(out, "{h}")?;
        }
        let ratio = |plan| -> Result<f64, Box<dyn std::error::Error>> {
            Ok(settings.replay_step_plan(plan)?.goodput() / best)
        };
        let mut found = (f64::NEG_INFINITY, [k; STEP_STATES]);
        for start in [k, k / 2, 1] {
            let mut plan = [start; STEP_STATES];
            let mut here = ratio(plan)?;
            for _ in 0..3 {
                for state in 0..STEP_STATES {
                    for len in 0..=k {
                        if len == plan[state] {
                            continue;
                        }
                        let mut next = plan;
                        next[state] = len;
                        let r = ratio(next)?;
                        if r > here {
                            (here, plan) = (r, next);
                        }
                    }
                }
            }
            if here > found.0 {
                found = (here, plan);
            }
        }
        writeln!(out, "{path}\t{learned:.4}\t{:.4}\t{:?}", found.0, found.1)?;
        learned_all.push(learned);
        fixed_all.push(found.0);
    }
    writeln!(
        out,
        "median\t{:.4}\t{:.4}",
        Spread::of(&learned_all).median,
        Spread::of(&fixed_all).median
    )?;
    Ok(())
}
