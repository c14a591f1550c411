//! The generator against plain rescans transcribed from each engine's
//! source (cited in the module docs), on random token sequences over small
//! alphabets, where matches of every length are frequent.

use std::collections::HashMap;

use proptest::prelude::*;

use super::{Config, Positions, Reusable, Rule, generate};

/// vLLM's `_find_longest_matched_ngram_and_propose_tokens`, step by step:
/// KMP over the reversed tokens, `lps` kept for the first `max_ngram`
/// prefixes, the position moved on whenever `prev_lps >= longest_ngram`.
/// `(n, start)` of the proposal `tokens[start..]`, or none.
fn vllm(tokens: &[u32], min_ngram: usize, max_ngram: usize) -> Option<(usize, usize)> {
    let total = tokens.len();
    if total < min_ngram {
        return None;
    }
    let rev: Vec<u32> = tokens.iter().rev().copied().collect();
    let mut lps = vec![0usize; max_ngram];
    let (mut longest, mut position) = (0usize, 0usize);
    let mut prev_lps = 0usize;
    let mut i = 1;
    while i < total {
        if rev[prev_lps] == rev[i] {
            prev_lps += 1;
            if prev_lps >= longest {
                longest = prev_lps;
                position = i;
            }
            if i < max_ngram {
                lps[i] = prev_lps;
            }
            if prev_lps == max_ngram {
                prev_lps = lps[max_ngram - 1];
            }
            i += 1;
        } else if prev_lps != 0 {
            prev_lps = lps[prev_lps - 1];
        } else {
            i += 1;
        }
    }
    if longest < min_ngram {
        return None;
    }
    Some((longest, total - 1 - position + longest))
}

/// Hugging Face's `PromptLookupCandidateGenerator.get_candidates`: sizes
/// from the largest down, windows in order, the first with a token after
/// it (down to `min_n` here; the engine's is 1).
fn hf(tokens: &[u32], min_n: usize, max_n: usize, cap: usize) -> Option<(usize, usize)> {
    let len = tokens.len();
    if len < 2 {
        return None;
    }
    for n in (min_n..=max_n.min(len - 1)).rev() {
        let suffix = &tokens[len - n..];
        for idx in 0..=len - n {
            if &tokens[idx..idx + n] == suffix {
                let start = idx + n;
                let end = (start + cap).min(len);
                if start < end {
                    return Some((n, start));
                }
            }
        }
    }
    None
}

/// TensorRT-LLM's `NGramPoolManager.get_draft_tokens` with a private pool
/// built over the whole prefix (`is_keep_all`, `is_use_oldest`): every
/// pattern with at least one token after it, its matches in order; the
/// first pattern found from the longest size down, its oldest match.
fn trtllm(tokens: &[u32], min_n: usize, max_n: usize, cap: usize) -> Option<(usize, usize)> {
    let len = tokens.len();
    if len < 2 {
        return None;
    }
    let top = max_n.min(len - 1);
    let mut pool: HashMap<&[u32], Vec<(usize, &[u32])>> = HashMap::new();
    for size in (1..=top).rev() {
        for l in 0..len - size {
            let r = (l + size + cap).min(len);
            let pattern = &tokens[l..l + size];
            let new_match = &tokens[l + size..r];
            match pool.get_mut(pattern) {
                None => {
                    pool.insert(pattern, vec![(l + size, new_match)]);
                }
                Some(matches) => {
                    if !matches.iter().any(|(_, m)| *m == new_match) {
                        matches.retain(|(_, m)| m.len() >= new_match.len());
                        matches.push((l + size, new_match));
                    }
                }
            }
        }
    }
    for size in (min_n..=top).rev() {
        if let Some(matches) = pool.get(&tokens[len - size..]) {
            return Some((size, matches[0].0));
        }
    }
    None
}

/// llama.cpp's `common_ngram_simple_draft`: `tokens` is the context without
/// the token just sampled. `(n, start, copy)`.
fn llamacpp(
    tokens: &[u32],
    sampled: u32,
    size_ngram: usize,
    size_mgram: usize,
) -> Option<(usize, usize, usize)> {
    let cur_len = tokens.len();
    let (n_min, n_max) = (size_ngram, size_mgram);
    if cur_len <= n_min + n_max + 1 {
        return None;
    }
    let mut pattern: Vec<u32> = tokens[cur_len - n_min + 1..].to_vec();
    pattern.push(sampled);
    let mut match_pos = 0;
    let mut j = cur_len - n_min - 1;
    while j > 0 {
        if (0..pattern.len()).all(|k| tokens[j + k] == pattern[k]) {
            match_pos = j;
            break;
        }
        j -= 1;
    }
    if match_pos == 0 {
        return None;
    }
    let copy_max = n_max.min(cur_len - (match_pos + n_min));
    if copy_max < n_min {
        return None;
    }
    Some((n_min, match_pos + n_min, copy_max))
}

/// The trace by rescanning the whole context at every position.
fn brute(config: &Config, context: &[u32], output_len: usize) -> Positions {
    let prompt_len = context.len() - output_len;
    let mut out = Positions::default();
    for t in 1..output_len {
        let len = prompt_len + t;
        let c = &context[..len];
        let found = match config.rule {
            Rule::Vllm => {
                vllm(c, config.min_n, config.max_n).map(|(n, s)| (n, s, (len - s).min(config.cap)))
            }
            Rule::Hf => hf(c, config.min_n, config.max_n, config.cap)
                .map(|(n, s)| (n, s, (len - s).min(config.cap))),
            Rule::Trtllm => trtllm(c, config.min_n, config.max_n, config.cap)
                .map(|(n, s)| (n, s, (len - s).min(config.cap))),
            Rule::LlamacppSimple => llamacpp(&c[..len - 1], c[len - 1], config.max_n, config.cap),
            Rule::Suffix => unreachable!("suffix has its own tests"),
        };
        let (n, l, m) = match found {
            Some((n, start, l)) => {
                let m = (0..l)
                    .take_while(|&i| {
                        len + i < context.len() && context[start + i] == context[len + i]
                    })
                    .count();
                (n, l, m)
            }
            None => (0, 0, 0),
        };
        out.proposal.push(l as u8);
        out.matched.push(m as u8);
        out.ngram.push(n as u8);
    }
    out
}

fn rule() -> impl Strategy<Value = Rule> {
    prop_oneof![
        Just(Rule::Vllm),
        Just(Rule::Trtllm),
        Just(Rule::LlamacppSimple),
        Just(Rule::Hf)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    #[test]
    fn generator_matches_each_rules_rescan(
        rule in rule(),
        alphabet in 1u32..5,
        prompt in prop::collection::vec(0u32..16, 0..40),
        output in prop::collection::vec(0u32..16, 0..80),
        eos in any::<bool>(),
        min_n in 1usize..5,
        extra in prop_oneof![0usize..4, Just(40)],
        cap in prop_oneof![1usize..6, Just(64), Just(255)],
    ) {
        let max_n = if rule == Rule::LlamacppSimple { min_n } else { min_n + extra };
        let config = Config { rule, min_n, max_n, cap };
        let mut context: Vec<u32> = prompt.iter().chain(&output).map(|t| t % alphabet).collect();
        if eos {
            context.push(u32::MAX);
        }
        let output_len = output.len() + usize::from(eos);
        let fast = generate(&config, &context, output_len);
        let slow = brute(&config, &context, output_len);
        prop_assert_eq!(fast.proposal.len(), output_len.saturating_sub(1));
        prop_assert_eq!(&fast, &slow);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// A conversation's calls, each the previous prompt with some tokens
    /// cut from its end and others added (so prefixes are shared, rolled
    /// back and grown), generated by one reusable state in turn: each
    /// trace is the one-off generator's.
    #[test]
    fn reusable_state_agrees_with_the_one_off_generator(
        rule in rule(),
        alphabet in 1u32..5,
        calls in prop::collection::vec(
            (0usize..30, prop::collection::vec(0u32..16, 0..30), prop::collection::vec(0u32..16, 0..20)),
            1..8,
        ),
        min_n in 1usize..4,
        extra in 0usize..4,
        cap in prop_oneof![1usize..6, Just(64)],
    ) {
        let max_n = if rule == Rule::LlamacppSimple { min_n } else { min_n + extra };
        let config = Config { rule, min_n, max_n, cap };
        let mut state = Reusable::new(config);
        let mut prompt: Vec<u32> = Vec::new();
        for (cut, added, output) in calls {
            prompt.truncate(prompt.len().saturating_sub(cut));
            prompt.extend(added.iter().map(|t| t % alphabet));
            let mut context = prompt.clone();
            context.extend(output.iter().map(|t| t % alphabet));
            context.push(u32::MAX);
            let output_len = output.len() + 1;
            let reused = state.generate(&context, output_len);
            prop_assert_eq!(&reused, &generate(&config, &context, output_len));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// As above, each call also saying how much of its prompt is known
    /// to be the last context's (any part of what is) and how much the
    /// next calls will share (any guess, right or wrong): the traces do
    /// not change.
    #[test]
    fn a_reusable_state_told_what_stays_agrees_with_the_one_off_generator(
        alphabet in 1u32..5,
        calls in prop::collection::vec(
            (0usize..40, prop::collection::vec(0u32..16, 0..30), 0usize..20, 0usize..40, 0.0f64..=1.0),
            1..10,
        ),
        max_n in 1usize..5,
    ) {
        let config = Config { rule: Rule::Vllm, min_n: 1, max_n, cap: 8 };
        let mut state = Reusable::new(config);
        let mut prompt: Vec<u32> = Vec::new();
        let mut last: Vec<u32> = Vec::new();
        for (cut, added, output, unstable, known) in calls {
            prompt.truncate(prompt.len().saturating_sub(cut));
            prompt.extend(added.iter().map(|t| t % alphabet));
            let mut context = prompt.clone();
            context.extend((0..output as u32).map(|t| t % alphabet));
            context.push(u32::MAX);
            let output_len = output + 1;
            let shared = last.iter().zip(&prompt).take_while(|(a, b)| a == b).count();
            let known = (shared as f64 * known) as usize;
            let stable = prompt.len().saturating_sub(unstable);
            let reused = state.generate_in(&context, output_len, known, stable);
            prop_assert_eq!(&reused, &generate(&config, &context, output_len));
            last = context;
        }
    }
}

#[test]
fn a_reusable_state_rolls_back_to_the_prefix_it_shares() {
    let config = Config {
        rule: Rule::Vllm,
        min_n: 1,
        max_n: 2,
        cap: 8,
    };
    let mut state = Reusable::new(config);
    let first = [5, 6, 7, 5, 6, 7, 5, 6, 9];
    assert_eq!(state.shared(&first), 0);
    state.generate(&first, 3);
    // The prompt and every output token but the last are held.
    assert_eq!(state.shared(&first), 8);
    // A call that diverges early: its n-grams are the prefix's only.
    let second = [5, 6, 1, 1, 5, 6, 1, 1, 5];
    assert_eq!(state.shared(&second[..6]), 2);
    assert_eq!(state.generate(&second, 3), generate(&config, &second, 3));
    // Back to the first: rolled back again, and the same trace.
    assert_eq!(state.generate(&first, 3), generate(&config, &first, 3));
}

#[test]
fn vllm_transcription_agrees_with_its_docstring_example() {
    // [1,2,3,4,2,3], min 2, max 3: [2,3] matches at 1; proposal [4,2,3].
    assert_eq!(vllm(&[1, 2, 3, 4, 2, 3], 2, 3), Some((2, 3)));
    assert_eq!(vllm(&[1, 2, 3, 4, 2, 3], 3, 3), None);
}

#[test]
fn rules_differ_where_the_engines_do() {
    // Context ...: "1 2 9 | 1 2 8 | 1 2" — the suffix [1,2] occurs at 0 and 3.
    let prompt = [1, 2, 9, 1, 2, 8, 1];
    let output = [2, 8, 5];
    let context: Vec<u32> = prompt.iter().chain(&output).copied().collect();
    let at = |rule, min_n, max_n| {
        generate(
            &Config {
                rule,
                min_n,
                max_n,
                cap: 8,
            },
            &context,
            output.len(),
        )
    };
    // Position 1 (context ends "1 2"): the earliest occurrence proposes
    // "9 1 2 8 1 2", the most recent (llama.cpp, but never position 0 nor
    // the one just before the suffix) proposes "8 1" (tokens up to, not
    // including, the last context token).
    let earliest = at(Rule::Vllm, 2, 2);
    assert_eq!(
        (earliest.proposal[0], earliest.matched[0], earliest.ngram[0]),
        (6, 0, 2)
    );
    let hf = at(Rule::Hf, 1, 2);
    assert_eq!(hf, earliest);
    let most_recent = generate(
        &Config {
            rule: Rule::LlamacppSimple,
            min_n: 1,
            max_n: 1,
            cap: 1,
        },
        &context,
        output.len(),
    );
    // cur_len 7 > n + m + 1 = 3; pattern [2] most recently at 4 (start
    // <= cur_len - n - 1 = 5): copy min(1, 7 - 5) = 1 token, "8", which
    // the output confirms.
    assert_eq!((most_recent.proposal[0], most_recent.matched[0]), (1, 1));
}

/// The index after every position of `context` is pushed.
fn index_of(context: &[u32], max_n: usize) -> super::Index {
    let mut index = super::Index::new(max_n);
    let mut before = vec![None; max_n];
    for e in 0..context.len() {
        index.push(context, e, &mut before, &mut ());
    }
    index
}

/// Room the maps of n >= 2 hold (allocated, used or not), and the n-grams
/// in them.
fn room_and_entries(index: &super::Index) -> (usize, usize) {
    index.longer.iter().fold((0, 0), |(room, entries), map| {
        (room + map.capacity(), entries + map.len())
    })
}

#[test]
fn the_index_keeps_no_ngram_longer_than_a_new_one() {
    // Every token new: every n-gram is new, and so is any longer one
    // ending at the same place; nothing beyond the 1-grams is kept, at
    // any max_n.
    let distinct: Vec<u32> = (0..2000).collect();
    let index = index_of(&distinct, 255);
    assert_eq!(room_and_entries(&index), (0, 0));
    assert_eq!(index.longer.len(), 0, "no map made");
    // 200 tokens, then the same 200 again, at max_n 255: an n-gram is
    // kept where its (n-1)-gram had occurred before, here at most once per
    // position of the copy and n, plus one new n-gram ending at each
    // position. The bound is the tokens times min(max_n, 1 + the longest
    // repeat), not the tokens times max_n.
    let block: Vec<u32> = (0..200).map(|i| (i * 7919) % 1000).collect();
    let twice: Vec<u32> = block.iter().chain(&block).copied().collect();
    let index = index_of(&twice, 255);
    // The longest n-gram kept: the whole block repeated at the end, and
    // the new one a token longer; one map per n = 2..=201.
    assert_eq!(index.longer.len(), 200);
    let (room, entries) = room_and_entries(&index);
    let bound = twice.len() + block.len() * block.len();
    assert!(entries <= bound, "{entries} n-grams, more than {bound}");
    assert!(room <= 4 * bound, "room for {room} n-grams");
    assert!(
        room < twice.len() * 254,
        "room for {room}: max_n maps of the tokens' size"
    );
}

/// What `index` holds, in order: each map's entries, the ids given.
#[allow(clippy::type_complexity)]
fn contents(
    index: &super::Index,
) -> (
    Vec<(u64, super::Seen)>,
    Vec<Vec<(u64, super::Seen)>>,
    Vec<u32>,
) {
    let sorted = |entries: Vec<(u64, super::Seen)>| {
        let mut entries = entries;
        entries.sort_by_key(|(key, _)| *key);
        entries
    };
    let unigrams = sorted(
        index
            .unigrams
            .iter()
            .map(|(k, v)| (u64::from(*k), *v))
            .collect(),
    );
    let mut longer: Vec<_> = index
        .longer
        .iter()
        .map(|map| sorted(map.iter().map(|(k, v)| (*k, *v)).collect()))
        .collect();
    // A map made for a longer n and emptied again holds what none does.
    while longer.last().is_some_and(Vec::is_empty) {
        longer.pop();
    }
    (unigrams, longer, index.next_id.clone())
}

#[test]
fn undoing_the_log_gives_the_index_of_the_prefix() {
    // Repeats of several lengths, so that entries are touched, added at a
    // first recurrence, and added new, for every n up to 5.
    let context: Vec<u32> = (0..600u32).map(|i| (i * i / 7 + i / 50) % 11).collect();
    let mut index = super::Index::new(5);
    let mut before = vec![None; 5];
    let mut log: Vec<super::Undo> = Vec::new();
    let mut marks = Vec::new();
    for e in 0..context.len() {
        marks.push(log.len());
        index.push(&context, e, &mut before, &mut log);
    }
    for keep in (0..context.len()).rev().step_by(37) {
        while log.len() > marks[keep] {
            index.undo(log.pop().expect("above the mark"));
        }
        assert_eq!(
            contents(&index),
            contents(&index_of(&context[..keep], 5)),
            "at {keep}"
        );
    }
}

#[test]
fn conversations_under_one_system_prompt_copy_back_its_ngrams() {
    let config = Config {
        rule: Rule::Vllm,
        min_n: 2,
        max_n: 4,
        cap: 16,
    };
    // A system prompt, then per conversation turns of its own (drawn from
    // the same few tokens, so n-grams recur across them).
    let tokens = |seed: u32, len: u32| -> Vec<u32> {
        (0..len)
            .map(|i| (i * 31 + seed * 17 + i * i % 7) % 9)
            .collect()
    };
    let system = tokens(0, 300);
    let mut state = Reusable::new(config);
    let mut call = |prompt: &[u32], output: &[u32]| {
        let mut context = prompt.to_vec();
        context.extend_from_slice(output);
        context.push(u32::MAX);
        let output_len = output.len() + 1;
        assert_eq!(
            state.generate(&context, output_len),
            generate(&config, &context, output_len)
        );
    };
    for conversation in 1..=4 {
        let mut prompt = system.clone();
        for turn in 0..3 {
            prompt.extend(tokens(conversation * 10 + turn, 80));
            call(&prompt, &tokens(conversation * 100 + turn, 12));
        }
    }
    // The second conversation undid all but the system prompt (and what
    // the first turns share): a copy was saved there, and the next ones
    // started from it.
    let saved = state.saved.as_ref().expect("a saved copy");
    assert!((300..310).contains(&saved.len), "{}", saved.len);
    // A call that parts inside the system prompt drops it, and still
    // gets the one-off trace.
    let cut = &system[..150];
    let mut context = cut.to_vec();
    context.extend([1, 2, 3, u32::MAX]);
    assert_eq!(state.generate(&context, 4), generate(&config, &context, 4));
    assert!(state.saved.as_ref().is_none_or(|saved| saved.len <= 150));
}

// How `Reusable::roll_back` brings the index back: by undoing the log, by
// copying back the saved index, or by clearing it. The choice is a matter
// of speed (the traces are the same whichever is made), so these tests
// look at what `roll_back` returns and keeps: `(keep, false)` when it
// undoes, `(saved length, false)` when it copies back, `(0, true)` when it
// clears; and at the index it leaves, which is in every case the one a
// fresh build over the tokens it says it holds gives.

/// Vllm with n-grams up to `max_n`; at `max_n = 1` a position changes
/// exactly one entry (its 1-gram), so the log holds a change a position.
fn rollback_config(max_n: usize) -> Config {
    Config {
        rule: Rule::Vllm,
        min_n: 1,
        max_n,
        cap: 8,
    }
}

/// Tokens over a small alphabet: entries are touched as well as added.
fn repeating(len: usize) -> Vec<u32> {
    (0..len as u32).map(|i| (i * 7 + i * i / 3) % 5).collect()
}

/// Has `state` generate a call that leaves it holding `tokens` (every one
/// pushed), the positions below `stable` unlogged where pushed anew.
fn hold(state: &mut Reusable, tokens: &[u32], stable: usize) {
    let mut context = tokens.to_vec();
    context.push(u32::MAX);
    let config = state.config;
    assert_eq!(
        state.generate_in(&context, 2, 0, stable),
        generate(&config, &context, 2)
    );
    assert_eq!(state.tokens, tokens);
}

/// `state` holds `tokens`, a mark a position, and the index a fresh build
/// over them gives.
fn assert_holds(state: &Reusable, tokens: &[u32]) {
    assert_eq!(state.tokens, tokens);
    assert_eq!(state.marks.len(), tokens.len());
    assert_eq!(
        contents(&state.index),
        contents(&index_of(tokens, state.config.max_n))
    );
}

fn saved_len(state: &Reusable) -> Option<usize> {
    state.saved.as_ref().map(|saved| saved.len)
}

/// A state at `max_n = 1`, everything logged, with a copy saved at 20
/// and holding the first `held` of `tokens`.
fn saved_at_20(tokens: &[u32], held: usize) -> Reusable {
    let mut state = Reusable::new(rollback_config(1));
    hold(&mut state, &tokens[..100], 0);
    // 80 positions undone, at least a fifth of 100: a copy saved.
    assert_eq!(state.roll_back(20), (20, false));
    assert_eq!(saved_len(&state), Some(20));
    hold(&mut state, &tokens[..held], 0);
    assert_eq!(state.log.len(), held, "a change a position");
    assert_eq!(saved_len(&state), Some(20));
    state
}

#[test]
fn a_rollback_undoes_up_to_eight_changes_a_position_past_the_copy_and_a_quarter() {
    let tokens = repeating(100);
    // Back to 22 from a copy at 20: undoing is chosen up to 8 * (22 - 20)
    // + 20 / 4 = 21 changes.
    let mut state = saved_at_20(&tokens, 22 + 21);
    assert_eq!(state.roll_back(22), (22, false), "undone");
    assert_holds(&state, &tokens[..22]);
    // 21 positions undone, at least a fifth of 22: saved there instead.
    assert_eq!(saved_len(&state), Some(22));
    // One change more: the copy at 20 is copied back.
    let mut state = saved_at_20(&tokens, 22 + 22);
    assert_eq!(state.roll_back(22), (20, false), "copied back");
    assert_holds(&state, &tokens[..20]);
    assert_eq!(saved_len(&state), Some(20));
}

/// A state at `max_n = 3` with a copy saved at 20, holding the first 60
/// of `tokens`, whose positions 20..50 are unlogged (the floor at 50).
fn floor_at_50(tokens: &[u32]) -> Reusable {
    let mut state = Reusable::new(rollback_config(3));
    hold(&mut state, &tokens[..100], 0);
    assert_eq!(state.roll_back(20), (20, false));
    hold(&mut state, &tokens[..60], 50);
    assert_eq!(state.floor, 50);
    assert_eq!(saved_len(&state), Some(20));
    state
}

#[test]
fn a_rollback_below_the_floor_copies_back_however_few_changes_since() {
    let tokens = repeating(100);
    let mut state = floor_at_50(&tokens);
    // Fewer changes logged since 30 (those of positions 50..60) than
    // undoing would be chosen for, 8 * (30 - 20) + 20 / 4, had they all
    // been logged.
    assert!(state.log.len() - state.marks[30] <= 85);
    assert_eq!(state.roll_back(30), (20, false), "copied back");
    assert_holds(&state, &tokens[..20]);
    assert_eq!(state.floor, 20);
    assert_eq!(saved_len(&state), Some(20));
    // Back to the copy's own length: it is kept, and copied back.
    let mut state = floor_at_50(&tokens);
    assert_eq!(state.roll_back(20), (20, false), "copied back");
    assert_holds(&state, &tokens[..20]);
    assert_eq!(saved_len(&state), Some(20));
}

#[test]
fn a_rollback_to_the_floor_or_above_undoes_few_changes() {
    let tokens = repeating(100);
    for keep in [50, 55] {
        let mut state = floor_at_50(&tokens);
        assert!(state.log.len() - state.marks[keep] <= 8 * (keep - 20) + 20 / 4);
        assert_eq!(state.roll_back(keep), (keep, false), "undone to {keep}");
        assert_holds(&state, &tokens[..keep]);
        // Under a fifth undone: the copy at 20 stays.
        assert_eq!(saved_len(&state), Some(20));
    }
}

#[test]
fn without_a_copy_a_rollback_below_the_floor_clears_and_to_it_undoes() {
    let tokens = repeating(100);
    let mut state = Reusable::new(rollback_config(3));
    hold(&mut state, &tokens[..60], 50);
    assert_eq!(saved_len(&state), None);
    assert_eq!(state.roll_back(50), (50, false), "undone");
    assert_holds(&state, &tokens[..50]);
    assert_eq!(state.roll_back(49), (0, true), "cleared");
    assert_holds(&state, &[]);
    assert_eq!((state.floor, state.log.len()), (0, 0));
}

#[test]
fn a_rollback_saves_a_copy_after_undoing_a_fifth_of_what_it_keeps() {
    let tokens = repeating(100);
    let mut state = Reusable::new(rollback_config(1));
    // 4 * 5 >= 20: saved.
    hold(&mut state, &tokens[..25], 0);
    assert_eq!(state.roll_back(20), (20, false));
    assert_holds(&state, &tokens[..20]);
    assert_eq!(saved_len(&state), Some(20));
    // 4 * 4 < 20: not.
    let mut state = Reusable::new(rollback_config(1));
    hold(&mut state, &tokens[..24], 0);
    assert_eq!(state.roll_back(20), (20, false));
    assert_holds(&state, &tokens[..20]);
    assert_eq!(saved_len(&state), None);
    // Nothing kept: nothing saved.
    let mut state = Reusable::new(rollback_config(1));
    hold(&mut state, &tokens[..25], 0);
    assert_eq!(state.roll_back(0), (0, false));
    assert_holds(&state, &[]);
    assert_eq!(saved_len(&state), None);
}

#[test]
fn a_call_parting_below_the_floor_rebuilds_and_saves_what_it_shares() {
    let tokens = repeating(100);
    let config = rollback_config(3);
    // Parting at 30, below the floor at 50, with no copy: cleared, the 30
    // shared positions pushed again and a copy saved there.
    let mut state = Reusable::new(config);
    hold(&mut state, &tokens[..60], 50);
    let mut context = tokens[..30].to_vec();
    context.extend([9, 9, 8, 9, 9, 8, u32::MAX]);
    assert_eq!(
        state.generate_in(&context, 3, 0, 0),
        generate(&config, &context, 3)
    );
    assert_eq!(saved_len(&state), Some(30));
    assert_holds(&state, &context[..context.len() - 1]);
    // Parting at 0: cleared, and nothing to save.
    let mut state = Reusable::new(config);
    hold(&mut state, &tokens[..60], 50);
    let mut context = vec![9];
    context.extend(&tokens[..40]);
    context.push(u32::MAX);
    assert_eq!(
        state.generate_in(&context, 3, 0, 0),
        generate(&config, &context, 3)
    );
    assert_eq!(saved_len(&state), None);
    assert_holds(&state, &context[..context.len() - 1]);
}
