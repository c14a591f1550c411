//! `whatif`: every drafting policy replayed on n-gram traces (as `ngram`
//! writes them) through the simulator's engine model
//! (`specdec_sim::whatif`), with the goodput of each against the best
//! static draft length and per-step hindsight (the policy `oracle`).

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use clap::{ArgGroup, Args as ClapArgs};
use specdec_metrics::StepCost;
use specdec_sim::error::Setting;
use specdec_sim::policy::PolicySpec;
use specdec_sim::whatif::{self, PolicyResult, Settings, WhatIf};

use crate::error::CliError;
use crate::flags::{
    Format, parse_batch, parse_cost_linear, parse_cost_table, parse_interval, parse_jobs,
    parse_max_draft_len, parse_policy, parse_update_observations,
};
use crate::format::display_path;
use crate::io::{file_id, write_file, write_stdout};
use crate::render::{self, json_line};

const WHATIF_FORMATS: &[Format] = &[Format::Table, Format::Json];

/// Progress lines on standard error at most this often.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);

/// `whatif`'s flags.
#[derive(ClapArgs, Debug)]
#[command(group(ArgGroup::new("cost").required(true).args(["cost_linear", "cost_table"])))]
pub struct Args {
    /// The traces to replay, as `specdec-metrics ngram` writes them (JSON
    /// Lines; `-` reads standard input).
    #[arg(value_name = "TRACES", required_unless_present = "compare")]
    traces: Option<PathBuf>,
    /// Replay two traces of the same requests (same ids in the same order,
    /// same output lengths) made under two rules, and print them side by
    /// side with the setting of the one that earns more; K is then at most
    /// each one's cap.
    #[arg(long, value_names = ["A", "B"], num_args = 2, conflicts_with_all = ["traces", "report"])]
    compare: Option<Vec<PathBuf>>,
    /// K: the longest draft any policy may make (1..=64, at most the
    /// traces' cap; with --compare, each one's K is at most its cap).
    #[arg(long, value_name = "K", value_parser = parse_max_draft_len)]
    max_draft_len: usize,
    /// A step costs BASE + PER_TOKEN * d, d the mean tokens drafted per
    /// request of the step (a request without a match drafts 0).
    #[arg(long, value_name = "BASE,PER_TOKEN", value_parser = parse_cost_linear, allow_hyphen_values = true)]
    cost_linear: Option<StepCost>,
    /// Measured step costs by draft length 0..=K, interpolated linearly at
    /// a fractional mean.
    #[arg(long, value_name = "C0,...,CK", value_parser = parse_cost_table, allow_hyphen_values = true)]
    cost_table: Option<StepCost>,
    /// Requests in flight (admitted in file order as slots free up).
    #[arg(long, value_name = "B", default_value_t = whatif::DEFAULT_BATCH, value_parser = parse_batch)]
    batch: usize,
    /// How the batch is fed: once (each request once; the batch drains
    /// at the end, the longest requests with fewer others) or saturated
    /// (a freed slot takes the file's requests again from the first until
    /// each has finished once: every step at B in flight).
    #[arg(long, value_name = "LOAD", default_value_t = whatif::Load::Once)]
    load: whatif::Load,
    /// Engine steps between two updates of the controllers (adaptive,
    /// per-state): the metrics interval, in steps.
    #[arg(long, value_name = "STEPS", default_value_t = whatif::DEFAULT_INTERVAL, value_parser = parse_interval)]
    interval: u64,
    /// The fewest request-steps a controller decides from: the windows of
    /// intervals with fewer are pooled with the next ones (0: decide at
    /// every interval, however little it holds).
    #[arg(long, value_name = "N", default_value_t = specdec_metrics::DEFAULT_UPDATE_OBSERVATIONS, value_parser = parse_update_observations)]
    update_observations: u64,
    /// Also write this policy's acceptance histogram by draft length as a
    /// report (as `replay` writes it; `advise` reads it) to FILE.
    #[arg(long, value_names = ["POLICY", "FILE"], num_args = 2)]
    report: Option<Vec<String>>,
    /// What standard output carries: a table for people, or one JSON object.
    #[arg(long, value_name = "FORMAT", default_value = "table", value_parser = Format::parser(WHATIF_FORMATS))]
    format: Format,
    /// Also draw goodput against the static draft length, with the
    /// controllers, the peer rules and per-step hindsight, as SVG to this
    /// file.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
    /// Replay only these policies (comma-separated names as in the table,
    /// every name of the table of policies: `policies_help`); the ratio to
    /// the best static length is then over the static lengths among them
    /// (null without one).
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_policy, help = policies_help())]
    policies: Option<Vec<PolicySpec>>,
    /// The request states of per-state-censored: levels=N (recent acceptance in N
    /// levels) and any of match=N, short-match, short-proposal, score=N,
    /// after-undrafted, comma-separated (default:
    /// levels=1,short-match,after-undrafted, measured on real code edits).
    #[arg(long, value_name = "DEFINITION", value_parser = whatif::parse_state_space)]
    states: Option<specdec_metrics::StateSpace>,
    /// What per-state's states are on a lookup trace: copy runs split first
    /// by short-match (the drafter's match shorter than its longest),
    /// match-below=N, score-below=X (a suffix draft scoring under X tokens)
    /// or none; or, read at every step instead of copy runs, score-steps
    /// (a state per bucket of a suffix draft's score), match-steps (a
    /// short match, crossed with the request's recent matched length:
    /// under 1, 4, 16 tokens, or more; and with its previous draft's
    /// outcome: none yet, all accepted, some, none), recent-match-steps
    /// (without the previous outcome) or short-match-steps (a short match
    /// alone). Default: match-steps on n-gram traces, score-steps on suffix
    /// traces.
    #[arg(long, value_name = "SIGNAL", value_parser = specdec_sim::runs::RunSignal::parse)]
    run_signal: Option<specdec_sim::runs::RunSignal>,
    /// Policies replayed at once (default: one per core).
    #[arg(long, value_name = "N", value_parser = parse_jobs)]
    jobs: Option<usize>,
}

/// `--policies`' help: every name of the table of policies.
fn policies_help() -> String {
    format!(
        "Replay only these policies (comma-separated names as in the table: {}); the ratio \
         to the best static length is then over the static lengths among them (null without \
         one)",
        specdec_sim::policy::names_statics_first()
    )
}

/// `whatif`'s description in `--help`: every kind of policy of the table
/// of policies.
pub fn long_about() -> String {
    format!(
        "Replay n-gram drafting traces through every drafting policy: what each would have \
         earned on your traffic.\n\n\
         Reads traces as `ngram` writes them and replays every policy ({}) through one engine \
         model: --batch requests in flight, each drafting min(k, L) and accepting min(d, m) at \
         every step, a step costing the cost of the mean tokens drafted. Prints each policy's \
         goodput, its ratio to the best static k, tokens and drafted tokens per step, and the \
         engine setting for the best static k; says so when half or more of the best static k's \
         cost is the replay's drain (fewer requests in flight than --batch once none waits). Exact \
         for greedy outputs of the rule the traces were made with.",
        specdec_sim::policy::about_whatif()
    )
}

/// Runs `whatif`.
pub fn run(args: Args) -> Result<(), CliError> {
    if let Some(pair) = args.compare.clone() {
        return compare(&args, &pair[0], &pair[1]);
    }
    let Some(cost) = args.cost_linear.clone().or(args.cost_table.clone()) else {
        unreachable!("the argument group makes one of the costs required");
    };
    let report = report_arg(&args)?;
    let path = args
        .traces
        .clone()
        .expect("clap requires the traces without --compare");
    refuse_outputs_onto_inputs(&args, &path, &report)?;
    let source = display_path(&path);
    let started = Instant::now();
    let traces = Arc::new(super::traces::open(&path, &source)?);
    if traces.meta().is_some_and(|m| !m.greedy) {
        warn(&format!(
            "{source}: the traces come from sampled outputs: a policy would have changed \
             them, so the figures are estimates, not exact counterfactuals"
        ));
    }
    let settings = Settings {
        traces: Arc::clone(&traces),
        max_draft_len: args.max_draft_len,
        cost,
        batch: args.batch,
        interval: args.interval,
        update_observations: Some(args.update_observations),
        seed: 1,
        state_space: Some(match args.states {
            Some(space) => space,
            None => whatif::parse_state_space(whatif::DEFAULT_STATES)
                .expect("the default state definition is valid"),
        }),
        run_signal: args.run_signal,
        load: args.load,
    };
    let policies = chosen_policies(args.policies.clone(), args.max_draft_len, &report)?;
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, std::num::NonZero::get));
    let results = replay(&settings, &policies, jobs, started)
        .map_err(|e| CliError::new(format!("{source}: {e}")))?;
    let whatif = WhatIf {
        source,
        traces,
        settings,
        results,
    };
    write_outputs(&whatif, &args, report)
}

/// `--compare A B`: both traces replayed under the same settings (each
/// at most its cap), side by side.
fn compare(args: &Args, a: &std::path::Path, b: &std::path::Path) -> Result<(), CliError> {
    let Some(cost) = args.cost_linear.clone().or(args.cost_table.clone()) else {
        unreachable!("the argument group makes one of the costs required");
    };
    for path in [a, b] {
        refuse_outputs_onto_inputs(args, path, &None)?;
    }
    let started = Instant::now();
    let (source_a, source_b) = (display_path(a), display_path(b));
    let traces_a = Arc::new(super::traces::open(a, &source_a)?);
    let traces_b = Arc::new(super::traces::open(b, &source_b)?);
    same_requests(&traces_a, &source_a, &traces_b, &source_b)?;
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, std::num::NonZero::get));
    let mut whatifs = Vec::new();
    for (traces, source) in [(traces_a, source_a), (traces_b, source_b)] {
        if traces.meta().is_some_and(|m| !m.greedy) {
            warn(&format!(
                "{source}: the traces come from sampled outputs: the figures are estimates"
            ));
        }
        let k = args.max_draft_len.min(traces.cap());
        let settings = Settings {
            traces: Arc::clone(&traces),
            max_draft_len: k,
            cost: cost.clone(),
            batch: args.batch,
            interval: args.interval,
            update_observations: Some(args.update_observations),
            seed: 1,
            state_space: Some(match args.states {
                Some(space) => space,
                None => whatif::parse_state_space(whatif::DEFAULT_STATES)
                    .expect("the default state definition is valid"),
            }),
            run_signal: args.run_signal,
            load: args.load,
        };
        let policies = chosen_policies(args.policies.clone(), args.max_draft_len, &None)?
            .into_iter()
            .filter(|p| p.static_len().is_none_or(|n| n <= k))
            .collect::<Vec<_>>();
        let results = replay(&settings, &policies, jobs, started)
            .map_err(|e| CliError::new(format!("{source}: {e}")))?;
        whatifs.push(WhatIf {
            source,
            traces,
            settings,
            results,
        });
    }
    let (a, b) = (&whatifs[0], &whatifs[1]);
    let text = match args.format {
        Format::Json => json_line(&render::whatif_compare::json(a, b), "what-if")
            .map(|t| crate::format::escape_hidden(&t))
            .map_err(CliError::from),
        _ => Ok(render::whatif_compare::table(a, b)),
    };
    let mut errors: Vec<CliError> = Vec::new();
    if let Err(e) = text.and_then(|t| Ok(write_stdout(t.as_bytes(), "what-if")?)) {
        errors.push(e);
    }
    if let Some(path) = &args.plot {
        let svg = render::whatif_compare::render_svg(a, b).map_err(CliError::new);
        if let Err(e) = svg.and_then(|svg| Ok(write_file(path, svg.as_bytes(), "plot")?)) {
            errors.push(e);
        }
    }
    match errors.into_iter().reduce(CliError::and) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Refuses two traces that are not of the same requests: the same ids in
/// the same order, each with the same output length.
fn same_requests(
    a: &specdec_sim::trace_set::TraceSet,
    source_a: &str,
    b: &specdec_sim::trace_set::TraceSet,
    source_b: &str,
) -> Result<(), CliError> {
    let refuse = |why: String| {
        Err(CliError::new(format!(
            "--compare: {source_a} and {source_b} are not traces of the same requests: {why}; make both with `ngram` from the same requests"
        )))
    };
    let (ra, rb) = (a.requests(), b.requests());
    for (i, (x, y)) in ra.iter().zip(rb).enumerate() {
        if x.id != y.id {
            return refuse(format!(
                "request {} is {} in A but {} in B",
                i + 1,
                crate::format::sanitize(&x.id),
                crate::format::sanitize(&y.id)
            ));
        }
        if x.output_tokens != y.output_tokens {
            return refuse(format!(
                "request {} ({}) has {} output tokens in A but {} in B (another tokenizer or --eos?)",
                i + 1,
                crate::format::sanitize(&x.id),
                x.output_tokens,
                y.output_tokens
            ));
        }
    }
    if ra.len() != rb.len() {
        return refuse(format!("A has {} requests, B {}", ra.len(), rb.len()));
    }
    Ok(())
}

/// Refuses a `--plot` or `--report` file that is the traces at `path` (the
/// same file: device and inode, whatever the name or link), which writing
/// it would destroy, or that is the other output (the same path, or the
/// same file), which would keep only the last written.
fn refuse_outputs_onto_inputs(
    args: &Args,
    path: &std::path::Path,
    report: &Option<(PolicySpec, PathBuf)>,
) -> Result<(), CliError> {
    let traces = file_id(std::fs::metadata(path));
    let outputs = [
        args.plot.as_ref().map(|p| ("--plot", p)),
        report.as_ref().map(|(_, p)| ("--report", p)),
    ];
    for (flag, out) in outputs.iter().flatten() {
        if traces.is_some() && file_id(std::fs::metadata(out)) == traces {
            return Err(CliError::new(format!(
                "{flag} {} is the traces {}: writing it would destroy them; nothing was replayed",
                display_path(out),
                display_path(path)
            )));
        }
    }
    if let [Some((_, plot)), Some((_, report))] = outputs {
        let same_file = file_id(std::fs::metadata(plot))
            .is_some_and(|id| file_id(std::fs::metadata(report)) == Some(id));
        if plot == report || same_file {
            return Err(CliError::new(format!(
                "--plot and --report name one file, {}: one would overwrite the other; \
                 nothing was replayed",
                display_path(plot)
            )));
        }
    }
    Ok(())
}

/// `--report POLICY FILE`, its policy parsed.
fn report_arg(args: &Args) -> Result<Option<(PolicySpec, PathBuf)>, CliError> {
    match &args.report {
        Some(pair) => {
            let policy: PolicySpec = pair[0]
                .parse()
                .map_err(|e| CliError::new(format!("--report {e}")))?;
            Ok(Some((policy, PathBuf::from(&pair[1]))))
        }
        None => Ok(None),
    }
}

/// The policies to replay: `--policies` (no static length above
/// `max_draft_len`), or every policy; the `--report` policy must be one.
fn chosen_policies(
    given: Option<Vec<PolicySpec>>,
    max_draft_len: usize,
    report: &Option<(PolicySpec, PathBuf)>,
) -> Result<Vec<PolicySpec>, CliError> {
    let policies = match given {
        Some(list) => {
            for p in &list {
                if let Some(k) = p.static_len() {
                    if k > max_draft_len {
                        return Err(CliError::new(format!(
                            "--policies static:{k}: above --max-draft-len {max_draft_len}"
                        )));
                    }
                }
            }
            list
        }
        None => whatif::policies(max_draft_len),
    };
    if let Some((policy, _)) = report {
        if !policies.contains(policy) {
            return Err(CliError::new(format!(
                "--report {policy}: not a policy this what-if replays ({})",
                policies
                    .iter()
                    .map(|p| render::whatif::policy_name(*p))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
    }
    Ok(policies)
}

/// Replays every policy on `jobs` threads, with a progress line on
/// standard error every [`PROGRESS_EVERY`] (the run began at `started`).
fn replay(
    settings: &Settings,
    policies: &[PolicySpec],
    jobs: usize,
    started: Instant,
) -> Result<Vec<PolicyResult>, String> {
    let last_progress = Mutex::new(Instant::now());
    let progress = |done: usize, total: usize, r: &PolicyResult| {
        let mut last = last_progress.lock().unwrap_or_else(|e| e.into_inner());
        if last.elapsed() >= PROGRESS_EVERY && done < total {
            *last = Instant::now();
            warn_line(&format!(
                "whatif: {done} of {total} policies replayed ({:.0} s; latest {} goodput {:.3})",
                started.elapsed().as_secs_f64(),
                render::whatif::policy_name(r.policy),
                r.goodput()
            ));
        }
    };
    settings
        .replay_all(policies, jobs, &progress)
        .map_err(|e| e.naming(&flag).to_string())
}

/// The flag of a setting the engine model's errors name, for those this
/// command has; the others by their name in the engine's configuration.
fn flag(setting: Setting) -> &'static str {
    match setting {
        Setting::MaxDraftLen => "--max-draft-len",
        Setting::CostTable => "--cost-table",
        Setting::CostLinear => "--cost-linear",
        Setting::MaxBatch => "--batch",
        Setting::Policy => "--policies",
        other => other.field(),
    }
}

/// Writes the table or JSON to standard output, then the report and the
/// plot where asked; every write is tried, and every failure reported.
fn write_outputs(
    whatif: &WhatIf,
    args: &Args,
    report: Option<(PolicySpec, PathBuf)>,
) -> Result<(), CliError> {
    let text = match args.format {
        // The trace's metadata strings are input: no hidden character of
        // theirs reaches the terminal (serde escapes only the controls).
        Format::Json => json_line(&render::whatif::json(whatif), "what-if")
            .map(|t| crate::format::escape_hidden(&t))
            .map_err(CliError::from),
        _ => Ok(render::whatif::table(whatif)),
    };
    let out = text.and_then(|t| Ok(write_stdout(t.as_bytes(), "what-if")?));
    let mut errors: Vec<CliError> = Vec::new();
    if let Err(e) = out {
        errors.push(e);
    }
    if let Some((policy, path)) = report {
        let r = whatif
            .results
            .iter()
            .find(|r| r.policy == policy)
            .expect("the report's policy is among those replayed");
        if let Err(e) = json_line(&r.report, "report")
            .map_err(CliError::from)
            .and_then(|t| Ok(write_file(&path, t.as_bytes(), "report")?))
        {
            errors.push(e);
        }
    }
    if let Some(path) = &args.plot {
        let svg = render::whatif_plot::render_svg(whatif).map_err(CliError::new);
        if let Err(e) = svg.and_then(|svg| Ok(write_file(path, svg.as_bytes(), "plot")?)) {
            errors.push(e);
        }
    }
    match errors.into_iter().reduce(CliError::and) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn warn(msg: &str) {
    warn_line(&format!("warning: {msg}"));
}

/// A line on standard error, best effort (a closed standard error does not
/// stop the run).
fn warn_line(line: &str) {
    let _ = writeln!(
        std::io::stderr().lock(),
        "{}",
        crate::format::sanitize(line)
    );
}
