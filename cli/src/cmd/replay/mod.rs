//! `replay`: JSON Lines of verify steps into one engine-wide histogram.
//!
//! The reading thread reads one line at a time into a reused buffer, parses
//! it ([`specdec_ingest::steps`]) and checks each step against `K`, so that every
//! warning and error carries its line number whatever the number of workers.
//! Then either
//!
//! - without `--workers`, it records the steps itself into an owned
//!   [`AcceptanceHistogram`]; or
//! - with `--workers N`, it packs them into fixed-size batches sent over a
//!   bounded channel to N threads, each recording through its own
//!   [`Worker`] of one shared [`Recorder`]; the
//!   report is the recorder's snapshot once every worker is joined.
//!
//! Either way memory is bounded by the longest line, itself capped by
//! `--max-line-bytes`, plus, with workers, a fixed number of batches,
//! whatever the length of the input. The report is
//! the same byte for byte: each step lands in the same counter whichever
//! thread records it, and counts add up in any order.

mod diagnostics;

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::PathBuf;
use std::thread;

use crossbeam_channel::{Receiver, Sender};
use specdec_ingest::lines::LineError;
use specdec_ingest::steps::{Record, StepLine, StepReader, StepsError};
use specdec_metrics::{AcceptanceHistogram, ObserveError, Recorder, Worker};

use self::diagnostics::{Diagnostics, Source, stderr_is_terminal};
use super::output::{OutputArgs, output};
use crate::error::CliError;
use crate::flags::parse_max_draft_len;
use crate::format::{display_path, format_bytes};
use crate::io::{is_stdin, note_reading_stdin};

/// The flags of `replay`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The configured maximum draft length K (vLLM's num_spec_tokens), 1..=64.
    #[arg(long, value_name = "K", value_parser = parse_max_draft_len)]
    max_draft_len: usize,
    /// Record on N threads (1..=256), each with its own Worker of one shared
    /// Recorder; the report is byte for byte the same as without. Without
    /// it, the reading thread records the steps itself.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    workers: Option<u16>,
    /// Stop with exit status 2 at the first invalid step instead of
    /// counting it in num_rejected_observations, and at the first detailed
    /// report whose num_spec_tokens is not K instead of warning.
    #[arg(long)]
    strict: bool,
    /// Print at most N warnings of each kind (invalid steps; detailed
    /// reports whose num_spec_tokens is not K), then only their count.
    #[arg(long, value_name = "N", default_value_t = 10)]
    max_warnings: u64,
    /// The longest line accepted, in bytes (the line terminator not
    /// counted), with an optional suffix K, M or G (KiB, MiB, GiB). A longer
    /// line stops the run with exit status 2; memory stays bounded by a
    /// small multiple of this limit whatever the input.
    #[arg(long, value_name = "SIZE", default_value = "64MiB", value_parser = crate::flags::parse_size)]
    max_line_bytes: u64,
    #[command(flatten)]
    output: OutputArgs,
    /// The JSON Lines input; standard input when absent or "-".
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
}

/// Runs `replay`: the file (or standard input) into the report.
pub fn run(args: Args) -> Result<(), CliError> {
    let config = ReplayConfig {
        max_draft_len: args.max_draft_len,
        workers: args.workers.map(usize::from),
        strict: args.strict,
        max_warnings: args.max_warnings,
        max_line_bytes: args.max_line_bytes,
        progress: stderr_is_terminal(),
    };
    let hist = match args.file.as_deref() {
        Some(path) if !is_stdin(path) => {
            let name = display_path(path);
            let file =
                File::open(path).map_err(|e| CliError::new(format!("cannot open {name}: {e}")))?;
            let len = file
                .metadata()
                .ok()
                .filter(|m| m.is_file())
                .map(|m| m.len());
            let source = Source { name: &name, len };
            replay(BufReader::with_capacity(1 << 18, file), &source, &config)?
        }
        _ => {
            note_reading_stdin("JSON Lines");
            let stdin = io::stdin();
            let source = Source {
                name: "<stdin>",
                len: None,
            };
            let input = BufReader::with_capacity(1 << 18, stdin.lock());
            replay(input, &source, &config)?
        }
    };
    output(&hist, &args.output)
}

/// Steps per batch sent to a worker (64 KiB of packed steps).
const BATCH_STEPS: usize = 8192;

/// How `replay` runs.
#[derive(Clone, Debug)]
pub struct ReplayConfig {
    /// `K`, already validated.
    pub max_draft_len: usize,
    /// `None`: record on the reading thread; `Some(n)`: n worker threads.
    pub workers: Option<usize>,
    /// Stop at the first invalid step or report with another K instead of
    /// warning.
    pub strict: bool,
    /// Warnings of each kind printed one by one before only counting them.
    pub max_warnings: u64,
    /// The longest line accepted (terminator excluded).
    pub max_line_bytes: u64,
    /// Draw a progress line on standard error.
    pub progress: bool,
}

/// Replays `input` and returns the engine-wide histogram.
pub fn replay<R: BufRead>(
    input: R,
    source: &Source<'_>,
    config: &ReplayConfig,
) -> Result<AcceptanceHistogram, CliError> {
    let mut diag = Diagnostics::new(source, config.strict, config.max_warnings, config.progress);
    let result = match config.workers {
        None => {
            let mut hist = AcceptanceHistogram::new(config.max_draft_len).map_err(CliError::new)?;
            read_all(input, &mut hist, config, &mut diag).map(|()| hist)
        }
        Some(n) => replay_with_workers(input, n, config, &mut diag),
    };
    diag.finish(result.is_ok());
    result
}

fn replay_with_workers<R: BufRead>(
    input: R,
    workers: usize,
    config: &ReplayConfig,
    diag: &mut Diagnostics<'_>,
) -> Result<AcceptanceHistogram, CliError> {
    let max_draft_len = config.max_draft_len;
    let recorder = Recorder::new(max_draft_len).map_err(CliError::new)?;
    // Bounded both ways: at most 2N full batches wait for a worker, and
    // emptied batches come back for reuse instead of being reallocated.
    let (full_tx, full_rx) = crossbeam_channel::bounded::<Vec<u64>>(2 * workers);
    let (empty_tx, empty_rx) = crossbeam_channel::bounded::<Vec<u64>>(3 * workers + 1);
    let read = thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|i| {
                let (rx, back) = (full_rx.clone(), empty_tx.clone());
                let recorder = &recorder;
                thread::Builder::new()
                    .name(format!("replay-worker-{i}"))
                    .spawn_scoped(s, move || record_batches(&recorder.worker(), &rx, &back))
            })
            .collect::<Result<_, _>>()
            .map_err(|e| CliError::new(format!("cannot start a worker thread: {e}")))?;
        drop((full_rx, empty_tx));
        let mut sink = BatchSink {
            batch: Vec::with_capacity(BATCH_STEPS),
            full: full_tx,
            empty: empty_rx,
            max_draft_len,
        };
        let read = read_all(input, &mut sink, config, diag);
        if read.is_ok() {
            sink.flush();
        }
        drop(sink); // closes the channel: the workers drain it and return
        for h in handles {
            h.join()
                .map_err(|_| CliError::new("a worker thread panicked"))?;
        }
        read
    });
    // Every worker was joined (and its `Worker` dropped) before this
    // snapshot, so it holds every step sent.
    read.map(|()| recorder.snapshot())
}

/// A worker thread: records every batch it receives, hands the emptied
/// buffer back.
fn record_batches(worker: &Worker, full: &Receiver<Vec<u64>>, empty: &Sender<Vec<u64>>) {
    for mut batch in full {
        for &packed in &batch {
            match unpack(packed) {
                // Rejected steps were already reported by the reading thread
                // with their line number; here they are only counted, in
                // `num_rejected_observations`, as the library does.
                Packed::Step(k, a) => drop(worker.observe(k, a)),
                Packed::Undrafted => worker.observe_undrafted(),
                Packed::Scheduled(b) => drop(worker.observe_scheduled(b)),
            }
        }
        batch.clear();
        let _ = empty.try_send(batch);
    }
}

/// An undrafted step in a batch.
const UNDRAFTED: u64 = u64::MAX;

/// The high half of a packed scheduler step (and of [`UNDRAFTED`]): no
/// verify step packs to it.
const NOT_A_STEP: u64 = (u32::MAX as u64) << 32;

/// Packs a step into one word: `k` in the high half, `a` in the low half.
/// Values too large for 32 bits saturate, which keeps every valid step
/// exact (`k <= 64`) and every invalid one invalid (`k > K` stays above `K`,
/// `a > k` stays above `k`); `k` stops one short of `u32::MAX` so that no
/// step packs to [`UNDRAFTED`] or a scheduler step.
#[inline]
fn pack(drafted: u64, accepted: u64) -> u64 {
    let k = drafted.min(u64::from(u32::MAX - 1));
    let a = accepted.min(u64::from(u32::MAX));
    (k << 32) | a
}

/// Packs a scheduler step: [`NOT_A_STEP`] in the high half, the budget in
/// the low half, saturating one short of `u32::MAX` (so never
/// [`UNDRAFTED`]), which keeps every valid budget (`<= 64`) exact and every
/// invalid one invalid.
#[inline]
fn pack_scheduled(budget: u64) -> u64 {
    NOT_A_STEP | budget.min(u64::from(u32::MAX - 1))
}

/// One entry of a batch, unpacked.
#[derive(Debug, PartialEq, Eq)]
enum Packed {
    Step(usize, usize),
    Undrafted,
    Scheduled(usize),
}

#[inline]
fn unpack(packed: u64) -> Packed {
    let low = (packed & 0xffff_ffff) as usize;
    match packed {
        UNDRAFTED => Packed::Undrafted,
        _ if packed & NOT_A_STEP == NOT_A_STEP => Packed::Scheduled(low),
        _ => Packed::Step((packed >> 32) as usize, low),
    }
}

/// `u64` from the input to the library's `usize`, saturating (which keeps an
/// invalid step invalid).
#[inline]
fn to_usize(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

/// Where the reading thread puts each step.
trait Sink {
    /// Records one step; an invalid one is counted as rejected and returned.
    fn step(&mut self, drafted: u64, accepted: u64) -> Result<(), ObserveError>;
    fn undrafted(&mut self);
    /// Records one scheduler step; a budget above `K` is counted as
    /// rejected and returned.
    fn scheduled(&mut self, budget: u64) -> Result<(), ObserveError>;
}

impl Sink for AcceptanceHistogram {
    #[inline]
    fn step(&mut self, drafted: u64, accepted: u64) -> Result<(), ObserveError> {
        self.observe(to_usize(drafted), to_usize(accepted))
    }
    #[inline]
    fn undrafted(&mut self) {
        self.observe_undrafted();
    }
    #[inline]
    fn scheduled(&mut self, budget: u64) -> Result<(), ObserveError> {
        self.observe_scheduled(to_usize(budget))
    }
}

struct BatchSink {
    batch: Vec<u64>,
    full: Sender<Vec<u64>>,
    empty: Receiver<Vec<u64>>,
    max_draft_len: usize,
}

impl BatchSink {
    #[inline]
    fn push(&mut self, packed: u64) {
        self.batch.push(packed);
        if self.batch.len() == BATCH_STEPS {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let next = self
            .empty
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(BATCH_STEPS));
        let full = std::mem::replace(&mut self.batch, next);
        // Blocks while every worker is busy and the channel is full: this is
        // what bounds memory. It fails only if every worker is gone, which
        // happens only when one panicked; joining reports that.
        let _ = self.full.send(full);
    }
}

impl Sink for BatchSink {
    #[inline]
    fn step(&mut self, drafted: u64, accepted: u64) -> Result<(), ObserveError> {
        self.push(pack(drafted, accepted));
        ObserveError::check(self.max_draft_len, to_usize(drafted), to_usize(accepted))
    }
    #[inline]
    fn undrafted(&mut self) {
        self.push(UNDRAFTED);
    }
    #[inline]
    fn scheduled(&mut self, budget: u64) -> Result<(), ObserveError> {
        self.push(pack_scheduled(budget));
        ObserveError::check_scheduled(self.max_draft_len, to_usize(budget))
    }
}

/// Reads every line of `input` into `sink`. Stops at the first malformed
/// line, the first line longer than `config.max_line_bytes` (or, with
/// `--strict`, the first invalid step).
fn read_all<R: BufRead, S: Sink>(
    input: R,
    sink: &mut S,
    config: &ReplayConfig,
    diag: &mut Diagnostics<'_>,
) -> Result<(), CliError> {
    let mut lines = StepReader::new(input, config.max_line_bytes);
    loop {
        let StepLine {
            number,
            len,
            record,
        } = match lines.next_line() {
            Ok(Some(line)) => line,
            Ok(None) => return Ok(()),
            Err(e) => return Err(steps_error(diag.source.name, e)),
        };
        diag.bytes += len as u64;
        apply(record, number, sink, config, diag)?;
        if number % 1024 == 0 {
            diag.tick(number);
        }
    }
}

/// Feeds the record of line `line_no` to `sink`, counting its steps and
/// its rejected observations in `diag`.
#[inline]
fn apply<S: Sink>(
    record: Record<'_>,
    line_no: u64,
    sink: &mut S,
    config: &ReplayConfig,
    diag: &mut Diagnostics<'_>,
) -> Result<(), CliError> {
    match record {
        Record::Step { drafted, accepted } => {
            diag.steps += 1;
            if let Err(e) = sink.step(drafted, accepted) {
                diag.rejected(line_no, None, e)?;
            }
        }
        Record::Undrafted => {
            diag.steps += 1;
            sink.undrafted();
        }
        Record::Scheduled { budget } => {
            diag.steps += 1;
            if let Err(e) = sink.scheduled(budget) {
                diag.rejected(line_no, None, e)?;
            }
        }
        Record::Detailed {
            drafted,
            accepted,
            num_spec_tokens,
        } => {
            if let Some(report_k) = num_spec_tokens
                && report_k != config.max_draft_len as u64
            {
                diag.other_k(line_no, report_k, config.max_draft_len)?;
            }
            diag.steps += drafted.len() as u64;
            for (i, (&k, &a)) in drafted.iter().zip(accepted).enumerate() {
                if let Err(e) = sink.step(k, a) {
                    diag.rejected(line_no, Some(i), e)?;
                }
            }
        }
        Record::Blank => {}
    }
    Ok(())
}

/// The message of a line the input `source` could not give, naming the
/// line limit by its flag.
#[cold]
fn steps_error(source: &str, e: StepsError) -> CliError {
    CliError::new(match e {
        StepsError::Line(LineError::TooLong { line, max }) => format!(
            "{source}: line {line} is longer than {} (--max-line-bytes); the rest of the input was not read",
            format_bytes(max as u64)
        ),
        e => format!("{source}: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_keeps_valid_steps_and_invalidity() {
        for k in 0..=64u64 {
            for a in 0..=k {
                assert_eq!(unpack(pack(k, a)), Packed::Step(k as usize, a as usize));
            }
            assert_eq!(unpack(pack_scheduled(k)), Packed::Scheduled(k as usize));
        }
        for b in [
            65,
            1 << 31,
            u64::from(u32::MAX) - 1,
            u64::from(u32::MAX),
            1 << 40,
            u64::MAX,
        ] {
            let p = pack_scheduled(b);
            assert_ne!(p, UNDRAFTED, "{b}");
            match unpack(p) {
                Packed::Scheduled(packed) => assert!(packed > 64, "{b} packed to {packed}"),
                other => panic!("{b} unpacked as {other:?}"),
            }
        }
        let valid = |p: Packed| match p {
            Packed::Step(k, a) => a <= k && k <= 64,
            other => panic!("a step unpacked as {other:?}"),
        };
        for (k, a) in [
            (u64::MAX, 0),
            (u64::MAX, u64::MAX),
            (0, u64::MAX),
            (64, 1 << 40),
            (u64::from(u32::MAX), 0),
            (65, 0),
            (3, 4),
        ] {
            let p = pack(k, a);
            assert_ne!(p, UNDRAFTED);
            assert!(!valid(unpack(p)), "({k}, {a})");
        }
        assert_eq!(unpack(UNDRAFTED), Packed::Undrafted);
    }
}
