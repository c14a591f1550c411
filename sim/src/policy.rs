//! Drafting policies: what budget the scheduler of one engine thread gives
//! its next step.
//!
//! Every engine thread owns one `Box<dyn Policy>` and calls
//! [`Policy::budget`] before each step and [`Policy::after_step`] after it.
//! A policy whose choice is made elsewhere (the metrics thread's
//! `DraftController`, published through a `SharedPlan`: [`Adaptive`]) reads
//! it in `budget`; a policy that learns per step (the peer rules of other
//! engines) learns in `after_step`.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use specdec_metrics::{DraftPlan, SharedPlan};

/// One engine thread's drafting policy (one scheduler).
pub trait Policy: Send {
    /// The draft budget for engine step `step` (counted from 0 on this
    /// engine thread), at most `K`. May differ from [`chosen`](Self::chosen)
    /// on exploration or probe steps.
    fn budget(&mut self, step: u64) -> usize;

    /// The outcome of that step: its budget, and `(drafted, accepted)` for
    /// every request of the batch that drafted (`drafted <= budget`; a
    /// grammar may have cut a request's draft short).
    fn after_step(&mut self, budget: usize, outcomes: &[(usize, usize)]);

    /// The draft length the policy currently chooses, exploration aside. A
    /// change of this value between two steps counts as one switch.
    fn chosen(&self) -> usize;
}

/// The same draft length at every step.
#[derive(Clone, Copy, Debug)]
pub struct Static {
    k: usize,
}

impl Static {
    pub fn new(k: usize) -> Self {
        Self { k }
    }
}

impl Policy for Static {
    fn budget(&mut self, _step: u64) -> usize {
        self.k
    }
    fn after_step(&mut self, _budget: usize, _outcomes: &[(usize, usize)]) {}
    fn chosen(&self) -> usize {
        self.k
    }
}

/// Follows the plan the metrics thread's `DraftController` publishes: the
/// budget of a step is `plan.draft_len_for(step)`, one relaxed atomic load
/// (no lock, no allocation). The plan read is kept, so [`chosen`] reports
/// the plan this engine thread actually follows, without a second load.
///
/// [`chosen`]: Policy::chosen
#[derive(Debug)]
pub struct Adaptive {
    plan: Arc<SharedPlan>,
    last: DraftPlan,
}

impl Adaptive {
    pub fn new(plan: Arc<SharedPlan>) -> Self {
        let last = plan.load();
        Self { plan, last }
    }
}

impl Policy for Adaptive {
    #[inline]
    fn budget(&mut self, step: u64) -> usize {
        self.last = self.plan.load();
        self.last.draft_len_for(step)
    }
    fn after_step(&mut self, _budget: usize, _outcomes: &[(usize, usize)]) {}
    fn chosen(&self) -> usize {
        self.last.draft_len()
    }
}

/// A `--policy` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicySpec {
    /// The closed loop: `DraftController` on the metrics thread, a
    /// `SharedPlan` read by every engine thread.
    Adaptive,
    /// `static:K`.
    Static(usize),
    /// SGLang's EMA tiers.
    Sglang,
    /// vLLM #44336's per-position EMA with epsilon-greedy.
    Vllm44336,
}

impl PolicySpec {
    /// Checks the policy against `--max-draft-len`.
    pub fn check(self, max_draft_len: usize) -> Result<(), String> {
        match self {
            PolicySpec::Static(k) if k > max_draft_len => Err(format!(
                "--policy static:{k}: the draft length is above --max-draft-len {max_draft_len}"
            )),
            _ => Ok(()),
        }
    }
}

impl fmt::Display for PolicySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicySpec::Adaptive => f.write_str("adaptive"),
            PolicySpec::Static(k) => write!(f, "static:{k}"),
            PolicySpec::Sglang => f.write_str("sglang"),
            PolicySpec::Vllm44336 => f.write_str("vllm-44336"),
        }
    }
}

impl FromStr for PolicySpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "adaptive" => Ok(PolicySpec::Adaptive),
            "sglang" => Ok(PolicySpec::Sglang),
            "vllm-44336" => Ok(PolicySpec::Vllm44336),
            _ => match s.strip_prefix("static:") {
                Some(k) => k.parse().map(PolicySpec::Static).map_err(|_| {
                    format!("{s:?}: the K of static:K must be a whole number (0..=64)")
                }),
                None => Err(format!(
                    "{s:?} is not a policy (adaptive, static:K, sglang or vllm-44336)"
                )),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adaptive_follows_the_published_plan_and_reports_the_plan_it_read() {
        let plan = Arc::new(SharedPlan::new(DraftPlan::new(2, 8).unwrap()));
        let mut policy = Adaptive::new(Arc::clone(&plan));
        assert_eq!((policy.budget(0), policy.chosen()), (2, 2));
        assert_eq!(policy.budget(31), 5); // exploration: 2 * 2 + 1
        plan.publish(DraftPlan::new(6, 8).unwrap());
        // Not read yet: still the plan of the last step.
        assert_eq!(policy.chosen(), 2);
        assert_eq!((policy.budget(32), policy.chosen()), (6, 6));
        assert_eq!(policy.budget(63), 8);
    }

    #[test]
    fn static_drafts_its_k_at_every_step() {
        let mut policy = Static::new(3);
        for step in 0..100 {
            assert_eq!(policy.budget(step), 3);
            policy.after_step(3, &[(3, 1)]);
        }
        assert_eq!(policy.chosen(), 3);
    }

    #[test]
    fn policy_values_parse_and_bad_ones_say_why() {
        for (text, spec) in [
            ("adaptive", PolicySpec::Adaptive),
            ("static:0", PolicySpec::Static(0)),
            ("static:8", PolicySpec::Static(8)),
            ("sglang", PolicySpec::Sglang),
            ("vllm-44336", PolicySpec::Vllm44336),
        ] {
            assert_eq!(text.parse::<PolicySpec>(), Ok(spec));
            assert_eq!(spec.to_string(), text);
        }
        assert!(
            "static:x"
                .parse::<PolicySpec>()
                .unwrap_err()
                .contains("whole number")
        );
        assert!("static:-1".parse::<PolicySpec>().is_err());
        assert!(
            "greedy"
                .parse::<PolicySpec>()
                .unwrap_err()
                .contains("not a policy")
        );
        assert!(
            PolicySpec::Static(9)
                .check(8)
                .unwrap_err()
                .contains("above --max-draft-len")
        );
        assert!(PolicySpec::Static(8).check(8).is_ok());
    }
}
