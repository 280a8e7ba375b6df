//! Blocks and timers: entering and leaving blocks, the blocks a lease ends (held too long, or
//! their client silent), the orders not acknowledged in time (their client stalled), and when
//! the loop must call [`Plan::tick`] next.
use super::state::{Timer, Waiting};
use super::{ClientId, Key, Out, Outcome, Plan, count};
use crate::proto::{Code, Device, Notice, ProtoError};
use hpf::Priority;
use std::collections::BTreeSet;
use std::time::Instant;

impl Plan {
    /// Something was heard from `c`: a client holding blocks is not silent.
    pub fn heard(&mut self, c: ClientId, now: Instant) {
        let silence = self.limits.block_silence;
        let Some(k) = self.clients.get_mut(&c) else { return };
        if k.blocks.is_empty() {
            return;
        }
        if let Some(old) = k.silence.replace(now + silence) {
            self.timers.remove(&(old, Timer::Silence(c)));
        }
        self.timers.insert((now + silence, Timer::Silence(c)));
    }

    pub(super) fn enter(
        &mut self,
        c: ClientId,
        seq: u64,
        priority: Priority,
        device: Device,
        now: Instant,
        out: &mut Vec<Out>,
    ) -> Result<(), ProtoError> {
        let held = self.clients.get(&c).map_or(0, |k| k.blocks.len());
        if held >= self.limits.blocks_per_client {
            return Err(ProtoError::new(
                Code::Limit,
                format!("at most {} active blocks per client", self.limits.blocks_per_client),
            ));
        }
        self.use_device(c, device)?;
        let b = self.id();
        self.timers.insert((now + self.limits.max_block, Timer::Block(c, b)));
        if let Some(k) = self.clients.get_mut(&c) {
            k.blocks.insert(b, (priority, device, now + self.limits.max_block));
        }
        self.blocks += 1;
        self.heard(c, now);
        let actions = self.on_device(device, |p| p.enter(priority));
        self.apply(actions, now, out);
        // It waits for every suspend still on its way on its device, its own and earlier ones
        // (the block must not start beside a stream that is not stopped yet), stalled clients'
        // excepted; another device's suspends are no business of its.
        let keys: BTreeSet<Key> = self
            .in_flight
            .range((device, (ClientId::MIN, u64::MIN))..=(device, (ClientId::MAX, u64::MAX)))
            .map(|&(_, k)| k)
            .collect();
        self.wait_work += u64::try_from(keys.len()).unwrap_or(u64::MAX);
        let w = self.id();
        for &k in &keys {
            self.waiters.entry(k).or_default().insert(w);
        }
        // However many acks it waits for (a resume still on its way, then the suspend), it
        // waits no longer than one ack timeout: a client that acknowledges just in time, every
        // time, must not cost every block twice that.
        let deadline = now + self.ack_timeout;
        if !keys.is_empty() {
            self.timers.insert((deadline, Timer::Wait(w)));
        }
        if let Some(k) = self.clients.get_mut(&c) {
            k.waits.insert(w);
        }
        self.waits.insert(
            w,
            Waiting {
                client: c,
                re: seq,
                keys,
                deadline,
                suspended: 0,
                failed: 0,
                late: 0,
            },
        );
        if self.waits.get(&w).is_some_and(|x| x.keys.is_empty()) {
            self.settle(w, out);
        }
        Ok(())
    }

    pub(super) fn leave(
        &mut self,
        c: ClientId,
        seq: u64,
        priority: Priority,
        device: Device,
        now: Instant,
        out: &mut Vec<Out>,
    ) -> Result<(), ProtoError> {
        let Some(k) = self.clients.get_mut(&c) else {
            return Ok(());
        };
        let oldest = k
            .blocks
            .iter()
            .find(|(_, (p, d, _))| *p == priority && *d == device)
            .map(|(&b, _)| b);
        match oldest {
            Some(b) => self.end_block(c, b, now, out),
            // The daemon ended it already (held too long, or its client silent): done.
            None if k.forget_expired() => {}
            None => {
                return Err(ProtoError::new(
                    Code::NotActive,
                    format!("this client has no active block of priority {priority} on {device}"),
                ));
            }
        }
        out.push(Out::Send(c, Notice::Done { re: seq }));
        Ok(())
    }

    /// Ends block `b` of client `c`: the streams it alone kept suspended resume.
    pub(super) fn end_block(&mut self, c: ClientId, b: u64, now: Instant, out: &mut Vec<Out>) {
        let Some(k) = self.clients.get_mut(&c) else { return };
        let Some((priority, device, deadline)) = k.blocks.remove(&b) else {
            return;
        };
        self.timers.remove(&(deadline, Timer::Block(c, b)));
        if k.blocks.is_empty()
            && let Some(s) = k.silence.take()
        {
            self.timers.remove(&(s, Timer::Silence(c)));
        }
        self.blocks -= 1;
        // The client's record says the block is active, so its device's policy does too.
        let actions = self.on_device(device, |p| p.leave(priority).unwrap_or_default());
        self.apply(actions, now, out);
        self.release_device(c, device);
        self.prune(device);
    }

    /// Carries out what is due: late orders (their waits reply; their client is stalled), blocks
    /// held too long, clients silent while holding blocks.
    pub fn tick(&mut self, now: Instant, out: &mut Vec<Out>) {
        while let Some(&(at, timer)) = self.timers.first() {
            if at > now {
                return;
            }
            self.timers.pop_first();
            match timer {
                Timer::Ack(n) => self.late(n, out),
                Timer::Wait(w) => {
                    // Past its ack timeout: what it still waits for counts as late.
                    if let Some(wait) = self.waits.get_mut(&w) {
                        wait.late += count(wait.keys.len());
                        self.settle(w, out);
                    }
                }
                Timer::Block(c, b) => {
                    if let Some(&(p, d, _)) = self.clients.get(&c).and_then(|k| k.blocks.get(&b)) {
                        out.push(Out::ClientLog(c, format!(
                            "{}: a block of priority {p} on {d} was active for more than {} ms; ended (the streams it kept suspended resume)",
                            self.who(c),
                            self.limits.max_block.as_millis()
                        )));
                        self.expire(c, b, now, out);
                    }
                }
                Timer::Silence(c) => {
                    let Some(k) = self.clients.get_mut(&c) else { continue };
                    k.silence = None;
                    let blocks: Vec<u64> = k.blocks.keys().copied().collect();
                    out.push(Out::ClientLog(c, format!(
                        "{}: silent for more than {} ms while holding {} blocks; they end (the streams they kept suspended resume)",
                        self.who(c),
                        self.limits.block_silence.as_millis(),
                        blocks.len()
                    )));
                    for b in blocks {
                        self.expire(c, b, now, out);
                    }
                }
            }
        }
    }

    /// Ends block `b` of client `c` for it (its later `leave` of it is answered `done`).
    pub(super) fn expire(&mut self, c: ClientId, b: u64, now: Instant, out: &mut Vec<Out>) {
        let most = self.limits.blocks_per_client;
        if let Some(k) = self.clients.get_mut(&c) {
            k.expire(most);
        }
        self.end_block(c, b, now, out);
    }

    pub(super) fn late(&mut self, n: u64, out: &mut Vec<Out>) {
        let Some(o) = self.orders.get_mut(&n) else { return };
        o.late = true;
        let o = *o;
        let Some(k) = self.clients.get_mut(&o.client) else {
            return;
        };
        k.late += 1;
        // One line per stall, not per order: a client with a thousand streams that stops
        // acknowledging must not write a thousand lines.
        if k.late == 1 {
            out.push(Out::ClientLog(
                o.client,
                format!(
                    "{}: order {n} ({:?} stream {}) not acknowledged within {} ms; not waiting for it; the client \
                     is stalled: no block waits for its streams until it acknowledges",
                    self.who(o.client),
                    o.action,
                    o.stream,
                    self.ack_timeout.as_millis()
                ),
            ));
            self.refresh_client(o.client, Some(Outcome::Late), out);
        }
    }

    /// When [`Plan::tick`] has something to do next.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.timers.first().map(|&(at, _)| at)
    }
}
