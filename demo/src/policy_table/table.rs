//! The table of every policy on every workload: its rows, the oracle of
//! each phase, the targets and whether they are met.

use std::fmt::Write as _;

use super::*;

/// Every run of one seed, by workload.
pub(super) struct Table<'a> {
    args: &'a Args,
    seed: u64,
    rows: Vec<(Workload, Vec<(PolicySpec, &'a Run)>)>,
}

/// One target on one seed: met or not, the figure it is judged on, and
/// the sentence that says so.
struct Target {
    name: String,
    met: bool,
    figure: f64,
    unit: &'static str,
    /// Decimals of the figure across seeds.
    digits: usize,
    text: String,
}

/// Per phase, the best static run's goodput (all steps, settled steps).
struct Oracle {
    all: Vec<(usize, f64)>,
    settled: Vec<(usize, f64)>,
    overall: (usize, f64),
}

pub(super) fn goodput(s: &Summary) -> f64 {
    s.overall.goodput.unwrap_or(0.0)
}

/// The oracle row of a workload: which static k is best per phase (over
/// the whole phase, and once settled).
fn oracle_line(workload: Workload, oracle: &Oracle, phases: usize) -> String {
    // The oracle row: which static k is best per phase.
    let mut line = format!(
        "| {workload} | *oracle* (best static k) | {:.2} (k = {}) | 1.000 |",
        oracle.overall.1, oracle.overall.0
    );
    for i in 0..phases {
        match (oracle.all.get(i), oracle.settled.get(i)) {
            (Some(a), Some(s)) => {
                let _ = write!(line, " k = {} ({}) |", a.0, s.0);
            }
            _ => line.push_str(" – |"),
        }
    }
    line.push_str(" |");
    line
}

/// A policy's row (with its line end): goodput, its ratio to the best
/// static k, per phase the ratios to the phase's oracle, the switches.
fn policy_line(
    workload: Workload,
    policy: PolicySpec,
    s: &Summary,
    oracle: &Oracle,
    phases: usize,
) -> String {
    let mut line = format!(
        "| {workload} | {} | {:.2} | {:.3} |",
        if policy.kind() == Kind::Controller {
            format!("**{policy}**")
        } else {
            policy.to_string()
        },
        goodput(s),
        goodput(s) / oracle.overall.1
    );
    for i in 0..phases {
        match (s.phases.get(i), oracle.all.get(i), oracle.settled.get(i)) {
            (Some(p), Some(a), Some(st)) => {
                let _ = write!(
                    line,
                    " {:.3} ({:.3}) |",
                    p.figures.goodput.unwrap_or(0.0) / a.1,
                    p.settled.goodput.unwrap_or(0.0) / st.1
                );
            }
            _ => line.push_str(" – |"),
        }
    }
    let switches: Vec<_> = s
        .phases
        .iter()
        .map(|p| {
            if policy.per_request() && policy.kind() != Kind::Controller {
                "–".to_owned()
            } else {
                format!("{}", p.figures.switches)
            }
        })
        .collect();
    let _ = writeln!(line, " {} |", switches.join(" / "));
    line
}

impl<'a> Table<'a> {
    pub(super) fn new(
        args: &'a Args,
        seed: u64,
        jobs: &[(u64, Workload, PolicySpec)],
        results: &'a [Run],
    ) -> Self {
        let rows = Workload::ALL
            .iter()
            .map(|&w| {
                let runs = jobs
                    .iter()
                    .zip(results)
                    .filter(|((js, jw, _), _)| *js == seed && *jw == w)
                    .map(|((_, _, p), r)| (*p, r))
                    .collect();
                (w, runs)
            })
            .collect();
        Self { args, seed, rows }
    }

    fn oracle(runs: &[(PolicySpec, &Run)]) -> Oracle {
        let statics: Vec<(usize, &Summary)> = runs
            .iter()
            .filter_map(|(p, r)| match (p.static_len(), r) {
                (Some(k), Ok(s)) => Some((k, s)),
                _ => None,
            })
            .collect();
        let phases = statics
            .iter()
            .map(|(_, s)| s.phases.len())
            .max()
            .unwrap_or(0);
        let best = |f: &dyn Fn(&Summary) -> Option<f64>| {
            statics
                .iter()
                .filter_map(|&(k, s)| f(s).map(|g| (k, g)))
                .fold((0, f64::NEG_INFINITY), |b, c| if c.1 > b.1 { c } else { b })
        };
        Oracle {
            all: (0..phases)
                .map(|i| best(&|s: &Summary| s.phases.get(i).and_then(|p| p.figures.goodput)))
                .collect(),
            settled: (0..phases)
                .map(|i| best(&|s: &Summary| s.phases.get(i).and_then(|p| p.settled.goodput)))
                .collect(),
            overall: best(&|s: &Summary| s.overall.goodput),
        }
    }

    pub(super) fn render(&self) -> String {
        let phases = TRANSITION_PHASES as usize;
        let mut out = self.preamble();
        let mut header = "| workload | policy | goodput | / best static |".to_owned();
        let mut rule = "|---|---|---:|---:|".to_owned();
        for i in 0..phases {
            let _ = write!(header, " phase {} / oracle |", i + 1);
            rule.push_str("---:|");
        }
        header.push_str(" switches per phase |");
        rule.push_str("---|");
        let _ = writeln!(out, "{header}\n{rule}");
        for (workload, runs) in &self.rows {
            let oracle = Self::oracle(runs);
            let _ = writeln!(out, "{}", oracle_line(*workload, &oracle, phases));
            for (policy, run) in runs {
                match run {
                    Ok(s) => out.push_str(&policy_line(*workload, *policy, s, &oracle, phases)),
                    Err(e) => {
                        let _ = writeln!(
                            out,
                            "| {workload} | {policy} | not run: {e} |{}",
                            " |".repeat(2 + phases)
                        );
                    }
                }
            }
        }
        let _ = writeln!(out, "\nTargets (seed {}):\n", self.seed);
        for t in self.targets() {
            let _ = writeln!(
                out,
                "- **{}**: {}: {}",
                if t.met { "met" } else { "not met" },
                t.name,
                t.text
            );
        }
        out
    }

    /// The paragraph above the table: its settings, and how to read it.
    fn preamble(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Policies side by side: K = {MAX_DRAFT_LEN}, step cost 1 + {} b (b: the mean draft \
             length per request), 2 engine threads x 32 requests, {} ms intervals, controllers \
             updated every {} ms, virtual time, seed {}; transition: phases of {} s (low alpha \
             0.5, high 0.9), steady (alpha 0.8), mixed (half 0.9, half 0.5), bursty (every \
             request alternates between alpha 0.9 and 0.3, {} steps in each on average) and \
             classes (code, math and summarization profiles, a third each) run {} s. Goodput in \
             tokens per cost unit. Per phase: goodput / the phase's best static k, over the \
             whole phase and (in brackets) once settled, i.e. without its first {} intervals. \
             Switches: changes of the chosen k (of a per-state plan: of any state's k) per \
             engine thread, per phase; none for the per-request rules (smartspec, vllm-av).\n",
            self.args.per_token_cost,
            self.args.interval_ms,
            self.args.update_ms,
            self.seed,
            self.args.phase_seconds,
            self.args.persistence,
            self.args.phase_seconds * TRANSITION_PHASES,
            engine::SETTLE_INTERVALS,
        );
        out
    }

    /// The targets, each met or not, with the figures: the adaptive
    /// controller's on the workloads they were stated for, then
    /// `per-state`'s against it on every workload.
    fn targets(&self) -> Vec<Target> {
        let mut out = Vec::new();
        for (workload, runs) in &self.rows {
            if ADAPTIVE_TARGET_WORKLOADS.contains(workload) {
                Self::adaptive_targets(*workload, runs, &mut out);
            }
            Self::per_state_targets(*workload, runs, &mut out);
        }
        out
    }

    /// The run of `policy`, if it ran.
    fn run_of<'r>(runs: &'r [(PolicySpec, &Run)], policy: PolicySpec) -> Option<&'r Summary> {
        runs.iter()
            .find(|(p, _)| *p == policy)
            .and_then(|(_, r)| r.as_ref().ok())
    }

    /// `per-state` against `adaptive` (its stated targets): at least 1.08 times its
    /// goodput on `bursty`, at most 0.2% below it on `steady`, at most 0.5%
    /// below it anywhere; and on `mixed`, at least the best static `k`
    /// (where `adaptive` settles on a longer draft than the run-wide best).
    fn per_state_targets(workload: Workload, runs: &[(PolicySpec, &Run)], out: &mut Vec<Target>) {
        let (Some(per_state), Some(adaptive)) = (
            Self::run_of(runs, PolicySpec::per_state()),
            Self::run_of(runs, PolicySpec::adaptive()),
        ) else {
            out.push(Target {
                name: format!("{workload}: per-state and adaptive ran"),
                met: false,
                figure: 0.0,
                unit: "",
                digits: 1,
                text: "one did not".into(),
            });
            return;
        };
        let (g, a) = (goodput(per_state), goodput(adaptive));
        let ratio = g / a;
        let versus = format!(
            "{g:.2} vs adaptive {a:.2} ({:+.2}%); per-state k = {}",
            100.0 * (ratio - 1.0),
            per_state
                .state_controller
                .as_ref()
                .map(|c| {
                    c.draft_lens
                        .iter()
                        .map(usize::to_string)
                        .collect::<Vec<_>>()
                        .join(" / ")
                })
                .unwrap_or_default()
        );
        let (name, met) = Self::per_state_bound(workload, ratio);
        out.push(Target {
            name,
            met,
            figure: 100.0 * (ratio - 1.0),
            unit: "% over adaptive",
            digits: 2,
            text: versus,
        });
        if workload == Workload::Bursty {
            // The bound per-state keeps on every workload (at most 0.5%
            // below adaptive) holds here too.
            out.push(Target {
                name: format!(
                    "{workload}: per-state loses at most {}% to adaptive",
                    100.0 * PER_STATE_MAX_LOSS
                ),
                met: ratio >= 1.0 - PER_STATE_MAX_LOSS,
                figure: 100.0 * (ratio - 1.0),
                unit: "% over adaptive",
                digits: 2,
                text: format!("{:+.2}%", 100.0 * (ratio - 1.0)),
            });
        }
        if workload == Workload::Mixed {
            out.push(Self::mixed_per_state_target(
                workload, runs, per_state, adaptive,
            ));
        }
    }

    /// The bound `per-state`'s goodput `ratio` to adaptive's must meet on
    /// `workload` (see [`per_state_targets`](Self::per_state_targets)):
    /// the target's name, and whether it is met.
    fn per_state_bound(workload: Workload, ratio: f64) -> (String, bool) {
        match workload {
            Workload::Bursty => (
                format!(
                    "{workload}: per-state earns at least {PER_STATE_BURSTY}x adaptive's goodput"
                ),
                ratio >= PER_STATE_BURSTY,
            ),
            Workload::Steady => (
                format!(
                    "{workload}: per-state loses at most {}% to adaptive",
                    100.0 * PER_STATE_STEADY_LOSS
                ),
                ratio >= 1.0 - PER_STATE_STEADY_LOSS,
            ),
            _ => (
                format!(
                    "{workload}: per-state loses at most {}% to adaptive",
                    100.0 * PER_STATE_MAX_LOSS
                ),
                ratio >= 1.0 - PER_STATE_MAX_LOSS,
            ),
        }
    }

    /// On `mixed`: `per-state` at least as good as the best static k.
    fn mixed_per_state_target(
        workload: Workload,
        runs: &[(PolicySpec, &Run)],
        per_state: &Summary,
        adaptive: &Summary,
    ) -> Target {
        let (g, a) = (goodput(per_state), goodput(adaptive));
        let oracle = Self::oracle(runs);
        let best = oracle.overall.1;
        Target {
            name: format!(
                "{workload}: per-state at least as good as the best static k (adaptive is not)"
            ),
            met: g >= best,
            figure: 100.0 * (g / best - 1.0),
            unit: "% over the best static k",
            digits: 1,
            text: format!(
                "per-state {g:.2}, best static k = {} {best:.2}, adaptive {a:.2} ({:+.1}%, \
                 mean draft length {:.2})",
                oracle.overall.0,
                100.0 * (a / best - 1.0),
                adaptive.overall.mean_draft_len.unwrap_or(0.0)
            ),
        }
    }

    /// The adaptive controller's targets on one workload.
    fn adaptive_targets(workload: Workload, runs: &[(PolicySpec, &Run)], out: &mut Vec<Target>) {
        let oracle = Self::oracle(runs);
        let adaptive = runs
            .iter()
            .find(|(p, _)| *p == PolicySpec::adaptive())
            .and_then(|(_, r)| r.as_ref().ok());
        let Some(adaptive) = adaptive else {
            out.push(Target {
                name: format!("{workload}: adaptive ran"),
                met: false,
                figure: 0.0,
                unit: "",
                digits: 1,
                text: "it did not".into(),
            });
            return;
        };
        let g = goodput(adaptive);
        if workload == Workload::Transition {
            let ratio = g / oracle.overall.1;
            out.push(Target {
                name: format!("{workload}: adaptive beats every static k overall"),
                met: ratio > 1.0,
                figure: 100.0 * (ratio - 1.0),
                unit: "% over the best static k",
                digits: 1,
                text: format!(
                    "{g:.2} vs best static k = {} at {:.2} ({:+.1}%)",
                    oracle.overall.0,
                    oracle.overall.1,
                    100.0 * (ratio - 1.0)
                ),
            });
        }
        out.push(Self::settled_target(workload, adaptive, &oracle));
        out.push(Self::switches_target(workload, adaptive));
        out.push(Self::peer_target(workload, adaptive, runs));
    }

    /// Adaptive's share of each phase's best static k once settled.
    fn settled_target(workload: Workload, adaptive: &Summary, oracle: &Oracle) -> Target {
        let settled: Vec<_> = adaptive
            .phases
            .iter()
            .zip(&oracle.settled)
            .map(|(p, o)| p.settled.goodput.unwrap_or(0.0) / o.1)
            .collect();
        let worst = settled.iter().copied().fold(f64::INFINITY, f64::min);
        Target {
            name: format!(
                "{workload}: adaptive reaches {:.0}% of each phase's best static k once settled",
                100.0 * SETTLED_SHARE
            ),
            met: worst >= SETTLED_SHARE,
            figure: 100.0 * worst,
            unit: "% in its worst phase",
            digits: 1,
            text: settled
                .iter()
                .map(|r| format!("{:.1}%", 100.0 * r))
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    /// Adaptive's switches in its busiest phase.
    fn switches_target(workload: Workload, adaptive: &Summary) -> Target {
        let most = adaptive
            .phases
            .iter()
            .map(|p| p.figures.switches)
            .fold(0.0, f64::max);
        Target {
            name: format!("{workload}: adaptive switches at most {FEW_SWITCHES} times per phase"),
            met: most <= FEW_SWITCHES,
            figure: most,
            unit: "switches in its busiest phase",
            digits: 1,
            text: format!("at most {most} (in all {})", adaptive.overall.switches),
        }
    }

    /// Adaptive against the best batch-level peer rule: goodput, and
    /// fewer switches.
    fn peer_target(workload: Workload, adaptive: &Summary, runs: &[(PolicySpec, &Run)]) -> Target {
        let g = goodput(adaptive);
        let peers: Vec<(PolicySpec, &Summary)> = runs
            .iter()
            // The batch-level peer rules.
            .filter(|(p, _)| p.kind() == Kind::Peer && !p.per_request())
            .filter_map(|(p, r)| r.as_ref().ok().map(|s| (*p, s)))
            .collect();
        let name = format!(
            "{workload}: adaptive at least as good as the best batch-level peer rule, \
                 switching less"
        );
        match peers
            .iter()
            .max_by(|a, b| goodput(a.1).total_cmp(&goodput(b.1)))
        {
            None => Target {
                name,
                met: false,
                figure: 0.0,
                unit: "",
                digits: 1,
                text: "no peer rule ran".into(),
            },
            Some((peer, ps)) => {
                let ratio = g / goodput(ps);
                Target {
                    name,
                    met: ratio >= 1.0 && adaptive.overall.switches < ps.overall.switches,
                    figure: 100.0 * (ratio - 1.0),
                    unit: "% over the best peer",
                    digits: 1,
                    text: format!(
                        "best peer {peer}: goodput {g:.2} vs {:.2} ({:+.1}%), switches {} vs {}",
                        goodput(ps),
                        100.0 * (ratio - 1.0),
                        adaptive.overall.switches,
                        ps.overall.switches
                    ),
                }
            }
        }
    }
}

/// Each target across every seed: on how many it is met, and the range of
/// its figure.
pub(super) fn robustness(tables: &[Table]) -> String {
    let Some(first) = tables.first() else {
        return String::new();
    };
    let mut out = format!(
        "\nThe same targets on seeds {} to {} (the same settings):\n\n",
        first.seed,
        first.seed + tables.len() as u64 - 1
    );
    let all: Vec<Vec<Target>> = tables.iter().map(Table::targets).collect();
    for (i, target) in all[0].iter().enumerate() {
        let figures: Vec<f64> = all
            .iter()
            .filter_map(|t| t.get(i))
            .map(|t| t.figure)
            .collect();
        let met = all
            .iter()
            .filter_map(|t| t.get(i))
            .filter(|t| t.met)
            .count();
        let (lo, hi) = figures
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &f| {
                (lo.min(f), hi.max(f))
            });
        let mean = figures.iter().sum::<f64>() / figures.len() as f64;
        let d = target.digits;
        let _ = writeln!(
            out,
            "- {}: met on {met} of {} seeds; {} from {lo:.d$} to {hi:.d$} (mean {mean:.d$})",
            target.name,
            tables.len(),
            target.unit,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use specdec_sim::summary::{Figures, Phase};

    /// Figures with the given goodput (100 cost units) and switches.
    fn figures(goodput: f64, switches: f64) -> Figures {
        Figures {
            steps: 100,
            tokens: (goodput * 100.0) as u64,
            cost_units: 100.0,
            goodput: Some(goodput),
            mean_draft_len: Some(1.0),
            switches,
            tokens_per_request_step: None,
            drafted_per_request_step: None,
        }
    }

    /// A transition run with these per-phase goodputs (settled equal to
    /// the whole phase) and switches.
    fn run(policy: PolicySpec, phases: &[f64], switches: &[f64]) -> Summary {
        let overall = phases.iter().sum::<f64>() / phases.len() as f64;
        Summary {
            policy: policy.to_string(),
            workload: "transition",
            seed: 1,
            max_draft_len: MAX_DRAFT_LEN,
            workers: 2,
            max_batch: 32,
            cost_linear: CostLinear {
                base: 1.0,
                per_token: 0.1,
            },
            cost_rule: "scheduled".into(),
            step_us: 8000,
            interval_ms: 1000,
            update_ms: 250,
            phase_seconds: 20.0,
            persistence: 30.0,
            state_rule: "library".into(),
            virtual_time: true,
            seconds: 20.0 * phases.len() as f64,
            settle_seconds: 3.0,
            overall: figures(overall, switches.iter().sum()),
            phases: phases
                .iter()
                .zip(switches)
                .enumerate()
                .map(|(index, (&g, &sw))| Phase {
                    index,
                    name: "phase",
                    start_s: 20.0 * index as f64,
                    end_s: 20.0 * (index + 1) as f64,
                    figures: figures(g, sw),
                    settled: figures(g, 0.0),
                })
                .collect(),
            controller: None,
            state_controller: None,
        }
    }

    fn targets_of(runs: Vec<(PolicySpec, Run)>) -> Vec<Target> {
        let args = Args::parse_from(["policy_table"]);
        let table = Table {
            args: &args,
            seed: 1,
            rows: vec![(
                Workload::Transition,
                runs.iter().map(|(p, r)| (*p, r)).collect(),
            )],
        };
        let oracle = Table::oracle(&table.rows[0].1);
        // The best static k of each phase, and overall.
        assert_eq!(oracle.all, [(1, 10.0), (2, 9.0)]);
        assert_eq!(oracle.overall, (2, 8.5));
        assert!(
            table
                .render()
                .contains("| transition | *oracle* (best static k) | 8.50 (k = 2) |")
        );
        table.targets()
    }

    #[test]
    fn the_oracle_is_the_best_static_k_per_phase_and_the_targets_compare_with_it() {
        let statics = vec![
            (
                PolicySpec::fixed(1),
                Ok(run(PolicySpec::fixed(1), &[10.0, 5.0], &[0.0, 0.0])),
            ),
            (
                PolicySpec::fixed(2),
                Ok(run(PolicySpec::fixed(2), &[8.0, 9.0], &[0.0, 0.0])),
            ),
        ];
        // Adaptive at the oracle in both phases: beats every static k, 100%
        // of each phase, 1 and 2 switches; the SGLang run is better still.
        let mut runs = statics.clone();
        runs.push((
            PolicySpec::adaptive(),
            Ok(run(PolicySpec::adaptive(), &[10.0, 9.0], &[1.0, 2.0])),
        ));
        runs.push((
            PolicySpec::named("sglang").unwrap(),
            Ok(run(
                PolicySpec::named("sglang").unwrap(),
                &[10.0, 9.2],
                &[4.0, 4.0],
            )),
        ));
        // Per-state as good as adaptive: within 0.5% of it.
        runs.push((
            PolicySpec::per_state(),
            Ok(run(PolicySpec::per_state(), &[10.0, 9.0], &[2.0, 2.0])),
        ));
        let met: Vec<bool> = targets_of(runs).iter().map(|t| t.met).collect();
        assert_eq!(met, [true, true, true, false, true]);

        // Adaptive at 94% of the second phase's oracle, 4 switches in it,
        // and ahead of a peer that switches more: the settled and switches
        // targets fail, the peer target holds.
        let mut runs = statics;
        runs.push((
            PolicySpec::adaptive(),
            Ok(run(PolicySpec::adaptive(), &[10.0, 8.46], &[0.0, 4.0])),
        ));
        runs.push((
            PolicySpec::named("vllm-44336").unwrap(),
            Ok(run(
                PolicySpec::named("vllm-44336").unwrap(),
                &[9.0, 8.0],
                &[50.0, 50.0],
            )),
        ));
        // Per-state 0.9% below adaptive (9.15 against 9.23): missed.
        runs.push((
            PolicySpec::per_state(),
            Ok(run(PolicySpec::per_state(), &[9.9, 8.4], &[0.0, 0.0])),
        ));
        let targets = targets_of(runs);
        let met: Vec<bool> = targets.iter().map(|t| t.met).collect();
        assert_eq!(
            met,
            [true, false, false, true, false],
            "{:?}",
            targets.iter().map(|t| &t.text).collect::<Vec<_>>()
        );
        assert!((targets[1].figure - 94.0).abs() < 1e-9);
        assert_eq!(targets[2].figure, 4.0);
        assert!((targets[4].figure - 100.0 * (9.15 / 9.23 - 1.0)).abs() < 1e-9);
    }

    /// Per-state's targets against adaptive on `workload`, with per-state
    /// at `per_state` and adaptive at 10 (both phases alike).
    fn per_state_targets(workload: Workload, per_state: f64) -> Vec<(String, bool)> {
        let runs: Vec<(PolicySpec, Run)> = vec![
            (
                PolicySpec::fixed(1),
                Ok(run(PolicySpec::fixed(1), &[10.05, 10.05], &[0.0, 0.0])),
            ),
            (
                PolicySpec::fixed(2),
                Ok(run(PolicySpec::fixed(2), &[9.0, 9.0], &[0.0, 0.0])),
            ),
            (
                PolicySpec::adaptive(),
                Ok(run(PolicySpec::adaptive(), &[10.0, 10.0], &[0.0, 0.0])),
            ),
            (
                PolicySpec::per_state(),
                Ok(run(
                    PolicySpec::per_state(),
                    &[per_state, per_state],
                    &[0.0, 0.0],
                )),
            ),
        ];
        let runs: Vec<(PolicySpec, &Run)> = runs.iter().map(|(p, r)| (*p, r)).collect();
        let mut out = Vec::new();
        Table::per_state_targets(workload, &runs, &mut out);
        out.into_iter().map(|t| (t.name, t.met)).collect()
    }

    #[test]
    fn per_state_targets_are_issue_18s() {
        let met = |w, g| -> Vec<bool> {
            per_state_targets(w, g)
                .into_iter()
                .map(|(_, m)| m)
                .collect()
        };
        // Bursty: at least 1.08 times adaptive (and within 0.5%, a fortiori).
        assert_eq!(met(Workload::Bursty, 10.81), [true, true]);
        assert_eq!(met(Workload::Bursty, 10.79), [false, true]);
        assert!(
            per_state_targets(Workload::Bursty, 10.8)[0]
                .0
                .contains("1.08x")
        );
        // Steady: at most 0.2% below.
        assert_eq!(met(Workload::Steady, 9.981), [true]);
        assert_eq!(met(Workload::Steady, 9.979), [false]);
        // Any other: at most 0.5% below.
        assert_eq!(met(Workload::Classes, 9.951), [true]);
        assert_eq!(met(Workload::Classes, 9.949), [false]);
        // Mixed also against the best static k (10.05 here).
        assert_eq!(met(Workload::Mixed, 10.06), [true, true]);
        assert_eq!(met(Workload::Mixed, 10.04), [true, false]);
    }
}
