//! Per-request states the drafter knows ([`StateSpace`], [`DraftSignal`]),
//! states whose length is 0 that still explore, and the multi-word plan
//! ([`SharedStateTable`]) of a [`StateController`] over many states.

use specdec_metrics::RequestState;

/// Counts near `usize::MAX` used to wrap: `after(usize::MAX, usize::MAX)`
/// divided by zero (`accepted + 1` wrapped to 0) and `after(1 << 50, 1 <<
/// 50)` moved the score down (`accepted * 2^14` wrapped to 0).
#[test]
fn huge_counts_saturate_instead_of_wrapping() {
    for start in [0.0, 0.5, 1.0] {
        let state = RequestState::with_score(start);
        for (k, a) in [
            (usize::MAX, usize::MAX),
            (1 << 50, 1 << 50),
            (1 << 50, usize::MAX),
        ] {
            let next = state.after(k, a);
            assert!(
                next.score() >= state.score(),
                "after({k}, {a}) from {start}: all accepted moved the score down to {}",
                next.score()
            );
            if start < 1.0 {
                assert!(
                    next.score() > state.score(),
                    "after({k}, {a}) from {start}: stuck"
                );
            }
        }
        // Huge drafts with nothing accepted move the score down as a small one does.
        assert_eq!(state.after(usize::MAX, 0), state.after(4, 0));
        assert_eq!(state.after(1 << 50, 0), state.after(4, 0));
        // All but the last of 2^50 tested positions accepted: within the
        // score's precision of full acceptance.
        for (k, a) in [(1 << 50, (1 << 50) - 1), (usize::MAX, usize::MAX - 1)] {
            let near = state.after(k, a).score();
            assert!((near - state.after(4, 4).score()).abs() <= 1e-3, "{near}");
        }
    }
}
