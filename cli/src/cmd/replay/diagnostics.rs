//! Everything `replay` writes to standard error besides the final error:
//! warnings (the first few of each kind, then a count) and the progress
//! line.

use std::fmt;
use std::io::{self, IsTerminal, Write};
use std::time::{Duration, Instant};

use specdec_metrics::ObserveError;

use crate::error::CliError;
use crate::format::group_digits;

/// Where the input comes from, for messages and progress.
pub struct Source<'a> {
    /// Shown in messages: the path, or `<stdin>`.
    pub name: &'a str,
    /// Total bytes when known (a regular file), for a percentage.
    pub len: Option<u64>,
}

/// Everything written to standard error during a replay: warnings (for
/// each kind, the first few, then a count) and the progress line.
pub struct Diagnostics<'a> {
    pub source: &'a Source<'a>,
    strict: bool,
    max_warnings: u64,
    /// Well-formed steps that no bucket can hold.
    rejected: Tally,
    /// Detailed reports whose own `num_spec_tokens` is not `K`.
    other_k: Tally,
    pub steps: u64,
    pub bytes: u64,
    progress: Option<Progress>,
}

impl<'a> Diagnostics<'a> {
    pub fn new(source: &'a Source<'a>, strict: bool, max_warnings: u64, progress: bool) -> Self {
        Self {
            source,
            strict,
            max_warnings,
            rejected: Tally::default(),
            other_k: Tally::default(),
            steps: 0,
            bytes: 0,
            progress: progress.then(Progress::new),
        }
    }

    /// A well-formed but invalid step at `line` (step `index` of a detailed
    /// report): an error with `--strict`, otherwise a warning.
    #[cold]
    pub fn rejected(
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
        if self.rejected.count(self.max_warnings) {
            self.warn(format_args!(
                "{at}: {e}; counted in num_rejected_observations"
            ));
        }
        Ok(())
    }

    /// A detailed report at `line` whose own `num_spec_tokens` is
    /// `report_k`, not the `K` of the replay: an error with `--strict`,
    /// otherwise a warning (its steps are replayed against `K` all the
    /// same).
    #[cold]
    pub fn other_k(&mut self, line: u64, report_k: u64, k: usize) -> Result<(), CliError> {
        let what = format!(
            "{}: line {line}: the detailed report's num_spec_tokens is {report_k}, not --max-draft-len {k}",
            self.source.name
        );
        if self.strict {
            return Err(CliError::new(format!("{what} (--strict)")));
        }
        if self.other_k.count(self.max_warnings) {
            self.warn(format_args!("{what}; its steps are replayed with K = {k}"));
        }
        Ok(())
    }

    fn warn(&mut self, msg: fmt::Arguments<'_>) {
        self.clear_progress();
        let _ = writeln!(io::stderr(), "warning: {msg}");
    }

    pub fn tick(&mut self, lines: u64) {
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
    pub fn finish(&mut self, ok: bool) {
        self.clear_progress();
        if !ok {
            return;
        }
        let Tally { seen, warned } = self.rejected;
        if seen > warned {
            self.warn(format_args!(
                "{} more rejected observations not shown ({seen} in all, all counted in num_rejected_observations)",
                seen - warned
            ));
        }
        let Tally { seen, warned } = self.other_k;
        if seen > warned {
            self.warn(format_args!(
                "{} more detailed reports whose num_spec_tokens is not --max-draft-len not shown ({seen} in all)",
                seen - warned
            ));
        }
    }
}

/// How many warnings of one kind there were, and how many were printed.
#[derive(Clone, Copy, Default)]
struct Tally {
    seen: u64,
    warned: u64,
}

impl Tally {
    /// Counts one more; whether to print it (at most `max` are).
    fn count(&mut self, max: u64) -> bool {
        self.seen += 1;
        let print = self.warned < max;
        self.warned += u64::from(print);
        print
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

/// Whether to draw progress: only when standard error is a terminal.
pub fn stderr_is_terminal() -> bool {
    io::stderr().is_terminal()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_line() {
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
