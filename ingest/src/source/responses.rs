//! The per-request speculative-decoding figures engines put in their
//! responses, one response per line, pooled over the requests (and, with
//! [`LogOptions::by_request`](super::LogOptions::by_request), each
//! request's figures too).
//!
//! What each engine writes (read in its own sources and pull requests):
//!
//! - **vLLM**, with `--per-request-spec-decode-metrics summary` (vLLM PR
//!   #48915): the response's `metrics.speculative_decoding` object,
//!   `{"mean_acceptance_length", "draft_acceptance_rate",
//!   "acceptance_histogram", "num_spec_steps", "num_accepted_draft_tokens",
//!   "num_draft_tokens", "num_spec_tokens"}`, `acceptance_histogram[j]` the
//!   verify steps that accepted exactly `j` draft tokens (dense, `K + 1`
//!   long). `detailed` adds per-step arrays, which are not read. This
//!   crate's per-request accumulator writes the same object plus
//!   `acceptance_histogram_by_draft_length` (and three counts of its own),
//!   which makes a request exact whatever its draft lengths; it pools with
//!   vLLM's (the source is then "per-request responses").
//! - **SGLang**: `meta_info` (top level of `/generate`, or of each choice
//!   of the OpenAI endpoints): `spec_verify_ct` (verify steps),
//!   `spec_num_correct_drafts` (accepted draft tokens, the bonus token not
//!   counted), `spec_num_proposed_drafts` (drafted tokens) and
//!   `spec_correct_drafts_histogram[j]` (the steps that accepted `j`; it
//!   grows as larger counts appear), as SGLang's `Req` fields
//!   (`python/sglang/srt/managers/schedule_batch.py`, PR #33518).
//!
//! A request whose counts fix its draft lengths (every draft `K` long, or
//! every draft as short as its accepted tokens allow; a multiple of the
//! steps below `K` is not enough) gives its rows of the histogram by draft
//! length, exactly; pooled over requests of such rows (and this crate's
//! rows) the counts are exact. A request whose drafts varied in length
//! gives only its accepted counts: the pool then has bounds. Tree drafting
//! (SGLang with `--speculative-eagle-topk` above 1) counts the accepted
//! path: exact for its accepted counts, but a draft "length" there is the
//! tree's depth.
//!
//! Lines may be plain JSON objects or server-sent events (`data: {...}`,
//! `data: [DONE]`; the other fields, `event:`, `id:` and `retry:`, and
//! comments are skipped); a streamed response carries the figures in its last
//! chunk, and lines without them are skipped (counted in a note). A line
//! that is not JSON, or figures that contradict each other, are errors
//! naming the line.

use std::collections::BTreeMap;
use std::io::BufRead;

use serde_json::Value;
use specdec_metrics::{AcceptanceHistogram, EngineCounters, MAX_MAX_DRAFT_LEN};

use crate::counters::Built;
use crate::error::{Error, Message, Setting, SourceError};
use crate::lines::{LineError, Lines, Overlong};
use crate::schema::{Engine, Families};
use crate::text::{excerpt, group_digits};
use crate::{Counted, Group, Read, RequestFigures, message};

/// The longest line read (a `detailed` response carries per-step arrays).
const MAX_LINE_BYTES: usize = 16 << 20;

/// Reads responses from `input`, called `name` in every message: what
/// its row of [`LOG_SOURCES`](super::LOG_SOURCES) reads once the input is
/// open. `by_request`: each
/// request's figures too; `max_draft_len` is `K` where given.
///
/// ```
/// use specdec_ingest::source::responses::read_from;
///
/// let sglang = r#"{"id":"r","model":"m","meta_info":{"spec_verify_ct":10,"spec_num_correct_drafts":10,"spec_num_proposed_drafts":30,"spec_correct_drafts_histogram":[2,6,2]}}"#;
/// let read = read_from(sglang.as_bytes(), "r.jsonl".into(), true, None).unwrap();
/// assert_eq!(read.counted.groups[0].built.counters.drafts(), 10);
/// assert_eq!(read.requests.unwrap().len(), 1);
///
/// let vllm = r#"{"id":"v","model":"m","metrics":{"speculative_decoding":{"mean_acceptance_length":2.0,"draft_acceptance_rate":0.5,"acceptance_histogram":[1,0,1],"num_spec_steps":2,"num_accepted_draft_tokens":2,"num_draft_tokens":4,"num_spec_tokens":2}}}"#;
/// let read = read_from(vllm.as_bytes(), "v.jsonl".into(), false, None).unwrap();
/// assert_eq!(read.counted.groups[0].built.counters.max_draft_len(), 2);
/// ```
pub fn read_from(
    input: impl BufRead,
    name: String,
    by_request: bool,
    max_draft_len: Option<usize>,
) -> Result<Read, SourceError> {
    let (requests, skipped) = read_requests(input, &name)?;
    // This crate's objects are vLLM's plus rows: they pool with vLLM's.
    let family = |e: Engine| {
        if e == Engine::Specdec {
            Engine::Vllm
        } else {
            e
        }
    };
    let engine = requests[0].engine;
    let mixed = requests.iter().any(|r| r.engine != engine);
    if let Some(other) = requests.iter().find(|r| family(r.engine) != family(engine)) {
        return Err(Error::new(format!(
            "{name}: {} is {}'s, but earlier responses are {}'s: advise them apart",
            other.id,
            other.engine.name(),
            engine.name()
        ))
        .into());
    }
    let mut by_model: BTreeMap<Option<String>, Vec<&RequestFigures>> = BTreeMap::new();
    for r in &requests {
        by_model.entry(r.model.clone()).or_default().push(r);
    }
    let mut groups = Vec::new();
    for (model, rs) in &by_model {
        let mut built = pool(rs, max_draft_len).map_err(|e| e.after(format!("{name}: ")))?;
        built.notes.insert(
                0,
                Message::new(format!(
                    "{} request{} pooled{}",
                    group_digits(rs.len() as u64),
                    if rs.len() == 1 { "" } else { "s" },
                    if skipped > 0 {
                        format!(
                            "; {} line{} without per-request figures skipped (streamed chunks before the last, or responses of a server started without them)",
                            group_digits(skipped),
                            if skipped == 1 { "" } else { "s" }
                        )
                    } else {
                        String::new()
                    }
                )),
            );
        groups.push(Group {
            label: model.clone().map(|m| ("model".to_owned(), m)),
            built,
        });
    }
    let engine = if mixed { family(engine) } else { engine };
    let what = match engine {
        _ if mixed => {
            "per-request responses (vLLM's and this crate's metrics.speculative_decoding)"
        }
        Engine::Sglang => "SGLang responses (meta_info)",
        _ => "vLLM responses (metrics.speculative_decoding)",
    };
    Ok(Read {
        counted: Counted {
            source: name,
            families: Families {
                engine,
                prefix: String::new(),
            },
            groups,
        },
        reconstruction: None,
        by: Some("model".to_owned()),
        read_as: Some(what.to_owned()),
        requests: by_request.then_some(requests),
        exact_from: Some("the responses' acceptance histograms"),
    })
}

/// Every response of the input with per-request figures, and the count of
/// lines without them.
fn read_requests(input: impl BufRead, name: &str) -> Result<(Vec<RequestFigures>, u64), Error> {
    let mut lines = Lines::new(input, MAX_LINE_BYTES, Overlong::Refuse);
    let (mut requests, mut skipped, mut number) = (Vec::new(), 0u64, 0u64);
    loop {
        let buf = match lines.next_numbered() {
            Ok(Some((n, buf))) => {
                number = n;
                buf
            }
            Ok(None) => break,
            Err(LineError::TooLong { line, max }) => {
                return Err(Error::new(format!(
                    "{name}: line {line}: longer than {} bytes: one response per line",
                    group_digits(max as u64)
                )));
            }
            Err(e) => return Err(Error::new(format!("{name}: {e}"))),
        };
        let at_line = |msg: String| Error::new(format!("{name}: line {number}: {msg}"));
        let text = std::str::from_utf8(buf).map_err(|_| at_line("not UTF-8".into()))?;
        let mut line = text.trim();
        if let Some(rest) = line.strip_prefix("data:") {
            line = rest.trim_start();
        }
        if line.is_empty() || line == "[DONE]" || line.starts_with(':') || sse_field(line) {
            continue;
        }
        let value: Value = serde_json::from_str(line)
            .map_err(|e| at_line(format!("not JSON ({e}): {}", excerpt(line))))?;
        let found = figures(&value, number).map_err(at_line)?;
        if found.is_empty() {
            skipped += 1;
        }
        requests.extend(found);
    }
    if requests.is_empty() {
        return Err(Error::new(format!(
            "{name}: no response holds per-request speculative-decoding figures ({} line{} read): vLLM writes metrics.speculative_decoding when started with --per-request-spec-decode-metrics summary; SGLang writes meta_info.spec_verify_ct",
            group_digits(number),
            if number == 1 { "" } else { "s" }
        )));
    }
    Ok((requests, skipped))
}

/// A server-sent event's field other than `data` (`event: message`,
/// `id: 7`, `retry: 1000`): not a response.
fn sse_field(line: &str) -> bool {
    ["event", "id", "retry"].iter().any(|f| {
        line.strip_prefix(f)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(':'))
    })
}

/// The requests of one response: none (a chunk without figures), one, or
/// one per choice (SGLang's OpenAI endpoints).
fn figures(value: &Value, line: u64) -> Result<Vec<RequestFigures>, String> {
    let value = match value.get("data") {
        Some(inner @ Value::Object(_)) if value.get("metrics").is_none() => inner,
        _ => value,
    };
    let id = value
        .get("id")
        .and_then(Value::as_str)
        .map_or_else(|| format!("line {line}"), str::to_owned);
    let model = value
        .get("model")
        .and_then(Value::as_str)
        .map(str::to_owned);
    if let Some(spec) = value
        .get("metrics")
        .and_then(|m| m.get("speculative_decoding"))
        .or_else(|| value.get("acceptance_histogram").map(|_| value))
    {
        return vllm(spec, id, model).map(|r| vec![r]);
    }
    let mut out = Vec::new();
    if let Some(meta) = value
        .get("meta_info")
        .filter(|m| m.get("spec_verify_ct").is_some())
    {
        out.push(sglang(meta, id.clone(), model.clone())?);
    }
    if let Some(choices) = value.get("choices").and_then(Value::as_array) {
        for (i, c) in choices.iter().enumerate() {
            if let Some(meta) = c
                .get("meta_info")
                .filter(|m| m.get("spec_verify_ct").is_some())
            {
                out.push(sglang(meta, format!("{id} choice {i}"), model.clone())?);
            }
        }
    }
    Ok(out)
}

fn count(v: &Value, key: &str) -> Result<u64, String> {
    match v.get(key) {
        None => Err(format!("{key} is missing")),
        Some(x) => x
            .as_u64()
            .ok_or_else(|| format!("{key} is {}, not a count", excerpt(&x.to_string()))),
    }
}

fn counts(v: &Value, key: &str) -> Result<Vec<u64>, String> {
    let list = v
        .get(key)
        .ok_or_else(|| format!("{key} is missing"))?
        .as_array()
        .ok_or_else(|| format!("{key} is not a list"))?;
    if list.len() > MAX_MAX_DRAFT_LEN + 1 {
        return Err(format!(
            "{key} has {} entries: draft lengths go up to {MAX_MAX_DRAFT_LEN}",
            list.len()
        ));
    }
    list.iter()
        .map(|x| {
            x.as_u64()
                .ok_or_else(|| format!("{key} holds {}, not a count", excerpt(&x.to_string())))
        })
        .collect()
}

/// The steps and accepted tokens a histogram by accepted count holds.
fn totals(by_accepted: &[u64]) -> (u128, u128) {
    by_accepted
        .iter()
        .enumerate()
        .fold((0, 0), |(s, a), (j, &n)| {
            (s + u128::from(n), a + j as u128 * u128::from(n))
        })
}

fn vllm(spec: &Value, id: String, model: Option<String>) -> Result<RequestFigures, String> {
    if spec.get("acceptance_histogram_by_draft_length").is_some() {
        // This crate's object: its strict reader checks every figure.
        let h: AcceptanceHistogram = serde_json::from_value(spec.clone())
            .map_err(|e| format!("{id}: speculative_decoding: {e}"))?;
        let rows = h
            .observed_rows()
            .flat_map(|(k, row)| row.iter().enumerate().map(move |(a, &n)| (k, a, n)))
            .collect();
        return Ok(figures_of(
            id,
            model,
            Engine::Specdec,
            h.num_spec_steps(),
            h.num_draft_tokens(),
            h.num_accepted_draft_tokens(),
            h.acceptance_histogram(),
            Some(rows),
        ));
    }
    let at = |e: String| format!("{id}: speculative_decoding: {e}");
    let k = usize::try_from(count(spec, "num_spec_tokens").map_err(at)?).unwrap_or(usize::MAX);
    if !(1..=MAX_MAX_DRAFT_LEN).contains(&k) {
        return Err(at(format!(
            "num_spec_tokens is {k}: K is 1..={MAX_MAX_DRAFT_LEN}"
        )));
    }
    let by_accepted = counts(spec, "acceptance_histogram").map_err(at)?;
    if by_accepted.len() != k + 1 {
        return Err(at(format!(
            "acceptance_histogram has {} counts, but num_spec_tokens {k} gives {}",
            by_accepted.len(),
            k + 1
        )));
    }
    let steps = count(spec, "num_spec_steps").map_err(at)?;
    let accepted = count(spec, "num_accepted_draft_tokens").map_err(at)?;
    let drafted = count(spec, "num_draft_tokens").map_err(at)?;
    check(&by_accepted, steps, accepted, drafted, k).map_err(at)?;
    // vLLM derives both from the counts; a figure that disagrees is a
    // response edited or cut.
    for (key, derived) in [
        (
            "mean_acceptance_length",
            (steps > 0).then(|| 1.0 + accepted as f64 / steps as f64),
        ),
        (
            "draft_acceptance_rate",
            (drafted > 0).then(|| accepted as f64 / drafted as f64),
        ),
    ] {
        let given = match spec.get(key) {
            None => None,
            Some(x) => Some(x.as_f64().ok_or_else(|| {
                at(format!(
                    "{key} is {}, not a number",
                    excerpt(&x.to_string())
                ))
            })?),
        };
        if let (Some(given), Some(derived)) = (given, derived) {
            if (given - derived).abs() > 1e-9 * derived.abs().max(1.0) {
                return Err(at(format!(
                    "{key} is {given}, but the counts give {derived}"
                )));
            }
        }
    }
    let rows = forced_rows(&by_accepted, steps, drafted, k);
    Ok(figures_of(
        id,
        model,
        Engine::Vllm,
        steps,
        drafted,
        accepted,
        by_accepted,
        rows,
    ))
}

fn sglang(meta: &Value, id: String, model: Option<String>) -> Result<RequestFigures, String> {
    let id = meta
        .get("id")
        .and_then(Value::as_str)
        .map_or(id, str::to_owned);
    let at = |e: String| format!("{id}: meta_info: {e}");
    let steps = count(meta, "spec_verify_ct").map_err(at)?;
    let accepted = count(meta, "spec_num_correct_drafts").map_err(at)?;
    let drafted = count(meta, "spec_num_proposed_drafts").map_err(|e| {
        at(format!(
            "{e}: the drafted tokens are needed (SGLang versions that write spec_num_proposed_drafts)"
        ))
    })?;
    let mut by_accepted = counts(meta, "spec_correct_drafts_histogram").map_err(at)?;
    // The histogram grows with the largest count seen; K is at least the
    // drafted tokens per step.
    let k = (drafted.div_ceil(steps.max(1)) as usize).max(by_accepted.len().saturating_sub(1));
    if k > MAX_MAX_DRAFT_LEN {
        return Err(at(format!(
            "{drafted} drafted tokens in {steps} steps: draft lengths go up to {MAX_MAX_DRAFT_LEN}"
        )));
    }
    by_accepted.resize(k + 1, 0);
    check(&by_accepted, steps, accepted, drafted, k).map_err(at)?;
    // SGLang does not write K: `k` is the drafted tokens per step (its
    // fixed --speculative-num-steps) where they divide evenly.
    let rows = (drafted % steps.max(1) == 0)
        .then(|| forced_rows(&by_accepted, steps, drafted, k))
        .flatten();
    Ok(figures_of(
        id,
        model,
        Engine::Sglang,
        steps,
        drafted,
        accepted,
        by_accepted,
        rows,
    ))
}

/// A request's figures agree with its histogram and `K`.
fn check(
    by_accepted: &[u64],
    steps: u64,
    accepted: u64,
    drafted: u64,
    k: usize,
) -> Result<(), String> {
    let (s, a) = totals(by_accepted);
    if s != u128::from(steps) {
        return Err(format!(
            "the histogram holds {s} steps, the step count is {steps}"
        ));
    }
    if a != u128::from(accepted) {
        return Err(format!(
            "the histogram holds {a} accepted tokens, the accepted count is {accepted}"
        ));
    }
    if accepted > drafted || u128::from(drafted) > u128::from(steps) * k as u128 {
        return Err(format!(
            "{drafted} drafted tokens for {steps} steps of at most {k} and {accepted} accepted: impossible"
        ));
    }
    Ok(())
}

/// The request's rows of the histogram by draft length, where its counts
/// leave its draft lengths one choice: every draft `k` long (drafted
/// tokens = steps × `k`), every draft as short as its accepted tokens
/// allow (a draft is at least one token, and at least what it accepted),
/// or every step but one fixed at `k` or at its shortest. Otherwise (two
/// steps of 0 and 2 accepted, 4 drafted of `k` = 3: drafts of 2 + 2 fit as
/// well as 1 + 3) `None`: only bounds.
fn forced_rows(
    by_accepted: &[u64],
    steps: u64,
    drafted: u64,
    k: usize,
) -> Option<Vec<(usize, usize, u64)>> {
    if steps == 0 {
        return Some(Vec::new());
    }
    let shortest = |a: usize| a.max(1);
    let min_sum: u128 = by_accepted
        .iter()
        .enumerate()
        .map(|(a, &n)| shortest(a) as u128 * u128::from(n))
        .sum();
    let max_sum = u128::from(steps) * k as u128;
    let drafted = u128::from(drafted);
    let rows = |len: &dyn Fn(usize) -> usize| {
        by_accepted
            .iter()
            .enumerate()
            .filter(|&(_, &n)| n > 0)
            .map(|(a, &n)| (len(a), a, n))
            .collect::<Vec<_>>()
    };
    if drafted == max_sum {
        return Some(rows(&|_| k));
    }
    if drafted == min_sum {
        return Some(rows(&shortest));
    }
    // One step whose length is free (the rest are at `k` already, their
    // shortest being `k`): its length is what the others leave.
    let free: Vec<usize> = by_accepted
        .iter()
        .enumerate()
        .filter(|&(a, &n)| n > 0 && shortest(a) < k)
        .map(|(a, _)| a)
        .collect();
    if let [a] = free[..] {
        if by_accepted[a] == 1 && drafted > min_sum && drafted < max_sum {
            let len = (drafted - (max_sum - k as u128)) as usize;
            let mut out = rows(&|_| k);
            if let Some(row) = out.iter_mut().find(|r| r.1 == a) {
                row.0 = len;
            }
            return Some(out);
        }
    }
    None
}

#[allow(clippy::too_many_arguments)]
fn figures_of(
    id: String,
    model: Option<String>,
    engine: Engine,
    steps: u64,
    draft_tokens: u64,
    accepted: u64,
    by_accepted: Vec<u64>,
    rows: Option<Vec<(usize, usize, u64)>>,
) -> RequestFigures {
    RequestFigures {
        id,
        model,
        engine,
        steps,
        draft_tokens,
        accepted,
        by_accepted,
        rows,
        mean_acceptance_length: if steps == 0 {
            1.0
        } else {
            1.0 + accepted as f64 / steps as f64
        },
        draft_acceptance_rate: (draft_tokens > 0).then(|| accepted as f64 / draft_tokens as f64),
    }
}

/// The pooled counters of some requests: exact where every request gives
/// its rows by draft length.
fn pool(rs: &[&RequestFigures], max_draft_len: Option<usize>) -> Result<Built, Error> {
    let longest = rs
        .iter()
        .map(|r| r.by_accepted.len().saturating_sub(1))
        .max()
        .unwrap_or(0);
    let k = match max_draft_len {
        Some(given) if given < longest => {
            return Err(message![
                format!("a request has drafts of {longest} tokens but "),
                Setting::MaxDraftLen,
                format!(" is {given}"),
            ]);
        }
        Some(given) => given,
        None => longest,
    };
    if k == 0 {
        return Err(Error::new("no request drafted a token"));
    }
    let (mut steps, mut drafted, mut accepted) = (0u64, 0u64, 0u64);
    let mut per_pos = vec![0u64; k];
    let overflow = || Error::new("the pooled counts pass 18446744073709551615");
    for r in rs {
        steps = steps.checked_add(r.steps).ok_or_else(overflow)?;
        drafted = drafted.checked_add(r.draft_tokens).ok_or_else(overflow)?;
        accepted = accepted.checked_add(r.accepted).ok_or_else(overflow)?;
        for (a, &n) in r.by_accepted.iter().enumerate() {
            for p in per_pos.iter_mut().take(a) {
                *p = p.checked_add(n).ok_or_else(overflow)?;
            }
        }
    }
    let fail = |e: specdec_metrics::EngineCountersError| Error::new(e.to_string());
    let mut counters = EngineCounters::new(k, steps, drafted, accepted, per_pos).map_err(fail)?;
    let mut notes = Vec::new();
    let varied = rs
        .iter()
        .filter(|r| r.rows.is_none() && r.draft_tokens % r.steps.max(1) != 0)
        .count();
    let unforced = rs.iter().filter(|r| r.rows.is_none()).count() - varied;
    if varied + unforced == 0 {
        let buckets: Vec<(usize, usize, u64)> = rs
            .iter()
            .flat_map(|r| r.rows.clone().unwrap_or_default())
            .collect();
        counters = counters
            .with_by_draft_length_buckets(buckets)
            .map_err(fail)?;
        let one_length = rs.iter().all(|r| {
            r.engine == Engine::Specdec
                || r.rows
                    .as_ref()
                    .is_some_and(|rows| rows.windows(2).all(|w| w[0].0 == w[1].0))
        });
        notes.push(Message::new(if one_length {
            "every request's drafts had one length (or it gave its rows by draft length): the pooled counts are exact"
        } else {
            "every request's draft lengths follow from its counts (drafts as long as num_spec_tokens, or as short as their accepted tokens allow), or it gave its rows by draft length: the pooled counts are exact"
        }));
    } else {
        if varied > 0 {
            notes.push(Message::new(format!(
                "{} request{} drafted tokens of varying length (drafted tokens not a multiple of the steps): only bounds are known for the pool",
                group_digits(varied as u64),
                if varied == 1 { "" } else { "s" }
            )));
        }
        if unforced > 0 {
            notes.push(Message::new(format!(
                "{} request{} drafted a multiple of {} steps, which drafts of one length fit but so do drafts of several (the histogram counts accepted tokens, not draft lengths): only bounds are known for the pool",
                group_digits(unforced as u64),
                if unforced == 1 { "" } else { "s" },
                if unforced == 1 { "its" } else { "their" }
            )));
        }
    }
    Ok(Built { counters, notes })
}

/// The spread of some requests' mean acceptance lengths: the quantile at
/// `q` (nearest rank) of `values`, sorted.
pub fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drafts_of_one_length_or_all_shortest_are_forced() {
        assert_eq!(forced_rows(&[0, 0, 0, 0], 0, 0, 3), Some(Vec::new()));
        // K = 3: two steps accepting 0 and 2.
        let all_k = Some(vec![(3, 0, 1), (3, 2, 1)]);
        assert_eq!(forced_rows(&[1, 0, 1, 0], 2, 6, 3), all_k);
        let shortest = Some(vec![(1, 0, 1), (2, 2, 1)]);
        assert_eq!(forced_rows(&[1, 0, 1, 0], 2, 3, 3), shortest);
        // 4 drafted: 2 + 2 and 1 + 3 fit alike.
        assert_eq!(forced_rows(&[1, 0, 1, 0], 2, 4, 3), None);
    }

    #[test]
    fn one_free_step_takes_what_the_others_leave() {
        // K = 3: two steps accepted all 3 (so drafted 3), one accepted 1
        // and drafted what is left of 8: 2.
        let rows = forced_rows(&[0, 1, 0, 2], 3, 8, 3);
        assert_eq!(rows, Some(vec![(2, 1, 1), (3, 3, 2)]));
        // Two steps that accepted 1: 2 + 3 or 3 + 2 drafted, not forced.
        assert_eq!(forced_rows(&[0, 2, 0, 1], 3, 7, 3), None);
        // One step that accepted 0 beside the full ones.
        assert_eq!(
            forced_rows(&[1, 0, 0, 2], 3, 8, 3),
            Some(vec![(2, 0, 1), (3, 3, 2)])
        );
        // More drafted than K per step is no count this can hold.
        assert_eq!(forced_rows(&[0, 1, 0, 2], 3, 10, 3), None);
    }
}
