//! `--plot FILE.svg`: a heatmap of the row-normalised histogram.
//!
//! Draft length `k` runs up the vertical axis, accepted count `a` along the
//! horizontal one; cell `(a, k)` is coloured by `H[k][a] / steps(k)`, the
//! share of row `k`'s steps that accepted exactly `a`. Choices, and why:
//!
//! - **Colour on a square-root scale** (viridis: dark is 0, yellow is 100%),
//!   with a titled colour bar whose ticks are placed on that scale. Shares
//!   are mostly small, the more so as `K` grows (a row of 65 cells): on a
//!   linear scale everything below 10% is one shade of dark.
//! - **`k = 0` is not coloured.** Its one cell holds all of its row's steps
//!   whatever happens — with nothing drafted there is nothing to accept — so
//!   on the scale it would be a bright 100% cell that says nothing and
//!   outshines the rest. It is drawn in a neutral grey, labelled `n/a`;
//!   its row label still carries its steps.
//! - **Labels never round to a lie.** For `K <= 12` each cell shows its
//!   percentage; a non-zero share that rounds to 0 reads `<1%`, a share
//!   below 100% that rounds to 100 reads `>99%`. Above `K = 12` the cells
//!   are too small for text and carry none.
//! - **Every cell has a tooltip**, an SVG `<title>` with its `k`, `a`, count
//!   and share, whatever `K`.
//! - Each row label carries the row's number of steps; cells of unobserved
//!   rows are light grey; cells with `a > k` (outside the triangle) stay
//!   white.
//!
//! Axes, caption and colour bar are drawn with plotters' SVG backend and its
//! built-in text estimate (the `<text>` elements are rendered by whatever
//! shows the SVG, so no font library is needed to build or to run). The
//! cells are written as SVG of our own, one `<rect>` with its `<title>` per
//! cell, at the pixel positions of plotters' chart, since plotters has no
//! tooltips.

use std::fmt::Write as _;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use specdec_metrics::AcceptanceHistogram;

use crate::format::group_digits;

/// Cell labels are drawn up to this `K`; above it the cells get too small.
const MAX_K_WITH_CELL_LABELS: usize = 12;

/// Cells of draft lengths that were never observed.
const UNOBSERVED: RGBColor = RGBColor(235, 235, 235);

/// The `k = 0` cell: observed, but with no share worth a colour.
const NO_SHARE: RGBColor = RGBColor(190, 190, 190);

/// Ticks of the colour bar, as shares.
const TICKS: [f64; 8] = [0.0, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0];

/// Renders the heatmap as an SVG document.
pub fn render_svg(h: &AcceptanceHistogram) -> Result<String, String> {
    let mut svg = String::new();
    let cells = draw_frame(h, &mut svg).map_err(|e| format!("cannot draw the plot: {e}"))?;
    let end = svg
        .rfind("</svg>")
        .ok_or("cannot draw the plot: the SVG backend wrote no closing tag")?;
    svg.insert_str(end, &cells);
    Ok(svg)
}

/// Where a share sits on the colour scale, `0..=1`.
fn scale(share: f64) -> f64 {
    share.clamp(0.0, 1.0).sqrt()
}

fn colour(share: f64) -> RGBColor {
    ViridisRGB.get_color(scale(share) as f32)
}

/// A cell's label: its share in whole percent, never rounded to 0% when
/// something is there nor to 100% when something is missing.
fn cell_label(count: u64, steps: u64) -> String {
    let share = count as f64 / steps as f64;
    let rounded = (share * 100.0).round();
    if count > 0 && rounded == 0.0 {
        "<1%".into()
    } else if count < steps && rounded == 100.0 {
        ">99%".into()
    } else {
        format!("{rounded:.0}%")
    }
}

/// A share for a tooltip, one decimal, with the same care as [`cell_label`].
fn precise_share(count: u64, steps: u64) -> String {
    let percent = count as f64 / steps as f64 * 100.0;
    if count > 0 && percent < 0.05 {
        "<0.1%".into()
    } else if count < steps && percent >= 99.95 {
        ">99.9%".into()
    } else {
        format!("{percent:.1}%")
    }
}

/// Draws caption, axes and colour bar into `out`; returns the cells as SVG
/// to insert before the closing tag.
fn draw_frame(
    h: &AcceptanceHistogram,
    out: &mut String,
) -> Result<String, Box<dyn std::error::Error>> {
    let max = h.max_draft_len();
    let (width, height) = (980u32, 820u32);
    let root = SVGBackend::with_string(out, (width, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let (main, bar) = root.split_horizontally(width - 150);

    let top = max as f64 + 0.5;
    let steps = h.num_spec_steps();
    let caption = format!(
        "Acceptance by draft length, row-normalised (K = {max}, {} step{})",
        group_digits(steps),
        if steps == 1 { "" } else { "s" }
    );
    let row_steps: Vec<u64> = (0..=max).map(|k| h.row_steps(k)).collect();
    let label_w = row_steps
        .iter()
        .enumerate()
        .map(|(k, &n)| format!("{k} (n={})", group_digits(n)).len())
        .max()
        .unwrap_or(1) as u32;
    let mut chart = ChartBuilder::on(&main)
        .caption(caption, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(64)
        .y_label_area_size(40 + 9 * label_w)
        .build_cartesian_2d(-0.5f64..top, -0.5f64..top)?;

    let at_integer =
        |v: f64| ((v - v.round()).abs() < 1e-6 && v >= -1e-6).then(|| v.round() as usize);
    let x_fmt = |v: &f64| at_integer(*v).map_or_else(String::new, |a| a.to_string());
    let y_fmt = |v: &f64| match at_integer(*v) {
        Some(k) if k <= max && row_steps[k] > 0 => {
            format!("{k} (n={})", group_digits(row_steps[k]))
        }
        Some(k) => k.to_string(),
        None => String::new(),
    };
    let labels = (max + 1).min(17);
    chart
        .configure_mesh()
        .disable_mesh()
        .x_labels(labels)
        .y_labels(labels)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .x_desc("accepted a    (light grey: draft length not observed; k = 0: nothing drafted, no share)")
        .y_desc("draft length k (n = steps)")
        .label_style(("sans-serif", 17))
        .axis_desc_style(("sans-serif", 18))
        .draw()?;

    let cells = cells_svg(h, &row_steps, |x, y| chart.backend_coord(&(x, y)));

    colour_bar(&root, &bar)?;

    root.present()?;
    Ok(cells)
}

/// The colour scale in `bar`, titled, its ticks placed on the square-root
/// scale (ticks and title in absolute pixels, on `root`).
fn colour_bar(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    bar: &DrawingArea<SVGBackend<'_>, Shift>,
) -> Result<(), Box<dyn std::error::Error>> {
    let scale_chart = ChartBuilder::on(bar)
        .margin_top(56)
        .margin_bottom(80)
        .margin_right(70)
        .margin_left(8)
        .build_cartesian_2d(0f64..1f64, 0f64..1f64)?;
    const BANDS: usize = 200;
    scale_chart.plotting_area().draw(&Rectangle::new(
        [(0.0, 0.0), (1.0, 1.0)],
        BLACK.stroke_width(1),
    ))?;
    for i in 0..BANDS {
        let (lo, hi) = (i as f64 / BANDS as f64, (i + 1) as f64 / BANDS as f64);
        let mid = (lo + hi) / 2.0;
        scale_chart.plotting_area().draw(&Rectangle::new(
            [(0.0, lo), (1.0, hi)],
            ViridisRGB.get_color(mid as f32).filled(),
        ))?;
    }
    let tick_style = TextStyle::from(("sans-serif", 15).into_font())
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    // Ticks and title in absolute pixels, on the root area.
    for share in TICKS {
        let (x, y) = scale_chart.backend_coord(&(1.0, scale(share)));
        root.draw(&PathElement::new([(x, y), (x + 5, y)], BLACK))?;
        root.draw(&Text::new(
            format!("{}%", share * 100.0),
            (x + 8, y),
            tick_style.clone(),
        ))?;
    }
    let (x_left, y_top) = scale_chart.backend_coord(&(0.0, 1.0));
    let (_, y_bottom) = scale_chart.backend_coord(&(0.0, 0.0));
    let title_style = TextStyle::from(("sans-serif", 16).into_font())
        .color(&BLACK)
        .transform(FontTransform::Rotate270)
        .pos(Pos::new(HPos::Center, VPos::Bottom));
    root.draw(&Text::new(
        "share of the steps of row k (square-root scale)",
        (x_left - 6, (y_top + y_bottom) / 2),
        title_style,
    ))?;
    Ok(())
}

/// The cells as SVG: one `<rect>` per cell of the triangle with its
/// `<title>`, then the labels. `to_px` maps chart coordinates to pixels.
fn cells_svg(
    h: &AcceptanceHistogram,
    row_steps: &[u64],
    to_px: impl Fn(f64, f64) -> (i32, i32),
) -> String {
    let max = h.max_draft_len();
    let labelled = max <= MAX_K_WITH_CELL_LABELS;
    // Labels fit their cells: 18 px at K = 3, 15 px at K = 12.
    let (cell_w, _) = to_px(1.0, 0.0);
    let cell_w = cell_w - to_px(0.0, 0.0).0;
    let font = (cell_w * 3 / 10).clamp(10, 18);
    let stroke = if labelled { 1.0 } else { 0.3 };
    let mut rects = format!("<g class=\"cells\" stroke=\"white\" stroke-width=\"{stroke}\">\n");
    let mut texts = format!(
        "<g class=\"cell-labels\" font-family=\"sans-serif\" font-size=\"{font}\" text-anchor=\"middle\" pointer-events=\"none\">\n"
    );
    for (k, &steps) in row_steps.iter().enumerate() {
        let Some(row) = h.row(k) else { continue };
        for (a, &count) in row.iter().enumerate() {
            let (x, y) = (a as f64, k as f64);
            let (x0, y0) = to_px(x - 0.5, y + 0.5);
            let (x1, y1) = to_px(x + 0.5, y - 0.5);
            let (fill, title, label) = if steps == 0 {
                (UNOBSERVED, format!("k = {k}: not observed"), None)
            } else if k == 0 {
                (
                    NO_SHARE,
                    format!(
                        "k = 0, a = 0: {} step{} with nothing drafted (no share to show)",
                        group_digits(count),
                        if count == 1 { "" } else { "s" }
                    ),
                    Some(("n/a".to_string(), BLACK)),
                )
            } else {
                let share = count as f64 / steps as f64;
                let ink = if scale(share) > 0.6 { BLACK } else { WHITE };
                (
                    colour(share),
                    format!(
                        "k = {k}, a = {a}: {} of {} steps ({})",
                        group_digits(count),
                        group_digits(steps),
                        precise_share(count, steps)
                    ),
                    Some((cell_label(count, steps), ink)),
                )
            };
            let _ = writeln!(
                rects,
                "<rect x=\"{x0}\" y=\"{y0}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}</title></rect>",
                x1 - x0,
                y1 - y0,
                hex(fill),
                xml_text(&title)
            );
            if let (true, Some((text, ink))) = (labelled, label) {
                let _ = writeln!(
                    texts,
                    "<text x=\"{}\" y=\"{}\" fill=\"{}\">{}</text>",
                    (x0 + x1) / 2,
                    // The baseline, so that the digits sit in the middle.
                    (y0 + y1) / 2 + font * 7 / 20,
                    hex(ink),
                    xml_text(&text)
                );
            }
        }
    }
    rects.push_str("</g>\n");
    texts.push_str("</g>\n");
    rects + &texts
}

/// Text as SVG character data.
fn xml_text(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn hex(c: RGBColor) -> String {
    format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cells' `<rect>` lines: (fill, title).
    fn cell_rects(svg: &str) -> Vec<(String, String)> {
        let start = svg.find("<g class=\"cells\"").expect("a cell group");
        svg[start..]
            .lines()
            .skip(1)
            .take_while(|l| l.starts_with("<rect"))
            .map(|l| {
                let fill = l.split("fill=\"").nth(1).unwrap()[..7].to_string();
                let title = l.split("<title>").nth(1).unwrap();
                (fill, unescape(&title[..title.find("</title>").unwrap()]))
            })
            .collect()
    }

    /// The cell labels, in the order of the cells.
    fn labels(svg: &str) -> Vec<String> {
        let start = svg.find("<g class=\"cell-labels\"").expect("a label group");
        svg[start..]
            .lines()
            .skip(1)
            .take_while(|l| l.starts_with("<text"))
            .map(|l| unescape(&l[l.find('>').unwrap() + 1..l.find("</text>").unwrap()]))
            .collect()
    }

    fn unescape(s: &str) -> String {
        s.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&")
    }

    #[test]
    fn svg_with_cells_and_labels() {
        let mut h = AcceptanceHistogram::new(3).unwrap();
        for (k, a) in [(3, 0), (3, 3), (3, 2), (3, 3), (1, 1)] {
            h.observe(k, a).unwrap();
        }
        let svg = render_svg(&h).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..100]);
        assert!(svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("3 (n=4)"), "row labels carry the steps");
        assert_eq!(
            labels(&svg),
            // Row 0 unobserved (no label), row 1, row 2 unobserved, row 3.
            ["0%", "100%", "25%", "0%", "25%", "50%"]
        );
        assert!(svg.contains("share of the steps of row k (square-root scale)"));
    }

    #[test]
    fn labels_never_round_to_zero_or_to_one_hundred() {
        assert_eq!(cell_label(0, 1000), "0%");
        assert_eq!(cell_label(1, 1000), "<1%");
        assert_eq!(cell_label(4, 1000), "<1%");
        assert_eq!(cell_label(5, 1000), "1%");
        assert_eq!(cell_label(995, 1000), ">99%");
        assert_eq!(cell_label(994, 1000), "99%");
        assert_eq!(cell_label(1000, 1000), "100%");
        assert_eq!(precise_share(1, 1_000_000), "<0.1%");
        assert_eq!(precise_share(999_999, 1_000_000), ">99.9%");
        assert_eq!(precise_share(1, 8), "12.5%");

        let mut h = AcceptanceHistogram::new(3).unwrap();
        for (a, n) in [(0, 998), (2, 1), (3, 1)] {
            for _ in 0..n {
                h.observe(3, a).unwrap();
            }
        }
        let svg = render_svg(&h).unwrap();
        assert_eq!(labels(&svg), [">99%", "0%", "<1%", "<1%"]);
    }

    #[test]
    fn every_cell_has_a_tooltip_with_its_count_and_share() {
        for max in [1, 3, 12, 64] {
            let mut h = AcceptanceHistogram::new(max).unwrap();
            h.observe(max, 1).unwrap();
            h.observe(0, 0).unwrap();
            let svg = render_svg(&h).unwrap();
            let cells = cell_rects(&svg);
            assert_eq!(cells.len(), (max + 1) * (max + 2) / 2, "K = {max}");
            assert_eq!(svg.matches("<title>").count(), cells.len());
            assert_eq!(
                cells[0].1,
                "k = 0, a = 0: 1 step with nothing drafted (no share to show)"
            );
            let row_start = max * (max + 1) / 2;
            assert_eq!(
                cells[row_start + 1].1,
                format!("k = {max}, a = 1: 1 of 1 steps (100.0%)")
            );
            assert_eq!(
                cells[row_start].1,
                format!("k = {max}, a = 0: 0 of 1 steps (0.0%)")
            );
            if max > 1 {
                assert_eq!(cells[1].1, "k = 1: not observed");
            }
        }
        let mut h = AcceptanceHistogram::new(3).unwrap();
        for _ in 0..1233 {
            h.observe(3, 2).unwrap();
        }
        h.observe(3, 3).unwrap();
        let svg = render_svg(&h).unwrap();
        assert!(svg.contains("<title>k = 3, a = 2: 1,233 of 1,234 steps (99.9%)</title>"));
        assert!(svg.contains("<title>k = 3, a = 3: 1 of 1,234 steps (0.1%)</title>"));
        let mut h = AcceptanceHistogram::new(3).unwrap();
        for _ in 0..10_000 {
            h.observe(3, 2).unwrap();
        }
        h.observe(3, 3).unwrap();
        let svg = render_svg(&h).unwrap();
        assert!(svg.contains("<title>k = 3, a = 2: 10,000 of 10,001 steps (&gt;99.9%)</title>"));
        assert!(svg.contains("<title>k = 3, a = 3: 1 of 10,001 steps (&lt;0.1%)</title>"));
    }

    #[test]
    fn large_k_keeps_tooltips_and_drops_cell_labels() {
        let mut h = AcceptanceHistogram::new(64).unwrap();
        for k in 1..=64 {
            h.observe(k, k / 2).unwrap();
        }
        let svg = render_svg(&h).unwrap();
        assert!(labels(&svg).is_empty());
        assert_eq!(cell_rects(&svg).len(), 65 * 66 / 2);
        assert!(svg.contains("(K = 64, 64 steps)"));
        // At K = 12 the cells are still labelled.
        let mut h = AcceptanceHistogram::new(12).unwrap();
        h.observe(12, 3).unwrap();
        assert_eq!(labels(&render_svg(&h).unwrap()).len(), 13);
    }

    #[test]
    fn the_k0_cell_is_neutral_not_the_top_of_the_scale() {
        let mut h = AcceptanceHistogram::new(3).unwrap();
        for _ in 0..10_000 {
            h.observe(0, 0).unwrap();
        }
        h.observe(2, 1).unwrap();
        h.observe(2, 2).unwrap();
        let svg = render_svg(&h).unwrap();
        let cells = cell_rects(&svg);
        let top = hex(colour(1.0));
        assert_eq!(cells[0].0, hex(NO_SHARE));
        assert!(
            cells.iter().all(|(fill, _)| *fill != top),
            "no cell at 100%"
        );
        assert_eq!(labels(&svg)[0], "n/a");
        // A row of k >= 1 that accepts all at 100% does reach the top.
        let mut h = AcceptanceHistogram::new(3).unwrap();
        h.observe(0, 0).unwrap();
        h.observe(2, 2).unwrap();
        let cells = cell_rects(&render_svg(&h).unwrap());
        assert_eq!(cells.iter().filter(|(fill, _)| *fill == top).count(), 1);
        assert_eq!(cells[0].0, hex(NO_SHARE));
    }

    #[test]
    fn empty_histogram() {
        let svg = render_svg(&AcceptanceHistogram::new(1).unwrap()).unwrap();
        let cells = cell_rects(&svg);
        assert_eq!(cells.len(), 3);
        assert!(cells.iter().all(|(fill, _)| *fill == hex(UNOBSERVED)));
        assert!(svg.contains("(K = 1, 0 steps)"));
    }
}
