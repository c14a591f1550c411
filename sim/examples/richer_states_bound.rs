//! What per-step states could give at best with more signals than
//! `per-state` reads: the best fixed plan (one length per state) in
//! hindsight over richer states of an n-gram trace, one request in flight,
//! beside per-step hindsight (`oracle`), both over the trace's best static
//! `k`.
//!
//! ```sh
//! cargo run --release -p specdec-sim --example richer_states_bound -- \
//!     8 0.1 traces/*.jsonl
//! ```
//!
//! Arguments: `K`, the cost per drafted token `c` (a step costs `1 + c d`),
//! then one or more traces (`ngram`'s JSON Lines); first, `--requests N`
//! replays only each trace's first `N` requests, and `--plan-from TRACE`
//! searches the plans on that trace alone and judges them on the others
//! (held out: what a plan learned elsewhere earns, no longer hindsight),
//! and `--signals LIST` replaces the richer columns with one: `per-state`'s
//! first two signals and the listed ones alone (comma-separated: `n`,
//! `outcome`, `full`, `proposal`, `copy`, `progress`, the signals below in
//! their order; `--signals outcome` is `per-state`'s states). Every request
//! is replayed alone, one after another (batch 1: a step's cost is its
//! request's), and
//! a request-step drafts `d = min(k, L)` and accepts `min(d, m)`.
//!
//! A state is what an engine knows when it drafts, read from the request's
//! own past (causal): `per-state`'s first two signals (whether the match
//! was shorter than the drafter's longest `n`; the recent matched length,
//! cut at 1, 4 and 16 tokens: the mean, weight 1/4 on the newest step, of
//! the tokens the request's copy had held by each step, what the output
//! has said by then; it reads the previous outcome too since this example
//! picked it), and for the richer states also
//!
//! - the matched `n` itself;
//! - the previous drafting step's outcome: none yet, all drafted accepted,
//!   some, none;
//! - how many drafting steps in a row accepted all they drafted (0 to 4 or
//!   more);
//! - the proposal length `L` (cut at 2, 4, 8, 16 and 32);
//! - the tokens the request's current copy has held so far (the tokens
//!   accepted and the bonus token where it went on with the proposal,
//!   over the steps that went on with it; cut at 1, 2, 4, 8, 16 and 32);
//! - and in the last column the tokens generated so far (cut at 64, 256,
//!   1,024 and 4,096).
//!
//! The plan is found in two rounds. First Dinkelbach's iteration: replay,
//! take the goodput `λ` (tokens per unit of cost), give every state the
//! length of the largest `Σ min(d, m) − λ c d` over the request-steps it
//! was visited at, replay again, until the plan repeats (at most 8 times).
//! Those one-step values do not see that a longer draft skips positions,
//! so then coordinate ascent on the replay itself: each state in turn
//! (the most visited first) takes the length, of every one up to 8 and
//! then about an eighth apart, that earns most with the others held,
//! replaying only the requests that visit it, until a sweep moves none.
//! A state never visited drafts the best static `k`, where the search
//! starts. A plan per trace, chosen on the replay it is judged on and
//! with hundreds of states, is hindsight twice over: it bounds from above
//! what a controller reading these signals could earn with one length per
//! state (up to the
//! search, which finds a good plan, not always the best).

use std::collections::HashMap;
use std::io::Write as _;
use std::path::Path;

use specdec_sim::corpus::Spread;
use specdec_sim::trace_set::{TraceSet, TracedRequest};

/// Coordinate ascent's most sweeps over the states (it stops at the first
/// that moves none).
const SWEEPS: usize = 20;

const USAGE: &str = "usage: richer_states_bound [--requests N] [--plan-from TRACE] [--signals LIST] K COST TRACE...";

fn main() {
    specdec_sim::stdio::finish("richer_states_bound", run());
}

/// Which signals make a state.
#[derive(Clone, Copy, PartialEq)]
enum Signals {
    /// One state: a static length.
    None,
    /// `per-state`'s two: a short match, the recent matched length.
    PerState,
    /// The richer states of the module docs.
    Rich,
    /// Those and the tokens generated so far.
    RichProgress,
    /// `per-state`'s two and the signals of `--signals` (bits of
    /// [`ADDED`]).
    Chosen(u8),
}

/// The signals `--signals` adds to `per-state`'s two, by name: the matched
/// `n`, the previous outcome, the steps in a row that accepted all they
/// drafted, the proposal length, the tokens the copy has held so far, the
/// tokens generated so far.
const ADDED: [&str; 6] = ["n", "outcome", "full", "proposal", "copy", "progress"];

/// The bits of [`ADDED`] a comma-separated list names.
fn chosen(list: &str) -> Result<u8, String> {
    list.split(',').try_fold(0, |mask, name| {
        let bit = ADDED
            .iter()
            .position(|&a| a == name)
            .ok_or_else(|| format!("--signals: {name:?} is not one of {}", ADDED.join(", ")))?;
        Ok(mask | 1 << bit)
    })
}

/// What a request's past says at a drafting step.
#[derive(Clone, Copy, Default)]
struct Past {
    /// 0 none yet, 1 all accepted, 2 some, 3 none.
    outcome: u64,
    full_in_a_row: u64,
    recent: f64,
    /// The tokens the current copy has held so far.
    copied: usize,
}

fn cut(x: f64, edges: &[f64]) -> u64 {
    edges.iter().filter(|&&e| x >= e).count() as u64
}

fn state(signals: Signals, past: &Past, at: usize, proposal: usize, n: usize, max_n: usize) -> u64 {
    let recent = cut(past.recent, &[1.0, 4.0, 16.0]);
    let short = u64::from(n < max_n);
    match signals {
        Signals::None => 0,
        Signals::PerState => short + 2 * recent,
        Signals::Chosen(mask) => {
            // Each signal's values, and its value here.
            let parts = [
                (256, n as u64),
                (4, past.outcome),
                (5, past.full_in_a_row.min(4)),
                (6, cut(proposal as f64, &[2.0, 4.0, 8.0, 16.0, 32.0])),
                (
                    7,
                    cut(past.copied as f64, &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0]),
                ),
                (5, cut(at as f64, &[64.0, 256.0, 1024.0, 4096.0])),
            ];
            (0..ADDED.len()).filter(|bit| mask >> bit & 1 == 1).fold(
                short + 2 * recent,
                |s, bit| {
                    let (values, value) = parts[bit];
                    s * values + value
                },
            )
        }
        Signals::Rich | Signals::RichProgress => {
            let copy = cut(past.copied as f64, &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0]);
            let mut s = n as u64;
            s = s * 4 + past.outcome;
            s = s * 5 + past.full_in_a_row.min(4);
            s = s * 4 + recent;
            s = s * 6 + cut(proposal as f64, &[2.0, 4.0, 8.0, 16.0, 32.0]);
            s = s * 7 + copy;
            if signals == Signals::RichProgress {
                s = s * 5 + cut(at as f64, &[64.0, 256.0, 1024.0, 4096.0]);
            }
            s
        }
    }
}

/// A replay of `requests` one at a time: tokens and cost, and when asked
/// every drafting step's state, `L` and `m`.
struct Replay<'a> {
    requests: &'a [TracedRequest],
    k: usize,
    c: f64,
    max_n: usize,
}

/// What one request's replay gave: tokens, cost, the states it visited
/// (sorted, each once).
type Outcome = (f64, f64, Vec<u64>);

impl<'a> Replay<'a> {
    /// A replay of the first `limit` requests of `traces`.
    fn of(traces: &'a TraceSet, k: usize, c: f64, limit: usize) -> Self {
        let requests = traces.requests();
        Replay {
            requests: &requests[..requests.len().min(limit)],
            k,
            c,
            max_n: traces.meta().map_or(0, |m| m.max_n),
        }
    }

    /// The best static length and its goodput.
    fn best_static(&self) -> (usize, f64) {
        (0..=self.k)
            .map(|s| (s, self.run(Signals::None, &HashMap::new(), s, None)))
            .max_by(|x, y| x.1.total_cmp(&y.1))
            .unwrap_or((0, f64::NAN))
    }

    /// The goodput of `plan` (a state it does not name drafts `rest`),
    /// and when asked every drafting step's state, `L` and `m`.
    fn run(
        &self,
        signals: Signals,
        plan: &HashMap<u64, usize>,
        rest: usize,
        mut seen: Option<&mut Vec<(u64, usize, usize)>>,
    ) -> f64 {
        let (mut tokens, mut cost) = (0.0, 0.0);
        for request in self.requests {
            let (t, c) = self.request(request, signals, plan, rest, &mut |s, l, m| {
                if let Some(seen) = seen.as_deref_mut() {
                    seen.push((s, l, m));
                }
            });
            (tokens, cost) = (tokens + t, cost + c);
        }
        tokens / cost
    }

    /// One request's replay under `plan`: its tokens and cost; `step` sees
    /// every drafting step's state, `L` and `m`.
    fn request(
        &self,
        request: &TracedRequest,
        signals: Signals,
        plan: &HashMap<u64, usize>,
        rest: usize,
        step: &mut dyn FnMut(u64, usize, usize),
    ) -> (f64, f64) {
        let (mut tokens, mut cost) = (0.0, 0.0);
        let positions = &request.positions;
        let (mut at, mut past) = (0, Past::default());
        while at < positions.len() {
            let p = positions[at];
            let (l, m) = (usize::from(p.proposal), usize::from(p.matched));
            if l == 0 {
                // Nothing to draft: one token for one step, and no copy.
                (tokens, cost, at) = (tokens + 1.0, cost + 1.0, at + 1);
                past.copied = 0;
                past.recent *= 0.75;
                continue;
            }
            let s = state(signals, &past, at, l, usize::from(p.ngram), self.max_n);
            let d = plan.get(&s).copied().unwrap_or(rest).min(l);
            let a = d.min(m);
            step(s, l, m);
            tokens += (a + 1) as f64;
            cost += 1.0 + self.c * d as f64;
            if d > 0 {
                past.outcome = if a == d {
                    1
                } else if a > 0 {
                    2
                } else {
                    3
                };
                past.full_in_a_row = if a == d { past.full_in_a_row + 1 } else { 0 };
            }
            // What the output says by now of the copy (what per-state
            // reads): the tokens it has held so far, at most `K`, or what
            // this proposal held where the copy stopped.
            let known = if m > a || a == l {
                past.copied += a + 1;
                past.copied.min(l.min(self.k))
            } else {
                past.copied = 0;
                a
            };
            past.recent = 0.75 * past.recent + 0.25 * known as f64;
            at += a + 1;
        }
        (tokens, cost)
    }

    fn outcome(
        &self,
        request: &TracedRequest,
        signals: Signals,
        plan: &HashMap<u64, usize>,
        rest: usize,
    ) -> Outcome {
        let mut visited = Vec::new();
        let (t, c) = self.request(request, signals, plan, rest, &mut |s, _, _| visited.push(s));
        visited.sort_unstable();
        visited.dedup();
        (t, c, visited)
    }

    /// Per-step hindsight: each step drafts what holds (at most `K`).
    fn oracle(&self) -> f64 {
        let (mut tokens, mut cost) = (0.0, 0.0);
        for request in self.requests {
            let mut at = 0;
            while let Some(p) = request.positions.get(at) {
                let d = usize::from(p.matched.min(p.proposal)).min(self.k);
                tokens += (d + 1) as f64;
                cost += 1.0 + self.c * d as f64;
                at += d + 1;
            }
        }
        tokens / cost
    }

    /// The lengths coordinate ascent tries: every one up to 8, then about
    /// an eighth apart.
    fn lengths(&self) -> Vec<usize> {
        let mut lengths: Vec<usize> = (0..=self.k.min(8)).collect();
        let mut len = 8;
        while len < self.k {
            len = (len + len.div_ceil(8).max(2)).min(self.k);
            lengths.push(len);
        }
        lengths
    }

    /// The best fixed plan found for `signals`, starting from every state
    /// at the best static length `start`: its goodput and its states.
    fn best_plan(&self, signals: Signals, start: usize) -> (f64, usize) {
        let (goodput, plan) = self.search(signals, start);
        (goodput, plan.len())
    }

    /// The best fixed plan found and its goodput.
    fn search(&self, signals: Signals, start: usize) -> (f64, HashMap<u64, usize>) {
        // Dinkelbach's iteration on one-step values.
        let mut plan = HashMap::new();
        let mut best = (self.run(signals, &plan, start, None), plan.clone());
        for _ in 0..8 {
            let mut seen = Vec::new();
            let lambda = self.run(signals, &plan, start, Some(&mut seen));
            let mut values: HashMap<u64, Vec<f64>> = HashMap::new();
            for (s, l, m) in seen {
                let row = values.entry(s).or_insert_with(|| vec![0.0; self.k + 1]);
                for (k, v) in row.iter_mut().enumerate() {
                    let d = k.min(l);
                    *v += d.min(m) as f64 - lambda * self.c * d as f64;
                }
            }
            let next: HashMap<u64, usize> = values
                .iter()
                .map(|(&s, row)| {
                    let k = (0..row.len())
                        .max_by(|&x, &y| row[x].total_cmp(&row[y]).then(y.cmp(&x)))
                        .unwrap_or(0);
                    (s, k)
                })
                .collect();
            if next == plan {
                break;
            }
            plan = next;
            let goodput = self.run(signals, &plan, start, None);
            if goodput > best.0 {
                best = (goodput, plan.clone());
            }
        }
        // Then coordinate ascent on the replay itself: a state's length
        // changes only the requests that visit it.
        let plan = &mut best.1;
        let mut outcomes: Vec<Outcome> = self
            .requests
            .iter()
            .map(|r| self.outcome(r, signals, plan, start))
            .collect();
        let mut visitors: HashMap<u64, Vec<usize>> = HashMap::new();
        for (i, (_, _, visited)) in outcomes.iter().enumerate() {
            for &s in visited {
                visitors.entry(s).or_default().push(i);
            }
        }
        let (mut tokens, mut cost) = outcomes
            .iter()
            .fold((0.0, 0.0), |(t, c), o| (t + o.0, c + o.1));
        let lengths = self.lengths();
        for _ in 0..SWEEPS {
            let mut states: Vec<(usize, u64)> =
                visitors.iter().map(|(&s, v)| (v.len(), s)).collect();
            states.sort_unstable_by(|x, y| y.cmp(x));
            let mut moved = false;
            for (_, s) in states {
                let Some(requests) = visitors.get(&s).cloned() else {
                    continue;
                };
                let current = plan.get(&s).copied().unwrap_or(start);
                let (old_t, old_c) = requests.iter().fold((0.0, 0.0), |(t, c), &i| {
                    (t + outcomes[i].0, c + outcomes[i].1)
                });
                let mut here: (f64, usize, Option<Vec<Outcome>>) = (tokens / cost, current, None);
                for &len in &lengths {
                    if len == current {
                        continue;
                    }
                    plan.insert(s, len);
                    let new: Vec<Outcome> = requests
                        .iter()
                        .map(|&i| self.outcome(&self.requests[i], signals, plan, start))
                        .collect();
                    let (t, c) = new.iter().fold((0.0, 0.0), |(t, c), o| (t + o.0, c + o.1));
                    let goodput = (tokens - old_t + t) / (cost - old_c + c);
                    if goodput > here.0 * (1.0 + 1e-12) {
                        here = (goodput, len, Some(new));
                    }
                }
                plan.insert(s, here.1);
                let Some(new) = here.2 else {
                    continue;
                };
                moved = true;
                for (&i, outcome) in requests.iter().zip(new) {
                    for s in &outcomes[i].2 {
                        if let Some(v) = visitors.get_mut(s) {
                            v.retain(|&j| j != i);
                        }
                    }
                    for &s in &outcome.2 {
                        visitors.entry(s).or_default().push(i);
                    }
                    tokens += outcome.0 - outcomes[i].0;
                    cost += outcome.1 - outcomes[i].1;
                    outcomes[i] = outcome;
                }
                visitors.retain(|_, v| !v.is_empty());
            }
            if !moved {
                break;
            }
        }
        let goodput = self.run(signals, plan, start, None);
        (goodput, best.1)
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut limit = usize::MAX;
    let mut plan_from = None;
    let mut added = None;
    while args.first().is_some_and(|a| a.starts_with("--")) {
        let value = args.get(1).ok_or(USAGE)?.clone();
        match args[0].as_str() {
            "--requests" => {
                limit = value
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .ok_or(format!("--requests: a count of 1 or more: {USAGE}"))?;
            }
            "--plan-from" => plan_from = Some(value),
            "--signals" => added = Some((chosen(&value)?, value)),
            other => return Err(format!("{other}: no such option: {USAGE}").into()),
        }
        args.drain(..2);
    }
    if args.len() < 3 {
        return Err(USAGE.into());
    }
    let k: usize = args[0].parse().map_err(|_| format!("K: {USAGE}"))?;
    let c: f64 = args[1].parse().map_err(|_| format!("COST: {USAGE}"))?;
    if !(1..=64).contains(&k) || !c.is_finite() || c < 0.0 {
        return Err(format!("K must be 1..=64 and COST finite and >= 0: {USAGE}").into());
    }
    // Every trace read (and refused) before anything is printed.
    let mut sets = Vec::new();
    for path in plan_from.iter().chain(&args[2..]) {
        let traces = TraceSet::open(Path::new(path))?;
        if traces.meta().is_some_and(|m| m.rule == "suffix") {
            return Err(format!(
                "{path}: a suffix-decoding trace (its draft at a smaller cap is not a prefix of its draft at the cap)"
            )
            .into());
        }
        if k > traces.cap() {
            return Err(
                format!("{path}: K = {k} is over the trace's cap, {}", traces.cap()).into(),
            );
        }
        sets.push((path, traces));
    }
    // With --signals, per-state's two signals and those alone.
    let columns = match added {
        Some((mask, _)) => vec![Signals::PerState, Signals::Chosen(mask)],
        None => vec![Signals::PerState, Signals::Rich, Signals::RichProgress],
    };
    // With --plan-from, the plans are searched on that trace alone and
    // judged on the others: held out.
    let mut held_out = None;
    if plan_from.is_some() {
        let (_, traces) = sets.remove(0);
        let replay = Replay::of(&traces, k, c, limit);
        let start = replay.best_static().0;
        let plans: Vec<_> = columns
            .iter()
            .map(|&signals| replay.search(signals, start).1)
            .collect();
        held_out = Some((start, plans));
    }
    let mut out = std::io::stdout().lock();
    let from = plan_from
        .as_ref()
        .map_or(String::new(), |p| format!(", plans from {p}"));
    let more = match &added {
        Some((_, list)) => format!("per-state's and {list} (states)"),
        None => "rich (states)\trich, progress (states)".into(),
    };
    writeln!(
        out,
        "trace\tbest static k\toracle\tper-state's signals{from}\t{more}"
    )?;
    let mut all: Vec<Vec<f64>> = vec![Vec::new(); columns.len() + 1];
    for (path, traces) in sets {
        let replay = Replay::of(&traces, k, c, limit);
        let (best_k, best) = replay.best_static();
        let oracle = replay.oracle() / best;
        write!(out, "{path}\t{best_k}\t{oracle:.4}")?;
        all[0].push(oracle);
        for (i, &signals) in columns.iter().enumerate() {
            let (goodput, states) = match &held_out {
                Some((start, plans)) => {
                    (replay.run(signals, &plans[i], *start, None), plans[i].len())
                }
                None => replay.best_plan(signals, best_k),
            };
            let ratio = goodput / best;
            write!(out, "\t{ratio:.4} ({states})")?;
            all[i + 1].push(ratio);
        }
        writeln!(out)?;
    }
    let medians: Vec<String> = all
        .iter()
        .map(|column| format!("{:.4}", Spread::of(column).median))
        .collect();
    writeln!(out, "median\t\t{}", medians.join("\t"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A copy of 27 positions (`n` 5, each holding 8 or what is left) and
    /// 10 positions whose short-match proposals (`n` 2) never hold.
    fn two_kinds() -> TraceSet {
        let copy: Vec<usize> = (0..27).map(|j| (26 - j).min(8)).collect();
        let text = format!(
            "{}\n{}\n{}\n",
            r#"{"specdec_trace":2,"tokenizer":"o200k_base","rule":"vllm","min_n":2,"max_n":5,"cap":8,"eos":true,"greedy":true}"#,
            format_args!(
                r#"{{"id":"copy","output_tokens":28,"proposal":{:?},"match":{:?},"ngram":{:?}}}"#,
                [8; 27], copy, [5; 27]
            ),
            format_args!(
                r#"{{"id":"novel","output_tokens":11,"proposal":{:?},"match":{:?},"ngram":{:?}}}"#,
                [8; 10], [0; 10], [2; 10]
            ),
        );
        TraceSet::read(text.as_bytes(), "two kinds").unwrap()
    }

    #[test]
    fn a_state_that_tells_the_kinds_apart_drafts_each_its_best() {
        let set = two_kinds();
        let replay = Replay {
            requests: set.requests(),
            k: 8,
            c: 0.1,
            max_n: 5,
        };
        // Static k = 3 is best: the copy in 7 steps of 1.3, the rest in 10
        // of 1.3 (37 tokens for 22.1); k = 4 costs 22.4, k = 2 22.8.
        let statics: Vec<f64> = (0..=8)
            .map(|k| replay.run(Signals::None, &HashMap::new(), k, None))
            .collect();
        let best = statics.iter().copied().fold(f64::MIN, f64::max);
        assert_eq!(statics.iter().position(|&g| g == best), Some(3));
        assert!((best - 37.0 / 22.1).abs() < 1e-12, "{best}");
        // Drafting 8 on the copy (3 steps of 1.8) and nothing elsewhere
        // (10 of 1) costs 15.4: what per-step hindsight pays too.
        let hindsight = 37.0 / 15.4;
        assert!((replay.oracle() - hindsight).abs() < 1e-12);
        for signals in [Signals::PerState, Signals::Rich, Signals::RichProgress] {
            let (goodput, states) = replay.best_plan(signals, 3);
            assert!((goodput - hindsight).abs() < 1e-12, "{goodput}");
            assert!(states >= 2);
        }
        // One state cannot: the best plan is the best static length.
        let (goodput, _) = replay.best_plan(Signals::None, 3);
        assert!((goodput - best).abs() < 1e-12);
    }

    #[test]
    fn no_state_earns_more_at_another_length_than_the_plan_found() {
        // 30 requests of 120 positions: runs of copies (n 5) that end at
        // random, between stretches of short matches (n 2 to 4) that
        // rarely hold.
        let mut seed = 7u64;
        let mut draw = |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        let mut text = String::from(
            r#"{"specdec_trace":2,"tokenizer":"o200k_base","rule":"vllm","min_n":2,"max_n":5,"cap":8,"eos":true,"greedy":true}"#,
        );
        for r in 0..30 {
            let (mut proposal, mut matched, mut ngram) = (Vec::new(), Vec::new(), Vec::new());
            let mut left = 0u64;
            for _ in 0..120 {
                if left == 0 && draw(6) == 0 {
                    left = 2 + draw(20);
                }
                if left > 0 {
                    proposal.push(8);
                    matched.push(left.min(8));
                    ngram.push(5);
                    left -= 1;
                } else {
                    proposal.push(draw(2) * 8);
                    matched.push(u64::from(draw(4) == 0) * draw(3));
                    ngram.push(2 + draw(3));
                }
            }
            for j in 0..120 {
                // Position j + 1 of 121: 120 - j tokens follow it.
                matched[j] = matched[j].min(119 - j as u64);
                if proposal[j] == 0 {
                    (matched[j], ngram[j]) = (0, 0);
                }
            }
            text.push_str(&format!(
                "\n{{\"id\":\"{r}\",\"output_tokens\":121,\"proposal\":{proposal:?},\"match\":{matched:?},\"ngram\":{ngram:?}}}"
            ));
        }
        let set = TraceSet::read(text.as_bytes(), "mixed").unwrap();
        let replay = Replay {
            requests: set.requests(),
            k: 8,
            c: 0.3,
            max_n: 5,
        };
        let start = (0..=8)
            .max_by(|&x, &y| {
                let run = |k| replay.run(Signals::None, &HashMap::new(), k, None);
                run(x).total_cmp(&run(y))
            })
            .unwrap();
        for signals in [Signals::PerState, Signals::Rich] {
            let (goodput, plan) = replay.search(signals, start);
            assert_eq!(goodput, replay.run(signals, &plan, start, None));
            assert!(goodput > replay.run(signals, &HashMap::new(), start, None));
            for (&s, &len) in &plan {
                for other in replay.lengths() {
                    let mut changed = plan.clone();
                    changed.insert(s, other);
                    let there = replay.run(signals, &changed, start, None);
                    assert!(
                        there <= goodput * (1.0 + 1e-9),
                        "state {s}: {other} earns {there} against {len}'s {goodput}"
                    );
                }
            }
        }
    }

    #[test]
    fn signals_are_chosen_by_name_and_each_splits_the_states() {
        assert_eq!(chosen("outcome"), Ok(0b10));
        assert_eq!(chosen("n,progress"), Ok(0b10_0001));
        assert!(chosen("outcome,bogus").is_err());
        let past = Past {
            outcome: 1,
            full_in_a_row: 2,
            recent: 5.0,
            copied: 9,
        };
        let fresh = Past::default();
        let per_state = state(Signals::PerState, &past, 300, 20, 5, 5);
        // Nothing added: per-state's states.
        assert_eq!(state(Signals::Chosen(0), &past, 300, 20, 5, 5), per_state);
        for (bit, name) in ADDED.iter().enumerate() {
            let at = |past: &Past, at, proposal, n| {
                state(Signals::Chosen(1 << bit), past, at, proposal, n, 5)
            };
            // The signal alone tells these apart; per-state's two do not.
            let (one, other) = match *name {
                "n" => (at(&past, 300, 20, 3), at(&past, 300, 20, 4)),
                "outcome" | "full" | "copy" => {
                    let other = Past {
                        recent: 5.0,
                        ..fresh
                    };
                    (at(&past, 300, 20, 5), at(&other, 300, 20, 5))
                }
                "proposal" => (at(&past, 300, 20, 5), at(&past, 300, 40, 5)),
                _ => (at(&past, 300, 20, 5), at(&past, 30, 20, 5)),
            };
            assert_ne!(one, other, "{name}");
        }
    }

    #[test]
    fn lengths_tried_are_every_one_to_8_then_about_an_eighth_apart() {
        let at = |k| {
            Replay {
                requests: &[],
                k,
                c: 0.1,
                max_n: 5,
            }
            .lengths()
        };
        assert_eq!(at(4), [0, 1, 2, 3, 4]);
        assert_eq!(at(8), (0..=8).collect::<Vec<_>>());
        assert_eq!(
            at(64),
            [
                0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 18, 21, 24, 27, 31, 35, 40, 45, 51, 58,
                64
            ]
        );
    }

    #[test]
    fn a_state_reads_only_the_past_and_what_the_drafter_says() {
        let past = Past {
            outcome: 1,
            full_in_a_row: 7,
            recent: 5.0,
            copied: 6,
        };
        // The same past and proposal give the same state; each signal
        // moves it.
        let at = |at, proposal, n| state(Signals::Rich, &past, at, proposal, n, 5);
        assert_eq!(at(12, 8, 5), at(12, 8, 5));
        assert_ne!(at(12, 8, 5), at(12, 8, 4));
        assert_ne!(at(12, 8, 5), at(12, 3, 5));
        let fresh = Past { copied: 0, ..past };
        assert_ne!(at(12, 8, 5), state(Signals::Rich, &fresh, 12, 8, 5, 5));
        assert_eq!(state(Signals::PerState, &past, 12, 8, 5, 5), 2 * 2);
        assert_eq!(state(Signals::PerState, &past, 12, 8, 2, 5), 1 + 2 * 2);
        let progress = |at| state(Signals::RichProgress, &past, at, 8, 5, 5);
        assert_ne!(progress(20), progress(300));
    }
}
