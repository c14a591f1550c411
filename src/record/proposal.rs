//! Uncensored outcomes for lookup drafters: [`ProposalTracker`], what it
//! resolves ([`ProposalOutcome`]) and where it sends them
//! ([`ProposalSink`]); and where each `(L, m)` lives in the proposal
//! triangle of a counter block or a histogram.
//!
//! What an outcome means, and when, is on [`ProposalTracker`].
//!
//! # The proposal triangle
//!
//! Rows `L = 1..=K` of `L + 1` buckets, `m = 0..=L`: the draft-length
//! triangle without its row 0, so row `L` starts at `row_start(L) - 1` and
//! the triangle holds `(K + 1)(K + 2) / 2 - 1 = K (K + 3) / 2` buckets.

use core::fmt;

use super::histogram::AcceptanceHistogram;
use super::layout::{MAX_MAX_DRAFT_LEN, bucket_count, row_start};
use super::{ConfigError, Recorder, Worker};

/// Buckets of the proposal triangle for a maximum draft length `K`:
/// `K (K + 3) / 2`.
#[inline]
pub(crate) const fn proposal_bucket_count(max_draft_len: usize) -> usize {
    bucket_count(max_draft_len) - 1
}

/// Index of the first bucket of proposal row `proposal_len` (`>= 1`).
#[inline]
pub(crate) const fn proposal_row_start(proposal_len: usize) -> usize {
    row_start(proposal_len) - 1
}

/// Index of the proposal bucket `(proposal_len, matched)`, or `None` when
/// the pair is outside the proposal triangle (`proposal_len` outside
/// `1..=K`, or `matched > proposal_len`).
#[inline]
pub(crate) const fn checked_proposal_index(
    max_draft_len: usize,
    proposal_len: usize,
    matched: usize,
) -> Option<usize> {
    if proposal_len >= 1 && proposal_len <= max_draft_len && matched <= proposal_len {
        Some(proposal_row_start(proposal_len) + matched)
    } else {
        None
    }
}

/// One resolved proposal: the drafter proposed `proposal_len` tokens at
/// output position `position`, the engine drafted the first `drafted`, and
/// the first `matched` of the proposal equal the output tokens from
/// `position` on (`matched <= proposal_len`).
///
/// ```
/// use specdec_metrics::ProposalOutcome;
/// let outcome = ProposalOutcome { position: 7, proposal_len: 6, drafted: 2, matched: 4 };
/// assert_eq!(outcome.greedy_accepted(), 2); // the step accepted its 2 drafts...
/// assert!(outcome.accepted_all_drafted()); // ...and a longer draft would have gone on
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProposalOutcome {
    /// How many output tokens the request had when the proposal was made
    /// (the proposal's first token is compared with output token
    /// `position`, counted from 0 since the tracker started or was last
    /// finished or aborted).
    pub position: u64,
    /// The proposal's length `L`, `1..=K`.
    pub proposal_len: usize,
    /// The draft length `k` the engine sent, `0..=L`.
    pub drafted: usize,
    /// The matched count `m`, `0..=L`.
    pub matched: usize,
}

impl ProposalOutcome {
    /// `min(drafted, matched)`: under greedy verification, exactly the
    /// accepted count of the verify step that drafted this proposal (a
    /// check an engine can assert against its own `accepted`).
    ///
    /// ```
    /// use specdec_metrics::ProposalOutcome;
    /// let o = ProposalOutcome { position: 0, proposal_len: 5, drafted: 3, matched: 1 };
    /// assert_eq!(o.greedy_accepted(), 1);
    /// ```
    pub const fn greedy_accepted(&self) -> usize {
        if self.drafted < self.matched {
            self.drafted
        } else {
            self.matched
        }
    }

    /// Whether every drafted token matched (`matched >= drafted`): the step
    /// accepted its whole draft, and the request's copy run went on past
    /// it.
    ///
    /// ```
    /// use specdec_metrics::ProposalOutcome;
    /// let o = ProposalOutcome { position: 0, proposal_len: 5, drafted: 3, matched: 3 };
    /// assert!(o.accepted_all_drafted());
    /// assert!(!ProposalOutcome { matched: 2, ..o }.accepted_all_drafted());
    /// ```
    pub const fn accepted_all_drafted(&self) -> bool {
        self.matched >= self.drafted
    }
}

/// Where a [`ProposalTracker`] sends what it resolves: a [`Worker`] or a
/// [`Recorder`] (through a shared reference) or an [`AcceptanceHistogram`]
/// (through `&mut`) records it in the proposal histogram
/// (`acceptance_by_proposal_length`); an engine's own type can also pass
/// outcomes on to its drafting controller.
///
/// The implementations for recorders and histograms record with
/// [`Worker::observe_proposal`] and
/// [`Worker::observe_aborted_proposals`] (or the same methods of the
/// other two) and drop their `Result`: an outcome they cannot hold (a
/// recorder built without [`record_proposals`], or of a smaller `K` than
/// the tracker's) is counted in `num_rejected_observations`, never lost
/// silently.
///
/// [`record_proposals`]: crate::RecorderBuilder::record_proposals
///
/// ```
/// use specdec_metrics::{ProposalOutcome, ProposalSink, ProposalTracker};
///
/// /// Keeps the outcomes (a controller would learn from them instead).
/// #[derive(Default)]
/// struct Outcomes(Vec<ProposalOutcome>, usize);
///
/// impl ProposalSink for Outcomes {
///     fn resolved(&mut self, outcome: ProposalOutcome) {
///         self.0.push(outcome);
///     }
///     fn aborted(&mut self, count: usize) {
///         self.1 += count;
///     }
/// }
///
/// let mut tracker = ProposalTracker::new(4)?;
/// let mut seen = Outcomes::default();
/// tracker.draft(&[5, 6, 7], 1)?;
/// tracker.push_tokens(&[5, 6, 9], &mut seen);
/// assert_eq!(seen.0, [ProposalOutcome { position: 0, proposal_len: 3, drafted: 1, matched: 2 }]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait ProposalSink {
    /// One proposal was resolved.
    fn resolved(&mut self, outcome: ProposalOutcome);

    /// `count` pending proposals (at least 1) were dropped unresolved:
    /// their request was aborted.
    fn aborted(&mut self, count: usize);
}

impl<S: ProposalSink + ?Sized> ProposalSink for &mut S {
    #[inline]
    fn resolved(&mut self, outcome: ProposalOutcome) {
        (**self).resolved(outcome);
    }

    #[inline]
    fn aborted(&mut self, count: usize) {
        (**self).aborted(count);
    }
}

/// Records into the worker's shard (see [`ProposalSink`] for errors).
///
/// ```
/// use specdec_metrics::{ProposalTracker, Recorder};
/// let recorder = Recorder::builder(4).record_proposals().build()?;
/// let worker = recorder.worker();
/// let mut tracker = ProposalTracker::new(4)?;
/// tracker.draft(&[1, 2], 2)?;
/// tracker.push_tokens(&[1, 2], &worker);
/// assert_eq!(recorder.snapshot().proposal_count(2, 2), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl ProposalSink for &Worker {
    #[inline]
    fn resolved(&mut self, outcome: ProposalOutcome) {
        // Counted in `num_rejected_observations` on error.
        let _ = self.observe_proposal(outcome.proposal_len, outcome.matched);
    }

    #[inline]
    fn aborted(&mut self, count: usize) {
        // Counted in `num_rejected_observations` on error.
        let _ = self.observe_aborted_proposals(count as u64);
    }
}

/// Records on the calling thread's stripe (see [`ProposalSink`] for
/// errors).
///
/// ```
/// use specdec_metrics::{ProposalTracker, Recorder};
/// let recorder = Recorder::builder(4).record_proposals().build()?;
/// let mut tracker = ProposalTracker::new(4)?;
/// tracker.draft(&[1, 2], 1)?;
/// tracker.abort(&recorder);
/// assert_eq!(recorder.snapshot().num_aborted_proposals(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl ProposalSink for &Recorder {
    #[inline]
    fn resolved(&mut self, outcome: ProposalOutcome) {
        // Counted in `num_rejected_observations` on error.
        let _ = self.observe_proposal(outcome.proposal_len, outcome.matched);
    }

    #[inline]
    fn aborted(&mut self, count: usize) {
        // Counted in `num_rejected_observations` on error.
        let _ = self.observe_aborted_proposals(count as u64);
    }
}

/// Records into the histogram, a request's own accumulator (see
/// [`ProposalSink`] for errors).
///
/// ```
/// use specdec_metrics::{AcceptanceHistogram, ProposalTracker};
/// let mut h = AcceptanceHistogram::with_proposals(4)?;
/// let mut tracker = ProposalTracker::new(4)?;
/// tracker.draft(&[1, 2, 3], 1)?;
/// tracker.push_token(1, &mut h);
/// tracker.finish(&mut h); // the output ended after one token
/// assert_eq!(h.proposal_row(3), Some(&[0, 1, 0, 0][..]));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl ProposalSink for AcceptanceHistogram {
    #[inline]
    fn resolved(&mut self, outcome: ProposalOutcome) {
        // Counted in `num_rejected_observations` on error.
        let _ = self.observe_proposal(outcome.proposal_len, outcome.matched);
    }

    #[inline]
    fn aborted(&mut self, count: usize) {
        // Counted in `num_rejected_observations` on error.
        let _ = self.observe_aborted_proposals(count as u64);
    }
}

/// A proposal the tracker cannot take; nothing was recorded or changed.
///
/// ```
/// use specdec_metrics::{ProposalError, ProposalTracker};
/// let mut tracker = ProposalTracker::new(2)?;
/// assert_eq!(
///     tracker.draft(&[1, 2, 3], 2),
///     Err(ProposalError::TooLong { proposal_len: 3, max_draft_len: 2 })
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProposalError {
    /// The proposal is longer than `K`.
    TooLong {
        /// The proposal's length.
        proposal_len: usize,
        /// The tracker's `K`.
        max_draft_len: usize,
    },
    /// More tokens drafted than proposed (`k > L`).
    DraftedExceedsProposal {
        /// The draft length `k` given.
        drafted: usize,
        /// The proposal's length `L`.
        proposal_len: usize,
    },
    /// A second proposal at the same output position: no output token came
    /// between two drafts. One proposal per position is what bounds the
    /// pending outcomes by `K`.
    SamePosition {
        /// The output position of both proposals.
        position: u64,
    },
}

impl fmt::Display for ProposalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::TooLong {
                proposal_len,
                max_draft_len,
            } => write!(
                f,
                "a proposal of {proposal_len} tokens is longer than max_draft_len={max_draft_len}"
            ),
            Self::DraftedExceedsProposal {
                drafted,
                proposal_len,
            } => write!(
                f,
                "drafted {drafted} tokens of a proposal of {proposal_len}"
            ),
            Self::SamePosition { position } => write!(
                f,
                "a second proposal at output position {position} with no output token in between"
            ),
        }
    }
}

impl std::error::Error for ProposalError {}

/// A pending proposal: where it was made, how long it is, how much was
/// drafted and how much has matched so far. Its tokens are in the
/// tracker's token block.
#[derive(Clone, Copy, Debug, Default)]
struct Pending {
    position: u64,
    len: u8,
    drafted: u8,
    matched: u8,
}

/// One request's pending proposals, resolved against its output tokens.
///
/// When the engine drafts, it hands the tracker the drafter's **whole**
/// proposal (up to `K` tokens, of which it drafted `k`) with
/// [`draft`](Self::draft); the tracker copies it, since the source (the
/// context the drafter copied from) may move or be evicted. As output
/// tokens arrive ([`push_token`](Self::push_token)), each pending proposal
/// compares its next token: at the first mismatch, or when all `L` tokens
/// matched, it is resolved and handed to a [`ProposalSink`] as a
/// [`ProposalOutcome`]. At the end of the request,
/// [`finish`](Self::finish) resolves what is pending with the tokens
/// matched so far, or [`abort`](Self::abort) counts it apart; both leave
/// the tracker empty for the next request.
///
/// - **Bounded.** One proposal per output position, each resolved within
///   `L <= K` tokens: at most `K` pending, and a token costs `O(pending)`
///   comparisons.
/// - **No allocation after [`new`](Self::new)**: the `K × K` tokens (16
///   KiB of `u32` at `K = 64`, 256 bytes at `K = 8`) are allocated once;
///   `draft`, `push_token`, `finish` and `abort` never allocate, so a
///   tracker can be kept per request slot and reused.
/// - Tokens are `u32` ids by default, or any `Copy + Eq + Default` type.
///
/// ```
/// use specdec_metrics::{ProposalTracker, Recorder};
///
/// let recorder = Recorder::builder(4).record_proposals().build()?;
/// let worker = recorder.worker();
/// let mut tracker = ProposalTracker::new(4)?;
///
/// // Step 1: the lookup drafter proposes 4 tokens, the engine drafts 2.
/// tracker.draft(&[10, 11, 12, 13], 2)?;
/// // The verifier accepts both and emits a bonus token: 3 output tokens.
/// tracker.push_tokens(&[10, 11, 12], &worker);
/// // Step 2, at position 3: proposes 2, drafts 2.
/// tracker.draft(&[13, 14], 2)?;
/// tracker.push_tokens(&[13, 99], &worker); // first accepted, then the target differs
/// tracker.finish(&worker);
///
/// let s = recorder.snapshot();
/// // The first proposal matched all 4 (2 more than it drafted): uncensored.
/// assert_eq!(s.proposal_row(4), Some(&[0, 0, 0, 0, 1][..]));
/// assert_eq!(s.proposal_row(2), Some(&[0, 1, 0][..]));
/// assert_eq!(s.num_aborted_proposals(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # What is recorded, and when it means what it says
///
/// A lookup drafter (prompt lookup, n-gram) proposes up to `K` tokens
/// copied from the context; the engine drafts the first `k` of them. The
/// verify step's accepted count says nothing about the proposal beyond `k`
/// (it is censored there). The output tokens that follow do: `m`, the
/// length of the common prefix of the whole proposal (`L` tokens) and the
/// output tokens generated from the drafting position on, is how many of
/// the proposal's tokens the verifier would have accepted had the engine
/// drafted all `L`:
///
/// - **exact under greedy verification**: the output is the target's
///   argmax continuation whatever was drafted, so a draft of `j <= L`
///   tokens would have accepted exactly `min(j, m)`, and the drafted step
///   itself accepted [`greedy_accepted`](ProposalOutcome::greedy_accepted)
///   `= min(k, m)`;
/// - **unbiased in expectation for one-hot drafts under standard
///   rejection sampling** (Leviathan et al., Chen et al.): a draft token
///   `x` with `q = δ_x` is accepted with probability `p(x)` and, when
///   rejected, the resampled token is never `x`; a token that was not
///   drafted is sampled from `p` and equals `x` with the same probability
///   `p(x)`. Given the same matched prefix the contexts agree, so `m` has
///   the distribution of the accepted count of a length-`L` draft; single
///   outcomes differ, their expectation (and distribution) does not;
/// - **not under typical acceptance** (a threshold on `p(x)`: a token can be
///   output without passing it, or pass it and differ from the output) or
///   any **lossy verification** (accepting near-matches), where "the output
///   equals the proposal" and "the verifier would accept" part;
/// - **not for tokens a grammar would have invalidated**: the tracker
///   compares the proposal as the drafter made it; positions beyond `k`
///   that structured output would have cut off were never going to be
///   sent, yet count here as matched or not;
/// - at the end of a request ([`finish`](ProposalTracker::finish)) the
///   output beyond its last token does not exist: pending outcomes are
///   resolved with the tokens matched so far (censored by the end of the
///   output, as a verifier would stop at the end too). An aborted request's
///   pending outcomes ([`abort`](ProposalTracker::abort)) are counted apart,
///   never as matches.
#[derive(Clone)]
pub struct ProposalTracker<T = u32> {
    max_draft_len: usize,
    /// Slot `s`'s proposal is `tokens[s * K..s * K + len]`.
    tokens: Box<[T]>,
    /// The pending proposals' bookkeeping, slot by slot.
    slots: [Pending; MAX_MAX_DRAFT_LEN],
    /// Bit `s` set: slot `s` holds a pending proposal.
    pending: u64,
    /// Output tokens seen since the start (or the last finish or abort).
    position: u64,
    /// `position + 1` of the last proposal; 0 if none yet.
    last_draft: u64,
}

impl<T: Copy + Eq + Default> ProposalTracker<T> {
    /// A tracker for proposals of up to `max_draft_len` tokens (the
    /// recorder's `K`); allocates its `K × K` tokens once.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] unless `1 <= max_draft_len <= 64`.
    ///
    /// ```
    /// use specdec_metrics::ProposalTracker;
    /// let tracker: ProposalTracker = ProposalTracker::new(8)?;
    /// assert_eq!((tracker.max_draft_len(), tracker.pending()), (8, 0));
    /// assert!(ProposalTracker::<u32>::new(65).is_err());
    /// // Any token type: here `u64` ids.
    /// assert!(ProposalTracker::<u64>::new(8).is_ok());
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    pub fn new(max_draft_len: usize) -> Result<Self, ConfigError> {
        ConfigError::check_max_draft_len(max_draft_len)?;
        Ok(Self {
            max_draft_len,
            tokens: vec![T::default(); max_draft_len * max_draft_len].into_boxed_slice(),
            slots: [Pending::default(); MAX_MAX_DRAFT_LEN],
            pending: 0,
            position: 0,
            last_draft: 0,
        })
    }

    /// The longest proposal `K` this tracker takes.
    pub fn max_draft_len(&self) -> usize {
        self.max_draft_len
    }

    /// Proposals pending now (at most `K`).
    ///
    /// ```
    /// use specdec_metrics::{AcceptanceHistogram, ProposalTracker};
    /// let mut h = AcceptanceHistogram::with_proposals(4)?;
    /// let mut tracker = ProposalTracker::new(4)?;
    /// tracker.draft(&[1, 2], 1)?;
    /// tracker.push_token(1, &mut h);
    /// tracker.draft(&[2, 3], 1)?;
    /// assert_eq!(tracker.pending(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn pending(&self) -> usize {
        self.pending.count_ones() as usize
    }

    /// Output tokens seen since the start (or the last
    /// [`finish`](Self::finish) or [`abort`](Self::abort)): the position
    /// the next proposal is made at.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Takes the drafter's whole proposal at the current position (before
    /// the output token at that position arrives), of which the engine
    /// drafted the first `drafted`. The tokens are copied. An empty
    /// proposal is accepted and tracks nothing (a step that proposed
    /// nothing is not a proposal outcome; record it with
    /// `observe_undrafted`).
    ///
    /// # Errors
    ///
    /// [`ProposalError`] when the proposal is longer than `K`, `drafted`
    /// exceeds its length, or a proposal was already made at this position;
    /// the tracker is then unchanged.
    ///
    /// ```
    /// use specdec_metrics::{ProposalError, ProposalTracker};
    /// let mut tracker = ProposalTracker::new(4)?;
    /// tracker.draft(&[7, 8, 9], 2)?;
    /// assert_eq!(tracker.draft(&[7], 1), Err(ProposalError::SamePosition { position: 0 }));
    /// assert_eq!(
    ///     tracker.draft(&[7], 2),
    ///     Err(ProposalError::DraftedExceedsProposal { drafted: 2, proposal_len: 1 })
    /// );
    /// assert_eq!(tracker.pending(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn draft(&mut self, proposal: &[T], drafted: usize) -> Result<(), ProposalError> {
        let len = proposal.len();
        if len > self.max_draft_len {
            return Err(ProposalError::TooLong {
                proposal_len: len,
                max_draft_len: self.max_draft_len,
            });
        }
        if drafted > len {
            return Err(ProposalError::DraftedExceedsProposal {
                drafted,
                proposal_len: len,
            });
        }
        if self.last_draft == self.position + 1 {
            return Err(ProposalError::SamePosition {
                position: self.position,
            });
        }
        self.last_draft = self.position + 1;
        if len == 0 {
            return Ok(());
        }
        // A free slot exists: every pending proposal was made at one of
        // the last `K - 1` positions (one made at `position - K` or before
        // has seen `K >= L` tokens and is resolved), one per position, and
        // none at this one.
        let slot = (!self.pending).trailing_zeros() as usize;
        debug_assert!(slot < self.max_draft_len, "more than K pending");
        let start = slot * self.max_draft_len;
        self.tokens[start..start + len].copy_from_slice(proposal);
        // `len <= K <= 64`: fits in `u8`.
        self.slots[slot] = Pending {
            position: self.position,
            len: len as u8,
            drafted: drafted as u8,
            matched: 0,
        };
        self.pending |= 1 << slot;
        Ok(())
    }

    /// The next output token: each pending proposal compares its next
    /// token with it and is resolved (handed to `sink`) at a mismatch or
    /// when all its tokens matched. `O(pending)`, no allocation.
    ///
    /// ```
    /// use specdec_metrics::{AcceptanceHistogram, ProposalTracker};
    /// let mut h = AcceptanceHistogram::with_proposals(3)?;
    /// let mut tracker = ProposalTracker::new(3)?;
    /// tracker.draft(&[4, 5, 6], 3)?;
    /// tracker.push_token(4, &mut h);
    /// tracker.push_token(0, &mut h); // mismatch at the proposal's second token
    /// assert_eq!((h.proposal_count(3, 1), tracker.pending()), (1, 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn push_token(&mut self, token: T, mut sink: impl ProposalSink) {
        let mut live = self.pending;
        while live != 0 {
            let slot = live.trailing_zeros() as usize;
            live &= live - 1;
            let pending = &mut self.slots[slot];
            let next = self.tokens[slot * self.max_draft_len + usize::from(pending.matched)];
            if next == token {
                pending.matched += 1;
                if pending.matched < pending.len {
                    continue;
                }
            }
            self.pending &= !(1 << slot);
            sink.resolved(outcome(pending));
        }
        self.position += 1;
    }

    /// [`push_token`](Self::push_token) for each of `tokens`, in order:
    /// the tokens a verify step emitted.
    ///
    /// ```
    /// use specdec_metrics::{AcceptanceHistogram, ProposalTracker};
    /// let mut h = AcceptanceHistogram::with_proposals(3)?;
    /// let mut tracker = ProposalTracker::new(3)?;
    /// tracker.draft(&[4, 5], 1)?;
    /// tracker.push_tokens(&[4, 5, 6], &mut h);
    /// assert_eq!((h.proposal_count(2, 2), tracker.position()), (1, 3));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn push_tokens(&mut self, tokens: &[T], mut sink: impl ProposalSink) {
        for &token in tokens {
            self.push_token(token, &mut sink);
        }
    }

    /// The request ended (its output is complete): resolves every pending
    /// proposal with the tokens matched so far (the output has no more
    /// tokens to match), then empties the tracker for the next request.
    ///
    /// ```
    /// use specdec_metrics::{AcceptanceHistogram, ProposalTracker};
    /// let mut h = AcceptanceHistogram::with_proposals(3)?;
    /// let mut tracker = ProposalTracker::new(3)?;
    /// tracker.draft(&[4, 5, 6], 2)?;
    /// tracker.push_tokens(&[4, 5], &mut h); // then end of sequence
    /// tracker.finish(&mut h);
    /// assert_eq!((h.proposal_count(3, 2), tracker.pending(), tracker.position()), (1, 0, 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn finish(&mut self, mut sink: impl ProposalSink) {
        let mut live = self.pending;
        while live != 0 {
            let slot = live.trailing_zeros() as usize;
            live &= live - 1;
            sink.resolved(outcome(&self.slots[slot]));
        }
        self.clear();
    }

    /// The request was aborted: its pending proposals are handed to
    /// `sink` as aborted (one call with their number, if any), never as
    /// matches; then empties the tracker for the next request.
    ///
    /// ```
    /// use specdec_metrics::{AcceptanceHistogram, ProposalTracker};
    /// let mut h = AcceptanceHistogram::with_proposals(3)?;
    /// let mut tracker = ProposalTracker::new(3)?;
    /// tracker.draft(&[4, 5, 6], 2)?;
    /// tracker.push_token(4, &mut h);
    /// tracker.draft(&[5], 1)?;
    /// tracker.abort(&mut h);
    /// assert_eq!((h.num_aborted_proposals(), h.num_resolved_proposals()), (2, 0));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn abort(&mut self, mut sink: impl ProposalSink) {
        let count = self.pending();
        if count != 0 {
            sink.aborted(count);
        }
        self.clear();
    }

    fn clear(&mut self) {
        self.pending = 0;
        self.position = 0;
        self.last_draft = 0;
    }
}

/// The outcome of a pending proposal as it stands.
#[inline]
fn outcome(pending: &Pending) -> ProposalOutcome {
    ProposalOutcome {
        position: pending.position,
        proposal_len: usize::from(pending.len),
        drafted: usize::from(pending.drafted),
        matched: usize::from(pending.matched),
    }
}

impl<T> fmt::Debug for ProposalTracker<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProposalTracker")
            .field("max_draft_len", &self.max_draft_len)
            .field("pending", &self.pending.count_ones())
            .field("position", &self.position)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_proposal_triangle_tiles_without_gaps() {
        for max in 1..=MAX_MAX_DRAFT_LEN {
            let mut next = 0;
            for len in 1..=max {
                for m in 0..=len {
                    assert_eq!(checked_proposal_index(max, len, m), Some(next));
                    next += 1;
                }
                assert_eq!(checked_proposal_index(max, len, len + 1), None);
            }
            assert_eq!(next, proposal_bucket_count(max));
            assert_eq!(next, max * (max + 3) / 2);
            assert_eq!(checked_proposal_index(max, 0, 0), None);
            assert_eq!(checked_proposal_index(max, max + 1, 0), None);
        }
    }
}
