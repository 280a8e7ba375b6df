//! The kernel log lines logged while a device's stages ran: what amdgpu and amdkfd said about our
//! queues (a preemption timeout, a GPU reset, a page fault) is often the whole story of a
//! failure. Read from `/dev/kmsg`, opened and moved to its end before the first stage (so only
//! new records are read, without a timestamp guess), else from `journalctl -k` since the start;
//! where neither can be read, the stage says why (`kernel.dmesg_restrict`, no `/dev/kmsg` in a
//! container, no journal) and what to attach instead.
use crate::error::{Context, Error, failed};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

/// At most this many lines are kept (a log flooded by a broken driver stays bounded).
pub const MAX_LINES: usize = 20_000;

/// The kernel log from some moment on.
pub struct Reader {
    kmsg: Result<File, Error>,
    since: SystemTime,
}

/// What was read, and from where; or why nothing could be.
#[derive(Debug, Clone)]
pub struct Collected {
    /// `/dev/kmsg`, `journalctl -k`, or none.
    pub source: Option<String>,
    pub lines: Vec<String>,
    /// Lines dropped beyond [`MAX_LINES`] or overwritten in the ring buffer before we read them.
    pub lost: usize,
    /// Why each source could not be read (all of them when `source` is none).
    pub unreadable: Vec<String>,
}

impl Reader {
    /// Opens `/dev/kmsg` (non-blocking, at its end); a failure is kept for the report.
    pub fn start() -> Reader {
        Reader::start_at(Path::new("/dev/kmsg"), Path::new("/proc/sys/kernel/dmesg_restrict"))
    }

    fn start_at(kmsg: &Path, restrict: &Path) -> Reader {
        let opened = File::options()
            .read(true)
            .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
            .open(kmsg)
            .and_then(|mut f| f.seek(SeekFrom::End(0)).map(|_| f))
            .map_err(|e| failed!("{}: {e}{}", kmsg.display(), why_not(&e, restrict)));
        Reader {
            kmsg: opened,
            since: SystemTime::now(),
        }
    }

    /// The lines logged since [`Reader::start`]. `journal` runs `journalctl` (a child with a time
    /// bound) where `/dev/kmsg` could not be opened: given the arguments, it returns journalctl's
    /// output or why it failed.
    pub fn collect(self, journal: impl FnOnce(&[String]) -> Result<String, Error>) -> Collected {
        let mut c = Collected {
            source: None,
            lines: Vec::new(),
            lost: 0,
            unreadable: Vec::new(),
        };
        match self.kmsg {
            Ok(f) => {
                c.source = Some("/dev/kmsg".into());
                read_kmsg(f, &mut c);
                return c;
            }
            Err(why) => c.unreadable.push(why.to_string()),
        }
        let since = self
            .since
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_secs();
        let args: Vec<String> = ["-k", "--no-pager", "-q", "-o", "short-monotonic", "--since"]
            .into_iter()
            .map(String::from)
            .chain([format!("@{since}")])
            .collect();
        match journal(&args) {
            Ok(out) => {
                c.source = Some(format!("journalctl {}", args.join(" ")));
                for l in out.lines().filter(|l| !l.trim().is_empty()) {
                    keep(&mut c, l.to_string());
                }
            }
            Err(why) => c.unreadable.push(format!("journalctl -k: {why}")),
        }
        c
    }
}

/// Why `/dev/kmsg` did not open, in words a user can act on.
fn why_not(e: &std::io::Error, restrict: &Path) -> String {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => {
            let r = std::fs::read_to_string(restrict).unwrap_or_default();
            if r.trim() == "1" {
                " (kernel.dmesg_restrict = 1: reading the kernel log needs CAP_SYSLOG, i.e. root)".into()
            } else {
                " (no permission to read the kernel log here)".into()
            }
        }
        std::io::ErrorKind::NotFound => " (not there: a container without the kernel log)".into(),
        _ => String::new(),
    }
}

fn keep(c: &mut Collected, line: String) {
    if c.lines.len() < MAX_LINES {
        c.lines.push(line);
    } else {
        c.lost += 1;
    }
}

/// Reads every record now in `/dev/kmsg` after our position: one record per read; EAGAIN at the
/// end; EPIPE where records were overwritten before we got to them (counted, then reading goes on).
fn read_kmsg(mut f: File, c: &mut Collected) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if let Some(l) = kmsg_line(&String::from_utf8_lossy(&buf[..n])) {
                    keep(c, l);
                }
            }
            Err(e) if e.raw_os_error() == Some(nix::libc::EPIPE) => c.lost += 1,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break, // EAGAIN: nothing more
        }
    }
}

/// One `/dev/kmsg` record (`prio,seq,usec,flags;message` then `KEY=value` continuation lines) as
/// `dmesg` shows it: `[seconds.micros] message`.
pub fn kmsg_line(record: &str) -> Option<String> {
    let (head, rest) = record.split_once(';')?;
    let message = rest.lines().next().unwrap_or("");
    let usec: u64 = head.split(',').nth(2)?.parse().ok()?;
    Some(format!("[{:>5}.{:06}] {message}", usec / 1_000_000, usec % 1_000_000))
}

/// The lines a GPU preemption run must not cause: kernel splats anywhere, and amdgpu/amdkfd
/// reporting a failure, a timeout, a reset, a hang or a fault.
pub fn suspicious(lines: &[String]) -> Vec<&String> {
    const SPLATS: [&str; 6] = ["BUG:", "WARNING:", "Call Trace", "KASAN", "general protection", "Oops"];
    const GPU: [&str; 3] = ["amdgpu", "kfd", "drm"];
    const BAD: [&str; 8] = [
        "fail",
        "timeout",
        "timed out",
        "reset",
        "hang",
        "fault",
        "error",
        "preemption",
    ];
    lines
        .iter()
        .filter(|l| {
            let lower = l.to_ascii_lowercase();
            SPLATS.iter().any(|s| l.contains(s))
                || (GPU.iter().any(|g| lower.contains(g)) && BAD.iter().any(|b| lower.contains(b)))
        })
        .collect()
}

/// `journalctl args...` with a time bound, through the stage runner; its output, or why not.
pub fn journalctl(args: &[String], dir: &Path, bound: Duration) -> Result<String, Error> {
    let out = dir.join("journalctl.out");
    let err = dir.join("journalctl.err");
    let mut cmd = Command::new("journalctl");
    cmd.args(args);
    let files = File::create(&out).and_then(|o| File::create(&err).map(|e| (o, e)));
    let (o, e) = files.with_context(|| dir.display().to_string())?;
    cmd.stdout(o).stderr(e);
    let ended = super::runner::run(cmd, bound, &|| false, super::runner::Steps::STAGE).map_err(|e| failed!("{e}"))?;
    let text = std::fs::read_to_string(&out).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    let _ = (std::fs::remove_file(&out), std::fs::remove_file(&err));
    match ended.status {
        Some(s) if s.success() && !ended.over_bound => Ok(text),
        _ => Err(failed!(
            "{}{}",
            ended.describe(),
            stderr.lines().next().map_or(String::new(), |l| format!(": {l}"))
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kmsg_records_read_as_dmesg_lines() {
        assert_eq!(
            kmsg_line("4,1234,5123456789,-;amdgpu 0000:05:00.0: amdgpu: GPU reset begin!\n SUBSYSTEM=pci\n"),
            Some("[ 5123.456789] amdgpu 0000:05:00.0: amdgpu: GPU reset begin!".into())
        );
        assert_eq!(kmsg_line("no separator"), None);
        assert_eq!(kmsg_line("4,1,notanumber,-;x"), None);
    }

    #[test]
    fn gpu_trouble_and_splats_are_suspicious_and_routine_lines_are_not() {
        let lines: Vec<String> = [
            "[ 1.0] amdgpu: HIQ MQD's queue_doorbell_id0 is not 0, Queue preemption time out",
            "[ 2.0] amdgpu 0000:05:00.0: amdgpu: GPU reset begin!",
            "[ 3.0] WARNING: CPU: 3 PID: 77 at drivers/gpu/drm/amd/amdkfd/kfd_device_queue_manager.c:1900",
            "[ 4.0] amdgpu: Failed to evict process queues",
            "[ 5.0] amdgpu 0000:05:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:153 vmid:8)",
            "[ 6.0] amdgpu: kfd: process 1234 opened /dev/kfd",
            "[ 7.0] usb 1-1: new high-speed USB device number 2",
            "[ 8.0] EXT4-fs (sda1): mounted filesystem",
        ]
        .map(String::from)
        .to_vec();
        let s = suspicious(&lines);
        assert_eq!(s.len(), 5, "{s:?}");
        assert!(
            s.iter()
                .all(|l| !l.contains("opened") && !l.contains("usb") && !l.contains("EXT4"))
        );
    }

    #[test]
    fn an_unreadable_kmsg_says_why_and_falls_back_to_the_journal() {
        let dir = std::env::temp_dir().join(format!("preempt-lat-kmsg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let restrict = dir.join("dmesg_restrict");
        std::fs::write(&restrict, "1\n").unwrap();
        let r = Reader::start_at(&dir.join("no-kmsg"), &restrict);
        let c = r.collect(|args| {
            assert!(
                args.contains(&"-k".to_string()) && args.last().unwrap().starts_with('@'),
                "{args:?}"
            );
            Ok("line one\n\nline two\n".into())
        });
        assert_eq!(c.lines, ["line one", "line two"]);
        assert!(c.source.unwrap().starts_with("journalctl -k"));
        assert!(c.unreadable[0].contains("not there: a container"), "{:?}", c.unreadable);
        // Neither readable: both reasons, no source.
        let c = Reader::start_at(&dir.join("no-kmsg"), &restrict).collect(|_| Err(Error::msg("not found")));
        assert!(c.source.is_none() && c.unreadable.len() == 2, "{c:?}");
        // Permission denied under dmesg_restrict names it.
        let e = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert!(why_not(&e, &restrict).contains("dmesg_restrict = 1"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_regular_file_reads_as_a_log_from_its_end() {
        // /dev/kmsg itself may be unreadable here; a file opened the same way stands in: only
        // what is written after start() is read.
        let dir = std::env::temp_dir().join(format!("preempt-lat-kmsg-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("kmsg");
        std::fs::write(&f, "6,1,1000000,-;before\n").unwrap();
        let r = Reader::start_at(&f, &dir.join("none"));
        std::fs::OpenOptions::new()
            .append(true)
            .open(&f)
            .and_then(|mut w| std::io::Write::write_all(&mut w, b"6,2,2000000,-;after\n"))
            .unwrap();
        let c = r.collect(|_| panic!("the file opened: no journal"));
        assert_eq!(c.lines, ["[    2.000000] after"], "{c:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
