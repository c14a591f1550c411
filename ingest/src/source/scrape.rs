//! A scrape of an engine's `/metrics` (a file, standard input or an
//! http(s) URL), optionally minus an earlier scrape of the same engine:
//! its samples of the [families](crate::schema) found, grouped by
//! [`Settings::by`] and built into the library's counters.

use std::collections::HashMap;
use std::io::Read as _;
use std::path::Path;

use crate::counters::{self, Values};
use crate::error::{Error, Setting, SourceError};
use crate::exposition::{self, Sample, series_name};
use crate::http::{self, Limits};
use crate::schema::{self, Engine, Families};
use crate::text::{display_url, format_bytes, input_name};
use crate::{Counted, Read, Settings, Source, lines, message};

use super::finish;

/// One scrape (`source`: a file, `-` for standard input, or an http(s)
/// URL), or the counts between `since` (an earlier one) and it.
#[derive(Debug)]
pub struct Scrape {
    /// The scrape.
    pub source: String,
    /// An earlier scrape of the same engine.
    pub since: Option<String>,
}

impl Source for Scrape {
    fn read(&self, settings: &Settings) -> Result<Read, SourceError> {
        Ok(Read {
            counted: from_metrics(&self.source, self.since.as_deref(), settings)?,
            reconstruction: None,
            by: Some(settings.by.clone()),
            read_as: None,
            requests: None,
            exact_from: None,
        })
    }

    fn reads_stdin(&self) -> Option<&'static str> {
        (self.source == "-" || self.since.as_deref() == Some("-"))
            .then_some("a Prometheus exposition")
    }
}

/// What `Accept` asks of a `/metrics` endpoint: OpenMetrics first, the
/// classic text format next, as Prometheus asks.
const SCRAPE_ACCEPT: &str =
    "application/openmetrics-text;version=1.0.0;q=0.9,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// The body of `source`: a file, standard input (`-`) or an http(s) URL,
/// at most `limits.max_bytes`, as UTF-8 text. Returns its name for
/// messages and the text.
pub fn read_text(source: &str, limits: Limits) -> Result<(String, String), Error> {
    let (name, bytes) = if http::is_url(source) {
        let name = display_url(source);
        let response = http::get(source, &[], SCRAPE_ACCEPT, limits)?.success(source)?;
        if response
            .mime_type
            .as_deref()
            .is_some_and(|m| m.eq_ignore_ascii_case("text/html"))
        {
            return Err(Error::new(format!(
                "{name}: the answer is an HTML page (Content-Type text/html), not a Prometheus exposition: is the URL the engine's /metrics path?"
            )));
        }
        (name, response.body)
    } else {
        let path = Path::new(source);
        let name = input_name(path);
        let mut bytes = Vec::new();
        let limit = limits.max_bytes.saturating_add(1);
        lines::open(path)
            .map_err(|e| Error::new(format!("cannot open {name}: {e}")))?
            .take(limit)
            .read_to_end(&mut bytes)
            .map_err(|e| Error::new(format!("{name}: read error: {e}")))?;
        if bytes.len() as u64 > limits.max_bytes {
            return Err(message![
                format!("{name}: larger than "),
                Setting::MaxBytes,
                format!(
                    " {}; raise the limit if that much is expected",
                    format_bytes(limits.max_bytes)
                ),
            ]);
        }
        (name, bytes)
    };
    if bytes.starts_with(&[0x1f, 0x8b]) {
        return Err(Error::new(format!(
            "{name}: the body is gzip-compressed (Content-Encoding gzip, or a .gz file), which advise does not read: ask the endpoint for identity encoding, or decompress the file first (gunzip, zcat)"
        )));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        Error::new(format!(
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
) -> Result<(String, Families, Vec<Sample>), Error> {
    let exposition = exposition::parse(text).map_err(|e| Error::new(format!("{name}: {e}")))?;
    let families = match families {
        Some(f) => f.clone(),
        None => schema::detect(
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
            return Err(Error::new(format!(
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

/// A scrape `source` (and `since` an earlier one): the counters of one scrape, or
/// the counts between two (each series of `SOURCE` minus the same series
/// of `EARLIER`; a series lower than before is a counter reset, an error:
/// the engine restarted between the scrapes, and what it counted before
/// is lost, so use `SOURCE` alone or Prometheus' `increase()`).
pub fn from_metrics(
    source: &str,
    since: Option<&str>,
    settings: &Settings,
) -> Result<Counted, Error> {
    if source == "-" && since == Some("-") {
        return Err(message![
            Setting::Metrics,
            " - and ",
            Setting::Since,
            " - both read standard input, which holds one scrape; give the earlier scrape as a file or URL",
        ]);
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
            return Err(message![
                Setting::Since,
                format!(
                    " {earlier_name} has none of the families of {name} ({}...): not a scrape of the same engine",
                    families.drafts()
                ),
            ]);
        }
        samples = subtract(samples, &before, &name, &earlier_name)?;
        source_name = format!("{name} since {earlier_name}");
    }
    let groups = counters::group(&samples, &families, &settings.by, Values::Exact)
        .map_err(|e| Error::new(format!("{source_name}: {e}")))?;
    finish(source_name, families, groups, settings, Values::Exact)
}

/// Each series of `now` minus the same series of `before` (absent before:
/// zero, as a series mistral.rs creates lazily).
fn subtract(
    now: Vec<Sample>,
    before: &[Sample],
    now_name: &str,
    before_name: &str,
) -> Result<Vec<Sample>, Error> {
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
                counters::count(&s, Values::Exact).map_err(|e| e.after(format!("{now_name}: ")))?,
                counters::count(b, Values::Exact)
                    .map_err(|e| e.after(format!(" {before_name}: ")).after(Setting::Since))?,
            );
            if a < b_count {
                return Err(message![
                    format!(
                        "{} is {a} in {now_name} but {b_count} in ",
                        series_name(&s.name, &s.labels)
                    ),
                    Setting::Since,
                    format!(
                        " {before_name}: the counter was reset (the engine restarted between the scrapes), so the counts between them are lost; advise on {now_name} alone, or on Prometheus' increase() ("
                    ),
                    Setting::Prometheus,
                    "), which handles resets",
                ]);
            }
            s.value = (a - b_count) as f64;
        }
        out.push(s);
    }
    if let Some((_, s)) = earlier.into_iter().next() {
        return Err(message![
            format!("{} is in ", series_name(&s.name, &s.labels)),
            Setting::Since,
            format!(
                " {before_name} but not in {now_name}: the series vanished (an engine restarted or was removed between the scrapes)"
            ),
        ]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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
            "a{position=\"0\"} is 3 in now but 4 in `since` then: the counter was reset"
        ));
        let e = subtract(vec![], &[s("a", 4.0)], "now", "then").unwrap_err();
        assert!(e.to_string().contains("vanished"));
    }
}
