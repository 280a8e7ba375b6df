//! What the end-to-end tests share: the unmodified C program built against the installed HIP
//! headers, the stand-in runtime under libamdhip64's names, and runs of the program with and
//! without the interposer, each bounded in time.
#![allow(dead_code)] // each test binary uses part of it
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// `target/<profile>/`, where cargo put the cdylibs and the worker.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's executable");
    let dir = exe.parent().expect("its directory");
    if dir.ends_with("deps") {
        dir.parent().unwrap().to_path_buf()
    } else {
        dir.to_path_buf()
    }
}

/// A library or program of the workspace as cargo built it. `cargo test` leaves cdylibs in
/// `deps/` (only `cargo build` copies them up a directory), so `deps/` first: it is the fresher.
pub fn built(name: &str, package: &str) -> PathBuf {
    let dir = profile_dir();
    let p = [dir.join("deps").join(name), dir.join(name)]
        .into_iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| dir.join(name));
    assert!(
        p.is_file(),
        "{} is not built: run `cargo build -p {package}` (`cargo test --workspace` builds it)",
        p.display()
    );
    p
}

/// The interposer library.
pub fn interposer() -> PathBuf {
    built("libpreempt_hip.so", "hip-interpose")
}

/// A directory where the stand-in runtime answers to every libamdhip64 name a program may need.
pub fn standin_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let lib = built("libhip_standin.so", "hip-standin");
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("standin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for name in [
            "libamdhip64.so",
            "libamdhip64.so.5",
            "libamdhip64.so.6",
            "libamdhip64.so.7",
        ] {
            let l = dir.join(name);
            let _ = std::fs::remove_file(&l);
            std::os::unix::fs::symlink(&lib, &l).unwrap();
        }
        dir
    })
}

/// The example program `examples/hip/two_priorities.c`, compiled with `cc` against the HIP
/// headers and library Debian installs (`libamdhip64-dev`; scripts/install-deps.sh).
pub fn program() -> &'static Path {
    static PROG: OnceLock<PathBuf> = OnceLock::new();
    PROG.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/hip/two_priorities.c");
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("two_priorities-{}", std::process::id()));
        let r = Command::new("cc")
            .args(["-O2", "-Wall", "-Wextra", "-Werror", "-D__HIP_PLATFORM_AMD__"])
            .arg(&src)
            .arg("-o")
            .arg(&out)
            .arg("-lamdhip64")
            .output()
            .expect("cc runs");
        assert!(
            r.status.success(),
            "compiling {} against the HIP headers failed (Debian: scripts/install-deps.sh build installs libamdhip64-dev):\n{}",
            src.display(),
            String::from_utf8_lossy(&r.stderr)
        );
        out
    })
}

/// A file the stand-in accepts as the code object.
pub fn code_object() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("standin.co");
    std::fs::write(&p, b"the stand-in runtime reads no code object\n").unwrap();
    p
}

/// The program's command: on the stand-in, with the worker, optionally under the interposer.
pub fn command(preload: bool, args: &[&str]) -> Command {
    let mut c = Command::new(program());
    c.arg(code_object())
        .args(args)
        .env("LD_LIBRARY_PATH", standin_dir())
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

/// Waits for `child` at most `limit`; kills it and panics past that (a hang is a failure).
pub fn wait_bounded(mut child: Child, limit: Duration, what: &str) -> Output {
    let t0 = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{what} did not finish within {limit:?} (killed); stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One run: its `key=value` line and its stderr.
pub struct Run {
    pub values: HashMap<String, f64>,
    pub stderr: String,
    pub code: Option<i32>,
}

impl Run {
    pub fn get(&self, k: &str) -> f64 {
        *self
            .values
            .get(k)
            .unwrap_or_else(|| panic!("no {k} in the program's line; stderr:\n{}", self.stderr))
    }
}

pub fn run(preload: bool, args: &[&str], limit: Duration) -> Run {
    finish(command(preload, args).spawn().expect("the program starts"), limit)
}

/// Waits for a program started from [`command`] and reads its line.
pub fn finish(child: Child, limit: Duration) -> Run {
    let out = wait_bounded(child, limit, "two_priorities");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let values = stdout
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?)))
        .collect();
    Run {
        values,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        code: out.status.code(),
    }
}

/// The interposer's exit line: (marks, suspends, resumes, failures).
pub fn exit_counts(stderr: &str) -> Option<(u64, u64, u64, u64)> {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("preempt-hip: pid") && l.contains(" exits: "))?;
    let nums: Vec<u64> = line
        .split(" exits: ")
        .nth(1)?
        .split(", ")
        .filter_map(|p| p.split_whitespace().next()?.parse().ok())
        .collect();
    match nums[..] {
        [a, b, c, d] => Some((a, b, c, d)),
        _ => None,
    }
}

/// The processes (of this uid) whose environment holds `marker`, with their state letter.
pub fn marked(marker: &str) -> Vec<(i32, char)> {
    let needle = marker.as_bytes();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        if env.split(|b| *b == 0).any(|kv| kv == needle)
            && let Ok(stat) = std::fs::read_to_string(e.path().join("stat"))
            && let Some(state) = stat.rsplit(')').next().and_then(|r| r.split_whitespace().next())
        {
            out.push((pid, state.chars().next().unwrap_or('?')));
        }
    }
    out
}

/// A child killed and reaped when dropped: a failing test leaves no program running behind it.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
