//! One module per source engine counters are read from, each one type
//! behind [`Source`](crate::Source), so that the next engine's format is
//! one more file here:
//!
//! - [`scrape`]: one Prometheus exposition, or the counts between two;
//! - [`prometheus_api`]: `increase()` over a window of a Prometheus HTTP
//!   API;
//! - [`vllm_log`]: vLLM's periodic log lines and summaries;
//! - [`llamacpp_log`]: llama.cpp's statistics and per-request log lines;
//! - [`responses`]: per-request figures in engines' responses.

use std::collections::BTreeMap;

use crate::counters::{self, GroupCounts, Values};
use crate::error::{Error, Setting};
use crate::schema::Families;
use crate::text::group_digits;
use crate::{Counted, Group, Settings, message, selector_of};

pub mod llamacpp_log;
pub mod prometheus_api;
pub mod responses;
pub mod scrape;
pub mod vllm_log;

/// The most groups one run advises (each is a recommendation, a table):
/// a bound on the time and output an endpoint can cause.
pub const MAX_GROUPS: usize = 1000;

/// The groups' counters built, or why not: none, or too many.
fn finish(
    source: String,
    families: Families,
    groups: BTreeMap<String, GroupCounts>,
    settings: &Settings,
    values: Values,
) -> Result<Counted, Error> {
    if groups.is_empty() {
        return Err(Error::new(format!(
            "{source}: no series of {}",
            families.drafts()
        )));
    }
    if groups.len() > MAX_GROUPS {
        return Err(message![
            format!(
                "{source}: {} groups (values of ",
                group_digits(groups.len() as u64)
            ),
            Setting::By,
            format!(
                " {}), more than the {} one run advises: narrow the input (",
                settings.by,
                group_digits(MAX_GROUPS as u64)
            ),
            Setting::Selector,
            ", ",
            Setting::Prefix,
            ") or give ",
            Setting::By,
            " a label with fewer values",
        ]);
    }
    let mut out = Vec::new();
    for (value, g) in groups {
        let label = (!value.is_empty()).then(|| (settings.by.clone(), value));
        let selector = selector_of(label.as_ref());
        let built = counters::build(&families, &selector, &g, settings.max_draft_len, values)
            .map_err(|e| e.after(format!("{source}: ")))?;
        out.push(Group { label, built });
    }
    Ok(Counted {
        source,
        families,
        groups: out,
    })
}
