//! The interposer's own host CPU per intercepted launch on a stream with nothing to schedule:
//! the hooks' path (`interposer::submission`) around a call that does nothing, before any
//! preemptible stream exists, and the extra look-up once one does. A host figure of this machine.
//! With a HIP runtime preloaded (the stand-in, as scripts/bench-interposer.sh runs it), also a
//! launch on an Lv1 stream as a program sees it: the gate, one event of the interposer's
//! recorded behind the launch and the watcher thread that follows it, as CPU of the whole
//! process and context switches per launch (the runtime's own event calls are the stand-in's
//! here, not clr's).
//!
//!   cargo run --release -p hip-interpose --example hook_cost [-- ROUNDS CALLS]
//!   LD_PRELOAD=target/release/libhip_standin.so target/release/examples/hook_cost
use lv1::cost::Usage;
use preempt_hip::config::Config;
use preempt_hip::device::{Created, Device, Streams};
use preempt_hip::interposer::{Interposer, submission};
use std::hint::black_box;
use std::time::Instant;

/// A device whose streams need no GPU (the figure is the interposer's bookkeeping alone).
struct Null;

impl Streams for Null {
    fn create(&self, _: u32, _: i32) -> Result<Created, String> {
        Ok(Created {
            key: 0x1000,
            blocking: false,
        })
    }
    fn destroy(&self, _: usize) -> Result<(), String> {
        Ok(())
    }
    fn suspend(&self, _: usize) -> Result<(), String> {
        Ok(())
    }
    fn resume(&self, _: usize) -> Result<(), String> {
        Ok(())
    }
}

impl Device for Null {
    fn describe(&self) -> String {
        "none".into()
    }
    fn sched_device(&self) -> Result<preempt_api::sched::proto::Device, String> {
        Ok(preempt_api::sched::proto::Device::host(0))
    }
    fn lv3_ready(&self) -> Result<(), String> {
        Ok(())
    }
}

fn ns_per_call(calls: u32, mut f: impl FnMut(usize)) -> f64 {
    let t0 = Instant::now();
    for i in 0..calls {
        f(black_box(i as usize & 1));
    }
    t0.elapsed().as_nanos() as f64 / f64::from(calls)
}

fn summary(v: &mut [f64]) -> String {
    v.sort_by(f64::total_cmp);
    format!(
        "median {:.1} ns (min {:.1}, max {:.1})",
        v[v.len() / 2],
        v[0],
        v[v.len() - 1]
    )
}

fn main() {
    let args: Vec<u32> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (rounds, calls) = (
        args.first().copied().unwrap_or(11),
        args.get(1).copied().unwrap_or(2_000_000),
    );
    let mut bare = Vec::new();
    let mut passthrough = Vec::new();
    let mut lookup = Vec::new();
    for _ in 0..rounds {
        bare.push(ns_per_call(calls, |k| {
            black_box(k);
        }));
        // No preemptible stream yet: the hooks' whole path.
        passthrough.push(ns_per_call(calls, |k| {
            black_box(submission(k, || black_box(0)));
        }));
    }
    // From here a preemptible stream exists (the process's hooks take the slow path).
    let ip = Interposer::new(Config::from_lookup(|_| None).expect("defaults"), Box::new(Null));
    ip.register_plain(0x2000, 1, -1); // a high-priority stream
    let lp = ip.create_own(1, 1).expect("a low stream").expect("created");
    for _ in 0..rounds {
        // The rule's look-up for a launch on the low stream (nothing to mark).
        lookup.push(ns_per_call(calls, |_| {
            black_box(ip.before_submit(black_box(lp)).is_none());
        }));
    }
    // The default threshold (an event per 4 launches), and a threshold so large that events
    // are rare: the gate's own cost without the runtime's event calls.
    let lv1 = [8, 1024].map(|t| (t, lv1_launches(rounds, calls / 20, t)));
    println!("hook cost (host figure, {rounds} rounds x {calls} calls, this machine's CPU):");
    println!("  empty loop:                                   {}", summary(&mut bare));
    println!(
        "  hook path, no preemptible stream:             {}",
        summary(&mut passthrough)
    );
    println!(
        "  extra look-up, a launch on a low stream:      {}",
        summary(&mut lookup)
    );
    for (threshold, r) in lv1 {
        match r {
            Ok((mut cpu, mut switches)) => {
                println!(
                    "  Lv1 launch, threshold {threshold:>4}, CPU of the process: {}",
                    summary(&mut cpu)
                );
                switches.sort_by(f64::total_cmp);
                println!(
                    "  Lv1 launch, threshold {threshold:>4}, switches per launch: median {:.4} (min {:.4}, max {:.4})",
                    switches[switches.len() / 2],
                    switches[0],
                    switches[switches.len() - 1]
                );
            }
            Err(why) => println!("  Lv1 launch: not measured ({why})"),
        }
    }
}

/// Launches on an Lv1 stream that do nothing themselves: per round, the process's CPU per
/// launch (every thread: the caller's path and the watcher's polling) and its context switches
/// per launch. Needs a HIP runtime for the interposer's events.
fn lv1_launches(rounds: u32, calls: u32, threshold: u32) -> Result<(Vec<f64>, Vec<f64>), String> {
    let cfg = Config::from_lookup(|k| match k {
        "PREEMPT_LEVEL" => Some("1".into()),
        "PREEMPT_LV1_THRESHOLD" => Some(threshold.to_string()),
        "PREEMPT_SCHEDULER" => Some("none".into()),
        _ => None,
    })
    .expect("valid settings");
    // The watcher reports to this interposer for the rest of the process.
    let ip: &'static Interposer = Box::leak(Box::new(Interposer::new(cfg, Box::new(Null))));
    ip.register_plain(0x2000, 1, -1);
    let lp = match ip.create_own(1, 1) {
        Some(Ok(k)) => k,
        Some(Err(e)) => return Err(format!("no HIP runtime's stream: {e}; preload the stand-in")),
        None => return Err("the stream was not taken over".into()),
    };
    let (mut cpu, mut switches) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let before = Usage::now().map_err(|e| e.to_string())?;
        for _ in 0..calls {
            black_box(ip.submit(lp, || black_box(0)));
        }
        let used = Usage::now().map_err(|e| e.to_string())?.since(&before);
        cpu.push(used.cpu_ns as f64 / f64::from(calls));
        switches.push((used.voluntary_switches + used.involuntary_switches) as f64 / f64::from(calls));
    }
    Ok((cpu, switches))
}
