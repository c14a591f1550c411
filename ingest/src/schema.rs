//! The speculative-decoding counters of each engine, as it exports them:
//! one row of [`SCHEMAS`] per engine (its families' names, its position
//! label, whether every position is exported from start-up, its setting
//! for a draft length), and [`detect`], which finds the families among the
//! names of a scrape. [`crate::counters`] turns their samples into the
//! library's [`EngineCounters`](specdec_metrics::EngineCounters).
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
//!   highest position exported plus one unless `max_draft_len` gives it
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
//!   ([`EngineCounters::with_draft_tokens_per_pos`](specdec_metrics::EngineCounters::with_draft_tokens_per_pos)).
//! - **SGLang**: its Prometheus gauges `sglang:spec_accept_length` and
//!   `sglang:spec_accept_rate` are means over the latest interval only
//!   (and a gauge cannot be summed over time with `rate()`): nothing per
//!   position, so advice cannot be made from them; an error says so and
//!   what to read instead.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde::Serialize;
use specdec_metrics::{METRIC_FAMILIES, VLLM_METRIC_PREFIX};

use crate::error::{Error, Setting};
use crate::message;
use crate::text::excerpt;

/// An engine whose counters, logs or responses are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
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

/// How `K` is known from an engine's families.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KFrom {
    /// The number of positions: every one is exported from start-up, so a
    /// missing position is an error (vLLM, this crate).
    Positions,
    /// The highest position exported plus one, unless `K` is given:
    /// drafts vary in length by design and positions appear as they are
    /// reached, a missing one is 0 (llama.cpp, TensorRT-LLM).
    HighestPosition,
    /// `K` as given, else the drafted tokens over the drafts, which must
    /// be whole; positions appear as they are reached (mistral.rs).
    Drafts,
}

/// How a schema of its own is told among a scrape's names: a name ending
/// in `suffix` whose prefix (the rest) ends in `prefix_ends_with`.
#[derive(Debug)]
pub struct Detect {
    /// The suffix of a family only this schema has.
    pub suffix: &'static str,
    /// What the prefix before it must end with ("" for anything).
    pub prefix_ends_with: &'static str,
    /// The prefix the engine exports it under, for messages.
    pub usual_prefix: &'static str,
}

/// One engine's counter families and what they mean: one row of
/// [`SCHEMAS`]. The families' names are the prefix followed by each
/// suffix.
#[derive(Debug)]
pub struct Schema {
    /// The engine.
    pub engine: Engine,
    /// Its name for people.
    pub name: &'static str,
    /// The drafts (verify steps that drafted). TensorRT-LLM has no such
    /// counter: its drafts are the drafted count at position 0, its
    /// drafted-per-position family.
    pub drafts: &'static str,
    /// The drafted tokens.
    pub draft_tokens: &'static str,
    /// The accepted tokens.
    pub accepted_tokens: &'static str,
    /// The accepted tokens at each position.
    pub accepted_per_pos: &'static str,
    /// The drafted tokens at each position, where exported.
    pub draft_tokens_per_pos: Option<&'static str>,
    /// This crate's by-draft-length family, where exported.
    pub by_draft_length: Option<&'static str>,
    /// The label that holds a position.
    pub position_label: &'static str,
    /// How `K` is known.
    pub k_from: KFrom,
    /// How its families are told apart from others'; `None` for vLLM's
    /// shape (`<prefix>_num_drafts_total` and
    /// `<prefix>_num_accepted_tokens_per_pos_total`), which vLLM,
    /// llama.cpp and this crate share and [`detect`] tells apart by what
    /// is beside them.
    pub detect: Option<Detect>,
    /// The setting for not speculating.
    pub off: &'static str,
    /// The exact setting that makes the engine draft `k > 0` tokens.
    pub on: fn(usize) -> String,
}

/// Every engine's schema, one row each.
pub const SCHEMAS: &[Schema] = &[
    Schema {
        engine: Engine::Vllm,
        name: "vLLM",
        drafts: VLLM_DRAFTS,
        draft_tokens: VLLM_DRAFT_TOKENS,
        accepted_tokens: VLLM_ACCEPTED,
        accepted_per_pos: VLLM_PER_POS,
        draft_tokens_per_pos: None,
        by_draft_length: None,
        position_label: "position",
        k_from: KFrom::Positions,
        detect: None,
        off: "vLLM: start it without --speculative-config (do not speculate)",
        on: |k| {
            format!(
                "vLLM: --speculative-config '{{\"num_speculative_tokens\": {k}, ...}}' (keep your method and model keys; Python: speculative_config={{\"num_speculative_tokens\": {k}, ...}})"
            )
        },
    },
    Schema {
        engine: Engine::Llamacpp,
        name: "llama.cpp",
        drafts: VLLM_DRAFTS,
        draft_tokens: VLLM_DRAFT_TOKENS,
        accepted_tokens: VLLM_ACCEPTED,
        accepted_per_pos: VLLM_PER_POS,
        draft_tokens_per_pos: None,
        by_draft_length: None,
        position_label: "position",
        k_from: KFrom::HighestPosition,
        detect: None,
        off: "llama.cpp: start llama-server without --model-draft / --spec-type (do not speculate)",
        on: |k| {
            format!(
                "llama.cpp: llama-server --spec-draft-n-max {k} (builds before the --spec-* flags: --draft-max {k})"
            )
        },
    },
    Schema {
        engine: Engine::Mistralrs,
        name: "mistral.rs",
        drafts: "_drafts_total",
        draft_tokens: MISTRAL_PROPOSED,
        accepted_tokens: "_draft_tokens_accepted_total",
        accepted_per_pos: "_draft_tokens_accepted_per_pos_total",
        draft_tokens_per_pos: None,
        by_draft_length: None,
        position_label: "position",
        k_from: KFrom::Drafts,
        detect: Some(Detect {
            suffix: MISTRAL_PROPOSED,
            prefix_ends_with: "",
            usual_prefix: "mistralrs_speculative",
        }),
        off: "mistral.rs: start it without --mtp / --mtp-model (do not speculate)",
        on: |k| {
            format!(
                "mistral.rs: --mtp-n-predict {k} (TOML: mtp_n_predict = {k}; it also turns adaptive draft depth off)"
            )
        },
    },
    Schema {
        engine: Engine::Specdec,
        name: "specdec-metrics",
        drafts: VLLM_DRAFTS,
        draft_tokens: VLLM_DRAFT_TOKENS,
        accepted_tokens: VLLM_ACCEPTED,
        accepted_per_pos: VLLM_PER_POS,
        draft_tokens_per_pos: Some(SPECDEC_DRAFTED_PER_POS),
        by_draft_length: Some(SPECDEC_BY_LENGTH),
        position_label: "position",
        k_from: KFrom::Positions,
        detect: None,
        off: "specdec-metrics: draft 0 tokens (do not speculate); the Recorder keeps its max_draft_len",
        on: |k| {
            format!(
                "specdec-metrics: max_draft_len = {k} (Recorder::new({k}), DraftController::new({k}, cost)), or draft {k} from a larger K"
            )
        },
    },
    Schema {
        engine: Engine::Trtllm,
        name: "TensorRT-LLM",
        drafts: TRTLLM_DRAFTED_PER_POS,
        draft_tokens: "_num_draft_tokens_total",
        accepted_tokens: "_num_accepted_tokens_total",
        accepted_per_pos: "_accepted_tokens_total",
        draft_tokens_per_pos: Some(TRTLLM_DRAFTED_PER_POS),
        by_draft_length: None,
        position_label: "token_position",
        k_from: KFrom::HighestPosition,
        detect: Some(Detect {
            suffix: TRTLLM_DRAFTED_PER_POS,
            prefix_ends_with: "_spec_decode",
            usual_prefix: "trtllm_spec_decode",
        }),
        off: "TensorRT-LLM: leave speculative_config out of the LLM API options (do not speculate)",
        on: |k| {
            format!(
                "TensorRT-LLM: speculative_config: {{max_draft_len: {k}, ...}} in the --extra_llm_api_options YAML (keep decoding_type and the draft model; Python: speculative_config=...(max_draft_len={k}))"
            )
        },
    },
    Schema {
        engine: Engine::Sglang,
        name: "SGLang",
        drafts: VLLM_DRAFTS,
        draft_tokens: VLLM_DRAFT_TOKENS,
        accepted_tokens: VLLM_ACCEPTED,
        accepted_per_pos: VLLM_PER_POS,
        draft_tokens_per_pos: None,
        by_draft_length: None,
        position_label: "position",
        // Never read: SGLang's gauges are refused (`detect`); its
        // responses count every draft.
        k_from: KFrom::Drafts,
        detect: None,
        off: "SGLang: start it without --speculative-algorithm (do not speculate)",
        on: |k| {
            format!(
                "SGLang: --speculative-num-steps {k} --speculative-eagle-topk 1 --speculative-num-draft-tokens {}",
                k + 1
            )
        },
    },
];

/// The suffixes of vLLM's schema: `_` and the families of this crate's
/// that vLLM exports too ([`METRIC_FAMILIES`] 0 to 3).
const VLLM_DRAFTS: &str = "_num_drafts_total";
const VLLM_DRAFT_TOKENS: &str = "_num_draft_tokens_total";
const VLLM_ACCEPTED: &str = "_num_accepted_tokens_total";
const VLLM_PER_POS: &str = "_num_accepted_tokens_per_pos_total";
/// This crate's own: [`METRIC_FAMILIES`] 4 and 5.
const SPECDEC_DRAFTED_PER_POS: &str = "_num_draft_tokens_per_pos_total";
const SPECDEC_BY_LENGTH: &str = "_acceptance_by_draft_length_total";
/// The suffixes that tell mistral.rs's and TensorRT-LLM's schemas.
const MISTRAL_PROPOSED: &str = "_draft_tokens_proposed_total";
const TRTLLM_DRAFTED_PER_POS: &str = "_drafted_tokens_total";
const SGLANG_GAUGES: [&str; 2] = ["sglang:spec_accept_length", "sglang:spec_accept_rate"];

impl Engine {
    /// Its row of [`SCHEMAS`].
    pub fn schema(self) -> &'static Schema {
        SCHEMAS
            .iter()
            .find(|s| s.engine == self)
            .expect("every engine has a row")
    }

    /// The engine's name for people.
    pub fn name(self) -> &'static str {
        self.schema().name
    }

    /// The exact setting that makes the engine draft `k` tokens.
    pub fn setting(self, k: usize) -> String {
        let schema = self.schema();
        if k == 0 {
            schema.off.to_owned()
        } else {
            (schema.on)(k)
        }
    }
}

/// Why SGLang's Prometheus gauges cannot be advised, and what to read.
pub fn sglang_means_only() -> Error {
    message![
        "SGLang's sglang:spec_accept_length and sglang:spec_accept_rate are gauges of the latest interval's means (never rate() a gauge): nothing per position, so a draft length cannot be advised from them. SGLang's per-request meta_info (spec_verify_ct, spec_num_proposed_drafts, spec_num_correct_drafts, spec_correct_drafts_histogram) holds the accepted counts per verify step, which identify the counts exactly: save the responses (one per line) and read them with advise ",
        Setting::Log("responses"),
        " FILE",
    ]
}

/// Why an older llama.cpp cannot be advised.
const LLAMACPP_BEFORE_COUNTERS: &str = "llama.cpp's server exports speculative-decoding counters on /metrics (llamacpp:spec_decode_num_drafts_total, ..._num_accepted_tokens_per_pos_total) only since llama.cpp PR #26389 (August 2026); before it, draft counts exist only per request and in the log, as totals without positions. Update llama-server and start it with --metrics";

/// The families of one engine under one prefix: the names read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Families {
    /// The engine.
    pub engine: Engine,
    /// The part of the names before the schema's suffixes.
    pub prefix: String,
}

impl Families {
    fn schema(&self) -> &'static Schema {
        self.engine.schema()
    }

    fn named(&self, suffix: &str) -> String {
        format!("{}{suffix}", self.prefix)
    }

    /// Drafts (verify steps that drafted). TensorRT-LLM has no such
    /// counter: its drafts are the drafted count at position 0.
    pub fn drafts(&self) -> String {
        self.named(self.schema().drafts)
    }

    /// Drafted tokens.
    pub fn draft_tokens(&self) -> String {
        self.named(self.schema().draft_tokens)
    }

    /// Accepted tokens.
    pub fn accepted_tokens(&self) -> String {
        self.named(self.schema().accepted_tokens)
    }

    /// Accepted tokens per position.
    pub fn accepted_per_pos(&self) -> String {
        self.named(self.schema().accepted_per_pos)
    }

    /// The drafted-per-position family: this crate's, or TensorRT-LLM's.
    pub fn draft_tokens_per_pos(&self) -> Option<String> {
        self.schema().draft_tokens_per_pos.map(|s| self.named(s))
    }

    /// The label that holds a position.
    pub fn position_label(&self) -> &'static str {
        self.schema().position_label
    }

    /// Whether the drafts counter is a family of its own (TensorRT-LLM's
    /// drafts are its drafted count at position 0).
    pub fn has_drafts_family(&self) -> bool {
        self.schema().draft_tokens_per_pos != Some(self.schema().drafts)
    }

    /// This crate's by-draft-length family (`Specdec` only).
    pub fn by_draft_length(&self) -> Option<String> {
        self.schema().by_draft_length.map(|s| self.named(s))
    }

    /// How `K` is known.
    pub fn k_from(&self) -> KFrom {
        self.schema().k_from
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
}

/// The families among `names` (the sample names of a scrape, or those a
/// Prometheus knows), of `forced` when given, under `prefix` when given.
/// `source` names where they came from in errors.
pub fn detect<'a>(
    names: impl IntoIterator<Item = &'a str>,
    forced: Option<Engine>,
    prefix: Option<&str>,
    source: &str,
) -> Result<Families, Error> {
    let names: BTreeSet<&str> = names.into_iter().collect();
    if forced == Some(Engine::Sglang) {
        return Err(sglang_means_only()
            .after(" sglang: ")
            .after(Setting::Engine));
    }
    let found = candidates(&names, forced);
    let wanted =
        |f: &Families| forced.is_none_or(|e| f.engine == e) && prefix.is_none_or(|p| f.prefix == p);
    let matching: Vec<Families> = found.iter().filter(|f| wanted(f)).cloned().collect();
    if let (Some(p), true) = (prefix, matching.is_empty() && !found.is_empty()) {
        return Err(message![
            format!("{source}: "),
            Setting::Prefix,
            format!(
                " {}: no such prefix; the counters found are under {}",
                excerpt(p),
                found
                    .iter()
                    .map(|f| format!("{} ({})", excerpt(&f.prefix), f.engine.name()))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        ]);
    }
    match (matching.len(), forced) {
        (1, _) => Ok(matching.into_iter().next().expect("one")),
        (0, Some(Engine::Specdec)) if found.iter().any(|f| f.engine == Engine::Vllm) => {
            let f = found
                .iter()
                .find(|f| f.engine == Engine::Vllm)
                .expect("found");
            Err(message![
                Setting::Engine,
                format!(
                    " specdec: {source} has {} but no {}_{}: these are vLLM's families, not this crate's (use ",
                    f.drafts(),
                    f.prefix,
                    METRIC_FAMILIES[5]
                ),
                Setting::Engine,
                " vllm)",
            ])
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
            .or_else(|| name.strip_suffix(VLLM_DRAFTS));
        if let Some(prefix) = vllm_prefix.filter(|p| !p.is_empty()) {
            let by_length = format!("{prefix}{SPECDEC_BY_LENGTH}");
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
        for schema in SCHEMAS {
            let Some(d) = &schema.detect else {
                continue;
            };
            if let Some(prefix) = name
                .strip_suffix(d.suffix)
                .filter(|p| !p.is_empty() && p.ends_with(d.prefix_ends_with))
            {
                add(Families {
                    engine: schema.engine,
                    prefix: prefix.to_owned(),
                });
            }
        }
    }
    found
}

/// The error for names with no counters of `forced` (any engine's when
/// `None`): SGLang's gauges, or an older llama.cpp, said so.
fn none_found(names: &BTreeSet<&str>, forced: Option<Engine>, source: &str) -> Error {
    let what = match forced {
        Some(e) => e.name().to_owned(),
        None => "speculative-decoding".to_owned(),
    };
    if names.iter().any(|n| SGLANG_GAUGES.contains(n)) {
        return sglang_means_only().after(format!("{source}: these are SGLang's gauges: "));
    }
    let own: String = SCHEMAS
        .iter()
        .filter_map(|s| {
            let d = s.detect.as_ref()?;
            Some(format!("{}'s {}{}, ", s.name, d.usual_prefix, d.suffix))
        })
        .collect();
    let mut msg = format!(
        "{source}: no {what} counters found (looked for vLLM's and llama.cpp's <prefix>_num_drafts_total and <prefix>_num_accepted_tokens_per_pos_total ({VLLM_METRIC_PREFIX}, llamacpp:spec_decode), this crate's <prefix>_num_drafts_total and <prefix>_acceptance_by_draft_length_total, {own}under any prefix)"
    );
    if names.iter().any(|n| n.starts_with("llamacpp:")) {
        let _ = write!(
            msg,
            "; this looks like an older llama.cpp: {LLAMACPP_BEFORE_COUNTERS}"
        );
    }
    Error::new(msg)
}

/// The error for several sets of families matching: how to pick one.
fn several_found(matching: &[Families], source: &str) -> Error {
    let engines: BTreeSet<&str> = matching.iter().map(|f| f.engine.name()).collect();
    let mut e = message![
        format!(
            "{source}: several sets of speculative-decoding counters: {}; pick one with ",
            matching
                .iter()
                .map(|f| format!("{} ({})", f.drafts(), f.engine.name()))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Setting::Prefix,
        format!(
            " PREFIX (the part before _num_drafts_total: {})",
            matching
                .iter()
                .map(|f| excerpt(&f.prefix))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    ];
    if engines.len() > 1 {
        e = e.then(" or ").then(Setting::Engine).then(" ENGINE");
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn vllms_suffixes_are_this_crates_families() {
        for (i, suffix) in [
            VLLM_DRAFTS,
            VLLM_DRAFT_TOKENS,
            VLLM_ACCEPTED,
            VLLM_PER_POS,
            SPECDEC_DRAFTED_PER_POS,
            SPECDEC_BY_LENGTH,
        ]
        .into_iter()
        .enumerate()
        {
            assert_eq!(suffix, format!("_{}", METRIC_FAMILIES[i]));
        }
    }

    #[test]
    fn every_engine_has_one_row() {
        for e in [
            Engine::Vllm,
            Engine::Llamacpp,
            Engine::Mistralrs,
            Engine::Specdec,
            Engine::Trtllm,
            Engine::Sglang,
        ] {
            assert_eq!(SCHEMAS.iter().filter(|s| s.engine == e).count(), 1);
            assert!(e.setting(0).starts_with(e.name()));
            assert!(e.setting(3).contains('3'));
        }
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
        assert!(err.to_string().contains("use `engine` vllm"), "{err}");
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
}
