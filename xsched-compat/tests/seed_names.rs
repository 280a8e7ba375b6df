//! A program written for XSched's C API (examples/hip/xsched_names.c: it loads `libpreempt.so`
//! and `libhalhip.so` from a directory, wraps two streams in XQueues, hints one high and one
//! low) run on the stand-in HIP runtime, with the interposer preloaded and without it. Each run
//! is a real process, bounded in time.
//!
//! Needs, in the same target directory: this crate's cdylib, `libpreempt_hip.so`
//! (hip-interpose), `libhip_standin.so` (hip-standin) and `preempt-host-worker` (host-device):
//! `cargo test --workspace` builds them, or `cargo build -p hip-interpose -p hip-standin -p host-device`.
mod support;
use hip_testkit::{Run, code_object, compile_example, finish};
use preempt_hip::exit_line::ExitLine;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;
use support::{lib_dir, on_standin, tmp};
use xsched_compat::types::XResult;

/// examples/hip/xsched_names.c compiled against Debian's HIP headers (`libamdhip64-dev`).
fn program() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| compile_example("xsched_names", tmp(), &["-ldl"]))
}

fn run(preload: bool) -> Run {
    let mut c = Command::new(program());
    c.arg(lib_dir())
        .arg(code_object(tmp()))
        .args(["--lp", "20", "--lp-ms", "20", "--hp", "10", "--gap-ms", "5"]);
    on_standin(&mut c, preload);
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
