//! The `ngram` request reader: JSON Lines of `{"prompt", "output", "id"}`,
//! split as `ngram` splits them (`read_line_bounded`, blank lines skipped)
//! and read by `cmd::ngram::read_request`.
//!
//! Properties: no panic, no hang, memory bounded by the line limit (4 KiB
//! here); a request read, written back as JSON, reads back the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use specdec_metrics_cli::cmd::ngram::read_request;
use specdec_sim::trace::{LineRead, read_line_bounded};

fuzz_target!(|data: &[u8]| {
    let mut reader = data;
    let mut buf = Vec::new();
    let mut line = 0u64;
    loop {
        line += 1;
        match read_line_bounded(&mut reader, &mut buf, 4096).unwrap() {
            LineRead::Eof | LineRead::TooLong => return,
            LineRead::Line => {}
        }
        if buf.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let Ok((id, prompt, output)) = read_request(&buf, line) else {
            return;
        };
        assert!(id.is_string() || id.is_u64() || id.is_i64(), "{id}");
        let written = serde_json::json!({"prompt": prompt, "output": output, "id": id});
        let back = read_request(written.to_string().as_bytes(), line + 1).unwrap();
        assert_eq!(back, (id, prompt, output));
    }
});
