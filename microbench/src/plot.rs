//! SVG plots of sweeps (plotters' SVG backend, no font dependencies).
use plotters::prelude::*;
use std::path::Path;

/// One line of a plot: a label and (x, y) points.
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// A line plot with markers: log-log (latency against T) or linear (overhead against threshold).
pub fn lines(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    log_log: bool,
    series: &[Series],
) -> Result<(), String> {
    let e = |x: &dyn std::fmt::Display| format!("plot {}: {x}", path.display());
    let all: Vec<(f64, f64)> = series.iter().flat_map(|s| s.points.iter().copied()).collect();
    if all.is_empty() {
        return Err(e(&"no data"));
    }
    let (xmin, xmax) = all
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (ymin, ymax) = all
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
    let root = SVGBackend::new(path, (800, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;

    let colors = [RED, BLUE, GREEN, MAGENTA, CYAN, BLACK];
    macro_rules! draw {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(x_label)
                .y_desc(y_label)
                .draw()
                .map_err(|x| e(&x))?;
            for (i, s) in series.iter().enumerate() {
                let c = colors[i % colors.len()];
                chart
                    .draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))
                    .map_err(|x| e(&x))?
                    .label(s.label.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
                chart
                    .draw_series(s.points.iter().map(|&p| Circle::new(p, 4, c.filled())))
                    .map_err(|x| e(&x))?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(|x| e(&x))?;
        }};
    }
    let mut b = ChartBuilder::on(&root);
    b.caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70);
    if log_log {
        let xr = (xmin * 0.8)..(xmax * 1.25);
        let yr = (ymin.max(1e-3) * 0.7)..(ymax * 1.5);
        draw!(
            b.build_cartesian_2d(xr.log_scale(), yr.log_scale())
                .map_err(|x| e(&x))?
        );
    } else {
        let pad = (xmax - xmin).max(1.0) * 0.05;
        let lo = ymin.min(0.0);
        let yr = lo..(ymax + (ymax - lo).abs() * 0.15 + 1e-9);
        draw!(
            b.build_cartesian_2d((xmin - pad)..(xmax + pad), yr)
                .map_err(|x| e(&x))?
        );
    }
    root.present().map_err(|x| e(&x))?;
    Ok(())
}
