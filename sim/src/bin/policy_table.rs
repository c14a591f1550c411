//! The drafting policies side by side: every static draft length, the
//! closed loop (`adaptive`), and the adaptive rules of SGLang and vLLM
//! #44336, on the `transition`, `steady` and `mixed` workloads of the
//! `serving_engine` demo, in virtual time with the same seed. Prints one
//! markdown table and the targets, each met or not, with its figures.
//!
//! ```text
//! cargo run --release -p specdec-sim --bin policy_table
//! cargo run --release -p specdec-sim --bin policy_table -- --seed 2 --phase-seconds 30
//! ```
//!
//! The simulation is the demo's own ([`specdec_sim::engine`]): two engine
//! threads with a batch of 32 requests each, `K = 8`, step cost `1 + 0.1 b`
//! cost units, 1-second intervals (`--interval-ms`). Two simulations run at
//! a time.
//!
//! The table, per workload and policy: the goodput (tokens per cost unit,
//! over the whole run), its ratio to the best static draft length of the
//! run, and per phase the ratio to that phase's oracle (the best static
//! draft length of the phase, chosen with hindsight), over the whole phase
//! and over its settled part (the phase minus its first 3 intervals), and
//! the switches of the chosen draft length per phase (per engine thread;
//! a shared plan counts once per change).

use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use clap::Parser;
use specdec_metrics::Recorder;

use specdec_sim::engine;
use specdec_sim::policy::PolicySpec;
use specdec_sim::summary::{CostLinear, Summary};
use specdec_sim::workload::Workload;

/// Runs every drafting policy on every workload in virtual time and prints
/// one markdown table with the targets.
#[derive(Debug, Parser)]
#[command(name = "policy_table")]
struct Args {
    /// Random seed of the table (the same for every run in it).
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
    /// Seeds the targets are also checked on: SEED, SEED + 1, ... (the
    /// table shows the first).
    #[arg(long, value_name = "N", default_value_t = 8)]
    seeds: u64,
    /// Length of each phase of the transition workload, seconds of virtual
    /// time; steady and mixed run as long as the four transition phases.
    #[arg(long, value_name = "N", default_value_t = 20)]
    phase_seconds: u64,
    /// The metrics interval, milliseconds.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    interval_ms: u64,
    /// The controller's update period, milliseconds (at most
    /// --interval-ms).
    #[arg(long, value_name = "N", default_value_t = engine::DEFAULT_UPDATE_MS)]
    update_ms: u64,
    /// Simulations run at once.
    #[arg(long, value_name = "N", default_value_t = 2)]
    jobs: usize,
}

/// `K`.
const MAX_DRAFT_LEN: usize = 8;
/// Phases of the transition workload: low, high, low, high.
const TRANSITION_PHASES: u64 = 4;
/// "At most a few" switches per phase.
const FEW_SWITCHES: f64 = 3.0;
/// "Once settled": at least this share of the phase's oracle.
const SETTLED_SHARE: f64 = 0.95;

fn policies() -> Vec<PolicySpec> {
    let mut all: Vec<_> = (1..=MAX_DRAFT_LEN).map(PolicySpec::Static).collect();
    all.extend([
        PolicySpec::Adaptive,
        PolicySpec::Sglang,
        PolicySpec::Vllm44336,
    ]);
    all
}

fn config(args: &Args, seed: u64, workload: Workload, policy: PolicySpec) -> engine::Config {
    engine::Config {
        policy,
        workload,
        phase_secs: args.phase_seconds as f64,
        workers: 2,
        max_draft_len: MAX_DRAFT_LEN,
        max_batch: 32,
        interval: Duration::from_millis(args.interval_ms),
        update: Duration::from_millis(args.update_ms),
        step_us: 8000,
        cost: CostLinear {
            base: 1.0,
            per_token: 0.1,
        },
        seconds: args.phase_seconds * TRANSITION_PHASES,
        virtual_time: true,
        seed,
        settle_intervals: engine::SETTLE_INTERVALS,
    }
}

/// One simulation's result: its summary, or why it could not run.
type Run = Result<Summary, String>;

fn main() -> ExitCode {
    let args = Args::parse();
    if args.phase_seconds == 0
        || args.jobs == 0
        || args.seeds == 0
        || args.interval_ms == 0
        || args.update_ms == 0
        || args.update_ms > args.interval_ms
    {
        eprintln!(
            "policy_table: --phase-seconds, --seeds, --interval-ms, --update-ms and --jobs must be \
             at least 1, and --update-ms at most --interval-ms"
        );
        return ExitCode::from(2);
    }
    let Some(last_seed) = args.seed.checked_add(args.seeds - 1) else {
        eprintln!("policy_table: --seed + --seeds overflows");
        return ExitCode::from(2);
    };
    let jobs: Vec<(u64, Workload, PolicySpec)> = (args.seed..=last_seed)
        .flat_map(|seed| {
            Workload::ALL
                .iter()
                .flat_map(move |&w| policies().into_iter().map(move |p| (seed, w, p)))
        })
        .collect();
    let started = Instant::now();
    let results: Vec<Mutex<Option<Run>>> = jobs.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    thread::scope(|scope| {
        for _ in 0..args.jobs.min(jobs.len()) {
            scope.spawn(|| {
                loop {
                    // Relaxed: a work counter; the scope's join orders the
                    // results.
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(seed, workload, policy)) = jobs.get(i) else {
                        return;
                    };
                    let run = run_one(&config(&args, seed, workload, policy), &stop);
                    eprintln!(
                        "policy_table: seed {seed} {workload} {policy}: {}",
                        match &run {
                            Ok(s) => format!("goodput {:.3}", s.overall.goodput.unwrap_or(0.0)),
                            Err(e) => e.clone(),
                        }
                    );
                    *results[i].lock().unwrap() = Some(run);
                }
            });
        }
    });
    let results: Vec<Run> = results
        .into_iter()
        .map(|r| r.into_inner().unwrap().expect("every job ran"))
        .collect();
    let tables: Vec<Table> = (args.seed..=last_seed)
        .map(|seed| Table::new(&args, seed, &jobs, &results))
        .collect();
    let mut out = tables[0].render();
    out.push_str(&robustness(&tables));
    let _ = write!(
        out,
        "\n({} simulations in {:.1} s, {} at a time.)",
        jobs.len(),
        started.elapsed().as_secs_f64(),
        args.jobs
    );
    println!("{out}");
    ExitCode::SUCCESS
}

fn run_one(config: &engine::Config, stop: &AtomicBool) -> Run {
    let recorder = Recorder::new(config.max_draft_len).map_err(|e| e.to_string())?;
    engine::run(config, &recorder, None, stop, &engine::NoEvents).map(|o| o.summary)
}

/// Every run of one seed, by workload.
struct Table<'a> {
    args: &'a Args,
    seed: u64,
    rows: Vec<(Workload, Vec<(PolicySpec, &'a Run)>)>,
}

/// One target on one seed: met or not, the figure it is judged on, and
/// the sentence that says so.
struct Target {
    name: String,
    met: bool,
    figure: f64,
    unit: &'static str,
    text: String,
}

/// Per phase, the best static run's goodput (all steps, settled steps).
struct Oracle {
    all: Vec<(usize, f64)>,
    settled: Vec<(usize, f64)>,
    overall: (usize, f64),
}

fn goodput(s: &Summary) -> f64 {
    s.overall.goodput.unwrap_or(0.0)
}

impl<'a> Table<'a> {
    fn new(
        args: &'a Args,
        seed: u64,
        jobs: &[(u64, Workload, PolicySpec)],
        results: &'a [Run],
    ) -> Self {
        let rows = Workload::ALL
            .iter()
            .map(|&w| {
                let runs = jobs
                    .iter()
                    .zip(results)
                    .filter(|((js, jw, _), _)| *js == seed && *jw == w)
                    .map(|((_, _, p), r)| (*p, r))
                    .collect();
                (w, runs)
            })
            .collect();
        Self { args, seed, rows }
    }

    fn oracle(runs: &[(PolicySpec, &Run)]) -> Oracle {
        let statics: Vec<(usize, &Summary)> = runs
            .iter()
            .filter_map(|(p, r)| match (p, r) {
                (PolicySpec::Static(k), Ok(s)) => Some((*k, s)),
                _ => None,
            })
            .collect();
        let phases = statics
            .iter()
            .map(|(_, s)| s.phases.len())
            .max()
            .unwrap_or(0);
        let best = |f: &dyn Fn(&Summary) -> Option<f64>| {
            statics
                .iter()
                .filter_map(|&(k, s)| f(s).map(|g| (k, g)))
                .fold((0, f64::NEG_INFINITY), |b, c| if c.1 > b.1 { c } else { b })
        };
        Oracle {
            all: (0..phases)
                .map(|i| best(&|s: &Summary| s.phases.get(i).and_then(|p| p.figures.goodput)))
                .collect(),
            settled: (0..phases)
                .map(|i| best(&|s: &Summary| s.phases.get(i).and_then(|p| p.settled.goodput)))
                .collect(),
            overall: best(&|s: &Summary| s.overall.goodput),
        }
    }

    fn render(&self) -> String {
        let mut out = String::new();
        let phases = TRANSITION_PHASES as usize;
        let _ = writeln!(
            out,
            "Policies side by side: K = {MAX_DRAFT_LEN}, step cost 1 + 0.1 b, 2 engine threads \
             x 32 requests, {} ms intervals, controller updated every {} ms, virtual time, seed \
             {}; transition: phases of {} s \
             (low alpha 0.5, high 0.9), steady (alpha 0.8) and mixed (half 0.9, half 0.5) run \
             {} s. Goodput in tokens per cost unit. Per phase: goodput / the phase's best static \
             k, over the whole phase and (in brackets) once settled, i.e. without its first {} \
             intervals. Switches: changes of the chosen k per engine thread, per phase.\n",
            self.args.interval_ms,
            self.args.update_ms,
            self.seed,
            self.args.phase_seconds,
            self.args.phase_seconds * TRANSITION_PHASES,
            engine::SETTLE_INTERVALS,
        );
        let mut header = "| workload | policy | goodput | / best static |".to_owned();
        let mut rule = "|---|---|---:|---:|".to_owned();
        for i in 0..phases {
            let _ = write!(header, " phase {} / oracle |", i + 1);
            rule.push_str("---:|");
        }
        header.push_str(" switches per phase |");
        rule.push_str("---|");
        let _ = writeln!(out, "{header}\n{rule}");
        for (workload, runs) in &self.rows {
            let oracle = Self::oracle(runs);
            // The oracle row: which static k is best per phase.
            let mut line = format!(
                "| {workload} | *oracle* (best static k) | {:.2} (k = {}) | 1.000 |",
                oracle.overall.1, oracle.overall.0
            );
            for i in 0..phases {
                match (oracle.all.get(i), oracle.settled.get(i)) {
                    (Some(a), Some(s)) => {
                        let _ = write!(line, " k = {} ({}) |", a.0, s.0);
                    }
                    _ => line.push_str(" – |"),
                }
            }
            line.push_str(" |");
            let _ = writeln!(out, "{line}");
            for (policy, run) in runs {
                let s = match run {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = writeln!(
                            out,
                            "| {workload} | {policy} | not run: {e} |{}",
                            " |".repeat(2 + phases)
                        );
                        continue;
                    }
                };
                let mut line = format!(
                    "| {workload} | {} | {:.2} | {:.3} |",
                    if *policy == PolicySpec::Adaptive {
                        "**adaptive**".to_owned()
                    } else {
                        policy.to_string()
                    },
                    goodput(s),
                    goodput(s) / oracle.overall.1
                );
                for i in 0..phases {
                    match (s.phases.get(i), oracle.all.get(i), oracle.settled.get(i)) {
                        (Some(p), Some(a), Some(st)) => {
                            let _ = write!(
                                line,
                                " {:.3} ({:.3}) |",
                                p.figures.goodput.unwrap_or(0.0) / a.1,
                                p.settled.goodput.unwrap_or(0.0) / st.1
                            );
                        }
                        _ => line.push_str(" – |"),
                    }
                }
                let switches: Vec<_> = s
                    .phases
                    .iter()
                    .map(|p| format!("{}", p.figures.switches))
                    .collect();
                let _ = writeln!(line, " {} |", switches.join(" / "));
                out.push_str(&line);
            }
        }
        let _ = writeln!(out, "\nTargets (seed {}):\n", self.seed);
        for t in self.targets() {
            let _ = writeln!(
                out,
                "- **{}**: {}: {}",
                if t.met { "met" } else { "not met" },
                t.name,
                t.text
            );
        }
        out
    }

    /// The targets, each met or not, with the figures.
    fn targets(&self) -> Vec<Target> {
        let mut out = Vec::new();
        for (workload, runs) in &self.rows {
            let oracle = Self::oracle(runs);
            let adaptive = runs
                .iter()
                .find(|(p, _)| *p == PolicySpec::Adaptive)
                .and_then(|(_, r)| r.as_ref().ok());
            let Some(adaptive) = adaptive else {
                out.push(Target {
                    name: format!("{workload}: adaptive ran"),
                    met: false,
                    figure: 0.0,
                    unit: "",
                    text: "it did not".into(),
                });
                continue;
            };
            let g = goodput(adaptive);
            if *workload == Workload::Transition {
                let ratio = g / oracle.overall.1;
                out.push(Target {
                    name: format!("{workload}: adaptive beats every static k overall"),
                    met: ratio > 1.0,
                    figure: 100.0 * (ratio - 1.0),
                    unit: "% over the best static k",
                    text: format!(
                        "{g:.2} vs best static k = {} at {:.2} ({:+.1}%)",
                        oracle.overall.0,
                        oracle.overall.1,
                        100.0 * (ratio - 1.0)
                    ),
                });
            }
            let settled: Vec<_> = adaptive
                .phases
                .iter()
                .zip(&oracle.settled)
                .map(|(p, o)| p.settled.goodput.unwrap_or(0.0) / o.1)
                .collect();
            let worst = settled.iter().copied().fold(f64::INFINITY, f64::min);
            out.push(Target {
                name: format!(
                    "{workload}: adaptive reaches {:.0}% of each phase's best static k once settled",
                    100.0 * SETTLED_SHARE
                ),
                met: worst >= SETTLED_SHARE,
                figure: 100.0 * worst,
                unit: "% in its worst phase",
                text: settled
                    .iter()
                    .map(|r| format!("{:.1}%", 100.0 * r))
                    .collect::<Vec<_>>()
                    .join(", "),
            });
            let most = adaptive
                .phases
                .iter()
                .map(|p| p.figures.switches)
                .fold(0.0, f64::max);
            out.push(Target {
                name: format!(
                    "{workload}: adaptive switches at most {FEW_SWITCHES} times per phase"
                ),
                met: most <= FEW_SWITCHES,
                figure: most,
                unit: "switches in its busiest phase",
                text: format!("at most {most} (in all {})", adaptive.overall.switches),
            });
            let peers: Vec<(PolicySpec, &Summary)> = runs
                .iter()
                .filter(|(p, _)| matches!(p, PolicySpec::Sglang | PolicySpec::Vllm44336))
                .filter_map(|(p, r)| r.as_ref().ok().map(|s| (*p, s)))
                .collect();
            let name = format!(
                "{workload}: adaptive at least as good as the best peer rule, switching less"
            );
            match peers
                .iter()
                .max_by(|a, b| goodput(a.1).total_cmp(&goodput(b.1)))
            {
                None => out.push(Target {
                    name,
                    met: false,
                    figure: 0.0,
                    unit: "",
                    text: "no peer rule ran".into(),
                }),
                Some((peer, ps)) => {
                    let ratio = g / goodput(ps);
                    out.push(Target {
                        name,
                        met: ratio >= 1.0 && adaptive.overall.switches < ps.overall.switches,
                        figure: 100.0 * (ratio - 1.0),
                        unit: "% over the best peer",
                        text: format!(
                            "best peer {peer}: goodput {g:.2} vs {:.2} ({:+.1}%), switches {} vs {}",
                            goodput(ps),
                            100.0 * (ratio - 1.0),
                            adaptive.overall.switches,
                            ps.overall.switches
                        ),
                    });
                }
            }
        }
        out
    }
}

/// Each target across every seed: on how many it is met, and the range of
/// its figure.
fn robustness(tables: &[Table]) -> String {
    let Some(first) = tables.first() else {
        return String::new();
    };
    let mut out = format!(
        "\nThe same targets on seeds {} to {} (the same settings):\n\n",
        first.seed,
        first.seed + tables.len() as u64 - 1
    );
    let all: Vec<Vec<Target>> = tables.iter().map(Table::targets).collect();
    for (i, target) in all[0].iter().enumerate() {
        let figures: Vec<f64> = all
            .iter()
            .filter_map(|t| t.get(i))
            .map(|t| t.figure)
            .collect();
        let met = all
            .iter()
            .filter_map(|t| t.get(i))
            .filter(|t| t.met)
            .count();
        let (lo, hi) = figures
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &f| {
                (lo.min(f), hi.max(f))
            });
        let mean = figures.iter().sum::<f64>() / figures.len() as f64;
        let _ = writeln!(
            out,
            "- {}: met on {met} of {} seeds; {} from {lo:.1} to {hi:.1} (mean {mean:.1})",
            target.name,
            tables.len(),
            target.unit,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use specdec_sim::summary::{Figures, Phase};

    /// Figures with the given goodput (100 cost units) and switches.
    fn figures(goodput: f64, switches: f64) -> Figures {
        Figures {
            steps: 100,
            tokens: (goodput * 100.0) as u64,
            cost_units: 100.0,
            goodput: Some(goodput),
            mean_draft_len: Some(1.0),
            switches,
        }
    }

    /// A transition run with these per-phase goodputs (settled equal to
    /// the whole phase) and switches.
    fn run(policy: PolicySpec, phases: &[f64], switches: &[f64]) -> Summary {
        let overall = phases.iter().sum::<f64>() / phases.len() as f64;
        Summary {
            policy: policy.to_string(),
            workload: "transition",
            seed: 1,
            max_draft_len: MAX_DRAFT_LEN,
            workers: 2,
            max_batch: 32,
            cost_linear: CostLinear {
                base: 1.0,
                per_token: 0.1,
            },
            step_us: 8000,
            interval_ms: 1000,
            update_ms: 250,
            phase_seconds: 20.0,
            virtual_time: true,
            seconds: 20.0 * phases.len() as f64,
            settle_seconds: 3.0,
            overall: figures(overall, switches.iter().sum()),
            phases: phases
                .iter()
                .zip(switches)
                .enumerate()
                .map(|(index, (&g, &sw))| Phase {
                    index,
                    name: "phase",
                    start_s: 20.0 * index as f64,
                    end_s: 20.0 * (index + 1) as f64,
                    figures: figures(g, sw),
                    settled: figures(g, 0.0),
                })
                .collect(),
            controller: None,
        }
    }

    fn targets_of(runs: Vec<(PolicySpec, Run)>) -> Vec<Target> {
        let args = Args::parse_from(["policy_table"]);
        let table = Table {
            args: &args,
            seed: 1,
            rows: vec![(
                Workload::Transition,
                runs.iter().map(|(p, r)| (*p, r)).collect(),
            )],
        };
        let oracle = Table::oracle(&table.rows[0].1);
        // The best static k of each phase, and overall.
        assert_eq!(oracle.all, [(1, 10.0), (2, 9.0)]);
        assert_eq!(oracle.overall, (2, 8.5));
        assert!(
            table
                .render()
                .contains("| transition | *oracle* (best static k) | 8.50 (k = 2) |")
        );
        table.targets()
    }

    #[test]
    fn the_oracle_is_the_best_static_k_per_phase_and_the_targets_compare_with_it() {
        let statics = vec![
            (
                PolicySpec::Static(1),
                Ok(run(PolicySpec::Static(1), &[10.0, 5.0], &[0.0, 0.0])),
            ),
            (
                PolicySpec::Static(2),
                Ok(run(PolicySpec::Static(2), &[8.0, 9.0], &[0.0, 0.0])),
            ),
        ];
        // Adaptive at the oracle in both phases: beats every static k, 100%
        // of each phase, 1 and 2 switches; the SGLang run is better still.
        let mut runs = statics.clone();
        runs.push((
            PolicySpec::Adaptive,
            Ok(run(PolicySpec::Adaptive, &[10.0, 9.0], &[1.0, 2.0])),
        ));
        runs.push((
            PolicySpec::Sglang,
            Ok(run(PolicySpec::Sglang, &[10.0, 9.2], &[4.0, 4.0])),
        ));
        let met: Vec<bool> = targets_of(runs).iter().map(|t| t.met).collect();
        assert_eq!(met, [true, true, true, false]);

        // Adaptive at 94% of the second phase's oracle, 4 switches in it,
        // and ahead of a peer that switches more: the settled and switches
        // targets fail, the peer target holds.
        let mut runs = statics;
        runs.push((
            PolicySpec::Adaptive,
            Ok(run(PolicySpec::Adaptive, &[10.0, 8.46], &[0.0, 4.0])),
        ));
        runs.push((
            PolicySpec::Vllm44336,
            Ok(run(PolicySpec::Vllm44336, &[9.0, 8.0], &[50.0, 50.0])),
        ));
        let targets = targets_of(runs);
        let met: Vec<bool> = targets.iter().map(|t| t.met).collect();
        assert_eq!(
            met,
            [true, false, false, true],
            "{:?}",
            targets.iter().map(|t| &t.text).collect::<Vec<_>>()
        );
        assert!((targets[1].figure - 94.0).abs() < 1e-9);
        assert_eq!(targets[2].figure, 4.0);
    }
}
