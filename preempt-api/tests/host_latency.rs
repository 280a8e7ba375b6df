//! The latency layer on the host device, driven by hand as a latency run drives it: the LP
//! queue behind a launcher of the test's own, a suspension at Lv3 (SIGSTOP) and Lv2 (hold)
//! around an HP probe, and `finish`'s records, HP starts and facts. On `hip:0` without a GPU,
//! the set-up fails with the HIP runtime's reason. Each test fails after `common::LIMIT`
//! instead of hanging the suite.
mod common;

use common::bounded;
use host_device::proc_state;
use lv1::{Config, XQueue};
use preempt_api::gpu::{GpuLatency, GpuLatencyRequest};
use preempt_api::latency::host::HostLatency;
use preempt_api::latency::{Abandon, HpStart, LatencyDevice, RawSample, Settled, Silent};
use preempt_api::{ErrorKind, GracePeriod, Level, Mechanism, MechanismChoice};
use std::sync::Arc;

const MS: u64 = 1_000_000;

/// `commands` LP commands of `t_ns` through a launcher, one preemption at `level` while they
/// run, then the drain: the sample and what `finish` says.
fn one_preemption(
    level: Level,
    workers: usize,
    t_ns: u64,
    commands: u64,
) -> (RawSample, preempt_api::latency::Finished) {
    let exe = host_device::testing::built_worker();
    let mut dev = HostLatency::open(&exe, workers, t_ns, level).expect("the host device opens");
    let xq = XQueue::new(dev.lp_queue(), Config::new(2, 1).unwrap()).unwrap();
    for _ in 0..commands {
        xq.submit(dev.command());
    }
    dev.wait_first_start(&|| xq.stats().launched).unwrap();
    let t_req = dev.now_ns();
    let guard = dev.suspend().unwrap();
    let t_s = dev.now_ns();
    if level == Level::Lv3 {
        // Every LP worker is stopped while the guard lives.
        for pid in dev.lp_queue().pids() {
            assert_eq!(proc_state(pid).ok(), Some('T'), "LP worker {pid} under SIGSTOP");
        }
    }
    dev.hp_launch(0).unwrap();
    let hp = dev.hp_wait(0).unwrap();
    let t_r = dev.now_ns();
    guard.resume().unwrap();
    xq.wait_idle().unwrap();
    let ran = xq.stats().submitted;
    drop(xq);
    let raw = RawSample {
        index: 0,
        t_req,
        suspend_ns: t_s - t_req,
        preempt_call_ns: None,
        resume_ns: 0,
        window: (t_s, t_r),
        hp,
    };
    let fin = dev.finish(&[raw], Settled { ran, abandoned: 0 }).unwrap();
    (raw, fin)
}

#[test]
fn lv3_stops_every_worker_and_every_command_runs_once_on_each() {
    bounded(|| {
        let (raw, fin) = one_preemption(Level::Lv3, 2, 5 * MS, 6);
        let HpStart::At(start) = raw.hp else {
            panic!("the host knows when its probe started: {:?}", raw.hp)
        };
        assert_eq!(fin.hp_start_ns, vec![start.saturating_sub(raw.t_req)]);
        // One record per worker per command, each correct.
        assert_eq!(fin.copies, 2);
        let mut ids: Vec<u64> = fin.records.iter().map(|r| r.0).collect();
        ids.sort_unstable();
        assert_eq!(ids, vec![0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]);
        assert!(fin.records.iter().all(|r| r.1), "{:?}", fin.records);
        assert_eq!(fin.facts.mechanism, Mechanism::Sigstop);
        assert!(fin.facts.gpu.is_none() && fin.lp_kernel.is_none() && fin.achieved_t.is_none());
        // The timeline's spans: every LP record and the probe.
        assert_eq!(fin.device_spans.len(), 12 + 1);
        assert!(fin.device_spans.iter().any(|s| s.track == "HP worker"));
    });
}

#[test]
fn lv2_holds_the_workers_and_says_so() {
    bounded(|| {
        let (_, fin) = one_preemption(Level::Lv2, 1, 2 * MS, 4);
        assert_eq!(fin.facts.mechanism, Mechanism::Lv2Hold);
        assert_eq!(fin.records.len(), 4);
        assert!(fin.records.iter().all(|r| r.1));
    });
}

#[test]
fn a_stop_kills_the_workers_it_cannot_wait_for() {
    bounded(|| {
        let exe = host_device::testing::built_worker();
        let dev = HostLatency::open(&exe, 1, 2_000 * MS, Level::Lv3).unwrap();
        let xq = XQueue::new(dev.lp_queue(), Config::new(2, 1).unwrap()).unwrap();
        xq.submit(dev.command());
        dev.wait_first_start(&|| xq.stats().launched).unwrap();
        let pids = dev.lp_queue().pids();
        // The abandoner works from another thread, as a stop's deadline does.
        let kill = dev.abandoner().expect("the host device can stop its commands");
        std::thread::spawn(kill).join().unwrap();
        assert_eq!(dev.abandon(), Abandon::Stopped);
        // A killed worker fails the wait on it at once; the 2 s command never completes.
        let t0 = std::time::Instant::now();
        let _ = xq.wait_idle();
        assert!(t0.elapsed().as_millis() < 1_500, "the wait ended with the workers");
        for pid in pids {
            let state = proc_state(pid).ok();
            assert!(
                matches!(state, None | Some('Z' | 'X')),
                "worker {pid} was killed: {state:?}"
            );
        }
    });
}

#[test]
fn hip_without_a_gpu_fails_the_set_up_with_the_runtime_s_reason() {
    bounded(|| {
        let request = GpuLatencyRequest {
            device: 0,
            level: Level::Lv3,
            t_ms: 0.5,
            lp_state: Default::default(),
            mechanism: MechanismChoice::Auto,
            grace: GracePeriod::SHORTEST,
            probes: 10,
            budget: 1_000,
        };
        match GpuLatency::open(&request, Arc::new(Silent)) {
            Ok(_) => eprintln!("SKIPPED: a GPU opened here; this test is for machines without one"),
            Err(e) => {
                eprintln!("hip:0: {e}");
                // No GPU (or no HIP): the set-up stops at the device, with the runtime's words.
                assert_eq!(e.kind, ErrorKind::NoDevice, "{e:?}");
                assert!(!e.message.is_empty() && !e.message.contains('\n'), "{e:?}");
            }
        }
        // Lv2 is refused on a GPU before anything opens.
        let e = GpuLatency::open(
            &GpuLatencyRequest {
                level: Level::Lv2,
                ..request
            },
            Arc::new(Silent),
        )
        .err()
        .expect("Lv2 on a GPU is refused");
        assert!(e.message.contains("Lv2 is unavailable on hip:0"), "{e}");
    });
}
