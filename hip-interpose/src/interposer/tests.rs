//! The level a process's preemptible streams are suspended at.
use super::*;
use crate::device::Streams;

/// A device that cannot suspend at Lv3: its own streams must never be asked for.
struct NoLv3;

impl Streams for NoLv3 {
    fn create(&self, _: u32, _: i32) -> Result<Created, String> {
        panic!("an Lv3 stream was made on a device without Lv3")
    }
    fn destroy(&self, _: usize) -> Result<(), String> {
        unreachable!()
    }
    fn suspend(&self, _: usize) -> Result<(), String> {
        unreachable!()
    }
    fn resume(&self, _: usize) -> Result<(), String> {
        unreachable!()
    }
}

impl Device for NoLv3 {
    fn describe(&self) -> String {
        "no Lv3".into()
    }
    fn sched_device(&self) -> Result<preempt_api::sched::proto::Device, String> {
        Err("none".into())
    }
    fn lv3_ready(&self) -> Result<(), String> {
        Err("no mechanism".into())
    }
}

fn interposer(level: &str) -> Interposer {
    let cfg = Config::from_lookup(|k| match k {
        "PREEMPT_LEVEL" => Some(level.into()),
        "PREEMPT_SCHEDULER" => Some("none".into()),
        _ => None,
    })
    .expect("valid settings");
    Interposer::new(cfg, Box::new(NoLv3))
}

#[test]
fn without_lv3_auto_holds_streams_at_lv1_and_lv3_only_takes_none_over() {
    let auto = interposer("auto");
    auto.new_streams();
    assert!(auto.lv1().is_some(), "auto falls back to Lv1");
    let lv3 = interposer("3");
    lv3.new_streams();
    assert!(lv3.lv1().is_none(), "Lv3 only: the device's route, which then fails");
    let lv1 = interposer("1");
    lv1.new_streams();
    assert_eq!(lv1.lv1().map(|l| l.threshold), Some(8));
}

#[test]
fn an_api_priority_keeps_levels_beyond_hips_three_and_hips_own_calls_stay_within_them() {
    let ip = interposer("auto");
    ip.register_plain(0x10, 1, -7);
    assert_eq!(
        lock(&ip.sched).priority(0x10),
        Some(-1),
        "HIP's own calls: clamped as clr does"
    );
    ip.set_priority(0x10, -3).unwrap();
    assert_eq!(lock(&ip.sched).priority(0x10), Some(-3), "XSched's 3");
    ip.set_priority(0x10, -999).unwrap();
    assert_eq!(lock(&ip.sched).priority(0x10), Some(-255));
}
