//! Input and output apart from what is printed ([`crate::render`] makes
//! the text): reading a report back from a file or standard input, and
//! writing to standard output and to files, each failure an error that
//! names what was not read or written ([`IoError`]).

use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};

use specdec_metrics::AcceptanceHistogram;

use crate::format::display_path;

/// What could not be read or written; each names the input or output (no
/// flag: none of these comes from one flag alone).
#[derive(Debug)]
pub enum IoError {
    /// The report `name` was read, but is not a valid report.
    NotAReport {
        /// How the report is called.
        name: String,
        /// What the strict reader said.
        source: serde_json::Error,
    },
    /// The report `name` cannot be opened.
    Open {
        /// How the report is called.
        name: String,
        /// Why.
        source: io::Error,
    },
    /// Two of the inputs (`what` number `first` and `second`, from 1) are
    /// standard input.
    StdinTwice {
        /// What one input is called ("bucket", "report").
        what: String,
        /// The first input reading standard input.
        first: usize,
        /// The second.
        second: usize,
    },
    /// Standard output is closed: the `what` was not written.
    StdoutClosed {
        /// What was to be written ("report", "advice").
        what: String,
    },
    /// Writing the `what` to standard output failed.
    Stdout {
        /// What was to be written.
        what: String,
        /// Why.
        source: io::Error,
    },
    /// Writing the `what` to the file at `path` failed.
    File {
        /// What was to be written ("plot", "report").
        what: String,
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

impl fmt::Display for IoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IoError::NotAReport { name, source } => {
                write!(f, "{name}: not a valid report: {source}")
            }
            IoError::Open { name, source } => write!(f, "cannot open {name}: {source}"),
            IoError::StdinTwice {
                what,
                first,
                second,
            } => write!(
                f,
                "{what} {second} reads standard input (-), which {what} {first} already reads; only one {what} can read standard input"
            ),
            IoError::StdoutClosed { what } => {
                write!(f, "standard output is closed; the {what} was not written")
            }
            IoError::Stdout { what, source } => write!(
                f,
                "cannot write to standard output: {source}; the {what} was not written"
            ),
            IoError::File { what, path, source } => write!(
                f,
                "cannot write the {what} to {}: {source}",
                display_path(path)
            ),
        }
    }
}

impl std::error::Error for IoError {}

/// Reads the report at `path` (`-` is standard input), strictly: the
/// library rejects a report whose figures disagree with its rows. `name` is
/// how messages call it.
pub fn read_report(path: &Path, name: &str) -> Result<AcceptanceHistogram, IoError> {
    let parse = |r: &mut dyn Read| {
        serde_json::from_reader::<_, AcceptanceHistogram>(BufReader::new(r)).map_err(|source| {
            IoError::NotAReport {
                name: name.to_owned(),
                source,
            }
        })
    };
    if is_stdin(path) {
        return parse(&mut io::stdin().lock());
    }
    let mut file = File::open(path).map_err(|source| IoError::Open {
        name: name.to_owned(),
        source,
    })?;
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
) -> Result<(), IoError> {
    let mut readers = paths
        .into_iter()
        .enumerate()
        .filter(|(_, p)| is_stdin(p))
        .map(|(i, _)| i + 1);
    match (readers.next(), readers.next()) {
        (Some(first), Some(second)) => Err(IoError::StdinTwice {
            what: what.to_owned(),
            first,
            second,
        }),
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
pub fn write_stdout(bytes: &[u8], what: &str) -> Result<(), IoError> {
    if specdec_sim::stdio::stdout_is_closed() {
        return Err(IoError::StdoutClosed {
            what: what.to_owned(),
        });
    }
    let mut stdout = io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(source) => Err(IoError::Stdout {
            what: what.to_owned(),
            source,
        }),
    }
}

/// Writes `bytes` (the `what`: "plot") to the file at `path`, replacing it.
pub fn write_file(path: &Path, bytes: &[u8], what: &str) -> Result<(), IoError> {
    std::fs::write(path, bytes).map_err(|source| IoError::File {
        what: what.to_owned(),
        path: path.to_owned(),
        source,
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
