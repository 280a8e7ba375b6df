//! The host device's worker process for applications of preempt-api (C and Python): the same
//! worker as host-device's `host-worker`, under the name libpreempt looks for
//! (`preempt-host-worker` beside the library or in `libexec/preempt-kfd/`). Spawned by the
//! library, not run by hand.

fn main() -> std::process::ExitCode {
    match preempt_api::worker_main() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("preempt-host-worker: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
