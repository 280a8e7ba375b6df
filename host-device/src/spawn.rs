//! Starting a worker process, and the channel that feeds it commands.
//!
//! - **One spawner thread.** A worker asks to be killed when its parent dies
//!   (`PR_SET_PDEATHSIG`, see `worker_main`), and Linux sends that signal when the parent
//!   *thread* exits, not the process. So every worker is forked by one thread that lives as long
//!   as the process: a queue may be created by any thread (a pool thread, a request handler) and
//!   outlive it, while its workers still die with the process (exit, crash, SIGKILL; an exec too,
//!   which ends every other thread). The thread blocks every signal: it takes none of the
//!   application's (which may rely on a thread of its own taking SIGINT/SIGTERM).
//! - **A process group of its own.** Terminal job control signals the foreground process group:
//!   Ctrl-Z then `fg` (SIGTSTP, then SIGCONT) continued workers that host Lv3 held stopped, and
//!   Ctrl-C killed them under an application that handles SIGINT and goes on. Out of the
//!   application's group a worker is stopped and continued by its queue only; Ctrl-C still ends
//!   it, through the application's death.
//! - **Commands through a socket.** The worker's stdin is one end of a Unix socket pair, written
//!   with `send(MSG_NOSIGNAL)`: a dead worker is EPIPE, never SIGPIPE, whose default action kills
//!   a C application (a library cannot ignore a signal for the whole process). Reports come back
//!   on a pipe: reading raises no signal.

use super::WorkerExe;
use super::process::WorkerProcess;
use super::proto::PARENT_ENV;
use nix::errno::Errno;
use nix::sys::signal::{SigSet, SigmaskHow};
use nix::sys::socket::{AddressFamily, MsgFlags, SockFlag, SockType, send, setsockopt, socketpair, sockopt};
use nix::unistd::{Pid, getpid};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc::{Sender, SyncSender, channel, sync_channel};
use std::sync::{Mutex, PoisonError};

/// Send buffer asked for a worker's socket (the kernel caps it at `net.core.wmem_max` and
/// doubles it). A Unix socket charges each queued command (one `send` of ~20 bytes) ~770 bytes
/// of buffer, so the default buffer (208 KiB) holds ~280 of them where a pipe held ~3400; a
/// launch blocks while a *stopped* worker has that many queued (lv1's threshold bounds an LP
/// stream's; the HP stream is never stopped).
const SEND_BUFFER: usize = 4 << 20;

/// A started worker: the process, where its commands go, where its reports come from.
pub(crate) struct Started {
    pub process: WorkerProcess,
    pub input: Input,
    pub output: ChildStdout,
}

/// Start `exe` as a worker of this process (see the module docs).
pub(crate) fn start(exe: &WorkerExe) -> io::Result<Started> {
    let (ours, theirs) = socketpair(AddressFamily::Unix, SockType::Stream, None, SockFlag::SOCK_CLOEXEC)?;
    // Best effort: a smaller buffer only makes launches to a stopped worker block sooner.
    let _ = setsockopt(&ours, sockopt::SndBuf, &SEND_BUFFER);
    let mut command = Command::new(&exe.program);
    command
        .args(&exe.args)
        .env(PARENT_ENV, getpid().as_raw().to_string())
        .process_group(0)
        .stdin(Stdio::from(theirs))
        .stdout(Stdio::piped());
    // The spawner drops `command` after the fork, before it answers, closing our copy of the
    // worker's end: the worker's exit then closes the socket, and a send says EPIPE.
    let mut child = on_spawner(command)?;
    let output = child.stdout.take().expect("stdout is piped");
    // Right away: from here on the worker is signalled and waited for through its pidfd only
    // (the process module says why). Should the kernel have no descriptor left for it, the
    // worker, spawned a moment ago, is ended by its pid (`Child`), as every worker was before.
    let process = match WorkerProcess::open(&child) {
        Ok(p) => p,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
    };
    Ok(Started {
        process,
        input: Input(ours),
        output,
    })
}

/// The queue's end of a worker's command socket.
pub(crate) struct Input(OwnedFd);

impl Input {
    /// Send all of `bytes`, blocking while the socket is full; a closed peer is `EPIPE`, with no
    /// signal.
    pub fn send_all(&self, mut bytes: &[u8]) -> io::Result<()> {
        while !bytes.is_empty() {
            match send(self.0.as_raw_fd(), bytes, MsgFlags::MSG_NOSIGNAL) {
                Ok(n) => bytes = &bytes[n..],
                Err(Errno::EINTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

/// A command to spawn, and where its child goes.
struct Request {
    command: Command,
    reply: SyncSender<io::Result<Child>>,
}

/// The spawner thread of this process (a forked child starts its own: threads do not survive
/// `fork`), by the pid that started it.
static SPAWNER: Mutex<Option<(Pid, Sender<Request>)>> = Mutex::new(None);

/// Spawn `command` on the spawner thread and return the child.
fn on_spawner(command: Command) -> io::Result<Child> {
    let gone = || io::Error::other("the host worker spawner thread is gone");
    let (reply, answer) = sync_channel(1);
    spawner()?.send(Request { command, reply }).map_err(|_| gone())?;
    answer.recv().map_err(|_| gone())?
}

/// The spawner thread's inbox, starting the thread on first use.
fn spawner() -> io::Result<Sender<Request>> {
    let mut s = SPAWNER.lock().unwrap_or_else(PoisonError::into_inner);
    let me = getpid();
    if let Some((pid, tx)) = &*s
        && *pid == me
    {
        return Ok(tx.clone());
    }
    let (tx, rx) = channel::<Request>();
    // A new thread starts with its creator's signal mask: block everything around its creation,
    // so that not even its first instruction can take a signal.
    let before = SigSet::all().thread_swap_mask(SigmaskHow::SIG_BLOCK)?;
    let started = std::thread::Builder::new()
        .name("preempt-spawner".into())
        .spawn(move || {
            // Ends only with the process: the inbox's sender lives in `SPAWNER`. A child's
            // signal mask is reset by `Command`, so workers do not inherit this thread's.
            for Request { mut command, reply } in rx {
                let child = command.spawn();
                // Before the reply: our copy of the worker's end of its socket closes with it.
                drop(command);
                let _ = reply.send(child);
            }
        });
    before.thread_set_mask()?;
    started?;
    // In a forked child the old inbox's thread does not exist: leave its sender untouched
    // (forget it) rather than run a channel's drop on state another thread had at the fork.
    if let Some(old) = s.replace((me, tx.clone())) {
        std::mem::forget(old);
    }
    Ok(tx)
}
