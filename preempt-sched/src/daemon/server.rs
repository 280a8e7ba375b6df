//! The event loop (see the [module documentation](super) for why one thread).
//!
//! **Bounded work per connection per turn.** A turn reads at most 64 KiB from a connection and
//! acts on at most [`FRAMES_PER_TURN`] of its frames; what is left waits for the next turn (the
//! loop does not sleep while any connection has whole frames left), so a client that floods
//! costs each other client at most one such slice per turn. A refusal that ends the connection
//! (another version, an oversized frame, too many refusals) stops its decoding at once: nothing
//! it sent after is acted on. `epoll` reports only the connections that are ready, so idle
//! connections cost a turn nothing.
//!
//! Long because a turn's loop and the bounds it enforces are read together: apart, each limit would
//! sit away from the code it limits.
use super::conn::{Conn, MAX_OUT, Turn};
use super::listen::Listening;
use super::plan::{ClientId, Out, Plan};
use super::{Config, DaemonError};
use crate::proto::{Code, Notice, ProtoError, Request, decode_request, encode_notice};
use nix::errno::Errno;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

mod admit;
mod gate;
use gate::Gate;

/// Refusals one connection may collect before it is closed.
const MAX_REFUSALS: u32 = 64;

/// Refusals of one connection written to the log; the rest are counted in its closing line.
const LOGGED_REFUSALS: u32 = 8;

/// Frames of one connection acted on per turn.
pub(super) const FRAMES_PER_TURN: usize = 32;

/// Work one uid's connections may cause per turn, in streams touched (`Plan::work`) plus
/// [`FRAME_COST`] per frame: a user whose blocks flip thousands of streams, or who floods from
/// hundreds of connections, gets a slice of the turn like every other user. A request that costs
/// more than a slice leaves a debt that the uid's next turns pay off before its next frame.
const WORK_PER_TURN: i64 = 8192;

/// What one frame costs the budget besides its plan work (decoding, the reply): a uid gets at
/// most 128 frames a turn, far more than a well-behaved process sends (a block is two).
const FRAME_COST: i64 = 64;

/// Connections the daemon's own user and root may have beyond `--max-clients`: other users
/// filling every slot do not lock out the node's owner.
pub(super) const RESERVED: usize = 32;

/// Events taken from epoll per turn (the rest stay ready for the next).
const EVENTS: usize = 256;

/// Connections accepted per turn.
const ACCEPTS_PER_TURN: usize = 16;

/// The longest sleep of the loop with nothing to wait for.
const IDLE: Duration = Duration::from_secs(1);

const LISTENER: u64 = 0;
const SIGNALS: u64 = 1;

fn token(id: ClientId) -> u64 {
    id + 1
}

/// What one connection's share of a turn came to.
enum Decoded {
    /// Its uid's allowance was spent: nothing was done.
    Skipped,
    /// Frames are left.
    More,
    /// Nothing more to decode now.
    Done,
}

struct Server<'a> {
    cfg: &'a Config,
    plan: Plan,
    conns: BTreeMap<ClientId, Conn>,
    next_id: ClientId,
    /// Connections to close at the end of this turn, with why.
    closing: Vec<(ClientId, String)>,
    /// Connections with bytes to decode, in the order they are served: those that waited first
    /// (their turn ran out, or their uid's allowance), then those that became readable. Every
    /// connection of a uid gets its turn in this order, so a flood from one connection waits
    /// behind the others rather than ahead of them; and clients that said hello and were never
    /// refused go before the rest (new connections, refused ones): a user's connection churn
    /// and garbage do not delay that user's own well-behaved clients.
    queue: VecDeque<ClientId>,
    refused_queue: VecDeque<ClientId>,
    queued: BTreeSet<ClientId>,
    /// Connections with bytes to write.
    dirty: BTreeSet<ClientId>,
    /// Connections per uid.
    per_uid: BTreeMap<u32, usize>,
    /// Per uid: the work it may still cause this turn (negative: a debt from an expensive
    /// request).
    allowance: BTreeMap<u32, i64>,
    /// Connections that have not said hello, by deadline.
    hello: BTreeSet<(Instant, ClientId)>,
    epoll: Epoll,
    gate: Gate,
    /// Turns of the loop and connection events served (logged at exit: the work per turn).
    turns: u64,
    visits: u64,
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
    let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).map_err(|e| DaemonError::io("epoll_create1", e))?;
    epoll
        .add(&listening.listener, EpollEvent::new(EpollFlags::EPOLLIN, LISTENER))
        .map_err(|e| DaemonError::io("epoll_ctl (listener)", e))?;
    epoll
        .add(&sfd, EpollEvent::new(EpollFlags::EPOLLIN, SIGNALS))
        .map_err(|e| DaemonError::io("epoll_ctl (signalfd)", e))?;
    let mut s = Server {
        cfg,
        plan: Plan::new(cfg.ack_timeout, cfg.limits),
        conns: BTreeMap::new(),
        next_id: 1,
        closing: Vec::new(),
        queue: VecDeque::new(),
        refused_queue: VecDeque::new(),
        queued: BTreeSet::new(),
        dirty: BTreeSet::new(),
        per_uid: BTreeMap::new(),
        allowance: BTreeMap::new(),
        hello: BTreeSet::new(),
        epoll,
        gate: Gate::default(),
        turns: 0,
        visits: 0,
        log,
    };
    (s.log)(&format!(
        "listening on {} (pid {}, ack timeout {} ms, at most {} clients, {} per uid)",
        listening.path().display(),
        std::process::id(),
        cfg.ack_timeout.as_millis(),
        cfg.max_clients,
        cfg.max_per_uid
    ));
    let mut events = [EpollEvent::empty(); EVENTS];
    loop {
        let n = match s.epoll.wait(&mut events, s.timeout()) {
            Ok(n) => n,
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(DaemonError::io("epoll_wait", e)),
        };
        s.turns += 1;
        s.credit();
        for ev in &events[..n] {
            match ev.data() {
                SIGNALS => {
                    let sig = sfd.read_signal().ok().flatten().map_or(0, |i| i.ssi_signo);
                    (s.log)(&format!(
                        "signal {sig}: exiting; {} clients resume what they suspended ({} turns, {} connection events served)",
                        s.conns.len(),
                        s.turns,
                        s.visits
                    ));
                    return Ok(());
                }
                LISTENER => s.accept(listening),
                t => s.serve_conn(t - 1, ev.events()),
            }
        }
        s.decode_queue();
        let now = Instant::now();
        if s.gate.reopen(now) {
            let _ = s
                .epoll
                .add(&listening.listener, EpollEvent::new(EpollFlags::EPOLLIN, LISTENER));
        }
        while let Some(&(at, id)) = s.hello.first() {
            if at > now {
                break;
            }
            s.hello.pop_first();
            s.closing
                .push((id, format!("no hello within {} ms", s.cfg.hello_timeout.as_millis())));
        }
        let mut out = Vec::new();
        s.plan.tick(now, &mut out);
        s.dispatch(out, None);
        for line in s.gate.flush(now) {
            (s.log)(&line);
        }
        s.finish_turn();
    }
}

impl Server<'_> {
    /// A new turn: every uid's allowance grows by one turn's work, up to one turn's (a debt is
    /// paid off first); uids with no connection left are forgotten once they owe nothing.
    fn credit(&mut self) {
        let per_uid = &self.per_uid;
        self.allowance.retain(|uid, a| {
            *a = (*a + WORK_PER_TURN).min(WORK_PER_TURN);
            per_uid.contains_key(uid) || *a < WORK_PER_TURN
        });
    }

    /// How long the next wait may sleep: not at all with frames left over, else until the
    /// next deadline (rounded up: a deadline 0.3 ms away is not a busy loop of zero timeouts).
    fn timeout(&self) -> EpollTimeout {
        if !self.queue.is_empty() || !self.refused_queue.is_empty() {
            return EpollTimeout::ZERO;
        }
        let now = Instant::now();
        let next = [
            self.plan.next_deadline(),
            self.hello.first().map(|&(at, _)| at),
            self.gate.until(),
        ]
        .into_iter()
        .flatten()
        .min();
        let d = next.map_or(IDLE, |d| d.saturating_duration_since(now).min(IDLE));
        EpollTimeout::try_from(d.as_millis() + 1).unwrap_or(EpollTimeout::MAX)
    }

    fn serve_conn(&mut self, id: ClientId, ev: EpollFlags) {
        self.visits += 1;
        let Some(conn) = self.conns.get_mut(&id) else { return };
        if conn.closing {
            return;
        }
        if ev.contains(EpollFlags::EPOLLOUT) {
            self.dirty.insert(id);
        }
        if !ev.intersects(EpollFlags::EPOLLIN | EpollFlags::EPOLLHUP | EpollFlags::EPOLLERR) {
            return;
        }
        // Frames read before an end of stream are still served (a client may send and close):
        // this turn's share of them, then the connection closes.
        if let Turn::Closed(why) = conn.read_turn() {
            conn.eof = Some(why);
        }
        self.enqueue(id);
    }

    fn enqueue(&mut self, id: ClientId) {
        let Some(conn) = self.conns.get(&id) else { return };
        if self.queued.insert(id) {
            if conn.refusals == 0 && self.plan.knows(id) {
                self.queue.push_back(id);
            } else {
                self.refused_queue.push_back(id);
            }
        }
    }

    /// One turn over the queue, in passes of one frame per connection (at most
    /// [`FRAMES_PER_TURN`] passes): a frame that waits behind others waits for one frame of each
    /// busy connection, not for their whole share (an HP process's `enter` is not queued behind
    /// thousands of another process's registrations). Those left with frames, or skipped (their
    /// uid's allowance spent), are queued again, the skipped first.
    fn decode_queue(&mut self) {
        let mut active: Vec<ClientId> = self.queue.drain(..).collect();
        active.extend(self.refused_queue.drain(..));
        self.queued.clear();
        let (mut skipped, mut again) = (Vec::new(), Vec::new());
        for pass in 0..FRAMES_PER_TURN {
            let mut next = Vec::new();
            for id in std::mem::take(&mut active) {
                match self.decode(id) {
                    Decoded::Skipped if pass == 0 => skipped.push(id),
                    Decoded::Skipped => again.push(id),
                    Decoded::More => next.push(id),
                    Decoded::Done => {
                        // Its end of stream, and nothing whole left to serve (a truncated frame
                        // at most: the closing line says so).
                        if let Some(conn) = self.conns.get_mut(&id)
                            && let Some(why) = conn.eof.take()
                        {
                            self.closing.push((id, why));
                        }
                    }
                }
            }
            if next.is_empty() {
                break;
            }
            active = next;
        }
        again.extend(active);
        for id in skipped.into_iter().chain(again) {
            let Some(conn) = self.conns.get_mut(&id) else { continue };
            if let Some(why) = conn.eof.take() {
                // Its end of stream: this turn's share of what it sent was served.
                self.closing.push((id, why));
            } else if !conn.closing {
                self.enqueue(id);
            }
        }
    }

    /// Acts on the connection's next frame, unless its uid's allowance for the turn is spent.
    fn decode(&mut self, id: ClientId) -> Decoded {
        let Some(uid) = self.conns.get(&id).map(|c| c.peer.uid) else {
            return Decoded::Done;
        };
        if self.allowance.get(&uid).copied().unwrap_or(WORK_PER_TURN) <= 0 {
            return Decoded::Skipped;
        }
        let Some(conn) = self.conns.get_mut(&id) else {
            return Decoded::Done;
        };
        if conn.closing {
            return Decoded::Done;
        }
        let payload = match conn.decoder.next_frame() {
            Ok(Some(p)) => p,
            Ok(None) => return Decoded::Done,
            Err(e) => {
                let e = ProtoError::new(Code::TooLarge, e.to_string());
                self.refuse(id, None, e);
                return Decoded::Done;
            }
        };
        let now = Instant::now();
        let before = self.plan.work();
        self.plan.heard(id, now);
        let mut out = Vec::new();
        match decode_request(&payload) {
            Ok(f) => {
                if let Err(e) = self.request(id, f.seq, f.msg, now, &mut out) {
                    self.refuse(id, Some(f.seq), e);
                }
            }
            Err((seq, e)) => self.refuse(id, seq, e),
        }
        let cost = i64::try_from(self.plan.work() - before).unwrap_or(i64::MAX);
        let a = self.allowance.entry(uid).or_insert(WORK_PER_TURN);
        *a = a.saturating_sub(cost.saturating_add(FRAME_COST));
        self.dispatch(out, None);
        if self
            .conns
            .get(&id)
            .is_some_and(|c| !c.closing && c.decoder.pending() > 0)
        {
            Decoded::More
        } else {
            Decoded::Done
        }
    }

    fn request(
        &mut self,
        id: ClientId,
        seq: u64,
        msg: Request,
        now: Instant,
        out: &mut Vec<Out>,
    ) -> Result<(), ProtoError> {
        if let Request::Hello { name } = &msg
            && !self.plan.knows(id)
        {
            let uid = self.conns.get(&id).map_or(u32::MAX, |c| c.peer.uid);
            self.plan.join(id, name, uid);
            if let Some(c) = self.conns.get_mut(&id) {
                if let Some(d) = c.hello_deadline.take() {
                    self.hello.remove(&(d, id));
                }
                out.push(Out::ClientLog(
                    id,
                    format!(
                        "client {id} ({}) connected: pid {} uid {}",
                        super::text::escape(name),
                        c.peer.pid,
                        c.peer.uid
                    ),
                ));
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
        self.plan.request(id, seq, msg, now, out)
    }

    /// Sends a refusal and logs it (the first few); fatal ones (and one too many) close the
    /// connection and stop its decoding.
    fn refuse(&mut self, id: ClientId, re: Option<u64>, e: ProtoError) {
        let Some(conn) = self.conns.get_mut(&id) else { return };
        conn.refusals += 1;
        if conn.refusals <= LOGGED_REFUSALS
            && let Some(suffix) = self.gate.line(conn.peer.uid, Instant::now())
        {
            // The refusal's text may quote what the client sent (a type or field it made up).
            (self.log)(&format!(
                "client {id} (pid {}): refused{}: {}{suffix}",
                conn.peer.pid,
                re.map_or(String::new(), |s| format!(" request {s}")),
                super::text::escape(&e.to_string())
            ));
        }
        let fatal = e.fatal();
        let frame = encode_notice(Notice::Refused {
            re,
            code: e.code,
            message: e.message,
        });
        let why = if !conn.queue(&frame) {
            Some(format!("more than {MAX_OUT} bytes unread"))
        } else if fatal {
            Some("refused (fatal)".into())
        } else if conn.refusals > MAX_REFUSALS {
            Some(format!("more than {MAX_REFUSALS} refusals"))
        } else {
            None
        };
        self.dirty.insert(id);
        if let Some(why) = why {
            conn.closing = true;
            self.closing.push((id, why));
        }
    }

    /// Sends and logs what the plan decided; a line about a client is logged within its uid's
    /// lines per second (`uid`: the uid of a client already gone from the connections).
    fn dispatch(&mut self, out: Vec<Out>, uid: Option<u32>) {
        for o in out {
            match o {
                Out::ClientLog(c, line) => {
                    let Some(u) = self.conns.get(&c).map(|k| k.peer.uid).or(uid) else {
                        (self.log)(&line);
                        continue;
                    };
                    if let Some(suffix) = self.gate.line(u, Instant::now()) {
                        (self.log)(&format!("{line}{suffix}"));
                    }
                }
                Out::Send(c, n) => {
                    let Some(conn) = self.conns.get_mut(&c) else { continue };
                    if conn.queue(&encode_notice(n)) {
                        self.dirty.insert(c);
                    } else if !conn.closing {
                        conn.closing = true;
                        self.closing.push((
                            c,
                            format!("more than {MAX_OUT} bytes unread: the client stopped reading"),
                        ));
                    }
                }
            }
        }
    }

    /// Writes what can be written now (asking epoll for writability where bytes are left),
    /// then closes the connections marked for it (which may send orders to others: repeated
    /// until nothing more is closed).
    fn finish_turn(&mut self) {
        loop {
            for id in std::mem::take(&mut self.dirty) {
                let Some(conn) = self.conns.get_mut(&id) else { continue };
                if let Err(e) = conn.flush() {
                    self.closing.push((id, e));
                    continue;
                }
                let want = conn.has_output();
                if want != conn.wants_out {
                    conn.wants_out = want;
                    let mut flags = EpollFlags::EPOLLIN;
                    if want {
                        flags |= EpollFlags::EPOLLOUT;
                    }
                    let mut ev = EpollEvent::new(flags, token(id));
                    let _ = self.epoll.modify(&conn.stream, &mut ev);
                }
            }
            if self.closing.is_empty() {
                return;
            }
            for (id, why) in std::mem::take(&mut self.closing) {
                let mut out = Vec::new();
                let Some(conn) = self.conns.remove(&id) else { continue };
                let _ = self.epoll.delete(&conn.stream);
                self.queued.remove(&id);
                if let Some(d) = conn.hello_deadline {
                    self.hello.remove(&(d, id));
                }
                if let Some(n) = self.per_uid.get_mut(&conn.peer.uid) {
                    *n -= 1;
                    if *n == 0 {
                        self.per_uid.remove(&conn.peer.uid);
                    }
                }
                let unlogged = conn.refusals.saturating_sub(LOGGED_REFUSALS);
                let also = if unlogged > 0 {
                    format!(" ({} refusals, {unlogged} of them not logged)", conn.refusals)
                } else {
                    String::new()
                };
                // Every line about a connection counts against its uid's lines per second: a
                // user churning connections cannot flood the log either.
                if let Some(suffix) = self.gate.line(conn.peer.uid, Instant::now()) {
                    (self.log)(&format!(
                        "client {id} (pid {}) closed: {why}{also}{suffix}",
                        conn.peer.pid
                    ));
                }
                self.plan.drop_client(id, Instant::now(), &mut out);
                self.dispatch(out, Some(conn.peer.uid));
            }
        }
    }
}
