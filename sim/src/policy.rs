//! The table of drafting policies: one row per policy ([`PolicyDef`]: its
//! name, a stable index, whether it chooses per request, its help text and
//! how the engine builds it), which every program reads: what `--policy`
//! and `--policies` parse ([`PolicySpec`]), their help, the order of
//! `whatif`'s table and of the policy table, and the index the command
//! line's plot maps to a colour.
//!
//! Adding a policy is one file (its [`Policy`], under `peers/` for another
//! engine's rule) and one row of [`POLICIES`](table). The policies
//! themselves, the trait and what it sees are in [`crate::drafting`],
//! re-exported here.

use std::fmt;
use std::str::FromStr;
use std::sync::{Mutex, OnceLock};

pub use crate::drafting::{
    Adaptive, Oracle, PerState, PerStateTable, Policy, RequestMemory, RequestView, Static,
    mean_draft_len, scheduled_budget,
};
use crate::peers::{Sglang, SmartSpec, Vllm44336, VllmAdaptiveVerification};
pub use crate::runs::CopyRuns;
use crate::summary::CostLinear;

/// How the engine builds a policy of the table: the static length, the two
/// controllers and the oracle need the engine's help (a plan the metrics
/// thread publishes, a trace); a rule needs nothing but the run's settings.
#[derive(Clone, Copy, Debug)]
pub enum Build {
    /// `static:K`: [`Static`]; `none` is `static:0`.
    Static,
    /// [`Adaptive`]: the metrics thread's `DraftController` publishes the
    /// plan every engine thread reads; with [`Feedback::Runs`], on a trace,
    /// the batch-level copy-run controller ([`CopyRuns`]) instead.
    Adaptive(Feedback),
    /// [`PerState`] (or [`PerStateTable`] for a state space): the metrics
    /// thread's `StateController` publishes a length per request state;
    /// with [`Feedback::Runs`], on a trace, the per-state copy-run
    /// controller ([`CopyRuns`]) instead.
    PerState(Feedback),
    /// [`Oracle`], on a trace only.
    Oracle,
    /// A rule the engine builds once per engine thread from the run's
    /// settings alone (each thread's instance learns from its own steps,
    /// as in its engine).
    Rule(fn(&RuleSettings) -> Box<dyn Policy>),
}

/// What a controller learns from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feedback {
    /// The accepted counts of its own drafts (censored at the drafted
    /// length): the library's controllers, on and off traces.
    Censored,
    /// On a lookup drafter's trace, whole copy runs ([`crate::runs`]);
    /// off traces, as [`Feedback::Censored`].
    Runs,
}

/// What a [`Build::Rule`] is built from: the run's settings, and a seed of
/// the engine thread's own for a rule that draws.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RuleSettings {
    /// `K`: the rule never drafts more.
    pub max_draft_len: usize,
    /// The step cost (a cost table's end points).
    pub cost: CostLinear,
    /// Requests per engine thread at most.
    pub max_batch: usize,
    /// The seed of this engine thread's draws (a stream apart from the
    /// engine's).
    pub seed: u64,
}

/// One row of the table of policies ([`table`]): everything the engine
/// model, the command line's `whatif` and the demo's programs know of a
/// policy. Adding a policy is one file (its [`Policy`]) and one row.
#[derive(Clone, Copy, Debug)]
pub struct PolicyDef {
    /// The name `--policy`, `--policies` and the output give it; the
    /// static row's takes `:K` (`static:3`), and `none` is `static:0`.
    pub name: &'static str,
    /// A stable number of the row, never reused nor changed when rows are
    /// added, removed or reordered: what a program keys its presentation
    /// by (the command line's plot maps it to a colour).
    pub index: usize,
    /// Whether it gives each request its own length (its switches then
    /// count changes of the step's rounded mean length).
    pub per_request: bool,
    /// What it is, in parentheses after its name in the demo's `--policy`
    /// help (empty: the name alone).
    pub help: &'static str,
    /// The policy in `whatif`'s description: a rule ([`Build::Rule`]) by
    /// whose rule it is (listed among "the peer rules of ..."), any other
    /// by a phrase of its own.
    pub about: &'static str,
    /// How the engine builds it.
    pub build: Build,
}

/// The policies, in the order the programs list them (`whatif` and the
/// policy table put the static lengths first).
static POLICIES: &[PolicyDef] = &[
    PolicyDef {
        name: "adaptive",
        index: 0,
        per_request: false,
        help: "the DraftController's plan; on a trace, from copy runs",
        about: "the batch-level controller `adaptive`",
        build: Build::Adaptive(Feedback::Runs),
    },
    PolicyDef {
        name: "per-state",
        index: 1,
        per_request: true,
        help: "the StateController's plan, a length per request state; on a trace, from copy runs",
        about: "the per-state controller",
        build: Build::PerState(Feedback::Runs),
    },
    PolicyDef {
        name: "adaptive-censored",
        index: 8,
        per_request: false,
        help: "the DraftController's plan, from accepted counts only",
        about: "`adaptive` from accepted counts only (`adaptive-censored`)",
        build: Build::Adaptive(Feedback::Censored),
    },
    PolicyDef {
        name: "per-state-censored",
        index: 9,
        per_request: true,
        help: "the StateController's plan, from accepted counts only",
        about: "`per-state` from accepted counts only (`per-state-censored`)",
        build: Build::PerState(Feedback::Censored),
    },
    PolicyDef {
        name: "static",
        index: 2,
        per_request: false,
        help: "",
        about: "no speculation, every static k up to K",
        build: Build::Static,
    },
    PolicyDef {
        name: "sglang",
        index: 3,
        per_request: false,
        help: "SGLang's EMA tiers",
        about: "SGLang",
        build: Build::Rule(|s| Box::new(Sglang::new(s.max_draft_len))),
    },
    PolicyDef {
        name: "vllm-44336",
        index: 4,
        per_request: false,
        help: "vLLM #44336's per-position EMA",
        about: "vLLM #44336",
        // `new` panics on a cost that `validate` has already rejected.
        build: Build::Rule(|s| {
            Box::new(Vllm44336::new(
                s.max_draft_len,
                s.cost.base,
                s.cost.per_token,
                s.seed,
            ))
        }),
    },
    PolicyDef {
        name: "smartspec",
        index: 5,
        per_request: true,
        help: "a SmartSpec-style per-request rule",
        about: "SmartSpec",
        build: Build::Rule(|s| {
            Box::new(SmartSpec::new(
                s.max_draft_len,
                s.cost.base,
                s.cost.per_token,
                s.max_batch,
            ))
        }),
    },
    PolicyDef {
        name: "vllm-av",
        index: 6,
        per_request: true,
        help: "vLLM's adaptive verification, per request",
        about: "vLLM's adaptive verification",
        build: Build::Rule(|s| {
            Box::new(VllmAdaptiveVerification::new(
                s.max_draft_len,
                s.cost.base,
                s.cost.per_token,
                s.max_batch,
            ))
        }),
    },
    PolicyDef {
        name: "oracle",
        index: 7,
        per_request: true,
        help: "",
        about: "per-step hindsight (`oracle`)",
        build: Build::Oracle,
    },
];

/// The rows registered by [`register`], and whether [`table`] was read
/// (after which none may be).
static EXTRA: Mutex<(Vec<&'static PolicyDef>, bool)> = Mutex::new((Vec::new(), false));

/// The table once read: [`POLICIES`] then the registered rows.
static TABLE: OnceLock<Vec<&'static PolicyDef>> = OnceLock::new();

/// The table of policies: the engine model's, then any [`register`]ed.
pub fn table() -> &'static [&'static PolicyDef] {
    TABLE.get_or_init(|| {
        let mut extra = EXTRA.lock().unwrap_or_else(|e| e.into_inner());
        // Sealed under the lock: a later `register` sees it and refuses.
        extra.1 = true;
        POLICIES.iter().chain(extra.0.iter().copied()).collect()
    })
}

/// Adds a row to the table, for a program that embeds the engine model
/// with a policy of its own (the shipped programs register none; the
/// tests register a toy policy to show that one row reaches every
/// program). Must come before anything reads the table (parsing a policy,
/// a program's help): refused after, and for a name or index already in
/// it.
pub fn register(def: &'static PolicyDef) -> Result<(), String> {
    let mut extra = EXTRA.lock().unwrap_or_else(|e| e.into_inner());
    if extra.1 {
        return Err(format!(
            "policy {:?}: the table of policies was read already",
            def.name
        ));
    }
    let taken = POLICIES
        .iter()
        .chain(extra.0.iter().copied())
        .any(|d| d.name == def.name || d.index == def.index);
    if taken || def.name.is_empty() || def.name == "none" {
        return Err(format!(
            "policy {:?} (index {}): the name or index is taken",
            def.name, def.index
        ));
    }
    extra.0.push(def);
    Ok(())
}

/// The first row built as `build`.
fn row(is: fn(&Build) -> bool) -> &'static PolicyDef {
    table()
        .iter()
        .find(|d| is(&d.build))
        .expect("the engine model's rows are in the table")
}

/// Joins `items` with commas, and `last` before the last one.
fn join(items: &[String], last: &str) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., end] => format!("{}{last}{end}", init.join(", ")),
    }
}

/// The policies a value of `--policy` may name, for the demo's help: each
/// but the oracle (traces only), with what it is (`adaptive (the
/// DraftController's plan), ..., static:K, ... or vllm-av (...)`).
pub fn choices_help() -> String {
    let items: Vec<String> = table()
        .iter()
        .filter(|d| !matches!(d.build, Build::Oracle))
        .map(|d| match (d.build, d.help) {
            (Build::Static, _) => "static:K".to_owned(),
            (_, "") => d.name.to_owned(),
            (_, help) => format!("{} ({help})", d.name),
        })
        .collect();
    join(&items, " or ")
}

/// Every name a policy parses from, in the table's order (`adaptive,
/// per-state, static:K, none, ... or oracle`).
pub fn names_or() -> String {
    let items: Vec<String> = table()
        .iter()
        .map(|d| match d.build {
            Build::Static => "static:K, none".to_owned(),
            _ => d.name.to_owned(),
        })
        .collect();
    join(&items, " or ")
}

/// Every name a policy parses from, the static lengths first, as
/// `whatif` lists them (`none, static:K, adaptive, ..., oracle`).
pub fn names_statics_first() -> String {
    let mut items = vec!["none".to_owned(), "static:K".to_owned()];
    items.extend(
        table()
            .iter()
            .filter(|d| !matches!(d.build, Build::Static))
            .map(|d| d.name.to_owned()),
    );
    items.join(", ")
}

/// The policies `whatif` replays, in words, the static lengths first and
/// the rules together (`no speculation, every static k up to K, the
/// batch-level controller `adaptive`, ..., the peer rules of SGLang, ...
/// and vLLM's adaptive verification, and per-step hindsight (`oracle`)`).
pub fn about_whatif() -> String {
    let mut items: Vec<String> = Vec::new();
    let mut rules: Vec<String> = Vec::new();
    let statics = table().iter().filter(|d| matches!(d.build, Build::Static));
    let others = table().iter().filter(|d| !matches!(d.build, Build::Static));
    for d in statics.chain(others) {
        match d.build {
            Build::Rule(_) => {
                if rules.is_empty() {
                    // The rules' place in the list.
                    items.push(String::new());
                }
                rules.push(d.about.to_owned());
            }
            _ => items.push(d.about.to_owned()),
        }
    }
    if let Some(slot) = items.iter_mut().find(|i| i.is_empty()) {
        *slot = format!("the peer rules of {}", join(&rules, " and "));
    }
    join(&items, ", and ")
}

/// A policy: a row of the [`table`], with its length for the static row.
#[derive(Clone, Copy)]
pub struct PolicySpec {
    def: &'static PolicyDef,
    /// The static length (0 for the other rows).
    k: usize,
}

impl PartialEq for PolicySpec {
    fn eq(&self, other: &Self) -> bool {
        // Names are unique in the table.
        self.def.name == other.def.name && self.k == other.k
    }
}

impl Eq for PolicySpec {}

impl fmt::Debug for PolicySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PolicySpec({self})")
    }
}

/// What kind of policy a [`PolicySpec`] is, for grouping in an output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `static:0`.
    NoSpeculation,
    /// `static:K`, `K > 0`.
    Static,
    /// A controller the metrics thread runs (`adaptive`, `per-state`).
    Controller,
    /// A rule, one instance per engine thread (another engine's).
    Peer,
    /// Per-step hindsight (`oracle`).
    Oracle,
}

impl Kind {
    /// Its name in an output: `none`, `static`, `controller`, `peer`,
    /// `oracle`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::NoSpeculation => "none",
            Kind::Static => "static",
            Kind::Controller => "controller",
            Kind::Peer => "peer",
            Kind::Oracle => "oracle",
        }
    }
}

impl PolicySpec {
    /// `static:k`: `k` at every step (`none` for 0).
    pub fn fixed(k: usize) -> Self {
        Self {
            def: row(|b| matches!(b, Build::Static)),
            k,
        }
    }

    /// `adaptive`: the `DraftController`'s plan.
    pub fn adaptive() -> Self {
        Self::of(row(|b| matches!(b, Build::Adaptive(_))))
    }

    /// `per-state`: the `StateController`'s plan.
    pub fn per_state() -> Self {
        Self::of(row(|b| matches!(b, Build::PerState(_))))
    }

    /// `adaptive-censored`: the `DraftController`'s plan, on traces too.
    pub fn adaptive_censored() -> Self {
        Self::of(row(|b| matches!(b, Build::Adaptive(Feedback::Censored))))
    }

    /// `per-state-censored`: the `StateController`'s plan, on traces too.
    pub fn per_state_censored() -> Self {
        Self::of(row(|b| matches!(b, Build::PerState(Feedback::Censored))))
    }

    /// `oracle`: on a trace, what the verifier will accept.
    pub fn oracle() -> Self {
        Self::of(row(|b| matches!(b, Build::Oracle)))
    }

    /// The policy of a row (for the static row, `static:0`).
    pub fn of(def: &'static PolicyDef) -> Self {
        Self { def, k: 0 }
    }

    /// The policy of the row named `name` (`static:K` and `none` aside).
    pub fn named(name: &str) -> Option<Self> {
        table()
            .iter()
            .find(|d| d.name == name && !matches!(d.build, Build::Static))
            .map(|d| Self::of(d))
    }

    /// Every policy of the table but the static lengths, in its order.
    pub fn non_static() -> Vec<Self> {
        table()
            .iter()
            .filter(|d| !matches!(d.build, Build::Static))
            .map(|d| Self::of(d))
            .collect()
    }

    /// Its row of the table.
    pub fn def(self) -> &'static PolicyDef {
        self.def
    }

    /// How the engine builds it.
    pub fn build(self) -> Build {
        self.def.build
    }

    /// Its length, for a static policy.
    pub fn static_len(self) -> Option<usize> {
        matches!(self.def.build, Build::Static).then_some(self.k)
    }

    /// Whether the policy gives each request its own length (its switches
    /// then count changes of the step's rounded mean length).
    pub fn per_request(self) -> bool {
        self.def.per_request
    }

    /// What kind of policy it is.
    pub fn kind(self) -> Kind {
        match self.def.build {
            Build::Static if self.k == 0 => Kind::NoSpeculation,
            Build::Static => Kind::Static,
            Build::Adaptive(_) | Build::PerState(_) => Kind::Controller,
            Build::Oracle => Kind::Oracle,
            Build::Rule(_) => Kind::Peer,
        }
    }

    /// Its name in a table of results: `none` for `static:0`, else as
    /// displayed.
    pub fn label(self) -> String {
        match self.static_len() {
            Some(0) => "none".into(),
            _ => self.to_string(),
        }
    }

    /// Checks the policy against `--max-draft-len`.
    pub fn check(self, max_draft_len: usize) -> Result<(), crate::error::Error> {
        match self.static_len() {
            Some(k) if k > max_draft_len => {
                Err(crate::error::Error::StaticAboveMax { k, max_draft_len })
            }
            _ => Ok(()),
        }
    }
}

impl fmt::Display for PolicySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.static_len() {
            Some(k) => write!(f, "{}:{k}", self.def.name),
            None => f.write_str(self.def.name),
        }
    }
}

impl FromStr for PolicySpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        // No speculation: the same as static:0.
        if s == "none" {
            return Ok(PolicySpec::fixed(0));
        }
        if let Some(p) = PolicySpec::named(s) {
            return Ok(p);
        }
        let statics = row(|b| matches!(b, Build::Static));
        match s
            .strip_prefix(statics.name)
            .and_then(|k| k.strip_prefix(':'))
        {
            Some(k) => k
                .parse()
                .map(PolicySpec::fixed)
                .map_err(|_| format!("{s:?}: the K of static:K must be a whole number (0..=64)")),
            None => Err(format!("{s:?} is not a policy ({})", names_or())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_values_parse_and_bad_ones_say_why() {
        for (text, spec) in [
            ("adaptive", PolicySpec::adaptive()),
            ("static:0", PolicySpec::fixed(0)),
            ("static:8", PolicySpec::fixed(8)),
            ("sglang", PolicySpec::named("sglang").unwrap()),
            ("vllm-44336", PolicySpec::named("vllm-44336").unwrap()),
            ("per-state", PolicySpec::per_state()),
            ("smartspec", PolicySpec::named("smartspec").unwrap()),
            ("vllm-av", PolicySpec::named("vllm-av").unwrap()),
            ("oracle", PolicySpec::oracle()),
        ] {
            assert_eq!(text.parse::<PolicySpec>(), Ok(spec));
            assert_eq!(spec.to_string(), text);
        }
        assert_eq!("none".parse::<PolicySpec>(), Ok(PolicySpec::fixed(0)));
        assert_eq!(PolicySpec::fixed(0).label(), "none");
        assert!(
            "static:x"
                .parse::<PolicySpec>()
                .unwrap_err()
                .contains("whole number")
        );
        assert!("static:-1".parse::<PolicySpec>().is_err());
        assert_eq!(
            "greedy".parse::<PolicySpec>().unwrap_err(),
            "\"greedy\" is not a policy (adaptive, per-state, adaptive-censored, \
             per-state-censored, static:K, none, sglang, vllm-44336, smartspec, vllm-av or oracle)"
        );
        assert!(matches!(
            PolicySpec::fixed(9).check(8),
            Err(crate::error::Error::StaticAboveMax {
                k: 9,
                max_draft_len: 8
            })
        ));
        assert!(PolicySpec::fixed(8).check(8).is_ok());
    }

    /// The texts the programs' help is made of, from the table.
    #[test]
    fn the_tables_help_texts_name_every_policy() {
        assert_eq!(
            choices_help(),
            "adaptive (the DraftController's plan; on a trace, from copy runs), per-state \
             (the StateController's plan, a length per request state; on a trace, from copy \
             runs), adaptive-censored (the DraftController's plan, from accepted counts only), \
             per-state-censored (the StateController's plan, from accepted counts only), \
             static:K, sglang (SGLang's EMA tiers), vllm-44336 \
             (vLLM #44336's per-position EMA), smartspec (a SmartSpec-style per-request rule) \
             or vllm-av (vLLM's adaptive verification, per request)"
        );
        assert_eq!(
            names_statics_first(),
            "none, static:K, adaptive, per-state, adaptive-censored, per-state-censored, sglang, \
             vllm-44336, smartspec, vllm-av, oracle"
        );
        assert_eq!(
            about_whatif(),
            "no speculation, every static k up to K, the batch-level controller `adaptive`, \
             the per-state controller, `adaptive` from accepted counts only \
             (`adaptive-censored`), `per-state` from accepted counts only \
             (`per-state-censored`), the peer rules of SGLang, vLLM #44336, SmartSpec and \
             vLLM's adaptive verification, and per-step hindsight (`oracle`)"
        );
    }

    #[test]
    fn names_and_indexes_are_unique_and_the_kinds_follow_the_rows() {
        let t = table();
        for (i, a) in t.iter().enumerate() {
            for b in &t[i + 1..] {
                assert_ne!(a.name, b.name);
                assert_ne!(a.index, b.index);
            }
        }
        assert_eq!(PolicySpec::fixed(0).kind(), Kind::NoSpeculation);
        assert_eq!(PolicySpec::fixed(3).kind(), Kind::Static);
        assert_eq!(PolicySpec::per_state().kind(), Kind::Controller);
        assert_eq!(PolicySpec::named("sglang").unwrap().kind(), Kind::Peer);
        assert_eq!(PolicySpec::oracle().kind(), Kind::Oracle);
        assert!(PolicySpec::named("static").is_none());
        // Read already: too late to register.
        static LATE: PolicyDef = PolicyDef {
            name: "late",
            index: 99,
            per_request: false,
            help: "",
            about: "",
            build: Build::Static,
        };
        assert!(register(&LATE).is_err());
    }
}
