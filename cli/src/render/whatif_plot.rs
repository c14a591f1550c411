//! `whatif --plot FILE.svg`: goodput against the static draft length, with
//! the controllers, the peer rules and the oracle as level lines.
//!
//! The static lengths `0..=K` are one line with a dot per length (the best
//! one ringed and labelled); every other policy is a horizontal line at
//! its goodput across the whole width, labelled at the right edge and in
//! the legend, so that "does the controller reach the best static k?" and
//! "how far is the oracle?" are read at a glance. Text is drawn as SVG
//! `<text>` elements (no font library), as in the heatmap.

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use specdec_sim::policy::PolicySpec;
use specdec_sim::whatif::WhatIf;

use crate::render::whatif::{kind, policy_name};

/// The colours of the policies' lines, by the stable index of their row
/// in the engine model's table of policies (`PolicyDef::index`): the
/// category palette of matplotlib ("tab10"), black for the oracle (index
/// 7), and the static lengths' blue at index 2 (they are drawn as dots,
/// in [`STATIC_BLUE`]). A row past the palette takes its colours again,
/// in turn.
const PALETTE: [RGBColor; 11] = [
    RGBColor(214, 39, 40),   // 0 adaptive
    RGBColor(44, 160, 44),   // 1 per-state
    STATIC_BLUE,             // 2 static
    RGBColor(148, 103, 189), // 3 sglang
    RGBColor(140, 86, 75),   // 4 vllm-44336
    RGBColor(227, 119, 194), // 5 smartspec
    RGBColor(188, 189, 34),  // 6 vllm-av
    RGBColor(0, 0, 0),       // 7 oracle
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
    RGBColor(127, 127, 127),
];

/// The static lengths' line and dots.
const STATIC_BLUE: RGBColor = RGBColor(31, 119, 180);

/// The colour of a policy's line.
pub fn colour(policy: PolicySpec) -> RGBColor {
    PALETTE[policy.def().index % PALETTE.len()]
}

/// Renders the plot as an SVG document.
pub fn render_svg(w: &WhatIf) -> Result<String, String> {
    let mut svg = String::new();
    draw(w, &mut svg).map_err(|e| format!("cannot draw the plot: {e}"))?;
    Ok(svg)
}

/// The chart the plot draws on: static draft length against goodput.
type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The plot in order: the axes, the static lengths, the other policies'
/// level lines, the key and the lines' names.
fn draw(w: &WhatIf, out: &mut String) -> Result<(), Box<dyn std::error::Error>> {
    let max = w.settings.max_draft_len;
    let (statics, others) = (static_goodputs(w), other_goodputs(w));
    let (y0, y1) = y_range(&statics, &others);
    let root = SVGBackend::with_string(out, (1100, 730)).into_drawing_area();
    root.fill(&WHITE)?;
    // The trace and the step cost in the title: plots of one trace at
    // several costs, or of several traces, are told apart at a glance.
    let name = std::path::Path::new(&w.source)
        .file_name()
        .map_or_else(|| w.source.clone(), |n| n.to_string_lossy().into_owned());
    let caption = format!(
        "{name}: goodput by policy, K = {max}, step cost {}, {} in flight ({} requests)",
        super::whatif::cost_text(w),
        w.settings.batch,
        w.traces.requests().len()
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 18))
        .margin(16)
        .margin_bottom(40)
        .margin_right(150)
        .x_label_area_size(50)
        .y_label_area_size(80)
        .build_cartesian_2d(-0.5f64..max as f64 + 0.5, y0..y1)?;
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
        // One light line between two labelled ones, not ten per k.
        .max_light_lines(1)
        .light_line_style(RGBColor(238, 238, 238))
        .draw()?;
    draw_statics(&mut chart, &statics)?;
    draw_levels(&mut chart, &others, max)?;
    // A key in words under the axis (a legend box would hide points).
    root.draw(&Text::new(
        "dots: every static k; solid: the controllers (adaptive, per-state); \
         dashed: other engines' rules and per-step hindsight (oracle)",
        (110, 706),
        ("sans-serif", 14).into_font().color(&RGBColor(90, 90, 90)),
    ))?;
    name_levels(&root, &chart, &others, max, y0)?;
    root.present()?;
    Ok(())
}

/// The goodput of each static length, `(k, goodput)`.
fn static_goodputs(w: &WhatIf) -> Vec<(usize, f64)> {
    w.results
        .iter()
        .filter_map(|r| r.policy.static_len().map(|k| (k, r.goodput())))
        .collect()
}

/// The goodput of every policy but the static lengths, in the order
/// replayed.
fn other_goodputs(w: &WhatIf) -> Vec<(PolicySpec, f64)> {
    w.results
        .iter()
        .filter(|r| r.policy.static_len().is_none())
        .map(|r| (r.policy, r.goodput()))
        .collect()
}

/// The goodput axis: every goodput, with a margin, from 0 at the lowest.
fn y_range(statics: &[(usize, f64)], others: &[(PolicySpec, f64)]) -> (f64, f64) {
    let all = statics
        .iter()
        .map(|s| s.1)
        .chain(others.iter().map(|o| o.1));
    let (lo, hi) = all.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), g| {
        (lo.min(g), hi.max(g))
    });
    let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.01).max(1e-9);
    ((lo - pad).max(0.0), hi + pad)
}

/// The static lengths: a line with a dot per length, the best ringed and
/// labelled.
fn draw_statics(
    chart: &mut Chart<'_, '_>,
    statics: &[(usize, f64)],
) -> Result<(), Box<dyn std::error::Error>> {
    let blue = STATIC_BLUE;
    chart.draw_series(LineSeries::new(
        statics.iter().map(|&(k, g)| (k as f64, g)),
        blue.stroke_width(2),
    ))?;
    chart.draw_series(
        statics
            .iter()
            .map(|&(k, g)| Circle::new((k as f64, g), 4, blue.filled())),
    )?;
    if let Some(&(k, g)) = statics
        .iter()
        .fold(None, |b: Option<&(usize, f64)>, s| match b {
            Some(b) if b.1 >= s.1 => Some(b),
            _ => Some(s),
        })
    {
        chart.draw_series([Circle::new((k as f64, g), 9, blue.stroke_width(2))])?;
        // Above the ring, clear of the line.
        chart.draw_series([EmptyElement::at((k as f64, g))
            + Text::new(
                format!("best static: k = {k}"),
                (-60, -30),
                ("sans-serif", 15).into_font().color(&blue),
            )])?;
    }
    Ok(())
}

/// Every other policy: a level line at its goodput across the width,
/// dashed for other engines' rules and the oracle.
fn draw_levels(
    chart: &mut Chart<'_, '_>,
    others: &[(PolicySpec, f64)],
    max: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    for &(policy, g) in others {
        let c = colour(policy);
        let style = if kind(policy) == "controller" {
            c.stroke_width(3)
        } else {
            c.stroke_width(1)
        };
        let line = [(-0.5, g), (max as f64 + 0.5, g)];
        if kind(policy) == "peer" || kind(policy) == "oracle" {
            chart.draw_series(DashedLineSeries::new(line, 8, 5, style))?;
        } else {
            chart.draw_series(LineSeries::new(line, style))?;
        }
    }
    Ok(())
}

/// The level lines' names and goodputs at the right edge, highest first,
/// never on top of each other.
fn name_levels(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    chart: &Chart<'_, '_>,
    others: &[(PolicySpec, f64)],
    max: usize,
    y0: f64,
) -> Result<(), Box<dyn std::error::Error>> {
    // Names at the right edge, where the level lines end.
    let area = chart.plotting_area();
    let (px, _) = area.map_coordinate(&(max as f64 + 0.5, y0));
    let mut placed: Vec<i32> = Vec::new();
    let mut labels: Vec<(PolicySpec, f64)> = others.to_vec();
    labels.sort_by(|a, b| b.1.total_cmp(&a.1));
    for (policy, g) in labels {
        let (_, mut py) = area.map_coordinate(&(0.0, g));
        // Never on top of the label above.
        if let Some(&last) = placed.last() {
            py = py.max(last + 15);
        }
        placed.push(py);
        root.draw(&Text::new(
            format!("{} {:.2}", policy_name(policy), g),
            (px + 6, py - 7),
            ("sans-serif", 13).into_font().color(&colour(policy)),
        ))?;
    }
    Ok(())
}
