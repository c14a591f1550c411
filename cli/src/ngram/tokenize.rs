//! The tokenizers of `ngram`: OpenAI's `o200k_base` and `cl100k_base`
//! (their BPE files are embedded in `tiktoken-rs`: nothing is downloaded),
//! or a Hugging Face `tokenizer.json` read through the `tokenizers` crate
//! (built without C code). Text is encoded the ordinary way: no special
//! tokens are recognised or added.

use std::fmt;
use std::io::{self, Read as _};
use std::path::{Path, PathBuf};

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

/// The end-of-sequence token: an id no text token has (vocabularies are far
/// smaller than 2^32 - 1), so no proposal ever contains it.
pub const EOS: u32 = u32::MAX;

#[cfg(test)]
mod tests {
    use super::*;

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
}
