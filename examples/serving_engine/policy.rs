//! Drafting policies: what budget the scheduler of one engine thread gives
//! its next step.
//!
//! Every engine thread owns one `Box<dyn Policy>` and calls
//! [`Policy::budget`] before each step and [`Policy::after_step`] after it.
//! A policy whose choice is made elsewhere (the metrics thread's
//! `DraftController`, published through a `SharedPlan`) reads it in
//! `budget`; a policy that learns per step (the peer rules of other
//! engines) learns in `after_step`.

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
