//! `specdec-metrics`: the command line. Everything is in the library
//! (`cli/src/lib.rs`); this binary only calls it.

fn main() -> std::process::ExitCode {
    specdec_metrics_cli::main()
}
