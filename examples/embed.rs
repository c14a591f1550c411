//! The embedding in one file. Engine threads each take a `Worker`, read
//! every step's draft length from a `SharedPlan` (one relaxed load), draft,
//! verify (a fake verifier: each draft token accepted with probability
//! `ALPHA`) and record. The metrics thread snapshots the `Recorder` every
//! 250 ms, feeds the interval to a `DraftController` and publishes its
//! plan. `/metrics` is served from a `SpecDecodeCollector`. After
//! `--seconds` (3) the report is printed as JSON on standard output; the
//! full simulator is the `specdec-sim` crate (`sim/`).
//!
//! ```text
//! cargo run --release --example embed [-- --seconds 10 --port 9465]
//! curl -s http://127.0.0.1:9465/metrics
//! ```

use std::error::Error;
use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, header};
use axum::{Router, routing::get};
use rand::{Rng as _, SeedableRng as _};
use rand_xoshiro::SplitMix64;
use specdec_metrics::{DraftController, Recorder, SharedPlan, StepCost};
use specdec_metrics::{SpecDecodeCollector, TextFormat};

const K: usize = 8; // the largest draft length (vLLM's num_spec_tokens)
const ENGINE_THREADS: usize = 2;
const BATCH: usize = 16; // requests per engine step
const ALPHA: f64 = 0.8; // the fake verifier's per-token acceptance
const UPDATE: Duration = Duration::from_millis(250);

/// The fake verifier: each draft token accepted with probability `alpha`,
/// the first rejection ends the accepted prefix.
fn verify(rng: &mut SplitMix64, k: usize, alpha: f64) -> usize {
    (0..k).take_while(|_| rng.random_bool(alpha)).count()
}

fn main() -> std::process::ExitCode {
    // Errors as people read them (`Display`), not as `main` prints them.
    if let Err(e) = run() {
        eprintln!("error: {e}");
        return std::process::ExitCode::from(2);
    }
    std::process::ExitCode::SUCCESS
}

fn run() -> Result<(), Box<dyn Error>> {
    let (mut seconds, mut port) = (3u64, 9465u16);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--seconds" => {
                seconds = value
                    .parse()
                    .map_err(|e| format!("{flag} {value:?}: {e}"))?
            }
            "--port" => {
                port = value
                    .parse()
                    .map_err(|e| format!("{flag} {value:?}: {e}"))?
            }
            _ => return Err(format!("unknown flag {flag} (--seconds N, --port P)").into()),
        }
    }

    // Step cost 1 + 0.1 k: a draft token costs a tenth of a target step.
    let cost = StepCost::linear(1.0, 0.1)?;
    let mut controller = DraftController::new(K, cost)?;
    let plan = Arc::new(SharedPlan::new(controller.plan()));
    let recorder = Recorder::new(K)?;
    let stop = Arc::new(AtomicBool::new(false));

    let mut engines = Vec::new();
    for seed in 0..ENGINE_THREADS as u64 {
        let (worker, plan, stop) = (recorder.worker(), plan.clone(), stop.clone());
        engines.push(thread::spawn(move || {
            let mut rng = SplitMix64::seed_from_u64(seed);
            // Relaxed: a stop flag; the join orders everything after it.
            for step in (0..).take_while(|_| !stop.load(Ordering::Relaxed)) {
                let k = plan.draft_len_for(step); // now and then an exploration step
                worker.observe_scheduled(k).expect("k <= K");
                for _request in 0..BATCH {
                    worker
                        .observe(k, verify(&mut rng, k, ALPHA))
                        .expect("a <= k <= K");
                }
                // The step's time: 1 ms for the target, 0.1 ms per draft token.
                thread::sleep(Duration::from_micros(1000 + 100 * k as u64));
            }
        }));
    }

    // `/metrics`: one snapshot per scrape, in the format the scraper asks for.
    let collector = SpecDecodeCollector::new(recorder.clone()).with_plan(plan.clone());
    let app = Router::new().route(
        "/metrics",
        get(move |headers: HeaderMap| async move {
            let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
            let format = TextFormat::from_accept(accept.unwrap_or(""));
            (
                [(header::CONTENT_TYPE, format.content_type())],
                collector.encode_text(format),
            )
        }),
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let listener = runtime.block_on(tokio::net::TcpListener::bind(("127.0.0.1", port)))?;
    // Progress is best effort: a closed standard error (`2>&1 | head`)
    // does not stop the engine.
    let _ = writeln!(
        std::io::stderr(),
        "embed: metrics on http://{}/metrics",
        listener.local_addr()?
    );
    // axum::serve sets no timeouts: the demo's server (sim/) shows how.
    runtime.spawn(async { axum::serve(listener, app).await });

    // The metrics thread (here the main one): every interval, what was
    // recorded since the last one updates the controller, whose plan the
    // engine threads read from their next step on.
    let started = Instant::now();
    let mut previous = recorder.snapshot();
    while started.elapsed() < Duration::from_secs(seconds) {
        thread::sleep(UPDATE);
        let now = recorder.snapshot();
        let window = now
            .delta_since(&previous)
            .expect("snapshots never decrease");
        controller.update(&window);
        plan.publish(controller.plan());
        let _ = writeln!(
            std::io::stderr(),
            "[{:5.2}s] {} verify steps, mean acceptance length {:.2}; k = {}",
            started.elapsed().as_secs_f64(),
            window.num_spec_steps(),
            window.mean_acceptance_length(),
            controller.draft_len(),
        );
        previous = now;
    }

    // Relaxed: the engine threads poll it; the joins order what they did.
    stop.store(true, Ordering::Relaxed);
    for engine in engines {
        engine.join().expect("no engine thread panics");
    }
    // A reader that stops early (`| head`) is not an error.
    let report = serde_json::to_string_pretty(&recorder.snapshot())?;
    match writeln!(std::io::stdout().lock(), "{report}") {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        written => Ok(written?),
    }
}
