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
//! | `step_us`, `interval_ms`, `update_ms`, `phase_seconds`, `virtual_time`, `seconds` | time settings (`update_ms`: the controller's update period); `seconds` is the run's length (virtual or wall-clock) |
//! | `settle_seconds` | the start of each phase left out of its `settled` figures |
//! | `overall` | figures of the whole run (below) |
//! | `phases` | one object per phase seen: `index`, `name`, `start_s`, `end_s`, the figures, and `settled`: the figures of the steps that started at least `settle_seconds` after the phase did (`null` figures when there are none) |
//! | `controller` | adaptive only (else `null`): the `DraftController`'s `updates`, `switches`, `regime_changes` and final `draft_len` |
//!
//! The figures, all added up over engine threads:
//!
//! - `steps`: engine steps (one verify step for every request of the batch);
//! - `tokens`: tokens produced (per request and step: the accepted drafts
//!   plus the bonus token; one for a request that drafted nothing);
//! - `cost_units`: the simulated cost of those steps, `B steps + P * (sum
//!   of budgets)`;
//! - `goodput`: `tokens / cost_units` (`null` without steps);
//! - `mean_draft_len`: the mean scheduled budget per step, exploration and
//!   probe steps included (`null` without steps);
//! - `switches`: changes of the policy's chosen draft length
//!   (`Policy::chosen`) between consecutive steps of one engine thread,
//!   added up and divided by the number of engine threads, so a plan shared
//!   by every thread counts once per change. A switch belongs to the phase
//!   of the step that first follows it.
//!
//! The phases add up to `overall` (steps, tokens, cost units, switches).

use serde::Serialize;

/// What one engine thread counts, for one part of a phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub steps: u64,
    pub budget_sum: u64,
    pub tokens: u64,
    pub switches: u64,
}

impl Counts {
    fn add(&mut self, other: &Counts) {
        self.steps += other.steps;
        self.budget_sum += other.budget_sum;
        self.tokens += other.tokens;
        self.switches += other.switches;
    }
}

/// One phase: every step, and the settled ones.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PhaseCounts {
    pub all: Counts,
    pub settled: Counts,
}

/// One engine thread's counts, by phase index.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    pub phases: Vec<PhaseCounts>,
}

impl EngineStats {
    /// Counts one engine step of phase `phase`.
    pub fn record(
        &mut self,
        phase: usize,
        settled: bool,
        budget: usize,
        tokens: u64,
        switched: bool,
    ) {
        if self.phases.len() <= phase {
            self.phases.resize(phase + 1, PhaseCounts::default());
        }
        let step = Counts {
            steps: 1,
            budget_sum: budget as u64,
            tokens,
            switches: u64::from(switched),
        };
        let counts = &mut self.phases[phase];
        counts.all.add(&step);
        if settled {
            counts.settled.add(&step);
        }
    }

    /// Adds another thread's counts.
    pub fn add(&mut self, other: &EngineStats) {
        if self.phases.len() < other.phases.len() {
            self.phases
                .resize(other.phases.len(), PhaseCounts::default());
        }
        for (mine, theirs) in self.phases.iter_mut().zip(&other.phases) {
            mine.all.add(&theirs.all);
            mine.settled.add(&theirs.settled);
        }
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
}

impl Figures {
    pub fn new(counts: &Counts, cost: &CostLinear, workers: usize) -> Self {
        let cost_units =
            cost.base * counts.steps as f64 + cost.per_token * counts.budget_sum as f64;
        let has_steps = counts.steps > 0;
        Self {
            steps: counts.steps,
            tokens: counts.tokens,
            cost_units,
            goodput: has_steps.then(|| counts.tokens as f64 / cost_units),
            mean_draft_len: has_steps.then(|| counts.budget_sum as f64 / counts.steps as f64),
            switches: counts.switches as f64 / workers.max(1) as f64,
        }
    }
}

/// The linear step cost, in cost units.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CostLinear {
    pub base: f64,
    pub per_token: f64,
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
    pub step_us: u64,
    pub interval_ms: u64,
    pub update_ms: u64,
    pub phase_seconds: f64,
    pub virtual_time: bool,
    pub seconds: f64,
    pub settle_seconds: f64,
    pub overall: Figures,
    pub phases: Vec<Phase>,
    pub controller: Option<ControllerFigures>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_derived_from_the_counts() {
        let cost = CostLinear {
            base: 1.0,
            per_token: 0.1,
        };
        let counts = Counts {
            steps: 10,
            budget_sum: 30,
            tokens: 80,
            switches: 3,
        };
        let f = Figures::new(&counts, &cost, 2);
        assert!((f.cost_units - 13.0).abs() < 1e-12);
        assert!((f.goodput.unwrap() - 80.0 / 13.0).abs() < 1e-12);
        assert_eq!(f.mean_draft_len, Some(3.0));
        assert_eq!(f.switches, 1.5);
        let none = Figures::new(&Counts::default(), &cost, 2);
        assert_eq!((none.goodput, none.mean_draft_len), (None, None));
    }

    #[test]
    fn engine_stats_add_up_by_phase_and_settled_is_a_part() {
        let mut a = EngineStats::default();
        a.record(0, false, 2, 5, false);
        a.record(0, true, 3, 6, true);
        let mut b = EngineStats::default();
        b.record(2, true, 8, 9, false);
        a.add(&b);
        assert_eq!(a.phases.len(), 3);
        assert_eq!(a.phases[0].all.steps, 2);
        assert_eq!(a.phases[0].settled.steps, 1);
        assert_eq!(a.phases[0].all.switches, 1);
        assert_eq!(a.phases[1], PhaseCounts::default());
        assert_eq!(a.phases[2].all.budget_sum, 8);
    }
}
