//! A SmartSpec-style per-request rule: [`SmartSpec`].

use super::allocate_by_survival;
use crate::drafting::{Policy, RequestMemory, RequestView};

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
            memory[0] = self.pool.0;
            memory[1] = self.pool.1;
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
