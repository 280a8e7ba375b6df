//! For tests against the real HIP runtime (feature `test-util`; this crate's own unit tests get it
//! too): hip-rt's and gpu-device's. They run wherever libamdhip64 loads (Debian's HIP here and in
//! CI, where `scripts/test-all.sh` sets `PREEMPT_REQUIRE_HIP=1`) and skip visibly elsewhere.
use super::{Hip, HipError};

/// Whether `PREEMPT_REQUIRE_HIP=1`: the HIP runtime must load, a missing one fails the test.
pub fn hip_required() -> bool {
    std::env::var("PREEMPT_REQUIRE_HIP").is_ok_and(|v| v == "1")
}

/// The real HIP, or `None` with the reason on stderr (`SKIPPED: ...`) when it is not installed
/// and not [required](hip_required).
///
/// ```no_run
/// let Some(hip) = hip_rt::testing::real_hip() else { return };
/// println!("HIP from {}", hip.library_path());
/// ```
///
/// # Panics
/// When HIP is installed but does not load (a missing symbol, a broken library), or is required
/// and not found.
pub fn real_hip() -> Option<Hip> {
    match Hip::load() {
        Ok(h) => Some(h),
        Err(e @ HipError::LibraryNotFound { .. }) if !hip_required() => {
            eprintln!("SKIPPED: HIP is not installed here (set PREEMPT_REQUIRE_HIP=1 to fail instead): {e}");
            None
        }
        Err(e) => panic!("HIP failed to load: {e}"),
    }
}

/// A tiny shared library for the loader's tests, built with `cc` into a directory of its own:
/// `file` with soname `soname`, exporting `int <symbol>(void)` for each of `symbols`. `None`
/// (with `SKIPPED` on stderr) where there is no C compiler; rustc links through `cc`, so every
/// machine that builds these tests has one.
#[cfg(test)]
pub(crate) struct FakeLibrary {
    pub dir: std::path::PathBuf,
    pub path: std::path::PathBuf,
}

#[cfg(test)]
impl FakeLibrary {
    pub(crate) fn build(tag: &str, file: &str, soname: &str, symbols: &[&str]) -> Option<FakeLibrary> {
        use std::io::Write;
        use std::process::{Command, Stdio};
        let dir = std::env::temp_dir().join(format!("hip-rt-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let path = dir.join(file);
        let src: String = symbols
            .iter()
            .map(|s| format!("int {s}(void) {{ return 7; }}\n"))
            .collect();
        let child = Command::new("cc")
            .args(["-x", "c", "-shared", "-fPIC", "-o"])
            .arg(&path)
            .arg(format!("-Wl,-soname,{soname}"))
            .arg("-")
            .stdin(Stdio::piped())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                eprintln!("SKIPPED: no C compiler (cc) to build a fake library: {e}");
                return None;
            }
        };
        child
            .stdin
            .take()
            .expect("piped stdin")
            .write_all(src.as_bytes())
            .expect("writing the source to cc");
        let status = child.wait().expect("waiting for cc");
        assert!(status.success(), "cc failed building {}: {status}", path.display());
        Some(FakeLibrary { dir, path })
    }

    /// The library's path as a string (as the loader reports it).
    pub(crate) fn path_str(&self) -> String {
        self.path.display().to_string()
    }
}

#[cfg(test)]
impl Drop for FakeLibrary {
    fn drop(&mut self) {
        // The file may stay mapped (never dlclosed); removing the directory entry is harmless.
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
