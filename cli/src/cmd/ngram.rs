//! `ngram`: requests (prompt and output text) into an exact n-gram what-if
//! trace (the format of `specdec_ingest::trace`), for one engine's rule
//! ([`crate::ngram`]).
//!
//! A reading thread reads one line at a time (or, with `--git`, one edit of
//! a repository's history) and hands each request to worker threads, one
//! per core, which tokenize it and generate its trace line; the main thread
//! writes the lines in input order. Memory is bounded: at most
//! [`window`] requests are in flight (read and not yet written) whatever
//! the input, each line at most `--max-line-bytes` long. The first bad
//! request stops the run once every request before it is written (exit
//! status 2).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use serde_json::Value;
use specdec_ingest::lines::LineError;
use specdec_ingest::trace::{
    ChatMessage, MAX_CAP, Prompt, RequestError, RequestReader, TraceMeta, TraceRequest, write_meta,
    write_request,
};

use crate::error::CliError;
use crate::flags::parse_size;
use crate::format::{display_path, excerpt, group_digits};
use crate::io::{file_id, is_stdin, note_reading_stdin};
use crate::ngram::chat::ChatState;
use crate::ngram::git::{GitError, History, Limits, Skipped};
use crate::ngram::git_range::{
    RANGE_MAX_BYTES, RANGE_MAX_CHANGED_LINES, Range, RangeError, RangeSpec, parse_range,
};
use crate::ngram::suffix::{
    GlobalCache, LocalPass, Request, SuffixConfig, interleaved, local_pass,
};
use crate::ngram::tokenize::{
    DEFAULT_TOKEN_CACHE_BYTES, EOS, TokenCache, Tokenizer, TokenizerError, prompt_tokens,
};
use crate::ngram::{Config, Rule, generate};
use specdec_ingest::trace::SuffixMeta;

/// `--eos`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum YesNo {
    /// An end-of-sequence token ends every output (counted in M).
    Yes,
    /// The output is the text's tokens alone.
    No,
}

/// The flags of `ngram`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The tokenizer: o200k_base or cl100k_base (built in, offline), or the
    /// path of a Hugging Face tokenizer.json.
    #[arg(long, value_name = "NAME|FILE", default_value = "o200k_base")]
    tokenizer: String,
    /// The engine's drafting rule.
    #[arg(long, value_enum, default_value_t = Rule::Vllm)]
    rule: Rule,
    /// The shortest n-gram matched (1..=255); the engine's own default:
    /// vllm 5, trtllm 1, llamacpp-simple 12, hf 1. For vllm and
    /// llamacpp-simple, given alone it sets --max-n too.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..))]
    min_n: Option<u8>,
    /// The longest n-gram matched (1..=255); the engine's own default:
    /// vllm 5, trtllm 3, llamacpp-simple 12, hf 2. llamacpp-simple takes
    /// one n: --min-n and --max-n must then be equal.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..))]
    max_n: Option<u8>,
    /// Whether an end-of-sequence token (an id no text token has) ends
    /// every output and counts in output_tokens.
    #[arg(long, value_enum, default_value_t = YesNo::Yes)]
    eos: YesNo,
    /// The largest value recorded, 1..=255: longer proposals are recorded
    /// as the cap (for llamacpp-simple it is also the engine's m,
    /// --spec-ngram-simple-size-m; for suffix the engine's
    /// num_speculative_tokens, every smaller cap recorded exactly)
    /// [default: 64; with --rule suffix the depth, at most 255].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..))]
    cap: Option<u8>,
    /// With --rule suffix: the trees' depth, 2..=256
    /// (suffix_decoding_max_tree_depth) [default: 24].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(2..=256))]
    suffix_depth: Option<u16>,
    /// With --rule suffix: a draft after a match of m tokens is at most
    /// m * F + --suffix-offset long (suffix_decoding_max_spec_factor)
    /// [default: 1].
    #[arg(long, value_name = "F", value_parser = finite)]
    suffix_factor: Option<f32>,
    /// With --rule suffix: Arctic's max_spec_offset (vLLM passes none)
    /// [default: 0].
    #[arg(long, value_name = "X", value_parser = finite, allow_hyphen_values = true)]
    suffix_offset: Option<f32>,
    /// With --rule suffix: the least probability of a drafted token
    /// (suffix_decoding_min_token_prob) [default: 0.1].
    #[arg(long, value_name = "P", value_parser = finite)]
    suffix_min_prob: Option<f32>,
    /// With --rule suffix: responses kept in the global tree
    /// (suffix_decoding_max_cached_requests), 0 for none [default: 10000].
    #[arg(long, value_name = "N")]
    suffix_cache: Option<usize>,
    /// With --rule suffix: the most memory the global tree may take, with
    /// an optional suffix K, M or G; a run that needs more stops (exit
    /// status 2) [default: 16GiB].
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    suffix_max_memory: Option<u64>,
    /// With --rule suffix, an experiment: the global tree as an engine
    /// with B requests in flight fills it (one token of each per step, in
    /// admission order), instead of each request finished before the
    /// next. Every request is held until the end.
    #[arg(long, value_name = "B", value_parser = clap::value_parser!(u16).range(1..))]
    suffix_in_flight: Option<u16>,
    /// The outputs came from sampled decoding: recorded as "greedy": false
    /// in the metadata, with a warning that the trace is not exact.
    #[arg(long)]
    sampled: bool,
    /// The longest input line accepted, in bytes, with an optional suffix
    /// K, M or G; a longer line stops the run (exit status 2).
    #[arg(long, value_name = "SIZE", default_value = "64MiB", value_parser = parse_size)]
    max_line_bytes: u64,
    /// The most memory the tokens of chat messages may take ("messages"
    /// requests: each message is tokenized once while it stays cached),
    /// with an optional suffix K, M or G; a message larger than half of it
    /// is tokenized anew every time [default: 256MiB].
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    token_cache: Option<u64>,
    /// Write the trace to FILE instead of standard output.
    #[arg(long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Build code-edit requests from the history of the git repository
    /// REPO instead of reading requests: one per non-merge commit and file
    /// modified in it, oldest first.
    #[arg(long, value_name = "REPO", conflicts_with = "file")]
    git: Option<PathBuf>,
    /// With --git: one request per file modified between the commits (or
    /// tags) FROM and TO, the file at FROM edited into the file at TO,
    /// instead of one per commit. Given more than once, the ranges are
    /// read in the order given, into one trace.
    #[arg(long, value_name = "FROM..TO", value_parser = parse_range, requires = "git")]
    git_range: Vec<RangeSpec>,
    /// With --git: the most added plus deleted lines of a file's change
    /// [default: 30; with --git-range 4000].
    #[arg(long, value_name = "N", requires = "git")]
    max_changed_lines: Option<u64>,
    /// With --git: the largest file before the change, in bytes (suffix K,
    /// M or G allowed) [default: 16KiB; with --git-range 256KiB].
    #[arg(long, value_name = "SIZE", value_parser = parse_size, requires = "git")]
    max_bytes: Option<u64>,
    /// Worker threads (default: one per core).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    threads: Option<u16>,
    /// JSON Lines of requests {"prompt": TEXT, "output": TEXT, "id": ...}
    /// or {"messages": [{"role": TEXT, "content": TEXT}, ...], "output":
    /// TEXT, "id": ...} (a chat's turns, rendered
    /// "<|im_start|>ROLE\nCONTENT<|im_end|>\n" each, then
    /// "<|im_start|>assistant\n"); standard input when absent or "-".
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
}

/// A finite number (`--suffix-factor` and the like).
fn finite(s: &str) -> Result<f32, String> {
    match s.parse::<f32>() {
        Ok(x) if x.is_finite() => Ok(x),
        _ => Err(format!("{s:?} is not a finite number")),
    }
}

/// The global tree's memory ceiling unless told otherwise: room on a
/// 24 GiB machine for the per-request trees of every core and the rest.
pub const DEFAULT_SUFFIX_MAX_MEMORY: u64 = 16 << 30;

/// What drafts: an n-gram rule, or suffix decoding with its global tree's
/// memory ceiling.
#[derive(Clone, Copy, Debug)]
enum Drafter {
    Ngram(Config),
    /// The settings, the global tree's ceiling, and the experiment's
    /// requests in flight (`--suffix-in-flight`).
    Suffix(SuffixConfig, u64, Option<usize>),
}

/// One request read: where it came from and its text.
struct Job {
    index: usize,
    line: u64,
    id: Value,
    prompt: Prompt,
    output: String,
}

/// The tokenizer, the cache of chat messages' tokens, and the n-grams of
/// recent conversations, which every worker shares.
struct Encoding {
    tokenizer: Tokenizer,
    cache: TokenCache,
    /// An n-gram rule's state after the last call of each recent
    /// conversation, the most recently used last: the next call of the same
    /// conversation (or of one that begins the same way, such as under the
    /// same system prompt) goes on from the messages it shares.
    conversations: Mutex<Vec<ChatState>>,
    max_conversations: usize,
    /// Messages whose tokens a conversation's state kept (neither looked up
    /// in the cache nor tokenized).
    kept_messages: AtomicU64,
}

/// Conversations' n-gram states kept for `threads` workers: one each being
/// worked on and as many waiting. Each takes memory in proportion to its
/// context (its text, its tokens and their n-grams: some tens of bytes a
/// token).
pub fn conversations_kept(threads: usize) -> usize {
    2 * threads + 2
}

impl Encoding {
    /// The state whose last call's messages begin as `turns` do the
    /// longest (most recent first among equals), or a new one when none
    /// shares any and there is room.
    fn take(&self, config: Config, turns: &[ChatMessage]) -> ChatState {
        let mut kept = self
            .conversations
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let best = kept
            .iter()
            .enumerate()
            .map(|(i, c)| (c.shared(turns), i))
            .max();
        match best {
            Some((n, i)) if n > 0 || kept.len() >= self.max_conversations => kept.remove(i),
            _ => ChatState::new(config),
        }
    }

    /// Keeps `conversation` for the next requests, dropping the least
    /// recently used beyond the limit.
    fn put_back(&self, conversation: ChatState) {
        let mut kept = self
            .conversations
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        kept.push(conversation);
        if kept.len() > self.max_conversations {
            kept.remove(0);
        }
    }
}

/// What a worker hands back for request `index`.
struct Done {
    line: Vec<u8>,
    positions: u64,
    /// For suffix decoding: the part the global tree completes, in order.
    suffix: Option<Box<SuffixPart>>,
}

/// A request's per-request pass, waiting for the global tree.
struct SuffixPart {
    id: Value,
    prompt_tokens: usize,
    /// The prompt's last `depth - 1` tokens.
    prompt_tail: Vec<u32>,
    output: Vec<u32>,
    local: LocalPass,
}

enum Message {
    Job(Job),
    /// The request at this index is bad (or the input could not be read):
    /// the run stops there.
    Failed(usize, CliError),
}

/// Requests in flight (read, not yet written) for `threads` workers.
pub fn window(threads: usize) -> usize {
    4 * threads + 16
}

/// Runs `ngram`.
pub fn run(args: Args) -> Result<(), CliError> {
    let drafter = drafter(&args)?;
    let eos = args.eos == YesNo::Yes;
    let mut meta = TraceMeta {
        tokenizer: args.tokenizer.clone(),
        rule: args.rule.name().to_owned(),
        min_n: 0,
        max_n: 0,
        cap: 0,
        eos,
        greedy: !args.sampled,
        num_speculative_tokens: None,
        suffix: None,
    };
    match drafter {
        Drafter::Ngram(config) => {
            (meta.min_n, meta.max_n, meta.cap) = (config.min_n, config.max_n, config.cap);
        }
        Drafter::Suffix(s, _, _) => {
            // The match lengths possible, 1..depth - 1, stand for the n.
            (meta.min_n, meta.max_n, meta.cap) = (1, s.depth - 1, s.cap);
            meta.num_speculative_tokens = Some(s.cap);
            meta.suffix = Some(SuffixMeta {
                depth: s.depth,
                factor: s.factor,
                offset: s.offset,
                min_prob: s.min_prob,
                cache: s.cache,
            });
        }
    }
    let max_line_bytes = usize::try_from(args.max_line_bytes).unwrap_or(usize::MAX);

    // Every input is checked before anything is written.
    let source = open_source(&args)?;
    if args.output.is_none() && specdec_sim::stdio::stdout_is_closed() {
        return Err(CliError::new(
            "standard output is closed; the trace was not written",
        ));
    }
    refuse_output_onto_an_input(&args)?;
    let loaded = Tokenizer::load(&args.tokenizer).map_err(tokenizer_error)?;
    if args.sampled {
        eprintln!(
            "warning: --sampled: outputs of sampled decoding depend on the draws, so the trace is not an exact counterfactual of drafting (recorded as \"greedy\": false)"
        );
    }
    let mut out = open_output(&args)?;
    let threads = args.threads.map_or_else(
        || thread::available_parallelism().map_or(1, |n| n.get()),
        usize::from,
    );
    let tokenizer = Arc::new(Encoding {
        tokenizer: loaded,
        cache: TokenCache::new(args.token_cache.unwrap_or(DEFAULT_TOKEN_CACHE_BYTES)),
        conversations: Mutex::new(Vec::new()),
        max_conversations: conversations_kept(threads),
        kept_messages: AtomicU64::new(0),
    });
    let output_name = args
        .output
        .as_deref()
        .map_or_else(|| "standard output".to_owned(), display_path);
    let mut header = Vec::new();
    write_meta(&mut header, &meta).map_err(|e| write_error(&e, &output_name))?;
    // The metadata line goes out with the first request (or at the end of
    // an input without any): an input refused at its first line leaves
    // nothing written, not a trace that reads as empty.
    let mut first = HeaderFirst {
        header: Some(header),
        inner: &mut out,
    };
    let written = pipeline(
        source,
        tokenizer,
        drafter,
        eos,
        max_line_bytes,
        threads,
        &mut first,
        &output_name,
    )
    .and_then(|()| first.finish().map_err(|e| write_error(&e, &output_name)));
    let flushed = out.flush();
    match written {
        Err(e) if !is_broken_pipe_error(&e) => return Err(e),
        _ => {}
    }
    match flushed {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(write_error(&e, &output_name)),
        _ => Ok(()),
    }
}

/// The drafter from the flags: an n-gram rule's, or suffix decoding's
/// (which takes no `--min-n`/`--max-n`, and whose flags no other rule
/// takes).
fn drafter(args: &Args) -> Result<Drafter, CliError> {
    let suffix_flags = [
        ("--suffix-depth", args.suffix_depth.is_some()),
        ("--suffix-factor", args.suffix_factor.is_some()),
        ("--suffix-offset", args.suffix_offset.is_some()),
        ("--suffix-min-prob", args.suffix_min_prob.is_some()),
        ("--suffix-cache", args.suffix_cache.is_some()),
        ("--suffix-max-memory", args.suffix_max_memory.is_some()),
        ("--suffix-in-flight", args.suffix_in_flight.is_some()),
    ];
    if args.rule != Rule::Suffix {
        if let Some((flag, _)) = suffix_flags.iter().find(|(_, given)| *given) {
            return Err(CliError::new(format!(
                "{flag} applies to --rule suffix only, not --rule {}",
                args.rule.name()
            )));
        }
        return config(args).map(Drafter::Ngram);
    }
    if let Some(flag) = [("--min-n", args.min_n), ("--max-n", args.max_n)]
        .iter()
        .find_map(|(flag, n)| n.map(|_| flag))
    {
        return Err(CliError::new(format!(
            "{flag} does not apply to --rule suffix, which matches every context length up to the depth minus one: set --suffix-depth instead"
        )));
    }
    let vllm = SuffixConfig::VLLM;
    let depth = args.suffix_depth.map_or(vllm.depth, usize::from);
    Ok(Drafter::Suffix(
        SuffixConfig {
            depth,
            factor: args.suffix_factor.unwrap_or(vllm.factor),
            offset: args.suffix_offset.unwrap_or(vllm.offset),
            min_prob: args.suffix_min_prob.unwrap_or(vllm.min_prob),
            cache: args.suffix_cache.unwrap_or(vllm.cache),
            // vLLM's num_speculative_tokens is the depth when unset.
            cap: args.cap.map_or(depth.min(MAX_CAP), usize::from),
        },
        args.suffix_max_memory.unwrap_or(DEFAULT_SUFFIX_MAX_MEMORY),
        in_flight(args, args.suffix_cache.unwrap_or(vllm.cache))?,
    ))
}

/// `--suffix-in-flight B`: at most the cache (a response stays while its
/// request runs), unless there is no global tree.
fn in_flight(args: &Args, cache: usize) -> Result<Option<usize>, CliError> {
    match args.suffix_in_flight {
        Some(b) if cache != 0 && usize::from(b) > cache => Err(CliError::new(format!(
            "--suffix-in-flight {b} is above --suffix-cache {cache}: a response would be evicted while its request runs"
        ))),
        b => Ok(b.map(usize::from)),
    }
}

/// The rule's settings from the flags: `--min-n` at most `--max-n`, and
/// equal for llama.cpp's simple rule.
fn config(args: &Args) -> Result<Config, CliError> {
    let (min_n, max_n) = args
        .rule
        .ns(args.min_n.map(usize::from), args.max_n.map(usize::from));
    if min_n > max_n {
        return Err(CliError::new(format!(
            "--min-n {min_n} is larger than --max-n {max_n}"
        )));
    }
    if args.rule == Rule::LlamacppSimple && min_n != max_n {
        return Err(CliError::new(format!(
            "--rule llamacpp-simple matches one n: --min-n {min_n} and --max-n {max_n} must be equal"
        )));
    }
    let cap = args.cap.map_or(64, usize::from);
    debug_assert!(cap <= MAX_CAP);
    Ok(Config {
        rule: args.rule,
        min_n,
        max_n,
        cap,
    })
}

/// The input the flags name: `--git`, a file, or standard input.
fn open_source(args: &Args) -> Result<Source, CliError> {
    Ok(match (&args.git, &args.file) {
        (Some(repo), _) if args.git_range.is_empty() => Source::Git(Box::new(
            History::open(
                repo,
                Limits {
                    max_changed_lines: args.max_changed_lines.unwrap_or(30),
                    max_bytes: args.max_bytes.unwrap_or(16 << 10),
                },
            )
            .map_err(git_error)?,
        )),
        (Some(repo), _) => {
            let limits = Limits {
                max_changed_lines: args.max_changed_lines.unwrap_or(RANGE_MAX_CHANGED_LINES),
                max_bytes: args.max_bytes.unwrap_or(RANGE_MAX_BYTES),
            };
            // Every range is checked and listed before anything is written.
            let ranges = args
                .git_range
                .iter()
                .map(|spec| Range::open(repo, spec.clone(), limits).map_err(range_error))
                .collect::<Result<Vec<_>, _>>()?;
            Source::Ranges(ranges)
        }
        (None, Some(path)) if !is_stdin(path) => {
            let name = display_path(path);
            let file =
                File::open(path).map_err(|e| CliError::new(format!("cannot open {name}: {e}")))?;
            // A directory opens but cannot be read: refused here, before the
            // metadata line is written.
            if file.metadata().is_ok_and(|m| m.is_dir()) {
                return Err(CliError::new(format!(
                    "{name} is a directory, not a file of requests; nothing was written"
                )));
            }
            Source::Lines {
                name,
                reader: Box::new(BufReader::with_capacity(1 << 16, file)),
            }
        }
        _ => {
            note_reading_stdin("JSON Lines");
            Source::Lines {
                name: "<stdin>".into(),
                reader: Box::new(BufReader::with_capacity(1 << 16, io::stdin())),
            }
        }
    })
}

/// Refuses a trace written onto one of the inputs (the same file: device
/// and inode, whatever the name or link), which `--output` would truncate
/// before it is read and standard output (`>> FILE`) would grow while it
/// is read.
fn refuse_output_onto_an_input(args: &Args) -> Result<(), CliError> {
    let (target, output) = match &args.output {
        Some(path) => (
            format!("--output {}", display_path(path)),
            file_id(std::fs::metadata(path)),
        ),
        None => (
            "standard output".to_owned(),
            file_id(fd_metadata(&io::stdout())),
        ),
    };
    let Some(output) = output else {
        return Ok(()); // a new file, or not a regular file
    };
    let mut inputs = Vec::new();
    match (&args.git, &args.file) {
        (Some(_), _) => {}
        (None, Some(path)) if !is_stdin(path) => inputs.push((
            format!("the input {}", display_path(path)),
            file_id(std::fs::metadata(path)),
        )),
        (None, _) => inputs.push((
            "the file on standard input".to_owned(),
            file_id(fd_metadata(&io::stdin())),
        )),
    }
    if let Some(path) = Tokenizer::file_of(&args.tokenizer) {
        inputs.push((
            format!("the --tokenizer file {}", display_path(path)),
            file_id(std::fs::metadata(path)),
        ));
    }
    match inputs.into_iter().find(|(_, id)| *id == Some(output)) {
        Some((input, _)) => Err(CliError::new(format!(
            "{target} is {input}: the trace would overwrite it; nothing was written"
        ))),
        None => Ok(()),
    }
}

/// What a standard stream is open on.
#[cfg(unix)]
fn fd_metadata(stream: &impl std::os::fd::AsFd) -> io::Result<std::fs::Metadata> {
    File::from(stream.as_fd().try_clone_to_owned()?).metadata()
}

#[cfg(not(unix))]
fn fd_metadata<T>(_: &T) -> io::Result<std::fs::Metadata> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// A writer that writes `header` before the first bytes written through
/// it, or at [`finish`](Self::finish) when none were.
struct HeaderFirst<'a> {
    header: Option<Vec<u8>>,
    inner: &'a mut dyn Write,
}

impl HeaderFirst<'_> {
    /// The header, unless it went out already.
    fn finish(&mut self) -> io::Result<()> {
        if let Some(header) = self.header.take() {
            self.inner.write_all(&header)?;
        }
        Ok(())
    }
}

impl Write for HeaderFirst<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.finish()?;
        self.inner.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Where the trace goes: `--output`, or standard output.
fn open_output(args: &Args) -> Result<Box<dyn Write>, CliError> {
    Ok(match &args.output {
        Some(path) => Box::new(BufWriter::new(File::create(path).map_err(|e| {
            CliError::new(format!("cannot create {}: {e}", display_path(path)))
        })?)),
        None => Box::new(BufWriter::with_capacity(1 << 16, io::stdout())),
    })
}

fn write_error(e: &io::Error, output: &str) -> CliError {
    if e.kind() == io::ErrorKind::BrokenPipe {
        CliError::new(BROKEN_PIPE)
    } else {
        CliError::new(format!("cannot write the trace to {output}: {e}"))
    }
}

/// A reader of standard output that went away asked for no more: exit 0.
const BROKEN_PIPE: &str = "the reader of the trace went away";

fn is_broken_pipe_error(e: &CliError) -> bool {
    e.to_string() == BROKEN_PIPE
}

enum Source {
    Lines {
        name: String,
        reader: Box<dyn BufRead + Send>,
    },
    Git(Box<History>),
    /// `--git-range`, once or more: read in that order.
    Ranges(Vec<Range>),
}

/// What a source of edits (`--git`, `--git-range`) read, for the summary
/// line.
enum EditCounts {
    /// Commits with a request, the files skipped, the unborn branch of a
    /// new repository.
    Git(u64, Skipped, Option<String>),
    /// The ranges, the files modified in them, the files skipped.
    Ranges(Vec<RangeSpec>, u64, Skipped),
}

/// Reads, generates on `threads` workers and writes in input order.
#[allow(clippy::too_many_arguments)]
fn pipeline(
    source: Source,
    tokenizer: Arc<Encoding>,
    drafter: Drafter,
    eos: bool,
    max_line_bytes: usize,
    threads: usize,
    out: &mut dyn Write,
    output_name: &str,
) -> Result<(), CliError> {
    let (mut global, in_flight) = match drafter {
        Drafter::Suffix(config, max_bytes, in_flight) => {
            (Some((GlobalCache::new(config), max_bytes)), in_flight)
        }
        Drafter::Ngram(_) => (None, None),
    };
    // With --suffix-in-flight: every request's part, until the end.
    let mut held: Vec<Box<SuffixPart>> = Vec::new();
    let window = window(threads);
    let (credit_tx, credit_rx) = bounded::<()>(window);
    for _ in 0..window {
        credit_tx.send(()).expect("room for every credit");
    }
    let (job_tx, job_rx) = bounded::<Message>(window);
    let (done_tx, done_rx) = unbounded::<(usize, Result<Done, CliError>)>();
    // The reader and workers are detached: after an error the main thread
    // returns without waiting for a reader blocked on a slow input, and
    // the process ends them.
    let reader = thread::spawn(move || read_requests(source, max_line_bytes, &credit_rx, &job_tx));
    let workers = spawn_workers(threads, job_rx, done_tx, &tokenizer, drafter, eos);

    let mut pending: BTreeMap<usize, Result<Done, CliError>> = BTreeMap::new();
    let mut next = 0usize;
    let mut positions = 0u64;
    let started = Instant::now();
    let mut last_note = started;
    let mut noted = false;
    let mut last_noted = (0, 0);
    let note_every = Duration::from_secs(5);
    loop {
        let message = match done_rx.recv_timeout(Duration::from_secs(1)) {
            Ok(message) => Some(message),
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => None,
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
        };
        match message {
            Some((index, result)) => {
                pending.insert(index, result);
            }
            // Waiting on the input: what is written so far reaches the
            // reader of the trace.
            None => out.flush().map_err(|e| write_error(&e, output_name))?,
        }
        while let Some(result) = pending.remove(&next) {
            let done = result?;
            let line = match (done.suffix, &mut global) {
                (Some(part), _) if in_flight.is_some() => {
                    held.push(part);
                    Vec::new()
                }
                (Some(part), Some((cache, max_bytes))) => suffix_line(cache, *max_bytes, &part)?,
                _ => done.line,
            };
            out.write_all(&line)
                .map_err(|e| write_error(&e, output_name))?;
            positions += done.positions;
            next += 1;
            let _ = credit_tx.send(());
        }
        // Every few seconds, when there is news.
        if last_note.elapsed() >= note_every && (next, positions) != last_noted {
            last_note = Instant::now();
            last_noted = (next, positions);
            noted = true;
            progress(next, positions, started);
        }
    }
    if let Some((_, result)) = pending.pop_first() {
        // Cannot happen: every index below the last is sent.
        result?;
    }
    if let (Some(batch), Some((cache, _))) = (in_flight, &global) {
        for line in interleaved_lines(cache, &held, batch) {
            out.write_all(&line)
                .map_err(|e| write_error(&e, output_name))?;
        }
    }
    for worker in workers {
        let _ = worker.join();
    }
    let edit_counts = reader.join().ok().flatten();
    if noted && (next, positions) != last_noted {
        progress(next, positions, started);
    }
    let cached = tokenizer.cache.stats();
    // A message a conversation's state kept counts as found: it was not
    // tokenized again.
    let found = cached.hits + tokenizer.kept_messages.load(Ordering::Relaxed);
    if found + cached.misses > 0 {
        eprintln!(
            "ngram: chat messages: {} tokenized, {} found in the token cache (--token-cache)",
            group_digits(cached.misses),
            group_digits(found),
        );
    }
    match edit_counts {
        Some(EditCounts::Git(commits, skipped, unborn)) => {
            if let Some(branch) = unborn {
                eprintln!(
                    "ngram --git: the repository has no commits yet (HEAD names {branch}, a branch without any)"
                );
            }
            note_git_counts(next, positions, commits, &skipped);
        }
        Some(EditCounts::Ranges(specs, files, skipped)) => {
            note_range_counts(next, positions, &specs, files, &skipped);
        }
        None => {}
    }
    // What the global tree took, for --suffix-max-memory (the
    // experiment's own tree is not that one).
    if let Some((cache, _)) = global.as_ref().filter(|_| in_flight.is_none()) {
        let tree = cache.tree();
        eprintln!(
            "ngram --rule suffix: the global tree peaked at {} ({} nodes at its peak); at the end it held {} responses, {} tokens",
            binary_size(cache.peak_bytes() as u64),
            group_digits(cache.peak_nodes() as u64),
            cache.cached(),
            group_digits(tree.tokens() as u64),
        );
    }
    Ok(())
}

/// `threads` workers generating the jobs of `job_rx` into `done_tx`
/// (theirs alone once they are spawned: the channels close with them).
fn spawn_workers(
    threads: usize,
    job_rx: Receiver<Message>,
    done_tx: Sender<(usize, Result<Done, CliError>)>,
    tokenizer: &Arc<Encoding>,
    drafter: Drafter,
    eos: bool,
) -> Vec<thread::JoinHandle<()>> {
    (0..threads)
        .map(|_| {
            let job_rx = job_rx.clone();
            let done_tx = done_tx.clone();
            let tokenizer = Arc::clone(tokenizer);
            thread::spawn(move || work(&job_rx, &done_tx, &tokenizer, &drafter, eos))
        })
        .collect()
}

/// `bytes` in the largest binary unit under which it is at least 1.
fn binary_size(bytes: u64) -> String {
    let units = ["bytes", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < units.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} bytes")
    } else {
        format!("{value:.1} {}", units[unit])
    }
}

/// The trace lines of `--suffix-in-flight`'s experiment.
fn interleaved_lines(cache: &GlobalCache, held: &[Box<SuffixPart>], batch: usize) -> Vec<Vec<u8>> {
    let ids: Vec<String> = held.iter().map(|p| p.id.to_string()).collect();
    let requests: Vec<Request<'_>> = held
        .iter()
        .zip(&ids)
        .map(|(p, id)| {
            (
                id.as_str(),
                p.prompt_tail.as_slice(),
                p.prompt_tokens,
                p.output.as_slice(),
                &p.local,
            )
        })
        .collect();
    interleaved(cache.config(), &requests, batch)
        .into_iter()
        .zip(held)
        .map(|(o, p)| {
            let request = TraceRequest {
                id: p.id.clone(),
                prompt_tokens: p.prompt_tokens as u64,
                output_tokens: p.output.len() as u64,
                proposal: o.proposal,
                matched: o.matched,
                ngram: Some(o.match_len),
                score: Some(o.score),
                below: o.below,
            };
            let mut line = Vec::new();
            write_request(&mut line, &request).expect("writing to memory");
            line
        })
        .collect()
}

/// The trace line of a request's suffix part: the global tree's pass, in
/// file order. Stops the run when the global tree outgrows `max_bytes`.
fn suffix_line(
    cache: &mut GlobalCache,
    max_bytes: u64,
    part: &SuffixPart,
) -> Result<Vec<u8>, CliError> {
    let id = part.id.to_string();
    let outcomes = cache.request(
        &id,
        &part.prompt_tail,
        part.prompt_tokens,
        &part.output,
        &part.local,
    );
    let bytes = cache.tree().bytes() as u64;
    if bytes > max_bytes {
        return Err(CliError::new(format!(
            "request {}: the global suffix tree holds {} responses in {}, above --suffix-max-memory ({}); nothing after this request was written. Lower --suffix-cache (the responses kept) or raise --suffix-max-memory if the machine has the memory",
            excerpt(&id),
            cache.cached(),
            binary_size(bytes),
            binary_size(max_bytes),
        )));
    }
    let request = TraceRequest {
        id: part.id.clone(),
        prompt_tokens: part.prompt_tokens as u64,
        output_tokens: part.output.len() as u64,
        proposal: outcomes.proposal,
        matched: outcomes.matched,
        ngram: Some(outcomes.match_len),
        score: Some(outcomes.score),
        below: outcomes.below,
    };
    let mut line = Vec::new();
    write_request(&mut line, &request).expect("writing to memory");
    Ok(line)
}

/// What `--git` read: requests, positions, commits and the files skipped.
fn note_git_counts(requests: usize, positions: u64, commits: u64, skipped: &Skipped) {
    eprintln!(
        "ngram --git: {requests} requests ({positions} positions) from {commits} commits; skipped {} files not UTF-8 text, {} with more changed lines than --max-changed-lines, {} larger than --max-bytes, {} whose parent is not in the repository, {} submodules, {} symbolic links",
        skipped.not_text,
        skipped.too_many_changes,
        skipped.too_large,
        skipped.unavailable,
        skipped.submodules,
        skipped.symlinks
    );
}

/// What `--git-range` read: requests, positions, files modified and the
/// files skipped (over every range given: the first and the last named).
fn note_range_counts(
    requests: usize,
    positions: u64,
    specs: &[RangeSpec],
    files: u64,
    skipped: &Skipped,
) {
    let ranges = match specs {
        [] => String::new(),
        [spec] => spec.to_string(),
        [first, .., last] => format!("{first} ... {last} ({} ranges)", specs.len()),
    };
    eprintln!(
        "ngram --git-range {ranges}: {requests} requests ({positions} positions) from {files} files modified; skipped {} not UTF-8 text, {} with more changed lines than --max-changed-lines, {} larger than --max-bytes, {} not in the repository, {} submodules, {} symbolic links",
        skipped.not_text,
        skipped.too_many_changes,
        skipped.too_large,
        skipped.unavailable,
        skipped.submodules,
        skipped.symlinks
    );
}

fn progress(requests: usize, positions: u64, started: Instant) {
    let seconds = started.elapsed().as_secs_f64();
    eprintln!(
        "ngram: {requests} requests, {positions} positions, {:.0} positions/s",
        positions as f64 / seconds.max(1e-9)
    );
}

/// The reading thread: one message per request, in order, each after a
/// credit (a request written). Returns the counts of `--git` (commits,
/// files skipped, and the unborn branch of a new repository) or of
/// `--git-range`.
fn read_requests(
    source: Source,
    max_line_bytes: usize,
    credits: &Receiver<()>,
    jobs: &Sender<Message>,
) -> Option<EditCounts> {
    match source {
        Source::Git(mut history) => {
            read_edits(credits, jobs, || history.next_request().map_err(git_error))?;
            Some(EditCounts::Git(
                history.commits,
                history.skipped,
                history.unborn.take(),
            ))
        }
        Source::Ranges(mut ranges) => {
            let mut current = 0;
            read_edits(credits, jobs, || {
                while let Some(range) = ranges.get_mut(current) {
                    match range.next_request().map_err(range_error)? {
                        Some(request) => return Ok(Some(request)),
                        None => current += 1,
                    }
                }
                Ok(None)
            })?;
            let mut skipped = Skipped::default();
            for range in &ranges {
                skipped.add(&range.skipped);
            }
            Some(EditCounts::Ranges(
                ranges.iter().map(|range| range.spec().clone()).collect(),
                ranges.iter().map(|range| range.files).sum(),
                skipped,
            ))
        }
        Source::Lines { name, reader } => {
            let mut requests = RequestReader::with_max_line_bytes(reader, max_line_bytes);
            let mut index = 0;
            loop {
                if credits.recv().is_err() {
                    return None;
                }
                let message = match requests.next()? {
                    Ok(request) => Message::Job(Job {
                        index,
                        line: request.line,
                        id: request.id,
                        prompt: request.prompt,
                        output: request.output,
                    }),
                    Err(e) => Message::Failed(index, request_error(&name, e)),
                };
                let failed = matches!(message, Message::Failed(..));
                if jobs.send(message).is_err() || failed {
                    return None;
                }
                index += 1;
            }
        }
    }
}

/// The message of a repository's error, naming the repository by its flag.
fn git_error(e: GitError) -> CliError {
    match e {
        GitError::Repository { repo, problem } => {
            CliError::new(format!("--git {}: {problem}", display_path(&repo)))
        }
        e => CliError::new(e),
    }
}

/// The message of a tokenizer's error, naming its file by its flag.
fn tokenizer_error(e: TokenizerError) -> CliError {
    match e {
        TokenizerError::File { path, problem } => {
            CliError::new(format!("--tokenizer {}: {problem}", display_path(&path)))
        }
        e => CliError::new(e),
    }
}

/// The message of a range's error, naming the repository and the range
/// by their flags.
fn range_error(e: RangeError) -> CliError {
    match e {
        RangeError::Repository { repo, problem } => {
            CliError::new(format!("--git {}: {problem}", display_path(&repo)))
        }
        RangeError::Range { spec, problem } => {
            CliError::new(format!("--git-range {spec}: {problem}"))
        }
        e => CliError::new(e),
    }
}

/// Hands the edits of `next` on, one per credit; `None` when the run
/// stopped (the writer is gone, or an edit could not be read).
fn read_edits(
    credits: &Receiver<()>,
    jobs: &Sender<Message>,
    mut next: impl FnMut() -> Result<Option<crate::ngram::git::EditRequest>, CliError>,
) -> Option<()> {
    let mut index = 0;
    loop {
        credits.recv().ok()?;
        let message = match next() {
            Ok(Some(request)) => Message::Job(Job {
                index,
                line: index as u64 + 1,
                id: Value::String(request.id),
                prompt: Prompt::Text(request.prompt),
                output: request.output,
            }),
            Ok(None) => return Some(()),
            Err(e) => Message::Failed(index, e),
        };
        let failed = matches!(message, Message::Failed(..));
        if jobs.send(message).is_err() || failed {
            return None;
        }
        index += 1;
    }
}

/// The message of a request the input `name` could not give, naming the
/// line limit by its flag.
fn request_error(name: &str, e: RequestError) -> CliError {
    CliError::new(match e {
        RequestError::Line(LineError::TooLong { line, max }) => format!(
            "{name}: line {line}: longer than {max} bytes (--max-line-bytes); the rest of the input was not read"
        ),
        RequestError::Line(LineError::Read { after, error }) => {
            format!("{name}: line {}: cannot read: {error}", after + 1)
        }
        e => format!("{name}: {e}"),
    })
}

/// A worker: tokenizes and generates until the jobs end or the writer is
/// gone.
fn work(
    jobs: &Receiver<Message>,
    done: &Sender<(usize, Result<Done, CliError>)>,
    tokenizer: &Encoding,
    drafter: &Drafter,
    eos: bool,
) {
    for message in jobs {
        let (index, result) = match message {
            Message::Failed(index, e) => (index, Err(e)),
            Message::Job(job) => (job.index, one_request(&job, tokenizer, drafter, eos)),
        };
        if done.send((index, result)).is_err() {
            return;
        }
    }
}

fn one_request(
    job: &Job,
    tokenizer: &Encoding,
    drafter: &Drafter,
    eos: bool,
) -> Result<Done, CliError> {
    let at = |what: &str| {
        CliError::new(format!(
            "request {} (line {}): {what}",
            excerpt(&job.id.to_string()),
            job.line
        ))
    };
    let encode = |text: &str| tokenizer.tokenizer.encode(text);
    let no_output = || {
        at(
            "field \"output\": tokenizes to nothing, and without --eos yes an output needs at least one token",
        )
    };
    let (prompt_tokens, output_len, positions) = match (&job.prompt, drafter) {
        // An n-gram rule on a conversation's call: from its state.
        (Prompt::Messages(turns), Drafter::Ngram(config)) => {
            let mut conversation = tokenizer.take(*config, turns);
            let traced = conversation.generate(
                turns,
                &job.output,
                eos,
                &tokenizer.cache,
                &tokenizer.tokenizer,
            );
            tokenizer.put_back(conversation);
            let traced = traced.map_err(|e| at(&e))?;
            tokenizer
                .kept_messages
                .fetch_add(traced.kept_messages as u64, Ordering::Relaxed);
            if traced.output_tokens == 0 {
                return Err(no_output());
            }
            (traced.prompt_tokens, traced.output_tokens, traced.positions)
        }
        (prompt, drafter) => {
            let mut context =
                prompt_tokens(prompt, &tokenizer.cache, encode).map_err(|e| at(&e))?;
            let prompt_tokens = context.len();
            let output = encode(&job.output).map_err(|e| at(&e))?;
            context.extend_from_slice(&output);
            if eos {
                context.push(EOS);
            }
            let output_len = context.len() - prompt_tokens;
            if output_len == 0 {
                return Err(no_output());
            }
            match drafter {
                Drafter::Ngram(config) => (
                    prompt_tokens,
                    output_len,
                    generate(config, &context, output_len),
                ),
                Drafter::Suffix(config, _, _) => {
                    let (prompt, output) = context.split_at(prompt_tokens);
                    let local = local_pass(config, prompt, output);
                    return Ok(Done {
                        positions: local.positions() as u64,
                        line: Vec::new(),
                        suffix: Some(Box::new(SuffixPart {
                            id: job.id.clone(),
                            prompt_tokens,
                            prompt_tail: prompt[prompt_tokens.saturating_sub(config.depth - 1)..]
                                .to_vec(),
                            output: output.to_vec(),
                            local,
                        })),
                    });
                }
            }
        }
    };
    let request = TraceRequest {
        id: job.id.clone(),
        prompt_tokens: prompt_tokens as u64,
        output_tokens: output_len as u64,
        proposal: positions.proposal,
        matched: positions.matched,
        ngram: Some(positions.ngram),
        score: None,
        below: Vec::new(),
    };
    let mut line = Vec::new();
    write_request(&mut line, &request).expect("writing to memory");
    Ok(Done {
        positions: request.matched.len() as u64,
        line,
        suffix: None,
    })
}
