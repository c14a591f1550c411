//! The readers' errors: [`Error`], a message that names the settings it
//! is about by [`Setting`], never by a program's flags; and
//! [`SourceError`], what a [`Source`](crate::Source) gives instead of
//! counts.
//!
//! `Display` names a setting by its field in [`Settings`](crate::Settings)
//! or the source (`` `max_bytes` ``); a program shows it as its own flag
//! with [`Message::naming`] (`--max-bytes`), so that the message is the one
//! its user can act on.

use std::fmt;

/// A setting an [`Error`] names: a field of [`Settings`](crate::Settings)
/// or of a source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Setting {
    /// The scrape of [`Scrape`](crate::source::scrape::Scrape): its
    /// `source`.
    Metrics,
    /// The earlier scrape of [`Scrape`](crate::source::scrape::Scrape):
    /// its `since`.
    Since,
    /// The server of [`PrometheusQuery`](crate::source::prometheus_api::PrometheusQuery).
    Prometheus,
    /// Its `window`.
    Window,
    /// Its `selector`.
    Selector,
    /// Its `at`.
    At,
    /// [`Settings::by`](crate::Settings::by).
    By,
    /// [`Settings::prefix`](crate::Settings::prefix).
    Prefix,
    /// [`Settings::engine`](crate::Settings::engine).
    Engine,
    /// [`Settings::max_draft_len`](crate::Settings::max_draft_len): `K`.
    MaxDraftLen,
    /// [`Limits::max_bytes`](crate::http::Limits::max_bytes).
    MaxBytes,
    /// [`Limits::timeout`](crate::http::Limits::timeout).
    Timeout,
    /// The input of a log source: its [`LogSource::name`](crate::source::LogSource::name)
    /// in [`LOG_SOURCES`](crate::source::LOG_SOURCES) (`vllm_log`).
    Log(&'static str),
    /// [`LogOptions::by_request`](crate::source::LogOptions::by_request).
    ByRequest,
}

impl Setting {
    /// Its name as a field (`max_bytes`; a log source's name): `Display`
    /// writes it in backquotes.
    pub fn name(self) -> &'static str {
        match self {
            Setting::Metrics => "metrics",
            Setting::Since => "since",
            Setting::Prometheus => "prometheus",
            Setting::Window => "window",
            Setting::Selector => "selector",
            Setting::At => "at",
            Setting::By => "by",
            Setting::Prefix => "prefix",
            Setting::Engine => "engine",
            Setting::MaxDraftLen => "max_draft_len",
            Setting::MaxBytes => "max_bytes",
            Setting::Timeout => "timeout",
            Setting::Log(name) => name,
            Setting::ByRequest => "by_request",
        }
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`", self.name())
    }
}

/// One piece of an [`Error`]'s message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    /// Text, as it is.
    Text(String),
    /// A setting, named as the reader of the message knows it.
    Setting(Setting),
}

impl From<&str> for Piece {
    fn from(s: &str) -> Self {
        Piece::Text(s.to_owned())
    }
}

impl From<String> for Piece {
    fn from(s: String) -> Self {
        Piece::Text(s)
    }
}

impl From<Setting> for Piece {
    fn from(s: Setting) -> Self {
        Piece::Setting(s)
    }
}

/// Text that names settings by [`Setting`]: an [`Error`]'s, or a note on
/// what a reading assumed.
///
/// ```
/// use specdec_ingest::{Error, Setting, message};
///
/// let e = message!["run.log: larger than ", Setting::MaxBytes, " 1 MiB"];
/// assert_eq!(e.to_string(), "run.log: larger than `max_bytes` 1 MiB");
/// let flag = |s: Setting| if s == Setting::MaxBytes { "--max-bytes" } else { s.name() };
/// assert_eq!(e.naming(&flag).to_string(), "run.log: larger than --max-bytes 1 MiB");
/// assert_eq!(Error::new("plain").to_string(), "plain");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pieces: Vec<Piece>,
}

/// Input that cannot be read, or contradicts itself: the place and the
/// reason, the settings it is about named by [`Setting`].
pub type Error = Message;

/// A [`Message`] from pieces: text (`&str`, `String`) and [`Setting`]s, in
/// order.
#[macro_export]
macro_rules! message {
    ($($piece:expr),+ $(,)?) => {
        $crate::error::Message::from_pieces(vec![$($crate::error::Piece::from($piece)),+])
    };
}

impl Message {
    /// A message `msg`, naming no setting.
    pub fn new(msg: impl fmt::Display) -> Self {
        Self {
            pieces: vec![Piece::Text(msg.to_string())],
        }
    }

    /// A message of `pieces`, in order ([`message!`]).
    pub fn from_pieces(pieces: Vec<Piece>) -> Self {
        Self { pieces }
    }

    /// This message with `head` before it (`"run.log: "`).
    pub fn after(mut self, head: impl Into<Piece>) -> Self {
        self.pieces.insert(0, head.into());
        self
    }

    /// This message with `tail` after it.
    pub fn then(mut self, tail: impl Into<Piece>) -> Self {
        self.pieces.push(tail.into());
        self
    }

    /// The settings the message names, in order.
    pub fn settings(&self) -> impl Iterator<Item = Setting> + '_ {
        self.pieces.iter().filter_map(|p| match p {
            Piece::Setting(s) => Some(*s),
            Piece::Text(_) => None,
        })
    }

    /// The message, the settings named by `name` (a program's flags).
    pub fn naming<'a>(&'a self, name: &'a dyn Fn(Setting) -> &'static str) -> Named<'a> {
        Named { error: self, name }
    }

    /// Writes the message, each setting by `n`, or as a field without it.
    fn write(
        &self,
        f: &mut fmt::Formatter<'_>,
        n: Option<&dyn Fn(Setting) -> &'static str>,
    ) -> fmt::Result {
        for p in &self.pieces {
            match (p, n) {
                (Piece::Text(t), _) => f.write_str(t)?,
                (Piece::Setting(s), Some(n)) => f.write_str(n(*s))?,
                (Piece::Setting(s), None) => write!(f, "{s}")?,
            }
        }
        Ok(())
    }
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, None)
    }
}

impl std::error::Error for Message {}

impl From<String> for Message {
    fn from(s: String) -> Self {
        Message::new(s)
    }
}

/// A [`Message`] with the settings named by a program
/// ([`Message::naming`]).
pub struct Named<'a> {
    error: &'a Message,
    name: &'a dyn Fn(Setting) -> &'static str,
}

impl fmt::Display for Named<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.write(f, Some(self.name))
    }
}

/// Why a [`Source`](crate::Source) gave no counters.
#[derive(Debug)]
pub enum SourceError {
    /// The input cannot be read, or contradicts itself.
    Error(Error),
    /// The input was read, but its counts cannot be told (drafts of
    /// different lengths that it does not count): the place and the
    /// reason. Not an error of the input: a program says so as it says
    /// that counters give bounds only.
    NotIdentified(Error),
}

impl From<Error> for SourceError {
    fn from(e: Error) -> Self {
        Self::Error(e)
    }
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Error(e) | Self::NotIdentified(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for SourceError {}
