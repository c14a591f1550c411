//! Per-state drafting by what the drafter says at every step: `per-state`
//! on a lookup trace.
//!
//! The state of a request-step is read from the drafter at that step
//! ([`StepSignal`]): on a suffix-decoding trace the bucket of the draft's
//! score (the sum of its tokens' estimated probabilities: the tokens the
//! drafter expects accepted, [`SCORE_EDGES`]); on an n-gram trace whether
//! the drafter matched fewer than its longest `n`, crossed with the
//! request's recent matched length ([`StepSettings::recent_match`],
//! [`MATCH_EDGES`]) and with its previous drafting step's outcome (none
//! yet, every token accepted, some, none: [`OUTCOME_STATES`]): the drafter
//! has no score, and how much of its recent proposals held says whether
//! the request is copying. What a step reads
//! is what the output has said by then: at each earlier step, the tokens
//! the request's copy had held since it began (the tokens accepted, and
//! the bonus token where it went on with the proposal, added up over the
//! steps that went on with it; at most `K`), or what the step's proposal
//! held where the copy stopped there. It is read again at every step: unlike a copy run
//! ([`crate::runs`]), which keeps its first step's state, a run that
//! starts on a weak draft goes on as a strong one.
//!
//! # What it learns
//!
//! At every visited request-step the drafter's proposal at `K` and, once
//! the following tokens exist, how much of it holds (`L`, `m`) say what
//! drafting every `k` there would have given: `min(k, L)` drafted,
//! `min(k, m)` accepted. Each state sums, for every `k` in `0..=K`, those
//! accepted tokens and the step's cost (`base + per_token × d`, the
//! request's own step: whether the batch shares it does not enter), and
//! every [`DEFAULT_RUN_OBSERVATIONS`] request-steps it drafts the `k` of
//! the largest
//!
//! ```text
//! accepted(k) − λ cost(k),     λ = factor × (the tokens per unit of cost seen)
//! ```
//!
//! (Dinkelbach's exchange rate between the goodput's numerator and its
//! denominator; the bonus token is the same at every `k`; on n-gram
//! traces each state's own rate, the tokens per unit of cost of what it
//! drafted, leaning on the overall one by [`DEFAULT_STATE_RATE`]
//! observations: a token saves the steps of the positions it skips, which
//! are in the state's regime), each state's
//! sums first given [`DEFAULT_PRIOR`] observations at the mean of all
//! states' (a state seen a few times leans on the pool). The factor is
//! the signal's ([`StepSignal::default_factor`]): under 1 for suffix
//! drafts (the tokens after a weak draft are dearer than the mean), over
//! 1 for n-gram ones (a long accepted draft lands where the copy goes on,
//! which one step does not see). Every sum then keeps [`DEFAULT_KEEP`] of
//! its weight. The outcome at a smaller `k` is read from the proposal at
//! `K` (what a proposal tracker records): exact for a lookup drafter
//! whose proposal at a smaller cap is a prefix of it (n-gram), an
//! approximation for a suffix drafter, whose draft at a smaller cap may be
//! another draft.
//!
//! An observation is learnt once the output says its outcome (the first
//! token after the proposal that does not go on with it, or the proposal's
//! `K`th token) and every observation drafted before it is learnt. The
//! outcomes said first are the drafts that failed early; taken as they
//! come, the sums at a choice would be a sample of the failures, with the
//! copies still going on left out (at batch 128 and `c = 0.3` that put
//! two cells of the tuning half under 1.00). Earlier replays (the
//! changelog's Fixed) read each outcome at its own step, before the
//! output said it, and the recent matched length with it (up to 64 tokens
//! the output had not yet made): this module's constants were chosen on
//! those. With what the output has said, the tuning half's mean fell from
//! 1.0337 to 1.0279 (cells under 1.00: none either way; ahead of every
//! peer rule in 65 of 72 cells, 67 before; every batch kept full). The
//! recent matched length was chosen among three readings of what the
//! output has said, on the tuning half (mean, cells under 1.00, cells
//! ahead): what each step's verify says of its own proposal, 1.0263, 0,
//! 65 (a request drafting nothing then reads at most 1 token a step, and
//! stays in the lowest level however long it copies: 0.682 of the best
//! static `k` on the alternating sequences below); each proposal's match
//! once the output has said it, 1.0245, 0, 63; **the tokens the copy has
//! held so far**, 1.0279, 0, 65.
//!
//! # What it guarantees
//!
//! A *round* is a visited request-step; the action is its state's `k`;
//! the round's value at `k` is `accepted(k) − λ cost(k)`. The learner is
//! follow the leader on values discounted by [`DEFAULT_KEEP`] per choice,
//! with full feedback (every `k`'s value is known once the tokens after
//! the proposal exist) delayed by up to [`DEFAULT_RUN_OBSERVATIONS`]
//! request-steps. **No regret bound holds**: the rounds a policy visits
//! depend on its `k` (a long accepted draft skips the positions a short one
//! would visit), `λ` is itself learned, and follow the leader has none
//! against adversarial sequences anyway. Measured on the sequences of
//! `sim/tests/copy_runs_adversarial.rs` (`K = 64`, `c` 0.1 and 0.3, batch 1
//! and 32; a trace with no `ngram` is one drafter state, crossed with the
//! recent matched length; the first length [`DEFAULT_NGRAM_FIRST_LEN`];
//! each state's own rate, [`DEFAULT_STATE_RATE`]; the previous outcome):
//! at worst 0.870 of the best static `k` with two kinds of request in one
//! batch of 32 at `c = 0.3` (the copy-run per-state 1.003), 0.992 on the
//! two-peaked curve at `c = 0.3`, batch 32, and 1.011 to 1.381 elsewhere.
//! The previous outcome tells the two-peaked curve's peaks apart: at `c =
//! 0.1` it gives 1.064 and 1.070 at batch 1 and 32, against 0.889 and 0.861
//! with the short match and the recent matched length alone (the copy-run
//! per-state 0.993 and 0.976). The two kinds at `c = 0.1`, batch 32, give
//! 1.167 (0.836 with the drafter's state alone, the copy-run per-state
//! 0.893). It switches 1.4 to 3.9 times per 1,000 engine steps at batch 1
//! and 29 to 102 at batch 32. (Without the previous outcome: at worst
//! 0.861, elsewhere 0.882 to 1.340, switching 1.0 to 3.3 and 25 to 101
//! times; read before the output said them, as before the changelog's
//! Fixed: at worst 0.850, elsewhere 0.939 to 1.380.)

use std::collections::{HashMap, VecDeque};

use crate::drafting::{Policy, RequestMemory, RequestView};
use crate::runs::{DEFAULT_KEEP, DEFAULT_RUN_OBSERVATIONS, PositionOutcome};
use crate::summary::CostLinear;
use crate::trace_set::Position;

/// The score buckets' upper edges, in sixteenths of a token (the trace's
/// unit): under half a token, under 1, 2, 4, 8, and 8 or more.
pub const SCORE_EDGES: [u8; 5] = [8, 16, 32, 64, 128];

/// The states of [`StepSignal::Score`]: one per score bucket (the most
/// of any signal).
pub const SCORE_STATES: usize = SCORE_EDGES.len() + 1;

/// The share of the seen goodput a token is valued at on suffix traces
/// ([`StepSignal::Score`]).
///
/// Chosen on the tuning half of the held-out corpus's suffix traces (vLLM's
/// defaults; short edits, long edits and agent calls; `K` 8 and 24, `c`
/// 0.02 / 0.1 / 0.3, batch 1 / 8 / 32 / 128; the mean of the 72 cell
/// medians of per-state's goodput over the best static `k`, cells under
/// 1.00 in parentheses): 0.5 / 0.6 / 0.7 / 0.8 / 0.9 / 1.0 gave 1.0008
/// (14) / 1.0022 (16) / 1.0031 (23) / 1.0032 (25) / 1.0031 (31) / 1.0035
/// (34), with each step's cost shared by its batch. 0.7 to 1.0 are within
/// what one sample resolves (0.1%); 0.7 has the fewest cells under 1.00
/// of them. Not sharing the cost (the request's own step, as here) gave
/// 1.0036 (19) at 0.7. The weight kept at each choice (0.5 / 0.8 / 0.95:
/// 1.0040 / 1.0031 / 1.0027) and the observations per choice (64 / 256 /
/// 1024: 1.0044 / 1.0031 / 1.0023) are the copy-run controllers'.
pub const DEFAULT_FACTOR: f64 = 0.7;

/// The share of the seen goodput a token is valued at on n-gram traces
/// ([`StepSignal::ShortMatch`]).
///
/// Chosen on the tuning half of the held-out corpus's n-gram traces (vLLM's
/// rule, `n = 2..5`; short edits, long edits and agent calls; `K` 8 and
/// 64, `c` 0.02 / 0.1 / 0.3, batch 1 / 8 / 32 / 128; the mean of the 72
/// cell medians of per-state's goodput over the best static `k`, cells
/// under 1.00 in parentheses), first with a first length of `K`: 0.7 /
/// 0.9 / 1.0 / 1.05 / 1.1 / 1.15 / 1.25 gave 0.9838 (28) / 0.9951 (26) /
/// 1.0040 (27) / 1.0071 (20) / 1.0073 (20) / 1.0065 (23) / 1.0012 (29);
/// then with a first length of 4 (the copy-run controllers' on n-gram
/// traces), 1.0 / 1.1 / 1.2 gave 1.0086 (27) / 1.0118 (20) / 1.0075 (29).
/// Copy runs gave 1.0031 (35). Two states (a short match) and four (with
/// a proposal shorter than `K`) were level at 1.1 (1.0073 and 1.0073).
pub const DEFAULT_NGRAM_FACTOR: f64 = 1.1;

/// The edges of a request's recent matched length, in tokens: under 1,
/// under 4, under 16, and 16 or more ([`StepSettings::recent_match`]).
///
/// A lookup drafter has no score of its own; how much of its recent
/// proposals for the request held says how much copying the request is
/// doing: at each step, the tokens its copy has held so far (see the
/// module docs). Chosen (when
/// the replay read the whole match at once, up to 64 tokens past the
/// draft: see the module docs) on the tuning half of the held-out corpus's
/// n-gram traces (`K` 8 and 64, every cost and batch, mean of the 72 cell
/// medians, cells under 1.00 in parentheses): without it 1.0104 (22);
/// edges 1, 4, 16 **1.0244 (15)**; 2, 8 1.0217 (14); 1, 8 1.0223 (14);
/// 0.5, 2, 8, 32 1.0215 (16); 1, 4, 16, 48 1.0184 (18). The factor
/// stays [`DEFAULT_NGRAM_FACTOR`] with it (1.0 / 1.1 / 1.2: 1.0226 /
/// 1.0244 / 1.0190).
pub const MATCH_EDGES: [f64; 3] = [1.0, 4.0, 16.0];

/// The weight of a request's newest step in its recent matched length
/// (an exponential moving average; [`RequestState`]'s memory, 1/4).
///
/// On the tuning half (as [`MATCH_EDGES`]): 0.1 / 0.25 / 0.5 gave 1.0226
/// (12) / 1.0244 (15) / 1.0261 (13), with worst cells 0.966 / 0.977 /
/// 0.966; 0.25 has the best worst cell.
///
/// [`RequestState`]: specdec_metrics::RequestState
pub const MATCH_WEIGHT: f64 = 0.25;

/// The outcomes of a request's previous drafting step that split its
/// state on n-gram traces ([`StepSettings::previous_outcome`]): none yet
/// (the request has not drafted), every token drafted accepted, some of
/// them, none.
///
/// What the verifier said of the request's last draft is what an engine
/// knows best about the next one: a copy whose whole draft held is likely
/// to go on, one that held in part has just stopped (the tokens after
/// it are the engine's own), and one that held nothing says the match is
/// stale. The recent matched length reads the same outcomes, but as a
/// mean over steps; the previous outcome is the newest alone.
///
/// Chosen on the tuning half of the held-out corpus, every batch kept full
/// (n-gram traces, `K` 8 and 64, every regime, cost and batch; the mean of
/// the 72 cell medians of per-state's goodput over the best static `k`,
/// cells under 1.00, cells where per-state is ahead of every peer rule):
/// without it 1.0279, 0, 65; **the four outcomes 1.0295, 0, 65**; three
/// (some and none yet together) 1.0281, 0, 64; two (every token accepted
/// or not) 1.0280, 0, 64. The four outcomes gain most on the short edits at `K
/// = 64` (+0.8% on the mean of their 12 cells, each +0.2 to +1.7%); on
/// agent calls at `K = 64` they cost 0.1% (at most 0.5%), elsewhere they
/// move cells by under 0.2% on the mean. On the report half (run once,
/// after the choice) the mean went from 1.0249 to 1.0263 and the cells
/// under 1.00 from three to five, all chat at `K = 64` (0.995 at worst).
/// Picked first, with one request in flight, among the signals the
/// `richer_states_bound` example reads (fixed plans searched on half the
/// tuning half's agent tasks and judged on the other half, `c = 0.1`):
/// the outcome added the most of any
/// one signal at `K = 8` (1.0240 and 1.0184 without it, 1.0325 and
/// 1.0316 with it) and among the most at `K = 64` (1.0296 and 1.0267;
/// 1.0319 and 1.0351), where no signal led both ways.
pub const OUTCOME_STATES: usize = 4;

/// The most states a [`StepStates`] controller keeps: the short-match
/// split × the recent-match levels × the previous outcomes (more than the
/// [`SCORE_STATES`] buckets).
pub const STEP_STATES: usize = 2 * (MATCH_EDGES.len() + 1) * OUTCOME_STATES;

/// The recent-match levels ([`MATCH_EDGES`]).
const LEVELS: usize = MATCH_EDGES.len() + 1;

/// How many observations of the pooled states a state's sums are drawn
/// toward ([`StepSettings::prior`]).
///
/// A state seen a few times has sums of a few draws: its least-cost length
/// is noise, and a wrong length in a rare state costs the whole replay.
/// Before each choice, every seen state's sums get this many observations
/// at the mean of all states' (its own included): a state seen far more
/// often keeps its own length, one seen a few times leans on the pool.
/// Chosen on the tuning half of the held-out corpus (per-state, `K` 8 and
/// 64 on n-gram traces, 8 and 24 on suffix ones; every cost and batch; the
/// mean of the 72 cell medians, cells under 1.00 in parentheses), n-gram
/// / suffix: none 1.0244 (15) / 1.0072 (15); 2 1.0249 (12) / 1.0068 (5);
/// **4 1.0257 (10) / 1.0063 (5)**; 6 1.0257 (9) / 1.0058 (6); 8 1.0263
/// (10) / 1.0054 (8); 16 1.0265 (11) / 1.0045 (5); 32 1.0246 (12); 64
/// 1.0214 (21); 256 1.0143 (28). 4 and 6 have the fewest cells under
/// 1.00 over both (15) and the same n-gram mean; 4's suffix mean is
/// higher (the suffix mean's 0.1% is what one sample resolves).
pub const DEFAULT_PRIOR: f64 = 4.0;

/// How much each state's exchange rate leans on the overall one on n-gram
/// traces ([`StepSettings::state_rate`]): the base cost of this many
/// observations at the overall rate, added to the state's own tokens and
/// cost.
///
/// An accepted token is worth the cost it saves: the steps the request
/// would otherwise spend on the positions the draft skipped. Those
/// positions are in the request's own regime (a request copying goes on
/// copying), so the tokens per unit of cost there are the state's, not
/// the mean over every state: a token is cheap in a state that copies and
/// dear in one that does not. Chosen on the tuning half of the held-out
/// corpus, every batch kept full (n-gram traces, `K` 8 and 64, every
/// regime, cost and batch; the mean of the 72 cell medians of per-state's
/// goodput over the best static `k`, then cells under 1.00, then cells
/// where per-state is ahead of every peer rule): one rate for all states
/// (before) 1.0334, 0, 64; 4 1.0202, 8, 60; 32 1.0305, 0, 65; 64 1.0327,
/// 0, 67; **128 1.0337, 0, 67**; 256 1.0335, 0, 65. The mean moves by less
/// than one sample resolves (0.1%); what moves is the cells ahead of
/// every peer (a target), and 128 has the most at the highest mean: the
/// three it adds are agent calls at `K = 64`, `c = 0.02`, where the
/// peers lead by 0.1 to 0.5% with one rate. The states' own rates help where
/// copying is rare (agent calls at `K = 64`, `c = 0.1`, batch 32: 1.027
/// against 1.021) and, leaning on them too much, cost the short edits at
/// `K = 64` (32: 1.071 against 1.086 at `c = 0.1`). Not on suffix traces,
/// where it was not measured.
pub const DEFAULT_STATE_RATE: f64 = 128.0;

/// Per-state's draft length before its first choice on n-gram traces (at
/// most `K`; suffix traces start at `K`, as the copy-run controllers do:
/// [`default_first_len`]).
///
/// Chosen on the tuning half of the held-out corpus, every batch kept full
/// (n-gram traces, `K` 8 and 64, every regime, cost and batch; the mean of
/// the 72 cell medians of per-state's goodput over the best static `k`,
/// cells under 1.00 in parentheses): 4 (the copy-run controllers' first
/// length, per-state's before) 1.0333 (6); **8** 1.0334 (0); 16 1.0332 (0);
/// `K` 1.0317 (0). The six cells under 1.00 at 4 were all at `K = 8`, `c
/// = 0.02`, where the best static `k` is `K` and 256 observations at 4 were
/// what per-state lost to it.
pub const DEFAULT_NGRAM_FIRST_LEN: usize = 8;

/// Per-state's draft length before its first choice on traces of the
/// drafting rule `rule` (the trace's metadata; `None`: n-gram), at `K =
/// max_draft_len`.
///
/// ```
/// use specdec_sim::step_states::{DEFAULT_NGRAM_FIRST_LEN, default_first_len};
/// assert_eq!(default_first_len(Some("vllm"), 64), DEFAULT_NGRAM_FIRST_LEN);
/// assert_eq!(default_first_len(None, 4), 4);
/// assert_eq!(default_first_len(Some("suffix"), 24), 24);
/// ```
pub fn default_first_len(rule: Option<&str>, max_draft_len: usize) -> usize {
    match rule {
        Some("suffix") => max_draft_len,
        _ => DEFAULT_NGRAM_FIRST_LEN.min(max_draft_len),
    }
}

// The score buckets fit too.
const _: () = assert!(SCORE_STATES <= STEP_STATES);

// The request memory of a step-state controller: the request's recent
// matched length, its number (1, 2, ...: 0 before its first step), the
// tokens it has generated, the tokens its copy has held so far, and its
// previous drafting step's outcome (0 none yet, 1 every token drafted
// accepted, 2 some, 3 none).
const RECENT_MATCH: usize = 0;
const REQUEST: usize = 1;
const GENERATED: usize = 2;
const COPIED: usize = 3;
const OUTCOME: usize = 4;

/// An observation (a visited request-step with a proposal) whose outcome
/// the output may not say yet.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Observation {
    state: usize,
    /// `L`, and how much of the proposal's first `min(L, K)` tokens holds.
    proposal: usize,
    held: usize,
}

/// Where a request's observation not yet said waits: the request's
/// generated tokens once the output says it, and the observation's place
/// in the order drafted.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Unsaid {
    said_at: f64,
    seq: u64,
}

/// The level of a recent matched length among [`MATCH_EDGES`].
fn match_level(recent: f64) -> usize {
    MATCH_EDGES.iter().filter(|&&edge| recent >= edge).count()
}

/// What a [`StepStates`] controller reads its states from at every step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepSignal {
    /// The bucket of a suffix draft's score ([`score_state`]).
    Score,
    /// Whether the drafter matched fewer than its longest `n` (this many):
    /// two states.
    ShortMatch(usize),
}

impl StepSignal {
    /// How many states the signal reads.
    ///
    /// ```
    /// use specdec_sim::step_states::{SCORE_STATES, StepSignal};
    /// assert_eq!(StepSignal::Score.states(), SCORE_STATES);
    /// assert_eq!(StepSignal::ShortMatch(5).states(), 2);
    /// ```
    pub fn states(self) -> usize {
        match self {
            Self::Score => SCORE_STATES,
            Self::ShortMatch(_) => 2,
        }
    }

    /// The factor chosen for the signal's drafter: [`DEFAULT_FACTOR`] for
    /// [`Score`](Self::Score), [`DEFAULT_NGRAM_FACTOR`] for
    /// [`ShortMatch`](Self::ShortMatch).
    ///
    /// ```
    /// use specdec_sim::step_states::{DEFAULT_FACTOR, DEFAULT_NGRAM_FACTOR, StepSignal};
    /// assert_eq!(StepSignal::Score.default_factor(), DEFAULT_FACTOR);
    /// assert_eq!(StepSignal::ShortMatch(5).default_factor(), DEFAULT_NGRAM_FACTOR);
    /// ```
    pub fn default_factor(self) -> f64 {
        match self {
            Self::Score => DEFAULT_FACTOR,
            Self::ShortMatch(_) => DEFAULT_NGRAM_FACTOR,
        }
    }

    /// The state of a step where the drafter proposes `p`.
    ///
    /// ```
    /// use specdec_sim::step_states::StepSignal;
    /// use specdec_sim::trace_set::Position;
    /// let p = |ngram, score| Position { proposal: 4, matched: 0, ngram, score, oracle: 0 };
    /// assert_eq!(StepSignal::ShortMatch(5).state(p(3, 0)), 1);
    /// assert_eq!(StepSignal::ShortMatch(5).state(p(5, 0)), 0);
    /// assert_eq!(StepSignal::Score.state(p(1, 40)), 3);
    /// ```
    pub fn state(self, p: crate::trace_set::Position) -> usize {
        match self {
            Self::Score => score_state(p.score),
            Self::ShortMatch(max_n) => usize::from(p.short_match(max_n)),
        }
    }
}

/// The state of a draft of `score` sixteenths of a token.
///
/// ```
/// use specdec_sim::step_states::{SCORE_STATES, score_state};
/// assert_eq!(score_state(0), 0);
/// assert_eq!(score_state(8), 1); // half a token
/// assert_eq!(score_state(255), SCORE_STATES - 1);
/// ```
pub fn score_state(score: u8) -> usize {
    SCORE_EDGES.partition_point(|&edge| edge <= score)
}

/// The settings of a [`StepStates`] controller.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepSettings {
    /// `K`.
    pub max_draft_len: usize,
    /// The step cost.
    pub cost: CostLinear,
    /// Observations between two choices.
    pub observations: u64,
    /// The weight the sums keep at each choice.
    pub keep: f64,
    /// The share of the seen goodput a token is valued at.
    pub factor: f64,
    /// The length before the first choice.
    pub first_len: usize,
    /// Observations at the pooled mean added to each seen state's sums
    /// before a choice ([`DEFAULT_PRIOR`]; 0: every state on its own).
    pub prior: f64,
    /// With `Some(w)`, each state values its tokens at its own exchange
    /// rate: the tokens per unit of cost of what it drafted, with the base
    /// cost of `w` observations at the overall rate added
    /// ([`DEFAULT_STATE_RATE`] on n-gram traces); `None`: one rate for
    /// every state (suffix traces).
    pub state_rate: Option<f64>,
    /// What the states are.
    pub signal: StepSignal,
    /// Whether the states are crossed with the request's recent matched
    /// length ([`MATCH_EDGES`], [`MATCH_WEIGHT`]): the default for
    /// [`StepSignal::ShortMatch`], whose drafter has no score; not for
    /// [`StepSignal::Score`], where it did not pay (tuning half, suffix
    /// traces: 1.0072 with 15 cells under 1.00 without, 1.0081 with 22).
    pub recent_match: bool,
    /// Whether the states are crossed with the request's previous
    /// drafting step's outcome ([`OUTCOME_STATES`]): the default for
    /// [`StepSignal::ShortMatch`]; not for [`StepSignal::Score`], where it
    /// did not pay (tuning half, suffix traces, `K` 8 and 24, every batch
    /// kept full: 1.0070 with 7 cells under 1.00 without, 1.0063 with 11).
    pub previous_outcome: bool,
    /// With `Some(plan)`, the lengths per state are `plan` from the first
    /// step and never chosen again (`plan[s]` is capped at `K`): a fixed
    /// table, to measure what the states give without learning.
    pub fixed_plan: Option<[usize; STEP_STATES]>,
}

impl StepSettings {
    /// The recent-match levels the states are crossed with (1: none).
    fn levels(&self) -> usize {
        if self.recent_match { LEVELS } else { 1 }
    }

    /// The previous outcomes the states are crossed with (1: none).
    fn outcomes(&self) -> usize {
        if self.previous_outcome {
            OUTCOME_STATES
        } else {
            1
        }
    }

    /// The defaults, for `K`, a cost and the states' signal (the signal's
    /// factor, a first length of `K`).
    pub fn new(max_draft_len: usize, cost: CostLinear, signal: StepSignal) -> Self {
        Self {
            max_draft_len,
            cost,
            observations: DEFAULT_RUN_OBSERVATIONS,
            keep: DEFAULT_KEEP,
            factor: signal.default_factor(),
            first_len: max_draft_len,
            prior: DEFAULT_PRIOR,
            state_rate: matches!(signal, StepSignal::ShortMatch(_)).then_some(DEFAULT_STATE_RATE),
            signal,
            recent_match: matches!(signal, StepSignal::ShortMatch(_)),
            previous_outcome: matches!(signal, StepSignal::ShortMatch(_)),
            fixed_plan: None,
        }
    }
}

/// The step-state controller: see the module docs.
#[derive(Clone, Debug)]
pub struct StepStates {
    settings: StepSettings,
    /// `STEP_STATES × (K + 1)`: accepted tokens at each `k`.
    tokens: Vec<f64>,
    /// `STEP_STATES × (K + 1)`: step costs at each `k`.
    costs: Vec<f64>,
    /// `K + 1`: the mean over every state's observations of the tokens
    /// and costs at each `k`, made at a choice (kept here so that choosing
    /// allocates nothing).
    pooled_tokens: Vec<f64>,
    pooled_costs: Vec<f64>,
    /// The tokens and step costs of what was drafted.
    seen_tokens: f64,
    seen_cost: f64,
    /// Per state: the tokens and step costs of what was drafted there.
    state_seen: [[f64; 2]; STEP_STATES],
    plan: [usize; STEP_STATES],
    seen: u64,
    choices: u64,
    last: usize,
    /// Per request (its number): its observations the output does not say
    /// yet (each once, in the order below).
    unsaid: HashMap<u64, Vec<Unsaid>>,
    requests: u64,
    /// Every observation in the order drafted from the oldest one not yet
    /// learnt, and whether its outcome is said: the sums take them from the
    /// front, so an observation waits for every older one (the outcomes
    /// said first are those that failed early: taken as they come, the
    /// recent ones would be a sample of the failures).
    order: VecDeque<(Observation, bool)>,
    front: u64,
}

impl StepStates {
    /// A controller of `settings`, drafting `first_len` in every state
    /// until its first choice.
    ///
    /// # Panics
    ///
    /// If the settings' states are more than [`STEP_STATES`] (the score
    /// buckets crossed with both the recent matched length and the
    /// previous outcome).
    pub fn new(settings: StepSettings) -> Self {
        let states = settings.signal.states() * settings.levels() * settings.outcomes();
        assert!(
            states <= STEP_STATES,
            "{states} step states, more than {STEP_STATES}"
        );
        let width = settings.max_draft_len + 1;
        let first = settings.first_len.min(settings.max_draft_len);
        Self {
            tokens: vec![0.0; STEP_STATES * width],
            costs: vec![0.0; STEP_STATES * width],
            pooled_tokens: vec![0.0; width],
            pooled_costs: vec![0.0; width],
            seen_tokens: 0.0,
            seen_cost: 0.0,
            state_seen: [[0.0; 2]; STEP_STATES],
            plan: settings.fixed_plan.map_or([first; STEP_STATES], |p| {
                p.map(|k| k.min(settings.max_draft_len))
            }),
            seen: 0,
            choices: 0,
            last: first,
            unsaid: HashMap::new(),
            requests: 0,
            order: VecDeque::new(),
            front: 0,
            settings,
        }
    }

    /// Marks the observation `seq` said; learns from the front of the
    /// order what is said.
    fn said(&mut self, seq: u64) {
        let i = usize::try_from(seq - self.front).expect("in the order");
        self.order[i].1 = true;
        while let Some(&(o, true)) = self.order.front() {
            self.order.pop_front();
            self.front += 1;
            self.learn(o);
        }
    }

    /// Adds what drafting every `k` would have given at `o` to its
    /// state's sums.
    fn learn(&mut self, o: Observation) {
        let width = self.settings.max_draft_len + 1;
        let cost = self.settings.cost;
        let s = o.state;
        let tokens = &mut self.tokens[s * width..(s + 1) * width];
        let costs = &mut self.costs[s * width..(s + 1) * width];
        for (k, (t, c)) in tokens.iter_mut().zip(costs.iter_mut()).enumerate() {
            let d = k.min(o.proposal);
            *t += d.min(o.held) as f64;
            *c += cost.base + cost.per_token * d as f64;
        }
    }

    /// The length per state.
    pub fn plan(&self) -> &[usize] {
        &self.plan
    }

    /// How many times the plan was chosen.
    pub fn choices(&self) -> u64 {
        self.choices
    }

    /// The state of a request whose drafter proposes `position`, with the
    /// request's memory: the drafter's state, then the recent-match level,
    /// then the previous outcome (so that with neither the states are the
    /// drafter's alone).
    fn state(&self, position: Position, memory: &RequestMemory) -> usize {
        let signal = self.settings.signal;
        // Each signal's value is 0 where the states are not crossed with it.
        let levels = self.settings.levels();
        let level = match_level(memory[RECENT_MATCH]).min(levels - 1);
        let outcome = (memory[OUTCOME] as usize).min(self.settings.outcomes() - 1);
        signal.state(position) + signal.states() * (level + levels * outcome)
    }

    fn choose(&mut self) {
        self.choices += 1;
        let width = self.settings.max_draft_len + 1;
        // Every observation costs at least `base`: the rate is finite.
        let rate = self.settings.factor * self.seen_tokens / self.seen_cost;
        self.pooled_tokens.fill(0.0);
        self.pooled_costs.fill(0.0);
        for (tokens, costs) in self.tokens.chunks(width).zip(self.costs.chunks(width)) {
            for (k, (t, c)) in tokens.iter().zip(costs).enumerate() {
                self.pooled_tokens[k] += t;
                self.pooled_costs[k] += c;
            }
        }
        // Every observation adds `base` to the sum at k = 0, so the pooled
        // sums per observation are the sums over this count of them: the
        // pool's means, each a ratio of two sums that decay alike (a count
        // decayed toward 0 by many choices without a proposal still gives
        // finite means). The count is 0 only when no state was seen, and
        // then every state keeps its length below before a mean is read.
        let pooled_observations = self.pooled_costs[0] / self.settings.cost.base;
        for x in self.pooled_tokens.iter_mut().chain(&mut self.pooled_costs) {
            *x /= pooled_observations;
        }
        let prior = self.settings.prior;
        for (s, plan) in self.plan.iter_mut().enumerate() {
            // The state's own rate, leaning on the overall one by `w`
            // observations' base cost.
            let rate = self.settings.state_rate.map_or(rate, |w| {
                let [tokens, cost] = self.state_seen[s];
                let lean = w * self.settings.cost.base;
                self.settings.factor * (tokens + lean * self.seen_tokens / self.seen_cost)
                    / (cost + lean)
            });
            let tokens = &self.tokens[s * width..(s + 1) * width];
            let costs = &self.costs[s * width..(s + 1) * width];
            // A state never seen keeps its length.
            if costs[0] <= 0.0 {
                continue;
            }
            let pooled = self.pooled_tokens.iter().zip(&self.pooled_costs);
            let mut best = (0, f64::NEG_INFINITY);
            for (k, ((t, c), (mean_t, mean_c))) in tokens.iter().zip(costs).zip(pooled).enumerate()
            {
                let value = (t + prior * mean_t) - rate * (c + prior * mean_c);
                // Ties to the shorter.
                if value > best.1 {
                    best = (k, value);
                }
            }
            *plan = best.0;
        }
        let keep = self.settings.keep;
        self.tokens.iter_mut().for_each(|x| *x *= keep);
        self.costs.iter_mut().for_each(|x| *x *= keep);
        self.seen_tokens *= keep;
        self.seen_cost *= keep;
        self.state_seen
            .iter_mut()
            .flatten()
            .for_each(|x| *x *= keep);
    }
}

impl Policy for StepStates {
    fn budget(&mut self, _step: u64) -> usize {
        self.plan[0]
    }

    fn draft_lens(&mut self, _step: u64, requests: &[RequestView], lens: &mut [usize]) {
        for (len, view) in lens.iter_mut().zip(requests) {
            *len = view
                .position
                .map_or(self.plan[0], |p| self.plan[self.state(p, &view.memory)]);
        }
    }

    fn after_position(&mut self, memory: &mut RequestMemory, outcome: PositionOutcome) {
        let p = outcome.proposed;
        let (l, m) = (usize::from(p.proposal), usize::from(p.matched));
        let cost = self.settings.cost;
        // The tokens and step cost of what was drafted.
        let got = (outcome.accepted + 1) as f64;
        let paid = cost.base + cost.per_token * outcome.drafted as f64;
        if memory[REQUEST] == 0.0 {
            self.requests += 1;
            memory[REQUEST] = self.requests as f64;
        }
        let request = memory[REQUEST] as u64;
        let before = memory[GENERATED];
        memory[GENERATED] += got;
        let now = memory[GENERATED];
        // The state the step drafted in, before anything of it enters.
        let state = (l > 0).then(|| self.state(p, memory));
        // The request's proposals the output does not say yet.
        let mut unsaid = self.unsaid.remove(&request).unwrap_or_default();
        // With nothing proposed every k is the same undrafted step: nothing
        // to learn.
        let mut known = 0;
        if let Some(s) = state {
            self.state_seen[s][0] += got;
            self.state_seen[s][1] += paid;
            // A proposal tracker copies the first `min(L, K)` tokens; the
            // output says how many hold once the first that does not
            // exists, or all of them.
            let copied = l.min(self.settings.max_draft_len);
            let held = m.min(copied);
            let needs = if held == copied { held } else { held + 1 };
            unsaid.push(Unsaid {
                said_at: before + needs as f64,
                seq: self.front + self.order.len() as u64,
            });
            let o = Observation {
                state: s,
                proposal: l,
                held,
            };
            self.order.push_back((o, false));
            // What the output says by now of how much the request copies:
            // the tokens its copy has held since the copy began, this step's
            // accepted tokens and bonus token included where it goes on
            // with the proposal (at most `K`); the tokens accepted where
            // it does not.
            let a = outcome.accepted;
            if m > a || a == l {
                memory[COPIED] += (a + 1) as f64;
                known = (memory[COPIED] as usize).min(copied);
            } else {
                memory[COPIED] = 0.0;
                known = a;
            }
        } else {
            memory[COPIED] = 0.0;
        }
        // Its proposals the output now says, this step's among them (all of
        // them once it ends); the order learns them as drafted.
        let mut i = 0;
        while i < unsaid.len() {
            if unsaid[i].said_at <= now || outcome.finished {
                let o = unsaid.swap_remove(i);
                self.said(o.seq);
            } else {
                i += 1;
            }
        }
        if !unsaid.is_empty() {
            self.unsaid.insert(request, unsaid);
        }
        // What the verifier said of this step's draft, for the next one.
        if outcome.drafted > 0 {
            memory[OUTCOME] = if outcome.accepted == outcome.drafted {
                1.0
            } else if outcome.accepted > 0 {
                2.0
            } else {
                3.0
            };
        }
        // After the step's state was read: what the output says of the
        // request's copy (0 with nothing proposed) enters its mean.
        memory[RECENT_MATCH] += MATCH_WEIGHT * (known as f64 - memory[RECENT_MATCH]);
        self.seen_tokens += got;
        self.seen_cost += paid;
        self.seen += 1;
        if self.seen >= self.settings.observations && self.settings.fixed_plan.is_none() {
            self.seen = 0;
            self.choose();
        }
    }

    fn after_step(&mut self, budget: usize, _outcomes: &[(usize, usize)]) {
        self.last = budget;
    }

    fn chosen(&self) -> usize {
        self.last
    }

    fn plan_key(&self) -> u64 {
        crate::drafting::lengths_key(&self.plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COST: CostLinear = CostLinear {
        base: 1.0,
        per_token: 0.3,
    };

    /// Every state on its own (no prior): the tests of one state's
    /// arithmetic; the prior has its own test.
    fn settings(observations: u64) -> StepSettings {
        StepSettings {
            observations,
            keep: 1.0,
            first_len: 3,
            prior: 0.0,
            ..StepSettings::new(8, COST, StepSignal::Score)
        }
    }

    fn position(proposal: u8, matched: u8, score: u8) -> Position {
        Position {
            proposal,
            matched,
            ngram: 1,
            score,
            oracle: matched,
        }
    }

    /// A proposal of `proposal` tokens, `matched` of which hold, from a
    /// match of `n` tokens.
    fn matched_n(n: u8, proposal: u8, matched: u8) -> Position {
        Position {
            ngram: n,
            ..position(proposal, matched, 0)
        }
    }

    /// A step that drafted `drafted` of a proposal at `K` of `proposed`.
    fn step(proposed: Position, drafted: usize, batch: usize) -> PositionOutcome {
        PositionOutcome {
            position: proposed,
            proposed,
            drafted: drafted.min(usize::from(proposed.proposal)),
            accepted: drafted
                .min(usize::from(proposed.proposal))
                .min(usize::from(proposed.matched)),
            batch,
            finished: false,
        }
    }

    /// `times` steps of `outcome`, each of a new request that ends there
    /// (nothing kept from one to the next; its outcome is said at once).
    fn feed(c: &mut StepStates, times: usize, outcome: PositionOutcome) {
        for _ in 0..times {
            let last = PositionOutcome {
                finished: true,
                ..outcome
            };
            c.after_position(&mut RequestMemory::default(), last);
        }
    }

    fn view(p: Option<Position>) -> RequestView {
        RequestView {
            state: specdec_metrics::RequestState::default(),
            memory: RequestMemory::default(),
            position: p,
            state_index: 0,
            left: 100,
        }
    }

    #[test]
    fn buckets_split_at_their_edges() {
        let states: Vec<usize> = [0, 7, 8, 15, 16, 31, 32, 63, 64, 127, 128, 255]
            .into_iter()
            .map(score_state)
            .collect();
        assert_eq!(states, [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]);
    }

    #[test]
    fn weak_drafts_are_skipped_and_strong_ones_drafted_whole() {
        let mut c = StepStates::new(settings(8));
        for _ in 0..4 {
            // Scored under half a token, and nothing holds.
            feed(&mut c, 1, step(position(8, 0, 2), 3, 1));
            // Scored over 8 tokens, and all of it holds.
            feed(&mut c, 1, step(position(8, 8, 200), 3, 1));
        }
        assert_eq!(c.choices(), 1);
        assert_eq!(c.plan()[score_state(2)], 0);
        assert_eq!(c.plan()[score_state(200)], 8);
        // A state never seen keeps the first length.
        assert_eq!(c.plan()[score_state(40)], 3);
        let mut lens = [9; 3];
        c.draft_lens(
            0,
            &[
                view(Some(position(8, 0, 2))),
                view(Some(position(8, 8, 200))),
                view(None),
            ],
            &mut lens,
        );
        assert_eq!(lens, [0, 8, c.plan()[0]]);
    }

    #[test]
    fn a_state_seen_once_leans_on_the_pool_and_one_seen_often_does_not() {
        // 60 whole copies of 8 in one state, then `rare` steps of another
        // whose draft holds nothing; the plan is chosen at the last step.
        // Costs are twice the tests' (base 2): the pool's observations are
        // its sum at k = 0 over the base, and every figure below is the
        // same as at base 1 (the rate halves as the costs double).
        let plan_at = |factor: f64, prior: f64, rare: usize| {
            let mut c = StepStates::new(StepSettings {
                factor,
                prior,
                cost: CostLinear {
                    base: 2.0,
                    per_token: 0.6,
                },
                ..settings(60 + rare as u64)
            });
            feed(&mut c, 60, step(position(8, 8, 200), 8, 1));
            feed(&mut c, rare, step(position(8, 0, 10), 8, 1));
            assert_eq!(c.choices(), 1);
            // A state never seen keeps the first length, prior or not.
            assert_eq!(c.plan()[score_state(40)], 3);
            (c.plan()[score_state(200)], c.plan()[score_state(10)])
        };
        let plan = |prior: f64, rare: usize| plan_at(1.0, prior, rare);
        // On its own, the state seen once drafts nothing.
        assert_eq!(plan(0.0, 1), (8, 0));
        // With 8 observations at the pool's mean (60 k / 61 tokens and 1 +
        // 0.3 k of cost each) and a rate of 541 / 207.4 = 2.61, each token
        // drafted there gains 8 x 60 / 61 = 7.87 tokens for 8 x 0.3 + 0.3
        // = 2.7 of cost, worth 7.04 tokens: it drafts the whole 8.
        assert_eq!(plan(8.0, 1), (8, 8));
        // With 6: 6 x 60 / 61 = 5.90 tokens for 6 x 0.3 + 0.3 = 2.1 of cost,
        // worth 5.48: still the whole 8 (3 would give 2.95 against 3.13).
        assert_eq!(plan(6.0, 1), (8, 8));
        // Seen 60 times, its own sums outweigh the 8 (rate 600 / 408 =
        // 1.47: each token drafted gains 8 x 0.5 = 4 for 68 x 0.3 = 20.4
        // of cost), and the copies' state keeps drafting 8.
        assert_eq!(plan(8.0, 60), (8, 0));
        // The prior's cost counts too: at 1.2 times the rate (3.13) the
        // 8 x 0.3 + 0.3 = 2.7 of cost per token drafted is worth 8.45
        // tokens, more than the 7.87 the prior brings.
        assert_eq!(plan_at(1.2, 8.0, 1), (8, 0));
    }

    #[test]
    fn a_state_values_its_tokens_at_its_own_rate() {
        // Costs of base 2 and 0.6 a token. 30 whole copies of 8 (score
        // 200: 9 tokens for 6.8 of cost each), then 10 drafts of 2 in a
        // weak state (score 10) that hold 2 and 0 tokens in turn (2
        // tokens for 3.2 of cost a step). There drafting 2 gains 1 token
        // a step for 1.2 of cost: it pays at a rate under 1 / 1.2 = 0.833
        // tokens per unit of cost, and nothing else does.
        let cost = CostLinear {
            base: 2.0,
            per_token: 0.6,
        };
        let run = |state_rate: Option<f64>, keep: f64, rounds: usize| {
            let mut c = StepStates::new(StepSettings {
                factor: 1.0,
                state_rate,
                keep,
                cost,
                ..settings(40)
            });
            for _ in 0..rounds {
                feed(&mut c, 30, step(position(8, 8, 200), 8, 1));
                for i in 0..10 {
                    feed(&mut c, 1, step(position(8, 2 * (i % 2), 10), 2, 1));
                }
            }
            assert_eq!(c.choices(), rounds as u64);
            (c.plan()[score_state(200)], c.plan()[score_state(10)])
        };
        let plan = |state_rate| run(state_rate, 1.0, 1);
        // One rate for all: 290 tokens for 236 of cost, 1.229.
        assert_eq!(plan(None), (8, 0));
        // The weak state's own: 20 for 32, 0.625; the copies' own 1.32
        // still pays for every token they draft (1 > 0.6 x 1.32).
        assert_eq!(plan(Some(0.0)), (8, 2));
        // Leaning on the overall rate by w observations' base cost (2 w):
        // (20 + 2 w x 1.229) / (32 + 2 w) is 0.826 at w = 8 and 0.842 at
        // 9, either side of 0.833.
        assert_eq!(plan(Some(8.0)), (8, 2));
        assert_eq!(plan(Some(9.0)), (8, 0));
        assert_eq!(plan(Some(4.0)), (8, 2));
        assert_eq!(plan(Some(16.0)), (8, 0));
        // The state's sums keep half their weight at each choice: at the
        // second, 10 + 20 tokens for 16 + 32 of cost, against a lean of
        // 30: (30 + 30 x 1.229) / 78 = 0.857, no draft. Without the decay
        // (40 for 64) it would be 0.818, a draft of 2.
        assert_eq!(run(Some(15.0), 0.5, 2), (8, 0));
        assert_eq!(run(Some(15.0), 1.0, 2), (8, 2));
        // The default: n-gram traces lean by DEFAULT_STATE_RATE, suffix
        // traces keep one rate.
        let ngram = StepSettings::new(8, COST, StepSignal::ShortMatch(5));
        assert_eq!(ngram.state_rate, Some(DEFAULT_STATE_RATE));
        assert_eq!(settings(1).state_rate, None);
    }

    #[test]
    fn a_draft_that_holds_in_part_drafts_where_the_rate_pays() {
        // Every draft of the state holds 2 tokens of 8: drafting 2 gains
        // 2 tokens for 0.6 of cost; a third token costs 0.3 and gains none.
        let mut c = StepStates::new(settings(16));
        feed(&mut c, 16, step(position(8, 2, 40), 8, 1));
        assert_eq!(c.plan()[score_state(40)], 2);
    }

    #[test]
    fn the_exchange_rate_is_the_seen_goodput_times_the_factor() {
        // One state, drafts of 1 token that hold half the time: drafting 1
        // gains 0.5 token for 0.3 of cost. Worth it while the rate is under
        // 0.5 / 0.3.
        let run = |factor: f64, seen: (usize, u8)| {
            let mut c = StepStates::new(StepSettings {
                factor,
                ..settings(4)
            });
            // What was drafted sets the seen goodput.
            for m in [0, 1] {
                feed(&mut c, 1, step(position(1, m, 10), seen.0, 1));
            }
            feed(&mut c, 2, step(position(1, seen.1, 200), seen.0, 1));
            c.plan()[score_state(10)]
        };
        // Nothing drafted: 4 tokens for 4 of cost, rate 1, which drafting
        // beats (0.5 / 0.3 = 1.67).
        assert_eq!(run(1.0, (0, 0)), 1);
        // Drafted 1 at every step: 7 tokens for 5.2, rate 1.35; × 1.3 =
        // 1.75 > 1.67, × 1.2 = 1.62 < 1.67.
        assert_eq!(run(1.3, (1, 1)), 0);
        assert_eq!(run(1.2, (1, 1)), 1);
    }

    #[test]
    fn it_learns_from_the_proposal_at_k_not_the_draft() {
        // At the drafted length the drafter drafted another draft that
        // failed; the proposal at K holds whole.
        let mut c = StepStates::new(settings(4));
        let proposed = position(8, 8, 100);
        let drafted = Position {
            proposal: 2,
            matched: 0,
            ..proposed
        };
        feed(
            &mut c,
            4,
            PositionOutcome {
                position: drafted,
                proposed,
                drafted: 2,
                accepted: 0,
                batch: 1,
                finished: false,
            },
        );
        assert_eq!(c.plan()[score_state(100)], 8);
    }

    #[test]
    fn the_plan_is_chosen_every_n_observations_and_older_ones_weigh_less() {
        let plan = |keep: f64| {
            let mut c = StepStates::new(StepSettings {
                keep,
                ..settings(4)
            });
            let state = score_state(40);
            // Four steps whose drafts hold whole: 8.
            for _ in 0..3 {
                feed(&mut c, 1, step(position(8, 8, 40), 8, 1));
                assert_eq!(c.choices(), 0);
            }
            feed(&mut c, 1, step(position(8, 8, 40), 8, 1));
            assert_eq!((c.choices(), c.plan()[state]), (1, 8));
            // Then four whose drafts fail.
            feed(&mut c, 4, step(position(8, 0, 40), 8, 1));
            assert_eq!(c.choices(), 2);
            c.plan()[state]
        };
        // Kept whole, the drafts that held still pay for the ones that
        // failed; at a tenth of their weight they do not.
        assert_eq!(plan(1.0), 8);
        assert_eq!(plan(0.1), 0);
    }

    #[test]
    fn a_fixed_plan_is_drafted_from_the_first_step_and_never_chosen_again() {
        let mut fixed = [2; STEP_STATES];
        fixed[score_state(2)] = 5;
        // Above `K`: capped.
        fixed[score_state(200)] = 99;
        let mut c = StepStates::new(StepSettings {
            fixed_plan: Some(fixed),
            ..settings(4)
        });
        let mut expected = fixed;
        expected[score_state(200)] = 8;
        assert_eq!(c.plan(), &expected);
        // Evidence that would move the learned plan (the test above).
        for _ in 0..4 {
            feed(&mut c, 1, step(position(8, 0, 2), 3, 1));
            feed(&mut c, 1, step(position(8, 8, 200), 3, 1));
        }
        assert_eq!(c.plan(), &expected);
        assert_eq!(c.choices(), 0);
        let mut lens = [0; 2];
        c.draft_lens(
            0,
            &[
                view(Some(position(8, 0, 2))),
                view(Some(position(8, 8, 40))),
            ],
            &mut lens,
        );
        assert_eq!(lens, [5, 2]);
    }

    #[test]
    fn an_undrafted_position_teaches_nothing() {
        let mut c = StepStates::new(settings(4));
        feed(&mut c, 4, step(position(0, 0, 0), 3, 1));
        assert_eq!(c.choices(), 1);
        assert_eq!(c.plan(), &[3; STEP_STATES]);
    }

    #[test]
    fn a_short_match_is_a_state_of_its_own_on_ngram_traces() {
        let mut c = StepStates::new(StepSettings {
            signal: StepSignal::ShortMatch(5),
            factor: 1.0,
            recent_match: false,
            ..settings(8)
        });
        let at = |ngram: u8, matched: u8| Position {
            ngram,
            ..position(8, matched, 0)
        };
        for _ in 0..4 {
            // Matched the longest n: the copy holds.
            feed(&mut c, 1, step(at(5, 8), 3, 1));
            // A shorter match: it fails.
            feed(&mut c, 1, step(at(2, 0), 3, 1));
        }
        // Every step is its request's first: no previous outcome.
        let mut expected = [3; STEP_STATES];
        expected[..2].copy_from_slice(&[8, 0]);
        assert_eq!(c.plan(), &expected);
        let mut lens = [9; 3];
        c.draft_lens(
            0,
            &[
                view(Some(at(5, 0))),
                view(Some(at(3, 0))),
                view(Some(at(0, 0))),
            ],
            &mut lens,
        );
        // No match (n = 0) is the long match's state: nothing to draft.
        assert_eq!(lens, [8, 0, 8]);
    }

    #[test]
    fn levels_split_at_the_match_edges() {
        let levels: Vec<usize> = [0.0, 0.99, 1.0, 3.99, 4.0, 15.99, 16.0, 64.0]
            .into_iter()
            .map(match_level)
            .collect();
        assert_eq!(levels, [0, 0, 1, 1, 2, 2, 3, 3]);
        assert_eq!(STEP_STATES, 32);
        let ngram = StepSettings::new(8, COST, StepSignal::ShortMatch(5));
        assert!(ngram.recent_match && ngram.previous_outcome);
        let score = StepSettings::new(8, COST, StepSignal::Score);
        assert!(!score.recent_match && !score.previous_outcome);
    }

    #[test]
    fn a_request_copying_lately_is_a_state_of_its_own_on_ngram_traces() {
        let mut c = StepStates::new(StepSettings {
            factor: 1.0,
            previous_outcome: false,
            ..StepSettings::new(8, COST, StepSignal::ShortMatch(5))
        });
        c.settings.observations = 16;
        c.settings.keep = 1.0;
        c.plan = [3; STEP_STATES];
        let at = |matched: u8| Position {
            ngram: 5,
            ..position(8, matched, 0)
        };
        // A request whose proposals hold whole, and one whose proposals
        // fail, each eight steps (the same drafter state: the longest n).
        let (mut copying, mut failing) = (RequestMemory::default(), RequestMemory::default());
        for _ in 0..8 {
            c.after_position(&mut copying, step(at(8), 3, 1));
            c.after_position(&mut failing, step(at(0), 3, 1));
        }
        assert_eq!(c.choices(), 1);
        // The copying request's copy has held 4, 8, 12, ... tokens by its
        // steps (3 accepted and the bonus token each), at most `K`: its
        // mean with weight 1/4 takes 4 and then 8s. The 8 its proposals
        // hold are learnt only once the output has them.
        let expected = (1..8).fold(0.25 * 4.0, |mean, _| mean + 0.25 * (8.0 - mean));
        assert!((copying[RECENT_MATCH] - expected).abs() < 1e-9);
        assert_eq!(failing[RECENT_MATCH], 0.0);
        // Its steps read levels 0 (mean 0), 1 (1 and 2.75) and 2 (4.06
        // up). Level 0 (the failing request, and the copying one's first
        // step) learnt from seven failures and one success; levels 1 and 2
        // from successes only: draft all there. The last step of each
        // request is not learnt yet: the copying one's proposal is said
        // one step later, and the failing one's waits for it. Level 3 was
        // never seen and keeps its length (3 here).
        let state = |level: usize| 2 * level;
        assert_eq!(c.plan()[state(0)], 0);
        assert_eq!(c.plan()[state(1)], 8);
        assert_eq!(c.plan()[state(2)], 8);
        assert_eq!(c.plan()[state(3)], 3);
        let mut lens = [9; 2];
        let view_with = |memory: RequestMemory| RequestView {
            memory,
            ..view(Some(at(0)))
        };
        c.draft_lens(0, &[view_with(copying), view_with(failing)], &mut lens);
        assert_eq!(lens, [8, 0]);
    }

    #[test]
    fn a_request_s_previous_outcome_is_a_state_of_its_own_on_ngram_traces() {
        let mut c = StepStates::new(StepSettings {
            factor: 1.0,
            recent_match: false,
            observations: 24,
            keep: 1.0,
            prior: 0.0,
            ..StepSettings::new(8, COST, StepSignal::ShortMatch(5))
        });
        c.plan = [3; STEP_STATES];
        // Three requests in the same drafter state (the longest n), eight
        // steps each: proposals that hold whole, in part, not at all.
        let mut memories = [RequestMemory::default(); 3];
        for _ in 0..8 {
            for (memory, matched) in memories.iter_mut().zip([8, 1, 0]) {
                c.after_position(memory, step(matched_n(5, 8, matched), 3, 1));
            }
        }
        assert_eq!(memories.map(|m| m[OUTCOME]), [1.0, 2.0, 3.0]);
        // A step with nothing to draft leaves the outcome as it was.
        let mut quiet = memories[0];
        c.after_position(&mut quiet, step(matched_n(0, 0, 0), 3, 1));
        assert_eq!(quiet[OUTCOME], 1.0);
        assert_eq!(c.choices(), 1);
        // The drafter's state is 0 and there are no levels: the state is
        // 2 × the outcome. After all accepted, every proposal held 8:
        // draft all. After none, none held: draft nothing. After some, one
        // token held: the first drafted token earns 1 for 0.3 more cost, at
        // a rate of 1.05 to 1.23 tokens per unit of cost (the state's own
        // goodput and the overall one), and the others earn nothing: draft
        // 1. The first steps (none yet) are a state of their own.
        let state = |outcome: usize| 2 * outcome;
        assert_eq!(c.plan()[state(1)], 8);
        assert_eq!(c.plan()[state(2)], 1);
        assert_eq!(c.plan()[state(3)], 0);
        let mut lens = [9; 3];
        let views = memories.map(|memory| RequestView {
            memory,
            ..view(Some(matched_n(5, 8, 0)))
        });
        c.draft_lens(0, &views, &mut lens);
        assert_eq!(lens, [8, 1, 0]);
    }

    #[test]
    fn every_short_match_level_and_outcome_is_a_state_of_its_own() {
        let c = StepStates::new(StepSettings::new(8, COST, StepSignal::ShortMatch(5)));
        let mut states = std::collections::HashSet::new();
        for n in [5, 2] {
            for recent in [0.0, 1.0, 4.0, 16.0] {
                for outcome in 0..OUTCOME_STATES {
                    let mut memory = RequestMemory::default();
                    memory[RECENT_MATCH] = recent;
                    memory[OUTCOME] = outcome as f64;
                    let s = c.state(matched_n(n, 8, 0), &memory);
                    assert!(s < STEP_STATES);
                    states.insert(s);
                }
            }
        }
        assert_eq!(states.len(), STEP_STATES);
    }

    #[test]
    fn more_states_than_the_controller_keeps_are_refused() {
        let settings = StepSettings {
            recent_match: true,
            previous_outcome: true,
            ..StepSettings::new(8, COST, StepSignal::Score)
        };
        let built = std::panic::catch_unwind(|| StepStates::new(settings));
        assert!(built.is_err());
        // The score buckets crossed with either alone fit, and every state
        // read is one of them.
        for (recent_match, previous_outcome) in [(true, false), (false, true)] {
            let c = StepStates::new(StepSettings {
                recent_match,
                previous_outcome,
                ..settings
            });
            let mut memory = RequestMemory::default();
            memory[RECENT_MATCH] = 64.0;
            memory[OUTCOME] = 3.0;
            let s = c.state(position(8, 0, 255), &memory);
            assert_eq!(s, SCORE_STATES * 4 - 1);
        }
    }

    #[test]
    fn a_request_s_outcomes_wait_for_its_own_tokens() {
        let mut c = StepStates::new(StepSettings::new(8, COST, StepSignal::ShortMatch(5)));
        let (mut a, mut b) = (RequestMemory::default(), RequestMemory::default());
        let copy = matched_n(5, 8, 8);
        // A's proposal holds 8: the output says so with A's 8th token
        // after it; A has made 5.
        c.after_position(&mut a, step(copy, 4, 1));
        // B makes 9 tokens at once: its own proposal is said, A's is not
        // (B's tokens are not A's), so B's waits behind it.
        c.after_position(&mut b, step(copy, 8, 1));
        assert_ne!(a[REQUEST], b[REQUEST]);
        assert_eq!((a[GENERATED], b[GENERATED]), (5.0, 9.0));
        assert_eq!(sums(&c, 0, 8), (0.0, 0.0));
        assert_eq!(c.order.len(), 2);
        // A's next step makes its 8th token: both are learnt.
        c.after_position(&mut a, step(copy, 4, 1));
        assert_eq!(sums(&c, 0, 8).0, 16.0);
    }

    #[test]
    fn a_copy_counts_the_tokens_it_has_held_so_far_even_undrafted() {
        let c = &mut StepStates::new(StepSettings::new(8, COST, StepSignal::ShortMatch(5)));
        let copy = matched_n(5, 8, 8);
        let mut memory = RequestMemory::default();
        // Drafting nothing, each step's bonus token says the copy went on
        // one more token: its mean takes 1, 2, 3, 4, 5.
        let mut mean = 0.0;
        for held in 1..=5 {
            c.after_position(&mut memory, step(copy, 0, 1));
            mean += 0.25 * (f64::from(held) - mean);
            assert_eq!(memory[COPIED], f64::from(held));
        }
        assert!((memory[RECENT_MATCH] - mean).abs() < 1e-12);
        // Past 1: the next step reads level 1 (a request drafting nothing
        // still tells a copy from text it does not copy).
        assert_eq!(c.state(copy, &memory), 2);
        // A proposal that fails ends the copy: it enters what it held.
        let fails = matched_n(5, 8, 2);
        c.after_position(&mut memory, step(fails, 4, 1));
        assert_eq!(memory[COPIED], 0.0);
        assert!((memory[RECENT_MATCH] - (mean + 0.25 * (2.0 - mean))).abs() < 1e-12);
        // So does a step with nothing proposed, which enters 0.
        c.after_position(&mut memory, step(copy, 0, 1));
        c.after_position(&mut memory, step(position(0, 0, 0), 0, 1));
        assert_eq!(memory[COPIED], 0.0);
    }

    /// The sums of state `s` at `k`: accepted tokens and cost.
    fn sums(c: &StepStates, s: usize, k: usize) -> (f64, f64) {
        let i = s * (c.settings.max_draft_len + 1) + k;
        (c.tokens[i], c.costs[i])
    }

    #[test]
    fn an_outcome_is_learnt_once_the_output_says_it() {
        let mut c = StepStates::new(StepSettings::new(8, COST, StepSignal::ShortMatch(5)));
        let mut memory = RequestMemory::default();
        // A proposal of 8 whose first 6 tokens hold: drafting 2 accepts 2
        // and the bonus token goes on with it. The output says 6 hold with
        // its 7th token after the proposal.
        let proposal = matched_n(5, 8, 6);
        c.after_position(&mut memory, step(proposal, 2, 1));
        assert_eq!(sums(&c, 0, 8), (0.0, 0.0));
        assert_eq!(memory[RECENT_MATCH], 0.25 * 3.0);
        // The next step (nothing proposed there) makes 4 tokens: not yet.
        c.after_position(&mut memory, step(position(0, 0, 0), 0, 1));
        assert_eq!(sums(&c, 0, 8), (0.0, 0.0));
        c.after_position(&mut memory, step(position(0, 0, 0), 0, 1));
        c.after_position(&mut memory, step(position(0, 0, 0), 0, 1));
        assert_eq!(sums(&c, 0, 8), (0.0, 0.0));
        // The 7th token: at k = 8 it would have drafted 8 and accepted 6.
        c.after_position(&mut memory, step(position(0, 0, 0), 0, 1));
        assert_eq!(sums(&c, 0, 8), (6.0, COST.base + 8.0 * COST.per_token));
        assert_eq!(sums(&c, 0, 4), (4.0, COST.base + 4.0 * COST.per_token));
    }

    #[test]
    fn outcomes_are_learnt_in_the_order_drafted() {
        let mut c = StepStates::new(StepSettings::new(8, COST, StepSignal::ShortMatch(5)));
        let (mut copying, mut failing) = (RequestMemory::default(), RequestMemory::default());
        let long = matched_n(5, 8, 8);
        let short = matched_n(2, 8, 0);
        // The copy's outcome waits for 8 tokens; the failure's is said at
        // once, but it was drafted after the copy's: it waits too, so that
        // the sums are never a sample of the outcomes said first.
        c.after_position(&mut copying, step(long, 4, 1));
        c.after_position(&mut failing, step(short, 4, 1));
        assert_eq!(sums(&c, 1, 4), (0.0, 0.0));
        assert_eq!(sums(&c, 0, 4), (0.0, 0.0));
        // The copy's request ends: both are learnt.
        let last = PositionOutcome {
            finished: true,
            ..step(position(0, 0, 0), 0, 1)
        };
        c.after_position(&mut copying, last);
        assert_eq!(sums(&c, 0, 4), (4.0, COST.base + 4.0 * COST.per_token));
        assert_eq!(sums(&c, 1, 4), (0.0, COST.base + 4.0 * COST.per_token));
        assert!(c.unsaid.is_empty() && c.order.is_empty());
    }

    #[test]
    fn the_seen_goodput_weighs_older_steps_less_too() {
        // One state whose drafts of 1 hold half the time (worth it below a
        // rate of 1.67), after a first window that drafted whole copies
        // (rate 5) and a second that drafted nothing (rate 1).
        let plan = |keep: f64| {
            let mut c = StepStates::new(StepSettings {
                keep,
                factor: 1.0,
                ..settings(4)
            });
            feed(&mut c, 4, step(position(8, 8, 200), 8, 1));
            for m in [0, 1, 0, 1] {
                feed(&mut c, 1, step(position(1, m, 10), 0, 1));
            }
            c.plan()[score_state(10)]
        };
        // Kept whole: (36 + 4) / (4 x 3.4 + 4) = 2.27 > 1.67, not worth it.
        assert_eq!(plan(1.0), 0);
        // At a tenth: (3.6 + 4) / (1.36 + 4) = 1.42 < 1.67.
        assert_eq!(plan(0.1), 1);
    }

    #[test]
    fn budget_chosen_and_plan_key_follow_the_plan() {
        let mut c = StepStates::new(settings(4));
        assert_eq!(c.budget(0), 3);
        let key = c.plan_key();
        assert_eq!(key, StepStates::new(settings(4)).plan_key());
        feed(&mut c, 4, step(position(8, 8, 0), 3, 1));
        assert_eq!(c.plan()[0], 8);
        assert_eq!(c.budget(0), 8);
        assert_ne!(c.plan_key(), key);
        // A plan of other lengths in other states has another key.
        let mut d = StepStates::new(settings(4));
        feed(&mut d, 4, step(position(8, 8, 200), 3, 1));
        assert_ne!(d.plan_key(), c.plan_key());
        assert_ne!(d.plan_key(), key);
        // What it reports as chosen is the step's scheduled budget.
        c.after_step(5, &[]);
        assert_eq!(c.chosen(), 5);
    }
}
