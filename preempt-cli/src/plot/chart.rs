//! One panel of a figure: its axes (shared with the other panels), the reference lines, each
//! line with its spread (a band, or error bars on a categorical axis) and markers. No legend
//! here: the figure has one, below the panels.
use super::DrawError;
use super::legend::Legend;
use super::{Grid, Linear, Panel, Place, REF_STYLES, Scale, axis_ticks, ticks};
use plotters::coord::Shift;
use plotters::prelude::*;

/// Draws `panel` into `area` over the shared ranges `xr` and `yr`.
pub(super) fn draw_panel(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    g: &Grid,
    panel: &Panel,
    legend: &Legend,
    place: Place,
    xr: (f64, f64),
    yr: (f64, f64),
) -> Result<(), DrawError> {
    let (x_major, x_minor) = axis_ticks(g.x.scale, xr);
    let (y_major, y_minor) = axis_ticks(g.y.scale, yr);
    let names = g.x_names;
    let x_fmt = |v: &f64| -> String {
        if names.is_empty() {
            return ticks::fmt_num(*v);
        }
        let i = crate::num::round_u64(*v);
        usize::try_from(i)
            .ok()
            .and_then(|i| names.get(i))
            .cloned()
            .unwrap_or_default()
    };
    let y_fmt = |v: &f64| ticks::fmt_num(*v);
    let categorical = !names.is_empty();
    let x_desc = if place.bottom { g.x.title.as_str() } else { "" };
    let y_desc = if place.left { g.y.title.as_str() } else { "" };

    macro_rules! draw {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(x_desc)
                .y_desc(y_desc)
                .x_label_formatter(&x_fmt)
                .y_label_formatter(&y_fmt)
                .label_style(("sans-serif", 13))
                .axis_desc_style(("sans-serif", 15))
                .bold_line_style(BLACK.mix(0.15))
                .light_line_style(BLACK.mix(0.05))
                .draw()?;
            for r in &panel.refs {
                let (c, dash, gap) = REF_STYLES[legend.ref_style(&r.label) % REF_STYLES.len()];
                chart.draw_series(DashedLineSeries::new(
                    r.points.iter().copied(),
                    dash,
                    gap,
                    c.stroke_width(2),
                ))?;
            }
            for s in &panel.series {
                let c = legend.color(&s.label);
                if !s.spread.is_empty() && !categorical {
                    let band: Vec<(f64, f64)> = s
                        .spread
                        .iter()
                        .map(|p| (p.0, p.2))
                        .chain(s.spread.iter().rev().map(|p| (p.0, p.1)))
                        .collect();
                    chart.draw_series(std::iter::once(Polygon::new(band, c.mix(0.18).filled())))?;
                }
                if categorical {
                    chart.draw_series(
                        s.spread
                            .iter()
                            .map(|&(x, lo, hi)| ErrorBar::new_vertical(x, lo, lo, hi, c.stroke_width(2), 12)),
                    )?;
                }
                if s.connect {
                    chart.draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))?;
                }
                chart.draw_series(s.points.iter().map(|&p| Circle::new(p, 4, c.filled())))?;
            }
        }};
    }
    let mut b = ChartBuilder::on(area);
    if !panel.title.is_empty() {
        b.caption(panel.title.as_str(), ("sans-serif", 15));
    }
    b.margin(12)
        .x_label_area_size(if place.bottom { 48 } else { 28 })
        .y_label_area_size(if place.left { 72 } else { 48 });
    let x_lin = Linear::new(xr, x_major.clone(), x_minor.clone());
    let y_lin = Linear::new(yr, y_major.clone(), y_minor.clone());
    let log = |r: (f64, f64), major: Vec<f64>, minor: Vec<f64>| {
        (r.0..r.1).log_scale().with_key_points(major).with_light_points(minor)
    };
    match (g.x.scale == Scale::Log, g.y.scale == Scale::Log) {
        (true, true) => draw!(b.build_cartesian_2d(log(xr, x_major, x_minor), log(yr, y_major, y_minor))?),
        (true, false) => draw!(b.build_cartesian_2d(log(xr, x_major, x_minor), y_lin)?),
        (false, true) => draw!(b.build_cartesian_2d(x_lin, log(yr, y_major, y_minor))?),
        (false, false) => draw!(b.build_cartesian_2d(x_lin, y_lin)?),
    }
    Ok(())
}
