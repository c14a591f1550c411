//! The draft-length rules of other engines, reimplemented as [`Policy`]
//! values so the demo can run them side by side with its own controllers on
//! the same workload and seed.
//!
//! Batch-level rules (one length for every request of a step):
//!
//! - [`Sglang`]: SGLang's adaptive speculative decoding (pull requests
//!   #21599 and #23336): one exponential moving average of the accepted
//!   drafts per request, switched between a few pre-built tiers with
//!   hysteresis.
//! - [`Vllm44336`]: the "Adaptive K*" rule of vLLM pull request #44336
//!   (closed): a moving average of the acceptance at each draft position, a
//!   goodput model, epsilon-greedy probes, a cooldown after large moves.
//!
//! Per-request rules (a length for each request of a step):
//!
//! - [`SmartSpec`]: a SmartSpec-style rule (arXiv 2406.14066): a per-request
//!   acceptance estimate, and the lengths that maximise the step's
//!   estimated goodput.
//! - [`VllmAdaptiveVerification`]: vLLM's adaptive verification (#47808,
//!   #52228): per-request, per-position acceptance probabilities from an
//!   online-fitted estimator, their running products (survival), and the
//!   batch's best slots under a goodput-optimal token budget.
//!
//! All learn only from the outcomes of their own steps
//! ([`Policy::after_request`], [`Policy::after_step`]), as they do in their
//! engines; what they keep per request lives in the request's
//! [`RequestMemory`]. None touches the metrics recorder. Their vectors are
//! allocated in `new` (the per-request rules' for a full batch of `K`
//! slots per request): a step allocates nothing.
//!
//! The rules are written from the engines' sources or the papers'
//! descriptions (cited on each type), not translated line by line; every
//! place where the engines' setting and this demo's differ, and every
//! detail the sources leave open, is documented where it is decided.

use crate::policy::{Policy, RequestMemory, RequestView};
use crate::rng::Rng;

/// SGLang's default tiers (`candidate_steps`): the draft lengths it keeps a
/// pre-captured CUDA graph for.
const SGLANG_CANDIDATE_STEPS: [usize; 3] = [1, 3, 7];
/// Weight of the newest batch in SGLang's moving average (`ema_alpha`).
const SGLANG_EMA_ALPHA: f64 = 0.2;
/// Batches SGLang observes before its first decision (`warmup_batches`).
const SGLANG_WARMUP_BATCHES: u64 = 10;
/// Batches between two decisions after the warmup (`update_interval`).
const SGLANG_UPDATE_INTERVAL: u64 = 5;
/// Added to the step-down threshold (`down_hysteresis`): stepping down needs
/// the average a quarter token below the midpoint.
const SGLANG_DOWN_HYSTERESIS: f64 = -0.25;
/// Added to the step-up threshold (`up_hysteresis`).
const SGLANG_UP_HYSTERESIS: f64 = 0.0;

/// SGLang's adaptive speculative decoding: tiers chosen from a moving average
/// of the accepted drafts.
///
/// Source: `python/sglang/srt/speculative/adaptive_spec_params.py`, class
/// `AdaptiveSpeculativeParams` (`__init__`, `update`, `_recompute_params`)
/// in the version with one global tier set `[1, 3, 7]` (before the
/// per-batch-size slots of #24055), and
/// `docs/advanced_features/adaptive_speculative_decoding.md`. The rule:
///
/// - after every verify batch, the mean over the batch's requests of the
///   drafts accepted (the bonus token not counted) enters a moving average:
///   `ema = 0.8 ema + 0.2 mean`, seeded at `steps - 1` for the initial
///   `steps`. A batch without requests is ignored (not counted);
/// - no decision during the first 10 batches, then one decision at every
///   5th batch (batches 15, 20, 25, ...);
/// - a decision first steps down, tier by tier, while
///   `ema <= lower_tier - 0.5 - 0.25`, then (if it did not step down) up,
///   tier by tier, while `ema > current_tier - 0.5`; it may cross several
///   tiers at once. The new tier applies from the next step.
///
/// Fitting the tiers to this engine's `K`: SGLang's draft length has no
/// maximum other than its largest tier, and it adds the operator's
/// configured `--speculative-num-steps` to the tiers and starts there. Here
/// the engine is configured with `K`, which is also the most it can draft:
/// tiers above `K` are dropped, `K` itself joins the tiers, and the rule
/// starts at `K`. So `K = 7` gives `[1, 3, 7]`, `K = 5` gives `[1, 3, 5]`,
/// `K = 2` gives `[1, 2]`, `K = 10` gives `[1, 3, 7, 10]`. With `K = 1` (or
/// 0) there is one tier and the rule never switches (SGLang refuses fewer
/// than two tiers).
///
/// Requests whose draft a grammar cut short still count with the drafts
/// they had accepted (SGLang averages over every request of the batch).
/// [`budget`](Policy::budget) is always the current tier: SGLang does not
/// probe.
pub struct Sglang {
    /// Ascending, distinct, at most `K`.
    tiers: Vec<usize>,
    /// Index of the current tier in `tiers`.
    current: usize,
    /// Moving average of the accepted drafts per request.
    ema: f64,
    /// Batches seen (batches with at least one request).
    batches: u64,
    ema_alpha: f64,
    warmup_batches: u64,
    update_interval: u64,
}

impl Sglang {
    /// SGLang's rule with its default parameters for an engine drafting at
    /// most `max_draft_len` tokens per request.
    pub fn new(max_draft_len: usize) -> Self {
        Self::with_schedule(
            max_draft_len,
            SGLANG_EMA_ALPHA,
            SGLANG_WARMUP_BATCHES,
            SGLANG_UPDATE_INTERVAL,
        )
    }

    /// The rule with another averaging weight and decision schedule (the
    /// `ema_alpha`, `warmup_batches` and `update_interval` keys of SGLang's
    /// configuration); the hysteresis stays SGLang's.
    ///
    /// # Panics
    ///
    /// If `update_interval` is 0.
    pub fn with_schedule(
        max_draft_len: usize,
        ema_alpha: f64,
        warmup_batches: u64,
        update_interval: u64,
    ) -> Self {
        assert!(update_interval > 0, "update_interval must be at least 1");
        let mut tiers = Vec::with_capacity(SGLANG_CANDIDATE_STEPS.len() + 1);
        tiers.extend(
            SGLANG_CANDIDATE_STEPS
                .iter()
                .copied()
                .filter(|&t| t < max_draft_len),
        );
        tiers.push(max_draft_len);
        Self {
            current: tiers.len() - 1,
            tiers,
            ema: max_draft_len as f64 - 1.0,
            batches: 0,
            ema_alpha,
            warmup_batches,
            update_interval,
        }
    }

    /// One decision: step down while the average is low enough for the
    /// tier below, otherwise step up while it is high enough for the tier
    /// above.
    fn decide(&mut self) {
        let mut i = self.current;
        while i > 0 {
            let lower = self.tiers[i - 1] as f64;
            if self.ema <= lower - 0.5 + SGLANG_DOWN_HYSTERESIS {
                i -= 1;
            } else {
                break;
            }
        }
        if i == self.current {
            while i + 1 < self.tiers.len() {
                let here = self.tiers[i] as f64;
                if self.ema > here - 0.5 + SGLANG_UP_HYSTERESIS {
                    i += 1;
                } else {
                    break;
                }
            }
        }
        self.current = i;
    }
}

/// What the rule holds, for tests that follow it step by step.
impl Sglang {
    /// The tiers, ascending.
    pub fn tiers(&self) -> &[usize] {
        &self.tiers
    }

    /// The moving average of the accepted drafts per request.
    pub fn ema(&self) -> f64 {
        self.ema
    }
}

impl Policy for Sglang {
    fn budget(&mut self, _step: u64) -> usize {
        self.tiers[self.current]
    }

    fn after_step(&mut self, _budget: usize, outcomes: &[(usize, usize)]) {
        if outcomes.is_empty() {
            return;
        }
        let accepted: usize = outcomes.iter().map(|&(_, a)| a).sum();
        let mean = accepted as f64 / outcomes.len() as f64;
        self.ema = (1.0 - self.ema_alpha) * self.ema + self.ema_alpha * mean;
        self.batches += 1;
        if self.batches > self.warmup_batches
            && (self.batches - self.warmup_batches) % self.update_interval == 0
        {
            self.decide();
        }
    }

    fn chosen(&self) -> usize {
        self.tiers[self.current]
    }
}

/// Weight of the newest window in the per-position averages
/// (`adaptive_k_ema_alpha`).
const VLLM_EMA_WEIGHT: f64 = 0.3;
/// Acceptance assumed at a position before it has data
/// (`adaptive_k_alpha_prior`).
const VLLM_ALPHA_PRIOR: f64 = 0.85;
/// Verified drafts (requests with a draft) pooled before the averages
/// move.
const VLLM_WINDOW: u64 = 10;
/// Decisions skipped after a move of more than one
/// (`adaptive_k_cooldown_steps`).
const VLLM_COOLDOWN_STEPS: u32 = 2;
/// Share of steps that draft the full `K` whatever the choice.
const VLLM_EPSILON: f64 = 0.1;
/// The per-position averages are clamped to this range in the goodput.
const VLLM_ALPHA_MIN: f64 = 0.001;
const VLLM_ALPHA_MAX: f64 = 0.999;

/// vLLM pull request #44336, "Adaptive K*": the draft length that maximises
/// a goodput model fed by per-position acceptance averages, with
/// epsilon-greedy probes.
///
/// Sources. The pull request's description (closed, not merged): goodput
/// `E_acc(K) / (1 + K c_draft + verify_overhead)`, `E_acc(K) = 1 + sum over
/// i <= K of prod over j <= i of alpha_j`, per-position conditional
/// acceptance averages (weight 0.3), 10% epsilon-greedy against the
/// "untracked-position trap", windows of 10, cooldown and `|dK| > 1`
/// hysteresis, `K = 0` when goodput falls below 1. Its branch was not
/// found. The code of the same author's follow-up (#47111, same rule
/// without the epsilon-greedy) was: `vllm/v1/core/sched/scheduler.py`,
/// `Scheduler._compute_adaptive_k` and the per-position counting in
/// `Scheduler.update_from_output`, with the defaults of the `adaptive_k_*`
/// fields of `vllm/config/speculative.py` (weight 0.3, prior 0.85,
/// cooldown 2, minimum 0). Every detail below follows that code unless
/// marked as decided here.
///
/// - **Counting.** For each request that drafted `d > 0` tokens and had `a`
///   accepted, positions `1..=min(d, a + 1)` were reached; positions
///   `1..=a` were accepted. A fully accepted draft reaches no position
///   beyond `d` (no failure is counted above it). Requests without a draft
///   are not counted.
/// - **Averages.** Once at least 10 counted requests have accumulated (a
///   check at the end of each step, so a window is 10 or more requests; the
///   description says "10 steps", the code counts requests), each position
///   reached in the window moves its average toward the window's rate,
///   `alpha_j += 0.3 (reached_and_accepted_j / reached_j - alpha_j)`;
///   positions not reached keep their average; the counts restart. The
///   averages start at the prior 0.85, so a position never reached keeps
///   0.85.
/// - **Decision** (before each step). Until the first window closes, `K`.
///   During a cooldown, the previous choice (the cooldown counts down).
///   Otherwise the `k` in `1..=K` with the largest goodput, the averages
///   clamped to `[0.001, 0.999]`, ties to the larger `k`, provided it is at
///   least 1 (the goodput of not speculating): otherwise 0. A move of more
///   than one (`|dK| > 1`) starts a cooldown of 2 decisions; a move of one
///   does not (the code's reading of the description's "hysteresis").
/// - **Cost** (mapped here). vLLM measures time in target forwards: a step
///   costs `1 + K c_draft + bs_penalty * batch`. This engine's step costs
///   `base + per_token * K`; divided by `base`, that is `c_draft =
///   per_token / base` and no verify overhead (the engine's cost has no
///   batch term, and a policy does not see the batch). The goodput of
///   `k = 0` is then exactly 1, the threshold vLLM uses.
/// - **Probes** (decided here: the code is not available). Before each
///   step, one draw of the simulator's generator ([`Rng`]) seeded with
///   `seed`; below 0.1 the step drafts the full `K` (the author's
///   diagnostic script reports exploration steps at the maximum `K`). A probe does not change the
///   choice, the cooldown or the averages (except through the data it
///   yields), and [`chosen`](Policy::chosen) ignores it. The decision runs
///   on probe steps too, so the cooldown counts steps.
pub struct Vllm44336 {
    max_draft_len: usize,
    /// Draft cost per token relative to a step without drafts.
    c_draft: f64,
    /// Per position `j` (index `j - 1`): requests of the window that
    /// reached it.
    reached: Vec<u64>,
    /// Per position: requests of the window whose draft was accepted there.
    accepted: Vec<u64>,
    /// Per position: moving average of the conditional acceptance.
    alpha: Vec<f64>,
    /// Whether a window has closed (vLLM's averages exist).
    tracked: bool,
    /// Counted requests since the last window closed.
    window: u64,
    /// The choice, probes aside.
    choice: usize,
    /// Decisions still to skip.
    cooldown: u32,
    rng: Rng,
}

impl Vllm44336 {
    /// The rule for an engine drafting at most `max_draft_len` tokens per
    /// request, whose step costs `cost_base + cost_per_token * k` for `k`
    /// drafts; `seed` seeds the probes.
    ///
    /// # Panics
    ///
    /// If `cost_base` is not finite and positive or `cost_per_token` is not
    /// finite and non-negative (the demo validates its `--cost-linear`
    /// before).
    pub fn new(max_draft_len: usize, cost_base: f64, cost_per_token: f64, seed: u64) -> Self {
        assert!(
            cost_base.is_finite() && cost_base > 0.0,
            "cost_base must be finite and positive, got {cost_base}"
        );
        assert!(
            cost_per_token.is_finite() && cost_per_token >= 0.0,
            "cost_per_token must be finite and non-negative, got {cost_per_token}"
        );
        Self {
            max_draft_len,
            c_draft: cost_per_token / cost_base,
            reached: vec![0; max_draft_len],
            accepted: vec![0; max_draft_len],
            alpha: vec![VLLM_ALPHA_PRIOR; max_draft_len],
            tracked: false,
            window: 0,
            choice: max_draft_len,
            cooldown: 0,
            rng: Rng::new(seed),
        }
    }

    /// Calls `visit(k, goodput(k))` for `k = 1..=K`, in order.
    fn for_each_goodput(&self, mut visit: impl FnMut(usize, f64)) {
        let mut reach_all = 1.0;
        let mut expected_tokens = 1.0;
        for (i, &alpha) in self.alpha.iter().enumerate() {
            let k = i + 1;
            reach_all *= alpha.clamp(VLLM_ALPHA_MIN, VLLM_ALPHA_MAX);
            expected_tokens += reach_all;
            visit(k, expected_tokens / (1.0 + k as f64 * self.c_draft));
        }
    }

    /// The `k` of the largest goodput, 0 if none reaches 1.
    fn best(&self) -> usize {
        let mut best_k = 0;
        let mut best_goodput = 1.0;
        self.for_each_goodput(|k, goodput| {
            if goodput >= best_goodput {
                best_goodput = goodput;
                best_k = k;
            }
        });
        best_k
    }

    /// The decision made before a step (probes aside).
    fn decide(&mut self) -> usize {
        if !self.tracked {
            return self.max_draft_len;
        }
        if self.cooldown > 0 {
            self.cooldown -= 1;
            return self.choice;
        }
        let best = self.best();
        if best.abs_diff(self.choice) > 1 {
            self.cooldown = VLLM_COOLDOWN_STEPS;
        }
        self.choice = best;
        best
    }
}

/// What the rule holds, for tests that follow it step by step.
impl Vllm44336 {
    /// The average acceptance at `position` (1-based).
    pub fn alpha(&self, position: usize) -> f64 {
        self.alpha[position - 1]
    }

    /// The modelled goodput of drafting `k >= 1` tokens, in tokens per
    /// step without drafts.
    pub fn goodput(&self, k: usize) -> f64 {
        let mut found = f64::NAN;
        self.for_each_goodput(|j, goodput| {
            if j == k {
                found = goodput;
            }
        });
        found
    }
}

impl Policy for Vllm44336 {
    fn budget(&mut self, _step: u64) -> usize {
        let choice = self.decide();
        if self.rng.unit() < VLLM_EPSILON {
            self.max_draft_len
        } else {
            choice
        }
    }

    fn after_step(&mut self, _budget: usize, outcomes: &[(usize, usize)]) {
        for &(drafted, accepted) in outcomes {
            if drafted == 0 {
                continue;
            }
            let reached = drafted.min(self.max_draft_len).min(accepted + 1);
            for j in 0..reached {
                self.reached[j] += 1;
                if j < accepted {
                    self.accepted[j] += 1;
                }
            }
            self.window += 1;
        }
        if self.window >= VLLM_WINDOW {
            for j in 0..self.max_draft_len {
                if self.reached[j] > 0 {
                    let rate = self.accepted[j] as f64 / self.reached[j] as f64;
                    self.alpha[j] += VLLM_EMA_WEIGHT * (rate - self.alpha[j]);
                }
                self.reached[j] = 0;
                self.accepted[j] = 0;
            }
            self.window = 0;
            self.tracked = true;
        }
    }

    fn chosen(&self) -> usize {
        self.choice
    }
}

// ---------------------------------------------------------------------------
// Per-request rules: SmartSpec and vLLM's adaptive verification

/// Gives the step's draft tokens to the (request, position) slots of highest
/// survival (the estimated probability that the slot's token and every one
/// before it in the request's draft is accepted), the number of slots `B`
/// maximising the step's estimated goodput
///
/// ```text
/// (n + the sum of the B best survivals) / (base + per_token × B / n)
/// ```
///
/// (one bonus token per request, plus the expected accepted drafts; over
/// the step's cost, `B / n` being its mean draft length per request), the
/// first such `B` on ties. Survival never rises along a request's draft, so
/// the best `B` slots are a prefix of each request's draft: `lens[r]` is the
/// number of request `r`'s slots among them.
///
/// `survival(r, i)` is the survival of position `i` (from 1) of request `r`,
/// for `i` in `1..=max_draft_len`; `slots` is scratch space (its capacity is
/// reused: a step allocates nothing once it holds `n × K` entries).
fn allocate_by_survival(
    lens: &mut [usize],
    max_draft_len: usize,
    cost: (f64, f64),
    slots: &mut Vec<(f64, u32)>,
    mut survival: impl FnMut(usize, usize) -> f64,
) {
    let n = lens.len();
    lens.fill(0);
    if n == 0 {
        return;
    }
    slots.clear();
    for r in 0..n {
        for i in 1..=max_draft_len {
            slots.push((survival(r, i), r as u32));
        }
    }
    // Highest survival first; equal survivals by request, so the order is a
    // function of the survivals alone.
    slots.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let (base, per_token) = cost;
    let nf = n as f64;
    let (mut best_b, mut best) = (0, nf / base);
    let mut tokens = nf;
    for (b, &(s, _)) in slots.iter().enumerate() {
        tokens += s;
        let goodput = tokens / (base + per_token * (b + 1) as f64 / nf);
        if goodput > best {
            (best_b, best) = (b + 1, goodput);
        }
    }
    for &(_, r) in &slots[..best_b] {
        lens[r as usize] += 1;
    }
}

/// Weight of the newest verify step in SmartSpec's per-request acceptance
/// estimate (decided here; see [`SmartSpec`]).
const SMARTSPEC_REQUEST_WEIGHT: f64 = 0.25;
/// Weight of the newest step in the engine-wide acceptance estimate a new
/// request starts from (decided here).
const SMARTSPEC_POOL_WEIGHT: f64 = 0.01;

/// A SmartSpec-style per-request rule (Liu et al., "Optimizing Speculative
/// Decoding for Serving Large Language Models Using Goodput", arXiv
/// 2406.14066, 2024): each request's token acceptance rate is estimated from
/// its own history, and the proposed lengths (from 0, no speculation, up)
/// are those that maximise the estimated goodput of the step, generated
/// tokens per unit of time.
///
/// What we read: the paper's abstract and third-party summaries of it
/// (goodput = (accepted + bonus) / time, per-request `k` from 0 up), and vLLM's RFC #4565 ("determine the
/// optimal speculation length for each request, ranging from zero ... based
/// on goodput, which reflects the current observed load"). Not the paper's
/// algorithm listing nor its code (implemented in a fork of vLLM, never
/// merged). So this is the rule as described, with these choices:
///
/// - **Acceptance estimate.** Under the paper's independent-token model a
///   request with token acceptance rate `alpha` proposing `k` tokens
///   generates `(1 - alpha^(k+1)) / (1 - alpha)` tokens in expectation. A
///   verify step that drafted `d > 0` and accepted `a` tested `min(d, a +
///   1)` tokens and accepted `a`; the request's `alpha` is the ratio of two
///   exponential moving averages, of accepted and of tested tokens, weight
///   1/4 per verify step (decided here: the history's length is not in what
///   we read; 1/4 is [`RequestState`](specdec_metrics::RequestState)'s
///   memory, so that per-state and this rule compare on their rules rather
///   than their memories).
/// - **A new request** starts from the engine thread's rate (both averages
///   start at the engine's; decided here): the same ratio over every
///   request's verify steps, weight 1/100 per engine step, starting at 1/2.
///   (Starting from its first step alone would set `alpha = 0` for every
///   request whose first draft is rejected at once, and it would never
///   draft again.)
/// - **Choice.** With this engine's cost, `base + per_token × mean k`, the
///   goodput of lengths `k_1, ..., k_n` is `sum_r (1 - alpha_r^(k_r + 1)) /
///   (1 - alpha_r)` over `base + per_token × sum_r k_r / n`. Its maximum
///   gives the next token to the request whose next position is likeliest
///   to be accepted (`alpha_r^(k_r + 1)`), as long as that raises the
///   goodput: the best slots of the batch with survival `alpha_r^i`, at most
///   `K` per request. A request may get 0 and then learns nothing more (no
///   verify step, no news) until it finishes: the paper's "from 0" has this
///   trap, and the rule keeps it.
pub struct SmartSpec {
    max_draft_len: usize,
    cost: (f64, f64),
    /// Engine-wide moving averages of accepted and of tested tokens.
    pool: (f64, f64),
    /// This step's accepted and tested tokens.
    step_totals: (f64, f64),
    slots: Vec<(f64, u32)>,
    chosen: usize,
}

impl SmartSpec {
    /// The rule for an engine drafting at most `max_draft_len` tokens per
    /// request for batches of up to `max_batch`, whose step costs
    /// `cost_base + cost_per_token × (mean k)`.
    pub fn new(
        max_draft_len: usize,
        cost_base: f64,
        cost_per_token: f64,
        max_batch: usize,
    ) -> Self {
        Self {
            max_draft_len,
            cost: (cost_base, cost_per_token),
            pool: (0.5, 1.0),
            step_totals: (0.0, 0.0),
            slots: Vec::with_capacity(max_batch * max_draft_len),
            chosen: 0,
        }
    }

    /// The acceptance rate the rule assumes for a request with `memory`.
    pub fn alpha(&self, memory: &RequestMemory) -> f64 {
        let (accepted, tested) = if memory[1] > 0.0 {
            (memory[0], memory[1])
        } else {
            self.pool
        };
        (accepted / tested).clamp(0.0, 1.0)
    }
}

impl Policy for SmartSpec {
    /// The latest step's scheduled budget (the rule chooses per request).
    fn budget(&mut self, _step: u64) -> usize {
        self.chosen
    }

    fn draft_lens(&mut self, _step: u64, requests: &[RequestView], lens: &mut [usize]) {
        let mut slots = std::mem::take(&mut self.slots);
        allocate_by_survival(lens, self.max_draft_len, self.cost, &mut slots, |r, i| {
            self.alpha(&requests[r].memory).powi(i as i32)
        });
        self.slots = slots;
    }

    fn after_request(
        &mut self,
        _index: usize,
        memory: &mut RequestMemory,
        drafted: usize,
        accepted: usize,
    ) {
        if drafted == 0 {
            return;
        }
        let (a, tested) = (accepted as f64, drafted.min(accepted + 1) as f64);
        if memory[1] == 0.0 {
            // The first verify step moves the estimate from the engine's.
            *memory = [self.pool.0, self.pool.1];
        }
        let w = SMARTSPEC_REQUEST_WEIGHT;
        memory[0] += w * (a - memory[0]);
        memory[1] += w * (tested - memory[1]);
        self.step_totals.0 += a;
        self.step_totals.1 += tested;
    }

    fn after_step(&mut self, budget: usize, _outcomes: &[(usize, usize)]) {
        self.chosen = budget;
        let (a, tested) = std::mem::take(&mut self.step_totals);
        if tested > 0.0 {
            let w = SMARTSPEC_POOL_WEIGHT;
            self.pool.0 += w * (a - self.pool.0);
            self.pool.1 += w * (tested - self.pool.1);
        }
    }

    fn chosen(&self) -> usize {
        self.chosen
    }
}

/// Steps between two refits of the acceptance estimator
/// (`OnlineAcceptanceEstimator.REFIT_INTERVAL`).
const AV_REFIT_INTERVAL: u64 = 100;
/// Refits during which every request verifies its whole draft
/// (`WARMUP_REFITS`).
const AV_WARMUP_REFITS: u64 = 3;
/// A position observed fewer times in a round keeps its coefficients
/// (`MIN_ROUND_OBSERVATIONS`).
const AV_MIN_ROUND_OBSERVATIONS: f64 = 50.0;
/// Ridge on the 2 × 2 solve (`L2`).
const AV_L2: f64 = 1e-3;
/// The estimator's first coefficients: slope 0, bias 1.5 (an acceptance
/// of `sigmoid(1.5)`, 0.82, at every position).
const AV_INITIAL_BIAS: f64 = 1.5;
/// Weight of the newest verify step in the request's recent acceptance,
/// the estimator's feature here (decided here: `RequestState`'s).
const AV_FEATURE_WEIGHT: f64 = 0.25;

/// vLLM's adaptive verification (pull request #47808, "DSpark
/// confidence-scheduled verification", merged; extended to every draft
/// model by #52228's online acceptance estimator): every drafted slot is
/// scored by its survival, the running product of the request's
/// per-position acceptance probabilities, and a step verifies the `B` best
/// slots of the batch, `B` maximising expected tokens per unit of step
/// time.
///
/// What we read (vLLM's code and its blog post of 2026-08-14, "Adaptive
/// Verification in vLLM"): `vllm/v1/worker/gpu/spec_decode/
/// adaptive_verification.py` (`AdaptiveVerificationManager.get_num_tokens`:
/// `B* = argmax_B (N_sampling + cumsum(sorted survival)[B]) /
/// (draft_cost[num_reqs] + verify_cost[T + B])`, `np.argmax`, so the first
/// best `B`; `_assign_draft_token_budget`: a global top-`B` over the
/// survivals, `cumprod` of the confidences along each request) and
/// `acceptance_estimator.py` (`OnlineAcceptanceEstimator`: per position
/// `k`, `p_k = sigmoid(w_k × feature + b_k)`, fitted online by one Newton
/// (IRLS) step per position every 100 steps from that round's
/// observations alone, ridge 1e-3, a position with fewer than 50
/// observations in the round left alone, a negative slope rejected; first
/// coefficients `w = 0, b = 1.5`; whole drafts verified during the first 3
/// refits; an observation is a position the chain reached and verified,
/// labelled accepted or not, weighted by the prediction made at draft
/// time).
///
/// Where we had to choose:
///
/// - **The feature.** vLLM's is the draft token's top-2 logit margin (or a
///   trained confidence head): the drafter says, for this very token, how
///   sure it is. The simulated drafter has no logits. The feature here is
///   the request's recent acceptance: an exponential moving average of its
///   verify steps' `accepted / drafted`, weight 1/4, starting at 1/2 (the
///   statistic `RequestState` keeps, unquantized). It carries what the
///   request's history says, not what the draft would: a request given no
///   slot keeps its feature until it is verified again, where vLLM's
///   confidence would be fresh at every step. (The request's true current
///   acceptance would be a perfect confidence head; not modelled.)
/// - **Cost.** vLLM's step costs `draft_cost[num_reqs] + verify_cost[T +
///   B]` from profiled tables; this engine's `base + per_token × B / n`
///   (`T`, one token per request, is in `base`).
/// - **Staleness.** vLLM sizes `B` from confidences one step old (the copy
///   to the host runs behind) and allocates with current ones; here both
///   use the current ones.
/// - `N_sampling` is every request of the batch (no chunked prefills here).
pub struct VllmAdaptiveVerification {
    max_draft_len: usize,
    cost: (f64, f64),
    /// Per position: slope and bias.
    weight: Vec<f64>,
    bias: Vec<f64>,
    /// Per position: the 2 × 2 information matrix (`[x², x, 1]` weighted)
    /// and gradient (`[x, 1]` times the residual) of the round, and its
    /// observations.
    info: Vec<[f64; 3]>,
    grad: Vec<[f64; 2]>,
    counts: Vec<f64>,
    steps_since_refit: u64,
    refits: u64,
    /// This step: each request's feature, and its per-position predictions
    /// (request-major, `K` each).
    features: Vec<f64>,
    predictions: Vec<f64>,
    slots: Vec<(f64, u32)>,
    chosen: usize,
}

impl VllmAdaptiveVerification {
    /// The rule for an engine drafting at most `max_draft_len` tokens per
    /// request for batches of up to `max_batch`, whose step costs
    /// `cost_base + cost_per_token × (mean k)`.
    pub fn new(
        max_draft_len: usize,
        cost_base: f64,
        cost_per_token: f64,
        max_batch: usize,
    ) -> Self {
        let k = max_draft_len;
        Self {
            max_draft_len: k,
            cost: (cost_base, cost_per_token),
            weight: vec![0.0; k],
            bias: vec![AV_INITIAL_BIAS; k],
            info: vec![[0.0; 3]; k],
            grad: vec![[0.0; 2]; k],
            counts: vec![0.0; k],
            steps_since_refit: 0,
            refits: 0,
            features: Vec::with_capacity(max_batch),
            predictions: Vec::with_capacity(max_batch * k),
            slots: Vec::with_capacity(max_batch * k),
            chosen: k,
        }
    }

    /// The request's feature: its recent acceptance (1/2 before its first
    /// verify step).
    pub fn feature(memory: &RequestMemory) -> f64 {
        if memory[1] > 0.0 { memory[0] } else { 0.5 }
    }

    /// The estimated probability that position `position` (from 1) is
    /// accepted once the ones before it were, for a request whose feature
    /// is `feature`.
    pub fn acceptance(&self, position: usize, feature: f64) -> f64 {
        let k = position - 1;
        sigmoid(self.weight[k] * feature + self.bias[k])
    }

    /// Whether every request still verifies its whole draft (the first
    /// refits).
    pub fn warming_up(&self) -> bool {
        self.refits < AV_WARMUP_REFITS
    }

    /// Refits so far.
    pub fn refits(&self) -> u64 {
        self.refits
    }

    /// One Newton step per position from the round's statistics, then a new
    /// round.
    fn refit(&mut self) {
        for k in 0..self.max_draft_len {
            let [xx, x, one] = self.info[k];
            let (a, b, c) = (xx + AV_L2, x, one + AV_L2);
            let det = a * c - b * b;
            let [g0, g1] = self.grad[k];
            let step_w = (c * g0 - b * g1) / det;
            let step_b = (a * g1 - b * g0) / det;
            let ok = det.is_finite()
                && det.abs() > 1e-12
                && step_w.is_finite()
                && step_b.is_finite()
                && self.counts[k] >= AV_MIN_ROUND_OBSERVATIONS;
            // A negative slope would say a request whose drafts did well
            // lately is less likely to be accepted: a bad fit.
            if ok && self.weight[k] + step_w >= 0.0 {
                self.weight[k] += step_w;
                self.bias[k] += step_b;
            }
            self.info[k] = [0.0; 3];
            self.grad[k] = [0.0; 2];
            self.counts[k] = 0.0;
        }
        self.refits += 1;
    }
}

fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

impl Policy for VllmAdaptiveVerification {
    /// The latest step's scheduled budget (the rule chooses per request).
    fn budget(&mut self, _step: u64) -> usize {
        self.chosen
    }

    fn draft_lens(&mut self, _step: u64, requests: &[RequestView], lens: &mut [usize]) {
        let k = self.max_draft_len;
        self.features.clear();
        self.predictions.clear();
        for request in requests {
            let x = Self::feature(&request.memory);
            self.features.push(x);
            for position in 1..=k {
                self.predictions.push(self.acceptance(position, x));
            }
        }
        if self.warming_up() {
            lens.fill(k);
            return;
        }
        let mut slots = std::mem::take(&mut self.slots);
        let predictions = &self.predictions;
        // Survival: the running product along each request's draft.
        let (mut request, mut running) = (usize::MAX, 1.0);
        allocate_by_survival(lens, k, self.cost, &mut slots, |r, i| {
            if r != request || i == 1 {
                (request, running) = (r, 1.0);
            }
            running *= predictions[r * k + i - 1];
            running
        });
        self.slots = slots;
    }

    fn after_request(
        &mut self,
        index: usize,
        memory: &mut RequestMemory,
        drafted: usize,
        accepted: usize,
    ) {
        if drafted == 0 {
            return;
        }
        let k = self.max_draft_len;
        if let Some(&x) = self.features.get(index) {
            // Observed: positions the chain reached and that were verified
            // (from 0: `p <= accepted` and `p < drafted`), labelled
            // accepted below `accepted`.
            for p in 0..drafted.min(accepted + 1).min(k) {
                let pred = self.predictions[index * k + p];
                let label = if p < accepted { 1.0 } else { 0.0 };
                let w = pred * (1.0 - pred);
                let residual = label - pred;
                let info = &mut self.info[p];
                info[0] += w * x * x;
                info[1] += w * x;
                info[2] += w;
                self.grad[p][0] += residual * x;
                self.grad[p][1] += residual;
                self.counts[p] += 1.0;
            }
        }
        let rate = accepted.min(drafted) as f64 / drafted as f64;
        if memory[1] > 0.0 {
            memory[0] += AV_FEATURE_WEIGHT * (rate - memory[0]);
        } else {
            *memory = [0.5 + AV_FEATURE_WEIGHT * (rate - 0.5), 1.0];
        }
    }

    fn after_step(&mut self, budget: usize, _outcomes: &[(usize, usize)]) {
        self.chosen = budget;
        self.steps_since_refit += 1;
        if self.steps_since_refit >= AV_REFIT_INTERVAL {
            self.steps_since_refit = 0;
            self.refit();
        }
    }

    fn chosen(&self) -> usize {
        self.chosen
    }
}
