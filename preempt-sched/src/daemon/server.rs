//! The event loop (see the [module documentation](super) for why one thread and `poll(2)`).
use super::conn::{Conn, MAX_OUT, Peer, Turn};
use super::listen::Listening;
use super::plan::{ClientId, Out, Plan};
use super::{Config, DaemonError};
use crate::proto::{Code, Notice, ProtoError, Request, decode_request, encode_notice};
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
use std::collections::BTreeMap;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// Refusals one connection may collect before it is closed.
const MAX_REFUSALS: u32 = 64;

/// The longest sleep of the loop with nothing to wait for.
const IDLE: Duration = Duration::from_secs(1);

struct Server<'a> {
    cfg: &'a Config,
    plan: Plan,
    conns: BTreeMap<ClientId, Conn>,
    next_id: ClientId,
    /// Connections to close at the end of this turn, with why.
    closing: Vec<(ClientId, String)>,
    log: &'a mut dyn FnMut(&str),
}

/// Serves `listening` until SIGTERM or SIGINT (blocked in the calling thread and read from a
/// signalfd, so the loop ends between two events, never inside one). Each log line goes to
/// `log`. Call it from the process's only thread (the daemon has no other).
pub fn serve(listening: &Listening, cfg: &Config, log: &mut dyn FnMut(&str)) -> Result<(), DaemonError> {
    let mut mask = SigSet::empty();
    mask.add(Signal::SIGTERM);
    mask.add(Signal::SIGINT);
    mask.thread_block()
        .map_err(|e| DaemonError::io("blocking SIGTERM/SIGINT", e))?;
    let sfd = SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .map_err(|e| DaemonError::io("creating a signalfd", e))?;
    let mut s = Server {
        cfg,
        plan: Plan::new(cfg.ack_timeout, cfg.limits),
        conns: BTreeMap::new(),
        next_id: 1,
        closing: Vec::new(),
        log,
    };
    (s.log)(&format!(
        "listening on {} (pid {}, ack timeout {} ms)",
        listening.path().display(),
        std::process::id(),
        cfg.ack_timeout.as_millis()
    ));
    loop {
        let timeout = s
            .plan
            .next_deadline()
            .map_or(IDLE, |d| d.saturating_duration_since(Instant::now()).min(IDLE));
        // Rounded up: a deadline 0.3 ms away is not a busy loop of zero timeouts.
        let timeout = PollTimeout::try_from(timeout.as_millis() + 1).unwrap_or(PollTimeout::MAX);
        let ids: Vec<ClientId> = s.conns.keys().copied().collect();
        let revents = {
            let mut fds = vec![
                PollFd::new(listening.listener.as_fd(), PollFlags::POLLIN),
                PollFd::new(sfd.as_fd(), PollFlags::POLLIN),
            ];
            for c in s.conns.values() {
                let mut ev = PollFlags::POLLIN;
                if c.has_output() {
                    ev |= PollFlags::POLLOUT;
                }
                fds.push(PollFd::new(c.stream.as_fd(), ev));
            }
            match poll(&mut fds, timeout) {
                Ok(_) => {}
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(DaemonError::io("poll", e)),
            }
            fds.iter()
                .map(|f| f.revents().unwrap_or(PollFlags::empty()))
                .collect::<Vec<_>>()
        };
        if !revents[1].is_empty() {
            let sig = sfd.read_signal().ok().flatten().map_or(0, |i| i.ssi_signo);
            (s.log)(&format!(
                "signal {sig}: exiting; {} clients resume what they suspended",
                s.conns.len()
            ));
            return Ok(());
        }
        if revents[0].contains(PollFlags::POLLIN) {
            s.accept(listening);
        }
        for (id, ev) in ids.iter().zip(&revents[2..]) {
            if ev.is_empty() {
                continue;
            }
            s.serve_conn(*id, *ev);
        }
        let mut out = Vec::new();
        s.plan.tick(Instant::now(), &mut out);
        for c in s.plan.unresponsive() {
            s.closing
                .push((c, "unresponsive: too many orders not acknowledged".into()));
        }
        s.dispatch(out);
        s.finish_turn();
    }
}

impl Server<'_> {
    fn accept(&mut self, listening: &Listening) {
        loop {
            let stream = match listening.listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // EMFILE and the like: log and try again at the next turn.
                    (self.log)(&format!("accept: {e}"));
                    return;
                }
            };
            let creds = match getsockopt(&stream, PeerCredentials) {
                Ok(c) => c,
                Err(e) => {
                    (self.log)(&format!("refused a connection: SO_PEERCRED failed: {e}"));
                    continue;
                }
            };
            let peer = Peer {
                pid: creds.pid(),
                uid: creds.uid(),
            };
            let refusal = if let Err(why) = self.cfg.access.check(creds.uid(), creds.gid()) {
                Some(ProtoError::new(Code::NotAllowed, why))
            } else if self.conns.len() >= self.cfg.max_clients {
                Some(ProtoError::new(
                    Code::Limit,
                    format!("{} clients connected already, the most allowed", self.cfg.max_clients),
                ))
            } else {
                None
            };
            if let Some(e) = refusal {
                (self.log)(&format!("refused pid {} uid {}: {}", peer.pid, peer.uid, e.message));
                refuse_and_close(stream, &e);
                continue;
            }
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            let id = self.next_id;
            self.next_id += 1;
            self.conns.insert(id, Conn::new(stream, peer));
        }
    }

    fn serve_conn(&mut self, id: ClientId, ev: PollFlags) {
        let Some(conn) = self.conns.get_mut(&id) else { return };
        if ev.contains(PollFlags::POLLOUT)
            && let Err(e) = conn.flush()
        {
            self.closing.push((id, e));
            return;
        }
        if !ev.intersects(PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR) {
            return;
        }
        let turn = conn.read_turn();
        // Frames read before an end of stream are still served (a client may send and close).
        loop {
            let Some(conn) = self.conns.get_mut(&id) else { return };
            let payload = match conn.decoder.next_frame() {
                Ok(Some(p)) => p,
                Ok(None) => break,
                Err(e) => {
                    let e = ProtoError::new(Code::TooLarge, e.to_string());
                    self.refuse(id, None, e);
                    return;
                }
            };
            let mut out = Vec::new();
            match decode_request(&payload) {
                Ok(f) => {
                    if let Err(e) = self.request(id, f.seq, f.msg, &mut out) {
                        self.refuse(id, Some(f.seq), e);
                    }
                }
                Err((seq, e)) => self.refuse(id, seq, e),
            }
            self.dispatch(out);
        }
        if let Turn::Closed(why) = turn {
            self.closing.push((id, why));
        }
    }

    fn request(&mut self, id: ClientId, seq: u64, msg: Request, out: &mut Vec<Out>) -> Result<(), ProtoError> {
        if let Request::Hello { name } = &msg
            && !self.plan.knows(id)
        {
            self.plan.join(id, name);
            let peer = self.conns.get(&id).map(|c| c.peer);
            if let Some(p) = peer {
                out.push(Out::Log(format!(
                    "client {id} ({name}) connected: pid {} uid {}",
                    p.pid, p.uid
                )));
            }
            out.push(Out::Send(
                id,
                Notice::Welcome {
                    client: id,
                    pid: std::process::id(),
                },
            ));
            return Ok(());
        }
        self.plan.request(id, seq, msg, Instant::now(), out)
    }

    /// Sends a refusal and logs it; fatal ones (and one too many) close the connection.
    fn refuse(&mut self, id: ClientId, re: Option<u64>, e: ProtoError) {
        let Some(conn) = self.conns.get_mut(&id) else { return };
        conn.refusals += 1;
        (self.log)(&format!(
            "client {id} (pid {}): refused{}: {e}",
            conn.peer.pid,
            re.map_or(String::new(), |s| format!(" request {s}"))
        ));
        let fatal = e.fatal();
        let frame = encode_notice(Notice::Refused {
            re,
            code: e.code,
            message: e.message,
        });
        if !conn.queue(&frame) {
            self.closing.push((id, format!("more than {MAX_OUT} bytes unread")));
        } else if fatal {
            self.closing.push((id, "refused (fatal)".into()));
        } else if conn.refusals > MAX_REFUSALS {
            self.closing.push((id, format!("more than {MAX_REFUSALS} refusals")));
        }
    }

    fn dispatch(&mut self, out: Vec<Out>) {
        for o in out {
            match o {
                Out::Log(line) => (self.log)(&line),
                Out::Send(c, n) => {
                    let Some(conn) = self.conns.get_mut(&c) else { continue };
                    if !conn.queue(&encode_notice(n)) {
                        self.closing.push((
                            c,
                            format!("more than {MAX_OUT} bytes unread: the client stopped reading"),
                        ));
                    }
                }
            }
        }
    }

    /// Writes what can be written now, then closes the connections marked for it (which may
    /// send orders to others: repeated until nothing more is closed).
    fn finish_turn(&mut self) {
        loop {
            for (&id, conn) in &mut self.conns {
                if conn.has_output()
                    && let Err(e) = conn.flush()
                {
                    self.closing.push((id, e));
                }
            }
            if self.closing.is_empty() {
                return;
            }
            let mut out = Vec::new();
            for (id, why) in std::mem::take(&mut self.closing) {
                let Some(conn) = self.conns.remove(&id) else { continue };
                (self.log)(&format!("client {id} (pid {}) closed: {why}", conn.peer.pid));
                self.plan.drop_client(id, Instant::now(), &mut out);
            }
            self.dispatch(out);
        }
    }
}

/// Best effort: the refusal is one small frame into an empty socket buffer, so a non-blocking
/// write takes it; the connection closes either way.
fn refuse_and_close(stream: UnixStream, e: &ProtoError) {
    let mut stream = stream;
    let _ = stream.set_nonblocking(true);
    let frame = encode_notice(Notice::Refused {
        re: None,
        code: e.code,
        message: e.message.clone(),
    });
    let _ = std::io::Write::write_all(&mut stream, &frame);
}
