//! Drafting policies: how many tokens the scheduler of one engine thread
//! drafts for each request of its next step. The trait every policy
//! implements, what it sees, and the engine model's own policies (the
//! static length, the two controllers' and the oracle); the table that
//! names them all, the peer rules included, is [`crate::policy`].
//!
//! Every engine thread owns one `Box<dyn Policy>`. Before each step it
//! calls [`Policy::draft_lens`] with a view of every request of the batch
//! ([`RequestView`]); after each request's verify step,
//! [`Policy::after_request`]; after the step, [`Policy::after_step`]. A
//! batch-level policy only implements [`Policy::budget`] (one length for the
//! whole batch, which `draft_lens` gives every request). A policy whose
//! choice is made elsewhere (the metrics thread's `DraftController`,
//! published through a `SharedPlan`: [`Adaptive`]; its `StateController`
//! through a `SharedStatePlan`: [`PerState`]) reads it there; a policy that
//! learns per step (the peer rules of other engines) learns in
//! `after_request` and `after_step`.
//!
//! # The step's cost with per-request lengths
//!
//! A step whose requests draft `k_1, ..., k_n` tokens costs `base +
//! per_token × (k_1 + ... + k_n) / n` cost units: the per-token cost is paid
//! for the mean drafted per request ([`mean_draft_len`]). When every request
//! drafts the same `k` that is `base + per_token × k`, the cost of a
//! batch-level budget `k`: the cost model of the batch-level policies is
//! unchanged, and a policy that drafts longer for some requests and shorter
//! for others pays for the average. The lengths are the scheduled ones: a
//! grammar that cuts a request's draft short, or a proposer with nothing to
//! propose, does not make the step cheaper (as before).
//!
//! The budget the step records with `observe_scheduled` (the
//! `scheduled_steps_by_budget` of the report, one integer `0..=K` per
//! engine step) is that mean, rounded half up ([`scheduled_budget`]), not
//! the longest draft of the step: with the linear cost, the scheduled
//! budgets then add up to the cost's draft term within half a token per
//! step, while the maximum would count most steps of a per-request policy
//! as drafting `K` (one easy request is enough) and overstate the draft
//! cost about twice. An engine whose verification pads every request to
//! the longest draft would pay the maximum, and should record it.

use std::sync::Arc;

use specdec_metrics::{
    DraftPlan, RequestState, SharedPlan, SharedStatePlan, SharedStateTable, StatePlan,
};

use crate::runs::PositionOutcome;
use crate::trace_set::Position;

/// Numbers a policy keeps for one request (for example its own estimate of
/// the request's acceptance): zero when the request is admitted, changed
/// only by [`Policy::after_request`], stored by the engine with the request.
pub type RequestMemory = [f64; 6];

/// What a policy sees of one request of the batch before a step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RequestView {
    /// The request's state, which the engine updates after each of its
    /// verify steps ([`RequestState::after`]).
    pub state: RequestState,
    /// What the policy keeps for the request.
    pub memory: RequestMemory,
    /// On a trace, what the drafter knows at the request's next position
    /// (its proposal length and matched `n`) and, for the oracle only, how
    /// much of it the output continues with; `None` off traces.
    pub position: Option<Position>,
    /// The request's state in the run's state space (what the drafter
    /// knows at this step composed with the request's recent acceptance;
    /// `state.index()` without one), for a per-state plan of many states.
    pub state_index: usize,
    /// The tokens the request has left to generate: hindsight, for the
    /// per-step hindsight policy only (an engine does not know where an
    /// output ends).
    pub left: usize,
}

/// The mean of a step's per-request draft lengths: the draft term of its
/// cost, `base + per_token × mean` (see the module docs). `lens` is not
/// empty (a step has at least one request).
pub fn mean_draft_len(lens: &[usize]) -> f64 {
    lens.iter().sum::<usize>() as f64 / lens.len().max(1) as f64
}

/// The budget a step records with `observe_scheduled`: the mean draft
/// length per request, rounded half up (see the module docs). Equal
/// lengths `k` give `k`.
pub fn scheduled_budget(lens: &[usize]) -> usize {
    let n = lens.len().max(1);
    (2 * lens.iter().sum::<usize>() + n) / (2 * n)
}

/// One engine thread's drafting policy (one scheduler).
pub trait Policy: Send {
    /// The batch-level draft budget for engine step `step` (counted from 0
    /// on this engine thread), at most `K`. May differ from
    /// [`chosen`](Self::chosen) on exploration or probe steps. A
    /// per-request policy returns what it would draft for a request it
    /// knows nothing about.
    fn budget(&mut self, step: u64) -> usize;

    /// The draft length of each request of step `step`: `lens[i]` for
    /// `requests[i]` (the engine clamps them to `K`). By default the
    /// step's [`budget`](Self::budget) for every request.
    fn draft_lens(&mut self, step: u64, requests: &[RequestView], lens: &mut [usize]) {
        let _ = requests;
        lens.fill(self.budget(step));
    }

    /// After the verify step of request `index` (of the views given to
    /// `draft_lens`): it drafted `drafted` tokens (at most its length; a
    /// grammar may have cut it short) and `accepted` of them were accepted.
    /// Not called for a request on which the proposer had nothing to
    /// propose (an undrafted step).
    fn after_request(
        &mut self,
        index: usize,
        memory: &mut RequestMemory,
        drafted: usize,
        accepted: usize,
    ) {
        let _ = (index, memory, drafted, accepted);
    }

    /// The outcome of that step: its scheduled budget
    /// ([`scheduled_budget`] of the lengths), and `(drafted, accepted)` for
    /// every request of the batch that drafted.
    fn after_step(&mut self, budget: usize, outcomes: &[(usize, usize)]);

    /// After every request-step on a trace, drafted or not: what the
    /// drafter proposed there, what was drafted and accepted, and the
    /// step's batch. Only the copy-run controllers ([`crate::runs`]) use
    /// it; of the proposal's match length they use only what the verify
    /// step's bonus token tells (whether the copy went on past the draft).
    fn after_position(&mut self, memory: &mut RequestMemory, outcome: PositionOutcome) {
        let _ = (memory, outcome);
    }

    /// The draft length the policy currently chooses, exploration aside;
    /// for a per-request policy, the latest step's scheduled budget.
    fn chosen(&self) -> usize;

    /// What identifies the policy's current choice: a change between two
    /// steps counts as one switch. By default [`chosen`](Self::chosen); a
    /// plan of one length per state counts a change of any of them.
    fn plan_key(&self) -> u64 {
        self.chosen() as u64
    }
}

/// A [`Policy::plan_key`] for a plan of one length per state (of a fixed
/// number of states): its lengths alone tell two plans apart.
pub(crate) fn lengths_key(plan: &[usize]) -> u64 {
    plan.iter()
        .fold(0u64, |h, &k| h.wrapping_mul(131).wrapping_add(k as u64))
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

/// Follows the plan the metrics thread's `StateController` publishes: a
/// request in state `s` drafts `plan.draft_len_for(s, step)`, one relaxed
/// atomic load per request-step (no lock, no allocation). The plan is also
/// loaded once per step to tell when it changed ([`Policy::plan_key`]: a
/// change of any state's length is one switch); [`chosen`](Policy::chosen)
/// is the latest step's scheduled budget (the mean length, rounded).
#[derive(Debug)]
pub struct PerState {
    plan: Arc<SharedStatePlan>,
    last: StatePlan,
    chosen: usize,
}

impl PerState {
    pub fn new(plan: Arc<SharedStatePlan>) -> Self {
        let last = plan.load();
        Self {
            chosen: last.draft_len(RequestState::new()),
            plan,
            last,
        }
    }
}

impl Policy for PerState {
    /// What a new request (in [`RequestState::new`]'s state) drafts.
    fn budget(&mut self, step: u64) -> usize {
        self.plan.draft_len_for(RequestState::new(), step)
    }

    #[inline]
    fn draft_lens(&mut self, step: u64, requests: &[RequestView], lens: &mut [usize]) {
        self.last = self.plan.load();
        for (len, request) in lens.iter_mut().zip(requests) {
            *len = self.plan.draft_len_for(request.state, step);
        }
    }

    fn after_step(&mut self, budget: usize, _outcomes: &[(usize, usize)]) {
        self.chosen = budget;
    }

    fn chosen(&self) -> usize {
        self.chosen
    }

    fn plan_key(&self) -> u64 {
        self.last.to_bits()
    }
}

/// A length per state of a state space (`StateSpace`): the metrics
/// thread's `StateController` publishes one plan per state in a
/// `SharedStateTable`, and each request-step reads its state's (one
/// relaxed load).
pub struct PerStateTable {
    table: Arc<SharedStateTable>,
    last: f64,
}

impl PerStateTable {
    pub fn new(table: Arc<SharedStateTable>) -> Self {
        Self { table, last: 0.0 }
    }
}

impl Policy for PerStateTable {
    fn budget(&mut self, step: u64) -> usize {
        self.table.draft_len_for(0, step)
    }

    fn draft_lens(&mut self, step: u64, requests: &[RequestView], lens: &mut [usize]) {
        for (len, view) in lens.iter_mut().zip(requests) {
            *len = self.table.draft_len_for(view.state_index, step);
        }
        self.last = mean_draft_len(lens);
    }

    fn after_step(&mut self, _budget: usize, _outcomes: &[(usize, usize)]) {}

    fn chosen(&self) -> usize {
        self.last.round() as usize
    }

    fn plan_key(&self) -> u64 {
        self.last.to_bits()
    }
}

/// Per-step hindsight on a trace (the policy named `oracle`): each request
/// drafts what its verifier will accept there (`m_t`, or for a suffix
/// drafter the fewest tokens that accept the most at any length), nothing where
/// nothing would be, and never a token that gains nothing (where the match
/// reaches the output's end, its last token would stand in for the bonus
/// token). Myopic, one step at a time and blind to the cost the batch
/// shares: a static length or a controller can beat it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Oracle {
    last: usize,
}

impl Policy for Oracle {
    fn budget(&mut self, _step: u64) -> usize {
        0
    }

    fn draft_lens(&mut self, _step: u64, requests: &[RequestView], lens: &mut [usize]) {
        for (len, view) in lens.iter_mut().zip(requests) {
            *len = view.position.map_or(0, |p| {
                usize::from(p.oracle).min(view.left.saturating_sub(1))
            });
        }
        self.last = scheduled_budget(lens);
    }

    fn after_step(&mut self, _budget: usize, _outcomes: &[(usize, usize)]) {}

    fn chosen(&self) -> usize {
        self.last
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
    fn per_state_drafts_each_requests_states_length_from_the_published_plan() {
        let plan = Arc::new(SharedStatePlan::new(
            StatePlan::new([1, 2, 4, 7], 8).unwrap(),
        ));
        let mut policy = PerState::new(Arc::clone(&plan));
        let view = |score: f64| RequestView {
            state: RequestState::with_score(score),
            memory: [0.0; 6],
            position: None,
            state_index: 0,
            left: 100,
        };
        let requests = [view(0.0), view(0.3), view(0.6), view(1.0), view(0.9)];
        let mut lens = [0; 5];
        policy.draft_lens(0, &requests, &mut lens);
        assert_eq!(lens, [1, 2, 4, 7, 7]);
        let key = policy.plan_key();
        // Exploration on 1 step in 32: min(2 k + 1, K).
        policy.draft_lens(31, &requests, &mut lens);
        assert_eq!(lens, [3, 5, 8, 8, 8]);
        assert_eq!(policy.plan_key(), key, "the same plan");
        policy.after_step(5, &[]);
        assert_eq!(policy.chosen(), 5);
        // A new plan is read at the next step, and is a switch.
        plan.publish(StatePlan::new([1, 1, 4, 8], 8).unwrap());
        assert_eq!(policy.plan_key(), key);
        policy.draft_lens(32, &requests, &mut lens);
        assert_eq!(lens, [1, 1, 4, 8, 8]);
        assert_ne!(policy.plan_key(), key);
        // A request nothing is known about drafts the middle state's.
        assert_eq!(policy.budget(33), 4);
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
}
