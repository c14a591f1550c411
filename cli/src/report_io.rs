//! Reading a report file back: strict (the library rejects a report whose
//! figures disagree with its rows), every error naming the file.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;

use specdec_metrics::AcceptanceHistogram;

use crate::error::CliError;

/// Reads the report at `path` (`-` is standard input); `name` is how
/// messages call it.
pub fn read_report(path: &Path, name: &str) -> Result<AcceptanceHistogram, CliError> {
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
