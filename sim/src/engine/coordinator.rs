//! The coordinator (the metrics thread): every update period it snapshots
//! the recorder, feeds the controllers and publishes their plans; every
//! interval it reports the interval.

use super::*;

pub(super) struct Coordinator<'a> {
    pub(super) config: &'a Config,
    pub(super) recorder: &'a Recorder,
    pub(super) events: &'a dyn Events,
    pub(super) live: &'a [Live],
    pub(super) controller: Option<&'a mut DraftController>,
    pub(super) plan: Option<&'a SharedPlan>,
    pub(super) state_controller: Option<&'a mut StateController>,
    pub(super) state_plan: Option<&'a SharedStatePlan>,
    pub(super) state_table: Option<&'a SharedStateTable>,
    /// The snapshot at the end of the last interval.
    pub(super) previous: AcceptanceHistogram,
    /// The snapshot at the last controller update.
    pub(super) previous_update: AcceptanceHistogram,
    /// The same, per request state (one state without `per-state`).
    pub(super) previous_states: Vec<AcceptanceHistogram>,
    pub(super) previous_update_states: Vec<AcceptanceHistogram>,
    pub(super) previous_live: Vec<Counts>,
    pub(super) chosen: Vec<usize>,
    /// The interval (from 0), and when it started.
    pub(super) index: u64,
    pub(super) start_s: f64,
    /// The coordinator's tick (from 0).
    pub(super) tick: u64,
    /// The controller during the current interval: its draft length before
    /// the interval's first update, and whether an update detected a change
    /// of regime.
    pub(super) interval_controller: Option<(usize, bool)>,
    /// The same for the state controller: every state's length.
    pub(super) interval_state_controller: Option<(Vec<usize>, bool)>,
}

impl Coordinator<'_> {
    /// Runs one engine thread per policy (recording in request states if
    /// `record_states`) and this coordinator beside them until the run ends
    /// or `stop` is set; returns each engine thread's counts and requests
    /// finished, the run's length and whether it ran to its end ([`Ran`]).
    pub(super) fn run_with_engines(
        &mut self,
        policies: Vec<Box<dyn Policy>>,
        record_states: bool,
        stop: &AtomicBool,
    ) -> Result<Ran, Error> {
        let (config, recorder, events, live) = (self.config, self.recorder, self.events, self.live);
        // A run stopped before it starts (a signal during the demo's
        // --delay-seconds) takes no step: real-time engine threads test
        // `done` before their first. Relaxed: a flag, polled; the caller's
        // store happened-before this call on its own thread.
        let done = AtomicBool::new(stop.load(Ordering::Relaxed));
        // Set by an engine thread that panics, so that a real-time coordinator
        // stops (in virtual time the broken barrier stops it).
        let failed = AtomicBool::new(false);
        let barrier = Barrier::new(config.workers + 1);
        let started = Instant::now();
        thread::scope(|scope| {
            let handles: Vec<_> = policies
                .into_iter()
                .enumerate()
                .map(|(index, policy)| {
                    let (live, done, barrier, failed) = (&live[index], &done, &barrier, &failed);
                    let mut engine =
                        Engine::new(index, config, recorder.worker(), policy, live, events);
                    engine.record_states = record_states;
                    thread::Builder::new()
                        .name(format!("engine-{index}"))
                        .spawn_scoped(scope, move || {
                            // Relaxed: the coordinator polls it; the join orders
                            // the rest.
                            let _guard = BreakOnPanic::new(barrier, || {
                                failed.store(true, Ordering::Relaxed)
                            });
                            if config.virtual_time {
                                engine.run_virtual(barrier, done, stop);
                            } else {
                                engine.run_real(started, done);
                            }
                            (engine.stats, engine.finished)
                        })
                })
                .collect::<Result<_, _>>()
                .map_err(|source| Error::Spawn {
                    what: "an engine thread",
                    source,
                })?;
            // A panic of the coordinator (this thread) must not leave the
            // engine threads waiting at the barrier or polling `done`, or the
            // scope's joins would hang instead of the panic going on.
            // Relaxed: as `done` below.
            let guard = BreakOnPanic::new(&barrier, || done.store(true, Ordering::Relaxed));
            let (run_secs, ran_to_the_end) = if config.virtual_time {
                self.run_virtual(&barrier, &done, stop)
            } else {
                self.run_real(started, &failed, stop)
            };
            drop(guard);
            // Relaxed: real-time engine threads poll it; the joins below order
            // everything they did before our reads.
            done.store(true, Ordering::Relaxed);
            let stats = handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .map_err(|p| Error::Panicked(panic_message(&*p).to_owned()))
                })
                .collect::<Result<Vec<_>, _>>()?;
            if !config.virtual_time {
                // Every step is recorded now: the last, partial interval.
                self.tick(run_secs, true);
            }
            Ok(Ran {
                stats,
                run_secs,
                ran_to_the_end,
            })
        })
    }

    /// Every tick: wait for every engine thread at the barrier, update,
    /// let them go on. Returns the run's length and whether it ran to its
    /// end.
    pub(super) fn run_virtual(
        &mut self,
        barrier: &Barrier,
        done: &AtomicBool,
        stop: &AtomicBool,
    ) -> (f64, bool) {
        loop {
            let mut end = self.config.tick_end(self.tick);
            if barrier.wait().is_err() {
                // An engine thread panicked: the join reports it.
                return (end, false);
            }
            if self.config.ticks_by_steps() {
                // The tick ended after a number of steps: at the furthest
                // clock.
                end = self.live.iter().map(Live::clock).fold(0.0, f64::max);
            }
            let to_the_end = (self.config.seconds > 0 && end >= self.config.seconds as f64)
                || (self.config.model.exhaust && self.live.iter().all(Live::drained));
            // Relaxed: a flag from the main thread, read once per tick; an
            // engine thread that saw it set (and left its tick early) did so
            // before the barrier, which orders its load before ours.
            let stopped = !to_the_end && stop.load(Ordering::Relaxed);
            if stopped {
                // Engine threads that left the tick early stopped their
                // clocks short of its end: the run lasted as long as the
                // furthest clock.
                end = self
                    .live
                    .iter()
                    .map(Live::clock)
                    .fold(0.0, f64::max)
                    .min(end);
            }
            let last = to_the_end || stopped;
            self.tick(end, last);
            // Relaxed: the barrier below orders it before the engine
            // threads read it.
            done.store(last, Ordering::Relaxed);
            if barrier.wait().is_err() || last {
                return (end, to_the_end);
            }
        }
    }

    /// Every tick of wall-clock time until the run's end or `stop`;
    /// returns the run's length and whether it ran to its end. The last,
    /// partial interval is left to the caller (once the engine threads
    /// have stopped).
    pub(super) fn run_real(
        &mut self,
        started: Instant,
        failed: &AtomicBool,
        stop: &AtomicBool,
    ) -> (f64, bool) {
        let interval = self.config.update.as_secs_f64();
        let end_of_run = if self.config.seconds == 0 {
            f64::INFINITY
        } else {
            self.config.seconds as f64
        };
        let mut deadline = interval;
        loop {
            let target = deadline.min(end_of_run);
            loop {
                let now = started.elapsed().as_secs_f64();
                // Relaxed: flags from the main thread and from a panicking
                // engine thread, polled; the joins order the rest.
                if stop.load(Ordering::Relaxed) || failed.load(Ordering::Relaxed) {
                    return (now, false);
                }
                if now >= end_of_run {
                    return (now, true);
                }
                if now >= target {
                    break;
                }
                thread::sleep(Duration::from_secs_f64((target - now).min(0.02)));
            }
            self.tick(started.elapsed().as_secs_f64(), false);
            deadline += interval;
            // A long stall (suspended process) should not cause a burst of
            // interval lines.
            let now = started.elapsed().as_secs_f64();
            if deadline < now {
                deadline = now + interval;
            }
        }
    }

    /// One tick ending at `end_s`: snapshot, the controller updated with
    /// what was recorded since its last update and its plan published;
    /// then, when the tick ends an interval (or the run), the interval's
    /// event.
    pub(super) fn tick(&mut self, end_s: f64, last: bool) {
        let now = self.recorder.snapshot();
        let since_update = now
            .delta_since(&self.previous_update)
            .expect("snapshots of one recorder never decrease");
        // A real-time run stopped right after a tick leaves an empty last
        // tick: nothing to update.
        if !(last && since_update.is_empty()) {
            self.update_controller(&since_update);
            self.update_state_controller();
            self.previous_update = now.clone();
        }
        self.tick += 1;
        // Float tolerance: tick and interval ends are sums of milliseconds.
        let interval_ends =
            self.config.ticks_by_steps() || end_s >= self.config.interval_end(self.index) - 1e-9;
        if interval_ends || last {
            self.end_interval(now, end_s, last);
        }
    }

    /// Feeds the controller (if any) what was recorded since its last
    /// update, and publishes its plan.
    pub(super) fn update_controller(&mut self, since_update: &AcceptanceHistogram) {
        if let (Some(controller), Some(plan)) = (self.controller.as_deref_mut(), self.plan) {
            let regime_changes = controller.regime_changes();
            let (_, regime) = self
                .interval_controller
                .get_or_insert((controller.draft_len(), false));
            controller.update(since_update);
            plan.publish(controller.plan());
            *regime |= controller.regime_changes() > regime_changes;
        }
    }

    /// Feeds the state controller (if any) every state's window since its
    /// last update, and publishes its plan or table.
    pub(super) fn update_state_controller(&mut self) {
        if let Some(controller) = self.state_controller.as_deref_mut() {
            // The windows of every state since the last update, in
            // `RequestState::index` order.
            let states = self.recorder.snapshot_by_state();
            let windows: Vec<AcceptanceHistogram> = states
                .iter()
                .zip(&self.previous_update_states)
                .map(|(now, before)| {
                    now.delta_since(before)
                        .expect("snapshots of one recorder never decrease")
                })
                .collect();
            let regime_changes = state_regime_changes(controller);
            let (_, regime) = self
                .interval_state_controller
                .get_or_insert((state_draft_lens(controller), false));
            controller.update(&windows);
            if let Some(plan) = self.state_plan {
                plan.publish(controller.plan());
            }
            if let Some(table) = self.state_table {
                controller.publish(table);
            }
            *regime |= state_regime_changes(controller) > regime_changes;
            self.previous_update_states = states;
        }
    }

    /// Ends the interval at `end_s` (`now` being the recorder's snapshot):
    /// reports it to the events, unless it is a real-time run's empty last
    /// one.
    pub(super) fn end_interval(&mut self, now: AcceptanceHistogram, end_s: f64, last: bool) {
        let delta = now
            .delta_since(&self.previous)
            .expect("snapshots of one recorder never decrease");
        // A real-time run stopped right after an interval leaves an empty
        // last interval: nothing to say.
        if last && !self.config.virtual_time && delta.is_empty() {
            return;
        }
        let controller = self.controller_step();
        let sum = self.live_since_interval();
        let start_s = self.start_s;
        let phases = self.config.phases();
        // The phase the interval is mostly in (its middle's).
        let phase = phases.phase_at((start_s + end_s) / 2.0);
        let state_controller = self.state_controller_step();
        self.events.interval(&Interval {
            start_s,
            end_s,
            delta: &delta,
            phase,
            phase_name: phases.phase_name(phase),
            chosen: &self.chosen,
            steps: sum.steps,
            budget_sum: sum.budget_sum,
            tokens: sum.tokens,
            switches: sum.switches as f64 / self.config.workers as f64,
            cost_units: sum.cost_units,
            controller,
            state_controller,
            last,
        });
        self.previous = now;
        self.index += 1;
        self.start_s = end_s;
    }

    /// What the controller did in the interval now ending.
    pub(super) fn controller_step(&mut self) -> Option<ControllerStep> {
        match (self.controller.as_deref(), self.interval_controller.take()) {
            (Some(controller), Some((previous, regime_change))) => Some(ControllerStep {
                draft_len: controller.draft_len(),
                explore_len: controller.plan().explore_len(),
                previous,
                regime_change,
                dispersion: controller.dispersion(),
            }),
            _ => None,
        }
    }

    /// The engine threads' counts since the last interval ended (and the
    /// length each chose last).
    pub(super) fn live_since_interval(&mut self) -> Counts {
        let mut sum = Counts::default();
        for (i, live) in self.live.iter().enumerate() {
            let (counts, chosen) = live.read();
            sum.add(&counts.since(&self.previous_live[i]));
            self.previous_live[i] = counts;
            self.chosen[i] = chosen;
        }
        sum
    }

    /// What the state controller did in the interval now ending, and the
    /// verify steps of each state in it.
    pub(super) fn state_controller_step(&mut self) -> Option<StateControllerStep> {
        match (
            self.state_controller.as_deref(),
            self.interval_state_controller.take(),
        ) {
            (Some(controller), Some((previous, regime_change))) => {
                let states = self.recorder.snapshot_by_state();
                let steps_by_state = states
                    .iter()
                    .zip(&self.previous_states)
                    .map(|(now, before)| now.num_spec_steps() - before.num_spec_steps())
                    .collect();
                self.previous_states = states;
                Some(StateControllerStep {
                    draft_lens: state_draft_lens(controller),
                    previous,
                    regime_change,
                    steps_by_state,
                })
            }
            _ => None,
        }
    }
}

/// Every state's draft length, in state order (`RequestState::index`
/// order without a state space).
pub(super) fn state_draft_lens(controller: &StateController) -> Vec<usize> {
    (0..controller.states())
        .map(|s| {
            controller
                .controller_at(s)
                .map_or(0, DraftController::draft_len)
        })
        .collect()
}

/// Changes of regime any state's controller has seen.
pub(super) fn state_regime_changes(controller: &StateController) -> u64 {
    (0..controller.states())
        .filter_map(|s| controller.controller_at(s))
        .map(DraftController::regime_changes)
        .sum()
}
