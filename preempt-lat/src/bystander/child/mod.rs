//! The parent's handle on a bystander worker process: spawn it with piped stdin/stdout/stderr,
//! wait for its `ready` line, and at the end close its stdin (its signal to stop) and collect its
//! lines. Whatever happens in between, the process does not outlive the handle: [`Drop`] kills
//! and reaps it if it is still there, and a worker whose parent dies sees its stdin close.
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::analysis::Span;
use super::protocol::Line;
use crate::error::{Context, Error, failed};

/// Lines of the worker's stderr kept for an error message.
const STDERR_TAIL: usize = 8;

/// A running worker.
pub struct Worker {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Result<Line, Error>>,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

/// What a worker reported once it was ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ready {
    pub device: String,
    pub kernel_ns: u64,
    pub pid: u32,
}

/// Everything a finished worker wrote after `ready`.
#[derive(Debug, Clone)]
pub struct Record {
    pub kernels: Vec<Span>,
    /// From its `done` line; `None` if it wrote none (it died, or was killed).
    pub stopped_ns: Option<u64>,
    /// How it ended, for an error message (`exit status: 0`, `killed after ...`).
    pub ended: String,
    pub problems: Vec<String>,
}

impl Worker {
    /// Starts `program args...`.
    pub fn spawn(program: &Path, args: &[String]) -> Result<Worker, Error> {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting the bystander process {}", program.display()))?;
        let (tx, lines) = channel();
        let out = child
            .stdout
            .take()
            .ok_or_else(|| failed!("the bystander's stdout was not piped"))?;
        let err = child
            .stderr
            .take()
            .ok_or_else(|| failed!("the bystander's stderr was not piped"))?;
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let tail = Arc::clone(&stderr);
        // Detached readers: each ends at its pipe's end of file.
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines() {
                let Ok(l) = l else { break };
                if tx.send(Line::parse(&l)).is_err() {
                    break;
                }
            }
        });
        std::thread::spawn(move || keep_tail(err, &tail));
        Ok(Worker {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits up to `timeout` for the `ready` line.
    pub fn wait_ready(&mut self, timeout: Duration) -> Result<Ready, Error> {
        match self.lines.recv_timeout(timeout) {
            Ok(Ok(Line::Ready { device, kernel_ns, pid })) => Ok(Ready { device, kernel_ns, pid }),
            Ok(Ok(other)) => Err(failed!("the bystander's first line was not `ready`: {other:?}")),
            Ok(Err(e)) => Err(e),
            Err(RecvTimeoutError::Timeout) => Err(failed!("the bystander was not ready within {timeout:?}")),
            Err(RecvTimeoutError::Disconnected) => {
                let status = self.wait_for(Duration::from_secs(5));
                Err(failed!(
                    "the bystander process ended before it was ready ({}){}",
                    describe(status),
                    self.stderr_tail()
                ))
            }
        }
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Closes its stdin (the signal to stop), waits up to `timeout` for it to exit (then kills
    /// it), and returns what it wrote after `ready`.
    pub fn finish(&mut self, timeout: Duration) -> Record {
        drop(self.stdin.take());
        let status = self.wait_for(timeout);
        let ended = match status {
            Some(s) => describe(Some(s)),
            None => {
                self.kill();
                format!("did not exit within {timeout:?} of its stdin closing: killed")
            }
        };
        let mut rec = Record {
            kernels: Vec::new(),
            stopped_ns: None,
            ended,
            problems: Vec::new(),
        };
        // Its stdout ends with it (nothing else holds the pipe); wait for the reader that long.
        let deadline = Instant::now() + Duration::from_secs(5);
        while let Ok(l) = self
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            match l {
                Ok(Line::Kernel { start_ns, end_ns }) => rec.kernels.push(Span {
                    from_ns: start_ns,
                    to_ns: end_ns,
                }),
                Ok(Line::Done { stopped_ns, .. }) => rec.stopped_ns = Some(stopped_ns),
                Ok(Line::Ready { .. }) => rec.problems.push("a second `ready` line".into()),
                Err(e) => rec.problems.push(e.to_string()),
            }
        }
        if rec.stopped_ns.is_none() {
            let tail = self.stderr_tail();
            rec.ended.push_str(&tail);
        }
        rec
    }

    /// The last lines of its stderr, as `: a | b`, or nothing.
    pub fn stderr_tail(&self) -> String {
        let t = self
            .stderr
            .lock()
            .map(|t| t.iter().cloned().collect::<Vec<_>>().join(" | "));
        match t {
            Ok(s) if !s.is_empty() => format!(": {s}"),
            _ => String::new(),
        }
    }

    fn wait_for(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let t0 = Instant::now();
        loop {
            match self.child.try_wait() {
                Ok(Some(s)) => return Some(s),
                Ok(None) if t0.elapsed() < timeout => std::thread::sleep(Duration::from_millis(5)),
                _ => return None,
            }
        }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.kill();
        }
    }
}

fn describe(s: Option<ExitStatus>) -> String {
    s.map_or_else(|| "still running".to_string(), |s| s.to_string())
}

fn keep_tail(r: impl Read, tail: &Mutex<VecDeque<String>>) {
    for l in BufReader::new(r).lines() {
        let Ok(l) = l else { break };
        if let Ok(mut t) = tail.lock() {
            if t.len() == STDERR_TAIL {
                t.pop_front();
            }
            t.push_back(l);
        }
    }
}

#[cfg(test)]
mod tests;
