//! `replay`: JSON Lines of verify steps into one engine-wide histogram.
//!
//! The reading thread reads one line at a time into a reused buffer, parses
//! it ([`crate::input`]) and checks each step against `K`, so that every
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
//! Either way memory is bounded by the longest line plus, with workers, a
//! fixed number of batches, whatever the length of the input. The report is
//! the same byte for byte: each step lands in the same counter whichever
//! thread records it, and counts add up in any order.

use std::io::{self, BufRead, IsTerminal, Write};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use specdec_metrics::{AcceptanceHistogram, ObserveError, Recorder, Worker};

use crate::CliError;
use crate::input::{LineParser, Record};

/// Steps per batch sent to a worker (64 KiB of packed steps).
const BATCH_STEPS: usize = 8192;

/// How `replay` runs.
#[derive(Clone, Debug)]
pub struct ReplayConfig {
    /// `K`, already validated.
    pub max_draft_len: usize,
    /// `None`: record on the reading thread; `Some(n)`: n worker threads.
    pub workers: Option<usize>,
    /// Stop at the first invalid step instead of counting it.
    pub strict: bool,
    /// Rejected steps warned about one by one before only counting them.
    pub max_warnings: u64,
    /// Draw a progress line on standard error.
    pub progress: bool,
}

/// Where the input comes from, for messages and progress.
pub struct Source<'a> {
    /// Shown in messages: the path, or `<stdin>`.
    pub name: &'a str,
    /// Total bytes when known (a regular file), for a percentage.
    pub len: Option<u64>,
}

/// Replays `input` and returns the engine-wide histogram.
pub fn replay<R: BufRead>(
    input: R,
    source: &Source<'_>,
    config: &ReplayConfig,
) -> Result<AcceptanceHistogram, CliError> {
    let mut diag = Diagnostics::new(source, config);
    let result = match config.workers {
        None => {
            let mut hist = AcceptanceHistogram::new(config.max_draft_len).map_err(CliError::new)?;
            read_all(input, &mut hist, &mut diag).map(|()| hist)
        }
        Some(n) => replay_with_workers(input, n, config.max_draft_len, &mut diag),
    };
    diag.finish(result.is_ok());
    result
}

fn replay_with_workers<R: BufRead>(
    input: R,
    workers: usize,
    max_draft_len: usize,
    diag: &mut Diagnostics<'_>,
) -> Result<AcceptanceHistogram, CliError> {
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
        let read = read_all(input, &mut sink, diag);
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
                Some((k, a)) => drop(worker.observe(k, a)),
                None => worker.observe_undrafted(),
            }
        }
        batch.clear();
        let _ = empty.try_send(batch);
    }
}

/// An undrafted step in a batch.
const UNDRAFTED: u64 = u64::MAX;

/// Packs a step into one word: `k` in the high half, `a` in the low half.
/// Values too large for 32 bits saturate, which keeps every valid step
/// exact (`k <= 64`) and every invalid one invalid (`k > K` stays above `K`,
/// `a > k` stays above `k`); `k` stops one short of `u32::MAX` so that no
/// step packs to [`UNDRAFTED`].
#[inline]
fn pack(drafted: u64, accepted: u64) -> u64 {
    let k = drafted.min(u64::from(u32::MAX - 1));
    let a = accepted.min(u64::from(u32::MAX));
    (k << 32) | a
}

#[inline]
fn unpack(packed: u64) -> Option<(usize, usize)> {
    (packed != UNDRAFTED).then_some(((packed >> 32) as usize, (packed & 0xffff_ffff) as usize))
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
}

/// Reads every line of `input` into `sink`. Stops at the first malformed
/// line (or, with `--strict`, the first invalid step).
fn read_all<R: BufRead, S: Sink>(
    mut input: R,
    sink: &mut S,
    diag: &mut Diagnostics<'_>,
) -> Result<(), CliError> {
    let mut line = Vec::with_capacity(256);
    let mut parser = LineParser::new();
    let mut line_no: u64 = 0;
    loop {
        line.clear();
        let n = input.read_until(b'\n', &mut line).map_err(|e| {
            CliError::new(format!(
                "{}: read error after line {line_no}: {e}",
                diag.source.name
            ))
        })?;
        if n == 0 {
            return Ok(());
        }
        line_no += 1;
        diag.bytes += n as u64;
        match parser.parse(&line) {
            Ok(Record::Step { drafted, accepted }) => {
                diag.steps += 1;
                if let Err(e) = sink.step(drafted, accepted) {
                    diag.rejected(line_no, None, e)?;
                }
            }
            Ok(Record::Undrafted) => {
                diag.steps += 1;
                sink.undrafted();
            }
            Ok(Record::Detailed { drafted, accepted }) => {
                diag.steps += drafted.len() as u64;
                for (i, (&k, &a)) in drafted.iter().zip(accepted).enumerate() {
                    if let Err(e) = sink.step(k, a) {
                        diag.rejected(line_no, Some(i), e)?;
                    }
                }
            }
            Ok(Record::Blank) => {}
            Err(e) => {
                return Err(CliError::new(format!(
                    "{}: line {line_no}: {e}",
                    diag.source.name
                )));
            }
        }
        if line_no % 1024 == 0 {
            diag.tick(line_no);
        }
        if line.capacity() > 1 << 20 {
            // Do not keep a huge buffer after one huge line.
            line = Vec::with_capacity(256);
        }
    }
}

/// Everything written to standard error during a replay: warnings about
/// rejected steps (the first few, then a count) and the progress line.
struct Diagnostics<'a> {
    source: &'a Source<'a>,
    strict: bool,
    max_warnings: u64,
    warned: u64,
    rejected: u64,
    steps: u64,
    bytes: u64,
    progress: Option<Progress>,
}

impl<'a> Diagnostics<'a> {
    fn new(source: &'a Source<'a>, config: &ReplayConfig) -> Self {
        Self {
            source,
            strict: config.strict,
            max_warnings: config.max_warnings,
            warned: 0,
            rejected: 0,
            steps: 0,
            bytes: 0,
            progress: config.progress.then(Progress::new),
        }
    }

    /// A well-formed but invalid step at `line` (step `index` of a detailed
    /// report): an error with `--strict`, otherwise a warning.
    #[cold]
    fn rejected(
        &mut self,
        line: u64,
        index: Option<usize>,
        e: ObserveError,
    ) -> Result<(), CliError> {
        let at = match index {
            None => format!("{}: line {line}", self.source.name),
            Some(i) => format!(
                "{}: line {line} (detailed report, step index {i})",
                self.source.name
            ),
        };
        if self.strict {
            return Err(CliError::new(format!("{at}: {e} (--strict)")));
        }
        self.rejected += 1;
        if self.warned < self.max_warnings {
            self.warned += 1;
            self.clear_progress();
            let _ = writeln!(
                io::stderr(),
                "warning: {at}: {e}; counted in num_rejected_observations"
            );
        }
        Ok(())
    }

    fn tick(&mut self, lines: u64) {
        if let Some(p) = &mut self.progress {
            p.tick(lines, self.steps, self.bytes, self.source.len);
        }
    }

    fn clear_progress(&mut self) {
        if let Some(p) = &mut self.progress {
            p.clear();
        }
    }

    /// Clears the progress line and sums up the warnings not shown.
    fn finish(&mut self, ok: bool) {
        self.clear_progress();
        if ok && self.rejected > self.warned {
            let _ = writeln!(
                io::stderr(),
                "warning: {} more rejected observations not shown ({} in all, all counted in num_rejected_observations)",
                self.rejected - self.warned,
                self.rejected
            );
        }
    }
}

/// A one-line progress indicator, redrawn at most four times a second.
/// Only ever created when standard error is a terminal.
struct Progress {
    start: Instant,
    last: Instant,
    drawn: bool,
}

impl Progress {
    fn new() -> Self {
        let now = Instant::now();
        Self {
            start: now,
            last: now,
            drawn: false,
        }
    }

    fn tick(&mut self, lines: u64, steps: u64, bytes: u64, total: Option<u64>) {
        let now = Instant::now();
        if now.duration_since(self.last) < Duration::from_millis(250) {
            return;
        }
        self.last = now;
        let text = progress_text(lines, steps, bytes, total, now.duration_since(self.start));
        let mut err = io::stderr().lock();
        let _ = write!(err, "\r\x1b[2K{text}");
        let _ = err.flush();
        self.drawn = true;
    }

    fn clear(&mut self) {
        if self.drawn {
            let mut err = io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
            self.drawn = false;
        }
    }
}

/// `replay: 1,234,567 lines, 2,000,000 steps (5.1M steps/s) 42%`
fn progress_text(
    lines: u64,
    steps: u64,
    bytes: u64,
    total: Option<u64>,
    elapsed: Duration,
) -> String {
    let rate = steps as f64 / elapsed.as_secs_f64().max(1e-9);
    let mut s = format!(
        "replay: {} lines, {} steps ({:.1}M steps/s)",
        group_digits(lines),
        group_digits(steps),
        rate / 1e6
    );
    if let Some(total) = total.filter(|&t| t > 0) {
        s.push_str(&format!(
            " {:.0}%",
            (bytes as f64 / total as f64 * 100.0).min(100.0)
        ));
    }
    s
}

/// `1234567` as `1,234,567`.
pub fn group_digits(v: u64) -> String {
    let digits = v.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Whether to draw progress: only when standard error is a terminal.
pub fn stderr_is_terminal() -> bool {
    io::stderr().is_terminal()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packing_keeps_valid_steps_and_invalidity() {
        for k in 0..=64u64 {
            for a in 0..=k {
                assert_eq!(unpack(pack(k, a)), Some((k as usize, a as usize)));
            }
        }
        let valid = |(k, a): (usize, usize)| a <= k && k <= 64;
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
            assert!(!valid(unpack(p).unwrap()), "({k}, {a})");
        }
        assert_eq!(unpack(UNDRAFTED), None);
    }

    #[test]
    fn progress_line() {
        assert_eq!(group_digits(0), "0");
        assert_eq!(group_digits(999), "999");
        assert_eq!(group_digits(1000), "1,000");
        assert_eq!(group_digits(1_234_567), "1,234,567");
        assert_eq!(
            progress_text(10, 2_000_000, 50, Some(200), Duration::from_millis(400)),
            "replay: 10 lines, 2,000,000 steps (5.0M steps/s) 25%"
        );
        assert_eq!(
            progress_text(10, 0, 50, None, Duration::from_secs(1)),
            "replay: 10 lines, 0 steps (0.0M steps/s)"
        );
    }
}
