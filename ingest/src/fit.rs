//! Counts from rounded rates: the accepted count at each position over
//! `n` drafts, given each position's rate printed rounded (`%.3f`: within
//! ±0.0005 of the true count over `n`), such that every count lies within
//! its rate's rounding window, no count grows with the position (a token
//! is accepted only after every earlier one), and the counts add up to
//! the accepted tokens printed beside them. The one algorithm of the logs
//! that print rates ([vLLM's](crate::source::vllm_log),
//! [llama.cpp's](crate::source::llamacpp_log)).
//!
//! Start from each rate times the drafts, rounded; keep each count at or
//! below the one before; then move counts, within their windows and the
//! order, until they add up. Which count moves, and by how much, is the
//! [`Rule`]: the two logs' readers were written with different rules, and
//! each rule's counts are the ones their advice has been given on, so
//! both are kept rather than one changing the other's output (the rules
//! differ where the window does not hold the rounded count, below 1,000
//! drafts at 3 decimals, and in which position takes a correction).

/// Which count moves while the counts do not add up, and how far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// vLLM's: every count starts clamped into its window (widened by
    /// 1e-6 against floating-point error); the movable count farthest
    /// from its rate times the drafts moves, toward it, by as much as the
    /// window, the order and what is left allow (a few steps however many
    /// drafts).
    TowardRate,
    /// llama.cpp's: counts start as rounded, a position's window exact
    /// and capped by the window before it; the first movable position
    /// takes what is missing, or the last movable one gives back what is
    /// over, as far as its window and the order allow.
    InOrder,
}

/// Why no counts fit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoFit {
    /// The first count given (`first`) is outside the first rate's
    /// window.
    First,
    /// No counts within the windows and the order add up to the accepted
    /// tokens; `sum` is what they added up to when none could move.
    Sum {
        /// The counts' sum when no count could move further.
        sum: u64,
    },
}

/// The accepted count at each position over `drafts` drafts, each within
/// `half` (half a unit of the rates' last decimal: 0.0005 for `%.3f`) of
/// its rate times the drafts, never growing with the position, adding up
/// to `accepted`; the first count is `first` where the input prints it.
/// `rates` are in `[0, 1]`.
///
/// ```
/// use specdec_ingest::fit::{Rule, fit};
///
/// // 0.333 and 0.167 of 1,000 drafts, 500 accepted tokens.
/// for rule in [Rule::TowardRate, Rule::InOrder] {
///     let counts = fit(&[0.333, 0.167], 0.0005, 1000, 500, None, rule).unwrap();
///     assert_eq!(counts, [333, 167]);
/// }
/// // 3 decimals cannot give 600 of 1,000 from these rates.
/// assert!(fit(&[0.333, 0.167], 0.0005, 1000, 600, None, Rule::InOrder).is_err());
/// ```
pub fn fit(
    rates: &[f64],
    half: f64,
    drafts: u64,
    accepted: u64,
    first: Option<u64>,
    rule: Rule,
) -> Result<Vec<u64>, NoFit> {
    let n = drafts as f64;
    let slack = match rule {
        Rule::TowardRate => 1e-6,
        Rule::InOrder => 0.0,
    };
    let window = |r: f64| {
        let lo = (((r - half) * n) - slack).ceil().max(0.0) as u64;
        let hi = ((((r + half) * n) + slack).floor() as u64).min(drafts);
        (lo, hi)
    };
    let mut windows: Vec<(u64, u64)> = rates.iter().map(|&r| window(r)).collect();
    let mut counts: Vec<u64> = rates
        .iter()
        .zip(&windows)
        .map(|(&r, &(lo, hi))| {
            let c = (r * n).round() as u64;
            match rule {
                Rule::TowardRate => c.clamp(lo, hi.max(lo)),
                Rule::InOrder => c,
            }
        })
        .collect();
    if let Some(a) = first {
        if a < windows[0].0 || a > windows[0].1 {
            return Err(NoFit::First);
        }
        counts[0] = a;
        windows[0] = (a, a);
    }
    if rule == Rule::InOrder {
        for i in 1..counts.len() {
            counts[i] = counts[i].min(counts[i - 1]);
            windows[i].1 = windows[i].1.min(windows[i - 1].1);
        }
    }
    let k = counts.len() as u64;
    let mut sum: u64 = counts.iter().sum();
    while sum != accepted {
        let up = sum < accepted;
        let movable = |i: usize| {
            let (lo, hi) = windows[i];
            if up {
                counts[i] < hi && (i == 0 || counts[i] < counts[i - 1])
            } else {
                counts[i] > lo && (i + 1 == counts.len() || counts[i] > counts[i + 1])
            }
        };
        let pick = match rule {
            Rule::TowardRate => (0..counts.len()).filter(|&i| movable(i)).max_by(|&a, &b| {
                let gap = |i: usize| {
                    let d = rates[i] * n - counts[i] as f64;
                    if up { d } else { -d }
                };
                gap(a).total_cmp(&gap(b))
            }),
            Rule::InOrder if up => (0..counts.len()).find(|&i| movable(i)),
            Rule::InOrder => (0..counts.len()).rev().find(|&i| movable(i)),
        };
        let Some(i) = pick else {
            return Err(NoFit::Sum { sum });
        };
        let (lo, hi) = windows[i];
        // As far as the window and the order allow.
        let room = if up {
            hi.min(if i == 0 { u64::MAX } else { counts[i - 1] }) - counts[i]
        } else {
            counts[i] - lo.max(counts.get(i + 1).copied().unwrap_or(0))
        };
        let left = sum.abs_diff(accepted);
        let step = match rule {
            // Toward the rate first: a few steps however many drafts.
            Rule::TowardRate => {
                let gap = (rates[i] * n - counts[i] as f64).abs().floor() as u64;
                room.min(left).min(gap.max(left.div_ceil(k)).max(1))
            }
            // The same position stays the first (last) movable one until
            // its room or what is left runs out: one step for all of it.
            Rule::InOrder => room.min(left),
        };
        if up {
            counts[i] += step;
            sum += step;
        } else {
            counts[i] -= step;
            sum -= step;
        }
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// llama.cpp's reader as it was: one token a step.
    fn in_order_one_at_a_time(
        rates: &[f64],
        drafts: u64,
        accepted: u64,
        first: Option<u64>,
    ) -> Result<Vec<u64>, NoFit> {
        let n = drafts as f64;
        let window = |r: f64| {
            (
                ((r - 0.0005) * n).ceil().max(0.0) as u64,
                (((r + 0.0005) * n).floor() as u64).min(drafts),
            )
        };
        let mut counts: Vec<u64> = rates.iter().map(|&r| (r * n).round() as u64).collect();
        let mut windows: Vec<(u64, u64)> = rates.iter().map(|&r| window(r)).collect();
        if let Some(a) = first {
            if a < windows[0].0 || a > windows[0].1 {
                return Err(NoFit::First);
            }
            counts[0] = a;
            windows[0] = (a, a);
        }
        for i in 1..counts.len() {
            counts[i] = counts[i].min(counts[i - 1]);
            windows[i].1 = windows[i].1.min(windows[i - 1].1);
        }
        let mut sum: u64 = counts.iter().sum();
        while sum != accepted {
            let step = if sum < accepted {
                (0..counts.len())
                    .find(|&i| counts[i] < windows[i].1 && (i == 0 || counts[i] < counts[i - 1]))
            } else {
                (0..counts.len()).rev().find(|&i| {
                    counts[i] > windows[i].0
                        && counts.get(i + 1).is_none_or(|&next| counts[i] > next)
                })
            };
            let Some(i) = step else {
                return Err(NoFit::Sum { sum });
            };
            if sum < accepted {
                counts[i] += 1;
                sum += 1;
            } else {
                counts[i] -= 1;
                sum -= 1;
            }
        }
        Ok(counts)
    }

    /// A small deterministic generator (SplitMix64).
    fn next(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    #[test]
    fn in_order_takes_whole_steps_with_the_counts_of_unit_steps() {
        let mut state = 7u64;
        for _ in 0..3000 {
            let k = 1 + (next(&mut state) % 5) as usize;
            let drafts = next(&mut state) % 3000;
            let rates: Vec<f64> = (0..k)
                .map(|_| (next(&mut state) % 1001) as f64 / 1000.0)
                .collect();
            let target: f64 = rates.iter().sum::<f64>() * drafts as f64;
            let accepted = (target as u64)
                .saturating_add(next(&mut state) % 7)
                .saturating_sub(3);
            let first =
                (next(&mut state) % 2 == 0).then(|| (rates[0] * drafts as f64).round() as u64);
            assert_eq!(
                fit(&rates, 0.0005, drafts, accepted, first, Rule::InOrder),
                in_order_one_at_a_time(&rates, drafts, accepted, first),
                "{rates:?} {drafts} {accepted} {first:?}"
            );
        }
    }

    #[test]
    fn counts_are_within_their_windows_ordered_and_add_up() {
        for rule in [Rule::TowardRate, Rule::InOrder] {
            let counts = fit(&[0.730, 0.521, 0.354], 0.0005, 12_345, 19_812, None, rule).unwrap();
            assert_eq!(counts.iter().sum::<u64>(), 19_812);
            assert!(counts.windows(2).all(|w| w[1] <= w[0]));
            for (c, r) in counts.iter().zip([0.730, 0.521, 0.354]) {
                assert!((*c as f64 - r * 12_345.0).abs() <= 0.0005 * 12_345.0 + 1e-6);
            }
        }
    }

    #[test]
    fn enormous_counts_take_few_steps_under_either_rule() {
        let n = 1_000_000_000_000_000u64;
        for rule in [Rule::TowardRate, Rule::InOrder] {
            let counts = fit(&[0.5], 0.0005, n, 500_400_000_000_000, None, rule).unwrap();
            assert_eq!(counts, [500_400_000_000_000]);
        }
    }

    #[test]
    fn a_first_count_outside_its_window_is_refused() {
        assert_eq!(
            fit(&[0.5], 0.0005, 1000, 500, Some(520), Rule::InOrder),
            Err(NoFit::First)
        );
    }
}
