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
    let size = o.struct_size;
    o.mechanism = c"auto".as_ptr();
    let mut h = 0;
    for wrong in [size - 4, size + 8, 4, 0] {
        o.struct_size = wrong;
        // SAFETY: valid strings, struct and out pointer.
        let code = unsafe { preempt_session_open(c"host".as_ptr(), &o, &mut h) };
        assert_eq!(code, preempt_status::PREEMPT_ERR_INVALID_ARGUMENT as c_int, "{wrong}");
        assert!(last().contains("preempt_options_init"), "{}", last());
    }
    // The first version's size (before `scheduler`) is read up to its end: the field past it,
    // however it is set here, is not the caller's and keeps its default.
    o.struct_size = u32::try_from(crate::types::PREEMPT_OPTIONS_V1_SIZE).unwrap();
    o.scheduler = c"not a scheduler word".as_ptr();
    o.host_worker = std::ptr::null();
    o.host_workers = 1;
    let worker = std::ffi::CString::new(
        host_device::testing::built_worker()
            .program
            .into_os_string()
            .into_encoded_bytes(),
    )
    .unwrap();
    o.host_worker = worker.as_ptr();
    // SAFETY: as above; the first V1_SIZE bytes are a whole first-version struct.
    let code = unsafe { preempt_session_open(c"host".as_ptr(), &o, &mut h) };
    assert_eq!(code, 0, "{}", last());
    // SAFETY: the handle just opened.
    assert_eq!(unsafe { preempt_session_close(h) }, 0);
    o.scheduler = std::ptr::null();
    o.struct_size = size;
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
        (preempt_level::PREEMPT_LEVEL_LV2, Level::Lv2),
        (preempt_level::PREEMPT_LEVEL_LV3, Level::Lv3),
    ] {
        assert_eq!(Level::from_number(c as i64).unwrap(), l);
    }
    let e = Level::from_number(4).unwrap_err();
    assert_eq!(e.kind, preempt_api::ErrorKind::InvalidArgument);
    assert_eq!(e.message, "4".parse::<Level>().unwrap_err().message);
    // Lv2 where there is none (a GPU) is C's PREEMPT_ERR_UNAVAILABLE.
    let gpu = preempt_api::lv2_unavailable(preempt_api::DeviceSpec::Hip(0));
    assert_eq!(gpu.kind.code(), preempt_status::PREEMPT_ERR_UNAVAILABLE as i32);
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

mod fork;
mod policy;

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

/// Messages name what the C caller knows, the handle, not the library's internal stream ids (which
/// start at 1 in every session).
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

/// PREEMPT_LEVEL_LV2 on the host device: suspend returns once the running command finished, the
/// held worker waits (neither stopped nor running), and after resume every command ran once. The
/// calls run on a thread of their own, given up after a minute (a failure, not a hang).
#[test]
fn an_lv2_stream_lets_the_running_command_finish_and_runs_the_rest_once_after_resume() {
    let _one = serial();
    let worker = worker_path();
    let s = open_host(&worker);
    let lp = create(s, preempt_level::PREEMPT_LEVEL_LV2);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut r = preempt_check_result::default();
        // SAFETY: handles, NULL or valid out pointers.
        let held = unsafe {
            for _ in 0..3 {
                assert_eq!(
                    preempt_submit_delay(lp, 40_000_000, std::ptr::null_mut()),
                    0,
                    "{}",
                    last()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
            assert_eq!(preempt_suspend(lp, std::ptr::null_mut()), 0, "{}", last());
            // It answered `held` just before it blocks reading: give it the moment to get there.
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            let mut held = states(&pids(lp));
            while held != ['S'] && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
                held = states(&pids(lp));
            }
            assert_eq!(preempt_resume(lp), 0, "{}", last());
            assert_eq!(preempt_synchronize(lp), 0, "{}", last());
            assert_eq!(preempt_check(lp, &mut r, std::ptr::null_mut(), 0), 0, "{}", last());
            assert_eq!(preempt_session_close(s), 0, "{}", last());
            held
        };
        let _ = tx.send((held, r));
    });
    let (held, r) = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the Lv2 calls finished within a minute");
    assert_eq!(held, ['S'], "a held worker waits for its next line");
    assert!(r.finished == 1 && r.problems == 0 && r.exactly_once == 3, "{r:?}");
}
