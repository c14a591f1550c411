//! One module per source engine counters are read from, so that the next
//! engine's format is one more file here:
//!
//! - [`scrape`]: one Prometheus exposition, or the counts between two;
//! - [`prometheus_api`]: `increase()` over a window of a Prometheus HTTP
//!   API;
//! - [`vllm_log`]: vLLM's periodic log lines and summaries;
//! - [`llamacpp_log`]: llama.cpp's statistics and per-request log lines;
//! - [`responses`]: per-request figures in engines' responses.
//!
//! The first two are types behind [`Source`]; the others read one file
//! (or standard input) each and are rows of [`LOG_SOURCES`], which a
//! program reads to give each its flag, to name its [`Setting::Log`] and
//! to fuzz it; [`LogFile`] is the [`Source`] of any row.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::PathBuf;

use crate::counters::{self, GroupCounts, Values};
use crate::error::{Error, Setting, SourceError};
use crate::lines;
use crate::schema::{Engine, Families};
use crate::text::{group_digits, input_name};
use crate::{Counted, Group, Read, Settings, Source, message, selector_of};

pub mod llamacpp_log;
pub mod prometheus_api;
pub mod responses;
pub mod scrape;
pub mod vllm_log;

/// A source that reads one file (or standard input) of an engine's text,
/// a log or its responses: one row of [`LOG_SOURCES`].
#[derive(Debug)]
pub struct LogSource {
    /// The setting that names its input, [`Setting::Log`]`(name)`: what
    /// its errors call it (`vllm_log`).
    pub name: &'static str,
    /// The command line's flag for its input (`--vllm-log`); nothing in
    /// this crate prints it.
    pub flag: &'static str,
    /// What it reads, one paragraph (the flag's help).
    pub help: &'static str,
    /// The engines whose text it reads ([`Source::reads_only`]).
    pub engines: &'static [Engine],
    /// What it reads, in "`engine` ... does not apply: it reads ...".
    pub reads: &'static str,
    /// What standard input is read as, in the note to a person at a
    /// terminal.
    pub stdin: &'static str,
    /// Its reader on any input, called `name` in messages: what
    /// [`LogFile`] reads once the file is open, and what `fuzz/` feeds.
    pub read_from: ReadFrom,
}

/// A [`LogSource`]'s reader: the input, its name for messages, the options.
pub type ReadFrom = fn(&mut dyn BufRead, String, &LogOptions) -> Result<Read, SourceError>;

/// What a [`LogSource`] reads with besides its input.
#[derive(Clone, Debug, Default)]
pub struct LogOptions {
    /// `K`, where the input does not tell it (or to check it against):
    /// [`Settings::max_draft_len`].
    pub max_draft_len: Option<usize>,
    /// Each request's figures too ([`Read::requests`]), where the input
    /// has them (responses).
    pub by_request: bool,
}

/// Every source that reads one file of an engine's text, one row each;
/// a program gives each a flag and maps [`Setting::Log`] back to it.
pub const LOG_SOURCES: &[LogSource] = &[
    LogSource {
        name: "vllm_log",
        flag: "--vllm-log",
        help: "vLLM's log: its periodic \"SpecDecoding metrics: ...\" lines, reconstructed into counts (see the manual for their precision)",
        engines: &[Engine::Vllm],
        reads: "vLLM's log",
        stdin: "vLLM's log",
        read_from: |input, name, o| {
            let (counted, rec) = vllm_log::read_from(input, name, o.max_draft_len)?;
            Ok(Read {
                counted,
                reconstruction: Some(rec),
                by: None,
                read_as: None,
                requests: None,
                exact_from: None,
            })
        },
    },
    LogSource {
        name: "llamacpp_log",
        flag: "--llamacpp-log",
        help: "llama.cpp's log: its `statistics <drafter>: ...` lines (or, without them, its per-request \"print_timing ... draft acceptance\" lines), reconstructed into counts",
        engines: &[Engine::Llamacpp],
        reads: "llama.cpp's log",
        stdin: "llama.cpp's log",
        read_from: |input, name, o| llamacpp_log::read_from(input, name, o.max_draft_len),
    },
    LogSource {
        name: "responses",
        flag: "--responses",
        help: "Engines' responses, one per line (JSON or server-sent events): vLLM's metrics.speculative_decoding (--per-request-spec-decode-metrics summary), SGLang's meta_info, pooled over the requests of each model",
        engines: &[Engine::Vllm, Engine::Sglang, Engine::Specdec],
        reads: "vLLM's, SGLang's and this crate's per-request figures",
        stdin: "responses (JSON Lines)",
        read_from: |input, name, o| {
            responses::read_from(input, name, o.by_request, o.max_draft_len)
        },
    },
];

impl LogSource {
    /// The setting that names its input.
    pub fn setting(&self) -> Setting {
        Setting::Log(self.name)
    }

    /// The row named `name`.
    ///
    /// ```
    /// use specdec_ingest::source::LogSource;
    /// assert_eq!(LogSource::named("vllm_log").unwrap().flag, "--vllm-log");
    /// assert!(LogSource::named("scrape").is_none());
    /// ```
    pub fn named(name: &str) -> Option<&'static LogSource> {
        LOG_SOURCES.iter().find(|s| s.name == name)
    }
}

/// The [`Source`] of a [`LogSource`]: its file at `path` (`-`: standard
/// input).
///
/// ```
/// use specdec_ingest::source::{LogFile, LogSource};
/// use specdec_ingest::Source;
///
/// let log = LogFile::new(LogSource::named("llamacpp_log").unwrap(), "-".into());
/// assert_eq!(log.reads_stdin(), Some("llama.cpp's log"));
/// ```
#[derive(Debug)]
pub struct LogFile {
    /// Its row.
    pub source: &'static LogSource,
    /// The file.
    pub path: PathBuf,
    /// [`LogOptions::by_request`].
    pub by_request: bool,
}

impl LogFile {
    /// The file at `path` read as `source`, without options.
    pub fn new(source: &'static LogSource, path: PathBuf) -> Self {
        Self {
            source,
            path,
            by_request: false,
        }
    }
}

impl Source for LogFile {
    fn read(&self, settings: &Settings) -> Result<Read, SourceError> {
        let name = input_name(&self.path);
        let mut input =
            lines::open(&self.path).map_err(|e| Error::new(format!("cannot open {name}: {e}")))?;
        let options = LogOptions {
            max_draft_len: settings.max_draft_len,
            by_request: self.by_request,
        };
        (self.source.read_from)(&mut input, name, &options)
    }

    fn reads_only(&self) -> Option<(&'static [Engine], &'static str, Setting)> {
        Some((
            self.source.engines,
            self.source.reads,
            self.source.setting(),
        ))
    }

    fn reads_stdin(&self) -> Option<&'static str> {
        lines::is_stdin(&self.path).then_some(self.source.stdin)
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_log_source_has_a_name_and_flag_of_its_own() {
        for (i, s) in LOG_SOURCES.iter().enumerate() {
            // The flag is the setting's name as a command line writes it.
            assert_eq!(s.flag, format!("--{}", s.name.replace('_', "-")));
            assert!(!s.engines.is_empty() && !s.help.is_empty());
            assert_eq!(LogSource::named(s.name).map(|r| r.name), Some(s.name));
            assert!(LOG_SOURCES[..i].iter().all(|o| o.name != s.name));
        }
        // The setting schema.rs names for SGLang's answer.
        assert!(LogSource::named("responses").is_some());
    }
}
