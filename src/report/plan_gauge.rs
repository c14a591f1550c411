//! What an exporter's plan gauge reads. The report layer comes before the
//! draft layer (record → report → draft): it names no type of the draft
//! layer, whose [`SharedPlan`](crate::SharedPlan) implements this trait.

/// The draft length an engine drafts now, read by an exporter's plan gauge
/// (`<prefix>_controller_draft_length`) at each scrape or collection.
/// [`SharedPlan`](crate::SharedPlan) implements it with one relaxed load;
/// an engine with a controller of its own can implement it too.
///
/// ```
/// use specdec_metrics::{DraftLenGauge, DraftPlan, SharedPlan};
/// let plan = SharedPlan::new(DraftPlan::new(3, 8).expect("3 <= 8"));
/// assert_eq!(DraftLenGauge::draft_len(&plan), 3);
/// ```
pub trait DraftLenGauge: Send + Sync + core::fmt::Debug {
    /// The current draft length.
    fn draft_len(&self) -> usize;
}
