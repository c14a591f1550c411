//! `--plot FILE.svg`: a heatmap of the row-normalised histogram.
//!
//! Draft length `k` runs up the vertical axis, accepted count `a` along the
//! horizontal one; cell `(a, k)` is coloured by `H[k][a] / steps(k)`, the
//! share of the row's steps that accepted exactly `a` (viridis: dark is 0,
//! yellow is 100%). Each row label carries the row's number of steps. Cells
//! of unobserved rows are light grey; cells with `a > k` (outside the
//! triangle) stay white. For `K <= 12` each cell is also labelled with its
//! percentage.
//!
//! Drawn with plotters' SVG backend and its built-in text estimate: the
//! `<text>` elements are rendered by whatever shows the SVG, so no font
//! library is needed to build or to run.

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use specdec_metrics::AcceptanceHistogram;

/// Cell labels are drawn up to this `K`; above it the cells get too small.
const MAX_K_WITH_CELL_LABELS: usize = 12;

/// Renders the heatmap as an SVG document.
pub fn render_svg(h: &AcceptanceHistogram) -> Result<String, String> {
    let mut svg = String::new();
    draw(h, &mut svg).map_err(|e| format!("cannot draw the plot: {e}"))?;
    Ok(svg)
}

fn draw(h: &AcceptanceHistogram, out: &mut String) -> Result<(), Box<dyn std::error::Error>> {
    let max = h.max_draft_len();
    let (width, height) = (960u32, 800u32);
    let root = SVGBackend::with_string(out, (width, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let (main, bar) = root.split_horizontally(width - 120);

    let top = max as f64 + 0.5;
    let steps = h.num_spec_steps();
    let caption = format!(
        "Acceptance by draft length, row-normalised (K = {max}, {steps} step{})",
        if steps == 1 { "" } else { "s" }
    );
    let mut chart = ChartBuilder::on(&main)
        .caption(caption, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(110)
        .build_cartesian_2d(-0.5f64..top, -0.5f64..top)?;

    let row_steps: Vec<u64> = (0..=max).map(|k| h.row_steps(k)).collect();
    let at_integer =
        |v: f64| ((v - v.round()).abs() < 1e-6 && v >= -1e-6).then(|| v.round() as usize);
    let x_fmt = |v: &f64| at_integer(*v).map_or_else(String::new, |a| a.to_string());
    let y_fmt = |v: &f64| match at_integer(*v) {
        Some(k) if k <= max && row_steps[k] > 0 => format!("{k} (n={})", row_steps[k]),
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
        .x_desc("accepted a    (grey: draft length not observed)")
        .y_desc("draft length k (steps)")
        .label_style(("sans-serif", 17))
        .axis_desc_style(("sans-serif", 18))
        .draw()?;

    let unobserved = RGBColor(235, 235, 235);
    let mut cells = Vec::with_capacity((max + 1) * (max + 2) / 2);
    let mut texts = Vec::new();
    for (k, &steps) in row_steps.iter().enumerate() {
        let Some(row) = h.row(k) else { continue };
        for (a, &count) in row.iter().enumerate() {
            let (x, y) = (a as f64, k as f64);
            let corners = [(x - 0.5, y - 0.5), (x + 0.5, y + 0.5)];
            if steps == 0 {
                cells.push(Rectangle::new(corners, unobserved.filled()));
                continue;
            }
            let share = count as f64 / steps as f64;
            cells.push(Rectangle::new(
                corners,
                ViridisRGB.get_color(share as f32).filled(),
            ));
            if max <= MAX_K_WITH_CELL_LABELS {
                let ink: &'static RGBColor = if share > 0.6 { &BLACK } else { &WHITE };
                let style = TextStyle::from(("sans-serif", 18).into_font())
                    .color(ink)
                    .pos(Pos::new(HPos::Center, VPos::Center));
                texts.push(Text::new(format!("{:.0}%", share * 100.0), (x, y), style));
            }
        }
    }
    chart.draw_series(cells)?;
    chart.draw_series(texts)?;

    // The colour scale.
    let mut scale = ChartBuilder::on(&bar)
        .margin_top(56)
        .margin_bottom(64)
        .margin_right(24)
        .y_label_area_size(52)
        .build_cartesian_2d(0f64..1f64, 0f64..1f64)?;
    scale
        .configure_mesh()
        .disable_mesh()
        .disable_x_axis()
        .y_labels(6)
        .y_label_formatter(&|v| format!("{:.0}%", v * 100.0))
        .label_style(("sans-serif", 17))
        .draw()?;
    const STEPS: usize = 100;
    scale.draw_series((0..STEPS).map(|i| {
        let lo = i as f64 / STEPS as f64;
        let hi = (i + 1) as f64 / STEPS as f64;
        let mid = (lo + hi) / 2.0;
        Rectangle::new(
            [(0.0, lo), (1.0, hi)],
            ViridisRGB.get_color(mid as f32).filled(),
        )
    }))?;

    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn svg_with_cells_and_labels() {
        let mut h = AcceptanceHistogram::new(3).unwrap();
        for (k, a) in [(3, 0), (3, 3), (3, 2), (3, 3), (1, 1)] {
            h.observe(k, a).unwrap();
        }
        let svg = render_svg(&h).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..100]);
        assert!(svg.contains("</svg>"));
        assert!(svg.contains("<text"), "labels are SVG text");
        assert!(svg.contains("3 (n=4)"), "row labels carry the steps");
        let texts: Vec<&str> = svg.lines().map(str::trim).collect();
        assert!(
            texts.contains(&"50%"),
            "cell (3, 3) holds 2 of the 4 steps of row 3"
        );
        assert!(texts.contains(&"25%"));
        assert!(texts.iter().any(|t| t.starts_with("accepted a")));
        assert!(svg.contains("<rect"));
    }

    #[test]
    fn empty_and_large_k() {
        assert!(render_svg(&AcceptanceHistogram::new(1).unwrap()).is_ok());
        let mut h = AcceptanceHistogram::new(64).unwrap();
        h.observe(64, 10).unwrap();
        let svg = render_svg(&h).unwrap();
        assert!(svg.contains("(K = 64, 1 step)"));
    }
}
