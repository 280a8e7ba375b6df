//! Results written into `--out-dir` (sweeps, `priority`, `report`): the directory checked before
//! anything runs, then one file per machine format beside the plot.
use super::Export;
use crate::atomic_file::write_file;
use crate::error::{Error, UsageError, usage};
use crate::options::Format;
use std::path::Path;

/// Creates `dir` and checks that it is writable, so that a long run does not fail at its end.
/// Both refusals are usage errors (exit 2): the run never started.
pub fn prepare(dir: &Path) -> Result<(), UsageError> {
    std::fs::create_dir_all(dir).map_err(|e| usage!("--out-dir {}: cannot create: {e}", dir.display()))?;
    let probe = dir.join(".preempt-lat-write-test");
    std::fs::write(&probe, b"").map_err(|e| usage!("--out-dir {}: cannot write: {e}", dir.display()))?;
    let _ = std::fs::remove_file(probe);
    Ok(())
}

/// Writes `<stem>.<extension>` into `dir` for each of [`Format::FILES`] (CSV and JSON).
pub fn write_all<E: Export + ?Sized>(dir: &Path, stem: &str, e: &E) -> Result<(), Error> {
    for format in Format::FILES {
        let path = dir.join(format!("{stem}.{}", format.extension()));
        write_file(&path, |w| super::export(format, e, w))?;
    }
    Ok(())
}
