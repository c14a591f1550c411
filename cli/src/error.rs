//! The error every subcommand returns: a message for the user, printed as
//! `error: <message>` on standard error, exit status 2.

use std::fmt;
use std::io::{self, Write};
use std::process::ExitCode;

/// An error for the user: printed as `error: <message>`, exit status 2.
#[derive(Debug)]
pub struct CliError(String);

impl CliError {
    pub fn new(msg: impl fmt::Display) -> Self {
        Self(msg.to_string())
    }

    /// Prints the message on standard error; the exit status for it.
    pub fn exit(self) -> ExitCode {
        let _ = writeln!(io::stderr(), "error: {self}");
        ExitCode::from(2)
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
