//! `specdec-metrics`: replay verifier traces and vLLM detailed reports into
//! the acceptance-histogram report, merge reports, draw them, and advise a
//! draft length from them.
//!
//! The library behind the binary (`main.rs` only calls [`main`]). [`main`]
//! parses the command line and dispatches: each subcommand
//! is a module of [`cmd`] (its flags and its `run`), and what subcommands
//! share lives in modules of its own — [`error`] (the error type and how it
//! is printed), [`flags`] (flag values more than one subcommand takes),
//! [`format`](mod@format) (numbers and quoted input in messages),
//! [`io`] (reading a report back, writing standard output and files) and
//! [`render`] (the text printed: tables, JSON, the plot), and
//! [`advice`](mod@advice) (what `advise` decided on engine counters: the
//! one output model its JSON and its table are made from). No module
//! imports from another subcommand, and nothing in [`render`] from
//! [`cmd`]. Engines' scrapes, logs and responses are read by
//! `specdec-ingest`, whose typed errors `cmd` maps to its flags.
//!
//! Exit status: 0 on success, 3 when `advise` on engine counters gives
//! bounds instead of advice (or, for a vLLM log line, cannot tell the
//! counts at all), 2 on any error (bad flag, missing file, malformed input,
//! `--strict` rejection, inconsistent report, a step cost or a `K` that
//! does not fit the report), with a message on standard error. Status 3 is
//! a command's `ExitCode`, never an error's.

// These docs are for maintainers, built with `--document-private-items`
// (.ci/run): a public item may point at the private one it is built on.
#![allow(rustdoc::private_intra_doc_links)]

pub mod advice;
pub mod cmd;
pub mod error;
pub mod flags;
pub mod format;
pub mod io;
pub mod ngram;
pub mod render;

use std::io::Write as _;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Acceptance histograms by draft length for speculative decoding.
///
/// Exit status: 0 on success; 3 when advise on an engine's counters, logs
/// or responses can give only bounds (drafts of varying length); 2 on any
/// error (bad flag value,
/// missing file, malformed input line, invalid step under --strict,
/// inconsistent report, a step cost or K that does not fit the report),
/// with a message on standard error.
#[derive(Parser, Debug)]
// Plain, without colours: clap writes the values it quotes raw among its
// colour codes, which could not then be told apart and escaped.
#[command(name = "specdec-metrics", version, styles = clap::builder::Styles::plain())]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Replay JSON Lines of verify steps into the engine-wide report.
    ///
    /// Each line is a step {"drafted": k, "accepted": a}, an undrafted step
    /// {"undrafted": true}, or one request's vLLM detailed report with the
    /// arrays "per_step_drafted" and "per_step_accepted" (its
    /// num_spec_tokens is checked against K, its other keys are ignored).
    /// Blank lines are skipped; every line must be UTF-8 text. A malformed
    /// line, or one longer than --max-line-bytes, stops the run (exit status
    /// 2); an invalid step (a > k or k > K) is counted in
    /// num_rejected_observations and warned about, or stops the run with
    /// --strict.
    Replay(cmd::replay::Args),
    /// Merge report files (one per engine or replica) into one report.
    ///
    /// Every file holds one JSON report as `replay` writes it; all must
    /// have the same num_spec_tokens (K).
    Merge(cmd::merge::Args),
    /// Advise a draft length from a report and the engine's step cost.
    ///
    /// Reads one report (as replay or merge writes it) whose num_spec_tokens
    /// is K and prints, for every draft length k = 0..=K, the expected
    /// accepted drafts with a credible interval, tokens per step, goodput
    /// and speedup over not speculating, and the k with the highest expected
    /// goodput. Positions without trials use the prior, and say so. Warns
    /// on standard error when the advice should not be trusted (fewer than
    /// 1,000 steps drafted a token; the recommendation leans on the prior; a
    /// row's own mean disagrees with the chain; rejected observations).
    ///
    /// With --metrics FILE|URL|- (a /metrics scrape), --prometheus URL
    /// --window D (a fleet through Prometheus) or --vllm-log FILE it reads
    /// the counters, logs or responses of vLLM, mistral.rs, llama.cpp,
    /// TensorRT-LLM, SGLang or this crate instead, and
    /// gives per model the recommendation, its speedup over the current K,
    /// and the engine's setting; counters that give only bounds (drafts of
    /// varying length) print the bounds and exit with status 3.
    ///
    /// `advise batch` takes one report and one step cost per bucket of
    /// batch sizes (--bucket START-END:COST:REPORT, repeated) and gives one
    /// draft length per bucket, printed as vLLM's
    /// num_speculative_tokens_per_batch_size and TensorRT-LLM's
    /// draft_len_schedule.
    Advise(Box<cmd::advise::Args>),
    /// Replay n-gram drafting traces through every drafting policy: what
    /// each would have earned on your traffic.
    ///
    /// (The long description names every kind of policy of the engine
    /// model's table of policies: `cmd::whatif::long_about`.)
    #[command(long_about = cmd::whatif::long_about())]
    Whatif(Box<cmd::whatif::Args>),
    /// Judge every drafting policy on sets of traces over a grid of K,
    /// step costs and batch sizes.
    ///
    /// Each SET is a directory (every *.jsonl file in it is one trace: one
    /// repository, say) or one trace file. For every cell (K, c, batch)
    /// prints, per set, the median and the minimum over its traces of each
    /// policy's goodput over that trace's best static k: the what-if of
    /// every trace at every cell, replays shared where the figures allow.
    Corpus(Box<cmd::corpus::Args>),
    /// Generate exact n-gram what-if traces from requests' text.
    ///
    /// Reads JSON Lines of requests {"prompt": TEXT, "output": TEXT, "id":
    /// ...} (or, with --git REPO, code edits from a repository's history),
    /// tokenizes them, and writes a metadata line then one trace line per
    /// request, in input order: at every output position, how many tokens
    /// the engine's n-gram drafter (--rule) would propose and how many of
    /// them the output confirms. Exact for greedy outputs (see docs/cli.md
    /// for which engines and settings). Bad input stops the run with exit
    /// status 2, after the lines before it are written.
    Ngram(Box<cmd::ngram::Args>),
}

/// The command line's definition, every subcommand's flags and help as
/// `--help` prints them (for tests that parse or render it in process).
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

/// Parses the command line, runs the subcommand, prints its errors;
/// the process's exit status. The one exit path: every outcome that is
/// not an error, 3 included, is [`run`]'s `ExitCode`; every error is a
/// [`CliError`](error::CliError), exit status 2.
pub fn main() -> ExitCode {
    run().unwrap_or_else(error::CliError::exit)
}

/// Parses the command line and runs the subcommand: its exit status (0, or
/// 3 for `advise` on counters that give bounds only), or its error.
pub fn run() -> Result<ExitCode, error::CliError> {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if e.use_stderr() => return Ok(usage_error(&e)),
        Err(e) => e.exit(), // --help, --version: standard output, status 0
    };
    match cli.command {
        Command::Replay(args) => cmd::replay::run(args).map(|()| ExitCode::SUCCESS),
        Command::Merge(args) => cmd::merge::run(args).map(|()| ExitCode::SUCCESS),
        Command::Advise(args) => cmd::advise::run(*args),
        Command::Whatif(args) => cmd::whatif::run(*args).map(|()| ExitCode::SUCCESS),
        Command::Corpus(args) => cmd::corpus::run(*args).map(|()| ExitCode::SUCCESS),
        Command::Ngram(args) => cmd::ngram::run(*args).map(|()| ExitCode::SUCCESS),
    }
}

/// Prints a usage error as clap words it, [sanitized](format::sanitize)
/// line by line: clap quotes the offending value whole and raw (on a
/// terminal; elsewhere it strips escape sequences, and the value with
/// them), so a value holding control characters would act on the
/// terminal. Returns clap's exit status for it (2).
fn usage_error(e: &clap::Error) -> ExitCode {
    // Without styles, the "ANSI" rendering is the text with the value's
    // bytes as given, which sanitize then escapes.
    let text = e.render().ansi().to_string();
    let mut err = std::io::stderr().lock();
    for line in text.lines() {
        let _ = writeln!(err, "{}", format::sanitize(line));
    }
    ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
}
