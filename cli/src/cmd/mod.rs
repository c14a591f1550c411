//! One module per subcommand: its flags (`Args`) and its `run`.

pub mod advise;
pub mod merge;
pub mod replay;
