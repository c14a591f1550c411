//! Where each `(drafted, accepted)` pair lives in a flat array of counters.
//!
//! The acceptance histogram by draft length is a triangle: row `k` (draft
//! length) has `k + 1` buckets, accepted `0..=k`. Rows are stored one after
//! the other, so row `k` starts at `k (k + 1) / 2` and the whole triangle up
//! to `K` holds `(K + 1)(K + 2) / 2` buckets. Everything here is a `const fn`
//! so callers can size fixed arrays at compile time.
//!
//! ```
//! use specdec_metrics::layout::{bucket_count, bucket_index, row_start};
//!
//! assert_eq!(bucket_count(3), 10); // rows of 1, 2, 3 and 4 buckets
//! assert_eq!(row_start(3), 6);
//! assert_eq!(bucket_index(3, 2), Some(8));
//! assert_eq!(bucket_index(2, 3), None); // accepted more than drafted
//! ```

/// The smallest configurable maximum draft length `K`.
pub const MIN_MAX_DRAFT_LEN: usize = 1;

/// The largest configurable maximum draft length `K`.
///
/// 64 keeps the triangle at 2,145 buckets (about 17 KiB of `u64` counters
/// per shard) and covers every drafting budget used in practice.
pub const MAX_MAX_DRAFT_LEN: usize = 64;

/// Whether `max_draft_len` is an accepted maximum draft length `K`
/// (`1..=64`).
///
/// ```
/// use specdec_metrics::layout::is_valid_max_draft_len;
/// assert!(is_valid_max_draft_len(1) && is_valid_max_draft_len(64));
/// assert!(!is_valid_max_draft_len(0) && !is_valid_max_draft_len(65));
/// ```
#[inline]
pub const fn is_valid_max_draft_len(max_draft_len: usize) -> bool {
    max_draft_len >= MIN_MAX_DRAFT_LEN && max_draft_len <= MAX_MAX_DRAFT_LEN
}

/// Index of the first bucket of row `drafted` (the bucket `(drafted, 0)`).
///
/// ```
/// use specdec_metrics::layout::row_start;
/// assert_eq!(row_start(0), 0);
/// assert_eq!(row_start(4), 10);
/// ```
#[inline]
pub const fn row_start(drafted: usize) -> usize {
    drafted * (drafted + 1) / 2
}

/// Number of buckets of the triangle for a maximum draft length `K`:
/// `(K + 1)(K + 2) / 2`.
///
/// ```
/// use specdec_metrics::layout::bucket_count;
/// assert_eq!(bucket_count(1), 3);
/// assert_eq!(bucket_count(64), 2145);
/// ```
#[inline]
pub const fn bucket_count(max_draft_len: usize) -> usize {
    row_start(max_draft_len + 1)
}

/// Index of the bucket `(drafted, accepted)`, or `None` when
/// `accepted > drafted` (outside the triangle).
///
/// No upper bound on `drafted` is checked here; compare it with `K` (or use
/// [`bucket_count`]) before indexing an array.
///
/// ```
/// use specdec_metrics::layout::bucket_index;
/// assert_eq!(bucket_index(0, 0), Some(0));
/// assert_eq!(bucket_index(2, 1), Some(4));
/// assert_eq!(bucket_index(1, 2), None);
/// ```
#[inline]
pub const fn bucket_index(drafted: usize, accepted: usize) -> Option<usize> {
    if accepted <= drafted {
        Some(row_start(drafted) + accepted)
    } else {
        None
    }
}

/// Index of the bucket `(drafted, accepted)` in a triangle bounded by
/// `max_draft_len`, or `None` when the pair is outside it (`accepted >
/// drafted` or `drafted > max_draft_len`).
///
/// ```
/// use specdec_metrics::layout::checked_bucket_index;
/// assert_eq!(checked_bucket_index(3, 3, 3), Some(9));
/// assert_eq!(checked_bucket_index(3, 4, 0), None);
/// ```
#[inline]
pub const fn checked_bucket_index(
    max_draft_len: usize,
    drafted: usize,
    accepted: usize,
) -> Option<usize> {
    if drafted <= max_draft_len && accepted <= drafted {
        Some(row_start(drafted) + accepted)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_tile_the_triangle_without_gaps_or_overlap() {
        for max in MIN_MAX_DRAFT_LEN..=MAX_MAX_DRAFT_LEN {
            let mut next = 0;
            for k in 0..=max {
                for a in 0..=k {
                    assert_eq!(checked_bucket_index(max, k, a), Some(next));
                    next += 1;
                }
                assert_eq!(checked_bucket_index(max, k, k + 1), None);
            }
            assert_eq!(next, bucket_count(max));
            assert_eq!(checked_bucket_index(max, max + 1, 0), None);
        }
    }
}
