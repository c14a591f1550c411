//! The speculative-decoding counters of the engines `advise` reads, as
//! each exports them, and how they become the library's
//! [`EngineCounters`].
//!
//! What each engine exports (read in its own source):
//!
//! - **vLLM**, `vllm/v1/spec_decode/metrics.py` (`SpecDecodingProm`, read at
//!   vllm-project/vllm ee4ceaae5953d367d8edd2132fd86d6c42506e1e):
//!   `vllm:spec_decode_num_drafts_total`, `..._num_draft_tokens_total`,
//!   `..._num_accepted_tokens_total` and
//!   `..._num_accepted_tokens_per_pos_total{position}`, all labelled
//!   `model_name` and `engine`; `position` counts from 0 and every position
//!   `0..num_speculative_tokens` is created at start-up (`labels()` on each),
//!   so a missing position is an error. `prometheus_client` adds a
//!   `..._created` gauge per counter, which is ignored. Drafts may be
//!   shorter than `K` (the drafter proposes fewer, the context ends), and
//!   nothing says which: the four counters identify the continuation
//!   counts only when every draft had `K` tokens.
//! - **This crate** (`specdec_metrics::METRIC_FAMILIES`), under any
//!   prefix: the same four names plus `..._num_draft_tokens_per_pos_total`
//!   and `..._acceptance_by_draft_length_total{draft_length, accepted}`,
//!   which makes the counts exact whatever the draft lengths; every
//!   position and every bucket exists from the first scrape.
//! - **mistral.rs**, `mistralrs-core/src/engine/logger.rs`
//!   (`IntervalLogger::add_speculative_stats`, read at
//!   EricLBuehler/mistral.rs 9e922623f24b32d41f3892b74f0eed18707f4e6c),
//!   through the `metrics` crate and `metrics-exporter-prometheus`
//!   (`mistralrs-server-core/src/metrics.rs`, classic text):
//!   `mistralrs_speculative_drafts_total`,
//!   `mistralrs_speculative_draft_tokens_proposed_total`,
//!   `mistralrs_speculative_draft_tokens_accepted_total`, and
//!   `mistralrs_speculative_draft_tokens_accepted_per_pos_total{position}`,
//!   `position` from 0, a position's series created only once something
//!   was accepted there (`if *count > 0`): a missing position is zero, and
//!   `K` is the drafted tokens over the drafts. No labels (one process per
//!   model).
//! - **llama.cpp**'s server: up to ggml-org/llama.cpp
//!   fb4026604c67c682f552337ec9b91eced0abd35a (`tools/server/server-context.cpp`,
//!   the `/metrics` handler) no speculative-decoding counter at all; since
//!   ggml-org/llama.cpp PR #26389 (merged 2026-08) vLLM's schema under the
//!   prefix `llamacpp:`: `llamacpp:spec_decode_num_drafts_total`,
//!   `..._num_draft_tokens_total`, `..._num_accepted_tokens_total` and
//!   `..._num_accepted_tokens_per_pos_total{position}`, `position` from 0,
//!   no model or engine label (one model per server; router mode takes
//!   `?model=`). Read from the pull request's description and its README
//!   table, not from its code: the snapshot of llama.cpp this project can
//!   read predates it. The per-position series appear with the first
//!   completed speculative request, so a position that is missing reads
//!   0 (the accepted total must still be their sum), and `K` is the
//!   highest position exported plus one unless `--max-draft-len` gives it
//!   (`--spec-draft-n-max`). llama.cpp's drafts vary in length (`p-min`
//!   stops a draft early, n-gram drafts end with the match): bounds unless
//!   every draft had `K` tokens. An older server without these counters
//!   is an error that says which version added them.
//! - **TensorRT-LLM**, `tensorrt_llm/metrics/collector.py`
//!   (`MetricsCollector`, read at brb-nv/TensorRT-LLM
//!   4ceca4550f00f667d57d3a731d9f994842abc8de, NVIDIA/TensorRT-LLM PR
//!   #12636): `trtllm_spec_decode_drafted_tokens_total{token_position}` and
//!   `trtllm_spec_decode_accepted_tokens_total{token_position}`, per
//!   finished request (`return_perf_metrics`), `token_position` from 0,
//!   a position's series incremented only when its count is positive (a
//!   missing position is 0); beside them the iteration totals
//!   `trtllm_spec_decode_num_draft_tokens_total` and
//!   `..._num_accepted_tokens_total` (`enable_iter_perf_stats`), which count
//!   every iteration, finished or not, so they need not equal the
//!   per-position sums (a note says so when they differ). No drafts
//!   counter: the drafts are those that reached position 0. With drafted
//!   *and* accepted per position, the trials at position `i` are known up
//!   to the drafts that ended at `i - 1` fully accepted: exact where no
//!   draft ended there (every draft `K` long), bounds otherwise
//!   ([`EngineCounters::with_draft_tokens_per_pos`]).
//! - **SGLang**: its Prometheus gauges `sglang:spec_accept_length` and
//!   `sglang:spec_accept_rate` are means over the latest interval only
//!   (and a gauge cannot be summed over time with `rate()`): nothing per
//!   position, so advice cannot be made from them; an error says so and
//!   what to read instead.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use serde::Serialize;
use specdec_metrics::{CounterSeries, EngineCounters, METRIC_FAMILIES, VLLM_METRIC_PREFIX};

use crate::error::CliError;
use crate::exposition::{Sample, series_name};
use crate::format::excerpt;

/// An engine whose counters `advise` reads (`--engine`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// vLLM's four vllm:spec_decode_* counters (a by-draft-length family
    /// beside them is ignored).
    Vllm,
    /// llama.cpp's server: vLLM's four counters under `llamacpp:` (since
    /// llama.cpp PR #26389), positions exported as they are reached.
    Llamacpp,
    /// mistral.rs's mistralrs_speculative_* counters.
    Mistralrs,
    /// This crate's families, under any prefix (the by-draft-length family
    /// required).
    Specdec,
    /// TensorRT-LLM's drafted and accepted counts per position
    /// (trtllm_spec_decode_{drafted,accepted}_tokens_total{token_position}).
    Trtllm,
    /// SGLang's gauges (sglang:spec_accept_length, sglang:spec_accept_rate):
    /// means only, an error that says what to read instead.
    Sglang,
}

impl Engine {
    /// The engine's name for people.
    pub fn name(self) -> &'static str {
        match self {
            Self::Vllm => "vLLM",
            Self::Llamacpp => "llama.cpp",
            Self::Mistralrs => "mistral.rs",
            Self::Specdec => "specdec-metrics",
            Self::Trtllm => "TensorRT-LLM",
            Self::Sglang => "SGLang",
        }
    }

    /// The exact setting that makes the engine draft `k` tokens.
    pub fn setting(self, k: usize) -> String {
        match (self, k) {
            (Self::Vllm, 0) => "vLLM: start it without --speculative-config (do not speculate)".into(),
            (Self::Vllm, k) => format!(
                "vLLM: --speculative-config '{{\"num_speculative_tokens\": {k}, ...}}' (keep your method and model keys; Python: speculative_config={{\"num_speculative_tokens\": {k}, ...}})"
            ),
            (Self::Mistralrs, 0) => "mistral.rs: start it without --mtp / --mtp-model (do not speculate)".into(),
            (Self::Mistralrs, k) => format!(
                "mistral.rs: --mtp-n-predict {k} (TOML: mtp_n_predict = {k}; it also turns adaptive draft depth off)"
            ),
            (Self::Llamacpp, 0) => "llama.cpp: start llama-server without --model-draft / --spec-type (do not speculate)".into(),
            (Self::Llamacpp, k) => format!(
                "llama.cpp: llama-server --spec-draft-n-max {k} (builds before the --spec-* flags: --draft-max {k})"
            ),
            (Self::Trtllm, 0) => "TensorRT-LLM: leave speculative_config out of the LLM API options (do not speculate)".into(),
            (Self::Trtllm, k) => format!(
                "TensorRT-LLM: speculative_config: {{max_draft_len: {k}, ...}} in the --extra_llm_api_options YAML (keep decoding_type and the draft model; Python: speculative_config=...(max_draft_len={k}))"
            ),
            (Self::Sglang, 0) => "SGLang: start it without --speculative-algorithm (do not speculate)".into(),
            (Self::Sglang, k) => format!(
                "SGLang: --speculative-num-steps {k} --speculative-eagle-topk 1 --speculative-num-draft-tokens {}",
                k + 1
            ),
            (Self::Specdec, 0) => "specdec-metrics: draft 0 tokens (do not speculate); the Recorder keeps its max_draft_len".into(),
            (Self::Specdec, k) => format!(
                "specdec-metrics: max_draft_len = {k} (Recorder::new({k}), DraftController::new({k}, cost)), or draft {k} from a larger K"
            ),
        }
    }
}

/// Why SGLang's Prometheus gauges cannot be advised, and what to read.
pub const SGLANG_MEANS_ONLY: &str = "SGLang's sglang:spec_accept_length and sglang:spec_accept_rate are gauges of the latest interval's means (never rate() a gauge): nothing per position, so a draft length cannot be advised from them. SGLang's per-request meta_info (spec_verify_ct, spec_num_proposed_drafts, spec_num_correct_drafts, spec_correct_drafts_histogram) holds the accepted counts per verify step, which identify the counts exactly: save the responses (one per line) and read them with advise --responses FILE";

/// Why an older llama.cpp cannot be advised.
const LLAMACPP_BEFORE_COUNTERS: &str = "llama.cpp's server exports speculative-decoding counters on /metrics (llamacpp:spec_decode_num_drafts_total, ..._num_accepted_tokens_per_pos_total) only since llama.cpp PR #26389 (August 2026); before it, draft counts exist only per request and in the log, as totals without positions. Update llama-server and start it with --metrics";

/// The suffixes that name the families of each schema.
const VLLM_PER_POS: &str = "_num_accepted_tokens_per_pos_total";
const MISTRAL_PROPOSED: &str = "_draft_tokens_proposed_total";
const TRTLLM_DRAFTED_PER_POS: &str = "_drafted_tokens_total";
const SGLANG_GAUGES: [&str; 2] = ["sglang:spec_accept_length", "sglang:spec_accept_rate"];

/// The families of one engine under one prefix: the names `advise` reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Families {
    pub engine: Engine,
    pub prefix: String,
}

impl Families {
    fn name(&self, vllm: &str, mistral: &str, trtllm: &str) -> String {
        match self.engine {
            Engine::Mistralrs => format!("{}_{mistral}", self.prefix),
            Engine::Trtllm => format!("{}_{trtllm}", self.prefix),
            _ => format!("{}_{vllm}", self.prefix),
        }
    }

    /// Drafts (verify steps that drafted). TensorRT-LLM has no such
    /// counter: its drafts are the drafted count at position 0.
    pub fn drafts(&self) -> String {
        self.name(METRIC_FAMILIES[0], "drafts_total", "drafted_tokens_total")
    }

    pub fn draft_tokens(&self) -> String {
        self.name(
            METRIC_FAMILIES[1],
            "draft_tokens_proposed_total",
            "num_draft_tokens_total",
        )
    }

    pub fn accepted_tokens(&self) -> String {
        self.name(
            METRIC_FAMILIES[2],
            "draft_tokens_accepted_total",
            "num_accepted_tokens_total",
        )
    }

    pub fn accepted_per_pos(&self) -> String {
        self.name(
            METRIC_FAMILIES[3],
            "draft_tokens_accepted_per_pos_total",
            "accepted_tokens_total",
        )
    }

    /// The drafted-per-position family: this crate's, or TensorRT-LLM's.
    pub fn draft_tokens_per_pos(&self) -> Option<String> {
        match self.engine {
            Engine::Specdec => Some(format!("{}_{}", self.prefix, METRIC_FAMILIES[4])),
            Engine::Trtllm => Some(format!("{}{TRTLLM_DRAFTED_PER_POS}", self.prefix)),
            _ => None,
        }
    }

    /// The label that holds a position.
    pub fn position_label(&self) -> &'static str {
        match self.engine {
            Engine::Trtllm => "token_position",
            _ => "position",
        }
    }

    /// Whether the drafts counter is a family of its own (TensorRT-LLM's
    /// drafts are its drafted count at position 0).
    fn has_drafts_family(&self) -> bool {
        self.engine != Engine::Trtllm
    }

    /// This crate's by-draft-length family (`Specdec` only).
    pub fn by_draft_length(&self) -> Option<String> {
        (self.engine == Engine::Specdec).then(|| format!("{}_{}", self.prefix, METRIC_FAMILIES[5]))
    }

    /// Every family read.
    pub fn all(&self) -> Vec<String> {
        let mut v = vec![
            self.drafts(),
            self.draft_tokens(),
            self.accepted_tokens(),
            self.accepted_per_pos(),
        ];
        v.extend(self.draft_tokens_per_pos());
        v.extend(self.by_draft_length());
        // TensorRT-LLM's drafts are its drafted family: once each.
        let mut seen = BTreeSet::new();
        v.retain(|name| seen.insert(name.clone()));
        v
    }

    /// Whether the engine creates every position's series from the start
    /// (so that a missing position is an error, not a zero).
    fn positions_always_exported(&self) -> bool {
        matches!(self.engine, Engine::Vllm | Engine::Specdec)
    }

    /// Whether drafts vary in length by design and `K` is not exported:
    /// `K` is the highest position exported plus one unless given.
    fn lengths_vary(&self) -> bool {
        matches!(self.engine, Engine::Llamacpp | Engine::Trtllm)
    }
}

/// The families among `names` (the sample names of a scrape, or those a
/// Prometheus knows), of `forced` when given. `source` names where they
/// came from in errors.
pub fn detect<'a>(
    names: impl IntoIterator<Item = &'a str>,
    forced: Option<Engine>,
    prefix: Option<&str>,
    source: &str,
) -> Result<Families, CliError> {
    let names: BTreeSet<&str> = names.into_iter().collect();
    if forced == Some(Engine::Sglang) {
        return Err(CliError::new(format!(
            "--engine sglang: {SGLANG_MEANS_ONLY}"
        )));
    }
    let found = candidates(&names, forced);
    let wanted =
        |f: &Families| forced.is_none_or(|e| f.engine == e) && prefix.is_none_or(|p| f.prefix == p);
    let matching: Vec<Families> = found.iter().filter(|f| wanted(f)).cloned().collect();
    if let (Some(p), true) = (prefix, matching.is_empty() && !found.is_empty()) {
        return Err(CliError::new(format!(
            "{source}: --prefix {}: no such prefix; the counters found are under {}",
            excerpt(p),
            found
                .iter()
                .map(|f| format!("{} ({})", excerpt(&f.prefix), f.engine.name()))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    match (matching.len(), forced) {
        (1, _) => Ok(matching.into_iter().next().expect("one")),
        (0, Some(Engine::Specdec)) if found.iter().any(|f| f.engine == Engine::Vllm) => {
            let f = found
                .iter()
                .find(|f| f.engine == Engine::Vllm)
                .expect("found");
            Err(CliError::new(format!(
                "--engine specdec: {source} has {} but no {}_{}: these are vLLM's families, not this crate's (use --engine vllm)",
                f.drafts(),
                f.prefix,
                METRIC_FAMILIES[5]
            )))
        }
        (0, _) => Err(none_found(&names, forced, source)),
        (_, _) => Err(several_found(&matching, source)),
    }
}

/// Every set of families whose names are among `names`, each once, in
/// the order found; `forced` settles which engine a vLLM-shaped set is.
fn candidates(names: &BTreeSet<&str>, forced: Option<Engine>) -> Vec<Families> {
    let mut found: Vec<Families> = Vec::new();
    let mut add = |f: Families| {
        if !found.contains(&f) {
            found.push(f);
        }
    };
    for name in names {
        let vllm_prefix = name
            .strip_suffix(VLLM_PER_POS)
            .or_else(|| name.strip_suffix(&format!("_{}", METRIC_FAMILIES[0])));
        if let Some(prefix) = vllm_prefix.filter(|p| !p.is_empty()) {
            let by_length = format!("{prefix}_{}", METRIC_FAMILIES[5]);
            let engine = match forced {
                Some(Engine::Vllm) => Engine::Vllm,
                _ if names.contains(by_length.as_str()) => Engine::Specdec,
                _ if prefix.starts_with("llamacpp:") => Engine::Llamacpp,
                Some(Engine::Llamacpp) => Engine::Llamacpp,
                _ => Engine::Vllm,
            };
            add(Families {
                engine,
                prefix: prefix.to_owned(),
            });
        }
        if let Some(prefix) = name
            .strip_suffix(MISTRAL_PROPOSED)
            .filter(|p| !p.is_empty())
        {
            add(Families {
                engine: Engine::Mistralrs,
                prefix: prefix.to_owned(),
            });
        }
        if let Some(prefix) = name
            .strip_suffix(TRTLLM_DRAFTED_PER_POS)
            .filter(|p| p.ends_with("_spec_decode"))
        {
            add(Families {
                engine: Engine::Trtllm,
                prefix: prefix.to_owned(),
            });
        }
    }
    found
}

/// The error for names with no counters of `forced` (any engine's when
/// `None`): SGLang's gauges, or an older llama.cpp, said so.
fn none_found(names: &BTreeSet<&str>, forced: Option<Engine>, source: &str) -> CliError {
    let what = match forced {
        Some(e) => e.name().to_owned(),
        None => "speculative-decoding".to_owned(),
    };
    if names.iter().any(|n| SGLANG_GAUGES.contains(n)) {
        return CliError::new(format!(
            "{source}: these are SGLang's gauges: {SGLANG_MEANS_ONLY}"
        ));
    }
    let mut msg = format!(
        "{source}: no {what} counters found (looked for vLLM's and llama.cpp's <prefix>_num_drafts_total and <prefix>_num_accepted_tokens_per_pos_total ({VLLM_METRIC_PREFIX}, llamacpp:spec_decode), this crate's <prefix>_num_drafts_total and <prefix>_acceptance_by_draft_length_total, mistral.rs's mistralrs_speculative_draft_tokens_proposed_total, TensorRT-LLM's trtllm_spec_decode_drafted_tokens_total, under any prefix)"
    );
    if names.iter().any(|n| n.starts_with("llamacpp:")) {
        let _ = write!(
            msg,
            "; this looks like an older llama.cpp: {LLAMACPP_BEFORE_COUNTERS}"
        );
    }
    CliError::new(msg)
}

/// The error for several sets of families matching: how to pick one.
fn several_found(matching: &[Families], source: &str) -> CliError {
    let engines: BTreeSet<&str> = matching.iter().map(|f| f.engine.name()).collect();
    CliError::new(format!(
        "{source}: several sets of speculative-decoding counters: {}; pick one with --prefix PREFIX (the part before _num_drafts_total: {}){}",
        matching
            .iter()
            .map(|f| format!("{} ({})", f.drafts(), f.engine.name()))
            .collect::<Vec<_>>()
            .join(", "),
        matching
            .iter()
            .map(|f| excerpt(&f.prefix))
            .collect::<Vec<_>>()
            .join(", "),
        if engines.len() > 1 {
            " or --engine ENGINE"
        } else {
            ""
        }
    ))
}

/// How sample values become counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Values {
    /// Counters as an engine exports them: whole numbers `>= 0`; anything
    /// else is an error naming the series.
    Exact,
    /// Prometheus' `increase()`: extrapolated, so fractional; rounded to
    /// the nearest count (still finite and `>= 0`).
    Extrapolated,
}

/// A count from a sample value, or an error naming the series.
pub fn count(sample: &Sample, values: Values) -> Result<u64, CliError> {
    let v = sample.value;
    let series = || series_name(&sample.name, &sample.labels);
    let shown = value_text(v);
    if !v.is_finite() || v < 0.0 {
        return Err(CliError::new(format!(
            "{} is {shown}: a counter is a finite number >= 0",
            series()
        )));
    }
    let v = match values {
        Values::Exact if v.fract() != 0.0 => {
            return Err(CliError::new(format!(
                "{} is {shown}: a count is a whole number",
                series()
            )));
        }
        Values::Exact => v,
        Values::Extrapolated => v.round(),
    };
    if v >= 18_446_744_073_709_551_616.0 {
        return Err(CliError::new(format!(
            "{} is {shown}: above the largest count, 18446744073709551615 (2^64 - 1); an exposition's values are 64-bit floats, in which that count itself reads as 2^64 = 1.8446744073709552e19, one past it (and a count above 2^53 is no longer exact)",
            series()
        )));
    }
    Ok(v as u64)
}

/// A sample value for a message: as written for ordinary numbers, in
/// scientific notation from 1e16 on (never 309 digits for `1e308`).
pub fn value_text(v: f64) -> String {
    if v.is_finite() && v.abs() >= 1e16 {
        format!("{v:e}")
    } else {
        v.to_string()
    }
}

/// A series set: a family's name and its labels but the index labels.
type SeriesSet = (String, Vec<(String, String)>);

/// The counts of one group (one `--by` label value), summed over the
/// group's series (engines, instances).
#[derive(Clone, Debug, Default)]
pub struct GroupCounts {
    pub drafts: Option<u64>,
    pub draft_tokens: Option<u64>,
    pub accepted_tokens: Option<u64>,
    pub accepted_per_pos: BTreeMap<usize, u64>,
    pub draft_tokens_per_pos: BTreeMap<usize, u64>,
    pub buckets: BTreeMap<(usize, usize), u64>,
    /// The positions of each label set of the per-position families (for
    /// the gap check).
    position_sets: BTreeMap<SeriesSet, BTreeSet<usize>>,
    /// The drafts of each label set of the drafts family (for the check
    /// that each has its per-position series).
    draft_sets: BTreeMap<Vec<(String, String)>, u64>,
    bucket_sets: BTreeMap<Vec<(String, String)>, usize>,
}

/// The samples of `families` grouped by the label `by` (a sample without
/// it is in the group ""), each series checked and counted. `source` names
/// the input in errors.
pub fn group(
    samples: &[Sample],
    families: &Families,
    by: &str,
    values: Values,
) -> Result<BTreeMap<String, GroupCounts>, CliError> {
    let mut groups: BTreeMap<String, GroupCounts> = BTreeMap::new();
    let (drafts, tokens, accepted, per_pos) = (
        families.drafts(),
        families.draft_tokens(),
        families.accepted_tokens(),
        families.accepted_per_pos(),
    );
    let drafted_per_pos = families.draft_tokens_per_pos();
    let by_length = families.by_draft_length();
    let add = |slot: &mut Option<u64>, n: u64, s: &Sample| -> Result<(), CliError> {
        *slot = Some(checked_sum(slot.unwrap_or(0), n, s)?);
        Ok(())
    };
    for s in samples {
        let name = s.name.as_str();
        let known = [&drafts, &tokens, &accepted, &per_pos].contains(&&s.name)
            || drafted_per_pos.as_deref() == Some(name)
            || by_length.as_deref() == Some(name);
        if !known {
            continue;
        }
        let n = count(s, values)?;
        let g = groups
            .entry(s.label(by).unwrap_or("").to_owned())
            .or_default();
        let rest = |skip: &[&str]| -> Vec<(String, String)> {
            let mut v: Vec<(String, String)> = s
                .labels
                .iter()
                .filter(|(l, _)| !skip.contains(&l.as_str()))
                .cloned()
                .collect();
            v.sort();
            v
        };
        if *name == per_pos || drafted_per_pos.as_deref() == Some(name) {
            let label = families.position_label();
            let position = index_label(s, label)?;
            let map = if *name == per_pos {
                &mut g.accepted_per_pos
            } else {
                &mut g.draft_tokens_per_pos
            };
            let slot = map.entry(position).or_insert(0);
            *slot = checked_sum(*slot, n, s)?;
            g.position_sets
                .entry((s.name.clone(), rest(&[label])))
                .or_default()
                .insert(position);
        } else if *name == drafts {
            add(&mut g.drafts, n, s)?;
            let slot = g.draft_sets.entry(rest(&[])).or_insert(0);
            *slot = checked_sum(*slot, n, s)?;
        } else if *name == tokens {
            add(&mut g.draft_tokens, n, s)?;
        } else if *name == accepted {
            add(&mut g.accepted_tokens, n, s)?;
        } else {
            let k = index_label(s, "draft_length")?;
            let a = index_label(s, "accepted")?;
            let slot = g.buckets.entry((k, a)).or_insert(0);
            *slot = checked_sum(*slot, n, s)?;
            *g.bucket_sets
                .entry(rest(&["draft_length", "accepted"]))
                .or_default() += 1;
        }
    }
    Ok(groups)
}

/// Where every position is exported from start-up (vLLM, this crate), a
/// label set of the drafts family with drafts but no per-position series,
/// or per-position series without drafts, is a cut or partial scrape
/// (HTTP/1.0 close-delimited bodies, partial copies): reading it would
/// count one engine's drafts as trials without their acceptances.
fn check_every_label_set_has_positions(
    families: &Families,
    g: &GroupCounts,
) -> Result<(), CliError> {
    let per_pos = families.accepted_per_pos();
    let positioned = |labels: &Vec<(String, String)>| {
        g.position_sets
            .contains_key(&(per_pos.clone(), labels.clone()))
    };
    let cut = "the scrape is cut or partial (an HTTP/1.0 body closed early, a partial copy)";
    if let Some((labels, n)) = g
        .draft_sets
        .iter()
        .find(|(labels, n)| **n > 0 && !positioned(labels))
    {
        let mut at0 = labels.clone();
        at0.push(("position".into(), "0".into()));
        return Err(CliError::new(format!(
            "{} is missing, though {} is {n}: {} exports every position from start-up, so {cut}",
            series_name(&per_pos, &at0),
            series_name(&families.drafts(), labels),
            families.engine.name()
        )));
    }
    if let Some(((_, labels), _)) = g
        .position_sets
        .iter()
        .find(|((name, labels), _)| *name == per_pos && !g.draft_sets.contains_key(labels))
    {
        return Err(CliError::new(format!(
            "{} is missing, though {} is there: {} exports both, so {cut}",
            series_name(&families.drafts(), labels),
            series_name(&per_pos, labels),
            families.engine.name()
        )));
    }
    Ok(())
}

fn checked_sum(a: u64, b: u64, s: &Sample) -> Result<u64, CliError> {
    a.checked_add(b).ok_or_else(|| {
        CliError::new(format!(
            "the sum of {} and its group passes 18446744073709551615",
            series_name(&s.name, &s.labels)
        ))
    })
}

/// A label that holds an index (`position`, `draft_length`, `accepted`).
fn index_label(s: &Sample, label: &str) -> Result<usize, CliError> {
    let v = s.label(label).ok_or_else(|| {
        CliError::new(format!(
            "{} has no {label} label",
            series_name(&s.name, &s.labels)
        ))
    })?;
    let canonical = !v.is_empty()
        && v.len() <= 3
        && v.bytes().all(|b| b.is_ascii_digit())
        && (v == "0" || !v.starts_with('0'));
    canonical.then(|| v.parse().ok()).flatten().ok_or_else(|| {
        CliError::new(format!(
            "{}: {label} {} is not an index (0, 1, 2, ...)",
            series_name(&s.name, &s.labels),
            excerpt(v)
        ))
    })
}

/// The counters of one group, ready to identify, and what was assumed to
/// build them.
#[derive(Debug)]
pub struct Built {
    pub counters: EngineCounters,
    pub notes: Vec<String>,
}

/// The relative slack given to Prometheus' extrapolated counts, with
/// [`EXTRAPOLATION_SLACK_COUNTS`]: see [`build`].
pub const EXTRAPOLATION_SLACK: f64 = 0.01;
/// The absolute slack (counts) given to extrapolated counts.
pub const EXTRAPOLATION_SLACK_COUNTS: u64 = 2;

fn slack(x: u64) -> u64 {
    EXTRAPOLATION_SLACK_COUNTS.max((x as f64 * EXTRAPOLATION_SLACK).ceil() as u64)
}

/// Builds the group's [`EngineCounters`].
///
/// `K` is the number of positions (vLLM, this crate; every position must
/// be there, `0..K` without a gap, in every label set), the drafted tokens
/// over the drafts (mistral.rs, whose positions appear lazily), or
/// `max_draft_len` when given (which the others must then agree with).
/// `group_label` is `by="value"` for the messages ("" for the group of
/// series without the label).
///
/// With [`Values::Extrapolated`] (Prometheus' `increase()`), every series
/// is extrapolated on its own, so sums that agree exactly in the engine
/// agree only roughly here. The by-draft-length family then gives every
/// other figure (its own totals, consistent by construction); without it,
/// drafted tokens within [`EXTRAPOLATION_SLACK`] (1%, at least 2 counts)
/// of drafts × `K` count as every draft having `K` tokens, and accepted
/// counts that exceed the drafts or the position before by no more than
/// that are clipped; each such adjustment is a note.
pub fn build(
    families: &Families,
    group_label: &str,
    g: &GroupCounts,
    max_draft_len: Option<usize>,
    values: Values,
) -> Result<Built, CliError> {
    let mut b = Builder {
        families,
        group_label,
        g,
        max_draft_len,
        values,
        by_length_source: values == Values::Extrapolated && families.by_draft_length().is_some(),
        notes: Vec::new(),
    };
    let (drafts, mut draft_tokens, accepted) = b.totals()?;
    let k = b.max_draft_len(drafts, &mut draft_tokens)?;
    if !(1..=specdec_metrics::MAX_MAX_DRAFT_LEN).contains(&k) {
        return Err(CliError::new(format!(
            "K = {k} ({}): advice takes K in 1..=64",
            b.in_group(&families.accepted_per_pos(), "")
        )));
    }
    let mut figures = Figures {
        k,
        drafts,
        draft_tokens,
        accepted,
        per_pos: b.accepted_per_pos(k)?,
    };
    let buckets = b.buckets(&mut figures)?;
    if values == Values::Extrapolated && buckets.is_none() {
        b.within_slack(&mut figures);
    }
    b.counters(figures, buckets)
}

/// A by-draft-length bucket: `(draft_length, accepted, count)`.
type Bucket = (usize, usize, u64);

/// The figures [`EngineCounters::new`] takes, as [`build`] gathers them.
struct Figures {
    k: usize,
    drafts: u64,
    draft_tokens: u64,
    accepted: u64,
    per_pos: Vec<u64>,
}

/// One group's build: what it reads, and the notes of what it assumed.
struct Builder<'a> {
    families: &'a Families,
    group_label: &'a str,
    g: &'a GroupCounts,
    max_draft_len: Option<usize>,
    values: Values,
    /// Every figure from the by-draft-length buckets (`increase()` of this
    /// crate's families: one extrapolation, consistent).
    by_length_source: bool,
    notes: Vec<String>,
}

impl Builder<'_> {
    /// `name{group_label,extra}` as the series is named.
    fn in_group(&self, name: &str, extra: &str) -> String {
        let group_label = self.group_label;
        match (group_label.is_empty(), extra.is_empty()) {
            (true, true) => name.to_owned(),
            (true, false) => format!("{name}{{{extra}}}"),
            (false, true) => format!("{name}{{{group_label}}}"),
            (false, false) => format!("{name}{{{group_label},{extra}}}"),
        }
    }

    fn missing(&self, name: String) -> CliError {
        CliError::new(format!(
            "{} is missing: {} exports it, and advice needs it",
            self.in_group(&name, ""),
            self.families.engine.name()
        ))
    }

    /// Drafts, drafted and accepted tokens.
    fn totals(&mut self) -> Result<(u64, u64, u64), CliError> {
        let (families, g) = (self.families, self.g);
        if self.by_length_source {
            return Ok((0, 0, 0));
        }
        if families.has_drafts_family() {
            return Ok((
                g.drafts.ok_or_else(|| self.missing(families.drafts()))?,
                g.draft_tokens
                    .ok_or_else(|| self.missing(families.draft_tokens()))?,
                g.accepted_tokens
                    .ok_or_else(|| self.missing(families.accepted_tokens()))?,
            ));
        }
        // TensorRT-LLM: every figure from the per-position counters (the
        // iteration totals beside them count unfinished requests too).
        if g.draft_tokens_per_pos.is_empty() {
            return Err(self.missing(families.draft_tokens_per_pos().unwrap_or_default()));
        }
        let sum = |m: &BTreeMap<usize, u64>| m.values().fold(0u64, |a, &n| a.saturating_add(n));
        let (d, a) = (sum(&g.draft_tokens_per_pos), sum(&g.accepted_per_pos));
        for (total, per_pos, name) in [
            (g.draft_tokens, d, families.draft_tokens()),
            (g.accepted_tokens, a, families.accepted_tokens()),
        ] {
            if let Some(total) = total.filter(|&t| t != per_pos) {
                let note = format!(
                    "{} is {total}, the per-position counters add up to {per_pos}: the total counts every iteration (enable_iter_perf_stats), the per-position counters the requests that finished with return_perf_metrics; the per-position counters are used",
                    self.in_group(&name, "")
                );
                self.notes.push(note);
            }
        }
        Ok((g.draft_tokens_per_pos.get(&0).copied().unwrap_or(0), d, a))
    }

    /// `K`, as the engine's families tell it (see [`build`]).
    fn max_draft_len(&mut self, drafts: u64, draft_tokens: &mut u64) -> Result<usize, CliError> {
        if self.by_length_source {
            self.k_from_buckets()
        } else if self.families.positions_always_exported() {
            self.k_from_positions()
        } else if self.families.lengths_vary() {
            self.k_from_highest_position(drafts)
        } else if let Some(given) = self.max_draft_len {
            Ok(given)
        } else {
            self.k_from_drafts(drafts, draft_tokens)
        }
    }

    /// From the buckets alone: the largest draft length.
    fn k_from_buckets(&self) -> Result<usize, CliError> {
        let name = self.families.by_draft_length().unwrap_or_default();
        let k = self
            .g
            .buckets
            .keys()
            .map(|&(k, _)| k)
            .max()
            .ok_or_else(|| self.missing(name.clone()))?;
        if let Some(given) = self.max_draft_len.filter(|&m| m != k) {
            return Err(CliError::new(format!(
                "{} has draft lengths 0..={k} (K = {k}) but --max-draft-len is {given}",
                self.in_group(&name, "")
            )));
        }
        Ok(k)
    }

    /// The number of positions, every one there in every label set.
    fn k_from_positions(&self) -> Result<usize, CliError> {
        let families = self.families;
        check_every_label_set_has_positions(families, self.g)?;
        let mut k = None;
        for ((name, labels), positions) in &self.g.position_sets {
            let n = positions.last().map_or(0, |&p| p + 1);
            if let Some(gap) = (0..n).find(|p| !positions.contains(p)) {
                let mut labels = labels.clone();
                labels.push(("position".into(), gap.to_string()));
                return Err(CliError::new(format!(
                    "{} is missing, though position {} is there: {} exports every position from 0 to K - 1",
                    series_name(name, &labels),
                    n - 1,
                    families.engine.name()
                )));
            }
            match k {
                None => k = Some(n),
                Some(k) if k != n => {
                    return Err(CliError::new(format!(
                        "{} has positions 0..{} in one series set and 0..{} in another: engines of one {} have different K; advise them apart (--by, --selector)",
                        self.in_group(name, ""),
                        k.min(n),
                        k.max(n),
                        if self.group_label.is_empty() {
                            "group"
                        } else {
                            self.group_label
                        },
                    )));
                }
                Some(_) => {}
            }
        }
        let k = k
            .filter(|&k| k > 0)
            .ok_or_else(|| self.missing(families.accepted_per_pos()))?;
        if let Some(given) = self.max_draft_len.filter(|&m| m != k) {
            return Err(CliError::new(format!(
                "{} has positions 0..{} (K = {k}) but --max-draft-len is {given}",
                self.in_group(&families.accepted_per_pos(), ""),
                k - 1
            )));
        }
        Ok(k)
    }

    /// Engines whose drafts vary and whose positions appear as reached
    /// (llama.cpp, TensorRT-LLM): `--max-draft-len`, else the highest
    /// position exported plus one, with a note.
    fn k_from_highest_position(&mut self, drafts: u64) -> Result<usize, CliError> {
        let (families, g) = (self.families, self.g);
        let highest = g
            .accepted_per_pos
            .keys()
            .chain(g.draft_tokens_per_pos.keys())
            .max()
            .map(|&p| p + 1);
        match (self.max_draft_len, highest) {
            (Some(given), Some(h)) if h > given => Err(CliError::new(format!(
                "{} exists but --max-draft-len is {given}",
                self.in_group(
                    &families.accepted_per_pos(),
                    &format!("{}=\"{}\"", families.position_label(), h - 1)
                )
            ))),
            (Some(given), _) => Ok(given),
            (None, Some(h)) => {
                self.notes.push(format!(
                    "K = {h}: the highest position exported is {}; {} creates a position's series only once it is reached, so the configured maximum may be higher (give it with --max-draft-len)",
                    h - 1,
                    families.engine.name()
                ));
                Ok(h)
            }
            (None, None) => Err(CliError::new(format!(
                "{} has no series: {} creates them with the first finished speculative request{}",
                self.in_group(&families.accepted_per_pos(), ""),
                families.engine.name(),
                if drafts > 0 {
                    format!(
                        ", yet {} is {drafts}: the scrape is cut or partial",
                        self.in_group(&families.drafts(), "")
                    )
                } else {
                    " (nothing drafted yet)".to_owned()
                }
            ))),
        }
    }

    /// mistral.rs: the drafted tokens over the drafts, which must be whole
    /// (within the extrapolation slack under `increase()`, then set so).
    fn k_from_drafts(&mut self, drafts: u64, draft_tokens: &mut u64) -> Result<usize, CliError> {
        let families = self.families;
        if drafts == 0 {
            return Err(CliError::new(format!(
                "{} is 0: {} does not export K, which only drafts show (drafted tokens / drafts); give --max-draft-len K",
                self.in_group(&families.drafts(), ""),
                families.engine.name()
            )));
        }
        let tokens = *draft_tokens;
        let k = (tokens as f64 / drafts as f64).round() as u64;
        let exact = tokens == drafts.saturating_mul(k);
        let close = self.values == Values::Extrapolated
            && tokens.abs_diff(drafts.saturating_mul(k)) <= slack(tokens);
        if k == 0 || !(exact || close) {
            return Err(CliError::new(format!(
                "{} ({tokens}) over {} ({drafts}) is not a whole number: drafts had different lengths (mistral.rs adapts its draft depth unless --mtp-n-predict is set), and mistral.rs does not export K; give --max-draft-len K (its --mtp-n-predict, or the largest depth)",
                self.in_group(&families.draft_tokens(), ""),
                self.in_group(&families.drafts(), ""),
            )));
        }
        if !exact {
            self.notes.push(format!(
                "K = {k} taken from drafted tokens {tokens} / drafts {drafts} within the extrapolation slack of increase()"
            ));
            *draft_tokens = drafts * k;
        }
        let k = usize::try_from(k).unwrap_or(usize::MAX);
        if let Some((&p, _)) = self
            .g
            .accepted_per_pos
            .iter()
            .next_back()
            .filter(|(p, _)| **p >= k)
        {
            return Err(CliError::new(format!(
                "{} exists but K (drafted tokens / drafts) is {k}: drafts had different lengths; give --max-draft-len K",
                self.in_group(&families.accepted_per_pos(), &format!("position=\"{p}\""))
            )));
        }
        Ok(k)
    }

    /// The accepted count at each position `0..k` (a missing one is 0).
    fn accepted_per_pos(&self, k: usize) -> Result<Vec<u64>, CliError> {
        let g = self.g;
        if let Some((&p, _)) = g
            .accepted_per_pos
            .iter()
            .next_back()
            .filter(|(p, _)| **p >= k)
        {
            return Err(CliError::new(format!(
                "{} exists but K is {k}",
                self.in_group(
                    &self.families.accepted_per_pos(),
                    &format!("position=\"{p}\"")
                )
            )));
        }
        Ok((0..k)
            .map(|p| g.accepted_per_pos.get(&p).copied().unwrap_or(0))
            .collect())
    }

    /// This crate's by-draft-length buckets, checked whole; the figures
    /// from them alone when they are the source.
    fn buckets(&self, f: &mut Figures) -> Result<Option<Vec<Bucket>>, CliError> {
        let Some(name) = self.families.by_draft_length() else {
            return Ok(None);
        };
        let buckets: Vec<(usize, usize, u64)> = self
            .g
            .buckets
            .iter()
            .map(|(&(k, a), &n)| (k, a, n))
            .collect();
        if buckets.is_empty() {
            return Err(self.missing(name));
        }
        let k = f.k;
        let triangle = (k + 1) * (k + 2) / 2;
        if let Some((labels, &n)) = self.g.bucket_sets.iter().find(|(_, n)| **n != triangle) {
            return Err(CliError::new(format!(
                "{} has {n} buckets but K = {k} has {triangle} (every accepted <= draft_length <= K): this crate exports every bucket",
                series_name(&name, labels)
            )));
        }
        if self.by_length_source {
            f.per_pos = vec![0; k];
            for &(kk, a, n) in &buckets {
                f.drafts = f.drafts.saturating_add(n);
                f.draft_tokens = f.draft_tokens.saturating_add(n.saturating_mul(kk as u64));
                f.accepted = f.accepted.saturating_add(n.saturating_mul(a as u64));
                for p in f.per_pos.iter_mut().take(a) {
                    *p = p.saturating_add(n);
                }
            }
        }
        Ok(Some(buckets))
    }

    /// Under `increase()` without buckets: figures within the
    /// extrapolation slack of agreeing are made to agree, each with a note.
    fn within_slack(&mut self, f: &mut Figures) {
        let full = f.drafts.saturating_mul(f.k as u64);
        if f.draft_tokens != full && f.draft_tokens.abs_diff(full) <= slack(full) {
            self.notes.push(format!(
                "drafted tokens {} are within the extrapolation slack of increase() (1%) of drafts × K = {full}: every draft is taken to have had K = {} tokens",
                f.draft_tokens, f.k
            ));
            f.draft_tokens = full;
        }
        let mut bound = f.drafts;
        for (p, v) in f.per_pos.iter_mut().enumerate() {
            if *v > bound && *v - bound <= slack(bound) {
                self.notes.push(format!(
                    "accepted at position {p} ({v}) clipped to {bound} (within the extrapolation slack of increase())"
                ));
                *v = bound;
            }
            bound = *v;
        }
        let sum = f.per_pos.iter().fold(0u64, |a, &n| a.saturating_add(n));
        if f.accepted != sum && f.accepted.abs_diff(sum) <= slack(sum) {
            self.notes.push(format!(
                "accepted tokens {} taken as the sum of the accepted counts per position, {sum} (within the extrapolation slack of increase())",
                f.accepted
            ));
            f.accepted = sum;
        }
        f.accepted = f.accepted.min(f.draft_tokens);
    }

    /// The series an error of the library's names, as the engine names it.
    fn name_series(&self, s: CounterSeries) -> String {
        let families = self.families;
        let at = |position: usize| format!("{}=\"{position}\"", families.position_label());
        match s {
            CounterSeries::Drafts => self.in_group(&families.drafts(), ""),
            CounterSeries::DraftTokens => self.in_group(&families.draft_tokens(), ""),
            CounterSeries::AcceptedTokens => self.in_group(&families.accepted_tokens(), ""),
            CounterSeries::AcceptedPerPos { position } => {
                self.in_group(&families.accepted_per_pos(), &at(position))
            }
            CounterSeries::DraftTokensPerPos { position } => self.in_group(
                &families.draft_tokens_per_pos().unwrap_or_default(),
                &at(position),
            ),
            _ => self.in_group(&families.by_draft_length().unwrap_or_default(), ""),
        }
    }

    /// The library's counters from the figures, the drafted counts per
    /// position and the buckets where the engine exports them.
    fn counters(self, f: Figures, buckets: Option<Vec<Bucket>>) -> Result<Built, CliError> {
        let g = self.g;
        let k = f.k;
        let fail = |e: specdec_metrics::EngineCountersError| {
            CliError::new(e.to_string_with(|s| self.name_series(s)))
        };
        let mut counters = EngineCounters::new(k, f.drafts, f.draft_tokens, f.accepted, f.per_pos)
            .map_err(fail)?;
        if !self.by_length_source && !g.draft_tokens_per_pos.is_empty() {
            if let Some((&p, _)) = g
                .draft_tokens_per_pos
                .iter()
                .next_back()
                .filter(|(p, _)| **p >= k)
            {
                return Err(CliError::new(format!(
                    "{} exists but K is {k}",
                    self.in_group(
                        &self.families.draft_tokens_per_pos().unwrap_or_default(),
                        &format!("{}=\"{p}\"", self.families.position_label())
                    )
                )));
            }
            let drafted: Vec<u64> = (0..k)
                .map(|p| g.draft_tokens_per_pos.get(&p).copied().unwrap_or(0))
                .collect();
            counters = counters.with_draft_tokens_per_pos(drafted).map_err(fail)?;
        }
        if let Some(buckets) = buckets {
            counters = counters
                .with_by_draft_length_buckets(buckets)
                .map_err(fail)?;
        }
        Ok(Built {
            counters,
            notes: self.notes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn detects_vllm_and_this_crate_under_any_prefix() {
        let vllm = names(&[
            "vllm:spec_decode_num_drafts_total",
            "vllm:spec_decode_num_accepted_tokens_per_pos_total",
            "vllm:spec_decode_num_drafts_created",
        ]);
        let f = detect(vllm.iter().map(String::as_str), None, None, "x").unwrap();
        assert_eq!(
            (f.engine, f.prefix.as_str()),
            (Engine::Vllm, "vllm:spec_decode")
        );
        let mut ours = vllm.clone();
        ours.push("vllm:spec_decode_acceptance_by_draft_length_total".into());
        let f = detect(ours.iter().map(String::as_str), None, None, "x").unwrap();
        assert_eq!(f.engine, Engine::Specdec);
        assert_eq!(
            f.by_draft_length().as_deref(),
            Some("vllm:spec_decode_acceptance_by_draft_length_total")
        );
        let f = detect(
            ours.iter().map(String::as_str),
            Some(Engine::Vllm),
            None,
            "x",
        )
        .unwrap();
        assert_eq!(f.engine, Engine::Vllm);
        let err = detect(
            vllm.iter().map(String::as_str),
            Some(Engine::Specdec),
            None,
            "x",
        )
        .unwrap_err();
        assert!(err.to_string().contains("use --engine vllm"), "{err}");
    }

    #[test]
    fn detects_the_other_engines_and_refuses_gauges_and_several_sets() {
        let vllm = names(&[
            "vllm:spec_decode_num_drafts_total",
            "vllm:spec_decode_num_accepted_tokens_per_pos_total",
        ]);
        let mistral = names(&[
            "mistralrs_speculative_drafts_total",
            "mistralrs_speculative_draft_tokens_proposed_total",
        ]);
        let f = detect(mistral.iter().map(String::as_str), None, None, "x").unwrap();
        assert_eq!(
            (f.engine, f.prefix.as_str()),
            (Engine::Mistralrs, "mistralrs_speculative")
        );
        assert_eq!(
            f.accepted_per_pos(),
            "mistralrs_speculative_draft_tokens_accepted_per_pos_total"
        );
        let llama = names(&["llamacpp:n_decode_total", "llamacpp:tokens_predicted_total"]);
        let err = detect(llama.iter().map(String::as_str), None, None, "x").unwrap_err();
        assert!(err.to_string().contains("older llama.cpp"), "{err}");
        let llama = names(&[
            "llamacpp:spec_decode_num_drafts_total",
            "llamacpp:spec_decode_num_accepted_tokens_per_pos_total",
        ]);
        let f = detect(llama.iter().map(String::as_str), None, None, "x").unwrap();
        assert_eq!(
            (f.engine, f.prefix.as_str()),
            (Engine::Llamacpp, "llamacpp:spec_decode")
        );
        let trt = names(&[
            "trtllm_spec_decode_drafted_tokens_total",
            "trtllm_spec_decode_accepted_tokens_total",
            "trtllm_spec_decode_num_draft_tokens_total",
        ]);
        let f = detect(trt.iter().map(String::as_str), None, None, "x").unwrap();
        assert_eq!(
            (f.engine, f.prefix.as_str(), f.position_label()),
            (Engine::Trtllm, "trtllm_spec_decode", "token_position")
        );
        assert_eq!(f.drafts(), "trtllm_spec_decode_drafted_tokens_total");
        assert_eq!(
            f.accepted_per_pos(),
            "trtllm_spec_decode_accepted_tokens_total"
        );
        let err = detect(
            vllm.iter().map(String::as_str),
            Some(Engine::Sglang),
            None,
            "x",
        )
        .unwrap_err();
        assert!(err.to_string().contains("gauges"), "{err}");
        let both: Vec<String> = vllm.iter().chain(&mistral).cloned().collect();
        let err = detect(both.iter().map(String::as_str), None, None, "x").unwrap_err();
        assert!(err.to_string().contains("several sets"), "{err}");
    }

    #[test]
    fn counts_are_whole_finite_and_not_negative() {
        let s = |v: f64| Sample {
            name: "a_total".into(),
            labels: vec![("m".into(), "x".into())],
            value: v,
        };
        assert_eq!(count(&s(3.0), Values::Exact).unwrap(), 3);
        assert_eq!(count(&s(2.6), Values::Extrapolated).unwrap(), 3);
        for (v, says) in [
            (f64::NAN, "is NaN"),
            (f64::INFINITY, "is inf"),
            (-1.0, "is -1"),
            (1.5, "a whole number"),
            (1e20, "above the largest count"),
        ] {
            let e = count(&s(v), Values::Exact).unwrap_err().to_string();
            assert!(
                e.starts_with("a_total{m=\"x\"} ") && e.contains(says),
                "{e}"
            );
        }
    }
}
