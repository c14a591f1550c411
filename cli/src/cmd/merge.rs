//! `merge`: several reports (one per engine or replica) into one.
//!
//! Each file holds one report, as `replay` or an engine wrote it, read back
//! strictly ([`crate::io::read_report`]); all reports must share one `K`. Every
//! error names the file.

use std::path::{Path, PathBuf};

use specdec_metrics::{AcceptanceHistogram, MergeError};

use super::output::{OutputArgs, output};
use crate::error::CliError;
use crate::io::{input_name, read_report, stdin_at_most_once};

/// The flags of `merge`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    output: OutputArgs,
    /// Report files ("-" for standard input).
    #[arg(value_name = "REPORT", required = true)]
    files: Vec<PathBuf>,
}

/// Runs `merge`.
pub fn run(args: Args) -> Result<(), CliError> {
    let hist = merge_files(&args.files)?;
    output(&hist, &args.output)
}

/// Reads and merges the reports at `paths` (`-` is standard input), in order.
pub fn merge_files<P: AsRef<Path>>(paths: &[P]) -> Result<AcceptanceHistogram, CliError> {
    stdin_at_most_once(paths.iter().map(AsRef::as_ref), "report")?;
    let mut merged: Option<(AcceptanceHistogram, String)> = None;
    for path in paths {
        let name = input_name(path.as_ref());
        let report = read_report(path.as_ref(), &name)?;
        match &mut merged {
            None => merged = Some((report, name)),
            Some((total, first)) => total.merge(&report).map_err(|e| match e {
                MergeError::MaxDraftLenMismatch { left, right } => CliError::new(format!(
                    "{name}: num_spec_tokens (K) is {right} but {first} has {left}; only reports with the same K can be merged"
                )),
                other => CliError::new(format!("{name}: cannot merge: {other}")),
            })?,
        }
    }
    merged
        .map(|(total, _)| total)
        .ok_or_else(|| CliError::new("merge needs at least one report file"))
}
