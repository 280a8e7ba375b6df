//! A figure's one legend, in a strip below its panels (never over the data): each line's label
//! once with its colour, marker and band, then the reference lines with their dash style,
//! wrapped into rows to fit the figure's width.
use super::DrawError;
use super::{COLORS, Grid, REF_STYLES};
use plotters::coord::Shift;
use plotters::prelude::*;

const FONT: u32 = 13;
const ROW_H: u32 = 20;
const GLYPH_W: i32 = 26;
/// An estimate of a label's width at `FONT` in sans-serif (the SVG backend measures nothing).
const CHAR_W: u32 = 6;

enum Entry {
    Line { label: String, connect: bool, band: bool },
    Ref { label: String },
}

impl Entry {
    fn label(&self) -> &str {
        match self {
            Entry::Line { label, .. } | Entry::Ref { label } => label,
        }
    }

    fn width(&self) -> u32 {
        let chars = u32::try_from(self.label().chars().count()).unwrap_or(u32::MAX / CHAR_W);
        GLYPH_W.unsigned_abs() + 8 + chars * CHAR_W + 22
    }
}

/// The entries of a grid's legend, in first-seen order.
pub(super) struct Legend {
    entries: Vec<Entry>,
}

impl Legend {
    pub(super) fn of(g: &Grid) -> Self {
        let mut entries: Vec<Entry> = Vec::new();
        for s in g.panels.iter().flat_map(|p| p.series.iter()) {
            if !entries.iter().any(|e| e.label() == s.label) {
                entries.push(Entry::Line {
                    label: s.label.clone(),
                    connect: s.connect,
                    band: !s.spread.is_empty() && g.x_names.is_empty(),
                });
            }
        }
        for r in g.panels.iter().flat_map(|p| p.refs.iter()) {
            if !entries.iter().any(|e| e.label() == r.label) {
                entries.push(Entry::Ref { label: r.label.clone() });
            }
        }
        Legend { entries }
    }

    /// The colour of the line labelled `label` (the same in every panel).
    pub(super) fn color(&self, label: &str) -> RGBColor {
        let i = self
            .entries
            .iter()
            .filter(|e| matches!(e, Entry::Line { .. }))
            .position(|e| e.label() == label)
            .unwrap_or(0);
        COLORS[i % COLORS.len()]
    }

    /// The style index of the reference line labelled `label`.
    pub(super) fn ref_style(&self, label: &str) -> usize {
        self.entries
            .iter()
            .filter(|e| matches!(e, Entry::Ref { .. }))
            .position(|e| e.label() == label)
            .unwrap_or(0)
    }

    /// Rows of entry indices that fit in `width`.
    fn rows(&self, width: u32) -> Vec<Vec<usize>> {
        let mut rows: Vec<Vec<usize>> = Vec::new();
        let mut used = 0;
        for (i, e) in self.entries.iter().enumerate() {
            if rows.is_empty() || used + e.width() > width.saturating_sub(40) {
                rows.push(Vec::new());
                used = 0;
            }
            used += e.width();
            if let Some(r) = rows.last_mut() {
                r.push(i);
            }
        }
        rows
    }

    /// The strip's height for a figure `width` wide.
    pub(super) fn height(&self, width: u32) -> u32 {
        let rows = u32::try_from(self.rows(width).len()).unwrap_or(1);
        if rows == 0 { 0 } else { 12 + rows * ROW_H }
    }

    /// Draws the strip into `area` (the bottom of the figure).
    pub(super) fn draw(&self, area: &DrawingArea<SVGBackend<'_>, Shift>) -> Result<(), DrawError> {
        let width = area.dim_in_pixel().0;
        let font = ("sans-serif", FONT).into_font().color(&BLACK);
        for (row, idx) in self.rows(width).iter().enumerate() {
            let y = 6 + i32::try_from(row).unwrap_or(0) * i32::try_from(ROW_H).unwrap_or(20) + 8;
            let mut x = 20;
            for &i in idx {
                let entry = &self.entries[i];
                match entry {
                    Entry::Line { label, connect, band } => {
                        let c = self.color(label);
                        if *band {
                            area.draw(&Rectangle::new(
                                [(x, y - 6), (x + GLYPH_W, y + 6)],
                                c.mix(0.18).filled(),
                            ))?;
                        }
                        if *connect {
                            area.draw(&PathElement::new(vec![(x, y), (x + GLYPH_W, y)], c.stroke_width(2)))?;
                        }
                        area.draw(&Circle::new((x + GLYPH_W / 2, y), 4, c.filled()))?;
                    }
                    Entry::Ref { label } => {
                        let (c, dash, gap) = REF_STYLES[self.ref_style(label) % REF_STYLES.len()];
                        let (d, g) = (i32::try_from(dash).unwrap_or(4), i32::try_from(gap).unwrap_or(4));
                        let mut a = 0;
                        while a < GLYPH_W {
                            let b = (a + d).min(GLYPH_W);
                            area.draw(&PathElement::new(vec![(x + a, y), (x + b, y)], c.stroke_width(2)))?;
                            a += d + g;
                        }
                    }
                }
                area.draw(&Text::new(
                    entry.label().to_string(),
                    (x + GLYPH_W + 8, y - 7),
                    font.clone(),
                ))?;
                x += i32::try_from(entry.width()).unwrap_or(i32::MAX / 2);
            }
        }
        Ok(())
    }
}
