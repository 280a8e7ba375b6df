//! For the tests of the crates layered on the stand-in HIP runtime (hip-interpose,
//! xsched-compat): what running an unmodified HIP program on it takes, in one place. A crate of
//! its own, exporting no HIP name, because the crates it serves each export HIP's names and
//! one test binary cannot link two of them. The workspace's cdylibs and worker as cargo
//! built them, the stand-in under libamdhip64's names, an example of `examples/hip/` compiled
//! against the installed HIP headers, and a run of it bounded in time, read as its `key=value`
//! line.
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// `target/<profile>/` of the running test.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test's executable");
    let dir = exe.parent().expect("its directory");
    if dir.ends_with("deps") {
        dir.parent().unwrap_or(dir)
    } else {
        dir
    }
    .to_path_buf()
}

/// A library or program of the workspace as cargo built it. `cargo test` leaves cdylibs in
/// `deps/` (only `cargo build` copies them up a directory), so `deps/` first: it is the fresher.
///
/// # Panics
/// When it is not built, with the command that builds it.
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

/// A directory under `tmp` where the stand-in answers to every libamdhip64 name a program may
/// need (made once per process: the first `tmp` given wins).
pub fn standin_dir(tmp: &Path) -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let lib = built("libhip_standin.so", "hip-standin");
        let dir = tmp.join(format!("standin-{}", std::process::id()));
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

/// `examples/hip/<name>.c` compiled with `cc` against the HIP headers and library Debian
/// installs (`libamdhip64-dev`; scripts/install-deps.sh), linked with `-lamdhip64` and `libs`,
/// into `tmp`.
///
/// # Panics
/// When it does not compile, with cc's output.
pub fn compile_example(name: &str, tmp: &Path, libs: &[&str]) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../examples/hip/{name}.c"));
    let out = tmp.join(format!("{name}-{}", std::process::id()));
    let r = Command::new("cc")
        .args(["-O2", "-Wall", "-Wextra", "-Werror", "-D__HIP_PLATFORM_AMD__"])
        .arg(&src)
        .arg("-o")
        .arg(&out)
        .arg("-lamdhip64")
        .args(libs)
        .output()
        .expect("cc runs");
    assert!(
        r.status.success(),
        "compiling {} against the HIP headers failed (Debian: scripts/install-deps.sh build installs libamdhip64-dev):\n{}",
        src.display(),
        String::from_utf8_lossy(&r.stderr)
    );
    out
}

/// A file under `tmp` the stand-in accepts as the code object (it reads none).
pub fn code_object(tmp: &Path) -> PathBuf {
    let p = tmp.join("standin.co");
    std::fs::write(&p, b"the stand-in runtime reads no code object\n").unwrap();
    p
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

/// One run of an example: its `key=value` line, its stderr and its exit status.
pub struct Run {
    pub values: HashMap<String, f64>,
    pub stderr: String,
    pub code: Option<i32>,
}

impl Run {
    /// Reads a finished program's output.
    pub fn from_output(out: &Output) -> Run {
        let stdout = String::from_utf8_lossy(&out.stdout);
        Run {
            values: stdout
                .split_whitespace()
                .filter_map(|kv| kv.split_once('='))
                .filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?)))
                .collect(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            code: out.status.code(),
        }
    }

    /// Value `k` of the line.
    ///
    /// # Panics
    /// When the line has no `k`, with the program's stderr.
    pub fn get(&self, k: &str) -> f64 {
        *self
            .values
            .get(k)
            .unwrap_or_else(|| panic!("no {k} in the program's line; stderr:\n{}", self.stderr))
    }
}

/// Waits for `child` (at most `limit`) and reads its line.
pub fn finish(child: Child, limit: Duration, what: &str) -> Run {
    Run::from_output(&wait_bounded(child, limit, what))
}

/// A child killed and reaped when dropped: a failing test leaves no program running behind it.
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The processes (of this uid) whose environment holds `marker` (`NAME=value`), with their
/// state letter (`T`: stopped).
pub fn marked(marker: &str) -> Vec<(i32, char)> {
    let needle = marker.as_bytes();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
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
