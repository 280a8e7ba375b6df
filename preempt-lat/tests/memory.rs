//! Memory that does not grow with a run's length (issue 20 item 13): `priority` kept every LP
//! completion, every worker record, every HP latency and a trace span for each of them until it
//! exited (~2.7 KB per LP command: 5 MB -> 333 MB over 120 s), so `--duration-s 3600` needed
//! gigabytes per mode. Measured from outside: the peak RSS of the same mode run for two durations.
mod common;

use common::{drain, preempt_lat, scratch, wait_or_kill};
use std::process::Stdio;
use std::time::Duration;

/// The peak RSS (`VmHWM`, bytes) seen while `priority` ran one Lv3 mode for `duration_s`, and the
/// LP commands it completed.
fn priority_peak(duration_s: &str, out_dir: &std::path::Path) -> (u64, u64) {
    let mut child = preempt_lat()
        .args([
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
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let m = &v["modes"][0];
    assert_eq!(m["correctness"]["ok"], true, "{}", m["correctness"]);
    (peak, m["lp_completed"].as_u64().expect("lp_completed"))
}

#[test]
fn priority_memory_does_not_grow_with_the_duration() {
    let dir = scratch("memory");
    let (short, short_lp) = priority_peak("1", &dir);
    let (long, long_lp) = priority_peak("6", &dir);
    let extra = long_lp.saturating_sub(short_lp);
    assert!(
        extra > 10_000,
        "the long run must run many more LP commands: {short_lp} -> {long_lp}"
    );
    // Keeping even the smallest record of each LP command (the launcher's completion: id and
    // three stamps) would grow the peak by at least this much.
    let per_command = std::mem::size_of::<preempt_api::LpCompletion>() as u64;
    let grew = long.saturating_sub(short);
    assert!(
        grew < extra * per_command,
        "peak RSS {short} -> {long} bytes (+{grew}) for {extra} more LP commands: it grows with the run's length"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
