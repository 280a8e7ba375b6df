//! A program written for XSched's C API (examples/hip/xsched_names.c: it loads `libpreempt.so`
//! and `libhalhip.so` from a directory, wraps two streams in XQueues, hints one high and one
//! low) run on the stand-in HIP runtime, with the interposer preloaded and without it. Each run
//! is a real process, bounded in time.
//!
//! Needs, in the same target directory: this crate's cdylib, `libpreempt_hip.so`
//! (hip-interpose), `libhip_standin.so` (hip-standin) and `preempt-host-worker` (host-device):
//! `cargo test --workspace` builds them, or `cargo build -p hip-interpose -p hip-standin -p host-device`.
use hip_testkit::{Run, built, code_object, compile_example, finish, standin_dir};
use preempt_hip::exit_line::ExitLine;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;
use xsched_compat::types::XResult;

fn tmp() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
}

/// A directory laid out as scripts/install-xsched-compat.sh lays it out (`libhalhip.so` a link
/// to `libpreempt.so`: one library, one set of tables).
fn lib_dir() -> &'static Path {
    static D: OnceLock<PathBuf> = OnceLock::new();
    D.get_or_init(|| {
        let lib = tmp().join(format!("xsched-lib-{}", std::process::id()));
        std::fs::create_dir_all(&lib).unwrap();
        let link = |target: &Path, l: PathBuf| {
            let _ = std::fs::remove_file(&l);
            std::os::unix::fs::symlink(target, l).unwrap();
        };
        link(
            &built("libxsched_compat.so", "xsched-compat"),
            lib.join("libpreempt.so"),
        );
        link(Path::new("libpreempt.so"), lib.join("libhalhip.so"));
        lib
    })
}

/// examples/hip/xsched_names.c compiled against Debian's HIP headers (`libamdhip64-dev`).
fn program() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| compile_example("xsched_names", tmp(), &["-ldl"]))
}

fn run(preload: bool) -> Run {
    let mut c = Command::new(program());
    c.arg(lib_dir())
        .arg(code_object(tmp()))
        .args(["--lp", "20", "--lp-ms", "20", "--hp", "10", "--gap-ms", "5"])
        .env("LD_LIBRARY_PATH", standin_dir(tmp()))
        .env("PREEMPT_HOST_WORKER", built("preempt-host-worker", "host-device"))
        .env("PREEMPT_INTERPOSE_LOG", "1")
        // Hermetic: no daemon (unset would mean the node's default one).
        .env("PREEMPT_SCHEDULER", "none")
        // The streams are created at normal priority and re-prioritised by XHintPriority only
        // afterwards, so they need queues of their own from the start (docs/interposer.md).
        .env("PREEMPT_OWN_QUEUES", "always")
        .env_remove("LD_PRELOAD")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if preload {
        c.env("LD_PRELOAD", built("libpreempt_hip.so", "hip-interpose"));
    }
    finish(
        c.spawn().expect("the program starts"),
        Duration::from_secs(60),
        "xsched_names",
    )
}

fn code(r: XResult) -> f64 {
    f64::from(r as i32)
}

/// What every run answers, with or without the interposer: hostile calls get XSched's codes.
fn check_common(r: &Run) {
    assert_eq!(r.code, Some(0), "stderr:\n{}", r.stderr);
    assert_eq!(r.get("lp_exactly_once"), r.get("lp_commands"), "stderr:\n{}", r.stderr);
    assert_eq!(r.get("lp_bad"), 0.0);
    assert_eq!(r.get("get_ok"), 1.0);
    assert_eq!(r.get("null_out"), code(XResult::ErrorInvalidValue));
    assert_eq!(r.get("null_stream"), code(XResult::ErrorNotSupported));
    assert_eq!(r.get("bad_hwq"), code(XResult::ErrorNotFound));
    assert_eq!(r.get("bad_xq"), code(XResult::ErrorNotFound));
    assert_eq!(r.get("bad_level"), code(XResult::ErrorInvalidValue));
    assert_eq!(r.get("suspend"), code(XResult::ErrorNotSupported));
    assert_eq!(r.get("destroyed_twice"), code(XResult::ErrorNotFound));
}

#[test]
fn under_the_interposer_the_high_queue_suspends_the_low_one() {
    let r = run(true);
    check_common(&r);
    assert_eq!(r.get("hint_hp"), code(XResult::Success), "stderr:\n{}", r.stderr);
    assert_eq!(r.get("hint_lp"), code(XResult::Success));
    let ExitLine {
        suspends,
        resumes,
        failures,
        ..
    } = ExitLine::find(&r.stderr).unwrap_or_else(|| panic!("no exit line; stderr:\n{}", r.stderr));
    assert!(suspends >= 1, "no suspension; stderr:\n{}", r.stderr);
    assert_eq!(suspends, resumes, "stderr:\n{}", r.stderr);
    assert_eq!(failures, 0);
}

#[test]
fn without_the_interposer_the_hint_is_refused_and_the_program_completes() {
    let r = run(false);
    check_common(&r);
    assert_eq!(r.get("hint_hp"), code(XResult::ErrorNotSupported));
    assert_eq!(r.get("hint_lp"), code(XResult::ErrorNotSupported));
    let said: Vec<_> = r.stderr.lines().filter(|l| l.contains("LD_PRELOAD=")).collect();
    assert_eq!(said.len(), 1, "one line says what is needed; stderr:\n{}", r.stderr);
    assert!(said[0].contains("libpreempt_hip.so"));
    assert!(ExitLine::find(&r.stderr).is_none());
}
