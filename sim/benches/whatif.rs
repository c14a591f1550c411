//! The what-if's replay rate: request-steps per second of one policy's
//! replay of a trace (one engine thread, 32 requests in flight, the
//! controllers updated every 16 steps), per policy, side by side in one
//! group. The trace is written here: requests that copy runs of a few
//! tens of tokens and then find no match, as code edits do.
//!
//! ```text
//! cargo bench -p specdec-sim --bench whatif
//! ```

use std::sync::Arc;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use specdec_metrics::StepCost;
use specdec_sim::policy::PolicySpec;
use specdec_sim::trace_set::TraceSet;
use specdec_sim::whatif::{self, Settings};

fn traces() -> Arc<TraceSet> {
    let mut text = String::new();
    for i in 0..200usize {
        let m = 200 + (i * 37) % 300;
        let (mut proposal, mut matched) = (Vec::new(), Vec::new());
        for t in 1..m {
            let copying = (t / 40 + i) % 3 != 0;
            proposal.push(if copying || t % 5 == 0 { 64u8 } else { 0 });
            matched.push(if copying {
                ((40 - t % 40).min(m - t)) as u8
            } else {
                0
            });
        }
        text += &serde_json::json!({
            "id": i, "output_tokens": m, "proposal": proposal, "match": matched,
        })
        .to_string();
        text.push('\n');
    }
    Arc::new(TraceSet::read(text.as_bytes(), "bench").expect("a valid trace"))
}

fn replay(c: &mut Criterion) {
    let settings = Settings {
        update_observations: None,
        traces: traces(),
        max_draft_len: 64,
        cost: StepCost::linear(1.0, 0.1).expect("a valid cost"),
        batch: whatif::DEFAULT_BATCH,
        interval: whatif::DEFAULT_INTERVAL,
        seed: 1,
        state_space: None,
        run_signal: None,
        load: Default::default(),
    };
    let mut group = c.benchmark_group("whatif_replay");
    group.sample_size(10);
    for policy in [
        PolicySpec::fixed(8),
        PolicySpec::adaptive(),
        PolicySpec::per_state(),
        PolicySpec::named("sglang").unwrap(),
        PolicySpec::named("vllm-44336").unwrap(),
        PolicySpec::named("smartspec").unwrap(),
        PolicySpec::named("vllm-av").unwrap(),
        PolicySpec::oracle(),
    ] {
        // Request-steps of one replay: its verify steps, drafted or not.
        let once = settings.replay(policy).expect("the policy replays");
        let steps = once.report.num_spec_steps() + once.report.num_undrafted_steps();
        group.throughput(Throughput::Elements(steps));
        group.bench_function(BenchmarkId::from_parameter(policy), |b| {
            b.iter(|| settings.replay(policy).expect("the policy replays"))
        });
    }
    group.finish();
}

criterion_group!(benches, replay);
criterion_main!(benches);
