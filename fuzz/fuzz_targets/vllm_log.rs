//! The vLLM log reader (`vllm_log::read_from`): the "SpecDecoding
//! metrics" lines of a vLLM log, reconstructed into engine counters.
//!
//! The first byte, when below 16, is `--max-draft-len` (0: none given);
//! the rest is the log. Properties: no panic (overflow checks are on), no
//! hang, memory bounded; counters read are consistent (accepted tokens at
//! most drafted tokens, `K` as the lines give it).
#![no_main]

use libfuzzer_sys::fuzz_target;
use specdec_ingest::source::vllm_log::read_from;

fuzz_target!(|data: &[u8]| {
    let (max_draft_len, log) = match data.split_first() {
        Some((&b, rest)) if b < 16 => ((b > 0).then_some(usize::from(b)), rest),
        _ => (None, data),
    };
    if let Ok((counted, rec)) = read_from(log, "fuzz.log".to_owned(), max_draft_len) {
        assert_eq!(counted.groups.len(), 1);
        let c = &counted.groups[0].built.counters;
        if let Some(k) = max_draft_len {
            assert_eq!(c.max_draft_len(), k);
        }
        assert!(rec.lines >= rec.lines_without_drafts);
        assert!(rec.max_rate_error.is_finite());
    }
});
