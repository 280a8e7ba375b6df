//! One client connection of the daemon: a non-blocking socket, the frames read so far, and the
//! bytes still to write, both bounded.
use crate::proto::Decoder;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;

/// Bytes waiting to be written to one client at most; a client that lets more pile up (it stops
/// reading) is dropped rather than buffered without end.
pub(super) const MAX_OUT: usize = 256 * 1024;

/// Bytes read from one connection per turn of the loop, so that one busy client cannot starve
/// the others (a turn acts on at most 32 frames of it: a well-behaved client's are tens of
/// bytes); a connection whose decoder still holds this much unread is not read at all (its
/// socket buffer fills and its writes block: the flood waits, not the daemon).
const READ_PER_TURN: usize = 16 * 1024;

/// The kernel's record of the peer (`SO_PEERCRED`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Peer {
    pub pid: i32,
    pub uid: u32,
}

pub(super) struct Conn {
    pub stream: UnixStream,
    pub peer: Peer,
    pub decoder: Decoder,
    out: Vec<u8>,
    /// Refusals sent so far; past a bound the connection ends (a client that only sends
    /// garbage must not fill the log for ever).
    pub refusals: u32,
    /// Marked for closing: nothing more it sent is acted on.
    pub closing: bool,
    /// Until hello: when the connection is closed if it has not said it.
    pub hello_deadline: Option<std::time::Instant>,
    /// Whether the loop asked epoll for writability (bytes left after a write).
    pub wants_out: bool,
    /// The peer's end of stream (or a read error), seen; the connection closes once this
    /// turn's share of what it sent before is served.
    pub eof: Option<String>,
}

/// What a read turn found.
pub(super) enum Turn {
    /// Bytes were read (or none were ready).
    Open,
    /// The peer closed its end (or the connection failed).
    Closed(String),
}

impl Conn {
    pub fn new(stream: UnixStream, peer: Peer, hello_deadline: std::time::Instant) -> Self {
        Conn {
            stream,
            peer,
            decoder: Decoder::new(),
            out: Vec::new(),
            refusals: 0,
            closing: false,
            hello_deadline: Some(hello_deadline),
            wants_out: false,
            eof: None,
        }
    }

    pub fn has_output(&self) -> bool {
        !self.out.is_empty()
    }

    /// Queues `frame`; `false` if that would pass [`MAX_OUT`].
    #[must_use]
    pub fn queue(&mut self, frame: &[u8]) -> bool {
        if self.out.len() + frame.len() > MAX_OUT {
            return false;
        }
        self.out.extend_from_slice(frame);
        true
    }

    /// Writes what the socket takes now; `Err` if the connection failed.
    pub fn flush(&mut self) -> Result<(), String> {
        while !self.out.is_empty() {
            match self.stream.write(&self.out) {
                Ok(0) => return Err("the socket takes no more bytes".into()),
                Ok(n) => {
                    self.out.drain(..n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("write: {e}")),
            }
        }
        Ok(())
    }

    /// Reads what is there (at most [`READ_PER_TURN`], nothing while the decoder holds that
    /// much) into the decoder.
    pub fn read_turn(&mut self) -> Turn {
        let mut buf = [0u8; 8192];
        let mut total = self.decoder.pending();
        while total < READ_PER_TURN {
            match self.stream.read(&mut buf) {
                Ok(0) => {
                    let pending = self.decoder.pending();
                    return Turn::Closed(if pending > 0 {
                        format!("end of stream inside a frame ({pending} bytes of a truncated frame)")
                    } else {
                        "end of stream".into()
                    });
                }
                Ok(n) => {
                    self.decoder.push(&buf[..n]);
                    total += n;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Turn::Closed(format!("read: {e}")),
            }
        }
        Turn::Open
    }
}
