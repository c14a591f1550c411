//! The tokenizers of `ngram`: OpenAI's `o200k_base` and `cl100k_base`
//! (their BPE files are embedded in `tiktoken-rs`: nothing is downloaded),
//! or a Hugging Face `tokenizer.json` read through the `tokenizers` crate
//! (built without C code). Text is encoded the ordinary way: no special
//! tokens are recognised or added.

use std::io::Read as _;
use std::path::Path;

use crate::error::CliError;
use crate::format::display_path;

/// A `tokenizer.json` larger than this is refused before it is parsed (the
/// largest in common use are a few tens of MiB).
pub const MAX_TOKENIZER_FILE_BYTES: u64 = 256 << 20;

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
    pub fn load(name: &str) -> Result<Self, CliError> {
        let built_in = match name {
            "o200k_base" => Some(tiktoken_rs::o200k_base()),
            "cl100k_base" => Some(tiktoken_rs::cl100k_base()),
            _ => None,
        };
        if let Some(bpe) = built_in {
            return bpe
                .map(Tokenizer::Tiktoken)
                .map_err(|e| CliError::new(format!("cannot build the tokenizer {name}: {e}")));
        }
        let path = Path::new(name);
        let shown = display_path(path);
        let file = std::fs::File::open(path).map_err(|e| {
            CliError::new(format!(
                "--tokenizer {shown}: not o200k_base or cl100k_base, and cannot open it as a tokenizer.json: {e}"
            ))
        })?;
        let mut bytes = Vec::new();
        file.take(MAX_TOKENIZER_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| CliError::new(format!("--tokenizer {shown}: cannot read it: {e}")))?;
        if bytes.len() as u64 > MAX_TOKENIZER_FILE_BYTES {
            return Err(CliError::new(format!(
                "--tokenizer {shown}: larger than {} MiB, not a tokenizer.json",
                MAX_TOKENIZER_FILE_BYTES >> 20
            )));
        }
        tokenizers::Tokenizer::from_bytes(&bytes)
            .map(|t| Tokenizer::HuggingFace(Box::new(t)))
            .map_err(|e| {
                CliError::new(format!(
                    "--tokenizer {shown}: not a Hugging Face tokenizer.json: {e}"
                ))
            })
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
