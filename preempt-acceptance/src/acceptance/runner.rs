//! One stage in a child process of `preempt-lat` itself, bounded in time. A child is the robust
//! way to bound a stage: whatever it holds (a suspended GPU queue, stopped host workers, a
//! debug session) is its own, and every `preempt-lat` subcommand already resumes what it
//! suspended when SIGTERM arrives (preempt-lat's `measure::control`: the first SIGTERM stops it after the
//! current sample and its guards resume; a second resumes everything in lv3's registry and
//! exits at once). So a stage over its bound (or the whole run interrupted) is stopped in three
//! steps, each only if the one before did not end it: SIGTERM, a second SIGTERM, and SIGKILL to
//! its process group (the kernel then releases its KFD queues with the process; host workers die
//! with their parent by `PR_SET_PDEATHSIG`).
//!
//! The child runs in a process group of its own, so a Ctrl-C at the terminal reaches only
//! `acceptance`, which then stops the child itself, once, in the same steps: a signal from the
//! terminal and one from us can never add up to the child's "second signal, exit now" before it
//! has resumed and written what it measured. The child learns our pid
//! ([`PARENT_ENV`]) and asks for SIGTERM should we die first ([`adopt_parent`]).
use crate::error::{Context, Error, failed};
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::{Pid, getpid, getppid};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Set for a stage's child: the pid of the `acceptance` process that started it.
pub const PARENT_ENV: &str = "PREEMPT_ACCEPTANCE_PARENT";

/// How long each step of a stop waits before the next.
#[derive(Debug, Clone, Copy)]
pub struct Steps {
    /// After the first SIGTERM: the current sample ends, the guards resume, the results are
    /// written (a GPU sample's HP probe alone may take up to 10 s before the run gives up).
    pub after_term: Duration,
    /// After the second SIGTERM: lv3's registry resumed, then `_exit`.
    pub after_second_term: Duration,
    /// After SIGKILL, before we give up waiting (a process stuck in the kernel).
    pub after_kill: Duration,
}

impl Steps {
    pub const STAGE: Steps = Steps {
        after_term: Duration::from_secs(30),
        after_second_term: Duration::from_secs(5),
        after_kill: Duration::from_secs(30),
    };
}

/// How a child ended.
#[derive(Debug, Clone)]
pub struct Ended {
    /// `None`: still there after SIGKILL and [`Steps::after_kill`] (stuck in the kernel).
    pub status: Option<ExitStatus>,
    pub seconds: f64,
    /// It ran over its bound and was stopped.
    pub over_bound: bool,
    /// It was stopped because the run was interrupted (Ctrl-C/SIGTERM to `acceptance`).
    pub interrupted: bool,
    /// What was sent to stop it, in order, with when.
    pub stops: Vec<String>,
}

impl Ended {
    /// One line: its exit status and what stopped it.
    pub fn describe(&self) -> String {
        let status = match self.status {
            Some(s) => s.to_string(),
            None => "did not exit after SIGKILL (stuck in the kernel?)".into(),
        };
        if self.stops.is_empty() {
            status
        } else {
            format!("{status} after {}", self.stops.join(", "))
        }
    }
}

/// Runs `cmd` (program, arguments and output files set by the caller; stdin is /dev/null) in a
/// process group of its own, and stops it as the module docs say when it runs past `bound` or
/// when `stop()` turns true.
pub fn run(mut cmd: Command, bound: Duration, stop: &dyn Fn() -> bool, steps: Steps) -> std::io::Result<Ended> {
    cmd.stdin(Stdio::null())
        .process_group(0)
        .env(PARENT_ENV, getpid().as_raw().to_string());
    let t0 = Instant::now();
    let mut child = cmd.spawn()?;
    let pid = Pid::from_raw(i32::try_from(child.id()).map_err(std::io::Error::other)?);
    let mut ended = Ended {
        status: None,
        seconds: 0.0,
        over_bound: false,
        interrupted: false,
        stops: Vec::new(),
    };
    // 0: running; 1: SIGTERM sent; 2: second SIGTERM sent; 3: SIGKILL sent.
    let mut step = 0;
    let mut step_at = Duration::ZERO;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break Some(s);
        }
        let now = t0.elapsed();
        let next = match step {
            0 if now >= bound => {
                ended.over_bound = true;
                true
            }
            0 if stop() => {
                ended.interrupted = true;
                true
            }
            0 => false,
            1 => now - step_at >= steps.after_term,
            2 => now - step_at >= steps.after_second_term,
            _ if now - step_at >= steps.after_kill => break None,
            _ => false,
        };
        if next {
            let at = format!("{:.1} s", now.as_secs_f64());
            // The signal is sent to the child itself (its host workers and bystander would die of
            // a SIGTERM, losing the run's records); SIGKILL to its whole group.
            let sent = match step {
                0 => kill(pid, Signal::SIGTERM).map(|()| format!("SIGTERM at {at}")),
                1 => kill(pid, Signal::SIGTERM).map(|()| format!("a second SIGTERM at {at}")),
                _ => killpg(pid, Signal::SIGKILL).map(|()| format!("SIGKILL to its process group at {at}")),
            };
            ended
                .stops
                .push(sent.unwrap_or_else(|e| format!("signal at {at} failed: {e}")));
            step += 1;
            step_at = now;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    ended.status = status;
    ended.seconds = t0.elapsed().as_secs_f64();
    Ok(ended)
}

/// In a stage's child (called by `main` first thing): when [`PARENT_ENV`] names our parent, ask
/// the kernel for SIGTERM when it dies (a graceful stop, as a Ctrl-C: what is suspended is
/// resumed), and stop at once if it is gone already. Elsewhere nothing happens.
pub fn adopt_parent() -> Result<(), Error> {
    let Ok(parent) = std::env::var(PARENT_ENV) else {
        return Ok(());
    };
    nix::sys::prctl::set_pdeathsig(Signal::SIGTERM).context("PR_SET_PDEATHSIG")?;
    if parent != getppid().as_raw().to_string() {
        return Err(failed!(
            "the acceptance run that started this stage (pid {parent}) is gone"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Short steps, so that the tests stay short.
    const FAST: Steps = Steps {
        after_term: Duration::from_millis(600),
        after_second_term: Duration::from_millis(300),
        after_kill: Duration::from_secs(5),
    };

    fn sh(script: &str) -> Command {
        let mut c = Command::new("/bin/sh");
        c.args(["-c", script]);
        c
    }

    #[test]
    fn a_child_that_ends_in_time_is_left_alone() {
        let e = run(sh("exit 7"), Duration::from_secs(20), &|| false, FAST).unwrap();
        assert_eq!(e.status.and_then(|s| s.code()), Some(7));
        assert!(!e.over_bound && !e.interrupted && e.stops.is_empty(), "{e:?}");
        assert_eq!(e.describe(), "exit status: 7");
    }

    #[test]
    fn a_child_over_its_bound_gets_sigterm_and_may_finish_its_work() {
        // It takes SIGTERM as preempt-lat does: finish up, then exit 0.
        let e = run(
            sh("trap 'exit 0' TERM; while :; do sleep 0.05; done"),
            Duration::from_millis(300),
            &|| false,
            FAST,
        )
        .unwrap();
        assert!(e.over_bound, "{e:?}");
        assert_eq!(e.status.and_then(|s| s.code()), Some(0), "{e:?}");
        assert_eq!(e.stops.len(), 1, "{e:?}");
        assert!(
            e.describe().starts_with("exit status: 0 after SIGTERM at 0."),
            "{}",
            e.describe()
        );
        assert!(e.seconds < 10.0, "{e:?}");
    }

    #[test]
    fn a_child_that_ignores_sigterm_is_killed_with_its_group() {
        // The child and a grandchild of its group both ignore SIGTERM.
        let marker = std::env::temp_dir().join(format!("preempt-lat-runner-{}", std::process::id()));
        let script = format!(
            "trap '' TERM; (trap '' TERM; sleep 30) & echo $! > {}; while :; do sleep 0.05; done",
            marker.display()
        );
        let e = run(sh(&script), Duration::from_millis(300), &|| false, FAST).unwrap();
        assert!(e.over_bound, "{e:?}");
        assert_eq!(e.stops.len(), 3, "SIGTERM, SIGTERM, SIGKILL: {e:?}");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(e.status.and_then(|s| s.signal()), Some(9), "{e:?}");
        // The grandchild went with the group.
        let pid: i32 = std::fs::read_to_string(&marker).unwrap().trim().parse().unwrap();
        let _ = std::fs::remove_file(&marker);
        let gone = (0..200).any(|_| {
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // Gone, or a zombie waiting for init to reap it.
            let done = state.is_empty() || state.split(") ").nth(1).is_some_and(|s| s.starts_with('Z'));
            if !done {
                std::thread::sleep(Duration::from_millis(10));
            }
            done
        });
        assert!(gone, "the grandchild {pid} outlived the group's SIGKILL");
    }

    #[test]
    fn an_interrupted_run_stops_its_child() {
        let t0 = Instant::now();
        let stop = move || t0.elapsed() > Duration::from_millis(200);
        let e = run(
            sh("trap 'exit 0' TERM; while :; do sleep 0.05; done"),
            Duration::from_secs(60),
            &stop,
            FAST,
        )
        .unwrap();
        assert!(e.interrupted && !e.over_bound, "{e:?}");
        assert_eq!(e.status.and_then(|s| s.code()), Some(0));
    }

    #[test]
    fn the_child_learns_its_parent() {
        let e = run(
            sh(&format!("test \"${PARENT_ENV}\" = {}", std::process::id())),
            Duration::from_secs(20),
            &|| false,
            FAST,
        )
        .unwrap();
        assert_eq!(
            e.status.and_then(|s| s.code()),
            Some(0),
            "{PARENT_ENV} names the parent"
        );
        // Outside a stage's child, nothing to adopt.
        if std::env::var(PARENT_ENV).is_err() {
            adopt_parent().expect("nothing to adopt");
        }
    }
}
