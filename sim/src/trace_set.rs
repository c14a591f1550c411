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
//! to `t + min(a + 1, M - t)` (the engine model in [`crate::engine`]).

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::Path;

use specdec_ingest::trace::{TraceMeta, TraceReader, TraceRequest};

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
            let request = Self::traced(request);
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

    fn traced(request: TraceRequest) -> TracedRequest {
        let ngram = request.ngram.as_deref();
        let positions = request
            .proposal
            .iter()
            .zip(&request.matched)
            .enumerate()
            .map(|(j, (&proposal, &matched))| Position {
                proposal,
                matched,
                ngram: ngram.and_then(|n| n.get(j)).copied().unwrap_or(0),
            })
            .collect();
        TracedRequest {
            id: request.id.to_string(),
            output_tokens: request.output_tokens as usize,
            positions,
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
