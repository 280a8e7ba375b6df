//! What `preempt-lat priority` (and any scheduler that measures) relies on beyond the C and
//! Python surface, on the host device: records kept on request, Lv1 suspends that do not wait,
//! sessions without Lv3, and the HP stream's records and check. And the GPU layer's answer where
//! there is no GPU (the real HIP runtime installed by scripts/install-deps.sh).
use preempt_api::gpu::{GpuDevice, KernelChoice};
use preempt_api::{DeviceSpec, ErrorKind, Level, Options, Session};
use std::time::Duration;

const MS: u64 = 1_000_000;

fn opts() -> Options {
    Options {
        worker: Some(host_device::testing::built_worker()),
        host_workers: 2,
        ..Options::default()
    }
}

#[test]
fn kept_records_account_for_every_command_and_worker() {
    let s = Session::open(
        DeviceSpec::HOST,
        Options {
            keep_records: true,
            ..opts()
        },
    )
    .unwrap();
    let lp = s.create_lp_stream(Level::Lv3).unwrap();
    for _ in 0..12 {
        lp.submit_delay(MS).unwrap();
    }
    lp.suspend().unwrap();
    std::thread::sleep(Duration::from_millis(5));
    lp.resume().unwrap();
    lp.wait_idle_for(Duration::from_secs(30)).unwrap();
    let done = lp.take_completions();
    let ids: Vec<u64> = done.iter().map(|c| c.id).collect();
    assert_eq!(
        ids,
        (0..12).collect::<Vec<_>>(),
        "every completion once, in launch order"
    );
    assert!(
        done.iter()
            .all(|c| c.ok && c.stamps.launched_ns <= c.stamps.completed_ns)
    );
    assert!(lp.take_completions().is_empty(), "taken once");
    let v = lp.verify().unwrap();
    assert!(v.check.ok(), "{:?}", v.check);
    assert_eq!(v.records_per_command, 2, "one record per worker");
    assert_eq!(v.records.len(), 24);
    for r in &v.records {
        let w = r.worker.expect("host records carry the worker's timing");
        assert!(r.correct && w.worker < 2 && w.start_ns <= w.end_ns, "{r:?}");
    }
    let again = lp.verify().unwrap();
    assert!(again.records.is_empty(), "records are handed out once");
    assert!(
        again.check.ok(),
        "the check still counts what was taken before: {:?}",
        again.check
    );
    assert_eq!(lp.stats().unwrap().completed, 12);
    s.close().unwrap();
}

#[test]
fn without_keep_records_nothing_accumulates() {
    let s = Session::open(DeviceSpec::HOST, opts()).unwrap();
    let lp = s.create_lp_stream(Level::Lv1).unwrap();
    lp.submit_delay(MS).unwrap();
    lp.synchronize().unwrap();
    assert!(lp.take_completions().is_empty());
    assert!(lp.check().unwrap().ok());
    s.close().unwrap();
}

/// An application's stream (no keep_records) that never calls check: the workers' records are
/// folded into the check as it goes (every 1024 submissions and at each synchronize), so what a
/// late verify takes is only the last ones, not one per command ever run, and the check still
/// counts every command once.
#[test]
fn without_keep_records_a_long_stream_keeps_no_record_per_command() {
    let s = Session::open(
        DeviceSpec::HOST,
        Options {
            host_workers: 1,
            ..opts()
        },
    )
    .unwrap();
    let lp = s.create_lp_stream(Level::Lv1).unwrap();
    for _ in 0..5000 {
        lp.submit_delay(1_000).unwrap();
    }
    lp.synchronize().unwrap();
    let v = lp.verify().unwrap();
    assert!(
        v.records.len() < 1024,
        "{} records held back for a late verify",
        v.records.len()
    );
    assert!(v.check.ok() && v.check.exactly_once == 5000, "{:?}", v.check);
    s.close().unwrap();
}

#[test]
fn lv1_no_wait_returns_with_commands_still_running() {
    let s = Session::open(
        DeviceSpec::HOST,
        Options {
            lv1_no_wait: true,
            host_workers: 1,
            ..opts()
        },
    )
    .unwrap();
    let lp = s.create_lp_stream(Level::Lv1).unwrap();
    for _ in 0..2 {
        lp.submit_delay(300 * MS).unwrap();
    }
    while lp.stats().unwrap().launched == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let info = lp.suspend().unwrap();
    assert_eq!(info.mechanism, "lv1-stop");
    // A drain would have waited for the 300 ms commands in flight; a stop leaves them running.
    assert!(lp.stats().unwrap().in_flight > 0, "the launched command still runs");
    lp.resume().unwrap();
    lp.synchronize().unwrap();
    assert!(lp.check().unwrap().ok());
    s.close().unwrap();
}

#[test]
fn no_lv3_sessions_refuse_lv3_and_default_to_lv1() {
    let s = Session::open(DeviceSpec::HOST, Options { no_lv3: true, ..opts() }).unwrap();
    assert!(!s.has_lv3());
    assert_eq!(s.create_lp_stream(Level::Lv3).unwrap_err().kind, ErrorKind::Unavailable);
    assert_eq!(s.create_lp_stream(Level::Auto).unwrap().level(), Level::Lv1);
    s.close().unwrap();
}

#[test]
fn the_hp_stream_reports_its_records_and_checks_them() {
    let s = Session::open(DeviceSpec::HOST, opts()).unwrap();
    let hp = s.hp_stream().unwrap();
    for _ in 0..3 {
        hp.submit_delay(MS).unwrap();
    }
    let recs = hp.wait(Some(Duration::from_secs(10))).unwrap();
    assert_eq!(recs.iter().map(|r| r.id).collect::<Vec<_>>(), [0, 1, 2]);
    assert!(recs.iter().all(|r| r.correct && r.worker.is_some()));
    hp.submit_delay(MS).unwrap();
    let c = hp.check();
    assert!(!c.finished && !c.ok(), "one command not waited for yet: {c:?}");
    hp.synchronize().unwrap();
    let c = hp.check();
    assert!(c.ok() && c.exactly_once == 4, "{c:?}");
    s.close().unwrap();
}

#[test]
fn the_gpu_layer_without_a_gpu_says_no_device() {
    if hip_rt::Hip::load().is_err() && std::env::var("PREEMPT_REQUIRE_HIP").is_err() {
        eprintln!("SKIPPED the_gpu_layer_without_a_gpu_says_no_device: no HIP runtime here");
        return;
    }
    match GpuDevice::open(0, KernelChoice::default()) {
        Ok(g) => eprintln!("a GPU is here: {}", g.describe()),
        Err(e) => assert_eq!(e.kind, ErrorKind::NoDevice, "{e}"),
    }
    // The one preparation of a run starts with the same open: the same answer, before any
    // stream, calibration or mechanism.
    let p = preempt_api::gpu::Prepare {
        device: 0,
        kernel: KernelChoice::default(),
        t_ms: Some(0.5),
        hp_stream: true,
    };
    match preempt_api::gpu::prepare(&p) {
        Ok(p) => eprintln!("a GPU is here: {}", p.gpu.describe()),
        Err(e) => assert_eq!(e.kind, ErrorKind::NoDevice, "{e}"),
    }
}

/// Stream ids start at 1 in every session, so a session must check the stream object itself:
/// another session's streams are refused from its sets and its helper, and touched by neither
/// (otherwise B's helper could suspend A's stream, and a set could mix two sessions).
#[test]
fn a_session_takes_only_its_own_streams() {
    let a = Session::open(DeviceSpec::HOST, opts()).unwrap();
    let b = Session::open(DeviceSpec::HOST, opts()).unwrap();
    let la = a.create_lp_stream(Level::Lv3).unwrap();
    let lb = b.create_lp_stream(Level::Lv3).unwrap();
    assert_eq!(la.id(), lb.id(), "the same id in both sessions");
    let kind = |r: preempt_api::Result<()>| r.unwrap_err().kind;
    assert_eq!(
        kind(b.suspend_set(&[lb.clone(), la.clone()])),
        ErrorKind::InvalidArgument
    );
    assert!(
        !la.is_suspended() && !lb.is_suspended(),
        "a refused set suspends nothing"
    );
    assert_eq!(
        kind(b.resume_set(std::slice::from_ref(&la))),
        ErrorKind::InvalidArgument
    );
    assert_eq!(kind(b.suspend_set(&[])), ErrorKind::InvalidArgument, "an empty set");
    assert_eq!(kind(b.helper_register(&la, 0)), ErrorKind::InvalidArgument);
    b.helper_register(&lb, 0).unwrap();
    assert_eq!(kind(b.helper_unregister(&la)), ErrorKind::InvalidArgument);
    b.helper_enter(1).unwrap();
    assert!(lb.is_suspended(), "B's own stream is still registered");
    assert!(!la.is_suspended(), "A's stream is not B's helper's");
    b.helper_leave(1).unwrap();
    assert!(!lb.is_suspended());
    a.close().unwrap();
    b.close().unwrap();
}
