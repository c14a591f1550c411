//! Flag values shared by the subcommands, parsed with messages that say
//! what is wrong.

use std::num::IntErrorKind;

use clap::ValueEnum;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use specdec_metrics::{AcceptanceHistogram, MAX_MAX_DRAFT_LEN, MIN_MAX_DRAFT_LEN, StepCost};
use specdec_sim::policy::PolicySpec;

use crate::format::excerpt;

/// `--max-draft-len K`: a whole number in `1..=64`.
pub fn parse_max_draft_len(s: &str) -> Result<usize, String> {
    let k: usize = s.parse().map_err(|e: std::num::ParseIntError| {
        let (min, max) = (MIN_MAX_DRAFT_LEN, MAX_MAX_DRAFT_LEN);
        match e.kind() {
            IntErrorKind::PosOverflow => {
                format!("{} is too large: K must be in {min}..={max}", excerpt(s))
            }
            IntErrorKind::Empty => {
                format!("it is empty: K must be a whole number in {min}..={max}")
            }
            _ => format!(
                "{} is not a whole number: K must be a whole number in {min}..={max}",
                excerpt(s)
            ),
        }
    })?;
    AcceptanceHistogram::new(k).map_err(|e| e.to_string())?;
    Ok(k)
}

/// `4096`, `64K`, `64KiB`, `64M`, `64MiB`, `1G`, `1GiB` (powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    let shift = match unit {
        "" => 0,
        "K" | "KiB" => 10,
        "M" | "MiB" => 20,
        "G" | "GiB" => 30,
        _ => {
            return Err(format!(
                "{} is not a size: write a whole number of bytes, optionally followed by K, M or G (KiB, MiB, GiB)",
                excerpt(s)
            ));
        }
    };
    if digits.is_empty() {
        return Err(format!("{} is not a size: it needs a number", excerpt(s)));
    }
    let bytes = digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .filter(|&n| usize::try_from(n).is_ok())
        .ok_or_else(|| format!("{} is too large", excerpt(s)))?;
    if bytes == 0 {
        return Err("the limit must be at least 1 byte".into());
    }
    Ok(bytes)
}

/// `--format`: what standard output carries. One set of values for every
/// subcommand; each takes those that make sense for it ([`Format::parser`]),
/// so that clap refuses the others and lists the ones it takes.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// One JSON object on one line, for programs: the report (replay,
    /// merge), the recommendation with every estimate behind it (advise),
    /// every bucket's recommendation and both engines' schedules
    /// (batch-size tables).
    Json,
    /// Tables for people.
    Table,
    /// vLLM's speculative_config keys num_speculative_tokens and
    /// num_speculative_tokens_per_batch_size, as one JSON object on one
    /// line.
    Vllm,
    /// TensorRT-LLM's speculative config keys max_draft_len and
    /// draft_len_schedule, as one JSON object on one line.
    Trtllm,
}

impl Format {
    /// The values of `replay` and `merge`.
    pub const REPORT: &[Format] = &[Format::Json, Format::Table];

    /// The parser of a `--format` that takes only the values `allowed`.
    pub fn parser(allowed: &'static [Format]) -> impl TypedValueParser<Value = Format> {
        PossibleValuesParser::new(allowed.iter().filter_map(ValueEnum::to_possible_value)).map(
            |name| {
                <Format as ValueEnum>::from_str(&name, false)
                    .expect("PossibleValuesParser passes only the names of formats")
            },
        )
    }
}

/// Comma-separated numbers. Anything Rust reads as an `f64` is taken
/// (`1e-3`, `inf`, `NaN`: the cost or parameter check then says what is
/// wrong with it); `expected` says what the flag takes.
pub fn parse_numbers(s: &str, expected: &str) -> Result<Vec<f64>, String> {
    if s.trim().is_empty() {
        return Err(format!("it is empty; expected {expected}"));
    }
    s.split(',')
        .enumerate()
        .map(|(i, part)| {
            let t = part.trim();
            if t.is_empty() {
                Err(format!("value {} is empty; expected {expected}", i + 1))
            } else {
                t.parse::<f64>()
                    .map_err(|_| format!("{} is not a number; expected {expected}", excerpt(t)))
            }
        })
        .collect()
}

/// Two numbers `A,B`; `expected` names them.
pub fn parse_pair(s: &str, expected: &str) -> Result<(f64, f64), String> {
    match parse_numbers(s, expected)?[..] {
        [a, b] => Ok((a, b)),
        ref values => Err(format!(
            "{} value{} given; expected {expected}",
            values.len(),
            if values.len() == 1 { "" } else { "s" }
        )),
    }
}

/// `--cost-linear BASE,PER_TOKEN`.
pub fn parse_cost_linear(s: &str) -> Result<StepCost, String> {
    let (base, per_token) = parse_pair(s, "two numbers BASE,PER_TOKEN, e.g. 1,0.1")?;
    StepCost::linear(base, per_token).map_err(|e| e.to_string())
}

/// `--cost-table C0,...,CK`.
pub fn parse_cost_table(s: &str) -> Result<StepCost, String> {
    let costs = parse_numbers(s, "one cost per draft length 0..=K, e.g. 1,1.1,1.2,1.3")?;
    StepCost::table(costs).map_err(|e| e.to_string())
}

/// The most requests in flight (`--batch`, `--batches`): a batch larger
/// than any engine runs.
pub const MAX_BATCH: usize = 65_536;

/// The longest controller interval, in engine steps (`--interval`).
pub const MAX_INTERVAL: u64 = 1_000_000;

/// A number of requests in flight, `1..=MAX_BATCH`.
pub fn parse_batch(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(b) if (1..=MAX_BATCH).contains(&b) => Ok(b),
        _ => Err(format!(
            "expected a whole number of requests in 1..={MAX_BATCH}"
        )),
    }
}

/// `--interval STEPS`: engine steps between controller updates.
pub fn parse_interval(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(n) if (1..=MAX_INTERVAL).contains(&n) => Ok(n),
        _ => Err(format!(
            "expected a whole number of engine steps in 1..={MAX_INTERVAL}"
        )),
    }
}

/// The most request-steps a controller may wait for before deciding
/// (`--update-observations`).
pub const MAX_UPDATE_OBSERVATIONS: u64 = 1_000_000_000;

/// `--update-observations N`: the fewest request-steps a controller
/// decides from, `0..=MAX_UPDATE_OBSERVATIONS`.
pub fn parse_update_observations(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(n) if n <= MAX_UPDATE_OBSERVATIONS => Ok(n),
        _ => Err(format!(
            "expected a whole number of request-steps in 0..={MAX_UPDATE_OBSERVATIONS}"
        )),
    }
}

/// A policy of the engine model's table, by its name (`static:K`, `none`).
pub fn parse_policy(s: &str) -> Result<PolicySpec, String> {
    s.trim().parse()
}

/// `--jobs N`: threads, `1..=256`.
pub fn parse_jobs(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=256).contains(&n) => Ok(n),
        _ => Err("expected a whole number of threads in 1..=256".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_format_parser_takes_only_its_values() {
        let cmd = clap::Command::new("t").arg(
            clap::Arg::new("format")
                .long("format")
                .value_parser(Format::parser(Format::REPORT)),
        );
        let format = |v: &str| {
            cmd.clone()
                .try_get_matches_from(["t", "--format", v])
                .map(|m| *m.get_one::<Format>("format").unwrap())
                .map_err(|e| e.kind())
        };
        assert_eq!(format("json"), Ok(Format::Json));
        assert_eq!(format("table"), Ok(Format::Table));
        assert_eq!(format("vllm"), Err(clap::error::ErrorKind::InvalidValue));
        assert_eq!(format("xml"), Err(clap::error::ErrorKind::InvalidValue));
    }
}
