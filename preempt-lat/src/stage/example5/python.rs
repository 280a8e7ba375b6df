//! The Python that runs Example 5: `$PREEMPT_PYTHON` when it is set and not empty, else
//! `python3` on PATH (an activated venv or conda environment puts its own first there, which is
//! where scripts/build-user.sh installs the package). A `PREEMPT_PYTHON` that cannot import the
//! package is not replaced by `python3`: the user named it, and a figure from another
//! environment than the one named would be a surprise. Either is asked first, bounded, whether
//! it imports `preempt_kfd`; its answer (the interpreter, its version, the package's file) goes
//! into the stage's facts.
use crate::acceptance::runner::{self, Steps};
use crate::error::{Context, Error};
use crate::measure::control::stop_requested;
use serde::Serialize;
use std::ffi::OsString;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Names the Python to use instead of `python3` on PATH.
pub const PYTHON_ENV: &str = "PREEMPT_PYTHON";

/// What builds and installs the package where its users run it.
pub const PROVIDES: &str = "scripts/build-user.sh builds it and installs it into the active environment \
                            (or set PREEMPT_PYTHON to a Python that has it)";

/// The question asked of the Python: who it is first (so that a failed import still says which
/// Python failed), then the import.
const PROBE: &str = "import sys; print(sys.executable); print(sys.version.split()[0]); \
                     import preempt_kfd; print(preempt_kfd.__file__)";

/// The import can take a while on a cold cache (the package's native library, its dependencies);
/// anything longer is a hang.
const PROBE_BOUND: Duration = Duration::from_secs(60);

/// The Python chosen, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chosen {
    pub program: OsString,
    /// Named by [`PYTHON_ENV`].
    pub from_env: bool,
}

impl Chosen {
    /// `$PREEMPT_PYTHON` (`env`) when set and not empty, else `python3`.
    pub fn from(env: Option<OsString>) -> Chosen {
        match env.filter(|p| !p.is_empty()) {
            Some(program) => Chosen {
                program,
                from_env: true,
            },
            None => Chosen {
                program: "python3".into(),
                from_env: false,
            },
        }
    }

    /// How it is named in a reason: `python3 on PATH`, `PREEMPT_PYTHON=/x/python`.
    pub fn named(&self) -> String {
        if self.from_env {
            format!("{PYTHON_ENV}={}", self.program.to_string_lossy())
        } else {
            format!("`{}` on PATH", self.program.to_string_lossy())
        }
    }
}

/// Why the example cannot run here: the stage is then SKIP with this line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    #[error("no Python to run Example 5: {named} cannot be started ({why}); {PROVIDES}")]
    NoPython { named: String, why: String },
    #[error("{named} ({executable}, Python {version}) cannot import preempt_kfd ({why}): {PROVIDES}")]
    NotImportable {
        named: String,
        executable: String,
        version: String,
        why: String,
    },
}

/// A Python that imports the package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Found {
    /// Its `sys.executable`.
    pub executable: String,
    pub version: String,
    /// `preempt_kfd.__file__`.
    pub package: String,
}

/// Asks `chosen` whether it imports the package (its output in `dir`, `probe.*.txt`).
pub fn probe(chosen: &Chosen, dir: &Path) -> Result<Result<Found, Unavailable>, Error> {
    let (out_path, err_path) = (dir.join("probe.stdout.txt"), dir.join("probe.stderr.txt"));
    let out = std::fs::File::create(&out_path).with_context(|| out_path.display().to_string())?;
    let err = std::fs::File::create(&err_path).with_context(|| err_path.display().to_string())?;
    let mut cmd = Command::new(&chosen.program);
    cmd.args(["-c", PROBE])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdout(out)
        .stderr(err);
    let ended = match runner::run(cmd, PROBE_BOUND, &stop_requested, STOP) {
        Ok(e) => e,
        Err(e) => {
            return Ok(Err(Unavailable::NoPython {
                named: chosen.named(),
                why: e.to_string(),
            }));
        }
    };
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let ok = ended.status.is_some_and(|s| s.success()) && !ended.over_bound;
    Ok(answer(chosen, ok, &ended.describe(), &stdout, &stderr))
}

/// The probe's answer: the Python that imports the package, or why not (`ok`: it exited 0;
/// `ended`: how it ended otherwise).
pub fn answer(chosen: &Chosen, ok: bool, ended: &str, stdout: &str, stderr: &str) -> Result<Found, Unavailable> {
    let mut lines = stdout.lines().map(str::trim);
    let (executable, version, package) = (lines.next(), lines.next(), lines.next());
    match (ok, executable, version, package) {
        (true, Some(e), Some(v), Some(p)) => Ok(Found {
            executable: e.into(),
            version: v.into(),
            package: p.into(),
        }),
        (_, Some(e), Some(v), _) => {
            let last = stderr.lines().map(str::trim).rfind(|l| !l.is_empty());
            Err(Unavailable::NotImportable {
                named: chosen.named(),
                executable: e.into(),
                version: v.into(),
                why: last.map_or_else(|| ended.to_string(), str::to_string),
            })
        }
        // It did not even say who it is: not a Python that runs.
        _ => {
            let last = stderr.lines().map(str::trim).rfind(|l| !l.is_empty());
            Err(Unavailable::NoPython {
                named: chosen.named(),
                why: match last {
                    Some(l) => format!("{ended}: {l}"),
                    None => ended.to_string(),
                },
            })
        }
    }
}

/// How a Python child is stopped: SIGTERM ends a Python that installs no handler at once; one
/// that does (the package's `install_signal_handlers`) resumes what it suspended first, which
/// takes a moment; the host device's workers go with their parent.
pub const STOP: Steps = Steps {
    after_term: Duration::from_secs(10),
    after_second_term: Duration::from_secs(2),
    after_kill: Duration::from_secs(10),
};
