//! The interposer's own host CPU per intercepted launch on a stream with nothing to schedule:
//! the hooks' path (`interposer::submission`) around a call that does nothing, before any
//! preemptible stream exists, and the extra look-up once one does. A host figure of this machine.
//!
//!   cargo run --release -p hip-interpose --example hook_cost [-- ROUNDS CALLS]
use preempt_hip::config::Config;
use preempt_hip::device::{Created, Device};
use preempt_hip::interposer::{Interposer, submission};
use std::hint::black_box;
use std::time::Instant;

/// A device whose streams need no GPU (the figure is the interposer's bookkeeping alone).
struct Null;

impl Device for Null {
    fn describe(&self) -> String {
        "none".into()
    }
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
    fn sched_device(&self) -> Result<preempt_api::sched::proto::Device, String> {
        Ok(preempt_api::sched::proto::Device::host(0))
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
}
