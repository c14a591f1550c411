//! What `replay` and `merge` print: the report on standard output (JSON or
//! a table) and, with `--plot`, the heatmap to a file.

mod plot;
mod table;

use std::io::{self, Write};
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use specdec_metrics::AcceptanceHistogram;

use crate::error::CliError;

/// The output flags shared by the subcommands that produce a report.
#[derive(Args, Debug)]
pub struct OutputArgs {
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

/// Prints the report, then draws the plot (after printing, so that a plot
/// that cannot be written does not cost the report).
pub fn output(hist: &AcceptanceHistogram, args: &OutputArgs) -> Result<(), CliError> {
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
