//! Exact n-gram what-if traces: for every output position of a request,
//! how many tokens an n-gram (prompt-lookup) drafter could propose there
//! and how many of them the true output confirms.
//!
//! With greedy verification the output does not depend on the drafting
//! policy, and an n-gram drafter's proposal at output position `t` depends
//! only on the context (the prompt and the output before `t`). So each
//! position `t = 1..M-1` of an output of `M` tokens has two numbers:
//! `L_t`, the length of the proposal (0: no match), and `m_t <= L_t`, how
//! many of its tokens agree with the output from `t` on. Drafting `k` at
//! `t` drafts `min(k, L_t)` tokens, accepts `a = min(k, m_t)` and moves to
//! `min(t + a + 1, M)`. Position 0 is never drafted: the first output token
//! comes from the prefill. `specdec-metrics ngram` writes these files
//! from [requests](#requests); the engine model reads them.
//!
//! # The format
//!
//! JSON Lines, UTF-8. An optional first line of metadata, recognised by its
//! key `"specdec_trace"` (the format's version: 2, written since suffix
//! decoding; files of version 1, which has neither `below` nor the keys
//! marked *v2* below, are read as before):
//!
//! ```json
//! {"specdec_trace":2,"tokenizer":"o200k_base","rule":"vllm","min_n":5,"max_n":5,"cap":64,"eos":true,"greedy":true}
//! ```
//!
//! | key | meaning |
//! |-----|---------|
//! | `tokenizer`, `rule` | the tokenizer and the drafter's rule (`vllm`, `trtllm`, `llamacpp-simple`, `hf`, `suffix`) |
//! | `min_n`, `max_n` | the n-grams matched; for `suffix`, 1 and `depth - 1` (the match lengths possible) |
//! | `cap` | every value is at most this |
//! | `eos`, `greedy` | whether outputs end with an end-of-sequence token; whether they came from greedy decoding |
//! | `num_speculative_tokens` | *v2*, optional: the engine's own `k` for these settings (for `suffix`, vLLM's default is the depth) |
//! | `suffix` | *v2*, required with the rule `suffix` and only with it: `{"depth", "factor", "offset", "min_prob", "cache"}`, vLLM's `suffix_decoding_max_tree_depth`, `suffix_decoding_max_spec_factor`, Arctic's `max_spec_offset`, `suffix_decoding_min_token_prob`, `suffix_decoding_max_cached_requests` |
//!
//! A suffix-decoding trace:
//!
//! ```json
//! {"specdec_trace":2,"tokenizer":"o200k_base","rule":"suffix","min_n":1,"max_n":23,"cap":24,"eos":true,"greedy":true,"num_speculative_tokens":24,"suffix":{"depth":24,"factor":1.0,"offset":0.0,"min_prob":0.1,"cache":10000}}
//! ```
//!
//! then one line per request:
//!
//! ```json
//! {"id":"r1","prompt_tokens":12,"output_tokens":4,"proposal":[0,3,2],"match":[0,2,1],"ngram":[0,2,3]}
//! ```
//!
//! | key | meaning |
//! |-----|---------|
//! | `id` | a string or an integer, as given; the line number when absent |
//! | `prompt_tokens` | the prompt's length in tokens (0 when absent) |
//! | `output_tokens` | `M`, counting the end-of-sequence token when there is one (required) |
//! | `proposal` | `L_1..L_{M-1}`: entry `j` is output position `j + 1` (required; `[]` when `M <= 1`) |
//! | `match` | `m_1..m_{M-1}`, each `<= ` its `proposal` entry and `<= M - t` (required) |
//! | `ngram` | optional: the `n` of the n-gram matched at each position (0: none); for `suffix`, the match length of the draft at the cap |
//! | `below` | *v2*, optional: `[[j, k, L, m], ...]`, the outcomes at caps below the cap where they differ (next section) |
//! | `score` | *v2*, optional (`suffix`): the score of the draft at the cap at each position, in sixteenths of a token rounded down, at most 255 (a score of 15.94 or more reads 255); 0 where there is no draft |
//!
//! Every value is at most the cap: the metadata's `cap`, else
//! [`DEFAULT_CAP`]; a cap is at most [`MAX_CAP`], so values fit in a `u8`.
//! A proposal longer than the cap is stored as the cap: the replay of a
//! draft length `k <= cap` is exact.
//!
//! ## Outcomes below the cap
//!
//! An n-gram drafter's proposal at a cap `k` is its proposal at the cap cut
//! to `k`: drafting `k` drafts `min(k, L_t)` and `min(k, m_t)` of it holds.
//! A suffix drafter's is not: it chooses the match length on the scores of
//! drafts cut at `k`, so a smaller cap can choose another draft. `below`
//! lists, per position, the caps where the outcome differs from that: an
//! entry `[j, k, L, m]` says that at output position `j + 1` and at every
//! cap above the position's previous entry's `k`, up to `k`, drafting
//! that cap drafts `min(cap, L)` and `min(cap, m)` of it holds. Caps above
//! the position's last entry read the arrays. Entries are in increasing
//! order of `j`, then `k`; `k` is below the trace's cap, `L <= k`, `m <=
//! L` and `m` at most the output tokens after the position
//! ([`TraceRequest::outcome`]).
//!
//! Blank lines are skipped. Anything else is an error naming the line and
//! the key ([`TraceError`]), after which the reader yields nothing more: a
//! line that is not UTF-8, not JSON (a leading byte-order mark is named) or
//! not an object; a key given twice in one object; a missing required
//! key; an array of another length than `max(M - 1, 0)`; a value above the
//! cap; `match[j] > proposal[j]`; a `below` entry out of order or out of
//! its bounds; a line longer than the limit (read in
//! bounded chunks, never held whole; [`DEFAULT_MAX_LINE_BYTES`] unless
//! [`TraceReader::with_max_line_bytes`] says otherwise); a metadata line
//! after the first line.
//!
//! # Requests
//!
//! What a trace is made from: JSON Lines, UTF-8, one request a line,
//! `{"prompt": TEXT, "output": TEXT}` or `{"messages": [...], "output":
//! TEXT}` (exactly one of `prompt` and `messages`), with an optional
//! `"id"` (a string or an integer; the line number when absent); other
//! keys are ignored, blank lines skipped. As in a trace, a key given twice
//! in one object is an error, and a leading byte-order mark is named.
//! [`RequestReader`] reads them, one bounded line at a time, and stops at
//! the first line that is not a request ([`RequestError`]).
//!
//! ## Messages
//!
//! `"messages"` is a chat's turns before the output, each `{"role": TEXT,
//! "content": TEXT}` (other keys ignored), as agents send them: every call
//! resends the conversation so far. The prompt is the turns rendered in a
//! ChatML-like template, then the header of the assistant's turn
//! ([`ASSISTANT_HEADER`]), whose content is the output:
//!
//! ```text
//! <|im_start|>ROLE\nCONTENT<|im_end|>\n   (per message, in order)
//! <|im_start|>assistant\n
//! ```
//!
//! The markers are plain text here: no special tokens. The role is written
//! as given (a tool's result may say `tool name=NAME`), the content too:
//! tool calls and results are text in it. So `{"messages":
//! [{"role":"user","content":"hi"}], "output": "hello"}` is the request
//! `{"prompt": "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
//! "output": "hello"}` ([`Prompt::render`]), except that a reader may
//! tokenize it one message at a time (`specdec-metrics ngram` does). A
//! bad `messages` value (not an array; an item that is not an object, or
//! whose `role` or `content` is missing or not a string) and a request
//! with both `prompt` and `messages` are errors naming the line and the
//! key `messages`, and the message by its place (`message 2 of 5`).
//!
//! # Example
//!
//! ```
//! use specdec_ingest::trace::{TraceMeta, TraceReader, TraceRequest, write_meta, write_request};
//!
//! let meta = TraceMeta {
//!     tokenizer: "o200k_base".into(), rule: "vllm".into(),
//!     min_n: 2, max_n: 5, cap: 64, eos: true, greedy: true,
//!     num_speculative_tokens: None, suffix: None,
//! };
//! let request = TraceRequest {
//!     id: "r1".into(), prompt_tokens: 12, output_tokens: 4,
//!     proposal: vec![0, 3, 2], matched: vec![0, 2, 1], ngram: None, score: None,
//!     below: Vec::new(),
//! };
//! let mut file = Vec::new();
//! write_meta(&mut file, &meta).unwrap();
//! write_request(&mut file, &request).unwrap();
//!
//! let mut reader = TraceReader::new(file.as_slice());
//! assert_eq!(reader.meta().unwrap(), Some(&meta));
//! let back: Vec<TraceRequest> = reader.collect::<Result<_, _>>().unwrap();
//! assert_eq!(back, vec![request]);
//! ```

use std::fmt;
use std::io::{self, BufRead, Write};

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::lines::{LineError, Lines, Overlong};
use crate::text::excerpt;

/// The cap of a file without metadata: values are at most 64.
pub const DEFAULT_CAP: usize = 64;
/// The largest cap: values are stored as `u8`.
pub const MAX_CAP: usize = 255;
/// The longest line a [`TraceReader`] accepts unless told otherwise (64 MiB,
/// the line terminator not counted).
pub const DEFAULT_MAX_LINE_BYTES: usize = 64 << 20;
/// The version written in the metadata line's `"specdec_trace"` key; the
/// reader reads this one and version 1.
pub const FORMAT_VERSION: u64 = 2;

/// The `score` array's unit: this many per token (sixteenths of a token).
pub const SCORE_PER_TOKEN: f32 = 16.0;

/// What the optional first line says about how the trace was made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceMeta {
    /// The tokenizer (`o200k_base`, `cl100k_base`, or a file's name).
    pub tokenizer: String,
    /// The drafter's rule (`vllm`, `trtllm`, `llamacpp-simple`, `hf`).
    pub rule: String,
    /// The shortest n-gram matched.
    pub min_n: usize,
    /// The longest n-gram matched.
    pub max_n: usize,
    /// Every value is at most this (1..=[`MAX_CAP`]).
    pub cap: usize,
    /// Whether each output ends with an end-of-sequence token (counted in
    /// `output_tokens`).
    pub eos: bool,
    /// False when the outputs came from sampled decoding: the trace is then
    /// not an exact counterfactual.
    pub greedy: bool,
    /// The engine's own `k` for these settings, when it has one (version
    /// 2): the static length an operator runs today.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_speculative_tokens: Option<usize>,
    /// The suffix drafter's settings, with the rule `suffix` only (version
    /// 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suffix: Option<SuffixMeta>,
}

/// The settings of a suffix-decoding trace (vLLM's `method: suffix`).
///
/// ```
/// use specdec_ingest::trace::{SuffixMeta, TraceMeta, TraceReader, write_meta};
/// let meta = TraceMeta {
///     tokenizer: "o200k_base".into(), rule: "suffix".into(), min_n: 1, max_n: 23,
///     cap: 24, eos: true, greedy: true, num_speculative_tokens: Some(24),
///     suffix: Some(SuffixMeta { depth: 24, factor: 1.0, offset: 0.0, min_prob: 0.1, cache: 10_000 }),
/// };
/// let mut file = Vec::new();
/// write_meta(&mut file, &meta).unwrap();
/// assert!(file.ends_with(b"\"suffix\":{\"depth\":24,\"factor\":1.0,\"offset\":0.0,\"min_prob\":0.1,\"cache\":10000}}\n"));
/// assert_eq!(TraceReader::new(file.as_slice()).meta().unwrap(), Some(&meta));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuffixMeta {
    /// The trees' depth, 2..=256 (`suffix_decoding_max_tree_depth`).
    pub depth: usize,
    /// `suffix_decoding_max_spec_factor`.
    pub factor: f32,
    /// Arctic's `max_spec_offset` (vLLM passes none: 0).
    pub offset: f32,
    /// `suffix_decoding_min_token_prob`.
    pub min_prob: f32,
    /// `suffix_decoding_max_cached_requests` (0: no global tree).
    pub cache: usize,
}

// The reader refuses a value that is not finite: equality is total.
impl Eq for SuffixMeta {}

/// An outcome below the trace's cap (see [the format](self#outcomes-below-the-cap)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Below {
    /// `j`: output position `j + 1`.
    pub position: u32,
    /// `k`: the largest cap this entry holds at (below the trace's cap).
    pub cap: u8,
    /// `L`: the draft's length at these caps, at most `k`.
    pub proposal: u8,
    /// `m`: how many of its tokens hold, at most `L`.
    pub matched: u8,
}

/// One request of a trace.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceRequest {
    /// A string or an integer, as given; the line number when absent.
    pub id: Value,
    /// The prompt's length in tokens.
    pub prompt_tokens: u64,
    /// `M`, counting the end-of-sequence token when there is one.
    pub output_tokens: u64,
    /// `L_1..L_{M-1}` (entry `j` is output position `j + 1`), empty when
    /// `M <= 1`.
    pub proposal: Vec<u8>,
    /// `m_1..m_{M-1}`; JSON key `"match"`.
    pub matched: Vec<u8>,
    /// The matched `n` at each position (0 = no match); JSON key `"ngram"`.
    pub ngram: Option<Vec<u8>>,
    /// The suffix draft's score at the cap at each position, in
    /// sixteenths of a token (rounded down, saturated at 255); JSON key
    /// `"score"`.
    pub score: Option<Vec<u8>>,
    /// The outcomes below the cap where they differ (empty for an n-gram
    /// drafter), in order.
    pub below: Vec<Below>,
}

impl TraceRequest {
    /// The number of positions that could be drafted: `max(M - 1, 0)`.
    pub fn positions(&self) -> usize {
        self.proposal.len()
    }

    /// Drafting `k` (`1..=` the cap) at position index `j`: the tokens
    /// drafted and the tokens of them that hold.
    ///
    /// ```
    /// use specdec_ingest::trace::{Below, TraceRequest};
    /// let r = TraceRequest {
    ///     id: 1.into(), prompt_tokens: 0, output_tokens: 9,
    ///     proposal: vec![0, 0, 6, 0, 0, 0, 0, 0], matched: vec![0, 0, 5, 0, 0, 0, 0, 0], ngram: None, score: None,
    ///     // At caps 1 and 2 position 3 drafts another draft, which fails.
    ///     below: vec![Below { position: 2, cap: 2, proposal: 2, matched: 0 }],
    /// };
    /// assert_eq!((r.outcome(2, 1), r.outcome(2, 2), r.outcome(2, 3), r.outcome(2, 8)), ((1, 0), (2, 0), (3, 3), (6, 5)));
    /// ```
    pub fn outcome(&self, j: usize, k: usize) -> (usize, usize) {
        let i = self
            .below
            .partition_point(|b| (b.position as usize, usize::from(b.cap)) < (j, k));
        let (l, m) = match self.below.get(i) {
            Some(b) if b.position as usize == j => (b.proposal, b.matched),
            _ => (self.proposal[j], self.matched[j]),
        };
        (k.min(usize::from(l)), k.min(usize::from(m)))
    }
}

/// A malformed line of a trace, or of a [requests](self#requests) file: the
/// line, the key when one is to blame, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceError {
    /// The line number, from 1.
    pub line: u64,
    /// The key at fault, if one is.
    pub field: Option<&'static str>,
    /// What is wrong.
    pub message: String,
}

impl TraceError {
    fn new(line: u64, field: Option<&'static str>, message: impl Into<String>) -> Self {
        Self {
            line,
            field,
            message: message.into(),
        }
    }
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.field {
            Some(field) => write!(f, "line {}: field \"{field}\": {}", self.line, self.message),
            None => write!(f, "line {}: {}", self.line, self.message),
        }
    }
}

impl std::error::Error for TraceError {}

/// Reads a trace one line at a time (see the [module docs](self)): the
/// metadata, then one [`TraceRequest`] per line. After the first error it
/// yields nothing more.
pub struct TraceReader<R: BufRead> {
    lines: Lines<R>,
    meta: Option<TraceMeta>,
    /// Whether the first non-blank line was read (and taken as metadata or
    /// kept in `pending`).
    started: bool,
    /// The first non-blank line when it is a request: (line number, object).
    pending: Option<NumberedObject>,
    /// An error met while looking for the metadata, yielded next.
    failed: Option<TraceError>,
    done: bool,
}

impl<R: BufRead> TraceReader<R> {
    /// A reader of `reader`, which it reads one line at a time, each at
    /// most [`DEFAULT_MAX_LINE_BYTES`] long.
    pub fn new(reader: R) -> Self {
        Self::with_max_line_bytes(reader, DEFAULT_MAX_LINE_BYTES)
    }

    /// A reader of `reader` accepting lines of at most `n` bytes.
    pub fn with_max_line_bytes(reader: R, n: usize) -> Self {
        Self {
            lines: Lines::new(reader, n, Overlong::Refuse),
            meta: None,
            started: false,
            pending: None,
            failed: None,
            done: false,
        }
    }

    /// The metadata line, reading the first line if it was not yet read;
    /// `None` for a file without one.
    pub fn meta(&mut self) -> Result<Option<&TraceMeta>, TraceError> {
        self.start()?;
        Ok(self.meta.as_ref())
    }

    /// The cap every value is checked against: the metadata's `cap`, or
    /// [`DEFAULT_CAP`] for a file without metadata.
    pub fn cap(&mut self) -> Result<usize, TraceError> {
        Ok(self.meta()?.map_or(DEFAULT_CAP, |m| m.cap))
    }

    /// The line number of the last line read (0 before the first).
    pub fn line(&self) -> u64 {
        self.lines.number()
    }

    fn start(&mut self) -> Result<(), TraceError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if self.started {
            return Ok(());
        }
        self.started = true;
        match self.next_object() {
            Ok(None) => Ok(()),
            Ok(Some((line, object))) => {
                if object.contains_key("specdec_trace") {
                    match parse_meta(line, object) {
                        Ok(meta) => {
                            self.meta = Some(meta);
                            Ok(())
                        }
                        Err(e) => self.fail(e),
                    }
                } else {
                    self.pending = Some((line, object));
                    Ok(())
                }
            }
            Err(e) => self.fail(e),
        }
    }

    fn fail(&mut self, e: TraceError) -> Result<(), TraceError> {
        self.failed = Some(e.clone());
        Err(e)
    }

    /// The next non-blank line as a JSON object, with its line number.
    fn next_object(&mut self) -> Result<Option<NumberedObject>, TraceError> {
        loop {
            // The number of the line read next, or refused.
            let line = self.lines.number() + 1;
            let buf = match self.lines.next_line() {
                Ok(Some(buf)) => buf,
                Ok(None) => return Ok(None),
                Err(LineError::Read { error, .. }) => {
                    return Err(TraceError::new(line, None, format!("cannot read: {error}")));
                }
                Err(LineError::TooLong { max, .. }) => {
                    return Err(TraceError::new(
                        line,
                        None,
                        format!("the line is longer than {max} bytes; the rest was not read"),
                    ));
                }
            };
            let text = utf8(line, buf)?;
            if text.trim().is_empty() {
                continue;
            }
            let value = parse_json(line, text)?.value;
            return match value {
                Value::Object(object) => Ok(Some((line, object))),
                other => Err(TraceError::new(
                    line,
                    None,
                    format!("not a JSON object but {}", kind(&other)),
                )),
            };
        }
    }

    fn next_request(&mut self) -> Result<Option<TraceRequest>, TraceError> {
        self.start()?;
        let cap = self.meta.as_ref().map_or(DEFAULT_CAP, |m| m.cap);
        let max_n = self.meta.as_ref().map(|m| m.max_n);
        let (line, object) = match self.pending.take() {
            Some(first) => first,
            None => match self.next_object()? {
                Some(next) => next,
                None => return Ok(None),
            },
        };
        if object.contains_key("specdec_trace") {
            return Err(TraceError::new(
                line,
                Some("specdec_trace"),
                "a metadata line is only allowed as the first line",
            ));
        }
        parse_request(line, object, cap, max_n).map(Some)
    }
}

impl<R: BufRead> Iterator for TraceReader<R> {
    type Item = Result<TraceRequest, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.next_request() {
            Ok(Some(request)) => Some(Ok(request)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// A non-blank line's object, with its line number.
type NumberedObject = (u64, Map<String, Value>);

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn parse_meta(line: u64, mut object: Map<String, Value>) -> Result<TraceMeta, TraceError> {
    let version = object
        .remove("specdec_trace")
        .as_ref()
        .and_then(Value::as_u64);
    if !matches!(version, Some(1..=FORMAT_VERSION)) {
        return Err(TraceError::new(
            line,
            Some("specdec_trace"),
            format!("this reader knows versions 1 to {FORMAT_VERSION} of the format only"),
        ));
    }
    if version == Some(1) {
        if let Some(key) = ["num_speculative_tokens", "suffix"]
            .into_iter()
            .find(|k| object.contains_key(*k))
        {
            return Err(TraceError::new(
                line,
                Some(key),
                "version 1 of the format has no such key (it came with version 2)",
            ));
        }
    }
    let meta: TraceMeta = serde_json::from_value(Value::Object(object))
        .map_err(|e| TraceError::new(line, None, format!("bad metadata: {e}")))?;
    if meta.cap == 0 || meta.cap > MAX_CAP {
        return Err(TraceError::new(
            line,
            Some("cap"),
            format!("{} is not in 1..={MAX_CAP}", meta.cap),
        ));
    }
    if meta.min_n == 0 || meta.min_n > meta.max_n || meta.max_n > MAX_CAP {
        return Err(TraceError::new(
            line,
            Some("max_n"),
            format!(
                "min_n {} and max_n {} do not satisfy 1 <= min_n <= max_n <= {MAX_CAP}",
                meta.min_n, meta.max_n
            ),
        ));
    }
    if let Some(k) = meta.num_speculative_tokens {
        if k == 0 || k > meta.cap {
            return Err(TraceError::new(
                line,
                Some("num_speculative_tokens"),
                format!("{k} is not in 1..=cap ({})", meta.cap),
            ));
        }
    }
    match (&meta.suffix, meta.rule == "suffix") {
        (None, true) => {
            return Err(TraceError::new(
                line,
                Some("suffix"),
                "the rule suffix needs its settings",
            ));
        }
        (Some(_), false) => {
            return Err(TraceError::new(
                line,
                Some("suffix"),
                format!("suffix settings with the rule {:?}", meta.rule),
            ));
        }
        (Some(s), true) => {
            if !(2..=MAX_CAP + 1).contains(&s.depth) {
                return Err(TraceError::new(
                    line,
                    Some("suffix"),
                    format!("depth {} is not in 2..={}", s.depth, MAX_CAP + 1),
                ));
            }
            if ![s.factor, s.offset, s.min_prob]
                .iter()
                .all(|x| x.is_finite())
            {
                return Err(TraceError::new(
                    line,
                    Some("suffix"),
                    "factor, offset and min_prob must be finite",
                ));
            }
        }
        (None, false) => {}
    }
    Ok(meta)
}

fn parse_request(
    line: u64,
    mut object: Map<String, Value>,
    cap: usize,
    max_n: Option<usize>,
) -> Result<TraceRequest, TraceError> {
    let id = parse_id(line, &mut object)?;
    let count =
        |object: &Map<String, Value>, key: &'static str, required: bool| match object.get(key) {
            None if required => Err(TraceError::new(line, Some(key), "missing")),
            None => Ok(0),
            Some(v) => v
                .as_u64()
                .ok_or_else(|| TraceError::new(line, Some(key), "must be a non-negative integer")),
        };
    let prompt_tokens = count(&object, "prompt_tokens", false)?;
    let output_tokens = count(&object, "output_tokens", true)?;
    let array = |object: &mut Map<String, Value>, key: &'static str, limit: usize| {
        position_array(line, object, key, limit, output_tokens)
    };
    let proposal = array(&mut object, "proposal", cap)?;
    let matched = array(&mut object, "match", cap)?;
    let ngram = if object.contains_key("ngram") {
        Some(array(&mut object, "ngram", max_n.unwrap_or(MAX_CAP))?)
    } else {
        None
    };
    let score = if object.contains_key("score") {
        Some(array(&mut object, "score", usize::from(u8::MAX))?)
    } else {
        None
    };
    check_matches(line, &proposal, &matched, output_tokens)?;
    let below = match object.remove("below") {
        None => Vec::new(),
        Some(value) => parse_below(line, value, cap, output_tokens)?,
    };
    Ok(TraceRequest {
        id,
        prompt_tokens,
        output_tokens,
        proposal,
        matched,
        ngram,
        score,
        below,
    })
}

/// A request's `below`: entries `[j, k, L, m]` in increasing `(j, k)`,
/// `j` a position, `k < cap`, `L <= k`, `m <= L` and `m` at most the
/// output tokens after position `j + 1`.
fn parse_below(
    line: u64,
    value: Value,
    cap: usize,
    output_tokens: u64,
) -> Result<Vec<Below>, TraceError> {
    let bad = |message: String| TraceError::new(line, Some("below"), message);
    let Value::Array(items) = value else {
        return Err(bad(format!("must be an array, not {}", kind(&value))));
    };
    let positions = output_tokens.saturating_sub(1);
    let mut out: Vec<Below> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let numbers: Option<Vec<u64>> = match item {
            Value::Array(v) if v.len() == 4 => v.iter().map(Value::as_u64).collect(),
            _ => None,
        };
        let Some([j, k, l, m]) = numbers.as_deref().map(|n| [n[0], n[1], n[2], n[3]]) else {
            return Err(bad(format!(
                "entry {i} is not [position, cap, proposal, match] of non-negative integers"
            )));
        };
        if j >= positions {
            return Err(bad(format!(
                "entry {i}: position {j} is not below the {positions} positions"
            )));
        }
        if k == 0 || k >= cap as u64 {
            return Err(bad(format!(
                "entry {i}: cap {k} is not in 1..{cap} (below the trace's cap)"
            )));
        }
        if l > k || m > l {
            return Err(bad(format!(
                "entry {i}: proposal {l} and match {m} must satisfy match <= proposal <= cap {k}"
            )));
        }
        let left = output_tokens - (j + 1);
        if m > left {
            return Err(bad(format!(
                "entry {i}: match {m}, but only {left} output tokens follow its position"
            )));
        }
        let entry = Below {
            position: j as u32,
            cap: k as u8,
            proposal: l as u8,
            matched: m as u8,
        };
        if let Some(prev) = out.last() {
            if (prev.position, prev.cap) >= (entry.position, entry.cap) {
                return Err(bad(format!(
                    "entry {i} is not after entry {} (by position, then cap)",
                    i - 1
                )));
            }
        }
        out.push(entry);
    }
    Ok(out)
}

/// A request's `id`: a string or an integer, its line number without one.
fn parse_id(line: u64, object: &mut Map<String, Value>) -> Result<Value, TraceError> {
    match object.remove("id") {
        None => Ok(Value::from(line)),
        Some(id) => id_value(id).map_err(|other| {
            TraceError::new(
                line,
                Some("id"),
                format!("must be a string or an integer, not {}", kind(&other)),
            )
        }),
    }
}

/// An id as given, when it is one (a string or an integer), else the value
/// back, for the message.
fn id_value(id: Value) -> Result<Value, Value> {
    match id {
        Value::String(_) => Ok(id),
        Value::Number(ref n) if n.is_u64() || n.is_i64() => Ok(id),
        other => Err(other),
    }
}

/// The array `key` of a request with `output_tokens` outputs: one entry
/// per position after the first, each at most `limit`.
fn position_array(
    line: u64,
    object: &mut Map<String, Value>,
    key: &'static str,
    limit: usize,
    output_tokens: u64,
) -> Result<Vec<u8>, TraceError> {
    let positions = output_tokens.saturating_sub(1);
    let Some(value) = object.remove(key) else {
        return Err(TraceError::new(line, Some(key), "missing"));
    };
    let Value::Array(items) = value else {
        return Err(TraceError::new(
            line,
            Some(key),
            format!("must be an array, not {}", kind(&value)),
        ));
    };
    if items.len() as u64 != positions {
        return Err(TraceError::new(
            line,
            Some(key),
            format!(
                "has {} entries, but output_tokens {output_tokens} needs {positions} (one per position after the first)",
                items.len()
            ),
        ));
    }
    items
        .iter()
        .enumerate()
        .map(|(j, v)| match v.as_u64() {
            Some(x) if x <= limit as u64 => Ok(x as u8),
            Some(x) => Err(TraceError::new(
                line,
                Some(key),
                format!("entry {j} is {x}, above the limit {limit}"),
            )),
            None => Err(TraceError::new(
                line,
                Some(key),
                format!("entry {j} is not a non-negative integer"),
            )),
        })
        .collect::<Result<Vec<u8>, _>>()
}

/// Every position's match is at most its proposal and at most the output
/// tokens that follow it.
fn check_matches(
    line: u64,
    proposal: &[u8],
    matched: &[u8],
    output_tokens: u64,
) -> Result<(), TraceError> {
    for (j, (&l, &m)) in proposal.iter().zip(matched).enumerate() {
        if m > l {
            return Err(TraceError::new(
                line,
                Some("match"),
                format!("entry {j} is {m}, more than the proposal's {l}"),
            ));
        }
        // Position t = j + 1 has M - t output tokens from it on.
        let left = output_tokens - (j as u64 + 1);
        if u64::from(m) > left {
            return Err(TraceError::new(
                line,
                Some("match"),
                format!("entry {j} is {m}, but only {left} output tokens follow its position"),
            ));
        }
    }
    Ok(())
}

/// A line as UTF-8 text.
fn utf8(line: u64, buf: &[u8]) -> Result<&str, TraceError> {
    std::str::from_utf8(buf).map_err(|e| {
        TraceError::new(
            line,
            None,
            format!("not UTF-8 text (byte {})", e.valid_up_to() + 1),
        )
    })
}

/// A line's JSON, read as strictly as `replay` reads its steps.
struct Json {
    value: Value,
    /// The top-level `"id"` as written, when the line has one.
    raw_id: Option<String>,
}

/// A line's JSON value: a leading byte-order mark is named, and a key given
/// twice in one object (at any depth) is refused, where serde_json alone
/// would keep the last.
fn parse_json(line: u64, text: &str) -> Result<Json, TraceError> {
    if text.starts_with('\u{feff}') {
        return Err(TraceError::new(
            line,
            None,
            "the line starts with a byte-order mark (bytes EF BB BF), which JSON does not allow; remove it (an editor's \"UTF-8 without BOM\")",
        ));
    }
    let mut de = serde_json::Deserializer::from_str(text);
    TopLevel
        .deserialize(&mut de)
        .and_then(|json| de.end().map(|()| json))
        .map_err(|e| match e.classify() {
            // Only the duplicate key: its position is not needed.
            serde_json::error::Category::Data => TraceError::new(line, None, without_position(&e)),
            _ => TraceError::new(line, None, format!("not JSON: {e}")),
        })
}

/// serde_json's message without its "at line 1 column N".
fn without_position(e: &serde_json::Error) -> String {
    let full = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    full.strip_suffix(&suffix).unwrap_or(&full).to_owned()
}

/// The line's value, the top level's `"id"` kept as written.
struct TopLevel;

impl<'de> DeserializeSeed<'de> for TopLevel {
    type Value = Json;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Json, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TopLevel {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut object = Map::new();
        let mut raw_id = None;
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(duplicate(&key));
            }
            let value = if key == "id" {
                let raw: Box<RawValue> = map.next_value()?;
                let value = serde_json::from_str::<Strict>(raw.get())
                    .map_err(|e| de::Error::custom(without_position(&e)))?
                    .0;
                raw_id = Some(raw.get().to_owned());
                value
            } else {
                map.next_value::<Strict>()?.0
            };
            object.insert(key, value);
        }
        Ok(Json {
            value: Value::Object(object),
            raw_id,
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Json, A::Error> {
        StrictVisitor.visit_seq(seq).map(Json::of)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Json, E> {
        Ok(Json::of(Value::Bool(v)))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Json, E> {
        Ok(Json::of(Value::from(v)))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Json, E> {
        Ok(Json::of(Value::from(v)))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Json, E> {
        StrictVisitor.visit_f64(v).map(Json::of)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Json, E> {
        Ok(Json::of(Value::from(v)))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Json, E> {
        Ok(Json::of(Value::String(v)))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Json, E> {
        Ok(Json::of(Value::Null))
    }
}

impl Json {
    fn of(value: Value) -> Self {
        Self {
            value,
            raw_id: None,
        }
    }
}

fn duplicate<E: de::Error>(key: &str) -> E {
    E::custom(format_args!("duplicate key {}", excerpt(key)))
}

/// A JSON value whose objects have no key twice.
struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(duplicate(&key));
            }
            let value = map.next_value::<Strict>()?.0;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Strict(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
}

/// A request as text, one line of a [requests](self#requests) file: what
/// a trace line is made from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextRequest {
    /// The line it was read from, from 1.
    pub line: u64,
    /// A string or an integer, as given; the line number when absent.
    pub id: Value,
    /// The prompt: its text, or a chat's messages.
    pub prompt: Prompt,
    /// The output's text.
    pub output: String,
}

/// A request's prompt: text as given (`"prompt"`), or a chat's turns
/// (`"messages"`) rendered in the [chat template](self#messages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Prompt {
    /// The prompt's text.
    Text(String),
    /// The turns before the output, in order.
    Messages(Vec<ChatMessage>),
}

impl Prompt {
    /// The prompt's text: as given, or every message rendered and then
    /// [`ASSISTANT_HEADER`].
    ///
    /// ```
    /// use specdec_ingest::trace::{ChatMessage, Prompt};
    /// let turns = vec![ChatMessage { role: "user".into(), content: "hi".into() }];
    /// assert_eq!(
    ///     Prompt::Messages(turns).render(),
    ///     "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    /// );
    /// assert_eq!(Prompt::Text("hi".into()).render(), "hi");
    /// ```
    pub fn render(&self) -> String {
        match self {
            Prompt::Text(text) => text.clone(),
            Prompt::Messages(turns) => {
                let mut text = String::new();
                for m in turns {
                    m.render_into(&mut text);
                }
                text.push_str(ASSISTANT_HEADER);
                text
            }
        }
    }
}

/// What ends a rendered chat: the header of the assistant's turn, whose
/// content is the output.
pub const ASSISTANT_HEADER: &str = "<|im_start|>assistant\n";

/// One turn of a chat: `{"role": TEXT, "content": TEXT}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatMessage {
    /// Who speaks, as written into the template (`system`, `user`,
    /// `assistant`, `tool`, or anything else).
    pub role: String,
    /// What is said, tool calls and results included, as text.
    pub content: String,
}

impl ChatMessage {
    /// The message in the [chat template](self#messages):
    /// `<|im_start|>ROLE\nCONTENT<|im_end|>\n`.
    ///
    /// ```
    /// use specdec_ingest::trace::ChatMessage;
    /// let m = ChatMessage { role: "tool name=f".into(), content: "{}".into() };
    /// assert_eq!(m.render(), "<|im_start|>tool name=f\n{}<|im_end|>\n");
    /// ```
    pub fn render(&self) -> String {
        let mut text = String::new();
        self.render_into(&mut text);
        text
    }

    /// [`render`](Self::render), appended to `text`.
    ///
    /// ```
    /// use specdec_ingest::trace::ChatMessage;
    /// let mut text = String::from("> ");
    /// ChatMessage { role: "user".into(), content: "hi".into() }.render_into(&mut text);
    /// assert_eq!(text, "> <|im_start|>user\nhi<|im_end|>\n");
    /// ```
    pub fn render_into(&self, text: &mut String) {
        for part in [
            "<|im_start|>",
            &self.role,
            "\n",
            &self.content,
            "<|im_end|>\n",
        ] {
            text.push_str(part);
        }
    }
}

/// The `"messages"` of a request on `line`: an array of objects with a
/// string `role` and a string `content` (other keys ignored).
fn messages(line: u64, value: Value) -> Result<Vec<ChatMessage>, TraceError> {
    let bad = |message: String| TraceError::new(line, Some("messages"), message);
    let Value::Array(items) = value else {
        return Err(bad(format!(
            "must be an array of {{\"role\", \"content\"}} objects, not {}",
            excerpt(&value.to_string())
        )));
    };
    let count = items.len();
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let Value::Object(mut object) = item else {
                return Err(bad(format!(
                    "message {} of {count}: must be an object with \"role\" and \"content\", not {}",
                    i + 1,
                    excerpt(&item.to_string())
                )));
            };
            let mut text = |key: &str| match object.remove(key) {
                Some(Value::String(s)) => Ok(s),
                Some(other) => Err(bad(format!(
                    "message {} of {count}: key \"{key}\": must be a string, not {}",
                    i + 1,
                    excerpt(&other.to_string())
                ))),
                None => Err(bad(format!(
                    "message {} of {count}: key \"{key}\": missing",
                    i + 1
                ))),
            };
            let role = text("role")?;
            let content = text("content")?;
            Ok(ChatMessage { role, content })
        })
        .collect()
}

impl TextRequest {
    /// One line (without its `\n`) as a request; `line` is its number, and
    /// its id when it gives none.
    ///
    /// ```
    /// use specdec_ingest::trace::TextRequest;
    /// let r = TextRequest::parse(br#"{"prompt": "a b", "output": "c"}"#, 7).unwrap();
    /// assert_eq!((r.id, r.prompt.render().as_str(), r.output.as_str()), (7.into(), "a b", "c"));
    /// let e = TextRequest::parse(br#"{"prompt": "a b"}"#, 7).unwrap_err();
    /// assert_eq!(e.to_string(), "line 7: field \"output\": missing");
    /// ```
    pub fn parse(buf: &[u8], line: u64) -> Result<Self, TraceError> {
        let text = utf8(line, buf)?;
        let Json { value, raw_id } = parse_json(line, text)?;
        let Value::Object(mut object) = value else {
            return Err(TraceError::new(line, None, "not a JSON object"));
        };
        let has_prompt = object.contains_key("prompt");
        let turns = object.remove("messages");
        let mut text_field = |key: &'static str| match object.remove(key) {
            Some(Value::String(s)) => Ok(s),
            Some(other) => Err(TraceError::new(
                line,
                Some(key),
                format!("must be a string, not {}", excerpt(&other.to_string())),
            )),
            None => Err(TraceError::new(line, Some(key), "missing")),
        };
        let prompt = match (has_prompt, turns) {
            (true, Some(_)) => {
                return Err(TraceError::new(
                    line,
                    Some("messages"),
                    "given with \"prompt\": a request has one or the other",
                ));
            }
            (_, Some(turns)) => Prompt::Messages(messages(line, turns)?),
            (true, None) => Prompt::Text(text_field("prompt")?),
            (false, None) => {
                return Err(TraceError::new(
                    line,
                    Some("prompt"),
                    "missing (a request has \"prompt\" or \"messages\")",
                ));
            }
        };
        let output = text_field("output")?;
        let id = match object.remove("id") {
            None => Value::from(line),
            Some(id) => id_value(id).map_err(|other| {
                // As written: a 30-digit integer is not quoted as the float
                // it reads as.
                let written = raw_id.unwrap_or_else(|| other.to_string());
                TraceError::new(
                    line,
                    Some("id"),
                    format!("must be a string or an integer, not {}", excerpt(&written)),
                )
            })?,
        };
        Ok(Self {
            line,
            id,
            prompt,
            output,
        })
    }
}

/// Why a [`RequestReader`] stopped.
#[derive(Debug)]
#[non_exhaustive]
pub enum RequestError {
    /// The input could not be read, or a line is longer than the limit
    /// (the rest of the input was not read).
    Line(LineError),
    /// A line that is not a request.
    Malformed(TraceError),
}

impl fmt::Display for RequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestError::Line(e) => write!(f, "{e}"),
            RequestError::Malformed(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RequestError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RequestError::Line(e) => Some(e),
            RequestError::Malformed(e) => Some(e),
        }
    }
}

/// Reads a [requests](self#requests) file one line at a time, each at most
/// [`DEFAULT_MAX_LINE_BYTES`] long unless told otherwise, blank lines
/// skipped. After the first error it yields nothing more.
///
/// ```
/// use specdec_ingest::trace::{RequestError, RequestReader};
/// let input = b"{\"prompt\": \"a\", \"output\": \"b\", \"id\": \"r1\"}\n\n{\"prompt\": 1}\n";
/// let mut reader = RequestReader::new(&input[..]);
/// let first = reader.next().unwrap().unwrap();
/// assert_eq!((first.line, first.id.as_str()), (1, Some("r1")));
/// let Some(Err(RequestError::Malformed(e))) = reader.next() else { panic!() };
/// assert_eq!(e.line, 3);
/// assert!(reader.next().is_none());
/// ```
pub struct RequestReader<R: BufRead> {
    lines: Lines<R>,
    done: bool,
}

impl<R: BufRead> RequestReader<R> {
    /// A reader of `reader`.
    pub fn new(reader: R) -> Self {
        Self::with_max_line_bytes(reader, DEFAULT_MAX_LINE_BYTES)
    }

    /// A reader of `reader` accepting lines of at most `n` bytes.
    pub fn with_max_line_bytes(reader: R, n: usize) -> Self {
        Self {
            lines: Lines::new(reader, n, Overlong::Refuse),
            done: false,
        }
    }

    fn next_request(&mut self) -> Result<Option<TextRequest>, RequestError> {
        loop {
            let line = self.lines.number() + 1;
            let Some(buf) = self.lines.next_line().map_err(RequestError::Line)? else {
                return Ok(None);
            };
            if buf.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return TextRequest::parse(buf, line)
                .map(Some)
                .map_err(RequestError::Malformed);
        }
    }
}

impl<R: BufRead> Iterator for RequestReader<R> {
    type Item = Result<TextRequest, RequestError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let next = self.next_request();
        self.done = !matches!(next, Ok(Some(_)));
        next.transpose()
    }
}

#[derive(Serialize)]
struct MetaLine<'a> {
    specdec_trace: u64,
    #[serde(flatten)]
    meta: &'a TraceMeta,
}

/// Writes the metadata line (with its `"specdec_trace"` key first).
pub fn write_meta(w: &mut impl Write, meta: &TraceMeta) -> io::Result<()> {
    let mut line = serde_json::to_vec(&MetaLine {
        specdec_trace: FORMAT_VERSION,
        meta,
    })?;
    line.push(b'\n');
    w.write_all(&line)
}

/// Writes one request as one line, keys in the order `id`,
/// `prompt_tokens`, `output_tokens`, `proposal`, `match` and, when there is
/// one, `ngram` and `score`, then `below` when it has entries.
pub fn write_request(w: &mut impl Write, r: &TraceRequest) -> io::Result<()> {
    let mut line = Vec::with_capacity(64 + 4 * 3 * r.proposal.len());
    line.extend_from_slice(b"{\"id\":");
    serde_json::to_writer(&mut line, &r.id)?;
    write!(
        line,
        ",\"prompt_tokens\":{},\"output_tokens\":{}",
        r.prompt_tokens, r.output_tokens
    )?;
    push_array(&mut line, "proposal", &r.proposal);
    push_array(&mut line, "match", &r.matched);
    if let Some(ngram) = &r.ngram {
        push_array(&mut line, "ngram", ngram);
    }
    if let Some(score) = &r.score {
        push_array(&mut line, "score", score);
    }
    if !r.below.is_empty() {
        line.extend_from_slice(b",\"below\":[");
        for (i, b) in r.below.iter().enumerate() {
            if i > 0 {
                line.push(b',');
            }
            write!(
                line,
                "[{},{},{},{}]",
                b.position, b.cap, b.proposal, b.matched
            )?;
        }
        line.push(b']');
    }
    line.extend_from_slice(b"}\n");
    w.write_all(&line)
}

fn push_array(line: &mut Vec<u8>, key: &str, values: &[u8]) {
    line.extend_from_slice(b",\"");
    line.extend_from_slice(key.as_bytes());
    line.extend_from_slice(b"\":[");
    for (i, &v) in values.iter().enumerate() {
        if i > 0 {
            line.push(b',');
        }
        if v >= 100 {
            line.push(b'0' + v / 100);
        }
        if v >= 10 {
            line.push(b'0' + v / 10 % 10);
        }
        line.push(b'0' + v % 10);
    }
    line.push(b']');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(text: &str) -> Result<Vec<TraceRequest>, TraceError> {
        TraceReader::new(text.as_bytes()).collect()
    }

    fn error_of(text: &[u8]) -> TraceError {
        TraceReader::new(text)
            .find_map(Result::err)
            .expect("an error")
    }

    fn meta(cap: usize) -> TraceMeta {
        TraceMeta {
            tokenizer: "o200k_base".into(),
            rule: "vllm".into(),
            min_n: 2,
            max_n: 5,
            cap,
            eos: true,
            greedy: true,
            num_speculative_tokens: None,
            suffix: None,
        }
    }

    #[test]
    fn round_trip_with_and_without_ngram_and_meta() {
        let requests = vec![
            TraceRequest {
                id: Value::from("a"),
                prompt_tokens: 3,
                output_tokens: 4,
                proposal: vec![0, 255, 100],
                matched: vec![0, 2, 1],
                ngram: Some(vec![0, 5, 3]),
                score: None,
                below: Vec::new(),
            },
            TraceRequest {
                id: Value::from(-7),
                prompt_tokens: 0,
                output_tokens: 1,
                proposal: vec![],
                matched: vec![],
                ngram: None,
                score: None,
                below: Vec::new(),
            },
        ];
        let mut file = Vec::new();
        write_meta(&mut file, &meta(255)).unwrap();
        for r in &requests {
            write_request(&mut file, r).unwrap();
        }
        let text = String::from_utf8(file.clone()).unwrap();
        assert!(text.starts_with("{\"specdec_trace\":2,\"tokenizer\":"));
        assert!(text.contains(
            "{\"id\":\"a\",\"prompt_tokens\":3,\"output_tokens\":4,\"proposal\":[0,255,100],\"match\":[0,2,1],\"ngram\":[0,5,3]}\n"
        ));
        let mut reader = TraceReader::new(file.as_slice());
        assert_eq!(reader.cap().unwrap(), 255);
        assert_eq!(reader.collect::<Result<Vec<_>, _>>().unwrap(), requests);
    }

    fn suffix_meta() -> TraceMeta {
        TraceMeta {
            rule: "suffix".into(),
            min_n: 1,
            max_n: 23,
            cap: 24,
            num_speculative_tokens: Some(24),
            suffix: Some(SuffixMeta {
                depth: 24,
                factor: 1.0,
                offset: 0.0,
                min_prob: 0.1,
                cache: 10_000,
            }),
            ..meta(24)
        }
    }

    #[test]
    fn a_suffix_trace_round_trips_with_its_settings_and_below() {
        let request = TraceRequest {
            id: Value::from("s"),
            prompt_tokens: 5,
            output_tokens: 6,
            proposal: vec![0, 4, 3, 2, 1],
            matched: vec![0, 4, 0, 2, 1],
            ngram: Some(vec![0, 4, 3, 2, 1]),
            score: Some(vec![0, 40, 16, 255, 3]),
            below: vec![
                Below {
                    position: 1,
                    cap: 1,
                    proposal: 1,
                    matched: 0,
                },
                Below {
                    position: 1,
                    cap: 3,
                    proposal: 2,
                    matched: 2,
                },
                Below {
                    position: 2,
                    cap: 2,
                    proposal: 2,
                    matched: 2,
                },
            ],
        };
        let mut file = Vec::new();
        write_meta(&mut file, &suffix_meta()).unwrap();
        write_request(&mut file, &request).unwrap();
        let text = String::from_utf8(file.clone()).unwrap();
        assert!(text.starts_with(
            "{\"specdec_trace\":2,\"tokenizer\":\"o200k_base\",\"rule\":\"suffix\",\"min_n\":1,\"max_n\":23,\"cap\":24,\"eos\":true,\"greedy\":true,\"num_speculative_tokens\":24,\"suffix\":{\"depth\":24,\"factor\":1.0,\"offset\":0.0,\"min_prob\":0.1,\"cache\":10000}}\n"
        ), "{text}");
        assert!(
            text.ends_with(",\"below\":[[1,1,1,0],[1,3,2,2],[2,2,2,2]]}\n"),
            "{text}"
        );
        let mut reader = TraceReader::new(file.as_slice());
        assert_eq!(reader.meta().unwrap(), Some(&suffix_meta()));
        let back: Vec<_> = reader.collect::<Result<_, _>>().unwrap();
        assert_eq!(back, vec![request.clone()]);
        // Caps 1, 2..=3, then the arrays; position 3 at cap 1 reads the
        // arrays cut to 1.
        let at = |j, k| back[0].outcome(j, k);
        assert_eq!(
            (at(1, 1), at(1, 2), at(1, 3), at(1, 4), at(1, 24)),
            ((1, 0), (2, 2), (2, 2), (4, 4), (4, 4))
        );
        assert_eq!((at(2, 1), at(2, 2), at(2, 3)), ((1, 1), (2, 2), (3, 0)));
        assert_eq!(at(3, 1), (1, 1));
    }

    #[test]
    fn a_version_1_trace_still_reads_and_has_no_v2_keys() {
        let v1 = "{\"specdec_trace\":1,\"tokenizer\":\"o200k_base\",\"rule\":\"vllm\",\"min_n\":2,\"max_n\":5,\"cap\":64,\"eos\":true,\"greedy\":true}\n{\"output_tokens\":2,\"proposal\":[3],\"match\":[1]}\n";
        let mut reader = TraceReader::new(v1.as_bytes());
        assert_eq!(reader.meta().unwrap(), Some(&meta(64)));
        assert_eq!(reader.next().unwrap().unwrap().outcome(0, 2), (2, 1));
        let with_suffix = v1.replacen(
            "\"greedy\":true",
            "\"greedy\":true,\"num_speculative_tokens\":4",
            1,
        );
        let e = error_of(with_suffix.as_bytes());
        assert_eq!((e.line, e.field), (1, Some("num_speculative_tokens")));
    }

    #[test]
    fn bad_suffix_settings_are_errors() {
        let line = |meta: &TraceMeta| {
            let mut file = Vec::new();
            write_meta(&mut file, meta).unwrap();
            error_of(&file)
        };
        let mut m = suffix_meta();
        m.suffix = None;
        assert_eq!(line(&m).field, Some("suffix"));
        let mut m = meta(64);
        m.suffix = suffix_meta().suffix;
        assert_eq!(line(&m).field, Some("suffix"));
        let mut m = suffix_meta();
        m.suffix.as_mut().unwrap().depth = 1;
        assert!(line(&m).message.contains("depth 1"));
        m.suffix.as_mut().unwrap().depth = 257;
        assert!(line(&m).message.contains("depth 257 is not in 2..=256"));
        // 256, one more than the largest cap, is the deepest: match
        // lengths up to 255 fit the trace.
        m.suffix.as_mut().unwrap().depth = 256;
        let mut file = Vec::new();
        write_meta(&mut file, &m).unwrap();
        assert!(TraceReader::new(file.as_slice()).meta().is_ok());
        let mut m = suffix_meta();
        m.num_speculative_tokens = Some(25);
        assert_eq!(line(&m).field, Some("num_speculative_tokens"));
        let text = String::from_utf8({
            let mut f = Vec::new();
            write_meta(&mut f, &suffix_meta()).unwrap();
            f
        })
        .unwrap()
        .replace("\"factor\":1.0", "\"factor\":1e999");
        assert!(TraceReader::new(text.as_bytes()).meta().is_err());
    }

    #[test]
    fn bad_below_entries_are_errors_naming_them() {
        let head = {
            let mut f = Vec::new();
            write_meta(&mut f, &meta(8)).unwrap();
            String::from_utf8(f).unwrap()
        };
        for (below, message) in [
            ("3", "must be an array"),
            ("[[0,1,1]]", "entry 0 is not"),
            ("[[3,1,1,0]]", "position 3 is not below"),
            ("[[0,8,1,0]]", "cap 8 is not in 1..8"),
            ("[[0,0,0,0]]", "cap 0"),
            ("[[0,2,3,0]]", "match <= proposal <= cap 2"),
            ("[[0,2,1,2]]", "match <= proposal"),
            ("[[2,2,2,2]]", "only 1 output tokens"),
            ("[[0,4,4,4]]", "match 4, but only 3 output tokens"),
            ("[[1,2,0,0],[1,2,1,0]]", "entry 1 is not after entry 0"),
            ("[[1,2,0,0],[0,3,1,0]]", "entry 1 is not after"),
        ] {
            let text = format!(
                "{head}{{\"output_tokens\":4,\"proposal\":[3,3,1],\"match\":[3,2,1],\"below\":{below}}}\n"
            );
            let e = error_of(text.as_bytes());
            assert_eq!((e.line, e.field), (2, Some("below")), "{below}");
            assert!(e.message.contains(message), "{below}: {e}");
        }
        // A match of every token after its position is fine.
        let text = format!(
            "{head}{{\"output_tokens\":4,\"proposal\":[3,3,1],\"match\":[3,2,1],\"below\":[[0,3,3,3],[2,1,1,1]]}}\n"
        );
        assert!(TraceReader::new(text.as_bytes()).all(|r| r.is_ok()));
    }

    #[test]
    fn without_meta_the_first_line_is_a_request_and_cap_is_default() {
        let text = "\n{\"output_tokens\":2,\"proposal\":[64],\"match\":[1]}\n\n{\"id\":9,\"output_tokens\":0,\"proposal\":[],\"match\":[]}";
        let mut reader = TraceReader::new(text.as_bytes());
        assert_eq!(reader.meta().unwrap(), None);
        assert_eq!(reader.cap().unwrap(), DEFAULT_CAP);
        let all: Vec<_> = reader.collect::<Result<_, _>>().unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].id, Value::from(2)); // the line number
        assert_eq!(all[0].prompt_tokens, 0);
        assert_eq!(all[1].id, Value::from(9));
        assert_eq!(all[1].positions(), 0);
    }

    #[test]
    fn a_value_above_the_default_cap_is_an_error_without_meta() {
        let e = error_of(b"{\"output_tokens\":2,\"proposal\":[65],\"match\":[1]}");
        assert_eq!((e.line, e.field), (1, Some("proposal")));
        // The same value is fine under a meta cap of 65.
        let mut file = Vec::new();
        write_meta(&mut file, &meta(65)).unwrap();
        file.extend_from_slice(b"{\"output_tokens\":2,\"proposal\":[65],\"match\":[1]}\n");
        assert!(TraceReader::new(file.as_slice()).all(|r| r.is_ok()));
    }

    #[test]
    fn a_value_above_the_meta_cap_is_an_error() {
        let mut file = Vec::new();
        write_meta(&mut file, &meta(8)).unwrap();
        file.extend_from_slice(b"{\"output_tokens\":3,\"proposal\":[8,9],\"match\":[1,1]}\n");
        let e = error_of(&file);
        assert_eq!((e.line, e.field), (2, Some("proposal")));
        assert!(e.message.contains("entry 1 is 9"), "{e}");
    }

    #[test]
    fn not_json_and_not_an_object_are_errors() {
        let e = error_of(b"{\"output_tokens\":1,\"proposal\":[],\"match\":[]}\n{oops\n");
        assert_eq!((e.line, e.field), (2, None));
        assert!(e.message.starts_with("not JSON"), "{e}");
        let e = error_of(b"[1,2]\n");
        assert_eq!((e.line, e.field), (1, None));
        assert!(e.message.contains("not a JSON object"), "{e}");
    }

    #[test]
    fn missing_keys_are_errors_naming_them() {
        for (text, field) in [
            ("{\"proposal\":[],\"match\":[]}", "output_tokens"),
            ("{\"output_tokens\":1,\"match\":[]}", "proposal"),
            ("{\"output_tokens\":1,\"proposal\":[]}", "match"),
        ] {
            let e = error_of(text.as_bytes());
            assert_eq!((e.line, e.field), (1, Some(field)), "{text}");
            assert_eq!(e.message, "missing");
        }
    }

    #[test]
    fn arrays_of_the_wrong_length_are_errors() {
        for (text, field) in [
            (
                "{\"output_tokens\":3,\"proposal\":[1],\"match\":[1]}",
                "proposal",
            ),
            (
                "{\"output_tokens\":2,\"proposal\":[1],\"match\":[1,0]}",
                "match",
            ),
            (
                "{\"output_tokens\":0,\"proposal\":[1],\"match\":[]}",
                "proposal",
            ),
            (
                "{\"output_tokens\":2,\"proposal\":[1],\"match\":[1],\"ngram\":[]}",
                "ngram",
            ),
            (
                "{\"output_tokens\":3,\"proposal\":[1,1],\"match\":[1,1],\"score\":[16]}",
                "score",
            ),
            (
                "{\"output_tokens\":2,\"proposal\":[1],\"match\":[1],\"score\":[256]}",
                "score",
            ),
        ] {
            let e = error_of(text.as_bytes());
            assert_eq!((e.line, e.field), (1, Some(field)), "{text}");
        }
    }

    #[test]
    fn match_above_proposal_or_past_the_output_is_an_error() {
        let e = error_of(b"{\"output_tokens\":4,\"proposal\":[2,2,2],\"match\":[2,3,0]}");
        assert_eq!((e.line, e.field), (1, Some("match")));
        assert!(e.message.contains("more than the proposal"), "{e}");
        // Position 3 of 4 has one output token left.
        let e = error_of(b"{\"output_tokens\":4,\"proposal\":[2,2,2],\"match\":[2,2,2]}");
        assert_eq!((e.line, e.field), (1, Some("match")));
        assert!(e.message.contains("only 1 output tokens"), "{e}");
        assert!(read_all("{\"output_tokens\":4,\"proposal\":[2,2,2],\"match\":[2,2,1]}").is_ok());
    }

    #[test]
    fn ngram_above_the_meta_max_n_is_an_error() {
        let mut file = Vec::new();
        write_meta(&mut file, &meta(64)).unwrap();
        file.extend_from_slice(
            b"{\"output_tokens\":2,\"proposal\":[1],\"match\":[1],\"ngram\":[6]}\n",
        );
        let e = error_of(&file);
        assert_eq!((e.line, e.field), (2, Some("ngram")));
    }

    #[test]
    fn bad_ids_and_counts_are_errors() {
        let e = error_of(b"{\"id\":1.5,\"output_tokens\":1,\"proposal\":[],\"match\":[]}");
        assert_eq!(e.field, Some("id"));
        let e = error_of(b"{\"output_tokens\":-1,\"proposal\":[],\"match\":[]}");
        assert_eq!(e.field, Some("output_tokens"));
        let e = error_of(b"{\"output_tokens\":2,\"proposal\":[\"1\"],\"match\":[1]}");
        assert_eq!(e.field, Some("proposal"));
    }

    #[test]
    fn a_fraction_is_read_as_a_number_and_quoted() {
        // Read through the reader that refuses repeated keys: a fraction
        // stays the number it is (not null) in the message.
        let got = requests(b"{\"prompt\":1.5,\"output\":\"o\"}", 1000);
        assert_eq!(
            got,
            vec![Err(
                "line 1: field \"prompt\": must be a string, not \"1.5\"".to_owned()
            )]
        );
    }

    #[test]
    fn a_long_line_is_an_error_without_reading_it_whole() {
        // A reader that would yield endless bytes without a newline: the
        // read stops at the limit.
        let endless = io::repeat(b' ').take(1 << 40);
        let mut reader = TraceReader::with_max_line_bytes(io::BufReader::new(endless), 1000);
        let e = reader.next().unwrap().unwrap_err();
        assert_eq!((e.line, e.field), (1, None));
        assert!(e.message.contains("longer than 1000 bytes"), "{e}");
        assert!(reader.next().is_none(), "nothing after an error");
        // Exactly at the limit is fine.
        let line = b"{\"output_tokens\":1,\"proposal\":[],\"match\":[]}";
        let ok = TraceReader::with_max_line_bytes(&line[..], line.len());
        assert_eq!(ok.count(), 1);
        let too_long = TraceReader::with_max_line_bytes(&line[..], line.len() - 1);
        assert!(too_long.last().unwrap().is_err());
    }

    use std::io::Read as _;

    #[test]
    fn non_utf8_is_an_error() {
        let e =
            error_of(b"{\"output_tokens\":1,\"proposal\":[],\"match\":[]}\n{\"id\":\"\xff\"}\n");
        assert_eq!((e.line, e.field), (2, None));
        assert!(e.message.contains("UTF-8"), "{e}");
    }

    #[test]
    fn bad_or_late_metadata_is_an_error() {
        let mut late = b"{\"output_tokens\":1,\"proposal\":[],\"match\":[]}\n".to_vec();
        write_meta(&mut late, &meta(64)).unwrap();
        let e = error_of(&late);
        assert_eq!((e.line, e.field), (2, Some("specdec_trace")));

        let e = error_of(b"{\"specdec_trace\":3}");
        assert_eq!((e.line, e.field), (1, Some("specdec_trace")));
        let mut bad_cap = Vec::new();
        write_meta(&mut bad_cap, &meta(64)).unwrap();
        let bad_cap = String::from_utf8(bad_cap)
            .unwrap()
            .replace("\"cap\":64", "\"cap\":256");
        let mut reader = TraceReader::new(bad_cap.as_bytes());
        let e = reader.meta().unwrap_err();
        assert_eq!((e.line, e.field), (1, Some("cap")));
        assert!(reader.next().unwrap().is_err());
        assert!(reader.next().is_none());
    }

    fn requests(text: &[u8], max: usize) -> Vec<Result<TextRequest, String>> {
        RequestReader::with_max_line_bytes(text, max)
            .map(|r| r.map_err(|e| e.to_string()))
            .collect()
    }

    #[test]
    fn requests_skip_blank_lines_and_default_the_id_to_the_line() {
        let text = b"\n  \t\n{\"output\":\"o\",\"prompt\":\"p\",\"x\":1}\r\n{\"prompt\":\"\",\"output\":\"\",\"id\":-3}";
        let got = requests(text, 1000);
        assert_eq!(
            got,
            vec![
                Ok(TextRequest {
                    line: 3,
                    id: Value::from(3),
                    prompt: Prompt::Text("p".into()),
                    output: "o".into()
                }),
                Ok(TextRequest {
                    line: 4,
                    id: Value::from(-3),
                    prompt: Prompt::Text(String::new()),
                    output: String::new()
                }),
            ]
        );
    }

    #[test]
    fn a_bad_request_stops_the_reader_naming_line_and_field() {
        for (text, message) in [
            (
                &b"{\"prompt\":\"p\"}"[..],
                "line 1: field \"output\": missing",
            ),
            (
                b"\n{\"prompt\":[1],\"output\":\"o\"}",
                "line 2: field \"prompt\": must be a string, not \"[1]\"",
            ),
            (
                b"{\"prompt\":\"p\",\"output\":\"o\",\"id\":1.5}",
                "line 1: field \"id\": must be a string or an integer, not \"1.5\"",
            ),
            (b"[]", "line 1: not a JSON object"),
            (b"{\"prompt\":\"\xff\"}", "line 1: not UTF-8 text (byte 12)"),
            (
                b"{\"prompt\":\"p\",\"output\":\"o\"}\n{{{\n{}",
                "line 2: not JSON: key must be a string at line 1 column 2",
            ),
        ] {
            let got = requests(text, 1000);
            assert_eq!(got.last(), Some(&Err(message.to_owned())), "{got:?}");
            assert!(got[..got.len() - 1].iter().all(Result::is_ok), "{got:?}");
        }
    }

    #[test]
    fn messages_are_read_in_order_and_render_as_the_prompt() {
        let text = br#"{"messages":[{"role":"system","content":"be brief","name":"x"},{"role":"tool name=f","content":""}],"output":"o","id":"c1"}
{"prompt":"<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>tool name=f\n<|im_end|>\n<|im_start|>assistant\n","output":"o"}
{"messages":[],"output":"o"}"#;
        let got: Vec<TextRequest> = requests(text, 1000)
            .into_iter()
            .map(Result::unwrap)
            .collect();
        let turn = |role: &str, content: &str| ChatMessage {
            role: role.into(),
            content: content.into(),
        };
        assert_eq!(
            got[0].prompt,
            Prompt::Messages(vec![turn("system", "be brief"), turn("tool name=f", "")])
        );
        assert_eq!(got[0].id, Value::from("c1"));
        // The same conversation given as text renders the same.
        assert!(matches!(got[1].prompt, Prompt::Text(_)));
        assert_eq!(got[0].prompt.render(), got[1].prompt.render());
        // No turns: the assistant's header alone.
        assert_eq!(got[2].prompt, Prompt::Messages(Vec::new()));
        assert_eq!(got[2].prompt.render(), ASSISTANT_HEADER);
    }

    #[test]
    fn a_bad_messages_value_names_the_line_the_key_and_the_message() {
        for (text, message) in [
            (
                &br#"{"messages":"hi","output":"o"}"#[..],
                r#"line 1: field "messages": must be an array of {"role", "content"} objects, not "\"hi\"""#,
            ),
            (
                br#"{"messages":[{"role":"user","content":"a"},["user","b"]],"output":"o"}"#,
                r#"line 1: field "messages": message 2 of 2: must be an object with "role" and "content", not "[\"user\",\"b\"]""#,
            ),
            (
                br#"{"messages":[{"content":"a"}],"output":"o"}"#,
                r#"line 1: field "messages": message 1 of 1: key "role": missing"#,
            ),
            (
                br#"{"messages":[{"role":"user","content":null}],"output":"o"}"#,
                r#"line 1: field "messages": message 1 of 1: key "content": must be a string, not "null""#,
            ),
            (
                br#"{"messages":[{"role":1,"content":"a"}],"output":"o"}"#,
                r#"line 1: field "messages": message 1 of 1: key "role": must be a string, not "1""#,
            ),
            (
                br#"{"prompt":"p","messages":[],"output":"o"}"#,
                r#"line 1: field "messages": given with "prompt": a request has one or the other"#,
            ),
            (
                br#"{"output":"o"}"#,
                r#"line 1: field "prompt": missing (a request has "prompt" or "messages")"#,
            ),
            (
                br#"{"messages":[],"output":"o","messages":[]}"#,
                r#"line 1: duplicate key "messages""#,
            ),
            (
                br#"{"messages":[{"role":"a","role":"b","content":""}],"output":"o"}"#,
                r#"line 1: duplicate key "role""#,
            ),
        ] {
            let mut text = text.to_vec();
            text.splice(
                0..0,
                b"{\"prompt\":\"p\",\"output\":\"o\"}\n".iter().copied(),
            );
            let got = requests(&text, 1000);
            let message = message.replacen("line 1", "line 2", 1);
            assert_eq!(got.len(), 2, "{got:?}");
            assert!(got[0].is_ok());
            assert_eq!(got[1], Err(message));
        }
    }

    #[test]
    fn a_long_request_line_stops_the_reader_unread() {
        let line = br#"{"prompt":"p","output":"o"}"#;
        assert_eq!(requests(line, line.len()).len(), 1);
        let mut reader = RequestReader::with_max_line_bytes(&line[..], line.len() - 1);
        let Some(Err(RequestError::Line(LineError::TooLong { line: 1, max }))) = reader.next()
        else {
            panic!("not too long")
        };
        assert_eq!(max, line.len() - 1);
        assert!(reader.next().is_none());
        let endless = io::BufReader::new(io::repeat(b'{').take(1 << 40));
        let e = RequestReader::with_max_line_bytes(endless, 10)
            .next()
            .unwrap()
            .unwrap_err();
        assert_eq!(e.to_string(), "line 1 is longer than 10 bytes");
    }

    #[test]
    fn a_read_error_names_its_line() {
        struct Broken;
        impl io::Read for Broken {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::Error::other("gone"))
            }
        }
        let mut reader = RequestReader::new(io::BufReader::new(Broken));
        let e = reader.next().unwrap().unwrap_err();
        assert!(
            matches!(e, RequestError::Line(LineError::Read { after: 0, .. })),
            "{e:?}"
        );
        assert_eq!(e.to_string(), "read error after line 0: gone");
        assert!(std::error::Error::source(&e).is_some());
        assert!(reader.next().is_none());
    }

    #[test]
    fn a_key_given_twice_is_an_error_in_requests_and_traces() {
        let got = requests(
            b"{\"prompt\":\"p\",\"output\":\"o\",\"prompt\":\"q\"}",
            1000,
        );
        assert_eq!(
            got,
            vec![Err("line 1: duplicate key \"prompt\"".to_owned())]
        );
        let got = requests(
            b"{\"prompt\":\"p\",\"output\":\"o\",\"id\":\"a\",\"id\":\"b\"}",
            1000,
        );
        assert_eq!(got, vec![Err("line 1: duplicate key \"id\"".to_owned())]);
        // Inside the id (which is then no id anyway) and an ignored key.
        let got = requests(
            b"{\"prompt\":\"p\",\"output\":\"o\",\"id\":{\"b\":1,\"b\":2}}",
            1000,
        );
        assert_eq!(got, vec![Err("line 1: duplicate key \"b\"".to_owned())]);
        let got = requests(
            b"{\"prompt\":\"p\",\"output\":\"o\",\"x\":[{\"a\":1,\"a\":1}]}",
            1000,
        );
        assert_eq!(got, vec![Err("line 1: duplicate key \"a\"".to_owned())]);
        let e = error_of(b"{\"output_tokens\":2,\"proposal\":[1],\"match\":[1],\"match\":[0]}");
        assert_eq!((e.line, e.field), (1, None));
        assert_eq!(e.message, "duplicate key \"match\"");
        let mut file = Vec::new();
        write_meta(&mut file, &meta(64)).unwrap();
        let twice = String::from_utf8(file)
            .unwrap()
            .replace("\"cap\":64", "\"cap\":64,\"cap\":8");
        let e = error_of(twice.as_bytes());
        assert_eq!(e.to_string(), "line 1: duplicate key \"cap\"");
    }

    #[test]
    fn a_byte_order_mark_is_named() {
        let named = "the line starts with a byte-order mark (bytes EF BB BF)";
        let got = requests(b"\xef\xbb\xbf{\"prompt\":\"p\",\"output\":\"o\"}", 1000);
        assert!(
            got[0]
                .as_ref()
                .unwrap_err()
                .starts_with(&format!("line 1: {named}")),
            "{got:?}"
        );
        let e = error_of(b"\xef\xbb\xbf{\"output_tokens\":1,\"proposal\":[],\"match\":[]}");
        assert!(e.message.starts_with(named), "{e}");
    }

    #[test]
    fn an_id_is_quoted_as_written() {
        let got = requests(
            b"{\"prompt\":\"p\",\"output\":\"o\",\"id\":123456789012345678901234567890}",
            1000,
        );
        assert_eq!(
            got,
            vec![Err("line 1: field \"id\": must be a string or an integer, not \"123456789012345678901234567890\"".to_owned())]
        );
        let got = requests(b"{\"prompt\":\"p\",\"output\":\"o\",\"id\": 1.50 }", 1000);
        assert_eq!(
            got,
            vec![Err(
                "line 1: field \"id\": must be a string or an integer, not \"1.50\"".to_owned()
            )]
        );
        // A good id is kept as before.
        let got = requests(
            b"{\"prompt\":\"p\",\"output\":\"o\",\"id\": -18446744073709551 }",
            1000,
        );
        assert_eq!(
            got[0].as_ref().unwrap().id,
            Value::from(-18446744073709551_i64)
        );
    }

    #[test]
    fn display_names_line_and_field() {
        let e = TraceError::new(3, Some("match"), "missing");
        assert_eq!(e.to_string(), "line 3: field \"match\": missing");
        assert_eq!(TraceError::new(4, None, "x").to_string(), "line 4: x");
    }
}
