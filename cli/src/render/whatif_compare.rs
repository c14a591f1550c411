//! `whatif --compare A B`: two what-ifs of the same requests under two
//! drafting rules, side by side (a table, one JSON object, a plot of both),
//! and the engine setting of the one whose best static length earns more.

use std::fmt::Write as _;

use plotters::prelude::*;
use serde::Serialize;
use specdec_sim::policy::Kind;
use specdec_sim::whatif::{PolicyResult, WhatIf, best_static};

use crate::format::{group_digits, sanitize};
use crate::render::whatif::{
    Setting, best_drain_share, cost_text, engine_default, policy_name, settings,
};

/// One side of a comparison, as printed.
#[derive(Serialize)]
struct Side<'a> {
    source: &'a str,
    rule: String,
    /// `K`: the longest draft replayed (the flag, at most the traces' cap).
    max_draft_len: usize,
    /// The traces' `num_speculative_tokens`, and its goodput when replayed.
    engine_default: Option<(usize, Option<f64>)>,
    best_static: Option<(usize, f64)>,
    /// The share of the best static length's cost spent below a full
    /// batch: the replay's drain.
    best_static_drain_share: Option<f64>,
    /// Every controller and the oracle: `(name, goodput)`.
    others: Vec<(String, f64)>,
}

fn side(w: &WhatIf) -> Side<'_> {
    let goodput_at = |k: usize| {
        w.results
            .iter()
            .find(|r| r.policy.static_len() == Some(k))
            .map(PolicyResult::goodput)
    };
    Side {
        source: &w.source,
        rule: rule(w),
        max_draft_len: w.settings.max_draft_len,
        engine_default: engine_default(w).map(|k| (k, goodput_at(k))),
        best_static: best_static(&w.results)
            .and_then(|r| r.policy.static_len().map(|k| (k, r.goodput()))),
        best_static_drain_share: best_drain_share(w),
        others: w
            .results
            .iter()
            .filter(|r| matches!(r.policy.kind(), Kind::Controller | Kind::Oracle))
            .map(|r| (policy_name(r.policy), r.goodput()))
            .collect(),
    }
}

/// The traces' rule in a few words.
fn rule(w: &WhatIf) -> String {
    match w.traces.meta() {
        Some(m) => match &m.suffix {
            Some(s) => format!("suffix, depth {}", s.depth),
            None => format!("{}, n {}..={}", sanitize(&m.rule), m.min_n, m.max_n),
        },
        None => "rule unknown".into(),
    }
}

/// Which side's best static length earns more (`0`: A, `1`: B; A on a
/// tie), when both replayed static lengths.
fn winner(sides: &[Side<'_>; 2]) -> Option<usize> {
    let (a, b) = (sides[0].best_static?, sides[1].best_static?);
    Some(if b.1 > a.1 { 1 } else { 0 })
}

/// The comparison for people.
pub fn table(a: &WhatIf, b: &WhatIf) -> String {
    let sides = [side(a), side(b)];
    let mut out = String::new();
    let _ = writeln!(
        out,
        "compare on the same {} requests ({} output positions): A = {} ({}), B = {} ({})\n\
         {} requests in flight, step cost {} (d: mean tokens drafted per request), \
         controllers updated every {} engine steps",
        group_digits(a.traces.requests().len() as u64),
        group_digits(a.traces.positions()),
        a.source,
        sides[0].rule,
        b.source,
        sides[1].rule,
        a.settings.batch,
        cost_text(a),
        a.settings.interval,
    );
    let width = 26;
    let cell = |s: String| format!("{s:>width$}");
    let _ = writeln!(out, "\n{:<18}{}{}", "", cell("A".into()), cell("B".into()));
    let row = |out: &mut String, name: &str, f: &dyn Fn(&Side<'_>) -> String| {
        let _ = writeln!(
            out,
            "{name:<18}{}{}",
            cell(f(&sides[0])),
            cell(f(&sides[1]))
        );
    };
    row(&mut out, "K", &|s| s.max_draft_len.to_string());
    row(&mut out, "engine default", &|s| match s.engine_default {
        Some((k, Some(g))) => format!("k = {k}: {g:.3}"),
        Some((k, None)) => format!("k = {k}: above K"),
        None => "-".into(),
    });
    row(&mut out, "best static", &|s| match s.best_static {
        Some((k, g)) => format!("k = {k}: {g:.3}"),
        None => "-".into(),
    });
    // How much of it the replay's last requests cost, once the batch is
    // no longer full.
    row(&mut out, "  in the drain", &|s| {
        s.best_static_drain_share
            .map_or("-".into(), |d| format!("{:.0}% of its cost", d * 100.0))
    });
    let names: Vec<String> = sides[0].others.iter().map(|o| o.0.clone()).collect();
    for name in &names {
        row(&mut out, name, &|s| {
            let best = s.best_static.map(|b| b.1);
            s.others
                .iter()
                .find(|o| &o.0 == name)
                .map_or("-".into(), |&(_, g)| match best {
                    Some(best) if best > 0.0 => format!("{g:.3} (x{:.3})", g / best),
                    _ => format!("{g:.3}"),
                })
        });
    }
    out.push_str("(goodput: tokens per unit of step cost; x: over the same side's best static)\n");
    match winner(&sides) {
        None => out.push_str("\nno static draft length replayed on both sides: no winner\n"),
        Some(i) => {
            let (w, s, o) = if i == 0 {
                (a, &sides[0], &sides[1])
            } else {
                (b, &sides[1], &sides[0])
            };
            let (k, g) = s.best_static.expect("a winner has a best static");
            let other = o.best_static.expect("both sides have one").1;
            let _ = writeln!(
                out,
                "\nwinner: {} ({}) at k = {k}: {g:.3}, {:+.1}% over {}'s best static",
                ["A", "B"][i],
                s.rule,
                (g / other - 1.0) * 100.0,
                ["B", "A"][i],
            );
            let found = settings(w.traces.meta(), k);
            if found.is_empty() {
                out.push_str("no setting: the winner's traces have no metadata line\n");
            }
            for s in found {
                let _ = writeln!(out, "setting ({}): {}", s.engine, s.setting);
            }
        }
    }
    out
}

#[derive(Serialize)]
struct Json<'a> {
    requests: usize,
    positions: u64,
    batch: usize,
    a: Side<'a>,
    b: Side<'a>,
    /// `"A"` or `"B"`: whose best static length earns more.
    winner: Option<&'static str>,
    settings: Vec<Setting>,
}

/// The object of `--compare A B --format json`.
pub fn json<'a>(a: &'a WhatIf, b: &'a WhatIf) -> impl Serialize + 'a {
    let [sa, sb] = [side(a), side(b)];
    let sides = [sa, sb];
    let win = winner(&sides);
    let settings = win
        .and_then(|i| {
            let w = [a, b][i];
            sides[i]
                .best_static
                .map(|(k, _)| settings(w.traces.meta(), k))
        })
        .unwrap_or_default();
    let [sa, sb] = sides;
    Json {
        requests: a.traces.requests().len(),
        positions: a.traces.positions(),
        batch: a.settings.batch,
        a: sa,
        b: sb,
        winner: win.map(|i| ["A", "B"][i]),
        settings,
    }
}

/// A's colour and B's.
const COLOURS: [RGBColor; 2] = [RGBColor(31, 119, 180), RGBColor(230, 115, 0)];

/// Both what-ifs on one chart: each side's goodput by static length (dots
/// and a line), its controllers as solid level lines (adaptive thin,
/// per-state thick) and its oracle as a dashed one, in its colour.
pub fn render_svg(a: &WhatIf, b: &WhatIf) -> Result<String, String> {
    let mut svg = String::new();
    draw(a, b, &mut svg).map_err(|e| format!("cannot draw the plot: {e}"))?;
    Ok(svg)
}

fn draw(a: &WhatIf, b: &WhatIf, out: &mut String) -> Result<(), Box<dyn std::error::Error>> {
    let sides = [a, b];
    let statics: Vec<Vec<(f64, f64)>> = sides
        .iter()
        .map(|w| {
            w.results
                .iter()
                .filter_map(|r| r.policy.static_len().map(|k| (k as f64, r.goodput())))
                .collect()
        })
        .collect();
    let levels: Vec<Vec<(String, f64, bool)>> = sides
        .iter()
        .map(|w| {
            w.results
                .iter()
                .filter(|r| matches!(r.policy.kind(), Kind::Controller | Kind::Oracle))
                .map(|r| {
                    (
                        policy_name(r.policy),
                        r.goodput(),
                        r.policy.kind() == Kind::Oracle,
                    )
                })
                .collect()
        })
        .collect();
    let all: Vec<f64> = statics
        .iter()
        .flatten()
        .map(|p| p.1)
        .chain(levels.iter().flatten().map(|l| l.1))
        .filter(|g| g.is_finite())
        .collect();
    let (lo, hi) = all
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &g| {
            (lo.min(g), hi.max(g))
        });
    let (lo, hi) = if lo.is_finite() { (lo, hi) } else { (0.0, 1.0) };
    let pad = ((hi - lo) * 0.08).max(1e-3);
    let (y0, y1) = ((lo - pad).max(0.0), hi + pad);
    let max = a.settings.max_draft_len.max(b.settings.max_draft_len) as f64;
    let root = SVGBackend::with_string(out, (1100, 730)).into_drawing_area();
    root.fill(&WHITE)?;
    let name = |w: &WhatIf| {
        std::path::Path::new(&w.source)
            .file_name()
            .map_or_else(|| w.source.clone(), |n| n.to_string_lossy().into_owned())
    };
    let caption = format!(
        "goodput by policy: {} against {}, step cost {}, {} in flight",
        name(a),
        name(b),
        cost_text(a),
        a.settings.batch
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 18))
        .margin(16)
        .margin_right(30)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(-0.5f64..max + 0.5, y0..y1)?;
    chart
        .configure_mesh()
        .x_desc("static draft length k (0: no speculation)")
        .y_desc("goodput: tokens per unit of step cost")
        .x_label_formatter(&|v| {
            if (v - v.round()).abs() < 1e-6 && *v >= -1e-6 {
                format!("{}", v.round() as usize)
            } else {
                String::new()
            }
        })
        .max_light_lines(1)
        .light_line_style(RGBColor(238, 238, 238))
        .draw()?;
    for (i, w) in sides.iter().enumerate() {
        let colour = COLOURS[i];
        let label = format!("{}: {} static k", ["A", "B"][i], rule(w));
        chart
            .draw_series(LineSeries::new(
                statics[i].iter().copied(),
                colour.stroke_width(2),
            ))?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
            });
        chart.draw_series(
            statics[i]
                .iter()
                .map(|&p| Circle::new(p, 3, colour.filled())),
        )?;
        let right = w.settings.max_draft_len as f64 + 0.5;
        for (n, (policy, g, oracle)) in levels[i].iter().enumerate() {
            // The controllers told apart by width (the censored ones
            // lighter), the oracle dashed.
            let width = if *oracle { 1 } else { 1 + 2 * (n as u32 % 2) };
            let shade = if policy.to_string().ends_with("-censored") {
                colour.mix(0.4)
            } else {
                colour.mix(1.0)
            };
            let style = shade.stroke_width(width);
            let points = vec![(-0.5, *g), (right, *g)];
            let label = format!("{}: {policy} {g:.2}", ["A", "B"][i]);
            if *oracle {
                chart
                    .draw_series(DashedLineSeries::new(points, 6, 4, style))?
                    .label(label)
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(1))
                    });
            } else {
                chart
                    .draw_series(LineSeries::new(points, style))?
                    .label(label)
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], shade.stroke_width(width))
                    });
            }
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::MiddleRight)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .label_font(("sans-serif", 13))
        .draw()?;
    root.present()?;
    Ok(())
}
