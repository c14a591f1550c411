//! `advise`: a report into the draft length to use.
//!
//! Reads one report ([`crate::io::read_report`], strictly), checks that its `K`
//! is `--max-draft-len` when that is given (it is the report's `K`
//! otherwise), and hands it with the step cost to the library's
//! [`Advisor`] ([`Advisor::recommend`]). Standard output carries the
//! [`Recommendation`]: serialized, on one line (`--format json`, the
//! default, as for every subcommand: standard output is for programs unless
//! asked otherwise), or as tables for a person (`--format table`): one row
//! per draft length `k = 0..=K`, the recommendation in a sentence, one row
//! per position.
//!
//! `advise batch`, a subcommand of its own, does the same for one report
//! and one step cost per bucket of batch sizes, printed as vLLM's and
//! TensorRT-LLM's schedules: see [`batch`]. The flags both take
//! (`--max-draft-len`, `--prior`, `--credible-level`) are [`AdvisorArgs`].
//!
//! Standard error carries a warning, in either format, whenever the advice
//! should not be trusted as it stands:
//!
//! - **Few data**: fewer than [`FEW_TRIALS`] (1,000) steps drafted at least
//!   one token (the trials `n_1` at position 1; `k = 0` steps tell nothing
//!   about acceptance). At 1,000 trials the posterior standard deviation of
//!   `h_1` is at most `0.5 / sqrt(1000) = 0.016`, a 90% interval at most
//!   ±2.6 points wide; below that the intervals are wide enough for the
//!   choice to move with the next few hundred steps.
//! - **The recommendation leans on the prior**: a position up to the
//!   recommended `k` has no trials, so the estimate there is the prior's
//!   opinion, not data.
//! - **Acceptance that depends on `k`**: a row the library flags
//!   (`Candidate::row_disagrees`): at least
//!   [`MIN_ROW_STEPS`](specdec_metrics::MIN_ROW_STEPS) (100) steps, and its
//!   own mean accepted count further from the chain's `E[a | k]` than
//!   chance allows, calibrated (Bonferroni over the rows compared) so that a
//!   report whose acceptance does not depend on `k` draws this warning at
//!   most 1% of the time, however many rows it has. The warning shows the
//!   distance and the bound.
//! - **Rejected observations** in the report: invalid steps an engine
//!   recorded (a bug to look into); they are in no estimate.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::ArgGroup;
use specdec_metrics::{AcceptanceHistogram, Advisor, Recommendation, StepCost};

use crate::error::CliError;
use crate::flags::{Format, parse_cost_linear, parse_cost_table, parse_max_draft_len, parse_pair};
use crate::format::{excerpt, group_digits};
use crate::io::{
    input_name, is_stdin, note_reading_stdin, read_report, stdin_at_most_once, write_stdout,
};
use crate::render::{self, json_line};

mod batch;
pub mod engines;

/// Below this many trials at position 1 (steps that drafted at least one
/// token) the advice comes with a warning.
pub const FEW_TRIALS: u64 = 1000;

/// The values of `--format`.
const ADVISE_FORMATS: &[Format] = &[Format::Json, Format::Table];

/// The flags of `advise`, or its subcommand `batch`. Once a flag of
/// `advise` itself is given, `batch` is no longer a subcommand but a
/// `REPORT` (`./batch` is one always). The numeric flags take values that
/// start with `-` (`--cost-linear -1,0.1`), so that the cost check, not the
/// argument parser, says what is wrong with a negative number.
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
#[command(group(ArgGroup::new("cost").required(true).args(["cost_linear", "cost_table"])))]
pub struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    advisor: AdvisorArgs,
    /// The step cost as cost(k) = BASE + PER_TOKEN * k, in any unit (only
    /// ratios matter): BASE, a step without speculation, above 0;
    /// PER_TOKEN 0 or more. Example: 1,0.1.
    #[arg(long, value_name = "BASE,PER_TOKEN", value_parser = parse_cost_linear, allow_hyphen_values = true)]
    cost_linear: Option<StepCost>,
    /// The step cost as measured costs of k = 0..=K drafts (K + 1 numbers
    /// above 0, in any unit), for instance step times in ms. Example for
    /// K = 3: 20,22.5,24,26.5.
    #[arg(long, value_name = "C0,...,CK", value_parser = parse_cost_table, allow_hyphen_values = true)]
    cost_table: Option<StepCost>,
    /// What standard output carries: the recommendation as one line of
    /// JSON, or tables for people (one row per draft length, the
    /// recommendation, one row per position).
    #[arg(long, value_name = "FORMAT", default_value = "json", value_parser = Format::parser(ADVISE_FORMATS))]
    format: Format,
    /// The report, as replay or merge writes it; standard input when absent
    /// or "-". Several reports are windows of one engine (its successive
    /// intervals): the advice pools them, and its intervals account for how
    /// much they differ (one report's intervals assume independent steps).
    #[arg(value_name = "REPORT")]
    report: Vec<PathBuf>,
    #[command(flatten)]
    sources: engines::SourceArgs,
}

#[derive(clap::Subcommand, Debug)]
enum Command {
    /// One draft length per bucket of batch sizes, as vLLM's and
    /// TensorRT-LLM's schedules.
    ///
    /// Each --bucket START-END:COST:REPORT gives the batch sizes
    /// START..=END, the step cost there and the report of the steps taken
    /// there; the buckets go in order from batch size 1 without gaps.
    /// Prints every bucket's recommendation and vLLM's
    /// num_speculative_tokens_per_batch_size and TensorRT-LLM's
    /// draft_len_schedule (--format json), one of them alone (vllm,
    /// trtllm), or a table. Each report's warnings are given per bucket.
    Batch(batch::Args),
}

/// The flags `advise` and `advise batch` share: `K` and the advisor's
/// parameters.
#[derive(clap::Args, Debug)]
pub struct AdvisorArgs {
    /// The maximum draft length K, 1..=64: when given, every report's
    /// num_spec_tokens must be K [default: the (first) report's
    /// num_spec_tokens]
    #[arg(long, value_name = "K", value_parser = parse_max_draft_len)]
    max_draft_len: Option<usize>,
    /// The Beta(ALPHA, BETA) prior of every continuation rate, both above
    /// 0 [default: 1,1, uniform, worth two trials].
    #[arg(long, value_name = "ALPHA,BETA", value_parser = parse_prior, allow_hyphen_values = true)]
    prior: Option<Prior>,
    /// The probability of every credible interval, strictly between 0 and 1.
    #[arg(long, value_name = "P", default_value = "0.9", value_parser = parse_credible_level, allow_hyphen_values = true)]
    credible_level: f64,
}

impl AdvisorArgs {
    /// The advisor of `--prior` and `--credible-level`.
    fn advisor(&self) -> Result<Advisor, CliError> {
        let mut advisor = Advisor::default()
            .with_credible_level(self.credible_level)
            .map_err(|e| CliError::new(format!("--credible-level: {e}")))?;
        if let Some(p) = self.prior {
            advisor = advisor
                .with_prior(p.alpha, p.beta)
                .map_err(|e| CliError::new(format!("--prior: {e}")))?;
        }
        Ok(advisor)
    }
}

/// The `--prior` flag, already checked.
#[derive(Clone, Copy, Debug)]
struct Prior {
    alpha: f64,
    beta: f64,
}

fn parse_prior(s: &str) -> Result<Prior, String> {
    let (alpha, beta) = parse_pair(s, "two numbers ALPHA,BETA, e.g. 1,1")?;
    Advisor::default()
        .with_prior(alpha, beta)
        .map_err(|e| e.to_string())?;
    Ok(Prior { alpha, beta })
}

fn parse_credible_level(s: &str) -> Result<f64, String> {
    let level: f64 = s.trim().parse().map_err(|_| {
        format!(
            "{} is not a number; expected a probability such as 0.9",
            excerpt(s)
        )
    })?;
    Advisor::default()
        .with_credible_level(level)
        .map_err(|e| e.to_string())?;
    Ok(level)
}

/// Runs `advise`.
pub fn run(args: Args) -> Result<ExitCode, CliError> {
    if let Some(Command::Batch(batch)) = args.command {
        return batch::run(batch).map(|()| ExitCode::SUCCESS);
    }
    let advisor = args.advisor.advisor()?;
    let Some(cost) = args.cost_linear.or(args.cost_table) else {
        // The argument group makes one of them required.
        return Err(CliError::new(
            "give a step cost: --cost-linear or --cost-table",
        ));
    };
    let given = args.advisor.max_draft_len;
    // With --max-draft-len, checked before the report is read: a wrong
    // table is known already.
    if let Some(max) = given {
        check_cost(&cost, max, None)?;
    }
    if args.sources.given() {
        return engines::run(&args.sources, &advisor, &cost, given, args.format);
    }
    let paths = if args.report.is_empty() {
        vec![PathBuf::from("-")]
    } else {
        args.report.clone()
    };
    stdin_at_most_once(paths.iter().map(AsRef::as_ref), "report")?;
    let windows = read_windows(&paths, given, &cost)?;
    let rec = recommend(&advisor, &windows, &cost)?;
    let rejected: u64 = windows
        .iter()
        .map(AcceptanceHistogram::num_rejected_observations)
        .sum();

    let text = match args.format {
        Format::Json => json_line(&rec, "advice")?,
        Format::Table => render::advice::render(&rec, &cost),
        Format::Vllm | Format::Trtllm => {
            unreachable!("the --format of advise takes json and table only")
        }
    };
    let written = write_stdout(text.as_bytes(), "advice");
    let mut err = io::stderr().lock();
    for w in warnings(&rec, rejected) {
        let _ = writeln!(err, "warning: {w}");
    }
    written?;
    Ok(ExitCode::SUCCESS)
}

/// The reports at `paths`, successive windows of one engine: each of
/// one `K` (`given`, or the first report's), which `cost` must fit, and
/// none given twice.
fn read_windows(
    paths: &[PathBuf],
    given: Option<usize>,
    cost: &StepCost,
) -> Result<Vec<AcceptanceHistogram>, CliError> {
    let mut windows = Vec::with_capacity(paths.len());
    for path in paths {
        if is_stdin(path) {
            note_reading_stdin("a report");
        }
        let name = input_name(path);
        let hist = read_report(path, &name)?;
        let max = hist.max_draft_len();
        let first = windows.first().map(AcceptanceHistogram::max_draft_len);
        match given.or(first) {
            Some(k) if k != max => {
                let what = if given.is_some() {
                    "--max-draft-len"
                } else {
                    "the first report's"
                };
                return Err(CliError::new(format!(
                    "{name}: num_spec_tokens (K) is {max} but {what} is {k}; give the report's K (and, with --cost-table, one cost per draft length 0..=K)"
                )));
            }
            Some(_) => {}
            None => check_cost(cost, max, Some(&name))?,
        }
        // The same window twice agrees perfectly with itself: a dispersion
        // near 0 that would say the steps vary less than binomial noise.
        if hist.num_spec_steps() > 0 {
            if let Some(i) = windows.iter().position(|w| *w == hist) {
                return Err(CliError::new(format!(
                    "{name} (window {}) holds exactly the counts of {} (window {}): the same report given twice? Several reports are successive intervals of one engine, each given once; identical windows would fake an agreement between them",
                    windows.len() + 1,
                    input_name(&paths[i]),
                    i + 1
                )));
            }
        }
        windows.push(hist);
    }
    Ok(windows)
}

/// Whether `cost` fits `K = max` (a table has `K + 1` entries); `from`
/// names the report whose `num_spec_tokens` `K` is, when `--max-draft-len`
/// did not give it.
fn check_cost(cost: &StepCost, max: usize, from: Option<&str>) -> Result<(), CliError> {
    cost.check(max).map_err(|e| {
        CliError::new(match from {
            None => format!("--cost-table: {e}"),
            Some(name) => format!("--cost-table: {e}; K = {max} is the num_spec_tokens of {name}"),
        })
    })
}

/// The library's advice on one report, or on several as windows of one
/// engine (all of one `K`, which the cost fits): the one call of
/// [`Advisor::recommend`] and of [`Advisor::recommend_windows`].
fn recommend(
    advisor: &Advisor,
    windows: &[AcceptanceHistogram],
    cost: &StepCost,
) -> Result<Recommendation, CliError> {
    match windows {
        [one] => advisor
            .recommend(one, cost)
            .map_err(|e| CliError::new(format!("--cost-table: {e}"))),
        many => advisor
            .recommend_windows(many, cost)
            .map_err(|e| CliError::new(format!("the reports as windows: {e}"))),
    }
}

/// The warnings of the module docs, in that order of importance: what is
/// wrong with the data, then with the advice.
fn warnings(rec: &Recommendation, rejected: u64) -> Vec<String> {
    let mut out = Vec::new();
    if rejected > 0 {
        out.push(format!(
            "the report counts {} rejected observation{} (invalid steps the engine recorded: a bug to look into); rejected observations are in no estimate",
            group_digits(rejected),
            if rejected == 1 { "" } else { "s" }
        ));
    }
    let trials = rec.positions.first().map_or(0, |p| p.trials);
    if trials == 0 {
        out.push(
            "no step drafted a token: every estimate is the prior's, not data; the advice is a guess"
                .into(),
        );
    } else if trials < FEW_TRIALS {
        out.push(format!(
            "only {} step{} drafted a token (fewer than {}): the intervals are wide and the advice may change with more data",
            group_digits(trials),
            if trials == 1 { "" } else { "s" },
            group_digits(FEW_TRIALS)
        ));
    }
    let k = rec.draft_len;
    if let Some(first) = rec.positions[..k].iter().find(|p| p.from_prior) {
        let prior = rec.prior;
        out.push(format!(
            "the recommended draft length {k} leans on the prior: no step tried position {} (reached it with every earlier draft accepted){}, so the estimate there is the prior Beta({}, {}), not data; draft {k} tokens now and then to measure it",
            first.position,
            if first.position < k {
                format!(" or any above it up to {k}")
            } else {
                String::new()
            },
            prior.alpha,
            prior.beta
        ));
    }
    let compared = rec
        .candidates
        .iter()
        .filter(|c| c.row_distance.is_some())
        .count();
    for c in rec.candidates.iter().filter(|c| c.row_disagrees) {
        let distance = match c.row_distance {
            Some(d) if d.is_finite() => format!("{d:.1}"),
            _ => "infinitely many".to_owned(),
        };
        out.push(format!(
            "k = {}: the row's own mean accepted {:.3} ({} steps) is {distance} standard deviations from the chain's {:.3} (the bound for {} row{} compared is {:.2}): acceptance seems to depend on the draft length; trust the rows with data over the chain",
            c.draft_len,
            c.row_mean_accepted.unwrap_or(0.0),
            group_digits(c.row_steps),
            c.expected_accepted,
            compared,
            if compared == 1 { "" } else { "s" },
            rec.row_distance_bound,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_parsed_with_messages() {
        assert_eq!(parse_pair(" 1 , 0.1", "X").unwrap(), (1.0, 0.1));
        assert_eq!(
            parse_pair("1,2,3", "X").unwrap_err(),
            "3 values given; expected X"
        );
        assert_eq!(
            parse_pair("1", "X").unwrap_err(),
            "1 value given; expected X"
        );
        assert_eq!(
            parse_pair("1,abc", "X").unwrap_err(),
            "\"abc\" is not a number; expected X"
        );
        assert_eq!(
            parse_pair("1,", "X").unwrap_err(),
            "value 2 is empty; expected X"
        );
        assert_eq!(parse_pair(" ", "X").unwrap_err(), "it is empty; expected X");
        assert!(parse_pair("NaN,1", "X").unwrap().0.is_nan());
    }
}
