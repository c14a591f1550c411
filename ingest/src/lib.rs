//! Every parser of text from outside the process: engines' `/metrics`
//! scrapes and Prometheus API answers, their log lines and per-request
//! responses, `replay`'s JSON-lines steps and the what-if trace format.
//!
//! Everything here is fuzzed (`fuzz/`), bounded in memory per line, and
//! returns typed errors that name settings, never a program's flags: the
//! command line maps them to its own.
//!
//! Reading engine counters is one pipeline: a [`Source`] (one per input
//! kind, under [`source`]) reads its input into continuation counts per
//! [`Group`], with what they identify ([`Read`]); the families each engine
//! exports are one row each of [`schema::SCHEMAS`]; [`counters`] builds
//! the library's counters from their samples. Shared by the readers:
//! [`lines`] (the bounded line loop), [`fit`] (counts from rounded rates),
//! [`exposition`] (the Prometheus text formats), [`text`] (input quoted
//! in messages) and [`http`] (GET with limits, behind the feature `http`).
//!
//! ```
//! use specdec_ingest::source::vllm_log::read_from;
//!
//! let log = "INFO SpecDecoding metrics: Mean acceptance length: 1.60, Accepted throughput: 1.00 tokens/s, Drafted throughput: 2.00 tokens/s, Accepted: 60 tokens, Drafted: 200 tokens, Per-position acceptance rate: 0.400, 0.200, Avg Draft acceptance rate: 30.0%\n";
//! let (counted, _) = read_from(log.as_bytes(), "vllm.log".into(), None).unwrap();
//! assert_eq!(counted.groups[0].built.counters.drafts(), 100);
//! ```

#![deny(missing_docs)]

use std::path::Path;

use serde::Serialize;

pub mod counters;
pub mod error;
pub mod exposition;
pub mod fit;
pub mod http;
pub mod lines;
pub mod schema;
pub mod source;
pub mod steps;
pub mod text;
pub mod trace;

pub use error::{Error, Message, Setting, SourceError};

use crate::counters::Built;
use crate::exposition::series_name;
use crate::schema::{Engine, Families};
use crate::source::vllm_log::format::Format;

/// One input engine counters are read from.
pub trait Source {
    /// Reads the input into continuation counts per group, refusing what
    /// it cannot read with the place and the reason.
    fn read(&self, settings: &Settings) -> Result<Read, SourceError>;

    /// The engines whose output this source reads, with what it reads
    /// ("vLLM's log") and the setting that names the source; `None` when
    /// it reads any engine's (a scrape tells them apart by their names).
    /// [`read`] refuses [`Settings::engine`] outside them.
    fn reads_only(&self) -> Option<(&'static [Engine], &'static str, Setting)> {
        None
    }

    /// The input is standard input: what it is read as, for a note to a
    /// person at a terminal ("vLLM's log"); `None` when it is not.
    fn reads_stdin(&self) -> Option<&'static str> {
        None
    }
}

/// Reads `source` with `settings`: [`Source::read`], after refusing an
/// engine the source does not read.
pub fn read(source: &dyn Source, settings: &Settings) -> Result<Read, SourceError> {
    if let (Some(e), Some((engines, what, setting))) = (settings.engine, source.reads_only()) {
        if !engines.contains(&e) {
            return Err(message![
                setting,
                format!(" reads {what}; "),
                Setting::Engine,
                format!(" {} does not apply", e.name()),
            ]
            .into());
        }
    }
    source.read(settings)
}

/// What every source needs besides its input.
#[derive(Clone, Debug)]
pub struct Settings {
    /// What one input may take.
    pub limits: http::Limits,
    /// Read this engine's counters and no other's.
    pub engine: Option<Engine>,
    /// The label the groups are by.
    pub by: String,
    /// `K`, where the input does not tell it (or to check it against).
    pub max_draft_len: Option<usize>,
    /// The families under this prefix only.
    pub prefix: Option<String>,
}

/// What a source read: the groups' counters, and what the reading assumed.
#[derive(Debug)]
pub struct Read {
    /// The groups' counters.
    pub counted: Counted,
    /// For counts reconstructed from rounded figures (a log): how precise
    /// they are.
    pub reconstruction: Option<Reconstruction>,
    /// The label the groups are by, `None` where the input has no labels.
    pub by: Option<String>,
    /// What the input was read as, for the output's source line (`None`:
    /// the engine's counters, with the families read).
    pub read_as: Option<String>,
    /// Each request's figures, where asked for and the input has them.
    pub requests: Option<Vec<RequestFigures>>,
    /// What makes exact counts exact, where it is the input's own figures
    /// (responses: their acceptance histograms) rather than the families
    /// the counters' verdict names (`None`).
    pub exact_from: Option<&'static str>,
}

/// What a source gave: its name, the families read, the groups.
#[derive(Debug)]
pub struct Counted {
    /// The input's name, for people.
    pub source: String,
    /// The families read.
    pub families: Families,
    /// The groups, in the order of their label values.
    pub groups: Vec<Group>,
}

/// One group's counters, named by its label (`model_name="m"`, or "" for
/// the series without the label).
#[derive(Debug)]
pub struct Group {
    /// `(label, value)`, absent for the series without the label.
    pub label: Option<(String, String)>,
    /// The counters, and what was assumed to build them.
    pub built: Built,
}

impl Group {
    /// `by="value"` as a series would write it, "" without the label.
    pub fn selector(&self) -> String {
        selector_of(self.label.as_ref())
    }
}

/// `label="value"` as a series writes it (escaped), "" for none.
///
/// ```
/// let label = ("model".to_owned(), "a\"b".to_owned());
/// assert_eq!(specdec_ingest::selector_of(Some(&label)), r#"model="a\"b""#);
/// ```
pub fn selector_of(label: Option<&(String, String)>) -> String {
    label.map_or(String::new(), |(l, v)| {
        let s = series_name("", &[(l.clone(), v.clone())]);
        s[1..s.len() - 1].to_owned()
    })
}

/// How messages name the input at `path`: `<stdin>` for `-`.
pub fn input_name(path: &Path) -> String {
    text::input_name(path)
}

/// How precise a reconstruction from rounded figures is, and what was
/// read.
#[derive(Clone, Debug, Serialize)]
pub struct Reconstruction {
    /// Interval lines read (`SpecDecoding metrics` lines with rates).
    pub lines: u64,
    /// Summaries read (offline example, `vllm bench serve`).
    pub summaries: u64,
    /// Lines or summaries with no drafted token (nothing to reconstruct).
    pub lines_without_drafts: u64,
    /// The most any reconstructed per-position count can be off by: one
    /// unit of the rates' last decimal times each record's drafts, added
    /// up.
    pub max_count_error: u64,
    /// The same, over all drafts: the precision of each `P_i`.
    pub max_rate_error: f64,
    /// Always true: the advice's intervals are the posterior's given the
    /// reconstructed counts, and leave `max_rate_error` out (the table
    /// says so, with how it compares with them).
    pub intervals_exclude_reconstruction_error: bool,
    /// The formats read, each as it is named in the notes.
    pub formats: Vec<Format>,
}

/// One request's figures, as its response gave them.
#[derive(Clone, Debug, Serialize)]
pub struct RequestFigures {
    /// The response's `id` (or `meta_info.id`), else `line N`.
    pub id: String,
    /// The response's model, where it names one.
    pub model: Option<String>,
    /// The engine that wrote the figures.
    #[serde(skip)]
    pub engine: Engine,
    /// Verify steps.
    pub steps: u64,
    /// Drafted tokens.
    pub draft_tokens: u64,
    /// Accepted draft tokens.
    pub accepted: u64,
    /// `acceptance_histogram[j]`: steps that accepted exactly `j`.
    #[serde(skip)]
    pub by_accepted: Vec<u64>,
    /// The rows by draft length, where the request identifies them.
    #[serde(skip)]
    pub rows: Option<Vec<(usize, usize, u64)>>,
    /// `1 + accepted / steps`.
    pub mean_acceptance_length: f64,
    /// `accepted / draft_tokens`.
    pub draft_acceptance_rate: Option<f64>,
}
