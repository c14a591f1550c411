//! Traces held for replay: every request of a trace file, compactly (three
//! bytes per output position), in file order.
//!
//! A trace (see [`specdec_ingest::trace`]) says, for every output position
//! `t >= 1` of a logged request, how many tokens an n-gram drafter could
//! propose there (`L_t`, 0 = no match), how many of them the true output
//! continues with (`m_t`), and, when the generator knew it, the matched
//! `n`. With greedy verification the output does not depend on the
//! drafting policy, so any policy can be replayed on it exactly: drafting
//! `k` at `t` drafts `d = min(k, L_t)`, accepts `a = min(d, m_t)` and moves
//! to `t + min(a + 1, M - t)` (the engine model in [`crate::engine`]). A
//! suffix drafter's trace also says where a smaller `k` drafts another
//! draft (the format's `below`): there `L_t` and `m_t` are those of that
//! `k` ([`TracedRequest::at_cap`]).

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::Path;

use specdec_ingest::trace::{Below, TraceMeta, TraceReader, TraceRequest};

use crate::error::Error;

/// What a trace says of one output position.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Position {
    /// `L_t`: the drafter's proposal length there (0: no match).
    pub proposal: u8,
    /// `m_t`: how many of those tokens the true output continues with.
    pub matched: u8,
    /// The matched `n` (0: no match, or not in the trace).
    pub ngram: u8,
    /// A suffix draft's score at the trace's cap, in sixteenths of a
    /// token (0: no draft, or not in the trace).
    pub score: u8,
    /// The fewest tokens to draft for the most tokens accepted at any
    /// length up to the cap: `m_t`, unless a smaller length drafts another
    /// draft (what the per-step oracle drafts).
    pub oracle: u8,
}

impl Position {
    /// Whether the drafter matched, but fewer than its longest `n`
    /// (`max_n`): a short match.
    ///
    /// ```
    /// use specdec_sim::trace_set::Position;
    /// let p = |ngram| Position { proposal: 4, matched: 0, ngram, score: 0, oracle: 0 };
    /// assert_eq!([0, 2, 5].map(|n| p(n).short_match(5)), [false, true, false]);
    /// ```
    pub fn short_match(&self, max_n: usize) -> bool {
        self.ngram > 0 && usize::from(self.ngram) < max_n
    }
}

/// One request of a trace.
#[derive(Clone, Debug, PartialEq)]
pub struct TracedRequest {
    /// The request's id as the trace gives it (JSON text).
    pub id: String,
    /// `M`: output tokens, position 0 (from prefill) included.
    pub output_tokens: usize,
    /// Positions `1..M` (entry `j` is position `j + 1`).
    pub positions: Box<[Position]>,
    /// The outcomes below the cap where they differ, in order of position
    /// then cap (empty for an n-gram drafter).
    pub below: Box<[Below]>,
}

impl TracedRequest {
    /// Position `t >= 1` as drafting `k >= 1` sees it: `position` (the
    /// trace's at `t`) unless the trace says a draft length up to `k`
    /// drafts another draft there.
    ///
    /// ```
    /// use specdec_sim::trace_set::TraceSet;
    /// let text = r#"{"output_tokens":4,"proposal":[3,0,1],"match":[3,0,1],"below":[[0,1,1,0]]}"#;
    /// let set = TraceSet::read(text.as_bytes(), "t").unwrap();
    /// let r = &set.requests()[0];
    /// let p = r.positions[0];
    /// assert_eq!((r.at_cap(1, p, 1).proposal, r.at_cap(1, p, 1).matched), (1, 0));
    /// assert_eq!(r.at_cap(1, p, 2), p);
    /// assert_eq!(p.oracle, 3);
    /// ```
    pub fn at_cap(&self, t: usize, position: Position, k: usize) -> Position {
        if self.below.is_empty() || k == 0 {
            return position;
        }
        let j = t - 1;
        let i = self
            .below
            .partition_point(|b| (b.position as usize, usize::from(b.cap)) < (j, k));
        match self.below.get(i) {
            Some(b) if b.position as usize == j => Position {
                proposal: b.proposal,
                matched: b.matched,
                ..position
            },
            _ => position,
        }
    }
}

/// Every request of a trace file, in file order.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceSet {
    requests: Vec<TracedRequest>,
    meta: Option<TraceMeta>,
    cap: usize,
    positions: u64,
}

impl TraceSet {
    /// Reads a whole trace (`name` names it in messages). At least one
    /// request must have an output position to replay (`M >= 2`).
    pub fn read(reader: impl BufRead, name: &str) -> Result<Self, Error> {
        let mut reader = TraceReader::new(reader);
        let at = |source| Error::Trace {
            name: name.to_owned(),
            source,
        };
        let meta = reader.meta().map_err(at)?.cloned();
        let cap = reader.cap().map_err(at)?;
        let mut requests = Vec::new();
        let mut positions = 0u64;
        for request in reader {
            let request = request.map_err(at)?;
            let request = Self::traced(request, cap);
            positions += request.positions.len() as u64;
            requests.push(request);
        }
        if positions == 0 {
            return Err(Error::TraceEmpty {
                name: name.to_owned(),
            });
        }
        Ok(Self {
            requests,
            meta,
            cap,
            positions,
        })
    }

    /// Reads the trace file at `path` (`-`: standard input).
    pub fn open(path: &Path) -> Result<Self, Error> {
        let name = path.display().to_string();
        if path.as_os_str() == "-" {
            return Self::read(io::stdin().lock(), "<stdin>");
        }
        let file = File::open(path).map_err(|source| Error::TraceFile {
            name: name.clone(),
            source,
        })?;
        Self::read(BufReader::new(file), &name)
    }

    fn traced(request: TraceRequest, cap: usize) -> TracedRequest {
        let ngram = request.ngram.as_deref();
        let score = request.score.as_deref();
        let mut positions: Box<[Position]> = request
            .proposal
            .iter()
            .zip(&request.matched)
            .enumerate()
            .map(|(j, (&proposal, &matched))| Position {
                proposal,
                matched,
                ngram: ngram.and_then(|n| n.get(j)).copied().unwrap_or(0),
                score: score.and_then(|s| s.get(j)).copied().unwrap_or(0),
                oracle: matched,
            })
            .collect();
        // Where a smaller length drafts another draft, the oracle's length
        // is the fewest that accepts the most over every length.
        let mut i = 0;
        while i < request.below.len() {
            let j = request.below[i].position as usize;
            let (mut best, mut len) = (0, 0);
            for k in 1..=cap {
                let (_, accepted) = request.outcome(j, k);
                if accepted > best {
                    (best, len) = (accepted, k);
                }
            }
            positions[j].oracle = len as u8;
            while i < request.below.len() && request.below[i].position as usize == j {
                i += 1;
            }
        }
        TracedRequest {
            id: request.id.to_string(),
            output_tokens: request.output_tokens as usize,
            positions,
            below: request.below.into_boxed_slice(),
        }
    }

    /// The requests `keep` accepts (given each request's index and the
    /// request), in file order, with the same metadata and cap; `None`
    /// when none of them has an output position to replay (a trace holds
    /// at least one).
    pub fn subset(&self, mut keep: impl FnMut(usize, &TracedRequest) -> bool) -> Option<Self> {
        let requests: Vec<TracedRequest> = self
            .requests
            .iter()
            .enumerate()
            .filter(|(i, r)| keep(*i, r))
            .map(|(_, r)| r.clone())
            .collect();
        let positions = requests.iter().map(|r| r.positions.len() as u64).sum();
        (positions > 0).then(|| Self {
            requests,
            meta: self.meta.clone(),
            cap: self.cap,
            positions,
        })
    }

    /// The requests, in file order.
    pub fn requests(&self) -> &[TracedRequest] {
        &self.requests
    }

    /// The trace's metadata line, when it has one.
    pub fn meta(&self) -> Option<&TraceMeta> {
        self.meta.as_ref()
    }

    /// The largest value the trace may hold: no `K` above it can be
    /// replayed (a proposal capped at the cap may be longer).
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Output positions to replay (positions `>= 1`, over every request).
    pub fn positions(&self) -> u64 {
        self.positions
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oracle_takes_the_fewest_tokens_that_accept_the_most_at_any_length() {
        // Position 1: at length 1 another draft holds (1 of 1); from 2 on
        // the draft of 4 holds nothing. Position 2: lengths 1..=2 draft
        // nothing that holds, 3 and above hold 2.
        let text = r#"{"specdec_trace":2,"tokenizer":"t","rule":"vllm","min_n":1,"max_n":4,"cap":4,"eos":false,"greedy":true}
{"output_tokens":6,"proposal":[4,3,0,0,0],"match":[0,2,0,0,0],"below":[[0,1,1,1],[1,2,2,0]]}"#;
        let set = TraceSet::read(text.as_bytes(), "t").unwrap();
        let r = &set.requests()[0];
        assert_eq!(
            r.positions.iter().map(|p| p.oracle).collect::<Vec<_>>(),
            vec![1, 3, 0, 0, 0]
        );
        let at = |t, k| {
            let p = r.at_cap(t, r.positions[t - 1], k);
            (p.proposal, p.matched)
        };
        assert_eq!((at(1, 1), at(1, 2), at(1, 4)), ((1, 1), (4, 0), (4, 0)));
        assert_eq!((at(2, 1), at(2, 2), at(2, 3)), ((2, 0), (2, 0), (3, 2)));
        // Length 0 drafts nothing: the position as it is.
        assert_eq!(at(2, 0), (3, 2));
    }
}
