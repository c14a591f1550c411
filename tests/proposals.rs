//! The proposal histogram of lookup drafters: the tracker against a
//! brute-force model of its definition, the recorder's opt-in, merge,
//! delta and the JSON report.

use proptest::prelude::*;
use specdec_metrics::{
    AcceptanceHistogram, HistogramCounter, MergeError, ObserveError, PROPOSAL_REPORT_KEYS,
    ProposalError, ProposalOutcome, ProposalSink, ProposalTracker, REPORT_KEYS, Recorder,
};

/// Every outcome with the number of tokens pushed when it was resolved,
/// and the aborted counts.
#[derive(Default, Debug)]
struct Log {
    tokens: u64,
    resolved: Vec<(ProposalOutcome, u64)>,
    aborted: Vec<usize>,
}

impl ProposalSink for Log {
    fn resolved(&mut self, outcome: ProposalOutcome) {
        self.resolved.push((outcome, self.tokens));
    }
    fn aborted(&mut self, count: usize) {
        self.aborted.push(count);
    }
}

/// One request: at each step a proposal (drafted `k` of it), then the
/// output tokens of the step.
#[derive(Clone, Debug)]
struct Step {
    proposal: Vec<u32>,
    drafted: usize,
    tokens: Vec<u32>,
}

/// What the definition says, from the whole output: for the proposal made
/// at position `p`, `m` is the common prefix of the proposal and
/// `output[p..]`; it is resolved by the token after the matched prefix
/// (a mismatch, output token `p + m`) or by the last of `L` matches (token
/// `p + L - 1`); otherwise by `finish`, with the `m` known.
fn model(steps: &[Step]) -> Vec<(ProposalOutcome, u64)> {
    let output: Vec<u32> = steps.iter().flat_map(|s| s.tokens.clone()).collect();
    let mut position = 0u64;
    let mut out = Vec::new();
    for step in steps {
        if !step.proposal.is_empty() {
            let p = position as usize;
            let m = step
                .proposal
                .iter()
                .zip(&output[p..])
                .take_while(|(a, b)| a == b)
                .count();
            let len = step.proposal.len();
            // The number of tokens pushed before the deciding one.
            let at = if m == len {
                (p + len - 1) as u64
            } else if p + m < output.len() {
                (p + m) as u64
            } else {
                output.len() as u64 // resolved by finish
            };
            out.push((
                ProposalOutcome {
                    position,
                    proposal_len: len,
                    drafted: step.drafted,
                    matched: m,
                },
                at,
            ));
        }
        position += step.tokens.len() as u64;
    }
    out
}

/// Runs `steps` through a tracker of `K = max`, checking the bound on
/// pending proposals as it goes; `finish` at the end.
fn run(max: usize, steps: &[Step]) -> Log {
    let mut tracker = ProposalTracker::new(max).unwrap();
    let mut log = Log::default();
    for step in steps {
        tracker.draft(&step.proposal, step.drafted).unwrap();
        assert!(tracker.pending() <= max, "{} pending", tracker.pending());
        for &t in &step.tokens {
            tracker.push_token(t, &mut log);
            log.tokens += 1;
        }
    }
    tracker.finish(&mut log);
    assert_eq!(tracker.pending(), 0);
    log
}

fn steps(max: usize) -> impl Strategy<Value = Vec<Step>> {
    // A two-letter alphabet, so proposals match often and runs are long.
    let step = (
        prop::collection::vec(0u32..2, 0..=max),
        0usize..=max,
        prop::collection::vec(0u32..2, 1..=max + 1),
    )
        .prop_map(|(proposal, k, tokens)| Step {
            drafted: k.min(proposal.len()),
            proposal,
            tokens,
        });
    prop::collection::vec(step, 0..24)
}

proptest! {
    /// The tracker resolves exactly the outcomes of the definition, each at
    /// the token that decides it, with at most `K` pending.
    #[test]
    fn the_tracker_resolves_what_the_definition_says((max, steps) in (1usize..=6).prop_flat_map(|max| (Just(max), steps(max)))) {
        let log = run(max, &steps);
        let mut got = log.resolved.clone();
        let mut want = model(&steps);
        got.sort_by_key(|(o, at)| (o.position, *at));
        want.sort_by_key(|(o, at)| (o.position, *at));
        prop_assert_eq!(got, want);
        prop_assert!(log.aborted.is_empty());
    }

    /// Under greedy verification the output is the target's continuation,
    /// so a step that drafted `k` of a proposal accepted `min(k, m)`: an
    /// engine whose verifier accepts the longest matching prefix gets
    /// `greedy_accepted` equal to its own accepted count.
    #[test]
    fn greedy_accepted_is_the_verifiers_count(target in prop::collection::vec(0u32..2, 1..40), proposals in prop::collection::vec((prop::collection::vec(0u32..2, 0..=4), 0usize..=4), 40)) {
        let mut tracker = ProposalTracker::new(4).unwrap();
        let mut log = Log::default();
        let mut accepted = Vec::new();
        let mut p = 0;
        let mut i = 0;
        while p < target.len() {
            let (proposal, k) = &proposals[i % proposals.len()];
            i += 1;
            let k = (*k).min(proposal.len());
            tracker.draft(proposal, k).unwrap();
            // Greedy: accept the drafts equal to the target's tokens, then
            // emit the target's next token (the bonus or the correction).
            let a = proposal[..k].iter().zip(&target[p..]).take_while(|(x, y)| x == y).count();
            if !proposal.is_empty() {
                accepted.push((p as u64, a));
            }
            let end = (p + a + 1).min(target.len());
            tracker.push_tokens(&target[p..end], &mut log);
            p = end;
        }
        tracker.finish(&mut log);
        let mut got: Vec<(u64, usize)> = log.resolved.iter().map(|(o, _)| (o.position, o.greedy_accepted())).collect();
        got.sort_unstable();
        prop_assert_eq!(got, accepted);
    }
}

#[test]
fn abort_counts_pending_outcomes_apart_and_empties_the_tracker() {
    let mut tracker = ProposalTracker::new(3).unwrap();
    let mut log = Log::default();
    tracker.draft(&[1, 2, 3], 1).unwrap();
    tracker.push_token(1, &mut log);
    tracker.draft(&[2, 9], 2).unwrap();
    tracker.push_token(2, &mut log); // first: 2 matched, second: 1 matched
    assert_eq!(tracker.pending(), 2);
    tracker.abort(&mut log);
    assert_eq!(log.aborted, [2]);
    assert!(log.resolved.is_empty(), "{:?}", log.resolved);
    assert_eq!((tracker.pending(), tracker.position()), (0, 0));
    // Nothing pending: no call at all.
    tracker.abort(&mut log);
    assert_eq!(log.aborted, [2]);
    // Reused for the next request: positions from 0 again.
    tracker.draft(&[5], 1).unwrap();
    tracker.push_token(5, &mut log);
    assert_eq!(
        log.resolved,
        [(
            ProposalOutcome {
                position: 0,
                proposal_len: 1,
                drafted: 1,
                matched: 1
            },
            0
        )]
    );
}

#[test]
fn the_tracker_refuses_what_it_cannot_track_and_stays_unchanged() {
    let mut tracker = ProposalTracker::new(2).unwrap();
    assert_eq!(
        tracker.draft(&[1, 2, 3], 1),
        Err(ProposalError::TooLong {
            proposal_len: 3,
            max_draft_len: 2
        })
    );
    assert_eq!(
        tracker.draft(&[1], 2),
        Err(ProposalError::DraftedExceedsProposal {
            drafted: 2,
            proposal_len: 1
        })
    );
    assert_eq!(tracker.pending(), 0);
    // The refused proposals did not take the position.
    tracker.draft(&[1, 2], 2).unwrap();
    assert_eq!(
        tracker.draft(&[], 0),
        Err(ProposalError::SamePosition { position: 0 })
    );
    let mut log = Log::default();
    tracker.push_token(1, &mut log);
    // An empty proposal takes the position but tracks nothing.
    tracker.draft(&[], 0).unwrap();
    assert_eq!(tracker.pending(), 1);
    assert_eq!(
        tracker.draft(&[2], 1),
        Err(ProposalError::SamePosition { position: 1 })
    );
    assert!(
        ProposalError::SamePosition { position: 1 }
            .to_string()
            .contains("position 1")
    );
}

#[test]
fn at_k_64_sixty_four_proposals_can_be_pending_at_once() {
    let mut tracker = ProposalTracker::new(64).unwrap();
    let mut log = Log::default();
    let zeros = [0u32; 64];
    for i in 0..64 {
        tracker.draft(&zeros, 64).unwrap();
        assert_eq!(tracker.pending(), i + 1);
        tracker.push_token(0, &mut log);
    }
    // The first proposal has matched all 64 and is resolved; the others are
    // still matching.
    assert_eq!(log.resolved.len(), 1);
    tracker.draft(&zeros, 64).unwrap();
    assert_eq!(tracker.pending(), 64);
    tracker.push_token(1, &mut log);
    assert_eq!(log.resolved.len(), 65);
    let matched: Vec<usize> = log.resolved[1..].iter().map(|(o, _)| o.matched).collect();
    let mut sorted = matched.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..64).collect::<Vec<_>>());
}

#[test]
fn generic_tokens_work_as_u32_ids_do() {
    let mut tracker: ProposalTracker<u64> = ProposalTracker::new(3).unwrap();
    let mut h = AcceptanceHistogram::with_proposals(3).unwrap();
    tracker.draft(&[1 << 40, 7], 1).unwrap();
    tracker.push_tokens(&[1 << 40, 8], &mut h);
    assert_eq!(h.proposal_row(2), Some(&[0, 1, 0][..]));
}

#[test]
fn a_recorder_without_the_option_counts_proposals_as_rejected() {
    let recorder = Recorder::new(4).unwrap();
    assert!(!recorder.records_proposals());
    let worker = recorder.worker();
    let mut tracker = ProposalTracker::new(4).unwrap();
    tracker.draft(&[1, 2], 2).unwrap();
    tracker.push_tokens(&[1, 2], &worker);
    tracker.draft(&[3], 1).unwrap();
    tracker.abort(&worker);
    assert_eq!(
        recorder.observe_aborted_proposals(5),
        Err(ObserveError::ProposalsNotRecorded)
    );
    let s = recorder.snapshot();
    assert!(!s.records_proposals());
    assert_eq!(s.num_rejected_observations(), 3);
    assert_eq!(
        (s.num_resolved_proposals(), s.num_aborted_proposals()),
        (0, 0)
    );
    // The report is exactly the one without proposals.
    let report = serde_json::to_value(&s).unwrap();
    assert_eq!(report.as_object().unwrap().len(), REPORT_KEYS.len());
}

#[test]
fn workers_and_stripes_add_up_in_the_snapshot() {
    let recorder = Recorder::builder(3)
        .states(2)
        .record_proposals()
        .build()
        .unwrap();
    std::thread::scope(|s| {
        for t in 0..3 {
            let recorder = &recorder;
            s.spawn(move || {
                let worker = recorder.worker();
                for len in 1..=3 {
                    for m in 0..=len {
                        worker.observe_proposal(len, m).unwrap();
                        recorder.observe_proposal(len, m).unwrap();
                    }
                }
                worker.observe_aborted_proposals(t).unwrap();
                recorder.observe_aborted_proposals(1).unwrap();
                // Ordinary steps land where they did.
                worker.observe(3, 1).unwrap();
                worker.observe_scheduled(3).unwrap();
            });
        }
    });
    let s = recorder.snapshot();
    for len in 1..=3 {
        assert_eq!(s.proposal_row(len).unwrap(), vec![6; len + 1]);
    }
    assert_eq!(s.num_resolved_proposals(), 6 * 9);
    assert_eq!(s.num_aborted_proposals(), 3 + 3);
    assert_eq!((s.count(3, 1), s.scheduled_steps_by_budget()[3]), (3, 3));
    assert_eq!(s.num_rejected_observations(), 0);
    assert!(
        recorder
            .snapshot_by_state()
            .iter()
            .all(|h| !h.records_proposals())
    );
    let err = recorder.observe_proposal(4, 0).unwrap_err();
    assert_eq!(
        err,
        ObserveError::ProposalOutOfRange {
            proposal_len: 4,
            matched: 0,
            max_draft_len: 3
        }
    );
    assert_eq!((err.drafted(), err.accepted()), (4, 0));
    assert_eq!(recorder.snapshot().num_rejected_observations(), 1);
}

fn with_proposals(outcomes: &[(usize, usize)], aborted: u64) -> AcceptanceHistogram {
    let mut h = AcceptanceHistogram::with_proposals(3).unwrap();
    for &(len, m) in outcomes {
        h.observe_proposal(len, m).unwrap();
    }
    h.observe_aborted_proposals(aborted).unwrap();
    h
}

#[test]
fn merge_and_delta_carry_the_proposal_histogram() {
    let mut a = with_proposals(&[(3, 1), (1, 1)], 2);
    let b = with_proposals(&[(3, 1), (2, 0)], 1);
    a.merge(&b).unwrap();
    assert_eq!(
        (
            a.proposal_count(3, 1),
            a.proposal_count(1, 1),
            a.proposal_count(2, 0)
        ),
        (2, 1, 1)
    );
    assert_eq!(a.num_aborted_proposals(), 3);
    let delta = a.delta_since(&b).unwrap();
    assert_eq!(delta, with_proposals(&[(3, 1), (1, 1)], 2));

    // A histogram without the part merges as zeros; the sum keeps it.
    let mut plain = AcceptanceHistogram::new(3).unwrap();
    plain.observe(2, 1).unwrap();
    let mut sum = plain.clone();
    sum.merge(&b).unwrap();
    assert!(sum.records_proposals());
    assert_eq!((sum.proposal_count(3, 1), sum.count(2, 1)), (1, 1));
    let mut other_way = b.clone();
    other_way.merge(&plain).unwrap();
    assert_eq!(other_way, sum);
    // Delta against an earlier snapshot without the part: all of it.
    assert_eq!(sum.delta_since(&plain).unwrap().proposal_count(3, 1), 1);
    // An earlier one with more is refused, naming the proposal counter.
    assert_eq!(
        plain.delta_since(&b),
        Err(MergeError::NotEarlier {
            counter: HistogramCounter::ProposalBucket {
                proposal_len: 2,
                matched: 0
            },
            earlier: 1,
            later: 0
        })
    );
    assert!(!plain.delta_since(&plain).unwrap().records_proposals());
    // Overflow leaves the histogram unchanged.
    let mut full = AcceptanceHistogram::with_proposals(3).unwrap();
    full.observe_aborted_proposals(u64::MAX).unwrap();
    let before = full.clone();
    assert_eq!(
        full.merge(&b),
        Err(MergeError::Overflow {
            counter: HistogramCounter::AbortedProposals
        })
    );
    assert_eq!(full, before);
}

#[test]
fn the_report_has_the_proposal_keys_only_when_recorded_and_reads_back() {
    let h = with_proposals(&[(3, 3), (3, 0), (1, 0)], 4);
    let text = serde_json::to_string(&h).unwrap();
    let at = |key: &str| text.find(&format!("\"{key}\":")).expect(key);
    let mut want: Vec<&str> = REPORT_KEYS.to_vec();
    want.extend(PROPOSAL_REPORT_KEYS);
    assert!(
        want.windows(2).all(|w| at(w[0]) < at(w[1])),
        "written in this order: {text}"
    );
    let report: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(report.as_object().unwrap().len(), want.len());
    assert_eq!(
        report["acceptance_by_proposal_length"],
        serde_json::json!({"1": [1, 0], "3": [1, 0, 0, 1]})
    );
    assert_eq!(report["num_aborted_proposals"], 4);
    let back: AcceptanceHistogram = serde_json::from_value(report).unwrap();
    assert_eq!(back, h);
    // Recorded but empty: `{}` and 0, still there.
    let empty = serde_json::to_value(AcceptanceHistogram::with_proposals(2).unwrap()).unwrap();
    assert_eq!(
        empty["acceptance_by_proposal_length"],
        serde_json::json!({})
    );
    let back: AcceptanceHistogram = serde_json::from_value(empty).unwrap();
    assert!(back.records_proposals() && back.is_empty());
}

#[test]
fn malformed_proposal_reports_are_rejected_with_a_message() {
    let good = serde_json::to_value(with_proposals(&[(2, 1)], 0)).unwrap();
    let cases: [(&str, serde_json::Value, &str); 8] = [
        (
            "acceptance_by_proposal_length",
            serde_json::json!({"0": [1]}),
            "proposal length 0, outside 1..=num_spec_tokens=3",
        ),
        (
            "acceptance_by_proposal_length",
            serde_json::json!({"4": [0, 0, 0, 0, 1]}),
            "proposal length 4, outside",
        ),
        (
            "acceptance_by_proposal_length",
            serde_json::json!({"2": [0, 1]}),
            "acceptance_by_proposal_length[\"2\"] has 2 counts, expected 3",
        ),
        (
            "acceptance_by_proposal_length",
            serde_json::json!({"02": [0, 1, 0]}),
            "not a proposal length",
        ),
        (
            "acceptance_by_proposal_length",
            serde_json::Value::Null,
            "invalid type: null",
        ),
        (
            "num_aborted_proposals",
            serde_json::Value::Null,
            "invalid type: null",
        ),
        (
            "num_aborted_proposals",
            serde_json::json!(-1),
            "invalid value",
        ),
        (
            "acceptance_by_proposal_length",
            serde_json::json!([[0, 1, 0]]),
            "a map from decimal proposal lengths to lists of counts",
        ),
    ];
    for (key, value, message) in cases {
        let mut report = good.clone();
        report[key] = value;
        let err = serde_json::from_value::<AcceptanceHistogram>(report).unwrap_err();
        assert!(err.to_string().contains(message), "{key}: {err}");
    }
    let text = r#"{"1": [1, 0], "1": [0, 1]}"#;
    let report = good.to_string().replace(r#"{"2":[0,1,0]}"#, text);
    let err = serde_json::from_str::<AcceptanceHistogram>(&report).unwrap_err();
    assert!(
        err.to_string().contains("proposal length 1 more than once"),
        "{err}"
    );
    for (missing, other) in [
        ("num_aborted_proposals", "acceptance_by_proposal_length"),
        ("acceptance_by_proposal_length", "num_aborted_proposals"),
    ] {
        let mut report = good.clone();
        report.as_object_mut().unwrap().remove(missing);
        assert!(report.get(other).is_some());
        let err = serde_json::from_value::<AcceptanceHistogram>(report).unwrap_err();
        assert!(
            err.to_string().contains(&format!("{missing} is missing")),
            "{err}"
        );
    }
}

#[test]
fn debug_shows_the_proposal_part_only_when_recorded() {
    let h = with_proposals(&[(2, 1)], 3);
    let text = format!("{h:?}");
    assert!(
        text.ends_with("proposals: Proposals { rows: {2: [0, 1, 0]}, aborted: 3 } }"),
        "{text}"
    );
    assert!(!format!("{:?}", AcceptanceHistogram::new(3).unwrap()).contains("proposals"));
    let recorder = Recorder::builder(2).record_proposals().build().unwrap();
    assert!(format!("{recorder:?}").ends_with(", records_proposals: true }"));
    let tracker: ProposalTracker = ProposalTracker::new(2).unwrap();
    assert_eq!(
        format!("{tracker:?}"),
        "ProposalTracker { max_draft_len: 2, pending: 0, position: 0, .. }"
    );
}

#[test]
fn a_histogram_without_the_part_rejects_and_counts_proposal_outcomes() {
    let mut h = AcceptanceHistogram::new(3).unwrap();
    assert_eq!(
        h.observe_aborted_proposals(5),
        Err(ObserveError::ProposalsNotRecorded)
    );
    assert_eq!(h.num_rejected_observations(), 1);
    assert_eq!(
        h.observe_proposal(2, 1),
        Err(ObserveError::ProposalsNotRecorded)
    );
    assert_eq!(h.num_rejected_observations(), 2);
    assert_eq!((h.proposal_row(2), h.proposal_count(2, 1)), (None, 0));
    assert_eq!(
        (h.num_resolved_proposals(), h.num_aborted_proposals()),
        (0, 0)
    );
    assert_eq!(h.observed_proposal_rows().count(), 0);
    assert!(!h.records_proposals());
    // With the part: out of the triangle is rejected the same way.
    let mut p = AcceptanceHistogram::with_proposals(3).unwrap();
    assert!(p.is_empty());
    p.observe_aborted_proposals(0).unwrap();
    assert!(p.is_empty());
    p.observe_aborted_proposals(2).unwrap();
    assert!(!p.is_empty());
    assert_eq!(
        p.observe_proposal(4, 0),
        Err(ObserveError::ProposalOutOfRange {
            proposal_len: 4,
            matched: 0,
            max_draft_len: 3
        })
    );
    assert_eq!(p.num_rejected_observations(), 1);
    assert_eq!(p.num_aborted_proposals(), 2);
}

#[test]
fn a_recorder_as_sink_records_on_its_stripes_and_outcomes_say_what_was_drafted() {
    let recorder = Recorder::builder(4).record_proposals().build().unwrap();
    let mut tracker = ProposalTracker::new(4).unwrap();
    assert_eq!(tracker.max_draft_len(), 4);
    let mut log = Log::default();
    tracker.draft(&[1, 2, 3], 1).unwrap();
    tracker.push_tokens(&[1, 2], &recorder);
    assert_eq!(tracker.position(), 2);
    tracker.draft(&[3, 4], 2).unwrap();
    tracker.push_token(3, &mut log); // the first is now 3 of 3: resolved
    assert_eq!(tracker.position(), 3);
    tracker.abort(&recorder); // the second is pending
    let s = recorder.snapshot();
    assert_eq!(
        (s.num_resolved_proposals(), s.num_aborted_proposals()),
        (0, 1)
    );
    let (full, _) = log.resolved[0];
    assert_eq!(
        full,
        ProposalOutcome {
            position: 0,
            proposal_len: 3,
            drafted: 1,
            matched: 3
        }
    );
    assert!(full.accepted_all_drafted());
    assert_eq!(full.greedy_accepted(), 1);
    tracker.draft(&[5, 6], 2).unwrap();
    tracker.push_tokens(&[5, 0], &recorder);
    assert_eq!(recorder.snapshot().proposal_count(2, 1), 1);
    let short = ProposalOutcome {
        drafted: 2,
        matched: 1,
        ..full
    };
    assert!(!short.accepted_all_drafted());
    assert_eq!(short.greedy_accepted(), 1);
    assert!(
        ProposalOutcome {
            drafted: 2,
            matched: 2,
            ..full
        }
        .accepted_all_drafted()
    );
}

#[test]
fn the_builder_option_is_what_the_recorder_reports() {
    let on = Recorder::builder(2).record_proposals().build().unwrap();
    let off = Recorder::builder(2).build().unwrap();
    assert!(on.records_proposals() && on.snapshot().records_proposals());
    assert!(!off.records_proposals() && !off.snapshot().records_proposals());
    assert_eq!(Recorder::builder(2).states(3).build().unwrap().states(), 3);
}

#[test]
fn proposal_errors_name_their_values() {
    let err = ObserveError::ProposalOutOfRange {
        proposal_len: 3,
        matched: 5,
        max_draft_len: 4,
    };
    assert_eq!((err.drafted(), err.accepted()), (3, 5));
    assert!(
        err.to_string().contains("(proposal_len=3, matched=5)"),
        "{err}"
    );
    let off = ObserveError::ProposalsNotRecorded;
    assert_eq!((off.drafted(), off.accepted()), (0, 0));
    assert!(off.to_string().contains("record_proposals"), "{off}");
    let bucket = HistogramCounter::ProposalBucket {
        proposal_len: 2,
        matched: 1,
    };
    assert_eq!(
        bucket.to_string(),
        "proposal bucket (proposal_len=2, matched=1)"
    );
    assert_eq!(
        HistogramCounter::AbortedProposals.to_string(),
        "num_aborted_proposals"
    );
    let too_long = ProposalError::TooLong {
        proposal_len: 9,
        max_draft_len: 8,
    };
    assert!(too_long.to_string().contains("9 tokens"), "{too_long}");
    let over = ProposalError::DraftedExceedsProposal {
        drafted: 3,
        proposal_len: 2,
    };
    assert_eq!(over.to_string(), "drafted 3 tokens of a proposal of 2");
}
