//! What this process holds, read from /proc/self after each window: what grows without bound
//! over a long run (memory, descriptors, threads) is what a soak looks for.
use crate::error::{Context, Error, failed};
use serde::Serialize;

/// This process's resident memory, open descriptors and threads at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Held {
    /// `VmRSS` of /proc/self/status, in KiB.
    pub rss_kib: u64,
    /// Entries of /proc/self/fd (the directory's own descriptor not counted).
    pub fds: u64,
    /// `Threads` of /proc/self/status.
    pub threads: u64,
}

/// The figures now, or why /proc could not say.
pub fn held() -> Result<Held, Error> {
    let status = std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    let (rss_kib, threads) =
        parse_status(&status).ok_or_else(|| failed!("/proc/self/status: no VmRSS or Threads line"))?;
    let dir = std::fs::read_dir("/proc/self/fd").context("listing /proc/self/fd")?;
    // read_dir holds one descriptor of its own while it lists.
    let fds = (dir.count() as u64).saturating_sub(1);
    Ok(Held { rss_kib, fds, threads })
}

/// (`VmRSS` in KiB, `Threads`) from the text of /proc/PID/status.
fn parse_status(status: &str) -> Option<(u64, u64)> {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
    };
    Some((field("VmRSS:")?, field("Threads:")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_give_rss_and_threads() {
        let s = "Name:\tpreempt-lat\nVmHWM:\t   9000 kB\nVmRSS:\t   8123 kB\nThreads:\t7\n";
        assert_eq!(parse_status(s), Some((8123, 7)));
        assert_eq!(parse_status("Name:\tx\nThreads:\t1\n"), None);
    }

    #[test]
    fn this_process_holds_memory_descriptors_and_a_thread() {
        let h = held().unwrap();
        assert!(h.rss_kib > 0 && h.threads >= 1, "{h:?}");
        // Other tests of this binary open and close files meanwhile: 100 of ours stand out.
        let files: Vec<_> = (0..100)
            .map(|_| std::fs::File::open("/proc/self/status").unwrap())
            .collect();
        let with = held().unwrap().fds;
        drop(files);
        assert!(with >= h.fds + 50, "100 open files counted: {} -> {with}", h.fds);
    }
}
