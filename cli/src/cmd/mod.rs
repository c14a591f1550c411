//! One module per subcommand: its flags (`Args`) and its `run`; and
//! [`output`], the output flags and printing of the two subcommands that
//! produce a report (`replay`, `merge`). The typed errors of the modules
//! outside `cmd` that name no flag become [`CliError`]s here, word for word.

pub mod advise;
pub mod corpus;
pub mod merge;
pub mod ngram;
pub mod output;
pub mod replay;
pub mod traces;
pub mod whatif;

use crate::error::CliError;

impl From<crate::io::IoError> for CliError {
    fn from(e: crate::io::IoError) -> Self {
        CliError::new(e)
    }
}

impl From<crate::render::JsonError> for CliError {
    fn from(e: crate::render::JsonError) -> Self {
        CliError::new(e)
    }
}
