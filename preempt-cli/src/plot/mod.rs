//! SVG plots (plotters' SVG backend, no font dependencies): lines with markers, the p50-p99
//! spread beside each line (a band, or error bars where the x axis names categories), and dashed
//! reference lines that explain a result. Ticks are chosen and written by [`ticks`] (decades with
//! minor ticks on log axes, whole numbers for integer variables). A figure is one panel or a grid
//! of panels sharing axes (small multiples, [`draw_grid`]), or such grids one below the other
//! where their y axes differ ([`draw_stack`]); the legend sits below the panels,
//! never on the data (`legend`); each panel is drawn by `chart`.
mod chart;
mod legend;
pub mod ticks;

use crate::error::{Error, failed};
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::prelude::*;
use std::path::Path;

/// What drawing an SVG in memory fails with.
pub type DrawError = DrawingAreaErrorKind<std::io::Error>;

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

/// One line of a plot: a label, (x, y) points, and optionally the spread around them. Lines of
/// the same label share a colour across the panels of a [`Grid`].
#[derive(Clone)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    /// (x, low, high) per point, e.g. p50 and p99 beside a p99 line; empty: none.
    pub spread: Vec<(f64, f64, f64)>,
    /// Join the points with a line (false: markers only, for categories).
    pub connect: bool,
}

/// A dashed grey reference line (e.g. threshold x T, a latency target), labelled in the legend.
#[derive(Clone)]
pub struct RefLine {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// A whole figure of one panel.
pub struct Figure<'a> {
    pub title: &'a str,
    pub x: Axis,
    pub y: Axis,
    pub series: &'a [Series],
    pub refs: &'a [RefLine],
    /// Names of the whole-number x positions (a categorical axis); empty: numbers.
    pub x_names: &'a [String],
}

/// One panel of a [`Grid`]: its own title, lines and reference lines.
pub struct Panel {
    pub title: String,
    pub series: Vec<Series>,
    pub refs: Vec<RefLine>,
}

/// Small multiples: panels in rows of `cols`, sharing both axes (ranges and ticks), so that
/// bands that would overlap in one chart sit side by side and compare at a glance.
pub struct Grid<'a> {
    pub title: &'a str,
    pub x: Axis,
    pub y: Axis,
    pub panels: Vec<Panel>,
    pub cols: usize,
    pub x_names: &'a [String],
}

const COLORS: [RGBColor; 6] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x17, 0xbe, 0xcf),
];
/// Reference lines: dashed dark grey, dotted black, then long-dashed brown (three levels' lines
/// in one figure stay apart in the legend).
const REF_STYLES: [(RGBColor, u32, u32); 3] = [
    (RGBColor(0x55, 0x55, 0x55), 9, 6),
    (RGBColor(0, 0, 0), 3, 4),
    (RGBColor(0x8c, 0x4a, 0x1c), 14, 4),
];

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

/// Draws `fig` into an SVG file at `path`: one panel, the legend below it.
pub fn draw(path: &Path, fig: &Figure) -> Result<(), Error> {
    let grid = Grid {
        title: fig.title,
        x: Axis {
            title: fig.x.title.clone(),
            scale: fig.x.scale,
        },
        y: Axis {
            title: fig.y.title.clone(),
            scale: fig.y.scale,
        },
        panels: vec![Panel {
            title: String::new(),
            series: fig.series.iter().map(Series::clone).collect(),
            refs: fig.refs.iter().map(RefLine::clone).collect(),
        }],
        cols: 1,
        x_names: fig.x_names,
    };
    draw_grid(path, &grid)
}

/// The shared ranges of a grid: every panel's points, spreads, and the reference lines inside
/// the x range.
fn grid_ranges(g: &Grid) -> Option<((f64, f64), (f64, f64))> {
    let series = || g.panels.iter().flat_map(|p| p.series.iter());
    let xs: Vec<f64> = series().flat_map(|s| s.points.iter().map(|p| p.0)).collect();
    if xs.is_empty() {
        return None;
    }
    let xr = range(&xs, g.x.scale);
    let in_x = |x: f64| x >= xr.0 && x <= xr.1;
    let ys: Vec<f64> = series()
        .flat_map(|s| {
            s.points
                .iter()
                .map(|p| p.1)
                .chain(s.spread.iter().flat_map(|p| [p.1, p.2]))
        })
        .chain(
            g.panels
                .iter()
                .flat_map(|p| p.refs.iter())
                .flat_map(|r| r.points.iter().filter(|p| in_x(p.0)).map(|p| p.1)),
        )
        .collect();
    Some((xr, range(&ys, g.y.scale)))
}

/// Draws the panels of `g` into an SVG file at `path`, sharing axes, with one legend below them
/// (outside every panel's data): each line's label once, in the same colour in every panel.
pub fn draw_grid(path: &Path, g: &Grid) -> Result<(), Error> {
    draw_stack(path, std::slice::from_ref(g))
}

/// Panel sizes of a grid in pixels: one large panel, or small multiples.
fn panel_size(g: &Grid) -> (u32, u32) {
    if g.panels.len() == 1 { (900, 520) } else { (470, 330) }
}

/// The columns and rows of a grid.
fn shape(g: &Grid) -> (usize, usize) {
    let cols = g.cols.clamp(1, g.panels.len().max(1));
    (cols, g.panels.len().div_ceil(cols).max(1))
}

/// Draws `grids` one below the other into one SVG file at `path`, each as [`draw_grid`] draws it
/// (its title, its panels sharing its axes, its legend below them): figures whose y axes differ
/// (latency panels above a throughput panel) in one file. The figure is as wide as the widest.
pub fn draw_stack(path: &Path, grids: &[Grid]) -> Result<(), Error> {
    let no_data = || failed!("plot {}: no data", path.display());
    let e = |x| Error::Plot {
        what: format!("plot {}", path.display()),
        source: x,
    };
    let mut parts = Vec::new();
    for g in grids {
        let ranges = grid_ranges(g).ok_or_else(no_data)?;
        parts.push((g, ranges, legend::Legend::of(g)));
    }
    let width = grids
        .iter()
        .map(|g| u32::try_from(shape(g).0).unwrap_or(1) * panel_size(g).0)
        .max()
        .ok_or_else(no_data)?;
    // Each grid's height: its title, its rows of panels, its legend at the figure's width.
    let heights: Vec<(u32, u32)> = parts
        .iter()
        .map(|(g, _, legend)| {
            let legend_h = legend.height(width);
            let rows = u32::try_from(shape(g).1).unwrap_or(1);
            (40 + rows * panel_size(g).1 + legend_h, legend_h)
        })
        .collect();
    let height = heights.iter().map(|h| h.0).sum();
    // Drawn into memory, then written under a temporary name and renamed when complete, like
    // every other output (a failed or interrupted run leaves a previous plot as it was).
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(e)?;
        let mut rest = root.clone();
        for ((g, (xr, yr), legend), (h, legend_h)) in parts.iter().zip(heights) {
            let (area, below) = rest.split_vertically(h);
            rest = below;
            let (cols, rows) = shape(g);
            let (top, bottom) = area.split_vertically(h - legend_h);
            let top = top.titled(g.title, ("sans-serif", 18)).map_err(e)?;
            let areas = top.split_evenly((rows, cols));
            for (i, (panel, area)) in g.panels.iter().zip(areas.iter()).enumerate() {
                let place = Place {
                    left: i % cols == 0,
                    bottom: i / cols == rows - 1 || i + cols >= g.panels.len(),
                };
                chart::draw_panel(area, g, panel, legend, place, *xr, *yr).map_err(e)?;
            }
            legend.draw(&bottom).map_err(e)?;
        }
        root.present().map_err(e)?;
    }
    crate::atomic_file::write_file(path, |w| w.write_all(svg.as_bytes()))
}

/// Where a panel sits: axis titles are written once, on the left column and the bottom row.
#[derive(Clone, Copy)]
struct Place {
    left: bool,
    bottom: bool,
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
/// (`host_figures`: whether the figures are host figures, as preempt-lat's run environment or
/// [`crate::output::is_host_device`] says).
pub fn device_label(device: &str, host_figures: bool) -> String {
    if host_figures {
        "host device: host figures, not GPU figures".to_string()
    } else {
        format!("GPU {device}")
    }
}
