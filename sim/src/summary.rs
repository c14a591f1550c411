//! The run's summary: what each policy achieved, per phase and overall.
//!
//! Each engine thread counts, per phase, its steps, the budgets it
//! scheduled, the tokens it produced and the switches of its policy
//! ([`EngineStats`]); at the end the threads' counts are added up into a
//! [`Summary`], printed as one JSON object. Its keys:
//!
//! | key | meaning |
//! |-----|---------|
//! | `policy`, `workload`, `seed`, `max_draft_len`, `workers`, `max_batch` | the run's settings (`max_draft_len` is `K`) |
//! | `cost_linear` | `{"base": B, "per_token": P}`: a step with budget `b` costs `B + P b` cost units |
//! | `cost_rule` | `scheduled` (a step pays for the mean length the policy scheduled per request) or `drafted` (for the tokens actually drafted: on a trace, a request without a match costs nothing beyond `B`) |
//! | `step_us`, `interval_ms`, `update_ms`, `phase_seconds`, `virtual_time`, `seconds` | time settings (`update_ms`: the controller's update period); `seconds` is the run's length (virtual or wall-clock) |
//! | `persistence`, `state_rule` | the `bursty` workload's mean steps per condition, and what a request's state is (`library` unless `--state-rule` says otherwise; used by `per-state`) |
//! | `settle_seconds` | the start of each phase left out of its `settled` figures |
//! | `overall` | figures of the whole run (below) |
//! | `phases` | one object per phase seen: `index`, `name`, `start_s`, `end_s`, the figures, and `settled`: the figures of the steps that started at least `settle_seconds` after the phase did (`null` figures when there are none) |
//! | `controller` | adaptive only (else `null`): the `DraftController`'s `updates`, `switches`, `regime_changes` and final `draft_len` |
//! | `state_controller` | per-state only (else `null`): the `StateController`'s `updates`, `switches` (of any state's length, added up over the states), `regime_changes` (likewise) and final `draft_lens` (one per state, in `RequestState::index` order) |
//!
//! The figures, all added up over engine threads:
//!
//! - `steps`: engine steps (one verify step for every request of the batch);
//! - `tokens`: tokens produced (per request and step: the accepted drafts
//!   plus the bonus token; one for a request that drafted nothing);
//! - `cost_units`: the simulated cost of those steps, `B steps + P * (sum
//!   of budgets)`, a step's budget being the mean draft length per request
//!   of its batch (the policy's length for each request, see
//!   `policy`'s "The step's cost with per-request lengths"; for a
//!   batch-level policy, the one length it scheduled); under the `drafted`
//!   rule the mean of the tokens drafted instead, and with a cost table the
//!   table at that mean;
//! - `goodput`: `tokens / cost_units` (`null` without steps);
//! - `mean_draft_len`: the mean of the steps' budgets, exploration and
//!   probe steps included (`null` without steps);
//! - `tokens_per_request_step`, `drafted_per_request_step`: tokens gained
//!   and tokens drafted per verify step of one request (`null` without
//!   steps);
//! - `switches`: changes of the policy's chosen draft length
//!   (`Policy::chosen`) between consecutive steps of one engine thread,
//!   added up and divided by the number of engine threads, so a plan shared
//!   by every thread counts once per change. A switch belongs to the phase
//!   of the step that first follows it.
//!
//! The phases add up to `overall` (steps, tokens, cost units, switches).

use serde::Serialize;

/// What one engine thread counts, for one part of a phase (or one step).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Counts {
    pub steps: u64,
    /// The sum of the steps' budgets (mean draft length per request).
    pub budget_sum: f64,
    pub tokens: u64,
    pub switches: u64,
    /// The steps' cost, in cost units (under the engine model's cost rule).
    pub cost_units: f64,
    /// Verify steps of requests (a request in a step), and the tokens they
    /// drafted.
    pub request_steps: u64,
    pub drafted: u64,
}

impl Counts {
    pub fn add(&mut self, other: &Counts) {
        self.steps += other.steps;
        self.budget_sum += other.budget_sum;
        self.tokens += other.tokens;
        self.switches += other.switches;
        self.cost_units += other.cost_units;
        self.request_steps += other.request_steps;
        self.drafted += other.drafted;
    }

    /// `self - earlier`, for counts that only grow.
    pub fn since(&self, earlier: &Counts) -> Counts {
        Counts {
            steps: self.steps - earlier.steps,
            budget_sum: self.budget_sum - earlier.budget_sum,
            tokens: self.tokens - earlier.tokens,
            switches: self.switches - earlier.switches,
            cost_units: self.cost_units - earlier.cost_units,
            request_steps: self.request_steps - earlier.request_steps,
            drafted: self.drafted - earlier.drafted,
        }
    }
}

/// One phase: every step, and the settled ones.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PhaseCounts {
    pub all: Counts,
    pub settled: Counts,
}

/// One engine thread's counts, by phase index.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EngineStats {
    pub phases: Vec<PhaseCounts>,
    /// Request-steps by the draft length the policy chose for them
    /// (clamped to `K`; entry `k` counts length `k`).
    pub lens: Vec<u64>,
    /// The steps run with fewer requests in flight than the batch holds
    /// (every phase): a finite replay's ramp-down, its *drain*.
    pub drain: Counts,
}

impl EngineStats {
    /// Counts one engine step (`step.steps` is 1) of phase `phase`.
    pub fn record(&mut self, phase: usize, settled: bool, step: &Counts) {
        if self.phases.len() <= phase {
            self.phases.resize(phase + 1, PhaseCounts::default());
        }
        let counts = &mut self.phases[phase];
        counts.all.add(step);
        if settled {
            counts.settled.add(step);
        }
    }

    /// Counts the lengths chosen for the requests of one step.
    pub fn record_lens(&mut self, lens: &[usize]) {
        for &k in lens {
            if self.lens.len() <= k {
                self.lens.resize(k + 1, 0);
            }
            self.lens[k] += 1;
        }
    }

    /// Adds another thread's counts.
    pub fn add(&mut self, other: &EngineStats) {
        if self.lens.len() < other.lens.len() {
            self.lens.resize(other.lens.len(), 0);
        }
        for (mine, theirs) in self.lens.iter_mut().zip(&other.lens) {
            *mine += theirs;
        }
        if self.phases.len() < other.phases.len() {
            self.phases
                .resize(other.phases.len(), PhaseCounts::default());
        }
        for (mine, theirs) in self.phases.iter_mut().zip(&other.phases) {
            mine.all.add(&theirs.all);
            mine.settled.add(&theirs.settled);
        }
        self.drain.add(&other.drain);
    }
}

/// The figures of a part of the run (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Figures {
    pub steps: u64,
    pub tokens: u64,
    pub cost_units: f64,
    pub goodput: Option<f64>,
    pub mean_draft_len: Option<f64>,
    pub switches: f64,
    /// Tokens and drafted tokens per request-step (`null` without steps).
    pub tokens_per_request_step: Option<f64>,
    pub drafted_per_request_step: Option<f64>,
}

impl Figures {
    pub fn new(counts: &Counts, workers: usize) -> Self {
        let has_steps = counts.steps > 0;
        let per_request_step =
            |n: u64| (counts.request_steps > 0).then(|| n as f64 / counts.request_steps as f64);
        Self {
            steps: counts.steps,
            tokens: counts.tokens,
            cost_units: counts.cost_units,
            goodput: has_steps.then(|| counts.tokens as f64 / counts.cost_units),
            mean_draft_len: has_steps.then(|| counts.budget_sum / counts.steps as f64),
            switches: counts.switches as f64 / workers.max(1) as f64,
            tokens_per_request_step: per_request_step(counts.tokens),
            drafted_per_request_step: per_request_step(counts.drafted),
        }
    }
}

/// The linear step cost, in cost units.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CostLinear {
    pub base: f64,
    pub per_token: f64,
}

impl CostLinear {
    /// The cost of a step whose budget (mean draft length per request,
    /// `policy::mean_draft_len`) is `budget`: `base + per_token × budget`.
    pub fn step(&self, budget: f64) -> f64 {
        self.base + self.per_token * budget
    }
}

/// One phase of the summary.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Phase {
    pub index: usize,
    pub name: &'static str,
    pub start_s: f64,
    pub end_s: f64,
    #[serde(flatten)]
    pub figures: Figures,
    pub settled: Figures,
}

/// The controller's own counters, for `adaptive`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ControllerFigures {
    pub updates: u64,
    pub switches: u64,
    pub regime_changes: u64,
    pub draft_len: usize,
}

/// The state controller's own counters, for `per-state`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StateControllerFigures {
    pub updates: u64,
    pub switches: u64,
    pub regime_changes: u64,
    pub draft_lens: Vec<usize>,
}

/// The summary printed after the report (see the module docs for its keys).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub policy: String,
    pub workload: &'static str,
    pub seed: u64,
    pub max_draft_len: usize,
    pub workers: usize,
    pub max_batch: usize,
    pub cost_linear: CostLinear,
    /// `scheduled` or `drafted`: which mean draft length a step pays for.
    pub cost_rule: String,
    pub step_us: u64,
    pub interval_ms: u64,
    pub update_ms: u64,
    pub phase_seconds: f64,
    pub persistence: f64,
    pub state_rule: String,
    pub virtual_time: bool,
    pub seconds: f64,
    pub settle_seconds: f64,
    pub overall: Figures,
    pub phases: Vec<Phase>,
    pub controller: Option<ControllerFigures>,
    pub state_controller: Option<StateControllerFigures>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_derived_from_the_counts() {
        let counts = Counts {
            steps: 10,
            budget_sum: 30.0,
            tokens: 80,
            switches: 3,
            cost_units: 13.0,
            request_steps: 40,
            drafted: 100,
        };
        let f = Figures::new(&counts, 2);
        assert!((f.cost_units - 13.0).abs() < 1e-12);
        assert!((f.goodput.unwrap() - 80.0 / 13.0).abs() < 1e-12);
        assert_eq!(f.mean_draft_len, Some(3.0));
        assert_eq!(f.switches, 1.5);
        assert_eq!(f.tokens_per_request_step, Some(2.0));
        assert_eq!(f.drafted_per_request_step, Some(2.5));
        let none = Figures::new(&Counts::default(), 2);
        assert_eq!((none.goodput, none.mean_draft_len), (None, None));
        assert_eq!(none.tokens_per_request_step, None);
    }

    fn step(budget: f64, tokens: u64, switched: bool) -> Counts {
        Counts {
            steps: 1,
            budget_sum: budget,
            tokens,
            switches: u64::from(switched),
            cost_units: 1.0 + 0.1 * budget,
            request_steps: 4,
            drafted: budget as u64,
        }
    }

    #[test]
    fn chosen_lengths_are_counted_and_added_across_threads() {
        let mut a = EngineStats::default();
        a.record_lens(&[2, 0, 2]);
        assert_eq!(a.lens, [1, 0, 2]);
        let mut b = EngineStats::default();
        b.record_lens(&[5, 1]);
        assert_eq!(b.lens, [0, 1, 0, 0, 0, 1]);
        // The shorter one grows to the longer one's lengths, the longer
        // one keeps its own: no count is lost either way.
        let mut ab = a.clone();
        ab.add(&b);
        assert_eq!(ab.lens, [1, 1, 2, 0, 0, 1]);
        let mut ba = b.clone();
        ba.add(&a);
        assert_eq!(ba.lens, ab.lens);
    }

    #[test]
    fn engine_stats_add_up_by_phase_and_settled_is_a_part() {
        let mut a = EngineStats::default();
        a.record(0, false, &step(2.0, 5, false));
        a.record(0, true, &step(3.5, 6, true));
        let mut b = EngineStats::default();
        b.record(2, true, &step(8.0, 9, false));
        a.add(&b);
        assert_eq!(a.phases.len(), 3);
        assert_eq!(a.phases[0].all.steps, 2);
        assert_eq!(a.phases[0].settled.steps, 1);
        assert_eq!(a.phases[0].all.switches, 1);
        assert_eq!(a.phases[1], PhaseCounts::default());
        assert_eq!(a.phases[0].all.budget_sum, 5.5);
        assert_eq!(a.phases[2].all.budget_sum, 8.0);
        assert_eq!(a.phases[0].all.request_steps, 8);
        assert!((a.phases[0].all.cost_units - 2.55).abs() < 1e-12);
        let since = a.phases[0].all.since(&step(2.0, 5, false));
        assert_eq!((since.steps, since.tokens, since.drafted), (1, 6, 3));
    }
}
