//! `whatif --plot FILE.svg`: goodput against the static draft length, with
//! the controllers, the peer rules and the oracle as level lines.
//!
//! The static lengths `0..=K` are one line with a dot per length (the best
//! one ringed and labelled where no line crosses its name); every other
//! policy is a horizontal line at its goodput across the whole width,
//! named at its right end, so that "does the controller reach the best
//! static k?" and "how far is the oracle?" are read at a glance. Names go
//! at their lines' heights, moved apart only as far as they must be, with
//! a leader when moved ([`super::label_layout`]). When lines of different
//! goodputs are crowded into one band of colour (at K = 8, lines 0.3%
//! apart on an axis from k = 0's goodput), a panel beside the chart shows
//! that band zoomed, the best static length in it if it is, names its
//! lines there and marks the span on the chart. Text is drawn as SVG
//! `<text>` elements (no font library), as in the heatmap.

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use specdec_sim::policy::PolicySpec;
use specdec_sim::whatif::WhatIf;

use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::render::label_layout::{Rect, clear_spot, place_labels};
use crate::render::whatif::{kind, policy_name};

/// The colours of the policies' lines, by the stable index of their row
/// in the engine model's table of policies (`PolicyDef::index`): the
/// category palette of matplotlib ("tab10"), black for the oracle (index
/// 7), and the static lengths' blue at index 2 (they are drawn as dots,
/// in [`STATIC_BLUE`]). A row past the palette takes its colours again,
/// in turn.
const PALETTE: [RGBColor; 13] = [
    RGBColor(214, 39, 40),   // 0 adaptive
    RGBColor(44, 160, 44),   // 1 per-state
    STATIC_BLUE,             // 2 static
    RGBColor(148, 103, 189), // 3 sglang
    RGBColor(140, 86, 75),   // 4 vllm-44336
    RGBColor(227, 119, 194), // 5 smartspec
    RGBColor(188, 189, 34),  // 6 vllm-av
    RGBColor(0, 0, 0),       // 7 oracle
    RGBColor(255, 152, 150), // 8 adaptive-censored: adaptive's, lighter
    RGBColor(152, 223, 138), // 9 per-state-censored: per-state's, lighter
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

/// The size of the whole picture; a zoomed panel of the level lines, when
/// there is one, widens it by [`ZOOM_WIDTH`].
const SIZE: (u32, u32) = (1100, 730);

/// The width of the zoomed panel, its labels included.
const ZOOM_WIDTH: u32 = 340;

/// The width of the zoomed panel's goodput axis, its numbers.
const ZOOM_AXIS: u32 = 50;

/// The plotting area's height in pixels, near enough to tell which lines
/// are crowded on it (the chart's caption and axes take the rest).
const PLOT_HEIGHT: f64 = 598.0;

/// Level lines closer than this, in pixels, look like one band.
const CROWDED: f64 = 6.0;

/// The colour marking the span the panel zooms.
const ZOOM_GREY: RGBColor = RGBColor(150, 150, 150);

/// The level lines' names: their font size and the height each takes.
const NAME_FONT: f64 = 13.0;
const NAME_HEIGHT: f64 = 15.0;

/// The plot in order: the axes, the static lengths, the other policies'
/// level lines, the key and the lines' names; and, when some lie too close
/// together to be told apart, a panel beside the chart with them zoomed,
/// where their names go.
fn draw(w: &WhatIf, out: &mut String) -> Result<(), Box<dyn std::error::Error>> {
    let max = w.settings.max_draft_len;
    let (statics, others) = (static_goodputs(w), other_goodputs(w));
    let best = best_static(&statics);
    let (y0, y1) = y_range(&statics, &others);
    let lines: Vec<f64> = others
        .iter()
        .map(|o| o.1)
        .chain(best.map(|b| b.1))
        .collect();
    let zoom = zoom_range(&lines, (y0, y1), PLOT_HEIGHT / (y1 - y0));
    let zoomed = |g: f64| zoom.is_some_and(|(z0, z1)| (z0..=z1).contains(&g));
    let width = SIZE.0 + if zoom.is_some() { ZOOM_WIDTH } else { 0 };
    let root = SVGBackend::with_string(out, (width, SIZE.1)).into_drawing_area();
    root.fill(&WHITE)?;
    // The trace, the step cost and the load in the title: plots of one
    // trace at several costs or loads, or of several traces, are told
    // apart at a glance.
    let name = std::path::Path::new(&w.source)
        .file_name()
        .map_or_else(|| w.source.clone(), |n| n.to_string_lossy().into_owned());
    let caption = format!(
        "{name}: goodput by policy, K = {max}, step cost {}, {} in flight{} ({} requests)",
        super::whatif::cost_text(w),
        w.settings.batch,
        match w.settings.load {
            specdec_sim::whatif::Load::Once => "",
            specdec_sim::whatif::Load::Saturated => " kept full",
        },
        w.traces.requests().len()
    );
    let (left, right) = root.split_horizontally(SIZE.0);
    let mut chart = ChartBuilder::on(&left)
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
    draw_levels(&mut chart, &others, (-0.5, max as f64 + 0.5))?;
    if let Some(b) = best {
        name_best(&root, &chart, &statics, &others, b)?;
    }
    // A key in words under the axis (a legend box would hide points).
    root.draw(&Text::new(
        "dots: every static k; solid: the controllers (adaptive, per-state); \
         dashed: other engines' rules and per-step hindsight (oracle)",
        (110, 706),
        ("sans-serif", 14).into_font().color(&RGBColor(90, 90, 90)),
    ))?;
    // The lines outside the zoom (all of them without one) are named on
    // the chart, the others in the zoomed panel.
    let (inside, outside): (Vec<_>, Vec<_>) = others.iter().partition(|o| zoomed(o.1));
    let names = |lines: &[(PolicySpec, f64)], d: usize| -> Vec<(String, RGBColor, f64)> {
        lines
            .iter()
            .map(|&(p, g)| (format!("{} {g:.d$}", policy_name(p)), colour(p), g))
            .collect()
    };
    name_levels(&root, &chart, &names(&outside, 2), max as f64 + 0.5)?;
    if let Some((z0, z1)) = zoom {
        // As many decimals as tell the zoomed lines apart, two at least.
        let d = (-((z1 - z0) / 20.0).log10()).ceil().clamp(2.0, 6.0) as usize;
        let mut inner = names(&inside, d);
        let best = best.filter(|b| zoomed(b.1));
        if let Some((b, g)) = best {
            inner.push((format!("best static (k = {b}) {g:.d$}"), STATIC_BLUE, g));
        }
        let panel = draw_zoom(&root, &right, &chart, &inside, best, (z0, z1))?;
        name_levels(&root, &panel, &inner, 1.0)?;
    }
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

/// The best static length and its goodput (the shortest of equals).
fn best_static(statics: &[(usize, f64)]) -> Option<(usize, f64)> {
    statics
        .iter()
        .fold(None, |b: Option<(usize, f64)>, &s| match b {
            Some(b) if b.1 >= s.1 => Some(b),
            _ => Some(s),
        })
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

/// The goodput range of the zoomed panel, if there is to be one, given
/// the goodputs of the lines (the level lines and the best static length),
/// the chart's axis `y0..y1` and its pixels per unit of goodput.
///
/// Lines under [`CROWDED`] pixels apart look like one band. The lines are
/// grouped into runs of such neighbours; a run holding two different
/// goodputs needs the zoom. The panel spans every such run, with a margin,
/// when that is under a quarter of the axis; otherwise the run of the most
/// lines (the highest of equals) alone. No run, no panel.
fn zoom_range(lines: &[f64], (y0, y1): (f64, f64), px_per_unit: f64) -> Option<(f64, f64)> {
    let mut sorted = lines.to_vec();
    sorted.sort_by(f64::total_cmp);
    // Runs of neighbours: (lowest, highest, how many lines).
    let mut runs: Vec<(f64, f64, usize)> = Vec::new();
    for g in sorted {
        match runs.last_mut() {
            Some(run) if (g - run.1) * px_per_unit < CROWDED => *run = (run.0, g, run.2 + 1),
            _ => runs.push((g, g, 1)),
        }
    }
    runs.retain(|r| r.1 > r.0);
    let (first, last) = (runs.first()?, runs.last()?);
    let (lo, hi) = if last.1 - first.0 < (y1 - y0) / 4.0 {
        (first.0, last.1)
    } else {
        let run = runs.iter().max_by_key(|r| r.2).expect("a run");
        (run.0, run.1)
    };
    let pad = ((hi - lo) * 0.1).max(hi.abs() * 5e-4).max(1e-9);
    Some((lo - pad, hi + pad))
}

/// The static lengths: a line with a dot per length, the best ringed.
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
    if let Some((k, g)) = best_static(statics) {
        chart.draw_series([Circle::new((k as f64, g), 9, blue.stroke_width(2))])?;
    }
    Ok(())
}

/// The best static length's name beside its ring, where no line crosses
/// it and inside the chart (outside it, it would meet the level lines'
/// names).
fn name_best(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    chart: &Chart<'_, '_>,
    statics: &[(usize, f64)],
    others: &[(PolicySpec, f64)],
    (k, g): (usize, f64),
) -> Result<(), Box<dyn std::error::Error>> {
    let area = chart.plotting_area();
    let px = |x: f64, y: f64| {
        let (a, b) = area.map_coordinate(&(x, y));
        (f64::from(a), f64::from(b))
    };
    let (xs, ys) = area.get_pixel_range();
    let bounds = Rect {
        left: f64::from(xs.start),
        top: f64::from(ys.start),
        right: f64::from(xs.end),
        bottom: f64::from(ys.end),
    };
    let mut segments: Vec<_> = statics
        .windows(2)
        .map(|p| (px(p[0].0 as f64, p[0].1), px(p[1].0 as f64, p[1].1)))
        .collect();
    segments.extend(others.iter().map(|o| {
        (
            (bounds.left, px(0.0, o.1).1),
            (bounds.right, px(0.0, o.1).1),
        )
    }));
    // The dots, ringed best included.
    let dots: Vec<Rect> = statics
        .iter()
        .map(|&(k2, g2)| {
            let r = if k2 == k { 11.0 } else { 5.0 };
            Rect::centred(px(k2 as f64, g2), (2.0 * r, 2.0 * r))
        })
        .collect();
    let text = format!("best static: k = {k}");
    // Sans-serif at 15 px: about 0.6 em a character, with room to spare.
    let size = (text.chars().count() as f64 * 9.0, 18.0);
    let at = clear_spot(px(k as f64, g), size, 9.0, &bounds, &segments, &dots);
    root.draw(&Text::new(
        text,
        (at.0.round() as i32, at.1.round() as i32),
        ("sans-serif", 15)
            .into_font()
            .color(&STATIC_BLUE)
            .pos(Pos::new(HPos::Center, VPos::Center)),
    ))?;
    Ok(())
}

/// Every other policy: a level line at its goodput across `xs`, dashed for
/// other engines' rules and the oracle.
fn draw_levels(
    chart: &mut Chart<'_, '_>,
    others: &[(PolicySpec, f64)],
    xs: (f64, f64),
) -> Result<(), Box<dyn std::error::Error>> {
    for &(policy, g) in others {
        let c = colour(policy);
        let style = if kind(policy) == "controller" {
            c.stroke_width(3)
        } else {
            c.stroke_width(1)
        };
        let line = [(xs.0, g), (xs.1, g)];
        if kind(policy) == "peer" || kind(policy) == "oracle" {
            chart.draw_series(DashedLineSeries::new(line, 8, 5, style))?;
        } else {
            chart.draw_series(LineSeries::new(line, style))?;
        }
    }
    Ok(())
}

/// The panel beside the chart: the goodputs `z0..z1` of the level lines
/// and the best static length, zoomed, and the span it magnifies marked on
/// the chart's right edge. Returns the panel's chart, for the lines' names.
fn draw_zoom<'a, 'b>(
    root: &DrawingArea<SVGBackend<'b>, Shift>,
    area: &'a DrawingArea<SVGBackend<'b>, Shift>,
    chart: &Chart<'_, 'b>,
    others: &[(PolicySpec, f64)],
    best: Option<(usize, f64)>,
    (z0, z1): (f64, f64),
) -> Result<Chart<'a, 'b>, Box<dyn std::error::Error>> {
    let mut zoomed = ChartBuilder::on(area)
        // The chart's caption height, so that the two plotting areas
        // share their top and bottom edges.
        .caption(" ", ("sans-serif", 18))
        .margin(16)
        .margin_left(40)
        .margin_bottom(40)
        .margin_right(160)
        .x_label_area_size(50)
        .y_label_area_size(ZOOM_AXIS)
        .build_cartesian_2d(0f64..1f64, z0..z1)?;
    zoomed
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .x_desc("zoomed: the span in grey")
        .axis_desc_style(("sans-serif", 13))
        .y_label_style(("sans-serif", 11))
        .max_light_lines(1)
        .light_line_style(RGBColor(238, 238, 238))
        .draw()?;
    draw_levels(&mut zoomed, others, (0.0, 1.0))?;
    if let Some((_, g)) = best {
        zoomed.draw_series(LineSeries::new(
            [(0.0, g), (1.0, g)],
            STATIC_BLUE.stroke_width(2),
        ))?;
        zoomed.draw_series([Circle::new((0.5, g), 4, STATIC_BLUE.filled())])?;
    }
    // The magnified span: a grey bar on the chart's right edge, at least
    // 8 pixels tall. (Lines joining it to the panel would cross names.)
    let from = chart.plotting_area();
    let (xs, _) = from.get_pixel_range();
    let (_, top) = from.map_coordinate(&(0.0, z1));
    let (_, bottom) = from.map_coordinate(&(0.0, z0));
    let middle = (top + bottom) / 2;
    let (top, bottom) = (top.min(middle - 4), bottom.max(middle + 4));
    root.draw(&Rectangle::new(
        [(xs.end - 3, top), (xs.end + 1, bottom)],
        ZOOM_GREY.filled(),
    ))?;
    Ok(zoomed)
}

/// The level lines' names at the right edge of `chart` (at `right`, in its
/// coordinates): each at its line's height where there is room, otherwise
/// moved apart as little as will keep them clear of each other, with a
/// short leader from its line's end.
fn name_levels(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    chart: &Chart<'_, '_>,
    names: &[(String, RGBColor, f64)],
    right: f64,
) -> Result<(), Box<dyn std::error::Error>> {
    let area = chart.plotting_area();
    let (_, ys) = area.get_pixel_range();
    let ends: Vec<(i32, i32)> = names
        .iter()
        .map(|n| area.map_coordinate(&(right, n.2)))
        .collect();
    let wanted: Vec<f64> = ends.iter().map(|e| f64::from(e.1)).collect();
    // Half a name's height of room above the top and below the bottom.
    let placed = place_labels(
        &wanted,
        NAME_HEIGHT,
        f64::from(ys.start) - NAME_HEIGHT / 2.0,
        f64::from(ys.end) + NAME_HEIGHT / 2.0,
    );
    for ((text, c, _), (&(x, y), at)) in names.iter().zip(ends.iter().zip(placed)) {
        let at = at.round() as i32;
        if (at - y).abs() > 1 {
            root.draw(&PathElement::new(
                [(x + 1, y), (x + 5, y), (x + 11, at)],
                c.stroke_width(1),
            ))?;
        }
        root.draw(&Text::new(
            text.clone(),
            (x + 14, at),
            ("sans-serif", NAME_FONT)
                .into_font()
                .color(c)
                .pos(Pos::new(HPos::Left, VPos::Center)),
        ))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The zoom for lines at `lines` on the axis `y0..y1` of the chart.
    fn zoom(lines: &[f64], (y0, y1): (f64, f64)) -> Option<(f64, f64)> {
        zoom_range(lines, (y0, y1), PLOT_HEIGHT / (y1 - y0))
    }

    #[test]
    fn lines_within_a_percent_on_a_full_axis_are_zoomed() {
        // Goodput 29 at k = 0 up to 119.44 at k = 8, the lines (the best
        // static's last) within 118.82..119.44: on the axis, one band.
        let lines = [
            119.13, 119.13, 119.32, 119.44, 118.82, 119.38, 123.79, 119.44,
        ];
        let (z0, z1) = zoom(&lines, (20.0, 130.0)).unwrap();
        assert!(z0 < 118.82 && z1 > 119.44 && z1 - z0 < 1.0, "{z0}..{z1}");
        // Lines 11 pixels apart or more: no zoom.
        assert_eq!(
            zoom(&[1.85, 1.89, 2.36, 2.46, 2.53, 1.01, 2.93], (0.9, 3.0)),
            None
        );
        // Lines of one goodput are one line: no zoom tells them apart.
        assert_eq!(zoom(&[7.42, 7.42, 5.0], (4.5, 7.6)), None);
        assert_eq!(zoom(&[], (0.0, 2.0)), None);
    }

    #[test]
    fn a_line_far_from_the_band_is_left_out_of_the_zoom() {
        // One rule at 1.01 while the rest crowd 5.65..5.79 on 0.9..6.2:
        // spanning both would be the axis again.
        let lines = [5.69, 5.67, 5.65, 5.73, 5.73, 1.01, 5.79, 5.74];
        let (z0, z1) = zoom(&lines, (0.9, 6.2)).unwrap();
        assert!(
            z0 > 5.6 && z0 < 5.65 && z1 > 5.79 && z1 < 5.85,
            "{z0}..{z1}"
        );
        // Two crowded runs near each other: one panel spans both.
        let lines = [7.42, 7.422, 7.436, 7.25, 7.149, 7.141, 7.141];
        let (z0, z1) = zoom(&lines, (4.5, 7.6)).unwrap();
        assert!(z0 < 7.141 && z1 > 7.436 && z1 - z0 < 0.4, "{z0}..{z1}");
        // Two crowded runs far apart: the one of more lines.
        let lines = [1.0, 1.001, 5.0, 5.001, 5.002];
        let (z0, z1) = zoom(&lines, (0.0, 6.0)).unwrap();
        assert!(z0 > 4.9 && z1 < 5.1, "{z0}..{z1}");
    }

    #[test]
    fn the_zoom_rules_hold_at_their_edges() {
        // Neighbours exactly 6 pixels apart are not crowded.
        assert_eq!(zoom_range(&[0.0, 6.0], (0.0, 100.0), 1.0), None);
        assert!(zoom_range(&[0.0, 5.9], (0.0, 100.0), 1.0).is_some());
        // Of two runs far apart, the one of more lines, though lower.
        let (z0, z1) = zoom_range(&[1.0, 1.001, 1.002, 5.0, 5.001], (0.0, 6.0), 1000.0).unwrap();
        assert!(z0 > 0.9 && z1 < 1.1, "{z0}..{z1}");
        // Runs spanning exactly a quarter of the axis: not both.
        let (z0, _) = zoom_range(&[2.0, 2.004, 2.996, 3.0], (0.0, 4.0), 1000.0).unwrap();
        assert!(z0 > 2.9, "{z0}");
        // A quarter of 100..140 is 10: runs 4 apart are zoomed together,
        // runs 19 apart are not.
        let (z0, z1) =
            zoom_range(&[101.0, 101.001, 105.0, 105.001], (100.0, 140.0), 1000.0).unwrap();
        assert!(z0 < 101.0 && z1 > 105.001, "{z0}..{z1}");
        let lines = [101.0, 101.001, 120.0, 120.001, 120.002];
        let (z0, _) = zoom_range(&lines, (100.0, 140.0), 1000.0).unwrap();
        assert!(z0 > 119.0, "{z0}");
    }
}
