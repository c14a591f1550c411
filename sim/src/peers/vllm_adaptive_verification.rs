//! vLLM's adaptive verification: [`VllmAdaptiveVerification`].

use super::allocate_by_survival;
use crate::drafting::{Policy, RequestMemory, RequestView};

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
            memory[0] = 0.5 + AV_FEATURE_WEIGHT * (rate - 0.5);
            memory[1] = 1.0;
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
