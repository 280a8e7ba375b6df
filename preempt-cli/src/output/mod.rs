//! Every result leaves through here: one exporter per [`Format`] behind one dispatch
//! ([`export`]), shared by every subcommand. A result offers what the exporters need
//! ([`Export`]): itself whole (JSON serializes it), its rows (CSV, through the `csv` crate, which
//! does the quoting and escaping) and its text for people. [`files`] writes results into
//! `--out-dir`.
//!
//! A new format: its variant and file extension in `options::values::Format`, its arm and
//! exporter here. What each result offers lives beside the result (a latency run's rows are in
//! preempt-lat's `output`).
pub mod files;

use crate::error::{Context, Error};
use crate::options::Format;
use serde::Serialize;
use std::io::{self, Write};

/// A figure in a table for people, to `digits` decimals; `-` where there is none.
pub fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.digits$}"))
}

/// Whether a result's `device` (as JSON files record it) is a host device, whose figures are
/// host figures: the API's answer for the word ([`preempt_api::DeviceSpec::is_host`]).
pub fn is_host_device(device: &str) -> bool {
    device
        .parse::<preempt_api::DeviceSpec>()
        .is_ok_and(preempt_api::DeviceSpec::is_host)
}

/// A result as the exporters see it.
pub trait Export {
    /// What JSON writes: the result whole.
    type Whole: Serialize + ?Sized;
    /// One CSV row; the header is its field names.
    type Row<'a>: Serialize
    where
        Self: 'a;
    fn whole(&self) -> &Self::Whole;
    fn rows(&self) -> Vec<Self::Row<'_>>;
    /// The result for people.
    fn text(&self, w: &mut dyn Write) -> io::Result<()>;
}

/// Many results of one kind (a sweep's runs, its points): JSON the array, CSV every one's rows
/// under one header, text one after another.
impl<T: Export + Serialize> Export for [T] {
    type Whole = [T];
    type Row<'a>
        = T::Row<'a>
    where
        T: 'a;
    fn whole(&self) -> &[T] {
        self
    }
    fn rows(&self) -> Vec<T::Row<'_>> {
        self.iter().flat_map(T::rows).collect()
    }
    fn text(&self, w: &mut dyn Write) -> io::Result<()> {
        self.iter().try_for_each(|t| t.text(w))
    }
}

/// The one dispatch: `e` in `format`.
pub fn export<E: Export + ?Sized>(format: Format, e: &E, w: &mut dyn Write) -> io::Result<()> {
    match format {
        Format::Text => e.text(w),
        Format::Json => json(e.whole(), w),
        Format::Csv => csv(e.rows(), w),
    }
}

/// One line on stdout: an error if stdout is closed or full (`println!` panics).
pub fn line(args: std::fmt::Arguments) -> Result<(), Error> {
    let mut out = io::stdout().lock();
    out.write_fmt(args)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush())
        .context("writing the result")
}

/// The JSON exporter: pretty JSON and a newline.
fn json<T: Serialize + ?Sized>(value: &T, w: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *w, value)?;
    writeln!(w)
}

/// The CSV exporter: a header from the row type's field names, then one row per record.
fn csv<R: Serialize>(rows: impl IntoIterator<Item = R>, w: &mut dyn Write) -> io::Result<()> {
    let mut out = csv::Writer::from_writer(w);
    for r in rows {
        out.serialize(r).map_err(io::Error::other)?;
    }
    out.flush()
}
