//! What the end-to-end tests share: `examples/hip/two_priorities.c` (an unmodified HIP
//! program) on the stand-in runtime, with and without the interposer, each run bounded in time.
//! The kit underneath (built libraries, the stand-in under libamdhip64's names, compiling an
//! example, bounded runs) is `hip-testkit`'s.
#![allow(dead_code)] // each test binary uses part of it
use hip_testkit::{Run, built};
pub use preempt_hip::exit_line::ExitLine;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

fn tmp() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
}

/// The interposer library.
pub fn interposer() -> PathBuf {
    built("libpreempt_hip.so", "hip-interpose")
}

/// The example program, compiled once per test binary.
pub fn program() -> &'static Path {
    static PROG: OnceLock<PathBuf> = OnceLock::new();
    PROG.get_or_init(|| hip_testkit::compile_example("two_priorities", tmp(), &[]))
}

/// The program's command: on the stand-in, with the worker, optionally under the interposer.
pub fn command(preload: bool, args: &[&str]) -> Command {
    let mut c = Command::new(program());
    c.arg(hip_testkit::code_object(tmp()))
        .args(args)
        .env("LD_LIBRARY_PATH", hip_testkit::standin_dir(tmp()))
        .env("PREEMPT_HOST_WORKER", built("preempt-host-worker", "host-device"))
        .env("PREEMPT_INTERPOSE_LOG", "1")
        // Hermetic: no daemon unless a test starts one (unset means the node's default daemon).
        .env("PREEMPT_SCHEDULER", "none")
        .env_remove("LD_PRELOAD")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if preload {
        c.env("LD_PRELOAD", interposer());
    }
    c
}

pub fn run(preload: bool, args: &[&str], limit: Duration) -> Run {
    finish(command(preload, args).spawn().expect("the program starts"), limit)
}

/// Waits for a program started from [`command`] and reads its line.
pub fn finish(child: Child, limit: Duration) -> Run {
    hip_testkit::finish(child, limit, "two_priorities")
}

/// The interposer's exit line in a run's stderr.
///
/// # Panics
/// When there is none, with the stderr.
pub fn exit_line(stderr: &str) -> ExitLine {
    ExitLine::find(stderr).unwrap_or_else(|| panic!("no exit line of the interposer; stderr:\n{stderr}"))
}

/// The exit line of a run that must leave nothing behind: every suspend resumed, no failure.
///
/// # Panics
/// When that is not so, with `what` and the stderr.
pub fn settled(stderr: &str, what: &str) -> ExitLine {
    let e = exit_line(stderr);
    assert_eq!(
        (e.suspends, e.failures),
        (e.resumes, 0),
        "{what}: every suspend resumed, no failure; stderr:\n{stderr}"
    );
    e
}
