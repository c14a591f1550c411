//! `replay`'s input: JSON Lines of verify steps and vLLM detailed reports,
//! each line parsed without building a `serde_json::Value`
//! ([`LineParser`]), read one bounded line at a time ([`StepReader`]).
//!
//! A line is one of (`docs/cli.md`, "Replay input lines"):
//!
//! - a verify step, `{"drafted": k, "accepted": a}` (exactly these two keys);
//! - an undrafted step, `{"undrafted": true}` (exactly this key);
//! - a scheduler step and its draft budget, `{"scheduled": b}` (exactly this
//!   key; `0` when the schedule chose not to speculate);
//! - one request's detailed vLLM report: an object carrying the arrays
//!   `per_step_drafted` and `per_step_accepted` (equal lengths), expanded
//!   into its steps; its `num_spec_tokens`, when it is an integer, is handed
//!   on to be compared with `K`; any other key of such a report is ignored;
//! - blank (empty or whitespace only): skipped, though it still counts in the
//!   line numbers.
//!
//! Counts are JSON integers `>= 0` that fit in `u64`; anything else (a
//! negative number, a fraction, `1.0`, a number above `u64::MAX`, a string)
//! makes the line malformed, and the message says which. Whether a
//! well-formed step is *valid* (`a <= k <= K`, `b <= K`) is not decided
//! here.
//!
//! **Text.** A line is UTF-8 text throughout, as JSON requires (RFC 8259):
//! invalid UTF-8, or a `\u` escape that is a lone surrogate, makes the line
//! malformed wherever it is — in a key, in a value that matters, or in a
//! value that is ignored. A byte-order mark at the start of a line is
//! malformed too (JSON does not allow one) and named as such.
//!
//! **Messages.** Input quoted in a message goes through [`excerpt`]:
//! control characters escaped, cut short.
//!
//! **Lines.** [`StepReader`] reads at most its limit of bytes of a line
//! (the terminator not counted): a longer line stops it at once, so memory
//! stays bounded by the limit whatever the input; a parser's buffers grown
//! by one long detailed report are let go before the next line.
//!
//! Parsing has two paths. The fast path reads the three common shapes, a
//! plain step, an undrafted step and a scheduler step, straight from the
//! bytes; whatever it does not
//! recognise at once (escapes, other keys, odd numbers, a byte-order mark,
//! errors) goes to the serde path, which is the authority: the fast path
//! only ever accepts lines that the serde path reads the same way (checked
//! by `fast_path_agrees_with_serde_path*` below). It earns its place: on a
//! trace of 2,000,000 steps replay takes 0.069 s of CPU with it and 0.206 s
//! with the serde path alone (2.99x), and 0.136 s (1.97x) with the quickest
//! serde-only variant tried, a derived two-key struct tried first
//! (`docs/cli.md`, "Streaming, threads and throughput").

use std::borrow::Cow;
use std::fmt;
use std::io::BufRead;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::lines::{LineError, Lines, Overlong};
use crate::text::excerpt;

/// What every line must be, quoted in the error messages.
pub const EXPECTED_SHAPES: &str = "expected {\"drafted\": k, \"accepted\": a}, {\"undrafted\": true}, \
     {\"scheduled\": b}, or a vLLM detailed report with arrays \"per_step_drafted\" and \"per_step_accepted\"";

/// One parsed line. The arrays of a detailed report borrow the parser's
/// reusable buffers.
#[derive(Debug, PartialEq, Eq)]
pub enum Record<'p> {
    /// An empty or whitespace-only line.
    Blank,
    /// One verify step: drafted `k`, accepted `a`.
    Step {
        /// `k`, the tokens drafted.
        drafted: u64,
        /// `a`, the drafted tokens accepted.
        accepted: u64,
    },
    /// A step where the drafting policy proposed nothing.
    Undrafted,
    /// A scheduler step whose draft budget was `budget`.
    Scheduled {
        /// `b`, the draft budget.
        budget: u64,
    },
    /// A vLLM detailed report: step `i` drafted `drafted[i]` and accepted
    /// `accepted[i]`; `num_spec_tokens` is the report's own `K`, when it
    /// carries one as an integer.
    Detailed {
        /// `per_step_drafted`.
        drafted: &'p [u64],
        /// `per_step_accepted`.
        accepted: &'p [u64],
        /// `num_spec_tokens`, when it is an integer.
        num_spec_tokens: Option<u64>,
    },
}

/// Why a line is not one of the accepted shapes. The message names what was
/// wrong; the caller adds the line number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(String);

impl ParseError {
    fn new(msg: impl Into<String>) -> Self {
        Self(msg.into())
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseError {}

/// Parses lines, keeping the buffers of detailed reports between calls so
/// that a long trace allocates nothing per line.
#[derive(Default)]
pub struct LineParser {
    drafted: Vec<u64>,
    accepted: Vec<u64>,
}

impl LineParser {
    /// A parser with empty buffers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses one line (without or with its line terminator).
    pub fn parse<'p>(&'p mut self, line: &[u8]) -> Result<Record<'p>, ParseError> {
        // The terminator is not part of the line: without it, serde's
        // columns are the columns of the line.
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if let Some(record) = fast_path(line) {
            return Ok(record);
        }
        if line.iter().all(|b| is_ws(*b)) {
            return Ok(Record::Blank);
        }
        self.parse_slow(line)
    }

    /// Lets go of array buffers grown by a very long detailed report, so that
    /// one such line does not hold its memory for the rest of the run.
    pub fn shrink(&mut self) {
        for v in [&mut self.drafted, &mut self.accepted] {
            if v.capacity() > 1 << 17 {
                *v = Vec::new();
            }
        }
    }

    /// The serde path: every shape, every error.
    pub fn parse_slow<'p>(&'p mut self, line: &[u8]) -> Result<Record<'p>, ParseError> {
        self.drafted.clear();
        self.accepted.clear();
        let text = std::str::from_utf8(line).map_err(|e| not_utf8(line, &e))?;
        if text.starts_with('\u{feff}') {
            return Err(ParseError::new(
                "the line starts with a byte-order mark (bytes EF BB BF), which JSON does not allow; remove it (an editor's \"UTF-8 without BOM\")",
            ));
        }
        let mut de = serde_json::Deserializer::from_str(text);
        let fields = de
            .deserialize_any(LineVisitor {
                drafted: &mut self.drafted,
                accepted: &mut self.accepted,
            })
            .and_then(|fields| de.end().map(|()| fields))
            .map_err(json_error)?;
        fields.classify(&self.drafted, &self.accepted)
    }
}

/// One line a [`StepReader`] read: its number, its length and its record.
#[derive(Debug, PartialEq, Eq)]
pub struct StepLine<'p> {
    /// The line number, from 1 (blank lines count).
    pub number: u64,
    /// The bytes it took in the input, its terminator included.
    pub len: usize,
    /// What it says.
    pub record: Record<'p>,
}

/// Why a [`StepReader`] stopped.
#[derive(Debug)]
#[non_exhaustive]
pub enum StepsError {
    /// The input could not be read, or a line is longer than the limit
    /// (the rest of the input was not read).
    Line(LineError),
    /// A line that is none of the accepted shapes.
    Malformed {
        /// The line, from 1.
        line: u64,
        /// What is wrong with it.
        error: ParseError,
    },
}

impl fmt::Display for StepsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StepsError::Line(e) => write!(f, "{e}"),
            StepsError::Malformed { line, error } => write!(f, "line {line}: {error}"),
        }
    }
}

impl std::error::Error for StepsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StepsError::Line(e) => Some(e),
            StepsError::Malformed { error, .. } => Some(error),
        }
    }
}

/// Reads steps one line at a time into reused buffers: nothing is
/// allocated per line, and a line is never held past the limit. After the
/// end or the first error it reads nothing more.
///
/// ```
/// use specdec_ingest::steps::{Record, StepReader, StepsError};
/// let input = b"{\"drafted\":3,\"accepted\":2}\n\n{\"undrafted\":true}\n{\"drafted\":1}\n";
/// let mut reader = StepReader::new(&input[..], 1024);
/// let first = reader.next_line().unwrap().unwrap();
/// assert_eq!((first.number, first.len), (1, 27));
/// assert_eq!(first.record, Record::Step { drafted: 3, accepted: 2 });
/// assert_eq!(reader.next_line().unwrap().unwrap().record, Record::Blank);
/// assert_eq!(reader.next_line().unwrap().unwrap().record, Record::Undrafted);
/// let e = reader.next_line().unwrap_err();
/// assert!(matches!(e, StepsError::Malformed { line: 4, .. }));
/// assert!(reader.next_line().unwrap().is_none());
/// ```
pub struct StepReader<R> {
    lines: Lines<R>,
    parser: LineParser,
    done: bool,
}

impl<R: BufRead> StepReader<R> {
    /// A reader of `input` whose lines are at most `max_line_bytes` long,
    /// the terminator not counted.
    pub fn new(input: R, max_line_bytes: u64) -> Self {
        let max = usize::try_from(max_line_bytes).unwrap_or(usize::MAX);
        Self {
            lines: Lines::new(input, max, Overlong::Refuse),
            parser: LineParser::new(),
            done: false,
        }
    }

    /// The next line, `None` at the end of the input.
    #[inline]
    pub fn next_line(&mut self) -> Result<Option<StepLine<'_>>, StepsError> {
        if self.done {
            return Ok(None);
        }
        // Until this line is read and parsed: an early return is the end.
        self.done = true;
        self.parser.shrink();
        let before = self.lines.bytes();
        let parsed = match self.lines.next_line() {
            Ok(Some(line)) => self.parser.parse(line),
            Ok(None) => return Ok(None),
            Err(e) => return Err(StepsError::Line(e)),
        };
        let number = self.lines.number();
        let len = (self.lines.bytes() - before) as usize;
        match parsed {
            Ok(record) => {
                self.done = false;
                Ok(Some(StepLine {
                    number,
                    len,
                    record,
                }))
            }
            Err(error) => Err(StepsError::Malformed {
                line: number,
                error,
            }),
        }
    }
}

/// JSON whitespace.
#[inline]
fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

#[cold]
fn not_utf8(line: &[u8], e: &std::str::Utf8Error) -> ParseError {
    let at = e.valid_up_to();
    let bad = &line[at..at + e.error_len().unwrap_or(line.len() - at).min(4)];
    let hex: Vec<String> = bad.iter().map(|b| format!("{b:02X}")).collect();
    ParseError::new(format!(
        "not valid UTF-8 (byte{} {} at column {}): a line must be UTF-8 text, in keys and values alike",
        if bad.len() == 1 { "" } else { "s" },
        hex.join(" "),
        at + 1
    ))
}

/// Rewrites a serde_json error without its position "at line 1 column N"
/// (every line is parsed on its own, so serde's line number is always 1 and
/// would only confuse); the column is kept.
#[cold]
fn json_error(e: serde_json::Error) -> ParseError {
    let full = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    let msg = full.strip_suffix(&suffix).unwrap_or(&full);
    match e.classify() {
        serde_json::error::Category::Syntax if msg == "number out of range" => {
            ParseError::new(format!(
                "a number too large to read at column {}: counts are integers from 0 to {}",
                e.column(),
                u64::MAX
            ))
        }
        // serde_json's two names for a `\u` escape of half a surrogate pair.
        serde_json::error::Category::Syntax
            if msg == "lone leading surrogate in hex escape"
                || msg == "unexpected end of hex escape" =>
        {
            ParseError::new(format!(
                "a \\u escape that is half a surrogate pair, alone (at column {}): strings must be valid Unicode, in keys and values alike",
                e.column()
            ))
        }
        serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
            ParseError::new(format!(
                "not valid JSON ({msg} at column {}); {EXPECTED_SHAPES}",
                e.column()
            ))
        }
        serde_json::error::Category::Io => ParseError::new(msg.to_owned()),
        serde_json::error::Category::Data => ParseError::new(msg.to_owned()),
    }
}

// ---------------------------------------------------------------------------
// Fast path

/// Reads `{"drafted":k,"accepted":a}` (either key order),
/// `{"undrafted":true}`, `{"scheduled":b}`, and blank lines, with any JSON
/// whitespace. Returns
/// `None` for anything else, including every malformed line, so that the
/// serde path gives the answer and the message.
#[inline]
fn fast_path(line: &[u8]) -> Option<Record<'static>> {
    let mut c = Cursor { s: line, i: 0 };
    c.ws();
    if c.i == line.len() {
        return Some(Record::Blank);
    }
    c.byte(b'{')?;
    c.ws();
    let first = c.key()?;
    c.ws();
    c.byte(b':')?;
    c.ws();
    let record = match first {
        b"undrafted" => {
            c.literal(b"true")?;
            Record::Undrafted
        }
        b"scheduled" => Record::Scheduled { budget: c.uint()? },
        b"drafted" | b"accepted" => {
            let v1 = c.uint()?;
            c.ws();
            c.byte(b',')?;
            c.ws();
            let second = c.key()?;
            let (drafted, accepted) = match (first, second) {
                (b"drafted", b"accepted") => (v1, None),
                (b"accepted", b"drafted") => (0, Some(v1)),
                _ => return None,
            };
            c.ws();
            c.byte(b':')?;
            c.ws();
            let v2 = c.uint()?;
            match accepted {
                None => Record::Step {
                    drafted,
                    accepted: v2,
                },
                Some(a) => Record::Step {
                    drafted: v2,
                    accepted: a,
                },
            }
        }
        _ => return None,
    };
    c.ws();
    c.byte(b'}')?;
    c.ws();
    (c.i == line.len()).then_some(record)
}

struct Cursor<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Cursor<'a> {
    #[inline]
    fn ws(&mut self) {
        while self.i < self.s.len() && is_ws(self.s[self.i]) {
            self.i += 1;
        }
    }

    #[inline]
    fn byte(&mut self, b: u8) -> Option<()> {
        if self.s.get(self.i) == Some(&b) {
            self.i += 1;
            Some(())
        } else {
            None
        }
    }

    #[inline]
    fn literal(&mut self, lit: &[u8]) -> Option<()> {
        if self.s[self.i..].starts_with(lit) {
            self.i += lit.len();
            Some(())
        } else {
            None
        }
    }

    /// A key without escapes; its bytes between the quotes.
    #[inline]
    fn key(&mut self) -> Option<&'a [u8]> {
        self.byte(b'"')?;
        let start = self.i;
        while self.i < self.s.len() {
            match self.s[self.i] {
                b'"' => {
                    let key = &self.s[start..self.i];
                    self.i += 1;
                    return Some(key);
                }
                b'\\' => return None,
                _ => self.i += 1,
            }
        }
        None
    }

    /// A JSON integer `>= 0` that fits in `u64`: `0` or a non-zero digit
    /// followed by digits, and not followed by a fraction or exponent.
    #[inline]
    fn uint(&mut self) -> Option<u64> {
        let first = *self.s.get(self.i)?;
        if !first.is_ascii_digit() {
            return None;
        }
        self.i += 1;
        let mut v = u64::from(first - b'0');
        if first != b'0' {
            while let Some(&b) = self.s.get(self.i) {
                if !b.is_ascii_digit() {
                    break;
                }
                v = v.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
                self.i += 1;
            }
        }
        match self.s.get(self.i) {
            Some(b'.' | b'e' | b'E') => None,
            Some(b) if b.is_ascii_digit() => None, // "01": leading zero
            _ => Some(v),
        }
    }
}

// ---------------------------------------------------------------------------
// Serde path

/// A key of the line's object. Any other key is kept only as an excerpt
/// for a message, never whole.
enum Key<'de> {
    Drafted,
    Accepted,
    Undrafted,
    Scheduled,
    PerStepDrafted,
    PerStepAccepted,
    NumSpecTokens,
    Other(Cow<'de, str>),
}

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key::from_name(v).unwrap_or(Key::Other(Cow::Borrowed(v))))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key<'de>, E> {
                // An escaped key, decoded into serde's scratch buffer: keep
                // no more of it than a message shows.
                Ok(Key::from_name(v).unwrap_or_else(|| Key::Other(Cow::Owned(excerpt(v)))))
            }
        }
        d.deserialize_str(KeyVisitor)
    }
}

impl Key<'_> {
    fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "drafted" => Key::Drafted,
            "accepted" => Key::Accepted,
            "undrafted" => Key::Undrafted,
            "scheduled" => Key::Scheduled,
            "per_step_drafted" => Key::PerStepDrafted,
            "per_step_accepted" => Key::PerStepAccepted,
            "num_spec_tokens" => Key::NumSpecTokens,
            _ => return None,
        })
    }
}

/// A value read whatever its JSON type, so that a key which only matters in
/// one shape (like `"drafted"`, ignored inside a detailed report) is judged
/// once the shape is known.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Scalar {
    UInt(u64),
    NegInt(i64),
    Float(f64),
    Bool(bool),
    Null,
    Str,
    Array,
    Object,
}

/// `2^64`: the first whole number a count cannot hold.
const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;

impl Scalar {
    fn describe(self) -> String {
        match self {
            Scalar::UInt(v) => format!("the integer {v}"),
            Scalar::NegInt(v) => format!("the negative integer {v}"),
            // `-0` (or `-0.0`, `-0e3`): serde reads every spelling as -0.0,
            // which is not below 0 but has its minus sign all the same.
            Scalar::Float(v) if v == 0.0 && v.is_sign_negative() => {
                "-0, a zero with a minus sign (write it as 0)".into()
            }
            Scalar::Float(v) if v < 0.0 => format!("the negative number {v}"),
            Scalar::Float(v) if v.fract() != 0.0 => format!("the fraction {v}"),
            Scalar::Float(v) if v >= TWO_POW_64 => {
                format!("a number above {}, the largest count", u64::MAX)
            }
            // A whole number `>= 0` spelt `1.0` or `1e2`: serde reads it as
            // a float, so its spelling is gone, but not its value.
            Scalar::Float(v) => format!(
                "{v:?}, a whole number written with a decimal point or an exponent (write it as {})",
                v as u64
            ),
            Scalar::Bool(v) => format!("{v}"),
            Scalar::Null => "null".into(),
            Scalar::Str => "a string".into(),
            Scalar::Array => "an array".into(),
            Scalar::Object => "an object".into(),
        }
    }

    /// The count this value holds, or what is wrong with it (`what` names
    /// the value: `"drafted"`, `"per_step_accepted"[3]`).
    fn count(self, what: fmt::Arguments<'_>) -> Result<u64, String> {
        match self {
            Scalar::UInt(v) => Ok(v),
            Scalar::Float(v) if v >= TWO_POW_64 && v.fract() == 0.0 => Err(format!(
                "{what} is too large: a count is at most {}",
                u64::MAX
            )),
            other => Err(format!(
                "{what} must be an integer >= 0, got {}",
                other.describe()
            )),
        }
    }
}

impl<'de> de::Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ScalarVisitor;
        impl<'de> Visitor<'de> for ScalarVisitor {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar::UInt(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scalar, E> {
                Ok(u64::try_from(v).map_or(Scalar::NegInt(v), Scalar::UInt))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Scalar, E> {
                Ok(Scalar::Float(v))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Scalar, E> {
                Ok(Scalar::Bool(v))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Scalar, E> {
                Ok(Scalar::Null)
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Scalar, E> {
                Ok(Scalar::Str)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Scalar, A::Error> {
                while seq.next_element::<Checked>()?.is_some() {}
                Ok(Scalar::Array)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scalar, A::Error> {
                while map.next_entry::<Checked, Checked>()?.is_some() {}
                Ok(Scalar::Object)
            }
        }
        d.deserialize_any(ScalarVisitor)
    }
}

/// Any JSON value, read only to be checked and dropped. Unlike serde's
/// `IgnoredAny`, which skips strings without decoding them, its strings are
/// decoded, so that a lone surrogate escape is malformed in an ignored value
/// exactly as in a key.
struct Checked;

impl<'de> de::Deserialize<'de> for Checked {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(CheckedVisitor)
    }
}

struct CheckedVisitor;

impl<'de> Visitor<'de> for CheckedVisitor {
    type Value = Checked;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_str<E>(self, _: &str) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_unit<E>(self) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Checked, A::Error> {
        while seq.next_element::<Checked>()?.is_some() {}
        Ok(Checked)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Checked, A::Error> {
        while map.next_entry::<Checked, Checked>()?.is_some() {}
        Ok(Checked)
    }
}

/// Reads an array of counts into a reused buffer. Elements must be integers
/// `>= 0` that fit in `u64`. Every other value gets a message of ours that
/// names its type and never quotes it (serde's would quote a string whole).
struct CountsInto<'b> {
    key: &'static str,
    out: &'b mut Vec<u64>,
}

impl<'de> DeserializeSeed<'de> for CountsInto<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl CountsInto<'_> {
    fn not_an_array<E: de::Error>(&self, got: Scalar) -> E {
        E::custom(format_args!(
            "\"{}\" must be an array of integers >= 0, got {}",
            self.key,
            got.describe()
        ))
    }
}

impl<'de> Visitor<'de> for CountsInto<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{}\" to be an array of integers >= 0", self.key)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let key = self.key;
        while let Some(v) = seq.next_element::<Scalar>()? {
            let i = self.out.len();
            let count = v
                .count(format_args!("\"{key}\"[{i}]"))
                .map_err(de::Error::custom)?;
            self.out.push(count);
        }
        Ok(())
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        Err(self.not_an_array(Scalar::Bool(v)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        Err(self.not_an_array(Scalar::NegInt(v)))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        Err(self.not_an_array(Scalar::UInt(v)))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        Err(self.not_an_array(Scalar::Float(v)))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Err(self.not_an_array(Scalar::Str))
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Err(self.not_an_array(Scalar::Null))
    }
    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Err(self.not_an_array(Scalar::Object))
    }
}

/// The keys found in the line's object.
#[derive(Default)]
struct Fields {
    drafted: Option<Scalar>,
    accepted: Option<Scalar>,
    undrafted: Option<Scalar>,
    scheduled: Option<Scalar>,
    num_spec_tokens: Option<Scalar>,
    has_per_step_drafted: bool,
    has_per_step_accepted: bool,
    /// The first key that has no place in a step or an undrafted step
    /// (`num_spec_tokens` included), as an excerpt.
    other_key: Option<String>,
}

struct LineVisitor<'b> {
    drafted: &'b mut Vec<u64>,
    accepted: &'b mut Vec<u64>,
}

fn set_once<E: de::Error, T>(slot: &mut Option<T>, v: T, key: &str) -> Result<(), E> {
    if slot.is_some() {
        return Err(E::custom(format_args!("duplicate key \"{key}\"")));
    }
    *slot = Some(v);
    Ok(())
}

impl<'de> Visitor<'de> for LineVisitor<'_> {
    type Value = Fields;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields, A::Error> {
        let mut f = Fields::default();
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match key {
                Key::Drafted => set_once(&mut f.drafted, map.next_value()?, "drafted")?,
                Key::Accepted => set_once(&mut f.accepted, map.next_value()?, "accepted")?,
                Key::Undrafted => set_once(&mut f.undrafted, map.next_value()?, "undrafted")?,
                Key::Scheduled => set_once(&mut f.scheduled, map.next_value()?, "scheduled")?,
                Key::NumSpecTokens => {
                    set_once(&mut f.num_spec_tokens, map.next_value()?, "num_spec_tokens")?;
                    f.other_key
                        .get_or_insert_with(|| "\"num_spec_tokens\"".into());
                }
                Key::PerStepDrafted => {
                    if f.has_per_step_drafted {
                        return Err(de::Error::custom("duplicate key \"per_step_drafted\""));
                    }
                    f.has_per_step_drafted = true;
                    map.next_value_seed(CountsInto {
                        key: "per_step_drafted",
                        out: self.drafted,
                    })?;
                }
                Key::PerStepAccepted => {
                    if f.has_per_step_accepted {
                        return Err(de::Error::custom("duplicate key \"per_step_accepted\""));
                    }
                    f.has_per_step_accepted = true;
                    map.next_value_seed(CountsInto {
                        key: "per_step_accepted",
                        out: self.accepted,
                    })?;
                }
                Key::Other(name) => {
                    if f.other_key.is_none() {
                        f.other_key = Some(match name {
                            Cow::Borrowed(raw) => excerpt(raw),
                            Cow::Owned(quoted) => quoted,
                        });
                    }
                    map.next_value::<Checked>()?;
                }
            }
        }
        Ok(f)
    }

    // Anything but an object: name what it was.
    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Fields, A::Error> {
        Err(not_an_object("an array"))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Fields, E> {
        Err(not_an_object("a string"))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Fields, E> {
        Err(not_an_object("a number"))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Fields, E> {
        Err(not_an_object("a number"))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Fields, E> {
        Err(not_an_object("a number"))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Fields, E> {
        Err(not_an_object("a boolean"))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Fields, E> {
        Err(not_an_object("null"))
    }
}

fn not_an_object<E: de::Error>(what: &str) -> E {
    E::custom(format_args!(
        "found {what}, not a JSON object; {EXPECTED_SHAPES}"
    ))
}

fn count(key: &str, v: Scalar) -> Result<u64, ParseError> {
    v.count(format_args!("\"{key}\"")).map_err(ParseError::new)
}

impl Fields {
    fn classify<'p>(
        self,
        drafted: &'p [u64],
        accepted: &'p [u64],
    ) -> Result<Record<'p>, ParseError> {
        // A detailed report: the two arrays decide, every other key is ignored.
        if self.has_per_step_drafted || self.has_per_step_accepted {
            return self.detailed(drafted, accepted);
        }
        self.refuse_other_key()?;
        if let Some(b) = self.scheduled {
            if self.undrafted.is_some() || self.drafted.is_some() || self.accepted.is_some() {
                return Err(ParseError::new(
                    "\"scheduled\" together with \"drafted\"/\"accepted\"/\"undrafted\": a line is one verify step, one undrafted step or one scheduler step",
                ));
            }
            return Ok(Record::Scheduled {
                budget: count("scheduled", b)?,
            });
        }
        if let Some(u) = self.undrafted {
            if self.drafted.is_some() || self.accepted.is_some() {
                return Err(ParseError::new(
                    "\"undrafted\" together with \"drafted\"/\"accepted\": a line is either a step or an undrafted step",
                ));
            }
            return match u {
                Scalar::Bool(true) => Ok(Record::Undrafted),
                other => Err(ParseError::new(format!(
                    "\"undrafted\" must be true, got {}",
                    other.describe()
                ))),
            };
        }
        match (self.drafted, self.accepted) {
            (Some(k), Some(a)) => Ok(Record::Step {
                drafted: count("drafted", k)?,
                accepted: count("accepted", a)?,
            }),
            (Some(_), None) => Err(ParseError::new(
                "step without \"accepted\"; expected {\"drafted\": k, \"accepted\": a}",
            )),
            (None, Some(_)) => Err(ParseError::new(
                "step without \"drafted\"; expected {\"drafted\": k, \"accepted\": a}",
            )),
            (None, None) => Err(ParseError::new(format!("empty object; {EXPECTED_SHAPES}"))),
        }
    }

    /// A detailed report's record: both arrays, of one length.
    fn detailed<'p>(
        self,
        drafted: &'p [u64],
        accepted: &'p [u64],
    ) -> Result<Record<'p>, ParseError> {
        let missing = match (self.has_per_step_drafted, self.has_per_step_accepted) {
            (true, false) => Some("per_step_accepted"),
            (false, true) => Some("per_step_drafted"),
            _ => None,
        };
        if let Some(missing) = missing {
            return Err(ParseError::new(format!(
                "detailed report without \"{missing}\": a vLLM detailed report needs both \"per_step_drafted\" and \"per_step_accepted\""
            )));
        }
        if drafted.len() != accepted.len() {
            return Err(ParseError::new(format!(
                "detailed report with {} entries in \"per_step_drafted\" but {} in \"per_step_accepted\": the two arrays must have one entry per step",
                drafted.len(),
                accepted.len()
            )));
        }
        let num_spec_tokens = match self.num_spec_tokens {
            Some(Scalar::UInt(k)) => Some(k),
            _ => None,
        };
        Ok(Record::Detailed {
            drafted,
            accepted,
            num_spec_tokens,
        })
    }

    /// An error for a key no record but a detailed report may carry.
    fn refuse_other_key(&self) -> Result<(), ParseError> {
        let shape = if self.undrafted.is_some() {
            "an undrafted step {\"undrafted\": true}"
        } else if self.scheduled.is_some() {
            "a scheduler step {\"scheduled\": b}"
        } else {
            "a step {\"drafted\": k, \"accepted\": a}"
        };
        if let Some(key) = &self.other_key {
            if self.undrafted.is_none()
                && self.scheduled.is_none()
                && self.drafted.is_none()
                && self.accepted.is_none()
            {
                return Err(ParseError::new(format!(
                    "unknown key {key} and none of the expected ones; {EXPECTED_SHAPES}"
                )));
            }
            return Err(ParseError::new(format!(
                "unexpected key {key} in {shape} (only a vLLM detailed report may carry other keys)"
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::io::{self, Read as _};

    use super::*;

    fn parse(line: &str) -> Result<String, String> {
        let mut p = LineParser::new();
        p.parse(line.as_bytes())
            .map(|r| format!("{r:?}"))
            .map_err(|e| e.to_string())
    }

    fn slow(line: &str) -> Result<String, String> {
        let mut p = LineParser::new();
        p.parse_slow(line.as_bytes())
            .map(|r| format!("{r:?}"))
            .map_err(|e| e.to_string())
    }

    /// Every line `StepReader` gives, as (number, len, record) or the
    /// error's message.
    fn read_lines(input: &[u8], limit: u64) -> Vec<Result<(u64, usize, String), String>> {
        let mut reader = StepReader::new(input, limit);
        let mut out = Vec::new();
        loop {
            match reader.next_line() {
                Ok(Some(l)) => out.push(Ok((l.number, l.len, format!("{:?}", l.record)))),
                Ok(None) => return out,
                Err(e) => {
                    out.push(Err(e.to_string()));
                    assert!(matches!(reader.next_line(), Ok(None)), "read on");
                    return out;
                }
            }
        }
    }

    #[test]
    fn the_reader_numbers_lines_and_counts_their_bytes() {
        let got = read_lines(b"{\"undrafted\":true}\r\n\n  \n{\"scheduled\":2}", 100);
        assert_eq!(
            got,
            vec![
                Ok((1, 20, "Undrafted".into())),
                Ok((2, 1, "Blank".into())),
                Ok((3, 3, "Blank".into())),
                Ok((4, 15, "Scheduled { budget: 2 }".into())),
            ]
        );
        assert_eq!(
            read_lines(
                b"{\"drafted\":1,\"accepted\":2}\n{\"drafted\":1,\"accepted\":-1}\n{}",
                100
            ),
            vec![
                Ok((1, 27, "Step { drafted: 1, accepted: 2 }".into())),
                Err(
                    "line 2: \"accepted\" must be an integer >= 0, got the negative integer -1"
                        .into()
                ),
            ]
        );
    }

    #[test]
    fn the_reader_refuses_a_line_past_its_limit_unread() {
        let line = br#"{"scheduled":2}"#;
        let limit = line.len() as u64;
        // At the limit, with or without its terminator, is fine.
        for input in [&line[..], &[&line[..], b"\n"].concat()] {
            assert_eq!(read_lines(input, limit).len(), 1);
        }
        let message = |limit: u64| Err(format!("line 2 is longer than {limit} bytes"));
        assert_eq!(
            read_lines(b"\n{\"scheduled\":2}", limit - 1).last(),
            Some(&message(limit - 1))
        );
        // A carriage return counts.
        assert_eq!(
            read_lines(b"\n{\"scheduled\":2}\r\n", limit).last(),
            Some(&message(limit))
        );
        let endless = io::BufReader::new(io::repeat(b' ').take(1 << 40));
        let e = StepReader::new(endless, 1000).next_line().unwrap_err();
        assert!(
            matches!(
                e,
                StepsError::Line(LineError::TooLong { line: 1, max: 1000 })
            ),
            "{e}"
        );
    }

    #[test]
    fn a_read_error_names_the_lines_before() {
        struct Broken(bool);
        impl io::Read for Broken {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                if std::mem::replace(&mut self.0, true) {
                    return Err(io::Error::other("gone"));
                }
                let line = b"{\"undrafted\":true}\n";
                buf[..line.len()].copy_from_slice(line);
                Ok(line.len())
            }
        }
        let mut reader = StepReader::new(io::BufReader::new(Broken(false)), 100);
        assert!(reader.next_line().unwrap().is_some());
        let e = reader.next_line().unwrap_err();
        assert_eq!(e.to_string(), "read error after line 1: gone");
        assert!(std::error::Error::source(&e).is_some());
    }

    #[test]
    fn shapes() {
        assert_eq!(
            LineParser::new().parse(br#"{"drafted":3,"accepted":2}"#),
            Ok(Record::Step {
                drafted: 3,
                accepted: 2
            })
        );
        assert_eq!(
            LineParser::new().parse(b" { \"accepted\" : 0 ,\t\"drafted\": 0 }\r\n"),
            Ok(Record::Step {
                drafted: 0,
                accepted: 0
            })
        );
        assert_eq!(
            LineParser::new().parse(br#"{"undrafted":true}"#),
            Ok(Record::Undrafted)
        );
        assert_eq!(
            LineParser::new().parse(br#"{"scheduled":3}"#),
            Ok(Record::Scheduled { budget: 3 })
        );
        assert_eq!(
            LineParser::new().parse(b" { \"scheduled\" :\t0 }\r\n"),
            Ok(Record::Scheduled { budget: 0 })
        );
        assert_eq!(
            LineParser::new().parse(br#"{"sch\u0065duled":18446744073709551615}"#),
            Ok(Record::Scheduled { budget: u64::MAX })
        );
        assert_eq!(LineParser::new().parse(b"  \t\r\n"), Ok(Record::Blank));
        assert_eq!(LineParser::new().parse(b""), Ok(Record::Blank));
        let mut p = LineParser::new();
        assert_eq!(
            p.parse(br#"{"num_spec_tokens":3,"per_step_drafted":[3,0,2],"per_step_accepted":[1,0,2],"acceptance_histogram":[1,1,1,0]}"#),
            Ok(Record::Detailed {
                drafted: &[3, 0, 2],
                accepted: &[1, 0, 2],
                num_spec_tokens: Some(3),
            })
        );
        // Buffers are reused: the next report starts empty.
        assert_eq!(
            p.parse(br#"{"per_step_accepted":[],"per_step_drafted":[]}"#),
            Ok(Record::Detailed {
                drafted: &[],
                accepted: &[],
                num_spec_tokens: None,
            })
        );
        // Large, escaped or unusual but valid spellings go through serde.
        assert_eq!(
            LineParser::new().parse(br#"{"dr\u0061fted":18446744073709551615,"accepted":1}"#),
            Ok(Record::Step {
                drafted: u64::MAX,
                accepted: 1
            })
        );
    }

    #[test]
    fn fast_path_agrees_with_serde_path() {
        let lines = [
            r#"{"drafted":3,"accepted":2}"#,
            r#"{"accepted":2,"drafted":3}"#,
            r#"  {"drafted" :0 , "accepted": 0}  "#,
            r#"{"drafted":18446744073709551615,"accepted":0}"#,
            r#"{"drafted":18446744073709551616,"accepted":0}"#,
            r#"{"drafted":01,"accepted":0}"#,
            r#"{"drafted":1.0,"accepted":0}"#,
            r#"{"drafted":1e1,"accepted":0}"#,
            r#"{"drafted":-1,"accepted":0}"#,
            r#"{"drafted":1,"drafted":1}"#,
            r#"{"drafted":1,"accepted":1,}"#,
            r#"{"drafted":1,"accepted":1} x"#,
            r#"{"drafted":1,"accepted":1}{}"#,
            r#"{"undrafted":true}"#,
            r#"{"undrafted":tru}"#,
            r#"{"undrafted":true,"drafted":1}"#,
            r#"{"undrafted":false}"#,
            r#"{"drafted":1}"#,
            r#"{"drafted":1,"accepted":1,"x":2}"#,
            "\u{feff}{\"drafted\":1,\"accepted\":1}",
            r#"{"scheduled":3}"#,
            r#" { "scheduled" : 0 } "#,
            r#"{"scheduled":18446744073709551615}"#,
            r#"{"scheduled":18446744073709551616}"#,
            r#"{"scheduled":01}"#,
            r#"{"scheduled":-1}"#,
            r#"{"scheduled":1.0}"#,
            r#"{"scheduled":-0}"#,
            r#"{"scheduled":-0.0}"#,
            r#"{"drafted":-0,"accepted":0}"#,
            r#"{"drafted":0,"accepted":-0}"#,
            r#"{"accepted":-0,"drafted":0}"#,
            r#"{"scheduled":1.5}"#,
            r#"{"scheduled":1e1}"#,
            r#"{"scheduled":"2"}"#,
            r#"{"scheduled":true}"#,
            r#"{"scheduled":null}"#,
            r#"{"scheduled":[1]}"#,
            r#"{"scheduled":1,"scheduled":2}"#,
            r#"{"scheduled":1,"drafted":1}"#,
            r#"{"drafted":1,"accepted":1,"scheduled":1}"#,
            r#"{"scheduled":1,"undrafted":true}"#,
            r#"{"scheduled":1,"x":1}"#,
            r#"{"scheduled":1}x"#,
            r#"{"sch\u0065duled":2}"#,
            r#"{"per_step_drafted":[1],"per_step_accepted":[1],"scheduled":1}"#,
        ];
        for line in lines {
            let fast = fast_path(line.as_bytes()).map(|r| format!("{r:?}"));
            let slow = slow(line);
            if let Some(fast) = fast {
                assert_eq!(Ok(fast), slow, "{line}");
            }
            assert_eq!(parse(line), slow, "{line}");
        }
    }

    /// Random edits of well-formed lines: wherever the fast path answers,
    /// the serde path answers the same.
    #[test]
    fn fast_path_agrees_with_serde_path_on_mutated_lines() {
        use rand_xoshiro::SplitMix64;
        use rand_xoshiro::rand_core::{RngCore, SeedableRng};

        let seeds: [&[u8]; 6] = [
            br#"{"drafted":12,"accepted":3}"#,
            br#" { "accepted" : 0 , "drafted" : 7 } "#,
            br#"{"undrafted":true}"#,
            br#"{"drafted":0,"accepted":0}"#,
            br#"{"scheduled":12}"#,
            br#" { "scheduled" : 0 } "#,
        ];
        let alphabet = b"{}[]\":,. -+eE0123456789tru\\\tadcepdfnxshl";
        let mut rng = SplitMix64::seed_from_u64(0x2545_f491_4f6c_dd1d);
        let mut rand = |n: usize| (rng.next_u64() % n as u64) as usize;
        let mut fast_answers = 0;
        for _ in 0..50_000 {
            let mut line = seeds[rand(seeds.len())].to_vec();
            for _ in 0..1 + rand(3) {
                let i = rand(line.len() + 1);
                match rand(3) {
                    0 if i < line.len() => {
                        line.remove(i);
                    }
                    1 if i < line.len() => line[i] = alphabet[rand(alphabet.len())],
                    _ => line.insert(i, alphabet[rand(alphabet.len())]),
                }
            }
            if line.iter().all(|b| is_ws(*b)) {
                continue;
            }
            if let Some(fast) = fast_path(&line) {
                fast_answers += 1;
                let slow = LineParser::new()
                    .parse_slow(&line)
                    .map(|r| format!("{r:?}"));
                assert_eq!(
                    Ok(format!("{fast:?}")),
                    slow.map_err(|e| e.to_string()),
                    "{}",
                    String::from_utf8_lossy(&line)
                );
            }
        }
        assert!(fast_answers > 1000, "{fast_answers}");
    }

    // A table of cases, one refused line and its message each: long, but
    // each case reads on its own.
    #[test]
    fn errors_name_the_problem() {
        let err = |l: &str| parse(l).unwrap_err();
        assert!(err("{").contains("not valid JSON"), "{}", err("{"));
        assert!(!err("{").contains("line 1"), "{}", err("{"));
        assert!(
            err("{\"drafted\":1\n").contains("at column 12"),
            "{}",
            err("{\"drafted\":1\n")
        );
        assert!(err("[1,2]").contains("found an array, not a JSON object"));
        assert!(err("7").contains("found a number"));
        assert!(err("{}").contains("empty object"));
        assert!(
            err(r#"{"drafted":-1,"accepted":0}"#)
                .contains("\"drafted\" must be an integer >= 0, got the negative integer -1")
        );
        assert!(
            err(r#"{"drafted":1,"accepted":0.5}"#)
                .contains("\"accepted\" must be an integer >= 0, got the fraction 0.5")
        );
        assert!(err(r#"{"drafted":1}"#).contains("without \"accepted\""));
        assert!(err(r#"{"accepted":1}"#).contains("without \"drafted\""));
        assert!(err(r#"{"undrafted":false}"#).contains("must be true"));
        assert_eq!(
            err(r#"{"scheduled":-1}"#),
            "\"scheduled\" must be an integer >= 0, got the negative integer -1"
        );
        assert_eq!(
            err(r#"{"scheduled":2.5}"#),
            "\"scheduled\" must be an integer >= 0, got the fraction 2.5"
        );
        assert_eq!(
            err(r#"{"scheduled":"2"}"#),
            "\"scheduled\" must be an integer >= 0, got a string"
        );
        assert_eq!(
            err(r#"{"scheduled":18446744073709551616}"#),
            "\"scheduled\" is too large: a count is at most 18446744073709551615"
        );
        assert_eq!(
            err(r#"{"scheduled":2.0}"#),
            "\"scheduled\" must be an integer >= 0, got 2.0, a whole number written with a decimal point or an exponent (write it as 2)"
        );
        for together in [
            r#"{"scheduled":1,"drafted":1,"accepted":1}"#,
            r#"{"undrafted":true,"scheduled":1}"#,
            r#"{"accepted":0,"scheduled":0}"#,
        ] {
            assert!(
                err(together).contains(
                    "a line is one verify step, one undrafted step or one scheduler step"
                ),
                "{}",
                err(together)
            );
        }
        assert!(
            err(r#"{"scheduled":1,"id":"r1"}"#)
                .contains("unexpected key \"id\" in a scheduler step {\"scheduled\": b}"),
            "{}",
            err(r#"{"scheduled":1,"id":"r1"}"#)
        );
        assert!(err(r#"{"scheduled":1,"scheduled":1}"#).contains("duplicate key \"scheduled\""));
        assert!(err("{}").contains("{\"scheduled\": b}"), "{}", err("{}"));
        assert!(
            err(r#"{"undrafted":true,"accepted":0}"#)
                .contains("either a step or an undrafted step")
        );
        assert!(err(r#"{"drafted":1,"accepted":1,"id":"r1"}"#).contains("unexpected key \"id\""));
        assert!(err(r#"{"foo":1}"#).contains("unknown key \"foo\""));
        assert!(err(r#"{"drafted":1,"drafted":1}"#).contains("duplicate key \"drafted\""));
        assert!(
            err(r#"{"per_step_drafted":[1,2],"per_step_accepted":[1]}"#)
                .contains("2 entries in \"per_step_drafted\" but 1")
        );
        assert!(err(r#"{"per_step_drafted":[1,2]}"#).contains("without \"per_step_accepted\""));
        // Either array missing, even when the other is empty.
        for line in [
            r#"{"per_step_accepted":[1]}"#,
            r#"{"per_step_accepted":[]}"#,
        ] {
            assert!(
                err(line).starts_with("detailed report without \"per_step_drafted\""),
                "{}",
                err(line)
            );
        }
        assert!(
            err(r#"{"per_step_drafted":[1,-2],"per_step_accepted":[1,1]}"#)
                .contains("\"per_step_drafted\"[1] must be an integer >= 0")
        );
        assert!(
            err(r#"{"per_step_drafted":3,"per_step_accepted":[1]}"#).contains("array of integers")
        );
        assert!(
            err(r#"{"drafted":1,"accepted":1} {"drafted":1,"accepted":1}"#)
                .contains("trailing characters")
        );
    }

    #[test]
    fn detailed_report_ignores_other_keys_whatever_their_type() {
        assert_eq!(
            parse(
                r#"{"drafted":"x","undrafted":7,"per_step_drafted":[2],"per_step_accepted":[1],"meta":{"a":[1,{"b":null}]}}"#
            ),
            Ok("Detailed { drafted: [2], accepted: [1], num_spec_tokens: None }".into())
        );
        // num_spec_tokens is handed on when it is an integer, else ignored.
        assert_eq!(
            parse(r#"{"num_spec_tokens":5,"per_step_drafted":[],"per_step_accepted":[]}"#),
            Ok("Detailed { drafted: [], accepted: [], num_spec_tokens: Some(5) }".into())
        );
        assert_eq!(
            parse(r#"{"num_spec_tokens":"5","per_step_drafted":[],"per_step_accepted":[]}"#),
            Ok("Detailed { drafted: [], accepted: [], num_spec_tokens: None }".into())
        );
    }

    #[test]
    fn counts_that_are_not_integers_say_what_they_are() {
        let err = |l: &str| parse(l).unwrap_err();
        assert_eq!(
            err(r#"{"drafted":1.0,"accepted":0}"#),
            "\"drafted\" must be an integer >= 0, got 1.0, a whole number written with a decimal point or an exponent (write it as 1)"
        );
        assert_eq!(
            err(r#"{"drafted":3,"accepted":2E0}"#),
            "\"accepted\" must be an integer >= 0, got 2.0, a whole number written with a decimal point or an exponent (write it as 2)"
        );
        assert_eq!(
            err(r#"{"drafted":2.5,"accepted":0}"#),
            "\"drafted\" must be an integer >= 0, got the fraction 2.5"
        );
        assert_eq!(
            err(r#"{"drafted":-2.5,"accepted":0}"#),
            "\"drafted\" must be an integer >= 0, got the negative number -2.5"
        );
        // Every spelling of -0 is read as -0.0: a minus sign, not a
        // decimal point or an exponent, is what is wrong with it.
        for minus_zero in ["-0", "-0.0", "-0e1", "-0E-3"] {
            assert_eq!(
                err(&format!(r#"{{"drafted":{minus_zero},"accepted":0}}"#)),
                "\"drafted\" must be an integer >= 0, got -0, a zero with a minus sign (write it as 0)",
                "{minus_zero}"
            );
        }
        assert_eq!(
            err(r#"{"drafted":0.0,"accepted":0}"#),
            "\"drafted\" must be an integer >= 0, got 0.0, a whole number written with a decimal point or an exponent (write it as 0)"
        );
        for too_large in ["18446744073709551616", "100000000000000000000000", "2e19"] {
            assert_eq!(
                err(&format!(r#"{{"drafted":{too_large},"accepted":0}}"#)),
                "\"drafted\" is too large: a count is at most 18446744073709551615",
                "{too_large}"
            );
        }
        assert_eq!(
            err(r#"{"per_step_drafted":[1,18446744073709551616],"per_step_accepted":[0,0]}"#),
            "\"per_step_drafted\"[1] is too large: a count is at most 18446744073709551615"
        );
        assert_eq!(
            err(r#"{"per_step_drafted":[1,1],"per_step_accepted":[0,1.0]}"#),
            "\"per_step_accepted\"[1] must be an integer >= 0, got 1.0, a whole number written with a decimal point or an exponent (write it as 1)"
        );
        assert!(
            err(r#"{"drafted":1e400,"accepted":0}"#)
                .starts_with("a number too large to read at column 16: counts are integers from 0 to 18446744073709551615"),
            "{}",
            err(r#"{"drafted":1e400,"accepted":0}"#)
        );
        // The largest count itself is fine.
        assert_eq!(
            parse(r#"{"drafted":18446744073709551615,"accepted":0}"#),
            Ok(format!(
                "{:?}",
                Record::Step {
                    drafted: u64::MAX,
                    accepted: 0
                }
            ))
        );
    }

    #[test]
    fn a_byte_order_mark_is_named() {
        let e = parse("\u{feff}{\"drafted\":1,\"accepted\":1}").unwrap_err();
        assert!(
            e.starts_with("the line starts with a byte-order mark"),
            "{e}"
        );
        // Elsewhere in a string it is only a character.
        assert!(
            parse("{\"per_step_drafted\":[],\"per_step_accepted\":[],\"x\":\"\u{feff}\"}").is_ok()
        );
    }

    /// One rule for text: a line is UTF-8 throughout, and a lone surrogate
    /// escape is malformed in a key and in an ignored value alike.
    #[test]
    fn text_must_be_utf8_everywhere() {
        let report = |extra: &[u8]| {
            let mut line = br#"{"per_step_drafted":[1],"per_step_accepted":[1],"#.to_vec();
            line.extend_from_slice(extra);
            line.push(b'}');
            let mut p = LineParser::new();
            p.parse(&line)
                .map(|r| format!("{r:?}"))
                .map_err(|e| e.to_string())
        };
        let not_utf8 = [
            &b"\"note\":\"caf\xe9\""[..],    // in an ignored value
            b"\"caf\xe9\":1",                // in an ignored key
            b"\"x\":[{\"y\":\"\xff\xfe\"}]", // nested deep
        ];
        for extra in not_utf8 {
            let e = report(extra).unwrap_err();
            assert!(e.starts_with("not valid UTF-8 (byte"), "{e}");
            assert!(e.contains("a line must be UTF-8 text"), "{e}");
        }
        let e = report(b"\"note\":\"caf\xe9\"").unwrap_err();
        assert!(e.contains("byte E9 at column 60"), "{e}");
        let lone_surrogates = [
            &br#""note":"\ud800""#[..],
            br#""\udc00x":1"#,
            br#""x":[{"y":["\ud83d"]}]"#,
            br#""x":{"\udfff":0}"#,
        ];
        for extra in lone_surrogates {
            let e = report(extra).unwrap_err();
            assert!(
                e.starts_with(r"a \u escape that is half a surrogate pair, alone (at column"),
                "{}: {e}",
                String::from_utf8_lossy(extra)
            );
        }
        // A surrogate pair is a character like any other.
        assert!(report(br#""note":"\ud83d\ude00","\ud83d\ude00":[null]"#).is_ok());
        assert!(report("\"note\":\"café ✓\"".as_bytes()).is_ok());
    }

    #[test]
    fn input_in_messages_is_escaped_and_short() {
        let e = parse(r#"{"\u001b]0;pwned\u0007":1}"#).unwrap_err();
        assert_eq!(
            e,
            format!(
                r#"unknown key "\u001b]0;pwned\u0007" and none of the expected ones; {EXPECTED_SHAPES}"#
            )
        );
        // Raw control characters cannot be in a JSON string, but invisible
        // formatting characters can, unescaped.
        let e = parse("{\"drafted\":1,\"accepted\":1,\"a\u{202e}b\":1}").unwrap_err();
        assert!(e.contains(r#"unexpected key "a\u202eb""#), "{e}");
        let long_key = "k".repeat(1_000_000);
        let e = parse(&format!(r#"{{"{long_key}":1}}"#)).unwrap_err();
        assert!(e.len() < 300, "{} bytes", e.len());
        assert!(e.contains(r#"unknown key "kkkkkkkk"#), "{e}");
        assert!(e.contains("…\" (1,000,000 bytes)"), "{e}");
        // A long escaped key too (decoded by serde, then cut).
        let e = parse(&format!(r#"{{"\u0041{long_key}":1}}"#)).unwrap_err();
        assert!(e.len() < 300 && e.contains(r#""Akkk"#), "{e}");
        // Values are described, never quoted.
        for line in [
            r#"{"per_step_drafted":"\u001b]0;pwned\u0007","per_step_accepted":[]}"#,
            r#"{"per_step_drafted":["\u001b]0;pwned\u0007"],"per_step_accepted":[]}"#,
            r#"{"drafted":"\u001b]0;pwned\u0007","accepted":1}"#,
            r#"{"undrafted":"\u001b]0;pwned\u0007"}"#,
        ] {
            let e = parse(line).unwrap_err();
            assert!(e.contains("a string"), "{e}");
            assert!(!e.contains("pwned"), "{e}");
        }
    }
}
