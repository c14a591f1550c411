//! [`BatchTable`]: draft lengths by batch size, written as the schedules
//! vLLM and TensorRT-LLM read.

use std::collections::BTreeMap;

use serde::Serialize;

use super::advisor::{Advisor, Recommendation};
use super::cost::StepCost;
use super::error::{BatchTableError, BatchTableErrorKind as Kind, BucketSpan};
use crate::AcceptanceHistogram;

/// One batch-size bucket: the batch sizes `start_bs..=end_bs`, the histogram
/// of the verify steps taken at those batch sizes, and the cost of a step
/// there.
///
/// ```
/// use specdec_metrics::{AcceptanceHistogram, BatchBucket, StepCost};
/// let bucket = BatchBucket::new(1, 8, AcceptanceHistogram::new(4)?, StepCost::linear(1.0, 0.05)?);
/// assert_eq!((bucket.start_bs, bucket.end_bs), (1, 8));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct BatchBucket {
    /// The smallest batch size of the bucket (inclusive).
    pub start_bs: usize,
    /// The largest batch size of the bucket (inclusive).
    pub end_bs: usize,
    /// The verify steps taken at these batch sizes.
    pub histogram: AcceptanceHistogram,
    /// The cost of a step drafting `k = 0..=K` tokens at these batch sizes.
    pub cost: StepCost,
}

impl BatchBucket {
    /// The bucket of batch sizes `start_bs..=end_bs`.
    ///
    /// ```
    /// use specdec_metrics::{AcceptanceHistogram, BatchBucket, StepCost};
    /// let cost = StepCost::table(vec![10.0, 11.0, 12.0])?;
    /// let bucket = BatchBucket::new(9, 32, AcceptanceHistogram::new(2)?, cost);
    /// assert_eq!(bucket.histogram.max_draft_len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(
        start_bs: usize,
        end_bs: usize,
        histogram: AcceptanceHistogram,
        cost: StepCost,
    ) -> Self {
        Self {
            start_bs,
            end_bs,
            histogram,
            cost,
        }
    }
}

/// What is wrong with where `bucket` lies, given the bucket before it: the
/// buckets must start at 1, each with `start_bs <= end_bs`, each starting
/// right after the one before.
fn tiling_fault(bucket: BucketSpan, previous: Option<BucketSpan>) -> Option<Kind> {
    if bucket.start_bs > bucket.end_bs {
        return Some(Kind::StartAfterEnd);
    }
    match previous {
        None if bucket.start_bs != 1 => Some(Kind::FirstNotOne),
        None => None,
        Some(previous) if bucket.start_bs < previous.start_bs => Some(Kind::Unsorted { previous }),
        Some(previous) if bucket.start_bs <= previous.end_bs => Some(Kind::Overlap { previous }),
        Some(previous) if bucket.start_bs - previous.end_bs > 1 => Some(Kind::Gap { previous }),
        Some(_) => None,
    }
}

/// The advice for one bucket. Serializes (serde) to `{"start_bs", "end_bs",
/// "recommendation"}`.
///
/// ```
/// use specdec_metrics::{AcceptanceHistogram, Advisor, BatchBucket, BatchTable, StepCost};
/// let mut h = AcceptanceHistogram::new(2)?;
/// h.observe(2, 2)?;
/// let table = BatchTable::recommend(
///     &Advisor::default(),
///     &[BatchBucket::new(1, 16, h, StepCost::linear(1.0, 0.1)?)],
/// )?;
/// let entry = &table.entries()[0];
/// assert_eq!((entry.start_bs, entry.end_bs), (1, 16));
/// assert_eq!(entry.recommendation.num_spec_steps, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
#[non_exhaustive]
pub struct BatchEntry {
    /// The smallest batch size of the bucket (inclusive).
    pub start_bs: usize,
    /// The largest batch size of the bucket (inclusive).
    pub end_bs: usize,
    /// The advisor's recommendation for the bucket's histogram and cost.
    pub recommendation: Recommendation,
}

impl BatchEntry {
    /// The recommended draft length of the bucket
    /// (`recommendation.draft_len`).
    ///
    /// ```
    /// use specdec_metrics::{AcceptanceHistogram, Advisor, BatchBucket, BatchTable, StepCost};
    /// let mut h = AcceptanceHistogram::new(2)?;
    /// for _ in 0..100 {
    ///     h.observe(2, 0)?; // nothing is ever accepted
    /// }
    /// let bucket = BatchBucket::new(1, 4, h, StepCost::linear(1.0, 0.1)?);
    /// let table = BatchTable::recommend(&Advisor::default(), &[bucket])?;
    /// assert_eq!(table.entries()[0].draft_len(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn draft_len(&self) -> usize {
        self.recommendation.draft_len
    }
}

/// The draft length for every batch-size bucket, and the schedules vLLM
/// and TensorRT-LLM read.
/// Serializes (serde) to `{"max_draft_len": K, "buckets": [BatchEntry,
/// ...]}`.
///
/// The cost of a verify step grows with the batch: a draft token that is
/// nearly free at batch size 1 can cost as much as the token it saves at 64.
/// Acceptance changes little with the batch, the cost a lot, so the right
/// draft length is a function of the batch size. An engine that keeps one
/// histogram per batch-size bucket (for instance one
/// [`Recorder`](crate::Recorder) per bucket) and measures its step cost per
/// bucket gives both to [`BatchTable::recommend`], which asks the
/// [`Advisor`] once per bucket and checks that the buckets tile the batch
/// sizes from 1 without gaps or overlaps.
///
/// # The two schedules
///
/// **vLLM** (`speculative_config.num_speculative_tokens_per_batch_size`,
/// Dynamic SD, vLLM pull request 32374): a list of `[start_bs, end_bs, K]`.
/// As vLLM's `validate_and_normalize_dynamic_sd_schedule` and
/// `build_dynamic_sd_schedule_lookup` (in
/// `vllm/v1/spec_decode/dynamic/utils.py`) read it: both ends are inclusive
/// and at least 1, `start_bs <= end_bs`, `K >= 0`; the ranges are sorted by
/// their start and must not overlap; the first must start at 1. A batch size
/// in a gap between two ranges gets the `K` of the range below it, and a
/// batch size above the last range gets the last range's `K` (up to the
/// engine's maximum batch size). Every `K` is capped at
/// `num_speculative_tokens` (which must be at least 1). vLLM expands the
/// list into one entry per batch size, so two adjacent ranges with the same
/// `K` mean exactly what their union means: [`BatchTable::to_vllm`] merges
/// them.
///
/// **TensorRT-LLM** (`draft_len_schedule` of the speculative config,
/// `tensorrt_llm/llmapi/llm_args.py`): a map from batch size to draft length,
/// `{"4": 4, "8": 2, "32": 1}` in JSON. The lookup
/// (`get_draft_len_for_batch_size` in
/// `tensorrt_llm/_torch/speculative/utils.py`) takes the first key at or
/// above the batch size (a `bisect_left` over the sorted keys), and `0` (no
/// speculation) above the largest key. So each key is the *last* batch size
/// of a range: the example drafts 4 at batch sizes 1-4, 2 at 5-8, 1 at 9-32
/// and nothing from 33 on. The config's validator
/// (`validate_draft_len_schedule_and_sort`) wants keys of at least 1,
/// values of at least 0, and the value at the smallest key equal to
/// `max_draft_len`, with no value above it: the smallest batch sizes must
/// draft the most. [`BatchTable::to_trtllm`] writes one key per run of
/// buckets with the same draft length (the last batch size of the run), which
/// every lookup reads the same way as one key per bucket, and returns an
/// error for a table that the validator would refuse.
///
/// Above the last bucket the two engines differ, and the table cannot make
/// them agree: vLLM keeps the last bucket's draft length, TensorRT-LLM stops
/// speculating. Make the last bucket end at the engine's maximum batch size
/// (`max_num_seqs`, `max_batch_size`) and the question does not arise.
///
/// # What is checked
///
/// The buckets must be given in order, start at batch size 1, each with
/// `start_bs <= end_bs`, each starting right after the one before (no
/// overlap, no gap: the engines fill a gap in opposite ways, vLLM from below
/// and TensorRT-LLM from above, and no data supports either), every
/// histogram with the same `K` (the engine has one), and every cost with
/// one entry per draft length `0..=K` (checked by
/// [`Advisor::recommend`]). Each failure is a [`BatchTableError`] that
/// names the bucket. A bucket whose histogram has no steps gets the prior's
/// advice: its [`Recommendation::num_spec_steps`] is 0.
///
/// ```
/// use specdec_metrics::{AcceptanceHistogram, Advisor, BatchBucket, BatchTable, StepCost};
///
/// // The same acceptance in every bucket: each draft accepted 4 times in 5.
/// let mut h = AcceptanceHistogram::new(4)?;
/// for (a, steps) in [(0, 200), (1, 160), (2, 128), (3, 102), (4, 410)] {
///     for _ in 0..steps {
///         h.observe(4, a)?;
///     }
/// }
/// // Drafts get dearer as the batch grows.
/// let buckets = [
///     BatchBucket::new(1, 8, h.clone(), StepCost::linear(1.0, 0.05)?),
///     BatchBucket::new(9, 64, h.clone(), StepCost::linear(1.0, 0.7)?),
///     BatchBucket::new(65, 256, h, StepCost::linear(1.0, 2.0)?),
/// ];
/// let table = BatchTable::recommend(&Advisor::default(), &buckets)?;
/// let k: Vec<usize> = table.entries().iter().map(|e| e.draft_len()).collect();
/// assert_eq!(k, [4, 1, 0]);
/// assert_eq!(table.to_vllm(), [[1, 8, 4], [9, 64, 1], [65, 256, 0]]);
/// assert_eq!(
///     serde_json::to_string(&table.to_trtllm()?)?,
///     r#"{"8":4,"64":1,"256":0}"#
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BatchTable {
    max_draft_len: usize,
    #[serde(rename = "buckets")]
    entries: Vec<BatchEntry>,
}

impl BatchTable {
    /// Checks the buckets (see "What is checked" above) and asks `advisor`
    /// for each bucket's draft length.
    ///
    /// # Errors
    ///
    /// [`BatchTableError`], naming the first bucket that is wrong: no
    /// buckets, a bucket whose start is above its end, a first bucket that
    /// does not start at 1, buckets out of order, overlapping or leaving a
    /// gap, a histogram whose `K` is not the first bucket's, a cost table
    /// without one cost per draft length `0..=K`.
    ///
    /// ```
    /// use specdec_metrics::{AcceptanceHistogram, Advisor, BatchBucket, BatchTable, BatchTableErrorKind, StepCost};
    /// let h = AcceptanceHistogram::new(3)?;
    /// let cost = StepCost::linear(1.0, 0.1)?;
    /// let buckets = [
    ///     BatchBucket::new(1, 4, h.clone(), cost.clone()),
    ///     BatchBucket::new(8, 16, h, cost), // 5..=7 missing
    /// ];
    /// let err = BatchTable::recommend(&Advisor::default(), &buckets).unwrap_err();
    /// assert_eq!(err.index(), Some(1));
    /// assert!(matches!(err.kind(), BatchTableErrorKind::Gap { previous } if previous.end_bs == 4));
    /// assert_eq!(
    ///     err.to_string(),
    ///     "bucket 2 (batch sizes 8-16) leaves batch sizes 5-7 without a bucket after bucket 1 (batch sizes 1-4); vLLM would give them the draft length of the bucket below, TensorRT-LLM that of the bucket above"
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn recommend(advisor: &Advisor, buckets: &[BatchBucket]) -> Result<Self, BatchTableError> {
        let first = buckets
            .first()
            .ok_or(BatchTableError::new(None, Kind::Empty))?;
        let max_draft_len = first.histogram.max_draft_len();
        let mut previous: Option<BucketSpan> = None;
        let mut entries = Vec::with_capacity(buckets.len());
        for (index, b) in buckets.iter().enumerate() {
            let span = BucketSpan {
                index,
                start_bs: b.start_bs,
                end_bs: b.end_bs,
            };
            let fail = |kind| Err(BatchTableError::new(Some(span), kind));
            if let Some(kind) = tiling_fault(span, previous) {
                return fail(kind);
            }
            let found = b.histogram.max_draft_len();
            if found != max_draft_len {
                return fail(Kind::MaxDraftLen {
                    found,
                    expected: max_draft_len,
                });
            }
            match advisor.recommend(&b.histogram, &b.cost) {
                Ok(recommendation) => entries.push(BatchEntry {
                    start_bs: b.start_bs,
                    end_bs: b.end_bs,
                    recommendation,
                }),
                Err(error) => return fail(Kind::Cost(error)),
            }
            previous = Some(span);
        }
        Ok(Self {
            max_draft_len,
            entries,
        })
    }

    /// The buckets' advice, in order of batch size.
    ///
    /// ```
    /// # use specdec_metrics::{AcceptanceHistogram, Advisor, BatchBucket, BatchTable, StepCost};
    /// # let h = AcceptanceHistogram::new(2)?;
    /// # let c = StepCost::linear(1.0, 0.1)?;
    /// let table = BatchTable::recommend(
    ///     &Advisor::default(),
    ///     &[BatchBucket::new(1, 4, h.clone(), c.clone()), BatchBucket::new(5, 9, h, c)],
    /// )?;
    /// assert_eq!(table.entries().len(), 2);
    /// assert_eq!(table.entries()[1].start_bs, 5);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn entries(&self) -> &[BatchEntry] {
        &self.entries
    }

    /// The maximum draft length `K` of every bucket's histogram.
    ///
    /// ```
    /// # use specdec_metrics::{AcceptanceHistogram, Advisor, BatchBucket, BatchTable, StepCost};
    /// let bucket = BatchBucket::new(1, 4, AcceptanceHistogram::new(5)?, StepCost::linear(1.0, 0.1)?);
    /// assert_eq!(BatchTable::recommend(&Advisor::default(), &[bucket])?.max_draft_len(), 5);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn max_draft_len(&self) -> usize {
        self.max_draft_len
    }

    /// The recommended draft length at `batch_size`: that of the bucket
    /// holding it; `None` for 0 and above the last bucket (where vLLM keeps
    /// the last bucket's draft length and TensorRT-LLM drafts nothing).
    ///
    /// ```
    /// # use specdec_metrics::{AcceptanceHistogram, Advisor, BatchBucket, BatchTable, StepCost};
    /// let mut h = AcceptanceHistogram::new(2)?;
    /// for _ in 0..100 {
    ///     h.observe(2, 2)?;
    /// }
    /// let table = BatchTable::recommend(
    ///     &Advisor::default(),
    ///     &[
    ///         BatchBucket::new(1, 4, h.clone(), StepCost::linear(1.0, 0.1)?),
    ///         BatchBucket::new(5, 8, h, StepCost::linear(1.0, 5.0)?),
    ///     ],
    /// )?;
    /// assert_eq!(table.draft_len_for(4), Some(2));
    /// assert_eq!(table.draft_len_for(5), Some(0));
    /// assert_eq!(table.draft_len_for(9), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn draft_len_for(&self, batch_size: usize) -> Option<usize> {
        self.entries
            .iter()
            .find(|e| e.start_bs <= batch_size && batch_size <= e.end_bs)
            .map(BatchEntry::draft_len)
    }

    /// Runs of adjacent buckets with the same draft length, as
    /// `(first start, last end, draft length)`.
    fn runs(&self) -> Vec<[usize; 3]> {
        let mut runs: Vec<[usize; 3]> = Vec::with_capacity(self.entries.len());
        for e in &self.entries {
            match runs.last_mut() {
                Some(run) if run[2] == e.draft_len() => run[1] = e.end_bs,
                _ => runs.push([e.start_bs, e.end_bs, e.draft_len()]),
            }
        }
        runs
    }

    /// vLLM's `num_speculative_tokens_per_batch_size`: `[start_bs, end_bs,
    /// K]` per run of adjacent buckets with the same draft length (vLLM
    /// reads adjacent ranges with one `K` as their union). Serialized with
    /// serde, the JSON list of lists vLLM reads.
    ///
    /// ```
    /// # use specdec_metrics::{AcceptanceHistogram, Advisor, BatchBucket, BatchTable, StepCost};
    /// let mut h = AcceptanceHistogram::new(2)?;
    /// for _ in 0..100 {
    ///     h.observe(2, 2)?;
    /// }
    /// let cheap = StepCost::linear(1.0, 0.1)?;
    /// let table = BatchTable::recommend(
    ///     &Advisor::default(),
    ///     &[
    ///         BatchBucket::new(1, 4, h.clone(), cheap.clone()),
    ///         BatchBucket::new(5, 8, h.clone(), cheap), // same K: merged
    ///         BatchBucket::new(9, 64, h, StepCost::linear(1.0, 5.0)?),
    ///     ],
    /// )?;
    /// let schedule = table.to_vllm();
    /// assert_eq!(schedule, [[1, 8, 2], [9, 64, 0]]);
    /// assert_eq!(serde_json::to_string(&schedule)?, "[[1,8,2],[9,64,0]]");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn to_vllm(&self) -> Vec<[usize; 3]> {
        self.runs()
    }

    /// The vLLM `speculative_config` keys for this table:
    /// `num_speculative_tokens`, the largest draft length of the table (at
    /// least 1, as vLLM requires; vLLM caps every scheduled `K` at it and
    /// sizes its buffers by it), and `num_speculative_tokens_per_batch_size`
    /// ([`to_vllm`](Self::to_vllm)).
    ///
    /// ```
    /// # use specdec_metrics::{AcceptanceHistogram, Advisor, BatchBucket, BatchTable, StepCost};
    /// let mut h = AcceptanceHistogram::new(2)?;
    /// for _ in 0..100 {
    ///     h.observe(2, 2)?;
    /// }
    /// let bucket = BatchBucket::new(1, 32, h, StepCost::linear(1.0, 0.1)?);
    /// let config = BatchTable::recommend(&Advisor::default(), &[bucket])?.vllm_config();
    /// assert_eq!(
    ///     serde_json::to_string(&config)?,
    ///     r#"{"num_speculative_tokens":2,"num_speculative_tokens_per_batch_size":[[1,32,2]]}"#
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn vllm_config(&self) -> VllmSchedule {
        let schedule = self.to_vllm();
        VllmSchedule {
            num_speculative_tokens: schedule.iter().map(|r| r[2]).max().unwrap_or(0).max(1),
            num_speculative_tokens_per_batch_size: schedule,
        }
    }

    /// TensorRT-LLM's `draft_len_schedule`: for each run of adjacent buckets
    /// with the same draft length, its last batch size mapped to the draft
    /// length, so that the first key at or above a batch size (TensorRT-LLM's
    /// lookup) is the end of that batch size's run. Serialized with serde,
    /// the JSON object (keys as strings) TensorRT-LLM reads. Above the last
    /// bucket TensorRT-LLM drafts nothing.
    ///
    /// # Errors
    ///
    /// - [`BatchTableErrorKind::TrtllmIncreasing`](crate::BatchTableErrorKind::TrtllmIncreasing): a bucket recommends more
    ///   drafts than the first bucket; TensorRT-LLM wants the value at the
    ///   smallest key to be `max_draft_len` and none above it.
    /// - [`BatchTableErrorKind::TrtllmNoSpeculation`](crate::BatchTableErrorKind::TrtllmNoSpeculation): every bucket recommends
    ///   0, which would make `max_draft_len` 0: run without speculative
    ///   decoding instead.
    ///
    /// ```
    /// # use specdec_metrics::{AcceptanceHistogram, Advisor, BatchBucket, BatchTable, BatchTableErrorKind, StepCost};
    /// let mut h = AcceptanceHistogram::new(2)?;
    /// for _ in 0..100 {
    ///     h.observe(2, 2)?;
    /// }
    /// let (cheap, dear) = (StepCost::linear(1.0, 0.1)?, StepCost::linear(1.0, 5.0)?);
    /// let falling = BatchTable::recommend(
    ///     &Advisor::default(),
    ///     &[BatchBucket::new(1, 4, h.clone(), cheap.clone()), BatchBucket::new(5, 8, h.clone(), dear.clone())],
    /// )?;
    /// assert_eq!(falling.to_trtllm()?, [(4, 2), (8, 0)].into());
    ///
    /// let rising = BatchTable::recommend(
    ///     &Advisor::default(),
    ///     &[BatchBucket::new(1, 4, h.clone(), dear), BatchBucket::new(5, 8, h, cheap)],
    /// )?;
    /// let err = rising.to_trtllm().unwrap_err();
    /// assert_eq!(err.index(), Some(1));
    /// assert!(matches!(err.kind(), BatchTableErrorKind::TrtllmIncreasing { draft_len: 2, .. }));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn to_trtllm(&self) -> Result<BTreeMap<usize, usize>, BatchTableError> {
        let runs = self.runs();
        // The table is never empty: `recommend` refuses no buckets.
        let first = self.entries[0].draft_len();
        if let Some((index, e)) = self
            .entries
            .iter()
            .enumerate()
            .find(|(_, e)| e.draft_len() > first)
        {
            let span = |index: usize, e: &BatchEntry| BucketSpan {
                index,
                start_bs: e.start_bs,
                end_bs: e.end_bs,
            };
            return Err(BatchTableError::new(
                Some(span(index, e)),
                Kind::TrtllmIncreasing {
                    first: span(0, &self.entries[0]),
                    first_draft_len: first,
                    draft_len: e.draft_len(),
                },
            ));
        }
        if first == 0 {
            return Err(BatchTableError::new(None, Kind::TrtllmNoSpeculation));
        }
        Ok(runs.iter().map(|r| (r[1], r[2])).collect())
    }

    /// The TensorRT-LLM speculative-config keys for this table:
    /// `max_draft_len` (the first bucket's draft length, as its validator
    /// requires) and `draft_len_schedule` ([`to_trtllm`](Self::to_trtllm)).
    ///
    /// # Errors
    ///
    /// As [`to_trtllm`](Self::to_trtllm).
    ///
    /// ```
    /// # use specdec_metrics::{AcceptanceHistogram, Advisor, BatchBucket, BatchTable, StepCost};
    /// let mut h = AcceptanceHistogram::new(3)?;
    /// for _ in 0..100 {
    ///     h.observe(3, 3)?;
    /// }
    /// let bucket = BatchBucket::new(1, 16, h, StepCost::linear(1.0, 0.1)?);
    /// let config = BatchTable::recommend(&Advisor::default(), &[bucket])?.trtllm_config()?;
    /// assert_eq!(
    ///     serde_json::to_string(&config)?,
    ///     r#"{"max_draft_len":3,"draft_len_schedule":{"16":3}}"#
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn trtllm_config(&self) -> Result<TrtllmSchedule, BatchTableError> {
        let draft_len_schedule = self.to_trtllm()?;
        Ok(TrtllmSchedule {
            max_draft_len: self.entries[0].draft_len(),
            draft_len_schedule,
        })
    }
}

/// The keys of vLLM's `speculative_config` that a [`BatchTable`] sets
/// ([`BatchTable::vllm_config`]); merge them into the config that names
/// the method and the draft model.
///
/// ```
/// use specdec_metrics::{AcceptanceHistogram, Advisor, BatchBucket, BatchTable, StepCost};
/// let mut h = AcceptanceHistogram::new(3)?;
/// for _ in 0..100 {
///     h.observe(3, 3)?;
/// }
/// let buckets = [
///     BatchBucket::new(1, 16, h.clone(), StepCost::linear(1.0, 0.1)?),
///     BatchBucket::new(17, 256, h, StepCost::linear(1.0, 9.0)?),
/// ];
/// let config = BatchTable::recommend(&Advisor::default(), &buckets)?.vllm_config();
/// assert_eq!(config.num_speculative_tokens, 3);
/// assert_eq!(config.num_speculative_tokens_per_batch_size, [[1, 16, 3], [17, 256, 0]]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct VllmSchedule {
    /// The largest draft length of the schedule, at least 1.
    pub num_speculative_tokens: usize,
    /// `[start_bs, end_bs, K]` per range, inclusive, from batch size 1.
    pub num_speculative_tokens_per_batch_size: Vec<[usize; 3]>,
}

/// The keys of TensorRT-LLM's speculative config that a [`BatchTable`] sets
/// ([`BatchTable::trtllm_config`]).
///
/// ```
/// use specdec_metrics::{AcceptanceHistogram, Advisor, BatchBucket, BatchTable, StepCost};
/// let mut h = AcceptanceHistogram::new(4)?;
/// for _ in 0..100 {
///     h.observe(4, 4)?;
/// }
/// let buckets = [
///     BatchBucket::new(1, 4, h.clone(), StepCost::linear(1.0, 0.1)?),
///     BatchBucket::new(5, 32, h, StepCost::linear(1.0, 9.0)?),
/// ];
/// let config = BatchTable::recommend(&Advisor::default(), &buckets)?.trtllm_config()?;
/// assert_eq!(config.max_draft_len, 4);
/// assert_eq!(config.draft_len_schedule, [(4, 4), (32, 0)].into());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct TrtllmSchedule {
    /// The draft length at the smallest batch sizes, the largest of the
    /// schedule.
    pub max_draft_len: usize,
    /// Last batch size of each range to its draft length.
    pub draft_len_schedule: BTreeMap<usize, usize>,
}
