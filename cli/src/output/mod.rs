//! What `replay` and `merge` print: the report on standard output (JSON or
//! a table) and, with `--plot`, the heatmap to a file; and the one way every
//! subcommand writes to standard output ([`write_stdout`]).

mod plot;
mod table;

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

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

/// Prints the report, then writes the plot. The plot is written whatever
/// happened to standard output, and either failure is an error (exit status
/// 2), except a reader that went away early (`| head`), which is not told
/// anything more.
pub fn output(hist: &AcceptanceHistogram, args: &OutputArgs) -> Result<(), CliError> {
    let report = match args.format {
        Format::Json => serde_json::to_string(hist)
            .map(|mut s| {
                s.push('\n');
                s
            })
            .map_err(|e| CliError::new(format!("cannot write the report: {e}"))),
        Format::Table => Ok(table::render(hist)),
    }
    .and_then(|text| write_stdout(text.as_bytes(), "report"));
    let plot = match &args.plot {
        Some(path) => write_plot(hist, path),
        None => Ok(()),
    };
    match (report, plot) {
        (Ok(()), Ok(())) => Ok(()),
        (Err(e), Ok(())) | (Ok(()), Err(e)) => Err(e),
        (Err(report), Err(plot)) => Err(report.and(plot)),
    }
}

fn write_plot(hist: &AcceptanceHistogram, path: &Path) -> Result<(), CliError> {
    let svg = plot::render_svg(hist).map_err(CliError::new)?;
    std::fs::write(path, svg)
        .map_err(|e| CliError::new(format!("cannot write the plot to {}: {e}", path.display())))
}

/// Writes `bytes` (the `what`: "report", "advice") to standard output. A
/// closed standard output, a full disk or any other failure is an error; a
/// reader that went away (`EPIPE`) is not: it asked for no more.
pub fn write_stdout(bytes: &[u8], what: &str) -> Result<(), CliError> {
    if stdout_is_closed() {
        return Err(CliError::new(format!(
            "standard output is closed; the {what} was not written"
        )));
    }
    let mut stdout = io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(CliError::new(format!(
            "cannot write to standard output: {e}; the {what} was not written"
        ))),
    }
}

/// Whether the program was started with standard output closed (`>&-`).
///
/// Rust's runtime reopens a closed standard stream on `/dev/null` before
/// `main`, so that later files cannot take its descriptor; writes then
/// succeed and go nowhere. It opens it for reading and writing, whereas a
/// shell's `> /dev/null` opens it for writing only: a descriptor that is
/// `/dev/null` and can be read from is the closed stream. (A caller who
/// deliberately passes `/dev/null` open for reading and writing, `1<>`, is
/// told the same, which is true of where the report goes.)
#[cfg(unix)]
fn stdout_is_closed() -> bool {
    use std::os::fd::AsFd;
    use std::os::unix::fs::{FileTypeExt, MetadataExt};

    let Ok(fd) = io::stdout().as_fd().try_clone_to_owned() else {
        return true; // not even a descriptor
    };
    let file = File::from(fd);
    let (Ok(meta), Ok(null)) = (file.metadata(), std::fs::metadata("/dev/null")) else {
        return false;
    };
    meta.file_type().is_char_device()
        && meta.rdev() == null.rdev()
        && (&file).read(&mut [0u8; 1]).is_ok()
}

#[cfg(not(unix))]
fn stdout_is_closed() -> bool {
    false
}
