//! The series of the counter families (the nine of `METRIC_FAMILIES`, then
//! the two proposal families), derived from one histogram:
//! which series each family has (its own labels), in which order, and the
//! value of each. Every exporter walks the families through [`series`], so
//! the `prometheus-client` collector, the `metrics` publisher, the
//! `prometheus` crate's collector and the OpenTelemetry exporter cannot
//! disagree on what a family holds: every bucket of the triangle, every
//! position and every scheduled budget, zero or not. A proposal family has
//! every bucket of the proposal triangle when the histogram records
//! proposals, and no series at all when it does not: exporters skip a
//! family without series.

use core::iter::Enumerate;

use super::names::{
    ABORTED_PROPOSALS, ACCEPTED_PER_POS, BY_DRAFT_LENGTH, BY_PROPOSAL_LENGTH,
    DRAFT_TOKENS_PER_POS, FAMILY_LABELS, NUM_ACCEPTED_TOKENS, NUM_DRAFT_TOKENS, NUM_DRAFTS,
    PROPOSAL_FAMILY_LABELS, REJECTED_OBSERVATIONS, SCHEDULED_STEPS, UNDRAFTED_STEPS,
};
use crate::AcceptanceHistogram;
#[cfg(any(feature = "prometheus", feature = "tikv-prometheus"))]
use crate::Recorder;

/// What a collector encodes at each scrape or gather.
#[cfg(any(feature = "prometheus", feature = "tikv-prometheus"))]
#[derive(Clone, Debug)]
pub(crate) enum Source {
    /// A live recorder: one snapshot per scrape or gather.
    Live(Recorder),
    /// A fixed histogram (a report read back, a merge of replicas).
    Fixed(AcceptanceHistogram),
}

#[cfg(any(feature = "prometheus", feature = "tikv-prometheus"))]
impl Source {
    /// A fresh snapshot of the recorder, or the fixed histogram.
    pub(crate) fn snapshot(&self) -> AcceptanceHistogram {
        match self {
            Source::Live(recorder) => recorder.snapshot(),
            Source::Fixed(histogram) => histogram.clone(),
        }
    }
}

/// The labels a family sets on one series, after the constant labels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Own {
    /// A family of one unlabelled series.
    None,
    /// `position` (counted from 0).
    Position(usize),
    /// `(draft_length, accepted)`.
    Bucket(usize, usize),
    /// A scheduled budget, labelled `num_spec_tokens` as in vLLM.
    Budget(usize),
    /// `(proposal_length, matched)`: a bucket of the proposal triangle.
    Proposal(usize, usize),
}

impl Own {
    /// The family's own labels of this series, name and value, in the
    /// order they are written.
    pub(crate) fn labels(self) -> impl Iterator<Item = (&'static str, usize)> {
        let [position, draft_length, accepted, num_spec_tokens] = FAMILY_LABELS;
        let [proposal_length, matched] = PROPOSAL_FAMILY_LABELS;
        let (labels, n) = match self {
            Self::None => ([("", 0); 2], 0),
            Self::Position(i) => ([(position, i), ("", 0)], 1),
            Self::Bucket(k, a) => ([(draft_length, k), (accepted, a)], 2),
            Self::Budget(b) => ([(num_spec_tokens, b), ("", 0)], 1),
            Self::Proposal(l, m) => ([(proposal_length, l), (matched, m)], 2),
        };
        labels.into_iter().take(n)
    }
}

/// The series of one family of one histogram: `(own labels, value)`, in
/// the order both exporters write them.
pub(crate) struct Series<'h>(Inner<'h>);

enum Inner<'h> {
    Scalar(Option<u64>),
    Positions(Enumerate<std::vec::IntoIter<u64>>),
    /// The next bucket `(k, a)` of the triangle, row by row.
    Buckets {
        h: &'h AcceptanceHistogram,
        k: usize,
        a: usize,
    },
    Budgets(Enumerate<core::slice::Iter<'h, u64>>),
    /// The next bucket `(L, m)` of the proposal triangle, row by row; none
    /// when the histogram does not record proposals.
    Proposals {
        h: &'h AcceptanceHistogram,
        len: usize,
        m: usize,
    },
}

/// The series of family `family` (an index into
/// [`FAMILIES`](super::names::FAMILIES)) of `h`: one for an
/// unlabelled family, `K` per-position series from position 0, the
/// `(K + 1)(K + 2) / 2` buckets by draft length then accepted, the `K + 1`
/// scheduled budgets from 0; for the proposal families, when `h` records
/// proposals, the `K (K + 3) / 2` buckets by proposal length then matched
/// and the aborted count, and nothing when it does not.
///
/// # Panics
///
/// If `family` is not a family index (a bug of this crate).
pub(crate) fn series(h: &AcceptanceHistogram, family: usize) -> Series<'_> {
    Series(match family {
        NUM_DRAFTS => Inner::Scalar(Some(h.num_spec_steps())),
        NUM_DRAFT_TOKENS => Inner::Scalar(Some(h.num_draft_tokens())),
        NUM_ACCEPTED_TOKENS => Inner::Scalar(Some(h.num_accepted_draft_tokens())),
        ACCEPTED_PER_POS => {
            Inner::Positions(h.num_accepted_tokens_per_pos().into_iter().enumerate())
        }
        DRAFT_TOKENS_PER_POS => {
            Inner::Positions(h.num_draft_tokens_per_pos().into_iter().enumerate())
        }
        BY_DRAFT_LENGTH => Inner::Buckets { h, k: 0, a: 0 },
        UNDRAFTED_STEPS => Inner::Scalar(Some(h.num_undrafted_steps())),
        REJECTED_OBSERVATIONS => Inner::Scalar(Some(h.num_rejected_observations())),
        SCHEDULED_STEPS => Inner::Budgets(h.scheduled_steps_by_budget().iter().enumerate()),
        BY_PROPOSAL_LENGTH => Inner::Proposals { h, len: 1, m: 0 },
        ABORTED_PROPOSALS => {
            Inner::Scalar(h.records_proposals().then(|| h.num_aborted_proposals()))
        }
        _ => unreachable!("no counter family {family}"),
    })
}

/// The names of the labels family `family` sets on its series, after the
/// constant labels (none for an unlabelled family): the labels of its
/// first series, so of all its series.
#[cfg(any(feature = "tikv-prometheus", test))]
pub(crate) fn own_label_names(family: usize) -> impl Iterator<Item = &'static str> {
    let shape = AcceptanceHistogram::with_proposals(1).expect("1 is a valid maximum draft length");
    let (own, _) = series(&shape, family)
        .next()
        .expect("every family has a series at K = 1");
    own.labels().map(|(name, _)| name)
}

impl Iterator for Series<'_> {
    type Item = (Own, u64);

    fn next(&mut self) -> Option<(Own, u64)> {
        match &mut self.0 {
            Inner::Scalar(value) => value.take().map(|v| (Own::None, v)),
            Inner::Positions(values) => values.next().map(|(i, v)| (Own::Position(i), v)),
            Inner::Buckets { h, k, a } => {
                if *k > h.max_draft_len() {
                    return None;
                }
                let item = (Own::Bucket(*k, *a), h.count(*k, *a));
                if a == k {
                    (*k, *a) = (*k + 1, 0);
                } else {
                    *a += 1;
                }
                Some(item)
            }
            Inner::Budgets(values) => values.next().map(|(b, &v)| (Own::Budget(b), v)),
            Inner::Proposals { h, len, m } => {
                if *len > h.max_draft_len() || !h.records_proposals() {
                    return None;
                }
                let item = (Own::Proposal(*len, *m), h.proposal_count(*len, *m));
                if m == len {
                    (*len, *m) = (*len + 1, 0);
                } else {
                    *m += 1;
                }
                Some(item)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::names::{FAMILIES, METRIC_FAMILIES};

    fn histogram() -> AcceptanceHistogram {
        let mut h = AcceptanceHistogram::new(2).unwrap();
        for (k, a) in [(2, 1), (1, 1), (0, 0), (2, 2), (2, 2)] {
            h.observe(k, a).unwrap();
        }
        h.observe_undrafted();
        assert!(h.observe(1, 2).is_err());
        for b in [2, 2, 0] {
            h.observe_scheduled(b).unwrap();
        }
        h
    }

    #[test]
    fn every_family_lists_its_series_in_export_order() {
        use Own::{Bucket, Budget, None, Position};
        let h = histogram();
        let all: Vec<Vec<(Own, u64)>> = (0..METRIC_FAMILIES.len())
            .map(|f| series(&h, f).collect())
            .collect();
        assert_eq!(
            all,
            vec![
                vec![(None, 5)],
                vec![(None, 7)],
                vec![(None, 6)],
                vec![(Position(0), 4), (Position(1), 2)],
                vec![(Position(0), 4), (Position(1), 3)],
                vec![
                    (Bucket(0, 0), 1),
                    (Bucket(1, 0), 0),
                    (Bucket(1, 1), 1),
                    (Bucket(2, 0), 0),
                    (Bucket(2, 1), 1),
                    (Bucket(2, 2), 2),
                ],
                vec![(None, 1)],
                vec![(None, 1)],
                vec![(Budget(0), 1), (Budget(1), 0), (Budget(2), 2)],
            ]
        );
    }

    #[test]
    fn the_proposal_families_have_series_only_when_recorded() {
        use Own::{None, Proposal};
        let h = histogram();
        assert_eq!(series(&h, BY_PROPOSAL_LENGTH).count(), 0);
        assert_eq!(series(&h, ABORTED_PROPOSALS).count(), 0);
        let mut p = AcceptanceHistogram::with_proposals(2).unwrap();
        p.observe_proposal(2, 1).unwrap();
        p.observe_proposal(1, 1).unwrap();
        p.observe_aborted_proposals(3).unwrap();
        assert_eq!(
            series(&p, BY_PROPOSAL_LENGTH).collect::<Vec<_>>(),
            vec![
                (Proposal(1, 0), 0),
                (Proposal(1, 1), 1),
                (Proposal(2, 0), 0),
                (Proposal(2, 1), 1),
                (Proposal(2, 2), 0),
            ]
        );
        assert_eq!(
            series(&p, ABORTED_PROPOSALS).collect::<Vec<_>>(),
            vec![(None, 3)]
        );
        for k_max in [1, 64] {
            let h = AcceptanceHistogram::with_proposals(k_max).unwrap();
            assert_eq!(series(&h, BY_PROPOSAL_LENGTH).count(), k_max * (k_max + 3) / 2);
        }
        assert_eq!(FAMILIES.len(), METRIC_FAMILIES.len() + 2);
    }

    #[test]
    fn the_triangle_has_every_bucket_once_at_any_k() {
        for k_max in [1, 5, 64] {
            let h = AcceptanceHistogram::new(k_max).unwrap();
            let buckets: Vec<Own> = series(&h, BY_DRAFT_LENGTH).map(|(own, _)| own).collect();
            let triangle: Vec<Own> = (0..=k_max)
                .flat_map(|k| (0..=k).map(move |a| Own::Bucket(k, a)))
                .collect();
            assert_eq!(buckets, triangle);
        }
    }

    #[test]
    fn every_series_of_a_family_has_the_familys_label_names() {
        let h = histogram();
        let mut h = h;
        h.merge(&AcceptanceHistogram::with_proposals(2).unwrap()).unwrap();
        for family in 0..FAMILIES.len() {
            let names: Vec<&str> = own_label_names(family).collect();
            for (own, _) in series(&h, family) {
                let own_names: Vec<&str> = own.labels().map(|(n, _)| n).collect();
                assert_eq!(own_names, names, "family {family}");
            }
        }
        assert_eq!(
            own_label_names(BY_DRAFT_LENGTH).collect::<Vec<_>>(),
            ["draft_length", "accepted"]
        );
        assert_eq!(own_label_names(NUM_DRAFTS).count(), 0);
        assert_eq!(
            own_label_names(BY_PROPOSAL_LENGTH).collect::<Vec<_>>(),
            ["proposal_length", "matched"]
        );
    }

    #[test]
    fn own_labels_name_the_familys_labels() {
        let labels = |own: Own| own.labels().collect::<Vec<_>>();
        assert_eq!(labels(Own::None), []);
        assert_eq!(labels(Own::Position(3)), [("position", 3)]);
        assert_eq!(
            labels(Own::Bucket(4, 2)),
            [("draft_length", 4), ("accepted", 2)]
        );
        assert_eq!(labels(Own::Budget(0)), [("num_spec_tokens", 0)]);
        assert_eq!(
            labels(Own::Proposal(5, 3)),
            [("proposal_length", 5), ("matched", 3)]
        );
    }
}
