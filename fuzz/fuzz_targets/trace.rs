//! The n-gram what-if trace reader (`specdec_ingest::trace::TraceReader`),
//! what `whatif` reads.
//!
//! Properties: no panic, no hang, memory bounded by the line limit (4 KiB
//! here, so that the fuzzer reaches it); every request read meets the
//! format's rules (arrays of `max(M - 1, 0)` entries, `match <= proposal
//! <= cap`; `ngram` and `score`, when there, of as many entries; `below`
//! entries in order, each below the cap, `match <=
//! proposal <= its cap`, and every cap's outcome within it); and the
//! metadata and requests read (version 1 or 2), written back by the writer
//! (version 2), read back the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use specdec_ingest::trace::{TraceReader, write_meta, write_request};

fuzz_target!(|data: &[u8]| {
    let mut reader = TraceReader::with_max_line_bytes(data, 4096);
    let meta = match reader.meta() {
        Ok(m) => m.cloned(),
        Err(_) => return,
    };
    let cap = reader.cap().unwrap();
    let mut requests = Vec::new();
    for r in reader.by_ref() {
        match r {
            Ok(r) => requests.push(r),
            Err(_) => break,
        }
    }
    assert!(reader.next().is_none(), "yields after its end");
    let mut written = Vec::new();
    if let Some(m) = &meta {
        write_meta(&mut written, m).unwrap();
    }
    for r in &requests {
        let positions = usize::try_from(r.output_tokens.saturating_sub(1)).unwrap();
        assert_eq!(r.proposal.len(), positions);
        assert_eq!(r.matched.len(), positions);
        assert_eq!(r.positions(), positions);
        for (&l, &m) in r.proposal.iter().zip(&r.matched) {
            assert!(m <= l && usize::from(l) <= cap);
        }
        for optional in [&r.ngram, &r.score].into_iter().flatten() {
            assert_eq!(optional.len(), positions);
        }
        for pair in r.below.windows(2) {
            assert!((pair[0].position, pair[0].cap) < (pair[1].position, pair[1].cap));
        }
        for b in &r.below {
            assert!((b.position as usize) < positions && usize::from(b.cap) < cap);
            assert!(b.matched <= b.proposal && b.proposal <= b.cap);
        }
        for j in r.below.iter().map(|b| b.position as usize) {
            for k in 1..=cap {
                let (drafted, held) = r.outcome(j, k);
                assert!(held <= drafted && drafted <= k);
            }
        }
        write_request(&mut written, r).unwrap();
    }
    let mut back = TraceReader::new(written.as_slice());
    assert_eq!(back.meta().unwrap().cloned(), meta);
    let again: Vec<_> = back
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("written back, it does not read: {e}"));
    assert_eq!(again, requests);
});
