//! An engine whose registry is a `prometheus::Registry` (tikv's `prometheus`
//! crate), with the speculative-decoding families of this crate registered
//! in it (`PrometheusCrateCollector`, cargo feature `tikv-prometheus`).
//!
//! Engine threads run a synthetic workload (each draft token accepted with
//! a probability that drops halfway through the run), drafting what a
//! `DraftController` chose; the metrics loop updates the controller every
//! interval and publishes its plan; `GET /metrics` serves the registry's
//! `TextEncoder` text on loopback. When the run ends the final report (the
//! recorder's snapshot, as JSON) is printed on standard output and the
//! counters are served frozen for `--linger-seconds`.
//! `.ci/prometheus-e2e.sh` scrapes it with a real Prometheus.
//!
//! ```sh
//! cargo run --release --example prometheus_crate_exporter -- --seconds 30
//! curl -s 127.0.0.1:19466/metrics
//! ```

use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::header;
use axum::routing::get;
use rand::{RngCore, SeedableRng};
use rand_xoshiro::SplitMix64;
use specdec_metrics::{DraftController, PrometheusCrateCollector, Recorder, SharedPlan, StepCost};
// An engine names the crate `prometheus`; this crate renames it.
use tikv_prometheus::{Encoder as _, Registry, TextEncoder};

/// The command line: every flag takes a value.
struct Args {
    addr: SocketAddr,
    prefix: String,
    model_name: String,
    engine: String,
    max_draft_len: usize,
    seconds: u64,
    linger_seconds: u64,
    interval_ms: u64,
}

impl Args {
    fn parse() -> Result<Self, Box<dyn std::error::Error>> {
        let mut args = Self {
            addr: "127.0.0.1:19466".parse()?,
            prefix: "vllm:spec_decode".to_owned(),
            model_name: "example-model".to_owned(),
            engine: "0".to_owned(),
            max_draft_len: 5,
            seconds: 10,
            linger_seconds: 0,
            interval_ms: 250,
        };
        let mut flags = std::env::args().skip(1);
        while let Some(flag) = flags.next() {
            let value = flags.next().ok_or(format!("{flag} needs a value"))?;
            let number = |low: u64, high: u64| match value.parse::<u64>() {
                Ok(n) if (low..=high).contains(&n) => Ok(n),
                _ => Err(format!(
                    "{flag} {value:?}: not a whole number in {low}..={high}"
                )),
            };
            match flag.as_str() {
                "--addr" => args.addr = value.parse()?,
                "--prefix" => args.prefix = value,
                "--model-name" => args.model_name = value,
                "--engine" => args.engine = value,
                "--max-draft-len" => args.max_draft_len = number(1, 64)? as usize,
                "--seconds" => args.seconds = number(1, 365 * 24 * 3600)?,
                "--linger-seconds" => args.linger_seconds = number(0, 365 * 24 * 3600)?,
                "--interval-ms" => args.interval_ms = number(1, 3_600_000)?,
                _ => {
                    return Err(format!(
                        "unknown flag {flag:?} (the flags: --addr, --prefix, --model-name, \
                         --engine, --max-draft-len, --seconds, --linger-seconds, --interval-ms)"
                    )
                    .into());
                }
            }
        }
        Ok(args)
    }
}

fn main() -> std::process::ExitCode {
    if let Err(e) = run() {
        eprintln!("error: {e}");
        return std::process::ExitCode::from(2);
    }
    std::process::ExitCode::SUCCESS
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse()?;
    let k_max = args.max_draft_len;

    // ---- what this crate adds to the engine's registry ----------------------
    let registry = Registry::new();
    let recorder = Recorder::new(k_max)?;
    let mut controller = DraftController::new(k_max, StepCost::linear(1.0, 0.08)?)?;
    let plan = Arc::new(SharedPlan::new(controller.plan()));
    let collector = PrometheusCrateCollector::new(recorder.clone())
        .with_prefix(args.prefix.as_str())?
        .with_const_labels([
            ("model_name", args.model_name.as_str()),
            ("engine", args.engine.as_str()),
        ])?
        .with_plan(Arc::clone(&plan));
    registry.register(Box::new(collector))?;

    // ---- /metrics: the registry's text, as the engine serves it -------------
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let listener = runtime.block_on(tokio::net::TcpListener::bind(args.addr))?;
    let app = Router::new().route(
        "/metrics",
        get(move || {
            let mut body = Vec::new();
            let encoded = TextEncoder::new().encode(&registry.gather(), &mut body);
            async move {
                let status = match encoded {
                    Ok(()) => axum::http::StatusCode::OK,
                    Err(_) => axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                };
                (
                    status,
                    [(
                        header::CONTENT_TYPE,
                        "text/plain; version=0.0.4; charset=utf-8",
                    )],
                    body,
                )
            }
        }),
    );
    let addr = listener.local_addr()?;
    runtime.spawn(async move { axum::serve(listener, app).await });
    let _ = writeln!(std::io::stderr(), "serving /metrics on http://{addr}");

    // ---- the engine: workers record, the metrics loop steers ----------------
    let start = Instant::now();
    let run = Duration::from_secs(args.seconds);
    let interval = Duration::from_millis(args.interval_ms);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for t in 0..2u64 {
            let (recorder, plan, stop) = (&recorder, &plan, &stop);
            s.spawn(move || {
                let worker = recorder.worker();
                let mut rng = SplitMix64::seed_from_u64(0x7141 + t);
                let mut step = 0u64;
                // Relaxed: a flag polled once per step; the scope's join
                // orders everything after it.
                while !stop.load(Ordering::Relaxed) {
                    let k = plan.draft_len_for(step);
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
                    } else {
                        worker.observe(k, accepted).expect("valid step");
                    }
                    std::thread::sleep(Duration::from_secs_f64(0.002 + 0.0004 * k as f64));
                    step += 1;
                }
            });
        }
        let mut previous = recorder.snapshot();
        let mut next = interval;
        while start.elapsed() < run {
            std::thread::sleep(next.min(run).saturating_sub(start.elapsed()));
            next += interval;
            let now = recorder.snapshot();
            controller.update(&now.delta_since(&previous).expect("a later snapshot"));
            plan.publish(controller.plan());
            previous = now;
        }
        stop.store(true, Ordering::Relaxed);
    });

    // The workers are joined: this is what every later scrape shows.
    let report = recorder.snapshot();
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
