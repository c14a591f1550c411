//! The llama.cpp log reader (`llamacpp_log::read_from`): its `statistics`
//! and `print_timing` lines, reconstructed into engine counters.
//!
//! The first byte, when below 16, is `--max-draft-len` (0: none given);
//! the rest is the log. Properties: no panic (overflow checks are on), no
//! hang, memory bounded; counters read are consistent (at least one group,
//! `K` as given) and identified without a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use specdec_ingest::source::llamacpp_log::read_from;

fuzz_target!(|data: &[u8]| {
    let (max_draft_len, log) = match data.split_first() {
        Some((&b, rest)) if b < 16 => ((b > 0).then_some(usize::from(b)), rest),
        _ => (None, data),
    };
    if let Ok(read) = read_from(log, "fuzz.log".to_owned(), max_draft_len) {
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
