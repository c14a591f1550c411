//! What the subcommands print, as text, and nothing else: no module here
//! reads or writes ([`crate::io`] does). The report as a table
//! ([`report`]) or a heatmap ([`plot`]), the advice's tables ([`advice`],
//! and per engine group [`engine_advice`], from
//! [`crate::advice`]'s model), the batch-size table
//! ([`batch_table`]), the what-if's table and plot ([`whatif`],
//! [`whatif_plot`]), all laid out by the one table renderer ([`table`]);
//! and any serializable value as one line of JSON ([`json_line`]).

pub mod advice;
pub mod batch_table;
pub mod engine_advice;
pub mod label_layout;
pub mod plot;
pub mod report;
pub mod table;
pub mod whatif;
pub mod whatif_plot;

use serde::Serialize;

use crate::error::CliError;

/// `value` as one JSON object on one line, with its newline; `what`
/// ("report", "advice") names it if it cannot be serialized.
pub fn json_line(value: &impl Serialize, what: &str) -> Result<String, CliError> {
    serde_json::to_string(value)
        .map(|s| s + "\n")
        .map_err(|e| CliError::new(format!("cannot write the {what}: {e}")))
}
