//! The records the plan keeps per client, stream, order, `enter` and timer.
use super::ClientId;
use crate::proto::{Device, OrderAction};
use hpf::Priority;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

#[derive(Debug)]
pub(super) struct Client {
    /// Escaped for the log.
    pub name: String,
    /// Its peer's uid (`SO_PEERCRED`).
    pub uid: u32,
    pub streams: BTreeSet<u64>,
    /// Active blocks: id -> (priority, device, when the daemon ends it), in the order entered.
    pub blocks: BTreeMap<u64, (Priority, Device, Instant)>,
    /// The devices its streams and blocks are on, with how many of them each (at most
    /// `Limits::devices_per_client` devices).
    pub devices: BTreeMap<Device, usize>,
    /// Blocks the daemon ended that the client has not left yet (at most its block limit: a
    /// count, not a record per block, so that a client whose blocks keep ending costs no memory).
    pub expired: usize,
    /// Orders outstanding to it.
    pub orders: BTreeSet<u64>,
    /// Of those, how many went late: while any, the client is stalled.
    pub late: usize,
    /// While it holds blocks: when it must have been heard from.
    pub silence: Option<Instant>,
    /// Its `enter`s still waiting.
    pub waits: BTreeSet<u64>,
}

impl Client {
    pub fn new(name: String, uid: u32) -> Self {
        Client {
            name,
            uid,
            streams: BTreeSet::new(),
            blocks: BTreeMap::new(),
            devices: BTreeMap::new(),
            expired: 0,
            orders: BTreeSet::new(),
            late: 0,
            silence: None,
            waits: BTreeSet::new(),
        }
    }

    /// Records that the daemon ended one of its blocks (at most `most` remembered).
    pub fn expire(&mut self, most: usize) {
        self.expired = (self.expired + 1).min(most);
    }

    /// Whether a block had been ended by the daemon and not left yet (and forgets one): the
    /// client's `leave` of it is answered `done`, whatever its priority.
    pub fn forget_expired(&mut self) -> bool {
        if self.expired == 0 {
            return false;
        }
        self.expired -= 1;
        true
    }
}

/// One registered stream: its device, what its client last confirmed, and its order in flight.
#[derive(Debug, Clone, Copy)]
pub(super) struct StreamState {
    pub device: Device,
    pub suspended: bool,
    pub order: Option<u64>,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Order {
    pub client: ClientId,
    pub stream: u64,
    pub action: OrderAction,
    pub sent: Instant,
    /// Not acknowledged within the ack timeout.
    pub late: bool,
}

/// An `enter` waiting for suspends.
#[derive(Debug)]
pub(super) struct Waiting {
    pub client: ClientId,
    pub re: u64,
    pub keys: BTreeSet<(ClientId, u64)>,
    /// When it replies whatever it still waits for (counted late).
    pub deadline: Instant,
    pub suspended: u32,
    pub failed: u32,
    pub late: u32,
}

/// What comes due at an instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Timer {
    /// An order's ack timeout.
    Ack(u64),
    /// A block's longest hold (its client, its id).
    Block(ClientId, u64),
    /// A client holding blocks has been silent too long.
    Silence(ClientId),
    /// An `enter` has waited an ack timeout.
    Wait(u64),
}
