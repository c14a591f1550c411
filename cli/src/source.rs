//! `advise` on engine counters is one pipeline: a [`Source`] reads its
//! input into continuation counts per group with what they identify, the
//! advisor advises (`cmd::advise::engines`), a renderer prints
//! (`render::engine_advice`, from the [`advice`](crate::advice) model).
//! Each source is one type behind this one small trait, so the next
//! engine's format is one more implementation; today's:
//!
//! - [`Scrape`]: one Prometheus exposition, or the counts between two
//!   (`--metrics [--since]`; [`crate::sources::from_metrics`]);
//! - [`PrometheusQuery`]: `increase()` over a window of a Prometheus HTTP
//!   API (`--prometheus`; [`crate::sources::from_prometheus`]);
//! - [`VllmLog`]: vLLM's periodic log lines (`--vllm-log`;
//!   [`crate::vllm_log::read`]);
//! - [`LlamacppLog`](crate::llamacpp_log::LlamacppLog): llama.cpp's
//!   statistics and per-request log lines (`--llamacpp-log`);
//! - [`Responses`](crate::responses::Responses): per-request figures in
//!   engines' responses (`--responses`, `--by-request`).

use std::fmt;
use std::path::PathBuf;

use crate::engines::Engine;
use crate::error::CliError;
use crate::responses::RequestFigures;
use crate::sources::{self, Counted, Settings};
use crate::vllm_log::{self, Reconstruction};

/// What a source read: the groups' counters, and what the reading assumed.
#[derive(Debug)]
pub struct Read {
    pub counted: Counted,
    /// For counts reconstructed from rounded figures (a log): how precise
    /// they are.
    pub reconstruction: Option<Reconstruction>,
    /// The label the groups are by, `None` where the input has no labels.
    pub by: Option<String>,
    /// What the input was read as, for the output's source line (`None`:
    /// the engine's counters, with the families read).
    pub read_as: Option<String>,
    /// Each request's figures (`--by-request`).
    pub requests: Option<Vec<RequestFigures>>,
    /// What makes exact counts exact, for the table's heading, where it is
    /// the input's own figures (responses: their acceptance histograms)
    /// rather than the families the counters' verdict names (`None`).
    pub exact_from: Option<&'static str>,
}

/// Why a source gave no counters.
#[derive(Debug)]
pub enum SourceError {
    /// The input cannot be read, or contradicts itself: an error (exit
    /// status 2).
    Error(CliError),
    /// The input was read, but its counts cannot be told (drafts of
    /// different lengths that it does not count): the place and the
    /// reason. Not an error: `advise` prints it on standard error, as an
    /// error's message, and returns exit status 3 as its `ExitCode`, as
    /// for counters that give bounds only.
    NotIdentified(String),
}

impl From<CliError> for SourceError {
    fn from(e: CliError) -> Self {
        Self::Error(e)
    }
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Error(e) => e.fmt(f),
            Self::NotIdentified(msg) => f.write_str(msg),
        }
    }
}

/// One input `advise` reads engine counters from.
pub trait Source {
    /// Reads the input into continuation counts per group, refusing what
    /// it cannot read with the place and the reason.
    fn read(&self, settings: &Settings) -> Result<Read, SourceError>;
}

/// `--metrics SOURCE [--since EARLIER]`.
#[derive(Debug)]
pub struct Scrape {
    pub source: String,
    pub since: Option<String>,
}

impl Source for Scrape {
    fn read(&self, settings: &Settings) -> Result<Read, SourceError> {
        Ok(Read {
            counted: sources::from_metrics(&self.source, self.since.as_deref(), settings)?,
            reconstruction: None,
            by: Some(settings.by.clone()),
            read_as: None,
            requests: None,
            exact_from: None,
        })
    }
}

/// `--prometheus URL --window D [--selector S] [--at T]`.
#[derive(Debug)]
pub struct PrometheusQuery {
    pub url: String,
    pub window: String,
    pub selector: Option<String>,
    pub at: Option<String>,
}

impl Source for PrometheusQuery {
    fn read(&self, settings: &Settings) -> Result<Read, SourceError> {
        Ok(Read {
            counted: sources::from_prometheus(
                &self.url,
                &self.window,
                self.selector.as_deref(),
                self.at.as_deref(),
                settings,
            )?,
            reconstruction: None,
            by: Some(settings.by.clone()),
            read_as: None,
            requests: None,
            exact_from: None,
        })
    }
}

/// `--vllm-log FILE|-`.
#[derive(Debug)]
pub struct VllmLog {
    pub path: PathBuf,
}

impl Source for VllmLog {
    fn read(&self, settings: &Settings) -> Result<Read, SourceError> {
        if let Some(e) = settings.engine.filter(|&e| e != Engine::Vllm) {
            return Err(CliError::new(format!(
                "--vllm-log reads vLLM's log; --engine {} does not apply",
                e.name()
            ))
            .into());
        }
        let (counted, rec) = vllm_log::read(&self.path, settings.max_draft_len)?;
        Ok(Read {
            counted,
            reconstruction: Some(rec),
            by: None,
            read_as: None,
            requests: None,
            exact_from: None,
        })
    }
}
