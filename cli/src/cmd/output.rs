//! What `replay` and `merge` print: the report on standard output (JSON or
//! a table) and, with `--plot`, the heatmap to a file.

use std::path::PathBuf;

use clap::Args;
use specdec_metrics::AcceptanceHistogram;

use crate::error::CliError;
use crate::flags::Format;
use crate::io::{write_file, write_stdout};
use crate::render::{self, json_line};

/// The output flags shared by the subcommands that produce a report.
#[derive(Args, Debug)]
pub struct OutputArgs {
    /// What standard output carries: the report as one line of JSON, or
    /// tables for people (one row per observed draft length, the summary
    /// figures, the rates by position).
    #[arg(long, value_name = "FORMAT", default_value = "json", value_parser = Format::parser(Format::REPORT))]
    format: Format,
    /// Also draw the row-normalised histogram as an SVG heatmap to this file.
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
}

/// Prints the report, then writes the plot. The plot is written whatever
/// happened to standard output, and either failure is an error (exit status
/// 2), except a reader that went away early (`| head`), which is not told
/// anything more.
pub fn output(hist: &AcceptanceHistogram, args: &OutputArgs) -> Result<(), CliError> {
    let report = match args.format {
        Format::Json => json_line(hist, "report").map_err(CliError::from),
        Format::Table => Ok(render::report::render(hist)),
        Format::Vllm | Format::Trtllm => {
            unreachable!("the --format of replay and merge takes json and table only")
        }
    }
    .and_then(|text| Ok(write_stdout(text.as_bytes(), "report")?));
    let plot = match &args.plot {
        Some(path) => render::plot::render_svg(hist)
            .map_err(CliError::new)
            .and_then(|svg| Ok(write_file(path, svg.as_bytes(), "plot")?)),
        None => Ok(()),
    };
    match (report, plot) {
        (Ok(()), Ok(())) => Ok(()),
        (Err(e), Ok(())) | (Ok(()), Err(e)) => Err(e),
        (Err(report), Err(plot)) => Err(report.and(plot)),
    }
}
