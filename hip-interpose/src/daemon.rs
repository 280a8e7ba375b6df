//! Across processes: with `PREEMPT_SCHEDULER` set, the process is a client of the scheduler
//! daemon (`preempt-sched`, docs/scheduler-daemon.md). Each preemptible stream is registered
//! with its priority and device; the daemon may then hold it (another process's more urgent work
//! runs), which the rule carries out beside its own reasons ([`crate::sched`]). Each priority
//! level above the least with work in flight is reported as a block (`enter` when the level
//! becomes busy, `leave` when it is idle again), so that the daemon suspends other processes'
//! less urgent streams meanwhile. The daemon's fail-safe is the client's: a daemon that dies or
//! stays silent past its lease releases every hold.
use crate::config::LEAST;
use crate::sched::Key;
use preempt_api::sched::proto::Device;
use preempt_api::sched::{ClientOptions, SchedClient, Schedulable};
use preempt_api::{Error, ErrorKind, Priority};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// hpf's priority for a HIP priority: HIP's lower number is more urgent, hpf runs the larger
/// first.
pub fn hpf_priority(hip: i32) -> Priority {
    -hip
}

/// How the daemon's orders reach the rule: hold or release one stream (the interposer's).
#[derive(Clone, Copy)]
pub struct Orders {
    pub hold: fn(Key) -> Result<(), String>,
    pub release: fn(Key) -> Result<(), String>,
}

/// The process's link to the daemon.
pub struct Daemon {
    client: SchedClient,
    device: Device,
    orders: Orders,
    /// The HIP priority levels reported as entered. Its lock also serialises the enter and leave
    /// calls, so that what the daemon was told converges on what is busy.
    entered: Mutex<BTreeSet<i32>>,
}

/// A preemptible stream as the daemon's client sees it. Its suspend and resume go to the
/// process's interposer, which holds the stream through the rule (never while calling the
/// client: the client calls these with its own lock held).
struct StreamObj {
    key: Key,
    orders: Orders,
}

impl Schedulable for StreamObj {
    fn sched_id(&self) -> u64 {
        self.key as u64
    }
    fn sched_label(&self) -> String {
        format!("hip stream {:#x}", self.key)
    }
    fn daemon_suspend(&self) -> preempt_api::Result<()> {
        (self.orders.hold)(self.key).map_err(|e| Error::new(ErrorKind::Device, e))
    }
    fn daemon_resume(&self) -> preempt_api::Result<()> {
        (self.orders.release)(self.key).map_err(|e| Error::new(ErrorKind::Device, e))
    }
}

impl Daemon {
    /// Starts the client on `socket` for `device` (it connects in the background and never
    /// fails for want of a daemon: until one answers, nothing is scheduled across processes).
    pub fn start(socket: &Path, device: Device, orders: Orders) -> Result<Daemon, String> {
        let client =
            SchedClient::start_standalone(socket, device, ClientOptions::default()).map_err(|e| e.to_string())?;
        Ok(Daemon {
            client,
            device,
            orders,
            entered: Mutex::new(BTreeSet::new()),
        })
    }

    pub fn device(&self) -> Device {
        self.device
    }

    /// Registers a preemptible stream at its HIP priority.
    pub fn register(&self, key: Key, hip_priority: i32) {
        let obj = Arc::new(StreamObj {
            key,
            orders: self.orders,
        });
        if let Err(e) = self.client.register_obj(obj, hpf_priority(hip_priority)) {
            eprintln!("preempt-hip: registering stream {key:#x} with the scheduler daemon: {e}");
        }
    }

    pub fn unregister(&self, key: Key) {
        let _ = self.client.unregister_obj(key as u64);
    }

    /// Tells the daemon which priority levels have work in flight now (`busy`: their HIP
    /// priorities; the least is never a block). Called after every change that may alter it,
    /// never with the rule's lock held.
    pub fn sync(&self, busy: impl FnOnce() -> BTreeSet<i32>) {
        let mut entered = lock(&self.entered);
        let busy: BTreeSet<i32> = busy().into_iter().filter(|p| *p < LEAST).collect();
        for p in busy.difference(&entered.clone()) {
            match self.client.enter_on(self.device, hpf_priority(*p)) {
                Ok(_) => {
                    entered.insert(*p);
                }
                Err(e) => eprintln!("preempt-hip: the scheduler daemon refused a block at priority {p}: {e}"),
            }
        }
        for p in entered.clone().difference(&busy) {
            if let Err(e) = self.client.leave_on(self.device, hpf_priority(*p)) {
                eprintln!("preempt-hip: leaving the block at priority {p}: {e}");
            }
            entered.remove(p);
        }
    }

    /// Leaves every block and resumes what the daemon held (process exit).
    pub fn close(&self) {
        self.sync(BTreeSet::new);
        for line in self.client.close() {
            eprintln!("preempt-hip: {line}");
        }
    }
}
