//! `advise --metrics`, `--prometheus`, `--vllm-log`, `--llamacpp-log`,
//! `--responses`: advice from the counters, logs and responses other
//! engines already write (`specdec_ingest::schema` for what each exports,
//! `specdec_ingest::source` for how they are read). This module maps the
//! flags to a source and its settings, and the readers' typed errors back
//! to the flags ([`flag`]).
//!
//! Per group (one `--by` label value, `model_name` by default) the
//! library's [`EngineCounters::identify`](specdec_metrics::EngineCounters::identify)
//! says how the continuation counts are known:
//!
//! - **exact**: the recommendation ([`Advisor::recommend_continuation`]),
//!   the expected speedup of the recommendation over the engine's current
//!   `K` with its credible interval ([`Advisor::compare`]), the engine's
//!   exact setting for it, and, when the last measured continuation rate
//!   suggests a longer draft than `K` would pay, that length labelled as an
//!   extrapolation ([`Advisor::extrapolate`]);
//! - **bounds**: no advice; the bounds on each position's trials and rate,
//!   labelled as bounds, and exit status 3 (so that a script does not take
//!   them for advice).
//!
//! A source whose counts cannot be told at all (a vLLM log line of drafts
//! of different lengths, `SourceError::NotIdentified`) gives no output:
//! its message on standard error, and exit status 3 too. Status 3 is this
//! command's `ExitCode`, never a [`CliError`]'s: it is not an error.
//!
//! Inconsistent counters are an error (exit status 2) naming the series as
//! the engine exports it.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use specdec_ingest::http::Limits;
use specdec_ingest::schema::{Engine, SCHEMAS};
use specdec_ingest::source::prometheus_api::PrometheusQuery;
use specdec_ingest::source::scrape::Scrape;
use specdec_ingest::source::{LOG_SOURCES, LogFile, LogSource};
use specdec_ingest::{Counted, Group, Read, Setting, Settings, Source, SourceError};
use specdec_metrics::{
    Advisor, Continuation, ContinuationBounds, Exactness, Identified, MAX_MAX_DRAFT_LEN, StepCost,
};

use crate::advice::{EngineAdvice, ExactBecause, GroupAdvice, PositionBounds, Verdict, Versus};
use crate::error::CliError;
use crate::flags::{Format, parse_size};
use crate::format::{escape_hidden, excerpt, sanitize};
use crate::io::{note_reading_stdin, write_stdout};
use crate::render::{self, json_line};

/// Whether `label` indexes the series of one family (every schema's
/// position label, this crate's buckets' labels): never a grouping.
fn is_index_label(label: &str) -> bool {
    SCHEMAS.iter().any(|s| s.position_label == label)
        || ["draft_length", "accepted"].contains(&label)
}

/// Exit status when some group's counters give bounds, not advice.
pub const NOT_IDENTIFIED: u8 = 3;

/// The flags that read another engine's counters instead of a report.
#[derive(clap::Args, Debug)]
pub struct SourceArgs {
    /// A Prometheus exposition (classic text or OpenMetrics): a file, "-"
    /// for standard input, or an http(s) /metrics URL. vLLM, mistral.rs
    /// and this crate's families are recognised under any prefix.
    #[arg(long, value_name = "FILE|URL|-", conflicts_with_all = ["prometheus", "report"])]
    pub metrics: Option<String>,
    /// An earlier scrape of the same engine (file or URL): advise on the
    /// counts between the two (a counter lower than before, an engine
    /// restart, is an error).
    #[arg(long, value_name = "FILE|URL", requires = "metrics")]
    pub since: Option<String>,
    /// A Prometheus server (or Thanos, Mimir, VictoriaMetrics): advise on
    /// increase() of the families over --window, summed across instances
    /// by the --by label; counter resets are handled as Prometheus does.
    #[arg(
        long,
        value_name = "URL",
        requires = "window",
        conflicts_with = "report"
    )]
    pub prometheus: Option<String>,
    /// The window of --prometheus, as PromQL writes durations (30m, 1h,
    /// 1h30m); it ends at --at.
    #[arg(long, value_name = "DURATION", requires = "prometheus")]
    pub window: Option<String>,
    /// Label matchers that every series of --prometheus must match, in
    /// braces: '{job="vllm",cluster="eu"}'.
    #[arg(
        long,
        value_name = "{MATCHERS}",
        requires = "prometheus",
        allow_hyphen_values = true
    )]
    pub selector: Option<String>,
    /// The end of the --prometheus window, in Unix seconds [default: now].
    #[arg(long, value_name = "UNIX_SECONDS", requires = "prometheus")]
    pub at: Option<String>,
    /// One recommendation per value of this label (series without it form
    /// one group of their own).
    #[arg(long, value_name = "LABEL", default_value = "model_name", value_parser = parse_label)]
    pub by: String,
    /// One flag per log source (`--vllm-log`, `--llamacpp-log`,
    /// `--responses`): [`LogArgs`].
    #[command(flatten)]
    pub logs: LogArgs,
    /// With --responses: each request's figures and their spread too.
    #[arg(long, requires = "responses")]
    pub by_request: bool,
    /// Read the counters of this engine and no other [default: detected
    /// from the names].
    #[arg(long, value_name = "ENGINE")]
    pub engine: Option<EngineFlag>,
    /// Read the families under this prefix only (the part of their names
    /// before _num_drafts_total, e.g. vllm:spec_decode), where a scrape or
    /// Prometheus holds several.
    #[arg(long, value_name = "PREFIX", conflicts_with = "vllm_log")]
    pub prefix: Option<String>,
    /// The largest exposition, file or HTTP answer read (K, M, G suffixes
    /// as powers of 1024).
    #[arg(long, value_name = "SIZE", default_value = "64MiB", value_parser = parse_size)]
    pub max_bytes: u64,
    /// The longest an HTTP request may take, answer included, in seconds.
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = parse_timeout)]
    pub timeout: Duration,
}

impl SourceArgs {
    /// Whether a source flag was given (advise then reads no report).
    pub fn given(&self) -> bool {
        self.metrics.is_some() || self.prometheus.is_some() || !self.logs.given.is_empty()
    }

    /// The source the flags name.
    fn source(&self) -> Result<Box<dyn Source>, CliError> {
        if let Some(metrics) = &self.metrics {
            Ok(Box::new(Scrape {
                source: metrics.clone(),
                since: self.since.clone(),
            }))
        } else if let Some(url) = &self.prometheus {
            Ok(Box::new(PrometheusQuery {
                url: url.clone(),
                window: self.window.clone().unwrap_or_default(),
                selector: self.selector.clone(),
                at: self.at.clone(),
            }))
        } else if let Some((source, path)) = self.logs.given.first() {
            Ok(Box::new(LogFile {
                source,
                path: path.clone(),
                by_request: self.by_request,
            }))
        } else {
            let mut flags = vec!["--metrics", "--prometheus"];
            flags.extend(LOG_SOURCES.iter().map(|s| s.flag));
            let last = flags.pop().expect("several");
            Err(CliError::new(format!(
                "give {} or {last}",
                flags.join(", ")
            )))
        }
    }
}

/// The flag of each row of [`LOG_SOURCES`], `FILE` (`-` for standard
/// input), and the files given. Every one conflicts with the report, the
/// other sources and each other: one source per run.
#[derive(Debug, Default)]
pub struct LogArgs {
    /// The sources given, with their files (one at most, by the conflicts).
    pub given: Vec<(&'static LogSource, PathBuf)>,
}

impl clap::Args for LogArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        LOG_SOURCES.iter().fold(cmd, |cmd, s| {
            let others = LOG_SOURCES
                .iter()
                .filter(|o| o.name != s.name)
                .map(|o| o.name);
            cmd.arg(
                clap::Arg::new(s.name)
                    .long(&s.flag[2..])
                    .value_name("FILE")
                    .value_parser(clap::value_parser!(PathBuf))
                    .action(clap::ArgAction::Set)
                    .help(s.help)
                    .conflicts_with_all(
                        ["report", "metrics", "prometheus"]
                            .into_iter()
                            .chain(others),
                    ),
            )
        })
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

impl clap::FromArgMatches for LogArgs {
    fn from_arg_matches(m: &clap::ArgMatches) -> Result<Self, clap::Error> {
        Self::from_arg_matches_mut(&mut m.clone())
    }

    fn from_arg_matches_mut(m: &mut clap::ArgMatches) -> Result<Self, clap::Error> {
        let given = LOG_SOURCES
            .iter()
            .filter_map(|s| m.remove_one::<PathBuf>(s.name).map(|path| (s, path)))
            .collect();
        Ok(Self { given })
    }

    fn update_from_arg_matches(&mut self, m: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

/// An engine whose counters `advise` reads (`--engine`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineFlag {
    /// vLLM's four vllm:spec_decode_* counters (a by-draft-length family
    /// beside them is ignored).
    Vllm,
    /// llama.cpp's server: vLLM's four counters under `llamacpp:` (since
    /// llama.cpp PR #26389), positions exported as they are reached.
    Llamacpp,
    /// mistral.rs's mistralrs_speculative_* counters.
    Mistralrs,
    /// This crate's families, under any prefix (the by-draft-length family
    /// required).
    Specdec,
    /// TensorRT-LLM's drafted and accepted counts per position
    /// (trtllm_spec_decode_{drafted,accepted}_tokens_total{token_position}).
    Trtllm,
    /// SGLang's gauges (sglang:spec_accept_length, sglang:spec_accept_rate):
    /// means only, an error that says what to read instead.
    Sglang,
}

impl From<EngineFlag> for Engine {
    fn from(e: EngineFlag) -> Self {
        match e {
            EngineFlag::Vllm => Engine::Vllm,
            EngineFlag::Llamacpp => Engine::Llamacpp,
            EngineFlag::Mistralrs => Engine::Mistralrs,
            EngineFlag::Specdec => Engine::Specdec,
            EngineFlag::Trtllm => Engine::Trtllm,
            EngineFlag::Sglang => Engine::Sglang,
        }
    }
}

/// The flag of `advise` that gives a setting the readers name.
pub fn flag(s: Setting) -> &'static str {
    match s {
        Setting::Metrics => "--metrics",
        Setting::Since => "--since",
        Setting::Prometheus => "--prometheus",
        Setting::Window => "--window",
        Setting::Selector => "--selector",
        Setting::At => "--at",
        Setting::By => "--by",
        Setting::Prefix => "--prefix",
        Setting::Engine => "--engine",
        Setting::MaxDraftLen => "--max-draft-len",
        Setting::MaxBytes => "--max-bytes",
        Setting::Timeout => "--timeout",
        Setting::Log(name) => LogSource::named(name).map_or(name, |s| s.flag),
        Setting::ByRequest => "--by-request",
        other => other.name(),
    }
}

/// A reader's message with the settings it names as `advise`'s flags.
fn flagged(m: &specdec_ingest::Message) -> String {
    m.naming(&flag).to_string()
}

fn parse_label(s: &str) -> Result<String, String> {
    let mut chars = s.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(s.to_owned())
    } else {
        Err(format!(
            "{} is not a label name ([a-zA-Z_][a-zA-Z0-9_]*)",
            excerpt(s)
        ))
    }
}

fn parse_timeout(s: &str) -> Result<Duration, String> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|t| t.is_finite() && *t > 0.0 && *t <= 86_400.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("{} is not a number of seconds in (0, 86400]", excerpt(s)))
}

/// Reads the counters the flags name and advises on them.
pub fn run(
    src: &SourceArgs,
    advisor: &Advisor,
    cost: &StepCost,
    max_draft_len: Option<usize>,
    format: Format,
) -> Result<ExitCode, CliError> {
    let settings = src.settings(max_draft_len)?;
    let source = src.source()?;
    let read = match read_source(&*source, &settings) {
        Ok(read) => read,
        Err(SourceError::Error(e)) => return Err(CliError::new(flagged(&e))),
        Err(SourceError::NotIdentified(msg)) => {
            let _ = writeln!(io::stderr().lock(), "error: {}", sanitize(&flagged(&msg)));
            return Ok(ExitCode::from(NOT_IDENTIFIED));
        }
    };
    let Read {
        counted,
        reconstruction,
        by,
        read_as,
        requests,
        exact_from,
    } = read;
    let read_as = read_as.unwrap_or_else(|| {
        format!(
            "{} counters: {}",
            counted.families.engine.name(),
            counted.families.all().join(", ")
        )
    });
    let mut warnings = Vec::new();
    let groups = counted
        .groups
        .iter()
        .map(|group| advise_group(group, &counted, advisor, cost, &mut warnings))
        .collect::<Result<Vec<_>, _>>()?;
    let out = EngineAdvice {
        source: counted.source.clone(),
        engine: counted.families.engine,
        prefix: counted.families.prefix.clone(),
        read_as,
        by,
        reconstruction,
        credible_level: advisor.credible_level(),
        groups,
        requests,
        exact_from,
    };
    print(&out, cost, format, &warnings)
}

/// [`specdec_ingest::read`], with the note for a person at a terminal
/// that standard input is read.
fn read_source(source: &dyn Source, settings: &Settings) -> Result<Read, SourceError> {
    let applies = source
        .reads_only()
        .is_none_or(|(engines, _, _)| settings.engine.is_none_or(|e| engines.contains(&e)));
    if let Some(what) = source.reads_stdin().filter(|_| applies) {
        note_reading_stdin(what);
    }
    specdec_ingest::read(source, settings)
}

impl SourceArgs {
    /// The settings every source reads with; `--by` an index label is an
    /// error.
    fn settings(&self, max_draft_len: Option<usize>) -> Result<Settings, CliError> {
        if is_index_label(&self.by) {
            let index = &self.by;
            return Err(CliError::new(format!(
                "--by {index}: {index} is an index label (it numbers the draft positions or buckets within one engine's families), not a label that tells engines apart; group by a label such as model_name, engine, instance or job"
            )));
        }
        Ok(Settings {
            limits: Limits {
                timeout: self.timeout,
                max_bytes: self.max_bytes,
            },
            engine: self.engine.map(Engine::from),
            by: self.by.clone(),
            max_draft_len,
            prefix: self.prefix.clone(),
        })
    }
}

/// One group's advice, or its bounds; the recommendation's warnings are
/// added to `warnings`, named by the group.
fn advise_group(
    group: &Group,
    counted: &Counted,
    advisor: &Advisor,
    cost: &StepCost,
    warnings: &mut Vec<String>,
) -> Result<GroupAdvice, CliError> {
    let counters = &group.built.counters;
    let k = counters.max_draft_len();
    let name = group.selector();
    cost.check(k).map_err(|e| {
        CliError::new(format!(
            "--cost-table: {e}; K = {k} is the number of draft positions of {}",
            if name.is_empty() {
                counted.source.clone()
            } else {
                name.clone()
            }
        ))
    })?;
    let identified = counters
        .identify()
        .map_err(|e| CliError::new(format!("{}: {e}", counted.source)))?;
    let mut advice = GroupAdvice {
        labels: group.label.iter().cloned().collect(),
        max_draft_len: k,
        drafts: counters.drafts(),
        identified: Verdict::Exact,
        exact_because: None,
        notes: group.built.notes.iter().map(flagged).collect(),
        recommendation: None,
        versus_current: None,
        setting: None,
        never_drafted_above: k,
        extrapolation: None,
        bounds: None,
    };
    match identified {
        Identified::Exact {
            continuation,
            because,
        } => {
            advice.exact_because = Some(match because {
                Exactness::ByDraftLength => ExactBecause::ByDraftLength,
                _ => ExactBecause::SameLength,
            });
            let engine = counted.families.engine;
            for w in recommend(&mut advice, &continuation, engine, advisor, cost)? {
                warnings.push(if name.is_empty() {
                    w
                } else {
                    format!("{name}: {w}")
                });
            }
        }
        Identified::Bounds(b) => {
            advice.identified = Verdict::Bounds;
            advice.bounds = Some(position_bounds(&b, k));
        }
        _ => {
            return Err(CliError::new(
                "the library identified the counters in a way this command does not know",
            ));
        }
    }
    Ok(advice)
}

/// Fills in the advice on exact continuation counts: the recommendation,
/// how it compares with the current `K`, the engine's setting for it and
/// any extrapolation. Returns the recommendation's warnings.
fn recommend(
    advice: &mut GroupAdvice,
    continuation: &Continuation,
    engine: Engine,
    advisor: &Advisor,
    cost: &StepCost,
) -> Result<Vec<String>, CliError> {
    let k = advice.max_draft_len;
    let rec = advisor
        .recommend_continuation(continuation, cost)
        .map_err(|e| CliError::new(format!("--cost-table: {e}")))?;
    let versus = advisor
        .compare(continuation, cost, rec.draft_len, k)
        .map_err(|e| CliError::new(format!("--cost-table: {e}")))?;
    advice.versus_current = Some(Versus {
        draft_len: k,
        ratio: versus.ratio,
        interval: versus.interval,
        prob_better: versus.prob_better,
    });
    advice.setting = Some(engine.setting(rec.draft_len));
    match advisor.extrapolate(continuation, cost, MAX_MAX_DRAFT_LEN) {
        Ok(guess) => advice.extrapolation = guess,
        Err(_) => advice.notes.push(
            "a cost table covers 0..=K only, so no longer draft can be extrapolated; give --cost-linear to see one".into(),
        ),
    }
    let warnings = super::warnings(&rec, 0);
    advice.recommendation = Some(rec);
    Ok(warnings)
}

/// The bounds on each position's trials and rate, positions 1 to `k`.
fn position_bounds(b: &ContinuationBounds, k: usize) -> Vec<PositionBounds> {
    (1..=k)
        .filter_map(|i| {
            let at = b.at(i)?;
            let (s, lo, hi) = (at.successes, at.trials_min, at.trials_max);
            let rate = b.rate(i);
            Some(PositionBounds {
                position: i,
                successes: s,
                trials_min: lo,
                trials_max: hi,
                rate_min: rate.map(|r| r.0),
                rate_max: rate.map(|r| r.1),
            })
        })
        .collect()
}

/// Prints the advice on standard output, the warnings on standard error
/// and, when a group gives bounds only, that nothing was advised: the exit
/// status, [`NOT_IDENTIFIED`] then.
fn print(
    out: &EngineAdvice,
    cost: &StepCost,
    format: Format,
    warnings: &[String],
) -> Result<ExitCode, CliError> {
    let text = match format {
        Format::Json => json_line(out, "advice")?,
        _ => render::engine_advice::render(out, cost),
    };
    // Label values come from the endpoint: nothing in them may act on
    // the terminal, in the table, the JSON or a warning.
    let text = escape_hidden(&text);
    let written = write_stdout(text.as_bytes(), "advice");
    let mut err = io::stderr().lock();
    for w in warnings {
        let _ = writeln!(err, "warning: {}", escape_hidden(w));
    }
    let not_identified = out.groups.iter().any(|g| g.identified == Verdict::Bounds);
    if not_identified {
        let _ = writeln!(
            err,
            "error: not advised: the counters give bounds only (see the output); exit status {NOT_IDENTIFIED}"
        );
    }
    written?;
    Ok(if not_identified {
        ExitCode::from(NOT_IDENTIFIED)
    } else {
        ExitCode::SUCCESS
    })
}
