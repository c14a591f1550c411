//! A simulated multi-threaded serving engine that embeds `specdec-metrics`
//! the way a real one would:
//!
//! - one [`Recorder`] for the engine; every engine thread owns a [`Worker`]
//!   and records each verify step of each request in its batch;
//! - every request keeps its own [`AcceptanceHistogram`] (its per-request
//!   report, printed when it finishes with `--print-requests`);
//! - a metrics thread snapshots the recorder every interval and logs a
//!   vLLM-style line computed from [`AcceptanceHistogram::delta_since`],
//!   plus the by-draft-length table vLLM cannot print;
//! - `/metrics` is served over HTTP (an axum router on hyper's HTTP/1
//!   connection builder, so that a client slow to send its request headers
//!   is timed out) from a [`SpecDecodeCollector`], OpenMetrics for
//!   Prometheus, the classic text format for `curl` and `promtool`;
//! - at the end (time limit, Ctrl-C or SIGTERM) the engine-wide report is
//!   printed on standard output as JSON; the logs go to standard error.
//!
//! Exit status, as for the `specdec-metrics` command line: 0 on success,
//! also when the reader of standard output or standard error goes away
//! (`| head`), which ends the run quietly; 2 on any error (bad flag value,
//! metric name prefix, address in use, standard output closed with `>&-`
//! so that the report would be lost), with a message on standard error.
//!
//! The drafting policy closes the loop (`--policy adaptive`, the default):
//! every 250 ms (`--update-ms`) the metrics thread feeds the histogram of
//! what was recorded since its last update (`delta_since`) to a
//! [`DraftController`] and publishes its plan in a
//! [`SharedPlan`]; every engine step reads its draft budget from the plan
//! (one atomic load), records the budget it scheduled
//! (`observe_scheduled`) and each request's `(k, a)` (`observe`). The
//! interval log shows the chosen `k`, when it switched and when the
//! controller saw a change of regime. `--policy per-state` drafts per
//! request state instead: each request keeps a `RequestState`, each verify
//! step is recorded in its state (`observe_in`), and a `StateController`
//! chooses a length per state, published in a `SharedStatePlan`.
//! `--policy static:K` drafts `K` at every step, for comparison; `sglang`
//! and `vllm-44336` are the batch-level adaptive rules of those engines,
//! `smartspec` and `vllm-av` per-request rules (SmartSpec's, vLLM's
//! adaptive verification).
//!
//! The workload (`--workload`, see [`specdec_sim::workload`]) sets how well the
//! proposer predicts each request: `transition` (the default) alternates
//! low- and high-acceptance phases of `--phase-seconds` (4) each, so the
//! default 10-second run shows the controller move from a short draft to a
//! long one and back; `steady` keeps one level; `mixed` puts code-like and
//! chat-like requests in every batch. An engine step with budget `b` costs
//! `BASE + PER_TOKEN b` cost units (`--cost-linear`, default `1,0.1`, the
//! controller's step cost too), one unit being `--step-us` microseconds.
//! With `--virtual-time` the steps advance a simulated clock instead of
//! sleeping: a run is fast and, for a `--seed`, always the same.
//!
//! Kept from a real engine's mess, independent of the policy: structured
//! output requests have drafts cut short by their grammar (sometimes all of
//! them: `k = 0`), some request-steps draft nothing (`observe_undrafted`),
//! and rarely an engine reports more accepted tokens than drafted (a
//! rejected observation).
//!
//! After the report, standard output gets one more line: the run's summary
//! as one JSON object (policy, workload, seed, `K`, cost; per phase and
//! overall the tokens, cost units, goodput, mean draft length and
//! switches, and each phase's settled part). Its keys are documented in
//! [`specdec_sim::summary`] and `sim/README.md`.
//!
//! The flags and the run are here; the `/metrics` server is in `http.rs`,
//! the output and the logs in `log.rs`.
//!
//! ```text
//! cargo run --release -p specdec-demo
//! cargo run --release -p specdec-demo -- --seconds 30 --print-requests
//! cargo run --release -p specdec-demo -- --virtual-time --seconds 80 --phase-seconds 20 --policy static:3
//! curl -s http://127.0.0.1:9464/metrics | promtool check metrics
//! ```
//!
//! [`Recorder`]: specdec_metrics::Recorder
//! [`Worker`]: specdec_metrics::Worker
//! [`DraftController`]: specdec_metrics::DraftController
//! [`SharedPlan`]: specdec_metrics::SharedPlan

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use clap::Parser;
use prometheus_client::registry::Registry;
use specdec_demo::engine_metrics::{
    DEFAULT_PREFIX, EngineMetrics, SpecDecodeCollector, namespace_for,
};
use specdec_metrics::AcceptanceHistogram;
use specdec_sim::engine;
use specdec_sim::error::Setting;
use specdec_sim::policy::{self, PolicySpec};
use specdec_sim::state_rule::StateRule;
use specdec_sim::stdio;
use specdec_sim::summary::CostLinear;
use specdec_sim::trace_set::TraceSet;
use specdec_sim::workload::Workload;

#[macro_use]
mod log;
mod http;

use http::HttpLimits;
use log::{DemoEvents, Output, figure};

/// Simulates a speculative-decoding serving engine that records every verify
/// step with specdec-metrics, logs interval metrics, serves /metrics over HTTP
/// and prints the engine-wide report (JSON, standard output) when it stops.
#[derive(Debug, Clone, Parser)]
#[command(name = "serving_engine")]
struct Args {
    /// Run for N seconds, then stop (0 = until Ctrl-C; at most 31536000,
    /// a year).
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u64).range(..=MAX_SECONDS))]
    seconds: u64,
    /// Engine threads (default: the machine's parallelism, at most 256;
    /// 1..=256).
    #[arg(long, value_name = "N", default_value_t = default_workers(), value_parser = workers)]
    workers: usize,
    /// num_spec_tokens, the largest draft (1..=64).
    #[arg(long, value_name = "K", default_value_t = 5, value_parser = max_draft_len)]
    max_draft_len: usize,
    /// Requests per engine thread at most (1..=4096; with --workers, at
    /// most 65536 requests in all).
    #[arg(long, value_name = "N", default_value_t = 32, value_parser = max_batch)]
    max_batch: usize,
    /// Metrics log interval, in milliseconds (1..=3600000, an hour).
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=MAX_MS))]
    interval_ms: u64,
    /// The drafting controller's update period, in milliseconds (at most
    /// --interval-ms): every N ms the metrics thread feeds the controller
    /// what was recorded since its last update and publishes its plan
    /// [default: 250, or --interval-ms if shorter].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=MAX_MS))]
    update_ms: Option<u64>,
    /// Where /metrics is served (port 0: any free port, printed at start).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9464")]
    metrics_addr: SocketAddr,
    /// Close an HTTP connection whose client has not sent a whole request
    /// head (request line and headers) within N milliseconds, idle
    /// keep-alive connections included (1..=3600000).
    #[arg(long, value_name = "N", default_value_t = 5000, value_parser = clap::value_parser!(u64).range(1..=MAX_MS))]
    header_read_timeout_ms: u64,
    /// Close an HTTP connection N milliseconds after it was accepted: it
    /// takes no new request then (a response being written may finish),
    /// and after N more it is closed whatever it is doing, a client that
    /// never reads its response included (1..=3600000).
    #[arg(long, value_name = "N", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=MAX_MS))]
    connection_timeout_ms: u64,
    /// Serve at most N HTTP connections at once; further clients wait
    /// (in the listen backlog) until one ends (1..=4096).
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = max_connections)]
    max_connections: usize,
    /// Metric name prefix (vllm:spec_decode gives vLLM's names).
    #[arg(long, value_name = "P", default_value = DEFAULT_PREFIX)]
    prefix: String,
    /// The model_name label.
    #[arg(long, value_name = "NAME", default_value = "demo-model")]
    model_name: String,
    /// Simulated time of one cost unit (about one engine step), in
    /// microseconds (0 = run hot, no sleep; not with --virtual-time; at
    /// most 1000000, and without --virtual-time a step of the largest
    /// budget, BASE + PER_TOKEN * K units, lasts at most a second, so a
    /// signal or the time limit is never more than a step away).
    #[arg(long, value_name = "N", default_value_t = 8000, value_parser = clap::value_parser!(u64).range(..=MAX_STEP_US))]
    step_us: u64,
    /// After stopping, keep serving the final counters for N seconds so a
    /// scraper can read them (at most 31536000).
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u64).range(..=MAX_SECONDS))]
    linger_seconds: u64,
    /// Before the engine starts, serve /metrics with every counter at zero
    /// for N seconds, so that a scraper's first sample is zero and it sees
    /// every step (Prometheus' increase() never counts what a series held
    /// at its first sample; at most 31536000).
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = clap::value_parser!(u64).range(..=MAX_SECONDS))]
    delay_seconds: u64,
    /// Print each finished request's report (standard error).
    #[arg(long)]
    print_requests: bool,
    /// Random seed.
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
    /// Drafting policy: every policy of the table of policies but the
    /// oracle, with what it is (`policy::choices_help`).
    #[arg(long, value_name = "P", default_value = "adaptive", value_parser = parse_policy,
          help = format!("Drafting policy: {}", policy::choices_help()))]
    policy: PolicySpec,
    /// Workload: transition (low- and high-acceptance phases in turn),
    /// steady (one level), mixed (code-like and chat-like requests in every
    /// batch), bursty (every request alternates between an easy and a hard
    /// condition) or classes (code, math and summarization requests with
    /// measured profiles).
    #[arg(long, value_name = "W", default_value = "transition", value_parser = parse_workload)]
    workload: Workload,
    /// Replay logged requests instead of a drawn workload: an n-gram
    /// drafting trace as `specdec-metrics ngram` writes it (JSON Lines, one
    /// request per line; `-` reads standard input). What the drafter
    /// proposes and the verifier accepts at every position is the trace's;
    /// engine thread i takes every --workers-th request from the i-th on,
    /// cycling through the file, so a timed run never runs dry. Replaces
    /// --workload.
    #[arg(long, value_name = "FILE")]
    traces: Option<std::path::PathBuf>,
    /// What a step costs: scheduled (BASE + PER_TOKEN * the mean length the
    /// policy scheduled per request, whether or not the drafter had a
    /// proposal) or drafted (the mean tokens actually drafted: a request
    /// without a match costs nothing beyond BASE). Default: drafted with
    /// --traces (as whatif and policy_table), else scheduled.
    #[arg(long, value_name = "RULE", value_parser = parse_cost_rule)]
    cost_rule: Option<engine::CostRule>,
    /// Length of each phase of the transition workload, in seconds.
    #[arg(long, value_name = "N", default_value_t = 4.0, value_parser = phase_seconds)]
    phase_seconds: f64,
    /// Mean number of steps a request of the bursty workload stays in its
    /// easy or hard condition (geometric durations; at least 1).
    #[arg(long, value_name = "STEPS", default_value_t = specdec_sim::workload::DEFAULT_PERSISTENCE, value_parser = persistence)]
    persistence: f64,
    /// What a request's state is, for --policy per-state: library (the
    /// library's RequestState), ewma:N (its score with weight 1/N),
    /// last-outcome (the previous step's outcome in three levels) or
    /// tested:N (a score of accepted over tested positions).
    #[arg(long, value_name = "RULE", default_value = "library", value_parser = parse_state_rule)]
    state_rule: StateRule,
    /// Simulated cost of an engine step with draft budget b: BASE +
    /// PER_TOKEN * b cost units (one unit = --step-us microseconds); also
    /// the controller's step cost.
    #[arg(long, value_name = "BASE,PER_TOKEN", default_value = "1,0.1", value_parser = cost_linear)]
    cost_linear: CostLinear,
    /// Steps advance a simulated clock instead of sleeping: fast, and the
    /// same output for the same --seed.
    #[arg(long)]
    virtual_time: bool,
}

impl Args {
    fn interval(&self) -> Duration {
        Duration::from_millis(self.interval_ms)
    }
    fn step(&self) -> Duration {
        Duration::from_micros(self.step_us)
    }
    fn linger(&self) -> Duration {
        Duration::from_secs(self.linger_seconds)
    }
    /// The bounds that depend on two flags: requests in flight in all, and
    /// in real time the longest step's sleep (one sleep per step, so a stop
    /// waits for at most one step).
    fn check_limits(&self) -> Result<(), String> {
        let requests = self.workers * self.max_batch;
        if requests > MAX_REQUESTS {
            return Err(format!(
                "--workers {} with --max-batch {} is {requests} requests in flight \
                 (at most {MAX_REQUESTS}): take fewer threads or smaller batches",
                self.workers, self.max_batch
            ));
        }
        let CostLinear { base, per_token } = self.cost_linear;
        let longest = (base + per_token * self.max_draft_len as f64) * self.step_us as f64;
        if !self.virtual_time && longest > MAX_STEP_US as f64 {
            return Err(format!(
                "--step-us {} with --cost-linear {base},{per_token}: a step of budget {} \
                 would sleep {:.3} s (at most 1 s, so a stop is never more than a second \
                 away): lower --step-us or the costs, or use --virtual-time",
                self.step_us,
                self.max_draft_len,
                longest * 1e-6
            ));
        }
        Ok(())
    }

    fn http_limits(&self) -> HttpLimits {
        HttpLimits {
            header_read_timeout: Duration::from_millis(self.header_read_timeout_ms),
            connection_timeout: Duration::from_millis(self.connection_timeout_ms),
            max_connections: self.max_connections,
        }
    }
}

/// The most seconds of `--seconds`, `--linger-seconds` and
/// `--delay-seconds`: a year.
const MAX_SECONDS: u64 = 365 * 24 * 3600;

/// The most milliseconds of the intervals and HTTP timeouts: an hour.
const MAX_MS: u64 = 3_600_000;

/// The most engine threads.
const MAX_WORKERS: usize = 256;

/// The most requests of one engine thread's batch.
const MAX_BATCH: usize = 4096;

/// The most requests in flight, over every engine thread (each keeps a
/// histogram of its own: at K = 64, 17 KiB, so about 1.1 GiB in all).
const MAX_REQUESTS: usize = 65_536;

/// The most concurrent HTTP connections.
const MAX_CONNECTIONS: usize = 4096;

/// The most microseconds of `--step-us`; and, in real time, the longest a
/// step may sleep, so the engine threads see a stop within a second.
const MAX_STEP_US: u64 = 1_000_000;

fn default_workers() -> usize {
    thread::available_parallelism().map_or(2, |n| n.get().min(MAX_WORKERS))
}

/// A whole number in `1..=max`.
fn whole_in(v: &str, max: usize) -> Result<usize, String> {
    match v.parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("{v:?} is not a whole number in 1..={max}")),
    }
}

fn workers(v: &str) -> Result<usize, String> {
    whole_in(v, MAX_WORKERS)
}

fn max_batch(v: &str) -> Result<usize, String> {
    whole_in(v, MAX_BATCH)
}

fn max_connections(v: &str) -> Result<usize, String> {
    whole_in(v, MAX_CONNECTIONS)
}

/// `--max-draft-len`: the library's own check and message.
fn max_draft_len(v: &str) -> Result<usize, String> {
    let k = v
        .parse::<usize>()
        .map_err(|_| format!("{v:?} is not a whole number"))?;
    AcceptanceHistogram::new(k)
        .map(|_| k)
        .map_err(|e| e.to_string())
}

fn parse_policy(v: &str) -> Result<PolicySpec, String> {
    v.parse()
}

fn parse_cost_rule(v: &str) -> Result<engine::CostRule, String> {
    v.parse()
}

fn parse_workload(v: &str) -> Result<Workload, String> {
    v.parse()
}

fn parse_state_rule(v: &str) -> Result<StateRule, String> {
    v.parse()
}

fn persistence(v: &str) -> Result<f64, String> {
    match v.parse::<f64>() {
        Ok(s) if s.is_finite() && s >= 1.0 => Ok(s),
        _ => Err(format!("{v:?} is not a number of steps of at least 1")),
    }
}

fn phase_seconds(v: &str) -> Result<f64, String> {
    match v.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 => Ok(s),
        _ => Err(format!("{v:?} is not a number of seconds above 0")),
    }
}

/// `--cost-linear BASE,PER_TOKEN`: two numbers, checked by
/// `StepCost::linear` (its message on error).
fn cost_linear(v: &str) -> Result<CostLinear, String> {
    let (base, per_token) = v
        .split_once(',')
        .ok_or_else(|| format!("{v:?} is not BASE,PER_TOKEN (two numbers and a comma)"))?;
    let number = |x: &str| {
        x.trim()
            .parse::<f64>()
            .map_err(|_| format!("{x:?} in {v:?} is not a number"))
    };
    let (base, per_token) = (number(base)?, number(per_token)?);
    specdec_metrics::StepCost::linear(base, per_token).map_err(|e| e.to_string())?;
    Ok(CostLinear { base, per_token })
}

fn main() -> ExitCode {
    // A bad flag exits with status 2 (clap's usage error).
    let args = Args::parse();
    let output = Arc::new(Output::new());
    match run(&args, &output) {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            log!(output, "serving_engine: {msg}");
            ExitCode::from(2)
        }
    }
}

/// Why the engine stopped.
#[derive(Debug, Clone, Copy)]
enum Stop {
    TimeLimit,
    /// Ctrl-C (SIGINT).
    Interrupted,
    /// SIGTERM.
    Terminated,
    /// The reader of standard error (or standard output) went away.
    OutputClosed,
}

impl Args {
    /// The simulation's settings, with the traces `--traces` read.
    fn sim_config(&self, traces: Option<Arc<TraceSet>>) -> engine::Config {
        engine::Config {
            policy: self.policy,
            workload: if traces.is_some() {
                Workload::Traces
            } else {
                self.workload
            },
            phase_secs: self.phase_seconds,
            persistence: self.persistence,
            state_rule: self.state_rule,
            workers: self.workers,
            max_draft_len: self.max_draft_len,
            max_batch: self.max_batch,
            interval: self.interval(),
            update: Duration::from_millis(
                self.update_ms
                    .unwrap_or(engine::DEFAULT_UPDATE_MS.min(self.interval_ms)),
            ),
            step_us: self.step_us,
            cost: self.cost_linear,
            seconds: self.seconds,
            virtual_time: self.virtual_time,
            seed: self.seed,
            settle_intervals: engine::SETTLE_INTERVALS,
            traces,
            state_space: None,
            model: engine::EngineModel {
                cost_rule: self.cost_rule.unwrap_or(if self.traces.is_some() {
                    engine::CostRule::Drafted
                } else {
                    engine::CostRule::Scheduled
                }),
                ..engine::EngineModel::default()
            },
        }
    }
}

/// The demo: checks the settings, starts `/metrics`, runs the simulation
/// on its metrics thread until it ends or is stopped, prints the report and
/// the summary, then lingers if asked.
fn run(args: &Args, output: &Arc<Output>) -> Result<(), String> {
    let config = settings(args)?;
    // The policy's plan (the controller's, for adaptive), shared by the
    // simulation and the /metrics gauge.
    let plan = engine::shared_plan(&config).map_err(flagged)?;
    // The engine's recorder. One histogram per request state for
    // per-state; the engine-wide families stay their sum.
    let recorder = engine::recorder(&config).map_err(flagged)?;
    let (registry, engine_metrics) = registry(args, &recorder, plan.as_ref())?;

    // HTTP first, so a bind error stops us before any work, and a scraper
    // sees every series from the first step on.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("http")
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the HTTP runtime: {e}"))?;
    let metrics_addr = http::start(&runtime, args.metrics_addr, registry, args.http_limits())?;
    log_start(output, args, &config, metrics_addr);
    let stopped_early = delay(args, &runtime, output, metrics_addr);

    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(stopped_early.is_some()));
    let (sim_done, sim_done_rx) = tokio::sync::oneshot::channel::<()>();
    let events = DemoEvents {
        output: Arc::clone(output),
        print_requests: args.print_requests,
        engine_metrics,
        per_request: args.policy.per_request(),
    };
    let simulation = {
        let (recorder, stop) = (recorder.clone(), Arc::clone(&stop));
        thread::Builder::new()
            .name("metrics".into())
            .spawn(move || {
                let outcome = engine::run(&config, &recorder, plan.as_ref(), &stop, &events);
                // The main thread may have stopped waiting already.
                let _ = sim_done.send(());
                outcome
            })
            .map_err(|e| format!("cannot start the metrics thread: {e}"))?
    };

    let why = match stopped_early {
        Some(why) => why,
        None => runtime.block_on(wait_for_stop(
            async {
                // An error means the simulation ended without saying so (a
                // panic): the join below reports it.
                let _ = sim_done_rx.await;
            },
            output,
        )),
    };
    // Relaxed: the simulation polls it; the join below orders the rest.
    stop.store(true, Ordering::Relaxed);
    let outcome = simulation
        .join()
        .map_err(|_| "the simulation panicked".to_owned())?
        .map_err(flagged)?;

    // Every step has been recorded and every Worker dropped: this snapshot
    // is the whole run.
    let report = recorder.snapshot();
    log_stop(output, args, why, started, &outcome, &report);
    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    output.report(&json)?;
    let json = serde_json::to_string(&outcome.summary).map_err(|e| e.to_string())?;
    output.report(&json)?;

    if !args.linger().is_zero() && matches!(why, Stop::TimeLimit) && !output.is_closed() {
        linger(args, &runtime, output, metrics_addr);
    }
    // Dropping the runtime stops the HTTP server.
    runtime.shutdown_timeout(Duration::from_secs(1));
    Ok(())
}

/// The simulation's settings, checked, with the traces `--traces` read;
/// refused if standard output is closed.
fn settings(args: &Args) -> Result<engine::Config, String> {
    if stdio::stdout_is_closed() {
        return Err(
            "standard output is closed (>&-): the report would be lost; redirect it to a file, \
             or to /dev/null if it is not wanted"
                .into(),
        );
    }
    // Settings that depend on each other (a static:K above K, a policy not
    // built, --virtual-time with --step-us 0) stop us before any work.
    args.check_limits()?;
    let traces = match &args.traces {
        Some(path) => Some(Arc::new(
            TraceSet::open(path).map_err(|e| format!("--traces {}", e.naming(&flag)))?,
        )),
        None => None,
    };
    let config = args.sim_config(traces);
    config.validate().map_err(flagged)?;
    Ok(config)
}

/// The flag of a setting the simulator's errors name.
fn flag(setting: Setting) -> &'static str {
    match setting {
        Setting::MaxDraftLen => "--max-draft-len",
        Setting::CostTable => "--cost-table",
        Setting::CostLinear => "--cost-linear",
        Setting::PhaseSecs => "--phase-seconds",
        Setting::Persistence => "--persistence",
        Setting::StepUs => "--step-us",
        Setting::VirtualTime => "--virtual-time",
        Setting::Workers => "--workers",
        Setting::MaxBatch => "--max-batch",
        Setting::Interval => "--interval-ms",
        Setting::Update => "--update-ms",
        Setting::Policy => "--policy",
        Setting::Traces => "--traces",
        Setting::Seconds => "--seconds",
    }
}

/// A simulator's error as this program says it: with its flags.
fn flagged(e: specdec_sim::error::Error) -> String {
    e.naming(&flag).to_string()
}

/// The registry `/metrics` encodes: the collector of `recorder` (one
/// snapshot per scrape), with the gauge of the chosen draft length when the
/// policy has one plan (adaptive, static:K), and vLLM's engine metrics under
/// the same prefix (returned too: the simulation feeds them).
fn registry(
    args: &Args,
    recorder: &specdec_metrics::Recorder,
    plan: Option<&Arc<specdec_metrics::SharedPlan>>,
) -> Result<(Registry, EngineMetrics), String> {
    let mut collector = SpecDecodeCollector::new(recorder.clone())
        .with_prefix(args.prefix.as_str())
        .and_then(|c| {
            c.with_const_labels([("model_name", args.model_name.as_str()), ("engine", "0")])
        })
        .map_err(|e| e.to_string())?;
    if let Some(plan) = plan {
        collector = collector.with_plan(Arc::clone(plan));
    }
    let engine_metrics = EngineMetrics::new(&namespace_for(&args.prefix), &args.model_name, "0");
    let mut registry = Registry::default();
    registry.register_collector(Box::new(collector));
    engine_metrics.register(&mut registry);
    Ok((registry, engine_metrics))
}

/// The first log line: the settings, where `/metrics` is, how long it runs.
fn log_start(output: &Output, args: &Args, config: &engine::Config, metrics_addr: SocketAddr) {
    log!(
        output,
        "serving_engine: {} engine threads, num_spec_tokens K = {}, max batch {}, \
         policy {}, workload {}{}, step cost {} + {} b units of {} us{}; \
         metrics on http://{}/metrics (prefix {}); {}",
        args.workers,
        args.max_draft_len,
        args.max_batch,
        args.policy,
        config.workload,
        match config.workload {
            Workload::Transition => format!(" ({} s phases)", args.phase_seconds),
            Workload::Bursty => format!(" (conditions last {} steps on average)", args.persistence),
            Workload::Traces => format!(
                " ({} requests, {} positions; cost rule {})",
                config.traces.as_ref().map_or(0, |t| t.requests().len()),
                config.traces.as_ref().map_or(0, |t| t.positions()),
                config.model.cost_rule
            ),
            _ => String::new(),
        },
        args.cost_linear.base,
        args.cost_linear.per_token,
        args.step().as_micros(),
        if args.virtual_time {
            ", virtual time"
        } else {
            ""
        },
        metrics_addr,
        args.prefix,
        match (args.seconds, args.virtual_time) {
            (0, _) => "running until Ctrl-C".to_owned(),
            (s, false) => format!("running {s} s (Ctrl-C stops early)"),
            (s, true) => format!("running {s} s of virtual time (Ctrl-C stops early)"),
        },
    );
}

/// `--delay-seconds`: zero counters served before the engine starts. A
/// signal while waiting stops the run before its first step (the report is
/// then all zeros): the reason is returned.
fn delay(
    args: &Args,
    runtime: &tokio::runtime::Runtime,
    output: &Output,
    metrics_addr: SocketAddr,
) -> Option<Stop> {
    if args.delay_seconds == 0 {
        return None;
    }
    log!(
        output,
        "serving_engine: serving zero counters on http://{}/metrics for {} s before the engine starts",
        metrics_addr,
        args.delay_seconds
    );
    let delay = Duration::from_secs(args.delay_seconds);
    // Created inside the runtime, as the linger's timer.
    match runtime.block_on(async { wait_for_stop(tokio::time::sleep(delay), output).await }) {
        Stop::TimeLimit => None,
        why => Some(why),
    }
}

/// The last log line: why and when the run stopped, and what it did.
fn log_stop(
    output: &Output,
    args: &Args,
    why: Stop,
    started: Instant,
    outcome: &engine::Outcome,
    report: &AcceptanceHistogram,
) {
    let summary = &outcome.summary;
    log!(
        output,
        "serving_engine: stopped ({}) after {:.1} s{}: {} requests finished, {} verify steps, \
         {} undrafted steps, mean acceptance length {:.3}, draft acceptance rate {:.4}; \
         goodput {} tokens per cost unit, mean draft length {}, {} switches; \
         engine report and summary (JSON) on standard output",
        match why {
            Stop::TimeLimit => "time limit",
            Stop::Interrupted => "Ctrl-C",
            Stop::Terminated => "SIGTERM",
            Stop::OutputClosed => "output closed",
        },
        started.elapsed().as_secs_f64(),
        if args.virtual_time {
            format!(" ({:.1} s of virtual time)", summary.seconds)
        } else {
            String::new()
        },
        outcome.requests_finished,
        report.num_spec_steps(),
        report.num_undrafted_steps(),
        report.mean_acceptance_length(),
        report.draft_acceptance_rate(),
        figure(summary.overall.goodput, 3),
        figure(summary.overall.mean_draft_len, 2),
        summary.overall.switches,
    );
}

/// `--linger-seconds`: the final counters served a while longer (until the
/// time is up, a signal, or the output closes).
fn linger(
    args: &Args,
    runtime: &tokio::runtime::Runtime,
    output: &Output,
    metrics_addr: SocketAddr,
) {
    log!(
        output,
        "serving_engine: serving the final counters on http://{}/metrics for {} s",
        metrics_addr,
        args.linger().as_secs()
    );
    // The timer is created inside the runtime: an `async` block runs
    // only once `block_on` polls it (`tokio::time::sleep` called out
    // here, outside the runtime, would panic).
    let linger = args.linger();
    runtime.block_on(async {
        wait_for_stop(tokio::time::sleep(linger), output).await;
    });
}

/// Resolves when `done` does (the run's end: [`Stop::TimeLimit`]), at
/// Ctrl-C / SIGTERM, or when the output is closed.
async fn wait_for_stop(done: impl Future<Output = ()>, output: &Output) -> Stop {
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut sigterm) => {
                sigterm.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = done => Stop::TimeLimit,
        _ = tokio::signal::ctrl_c() => Stop::Interrupted,
        () = terminate => Stop::Terminated,
        () = output.closed() => Stop::OutputClosed,
    }
}
