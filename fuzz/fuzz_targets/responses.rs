//! The responses reader (`responses::read_from`): engines' per-request
//! figures, one response per line (JSON or server-sent events), pooled
//! per model.
//!
//! The first byte, when below 16, is `--max-draft-len` (0: none given);
//! the rest is the responses. Properties: no panic (overflow checks are
//! on), no hang, memory bounded; what is read is consistent (one request
//! listed with figures, none accepting more tokens than it drafted,
//! `K` as given) and identified without a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use specdec_ingest::source::responses::read_from;

fuzz_target!(|data: &[u8]| {
    let (max_draft_len, text) = match data.split_first() {
        Some((&b, rest)) if b < 16 => ((b > 0).then_some(usize::from(b)), rest),
        _ => (None, data),
    };
    if let Ok(read) = read_from(text, "fuzz.jsonl".to_owned(), true, max_draft_len) {
        let requests = read.requests.expect("by request");
        assert!(!requests.is_empty());
        assert!(requests.iter().all(|r| r.accepted <= r.draft_tokens));
        assert!(!read.counted.groups.is_empty());
        for g in &read.counted.groups {
            let c = &g.built.counters;
            if let Some(k) = max_draft_len {
                assert_eq!(c.max_draft_len(), k);
            }
            let _ = c.identify();
        }
    }
});
