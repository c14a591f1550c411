//! The drafting policies side by side: every static draft length, the
//! closed loop (`adaptive`, one length for the batch), drafting per request
//! state (`per-state`), the batch-level adaptive rules of SGLang and vLLM
//! #44336 and the per-request rules of SmartSpec and vLLM's adaptive
//! verification, on the `transition`, `steady`, `mixed`, `bursty` and
//! `classes` workloads of the `serving_engine` demo, in virtual time with
//! the same seed. Prints one markdown table and the targets, each met or
//! not, with its figures.
//!
//! ```text
//! cargo run --release -p specdec-demo --bin policy_table
//! cargo run --release -p specdec-demo --bin policy_table -- --seed 2 --phase-seconds 30
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
//! a shared plan counts once per change, a per-state plan once per change
//! of any state's length; the per-request peers choose per request and
//! have none).

use std::fmt::Write as _;
use std::io::{self, Write as _};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use clap::Parser;

use specdec_sim::engine;
use specdec_sim::error::Setting;
use specdec_sim::policy::PolicySpec;
use specdec_sim::state_rule::StateRule;
use specdec_sim::summary::{CostLinear, Summary};
use specdec_sim::trace_set::TraceSet;
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
    /// Mean steps a request of the bursty workload stays in one condition.
    #[arg(long, value_name = "STEPS", default_value_t = specdec_sim::workload::DEFAULT_PERSISTENCE)]
    persistence: f64,
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
    /// Instead of the table, measure the definitions of a request's state
    /// (the library's RequestState and others, see the state_rule module)
    /// for per-state against adaptive on bursty (several persistences),
    /// mixed, classes and steady.
    #[arg(long)]
    state_rules: bool,
    /// The step cost's per-token part P (cost 1 + P b); the targets are
    /// stated for 0.1.
    #[arg(long, value_name = "P", default_value_t = 0.1)]
    per_token_cost: f64,
    /// Instead of the drawn workloads, replay logged requests: an n-gram
    /// drafting trace as `specdec-metrics ngram` writes it. Every policy
    /// and the per-step oracle run on it for the run length of the table
    /// (the requests cycle through the file), and one table compares them
    /// with the best static length (no targets: they are stated for the
    /// drawn workloads).
    #[arg(long, value_name = "FILE")]
    traces: Option<std::path::PathBuf>,
    /// What a step costs, for --traces: drafted (the mean tokens drafted
    /// per request: a request without a match costs no more than the base)
    /// or scheduled (the mean length scheduled, the drawn workloads' rule).
    #[arg(long, value_name = "RULE", default_value = "drafted", value_parser = parse_cost_rule)]
    cost_rule: engine::CostRule,
}

fn parse_cost_rule(v: &str) -> Result<engine::CostRule, String> {
    v.parse()
}

/// `K`.
const MAX_DRAFT_LEN: usize = 8;
/// Phases of the transition workload: low, high, low, high.
const TRANSITION_PHASES: u64 = 4;
/// "At most a few" switches per phase.
const FEW_SWITCHES: f64 = 3.0;
/// "Once settled": at least this share of the phase's oracle.
const SETTLED_SHARE: f64 = 0.95;
/// The workloads the adaptive controller's targets were stated for (before
/// `bursty` and `classes` existed).
const ADAPTIVE_TARGET_WORKLOADS: [Workload; 3] =
    [Workload::Transition, Workload::Steady, Workload::Mixed];
/// The targets of `per-state` (per-request-state drafting) against
/// `adaptive`, stated before its first runs, on goodput over
/// the run: at least this ratio on `bursty`...
const PER_STATE_BURSTY: f64 = 1.08;
/// ... at most this loss on independent acceptance (`steady`)...
const PER_STATE_STEADY_LOSS: f64 = 0.002;
/// ... and at most this loss on any workload.
const PER_STATE_MAX_LOSS: f64 = 0.005;

fn policies() -> Vec<PolicySpec> {
    let mut all: Vec<_> = (1..=MAX_DRAFT_LEN).map(PolicySpec::Static).collect();
    all.extend([
        PolicySpec::Adaptive,
        PolicySpec::PerState,
        PolicySpec::Sglang,
        PolicySpec::Vllm44336,
        PolicySpec::SmartSpec,
        PolicySpec::VllmAv,
    ]);
    all
}

fn config(args: &Args, seed: u64, workload: Workload, policy: PolicySpec) -> engine::Config {
    engine::Config {
        policy,
        workload,
        phase_secs: args.phase_seconds as f64,
        persistence: args.persistence,
        state_rule: StateRule::Library,
        workers: 2,
        max_draft_len: MAX_DRAFT_LEN,
        max_batch: 32,
        interval: Duration::from_millis(args.interval_ms),
        update: Duration::from_millis(args.update_ms),
        step_us: 8000,
        cost: CostLinear {
            base: 1.0,
            per_token: args.per_token_cost,
        },
        seconds: args.phase_seconds * TRANSITION_PHASES,
        virtual_time: true,
        seed,
        settle_intervals: engine::SETTLE_INTERVALS,
        traces: None,
        state_space: None,
        model: engine::EngineModel::default(),
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
        || !(args.persistence.is_finite() && args.persistence >= 1.0)
        || !(args.per_token_cost.is_finite() && args.per_token_cost >= 0.0)
    {
        let _ = writeln!(
            io::stderr(),
            "policy_table: --phase-seconds, --seeds, --interval-ms, --update-ms, --jobs and \
             --persistence must be at least 1, --update-ms at most --interval-ms, and \
             --per-token-cost a number of at least 0"
        );
        return ExitCode::from(2);
    }
    let Some(last_seed) = args.seed.checked_add(args.seeds - 1) else {
        let _ = writeln!(io::stderr(), "policy_table: --seed + --seeds overflows");
        return ExitCode::from(2);
    };
    if args.state_rules {
        return print_table(&state_rules(&args, last_seed));
    }
    if let Some(path) = &args.traces {
        return match TraceSet::open(path) {
            Ok(traces) => print_table(&traces_table(&args, Arc::new(traces))),
            Err(e) => {
                let _ = writeln!(io::stderr(), "policy_table: --traces {}", e.naming(&flag));
                ExitCode::from(2)
            }
        };
    }
    let jobs: Vec<(u64, Workload, PolicySpec)> = (args.seed..=last_seed)
        .flat_map(|seed| {
            Workload::ALL
                .iter()
                .flat_map(move |&w| policies().into_iter().map(move |p| (seed, w, p)))
        })
        .collect();
    let started = Instant::now();
    let configs: Vec<engine::Config> = jobs
        .iter()
        .map(|&(seed, workload, policy)| config(&args, seed, workload, policy))
        .collect();
    let results = run_all(&args, &configs);
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
    print_table(&out)
}

/// The table of every policy on a trace: goodput, its ratio to the best
/// static length, tokens and drafted tokens per request-step, switches.
fn traces_table(args: &Args, traces: Arc<TraceSet>) -> String {
    let started = Instant::now();
    let mut policies: Vec<PolicySpec> = vec![PolicySpec::Static(0)];
    policies.extend(self::policies());
    policies.push(PolicySpec::Oracle);
    let configs: Vec<engine::Config> = policies
        .iter()
        .map(|&policy| engine::Config {
            workload: Workload::Traces,
            traces: Some(Arc::clone(&traces)),
            model: engine::EngineModel {
                cost_rule: args.cost_rule,
                ..engine::EngineModel::default()
            },
            ..config(args, args.seed, Workload::Traces, policy)
        })
        .collect();
    let results = run_all(args, &configs);
    let best = results
        .iter()
        .zip(&policies)
        .filter(|(_, p)| matches!(p, PolicySpec::Static(_)))
        .filter_map(|(r, _)| r.as_ref().ok().map(goodput))
        .fold(f64::NAN, f64::max);
    let mut out = format!(
        "Policies on {} requests of a trace ({} positions), cycling for {} s of virtual time; \
         K = {MAX_DRAFT_LEN}, 2 engine threads of 32 requests, cost 1 + {} b ({} lengths), \
         controller updated every {} ms.\n\n\
         | policy | goodput | x best static | tokens / request-step | drafted / request-step | switches |\n\
         |---|---:|---:|---:|---:|---:|\n",
        traces.requests().len(),
        traces.positions(),
        args.phase_seconds * TRANSITION_PHASES,
        args.per_token_cost,
        args.cost_rule,
        args.update_ms,
    );
    for (policy, run) in policies.iter().zip(&results) {
        let name = match policy {
            PolicySpec::Static(0) => "none".to_string(),
            p => p.to_string(),
        };
        let _ = match run {
            Ok(s) => writeln!(
                out,
                "| {name} | {:.3} | {:.4} | {:.3} | {:.3} | {} |",
                goodput(s),
                goodput(s) / best,
                s.overall.tokens_per_request_step.unwrap_or(0.0),
                s.overall.drafted_per_request_step.unwrap_or(0.0),
                s.overall.switches
            ),
            Err(e) => writeln!(out, "| {name} | {e} | | | | |"),
        };
    }
    let _ = write!(
        out,
        "\n({} simulations in {:.1} s, {} at a time.)",
        configs.len(),
        started.elapsed().as_secs_f64(),
        args.jobs
    );
    out
}

/// Writes the table on standard output. A reader that went away (`| head`)
/// is not an error: exit 0, as `head` asked for no more; any other write
/// error exits 2 with a message.
fn print_table(table: &str) -> ExitCode {
    match writeln!(io::stdout().lock(), "{table}") {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(io::stderr(), "policy_table: writing the table: {e}");
            ExitCode::from(2)
        }
    }
}

/// Runs every configuration, `--jobs` at a time; their results in order.
fn run_all(args: &Args, configs: &[engine::Config]) -> Vec<Run> {
    let results: Vec<Mutex<Option<Run>>> = configs.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    thread::scope(|scope| {
        for _ in 0..args.jobs.min(configs.len()) {
            scope.spawn(|| {
                loop {
                    // Relaxed: a work counter; the scope's join orders the
                    // results.
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(config) = configs.get(i) else {
                        return;
                    };
                    let run = run_one(config, &stop);
                    // Progress is best effort: a closed standard error
                    // (`2>&1 | head`) does not stop the table.
                    let _ = writeln!(
                        io::stderr(),
                        "policy_table: seed {} {} {} (state rule {}, persistence {}): {}",
                        config.seed,
                        config.workload,
                        config.policy,
                        config.state_rule,
                        config.persistence,
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
    results
        .into_iter()
        .map(|r| r.into_inner().unwrap().expect("every job ran"))
        .collect()
}

/// The workloads of the state-rule measurements: `bursty` at several
/// persistences, then `mixed`, `classes` and `steady`.
const STATE_RULE_WORKLOADS: [(Workload, f64); 7] = [
    (Workload::Bursty, 5.0),
    (Workload::Bursty, 15.0),
    (Workload::Bursty, 30.0),
    (Workload::Bursty, 100.0),
    (Workload::Mixed, 30.0),
    (Workload::Classes, 30.0),
    (Workload::Steady, 30.0),
];

/// The simulations of `--state-rules`: per workload and seed, adaptive,
/// then per-state under each rule.
fn state_rule_configs(args: &Args, seeds: &[u64]) -> Vec<engine::Config> {
    let mut configs = Vec::new();
    for &(workload, persistence) in &STATE_RULE_WORKLOADS {
        for &seed in seeds {
            let base = engine::Config {
                persistence,
                ..config(args, seed, workload, PolicySpec::Adaptive)
            };
            configs.push(base.clone());
            for rule in StateRule::COMPARED {
                configs.push(engine::Config {
                    policy: PolicySpec::PerState,
                    state_rule: rule,
                    ..base.clone()
                });
            }
        }
    }
    configs
}

/// `--state-rules`: `per-state` under each rule of
/// [`StateRule::COMPARED`] against `adaptive`, on every workload of
/// [`STATE_RULE_WORKLOADS`] and seed: a markdown table of goodput ratios.
fn state_rules(args: &Args, last_seed: u64) -> String {
    let started = Instant::now();
    let seeds: Vec<u64> = (args.seed..=last_seed).collect();
    let configs = state_rule_configs(args, &seeds);
    let results = run_all(args, &configs);
    let per_run = 1 + StateRule::COMPARED.len();
    let mut out = format!(
        "State rules: per-state's goodput over adaptive's (the batch-level controller), mean over \
         seeds {} to {last_seed} and (in brackets) the lowest and highest; K = {MAX_DRAFT_LEN}, \
         step cost 1 + {} b, {} s runs, otherwise as the policy table. Rules: {}.\n\n\
         | workload | adaptive goodput |",
        args.seed,
        args.per_token_cost,
        args.phase_seconds * TRANSITION_PHASES,
        StateRule::COMPARED
            .iter()
            .map(StateRule::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    );
    for rule in StateRule::COMPARED {
        let _ = write!(out, " {rule} |");
    }
    out.push_str("\n|---|---:|");
    out.push_str(&"---:|".repeat(StateRule::COMPARED.len()));
    out.push('\n');
    for (w, &(workload, persistence)) in STATE_RULE_WORKLOADS.iter().enumerate() {
        let runs = |s: usize| &results[(w * seeds.len() + s) * per_run..][..per_run];
        let name = if workload == Workload::Bursty {
            format!("bursty, persistence {persistence}")
        } else {
            workload.to_string()
        };
        let adaptive: Vec<f64> = (0..seeds.len())
            .map(|s| runs(s)[0].as_ref().map_or(f64::NAN, goodput))
            .collect();
        let _ = write!(
            out,
            "| {name} | {:.2} |",
            adaptive.iter().sum::<f64>() / seeds.len() as f64
        );
        for r in 0..StateRule::COMPARED.len() {
            let ratios: Vec<f64> = (0..seeds.len())
                .map(|s| runs(s)[1 + r].as_ref().map_or(f64::NAN, goodput) / adaptive[s])
                .collect();
            let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
            let (lo, hi) = ratios
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
                    (lo.min(x), hi.max(x))
                });
            let _ = write!(out, " {mean:.3} ({lo:.3}–{hi:.3}) |");
        }
        out.push('\n');
    }
    let _ = write!(
        out,
        "\n({} simulations in {:.1} s, {} at a time.)",
        configs.len(),
        started.elapsed().as_secs_f64(),
        args.jobs
    );
    out
}

fn run_one(config: &engine::Config, stop: &AtomicBool) -> Run {
    let recorder = engine::recorder(config).map_err(flagged)?;
    engine::run(config, &recorder, None, stop, &engine::NoEvents)
        .map(|o| o.summary)
        .map_err(flagged)
}

/// The flag of a setting the simulator's errors name, for those this
/// program has; the others by their name in `engine::Config`.
fn flag(setting: Setting) -> &'static str {
    match setting {
        Setting::PhaseSecs => "--phase-seconds",
        Setting::Persistence => "--persistence",
        Setting::Interval => "--interval-ms",
        Setting::Update => "--update-ms",
        Setting::Traces => "--traces",
        other => other.field(),
    }
}

/// A simulator's error as this program says it: with its flags.
fn flagged(e: specdec_sim::error::Error) -> String {
    e.naming(&flag).to_string()
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
    /// Decimals of the figure across seeds.
    digits: usize,
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

/// The oracle row of a workload: which static k is best per phase (over
/// the whole phase, and once settled).
fn oracle_line(workload: Workload, oracle: &Oracle, phases: usize) -> String {
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
    line
}

/// A policy's row (with its line end): goodput, its ratio to the best
/// static k, per phase the ratios to the phase's oracle, the switches.
fn policy_line(
    workload: Workload,
    policy: PolicySpec,
    s: &Summary,
    oracle: &Oracle,
    phases: usize,
) -> String {
    let mut line = format!(
        "| {workload} | {} | {:.2} | {:.3} |",
        if matches!(policy, PolicySpec::Adaptive | PolicySpec::PerState) {
            format!("**{policy}**")
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
        .map(|p| {
            if policy.per_request() && policy != PolicySpec::PerState {
                "–".to_owned()
            } else {
                format!("{}", p.figures.switches)
            }
        })
        .collect();
    let _ = writeln!(line, " {} |", switches.join(" / "));
    line
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
        let phases = TRANSITION_PHASES as usize;
        let mut out = self.preamble();
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
            let _ = writeln!(out, "{}", oracle_line(*workload, &oracle, phases));
            for (policy, run) in runs {
                match run {
                    Ok(s) => out.push_str(&policy_line(*workload, *policy, s, &oracle, phases)),
                    Err(e) => {
                        let _ = writeln!(
                            out,
                            "| {workload} | {policy} | not run: {e} |{}",
                            " |".repeat(2 + phases)
                        );
                    }
                }
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

    /// The paragraph above the table: its settings, and how to read it.
    fn preamble(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Policies side by side: K = {MAX_DRAFT_LEN}, step cost 1 + {} b (b: the mean draft \
             length per request), 2 engine threads x 32 requests, {} ms intervals, controllers \
             updated every {} ms, virtual time, seed {}; transition: phases of {} s (low alpha \
             0.5, high 0.9), steady (alpha 0.8), mixed (half 0.9, half 0.5), bursty (every \
             request alternates between alpha 0.9 and 0.3, {} steps in each on average) and \
             classes (code, math and summarization profiles, a third each) run {} s. Goodput in \
             tokens per cost unit. Per phase: goodput / the phase's best static k, over the \
             whole phase and (in brackets) once settled, i.e. without its first {} intervals. \
             Switches: changes of the chosen k (of a per-state plan: of any state's k) per \
             engine thread, per phase; none for the per-request rules (smartspec, vllm-av).\n",
            self.args.per_token_cost,
            self.args.interval_ms,
            self.args.update_ms,
            self.seed,
            self.args.phase_seconds,
            self.args.persistence,
            self.args.phase_seconds * TRANSITION_PHASES,
            engine::SETTLE_INTERVALS,
        );
        out
    }

    /// The targets, each met or not, with the figures: the adaptive
    /// controller's on the workloads they were stated for, then
    /// `per-state`'s against it on every workload.
    fn targets(&self) -> Vec<Target> {
        let mut out = Vec::new();
        for (workload, runs) in &self.rows {
            if ADAPTIVE_TARGET_WORKLOADS.contains(workload) {
                Self::adaptive_targets(*workload, runs, &mut out);
            }
            Self::per_state_targets(*workload, runs, &mut out);
        }
        out
    }

    /// The run of `policy`, if it ran.
    fn run_of<'r>(runs: &'r [(PolicySpec, &Run)], policy: PolicySpec) -> Option<&'r Summary> {
        runs.iter()
            .find(|(p, _)| *p == policy)
            .and_then(|(_, r)| r.as_ref().ok())
    }

    /// `per-state` against `adaptive` (its stated targets): at least 1.08 times its
    /// goodput on `bursty`, at most 0.2% below it on `steady`, at most 0.5%
    /// below it anywhere; and on `mixed`, at least the best static `k`
    /// (where `adaptive` settles on a longer draft than the run-wide best).
    fn per_state_targets(workload: Workload, runs: &[(PolicySpec, &Run)], out: &mut Vec<Target>) {
        let (Some(per_state), Some(adaptive)) = (
            Self::run_of(runs, PolicySpec::PerState),
            Self::run_of(runs, PolicySpec::Adaptive),
        ) else {
            out.push(Target {
                name: format!("{workload}: per-state and adaptive ran"),
                met: false,
                figure: 0.0,
                unit: "",
                digits: 1,
                text: "one did not".into(),
            });
            return;
        };
        let (g, a) = (goodput(per_state), goodput(adaptive));
        let ratio = g / a;
        let versus = format!(
            "{g:.2} vs adaptive {a:.2} ({:+.2}%); per-state k = {}",
            100.0 * (ratio - 1.0),
            per_state
                .state_controller
                .as_ref()
                .map(|c| {
                    c.draft_lens
                        .iter()
                        .map(usize::to_string)
                        .collect::<Vec<_>>()
                        .join(" / ")
                })
                .unwrap_or_default()
        );
        let (name, met) = Self::per_state_bound(workload, ratio);
        out.push(Target {
            name,
            met,
            figure: 100.0 * (ratio - 1.0),
            unit: "% over adaptive",
            digits: 2,
            text: versus,
        });
        if workload == Workload::Bursty {
            // The bound per-state keeps on every workload (at most 0.5%
            // below adaptive) holds here too.
            out.push(Target {
                name: format!(
                    "{workload}: per-state loses at most {}% to adaptive",
                    100.0 * PER_STATE_MAX_LOSS
                ),
                met: ratio >= 1.0 - PER_STATE_MAX_LOSS,
                figure: 100.0 * (ratio - 1.0),
                unit: "% over adaptive",
                digits: 2,
                text: format!("{:+.2}%", 100.0 * (ratio - 1.0)),
            });
        }
        if workload == Workload::Mixed {
            out.push(Self::mixed_per_state_target(
                workload, runs, per_state, adaptive,
            ));
        }
    }

    /// The bound `per-state`'s goodput `ratio` to adaptive's must meet on
    /// `workload` (see [`per_state_targets`](Self::per_state_targets)):
    /// the target's name, and whether it is met.
    fn per_state_bound(workload: Workload, ratio: f64) -> (String, bool) {
        match workload {
            Workload::Bursty => (
                format!(
                    "{workload}: per-state earns at least {PER_STATE_BURSTY}x adaptive's goodput"
                ),
                ratio >= PER_STATE_BURSTY,
            ),
            Workload::Steady => (
                format!(
                    "{workload}: per-state loses at most {}% to adaptive",
                    100.0 * PER_STATE_STEADY_LOSS
                ),
                ratio >= 1.0 - PER_STATE_STEADY_LOSS,
            ),
            _ => (
                format!(
                    "{workload}: per-state loses at most {}% to adaptive",
                    100.0 * PER_STATE_MAX_LOSS
                ),
                ratio >= 1.0 - PER_STATE_MAX_LOSS,
            ),
        }
    }

    /// On `mixed`: `per-state` at least as good as the best static k.
    fn mixed_per_state_target(
        workload: Workload,
        runs: &[(PolicySpec, &Run)],
        per_state: &Summary,
        adaptive: &Summary,
    ) -> Target {
        let (g, a) = (goodput(per_state), goodput(adaptive));
        let oracle = Self::oracle(runs);
        let best = oracle.overall.1;
        Target {
            name: format!(
                "{workload}: per-state at least as good as the best static k (adaptive is not)"
            ),
            met: g >= best,
            figure: 100.0 * (g / best - 1.0),
            unit: "% over the best static k",
            digits: 1,
            text: format!(
                "per-state {g:.2}, best static k = {} {best:.2}, adaptive {a:.2} ({:+.1}%, \
                 mean draft length {:.2})",
                oracle.overall.0,
                100.0 * (a / best - 1.0),
                adaptive.overall.mean_draft_len.unwrap_or(0.0)
            ),
        }
    }

    /// The adaptive controller's targets on one workload.
    fn adaptive_targets(workload: Workload, runs: &[(PolicySpec, &Run)], out: &mut Vec<Target>) {
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
                digits: 1,
                text: "it did not".into(),
            });
            return;
        };
        let g = goodput(adaptive);
        if workload == Workload::Transition {
            let ratio = g / oracle.overall.1;
            out.push(Target {
                name: format!("{workload}: adaptive beats every static k overall"),
                met: ratio > 1.0,
                figure: 100.0 * (ratio - 1.0),
                unit: "% over the best static k",
                digits: 1,
                text: format!(
                    "{g:.2} vs best static k = {} at {:.2} ({:+.1}%)",
                    oracle.overall.0,
                    oracle.overall.1,
                    100.0 * (ratio - 1.0)
                ),
            });
        }
        out.push(Self::settled_target(workload, adaptive, &oracle));
        out.push(Self::switches_target(workload, adaptive));
        out.push(Self::peer_target(workload, adaptive, runs));
    }

    /// Adaptive's share of each phase's best static k once settled.
    fn settled_target(workload: Workload, adaptive: &Summary, oracle: &Oracle) -> Target {
        let settled: Vec<_> = adaptive
            .phases
            .iter()
            .zip(&oracle.settled)
            .map(|(p, o)| p.settled.goodput.unwrap_or(0.0) / o.1)
            .collect();
        let worst = settled.iter().copied().fold(f64::INFINITY, f64::min);
        Target {
            name: format!(
                "{workload}: adaptive reaches {:.0}% of each phase's best static k once settled",
                100.0 * SETTLED_SHARE
            ),
            met: worst >= SETTLED_SHARE,
            figure: 100.0 * worst,
            unit: "% in its worst phase",
            digits: 1,
            text: settled
                .iter()
                .map(|r| format!("{:.1}%", 100.0 * r))
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    /// Adaptive's switches in its busiest phase.
    fn switches_target(workload: Workload, adaptive: &Summary) -> Target {
        let most = adaptive
            .phases
            .iter()
            .map(|p| p.figures.switches)
            .fold(0.0, f64::max);
        Target {
            name: format!("{workload}: adaptive switches at most {FEW_SWITCHES} times per phase"),
            met: most <= FEW_SWITCHES,
            figure: most,
            unit: "switches in its busiest phase",
            digits: 1,
            text: format!("at most {most} (in all {})", adaptive.overall.switches),
        }
    }

    /// Adaptive against the best batch-level peer rule: goodput, and
    /// fewer switches.
    fn peer_target(workload: Workload, adaptive: &Summary, runs: &[(PolicySpec, &Run)]) -> Target {
        let g = goodput(adaptive);
        let peers: Vec<(PolicySpec, &Summary)> = runs
            .iter()
            .filter(|(p, _)| matches!(p, PolicySpec::Sglang | PolicySpec::Vllm44336))
            .filter_map(|(p, r)| r.as_ref().ok().map(|s| (*p, s)))
            .collect();
        let name = format!(
            "{workload}: adaptive at least as good as the best batch-level peer rule, \
                 switching less"
        );
        match peers
            .iter()
            .max_by(|a, b| goodput(a.1).total_cmp(&goodput(b.1)))
        {
            None => Target {
                name,
                met: false,
                figure: 0.0,
                unit: "",
                digits: 1,
                text: "no peer rule ran".into(),
            },
            Some((peer, ps)) => {
                let ratio = g / goodput(ps);
                Target {
                    name,
                    met: ratio >= 1.0 && adaptive.overall.switches < ps.overall.switches,
                    figure: 100.0 * (ratio - 1.0),
                    unit: "% over the best peer",
                    digits: 1,
                    text: format!(
                        "best peer {peer}: goodput {g:.2} vs {:.2} ({:+.1}%), switches {} vs {}",
                        goodput(ps),
                        100.0 * (ratio - 1.0),
                        adaptive.overall.switches,
                        ps.overall.switches
                    ),
                }
            }
        }
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
        let d = target.digits;
        let _ = writeln!(
            out,
            "- {}: met on {met} of {} seeds; {} from {lo:.d$} to {hi:.d$} (mean {mean:.d$})",
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
            tokens_per_request_step: None,
            drafted_per_request_step: None,
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
            cost_rule: "scheduled".into(),
            step_us: 8000,
            interval_ms: 1000,
            update_ms: 250,
            phase_seconds: 20.0,
            persistence: 30.0,
            state_rule: "library".into(),
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
            state_controller: None,
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
        // Per-state as good as adaptive: within 0.5% of it.
        runs.push((
            PolicySpec::PerState,
            Ok(run(PolicySpec::PerState, &[10.0, 9.0], &[2.0, 2.0])),
        ));
        let met: Vec<bool> = targets_of(runs).iter().map(|t| t.met).collect();
        assert_eq!(met, [true, true, true, false, true]);

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
        // Per-state 0.9% below adaptive (9.15 against 9.23): missed.
        runs.push((
            PolicySpec::PerState,
            Ok(run(PolicySpec::PerState, &[9.9, 8.4], &[0.0, 0.0])),
        ));
        let targets = targets_of(runs);
        let met: Vec<bool> = targets.iter().map(|t| t.met).collect();
        assert_eq!(
            met,
            [true, false, false, true, false],
            "{:?}",
            targets.iter().map(|t| &t.text).collect::<Vec<_>>()
        );
        assert!((targets[1].figure - 94.0).abs() < 1e-9);
        assert_eq!(targets[2].figure, 4.0);
        assert!((targets[4].figure - 100.0 * (9.15 / 9.23 - 1.0)).abs() < 1e-9);
    }

    /// Per-state's targets against adaptive on `workload`, with per-state
    /// at `per_state` and adaptive at 10 (both phases alike).
    fn per_state_targets(workload: Workload, per_state: f64) -> Vec<(String, bool)> {
        let runs: Vec<(PolicySpec, Run)> = vec![
            (
                PolicySpec::Static(1),
                Ok(run(PolicySpec::Static(1), &[10.05, 10.05], &[0.0, 0.0])),
            ),
            (
                PolicySpec::Static(2),
                Ok(run(PolicySpec::Static(2), &[9.0, 9.0], &[0.0, 0.0])),
            ),
            (
                PolicySpec::Adaptive,
                Ok(run(PolicySpec::Adaptive, &[10.0, 10.0], &[0.0, 0.0])),
            ),
            (
                PolicySpec::PerState,
                Ok(run(
                    PolicySpec::PerState,
                    &[per_state, per_state],
                    &[0.0, 0.0],
                )),
            ),
        ];
        let runs: Vec<(PolicySpec, &Run)> = runs.iter().map(|(p, r)| (*p, r)).collect();
        let mut out = Vec::new();
        Table::per_state_targets(workload, &runs, &mut out);
        out.into_iter().map(|t| (t.name, t.met)).collect()
    }

    #[test]
    fn per_state_targets_are_issue_18s() {
        let met = |w, g| -> Vec<bool> {
            per_state_targets(w, g)
                .into_iter()
                .map(|(_, m)| m)
                .collect()
        };
        // Bursty: at least 1.08 times adaptive (and within 0.5%, a fortiori).
        assert_eq!(met(Workload::Bursty, 10.81), [true, true]);
        assert_eq!(met(Workload::Bursty, 10.79), [false, true]);
        assert!(
            per_state_targets(Workload::Bursty, 10.8)[0]
                .0
                .contains("1.08x")
        );
        // Steady: at most 0.2% below.
        assert_eq!(met(Workload::Steady, 9.981), [true]);
        assert_eq!(met(Workload::Steady, 9.979), [false]);
        // Any other: at most 0.5% below.
        assert_eq!(met(Workload::Classes, 9.951), [true]);
        assert_eq!(met(Workload::Classes, 9.949), [false]);
        // Mixed also against the best static k (10.05 here).
        assert_eq!(met(Workload::Mixed, 10.06), [true, true]);
        assert_eq!(met(Workload::Mixed, 10.04), [true, false]);
    }
}
