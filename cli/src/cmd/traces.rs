//! Opening what-if traces as `ngram` writes them, for the commands that
//! replay them (`whatif`, `corpus`): a file of `replay`'s steps is named as
//! such, and a metadata `rule` that `ngram` does not write is refused.

use std::path::Path;

use specdec_sim::trace_set::TraceSet;

use crate::error::CliError;

/// Reads the traces at `path` (`-`: standard input), named `source` in
/// messages.
pub fn open(path: &Path, source: &str) -> Result<TraceSet, CliError> {
    let traces = TraceSet::open(path).map_err(|e| {
        if is_replay_trace(path) {
            CliError::new(format!(
                "{source}: line 1: a replay trace (steps drafted and accepted, as `replay` \
                 reads), not an `ngram` trace (per output position: proposal and match); make \
                 one with `specdec-metrics ngram`"
            ))
        } else {
            CliError::new(e)
        }
    })?;
    if let Some(m) = traces.meta() {
        check_rule(source, &m.rule)?;
    }
    Ok(traces)
}

/// Whether the regular file at `path`
/// begins with a step of `replay`'s traces: an object with `drafted` or
/// `undrafted` and no `output_tokens`. Only its first line is read, and
/// at most 64 KiB of it.
fn is_replay_trace(path: &std::path::Path) -> bool {
    use std::io::{BufRead as _, Read as _};
    // A pipe or a device is read once: only a regular file is reopened.
    if path.as_os_str() == "-" || !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    let mut line = Vec::new();
    if std::io::BufReader::new(file.take(64 * 1024))
        .read_until(b'\n', &mut line)
        .is_err()
    {
        return false;
    }
    match serde_json::from_slice::<serde_json::Value>(&line) {
        Ok(serde_json::Value::Object(o)) => {
            (o.contains_key("drafted") || o.contains_key("undrafted"))
                && !o.contains_key("output_tokens")
        }
        _ => false,
    }
}

/// Refuses a metadata `rule` that `ngram` does not write: its setting
/// would be another engine's, invented.
fn check_rule(source: &str, rule: &str) -> Result<(), CliError> {
    use clap::ValueEnum as _;
    let rules = crate::ngram::Rule::value_variants();
    if rules.iter().any(|r| r.name() == rule) {
        return Ok(());
    }
    Err(CliError::new(format!(
        "{source}: line 1: field \"rule\": {} is not a rule ngram writes ({})",
        crate::format::excerpt(rule),
        rules
            .iter()
            .map(|r| r.name())
            .collect::<Vec<_>>()
            .join(", ")
    )))
}
