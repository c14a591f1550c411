//! `advise batch --format table`: the batch-size table for a person to
//! read.
//!
//! A header (`K`, the prior, the credible level); one row per bucket with
//! its recommended draft length and the estimates behind it, and its
//! report; a legend; both engines' keys (or why TensorRT-LLM cannot hold
//! the table); what each engine does above the last bucket.

use std::fmt::Write as _;

use specdec_metrics::{Advisor, BatchTable, BatchTableError, TrtllmSchedule};

use super::table::{Column, Table};
use super::{JsonError, json_line};
use crate::format::{group_digits, level_percent, significant, trimmed};

/// The table for people, ending in a newline; `reports` names each
/// bucket's report, escaped.
pub fn render(
    table: &BatchTable,
    reports: &[String],
    trtllm: &Result<TrtllmSchedule, BatchTableError>,
    advisor: &Advisor,
) -> Result<String, JsonError> {
    let mut out = String::new();
    let prior = advisor.prior();
    let _ = writeln!(
        out,
        "Draft length by batch size (K = num_spec_tokens = {}; prior Beta({}, {}); {} credible intervals)",
        table.max_draft_len(),
        prior.alpha,
        prior.beta,
        level_percent(advisor.credible_level())
    );
    out.push('\n');
    let mut rows = Table::new(vec![
        Column::right("batch sizes"),
        Column::right("verify steps"),
        Column::right("k"),
        Column::right("E[accepted]"),
        Column::right("tokens/step"),
        Column::right("cost(k)"),
        Column::right("speedup"),
        Column::left("report"),
    ]);
    for (e, report) in table.entries().iter().zip(reports) {
        let rec = &e.recommendation;
        let chosen = &rec.candidates[rec.draft_len];
        rows.row(vec![
            format!("{}-{}", e.start_bs, e.end_bs),
            group_digits(rec.num_spec_steps),
            rec.draft_len.to_string(),
            format!("{:.3}", chosen.expected_accepted),
            format!("{:.3}", chosen.tokens_per_step),
            trimmed(significant(chosen.cost, 6)),
            format!("{:.3}x", rec.expected_speedup),
            report.clone(),
        ]);
    }
    rows.render(&mut out);
    out.push_str(
        "k: the recommended draft length of the bucket (0: do not speculate); speedup: expected goodput over not speculating.\n",
    );
    out.push('\n');
    let _ = writeln!(
        out,
        "vLLM speculative_config: {}",
        json_line(&table.vllm_config(), "advice")?.trim_end()
    );
    match trtllm {
        Ok(t) => {
            let _ = writeln!(
                out,
                "TensorRT-LLM speculative config: {}",
                json_line(t, "advice")?.trim_end()
            );
        }
        Err(e) => {
            let _ = writeln!(out, "TensorRT-LLM: no draft_len_schedule: {e}");
        }
    }
    // `recommend` refuses an empty table.
    if let Some(last) = table.entries().last() {
        let _ = writeln!(
            out,
            "Above batch size {}, vLLM keeps draft length {} and TensorRT-LLM drafts none: end the last bucket at the engine's largest batch size.",
            last.end_bs,
            last.draft_len()
        );
    }
    Ok(out)
}
