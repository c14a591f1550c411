//! HTTP GET with limits, for scrapes by URL and the Prometheus API: one
//! blocking request through `ureq` (the feature `http`), bounded in time
//! ([`Limits::timeout`], end to end: connecting, the headers and the whole
//! body, however slowly it trickles) and in size ([`Limits::max_bytes`]:
//! the body is read up to the limit and one byte more, never further).
//! Errors name the URL. Without the feature `http`, every request is an
//! error that says so.

use std::time::Duration;

use crate::error::Error;
use crate::text::{display_url, excerpt};
#[cfg(feature = "http")]
use crate::{error::Setting, message};

/// What one input may take.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The longest an HTTP request may take, answer included.
    pub timeout: Duration,
    /// The largest input (a file, standard input, an HTTP body) read.
    pub max_bytes: u64,
}

/// A response: its status, media type and body.
#[derive(Debug)]
pub struct Response {
    /// The HTTP status.
    pub status: u16,
    /// The media type of `Content-Type`, without its parameters.
    pub mime_type: Option<String>,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// The response when its status is 2xx; otherwise an error naming
    /// `url` that quotes the start of the body (which often says why).
    pub fn success(self, url: &str) -> Result<Self, Error> {
        if (200..300).contains(&self.status) {
            return Ok(self);
        }
        let text = String::from_utf8_lossy(&self.body);
        let head: String = text.trim().chars().take(200).collect();
        Err(Error::new(format!(
            "{}: HTTP status {}{}",
            display_url(url),
            self.status,
            if head.is_empty() {
                String::new()
            } else {
                format!(": {}", excerpt(&head))
            }
        )))
    }
}

/// Whether `source` is an http(s) URL rather than a file name.
pub fn is_url(source: &str) -> bool {
    let lower = source.get(..8).unwrap_or(source).to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

/// GETs `url` with the query parameters `query` (encoded here) and the
/// `Accept` header `accept`, whatever the status ([`Response::success`]
/// checks it). A body past `limits.max_bytes`, a time past
/// `limits.timeout` and any network failure are errors naming `url`.
#[cfg(feature = "http")]
pub fn get(
    url: &str,
    query: &[(&str, &str)],
    accept: &str,
    limits: Limits,
) -> Result<Response, Error> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(limits.timeout))
        .http_status_as_error(false)
        .max_redirects(5)
        // No proxy from the environment: a /metrics endpoint is usually on
        // the same network, and a proxy that answers for it would be
        // advised on instead.
        .proxy(None)
        .user_agent(concat!("specdec-metrics/", env!("CARGO_PKG_VERSION")))
        .build()
        .into();
    let shown = display_url(url);
    let mut request = agent.get(url).header("Accept", accept);
    for (k, v) in query {
        request = request.query(*k, *v);
    }
    let mut response = request
        .call()
        .map_err(|e| network_error(url, &shown, &e, limits))?;
    let status = response.status().as_u16();
    let mime_type = response.body().mime_type().map(str::to_owned);
    let body = response
        .body_mut()
        .with_config()
        .limit(limits.max_bytes)
        .read_to_vec()
        .map_err(|e| network_error(url, &shown, &e, limits))?;
    Ok(Response {
        status,
        mime_type,
        body,
    })
}

/// Without the feature `http`: an error naming `url`, whatever it is.
#[cfg(not(feature = "http"))]
pub fn get(
    url: &str,
    _query: &[(&str, &str)],
    _accept: &str,
    _limits: Limits,
) -> Result<Response, Error> {
    Err(Error::new(format!(
        "{}: this build reads no URL (specdec-ingest without its feature `http`)",
        display_url(url)
    )))
}

/// The error of a request to `raw` (shown as `url`); the library's own
/// text is cleared of the URL's userinfo too, should it quote the URL.
#[cfg(feature = "http")]
fn network_error(raw: &str, url: &str, e: &ureq::Error, limits: Limits) -> Error {
    match e {
        ureq::Error::BodyExceedsLimit(_) => message![
            format!("{url}: the response is larger than "),
            Setting::MaxBytes,
            format!(
                " {}; raise the limit if that much is expected",
                crate::text::format_bytes(limits.max_bytes)
            ),
        ],
        ureq::Error::Timeout(_) => message![
            format!("{url}: no complete response within "),
            Setting::Timeout,
            format!(" {} s", limits.timeout.as_secs_f64()),
        ],
        other => {
            let mut text = other.to_string();
            let redacted = crate::text::redact_userinfo(raw);
            if redacted != raw {
                text = text.replace(raw, &redacted);
                if let Some(userinfo) = userinfo(raw) {
                    text = text.replace(userinfo, "***");
                }
            }
            Error::new(format!("{url}: {text}"))
        }
    }
}

/// The userinfo of `url` (`user:password`), if it has one.
#[cfg(feature = "http")]
fn userinfo(url: &str) -> Option<&str> {
    let start = url.find("://")? + 3;
    let rest = &url[start..];
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    rest[..end].rfind('@').map(|at| &rest[..at])
}
