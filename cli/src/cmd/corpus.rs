//! `corpus`: every policy judged on sets of n-gram traces (one per
//! repository, say) over a grid of `K`, step costs and batch sizes, as the
//! median and the minimum over each set's traces of the policy's goodput
//! over that trace's best static draft length (`specdec_sim::corpus`).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Args as ClapArgs;
use specdec_sim::corpus::{self, Grid, Progress, Report, Set, Trace};
use specdec_sim::error::Setting;
use specdec_sim::policy::PolicySpec;
use specdec_sim::whatif;

use crate::error::CliError;
use crate::flags::{
    Format, parse_batch, parse_interval, parse_jobs, parse_max_draft_len, parse_numbers,
    parse_policy, parse_update_observations,
};
use crate::format::display_path;
use crate::io::write_stdout;
use crate::render::{self, json_line};

const CORPUS_FORMATS: &[Format] = &[Format::Table, Format::Json];

/// Requests per trace unless told otherwise: every one (0). A sample of
/// 256 (twice the largest default batch) saved 2% of the report half's
/// CPU time (141 s against 144 s for 6.6 million output positions, see
/// `docs/cli.md`, "corpus"), but it cut a trajectory file of 1,100 agent
/// calls to two batches of 128: the cell measured the ramp and the drain,
/// not the steady state of 128 in flight.
pub const DEFAULT_SAMPLE: usize = 0;

/// Progress lines on standard error at most this often, and not before.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);

/// `corpus`'s flags.
#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Sets of traces as `ngram` writes them: a directory (every *.jsonl
    /// file in it, by name, is one trace: one repository, say) or a single
    /// trace file (a set of one).
    #[arg(value_name = "SET", required = true)]
    sets: Vec<PathBuf>,
    /// The K (longest draft) of each cell, comma-separated, each 1..=64
    /// and at most every trace's cap.
    #[arg(long, value_name = "K,...", value_delimiter = ',', value_parser = parse_max_draft_len,
          default_values_t = corpus::DEFAULT_MAX_DRAFT_LENS)]
    max_draft_lens: Vec<usize>,
    /// The cost per drafted token c of each cell, comma-separated: a step
    /// costs 1 + c * d, d the mean tokens drafted per request (whatif's
    /// --cost-linear 1,c).
    #[arg(long, value_name = "C,...", value_parser = parse_costs,
          default_value = "0.02,0.1,0.3")]
    costs: Costs,
    /// The requests in flight of each cell, comma-separated.
    #[arg(long, value_name = "B,...", value_delimiter = ',', value_parser = parse_batch,
          default_values_t = corpus::DEFAULT_BATCHES)]
    batches: Vec<usize>,
    /// How each replay feeds its batch, as whatif's --load: saturated
    /// (every step at B in flight, the batch refilled from the trace's
    /// first request until each has finished once) or once (each request
    /// once, the batch draining at the end).
    #[arg(long, value_name = "LOAD", default_value_t = whatif::Load::Saturated)]
    load: whatif::Load,
    /// Engine steps between two updates of the controllers (adaptive,
    /// per-state).
    #[arg(long, value_name = "STEPS", default_value_t = whatif::DEFAULT_INTERVAL, value_parser = parse_interval)]
    interval: u64,
    /// The fewest request-steps a controller decides from, as whatif's.
    #[arg(long, value_name = "N", default_value_t = specdec_metrics::DEFAULT_UPDATE_OBSERVATIONS, value_parser = parse_update_observations)]
    update_observations: u64,
    /// The request states of per-state-censored (and of per-state off a
    /// lookup trace), as whatif's --states (default:
    /// levels=1,short-match,after-undrafted).
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
    /// The policies reported (comma-separated names as whatif's; static
    /// lengths at most the smallest K); default: none and every policy but
    /// the static lengths and the censored controllers. The best static length is always over every
    /// static length up to the cell's K.
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_policy)]
    policies: Option<Vec<PolicySpec>>,
    /// Replay at most N requests of each trace, the same ones on every run
    /// (chosen by a hash of their ids, kept in file order); 0: all.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_SAMPLE)]
    sample: usize,
    /// What standard output carries: a table for people, or one JSON object.
    #[arg(long, value_name = "FORMAT", default_value = "table", value_parser = Format::parser(CORPUS_FORMATS))]
    format: Format,
    /// Replays run at once (default: one per core).
    #[arg(long, value_name = "N", value_parser = parse_jobs)]
    jobs: Option<usize>,
}

/// `--costs`: every cost checked as the per-token cost of `1 + c d`.
#[derive(Clone, Debug)]
struct Costs(Vec<f64>);

fn parse_costs(s: &str) -> Result<Costs, String> {
    let costs = parse_numbers(s, "costs per drafted token, e.g. 0.02,0.1,0.3")?;
    for &c in &costs {
        specdec_metrics::StepCost::linear(1.0, c).map_err(|e| format!("{c}: {e}"))?;
    }
    Ok(Costs(costs))
}

/// Runs `corpus`.
pub fn run(args: Args) -> Result<(), CliError> {
    let started = Instant::now();
    no_value_twice("--max-draft-lens", &args.max_draft_lens)?;
    no_value_twice("--costs", &args.costs.0)?;
    no_value_twice("--batches", &args.batches)?;
    let policies = chosen_policies(args.policies.clone(), &args.max_draft_lens)?;
    let sets = args
        .sets
        .iter()
        .map(|path| read_set(path, args.sample))
        .collect::<Result<Vec<_>, _>>()?;
    let grid = Grid {
        max_draft_lens: args.max_draft_lens.clone(),
        costs: args.costs.0.clone(),
        batches: args.batches.clone(),
        interval: args.interval,
        update_observations: Some(args.update_observations),
        policies,
        state_space: Some(match args.states {
            Some(space) => space,
            None => whatif::parse_state_space(whatif::DEFAULT_STATES)
                .expect("the default state definition is valid"),
        }),
        run_signal: args.run_signal,
        seed: 1,
        load: args.load,
    };
    for set in &sets {
        warn_unfilled(set, &args.batches, args.load);
    }
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, std::num::NonZero::get));
    let last_progress = Mutex::new(started);
    let progress = |p: &Progress| {
        let mut last = last_progress.lock().unwrap_or_else(|e| e.into_inner());
        if last.elapsed() >= PROGRESS_EVERY && p.replays_done < p.replays {
            *last = Instant::now();
            warn_line(&format!(
                "corpus: {} of {} cells done, {} of {} replays ({:.0} s)",
                p.cells_done,
                p.cells,
                p.replays_done,
                p.replays,
                started.elapsed().as_secs_f64()
            ));
        }
    };
    let results = corpus::run(&grid, &sets, jobs, &progress).map_err(|e| {
        let error = e.error.naming(&flag);
        CliError::new(match &e.trace {
            Some(t) => format!("{t}: {error}"),
            None => error.to_string(),
        })
    })?;
    let report = Report {
        grid,
        sample: args.sample,
        sets: results,
    };
    let text = match args.format {
        // Trace names are paths: no hidden character of theirs reaches the
        // terminal (serde escapes only the controls).
        Format::Json => json_line(&render::corpus::json(&report), "corpus report")
            .map(|t| crate::format::escape_hidden(&t))?,
        _ => render::corpus::table(&report),
    };
    Ok(write_stdout(text.as_bytes(), "corpus report")?)
}

/// Refuses a list flag that names one value twice (two equal cells).
fn no_value_twice<T: PartialEq + std::fmt::Display>(
    flag: &str,
    values: &[T],
) -> Result<(), CliError> {
    for (i, v) in values.iter().enumerate() {
        if values[..i].contains(v) {
            return Err(CliError::new(format!(
                "{flag}: {v} is given twice; each value makes cells of its own"
            )));
        }
    }
    Ok(())
}

/// The policies reported: `--policies` (each once, no static length above
/// the smallest `K`), or `none` and every policy that is not a static
/// length nor a censored controller (`adaptive-censored`,
/// `per-state-censored`: named with `--policies`).
fn chosen_policies(
    given: Option<Vec<PolicySpec>>,
    max_draft_lens: &[usize],
) -> Result<Vec<PolicySpec>, CliError> {
    let smallest = max_draft_lens.iter().copied().min().unwrap_or(0);
    let Some(list) = given else {
        let mut all = vec![PolicySpec::fixed(0)];
        all.extend(
            PolicySpec::non_static()
                .into_iter()
                .filter(|p| !p.def().name.ends_with("-censored")),
        );
        return Ok(all);
    };
    let mut policies: Vec<PolicySpec> = Vec::new();
    for p in list {
        if let Some(k) = p.static_len().filter(|&k| k > smallest) {
            return Err(CliError::new(format!(
                "--policies static:{k}: above the smallest of --max-draft-lens, {smallest}"
            )));
        }
        if !policies.contains(&p) {
            policies.push(p);
        }
    }
    Ok(policies)
}

/// A set: every `*.jsonl` file of a directory, by name, or one trace file;
/// each trace sampled to at most `sample` requests.
fn read_set(path: &Path, sample: usize) -> Result<Set, CliError> {
    let name = display_path(path);
    let files = if path.is_dir() {
        let entries = std::fs::read_dir(path)
            .map_err(|e| CliError::new(format!("{name}: cannot list the directory: {e}")))?;
        let mut files = Vec::new();
        for entry in entries {
            let entry = entry
                .map_err(|e| CliError::new(format!("{name}: cannot list the directory: {e}")))?;
            let file = entry.path();
            if file.extension().is_some_and(|x| x == "jsonl") && file.is_file() {
                files.push(file);
            }
        }
        if files.is_empty() {
            return Err(CliError::new(format!(
                "{name}: no trace in this directory (a set is every *.jsonl file of a directory, \
                 or one trace file)"
            )));
        }
        files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
        files
    } else {
        vec![path.to_path_buf()]
    };
    let traces = files
        .iter()
        .map(|file| {
            let source = display_path(file);
            let traces = Arc::new(super::traces::open(file, &source)?);
            if traces.meta().is_some_and(|m| !m.greedy) {
                warn_line(&format!(
                    "warning: {source}: the traces come from sampled outputs: a policy would \
                     have changed them, so the figures are estimates, not exact counterfactuals"
                ));
            }
            Ok(Trace {
                name: source,
                file_requests: traces.requests().len(),
                traces: corpus::sample(&traces, sample),
            })
        })
        .collect::<Result<Vec<_>, CliError>>()?;
    Ok(Set { name, traces })
}

/// Warns of the batches some traces of `set` hold fewer requests than:
/// replayed once, every request is in flight at once and the cell is a
/// smaller batch, draining; saturated, the batch is full of copies.
fn warn_unfilled(set: &Set, batches: &[usize], load: whatif::Load) {
    for &b in batches {
        let short: Vec<usize> = set
            .traces
            .iter()
            .map(|t| {
                let requests = t.traces.requests();
                requests.iter().filter(|r| !r.positions.is_empty()).count()
            })
            .filter(|&n| n < b)
            .collect();
        if let Some(fewest) = short.iter().min() {
            warn_line(&format!(
                "warning: {}: {} of {} traces replay fewer requests than a batch of {b} (the \
                 fewest {fewest}): {}",
                set.name,
                short.len(),
                set.traces.len(),
                match load {
                    whatif::Load::Once => {
                        "at that batch they are all in flight at once and the batch never fills"
                    }
                    whatif::Load::Saturated => {
                        "at that batch copies of the same requests are in flight at once"
                    }
                }
            ));
        }
    }
}

/// The flag of a setting the engine model's errors name, for those this
/// command has; the others by their name in the engine's configuration.
fn flag(setting: Setting) -> &'static str {
    match setting {
        Setting::MaxDraftLen => "--max-draft-lens",
        Setting::CostLinear => "--costs",
        Setting::MaxBatch => "--batches",
        Setting::Policy => "--policies",
        other => other.field(),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use specdec_sim::policy::Kind;

    #[test]
    fn list_flags_refuse_a_value_twice() {
        assert!(no_value_twice("--batches", &[1, 8, 32]).is_ok());
        let e = no_value_twice("--batches", &[1, 8, 1]).unwrap_err();
        assert!(e.to_string().contains("--batches: 1 is given twice"), "{e}");
    }

    #[test]
    fn the_default_policies_are_none_and_every_non_static_one() {
        let p = chosen_policies(None, &[8, 64]).unwrap();
        assert_eq!(p[0], PolicySpec::fixed(0));
        assert!(p[1..].iter().all(|p| p.kind() != Kind::Static));
        assert_eq!(p.len(), 1 + PolicySpec::non_static().len() - 2);
        assert!(!p.contains(&PolicySpec::adaptive_censored()));
        let some = vec![
            PolicySpec::oracle(),
            PolicySpec::fixed(8),
            PolicySpec::oracle(),
        ];
        assert_eq!(
            chosen_policies(Some(some.clone()), &[8, 64]).unwrap(),
            vec![PolicySpec::oracle(), PolicySpec::fixed(8)]
        );
        assert!(chosen_policies(Some(some), &[4, 64]).is_err());
    }
}
