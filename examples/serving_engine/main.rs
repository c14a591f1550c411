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
//! metric name prefix, address in use), with a message on standard error.
//!
//! The drafting policy is deliberately variable: budgets shrink as the batch
//! grows, some steps draft nothing at all (`observe_undrafted`), structured
//! output requests have drafts invalidated by their grammar (sometimes all
//! of them: `k = 0`), and the verifier's acceptance falls with position.
//! Randomness comes from a small deterministic generator seeded per worker.
//!
//! ```text
//! cargo run --release --example serving_engine
//! cargo run --release --example serving_engine -- --seconds 30 --print-requests
//! curl -s http://127.0.0.1:9464/metrics | promtool check metrics
//! ```

use std::f64::consts::TAU;
use std::fmt;
use std::io::{self, Write as _};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
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
use specdec_metrics::prometheus::{DEFAULT_PREFIX, SpecDecodeCollector, TextFormat};
use specdec_metrics::{AcceptanceHistogram, Recorder, Worker};

mod engine_metrics;
use engine_metrics::{EngineMetrics, encode_registry, namespace_for};

/// Simulates a speculative-decoding serving engine that records every verify
/// step with specdec-metrics, logs interval metrics, serves /metrics over HTTP
/// and prints the engine-wide report (JSON, standard output) when it stops.
#[derive(Debug, Clone, Parser)]
#[command(name = "serving_engine")]
struct Args {
    /// Run for N seconds, then stop (0 = until Ctrl-C).
    #[arg(long, value_name = "N", default_value_t = 10)]
    seconds: u64,
    /// Engine threads (default: the machine's parallelism).
    #[arg(long, value_name = "N", default_value_t = default_workers(), value_parser = at_least_one)]
    workers: usize,
    /// num_spec_tokens, the largest draft (1..=64).
    #[arg(long, value_name = "K", default_value_t = 5, value_parser = max_draft_len)]
    max_draft_len: usize,
    /// Requests per engine thread at most.
    #[arg(long, value_name = "N", default_value_t = 32, value_parser = at_least_one)]
    max_batch: usize,
    /// Metrics log interval, in milliseconds.
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    interval_ms: u64,
    /// Where /metrics is served (port 0: any free port, printed at start).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9464")]
    metrics_addr: SocketAddr,
    /// Close an HTTP connection whose client has not sent a whole request
    /// head (request line and headers) within N milliseconds, idle
    /// keep-alive connections included.
    #[arg(long, value_name = "N", default_value_t = 5000, value_parser = clap::value_parser!(u64).range(1..))]
    header_read_timeout_ms: u64,
    /// Metric name prefix (vllm:spec_decode gives vLLM's names).
    #[arg(long, value_name = "P", default_value = DEFAULT_PREFIX)]
    prefix: String,
    /// The model_name label.
    #[arg(long, value_name = "NAME", default_value = "demo-model")]
    model_name: String,
    /// Simulated forward-pass time per engine step, in microseconds (0 = run
    /// hot, no sleep).
    #[arg(long, value_name = "N", default_value_t = 8000)]
    step_us: u64,
    /// After stopping, keep serving the final counters for N seconds so a
    /// scraper can read them.
    #[arg(long, value_name = "N", default_value_t = 0)]
    linger_seconds: u64,
    /// Print each finished request's report (standard error).
    #[arg(long)]
    print_requests: bool,
    /// Random seed.
    #[arg(long, value_name = "N", default_value_t = 1)]
    seed: u64,
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
    fn header_read_timeout(&self) -> Duration {
        Duration::from_millis(self.header_read_timeout_ms)
    }
}

fn default_workers() -> usize {
    thread::available_parallelism().map_or(2, |n| n.get())
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

fn at_least_one(v: &str) -> Result<usize, String> {
    match v.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("{v:?} is not a whole number of at least 1")),
    }
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
/// to read the logs. (A closed descriptor, `>&-` or `2>&-`, is already
/// harmless: Rust's runtime reopens it on `/dev/null`.)
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

fn run(args: &Args, output: &Arc<Output>) -> Result<(), String> {
    // The engine's recorder, and the collector the /metrics endpoint encodes
    // (one snapshot per scrape).
    let recorder = Recorder::new(args.max_draft_len).map_err(|e| e.to_string())?;
    let collector = SpecDecodeCollector::new(recorder.clone())
        .with_prefix(args.prefix.as_str())
        .and_then(|c| {
            c.with_const_labels([("model_name", args.model_name.as_str()), ("engine", "0")])
        })
        .map_err(|e| e.to_string())?;
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
    runtime.spawn(serve_http(listener, app, args.header_read_timeout()));

    log!(
        output,
        "serving_engine: {} engine threads, num_spec_tokens K = {}, max batch {}, \
         step {} us; metrics on http://{}/metrics (prefix {}); {}",
        args.workers,
        args.max_draft_len,
        args.max_batch,
        args.step().as_micros(),
        metrics_addr,
        args.prefix,
        if args.seconds == 0 {
            "running until Ctrl-C".to_owned()
        } else {
            format!("running {} s (Ctrl-C stops early)", args.seconds)
        },
    );

    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let finished = Arc::new(AtomicU64::new(0));
    let engines: Vec<_> = (0..args.workers)
        .map(|index| {
            let (recorder, engine_metrics, stop, finished, args, output) = (
                recorder.clone(),
                engine_metrics.clone(),
                Arc::clone(&stop),
                Arc::clone(&finished),
                args.clone(),
                Arc::clone(output),
            );
            thread::Builder::new()
                .name(format!("engine-{index}"))
                .spawn(move || {
                    // The one `Worker` of this thread, taken once.
                    let worker = recorder.worker();
                    Engine::new(index, &args, &worker, &output, engine_metrics)
                        .run(&stop, &finished);
                })
                .map_err(|e| format!("cannot start an engine thread: {e}"))
        })
        .collect::<Result<_, _>>()?;

    let (stop_metrics, stop_metrics_rx) = mpsc::channel::<()>();
    let metrics_thread = {
        let (recorder, interval, output) = (recorder.clone(), args.interval(), Arc::clone(output));
        thread::Builder::new()
            .name("metrics".into())
            .spawn(move || log_metrics(&recorder, interval, &stop_metrics_rx, started, &output))
            .map_err(|e| format!("cannot start the metrics thread: {e}"))?
    };

    let why = runtime.block_on(wait_for_stop(args.seconds, output));

    stop.store(true, Ordering::Relaxed);
    for engine in engines {
        engine
            .join()
            .map_err(|_| "an engine thread panicked".to_owned())?;
    }
    drop(stop_metrics); // ends the metrics thread after a last interval line
    metrics_thread
        .join()
        .map_err(|_| "the metrics thread panicked".to_owned())?;

    // Every step has been recorded and every Worker dropped: this snapshot
    // is the whole run.
    let report = recorder.snapshot();
    log!(
        output,
        "serving_engine: stopped ({}) after {:.1} s: {} requests finished, {} verify steps, \
         {} undrafted steps, mean acceptance length {:.3}, draft acceptance rate {:.4}; \
         engine report (JSON) on standard output",
        match why {
            Stop::TimeLimit => "time limit",
            Stop::Interrupted => "Ctrl-C",
            Stop::Terminated => "SIGTERM",
            Stop::OutputClosed => "output closed",
        },
        started.elapsed().as_secs_f64(),
        finished.load(Ordering::Relaxed),
        report.num_spec_steps(),
        report.num_undrafted_steps(),
        report.mean_acceptance_length(),
        report.draft_acceptance_rate(),
    );
    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    output.report(&json)?;

    if !args.linger().is_zero() && matches!(why, Stop::TimeLimit) && !output.is_closed() {
        log!(
            output,
            "serving_engine: serving the final counters on http://{}/metrics for {} s",
            metrics_addr,
            args.linger().as_secs()
        );
        runtime.block_on(wait_for_stop(args.linger().as_secs(), output));
    }
    // Dropping the runtime stops the HTTP server.
    runtime.shutdown_timeout(Duration::from_secs(1));
    Ok(())
}

/// Resolves after `seconds` (never when 0), at Ctrl-C / SIGTERM, or when the
/// output is closed.
async fn wait_for_stop(seconds: u64, output: &Output) -> Stop {
    let time_limit = async {
        if seconds == 0 {
            std::future::pending::<()>().await;
        } else {
            tokio::time::sleep(Duration::from_secs(seconds)).await;
        }
    };
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
        () = time_limit => Stop::TimeLimit,
        _ = tokio::signal::ctrl_c() => Stop::Interrupted,
        () = terminate => Stop::Terminated,
        () = output.closed() => Stop::OutputClosed,
    }
}

/// Serves `app` on every connection `listener` accepts, over HTTP/1.
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
async fn serve_http(
    mut listener: tokio::net::TcpListener,
    app: Router,
    header_read_timeout: Duration,
) {
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout);
    loop {
        // axum's `accept` retries failed accepts (backing off when out of
        // file descriptors), as `axum::serve` does.
        let (stream, _peer) = axum::serve::Listener::accept(&mut listener).await;
        let connection =
            http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
        tokio::spawn(async move {
            // A client's error (malformed request, header timeout, reset)
            // ends that client's connection only; nothing to log.
            let _ = connection.await;
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
// The simulated engine

/// SplitMix64: small, fast, deterministic; enough for a simulation.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Self(seed)
    }
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
}

/// One request in a batch.
struct Request {
    id: String,
    started: Instant,
    /// Output tokens to generate before it finishes.
    output_len: usize,
    generated: usize,
    /// Structured output: a grammar may invalidate drafts.
    structured: bool,
    /// How well the proposer predicts this request (acceptance at position
    /// 0); later positions decay from it.
    predictability: f64,
    /// The request's own metrics, allocated once here; reported at the end.
    metrics: AcceptanceHistogram,
}

/// One engine thread: a continuous batch of requests, one verify step per
/// request per engine step.
struct Engine<'w> {
    index: usize,
    worker: &'w Worker,
    output: &'w Output,
    /// vLLM's engine metrics, shared by every engine thread.
    metrics: EngineMetrics,
    rng: Rng,
    batch: Vec<Request>,
    next_request: u64,
    max_draft_len: usize,
    max_batch: usize,
    step: Duration,
    print_requests: bool,
    /// Phase of this engine's load wave, so engines peak at different times.
    phase: f64,
}

/// Period of the simulated load wave: the batch sweeps from nearly empty to
/// full and back, so every draft budget shows up in a short run.
const LOAD_PERIOD_SECS: f64 = 12.0;
/// Acceptance decay per draft position.
const POSITION_DECAY: f64 = 0.9;

impl<'w> Engine<'w> {
    fn new(
        index: usize,
        args: &Args,
        worker: &'w Worker,
        output: &'w Output,
        metrics: EngineMetrics,
    ) -> Self {
        let mut rng = Rng::new(
            args.seed
                .wrapping_mul(0x2545_F491_4F6C_DD1D)
                .wrapping_add(index as u64 + 1),
        );
        let phase = rng.unit() * TAU;
        Self {
            index,
            worker,
            output,
            metrics,
            rng,
            batch: Vec::with_capacity(args.max_batch),
            next_request: 0,
            max_draft_len: args.max_draft_len,
            max_batch: args.max_batch,
            step: args.step(),
            print_requests: args.print_requests,
            phase,
        }
    }

    fn run(&mut self, stop: &AtomicBool, finished: &AtomicU64) {
        let started = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            let t = started.elapsed().as_secs_f64();
            let load = 0.5 + 0.5 * (t * TAU / LOAD_PERIOD_SECS + self.phase).sin();
            // Arrivals: about 0.02 to 0.3 new requests per engine step.
            if self.batch.len() < self.max_batch && self.rng.chance(0.02 + 0.28 * load) {
                self.admit();
            }
            if self.batch.is_empty() {
                self.forward_pass(0);
                continue;
            }
            let scheduled = self.engine_step();
            self.forward_pass(scheduled);
            self.retire(finished);
        }
    }

    fn admit(&mut self) {
        let structured = self.rng.chance(0.25);
        let predictability = if structured {
            0.8 + 0.17 * self.rng.unit()
        } else {
            0.6 + 0.32 * self.rng.unit()
        };
        self.batch.push(Request {
            id: format!("e{}-r{}", self.index, self.next_request),
            started: Instant::now(),
            output_len: 32 + self.rng.below(481),
            generated: 0,
            structured,
            predictability,
            metrics: AcceptanceHistogram::new(self.max_draft_len)
                .expect("K was validated by Recorder::new"),
        });
        self.next_request += 1;
        self.metrics.add_running(1, 0);
    }

    /// One verify step for every request in the batch; returns the tokens
    /// scheduled (drafts plus one per request), which sets the step's cost.
    fn engine_step(&mut self) -> usize {
        let b = self.batch.len();
        // Drafting policy: the budget shrinks as the batch grows, and under
        // heavy load the policy skips drafting for a share of the requests.
        let k_max = self.max_draft_len;
        let budget = (k_max - k_max * b / (self.max_batch + 1)).max(1);
        let fill = b as f64 / self.max_batch as f64;
        let p_undrafted = 0.04 + 0.3 * fill * fill;
        let mut scheduled = 0;
        let mut generated = 0;
        for request in &mut self.batch {
            let rng = &mut self.rng;
            if rng.chance(p_undrafted) {
                // Nothing drafted: not a k = 0 row (an undrafted step).
                self.worker.observe_undrafted();
                request.metrics.observe_undrafted();
                request.generated += 1;
                generated += 1;
                scheduled += 1;
                continue;
            }
            // The grammar of a structured-output request invalidates some
            // drafts, sometimes all of them (k = 0).
            let drafted = if request.structured {
                let r = rng.unit();
                if r < 0.5 {
                    budget
                } else if r < 0.88 {
                    rng.below(budget)
                } else {
                    0
                }
            } else {
                budget
            };
            // The verifier accepts the longest agreeing prefix; agreement
            // falls with position.
            let mut accepted = 0;
            let mut p = request.predictability;
            while accepted < drafted && rng.chance(p) {
                accepted += 1;
                p *= POSITION_DECAY;
            }
            // Rarely, a grammar invalidates drafts after the verifier
            // sampled them, so the engine reports a > k: rejected and counted
            // in num_rejected_observations, never in a bucket.
            let reported = if request.structured && drafted < budget && rng.below(2_000) == 0 {
                drafted + 1
            } else {
                accepted
            };
            // Engine-wide and per-request; an error is already counted.
            let _ = self.worker.observe(drafted, reported);
            let _ = request.metrics.observe(drafted, reported);
            request.generated += accepted + 1; // the bonus token
            generated += accepted + 1;
            scheduled += drafted + 1;
        }
        self.metrics.add_generation_tokens(generated as u64);
        scheduled
    }

    /// Simulated model time: a fixed cost plus a share per scheduled token.
    /// Every request of the batch gets its next output after it: one
    /// inter-token latency each.
    fn forward_pass(&self, scheduled_tokens: usize) {
        let cost = self.step + self.step * scheduled_tokens.min(1 << 20) as u32 / 256;
        self.metrics
            .observe_inter_token_latency(cost.as_secs_f64(), self.batch.len());
        if !cost.is_zero() {
            thread::sleep(cost);
        }
    }

    fn retire(&mut self, finished: &AtomicU64) {
        let mut i = 0;
        while i < self.batch.len() {
            if self.batch[i].generated < self.batch[i].output_len {
                i += 1;
                continue;
            }
            let request = self.batch.swap_remove(i);
            finished.fetch_add(1, Ordering::Relaxed);
            self.metrics.add_running(0, 1);
            if self.print_requests {
                let report = serde_json::to_string(&request.metrics)
                    .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
                log!(
                    self.output,
                    "request {} finished: {} tokens in {:.2} s{}, speculative_decoding {report}",
                    request.id,
                    request.generated,
                    request.started.elapsed().as_secs_f64(),
                    if request.structured {
                        " (structured output)"
                    } else {
                        ""
                    },
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The metrics thread

/// Logs one line (and a table) per interval from the difference of two
/// snapshots, until `stop` is dropped; then logs the last partial interval.
fn log_metrics(
    recorder: &Recorder,
    interval: Duration,
    stop: &mpsc::Receiver<()>,
    started: Instant,
    output: &Output,
) {
    let mut previous = recorder.snapshot();
    let mut previous_at = Instant::now();
    let mut deadline = previous_at + interval;
    loop {
        let timeout = deadline.saturating_duration_since(Instant::now());
        let last = !matches!(
            stop.recv_timeout(timeout),
            Err(mpsc::RecvTimeoutError::Timeout)
        );
        let now = recorder.snapshot();
        let now_at = Instant::now();
        let interval_figures = now
            .delta_since(&previous)
            .expect("snapshots of one recorder never decrease");
        // The last, partial interval is logged only when it recorded
        // something (stopping right after a tick leaves it empty).
        if !last || !interval_figures.is_empty() {
            log_interval(
                output,
                &interval_figures,
                now_at - previous_at,
                now_at - started,
            );
        }
        if last {
            return;
        }
        previous = now;
        previous_at = now_at;
        deadline += interval;
        // A long stall (suspended process) should not cause a burst of lines.
        if deadline < Instant::now() {
            deadline = Instant::now() + interval;
        }
    }
}

/// vLLM's `SpecDecoding metrics` line, then the conditional per-position
/// rates and the by-draft-length table.
fn log_interval(output: &Output, delta: &AcceptanceHistogram, elapsed: Duration, uptime: Duration) {
    let secs = elapsed.as_secs_f64().max(1e-9);
    let stamp = format!("[{:7.1}s]", uptime.as_secs_f64());
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
