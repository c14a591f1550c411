//! The Prometheus HTTP API answer reader (`prometheus_api::read_series_answer`,
//! `prometheus_api::read_query_answer`): what `advise --prometheus` reads from
//! `/api/v1/series` and `/api/v1/query`.
//!
//! The first byte chooses the endpoint and the HTTP status (200, 400, 422,
//! 503); the rest is the body. Properties: no panic, no hang, memory
//! bounded (the reader holds at most `MAX_SERIES` entries); an answer read
//! has no more entries than `MAX_SERIES`, and every sample is named for its
//! family.
#![no_main]

use libfuzzer_sys::fuzz_target;
use specdec_ingest::source::prometheus_api::{MAX_SERIES, read_query_answer, read_series_answer};

fuzz_target!(|data: &[u8]| {
    let Some((&first, body)) = data.split_first() else {
        return;
    };
    let status = [200, 400, 422, 503][usize::from(first >> 1) % 4];
    if first & 1 == 0 {
        if let Ok((names, _warnings)) = read_series_answer(status, body.to_vec()) {
            assert!(names.len() <= MAX_SERIES);
        }
    } else if let Ok((samples, _warnings)) = read_query_answer(status, body.to_vec(), "f_total") {
        assert!(samples.len() <= MAX_SERIES);
        assert!(samples.iter().all(|s| s.name == "f_total"));
    }
});
