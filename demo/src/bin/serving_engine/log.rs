//! The demo's output: [`Output`] (standard error and standard output,
//! written without ever panicking), the `log!` macro, and the metrics
//! thread's log of every interval and finished request ([`DemoEvents`]).

use std::fmt;
use std::io::{self, Write as _};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use specdec_demo::engine_metrics::EngineMetrics;
use specdec_metrics::{AcceptanceHistogram, RequestState};
use specdec_sim::engine::{
    ControllerStep, EngineStep, Events, FinishedRequest, Interval, StateControllerStep,
};

/// Writes one line on standard error through an [`Output`], like
/// `eprintln!` but without ever panicking.
macro_rules! log {
    ($output:expr, $($arg:tt)*) => {
        $output.log(format_args!($($arg)*))
    };
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
/// refused before the run by [`specdec_sim::stdio::stdout_is_closed`], as by
/// the command line.)
pub(crate) struct Output {
    closed: AtomicBool,
    wake: tokio::sync::Notify,
}

impl Output {
    pub(crate) fn new() -> Self {
        Self {
            closed: AtomicBool::new(false),
            wake: tokio::sync::Notify::new(),
        }
    }

    /// Writes one line on standard error, unless the output is closed.
    pub(crate) fn log(&self, line: fmt::Arguments<'_>) {
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
    pub(crate) fn report(&self, text: &str) -> Result<(), String> {
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

    pub(crate) fn is_closed(&self) -> bool {
        // Relaxed: see `close`.
        self.closed.load(Ordering::Relaxed)
    }

    /// Resolves once the output is closed.
    pub(crate) async fn closed(&self) {
        if !self.is_closed() {
            self.wake.notified().await;
        }
    }
}

/// A figure that may be missing, with `digits` decimals.
pub(crate) fn figure(value: Option<f64>, digits: usize) -> String {
    value.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.digits$}"))
}

/// Logs what the simulation reports: an interval's lines, a finished
/// request.
pub(crate) struct DemoEvents {
    pub(crate) output: Arc<Output>,
    pub(crate) print_requests: bool,
    pub(crate) engine_metrics: EngineMetrics,
    /// The policy chooses a length per request (its `k` is then the
    /// latest step's mean, rounded).
    pub(crate) per_request: bool,
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
        (_, Some(c)) => state_choice(c),
        (Some(c), None) => controller_choice(c),
        (None, None) => static_choice(interval, per_request),
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

/// The state controller's choice: a length per state, what changed, and
/// the share of verify steps in each state.
fn state_choice(c: &StateControllerStep) -> String {
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

/// The controller's choice: its length, what changed, what it explores.
fn controller_choice(c: &ControllerStep) -> String {
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

/// The choice of a policy without a controller: the engine threads'
/// lengths (a per-request rule's latest mean) and their switches.
fn static_choice(interval: &Interval<'_>, per_request: bool) -> String {
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
