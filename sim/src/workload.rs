//! What the simulated requests look like: how well the proposer predicts
//! them (the acceptance the verifier gives), by phase of the run and by
//! kind of request.
//!
//! # The acceptance model
//!
//! Each request gets, when it is admitted, a *predictability offset* drawn
//! uniformly in `±SPREAD` (0.08). At every verify step, each drafted
//! position is accepted with probability `p = alpha + offset` (clamped to
//! `0..=0.98`), independently, and the verifier accepts the longest
//! agreeing prefix: `a` is the number of accepted positions before the
//! first rejection, at most the drafted `k`. `alpha` depends on the
//! workload:
//!
//! | workload     | phases                                    | `alpha`                         |
//! |--------------|-------------------------------------------|---------------------------------|
//! | `steady`     | one, `steady`                             | 0.8                             |
//! | `transition` | `low`, `high`, `low`, `high`, ... of `--phase-seconds` each | 0.5 in `low`, 0.9 in `high` |
//! | `mixed`      | one, `mixed`                              | 0.9 for code-like requests, 0.5 for chat-like ones, half and half in every batch |
//! | `bursty`     | one, `bursty`                             | every request alternates between an easy (0.9) and a hard (0.3) condition, staying in each for `--persistence` steps on average |
//! | `classes`    | one, `classes`                            | per-position rates of a real profile: code, math or summarization, a third each (no `alpha`, no offset; see below) |
//!
//! `transition` follows SGLang's adaptive-speculation benchmark (low- and
//! high-acceptance prompt sets in turn); the phase applies to every request
//! in the batch from its first step on (the proposer does badly on the new
//! prompts at once). With a linear step cost `1 + 0.1 k` the best static
//! draft length is about 2 at `alpha = 0.5` and 7–8 at `alpha = 0.9`.
//!
//! # `bursty`: acceptance in runs
//!
//! Real requests alternate between stretches their drafts predict well
//! (boilerplate, text copied from the prompt) and stretches they do not.
//! vLLM pull request #48915's example response (ngram, `K = 3`) has the
//! per-request histogram `[39, 1, 0, 3]`: 39 steps with nothing accepted
//! and 3 with everything, where independent tokens at that request's mean
//! acceptance would give almost no full acceptance. Here every request is,
//! at each of its steps, in an *easy* condition (per-position acceptance
//! [`EASY_ALPHA`] 0.9) or a *hard* one ([`HARD_ALPHA`] 0.3), plus its
//! offset. Each request starts in either with probability 1/2 and, before
//! each of its steps, leaves its condition with probability `1 /
//! persistence`: durations are geometric with mean `--persistence` steps
//! (default [`DEFAULT_PERSISTENCE`], 30), the same for both conditions.
//!
//! Why 0.9 and 0.3 (the measured profiles of vLLM's
//! `tests/v1/spec_decode/test_acceptance_length.py`): 0.9 is the
//! continuation rate of a good stretch (ngram copies, EAGLE3's best
//! conditional rates, 0.73–0.90 on MT-Bench); 0.3 is the first-position
//! rate of the weakest real profile there (EAGLE3 on Qwen3-VL-30B,
//! `P_1 = 0.29`). #48915's single request fits a harder hard condition
//! still: 0.9 on a tenth of its steps and 0 on the rest give `[39.1, 0.4,
//! 0.3, 3.1]` of its 43 steps. The milder 0.3, with half the steps easy,
//! gives at `K = 3` the same U shape (`[0.40, 0.15, 0.07, 0.38]` of the
//! steps, against `[0.33, 0.22, 0.15, 0.30]` for independent tokens at the
//! same mean acceptance), and at `K = 8` twice the independent share of
//! full acceptances (0.22 against 0.11), with less to gain from following
//! the runs than #48915's request would offer.
//!
//! # `classes`: requests of three kinds
//!
//! A third each of code, math and summarization requests with the profiles
//! measured for EAGLE3 on Qwen3-8B at `T = 0.6` (vllm-project/speculators
//! issue #563, `K = 7`): the cumulative `P_i` ([`CLASS_PROFILES`]) become
//! per-position continuation rates `c_i = P_i / P_{i-1}` (`P_0 = 1`), and a
//! drafted position `i` is accepted with probability `c_i` once the ones
//! before it were. Positions above 7 continue at `c_7`, the last measured
//! rate (0 for summarization, whose `P_7` is 0): the data say nothing
//! beyond 7, and vLLM #26498's `K = 10` EAGLE3 profile still accepts 40–67%
//! of the positions 8 to 10 it reaches, so a rate falling to 0 at once
//! would be the stranger guess. No offset is added, so that each kind
//! reproduces its profile.
//!
//! On top of this, the realism the earlier demo had, independent of the
//! policy so that policies compare fairly:
//!
//! - a share [`STRUCTURED_SHARE`] of the requests use structured output:
//!   their grammar cuts the scheduled draft short on half of their steps
//!   (sometimes to nothing, `k = 0`), and very rarely the engine then
//!   reports one more accepted token than drafted (a rejected observation);
//! - on a share [`UNDRAFTED_SHARE`] of request-steps the proposer has
//!   nothing to propose (`observe_undrafted`: one token, no draft).

use std::fmt;
use std::str::FromStr;

use crate::rng::Rng;

/// Half-width of the uniform spread of a request's predictability around
/// its phase's `alpha`.
pub const SPREAD: f64 = 0.08;
/// The highest per-position acceptance probability a request can have.
pub const MAX_ACCEPTANCE: f64 = 0.98;
/// Per-position acceptance in `low` phases and of chat-like requests.
pub const LOW_ALPHA: f64 = 0.5;
/// Per-position acceptance in `high` phases and of code-like requests.
pub const HIGH_ALPHA: f64 = 0.9;
/// Per-position acceptance of the `steady` workload.
pub const STEADY_ALPHA: f64 = 0.8;
/// Per-position acceptance of a `bursty` request in its easy condition.
pub const EASY_ALPHA: f64 = 0.9;
/// Per-position acceptance of a `bursty` request in its hard condition.
pub const HARD_ALPHA: f64 = 0.3;
/// Mean steps a `bursty` request stays in one condition (`--persistence`).
pub const DEFAULT_PERSISTENCE: f64 = 30.0;
/// Share of requests with structured output.
pub const STRUCTURED_SHARE: f64 = 0.1;
/// Share of request-steps on which nothing is drafted.
pub const UNDRAFTED_SHARE: f64 = 0.03;
/// A structured-output request's grammar leaves its draft whole when a
/// uniform draw is below this (half of its steps with a draft).
pub const GRAMMAR_WHOLE_BELOW: f64 = 0.5;
/// ... cuts it to a uniformly drawn shorter length (`0..len`) when the draw
/// is below this, and to nothing (`k = 0`) from here on (12% of its steps).
pub const GRAMMAR_SHORTER_BELOW: f64 = 0.88;
/// One in this many of a structured request's steps whose draft the grammar
/// cut is reported with `a = k + 1` (a rejected observation).
pub const GRAMMAR_REJECTED_ONE_IN: usize = 2_000;

/// The kinds of request of the `classes` workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    Code,
    Math,
    Summarization,
}

impl Class {
    /// Every class, in the order of [`CLASS_PROFILES`].
    pub const ALL: [Class; 3] = [Class::Code, Class::Math, Class::Summarization];

    pub fn name(self) -> &'static str {
        match self {
            Class::Code => "code",
            Class::Math => "math",
            Class::Summarization => "summarization",
        }
    }

    /// The measured cumulative profile `P_1 ..= P_7`.
    pub fn profile(self) -> &'static [f64; 7] {
        &CLASS_PROFILES[self as usize]
    }

    /// The probability that drafted position `position` (from 1) is
    /// accepted once every position before it was: `P_i / P_{i-1}` up to
    /// 7, the rate of position 7 beyond.
    pub fn continuation(self, position: usize) -> f64 {
        let p = self.profile();
        let i = position.clamp(1, p.len());
        let before = if i == 1 { 1.0 } else { p[i - 2] };
        if before == 0.0 {
            0.0
        } else {
            p[i - 1] / before
        }
    }
}

/// The cumulative per-position acceptance `P_1 ..= P_7` of EAGLE3 on
/// Qwen3-8B at `T = 0.6`, `K = 7` (vllm-project/speculators issue #563,
/// derived from the mean acceptance lengths it reports at `k = 1..7`): code, math, summarization.
pub const CLASS_PROFILES: [[f64; 7]; 3] = [
    [0.81, 0.59, 0.40, 0.26, 0.16, 0.08, 0.03],
    [0.83, 0.67, 0.45, 0.33, 0.17, 0.16, 0.07],
    [0.69, 0.42, 0.24, 0.11, 0.04, 0.02, 0.00],
];

/// The workloads of `--workload`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// One acceptance level for the whole run.
    Steady,
    /// Low- and high-acceptance phases in turn.
    Transition,
    /// Code-like and chat-like requests mixed in every batch.
    Mixed,
    /// Every request alternates between an easy and a hard condition.
    Bursty,
    /// Code, math and summarization requests with measured profiles.
    Classes,
    /// Logged requests replayed from n-gram drafting traces (`--traces`):
    /// what the drafter proposes and the verifier accepts is the trace's,
    /// not drawn (see `trace_set`).
    Traces,
}

impl Workload {
    /// Every workload, in the order of the policy table.
    pub const ALL: [Workload; 5] = [
        Workload::Transition,
        Workload::Steady,
        Workload::Mixed,
        Workload::Bursty,
        Workload::Classes,
    ];

    /// The name `--workload` takes.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Steady => "steady",
            Workload::Transition => "transition",
            Workload::Mixed => "mixed",
            Workload::Bursty => "bursty",
            Workload::Classes => "classes",
            Workload::Traces => "traces",
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Workload {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "steady" => Ok(Workload::Steady),
            "transition" => Ok(Workload::Transition),
            "mixed" => Ok(Workload::Mixed),
            "bursty" => Ok(Workload::Bursty),
            "classes" => Ok(Workload::Classes),
            "traces" => Err(
                "the traces workload is chosen by --traces FILE (the requests to replay)".into(),
            ),
            _ => Err(format!(
                "{s:?} is not a workload (steady, transition, mixed, bursty or classes; \
                 --traces FILE replays logged requests)"
            )),
        }
    }
}

/// A workload with its settings: which phase a moment of the run is in,
/// and the acceptance of a request in it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Phases {
    pub workload: Workload,
    /// Length of one phase of `transition`, in seconds (run time, virtual
    /// or real).
    pub phase_secs: f64,
    /// Mean steps a `bursty` request stays in one condition (at least 1).
    pub persistence: f64,
}

impl Phases {
    /// The phase a moment `t` (seconds since the start) is in: `0, 1, 2,
    /// ...` for `transition`, always 0 otherwise.
    pub fn phase_at(&self, t: f64) -> usize {
        match self.workload {
            Workload::Transition => (t / self.phase_secs).max(0.0) as usize,
            _ => 0,
        }
    }

    /// When phase `index` starts, in seconds.
    pub fn phase_start(&self, index: usize) -> f64 {
        match self.workload {
            Workload::Transition => index as f64 * self.phase_secs,
            _ => 0.0,
        }
    }

    /// The name of phase `index`: `low`/`high` for `transition`, else the
    /// workload's name.
    pub fn phase_name(&self, index: usize) -> &'static str {
        match self.workload {
            Workload::Transition if index % 2 == 0 => "low",
            Workload::Transition => "high",
            w => w.name(),
        }
    }

    /// Draws the kind and predictability offset of a new request.
    ///
    /// The draws of the first three workloads are those of the demo before
    /// `bursty` and `classes` existed (kind, offset, structured), so their
    /// runs are unchanged; the new workloads draw their own after these.
    pub fn new_request(&self, rng: &mut Rng) -> RequestTraits {
        if self.workload == Workload::Traces {
            // A traced request's drafts and acceptance are the trace's:
            // nothing to draw.
            return RequestTraits {
                code_like: false,
                offset: 0.0,
                structured: false,
                easy: false,
                class: None,
            };
        }
        let code_like = match self.workload {
            Workload::Mixed => rng.chance(0.5),
            _ => false,
        };
        let offset = SPREAD * (2.0 * rng.unit() - 1.0);
        let structured = rng.chance(STRUCTURED_SHARE);
        let (easy, class) = match self.workload {
            Workload::Bursty => (rng.chance(0.5), None),
            Workload::Classes => (false, Some(Class::ALL[rng.below(Class::ALL.len())])),
            _ => (false, None),
        };
        RequestTraits {
            code_like,
            offset,
            structured,
            easy,
            class,
        }
    }

    /// Before each step of a request: a `bursty` request leaves its
    /// condition with probability `1 / persistence` (one draw); other
    /// workloads draw nothing.
    pub fn advance(&self, rng: &mut Rng, request: &mut RequestTraits) {
        if self.workload == Workload::Bursty && rng.chance(1.0 / self.persistence) {
            request.easy = !request.easy;
        }
    }

    /// How the verifier treats the drafts of `request` in phase `phase`.
    pub fn acceptance(&self, phase: usize, request: &RequestTraits) -> Acceptance {
        let alpha = match self.workload {
            Workload::Classes => {
                return Acceptance::Class(request.class.unwrap_or(Class::Code));
            }
            Workload::Steady => STEADY_ALPHA,
            Workload::Transition if phase % 2 == 0 => LOW_ALPHA,
            Workload::Transition => HIGH_ALPHA,
            Workload::Mixed if request.code_like => HIGH_ALPHA,
            Workload::Mixed => LOW_ALPHA,
            Workload::Bursty if request.easy => EASY_ALPHA,
            Workload::Bursty => HARD_ALPHA,
            // Not drawn: the engine replays the trace.
            Workload::Traces => 0.0,
        };
        Acceptance::Geometric((alpha + request.offset).clamp(0.0, MAX_ACCEPTANCE))
    }
}

/// What a request is, drawn when it is admitted (and, for `bursty`, the
/// condition it is in now).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RequestTraits {
    /// Code-like (high acceptance) rather than chat-like, in `mixed`.
    pub code_like: bool,
    /// Added to the phase's `alpha`.
    pub offset: f64,
    /// Structured output: a grammar may cut drafts short.
    pub structured: bool,
    /// In its easy condition, in `bursty` (changes between steps).
    pub easy: bool,
    /// Its kind, in `classes`.
    pub class: Option<Class>,
}

/// The chance of each drafted position to be accepted once the ones
/// before it were.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Acceptance {
    /// The same at every position.
    Geometric(f64),
    /// A `classes` profile's continuation rates.
    Class(Class),
}

impl Acceptance {
    /// The continuation rate of drafted position `position` (from 1).
    #[inline]
    pub fn at(self, position: usize) -> f64 {
        match self {
            Acceptance::Geometric(p) => p,
            Acceptance::Class(class) => class.continuation(position),
        }
    }
}

/// How many of `drafted` positions the verifier accepts: the longest
/// agreeing prefix, position `i` agreeing with probability
/// `acceptance.at(i)` (one draw per position reached).
pub fn verify(rng: &mut Rng, drafted: usize, acceptance: Acceptance) -> usize {
    let mut accepted = 0;
    while accepted < drafted && rng.chance(acceptance.at(accepted + 1)) {
        accepted += 1;
    }
    accepted
}

/// What a structured-output request drafts of the `len` scheduled: its
/// grammar cuts some drafts short, sometimes to nothing (one draw, only
/// when `len > 0`; see [`GRAMMAR_WHOLE_BELOW`]).
pub fn grammar_cut(rng: &mut Rng, len: usize) -> usize {
    if len == 0 {
        return 0;
    }
    let r = rng.unit();
    if r < GRAMMAR_WHOLE_BELOW {
        len
    } else if r < GRAMMAR_SHORTER_BELOW {
        rng.below(len)
    } else {
        0
    }
}

/// Whether a grammar invalidates drafts after the verifier sampled them,
/// so that the engine reports one more accepted token than drafted
/// (rarely: see [`GRAMMAR_REJECTED_ONE_IN`]; one draw).
pub fn grammar_rejects(rng: &mut Rng) -> bool {
    rng.below(GRAMMAR_REJECTED_ONE_IN) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phases(workload: Workload) -> Phases {
        Phases {
            workload,
            phase_secs: 2.0,
            persistence: DEFAULT_PERSISTENCE,
        }
    }

    fn plain() -> RequestTraits {
        RequestTraits {
            code_like: false,
            offset: 0.0,
            structured: false,
            easy: false,
            class: None,
        }
    }

    #[test]
    fn transition_alternates_low_and_high_phases() {
        let phases = phases(Workload::Transition);
        let names: Vec<_> = [0.0, 1.9, 2.0, 5.0, 6.5]
            .iter()
            .map(|&t| phases.phase_name(phases.phase_at(t)))
            .collect();
        assert_eq!(names, ["low", "low", "high", "low", "high"]);
        assert_eq!(phases.phase_at(6.5), 3);
        assert_eq!(phases.phase_start(3), 6.0);
        let request = plain();
        assert_eq!(
            phases.acceptance(0, &request),
            Acceptance::Geometric(LOW_ALPHA)
        );
        assert_eq!(
            phases.acceptance(1, &request),
            Acceptance::Geometric(HIGH_ALPHA)
        );
    }

    #[test]
    fn mixed_requests_are_of_both_kinds_in_every_phase() {
        let phases = phases(Workload::Mixed);
        assert_eq!(phases.phase_at(100.0), 0);
        let mut rng = Rng::new(7);
        let requests: Vec<_> = (0..1000).map(|_| phases.new_request(&mut rng)).collect();
        let code = requests.iter().filter(|r| r.code_like).count();
        assert!((400..600).contains(&code), "{code} code-like of 1000");
        for r in &requests {
            let Acceptance::Geometric(p) = phases.acceptance(0, r) else {
                panic!("mixed is geometric");
            };
            let alpha = if r.code_like { HIGH_ALPHA } else { LOW_ALPHA };
            assert!((p - alpha).abs() <= SPREAD + 1e-12, "{p} around {alpha}");
        }
    }

    #[test]
    fn the_first_workloads_draw_what_they_always_drew() {
        // Kind (mixed only), offset, structured: three draws for mixed, two
        // otherwise, so runs of steady, transition and mixed keep their
        // numbers.
        for (workload, draws) in [
            (Workload::Steady, 2),
            (Workload::Transition, 2),
            (Workload::Mixed, 3),
            (Workload::Bursty, 3),
            (Workload::Classes, 3),
        ] {
            let mut a = Rng::new(11);
            phases(workload).new_request(&mut a);
            let mut b = Rng::new(11);
            for _ in 0..draws {
                b.unit();
            }
            assert_eq!(a.unit(), b.unit(), "{workload}");
        }
    }

    #[test]
    fn a_bursty_request_switches_conditions_and_only_bursty_draws_for_it() {
        let mut rng = Rng::new(3);
        let mut request = plain();
        let before = rng.clone().unit();
        phases(Workload::Steady).advance(&mut rng, &mut request);
        assert_eq!(rng.unit(), before, "steady draws nothing per step");
        let bursty = Phases {
            persistence: 1.0,
            ..phases(Workload::Bursty)
        };
        // Persistence 1: a new condition at every step.
        for i in 0..10 {
            bursty.advance(&mut rng, &mut request);
            assert_eq!(request.easy, i % 2 == 0);
            let alpha = if request.easy { EASY_ALPHA } else { HARD_ALPHA };
            assert_eq!(bursty.acceptance(0, &request), Acceptance::Geometric(alpha));
        }
    }

    #[test]
    fn class_continuation_rates_are_ratios_of_the_cumulative_profile() {
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        assert!(close(Class::Code.continuation(1), 0.81));
        assert!(close(Class::Code.continuation(2), 0.59 / 0.81));
        assert!(close(Class::Math.continuation(7), 0.07 / 0.16));
        // Beyond 7: the rate of position 7.
        assert!(close(Class::Math.continuation(8), 0.07 / 0.16));
        assert!(close(Class::Code.continuation(64), 0.03 / 0.08));
        // Summarization's P_7 is 0: nothing beyond position 6 is accepted.
        assert_eq!(Class::Summarization.continuation(7), 0.0);
        assert_eq!(Class::Summarization.continuation(9), 0.0);
        for class in Class::ALL {
            for i in 1..=10 {
                let c = class.continuation(i);
                assert!((0.0..=1.0).contains(&c), "{} {i}: {c}", class.name());
            }
        }
    }

    #[test]
    fn the_verifier_accepts_the_longest_agreeing_prefix() {
        let mut rng = Rng::new(1);
        let certain = Acceptance::Geometric(1.0);
        assert_eq!(verify(&mut rng, 5, certain), 5);
        assert_eq!(verify(&mut rng, 5, Acceptance::Geometric(0.0)), 0);
        assert_eq!(verify(&mut rng, 0, certain), 0);
        // Summarization accepts nothing at position 7.
        for _ in 0..1000 {
            assert!(verify(&mut rng, 8, Acceptance::Class(Class::Summarization)) <= 6);
        }
        // Mean accepted of 8 drafted at p = 0.5: sum of 0.5^i, i = 1..=8.
        let n = 200_000;
        let half = Acceptance::Geometric(0.5);
        let mean = (0..n).map(|_| verify(&mut rng, 8, half)).sum::<usize>() as f64 / n as f64;
        let want: f64 = (1..=8).map(|i| 0.5f64.powi(i)).sum();
        assert!((mean - want).abs() < 0.01, "{mean} vs {want}");
    }

    #[test]
    fn workload_names_round_trip_and_bad_names_are_errors() {
        for w in Workload::ALL {
            assert_eq!(w.name().parse::<Workload>(), Ok(w));
        }
        assert!(
            "burst"
                .parse::<Workload>()
                .unwrap_err()
                .contains("not a workload")
        );
    }
}
