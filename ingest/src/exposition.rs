//! A strict reader of the two Prometheus text exposition formats: the
//! classic text format 0.0.4 (what `prometheus_client` in Python, the
//! `metrics-exporter-prometheus` crate and `curl` get) and OpenMetrics 1.0
//! (what Prometheus asks for, and what `prometheus-client` writes).
//!
//! Why not a crate: `prometheus-parse` (0.2) skips lines it does not
//! recognise, so a truncated body or an HTML page reads as an exposition
//! with fewer samples, which is what `advise` must never act on; and
//! `openmetrics-parser` (0.5) is LGPL-3.0, which this MIT OR Apache-2.0
//! workspace does not take in. This reader needs only samples, their
//! labels and values, and the `# TYPE` of a family, and it refuses
//! anything it does not understand, naming the line. A property test
//! round-trips what the library's own collector writes, in both formats
//! (the `tests` module below).
//!
//! The format is OpenMetrics when the text ends with the `# EOF` line, the
//! classic format otherwise. OpenMetrics is read as its ABNF writes it:
//! one space between the parts of a line, no blank line, only the `HELP`,
//! `TYPE` and `UNIT` comments, nothing after `# EOF`. The classic format
//! allows runs of spaces and tabs, blank lines, other comments, and a comma
//! after the last label, as Prometheus' own parser does. In both, a label
//! value escapes only `\\`, `\"` and `\n`; a series (a name and a set of
//! labels) appears once; `# TYPE` comes at most once per name and before
//! the samples it types; and a value is a number, `NaN`, `+Inf` or `-Inf`
//! (the reader does not judge values: a counter that is `NaN` is the
//! caller's to name). Timestamps and OpenMetrics exemplars are read and
//! dropped.

use std::collections::{HashMap, HashSet};
use std::fmt;

use crate::text::excerpt;

/// Which of the two formats a text is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// The classic text format 0.0.4.
    Classic,
    /// OpenMetrics 1.0 (ends with `# EOF`).
    OpenMetrics,
}

/// One sample: a metric name, its labels in the order given, its value.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// The sample's name (a family's name with any suffix).
    pub name: String,
    /// Its labels, in the order given.
    pub labels: Vec<(String, String)>,
    /// Its value.
    pub value: f64,
}

impl Sample {
    /// The value of label `name`, if the sample has it.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A whole exposition: its samples in order, and the `# TYPE` of each name
/// typed (as the text wrote it: in OpenMetrics the family, in the classic
/// format the sample name).
#[derive(Clone, Debug)]
pub struct Exposition {
    /// The format the text is in.
    pub format: Format,
    /// Every sample, in order.
    pub samples: Vec<Sample>,
    types: HashMap<String, String>,
}

impl Exposition {
    /// The type the exposition gives the samples named `name`: the
    /// `# TYPE` of `name` itself, or in OpenMetrics that of its family
    /// (`name` without `_total`, `_created`, ...).
    pub fn type_of(&self, name: &str) -> Option<&str> {
        if let Some(t) = self.types.get(name) {
            return Some(t);
        }
        if self.format == Format::OpenMetrics {
            for suffix in ["_total", "_created"] {
                if let Some(family) = name.strip_suffix(suffix) {
                    if let Some(t) = self.types.get(family) {
                        return Some(t);
                    }
                }
            }
        }
        None
    }
}

/// What is wrong, and on which line (from 1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// The line, from 1.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

/// The types a `# TYPE` line may give, per format.
const CLASSIC_TYPES: &[&str] = &["counter", "gauge", "histogram", "summary", "untyped"];
const OPENMETRICS_TYPES: &[&str] = &[
    "counter",
    "gauge",
    "histogram",
    "gaugehistogram",
    "stateset",
    "info",
    "summary",
    "unknown",
];

/// Reads `text` (the whole body of a scrape), strictly.
pub fn parse(text: &str) -> Result<Exposition, ParseError> {
    if text.trim_start().starts_with('<') {
        return Err(ParseError {
            line: 1,
            message: "this is HTML (or XML), not a Prometheus exposition: is the URL the engine's /metrics path?".into(),
        });
    }
    let body = text.strip_suffix('\n').unwrap_or(text);
    let format = if body == "# EOF" || body.ends_with("\n# EOF") {
        Format::OpenMetrics
    } else {
        Format::Classic
    };
    let mut reader = Reader {
        format,
        samples: Vec::new(),
        types: HashMap::new(),
        helps: HashSet::new(),
        units: HashSet::new(),
        series: HashSet::new(),
        sampled: HashSet::new(),
    };
    let lines: Vec<&str> = if body.is_empty() {
        Vec::new()
    } else {
        body.split('\n').collect()
    };
    for (i, raw) in lines.iter().enumerate() {
        let number = i + 1;
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let at = |message: String| ParseError {
            line: number,
            message,
        };
        if format == Format::OpenMetrics && line == "# EOF" {
            if number != lines.len() {
                return Err(at("text after # EOF".into()));
            }
            break;
        }
        reader
            .line(line)
            .map_err(|m| match why_not_openmetrics(format, &lines) {
                Some(why) => at(format!(
                    "{m} (read as the classic text format, not OpenMetrics: {why})"
                )),
                None => at(m),
            })?;
    }
    Ok(Exposition {
        format,
        samples: reader.samples,
        types: reader.types,
    })
}

/// Why text that looks like OpenMetrics (a `# EOF` line, `# UNIT`, an
/// exemplar) was read as the classic format: OpenMetrics text ends with
/// `# EOF` and its lines end in LF, nothing after it. `None` when it does
/// not look like OpenMetrics, or was read as OpenMetrics.
fn why_not_openmetrics(format: Format, lines: &[&str]) -> Option<String> {
    if format == Format::OpenMetrics {
        return None;
    }
    let bare = |l: &str| l.strip_suffix('\r').unwrap_or(l).to_owned();
    if let Some(i) = lines.iter().position(|l| bare(l) == "# EOF") {
        if lines[i].ends_with('\r') {
            return Some(format!(
                "its lines end in CRLF (\\r\\n, line {} for one), and OpenMetrics lines end in LF alone",
                i + 1
            ));
        }
        let after = lines.len() - i - 1;
        let blank = lines[i + 1..].iter().all(|l| bare(l).trim().is_empty());
        return Some(format!(
            "its # EOF on line {} is followed by {after} more line{}{}, and OpenMetrics ends at # EOF with nothing after it",
            i + 1,
            if after == 1 { "" } else { "s" },
            if blank { " (blank)" } else { "" }
        ));
    }
    let looks = lines
        .iter()
        .any(|l| l.starts_with("# UNIT ") || l.contains(" # {"));
    looks.then(|| {
        "it has no # EOF line, which ends every OpenMetrics text (a cut body, or an exporter that leaves it out), and the classic format has no exemplars or # UNIT".to_owned()
    })
}

struct Reader {
    format: Format,
    samples: Vec<Sample>,
    types: HashMap<String, String>,
    helps: HashSet<String>,
    units: HashSet<String>,
    /// Every series read: name and sorted labels.
    series: HashSet<(String, Vec<(String, String)>)>,
    /// Every name (classic) or family (OpenMetrics) with a sample already.
    sampled: HashSet<String>,
}

impl Reader {
    fn line(&mut self, line: &str) -> Result<(), String> {
        let om = self.format == Format::OpenMetrics;
        if line.trim().is_empty() {
            return if om {
                Err("a blank line (OpenMetrics has none)".into())
            } else {
                Ok(())
            };
        }
        if let Some(rest) = line.strip_prefix('#') {
            return self.comment(rest);
        }
        if !om && line.starts_with([' ', '\t']) {
            // The classic format allows leading blanks.
            return self.sample(line.trim_start_matches([' ', '\t']));
        }
        self.sample(line)
    }

    fn comment(&mut self, rest: &str) -> Result<(), String> {
        let om = self.format == Format::OpenMetrics;
        let mut cursor = Cursor::new(rest, om);
        // "# HELP", "# TYPE", "# UNIT"; the classic format allows any other
        // comment, OpenMetrics none.
        if cursor.blanks().is_err() {
            return if om {
                Err(format!("{}: not a comment OpenMetrics has", excerpt(rest)))
            } else {
                Ok(())
            };
        }
        let keyword = cursor.word();
        let known = match keyword {
            "HELP" | "TYPE" => true,
            "UNIT" => om,
            _ => false,
        };
        if !known {
            return if om {
                Err(format!(
                    "# {}: OpenMetrics has only the HELP, TYPE, UNIT and EOF comments",
                    excerpt(keyword)
                ))
            } else {
                Ok(())
            };
        }
        cursor.blanks()?;
        let name = cursor.metric_name()?;
        match keyword {
            "TYPE" => {
                cursor.blanks()?;
                let kind = if om {
                    cursor.rest()
                } else {
                    cursor.rest().trim_end_matches([' ', '\t'])
                };
                let allowed = if om { OPENMETRICS_TYPES } else { CLASSIC_TYPES };
                if !allowed.contains(&kind) {
                    return Err(format!(
                        "# TYPE {name} {}: not a type ({})",
                        excerpt(kind),
                        allowed.join(", ")
                    ));
                }
                if self.types.contains_key(&name) {
                    return Err(format!("a second # TYPE for {name}"));
                }
                if self.sampled.contains(&name) {
                    return Err(format!("# TYPE {name} after samples of {name}"));
                }
                self.types.insert(name, kind.to_owned());
            }
            "HELP" => {
                // The text may be empty; its escapes are not checked.
                if !cursor.at_end() {
                    cursor.blanks()?;
                }
                if !self.helps.insert(name.clone()) {
                    return Err(format!("a second # HELP for {name}"));
                }
            }
            _ => {
                cursor.blanks()?;
                if !self.units.insert(name.clone()) {
                    return Err(format!("a second # UNIT for {name}"));
                }
            }
        }
        Ok(())
    }

    fn sample(&mut self, line: &str) -> Result<(), String> {
        let om = self.format == Format::OpenMetrics;
        let mut cursor = Cursor::new(line, om);
        let name = cursor.metric_name()?;
        let labels = if cursor.peek() == Some('{') {
            cursor.labels()?
        } else {
            Vec::new()
        };
        cursor.blanks()?;
        let value = cursor.value()?;
        if !cursor.at_end() && cursor.peek_blank() {
            cursor.blanks()?;
            if cursor.peek() == Some('#') && om {
                cursor.exemplar()?;
            } else if !cursor.at_end() {
                cursor.timestamp()?;
                if !cursor.at_end() {
                    cursor.blanks()?;
                    if om && cursor.peek() == Some('#') {
                        cursor.exemplar()?;
                    }
                }
            }
        }
        if !cursor.at_end() {
            return Err(format!(
                "{}: unexpected text after the value of {name}",
                excerpt(cursor.rest())
            ));
        }
        let mut key = labels.clone();
        key.sort();
        let family = if om { family_of(&name) } else { name.clone() };
        if !self.series.insert((name.clone(), key)) {
            return Err(format!(
                "the series {} appears twice",
                series_name(&name, &labels)
            ));
        }
        self.sampled.insert(family);
        self.sampled.insert(name.clone());
        self.samples.push(Sample {
            name,
            labels,
            value,
        });
        Ok(())
    }
}

/// An OpenMetrics sample's family: the name without the suffix its type
/// adds (only `_total` and `_created` matter here; others stay as they are).
fn family_of(name: &str) -> String {
    for suffix in ["_total", "_created"] {
        if let Some(family) = name.strip_suffix(suffix) {
            return family.to_owned();
        }
    }
    name.to_owned()
}

/// A series as an exposition writes it, values escaped.
pub fn series_name(name: &str, labels: &[(String, String)]) -> String {
    if labels.is_empty() {
        return name.to_owned();
    }
    let inner: Vec<String> = labels
        .iter()
        .map(|(n, v)| {
            // As the exposition escapes it, and what would act on a
            // terminal (control, bidi and invisible characters) as \u
            // escapes: the name is shown in tables, warnings and errors.
            let mut escaped = String::with_capacity(v.len());
            for c in v.chars() {
                match c {
                    '\\' => escaped.push_str("\\\\"),
                    '"' => escaped.push_str("\\\""),
                    '\n' => escaped.push_str("\\n"),
                    c => crate::text::push_hidden_escaped(&mut escaped, c),
                }
            }
            format!("{n}=\"{escaped}\"")
        })
        .collect();
    format!("{name}{{{}}}", inner.join(","))
}

/// A position in one line.
struct Cursor<'a> {
    s: &'a str,
    i: usize,
    om: bool,
}

impl<'a> Cursor<'a> {
    fn new(s: &'a str, om: bool) -> Self {
        Self { s, i: 0, om }
    }

    fn rest(&self) -> &'a str {
        &self.s[self.i..]
    }

    fn at_end(&self) -> bool {
        self.i == self.s.len()
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn peek_blank(&self) -> bool {
        matches!(self.peek(), Some(' ' | '\t'))
    }

    /// One space (OpenMetrics) or a run of spaces and tabs (classic).
    fn blanks(&mut self) -> Result<(), String> {
        if self.om {
            if self.peek() != Some(' ') {
                return Err(self.expected("one space"));
            }
            self.i += 1;
            if self.peek_blank() {
                return Err(
                    "more than one space between the parts of a line (OpenMetrics has one)".into(),
                );
            }
            return Ok(());
        }
        let start = self.i;
        while self.peek_blank() {
            self.i += 1;
        }
        if self.i == start {
            return Err(self.expected("a space"));
        }
        Ok(())
    }

    /// Optional blanks inside braces (classic only).
    fn inner_blanks(&mut self) {
        if !self.om {
            while self.peek_blank() {
                self.i += 1;
            }
        }
    }

    fn expected(&self, what: &str) -> String {
        match self.peek() {
            None => format!("expected {what}, found the end of the line"),
            Some(_) => format!("expected {what}, found {}", excerpt(self.rest())),
        }
    }

    /// The characters up to the next blank.
    fn word(&mut self) -> &'a str {
        let start = self.i;
        while let Some(c) = self.peek() {
            if c == ' ' || c == '\t' {
                break;
            }
            self.i += c.len_utf8();
        }
        &self.s[start..self.i]
    }

    /// `[a-zA-Z_:][a-zA-Z0-9_:]*`
    fn metric_name(&mut self) -> Result<String, String> {
        self.name(true)
            .ok_or_else(|| self.expected("a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)"))
    }

    /// `[a-zA-Z_][a-zA-Z0-9_]*`
    fn label_name(&mut self) -> Result<String, String> {
        self.name(false)
            .ok_or_else(|| self.expected("a label name ([a-zA-Z_][a-zA-Z0-9_]*)"))
    }

    fn name(&mut self, colons: bool) -> Option<String> {
        let bytes = self.s.as_bytes();
        let start = self.i;
        let first = |b: u8| b.is_ascii_alphabetic() || b == b'_' || (colons && b == b':');
        let rest = |b: u8| first(b) || b.is_ascii_digit();
        if !bytes.get(self.i).is_some_and(|&b| first(b)) {
            return None;
        }
        self.i += 1;
        while bytes.get(self.i).is_some_and(|&b| rest(b)) {
            self.i += 1;
        }
        Some(self.s[start..self.i].to_owned())
    }

    /// `{name="value",...}`
    fn labels(&mut self) -> Result<Vec<(String, String)>, String> {
        self.i += 1; // '{'
        let mut labels: Vec<(String, String)> = Vec::new();
        loop {
            self.inner_blanks();
            if self.peek() == Some('}') && (labels.is_empty() || !self.om) {
                self.i += 1;
                return Ok(labels);
            }
            let name = self.label_name()?;
            self.inner_blanks();
            if self.peek() != Some('=') {
                return Err(self.expected(&format!("= after the label name {name}")));
            }
            self.i += 1;
            self.inner_blanks();
            let value = self.label_value()?;
            if labels.iter().any(|(n, _)| *n == name) {
                return Err(format!("the label {name} appears twice in one series"));
            }
            labels.push((name, value));
            self.inner_blanks();
            match self.peek() {
                Some(',') => self.i += 1,
                Some('}') => {
                    self.i += 1;
                    return Ok(labels);
                }
                _ => return Err(self.expected(", or } after a label")),
            }
        }
    }

    /// `"..."` with the escapes `\\`, `\"`, `\n`.
    fn label_value(&mut self) -> Result<String, String> {
        if self.peek() != Some('"') {
            return Err(self.expected("a quoted label value"));
        }
        self.i += 1;
        let mut value = String::new();
        let mut chars = self.rest().char_indices();
        while let Some((at, c)) = chars.next() {
            match c {
                '"' => {
                    self.i += at + 1;
                    return Ok(value);
                }
                '\\' => match chars.next() {
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, other)) => {
                        return Err(format!(
                            "the escape \\{} in a label value (only \\\\, \\\" and \\n are escapes)",
                            excerpt(&other.to_string())
                        ));
                    }
                    None => break,
                },
                c => value.push(c),
            }
        }
        Err("a label value without its closing quote".into())
    }

    /// A number, `NaN`, `+Inf`, `-Inf` (also `Inf`).
    fn value(&mut self) -> Result<f64, String> {
        let word = self.word();
        parse_number(word).ok_or_else(|| {
            if word.is_empty() {
                "a sample without a value".to_owned()
            } else {
                format!(
                    "{} is not a sample value (a number, NaN, +Inf or -Inf)",
                    excerpt(word)
                )
            }
        })
    }

    /// Milliseconds as an integer (classic) or seconds as a number
    /// (OpenMetrics).
    fn timestamp(&mut self) -> Result<(), String> {
        let word = self.word();
        let ok = if self.om {
            parse_number(word).is_some_and(f64::is_finite)
        } else {
            let digits = word.strip_prefix('-').unwrap_or(word);
            !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
        };
        if ok {
            Ok(())
        } else {
            Err(format!("{} is not a timestamp", excerpt(word)))
        }
    }

    /// ` # {labels} value [timestamp]` after an OpenMetrics sample.
    fn exemplar(&mut self) -> Result<(), String> {
        self.i += 1; // '#'
        self.blanks()?;
        if self.peek() != Some('{') {
            return Err(self.expected("an exemplar's labels"));
        }
        self.labels()?;
        self.blanks()?;
        self.value()?;
        if !self.at_end() {
            self.blanks()?;
            self.timestamp()?;
        }
        Ok(())
    }
}

/// A sample value as the formats write it; `None` for anything else
/// (Rust's own `inf`, `infinity`, `nan` spellings and hex included).
fn parse_number(word: &str) -> Option<f64> {
    match word {
        "NaN" => return Some(f64::NAN),
        "+Inf" | "Inf" => return Some(f64::INFINITY),
        "-Inf" => return Some(f64::NEG_INFINITY),
        _ => {}
    }
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'))
        && word.bytes().any(|b| b.is_ascii_digit());
    if plain { word.parse().ok() } else { None }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn reads_the_classic_format_as_vllm_writes_it() {
        let text = "# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.\n\
                    # TYPE vllm:spec_decode_num_drafts_total counter\n\
                    vllm:spec_decode_num_drafts_total{engine=\"0\",model_name=\"m\"} 100.0\n\
                    # HELP vllm:spec_decode_num_drafts_created Number of spec decoding drafts.\n\
                    # TYPE vllm:spec_decode_num_drafts_created gauge\n\
                    vllm:spec_decode_num_drafts_created{engine=\"0\",model_name=\"m\"} 1.7e+09\n\
                    \n\
                    # a comment\n\
                    x{a=\"q\\\"uote\\\\ \\n\",}   2 1700000000000\n";
        let e = parse(text).unwrap();
        assert_eq!(e.format, Format::Classic);
        assert_eq!(e.samples.len(), 3);
        assert_eq!(e.samples[0].value, 100.0);
        assert_eq!(e.samples[0].label("model_name"), Some("m"));
        assert_eq!(e.samples[2].label("a"), Some("q\"uote\\ \n"));
        assert_eq!(
            e.type_of("vllm:spec_decode_num_drafts_total"),
            Some("counter")
        );
        assert_eq!(
            e.type_of("vllm:spec_decode_num_drafts_created"),
            Some("gauge")
        );
    }

    #[test]
    fn reads_openmetrics_with_families_exemplars_and_eof() {
        let text = "# HELP d Drafts.\n# TYPE d counter\nd_total{m=\"a\"} 5 # {trace_id=\"x\"} 1 1.5\n\
                    d_created{m=\"a\"} 1.7e9\n# UNIT d seconds\n# EOF\n";
        let e = parse(text).unwrap();
        assert_eq!(e.format, Format::OpenMetrics);
        assert_eq!(e.samples.len(), 2);
        assert_eq!(e.type_of("d_total"), Some("counter"));
        assert_eq!(e.type_of("d_created"), Some("counter"));
    }

    #[test]
    fn refuses_what_it_does_not_understand_naming_the_line() {
        assert!(err("<!DOCTYPE html><html>").contains("HTML"));
        assert_eq!(
            err("a 1\nb{x=\"1} 2\n"),
            "line 2: a label value without its closing quote"
        );
        assert_eq!(err("a 1\na 2\n"), "line 2: the series a appears twice");
        assert_eq!(
            err("a{x=\"1\",y=\"2\"} 1\na{y=\"2\",x=\"1\"} 2\n"),
            "line 2: the series a{y=\"2\",x=\"1\"} appears twice"
        );
        assert!(err("a{x=\"\\t\"} 1\n").contains("the escape \\\"t\""));
        assert!(err("a one\n").contains("\"one\" is not a sample value"));
        assert!(err("a 0x10\n").contains("is not a sample value"));
        assert!(err("a inf\n").contains("is not a sample value"));
        assert!(err("a\n").contains("expected a space"));
        assert!(err("a 1 2 3\n").contains("unexpected text"));
        assert!(err("a 1 1.5\n").contains("not a timestamp"));
        assert!(err("9a 1\n").contains("expected a metric name"));
        assert!(err("a{x=\"1\",x=\"2\"} 1\n").contains("appears twice in one series"));
        assert!(err("# TYPE a counter\n# TYPE a counter\n").contains("a second # TYPE"));
        assert!(err("a 1\n# TYPE a counter\n").contains("after samples"));
        assert!(err("# TYPE a widget\n").contains("not a type"));
        // OpenMetrics is stricter.
        assert!(err("a_total 1\n\n# EOF\n").contains("blank line"));
        assert!(err("a_total  1\n# EOF\n").contains("more than one space"));
        assert!(err("# hello\n# EOF\n").contains("only the HELP"));
        assert!(err("a_total{x=\"1\",} 1\n# EOF\n").contains("expected a label name"));
        assert!(err("# EOF\na 1\n# EOF\n").starts_with("line 1: text after # EOF"));
        // Values are the caller's to judge.
        let e = parse("a NaN\nb -Inf\nc -1\n").unwrap();
        assert!(e.samples[0].value.is_nan() && e.samples[2].value == -1.0);
        assert_eq!(parse("").unwrap().samples.len(), 0);
    }

    mod round_trip {
        use proptest::prelude::*;
        use specdec_metrics::{AcceptanceHistogram, SpecDecodeCollector, TextFormat};

        use super::super::*;

        /// The (k, a) steps of a histogram of K = `max`.
        fn steps(max: usize) -> impl Strategy<Value = Vec<(usize, usize)>> {
            prop::collection::vec((0..=max, 0..=max), 0..60).prop_map(move |v| {
                v.into_iter()
                    .map(|(k, a)| (k, a.min(k)))
                    .collect::<Vec<_>>()
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]

            /// Whatever the collector writes, in either format, with any
            /// prefix and model name (quotes, backslashes, newlines and
            /// non-ASCII included), reads back as exactly its counters.
            #[test]
            fn the_collectors_text_reads_back_as_its_counters(
                max in 1usize..6,
                seed_steps in steps(5),
                model in "[a-z\"\\\\\n é]{0,8}",
                vllm in any::<bool>(),
                open_metrics in any::<bool>(),
            ) {
                let mut h = AcceptanceHistogram::new(max).unwrap();
                for (k, a) in seed_steps {
                    let _ = h.observe(k.min(max), a.min(max));
                }
                let prefix = if vllm { "vllm:spec_decode" } else { "spec_decode" };
                let collector = SpecDecodeCollector::from_histogram(h.clone())
                    .with_prefix(prefix).unwrap()
                    .with_const_labels([("model_name", model.as_str())]).unwrap();
                let format = if open_metrics { TextFormat::OpenMetrics } else { TextFormat::PrometheusText };
                let text = collector.encode_text(format);
                let e = parse(&text).unwrap();
                prop_assert_eq!(e.format == Format::OpenMetrics, open_metrics);
                let value = |family: &str, labels: &[(&str, String)]| -> f64 {
                    let name = format!("{prefix}_{family}");
                    let found: Vec<&Sample> = e.samples.iter().filter(|s| s.name == name
                        && s.label("model_name") == Some(model.as_str())
                        && labels.iter().all(|(n, v)| s.label(n) == Some(v.as_str()))).collect();
                    assert_eq!(found.len(), 1, "{name} {labels:?}");
                    found[0].value
                };
                prop_assert_eq!(value("num_drafts_total", &[]), h.num_spec_steps() as f64);
                prop_assert_eq!(value("num_draft_tokens_total", &[]), h.num_draft_tokens() as f64);
                prop_assert_eq!(value("num_accepted_tokens_total", &[]), h.num_accepted_draft_tokens() as f64);
                for (i, &n) in h.num_accepted_tokens_per_pos().iter().enumerate() {
                    prop_assert_eq!(value("num_accepted_tokens_per_pos_total", &[("position", i.to_string())]), n as f64);
                }
                for k in 0..=max {
                    for a in 0..=k {
                        prop_assert_eq!(
                            value("acceptance_by_draft_length_total", &[("draft_length", k.to_string()), ("accepted", a.to_string())]),
                            h.count(k, a) as f64
                        );
                    }
                }
                prop_assert_eq!(e.type_of(&format!("{prefix}_num_drafts_total")), Some("counter"));
            }
        }
    }
}
