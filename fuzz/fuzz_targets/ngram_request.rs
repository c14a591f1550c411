//! The `ngram` request reader (`specdec_ingest::trace::RequestReader`):
//! JSON Lines of `{"prompt" or "messages", "output", "id"}`, blank lines
//! skipped.
//!
//! Properties: no panic, no hang, memory bounded by the line limit (4 KiB
//! here); it stops at its first error; every request read has the line
//! number of a non-blank line, and written back as JSON reads back the
//! same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use specdec_ingest::trace::{Prompt, RequestReader, TextRequest};

fuzz_target!(|data: &[u8]| {
    let mut reader = RequestReader::with_max_line_bytes(data, 4096);
    let mut last_line = 0;
    for request in reader.by_ref() {
        let Ok(request) = request else { break };
        let TextRequest {
            line,
            id,
            prompt,
            output,
        } = request.clone();
        assert!(line > last_line, "line {line} after line {last_line}");
        last_line = line;
        let text = data.split(|&b| b == b'\n').nth(line as usize - 1).unwrap();
        assert!(!text.iter().all(u8::is_ascii_whitespace), "line {line} is blank");
        assert!(id.is_string() || id.is_u64() || id.is_i64(), "{id}");
        let written = match prompt {
            Prompt::Text(text) => serde_json::json!({"prompt": text, "output": output, "id": id}),
            Prompt::Messages(turns) => {
                let turns: Vec<_> = turns
                    .iter()
                    .map(|m| serde_json::json!({"role": m.role, "content": m.content}))
                    .collect();
                serde_json::json!({"messages": turns, "output": output, "id": id})
            }
        };
        let back = TextRequest::parse(written.to_string().as_bytes(), line).unwrap();
        assert_eq!(back, request);
    }
    assert!(reader.next().is_none(), "yields after its end");
});
