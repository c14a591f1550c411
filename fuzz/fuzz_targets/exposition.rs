//! The Prometheus exposition parser (`exposition::parse`), both formats.
//!
//! Properties: no panic; text it accepts, written back in the classic
//! format (every sample, with a `# TYPE` line for each sample name the text
//! typed with a type the classic format has), parses to the same samples
//! (names, labels in order, values bit for bit, any NaN for NaN) and gives
//! those names the same types.
#![no_main]

use std::fmt::Write as _;

use libfuzzer_sys::fuzz_target;
use specdec_ingest::exposition::{Exposition, Format, Sample, parse};

const CLASSIC_TYPES: &[&str] = &["counter", "gauge", "histogram", "summary", "untyped"];

fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        // Rust's shortest representation that reads back to the same bits.
        format!("{v:?}")
    }
}

fn write_classic(e: &Exposition) -> String {
    let mut text = String::new();
    let mut typed = std::collections::HashSet::new();
    for s in &e.samples {
        if let Some(t) = e.type_of(&s.name)
            && CLASSIC_TYPES.contains(&t)
            && typed.insert(s.name.clone())
        {
            writeln!(text, "# TYPE {} {t}", s.name).unwrap();
        }
    }
    for s in &e.samples {
        text.push_str(&s.name);
        if !s.labels.is_empty() {
            text.push('{');
            for (i, (n, v)) in s.labels.iter().enumerate() {
                if i > 0 {
                    text.push(',');
                }
                write!(text, "{n}=\"{}\"", escape(v)).unwrap();
            }
            text.push('}');
        }
        writeln!(text, " {}", number(s.value)).unwrap();
    }
    text
}

fn same(a: &Sample, b: &Sample) -> bool {
    a.name == b.name
        && a.labels == b.labels
        && (a.value.to_bits() == b.value.to_bits() || (a.value.is_nan() && b.value.is_nan()))
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(e) = parse(text) else {
        return;
    };
    let written = write_classic(&e);
    let back = parse(&written)
        .unwrap_or_else(|err| panic!("written back, it does not parse: {err}\n{written}"));
    assert_eq!(back.format, Format::Classic);
    assert_eq!(back.samples.len(), e.samples.len(), "{written}");
    for (a, b) in e.samples.iter().zip(&back.samples) {
        assert!(same(a, b), "{a:?} read back as {b:?}");
        let t = e.type_of(&a.name).filter(|t| CLASSIC_TYPES.contains(t));
        assert_eq!(back.type_of(&a.name), t, "{written}");
    }
});
