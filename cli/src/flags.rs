//! Flag values shared by the subcommands, parsed with messages that say
//! what is wrong.

use std::num::IntErrorKind;

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
