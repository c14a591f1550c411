//! The "Adaptive K*" rule of vLLM pull request #44336: [`Vllm44336`].

use crate::drafting::Policy;
use crate::rng::Rng;

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
///   `k = 0` is then exactly 1, the threshold vLLM uses. A negative
///   `per_token` (the slope between the ends of a measured cost table
///   whose last entry is below its first) is taken as 0 (decided here):
///   vLLM's `c_draft` is the time a draft token takes, never below zero,
///   and a draft that costs nothing measurable is free to the goodput.
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
    /// drafts; `seed` seeds the probes. A negative `cost_per_token` counts
    /// as 0 (drafting free: see the type's docs, "Cost").
    ///
    /// # Panics
    ///
    /// If `cost_base` is not finite and positive or `cost_per_token` is not
    /// finite (the demo validates its `--cost-linear` before).
    pub fn new(max_draft_len: usize, cost_base: f64, cost_per_token: f64, seed: u64) -> Self {
        assert!(
            cost_base.is_finite() && cost_base > 0.0,
            "cost_base must be finite and positive, got {cost_base}"
        );
        assert!(
            cost_per_token.is_finite(),
            "cost_per_token must be finite, got {cost_per_token}"
        );
        Self {
            max_draft_len,
            c_draft: cost_per_token.max(0.0) / cost_base,
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
