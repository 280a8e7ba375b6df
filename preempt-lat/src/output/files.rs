//! Results written into `--out-dir` (sweeps, `priority`, `report`): the directory checked before
//! anything runs, then one file per machine format beside the plot.
use super::Export;
use crate::exit::Failure;
use crate::options::Format;
use std::io::Write;
use std::path::Path;

/// Creates `dir` and checks that it is writable, so that a long run does not fail at its end.
pub fn prepare(dir: &Path) -> Result<(), Failure> {
    std::fs::create_dir_all(dir).map_err(|e| format!("--out-dir {}: cannot create: {e}", dir.display()))?;
    let probe = dir.join(".preempt-lat-write-test");
    std::fs::write(&probe, b"").map_err(|e| format!("--out-dir {}: cannot write: {e}", dir.display()))?;
    let _ = std::fs::remove_file(probe);
    Ok(())
}

/// Writes one file through `write`.
pub fn write_file(path: &Path, write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<(), String> {
    let e = |e: std::io::Error| format!("{}: cannot write: {e}", path.display());
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).map_err(e)?);
    write(&mut f).and_then(|()| f.flush()).map_err(e)
}

/// Writes `<stem>.<extension>` into `dir` for each of [`Format::FILES`] (CSV and JSON).
pub fn write_all<E: Export + ?Sized>(dir: &Path, stem: &str, e: &E) -> Result<(), String> {
    for format in Format::FILES {
        let path = dir.join(format!("{stem}.{}", format.extension()));
        write_file(&path, |w| super::export(format, e, w))?;
    }
    Ok(())
}
