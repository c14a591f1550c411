//! [`DraftSignal`] (what the drafter knows when it drafts) and
//! [`StateSpace`] (how that and the request's recent acceptance make one
//! state index).
//!
//! Both are small `Copy` values; [`StateSpace::index`] is a few integer
//! operations, no allocation, no branch on shared state, never a panic.

use super::state::{MAX_LEVELS, RequestState};
use crate::MAX_STATES;
use crate::record::ConfigError;

/// Fixed-point one of a [`DraftSignal`]'s confidence.
const CONFIDENCE_ONE: u32 = 1 << 16;

/// Fixed-point one token of a [`DraftSignal`]'s score.
const SCORE_ONE: f64 = 256.0;

/// What the drafter knows about one request-step at the moment it drafts,
/// built by the engine per request-step (a `Copy` value of a few bytes):
///
/// - an n-gram drafter: the length `n` of the matched suffix and whether
///   it is shorter than the drafter's `max_n` ([`ngram`](Self::ngram));
/// - a suffix-decoding drafter (SuffixDecoding: Arctic Inference, vLLM's
///   `method: suffix`): the match length and the draft's score, the sum of
///   its tokens' estimated probabilities, which is the number of tokens
///   the drafter expects to be accepted ([`suffix`](Self::suffix));
/// - any drafter: whether its proposal is short (fewer tokens available
///   than it could draft; [`with_short_proposal`](Self::with_short_proposal));
/// - a model drafter: its confidence in `[0, 1]`
///   ([`with_confidence`](Self::with_confidence));
/// - an engine's own definition: a bucket number
///   ([`with_bucket`](Self::with_bucket)).
///
/// Which of these make a state is the [`StateSpace`]'s choice: a signal
/// may carry more than the space reads. "The previous step had no draft"
/// is kept by the request's [`RequestState`]
/// ([`after_undrafted`](RequestState::after_undrafted)), not here.
///
/// Measured on real n-gram traces: a match shorter than `max_n` fails
/// 28-46% of the time against 6% for a full match, and the step right
/// after a no-match step fails 38-43%.
///
/// ```
/// use specdec_metrics::DraftSignal;
/// let signal = DraftSignal::ngram(2, 4).with_short_proposal(true);
/// assert_eq!((signal.matched_n(), signal.short_match(), signal.short_proposal()), (2, true, true));
/// assert!(!DraftSignal::ngram(4, 4).short_match());
/// assert_eq!(DraftSignal::NONE.with_confidence(0.75).confidence(), 0.75);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DraftSignal {
    /// The matched n-gram length, saturated at 255; 0: none known.
    matched_n: u8,
    short_match: bool,
    short_proposal: bool,
    /// The confidence in `[0, 1]`, fixed point `0..=CONFIDENCE_ONE`.
    confidence: u32,
    /// The engine's own bucket, saturated at 255.
    bucket: u8,
    /// A suffix draft's score in 1/256 of a token, saturated.
    score: u16,
}

impl DraftSignal {
    /// Nothing known: matched length 0, a full match, no short proposal,
    /// confidence 0, bucket 0.
    pub const NONE: Self = Self {
        matched_n: 0,
        short_match: false,
        short_proposal: false,
        confidence: 0,
        bucket: 0,
        score: 0,
    };

    /// An n-gram drafter matched a suffix of `matched_n` tokens, looking
    /// for at most `max_n`: a short match when `matched_n < max_n`.
    ///
    /// ```
    /// use specdec_metrics::DraftSignal;
    /// assert!(DraftSignal::ngram(1, 3).short_match());
    /// assert!(!DraftSignal::ngram(3, 3).short_match());
    /// assert_eq!(DraftSignal::ngram(1000, 3).matched_n(), 255);
    /// ```
    #[inline]
    #[must_use]
    pub const fn ngram(matched_n: usize, max_n: usize) -> Self {
        Self {
            matched_n: if matched_n > u8::MAX as usize {
                u8::MAX
            } else {
                matched_n as u8
            },
            short_match: matched_n < max_n,
            ..Self::NONE
        }
    }

    /// A suffix-decoding drafter matched the context's last `match_len`
    /// tokens, looking for at most `max_match` (`depth - 1` in Arctic
    /// Inference and vLLM: a short match when `match_len < max_match`),
    /// and drafted with score `score`: the sum of its tokens' estimated
    /// probabilities, in tokens (`0 ..= draft length`). The score is kept
    /// in 1/256 of a token, rounded down, clamped to `[0, 255.996]` (NaN
    /// reads as 0).
    ///
    /// ```
    /// use specdec_metrics::DraftSignal;
    /// let signal = DraftSignal::suffix(5, 23, 2.5);
    /// assert_eq!((signal.matched_n(), signal.short_match(), signal.score()), (5, true, 2.5));
    /// assert_eq!(DraftSignal::suffix(23, 23, 1.0 / 3.0).score(), 85.0 / 256.0);
    /// assert_eq!((DraftSignal::suffix(1, 23, -1.0).score(), DraftSignal::suffix(1, 23, 1e9).score()), (0.0, 65535.0 / 256.0));
    /// ```
    #[inline]
    #[must_use]
    pub fn suffix(match_len: usize, max_match: usize, score: f64) -> Self {
        Self::ngram(match_len, max_match).with_score(score)
    }

    /// The same signal with a draft's score `score` in tokens (see
    /// [`suffix`](Self::suffix)), kept in 1/256 of a token.
    ///
    /// ```
    /// use specdec_metrics::DraftSignal;
    /// assert_eq!(DraftSignal::NONE.with_score(1.5).score(), 1.5);
    /// assert_eq!(DraftSignal::NONE.with_score(f64::NAN).score(), 0.0);
    /// ```
    #[inline]
    #[must_use]
    pub fn with_score(self, score: f64) -> Self {
        Self {
            // `as` saturates to 0..=65535 and reads NaN as 0.
            score: (score * SCORE_ONE) as u16,
            ..self
        }
    }

    /// The same signal, its proposal short (`true`) or not: for example
    /// fewer continuation tokens after the match than the drafter could
    /// draft. What counts as short is the engine's rule.
    ///
    /// ```
    /// use specdec_metrics::DraftSignal;
    /// assert!(DraftSignal::ngram(3, 3).with_short_proposal(true).short_proposal());
    /// assert!(!DraftSignal::NONE.short_proposal());
    /// ```
    #[inline]
    #[must_use]
    pub const fn with_short_proposal(self, short: bool) -> Self {
        Self {
            short_proposal: short,
            ..self
        }
    }

    /// The same signal with a model drafter's confidence `confidence`,
    /// clamped to `[0, 1]` (NaN reads as 0), kept to 16 bits.
    ///
    /// ```
    /// use specdec_metrics::DraftSignal;
    /// assert_eq!(DraftSignal::NONE.with_confidence(2.0).confidence(), 1.0);
    /// assert_eq!(DraftSignal::NONE.with_confidence(f64::NAN).confidence(), 0.0);
    /// ```
    #[inline]
    #[must_use]
    pub fn with_confidence(self, confidence: f64) -> Self {
        let c = if confidence.is_nan() {
            0.0
        } else {
            confidence.clamp(0.0, 1.0)
        };
        Self {
            confidence: (c * f64::from(CONFIDENCE_ONE)).round() as u32,
            ..self
        }
    }

    /// The same signal in the engine's own bucket `bucket` (saturated at
    /// 255), for a definition none of the others describes.
    ///
    /// ```
    /// use specdec_metrics::DraftSignal;
    /// assert_eq!(DraftSignal::NONE.with_bucket(3).bucket(), 3);
    /// assert_eq!(DraftSignal::NONE.with_bucket(999).bucket(), 255);
    /// ```
    #[inline]
    #[must_use]
    pub const fn with_bucket(self, bucket: usize) -> Self {
        Self {
            bucket: if bucket > u8::MAX as usize {
                u8::MAX
            } else {
                bucket as u8
            },
            ..self
        }
    }

    /// The matched n-gram length (0 when none is known; at most 255).
    ///
    /// ```
    /// use specdec_metrics::DraftSignal;
    /// assert_eq!((DraftSignal::ngram(2, 4).matched_n(), DraftSignal::NONE.matched_n()), (2, 0));
    /// ```
    pub const fn matched_n(self) -> usize {
        self.matched_n as usize
    }

    /// Whether the match is shorter than the drafter's `max_n`.
    ///
    /// ```
    /// use specdec_metrics::DraftSignal;
    /// assert!(DraftSignal::ngram(0, 1).short_match() && !DraftSignal::NONE.short_match());
    /// ```
    pub const fn short_match(self) -> bool {
        self.short_match
    }

    /// Whether the proposal is short.
    ///
    /// ```
    /// use specdec_metrics::DraftSignal;
    /// assert!(DraftSignal::NONE.with_short_proposal(true).short_proposal());
    /// ```
    pub const fn short_proposal(self) -> bool {
        self.short_proposal
    }

    /// The confidence, in `[0, 1]`.
    ///
    /// ```
    /// use specdec_metrics::DraftSignal;
    /// assert_eq!(DraftSignal::NONE.with_confidence(0.5).confidence(), 0.5);
    /// ```
    pub fn confidence(self) -> f64 {
        f64::from(self.confidence) / f64::from(CONFIDENCE_ONE)
    }

    /// The engine's own bucket.
    ///
    /// ```
    /// use specdec_metrics::DraftSignal;
    /// assert_eq!(DraftSignal::NONE.bucket(), 0);
    /// ```
    pub const fn bucket(self) -> usize {
        self.bucket as usize
    }

    /// A suffix draft's score in tokens, a multiple of 1/256 (0 when none
    /// is known).
    ///
    /// ```
    /// use specdec_metrics::DraftSignal;
    /// assert_eq!((DraftSignal::NONE.score(), DraftSignal::suffix(3, 23, 0.75).score()), (0.0, 0.75));
    /// ```
    pub fn score(self) -> f64 {
        f64::from(self.score) / SCORE_ONE
    }
}

/// A definition of request states: the request's recent-acceptance level
/// ([`RequestState::level`], `levels` of them) crossed with the signals
/// the space reads from a [`DraftSignal`] and the request's state.
///
/// Built from [`new(levels)`](Self::new) (no signal: `levels` states) by
/// adding dimensions, each multiplying the number of states:
///
/// | method | buckets | bucket of a request-step |
/// | --- | --- | --- |
/// | [`by_match_length(n)`](Self::by_match_length) | `n` | `min(max(matched_n, 1), n) - 1` |
/// | [`by_short_match()`](Self::by_short_match) | 2 | 1 when the match is shorter than `max_n` |
/// | [`by_short_proposal()`](Self::by_short_proposal) | 2 | 1 when the proposal is short |
/// | [`by_after_undrafted()`](Self::by_after_undrafted) | 2 | 1 when the request's previous step had no draft ([`RequestState::after_undrafted_step`]) |
/// | [`by_confidence(n)`](Self::by_confidence) | `n` | `min(floor(confidence × n), n - 1)` |
/// | [`by_bucket(n)`](Self::by_bucket) | `n` | `min(bucket, n - 1)` |
/// | [`by_score(n)`](Self::by_score) | `n` | `min(floor(score), n - 1)` |
///
/// The state index is `level + levels × signal`, `signal` in
/// `0..signals()` the mixed-radix number of the dimensions' buckets (in
/// the order they were added, the first most significant): the states of
/// one signal are `levels` consecutive indices. [`count`](Self::count) is
/// `levels × signals`, at most [`MAX_STATES`] (128); size the
/// [`Recorder`](crate::Recorder), the
/// [`StateController`](crate::StateController) and the
/// [`SharedStateTable`](crate::SharedStateTable) with it. Every input maps
/// to an index below `count()`: out-of-range values are clamped, nothing
/// panics.
///
/// ```
/// use specdec_metrics::{DraftSignal, RequestState, StateSpace};
/// // 2 acceptance levels × (matched n of 1, 2, 3+) × (after a no-match or not).
/// let space = StateSpace::new(2)?.by_match_length(3)?.by_after_undrafted()?;
/// assert_eq!((space.levels(), space.signals(), space.count()), (2, 6, 12));
/// let state = RequestState::with_score(0.9); // level 1
/// let signal = DraftSignal::ngram(2, 4); // bucket 1 of the match length
/// assert_eq!(space.index(state, signal), 1 + 2 * (1 * 2 + 0));
/// assert_eq!(space.index(state.after_undrafted(), signal), 1 + 2 * (1 * 2 + 1));
/// assert_eq!(space.index(state, DraftSignal::ngram(9, 4)), 1 + 2 * (2 * 2)); // 3+
/// assert_eq!(space.split(7), (1, 3));
/// assert!(StateSpace::new(16)?.by_match_length(9).is_err()); // 144 > 128 states
/// # Ok::<(), specdec_metrics::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StateSpace {
    levels: u8,
    /// Buckets of each dimension; 1: the dimension is not read.
    match_len: u8,
    short_match: u8,
    short_proposal: u8,
    after_undrafted: u8,
    confidence: u8,
    bucket: u8,
    score: u8,
    /// The order the dimensions were added in (most significant first),
    /// as `Dimension` numbers; `dims` of them.
    order: [u8; DIMENSIONS],
    dims: u8,
    /// Per dimension (by number), what its bucket is multiplied by in the
    /// signal bucket: the product of the buckets of the dimensions added
    /// after it; 0 for a dimension not added. At most 64.
    strides: [u8; DIMENSIONS],
}

/// The number of kinds of dimension.
const DIMENSIONS: usize = 7;
const MATCH_LEN: u8 = 0;
const SHORT_MATCH: u8 = 1;
const SHORT_PROPOSAL: u8 = 2;
const AFTER_UNDRAFTED: u8 = 3;
const CONFIDENCE: u8 = 4;
const BUCKET: u8 = 5;
const SCORE: u8 = 6;

impl StateSpace {
    /// `levels` recent-acceptance levels (`1..=16`) and no signal:
    /// `StateSpace::new(4)` is [`RequestState::index`]'s four states.
    ///
    /// # Errors
    ///
    /// [`ConfigError::States`] for `levels` outside `1..=16`.
    ///
    /// ```
    /// use specdec_metrics::{DraftSignal, RequestState, StateSpace};
    /// let space = StateSpace::new(RequestState::COUNT)?;
    /// let state = RequestState::with_score(0.6);
    /// assert_eq!(space.index(state, DraftSignal::NONE), state.index());
    /// assert!(StateSpace::new(0).is_err() && StateSpace::new(17).is_err());
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    pub const fn new(levels: usize) -> Result<Self, ConfigError> {
        if levels == 0 || levels > MAX_LEVELS {
            return Err(ConfigError::States { states: levels });
        }
        Ok(Self {
            levels: levels as u8,
            match_len: 1,
            short_match: 1,
            short_proposal: 1,
            after_undrafted: 1,
            confidence: 1,
            bucket: 1,
            score: 1,
            order: [0; DIMENSIONS],
            dims: 0,
            strides: [0; DIMENSIONS],
        })
    }

    /// Adds (or replaces) dimension `dim` with `buckets` buckets.
    fn with(mut self, dim: u8, buckets: usize) -> Result<Self, ConfigError> {
        fn slot(space: &mut StateSpace, dim: u8) -> &mut u8 {
            match dim {
                MATCH_LEN => &mut space.match_len,
                SHORT_MATCH => &mut space.short_match,
                SHORT_PROPOSAL => &mut space.short_proposal,
                AFTER_UNDRAFTED => &mut space.after_undrafted,
                CONFIDENCE => &mut space.confidence,
                BUCKET => &mut space.bucket,
                _ => &mut space.score,
            }
        }
        // The states without this dimension (replacing it, if it is there).
        let count = self.count() / usize::from(*slot(&mut self, dim));
        let states = count.saturating_mul(buckets);
        if buckets == 0 || buckets > MAX_STATES || states > MAX_STATES {
            return Err(ConfigError::States { states });
        }
        *slot(&mut self, dim) = buckets as u8;
        if !self.order[..usize::from(self.dims)].contains(&dim) {
            self.order[usize::from(self.dims)] = dim;
            self.dims += 1;
        }
        let mut stride = 1;
        let order = self.order;
        for &d in order[..usize::from(self.dims)].iter().rev() {
            self.strides[usize::from(d)] = stride as u8;
            stride *= usize::from(*slot(&mut self, d));
        }
        Ok(self)
    }

    /// Adds the matched n-gram length: `buckets` buckets, matched `n =
    /// 1, 2, ..` each its own up to `buckets`, longer ones pooled with it
    /// (a match of 0, none known, reads as 1).
    ///
    /// # Errors
    ///
    /// [`ConfigError::States`] when `buckets` is 0 or the space would
    /// pass [`MAX_STATES`] states.
    ///
    /// ```
    /// use specdec_metrics::{DraftSignal, RequestState, StateSpace};
    /// let space = StateSpace::new(1)?.by_match_length(3)?;
    /// let at = |n| space.index(RequestState::new(), DraftSignal::ngram(n, 4));
    /// assert_eq!((at(0), at(1), at(2), at(3), at(4)), (0, 0, 1, 2, 2));
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    pub fn by_match_length(self, buckets: usize) -> Result<Self, ConfigError> {
        self.with(MATCH_LEN, buckets)
    }

    /// Adds whether the match is shorter than the drafter's `max_n`
    /// ([`DraftSignal::short_match`]): 2 buckets.
    ///
    /// # Errors
    ///
    /// [`ConfigError::States`] when the space would pass [`MAX_STATES`].
    ///
    /// ```
    /// use specdec_metrics::{DraftSignal, RequestState, StateSpace};
    /// let space = StateSpace::new(1)?.by_short_match()?;
    /// let s = RequestState::new();
    /// assert_eq!((space.index(s, DraftSignal::ngram(4, 4)), space.index(s, DraftSignal::ngram(2, 4))), (0, 1));
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    pub fn by_short_match(self) -> Result<Self, ConfigError> {
        self.with(SHORT_MATCH, 2)
    }

    /// Adds whether the proposal is short ([`DraftSignal::short_proposal`]):
    /// 2 buckets.
    ///
    /// # Errors
    ///
    /// [`ConfigError::States`] when the space would pass [`MAX_STATES`].
    ///
    /// ```
    /// use specdec_metrics::{DraftSignal, RequestState, StateSpace};
    /// let space = StateSpace::new(1)?.by_short_proposal()?;
    /// let short = DraftSignal::NONE.with_short_proposal(true);
    /// assert_eq!(space.index(RequestState::new(), short), 1);
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    pub fn by_short_proposal(self) -> Result<Self, ConfigError> {
        self.with(SHORT_PROPOSAL, 2)
    }

    /// Adds whether the request's previous step had no draft
    /// ([`RequestState::after_undrafted_step`]): 2 buckets.
    ///
    /// # Errors
    ///
    /// [`ConfigError::States`] when the space would pass [`MAX_STATES`].
    ///
    /// ```
    /// use specdec_metrics::{DraftSignal, RequestState, StateSpace};
    /// let space = StateSpace::new(1)?.by_after_undrafted()?;
    /// let missed = RequestState::new().after_undrafted();
    /// assert_eq!((space.index(missed, DraftSignal::NONE), space.index(missed.after(2, 1), DraftSignal::NONE)), (1, 0));
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    pub fn by_after_undrafted(self) -> Result<Self, ConfigError> {
        self.with(AFTER_UNDRAFTED, 2)
    }

    /// Adds a model drafter's confidence ([`DraftSignal::confidence`]) in
    /// `buckets` equal parts of `[0, 1]`.
    ///
    /// # Errors
    ///
    /// [`ConfigError::States`] when `buckets` is 0 or the space would
    /// pass [`MAX_STATES`] states.
    ///
    /// ```
    /// use specdec_metrics::{DraftSignal, RequestState, StateSpace};
    /// let space = StateSpace::new(1)?.by_confidence(4)?;
    /// let s = RequestState::new();
    /// let at = |c| space.index(s, DraftSignal::NONE.with_confidence(c));
    /// assert_eq!((at(0.0), at(0.3), at(0.74), at(1.0)), (0, 1, 2, 3));
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    pub fn by_confidence(self, buckets: usize) -> Result<Self, ConfigError> {
        self.with(CONFIDENCE, buckets)
    }

    /// Adds the engine's own bucket ([`DraftSignal::bucket`], clamped to
    /// `buckets - 1`).
    ///
    /// # Errors
    ///
    /// [`ConfigError::States`] when `buckets` is 0 or the space would
    /// pass [`MAX_STATES`] states.
    ///
    /// ```
    /// use specdec_metrics::{DraftSignal, RequestState, StateSpace};
    /// let space = StateSpace::new(2)?.by_bucket(3)?;
    /// let high = RequestState::with_score(1.0);
    /// assert_eq!(space.index(high, DraftSignal::NONE.with_bucket(7)), 1 + 2 * 2);
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    pub fn by_bucket(self, buckets: usize) -> Result<Self, ConfigError> {
        self.with(BUCKET, buckets)
    }

    /// Adds a suffix draft's score ([`DraftSignal::score`]) in whole
    /// tokens: bucket `floor(score)`, scores of `buckets - 1` tokens or
    /// more pooled in the last. The score is the number of tokens the
    /// drafter expects to be accepted, so `by_score(2)` separates drafts it
    /// doubts from the first token on.
    ///
    /// # Errors
    ///
    /// [`ConfigError::States`] when `buckets` is 0 or the space would
    /// pass [`MAX_STATES`] states.
    ///
    /// ```
    /// use specdec_metrics::{DraftSignal, RequestState, StateSpace};
    /// let space = StateSpace::new(1)?.by_score(3)?;
    /// let at = |score| space.index(RequestState::new(), DraftSignal::suffix(4, 23, score));
    /// assert_eq!((at(0.0), at(0.99), at(1.0), at(2.5), at(11.0)), (0, 0, 1, 2, 2));
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    pub fn by_score(self, buckets: usize) -> Result<Self, ConfigError> {
        self.with(SCORE, buckets)
    }

    /// Recent-acceptance levels.
    ///
    /// ```
    /// use specdec_metrics::StateSpace;
    /// assert_eq!(StateSpace::new(3)?.levels(), 3);
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    pub const fn levels(self) -> usize {
        self.levels as usize
    }

    /// Signal buckets: the product of the dimensions' buckets.
    ///
    /// ```
    /// use specdec_metrics::StateSpace;
    /// assert_eq!(StateSpace::new(3)?.signals(), 1);
    /// assert_eq!(StateSpace::new(3)?.by_match_length(4)?.by_short_proposal()?.signals(), 8);
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    pub const fn signals(self) -> usize {
        self.match_len as usize
            * self.short_match as usize
            * self.short_proposal as usize
            * self.after_undrafted as usize
            * self.confidence as usize
            * self.bucket as usize
            * self.score as usize
    }

    /// States: `levels() × signals()`, in `1..=128`.
    ///
    /// ```
    /// use specdec_metrics::StateSpace;
    /// assert_eq!(StateSpace::new(3)?.by_confidence(5)?.count(), 15);
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    pub const fn count(self) -> usize {
        self.levels() * self.signals()
    }

    /// The signal bucket of a request in `state` drafting with `signal`,
    /// in `0..signals()`.
    ///
    /// ```
    /// use specdec_metrics::{DraftSignal, RequestState, StateSpace};
    /// let space = StateSpace::new(4)?.by_short_match()?.by_after_undrafted()?;
    /// let missed = RequestState::new().after_undrafted();
    /// assert_eq!(space.signal(missed, DraftSignal::ngram(1, 2)), 1 * 2 + 1);
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    #[inline]
    pub fn signal(self, state: RequestState, signal: DraftSignal) -> usize {
        // Every bucket is below its dimension's count (a dimension not
        // added has one bucket and stride 0), so the sum is below
        // `signals()`: no loop, no branch on the definition.
        let stride = |dim: u8| usize::from(self.strides[usize::from(dim)]);
        let matched = usize::from(signal.matched_n.clamp(1, self.match_len) - 1);
        let confidence = ((signal.confidence * u32::from(self.confidence)) / CONFIDENCE_ONE)
            .min(u32::from(self.confidence) - 1) as usize;
        let bucket = usize::from(signal.bucket.min(self.bucket - 1));
        let score = usize::from((signal.score >> 8).min(u16::from(self.score) - 1));
        matched * stride(MATCH_LEN)
            + usize::from(signal.short_match) * stride(SHORT_MATCH)
            + usize::from(signal.short_proposal) * stride(SHORT_PROPOSAL)
            + usize::from(state.after_undrafted_step()) * stride(AFTER_UNDRAFTED)
            + confidence * stride(CONFIDENCE)
            + bucket * stride(BUCKET)
            + score * stride(SCORE)
    }

    /// The state index of a request in `state` drafting with `signal`:
    /// `state.level(levels) + levels × signal(state, signal)`, in
    /// `0..count()`. No allocation, never a panic.
    ///
    /// ```
    /// use specdec_metrics::{DraftSignal, RequestState, StateSpace};
    /// let space = StateSpace::new(4)?.by_short_match()?;
    /// let state = RequestState::with_score(0.3); // level 1
    /// assert_eq!(space.index(state, DraftSignal::ngram(1, 2)), 1 + 4 * 1);
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    #[inline]
    pub fn index(self, state: RequestState, signal: DraftSignal) -> usize {
        // Both parts are in range: no clamp needed.
        state.level(self.levels()) + self.levels() * self.signal(state, signal)
    }

    /// The state index of level `level` and signal bucket `signal` (each
    /// clamped to its range), for an engine that computes them itself.
    ///
    /// ```
    /// use specdec_metrics::StateSpace;
    /// let space = StateSpace::new(3)?.by_bucket(5)?;
    /// assert_eq!(space.compose(2, 4), 14);
    /// assert_eq!(space.compose(9, 9), space.count() - 1);
    /// assert_eq!(space.split(space.compose(1, 3)), (1, 3));
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    #[inline]
    pub fn compose(self, level: usize, signal: usize) -> usize {
        level.min(self.levels() - 1) + self.levels() * signal.min(self.signals() - 1)
    }

    /// The `(level, signal)` of state `index` (for reports): the inverse of
    /// [`compose`](Self::compose) below `count()`.
    ///
    /// ```
    /// use specdec_metrics::StateSpace;
    /// let space = StateSpace::new(4)?.by_bucket(3)?;
    /// assert_eq!(space.split(9), (1, 2));
    /// # Ok::<(), specdec_metrics::ConfigError>(())
    /// ```
    pub fn split(self, index: usize) -> (usize, usize) {
        (index % self.levels(), index / self.levels())
    }
}
