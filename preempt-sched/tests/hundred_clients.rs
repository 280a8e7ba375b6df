//! 100 client processes (99 low-priority streams in 99 processes, one high-priority process)
//! on one daemon: one block suspends every stream, its leave resumes every one.
mod common;
use common::{Client, Daemon, STEP, stopped, temp_dir, wait_until};

const LP_CLIENTS: usize = 99;

#[test]
fn one_hp_block_suspends_99_other_processes_and_resumes_them() {
    let dir = temp_dir("hundred");
    let d = Daemon::start(&dir, &[]);
    let mut lps: Vec<Client> = (0..LP_CLIENTS)
        .map(|_| Client::spawn_with(std::process::Command::new(&*common::CLIENT), &d.socket, &["--lp", "1"]))
        .collect();
    lps = lps.into_iter().map(Client::expect_ready).collect();
    let mut hp = Client::spawn(&d.socket, &["--lp", "0"]);
    let workers: Vec<i32> = lps.iter().flat_map(|c| c.workers.clone()).collect();
    assert_eq!(workers.len(), LP_CLIENTS);
    for round in 0..3 {
        let (scheduled, suspended, failed, late) = hp.enter(1);
        assert!(scheduled);
        assert_eq!(
            (suspended, failed, late),
            (u32::try_from(LP_CLIENTS).unwrap(), 0, 0),
            "round {round}: {}",
            d.log_text()
        );
        let running: Vec<i32> = workers.iter().copied().filter(|&w| !stopped(w)).collect();
        assert!(
            running.is_empty(),
            "round {round}: not stopped when enter returned: {running:?}"
        );
        assert_eq!(hp.cmd("leave 1"), "left");
        assert!(
            wait_until(STEP, || workers.iter().all(|&w| !stopped(w))),
            "round {round}: every stream resumes"
        );
    }
    hp.quit();
    for c in lps {
        c.quit();
    }
}
