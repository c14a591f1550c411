//! The names every exporter gives the families: the metric name prefixes,
//! the families and their help texts and the labels they set (the checks
//! on a prefix and on constant labels are the exporters' options, in
//! `options.rs`). Plain strings, available without any cargo feature (a
//! program that reads another engine's exposition can match them).

/// The default name prefix: samples are named `spec_decode_num_drafts_total`
/// and so on.
pub const DEFAULT_METRIC_PREFIX: &str = "spec_decode";

/// The prefix that gives the exact names vLLM exposes and its dashboards
/// query (`vllm:spec_decode_num_drafts_total`, ...).
pub const VLLM_METRIC_PREFIX: &str = "vllm:spec_decode";

/// The sample names of the nine counter families, without the
/// prefix: the exposed names are `<prefix>_<family>`, in this order.
///
/// ```
/// use specdec_metrics::METRIC_FAMILIES;
/// assert_eq!(METRIC_FAMILIES[0], "num_drafts_total");
/// assert_eq!(METRIC_FAMILIES[8], "scheduled_steps_total");
/// assert!(METRIC_FAMILIES.iter().all(|f| f.ends_with("_total")));
/// ```
pub const METRIC_FAMILIES: [&str; 9] = [
    "num_drafts_total",
    "num_draft_tokens_total",
    "num_accepted_tokens_total",
    "num_accepted_tokens_per_pos_total",
    "num_draft_tokens_per_pos_total",
    "acceptance_by_draft_length_total",
    "num_undrafted_steps_total",
    "num_rejected_observations_total",
    "scheduled_steps_total",
];

/// The sample names, without the prefix, of the two counter families of
/// the proposal histogram of a lookup drafter, exported after the nine of
/// [`METRIC_FAMILIES`] and only for a recorder built with
/// [`record_proposals`](crate::RecorderBuilder::record_proposals) (or a
/// histogram that has the proposal part):
///
/// - `<prefix>_acceptance_by_proposal_length_total{proposal_length="L",
///   matched="m"}`: resolved proposal outcomes, every bucket of the
///   proposal triangle (`L = 1..=K`, `m = 0..=L`: `K (K + 3) / 2` series);
/// - `<prefix>_num_aborted_proposals_total`: outcomes left pending by
///   aborted requests.
///
/// ```
/// use specdec_metrics::PROPOSAL_FAMILIES;
/// assert_eq!(PROPOSAL_FAMILIES[0], "acceptance_by_proposal_length_total");
/// assert_eq!(PROPOSAL_FAMILIES[1], "num_aborted_proposals_total");
/// ```
pub const PROPOSAL_FAMILIES: [&str; 2] = [
    "acceptance_by_proposal_length_total",
    "num_aborted_proposals_total",
];

/// The labels the proposal families set themselves: `proposal_length` is
/// `L`, `matched` is `m`. Constant labels may not reuse them.
///
/// ```
/// use specdec_metrics::PROPOSAL_FAMILY_LABELS;
/// assert_eq!(PROPOSAL_FAMILY_LABELS, ["proposal_length", "matched"]);
/// ```
pub const PROPOSAL_FAMILY_LABELS: [&str; 2] = ["proposal_length", "matched"];

/// The sample name, without the prefix, of the gauge of the controller's
/// draft length (exported by `SpecDecodeCollector::with_plan`, cargo
/// feature `prometheus`).
///
/// ```
/// use specdec_metrics::PLAN_GAUGE;
/// assert_eq!(PLAN_GAUGE, "controller_draft_length");
/// ```
pub const PLAN_GAUGE: &str = "controller_draft_length";

/// The labels the families set themselves; constant labels may not reuse
/// them. `position` counts draft positions from 0 (`position="0"` is the
/// first draft token); `draft_length` is `k`, `accepted` is `a`, and
/// `num_spec_tokens` is a scheduled step's draft budget (vLLM's label name,
/// though vLLM's configuration calls `K` itself `num_spec_tokens`).
pub const FAMILY_LABELS: [&str; 4] = ["position", "draft_length", "accepted", "num_spec_tokens"];

// The help texts and family indices serve the exporters alone.
with_an_exporter! {
    /// `# HELP` text of the gauge.
    pub(crate) const PLAN_GAUGE_HELP: &str = "The draft length the drafting controller chose for ordinary engine steps, read from its published plan at scrape time.";

    /// Every counter family an exporter may write: [`METRIC_FAMILIES`],
    /// then [`PROPOSAL_FAMILIES`]; family indices index this.
    pub(crate) const FAMILIES: [&str; 11] = [
        METRIC_FAMILIES[0],
        METRIC_FAMILIES[1],
        METRIC_FAMILIES[2],
        METRIC_FAMILIES[3],
        METRIC_FAMILIES[4],
        METRIC_FAMILIES[5],
        METRIC_FAMILIES[6],
        METRIC_FAMILIES[7],
        METRIC_FAMILIES[8],
        PROPOSAL_FAMILIES[0],
        PROPOSAL_FAMILIES[1],
    ];

    /// `# HELP` text of each family, in [`FAMILIES`] order.
    pub(crate) const HELP: [&str; 11] = [
        "Speculative decoding verify steps (drafts), over all draft lengths including 0.",
        "Draft tokens sent to verification, after structured-output adjustment.",
        "Draft tokens accepted by the verifier (bonus token excluded).",
        "Verify steps whose draft token at this position was accepted.",
        "Verify steps whose draft reached this position.",
        "Verify steps by draft length and accepted draft tokens; every bucket with accepted <= draft_length is present.",
        "Decode steps where the drafting policy proposed no draft (not counted as drafts).",
        "Observations rejected as invalid (accepted > drafted, drafted > num_spec_tokens, or a scheduled budget > num_spec_tokens); nonzero means an engine bug.",
        "Scheduler steps by the draft budget the schedule gave them (num_spec_tokens = 0: chose not to speculate); every budget 0..=K is present.",
        "Resolved lookup-drafter proposals by proposal length and matched tokens (the common prefix of the whole proposal and the output that followed); every bucket with matched <= proposal_length is present.",
        "Lookup-drafter proposals left unresolved because their request was aborted (never counted as matches).",
    ];

    pub(crate) const NUM_DRAFTS: usize = 0;
    pub(crate) const NUM_DRAFT_TOKENS: usize = 1;
    pub(crate) const NUM_ACCEPTED_TOKENS: usize = 2;
    pub(crate) const ACCEPTED_PER_POS: usize = 3;
    pub(crate) const DRAFT_TOKENS_PER_POS: usize = 4;
    pub(crate) const BY_DRAFT_LENGTH: usize = 5;
    pub(crate) const UNDRAFTED_STEPS: usize = 6;
    pub(crate) const REJECTED_OBSERVATIONS: usize = 7;
    pub(crate) const SCHEDULED_STEPS: usize = 8;
    pub(crate) const BY_PROPOSAL_LENGTH: usize = 9;
    pub(crate) const ABORTED_PROPOSALS: usize = 10;
}
