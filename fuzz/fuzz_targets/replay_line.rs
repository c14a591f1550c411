//! One line of `replay`'s input (`specdec_ingest::steps::LineParser`).
//!
//! Properties: no panic; `parse` (fast path first) gives exactly what the
//! serde path `parse_slow` gives, accept or reject, values and message;
//! and where a plain step, an undrafted step or a scheduler step reads with
//! serde's derived, strict structs, the parser reads the same values.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde::Deserialize;
use specdec_ingest::steps::{LineParser, Record};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Step {
    drafted: u64,
    accepted: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Undrafted {
    undrafted: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Scheduled {
    scheduled: u64,
}

fuzz_target!(|data: &[u8]| {
    let mut fast = LineParser::new();
    let mut slow = LineParser::new();
    let got = fast.parse(data);
    // `parse` strips one "\n" then one "\r"; the serde path is given the
    // line as `parse` sees it.
    let line = data.strip_suffix(b"\n").unwrap_or(data);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let blank = line
        .iter()
        .all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
    if blank {
        assert_eq!(got, Ok(Record::Blank));
        return;
    }
    let want = slow.parse_slow(line);
    assert_eq!(got, want, "fast path and serde path disagree");

    // The strict derived structs, where they apply: to objects (a derived
    // struct also reads an array of its values, which is no line's shape;
    // a BOM is the line's error either way, serde_json does not skip one).
    if line.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return;
    }
    if let Ok(step) = serde_json::from_slice::<Step>(line) {
        assert_eq!(
            got,
            Ok(Record::Step {
                drafted: step.drafted,
                accepted: step.accepted
            })
        );
    }
    if let Ok(u) = serde_json::from_slice::<Undrafted>(line) {
        if u.undrafted {
            assert_eq!(got, Ok(Record::Undrafted));
        } else {
            assert!(got.is_err(), "{{\"undrafted\": false}} accepted");
        }
    }
    if let Ok(s) = serde_json::from_slice::<Scheduled>(line) {
        assert_eq!(
            got,
            Ok(Record::Scheduled {
                budget: s.scheduled
            })
        );
    }
});
