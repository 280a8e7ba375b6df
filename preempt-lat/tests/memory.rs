//! Memory that does not grow with a run's length: a `priority` that kept every LP completion, every
//! worker record, every HP latency and a trace span for each of them until it exited would take
//! ~2.7 KB per LP command (5 MB -> 333 MB over 120 s), so `--duration-s 3600` would need gigabytes
//! per mode. Measured from outside: the peak RSS of the same mode run for two durations.
mod common;

use common::{drain, preempt_lat, scratch, wait_or_kill};
use std::process::Stdio;
use std::time::Duration;

/// The peak RSS (`VmHWM`, bytes) seen while preempt-lat ran with `args` (which end with
/// `--duration-s`, given here, and print JSON on stdout), and that JSON.
fn peak_of(args: &[&str], duration_s: &str, out_dir: &std::path::Path) -> (u64, serde_json::Value) {
    let mut child = preempt_lat()
        .args(args)
        .args([
            duration_s,
            "--format",
            "json",
            "--quiet",
            "--out-dir",
            out_dir.to_str().unwrap(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn preempt-lat");
    let pid = child.id();
    let out = drain(child.stdout.take().expect("stdout"));
    let err = drain(child.stderr.take().expect("stderr"));
    let sampler = std::thread::spawn(move || {
        let mut peak = 0u64;
        // The status file loses its Vm lines once the process is a zombie: keep the last peak.
        while let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
            let kib = s
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
            match kib {
                Some(k) => peak = peak.max(k * 1024),
                None => break,
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        peak
    });
    let st = wait_or_kill(&mut child, Duration::from_secs(120));
    let peak = sampler.join().unwrap();
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    assert_eq!(st.and_then(|s| s.code()), Some(0), "{err}");
    (
        peak,
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}")),
    )
}

/// Asserts that the peak RSS of a run of 6 s is not above that of a run of 1 s by as much as one
/// completion record (id and three stamps) per extra LP command would make it: memory does not
/// grow with the run's length. `commands` reads the LP commands a run's JSON says it ran.
fn assert_bounded(name: &str, args: &[&str], commands: impl Fn(&serde_json::Value) -> u64) {
    let dir = scratch(name);
    let (short, a) = peak_of(args, "1", &dir);
    let (long, b) = peak_of(args, "6", &dir);
    let extra = commands(&b).saturating_sub(commands(&a));
    assert!(
        extra > 10_000,
        "the long run must run many more LP commands: {} -> {}",
        commands(&a),
        commands(&b)
    );
    let per_command = std::mem::size_of::<preempt_api::LpCompletion>() as u64;
    let grew = long.saturating_sub(short);
    assert!(
        grew < extra * per_command,
        "peak RSS {short} -> {long} bytes (+{grew}) for {extra} more LP commands: it grows with the run's length"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `priority`'s Lv3 mode (HP requests against a saturating LP stream).
#[test]
fn priority_memory_does_not_grow_with_the_duration() {
    let args = [
        "priority",
        "--device",
        "host",
        "--modes",
        "lv3",
        "--t-ms",
        "0.01",
        "--hp-rate",
        "20",
        "--hp-t-ms",
        "1",
        "--duration-s",
    ];
    assert_bounded("memory-hpf", &args, |v| {
        let m = &v["modes"][0];
        assert_eq!(m["correctness"]["ok"], true, "{}", m["correctness"]);
        m["lp_completed"].as_u64().expect("lp_completed")
    });
}

/// `priority --policy up`, the class experiment: two saturating classes (their workers' records
/// stayed in the streams until the end).
#[test]
fn the_class_experiments_memory_does_not_grow_with_the_duration() {
    let args = [
        "priority",
        "--device",
        "host",
        "--policy",
        "up",
        "--shares",
        "75:25",
        "--t-ms",
        "0.02",
        "--duration-s",
    ];
    assert_bounded("memory-up", &args, |v| {
        let classes = v["classes"].as_array().expect("classes");
        classes
            .iter()
            .map(|c| {
                assert_eq!(c["check"]["ok"], true, "{}", c["check"]);
                c["check"]["submitted"].as_u64().expect("submitted")
            })
            .sum()
    });
}
