//! The what-if: every drafting policy replayed on the same n-gram traces
//! through the one engine model ([`crate::engine`]), for an operator's
//! question "would n-gram speculation pay on my traffic, with which
//! maximum draft length and which policy?".
//!
//! One engine thread keeps `batch` requests in flight, admitted in file
//! order; each request is replayed once, from output position 1 (position
//! 0 comes from prefill, which is not modelled), and the run ends when the
//! last has finished. Each step every running request drafts `d = min(k,
//! L_t)`, accepts `a = min(d, m_t)` and gains `a + 1` tokens (at most the
//! tokens it has left); the step costs `cost(mean d)` (the engine model's
//! [`CostRule::Drafted`]: a request without a match costs nothing beyond
//! the base). Every request-step is recorded through a real `Recorder`,
//! and the controllers run in the loop as an engine embeds them: their
//! plan is read at every step and updated from the recorder's snapshot
//! every `interval` engine steps. Goodput is the tokens gained at
//! positions `>= 1` over the total cost.
//!
//! A run is a function of its settings: the same traces and settings give
//! the same figures on any machine.

use std::fmt;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use specdec_metrics::{AcceptanceHistogram, StateSpace, StepCost};

use crate::engine::{self, CostRule, EngineModel, NoEvents};
use crate::error::Error;
use crate::policy::PolicySpec;
use crate::runs::RunSignal;
use crate::state_rule::StateRule;
use crate::summary::{CostLinear, Counts, Summary};
use crate::trace_set::TraceSet;
use crate::workload::Workload;

/// Engine steps between two controller updates unless told otherwise,
/// measured on real code edits (`sim/README.md`, "Real traces"): with 32
/// requests in flight, 16 steps (512 request-steps) kept the batch-level
/// controller within 2% of the best static length at every cost and `K`
/// measured, where 1, 2 and 4 steps lost up to 15% (too little data per
/// update) and 32 lost up to 5% (too slow to follow a request's runs).
pub const DEFAULT_INTERVAL: u64 = 16;

/// Requests in flight unless told otherwise.
pub const DEFAULT_BATCH: usize = 32;

/// The settings of one what-if.
#[derive(Clone, Debug)]
pub struct Settings {
    pub traces: Arc<TraceSet>,
    /// `K`: no policy drafts more (at most the traces' cap).
    pub max_draft_len: usize,
    /// What a step costs at each draft length `0..=K`.
    pub cost: StepCost,
    /// Requests in flight.
    pub batch: usize,
    /// Engine steps between controller updates.
    pub interval: u64,
    /// The fewest observations a controller decides from (`None`: the
    /// library's default, 512).
    pub update_observations: Option<u64>,
    /// The seed of the one policy that draws (vLLM #44336's probes).
    pub seed: u64,
    /// The states of `per-state` (`None`: `RequestState`'s four levels).
    pub state_space: Option<StateSpace>,
    /// What splits the per-state copy-run controller's runs first (`None`:
    /// the default for the trace's rule).
    pub run_signal: Option<RunSignal>,
    /// How the batch is fed: each request once, draining at the end, or
    /// kept full.
    pub load: Load,
}

/// How a replay feeds its batch of `batch` requests in flight.
///
/// ```
/// use specdec_sim::whatif::Load;
/// assert_eq!("saturated".parse(), Ok(Load::Saturated));
/// assert_eq!(Load::Once.as_str(), "once");
/// assert!("open".parse::<Load>().unwrap_err().contains("once or saturated"));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Load {
    /// Each request once, in file order; the run ends when the last has
    /// finished. The batch drains at the end: the longest requests run
    /// with fewer than `batch` others, each step's cost shared by fewer
    /// (an offline job over a finite set).
    #[default]
    Once,
    /// Every step at `batch` in flight (a saturated server): once the last
    /// request was admitted, a freed slot takes the file's requests again
    /// from the first, and the run ends when every request of the file
    /// has finished once, the copies in flight with it (their steps
    /// count). At batch 1 the same as [`Load::Once`].
    Saturated,
}

impl Load {
    /// Its name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Load::Once => "once",
            Load::Saturated => "saturated",
        }
    }
}

impl std::str::FromStr for Load {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "once" => Ok(Load::Once),
            "saturated" => Ok(Load::Saturated),
            _ => Err(format!("{s:?} is not a load (once or saturated)")),
        }
    }
}

impl fmt::Display for Load {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The states `per-state` uses in a what-if unless told otherwise, chosen
/// by measurement on real code edits (`sim/README.md`, "Real traces"):
/// whether the drafter's match is shorter than its `max_n`, crossed with
/// whether the previous step found no match (4 states, one acceptance
/// level). It beat the library's four acceptance levels, those levels
/// crossed with either signal, and the matched `n` in 4 buckets, at every
/// cost measured; more levels split the data too thin at 512
/// request-steps per update.
pub const DEFAULT_STATES: &str = "levels=1,short-match,after-undrafted";

/// Reads a definition of request states: comma-separated parts, the
/// first `levels=N` (the recent-acceptance levels, `1..=16`), then any of
/// `match=N` (the matched n in `N` buckets), `short-match` (shorter than
/// the drafter's `max_n`), `short-proposal` (fewer tokens to propose than
/// `K`), `after-undrafted` (the previous step found no match), `score=N`
/// (a suffix draft's score in whole tokens, `N` buckets). For example
/// `levels=2,short-match,after-undrafted`: 8 states.
pub fn parse_state_space(s: &str) -> Result<StateSpace, String> {
    let mut parts = s.split(',').map(str::trim);
    let levels = parts
        .next()
        .and_then(|p| p.strip_prefix("levels="))
        .and_then(|n| n.parse::<usize>().ok())
        .ok_or_else(|| {
            format!("{s:?}: a state definition starts with levels=N, e.g. levels=4,after-undrafted")
        })?;
    let mut space = StateSpace::new(levels).map_err(|e| format!("{s:?}: {e}"))?;
    for part in parts {
        space = match part {
            "short-match" => space.by_short_match(),
            "short-proposal" => space.by_short_proposal(),
            "after-undrafted" => space.by_after_undrafted(),
            _ => {
                let number = |prefix: &str| {
                    part.strip_prefix(prefix)
                        .and_then(|n| n.parse::<usize>().ok())
                };
                match (number("match="), number("score=")) {
                    (Some(n), _) => space.by_match_length(n),
                    (_, Some(n)) => space.by_score(n),
                    _ => {
                        return Err(format!(
                            "{s:?}: {part:?} is not a part of a state definition (match=N, \
                             short-match, short-proposal, after-undrafted, score=N)"
                        ));
                    }
                }
            }
        }
        .map_err(|e| format!("{s:?}: {e}"))?;
    }
    Ok(space)
}

/// What one policy achieved.
#[derive(Clone, Debug)]
pub struct PolicyResult {
    pub policy: PolicySpec,
    pub summary: Summary,
    /// Everything the engine recorded: the policy's acceptance histogram
    /// by draft length (the report `advise` reads).
    pub report: AcceptanceHistogram,
    /// Request-steps by the draft length the policy chose for them.
    pub chosen_lens: Vec<u64>,
    /// The steps run with fewer requests in flight than the batch: the
    /// replay's drain, once the last request has been admitted.
    pub drain: Counts,
}

impl PolicyResult {
    /// The median draft length the policy chose over its request-steps
    /// (the lower median), what it used rather than where it ended.
    pub fn median_draft_len(&self) -> Option<usize> {
        let total: u64 = self.chosen_lens.iter().sum();
        let half = total.div_ceil(2);
        let mut seen = 0;
        self.chosen_lens.iter().position(|&n| {
            seen += n;
            total > 0 && seen >= half
        })
    }

    /// Tokens per cost unit.
    pub fn goodput(&self) -> f64 {
        self.summary.overall.goodput.unwrap_or(0.0)
    }

    /// The share of the replay's cost spent in its drain: the steps run
    /// with fewer requests in flight than the batch. Near 1, the replay's
    /// goodput says how its last requests finish rather than how a full
    /// batch serves. A result of [`Settings::replay`] has steps, each of a
    /// positive cost (a trace without an output position to replay is
    /// refused, as is a cost that is not positive), so its share is a
    /// number.
    pub fn drain_share(&self) -> f64 {
        self.drain.cost_units / self.summary.overall.cost_units
    }
}

/// Every policy of a what-if at `K`, in the order of its table: no
/// speculation, every static length, then every other policy of the table
/// of policies in its order (the two controllers, the peer rules, the
/// oracle).
pub fn policies(max_draft_len: usize) -> Vec<PolicySpec> {
    let mut all: Vec<PolicySpec> = (0..=max_draft_len).map(PolicySpec::fixed).collect();
    all.extend(PolicySpec::non_static());
    all
}

impl Settings {
    /// The engine model's configuration of one policy's replay.
    pub fn config(&self, policy: PolicySpec) -> Result<engine::Config, Error> {
        AcceptanceHistogram::new(self.max_draft_len).map_err(|source| Error::MaxDraftLen {
            max_draft_len: self.max_draft_len,
            source,
        })?;
        self.cost
            .check(self.max_draft_len)
            .map_err(Error::WhatIfCost)?;
        let table: Vec<f64> = (0..=self.max_draft_len)
            .map(|k| self.cost.cost(k).expect("checked up to K"))
            .collect();
        let config = engine::Config {
            policy,
            workload: Workload::Traces,
            phase_secs: 1.0,
            persistence: crate::workload::DEFAULT_PERSISTENCE,
            state_rule: StateRule::Library,
            workers: 1,
            max_draft_len: self.max_draft_len,
            max_batch: self.batch,
            // Updates are clocked by steps; the durations only name the
            // summary's settings.
            interval: Duration::from_secs(1),
            update: Duration::from_secs(1),
            step_us: 1000,
            cost: CostLinear {
                base: table[0],
                per_token: (table[self.max_draft_len] - table[0]) / self.max_draft_len as f64,
            },
            seconds: 0,
            virtual_time: true,
            seed: self.seed,
            settle_intervals: 0,
            traces: Some(Arc::clone(&self.traces)),
            state_space: self.state_space,
            model: EngineModel {
                cost_rule: CostRule::Drafted,
                cost_table: Some(table.into()),
                steps_per_update: Some(self.interval),
                update_observations: self.update_observations,
                exhaust: true,
                saturate: self.load == Load::Saturated,
                run_signal: self.run_signal,
                step_plan: None,
            },
        };
        config.validate()?;
        Ok(config)
    }

    /// Replays one policy.
    pub fn replay(&self, policy: PolicySpec) -> Result<PolicyResult, Error> {
        Self::replay_config(self.config(policy)?, policy)
    }

    /// Replays `per-state` with its lengths per step state fixed to `plan`
    /// rather than learned: what a table of lengths per state, kept for
    /// the whole replay, earns (the plan's order is
    /// [`crate::step_states::StepStates`]' states; on a trace whose
    /// `per-state` is not read from step states, `per-state` as
    /// [`Settings::replay`] replays it). Searching over plans gives the
    /// best fixed plan in hindsight: what the states can give at best
    /// without learning (`cargo run --release -p specdec-sim --example
    /// per_state_hindsight`).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use specdec_metrics::StepCost;
    /// # use specdec_sim::{policy::PolicySpec, trace_set::TraceSet, whatif::Settings};
    /// use specdec_sim::step_states::STEP_STATES;
    /// let line = r#"{"id": 1, "output_tokens": 12, "proposal": [4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4], "match": [4, 3, 2, 1, 0, 4, 3, 2, 1, 0, 0]}"#;
    /// let traces = Arc::new(TraceSet::read(line.as_bytes(), "one").unwrap());
    /// let settings = Settings {
    ///     traces,
    ///     max_draft_len: 4,
    ///     cost: StepCost::linear(1.0, 0.1).unwrap(),
    ///     batch: 1,
    ///     interval: 16,
    ///     update_observations: None,
    ///     seed: 1,
    ///     state_space: None,
    ///     run_signal: None,
    ///     load: Default::default(),
    /// };
    /// // Every state at 1 drafts as static 1 does, from the first step
    /// // (the learning per-state starts at 4).
    /// let fixed = settings.replay_step_plan([1; STEP_STATES]).unwrap();
    /// let static1 = settings.replay(PolicySpec::fixed(1)).unwrap();
    /// assert_eq!(fixed.goodput(), static1.goodput());
    /// let learned = settings.replay(PolicySpec::per_state()).unwrap();
    /// assert_ne!(fixed.goodput(), learned.goodput());
    /// ```
    pub fn replay_step_plan(
        &self,
        plan: [usize; crate::step_states::STEP_STATES],
    ) -> Result<PolicyResult, Error> {
        let policy = PolicySpec::per_state();
        let mut config = self.config(policy)?;
        config.model.step_plan = Some(plan);
        Self::replay_config(config, policy)
    }

    fn replay_config(config: engine::Config, policy: PolicySpec) -> Result<PolicyResult, Error> {
        let recorder = engine::recorder(&config)?;
        let outcome = engine::run(&config, &recorder, None, &AtomicBool::new(false), &NoEvents)?;
        Ok(PolicyResult {
            policy,
            summary: outcome.summary,
            report: recorder.snapshot(),
            chosen_lens: outcome.chosen_lens,
            drain: outcome.drain,
        })
    }

    /// Replays every policy of `policies`, `jobs` at a time; `progress`
    /// is called after each (with the results so far and the total). The
    /// results in the order of `policies`.
    pub fn replay_all(
        &self,
        policies: &[PolicySpec],
        jobs: usize,
        progress: &(dyn Fn(usize, usize, &PolicyResult) + Sync),
    ) -> Result<Vec<PolicyResult>, Error> {
        // Every configuration checked before any work.
        for &policy in policies {
            self.config(policy)?;
        }
        let results: Vec<Mutex<Option<Result<PolicyResult, Error>>>> =
            policies.iter().map(|_| Mutex::new(None)).collect();
        let next = AtomicUsize::new(0);
        let done = AtomicUsize::new(0);
        thread::scope(|scope| {
            for _ in 0..jobs.clamp(1, policies.len().max(1)) {
                scope.spawn(|| {
                    loop {
                        // Relaxed: a work counter; the scope's join orders
                        // the results.
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&policy) = policies.get(i) else {
                            return;
                        };
                        let result = self.replay(policy);
                        if let Ok(r) = &result {
                            // Relaxed: a progress count.
                            let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                            progress(n, policies.len(), r);
                        }
                        *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
                    }
                });
            }
        });
        results
            .into_iter()
            .map(|r| {
                r.into_inner()
                    .unwrap_or_else(|e| e.into_inner())
                    .expect("every policy ran")
            })
            .collect()
    }
}

/// What a what-if found: where its traces came from, the settings, and
/// every policy's result in the order replayed (what the command line's
/// `whatif` prints, as a table, JSON or a plot).
#[derive(Clone, Debug)]
pub struct WhatIf {
    /// Where the traces were read from, as the output names it.
    pub source: String,
    /// The traces replayed.
    pub traces: Arc<TraceSet>,
    /// The settings every policy was replayed under.
    pub settings: Settings,
    /// Every policy's result, in the order replayed.
    pub results: Vec<PolicyResult>,
}

/// The best static length of `results` (the highest goodput, ties to the
/// shorter), `none` included.
pub fn best_static(results: &[PolicyResult]) -> Option<&PolicyResult> {
    results
        .iter()
        .filter(|r| r.policy.static_len().is_some())
        .fold(None, |best: Option<&PolicyResult>, r| match best {
            Some(b) if b.goodput() >= r.goodput() => Some(b),
            _ => Some(r),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn traces() -> Arc<TraceSet> {
        // Requests that copy long runs, then stretches without a match.
        let mut text = String::new();
        for i in 0..40u64 {
            let m = 60;
            let (mut proposal, mut matched) = (Vec::new(), Vec::new());
            for t in 1..m {
                let left = (m - t) as u8;
                let copying = (t / 10 + i) % 2 == 0;
                proposal.push(if copying || t % 3 == 0 { 16 } else { 0 });
                matched.push(if copying { left.min(16) } else { 0 });
            }
            text += &serde_json::json!({
                "id": i, "prompt_tokens": 100, "output_tokens": m,
                "proposal": proposal, "match": matched,
            })
            .to_string();
            text.push('\n');
        }
        Arc::new(TraceSet::read(text.as_bytes(), "test").unwrap())
    }

    fn settings() -> Settings {
        Settings {
            traces: traces(),
            max_draft_len: 16,
            cost: StepCost::linear(1.0, 0.1).unwrap(),
            batch: 8,
            interval: DEFAULT_INTERVAL,
            update_observations: None,
            seed: 1,
            state_space: None,
            run_signal: None,
            load: Load::Once,
        }
    }

    #[test]
    fn every_policy_replays_every_request_once() {
        let s = settings();
        let all = policies(16);
        let results = s.replay_all(&all, 2, &|_, _, _| {}).unwrap();
        assert_eq!(results.len(), all.len());
        for r in &results {
            // 40 requests of 59 positions: the same tokens whatever the
            // policy, the cost is what differs.
            assert_eq!(r.summary.overall.tokens, 40 * 59, "{}", r.policy);
            assert_eq!(r.report.max_draft_len(), 16);
        }
        let oracle = results.last().unwrap();
        let best = best_static(&results).unwrap();
        assert!(oracle.goodput() > best.goodput());
        // No speculation: one token per request-step, at the base cost.
        let none = &results[0].summary.overall;
        assert_eq!(none.tokens_per_request_step, Some(1.0));
        assert_eq!(none.drafted_per_request_step, Some(0.0));
        assert_eq!(results[0].report.num_spec_steps(), 0);
    }

    /// The drain is the steps with fewer requests in flight than the batch.
    #[test]
    fn the_drain_is_what_runs_below_a_full_batch() {
        // Without drafting every request of 59 positions takes 59 steps of
        // the base cost, so its requests move in waves.
        let at = |batch: usize, policy: PolicySpec| {
            Settings {
                batch,
                ..settings()
            }
            .replay(policy)
            .unwrap()
        };
        let none = PolicySpec::fixed(0);
        // 40 requests in waves of 8: the batch is always full.
        let full = at(8, none);
        assert_eq!(full.drain.steps, 0);
        assert_eq!(full.drain_share(), 0.0);
        // Two waves of 16, then 8 requests for 59 steps: a third of the cost.
        let third = at(16, none);
        assert_eq!(third.summary.overall.steps, 3 * 59);
        assert_eq!(third.drain.steps, 59);
        assert_eq!(third.drain.tokens, 8 * 59);
        assert!((third.drain_share() - 1.0 / 3.0).abs() < 1e-12);
        // A batch larger than the trace is never full; one request alone
        // always is.
        for policy in [none, PolicySpec::fixed(16), PolicySpec::adaptive()] {
            let all = at(64, policy);
            assert_eq!(all.drain.steps, all.summary.overall.steps, "{policy}");
            assert_eq!(all.drain_share(), 1.0, "{policy}");
            assert_eq!(at(1, policy).drain.steps, 0, "{policy}");
        }
    }

    #[test]
    fn loads_are_read_and_printed_by_name() {
        for load in [Load::Once, Load::Saturated] {
            assert_eq!(load.to_string().parse(), Ok(load));
            assert_eq!(load.to_string(), load.as_str());
        }
        assert_eq!(Load::Once.as_str(), "once");
        assert_eq!(Load::Saturated.as_str(), "saturated");
        assert_eq!(Load::default(), Load::Once);
        assert_eq!(
            "Once".parse::<Load>(),
            Err("\"Once\" is not a load (once or saturated)".to_string())
        );
    }

    /// A saturated replay runs every step at a full batch, until each
    /// request of the file has finished once.
    #[test]
    fn a_saturated_replay_keeps_the_batch_full() {
        let at = |batch: usize, load: Load, policy: PolicySpec| {
            Settings {
                batch,
                load,
                ..settings()
            }
            .replay(policy)
            .unwrap()
        };
        let none = PolicySpec::fixed(0);
        // 40 requests of 59 steps at 16 in flight: two waves of the file's,
        // then its last 8 with copies of its first 8.
        let third = at(16, Load::Saturated, none);
        assert_eq!(third.drain.steps, 0);
        assert_eq!(third.summary.overall.steps, 3 * 59);
        // One token per request-step, 16 requests per step.
        assert_eq!(third.summary.overall.tokens, 3 * 59 * 16);
        assert_eq!(third.summary.overall.tokens_per_request_step, Some(1.0));
        // A batch larger than the file: all 40 and 24 copies, one wave.
        let one = at(64, Load::Saturated, none);
        assert_eq!(one.drain.steps, 0);
        assert_eq!(one.summary.overall.steps, 59);
        assert_eq!(one.summary.overall.tokens, 64 * 59);
        for policy in [
            PolicySpec::fixed(16),
            PolicySpec::adaptive(),
            PolicySpec::per_state(),
        ] {
            // Requests finish out of step: the run still ends only once
            // the file's last has, with the copies in flight counted.
            let once = at(16, Load::Once, policy);
            let saturated = at(16, Load::Saturated, policy);
            assert!(once.drain.steps > 0, "{policy}");
            assert_eq!(saturated.drain.steps, 0, "{policy}");
            assert!(
                saturated.summary.overall.tokens > once.summary.overall.tokens,
                "{policy}"
            );
            // One in flight: nothing to keep full, the same replay.
            let (once, saturated) = (at(1, Load::Once, policy), at(1, Load::Saturated, policy));
            assert_eq!(once.summary.overall, saturated.summary.overall, "{policy}");
        }
    }

    /// On a trace `adaptive` and `per-state` learn from copy runs (no
    /// metrics-thread controller); `-censored` are the library's.
    #[test]
    fn on_a_trace_the_controllers_learn_from_copy_runs() {
        // Copies of 12 tokens (each position knows the rest of its copy),
        // then 5 positions with nothing to propose.
        let mut text = String::new();
        for i in 0..60u64 {
            let m = 300;
            let (mut proposal, mut matched) = (Vec::new(), Vec::new());
            for t in 1..m {
                let at = (t + i as usize) % 17;
                let copying = at < 12;
                proposal.push(if copying { 16 } else { 0 });
                matched.push(if copying {
                    (12 - at).min(m - t) as u8
                } else {
                    0
                });
            }
            text += &serde_json::json!({
                "id": i, "output_tokens": m, "proposal": proposal, "match": matched,
            })
            .to_string();
            text.push('\n');
        }
        let s = Settings {
            traces: Arc::new(TraceSet::read(text.as_bytes(), "copies").unwrap()),
            ..settings()
        };
        let runs = s.replay(PolicySpec::adaptive()).unwrap();
        let censored = s.replay(PolicySpec::adaptive_censored()).unwrap();
        assert!(runs.summary.controller.is_none());
        assert!(censored.summary.controller.is_some());
        let per_state = s.replay(PolicySpec::per_state()).unwrap();
        assert!(per_state.summary.state_controller.is_none());
        let per_state_censored = s.replay(PolicySpec::per_state_censored()).unwrap();
        assert!(per_state_censored.summary.state_controller.is_some());
        // A copy of 12 is taken in one step at k >= 12: from its first
        // choice on, that is what it drafts.
        let all = s.replay_all(&policies(16), 2, &|_, _, _| {}).unwrap();
        let best = best_static(&all).unwrap();
        assert!(best.policy.static_len().unwrap() >= 11, "{}", best.policy);
        assert!(runs.median_draft_len().unwrap() >= 11);
        for r in [&runs, &per_state] {
            assert!(
                r.goodput() > 0.97 * best.goodput(),
                "{}: {} vs {}",
                r.policy,
                r.goodput(),
                best.goodput()
            );
        }
    }

    #[test]
    fn the_median_length_is_the_lower_median_of_the_request_steps() {
        let mut r = settings().replay(PolicySpec::fixed(4)).unwrap();
        // The engine counted every request-step at the length chosen.
        let steps = r.report.num_spec_steps() + r.report.num_undrafted_steps();
        assert_eq!(r.chosen_lens.iter().sum::<u64>(), steps);
        assert_eq!(r.chosen_lens[4], steps, "{:?}", r.chosen_lens);
        assert_eq!(r.median_draft_len(), Some(4));
        for (lens, median) in [
            (vec![], None),
            (vec![0, 0], None),
            (vec![0, 0, 3], Some(2)),
            // Of an even count, the lower of the two middle ones.
            (vec![1, 1], Some(0)),
            (vec![3, 0, 1], Some(0)),
            (vec![0, 2, 0, 3], Some(3)),
        ] {
            r.chosen_lens = lens;
            assert_eq!(r.median_draft_len(), median, "{:?}", r.chosen_lens);
        }
    }

    #[test]
    fn a_replay_is_a_function_of_its_settings() {
        let s = settings();
        let a = s.replay(PolicySpec::adaptive()).unwrap();
        let b = s.replay(PolicySpec::adaptive()).unwrap();
        assert_eq!(a.summary, b.summary);
        assert_eq!(a.report, b.report);
    }

    #[test]
    fn the_report_holds_every_request_step() {
        let s = settings();
        let r = s.replay(PolicySpec::fixed(4)).unwrap();
        let o = &r.summary.overall;
        let steps = r.report.num_spec_steps() + r.report.num_undrafted_steps();
        // Every request-step is one observation (drafted or not).
        assert!(steps > 0);
        assert_eq!(
            Some(r.report.num_draft_tokens() as f64 / steps as f64),
            o.drafted_per_request_step
        );
        assert_eq!(
            r.report.row(4).map(|row| row.iter().sum::<u64>()),
            Some(
                r.report.num_spec_steps()
                    - (1..4)
                        .map(|k| r.report.row(k).unwrap().iter().sum::<u64>())
                        .sum::<u64>()
            )
        );
    }

    #[test]
    fn a_state_definition_is_read_part_by_part() {
        let space = parse_state_space("levels=2,short-match,after-undrafted").unwrap();
        assert_eq!((space.levels(), space.count()), (2, 8));
        assert_eq!(parse_state_space("levels=4,match=3").unwrap().count(), 12);
        assert_eq!(parse_state_space("levels=2,score=3").unwrap().count(), 6);
        assert!(parse_state_space("levels=2,score=x").is_err());
        assert!(parse_state_space("match=3").is_err());
        assert!(
            parse_state_space("levels=4,sideways")
                .unwrap_err()
                .contains("sideways")
        );
        assert!(parse_state_space("levels=16,match=9").is_err());
        let mut s = settings();
        s.state_space = Some(space);
        let r = s.replay(PolicySpec::per_state_censored()).unwrap();
        assert_eq!(r.summary.state_controller.unwrap().draft_lens.len(), 8);
    }

    /// Four requests of `positions + 1` output tokens whose every position
    /// proposes 12 tokens and matches 1, from a trace of drafting rule
    /// `rule` (`vllm` or `suffix`) capped at 12.
    fn rule_traces(rule: &str, positions: usize) -> Arc<TraceSet> {
        let request = format!(
            "{{\"output_tokens\":{},\"proposal\":[{}],\"match\":[{}]}}\n",
            positions + 1,
            vec!["12"; positions].join(","),
            vec!["1"; positions].join(",")
        );
        let extra = if rule == "suffix" {
            ",\"num_speculative_tokens\":12,\"suffix\":{\"depth\":6,\"factor\":1.0,\"offset\":0.0,\"min_prob\":0.1,\"cache\":10}"
        } else {
            ""
        };
        let meta = format!(
            "{{\"specdec_trace\":2,\"tokenizer\":\"t\",\"rule\":\"{rule}\",\"min_n\":1,\"max_n\":5,\"cap\":12,\"eos\":true,\"greedy\":true{extra}}}\n"
        );
        Arc::new(TraceSet::read((meta + &request.repeat(4)).as_bytes(), rule).unwrap())
    }

    /// Before their first choice the copy-run controllers draft 4 on an
    /// n-gram trace and `K` on a suffix trace.
    #[test]
    fn the_first_length_is_the_traces_rules() {
        // K = 12: adaptive starts at 4 on n-gram traces, per-state at 8;
        // both at K on suffix traces.
        for (rule, firsts) in [("vllm", [4, 8]), ("suffix", [12, 12])] {
            let mut s = settings();
            s.traces = rule_traces(rule, 39);
            s.max_draft_len = 12;
            // No choice before the run ends.
            s.update_observations = Some(1_000_000);
            for (policy, first) in [PolicySpec::adaptive(), PolicySpec::per_state()]
                .into_iter()
                .zip(firsts)
            {
                let r = s.replay(policy).unwrap();
                let used: Vec<usize> = (0..r.chosen_lens.len())
                    .filter(|&k| r.chosen_lens[k] > 0)
                    .collect();
                assert_eq!(used, [first], "{rule} {policy}");
            }
        }
    }

    /// Adaptive drafts the longest length within its share of the least
    /// estimated cost: 1.5% on an n-gram trace, 0.5% on a suffix trace.
    #[test]
    fn the_share_within_the_least_is_the_traces_rules() {
        // Every proposal of 12 matches 1 token: every run predicts 1
        // token, in one step at any k >= 1, so k costs 1 + 0.001 k and
        // 1 is least. Within 1.5% of it: every k up to 12; within 0.5%:
        // k <= 6.
        for (rule, expected) in [("vllm", 12), ("suffix", 6)] {
            let mut s = settings();
            s.traces = rule_traces(rule, 199);
            s.max_draft_len = 12;
            s.cost = StepCost::linear(1.0, 0.001).unwrap();
            s.update_observations = Some(8);
            let r = s.replay(PolicySpec::adaptive()).unwrap();
            let most = (0..r.chosen_lens.len())
                .max_by_key(|&k| r.chosen_lens[k])
                .unwrap();
            assert_eq!(most, expected, "{rule}: {:?}", r.chosen_lens);
        }
    }

    /// A suffix trace's scores reach the states: in whole tokens, read
    /// from sixteenths.
    #[test]
    fn a_suffix_drafts_score_picks_its_state() {
        struct Steps(Mutex<Vec<u64>>);
        impl engine::Events for Steps {
            fn interval(&self, interval: &engine::Interval<'_>) {
                let c = interval.state_controller.as_ref().unwrap();
                let mut steps = self.0.lock().unwrap();
                steps.resize(c.steps_by_state.len(), 0);
                for (total, &n) in steps.iter_mut().zip(&c.steps_by_state) {
                    *total += n;
                }
            }
        }
        // Drafts scoring half a token (8 sixteenths) and two and a half
        // (40), alternating; every one a proposal of 4, one of them held.
        let line = |i: usize| {
            let score: Vec<String> = (0..39)
                .map(|j| if (i + j) % 2 == 0 { "8" } else { "40" }.to_owned())
                .collect();
            format!(
                "{{\"id\":{i},\"output_tokens\":40,\"proposal\":[{}],\"match\":[{}],\"score\":[{}]}}\n",
                vec!["4"; 39].join(","),
                vec!["1"; 39].join(","),
                score.join(",")
            )
        };
        let text: String = (0..20).map(line).collect();
        let mut s = settings();
        s.traces = Arc::new(TraceSet::read(text.as_bytes(), "scores").unwrap());
        s.max_draft_len = 4;
        s.state_space = Some(parse_state_space("levels=1,score=3").unwrap());
        let config = s.config(PolicySpec::per_state_censored()).unwrap();
        let recorder = engine::recorder(&config).unwrap();
        let steps = Steps(Mutex::new(Vec::new()));
        engine::run(&config, &recorder, None, &AtomicBool::new(false), &steps).unwrap();
        let steps = steps.0.into_inner().unwrap();
        // Under one token: state 0; two or more: state 2; none in 1.
        assert_eq!(steps.len(), 3);
        assert!(steps[0] > 0 && steps[2] > 0 && steps[1] == 0, "{steps:?}");
    }

    /// Every state reaches the interval events, not only the first four.
    #[test]
    fn interval_events_carry_every_state() {
        struct Lens(Mutex<Vec<(usize, usize, usize, u64)>>);
        impl engine::Events for Lens {
            fn interval(&self, interval: &engine::Interval<'_>) {
                let c = interval.state_controller.as_ref().unwrap();
                self.0.lock().unwrap().push((
                    c.draft_lens.len(),
                    c.previous.len(),
                    c.steps_by_state.len(),
                    c.steps_by_state.iter().sum(),
                ));
            }
        }
        let mut s = settings();
        s.state_space = Some(parse_state_space("levels=2,short-match,after-undrafted").unwrap());
        let config = s.config(PolicySpec::per_state_censored()).unwrap();
        let recorder = engine::recorder(&config).unwrap();
        let lens = Lens(Mutex::new(Vec::new()));
        engine::run(&config, &recorder, None, &AtomicBool::new(false), &lens).unwrap();
        let lens = lens.0.into_inner().unwrap();
        assert!(!lens.is_empty());
        assert!(lens.iter().all(|&(a, b, c, _)| (a, b, c) == (8, 8, 8)));
        // The states' steps add up to every drafted step of the run.
        let snapshot = recorder.snapshot();
        assert_eq!(
            lens.iter().map(|l| l.3).sum::<u64>(),
            snapshot.num_spec_steps()
        );
    }

    #[test]
    fn a_k_above_the_cap_or_a_short_cost_table_is_refused() {
        let mut s = settings();
        s.max_draft_len = 65;
        assert!(s.config(PolicySpec::fixed(1)).is_err());
        let mut s = settings();
        s.cost = StepCost::table(vec![1.0, 1.1]).unwrap();
        assert!(matches!(
            s.config(PolicySpec::fixed(1)),
            Err(Error::WhatIfCost(_))
        ));
    }
}
