//! SVG plots (plotters' SVG backend, no font dependencies): lines with markers, the p50-p99
//! spread beside each line (a band, or error bars where the x axis names categories), and dashed
//! reference lines that explain a result. Ticks are chosen and written by [`ticks`] (decades with
//! minor ticks on log axes, whole numbers for integer variables).
pub mod ticks;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::prelude::*;
use std::path::Path;

/// How an axis maps its variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Logarithmic, ticks at decades (1-2-5 where the range is narrow), minor ticks between.
    Log,
    /// Linear, ticks at 1-2-5 steps.
    Linear,
    /// Linear over a whole-number variable: ticks at whole numbers only.
    Integer,
}

/// An axis: its title (with the unit) and scale.
pub struct Axis {
    pub title: String,
    pub scale: Scale,
}

/// One line of a plot: a label, (x, y) points, and optionally the spread around them.
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    /// (x, low, high) per point, e.g. p50 and p99 beside a p99 line; empty: none.
    pub spread: Vec<(f64, f64, f64)>,
    /// Join the points with a line (false: markers only, for categories).
    pub connect: bool,
}

/// A dashed grey reference line (e.g. threshold x T, a latency target), labelled in the legend.
pub struct RefLine {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// A whole figure.
pub struct Figure<'a> {
    pub title: &'a str,
    pub x: Axis,
    pub y: Axis,
    pub series: &'a [Series],
    pub refs: &'a [RefLine],
    /// Names of the whole-number x positions (a categorical axis); empty: numbers.
    pub x_names: &'a [String],
    /// Where the legend goes: the corner the data leaves free.
    pub legend: SeriesLabelPosition,
}

const COLORS: [RGBColor; 6] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x17, 0xbe, 0xcf),
];
/// Reference lines: dashed dark grey, then dotted black.
const REF_STYLES: [(RGBColor, u32, u32); 2] = [(RGBColor(0x55, 0x55, 0x55), 9, 6), (RGBColor(0, 0, 0), 3, 4)];

/// The plotted range of one axis from its data: padded, and for a log axis kept above 0.
fn range(values: &[f64], scale: Scale) -> (f64, f64) {
    let (lo, hi) = values
        .iter()
        .filter(|v| v.is_finite() && (scale != Scale::Log || **v > 0.0))
        .fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
    if lo > hi {
        return if scale == Scale::Log { (0.1, 10.0) } else { (0.0, 1.0) };
    }
    match scale {
        Scale::Log => (lo / 1.3, hi * 1.3),
        Scale::Integer => (lo - 0.5, hi + 0.5),
        Scale::Linear => {
            let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.05).max(1e-9);
            (if lo >= 0.0 { 0.0_f64.max(lo - pad) } else { lo - pad }, hi + pad)
        }
    }
}

/// Major and minor ticks of an axis over its range.
fn axis_ticks(scale: Scale, (lo, hi): (f64, f64)) -> (Vec<f64>, Vec<f64>) {
    match scale {
        Scale::Log => ticks::log_ticks(lo, hi),
        Scale::Linear => (ticks::linear_ticks(lo, hi, 8), Vec::new()),
        Scale::Integer => (ticks::integer_ticks(lo, hi, 12), Vec::new()),
    }
}

/// Draws `fig` into an SVG file at `path`.
pub fn draw(path: &Path, fig: &Figure) -> Result<(), String> {
    let e = |x: &dyn std::fmt::Display| format!("plot {}: {x}", path.display());
    let xs: Vec<f64> = fig.series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).collect();
    if xs.is_empty() {
        return Err(e(&"no data"));
    }
    let xr = range(&xs, fig.x.scale);
    let in_x = |x: f64| x >= xr.0 && x <= xr.1;
    let ys: Vec<f64> = fig
        .series
        .iter()
        .flat_map(|s| {
            s.points
                .iter()
                .map(|p| p.1)
                .chain(s.spread.iter().flat_map(|p| [p.1, p.2]))
        })
        .chain(
            fig.refs
                .iter()
                .flat_map(|r| r.points.iter().filter(|p| in_x(p.0)).map(|p| p.1)),
        )
        .collect();
    let yr = range(&ys, fig.y.scale);
    let (x_major, x_minor) = axis_ticks(fig.x.scale, xr);
    let (y_major, y_minor) = axis_ticks(fig.y.scale, yr);

    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let names = fig.x_names;
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

    macro_rules! draw {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(fig.x.title.as_str())
                .y_desc(fig.y.title.as_str())
                .x_label_formatter(&x_fmt)
                .y_label_formatter(&y_fmt)
                .label_style(("sans-serif", 14))
                .axis_desc_style(("sans-serif", 16))
                .bold_line_style(BLACK.mix(0.15))
                .light_line_style(BLACK.mix(0.05))
                .draw()
                .map_err(|x| e(&x))?;
            for (i, r) in fig.refs.iter().enumerate() {
                let (c, dash, gap) = REF_STYLES[i % REF_STYLES.len()];
                chart
                    .draw_series(DashedLineSeries::new(
                        r.points.iter().copied(),
                        dash,
                        gap,
                        c.stroke_width(2),
                    ))
                    .map_err(|x| e(&x))?
                    .label(r.label.clone())
                    .legend(move |(x, y)| {
                        let d = i32::try_from(dash).unwrap_or(4);
                        let g = i32::try_from(gap).unwrap_or(4);
                        let seg = |k: i32| {
                            let a = (k * (d + g)).min(20);
                            PathElement::new(vec![(a, 0), ((a + d).min(20), 0)], c.stroke_width(2))
                        };
                        EmptyElement::at((x, y)) + seg(0) + seg(1) + seg(2)
                    });
            }
            for (i, s) in fig.series.iter().enumerate() {
                let c = COLORS[i % COLORS.len()];
                let connect = s.connect;
                if !s.spread.is_empty() && !categorical {
                    let band: Vec<(f64, f64)> = s
                        .spread
                        .iter()
                        .map(|p| (p.0, p.2))
                        .chain(s.spread.iter().rev().map(|p| (p.0, p.1)))
                        .collect();
                    chart
                        .draw_series(std::iter::once(Polygon::new(band, c.mix(0.15).filled())))
                        .map_err(|x| e(&x))?;
                }
                if categorical {
                    chart
                        .draw_series(
                            s.spread
                                .iter()
                                .map(|&(x, lo, hi)| ErrorBar::new_vertical(x, lo, lo, hi, c.stroke_width(2), 12)),
                        )
                        .map_err(|x| e(&x))?;
                }
                if s.connect {
                    chart
                        .draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))
                        .map_err(|x| e(&x))?;
                }
                chart
                    .draw_series(s.points.iter().map(|&p| Circle::new(p, 4, c.filled())))
                    .map_err(|x| e(&x))?
                    .label(s.label.clone())
                    .legend(move |(x, y)| {
                        // A line in the legend only where the points are joined by one.
                        let line = if connect { vec![(0, 0), (20, 0)] } else { vec![(10, 0)] };
                        EmptyElement::at((x, y))
                            + PathElement::new(line, c.stroke_width(2))
                            + Circle::new((10, 0), 4, c.filled())
                    });
            }
            chart
                .configure_series_labels()
                .position(fig.legend.clone())
                .label_font(("sans-serif", 13))
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK.mix(0.4))
                .draw()
                .map_err(|x| e(&x))?;
        }};
    }
    let mut b = ChartBuilder::on(&root);
    b.caption(fig.title, ("sans-serif", 18))
        .margin(15)
        .x_label_area_size(50)
        .y_label_area_size(75);
    let x_lin = Linear::new(xr, x_major.clone(), x_minor.clone());
    let y_lin = Linear::new(yr, y_major.clone(), y_minor.clone());
    match (fig.x.scale == Scale::Log, fig.y.scale == Scale::Log) {
        (true, true) => draw!(
            b.build_cartesian_2d(
                (xr.0..xr.1)
                    .log_scale()
                    .with_key_points(x_major)
                    .with_light_points(x_minor),
                (yr.0..yr.1)
                    .log_scale()
                    .with_key_points(y_major)
                    .with_light_points(y_minor),
            )
            .map_err(|x| e(&x))?
        ),
        (true, false) => draw!(
            b.build_cartesian_2d(
                (xr.0..xr.1)
                    .log_scale()
                    .with_key_points(x_major)
                    .with_light_points(x_minor),
                y_lin
            )
            .map_err(|x| e(&x))?
        ),
        (false, true) => draw!(
            b.build_cartesian_2d(
                x_lin,
                (yr.0..yr.1)
                    .log_scale()
                    .with_key_points(y_major)
                    .with_light_points(y_minor),
            )
            .map_err(|x| e(&x))?
        ),
        (false, false) => draw!(b.build_cartesian_2d(x_lin, y_lin).map_err(|x| e(&x))?),
    }
    root.present().map_err(|x| e(&x))?;
    Ok(())
}

/// A linear f64 axis whose ticks are given (plotters' own linear axis chooses its ticks and has
/// no default label formatting to override).
struct Linear {
    lo: f64,
    hi: f64,
    major: Vec<f64>,
    minor: Vec<f64>,
}

impl Linear {
    fn new((lo, hi): (f64, f64), major: Vec<f64>, minor: Vec<f64>) -> Self {
        Linear { lo, hi, major, minor }
    }
}

impl Ranged for Linear {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    #[allow(clippy::cast_possible_truncation)] // a pixel position, within the drawing's i32 range
    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let frac = (v - self.lo) / (self.hi - self.lo);
        limit.0 + (frac * f64::from(limit.1 - limit.0)).round() as i32
    }
    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.minor.clone()
        } else {
            self.major.clone()
        }
    }
    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

/// "(host device: host figures, not GPU figures)" or "(hip:0)": every title says which device
/// (`host_figures`: [`crate::env::Environment::host_figures`]).
pub fn device_label(device: &str, host_figures: bool) -> String {
    if host_figures {
        "host device: host figures, not GPU figures".to_string()
    } else {
        format!("GPU {device}")
    }
}
