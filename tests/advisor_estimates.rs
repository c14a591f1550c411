//! The advisor's estimates on small histograms, every expected value worked
//! out by hand in the comments.

use crate::sim;

use specdec_metrics::{
    AcceptanceHistogram, Advisor, ConfigError, Continuation, CostError, CostTerm, DraftController,
    StepCost,
};

fn histogram(max: usize, steps: &[(usize, usize)]) -> AcceptanceHistogram {
    let mut h = AcceptanceHistogram::new(max).unwrap();
    for &(k, a) in steps {
        h.observe(k, a).unwrap();
    }
    h
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-12 * a.abs().max(b.abs()).max(1.0)
}

macro_rules! assert_close {
    ($a:expr, $b:expr) => {
        assert!(
            close($a, $b),
            "{} = {} but expected {}",
            stringify!($a),
            $a,
            $b
        )
    };
}

/// Steps (k, a) and what each position sees:
///
/// | step   | pos 1   | pos 2      | pos 3      | pos 4     |
/// | (4, 1) | success | failure    | -          | -         |
/// | (4, 4) | success | success    | success    | success   |
/// | (2, 2) | success | success    | censored   | censored  |
/// | (3, 0) | failure | -          | -          | -         |
/// | (1, 1) | success | censored   |            |           |
/// | (0, 0) | no trial (k = 0 drafts nothing)                 |
/// | (4, 2) | success | success    | failure    | -         |
fn example() -> AcceptanceHistogram {
    histogram(4, &[(4, 1), (4, 4), (2, 2), (3, 0), (1, 1), (0, 0), (4, 2)])
}

#[test]
fn continuation_counts_censor_full_acceptance() {
    let c = Continuation::new(&example());
    assert_eq!(c.at(1), (5, 6));
    assert_eq!(c.at(2), (3, 4));
    assert_eq!(c.at(3), (1, 2));
    assert_eq!(c.at(4), (1, 1));
    assert_eq!(c.at(0), (0, 0));
    assert_eq!(c.at(5), (0, 0));
    assert_eq!(c.max_draft_len(), 4);
    assert_eq!(c.counts(), &[(5, 6), (3, 4), (1, 2), (1, 1)]);
    assert_eq!(c.rate(2), Some(0.75));
    assert_eq!(c.rate(3), Some(0.5));
    assert_eq!(c.rate(5), None);
    // s_i is vLLM's num_accepted_tokens_per_pos[i - 1].
    let accepted = example().num_accepted_tokens_per_pos();
    for i in 1..=4 {
        assert_eq!(c.at(i).0, accepted[i - 1]);
    }
}

#[test]
fn expected_accepted_chains_the_rates() {
    let c = Continuation::new(&example());
    // h = 5/6, 3/4, 1/2, 1
    let h1 = 5.0 / 6.0;
    let h12 = h1 * 0.75;
    let h123 = h12 * 0.5;
    assert_eq!(c.expected_accepted(0), Some(0.0));
    assert_close!(c.expected_accepted(1).unwrap(), h1);
    assert_close!(c.expected_accepted(2).unwrap(), h1 + h12);
    assert_close!(c.expected_accepted(3).unwrap(), h1 + h12 + h123);
    assert_close!(c.expected_accepted(4).unwrap(), h1 + h12 + 2.0 * h123);
    assert_eq!(c.expected_accepted(5), None);
    // A position without trials leaves every longer draft undefined.
    let short = Continuation::new(&histogram(3, &[(1, 0), (1, 1)]));
    assert_eq!(short.expected_accepted(1), Some(0.5));
    assert_eq!(short.expected_accepted(2), None);
}

#[test]
fn row_means_are_direct_estimates() {
    let row_mean = |h: &AcceptanceHistogram, k: usize| {
        Advisor::default()
            .recommend(h, &StepCost::linear(1.0, 0.1).unwrap())
            .unwrap()
            .candidates[k]
            .row_mean_accepted
    };
    let h = example();
    // Row 4: (4,1), (4,4), (4,2) -> 7 / 3.
    assert_close!(row_mean(&h, 4).unwrap(), 7.0 / 3.0);
    assert_eq!(row_mean(&h, 0), Some(0.0));
    assert_eq!(row_mean(&h, 3), Some(0.0));
    assert_eq!(row_mean(&histogram(4, &[(1, 1)]), 2), None);
}

/// K = 2, steps (1,0), (1,1), (2,2), (2,1): position 1 has 3 successes in
/// 4 trials, position 2 has 1 in 2. Under Beta(1, 1):
/// h_1 ~ Beta(4, 2): mean 2/3, E[h_1^2] = 4*5/(6*7) = 10/21;
/// h_2 ~ Beta(2, 2): mean 1/2, E[h_2^2] = 2*3/(4*5) = 3/10.
/// E[S_1] = 2/3, E[S_2] = 2/3 + 1/3 = 1;
/// Var(S_1) = 10/21 - 4/9 = 2/63;
/// E[S_2^2] = E[h_1^2] E[(1 + h_2)^2] = 10/21 * (1 + 1 + 3/10) = 23/21, so
/// Var(S_2) = 2/21; Cov(S_1, S_2) = E[h_1^2](1 + 1/2) - 2/3 = 1/21.
/// Costs 1, 1.2, 1.4: goodputs 1, (5/3)/1.2 = 25/18, 2/1.4 = 10/7.
#[test]
fn recommendation_by_hand() {
    let h = histogram(2, &[(1, 0), (1, 1), (2, 2), (2, 1)]);
    let cost = StepCost::linear(1.0, 0.2).unwrap();
    let r = Advisor::default().recommend(&h, &cost).unwrap();
    assert_eq!(r.draft_len, 2);
    assert_close!(r.expected_speedup, 10.0 / 7.0);
    assert_eq!(r.num_spec_steps, 4);
    assert_eq!(r.candidates.len(), 3);

    let z = 1.644_853_626_951_472_2; // 90% central interval
    let c1 = &r.candidates[1];
    assert_close!(c1.expected_accepted, 2.0 / 3.0);
    assert_close!(c1.tokens_per_step, 5.0 / 3.0);
    assert_close!(c1.cost, 1.2);
    assert_close!(c1.goodput, 25.0 / 18.0);
    assert_close!(c1.speedup, 25.0 / 18.0);
    let sd1 = (2.0f64 / 63.0).sqrt();
    assert!((c1.accepted_interval[0] - (2.0 / 3.0 - z * sd1)).abs() < 1e-8);
    assert!((c1.accepted_interval[1] - (2.0 / 3.0 + z * sd1)).abs() < 1e-8);
    assert_eq!((c1.row_steps, c1.row_mean_accepted), (2, Some(0.5)));
    assert_close!(c1.accepted_sd, sd1);
    // Row 1 holds a = 0 and a = 1: sample variance 1/2, standard error
    // sqrt(1/2 / 2) = 1/2. Too few steps to be compared with the chain.
    assert_eq!(c1.row_mean_sd, Some(0.5));
    assert_eq!((c1.row_distance, c1.row_disagrees), (None, false));
    assert!(!c1.uses_prior);

    let c2 = &r.candidates[2];
    assert_close!(c2.expected_accepted, 1.0);
    let sd2 = (2.0f64 / 21.0).sqrt();
    assert_close!(c2.accepted_sd, sd2);
    // Clipped to [0, 2].
    assert!((c2.accepted_interval[0] - (1.0 - z * sd2)).abs() < 1e-8);
    assert!((c2.accepted_interval[1] - (1.0 + z * sd2)).abs() < 1e-8);
    assert_eq!(c2.prob_beats_choice, 0.5);

    // P(g(1) > g(2)): D = g1 - g2 = 25/18 - 10/7 = -5/126;
    // Var(D) = (2/63)/1.44 + (2/21)/1.96 - 2 (1/21)/(1.2 * 1.4) = 0.0139475...
    // z = -0.33602, Phi(z) = 0.36843.
    assert!(
        (c1.prob_beats_choice - 0.368_43).abs() < 1e-4,
        "{}",
        c1.prob_beats_choice
    );
    // P(g(0) > g(2)): D = 1 - 10/7, Var(D) = (2/21)/1.96, z = -1.94422: 0.02593.
    let c0 = &r.candidates[0];
    assert!(
        (c0.prob_beats_choice - 0.025_93).abs() < 1e-4,
        "{}",
        c0.prob_beats_choice
    );
    assert_eq!(c0.accepted_interval, [0.0, 0.0]);

    // Positions: posterior means 2/3 and 1/2, raw rates 3/4 and 1/2.
    assert_eq!(r.positions.len(), 2);
    assert_eq!((r.positions[0].successes, r.positions[0].trials), (3, 4));
    assert_eq!(r.positions[0].rate, Some(0.75));
    assert_close!(r.positions[0].posterior_mean, 2.0 / 3.0);
    assert_close!(r.positions[1].posterior_mean, 0.5);
    assert!(r.positions.iter().all(|p| !p.from_prior));
    assert_eq!((r.positions[0].position, r.positions[1].position), (1, 2));
    // 90% intervals: Beta(4, 2) has sd sqrt(4 * 2 / (36 * 7)) = sqrt(2/63);
    // Beta(2, 2) has sd sqrt(4 / (16 * 5)) = sqrt(1/20).
    let sd_h1 = (2.0f64 / 63.0).sqrt();
    let sd_h2 = (1.0f64 / 20.0).sqrt();
    for (p, mean, sd) in [
        (&r.positions[0], 2.0 / 3.0, sd_h1),
        (&r.positions[1], 0.5, sd_h2),
    ] {
        assert!(
            (p.interval[0] - (mean - z * sd)).abs() < 1e-8,
            "{:?}",
            p.interval
        );
        assert!(
            (p.interval[1] - (mean + z * sd)).abs() < 1e-8,
            "{:?}",
            p.interval
        );
    }
}

/// A position's interval is clipped to [0, 1]: Beta(1 + 3, 1) has mean 0.8
/// and sd sqrt(4 / (25 * 6)) = 0.1633, so mean + 1.645 sd = 1.07 > 1.
#[test]
fn position_intervals_are_clipped_to_the_unit_interval() {
    let h = histogram(1, &[(1, 1), (1, 1), (1, 1)]);
    let r = Advisor::default()
        .recommend(&h, &StepCost::linear(1.0, 0.1).unwrap())
        .unwrap();
    let p = &r.positions[0];
    assert_close!(p.posterior_mean, 0.8);
    let sd = (4.0f64 / 150.0).sqrt();
    assert!((p.interval[0] - (0.8 - 1.644_853_627 * sd)).abs() < 1e-8);
    assert_eq!(p.interval[1], 1.0);
    // The same clipping for E[a | 1] at [0, k = 1].
    assert_eq!(r.candidates[1].accepted_interval[1], 1.0);
}

#[test]
fn positions_without_trials_use_the_prior_and_say_so() {
    // Only k = 1 drafted: position 2 has no trials.
    let h = histogram(2, &[(1, 1), (1, 0), (1, 1)]);
    let r = Advisor::default()
        .with_prior(3.0, 1.0)
        .unwrap()
        .recommend(&h, &StepCost::linear(1.0, 0.1).unwrap())
        .unwrap();
    assert!(!r.positions[0].from_prior);
    assert!(r.positions[1].from_prior);
    assert_eq!(r.positions[1].rate, None);
    assert_close!(r.positions[1].posterior_mean, 0.75); // Beta(3, 1)
    assert!(!r.candidates[1].uses_prior);
    assert!(r.candidates[2].uses_prior);
    // h_1 ~ Beta(3 + 2, 1 + 1): mean 5/7; E[S_2] = 5/7 (1 + 3/4).
    assert_close!(r.candidates[2].expected_accepted, 5.0 / 7.0 * 1.75);
    assert_eq!(r.prior.alpha, 3.0);
}

#[test]
fn empty_histogram_is_all_prior() {
    let h = AcceptanceHistogram::new(3).unwrap();
    let r = Advisor::default()
        .recommend(&h, &StepCost::linear(1.0, 0.1).unwrap())
        .unwrap();
    assert!(
        r.positions
            .iter()
            .all(|p| p.from_prior && p.posterior_mean == 0.5)
    );
    // E[S_k] = 1 - 2^-k: goodputs 1, 1.5/1.1, 1.75/1.2, 1.875/1.3 -> k = 2.
    assert_eq!(r.draft_len, 2);
    assert_close!(r.expected_speedup, 1.75 / 1.2);
    assert_eq!(r.num_spec_steps, 0);
}

#[test]
fn ties_go_to_the_shorter_draft_and_zero_wins_when_nothing_beats_it() {
    // Prior mean 1/2: drafting 1 gives 1.5 tokens at cost 1.5, exactly as
    // good as not speculating.
    let h = AcceptanceHistogram::new(1).unwrap();
    let tie = StepCost::table(vec![1.0, 1.5]).unwrap();
    let r = Advisor::default().recommend(&h, &tie).unwrap();
    assert_eq!(r.draft_len, 0);
    assert_eq!(r.expected_speedup, 1.0);
    assert_eq!(r.candidates[1].speedup, 1.0);
    // Every draft rejected: nothing beats k = 0 even with cheap drafts.
    let rejected = histogram(3, &[(3, 0); 500]);
    let r = Advisor::default()
        .recommend(&rejected, &StepCost::linear(1.0, 0.01).unwrap())
        .unwrap();
    assert_eq!(r.draft_len, 0);
    assert!(r.candidates.iter().skip(1).all(|c| c.speedup < 1.0));
    // Equal goodput at k = 2 and 3 (everything accepted up to 2, nothing at
    // 3, so E[a | 3] = E[a | 2] under a tiny prior): the shorter wins.
    let h = histogram(3, &[(3, 2); 100_000]);
    let r = Advisor::default()
        .with_prior(1e-9, 1e-9)
        .unwrap()
        .recommend(&h, &StepCost::linear(1.0, 0.0).unwrap())
        .unwrap();
    assert_eq!(r.draft_len, 2);
}

#[test]
fn credible_level_sets_the_interval_width() {
    let h = histogram(1, &[(1, 1), (1, 0), (1, 1), (1, 1)]);
    let cost = StepCost::linear(1.0, 0.1).unwrap();
    let narrow = Advisor::default().recommend(&h, &cost).unwrap();
    let wide = Advisor::default()
        .with_credible_level(0.99)
        .unwrap()
        .recommend(&h, &cost)
        .unwrap();
    let width = |r: &specdec_metrics::Recommendation| {
        r.candidates[1].accepted_interval[1] - r.candidates[1].accepted_interval[0]
    };
    // Beta(4, 2): sd = sqrt(2/63); 90%: 2 * 1.6449 sd, 99%: 2 * 2.5758 sd.
    let sd = (2.0f64 / 63.0).sqrt();
    assert!((width(&narrow) - 2.0 * 1.644_853_627 * sd).abs() < 1e-8);
    let upper = (2.0 / 3.0 + 2.575_829_304 * sd).min(1.0);
    let lower = 2.0 / 3.0 - 2.575_829_304 * sd;
    assert!((width(&wide) - (upper - lower)).abs() < 1e-8);
    assert_eq!(wide.credible_level, 0.99);
    assert_eq!(Advisor::default().credible_level(), 0.9);
    assert_eq!(
        Advisor::default()
            .with_credible_level(0.5)
            .unwrap()
            .credible_level(),
        0.5
    );
    assert!(Advisor::default().with_credible_level(1.0).is_err());
    assert!(Advisor::default().with_credible_level(0.0).is_err());
    assert!(Advisor::default().with_credible_level(f64::NAN).is_err());
    let err = Advisor::default()
        .with_prior(1.0, f64::INFINITY)
        .unwrap_err();
    assert_eq!((err.name(), err.value()), ("prior beta", f64::INFINITY));
    let err = Advisor::default().with_credible_level(1.5).unwrap_err();
    assert_eq!((err.name(), err.value()), ("credible level", 1.5));
    assert!(Advisor::default().with_prior(-1.0, 1.0).is_err());
}

#[test]
fn bad_costs_are_errors_that_name_the_value() {
    let cases: Vec<(Result<StepCost, CostError>, &str)> = vec![
        (
            StepCost::linear(0.0, 0.1),
            "the base cost is 0; a step cost must be more than zero",
        ),
        (
            StepCost::linear(-1.0, 0.1),
            "the base cost is -1; a step cost must be more than zero",
        ),
        (
            StepCost::linear(f64::NAN, 0.1),
            "the base cost is NaN; a step cost must be a finite number",
        ),
        (
            StepCost::linear(1.0, f64::INFINITY),
            "the cost per draft token is inf; a step cost must be a finite number",
        ),
        (
            StepCost::linear(1.0, -0.5),
            "the cost per draft token is -0.5; it must be zero or more",
        ),
        (
            StepCost::linear(1.0, 1e307),
            "the cost per draft token is 1e307; a step cost must be between 1e-150 and 1e150 (only ratios of costs matter: use another unit)",
        ),
        (
            StepCost::table(vec![1.0, 2.0, 0.0]),
            "the cost of draft length 2 is 0; a step cost must be more than zero",
        ),
        (
            StepCost::table(vec![f64::NEG_INFINITY]),
            "the cost of draft length 0 is -inf; a step cost must be a finite number",
        ),
        (
            StepCost::table(vec![]),
            "the step cost table is empty; it needs one cost per draft length 0..=K",
        ),
    ];
    for (result, message) in cases {
        assert_eq!(result.unwrap_err().to_string(), message);
    }
    assert_eq!(
        StepCost::table(vec![1.0, -3.0]),
        Err(CostError::NotPositive {
            term: CostTerm::Table { draft_len: 1 },
            value: -3.0
        })
    );
}

#[test]
fn a_table_must_cover_every_draft_length() {
    let h = AcceptanceHistogram::new(3).unwrap();
    let short = StepCost::table(vec![1.0, 1.1, 1.2]).unwrap();
    let long = StepCost::table(vec![1.0, 1.1, 1.2, 1.3, 1.4]).unwrap();
    let exact = StepCost::table(vec![1.0, 1.1, 1.2, 1.3]).unwrap();
    let err = Advisor::default().recommend(&h, &short).unwrap_err();
    assert_eq!(
        err,
        CostError::TableLength {
            max_draft_len: 3,
            found: 3
        }
    );
    assert_eq!(
        err.to_string(),
        "the step cost table has 3 entries but max_draft_len 3 needs 4 (one per draft length 0..=3)"
    );
    assert!(Advisor::default().recommend(&h, &long).is_err());
    // Checked up front, as a caller would before building anything.
    assert_eq!(
        (
            short.max_draft_len(),
            exact.max_draft_len(),
            long.max_draft_len()
        ),
        (Some(2), Some(3), Some(4))
    );
    assert_eq!(StepCost::linear(1.0, 0.1).unwrap().max_draft_len(), None);
    assert_eq!(
        short.check(3),
        Err(CostError::TableLength {
            max_draft_len: 3,
            found: 3
        })
    );
    assert!(long.check(3).is_err() && exact.check(3).is_ok() && short.check(2).is_ok());
    assert_eq!(
        Advisor::default()
            .recommend(&h, &exact)
            .unwrap()
            .candidates
            .len(),
        4
    );
    // The controller refuses it at construction, with the same error.
    let err = DraftController::new(3, short).unwrap_err();
    assert_eq!(
        err,
        ConfigError::CostTable {
            max_draft_len: 3,
            found: 3
        }
    );
    assert_eq!(
        err.to_string(),
        "the step cost table has 3 entries but max_draft_len 3 needs 4 (one per draft length 0..=3)"
    );
    assert!(DraftController::new(3, exact).is_ok());
    let bad_k: ConfigError =
        DraftController::new(65, StepCost::linear(1.0, 0.1).unwrap()).unwrap_err();
    assert_eq!(bad_k, ConfigError::MaxDraftLen { max_draft_len: 65 });
}

#[test]
fn recommendation_serializes_with_its_field_names() {
    let h = histogram(2, &[(2, 1), (2, 2)]);
    let r = Advisor::default()
        .recommend(&h, &StepCost::linear(1.0, 0.1).unwrap())
        .unwrap();
    let text = serde_json::to_string(&r).unwrap();
    let order = [
        "\"draft_len\"",
        "\"expected_speedup\"",
        "\"num_spec_steps\"",
        "\"prior\"",
        "\"credible_level\"",
        "\"positions\"",
        "\"candidates\"",
    ];
    let at: Vec<usize> = order.iter().map(|k| text.find(k).unwrap()).collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{text}");
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        json["prior"],
        serde_json::json!({"alpha": 1.0, "beta": 1.0})
    );
    assert_eq!(json["candidates"][2]["row_steps"], 2);
    assert_eq!(
        json["candidates"][1]["row_mean_accepted"],
        serde_json::Value::Null
    );
    assert_eq!(json["positions"][1]["trials"], 2);
}

/// Acceptance that depends on the draft length: drafting 1, position 1 is
/// always accepted; drafting 4, only half the time. The chain pools them,
/// so both rows' own means disagree with it.
#[test]
fn rows_whose_acceptance_depends_on_k_are_flagged() {
    let mut steps = vec![(1, 1); 400];
    for i in 0..400 {
        steps.push((4, if i % 2 == 0 { 0 } else { 4 }));
    }
    let h = histogram(4, &steps);
    let r = Advisor::default()
        .recommend(&h, &StepCost::linear(1.0, 0.1).unwrap())
        .unwrap();
    // Two rows compared: bound = Phi^-1(1 - 0.01 / 4) = 2.807.
    assert!(
        (r.row_distance_bound - 2.807_033_768).abs() < 1e-6,
        "{}",
        r.row_distance_bound
    );
    let flagged: Vec<usize> = r
        .candidates
        .iter()
        .filter(|c| c.row_disagrees)
        .map(|c| c.draft_len)
        .collect();
    assert_eq!(flagged, [1, 4]);
    // Row 4: mean 2 (half 0, half 4), every step 2 away from it: sample
    // variance 400 * 4 / 399, standard error sqrt(4 / 399).
    let c4 = &r.candidates[4];
    assert_eq!(c4.row_mean_accepted, Some(2.0));
    assert_close!(c4.row_mean_sd.unwrap(), (4.0f64 / 399.0).sqrt());
    let expected =
        (2.0 - c4.expected_accepted).abs() / (4.0 / 399.0 + c4.accepted_sd * c4.accepted_sd).sqrt();
    assert_close!(c4.row_distance.unwrap(), expected);
    // Rows without steps are never compared.
    assert!(r.candidates[2].row_distance.is_none() && !r.candidates[2].row_disagrees);
}

/// Acceptance independent of k: no row is flagged, however many.
#[test]
fn rows_that_agree_with_the_chain_are_not_flagged() {
    for seed in 0..5 {
        let h = sim::spread_histogram(16, 0.8, 40_000, seed);
        let r = Advisor::default()
            .recommend(&h, &StepCost::linear(1.0, 0.1).unwrap())
            .unwrap();
        assert_eq!(
            r.candidates
                .iter()
                .filter(|c| c.row_distance.is_some())
                .count(),
            16
        );
        // 16 rows compared: the bound is Phi^-1(1 - 0.01 / 32).
        assert!(
            (r.row_distance_bound - 3.420_526_701).abs() < 1e-6,
            "{}",
            r.row_distance_bound
        );
        assert!(
            r.candidates.iter().all(|c| !c.row_disagrees),
            "seed {seed}: {:?}",
            r.candidates
                .iter()
                .map(|c| c.row_distance)
                .collect::<Vec<_>>()
        );
    }
}

#[test]
fn step_costs_say_what_they_are() {
    assert_eq!(
        StepCost::linear(2.0, 0.25).unwrap().to_string(),
        "linear, cost(k) = 2 + 0.25 k"
    );
    assert_eq!(
        StepCost::table(vec![1.5]).unwrap().to_string(),
        "table, cost(0..=0) = 1.5"
    );
    assert_eq!(
        StepCost::table(vec![20.0, 22.5, 24.0]).unwrap().to_string(),
        "table, cost(0..=2) = 20, 22.5, 24"
    );
    // A table gives no cost beyond its entries, a linear cost none above 64.
    let table = StepCost::table(vec![1.0, 2.0]).unwrap();
    assert_eq!((table.cost(1), table.cost(2)), (Some(2.0), None));
    let linear = StepCost::linear(1.0, 0.5).unwrap();
    assert_eq!((linear.cost(64), linear.cost(65)), (Some(33.0), None));
}

#[test]
fn costs_outside_1e_minus_150_to_1e150_are_refused() {
    // Subnormal and tiny costs passed the old "positive finite" check and
    // gave NaN speedups.
    for (cost, term, value) in [
        (StepCost::linear(5e-324, 0.0), CostTerm::Base, 5e-324),
        (StepCost::linear(1e-320, 0.0), CostTerm::Base, 1e-320),
        (StepCost::linear(1e-151, 0.0), CostTerm::Base, 1e-151),
        (StepCost::linear(1e151, 0.0), CostTerm::Base, 1e151),
        (
            StepCost::linear(1.0, 1e-200),
            CostTerm::PerDraftToken,
            1e-200,
        ),
        (StepCost::linear(1.0, 1e300), CostTerm::PerDraftToken, 1e300),
        (
            StepCost::table(vec![1.0, 1e-300]),
            CostTerm::Table { draft_len: 1 },
            1e-300,
        ),
    ] {
        assert_eq!(cost.unwrap_err(), CostError::OutOfRange { term, value });
    }
    // The bounds themselves, and a free draft token, are accepted.
    assert!(StepCost::linear(1e-150, 0.0).is_ok());
    assert!(StepCost::linear(1e150, 1e150).is_ok());
    assert!(StepCost::linear(1.0, -0.0).is_ok());
    assert!(StepCost::table(vec![1e150, 1e-150]).is_ok());
    assert_eq!(
        StepCost::linear(1e-320, 0.0).unwrap_err().to_string(),
        "the base cost is 1e-320; a step cost must be between 1e-150 and 1e150 (only ratios of costs matter: use another unit)"
    );
}

#[test]
fn the_advice_does_not_depend_on_the_cost_unit() {
    let h = example();
    let advice = |scale: f64| {
        let cost = StepCost::table(
            [1.0, 1.1, 1.25, 1.3, 1.5]
                .iter()
                .map(|c| c * scale)
                .collect(),
        )
        .unwrap();
        Advisor::default().recommend(&h, &cost).unwrap()
    };
    let unit = advice(1.0);
    for scale in [1e-149, 1e-100, 3.0, 1e100, 1e149] {
        let r = advice(scale);
        assert_eq!(r.draft_len, unit.draft_len, "scale {scale}");
        assert!(
            close(r.expected_speedup, unit.expected_speedup),
            "scale {scale}"
        );
        for (a, b) in r.candidates.iter().zip(&unit.candidates) {
            assert!(close(a.speedup, b.speedup), "scale {scale}");
            assert!(
                close(a.prob_beats_choice, b.prob_beats_choice),
                "scale {scale}"
            );
            assert!(close(a.goodput * scale, b.goodput), "scale {scale}");
            assert!(a.goodput.is_finite() && a.speedup.is_finite());
        }
    }
}

/// The normal quantile at 0.95 (the crate's quantiles are accurate to
/// about 1e-9: compared within 1e-8).
const Z95: f64 = 1.644_853_626_951_472_2;

fn steps_k1(accepted: usize, rejected: usize) -> AcceptanceHistogram {
    let steps: Vec<(usize, usize)> = [(1, 1)]
        .repeat(accepted)
        .into_iter()
        .chain([(1, 0)].repeat(rejected))
        .collect();
    histogram(1, &steps)
}

/// Two windows at K = 1: 3 of 4 accepted and 1 of 4. Their posteriors
/// Beta(4, 2) and Beta(2, 4) have means 2/3 and 1/3 and the same variance
/// 4 * 2 / (36 * 7) = 2/63, so the pooled figure is 1/2 and the Pearson
/// sum 2 (1/6)^2 / (2/63) = 7/4 on one degree of freedom: the dispersion
/// is 7/4. The pooled window, 4 of 8, is Beta(5, 5) with variance 1/44:
/// the sd of E[a | 1] is sqrt(7/4 / 44), the intervals take t with 1
/// degree of freedom.
#[test]
fn dispersion_between_windows_by_hand() {
    let cost = StepCost::linear(1.0, 0.1).unwrap();
    let windows = [steps_k1(3, 1), steps_k1(1, 3)];
    let r = Advisor::default()
        .recommend_windows(&windows, &cost)
        .unwrap();
    assert_close!(r.dispersion, 7.0 / 4.0);
    assert_eq!(
        (r.windows, r.intervals_assume_independent_steps),
        (2, false)
    );
    let sd = (7.0f64 / 4.0 / 44.0).sqrt();
    assert_close!(r.candidates[1].accepted_sd, sd);
    assert_close!(r.candidates[1].expected_accepted, 0.5);
    // Three windows: 2 degrees of freedom. Beta(4, 2), Beta(2, 4) and
    // Beta(3, 3) (mean 1/2, variance 9 / (36 * 7) = 1/28): weights 63/2,
    // 63/2 and 28, pooled 1/2, Pearson 7/4 + 0: dispersion 7/8. Below 1,
    // but above (z / t)^2 = (1.645 / 2.920)^2 = 0.317: the variance is
    // scaled by it (the t quantile keeps the interval wider than binomial).
    let three = [steps_k1(3, 1), steps_k1(1, 3), steps_k1(2, 2)];
    let r = Advisor::default().recommend_windows(&three, &cost).unwrap();
    assert_close!(r.dispersion, 7.0 / 8.0);
    // Pooled 6 of 12: Beta(7, 7), variance 49 / (196 * 15) = 1/60.
    assert_close!(r.candidates[1].accepted_sd, (7.0f64 / 8.0 / 60.0).sqrt());
    // Position 1's interval: t with 2 degrees of freedom, 2.919986, times
    // the scaled sd: [1/2 - half, 1/2 + half].
    let half = 2.919_985_580_353_725 * (7.0f64 / 8.0 / 60.0).sqrt();
    let p1 = r.positions[0].interval;
    assert!(
        (p1[0] - (0.5 - half)).abs() < 1e-8 && (p1[1] - (0.5 + half)).abs() < 1e-8,
        "{p1:?}"
    );
}

/// Windows that differ more than binomial noise make every chance of
/// beating the choice less certain than the pooled histogram alone says,
/// and two windows take t with 1 degree of freedom.
#[test]
fn dispersion_widens_probabilities_and_two_windows_take_t_with_one_df() {
    let cost = StepCost::linear(1.0, 0.4).unwrap();
    let windows = [steps_k1(220, 180), steps_k1(180, 220)];
    let mut pooled = windows[0].clone();
    pooled.merge(&windows[1]).unwrap();
    let many = Advisor::default()
        .recommend_windows(&windows, &cost)
        .unwrap();
    let one = Advisor::default().recommend(&pooled, &cost).unwrap();
    assert!(many.dispersion > 4.0, "{}", many.dispersion);
    let loser = 1 - many.draft_len;
    let (p_many, p_one) = (
        many.candidates[loser].prob_beats_choice,
        one.candidates[loser].prob_beats_choice,
    );
    assert!(p_one < p_many && p_many < 0.5, "{p_one} {p_many}");
    // Position 1, 400 of 800 pooled: Beta(401, 401), half-width
    // t(0.95, 1) sqrt(dispersion) sd, t = tan(0.45 pi) = 6.313752.
    let sd = (401.0f64 * 401.0 / (802.0 * 802.0 * 803.0)).sqrt();
    let half = 6.313_751_514_675_043 * many.dispersion.sqrt() * sd;
    let p1 = many.positions[0].interval;
    assert!(
        (p1[1] - p1[0] - 2.0 * half).abs() < 1e-8 || p1 == [0.0, 1.0],
        "{p1:?} {half}"
    );
    assert!(p1[1] - p1[0] < 1.0, "clipped: {p1:?}");
}

/// The dispersion is measured up to the longest length every window with
/// data has trials at; a window without any step is left out.
#[test]
fn dispersion_uses_the_positions_every_window_reached() {
    let cost = StepCost::linear(1.0, 0.1).unwrap();
    // K = 2. Window a: (2, 2) x 3, (2, 0); window b: (1, 1), (1, 0) x 3:
    // b has no trial at position 2, so only position 1 is compared: 3 of
    // 4 against 1 of 4, the dispersion of the test above, 7/4.
    let a = histogram(2, &[(2, 2), (2, 2), (2, 2), (2, 0)]);
    let b = histogram(2, &[(1, 1), (1, 0), (1, 0), (1, 0)]);
    let empty = AcceptanceHistogram::new(2).unwrap();
    for windows in [
        vec![a.clone(), b.clone()],
        vec![a.clone(), empty.clone(), b.clone()],
    ] {
        let r = Advisor::default()
            .recommend_windows(&windows, &cost)
            .unwrap();
        assert_close!(r.dispersion, 7.0 / 4.0);
    }
    // One window with data: nothing to compare, 1.
    let r = Advisor::default()
        .recommend_windows(&[a, empty], &cost)
        .unwrap();
    assert_eq!(r.dispersion, 1.0);
}

/// One window given twice agrees perfectly (dispersion 0): the intervals
/// are those of the pooled window on its own (the binomial width, not
/// none), a position without trials keeps the prior's interval, and the
/// chances of beating the choice are the pooled window's.
#[test]
fn identical_windows_never_narrow_the_intervals() {
    let cost = StepCost::linear(1.0, 0.1).unwrap();
    // K = 2, nothing drafted 2: position 2 has no trial.
    let steps: Vec<(usize, usize)> = [(1, 1)]
        .repeat(60)
        .into_iter()
        .chain([(1, 0)].repeat(40))
        .collect();
    let h = histogram(2, &steps);
    let mut pooled = h.clone();
    pooled.merge(&h).unwrap();
    let alone = Advisor::default().recommend(&pooled, &cost).unwrap();
    let twice = Advisor::default()
        .recommend_windows(&[h.clone(), h.clone()], &cost)
        .unwrap();
    assert!(twice.dispersion < 1e-12, "{}", twice.dispersion);
    for (a, b) in alone.candidates.iter().zip(&twice.candidates) {
        for i in 0..2 {
            assert!(
                (a.accepted_interval[i] - b.accepted_interval[i]).abs() < 1e-8,
                "k = {}: {:?} against {:?} alone",
                a.draft_len,
                b.accepted_interval,
                a.accepted_interval
            );
        }
        assert!(
            (a.prob_beats_choice - b.prob_beats_choice).abs() < 1e-12,
            "{b:?}"
        );
    }
    // Position 1 (120 of 200 pooled): Beta(121, 81), z wide.
    let p1 = &twice.positions[0];
    let (m, v) = (121.0 / 202.0, 121.0 * 81.0 / (202.0f64.powi(2) * 203.0));
    assert!(
        (p1.interval[1] - p1.interval[0] - 2.0 * Z95 * v.sqrt()).abs() < 1e-8,
        "{:?}",
        p1.interval
    );
    assert_close!(p1.posterior_mean, m);
    // Position 2: no trial, the prior Beta(1, 1) with the normal quantile,
    // as with one window: [0.5 - z sd, 0.5 + z sd], sd = sqrt(1/12).
    let p2 = &twice.positions[1];
    assert!(p2.from_prior);
    assert_eq!(p2.interval, alone.positions[1].interval);
    let half = Z95 * (1.0f64 / 12.0).sqrt();
    assert!(
        (p2.interval[0] - (0.5 - half)).abs() < 1e-8,
        "{:?}",
        p2.interval
    );
    assert!(
        (p2.interval[1] - (0.5 + half)).abs() < 1e-8,
        "{:?}",
        p2.interval
    );
}

/// `compare` against its closed form on the histogram of
/// `recommendation_by_hand`: g(1) = 25/18, g(2) = 10/7 at cost 1 + 0.2 k.
/// Var E[a | 1] = 2/63, Var E[a | 2] = 2/21, their covariance 1/21.
#[test]
fn compare_by_hand() {
    let h = histogram(2, &[(1, 0), (1, 1), (2, 2), (2, 1)]);
    let c = Continuation::new(&h);
    let cost = StepCost::linear(1.0, 0.2).unwrap();
    let advisor = Advisor::default();
    let r = advisor.compare(&c, &cost, 2, 1).unwrap();
    let (g2, g1) = (10.0 / 7.0, 25.0 / 18.0);
    let ratio = g2 / g1;
    assert_close!(r.ratio, ratio);
    // Delta method: Var(g2 / g1) = (V2 + ratio^2 V1 - 2 ratio C) / g1^2
    // with V2 = (2/21) / 1.4^2, V1 = (2/63) / 1.2^2, C = (1/21) / (1.2 * 1.4).
    let (v2, v1, cv) = (
        2.0 / 21.0 / 1.96,
        2.0 / 63.0 / 1.44,
        1.0 / 21.0 / (1.2 * 1.4),
    );
    let sd = ((v2 + ratio * ratio * v1 - 2.0 * ratio * cv) / (g1 * g1)).sqrt();
    assert!(
        (r.interval[0] - (ratio - Z95 * sd)).abs() < 1e-8,
        "{:?}",
        r.interval
    );
    assert!(
        (r.interval[1] - (ratio + Z95 * sd)).abs() < 1e-8,
        "{:?}",
        r.interval
    );
    // P(g2 > g1): D = 5/126, Var D = V2 + V1 - 2 C = 0.0139475...:
    // Phi(0.33602) = 0.63157.
    let var_d: f64 = v2 + v1 - 2.0 * cv;
    assert!((var_d - 0.013_947_5).abs() < 1e-6, "{var_d}");
    assert!((r.prob_better - 0.631_57).abs() < 1e-4, "{}", r.prob_better);
    // The other way round: the reciprocal ratio, the complement.
    let back = advisor.compare(&c, &cost, 1, 2).unwrap();
    assert_close!(back.ratio, 1.0 / ratio);
    assert_close!(back.prob_better, 1.0 - r.prob_better);
    // Against not speculating: g(0) = 1 exactly, no variance.
    let vs0 = advisor.compare(&c, &cost, 2, 0).unwrap();
    assert_close!(vs0.ratio, g2);
    let sd0 = v2.sqrt();
    assert!((vs0.interval[0] - (g2 - Z95 * sd0)).abs() < 1e-8);
    assert!((vs0.interval[1] - (g2 + Z95 * sd0)).abs() < 1e-8);
    // Phi((10/7 - 1) / sqrt(V2)) = Phi(1.94422) = 0.97407.
    assert!(
        (vs0.prob_better - 0.974_07).abs() < 1e-4,
        "{}",
        vs0.prob_better
    );
    // A length against itself: ratio 1, no width, even odds.
    let same = advisor.compare(&c, &cost, 2, 2).unwrap();
    assert_eq!((same.ratio, same.prob_better), (1.0, 0.5));
    assert!((same.interval[1] - same.interval[0]).abs() < 1e-8);
    // The level sets the width: at 50%, z = 0.67449.
    let half = advisor
        .with_credible_level(0.5)
        .unwrap()
        .compare(&c, &cost, 2, 1)
        .unwrap();
    let z50 = 0.674_489_750_196_081_7;
    assert!((half.interval[1] - (ratio + z50 * sd)).abs() < 1e-9);
    // A ratio whose interval would reach below 0 is clipped at 0: one
    // step, an expensive draft.
    let tiny = Continuation::new(&histogram(1, &[(1, 0)]));
    let wide = advisor
        .compare(&tiny, &StepCost::linear(1.0, 0.01).unwrap(), 0, 1)
        .unwrap();
    assert!(wide.interval[0] >= 0.0);
}
