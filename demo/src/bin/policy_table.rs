//! `policy_table`: every drafting policy on every workload, in virtual
//! time with the same seeds, as one markdown table (the program is
//! [`specdec_demo::policy_table`]).

fn main() -> std::process::ExitCode {
    specdec_demo::policy_table::main()
}
