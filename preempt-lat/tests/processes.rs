//! `priority --processes` end to end on the host device: the HP and LP sides in separate
//! processes through the scheduler daemon (the `preempt-sched` binary beside preempt-lat:
//! `cargo build -p preempt-sched` first; `cargo test --workspace` builds it). Host figures; what
//! is checked is that every block suspended every LP process's stream (the run fails otherwise)
//! and what the outputs carry, not how fast (a benchmark).
mod common;

use std::process::Output;
use std::time::Duration;

fn pl(args: &[&str]) -> Output {
    common::output_within(args, Duration::from_secs(120))
}

#[test]
fn the_hop_is_measured_across_processes_and_reported_against_the_in_process_helper() {
    let daemon = std::path::Path::new(env!("CARGO_BIN_EXE_preempt-lat")).with_file_name("preempt-sched");
    assert!(
        daemon.is_file(),
        "{} is not built: run `cargo build -p preempt-sched`",
        daemon.display()
    );
    let dir = std::env::temp_dir().join(format!("preempt-lat-processes-{}", std::process::id()));
    let o = pl(&[
        "priority",
        "--device",
        "host",
        "--processes",
        "2",
        "--hop-samples",
        "50",
        "--out-dir",
        dir.to_str().unwrap(),
    ]);
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{out}\n{err}");
    assert!(out.starts_with("host figures"), "{out}");
    for side in ["in-process helper", "daemon", "hop cost"] {
        assert!(out.lines().any(|l| l.trim_start().starts_with(side)), "{side}: {out}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("priority-processes.json")).unwrap()).unwrap();
    assert_eq!(json["processes"], 2);
    let sides = json["sides"].as_array().unwrap();
    assert_eq!(sides.len(), 2);
    assert!(sides.iter().all(|s| s["hp_start_ns"]["count"] == 50), "{json}");
    let csv = std::fs::read_to_string(dir.join("priority-processes.csv")).unwrap();
    assert_eq!(csv.lines().count(), 3, "a header and one row per side: {csv}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn processes_is_refused_with_another_policy() {
    let o = pl(&[
        "priority",
        "--device",
        "host",
        "--policy",
        "up",
        "--shares",
        "50:50",
        "--processes",
        "2",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--processes is for --policy hpf") && err.lines().count() == 1,
        "{err}"
    );
}
