//! The accepted range of the maximum draft length `K`, and where each
//! `(drafted, accepted)` pair lives in a flat array of counters.
//!
//! The acceptance histogram by draft length is a triangle: row `k` (draft
//! length) has `k + 1` buckets, accepted `0..=k`. Rows are stored one after
//! the other, so row `k` starts at `k (k + 1) / 2` and the whole triangle up
//! to `K` holds `(K + 1)(K + 2) / 2` buckets.
//!
//! Private to the crate (only the range of `K` is re-exported at the root):
//! the index math is exact only for `K <= 64`, which every
//! [`AcceptanceHistogram`](crate::AcceptanceHistogram) and
//! [`Recorder`](crate::Recorder) guarantees; that bound is what lets the
//! recording path compute an index with no overflow check. Code outside the
//! crate validates an observation with
//! [`ObserveError::check`](crate::ObserveError::check) and reads buckets
//! through [`AcceptanceHistogram::count`](crate::AcceptanceHistogram::count)
//! and [`row`](crate::AcceptanceHistogram::row).
//!
//! This file uses nothing else from the crate: the benchmarks include it
//! (`#[path]`) so that their baselines index the same triangle.

/// The smallest configurable maximum draft length `K`.
///
/// ```
/// use specdec_metrics::{AcceptanceHistogram, MAX_MAX_DRAFT_LEN, MIN_MAX_DRAFT_LEN};
/// assert_eq!((MIN_MAX_DRAFT_LEN, MAX_MAX_DRAFT_LEN), (1, 64));
/// assert!(AcceptanceHistogram::new(MIN_MAX_DRAFT_LEN - 1).is_err());
/// assert!(AcceptanceHistogram::new(MAX_MAX_DRAFT_LEN + 1).is_err());
/// ```
pub const MIN_MAX_DRAFT_LEN: usize = 1;

/// The largest configurable maximum draft length `K`.
///
/// 64 keeps the triangle at 2,145 buckets (about 17 KiB of `u64` counters
/// per shard) and covers every drafting budget used in practice.
pub const MAX_MAX_DRAFT_LEN: usize = 64;

/// Whether `max_draft_len` is an accepted maximum draft length `K`
/// (`1..=64`).
#[inline]
pub(crate) const fn is_valid_max_draft_len(max_draft_len: usize) -> bool {
    max_draft_len >= MIN_MAX_DRAFT_LEN && max_draft_len <= MAX_MAX_DRAFT_LEN
}

/// Index of the first bucket of row `drafted` (the bucket `(drafted, 0)`).
/// Exact for `drafted <= MAX_MAX_DRAFT_LEN + 1` (the end of the last row).
#[inline]
pub(crate) const fn row_start(drafted: usize) -> usize {
    debug_assert!(drafted <= MAX_MAX_DRAFT_LEN + 1);
    drafted * (drafted + 1) / 2
}

/// Number of buckets of the triangle for a maximum draft length `K`:
/// `(K + 1)(K + 2) / 2`. Exact for `K <= MAX_MAX_DRAFT_LEN`.
#[inline]
pub(crate) const fn bucket_count(max_draft_len: usize) -> usize {
    row_start(max_draft_len + 1)
}

/// Whether `(drafted, accepted)` is inside the triangle bounded by
/// `max_draft_len`: `accepted <= drafted <= max_draft_len`. Exact for every
/// input (no arithmetic); the one place that decides which observations are
/// valid.
#[inline]
pub(crate) const fn in_triangle(max_draft_len: usize, drafted: usize, accepted: usize) -> bool {
    drafted <= max_draft_len && accepted <= drafted
}

/// Index of the bucket `(drafted, accepted)` in a triangle bounded by
/// `max_draft_len`, or `None` when the pair is outside it (`accepted >
/// drafted` or `drafted > max_draft_len`). Exact for `max_draft_len <=
/// MAX_MAX_DRAFT_LEN`: the bounds check comes first, so only rows up to
/// `K` are ever indexed.
#[inline]
pub(crate) const fn checked_bucket_index(
    max_draft_len: usize,
    drafted: usize,
    accepted: usize,
) -> Option<usize> {
    debug_assert!(max_draft_len <= MAX_MAX_DRAFT_LEN);
    if in_triangle(max_draft_len, drafted, accepted) {
        Some(row_start(drafted) + accepted)
    } else {
        None
    }
}

// Each test imports for itself: the benchmarks include this file, and in
// their test-mode check `#[test]` functions are dropped while a module-level
// import would stay, unused.
#[cfg(test)]
mod tests {
    #[test]
    fn rows_tile_the_triangle_without_gaps_or_overlap() {
        use super::*;
        for max in MIN_MAX_DRAFT_LEN..=MAX_MAX_DRAFT_LEN {
            let mut next = 0;
            for k in 0..=max {
                assert_eq!(row_start(k), next);
                for a in 0..=k {
                    assert_eq!(checked_bucket_index(max, k, a), Some(next));
                    next += 1;
                }
                assert_eq!(checked_bucket_index(max, k, k + 1), None);
            }
            assert_eq!(next, bucket_count(max));
            assert_eq!(row_start(max + 1), bucket_count(max));
            assert_eq!(checked_bucket_index(max, max + 1, 0), None);
        }
    }

    #[test]
    fn the_largest_triangle_has_2145_buckets() {
        use super::*;
        assert_eq!(bucket_count(MAX_MAX_DRAFT_LEN), 65 * 66 / 2);
        assert_eq!(bucket_count(MIN_MAX_DRAFT_LEN), 3);
    }

    #[test]
    fn the_accepted_range_is_exactly_1_to_64() {
        use super::*;
        let accepted: Vec<usize> = (0..=1000).filter(|&k| is_valid_max_draft_len(k)).collect();
        assert_eq!(accepted, (1..=64).collect::<Vec<_>>());
        assert!(!is_valid_max_draft_len(usize::MAX));
    }

    #[test]
    fn in_triangle_is_exact_at_the_extremes() {
        use super::*;
        let m = usize::MAX;
        assert!(in_triangle(m, m, m));
        assert!(in_triangle(m, m, 0));
        assert!(in_triangle(m, 1 << 32, 1 << 32));
        assert!(!in_triangle(m, m - 1, m));
        assert!(!in_triangle(m - 1, m, 0));
        assert!(in_triangle(0, 0, 0));
        assert!(!in_triangle(0, 0, 1));
        assert!(!in_triangle(0, 1, 0));
        assert!(in_triangle(64, 64, 64));
        assert!(!in_triangle(64, 64, 65));
        assert!(!in_triangle(64, 65, 0));
    }
}
