//! The wire protocol between the daemon and its clients (docs/scheduler-daemon.md#protocol).
//!
//! A message is one frame ([`frame`]: a 4-byte big-endian length, at most [`MAX_FRAME`] bytes
//! of UTF-8 JSON). A client sends [`ClientFrame`]s (`{"v":1,"seq":N,"msg":{"type":...}}`), the
//! daemon [`DaemonFrame`]s (`{"v":1,"msg":{"type":...}}`). Every field is known
//! (`deny_unknown_fields`), every text bounded ([`MAX_NAME`], [`MAX_TEXT`]); [`decode_request`]
//! is the one door through which a client's bytes become a [`Request`].
//!
//! Stream ids are the client's own (its `LpStream` ids, or the ids of whatever else it registers): the daemon keys them by connection, so a
//! client cannot even name another client's stream.
//!
//! Streams and blocks are on a [`Device`] (a GPU's KFD gpu id, or a host device's index): a block
//! suspends only the streams on its own device, so that an HP block on one GPU of an 8-GPU node
//! leaves the LP work of the seven others running. How many devices one client may name is
//! bounded by the daemon ([`MAX_DEVICES_PER_CLIENT`]).
//!
//! A crate of its own so that the daemon (`preempt-sched`) links the protocol and nothing of the
//! device stack; preempt-api's client re-exports it as `preempt_api::sched::proto`.
#![forbid(unsafe_code)]
use serde::{Deserialize, Serialize};
use std::fmt;

pub mod frame;

pub use frame::{Decoder, FrameError, MAX_FRAME};

/// The socket's file name inside its directory.
pub const SOCKET_NAME: &str = "preempt-sched.sock";

/// The system-wide socket directory (systemd's `RuntimeDirectory=preempt-sched`).
pub const SYSTEM_DIR: &str = "/run/preempt-sched";

/// Where the daemon listens by default, and so where a client that is told nothing else looks
/// for it: `$XDG_RUNTIME_DIR/preempt-sched.sock` (a user's own daemon), else
/// `/run/preempt-sched/preempt-sched.sock` (the node's, under systemd). Here, beside the
/// protocol, so that the daemon and every client compute it the same way.
pub fn default_socket() -> std::path::PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(d) => std::path::PathBuf::from(d).join(SOCKET_NAME),
        None => std::path::PathBuf::from(SYSTEM_DIR).join(SOCKET_NAME),
    }
}

/// The protocol version every frame carries; a frame of another version is refused and the
/// connection closed. 2: `register`, `enter` and `leave` name their [`Device`] (version 1 had
/// none: every block suspended every stream on the node), `status` counts devices.
pub const VERSION: u32 = 2;

/// The most distinct devices one client may have streams or blocks on at once (the daemon keeps
/// one plan per device: a client naming many devices must not make it keep many plans). A node
/// has at most a few dozen GPUs (and partitions); 64 leaves room for host devices.
pub const MAX_DEVICES_PER_CLIENT: usize = 64;

/// The longest client name (bytes).
pub const MAX_NAME: usize = 64;

/// The longest error text in an ack or a refusal (bytes); the daemon cuts its own to this.
pub const MAX_TEXT: usize = 512;

/// What kind of device a [`Device`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceKind {
    /// A GPU (or GPU partition), by its KFD gpu id (`/sys/class/kfd/kfd/topology/nodes/N/gpu_id`):
    /// the same in every process of the node, whatever `HIP_VISIBLE_DEVICES` or
    /// `ROCR_VISIBLE_DEVICES` make of HIP's device numbers. Never 0 (the CPU nodes' id).
    Kfd,
    /// A host device (`host:N`: CPU worker processes standing in for a GPU), by its index N.
    Host,
}

/// The device a stream or a block is on: `{"kind":"kfd","id":N}` or `{"kind":"host","id":N}`.
/// Ordered (the daemon keys its plans by it); [`Device::validate`] is checked at the decode door.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Device {
    /// What it is.
    pub kind: DeviceKind,
    /// The KFD gpu id, or the host device's index.
    pub id: u32,
}

impl Device {
    /// The GPU whose KFD gpu id is `gpu_id`.
    pub const fn kfd(gpu_id: u32) -> Device {
        Device {
            kind: DeviceKind::Kfd,
            id: gpu_id,
        }
    }

    /// Host device `n` (`host:N`).
    pub const fn host(n: u32) -> Device {
        Device {
            kind: DeviceKind::Host,
            id: n,
        }
    }

    /// What serde cannot check: a KFD gpu id is never 0 (that is a CPU node's).
    pub fn validate(self) -> Result<(), ProtoError> {
        if self.kind == DeviceKind::Kfd && self.id == 0 {
            return Err(ProtoError::new(
                Code::Malformed,
                "device: a kfd device's id is its KFD gpu id, never 0",
            ));
        }
        Ok(())
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            DeviceKind::Kfd => write!(f, "gpu 0x{:x}", self.id),
            DeviceKind::Host => write!(f, "host:{}", self.id),
        }
    }
}

/// Client to daemon: a request with the client's sequence number (replies name it as `re`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientFrame {
    /// [`VERSION`].
    pub v: u32,
    /// The client's number for this request, echoed in the reply.
    pub seq: u64,
    /// The request.
    pub msg: Request,
}

/// What a client asks. The first message of a connection is `Hello`, and only once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Opens the conversation; `name` is for the daemon's log (printable, at most [`MAX_NAME`]).
    Hello {
        /// Who the client is (e.g. `pid 1234 lp`).
        name: String,
    },
    /// Registers (or re-prioritises) one of the client's own streams. Reply: `done`; the daemon
    /// may order it suspended at once. A stream stays on the device it was registered on (a
    /// register naming another one is refused: unregister it first).
    Register {
        /// The client's stream id.
        stream: u64,
        /// hpf's priority (larger runs first).
        priority: i32,
        /// The device the stream runs on: only blocks on it suspend it.
        device: Device,
    },
    /// Forgets a stream. The client resumes it itself if the daemon had it suspended (no order
    /// follows). Reply: `done`.
    Unregister {
        /// The client's stream id.
        stream: u64,
    },
    /// A block of high-priority work starts. Reply: `entered`, once every suspend it waits for was
    /// acknowledged or timed out.
    Enter {
        /// The block's priority.
        priority: i32,
        /// The device the block's work runs on: only streams on it are suspended.
        device: Device,
    },
    /// A block this client entered has finished its device work. Reply: `done`.
    Leave {
        /// The block's priority.
        priority: i32,
        /// The device it was entered on.
        device: Device,
    },
    /// The outcome of an [`Notice::Order`]. No reply unless it is refused.
    Ack {
        /// The order's number.
        order: u64,
        /// Whether the suspend or resume was carried out.
        ok: bool,
        /// Why not (at most [`MAX_TEXT`]).
        #[serde(default)]
        error: Option<String>,
    },
    /// Liveness: the daemon answers `pong` at once. (`{}`: a unit variant would let unknown
    /// fields through.)
    Ping {},
    /// The daemon's counters. Reply: `status`.
    Status {},
}

/// Daemon to client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DaemonFrame {
    /// [`VERSION`].
    pub v: u32,
    /// The notice.
    pub msg: Notice,
}

/// What the daemon says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Notice {
    /// The reply to `hello`.
    Welcome {
        /// The client's number in the daemon's log.
        client: u64,
        /// The daemon's pid.
        pid: u32,
    },
    /// A request was carried out.
    Done {
        /// The request's `seq`.
        re: u64,
    },
    /// The reply to `enter`: the suspends it waited for, by outcome.
    Entered {
        /// The request's `seq`.
        re: u64,
        /// Acknowledged as done.
        suspended: u32,
        /// Acknowledged as failed (or their client went away).
        failed: u32,
        /// Not acknowledged within the daemon's ack timeout (not waited for any longer).
        late: u32,
    },
    /// A request (or an unreadable frame) was refused.
    Refused {
        /// The request's `seq` where it could be read.
        re: Option<u64>,
        /// What kind of refusal.
        code: Code,
        /// What was wrong (at most [`MAX_TEXT`]).
        message: String,
    },
    /// Suspend or resume one of the client's own streams, then `ack` the order.
    Order {
        /// The order's number (for the ack).
        order: u64,
        /// The client's stream id.
        stream: u64,
        /// What to do.
        action: OrderAction,
    },
    /// The reply to `ping`.
    Pong {
        /// The request's `seq`.
        re: u64,
    },
    /// The reply to `status`.
    Status {
        /// The request's `seq`.
        re: u64,
        /// Clients that said hello.
        clients: u32,
        /// Registered streams.
        streams: u32,
        /// Streams the plan holds suspended.
        suspended: u32,
        /// Active blocks.
        blocks: u32,
        /// Devices with a registered stream or an active block (the daemon's plans).
        devices: u32,
        /// Orders sent and not yet acknowledged (late ones included).
        unacked: u32,
    },
}

/// An order's action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderAction {
    /// Suspend the stream.
    Suspend,
    /// Resume the stream.
    Resume,
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Code {
    /// Another protocol version (the connection closes).
    Version,
    /// Not a message of this protocol (bad JSON, unknown field or type, bad text).
    Malformed,
    /// A frame longer than [`MAX_FRAME`] (the connection closes).
    TooLarge,
    /// Not expected now: before `hello`, a second `hello`, an ack of an order not outstanding.
    OutOfOrder,
    /// The peer's user is not allowed (the connection closes).
    NotAllowed,
    /// A stream the client did not register.
    UnknownStream,
    /// `leave` of a priority the client has no block of.
    NotActive,
    /// Too many streams, blocks, devices or clients.
    Limit,
}

/// A refusal: its code and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtoError {
    /// The kind of refusal.
    pub code: Code,
    /// What was wrong.
    pub message: String,
}

impl ProtoError {
    /// A refusal of `code`.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        ProtoError {
            code,
            message: cut(message.into(), MAX_TEXT),
        }
    }

    /// Whether the connection must end (the stream cannot be trusted any more).
    pub fn fatal(&self) -> bool {
        matches!(self.code, Code::Version | Code::TooLarge | Code::NotAllowed)
    }
}

impl fmt::Display for ProtoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.code, self.message)
    }
}

impl std::error::Error for ProtoError {}

/// `s` cut to at most `max` bytes at a character boundary.
pub fn cut(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

fn text_ok(s: &str, max: usize) -> bool {
    s.len() <= max && !s.chars().any(char::is_control)
}

impl Request {
    /// Checks what serde cannot: text lengths and characters, devices.
    pub fn validate(&self) -> Result<(), ProtoError> {
        match self {
            Request::Register { device, .. } | Request::Enter { device, .. } | Request::Leave { device, .. } => {
                device.validate()
            }
            Request::Hello { name } if name.is_empty() || !text_ok(name, MAX_NAME) => Err(ProtoError::new(
                Code::Malformed,
                format!("hello: the name must be 1 to {MAX_NAME} printable bytes"),
            )),
            Request::Ack { error: Some(e), .. } if !text_ok(e, MAX_TEXT) => Err(ProtoError::new(
                Code::Malformed,
                format!("ack: the error text must be at most {MAX_TEXT} printable bytes"),
            )),
            _ => Ok(()),
        }
    }
}

/// A client's payload as a validated request: a JSON object (not an array, which serde would
/// also read into a struct), its version first (another one is refused as `version`), then the
/// whole frame, then [`Request::validate`]. The error carries the request's `seq` where it could
/// be read.
pub fn decode_request(payload: &[u8]) -> Result<ClientFrame, (Option<u64>, ProtoError)> {
    let object: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(payload).map_err(|e| {
        (
            None,
            ProtoError::new(Code::Malformed, format!("not a JSON object: {e}")),
        )
    })?;
    let seq = object.get("seq").and_then(serde_json::Value::as_u64);
    match object.get("v").map(serde_json::Value::as_u64) {
        Some(Some(v)) if v == u64::from(VERSION) => {}
        Some(Some(v)) => {
            return Err((
                seq,
                ProtoError::new(
                    Code::Version,
                    format!("protocol version {v}; this daemon speaks {VERSION}"),
                ),
            ));
        }
        _ => {
            return Err((
                seq,
                ProtoError::new(Code::Malformed, "no version field \"v\" (a number)"),
            ));
        }
    }
    let frame = ClientFrame::deserialize(serde_json::Value::Object(object))
        .map_err(|e| (seq, ProtoError::new(Code::Malformed, format!("not a request: {e}"))))?;
    frame.msg.validate().map_err(|e| (Some(frame.seq), e))?;
    Ok(frame)
}

/// A daemon's payload as a notice (the client's side of [`decode_request`]).
pub fn decode_notice(payload: &[u8]) -> Result<Notice, ProtoError> {
    let frame: DaemonFrame =
        serde_json::from_slice(payload).map_err(|e| ProtoError::new(Code::Malformed, format!("not a notice: {e}")))?;
    if frame.v != VERSION {
        return Err(ProtoError::new(
            Code::Version,
            format!("daemon speaks protocol version {}; this client {VERSION}", frame.v),
        ));
    }
    Ok(frame.msg)
}

/// A request as a frame, ready to write.
pub fn encode_request(seq: u64, msg: Request) -> Vec<u8> {
    encode(&ClientFrame { v: VERSION, seq, msg })
}

/// A notice as a frame, ready to write.
pub fn encode_notice(msg: Notice) -> Vec<u8> {
    encode(&DaemonFrame { v: VERSION, msg })
}

fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    // Our own types serialize (no maps with non-string keys) and their texts are bounded by
    // MAX_NAME/MAX_TEXT, so a frame always fits: an error here is a bug in this module.
    let json = serde_json::to_vec(v).expect("protocol types serialize");
    frame::encode(&json).expect("protocol messages are bounded below MAX_FRAME")
}

#[cfg(test)]
mod tests;
