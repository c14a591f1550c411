//! Outside text one line at a time, in bounded memory: the one line loop
//! of every reader here.
//!
//! - [`read_line_bounded`] reads one line into a buffer holding at most a
//!   given number of bytes of it, whatever the input: the rest of a longer
//!   line is never read into memory.
//! - [`Lines`] numbers the lines of an input and applies one of two rules
//!   to a line over the limit ([`Overlong`]): refuse it (JSON Lines, where
//!   a cut line would not parse) or cut it into pieces read as lines of
//!   their own (logs, whose figures sit in short lines among long ones).
//! - [`open`] opens a file, or standard input for `-`.
//! - [`strip_sgr`] removes the colour sequences a logger wraps lines in.

use std::borrow::Cow;
use std::fmt;
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::Path;

/// What [`read_line_bounded`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum LineRead {
    /// The input ended before any byte of a new line.
    Eof,
    /// A line, without its `\n`, is in the buffer.
    Line,
    /// The line is longer than the limit; the buffer holds its first bytes
    /// and the rest was not read.
    TooLong,
}

/// Reads one line (up to `\n` or the end of the input) into `buf`, cleared
/// first, holding at most `max` bytes of it (the `\n` not counted): a
/// longer line stops the read at once with [`LineRead::TooLong`], so
/// memory stays bounded whatever the input. A `\r` before the `\n` is kept.
///
/// ```
/// use specdec_ingest::lines::{LineRead, read_line_bounded};
///
/// let mut input = &b"short\nmuch longer\n"[..];
/// let mut buf = Vec::new();
/// assert_eq!(read_line_bounded(&mut input, &mut buf, 5).unwrap(), LineRead::Line);
/// assert_eq!(buf, b"short");
/// assert_eq!(read_line_bounded(&mut input, &mut buf, 5).unwrap(), LineRead::TooLong);
/// assert_eq!(buf, b"much ");
/// ```
pub fn read_line_bounded<R: BufRead + ?Sized>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> io::Result<LineRead> {
    read_line(reader, buf, max).map(|(read, _)| read)
}

/// [`read_line_bounded`], and whether a `\n` was consumed.
fn read_line<R: BufRead + ?Sized>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> io::Result<(LineRead, bool)> {
    buf.clear();
    let mut read_any = false;
    loop {
        let chunk = match reader.fill_buf() {
            Ok(chunk) => chunk,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok(if read_any {
                (LineRead::Line, false)
            } else {
                (LineRead::Eof, false)
            });
        }
        read_any = true;
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        if buf.len() + take > max {
            let room = max - buf.len();
            buf.extend_from_slice(&chunk[..room]);
            reader.consume(room);
            return Ok((LineRead::TooLong, false));
        }
        buf.extend_from_slice(&chunk[..take]);
        reader.consume(take + usize::from(done));
        if done {
            return Ok((LineRead::Line, true));
        }
    }
}

/// What [`Lines`] does with a line longer than its limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Overlong {
    /// An error ([`LineError::TooLong`]); the rest of the input is not
    /// read.
    Refuse,
    /// Cut into pieces of the limit, each read as a line of its own (and
    /// numbered as one).
    Split,
}

/// Why [`Lines`] stopped.
#[derive(Debug)]
pub enum LineError {
    /// The input could not be read after `after` whole lines.
    Read {
        /// The lines read before the failure.
        after: u64,
        /// The failure.
        error: io::Error,
    },
    /// Line `line` is longer than `max` bytes (under [`Overlong::Refuse`]).
    TooLong {
        /// The line's number, from 1.
        line: u64,
        /// The limit, in bytes, without the `\n`.
        max: usize,
    },
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Read { after, error } => write!(f, "read error after line {after}: {error}"),
            Self::TooLong { line, max } => write!(f, "line {line} is longer than {max} bytes"),
        }
    }
}

impl std::error::Error for LineError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Read { error, .. } => Some(error),
            Self::TooLong { .. } => None,
        }
    }
}

/// A buffer grown past this by one long line is given back before the
/// next line, so one long line does not hold its memory for the rest of
/// the input.
const KEEP_CAPACITY: usize = 1 << 20;

/// The lines of an input, numbered from 1, each at most `max_line_bytes`
/// long (see [`Overlong`] for longer ones).
///
/// ```
/// use specdec_ingest::lines::{LineError, Lines, Overlong};
///
/// let mut lines = Lines::new(&b"a\r\nbb\nccc"[..], 4, Overlong::Refuse);
/// assert_eq!(lines.next_line().unwrap(), Some(&b"a\r"[..]));
/// assert_eq!(lines.next_line().unwrap(), Some(&b"bb"[..]));
/// assert_eq!(lines.next_line().unwrap(), Some(&b"ccc"[..]));
/// assert_eq!(lines.number(), 3);
/// assert_eq!(lines.next_line().unwrap(), None);
///
/// let mut lines = Lines::new(&b"abcdef\n"[..], 4, Overlong::Refuse);
/// assert!(matches!(lines.next_line(), Err(LineError::TooLong { line: 1, max: 4 })));
///
/// let mut lines = Lines::new(&b"abcdef\n"[..], 4, Overlong::Split);
/// assert_eq!(lines.next_line().unwrap(), Some(&b"abcd"[..]));
/// assert_eq!(lines.next_line().unwrap(), Some(&b"ef"[..]));
/// assert_eq!(lines.next_line().unwrap(), None);
/// ```
#[derive(Debug)]
pub struct Lines<R> {
    reader: R,
    buf: Vec<u8>,
    number: u64,
    bytes: u64,
    max_line_bytes: usize,
    overlong: Overlong,
}

impl<R: BufRead> Lines<R> {
    /// The lines of `reader`, each at most `max_line_bytes` long (the `\n`
    /// not counted), a longer one handled by `overlong`.
    pub fn new(reader: R, max_line_bytes: usize, overlong: Overlong) -> Self {
        Self {
            reader,
            buf: Vec::with_capacity(256),
            number: 0,
            bytes: 0,
            max_line_bytes,
            overlong,
        }
    }

    /// The next line without its `\n` (a `\r` before it is kept), `None`
    /// at the end of the input.
    pub fn next_line(&mut self) -> Result<Option<&[u8]>, LineError> {
        Ok(self.next_numbered()?.map(|(_, line)| line))
    }

    /// The next line with its number, as [`next_line`](Self::next_line)
    /// gives it.
    pub fn next_numbered(&mut self) -> Result<Option<(u64, &[u8])>, LineError> {
        if self.buf.capacity() > KEEP_CAPACITY {
            self.buf = Vec::with_capacity(256);
        }
        let (read, newline) = read_line(&mut self.reader, &mut self.buf, self.max_line_bytes)
            .map_err(|error| LineError::Read {
                after: self.number,
                error,
            })?;
        match read {
            LineRead::Eof => return Ok(None),
            LineRead::Line => {}
            LineRead::TooLong => {
                if self.overlong == Overlong::Refuse {
                    self.number += 1;
                    return Err(LineError::TooLong {
                        line: self.number,
                        max: self.max_line_bytes,
                    });
                }
            }
        }
        self.number += 1;
        self.bytes += self.buf.len() as u64 + u64::from(newline);
        Ok(Some((self.number, &self.buf)))
    }

    /// The number of the line [`next_line`](Self::next_line) last gave (or
    /// refused), 0 before the first.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The bytes of the lines given so far, their `\n`s counted.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// Whether `path` stands for standard input (`-`).
pub fn is_stdin(path: &Path) -> bool {
    path == Path::new("-")
}

/// An input opened by [`open`]: a file, or standard input.
pub type Input = Box<dyn BufRead>;

/// Opens the file at `path` for reading, or standard input for `-`.
///
/// ```
/// let mut input = specdec_ingest::lines::open("Cargo.toml".as_ref()).unwrap();
/// let mut first = String::new();
/// std::io::BufRead::read_line(&mut input, &mut first).unwrap();
/// assert_eq!(first, "[package]\n");
/// assert!(specdec_ingest::lines::open("no/such/file".as_ref()).is_err());
/// ```
pub fn open(path: &Path) -> io::Result<Input> {
    if is_stdin(path) {
        Ok(Box::new(io::stdin().lock()))
    } else {
        Ok(Box::new(BufReader::new(File::open(path)?)))
    }
}

/// `text` without its SGR sequences (`ESC [ params m`: the colours a
/// logger or `--color` wraps a line in); any other escape sequence is
/// kept, to be reported as it is. Borrows `text` when it holds none.
///
/// ```
/// use specdec_ingest::lines::strip_sgr;
///
/// assert_eq!(strip_sgr("\u{1b}[1;32mINFO\u{1b}[0m x"), "INFO x");
/// assert_eq!(strip_sgr("a\u{1b}[2Kb"), "a\u{1b}[2Kb");
/// ```
pub fn strip_sgr(text: &str) -> Cow<'_, str> {
    if !text.contains("\u{1b}[") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("\u{1b}[") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let params = after
            .find(|c: char| !(c.is_ascii_digit() || c == ';'))
            .unwrap_or(after.len());
        if after[params..].starts_with('m') {
            rest = &after[params + 1..];
        } else {
            out.push_str("\u{1b}[");
            rest = after;
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn all(input: &[u8], max: usize, overlong: Overlong) -> Result<Vec<String>, LineError> {
        let mut lines = Lines::new(input, max, overlong);
        let mut out = Vec::new();
        while let Some(line) = lines.next_line()? {
            out.push(String::from_utf8_lossy(line).into_owned());
        }
        Ok(out)
    }

    #[test]
    fn lines_without_their_newline_and_a_last_line_without_one() {
        assert_eq!(
            all(b"a\n\nb", 10, Overlong::Refuse).unwrap(),
            ["a", "", "b"]
        );
        assert_eq!(all(b"a\n", 10, Overlong::Refuse).unwrap(), ["a"]);
        assert!(all(b"", 10, Overlong::Refuse).unwrap().is_empty());
    }

    #[test]
    fn the_limit_counts_the_line_without_its_newline() {
        assert_eq!(all(b"abcd\nx", 4, Overlong::Refuse).unwrap(), ["abcd", "x"]);
        assert_eq!(all(b"abcd", 4, Overlong::Refuse).unwrap(), ["abcd"]);
        let e = all(b"x\nabcde\n", 4, Overlong::Refuse).unwrap_err();
        assert!(matches!(e, LineError::TooLong { line: 2, max: 4 }));
        assert_eq!(e.to_string(), "line 2 is longer than 4 bytes");
    }

    #[test]
    fn split_cuts_long_lines_into_numbered_pieces() {
        let mut lines = Lines::new(&b"abcdefghij\nk\n"[..], 4, Overlong::Split);
        let mut got = Vec::new();
        while let Some(line) = lines.next_line().unwrap() {
            let line = line.to_vec();
            got.push((lines.number(), line));
        }
        let want: Vec<(u64, Vec<u8>)> = vec![
            (1, b"abcd".to_vec()),
            (2, b"efgh".to_vec()),
            (3, b"ij".to_vec()),
            (4, b"k".to_vec()),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn an_endless_line_is_refused_without_reading_it_whole() {
        let endless = io::BufReader::new(io::repeat(b' ').take(1 << 40));
        let mut lines = Lines::new(endless, 1000, Overlong::Refuse);
        assert!(matches!(
            lines.next_line(),
            Err(LineError::TooLong { line: 1, .. })
        ));
    }

    #[test]
    fn a_huge_line_does_not_keep_its_buffer() {
        let mut text = vec![b'x'; 2 << 20];
        text.extend_from_slice(b"\nsmall\n");
        let mut lines = Lines::new(&text[..], 4 << 20, Overlong::Refuse);
        assert_eq!(lines.next_line().unwrap().unwrap().len(), 2 << 20);
        assert_eq!(lines.next_line().unwrap(), Some(&b"small"[..]));
        assert!(lines.buf.capacity() <= KEEP_CAPACITY);
    }

    #[test]
    fn bytes_counts_newlines() {
        let mut lines = Lines::new(&b"ab\ncde\nf"[..], 10, Overlong::Refuse);
        while lines.next_line().unwrap().is_some() {}
        assert_eq!(lines.bytes(), 8);
    }

    #[test]
    fn read_errors_name_the_lines_before() {
        struct Failing(u8);
        impl io::Read for Failing {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                if self.0 == 0 {
                    return Err(io::Error::other("disk on fire"));
                }
                self.0 -= 1;
                buf[0] = b'\n';
                Ok(1)
            }
        }
        let mut lines = Lines::new(io::BufReader::new(Failing(2)), 10, Overlong::Refuse);
        assert!(lines.next_line().unwrap().is_some());
        assert!(lines.next_line().unwrap().is_some());
        let e = lines.next_line().unwrap_err();
        assert_eq!(e.to_string(), "read error after line 2: disk on fire");
    }

    #[test]
    fn strip_sgr_keeps_other_sequences_and_borrows_plain_text() {
        assert!(matches!(strip_sgr("plain"), Cow::Borrowed("plain")));
        assert_eq!(strip_sgr("\u{1b}[mx\u{1b}[0;1"), "x\u{1b}[0;1");
        assert_eq!(strip_sgr("\u{1b}["), "\u{1b}[");
    }
}
