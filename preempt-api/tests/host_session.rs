//! The API end to end on the host device (CPU worker processes; host Lv3 = SIGSTOP/SIGCONT):
//! what the C ABI and the Python package rely on, without either.
use host_device::proc_state;
use preempt_api::{DeviceSpec, ErrorKind, Level, Options, QueueDesc, Session, WorkerExe};
use std::time::Duration;

const MS: u64 = 1_000_000;

fn opts() -> Options {
    Options {
        worker: Some(host_device::testing::built_worker()),
        host_workers: 1,
        ..Options::default()
    }
}

fn host() -> Session {
    Session::open(DeviceSpec::HOST, opts()).expect("the host device opens")
}

fn stopped(pids: &[i32]) -> bool {
    pids.iter().all(|&p| proc_state(p).is_ok_and(|s| s == 'T'))
}

#[test]
fn lv3_stops_the_running_command_and_nothing_is_lost() {
    let s = host();
    assert_eq!(s.mechanism().name.as_deref(), Some("sigstop"));
    let lp = s.create_lp_stream(Level::Auto).unwrap();
    assert_eq!(lp.level(), Level::Lv3);
    assert_eq!(lp.handle(), None, "no hipStream_t on the host device");
    for _ in 0..20 {
        lp.submit_delay(2 * MS).unwrap();
    }
    std::thread::sleep(Duration::from_millis(5));
    let info = lp.suspend().unwrap();
    assert_eq!(info.mechanism, "sigstop");
    assert!(stopped(&lp.host_pids()), "every worker is stopped once suspend returns");
    assert!(
        lv3::signals::registered()
            .iter()
            .any(|l| l.contains(&format!("host workers {:?}", lp.host_pids()))),
        "a host suspension is in lv3's signal registry"
    );
    std::thread::sleep(Duration::from_millis(20));
    let c1 = lp.check().unwrap().completed;
    std::thread::sleep(Duration::from_millis(60));
    assert_eq!(lp.check().unwrap().completed, c1, "nothing completes while suspended");
    assert_eq!(lp.suspend().unwrap_err().kind, ErrorKind::AlreadySuspended);
    lp.resume().unwrap();
    assert!(!stopped(&lp.host_pids()));
    assert_eq!(lp.resume().unwrap_err().kind, ErrorKind::NotSuspended);
    lp.synchronize().unwrap();
    let c = lp.check().unwrap();
    assert!(c.ok(), "{c:?}");
    assert_eq!(c.exactly_once, 20);
    s.close().unwrap();
}

#[test]
fn lv1_drains_and_holds_the_pending_commands() {
    let s = host();
    let lp = s.create_lp_stream(Level::Lv1).unwrap();
    for _ in 0..30 {
        lp.submit_delay(MS).unwrap();
    }
    let info = lp.suspend().unwrap();
    assert_eq!((info.level, info.mechanism.as_str()), (Level::Lv1, "lv1-drain"));
    let c = lp.check().unwrap();
    assert!(c.completed < 30, "the launcher holds the rest: {c:?}");
    assert_eq!(
        lp.synchronize().unwrap_err().kind,
        ErrorKind::Unsupported,
        "waiting under an Lv1 suspension would never end"
    );
    lp.resume().unwrap();
    lp.synchronize().unwrap();
    assert!(lp.check().unwrap().ok());
}

#[test]
fn the_helper_suspends_every_registered_stream_during_a_high_priority_block() {
    let s = host();
    let (a, b) = (
        s.create_lp_stream(Level::Lv3).unwrap(),
        s.create_lp_stream(Level::Lv1).unwrap(),
    );
    s.helper_register(&a, 0).unwrap();
    s.helper_register(&b, 0).unwrap();
    for _ in 0..10 {
        a.submit_delay(MS).unwrap();
        b.submit_delay(MS).unwrap();
    }
    let hp = s.hp_stream().unwrap();
    s.helper_enter(1).unwrap();
    assert!(a.is_suspended() && b.is_suspended());
    s.helper_enter(1).unwrap(); // a concurrent block
    hp.submit_delay(MS).unwrap();
    hp.synchronize().unwrap();
    s.helper_leave(1).unwrap();
    assert!(a.is_suspended(), "one block is still active");
    s.helper_leave(1).unwrap();
    assert!(!a.is_suspended() && !b.is_suspended());
    assert_eq!(s.helper_leave(1).unwrap_err().kind, ErrorKind::InvalidArgument);
    // A stream suspended by hand stays the user's: the helper neither fails nor resumes it
    // (host_contracts.rs has the rest of who holds a suspension).
    a.suspend().unwrap();
    s.helper_enter(1).unwrap();
    assert!(a.is_suspended() && b.is_suspended());
    s.helper_leave(1).unwrap();
    assert!(
        a.is_suspended() && !b.is_suspended(),
        "the hand suspension outlives the block"
    );
    a.resume().unwrap();
    for st in [&a, &b] {
        st.synchronize().unwrap();
        assert!(st.check().unwrap().ok());
    }
}

/// The in-process helper is the session's own: a block of a session on `host:0` suspends its
/// streams and none of a session on `host:1` in the same process (nor does the `host:1`
/// session's block touch `host:0`'s), so two devices' sessions in one process do not interact.
#[test]
fn the_in_process_helper_of_one_device_s_session_leaves_another_device_s_alone() {
    let open = |n| Session::open(DeviceSpec::Host(n), opts()).unwrap();
    let (s0, s1) = (open(0), open(1));
    assert_eq!(
        (s0.device().to_string(), s1.device().to_string()),
        ("host".into(), "host:1".into())
    );
    let lp0 = s0.create_lp_stream(Level::Lv3).unwrap();
    let lp1 = s1.create_lp_stream(Level::Lv3).unwrap();
    s0.helper_register(&lp0, 0).unwrap();
    s1.helper_register(&lp1, 0).unwrap();
    assert_eq!(
        s0.helper_register(&lp1, 0).unwrap_err().kind,
        ErrorKind::InvalidArgument,
        "a session's helper takes only its own streams"
    );
    s0.helper_enter(1).unwrap();
    assert!(lp0.is_suspended() && stopped(&lp0.host_pids()));
    assert!(!lp1.is_suspended() && !stopped(&lp1.host_pids()));
    s1.helper_enter(1).unwrap();
    assert!(lp1.is_suspended());
    s0.helper_leave(1).unwrap();
    assert!(
        !lp0.is_suspended() && lp1.is_suspended(),
        "host:0's leave resumes host:0's only"
    );
    s1.helper_leave(1).unwrap();
    assert!(!lp1.is_suspended());
    s0.close().unwrap();
    s1.close().unwrap();
}

#[test]
fn many_cycles_keep_every_command_exactly_once() {
    let s = host();
    let lp = s.create_lp_stream(Level::Lv3).unwrap();
    s.helper_register(&lp, 0).unwrap();
    for i in 0..150 {
        lp.submit_delay(200_000).unwrap();
        if i % 2 == 0 {
            lp.suspend().unwrap();
            lp.resume().unwrap();
        } else {
            s.helper_enter(1).unwrap();
            s.helper_leave(1).unwrap();
        }
    }
    lp.synchronize().unwrap();
    let c = lp.check().unwrap();
    assert!(c.ok() && c.exactly_once == 150, "{c:?}");
}

#[test]
fn close_resumes_everything_and_refuses_later_calls() {
    let s = host();
    let lp = s.create_lp_stream(Level::Lv3).unwrap();
    lp.submit_delay(50 * MS).unwrap();
    lp.suspend().unwrap();
    let pids = lp.host_pids();
    assert!(stopped(&pids));
    s.close().unwrap();
    assert!(!stopped(&pids), "closing resumed the stream");
    assert!(!lp.is_suspended());
    assert_eq!(lp.suspend().unwrap_err().kind, ErrorKind::Closed);
    assert_eq!(s.create_lp_stream(Level::Auto).unwrap_err().kind, ErrorKind::Closed);
    s.close().unwrap(); // idempotent
}

#[test]
fn set_suspend_is_all_or_nothing() {
    let s = host();
    let (a, b) = (
        s.create_lp_stream(Level::Lv3).unwrap(),
        s.create_lp_stream(Level::Lv3).unwrap(),
    );
    b.suspend().unwrap();
    let e = s.suspend_set(&[a.clone(), b.clone()]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::AlreadySuspended);
    assert!(!a.is_suspended(), "a was resumed when b failed");
    b.resume().unwrap();
    s.suspend_set(&[a.clone(), b.clone()]).unwrap();
    assert!(a.is_suspended() && b.is_suspended());
    s.resume_set(&[a, b]).unwrap();
}

#[test]
fn host_errors_are_typed() {
    let bad = Session::open(
        DeviceSpec::HOST,
        Options {
            mechanism: lv3::MechanismChoice::Only(lv3::MechanismKind::DbgTrap),
            ..opts()
        },
    );
    assert_eq!(bad.err().unwrap().kind, ErrorKind::InvalidArgument);
    let s = host();
    assert_eq!(
        s.bind_queue(QueueDesc::default()).unwrap_err().kind,
        ErrorKind::Unsupported
    );
    assert_eq!(s.stream(12345).unwrap_err().kind, ErrorKind::BadHandle);
    let missing = Options {
        worker: Some(WorkerExe::new("/nonexistent/worker")),
        ..opts()
    };
    let e = Session::open(DeviceSpec::HOST, missing)
        .unwrap()
        .create_lp_stream(Level::Auto)
        .unwrap_err();
    assert_eq!((e.kind, e.errno), (ErrorKind::Device, Some(libc_enoent())));
    assert!(e.meaning.is_some());
    if !std::path::Path::new("/dev/kfd").exists() {
        let e = Session::open(DeviceSpec::Kfd, Options::default()).err().unwrap();
        assert_eq!((e.kind, e.errno), (ErrorKind::NoKfd, Some(libc_enoent())), "{e}");
    }
}

fn libc_enoent() -> i32 {
    preempt_api::Errno::ENOENT as i32
}

/// A device opened once for sessions in turn: each session is a full one on it (the host device
/// with the shared worker program), and only named devices that run delay commands are shared.
#[test]
fn a_shared_device_opens_sessions_in_turn_and_refuses_auto_and_kfd() {
    use preempt_api::{GracePeriod, MechanismChoice, Share, SharedDevice, gpu::KernelChoice};
    let share = |device| Share {
        device,
        worker: Some(host_device::testing::built_worker()),
        kernel: KernelChoice::default(),
        mechanism: MechanismChoice::Auto,
        grace: GracePeriod::Default,
    };
    let d = SharedDevice::open(share(DeviceSpec::HOST)).unwrap();
    assert_eq!((d.spec(), d.label().as_str()), (DeviceSpec::HOST, "host device"));
    assert!(d.gpu().is_none() && d.worker().is_some());
    for _ in 0..2 {
        let s = d
            .session(Options {
                host_workers: 1,
                ..Options::default()
            })
            .unwrap();
        assert_eq!(s.mechanism().name.as_deref(), Some("sigstop"));
        let lp = s.create_lp_stream(Level::Lv3).unwrap();
        lp.submit_delay(MS).unwrap();
        lp.synchronize().unwrap();
        s.close().unwrap();
    }
    for refused in [DeviceSpec::Auto, DeviceSpec::Kfd] {
        let e = SharedDevice::open(share(refused)).err().expect("refused");
        assert_eq!(e.kind, ErrorKind::InvalidArgument, "{e}");
        assert!(e.message.starts_with(&format!("{refused}: ")), "{e}");
    }
    match SharedDevice::open(share(DeviceSpec::Hip(0))) {
        Ok(_) => eprintln!("SKIPPED: a GPU opened here; the no-GPU refusal is for machines without one"),
        Err(e) => assert_eq!(e.kind, ErrorKind::NoDevice, "{e}"),
    }
}
