//! What `whatif` prints: the table of every policy against the best static
//! draft length, or one JSON object; and the engine's setting for the best
//! static length.

use std::fmt::Write as _;

use serde::Serialize;
use specdec_ingest::trace::TraceMeta;
use specdec_sim::policy::{Kind, PolicySpec};
use specdec_sim::whatif::{Load, PolicyResult, WhatIf, best_static};

use crate::format::{group_digits, sanitize};

/// The name a policy has in the output: `none` for `static:0`.
pub fn policy_name(policy: PolicySpec) -> String {
    policy.label()
}

/// What kind of policy a row is, for the table's grouping and the plot.
pub fn kind(policy: PolicySpec) -> &'static str {
    policy.kind().as_str()
}

/// One row of the output.
#[derive(Serialize)]
struct Row {
    policy: String,
    kind: &'static str,
    goodput: f64,
    ratio_to_best_static: f64,
    tokens_per_step: Option<f64>,
    drafted_per_step: Option<f64>,
    /// Switches of the chosen length (controllers and batch-level peers).
    switches: f64,
    /// The controller's final length (adaptive) or lengths (per-state).
    final_draft_lens: Option<Vec<usize>>,
    /// The median draft length chosen over the request-steps.
    median_draft_len: Option<usize>,
    /// The share of the cost spent with fewer requests in flight than
    /// the batch: the replay's drain, once no request waits.
    drain_share: f64,
    /// The static row at the traces' `num_speculative_tokens`: what the
    /// engine drafts with these settings unless told otherwise.
    engine_default: bool,
}

/// The engine's own `k` for the traces' settings (their metadata's
/// `num_speculative_tokens`), when they say.
pub fn engine_default(w: &WhatIf) -> Option<usize> {
    w.traces.meta().and_then(|m| m.num_speculative_tokens)
}

fn rows(w: &WhatIf) -> Vec<Row> {
    let best = best_static(&w.results).map_or(f64::NAN, PolicyResult::goodput);
    let default = engine_default(w);
    w.results
        .iter()
        .map(|r| {
            let o = &r.summary.overall;
            Row {
                policy: policy_name(r.policy),
                kind: kind(r.policy),
                goodput: r.goodput(),
                ratio_to_best_static: r.goodput() / best,
                tokens_per_step: o.tokens_per_request_step,
                drafted_per_step: o.drafted_per_request_step,
                switches: o.switches,
                final_draft_lens: r.summary.controller.map(|c| vec![c.draft_len]).or_else(|| {
                    r.summary
                        .state_controller
                        .as_ref()
                        .map(|c| c.draft_lens.clone())
                }),
                median_draft_len: r.median_draft_len(),
                drain_share: r.drain_share(),
                engine_default: default.is_some() && r.policy.static_len() == default,
            }
        })
        .collect()
}

/// The best static length's drain share from which the table says that
/// the replay is mostly its drain.
pub const DRAIN_NOTE: f64 = 0.5;

/// The share of the best static length's cost spent in the replay's
/// drain (fewer requests in flight than the batch), when a static length
/// was replayed.
pub fn best_drain_share(w: &WhatIf) -> Option<f64> {
    best_static(&w.results).map(PolicyResult::drain_share)
}

/// The engine settings that draft `k` with the traces' rule.
#[derive(Serialize)]
pub struct Setting {
    pub engine: &'static str,
    pub setting: String,
}

/// The settings of the engines whose rule the traces follow, drafting `k`:
/// none when the rule is unknown (no metadata line), since the n-gram
/// sizes of another engine's setting would be invented.
pub fn settings(meta: Option<&TraceMeta>, k: usize) -> Vec<Setting> {
    let Some(m) = meta else {
        return Vec::new();
    };
    let (rule, min_n, max_n, cap) = (m.rule.as_str(), m.min_n, m.max_n, m.cap);
    if k == 0 {
        return vec![Setting {
            engine: "any",
            setting: "no speculative decoding (leave it off)".into(),
        }];
    }
    match rule {
        "trtllm" => vec![Setting {
            engine: "TensorRT-LLM",
            setting: format!(
                "speculative_config: {{decoding_type: NGram, max_draft_len: {k}, \
                 max_matching_ngram_size: {max_n}, is_public_pool: false}}"
            ),
        }],
        "llamacpp-simple" => vec![Setting {
            engine: "llama.cpp",
            // `m` is the rule's proposal length, not a cap on the draft:
            // below `n` the rule proposes nothing. It stays the traces'
            // and the draft length is set on its own.
            setting: format!(
                "--spec-type ngram-simple --spec-ngram-simple-size-n {max_n} \
                 --spec-ngram-simple-size-m {cap} --spec-draft-n-max {k} \
                 (builds before the --spec-* flags: --draft-max {k})"
            ),
        }],
        "hf" => vec![Setting {
            engine: "Hugging Face transformers",
            setting: format!(
                "generate(..., prompt_lookup_num_tokens={k}, max_matching_ngram_size={max_n})"
            ),
        }],
        "vllm" => vec![Setting {
            engine: "vLLM",
            setting: format!(
                "--speculative-config '{{\"method\": \"ngram\", \"num_speculative_tokens\": {k}, \
                 \"prompt_lookup_min\": {min_n}, \"prompt_lookup_max\": {max_n}}}'"
            ),
        }],
        "suffix" => match &m.suffix {
            Some(s) => vec![Setting {
                engine: "vLLM",
                setting: format!(
                    "--speculative-config '{{\"method\": \"suffix\", \"num_speculative_tokens\": {k}, \
                     \"suffix_decoding_max_tree_depth\": {}, \"suffix_decoding_max_spec_factor\": {}, \
                     \"suffix_decoding_min_token_prob\": {}, \"suffix_decoding_max_cached_requests\": {}}}'{}",
                    s.depth,
                    float(s.factor),
                    float(s.min_prob),
                    s.cache,
                    if s.offset == 0.0 {
                        String::new()
                    } else {
                        format!(
                            " (the traces' max_spec_offset {} is Arctic Inference's own; vLLM passes none)",
                            float(s.offset)
                        )
                    }
                ),
            }],
            None => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// A setting's number as JSON writes it: `1.0`, `0.1`.
fn float(x: f32) -> String {
    serde_json::to_string(&x).unwrap_or_else(|_| x.to_string())
}

/// The best static length, when static lengths were replayed.
fn best_k(w: &WhatIf) -> Option<usize> {
    best_static(&w.results).and_then(|r| r.policy.static_len())
}

/// The run of static lengths around the best whose goodput is within 1%
/// of the best's (`(lo, hi)`, the best among them): on a plateau the best
/// `k` is one point of many. A length not replayed ends the run.
fn within_one_percent(w: &WhatIf) -> Option<(usize, usize)> {
    let best = best_static(&w.results)?;
    let k = best.policy.static_len()?;
    let near = |k: usize| {
        w.results
            .iter()
            .find(|r| r.policy.static_len() == Some(k))
            .is_some_and(|r| r.goodput() >= 0.99 * best.goodput())
    };
    let lo = (0..k).rev().take_while(|&j| near(j)).last().unwrap_or(k);
    let hi = (k + 1..)
        .take_while(|&j| j <= w.settings.max_draft_len && near(j))
        .last()
        .unwrap_or(k);
    Some((lo, hi))
}

/// Per-step hindsight's goodput over the best static's, less one. Myopic
/// (one step at a time, blind to the cost the batch shares), it may fall
/// below the best static length: a ratio, then, not a headroom.
fn hindsight_gain(w: &WhatIf) -> Option<f64> {
    let best = best_static(&w.results)?.goodput();
    let oracle = w.results.iter().find(|r| r.policy.kind() == Kind::Oracle)?;
    Some(oracle.goodput() / best - 1.0)
}

/// [`hindsight_gain`] where it is a headroom (not negative).
fn oracle_headroom(w: &WhatIf) -> Option<f64> {
    hindsight_gain(w).filter(|h| *h >= 0.0)
}

/// The step cost in words: `1 + 0.1 d`, or the table's ends.
pub(crate) fn cost_text(w: &WhatIf) -> String {
    let s = &w.settings;
    let c0 = s.cost.cost(0).unwrap_or(f64::NAN);
    let cmax = s.cost.cost(s.max_draft_len).unwrap_or(f64::NAN);
    let per = (cmax - c0) / s.max_draft_len as f64;
    let linear = (0..=s.max_draft_len)
        .all(|k| (s.cost.cost(k).unwrap_or(f64::NAN) - (c0 + per * k as f64)).abs() < 1e-9);
    if linear {
        format!("{c0} + {} d", (per * 1e9).round() / 1e9)
    } else {
        format!(
            "a table from {c0} (d = 0) to {cmax} (d = {})",
            s.max_draft_len
        )
    }
}

/// The header: what was replayed, under which settings.
fn header(w: &WhatIf) -> String {
    let t = &w.traces;
    let trace = match t.meta() {
        Some(m) => format!(
            "tokenizer {}, rule {}, n {}..={}, cap {}{}",
            sanitize(&m.tokenizer),
            sanitize(&m.rule),
            m.min_n,
            m.max_n,
            m.cap,
            if m.greedy {
                ""
            } else {
                ", from sampled outputs: estimates only"
            }
        ),
        None => format!("no metadata line, cap {}", t.cap()),
    };
    format!(
        "what-if on {}: {} requests, {} output positions ({trace})\n\
         K = {}, {} requests in flight ({}), step cost {} (d: mean tokens drafted per request), \
         controllers updated every {} engine steps, deciding on at least {} request-steps",
        w.source,
        group_digits(t.requests().len() as u64),
        group_digits(t.positions()),
        w.settings.max_draft_len,
        w.settings.batch,
        load_text(w.settings.load),
        cost_text(w),
        w.settings.interval,
        update_observations(w),
    )
}

/// How the replay fed its batch, in the header's words.
pub(crate) fn load_text(load: Load) -> &'static str {
    match load {
        Load::Once => "each request once, draining at the end",
        Load::Saturated => "saturated: the first requests again until each has finished once",
    }
}

/// The fewest request-steps the controllers decided from.
fn update_observations(w: &WhatIf) -> u64 {
    w.settings
        .update_observations
        .unwrap_or(specdec_metrics::DEFAULT_UPDATE_OBSERVATIONS)
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.digits$}"))
}

/// The table for people.
pub fn table(w: &WhatIf) -> String {
    let mut out = header(w);
    out.push_str("\n\n");
    let rows = rows(w);
    let width = rows
        .iter()
        .map(|r| r.policy.len())
        .max()
        .unwrap_or(6)
        .max(6);
    let _ = writeln!(
        out,
        "{:<width$}  {:>9}  {:>9}  {:>11}  {:>12}  {:>8}",
        "policy", "goodput", "x best", "tokens/step", "drafted/step", "switches"
    );
    for r in &rows {
        let _ = writeln!(
            out,
            "{:<width$}  {:>9.3}  {:>9.4}  {:>11}  {:>12}  {:>8}{}",
            r.policy,
            r.goodput,
            r.ratio_to_best_static,
            opt(r.tokens_per_step, 3),
            opt(r.drafted_per_step, 3),
            if r.kind == "static" || r.kind == "none" || r.kind == "oracle" {
                "-".to_string()
            } else {
                format!("{}", r.switches)
            },
            // What a controller used, not the choice it made as the last
            // requests drained.
            match (r.kind == "controller", r.median_draft_len) {
                (true, Some(m)) => format!("   (median k = {m} over request-steps)"),
                _ if r.engine_default => {
                    "   <- the engine's default (the traces' num_speculative_tokens)".into()
                }
                _ => String::new(),
            }
        );
    }
    if let Some(d) = engine_default(w).filter(|&d| d > w.settings.max_draft_len) {
        let _ = writeln!(
            out,
            "(the engine's default, k = {d} (the traces' num_speculative_tokens), is above K: not replayed)"
        );
    }
    let Some(k) = best_k(w) else {
        out.push_str(
            "\nno static draft length among the policies replayed: no ratio to the best\n",
        );
        return out;
    };
    let range = within_one_percent(w);
    let _ = writeln!(
        out,
        "\nbest static draft length: {}{}; {} \
         (tokens per step are per request and step; x best: goodput over the best static's)",
        if k == 0 {
            "none (do not speculate)".into()
        } else {
            format!("k = {k}")
        },
        match range {
            Some((lo, hi)) if hi > lo => format!(" (every k in {lo}..={hi} within 1% of it)"),
            _ => String::new(),
        },
        match hindsight_gain(w) {
            None => "per-step hindsight (oracle) not replayed".to_string(),
            Some(h) if h >= 0.0 => {
                format!("per-step hindsight (oracle) is {:+.1}% above it", h * 100.0)
            }
            // A myopic choice, not an optimum: no headroom to print.
            Some(h) => format!(
                "per-step hindsight (oracle) falls short of it (x best {:.4}: it chooses \
                 one step at a time, blind to the cost the batch shares)",
                h + 1.0
            ),
        },
    );
    if let Some(share) = best_drain_share(w).filter(|&s| s >= DRAIN_NOTE) {
        let _ = writeln!(
            out,
            "note: {:.0}% of the best static length's cost is spent with fewer than {} \
             requests in flight, after the last one was admitted: at this batch the \
             figures measure how the replay's last requests finish more than how a full \
             batch serves (--load saturated keeps it full)",
            share * 100.0,
            w.settings.batch
        );
    }
    let found = settings(w.traces.meta(), k);
    if found.is_empty() {
        out.push_str(
            "no setting: no metadata line, so the rule the traces were made with is unknown\n",
        );
    }
    for s in &found {
        let _ = writeln!(out, "setting ({}): {}", s.engine, s.setting);
    }
    if let Some((lo, hi)) = range.filter(|(lo, hi)| hi > lo && !found.is_empty()) {
        let _ = writeln!(
            out,
            "(the setting's k = {k} is one point of {lo}..={hi}: any of them earns within 1%)"
        );
    }
    out
}

#[derive(Serialize)]
struct Json<'a> {
    source: &'a str,
    requests: usize,
    positions: u64,
    trace: Option<&'a TraceMeta>,
    max_draft_len: usize,
    batch: usize,
    load: &'static str,
    interval_steps: u64,
    update_observations: u64,
    cost: Vec<f64>,
    cost_rule: &'static str,
    best_static_draft_len: Option<usize>,
    /// The static lengths around the best within 1% of its goodput.
    best_static_within_1pct: Option<(usize, usize)>,
    oracle_headroom: Option<f64>,
    /// The traces' `num_speculative_tokens`: the engine's default length.
    engine_default_draft_len: Option<usize>,
    policies: Vec<Row>,
    settings: Vec<Setting>,
}

/// The object of `--format json`.
pub fn json(w: &WhatIf) -> impl Serialize + '_ {
    let k = best_k(w);
    Json {
        source: &w.source,
        requests: w.traces.requests().len(),
        positions: w.traces.positions(),
        trace: w.traces.meta(),
        max_draft_len: w.settings.max_draft_len,
        batch: w.settings.batch,
        load: w.settings.load.as_str(),
        interval_steps: w.settings.interval,
        update_observations: update_observations(w),
        cost: (0..=w.settings.max_draft_len)
            .filter_map(|k| w.settings.cost.cost(k))
            .collect(),
        cost_rule: "drafted",
        best_static_draft_len: k,
        best_static_within_1pct: within_one_percent(w),
        oracle_headroom: oracle_headroom(w),
        engine_default_draft_len: engine_default(w),
        policies: rows(w),
        settings: k.map_or_else(Vec::new, |k| settings(w.traces.meta(), k)),
    }
}
