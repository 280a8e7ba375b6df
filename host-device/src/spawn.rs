//! Starting a worker process, and the channel that feeds it commands.
//!
//! **Commands through a socket.** The worker's stdin is one end of a Unix socket pair, written
//! with `send(MSG_NOSIGNAL)`: a dead worker is EPIPE, never SIGPIPE, whose default action kills
//! a C application (a library cannot ignore a signal for the whole process). Reports come back
//! on a pipe: reading raises no signal.

use super::WorkerExe;
use super::proto::PARENT_ENV;
use nix::errno::Errno;
use nix::sys::socket::{AddressFamily, MsgFlags, SockFlag, SockType, send, setsockopt, socketpair, sockopt};
use nix::unistd::getpid;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::process::{Child, ChildStdout, Command, Stdio};

/// Send buffer asked for a worker's socket (the kernel caps it at `net.core.wmem_max` and
/// doubles it). A Unix socket charges each queued command (one `send` of ~20 bytes) ~770 bytes
/// of buffer, so the default buffer (208 KiB) holds ~280 of them where a pipe held ~3400; a
/// launch blocks while a *stopped* worker has that many queued (lv1's threshold bounds an LP
/// stream's; the HP stream is never stopped).
const SEND_BUFFER: usize = 4 << 20;

/// A started worker: the process, where its commands go, where its reports come from.
pub(crate) struct Started {
    pub child: Child,
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
        .stdin(Stdio::from(theirs))
        .stdout(Stdio::piped());
    let mut child = command.spawn()?;
    // Close our copy of the worker's end: the worker's exit then closes the socket, and a send
    // says EPIPE.
    drop(command);
    let output = child.stdout.take().expect("stdout is piped");
    Ok(Started {
        child,
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
