//! Agent traffic given as chat messages, traced call after call: each call
//! of a conversation resends the messages before it, so a [`ChatState`]
//! keeps the last call's messages, their tokens and their n-grams, and
//! takes from the next call only what differs.
//!
//! The messages a call begins with that are the last call's (the same role
//! and the same content, compared as text) keep their tokens; the others
//! are rendered and tokenized through the shared [`TokenCache`], as
//! [`prompt_tokens`](super::tokenize::prompt_tokens) does for every
//! message. So a call costs the messages compared (a memory comparison)
//! and the new messages' work, not a lookup of every message's text; the
//! n-grams of the tokens shared are kept by [`Reusable`].
//!
//! A new message is most often the assistant's that repeats the last
//! call's output. When the tokenizer splits text at line starts (the
//! built-in encodings: [`Encode::splits_at_line_starts`]), the output is
//! tokenized in two parts at its last line start (the same tokens), and
//! that message takes the header's tokens and the first part's: only the
//! output's last line and the message's end are tokenized again.

use std::sync::Arc;

use rustc_hash::FxHashMap;
use specdec_ingest::trace::{ASSISTANT_HEADER, ChatMessage};

use super::tokenize::{EOS, Encode, TokenCache, is_line_start, last_line_start};
use super::{Config, Positions, Reusable};

/// One conversation's state for the n-gram rules: the last call's messages
/// and context tokens, and the n-grams of the context ([`Reusable`]).
/// A call gets the trace [`generate`](super::generate) gives its context:
/// [`prompt_tokens`](super::tokenize::prompt_tokens) of its messages, then
/// its output's tokens (and the end-of-sequence token).
///
/// A call need not continue the last one: the messages it shares from the
/// first are kept, and the rest (a conversation that branches, shrinks or
/// is another one altogether) is taken anew. Memory: the last call's text
/// and tokens, and [`Reusable`]'s.
pub struct ChatState {
    reusable: Reusable,
    /// The last call's messages, each with the end of its tokens in
    /// `context`.
    messages: Vec<Held>,
    /// The last call's context: its messages' tokens, then the assistant's
    /// header's, then its output's. The first `messages.last().end` are
    /// always the messages' tokens, and begin the context of the n-grams
    /// (which are the last successful call's) as far as those hold.
    context: Vec<u32>,
    /// The rendering of a message being tokenized (the cache's key).
    text: String,
    /// The last call's output, if the tokenizer splits at line starts and
    /// it has one.
    last_output: Option<LastOutput>,
    /// The tokens of short texts tokenized apart: an output's last line
    /// and the end of the assistant's message repeating it, which agents
    /// repeat (a tool call's closing tag).
    parts: Parts,
}

/// The tokens of up to [`Parts::MAX_ENTRIES`] texts of at most
/// [`Parts::MAX_BYTES`] bytes (all dropped when full).
#[derive(Default)]
struct Parts(FxHashMap<Box<str>, Vec<u32>>);

impl Parts {
    const MAX_ENTRIES: usize = 64;
    const MAX_BYTES: usize = 128;

    /// The tokens of `text`, kept if short, appended to `to`.
    fn append(
        &mut self,
        text: &str,
        encode: impl Fn(&str) -> Result<Vec<u32>, String>,
        to: &mut Vec<u32>,
    ) -> Result<(), String> {
        if text.len() > Self::MAX_BYTES {
            to.extend_from_slice(&encode(text)?);
            return Ok(());
        }
        if let Some(tokens) = self.0.get(text) {
            to.extend_from_slice(tokens);
            return Ok(());
        }
        let tokens = encode(text)?;
        to.extend_from_slice(&tokens);
        if self.0.len() >= Self::MAX_ENTRIES {
            self.0.clear();
        }
        self.0.insert(text.into(), tokens);
        Ok(())
    }
}

/// A message of the last call and where its tokens end.
struct Held {
    role: Box<str>,
    content: Box<str>,
    end: usize,
}

/// What [`ChatState::generate`] gives for a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatTrace {
    /// The prompt's length in tokens.
    pub prompt_tokens: usize,
    /// The output's length in tokens, its end-of-sequence token included.
    pub output_tokens: usize,
    /// The messages whose tokens were kept from the last call (neither
    /// looked up nor tokenized).
    pub kept_messages: usize,
    /// The trace.
    pub positions: Positions,
}

impl ChatState {
    /// Nothing held yet, for calls under `config`.
    ///
    /// # Panics
    ///
    /// With [`Rule::Suffix`](super::Rule::Suffix), as [`Reusable::new`].
    pub fn new(config: Config) -> Self {
        Self {
            reusable: Reusable::new(config),
            messages: Vec::new(),
            context: Vec::new(),
            text: String::new(),
            last_output: None,
            parts: Parts::default(),
        }
    }

    /// How many of `turns`, from the first, are the last call's: the same
    /// role and content, in the same place.
    ///
    /// ```
    /// use specdec_ingest::trace::ChatMessage;
    /// use specdec_metrics_cli::ngram::chat::ChatState;
    /// use specdec_metrics_cli::ngram::tokenize::TokenCache;
    /// use specdec_metrics_cli::ngram::{Config, Rule};
    /// let bytes = |t: &str| Ok::<_, String>(t.bytes().map(u32::from).collect());
    /// let turn = |role: &str, content: &str| ChatMessage { role: role.into(), content: content.into() };
    /// let mut state = ChatState::new(Config { rule: Rule::Vllm, min_n: 1, max_n: 3, cap: 8 });
    /// let turns = [turn("system", "s"), turn("user", "u")];
    /// state.generate(&turns, "o", true, &TokenCache::new(1 << 20), bytes).unwrap();
    /// assert_eq!(state.shared(&[turn("system", "s"), turn("user", "v")]), 1);
    /// assert_eq!(state.shared(&[turn("user", "s")]), 0);
    /// ```
    pub fn shared(&self, turns: &[ChatMessage]) -> usize {
        self.messages
            .iter()
            .zip(turns)
            .take_while(|(held, m)| *held.content == *m.content && *held.role == *m.role)
            .count()
    }

    /// The trace of a call of `turns` and `output` (with the end-of-sequence
    /// token after it when `eos`): the messages not shared with the last
    /// call are tokenized through `cache` (`encoder` on a miss), then the
    /// output by `encoder`; an error of `encoder` is returned as it is, and
    /// the state stays usable. A state is meant for one tokenizer, as the
    /// cache is.
    ///
    /// ```
    /// use specdec_ingest::trace::{ChatMessage, Prompt};
    /// use specdec_metrics_cli::ngram::chat::ChatState;
    /// use specdec_metrics_cli::ngram::tokenize::{EOS, TokenCache, prompt_tokens};
    /// use specdec_metrics_cli::ngram::{Config, Rule, generate};
    /// let bytes = |t: &str| Ok::<_, String>(t.bytes().map(u32::from).collect());
    /// let config = Config { rule: Rule::Vllm, min_n: 1, max_n: 3, cap: 8 };
    /// let cache = TokenCache::new(1 << 20);
    /// let turn = |role: &str, content: &str| ChatMessage { role: role.into(), content: content.into() };
    /// let mut state = ChatState::new(config);
    /// let mut turns = vec![turn("system", "be brief"), turn("user", "say hi")];
    /// for output in ["hi", "hi again"] {
    ///     let trace = state.generate(&turns, output, true, &cache, bytes).unwrap();
    ///     // The one-off trace of the whole context.
    ///     let mut context = prompt_tokens(&Prompt::Messages(turns.clone()), &cache, bytes).unwrap();
    ///     context.extend(bytes(output).unwrap());
    ///     context.push(EOS);
    ///     assert_eq!(trace.prompt_tokens, context.len() - output.len() - 1);
    ///     assert_eq!(trace.positions, generate(&config, &context, output.len() + 1));
    ///     turns.extend([turn("assistant", output), turn("user", "again")]);
    /// }
    /// ```
    pub fn generate(
        &mut self,
        turns: &[ChatMessage],
        output: &str,
        eos: bool,
        cache: &TokenCache,
        encoder: impl Encode,
    ) -> Result<ChatTrace, String> {
        let kept = self.shared(turns);
        let traced = self.generate_after(kept, turns, output, eos, cache, encoder);
        if traced.is_err() {
            // The messages after those kept are not in the n-grams'
            // context: taken anew next time.
            self.messages.truncate(kept);
        }
        traced
    }

    /// [`generate`](Self::generate), the first `kept` messages being the
    /// last call's.
    fn generate_after(
        &mut self,
        kept: usize,
        turns: &[ChatMessage],
        output: &str,
        eos: bool,
        cache: &TokenCache,
        encoder: impl Encode,
    ) -> Result<ChatTrace, String> {
        let encode = |text: &str| encoder.encode(text);
        self.messages.truncate(kept);
        // The kept messages' tokens begin the n-grams' context too.
        let known = self.messages.last().map_or(0, |m| m.end);
        self.context.truncate(known);
        let last_output = self.last_output.take();
        for m in &turns[kept..] {
            self.text.clear();
            m.render_into(&mut self.text);
            let tokens = match last_output
                .as_ref()
                .filter(|o| o.repeated_by(m, &self.text))
            {
                Some(o) => cache.tokens(&self.text, |rendered| {
                    o.message_tokens(rendered, &mut self.parts, encode)
                })?,
                None => cache.tokens(&self.text, encode)?,
            };
            self.context.extend_from_slice(&tokens);
            self.messages.push(Held {
                role: m.role.as_str().into(),
                content: m.content.as_str().into(),
                end: self.context.len(),
            });
        }
        // The next call of the conversation resends these messages.
        let stable = self.context.len();
        let header = cache.tokens(ASSISTANT_HEADER, encode)?;
        self.context.extend_from_slice(&header);
        let prompt_tokens = self.context.len();
        // An output split at its last line start has the same tokens; the
        // part before is kept for the next call's assistant message.
        match last_line_start(output).filter(|_| encoder.splits_at_line_starts()) {
            Some(line) => {
                let head = encode(&output[..line])?;
                self.context.extend_from_slice(&head);
                self.parts
                    .append(&output[line..], encode, &mut self.context)?;
                self.last_output = Some(LastOutput {
                    text: output.into(),
                    line,
                    header,
                    head,
                });
            }
            None => self.context.extend_from_slice(&encode(output)?),
        }
        if eos {
            self.context.push(EOS);
        }
        let output_tokens = self.context.len() - prompt_tokens;
        let positions = self
            .reusable
            .generate_in(&self.context, output_tokens, known, stable);
        Ok(ChatTrace {
            prompt_tokens,
            output_tokens,
            kept_messages: kept,
            positions,
        })
    }
}

/// The last call's output, with a line start, for the next call's
/// assistant message that repeats it: the tokens of `text[..line]`, and
/// those of the assistant's header.
struct LastOutput {
    text: Box<str>,
    line: usize,
    header: Arc<[u32]>,
    head: Vec<u32>,
}

impl LastOutput {
    /// Whether the message `m`, rendered as `rendered`, is the assistant's
    /// and repeats this output after the header, at a line start.
    fn repeated_by(&self, m: &ChatMessage, rendered: &str) -> bool {
        m.role == "assistant"
            && *m.content == *self.text
            && rendered
                .strip_prefix(ASSISTANT_HEADER)
                .is_some_and(|content| content.starts_with(&*self.text))
            && is_line_start(rendered, ASSISTANT_HEADER.len())
    }

    /// The tokens of `rendered`, a message that repeats this output
    /// ([`repeated_by`](Self::repeated_by)): the header's, the output's up
    /// to its last line start, then `encode` of the rest. Both places are
    /// line starts of `rendered`, which the tokenizer splits at
    /// ([`Encode::splits_at_line_starts`]).
    fn message_tokens(
        &self,
        rendered: &str,
        parts: &mut Parts,
        encode: impl Fn(&str) -> Result<Vec<u32>, String>,
    ) -> Result<Vec<u32>, String> {
        let mut tokens = Vec::with_capacity(self.header.len() + self.head.len() + 16);
        tokens.extend_from_slice(&self.header);
        tokens.extend_from_slice(&self.head);
        let rest = &rendered[ASSISTANT_HEADER.len() + self.line..];
        parts.append(rest, encode, &mut tokens)?;
        Ok(tokens)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use specdec_ingest::trace::{ChatMessage, Prompt};

    use super::*;
    use crate::ngram::tokenize::{Tokenizer, prompt_tokens};
    use crate::ngram::{Rule, generate};

    /// A tokenizer whose tokens tell texts apart: the text's length, then
    /// its bytes (so a message's tokens are not those of any other text).
    fn marked(text: &str) -> Result<Vec<u32>, String> {
        Ok(std::iter::once(1000 + text.len() as u32)
            .chain(text.bytes().map(u32::from))
            .collect())
    }

    const CONFIG: Config = Config {
        rule: Rule::Vllm,
        min_n: 1,
        max_n: 3,
        cap: 8,
    };

    fn turn(role: &str, content: &str) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content: content.into(),
        }
    }

    /// The one-off trace of a call: its prompt tokenized message by
    /// message, its output, the end-of-sequence token.
    fn one_off(turns: &[ChatMessage], output: &str) -> (usize, Positions) {
        let cache = TokenCache::new(1 << 20);
        let mut context = prompt_tokens(&Prompt::Messages(turns.to_vec()), &cache, marked).unwrap();
        let prompt = context.len();
        context.extend(marked(output).unwrap());
        context.push(EOS);
        let output_len = context.len() - prompt;
        (prompt, generate(&CONFIG, &context, output_len))
    }

    fn check(
        state: &mut ChatState,
        cache: &TokenCache,
        turns: &[ChatMessage],
        output: &str,
    ) -> ChatTrace {
        let traced = state.generate(turns, output, true, cache, marked).unwrap();
        let (prompt, positions) = one_off(turns, output);
        assert_eq!(traced.prompt_tokens, prompt);
        assert_eq!(traced.output_tokens, marked(output).unwrap().len() + 1);
        assert_eq!(traced.positions, positions);
        traced
    }

    #[test]
    fn calls_that_grow_branch_shrink_or_switch_get_the_one_off_traces() {
        let cache = TokenCache::new(1 << 20);
        let mut state = ChatState::new(CONFIG);
        let system = turn("system", "answer in short words; repeat the words");
        let mut turns = vec![system.clone(), turn("user", "say the words")];
        let first = check(&mut state, &cache, &turns, "the words the words");
        assert_eq!(first.kept_messages, 0);
        // The conversation goes on: both messages kept.
        turns.extend([
            turn("assistant", "the words the words"),
            turn("user", "again"),
        ]);
        assert_eq!(check(&mut state, &cache, &turns, "words").kept_messages, 2);
        // The user's turn edited: a branch after the first three.
        turns[3] = turn("user", "once more");
        assert_eq!(
            check(&mut state, &cache, &turns, "the words").kept_messages,
            3
        );
        // Shrunk to the system prompt alone.
        assert_eq!(
            check(&mut state, &cache, &turns[..1], "words?").kept_messages,
            1
        );
        // Another conversation under the same system prompt.
        let other = [system, turn("user", "what words")];
        assert_eq!(check(&mut state, &cache, &other, "these").kept_messages, 1);
        // Back to the first conversation: its other messages are in the
        // cache (the output is tokenized apart).
        let misses = cache.stats().misses;
        assert_eq!(
            check(&mut state, &cache, &turns, "words words").kept_messages,
            1
        );
        assert_eq!(cache.stats().misses, misses);
        // No messages at all.
        assert_eq!(check(&mut state, &cache, &[], "hi").kept_messages, 0);
    }

    #[test]
    fn a_message_is_kept_only_under_the_same_role_and_content() {
        let cache = TokenCache::new(1 << 20);
        let mut state = ChatState::new(CONFIG);
        let turns = [turn("user", "same"), turn("tool name=f", "text")];
        check(&mut state, &cache, &turns, "out");
        // The same content under another role is another message.
        let other_role = [turn("assistant", "same"), turn("tool name=f", "text")];
        assert_eq!(
            check(&mut state, &cache, &other_role, "out").kept_messages,
            0
        );
        // Role and content that render alike ("<|im_start|>a\nb\nc...")
        // are not taken for each other either; the tokens are the
        // rendering's, the same.
        let split = [turn("a\nb", "c")];
        check(&mut state, &cache, &split, "out");
        let resplit = [turn("a", "b\nc")];
        assert_eq!(check(&mut state, &cache, &resplit, "out").kept_messages, 0);
        assert_eq!(state.shared(&split), 0);
        assert_eq!(state.shared(&resplit), 1);
    }

    #[test]
    fn a_tokenizer_error_leaves_the_state_usable() {
        let cache = TokenCache::new(1 << 20);
        let mut state = ChatState::new(CONFIG);
        let turns = [turn("system", "s"), turn("user", "u"), turn("user", "bad")];
        check(&mut state, &cache, &turns[..2], "o");
        let failing = |text: &str| {
            if text.contains("bad") {
                Err("no".to_owned())
            } else {
                marked(text)
            }
        };
        // A message fails, then an output.
        let failed = state.generate(&turns, "o", true, &cache, failing);
        assert_eq!(failed.unwrap_err(), "no");
        let failed = state.generate(&turns[..2], "bad", true, &cache, failing);
        assert_eq!(failed.unwrap_err(), "no");
        // The next calls get their one-off traces.
        assert_eq!(check(&mut state, &cache, &turns, "o o").kept_messages, 2);
        check(&mut state, &cache, &turns[..1], "o");
    }

    #[test]
    fn without_eos_an_output_may_be_empty() {
        let cache = TokenCache::new(1 << 20);
        let mut state = ChatState::new(CONFIG);
        let bytes = |t: &str| Ok::<_, String>(t.bytes().map(u32::from).collect());
        let turns = [turn("user", "u")];
        let traced = state.generate(&turns, "", false, &cache, bytes).unwrap();
        assert_eq!(
            (traced.output_tokens, traced.positions.proposal.len()),
            (0, 0)
        );
        let traced = state.generate(&turns, "ab", false, &cache, bytes).unwrap();
        assert_eq!(
            (traced.output_tokens, traced.positions.proposal.len()),
            (2, 1)
        );
    }

    /// o200k_base, noting the texts it tokenizes.
    struct Noting(std::cell::RefCell<Vec<String>>);

    impl Encode for &Noting {
        fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
            self.0.borrow_mut().push(text.to_owned());
            o200k().encode(text)
        }

        fn splits_at_line_starts(&self) -> bool {
            true
        }
    }

    #[test]
    fn only_the_new_texts_are_tokenized() {
        let noting = Noting(Default::default());
        let cache = TokenCache::new(1 << 20);
        let mut state = ChatState::new(CONFIG);
        let call = "<tool_call>\n{\"name\": \"find\"}\n</tool_call>";
        let mut turns = vec![turn("system", "s"), turn("user", "find it")];
        state.generate(&turns, call, true, &cache, &noting).unwrap();
        // The output, in two parts at its last line start.
        assert_eq!(
            noting.0.take()[3..],
            ["<tool_call>\n{\"name\": \"find\"}\n", "</tool_call>"]
        );
        turns.extend([turn("assistant", call), turn("tool name=find", "found")]);
        let traced = state.generate(&turns, call, true, &cache, &noting).unwrap();
        assert_eq!(traced.kept_messages, 2);
        // The assistant's message: only its end; the tool's result; the
        // output's first part (its last line is kept in the parts).
        assert_eq!(
            noting.0.take(),
            [
                "</tool_call><|im_end|>\n",
                "<|im_start|>tool name=find\nfound<|im_end|>\n",
                "<tool_call>\n{\"name\": \"find\"}\n",
            ]
        );
    }

    #[test]
    fn parts_keep_short_texts_up_to_their_number() {
        let mut parts = Parts::default();
        let mut tokens = Vec::new();
        let long = "x".repeat(Parts::MAX_BYTES + 1);
        parts.append(&long, marked, &mut tokens).unwrap();
        assert!(parts.0.is_empty(), "a long text is not kept");
        parts.append(&long[1..], marked, &mut tokens).unwrap();
        assert_eq!(parts.0.len(), 1, "one of the most bytes kept is");
        parts.0.clear();
        for i in 0..Parts::MAX_ENTRIES {
            parts.append(&i.to_string(), marked, &mut tokens).unwrap();
        }
        // Found again without tokenizing.
        let failing = |_: &str| Err::<Vec<u32>, _>("tokenized".to_owned());
        parts.append("7", failing, &mut tokens).unwrap();
        assert_eq!(tokens[tokens.len() - 2..], marked("7").unwrap());
        // One more: all dropped, that one kept.
        parts.append("new", marked, &mut tokens).unwrap();
        assert_eq!(parts.0.len(), 1);
        assert!(parts.append("7", failing, &mut tokens).is_err());
    }

    /// One tokenizer for the tests that need a real one.
    fn o200k() -> &'static Tokenizer {
        static O200K: std::sync::OnceLock<Tokenizer> = std::sync::OnceLock::new();
        O200K.get_or_init(|| Tokenizer::load("o200k_base").unwrap())
    }

    /// Calls of one conversation, each output repeated by the next call as
    /// the assistant's message, through a state with o200k_base: each is
    /// the one-off trace, and every message's tokens in the cache are its
    /// rendering's, tokenized whole.
    fn a_conversation_of(outputs: &[&str]) -> Result<(), TestCaseError> {
        let tokenizer = o200k();
        let encode = |t: &str| tokenizer.encode(t);
        let cache = TokenCache::new(1 << 20);
        let mut state = ChatState::new(CONFIG);
        let mut turns = vec![turn("system", "use the tools"), turn("user", "go")];
        for output in outputs {
            let traced = state
                .generate(&turns, output, true, &cache, tokenizer)
                .unwrap();
            let mut context = prompt_tokens(
                &Prompt::Messages(turns.clone()),
                &TokenCache::new(0),
                encode,
            )
            .unwrap();
            let prompt = context.len();
            context.extend(tokenizer.encode(output).unwrap());
            context.push(EOS);
            prop_assert_eq!(traced.prompt_tokens, prompt);
            prop_assert_eq!(traced.output_tokens, context.len() - prompt);
            prop_assert_eq!(
                &traced.positions,
                &generate(&CONFIG, &context, context.len() - prompt)
            );
            turns.extend([turn("assistant", output), turn("tool name=f", "{}\nok")]);
        }
        // The last two were never sent.
        for m in &turns[..turns.len() - 2] {
            let rendered = m.render();
            let cached = cache.tokens(&rendered, |_| Err("not cached".into()));
            prop_assert_eq!(
                cached.map(|t| t.to_vec()),
                Ok(tokenizer.encode(&rendered).unwrap())
            );
        }
        Ok(())
    }

    #[test]
    fn an_assistants_message_repeating_the_output_takes_its_tokens() {
        a_conversation_of(&[
            "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
            "Done.\n\nAnything else?",
            "one line only.",
            " a blank first\nthen this",
            "/slash first\nx",
            "a\n/b\n c",
            "ends in breaks\n\n",
            "\n\nstarts with them",
            "x\r\ny",
            "",
            "twice\ntwice",
            "twice\ntwice",
        ])
        .unwrap();
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// Calls made of a few roles and contents, each the last call's
        /// messages cut at some point and added to (so conversations grow,
        /// branch, shrink and start over), traced by one state in turn:
        /// each is the one-off trace.
        #[test]
        fn a_chat_state_agrees_with_the_one_off_traces(
            calls in prop::collection::vec(
                (0usize..6, prop::collection::vec((0usize..3, 0usize..5), 0..4), 0usize..5),
                1..10,
            ),
        ) {
            const ROLES: [&str; 3] = ["user", "assistant", "tool name=f"];
            const TEXTS: [&str; 5] = ["", "a b a b", "b a\nb", "a b a b a", "user"];
            let cache = TokenCache::new(1 << 20);
            let mut state = ChatState::new(CONFIG);
            let mut turns: Vec<ChatMessage> = Vec::new();
            for (cut, added, output) in calls {
                turns.truncate(turns.len().saturating_sub(cut));
                turns.extend(added.iter().map(|&(r, t)| turn(ROLES[r], TEXTS[t])));
                let traced = state.generate(&turns, TEXTS[output], true, &cache, marked).unwrap();
                let (prompt, positions) = one_off(&turns, TEXTS[output]);
                prop_assert_eq!(traced.prompt_tokens, prompt);
                prop_assert_eq!(traced.positions, positions);
            }
        }

        /// Outputs made of fragments that meet at line breaks in many
        /// ways, each repeated as the assistant's message of the next call.
        #[test]
        fn assistants_messages_take_the_outputs_tokens_exactly(
            outputs in prop::collection::vec(
                prop::collection::vec(
                    prop::sample::select(&["\n", "\n\n", " ", "a", "Ab", "/", "<", "|>", "?", "9", "\u{a0}", "é"][..]),
                    0..12,
                ),
                1..5,
            ),
        ) {
            let outputs: Vec<String> = outputs.iter().map(|o| o.concat()).collect();
            let outputs: Vec<&str> = outputs.iter().map(String::as_str).collect();
            a_conversation_of(&outputs)?;
        }
    }
}
