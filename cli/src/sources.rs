//! Where `advise` reads other engines' counters: a scrape of `/metrics`
//! (`--metrics FILE|URL|-`, optionally `--since` an earlier one) and the
//! Prometheus HTTP API (`--prometheus URL --window D`). Both end as
//! samples of the [`Families`] found, grouped by the `--by` label and
//! built into [`EngineCounters`](specdec_metrics::EngineCounters)
//! ([`engines::build`]). vLLM's log lines are [`crate::vllm_log`].

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Read};
use std::path::Path;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::engines::{self, Built, Engine, Families, GroupCounts, Values};
use crate::error::CliError;
use crate::exposition::{self, Sample, series_name};
use crate::format::{display_url, excerpt, format_bytes, group_digits};
use crate::http::{self, Limits};
use crate::io::{input_name, note_reading_stdin};

/// One group's counters, named by its label (`model_name="m"`, or "" for
/// the series without the `--by` label).
#[derive(Debug)]
pub struct Group {
    /// `(label, value)`, absent for the series without the label.
    pub label: Option<(String, String)>,
    pub built: Built,
}

impl Group {
    /// `by="value"` as a series would write it, "" without the label.
    pub fn selector(&self) -> String {
        selector_of(self.label.as_ref())
    }
}

/// `label="value"` as a series writes it (escaped), "" for none.
pub fn selector_of(label: Option<&(String, String)>) -> String {
    label.map_or(String::new(), |(l, v)| {
        let s = series_name("", &[(l.clone(), v.clone())]);
        s[1..s.len() - 1].to_owned()
    })
}

/// What a source gave: its name, the families read, the groups.
#[derive(Debug)]
pub struct Counted {
    pub source: String,
    pub families: Families,
    pub groups: Vec<Group>,
}

/// What `Accept` asks of a `/metrics` endpoint: OpenMetrics first, the
/// classic text format next, as Prometheus asks.
const SCRAPE_ACCEPT: &str =
    "application/openmetrics-text;version=1.0.0;q=0.9,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// The body of `source`: a file, standard input (`-`) or an http(s) URL,
/// at most `limits.max_bytes`, as UTF-8 text. Returns its name for
/// messages and the text.
pub fn read_text(source: &str, limits: Limits) -> Result<(String, String), CliError> {
    let (name, bytes) = if http::is_url(source) {
        let name = display_url(source);
        let response = http::get(source, &[], SCRAPE_ACCEPT, limits)?.success(source)?;
        if response
            .mime_type
            .as_deref()
            .is_some_and(|m| m.eq_ignore_ascii_case("text/html"))
        {
            return Err(CliError::new(format!(
                "{name}: the answer is an HTML page (Content-Type text/html), not a Prometheus exposition: is the URL the engine's /metrics path?"
            )));
        }
        (name, response.body)
    } else {
        let path = Path::new(source);
        let name = input_name(path);
        let mut bytes = Vec::new();
        let limit = limits.max_bytes.saturating_add(1);
        let read = if source == "-" {
            note_reading_stdin("a Prometheus exposition");
            io::stdin().lock().take(limit).read_to_end(&mut bytes)
        } else {
            std::fs::File::open(path)
                .map_err(|e| CliError::new(format!("cannot open {name}: {e}")))?
                .take(limit)
                .read_to_end(&mut bytes)
        };
        read.map_err(|e| CliError::new(format!("{name}: read error: {e}")))?;
        if bytes.len() as u64 > limits.max_bytes {
            return Err(CliError::new(format!(
                "{name}: larger than --max-bytes {}; raise the limit if that much is expected",
                format_bytes(limits.max_bytes)
            )));
        }
        (name, bytes)
    };
    if bytes.starts_with(&[0x1f, 0x8b]) {
        return Err(CliError::new(format!(
            "{name}: the body is gzip-compressed (Content-Encoding gzip, or a .gz file), which advise does not read: ask the endpoint for identity encoding, or decompress the file first (gunzip, zcat)"
        )));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        CliError::new(format!(
            "{name}: not UTF-8 text (byte {}): not a Prometheus exposition",
            e.utf8_error().valid_up_to()
        ))
    })?;
    Ok((name, text))
}

/// A scrape read (`name`, `text`) checked: every sample of `families`,
/// typed counter.
fn scrape(
    name: String,
    text: &str,
    forced: Option<Engine>,
    prefix: Option<&str>,
    families: Option<&Families>,
) -> Result<(String, Families, Vec<Sample>), CliError> {
    let exposition = exposition::parse(text).map_err(|e| CliError::new(format!("{name}: {e}")))?;
    let families = match families {
        Some(f) => f.clone(),
        None => engines::detect(
            exposition.samples.iter().map(|s| s.name.as_str()),
            forced,
            prefix,
            &name,
        )?,
    };
    let wanted = families.all();
    for family in &wanted {
        if let Some(t) = exposition
            .type_of(family)
            .filter(|t| !matches!(*t, "counter" | "untyped" | "unknown"))
        {
            return Err(CliError::new(format!(
                "{name}: {family} is a {t}, not a counter"
            )));
        }
    }
    let samples = exposition
        .samples
        .into_iter()
        .filter(|s| wanted.contains(&s.name))
        .collect();
    Ok((name, families, samples))
}

/// `--metrics SOURCE [--since EARLIER]`: the counters of one scrape, or
/// the counts between two (each series of `SOURCE` minus the same series
/// of `EARLIER`; a series lower than before is a counter reset, an error:
/// the engine restarted between the scrapes, and what it counted before
/// is lost, so use `SOURCE` alone or Prometheus' `increase()`).
pub fn from_metrics(
    source: &str,
    since: Option<&str>,
    settings: &Settings,
) -> Result<Counted, CliError> {
    if source == "-" && since == Some("-") {
        return Err(CliError::new(
            "--metrics - and --since - both read standard input, which holds one scrape; give the earlier scrape as a file or URL",
        ));
    }
    // The earlier scrape is fetched first: with both on one live URL, the
    // other order would take the later scrape first and read the counts
    // between them as a reset.
    let earlier = since.map(|e| read_text(e, settings.limits)).transpose()?;
    let (name, text) = read_text(source, settings.limits)?;
    let (name, families, mut samples) = scrape(
        name,
        &text,
        settings.engine,
        settings.prefix.as_deref(),
        None,
    )?;
    let mut source_name = name.clone();
    if let Some((earlier_name, earlier_text)) = earlier {
        let (earlier_name, _, before) =
            scrape(earlier_name, &earlier_text, None, None, Some(&families))?;
        if before.is_empty() {
            return Err(CliError::new(format!(
                "--since {earlier_name} has none of the families of {name} ({}...): not a scrape of the same engine",
                families.drafts()
            )));
        }
        samples = subtract(samples, &before, &name, &earlier_name)?;
        source_name = format!("{name} since {earlier_name}");
    }
    let groups = engines::group(&samples, &families, &settings.by, Values::Exact)
        .map_err(|e| CliError::new(format!("{source_name}: {e}")))?;
    finish(source_name, families, groups, settings, Values::Exact)
}

/// Each series of `now` minus the same series of `before` (absent before:
/// zero, as a series mistral.rs creates lazily).
fn subtract(
    now: Vec<Sample>,
    before: &[Sample],
    now_name: &str,
    before_name: &str,
) -> Result<Vec<Sample>, CliError> {
    let key = |s: &Sample| {
        let mut labels = s.labels.clone();
        labels.sort();
        (s.name.clone(), labels)
    };
    let mut earlier: HashMap<_, &Sample> = before.iter().map(|s| (key(s), s)).collect();
    let mut out = Vec::with_capacity(now.len());
    for mut s in now {
        if let Some(b) = earlier.remove(&key(&s)) {
            // Values are checked as counts first, so that a NaN is named
            // as such rather than as a reset.
            let (a, b_count) = (
                engines::count(&s, Values::Exact)
                    .map_err(|e| CliError::new(format!("{now_name}: {e}")))?,
                engines::count(b, Values::Exact)
                    .map_err(|e| CliError::new(format!("--since {before_name}: {e}")))?,
            );
            if a < b_count {
                return Err(CliError::new(format!(
                    "{} is {a} in {now_name} but {b_count} in --since {before_name}: the counter was reset (the engine restarted between the scrapes), so the counts between them are lost; advise on {now_name} alone, or on Prometheus' increase() (--prometheus), which handles resets",
                    series_name(&s.name, &s.labels)
                )));
            }
            s.value = (a - b_count) as f64;
        }
        out.push(s);
    }
    if let Some((_, s)) = earlier.into_iter().next() {
        return Err(CliError::new(format!(
            "{} is in --since {before_name} but not in {now_name}: the series vanished (an engine restarted or was removed between the scrapes)",
            series_name(&s.name, &s.labels)
        )));
    }
    Ok(out)
}

/// What every source needs besides its input.
#[derive(Clone, Debug)]
pub struct Settings {
    pub limits: Limits,
    pub engine: Option<Engine>,
    pub by: String,
    pub max_draft_len: Option<usize>,
    /// `--prefix`: the families under this prefix only.
    pub prefix: Option<String>,
}

/// The most groups one run advises (each is a recommendation, a table):
/// a bound on the time and output an endpoint can cause.
pub const MAX_GROUPS: usize = 1000;

fn finish(
    source: String,
    families: Families,
    groups: BTreeMap<String, GroupCounts>,
    settings: &Settings,
    values: Values,
) -> Result<Counted, CliError> {
    if groups.is_empty() {
        return Err(CliError::new(format!(
            "{source}: no series of {}",
            families.drafts()
        )));
    }
    if groups.len() > MAX_GROUPS {
        return Err(CliError::new(format!(
            "{source}: {} groups (values of --by {}), more than the {} one run advises: narrow the input (--selector, --prefix) or give --by a label with fewer values",
            group_digits(groups.len() as u64),
            settings.by,
            group_digits(MAX_GROUPS as u64)
        )));
    }
    let mut out = Vec::new();
    for (value, g) in groups {
        let label = (!value.is_empty()).then(|| (settings.by.clone(), value));
        let selector = selector_of(label.as_ref());
        let built = engines::build(&families, &selector, &g, settings.max_draft_len, values)
            .map_err(|e| CliError::new(format!("{source}: {e}")))?;
        out.push(Group { label, built });
    }
    Ok(Counted {
        source,
        families,
        groups: out,
    })
}

/// `--prometheus URL --window D`: `increase()` of every family over the
/// window ending at `at` (default: now), summed by the `--by` label across
/// instances and engines, through `/api/v1/query`; the families are found
/// with `/api/v1/series` over the same window.
pub fn from_prometheus(
    url: &str,
    window: &str,
    selector: Option<&str>,
    at: Option<&str>,
    settings: &Settings,
) -> Result<Counted, CliError> {
    let base = url.trim_end_matches('/');
    let shown = display_url(base);
    let inner = match selector {
        None => String::new(),
        Some(s) => parse_selector(s)
            .map_err(|e| CliError::new(format!("--selector {}: {e}", excerpt(s))))?,
    };
    let seconds = parse_duration(window).map_err(|e| CliError::new(format!("--window: {e}")))?;
    let end = window_end(at)?;
    let end_text = format!("{end:.3}");
    let start_text = format!("{:.3}", (end - seconds).max(0.0));

    // The names in the window, for detection.
    let pattern = ".+(_num_drafts_total|_num_accepted_tokens_per_pos_total|_acceptance_by_draft_length_total|_draft_tokens_proposed_total)|llamacpp:.+";
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
    let families = engines::detect(
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
    let groups = engines::group(&samples, &families, by, Values::Extrapolated)
        .map_err(|e| CliError::new(format!("{shown}: {e}")))?;
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

/// The end of the `--prometheus` window: `--at`, or now.
fn window_end(at: Option<&str>) -> Result<f64, CliError> {
    Ok(match at {
        Some(t) => t
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|t| t.is_finite() && (0.0..=MAX_UNIX_SECONDS).contains(t))
            .ok_or_else(|| {
                CliError::new(format!(
                    "--at {}: give the end of the window as Unix seconds from 0 to {MAX_UNIX_SECONDS} (e.g. 1700000000)",
                    excerpt(t)
                ))
            })?,
        None => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64()),
    })
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
        for f in [
            families.drafts(),
            families.draft_tokens(),
            families.accepted_tokens(),
        ] {
            queries.push((
                f.clone(),
                format!("sum by ({by}) (increase({}))", selected(&f)),
            ));
        }
        let f = families.accepted_per_pos();
        queries.push((
            f.clone(),
            format!("sum by ({by}, position) (increase({}))", selected(&f)),
        ));
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
            g.built.notes.push(format!(
                "PARTIAL DATA? Prometheus (or Thanos, Mimir) sent {} warning{} with its answers, as it does with a partial response: the counts, and so this advice, may miss series",
                warnings.len(),
                if warnings.len() == 1 { "" } else { "s" }
            ));
            g.built.notes.extend(warnings.iter().cloned());
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
) -> Result<Vec<Sample>, CliError> {
    let result = data.result.ok_or_else(|| {
        CliError::new(format!(
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
            .ok_or_else(|| CliError::new(format!("{shown}: a sample of {query} has no value")))?;
        samples.push(Sample {
            name: family.to_owned(),
            labels: r.metric.into_iter().collect(),
            value,
        });
    }
    Ok(samples)
}

/// An answer of `/api/v1/series` (HTTP `status`, `body`) as `--prometheus`
/// reads it: the names of its series, and the warnings it carried. For the
/// fuzz targets (`fuzz/`), which feed it answers without a server.
///
/// ```
/// use specdec_metrics_cli::sources::read_series_answer;
/// let body = br#"{"status":"success","data":[{"__name__":"a_total","job":"x"},{}]}"#;
/// let (names, warnings) = read_series_answer(200, body.to_vec()).unwrap();
/// assert_eq!((names, warnings.len()), (vec!["a_total".to_owned()], 0));
/// assert!(read_series_answer(200, b"<html>".to_vec()).is_err());
/// ```
pub fn read_series_answer(
    status: u16,
    body: Vec<u8>,
) -> Result<(Vec<String>, Vec<String>), CliError> {
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

/// An answer of `/api/v1/query` (HTTP `status`, `body`) as `--prometheus`
/// reads it: its samples, each named `family`, and the warnings it
/// carried. For the fuzz targets (`fuzz/`).
///
/// ```
/// use specdec_metrics_cli::sources::read_query_answer;
/// let body = br#"{"status":"success","data":{"result":[{"metric":{"m":"a"},"value":[1,"2.5"]}]}}"#;
/// let (samples, _) = read_query_answer(200, body.to_vec(), "d_total").unwrap();
/// assert_eq!((samples[0].value, samples[0].label("m")), (2.5, Some("a")));
/// ```
pub fn read_query_answer(
    status: u16,
    body: Vec<u8>,
    family: &str,
) -> Result<(Vec<Sample>, Vec<String>), CliError> {
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
) -> Result<T, CliError> {
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
) -> Result<T, CliError> {
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
            return Err(CliError::new(format!(
                "{shown}: the answer{what} has more than {} series, more than advice needs or this command holds: narrow it with --selector, or give --by a label with fewer values",
                group_digits(MAX_SERIES as u64)
            )));
        }
        _ => {
            // Not the API's JSON: say the status, or what came instead.
            let response = response.success(url)?;
            let head: String = String::from_utf8_lossy(&response.body)
                .trim()
                .chars()
                .take(100)
                .collect();
            return Err(CliError::new(format!(
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
            .ok_or_else(|| CliError::new(format!("{shown}: a success without data"))),
        _ => Err(CliError::new(format!(
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
/// `--by` value (`K` positions times the groups), and few enough that
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

/// The latest `--at` (and longest window) Prometheus can represent: its
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

/// `--selector '{MATCHERS}'`: PromQL label matchers (`name op "value"`,
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

    #[test]
    fn since_subtracts_each_series_and_refuses_resets() {
        let s = |name: &str, v: f64| Sample {
            name: name.into(),
            labels: vec![("position".into(), "0".into())],
            value: v,
        };
        let out = subtract(
            vec![s("a", 10.0), s("b", 3.0)],
            &[s("a", 4.0)],
            "now",
            "then",
        )
        .unwrap();
        assert_eq!((out[0].value, out[1].value), (6.0, 3.0));
        let e = subtract(vec![s("a", 3.0)], &[s("a", 4.0)], "now", "then").unwrap_err();
        assert!(e.to_string().starts_with(
            "a{position=\"0\"} is 3 in now but 4 in --since then: the counter was reset"
        ));
        let e = subtract(vec![], &[s("a", 4.0)], "now", "then").unwrap_err();
        assert!(e.to_string().contains("vanished"));
    }
}
