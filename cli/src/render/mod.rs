//! What the subcommands print, as text, and nothing else: no module here
//! reads or writes ([`crate::io`] does). The report as a table
//! ([`report`]) or a heatmap ([`plot`]), the advice's tables ([`advice`],
//! and per engine group [`engine_advice`], from
//! [`crate::advice`]'s model), the batch-size table
//! ([`batch_table`]), the what-if's table and plot ([`whatif`],
//! [`whatif_plot`]), the corpus report's tables ([`corpus`]), all laid out by the one table renderer ([`table`]);
//! and any serializable value as one line of JSON ([`json_line`]).

pub mod advice;
pub mod batch_table;
pub mod corpus;
pub mod engine_advice;
pub mod label_layout;
pub mod plot;
pub mod report;
pub mod table;
pub mod whatif;
pub mod whatif_compare;
pub mod whatif_plot;

use std::fmt;

use serde::Serialize;

/// A value that cannot be written as JSON (a map whose keys are not
/// strings, a serializer's own error): names the value.
#[derive(Debug)]
pub struct JsonError {
    /// What the value is ("report", "advice").
    pub what: String,
    /// What `serde_json` said.
    pub source: serde_json::Error,
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot write the {}: {}", self.what, self.source)
    }
}

impl std::error::Error for JsonError {}

/// `value` as one JSON object on one line, with its newline; `what`
/// ("report", "advice") names it if it cannot be serialized.
pub fn json_line(value: &impl Serialize, what: &str) -> Result<String, JsonError> {
    serde_json::to_string(value)
        .map(|s| s + "\n")
        .map_err(|source| JsonError {
            what: what.to_owned(),
            source,
        })
}
