//! What a stage run in preempt-lat's `__acceptance-stage` leaves for the parent: one JSON file in
//! the stage's directory, its status, one line saying why, and what it found. The parent reads
//! nothing else from such a child (its exit status only says whether the file was written).
use super::summary::Status;
use crate::error::{Context, Error};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The file a stage's result is written to, in its directory.
pub const RESULT_FILE: &str = "stage.json";

/// The Example 5 stage's result file: the example's own `--json`, which report judges.
pub const EXAMPLE5_RESULT: &str = "example5.json";

/// A stage's result: its status, one line saying why, and what it found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StageResult {
    pub status: Status,
    pub reason: String,
    #[serde(default)]
    pub facts: serde_json::Value,
}

/// Writes `r` into `dir` (the child's side), replacing a previous result only when complete.
pub fn write(dir: &Path, r: &StageResult) -> Result<(), Error> {
    crate::atomic_file::write_file(&dir.join(RESULT_FILE), |w| {
        serde_json::to_writer_pretty(&mut *w, r)?;
        writeln!(w)
    })
}

/// The result a stage's child wrote into `dir`.
pub fn read(dir: &Path) -> Result<StageResult, Error> {
    let p = dir.join(RESULT_FILE);
    let text = std::fs::read_to_string(&p).with_context(|| p.display().to_string())?;
    serde_json::from_str(&text).with_context(|| p.display().to_string())
}
