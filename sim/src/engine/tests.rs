//! The engine model's unit tests.

use super::*;

fn config(policy: PolicySpec) -> Config {
    Config {
        policy,
        workload: Workload::Transition,
        phase_secs: 4.0,
        persistence: crate::workload::DEFAULT_PERSISTENCE,
        state_rule: StateRule::Library,
        workers: 2,
        max_draft_len: 8,
        max_batch: 8,
        interval: Duration::from_millis(500),
        update: Duration::from_millis(250),
        step_us: 8000,
        cost: CostLinear {
            base: 1.0,
            per_token: 0.1,
        },
        seconds: 8,
        virtual_time: true,
        seed: 5,
        settle_intervals: SETTLE_INTERVALS,
        traces: None,
        state_space: None,
        model: EngineModel::default(),
    }
}

fn run_virtual(config: &Config, plan: Option<&Arc<SharedPlan>>) -> Outcome {
    let recorder = Recorder::new(config.max_draft_len).unwrap();
    run(config, &recorder, plan, &AtomicBool::new(false), &NoEvents).unwrap()
}

/// Panics in engine 1's 20th step, or in the coordinator's first
/// interval line.
struct Panics {
    in_engine: bool,
    steps: std::sync::atomic::AtomicUsize,
}
impl Events for Panics {
    fn engine_step(&self, step: &EngineStep) {
        // Relaxed: a counter of this test's own.
        if self.in_engine && step.engine == 1 && self.steps.fetch_add(1, Ordering::Relaxed) == 20 {
            panic!("engine 1 broke");
        }
    }
    fn interval(&self, _interval: &Interval<'_>) {
        if !self.in_engine {
            panic!("the metrics thread broke");
        }
    }
}

/// Runs `config` with a panicking `Events` on its own thread; what the
/// run returned (or its panic), or a failure if it hangs.
fn run_panicking(config: Config, in_engine: bool) -> std::thread::Result<Result<Outcome, Error>> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let outcome = std::panic::catch_unwind(|| {
            let recorder = Recorder::new(config.max_draft_len).unwrap();
            let events = Panics {
                in_engine,
                steps: Default::default(),
            };
            run(&config, &recorder, None, &AtomicBool::new(false), &events)
        });
        let _ = tx.send(outcome);
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("the run hung after a thread of it panicked")
}

#[test]
fn a_panicking_engine_thread_fails_the_run_instead_of_hanging_it() {
    for virtual_time in [true, false] {
        let mut config = config(PolicySpec::fixed(3));
        config.virtual_time = virtual_time;
        config.step_us = if virtual_time { 8000 } else { 100 };
        config.seconds = if virtual_time { 8 } else { 0 };
        let error = run_panicking(config, true)
            .expect("an engine's panic is an error, not a panic of the run")
            .expect_err("a run whose engine panicked cannot succeed");
        assert!(
            matches!(&error, Error::Panicked(m) if m.contains("engine 1 broke")),
            "{error}"
        );
    }
}

#[test]
fn a_panicking_coordinator_ends_the_engine_threads() {
    for virtual_time in [true, false] {
        let mut config = config(PolicySpec::fixed(3));
        config.virtual_time = virtual_time;
        config.step_us = 100;
        config.seconds = if virtual_time { 8 } else { 0 };
        config.interval = Duration::from_millis(50);
        config.update = Duration::from_millis(50);
        let panic = run_panicking(config, false).expect_err("the coordinator's panic goes on");
        assert_eq!(
            crate::barrier::panic_message(&*panic),
            "the metrics thread broke"
        );
    }
}

#[test]
fn the_shared_plan_holds_the_policys_choice() {
    let adaptive = shared_plan(&config(PolicySpec::adaptive()))
        .unwrap()
        .unwrap();
    // The controller's first choice under its uniform prior.
    assert_eq!(adaptive.load().draft_len(), 2);
    let fixed = shared_plan(&config(PolicySpec::fixed(3))).unwrap().unwrap();
    assert_eq!(fixed.load().draft_len(), 3);
    assert!(
        shared_plan(&config(PolicySpec::named("sglang").unwrap()))
            .unwrap()
            .is_none()
    );
    assert!(shared_plan(&config(PolicySpec::fixed(9))).is_err());
}

#[test]
fn the_controller_publishes_in_the_plan_it_is_given() {
    // Decisions on at least 512 request-steps.
    let config = Config {
        model: EngineModel {
            update_observations: Some(512),
            ..EngineModel::default()
        },
        ..config(PolicySpec::adaptive())
    };
    let plan = shared_plan(&config).unwrap().unwrap();
    let outcome = run_virtual(&config, Some(&plan));
    let controller = outcome.summary.controller.unwrap();
    // 4 s low, 4 s high: the run ends on a long draft, in the plan.
    assert!(controller.draft_len >= 5, "{controller:?}");
    assert_eq!(plan.load().draft_len(), controller.draft_len);
    // 8 s of 250 ms ticks of about 24 steps of 16 requests: fewer than
    // the 512 request-steps a decision needs, so ticks are pooled.
    assert!((8..32).contains(&controller.updates), "{controller:?}");
    assert!(outcome.ran_to_the_end);
    // Deciding at every tick: one decision per 250 ms update.
    let every = Config {
        model: EngineModel {
            update_observations: Some(0),
            ..EngineModel::default()
        },
        ..config
    };
    let outcome = run_virtual(&every, None);
    assert_eq!(outcome.summary.controller.unwrap().updates, 32);
}

#[test]
fn a_virtual_run_is_a_function_of_its_config() {
    let config = config(PolicySpec::adaptive());
    let (a, b) = (run_virtual(&config, None), run_virtual(&config, None));
    assert_eq!(a.summary, b.summary);
    assert_eq!(a.requests_finished, b.requests_finished);
    let other = run_virtual(&Config { seed: 6, ..config }, None);
    assert_ne!(a.summary, other.summary);
}

/// Adds up what `engine_step` reports.
#[derive(Default)]
struct StepTotals(std::sync::Mutex<(u64, u64, u64, u64, u64, f64, u64)>);
impl Events for StepTotals {
    fn engine_step(&self, step: &EngineStep) {
        let mut t = self.0.lock().unwrap();
        t.0 += 1;
        t.1 += step.tokens;
        t.2 += step.budget as u64;
        t.3 += step.admitted as u64;
        t.4 += step.finished as u64;
        t.5 += step.seconds;
        t.6 += step.drafted;
        assert_eq!(step.batch, 8);
    }
}

#[test]
fn engine_steps_add_up_to_the_summary() {
    let config = config(PolicySpec::adaptive());
    let recorder = Recorder::new(8).unwrap();
    let events = StepTotals::default();
    let outcome = run(&config, &recorder, None, &AtomicBool::new(false), &events).unwrap();
    let (steps, tokens, budgets, admitted, finished, seconds, drafted) = *events.0.lock().unwrap();
    let s = &outcome.summary;
    assert_eq!(steps, s.overall.steps);
    assert_eq!(tokens, s.overall.tokens);
    // Every step's requests are a full batch of 8.
    assert!(drafted > 0);
    assert_eq!(
        Some(drafted as f64 / (8 * steps) as f64),
        s.overall.drafted_per_request_step
    );
    assert!((s.overall.mean_draft_len.unwrap() - budgets as f64 / steps as f64).abs() < 1e-12);
    assert_eq!(finished, outcome.requests_finished);
    // Still running at the end: the two batches of 8, less the
    // requests their last steps finished (refilled at the next step).
    assert!(
        (1..=16).contains(&(admitted - finished)),
        "{admitted} {finished}"
    );
    // Each thread's steps cover its 8 s, and at most one step (14.4 ms
    // at k = 8) more.
    assert!((16.0..16.0 + 2.0 * 0.0144).contains(&seconds), "{seconds}");
}

#[test]
fn every_engine_thread_runs_to_the_end_of_every_interval() {
    let config = config(PolicySpec::fixed(4));
    let outcome = run_virtual(&config, None);
    let s = &outcome.summary;
    assert_eq!(s.seconds, 8.0);
    assert_eq!(s.phases.len(), 2);
    // Each thread runs until its clock passes 8 s, a step costing
    // (1 + 0.4) * 8 ms: 715 steps of 11.2 ms reach 8.008 s.
    assert_eq!(s.overall.steps, 2 * 715);
    assert_eq!(s.overall.mean_draft_len, Some(4.0));
    assert_eq!(s.overall.switches, 0.0);
}

/// A trace of the given requests, each `(proposal, match)` by position
/// `1..M` (`M` one more than their length).
fn traces(requests: &[&[(u8, u8)]]) -> Arc<TraceSet> {
    let mut text = String::new();
    for (i, positions) in requests.iter().enumerate() {
        let (proposal, matched): (Vec<u8>, Vec<u8>) = positions.iter().copied().unzip();
        text += &serde_json::json!({
            "id": i, "prompt_tokens": 5, "output_tokens": positions.len() + 1,
            "proposal": proposal, "match": matched,
        })
        .to_string();
        text.push('\n');
    }
    Arc::new(TraceSet::read(text.as_bytes(), "test").unwrap())
}

fn replay(policy: PolicySpec, traces: Arc<TraceSet>, rule: CostRule, batch: usize) -> Outcome {
    let config = Config {
        workload: Workload::Traces,
        workers: 1,
        max_batch: batch,
        seconds: 0,
        traces: Some(traces),
        model: EngineModel {
            cost_rule: rule,
            steps_per_update: Some(4),
            exhaust: true,
            ..EngineModel::default()
        },
        ..config(policy)
    };
    let recorder = recorder(&config).unwrap();
    run(&config, &recorder, None, &AtomicBool::new(false), &NoEvents).unwrap()
}

#[test]
fn a_traced_request_moves_by_what_its_verifier_accepts() {
    // M = 10, the drafter proposes the rest of the output everywhere:
    // static 3 gains 4, 4, then the one token left.
    let copy: Vec<(u8, u8)> = (1..10).map(|t| (64, 10 - t as u8 - 1)).collect();
    let outcome = replay(PolicySpec::fixed(3), traces(&[&copy]), CostRule::Drafted, 4);
    let o = &outcome.summary.overall;
    assert_eq!((o.steps, o.tokens), (3, 9));
    // 3 drafted in every step: cost 1.3 each.
    assert!((o.cost_units - 3.9).abs() < 1e-12, "{o:?}");
    assert_eq!(outcome.requests_finished, 1);
    assert!(outcome.ran_to_the_end);
}

#[test]
fn a_position_without_a_match_costs_nothing_under_the_drafted_rule_only() {
    // Position 1 has no match, then a proposal of 2 of which 1 holds.
    let positions = [(0, 0), (2, 1), (0, 0), (0, 0)];
    let drafted = replay(
        PolicySpec::fixed(4),
        traces(&[&positions]),
        CostRule::Drafted,
        1,
    );
    let o = &drafted.summary.overall;
    // t = 1: nothing (1 token); t = 2: d = 2, a = 1 (2 tokens); t = 4:
    // nothing (1 token).
    assert_eq!((o.steps, o.tokens), (3, 4));
    assert!((o.cost_units - (1.0 + 1.2 + 1.0)).abs() < 1e-12, "{o:?}");
    assert_eq!(o.drafted_per_request_step, Some(2.0 / 3.0));
    let scheduled = replay(
        PolicySpec::fixed(4),
        traces(&[&positions]),
        CostRule::Scheduled,
        1,
    );
    let o = &scheduled.summary.overall;
    assert_eq!((o.steps, o.tokens), (3, 4));
    assert!((o.cost_units - 3.0 * 1.4).abs() < 1e-12, "{o:?}");
}

#[test]
fn the_oracle_drafts_what_is_accepted_and_beats_every_static_length() {
    let a: Vec<(u8, u8)> = [(5, 0), (5, 3), (3, 2), (2, 1), (1, 0), (0, 0), (4, 4)]
        .into_iter()
        .cycle()
        .take(60)
        .collect();
    // A full run of 8 every third position (never past the output's end).
    let b: Vec<(u8, u8)> = (0..40u8)
        .map(|t| {
            if t % 3 == 0 {
                (8, 8.min(40 - t))
            } else {
                (8, 0)
            }
        })
        .collect();
    let set = traces(&[&a, &b, &a]);
    let goodput = |p| {
        replay(p, Arc::clone(&set), CostRule::Drafted, 2)
            .summary
            .overall
            .goodput
            .unwrap()
    };
    let oracle = goodput(PolicySpec::oracle());
    for k in 0..=8 {
        assert!(goodput(PolicySpec::fixed(k)) < oracle, "static:{k}");
    }
    // Every request replayed once: the tokens are the outputs' positions.
    let outcome = replay(PolicySpec::oracle(), Arc::clone(&set), CostRule::Drafted, 2);
    assert_eq!(outcome.summary.overall.tokens, 60 + 40 + 60);
    assert_eq!(outcome.requests_finished, 3);
}

/// A match that reaches the output's end: its last token would be
/// accepted in place of the bonus token, so drafting it gains nothing.
#[test]
fn the_oracle_does_not_draft_a_token_that_gains_nothing() {
    // M = 5: from position 1 the output continues with the 4 tokens left.
    let set = traces(&[&[(4, 4), (3, 3), (2, 2), (1, 1)]]);
    let outcome = replay(PolicySpec::oracle(), set, CostRule::Drafted, 1);
    let o = &outcome.summary.overall;
    assert_eq!(o.tokens, 4);
    // One step: 3 drafted and accepted, then the bonus token.
    assert_eq!(o.tokens_per_request_step, Some(4.0));
    assert_eq!(o.drafted_per_request_step, Some(3.0));
}

#[test]
fn traces_are_checked_against_the_settings() {
    let set = traces(&[&[(1, 1)]]);
    let base = Config {
        workload: Workload::Traces,
        traces: Some(Arc::clone(&set)),
        workers: 1,
        ..config(PolicySpec::fixed(2))
    };
    assert!(base.validate().is_ok());
    let two = Config {
        workers: 2,
        ..base.clone()
    };
    assert!(matches!(
        two.validate(),
        Err(Error::TooFewTracedRequests { idle: 1, .. })
    ));
    let above = Config {
        max_draft_len: 65,
        ..base.clone()
    };
    assert!(above.validate().is_err());
    let oracle = config(PolicySpec::oracle());
    assert!(matches!(oracle.validate(), Err(Error::OracleWithoutTraces)));
    let untraced = Config {
        traces: None,
        ..base.clone()
    };
    assert!(untraced.validate().is_err());
    let real_time_steps = Config {
        virtual_time: false,
        model: EngineModel {
            steps_per_update: Some(3),
            ..EngineModel::default()
        },
        ..base
    };
    assert!(matches!(
        real_time_steps.validate(),
        Err(Error::StepsPerUpdateInRealTime)
    ));
}

#[test]
fn a_cost_table_is_interpolated_between_lengths() {
    let table = [1.0, 1.5, 3.0];
    assert_eq!(interpolate(&table, 0.0), 1.0);
    assert_eq!(interpolate(&table, 0.5), 1.25);
    assert_eq!(interpolate(&table, 1.5), 2.25);
    assert_eq!(interpolate(&table, 2.0), 3.0);
    assert_eq!(interpolate(&table, 7.0), 3.0);
}

#[test]
fn a_run_stopped_before_it_starts_takes_no_step() {
    // The demo stopped by a signal during --delay-seconds: its report must
    // be all zeros, however late the engine threads first poll `done`.
    for virtual_time in [false, true] {
        for _ in 0..20 {
            let config = Config {
                virtual_time,
                step_us: if virtual_time { 8000 } else { 0 },
                ..config(PolicySpec::fixed(3))
            };
            let recorder = Recorder::new(config.max_draft_len).unwrap();
            let outcome = run(&config, &recorder, None, &AtomicBool::new(true), &NoEvents).unwrap();
            assert_eq!(
                recorder.snapshot().num_spec_steps(),
                0,
                "virtual {virtual_time}"
            );
            assert_eq!(outcome.requests_finished, 0);
        }
    }
}
