//! The inner loop of a snapshot: summing the counters of many blocks (the
//! shards, the used stripes) into owned totals, each counter read once.
//!
//! # Why it is shaped this way
//!
//! A snapshot at `n` workers does `n × len` relaxed loads, which cannot be
//! vectorised (they are atomic). Summed one block at a time, every load is
//! followed by a load and a store of its total, so the loop is bound by
//! stores (one per counter per block) and, between blocks, by the two
//! dependent pointer loads that find the next block. Here:
//!
//! - the blocks' counter slices are first gathered, [`GATHER`] at a time,
//!   into an array on the stack: finding a block no longer waits for the
//!   previous block's sums, so the pointer loads of many blocks overlap;
//! - the gathered blocks are summed [`LANES`] at a time: a total is loaded
//!   and stored once per four blocks, its four counters added in a
//!   register;
//! - the totals go straight into the arrays the snapshot returns (one
//!   [`Dest`] per part: the buckets, with the request states folded in; the
//!   side counters; the scheduled budgets): nothing is split, copied or
//!   reallocated afterwards.
//!
//! The sum is saturating, as before: a total never wraps, so a later
//! snapshot is never smaller.

use super::sync::{AtomicU64, Ordering};

/// Blocks gathered before summing: 32 fat pointers, 512 bytes of stack.
const GATHER: usize = 32;

/// Blocks summed together: each total is loaded and stored once per
/// `LANES` blocks.
const LANES: usize = 4;

/// Where one part of a block goes: counters `offset + r * stride + j`, for
/// every `r` in `0..reps` and `j` in `0..totals.len()`, are added to
/// `totals[j]`. `reps > 1` folds the request states' triangles into one.
pub(crate) struct Dest<'a> {
    pub(crate) offset: usize,
    pub(crate) reps: usize,
    pub(crate) stride: usize,
    pub(crate) totals: &'a mut [u64],
}

impl<'a> Dest<'a> {
    /// Counters `offset..offset + totals.len()` into `totals`.
    pub(crate) fn new(offset: usize, totals: &'a mut [u64]) -> Self {
        Self {
            offset,
            reps: 1,
            stride: 0,
            totals,
        }
    }
}

/// Adds every counter of every block of `blocks` to its total in `dests`.
/// Each block must hold every counter a `Dest` names (else: a panic, never
/// a wrong sum).
pub(crate) fn sum_blocks<'b>(
    mut blocks: impl Iterator<Item = &'b [AtomicU64]>,
    dests: &mut [Dest<'_>],
) {
    let mut gathered: [&[AtomicU64]; GATHER] = [&[]; GATHER];
    loop {
        let mut n = 0;
        for (slot, block) in gathered.iter_mut().zip(blocks.by_ref()) {
            *slot = block;
            n += 1;
        }
        let mut lanes = gathered[..n].chunks_exact(LANES);
        for four in &mut lanes {
            add_lanes([four[0], four[1], four[2], four[3]], dests);
        }
        for &one in lanes.remainder() {
            add_lanes([one], dests);
        }
        if n < GATHER {
            return;
        }
    }
}

/// Adds the counters of `N` blocks to `dests`, each total loaded and
/// stored once.
#[inline]
fn add_lanes<const N: usize>(blocks: [&[AtomicU64]; N], dests: &mut [Dest<'_>]) {
    for dest in dests.iter_mut() {
        let totals = &mut *dest.totals;
        let len = totals.len();
        for rep in 0..dest.reps {
            let start = dest.offset + rep * dest.stride;
            // Every part exactly `len` long: the loop below indexes all of
            // them with `j < len` and needs no bounds check.
            let parts = blocks.map(|block| &block[start..start + len]);
            for j in 0..len {
                let mut sum = totals[j];
                for part in parts {
                    // Relaxed: a reader needs only atomicity and coherence
                    // (`shard.rs`, "Happens-before edges"): no load returns
                    // a value older than one that happened-before it, so no
                    // total is smaller than in an earlier snapshot.
                    sum = sum.saturating_add(part[j].load(Ordering::Relaxed));
                }
                totals[j] = sum;
            }
        }
    }
}

#[cfg(all(test, not(specdec_loom)))]
mod tests {
    use super::*;

    fn block(values: &[u64]) -> Vec<AtomicU64> {
        values.iter().map(|&v| AtomicU64::new(v)).collect()
    }

    /// Every block is summed once, whatever the number of blocks against
    /// `GATHER` and `LANES` (the remainders included), into every `Dest`.
    #[test]
    fn every_block_is_summed_once_into_every_part() {
        for n in [0, 1, 3, 4, 5, 31, 32, 33, 64, 67] {
            let blocks: Vec<Vec<AtomicU64>> = (0..n)
                .map(|b| block(&[1, b as u64, 10, 100, 1_000, 7]))
                .collect();
            let (mut head, mut folded, mut tail) = ([0u64; 1], [0u64; 2], [0u64; 1]);
            let mut dests = [
                Dest::new(0, &mut head),
                Dest {
                    offset: 2,
                    reps: 2,
                    stride: 1,
                    totals: &mut folded,
                },
                Dest::new(5, &mut tail),
            ];
            sum_blocks(blocks.iter().map(|b| &b[..]), &mut dests);
            let n64 = n as u64;
            assert_eq!(head, [n64], "{n} blocks");
            // Counters 2 and 3 into folded[0], counters 3 and 4 into [1].
            assert_eq!(folded, [110 * n64, 1_100 * n64], "{n} blocks");
            assert_eq!(tail, [7 * n64], "{n} blocks");
            let mut skipped = [0u64; 1];
            sum_blocks(
                blocks.iter().map(|b| &b[..]),
                &mut [Dest::new(1, &mut skipped)],
            );
            assert_eq!(skipped, [(0..n64).sum::<u64>()], "{n} blocks");
        }
    }

    #[test]
    fn sums_saturate_instead_of_wrapping() {
        let blocks = [block(&[u64::MAX - 1]), block(&[1]), block(&[1])];
        let mut totals = [0u64; 1];
        sum_blocks(
            blocks.iter().map(|b| &b[..]),
            &mut [Dest::new(0, &mut totals)],
        );
        assert_eq!(totals, [u64::MAX]);
    }
}
