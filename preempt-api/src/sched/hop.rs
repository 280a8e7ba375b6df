//! What the daemon's hop costs on HP start: the time from "an HP block starts" to "every LP
//! stream is suspended", with the LP streams in the same process (the in-process helper) and in
//! other processes (the HP process's `enter` -> daemon -> each LP process's suspend and ack ->
//! daemon -> `entered`). The parts that `preempt-sched/examples/hop.rs` (host device) and
//! `preempt-lat priority --processes` (host and GPU) share: a daemon of their own (the
//! `preempt-sched` binary, started as a program: nothing here links the daemon), and the timed
//! blocks.
use super::ClientOptions;
use crate::Session;
use std::hash::{BuildHasher, Hasher};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The longest a daemon may take to answer once started.
const START: Duration = Duration::from_secs(10);

/// The client options of a measurement's sessions: the hop is measured, however long it is (a
/// reply later than the default bound would make `enter` run unscheduled, and the run fail).
pub fn measuring_client() -> ClientOptions {
    ClientOptions {
        reply_timeout: Duration::from_secs(10),
        ..ClientOptions::default()
    }
}

/// A new directory under the temp dir, mode 0700, with an unpredictable name: made with
/// `mkdir`, which fails on anything already at the path (a directory, file or symlink another
/// user planted), so the directory is this process's own. `prefix` starts its name.
pub fn private_dir(prefix: &str) -> std::io::Result<PathBuf> {
    let mut last = None;
    for _ in 0..16 {
        // Each RandomState has fresh keys (from the OS's random source, then counted up): its
        // hash of anything is a word no other user can predict.
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        let dir = std::env::temp_dir().join(format!("{prefix}-{:016x}", h.finish()));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free name")))
}

/// A daemon on a socket of its own (in a fresh private directory under the temp dir), killed
/// and its directory removed when dropped.
pub struct Daemon {
    child: Child,
    dir: PathBuf,
    socket: PathBuf,
}

impl Daemon {
    /// Starts `program` (the `preempt-sched` binary) and waits, at most 10 s, until it answers.
    /// A measurement's daemon waits for acks and keeps blocks as long as it takes (a slow LP
    /// process is measured, not left behind by the daemon's default 40 ms ack timeout).
    pub fn start(program: &Path) -> Result<Daemon, String> {
        Self::start_with(program, &["--ack-timeout-ms", "10000", "--block-silence-ms", "60000"])
    }

    /// [`Daemon::start`] with more arguments for the daemon.
    pub fn start_with(program: &Path, extra: &[&str]) -> Result<Daemon, String> {
        let dir =
            private_dir("preempt-sched-hop").map_err(|e| format!("a private directory under the temp dir: {e}"))?;
        let socket = dir.join("s.sock");
        let child = Command::new(program)
            .arg("--socket")
            .arg(&socket)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting the daemon {}: {e}", program.display()))?;
        let mut d = Daemon { child, dir, socket };
        let end = Instant::now() + START;
        while std::os::unix::net::UnixStream::connect(&d.socket).is_err() {
            if Instant::now() >= end || d.child.try_wait().ok().flatten().is_some() {
                return Err(format!(
                    "the daemon {} did not start within {START:?}",
                    program.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(d)
    }

    /// Its socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `samples` blocks of priority 1 on `session`, each timed from its start until `enter`
/// returned (every lower stream suspended), then left. A session scheduled by a daemon must see
/// `expect` suspends carried out in each (the LP processes' streams); the in-process helper's
/// `enter` suspends its own registered streams, all or none. In ns.
pub fn time_enters(session: &Session, samples: usize, expect: u32) -> Result<Vec<u64>, String> {
    let mut out = Vec::with_capacity(samples);
    for _ in 0..samples {
        let t0 = Instant::now();
        match session.scheduler() {
            Some(c) => {
                let e = c.enter(1).map_err(|e| e.to_string())?;
                out.push(ns(t0));
                if (e.scheduled, e.suspended) != (true, expect) {
                    let _ = c.leave(1);
                    return Err(format!("a block suspended {e:?}, expected {expect} suspends"));
                }
                c.leave(1).map_err(|e| e.to_string())?;
            }
            None => {
                session.helper_enter(1).map_err(|e| e.to_string())?;
                out.push(ns(t0));
                session.helper_leave(1).map_err(|e| e.to_string())?;
            }
        }
    }
    Ok(out)
}

fn ns(t0: Instant) -> u64 {
    u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn private_dirs_are_new_0700_and_unpredictable() {
        let a = private_dir("preempt-sched-test").unwrap();
        let b = private_dir("preempt-sched-test").unwrap();
        assert_ne!(a, b);
        for d in [&a, &b] {
            let m = std::fs::symlink_metadata(d).unwrap();
            assert!(m.is_dir());
            assert_eq!(m.mode() & 0o777, 0o700);
            assert_eq!(m.uid(), nix::unistd::Uid::effective().as_raw());
            let name = d.file_name().unwrap().to_str().unwrap();
            assert!(
                !name.contains(&std::process::id().to_string()),
                "{name}: not from the pid"
            );
            std::fs::remove_dir(d).unwrap();
        }
    }
}
