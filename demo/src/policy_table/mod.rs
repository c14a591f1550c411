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
use specdec_sim::policy::{Kind, PolicySpec};
use specdec_sim::state_rule::StateRule;
use specdec_sim::summary::{CostLinear, Summary};
use specdec_sim::trace_set::TraceSet;
use specdec_sim::workload::Workload;

mod table;

use table::{Table, goodput, robustness};

/// Runs every drafting policy on every workload in virtual time and prints
/// one markdown table with the targets.
#[derive(Debug, Parser)]
#[command(name = "policy_table")]
pub struct Args {
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

/// The policies of the table: every static length `1..=K`, then every
/// other policy of the table of policies but the oracle (traces only).
pub fn policies() -> Vec<PolicySpec> {
    let mut all: Vec<_> = (1..=MAX_DRAFT_LEN).map(PolicySpec::fixed).collect();
    // Every other policy of the table but the oracle (on traces only).
    all.extend(
        PolicySpec::non_static()
            .into_iter()
            .filter(|p| p.kind() != Kind::Oracle),
    );
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

/// Runs the program: parses the command line, runs the simulations and
/// prints the table (standard output); its exit status.
pub fn main() -> ExitCode {
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

/// A policy's switches, `-` for the oracle: it picks each step's length
/// afresh, so its changes of length are no switches of a choice (as in
/// `whatif`).
fn switches(policy: PolicySpec, switches: f64) -> String {
    if policy.kind() == Kind::Oracle {
        "-".to_owned()
    } else {
        switches.to_string()
    }
}

/// The table of every policy on a trace: goodput, its ratio to the best
/// static length, tokens and drafted tokens per request-step, switches.
pub fn traces_table(args: &Args, traces: Arc<TraceSet>) -> String {
    let started = Instant::now();
    let mut policies: Vec<PolicySpec> = vec![PolicySpec::fixed(0)];
    policies.extend(self::policies());
    policies.push(PolicySpec::oracle());
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
        .filter(|(_, p)| p.static_len().is_some())
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
        let name = policy.label();
        let _ = match run {
            Ok(s) => writeln!(
                out,
                "| {name} | {:.3} | {:.4} | {:.3} | {:.3} | {} |",
                goodput(s),
                goodput(s) / best,
                s.overall.tokens_per_request_step.unwrap_or(0.0),
                s.overall.drafted_per_request_step.unwrap_or(0.0),
                switches(*policy, s.overall.switches)
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
                ..config(args, seed, workload, PolicySpec::adaptive())
            };
            configs.push(base.clone());
            for rule in StateRule::COMPARED {
                configs.push(engine::Config {
                    policy: PolicySpec::per_state(),
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
