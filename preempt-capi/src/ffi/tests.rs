//! The boundary's own rules, without a device: panics are caught (and the guards they unwind
//! through resume), pointers and handles are checked, codes and names agree with the API.
use super::*;
use lv3::mechanism::{MechError, MechanismKind, Preempt, Preemptor, QueueTarget, SuspendReport};
use std::ffi::CStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// A mechanism that records its resumes.
struct Recording(Arc<AtomicU32>);

impl Preempt for Recording {
    fn kind(&self) -> MechanismKind {
        MechanismKind::UpdateQueue
    }
    fn suspend(&self, q: &QueueTarget) -> std::result::Result<SuspendReport, MechError> {
        Ok(SuspendReport {
            mechanism: self.kind(),
            queue_id: q.queue_id,
            total: Duration::ZERO,
            preempt_call: Duration::ZERO,
            cleared_queue_new: false,
            kernel: None,
        })
    }
    fn resume(&self, _: &QueueTarget) -> std::result::Result<(), MechError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

fn last() -> String {
    // SAFETY: preempt_last_error never returns NULL and its string lives until the next failing
    // call on this thread.
    unsafe { CStr::from_ptr(preempt_last_error()) }
        .to_string_lossy()
        .into_owned()
}

#[test]
fn a_panic_is_a_code_and_the_guard_it_unwinds_through_resumes() {
    let _one = serial();
    let resumed = Arc::new(AtomicU32::new(0));
    let p = Preemptor::new(Recording(Arc::clone(&resumed)));
    let code = run(|| {
        let _held = p.suspend(&QueueTarget::NONEXISTENT)?;
        panic!("boom inside the library");
    });
    assert_eq!(code, preempt_status::PREEMPT_ERR_PANIC as c_int);
    assert_eq!(resumed.load(Ordering::SeqCst), 1, "the guard resumed while unwinding");
    assert!(!p.is_suspended(&QueueTarget::NONEXISTENT));
    assert!(last().contains("boom inside the library"), "{}", last());
}

#[test]
fn null_pointers_and_stale_handles_are_errors_not_crashes() {
    let _one = serial();
    let mut h: preempt_session_t = 0;
    // SAFETY: NULL device (refused) and a valid out pointer.
    let code = unsafe { preempt_session_open(std::ptr::null(), std::ptr::null(), &mut h) };
    assert_eq!(code, preempt_status::PREEMPT_ERR_INVALID_ARGUMENT as c_int);
    assert!(last().contains("device is NULL"), "{}", last());
    // SAFETY: a valid string; NULL out is refused before anything else.
    let code = unsafe { preempt_session_open(c"host".as_ptr(), std::ptr::null(), std::ptr::null_mut()) };
    assert_eq!(code, preempt_status::PREEMPT_ERR_INVALID_ARGUMENT as c_int);
    // SAFETY: valid strings and out pointer.
    let code = unsafe { preempt_session_open(c"gpu:0".as_ptr(), std::ptr::null(), &mut h) };
    assert_eq!(code, preempt_status::PREEMPT_ERR_INVALID_ARGUMENT as c_int);
    // The API's wording, which lists every device.
    let expected = "gpu:0".parse::<preempt_api::DeviceSpec>().unwrap_err().message;
    assert!(last().contains(&expected), "{}", last());
    // SAFETY: handles only.
    unsafe {
        assert_eq!(
            preempt_session_close(987_654),
            preempt_status::PREEMPT_ERR_BAD_HANDLE as c_int
        );
        assert_eq!(preempt_resume(0), preempt_status::PREEMPT_ERR_BAD_HANDLE as c_int);
        assert_eq!(
            preempt_suspend_set(std::ptr::null(), 0),
            preempt_status::PREEMPT_ERR_INVALID_ARGUMENT as c_int
        );
    }
    assert!(last().contains("empty set"), "{}", last());
}

#[test]
fn options_of_another_size_are_refused() {
    let _one = serial();
    let mut o = std::mem::MaybeUninit::<preempt_options>::uninit();
    // SAFETY: a valid, writable preempt_options.
    assert_eq!(unsafe { preempt_options_init(o.as_mut_ptr()) }, 0);
    // SAFETY: initialised just above.
    let mut o = unsafe { o.assume_init() };
    o.struct_size -= 8;
    o.mechanism = c"auto".as_ptr();
    let mut h = 0;
    // SAFETY: valid strings, struct and out pointer.
    let code = unsafe { preempt_session_open(c"host".as_ptr(), &o, &mut h) };
    assert_eq!(code, preempt_status::PREEMPT_ERR_INVALID_ARGUMENT as c_int);
    assert!(last().contains("preempt_options_init"), "{}", last());
    o.struct_size += 8;
    o.mechanism = c"sigstop".as_ptr();
    // SAFETY: as above.
    let code = unsafe { preempt_session_open(c"host".as_ptr(), &o, &mut h) };
    assert_eq!(code, preempt_status::PREEMPT_ERR_INVALID_ARGUMENT as c_int);
    assert!(last().contains("unknown mechanism"), "{}", last());
}

#[test]
fn codes_names_and_kinds_agree() {
    let _one = serial();
    for k in preempt_api::ErrorKind::ALL {
        let s = preempt_status::of(k);
        assert_eq!(s as i32, k.code());
        // SAFETY: preempt_status_name returns a static C string.
        let name = unsafe { CStr::from_ptr(preempt_status_name(s as c_int)) }
            .to_str()
            .unwrap();
        assert_eq!(name.strip_prefix("PREEMPT_ERR_").unwrap().to_lowercase(), k.name());
    }
    // SAFETY: static C strings.
    unsafe {
        assert_eq!(CStr::from_ptr(preempt_status_name(0)), c"PREEMPT_OK");
        assert_eq!(CStr::from_ptr(preempt_status_name(-99)), c"PREEMPT_ERR_UNKNOWN");
        assert_eq!(
            CStr::from_ptr(preempt_version()).to_str().unwrap(),
            env!("CARGO_PKG_VERSION")
        );
    }
}

#[test]
fn c_levels_are_the_api_levels_and_others_get_the_grammar_s_error() {
    let _one = serial();
    for (c, l) in [
        (preempt_level::PREEMPT_LEVEL_AUTO, Level::Auto),
        (preempt_level::PREEMPT_LEVEL_LV1, Level::Lv1),
        (preempt_level::PREEMPT_LEVEL_LV3, Level::Lv3),
    ] {
        assert_eq!(Level::from_number(c as i64).unwrap(), l);
    }
    let e = Level::from_number(2).unwrap_err();
    assert_eq!(e.kind, preempt_api::ErrorKind::InvalidArgument);
    assert_eq!(e.message, "2".parse::<Level>().unwrap_err().message);
}

#[test]
fn put_str_truncates_and_terminates() {
    let _one = serial();
    let mut buf = [c_char::try_from(b'x').unwrap(); 6];
    // SAFETY: `buf` is valid for its length.
    unsafe { put_str(buf.as_mut_ptr(), buf.len(), "dbg-trap") };
    // SAFETY: put_str NUL-terminated it.
    assert_eq!(unsafe { CStr::from_ptr(buf.as_ptr()) }, c"dbg-t");
    // SAFETY: a NULL buffer is skipped.
    unsafe { put_str(std::ptr::null_mut(), 10, "x") };
}

/// The tests below open host sessions and fork: they run one at a time, so that no other test's
/// thread is inside the library when one forks (a child may only take the locks nobody held).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Also puts the default panic hook back (the library installs a silent one on its first call,
/// which would hide a failing assertion's message).
fn serial() -> std::sync::MutexGuard<'static, ()> {
    let g = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    run(|| Ok(()));
    drop(std::panic::take_hook());
    g
}

/// Host options with cargo's worker and one worker per stream; the path lives as long as `o`'s use.
fn host_options(worker: &std::ffi::CString) -> preempt_options {
    let mut o = std::mem::MaybeUninit::<preempt_options>::uninit();
    // SAFETY: a valid, writable preempt_options.
    assert_eq!(unsafe { preempt_options_init(o.as_mut_ptr()) }, 0);
    // SAFETY: initialised just above.
    let mut o = unsafe { o.assume_init() };
    o.host_worker = worker.as_ptr();
    o.host_workers = 1;
    o
}

fn worker_path() -> std::ffi::CString {
    let w = host_device::testing::built_worker();
    std::ffi::CString::new(w.program.to_str().expect("a UTF-8 path")).unwrap()
}

fn open_host(worker: &std::ffi::CString) -> preempt_session_t {
    let o = host_options(worker);
    let mut s = 0;
    // SAFETY: valid strings, struct and out pointer.
    assert_eq!(
        unsafe { preempt_session_open(c"host".as_ptr(), &o, &mut s) },
        0,
        "{}",
        last()
    );
    s
}

fn create(s: preempt_session_t, level: preempt_level) -> preempt_stream_t {
    let mut h = 0;
    // SAFETY: a valid out pointer.
    assert_eq!(
        unsafe { preempt_stream_create(s, level as c_int, &mut h) },
        0,
        "{}",
        last()
    );
    h
}

fn states(pids: &[i32]) -> Vec<char> {
    pids.iter()
        .map(|&p| host_device::proc_state(p).unwrap_or('?'))
        .collect()
}

/// The worker pids behind a stream handle (the handle table is this crate's).
fn pids(h: preempt_stream_t) -> Vec<i32> {
    crate::handles::stream(h).expect("an open stream").1.host_pids()
}

/// Forks; the child runs `child` and exits with its code (`_exit`: no atexit handler, no flush
/// of the parent's buffers). The parent waits at most `limit`, then kills it: `Err` says which.
fn in_fork_child(limit: Duration, child: impl FnOnce() -> i32) -> std::result::Result<i32, String> {
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    use nix::unistd::{ForkResult, fork};
    // SAFETY: the child calls only libpreempt (whose calls on the parent's handles take no lock
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

/// Issue 20 item 3: in a fork child every call on the parent's session and streams is FORKED (the
/// message says the child must open its own), close only releases the child's handle (OK), and
/// nothing of the parent's is touched: its suspended stream stays stopped, its LP and HP workers
/// live, and it goes on working. The child's own session works.
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
    let s = Session::open(DeviceSpec::Host, o).unwrap();
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

/// Issue 20 item 16: messages name what the C caller knows, the handle, not the library's
/// internal stream ids (which start at 1 in every session).
#[test]
fn messages_name_the_handle() {
    let _one = serial();
    let worker = worker_path();
    let s = open_host(&worker);
    let (a, b) = (
        create(s, preempt_level::PREEMPT_LEVEL_LV3),
        create(s, preempt_level::PREEMPT_LEVEL_LV3),
    );
    let name = |h: preempt_stream_t| format!("stream handle {h}");
    // SAFETY: handles and NULL out pointers.
    unsafe {
        assert_eq!(preempt_suspend(b, std::ptr::null_mut()), 0);
        assert_eq!(
            preempt_suspend(b, std::ptr::null_mut()),
            preempt_status::PREEMPT_ERR_ALREADY_SUSPENDED as c_int
        );
        assert!(last().contains(&name(b)), "{}", last());
        assert_eq!(preempt_resume(a), preempt_status::PREEMPT_ERR_NOT_SUSPENDED as c_int);
        assert!(last().contains(&name(a)), "{}", last());
        let set = [a, b];
        assert_eq!(
            preempt_suspend_set(set.as_ptr(), 2),
            preempt_status::PREEMPT_ERR_ALREADY_SUSPENDED as c_int
        );
        assert!(last().contains(&name(b)), "{}", last());
        assert_eq!(preempt_helper_register(a, 0), 0);
        assert_eq!(preempt_helper_enter(s, 1), 0);
        assert_eq!(preempt_resume(a), preempt_status::PREEMPT_ERR_BUSY as c_int);
        assert!(last().contains(&name(a)) && last().contains("helper"), "{}", last());
        assert_eq!(preempt_helper_leave(s, 1), 0);
        for id in 1..=2 {
            assert!(!last().contains(&format!("stream {id} ")), "an internal id: {}", last());
        }
        assert_eq!(preempt_session_close(s), 0);
    }
}

#[test]
fn the_header_s_limits_are_the_api_s() {
    assert_eq!(PREEMPT_MAX_DELAY_NS, preempt_api::MAX_DELAY_NS);
    assert_eq!(
        Duration::from_millis(u64::from(PREEMPT_CLOSE_WAIT_MS)),
        preempt_api::CLOSE_WAIT
    );
}
