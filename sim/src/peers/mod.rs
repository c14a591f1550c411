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
//!
//! One file per rule: `sglang.rs`, `vllm_44336.rs`, `smartspec.rs`,
//! `vllm_adaptive_verification.rs`; the slot allocation the per-request
//! rules share is here.
//!
//! [`Policy`]: crate::policy::Policy
//! [`Policy::after_request`]: crate::policy::Policy::after_request
//! [`Policy::after_step`]: crate::policy::Policy::after_step
//! [`RequestMemory`]: crate::policy::RequestMemory

mod sglang;
mod smartspec;
mod vllm_44336;
mod vllm_adaptive_verification;

pub use sglang::Sglang;
pub use smartspec::SmartSpec;
pub use vllm_44336::Vllm44336;
pub use vllm_adaptive_verification::VllmAdaptiveVerification;

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
