//! The output model of `advise` on engine counters: what the command
//! decided, per group, as one typed value that the JSON is serialized
//! from and the table is rendered from (`render::engine_advice`). The
//! command builds it, the renderer reads it; neither imports the other.

use std::collections::BTreeMap;

use serde::Serialize;
use specdec_metrics::{Extrapolation, Recommendation};

use specdec_ingest::schema::Engine;
use specdec_ingest::{Reconstruction, RequestFigures};

/// What `advise` prints for engine counters (`--format json`).
#[derive(Debug, Serialize)]
pub struct EngineAdvice {
    pub source: String,
    pub engine: Engine,
    /// The sample names read start with this.
    pub prefix: String,
    /// What the input was read as: the engine's counters and the families
    /// read, or its responses.
    pub read_as: String,
    /// The label the groups are by (`null` for a log).
    pub by: Option<String>,
    /// How precise counts reconstructed from a log are.
    pub reconstruction: Option<Reconstruction>,
    /// The credible level of the intervals (not serialized: each
    /// recommendation carries its own).
    #[serde(skip)]
    pub credible_level: f64,
    pub groups: Vec<GroupAdvice>,
    /// Each request's figures (`--responses --by-request`), in input order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<Vec<RequestFigures>>,
    /// What makes exact counts exact where it is the input's own figures,
    /// not the families `exact_because` names (`--responses`: their
    /// acceptance histograms); for the table's heading only.
    #[serde(skip)]
    pub exact_from: Option<&'static str>,
}

/// What the counters of a group identify.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The continuation counts, exactly (or reconstructed from a log).
    Exact,
    /// Bounds on each position's trials only: no advice.
    Bounds,
}

/// Why the counts are exact.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExactBecause {
    /// This crate's by-draft-length family.
    ByDraftLength,
    /// Every draft had `K` tokens.
    SameLength,
}

/// One group's advice, or its bounds.
#[derive(Debug, Serialize)]
pub struct GroupAdvice {
    pub labels: BTreeMap<String, String>,
    pub max_draft_len: usize,
    pub drafts: u64,
    pub identified: Verdict,
    pub exact_because: Option<ExactBecause>,
    pub notes: Vec<String>,
    pub recommendation: Option<Recommendation>,
    pub versus_current: Option<Versus>,
    pub setting: Option<String>,
    /// Positions above this (`K`) were never drafted.
    pub never_drafted_above: usize,
    pub extrapolation: Option<Extrapolation>,
    pub bounds: Option<Vec<PositionBounds>>,
}

impl GroupAdvice {
    /// `label="value"` of the group's first label, or "" for the group of
    /// series without the label.
    pub fn name(&self) -> String {
        self.labels
            .iter()
            .map(|(l, v)| specdec_ingest::selector_of(Some(&(l.clone(), v.clone()))))
            .next()
            .unwrap_or_default()
    }
}

/// The recommendation against drafting the current `K`.
#[derive(Debug, Serialize)]
pub struct Versus {
    /// The current `K`.
    pub draft_len: usize,
    /// Goodput of the recommendation over goodput at `K`.
    pub ratio: f64,
    pub interval: [f64; 2],
    /// Posterior probability that the recommendation has the higher
    /// goodput (0.5 when it is `K`).
    pub prob_better: f64,
}

/// Bounds on one position's continuation (positions from 1).
#[derive(Debug, Serialize)]
pub struct PositionBounds {
    pub position: usize,
    pub successes: u64,
    pub trials_min: u64,
    pub trials_max: u64,
    pub rate_min: Option<f64>,
    pub rate_max: Option<f64>,
}
