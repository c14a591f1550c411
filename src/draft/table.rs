//! [`SharedStateTable`]: the plan of up to [`MAX_STATES`] request states,
//! published by the metrics thread in a fixed array of atomic words and
//! read by engine threads with one relaxed load per request-step.
//!
//! # Layout
//!
//! State `s`'s [`DraftPlan`] (draft length and exploration length, one
//! byte each) is the 16 bits at `16 (s % 4)` of word `s / 4`: four states
//! per word, at most 32 words (256 bytes) for 128 states, allocated once
//! when the table is created. A read of one state is one relaxed load of
//! one word; nothing is allocated or locked after creation.
//!
//! # What a reader may see during a publish
//!
//! [`publish`](SharedStateTable::publish) stores the words one after the
//! other, each with one relaxed store. A reader that loads while a publish
//! runs sees:
//!
//! - for each state, either its old or its new plan, never a mix of the
//!   two (a state's entry lies within one word, and a word is written by
//!   one store): a draft length and an exploration length always come from
//!   the same publish;
//! - for one state, never an older plan after a newer one (coherence of
//!   that word);
//! - across states in different words, any mix: state 0 new and state 4
//!   old, or the reverse (no order between stores to different words is
//!   promised to a relaxed reader). States of one word always come from
//!   the same publish.
//!
//! The mix is harmless because no plan spans states: each state's entry is
//! the whole choice of that state's own controller, learnt from that
//! state's own histogram, and means the same whatever the other states
//! read. A request-step that reads a state's old entry drafts as it would
//! have a moment earlier, and what it drafted is recorded in that state
//! either way (the controller's estimates are per position and censored,
//! so a step at the old length is as valid a sample as one at the new).
//! Nothing is published alongside the table, so no acquire/release pair
//! is needed: the word is the whole message. The loom model
//! `loom-tests/tests/state_plan.rs` checks the three points above.

use super::plan::DraftPlan;
use crate::MAX_STATES;
use crate::record::ConfigError;
use crate::record::sync::{AtomicU64, Ordering};

/// States per word.
const PER_WORD: usize = 4;
/// Bits of one state's entry.
const ENTRY_BITS: usize = 16;

/// A state's entry: draft length in the low byte, exploration length in
/// the high one.
#[inline]
fn entry(plan: DraftPlan) -> u64 {
    (plan.explore_len() as u64) << 8 | plan.draft_len() as u64
}

/// The word of the four states `plans` (fewer at the table's end).
#[inline]
fn word(plans: impl Iterator<Item = DraftPlan>) -> u64 {
    plans
        .take(PER_WORD)
        .enumerate()
        .fold(0, |w, (i, p)| w | entry(p) << (ENTRY_BITS * i))
}

/// The plans of up to [`MAX_STATES`] request states, published by one
/// thread (the metrics thread, after each
/// [`StateController::update`](crate::StateController::update)) and read
/// by every engine thread at each request-step: one relaxed load per read,
/// no lock, no allocation (the words are allocated by [`new`](Self::new)).
/// See the module docs in `src/draft/table.rs`, or the reference, for
/// exactly what a reader sees during a publish.
///
/// ```
/// use std::sync::Arc;
/// use specdec_metrics::{DraftPlan, SharedStateTable};
///
/// let plans: Vec<DraftPlan> = (0..10).map(|s| DraftPlan::new(s % 5, 8).unwrap()).collect();
/// let table = Arc::new(SharedStateTable::new(&plans)?);
/// assert_eq!(table.states(), 10);
/// assert_eq!(table.load(7), Some(plans[7]));
/// assert_eq!(table.draft_len_for(7, 0), 2);
/// assert_eq!(table.draft_len_for(7, 31), 5); // exploration: min(2 * 2 + 1, 8)
/// assert_eq!((table.load(10), table.draft_len_for(10, 0)), (None, 0)); // no state 10
///
/// // The metrics thread publishes new plans; readers see them from their next load.
/// let zero = DraftPlan::new(0, 8).unwrap();
/// table.publish(&[zero; 10]);
/// let reader = Arc::clone(&table);
/// let k = std::thread::spawn(move || (reader.draft_len_for(7, 0), reader.draft_len_for(7, 31)));
/// assert_eq!(k.join().unwrap(), (0, 1)); // k = 0 still explores one token
/// # Ok::<(), specdec_metrics::ConfigError>(())
/// ```
#[derive(Debug)]
pub struct SharedStateTable {
    words: Box<[AtomicU64]>,
    states: usize,
}

impl SharedStateTable {
    /// A table of `plans.len()` states holding `plans`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::States`] unless `1 <= plans.len() <= 128`.
    ///
    /// ```
    /// use specdec_metrics::{DraftPlan, SharedStateTable};
    /// assert!(SharedStateTable::new(&[]).is_err());
    /// assert_eq!(SharedStateTable::new(&[DraftPlan::new(2, 4).unwrap(); 128])?.states(), 128);
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    pub fn new(plans: &[DraftPlan]) -> Result<Self, ConfigError> {
        let states = plans.len();
        if !(1..=MAX_STATES).contains(&states) {
            return Err(ConfigError::States { states });
        }
        let words = plans
            .chunks(PER_WORD)
            .map(|chunk| AtomicU64::new(word(chunk.iter().copied())))
            .collect();
        Ok(Self { words, states })
    }

    /// The number of states.
    ///
    /// ```
    /// use specdec_metrics::{DraftPlan, SharedStateTable};
    /// assert_eq!(SharedStateTable::new(&[DraftPlan::new(2, 4).unwrap(); 5])?.states(), 5);
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    pub fn states(&self) -> usize {
        self.states
    }

    /// Replaces the plans of states `0..plans.len()` (plans beyond
    /// [`states`](Self::states) are ignored; states beyond `plans.len()`
    /// keep theirs). One relaxed store per word (a word partly covered by
    /// `plans` is read first and keeps its other entries); no allocation.
    /// Meant for one publisher: concurrent publishers still leave every
    /// entry a whole plan of one of them.
    ///
    /// ```
    /// use specdec_metrics::{DraftPlan, SharedStateTable};
    /// let (one, two) = (DraftPlan::new(1, 4).unwrap(), DraftPlan::new(2, 4).unwrap());
    /// let table = SharedStateTable::new(&[one; 6])?;
    /// table.publish(&[two; 5]); // state 5 keeps its plan
    /// assert_eq!((table.load(4), table.load(5)), (Some(two), Some(one)));
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    pub fn publish(&self, plans: &[DraftPlan]) {
        for (i, chunk) in plans.chunks(PER_WORD).take(self.words.len()).enumerate() {
            let mut bits = word(chunk.iter().copied());
            if chunk.len() < PER_WORD {
                let kept = !0u64 << (ENTRY_BITS * chunk.len());
                // Relaxed: the publisher reads back the word it last
                // stored (coherence); entries of other states keep it.
                bits |= self.words[i].load(Ordering::Relaxed) & kept;
            }
            self.store(i, bits);
        }
    }

    /// Stores word `i`.
    #[inline]
    fn store(&self, i: usize, bits: u64) {
        // Relaxed: the word is the whole message (each of its states' two
        // lengths travel together in it); nothing else is published with
        // it, so a reader needs no other write to be visible when it sees
        // this one, and coherence keeps a reader of this word from seeing
        // an older value after a newer one. Words are independent: a
        // reader may see another word's older value (see the module docs).
        self.words[i].store(bits, Ordering::Relaxed);
    }

    /// The plan of state `state` last published (or an earlier one, for a
    /// reader that has not yet seen the latest store); `None` when there is
    /// no such state. One relaxed load.
    ///
    /// ```
    /// use specdec_metrics::{DraftPlan, SharedStateTable};
    /// let plan = DraftPlan::with_explore_len(0, 3, 4).unwrap();
    /// let table = SharedStateTable::new(&[plan; 2])?;
    /// assert_eq!((table.load(1), table.load(2)), (Some(plan), None));
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    #[inline]
    pub fn load(&self, state: usize) -> Option<DraftPlan> {
        if state >= self.states {
            return None;
        }
        // Relaxed: see `store`.
        let bits = self.words[state / PER_WORD].load(Ordering::Relaxed);
        let e = bits >> (ENTRY_BITS * (state % PER_WORD));
        // Every entry stored came from a `DraftPlan`, so it needs no check.
        Some(DraftPlan::with_explore_len_unchecked(
            usize::from(e as u8),
            usize::from((e >> 8) as u8),
        ))
    }

    /// The draft length for a request in state `state` at engine step
    /// `step` ([`DraftPlan::draft_len_for`]: the exploration length when
    /// `step % 32 == 31`): one relaxed load. 0 (no speculation) for a state
    /// the table does not have: never a panic on the hot path.
    ///
    /// ```
    /// use specdec_metrics::{DraftPlan, SharedStateTable};
    /// let table = SharedStateTable::new(&[DraftPlan::new(0, 4).unwrap()])?;
    /// assert_eq!((table.draft_len_for(0, 30), table.draft_len_for(0, 31)), (0, 1));
    /// assert_eq!(table.draft_len_for(1, 31), 0); // no state 1
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    #[inline]
    pub fn draft_len_for(&self, state: usize, step: u64) -> usize {
        self.load(state).map_or(0, |plan| plan.draft_len_for(step))
    }
}
