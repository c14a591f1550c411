//! Candidate definitions of a request's state, for measuring the library's
//! choice ([`RequestState`]: an exponentially weighted score of recent
//! acceptance, weight 1/4 per verify step, in four levels) against others
//! in the simulator (`--state-rule`, `policy_table --state-rules`). The
//! library is not changed by any of them: a rule only decides which of the
//! `StateController`'s states a request's steps are drafted and recorded in.
//!
//! | rule | `--state-rule` | state |
//! |---|---|---|
//! | the library's | `library` | [`RequestState`]: score moving 1/4 of the way to `accepted / tested` after each verify step, `tested = min(drafted, accepted + 1)` (the share of the positions the verifier reached that it accepted, which does not fall as drafts get longer), quartiles of the score |
//! | per drafted token | `ewma:4` | the score (weight 1/4) of `accepted / drafted` (the library's rule before these measurements) |
//! | faster memory | `ewma:2` | the same score with weight 1/2 |
//! | slower memory | `ewma:8` | the same score with weight 1/8 |
//! | the last step | `last-outcome` | the previous verify step's outcome in three levels: nothing, some, or every draft accepted |
//!
//! `ewma:N` and `tested:N` take any power of two from 2 to 64; `tested:4`
//! is the library's rule computed here (the tests check that it is the
//! same). A new request
//! starts in the middle (score 1/2; `last-outcome`: "some"), and a step
//! that drafted nothing leaves the state as it was.

use std::fmt;
use std::str::FromStr;

use specdec_metrics::RequestState;

/// Fixed-point one, as the library's.
const SCALE: u32 = 1 << 14;

/// A rule that maps a request's history to one of the `StateController`'s
/// states.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum StateRule {
    /// The library's [`RequestState`].
    #[default]
    Library,
    /// A score of `accepted / drafted` with weight `1 / 2^shift`.
    Ewma { shift: u32 },
    /// The previous verify step's outcome: nothing, some, or all accepted.
    LastOutcome,
    /// The score of `accepted / tested` with weight `1 / 2^shift`.
    Tested { shift: u32 },
}

/// A request's state under a sim-side rule: the fixed-point score (or the
/// last outcome's level).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuleState(u16);

impl StateRule {
    /// The rules `policy_table --state-rules` compares, in its order.
    pub const COMPARED: [StateRule; 5] = [
        StateRule::Library,
        StateRule::Ewma { shift: 2 },
        StateRule::Ewma { shift: 1 },
        StateRule::Ewma { shift: 3 },
        StateRule::LastOutcome,
    ];

    /// A new request's state.
    pub fn start(self) -> RuleState {
        match self {
            StateRule::LastOutcome => RuleState(1),
            _ => RuleState((SCALE / 2) as u16),
        }
    }

    /// The state after a verify step that drafted `drafted` and accepted
    /// `accepted` (clamped to `drafted`).
    pub fn after(self, state: RuleState, drafted: usize, accepted: usize) -> RuleState {
        if drafted == 0 {
            return state;
        }
        let accepted = accepted.min(drafted);
        let (shift, of) = match self {
            StateRule::LastOutcome => {
                return RuleState(match accepted {
                    0 => 0,
                    a if a == drafted => 2,
                    _ => 1,
                });
            }
            // The library's rule keeps its own state; computed here too.
            StateRule::Library => (2, drafted.min(accepted + 1)),
            StateRule::Ewma { shift } => (shift, drafted),
            StateRule::Tested { shift } => (shift, drafted.min(accepted + 1)),
        };
        let target = (accepted * SCALE as usize / of) as i32;
        let score = i32::from(state.0);
        // As the library: rounds towards the target, never stopping a step
        // short of the top or bottom.
        let step = (target - score) >> shift;
        let step = if step == 0 {
            (target - score).signum()
        } else {
            step
        };
        RuleState((score + step) as u16)
    }

    /// The state's number, `0..RequestState::COUNT`: the score's quarter,
    /// or the last outcome's level (0, 1, 2; state 3 unused).
    pub fn index(self, state: RuleState) -> usize {
        match self {
            StateRule::LastOutcome => usize::from(state.0),
            _ => (usize::from(state.0) * RequestState::COUNT / SCALE as usize)
                .min(RequestState::COUNT - 1),
        }
    }
}

impl fmt::Display for StateRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateRule::Library => f.write_str("library"),
            StateRule::Ewma { shift } => write!(f, "ewma:{}", 1u32 << shift),
            StateRule::LastOutcome => f.write_str("last-outcome"),
            StateRule::Tested { shift } => write!(f, "tested:{}", 1u32 << shift),
        }
    }
}

impl FromStr for StateRule {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let weight = |n: &str| -> Result<u32, String> {
            match n.parse::<u32>() {
                Ok(n) if n.is_power_of_two() && (2..=64).contains(&n) => Ok(n.trailing_zeros()),
                _ => Err(format!(
                    "{s:?}: the N of ewma:N and tested:N (a weight of 1/N) must be a power of \
                     two from 2 to 64"
                )),
            }
        };
        match s {
            "library" => Ok(StateRule::Library),
            "last-outcome" => Ok(StateRule::LastOutcome),
            _ => {
                if let Some(n) = s.strip_prefix("ewma:") {
                    Ok(StateRule::Ewma { shift: weight(n)? })
                } else if let Some(n) = s.strip_prefix("tested:") {
                    Ok(StateRule::Tested { shift: weight(n)? })
                } else {
                    Err(format!(
                        "{s:?} is not a state rule (library, ewma:N, last-outcome or tested:N)"
                    ))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    #[test]
    fn tested_4_is_the_librarys_request_state() {
        let rule = StateRule::Tested { shift: 2 };
        let mut rng = Rng::new(12);
        for _ in 0..200 {
            let (mut ours, mut library) = (rule.start(), RequestState::new());
            for _ in 0..50 {
                assert_eq!(rule.index(ours), library.index());
                let drafted = rng.below(9);
                let accepted = rng.below(drafted + 1);
                ours = rule.after(ours, drafted, accepted);
                library = library.after(drafted, accepted);
                assert!((f64::from(ours.0) / f64::from(SCALE) - library.score()).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn last_outcome_has_three_levels() {
        let rule = StateRule::LastOutcome;
        let s = rule.start();
        assert_eq!(rule.index(s), 1);
        assert_eq!(rule.index(rule.after(s, 4, 0)), 0);
        assert_eq!(rule.index(rule.after(s, 4, 2)), 1);
        assert_eq!(rule.index(rule.after(s, 4, 4)), 2);
        assert_eq!(rule.index(rule.after(s, 4, 9)), 2, "clamped");
        let none = rule.after(s, 4, 0);
        assert_eq!(rule.after(none, 0, 0), none, "no draft, no news");
    }

    #[test]
    fn faster_and_slower_memories_move_by_their_weight() {
        // From 1/2 towards 1: a half, a quarter, an eighth of the way.
        for (shift, after_one) in [(1, 0.75), (2, 0.625), (3, 0.5625)] {
            let rule = StateRule::Ewma { shift };
            let s = rule.after(rule.start(), 4, 4);
            assert_eq!(f64::from(s.0) / f64::from(SCALE), after_one);
        }
        // Full acceptances reach the top quarter (a score of 3/4) after 1
        // step with weight 1/2, 3 with 1/4 (1 - (3/4)^n / 2), 6 with 1/8.
        let top = |shift: u32, steps: usize| {
            let rule = StateRule::Ewma { shift };
            let mut s = rule.start();
            for _ in 0..steps {
                s = rule.after(s, 4, 4);
            }
            rule.index(s)
        };
        assert_eq!((top(1, 1), top(2, 2), top(2, 3)), (3, 2, 3));
        assert_eq!((top(3, 5), top(3, 6)), (2, 3));
    }

    #[test]
    fn tested_counts_only_the_positions_the_verifier_reached() {
        let rule = StateRule::Tested { shift: 2 };
        // 8 drafted, 1 accepted: 2 tested, a rate of 1/2, where a score of
        // accepted over drafted would see 1/8.
        let s = rule.after(rule.start(), 8, 1);
        assert_eq!(f64::from(s.0) / f64::from(SCALE), 0.5);
        let per_drafted = StateRule::Ewma { shift: 2 };
        let d = per_drafted.after(per_drafted.start(), 8, 1);
        assert!(f64::from(d.0) / f64::from(SCALE) < 0.5);
        // Every draft accepted: all tested, 1.
        let s = rule.after(rule.start(), 8, 8);
        assert_eq!(f64::from(s.0) / f64::from(SCALE), 0.625);
    }

    #[test]
    fn names_round_trip_and_bad_ones_say_why() {
        for rule in StateRule::COMPARED {
            assert_eq!(rule.to_string().parse::<StateRule>(), Ok(rule));
        }
        assert_eq!("ewma:4".parse(), Ok(StateRule::Ewma { shift: 2 }));
        assert_eq!("tested:16".parse(), Ok(StateRule::Tested { shift: 4 }));
        for bad in ["ewma:3", "ewma:1", "ewma:128", "tested:x"] {
            assert!(
                bad.parse::<StateRule>()
                    .unwrap_err()
                    .contains("power of two"),
                "{bad}"
            );
        }
        assert!(
            "ewma"
                .parse::<StateRule>()
                .unwrap_err()
                .contains("not a state rule")
        );
    }
}
