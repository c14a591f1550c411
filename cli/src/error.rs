//! The error every subcommand returns: one or more messages for the user,
//! each printed as `error: <message>` on standard error, exit status 2,
//! always. (Status 3, counters that do not identify the advice, is not an
//! error: `advise` returns it as its `ExitCode`, after printing what it
//! could; see `cmd::advise::engines`.)
//! Every message is [sanitized](crate::format::sanitize) as it is printed,
//! whatever input it came to quote.

use std::fmt;
use std::io::{self, Write};
use std::process::ExitCode;

use crate::format::sanitize;

/// An error for the user: printed as `error: <message>`, exit status 2.
#[derive(Debug)]
pub struct CliError {
    first: String,
    /// Further errors of the same run (the report could not be written,
    /// and neither could the plot), printed after the first.
    more: Vec<String>,
}

impl CliError {
    pub fn new(msg: impl fmt::Display) -> Self {
        Self {
            first: msg.to_string(),
            more: Vec::new(),
        }
    }

    /// This error followed by `other`.
    pub fn and(mut self, other: CliError) -> Self {
        self.more.push(other.first);
        self.more.extend(other.more);
        self
    }

    /// Prints the messages on standard error; the exit status for them, 2.
    pub fn exit(self) -> ExitCode {
        let mut err = io::stderr().lock();
        for msg in std::iter::once(&self.first).chain(&self.more) {
            let _ = writeln!(err, "error: {}", sanitize(msg));
        }
        ExitCode::from(2)
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.first)?;
        for msg in &self.more {
            write!(f, "; {msg}")?;
        }
        Ok(())
    }
}
