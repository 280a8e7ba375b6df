//! A host-device worker process (see the `host-device` crate). Spawned by `host_device::HostQueue`;
//! not meant to be run by hand, though `echo "run 0 1000000" | host-worker` works.

fn main() -> std::process::ExitCode {
    match host_device::worker_main() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("host-worker: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
