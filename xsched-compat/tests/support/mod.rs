//! What xsched-compat's end-to-end tests share: the library laid out as
//! scripts/install-xsched-compat.sh lays it out, and the environment of a run on the stand-in HIP
//! runtime with or without the interposer. The kit underneath (built libraries, the stand-in
//! under libamdhip64's names, bounded runs) is `hip-testkit`'s.
#![allow(dead_code)] // each test binary uses part of it
use hip_testkit::{built, standin_dir};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

pub fn tmp() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
}

/// A directory laid out as scripts/install-xsched-compat.sh lays it out (`libhalhip.so` a link
/// to `libpreempt.so`: one library, one set of tables).
pub fn lib_dir() -> &'static Path {
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

/// `c` on the stand-in runtime with its worker, the interposer's log on, piped output; under the
/// interposer when `preload`.
pub fn on_standin(c: &mut Command, preload: bool) -> &mut Command {
    c.env("LD_LIBRARY_PATH", standin_dir(tmp()))
        .env("PREEMPT_HOST_WORKER", built("preempt-host-worker", "host-device"))
        .env("PREEMPT_INTERPOSE_LOG", "1")
        // Hermetic: no daemon (unset would mean the node's default one).
        .env("PREEMPT_SCHEDULER", "none")
        // XSched's programs create their streams at normal priority and re-prioritise them with
        // XHintPriority only afterwards, so they need queues of their own from the start
        // (docs/interposer.md#xscheds-c-api-names).
        .env("PREEMPT_OWN_QUEUES", "always")
        .env_remove("LD_PRELOAD")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if preload {
        c.env("LD_PRELOAD", built("libpreempt_hip.so", "hip-interpose"));
    }
    c
}
