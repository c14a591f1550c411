//! The engine threads: each keeps a continuous batch, asks its policy for
//! every request's draft length, verifies, records and publishes its live
//! counters.

use super::*;
use crate::runs::PositionOutcome;
use specdec_ingest::trace::SCORE_PER_TOKEN;

/// One request in a batch.
pub(super) struct Request {
    pub(super) id: u64,
    /// When it was admitted, seconds.
    pub(super) started: f64,
    /// Output tokens to generate before it finishes.
    pub(super) output_len: usize,
    pub(super) generated: usize,
    pub(super) traits: RequestTraits,
    /// How well its drafts have been doing lately, updated after each of
    /// its verify steps.
    pub(super) state: RequestState,
    /// The same under the config's state rule, when it is not the
    /// library's.
    pub(super) rule_state: RuleState,
    /// What the policy keeps for it.
    pub(super) memory: RequestMemory,
    /// The request's own metrics, allocated once here; reported at the end.
    pub(super) metrics: AcceptanceHistogram,
    /// On a trace: the request's index in it (its output position is
    /// `generated`).
    pub(super) trace: Option<usize>,
    /// Admitted before the file's requests were taken again (a saturated
    /// replay ends when the last of these finishes).
    pub(super) first_pass: bool,
}

/// What an engine step does with each request's verify step: record it
/// engine-wide (in the state the request drafted in, for per-state) and
/// per request, move the request's states on, and tell the policy.
pub(super) struct Recording<'a> {
    pub(super) worker: &'a Worker,
    pub(super) record_states: bool,
    pub(super) policy: &'a mut dyn Policy,
    pub(super) outcomes: &'a mut Vec<(usize, usize)>,
    pub(super) rule: StateRule,
    /// The engine thread's draws, and the workload of a step in `phase`
    /// (for a request not on a trace).
    pub(super) rng: &'a mut Rng,
    pub(super) phases: &'a Phases,
    pub(super) phase: usize,
    /// A traced request that found no match moves its state on (a state
    /// space tells the step after a no-match).
    pub(super) after_no_match: bool,
    /// The requests of the step's batch.
    pub(super) batch: usize,
}

impl Recording<'_> {
    /// Request `index` (in state `state_index`) on a trace, given `len`
    /// tokens to draft at output position `position`: the trace says what
    /// the drafter proposes and the verifier accepts (no draw). Returns the
    /// tokens generated and the tokens drafted.
    pub(super) fn traced(
        &mut self,
        index: usize,
        state_index: usize,
        request: &mut Request,
        len: usize,
        position: Position,
        proposed: Position,
    ) -> (u64, u64) {
        let drafted = len.min(usize::from(position.proposal));
        let gain = if drafted == 0 {
            // Nothing proposed (no match, or the policy drafted
            // nothing): an undrafted step, not a k = 0 row.
            self.worker.observe_undrafted();
            request.metrics.observe_undrafted();
            if position.proposal == 0 && self.after_no_match {
                // The drafter found no match: its next step is
                // one "after a no-match".
                request.state = request.state.after_undrafted();
            }
            1
        } else {
            let accepted = drafted.min(usize::from(position.matched));
            // Never an error: drafted <= K (the lengths are clamped)
            // and accepted <= drafted.
            self.verify_step(index, state_index, request, drafted, accepted, accepted);
            accepted + 1
        };
        // The bonus token too, but never past the output's end.
        let gain = gain.min(request.output_len - request.generated);
        request.generated += gain;
        self.policy.after_position(
            &mut request.memory,
            PositionOutcome {
                position,
                proposed,
                drafted,
                accepted: drafted.min(usize::from(position.matched)),
                batch: self.batch,
                finished: request.generated >= request.output_len,
            },
        );
        (gain as u64, drafted as u64)
    }

    /// Request `index` (in state `state_index`) of the drawn workload, given
    /// `len` tokens to draft: its condition, a grammar's cut, the
    /// verifier's acceptance, drawn. Returns the tokens generated and the
    /// tokens drafted.
    pub(super) fn drawn(
        &mut self,
        index: usize,
        state_index: usize,
        request: &mut Request,
        len: usize,
    ) -> (u64, u64) {
        // A bursty request may change condition (one draw, bursty only).
        self.phases.advance(self.rng, &mut request.traits);
        if self.rng.chance(UNDRAFTED_SHARE) {
            // Nothing drafted: not a k = 0 row (an undrafted step).
            self.worker.observe_undrafted();
            request.metrics.observe_undrafted();
            request.generated += 1;
            return (1, 0);
        }
        // The grammar of a structured-output request cuts some drafts
        // short, sometimes to nothing (k = 0).
        let drafted = if request.traits.structured {
            grammar_cut(self.rng, len)
        } else {
            len
        };
        let accepted = verify(
            self.rng,
            drafted,
            self.phases.acceptance(self.phase, &request.traits),
        );
        // Rarely, a grammar invalidates drafts after the verifier
        // sampled them, so the engine reports a > k: rejected and
        // counted in num_rejected_observations, never in a bucket.
        let reported = if request.traits.structured && drafted < len && grammar_rejects(self.rng) {
            drafted + 1
        } else {
            accepted
        };
        self.verify_step(index, state_index, request, drafted, reported, accepted);
        request.generated += accepted + 1; // the bonus token
        (accepted as u64 + 1, drafted as u64)
    }

    /// Request `index` (in state `state_index`) drafted `drafted` and the
    /// verifier accepted `accepted`; the engine reports `reported` (a
    /// grammar may make it `drafted + 1`: rejected and counted, never in a
    /// bucket, so an error is already counted and ignored here).
    pub(super) fn verify_step(
        &mut self,
        index: usize,
        state_index: usize,
        request: &mut Request,
        drafted: usize,
        reported: usize,
        accepted: usize,
    ) {
        let _ = if self.record_states {
            self.worker.observe_in(state_index, drafted, reported)
        } else {
            self.worker.observe(drafted, reported)
        };
        let _ = request.metrics.observe(drafted, reported);
        request.state = request.state.after(drafted, accepted);
        request.rule_state = self.rule.after(request.rule_state, drafted, accepted);
        self.policy
            .after_request(index, &mut request.memory, drafted, accepted);
        self.outcomes.push((drafted, accepted));
    }
}

/// One engine thread: a continuous batch of requests, one verify step per
/// request per engine step.
pub(super) struct Engine<'a> {
    pub(super) index: usize,
    pub(super) config: &'a Config,
    pub(super) phases: Phases,
    pub(super) settle_secs: f64,
    pub(super) worker: Worker,
    pub(super) policy: Box<dyn Policy>,
    /// Record each verify step in the request's state
    /// (`Worker::observe_in`), for `per-state`.
    pub(super) record_states: bool,
    pub(super) live: &'a Live,
    pub(super) events: &'a dyn Events,
    pub(super) rng: Rng,
    pub(super) batch: Vec<Request>,
    /// `(drafted, accepted)` of the latest step's drafting requests.
    pub(super) outcomes: Vec<(usize, usize)>,
    /// What the policy sees of each request before a step, and the lengths
    /// it gives them (allocated once, for a full batch).
    pub(super) views: Vec<RequestView>,
    pub(super) lens: Vec<usize>,
    pub(super) next_request: u64,
    /// On a trace: the index of the next request to admit (this thread
    /// takes every `workers`-th request from its own index on).
    pub(super) next_trace: usize,
    pub(super) step: u64,
    /// The policy's plan at the latest step (a change is a switch).
    pub(super) plan_key: u64,
    pub(super) counts: Counts,
    /// Requests admitted since the latest step.
    pub(super) admitted: usize,
    /// The drafter's longest n-gram (the trace's `max_n`; 5, vLLM's
    /// default, without one): a shorter match is a signal.
    pub(super) max_n: usize,
    pub(super) stats: EngineStats,
    pub(super) finished: u64,
    /// Whether this thread took the file's requests again from its first.
    pub(super) cycled: bool,
    /// This thread's traced requests of the first pass not yet finished
    /// (those with a position to replay).
    pub(super) first_pass_left: usize,
}

impl<'a> Engine<'a> {
    pub(super) fn new(
        index: usize,
        config: &'a Config,
        worker: Worker,
        policy: Box<dyn Policy>,
        live: &'a Live,
        events: &'a dyn Events,
    ) -> Self {
        let rng = Rng::new(rng::engine_seed(config.seed, index));
        let plan_key = policy.plan_key();
        Self {
            index,
            config,
            phases: config.phases(),
            settle_secs: config.settle_secs(),
            worker,
            policy,
            record_states: false,
            live,
            events,
            rng,
            batch: Vec::with_capacity(config.max_batch),
            outcomes: Vec::with_capacity(config.max_batch),
            views: Vec::with_capacity(config.max_batch),
            lens: Vec::with_capacity(config.max_batch),
            next_request: 0,
            next_trace: index,
            step: 0,
            plan_key,
            counts: Counts::default(),
            admitted: 0,
            max_n: config
                .traces
                .as_ref()
                .and_then(|t| t.meta())
                .map_or(5, |m| m.max_n),
            stats: EngineStats::default(),
            finished: 0,
            cycled: false,
            first_pass_left: config.traces.as_ref().map_or(0, |t| {
                t.requests()
                    .iter()
                    .skip(index)
                    .step_by(config.workers)
                    .filter(|r| !r.positions.is_empty())
                    .count()
            }),
        }
    }

    /// Steps until the clock reaches each tick's end, or `stop` is set,
    /// then meets the coordinator at the barrier (twice: before and after
    /// its update).
    ///
    /// `stop` is read at every step, not only at the barrier: a tick may
    /// hold many steps (a small step cost), and a signal must not wait for
    /// its end.
    pub(super) fn run_virtual(&mut self, barrier: &Barrier, done: &AtomicBool, stop: &AtomicBool) {
        let step_secs = self.config.step_us as f64 * 1e-6;
        let mut clock = 0.0;
        for tick in 0.. {
            match self.config.model.steps_per_update {
                Some(steps) => {
                    // Relaxed: as below.
                    for _ in 0..steps {
                        if stop.load(Ordering::Relaxed) || !self.fill(clock) {
                            break;
                        }
                        clock += self.step(clock) * step_secs;
                    }
                    self.live.publish_drained(!self.fill(clock));
                }
                None => {
                    let end = self.config.tick_end(tick);
                    // Relaxed: a flag polled once per step; the barrier
                    // orders everything the coordinator reads after it.
                    while clock < end && !stop.load(Ordering::Relaxed) {
                        self.fill(clock);
                        clock += self.step(clock) * step_secs;
                    }
                }
            }
            self.live.publish_clock(clock);
            // A broken barrier: another thread panicked; stop.
            if barrier.wait().is_err() || barrier.wait().is_err() {
                return;
            }
            // Relaxed: stored before the barrier that just let us through.
            if done.load(Ordering::Relaxed) {
                return;
            }
        }
    }

    /// Steps and sleeps for each step's cost until `done`.
    pub(super) fn run_real(&mut self, started: Instant, done: &AtomicBool) {
        let step_secs = self.config.step_us as f64 * 1e-6;
        // Relaxed: a stop flag, polled; the join orders everything after.
        while !done.load(Ordering::Relaxed) {
            let now = started.elapsed().as_secs_f64();
            self.fill(now);
            let cost = self.step(now);
            if step_secs > 0.0 {
                thread::sleep(Duration::from_secs_f64(cost * step_secs));
            }
        }
    }

    /// Fills the batch's free slots before a step at `now`; whether the
    /// batch has a request to step (always, but when each traced request
    /// is replayed once and the last have finished, or a saturated
    /// replay's first pass has).
    pub(super) fn fill(&mut self, now: f64) -> bool {
        if self.saturated_done() {
            return false;
        }
        while self.batch.len() < self.config.max_batch && self.admit(now) {
            self.admitted += 1;
        }
        !self.batch.is_empty()
    }

    /// One engine step starting at `now` (on the batch [`fill`](Self::fill)
    /// made); returns its cost in cost units.
    pub(super) fn step(&mut self, now: f64) -> f64 {
        let admitted = std::mem::take(&mut self.admitted);
        let phase = self.phases.phase_at(now);
        let settled = now >= self.phases.phase_start(phase) + self.settle_secs;
        self.choose_lens();
        // The step's cost is paid for the mean drafted per request; it
        // records that mean, rounded, as its scheduled budget (see the
        // policy module's docs).
        let draft_len = mean_draft_len(&self.lens);
        let budget = scheduled_budget(&self.lens);
        let chosen = self.policy.chosen();
        let plan_key = self.policy.plan_key();
        let switched = plan_key != self.plan_key;
        self.plan_key = plan_key;
        // The scheduler's own choice, 0 included; never above K (the
        // lengths are clamped above), so never an error.
        let _ = self.worker.observe_scheduled(budget);

        let (tokens, drafted_sum) = self.verify_batch(phase);
        self.policy.after_step(budget, &self.outcomes);
        let cost = match self.config.model.cost_rule {
            CostRule::Scheduled => self.config.cost_at(draft_len),
            CostRule::Drafted => self
                .config
                .cost_at(drafted_sum as f64 / self.batch.len().max(1) as f64),
        };
        let counts = Counts {
            steps: 1,
            budget_sum: draft_len,
            tokens,
            switches: u64::from(switched),
            cost_units: cost,
            request_steps: self.batch.len() as u64,
            drafted: drafted_sum,
        };
        self.stats.record(phase, settled, &counts);
        if self.batch.len() < self.config.max_batch {
            self.stats.drain.add(&counts);
        }
        self.stats.record_lens(&self.lens);
        self.counts.add(&counts);
        self.live.publish(&self.counts, chosen);
        self.step += 1;
        let seconds = cost * self.config.step_us as f64 * 1e-6;
        let batch = self.batch.len();
        let finished = self.retire(now + seconds);
        self.events.engine_step(&EngineStep {
            engine: self.index,
            seconds,
            batch,
            tokens,
            admitted,
            finished,
            budget,
            draft_len,
            drafted: drafted_sum,
        });
        cost
    }

    /// What the policy sees of each request of the batch (`views`), and the
    /// length it gives each (`lens`).
    pub(super) fn choose_lens(&mut self) {
        // The policy's length for each request of the batch, never above K
        // (clamped, not rejected: the step still happens).
        let rule = self.config.state_rule;
        self.views.clear();
        let traces = self.config.traces.as_deref();
        let (space, max_n, max_draft_len) = (
            self.config.state_space,
            self.max_n,
            self.config.max_draft_len,
        );
        self.views.extend(self.batch.iter().map(|r| {
            let state = match rule {
                StateRule::Library => r.state,
                // A request state in the rule's state.
                _ => state_of(rule.index(r.rule_state)),
            };
            let position = r
                .trace
                .and_then(|i| traced_position(traces?, i, r.generated));
            // What the drafter knows as it drafts: the n it matched (a
            // suffix draft's match length), whether it has fewer tokens to
            // propose than K, and a suffix draft's score (0 on n-gram
            // traces; the trace keeps sixteenths of a token).
            let signal = position.map_or(DraftSignal::NONE, |p| {
                DraftSignal::ngram(usize::from(p.ngram), max_n)
                    .with_short_proposal(usize::from(p.proposal) < max_draft_len)
                    .with_score(f64::from(p.score) / f64::from(SCORE_PER_TOKEN))
            });
            RequestView {
                state,
                memory: r.memory,
                position,
                state_index: space.map_or(state.index(), |space| space.index(state, signal)),
                left: r.output_len - r.generated,
            }
        }));
        self.lens.clear();
        self.lens.resize(self.batch.len(), 0);
        self.policy
            .draft_lens(self.step, &self.views, &mut self.lens);
        for len in &mut self.lens {
            *len = (*len).min(self.config.max_draft_len);
        }
    }

    /// Every request's verify step of a step in phase `phase`, at the
    /// lengths [`choose_lens`](Self::choose_lens) gave: recorded, and told
    /// to the policy (`outcomes`). Returns the tokens generated and the
    /// tokens drafted.
    pub(super) fn verify_batch(&mut self, phase: usize) -> (u64, u64) {
        self.outcomes.clear();
        let mut recording = Recording {
            worker: &self.worker,
            record_states: self.record_states,
            policy: self.policy.as_mut(),
            outcomes: &mut self.outcomes,
            rule: self.config.state_rule,
            rng: &mut self.rng,
            phases: &self.phases,
            phase,
            after_no_match: self.config.state_space.is_some(),
            batch: self.batch.len(),
        };
        let (mut tokens, mut drafted_sum) = (0u64, 0u64);
        let traces = self.config.traces.as_deref();
        for (index, request) in self.batch.iter_mut().enumerate() {
            let view = &self.views[index];
            let len = self.lens[index];
            let (gained, drafted) = match view.position {
                Some(proposed) => {
                    // What drafting `len` drafts there (a suffix drafter
                    // may choose another draft at a smaller length).
                    let position = match (traces, request.trace) {
                        (Some(traces), Some(i)) => {
                            traces.requests()[i].at_cap(request.generated, proposed, len)
                        }
                        _ => proposed,
                    };
                    recording.traced(index, view.state_index, request, len, position, proposed)
                }
                None => recording.drawn(index, view.state_index, request, len),
            };
            tokens += gained;
            drafted_sum += drafted;
        }
        (tokens, drafted_sum)
    }

    /// Whether a saturated replay is over: every request of this thread's
    /// first pass has finished.
    fn saturated_done(&self) -> bool {
        self.config.model.exhaust && self.config.model.saturate && self.first_pass_left == 0
    }

    /// Admits the next request; `false` when there is none (each traced
    /// request replayed once, and this thread's are all admitted).
    pub(super) fn admit(&mut self, now: f64) -> bool {
        let traits = self.phases.new_request(&mut self.rng);
        let (output_len, generated, trace) = match &self.config.traces {
            None => (32 + self.rng.below(481), 0, None),
            Some(traces) => match self.next_traced(traces) {
                // Position 0 came from prefill: the request drafts at 1.
                Some(i) => (traces.requests()[i].output_tokens, 1, Some(i)),
                None => return false,
            },
        };
        self.batch.push(Request {
            id: self.next_request,
            started: now,
            output_len,
            generated,
            traits,
            state: RequestState::new(),
            rule_state: self.config.state_rule.start(),
            memory: RequestMemory::default(),
            metrics: AcceptanceHistogram::new(self.config.max_draft_len).expect("K was validated"),
            trace,
            first_pass: !self.cycled,
        });
        self.next_request += 1;
        true
    }

    /// The index of this thread's next traced request with a position to
    /// replay (`M >= 2`), cycling through the file unless each is replayed
    /// once; `None` when none is left.
    pub(super) fn next_traced(&mut self, traces: &TraceSet) -> Option<usize> {
        let requests = traces.requests();
        let workers = self.config.workers;
        // At most one pass over the file: `TraceSet` holds a request with
        // a position, but maybe not among this thread's.
        for _ in 0..requests.len().div_ceil(workers) + 1 {
            if self.next_trace >= requests.len() {
                if self.config.model.exhaust && !self.config.model.saturate {
                    return None;
                }
                self.next_trace = self.index % workers;
                self.cycled = true;
            }
            let i = self.next_trace;
            self.next_trace += workers;
            if !requests[i].positions.is_empty() {
                return Some(i);
            }
        }
        None
    }

    /// Removes the requests that are done; returns how many.
    pub(super) fn retire(&mut self, now: f64) -> usize {
        let before = self.batch.len();
        let mut i = 0;
        while i < self.batch.len() {
            if self.batch[i].generated < self.batch[i].output_len {
                i += 1;
                continue;
            }
            let request = self.batch.swap_remove(i);
            self.finished += 1;
            if request.first_pass && request.trace.is_some() {
                self.first_pass_left -= 1;
            }
            if self.events.wants_requests() {
                self.events.request_finished(&FinishedRequest {
                    engine: self.index,
                    id: request.id,
                    tokens: request.generated,
                    seconds: now - request.started,
                    structured: request.traits.structured,
                    metrics: &request.metrics,
                });
            }
        }
        before - self.batch.len()
    }
}
