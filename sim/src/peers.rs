//! The draft-length rules of other engines, reimplemented as [`Policy`]
//! values so the demo can run them side by side with its own controller on
//! the same workload and seed.
//!
//! - [`Sglang`]: SGLang's adaptive speculative decoding (pull requests
//!   #21599 and #23336): one exponential moving average of the accepted
//!   drafts per request, switched between a few pre-built tiers with
//!   hysteresis.
//! - [`Vllm44336`]: the "Adaptive K*" rule of vLLM pull request #44336
//!   (closed): a moving average of the acceptance at each draft position, a
//!   goodput model, epsilon-greedy probes, a cooldown after large moves.
//!
//! Both learn only from the outcomes of their own steps
//! ([`Policy::after_step`]), as they do in their engines. Neither touches
//! the metrics recorder. Each keeps a few numbers and, for the vLLM rule,
//! three vectors of `K` entries allocated in `new`: a step allocates
//! nothing.
//!
//! The rules are written from the engines' sources (cited on each type),
//! not translated line by line; every place where the engines' setting and
//! this demo's differ, and every detail the sources leave open, is
//! documented where it is decided.

use crate::policy::Policy;
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
