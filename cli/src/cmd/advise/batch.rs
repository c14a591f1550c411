//! `advise batch`: one report and one step cost per batch-size bucket into
//! the library's [`BatchTable`], printed as the schedules vLLM and
//! TensorRT-LLM read.
//!
//! Each `--bucket` is `START-END:linear:BASE,PER_TOKEN:REPORT` or
//! `START-END:table:C0,...,CK:REPORT`. The report comes last, so that a path
//! may hold `:` (the batch sizes and the cost cannot). Buckets are given in
//! order of batch size, from 1, without gaps or overlaps; the library checks
//! that and names the bucket that is wrong. Every report's `K` must be
//! `--max-draft-len` and every cost table must have `K + 1` entries, as for
//! one report.
//!
//! Standard output: `--format json` (the default) is one JSON object on one
//! line: `max_draft_len`, `buckets` (per bucket `start_bs`, `end_bs` and the
//! [`Recommendation`](specdec_metrics::Recommendation)), `vllm` (the
//! [`VllmSchedule`] keys) and `trtllm` (the [`TrtllmSchedule`] keys, or
//! `null` with a warning when TensorRT-LLM cannot hold the table).
//! `--format vllm` and `--format trtllm` print only that engine's keys (for
//! TensorRT-LLM, an error when it cannot hold the table); `--format table`
//! one row per bucket and both engines' keys. The warnings of one report
//! are given per bucket, naming it.

use std::ffi::{OsStr, OsString};
use std::io::{self, Write};
use std::path::PathBuf;

use clap::builder::{OsStringValueParser, TypedValueParser};

use serde::Serialize;
use specdec_metrics::{
    BatchBucket, BatchTable, BatchTableError, BucketSpan, CostError, StepCost, TrtllmSchedule,
    VllmSchedule,
};

use super::{AdvisorArgs, warnings};
use crate::error::CliError;
use crate::flags::Format;
use crate::format::excerpt;
use crate::io::{input_name, read_report, stdin_at_most_once, write_stdout};
use crate::render::{self, json_line};

/// The values of `--format`.
const BATCH_FORMATS: &[Format] = &[Format::Json, Format::Table, Format::Vllm, Format::Trtllm];

/// The flags of `advise batch`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    advisor: AdvisorArgs,
    /// One bucket, repeated in order of batch size from 1 without gaps:
    /// START-END:linear:BASE,PER_TOKEN:REPORT or
    /// START-END:table:C0,...,CK:REPORT (batch sizes START..=END, the step
    /// cost there, the report of the steps taken there; the report comes
    /// last, so its path may hold ':'). Example: 1-8:linear:1,0.05:small.json.
    #[arg(long, required = true, value_name = "START-END:COST:REPORT", value_parser = OsStringValueParser::new().try_map(parse_bucket), allow_hyphen_values = true)]
    bucket: Vec<BucketArg>,
    /// What standard output carries: every bucket's recommendation and
    /// both engines' schedules as one line of JSON, a table for people,
    /// or one engine's schedule alone (vllm, trtllm).
    #[arg(long, value_name = "FORMAT", default_value = "json", value_parser = Format::parser(BATCH_FORMATS))]
    format: Format,
}

/// One `--bucket` value, parsed.
#[derive(Clone, Debug)]
pub struct BucketArg {
    start_bs: usize,
    end_bs: usize,
    cost: StepCost,
    report: PathBuf,
}

impl BucketArg {
    /// The report as messages and the table name it: `<stdin>` for `-`,
    /// the path escaped otherwise.
    fn name(&self) -> String {
        input_name(&self.report)
    }
}

const BUCKET_SYNTAX: &str =
    "START-END:linear:BASE,PER_TOKEN:REPORT or START-END:table:C0,...,CK:REPORT";

/// Parses `START-END:linear:BASE,PER_TOKEN:REPORT` or
/// `START-END:table:C0,...,CK:REPORT`. The batch sizes and the cost are
/// text; the report, everything after the third `:`, is a path, whatever
/// bytes it holds (as `REPORT` of `advise` is).
pub fn parse_bucket(value: OsString) -> Result<BucketArg, String> {
    let shown = || excerpt(&value.to_string_lossy());
    let bytes = os_bytes(&value)
        .ok_or_else(|| format!("{} is not valid Unicode; expected {BUCKET_SYNTAX}", shown()))?;
    let parts: Vec<&[u8]> = bytes.splitn(4, |&b| b == b':').collect();
    let [range, kind, values, report] = parts[..] else {
        return Err(format!(
            "{} has {} part{} separated by ':'; expected {BUCKET_SYNTAX}",
            shown(),
            parts.len(),
            if parts.len() == 1 { "" } else { "s" }
        ));
    };
    let text = |field: &'_ [u8], what: &str, verb: &str| {
        std::str::from_utf8(field).map(str::to_owned).map_err(|_| {
            format!(
                "{what} {} {verb} not UTF-8 text; only the report, after the third ':', may be any path",
                excerpt(&String::from_utf8_lossy(field))
            )
        })
    };
    let range = text(range, "the batch sizes", "are")?;
    let kind = text(kind, "the cost kind", "is")?;
    let values = text(values, "the cost values", "are")?;
    let report = path_from_bytes(report);
    parse_fields(&range, &kind, &values, report)
}

/// The bytes of a command-line value: on unix any (`OsStrExt`); elsewhere
/// those of valid Unicode only.
#[cfg(unix)]
fn os_bytes(value: &OsStr) -> Option<&[u8]> {
    use std::os::unix::ffi::OsStrExt;
    Some(value.as_bytes())
}

#[cfg(not(unix))]
fn os_bytes(value: &OsStr) -> Option<&[u8]> {
    value.to_str().map(str::as_bytes)
}

/// The path of the bytes after a bucket's third `:`.
#[cfg(unix)]
fn path_from_bytes(bytes: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    PathBuf::from(OsStr::from_bytes(bytes))
}

#[cfg(not(unix))]
fn path_from_bytes(bytes: &[u8]) -> PathBuf {
    // The bytes of valid Unicode cut at an ASCII ':' are valid Unicode.
    PathBuf::from(String::from_utf8_lossy(bytes).into_owned())
}

/// The bucket of its batch sizes, cost kind, cost values and report.
fn parse_fields(
    range: &str,
    kind: &str,
    values: &str,
    report: PathBuf,
) -> Result<BucketArg, String> {
    let (start, end) = range.split_once('-').ok_or_else(|| {
        format!(
            "the batch sizes {} are not START-END (e.g. 1-8); expected {BUCKET_SYNTAX}",
            excerpt(range)
        )
    })?;
    let batch_size = |t: &str| {
        t.trim()
            .parse::<usize>()
            .map_err(|_| format!("{} is not a batch size (a whole number)", excerpt(t)))
    };
    let (start_bs, end_bs) = (batch_size(start)?, batch_size(end)?);
    let cost = match kind.trim() {
        "linear" => super::parse_cost_linear(values)?,
        "table" => super::parse_cost_table(values)?,
        other => {
            return Err(format!(
                "the cost kind {} is neither linear nor table; expected {BUCKET_SYNTAX}",
                excerpt(other)
            ));
        }
    };
    if report.as_os_str().is_empty() {
        return Err(format!("no report is given; expected {BUCKET_SYNTAX}"));
    }
    Ok(BucketArg {
        start_bs,
        end_bs,
        cost,
        report,
    })
}

/// What `--format json` prints.
#[derive(Serialize)]
struct Output<'a> {
    #[serde(flatten)]
    table: &'a BatchTable,
    vllm: VllmSchedule,
    trtllm: Option<TrtllmSchedule>,
}

/// Runs `advise batch`.
pub fn run(args: Args) -> Result<(), CliError> {
    let advisor = &args.advisor.advisor()?;
    let buckets = read_buckets(&args)?;
    let table = BatchTable::recommend(advisor, &buckets).map_err(|e| match failing_bucket(&e) {
        Some(i) => with_report(&e, &args.bucket[i], None),
        None => CliError::new(e),
    })?;
    let trtllm = table.trtllm_config();

    let mut notes = Vec::new();
    let text = match args.format {
        Format::Json => {
            if let Err(e) = &trtllm {
                notes.push(format!("TensorRT-LLM: {e}; \"trtllm\" is null"));
            }
            let out = Output {
                table: &table,
                vllm: table.vllm_config(),
                trtllm: trtllm.clone().ok(),
            };
            json_line(&out, "advice")?
        }
        Format::Vllm => json_line(&table.vllm_config(), "advice")?,
        Format::Trtllm => json_line(&trtllm.clone().map_err(CliError::new)?, "advice")?,
        Format::Table => {
            let reports: Vec<String> = args.bucket.iter().map(BucketArg::name).collect();
            render::batch_table::render(&table, &reports, &trtllm, advisor)?
        }
    };
    let written = write_stdout(text.as_bytes(), "advice");
    let mut err = io::stderr().lock();
    for ((entry, bucket), arg) in table.entries().iter().zip(&buckets).zip(&args.bucket) {
        for w in warnings(
            &entry.recommendation,
            bucket.histogram.num_rejected_observations(),
        ) {
            let _ = writeln!(
                err,
                "warning: {}: {w}",
                bucket_name(entry.start_bs, entry.end_bs, arg)
            );
        }
    }
    for n in notes {
        let _ = writeln!(err, "warning: {n}");
    }
    Ok(written?)
}

/// Checks every bucket's cost against `K` and reads its report, whose `K`
/// must be `--max-draft-len`, or, without it, the first report's. Costs
/// are checked before any report is read when `--max-draft-len` gives `K`,
/// right after the first report otherwise.
fn read_buckets(args: &Args) -> Result<Vec<BatchBucket>, CliError> {
    stdin_at_most_once(args.bucket.iter().map(|b| b.report.as_path()), "bucket")?;
    let given = args.advisor.max_draft_len;
    if let Some(max) = given {
        check_costs(&args.bucket, max, None)?;
    }
    // Without --max-draft-len: K, and the report it comes from.
    let mut first: Option<(usize, String, &BucketArg)> = None;
    let mut buckets = Vec::with_capacity(args.bucket.len());
    for b in &args.bucket {
        let name = b.name();
        let hist = read_report(&b.report, &name)?;
        let found = hist.max_draft_len();
        match (given, &first) {
            (Some(max), _) if found != max => {
                return Err(CliError::new(format!(
                    "{name} (bucket {}-{}): num_spec_tokens (K) is {found} but --max-draft-len is {max}; give the reports' K (and, with a cost table, one cost per draft length 0..=K)",
                    b.start_bs, b.end_bs
                )));
            }
            (Some(_), _) => {}
            (None, None) => {
                check_costs(&args.bucket, found, Some(&name))?;
                first = Some((found, name, b));
            }
            (None, Some((max, first_name, f))) if found != *max => {
                return Err(CliError::new(format!(
                    "{name} (bucket {}-{}): num_spec_tokens (K) is {found} but {first_name} (bucket {}-{}) has {max}; every bucket's report must have the same K",
                    b.start_bs, b.end_bs, f.start_bs, f.end_bs
                )));
            }
            (None, Some(_)) => {}
        }
        buckets.push(BatchBucket::new(b.start_bs, b.end_bs, hist, b.cost.clone()));
    }
    Ok(buckets)
}

/// Whether every bucket's cost fits `K = max`; `from` names the report
/// whose `num_spec_tokens` `K` is, when `--max-draft-len` did not give it.
fn check_costs(buckets: &[BucketArg], max: usize, from: Option<&str>) -> Result<(), CliError> {
    for (index, b) in buckets.iter().enumerate() {
        b.cost.check(max).map_err(|error| {
            with_report(&cost_error(index, b, error), b, from.map(|f| (max, f)))
        })?;
    }
    Ok(())
}

/// The message for bucket `index`'s cost, as the library's
/// [`BatchTableError`] words it: `bucket 2 (batch sizes 5-8): <error>`.
fn cost_error(index: usize, b: &BucketArg, error: CostError) -> String {
    let bucket = BucketSpan {
        index,
        start_bs: b.start_bs,
        end_bs: b.end_bs,
    };
    format!("{bucket}: {error}")
}

/// The position of the bucket a library error is about (the one place
/// that asks a [`BatchTableError`]).
fn failing_bucket(e: &BatchTableError) -> Option<usize> {
    e.index()
}

/// `msg` about bucket `b`, followed by its report, and by where `K` came
/// from when no `--max-draft-len` gave it.
fn with_report(
    msg: &dyn std::fmt::Display,
    b: &BucketArg,
    k_from: Option<(usize, &str)>,
) -> CliError {
    let report = b.name();
    CliError::new(match k_from {
        None => format!("{msg} (report {report})"),
        Some((max, name)) => {
            format!("{msg} (report {report}; K = {max} is the num_spec_tokens of {name})")
        }
    })
}

/// `bucket 1-8 (small.json)`.
fn bucket_name(start: usize, end: usize, arg: &BucketArg) -> String {
    format!("bucket {start}-{end} ({})", arg.name())
}
