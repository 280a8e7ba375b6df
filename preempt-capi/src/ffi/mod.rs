//! The `extern "C"` functions: the only `unsafe` of this crate (reading the caller's strings,
//! arrays and structs, writing its out-parameters). Every function:
//! - checks its pointers for NULL (`PREEMPT_ERR_INVALID_ARGUMENT`) and its handles against the
//!   handle table (`PREEMPT_ERR_BAD_HANDLE`); everything else it trusts to the caller, as the
//!   `# Safety` sections say;
//! - runs its body under `catch_unwind`: a panic never crosses the boundary, it becomes
//!   `PREEMPT_ERR_PANIC`, and the guards dropped while unwinding resume what they held;
//! - records a failure's message and errno for the calling thread (`preempt_last_error`).
//!
//! Long because it is the C ABI's one unsafe module: every entry point with its `# Safety` in one
//! place, for review.
use crate::handles;
use crate::last_error;
use crate::types::*;
use preempt_api::{
    DeviceSpec, Error, ErrorKind, Level, Lv1Config, Options, QueueDesc, Result, Session, WorkerExe, grace_from_units,
    parse_mechanism,
};
use std::ffi::{CStr, c_char, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;

mod policy;
pub use policy::{
    preempt_helper_idle, preempt_helper_policy_counts, preempt_helper_ready, preempt_helper_schedule_deadline,
    preempt_helper_schedule_laxity, preempt_helper_schedule_share,
};

const VERSION: &CStr = match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
    Ok(v) => v,
    Err(_) => panic!("the package version has no NUL"),
};

fn invalid(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidArgument, msg)
}

/// Runs `f` at the boundary: its error (or a panic) becomes the returned code and the thread's
/// last error. The default panic hook would print: the library replaces it once with a silent
/// one (the payload becomes the message).
fn run(f: impl FnOnce() -> Result<()>) -> c_int {
    static QUIET: Once = Once::new();
    QUIET.call_once(|| std::panic::set_hook(Box::new(|_| {})));
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => preempt_status::PREEMPT_OK as c_int,
        Ok(Err(e)) => last_error::set(&e),
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a non-string panic payload".into());
            last_error::set(&Error::new(
                ErrorKind::Panic,
                format!("internal error (a panic inside libpreempt_kfd, please report it): {what}"),
            ))
        }
    }
}

/// A function of this library, whose address finds the library's file in /proc/self/maps.
fn anchor() {}

/// # Safety
/// `p` is NULL or points to a NUL-terminated string that stays valid during the call.
unsafe fn opt_str<'a>(p: *const c_char, what: &str) -> Result<Option<&'a str>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL, and the caller guarantees a NUL-terminated string valid for the call.
    let c = unsafe { CStr::from_ptr(p) };
    c.to_str()
        .map(Some)
        .map_err(|_| invalid(format!("{what} is not valid UTF-8")))
}

/// # Safety
/// `p` is NULL or valid for one aligned write of a `T`.
unsafe fn put<T>(p: *mut T, v: T, what: &str) -> Result<()> {
    if p.is_null() {
        return Err(invalid(format!("{what} is NULL")));
    }
    // SAFETY: non-NULL, and the caller guarantees it is valid and aligned for a T.
    unsafe { p.write(v) };
    Ok(())
}

/// Copies `s` into `buf` (truncated, always NUL-terminated when `len > 0`).
///
/// # Safety
/// `buf` is NULL or valid for `len` bytes of writes.
unsafe fn put_str(buf: *mut c_char, len: usize, s: &str) {
    if buf.is_null() || len == 0 {
        return;
    }
    let n = s.len().min(len - 1);
    // SAFETY: `buf` is valid for `len` bytes (caller) and `n + 1 <= len`; `s` is a separate
    // Rust string, so the ranges do not overlap.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr().cast::<c_char>(), buf, n);
        buf.add(n).write(0);
    }
}

/// # Safety
/// `p` is valid for reads of `n` `T`s (it may be NULL when `n` is 0).
unsafe fn slice<'a, T>(p: *const T, n: usize, what: &str) -> Result<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(invalid(format!("{what} is NULL")));
    }
    // SAFETY: non-NULL and valid for `n` reads (caller's contract); not mutated during the call.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// # Safety
/// As `preempt_session_open`'s `opts`.
unsafe fn options(opts: *const preempt_options) -> Result<Options> {
    let mut o = Options::default();
    // No default worker found is not an error here: only a host session needs one, and it says so.
    let default_worker = || crate::worker::default_worker((anchor as fn()) as usize).ok();
    if opts.is_null() {
        o.worker = default_worker();
        o.scheduler = preempt_api::sched::scheduler_setting(None)?;
        return Ok(o);
    }
    // SAFETY: non-NULL; the caller guarantees at least the first field is readable.
    let size = unsafe { (*opts).struct_size };
    let want = std::mem::size_of::<preempt_options>();
    let size = usize::try_from(size)
        .ok()
        .filter(|&n| n == want || n == PREEMPT_OPTIONS_V2_SIZE || n == PREEMPT_OPTIONS_V1_SIZE)
        .ok_or_else(|| {
            invalid(format!(
                "preempt_options.struct_size is {size}, this libpreempt_kfd's is {want} (or {PREEMPT_OPTIONS_V2_SIZE}, \
                 before policy, or {PREEMPT_OPTIONS_V1_SIZE}, before scheduler): initialise with preempt_options_init"
            ))
        })?;
    let mut c = default_options();
    // SAFETY: the caller says (struct_size) that `size` bytes of a preempt_options are there, a
    // prefix of this version's (checked just above: at most `want`); the fields past it keep
    // their defaults. Byte copies of plain integers and pointers, into a separate local.
    unsafe { std::ptr::copy_nonoverlapping(opts.cast::<u8>(), (&raw mut c).cast::<u8>(), size) };
    // SAFETY: the string fields are NULL or valid strings (the struct's documented contract).
    let (mechanism, worker, worker_arg, scheduler) = unsafe {
        (
            opt_str(c.mechanism, "mechanism")?,
            opt_str(c.host_worker, "host_worker")?,
            opt_str(c.host_worker_arg, "host_worker_arg")?,
            opt_str(c.scheduler, "scheduler")?,
        )
    };
    o.scheduler = preempt_api::sched::scheduler_setting(scheduler)?;
    o.policy = policy::choice(&c)?;
    if let Some(m) = mechanism {
        o.mechanism = parse_mechanism(m)?;
    }
    o.grace = grace_from_units(c.grace_period)?;
    o.force = c.force != 0;
    o.host_workers = usize::try_from(c.host_workers).unwrap_or(usize::MAX);
    let (t, b) = (
        if c.lv1_threshold == 0 { 8 } else { c.lv1_threshold },
        if c.lv1_batch == 0 { 4 } else { c.lv1_batch },
    );
    o.lv1 = Lv1Config::new(
        usize::try_from(t).unwrap_or(usize::MAX),
        usize::try_from(b).unwrap_or(usize::MAX),
    )
    .map_err(|e| invalid(format!("lv1 settings: {e}")))?;
    let exe = match worker {
        Some(w) => Some(WorkerExe::new(w)),
        None => default_worker(),
    };
    o.worker = match (exe, worker_arg) {
        (Some(e), Some(a)) => Some(e.arg(a)),
        (e, _) => e,
    };
    Ok(o)
}

/// The defaults, `struct_size` this version's.
fn default_options() -> preempt_options {
    preempt_options {
        struct_size: u32::try_from(std::mem::size_of::<preempt_options>()).unwrap_or(u32::MAX),
        force: 0,
        mechanism: std::ptr::null(),
        grace_period: 0,
        host_workers: 0,
        host_worker: std::ptr::null(),
        host_worker_arg: std::ptr::null(),
        lv1_threshold: 0,
        lv1_batch: 0,
        scheduler: std::ptr::null(),
        policy: preempt_policy::PREEMPT_POLICY_HPF as i32,
        policy_k: 1,
        policy_round_ns: PREEMPT_POLICY_ROUND_NS_DEFAULT,
    }
}

/// Fills `*opts` with the defaults (and its `struct_size`).
///
/// # Safety
/// `opts` is NULL (refused) or valid for writing a `preempt_options`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_options_init(opts: *mut preempt_options) -> c_int {
    run(|| {
        // SAFETY: forwarded from this function's contract.
        unsafe { put(opts, default_options(), "opts") }
    })
}

/// Opens a session on `device`: `"host"` (= `"host:0"`; `"host:N"`: host device N, which a
/// scheduler daemon schedules apart), `"hip:N"` (`"hip"` = `"hip:0"`), `"kfd"` (no HIP:
/// bind explicit queue ids) or `"auto"` (hip:0 where it can run, else host). On a GPU the Lv3
/// mechanism is set up now (dbg-trap enables this process's debug trap); with `"auto"` and no
/// usable mechanism the session still opens (streams default to Lv1, see
/// `preempt_session_mechanism`); `"kfd"` then fails with `PREEMPT_ERR_UNAVAILABLE`. With a
/// scheduler daemon (`preempt_options.scheduler`, else `$PREEMPT_SCHEDULER`) the helper calls
/// go to the daemon; one that cannot be reached is `PREEMPT_ERR_SCHEDULER`. With a policy
/// (`preempt_options.policy`) the helper also runs it over the streams scheduled with it; an
/// unknown policy number, a `policy_round_ns` (up) or `policy_k` (kedf) out of range is
/// `PREEMPT_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// `device` is a NUL-terminated string; `opts` is NULL (defaults) or a `preempt_options`
/// initialised by `preempt_options_init`, whose strings are NULL or NUL-terminated; `out` is
/// valid for writing a `preempt_session_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_session_open(
    device: *const c_char,
    opts: *const preempt_options,
    out: *mut preempt_session_t,
) -> c_int {
    run(|| {
        if out.is_null() {
            return Err(invalid("out is NULL"));
        }
        // SAFETY: forwarded from this function's contract.
        let device = unsafe { opt_str(device, "device")? }.ok_or_else(|| invalid("device is NULL"))?;
        let spec: DeviceSpec = device.parse()?;
        // SAFETY: forwarded from this function's contract.
        let o = unsafe { options(opts)? };
        let s = Session::open(spec, o)?;
        let h = handles::add_session(s)?;
        // SAFETY: checked non-NULL above; valid per the contract.
        unsafe { put(out, h, "out") }
    })
}

/// Closes the session: resumes every stream it suspended (helper included), closes its streams
/// (their handles become invalid; commands not yet launched are dropped), waits at most
/// `PREEMPT_CLOSE_WAIT_MS` for the commands in flight, tears the mechanism down (dbg-trap:
/// debugging off). Returns the first failure (e.g. a queue that could not be resumed) after
/// trying everything, else `PREEMPT_ERR_ABANDONED` if commands were still running when the wait
/// ended (the host device kills those workers; a GPU cannot stop a running kernel: its queue
/// runs it out, freed when the process exits); the handle is invalid afterwards either way. In
/// a fork child it releases the child's handles of the parent's session and returns
/// `PREEMPT_OK`, touching nothing of the parent's.
///
/// # Safety
/// None beyond the handle rules of the header (call it once no other thread uses the session).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_session_close(session: preempt_session_t) -> c_int {
    run(|| handles::remove_session(session)?.close())
}

/// The Lv3 mechanism of the session and why: `name` gets `"preempt-queues"`, `"dbg-trap"`,
/// `"update-queue"`, `"sigstop"` (host device) or `"none"`; `why` one line. Both are truncated
/// to their buffer's size (always NUL-terminated); either buffer may be NULL.
///
/// # Safety
/// `name` is NULL or valid for `name_len` bytes; `why` is NULL or valid for `why_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_session_mechanism(
    session: preempt_session_t,
    name: *mut c_char,
    name_len: usize,
    why: *mut c_char,
    why_len: usize,
) -> c_int {
    run(|| {
        let s = handles::session(session)?;
        s.check_process()?;
        let m = s.mechanism();
        // SAFETY: forwarded from this function's contract.
        unsafe {
            put_str(name, name_len, m.name.as_deref().unwrap_or("none"));
            put_str(why, why_len, &m.why);
        }
        Ok(())
    })
}

/// What this machine offers, one line per item (`/dev/kfd`, then each mechanism in `auto` order
/// with its verdict), newline-separated, truncated to `len` (always NUL-terminated). Opens no
/// session; needs no GPU.
///
/// # Safety
/// `buf` is valid for `len` bytes (`len` > 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_probe(buf: *mut c_char, len: usize) -> c_int {
    run(|| {
        if buf.is_null() || len == 0 {
            return Err(invalid("buf is NULL or len is 0"));
        }
        let text = preempt_api::probe().join("\n");
        // SAFETY: forwarded from this function's contract.
        unsafe { put_str(buf, len, &text) };
        Ok(())
    })
}

/// Creates a low-priority stream suspended at `level` (`preempt_level`). Host device: a queue
/// of worker processes fed through the library (`preempt_submit_delay`). GPU: a HIP stream with
/// a hardware queue of its own; at Lv3 its KFD queue is discovered now (see
/// `preempt_stream_queue`); launch on `preempt_stream_handle` with any library.
///
/// # Safety
/// `out` is valid for writing a `preempt_stream_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_stream_create(
    session: preempt_session_t,
    level: c_int,
    out: *mut preempt_stream_t,
) -> c_int {
    run(|| {
        if out.is_null() {
            return Err(invalid("out is NULL"));
        }
        let s = handles::session(session)?;
        let st = s.create_lp_stream(Level::from_number(i64::from(level))?)?;
        let h = handles::add_stream(session, st)?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(out, h, "out") }
    })
}

/// Binds an explicit KFD queue of this process as an Lv3 stream of the session (`"kfd"` and
/// `"hip:N"` sessions). The kernel is not asked here: a suspend of a queue that does not exist
/// fails with `PREEMPT_ERR_QUEUE_REFUSED` (preempt-queues, dbg-trap: INVALID) or
/// `PREEMPT_ERR_KFD` (update-queue: EFAULT).
///
/// # Safety
/// `desc` is valid for reading a `preempt_queue_desc`; `out` for writing a `preempt_stream_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_queue_bind(
    session: preempt_session_t,
    desc: *const preempt_queue_desc,
    out: *mut preempt_stream_t,
) -> c_int {
    run(|| {
        if desc.is_null() || out.is_null() {
            return Err(invalid("desc or out is NULL"));
        }
        // SAFETY: non-NULL and valid for a read (contract).
        let d = unsafe { *desc };
        let s = handles::session(session)?;
        let st = s.bind_queue(QueueDesc {
            queue_id: d.queue_id,
            gpu_id: d.gpu_id,
            ring_base_address: d.ring_base_address,
            ring_size: d.ring_size,
            priority: u32::try_from(d.priority).ok(),
        })?;
        let h = handles::add_stream(session, st)?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(out, h, "out") }
    })
}

/// Closes a stream: resumes it if suspended, leaves the helper, drops its commands not yet
/// launched and waits at most `PREEMPT_CLOSE_WAIT_MS` for those in flight (then
/// `PREEMPT_ERR_ABANDONED`, as `preempt_session_close`). The handle is invalid afterwards. In a
/// fork child it releases the child's handle and returns `PREEMPT_OK`.
///
/// # Safety
/// None beyond the handle rules of the header.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_stream_close(stream: preempt_stream_t) -> c_int {
    run(|| {
        let (s, st) = handles::remove_stream(stream)?;
        s.close_stream(st.id())
    })
}

/// The stream's `hipStream_t` (GPU streams), for launching with any library; NULL on the host
/// device and for a bound queue. Valid until the stream or its session is closed.
///
/// # Safety
/// `out` is valid for writing a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_stream_handle(stream: preempt_stream_t, out: *mut *mut c_void) -> c_int {
    run(|| {
        let (_, st) = handles::stream(stream)?;
        st.check_process()?;
        let p = st
            .handle()
            .map_or(std::ptr::null_mut(), std::ptr::with_exposed_provenance_mut::<c_void>);
        // SAFETY: forwarded from this function's contract.
        unsafe { put(out, p, "out") }
    })
}

/// The KFD queue behind the stream: its id and KFD gpu id; `PREEMPT_ERR_UNSUPPORTED` where
/// there is none (host streams, Lv1 GPU streams).
///
/// # Safety
/// `queue_id` and `gpu_id` are NULL or valid for writing a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_stream_queue(stream: preempt_stream_t, queue_id: *mut u32, gpu_id: *mut u32) -> c_int {
    run(|| {
        let (_, st) = handles::stream(stream)?;
        st.check_process()?;
        let t = st
            .queue()
            .ok_or_else(|| Error::new(ErrorKind::Unsupported, "this stream has no known KFD queue"))?;
        // SAFETY: forwarded from this function's contract (NULL is skipped).
        unsafe {
            if !queue_id.is_null() {
                put(queue_id, t.queue_id, "queue_id")?;
            }
            if !gpu_id.is_null() {
                put(gpu_id, t.gpu_id, "gpu_id")?;
            }
        }
        Ok(())
    })
}

/// Suspends the stream at its level (Lv3: the session's mechanism with its grace period, or
/// SIGSTOP on the host; Lv1: stop the launcher and wait for the stream to drain). When it
/// returns OK, the stream runs nothing, until `preempt_resume`: the suspension is the caller's,
/// whatever the helper (its blocks, its policy) does meanwhile (if the helper holds the stream
/// already, it just stays suspended). `PREEMPT_ERR_ALREADY_SUSPENDED` if the caller holds it
/// already. `latency_ns` (may be NULL) gets the call's wall time.
///
/// # Safety
/// `latency_ns` is NULL or valid for writing a `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_suspend(stream: preempt_stream_t, latency_ns: *mut u64) -> c_int {
    run(|| {
        let (_, st) = handles::stream(stream)?;
        let info = st.suspend()?;
        if !latency_ns.is_null() {
            // SAFETY: forwarded from this function's contract.
            unsafe { put(latency_ns, info.latency_ns, "latency_ns")? };
        }
        Ok(())
    })
}

/// Releases the suspension `preempt_suspend` made; the stream runs again unless the helper
/// holds it too (then it resumes when the helper's block leaves, or when its policy gives it its
/// turn). `PREEMPT_ERR_BUSY` if only the helper holds it (a block of higher priority is active,
/// or the policy holds it suspended), `PREEMPT_ERR_NOT_SUSPENDED` if nothing does.
///
/// # Safety
/// None beyond the handle rules of the header.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_resume(stream: preempt_stream_t) -> c_int {
    run(|| handles::stream(stream)?.1.resume())
}

/// # Safety
/// `set` is valid for reading `n` handles.
unsafe fn streams(
    set: *const preempt_stream_t,
    n: usize,
) -> Result<(Session, Vec<std::sync::Arc<preempt_api::LpStream>>)> {
    // SAFETY: forwarded from the caller's contract.
    let hs = unsafe { slice(set, n, "set")? };
    let mut out = Vec::with_capacity(hs.len());
    let mut session = None;
    for &h in hs {
        let (s, st) = handles::stream(h)?;
        out.push(st);
        session.get_or_insert(s);
    }
    let s = session.ok_or_else(|| invalid("an empty set"))?;
    Ok((s, out))
}

/// Suspends every stream of `set` (`n` handles of one session), or none: on a failure the ones
/// already suspended are resumed and the failure is returned.
///
/// # Safety
/// `set` is valid for reading `n` handles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_suspend_set(set: *const preempt_stream_t, n: usize) -> c_int {
    run(|| {
        // SAFETY: forwarded from this function's contract.
        let (s, v) = unsafe { streams(set, n)? };
        s.suspend_set(&v)
    })
}

/// Resumes every stream of `set`; returns the first failure after trying all.
///
/// # Safety
/// `set` is valid for reading `n` handles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_resume_set(set: *const preempt_stream_t, n: usize) -> c_int {
    run(|| {
        // SAFETY: forwarded from this function's contract.
        let (s, v) = unsafe { streams(set, n)? };
        s.resume_set(&v)
    })
}

/// `*out` = 1 if the stream is suspended (by `preempt_suspend`, the helper's blocks or policy, or
/// several of them), else 0.
///
/// # Safety
/// `out` is valid for writing an `int`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_is_suspended(stream: preempt_stream_t, out: *mut c_int) -> c_int {
    run(|| {
        let (_, st) = handles::stream(stream)?;
        st.check_process()?;
        // SAFETY: forwarded from this function's contract.
        unsafe { put(out, c_int::from(st.is_suspended()), "out") }
    })
}

/// Submits a delay command of `ns` nanoseconds of work through the stream's launcher (host: CPU
/// work on every worker; GPU: the delay kernel on every CU). `id` (may be NULL) gets its id.
/// `ns` above `PREEMPT_MAX_DELAY_NS` is `PREEMPT_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// `id` is NULL or valid for writing a `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_submit_delay(stream: preempt_stream_t, ns: u64, id: *mut u64) -> c_int {
    run(|| {
        let (_, st) = handles::stream(stream)?;
        let n = st.submit_delay(ns)?;
        if !id.is_null() {
            // SAFETY: forwarded from this function's contract.
            unsafe { put(id, n, "id")? };
        }
        Ok(())
    })
}

/// Waits until every command submitted through the library completed. Blocks through an Lv3
/// or Lv2 suspension (until another thread resumes) and through an Lv1 suspension the helper,
/// its policy or the daemon holds (it ends by itself); fails with `PREEMPT_ERR_UNSUPPORTED`
/// under an Lv1 suspension of yours (`preempt_suspend`) with commands pending.
///
/// # Safety
/// None beyond the handle rules of the header.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_synchronize(stream: preempt_stream_t) -> c_int {
    run(|| handles::stream(stream)?.1.synchronize())
}

/// The exactly-once check of the delay commands submitted so far (call after
/// `preempt_synchronize`); problem lines go to `buf` (may be NULL), newline-separated.
///
/// # Safety
/// `out` is valid for writing a `preempt_check_result`; `buf` is NULL or valid for `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_check(
    stream: preempt_stream_t,
    out: *mut preempt_check_result,
    buf: *mut c_char,
    len: usize,
) -> c_int {
    run(|| {
        let (_, st) = handles::stream(stream)?;
        let c = st.check()?;
        let r = preempt_check_result {
            submitted: c.submitted,
            completed: c.completed,
            exactly_once: c.exactly_once,
            finished: u32::from(c.finished),
            problems: u32::try_from(c.problems.len()).unwrap_or(u32::MAX),
        };
        // SAFETY: forwarded from this function's contract.
        unsafe {
            put(out, r, "out")?;
            put_str(buf, len, &c.problems.join("\n"));
        }
        Ok(())
    })
}

/// Submits a delay command of `ns` to the session's high-priority stream (created on first
/// use; nothing suspends it). `ns` above `PREEMPT_MAX_DELAY_NS` is
/// `PREEMPT_ERR_INVALID_ARGUMENT`.
///
/// # Safety
/// None beyond the handle rules of the header.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_hp_submit_delay(session: preempt_session_t, ns: u64) -> c_int {
    run(|| handles::session(session)?.hp_stream()?.submit_delay(ns).map(drop))
}

/// Waits for everything submitted to the session's high-priority stream.
///
/// # Safety
/// None beyond the handle rules of the header.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_hp_synchronize(session: preempt_session_t) -> c_int {
    run(|| handles::session(session)?.hp_stream()?.synchronize())
}

/// Registers the stream with the session's highest-priority-first helper at `priority`
/// (low-priority streams: 0). If a block of higher priority is active, it is suspended now.
///
/// # Safety
/// None beyond the handle rules of the header.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_helper_register(stream: preempt_stream_t, priority: i32) -> c_int {
    run(|| {
        let (s, st) = handles::stream(stream)?;
        s.helper_register(&st, priority)
    })
}

/// Removes the stream from the helper, its blocks and its policy (resuming it if either had
/// suspended it).
///
/// # Safety
/// None beyond the handle rules of the header.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_helper_unregister(stream: preempt_stream_t) -> c_int {
    run(|| {
        let (s, st) = handles::stream(stream)?;
        s.helper_unregister(&st)
    })
}

/// A block of `priority` begins: every registered stream of lower priority is suspended at its
/// level; all of them or, on a failure, none (the error names the stream). A stream the caller
/// suspended by hand stays the caller's: the block holds it too, and it stays suspended after
/// the block until the caller's `preempt_resume`.
///
/// # Safety
/// None beyond the handle rules of the header.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_helper_enter(session: preempt_session_t, priority: i32) -> c_int {
    run(|| handles::session(session)?.helper_enter(priority))
}

/// A block of `priority` ended; call it once the block's GPU work is done. Streams that no
/// other active block outranks resume, unless the caller holds them suspended by hand.
///
/// # Safety
/// None beyond the handle rules of the header.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_helper_leave(session: preempt_session_t, priority: i32) -> c_int {
    run(|| handles::session(session)?.helper_leave(priority))
}

/// Blocks SIGINT and SIGTERM in the calling thread and starts a thread that, on either,
/// resumes every queue suspended through the library and then lets the signal take its course
/// (default action or the application's handler). Call it first in `main`, before any other
/// thread exists. `unblocked` (may be NULL) gets the number of threads that already existed
/// and do not block the signals.
///
/// # Safety
/// `unblocked` is NULL or valid for writing a `uint32_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_resume_on_signals(unblocked: *mut u32) -> c_int {
    run(|| {
        let n = preempt_api::resume_on_signals()?.len();
        if !unblocked.is_null() {
            // SAFETY: forwarded from this function's contract.
            unsafe { put(unblocked, u32::try_from(n).unwrap_or(u32::MAX), "unblocked")? };
        }
        Ok(())
    })
}

/// Runs this process as a host-device worker (reads commands on stdin until EOF): for a
/// program that serves as its own worker (`preempt_options.host_worker_arg`). Returns
/// `PREEMPT_OK` at EOF.
///
/// # Safety
/// None.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_host_worker_main() -> c_int {
    run(|| {
        preempt_api::worker_main()
            .map_err(|e| Error::new(ErrorKind::Device, format!("host worker: {e}")).with_errno_of(&e))
    })
}

trait WithErrnoOf {
    fn with_errno_of(self, e: &std::io::Error) -> Self;
}

impl WithErrnoOf for Error {
    fn with_errno_of(self, e: &std::io::Error) -> Self {
        match e.raw_os_error() {
            Some(n) => self.with_errno(preempt_api::Errno::from_raw(n)),
            None => self,
        }
    }
}

/// What the library reported but could not return (a resume-on-drop that failed, ...),
/// newline-separated into `buf` (truncated); taking them empties the list.
///
/// # Safety
/// `buf` is NULL or valid for `len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn preempt_take_events(buf: *mut c_char, len: usize) -> c_int {
    run(|| {
        let text = preempt_api::take_events().join("\n");
        // SAFETY: forwarded from this function's contract.
        unsafe { put_str(buf, len, &text) };
        Ok(())
    })
}

/// The message of the calling thread's last failure ("" if none). Owned by the library, valid
/// until the thread's next failing call; never NULL.
#[unsafe(no_mangle)]
pub extern "C" fn preempt_last_error() -> *const c_char {
    last_error::message_ptr()
}

/// The errno of the calling thread's last failure (0 if it had none).
#[unsafe(no_mangle)]
pub extern "C" fn preempt_last_errno() -> c_int {
    last_error::errno()
}

/// The name of a status code (`"PREEMPT_ERR_QUEUE_REFUSED"`), `"PREEMPT_ERR_UNKNOWN"` for
/// others. A static string.
#[unsafe(no_mangle)]
pub extern "C" fn preempt_status_name(code: c_int) -> *const c_char {
    preempt_status::ALL
        .into_iter()
        .find(|s| *s as c_int == code)
        .map_or(c"PREEMPT_ERR_UNKNOWN".as_ptr(), |s| s.name().as_ptr())
}

/// The library's version (`"0.1.0"`). A static string.
#[unsafe(no_mangle)]
pub extern "C" fn preempt_version() -> *const c_char {
    VERSION.as_ptr()
}

#[cfg(test)]
mod tests;
