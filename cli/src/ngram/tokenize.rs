//! The tokenizers of `ngram`: OpenAI's `o200k_base` and `cl100k_base`
//! (their BPE files are embedded in `tiktoken-rs`: nothing is downloaded),
//! or a Hugging Face `tokenizer.json` read through the `tokenizers` crate
//! (built without C code). Text is encoded the ordinary way: no special
//! tokens are recognised or added.

use std::fmt;
use std::io::{self, Read as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use rustc_hash::FxHashMap;
use specdec_ingest::trace::{ASSISTANT_HEADER, Prompt};

use crate::format::display_path;

/// A `tokenizer.json` larger than this is refused before it is parsed (the
/// largest in common use are a few tens of MiB).
pub const MAX_TOKENIZER_FILE_BYTES: u64 = 256 << 20;

/// Why a tokenizer could not be loaded: it names the encoding or the file;
/// the command line maps it to its flag (`--tokenizer FILE: ...`).
#[derive(Debug)]
pub enum TokenizerError {
    /// The built-in encoding `name` could not be built.
    BuiltIn {
        /// `o200k_base` or `cl100k_base`.
        name: &'static str,
        /// What `tiktoken-rs` said.
        message: String,
    },
    /// The `tokenizer.json` at `path` cannot be used: `problem`.
    File {
        /// The file as given.
        path: PathBuf,
        /// What is wrong with it.
        problem: FileProblem,
    },
}

/// What is wrong with a tokenizer file ([`TokenizerError::File`]).
#[derive(Debug)]
pub enum FileProblem {
    /// It cannot be opened (and the name is not a built-in encoding).
    Open(io::Error),
    /// It opened but cannot be read.
    Read(io::Error),
    /// Larger than [`MAX_TOKENIZER_FILE_BYTES`].
    TooLarge,
    /// Read, but not a Hugging Face `tokenizer.json`: what `tokenizers`
    /// said.
    NotATokenizer(String),
}

impl fmt::Display for TokenizerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenizerError::BuiltIn { name, message } => {
                write!(f, "cannot build the tokenizer {name}: {message}")
            }
            TokenizerError::File { path, problem } => {
                write!(f, "the tokenizer {}: {problem}", display_path(path))
            }
        }
    }
}

impl std::error::Error for TokenizerError {}

impl fmt::Display for FileProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileProblem::Open(e) => write!(
                f,
                "not o200k_base or cl100k_base, and cannot open it as a tokenizer.json: {e}"
            ),
            FileProblem::Read(e) => write!(f, "cannot read it: {e}"),
            FileProblem::TooLarge => write!(
                f,
                "larger than {} MiB, not a tokenizer.json",
                MAX_TOKENIZER_FILE_BYTES >> 20
            ),
            FileProblem::NotATokenizer(why) => {
                write!(f, "not a Hugging Face tokenizer.json: {why}")
            }
        }
    }
}

/// A tokenizer, shared by every worker thread.
pub enum Tokenizer {
    /// `o200k_base` or `cl100k_base`.
    Tiktoken(tiktoken_rs::CoreBPE),
    /// A local `tokenizer.json`.
    HuggingFace(Box<tokenizers::Tokenizer>),
}

impl Tokenizer {
    /// The file a `--tokenizer` value names: `None` for the built-in
    /// encodings (a file of that name is not read).
    ///
    /// ```
    /// use specdec_metrics_cli::ngram::tokenize::Tokenizer;
    /// assert_eq!(Tokenizer::file_of("o200k_base"), None);
    /// assert!(Tokenizer::file_of("tokenizer.json").is_some());
    /// ```
    pub fn file_of(name: &str) -> Option<&Path> {
        (!matches!(name, "o200k_base" | "cl100k_base")).then(|| Path::new(name))
    }

    /// `o200k_base`, `cl100k_base`, or the path of a `tokenizer.json`.
    pub fn load(name: &str) -> Result<Self, TokenizerError> {
        let built_in = match name {
            "o200k_base" => Some(("o200k_base", tiktoken_rs::o200k_base())),
            "cl100k_base" => Some(("cl100k_base", tiktoken_rs::cl100k_base())),
            _ => None,
        };
        if let Some((name, bpe)) = built_in {
            return bpe
                .map(Tokenizer::Tiktoken)
                .map_err(|e| TokenizerError::BuiltIn {
                    name,
                    message: e.to_string(),
                });
        }
        let path = Path::new(name);
        let refused = |problem| TokenizerError::File {
            path: path.to_owned(),
            problem,
        };
        let file = std::fs::File::open(path).map_err(|e| refused(FileProblem::Open(e)))?;
        let mut bytes = Vec::new();
        file.take(MAX_TOKENIZER_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| refused(FileProblem::Read(e)))?;
        if bytes.len() as u64 > MAX_TOKENIZER_FILE_BYTES {
            return Err(refused(FileProblem::TooLarge));
        }
        tokenizers::Tokenizer::from_bytes(&bytes)
            .map(|t| Tokenizer::HuggingFace(Box::new(t)))
            .map_err(|e| refused(FileProblem::NotATokenizer(e.to_string())))
    }

    /// The token ids of `text`, without special tokens.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        match self {
            Tokenizer::Tiktoken(bpe) => Ok(bpe.encode_ordinary(text)),
            Tokenizer::HuggingFace(t) => t
                .encode(text, false)
                .map(|enc| enc.get_ids().to_vec())
                .map_err(|e| format!("the tokenizer failed: {e}")),
        }
    }
}

/// The token cache's size unless told otherwise (`ngram --token-cache`):
/// room for the messages of a few hundred long conversations, small
/// beside the rest of a run.
pub const DEFAULT_TOKEN_CACHE_BYTES: u64 = 256 << 20;

/// What an entry of a [`TokenCache`] is counted as besides its text and
/// tokens: the map's slot, the two allocations' headers.
const ENTRY_OVERHEAD: usize = 64;

/// The tokens of rendered chat messages, by the rendered text, shared by
/// every worker: an agent resends its conversation so far with every
/// call, and each message is tokenized once while it stays here.
///
/// Bounded: entries are counted as their text's bytes, four bytes a token
/// and a fixed overhead, and kept in two generations of at most half the
/// budget each. A hit in the older generation moves the entry to the
/// newer one; when the newer one is full, the older one is dropped and the
/// newer one becomes it. So the recently used entries stay (an
/// approximation of least-recently-used that costs one map lookup or two),
/// and the cache holds at most the budget (an entry larger than half of it
/// is not kept). A message
/// evicted is tokenized again when it comes back: the result is the same,
/// only slower. The lock is not held while tokenizing, so two workers may
/// tokenize the same new message at once; both get the same tokens.
pub struct TokenCache {
    max_bytes: usize,
    inner: Mutex<Generations>,
}

#[derive(Default)]
struct Generations {
    newer: FxHashMap<Box<str>, Arc<[u32]>>,
    newer_bytes: usize,
    older: FxHashMap<Box<str>, Arc<[u32]>>,
    hits: u64,
    misses: u64,
}

/// How a [`TokenCache`] did: the messages found in it and those
/// tokenized.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Messages found already tokenized.
    pub hits: u64,
    /// Messages tokenized.
    pub misses: u64,
}

fn entry_bytes(text: &str, tokens: &[u32]) -> usize {
    text.len() + 4 * tokens.len() + ENTRY_OVERHEAD
}

impl TokenCache {
    /// A cache of at most about `max_bytes` (0: nothing is kept).
    pub fn new(max_bytes: u64) -> Self {
        Self {
            max_bytes: usize::try_from(max_bytes).unwrap_or(usize::MAX),
            inner: Mutex::new(Generations::default()),
        }
    }

    /// The tokens of `text`, from the cache or from `encode` (then kept).
    ///
    /// ```
    /// use specdec_metrics_cli::ngram::tokenize::TokenCache;
    /// let cache = TokenCache::new(1 << 20);
    /// let bytes = |t: &str| Ok::<_, String>(t.bytes().map(u32::from).collect());
    /// assert_eq!(&*cache.tokens("ab", bytes).unwrap(), &[97, 98]);
    /// assert_eq!(&*cache.tokens("ab", |_| Err("not called".into())).unwrap(), &[97, 98]);
    /// assert_eq!((cache.stats().hits, cache.stats().misses), (1, 1));
    /// ```
    pub fn tokens(
        &self,
        text: &str,
        encode: impl FnOnce(&str) -> Result<Vec<u32>, String>,
    ) -> Result<Arc<[u32]>, String> {
        {
            let mut g = self.lock();
            if let Some(tokens) = g.newer.get(text) {
                let tokens = Arc::clone(tokens);
                g.hits += 1;
                return Ok(tokens);
            }
            if let Some((key, tokens)) = g.older.remove_entry(text) {
                g.hits += 1;
                let found = Arc::clone(&tokens);
                self.insert(&mut g, key, tokens);
                return Ok(found);
            }
            g.misses += 1;
        }
        let tokens: Arc<[u32]> = encode(text)?.into();
        let mut g = self.lock();
        if !g.newer.contains_key(text) {
            self.insert(&mut g, text.into(), Arc::clone(&tokens));
        }
        Ok(tokens)
    }

    /// Hits and misses so far.
    pub fn stats(&self) -> CacheStats {
        let g = self.lock();
        CacheStats {
            hits: g.hits,
            misses: g.misses,
        }
    }

    /// What the entries take, as counted against the budget.
    pub fn bytes(&self) -> usize {
        let g = self.lock();
        g.newer_bytes
            + g.older
                .iter()
                .map(|(k, v)| entry_bytes(k, v))
                .sum::<usize>()
    }

    fn insert(&self, g: &mut Generations, key: Box<str>, tokens: Arc<[u32]>) {
        let bytes = entry_bytes(&key, &tokens);
        if bytes > self.max_bytes / 2 {
            return; // larger than a generation: never kept
        }
        if g.newer_bytes + bytes > self.max_bytes / 2 {
            g.older = std::mem::take(&mut g.newer);
            g.newer_bytes = 0;
        }
        g.newer_bytes += bytes;
        g.newer.insert(key, tokens);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Generations> {
        // A worker that panicked holding the lock left the maps whole
        // (every update is a single insert or remove).
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The tokens of a request's prompt: a text's, whole; a chat's, the
/// concatenation of each rendered message's tokens and the assistant's
/// header's, each from `cache` or `encode`. At a message boundary this
/// can differ from tokenizing the rendered text whole (a token that would
/// span the boundary is two here), as an engine that tokenizes its
/// template's parts apart would.
///
/// ```
/// use specdec_ingest::trace::{ChatMessage, Prompt};
/// use specdec_metrics_cli::ngram::tokenize::{TokenCache, prompt_tokens};
/// let bytes = |t: &str| Ok::<_, String>(t.bytes().map(u32::from).collect());
/// let cache = TokenCache::new(1 << 20);
/// let chat = Prompt::Messages(vec![ChatMessage { role: "user".into(), content: "hi".into() }]);
/// let whole: Vec<u32> = chat.render().bytes().map(u32::from).collect();
/// assert_eq!(prompt_tokens(&chat, &cache, bytes).unwrap(), whole);
/// ```
pub fn prompt_tokens(
    prompt: &Prompt,
    cache: &TokenCache,
    encode: impl Fn(&str) -> Result<Vec<u32>, String>,
) -> Result<Vec<u32>, String> {
    match prompt {
        Prompt::Text(text) => encode(text),
        Prompt::Messages(turns) => {
            let mut tokens = Vec::new();
            // One buffer for every message's rendering (the cache's key).
            let mut text = String::new();
            for m in turns {
                text.clear();
                m.render_into(&mut text);
                tokens.extend_from_slice(&cache.tokens(&text, &encode)?);
            }
            tokens.extend_from_slice(&cache.tokens(ASSISTANT_HEADER, &encode)?);
            Ok(tokens)
        }
    }
}

/// The end-of-sequence token: an id no text token has (vocabularies are far
/// smaller than 2^32 - 1), so no proposal ever contains it.
pub const EOS: u32 = u32::MAX;

/// What tokenizes text for a [`ChatState`](super::chat::ChatState): a
/// [`Tokenizer`], or any `Fn(&str) -> Result<Vec<u32>, String>` (which
/// tells nothing of how it splits text).
///
/// ```
/// use specdec_metrics_cli::ngram::tokenize::{Encode, Tokenizer};
/// let bytes = |t: &str| Ok::<_, String>(t.bytes().map(u32::from).collect());
/// assert_eq!(Encode::encode(&bytes, "ab").unwrap(), [97, 98]);
/// assert!(!bytes.splits_at_line_starts());
/// let o200k = Tokenizer::load("o200k_base").unwrap();
/// assert!((&o200k).splits_at_line_starts());
/// ```
pub trait Encode {
    /// The token ids of `text`, without special tokens.
    fn encode(&self, text: &str) -> Result<Vec<u32>, String>;

    /// Whether the tokens of every text are those of its part before any
    /// of its line starts ([`is_line_start`]) followed by those of the
    /// rest. True of the built-in encodings: their pre-tokenizers split
    /// text into pieces that are tokenized apart, and no piece holds a line
    /// break together with a character after it that is neither whitespace
    /// nor (o200k_base's punctuation may end in line breaks and slashes)
    /// `/`; the pieces before such a place end there whatever follows. A
    /// [`ChatState`](super::chat::ChatState) then takes the tokens of an
    /// assistant's message that repeats the last output from the output's.
    /// False unless told.
    fn splits_at_line_starts(&self) -> bool {
        false
    }
}

impl<F: Fn(&str) -> Result<Vec<u32>, String>> Encode for F {
    fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        self(text)
    }
}

impl Encode for &Tokenizer {
    fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        Tokenizer::encode(self, text)
    }

    fn splits_at_line_starts(&self) -> bool {
        matches!(self, Tokenizer::Tiktoken(_))
    }
}

/// Whether byte offset `at` of `text` is a line start: just after a `\n`,
/// at a character that is neither whitespace nor `/`.
///
/// ```
/// use specdec_metrics_cli::ngram::tokenize::is_line_start;
/// assert!(is_line_start("a\nb", 2));
/// assert!(!is_line_start("a\n b", 2) && !is_line_start("a\n/", 2));
/// assert!(!is_line_start("a\n", 2) && !is_line_start("ab", 1) && !is_line_start("b", 0));
/// ```
pub fn is_line_start(text: &str, at: usize) -> bool {
    at > 0
        && text.as_bytes().get(at - 1) == Some(&b'\n')
        && text[at..]
            .chars()
            .next()
            .is_some_and(|c| !c.is_whitespace() && c != '/')
}

/// The last line start of `text` ([`is_line_start`]), if any.
///
/// ```
/// use specdec_metrics_cli::ngram::tokenize::last_line_start;
/// assert_eq!(last_line_start("a\nb\nc\n"), Some(4));
/// assert_eq!(last_line_start("a\nb\n c"), Some(2));
/// assert_eq!(last_line_start("abc"), None);
/// ```
pub fn last_line_start(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    (1..bytes.len())
        .rev()
        .filter(|&at| bytes[at - 1] == b'\n')
        .find(|&at| is_line_start(text, at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use specdec_ingest::trace::ChatMessage;

    fn bytes(text: &str) -> Result<Vec<u32>, String> {
        Ok(text.bytes().map(u32::from).collect())
    }

    #[test]
    fn the_cache_stays_within_its_budget_and_keeps_what_is_used() {
        let texts: Vec<String> = (0..200).map(|i| format!("message {i:04}")).collect();
        let one = entry_bytes(&texts[0], &bytes(&texts[0]).unwrap());
        // Room for ten entries.
        let cache = TokenCache::new(10 * one as u64);
        for (i, text) in texts.iter().enumerate() {
            assert_eq!(*cache.tokens(text, bytes).unwrap(), *bytes(text).unwrap());
            // The first message is used all along: never evicted.
            assert_eq!(
                *cache.tokens(&texts[0], bytes).unwrap(),
                *bytes(&texts[0]).unwrap()
            );
            assert!(cache.bytes() <= 10 * one, "{} after {i}", cache.bytes());
        }
        let stats = cache.stats();
        assert_eq!(stats.misses, 200, "{stats:?}");
        assert_eq!(stats.hits, 200);
        // An old one was evicted: tokenized again, the same.
        let before = cache.stats().misses;
        assert_eq!(
            *cache.tokens(&texts[1], bytes).unwrap(),
            *bytes(&texts[1]).unwrap()
        );
        assert_eq!(cache.stats().misses, before + 1);
    }

    #[test]
    fn a_cache_of_nothing_tokenizes_every_time() {
        let cache = TokenCache::new(0);
        for _ in 0..3 {
            assert_eq!(*cache.tokens("ab", bytes).unwrap(), [97, 98]);
        }
        assert_eq!(cache.stats(), CacheStats { hits: 0, misses: 3 });
        assert_eq!(cache.bytes(), 0);
        let failed = cache.tokens("ab", |_| Err("no".into()));
        assert_eq!(failed.unwrap_err(), "no");
    }

    #[test]
    fn a_chats_tokens_are_its_messages_then_the_header() {
        let turn = |role: &str, content: &str| ChatMessage {
            role: role.into(),
            content: content.into(),
        };
        let chat = Prompt::Messages(vec![
            turn("system", "s"),
            turn("user", "u"),
            turn("user", "u"),
        ]);
        let cache = TokenCache::new(1 << 20);
        // Byte tokens: per message is the whole text's.
        let whole = bytes(&chat.render()).unwrap();
        assert_eq!(prompt_tokens(&chat, &cache, bytes).unwrap(), whole);
        // Three distinct texts tokenized (the repeated turn and the header
        // once each), one found.
        assert_eq!(cache.stats(), CacheStats { hits: 1, misses: 3 });
        // A tokenizer that marks each call's start: the parts are apart.
        let marked = |t: &str| Ok(std::iter::once(0).chain(t.bytes().map(u32::from)).collect());
        let parts = prompt_tokens(&chat, &TokenCache::new(1 << 20), marked).unwrap();
        assert_eq!(parts.iter().filter(|&&t| t == 0).count(), 4);
        let text = Prompt::Text("ab".into());
        assert_eq!(prompt_tokens(&text, &cache, marked).unwrap(), [0, 97, 98]);
    }

    #[test]
    fn errors_name_the_file_not_a_flag() {
        let Err(e) = Tokenizer::load("no/such/tokenizer.json") else {
            panic!("a missing tokenizer loaded");
        };
        assert!(matches!(
            &e,
            TokenizerError::File {
                path,
                problem: FileProblem::Open(_),
            } if path == Path::new("no/such/tokenizer.json")
        ));
        let text = e.to_string();
        assert!(
            text.starts_with("the tokenizer no/such/tokenizer.json: not o200k_base or cl100k_base"),
            "{text}"
        );
    }

    /// The built-in encodings, loaded once.
    fn built_in() -> &'static [Tokenizer; 2] {
        static BUILT_IN: std::sync::OnceLock<[Tokenizer; 2]> = std::sync::OnceLock::new();
        BUILT_IN.get_or_init(|| ["o200k_base", "cl100k_base"].map(|n| Tokenizer::load(n).unwrap()))
    }

    /// Text fragments that meet at line breaks in every way the
    /// pre-tokenizers tell apart: letters of each case, contractions,
    /// digits, blanks of several kinds, slashes, the chat template's
    /// markers, marks, other scripts.
    const FRAGMENTS: &[&str] = &[
        "\n",
        "\n\n",
        " \n",
        "\r\n",
        "\r",
        "a",
        "ab",
        "Ab",
        "ABC",
        "x'S",
        "'s",
        "'ll",
        "9",
        "123",
        "4567",
        " ",
        "  ",
        "\t",
        "/",
        "//",
        "</",
        "<",
        "|>",
        "<|im_end|>",
        ".",
        "?!",
        "{\"",
        "é",
        "e\u{301}",
        "中文",
        "😀",
        "\u{a0}",
        "\u{2028}",
        "\u{3000}",
        "_",
        "-",
        "1.5",
    ];

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1000))]

        /// What a ChatState relies on to take an assistant's message's
        /// tokens from the output's: the built-in encodings' tokens of a
        /// text are those of its part before any line start, then those of
        /// the rest.
        #[test]
        fn the_built_in_encodings_split_at_line_starts(
            fragments in proptest::collection::vec(0..FRAGMENTS.len(), 0..24),
        ) {
            let text: String = fragments.iter().map(|&i| FRAGMENTS[i]).collect();
            for tokenizer in built_in() {
                let whole = tokenizer.encode(&text).unwrap();
                for at in (0..=text.len()).filter(|&at| is_line_start(&text, at)) {
                    let mut parts = tokenizer.encode(&text[..at]).unwrap();
                    parts.extend(tokenizer.encode(&text[at..]).unwrap());
                    proptest::prop_assert_eq!(&parts, &whole, "{:?} at {}", text, at);
                }
            }
        }
    }

    #[test]
    fn other_places_after_a_line_break_may_not_split() {
        // Line breaks in a row are one piece, and o200k_base's punctuation
        // takes the slashes after its line breaks: not line starts.
        let [o200k, _] = built_in();
        for (text, at) in [("a\n\nb", 2), ("x.\n/b", 3)] {
            assert!(!is_line_start(text, at));
            let mut parts = o200k.encode(&text[..at]).unwrap();
            parts.extend(o200k.encode(&text[at..]).unwrap());
            assert_ne!(parts, o200k.encode(text).unwrap(), "{text:?}");
        }
    }

    #[test]
    fn only_the_built_in_encodings_are_known_to_split() {
        let dir = tempfile::TempDir::new().unwrap();
        let path = dir.path().join("tokenizer.json");
        let json = r#"{"version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
            "normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null,
            "decoder": null, "model": {"type": "WordLevel", "vocab": {"a": 0, "[UNK]": 1},
            "unk_token": "[UNK]"}}"#;
        std::fs::write(&path, json).unwrap();
        let file = Tokenizer::load(path.to_str().unwrap()).unwrap();
        assert!(!(&file).splits_at_line_starts());
        assert!(built_in().iter().all(|t| t.splits_at_line_starts()));
        assert_eq!(Encode::encode(&&file, "a b").unwrap(), [0, 1]);
    }
}
