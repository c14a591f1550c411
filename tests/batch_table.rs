//! Batch-size tables: the draft length per bucket computed by hand, the
//! vLLM and TensorRT-LLM schedules checked by reimplementations of the
//! engines' own validation and lookup, and every input error.

use std::collections::BTreeMap;

use specdec_metrics::{
    AcceptanceHistogram, Advisor, BatchBucket, BatchTable, BatchTableError,
    BatchTableErrorKind as Kind, BucketSpan, CostError, StepCost,
};

/// A histogram of maximum draft length `max` from `(k, a, steps)` rows.
fn hist(max: usize, rows: &[(usize, usize, usize)]) -> AcceptanceHistogram {
    let mut h = AcceptanceHistogram::new(max).unwrap();
    for &(k, a, steps) in rows {
        for _ in 0..steps {
            h.observe(k, a).unwrap();
        }
    }
    h
}

/// Drafts of 2 accepted often: `(2,0) x2, (2,1) x2, (2,2) x4`. Under the
/// uniform prior, `h_1 ~ Beta(1 + 6, 1 + 2)`, mean 7/10, and `h_2 ~ Beta(1 +
/// 4, 1 + 2)`, mean 5/8: `E[a | 1] = 0.7`, `E[a | 2] = 0.7 + 0.7 * 0.625 =
/// 1.1375`; tokens per step 1, 1.7, 2.1375 for k = 0, 1, 2.
fn good() -> AcceptanceHistogram {
    hist(2, &[(2, 0, 2), (2, 1, 2), (2, 2, 4)])
}

/// Drafts of 2 accepted rarely: `(2,0) x8, (2,1) x1, (2,2) x1`: `h_1` mean
/// `(2 + 1) / (10 + 2) = 0.25`, `h_2` mean `(1 + 1) / (2 + 2) = 0.5`;
/// tokens per step 1, 1.25, 1.375.
fn poor() -> AcceptanceHistogram {
    hist(2, &[(2, 0, 8), (2, 1, 1), (2, 2, 1)])
}

fn linear(base: f64, per_token: f64) -> StepCost {
    StepCost::linear(base, per_token).unwrap()
}

fn table(buckets: &[BatchBucket]) -> BatchTable {
    BatchTable::recommend(&Advisor::default(), buckets).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

/// vLLM's reading of `num_speculative_tokens_per_batch_size`, reimplemented
/// from `vllm/v1/spec_decode/dynamic/utils.py`: the schedule is validated
/// (positive inclusive ranges, start <= end, K >= 0, sorted by start, no
/// overlap, first start 1) and expanded into a K per batch size `1..=max_bs`,
/// gaps and the tail taking the K of the range below, every K capped at
/// `num_speculative_tokens` (which must be at least 1).
fn vllm_lookup(schedule: &[[usize; 3]], num_spec: usize, max_bs: usize) -> Vec<usize> {
    assert!(num_spec > 0, "vLLM needs num_speculative_tokens > 0");
    assert!(!schedule.is_empty(), "vLLM refuses an empty schedule");
    let mut sorted = schedule.to_vec();
    sorted.sort_by_key(|r| r[0]);
    let mut previous_end = 0;
    for r in &sorted {
        assert!(r[0] > 0 && r[1] > 0, "vLLM: ranges must be positive");
        assert!(r[0] <= r[1], "vLLM: start must be <= end");
        assert!(r[0] > previous_end, "vLLM: ranges must not overlap");
        previous_end = r[1];
    }
    assert_eq!(sorted[0][0], 1, "vLLM: the first range must start at 1");
    // Batch sizes `from..to` (exclusive) take `k`, capped.
    let fill = |dense: &mut [usize], from: usize, to: usize, k: usize| {
        for slot in dense.iter_mut().take(to).skip(from) {
            *slot = num_spec.min(k);
        }
    };
    let mut dense = vec![0; max_bs + 1];
    let mut next = 1;
    let mut last: Option<usize> = None;
    for &[start, end, k] in &sorted {
        if let Some(l) = last {
            fill(&mut dense, next, start.min(max_bs + 1), l);
        }
        fill(&mut dense, start.max(next), end.min(max_bs) + 1, k);
        next = next.max(end + 1);
        last = Some(k);
        if next > max_bs {
            break;
        }
    }
    fill(&mut dense, next, max_bs + 1, last.unwrap());
    dense
}

/// TensorRT-LLM's config check of `draft_len_schedule`
/// (`validate_draft_len_schedule_and_sort` in `llm_args.py`): keys >= 1, the
/// value at the smallest key is `max_draft_len` and none is above it.
fn trtllm_validate(schedule: &BTreeMap<usize, usize>, max_draft_len: usize) {
    let (&smallest, &first) = schedule.iter().next().expect("a schedule");
    assert!(smallest >= 1, "TensorRT-LLM: keys must be >= 1");
    assert_eq!(
        first, max_draft_len,
        "TensorRT-LLM: schedule[smallest] must be max_draft_len"
    );
    assert!(
        schedule.values().all(|&v| v <= max_draft_len),
        "TensorRT-LLM: no value above max_draft_len"
    );
}

/// TensorRT-LLM's lookup (`get_draft_len_for_batch_size` in
/// `tensorrt_llm/_torch/speculative/utils.py`): the value of the first key
/// at or above the batch size (`bisect_left` over the sorted keys), 0 above
/// the largest key.
fn trtllm_lookup(schedule: &BTreeMap<usize, usize>, batch_size: usize) -> usize {
    let keys: Vec<usize> = schedule.keys().copied().collect();
    let idx = keys.partition_point(|&key| key < batch_size); // bisect_left
    keys.get(idx).map_or(0, |key| schedule[key])
}

/// Every batch size from 1 to 40 past the last bucket, through both
/// engines' lookups: inside the buckets each engine gives the bucket's draft
/// length; above them vLLM keeps the last bucket's and TensorRT-LLM gives 0.
fn check_engines_agree_with_table(t: &BatchTable) {
    let last = t.entries().last().unwrap();
    let max_bs = last.end_bs + 40;
    let vllm = t.vllm_config();
    let dense = vllm_lookup(
        &vllm.num_speculative_tokens_per_batch_size,
        vllm.num_speculative_tokens,
        max_bs,
    );
    let trt = t.trtllm_config().unwrap();
    trtllm_validate(&trt.draft_len_schedule, trt.max_draft_len);
    assert_eq!(dense.len(), max_bs + 1);
    for (bs, &vllm_k) in dense.iter().enumerate().skip(1) {
        match t.draft_len_for(bs) {
            Some(k) => {
                assert_eq!(vllm_k, k, "vLLM at batch size {bs}");
                assert_eq!(
                    trtllm_lookup(&trt.draft_len_schedule, bs),
                    k,
                    "TensorRT-LLM at {bs}"
                );
            }
            None => {
                assert!(bs > last.end_bs);
                assert_eq!(vllm_k, last.draft_len(), "vLLM above the table at {bs}");
                assert_eq!(
                    trtllm_lookup(&trt.draft_len_schedule, bs),
                    0,
                    "TensorRT-LLM above at {bs}"
                );
            }
        }
    }
}

/// The reimplementations against the engines' own examples: vLLM's
/// regression test of `build_dynamic_sd_schedule_lookup` (schedule
/// `[(1, 16, 3), (32, 128, 2), (256, 256, 0)]`, 256 batch sizes, K = 3) and
/// the `draft_len_schedule` example of TensorRT-LLM's docs (`{4: 4, 8: 2,
/// 32: 1}`: 4 at 1-4, 2 at 5-8, 1 at 9-32, 0 from 33).
#[test]
fn the_engine_lookups_match_the_engines_own_examples() {
    let dense = vllm_lookup(&[[1, 16, 3], [32, 128, 2], [256, 256, 0]], 3, 256);
    for (bs, k) in [
        (1, 3),
        (16, 3),
        (17, 3),
        (31, 3),
        (32, 2),
        (128, 2),
        (129, 2),
        (255, 2),
        (256, 0),
    ] {
        assert_eq!(dense[bs], k, "vLLM at {bs}");
    }
    // Capped at num_speculative_tokens.
    assert_eq!(vllm_lookup(&[[1, 4, 5]], 2, 4)[1..], [2, 2, 2, 2]);
    let schedule = BTreeMap::from([(4, 4), (8, 2), (32, 1)]);
    trtllm_validate(&schedule, 4);
    for (bs, k) in [
        (1, 4),
        (4, 4),
        (5, 2),
        (8, 2),
        (9, 1),
        (32, 1),
        (33, 0),
        (1000, 0),
    ] {
        assert_eq!(trtllm_lookup(&schedule, bs), k, "TensorRT-LLM at {bs}");
    }
}

#[test]
fn costs_rising_with_the_batch_give_falling_draft_lengths_computed_by_hand() {
    // Goodput g(k) = tokens(k) / cost(k) with tokens 1, 1.7, 2.1375:
    // 1-4, cost 1 + 0.1 k: 1, 1.545, 1.781 -> k = 2 (speedup 1.78125);
    // 5-8, costs 1, 1.5, 1.9: 1, 1.133, 1.125 -> k = 1 (speedup 1.7/1.5);
    // 9-16 and 17-32, cost 1 + 0.8 k: 1, 0.944, 0.822 -> k = 0.
    let t = table(&[
        BatchBucket::new(1, 4, good(), linear(1.0, 0.1)),
        BatchBucket::new(5, 8, good(), StepCost::table(vec![1.0, 1.5, 1.9]).unwrap()),
        BatchBucket::new(9, 16, good(), linear(1.0, 0.8)),
        BatchBucket::new(17, 32, good(), linear(1.0, 0.8)),
    ]);
    let k: Vec<usize> = t.entries().iter().map(|e| e.draft_len()).collect();
    assert_eq!(k, [2, 1, 0, 0]);
    let speedups: Vec<f64> = t
        .entries()
        .iter()
        .map(|e| e.recommendation.expected_speedup)
        .collect();
    assert!(close(speedups[0], 2.1375 / 1.2), "{speedups:?}");
    assert!(close(speedups[1], 1.7 / 1.5), "{speedups:?}");
    assert!(
        close(speedups[2], 1.0) && close(speedups[3], 1.0),
        "{speedups:?}"
    );
    assert_eq!(t.max_draft_len(), 2);

    // vLLM: the two k = 0 buckets are one range; K is the largest draft length.
    assert_eq!(t.to_vllm(), [[1, 4, 2], [5, 8, 1], [9, 32, 0]]);
    assert_eq!(t.vllm_config().num_speculative_tokens, 2);
    assert_eq!(
        serde_json::to_string(&t.vllm_config()).unwrap(),
        r#"{"num_speculative_tokens":2,"num_speculative_tokens_per_batch_size":[[1,4,2],[5,8,1],[9,32,0]]}"#
    );
    // TensorRT-LLM: one key per run, its last batch size.
    assert_eq!(
        t.to_trtllm().unwrap(),
        BTreeMap::from([(4, 2), (8, 1), (32, 0)])
    );
    assert_eq!(
        serde_json::to_string(&t.trtllm_config().unwrap()).unwrap(),
        r#"{"max_draft_len":2,"draft_len_schedule":{"4":2,"8":1,"32":0}}"#
    );
    check_engines_agree_with_table(&t);
}

#[test]
fn poor_acceptance_does_not_speculate_where_good_acceptance_does_at_the_same_cost() {
    // Cost 1 + 0.3 k. Good: 1, 1.7/1.3 = 1.308, 2.1375/1.6 = 1.336 -> 2.
    // Poor: 1, 1.25/1.3 = 0.962, 1.375/1.6 = 0.859 -> 0.
    let cost = linear(1.0, 0.3);
    let t = table(&[
        BatchBucket::new(1, 1, good(), cost.clone()),
        BatchBucket::new(2, 3, poor(), cost.clone()),
        BatchBucket::new(4, 10, good(), cost),
    ]);
    let k: Vec<usize> = t.entries().iter().map(|e| e.draft_len()).collect();
    assert_eq!(k, [2, 0, 2]);
    assert!(close(
        t.entries()[0].recommendation.expected_speedup,
        2.1375 / 1.6
    ));
    let poor_k1 = &t.entries()[1].recommendation.candidates[1];
    assert!(close(poor_k1.expected_accepted, 0.25) && close(poor_k1.goodput, 1.25 / 1.3));
    // Not monotone, but the first bucket drafts the most: both engines can
    // say it, and no run is merged.
    assert_eq!(t.to_vllm(), [[1, 1, 2], [2, 3, 0], [4, 10, 2]]);
    assert_eq!(
        t.to_trtllm().unwrap(),
        BTreeMap::from([(1, 2), (3, 0), (10, 2)])
    );
    check_engines_agree_with_table(&t);
}

#[test]
fn one_bucket_and_single_batch_size_buckets() {
    let t = table(&[BatchBucket::new(1, 1, good(), linear(1.0, 0.1))]);
    assert_eq!(t.to_vllm(), [[1, 1, 2]]);
    assert_eq!(t.to_trtllm().unwrap(), BTreeMap::from([(1, 2)]));
    check_engines_agree_with_table(&t);
    assert_eq!(t.draft_len_for(0), None);
    assert_eq!(t.draft_len_for(1), Some(2));
    assert_eq!(t.draft_len_for(2), None);
}

#[test]
fn every_table_reads_the_same_in_both_engines() {
    // Pseudo-random tilings of 1..=N with per-bucket costs that make the
    // draft lengths vary; the first bucket is always the cheapest, so that
    // TensorRT-LLM can hold the table.
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let mut seen_merges = 0;
    for _ in 0..200 {
        let buckets_n = 1 + next(6) as usize;
        let mut buckets = Vec::new();
        let mut start = 1;
        for i in 0..buckets_n {
            let end = start + next(5) as usize;
            let per_token = if i == 0 {
                0.05
            } else {
                [0.05, 0.25, 0.8][next(3) as usize]
            };
            let h = if next(4) == 0 { poor() } else { good() };
            let h = if i == 0 { good() } else { h };
            buckets.push(BatchBucket::new(start, end, h, linear(1.0, per_token)));
            start = end + 1;
        }
        let t = table(&buckets);
        for (b, e) in buckets.iter().zip(t.entries()) {
            assert_eq!((e.start_bs, e.end_bs), (b.start_bs, b.end_bs));
            assert_eq!(
                e.recommendation,
                Advisor::default().recommend(&b.histogram, &b.cost).unwrap()
            );
        }
        // Adjacent ranges never share a draft length, and they tile 1..=end.
        let vllm = t.to_vllm();
        for w in vllm.windows(2) {
            assert_ne!(w[0][2], w[1][2]);
            assert_eq!(w[0][1] + 1, w[1][0]);
        }
        assert_eq!(vllm.last().unwrap()[1], buckets.last().unwrap().end_bs);
        seen_merges += t.entries().len() - vllm.len();
        assert_eq!(t.to_trtllm().unwrap().len(), vllm.len());
        check_engines_agree_with_table(&t);
    }
    assert!(seen_merges > 50, "{seen_merges} merges");
}

#[test]
fn the_table_serializes_with_every_recommendation() {
    let buckets = [
        BatchBucket::new(1, 4, good(), linear(1.0, 0.1)),
        BatchBucket::new(5, 8, poor(), linear(1.0, 0.3)),
    ];
    let t = table(&buckets);
    let json = serde_json::to_value(&t).unwrap();
    assert_eq!(json["max_draft_len"], 2);
    let shown = json["buckets"].as_array().unwrap();
    assert_eq!(shown.len(), 2);
    for (b, s) in buckets.iter().zip(shown) {
        assert_eq!(s["start_bs"], b.start_bs);
        assert_eq!(s["end_bs"], b.end_bs);
        let expected = Advisor::default().recommend(&b.histogram, &b.cost).unwrap();
        assert_eq!(
            s["recommendation"],
            serde_json::to_value(&expected).unwrap()
        );
    }
}

#[test]
fn the_advisors_prior_is_used_in_every_bucket() {
    // An empty bucket leans on the prior alone: with Beta(1, 1) every rate
    // is 1/2 (tokens 1, 1.5, 1.75), with Beta(9, 1) 0.9 (1, 1.9, 2.71).
    // Cost 1 + 0.6 k: 1, 0.9375, 0.795 -> 0; 1, 1.1875, 1.232 -> 2.
    let buckets = [BatchBucket::new(
        1,
        8,
        AcceptanceHistogram::new(2).unwrap(),
        linear(1.0, 0.6),
    )];
    let uniform = BatchTable::recommend(&Advisor::default(), &buckets).unwrap();
    assert_eq!(uniform.entries()[0].draft_len(), 0);
    assert_eq!(uniform.entries()[0].recommendation.num_spec_steps, 0);
    let optimistic = Advisor::default().with_prior(9.0, 1.0).unwrap();
    let t = BatchTable::recommend(&optimistic, &buckets).unwrap();
    assert_eq!(t.entries()[0].draft_len(), 2);
}

// ---------------------------------------------------------------------------
// Errors

fn error(buckets: &[BatchBucket]) -> BatchTableError {
    BatchTable::recommend(&Advisor::default(), buckets).unwrap_err()
}

/// The span of bucket `index`, batch sizes `start_bs..=end_bs`.
fn span(index: usize, start_bs: usize, end_bs: usize) -> Option<BucketSpan> {
    Some(BucketSpan {
        index,
        start_bs,
        end_bs,
    })
}

fn b(start: usize, end: usize) -> BatchBucket {
    BatchBucket::new(start, end, good(), linear(1.0, 0.1))
}

#[test]
fn no_buckets_is_an_error() {
    let e = error(&[]);
    assert_eq!((e.bucket(), e.kind()), (None, &Kind::Empty));
    assert_eq!(e.index(), None);
}

#[test]
fn a_bucket_starting_above_its_end_is_named() {
    let e = error(&[b(1, 4), b(8, 5)]);
    assert_eq!(
        (e.bucket(), e.kind()),
        (span(1, 8, 5), &Kind::StartAfterEnd)
    );
    assert_eq!(
        e.to_string(),
        "bucket 2 (batch sizes 8-5) starts above its end"
    );
    assert_eq!(e.index(), Some(1));
}

#[test]
fn the_first_bucket_must_start_at_one() {
    for start in [0, 2] {
        let e = error(&[b(start, 4), b(5, 8)]);
        assert_eq!(
            (e.bucket(), e.kind()),
            (span(0, start, 4), &Kind::FirstNotOne)
        );
        assert_eq!(e.index(), Some(0));
        assert_eq!(
            e.to_string(),
            format!(
                "bucket 1 (batch sizes {start}-4) does not start at batch size 1: the buckets must cover every batch size from 1"
            )
        );
    }
}

#[test]
fn unsorted_overlapping_and_gapped_buckets_are_named() {
    let e = error(&[b(1, 4), b(5, 8), b(2, 3)]);
    assert_eq!(
        (e.bucket(), e.kind()),
        (
            span(2, 2, 3),
            &Kind::Unsorted {
                previous: span(1, 5, 8).unwrap()
            }
        )
    );
    assert_eq!(
        e.to_string(),
        "bucket 3 (batch sizes 2-3) starts below bucket 2 (batch sizes 5-8): give the buckets in order of batch size"
    );
    // Starting at the previous end overlaps by one batch size; starting at
    // the previous start (sorted, not below it) overlaps too.
    for start in [4, 1] {
        let e = error(&[b(1, 4), b(start, 8)]);
        assert_eq!(
            (e.bucket(), e.kind()),
            (
                span(1, start, 8),
                &Kind::Overlap {
                    previous: span(0, 1, 4).unwrap()
                }
            )
        );
        assert_eq!(
            e.to_string(),
            format!(
                "bucket 2 (batch sizes {start}-8) overlaps bucket 1 (batch sizes 1-4): each batch size belongs to one bucket"
            )
        );
    }
    let e = error(&[b(1, 4), b(6, 8)]);
    assert_eq!(
        (e.bucket(), e.kind()),
        (
            span(1, 6, 8),
            &Kind::Gap {
                previous: span(0, 1, 4).unwrap()
            }
        )
    );
    assert_eq!(
        e.to_string(),
        "bucket 2 (batch sizes 6-8) leaves batch size 5 without a bucket after bucket 1 (batch sizes 1-4); vLLM would give them the draft length of the bucket below, TensorRT-LLM that of the bucket above"
    );
    let e = error(&[b(1, 4), b(5, 8), b(12, 16)]);
    assert!(
        e.to_string()
            .contains("leaves batch sizes 9-11 without a bucket"),
        "{e}"
    );
    assert_eq!(e.index(), Some(2));
    // Right after the previous end is no gap.
    assert!(BatchTable::recommend(&Advisor::default(), &[b(1, 4), b(5, 5), b(6, 6)]).is_ok());
}

#[test]
fn histograms_of_another_k_and_costs_that_do_not_fit_k_are_named() {
    let other = BatchBucket::new(5, 8, hist(3, &[(3, 1, 1)]), linear(1.0, 0.1));
    let e = error(&[b(1, 4), other]);
    assert_eq!(
        (e.bucket(), e.kind()),
        (
            span(1, 5, 8),
            &Kind::MaxDraftLen {
                found: 3,
                expected: 2
            }
        )
    );
    assert_eq!(
        e.to_string(),
        "bucket 2 (batch sizes 5-8): its histogram's num_spec_tokens (K) is 3 but the first bucket's is 2; every bucket must have the engine's K"
    );
    for costs in [vec![1.0, 1.1], vec![1.0, 1.1, 1.2, 1.3]] {
        let len = costs.len();
        let bad = BatchBucket::new(5, 8, good(), StepCost::table(costs).unwrap());
        let e = error(&[b(1, 4), bad]);
        assert_eq!(
            (e.bucket(), e.kind()),
            (
                span(1, 5, 8),
                &Kind::Cost(CostError::TableLength {
                    max_draft_len: 2,
                    found: len
                })
            )
        );
        assert_eq!(
            e.to_string(),
            format!(
                "bucket 2 (batch sizes 5-8): the step cost table has {len} entries but max_draft_len 2 needs 3 (one per draft length 0..=2)"
            )
        );
    }
}

#[test]
fn tables_tensorrt_llm_cannot_hold_are_errors_and_vllm_still_reads_them() {
    // The first bucket (poor acceptance) drafts 0, the second 2.
    let cost = linear(1.0, 0.3);
    let t = table(&[
        BatchBucket::new(1, 4, poor(), cost.clone()),
        BatchBucket::new(5, 8, good(), cost.clone()),
    ]);
    let e = t.to_trtllm().unwrap_err();
    assert_eq!(
        (e.bucket(), e.kind()),
        (
            span(1, 5, 8),
            &Kind::TrtllmIncreasing {
                first: span(0, 1, 4).unwrap(),
                first_draft_len: 0,
                draft_len: 2
            }
        )
    );
    assert_eq!(
        e.to_string(),
        "bucket 2 (batch sizes 5-8) recommends draft length 2, more than the 0 of bucket 1 (batch sizes 1-4): TensorRT-LLM's draft_len_schedule needs its value at the smallest batch size to be max_draft_len and no value above it"
    );
    assert_eq!(t.trtllm_config().unwrap_err(), e);
    assert_eq!(t.to_vllm(), [[1, 4, 0], [5, 8, 2]]);
    let dense = vllm_lookup(&t.to_vllm(), t.vllm_config().num_speculative_tokens, 12);
    assert_eq!(dense[1..], [0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2]);

    // Equal to the first bucket's is fine.
    let t = table(&[
        BatchBucket::new(1, 4, good(), cost.clone()),
        BatchBucket::new(5, 8, poor(), cost.clone()),
        BatchBucket::new(9, 9, good(), cost.clone()),
    ]);
    assert_eq!(
        t.to_trtllm().unwrap(),
        BTreeMap::from([(4, 2), (8, 0), (9, 2)])
    );

    // Nothing speculates: vLLM still needs num_speculative_tokens >= 1.
    let t = table(&[
        BatchBucket::new(1, 4, poor(), cost.clone()),
        BatchBucket::new(5, 8, poor(), cost),
    ]);
    let e: BatchTableError = t.to_trtllm().unwrap_err();
    assert_eq!((e.bucket(), e.kind()), (None, &Kind::TrtllmNoSpeculation));
    assert_eq!(t.trtllm_config().unwrap_err(), e);
    assert_eq!(t.to_vllm(), [[1, 8, 0]]);
    assert_eq!(t.vllm_config().num_speculative_tokens, 1);
    assert_eq!(e.index(), None);
    assert!(e.to_string().contains("run without speculative decoding"));
}
