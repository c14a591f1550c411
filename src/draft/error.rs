//! The draft layer's errors: step costs ([`CostError`]), tuning
//! parameters ([`ParameterError`]) and batch-size tables
//! ([`BatchTableError`], which carries the bucket it is about). A wrapped
//! error is printed in its wrapper's message and not returned again from
//! `source()`, so a chain printed the way ripgrep prints it says each thing
//! once.

use core::fmt;

use super::cost::{MAX_STEP_COST, MIN_STEP_COST};

/// Which term of a step cost a [`CostError`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CostTerm {
    /// The `base` of [`StepCost::linear`](crate::StepCost::linear): the cost
    /// of a step without speculation.
    Base,
    /// The `per_draft_token` of [`StepCost::linear`](crate::StepCost::linear).
    PerDraftToken,
    /// The entry for draft length `draft_len` of
    /// [`StepCost::table`](crate::StepCost::table).
    Table {
        /// The draft length `k` (the index in the table).
        draft_len: usize,
    },
}

impl fmt::Display for CostTerm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Base => f.write_str("the base cost"),
            Self::PerDraftToken => f.write_str("the cost per draft token"),
            Self::Table { draft_len } => write!(f, "the cost of draft length {draft_len}"),
        }
    }
}

/// A step cost that cannot be used: every cost must be a finite number
/// between `1e-150` and `1e150` (a per-draft-token cost may also be zero),
/// and a table needs one entry per draft length `0..=K` of the `K` it is
/// used with.
///
/// ```
/// use specdec_metrics::{CostError, CostTerm, StepCost};
/// let err = StepCost::table(vec![1.0, f64::NAN]).unwrap_err();
/// assert!(matches!(err, CostError::NotFinite { term: CostTerm::Table { draft_len: 1 }, .. }));
/// assert_eq!(err.to_string(), "the cost of draft length 1 is NaN; a step cost must be a finite number");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum CostError {
    /// A cost is NaN or infinite.
    NotFinite {
        /// Which cost.
        term: CostTerm,
        /// The value given.
        value: f64,
    },
    /// A cost is zero or negative (a per-draft-token cost: negative).
    NotPositive {
        /// Which cost.
        term: CostTerm,
        /// The value given.
        value: f64,
    },
    /// A cost outside [`MIN_STEP_COST`]`..=`[`MAX_STEP_COST`] (`1e-150` to
    /// `1e150`: only ratios of costs matter; the bounds keep every ratio
    /// and every goodput a finite number).
    ///
    /// ```
    /// use specdec_metrics::{CostError, CostTerm, StepCost};
    /// let err = StepCost::linear(5e-324, 0.0).unwrap_err();
    /// assert_eq!(err, CostError::OutOfRange { term: CostTerm::Base, value: 5e-324 });
    /// assert_eq!(
    ///     err.to_string(),
    ///     "the base cost is 5e-324; a step cost must be between 1e-150 and 1e150 (only ratios of costs matter: use another unit)"
    /// );
    /// ```
    ///
    /// [`MIN_STEP_COST`]: crate::MIN_STEP_COST
    /// [`MAX_STEP_COST`]: crate::MAX_STEP_COST
    OutOfRange {
        /// Which cost.
        term: CostTerm,
        /// The value given.
        value: f64,
    },
    /// An empty table.
    EmptyTable,
    /// A table without exactly one entry per draft length `0..=K`.
    TableLength {
        /// The maximum draft length `K` the table is used with.
        max_draft_len: usize,
        /// The number of entries given.
        found: usize,
    },
}

impl fmt::Display for CostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::NotFinite { term, value } => {
                write!(f, "{term} is {value}; a step cost must be a finite number")
            }
            Self::NotPositive {
                term: term @ CostTerm::PerDraftToken,
                value,
            } => write!(f, "{term} is {value}; it must be zero or more"),
            Self::NotPositive { term, value } => {
                write!(f, "{term} is {value}; a step cost must be more than zero")
            }
            Self::OutOfRange { term, value } => write!(
                f,
                "{term} is {value:e}; a step cost must be between {MIN_STEP_COST:e} and {MAX_STEP_COST:e} (only ratios of costs matter: use another unit)"
            ),
            Self::EmptyTable => f.write_str(
                "the step cost table is empty; it needs one cost per draft length 0..=K",
            ),
            Self::TableLength {
                max_draft_len,
                found,
            } => write!(
                f,
                "the step cost table has {found} entries but max_draft_len {max_draft_len} needs {} (one per draft length 0..={max_draft_len})",
                max_draft_len + 1
            ),
        }
    }
}

impl std::error::Error for CostError {}

/// A tuning parameter of the [`Advisor`](crate::Advisor) or the
/// [`DraftController`](crate::DraftController) outside its range.
///
/// ```
/// use specdec_metrics::Advisor;
/// let err = Advisor::default().with_prior(0.0, 1.0).unwrap_err();
/// assert_eq!(err.to_string(), "prior alpha is 0; expected a finite number above 0");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ParameterError {
    name: &'static str,
    value: f64,
    expected: &'static str,
}

impl ParameterError {
    pub(crate) const fn new(name: &'static str, value: f64, expected: &'static str) -> Self {
        Self {
            name,
            value,
            expected,
        }
    }

    /// The parameter's name, as in the message.
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// The value given.
    pub const fn value(&self) -> f64 {
        self.value
    }
}

impl fmt::Display for ParameterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} is {}; expected {}",
            self.name, self.value, self.expected
        )
    }
}

impl std::error::Error for ParameterError {}

/// A batch-size bucket named in a [`BatchTableError`]: its position in the
/// list given (`index`, from 0; messages count from 1) and its batch sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BucketSpan {
    /// The bucket's position in the list, from 0.
    pub index: usize,
    /// Its first batch size.
    pub start_bs: usize,
    /// Its last batch size.
    pub end_bs: usize,
}

impl fmt::Display for BucketSpan {
    /// `bucket 2 (batch sizes 5-8)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bucket {} (batch sizes {}-{})",
            self.index + 1,
            self.start_bs,
            self.end_bs
        )
    }
}

/// Why buckets cannot make a [`BatchTable`](crate::BatchTable), or a table
/// cannot be written as TensorRT-LLM's schedule: the bucket it is about (if
/// any) and what is wrong, in the shape of `std::io::Error` (context and
/// kind).
///
/// ```
/// use specdec_metrics::{Advisor, BatchTable, BatchTableErrorKind};
/// let err = BatchTable::recommend(&Advisor::default(), &[]).unwrap_err();
/// assert_eq!(err.kind(), &BatchTableErrorKind::Empty);
/// assert_eq!(err.bucket(), None);
/// assert_eq!(err.to_string(), "no batch-size buckets were given");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct BatchTableError {
    bucket: Option<BucketSpan>,
    kind: BatchTableErrorKind,
}

/// What is wrong, in a [`BatchTableError`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum BatchTableErrorKind {
    /// No buckets.
    Empty,
    /// The bucket's first batch size is above its last.
    StartAfterEnd,
    /// The first bucket does not start at batch size 1 (vLLM refuses such a
    /// schedule, and no data would support the smaller batch sizes).
    FirstNotOne,
    /// The bucket starts below the bucket before it.
    Unsorted {
        /// The bucket before it.
        previous: BucketSpan,
    },
    /// The bucket starts at or below the last batch size of the bucket
    /// before it.
    Overlap {
        /// The bucket before it.
        previous: BucketSpan,
    },
    /// Batch sizes between the bucket and the one before it belong to
    /// neither.
    Gap {
        /// The bucket before it.
        previous: BucketSpan,
    },
    /// The bucket's histogram has another maximum draft length than the
    /// first bucket's.
    MaxDraftLen {
        /// Its histogram's `K`.
        found: usize,
        /// The first bucket's `K`.
        expected: usize,
    },
    /// The bucket's cost does not fit `K` (a table without `K + 1` entries).
    Cost(CostError),
    /// The bucket recommends a longer draft than the first bucket, which
    /// TensorRT-LLM's `draft_len_schedule` cannot say.
    TrtllmIncreasing {
        /// The first bucket.
        first: BucketSpan,
        /// The first bucket's draft length.
        first_draft_len: usize,
        /// The bucket's draft length.
        draft_len: usize,
    },
    /// Every bucket recommends not speculating.
    TrtllmNoSpeculation,
}

impl BatchTableError {
    pub(crate) const fn new(bucket: Option<BucketSpan>, kind: BatchTableErrorKind) -> Self {
        Self { bucket, kind }
    }

    /// The bucket the error is about; `None` when it is about no single
    /// bucket.
    ///
    /// ```
    /// use specdec_metrics::{AcceptanceHistogram, Advisor, BatchBucket, BatchTable, BucketSpan, StepCost};
    /// let b = BatchBucket::new(3, 1, AcceptanceHistogram::new(2)?, StepCost::linear(1.0, 0.1)?);
    /// let err = BatchTable::recommend(&Advisor::default(), &[b]).unwrap_err();
    /// assert_eq!(err.bucket(), Some(BucketSpan { index: 0, start_bs: 3, end_bs: 1 }));
    /// assert_eq!(err.to_string(), "bucket 1 (batch sizes 3-1) starts above its end");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub const fn bucket(&self) -> Option<BucketSpan> {
        self.bucket
    }

    /// What is wrong.
    pub const fn kind(&self) -> &BatchTableErrorKind {
        &self.kind
    }

    /// The position (from 0) of the bucket the error is about; `None` when
    /// it is about no single bucket.
    pub const fn index(&self) -> Option<usize> {
        match self.bucket {
            Some(b) => Some(b.index),
            None => None,
        }
    }
}

impl fmt::Display for BatchTableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use BatchTableErrorKind as Kind;
        let Some(bucket) = self.bucket else {
            return match self.kind {
                Kind::TrtllmNoSpeculation => f.write_str(
                    "every bucket recommends draft length 0: TensorRT-LLM's draft_len_schedule would need max_draft_len 0; run without speculative decoding instead",
                ),
                // `Empty`, the only other kind without a bucket.
                _ => f.write_str("no batch-size buckets were given"),
            };
        };
        match self.kind {
            Kind::Empty | Kind::TrtllmNoSpeculation => write!(f, "{bucket}"),
            Kind::StartAfterEnd => write!(f, "{bucket} starts above its end"),
            Kind::FirstNotOne => write!(
                f,
                "{bucket} does not start at batch size 1: the buckets must cover every batch size from 1"
            ),
            Kind::Unsorted { previous } => write!(
                f,
                "{bucket} starts below {previous}: give the buckets in order of batch size"
            ),
            Kind::Overlap { previous } => write!(
                f,
                "{bucket} overlaps {previous}: each batch size belongs to one bucket"
            ),
            Kind::Gap { previous } => {
                let (first, last) = (previous.end_bs + 1, bucket.start_bs - 1);
                write!(f, "{bucket}")?;
                if first == last {
                    write!(f, " leaves batch size {first}")?;
                } else {
                    write!(f, " leaves batch sizes {first}-{last}")?;
                }
                write!(
                    f,
                    " without a bucket after {previous}; vLLM would give them the draft length of the bucket below, TensorRT-LLM that of the bucket above"
                )
            }
            Kind::MaxDraftLen { found, expected } => write!(
                f,
                "{bucket}: its histogram's num_spec_tokens (K) is {found} but the first bucket's is {expected}; every bucket must have the engine's K"
            ),
            Kind::Cost(error) => write!(f, "{bucket}: {error}"),
            Kind::TrtllmIncreasing {
                first,
                first_draft_len,
                draft_len,
            } => write!(
                f,
                "{bucket} recommends draft length {draft_len}, more than the {first_draft_len} of {first}: TensorRT-LLM's draft_len_schedule needs its value at the smallest batch size to be max_draft_len and no value above it"
            ),
        }
    }
}

// The cost error is printed in the message (`Kind::Cost`), so it is not
// a `source()` too.
impl std::error::Error for BatchTableError {}
