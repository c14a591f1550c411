//! `specdec-metrics`: replay verifier traces and vLLM detailed reports into
//! the acceptance-histogram report of SPEC §4, merge reports, draw them.
//!
//! Exit status: 0 on success, 2 on any error (bad flag, missing file,
//! malformed input, `--strict` rejection, inconsistent report), with a
//! message on standard error.

mod input;
mod merge;
mod plot;
mod replay;
mod table;

use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use specdec_metrics::AcceptanceHistogram;

use crate::replay::{ReplayConfig, Source};

/// An error for the user: printed as `error: <message>`, exit status 2.
#[derive(Debug)]
pub struct CliError(String);

impl CliError {
    pub fn new(msg: impl fmt::Display) -> Self {
        Self(msg.to_string())
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Acceptance histograms by draft length for speculative decoding.
///
/// Exit status: 0 on success; 2 on any error (bad flag value, missing file,
/// malformed input line, invalid step under --strict, inconsistent report),
/// with a message on standard error.
#[derive(Parser, Debug)]
#[command(name = "specdec-metrics", version)]
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
    /// arrays "per_step_drafted" and "per_step_accepted" (other keys of a
    /// report are ignored). Blank lines are skipped. A malformed line stops
    /// the run (exit status 2); an invalid step (a > k or k > K) is counted
    /// in num_rejected_observations and warned about, or stops the run
    /// with --strict.
    Replay(ReplayArgs),
    /// Merge report files (one per engine or replica) into one report.
    ///
    /// Every file holds one JSON report as `replay` writes it; all must
    /// have the same num_spec_tokens (K).
    Merge(MergeArgs),
}

#[derive(Args, Debug)]
struct ReplayArgs {
    /// The configured maximum draft length K (vLLM's num_spec_tokens), 1..=64.
    #[arg(long, value_name = "K", value_parser = parse_max_draft_len)]
    max_draft_len: usize,
    /// Record on N threads (1..=256), each with its own Worker of one shared
    /// Recorder; the report is byte for byte the same as without. Without
    /// it, the reading thread records the steps itself.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    workers: Option<u16>,
    /// Stop with exit status 2 at the first invalid step instead of
    /// counting it in num_rejected_observations.
    #[arg(long)]
    strict: bool,
    /// Print at most N warnings about invalid steps, then only their count.
    #[arg(long, value_name = "N", default_value_t = 10)]
    max_warnings: u64,
    #[command(flatten)]
    output: OutputArgs,
    /// The JSON Lines input; standard input when absent or "-".
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct MergeArgs {
    #[command(flatten)]
    output: OutputArgs,
    /// Report files ("-" for standard input).
    #[arg(value_name = "REPORT", required = true)]
    files: Vec<PathBuf>,
}

#[derive(Args, Debug)]
struct OutputArgs {
    /// Output format on standard output.
    #[arg(long, value_enum, default_value_t = Format::Json)]
    format: Format,
    /// Also draw the row-normalised histogram as an SVG heatmap to this file.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    /// The report: vLLM's speculative_decoding keys, the histogram by draft
    /// length and our own counters, as one JSON object on one line.
    Json,
    /// A table for people: one row per observed draft length, then the
    /// summary figures.
    Table,
}

fn parse_max_draft_len(s: &str) -> Result<usize, String> {
    let k: usize = s
        .parse()
        .map_err(|_| format!("{s:?} is not a whole number"))?;
    AcceptanceHistogram::new(k).map_err(|e| e.to_string())?;
    Ok(k)
}

fn main() -> ExitCode {
    let cli = Cli::parse(); // usage errors: clap prints them and exits with 2
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let _ = writeln!(io::stderr(), "error: {e}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Command::Replay(args) => {
            let config = ReplayConfig {
                max_draft_len: args.max_draft_len,
                workers: args.workers.map(usize::from),
                strict: args.strict,
                max_warnings: args.max_warnings,
                progress: replay::stderr_is_terminal(),
            };
            let hist = match args.file.as_deref() {
                Some(path) if path != std::path::Path::new("-") => {
                    let name = path.display().to_string();
                    let file = File::open(path)
                        .map_err(|e| CliError::new(format!("cannot open {name}: {e}")))?;
                    let len = file
                        .metadata()
                        .ok()
                        .filter(|m| m.is_file())
                        .map(|m| m.len());
                    let source = Source { name: &name, len };
                    replay::replay(BufReader::with_capacity(1 << 18, file), &source, &config)?
                }
                _ => {
                    let stdin = io::stdin();
                    if stdin.is_terminal() {
                        let _ = writeln!(
                            io::stderr(),
                            "reading JSON Lines from standard input (end with Ctrl-D)"
                        );
                    }
                    let source = Source {
                        name: "<stdin>",
                        len: None,
                    };
                    let input = BufReader::with_capacity(1 << 18, stdin.lock());
                    replay::replay(input, &source, &config)?
                }
            };
            output(&hist, &args.output)
        }
        Command::Merge(args) => {
            let hist = merge::merge_files(&args.files)?;
            output(&hist, &args.output)
        }
    }
}

/// Prints the report, then draws the plot (after printing, so that a plot
/// that cannot be written does not cost the report).
fn output(hist: &AcceptanceHistogram, args: &OutputArgs) -> Result<(), CliError> {
    let text = match args.format {
        Format::Json => {
            let mut s = serde_json::to_string(hist)
                .map_err(|e| CliError::new(format!("cannot write the report: {e}")))?;
            s.push('\n');
            s
        }
        Format::Table => table::render(hist),
    };
    let mut stdout = io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => {}
        // The reader went away (`| head`): nothing left to say.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
        Err(e) => {
            return Err(CliError::new(format!(
                "cannot write to standard output: {e}"
            )));
        }
    }
    if let Some(path) = &args.plot {
        let svg = plot::render_svg(hist).map_err(CliError::new)?;
        std::fs::write(path, svg).map_err(|e| {
            CliError::new(format!("cannot write the plot to {}: {e}", path.display()))
        })?;
    }
    Ok(())
}
