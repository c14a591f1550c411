//! Every log source of `specdec_ingest::source::LOG_SOURCES` (vLLM's and
//! llama.cpp's logs, engines' responses, and any row added there), through
//! the row's own `read_from`, as `advise` reads the file.
//!
//! The input's first line, when it is a row's name (`vllm_log`), picks the
//! row; otherwise the first byte does (modulo the rows). The next byte,
//! when below 16, is `--max-draft-len` (0: none given); the rest is the
//! input, read with `--by-request`. Properties: no panic (overflow checks
//! are on), no hang, memory bounded; what is read is consistent: at least
//! one group, each with the `K` asked for and identified without a panic;
//! a reconstruction's error bound finite and its records without drafts
//! among its lines and summaries; every request listed accepting at most what it
//! drafted.
#![no_main]

use libfuzzer_sys::fuzz_target;
use specdec_ingest::source::{LOG_SOURCES, LogOptions, LogSource};

fuzz_target!(|data: &[u8]| {
    let Some((&first, after_first)) = data.split_first() else {
        return;
    };
    let named = data.iter().position(|&b| b == b'\n').and_then(|i| {
        let name = std::str::from_utf8(&data[..i]).ok()?;
        Some((LogSource::named(name)?, &data[i + 1..]))
    });
    let (source, rest) = named.unwrap_or((
        &LOG_SOURCES[usize::from(first) % LOG_SOURCES.len()],
        after_first,
    ));
    let (max_draft_len, mut input) = match rest.split_first() {
        Some((&b, rest)) if b < 16 => ((b > 0).then_some(usize::from(b)), rest),
        _ => (None, rest),
    };
    let options = LogOptions {
        max_draft_len,
        by_request: true,
    };
    let Ok(read) = (source.read_from)(&mut input, "fuzz.log".to_owned(), &options) else {
        return;
    };
    assert!(!read.counted.groups.is_empty(), "{}", source.name);
    for g in &read.counted.groups {
        let c = &g.built.counters;
        if let Some(k) = max_draft_len {
            assert_eq!(c.max_draft_len(), k, "{}", source.name);
        }
        let _ = c.identify();
    }
    if let Some(rec) = &read.reconstruction {
        assert!(rec.lines + rec.summaries >= rec.lines_without_drafts);
        assert!(rec.max_rate_error.is_finite());
    }
    if let Some(requests) = &read.requests {
        assert!(!requests.is_empty());
        assert!(requests.iter().all(|r| r.accepted <= r.draft_tokens));
    }
});
