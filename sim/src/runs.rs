//! The copy-run controllers: on a lookup drafter's trace, `adaptive` (and
//! `per-state` with a copy-run [`RunSignal`]; by default it reads its
//! states at every step, [`crate::step_states`]) learn from whole copy
//! runs instead of the accepted counts of their own drafts.
//!
//! # What they see
//!
//! A lookup drafter (prompt lookup, vLLM's `ngram`) proposes a copy of
//! context tokens; its proposal beyond the drafted `d` is known when
//! drafting, and the verify step's bonus token says whether the copy went
//! on past the draft: the step *continues the run* when the bonus token is
//! the proposal's next token (`m > a`, with `m` the proposal's match
//! length and `a` the accepted count), or when the whole proposal was
//! drafted and accepted (`a = d = L`: the next lookup most likely goes on
//! copying). Every other step *ends* its run. A run is the chain of a
//! request's steps from one that starts a run to the one that ends it; its
//! length `R` is the number of output tokens the chain predicted, `Σ (a +
//! 1)` over its continuing steps plus the last step's `a`. Everything here
//! is known at the verify step (one token past the draft), so no outcome
//! waits for later tokens, and it is exact for greedy verification.
//!
//! # The estimate
//!
//! Where a run ends does not depend on the draft length (the first output
//! token the copy mispredicts ends it whatever was drafted), so a run of
//! `R` predicted tokens whose proposal was `L` long would have taken, at a
//! static length `k` (drafting `d = min(k, L)` a step),
//!
//! ```text
//! steps(k) = ⌊R / (d + 1)⌋ + 1        for R + 1 tokens,
//! ```
//!
//! each step costing the request `(base + per_token × d) / n` of the step
//! it shares with the `n` requests of its batch (the engine model's cost:
//! `base + per_token × mean d`). The tokens do not depend on `k`, so the
//! controller drafts the `k` of least summed cost over the runs it has
//! seen (the longest within a share of the least, [`default_within`]: the
//! estimate is flat there and drawn toward the shorter side), searched over all
//! of `0..=K` (the goodput curve need not be concave). The batch-level controller keeps one sum; the per-state one
//! keeps one per state of a run's first step (a first signal, [`RunSignal`]:
//! on n-gram traces whether the drafter's match was shorter than its
//! longest `n`, see [`RunSignal`]; by default `per-state` is not a
//! copy-run controller but reads its states at every step, see
//! [`default_signal`] and [`crate::step_states`];
//! whether the request's previous step had nothing to propose; and
//! whether its previous run predicted more than one token), and a run
//! keeps its first step's length to its end. Runs of a request that had nothing to propose (`L = 0`)
//! cost the same at every `k` and are not counted.
//!
//! # What it guarantees
//!
//! A *round* is a finished run `r`; the action is the length `k` its
//! steps drafted; the *loss* of `k` is the run's cost share `ℓ_r(k) = w_r
//! steps_r(k) (base + per_token min(k, L_r))` (`w_r = 1 / n`). Every
//! output token is generated whatever is drafted, so goodput (tokens over
//! summed cost) is highest exactly where `Σ_r ℓ_r(k_r)` is least: the ratio
//! is no obstacle. The feedback is full (the loss of every `k` is known
//! once the run ends) and delayed (a run's end, and then up to
//! [`DEFAULT_RUN_OBSERVATIONS`] request-steps to the next choice). The
//! learner is *follow the leader* on losses discounted by [`DEFAULT_KEEP`]
//! per choice. Under two conditions: the run's end does not depend on `k`
//! (exact when every position of a copy proposes the rest of that copy;
//! not when the lookup jumps to another source mid-copy), and the batch a
//! run shares its steps with does not depend on the past choices (it does
//! as requests finish sooner or later).
//!
//! **No regret bound holds for this learner**: follow the leader loses a
//! constant share of every round to a sequence that alternates just after
//! each choice, so it promises nothing against the best static `k` in
//! hindsight on adversarial traffic (exponential weights over the `K + 1`
//! lengths would, `O(√((D + 1) T ln(K + 1)))` for `T` rounds of delay
//! `D`, at the price of drawing its choice). What was measured instead, on
//! sequences built against it (`sim/tests/copy_runs_adversarial.rs`:
//! alternating regimes, a sudden switch, a two-peaked goodput curve,
//! requests of two kinds in one batch; `K = 64`, `c` 0.1 and 0.3, batch 1
//! and 32; n-gram traces, so the share [`DEFAULT_WITHIN`]): at worst 0.872
//! of the best static `k` (adaptive, two kinds of request at batch 32, `c
//! = 0.1`; per-state 0.893 there; 0.879 and 0.910 within 0.005), and from
//! 0.95 to 1.32 elsewhere. It needs no exploration: it switches when the
//! leader changes, 0.1 to 2.0 times per 1,000 engine steps at batch 1 and
//! 7 to 29 at batch 32 on those sequences.
//!
//! Evidence is counted in observations (request-steps): the plan is chosen
//! again once [`DEFAULT_RUN_OBSERVATIONS`] have been seen since the last
//! choice, and every sum is then multiplied by `keep`
//! ([`DEFAULT_KEEP`]): older runs weigh less. No exploration: a run is
//! seen at every length, 0 included.
//!
//! A run counts once it has ended, so a cold start with many requests in
//! flight chooses from the short runs: the long ones are still going on.
//! Where nearly every request copies most of its output, that can hold
//! the plan short for a while, and a short plan makes the long runs
//! slower to end. On one repository's short edits (`K = 64`, `c = 0.02`,
//! every batch kept full at 32) the first 10 of 198 choices drafted 2,
//! the eleventh 54, and the replay earned 0.971 of static `K` (0.994 at
//! one request in flight, where no choice drafted under 55). Counting
//! every run from its first step (a run still going on as if it ended
//! there) removes the wait but not the bias, which it turns the other way
//! round: it switched six times as often at `c = 0.3`, batch 128, and did
//! no better over the corpus's tuning half (mean 0.9994 of the best static
//! `k` either way, 0.99937 against 0.99944); counting a run's steps so far
//! without its last one lost more (0.9983, 4 cells under 0.99). So runs
//! still count once they end.

use crate::drafting::{Policy, RequestMemory, RequestView};
use crate::summary::CostLinear;
use crate::trace_set::Position;

/// Observations (request-steps) between two choices of the plan.
pub const DEFAULT_RUN_OBSERVATIONS: u64 = 256;

/// The weight every sum keeps at each choice of the plan.
pub const DEFAULT_KEEP: f64 = 0.8;

/// The draft length before the first choice.
pub const DEFAULT_FIRST_LEN: usize = 4;

/// On n-gram traces, the plan takes the longest length whose estimated
/// cost is within this share of the least ([`RunCosts::within`];
/// [`DEFAULT_SUFFIX_WITHIN`] on suffix traces, [`default_within`]).
///
/// The estimate is flat near its least and drawn toward the length being
/// drafted, which is the shorter side: a short draft looks up more often
/// and breaks the copy runs a long one drafts through. First chosen on
/// replays that drained (the tuning half of the held-out corpus; adaptive,
/// `K` 8 and 64 on n-gram traces, 8 and 24 on suffix ones; every cost and
/// batch; the mean of the 72 cell medians, cells under 0.99 in
/// parentheses), n-gram / suffix: the least alone (ties to the shorter)
/// 0.9902 (25) / 0.9987 (3); within 0.002 0.9907 (23) / 0.9992 (3); 0.005
/// 0.9906 (21) / 0.9995 (1); 0.01 0.9906 (20) / 0.9991 (1); 0.02 0.9906
/// (18) / 0.9984 (5); 0.04 0.9883 (29) / 0.9975 (8). Chosen again with
/// every batch kept full (the same half and grid; cells under 0.99, then
/// cells where a repository is under 0.98, in parentheses): n-gram 0.002
/// 0.9984 (1, 9); 0.005 0.9990 (1, 4); 0.01 0.9994 (0, 3); **0.015
/// 0.9994 (0, 2)**; 0.02 0.9992 (0, 2); 0.03 0.9982 (0, 1). The means
/// differ by less than one sample resolves; the shares from 0.01 have no
/// cell under 0.99, and 0.015 the fewest repositories under 0.98 of
/// those with the highest mean.
pub const DEFAULT_WITHIN: f64 = 0.015;

/// [`DEFAULT_WITHIN`]'s share on suffix-decoding traces, whose best static
/// `k` is the longest a draft can be in most cells.
///
/// Kept full on the tuning half of the held-out corpus's suffix traces
/// (adaptive, `K` 8 and 24, as [`DEFAULT_WITHIN`]; cells under 0.99 in
/// parentheses; no repository under 0.98 at any share): **0.005 0.9997
/// (0)**; 0.01 0.9993 (0); 0.015 0.9990 (3); 0.02 0.9986 (4).
pub const DEFAULT_SUFFIX_WITHIN: f64 = 0.005;

/// The copy-run controllers' share within the least estimated cost
/// ([`RunSettings::within`]) on traces of the drafting rule `rule` (the
/// trace's metadata; `None`: n-gram): [`DEFAULT_WITHIN`] on n-gram traces,
/// [`DEFAULT_SUFFIX_WITHIN`] on suffix-decoding ones.
///
/// ```
/// use specdec_sim::runs::{DEFAULT_SUFFIX_WITHIN, DEFAULT_WITHIN, default_within};
/// assert_eq!(default_within(Some("vllm")), DEFAULT_WITHIN);
/// assert_eq!(default_within(None), DEFAULT_WITHIN);
/// assert_eq!(default_within(Some("suffix")), DEFAULT_SUFFIX_WITHIN);
/// ```
pub fn default_within(rule: Option<&str>) -> f64 {
    match rule {
        Some("suffix") => DEFAULT_SUFFIX_WITHIN,
        _ => DEFAULT_WITHIN,
    }
}

/// The states of the per-state copy-run controller without
/// [`RunSettings::long_run`]: the first signal ([`RunSignal`]: a short
/// match by default) × after a no-match (twice as many
/// with it).
pub const RUN_STATES: usize = 4;

/// The per-state copy-run controller's third signal: whether the request's
/// previous run predicted more than this many tokens.
pub const DEFAULT_LONG_RUN: usize = 1;

/// The per-state copy-run controller's first signal: what splits a run's
/// first step in two (crossed with after a no-match and a long previous
/// run).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunSignal {
    /// The drafter's match is shorter than its longest (`0 < n < max_n`):
    /// the copy runs' default ([`RunSettings::new`]).
    ShortMatch,
    /// The drafter matched fewer than this many tokens (`0 < n < N`; a
    /// suffix draft is at most its match length long at vLLM's defaults).
    MatchBelow(u8),
    /// A suffix draft scores below this many sixteenths of a token (the
    /// trace's `score`; a position without a draft is never below).
    ScoreBelow(u8),
    /// No first signal: the runs split by the other two alone.
    Unsplit,
    /// Not copy runs: a state per bucket of the draft's score, read at
    /// every step ([`crate::step_states`]).
    ScoreSteps,
    /// Not copy runs: whether the drafter's match is shorter than its
    /// longest, read at every step, crossed with the request's recent
    /// matched length ([`crate::step_states::MATCH_EDGES`]) and its previous
    /// drafting step's outcome ([`crate::step_states::OUTCOME_STATES`]):
    /// 32 states.
    MatchSteps,
    /// As [`MatchSteps`](Self::MatchSteps) without the previous outcome:
    /// eight states (the default before it).
    RecentMatchSteps,
    /// As [`RecentMatchSteps`](Self::RecentMatchSteps) without the recent
    /// matched length: two states (the default before that).
    ShortMatchSteps,
}

impl RunSignal {
    /// Reads `short-match`, `match-below=N` (`N` in `2..=255`),
    /// `score-below=X` (`X` in tokens, a multiple of 1/16 in `(0, 16)`),
    /// `none`, `score-steps`, `match-steps`, `recent-match-steps` or
    /// `short-match-steps`.
    ///
    /// ```
    /// use specdec_sim::runs::RunSignal;
    /// assert_eq!(RunSignal::parse("score-below=1.5"), Ok(RunSignal::ScoreBelow(24)));
    /// assert_eq!(RunSignal::parse("none"), Ok(RunSignal::Unsplit));
    /// assert_eq!(RunSignal::parse("match-below=4"), Ok(RunSignal::MatchBelow(4)));
    /// assert_eq!(RunSignal::parse("score-steps"), Ok(RunSignal::ScoreSteps));
    /// assert_eq!(RunSignal::parse("match-steps"), Ok(RunSignal::MatchSteps));
    /// assert_eq!(RunSignal::parse("recent-match-steps"), Ok(RunSignal::RecentMatchSteps));
    /// assert_eq!(RunSignal::parse("short-match-steps"), Ok(RunSignal::ShortMatchSteps));
    /// assert!(RunSignal::parse("match-below=1").is_err());
    /// assert!(RunSignal::parse("score-below=0.01").is_err());
    /// ```
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "short-match" => Ok(Self::ShortMatch),
            "none" => Ok(Self::Unsplit),
            "score-steps" => Ok(Self::ScoreSteps),
            "match-steps" => Ok(Self::MatchSteps),
            "recent-match-steps" => Ok(Self::RecentMatchSteps),
            "short-match-steps" => Ok(Self::ShortMatchSteps),
            _ if s.starts_with("match-below=") => s["match-below=".len()..]
                .parse::<u8>()
                .ok()
                .filter(|&n| n >= 2)
                .map(Self::MatchBelow)
                .ok_or_else(|| format!("{s:?}: the match length is a whole number in 2..=255")),
            _ => {
                let tokens = s
                    .strip_prefix("score-below=")
                    .and_then(|x| x.parse::<f64>().ok())
                    .ok_or_else(|| {
                        format!(
                            "{s:?}: not a run signal (short-match, match-below=N, \
                             score-below=X, none, score-steps, match-steps, \
                             recent-match-steps, short-match-steps)"
                        )
                    })?;
                let sixteenths = tokens * 16.0;
                if !(1.0..=255.0).contains(&sixteenths) || sixteenths.fract() != 0.0 {
                    return Err(format!(
                        "{s:?}: the score is a multiple of 1/16 of a token in 0.0625..=15.9375"
                    ));
                }
                Ok(Self::ScoreBelow(sixteenths as u8))
            }
        }
    }

    /// The step states the signal stands for, with the drafter's longest
    /// `n`; `None` for the copy-run signals.
    ///
    /// ```
    /// use specdec_sim::runs::RunSignal;
    /// use specdec_sim::step_states::StepSignal;
    /// assert_eq!(RunSignal::MatchSteps.step_signal(5), Some(StepSignal::ShortMatch(5)));
    /// assert_eq!(RunSignal::ShortMatchSteps.step_signal(5), Some(StepSignal::ShortMatch(5)));
    /// assert_eq!(RunSignal::ScoreSteps.step_signal(5), Some(StepSignal::Score));
    /// assert_eq!(RunSignal::ShortMatch.step_signal(5), None);
    /// ```
    pub fn step_signal(self, max_n: usize) -> Option<crate::step_states::StepSignal> {
        use crate::step_states::StepSignal;
        match self {
            Self::ScoreSteps => Some(StepSignal::Score),
            Self::MatchSteps | Self::RecentMatchSteps | Self::ShortMatchSteps => {
                Some(StepSignal::ShortMatch(max_n))
            }
            Self::ShortMatch | Self::MatchBelow(_) | Self::ScoreBelow(_) | Self::Unsplit => None,
        }
    }

    /// Whether a run starting at `position` is in the signal's second half.
    fn split(self, position: Position, max_n: usize) -> bool {
        match self {
            Self::ShortMatch => position.short_match(max_n),
            Self::MatchBelow(n) => position.ngram > 0 && position.ngram < n,
            Self::ScoreBelow(t) => position.proposal > 0 && position.score < t,
            Self::Unsplit
            | Self::ScoreSteps
            | Self::MatchSteps
            | Self::RecentMatchSteps
            | Self::ShortMatchSteps => false,
        }
    }
}

/// Per-state's signal on traces of the drafting rule `rule` (the trace's
/// metadata; `None`: n-gram): no copy runs, states read at every step
/// ([`crate::step_states`]): [`RunSignal::MatchSteps`] (a short match) on
/// n-gram traces, [`RunSignal::ScoreSteps`] (the draft's score) on
/// suffix-decoding ones.
///
/// Chosen on the tuning half of the held-out corpus (short edits, long
/// edits and agent calls; `c` 0.02 / 0.1 / 0.3, batch 1 / 8 / 32 / 128:
/// the mean of 72 cell medians of per-state's goodput over the best static
/// `k`, cells under 1.00 in parentheses). Suffix traces (vLLM's defaults,
/// `K` 8 and 24): copy runs unsplit 0.9952; split by a score below 0.5 /
/// 1 / 2 / 4 tokens 0.9931 / 0.9875 / 0.9817 / 0.9870, by a match below 2
/// / 4 / 8 tokens 0.9843 / 0.9797 / 0.9873 (a short match, below `depth -
/// 1`, is every suffix draft there); score states 1.0036 (19, against
/// unsplit runs' 64 with a first length of `K`). A run keeps its first
/// step's length to its end, so a state that splits runs by their first
/// draft drafts a long run at the length of its weak start. N-gram traces
/// (vLLM's rule, `K` 8 and 64): copy runs split by a short match 1.0031
/// (35); short-match step states 1.0118 (20), and 1.0244 (15) crossed
/// with the request's recent matched length (every request of the agent
/// file by then: 1.0104 (22) without it); with each request's previous
/// outcome too (with the outcomes as the output says them, every batch
/// kept full): 1.0295 (0) against 1.0279 (0). See
/// [`crate::step_states::DEFAULT_FACTOR`] and
/// [`crate::step_states::DEFAULT_NGRAM_FACTOR`].
///
/// ```
/// use specdec_sim::runs::{RunSignal, default_signal};
/// assert_eq!(default_signal(Some("vllm")), RunSignal::MatchSteps);
/// assert_eq!(default_signal(Some("suffix")), RunSignal::ScoreSteps);
/// ```
pub fn default_signal(rule: Option<&str>) -> RunSignal {
    match rule {
        Some("suffix") => RunSignal::ScoreSteps,
        _ => RunSignal::MatchSteps,
    }
}

/// The copy-run controllers' draft length before their first choice on
/// traces of the drafting rule `rule` (the trace's metadata; `None`:
/// n-gram), at `K = max_draft_len`: [`DEFAULT_FIRST_LEN`] on n-gram
/// traces, `K` on suffix-decoding ones, whose drafts stop on their own
/// where the drafter's estimated probability falls below `min_prob`.
///
/// Chosen on the tuning half of the held-out corpus's suffix traces (the
/// grid of [`default_signal`]; the mean of 72 cell medians): adaptive
/// 0.9968 from 4, 0.9975 from `K` (under 1.00 in 67 and 48 cells),
/// per-state 0.9952 and 0.9953.
///
/// ```
/// use specdec_sim::runs::{DEFAULT_FIRST_LEN, default_first_len};
/// assert_eq!(default_first_len(Some("vllm"), 64), DEFAULT_FIRST_LEN);
/// assert_eq!(default_first_len(Some("suffix"), 24), 24);
/// ```
pub fn default_first_len(rule: Option<&str>, max_draft_len: usize) -> usize {
    match rule {
        Some("suffix") => max_draft_len,
        _ => DEFAULT_FIRST_LEN,
    }
}

/// What the engine tells a policy of one traced request-step, drafted or
/// not (see [`Policy::after_position`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PositionOutcome {
    /// What the trace says of the position: the proposal length `L`, its
    /// match length `m` (known once the verify step's bonus token exists
    /// for the part this module uses: `m > a`), the matched `n`.
    pub position: Position,
    /// What the drafter proposes there at `K` (equal to `position` unless
    /// a suffix drafter drafts another draft at the drafted length): what
    /// a proposal tracker records.
    pub proposed: Position,
    /// The tokens drafted there (`min(k, L)`).
    pub drafted: usize,
    /// The tokens accepted (`min(drafted, m)`).
    pub accepted: usize,
    /// The requests of the step's batch (the step's cost is theirs).
    pub batch: usize,
    /// Whether the request generated its last token at this step.
    pub finished: bool,
}

/// The settings of a copy-run controller.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunSettings {
    /// `K`.
    pub max_draft_len: usize,
    /// The step cost.
    pub cost: CostLinear,
    /// One length per state ([`RUN_STATES`]) or one for all.
    pub per_state: bool,
    /// The drafter's longest `n`: a shorter match is a state.
    pub max_n: usize,
    /// What splits the per-state controller's runs first.
    pub signal: RunSignal,
    /// Observations between two choices.
    pub observations: u64,
    /// The weight the sums keep at each choice.
    pub keep: f64,
    /// The length before the first choice.
    pub first_len: usize,
    /// With `Some(t)`, per-state doubles its states by whether the
    /// request's previous run predicted more than `t` tokens.
    pub long_run: Option<usize>,
    /// Whether a run costs its request `1 / n` of each step it shares with
    /// `n - 1` others (else the whole step).
    pub share_batch: bool,
    /// The plan takes the longest length whose estimated cost is within
    /// this share of the least ([`RunCosts::within`]; [`default_within`]
    /// by the trace's drafting rule).
    pub within: f64,
}

impl RunSettings {
    /// The defaults, for `K` and a cost.
    pub fn new(max_draft_len: usize, cost: CostLinear, per_state: bool, max_n: usize) -> Self {
        Self {
            max_draft_len,
            cost,
            per_state,
            max_n,
            signal: RunSignal::ShortMatch,
            observations: DEFAULT_RUN_OBSERVATIONS,
            keep: DEFAULT_KEEP,
            first_len: DEFAULT_FIRST_LEN,
            share_batch: true,
            long_run: Some(DEFAULT_LONG_RUN),
            within: DEFAULT_WITHIN,
        }
    }
}

/// The summed cost at every `k`, per state, of the runs seen: the estimate
/// a copy-run controller chooses from.
#[derive(Clone, Debug, PartialEq)]
pub struct RunCosts {
    max_draft_len: usize,
    /// `states × (K + 1)`.
    cost: Vec<f64>,
    runs: Vec<f64>,
    within: f64,
}

impl RunCosts {
    /// Empty sums for `states` states at `K`.
    pub fn new(states: usize, max_draft_len: usize) -> Self {
        Self {
            max_draft_len,
            cost: vec![0.0; states * (max_draft_len + 1)],
            runs: vec![0.0; states],
            within: 0.0,
        }
    }

    /// The same, choosing the longest length whose cost is at most `1 +
    /// share` times the least (`0`, as [`RunCosts::new`]: the least, ties
    /// to the shorter).
    ///
    /// ```
    /// use specdec_sim::runs::RunCosts;
    /// use specdec_sim::summary::CostLinear;
    /// let cost = CostLinear { base: 1.0, per_token: 0.1 };
    /// let mut costs = RunCosts::new(1, 8);
    /// costs.add(0, 5, 8, [1.0, 1.0], cost); // a run of 5 tokens: k = 5 is least
    /// assert_eq!(costs.best(0), Some(5));
    /// assert_eq!(costs.within(0.25).best(0), Some(8));
    /// ```
    pub fn within(mut self, share: f64) -> Self {
        self.within = share;
        self
    }

    /// The cost of `steps(k)` steps of `base + per_token × min(k, L)` each
    /// for a run of `r` predicted tokens whose proposal was `proposal` long,
    /// weighted by `weight`, added to every `k` of `state`.
    pub fn add(
        &mut self,
        state: usize,
        r: usize,
        proposal: usize,
        weight: [f64; 2],
        cost: CostLinear,
    ) {
        let width = self.max_draft_len + 1;
        let row = &mut self.cost[state * width..(state + 1) * width];
        for (k, sum) in row.iter_mut().enumerate() {
            let d = k.min(proposal);
            let steps = r / (d + 1) + 1;
            *sum += steps as f64 * (weight[0] * cost.base + weight[1] * cost.per_token * d as f64);
        }
        self.runs[state] += weight[1];
    }

    /// The length of least cost for `state` (ties to the shorter; the
    /// longest within [`RunCosts::within`] of it), `None` when it has seen
    /// no run.
    pub fn best(&self, state: usize) -> Option<usize> {
        let width = self.max_draft_len + 1;
        if self.runs[state] <= 0.0 {
            return None;
        }
        least(&self.cost[state * width..(state + 1) * width], self.within)
    }

    /// The length of least cost over every state together.
    pub fn best_overall(&self) -> Option<usize> {
        let width = self.max_draft_len + 1;
        if self.runs.iter().sum::<f64>() <= 0.0 {
            return None;
        }
        let total: Vec<f64> = (0..width)
            .map(|k| self.cost.chunks(width).map(|row| row[k]).sum())
            .collect();
        least(&total, self.within)
    }

    /// Multiplies every sum by `keep`.
    pub fn decay(&mut self, keep: f64) {
        self.cost.iter_mut().for_each(|c| *c *= keep);
        self.runs.iter_mut().for_each(|c| *c *= keep);
    }
}

fn argmin(row: &[f64]) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (k, &c) in row.iter().enumerate() {
        if best.is_none_or(|(_, b)| c < b) {
            best = Some((k, c));
        }
    }
    best.map(|(k, _)| k)
}

/// The longest `k` whose cost is at most `1 + within` times the least
/// (the least itself, ties to the shorter, when `within` is 0).
fn least(row: &[f64], within: f64) -> Option<usize> {
    let k = argmin(row)?;
    if within <= 0.0 {
        return Some(k);
    }
    let bound = row[k] * (1.0 + within);
    row.iter().rposition(|&c| c <= bound)
}

// The request memory of a copy-run controller: the open run's predicted
// tokens so far, its state + 1 (0: no open run), its proposal length, its
// weight, and whether the previous step had nothing to propose.
const RUN_R: usize = 0;
const RUN_STATE: usize = 1;
const RUN_PROPOSAL: usize = 2;
const RUN_WEIGHT: usize = 3;
const RUN_AFTER_NO_MATCH: usize = 4;
const RUN_LAST: usize = 5;

/// A copy-run controller (`adaptive` or `per-state` on a lookup trace):
/// see the module docs.
#[derive(Clone, Debug)]
pub struct CopyRuns {
    settings: RunSettings,
    costs: RunCosts,
    plan: Vec<usize>,
    seen: u64,
    choices: u64,
    last: usize,
}

impl CopyRuns {
    /// A controller of `settings`, drafting `first_len` until its first
    /// choice.
    pub fn new(settings: RunSettings) -> Self {
        let states = match (settings.per_state, settings.long_run) {
            (false, _) => 1,
            (true, None) => RUN_STATES,
            (true, Some(_)) => 2 * RUN_STATES,
        };
        let first = settings.first_len.min(settings.max_draft_len);
        Self {
            costs: RunCosts::new(states, settings.max_draft_len).within(settings.within),
            plan: vec![first; states],
            seen: 0,
            choices: 0,
            last: first,
            settings,
        }
    }

    /// The length per state (one for the batch-level controller).
    pub fn plan(&self) -> &[usize] {
        &self.plan
    }

    /// How many times the plan was chosen.
    pub fn choices(&self) -> u64 {
        self.choices
    }

    /// The state of a run starting at a step where the drafter proposes
    /// `position` after a step with no proposal (`after_no_match`).
    fn state_with(&self, position: Option<Position>, after_no_match: bool, last_run: f64) -> usize {
        if !self.settings.per_state {
            return 0;
        }
        let short = position.is_some_and(|p| self.settings.signal.split(p, self.settings.max_n));
        // `last_run` is one more than the predicted tokens (0: no run yet).
        let long = self
            .settings
            .long_run
            .is_some_and(|t| last_run > (t + 1) as f64);
        usize::from(short) + 2 * usize::from(after_no_match) + 4 * usize::from(long)
    }

    fn choose(&mut self) {
        self.choices += 1;
        let overall = self.costs.best_overall();
        for s in 0..self.plan.len() {
            if let Some(k) = self.costs.best(s).or(overall) {
                self.plan[s] = k;
            }
        }
        self.costs.decay(self.settings.keep);
    }

    fn len_for(&self, view: &RequestView) -> usize {
        let m = &view.memory;
        let state = if m[RUN_STATE] > 0.0 {
            m[RUN_STATE] as usize - 1
        } else {
            self.state_with(view.position, m[RUN_AFTER_NO_MATCH] > 0.0, m[RUN_LAST])
        };
        self.plan[state.min(self.plan.len() - 1)]
    }
}

impl Policy for CopyRuns {
    fn budget(&mut self, _step: u64) -> usize {
        self.plan[0]
    }

    fn draft_lens(&mut self, _step: u64, requests: &[RequestView], lens: &mut [usize]) {
        for (len, view) in lens.iter_mut().zip(requests) {
            *len = self.len_for(view);
        }
    }

    fn after_position(&mut self, memory: &mut RequestMemory, outcome: PositionOutcome) {
        let p = outcome.position;
        let (l, m, a) = (
            usize::from(p.proposal),
            usize::from(p.matched),
            outcome.accepted,
        );
        if memory[RUN_STATE] == 0.0 && l > 0 {
            // A run starts here.
            let state =
                self.state_with(Some(p), memory[RUN_AFTER_NO_MATCH] > 0.0, memory[RUN_LAST]);
            memory[RUN_STATE] = (state + 1) as f64;
            memory[RUN_R] = 0.0;
            memory[RUN_PROPOSAL] = l as f64;
            // The step's cost is shared by its batch (the engine model's
            // `base + per_token × mean d`).
            memory[RUN_WEIGHT] = if self.settings.share_batch {
                1.0 / outcome.batch.max(1) as f64
            } else {
                1.0
            };
        }
        if memory[RUN_STATE] > 0.0 {
            let continues = (m > a || (l > 0 && a == l)) && !outcome.finished;
            if continues {
                memory[RUN_R] += (a + 1) as f64;
            } else {
                let r = memory[RUN_R] as usize + a;
                let state = memory[RUN_STATE] as usize - 1;
                let w = memory[RUN_WEIGHT];
                self.costs.add(
                    state,
                    r,
                    memory[RUN_PROPOSAL] as usize,
                    [w, w],
                    self.settings.cost,
                );
                memory[RUN_STATE] = 0.0;
                // One more than the run's predicted tokens (0: none yet).
                memory[RUN_LAST] = (r + 1) as f64;
            }
        }
        memory[RUN_AFTER_NO_MATCH] = if l == 0 { 1.0 } else { 0.0 };
        self.seen += 1;
        if self.seen >= self.settings.observations {
            self.seen = 0;
            self.choose();
        }
    }

    fn after_step(&mut self, budget: usize, _outcomes: &[(usize, usize)]) {
        self.last = budget;
    }

    fn chosen(&self) -> usize {
        if self.settings.per_state {
            self.last
        } else {
            self.plan[0]
        }
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
        per_token: 0.1,
    };

    fn settings(per_state: bool, observations: u64) -> RunSettings {
        RunSettings {
            observations,
            keep: 1.0,
            share_batch: false,
            long_run: None,
            ..RunSettings::new(8, COST, per_state, 5)
        }
    }

    fn outcome(proposal: u8, matched: u8, drafted: usize, ngram: u8) -> PositionOutcome {
        let position = Position {
            proposal,
            matched,
            ngram,
            score: 0,
            oracle: matched,
        };
        PositionOutcome {
            position,
            proposed: position,
            drafted,
            accepted: drafted.min(usize::from(matched)),
            batch: 1,
            finished: false,
        }
    }

    /// The cost of one run of `r` predicted tokens at `k` (proposal `l`).
    fn run_cost(r: usize, l: usize, k: usize) -> f64 {
        let d = k.min(l);
        (r / (d + 1) + 1) as f64 * (COST.base + COST.per_token * d as f64)
    }

    #[test]
    fn a_run_costs_its_steps_at_every_length() {
        let mut costs = RunCosts::new(1, 8);
        costs.add(0, 10, 8, [1.0, 1.0], COST);
        // k = 0: 11 steps of 1; k = 4: 3 steps of 1.4; k = 8: 2 of 1.8.
        let row: Vec<f64> = (0..=8).map(|k| costs.cost[k]).collect();
        assert!((row[0] - 11.0).abs() < 1e-12);
        assert!((row[4] - 3.0 * 1.4).abs() < 1e-12);
        assert!((row[8] - 2.0 * 1.8).abs() < 1e-12);
        // A proposal of 3 caps every longer draft at 3.
        let mut capped = RunCosts::new(1, 8);
        capped.add(0, 10, 3, [1.0, 1.0], COST);
        assert_eq!(capped.cost[8], capped.cost[3]);
        assert!((capped.cost[3] - 3.0 * 1.3).abs() < 1e-12);
        // The base and the per-token cost are weighted apart.
        let mut weighted = RunCosts::new(1, 8);
        weighted.add(0, 10, 8, [1.0, 0.5], COST);
        assert!((weighted.cost[4] - 3.0 * 1.2).abs() < 1e-12);
    }

    #[test]
    fn the_best_length_is_searched_over_every_length() {
        // Runs that end at once: drafting only costs.
        let mut none = RunCosts::new(1, 8);
        assert_eq!(none.best(0), None, "no run seen");
        none.add(0, 0, 8, [1.0, 1.0], COST);
        assert_eq!(none.best(0), Some(0));
        // Long runs: the longest draft.
        let mut long = RunCosts::new(1, 8);
        long.add(0, 500, 8, [1.0, 1.0], COST);
        assert_eq!(long.best(0), Some(8));
        // Runs of exactly 3 and of 0 tokens: k = 3 takes a run in one
        // step, k = 2 in two; no local search from k = 0 or 8 would stop
        // there if the curve dips between.
        let mut mixed = RunCosts::new(1, 8);
        for _ in 0..10 {
            mixed.add(0, 3, 8, [1.0, 1.0], COST);
        }
        mixed.add(0, 0, 8, [1.0, 1.0], COST);
        let best = mixed.best(0).unwrap();
        let costs: Vec<f64> = (0..=8)
            .map(|k| 10.0 * run_cost(3, 8, k) + run_cost(0, 8, k))
            .collect();
        let want = (0..=8)
            .min_by(|&a, &b| costs[a].partial_cmp(&costs[b]).unwrap())
            .unwrap();
        assert_eq!(best, want);
        assert_eq!(best, 3);
    }

    #[test]
    fn the_base_cost_is_weighted_too() {
        let two = CostLinear {
            base: 2.0,
            per_token: 0.1,
        };
        let mut costs = RunCosts::new(1, 8);
        costs.add(0, 10, 8, [0.5, 1.0], two);
        // k = 4: 3 steps of 0.5 × 2 + 0.4.
        assert!((costs.cost[4] - 3.0 * 1.4).abs() < 1e-12);
    }

    #[test]
    fn the_overall_best_sums_the_states() {
        let mut costs = RunCosts::new(2, 8);
        // State 0 alone would draft 0, state 1 alone 8; together the long
        // runs weigh more.
        costs.add(0, 0, 8, [1.0, 1.0], COST);
        for _ in 0..3 {
            costs.add(1, 40, 8, [1.0, 1.0], COST);
        }
        assert_eq!((costs.best(0), costs.best(1)), (Some(0), Some(8)));
        assert_eq!(costs.best_overall(), Some(8));
        let mut short = RunCosts::new(2, 8);
        for _ in 0..30 {
            short.add(0, 0, 8, [1.0, 1.0], COST);
        }
        short.add(1, 3, 8, [1.0, 1.0], COST);
        assert_eq!(short.best(1), Some(3));
        assert_eq!(short.best_overall(), Some(0));
        assert_eq!(RunCosts::new(2, 8).best_overall(), None);
    }

    #[test]
    fn decay_weighs_older_runs_less() {
        let mut costs = RunCosts::new(1, 8);
        costs.add(0, 40, 8, [1.0, 1.0], COST);
        let before = costs.cost.clone();
        costs.decay(0.25);
        for (a, b) in costs.cost.iter().zip(&before) {
            assert!((a - 0.25 * b).abs() < 1e-12);
        }
        assert!((costs.runs[0] - 0.25).abs() < 1e-12);
        // Forgotten: one run that ends at once decides.
        costs.decay(0.0);
        costs.add(0, 0, 8, [1.0, 1.0], COST);
        assert_eq!(costs.best(0), Some(0));
    }

    #[test]
    fn ties_go_to_the_shorter_length() {
        assert_eq!(argmin(&[2.0, 1.0, 1.0, 3.0]), Some(1));
        assert_eq!(argmin(&[]), None);
        assert_eq!(least(&[2.0, 1.0, 1.0, 3.0], 0.0), Some(1));
    }

    #[test]
    fn the_longest_length_within_the_share_of_the_least_is_chosen() {
        // The least at 1, 2 within 0.5%, 3 just past it, 4 within again.
        let row = [2.0, 1.0, 1.004, 1.0051, 1.005, 1.2];
        assert_eq!(least(&row, 0.005), Some(4));
        assert_eq!(least(&row[..4], 0.005), Some(2));
        assert_eq!(least(&row[..4], 0.0051), Some(3));
        assert_eq!(least(&[], 0.005), None);
        // What a copy-run controller chooses with it: a run of 5 tokens
        // (proposal 8) costs least at 5; 6 to 8 cost one step more each.
        let cost = CostLinear {
            base: 1.0,
            per_token: 0.001,
        };
        let mut costs = RunCosts::new(1, 8);
        costs.add(0, 5, 8, [1.0, 1.0], cost);
        assert_eq!(costs.best(0), Some(5));
        assert_eq!(costs.clone().within(0.004).best(0), Some(8));
        assert_eq!(costs.within(0.0005).best(0), Some(5));
        assert_eq!(RunSettings::new(8, cost, false, 5).within, DEFAULT_WITHIN);
    }

    #[test]
    fn the_share_is_the_traces_rules() {
        assert_eq!(default_within(None), DEFAULT_WITHIN);
        assert_eq!(default_within(Some("vllm")), DEFAULT_WITHIN);
        assert_eq!(default_within(Some("suffix")), DEFAULT_SUFFIX_WITHIN);
    }

    #[test]
    fn a_request_drafts_its_states_length() {
        let mut c = CopyRuns::new(RunSettings {
            long_run: Some(1),
            ..settings(true, 1000)
        });
        c.plan = (10..18).collect();
        assert_eq!(c.budget(0), 10);
        let view = |memory: RequestMemory, ngram: u8| RequestView {
            state: specdec_metrics::RequestState::new(),
            memory,
            position: Some(outcome(8, 0, 0, ngram).position),
            state_index: 0,
            left: 10,
        };
        let mut after = RequestMemory::default();
        after[RUN_AFTER_NO_MATCH] = 1.0;
        let mut long = RequestMemory::default();
        long[RUN_LAST] = 5.0;
        let mut open = RequestMemory::default();
        open[RUN_STATE] = 7.0; // state 6, whatever the position says
        let views = [
            view(RequestMemory::default(), 5),
            view(RequestMemory::default(), 2),
            view(RequestMemory::default(), 0),
            view(after, 5),
            view(long, 2),
            view(open, 2),
        ];
        let mut lens = [0; 6];
        c.draft_lens(0, &views, &mut lens);
        assert_eq!(lens, [10, 11, 10, 12, 15, 16]);
    }

    #[test]
    fn a_run_weighs_its_share_of_the_batch() {
        let mut c = CopyRuns::new(RunSettings {
            share_batch: true,
            ..settings(false, 1000)
        });
        let mut memory = RequestMemory::default();
        let mut o = outcome(8, 0, 4, 5);
        o.batch = 4;
        c.after_position(&mut memory, o);
        assert!((c.costs.cost[4] - 0.25 * run_cost(0, 8, 4)).abs() < 1e-12);
    }

    #[test]
    fn a_chain_of_steps_is_one_run_until_the_copy_stops() {
        let mut c = CopyRuns::new(settings(false, 1000));
        let mut memory = RequestMemory::default();
        // k = 4: accepts 4 and the bonus token continues the copy (m > a),
        // twice; then 2 of 4 accepted: the run ends at 5 + 5 + 2 = 12.
        c.after_position(&mut memory, outcome(8, 20, 4, 5));
        c.after_position(&mut memory, outcome(8, 15, 4, 5));
        assert_eq!(memory[RUN_STATE], 1.0, "the run is open");
        assert_eq!(memory[RUN_R], 10.0);
        c.after_position(&mut memory, outcome(8, 2, 4, 5));
        assert_eq!(memory[RUN_STATE], 0.0, "closed");
        for k in 0..=8 {
            assert!(
                (c.costs.cost[k] - run_cost(12, 8, k)).abs() < 1e-12,
                "k = {k}"
            );
        }
        // Accepting all of a draft whose bonus token is not the proposal's
        // next token ends the run (m = a = d < L).
        c.after_position(&mut memory, outcome(8, 4, 4, 5));
        assert_eq!(memory[RUN_STATE], 0.0);
        // A whole proposal accepted goes on (nothing to compare the bonus
        // token with): m = a = d = L.
        c.after_position(&mut memory, outcome(3, 3, 4, 5));
        assert_eq!(memory[RUN_STATE], 1.0);
        // A step with nothing to propose ends an open run ...
        c.after_position(&mut memory, outcome(0, 0, 0, 0));
        assert_eq!(memory[RUN_STATE], 0.0);
        // ... and is no run of its own.
        let mut fresh = RequestMemory::default();
        c.after_position(&mut fresh, outcome(0, 0, 0, 0));
        assert_eq!(fresh[RUN_STATE], 0.0);
        assert_eq!(fresh[RUN_AFTER_NO_MATCH], 1.0);
    }

    #[test]
    fn a_run_ends_with_its_request() {
        let mut c = CopyRuns::new(settings(false, 1000));
        let mut memory = RequestMemory::default();
        let mut last = outcome(8, 20, 4, 5);
        last.finished = true;
        c.after_position(&mut memory, last);
        assert_eq!(memory[RUN_STATE], 0.0);
        assert!((c.costs.cost[0] - run_cost(4, 8, 0)).abs() < 1e-12);
    }

    #[test]
    fn undrafted_steps_still_see_the_copy() {
        // k = 0 drafts nothing; the one token generated matches the
        // proposal (m >= 1): the run goes on, and ends where m = 0.
        let mut c = CopyRuns::new(settings(false, 1000));
        let mut memory = RequestMemory::default();
        for m in [3, 2, 1] {
            c.after_position(&mut memory, outcome(8, m, 0, 5));
        }
        c.after_position(&mut memory, outcome(8, 0, 0, 5));
        assert!((c.costs.cost[8] - run_cost(3, 8, 8)).abs() < 1e-12);
    }

    #[test]
    fn the_plan_is_chosen_every_n_observations_from_what_was_seen() {
        let mut c = CopyRuns::new(settings(false, 4));
        assert_eq!(c.plan(), &[DEFAULT_FIRST_LEN]);
        let mut memory = RequestMemory::default();
        // Long copies: each step accepts its 4 and goes on, then one ends.
        for _ in 0..3 {
            c.after_position(&mut memory, outcome(8, 8, 4, 5));
        }
        assert_eq!(c.choices(), 0);
        c.after_position(&mut memory, outcome(8, 0, 4, 5));
        assert_eq!(c.choices(), 1);
        // One run of 15 tokens: k = 8 takes 2 steps of 1.8 (3.6), k = 7
        // 2 of 1.7 (3.4), k = 4 3 of 1.4 (4.2): k = 7.
        assert_eq!(c.plan(), &[7]);
        let mut lens = [0; 1];
        let view = RequestView {
            state: specdec_metrics::RequestState::new(),
            memory,
            position: None,
            state_index: 0,
            left: 10,
        };
        c.draft_lens(0, &[view], &mut lens);
        assert_eq!(lens, [7]);
        assert_eq!(c.chosen(), 7);
    }

    #[test]
    fn the_previous_run_is_a_state_of_its_own() {
        let mut c = CopyRuns::new(RunSettings {
            long_run: Some(1),
            ..settings(true, 1000)
        });
        assert_eq!(c.plan().len(), 8);
        let p = Some(outcome(8, 0, 0, 5).position);
        // One more than the predicted tokens: 2 is a run of 1, 3 of 2.
        assert_eq!(c.state_with(p, false, 0.0), 0);
        assert_eq!(c.state_with(p, false, 2.0), 0);
        assert_eq!(c.state_with(p, false, 3.0), 4);
        assert_eq!(c.state_with(p, true, 3.0), 6);
        // A run of 5 then: the next run starts in a "long" state.
        let mut memory = RequestMemory::default();
        c.after_position(&mut memory, outcome(8, 8, 4, 5));
        c.after_position(&mut memory, outcome(8, 0, 4, 5));
        assert_eq!(memory[RUN_LAST], 6.0);
        c.after_position(&mut memory, outcome(8, 8, 4, 5));
        assert_eq!(memory[RUN_STATE], 5.0, "state 4, stored plus one");
    }

    #[test]
    fn run_signals_read_as_documented() {
        assert_eq!(RunSignal::parse("short-match"), Ok(RunSignal::ShortMatch));
        assert_eq!(RunSignal::parse("none"), Ok(RunSignal::Unsplit));
        assert_eq!(
            RunSignal::parse("match-below=2"),
            Ok(RunSignal::MatchBelow(2))
        );
        assert_eq!(
            RunSignal::parse("match-below=255"),
            Ok(RunSignal::MatchBelow(255))
        );
        // Sixteenths of a token, from one to 255 of them, whole.
        assert_eq!(
            RunSignal::parse("score-below=0.0625"),
            Ok(RunSignal::ScoreBelow(1))
        );
        assert_eq!(
            RunSignal::parse("score-below=2"),
            Ok(RunSignal::ScoreBelow(32))
        );
        assert_eq!(
            RunSignal::parse("score-below=15.9375"),
            Ok(RunSignal::ScoreBelow(255))
        );
        for bad in [
            "match-below=1",
            "match-below=256",
            "match-below=x",
            "score-below=0",
            "score-below=16",
            "score-below=0.1",
            "score-below=NaN",
            "score-below=",
            "short",
            "",
        ] {
            assert!(RunSignal::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(default_signal(Some("suffix")), RunSignal::ScoreSteps);
        assert_eq!(default_signal(None), RunSignal::MatchSteps);
        assert_eq!(RunSignal::parse("score-steps"), Ok(RunSignal::ScoreSteps));
        assert_eq!(RunSignal::parse("match-steps"), Ok(RunSignal::MatchSteps));
        assert_eq!(
            RunSignal::parse("recent-match-steps"),
            Ok(RunSignal::RecentMatchSteps)
        );
        assert_eq!(
            RunSignal::parse("short-match-steps"),
            Ok(RunSignal::ShortMatchSteps)
        );
    }

    #[test]
    fn a_match_signal_splits_runs_by_the_match_length() {
        let below = CopyRuns::new(RunSettings {
            signal: RunSignal::MatchBelow(4),
            ..settings(true, 1000)
        });
        let at = |ngram| Some(outcome(8, 0, 0, ngram).position);
        assert_eq!(below.state_with(at(3), false, 0.0), 1);
        assert_eq!(below.state_with(at(1), false, 0.0), 1);
        assert_eq!(below.state_with(at(4), false, 0.0), 0);
        // No match known: not below.
        assert_eq!(below.state_with(at(0), false, 0.0), 0);
    }

    #[test]
    fn a_score_signal_splits_runs_by_the_drafts_score() {
        let scored = |proposal: u8, ngram: u8, score: u8| {
            let mut p = outcome(proposal, 0, 0, ngram).position;
            p.score = score;
            Some(p)
        };
        let below = CopyRuns::new(RunSettings {
            signal: RunSignal::ScoreBelow(16),
            ..settings(true, 1000)
        });
        // Below one token (16 sixteenths) is the second half, whatever
        // the match; a position without a draft never is.
        assert_eq!(below.state_with(scored(8, 5, 15), false, 0.0), 1);
        assert_eq!(below.state_with(scored(8, 2, 16), false, 0.0), 0);
        assert_eq!(below.state_with(scored(0, 0, 0), false, 0.0), 0);
        assert_eq!(below.state_with(scored(8, 5, 0), true, 0.0), 3);
        let unsplit = CopyRuns::new(RunSettings {
            signal: RunSignal::Unsplit,
            ..settings(true, 1000)
        });
        assert_eq!(unsplit.state_with(scored(8, 2, 0), false, 0.0), 0);
        assert_eq!(unsplit.state_with(scored(8, 2, 0), true, 0.0), 2);
        // The default reads the match, not the score.
        let short = CopyRuns::new(settings(true, 1000));
        assert_eq!(short.state_with(scored(8, 5, 0), false, 0.0), 0);
        assert_eq!(short.state_with(scored(8, 2, 99), false, 0.0), 1);
    }

    #[test]
    fn per_state_runs_keep_the_length_of_their_first_steps_state() {
        let mut c = CopyRuns::new(settings(true, 1000));
        // States: short match (n < 5) and after a step with no proposal.
        assert_eq!(
            c.state_with(Some(outcome(8, 0, 0, 5).position), false, 0.0),
            0
        );
        assert_eq!(
            c.state_with(Some(outcome(8, 0, 0, 2).position), false, 0.0),
            1
        );
        assert_eq!(
            c.state_with(Some(outcome(8, 0, 0, 5).position), true, 0.0),
            2
        );
        assert_eq!(
            c.state_with(Some(outcome(8, 0, 0, 2).position), true, 0.0),
            3
        );
        // Long runs after a no-match, none elsewhere: only state 2 and 3
        // learn to draft long; states never seen take the overall best.
        let mut memory = RequestMemory::default();
        for _ in 0..20 {
            c.after_position(&mut memory, outcome(0, 0, 0, 0));
            c.after_position(&mut memory, outcome(8, 8, 4, 5));
            c.after_position(&mut memory, outcome(8, 0, 4, 5));
        }
        let mut other = RequestMemory::default();
        for _ in 0..20 {
            c.after_position(&mut other, outcome(8, 0, 1, 2));
        }
        c.choose();
        assert_eq!(
            c.plan()[2],
            5,
            "runs of 5 predicted tokens: one step at k = 5"
        );
        assert_eq!(c.plan()[1], 0, "runs of nothing: k = 0");
        assert_eq!(c.plan()[0], c.costs.best_overall().unwrap());
        // An open run drafts its first state's length.
        let mut open = RequestMemory::default();
        open[RUN_AFTER_NO_MATCH] = 1.0;
        c.after_position(&mut open, outcome(8, 8, 4, 2));
        let view = RequestView {
            state: specdec_metrics::RequestState::new(),
            memory: open,
            position: Some(outcome(8, 0, 0, 2).position),
            state_index: 0,
            left: 10,
        };
        let mut lens = [9; 1];
        c.draft_lens(0, &[view], &mut lens);
        assert_eq!(lens, [c.plan()[3]]);
    }
}
