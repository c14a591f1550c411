//! Trace generation in positions per second, per rule: from token ids
//! (the generator alone) and from text (tokenizing with o200k_base
//! included). The input is synthetic code-like text built here: a file of
//! pseudo-random lines and the same file with a few lines changed, the
//! shape of a code-edit request.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
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
}

criterion_group!(benches, bench);
criterion_main!(benches);
