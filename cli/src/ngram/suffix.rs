//! Suffix decoding: Snowflake's Arctic Inference SuffixDecoding, in vLLM as
//! `method: suffix`, replayed exactly at every cap.
//!
//! Read from `csrc/suffix_decoding/suffix_tree.cc` and
//! `arctic_inference/suffix_decoding/cache.py` (snowflakedb/ArcticInference
//! at commit 9d4643881608178f0f58a33d1b61919ca246997f) and vLLM's
//! `vllm/v1/spec_decode/suffix_decoding.py` (vllm-project/vllm at commit
//! 044ac3a07ab371cdbfac2203b0cd12d877f9038f); written here anew.
//!
//! # The rule
//!
//! A [`Tree`] counts, for every string `s` of at most `depth` tokens, its
//! occurrences over the tree's sequences, the one ending at a sequence's
//! end included (it has no next token). Two trees draft:
//!
//! - the **per-request** tree holds the prompt and every output token so
//!   far;
//! - the **global** tree ([`GlobalCache`]) holds responses, not prompts:
//!   the request's own output so far and the outputs of earlier requests,
//!   each as if finished before the next began (file order), the oldest
//!   evicted beyond `cache` requests (`SuffixDecodingCache`'s
//!   `max_cached_requests`; 0: no global tree). A request whose id is
//!   cached already evicts that response first, as vLLM does.
//!
//! At output position `t` the context is the last `min(len, depth)` tokens
//! of the prompt and the output before `t`. In each tree, for `m = 1 ..
//! len(ctx) - 1`, stopping at the first `m` whose suffix of the context is
//! not in the tree, the draft after the match of `m` tokens walks along the
//! first child: its probability starts at 1 and is multiplied, in `f32`,
//! by `count(child) / count(node)` at each step; a token is emitted while
//! that stays at least `min_prob` and while fewer than `min(cap,
//! int(m * factor + offset + 1e-6))` are emitted. The score is the `f32`
//! sum of the emitted probabilities; the best score wins with `>=` (ties go
//! to the longer `m`). The per-request draft wins unless the global one
//! scores strictly higher.
//!
//! Children are ordered by count, and the order decides ties: a new child
//! goes to the back; a child raised from `c` to `c + 1` stays in place
//! when the sibling before it counts more than `c + 1`, else it moves in
//! front of the first sibling of that sibling's equal-count run;
//! lowered from `c` to `c - 1` (eviction) it stays unless the sibling
//! after it also counts `c`, else it moves behind the last of its run.
//!
//! # Every cap
//!
//! A draft at cap `k` is not a prefix of the draft at a larger cap: the
//! match length is chosen on scores of drafts cut at `k`. Each tree's walk
//! is therefore made once per `m` up to the trace's cap, and the choice
//! made at every cap `k` from the prefix sums of its probabilities (the
//! score of a draft cut at `k` is the sum of its first `k` probabilities,
//! added in the same order). [`Outcomes`] holds the resulting draft length
//! and agreement with the output at every cap.
//!
//! # The trees
//!
//! A [`Tree`] is an uncompressed trie of arena nodes (32 bytes each, a
//! hash map from `(parent, token)` to child), with each node's children in
//! a doubly linked list in the order above, and each run of equal-count
//! siblings knowing its first node (as Arctic's groups). Appending a token
//! touches at most `depth` nodes (one per suffix ending there), each in
//! constant time; an eviction walks along a run to find its last node. A sequence's suffixes of
//! every length are its *active* nodes, so matching the context in the
//! per-request tree, and in the global tree up to the output's own length,
//! costs nothing; longer contexts in the global tree are walked from the
//! root. The memory is up to `depth` nodes per token held
//! ([`Tree::bytes`]).

use std::collections::VecDeque;

use rustc_hash::FxHashMap;
use specdec_ingest::trace::Below;

/// The rule's settings (see the [module docs](self)).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SuffixConfig {
    /// The trees' depth: the longest string counted (vLLM's
    /// `suffix_decoding_max_tree_depth`), 2..=256.
    pub depth: usize,
    /// The draft after a match of `m` tokens is at most `m * factor +
    /// offset` long (`suffix_decoding_max_spec_factor`).
    pub factor: f32,
    /// See `factor` (Arctic's `max_spec_offset`; vLLM passes none: 0).
    pub offset: f32,
    /// The least probability of a drafted token
    /// (`suffix_decoding_min_token_prob`).
    pub min_prob: f32,
    /// Responses kept in the global tree
    /// (`suffix_decoding_max_cached_requests`); 0: no global tree.
    pub cache: usize,
    /// The largest cap recorded (`num_speculative_tokens`), 1..=255.
    pub cap: usize,
}

impl SuffixConfig {
    /// vLLM's defaults: depth 24, factor 1, offset 0, least probability
    /// 0.1, 10,000 cached requests, and `num_speculative_tokens` = depth.
    pub const VLLM: SuffixConfig = SuffixConfig {
        depth: 24,
        factor: 1.0,
        offset: 0.0,
        min_prob: 0.1,
        cache: 10_000,
        cap: 24,
    };

    /// The most tokens drafted after a match of `m` tokens, before the
    /// cap: Arctic's `int(m * factor + offset + 1e-6)` (the product and
    /// sum in `f32`, the `1e-6` added in `f64`), at least 0.
    ///
    /// ```
    /// use specdec_metrics_cli::ngram::suffix::SuffixConfig;
    /// let c = SuffixConfig { factor: 0.5, offset: 0.5, ..SuffixConfig::VLLM };
    /// assert_eq!((c.limit(1), c.limit(2), c.limit(3)), (1, 1, 2));
    /// ```
    pub fn limit(&self, m: usize) -> usize {
        let raw = f64::from(m as f32 * self.factor + self.offset) + 1e-6;
        // `as` truncates toward zero like the C++ cast, and saturates
        // (negative and NaN to 0): max(..., 0) included.
        raw as usize
    }
}

const NIL: u32 = u32::MAX;
const ROOT: u32 = 0;

#[derive(Clone, Copy, Debug)]
struct Node {
    count: u32,
    token: u32,
    parent: u32,
    head: u32,
    tail: u32,
    prev: u32,
    next: u32,
    /// The run of equal-count siblings it belongs to (an index into
    /// `Tree::runs`, which holds the run's first node).
    run: u32,
}

impl Node {
    fn new(token: u32, parent: u32) -> Self {
        Self {
            count: 0,
            token,
            parent,
            head: NIL,
            tail: NIL,
            prev: NIL,
            next: NIL,
            run: NIL,
        }
    }
}

/// A sequence of a [`Tree`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seq(u32);

#[derive(Clone, Debug, Default)]
struct Sequence {
    tokens: Vec<u32>,
    /// The nodes of the sequence's suffixes, longest first: after `n`
    /// tokens, lengths `min(n, depth)` down to 1.
    active: VecDeque<u32>,
}

/// A draft: its tokens, each one's probability, the score and the match
/// length it came from.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Draft {
    /// The drafted tokens.
    pub tokens: Vec<u32>,
    /// Each token's probability.
    pub probs: Vec<f32>,
    /// The `f32` sum of `probs`.
    pub score: f32,
    /// The length of the context's suffix matched.
    pub match_len: usize,
}

/// Counts of every string of at most `depth` tokens over the sequences
/// held (see the [module docs](self)).
///
/// ```
/// use specdec_metrics_cli::ngram::suffix::{SuffixConfig, Tree};
/// // X A X B X C X A X C X: after X, A and C occur twice each, but A
/// // came first and C was raised past B only: A is drafted, 2 of 6.
/// let (x, a, b, c) = (0, 1, 2, 3);
/// let mut tree = Tree::new(24);
/// let seq = tree.add_sequence();
/// for t in [x, a, x, b, x, c, x, a, x, c, x] {
///     tree.append(seq, t);
/// }
/// let draft = tree.speculate(&[c, x], 1, &SuffixConfig::VLLM);
/// assert_eq!((draft.tokens, draft.probs, draft.match_len), (vec![a], vec![2.0 / 6.0], 1));
/// ```
#[derive(Clone, Debug)]
pub struct Tree {
    depth: usize,
    nodes: Vec<Node>,
    children: FxHashMap<(u32, u32), u32>,
    free: Vec<u32>,
    seqs: Vec<Option<Sequence>>,
    free_seqs: Vec<u32>,
    /// The first node of each run of equal-count siblings, by run.
    runs: Vec<u32>,
    free_runs: Vec<u32>,
}

impl Tree {
    /// An empty tree counting strings of at most `depth` tokens.
    pub fn new(depth: usize) -> Self {
        Self {
            depth,
            nodes: vec![Node::new(0, NIL)],
            children: FxHashMap::default(),
            free: Vec::new(),
            seqs: Vec::new(),
            free_seqs: Vec::new(),
            runs: Vec::new(),
            free_runs: Vec::new(),
        }
    }

    /// A new, empty sequence.
    pub fn add_sequence(&mut self) -> Seq {
        match self.free_seqs.pop() {
            Some(i) => {
                self.seqs[i as usize] = Some(Sequence::default());
                Seq(i)
            }
            None => {
                self.seqs.push(Some(Sequence::default()));
                Seq(u32::try_from(self.seqs.len() - 1).expect("fewer than 2^32 sequences"))
            }
        }
    }

    /// The number of tokens of `seq`.
    pub fn len_of(&self, seq: Seq) -> usize {
        self.sequence(seq).tokens.len()
    }

    fn sequence(&self, seq: Seq) -> &Sequence {
        self.seqs[seq.0 as usize].as_ref().expect("a live sequence")
    }

    /// Appends `token` to `seq`: one more occurrence of each of its
    /// suffixes of at most `depth` tokens.
    pub fn append(&mut self, seq: Seq, token: u32) {
        let slot = &mut self.seqs[seq.0 as usize];
        let mut active = std::mem::take(&mut slot.as_mut().expect("a live sequence").active);
        active.push_back(ROOT);
        self.nodes[ROOT as usize].count += 1;
        if active.len() > self.depth {
            active.pop_front();
        }
        // Each active node has its own parent (the suffixes differ in
        // length), so the order of these increments does not matter.
        for node in active.iter_mut() {
            *node = match self.children.get(&(*node, token)) {
                Some(&child) => {
                    self.increment(child);
                    child
                }
                None => self.add_child(*node, token),
            };
        }
        let sequence = self.seqs[seq.0 as usize].as_mut().expect("a live sequence");
        sequence.active = active;
        sequence.tokens.push(token);
    }

    /// Removes `seq`: one occurrence fewer of each string it held, in the
    /// order of its suffixes (as Arctic's `remove`).
    pub fn remove(&mut self, seq: Seq) {
        let sequence = self.seqs[seq.0 as usize].take().expect("a live sequence");
        self.free_seqs.push(seq.0);
        let tokens = sequence.tokens;
        for start in 0..tokens.len() {
            self.nodes[ROOT as usize].count -= 1;
            let mut node = ROOT;
            for &token in &tokens[start..tokens.len().min(start + self.depth)] {
                let child = self.children[&(node, token)];
                if self.nodes[child as usize].count > 1 {
                    self.decrement(child);
                    node = child;
                } else {
                    self.leave_run(child);
                    self.unlink(child);
                    // Its run is left: the chain frees the rest.
                    self.nodes[child as usize].run = NIL;
                    self.delete_chain(child);
                    break;
                }
            }
        }
    }

    /// The node of `string`, if the tree holds it.
    fn node_of(&self, string: &[u32]) -> Option<u32> {
        string.iter().try_fold(ROOT, |node, &token| {
            self.children.get(&(node, token)).copied()
        })
    }

    /// The occurrences of `string` (of at most `depth` tokens) counted.
    ///
    /// ```
    /// use specdec_metrics_cli::ngram::suffix::Tree;
    /// let mut tree = Tree::new(3);
    /// let seq = tree.add_sequence();
    /// for t in [1, 2, 1, 2] {
    ///     tree.append(seq, t);
    /// }
    /// assert_eq!((tree.count(&[1, 2]), tree.count(&[2, 1]), tree.count(&[2, 2])), (2, 1, 0));
    /// ```
    pub fn count(&self, string: &[u32]) -> u32 {
        self.node_of(string)
            .map_or(0, |node| self.nodes[node as usize].count)
    }

    /// The children of `string`'s node in their order: `(token, count)`.
    ///
    /// ```
    /// use specdec_metrics_cli::ngram::suffix::Tree;
    /// let mut tree = Tree::new(2);
    /// let seq = tree.add_sequence();
    /// for t in [5, 1, 5, 2, 5, 2] {
    ///     tree.append(seq, t);
    /// }
    /// assert_eq!(tree.children(&[5]), vec![(2, 2), (1, 1)]);
    /// ```
    pub fn children(&self, string: &[u32]) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        if let Some(node) = self.node_of(string) {
            let mut child = self.nodes[node as usize].head;
            while child != NIL {
                let n = &self.nodes[child as usize];
                out.push((n.token, n.count));
                child = n.next;
            }
        }
        out
    }

    /// The bytes the tree holds (nodes, child map, sequences), capacity
    /// counted.
    pub fn bytes(&self) -> usize {
        let map = self.children.capacity() * (std::mem::size_of::<((u32, u32), u32)>() + 1);
        let seqs: usize = self
            .seqs
            .iter()
            .flatten()
            .map(|s| s.tokens.capacity() * 4 + s.active.capacity() * 4)
            .sum();
        self.nodes.capacity() * std::mem::size_of::<Node>()
            + map
            + self.free.capacity() * 4
            + (self.runs.capacity() + self.free_runs.capacity()) * 4
            + self.seqs.capacity() * std::mem::size_of::<Option<Sequence>>()
            + seqs
    }

    /// Tokens held over every sequence.
    pub fn tokens(&self) -> usize {
        self.seqs.iter().flatten().map(|s| s.tokens.len()).sum()
    }

    /// Nodes in use (the root included).
    pub fn nodes(&self) -> usize {
        self.nodes.len() - self.free.len()
    }

    /// Arctic's `speculate` on one tree (a single path, not a tree of
    /// drafts): the best draft over the context's suffixes, at most `cap`
    /// tokens.
    pub fn speculate(&self, context: &[u32], cap: usize, config: &SuffixConfig) -> Draft {
        let context = &context[context.len().saturating_sub(self.depth)..];
        let mut best = Draft::default();
        for m in 1..context.len() {
            let Some(node) = self.node_of(&context[context.len() - m..]) else {
                break;
            };
            let mut draft = Draft {
                match_len: m,
                ..Draft::default()
            };
            self.walk(
                node,
                config.limit(m).min(cap),
                config.min_prob,
                &mut draft.tokens,
                &mut draft.probs,
            );
            draft.score = draft.probs.iter().fold(0.0f32, |s, &p| s + p);
            if draft.score >= best.score {
                best = draft;
            }
        }
        best
    }

    /// The draft after `node`: at most `limit` tokens along the first
    /// children while the probability stays at least `min_prob`.
    fn walk(
        &self,
        mut node: u32,
        limit: usize,
        min_prob: f32,
        tokens: &mut Vec<u32>,
        probs: &mut Vec<f32>,
    ) {
        tokens.clear();
        probs.clear();
        let mut prob = 1.0f32;
        while tokens.len() < limit {
            let n = &self.nodes[node as usize];
            let child = n.head;
            if child == NIL {
                break;
            }
            let c = &self.nodes[child as usize];
            // As Arctic: the ratio in f32, then the product in f32.
            prob *= c.count as f32 / n.count as f32;
            if prob < min_prob {
                break;
            }
            tokens.push(c.token);
            probs.push(prob);
            node = child;
        }
    }

    fn alloc(&mut self, node: Node) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                u32::try_from(self.nodes.len() - 1).expect("fewer than 2^32 nodes")
            }
        }
    }

    /// A new child of `parent` for `token`, counted once, at the back.
    fn add_child(&mut self, parent: u32, token: u32) -> u32 {
        let mut node = Node::new(token, parent);
        node.count = 1;
        let child = self.alloc(node);
        self.children.insert((parent, token), child);
        let tail = self.nodes[parent as usize].tail;
        if tail == NIL {
            let p = &mut self.nodes[parent as usize];
            p.head = child;
            p.tail = child;
        } else {
            self.insert_after(child, tail);
        }
        self.join_run(child);
        child
    }

    /// `node`, about to leave its run (moved, recounted or removed): the
    /// run's first node is the next one, or the run ends.
    fn leave_run(&mut self, node: u32) {
        let n = self.nodes[node as usize];
        let run = n.run as usize;
        if self.runs[run] == node {
            if n.next != NIL && self.nodes[n.next as usize].run == n.run {
                self.runs[run] = n.next;
            } else {
                self.free_runs.push(n.run);
            }
        }
    }

    /// `node`, in its place with its count: joins the run of a neighbour
    /// of equal count (the one before it, else the one after it, as its
    /// first node), or starts one.
    fn join_run(&mut self, node: u32) {
        let n = self.nodes[node as usize];
        let run = if n.prev != NIL && self.nodes[n.prev as usize].count == n.count {
            self.nodes[n.prev as usize].run
        } else if n.next != NIL && self.nodes[n.next as usize].count == n.count {
            let run = self.nodes[n.next as usize].run;
            self.runs[run as usize] = node;
            run
        } else {
            match self.free_runs.pop() {
                Some(run) => {
                    self.runs[run as usize] = node;
                    run
                }
                None => {
                    self.runs.push(node);
                    (self.runs.len() - 1) as u32
                }
            }
        };
        self.nodes[node as usize].run = run;
    }

    /// Frees `node` and the chain below it (a node counted once has at
    /// most one child), with their map entries.
    fn delete_chain(&mut self, mut node: u32) {
        loop {
            let n = self.nodes[node as usize];
            // Each below the first is an only child: a run of its own.
            if n.run != NIL && self.runs[n.run as usize] == node {
                self.free_runs.push(n.run);
            }
            self.children.remove(&(n.parent, n.token));
            self.free.push(node);
            if n.head == NIL {
                break;
            }
            node = n.head;
        }
    }

    fn increment(&mut self, node: u32) {
        let n = self.nodes[node as usize];
        let c = n.count;
        if n.prev == NIL || self.nodes[n.prev as usize].count > c + 1 {
            self.leave_run(node);
            self.nodes[node as usize].count = c + 1;
            self.join_run(node);
            return;
        }
        // In front of the first of the previous sibling's run.
        let target = self.runs[self.nodes[n.prev as usize].run as usize];
        self.leave_run(node);
        self.unlink(node);
        self.nodes[node as usize].count = c + 1;
        self.insert_before(node, target);
        self.join_run(node);
    }

    fn decrement(&mut self, node: u32) {
        let n = self.nodes[node as usize];
        let c = n.count;
        if n.next == NIL || self.nodes[n.next as usize].count < c {
            self.leave_run(node);
            self.nodes[node as usize].count = c - 1;
            self.join_run(node);
            return;
        }
        // Behind the last of its run.
        let mut target = n.next;
        loop {
            let after = self.nodes[target as usize].next;
            if after == NIL || self.nodes[after as usize].count != c {
                break;
            }
            target = after;
        }
        self.leave_run(node);
        self.unlink(node);
        self.nodes[node as usize].count = c - 1;
        self.insert_after(node, target);
        self.join_run(node);
    }

    fn unlink(&mut self, node: u32) {
        let n = self.nodes[node as usize];
        if n.prev == NIL {
            self.nodes[n.parent as usize].head = n.next;
        } else {
            self.nodes[n.prev as usize].next = n.next;
        }
        if n.next == NIL {
            self.nodes[n.parent as usize].tail = n.prev;
        } else {
            self.nodes[n.next as usize].prev = n.prev;
        }
        let n = &mut self.nodes[node as usize];
        n.prev = NIL;
        n.next = NIL;
    }

    fn insert_before(&mut self, node: u32, target: u32) {
        let t = self.nodes[target as usize];
        if t.prev == NIL {
            self.nodes[t.parent as usize].head = node;
        } else {
            self.nodes[t.prev as usize].next = node;
        }
        self.nodes[target as usize].prev = node;
        let n = &mut self.nodes[node as usize];
        n.prev = t.prev;
        n.next = target;
    }

    fn insert_after(&mut self, node: u32, target: u32) {
        let t = self.nodes[target as usize];
        if t.next == NIL {
            self.nodes[t.parent as usize].tail = node;
        } else {
            self.nodes[t.next as usize].prev = node;
        }
        self.nodes[target as usize].next = node;
        let n = &mut self.nodes[node as usize];
        n.next = t.next;
        n.prev = target;
    }

    /// The node of `seq`'s suffix of `m` tokens (`1 <= m <= min(len,
    /// depth)`).
    fn suffix_node(&self, seq: Seq, m: usize) -> u32 {
        let active = &self.sequence(seq).active;
        active[active.len() - m]
    }
}

/// One tree's choice at one cap: the best score, the draft's length and
/// how many of its tokens the output continues with, the match length.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Choice {
    /// The draft's score (0 for an empty draft).
    pub score: f32,
    /// Its length, at most the cap.
    pub len: u8,
    /// How many of its first tokens agree with the output.
    pub agree: u8,
    /// The context's suffix matched (the largest tried when every draft
    /// is empty; 0 when none was).
    pub m: u8,
}

/// What a position's drafts were: per-`m` tokens and prefix sums.
#[derive(Default)]
struct Scratch {
    tokens: Vec<u32>,
    probs: Vec<f32>,
    sums: Vec<f32>,
}

/// One tree's choices at caps `1..=n` at one position, where beyond `n`
/// (the longest draft) the choice is the one at `n`. `node_of(m)` is the
/// node of the context's suffix of `m` tokens, for `m = 1..ctx_len - 1`,
/// stopping at the first `None`; `truth` is the output from the position
/// on. Appends to `out`.
fn choose(
    tree: &Tree,
    config: &SuffixConfig,
    ctx_len: usize,
    mut node_of: impl FnMut(usize) -> Option<u32>,
    truth: &[u32],
    scratch: &mut Scratch,
    out: &mut Vec<Choice>,
) {
    let cap = config.cap;
    let base = out.len();
    out.resize(base + cap, Choice::default());
    let best = &mut out[base..];
    let mut longest = 0;
    for m in 1..ctx_len {
        let Some(node) = node_of(m) else {
            break;
        };
        tree.walk(
            node,
            config.limit(m).min(cap),
            config.min_prob,
            &mut scratch.tokens,
            &mut scratch.probs,
        );
        scratch.sums.clear();
        let mut sum = 0.0f32;
        for &p in &scratch.probs {
            sum += p;
            scratch.sums.push(sum);
        }
        let len = scratch.tokens.len();
        longest = longest.max(len);
        let agree = scratch
            .tokens
            .iter()
            .zip(truth)
            .take_while(|(a, b)| a == b)
            .count();
        for (k, best) in (1..=cap).zip(best.iter_mut()) {
            let i = k.min(len);
            let score = if i == 0 { 0.0 } else { scratch.sums[i - 1] };
            if score >= best.score {
                *best = Choice {
                    score,
                    len: i as u8,
                    agree: agree.min(i) as u8,
                    m: m as u8,
                };
            }
        }
    }
    out.truncate(base + longest.max(1));
}

/// The per-request tree's choices at every position of one request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LocalPass {
    choices: Vec<Choice>,
    /// `ends[j]`: where position `j + 1`'s choices end in `choices`.
    ends: Vec<u32>,
}

impl LocalPass {
    fn at(&self, j: usize) -> &[Choice] {
        let start = if j == 0 { 0 } else { self.ends[j - 1] as usize };
        &self.choices[start..self.ends[j] as usize]
    }

    /// The positions covered.
    pub fn positions(&self) -> usize {
        self.ends.len()
    }
}

/// The per-request tree's part of one request (independent of every other
/// request): its prompt, then its output token by token, choosing at each
/// position `1..output.len()`.
///
/// ```
/// use specdec_metrics_cli::ngram::suffix::{SuffixConfig, local_pass};
/// let pass = local_pass(&SuffixConfig::VLLM, &[1, 2, 3], &[1, 2, 3, 4]);
/// assert_eq!(pass.positions(), 3);
/// ```
pub fn local_pass(config: &SuffixConfig, prompt: &[u32], output: &[u32]) -> LocalPass {
    let mut tree = Tree::new(config.depth);
    let seq = tree.add_sequence();
    for &t in prompt {
        tree.append(seq, t);
    }
    let mut pass = LocalPass::default();
    let mut scratch = Scratch::default();
    for t in 1..output.len() {
        tree.append(seq, output[t - 1]);
        let ctx_len = (prompt.len() + t).min(config.depth);
        choose(
            &tree,
            config,
            ctx_len,
            |m| Some(tree.suffix_node(seq, m)),
            &output[t..],
            &mut scratch,
            &mut pass.choices,
        );
        pass.ends.push(pass.choices.len() as u32);
    }
    pass
}

/// A draft's score in the trace's scale: sixteenths of a token, rounded
/// down, saturated at 255.
///
/// ```
/// use specdec_metrics_cli::ngram::suffix::score_sixteenths;
/// assert_eq!((score_sixteenths(0.0), score_sixteenths(1.0 / 3.0), score_sixteenths(2.5)), (0, 5, 40));
/// assert_eq!((score_sixteenths(16.0), score_sixteenths(f32::NAN)), (255, 0));
/// ```
pub fn score_sixteenths(score: f32) -> u8 {
    // `as` saturates (and reads NaN as 0).
    (score * specdec_ingest::trace::SCORE_PER_TOKEN) as u8
}

/// A request's outcomes at every cap: the arrays at the trace's cap and
/// the outcomes below it where they differ (the trace format's `below`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcomes {
    /// The draft's length at the cap, by position.
    pub proposal: Vec<u8>,
    /// How many of its tokens hold.
    pub matched: Vec<u8>,
    /// The match length of the draft at the cap (0: no draft).
    pub match_len: Vec<u8>,
    /// The draft's score at the cap in sixteenths of a token, rounded
    /// down and saturated at 255 (0: no draft): the trace's `score`.
    pub score: Vec<u8>,
    /// Positions and caps where a smaller cap changes the outcome.
    pub below: Vec<Below>,
}

impl Outcomes {
    /// Draft length and tokens accepted at position index `j` and cap `k`
    /// (`1 <= k <=` the trace's cap), as the replay reads them.
    pub fn at(&self, j: usize, k: usize) -> (usize, usize) {
        let entry = self
            .below
            .iter()
            .find(|b| b.position as usize == j && usize::from(b.cap) >= k);
        let (l, m) = match entry {
            Some(b) => (b.proposal, b.matched),
            None => (self.proposal[j], self.matched[j]),
        };
        (k.min(usize::from(l)), k.min(usize::from(m)))
    }

    /// Adds a position whose outcome at cap `k` is `by_cap[k - 1]` (draft
    /// length, agreement, match length), `k = 1..=by_cap.len()`, and
    /// whose draft at the cap scores `score`.
    fn push(&mut self, by_cap: &[(u8, u8, u8)], score: f32) {
        let j = self.proposal.len() as u32;
        let cap = by_cap.len();
        let (top_l, top_a, top_m) = by_cap[cap - 1];
        self.proposal.push(top_l);
        self.matched.push(top_a);
        self.match_len.push(if top_l == 0 { 0 } else { top_m });
        self.score.push(if top_l == 0 {
            0
        } else {
            score_sixteenths(score)
        });
        let start = self.below.len();
        let (mut l, mut a) = (top_l, top_a);
        for k in (1..cap).rev() {
            let (lk, ak, _) = by_cap[k - 1];
            let kk = k as u8;
            if kk.min(l) != lk || kk.min(a) != ak {
                self.below.push(Below {
                    position: j,
                    cap: kk,
                    proposal: lk,
                    matched: ak,
                });
                (l, a) = (lk, ak);
            }
        }
        self.below[start..].reverse();
    }
}

/// The global tree in file order: each request's output enters it as it
/// is generated, and stays until `cache` later requests have started.
///
/// ```
/// use specdec_metrics_cli::ngram::suffix::{GlobalCache, SuffixConfig, local_pass};
/// let config = SuffixConfig { depth: 8, cap: 4, ..SuffixConfig::VLLM };
/// let mut cache = GlobalCache::new(config);
/// let output: Vec<u32> = (10..20).collect();
/// // The first request has nothing to copy; the second, another prompt
/// // and the same output, drafts the first's output from position 2 on.
/// for (id, prompt, drafts) in [("a", [1, 2], false), ("b", [3, 4], true)] {
///     let local = local_pass(&config, &prompt, &output);
///     let outcomes = cache.request(id, &prompt, prompt.len(), &output, &local);
///     assert_eq!(outcomes.at(1, 4).1 > 0, drafts);
///     assert_eq!(outcomes.proposal.len(), output.len() - 1);
/// }
/// assert_eq!((cache.cached(), cache.tree().tokens()), (2, 20));
/// ```
#[derive(Clone, Debug)]
pub struct GlobalCache {
    config: SuffixConfig,
    tree: Tree,
    /// Cached responses, oldest first: (request id, sequence).
    order: VecDeque<(String, Seq)>,
    scratch_ctx: Vec<u32>,
    peak_bytes: usize,
    peak_nodes: usize,
}

impl GlobalCache {
    /// An empty cache.
    pub fn new(config: SuffixConfig) -> Self {
        Self {
            config,
            tree: Tree::new(config.depth),
            order: VecDeque::new(),
            scratch_ctx: Vec::new(),
            peak_bytes: 0,
            peak_nodes: 0,
        }
    }

    /// The most bytes the tree held after a request ([`Tree::bytes`]).
    pub fn peak_bytes(&self) -> usize {
        self.peak_bytes
    }

    /// The most nodes the tree held after a request.
    pub fn peak_nodes(&self) -> usize {
        self.peak_nodes
    }

    /// The settings.
    pub fn config(&self) -> SuffixConfig {
        self.config
    }

    /// The global tree.
    pub fn tree(&self) -> &Tree {
        &self.tree
    }

    /// Responses held.
    pub fn cached(&self) -> usize {
        self.order.len()
    }

    /// The next request in file order: `prompt_tail` is at least the last
    /// `depth - 1` tokens of its prompt (all of a shorter one),
    /// `prompt_len` the whole prompt's length, `local` its
    /// [`local_pass`]. Returns its outcomes at every cap; its whole output
    /// is then in the tree (as if it finished before the next request).
    pub fn request(
        &mut self,
        id: &str,
        prompt_tail: &[u32],
        prompt_len: usize,
        output: &[u32],
        local: &LocalPass,
    ) -> Outcomes {
        let own = (self.config.cache > 0).then(|| self.start(id));
        let mut outcomes = Outcomes::default();
        let mut work = Work::default();
        for t in 1..output.len() {
            let part = Part {
                prompt_tail,
                prompt_len,
                output,
                local,
            };
            self.position(own, &part, t, &mut work, &mut outcomes);
        }
        self.finish(own, output);
        outcomes
    }

    /// The request's output up to `t` is in the trees (its own sequence
    /// `own` in the global one): appends output token `t - 1` to `own`,
    /// then chooses at position `t`.
    fn position(
        &mut self,
        own: Option<Seq>,
        part: &Part<'_>,
        t: usize,
        work: &mut Work,
        outcomes: &mut Outcomes,
    ) {
        let config = self.config;
        let output = part.output;
        if let Some(own) = own {
            self.tree.append(own, output[t - 1]);
        }
        let ctx_len = (part.prompt_len + t).min(config.depth);
        // The context, for suffixes longer than the output so far.
        let ctx = &mut self.scratch_ctx;
        ctx.clear();
        if ctx_len > t {
            let from_prompt = ctx_len - t;
            ctx.extend_from_slice(&part.prompt_tail[part.prompt_tail.len() - from_prompt..]);
            ctx.extend_from_slice(&output[..t]);
        }
        let tree = &self.tree;
        let ctx = &*ctx;
        work.global.clear();
        choose(
            tree,
            &config,
            ctx_len,
            |m| match own {
                Some(own) if m <= t => Some(tree.suffix_node(own, m)),
                _ if m <= t => tree.node_of(&output[t - m..t]),
                _ => tree.node_of(&ctx[ctx_len - m..]),
            },
            &output[t..],
            &mut work.scratch,
            &mut work.global,
        );
        let mine = part.local.at(t - 1);
        let global = &work.global;
        work.by_cap.clear();
        let mut top = 0.0;
        for k in 1..=config.cap {
            let l = mine[k.min(mine.len()) - 1];
            let g = global[k.min(global.len()) - 1];
            let w = if l.score >= g.score { l } else { g };
            work.by_cap.push((w.len, w.agree, w.m));
            top = w.score;
        }
        outcomes.push(&work.by_cap, top);
    }

    /// The request's last output token enters its own sequence: it has
    /// finished.
    fn finish(&mut self, own: Option<Seq>, output: &[u32]) {
        if let (Some(own), Some(&last)) = (own, output.last()) {
            self.tree.append(own, last);
        }
        self.peak_bytes = self.peak_bytes.max(self.tree.bytes());
        self.peak_nodes = self.peak_nodes.max(self.tree.nodes());
    }

    /// The experiment of [`interleaved`]: `parts` with `batch` in flight.
    fn interleave(&mut self, parts: &[Part<'_>], ids: &[String], batch: usize) -> Vec<Outcomes> {
        let mut outcomes: Vec<Outcomes> = parts.iter().map(|_| Outcomes::default()).collect();
        let mut work = Work::default();
        // In flight: (request, its sequence, the next position).
        let mut running: Vec<(usize, Option<Seq>, usize)> = Vec::new();
        let mut next = 0;
        loop {
            while running.len() < batch && next < parts.len() {
                let own = (self.config.cache > 0).then(|| self.start(&ids[next]));
                running.push((next, own, 1));
                next += 1;
            }
            if running.is_empty() {
                break;
            }
            // One engine step: each request in flight gains one token, in
            // the order they were admitted.
            for (r, own, t) in &mut running {
                let part = &parts[*r];
                if *t < part.output.len() {
                    self.position(*own, part, *t, &mut work, &mut outcomes[*r]);
                }
                *t += 1;
            }
            running.retain(|&(r, own, t)| {
                let done = t >= parts[r].output.len();
                if done {
                    self.finish(own, parts[r].output);
                }
                !done
            });
        }
        outcomes
    }

    /// Gives request `id` a sequence of its own, evicting its earlier
    /// response and the oldest beyond the cache.
    fn start(&mut self, id: &str) -> Seq {
        if let Some(i) = self.order.iter().position(|(other, _)| other == id) {
            let (_, seq) = self.order.remove(i).expect("found");
            self.tree.remove(seq);
        }
        let seq = self.tree.add_sequence();
        self.order.push_back((id.to_owned(), seq));
        while self.order.len() > self.config.cache {
            let (_, oldest) = self.order.pop_front().expect("more than the cache");
            self.tree.remove(oldest);
        }
        seq
    }
}

/// One request's part of the global pass: what [`GlobalCache::request`]
/// takes.
struct Part<'a> {
    prompt_tail: &'a [u32],
    prompt_len: usize,
    output: &'a [u32],
    local: &'a LocalPass,
}

/// Buffers reused from position to position.
#[derive(Default)]
struct Work {
    scratch: Scratch,
    global: Vec<Choice>,
    by_cap: Vec<(u8, u8, u8)>,
}

/// One request for [`interleaved`]: id, prompt tail and length, output,
/// its [`local_pass`].
pub type Request<'a> = (&'a str, &'a [u32], usize, &'a [u32], &'a LocalPass);

/// An experiment, not the trace `ngram` writes: the global tree as an
/// engine with `batch` requests in flight fills it, each step adding one
/// token of every request in flight (in admission order) before the next,
/// so that a request also drafts from the partial outputs of the others
/// running with it. Admission in file order as slots free up; `cache` must
/// be 0 or at least `batch` (a response is not evicted while its request
/// runs).
///
/// # Panics
///
/// When `config.cache` is between 1 and `batch - 1`.
///
/// ```
/// use specdec_metrics_cli::ngram::suffix::{SuffixConfig, interleaved, local_pass};
/// let config = SuffixConfig { depth: 8, cap: 4, ..SuffixConfig::VLLM };
/// let output: Vec<u32> = (10..20).collect();
/// let (pa, pb) = ([1, 2], [3, 4]);
/// let (la, lb) = (local_pass(&config, &pa, &output), local_pass(&config, &pb, &output));
/// let requests = [("a", &pa[..], 2, &output[..], &la), ("b", &pb[..], 2, &output[..], &lb)];
/// // Side by side, b sees only as much of a's output as its own: no draft.
/// let both = interleaved(config, &requests, 2);
/// assert!(both[1].matched.iter().all(|&m| m == 0));
/// // One at a time, b drafts a's whole output.
/// let one = interleaved(config, &requests, 1);
/// assert!(one[1].matched[1..].iter().all(|&m| m > 0));
/// ```
pub fn interleaved(config: SuffixConfig, requests: &[Request<'_>], batch: usize) -> Vec<Outcomes> {
    assert!(
        config.cache == 0 || config.cache >= batch,
        "the cache holds every request in flight"
    );
    let parts: Vec<Part<'_>> = requests
        .iter()
        .map(|&(_, prompt_tail, prompt_len, output, local)| Part {
            prompt_tail,
            prompt_len,
            output,
            local,
        })
        .collect();
    let ids: Vec<String> = requests.iter().map(|r| r.0.to_owned()).collect();
    GlobalCache::new(config).interleave(&parts, &ids, batch.max(1))
}

#[cfg(test)]
#[path = "suffix_tests.rs"]
mod tests;
