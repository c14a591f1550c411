//! Formatting shared by the subcommands: numbers for people, and input
//! quoted in messages.

use std::fmt::Write as _;
use std::path::Path;

/// How many characters of input a message quotes at most.
pub const EXCERPT_CHARS: usize = 40;

/// `1234567` as `1,234,567`.
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

/// A fraction as a percentage with two decimals: `0.625` as `62.50%`.
pub fn percent(v: f64) -> String {
    format!("{:.2}%", v * 100.0)
}

/// A byte count for people: `64 MiB` when it is a whole number of KiB, MiB
/// or GiB, otherwise `1,000 bytes`.
pub fn format_bytes(n: u64) -> String {
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if n >= 1 << shift && n % (1 << shift) == 0 {
            return format!("{} {unit}", group_digits(n >> shift));
        }
    }
    format!("{} byte{}", group_digits(n), if n == 1 { "" } else { "s" })
}

/// Input (a key, a flag value) quoted for a message: in double quotes, with
/// control and invisible formatting characters escaped as JSON escapes
/// (`\u001b`), so that nothing from the input acts on the user's terminal,
/// and cut after [`EXCERPT_CHARS`] characters (the length of the whole then
/// follows, in bytes), so that a huge value is never echoed whole.
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
/// [`MAX_MESSAGE_CHARS`] characters, the middle cut out. Messages quote
/// input through [`excerpt`] already; this is the net under them.
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

/// A path (a file name given on the command line) as every message and
/// table shows it: as [`Path::display`] writes it (bytes that are not UTF-8
/// as U+FFFD) and [sanitized](sanitize), so that a name holding control
/// characters cannot act on the terminal it is printed to.
pub fn display_path(path: &Path) -> String {
    sanitize(&path.display().to_string())
}

/// A URL as every message, table and JSON `source` shows it: its userinfo
/// (`user:password@`) replaced by `***@`, so that a password in the URL is
/// never printed, then [sanitized](sanitize).
pub fn display_url(url: &str) -> String {
    sanitize(&redact_userinfo(url))
}

/// `url` without its userinfo: `http://user:pw@host/x` as
/// `http://***@host/x`. Only the authority (after `scheme://`, up to the
/// first `/`, `?` or `#`) is looked at, so an `@` in a path or query stays.
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

/// Text for the terminal (a table, a JSON line, warnings) with every
/// [hidden](is_hidden) character but the line feed as a JSON `\u` escape:
/// whatever an endpoint put in a label value (`\x1b]0;...\x07`, U+202E)
/// cannot act on the terminal or reorder what it shows. In a JSON line
/// the escapes are the same string (serde writes control characters
/// escaped already, and no hidden character occurs outside a string).
pub fn escape_hidden(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c == '\n' {
            out.push(c);
        } else {
            push_hidden_escaped(&mut out, c);
        }
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

/// `v` with `digits` significant digits (at least none after the point):
/// `2.400`, `0.01235`, `1235`. Whatever the unit of the cost, a goodput
/// keeps its precision.
pub fn significant(v: f64, digits: i32) -> String {
    if v == 0.0 || !v.is_finite() {
        return v.to_string();
    }
    let magnitude = v.abs().log10().floor() as i32;
    let decimals = (digits - 1 - magnitude).clamp(0, 15) as usize;
    format!("{v:.decimals$}")
}

/// A number without its trailing zeros: `1.450` as `1.45`, `20.0` as `20`.
pub fn trimmed(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

/// A probability as a percentage without needless decimals: `90%`,
/// `99.9%`.
pub fn level_percent(p: f64) -> String {
    format!("{}%", trimmed(significant(p * 100.0, 6)))
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn significant_digits_drop_trailing_zeros() {
        assert_eq!(trimmed(significant(1.0 + 0.15 * 3.0, 6)), "1.45");
        assert_eq!(trimmed(significant(20.0, 6)), "20");
        assert_eq!(significant(2.4, 4), "2.400");
        assert_eq!(significant(0.012_345_6, 4), "0.01235");
        assert_eq!(significant(1234.56, 4), "1235");
        assert_eq!(significant(0.0, 4), "0");
        assert_eq!(level_percent(0.9), "90%");
        assert_eq!(level_percent(0.999), "99.9%");
    }

    #[test]
    fn percentages_have_two_decimals() {
        assert_eq!(percent(0.625), "62.50%");
        assert_eq!(percent(1.0), "100.00%");
        assert_eq!(percent(0.0), "0.00%");
    }
}
