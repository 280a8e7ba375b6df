//! The daemon's state without I/O: hpf's [`Policy`] over every client's streams (keyed by
//! client and the client's own stream id, so a client names only its own), the blocks each
//! client entered, the orders sent and not yet acknowledged, and the `enter`s waiting for their
//! suspends. Each call gets the time and pushes what to send ([`Out`]); the event loop
//! (`super::server`) does the I/O. Pure so that the rules are unit-tested without sockets.
use crate::proto::{Code, Notice, OrderAction, ProtoError, Request};
use hpf::{Action, Policy, Priority};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// A connection's number, from 1, never reused while the daemon runs.
pub type ClientId = u64;

type Key = (ClientId, u64);

/// How much one client may hold.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Registered streams per client.
    pub streams_per_client: usize,
    /// Active blocks per client.
    pub blocks_per_client: usize,
    /// Late orders (not acknowledged in time) after which a client is dropped as unresponsive.
    pub late_per_client: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            streams_per_client: 1024,
            blocks_per_client: 1024,
            late_per_client: 64,
        }
    }
}

/// What the event loop must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Out {
    /// Send `notice` to client `0`.
    Send(ClientId, Notice),
    /// Write a line to the daemon's log.
    Log(String),
}

#[derive(Debug, Default)]
struct Client {
    name: String,
    streams: BTreeSet<u64>,
    blocks: BTreeMap<Priority, usize>,
}

#[derive(Debug, Clone, Copy)]
struct Order {
    client: ClientId,
    stream: u64,
    action: OrderAction,
    sent: Instant,
    /// `None` once reported late.
    deadline: Option<Instant>,
}

#[derive(Debug)]
struct Waiting {
    client: ClientId,
    re: u64,
    orders: BTreeSet<u64>,
    suspended: u32,
    failed: u32,
    late: u32,
}

/// See the [module documentation](self).
#[derive(Debug)]
pub struct Plan {
    policy: Policy<Key>,
    clients: BTreeMap<ClientId, Client>,
    orders: BTreeMap<u64, Order>,
    waits: Vec<Waiting>,
    next_order: u64,
    ack_timeout: Duration,
    limits: Limits,
}

fn hpf_action(a: Action<Key>) -> (Key, OrderAction) {
    match a {
        Action::Suspend(k) => (k, OrderAction::Suspend),
        Action::Resume(k) => (k, OrderAction::Resume),
    }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

impl Plan {
    /// An empty plan; an order not acknowledged within `ack_timeout` is reported and no longer
    /// waited for.
    pub fn new(ack_timeout: Duration, limits: Limits) -> Self {
        Plan {
            policy: Policy::new(),
            clients: BTreeMap::new(),
            orders: BTreeMap::new(),
            waits: Vec::new(),
            next_order: 1,
            ack_timeout,
            limits,
        }
    }

    /// A client said hello.
    pub fn join(&mut self, c: ClientId, name: &str) {
        self.clients.insert(
            c,
            Client {
                name: name.to_owned(),
                ..Client::default()
            },
        );
    }

    /// Whether `c` said hello.
    pub fn knows(&self, c: ClientId) -> bool {
        self.clients.contains_key(&c)
    }

    /// Clients that said hello.
    pub fn clients(&self) -> usize {
        self.clients.len()
    }

    fn who(&self, c: ClientId) -> String {
        self.clients
            .get(&c)
            .map_or_else(|| format!("client {c}"), |k| format!("client {c} ({})", k.name))
    }

    /// Sends the orders that carry `actions` out.
    fn issue(&mut self, actions: Vec<Action<Key>>, now: Instant, out: &mut Vec<Out>) {
        for a in actions {
            let ((client, stream), action) = hpf_action(a);
            let order = self.next_order;
            self.next_order += 1;
            self.orders.insert(
                order,
                Order {
                    client,
                    stream,
                    action,
                    sent: now,
                    deadline: Some(now + self.ack_timeout),
                },
            );
            out.push(Out::Send(client, Notice::Order { order, stream, action }));
        }
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
        let Some(client) = self.clients.get_mut(&c) else {
            return Err(ProtoError::new(Code::OutOfOrder, "the first message must be hello"));
        };
        match req {
            Request::Hello { .. } => return Err(ProtoError::new(Code::OutOfOrder, "hello was said already")),
            Request::Register { stream, priority } => {
                if !client.streams.contains(&stream) && client.streams.len() >= self.limits.streams_per_client {
                    return Err(ProtoError::new(
                        Code::Limit,
                        format!("at most {} streams per client", self.limits.streams_per_client),
                    ));
                }
                client.streams.insert(stream);
                out.push(Out::Send(c, Notice::Done { re: seq }));
                let actions = self.policy.register((c, stream), priority);
                self.issue(actions, now, out);
            }
            Request::Unregister { stream } => {
                if !client.streams.remove(&stream) {
                    return Err(ProtoError::new(
                        Code::UnknownStream,
                        format!("stream {stream} is not registered by this client"),
                    ));
                }
                // Its resume, if any, is the client's own (the protocol's rule): no order.
                let _ = self.policy.unregister((c, stream));
                out.push(Out::Send(c, Notice::Done { re: seq }));
            }
            Request::Enter { priority } => {
                let held: usize = client.blocks.values().sum();
                if held >= self.limits.blocks_per_client {
                    return Err(ProtoError::new(
                        Code::Limit,
                        format!("at most {} active blocks per client", self.limits.blocks_per_client),
                    ));
                }
                *client.blocks.entry(priority).or_insert(0) += 1;
                let actions = self.policy.enter(priority);
                self.issue(actions, now, out);
                // It waits for every suspend still on its way, its own and earlier ones (the
                // block must not start beside a stream that is not stopped yet), but only a
                // stream's latest order: a suspend that a resume already followed is moot.
                let mut latest: BTreeMap<Key, (u64, OrderAction)> = BTreeMap::new();
                for (&n, o) in self.orders.iter().filter(|(_, o)| o.deadline.is_some()) {
                    latest.insert((o.client, o.stream), (n, o.action));
                }
                let orders: BTreeSet<u64> = latest
                    .into_values()
                    .filter(|&(_, a)| a == OrderAction::Suspend)
                    .map(|(n, _)| n)
                    .collect();
                self.waits.push(Waiting {
                    client: c,
                    re: seq,
                    orders,
                    suspended: 0,
                    failed: 0,
                    late: 0,
                });
                self.settle_waits(out);
            }
            Request::Leave { priority } => {
                match client.blocks.get_mut(&priority) {
                    None => {
                        return Err(ProtoError::new(
                            Code::NotActive,
                            format!("this client has no active block of priority {priority}"),
                        ));
                    }
                    Some(1) => {
                        client.blocks.remove(&priority);
                    }
                    Some(n) => *n -= 1,
                }
                out.push(Out::Send(c, Notice::Done { re: seq }));
                // The client's count says a block of `priority` is active, so hpf's is too.
                let actions = self.policy.leave(priority).unwrap_or_default();
                self.issue(actions, now, out);
            }
            Request::Ack { order, ok, error } => {
                let Some(o) = self.orders.get(&order).filter(|o| o.client == c).copied() else {
                    return Err(ProtoError::new(
                        Code::OutOfOrder,
                        format!("order {order} is not outstanding for this client"),
                    ));
                };
                self.orders.remove(&order);
                if o.deadline.is_none() {
                    let late = now.saturating_duration_since(o.sent);
                    out.push(Out::Log(format!(
                        "{}: order {order} ({:?} stream {}) acknowledged {} ms after it was sent",
                        self.who(c),
                        o.action,
                        o.stream,
                        late.as_millis()
                    )));
                }
                if !ok {
                    let action = match o.action {
                        OrderAction::Suspend => Action::Suspend((c, o.stream)),
                        OrderAction::Resume => Action::Resume((c, o.stream)),
                    };
                    self.policy.failed(action);
                    out.push(Out::Log(format!(
                        "{}: {:?} of stream {} failed: {}",
                        self.who(c),
                        o.action,
                        o.stream,
                        error.as_deref().unwrap_or("no reason given")
                    )));
                }
                self.resolve(order, if ok { Outcome::Done } else { Outcome::Failed }, out);
            }
            Request::Ping {} => out.push(Out::Send(c, Notice::Pong { re: seq })),
            Request::Status {} => out.push(Out::Send(c, self.status(seq))),
        }
        Ok(())
    }

    fn status(&self, re: u64) -> Notice {
        Notice::Status {
            re,
            clients: count(self.clients.len()),
            streams: count(self.policy.queues().count()),
            suspended: count(self.policy.queues().filter(|q| q.2).count()),
            blocks: count(self.policy.active_blocks()),
            unacked: count(self.orders.len()),
        }
    }

    /// Counts `order`'s outcome in every `enter` waiting for it.
    fn resolve(&mut self, order: u64, outcome: Outcome, out: &mut Vec<Out>) {
        for w in &mut self.waits {
            if w.orders.remove(&order) {
                match outcome {
                    Outcome::Done => w.suspended += 1,
                    Outcome::Failed => w.failed += 1,
                    Outcome::Late => w.late += 1,
                }
            }
        }
        self.settle_waits(out);
    }

    /// Replies to every `enter` that waits for nothing any more.
    fn settle_waits(&mut self, out: &mut Vec<Out>) {
        self.waits.retain(|w| {
            if !w.orders.is_empty() {
                return true;
            }
            out.push(Out::Send(
                w.client,
                Notice::Entered {
                    re: w.re,
                    suspended: w.suspended,
                    failed: w.failed,
                    late: w.late,
                },
            ));
            false
        });
    }

    /// The connection of `c` ended (EOF, error, SIGKILL, a refusal): its streams leave the
    /// policy (nothing to resume: the client and its workers are gone or resume themselves),
    /// its blocks end, and the others' streams are ordered to follow the new plan.
    pub fn drop_client(&mut self, c: ClientId, now: Instant, out: &mut Vec<Out>) {
        let Some(client) = self.clients.remove(&c) else {
            return;
        };
        for &s in &client.streams {
            let _ = self.policy.unregister((c, s));
        }
        let mine: Vec<u64> = self
            .orders
            .iter()
            .filter(|(_, o)| o.client == c)
            .map(|(&n, _)| n)
            .collect();
        self.waits.retain(|w| w.client != c);
        for n in mine {
            self.orders.remove(&n);
            self.resolve(n, Outcome::Failed, out);
        }
        let blocks: usize = client.blocks.values().sum();
        for (&p, &n) in &client.blocks {
            for _ in 0..n {
                let actions = self.policy.leave(p).unwrap_or_default();
                self.issue(actions, now, out);
            }
        }
        out.push(Out::Log(format!(
            "client {c} ({}) gone: {} streams and {blocks} blocks dropped, plan recomputed",
            client.name,
            client.streams.len()
        )));
    }

    /// Reports the orders whose ack is overdue; the `enter`s waiting for them reply.
    pub fn tick(&mut self, now: Instant, out: &mut Vec<Out>) {
        let overdue: Vec<u64> = self
            .orders
            .iter()
            .filter(|(_, o)| o.deadline.is_some_and(|d| d <= now))
            .map(|(&n, _)| n)
            .collect();
        for n in overdue {
            let Some(o) = self.orders.get_mut(&n) else { continue };
            o.deadline = None;
            let o = *o;
            out.push(Out::Log(format!(
                "{}: order {n} ({:?} stream {}) not acknowledged within {} ms; not waiting for it",
                self.who(o.client),
                o.action,
                o.stream,
                self.ack_timeout.as_millis()
            )));
            self.resolve(n, Outcome::Late, out);
        }
    }

    /// Clients holding [`Limits::late_per_client`] late orders or more: the loop drops them.
    pub fn unresponsive(&self) -> Vec<ClientId> {
        let mut late: BTreeMap<ClientId, usize> = BTreeMap::new();
        for o in self.orders.values().filter(|o| o.deadline.is_none()) {
            *late.entry(o.client).or_insert(0) += 1;
        }
        late.into_iter()
            .filter(|&(_, n)| n >= self.limits.late_per_client)
            .map(|(c, _)| c)
            .collect()
    }

    /// When [`Plan::tick`] has something to do next.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.orders.values().filter_map(|o| o.deadline).min()
    }
}

#[derive(Debug, Clone, Copy)]
enum Outcome {
    Done,
    Failed,
    Late,
}

#[cfg(test)]
mod tests;
