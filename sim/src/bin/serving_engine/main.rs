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
//! ```text
//! cargo run --release -p specdec-sim
//! cargo run --release -p specdec-sim -- --seconds 30 --print-requests
//! cargo run --release -p specdec-sim -- --virtual-time --seconds 80 --phase-seconds 20 --policy static:3
//! curl -s http://127.0.0.1:9464/metrics | promtool check metrics
//! ```
//!
//! [`Recorder`]: specdec_metrics::Recorder
//! [`Worker`]: specdec_metrics::Worker
//! [`DraftController`]: specdec_metrics::DraftController
//! [`SharedPlan`]: specdec_metrics::SharedPlan

use std::fmt;
use std::io::{self, Write as _};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::IntoResponse;
use axum::routing::get;
use clap::Parser;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use prometheus_client::registry::Registry;
use specdec_metrics::{AcceptanceHistogram, RequestState};
use specdec_sim::engine::{self, EngineStep, Events, FinishedRequest, Interval};
use specdec_sim::engine_metrics::{
    DEFAULT_PREFIX, EngineMetrics, SpecDecodeCollector, TextFormat, encode_registry, namespace_for,
};
use specdec_sim::policy::PolicySpec;
use specdec_sim::state_rule::StateRule;
use specdec_sim::stdio;
use specdec_sim::summary::CostLinear;
use specdec_sim::trace_set::TraceSet;
use specdec_sim::workload::Workload;

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
    /// Drafting policy: adaptive (the DraftController's plan), per-state
    /// (the StateController's plan, a length per request state), static:K,
    /// sglang (SGLang's EMA tiers), vllm-44336 (vLLM #44336's per-position
    /// EMA), smartspec (a SmartSpec-style per-request rule) or vllm-av
    /// (vLLM's adaptive verification, per request).
    #[arg(long, value_name = "P", default_value = "adaptive", value_parser = parse_policy)]
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
    /// without a match costs nothing beyond BASE; for --traces).
    #[arg(long, value_name = "RULE", default_value = "scheduled", value_parser = parse_cost_rule)]
    cost_rule: engine::CostRule,
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

/// Writes one line on standard error through an [`Output`], like
/// `eprintln!` but without ever panicking.
macro_rules! log {
    ($output:expr, $($arg:tt)*) => {
        $output.log(format_args!($($arg)*))
    };
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

/// Standard error (the logs) and standard output (the final report),
/// written without ever panicking.
///
/// `eprintln!` and `println!` panic when a write fails, as it does once the
/// reader of a pipe has gone away (`serving_engine 2>&1 | head -1`). Here
/// the first failed write to standard error marks the output closed and
/// wakes the main thread, which stops the engine, skips every later log
/// line and exits with status 0, as the command line does: nobody is left
/// to read the logs. (A closed descriptor is reopened on `/dev/null` by
/// Rust's runtime: `2>&-` loses the logs, which is harmless, and `>&-` is
/// refused before the run by [`stdio::stdout_is_closed`], as by the command
/// line.)
struct Output {
    closed: AtomicBool,
    wake: tokio::sync::Notify,
}

impl Output {
    fn new() -> Self {
        Self {
            closed: AtomicBool::new(false),
            wake: tokio::sync::Notify::new(),
        }
    }

    /// Writes one line on standard error, unless the output is closed.
    fn log(&self, line: fmt::Arguments<'_>) {
        if self.is_closed() {
            return;
        }
        let mut stderr = io::stderr().lock();
        if writeln!(stderr, "{line}").is_err() {
            self.close();
        }
    }

    /// Writes the report on standard output. A reader that went away closes
    /// the output quietly; any other failure is an error to report.
    fn report(&self, text: &str) -> Result<(), String> {
        let mut stdout = io::stdout().lock();
        match writeln!(stdout, "{text}").and_then(|()| stdout.flush()) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                self.close();
                Ok(())
            }
            Err(e) => Err(format!("cannot write the report to standard output: {e}")),
        }
    }

    fn close(&self) {
        // Relaxed: the flag only lets later writes skip the stream; the
        // main thread is woken through `Notify`, which orders what it needs.
        self.closed.store(true, Ordering::Relaxed);
        // Stores a permit if nobody waits yet, so `closed()` still returns.
        self.wake.notify_one();
    }

    fn is_closed(&self) -> bool {
        // Relaxed: see `close`.
        self.closed.load(Ordering::Relaxed)
    }

    /// Resolves once the output is closed.
    async fn closed(&self) {
        if !self.is_closed() {
            self.wake.notified().await;
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
                cost_rule: self.cost_rule,
                ..engine::EngineModel::default()
            },
        }
    }
}

fn run(args: &Args, output: &Arc<Output>) -> Result<(), String> {
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
            TraceSet::open(path).map_err(|e| format!("--traces {e}"))?,
        )),
        None => None,
    };
    let config = args.sim_config(traces);
    config.validate()?;
    // The policy's plan (the controller's, for adaptive), shared by the
    // simulation and the /metrics gauge.
    let plan = engine::shared_plan(&config)?;

    // The engine's recorder, and the collector the /metrics endpoint encodes
    // (one snapshot per scrape), with the gauge of the chosen draft length
    // when the policy has one plan (adaptive, static:K).
    // One histogram per request state for per-state; the engine-wide
    // families stay their sum.
    let recorder = engine::recorder(&config)?;
    let mut collector = SpecDecodeCollector::new(recorder.clone())
        .with_prefix(args.prefix.as_str())
        .and_then(|c| {
            c.with_const_labels([("model_name", args.model_name.as_str()), ("engine", "0")])
        })
        .map_err(|e| e.to_string())?;
    if let Some(plan) = &plan {
        collector = collector.with_plan(Arc::clone(plan));
    }
    // vLLM's engine metrics, under the same prefix, in the same registry.
    let engine_metrics = EngineMetrics::new(&namespace_for(&args.prefix), &args.model_name, "0");
    let mut registry = Registry::default();
    registry.register_collector(Box::new(collector));
    engine_metrics.register(&mut registry);

    // HTTP first, so a bind error stops us before any work, and a scraper
    // sees every series from the first step on.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("http")
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the HTTP runtime: {e}"))?;
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind(args.metrics_addr))
        .map_err(|e| format!("cannot listen on {}: {e}", args.metrics_addr))?;
    // The address actually bound (port 0 picks a free one).
    let metrics_addr = listener
        .local_addr()
        .map_err(|e| format!("cannot listen on {}: {e}", args.metrics_addr))?;
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/", get(index))
        .with_state(Arc::new(registry));
    runtime.spawn(serve_http(listener, app, args.http_limits()));

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

    // A signal while waiting stops the run before its first step: the
    // report is then all zeros.
    let stopped_early = if args.delay_seconds == 0 {
        None
    } else {
        log!(
            output,
            "serving_engine: serving zero counters on http://{}/metrics for {} s before the engine starts",
            metrics_addr,
            args.delay_seconds
        );
        let delay = Duration::from_secs(args.delay_seconds);
        // Created inside the runtime, as the linger's timer below.
        match runtime.block_on(async { wait_for_stop(tokio::time::sleep(delay), output).await }) {
            Stop::TimeLimit => None,
            why => Some(why),
        }
    };

    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(stopped_early.is_some()));
    let (sim_done, sim_done_rx) = tokio::sync::oneshot::channel::<()>();
    let simulation = {
        let (recorder, stop, output) = (recorder.clone(), Arc::clone(&stop), Arc::clone(output));
        let events = DemoEvents {
            output,
            print_requests: args.print_requests,
            engine_metrics,
            per_request: args.policy.per_request(),
        };
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
        .map_err(|_| "the simulation panicked".to_owned())??;

    // Every step has been recorded and every Worker dropped: this snapshot
    // is the whole run.
    let report = recorder.snapshot();
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
    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    output.report(&json)?;
    let json = serde_json::to_string(summary).map_err(|e| e.to_string())?;
    output.report(&json)?;

    if !args.linger().is_zero() && matches!(why, Stop::TimeLimit) && !output.is_closed() {
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
    // Dropping the runtime stops the HTTP server.
    runtime.shutdown_timeout(Duration::from_secs(1));
    Ok(())
}

/// A figure that may be missing, with `digits` decimals.
fn figure(value: Option<f64>, digits: usize) -> String {
    value.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.digits$}"))
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

/// What the `/metrics` server allows a client.
#[derive(Clone, Copy, Debug)]
struct HttpLimits {
    /// From the start of reading a request head to its end.
    header_read_timeout: Duration,
    /// From accepting a connection to its graceful shutdown, and from
    /// there to its close.
    connection_timeout: Duration,
    /// Connections served at once.
    max_connections: usize,
}

/// Serves `app` on every connection `listener` accepts, over HTTP/1,
/// within `limits`.
///
/// `axum::serve` would do the same but gives hyper no timer, and without
/// one hyper cannot time out anything: a client that sends a request line
/// and then one header byte every few seconds would hold its connection
/// (and a task) for ever. hyper's own connection builder takes the timer
/// and closes a connection whose request head has not arrived in full
/// within `header_read_timeout` of the start of its reading, however slowly
/// the bytes trickle in (the deadline is not reset by each byte). The same
/// deadline applies to a keep-alive connection waiting for its next
/// request; a scraper simply reconnects.
///
/// hyper has no write timeout: a client that sends requests and never
/// reads the responses blocks the connection's writes for good once the
/// socket buffers are full. So every connection has a lifetime:
/// `connection_timeout` after it was accepted it is shut down gracefully
/// (no new request; a response in flight may finish), and as long again
/// later it is dropped, whatever it is doing. And at most
/// `max_connections` are served at once: at the cap, the next one is
/// accepted only when one ends (clients wait in the kernel's backlog), so
/// the tasks and buffers a crowd of clients can hold are bounded.
async fn serve_http(mut listener: tokio::net::TcpListener, app: Router, limits: HttpLimits) {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    loop {
        // The semaphore is never closed: `acquire_owned` cannot fail.
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        // axum's `accept` retries failed accepts (backing off when out of
        // file descriptors), as `axum::serve` does.
        let (stream, _peer) = axum::serve::Listener::accept(&mut listener).await;
        let connection =
            http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
        tokio::spawn(async move {
            // Held until the connection ends (dropped with the task).
            let _slot = slot;
            let mut connection = std::pin::pin!(connection);
            // A client's error (malformed request, header timeout, reset)
            // ends that client's connection only; nothing to log.
            if tokio::time::timeout(limits.connection_timeout, connection.as_mut())
                .await
                .is_ok()
            {
                return;
            }
            connection.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(limits.connection_timeout, connection).await;
        });
    }
}

/// `GET /metrics`: one snapshot, in the format the scraper asked for.
async fn metrics(State(registry): State<Arc<Registry>>, headers: HeaderMap) -> impl IntoResponse {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let format = TextFormat::from_accept(accept);
    let body = encode_registry(&registry, format);
    ([(header::CONTENT_TYPE, format.content_type())], body)
}

async fn index() -> &'static str {
    "specdec-metrics serving_engine demo: the metrics are at /metrics\n"
}

// ---------------------------------------------------------------------------
// The metrics thread's log

/// Logs what the simulation reports: an interval's lines, a finished
/// request.
struct DemoEvents {
    output: Arc<Output>,
    print_requests: bool,
    engine_metrics: EngineMetrics,
    /// The policy chooses a length per request (its `k` is then the
    /// latest step's mean, rounded).
    per_request: bool,
}

impl Events for DemoEvents {
    fn engine_step(&self, step: &EngineStep) {
        self.engine_metrics
            .add_running(step.admitted, step.finished);
        self.engine_metrics.add_generation_tokens(step.tokens);
        self.engine_metrics
            .observe_inter_token_latency(step.seconds, step.batch);
    }

    fn interval(&self, interval: &Interval<'_>) {
        // The last, partial interval is logged only when it recorded
        // something (stopping right after a tick leaves it empty).
        if interval.last && interval.delta.is_empty() {
            return;
        }
        let stamp = format!("[{:7.1}s]", interval.end_s);
        log_interval(
            &self.output,
            &stamp,
            interval.delta,
            interval.end_s - interval.start_s,
        );
        log_draft_length(&self.output, interval, self.per_request);
    }

    fn request_finished(&self, request: &FinishedRequest<'_>) {
        let report = serde_json::to_string(request.metrics)
            .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
        log!(
            self.output,
            "request e{}-r{} finished: {} tokens in {:.2} s{}, speculative_decoding {report}",
            request.engine,
            request.id,
            request.tokens,
            request.seconds,
            if request.structured {
                " (structured output)"
            } else {
                ""
            },
        );
    }

    fn wants_requests(&self) -> bool {
        self.print_requests
    }
}

/// The drafting policy's line: the chosen `k` (and what changed), the
/// phase, the mean scheduled budget and the goodput of the interval.
fn log_draft_length(output: &Output, interval: &Interval<'_>, per_request: bool) {
    let choice = match (&interval.controller, &interval.state_controller) {
        (_, Some(c)) => {
            let list = |lens: &[usize]| {
                lens.iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(" / ")
            };
            let mut what = Vec::new();
            if c.draft_lens != c.previous {
                what.push(format!("switched from {}", list(&c.previous)));
            }
            if c.regime_change {
                what.push("regime change detected".to_owned());
            }
            let steps: u64 = c.steps_by_state.iter().sum();
            let shares: Vec<String> = c
                .steps_by_state
                .iter()
                .map(|&n| format!("{:.0}%", 100.0 * n as f64 / steps.max(1) as f64))
                .collect();
            // The library's four states have names; a state space's are
            // numbered.
            let states = if c.draft_lens.len() == RequestState::COUNT {
                "request state (recent acceptance under 1/4, 1/2, 3/4, above)".to_owned()
            } else {
                format!("state (0 to {})", c.draft_lens.len().saturating_sub(1))
            };
            format!(
                "k by {states} = {}{}, verify steps by state {}",
                list(&c.draft_lens),
                if what.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", what.join("; "))
                },
                shares.join(" / "),
            )
        }
        (Some(c), None) => {
            let mut what = Vec::new();
            if c.draft_len != c.previous {
                what.push(format!("switched from {}", c.previous));
            }
            if c.regime_change {
                what.push("regime change detected".to_owned());
            }
            format!(
                "k = {}{}, exploring {} on 1 step in {}, dispersion {:.1}",
                c.draft_len,
                if what.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", what.join("; "))
                },
                c.explore_len,
                specdec_metrics::EXPLORATION_PERIOD,
                c.dispersion,
            )
        }
        (None, None) => {
            let first = interval.chosen.first().copied().unwrap_or(0);
            let ks = if per_request {
                let ks: Vec<_> = interval.chosen.iter().map(usize::to_string).collect();
                format!(
                    "chosen per request (latest step's mean, rounded, by engine thread: {})",
                    ks.join(", ")
                )
            } else if interval.chosen.iter().all(|&k| k == first) {
                format!("k = {first}")
            } else {
                let ks: Vec<_> = interval.chosen.iter().map(usize::to_string).collect();
                format!("k = {} (by engine thread)", ks.join(", "))
            };
            if interval.switches > 0.0 {
                format!("{ks}, {} switches per engine thread", interval.switches)
            } else {
                ks
            }
        }
    };
    let per_step = |x: f64| {
        if interval.steps == 0 {
            "n/a".to_owned()
        } else {
            format!("{:.2}", x / interval.steps as f64)
        }
    };
    let goodput = if interval.cost_units > 0.0 {
        format!("{:.3}", interval.tokens as f64 / interval.cost_units)
    } else {
        "n/a".to_owned()
    };
    log!(
        output,
        "{:10} Draft length: {choice}; phase {} ({}); mean scheduled budget {}, \
         goodput {goodput} tokens per cost unit",
        "",
        interval.phase,
        interval.phase_name,
        per_step(interval.budget_sum),
    );
}

/// vLLM's `SpecDecoding metrics` line, then the conditional per-position
/// rates and the by-draft-length table.
fn log_interval(output: &Output, stamp: &str, delta: &AcceptanceHistogram, secs: f64) {
    let secs = secs.max(1e-9);
    let steps = delta.num_spec_steps();
    if steps == 0 {
        log!(
            output,
            "{stamp} SpecDecoding metrics: no verify steps in the last {:.2} s \
             (undrafted steps: {}, rejected observations: {})",
            secs,
            delta.num_undrafted_steps(),
            delta.num_rejected_observations()
        );
        return;
    }
    let accepted = delta.num_accepted_draft_tokens();
    let drafted = delta.num_draft_tokens();
    let join = |rates: Vec<String>| rates.join(", ");
    let per_pos = join(
        delta
            .acceptance_rate_per_pos()
            .into_iter()
            .map(|r| format!("{r:.3}"))
            .collect(),
    );
    let conditional = join(
        delta
            .conditional_acceptance_rate_per_pos()
            .into_iter()
            .map(|r| r.map_or_else(|| "n/a".to_owned(), |r| format!("{r:.3}")))
            .collect(),
    );
    let avg_rate = if drafted == 0 {
        "n/a".to_owned()
    } else {
        format!("{:.1}%", 100.0 * delta.draft_acceptance_rate())
    };
    log!(
        output,
        "{stamp} SpecDecoding metrics: Mean acceptance length: {:.2}, \
         Accepted throughput: {:.2} tokens/s, Drafted throughput: {:.2} tokens/s, \
         Accepted: {accepted} tokens, Drafted: {drafted} tokens, \
         Per-position acceptance rate: {per_pos}, Avg Draft acceptance rate: {avg_rate}",
        delta.mean_acceptance_length(),
        accepted as f64 / secs,
        drafted as f64 / secs,
    );
    log!(
        output,
        "{:10} Conditional per-position acceptance rate (of steps that drafted the position): \
         {conditional}; Drafts: {steps}, Undrafted steps: {}, Rejected observations: {}",
        "",
        delta.num_undrafted_steps(),
        delta.num_rejected_observations(),
    );
    // By draft length: steps and the share that accepted the whole draft.
    let mut lengths = format!("{:10} {:<14}", "", "draft length");
    let mut row_steps = format!("{:10} {:<14}", "", "steps");
    let mut full = format!("{:10} {:<14}", "", "full accept");
    for k in 0..=delta.max_draft_len() {
        lengths.push_str(&format!("{k:>8}"));
        row_steps.push_str(&format!("{:>8}", delta.row_steps(k)));
        full.push_str(&match delta.full_acceptance_rate(k) {
            Some(r) => format!("{r:>8.3}"),
            None => format!("{:>8}", "-"),
        });
    }
    log!(output, "{lengths}\n{row_steps}\n{full}");
}
