//! One module per subcommand: its flags (`Args`) and its `run`.

pub mod merge;
pub mod replay;
