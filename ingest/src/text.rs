//! Text for messages: numbers for people, and names and input quoted so
//! that nothing from outside the process acts on the terminal a message
//! is printed to.

use std::fmt::Write as _;
use std::path::Path;

/// How many characters of input a message quotes at most.
pub const EXCERPT_CHARS: usize = 40;

/// `1234567` as `1,234,567`.
///
/// ```
/// assert_eq!(specdec_ingest::text::group_digits(1234567), "1,234,567");
/// ```
pub fn group_digits(v: u64) -> String {
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

/// A byte count for people: `64 MiB` when it is a whole number of KiB, MiB
/// or GiB, otherwise `1,000 bytes`.
///
/// ```
/// use specdec_ingest::text::format_bytes;
/// assert_eq!(format_bytes(64 << 20), "64 MiB");
/// assert_eq!(format_bytes(1000), "1,000 bytes");
/// ```
pub fn format_bytes(n: u64) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if n >= 1 << shift && n % (1 << shift) == 0 {
            return format!("{} {unit}", group_digits(n >> shift));
        }
    }
    format!("{} byte{}", group_digits(n), if n == 1 { "" } else { "s" })
}

/// Input (a key, a value) quoted for a message: in double quotes, with
/// control and invisible formatting characters escaped as JSON escapes
/// (`\u001b`), so that nothing from the input acts on the user's terminal,
/// and cut after [`EXCERPT_CHARS`] characters (the length of the whole then
/// follows, in bytes), so that a huge value is never echoed whole.
///
/// ```
/// use specdec_ingest::text::excerpt;
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

/// The longest message printed whole; a longer one keeps its head and tail.
const MAX_MESSAGE_CHARS: usize = 1000;

/// A whole message made safe to print, whatever input it came to carry
/// (a file name, text from a library's error): control and invisible
/// formatting characters escaped as in [`excerpt`], and, past
/// `MAX_MESSAGE_CHARS` (1,000) characters, the middle cut out. Messages quote
/// input through [`excerpt`] already; this is the net under them.
///
/// ```
/// use specdec_ingest::text::sanitize;
/// assert_eq!(sanitize("a\u{1b}b\nc"), "a\\u001bb\\nc");
/// ```
pub fn sanitize(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len().min(4 * MAX_MESSAGE_CHARS));
    let count = msg.chars().count();
    let (head, tail) = (MAX_MESSAGE_CHARS * 3 / 4, MAX_MESSAGE_CHARS / 4);
    for (i, c) in msg.chars().enumerate() {
        if count > MAX_MESSAGE_CHARS && i == head {
            let _ = write!(
                out,
                "…[{} characters cut]…",
                group_digits((count - head - tail) as u64)
            );
        }
        if count > MAX_MESSAGE_CHARS && (head..count - tail).contains(&i) {
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => push_hidden_escaped(&mut out, c),
        }
    }
    out
}

/// A path as every message shows it: as [`Path::display`] writes it
/// (bytes that are not UTF-8 as U+FFFD) and [sanitized](sanitize).
pub fn display_path(path: &Path) -> String {
    sanitize(&path.display().to_string())
}

/// How messages name the input at `path`: `<stdin>` for `-`, the path
/// [escaped](display_path) otherwise.
///
/// ```
/// use specdec_ingest::text::input_name;
/// assert_eq!(input_name("-".as_ref()), "<stdin>");
/// assert_eq!(input_name("a\u{1b}.log".as_ref()), "a\\u001b.log");
/// ```
pub fn input_name(path: &Path) -> String {
    if crate::lines::is_stdin(path) {
        "<stdin>".to_owned()
    } else {
        display_path(path)
    }
}

/// A URL as every message shows it: its userinfo (`user:password@`)
/// replaced by `***@`, so that a password in the URL is never printed,
/// then [sanitized](sanitize).
pub fn display_url(url: &str) -> String {
    sanitize(&redact_userinfo(url))
}

/// `url` without its userinfo: `http://user:pw@host/x` as
/// `http://***@host/x`. Only the authority (after `scheme://`, up to the
/// first `/`, `?` or `#`) is looked at, so an `@` in a path or query stays.
///
/// ```
/// use specdec_ingest::text::redact_userinfo;
/// assert_eq!(redact_userinfo("http://u:p@h/x@y"), "http://***@h/x@y");
/// ```
pub fn redact_userinfo(url: &str) -> String {
    let Some(start) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let rest = &url[start..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{}***{}", &url[..start], &rest[at..]),
        None => url.to_owned(),
    }
}

/// Pushes `c`, escaped when it must not reach a terminal as it is.
fn push_escaped(out: &mut String, c: char) {
    match c {
        '"' => out.push_str("\\\""),
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c => push_hidden_escaped(out, c),
    }
}

/// Pushes `c`, as a JSON `\u` escape if it is [hidden](is_hidden).
pub fn push_hidden_escaped(out: &mut String, c: char) {
    if is_hidden(c) {
        let mut units = [0u16; 2];
        for unit in c.encode_utf16(&mut units) {
            let _ = write!(out, "\\u{unit:04x}");
        }
    } else {
        out.push(c);
    }
}

/// Characters that would act on a terminal or hide what a message says:
/// control characters (C0, DEL, C1), and the invisible formatting
/// characters that reorder or hide text (bidirectional overrides and
/// isolates, zero-width characters, the byte-order mark).
pub fn is_hidden(c: char) -> bool {
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
    use std::path::Path;

    #[test]
    fn digits_are_grouped_by_three() {
        assert_eq!(group_digits(0), "0");
        assert_eq!(group_digits(999), "999");
        assert_eq!(group_digits(1000), "1,000");
        assert_eq!(group_digits(1_234_567), "1,234,567");
        assert_eq!(group_digits(u64::MAX), "18,446,744,073,709,551,615");
    }

    #[test]
    fn bytes_in_the_largest_whole_unit() {
        assert_eq!(format_bytes(64 << 20), "64 MiB");
        assert_eq!(format_bytes(1 << 30), "1 GiB");
        assert_eq!(format_bytes(3 << 10), "3 KiB");
        assert_eq!(format_bytes(1000), "1,000 bytes");
        assert_eq!(format_bytes(1), "1 byte");
    }

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
        let e = excerpt(&long);
        assert_eq!(
            e,
            format!("\"{}…\" (1,000,000 bytes)", "x".repeat(EXCERPT_CHARS))
        );
        let exactly = "y".repeat(EXCERPT_CHARS);
        assert_eq!(excerpt(&exactly), format!("\"{exactly}\""));
        // Cut by characters, never inside one.
        let wide = "é".repeat(100);
        assert!(excerpt(&wide).starts_with(&format!("\"{}…", "é".repeat(EXCERPT_CHARS))));
    }

    #[test]
    fn messages_are_sanitized() {
        assert_eq!(
            sanitize("x.json: unknown field `\u{1b}]0;t\u{7}`, expected \"a\""),
            "x.json: unknown field `\\u001b]0;t\\u0007`, expected \"a\""
        );
        assert_eq!(sanitize("a\nb"), "a\\nb");
        let short = "s".repeat(MAX_MESSAGE_CHARS);
        assert_eq!(sanitize(&short), short);
        let long = format!(
            "{}{}{}",
            "h".repeat(750),
            "m".repeat(1_000_000),
            "t".repeat(250)
        );
        assert_eq!(
            sanitize(&long),
            format!(
                "{}…[1,000,000 characters cut]…{}",
                "h".repeat(750),
                "t".repeat(250)
            )
        );
    }

    #[test]
    fn paths_are_shown_escaped() {
        assert_eq!(
            display_path(Path::new("examples/batch/bs1-8.json")),
            "examples/batch/bs1-8.json"
        );
        assert_eq!(
            display_path(Path::new("r\u{1b}]0;pwned\u{7}.json")),
            "r\\u001b]0;pwned\\u0007.json"
        );
        assert_eq!(display_path(Path::new("a\u{202e}b\nc")), "a\\u202eb\\nc");
    }
}
