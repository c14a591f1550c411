//! The fast trees against a reference: an uncompressed trie keyed by whole
//! strings, each node's children a plain vector moved by index, replaying
//! every increment and decrement in Arctic's order, and the rule run
//! directly at each cap.

use std::collections::BTreeMap;

use rand_xoshiro::Xoshiro256PlusPlus;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};

use super::*;

#[derive(Clone, Debug, Default)]
struct RefNode {
    count: u64,
    /// Child tokens, in order.
    children: Vec<u32>,
}

/// The reference trie: every string of at most `depth` tokens held, with
/// its count and ordered children; the empty string is the root.
#[derive(Clone, Debug)]
struct Reference {
    depth: usize,
    nodes: BTreeMap<Vec<u32>, RefNode>,
    seqs: Vec<Option<Vec<u32>>>,
}

impl Reference {
    fn new(depth: usize) -> Self {
        let mut nodes = BTreeMap::new();
        nodes.insert(Vec::new(), RefNode::default());
        Self {
            depth,
            nodes,
            seqs: Vec::new(),
        }
    }

    fn add(&mut self) -> usize {
        self.seqs.push(Some(Vec::new()));
        self.seqs.len() - 1
    }

    fn count(&self, s: &[u32]) -> u64 {
        self.nodes.get(s).map_or(0, |n| n.count)
    }

    fn append(&mut self, seq: usize, token: u32) {
        let tokens = self.seqs[seq].as_mut().unwrap();
        tokens.push(token);
        let tokens = tokens.clone();
        let n = tokens.len();
        self.nodes.get_mut(&Vec::new()).unwrap().count += 1;
        // Longest suffix first, as Arctic's active nodes.
        for start in n.saturating_sub(self.depth)..n {
            self.increment(&tokens[start..n]);
        }
    }

    fn increment(&mut self, s: &[u32]) {
        let (parent, &token) = (&s[..s.len() - 1], s.last().unwrap());
        let Some(c) = self.nodes.get(s).map(|n| n.count) else {
            self.nodes.insert(
                s.to_vec(),
                RefNode {
                    count: 1,
                    children: Vec::new(),
                },
            );
            self.nodes.get_mut(parent).unwrap().children.push(token);
            return;
        };
        let siblings = self.nodes[parent].children.clone();
        let i = siblings.iter().position(|&t| t == token).unwrap();
        let counts: Vec<u64> = siblings
            .iter()
            .map(|&t| self.count(&[parent, &[t]].concat()))
            .collect();
        let count_of = |j: usize| counts[j];
        self.nodes.get_mut(s).unwrap().count = c + 1;
        if i == 0 || count_of(i - 1) > c + 1 {
            return;
        }
        let run = count_of(i - 1);
        let mut j = i - 1;
        while j > 0 && count_of(j - 1) == run {
            j -= 1;
        }
        let list = &mut self.nodes.get_mut(parent).unwrap().children;
        list.remove(i);
        list.insert(j, token);
    }

    fn remove(&mut self, seq: usize) {
        let tokens = self.seqs[seq].take().unwrap();
        for start in 0..tokens.len() {
            self.nodes.get_mut(&Vec::new()).unwrap().count -= 1;
            for end in start + 1..=tokens.len().min(start + self.depth) {
                if !self.decrement(&tokens[start..end]) {
                    break;
                }
            }
        }
    }

    /// False when the string went (with every string it begins).
    fn decrement(&mut self, s: &[u32]) -> bool {
        let (parent, &token) = (&s[..s.len() - 1], s.last().unwrap());
        let c = self.count(s);
        let siblings = self.nodes[parent].children.clone();
        let i = siblings.iter().position(|&t| t == token).unwrap();
        if c == 1 {
            self.nodes.retain(|k, _| !k.starts_with(s));
            self.nodes.get_mut(parent).unwrap().children.remove(i);
            return false;
        }
        let counts: Vec<u64> = siblings
            .iter()
            .map(|&t| self.count(&[parent, &[t]].concat()))
            .collect();
        let count_of = |j: usize| counts[j];
        self.nodes.get_mut(s).unwrap().count = c - 1;
        if i + 1 == siblings.len() || count_of(i + 1) < c {
            return true;
        }
        let mut j = i + 1;
        while j + 1 < siblings.len() && count_of(j + 1) == c {
            j += 1;
        }
        let list = &mut self.nodes.get_mut(parent).unwrap().children;
        list.remove(i);
        list.insert(j, token);
        true
    }

    /// The rule itself on this trie, at cap `cap`.
    fn speculate(&self, context: &[u32], cap: usize, config: &SuffixConfig) -> Draft {
        let context = &context[context.len().saturating_sub(self.depth)..];
        let mut best = Draft::default();
        for m in 1..context.len() {
            let mut s = context[context.len() - m..].to_vec();
            if !self.nodes.contains_key(&s) {
                break;
            }
            let limit = config.limit(m).min(cap);
            let mut draft = Draft {
                match_len: m,
                ..Draft::default()
            };
            let mut prob = 1.0f32;
            while draft.tokens.len() < limit {
                let node = &self.nodes[&s];
                let Some(&first) = node.children.first() else {
                    break;
                };
                let mut child = s.clone();
                child.push(first);
                prob *= self.count(&child) as f32 / node.count as f32;
                if prob < config.min_prob {
                    break;
                }
                draft.tokens.push(first);
                draft.probs.push(prob);
                draft.score += prob;
                s = child;
            }
            if draft.score >= best.score {
                best = draft;
            }
        }
        best
    }

    /// Every node's count and child order agree with `tree`'s, and the
    /// trees hold the same strings.
    fn check(&self, tree: &Tree) {
        for (s, node) in &self.nodes {
            assert_eq!(u64::from(tree.count(s)), node.count, "count of {s:?}");
            let fast: Vec<u32> = tree.children(s).iter().map(|&(t, _)| t).collect();
            assert_eq!(fast, node.children, "children of {s:?}");
        }
        assert_eq!(tree.nodes(), self.nodes.len(), "strings held");
    }
}

fn random_tokens(rng: &mut Xoshiro256PlusPlus, n: usize, alphabet: u32) -> Vec<u32> {
    (0..n).map(|_| rng.next_u32() % alphabet).collect()
}

/// Text with long repeats and many ties: pieces of a few short motifs.
fn tie_heavy(rng: &mut Xoshiro256PlusPlus, n: usize) -> Vec<u32> {
    let motifs: [&[u32]; 4] = [&[0, 1], &[0, 2], &[1, 0, 1], &[2, 2, 0]];
    let mut out = Vec::new();
    while out.len() < n {
        out.extend_from_slice(motifs[rng.next_u32() as usize % motifs.len()]);
    }
    out.truncate(n);
    out
}

const X: u32 = 0;
const A: u32 = 1;
const B: u32 = 2;
const C: u32 = 3;

#[test]
fn the_test_vector_drafts_the_older_child_at_two_sixths() {
    let vector = [X, A, X, B, X, C, X, A, X, C, X];
    let mut tree = Tree::new(24);
    let mut reference = Reference::new(24);
    let seq = tree.add_sequence();
    let rseq = reference.add();
    for t in vector {
        tree.append(seq, t);
        reference.append(rseq, t);
        reference.check(&tree);
    }
    // After X: A (2), C (2, raised past B), B (1); X ends once more.
    assert_eq!(tree.children(&[X]), vec![(A, 2), (C, 2), (B, 1)]);
    assert_eq!(tree.count(&[X]), 6);
    for draft in [
        tree.speculate(&[C, X], 24, &SuffixConfig::VLLM),
        reference.speculate(&[C, X], 24, &SuffixConfig::VLLM),
    ] {
        assert_eq!(draft.tokens, vec![A]);
        assert_eq!(draft.probs, vec![2.0f32 / 6.0]);
        assert_eq!(draft.match_len, 1);
    }
}

#[test]
fn a_child_leading_its_run_goes_to_the_front_of_the_next_run() {
    // Children of 9, in order of creation: 1, 2, 3, all counted once.
    // Raising 2 (not leading) puts it before 1; then 1 (now leading the
    // run of 1s after 2) joins the run of 2s at its front.
    let mut tree = Tree::new(2);
    let seq = tree.add_sequence();
    for t in [9, 1, 9, 2, 9, 3, 9, 2] {
        tree.append(seq, t);
    }
    assert_eq!(tree.children(&[9]), vec![(2, 2), (1, 1), (3, 1)]);
    for t in [9, 1] {
        tree.append(seq, t);
    }
    assert_eq!(tree.children(&[9]), vec![(1, 2), (2, 2), (3, 1)]);
}

#[test]
fn raising_the_leader_of_a_run_puts_it_first_and_eviction_moves_behind() {
    let mut tree = Tree::new(2);
    let seq = |tree: &mut Tree, tokens: &[u32]| {
        let s = tree.add_sequence();
        for &t in tokens {
            tree.append(s, t);
        }
        s
    };
    let p = seq(&mut tree, &[9, 1, 9, 2]);
    assert_eq!(tree.children(&[9]), vec![(1, 1), (2, 1)]);
    let q = seq(&mut tree, &[9, 1]);
    assert_eq!(tree.children(&[9]), vec![(1, 2), (2, 1)]);
    // 2 led the run of 1s: raised, it goes in front of the run of 2s.
    let r = seq(&mut tree, &[9, 2]);
    assert_eq!(tree.children(&[9]), vec![(2, 2), (1, 2)]);
    // Lowered while the next sibling counts as much: behind its run.
    tree.remove(r);
    assert_eq!(tree.children(&[9]), vec![(1, 2), (2, 1)]);
    tree.remove(p);
    assert_eq!(tree.children(&[9]), vec![(1, 1)]);
    tree.remove(q);
    assert_eq!((tree.nodes(), tree.count(&[])), (1, 0));
}

#[test]
fn fast_trees_agree_with_the_reference_on_appends_and_removals() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(38);
    for round in 0..60 {
        let depth = 1 + rng.next_u32() as usize % 6;
        let alphabet = 2 + rng.next_u32() % 3;
        let mut tree = Tree::new(depth);
        let mut reference = Reference::new(depth);
        let mut live: Vec<(Seq, usize)> = Vec::new();
        for _ in 0..12 {
            let n = 1 + rng.next_u32() as usize % 30;
            let tokens = if round % 2 == 0 {
                random_tokens(&mut rng, n, alphabet)
            } else {
                tie_heavy(&mut rng, n)
            };
            let seq = tree.add_sequence();
            let rseq = reference.add();
            for t in tokens {
                tree.append(seq, t);
                reference.append(rseq, t);
            }
            reference.check(&tree);
            live.push((seq, rseq));
            if rng.next_u32() % 3 == 0 {
                let i = rng.next_u32() as usize % live.len();
                let (seq, rseq) = live.remove(i);
                tree.remove(seq);
                reference.remove(rseq);
                reference.check(&tree);
            }
        }
    }
}

/// One request for the generation tests.
struct Req {
    id: String,
    prompt: Vec<u32>,
    output: Vec<u32>,
}

/// The rule run directly, request after request, at cap `k`: the draft
/// length, agreement and score at every position.
fn direct(config: &SuffixConfig, requests: &[Req], k: usize) -> Vec<Vec<(usize, usize, f32)>> {
    let mut global = Reference::new(config.depth);
    let mut cached: Vec<(String, usize)> = Vec::new();
    let mut out = Vec::new();
    for r in requests {
        let mut local = Reference::new(config.depth);
        let lseq = local.add();
        for &t in &r.prompt {
            local.append(lseq, t);
        }
        let own = (config.cache > 0).then(|| {
            if let Some(i) = cached.iter().position(|(id, _)| *id == r.id) {
                global.remove(cached.remove(i).1);
            }
            let seq = global.add();
            cached.push((r.id.clone(), seq));
            while cached.len() > config.cache {
                global.remove(cached.remove(0).1);
            }
            seq
        });
        let mut positions = Vec::new();
        for t in 1..r.output.len() {
            local.append(lseq, r.output[t - 1]);
            if let Some(own) = own {
                global.append(own, r.output[t - 1]);
            }
            let context: Vec<u32> = r.prompt.iter().chain(&r.output[..t]).copied().collect();
            let mine = local.speculate(&context, k, config);
            let theirs = global.speculate(&context, k, config);
            let draft = if mine.score >= theirs.score {
                mine
            } else {
                theirs
            };
            let agree = draft
                .tokens
                .iter()
                .zip(&r.output[t..])
                .take_while(|(a, b)| a == b)
                .count();
            positions.push((draft.tokens.len(), agree, draft.score));
        }
        if let (Some(own), Some(&last)) = (own, r.output.last()) {
            global.append(own, last);
        }
        out.push(positions);
    }
    out
}

fn fast(config: &SuffixConfig, requests: &[Req]) -> (Vec<Outcomes>, usize) {
    let mut global = GlobalCache::new(*config);
    let outcomes = requests
        .iter()
        .map(|r| {
            let local = local_pass(config, &r.prompt, &r.output);
            global.request(&r.id, &r.prompt, r.prompt.len(), &r.output, &local)
        })
        .collect();
    (outcomes, global.cached())
}

fn requests(rng: &mut Xoshiro256PlusPlus, n: usize, ties: bool) -> Vec<Req> {
    (0..n)
        .map(|i| {
            let (p, o) = (
                rng.next_u32() as usize % 25,
                1 + rng.next_u32() as usize % 40,
            );
            let (prompt, output) = if ties {
                (tie_heavy(rng, p), tie_heavy(rng, o))
            } else {
                (random_tokens(rng, p, 3), random_tokens(rng, o, 3))
            };
            Req {
                // Some ids repeat: the earlier response is evicted first.
                id: format!("r{}", if i % 5 == 4 { 0 } else { i }),
                prompt,
                output,
            }
        })
        .collect()
}

#[test]
fn every_cap_of_the_replay_agrees_with_the_rule_run_at_that_cap() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(2411);
    let (mut cuts, mut scored) = (0, 0);
    for round in 0..24 {
        let config = SuffixConfig {
            depth: 2 + rng.next_u32() as usize % 9,
            factor: [1.0, 0.5, 2.0][round % 3],
            offset: [0.0, 1.0, -0.5][round / 3 % 3],
            min_prob: [0.1, 0.3, 0.0][round / 9 % 3],
            cache: [0, 1, 3, 10_000][round % 4],
            cap: 1 + rng.next_u32() as usize % 8,
        };
        let requests = requests(&mut rng, 8, round % 2 == 1);
        let (outcomes, cached) = fast(&config, &requests);
        // Eight requests, seven ids (r0 comes back and replaces itself).
        assert_eq!(cached, config.cache.min(7));
        for k in 1..=config.cap {
            let want = direct(&config, &requests, k);
            for (i, (o, w)) in outcomes.iter().zip(&want).enumerate() {
                let got: Vec<(usize, usize)> = (0..w.len()).map(|j| o.at(j, k)).collect();
                let w_lens: Vec<(usize, usize)> = w.iter().map(|&(l, a, _)| (l, a)).collect();
                assert_eq!(got, w_lens, "round {round} request {i} cap {k} {config:?}");
                if k == config.cap {
                    // The score is the draft's at the cap (0: no draft).
                    let scores: Vec<u8> = w
                        .iter()
                        .map(|&(l, _, s)| if l == 0 { 0 } else { score_sixteenths(s) })
                        .collect();
                    assert_eq!(o.score, scores, "round {round} request {i} {config:?}");
                    scored += o.score.iter().filter(|&&s| s > 0 && s < 16).count();
                }
            }
        }
        cuts += outcomes.iter().map(|o| o.below.len()).sum::<usize>();
    }
    // The smaller caps changed the choice somewhere, and some drafts were
    // less than certain of their first token.
    assert!(cuts > 0 && scored > 0);
}

#[test]
fn the_arrays_are_the_outcome_at_the_cap_with_its_match_length() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    let config = SuffixConfig {
        depth: 6,
        cap: 5,
        ..SuffixConfig::VLLM
    };
    let requests = requests(&mut rng, 6, true);
    let (outcomes, _) = fast(&config, &requests);
    for (o, r) in outcomes.iter().zip(&requests) {
        for j in 0..o.proposal.len() {
            assert_eq!(
                (usize::from(o.proposal[j]), usize::from(o.matched[j])),
                o.at(j, 5)
            );
            // A draft comes from a match of 1..depth - 1 tokens, within
            // the context.
            let m = usize::from(o.match_len[j]);
            assert_eq!(m == 0, o.proposal[j] == 0);
            assert!(m < config.depth.min(r.prompt.len() + j + 1));
        }
        for c in &o.below {
            assert!(usize::from(c.cap) < config.cap && c.proposal <= c.cap);
            assert!(c.matched <= c.proposal);
        }
    }
}

#[test]
fn the_global_tree_drafts_an_earlier_response() {
    // The second request's prompt has nothing to copy, but the first
    // request's output is in the global tree.
    let config = SuffixConfig {
        depth: 8,
        ..SuffixConfig::VLLM
    };
    let output: Vec<u32> = (10..30).collect();
    let reqs = [
        Req {
            id: "a".into(),
            prompt: vec![1, 2, 3],
            output: output.clone(),
        },
        Req {
            id: "b".into(),
            prompt: vec![4, 5, 6],
            output: output.clone(),
        },
    ];
    let (with, _) = fast(&config, &reqs);
    let (without, _) = fast(&SuffixConfig { cache: 0, ..config }, &reqs);
    assert!(with[0].matched.iter().all(|&m| m == 0));
    // From position 2 on (a match of at least one token), up to 4 tokens
    // (depth 8: m + draft <= 8, draft <= m), all of them right.
    assert!(with[1].matched[1..].iter().all(|&m| m > 0), "{:?}", with[1]);
    assert!(without[1].matched.iter().all(|&m| m == 0));
    assert!(with[1].proposal.iter().all(|&l| l <= 4));
}

#[test]
#[should_panic(expected = "suffix traces are made by ngram::suffix")]
fn the_n_gram_generator_refuses_the_suffix_rule() {
    let config = crate::ngram::Config {
        rule: crate::ngram::Rule::Suffix,
        min_n: 1,
        max_n: 23,
        cap: 24,
    };
    crate::ngram::generate(&config, &[1, 2, 3], 2);
}

/// The trace file of `requests` under `config`, as `ngram` writes it.
fn trace_file(config: &SuffixConfig, requests: &[Req]) -> Vec<u8> {
    use specdec_ingest::trace::{SuffixMeta, TraceMeta, TraceRequest, write_meta, write_request};
    let (outcomes, _) = fast(config, requests);
    let mut file = Vec::new();
    let meta = TraceMeta {
        tokenizer: "test".into(),
        rule: "suffix".into(),
        min_n: 1,
        max_n: config.depth - 1,
        cap: config.cap,
        eos: false,
        greedy: true,
        num_speculative_tokens: Some(config.cap),
        suffix: Some(SuffixMeta {
            depth: config.depth,
            factor: config.factor,
            offset: config.offset,
            min_prob: config.min_prob,
            cache: config.cache,
        }),
    };
    write_meta(&mut file, &meta).unwrap();
    for (r, o) in requests.iter().zip(outcomes) {
        let request = TraceRequest {
            id: r.id.clone().into(),
            prompt_tokens: r.prompt.len() as u64,
            output_tokens: r.output.len() as u64,
            proposal: o.proposal,
            matched: o.matched,
            ngram: Some(o.match_len),
            score: Some(o.score),
            below: o.below,
        };
        write_request(&mut file, &request).unwrap();
    }
    file
}

#[test]
fn the_engine_replay_of_each_static_length_is_the_rule_run_at_that_cap() {
    use specdec_metrics::StepCost;
    use specdec_sim::policy::PolicySpec;
    use specdec_sim::trace_set::TraceSet;
    use specdec_sim::whatif::Settings;
    use std::sync::Arc;

    let mut rng = Xoshiro256PlusPlus::seed_from_u64(25784);
    for round in 0..4 {
        let config = SuffixConfig {
            depth: 5 + round,
            cap: 6,
            cache: [10_000, 2][round % 2],
            ..SuffixConfig::VLLM
        };
        let requests = requests(&mut rng, 10, round % 2 == 0);
        let file = trace_file(&config, &requests);
        let traces = Arc::new(TraceSet::read(file.as_slice(), "test").unwrap());
        for k in 1..=config.cap {
            // The rule run at cap k, request by request, as the engine
            // walks: draft, accept, move past the accepted and the bonus.
            let direct = direct(&config, &requests, k);
            let (mut drafted, mut accepted, mut steps, mut undrafted) = (0, 0, 0, 0);
            for (r, positions) in requests.iter().zip(&direct) {
                let m = r.output.len();
                let mut t = 1;
                while t < m {
                    let (d, a, _) = positions[t - 1];
                    if d == 0 {
                        undrafted += 1;
                    } else {
                        steps += 1;
                    }
                    drafted += d as u64;
                    accepted += a as u64;
                    t += (a + 1).min(m - t);
                }
            }
            let settings = Settings {
                traces: Arc::clone(&traces),
                max_draft_len: k,
                cost: StepCost::linear(1.0, 0.1).unwrap(),
                batch: 1,
                interval: 16,
                update_observations: None,
                seed: 1,
                state_space: None,
                run_signal: None,
                load: Default::default(),
            };
            let replay = settings.replay(PolicySpec::fixed(k)).unwrap().report;
            assert_eq!(
                (
                    replay.num_draft_tokens(),
                    replay.num_accepted_draft_tokens(),
                    replay.num_spec_steps(),
                    replay.num_undrafted_steps()
                ),
                (drafted, accepted, steps, undrafted),
                "round {round} k {k}"
            );
        }
    }
}

fn interleave(config: &SuffixConfig, requests: &[Req], batch: usize) -> Vec<Outcomes> {
    let locals: Vec<LocalPass> = requests
        .iter()
        .map(|r| local_pass(config, &r.prompt, &r.output))
        .collect();
    let all: Vec<Request<'_>> = requests
        .iter()
        .zip(&locals)
        .map(|(r, l)| {
            (
                r.id.as_str(),
                r.prompt.as_slice(),
                r.prompt.len(),
                r.output.as_slice(),
                l,
            )
        })
        .collect();
    interleaved(*config, &all, batch)
}

#[test]
fn one_in_flight_is_file_order_and_more_share_partial_outputs_only() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
    let config = SuffixConfig {
        depth: 7,
        cap: 5,
        ..SuffixConfig::VLLM
    };
    let reqs = requests(&mut rng, 9, true);
    assert_eq!(interleave(&config, &reqs, 1), fast(&config, &reqs).0);
    // B repeats A's output: in file order B drafts all of A's; in flight
    // beside A, only A's output so far, which ends where B's does.
    let output: Vec<u32> = (100..140).collect();
    let two = [
        Req {
            id: "a".into(),
            prompt: vec![1],
            output: output.clone(),
        },
        Req {
            id: "b".into(),
            prompt: vec![2],
            output,
        },
    ];
    let sum = |o: &Outcomes| o.matched.iter().map(|&m| usize::from(m)).sum::<usize>();
    let (apart, together) = (fast(&config, &two).0, interleave(&config, &two, 2));
    assert_eq!(apart[0], together[0]);
    assert!(sum(&apart[1]) > 0);
    assert_eq!(sum(&together[1]), 0);
}

#[test]
fn a_score_is_kept_in_sixteenths_rounded_down_and_saturated() {
    assert_eq!(score_sixteenths(0.0), 0);
    assert_eq!(score_sixteenths(1.0 / 3.0), 5);
    assert_eq!(score_sixteenths(2.5), 40);
    assert_eq!(score_sixteenths(15.99), 255);
    assert_eq!(score_sixteenths(100.0), 255);
    assert_eq!(score_sixteenths(f32::NAN), 0);
}
