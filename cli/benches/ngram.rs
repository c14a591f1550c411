//! Trace generation in positions per second, per rule: from token ids
//! (the generator alone) and from text (tokenizing with o200k_base
//! included); and suffix decoding beside vLLM's n-gram rule from token ids
//! (`suffix_vs_vllm`: the per-request tree alone, and with the global tree
//! holding the earlier requests' outputs). The input is synthetic code-like text built here: a file of
//! pseudo-random lines and the same file with a few lines changed, the
//! shape of a code-edit request.
//!
//! `agent_traffic`: agent-style calls (every call resends the conversation
//! so far: a long system prompt, then user turns, tool calls and tool
//! results, built here), tokenizing included, as `ngram` does them given
//! each call's rendered prompt whole and given its messages (a
//! conversation's state keeps the messages a call shares with the last
//! one, their tokens and n-grams; the others are tokenized once through a
//! cache).
//! With `SPECDEC_AGENT_REQUESTS=FILE` it measures the messages requests of
//! that file instead (for one, `scripts/corpus_tool.py agent` of tau-bench
//! trajectories; docs/cli.md gives the numbers).

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use specdec_ingest::trace::{ChatMessage, Prompt, RequestReader};
use specdec_metrics_cli::ngram::chat::ChatState;
use specdec_metrics_cli::ngram::suffix::{GlobalCache, SuffixConfig, local_pass};
use specdec_metrics_cli::ngram::tokenize::{EOS, TokenCache, Tokenizer};
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
    agent_traffic(c, &tokenizer);
}

/// `words` pseudo-random words of [`WORDS`], a line break every 12.
fn words(rng: &mut Xoshiro256PlusPlus, words: usize) -> String {
    let mut text = String::new();
    for i in 0..words {
        text.push_str(WORDS[rng.next_u32() as usize % WORDS.len()]);
        text.push(if i % 12 == 11 { '\n' } else { ' ' });
    }
    text
}

/// The calls of `conversations` agent conversations of `turns` rounds
/// each: a system prompt shared by all, then per round a user's turn, the
/// assistant's tool call and the tool's result; each call is the messages
/// before an assistant's turn and that turn as the output.
fn agent_calls(conversations: usize, turns: usize) -> Vec<(Vec<ChatMessage>, String)> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
    let turn = |role: &str, content: String| ChatMessage {
        role: role.into(),
        content,
    };
    let system = turn("system", words(&mut rng, 2000));
    let mut calls = Vec::new();
    for c in 0..conversations {
        let mut messages = vec![system.clone()];
        for t in 0..turns {
            messages.push(turn("user", words(&mut rng, 30)));
            let call = format!(
                "<tool_call>\n{{\"name\": \"get_{}\", \"arguments\": {{\"id\": \"R{c}{t}\"}}}}\n</tool_call>",
                WORDS[rng.next_u32() as usize % WORDS.len()]
            );
            calls.push((messages.clone(), call.clone()));
            messages.push(turn("assistant", call));
            messages.push(turn("tool name=get", words(&mut rng, 150)));
        }
    }
    calls
}

/// Agent traffic with tokenizing included: each call's prompt rendered and
/// tokenized whole, then generated anew, beside the same calls as
/// messages through one conversation state (`ChatState`; a fresh token
/// cache and state per pass, so every message is tokenized once in it).
fn agent_traffic(c: &mut Criterion, tokenizer: &Tokenizer) {
    let calls: Vec<(Prompt, String)> = match std::env::var_os("SPECDEC_AGENT_REQUESTS") {
        Some(path) => {
            let file = std::fs::File::open(&path).expect("SPECDEC_AGENT_REQUESTS");
            RequestReader::new(std::io::BufReader::new(file))
                .map(|r| r.expect("a request"))
                .map(|r| (r.prompt, r.output))
                .collect()
        }
        None => agent_calls(4, 12)
            .into_iter()
            .map(|(m, o)| (Prompt::Messages(m), o))
            .collect(),
    };
    let prompts: Vec<(String, &str)> = calls
        .iter()
        .map(|(m, o)| (m.render(), o.as_str()))
        .collect();
    let chats: Vec<(&[ChatMessage], &str)> = calls
        .iter()
        .map(|(m, o)| match m {
            Prompt::Messages(turns) => (turns.as_slice(), o.as_str()),
            Prompt::Text(_) => panic!("SPECDEC_AGENT_REQUESTS: a request without messages"),
        })
        .collect();
    let config = Config {
        rule: Rule::Vllm,
        min_n: 5,
        max_n: 5,
        cap: 64,
    };
    let positions: u64 = prompts
        .iter()
        .map(|(_, o)| tokenizer.encode(o).unwrap().len() as u64)
        .sum();
    let prompt_tokens_total: usize = prompts
        .iter()
        .map(|(p, _)| tokenizer.encode(p).unwrap().len())
        .sum();
    eprintln!(
        "agent_traffic: {} calls, {prompt_tokens_total} prompt tokens, {positions} output positions",
        calls.len()
    );
    let mut group = c.benchmark_group("agent_traffic");
    group.throughput(Throughput::Elements(positions));
    group.sample_size(10);
    group.bench_function("whole_prompts", |b| {
        b.iter(|| {
            for (prompt, output) in &prompts {
                let mut ctx = tokenizer.encode(std::hint::black_box(prompt)).unwrap();
                let p = ctx.len();
                ctx.extend(tokenizer.encode(output).unwrap());
                ctx.push(EOS);
                std::hint::black_box(generate(&config, &ctx, ctx.len() - p));
            }
        })
    });
    group.bench_function("messages", |b| {
        b.iter(|| {
            let cache = TokenCache::new(256 << 20);
            let mut state = ChatState::new(config);
            for (turns, output) in &chats {
                let turns = std::hint::black_box(*turns);
                let traced = state.generate(turns, output, true, &cache, tokenizer);
                std::hint::black_box(traced.unwrap());
            }
        })
    });
    group.finish();
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
