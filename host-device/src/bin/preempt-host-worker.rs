//! `preempt-host-worker`: the host device's worker process, the one program every user of the
//! host device spawns (preempt-lat, preempt-api and so libpreempt_kfd; the Python package runs the
//! same loop in its own interpreter). Started by a host queue (`host_device::HostQueue`), not
//! meant to be run by hand, though `echo "run 0 1000000" | preempt-host-worker` works.

fn main() -> std::process::ExitCode {
    match host_device::worker_main() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}: {e}", host_device::WORKER_NAME);
            std::process::ExitCode::FAILURE
        }
    }
}
