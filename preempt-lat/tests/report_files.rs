//! `report` on what is not a result file: a device, a FIFO, a huge file, a directory holding such
//! entries; every run bounded by a time limit.
mod common;

use common::{assert_refused, run_bounded, scratch};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(20);

/// Read naively, `report /dev/zero` reads forever (~350 MB/s), a FIFO blocks, and any size is read
/// whole. Each is refused before it is read: one line, exit status 2.
#[test]
fn report_refuses_what_it_cannot_read_whole() {
    let dir = scratch("report-hostile");
    let fifo = dir.join("results.json");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    // Sparse: no disk is used, but its size is far beyond any result preempt-lat writes.
    let huge = dir.join("huge.json");
    std::fs::File::create(&huge).unwrap().set_len(1 << 40).unwrap();
    let out = dir.join("out");
    let out = out.to_str().unwrap();
    assert_refused(
        &["report", "--out-dir", out, "/dev/zero"],
        "/dev/zero: not a regular file",
        LIMIT,
    );
    assert_refused(
        &["report", "--out-dir", out, fifo.to_str().unwrap()],
        "not a regular file",
        LIMIT,
    );
    assert_refused(
        &["report", "--out-dir", out, huge.to_str().unwrap()],
        "larger than",
        LIMIT,
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A directory given to `report` stands for its `*.json` files; entries there that are not
/// regular files (a FIFO, a link to /dev/zero) are listed as skipped, never opened.
#[test]
fn report_reads_a_directorys_json_files_and_skips_the_rest() {
    let dir = scratch("report-dir");
    let res = dir.join("results");
    std::fs::create_dir_all(&res).unwrap();
    let run = res.join("run.json");
    let r = run_bounded(
        &[
            "--device",
            "host",
            "--samples",
            "3",
            "--warmup",
            "0",
            "--quiet",
            "--format",
            "json",
            "--out",
            run.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    assert_eq!(r.status.and_then(|s| s.code()), Some(0), "{}", r.stderr);
    let made = std::process::Command::new("mkfifo")
        .arg(res.join("fifo.json"))
        .status()
        .expect("mkfifo");
    assert!(made.success());
    std::os::unix::fs::symlink("/dev/zero", res.join("zero.json")).unwrap();
    std::fs::write(res.join("notes.txt"), "not a result").unwrap();
    let out = dir.join("out");
    let r = run_bounded(
        &["report", "--out-dir", out.to_str().unwrap(), res.to_str().unwrap()],
        LIMIT,
    );
    assert_eq!(r.status.and_then(|s| s.code()), Some(0), "{}", r.stderr);
    assert!(r.stdout.contains("run.json"), "{}", r.stdout);
    for name in ["fifo.json", "zero.json"] {
        assert!(
            r.stdout
                .lines()
                .any(|l| l.starts_with("skipped") && l.contains(name) && l.contains("not a regular file")),
            "{name}: {}",
            r.stdout
        );
    }
    assert!(!r.stdout.contains("notes.txt"), "only *.json files: {}", r.stdout);
    let _ = std::fs::remove_dir_all(&dir);
}
