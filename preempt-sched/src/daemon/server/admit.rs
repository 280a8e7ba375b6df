//! Accepting connections: at most [`ACCEPTS_PER_TURN`] a turn, the listener paused after an
//! accept error, and each peer checked (`SO_PEERCRED`, the access rule, the connection limits)
//! before it gets a connection of its own.
use super::super::conn::{Conn, Peer};
use super::super::listen::Listening;
use super::{ACCEPTS_PER_TURN, RESERVED, Server, token};
use crate::proto::{Code, Notice, ProtoError, encode_notice};
use nix::sys::epoll::{EpollEvent, EpollFlags};
use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
use std::os::unix::net::UnixStream;
use std::time::Instant;

impl Server<'_> {
    pub(super) fn accept(&mut self, listening: &Listening) {
        // A few per turn: a connect flood waits in the kernel's listen backlog (where a full
        // backlog costs the daemon nothing) instead of making every turn long for the clients
        // already connected.
        for _ in 0..ACCEPTS_PER_TURN {
            let stream = match listening.listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // EMFILE and the like: stop listening for a moment instead of spinning on a
                    // listener that stays readable.
                    let _ = self.epoll.delete(&listening.listener);
                    if let Some(line) = self.gate.close(Instant::now(), &e) {
                        (self.log)(&line);
                    }
                    return;
                }
            };
            self.admit(stream);
        }
    }

    fn admit(&mut self, stream: UnixStream) {
        let creds = match getsockopt(&stream, PeerCredentials) {
            Ok(c) => c,
            Err(e) => {
                (self.log)(&format!("refused a connection: SO_PEERCRED failed: {e}"));
                return;
            }
        };
        let peer = Peer {
            pid: creds.pid(),
            uid: creds.uid(),
        };
        let of_uid = self.per_uid.get(&peer.uid).copied().unwrap_or(0);
        let owner = peer.uid == 0 || peer.uid == nix::unistd::Uid::effective().as_raw();
        let most = if owner {
            self.cfg.max_clients + RESERVED
        } else {
            self.cfg.max_clients
        };
        let refusal = if let Err(why) = self.cfg.access.check(creds.uid(), creds.gid()) {
            Some(ProtoError::new(Code::NotAllowed, why))
        } else if self.conns.len() >= most {
            Some(ProtoError::new(
                Code::Limit,
                format!("{} clients connected already, the most allowed", self.cfg.max_clients),
            ))
        } else if of_uid >= self.cfg.max_per_uid {
            Some(ProtoError::new(
                Code::Limit,
                format!(
                    "uid {} has {of_uid} connections already, the most allowed per uid",
                    peer.uid
                ),
            ))
        } else {
            None
        };
        if let Some(e) = refusal {
            if let Some(line) = self.gate.refused(peer.uid, Instant::now()) {
                (self.log)(&format!(
                    "refused pid {} uid {}: {}{line}",
                    peer.pid, peer.uid, e.message
                ));
            }
            refuse_and_close(stream, &e);
            return;
        }
        if stream.set_nonblocking(true).is_err() {
            return;
        }
        let id = self.next_id;
        if self
            .epoll
            .add(&stream, EpollEvent::new(EpollFlags::EPOLLIN, token(id)))
            .is_err()
        {
            return;
        }
        self.next_id += 1;
        let deadline = Instant::now() + self.cfg.hello_timeout;
        self.hello.insert((deadline, id));
        *self.per_uid.entry(peer.uid).or_insert(0) += 1;
        self.conns.insert(id, Conn::new(stream, peer, deadline));
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
