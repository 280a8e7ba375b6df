//! A program written for XSched's C API (examples/hip/xsched_names.c: it loads `libpreempt.so`
//! and `libhalhip.so` from a directory, wraps two streams in XQueues, hints one high and one
//! low) run on the stand-in HIP runtime, with the interposer preloaded and without it. Each run
//! is a real process, bounded in time.
//!
//! Needs, in the same target directory: this crate's cdylib, `libpreempt_hip.so`
//! (hip-interpose), `libhip_standin.so` (hip-standin) and `preempt-host-worker` (host-device):
//! `cargo test --workspace` builds them, or `cargo build -p hip-interpose -p hip-standin -p host-device`.
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use xsched_compat::types::XResult;

/// `target/<profile>/`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap();
    if dir.ends_with("deps") {
        dir.parent().unwrap()
    } else {
        dir
    }
    .to_path_buf()
}

/// A library or program as cargo built it (`deps/` first: `cargo test` leaves cdylibs there).
fn built(name: &str, package: &str) -> PathBuf {
    let dir = profile_dir();
    [dir.join("deps").join(name), dir.join(name)]
        .into_iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name} is not built: run `cargo build -p {package}`"))
}

fn tmp(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()))
}

/// A directory laid out as scripts/install-xsched-compat.sh lays it out (`libhalhip.so` a link
/// to `libpreempt.so`: one library, one set of tables), and the stand-in under libamdhip64's names.
fn dirs() -> &'static (PathBuf, PathBuf) {
    static D: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    D.get_or_init(|| {
        let (lib, standin) = (tmp("xsched-lib"), tmp("xsched-standin"));
        for d in [&lib, &standin] {
            std::fs::create_dir_all(d).unwrap();
        }
        let link = |target: &Path, l: PathBuf| {
            let _ = std::fs::remove_file(&l);
            std::os::unix::fs::symlink(target, l).unwrap();
        };
        link(
            &built("libxsched_compat.so", "xsched-compat"),
            lib.join("libpreempt.so"),
        );
        link(Path::new("libpreempt.so"), lib.join("libhalhip.so"));
        let s = built("libhip_standin.so", "hip-standin");
        for n in [
            "libamdhip64.so",
            "libamdhip64.so.5",
            "libamdhip64.so.6",
            "libamdhip64.so.7",
        ] {
            link(&s, standin.join(n));
        }
        (lib, standin)
    })
}

/// examples/hip/xsched_names.c compiled against Debian's HIP headers (`libamdhip64-dev`).
fn program() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/hip/xsched_names.c");
        let out = tmp("xsched_names");
        let r = Command::new("cc")
            .args(["-O2", "-Wall", "-Wextra", "-Werror", "-D__HIP_PLATFORM_AMD__"])
            .arg(&src)
            .arg("-o")
            .arg(&out)
            .args(["-lamdhip64", "-ldl"])
            .output()
            .expect("cc runs");
        assert!(
            r.status.success(),
            "compiling {} failed (Debian: scripts/install-deps.sh build installs libamdhip64-dev):\n{}",
            src.display(),
            String::from_utf8_lossy(&r.stderr)
        );
        out
    })
}

struct Run {
    values: HashMap<String, i64>,
    stderr: String,
    code: Option<i32>,
}

impl Run {
    fn get(&self, k: &str) -> i64 {
        *self
            .values
            .get(k)
            .unwrap_or_else(|| panic!("no {k} in the line; stderr:\n{}", self.stderr))
    }
}

fn run(preload: bool) -> Run {
    let (lib, standin) = dirs();
    let code_object = tmp("standin.co");
    std::fs::write(&code_object, b"the stand-in runtime reads no code object\n").unwrap();
    let mut c = Command::new(program());
    c.arg(lib)
        .arg(&code_object)
        .args(["--lp", "20", "--lp-ms", "20", "--hp", "10", "--gap-ms", "5"])
        .env("LD_LIBRARY_PATH", standin)
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
    let mut child = c.spawn().expect("the program starts");
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "xsched_names hung (killed); stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    Run {
        values: stdout
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .filter_map(|(k, v)| Some((k.to_string(), v.split('.').next()?.parse().ok()?)))
            .collect(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        code: out.status.code(),
    }
}

/// The interposer's exit line: (marks, suspends, resumes, failures).
fn exit_counts(stderr: &str) -> Option<(u64, u64, u64, u64)> {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("preempt-hip: pid") && l.contains(" exits: "))?;
    let n: Vec<u64> = line
        .split(" exits: ")
        .nth(1)?
        .split(", ")
        .filter_map(|p| p.split_whitespace().next()?.parse().ok())
        .collect();
    match n[..] {
        [a, b, c, d] => Some((a, b, c, d)),
        _ => None,
    }
}

fn code(r: XResult) -> i64 {
    i64::from(r as i32)
}

/// What every run answers, with or without the interposer: hostile calls get XSched's codes.
fn check_common(r: &Run) {
    assert_eq!(r.code, Some(0), "stderr:\n{}", r.stderr);
    assert_eq!(r.get("lp_exactly_once"), r.get("lp_commands"), "stderr:\n{}", r.stderr);
    assert_eq!(r.get("lp_bad"), 0);
    assert_eq!(r.get("get_ok"), 1);
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
    let (_, suspends, resumes, failures) =
        exit_counts(&r.stderr).unwrap_or_else(|| panic!("no exit line; stderr:\n{}", r.stderr));
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
    assert!(exit_counts(&r.stderr).is_none());
}
