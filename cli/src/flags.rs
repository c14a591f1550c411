//! Flag values shared by the subcommands, parsed with messages that say
//! what is wrong.

use std::num::IntErrorKind;

use clap::ValueEnum;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use specdec_metrics::{AcceptanceHistogram, MAX_MAX_DRAFT_LEN, MIN_MAX_DRAFT_LEN};

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
