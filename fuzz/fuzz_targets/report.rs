//! The library's strict JSON report reader (`AcceptanceHistogram`'s serde
//! `Deserialize`), as `merge` and `advise` read a report file.
//!
//! Properties: no panic; a report it accepts, written back, reads back as
//! the same histogram, and is written the same byte for byte.
#![no_main]

use libfuzzer_sys::fuzz_target;
use specdec_metrics::AcceptanceHistogram;

fuzz_target!(|data: &[u8]| {
    let Ok(h) = serde_json::from_slice::<AcceptanceHistogram>(data) else {
        return;
    };
    let written = serde_json::to_vec(&h).expect("an accepted report is written");
    let back: AcceptanceHistogram =
        serde_json::from_slice(&written).expect("a written report reads back");
    assert!(back == h, "the report read back differs");
    assert_eq!(serde_json::to_vec(&back).unwrap(), written);
});
