//! A host-device worker process (see `lv1::host`). Spawned by `lv1::host::HostQueue`;
//! not meant to be run by hand, though `echo "run 0 1000000" | host-worker` works.

fn main() -> std::process::ExitCode {
    match lv1::host::worker_main() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("host-worker: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
