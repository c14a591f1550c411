//! One module per subcommand: its flags (`Args`) and its `run`; and
//! [`output`], the output flags and printing of the two subcommands that
//! produce a report (`replay`, `merge`).

pub mod advise;
pub mod corpus;
pub mod merge;
pub mod ngram;
pub mod output;
pub mod replay;
pub mod whatif;
