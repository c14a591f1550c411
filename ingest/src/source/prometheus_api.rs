//! The Prometheus HTTP API (or Thanos, Mimir, VictoriaMetrics):
//! `increase()` of an engine's [families](crate::schema) over a window,
//! summed by [`Settings::by`] across instances, through `/api/v1/query`;
//! the families are found with `/api/v1/series` over the same window.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::counters::{self, Values};
use crate::error::{Error, Message, Setting, SourceError};
use crate::exposition::Sample;
use crate::http::{self, Limits};
use crate::schema::{self, Families};
use crate::text::{display_url, excerpt, group_digits};
use crate::{Counted, Read, Settings, Source, message};

use super::finish;

/// `increase()` over `window` (a Prometheus duration) ending at `at`
/// (Unix seconds, default now) of the series of the Prometheus at `url`
/// that match `selector` (label matchers in braces).
#[derive(Debug)]
pub struct PrometheusQuery {
    /// The server's base URL.
    pub url: String,
    /// The window, as Prometheus writes durations.
    pub window: String,
    /// Label matchers every series must match.
    pub selector: Option<String>,
    /// The end of the window, Unix seconds.
    pub at: Option<String>,
}

impl Source for PrometheusQuery {
    fn read(&self, settings: &Settings) -> Result<Read, SourceError> {
        Ok(Read {
            counted: from_prometheus(
                &self.url,
                &self.window,
                self.selector.as_deref(),
                self.at.as_deref(),
                settings,
            )?,
            reconstruction: None,
            by: Some(settings.by.clone()),
            read_as: None,
            requests: None,
            exact_from: None,
        })
    }
}

/// A Prometheus server at `url`: `increase()` of every family over the
/// `window` ending at `at` (default: now), summed by [`Settings::by`] across
/// instances and engines, through `/api/v1/query`; the families are found
/// with `/api/v1/series` over the same window.
pub fn from_prometheus(
    url: &str,
    window: &str,
    selector: Option<&str>,
    at: Option<&str>,
    settings: &Settings,
) -> Result<Counted, Error> {
    let base = url.trim_end_matches('/');
    let shown = display_url(base);
    let inner = match selector {
        None => String::new(),
        Some(s) => parse_selector(s)
            .map_err(|e| message![Setting::Selector, format!(" {}: {e}", excerpt(s))])?,
    };
    let seconds =
        parse_duration(window).map_err(|e| message![Setting::Window, format!(": {e}")])?;
    let end = window_end(at)?;
    let end_text = format!("{end:.3}");
    let start_text = format!("{:.3}", (end - seconds).max(0.0));

    // The names in the window, for detection.
    let pattern = series_pattern();
    let matcher = if inner.is_empty() {
        format!("{{__name__=~\"{pattern}\"}}")
    } else {
        format!("{{__name__=~\"{pattern}\",{inner}}}")
    };
    let mut warnings = Vec::new();
    let series: Capped<SeriesName> = api(
        base,
        "series",
        &[
            ("match[]", &matcher),
            ("start", &start_text),
            ("end", &end_text),
        ],
        settings.limits,
        &mut warnings,
    )?;
    let names: Vec<String> = series.0.into_iter().filter_map(|s| s.name).collect();
    let families = schema::detect(
        names.iter().map(String::as_str),
        settings.engine,
        settings.prefix.as_deref(),
        &format!("{shown} (window {window})"),
    )?;

    let by = &settings.by;
    let queries = family_queries(&families, by, window, &inner);
    let mut samples = Vec::new();
    for (family, query) in &queries {
        let data: QueryData = api(
            base,
            "query",
            &[("query", query), ("time", &end_text)],
            settings.limits,
            &mut warnings,
        )?;
        samples.extend(query_samples(data, family, query, &shown)?);
    }
    let groups = counters::group(&samples, &families, by, Values::Extrapolated)
        .map_err(|e| e.after(format!("{shown}: ")))?;
    let mut counted = finish(
        format!("{shown}, increase() over {window} ending at {end_text}"),
        families,
        groups,
        settings,
        Values::Extrapolated,
    )?;
    note_partial(&mut counted, &warnings);
    Ok(counted)
}

/// The end of the window: `at`, or now.
fn window_end(at: Option<&str>) -> Result<f64, Error> {
    Ok(match at {
        Some(t) => t
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|t| t.is_finite() && (0.0..=MAX_UNIX_SECONDS).contains(t))
            .ok_or_else(|| {
                message![
                    Setting::At,
                    format!(
                        " {}: give the end of the window as Unix seconds from 0 to {MAX_UNIX_SECONDS} (e.g. 1700000000)",
                        excerpt(t)
                    ),
                ]
            })?,
        None => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64()),
    })
}

/// The names `/api/v1/series` is asked for (a regular expression, which
/// Prometheus anchors): every name [`schema::detect`] tells families by —
/// vLLM's shape, this crate's by-draft-length family, each schema's own
/// suffix ([`schema::Detect`]) after its prefix — and llama.cpp's names,
/// whose absence says the server is too old. The schemas' suffixes are
/// metric-name characters, which match themselves (a test checks).
fn series_pattern() -> String {
    let mut pattern =
        ".+(_num_drafts_total|_num_accepted_tokens_per_pos_total|_acceptance_by_draft_length_total"
            .to_owned();
    for d in schema::SCHEMAS.iter().filter_map(|s| s.detect.as_ref()) {
        pattern.push('|');
        pattern.push_str(d.prefix_ends_with);
        pattern.push_str(d.suffix);
    }
    pattern.push_str(")|llamacpp:.+");
    pattern
}

/// One query per family: `sum by` the group label (and the family's own
/// labels) of `increase()` over the window, with the family it reads.
fn family_queries(
    families: &Families,
    by: &str,
    window: &str,
    inner: &str,
) -> Vec<(String, String)> {
    let mut queries: Vec<(String, String)> = Vec::new();
    let selected = |f: &str| {
        if inner.is_empty() {
            format!("{f}[{window}]")
        } else {
            format!("{f}{{{inner}}}[{window}]")
        }
    };
    if let Some(buckets) = families.by_draft_length() {
        // Every figure comes from the buckets (see engines::build).
        queries.push((
            buckets.clone(),
            format!(
                "sum by ({by}, draft_length, accepted) (increase({}))",
                selected(&buckets)
            ),
        ));
    } else {
        // TensorRT-LLM's drafts are its drafted-per-position family, read
        // by position below.
        let drafts = families.has_drafts_family().then(|| families.drafts());
        for f in drafts
            .into_iter()
            .chain([families.draft_tokens(), families.accepted_tokens()])
        {
            queries.push((
                f.clone(),
                format!("sum by ({by}) (increase({}))", selected(&f)),
            ));
        }
        let position = families.position_label();
        for f in std::iter::once(families.accepted_per_pos()).chain(families.draft_tokens_per_pos())
        {
            queries.push((
                f.clone(),
                format!("sum by ({by}, {position}) (increase({}))", selected(&f)),
            ));
        }
    }
    queries
}

/// Marks every group's advice as maybe missing series when Prometheus
/// answered with warnings.
fn note_partial(counted: &mut Counted, warnings: &[String]) {
    // A partial response (a store or querier that did not answer) is
    // data that may be missing: every group's advice says so.
    if !warnings.is_empty() {
        for g in &mut counted.groups {
            g.built.notes.push(Message::new(format!(
                "PARTIAL DATA? Prometheus (or Thanos, Mimir) sent {} warning{} with its answers, as it does with a partial response: the counts, and so this advice, may miss series",
                warnings.len(),
                if warnings.len() == 1 { "" } else { "s" }
            )));
            g.built.notes.extend(warnings.iter().map(Message::new));
        }
    }
}

/// The samples of an instant vector (`data` of `/api/v1/query`), each
/// named `family`; `query` and `shown` (the URL) are for messages.
fn query_samples(
    data: QueryData,
    family: &str,
    query: &str,
    shown: &str,
) -> Result<Vec<Sample>, Error> {
    let result = data.result.ok_or_else(|| {
        Error::new(format!(
            "{shown}: the answer to {query} has no result vector"
        ))
    })?;
    let mut samples = Vec::with_capacity(result.0.len());
    for r in result.0 {
        let value = r
            .value
            .and_then(|(_, v)| match v.as_str() {
                "NaN" => Some(f64::NAN),
                "+Inf" => Some(f64::INFINITY),
                "-Inf" => Some(f64::NEG_INFINITY),
                v => v.parse().ok(),
            })
            .ok_or_else(|| Error::new(format!("{shown}: a sample of {query} has no value")))?;
        samples.push(Sample {
            name: family.to_owned(),
            labels: r.metric.into_iter().collect(),
            value,
        });
    }
    Ok(samples)
}

/// An answer of `/api/v1/series` (HTTP `status`, `body`) as [`PrometheusQuery`]
/// reads it: the names of its series, and the warnings it carried. For the
/// fuzz targets (`fuzz/`), which feed it answers without a server.
///
/// ```
/// use specdec_ingest::source::prometheus_api::read_series_answer;
/// let body = br#"{"status":"success","data":[{"__name__":"a_total","job":"x"},{}]}"#;
/// let (names, warnings) = read_series_answer(200, body.to_vec()).unwrap();
/// assert_eq!((names, warnings.len()), (vec!["a_total".to_owned()], 0));
/// assert!(read_series_answer(200, b"<html>".to_vec()).is_err());
/// ```
pub fn read_series_answer(status: u16, body: Vec<u8>) -> Result<(Vec<String>, Vec<String>), Error> {
    let mut warnings = Vec::new();
    let series: Capped<SeriesName> = decode(
        "http://prometheus/api/v1/series",
        &[("match[]", "{}")],
        answer(status, body),
        &mut warnings,
    )?;
    let names = series.0.into_iter().filter_map(|s| s.name).collect();
    Ok((names, warnings))
}

/// An answer of `/api/v1/query` (HTTP `status`, `body`) as [`PrometheusQuery`]
/// reads it: its samples, each named `family`, and the warnings it
/// carried. For the fuzz targets (`fuzz/`).
///
/// ```
/// use specdec_ingest::source::prometheus_api::read_query_answer;
/// let body = br#"{"status":"success","data":{"result":[{"metric":{"m":"a"},"value":[1,"2.5"]}]}}"#;
/// let (samples, _) = read_query_answer(200, body.to_vec(), "d_total").unwrap();
/// assert_eq!((samples[0].value, samples[0].label("m")), (2.5, Some("a")));
/// ```
pub fn read_query_answer(
    status: u16,
    body: Vec<u8>,
    family: &str,
) -> Result<(Vec<Sample>, Vec<String>), Error> {
    let url = "http://prometheus/api/v1/query";
    let query = format!("sum (increase({family}[1h]))");
    let mut warnings = Vec::new();
    let data: QueryData = decode(
        url,
        &[("query", &query)],
        answer(status, body),
        &mut warnings,
    )?;
    let samples = query_samples(data, family, &query, url)?;
    Ok((samples, warnings))
}

/// A response as [`http::get`] would hand it back, JSON.
fn answer(status: u16, body: Vec<u8>) -> http::Response {
    http::Response {
        status,
        mime_type: Some("application/json".to_owned()),
        body,
    }
}

/// One call of the Prometheus HTTP API (`/api/v1/<endpoint>`): its `data`,
/// or an error with Prometheus' own message. The answer's `warnings` (and
/// `infos`), which Thanos and Mimir send with a partial response, are
/// added to `warnings`, each with the call it came from.
fn api<T: DeserializeOwned>(
    base: &str,
    endpoint: &str,
    params: &[(&str, &str)],
    limits: Limits,
    warnings: &mut Vec<String>,
) -> Result<T, Error> {
    let url = format!("{base}/api/v1/{endpoint}");
    let response = http::get(&url, params, "application/json", limits)?;
    decode(&url, params, response, warnings)
}

/// The answer [`api`] got from `url` (asked with `params`), read.
fn decode<T: DeserializeOwned>(
    url: &str,
    params: &[(&str, &str)],
    response: http::Response,
    warnings: &mut Vec<String>,
) -> Result<T, Error> {
    let shown = display_url(url);
    // Read into the types needed, never into a whole `Value` tree (which
    // takes tens of times the body), and at most MAX_SERIES entries.
    let parsed: Result<Envelope<T>, _> = serde_json::from_slice(&response.body);
    let json = match parsed {
        Ok(v) if v.status.is_some() => v,
        Err(e) if e.to_string().contains(TOO_MANY) => {
            let what = params
                .iter()
                .find(|(k, _)| *k == "query" || *k == "match[]")
                .map_or(String::new(), |(_, v)| format!(" to {}", excerpt(v)));
            return Err(message![
                format!(
                    "{shown}: the answer{what} has more than {} series, more than advice needs or this command holds: narrow it with ",
                    group_digits(MAX_SERIES as u64)
                ),
                Setting::Selector,
                ", or give ",
                Setting::By,
                " a label with fewer values",
            ]);
        }
        _ => {
            // Not the API's JSON: say the status, or what came instead.
            let response = response.success(url)?;
            let head: String = String::from_utf8_lossy(&response.body)
                .trim()
                .chars()
                .take(100)
                .collect();
            return Err(Error::new(format!(
                "{shown}: not a Prometheus API answer (JSON with a status): {}",
                excerpt(&head)
            )));
        }
    };
    for (kind, list) in [("a warning", &json.warnings), ("an info", &json.infos)] {
        let what = params
            .iter()
            .find(|(k, _)| *k == "query" || *k == "match[]")
            .map_or(String::new(), |(_, v)| format!(" to {}", excerpt(v)));
        for w in list.iter().flatten() {
            let text = w.as_str().map_or_else(|| w.to_string(), str::to_owned);
            warnings.push(format!(
                "the answer{what} carried {kind}: {}",
                excerpt(&text)
            ));
        }
    }
    match json.status.as_ref().and_then(Value::as_str) {
        Some("success") => json
            .data
            .ok_or_else(|| Error::new(format!("{shown}: a success without data"))),
        _ => Err(Error::new(format!(
            "{shown}: Prometheus answered an error (HTTP status {}): {}: {}",
            response.status,
            json.error_type
                .as_ref()
                .and_then(Value::as_str)
                .unwrap_or("?"),
            excerpt(json.error.as_ref().and_then(Value::as_str).unwrap_or("?")),
        ))),
    }
}

/// The most entries (series, samples) one answer of the Prometheus API
/// may hold: far more than any fleet's speculative-decoding series per
/// `by` value (`K` positions times the groups), and few enough that
/// reading them takes tens of megabytes, not gigabytes.
pub const MAX_SERIES: usize = 100_000;

/// The message a [`Capped`] list stops the reading with.
const TOO_MANY: &str = "more entries than MAX_SERIES";

/// The envelope of every answer of the Prometheus HTTP API. Fields that
/// may hold anything are read as `Value` (small: never the data).
#[derive(Deserialize)]
struct Envelope<T> {
    status: Option<Value>,
    data: Option<T>,
    #[serde(rename = "errorType")]
    error_type: Option<Value>,
    error: Option<Value>,
    warnings: Option<Vec<Value>>,
    infos: Option<Vec<Value>>,
}

/// A list of at most [`MAX_SERIES`] entries: reading stops at the next.
struct Capped<T>(Vec<T>);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Capped<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Visit<T> {
            type Value = Capped<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Capped<T>, A::Error> {
                let mut out = Vec::new();
                while let Some(x) = seq.next_element()? {
                    if out.len() == MAX_SERIES {
                        return Err(serde::de::Error::custom(TOO_MANY));
                    }
                    out.push(x);
                }
                Ok(Capped(out))
            }
        }
        d.deserialize_seq(Visit(std::marker::PhantomData))
    }
}

/// One entry of `/api/v1/series`: only its name is read.
#[derive(Deserialize)]
struct SeriesName {
    #[serde(rename = "__name__")]
    name: Option<String>,
}

/// The `data` of `/api/v1/query`.
#[derive(Deserialize)]
struct QueryData {
    result: Option<Capped<QuerySample>>,
}

/// One sample of an instant vector: its labels and `[time, "value"]`.
#[derive(Deserialize)]
struct QuerySample {
    #[serde(default)]
    metric: BTreeMap<String, String>,
    value: Option<(serde::de::IgnoredAny, String)>,
}

/// The latest `at` (and longest window) Prometheus can represent: its
/// durations and times are nanoseconds in an `i64` (about the year 2262).
const MAX_UNIX_SECONDS: f64 = 9_223_372_036.0;

/// A Prometheus duration (`90s`, `5m`, `1h30m`, `2d`, `500ms`) in seconds,
/// by Prometheus' grammar (`model.ParseDuration`): units from `y` down to
/// `ms`, each at most once and in that order, and the whole within an
/// `i64` of nanoseconds; a duration it would reject (`30m1h`, `1h1h`,
/// `99999999999999999999y`) is an error here, never sent.
pub fn parse_duration(s: &str) -> Result<f64, String> {
    let bad = |why: &str| {
        format!(
            "{} is not a duration{why}: write it as Prometheus does, e.g. 90s, 5m, 1h30m (units y, w, d, h, m, s, ms, largest first, each once)",
            excerpt(s)
        )
    };
    // Largest first, as the grammar orders them.
    const UNITS: [(&str, u64); 7] = [
        ("y", 31_536_000_000),
        ("w", 604_800_000),
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1000),
        ("ms", 1),
    ];
    let mut total_ms: u64 = 0;
    let mut rest = s;
    let mut next_unit = 0;
    if rest.is_empty() {
        return Err(bad(""));
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .ok_or_else(|| bad(" (a number without its unit)"))?;
        if digits == 0 {
            return Err(bad(""));
        }
        let n: u64 = rest[..digits]
            .parse()
            .map_err(|_| bad(" Prometheus can hold (out of range)"))?;
        rest = &rest[digits..];
        let (i, (unit, scale)) = UNITS
            .iter()
            .enumerate()
            .find(|(_, (u, _))| rest.starts_with(u) && !(*u == "m" && rest.starts_with("ms")))
            .ok_or_else(|| bad(""))?;
        if i < next_unit {
            return Err(bad(" (its units must come largest first, each once)"));
        }
        next_unit = i + 1;
        total_ms = n
            .checked_mul(*scale)
            .and_then(|ms| total_ms.checked_add(ms))
            .filter(|&ms| ms as f64 / 1000.0 <= MAX_UNIX_SECONDS)
            .ok_or_else(|| bad(" Prometheus can hold (out of range)"))?;
        rest = &rest[unit.len()..];
    }
    if total_ms == 0 {
        return Err(bad(""));
    }
    Ok(total_ms as f64 / 1000.0)
}

/// A `selector` (`'{MATCHERS}'`): PromQL label matchers (`name op "value"`,
/// `op` one of `=`, `!=`, `=~`, `!~`, the value a double-, single- or
/// back-quoted string, matchers separated by commas), checked and
/// rewritten as the matchers alone with double-quoted values, so that
/// nothing but matchers reaches the query (`{job="a"}) or vector(1)` is an
/// error, not a query).
pub fn parse_selector(s: &str) -> Result<String, String> {
    let t = s.trim();
    let body = t
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .ok_or_else(|| "write label matchers in braces, e.g. '{job=\"vllm\"}'".to_owned())?;
    let mut out: Vec<String> = Vec::new();
    let mut rest = body.trim_start();
    while !rest.is_empty() {
        let name_len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let name = &rest[..name_len];
        if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
            return Err(format!(
                "expected a label name at {}: write matchers as name=\"value\"",
                excerpt(rest)
            ));
        }
        rest = rest[name_len..].trim_start();
        let op = ["=~", "!~", "!=", "="]
            .into_iter()
            .find(|op| rest.starts_with(op))
            .ok_or_else(|| format!("expected =, !=, =~ or !~ after {name} at {}", excerpt(rest)))?;
        rest = rest[op.len()..].trim_start();
        let (value, after) = quoted(rest)?;
        out.push(format!(
            "{name}{op}{}",
            serde_json::to_string(&value).expect("a string serializes")
        ));
        rest = after.trim_start();
        match rest.strip_prefix(',') {
            Some(r) => rest = r.trim_start(),
            None if rest.is_empty() => {}
            None => {
                return Err(format!(
                    "expected , or the closing brace after {name}{op}... at {}",
                    excerpt(rest)
                ));
            }
        }
    }
    if out.is_empty() {
        return Err("no label matcher in the braces".into());
    }
    Ok(out.join(","))
}

/// A PromQL string at the start of `s`: its value and what follows.
fn quoted(s: &str) -> Result<(String, &str), String> {
    let mut chars = s.char_indices();
    let quote = match chars.next() {
        Some((_, q @ ('"' | '\'' | '`'))) => q,
        _ => {
            return Err(format!("expected a quoted value at {}", excerpt(s)));
        }
    };
    let mut value = String::new();
    while let Some((i, c)) = chars.next() {
        match c {
            c if c == quote => return Ok((value, &s[i + 1..])),
            '\\' if quote != '`' => {
                let (_, e) = chars
                    .next()
                    .ok_or_else(|| format!("an unterminated string: {}", excerpt(s)))?;
                value.push(match e {
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    '\\' | '"' | '\'' => e,
                    other => {
                        return Err(format!(
                            "an escape PromQL strings here do not take: \\{other}"
                        ));
                    }
                });
            }
            '\n' if quote != '`' => {
                return Err(format!("a line break in a string: {}", excerpt(s)));
            }
            c => value.push(c),
        }
    }
    Err(format!("an unterminated string: {}", excerpt(s)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_series_asked_for_are_every_schemas() {
        assert_eq!(
            series_pattern(),
            ".+(_num_drafts_total|_num_accepted_tokens_per_pos_total|_acceptance_by_draft_length_total|_draft_tokens_proposed_total|_spec_decode_drafted_tokens_total)|llamacpp:.+"
        );
        for d in schema::SCHEMAS.iter().filter_map(|s| s.detect.as_ref()) {
            for text in [d.prefix_ends_with, d.suffix] {
                assert!(
                    text.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
                    "{text} would need escaping in the pattern"
                );
            }
        }
    }

    #[test]
    fn durations_are_prometheus_durations() {
        assert_eq!(parse_duration("90s"), Ok(90.0));
        assert_eq!(parse_duration("1h30m"), Ok(5400.0));
        assert_eq!(parse_duration("500ms"), Ok(0.5));
        assert_eq!(parse_duration("2d"), Ok(172_800.0));
        assert_eq!(parse_duration("1y2w3d4h5m6s7ms"), Ok(33_019_506.007));
        for bad in [
            "",
            "5",
            "m",
            "1.5m",
            "5x",
            "0s",
            "-1m",
            "30m1h",
            "1h1h",
            "1ms1s",
            "99999999999999999999y",
            "300y",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert!(
            parse_duration("30m1h")
                .unwrap_err()
                .contains("largest first")
        );
        assert!(parse_duration("292y").is_ok());
    }

    #[test]
    fn selectors_are_matchers_and_nothing_else() {
        assert_eq!(
            parse_selector(" { job = \"a\" , cluster=~'eu.*', x!=`b\\c`,} ").unwrap(),
            r#"job="a",cluster=~"eu.*",x!="b\\c""#
        );
        assert_eq!(
            parse_selector(r#"{a="q\"uote"}"#).unwrap(),
            r#"a="q\"uote""#
        );
        for (bad, says) in [
            (
                r#"{job="a"}) or vector(1) or (x{y="z"}"#,
                "expected , or the closing brace",
            ),
            (r#"{job="a"} or vector(1)"#, "braces"),
            (r#"{job}"#, "expected =, !=, =~ or !~"),
            (r#"{job=a}"#, "expected a quoted value"),
            (r#"{job="a}"#, "unterminated"),
            (r#"{1job="a"}"#, "expected a label name"),
            (r#"{}"#, "no label matcher"),
            (r#"{job="a",,}"#, "expected a label name"),
        ] {
            let e = parse_selector(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
