//! The runtime's state: streams, events, modules and memory by handle, created at the first
//! call. Handles are small numbers the program sees as pointers; an unknown one is
//! `hipErrorInvalidHandle`, never a dereference.
use crate::code::{self, Code};
use crate::cus::{CUS_ENV, Cus};
use crate::kernels::{Call, Kernel};
use crate::memory::Memory;
use crate::stream::{Event, Stream};
use host_device::WorkerExe;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

/// Worker processes per stream: `$PREEMPT_STANDIN_WORKERS`, else one per CPU (a kernel sized to
/// fill the device, as the delay kernels are).
pub const WORKERS_ENV: &str = "PREEMPT_STANDIN_WORKERS";
/// The most streams a process may have at once (each is worker processes once used).
pub const MAX_STREAMS: usize = 4096;
/// Handles start here and step by 16 (never 0, the null stream; never a small integer a
/// careless program passes by mistake).
const HANDLE_BASE: usize = 0x5e_0000;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

pub struct Runtime {
    /// The device's CUs when kernels fill them (`PREEMPT_STANDIN_CUS=exclusive`).
    cus: Option<Arc<Cus>>,
    exe: WorkerExe,
    workers: usize,
    pub mem: Arc<Memory>,
    streams: Mutex<HashMap<usize, Arc<Stream>>>,
    null: OnceLock<Arc<Stream>>,
    events: Mutex<HashMap<usize, Arc<Event>>>,
    functions: Mutex<HashMap<usize, Kernel>>,
    next: AtomicUsize,
}

static RT: OnceLock<Result<Runtime, Code>> = OnceLock::new();

/// The runtime, started at the first call; `hipErrorNotInitialized` when no worker program is
/// found (`$PREEMPT_HOST_WORKER`, else `preempt-host-worker` beside the program).
pub fn get() -> Result<&'static Runtime, Code> {
    RT.get_or_init(|| match WorkerExe::find_beside_current_exe() {
        Some(exe) => Ok(Runtime::new(exe)),
        None => {
            crate::warn("no worker program: set PREEMPT_HOST_WORKER to preempt-host-worker's path");
            Err(code::NOT_INITIALIZED)
        }
    })
    .as_ref()
    .map_err(|c| *c)
}

/// Starts the runtime with `exe` as the worker (a Rust test's way in; the first start wins).
pub fn start_with(exe: WorkerExe) -> Result<&'static Runtime, Code> {
    RT.get_or_init(|| Ok(Runtime::new(exe))).as_ref().map_err(|c| *c)
}

impl Runtime {
    fn new(exe: WorkerExe) -> Runtime {
        let workers = std::env::var(WORKERS_ENV)
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .filter(|n| (1..=64).contains(n))
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
        let cus = match std::env::var(CUS_ENV).as_deref() {
            Ok("exclusive") => Some(Arc::new(Cus::default())),
            Ok("shared") | Err(_) => None,
            Ok(v) => {
                crate::warn(&format!("{CUS_ENV}={v:?}: expected shared or exclusive; shared"));
                None
            }
        };
        Runtime {
            cus,
            exe,
            workers,
            mem: Arc::new(Memory::default()),
            streams: Mutex::new(HashMap::new()),
            null: OnceLock::new(),
            events: Mutex::new(HashMap::new()),
            functions: Mutex::new(HashMap::new()),
            next: AtomicUsize::new(0),
        }
    }

    fn handle(&self) -> usize {
        HANDLE_BASE + 16 * self.next.fetch_add(1, Ordering::Relaxed)
    }

    pub fn create_stream(&self, flags: u32, priority: i32) -> Result<usize, Code> {
        if lock(&self.streams).len() >= MAX_STREAMS {
            return Err(code::OUT_OF_MEMORY);
        }
        let h = self.handle();
        let s = Stream::new(
            h as u64,
            self.cus.clone(),
            &self.exe,
            self.workers,
            Arc::clone(&self.mem),
            flags,
            priority,
        );
        lock(&self.streams).insert(h, Arc::new(s));
        Ok(h)
    }

    /// The stream `h` names; 0 is the null stream, started at its first use.
    pub fn stream(&self, h: usize) -> Result<Arc<Stream>, Code> {
        if h == 0 {
            return Ok(self
                .null
                .get_or_init(|| {
                    Arc::new(Stream::new(
                        0,
                        self.cus.clone(),
                        &self.exe,
                        self.workers,
                        Arc::clone(&self.mem),
                        0,
                        0,
                    ))
                })
                .clone());
        }
        lock(&self.streams).get(&h).cloned().ok_or(code::INVALID_HANDLE)
    }

    pub fn destroy_stream(&self, h: usize) -> Result<(), Code> {
        lock(&self.streams).remove(&h).map(drop).ok_or(code::INVALID_HANDLE)
    }

    /// Every stream, the null stream included if it was started.
    pub fn all_streams(&self) -> Vec<Arc<Stream>> {
        let mut v: Vec<_> = lock(&self.streams).values().cloned().collect();
        if let Some(n) = self.null.get() {
            v.push(Arc::clone(n));
        }
        v
    }

    pub fn create_event(&self) -> usize {
        let h = self.handle();
        lock(&self.events).insert(h, Arc::new(Event::default()));
        h
    }

    pub fn event(&self, h: usize) -> Result<Arc<Event>, Code> {
        lock(&self.events).get(&h).cloned().ok_or(code::INVALID_HANDLE)
    }

    pub fn destroy_event(&self, h: usize) -> Result<(), Code> {
        lock(&self.events).remove(&h).map(drop).ok_or(code::INVALID_HANDLE)
    }

    /// A function handle for `name`, `hipErrorNotFound` if the stand-in has no such kernel.
    pub fn function(&self, name: &str) -> Result<usize, Code> {
        let k = Kernel::by_name(name).ok_or(code::NOT_FOUND)?;
        let h = self.handle();
        lock(&self.functions).insert(h, k);
        Ok(h)
    }

    pub fn kernel(&self, f: usize) -> Result<Kernel, Code> {
        lock(&self.functions)
            .get(&f)
            .copied()
            .ok_or(code::INVALID_DEVICE_FUNCTION)
    }

    pub fn launch(&self, stream: usize, call: Call) -> Result<(), Code> {
        self.stream(stream)?.launch(call)
    }

    /// Waits for every stream (`hipDeviceSynchronize`).
    pub fn synchronize(&self) -> Result<(), Code> {
        let mut first = Ok(());
        for s in self.all_streams() {
            let r = s.synchronize();
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}
