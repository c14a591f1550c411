//! Reading a report back (the reference's "Reading a report back"):
//! malformed or inconsistent reports are rejected with an error that says
//! why; valid ones rebuild the histogram.

use serde_json::{Value, json};
use specdec_metrics::{AcceptanceHistogram, REPORT_KEYS};

/// The reference's example report, pretty-printed: K = 3 and the steps
/// (3,0),(3,3),(3,2),(3,3),(3,1).
const EXAMPLE_REPORT: &str = r#"{
  "mean_acceptance_length": 2.8,
  "draft_acceptance_rate": 0.6,
  "acceptance_histogram": [1, 1, 1, 2],
  "acceptance_histogram_by_draft_length": {"3": [1, 1, 1, 2]},
  "num_spec_steps": 5,
  "num_accepted_draft_tokens": 9,
  "num_draft_tokens": 15,
  "num_spec_tokens": 3,
  "num_accepted_tokens_per_pos": [4, 3, 2],
  "num_draft_tokens_per_pos": [5, 5, 5],
  "num_undrafted_steps": 0,
  "num_rejected_observations": 0,
  "scheduled_steps_by_budget": [0, 0, 0, 0]
}"#;

fn base() -> Value {
    serde_json::from_str(EXAMPLE_REPORT).unwrap()
}

/// `base()` with `key` set to `value`.
fn with(key: &str, value: Value) -> Value {
    let mut v = base();
    v[key] = value;
    v
}

/// Asserts that `text` is rejected with a message containing `fragment`.
#[track_caller]
fn rejects(text: &str, fragment: &str) {
    match serde_json::from_str::<AcceptanceHistogram>(text) {
        Ok(h) => panic!("accepted {text}\nas {h:?}"),
        Err(e) => {
            let msg = e.to_string();
            assert!(
                msg.contains(fragment),
                "error for {text}\nwas:      {msg}\nexpected: ...{fragment}..."
            );
        }
    }
}

#[track_caller]
fn rejects_value(v: &Value, fragment: &str) {
    rejects(&v.to_string(), fragment);
}

/// The example report with its rows object replaced by `rows` (raw text).
fn with_rows_text(rows: &str) -> String {
    let text = EXAMPLE_REPORT.replace(r#"{"3": [1, 1, 1, 2]}"#, rows);
    assert_ne!(text, EXAMPLE_REPORT);
    text
}

fn spec_example_histogram() -> AcceptanceHistogram {
    let mut h = AcceptanceHistogram::new(3).unwrap();
    for (k, a) in [(3, 0), (3, 3), (3, 2), (3, 3), (3, 1)] {
        h.observe(k, a).unwrap();
    }
    h
}

// ---------------------------------------------------------------------------
// Valid reports.
// ---------------------------------------------------------------------------

#[test]
fn spec_example_parses_to_the_histogram_that_wrote_it() {
    let h: AcceptanceHistogram = serde_json::from_str(EXAMPLE_REPORT).unwrap();
    assert_eq!(h, spec_example_histogram());
    assert_eq!(h.max_draft_len(), 3);
    assert_eq!(h.row(3), Some(&[1, 1, 1, 2][..]));
}

/// K = 4, steps (0,0), (2,1), (2,2), (4,4), two undrafted steps and one
/// rejected observation, with an explicit all-zero row for k = 1; written
/// before `scheduled_steps_by_budget` existed (no such key).
///
/// By hand: steps 4; drafted 0+2+2+4 = 8; accepted 0+1+2+4 = 7;
/// mean 1 + 7/4 = 2.75; rate 7/8 = 0.875; by accepted [1,1,1,0,1];
/// accepted per pos (a > i) [3,2,1,1]; drafted per pos (k > i) [3,3,1,1].
fn several_rows_report() -> Value {
    json!({
        "mean_acceptance_length": 2.75,
        "draft_acceptance_rate": 0.875,
        "acceptance_histogram": [1, 1, 1, 0, 1],
        "acceptance_histogram_by_draft_length": {
            "0": [1],
            "1": [0, 0],
            "2": [0, 1, 1],
            "4": [0, 0, 0, 0, 1]
        },
        "num_spec_steps": 4,
        "num_accepted_draft_tokens": 7,
        "num_draft_tokens": 8,
        "num_spec_tokens": 4,
        "num_accepted_tokens_per_pos": [3, 2, 1, 1],
        "num_draft_tokens_per_pos": [3, 3, 1, 1],
        "num_undrafted_steps": 2,
        "num_rejected_observations": 1
    })
}

#[test]
fn report_with_several_rows_and_an_all_zero_row_equals_the_observed_histogram() {
    let parsed: AcceptanceHistogram =
        serde_json::from_str(&several_rows_report().to_string()).unwrap();
    let mut built = AcceptanceHistogram::new(4).unwrap();
    for (k, a) in [(0, 0), (2, 1), (2, 2), (4, 4)] {
        built.observe(k, a).unwrap();
    }
    built.observe_undrafted();
    built.observe_undrafted();
    assert!(built.observe(1, 2).is_err());
    assert_eq!(parsed, built);
    assert_eq!(parsed.row(1), Some(&[0, 0][..]));
    assert_eq!(parsed.num_undrafted_steps(), 2);
    assert_eq!(parsed.num_rejected_observations(), 1);
}

#[test]
fn all_zero_row_is_not_written_back() {
    // Only observed draft lengths get a key: "1" ([0, 0]) is dropped.
    let parsed: AcceptanceHistogram =
        serde_json::from_str(&several_rows_report().to_string()).unwrap();
    let mut expected = several_rows_report();
    expected["acceptance_histogram_by_draft_length"]
        .as_object_mut()
        .unwrap()
        .remove("1");
    // Written now, the report has the budgets, all zero.
    expected["scheduled_steps_by_budget"] = json!([0, 0, 0, 0, 0]);
    assert_eq!(serde_json::to_value(&parsed).unwrap(), expected);
}

#[test]
fn report_without_scheduled_budgets_reads_as_all_zero() {
    // The example report as written before the key existed.
    let mut earlier = base();
    earlier
        .as_object_mut()
        .unwrap()
        .remove("scheduled_steps_by_budget");
    let h: AcceptanceHistogram = serde_json::from_value(earlier).unwrap();
    assert_eq!(h, spec_example_histogram());
    assert_eq!(h.scheduled_steps_by_budget(), &[0, 0, 0, 0]);
    assert_eq!(serde_json::to_value(&h).unwrap(), base());
}

#[test]
fn scheduled_budgets_round_trip() {
    let mut h = spec_example_histogram();
    for b in [0, 3, 3, 1] {
        h.observe_scheduled(b).unwrap();
    }
    let v = serde_json::to_value(&h).unwrap();
    assert_eq!(v, with("scheduled_steps_by_budget", json!([1, 1, 0, 2])));
    let back: AcceptanceHistogram = serde_json::from_value(v).unwrap();
    assert_eq!(back, h);
    assert_eq!(back.scheduled_steps_by_budget(), &[1, 1, 0, 2]);
}

#[test]
fn scheduled_budgets_of_wrong_length_are_rejected() {
    for (list, found) in [
        (json!([]), 0),
        (json!([1, 2, 3]), 3),
        (json!([0, 0, 0, 0, 0]), 5),
    ] {
        rejects_value(
            &with("scheduled_steps_by_budget", list),
            &format!("scheduled_steps_by_budget has {found} entries, expected 4"),
        );
    }
}

#[test]
fn scheduled_budgets_that_are_not_a_list_of_counts_are_rejected() {
    for (value, fragment) in [
        (json!(null), "invalid type: null, expected a sequence"),
        (json!(4), "invalid type: integer `4`, expected a sequence"),
        (json!({"0": 1}), "invalid type: map, expected a sequence"),
        (
            json!([0, -1, 0, 0]),
            "invalid value: integer `-1`, expected u64",
        ),
        (
            json!([0, 0.5, 0, 0]),
            "invalid type: floating point `0.5`, expected u64",
        ),
        (
            json!([0, "1", 0, 0]),
            "invalid type: string \"1\", expected u64",
        ),
    ] {
        rejects_value(&with("scheduled_steps_by_budget", value), fragment);
    }
    rejects(
        &EXAMPLE_REPORT.replace("[0, 0, 0, 0]", "[0, 18446744073709551616, 0, 0]"),
        "expected u64",
    );
}

#[test]
fn scheduled_budgets_whose_total_overflows_are_rejected() {
    let m = u64::MAX;
    rejects_value(
        &with("scheduled_steps_by_budget", json!([m, 0, 0, 1])),
        "counts too large",
    );
    // Up to the limit they are accepted.
    let h: AcceptanceHistogram =
        serde_json::from_value(with("scheduled_steps_by_budget", json!([m - 1, 0, 0, 1]))).unwrap();
    assert_eq!(h.num_scheduled_steps(), m);
}

#[test]
fn empty_report_parses() {
    let v = json!({
        "mean_acceptance_length": 1.0,
        "draft_acceptance_rate": 0.0,
        "acceptance_histogram": [0, 0],
        "acceptance_histogram_by_draft_length": {},
        "num_spec_steps": 0,
        "num_accepted_draft_tokens": 0,
        "num_draft_tokens": 0,
        "num_spec_tokens": 1,
        "num_accepted_tokens_per_pos": [0],
        "num_draft_tokens_per_pos": [0],
        "num_undrafted_steps": 0,
        "num_rejected_observations": 0
    });
    let h: AcceptanceHistogram = serde_json::from_str(&v.to_string()).unwrap();
    assert_eq!(h, AcceptanceHistogram::new(1).unwrap());
}

#[test]
fn rates_printed_with_fewer_digits_are_accepted() {
    // 39 x (3,0), 1 x (3,1), 3 x (3,3): mean 1 + 10/43, rate 10/129, here
    // printed with 15 significant digits instead of 17 (another JSON writer).
    let v = json!({
        "mean_acceptance_length": 1.23255813953488,
        "draft_acceptance_rate": 0.0775193798449612,
        "acceptance_histogram": [39, 1, 0, 3],
        "acceptance_histogram_by_draft_length": {"3": [39, 1, 0, 3]},
        "num_spec_steps": 43,
        "num_accepted_draft_tokens": 10,
        "num_draft_tokens": 129,
        "num_spec_tokens": 3,
        "num_accepted_tokens_per_pos": [4, 3, 3],
        "num_draft_tokens_per_pos": [43, 43, 43],
        "num_undrafted_steps": 0,
        "num_rejected_observations": 0
    });
    let h: AcceptanceHistogram = serde_json::from_str(&v.to_string()).unwrap();
    assert_eq!(h.count(3, 0), 39);
    // Written back with the exact derived values.
    let back = serde_json::to_value(&h).unwrap();
    assert_eq!(back["mean_acceptance_length"], json!(1.2325581395348837));
    assert_eq!(back["draft_acceptance_rate"], json!(0.07751937984496124));
}

// ---------------------------------------------------------------------------
// Rows.
// ---------------------------------------------------------------------------

#[test]
fn row_shorter_than_k_plus_one_is_rejected() {
    rejects(
        &with_rows_text(r#"{"3": [1, 1, 1]}"#),
        r#"acceptance_histogram_by_draft_length["3"] has 3 counts, expected 4"#,
    );
}

#[test]
fn row_longer_than_k_plus_one_is_rejected() {
    rejects(
        &with_rows_text(r#"{"3": [1, 1, 1, 2, 0]}"#),
        r#"acceptance_histogram_by_draft_length["3"] has 5 counts, expected 4"#,
    );
    rejects(
        &with_rows_text(r#"{"0": [], "3": [1, 1, 1, 2]}"#),
        r#"["0"] has 0 counts, expected 1"#,
    );
}

#[test]
fn row_for_draft_length_above_max_is_rejected() {
    rejects(
        &with_rows_text(r#"{"3": [1, 1, 1, 2], "4": [0, 0, 0, 0, 0]}"#),
        "row for draft length 4, above num_spec_tokens=3",
    );
    rejects(
        &with_rows_text(r#"{"3": [1, 1, 1, 2], "1000": [0]}"#),
        "row for draft length 1000, above num_spec_tokens=3",
    );
}

#[test]
fn draft_length_key_that_is_not_a_canonical_decimal_is_rejected() {
    for key in [
        "x", "01", "-1", "+1", "", "03", "+3", "-3", " 3", "3 ", "3.0", "3e0", "0x3", "\u{0663}",
    ] {
        let rows = format!(r#"{{{}: [1, 1, 1, 2]}}"#, json!(key));
        rejects(
            &with_rows_text(&rows),
            &format!("key {} is not a draft length", json!(key)),
        );
    }
}

#[test]
fn draft_length_key_too_large_for_usize_is_rejected() {
    rejects(
        &with_rows_text(r#"{"3": [1, 1, 1, 2], "99999999999999999999999": [0]}"#),
        r#"key "99999999999999999999999" is not a draft length"#,
    );
}

#[test]
fn duplicate_draft_length_is_rejected() {
    rejects(
        &with_rows_text(r#"{"3": [1, 1, 1, 2], "3": [1, 1, 1, 2]}"#),
        "has draft length 3 more than once",
    );
}

#[test]
fn rows_that_are_not_a_map_of_lists_are_rejected() {
    rejects(
        &with_rows_text("[[1, 1, 1, 2]]"),
        "expected a map from decimal draft lengths to lists of counts",
    );
    rejects(&with_rows_text(r#"{"3": 5}"#), "expected a sequence");
}

// ---------------------------------------------------------------------------
// num_spec_tokens.
// ---------------------------------------------------------------------------

#[test]
fn max_draft_len_zero_is_rejected_naming_the_range() {
    rejects_value(
        &with("num_spec_tokens", json!(0)),
        "must be in 1..=64, got 0",
    );
}

#[test]
fn max_draft_len_65_is_rejected_naming_the_range() {
    let mut v = with("num_spec_tokens", json!(65));
    // Even with lists of the length K = 65 would need.
    v["num_accepted_tokens_per_pos"] = json!(vec![0; 65]);
    rejects_value(&v, "must be in 1..=64, got 65");
}

#[test]
fn max_draft_len_below_the_rows_is_rejected() {
    // K = 2 cannot hold the row k = 3.
    rejects_value(
        &with("num_spec_tokens", json!(2)),
        "row for draft length 3, above num_spec_tokens=2",
    );
}

#[test]
fn max_draft_len_that_is_negative_is_rejected() {
    rejects_value(
        &with("num_spec_tokens", json!(-3)),
        "invalid value: integer `-3`",
    );
}

// ---------------------------------------------------------------------------
// Derived figures that disagree with the rows.
// ---------------------------------------------------------------------------

#[test]
fn num_spec_steps_disagreeing_with_rows_is_rejected() {
    rejects_value(
        &with("num_spec_steps", json!(6)),
        "num_spec_steps is 6 but the histogram rows give 5",
    );
}

#[test]
fn num_draft_tokens_disagreeing_with_rows_is_rejected() {
    rejects_value(
        &with("num_draft_tokens", json!(14)),
        "num_draft_tokens is 14 but the histogram rows give 15",
    );
}

#[test]
fn num_accepted_draft_tokens_disagreeing_with_rows_is_rejected() {
    rejects_value(
        &with("num_accepted_draft_tokens", json!(8)),
        "num_accepted_draft_tokens is 8 but the histogram rows give 9",
    );
}

#[test]
fn acceptance_histogram_disagreeing_with_rows_is_rejected() {
    rejects_value(
        &with("acceptance_histogram", json!([1, 1, 2, 1])),
        "acceptance_histogram[2] is 2 but the histogram rows give 1",
    );
}

#[test]
fn acceptance_histogram_of_wrong_length_is_rejected() {
    rejects_value(
        &with("acceptance_histogram", json!([1, 1, 1])),
        "acceptance_histogram has 3 entries, expected 4",
    );
    rejects_value(
        &with("acceptance_histogram", json!([1, 1, 1, 2, 0])),
        "acceptance_histogram has 5 entries, expected 4",
    );
}

#[test]
fn accepted_per_position_of_wrong_length_or_value_is_rejected() {
    rejects_value(
        &with("num_accepted_tokens_per_pos", json!([4, 3])),
        "num_accepted_tokens_per_pos has 2 entries, expected 3",
    );
    rejects_value(
        &with("num_accepted_tokens_per_pos", json!([4, 3, 3])),
        "num_accepted_tokens_per_pos[2] is 3 but the histogram rows give 2",
    );
}

#[test]
fn drafted_per_position_of_wrong_length_or_value_is_rejected() {
    rejects_value(
        &with("num_draft_tokens_per_pos", json!([5, 5, 5, 5])),
        "num_draft_tokens_per_pos has 4 entries, expected 3",
    );
    rejects_value(
        &with("num_draft_tokens_per_pos", json!([5, 4, 5])),
        "num_draft_tokens_per_pos[1] is 4 but the histogram rows give 5",
    );
}

/// Rates are compared with a relative tolerance of 1e-12 of the derived
/// value (a JSON writer that prints fewer digits is fine).
#[test]
fn rates_within_a_relative_1e_12_are_accepted() {
    let close = 2.8 * (1.0 + 0.5e-12);
    let text = with("mean_acceptance_length", json!(close)).to_string();
    let h: AcceptanceHistogram = serde_json::from_str(&text).unwrap();
    assert_eq!(h.mean_acceptance_length(), 2.8);
    rejects_value(
        &with("mean_acceptance_length", json!(2.8 * (1.0 + 2e-12))),
        "mean_acceptance_length is 2.8000000000056",
    );
}

#[test]
fn mean_acceptance_length_disagreeing_with_rows_is_rejected() {
    rejects_value(
        &with("mean_acceptance_length", json!(2.9)),
        "mean_acceptance_length is 2.9 but the histogram rows give 2.8",
    );
    // Also a small difference, far above the rounding of a JSON writer.
    rejects_value(
        &with("mean_acceptance_length", json!(2.800001)),
        "mean_acceptance_length is 2.800001",
    );
}

#[test]
fn draft_acceptance_rate_disagreeing_with_rows_is_rejected() {
    rejects_value(
        &with("draft_acceptance_rate", json!(0.5)),
        "draft_acceptance_rate is 0.5 but the histogram rows give 0.6",
    );
    // A percentage instead of a fraction.
    rejects_value(
        &with("draft_acceptance_rate", json!(60.0)),
        "draft_acceptance_rate is 60",
    );
}

// ---------------------------------------------------------------------------
// Wrong JSON types and shapes.
// ---------------------------------------------------------------------------

#[test]
fn negative_count_is_rejected() {
    rejects(
        &with_rows_text(r#"{"3": [-1, 1, 1, 2]}"#),
        "invalid value: integer `-1`, expected u64",
    );
    rejects_value(
        &with("num_undrafted_steps", json!(-1)),
        "invalid value: integer `-1`, expected u64",
    );
}

#[test]
fn fractional_count_is_rejected() {
    rejects(
        &with_rows_text(r#"{"3": [1, 1.5, 1, 2]}"#),
        "invalid type: floating point `1.5`, expected u64",
    );
    // Even an integral value written as a float.
    rejects_value(
        &with("num_spec_steps", json!(5.0)),
        "invalid type: floating point `5.0`, expected u64",
    );
}

#[test]
fn count_above_u64_max_is_rejected() {
    rejects_value(
        &with("num_rejected_observations", json!(1e20)),
        "expected u64",
    );
    rejects(
        &EXAMPLE_REPORT.replace(
            r#""num_undrafted_steps": 0"#,
            r#""num_undrafted_steps": 18446744073709551616"#,
        ),
        "expected u64",
    );
}

#[test]
fn rate_of_the_wrong_type_is_rejected() {
    rejects_value(
        &with("mean_acceptance_length", json!("2.8")),
        "invalid type: string \"2.8\", expected f64",
    );
    rejects_value(
        &with("draft_acceptance_rate", Value::Null),
        "invalid type: null, expected f64",
    );
}

#[test]
fn every_missing_key_is_rejected_by_name() {
    // All but the last: reports older than it lack it (see
    // `report_without_scheduled_budgets_reads_as_all_zero`).
    assert_eq!(REPORT_KEYS[12], "scheduled_steps_by_budget");
    for &key in &REPORT_KEYS[..12] {
        let mut v = base();
        assert!(v.as_object_mut().unwrap().remove(key).is_some(), "{key}");
        rejects_value(&v, &format!("missing field `{key}`"));
    }
}

#[test]
fn duplicate_key_is_rejected() {
    rejects(
        &EXAMPLE_REPORT.replace(
            r#""num_spec_steps": 5,"#,
            r#""num_spec_steps": 5, "num_spec_steps": 5,"#,
        ),
        "duplicate field `num_spec_steps`",
    );
}

#[test]
fn unknown_key_is_rejected() {
    // vLLM's engine-wide name, not a key of the report.
    rejects_value(&with("num_drafts", json!(5)), "unknown field `num_drafts`");
    // A misspelling is not silently ignored.
    let mut v = base();
    let obj = v.as_object_mut().unwrap();
    let steps = obj.remove("num_undrafted_steps").unwrap();
    obj.insert("num_undrafted_step".into(), steps);
    rejects_value(&v, "unknown field `num_undrafted_step`");
}

#[test]
fn report_that_is_not_an_object_is_rejected() {
    // The twelve values in key order, as an array: still not a report.
    let array =
        r#"[2.8, 0.6, [1, 1, 1, 2], {"3": [1, 1, 1, 2]}, 5, 9, 15, 3, [4, 3, 2], [5, 5, 5], 0, 0]"#;
    for text in [array, "[]", r#""report""#, "null", "3", "true"] {
        rejects(text, "expected a speculative decoding report object");
    }
}

#[test]
fn counts_whose_drafted_total_overflows_are_rejected() {
    // Row k = 2 with 2^63 full acceptances: 2 * 2^63 = 2^64 drafted tokens.
    let big = 1u64 << 63;
    let v = json!({
        "mean_acceptance_length": 3.0,
        "draft_acceptance_rate": 1.0,
        "acceptance_histogram": [0, 0, big],
        "acceptance_histogram_by_draft_length": {"2": [0, 0, big]},
        "num_spec_steps": big,
        "num_accepted_draft_tokens": u64::MAX,
        "num_draft_tokens": u64::MAX,
        "num_spec_tokens": 2,
        "num_accepted_tokens_per_pos": [big, big],
        "num_draft_tokens_per_pos": [big, big],
        "num_undrafted_steps": 0,
        "num_rejected_observations": 0
    });
    rejects_value(&v, "a derived total exceeds u64::MAX");
}

#[test]
fn counts_whose_step_total_overflows_are_rejected() {
    // Row k = 0 holds u64::MAX steps, row k = 1 one more: 2^64 steps.
    let v = json!({
        "mean_acceptance_length": 1.0,
        "draft_acceptance_rate": 0.0,
        "acceptance_histogram": [u64::MAX, 0],
        "acceptance_histogram_by_draft_length": {"0": [u64::MAX], "1": [1, 0]},
        "num_spec_steps": u64::MAX,
        "num_accepted_draft_tokens": 0,
        "num_draft_tokens": 1,
        "num_spec_tokens": 1,
        "num_accepted_tokens_per_pos": [0],
        "num_draft_tokens_per_pos": [1],
        "num_undrafted_steps": 0,
        "num_rejected_observations": 0
    });
    rejects_value(&v, "a derived total exceeds u64::MAX");
}

#[test]
fn largest_counts_whose_totals_fit_are_accepted() {
    // Row k = 1 with u64::MAX full acceptances: steps = drafted = accepted
    // = u64::MAX, mean 1 + MAX/MAX = 2.0, rate 1.0.
    let m = u64::MAX;
    let v = json!({
        "mean_acceptance_length": 2.0,
        "draft_acceptance_rate": 1.0,
        "acceptance_histogram": [0, m],
        "acceptance_histogram_by_draft_length": {"1": [0, m]},
        "num_spec_steps": m,
        "num_accepted_draft_tokens": m,
        "num_draft_tokens": m,
        "num_spec_tokens": 1,
        "num_accepted_tokens_per_pos": [m],
        "num_draft_tokens_per_pos": [m],
        "num_undrafted_steps": m,
        "num_rejected_observations": m,
        "scheduled_steps_by_budget": [m, 0]
    });
    let h: AcceptanceHistogram = serde_json::from_str(&v.to_string()).unwrap();
    assert_eq!(h.count(1, 1), m);
    assert_eq!(serde_json::to_value(&h).unwrap(), v);
}
