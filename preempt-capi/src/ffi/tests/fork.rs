//! The fork contract through the C ABI and the Rust API (docs/c-api.md#fork): a child's calls
//! on the parent's session are FORKED, touch nothing of the parent's, and the parent goes on.
//! `fork` and `_exit` are `unsafe`, which this module (the C ABI's entry points) may use.
use super::*;

/// Forks; the child runs `child` and exits with its code (`_exit`: no atexit handler, no flush
/// of the parent's buffers). The parent waits at most `limit`, then kills it: `Err` says which.
fn in_fork_child(limit: Duration, child: impl FnOnce() -> i32) -> std::result::Result<i32, String> {
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    use nix::unistd::{ForkResult, fork};
    // SAFETY: the child calls only libpreempt_kfd (whose calls on the parent's handles take no lock
    // that another thread may hold: the tests run serially) and then `_exit`.
    match unsafe { fork() }.expect("fork") {
        ForkResult::Child => {
            let code = child();
            // SAFETY: `_exit` ends this (child) process at once; nothing of it is used after.
            unsafe { libc::_exit(code) }
        }
        ForkResult::Parent { child } => {
            let deadline = std::time::Instant::now() + limit;
            loop {
                match waitpid(child, Some(WaitPidFlag::WNOHANG)).expect("waitpid") {
                    WaitStatus::Exited(_, code) => return Ok(code),
                    WaitStatus::StillAlive if std::time::Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    WaitStatus::StillAlive => {
                        let _ = nix::sys::signal::kill(child, nix::sys::signal::Signal::SIGKILL);
                        let _ = waitpid(child, None);
                        return Err(format!("the fork child hung for {limit:?} and was killed"));
                    }
                    other => return Err(format!("the fork child ended by {other:?}")),
                }
            }
        }
    }
}

const FORKED: c_int = preempt_status::PREEMPT_ERR_FORKED as c_int;

/// In a fork child every call on the parent's session and streams is FORKED (the message says the
/// child must open its own), close only releases the child's handle (OK), and nothing of the
/// parent's is touched: its suspended stream stays stopped, its LP and HP workers live, and it goes
/// on working. The child's own session works.
#[test]
fn a_fork_child_gets_forked_and_touches_nothing_of_the_parent() {
    let _one = serial();
    let worker = worker_path();
    let s = open_host(&worker);
    let (lp, held) = (
        create(s, preempt_level::PREEMPT_LEVEL_LV3),
        create(s, preempt_level::PREEMPT_LEVEL_LV3),
    );
    // SAFETY: handles and NULL out pointers (allowed).
    unsafe {
        assert_eq!(preempt_submit_delay(lp, 1_000_000, std::ptr::null_mut()), 0);
        assert_eq!(preempt_synchronize(lp), 0);
        assert_eq!(preempt_hp_submit_delay(s, 1_000_000), 0);
        assert_eq!(preempt_hp_synchronize(s), 0);
        assert_eq!(preempt_suspend(held, std::ptr::null_mut()), 0);
        assert_eq!(preempt_helper_register(lp, 0), 0);
    }
    let held_pids = pids(held);
    let code = in_fork_child(Duration::from_secs(20), || {
        let (mut flag, mut out): (c_int, preempt_stream_t) = (0, 0);
        // SAFETY: handles and valid out pointers; each step returns its number on a failure.
        unsafe {
            let mut name = [0 as c_char; 16];
            let mut hip = std::ptr::null_mut();
            let mut r = preempt_check_result::default();
            let steps: [(i32, c_int); 15] = [
                (1, preempt_submit_delay(lp, 1_000_000, std::ptr::null_mut())),
                (2, preempt_synchronize(lp)),
                (3, preempt_resume(held)),
                (4, preempt_suspend(lp, std::ptr::null_mut())),
                (5, preempt_hp_submit_delay(s, 1_000_000)),
                (6, preempt_hp_synchronize(s)),
                (7, preempt_helper_enter(s, 1)),
                (8, preempt_is_suspended(held, &mut flag)),
                (9, preempt_suspend_set(&held, 1)),
                (10, preempt_stream_create(s, 0, &mut out)),
                (
                    16,
                    preempt_session_mechanism(s, name.as_mut_ptr(), name.len(), std::ptr::null_mut(), 0),
                ),
                (17, preempt_stream_handle(lp, &mut hip)),
                (18, preempt_stream_queue(lp, std::ptr::null_mut(), std::ptr::null_mut())),
                (19, preempt_check(lp, &mut r, std::ptr::null_mut(), 0)),
                (20, preempt_resume_set(&held, 1)),
            ];
            for (step, rc) in steps {
                if rc != FORKED {
                    return step;
                }
            }
            if !last().contains("fork") || !last().contains("own session") {
                return 11;
            }
            if preempt_stream_close(held) != 0
                || preempt_resume(held) != preempt_status::PREEMPT_ERR_BAD_HANDLE as c_int
            {
                return 12;
            }
            if preempt_session_close(s) != 0 {
                return 15;
            }
            if preempt_submit_delay(lp, 1, std::ptr::null_mut()) != preempt_status::PREEMPT_ERR_BAD_HANDLE as c_int {
                return 13;
            }
        }
        // The child's own session.
        let mine = open_host(&worker);
        let st = create(mine, preempt_level::PREEMPT_LEVEL_LV3);
        // SAFETY: handles only.
        unsafe {
            if preempt_submit_delay(st, 1_000_000, std::ptr::null_mut()) != 0
                || preempt_synchronize(st) != 0
                || preempt_session_close(mine) != 0
            {
                return 14;
            }
        }
        0
    });
    assert_eq!(code, Ok(0), "the child's first unexpected step (see the test)");
    assert!(
        states(&held_pids).iter().all(|&c| c == 'T'),
        "the parent's suspension stands: {:?}",
        states(&held_pids)
    );
    // SAFETY: handles and NULL out pointers.
    unsafe {
        assert_eq!(preempt_resume(held), 0, "{}", last());
        for _ in 0..5 {
            assert_eq!(
                preempt_submit_delay(lp, 1_000_000, std::ptr::null_mut()),
                0,
                "{}",
                last()
            );
        }
        assert_eq!(preempt_helper_enter(s, 1), 0, "{}", last());
        assert_eq!(
            preempt_hp_submit_delay(s, 1_000_000),
            0,
            "the HP worker lives: {}",
            last()
        );
        assert_eq!(preempt_hp_synchronize(s), 0, "{}", last());
        assert_eq!(preempt_helper_leave(s, 1), 0, "{}", last());
        assert_eq!(preempt_synchronize(lp), 0, "{}", last());
        let mut r = preempt_check_result::default();
        assert_eq!(preempt_check(lp, &mut r, std::ptr::null_mut(), 0), 0);
        assert_eq!((r.submitted, r.exactly_once, r.finished), (6, 6, 1), "{r:?}");
        assert_eq!(preempt_session_close(s), 0, "{}", last());
    }
}

/// The same contract through the Rust API (what Python sits on): a child's calls are `Forked`,
/// and dropping the parent's session and streams in the child runs none of their teardown.
#[test]
fn a_fork_child_dropping_the_parents_session_runs_no_teardown() {
    let _one = serial();
    let o = preempt_api::Options {
        worker: Some(host_device::testing::built_worker()),
        host_workers: 1,
        ..preempt_api::Options::default()
    };
    let s = Session::open(DeviceSpec::HOST, o).unwrap();
    let lp = s.create_lp_stream(Level::Lv3).unwrap();
    let hp = s.hp_stream().unwrap();
    hp.submit_delay(1_000_000).unwrap();
    hp.synchronize().unwrap();
    lp.submit_delay(1_000_000).unwrap();
    lp.suspend().unwrap();
    let lp_pids = lp.host_pids();
    let code = in_fork_child(Duration::from_secs(20), || {
        let forked = |r: preempt_api::Result<()>| r.is_err_and(|e| e.kind == preempt_api::ErrorKind::Forked);
        let steps = [
            (1, forked(lp.submit_delay(1).map(drop))),
            (2, forked(lp.synchronize())),
            (3, forked(lp.resume())),
            (4, forked(hp.submit_delay(1).map(drop))),
            (5, forked(s.helper_enter(1))),
            (6, forked(s.create_lp_stream(Level::Lv3).map(drop))),
            (7, s.close().is_ok()),
        ];
        if let Some((step, _)) = steps.iter().find(|(_, ok)| !ok) {
            return *step;
        }
        drop((lp.clone(), hp.clone(), s.clone()));
        0
    });
    assert_eq!(code, Ok(0), "the child's first unexpected step (see the test)");
    assert!(
        states(&lp_pids).iter().all(|&c| c == 'T'),
        "still suspended: {:?}",
        states(&lp_pids)
    );
    lp.resume().unwrap();
    lp.synchronize().unwrap();
    hp.submit_delay(1_000_000).expect("the HP worker lives");
    hp.synchronize().unwrap();
    assert!(lp.check().unwrap().ok() && hp.check().ok());
    s.close().unwrap();
}

/// A fork child's resume-all (its own SIGINT/SIGTERM handling, e.g. Python's inherited
/// `install_signal_handlers`) runs the registry it copied from the parent: it must not SIGCONT
/// the parent's suspended workers.
#[test]
fn a_fork_child_s_resume_all_leaves_the_parent_s_suspension_alone() {
    let _one = serial();
    let worker = worker_path();
    let s = open_host(&worker);
    let lp = create(s, preempt_level::PREEMPT_LEVEL_LV3);
    // SAFETY: a handle and a NULL out pointer.
    unsafe {
        assert_eq!(preempt_submit_delay(lp, 200_000_000, std::ptr::null_mut()), 0);
        assert_eq!(preempt_suspend(lp, std::ptr::null_mut()), 0, "{}", last());
    }
    let held = pids(lp);
    let code = in_fork_child(Duration::from_secs(20), || {
        let results = preempt_api::resume_all_and_close();
        let mine = results.iter().filter(|(label, _)| label.contains(&format!("{held:?}")));
        let refused = mine
            .map(|(_, r)| r.as_ref().is_err_and(|e| e.contains("fork child")))
            .collect::<Vec<_>>();
        i32::from(refused != [true])
    });
    assert_eq!(
        code,
        Ok(0),
        "the child's resume-all refused the parent's entry, with the reason"
    );
    assert!(
        states(&held).iter().all(|&c| c == 'T'),
        "still stopped: {:?}",
        states(&held)
    );
    // SAFETY: handles only.
    unsafe {
        assert_eq!(preempt_resume(lp), 0, "{}", last());
        assert_eq!(preempt_synchronize(lp), 0, "{}", last());
        assert_eq!(preempt_session_close(s), 0, "{}", last());
    }
}
