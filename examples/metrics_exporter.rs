//! An engine that exports through the `metrics` facade and
//! `metrics-exporter-prometheus`, as mistral.rs and text-generation-inference's
//! router do, with the speculative-decoding families of this crate in the
//! same registry (`MetricsPublisher`, cargo feature `metrics`).
//!
//! Engine threads run a synthetic speculative-decoding workload (each draft
//! token accepted with a probability that drops halfway through the run),
//! drafting what a `DraftController` chose; the metrics thread updates the
//! controller every interval and publishes its plan; a `MetricsPublisher`
//! thread hands the families and the plan's gauge to the exporter; the
//! engine's own metrics (vLLM's `num_requests_running`,
//! `generation_tokens_total` and `inter_token_latency_seconds`, with vLLM's
//! buckets) go through the `metrics` macros as usual. `GET /metrics` serves
//! `PrometheusHandle::render()` on loopback.
//!
//! When the run ends the final report (the recorder's snapshot, vLLM's keys
//! plus the histogram) is printed on standard output as JSON, and the
//! counters are served frozen for `--linger-seconds`. `.ci/prometheus-e2e.sh`
//! scrapes it with a real Prometheus.
//!
//! ```sh
//! cargo run --release --example metrics_exporter -- --seconds 30 --prefix vllm:spec_decode
//! curl -s 127.0.0.1:19465/metrics
//! ```

use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::header;
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use rand::{RngCore, SeedableRng};
use rand_xoshiro::SplitMix64;
use specdec_metrics::{DraftController, MetricsPublisher, Recorder, SharedPlan, StepCost};

/// vLLM's buckets for `vllm:inter_token_latency_seconds`
/// (`vllm/v1/metrics/loggers.py`).
const ITL_BUCKETS: [f64; 19] = [
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];

/// The command line: every flag takes a value.
#[derive(Debug)]
struct Args {
    /// `--addr`: where `/metrics` is served (loopback).
    addr: SocketAddr,
    /// `--prefix`: the families' name prefix (`vllm:spec_decode` gives
    /// vLLM's names).
    prefix: String,
    /// `--model-name`, `--engine`: the constant labels.
    model_name: String,
    engine: String,
    /// `--max-draft-len`: K (checked by `Recorder::new`: 1..=64).
    max_draft_len: usize,
    /// `--workers`: engine threads (each a `Worker`), 1..=256.
    workers: usize,
    /// `--seconds`: how long the workload runs, 1..=31536000 (a year).
    seconds: u64,
    /// `--linger-seconds`: how long the final counters are served after
    /// it, 0..=31536000.
    linger_seconds: u64,
    /// `--interval-ms`: the metrics interval (controller updates,
    /// publishes), 1..=3600000 (an hour).
    interval_ms: u64,
}

/// The accepted range of each number flag: what was asked for is always
/// what runs (no zero-thread engine, no interval that outlasts the run
/// unnoticed, no overflowing duration).
const RANGES: [(&str, u64, u64); 5] = [
    ("--max-draft-len", 1, 64),
    ("--workers", 1, 256),
    ("--seconds", 1, 365 * 24 * 3600),
    ("--linger-seconds", 0, 365 * 24 * 3600),
    ("--interval-ms", 1, 3_600_000),
];

impl Args {
    fn parse() -> Result<Self, Box<dyn std::error::Error>> {
        let mut args = Self {
            addr: "127.0.0.1:19465".parse()?,
            prefix: "vllm:spec_decode".to_owned(),
            model_name: "example-model".to_owned(),
            engine: "0".to_owned(),
            max_draft_len: 5,
            workers: 3,
            seconds: 10,
            linger_seconds: 0,
            interval_ms: 250,
        };
        const FLAGS: &str = "--addr, --prefix, --model-name, --engine, --max-draft-len, \
                             --workers, --seconds, --linger-seconds, --interval-ms";
        let mut flags = std::env::args().skip(1);
        while let Some(flag) = flags.next() {
            if !FLAGS.split(", ").any(|known| known.trim() == flag) {
                return Err(format!("unknown flag {flag:?} (the flags: {FLAGS})").into());
            }
            let value = flags.next().ok_or(format!("{flag} needs a value"))?;
            let bad = |e: &dyn std::fmt::Display| format!("{flag} {value:?}: {e}");
            let number = || {
                let (_, low, high) = RANGES.iter().find(|r| r.0 == flag).expect("a number flag");
                match value.parse::<u64>() {
                    Ok(n) if (*low..=*high).contains(&n) => Ok(n),
                    _ => Err(bad(&format_args!("not a whole number in {low}..={high}"))),
                }
            };
            match flag.as_str() {
                "--addr" => args.addr = value.parse().map_err(|e| bad(&e))?,
                "--prefix" => args.prefix = value,
                "--model-name" => args.model_name = value,
                "--engine" => args.engine = value,
                "--max-draft-len" => args.max_draft_len = number()? as usize,
                "--workers" => args.workers = number()? as usize,
                "--seconds" => args.seconds = number()?,
                "--linger-seconds" => args.linger_seconds = number()?,
                _ => args.interval_ms = number()?, // --interval-ms
            }
        }
        Ok(args)
    }
}

fn main() -> std::process::ExitCode {
    // Errors as people read them (`Display`), not as `main` prints them.
    if let Err(e) = run() {
        eprintln!("error: {e}");
        return std::process::ExitCode::from(2);
    }
    std::process::ExitCode::SUCCESS
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse()?;
    // vLLM's engine metrics live under the namespace of the prefix:
    // `vllm:spec_decode` -> `vllm:num_requests_running`.
    let namespace = match args.prefix.rsplit_once(':') {
        Some((ns, _)) => format!("{ns}:"),
        None => format!("{}_", args.prefix),
    };
    let itl = format!("{namespace}inter_token_latency_seconds");
    let labels = [
        ("model_name", args.model_name.clone()),
        ("engine", args.engine.clone()),
    ];

    // ---- the engine's metrics setup, as it is without this crate ----------
    let scrape = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Full(itl.clone()), &ITL_BUCKETS)?
        .install_recorder()?;
    let running = metrics::gauge!(format!("{namespace}num_requests_running"), &labels);
    let tokens = metrics::counter!(format!("{namespace}generation_tokens_total"), &labels);
    let latency = metrics::histogram!(itl.clone(), &labels);
    metrics::describe_gauge!(
        format!("{namespace}num_requests_running"),
        "Number of requests in model execution batches."
    );
    metrics::describe_counter!(
        format!("{namespace}generation_tokens_total"),
        "Number of generation tokens processed."
    );
    metrics::describe_histogram!(itl, "Histogram of inter-token latency in seconds.");

    // ---- what this crate adds ----------------------------------------------
    let k_max = args.max_draft_len;
    let recorder = Arc::new(Recorder::new(k_max)?);
    let mut controller = DraftController::new(k_max, StepCost::linear(1.0, 0.08)?)?;
    let plan = Arc::new(SharedPlan::new(controller.plan()));
    let interval = Duration::from_millis(args.interval_ms);
    let publishing = MetricsPublisher::new(Arc::clone(&recorder), &args.prefix)?
        .with_const_labels(labels.clone())?
        .with_plan(Arc::clone(&plan))
        .spawn(interval);

    // ---- /metrics ------------------------------------------------------------
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let listener = runtime.block_on(tokio::net::TcpListener::bind(args.addr))?;
    let app = Router::new().route(
        "/metrics",
        get(move || {
            let body = scrape.render();
            async move {
                (
                    [(
                        header::CONTENT_TYPE,
                        "text/plain; version=0.0.4; charset=utf-8",
                    )],
                    body,
                )
            }
        }),
    );
    // The address actually bound (port 0 picks a free one).
    let addr = listener.local_addr()?;
    runtime.spawn(async move { axum::serve(listener, app).await });
    // Progress is best effort: a closed standard error (`2>&1 | head`)
    // does not stop the engine.
    let _ = writeln!(std::io::stderr(), "serving /metrics on http://{addr}");

    // ---- the engine: workers record, the metrics loop steers -----------------
    let start = Instant::now();
    let run = Duration::from_secs(args.seconds);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for t in 0..args.workers {
            let (recorder, plan, stop) = (&recorder, &plan, &stop);
            let (running, tokens, latency) = (running.clone(), tokens.clone(), latency.clone());
            s.spawn(move || {
                let worker = recorder.worker();
                let mut rng = SplitMix64::seed_from_u64(0x5eed + t as u64);
                running.increment(1.0);
                let mut step = 0u64;
                // Relaxed: a flag polled once per step; the scope's join
                // orders everything after it.
                while !stop.load(Ordering::Relaxed) {
                    let k = plan.draft_len_for(step);
                    // Each draft token accepted with probability p, until
                    // the first rejection; p drops halfway through the run.
                    let p = if start.elapsed() < run / 2 {
                        0.85
                    } else {
                        0.45
                    };
                    let mut uniform = || (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                    let accepted = (0..k).take_while(|_| uniform() < p).count();
                    worker.observe_scheduled(k).expect("k <= K");
                    if step % 25 == 24 {
                        worker.observe_undrafted();
                        tokens.increment(1);
                    } else {
                        worker.observe(k, accepted).expect("valid step");
                        tokens.increment(accepted as u64 + 1);
                    }
                    let step_seconds = 0.002 + 0.0004 * k as f64;
                    latency.record(step_seconds / (accepted as f64 + 1.0));
                    std::thread::sleep(Duration::from_secs_f64(step_seconds));
                    step += 1;
                }
                running.decrement(1.0);
            });
        }
        let mut previous = recorder.snapshot();
        let mut next = interval;
        while start.elapsed() < run {
            // Up to the next interval or the end of the run, whichever
            // comes first: an interval longer than the run does not make
            // it outlast --seconds.
            std::thread::sleep(next.min(run).saturating_sub(start.elapsed()));
            next += interval;
            let now = recorder.snapshot();
            controller.update(&now.delta_since(&previous).expect("a later snapshot"));
            plan.publish(controller.plan());
            previous = now;
        }
        stop.store(true, Ordering::Relaxed);
    });

    // The last publish hands over every step (the workers are joined).
    drop(publishing);
    let report = recorder.snapshot();
    // A reader that stops early (`| head`) is not an error.
    let text = serde_json::to_string_pretty(&report)?;
    match writeln!(std::io::stdout().lock(), "{text}") {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        written => written?,
    }
    let _ = writeln!(
        std::io::stderr(),
        "{} verify steps, controller at draft length {}; serving the final counters for {} s",
        report.num_spec_steps(),
        controller.draft_len(),
        args.linger_seconds
    );
    std::thread::sleep(Duration::from_secs(args.linger_seconds));
    Ok(())
}
