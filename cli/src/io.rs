//! Input and output apart from what is printed ([`crate::render`] makes
//! the text): reading a report back from a file or standard input, and
//! writing to standard output and to files, each failure an error that
//! names what was not read or written.

use std::fs::File;
use std::io::{self, BufReader, IsTerminal, Read, Write};
use std::path::Path;

use specdec_metrics::AcceptanceHistogram;

use crate::error::CliError;
use crate::format::display_path;

/// Reads the report at `path` (`-` is standard input), strictly: the
/// library rejects a report whose figures disagree with its rows. `name` is
/// how messages call it.
pub fn read_report(path: &Path, name: &str) -> Result<AcceptanceHistogram, CliError> {
    let parse = |r: &mut dyn Read| {
        serde_json::from_reader::<_, AcceptanceHistogram>(BufReader::new(r))
            .map_err(|e| CliError::new(format!("{name}: not a valid report: {e}")))
    };
    if is_stdin(path) {
        return parse(&mut io::stdin().lock());
    }
    let mut file =
        File::open(path).map_err(|e| CliError::new(format!("cannot open {name}: {e}")))?;
    parse(&mut file)
}

pub use specdec_ingest::lines::is_stdin;
pub use specdec_ingest::text::input_name;

/// Standard input can be read once: refuses a second `-` among `paths`
/// (the reports of one run, in order), before any of them is read. `what`
/// names one input in the message ("bucket", "report"). One `-` gets the
/// [note](note_reading_stdin) for a terminal.
pub fn stdin_at_most_once<'a>(
    paths: impl IntoIterator<Item = &'a Path>,
    what: &str,
) -> Result<(), CliError> {
    let mut readers = paths
        .into_iter()
        .enumerate()
        .filter(|(_, p)| is_stdin(p))
        .map(|(i, _)| i + 1);
    match (readers.next(), readers.next()) {
        (Some(first), Some(second)) => Err(CliError::new(format!(
            "{what} {second} reads standard input (-), which {what} {first} already reads; only one {what} can read standard input"
        ))),
        (Some(_), None) => {
            note_reading_stdin("a report");
            Ok(())
        }
        (None, _) => Ok(()),
    }
}

/// Tells a person at a terminal that `what` ("JSON Lines", "a report") is
/// read from standard input, which otherwise looks like a hang; says
/// nothing when standard input is a pipe or a file.
pub fn note_reading_stdin(what: &str) {
    if io::stdin().is_terminal() {
        let _ = writeln!(
            io::stderr(),
            "reading {what} from standard input (end with Ctrl-D)"
        );
    }
}

/// Writes `bytes` (the `what`: "report", "advice") to standard output. A
/// closed standard output, a full disk or any other failure is an error; a
/// reader that went away (`EPIPE`) is not: it asked for no more.
pub fn write_stdout(bytes: &[u8], what: &str) -> Result<(), CliError> {
    if specdec_sim::stdio::stdout_is_closed() {
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

/// Writes `bytes` (the `what`: "plot") to the file at `path`, replacing it.
pub fn write_file(path: &Path, bytes: &[u8], what: &str) -> Result<(), CliError> {
    std::fs::write(path, bytes).map_err(|e| {
        CliError::new(format!(
            "cannot write the {what} to {}: {e}",
            display_path(path)
        ))
    })
}

/// A regular file's device and inode (`None` for anything else, or off
/// Unix).
pub fn file_id(meta: io::Result<std::fs::Metadata>) -> Option<(u64, u64)> {
    let meta = meta.ok().filter(std::fs::Metadata::is_file)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some((meta.dev(), meta.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        None
    }
}
