//! `merge`: several reports (one per engine or replica) into one.
//!
//! Each file holds one report of SPEC §4, as `replay` or an engine wrote it.
//! Reading a report back is strict (the library rejects a report whose
//! figures disagree with its rows), and all reports must share one `K`.
//! Every error names the file.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

use specdec_metrics::{AcceptanceHistogram, MergeError};

use crate::CliError;

/// Reads and merges the reports at `paths` (`-` is standard input), in order.
pub fn merge_files<P: AsRef<Path>>(paths: &[P]) -> Result<AcceptanceHistogram, CliError> {
    let mut merged: Option<(AcceptanceHistogram, String)> = None;
    for path in paths {
        let name = path.as_ref().display().to_string();
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

fn read_report(path: &Path, name: &str) -> Result<AcceptanceHistogram, CliError> {
    let parse = |r: &mut dyn Read| {
        serde_json::from_reader::<_, AcceptanceHistogram>(BufReader::new(r))
            .map_err(|e| CliError::new(format!("{name}: not a valid report: {e}")))
    };
    if path == Path::new("-") {
        return parse(&mut io::stdin().lock());
    }
    let mut file =
        File::open(path).map_err(|e| CliError::new(format!("cannot open {name}: {e}")))?;
    parse(&mut file)
}
