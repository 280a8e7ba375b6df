//! Lv2 through the API on the host device: a suspend lets the command each worker runs finish
//! and starts no new one; what it held back runs after resume, once. Each test runs on a thread
//! of its own and fails after `common::LIMIT` instead of hanging the suite.
mod common;

use common::bounded;
use host_device::proc_state;
use preempt_api::{DeviceSpec, ErrorKind, Level, Options, Session};
use std::time::{Duration, Instant};

const MS: u64 = 1_000_000;

fn opts() -> Options {
    Options {
        worker: Some(host_device::testing::built_worker()),
        host_workers: 1,
        ..Options::default()
    }
}

fn host(o: Options) -> Session {
    Session::open(DeviceSpec::HOST, o).expect("the host device opens")
}

#[test]
fn lv2_lets_the_running_command_finish_and_holds_back_the_next_until_resume() {
    bounded(|| {
        // Records kept for verify (an application's stream folds them into its check).
        let s = host(Options {
            keep_records: true,
            ..opts()
        });
        let lp = s.create_lp_stream(Level::Lv2).unwrap();
        assert_eq!(lp.level(), Level::Lv2);
        assert!(lp.describe().contains("lv2 via lv2-hold"), "{}", lp.describe());
        // Long enough that the first command still runs when the suspend is asked, even on a
        // loaded machine.
        let t = 200 * MS;
        for _ in 0..3 {
            lp.submit_delay(t).unwrap();
        }
        // The first command is running (every worker reports each record only when it ends):
        // seen from the workers' own CPU time (a command spins on it), not from a sleep, which
        // a loaded machine may outlast before the worker even starts.
        let pids = lp.host_pids();
        let cpu_ticks = || -> u64 {
            pids.iter()
                .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/stat")).ok())
                .map(|st| {
                    let rest = &st[st.rfind(')').map_or(0, |i| i + 2)..];
                    let f: Vec<&str> = rest.split_whitespace().collect();
                    f.get(11).and_then(|u| u.parse::<u64>().ok()).unwrap_or(0)
                        + f.get(12).and_then(|u| u.parse::<u64>().ok()).unwrap_or(0)
                })
                .sum()
        };
        let idle = cpu_ticks();
        let deadline = Instant::now() + Duration::from_secs(10);
        while cpu_ticks() < idle + 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let asked = lv1::clock::now_ns();
        let info = lp.suspend().unwrap();
        assert_eq!((info.level, info.mechanism.as_str()), (Level::Lv2, "lv2-hold"));
        let first = lp.verify().unwrap().records;
        assert_eq!(
            first.len(),
            1,
            "the running command finished before suspend returned: {first:?}"
        );
        let span = first[0].worker.unwrap();
        assert!(first[0].correct && span.end_ns > asked, "{first:?} (asked at {asked})");
        // Held workers wait for input, neither stopped nor running (each answered just before it
        // blocks reading: give it the moment to get there).
        let pids = lp.host_pids();
        let sleeping = || pids.iter().all(|&p| proc_state(p).is_ok_and(|st| st == 'S'));
        let deadline = Instant::now() + Duration::from_secs(5);
        while !sleeping() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(sleeping(), "held workers wait for input: neither stopped nor running");
        // Longer than a command: the next one must not start while suspended.
        std::thread::sleep(Duration::from_millis(250));
        assert!(
            lp.verify().unwrap().records.is_empty(),
            "a command ran while suspended at Lv2"
        );
        assert_eq!(lp.suspend().unwrap_err().kind, ErrorKind::AlreadySuspended);
        let resumed = lv1::clock::now_ns();
        lp.resume().unwrap();
        lp.synchronize().unwrap();
        let rest = lp.verify().unwrap();
        assert_eq!(rest.records.len(), 2, "the two held commands: {:?}", rest.records);
        assert!(
            rest.records.iter().all(|r| r.worker.unwrap().start_ns >= resumed),
            "the held commands ran after the resume: {:?}",
            rest.records
        );
        assert!(rest.check.ok(), "{:?}", rest.check);
        assert_eq!(rest.check.exactly_once, 3, "each command once: {:?}", rest.check);
        s.close().unwrap();
    });
}

#[test]
fn lv2_cycles_by_hand_and_by_the_helper_keep_every_command_exactly_once() {
    bounded(|| {
        let s = host(Options {
            host_workers: 2,
            ..opts()
        });
        let lp = s.create_lp_stream(Level::Lv2).unwrap();
        s.helper_register(&lp, 0).unwrap();
        let n = 60;
        for i in 0..n {
            lp.submit_delay(300_000).unwrap();
            if i % 2 == 0 {
                lp.suspend().unwrap();
                lp.resume().unwrap();
            } else {
                s.helper_enter(1).unwrap();
                assert!(lp.is_suspended());
                s.helper_leave(1).unwrap();
            }
        }
        lp.synchronize().unwrap();
        let c = lp.check().unwrap();
        assert!(c.ok() && c.exactly_once == n, "{c:?}");
    });
}

#[test]
fn lv2_needs_no_lv3_and_close_releases_a_held_stream() {
    bounded(|| {
        // Lv2 on the host device is its own mechanism: a session without Lv3 still has it.
        let s = host(Options { no_lv3: true, ..opts() });
        assert!(!s.has_lv3());
        assert_eq!(s.resolve_level(Level::Lv2).unwrap(), Level::Lv2);
        assert_eq!(
            s.resolve_level(Level::Auto).unwrap(),
            Level::Lv1,
            "auto never picks Lv2"
        );
        let lp = s.create_lp_stream(Level::Lv2).unwrap();
        lp.submit_delay(5 * MS).unwrap();
        lp.suspend().unwrap();
        let t0 = Instant::now();
        s.close().unwrap();
        assert!(t0.elapsed() < Duration::from_secs(10), "close waited out a held stream");
        assert!(!lp.is_suspended());
        assert_eq!(lp.suspend().unwrap_err().kind, ErrorKind::Closed);
    });
}
