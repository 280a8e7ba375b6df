//! The link thread: connects to the daemon (again and again, with a backoff), checks who the
//! daemon is, says hello, replays the registered streams and active blocks, carries out the
//! daemon's orders on the client's own streams (any [`super::Schedulable`]), and on losing the daemon (end of stream, an
//! error, or silence past the lease while it holds streams suspended) resumes everything it
//! suspended for it. While the process holds blocks it pings, so that the daemon can tell a
//! live HP process from a stopped one (whose blocks it ends).
use super::shared::{Shared, State};
use super::trust;
use crate::sched::proto::{self, Decoder, Notice, OrderAction, Request, decode_notice, encode_request};
use nix::errno::Errno;
use nix::sys::socket::{AddressFamily, SockFlag, SockType, UnixAddr, connect as sys_connect, socket};
use std::io::{ErrorKind, Read};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The first wait between two connection attempts; doubled up to
/// [`super::ClientOptions::reconnect_max`].
const BACKOFF_START: Duration = Duration::from_millis(10);

/// The read timeout of a connection while nothing is held (only the stop flag is checked).
const IDLE_READ: Duration = Duration::from_millis(200);

/// The longest between two pings while the process holds blocks: the daemon ends the blocks of
/// a client silent for its `--block-silence-ms` (default 1 s), whatever this client's lease.
const BLOCK_PING: Duration = Duration::from_millis(100);

pub(super) fn run(shared: &Arc<Shared>) {
    let mut backoff = BACKOFF_START;
    while !shared.stop.load(Ordering::Acquire) {
        match connect(shared) {
            Ok((stream, dec)) => {
                backoff = BACKOFF_START;
                let why = serve(shared, &stream, dec);
                lost(shared, &stream, &why);
            }
            Err(why) => {
                let mut st = shared.state();
                st.socket = None;
                st.last_error = Some(why);
                st.attempted = true;
                drop(st);
                shared.attempt.notify_all();
                sleep_unless_stopped(shared, backoff);
                backoff = (backoff * 2).min(shared.opts.reconnect_max);
            }
        }
    }
}

fn sleep_unless_stopped(shared: &Shared, d: Duration) {
    let end = Instant::now() + d;
    while !shared.stop.load(Ordering::Acquire) {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(Duration::from_millis(5)));
    }
}

/// The tick of the read loop: a quarter of the lease, so the lease is checked in time.
fn tick(shared: &Shared) -> Duration {
    (shared.opts.lease / 4).max(Duration::from_millis(1))
}

/// Connects without blocking: a daemon whose listen backlog is full (hung, or flooded) is
/// tried again every millisecond until `deadline` (or the client closes), never a `connect()`
/// that blocks the link thread, and with it `close`, for longer.
fn connect_now(path: &Path, shared: &Shared, deadline: Instant) -> Result<UnixStream, String> {
    let addr = UnixAddr::new(path).map_err(|e| format!("{}: {e}", path.display()))?;
    loop {
        let fd = socket(
            AddressFamily::Unix,
            SockType::Stream,
            SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
            None,
        )
        .map_err(|e| format!("socket: {e}"))?;
        match sys_connect(std::os::fd::AsRawFd::as_raw_fd(&fd), &addr) {
            Ok(()) => {
                let stream = UnixStream::from(fd);
                stream
                    .set_nonblocking(false)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                return Ok(stream);
            }
            Err(Errno::EAGAIN) if Instant::now() < deadline && !shared.stop.load(Ordering::Acquire) => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(Errno::EAGAIN) => {
                return Err(format!(
                    "connecting to {}: the daemon accepts no connection (its backlog is full: hung or flooded)",
                    path.display()
                ));
            }
            Err(e) => return Err(format!("connecting to {}: {}", path.display(), std::io::Error::from(e))),
        }
    }
}

/// Connects, checks the daemon's uid, says hello, waits for the welcome, installs the writer
/// and replays the state.
fn connect(shared: &Arc<Shared>) -> Result<(UnixStream, Decoder), String> {
    let path = &shared.path;
    let deadline = Instant::now() + shared.opts.reply_timeout;
    let mut stream = connect_now(path, shared, deadline)?;
    // Who listens there: a daemon of another user (a socket planted at a shared path) would
    // otherwise receive this process's hello and suspend its streams at will.
    trust::check_daemon(&stream, path, &shared.opts.trusted_uids)?;
    let io = |e: std::io::Error| format!("{}: {e}", path.display());
    stream.set_read_timeout(Some(tick(shared))).map_err(io)?;
    stream.set_write_timeout(Some(shared.opts.reply_timeout)).map_err(io)?;
    // `close` shuts this socket down to wake the thread, also before the welcome.
    shared.state().socket = stream.try_clone().ok();
    let hello = Request::Hello {
        name: shared.opts.name.clone(),
    };
    let mut dec = Decoder::new();
    if let Err(e) = super::shared::write_all(&stream, &encode_request(0, hello)) {
        // A daemon that refuses a peer (SO_PEERCRED) writes its refusal and closes at once, so
        // the hello may meet a closed socket: the refusal is still there to read.
        if let Ok(Some(Notice::Refused { code, message, .. })) = read_notice(&mut stream, &mut dec) {
            return Err(format!(
                "{} refused the connection ({code:?}): {message}",
                path.display()
            ));
        }
        return Err(io(e));
    }
    let pid = loop {
        if shared.stop.load(Ordering::Acquire) {
            return Err("the client closed".into());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "{}: no welcome within {:?}",
                path.display(),
                shared.opts.reply_timeout
            ));
        }
        match read_notice(&mut stream, &mut dec)? {
            Some(Notice::Welcome { pid, .. }) => break pid,
            Some(Notice::Refused { code, message, .. }) => {
                return Err(format!(
                    "{} refused the connection ({code:?}): {message}",
                    path.display()
                ));
            }
            Some(other) => return Err(format!("{}: expected a welcome, got {other:?}", path.display())),
            None => {}
        }
    };
    let writer = stream.try_clone().map_err(io)?;
    let mut st = shared.state();
    st.writer = Some(writer);
    st.daemon_pid = Some(pid);
    st.last_error = None;
    st.attempted = true;
    st.stats.connects += 1;
    // Replayed under the lock, so that no API call slips between: the daemon sees this client's
    // whole state before anything new.
    let streams: Vec<_> = st.streams.iter().map(|(&id, r)| (id, r.priority, r.device)).collect();
    for (stream, priority, device) in streams {
        st.send(
            Request::Register {
                stream,
                priority,
                device,
            },
            None,
        );
    }
    // Blocks are recorded only once their device is known (the unplaced ones are never sent).
    let blocks: Vec<_> = st.blocks.iter().map(|(&(d, p), &n)| (d, p, n)).collect();
    for (device, priority, n) in blocks {
        for _ in 0..n {
            st.send(Request::Enter { priority, device }, None);
        }
    }
    drop(st);
    shared.attempt.notify_all();
    Ok((stream, dec))
}

/// One read (at most a tick long) and the next whole notice, if any.
fn read_notice(stream: &mut UnixStream, dec: &mut Decoder) -> Result<Option<Notice>, String> {
    if let Some(n) = next_notice(dec)? {
        return Ok(Some(n));
    }
    let mut buf = [0u8; 4096];
    match stream.read(&mut buf) {
        Ok(0) => Err("the daemon closed the connection".into()),
        Ok(n) => {
            dec.push(&buf[..n]);
            next_notice(dec)
        }
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(format!("reading from the daemon: {e}")),
    }
}

fn next_notice(dec: &mut Decoder) -> Result<Option<Notice>, String> {
    match dec.next_frame() {
        Ok(Some(p)) => decode_notice(&p).map(Some).map_err(|e| format!("from the daemon: {e}")),
        Ok(None) => Ok(None),
        Err(e) => Err(format!("from the daemon: {e}")),
    }
}

/// The read loop of one connection; returns why it ended.
fn serve(shared: &Arc<Shared>, stream: &UnixStream, mut dec: Decoder) -> String {
    let mut stream = match stream.try_clone() {
        Ok(s) => s,
        Err(e) => return format!("cloning the socket: {e}"),
    };
    let lease = shared.opts.lease;
    let mut heard = Instant::now();
    let mut pinged = Instant::now();
    let mut timeout = tick(shared);
    loop {
        // Short reads only while pinging (the lease is checked between them); otherwise an idle
        // client wakes rarely: an order or the daemon's end wakes the read at once anyway.
        let want = ping_interval(shared).1.unwrap_or(IDLE_READ);
        if want != timeout {
            timeout = want;
            if let Err(e) = stream.set_read_timeout(Some(timeout)) {
                return format!("setting the read timeout: {e}");
            }
        }
        if shared.stop.load(Ordering::Acquire) {
            return "the client closed".into();
        }
        match read_notice(&mut stream, &mut dec) {
            Err(why) => return why,
            Ok(Some(n)) => {
                heard = Instant::now();
                handle(shared, n);
                // Drain what the decoder holds before reading again.
                continue;
            }
            Ok(None) => {}
        }
        // What is held now (an order or an API call may have changed it during the read).
        let (holding, ping) = ping_interval(shared);
        if holding && heard.elapsed() > lease {
            shared.state().stats.lease_expiries += 1;
            return format!("the daemon was silent for more than the lease ({lease:?}) while streams were held");
        }
        if !holding {
            // Not holding: the lease starts afresh with the next order.
            heard = Instant::now();
        }
        if ping.is_some_and(|every| pinged.elapsed() >= every) {
            pinged = Instant::now();
            if shared.state().send(Request::Ping {}, None).is_none() {
                return "writing to the daemon failed".into();
            }
        }
    }
}

/// Whether streams are held for the daemon, and how often to ping it: every tick while holding
/// (the lease's check), at most every [`BLOCK_PING`] inside a block (the daemon ends the blocks of
/// a silent process; no lease on the daemon then), not at all otherwise.
fn ping_interval(shared: &Shared) -> (bool, Option<Duration>) {
    let st = shared.state();
    if !st.held.is_empty() {
        (true, Some(tick(shared)))
    } else if !st.blocks.is_empty() {
        (false, Some(tick(shared).min(BLOCK_PING)))
    } else {
        (false, None)
    }
}

fn handle(shared: &Arc<Shared>, n: Notice) {
    let mut st = shared.state();
    match n {
        Notice::Order { order, stream, action } => {
            let (ok, error) = carry_out(&mut st, stream, action);
            if ok {
                st.stats.orders_done += 1;
            } else {
                st.stats.orders_failed += 1;
            }
            st.send(Request::Ack { order, ok, error }, None);
        }
        Notice::Done { re } | Notice::Pong { re } | Notice::Entered { re, .. } | Notice::Status { re, .. } => {
            if let Some(tx) = st.pending.remove(&re) {
                let _ = tx.send(n);
            }
        }
        Notice::Refused { re: Some(re), .. } => {
            if let Some(tx) = st.pending.remove(&re) {
                let _ = tx.send(n);
            }
        }
        Notice::Refused { re: None, message, .. } => st.last_error = Some(message),
        Notice::Welcome { .. } => {}
    }
}

/// One order on one of this client's streams: (ok, why not).
fn carry_out(st: &mut State, stream: u64, action: OrderAction) -> (bool, Option<String>) {
    let Some(s) = st.streams.get(&stream).map(|r| Arc::clone(&r.obj)) else {
        return (false, Some(format!("stream {stream} is not registered here")));
    };
    let text = |e: crate::Error| Some(proto::cut(e.to_string(), proto::MAX_TEXT));
    match action {
        // The daemon's hold beside the user's: a stream suspended by hand just stays suspended,
        // and the daemon's resume releases only its own hold (the in-process helper's rule).
        OrderAction::Suspend if st.held.contains(&stream) => (true, None),
        OrderAction::Suspend => match s.daemon_suspend() {
            Ok(()) => {
                st.held.insert(stream);
                (true, None)
            }
            Err(e) => (false, text(e)),
        },
        // Only what this client holds for the daemon; anything else is not the daemon's.
        OrderAction::Resume if !st.held.remove(&stream) => (true, None),
        OrderAction::Resume => match super::object::release(&*s) {
            Ok(()) => (true, None),
            Err(e) => (false, text(e)),
        },
    }
}

/// The connection is gone: the fail-safe resumes what was held, pending calls get their answer
/// (none: their senders drop), the writer goes.
fn lost(shared: &Arc<Shared>, stream: &UnixStream, why: &str) {
    let _ = stream.shutdown(std::net::Shutdown::Both);
    let mut st = shared.state();
    let failed = st.resume_held();
    st.writer = None;
    st.socket = None;
    st.pending.clear();
    st.daemon_pid = None;
    st.stats.disconnects += 1;
    st.last_error = Some(if failed.is_empty() {
        why.to_owned()
    } else {
        format!("{why}; the fail-safe resume failed for {}", failed.join(", "))
    });
}
