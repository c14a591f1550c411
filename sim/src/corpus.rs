//! The corpus report: every policy judged against each trace's best static
//! draft length over a grid of `K`, linear step costs `1 + c d` and batch
//! sizes, on many traces at once (one per repository, say), summed up per
//! cell by the median and the minimum over the traces.
//!
//! Every figure is a what-if's ([`crate::whatif`]): the same engine model
//! and settings, so a corpus of one trace gives, cell by cell, the ratios
//! to the best static length that a what-if of that cell gives, to the
//! bit. Work is shared where the engine model allows it without changing
//! a figure:
//!
//! - a static length `k` drafts the same at every `K >= k`, and neither a
//!   static length nor per-step hindsight (`oracle`) looks at the cost:
//!   each is replayed once per trace and batch (the oracle once per `K`
//!   too), the mean drafted length of each of its steps logged, and its
//!   cost at every `c` added up from that log in the engine's own order
//!   and arithmetic ([`crate::engine::interpolate`] of the what-if's cost
//!   table);
//! - only the controllers (`adaptive`, `per-state`) read the metrics
//!   thread's updates: every other policy is replayed with a single update
//!   at the end of its run. Its steps are the same; an update costs a
//!   snapshot of the recorder, which at batch 1 and `K = 64` is most of a
//!   replay's time.
//!
//! The controllers and the peer rules depend on `K` and `c`: they are
//! replayed per cell. Replays run `jobs` at a time, across traces, batches
//! and cells alike.
//!
//! [`sample`] keeps at most `n` requests of a trace, the same ones on every
//! run and machine.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use specdec_metrics::{StateSpace, StepCost};

use crate::engine::{self, EngineStep, Events, NoEvents, interpolate};
use crate::error::Error;
use crate::policy::{Kind, PolicySpec};
use crate::trace_set::TraceSet;
use crate::whatif::Settings;

/// The maximum draft lengths a corpus report covers unless told otherwise.
pub const DEFAULT_MAX_DRAFT_LENS: [usize; 2] = [8, 64];

/// The costs per drafted token (`c` of `1 + c d`) unless told otherwise.
pub const DEFAULT_COSTS: [f64; 3] = [0.02, 0.1, 0.3];

/// The batch sizes unless told otherwise.
pub const DEFAULT_BATCHES: [usize; 4] = [1, 8, 32, 128];

/// What is replayed: every cell of `K × c × batch`, each policy of
/// `policies` judged against every static length up to the cell's `K`.
#[derive(Clone, Debug)]
pub struct Grid {
    /// The `K`s (each at most every trace's cap).
    pub max_draft_lens: Vec<usize>,
    /// The costs per drafted token: a step costs `1 + c × d`, `d` the mean
    /// tokens drafted per request (the what-if's linear cost `1,c`).
    pub costs: Vec<f64>,
    /// Requests in flight.
    pub batches: Vec<usize>,
    /// Engine steps between two updates of the controllers.
    pub interval: u64,
    /// The fewest observations a controller decides from (as
    /// [`Settings::update_observations`]).
    pub update_observations: Option<u64>,
    /// The policies reported, in this order (a static length at most the
    /// smallest `K`); the best static length is always over every static
    /// length up to the cell's `K`, whichever are reported.
    pub policies: Vec<PolicySpec>,
    /// The states of `per-state` (as [`Settings::state_space`]).
    pub state_space: Option<StateSpace>,
    /// The per-state copy-run controller's first signal (as
    /// [`Settings::run_signal`]).
    pub run_signal: Option<crate::runs::RunSignal>,
    /// The seed of the one policy that draws (as [`Settings::seed`]).
    pub seed: u64,
    /// How each replay feeds its batch (as [`Settings::load`]).
    pub load: crate::whatif::Load,
}

/// One cell of the grid.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cell {
    /// `K`.
    pub max_draft_len: usize,
    /// `c`: a step costs `1 + c × d`.
    pub cost: f64,
    /// Requests in flight.
    pub batch: usize,
}

impl Grid {
    /// Every cell, `K` outermost, then `c`, then the batch.
    pub fn cells(&self) -> Vec<Cell> {
        let mut cells = Vec::new();
        for &max_draft_len in &self.max_draft_lens {
            for &cost in &self.costs {
                for &batch in &self.batches {
                    cells.push(Cell {
                        max_draft_len,
                        cost,
                        batch,
                    });
                }
            }
        }
        cells
    }

    /// The cell at (`K`, `c`, batch) indices.
    fn cell_index(&self, k: usize, c: usize, b: usize) -> usize {
        (k * self.costs.len() + c) * self.batches.len() + b
    }

    fn longest(&self) -> usize {
        self.max_draft_lens.iter().copied().max().unwrap_or(0)
    }

    /// The what-if settings of one replay.
    fn settings(
        &self,
        traces: &Arc<TraceSet>,
        max_draft_len: usize,
        cost: f64,
        batch: usize,
    ) -> Result<Settings, Error> {
        Ok(Settings {
            traces: Arc::clone(traces),
            max_draft_len,
            cost: StepCost::linear(1.0, cost).map_err(Error::WhatIfCost)?,
            batch,
            interval: self.interval,
            update_observations: self.update_observations,
            seed: self.seed,
            state_space: self.state_space,
            run_signal: self.run_signal,
            load: self.load,
        })
    }
}

/// One trace of a set, by name.
#[derive(Clone, Debug)]
pub struct Trace {
    /// How the output names it (its path).
    pub name: String,
    /// Its requests (perhaps a [`sample`]).
    pub traces: Arc<TraceSet>,
    /// Requests in the file, before any sample.
    pub file_requests: usize,
}

/// A set of traces judged together (one trace per repository, say).
#[derive(Clone, Debug)]
pub struct Set {
    /// How the output names it.
    pub name: String,
    /// Its traces, at least one.
    pub traces: Vec<Trace>,
}

/// The median and the minimum of a figure over a set's traces.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    /// The median (of an even count, the mean of the two middle values).
    pub median: f64,
    /// The minimum.
    pub min: f64,
    /// The trace at the minimum (its index in the set; the first of
    /// equals).
    pub min_trace: usize,
}

impl Spread {
    /// The spread of `values` (one per trace, at least one).
    pub fn of(values: &[f64]) -> Self {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        let (min_trace, &min) = values
            .iter()
            .enumerate()
            .fold(None, |best: Option<(usize, &f64)>, (i, v)| match best {
                Some((_, b)) if b.total_cmp(v).is_le() => best,
                _ => Some((i, v)),
            })
            .expect("a set has a trace");
        Self {
            median,
            min,
            min_trace,
        }
    }
}

/// One policy in one cell.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyCell {
    /// The policy.
    pub policy: PolicySpec,
    /// Its goodput over each trace's best static goodput, in trace order.
    pub ratios: Vec<f64>,
    /// Their median and minimum.
    pub spread: Spread,
}

/// One cell of one set.
#[derive(Clone, Debug, PartialEq)]
pub struct CellResult {
    /// The cell.
    pub cell: Cell,
    /// Each trace's best static length (the highest goodput among
    /// `0..=K`, ties to the shorter), in trace order.
    pub best_static: Vec<usize>,
    /// Their goodputs (tokens per unit of step cost), in trace order: what
    /// compares two drafters on the same requests.
    pub best_static_goodput: Vec<f64>,
    /// Their median.
    pub best_static_median: f64,
    /// The share of each best static length's cost spent in its replay's
    /// drain (fewer requests in flight than the batch, once none waits),
    /// in trace order: near 1, the cell says how the last requests of a
    /// finite replay finish more than how a full batch serves.
    pub best_static_drain_share: Vec<f64>,
    /// Their median.
    pub best_static_drain_share_median: f64,
    /// Every policy of the grid, in its order.
    pub policies: Vec<PolicyCell>,
}

/// What a set gave: every cell, in [`Grid::cells`] order.
#[derive(Clone, Debug)]
pub struct SetResult {
    /// The set, as replayed (its traces perhaps samples).
    pub set: Set,
    /// Every cell of the grid.
    pub cells: Vec<CellResult>,
}

/// A whole report: the grid, the sample, and every set's cells (what the
/// command line's `corpus` prints).
#[derive(Clone, Debug)]
pub struct Report {
    /// What was replayed.
    pub grid: Grid,
    /// At most this many requests of each trace ([`sample`]; 0: all).
    pub sample: usize,
    /// Every set, in the order given.
    pub sets: Vec<SetResult>,
}

/// How far a run is: cells whose every replay is done, and replays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Cells (over every set) whose replays are all done, of `cells`.
    pub cells_done: usize,
    pub cells: usize,
    /// Replays done, of `replays`.
    pub replays_done: usize,
    pub replays: usize,
}

/// A replay that failed, or settings refused before any: the error, and
/// the trace it concerns.
#[derive(Debug)]
pub struct CorpusError {
    /// The trace's name (`None`: the settings themselves).
    pub trace: Option<String>,
    /// What the engine model refused.
    pub error: Error,
}

impl std::fmt::Display for CorpusError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.trace {
            Some(t) => write!(f, "{t}: {}", self.error),
            None => write!(f, "{}", self.error),
        }
    }
}

impl std::error::Error for CorpusError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// One replay of a run (the indices are the grid's and the sets').
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Job {
    /// `static:k` at every `c`: one goodput per cost.
    Static {
        set: usize,
        trace: usize,
        batch: usize,
        k: usize,
    },
    /// `oracle` at `K` (index `max_draft_len`) at every `c`.
    Oracle {
        set: usize,
        trace: usize,
        batch: usize,
        max_draft_len: usize,
    },
    /// Any other policy in one cell: one goodput.
    Policy {
        set: usize,
        trace: usize,
        batch: usize,
        max_draft_len: usize,
        cost: usize,
        policy: usize,
    },
}

/// Every step's mean tokens drafted per request, in order (what the
/// `drafted` cost rule charges a step for), and whether it ran in the
/// drain.
struct StepLog {
    /// The batch of the replay: a step with fewer requests is its drain.
    batch: usize,
    /// Each step's mean tokens drafted per request, and whether it ran
    /// in the drain.
    steps: Mutex<Vec<(f64, bool)>>,
}

impl Events for StepLog {
    fn engine_step(&self, step: &EngineStep) {
        // The engine's own division (`engine_thread.rs`, `step`).
        let mean = step.drafted as f64 / step.batch.max(1) as f64;
        self.steps
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((mean, step.batch < self.batch));
    }
}

/// A replay's goodput and, where it was re-costed step by step
/// ([`replay_at_costs`]), the share of its cost spent in its drain (the
/// steps with fewer requests in flight than the batch).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Replayed {
    goodput: f64,
    drain_share: Option<f64>,
}

/// Replays `policy` under `settings`; for a policy that is not a
/// controller, with one update at the end (the same steps, faster). The
/// tokens gained and the run's goodput.
fn replay(
    settings: &Settings,
    policy: PolicySpec,
    events: &dyn Events,
) -> Result<(u64, f64), Error> {
    let mut config = settings.config(policy)?;
    if policy.kind() != Kind::Controller {
        config.model.steps_per_update = Some(u64::MAX);
    }
    let recorder = engine::recorder(&config)?;
    let outcome = engine::run(&config, &recorder, None, &AtomicBool::new(false), events)?;
    let overall = outcome.summary.overall;
    Ok((overall.tokens, overall.goodput.unwrap_or(0.0)))
}

/// Replays `policy` (which does not look at the cost) once, and its
/// goodput and drain share at each cost of `tables` (costs by draft
/// length, the what-if's tables), each added up step by step as the
/// engine adds it.
fn replay_at_costs(
    settings: &Settings,
    policy: PolicySpec,
    tables: &[Vec<f64>],
) -> Result<Vec<Replayed>, Error> {
    let log = StepLog {
        batch: settings.batch,
        steps: Mutex::default(),
    };
    let (tokens, _) = replay(settings, policy, &log)?;
    let steps = log.steps.into_inner().unwrap_or_else(|e| e.into_inner());
    Ok(tables
        .iter()
        .map(|table| {
            if steps.is_empty() {
                return Replayed {
                    goodput: 0.0,
                    drain_share: Some(0.0),
                };
            }
            let (mut cost, mut drain) = (0.0, 0.0);
            for &(mean, drained) in &steps {
                let step = interpolate(table, mean);
                cost += step;
                if drained {
                    drain += step;
                }
            }
            Replayed {
                goodput: tokens as f64 / cost,
                drain_share: Some(drain / cost),
            }
        })
        .collect())
}

/// The jobs of a run, the cells each feeds, in the order they are run.
struct Plan {
    jobs: Vec<Job>,
    /// Per job, the cells (over every set) it feeds.
    feeds: Vec<Vec<usize>>,
    index: HashMap<Job, usize>,
}

fn plan(grid: &Grid, sets: &[Set]) -> Plan {
    let cells = grid.cells().len();
    let mut jobs = Vec::new();
    let mut feeds = Vec::new();
    let oracle = grid.policies.iter().any(|p| p.kind() == Kind::Oracle);
    for (s, set) in sets.iter().enumerate() {
        let base = s * cells;
        for b in 0..grid.batches.len() {
            for trace in 0..set.traces.len() {
                for k in 0..=grid.longest() {
                    jobs.push(Job::Static {
                        set: s,
                        trace,
                        batch: b,
                        k,
                    });
                    feeds.push(
                        (0..grid.max_draft_lens.len())
                            .filter(|&ki| grid.max_draft_lens[ki] >= k)
                            .flat_map(|ki| {
                                (0..grid.costs.len()).map(move |c| base + grid.cell_index(ki, c, b))
                            })
                            .collect(),
                    );
                }
            }
            for ki in 0..grid.max_draft_lens.len() {
                for trace in 0..set.traces.len() {
                    if oracle {
                        jobs.push(Job::Oracle {
                            set: s,
                            trace,
                            batch: b,
                            max_draft_len: ki,
                        });
                        feeds.push(
                            (0..grid.costs.len())
                                .map(|c| base + grid.cell_index(ki, c, b))
                                .collect(),
                        );
                    }
                }
                for c in 0..grid.costs.len() {
                    for trace in 0..set.traces.len() {
                        for (p, policy) in grid.policies.iter().enumerate() {
                            if matches!(
                                policy.kind(),
                                Kind::Oracle | Kind::Static | Kind::NoSpeculation
                            ) {
                                continue;
                            }
                            jobs.push(Job::Policy {
                                set: s,
                                trace,
                                batch: b,
                                max_draft_len: ki,
                                cost: c,
                                policy: p,
                            });
                            feeds.push(vec![base + grid.cell_index(ki, c, b)]);
                        }
                    }
                }
            }
        }
    }
    let index = jobs.iter().enumerate().map(|(i, j)| (*j, i)).collect();
    Plan { jobs, feeds, index }
}

/// Runs every replay of `grid` on every set, `jobs` at a time, calling
/// `progress` after each; every set's cells, in the order of `sets`.
/// Every replay's settings are checked before any runs: a `K` above a
/// trace's cap, a cost out of range or a static policy above a `K` is an
/// error before any work.
pub fn run(
    grid: &Grid,
    sets: &[Set],
    jobs: usize,
    progress: &(dyn Fn(&Progress) + Sync),
) -> Result<Vec<SetResult>, CorpusError> {
    let everywhere = |error| CorpusError { trace: None, error };
    for &k in &grid.max_draft_lens {
        for policy in &grid.policies {
            policy.check(k).map_err(everywhere)?;
        }
    }
    let tables: Vec<Vec<f64>> = grid
        .costs
        .iter()
        .map(|&c| {
            let cost = StepCost::linear(1.0, c).map_err(|e| everywhere(Error::WhatIfCost(e)))?;
            Ok((0..=grid.longest())
                .map(|k| cost.cost(k).unwrap_or(f64::NAN))
                .collect())
        })
        .collect::<Result<_, CorpusError>>()?;
    // Every trace against every `K` (its cap), before any work.
    for set in sets {
        for trace in &set.traces {
            for &k in &grid.max_draft_lens {
                for &c in &grid.costs {
                    for &b in &grid.batches {
                        grid.settings(&trace.traces, k, c, b)
                            .and_then(|s| s.config(PolicySpec::fixed(0)))
                            .map_err(|error| CorpusError {
                                trace: Some(trace.name.clone()),
                                error,
                            })?;
                    }
                }
            }
        }
    }
    let plan = plan(grid, sets);
    let cells = grid.cells();
    let mut remaining: Vec<usize> = vec![0; cells.len() * sets.len()];
    for feeds in &plan.feeds {
        for &c in feeds {
            remaining[c] += 1;
        }
    }
    let remaining: Vec<AtomicUsize> = remaining.into_iter().map(AtomicUsize::new).collect();
    let results: Vec<Mutex<Option<Vec<Replayed>>>> =
        plan.jobs.iter().map(|_| Mutex::new(None)).collect();
    let failed: Mutex<Option<CorpusError>> = Mutex::new(None);
    let stop = AtomicBool::new(false);
    let next = AtomicUsize::new(0);
    let (replays_done, cells_done) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let run_one = |job: Job| -> Result<Vec<Replayed>, CorpusError> {
        let (set, trace) = match job {
            Job::Static { set, trace, .. }
            | Job::Oracle { set, trace, .. }
            | Job::Policy { set, trace, .. } => (set, trace),
        };
        let t = &sets[set].traces[trace];
        let at = |error| CorpusError {
            trace: Some(t.name.clone()),
            error,
        };
        match job {
            Job::Static { batch, k, .. } => {
                let s = grid
                    .settings(
                        &t.traces,
                        grid.longest(),
                        grid.costs[0],
                        grid.batches[batch],
                    )
                    .map_err(at)?;
                replay_at_costs(&s, PolicySpec::fixed(k), &tables).map_err(at)
            }
            Job::Oracle {
                batch,
                max_draft_len,
                ..
            } => {
                let k = grid.max_draft_lens[max_draft_len];
                let s = grid
                    .settings(&t.traces, k, grid.costs[0], grid.batches[batch])
                    .map_err(at)?;
                replay_at_costs(&s, PolicySpec::oracle(), &tables).map_err(at)
            }
            Job::Policy {
                batch,
                max_draft_len,
                cost,
                policy,
                ..
            } => {
                let s = grid
                    .settings(
                        &t.traces,
                        grid.max_draft_lens[max_draft_len],
                        grid.costs[cost],
                        grid.batches[batch],
                    )
                    .map_err(at)?;
                replay(&s, grid.policies[policy], &NoEvents)
                    .map(|(_, goodput)| {
                        vec![Replayed {
                            goodput,
                            drain_share: None,
                        }]
                    })
                    .map_err(at)
            }
        }
    };
    thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, plan.jobs.len().max(1)) {
            scope.spawn(|| {
                // Relaxed: a work counter and a stop flag; the scope's join
                // orders the results.
                while !stop.load(Ordering::Relaxed) {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&job) = plan.jobs.get(i) else {
                        return;
                    };
                    match run_one(job) {
                        Ok(goodputs) => {
                            *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(goodputs);
                            let mut finished = 0;
                            for &c in &plan.feeds[i] {
                                if remaining[c].fetch_sub(1, Ordering::Relaxed) == 1 {
                                    finished += 1;
                                }
                            }
                            let cells_done =
                                cells_done.fetch_add(finished, Ordering::Relaxed) + finished;
                            let replays_done = replays_done.fetch_add(1, Ordering::Relaxed) + 1;
                            progress(&Progress {
                                cells_done,
                                cells: remaining.len(),
                                replays_done,
                                replays: plan.jobs.len(),
                            });
                        }
                        Err(e) => {
                            stop.store(true, Ordering::Relaxed);
                            let mut failed = failed.lock().unwrap_or_else(|e| e.into_inner());
                            failed.get_or_insert(e);
                            return;
                        }
                    }
                }
            });
        }
    });
    if let Some(e) = failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    let results: Vec<Vec<Replayed>> = results
        .into_iter()
        .map(|r| {
            r.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .expect("every replay ran")
        })
        .collect();
    let replayed = |job: Job, at: usize| results[plan.index[&job]][at];
    let goodput = |job: Job, at: usize| replayed(job, at).goodput;
    Ok(sets
        .iter()
        .enumerate()
        .map(|(s, set)| SetResult {
            set: set.clone(),
            cells: (0..grid.max_draft_lens.len())
                .flat_map(|ki| {
                    (0..grid.costs.len())
                        .flat_map(move |c| (0..grid.batches.len()).map(move |b| (ki, c, b)))
                })
                .map(|(ki, c, b)| {
                    let k_max = grid.max_draft_lens[ki];
                    let statics = |trace: usize| -> Vec<f64> {
                        (0..=k_max)
                            .map(|k| {
                                goodput(
                                    Job::Static {
                                        set: s,
                                        trace,
                                        batch: b,
                                        k,
                                    },
                                    c,
                                )
                            })
                            .collect()
                    };
                    let per_trace: Vec<(usize, f64, Vec<f64>)> = (0..set.traces.len())
                        .map(|trace| {
                            let g = statics(trace);
                            // As `whatif::best_static`: the highest, ties to
                            // the shorter.
                            let best = (0..g.len())
                                .fold(0, |best, k| if g[best] >= g[k] { best } else { k });
                            (best, g[best], g)
                        })
                        .collect();
                    let policies = grid
                        .policies
                        .iter()
                        .enumerate()
                        .map(|(p, &policy)| {
                            let ratios: Vec<f64> = per_trace
                                .iter()
                                .enumerate()
                                .map(|(trace, (_, best, g))| {
                                    let mine = match (policy.kind(), policy.static_len()) {
                                        (_, Some(k)) => g[k],
                                        (Kind::Oracle, _) => goodput(
                                            Job::Oracle {
                                                set: s,
                                                trace,
                                                batch: b,
                                                max_draft_len: ki,
                                            },
                                            c,
                                        ),
                                        _ => goodput(
                                            Job::Policy {
                                                set: s,
                                                trace,
                                                batch: b,
                                                max_draft_len: ki,
                                                cost: c,
                                                policy: p,
                                            },
                                            0,
                                        ),
                                    };
                                    mine / best
                                })
                                .collect();
                            PolicyCell {
                                policy,
                                spread: Spread::of(&ratios),
                                ratios,
                            }
                        })
                        .collect();
                    let best_static: Vec<usize> = per_trace.iter().map(|t| t.0).collect();
                    let as_f64: Vec<f64> = best_static.iter().map(|&k| k as f64).collect();
                    let drain: Vec<f64> = best_static
                        .iter()
                        .enumerate()
                        .map(|(trace, &k)| {
                            replayed(
                                Job::Static {
                                    set: s,
                                    trace,
                                    batch: b,
                                    k,
                                },
                                c,
                            )
                            .drain_share
                            .expect("a static length is re-costed step by step")
                        })
                        .collect();
                    CellResult {
                        cell: Cell {
                            max_draft_len: k_max,
                            cost: grid.costs[c],
                            batch: grid.batches[b],
                        },
                        best_static_median: Spread::of(&as_f64).median,
                        best_static_drain_share_median: Spread::of(&drain).median,
                        best_static_drain_share: drain,
                        best_static_goodput: per_trace.iter().map(|t| t.1).collect(),
                        best_static,
                        policies,
                    }
                })
                .collect(),
        })
        .collect())
}

/// At most `n` requests of `traces` (those with an output position to
/// replay), the same on every run and machine: the `n` whose ids (their
/// JSON text, quotes included) hash lowest (FNV-1a, mixed; ties to the
/// earlier), in file order. `n = 0`,
/// or a trace of at most `n` such requests, keeps it whole.
pub fn sample(traces: &Arc<TraceSet>, n: usize) -> Arc<TraceSet> {
    let replayable: Vec<usize> = (0..traces.requests().len())
        .filter(|&i| !traces.requests()[i].positions.is_empty())
        .collect();
    if n == 0 || replayable.len() <= n {
        return Arc::clone(traces);
    }
    let mut ranked: Vec<(u64, usize)> = replayable
        .iter()
        .map(|&i| (id_hash(&traces.requests()[i].id), i))
        .collect();
    ranked.sort_unstable();
    let mut keep = vec![false; traces.requests().len()];
    for &(_, i) in &ranked[..n] {
        keep[i] = true;
    }
    Arc::new(
        traces
            .subset(|i, _| keep[i])
            .expect("a kept request has a position"),
    )
}

/// FNV-1a of the id's bytes, through SplitMix64's finalizer (FNV alone
/// orders ids that differ in their last byte nearly by that byte).
fn id_hash(id: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in id.as_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::whatif::{self, best_static};

    /// Requests that copy runs of different lengths, then stretches
    /// without a match; `seed` varies them.
    fn traces(seed: u64, requests: u64) -> Arc<TraceSet> {
        let mut text = String::new();
        for i in 0..requests {
            let m = 40 + (i * 7 + seed) % 30;
            let (mut proposal, mut matched) = (Vec::new(), Vec::new());
            for t in 1..m {
                let left = (m - t) as u8;
                let copying = (t / (4 + seed % 5) + i) % 2 == 0;
                let p = if copying || t % 3 == 0 {
                    12 + (seed % 4) as u8
                } else {
                    0
                };
                proposal.push(p);
                matched.push(if copying {
                    left.min(p).min(9 + seed as u8 % 3)
                } else {
                    0
                });
            }
            text += &serde_json::json!({
                "id": format!("r{seed}-{i}"), "prompt_tokens": 100, "output_tokens": m,
                "proposal": proposal, "match": matched,
            })
            .to_string();
            text.push('\n');
        }
        Arc::new(TraceSet::read(text.as_bytes(), "test").unwrap())
    }

    fn grid() -> Grid {
        Grid {
            max_draft_lens: vec![4, 8],
            costs: vec![0.02, 0.3],
            batches: vec![1, 8],
            interval: whatif::DEFAULT_INTERVAL,
            update_observations: None,
            policies: {
                let mut p: Vec<PolicySpec> = (0..=4).map(PolicySpec::fixed).collect();
                p.extend(PolicySpec::non_static());
                p
            },
            state_space: Some(whatif::parse_state_space(whatif::DEFAULT_STATES).unwrap()),
            run_signal: None,
            seed: 1,
            load: whatif::Load::Once,
        }
    }

    fn set(seeds: &[u64]) -> Set {
        Set {
            name: "test".into(),
            traces: seeds
                .iter()
                .map(|&s| Trace {
                    name: format!("t{s}"),
                    traces: traces(s, 12),
                    file_requests: 12,
                })
                .collect(),
        }
    }

    /// Every figure of a one-trace set is the what-if's of its cell, to
    /// the bit: the shared static and oracle replays, the single update
    /// of the peers, and the ratios.
    #[test]
    fn a_one_trace_set_gives_the_whatifs_figures() {
        let grid = grid();
        let set = set(&[3]);
        let results = run(&grid, std::slice::from_ref(&set), 2, &|_| {}).unwrap();
        let cells = &results[0].cells;
        assert_eq!(cells.len(), 8);
        for cell in cells {
            let c = cell.cell;
            let settings = grid
                .settings(&set.traces[0].traces, c.max_draft_len, c.cost, c.batch)
                .unwrap();
            let all = whatif::policies(c.max_draft_len);
            let replayed = settings.replay_all(&all, 2, &|_, _, _| {}).unwrap();
            let best = best_static(&replayed).unwrap();
            assert_eq!(cell.best_static, vec![best.policy.static_len().unwrap()]);
            assert_eq!(cell.best_static_goodput, vec![best.goodput()]);
            assert_eq!(cell.best_static_drain_share, vec![best.drain_share()]);
            assert_eq!(cell.best_static_drain_share_median, best.drain_share());
            for p in &cell.policies {
                let r = replayed.iter().find(|r| r.policy == p.policy).unwrap();
                let ratio = r.goodput() / best.goodput();
                assert_eq!(p.ratios, vec![ratio], "{} at {c:?}", p.policy);
                assert_eq!(p.spread.median.to_bits(), ratio.to_bits());
                assert_eq!(p.spread.min.to_bits(), ratio.to_bits());
            }
        }
        let c = cells[7].cell;
        assert_eq!((c.max_draft_len, c.cost, c.batch), (8, 0.3, 8));
    }

    #[test]
    fn median_and_min_over_traces() {
        let s = Spread::of(&[0.9, 0.7, 1.0]);
        assert_eq!((s.median, s.min, s.min_trace), (0.9, 0.7, 1));
        let s = Spread::of(&[0.8, 0.6, 1.0, 0.6]);
        assert_eq!((s.median, s.min, s.min_trace), (0.7, 0.6, 1));
        let s = Spread::of(&[1.25]);
        assert_eq!((s.median, s.min, s.min_trace), (1.25, 1.25, 0));
    }

    #[test]
    fn three_traces_are_each_their_own_whatif() {
        let grid = Grid {
            max_draft_lens: vec![8],
            costs: vec![0.1],
            batches: vec![8],
            policies: vec![PolicySpec::adaptive(), PolicySpec::oracle()],
            ..grid()
        };
        let three = set(&[1, 2, 5]);
        let results = run(&grid, std::slice::from_ref(&three), 2, &|_| {}).unwrap();
        let cell = &results[0].cells[0];
        for (i, trace) in three.traces.iter().enumerate() {
            let single = Set {
                name: "one".into(),
                traces: vec![trace.clone()],
            };
            let alone = run(&grid, &[single], 1, &|_| {}).unwrap();
            for (p, q) in cell.policies.iter().zip(&alone[0].cells[0].policies) {
                assert_eq!(p.ratios[i], q.ratios[0]);
            }
        }
        for p in &cell.policies {
            let mut sorted = p.ratios.clone();
            sorted.sort_by(f64::total_cmp);
            assert_eq!(p.spread.median, sorted[1]);
            assert_eq!(p.spread.min, sorted[0]);
            assert_eq!(p.ratios[p.spread.min_trace], sorted[0]);
        }
    }

    #[test]
    fn progress_counts_every_cell_and_replay() {
        let grid = grid();
        let seen = Mutex::new(Vec::new());
        run(&grid, &[set(&[1]), set(&[2])], 2, &|p| {
            seen.lock().unwrap().push(*p)
        })
        .unwrap();
        let seen = seen.into_inner().unwrap();
        let last = seen.iter().max_by_key(|p| p.replays_done).unwrap();
        assert_eq!(last.replays_done, last.replays);
        assert_eq!(
            (last.cells, seen.iter().map(|p| p.cells_done).max()),
            (16, Some(16))
        );
        // Per set and batch: 9 static lengths, the oracle per K, 8
        // policies per K and c.
        assert_eq!(last.replays, 2 * 2 * (9 + 2 + 2 * 2 * 8));
    }

    /// A static length feeds the cells of every `K` at least its own (at
    /// every cost), the oracle those of its `K`, any other policy its
    /// cell; without `oracle` among the policies it is not replayed.
    #[test]
    fn each_replay_feeds_the_cells_it_is_a_figure_of() {
        let grid = grid();
        let plan = plan(&grid, &[set(&[1])]);
        let feeds = |job: Job| {
            let mut cells = plan.feeds[plan.index[&job]].clone();
            cells.sort_unstable();
            cells
        };
        let cell = |k: usize, c: usize, b: usize| grid.cell_index(k, c, b);
        let at = |k| Job::Static {
            set: 0,
            trace: 0,
            batch: 1,
            k,
        };
        assert_eq!(
            feeds(at(3)),
            vec![cell(0, 0, 1), cell(0, 1, 1), cell(1, 0, 1), cell(1, 1, 1)]
        );
        assert_eq!(feeds(at(4)).len(), 4);
        assert_eq!(feeds(at(6)), vec![cell(1, 0, 1), cell(1, 1, 1)]);
        let oracle = Job::Oracle {
            set: 0,
            trace: 0,
            batch: 0,
            max_draft_len: 1,
        };
        assert_eq!(feeds(oracle), vec![cell(1, 0, 0), cell(1, 1, 0)]);
        let no_oracle = Grid {
            policies: vec![PolicySpec::adaptive()],
            ..grid.clone()
        };
        let plan = self::plan(&no_oracle, &[set(&[1])]);
        assert!(!plan.jobs.iter().any(|j| matches!(j, Job::Oracle { .. })));
        // Per batch: 9 static lengths and adaptive in each of 4 cells.
        assert_eq!(plan.jobs.len(), 2 * (9 + 4));
        let only_oracle = Grid {
            policies: vec![PolicySpec::oracle()],
            ..grid
        };
        let plan = self::plan(&only_oracle, &[set(&[1])]);
        assert_eq!(plan.jobs.len(), 2 * (9 + 2));
    }

    #[test]
    fn an_error_names_its_trace() {
        let e = CorpusError {
            trace: Some("a.jsonl".into()),
            error: Error::ZeroCounts,
        };
        assert_eq!(e.to_string(), format!("a.jsonl: {}", Error::ZeroCounts));
        assert!(std::error::Error::source(&e).is_some());
        let e = CorpusError {
            trace: None,
            error: Error::ZeroCounts,
        };
        assert_eq!(e.to_string(), Error::ZeroCounts.to_string());
    }

    #[test]
    fn a_k_above_a_traces_cap_is_refused_naming_it() {
        let mut grid = grid();
        grid.max_draft_lens = vec![8, 65];
        let e = run(&grid, &[set(&[1])], 1, &|_| {}).unwrap_err();
        assert_eq!(e.trace.as_deref(), Some("t1"));
        let mut grid = self::grid();
        grid.policies = vec![PolicySpec::fixed(6)];
        assert!(matches!(
            run(&grid, &[set(&[1])], 1, &|_| {}).unwrap_err().error,
            Error::StaticAboveMax { .. }
        ));
    }

    /// The requests `sample(traces(1, 50), 10)` keeps, by index (checked
    /// against FNV-1a and SplitMix64's finalizer written apart, in Python,
    /// on the ids' JSON text `"r1-0"`, ...).
    const PINNED: &[usize] = &[4, 10, 18, 27, 36, 37, 38, 40, 42, 48];

    /// The hash, against FNV-1a and SplitMix64's finalizer written apart.
    #[test]
    fn the_id_hash_is_fnv_1a_mixed() {
        assert_eq!(id_hash(""), 0xf52a_15e9_a9b5_e89b);
        assert_eq!(id_hash("\"r1-0\""), 0x772c_ba3b_6c10_5827);
        assert_eq!(id_hash("7"), 0x7aed_ddb7_7282_6587);
    }

    #[test]
    fn a_sample_is_deterministic_bounded_and_in_file_order() {
        let all = traces(1, 50);
        let a = sample(&all, 10);
        let b = sample(&traces(1, 50), 10);
        assert_eq!(a.requests().len(), 10);
        assert_eq!(a, b);
        let order: Vec<usize> = a
            .requests()
            .iter()
            .map(|r| all.requests().iter().position(|q| q == r).unwrap())
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
        // Not merely the first ten, and the same in every version: a
        // report's sample must not change under its readers.
        assert_eq!(order, PINNED);
        // A larger sample keeps the smaller one's requests.
        let c = sample(&all, 20);
        assert!(a.requests().iter().all(|r| c.requests().contains(r)));
        assert!(Arc::ptr_eq(&sample(&all, 0), &all));
        assert!(Arc::ptr_eq(&sample(&all, 50), &all));
        assert_eq!(
            a.positions(),
            a.requests()
                .iter()
                .map(|r| r.positions.len() as u64)
                .sum::<u64>()
        );
    }
}
