//! Exact n-gram what-if traces: what each engine's n-gram (prompt-lookup)
//! drafter would propose at every output position, and how much of it the
//! true output confirms (the trace format is `specdec_ingest::trace`).
//!
//! [`generate`] walks the context (prompt tokens, then output tokens) once.
//! Each n-gram ending at a position is given a canonical id, built from the
//! id of the `(n-1)`-gram ending at the same position and the token before
//! it, so that every `n = 1..=max_n` costs one hash-map operation on a key
//! of two `u32`s (no slice hashing, no rescan): O(`max_n`) per position.
//! An n-gram is only kept once the `(n-1)`-gram ending at the same place
//! has occurred before (while that one is new, so is every longer one), so
//! the work and the memory per position follow the longest earlier
//! occurrence of the context's suffix there, plus one, up to `max_n`: a few
//! entries in text that does not repeat itself at length, `max_n` in text
//! that repeats itself over more than `max_n` tokens.
//! Each id keeps where its n-gram ended first and the two most recent
//! times, which is all the four rules need. The match count against the
//! output continues the previous position's when the proposal continues
//! the same occurrence (one comparison), and otherwise costs one
//! comparison per matched token.
//!
//! # The rules
//!
//! At output position `t`, the context `C` is the prompt and the first `t`
//! output tokens, `T = |C|`; an occurrence of the context's last `n` tokens
//! is an earlier window `C[s..s+n]` equal to them.
//!
//! - [`Rule::Vllm`]: vLLM's `ngram` proposer
//!   (`vllm/v1/spec_decode/ngram_proposer.py`,
//!   `_find_longest_matched_ngram_and_propose_tokens`, vllm-project/vllm at
//!   commit 016e8ede870e3c087fdcdfb36ed3622112712f10): a KMP pass over the
//!   reversed context finds the longest `n <= max_n` whose suffix occurs
//!   earlier with at least one token after it, keeping the **earliest**
//!   such occurrence (`prev_lps >= longest_ngram` moves the position on);
//!   no proposal when that `n` is below `min_n`. The proposal is every
//!   token after the occurrence up to the end of the context, cut at the
//!   engine's `k` (here: at `--cap`). Defaults `min_n = max_n = 5`, vLLM's
//!   when neither `prompt_lookup_min` nor `prompt_lookup_max` is set (when
//!   one is, the other takes its value).
//! - [`Rule::Trtllm`]: TensorRT-LLM's NGram drafter
//!   (`tensorrt_llm/_torch/speculative/ngram.py`, `NGramPoolManager`,
//!   NVIDIA/TensorRT-LLM at commit 0249976575050d2c624a5f285683c66de311a3b7)
//!   with `is_public_pool = False`, `is_keep_all = True`, `is_use_oldest =
//!   True`: sizes from `max_matching_ngram_size` down to 1, the first
//!   pattern (the context's suffix) in the request's pool wins, and the pool
//!   holds, per pattern, the tokens after its occurrences that have at
//!   least one; the oldest is used. Defaults `min_n = 1`, `max_n = 3`.
//!   Modelled as the earliest occurrence; the pool differs from that only
//!   where the earliest occurrence has fewer than `max_draft_len` tokens
//!   after it and its entry was replaced when a longer one arrived (the
//!   pool drops shorter matches). With the shared pool (`is_public_pool =
//!   True`, its default) a proposal depends on other requests: not exact.
//! - [`Rule::LlamacppSimple`]: llama.cpp's `ngram-simple`
//!   (`common/ngram-map.cpp`, `common_ngram_simple_draft`, ggml-org/llama.cpp
//!   at commit 003c90352d1784dc688199277af83e62224bbbef), `n` fixed
//!   (`--spec-ngram-simple-size-n`, default 12; here `min_n = max_n`) and
//!   `m = --cap` (`--spec-ngram-simple-size-m`, default 48): nothing while
//!   the context without the last sampled token is at most `n + m + 1`
//!   long; else the **most recent** occurrence starting at 1 or later and
//!   not at `T - n - 1` (the search starts at `cur_len - n - 1` and stops
//!   above 0); the proposal is the tokens after it up to, not including,
//!   the last context token, at most `m`; none if that is fewer than `n`.
//!   Exact with `check_rate = 1` (a larger one skips positions by state).
//! - [`Rule::Hf`]: Hugging Face's `PromptLookupCandidateGenerator`
//!   (`src/transformers/generation/candidate_generator.py`): sizes from
//!   `max_matching_ngram_size` (default 2) down to 1, the first window
//!   matching the suffix with a token after it (the earliest), its tokens
//!   after it up to `num_output_tokens` (here: `--cap`). Defaults `min_n =
//!   1`, `max_n = 2`.
//!
//! Where the engine bounds a proposal by its own `k`, the trace holds the
//! unbounded proposal cut at `--cap`, and the replay drafts `min(k, L_t)`.

pub mod chat;
pub mod git;
pub mod git_range;
pub mod suffix;
pub mod tokenize;

#[cfg(test)]
mod tests;

use rustc_hash::FxHashMap;

/// A drafting rule (see the [module docs](self), and [`suffix`] for
/// suffix decoding).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Rule {
    /// vLLM's `ngram`: longest n in min..=max, earliest occurrence.
    Vllm,
    /// TensorRT-LLM's NGram (private pool): longest match, earliest occurrence.
    Trtllm,
    /// llama.cpp's `ngram-simple`: fixed n, most recent occurrence.
    #[value(name = "llamacpp-simple")]
    LlamacppSimple,
    /// Hugging Face's prompt lookup: longest match, earliest occurrence.
    Hf,
    /// vLLM's `suffix` (Arctic Inference's suffix decoding): per-request
    /// and global suffix trees ([`suffix`]).
    Suffix,
}

impl Rule {
    /// The name on the command line and in the trace's metadata.
    pub fn name(self) -> &'static str {
        match self {
            Rule::Vllm => "vllm",
            Rule::Trtllm => "trtllm",
            Rule::LlamacppSimple => "llamacpp-simple",
            Rule::Hf => "hf",
            Rule::Suffix => "suffix",
        }
    }

    /// The engine's own `(min_n, max_n)` when neither is given.
    pub fn default_ns(self) -> (usize, usize) {
        match self {
            Rule::Vllm => (5, 5),
            Rule::Trtllm => (1, 3),
            Rule::LlamacppSimple => (12, 12),
            Rule::Hf => (1, 2),
            // The match lengths possible at vLLM's depth.
            Rule::Suffix => (1, suffix::SuffixConfig::VLLM.depth - 1),
        }
    }

    /// `(min_n, max_n)` from the flags given: vLLM and llama.cpp take one
    /// for the other when only one is given (llama.cpp has a single `n`);
    /// TensorRT-LLM and Hugging Face match down to 1 and take a maximum.
    pub fn ns(self, min_n: Option<usize>, max_n: Option<usize>) -> (usize, usize) {
        let (dmin, dmax) = self.default_ns();
        match (self, min_n, max_n) {
            (_, Some(a), Some(b)) => (a, b),
            (Rule::Vllm | Rule::LlamacppSimple, Some(a), None) => (a, a),
            (Rule::Vllm | Rule::LlamacppSimple, None, Some(b)) => (b, b),
            (_, Some(a), None) => (a, dmax.max(a)),
            (_, None, Some(b)) => (dmin.min(b), b),
            (_, None, None) => (dmin, dmax),
        }
    }
}

/// What to generate: the rule, its n-gram sizes, the cap of every value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// The drafter's rule.
    pub rule: Rule,
    /// The shortest n-gram matched (for llama.cpp, its one `n`).
    pub min_n: usize,
    /// The longest n-gram matched, at most 255.
    pub max_n: usize,
    /// The longest proposal recorded, 1..=255 (llama.cpp's `m`).
    pub cap: usize,
}

/// One request's trace: entry `j` is output position `j + 1`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Positions {
    /// `L_t`: the proposal's length, at most the cap (0: none).
    pub proposal: Vec<u8>,
    /// `m_t`: how many proposed tokens agree with the output from `t` on.
    pub matched: Vec<u8>,
    /// `n_t`: the n of the n-gram matched (0: none).
    pub ngram: Vec<u8>,
}

/// Where an n-gram ended: first, most recently, and the time before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seen {
    id: u32,
    first: u32,
    last: u32,
    /// `u32::MAX`: it ended only once.
    before_last: u32,
}

const NONE: u32 = u32::MAX;

/// The n-grams of a growing context, by canonical id (module docs).
///
/// An n-gram (n >= 2) is kept only once the (n-1)-gram ending at the same
/// place has occurred twice: while the (n-1)-gram is new, so is every
/// longer one ending there, and nothing needs to be known about them.
/// When the (n-1)-gram recurs, the n-gram ending at its one earlier end is
/// added, as it would have been then (it had occurred there alone). The
/// maps thus hold at most one n-gram per position and n up to one past
/// the longest repeated suffix there, not `max_n` per position.
#[derive(Clone)]
struct Index {
    /// 1-grams by token.
    unigrams: FxHashMap<u32, Seen>,
    /// `longer[n - 2]`: n-grams (n >= 2) by the id of the (n-1)-gram
    /// ending at the same place (high half) and the token before that one
    /// (low half); made as the first n-gram of that size is kept.
    longer: Vec<FxHashMap<u64, Seen>>,
    /// The next id to give, per n.
    next_id: Vec<u32>,
}

impl Index {
    fn new(max_n: usize) -> Self {
        Self {
            unigrams: FxHashMap::default(),
            longer: Vec::new(),
            next_id: vec![0; max_n],
        }
    }

    /// Adds the n-grams ending at `e` (n = 1..=min(max_n, e + 1)) and writes
    /// into `before[n-1]` what was known about each before: where earlier
    /// occurrences ended, or `None`.
    fn push<J: Journal>(
        &mut self,
        context: &[u32],
        e: usize,
        before: &mut [Option<Seen>],
        journal: &mut J,
    ) {
        let end = e as u32;
        let (mut old, mut id) = match self.unigrams.get_mut(&context[e]) {
            Some(seen) => {
                journal.touched(0, u64::from(context[e]), seen.before_last);
                touch(seen, end)
            }
            None => {
                let id = take_id(&mut self.next_id[0]);
                self.unigrams.insert(context[e], fresh(id, end));
                journal.inserted(0, u64::from(context[e]), None);
                (None, id)
            }
        };
        before[0] = old;
        let longest = before.len().min(e + 1);
        let mut known = 1;
        for n in 2..=longest {
            // The (n-1)-gram ending here is new: so is the n-gram.
            let Some(shorter) = old else {
                break;
            };
            if self.longer.len() < n - 1 {
                self.longer.push(FxHashMap::default());
            }
            let map = &mut self.longer[n - 2];
            let next_id = &mut self.next_id[n - 1];
            if shorter.before_last == NONE {
                // Its first recurrence: the n-gram ending at its one
                // earlier end, where it was not kept.
                let first = shorter.first as usize;
                if first + 1 >= n {
                    let key = (u64::from(id) << 32) | u64::from(context[first + 1 - n]);
                    let replaced = map.insert(key, fresh(take_id(next_id), shorter.first));
                    journal.inserted(n - 1, key, replaced);
                }
            }
            let key = (u64::from(id) << 32) | u64::from(context[e + 1 - n]);
            (old, id) = match map.get_mut(&key) {
                Some(seen) => {
                    journal.touched(n - 1, key, seen.before_last);
                    touch(seen, end)
                }
                None => {
                    let new_id = take_id(next_id);
                    map.insert(key, fresh(new_id, end));
                    journal.inserted(n - 1, key, None);
                    (None, new_id)
                }
            };
            before[n - 1] = old;
            known = n;
        }
        for slot in &mut before[known..] {
            *slot = None;
        }
    }
}

/// What [`Index::push`] changed, for [`Reusable`] to undo: nothing for a
/// one-off trace. Map 0 holds the 1-grams, map `n - 1` the n-grams.
trait Journal {
    /// Entry `key` of map `map` ended once more ([`touch`]): its
    /// `before_last` was `before_last`.
    fn touched(&mut self, map: usize, key: u64, before_last: u32);
    /// Entry `key` of map `map` was added under a new id; `replaced`: what
    /// it replaced (never anything: see [`Undo`]).
    fn inserted(&mut self, map: usize, key: u64, replaced: Option<Seen>);
}

impl Journal for () {
    #[inline(always)]
    fn touched(&mut self, _: usize, _: u64, _: u32) {}
    #[inline(always)]
    fn inserted(&mut self, _: usize, _: u64, _: Option<Seen>) {}
}

/// One change to an [`Index`], as a [`Journal`] records it, in 16 bytes:
/// a touch needs only the `before_last` it overwrote, and an addition
/// nothing, since an entry is only ever added where there was none. (An
/// n-gram is added at its (n-1)-gram's first recurrence, ending where that
/// one ended alone, or where that one recurs and the n-gram is new: no
/// earlier change made it, as ids are undone with all that came after
/// them.)
#[derive(Clone, Copy)]
struct Undo {
    key: u64,
    /// For [`TOUCHED`]: the entry's `before_last` before.
    before_last: u32,
    map: u8,
    /// [`TOUCHED`] or [`INSERTED`].
    kind: u8,
}

/// An [`Undo`] of [`touch`]: `last` goes back to `before_last`, and
/// `before_last` to the one recorded.
const TOUCHED: u8 = 0;
/// An [`Undo`] of an entry added under a new id: removed, the id given
/// back.
const INSERTED: u8 = 1;

impl Journal for Vec<Undo> {
    #[inline(always)]
    fn touched(&mut self, map: usize, key: u64, before_last: u32) {
        self.push(Undo {
            key,
            before_last,
            // At most max_n - 1 <= 254.
            map: map as u8,
            kind: TOUCHED,
        });
    }

    #[inline(always)]
    fn inserted(&mut self, map: usize, key: u64, replaced: Option<Seen>) {
        assert!(replaced.is_none(), "an n-gram added twice");
        self.push(Undo {
            key,
            before_last: NONE,
            map: map as u8,
            kind: INSERTED,
        });
    }
}

impl Index {
    /// Makes this index empty, keeping its maps' room.
    fn clear(&mut self) {
        self.unigrams.clear();
        for map in &mut self.longer {
            map.clear();
        }
        self.next_id.fill(0);
    }

    /// Makes this index hold what `saved` holds, keeping its maps' room
    /// (so no tombstones of removed entries come back, and no map grows
    /// again to sizes it had).
    fn copy_from(&mut self, saved: &Index) {
        fn copy<K: Copy + Eq + std::hash::Hash>(
            to: &mut FxHashMap<K, Seen>,
            from: &FxHashMap<K, Seen>,
        ) {
            to.clear();
            to.extend(from.iter().map(|(k, v)| (*k, *v)));
        }
        copy(&mut self.unigrams, &saved.unigrams);
        for (i, map) in self.longer.iter_mut().enumerate() {
            match saved.longer.get(i) {
                Some(from) => copy(map, from),
                None => map.clear(),
            }
        }
        for from in &saved.longer[self.longer.len().min(saved.longer.len())..] {
            self.longer.push(from.clone());
        }
        self.next_id.copy_from_slice(&saved.next_id);
    }

    /// Undoes `change` (the last change not yet undone).
    fn undo(&mut self, change: Undo) {
        let map = usize::from(change.map);
        let token = change.key as u32;
        if change.kind == INSERTED {
            // Ids are taken in order and undone in reverse.
            self.next_id[map] -= 1;
            if map == 0 {
                self.unigrams.remove(&token);
            } else {
                self.longer[map - 1].remove(&change.key);
            }
        } else {
            let seen = if map == 0 {
                self.unigrams.get_mut(&token)
            } else {
                self.longer[map - 1].get_mut(&change.key)
            };
            let seen = seen.expect("a touched entry is held");
            seen.last = seen.before_last;
            seen.before_last = change.before_last;
        }
    }
}

/// Traces of requests whose contexts share prefixes, as an agent's calls
/// do (each resends the conversation so far): the n-grams of the last
/// context are kept with a log of how each position changed them, so the
/// next request rolls them back to the prefix it shares and goes on from
/// there. The traces are [`generate`]'s: the n-grams of a prefix depend on
/// the prefix alone.
///
/// After a rollback of at least a fifth of the context (the next
/// conversation under the same system prompt), a copy of the n-grams at
/// the prefix kept is saved: a later rollback to it or a little past it
/// (the conversations after) copies them back, an entry at a time, and
/// pushes the positions from there, instead of undoing each change since,
/// which is a hash-map operation a change. A caller that knows which
/// tokens the next requests will share (a conversation's state, its
/// messages) leaves their changes unlogged
/// ([`generate_in`](Self::generate_in)). Memory follows the longest
/// context: its tokens, its n-grams and a log entry (16 bytes) per n-gram
/// change logged, up to `max_n + 1` a position; and the saved copy, at
/// most as large as the n-grams.
pub struct Reusable {
    config: Config,
    index: Index,
    /// The context the index holds, one position per token.
    tokens: Vec<u32>,
    log: Vec<Undo>,
    /// `marks[e]`: the log's length before position `e` was pushed.
    marks: Vec<usize>,
    /// The changes of every position from here on are in the log; those
    /// of the positions before may not be ([`generate_in`](Self::generate_in)).
    floor: usize,
    /// The index as it was at `tokens[..len]` (`len` positions), while
    /// those positions stay held.
    saved: Option<Saved>,
}

/// A copy of a [`Reusable`]'s index at a prefix of its context.
struct Saved {
    len: usize,
    index: Index,
}

impl Reusable {
    /// Nothing held yet, for requests under `config`.
    ///
    /// # Panics
    ///
    /// With [`Rule::Suffix`], as [`generate`].
    pub fn new(config: Config) -> Self {
        assert!(
            config.rule != Rule::Suffix,
            "suffix traces are made by ngram::suffix"
        );
        Self {
            config,
            index: Index::new(config.max_n),
            tokens: Vec::new(),
            log: Vec::new(),
            marks: Vec::new(),
            floor: 0,
            saved: None,
        }
    }

    /// How many tokens `prompt` shares from its start with the context
    /// held: what a [`generate`](Self::generate) of it need not redo.
    pub fn shared(&self, prompt: &[u32]) -> usize {
        self.shared_after(prompt, 0)
    }

    /// [`shared`](Self::shared), its first `known` tokens taken as shared.
    fn shared_after(&self, prompt: &[u32], known: usize) -> usize {
        let (a, b) = (&self.tokens[..], prompt);
        let limit = a.len().min(b.len());
        let mut i = known.min(limit);
        // Whole chunks by slice comparison first, then one at a time.
        while i + 64 <= limit && a[i..i + 64] == b[i..i + 64] {
            i += 64;
        }
        while i < limit && a[i] == b[i] {
            i += 1;
        }
        i
    }

    /// The trace of one request, as [`generate`]`(config, context,
    /// output_len)` gives it.
    ///
    /// ```
    /// use specdec_metrics_cli::ngram::{Config, Reusable, Rule, generate};
    /// let config = Config { rule: Rule::Vllm, min_n: 1, max_n: 3, cap: 8 };
    /// let mut reusable = Reusable::new(config);
    /// let first = [1, 2, 3, 1, 2, 3, 9, 1, 2, 3];
    /// let second = [1, 2, 3, 1, 2, 7, 1, 2, 3, 1];
    /// assert_eq!(reusable.generate(&first, 4), generate(&config, &first, 4));
    /// assert_eq!(reusable.shared(&second[..6]), 5);
    /// assert_eq!(reusable.generate(&second, 3), generate(&config, &second, 3));
    /// ```
    pub fn generate(&mut self, context: &[u32], output_len: usize) -> Positions {
        self.generate_in(context, output_len, 0, 0)
    }

    /// [`generate`](Self::generate) for a caller that knows more of the
    /// context: its first `known` tokens are those of the last context
    /// generated (not compared again), and the next requests will likely
    /// share its first `stable` tokens (an agent's messages so far). What
    /// those positions change is not logged, which saves writing the log
    /// for nearly every position of agent traffic; a later rollback below
    /// them starts from the saved copy at or before where the contexts
    /// part, or else from nothing (then saving a copy there). The trace is
    /// the same whatever `stable` is; `known` must be right (checked in
    /// debug builds).
    pub(crate) fn generate_in(
        &mut self,
        context: &[u32],
        output_len: usize,
        known: usize,
        stable: usize,
    ) -> Positions {
        let prompt_len = context.len() - output_len;
        let prompt = &context[..prompt_len];
        let known = known.min(self.tokens.len()).min(prompt_len);
        debug_assert!(self.tokens[..known] == prompt[..known], "tokens said known");
        let keep = self.shared_after(prompt, known);
        let stable = stable.min(prompt_len);
        let (mut start, from_nothing) = self.roll_back(keep);
        if from_nothing && keep > 0 {
            // Probably another conversation under the same start: the
            // n-grams up to where they part are saved for the next one.
            let mut recorder =
                Recorder::new(&mut self.log, &mut self.marks, &mut self.tokens, stable);
            let mut before = vec![None; self.config.max_n];
            for e in 0..keep {
                recorder.begin(context[e]);
                self.index.push(context, e, &mut before, &mut recorder);
            }
            self.save(keep);
            start = keep;
        }
        let mut recorder = Recorder::new(&mut self.log, &mut self.marks, &mut self.tokens, stable);
        let positions = drive(
            &self.config,
            &mut self.index,
            &mut recorder,
            context,
            output_len,
            start,
        );
        self.floor = self.floor.max(stable.min(self.tokens.len()));
        positions
    }

    /// Brings the index back to the first `keep` positions or fewer, and
    /// returns how many it holds and whether it starts from nothing: by
    /// undoing the changes of the positions after `keep`, or by copying
    /// back the saved index when that is cheaper or those changes were not
    /// all logged, or else by clearing it. Saves a copy after undoing at
    /// least a fifth of the context.
    fn roll_back(&mut self, keep: usize) -> (usize, bool) {
        let held = self.tokens.len();
        if self.saved.as_ref().is_some_and(|saved| saved.len > keep) {
            // Its positions are about to be replaced.
            self.saved = None;
        }
        if let Some(saved) = &self.saved {
            let len = saved.len;
            // Undoing costs a hash-map operation per change, about four a
            // position; pushing a position again about twice as much, and
            // copying back about a 16th of an operation per entry.
            let kept = self.marks.get(keep).copied().unwrap_or(self.log.len());
            let undone = self.log.len() - kept;
            if keep < self.floor || undone > 8 * (keep - len) + len / 4 {
                self.index.copy_from(&saved.index);
                self.log
                    .truncate(self.marks.get(len).copied().unwrap_or(self.log.len()));
                self.marks.truncate(len);
                self.tokens.truncate(len);
                self.floor = self.floor.min(len);
                return (len, false);
            }
        }
        if keep < self.floor {
            self.index.clear();
            self.log.clear();
            self.marks.clear();
            self.tokens.clear();
            self.floor = 0;
            return (0, true);
        }
        while self.marks.len() > keep {
            let mark = self.marks.pop().expect("above keep");
            while self.log.len() > mark {
                let change = self.log.pop().expect("above the mark");
                self.index.undo(change);
            }
        }
        self.tokens.truncate(keep);
        if keep > 0 && 4 * (held - keep) >= keep {
            self.save(keep);
        }
        (keep, false)
    }

    /// Saves a copy of the index, which holds `len` positions.
    fn save(&mut self, len: usize) {
        match &mut self.saved {
            Some(saved) => {
                saved.len = len;
                saved.index.clone_from(&self.index);
            }
            None => {
                self.saved = Some(Saved {
                    len,
                    index: self.index.clone(),
                })
            }
        }
    }
}

/// The [`Journal`] of a [`Reusable`], which also marks each position; it
/// logs the changes of the positions from `from` on.
struct Recorder<'a> {
    log: &'a mut Vec<Undo>,
    marks: &'a mut Vec<usize>,
    tokens: &'a mut Vec<u32>,
    from: usize,
    /// Whether the position being pushed is logged.
    logging: bool,
}

impl<'a> Recorder<'a> {
    /// A recorder into these logs, logging the positions from `from` on
    /// (not logging until the first position begins).
    fn new(
        log: &'a mut Vec<Undo>,
        marks: &'a mut Vec<usize>,
        tokens: &'a mut Vec<u32>,
        from: usize,
    ) -> Self {
        Self {
            log,
            marks,
            tokens,
            from,
            logging: false,
        }
    }
}

impl Journal for Recorder<'_> {
    #[inline(always)]
    fn touched(&mut self, map: usize, key: u64, before_last: u32) {
        if self.logging {
            self.log.touched(map, key, before_last);
        }
    }

    #[inline(always)]
    fn inserted(&mut self, map: usize, key: u64, replaced: Option<Seen>) {
        if self.logging {
            self.log.inserted(map, key, replaced);
        } else {
            assert!(replaced.is_none(), "an n-gram added twice");
        }
    }
}

/// Where [`drive`] tells a journal that a position begins.
trait Positioned: Journal {
    fn begin(&mut self, token: u32);
}

impl Positioned for () {
    #[inline(always)]
    fn begin(&mut self, _: u32) {}
}

impl Positioned for Recorder<'_> {
    fn begin(&mut self, token: u32) {
        self.logging = self.marks.len() >= self.from;
        self.marks.push(self.log.len());
        self.tokens.push(token);
    }
}

/// Records one more end of an n-gram seen before: what was known, its id.
fn touch(seen: &mut Seen, end: u32) -> (Option<Seen>, u32) {
    let old = *seen;
    seen.before_last = seen.last;
    seen.last = end;
    (Some(old), old.id)
}

fn take_id(next: &mut u32) -> u32 {
    let id = *next;
    *next += 1;
    id
}

fn fresh(id: u32, end: u32) -> Seen {
    Seen {
        id,
        first: end,
        last: end,
        before_last: NONE,
    }
}

/// The trace of one request: `context` is the prompt's tokens followed by
/// the output's (its end-of-sequence token included, if any), of which the
/// last `output_len` are the output. Entry `j` of each array is output
/// position `j + 1`; there are `output_len - 1` of them (none for an output
/// of at most one token).
///
/// # Panics
///
/// With [`Rule::Suffix`], whose traces depend on other requests too: see
/// [`suffix`].
pub fn generate(config: &Config, context: &[u32], output_len: usize) -> Positions {
    assert!(
        config.rule != Rule::Suffix,
        "suffix traces are made by ngram::suffix"
    );
    let mut index = Index::new(config.max_n);
    drive(config, &mut index, &mut (), context, output_len, 0)
}

/// [`generate`] on `index`, which holds the n-grams of `context[..start]`
/// (`start` at most the prompt's length), telling `journal` what changes.
fn drive<J: Positioned>(
    config: &Config,
    index: &mut Index,
    journal: &mut J,
    context: &[u32],
    output_len: usize,
    start: usize,
) -> Positions {
    let prompt_len = context.len() - output_len;
    let positions = output_len.saturating_sub(1);
    let mut out = Positions {
        proposal: Vec::with_capacity(positions),
        matched: Vec::with_capacity(positions),
        ngram: Vec::with_capacity(positions),
    };
    if positions == 0 {
        return out;
    }
    let max_n = config.max_n;
    let cap = config.cap;
    let mut before = vec![None; max_n];
    // The previous position's proposal: (start, matched), to continue it.
    let mut previous: Option<(usize, usize)> = None;
    // Contexts of length T = e + 1 for e < prompt_len are not drafted at.
    for e in start..prompt_len + positions {
        journal.begin(context[e]);
        index.push(context, e, &mut before, journal);
        let len = e + 1; // T
        if len <= prompt_len {
            continue;
        }
        let found = match config.rule {
            Rule::Vllm | Rule::Trtllm | Rule::Hf => (config.min_n..=max_n.min(len - 1))
                .rev()
                .find_map(|n| before[n - 1].map(|seen| (n, seen.first as usize + 1, len))),
            Rule::LlamacppSimple => llamacpp_simple(config, &before, len),
            Rule::Suffix => unreachable!("refused above"),
        };
        let (proposal, matched, n) = match found {
            Some((n, start, end)) => {
                let proposal = (end - start).min(cap);
                let known = match previous {
                    Some((p, m)) if p + 1 == start && m >= 1 => m - 1,
                    _ => 0,
                };
                let limit = proposal.min(context.len() - len);
                let mut m = known.min(limit);
                while m < limit && context[start + m] == context[len + m] {
                    m += 1;
                }
                previous = Some((start, m));
                (proposal, m, n)
            }
            None => {
                previous = None;
                (0, 0, 0)
            }
        };
        out.proposal.push(proposal as u8);
        out.matched.push(matched as u8);
        out.ngram.push(if proposal == 0 { 0 } else { n as u8 });
    }
    out
}

/// llama.cpp's `ngram-simple` at a context of `len` tokens: `(n, start,
/// end)` of the proposal `context[start..end]`, or none.
fn llamacpp_simple(
    config: &Config,
    before: &[Option<Seen>],
    len: usize,
) -> Option<(usize, usize, usize)> {
    let n = config.max_n;
    let m = config.cap;
    // `cur_len`: the tokens without the one just sampled.
    let cur_len = len - 1;
    if cur_len <= n + m + 1 {
        return None;
    }
    let seen = before[n - 1]?;
    // Ends of earlier occurrences, at most len - 2; the search starts at
    // start cur_len - n - 1, i.e. end len - 3.
    let end = if seen.last as usize <= len - 3 {
        seen.last
    } else {
        seen.before_last
    };
    if end == NONE || (end as usize) < n {
        return None; // none, or only the one at position 0
    }
    let start = end as usize + 1;
    let copy = m.min(cur_len - start);
    if copy < n {
        return None;
    }
    Some((n, start, start + copy))
}
