//! For other crates' tests (feature `test-util`): the worker program as cargo built it.
use super::{WORKER_NAME, WorkerExe};

/// This crate's `preempt-host-worker` as cargo built it for the running test: in the profile
/// directory (`target/<profile>/`), the parent of the test executable's `deps/`. This crate's own
/// integration tests have `env!("CARGO_BIN_EXE_preempt-host-worker")`; another crate's tests do
/// not, and cargo builds another package's binary only when that package is built too:
/// `cargo test --workspace` does, `cargo test -p <crate>` alone needs `cargo build -p host-device`
/// first. `$PREEMPT_HOST_WORKER` is not consulted: a test names the worker it was built with.
///
/// # Panics
/// When the worker is not there, with the command that builds it.
pub fn built_worker() -> WorkerExe {
    let exe = std::env::current_exe().expect("the running test's executable");
    let dir = exe.parent().expect("the test executable's directory");
    let profile_dir = if dir.ends_with("deps") {
        dir.parent().unwrap_or(dir)
    } else {
        dir
    };
    let worker = profile_dir.join(WORKER_NAME);
    let release = if profile_dir.ends_with("release") {
        " --release"
    } else {
        ""
    };
    assert!(
        worker.is_file(),
        "{} is not built: run `cargo build{release} -p host-device` (`cargo test --workspace` builds it)",
        worker.display()
    );
    WorkerExe::new(worker)
}
