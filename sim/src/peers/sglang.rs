//! SGLang's adaptive speculative decoding: [`Sglang`].

use crate::drafting::Policy;

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
