//! The daemon's state without I/O: one hpf [`Policy`] per device over every client's streams on
//! it (keyed by client and the client's own stream id, so a client names only its own), the
//! blocks each client entered, the orders sent and not yet acknowledged, and the `enter`s waiting for their
//! suspends. Each call gets the time and pushes what to send ([`Out`]); the event loop
//! (`super::server`) does the I/O. Pure so that the rules are unit-tested without sockets.
//!
//! **Blocks are per device.** A stream is registered on a [`Device`] and a block is entered on
//! one; each device has a policy of its own, so a block suspends only the streams on its device
//! and waits only for their suspends, and blocks on two devices never interact (an HP block on
//! one GPU of an 8-GPU node leaves the LP work on the seven others running). A device's policy
//! exists while it has a stream or a block; one client may have streams or blocks on at most
//! [`Limits::devices_per_client`] devices at once, so naming many devices costs it a refusal,
//! not the daemon a plan per name.
//!
//! **Cost of a request.** O(log n) in the streams on the node plus what the request changes
//! (hpf's indexed calls, the indexes below): a registration, an `enter` that moves no stream, an
//! ack or a ping never walk every stream, so a client registering thousands of streams does not
//! slow another process's HP block. An `enter` also copies the set of suspends still in flight
//! (normally empty: every earlier suspend acknowledged).
//!
//! **At most one order in flight per stream.** A stream whose order is not yet acknowledged gets
//! no second one: when the ack comes, the stream's confirmed state is compared with what the
//! policy wants now and one new order is sent if they differ. So the bytes queued for a client
//! are bounded by its streams (at most [`Limits::streams_per_client`] orders), however fast
//! other clients enter and leave blocks.
//!
//! **A stalled client is not waited for.** Once one of a client's orders is not acknowledged
//! within the ack timeout (its process stopped, hung or slow), the client is *stalled*: no
//! `enter` waits for its streams (they count as `late`) until it has acknowledged every late
//! order. One stopped LP process costs the first HP block the ack timeout, not every block.
//!
//! **Blocks are leased.** A block ends by itself, logged, when it has been active longer than
//! [`Limits::max_block`], or when its client has been silent longer than
//! [`Limits::block_silence`] (a client holding a block pings; a stopped or hung HP process
//! does not). Its client's later `leave` of it is answered `done`.
//!
//! Long because the plan is one state machine: its limits, states and transitions are one rule,
//! tested against that rule in its tests.
use super::text::escape;
use crate::proto::{Code, Device, MAX_DEVICES_PER_CLIENT, Notice, OrderAction, ProtoError, Request};
use hpf::{Action, Policy};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

mod acks;
mod state;
mod timers;
use state::{Client, Order, StreamState, Timer, Waiting};

/// A connection's number, from 1, never reused while the daemon runs.
pub type ClientId = u64;

type Key = (ClientId, u64);

/// How much one client (and one uid) may hold, and for how long.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Registered streams per client.
    pub streams_per_client: usize,
    /// Registered streams of all the clients of one uid: a block that outranks them all costs
    /// the daemon work in proportion, so one user's streams bound what one of its requests
    /// costs everybody else.
    pub streams_per_uid: usize,
    /// Active blocks per client.
    pub blocks_per_client: usize,
    /// Devices one client may have streams or blocks on at once (the daemon keeps a policy per
    /// device).
    pub devices_per_client: usize,
    /// The longest one block stays active; past it the daemon ends it.
    pub max_block: Duration,
    /// The longest a client holding a block may stay silent (its client pings at least every
    /// 100 ms while it holds one); past it the daemon ends its blocks.
    pub block_silence: Duration,
}

/// Default of [`Limits::streams_per_uid`].
pub const DEFAULT_STREAMS_PER_UID: usize = 4096;

/// Default of [`Limits::max_block`].
pub const DEFAULT_MAX_BLOCK: Duration = Duration::from_secs(10);

/// Default of [`Limits::block_silence`].
pub const DEFAULT_BLOCK_SILENCE: Duration = Duration::from_millis(1000);

impl Default for Limits {
    fn default() -> Self {
        Limits {
            streams_per_client: 1024,
            streams_per_uid: DEFAULT_STREAMS_PER_UID,
            blocks_per_client: 1024,
            devices_per_client: MAX_DEVICES_PER_CLIENT,
            max_block: DEFAULT_MAX_BLOCK,
            block_silence: DEFAULT_BLOCK_SILENCE,
        }
    }
}

/// What the event loop must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Out {
    /// Send `notice` to client `0`.
    Send(ClientId, Notice),
    /// Write a line about client `0` to the daemon's log (the loop bounds the lines about one
    /// uid's clients per second).
    ClientLog(ClientId, String),
}

/// How a stream an `enter` waited for came out.
#[derive(Debug, Clone, Copy)]
enum Outcome {
    Done,
    Failed,
    Late,
}

/// See the [module documentation](self).
#[derive(Debug)]
pub struct Plan {
    /// One policy per device with a stream or a block (removed when it has neither).
    policies: BTreeMap<Device, Policy<Key>>,
    /// The work of the policies so far (see [`Plan::work`]), removed ones included.
    policy_work: u64,
    /// Active blocks, on every device.
    blocks: usize,
    clients: BTreeMap<ClientId, Client>,
    streams: BTreeMap<Key, StreamState>,
    orders: BTreeMap<u64, Order>,
    /// Streams whose suspend the policy wants, not yet confirmed by a client that is not
    /// stalled, by device: what an `enter` on that device waits for.
    in_flight: BTreeSet<(Device, Key)>,
    waits: BTreeMap<u64, Waiting>,
    /// The waits each in-flight stream is in.
    waiters: BTreeMap<Key, BTreeSet<u64>>,
    timers: BTreeSet<(Instant, Timer)>,
    /// Streams confirmed suspended by their clients.
    suspended: usize,
    /// Registered streams per uid.
    uid_streams: BTreeMap<u32, usize>,
    /// Streams copied into waits so far (see [`Plan::work`]).
    wait_work: u64,
    /// Order numbers, from 1 (what clients and the log see); block and wait ids are apart.
    next_order: u64,
    next_id: u64,
    ack_timeout: Duration,
    limits: Limits,
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn action_of(suspend: bool) -> OrderAction {
    if suspend {
        OrderAction::Suspend
    } else {
        OrderAction::Resume
    }
}

impl Plan {
    /// An empty plan; an order not acknowledged within `ack_timeout` is reported and no longer
    /// waited for.
    pub fn new(ack_timeout: Duration, limits: Limits) -> Self {
        Plan {
            policies: BTreeMap::new(),
            policy_work: 0,
            blocks: 0,
            clients: BTreeMap::new(),
            streams: BTreeMap::new(),
            orders: BTreeMap::new(),
            in_flight: BTreeSet::new(),
            waits: BTreeMap::new(),
            waiters: BTreeMap::new(),
            timers: BTreeSet::new(),
            suspended: 0,
            uid_streams: BTreeMap::new(),
            wait_work: 0,
            next_order: 1,
            next_id: 1,
            ack_timeout,
            limits,
        }
    }

    fn id(&mut self) -> u64 {
        let n = self.next_id;
        self.next_id += 1;
        n
    }

    /// A client of `uid` said hello (its name is escaped here for every log line after).
    pub fn join(&mut self, c: ClientId, name: &str, uid: u32) {
        self.clients.insert(c, Client::new(escape(name), uid));
    }

    /// Whether `c` said hello.
    pub fn knows(&self, c: ClientId) -> bool {
        self.clients.contains_key(&c)
    }

    /// Clients that said hello.
    pub fn clients(&self) -> usize {
        self.clients.len()
    }

    /// All the work done so far, in streams touched: the policies' (queues examined: see
    /// [`hpf::Policy::visited`]), plus the streams each `enter` waits for. The loop bounds each client's share of a turn by it.
    pub fn work(&self) -> u64 {
        self.policy_work + self.wait_work
    }

    /// Runs `f` on `device`'s policy (made if it has none), counting its work.
    fn on_device<R>(&mut self, device: Device, f: impl FnOnce(&mut Policy<Key>) -> R) -> R {
        let p = self.policies.entry(device).or_default();
        let before = p.visited();
        let r = f(p);
        self.policy_work += p.visited() - before;
        r
    }

    /// Forgets `device`'s policy once it has no stream and no block (its work stays counted).
    fn prune(&mut self, device: Device) {
        if self
            .policies
            .get(&device)
            .is_some_and(|p| p.is_empty() && p.active_blocks() == 0)
        {
            self.policies.remove(&device);
        }
    }

    /// The device of a registered stream.
    fn device_of(&self, key: Key) -> Option<Device> {
        self.streams.get(&key).map(|st| st.device)
    }

    /// Whether the policy of `key`'s device wants it suspended.
    fn wants_suspended(&self, key: Key) -> bool {
        self.device_of(key)
            .and_then(|d| self.policies.get(&d))
            .is_some_and(|p| p.is_suspended(key))
    }

    /// Counts one more stream or block of client `c` on `device`; refused (nothing counted) when
    /// that would put the client on more than [`Limits::devices_per_client`] devices.
    fn use_device(&mut self, c: ClientId, device: Device) -> Result<(), ProtoError> {
        let most = self.limits.devices_per_client;
        let Some(k) = self.clients.get_mut(&c) else {
            return Ok(());
        };
        if !k.devices.contains_key(&device) && k.devices.len() >= most {
            return Err(ProtoError::new(
                Code::Limit,
                format!("at most {most} devices per client (streams and blocks on {device} would make one more)"),
            ));
        }
        *k.devices.entry(device).or_insert(0) += 1;
        Ok(())
    }

    /// Counts one stream or block of client `c` on `device` less.
    fn release_device(&mut self, c: ClientId, device: Device) {
        if let Some(k) = self.clients.get_mut(&c)
            && let Some(n) = k.devices.get_mut(&device)
        {
            *n -= 1;
            if *n == 0 {
                k.devices.remove(&device);
            }
        }
    }

    fn who(&self, c: ClientId) -> String {
        self.clients
            .get(&c)
            .map_or_else(|| format!("client {c}"), |k| format!("client {c} ({})", k.name))
    }

    fn stalled(&self, c: ClientId) -> bool {
        self.clients.get(&c).is_some_and(|k| k.late > 0)
    }

    /// Carries out what the policy decided: an order where the stream has none in flight.
    fn apply(&mut self, actions: Vec<Action<Key>>, now: Instant, out: &mut Vec<Out>) {
        for a in actions {
            let key = a.queue();
            let Some(st) = self.streams.get(&key).copied() else {
                continue;
            };
            let want = self.wants_suspended(key);
            if st.order.is_none() && st.suspended != want {
                self.send(key, action_of(want), now, out);
            }
            self.refresh(key, None, out);
        }
    }

    fn send(&mut self, key: Key, action: OrderAction, now: Instant, out: &mut Vec<Out>) {
        let n = self.next_order;
        self.next_order += 1;
        let (client, stream) = key;
        self.orders.insert(
            n,
            Order {
                client,
                stream,
                action,
                sent: now,
                late: false,
            },
        );
        if let Some(st) = self.streams.get_mut(&key) {
            st.order = Some(n);
        }
        if let Some(k) = self.clients.get_mut(&client) {
            k.orders.insert(n);
        }
        self.timers.insert((now + self.ack_timeout, Timer::Ack(n)));
        out.push(Out::Send(
            client,
            Notice::Order {
                order: n,
                stream,
                action,
            },
        ));
    }

    /// Puts `key` in or out of the in-flight set from its state; leaving it resolves the waits
    /// it was in with `outcome` (`None`: moot, counted nowhere).
    fn refresh(&mut self, key: Key, outcome: Option<Outcome>, out: &mut Vec<Out>) {
        // Suspended for sure only when confirmed with no order in flight (a resume on its way
        // may have been carried out already).
        let Some(device) = self.device_of(key) else { return };
        let pending = self
            .streams
            .get(&key)
            .is_some_and(|st| !st.suspended || st.order.is_some())
            && self.wants_suspended(key)
            && !self.stalled(key.0);
        if pending {
            self.in_flight.insert((device, key));
            return;
        }
        if !self.in_flight.remove(&(device, key)) {
            return;
        }
        let Some(ws) = self.waiters.remove(&key) else { return };
        for w in ws {
            let Some(wait) = self.waits.get_mut(&w) else { continue };
            wait.keys.remove(&key);
            match outcome {
                Some(Outcome::Done) => wait.suspended += 1,
                Some(Outcome::Failed) => wait.failed += 1,
                Some(Outcome::Late) => wait.late += 1,
                None => {}
            }
            if wait.keys.is_empty() {
                self.settle(w, out);
            }
        }
    }

    fn settle(&mut self, w: u64, out: &mut Vec<Out>) {
        let Some(wait) = self.waits.remove(&w) else { return };
        if let Some(k) = self.clients.get_mut(&wait.client) {
            k.waits.remove(&w);
        }
        self.timers.remove(&(wait.deadline, Timer::Wait(w)));
        for k in &wait.keys {
            if let Some(ws) = self.waiters.get_mut(k) {
                ws.remove(&w);
                if ws.is_empty() {
                    self.waiters.remove(k);
                }
            }
        }
        out.push(Out::Send(
            wait.client,
            Notice::Entered {
                re: wait.re,
                suspended: wait.suspended,
                failed: wait.failed,
                late: wait.late,
            },
        ));
    }

    /// A request of client `c` (after hello; the loop handles `hello` itself). `Err`: the
    /// refusal to send back; nothing changed.
    pub fn request(
        &mut self,
        c: ClientId,
        seq: u64,
        req: Request,
        now: Instant,
        out: &mut Vec<Out>,
    ) -> Result<(), ProtoError> {
        let Some(client) = self.clients.get(&c) else {
            return Err(ProtoError::new(Code::OutOfOrder, "the first message must be hello"));
        };
        match req {
            Request::Hello { .. } => return Err(ProtoError::new(Code::OutOfOrder, "hello was said already")),
            Request::Register {
                stream,
                priority,
                device,
            } => {
                let new = !client.streams.contains(&stream);
                if let Some(on) = self.device_of((c, stream)).filter(|&on| on != device) {
                    return Err(ProtoError::new(
                        Code::OutOfOrder,
                        format!(
                            "stream {stream} is registered on {on}: unregister it before registering it on {device}"
                        ),
                    ));
                }
                if new && client.streams.len() >= self.limits.streams_per_client {
                    return Err(ProtoError::new(
                        Code::Limit,
                        format!("at most {} streams per client", self.limits.streams_per_client),
                    ));
                }
                let uid = client.uid;
                let of_uid = self.uid_streams.get(&uid).copied().unwrap_or(0);
                if new && of_uid >= self.limits.streams_per_uid {
                    return Err(ProtoError::new(
                        Code::Limit,
                        format!(
                            "uid {uid} has {of_uid} streams registered, the most allowed per uid ({})",
                            self.limits.streams_per_uid
                        ),
                    ));
                }
                if new {
                    self.use_device(c, device)?;
                    *self.uid_streams.entry(uid).or_insert(0) += 1;
                }
                if let Some(k) = self.clients.get_mut(&c) {
                    k.streams.insert(stream);
                }
                self.streams.entry((c, stream)).or_insert(StreamState {
                    device,
                    suspended: false,
                    order: None,
                });
                out.push(Out::Send(c, Notice::Done { re: seq }));
                let actions = self.on_device(device, |p| p.register((c, stream), priority));
                self.apply(actions, now, out);
            }
            Request::Unregister { stream } => {
                if !self.clients.get_mut(&c).is_some_and(|k| k.streams.remove(&stream)) {
                    return Err(ProtoError::new(
                        Code::UnknownStream,
                        format!("stream {stream} is not registered by this client"),
                    ));
                }
                // Its resume, if any, is the client's own (the protocol's rule): no order.
                self.forget_stream((c, stream), None, out);
                out.push(Out::Send(c, Notice::Done { re: seq }));
            }
            Request::Enter { priority, device } => self.enter(c, seq, priority, device, now, out)?,
            Request::Leave { priority, device } => self.leave(c, seq, priority, device, now, out)?,
            Request::Ack { order, ok, error } => self.ack(c, order, ok, error.as_deref(), now, out)?,
            Request::Ping {} => out.push(Out::Send(c, Notice::Pong { re: seq })),
            Request::Status {} => out.push(Out::Send(c, self.status(seq))),
        }
        Ok(())
    }

    /// Removes a stream from the plan (unregistered, or its client gone); an order in flight
    /// to it is forgotten when acknowledged.
    fn forget_stream(&mut self, key: Key, outcome: Option<Outcome>, out: &mut Vec<Out>) {
        if let Some(uid) = self.clients.get(&key.0).map(|k| k.uid)
            && let Some(n) = self.uid_streams.get_mut(&uid)
        {
            *n -= 1;
            if *n == 0 {
                self.uid_streams.remove(&uid);
            }
        }
        let Some(device) = self.device_of(key) else { return };
        // Out of its policy first, so that refresh (which needs the stream's device) sees it
        // wanted by nobody and settles the waits it was in.
        let _ = self.on_device(device, |p| p.unregister(key));
        self.refresh(key, outcome, out);
        if let Some(st) = self.streams.remove(&key)
            && st.suspended
        {
            self.suspended -= 1;
        }
        self.release_device(key.0, device);
        self.prune(device);
    }

    fn status(&self, re: u64) -> Notice {
        Notice::Status {
            re,
            clients: count(self.clients.len()),
            streams: count(self.streams.len()),
            suspended: count(self.suspended),
            blocks: count(self.blocks),
            devices: count(self.policies.len()),
            unacked: count(self.orders.len()),
        }
    }

    /// The connection of `c` ended (EOF, error, SIGKILL, a refusal): its streams leave the
    /// policy (nothing to resume: the client and its workers are gone or resume themselves),
    /// its blocks end, and the others' streams are ordered to follow the new plan.
    pub fn drop_client(&mut self, c: ClientId, now: Instant, out: &mut Vec<Out>) {
        let Some(client) = self.clients.get(&c) else { return };
        let name = client.name.clone();
        let streams: Vec<u64> = client.streams.iter().copied().collect();
        let orders: Vec<u64> = client.orders.iter().copied().collect();
        let blocks: Vec<u64> = client.blocks.keys().copied().collect();
        // Its own waits go unanswered (nobody to answer).
        let mine: Vec<u64> = client.waits.iter().copied().collect();
        for w in mine {
            if let Some(wait) = self.waits.remove(&w) {
                for k in wait.keys {
                    if let Some(ws) = self.waiters.get_mut(&k) {
                        ws.remove(&w);
                    }
                }
            }
        }
        for n in orders {
            if let Some(o) = self.orders.remove(&n)
                && !o.late
            {
                self.timers.remove(&(o.sent + self.ack_timeout, Timer::Ack(n)));
            }
        }
        if let Some(k) = self.clients.get_mut(&c) {
            k.late = 0;
        }
        for &s in &streams {
            self.forget_stream((c, s), Some(Outcome::Failed), out);
        }
        let n_blocks = blocks.len();
        for b in blocks {
            self.end_block(c, b, now, out);
        }
        self.clients.remove(&c);
        out.push(Out::ClientLog(
            c,
            format!(
                "client {c} ({name}) gone: {} streams and {n_blocks} blocks dropped, plan recomputed",
                streams.len()
            ),
        ));
    }
}

#[cfg(test)]
mod tests;
