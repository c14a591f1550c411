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
//!
//! `transition` follows SGLang's adaptive-speculation benchmark (low- and
//! high-acceptance prompt sets in turn); the phase applies to every request
//! in the batch from its first step on (the proposer does badly on the new
//! prompts at once). With a linear step cost `1 + 0.1 k` the best static
//! draft length is about 2 at `alpha = 0.5` and 7–8 at `alpha = 0.9`.
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
/// Share of requests with structured output.
pub const STRUCTURED_SHARE: f64 = 0.1;
/// Share of request-steps on which nothing is drafted.
pub const UNDRAFTED_SHARE: f64 = 0.03;

/// The workloads of `--workload`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// One acceptance level for the whole run.
    Steady,
    /// Low- and high-acceptance phases in turn.
    Transition,
    /// Code-like and chat-like requests mixed in every batch.
    Mixed,
}

impl Workload {
    /// Every workload, in the order of the policy table.
    pub const ALL: [Workload; 3] = [Workload::Transition, Workload::Steady, Workload::Mixed];

    /// The name `--workload` takes.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Steady => "steady",
            Workload::Transition => "transition",
            Workload::Mixed => "mixed",
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
            _ => Err(format!(
                "{s:?} is not a workload (steady, transition or mixed)"
            )),
        }
    }
}

/// A workload with its phase length: which phase a moment of the run is
/// in, and the acceptance of a request in it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Phases {
    pub workload: Workload,
    /// Length of one phase of `transition`, in seconds (run time, virtual
    /// or real).
    pub phase_secs: f64,
}

impl Phases {
    /// The phase a moment `t` (seconds since the start) is in: `0, 1, 2,
    /// ...` for `transition`, always 0 otherwise.
    pub fn phase_at(&self, t: f64) -> usize {
        match self.workload {
            Workload::Transition => (t / self.phase_secs).max(0.0) as usize,
            Workload::Steady | Workload::Mixed => 0,
        }
    }

    /// When phase `index` starts, in seconds.
    pub fn phase_start(&self, index: usize) -> f64 {
        match self.workload {
            Workload::Transition => index as f64 * self.phase_secs,
            Workload::Steady | Workload::Mixed => 0.0,
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
    pub fn new_request(&self, rng: &mut Rng) -> RequestTraits {
        let code_like = match self.workload {
            Workload::Mixed => rng.chance(0.5),
            Workload::Steady | Workload::Transition => false,
        };
        RequestTraits {
            code_like,
            offset: SPREAD * (2.0 * rng.unit() - 1.0),
            structured: rng.chance(STRUCTURED_SHARE),
        }
    }

    /// The per-position acceptance probability of `request` in phase
    /// `phase`.
    pub fn acceptance(&self, phase: usize, request: &RequestTraits) -> f64 {
        let alpha = match self.workload {
            Workload::Steady => STEADY_ALPHA,
            Workload::Transition if phase % 2 == 0 => LOW_ALPHA,
            Workload::Transition => HIGH_ALPHA,
            Workload::Mixed if request.code_like => HIGH_ALPHA,
            Workload::Mixed => LOW_ALPHA,
        };
        (alpha + request.offset).clamp(0.0, MAX_ACCEPTANCE)
    }
}

/// What a request is, drawn once when it is admitted.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RequestTraits {
    /// Code-like (high acceptance) rather than chat-like, in `mixed`.
    pub code_like: bool,
    /// Added to the phase's `alpha`.
    pub offset: f64,
    /// Structured output: a grammar may cut drafts short.
    pub structured: bool,
}

/// How many of `drafted` positions the verifier accepts when each is
/// accepted with probability `p`: the longest agreeing prefix.
pub fn verify(rng: &mut Rng, drafted: usize, p: f64) -> usize {
    let mut accepted = 0;
    while accepted < drafted && rng.chance(p) {
        accepted += 1;
    }
    accepted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_alternates_low_and_high_phases() {
        let phases = Phases {
            workload: Workload::Transition,
            phase_secs: 2.0,
        };
        let names: Vec<_> = [0.0, 1.9, 2.0, 5.0, 6.5]
            .iter()
            .map(|&t| phases.phase_name(phases.phase_at(t)))
            .collect();
        assert_eq!(names, ["low", "low", "high", "low", "high"]);
        assert_eq!(phases.phase_at(6.5), 3);
        assert_eq!(phases.phase_start(3), 6.0);
        let request = RequestTraits {
            code_like: false,
            offset: 0.0,
            structured: false,
        };
        assert_eq!(phases.acceptance(0, &request), LOW_ALPHA);
        assert_eq!(phases.acceptance(1, &request), HIGH_ALPHA);
    }

    #[test]
    fn mixed_requests_are_of_both_kinds_in_every_phase() {
        let phases = Phases {
            workload: Workload::Mixed,
            phase_secs: 1.0,
        };
        assert_eq!(phases.phase_at(100.0), 0);
        let mut rng = Rng::new(7);
        let requests: Vec<_> = (0..1000).map(|_| phases.new_request(&mut rng)).collect();
        let code = requests.iter().filter(|r| r.code_like).count();
        assert!((400..600).contains(&code), "{code} code-like of 1000");
        for r in &requests {
            let p = phases.acceptance(0, r);
            let alpha = if r.code_like { HIGH_ALPHA } else { LOW_ALPHA };
            assert!((p - alpha).abs() <= SPREAD + 1e-12, "{p} around {alpha}");
        }
    }

    #[test]
    fn the_verifier_accepts_the_longest_agreeing_prefix() {
        let mut rng = Rng::new(1);
        assert_eq!(verify(&mut rng, 5, 1.0), 5);
        assert_eq!(verify(&mut rng, 5, 0.0), 0);
        assert_eq!(verify(&mut rng, 0, 1.0), 0);
        // Mean accepted of 8 drafted at p = 0.5: sum of 0.5^i, i = 1..=8.
        let n = 200_000;
        let mean = (0..n).map(|_| verify(&mut rng, 8, 0.5)).sum::<usize>() as f64 / n as f64;
        let want: f64 = (1..=8).map(|i| 0.5f64.powi(i)).sum();
        assert!((mean - want).abs() < 0.01, "{mean} vs {want}");
    }

    #[test]
    fn workload_names_round_trip_and_bad_names_are_errors() {
        for w in Workload::ALL {
            assert_eq!(w.name().parse::<Workload>(), Ok(w));
        }
        assert!(
            "bursty"
                .parse::<Workload>()
                .unwrap_err()
                .contains("not a workload")
        );
    }
}
