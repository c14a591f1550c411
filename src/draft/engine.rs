//! [`EngineCounters`]: the speculative-decoding counters that serving
//! engines already export (vLLM, llama.cpp, mistral.rs, this crate's own
//! Prometheus families), turned into continuation counts with a verdict on
//! whether they identify them exactly.

use core::fmt;

use super::continuation::Continuation;
use crate::AcceptanceHistogram;
use crate::record::MAX_MAX_DRAFT_LEN;
use crate::record::layout::{bucket_count, checked_bucket_index};

/// The per-position counters an engine exports, with what is known about
/// its drafts, from which [`identify`](Self::identify) derives the
/// continuation counts `(s_i, n_i)` the [`Advisor`](crate::Advisor) uses.
///
/// Positions count from 0 here, as in the engines' `position` label: entry
/// `i` of `accepted_per_pos` counts the drafts whose token at position `i`
/// was accepted (so it is `s_{i+1}` in [`Continuation`]'s numbering).
///
/// What the counters identify:
///
/// - **Exact**, when the by-draft-length family is present
///   ([`with_by_draft_length`](Self::with_by_draft_length)), or when every
///   draft had the same length `K`: drafted tokens equal drafts times `K`,
///   or drafted tokens per position all equal the drafts. Then `n_1` is the
///   drafts, `s_i` the accepted count at position `i - 1` (0-based), and
///   `n_{i+1} = s_i`.
/// - **Bounds only**, when drafts had varying lengths and no by-length
///   family says which: `s_i` is still exact, but how many drafts reached
///   position `i` with every earlier token accepted (`n_i`) is known only
///   between bounds ([`ContinuationBounds`]); no point estimate is made.
/// - **Inconsistent** counters are an [`EngineCountersError`] naming the
///   series.
///
/// ```
/// use specdec_metrics::{EngineCounters, Identified};
/// // vLLM at K = 3: 100 drafts, 300 draft tokens, accepted per position 0, 1, 2.
/// let counters = EngineCounters::new(3, 100, 300, 60 + 40 + 25, vec![60, 40, 25])?;
/// match counters.identify()? {
///     Identified::Exact { continuation, .. } => {
///         assert_eq!(continuation.counts(), &[(60, 100), (40, 60), (25, 40)]);
///     }
///     other => panic!("{other:?}"),
/// }
/// # Ok::<(), specdec_metrics::EngineCountersError>(())
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct EngineCounters {
    max_draft_len: usize,
    drafts: u64,
    draft_tokens: u64,
    accepted_tokens: u64,
    accepted_per_pos: Vec<u64>,
    draft_tokens_per_pos: Option<Vec<u64>>,
    by_draft_length: Option<AcceptanceHistogram>,
}

/// How [`EngineCounters::identify`] knows the continuation counts, or that
/// it cannot.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Identified {
    /// The counts are exact.
    Exact {
        /// `(s_i, n_i)` for positions `1..=K`.
        continuation: Continuation,
        /// Why they are exact.
        because: Exactness,
    },
    /// Drafts of varying length without the by-draft-length family: only
    /// bounds on the trials are known.
    Bounds(ContinuationBounds),
}

/// Why [`Identified::Exact`] counts are exact.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Exactness {
    /// The by-draft-length family was given: the histogram itself.
    ByDraftLength,
    /// Every draft had the same length `K` (drafted tokens = drafts × `K`,
    /// or drafted tokens per position all equal to the drafts).
    SameLength,
}

/// What counters of drafts of varying length say about the continuation:
/// the successes `s_i` exactly, the trials `n_i` between two bounds.
/// Positions count from 1, as in [`Continuation`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContinuationBounds {
    /// `s_i` for positions `1..=K`, at index `i - 1`.
    successes: Vec<u64>,
    /// The fewest trials `n_i` the counters allow.
    trials_min: Vec<u64>,
    /// The most trials `n_i` the counters allow.
    trials_max: Vec<u64>,
}

/// What [`ContinuationBounds::at`] says of one position `i`: its
/// successes `s_i` exactly, its trials `n_i` between two bounds.
///
/// ```
/// use specdec_metrics::{EngineCounters, Identified};
/// // 10 drafts of at most 2 tokens, 15 drafted: 8 accepted position 1,
/// // 3 position 2.
/// let c = EngineCounters::new(2, 10, 15, 11, vec![8, 3])?;
/// let Identified::Bounds(bounds) = c.identify()? else { panic!() };
/// let at = bounds.at(2).unwrap();
/// assert_eq!(at.successes, 3);
/// assert!(at.trials_min <= at.trials_max);
/// # Ok::<(), specdec_metrics::EngineCountersError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PositionBounds {
    /// `s_i`: drafts that accepted position `i` (and so every earlier one).
    pub successes: u64,
    /// The fewest trials `n_i` (drafts that reached position `i` with every
    /// earlier token accepted) the counters allow.
    pub trials_min: u64,
    /// The most trials `n_i` the counters allow.
    pub trials_max: u64,
}

impl ContinuationBounds {
    /// The maximum draft length `K`.
    pub fn max_draft_len(&self) -> usize {
        self.successes.len()
    }

    /// The successes and the bounds on the trials at position `position`
    /// (`1..=K`); `None` outside.
    pub fn at(&self, position: usize) -> Option<PositionBounds> {
        let i = position.checked_sub(1)?;
        Some(PositionBounds {
            successes: *self.successes.get(i)?,
            trials_min: self.trials_min[i],
            trials_max: self.trials_max[i],
        })
    }

    /// The bounds on the continuation rate `h_i = s_i / n_i` at
    /// `position`: `[s_i / n_max, s_i / n_min]`; `None` outside `1..=K` or
    /// where no trial is possible.
    ///
    /// ```
    /// use specdec_metrics::{EngineCounters, Identified};
    /// // K = 2, 10 drafts of 15 tokens in all, 8 accepted at 0, 3 at 1.
    /// let c = EngineCounters::new(2, 10, 15, 11, vec![8, 3])?;
    /// let Identified::Bounds(bounds) = c.identify()? else { panic!() };
    /// // At least 8 drafts (15 tokens, at most 2 each) reached position 1.
    /// assert_eq!(bounds.rate(1), Some((0.8, 1.0)));
    /// // Of the 8 that accepted position 1, between 3 and 8 drafted position 2.
    /// assert_eq!(bounds.rate(2), Some((3.0 / 8.0, 1.0)));
    /// // Told how many drafts reached each position, the bounds narrow.
    /// let c = c.with_draft_tokens_per_pos(vec![10, 5])?;
    /// let Identified::Bounds(bounds) = c.identify()? else { panic!() };
    /// assert_eq!(bounds.rate(1), Some((0.8, 0.8)));
    /// let at2 = bounds.at(2).unwrap();
    /// assert_eq!((at2.successes, at2.trials_min, at2.trials_max), (3, 3, 5));
    /// # Ok::<(), specdec_metrics::EngineCountersError>(())
    /// ```
    pub fn rate(&self, position: usize) -> Option<(f64, f64)> {
        let PositionBounds {
            successes: s,
            trials_min: lo,
            trials_max: hi,
        } = self.at(position)?;
        (lo > 0).then(|| (s as f64 / hi as f64, s as f64 / lo as f64))
    }
}

/// A series of [`EngineCounters`], named in an [`EngineCountersError`].
/// Positions count from 0, as in the engines' `position` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CounterSeries {
    /// Drafts (vLLM's `num_drafts`).
    Drafts,
    /// Draft tokens.
    DraftTokens,
    /// Accepted draft tokens.
    AcceptedTokens,
    /// Accepted draft tokens at a position.
    AcceptedPerPos {
        /// The position, from 0.
        position: usize,
    },
    /// Draft tokens at a position.
    DraftTokensPerPos {
        /// The position, from 0.
        position: usize,
    },
    /// The by-draft-length family.
    ByDraftLength,
}

impl fmt::Display for CounterSeries {
    /// The series as this crate names it: `num_drafts`,
    /// `num_accepted_tokens_per_pos{position="1"}`, ...
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Drafts => f.write_str("num_drafts"),
            Self::DraftTokens => f.write_str("num_draft_tokens"),
            Self::AcceptedTokens => f.write_str("num_accepted_tokens"),
            Self::AcceptedPerPos { position } => {
                write!(f, "num_accepted_tokens_per_pos{{position=\"{position}\"}}")
            }
            Self::DraftTokensPerPos { position } => {
                write!(f, "num_draft_tokens_per_pos{{position=\"{position}\"}}")
            }
            Self::ByDraftLength => f.write_str("acceptance_by_draft_length"),
        }
    }
}

/// Engine counters that cannot come from one engine's drafts: the series
/// at fault, its value, and the bound it breaks.
///
/// ```
/// use specdec_metrics::{CounterSeries, EngineCounters};
/// // More drafts accepted at position 1 than at position 0.
/// let err = EngineCounters::new(2, 10, 20, 9, vec![4, 5]).unwrap_err();
/// assert_eq!(err.series(), CounterSeries::AcceptedPerPos { position: 1 });
/// assert_eq!(
///     err.to_string(),
///     "num_accepted_tokens_per_pos{position=\"1\"} is 5, above the 4 of num_accepted_tokens_per_pos{position=\"0\"}: a draft token is accepted only after every earlier one"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineCountersError {
    series: CounterSeries,
    value: u64,
    problem: Problem,
}

/// What is wrong with a series.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Problem {
    /// `K` outside `1..=64`.
    MaxDraftLen,
    /// A per-position list without exactly `K` entries.
    Length { expected: usize },
    /// Above a bound another series sets: `(bound, its series, why)`.
    Above {
        bound: u64,
        of: CounterSeries,
        why: &'static str,
    },
    /// Not what the by-draft-length family gives.
    Disagrees { derived: u64 },
    /// A bucket of the by-draft-length family outside the triangle
    /// `accepted <= draft_length <= K` (the value is the draft length).
    OutsideTriangle { accepted: usize },
    /// Buckets that add up past `u64::MAX`.
    Overflow,
    /// The accepted total is not the sum of the accepted counts per
    /// position (the sum, which may pass `u64::MAX`).
    NotTheSum { sum: u128, positions: usize },
}

impl EngineCountersError {
    /// The series at fault.
    pub fn series(&self) -> CounterSeries {
        self.series
    }

    /// Its value (for a list of the wrong length: the length).
    pub fn value(&self) -> u64 {
        self.value
    }

    fn above(
        series: CounterSeries,
        value: u64,
        bound: u64,
        of: CounterSeries,
        why: &'static str,
    ) -> Self {
        Self {
            series,
            value,
            problem: Problem::Above { bound, of, why },
        }
    }
}

impl EngineCountersError {
    /// The message, with every series named by `name` instead of this
    /// crate's short names: a program that read another engine's counters
    /// names them as that engine exports them.
    ///
    /// ```
    /// use specdec_metrics::{CounterSeries, EngineCounters};
    /// let err = EngineCounters::new(2, 10, 20, 9, vec![4, 5]).unwrap_err();
    /// let vllm = |s: CounterSeries| match s {
    ///     CounterSeries::AcceptedPerPos { position } => {
    ///         format!("vllm:spec_decode_num_accepted_tokens_per_pos_total{{position=\"{position}\"}}")
    ///     }
    ///     other => other.to_string(),
    /// };
    /// assert!(err.to_string_with(vllm).starts_with(
    ///     "vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"1\"} is 5, above the 4 of \
    ///      vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"0\"}"
    /// ));
    /// ```
    pub fn to_string_with(&self, name: impl Fn(CounterSeries) -> String) -> String {
        let mut out = String::new();
        let _ = self.write_with(&mut out, &name);
        out
    }

    fn write_with(
        &self,
        f: &mut impl fmt::Write,
        name: &dyn Fn(CounterSeries) -> String,
    ) -> fmt::Result {
        let (series, value) = (name(self.series), self.value);
        match &self.problem {
            Problem::MaxDraftLen => write!(
                f,
                "the maximum draft length (num_speculative_tokens) is {value}; expected 1..=64"
            ),
            Problem::Length { expected } => write!(
                f,
                "{series} has {value} positions; expected {expected}, one per draft position"
            ),
            Problem::Above { bound, of, why } => {
                let of = name(*of);
                write!(f, "{series} is {value}, above the {bound} of {of}: {why}")
            }
            Problem::Disagrees { derived } => write!(
                f,
                "{series} is {value} but the {} family gives {derived}",
                name(CounterSeries::ByDraftLength)
            ),
            Problem::OutsideTriangle { accepted } => write!(
                f,
                "{series} has a bucket draft_length={value}, accepted={accepted}: a bucket needs accepted <= draft_length <= K"
            ),
            Problem::Overflow => write!(f, "{series} adds up past 18446744073709551615"),
            Problem::NotTheSum { sum, positions } => write!(
                f,
                "{series} is {value} but the accepted counts per position, {} to {}, add up to {sum}: every accepted draft token is counted once, at its position",
                name(CounterSeries::AcceptedPerPos { position: 0 }),
                name(CounterSeries::AcceptedPerPos {
                    position: positions.saturating_sub(1)
                }),
            ),
        }
    }
}

impl fmt::Display for EngineCountersError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_with(f, &|s: CounterSeries| s.to_string())
    }
}

impl std::error::Error for EngineCountersError {}

impl EngineCounters {
    /// Counters of an engine configured with `max_draft_len` (`K`): its
    /// drafts (verify steps that drafted), draft tokens, accepted draft
    /// tokens, and accepted draft tokens per position `0..K` (a shorter
    /// list is padded with zeros: an engine that creates a position's
    /// series only once it counts something, as mistral.rs does, has no
    /// series for a position nothing was accepted at).
    ///
    /// # Errors
    ///
    /// [`EngineCountersError`] naming the series when the counters are
    /// inconsistent: `K` outside `1..=64`, more than `K` positions, accepted
    /// counts that grow with the position or exceed the drafts, accepted
    /// tokens above the draft tokens or other than the sum of the accepted
    /// counts per position, draft tokens above drafts × `K`.
    ///
    /// ```
    /// use specdec_metrics::{CounterSeries, EngineCounters};
    /// // 5 accepted in all, but the positions count 10 + 10 + 10 = 30.
    /// let err = EngineCounters::new(3, 10, 30, 5, vec![10, 10, 10]).unwrap_err();
    /// assert_eq!(err.series(), CounterSeries::AcceptedTokens);
    /// assert!(err.to_string().starts_with("num_accepted_tokens is 5 but the accepted counts per position"));
    /// ```
    pub fn new(
        max_draft_len: usize,
        drafts: u64,
        draft_tokens: u64,
        accepted_tokens: u64,
        mut accepted_per_pos: Vec<u64>,
    ) -> Result<Self, EngineCountersError> {
        if !(1..=MAX_MAX_DRAFT_LEN).contains(&max_draft_len) {
            return Err(EngineCountersError {
                series: CounterSeries::DraftTokens,
                value: max_draft_len as u64,
                problem: Problem::MaxDraftLen,
            });
        }
        if accepted_per_pos.len() > max_draft_len {
            return Err(EngineCountersError {
                series: CounterSeries::AcceptedPerPos {
                    position: max_draft_len,
                },
                value: accepted_per_pos.len() as u64,
                problem: Problem::Length {
                    expected: max_draft_len,
                },
            });
        }
        accepted_per_pos.resize(max_draft_len, 0);
        let counters = Self {
            max_draft_len,
            drafts,
            draft_tokens,
            accepted_tokens,
            accepted_per_pos,
            draft_tokens_per_pos: None,
            by_draft_length: None,
        };
        counters.check()?;
        Ok(counters)
    }

    /// Adds the draft tokens per position `0..K` (vLLM exports them only
    /// through this crate's families; some engines do). Padded with zeros
    /// like the accepted counts.
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new), and when they grow with the position, exceed
    /// the drafts, or are below the accepted count of their position.
    ///
    /// ```
    /// use specdec_metrics::{EngineCounters, Exactness, Identified};
    /// // Every draft reached every position: the same length K = 2.
    /// let c = EngineCounters::new(2, 10, 20, 12, vec![7, 5])?.with_draft_tokens_per_pos(vec![10, 10])?;
    /// assert!(matches!(c.identify()?, Identified::Exact { because: Exactness::SameLength, .. }));
    /// # Ok::<(), specdec_metrics::EngineCountersError>(())
    /// ```
    pub fn with_draft_tokens_per_pos(
        mut self,
        mut per_pos: Vec<u64>,
    ) -> Result<Self, EngineCountersError> {
        if per_pos.len() > self.max_draft_len {
            return Err(EngineCountersError {
                series: CounterSeries::DraftTokensPerPos {
                    position: self.max_draft_len,
                },
                value: per_pos.len() as u64,
                problem: Problem::Length {
                    expected: self.max_draft_len,
                },
            });
        }
        per_pos.resize(self.max_draft_len, 0);
        self.draft_tokens_per_pos = Some(per_pos);
        self.check()?;
        Ok(self)
    }

    /// Adds the by-draft-length family (this crate's
    /// `acceptance_by_draft_length`), which makes the counts exact.
    ///
    /// # Errors
    ///
    /// When its `K` differs, or the totals it gives (drafts, draft tokens,
    /// accepted tokens and per position) differ from the counters.
    ///
    /// ```
    /// use specdec_metrics::{AcceptanceHistogram, EngineCounters, Exactness, Identified};
    /// let mut h = AcceptanceHistogram::new(2)?;
    /// h.observe(1, 1)?;
    /// h.observe(2, 0)?;
    /// let c = EngineCounters::new(2, 2, 3, 1, vec![1, 0])?.with_by_draft_length(h.clone())?;
    /// let Identified::Exact { continuation, because } = c.identify()? else { panic!() };
    /// assert_eq!(because, Exactness::ByDraftLength);
    /// assert_eq!(continuation.counts(), &[(1, 2), (0, 0)]); // (1, 1) is censored at 2
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_by_draft_length(
        mut self,
        histogram: AcceptanceHistogram,
    ) -> Result<Self, EngineCountersError> {
        let series = CounterSeries::ByDraftLength;
        if histogram.max_draft_len() != self.max_draft_len {
            return Err(EngineCountersError {
                series,
                value: histogram.max_draft_len() as u64,
                problem: Problem::Length {
                    expected: self.max_draft_len,
                },
            });
        }
        let disagrees = |series, value, derived| {
            Err(EngineCountersError {
                series,
                value,
                problem: Problem::Disagrees { derived },
            })
        };
        for (series, value, derived) in [
            (
                CounterSeries::Drafts,
                self.drafts,
                histogram.num_spec_steps(),
            ),
            (
                CounterSeries::DraftTokens,
                self.draft_tokens,
                histogram.num_draft_tokens(),
            ),
            (
                CounterSeries::AcceptedTokens,
                self.accepted_tokens,
                histogram.num_accepted_draft_tokens(),
            ),
        ] {
            if value != derived {
                return disagrees(series, value, derived);
            }
        }
        let derived = histogram.num_accepted_tokens_per_pos();
        for (position, (&value, &derived)) in self.accepted_per_pos.iter().zip(&derived).enumerate()
        {
            if value != derived {
                return disagrees(CounterSeries::AcceptedPerPos { position }, value, derived);
            }
        }
        self.by_draft_length = Some(histogram);
        Ok(self)
    }

    /// Adds the by-draft-length family from its buckets, as an exposition
    /// carries them: `(draft_length, accepted, count)` for any buckets of
    /// the triangle (absent ones are zero; a bucket given twice is summed,
    /// as for several engines of one group), then as
    /// [`with_by_draft_length`](Self::with_by_draft_length).
    ///
    /// # Errors
    ///
    /// A bucket outside `accepted <= draft_length <= K`, buckets whose sum
    /// overflows, and the errors of `with_by_draft_length`.
    ///
    /// ```
    /// use specdec_metrics::{EngineCounters, Exactness, Identified};
    /// // K = 2: one step (1, 1) and one step (2, 0).
    /// let c = EngineCounters::new(2, 2, 3, 1, vec![1, 0])?
    ///     .with_by_draft_length_buckets([(1, 1, 1), (2, 0, 1), (0, 0, 0)])?;
    /// let Identified::Exact { because, .. } = c.identify()? else { panic!() };
    /// assert_eq!(because, Exactness::ByDraftLength);
    /// assert!(EngineCounters::new(2, 2, 3, 1, vec![1, 0])?.with_by_draft_length_buckets([(1, 2, 1)]).is_err());
    /// # Ok::<(), specdec_metrics::EngineCountersError>(())
    /// ```
    pub fn with_by_draft_length_buckets(
        self,
        buckets: impl IntoIterator<Item = (usize, usize, u64)>,
    ) -> Result<Self, EngineCountersError> {
        let k_max = self.max_draft_len;
        let mut counts = vec![0u64; bucket_count(k_max)].into_boxed_slice();
        for (drafted, accepted, count) in buckets {
            let Some(i) = checked_bucket_index(k_max, drafted, accepted) else {
                return Err(EngineCountersError {
                    series: CounterSeries::ByDraftLength,
                    value: drafted as u64,
                    problem: Problem::OutsideTriangle { accepted },
                });
            };
            counts[i] = counts[i].checked_add(count).ok_or(EngineCountersError {
                series: CounterSeries::ByDraftLength,
                value: count,
                problem: Problem::Overflow,
            })?;
        }
        let histogram = AcceptanceHistogram::from_parts(
            k_max,
            counts,
            0,
            0,
            vec![0; k_max + 1].into_boxed_slice(),
        );
        self.with_by_draft_length(histogram)
    }

    /// The maximum draft length `K`.
    pub fn max_draft_len(&self) -> usize {
        self.max_draft_len
    }

    /// Drafts counted.
    pub fn drafts(&self) -> u64 {
        self.drafts
    }

    /// Every bound one series sets on another.
    fn check(&self) -> Result<(), EngineCountersError> {
        use CounterSeries as S;
        let most_tokens = self.drafts.saturating_mul(self.max_draft_len as u64);
        if self.draft_tokens > most_tokens {
            return Err(EngineCountersError::above(
                S::DraftTokens,
                self.draft_tokens,
                most_tokens,
                S::Drafts,
                "times K: no draft is longer than K",
            ));
        }
        if self.accepted_tokens > self.draft_tokens {
            return Err(EngineCountersError::above(
                S::AcceptedTokens,
                self.accepted_tokens,
                self.draft_tokens,
                S::DraftTokens,
                "more tokens accepted than drafted",
            ));
        }
        check_falling(
            &self.accepted_per_pos,
            self.drafts,
            |position| S::AcceptedPerPos { position },
            "a draft token is accepted only after every earlier one",
        )?;
        if let Some(drafted) = &self.draft_tokens_per_pos {
            check_falling(
                drafted,
                self.drafts,
                |position| S::DraftTokensPerPos { position },
                "a draft that reaches a position reached every earlier one",
            )?;
            for (position, (&a, &d)) in self.accepted_per_pos.iter().zip(drafted).enumerate() {
                if a > d {
                    return Err(EngineCountersError::above(
                        S::AcceptedPerPos { position },
                        a,
                        d,
                        S::DraftTokensPerPos { position },
                        "more drafts accepted at a position than reached it",
                    ));
                }
            }
        }
        // Each accepted token is counted once in the total and once at its
        // position (vLLM, mistral.rs and this crate increment both by the
        // same amounts): a total that differs is a partial or torn scrape.
        let sum: u128 = self.accepted_per_pos.iter().map(|&n| u128::from(n)).sum();
        if sum != u128::from(self.accepted_tokens) {
            return Err(EngineCountersError {
                series: S::AcceptedTokens,
                value: self.accepted_tokens,
                problem: Problem::NotTheSum {
                    sum,
                    positions: self.max_draft_len,
                },
            });
        }
        Ok(())
    }

    /// The continuation counts the counters identify (see the type's docs).
    ///
    /// # Errors
    ///
    /// [`EngineCountersError`] when the counters are inconsistent in a way
    /// only the identification shows: with drafts all of length `K`, the
    /// accepted count at a position above what reached it.
    pub fn identify(&self) -> Result<Identified, EngineCountersError> {
        if let Some(h) = &self.by_draft_length {
            return Ok(Identified::Exact {
                continuation: Continuation::new(h),
                because: Exactness::ByDraftLength,
            });
        }
        let k = self.max_draft_len as u64;
        let same_length = self.drafts.checked_mul(k) == Some(self.draft_tokens)
            || self
                .draft_tokens_per_pos
                .as_ref()
                .is_some_and(|d| d.iter().all(|&n| n == self.drafts));
        if same_length {
            let mut counts = Vec::with_capacity(self.max_draft_len);
            let mut trials = self.drafts;
            for &s in &self.accepted_per_pos {
                counts.push((s, trials));
                trials = s;
            }
            return Ok(Identified::Exact {
                continuation: Continuation::from_counts(counts.into_boxed_slice()),
                because: Exactness::SameLength,
            });
        }
        Ok(Identified::Bounds(self.bounds()))
    }

    /// Bounds on `n_i` for drafts of varying length. With `A_j` the accepted
    /// count at 0-based position `j` (`A_{-1}` the drafts) and `D_j` the
    /// drafts that reached position `j` (the drafts when unknown):
    ///
    /// - at most `min(A_{i-2}, D_{i-1})`: a trial at position `i` needs
    ///   every earlier token accepted and the draft to reach `i`;
    /// - at least `A_{i-2}` minus the drafts that could have ended at
    ///   `i - 1` fully accepted: those are at most `D_{i-2} - D_{i-1}` (the
    ///   drafts of length exactly `i - 1`) and at most the `A_{i-2} -
    ///   A_{i-1}` that stopped there; at position 1, the drafts that reached
    ///   it (`D_0`, or without it the draft tokens over `K`, rounded up);
    /// - and always between `s_i` and the upper bound.
    fn bounds(&self) -> ContinuationBounds {
        let drafted = |j: usize| -> u64 {
            self.draft_tokens_per_pos
                .as_ref()
                .map_or(self.drafts, |d| d[j])
        };
        let accepted = |j: Option<usize>| j.map_or(self.drafts, |j| self.accepted_per_pos[j]);
        let (mut successes, mut trials_min, mut trials_max) = (Vec::new(), Vec::new(), Vec::new());
        for i in 1..=self.max_draft_len {
            let s = self.accepted_per_pos[i - 1];
            let reached_all_before = accepted(i.checked_sub(2));
            let hi = reached_all_before.min(drafted(i - 1));
            let lo = if i == 1 {
                // Drafts of length 0 have no position 1. The per-position
                // draft count says how many reached it; without it, at
                // least the draft tokens over K did.
                self.draft_tokens_per_pos.as_ref().map_or_else(
                    || self.draft_tokens.div_ceil(self.max_draft_len as u64),
                    |d| d[0],
                )
            } else {
                let stopped_there = reached_all_before - s;
                let ended_there = match &self.draft_tokens_per_pos {
                    Some(d) => d[i - 2] - d[i - 1],
                    None => stopped_there,
                };
                reached_all_before - stopped_there.min(ended_there)
            };
            successes.push(s);
            trials_min.push(lo.max(s).min(hi));
            trials_max.push(hi.max(s));
        }
        ContinuationBounds {
            successes,
            trials_min,
            trials_max,
        }
    }
}

/// Each entry at most `first` and at most the one before it.
fn check_falling(
    values: &[u64],
    first: u64,
    series: impl Fn(usize) -> CounterSeries,
    falling: &'static str,
) -> Result<(), EngineCountersError> {
    let mut bound = (first, CounterSeries::Drafts);
    for (position, &v) in values.iter().enumerate() {
        if v > bound.0 {
            let why = if position == 0 {
                "a position is counted at most once per draft"
            } else {
                falling
            };
            return Err(EngineCountersError::above(
                series(position),
                v,
                bound.0,
                bound.1,
                why,
            ));
        }
        bound = (v, series(position));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_summed_checked_and_agree_with_the_totals() {
        // K = 2: (2, 1) twice (given as two buckets, as two engines would),
        // (0, 0) once.
        let base = EngineCounters::new(2, 3, 4, 2, vec![2, 0]).unwrap();
        let c = base
            .clone()
            .with_by_draft_length_buckets([(2, 1, 1), (2, 1, 1), (0, 0, 1)])
            .unwrap();
        let Identified::Exact { continuation, .. } = c.identify().unwrap() else {
            panic!()
        };
        // (0, 0) drafted nothing: position 1 has the two (2, 1) steps.
        assert_eq!(continuation.counts(), &[(2, 2), (0, 2)]);
        // Totals that the buckets do not give name the series.
        let err = base
            .clone()
            .with_by_draft_length_buckets([(2, 1, 2)])
            .unwrap_err();
        assert_eq!(err.series(), CounterSeries::Drafts);
        let err = base
            .clone()
            .with_by_draft_length_buckets([(1, 1, u64::MAX), (1, 1, 1)])
            .unwrap_err();
        assert_eq!(err.series(), CounterSeries::ByDraftLength);
        assert!(err.to_string().contains("past 18446744073709551615"));
        let err = base.with_by_draft_length_buckets([(3, 0, 1)]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "acceptance_by_draft_length has a bucket draft_length=3, accepted=0: a bucket needs accepted <= draft_length <= K"
        );
    }

    #[test]
    fn messages_name_every_series_as_asked() {
        let err = EngineCounters::new(2, 10, 21, 9, vec![4, 3]).unwrap_err();
        let named = err.to_string_with(|s| format!("<{s}>"));
        assert_eq!(
            named,
            "<num_draft_tokens> is 21, above the 20 of <num_drafts>: times K: no draft is longer than K"
        );
        assert_eq!(err.to_string_with(|s| s.to_string()), err.to_string());
    }
}
