//! Input quoted in a message: short, and unable to act on a terminal.
//!
//! Every reader here names what it refused, and what it refused came from
//! outside the process: a key of a million bytes, or an escape sequence
//! that retitles the user's terminal. [`excerpt`] is the one way input
//! enters a message.

use std::fmt::Write as _;

/// How many characters of input a message quotes at most.
pub const EXCERPT_CHARS: usize = 40;

/// Input (a key, a value) quoted for a message: in double quotes, with
/// control and invisible formatting characters escaped as JSON escapes
/// (`\u001b`), so that nothing from the input acts on the user's terminal,
/// and cut after [`EXCERPT_CHARS`] characters (the length of the whole then
/// follows, in bytes), so that a huge value is never echoed whole.
///
/// ```
/// use specdec_ingest::excerpt::excerpt;
/// assert_eq!(excerpt("\u{1b}]0;t\u{7}"), r#""\u001b]0;t\u0007""#);
/// assert!(excerpt(&"k".repeat(5000)).ends_with("…\" (5,000 bytes)"));
/// ```
pub fn excerpt(s: &str) -> String {
    let mut out = String::with_capacity(EXCERPT_CHARS + 16);
    out.push('"');
    let mut chars = s.chars();
    for c in chars.by_ref().take(EXCERPT_CHARS) {
        push_escaped(&mut out, c);
    }
    if chars.next().is_some() {
        let _ = write!(out, "…\" ({} bytes)", group_digits(s.len() as u64));
    } else {
        out.push('"');
    }
    out
}

/// `1234567` as `1,234,567`.
fn group_digits(v: u64) -> String {
    let digits = v.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Pushes `c`, escaped when it must not reach a terminal as it is.
fn push_escaped(out: &mut String, c: char) {
    match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if is_hidden(c) => {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        }
        c => out.push(c),
    }
}

/// Characters that would act on a terminal or hide what a message says:
/// control characters (C0, DEL, C1), and the invisible formatting
/// characters that reorder or hide text (bidirectional overrides and
/// isolates, zero-width characters, the byte-order mark).
fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{00ad}'
            | '\u{061c}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{206f}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_escape_what_would_reach_the_terminal() {
        assert_eq!(excerpt("drafted"), r#""drafted""#);
        assert_eq!(excerpt("\u{1b}]0;pwned\u{7}"), r#""\u001b]0;pwned\u0007""#);
        assert_eq!(excerpt("a\"b\\c\nd\te\r"), r#""a\"b\\c\nd\te\r""#);
        assert_eq!(excerpt("\u{7f}\u{9b}"), r#""\u007f\u009b""#);
        assert_eq!(
            excerpt("abc\u{202e}def\u{200b}\u{feff}"),
            r#""abc\u202edef\u200b\ufeff""#
        );
        assert_eq!(excerpt("clé ✓"), "\"clé ✓\"");
    }

    #[test]
    fn excerpts_are_short() {
        let long = "x".repeat(1_000_000);
        assert_eq!(
            excerpt(&long),
            format!("\"{}…\" (1,000,000 bytes)", "x".repeat(EXCERPT_CHARS))
        );
        let exactly = "y".repeat(EXCERPT_CHARS);
        assert_eq!(excerpt(&exactly), format!("\"{exactly}\""));
        // Cut by characters, never inside one.
        let wide = "é".repeat(100);
        assert!(excerpt(&wide).starts_with(&format!("\"{}…", "é".repeat(EXCERPT_CHARS))));
    }
}
