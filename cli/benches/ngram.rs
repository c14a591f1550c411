//! Trace generation in positions per second, per rule: from token ids
//! (the generator alone) and from text (tokenizing with o200k_base
//! included); and suffix decoding beside vLLM's n-gram rule from token ids
//! (`suffix_vs_vllm`: the per-request tree alone, and with the global tree
//! holding the earlier requests' outputs). The input is synthetic code-like text built here: a file of
//! pseudo-random lines and the same file with a few lines changed, the
//! shape of a code-edit request.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use specdec_metrics_cli::ngram::suffix::{GlobalCache, SuffixConfig, local_pass};
use specdec_metrics_cli::ngram::tokenize::{EOS, Tokenizer};
use specdec_metrics_cli::ngram::{Config, Rule, generate};

const WORDS: &[&str] = &[
    "let", "mut", "fn", "self", "return", "match", "Some", "None", "if", "else", "for", "in",
    "value", "count", "index", "buffer", "len", "push", "map", "error", "Ok", "Err", "=", "+=",
    "(", ")", "{", "}", ";", ".", "&", "0", "1", "true", "false",
];

/// A before-file of `lines` lines and the after-file with every 20th line
/// replaced.
fn edit(lines: usize, seed: u64) -> (String, String) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let line = |rng: &mut Xoshiro256PlusPlus| {
        let n = 3 + rng.next_u32() as usize % 8;
        let words: Vec<&str> = (0..n)
            .map(|_| WORDS[rng.next_u32() as usize % WORDS.len()])
            .collect();
        format!("    {}\n", words.join(" "))
    };
    let before: Vec<String> = (0..lines).map(|_| line(&mut rng)).collect();
    let after: Vec<String> = before
        .iter()
        .enumerate()
        .map(|(i, l)| {
            if i % 20 == 7 {
                line(&mut rng)
            } else {
                l.clone()
            }
        })
        .collect();
    (before.concat(), after.concat())
}

fn bench(c: &mut Criterion) {
    let tokenizer = Tokenizer::load("o200k_base").expect("built in");
    let (before, after) = edit(400, 7);
    let prompt = format!("Fix the thing\n\n{before}");
    let mut context = tokenizer.encode(&prompt).unwrap();
    let prompt_len = context.len();
    context.extend(tokenizer.encode(&after).unwrap());
    context.push(EOS);
    let output_len = context.len() - prompt_len;
    let positions = (output_len - 1) as u64;

    let rules = [
        (Rule::Vllm, 2, 5),
        (Rule::Vllm, 5, 5),
        (Rule::Trtllm, 1, 3),
        (Rule::LlamacppSimple, 12, 12),
        (Rule::Hf, 1, 2),
    ];
    let mut ids = c.benchmark_group("ngram_from_token_ids");
    ids.throughput(Throughput::Elements(positions));
    for (rule, min_n, max_n) in rules {
        let config = Config {
            rule,
            min_n,
            max_n,
            cap: 64,
        };
        ids.bench_with_input(
            BenchmarkId::new(rule.name(), format!("{min_n}-{max_n}")),
            &config,
            |b, config| b.iter(|| generate(config, std::hint::black_box(&context), output_len)),
        );
    }
    ids.finish();

    let mut text = c.benchmark_group("ngram_from_text");
    text.throughput(Throughput::Elements(positions));
    for (rule, min_n, max_n) in rules {
        let config = Config {
            rule,
            min_n,
            max_n,
            cap: 64,
        };
        text.bench_with_input(
            BenchmarkId::new(rule.name(), format!("{min_n}-{max_n}")),
            &config,
            |b, config| {
                b.iter(|| {
                    let mut ctx = tokenizer.encode(std::hint::black_box(&prompt)).unwrap();
                    let p = ctx.len();
                    ctx.extend(tokenizer.encode(std::hint::black_box(&after)).unwrap());
                    ctx.push(EOS);
                    let out = ctx.len() - p;
                    generate(config, &ctx, out)
                })
            },
        );
    }
    text.finish();
    suffix_vs_vllm(c, &context, prompt_len);
}

/// Suffix decoding at vLLM's defaults beside vLLM's n-gram rule (2..=5,
/// cap 24), on one edit's token ids. The global tree is measured on the
/// eighth request of a stream of edits (seven other outputs cached, as in
/// a steady run); tokenizing is excluded.
fn suffix_vs_vllm(c: &mut Criterion, context: &[u32], prompt_len: usize) {
    let (prompt, output) = context.split_at(prompt_len);
    let positions = (output.len() - 1) as u64;
    let config = SuffixConfig::VLLM;
    let mut group = c.benchmark_group("suffix_vs_vllm");
    group.throughput(Throughput::Elements(positions));
    let vllm = Config {
        rule: Rule::Vllm,
        min_n: 2,
        max_n: 5,
        cap: 24,
    };
    group.bench_function("vllm/2-5", |b| {
        b.iter(|| generate(&vllm, std::hint::black_box(context), output.len()))
    });
    group.bench_function("suffix/per-request", |b| {
        b.iter(|| local_pass(&config, std::hint::black_box(prompt), output))
    });
    // Seven other edits' outputs in the global tree, then this one.
    let others: Vec<(Vec<u32>, Vec<u32>)> = (1..8u64)
        .map(|seed| {
            let (before, after) = edit(400, seed);
            let t = Tokenizer::load("o200k_base").expect("built in");
            let mut out = t.encode(&after).unwrap();
            out.push(EOS);
            (t.encode(&before).unwrap(), out)
        })
        .collect();
    let mut warm = GlobalCache::new(config);
    for (i, (p, o)) in others.iter().enumerate() {
        let local = local_pass(&config, p, o);
        warm.request(&format!("w{i}"), p, p.len(), o, &local);
    }
    eprintln!(
        "suffix_vs_vllm: the global tree holds {} responses ({} tokens) in {} bytes: {:.0} bytes per token",
        warm.cached(),
        warm.tree().tokens(),
        warm.tree().bytes(),
        warm.tree().bytes() as f64 / warm.tree().tokens() as f64
    );
    let local = local_pass(&config, prompt, output);
    group.bench_function("suffix/per-request+global", |b| {
        b.iter_batched(
            || warm.clone(),
            |mut cache| {
                let local = local_pass(&config, std::hint::black_box(prompt), output);
                cache.request("this", prompt, prompt.len(), output, &local)
            },
            criterion::BatchSize::LargeInput,
        )
    });
    group.bench_function("suffix/global", |b| {
        b.iter_batched(
            || warm.clone(),
            |mut cache| cache.request("this", prompt, prompt.len(), output, &local),
            criterion::BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
