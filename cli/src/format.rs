//! Formatting shared by the subcommands: numbers for people, and input
//! quoted in messages (the quoting is `specdec_ingest::text`'s, whose
//! readers quote the same way).

pub use specdec_ingest::text::{
    EXCERPT_CHARS, display_path, display_url, excerpt, format_bytes, group_digits,
    push_hidden_escaped, redact_userinfo, sanitize,
};

/// A fraction as a percentage with two decimals: `0.625` as `62.50%`.
pub fn percent(v: f64) -> String {
    format!("{:.2}%", v * 100.0)
}

/// Text for the terminal (a table, a JSON line, warnings) with every
/// hidden character (`specdec_ingest::text::is_hidden`) but the line feed as a JSON `\u` escape:
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
