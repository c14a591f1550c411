//! [`StepCost`]: what an engine step costs at each draft length, and
//! [`BoundCost`], the same cost bound to one `K` and made relative to a step
//! without speculation, which is what every decision uses.

use core::fmt;

use super::error::{CostError, CostTerm};
use crate::record::MAX_MAX_DRAFT_LEN;

/// The smallest step cost (and smallest nonzero cost per draft token)
/// accepted. Only ratios of costs matter, so any unit works; this bound and
/// [`MAX_STEP_COST`] keep every ratio of two costs, and every goodput (at most
/// 65 tokens per step over a cost), a finite, normal `f64`: `1e-150` to
/// `1e150` spans 300 orders of magnitude, and two such costs have a ratio
/// between `1e-300` and `1e300`.
pub const MIN_STEP_COST: f64 = 1e-150;

/// The largest step cost (and cost per draft token) accepted; see
/// [`MIN_STEP_COST`].
pub const MAX_STEP_COST: f64 = 1e150;

/// What one engine step costs, by draft length `k` (`k = 0`: a step without
/// speculation), in any unit the engine likes (milliseconds, GPU-seconds,
/// relative to a plain decode step): only ratios matter.
///
/// Only the engine knows it: it depends on the hardware, the model pair and
/// the batch size. Measure it (time steps at a few draft lengths) rather than
/// guessing; advice from a made-up cost is only as good as the guess.
///
/// A linear cost covers every draft length up to 64; a table covers exactly
/// the draft lengths `0..=K` it lists, and is used only with that `K` (an
/// [`Advisor`](crate::Advisor), [`DraftController`](crate::DraftController)
/// or [`BatchTable`](crate::BatchTable) given a table of another length
/// returns [`CostError::TableLength`]; nothing is truncated or extended).
///
/// ```
/// use specdec_metrics::StepCost;
/// // A decode step costs 1; each draft token adds 0.1 (drafting plus the
/// // verifier's extra work).
/// let linear = StepCost::linear(1.0, 0.1)?;
/// assert_eq!(linear.cost(3), Some(1.3));
/// // Measured step times in ms, for k = 0..=3.
/// let table = StepCost::table(vec![20.0, 22.5, 24.0, 26.5])?;
/// assert_eq!(table.cost(2), Some(24.0));
/// assert_eq!(table.cost(4), None); // not in the table
/// assert!(StepCost::linear(0.0, 0.1).is_err());
/// # Ok::<(), specdec_metrics::CostError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct StepCost {
    model: CostModel,
}

#[derive(Clone, Debug, PartialEq)]
enum CostModel {
    Linear { base: f64, per_draft_token: f64 },
    Table(Box<[f64]>),
}

impl StepCost {
    /// `cost(k) = base + per_draft_token * k`, for every `k` up to 64.
    ///
    /// # Errors
    ///
    /// [`CostError`] unless `base` is a finite number in
    /// [`MIN_STEP_COST`]`..=`[`MAX_STEP_COST`], and `per_draft_token` is zero
    /// or in that range too.
    ///
    /// ```
    /// use specdec_metrics::StepCost;
    /// assert!(StepCost::linear(1.0, 0.0).is_ok()); // free drafts
    /// assert!(StepCost::linear(1.0, -0.1).is_err());
    /// assert!(StepCost::linear(f64::INFINITY, 0.1).is_err());
    /// assert!(StepCost::linear(5e-324, 0.0).is_err()); // subnormal: below 1e-150
    /// ```
    pub fn linear(base: f64, per_draft_token: f64) -> Result<Self, CostError> {
        check_cost(CostTerm::Base, base)?;
        if per_draft_token != 0.0 {
            check_cost(CostTerm::PerDraftToken, per_draft_token)?;
        }
        Ok(Self {
            model: CostModel::Linear {
                base,
                per_draft_token,
            },
        })
    }

    /// Measured costs, entry `k` for draft length `k = 0..=K`.
    ///
    /// # Errors
    ///
    /// [`CostError`] when an entry is not a finite number in
    /// [`MIN_STEP_COST`]`..=`[`MAX_STEP_COST`], or the table is empty.
    ///
    /// ```
    /// use specdec_metrics::{CostError, CostTerm, StepCost};
    /// assert!(matches!(
    ///     StepCost::table(vec![1.0, -2.0]),
    ///     Err(CostError::NotPositive { term: CostTerm::Table { draft_len: 1 }, .. })
    /// ));
    /// ```
    pub fn table(costs: Vec<f64>) -> Result<Self, CostError> {
        if costs.is_empty() {
            return Err(CostError::EmptyTable);
        }
        for (draft_len, &value) in costs.iter().enumerate() {
            check_cost(CostTerm::Table { draft_len }, value)?;
        }
        Ok(Self {
            model: CostModel::Table(costs.into_boxed_slice()),
        })
    }

    /// The cost of a step that drafts `k` tokens; `None` where the cost is
    /// not given (above a table's last entry, or above 64 for a linear
    /// cost).
    ///
    /// ```
    /// use specdec_metrics::StepCost;
    /// let table = StepCost::table(vec![1.0, 2.0])?;
    /// assert_eq!((table.cost(1), table.cost(2)), (Some(2.0), None));
    /// assert_eq!(StepCost::linear(1.0, 0.5)?.cost(64), Some(33.0));
    /// assert_eq!(StepCost::linear(1.0, 0.5)?.cost(65), None);
    /// # Ok::<(), specdec_metrics::CostError>(())
    /// ```
    pub fn cost(&self, k: usize) -> Option<f64> {
        match &self.model {
            CostModel::Linear {
                base,
                per_draft_token,
            } => (k <= MAX_MAX_DRAFT_LEN).then(|| base + per_draft_token * k as f64),
            CostModel::Table(t) => t.get(k).copied(),
        }
    }

    /// The largest draft length the cost is given for: `None` for a linear
    /// cost (any up to 64), the table's length minus one for a table.
    ///
    /// ```
    /// use specdec_metrics::StepCost;
    /// assert_eq!(StepCost::linear(1.0, 0.1)?.max_draft_len(), None);
    /// assert_eq!(StepCost::table(vec![1.0, 1.2, 1.4])?.max_draft_len(), Some(2));
    /// # Ok::<(), specdec_metrics::CostError>(())
    /// ```
    pub fn max_draft_len(&self) -> Option<usize> {
        match &self.model {
            CostModel::Linear { .. } => None,
            CostModel::Table(t) => Some(t.len() - 1),
        }
    }

    /// Whether the cost can be used with the maximum draft length
    /// `max_draft_len`: always for a linear cost, for a table when it has
    /// exactly `max_draft_len + 1` entries.
    ///
    /// # Errors
    ///
    /// [`CostError::TableLength`] for a table of another length.
    ///
    /// ```
    /// use specdec_metrics::StepCost;
    /// let table = StepCost::table(vec![1.0, 1.2, 1.4])?;
    /// assert!(table.check(2).is_ok());
    /// assert!(table.check(3).is_err());
    /// # Ok::<(), specdec_metrics::CostError>(())
    /// ```
    pub fn check(&self, max_draft_len: usize) -> Result<(), CostError> {
        self.bind(max_draft_len).map(drop)
    }

    /// The number of costs of a table (`None` for a linear cost).
    pub(crate) fn table_len(&self) -> Option<usize> {
        match &self.model {
            CostModel::Table(t) => Some(t.len()),
            CostModel::Linear { .. } => None,
        }
    }

    /// The cost bound to `max_draft_len` (`1..=64`, checked by the caller).
    pub(crate) fn bind(&self, max_draft_len: usize) -> Result<BoundCost, CostError> {
        debug_assert!(max_draft_len <= MAX_MAX_DRAFT_LEN);
        let costs: Box<[f64]> = match &self.model {
            CostModel::Table(t) if t.len() != max_draft_len + 1 => {
                return Err(CostError::TableLength {
                    max_draft_len,
                    found: t.len(),
                });
            }
            CostModel::Table(t) => t.clone(),
            CostModel::Linear { .. } => (0..=max_draft_len)
                .map(|k| self.cost(k).unwrap_or(f64::INFINITY))
                .collect(),
        };
        // Both bounded by MIN_STEP_COST and MAX_STEP_COST (a linear cost at
        // most 65 times), so every ratio is finite and nonzero.
        let relative = costs.iter().map(|&c| c / costs[0]).collect();
        Ok(BoundCost { costs, relative })
    }
}

impl fmt::Display for StepCost {
    /// `linear, cost(k) = 1 + 0.1 k` or `table, cost(0..=3) = 20, 22, 24,
    /// 26`.
    ///
    /// ```
    /// use specdec_metrics::StepCost;
    /// assert_eq!(StepCost::linear(1.0, 0.1)?.to_string(), "linear, cost(k) = 1 + 0.1 k");
    /// assert_eq!(
    ///     StepCost::table(vec![20.0, 22.5, 24.0])?.to_string(),
    ///     "table, cost(0..=2) = 20, 22.5, 24"
    /// );
    /// # Ok::<(), specdec_metrics::CostError>(())
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.model {
            CostModel::Linear {
                base,
                per_draft_token,
            } => write!(f, "linear, cost(k) = {base} + {per_draft_token} k"),
            CostModel::Table(t) => {
                write!(f, "table, cost(0..={}) = ", t.len() - 1)?;
                for (i, c) in t.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{c}")?;
                }
                Ok(())
            }
        }
    }
}

fn check_cost(term: CostTerm, value: f64) -> Result<(), CostError> {
    if !value.is_finite() {
        Err(CostError::NotFinite { term, value })
    } else if value <= 0.0 {
        Err(CostError::NotPositive { term, value })
    } else if !(MIN_STEP_COST..=MAX_STEP_COST).contains(&value) {
        Err(CostError::OutOfRange { term, value })
    } else {
        Ok(())
    }
}

/// A [`StepCost`] bound to one maximum draft length `K`: exactly `K + 1`
/// costs, and each relative to the cost of a step without speculation.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct BoundCost {
    /// `cost(k)`, `k = 0..=K`, in the engine's unit.
    costs: Box<[f64]>,
    /// `cost(k) / cost(0)`.
    relative: Box<[f64]>,
}

impl BoundCost {
    /// `cost(k)` in the engine's unit.
    pub(crate) fn cost(&self, k: usize) -> f64 {
        self.costs[k]
    }

    /// `cost(k) / cost(0)`: what goodputs and speedups are computed with, so
    /// they do not depend on the unit.
    pub(crate) fn relative(&self, k: usize) -> f64 {
        self.relative[k]
    }
}
