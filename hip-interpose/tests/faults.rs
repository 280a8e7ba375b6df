//! Faults, each bounded in time: the interposed program killed while its low-priority stream is
//! suspended must leave no process stopped.
mod support;
use std::time::{Duration, Instant};

/// The processes (of this uid) whose environment holds `marker`, with their state letter.
fn marked(marker: &str) -> Vec<(i32, char)> {
    let needle = marker.as_bytes();
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        if env.split(|b| *b == 0).any(|kv| kv == needle)
            && let Ok(stat) = std::fs::read_to_string(e.path().join("stat"))
            && let Some(state) = stat.rsplit(')').next().and_then(|r| r.split_whitespace().next())
        {
            out.push((pid, state.chars().next().unwrap_or('?')));
        }
    }
    out
}

#[test]
fn a_program_killed_mid_suspension_leaves_no_worker_stopped() {
    let marker = format!("PREEMPT_FAULT_TEST={}-{}", std::process::id(), line!());
    let (k, v) = marker.split_once('=').unwrap();
    // HP requests back to back: the LP stream is suspended nearly all the time.
    let mut c = support::command(
        true,
        &["--lp", "500", "--lp-ms", "20", "--hp", "100000", "--gap-ms", "0"],
    );
    c.env(k, v);
    let mut child = c.spawn().unwrap();
    let t0 = Instant::now();
    let mut saw_stopped = false;
    while t0.elapsed() < Duration::from_secs(30) && !saw_stopped {
        std::thread::sleep(Duration::from_millis(50));
        saw_stopped = marked(&marker)
            .iter()
            .any(|(pid, s)| *s == 'T' && i64::from(*pid) != i64::from(child.id()));
    }
    assert!(
        saw_stopped,
        "a worker of the LP stream was seen stopped: {:?}",
        marked(&marker)
    );
    child.kill().unwrap();
    child.wait().unwrap();
    // The workers were stopped in process groups orphaned by the kill: the kernel sends them
    // SIGHUP and SIGCONT, and they end.
    let t1 = Instant::now();
    let mut left = marked(&marker);
    while !left.is_empty() && t1.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
        left = marked(&marker);
    }
    assert!(left.is_empty(), "processes left behind (pid, state): {left:?}");
}
