//! [`Continuation`]: the continuation counts of a histogram and the chain
//! estimate of the accepted drafts at every draft length.

use crate::AcceptanceHistogram;

/// The continuation counts `(s_i, n_i)` at every draft position `i = 1..=K`
/// (positions counted from 1 here, as in the theory; the Prometheus label
/// `position` and the report's per-position lists count from 0, so their
/// entry `i - 1` is position `i`), and the chain estimate `E[a | k]` built
/// from them.
///
/// **Continuation at position `i`**: of the steps whose draft reached
/// position `i` with every earlier draft accepted, the share whose draft `i`
/// was accepted too. Trials `n_i` are the steps with `k >= i` and `a >= i -
/// 1`; successes `s_i` the steps with `a >= i`. A fully accepted draft
/// (`a = k`) says nothing about positions above `k`: it is *censored* there,
/// not counted as a failure, which is what lets short and long drafts be
/// pooled without bias, and what spares a controller the "untracked-position
/// trap" of per-position moving averages (positions above the current draft
/// length stop getting data and can only be rediscovered by random
/// exploration).
///
/// **Expected accepted drafts at length `k`**: `E[a | k] = h_1 + h_1 h_2 +
/// ... + h_1 ... h_k` with `h_i = s_i / n_i`. Under a constant per-position
/// acceptance `alpha` this is `alpha (1 - alpha^k) / (1 - alpha)`, and `1 +
/// E[a | k]` is the expected tokens per step of Leviathan, Kalman and Matias
/// (2023). The chain pools every row, so it is defined for draft lengths
/// never drafted; it assumes that acceptance at position `i` does not depend
/// on how many drafts follow it. (Where a row has steps of its own, its
/// plain mean is a direct estimate without that assumption: the
/// [`Advisor`](crate::Advisor) reports both and flags a row that disagrees.)
///
/// ```
/// use specdec_metrics::{AcceptanceHistogram, Continuation};
/// let mut h = AcceptanceHistogram::new(3)?;
/// for (k, a) in [(1, 1), (3, 0), (3, 2), (2, 2)] {
///     h.observe(k, a)?;
/// }
/// let c = Continuation::new(&h);
/// // Position 1: all four steps drafted it, three accepted it.
/// assert_eq!(c.at(1), (3, 4));
/// // Position 2: (1, 1) is censored, (3, 0) stopped before; (3, 2) and
/// // (2, 2) reached it and accepted it.
/// assert_eq!(c.at(2), (2, 2));
/// // Position 3: only (3, 2) reached it, and rejected it.
/// assert_eq!(c.at(3), (0, 1));
/// assert_eq!(c.counts(), &[(3, 4), (2, 2), (0, 1)]);
/// // h_1 = 3/4, h_2 = 2/2, h_3 = 0/1.
/// assert_eq!(c.expected_accepted(2), Some(0.75 + 0.75));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Continuation {
    /// `(s_i, n_i)` for position `i` at index `i - 1`.
    counts: Box<[(u64, u64)]>,
}

impl Continuation {
    /// The continuation counts of `h`, in one pass over its buckets
    /// (saturating at `u64::MAX`, which keeps `s_i <= n_i`).
    pub fn new(h: &AcceptanceHistogram) -> Self {
        let max = h.max_draft_len();
        // accepted_exactly[a]: steps with exactly a accepted; last_trial[j]:
        // steps whose last trial is position j (min(k, a + 1)).
        let mut accepted_exactly = vec![0u64; max + 1];
        let mut last_trial = vec![0u64; max + 1];
        for (k, row) in h.observed_rows() {
            for (a, &count) in row.iter().enumerate() {
                accepted_exactly[a] = accepted_exactly[a].saturating_add(count);
                let j = k.min(a + 1);
                last_trial[j] = last_trial[j].saturating_add(count);
            }
        }
        let mut counts = vec![(0, 0); max].into_boxed_slice();
        let (mut successes, mut trials) = (0u64, 0u64);
        for i in (1..=max).rev() {
            successes = successes.saturating_add(accepted_exactly[i]);
            trials = trials.saturating_add(last_trial[i]);
            counts[i - 1] = (successes, trials);
        }
        Self { counts }
    }

    /// From counts already summed, position `i` at index `i - 1`.
    pub(crate) fn from_counts(counts: Box<[(u64, u64)]>) -> Self {
        debug_assert!(counts.iter().all(|&(s, n)| s <= n));
        Self { counts }
    }

    /// The maximum draft length `K`: the number of positions.
    pub fn max_draft_len(&self) -> usize {
        self.counts.len()
    }

    /// `(s_i, n_i)` for every position, position `i` at index `i - 1`.
    pub fn counts(&self) -> &[(u64, u64)] {
        &self.counts
    }

    /// `(s_i, n_i)` at position `position` (`1..=K`); `(0, 0)` for position
    /// 0 or above `K`.
    ///
    /// ```
    /// use specdec_metrics::{AcceptanceHistogram, Continuation};
    /// let mut h = AcceptanceHistogram::new(2)?;
    /// h.observe(2, 1)?;
    /// let c = Continuation::new(&h);
    /// assert_eq!((c.at(0), c.at(1), c.at(2), c.at(3)), ((0, 0), (1, 1), (0, 1), (0, 0)));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn at(&self, position: usize) -> (u64, u64) {
        position
            .checked_sub(1)
            .and_then(|i| self.counts.get(i))
            .copied()
            .unwrap_or((0, 0))
    }

    /// The continuation rate `h_i = s_i / n_i` at position `position`;
    /// `None` without trials.
    ///
    /// ```
    /// use specdec_metrics::{AcceptanceHistogram, Continuation};
    /// let mut h = AcceptanceHistogram::new(2)?;
    /// h.observe(2, 1)?;
    /// h.observe(2, 2)?;
    /// let c = Continuation::new(&h);
    /// assert_eq!((c.rate(1), c.rate(2)), (Some(1.0), Some(0.5)));
    /// assert_eq!(Continuation::new(&AcceptanceHistogram::new(2)?).rate(1), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn rate(&self, position: usize) -> Option<f64> {
        let (s, n) = self.at(position);
        (n != 0).then(|| s as f64 / n as f64)
    }

    /// Expected accepted drafts when drafting `k`, from the chain of
    /// continuation rates: `h_1 + h_1 h_2 + ... + h_1 ... h_k`. `Some(0.0)`
    /// for `k = 0`; `None` above `K` or when a position `<= k` has no
    /// trials (the [`Advisor`](crate::Advisor) uses a prior there instead).
    ///
    /// ```
    /// use specdec_metrics::{AcceptanceHistogram, Continuation};
    /// let mut h = AcceptanceHistogram::new(3)?;
    /// for (k, a) in [(1, 1), (3, 0), (3, 2), (2, 2)] {
    ///     h.observe(k, a)?;
    /// }
    /// let c = Continuation::new(&h);
    /// assert_eq!(c.expected_accepted(0), Some(0.0));
    /// assert_eq!(c.expected_accepted(1), Some(0.75));
    /// assert_eq!(c.expected_accepted(3), Some(1.5));
    /// assert_eq!(c.expected_accepted(4), None);
    /// assert_eq!(Continuation::new(&AcceptanceHistogram::new(3)?).expected_accepted(1), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn expected_accepted(&self, k: usize) -> Option<f64> {
        let (mut sum, mut product) = (0.0, 1.0);
        for &(s, n) in self.counts.get(..k)? {
            if n == 0 {
                return None;
            }
            product *= s as f64 / n as f64;
            sum += product;
        }
        Some(sum)
    }
}
