//! Which of vLLM's writers printed a record: [`Format`], each as the
//! notes and messages name it.

use serde::Serialize;

/// Which of vLLM's writers printed a record (module docs: each writer,
/// where it was read, and what it identifies).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// `SpecDecoding metrics: Mean acceptance length: ...` (today's).
    V1Current,
    /// `SpecDecoding metrics: Draft acceptance rate: ..., Mean acceptance
    /// length: ..., [throughputs, ]Accepted: ..., Per-position ...`.
    V1RateFirst,
    /// `SpecDecoding metrics: Draft acceptance rate: ..., Accepted: ...,
    /// Drafted: ...` (totals only).
    V1Totals,
    /// `Speculative metrics: Draft acceptance rate: ..., Number of accepted
    /// tokens: ..., Number of draft tokens: ..., ` (V1's first; totals).
    V1EarlySpeculative,
    /// `Speculative metrics: ..., System efficiency: ...` (V0; cumulative).
    V0Speculative,
    /// `num_drafts: ...` (vLLM's offline example).
    OfflineExample,
    /// `mean acceptance length: ...` without `num_drafts` (vllm-ascend's
    /// k tuner).
    OfflineNoDrafts,
    /// `Number of drafts: ...` (an offline stats block).
    OfflineStatsBlock,
    /// `---Speculative Decoding---` (`vllm bench serve`).
    BenchServe,
}

impl Format {
    /// The writer, as the notes and messages name it.
    ///
    /// ```
    /// use specdec_ingest::source::vllm_log::Format;
    ///
    /// assert!(Format::V0Speculative.describe().starts_with("vLLM V0's"));
    /// ```
    pub fn describe(self) -> &'static str {
        match self {
            Format::V1Current => {
                "vLLM's current SpecDecoding metrics line (Mean acceptance length first, with the throughputs of PR #24127, September 2025; vllm/v1/spec_decode/metrics.py; vllm-ascend prints vLLM's)"
            }
            Format::V1RateFirst => {
                "vLLM's rate-first SpecDecoding metrics line (Draft acceptance rate first; vllm/v1/spec_decode/metrics.py from PR #16665, April 2025, until the current order of late 2025)"
            }
            Format::V1Totals => {
                "vLLM V1's totals line (SpecDecoding metrics: Draft acceptance rate, Accepted, Drafted; vllm/v1/spec_decode/metrics.py from PR #15902 to PR #16665, April 2025)"
            }
            Format::V1EarlySpeculative => {
                "vLLM V1's first line (Speculative metrics: Draft acceptance rate, Number of accepted tokens, Number of draft tokens; before PR #15902, April 2025)"
            }
            Format::V0Speculative => {
                "vLLM V0's Speculative metrics line (vllm/engine/metrics.py; totals since start-up)"
            }
            Format::OfflineExample => {
                "vLLM's offline example summary (examples/offline_inference/spec_decode.py: num_drafts, num_draft_tokens, num_accepted_tokens, acceptance at token i)"
            }
            Format::OfflineNoDrafts => {
                "vllm-ascend's k tuner summary (examples/offline_DSD_k_tuner/generate_config.py: mean acceptance length, acceptance at token i, no counts)"
            }
            Format::OfflineStatsBlock => {
                "an offline Speculative Decoding Stats block (Number of drafts, Draft tokens generated, Accepted tokens, Mean acceptance length)"
            }
            Format::BenchServe => {
                "vllm bench serve's Speculative Decoding section (vllm/benchmarks/serve.py)"
            }
        }
    }

    /// Formats that may share a file: the two interval lines with rates.
    pub(crate) fn family(self) -> Format {
        match self {
            Format::V1RateFirst => Format::V1Current,
            f => f,
        }
    }
}
