//! The ABI's types, as the header shows them (cbindgen copies these definitions and their
//! documentation into `include/preempt_kfd.h`).
#![allow(non_camel_case_types)]
use preempt_api::{ErrorKind, Policy};
use std::ffi::c_char;

/// A session handle (0 is never one).
pub type preempt_session_t = u64;
/// A stream handle (0 is never one).
pub type preempt_stream_t = u64;

/// The longest delay command `preempt_submit_delay` and `preempt_hp_submit_delay` take, in ns
/// (10 s); a longer one is PREEMPT_ERR_INVALID_ARGUMENT.
pub const PREEMPT_MAX_DELAY_NS: u64 = 10_000_000_000;

/// How long `preempt_session_close` and `preempt_stream_close` wait for the work in flight, in
/// ms, before they abandon what still runs (PREEMPT_ERR_ABANDONED).
pub const PREEMPT_CLOSE_WAIT_MS: u32 = 1000;

/// What every function returns: `PREEMPT_OK` (0) or a negative error code. The message of the
/// last failure on the calling thread is `preempt_last_error()`, its errno (0 if none)
/// `preempt_last_errno()`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum preempt_status {
    PREEMPT_OK = 0,
    /// A bad argument: a NULL pointer, an unknown device, mechanism or level name, a queue
    /// descriptor that cannot be restored, an options struct of an unknown size.
    PREEMPT_ERR_INVALID_ARGUMENT = -1,
    /// The handle is not (or no longer) open.
    PREEMPT_ERR_BAD_HANDLE = -2,
    /// The device does not exist or cannot run (no GPU, no HIP runtime, hip:N out of range).
    PREEMPT_ERR_NO_DEVICE = -3,
    /// /dev/kfd is missing or cannot be opened (errno set: ENOENT, EACCES, ...).
    PREEMPT_ERR_NO_KFD = -4,
    /// The asked mechanism or level cannot work here; the message says why.
    PREEMPT_ERR_UNAVAILABLE = -5,
    /// The kernel refused the queue: INVALID (no such queue in this process) or ERROR.
    PREEMPT_ERR_QUEUE_REFUSED = -6,
    /// A KFD call failed (errno set; the message gives amdkfd's meaning of it).
    PREEMPT_ERR_KFD = -7,
    /// The device failed (a HIP call, a host worker process).
    PREEMPT_ERR_DEVICE = -8,
    /// The stream is suspended already.
    PREEMPT_ERR_ALREADY_SUSPENDED = -9,
    /// Resume of a stream that is not suspended.
    PREEMPT_ERR_NOT_SUSPENDED = -10,
    /// Every try to resume failed: the queue may still be suspended.
    PREEMPT_ERR_RESUME_FAILED = -11,
    /// SIGINT/SIGTERM handling is resuming every queue before exit: no new suspend.
    PREEMPT_ERR_SHUTTING_DOWN = -12,
    /// The session is closed.
    PREEMPT_ERR_CLOSED = -13,
    /// The call does not apply to this object (e.g. submitting to a bound KFD queue).
    PREEMPT_ERR_UNSUPPORTED = -14,
    /// A panic inside the library was caught (a bug); what it held was resumed.
    PREEMPT_ERR_PANIC = -15,
    /// A call in a fork child on a session (or stream) the parent opened: a session belongs to
    /// the process that opened it; the child must open its own. Nothing of the parent's is
    /// touched (see FORK in the opening comment).
    PREEMPT_ERR_FORKED = -16,
    /// A hand resume of a stream whose suspension is the helper's (a block of higher priority
    /// is active): it resumes when the block leaves.
    PREEMPT_ERR_BUSY = -17,
    /// Close waited PREEMPT_CLOSE_WAIT_MS for the work in flight and abandoned what still ran
    /// (the host device kills its workers; a GPU runs it out): closed all the same.
    PREEMPT_ERR_ABANDONED = -18,
    /// The scheduler daemon (`preempt_options.scheduler`, `$PREEMPT_SCHEDULER`) could not be
    /// reached, refused a request or did not answer in time; the message says which.
    PREEMPT_ERR_SCHEDULER = -19,
}

impl preempt_status {
    /// Every status, in code order (0, -1, -2, ...).
    pub const ALL: [preempt_status; 20] = [
        preempt_status::PREEMPT_OK,
        preempt_status::PREEMPT_ERR_INVALID_ARGUMENT,
        preempt_status::PREEMPT_ERR_BAD_HANDLE,
        preempt_status::PREEMPT_ERR_NO_DEVICE,
        preempt_status::PREEMPT_ERR_NO_KFD,
        preempt_status::PREEMPT_ERR_UNAVAILABLE,
        preempt_status::PREEMPT_ERR_QUEUE_REFUSED,
        preempt_status::PREEMPT_ERR_KFD,
        preempt_status::PREEMPT_ERR_DEVICE,
        preempt_status::PREEMPT_ERR_ALREADY_SUSPENDED,
        preempt_status::PREEMPT_ERR_NOT_SUSPENDED,
        preempt_status::PREEMPT_ERR_RESUME_FAILED,
        preempt_status::PREEMPT_ERR_SHUTTING_DOWN,
        preempt_status::PREEMPT_ERR_CLOSED,
        preempt_status::PREEMPT_ERR_UNSUPPORTED,
        preempt_status::PREEMPT_ERR_PANIC,
        preempt_status::PREEMPT_ERR_FORKED,
        preempt_status::PREEMPT_ERR_BUSY,
        preempt_status::PREEMPT_ERR_ABANDONED,
        preempt_status::PREEMPT_ERR_SCHEDULER,
    ];

    /// The status of an API error kind.
    pub fn of(kind: ErrorKind) -> Self {
        Self::ALL
            .into_iter()
            .find(|s| *s as i32 == kind.code())
            .unwrap_or(preempt_status::PREEMPT_ERR_PANIC)
    }

    /// Its name as a C string.
    pub fn name(self) -> &'static std::ffi::CStr {
        match self {
            preempt_status::PREEMPT_OK => c"PREEMPT_OK",
            preempt_status::PREEMPT_ERR_INVALID_ARGUMENT => c"PREEMPT_ERR_INVALID_ARGUMENT",
            preempt_status::PREEMPT_ERR_BAD_HANDLE => c"PREEMPT_ERR_BAD_HANDLE",
            preempt_status::PREEMPT_ERR_NO_DEVICE => c"PREEMPT_ERR_NO_DEVICE",
            preempt_status::PREEMPT_ERR_NO_KFD => c"PREEMPT_ERR_NO_KFD",
            preempt_status::PREEMPT_ERR_UNAVAILABLE => c"PREEMPT_ERR_UNAVAILABLE",
            preempt_status::PREEMPT_ERR_QUEUE_REFUSED => c"PREEMPT_ERR_QUEUE_REFUSED",
            preempt_status::PREEMPT_ERR_KFD => c"PREEMPT_ERR_KFD",
            preempt_status::PREEMPT_ERR_DEVICE => c"PREEMPT_ERR_DEVICE",
            preempt_status::PREEMPT_ERR_ALREADY_SUSPENDED => c"PREEMPT_ERR_ALREADY_SUSPENDED",
            preempt_status::PREEMPT_ERR_NOT_SUSPENDED => c"PREEMPT_ERR_NOT_SUSPENDED",
            preempt_status::PREEMPT_ERR_RESUME_FAILED => c"PREEMPT_ERR_RESUME_FAILED",
            preempt_status::PREEMPT_ERR_SHUTTING_DOWN => c"PREEMPT_ERR_SHUTTING_DOWN",
            preempt_status::PREEMPT_ERR_CLOSED => c"PREEMPT_ERR_CLOSED",
            preempt_status::PREEMPT_ERR_UNSUPPORTED => c"PREEMPT_ERR_UNSUPPORTED",
            preempt_status::PREEMPT_ERR_PANIC => c"PREEMPT_ERR_PANIC",
            preempt_status::PREEMPT_ERR_FORKED => c"PREEMPT_ERR_FORKED",
            preempt_status::PREEMPT_ERR_BUSY => c"PREEMPT_ERR_BUSY",
            preempt_status::PREEMPT_ERR_ABANDONED => c"PREEMPT_ERR_ABANDONED",
            preempt_status::PREEMPT_ERR_SCHEDULER => c"PREEMPT_ERR_SCHEDULER",
        }
    }
}

/// The level a low-priority stream is suspended at.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum preempt_level {
    /// Lv3 where the session has an Lv3 mechanism, else Lv1.
    PREEMPT_LEVEL_AUTO = 0,
    /// Progressive launching: suspend stops the library's launcher and waits until everything
    /// on the stream completed (only work submitted through the library is held back).
    PREEMPT_LEVEL_LV1 = 1,
    /// Deactivation: suspend lets the commands running finish and starts no new one; those held
    /// back run after resume. The host device only (its worker processes finish the command they
    /// run); on a GPU (`"hip:N"`, `"kfd"`) `preempt_stream_create` fails with
    /// `PREEMPT_ERR_UNAVAILABLE`: there is no per-queue Lv2 on gfx942 under HWS
    /// (docs/kfd-facts.md#lv2-on-gfx942-no-route-under-hws).
    PREEMPT_LEVEL_LV2 = 2,
    /// Preemption where the work is (CWSR on a GPU, SIGSTOP on the host device).
    PREEMPT_LEVEL_LV3 = 3,
}

/// The helper's time-driven policy (`preempt_options.policy`; docs/c-api.md, "The helper's
/// policy"): besides the highest-priority-first blocks, which every session has, the session
/// runs one of these over the streams scheduled with `preempt_helper_schedule_share`,
/// `_deadline` or `_laxity`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum preempt_policy {
    /// Highest-priority-first blocks only (`preempt_helper_enter`/`_leave`); no stream can be
    /// scheduled. The default.
    PREEMPT_POLICY_HPF = 0,
    /// Utilization partition: one scheduled stream at a time holds the device for
    /// `policy_round_ns x share / sum of shares`, then the ready one that had the least time for
    /// its share; every other scheduled stream is suspended. Streams are scheduled with
    /// `preempt_helper_schedule_share`.
    PREEMPT_POLICY_UP = 1,
    /// K earliest deadlines first: the `policy_k` ready streams due first run (a stream is due
    /// its relative deadline after it became ready); idle ones fill free places. Streams are
    /// scheduled with `preempt_helper_schedule_deadline`.
    PREEMPT_POLICY_KEDF = 2,
    /// Least laxity: a ready stream counts at its laxity priority until its laxity (slack) is
    /// used up, then at its critical priority; streams below the highest ready one are
    /// suspended. Streams are scheduled with `preempt_helper_schedule_laxity`.
    PREEMPT_POLICY_LAXITY = 3,
}

impl preempt_policy {
    /// Every policy with its word (`preempt_api::Policy`, the one table of policy words), in
    /// number order.
    pub const ALL: [(preempt_policy, &'static str); 4] = [
        (preempt_policy::PREEMPT_POLICY_HPF, Policy::HighestFirst.word()),
        (preempt_policy::PREEMPT_POLICY_UP, Policy::Partition.word()),
        (preempt_policy::PREEMPT_POLICY_KEDF, Policy::KEdf.word()),
        (preempt_policy::PREEMPT_POLICY_LAXITY, Policy::Laxity.word()),
    ];
}

/// `preempt_options.policy_round_ns` as `preempt_options_init` sets it: 10 ms (XSched's time
/// slice; `preempt-lat priority --round-ms`'s default).
pub const PREEMPT_POLICY_ROUND_NS_DEFAULT: u64 = 10_000_000;

/// The longest `policy_round_ns`, in ns (10 s: a longer round would starve a stream for that
/// long); 0 or a longer round is PREEMPT_ERR_INVALID_ARGUMENT at open.
pub const PREEMPT_MAX_POLICY_ROUND_NS: u64 = 10_000_000_000;

/// The largest `policy_k` (more streams than a session has); 0 or a larger k is
/// PREEMPT_ERR_INVALID_ARGUMENT at open.
pub const PREEMPT_MAX_POLICY_K: u32 = 4096;

/// The longest relative deadline (`preempt_helper_schedule_deadline`) and laxity
/// (`preempt_helper_schedule_laxity`), in ns: one hour. A stream's work is commands of at most
/// PREEMPT_MAX_DELAY_NS each, scheduled in rounds of at most PREEMPT_MAX_POLICY_ROUND_NS: a
/// deadline or slack of an hour already orders a stream after every realistic one, so a longer
/// value is taken for what it almost always is, a unit mistake, an absolute clock reading or
/// `(uint64_t)-1`, and refused (PREEMPT_ERR_INVALID_ARGUMENT) instead of scheduling the stream
/// last for centuries.
pub const PREEMPT_MAX_POLICY_SPAN_NS: u64 = 3_600_000_000_000;

/// How a session is opened. Initialise with `preempt_options_init` (which sets `struct_size`),
/// then change fields; a NULL options pointer means all defaults. Fields are only ever added at
/// the end: a program built against an earlier header (a smaller `struct_size`: the version
/// without `policy`, or the first one, without `scheduler`) is accepted, the fields it does not
/// have taking their defaults.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct preempt_options {
    /// `sizeof(preempt_options)`, for later versions of this struct.
    pub struct_size: u32,
    /// Nonzero: build the asked mechanism even where the facts gathered say it cannot work
    /// (tests on a GPU-less kernel); its setup can still fail.
    pub force: u32,
    /// `"auto"` (also NULL), `"preempt-queues"`, `"dbg-trap"` or `"update-queue"`; the host
    /// device accepts only `"auto"` (its Lv3 is SIGSTOP/SIGCONT). The old name `"ioctl"` is
    /// refused (INVALID_ARGUMENT, naming `"preempt-queues"`).
    pub mechanism: *const c_char,
    /// The grace period of preempt-queues and dbg-trap suspends: 0 = the firmware's default,
    /// 1..255 = that many units of about 1K GPU clocks (update-queue has none).
    pub grace_period: u32,
    /// Worker processes per host low-priority stream; 0 = every core but one (at least 1).
    pub host_workers: u32,
    /// The host worker program; NULL: `$PREEMPT_HOST_WORKER`, else `preempt-host-worker` beside
    /// libpreempt_kfd (or in `../libexec/preempt-kfd/`), else beside the executable.
    pub host_worker: *const c_char,
    /// NULL, or one argument passed to the worker program first (a program that serves as its
    /// own worker passes e.g. `"--preempt-host-worker"` and calls `preempt_host_worker_main`).
    pub host_worker_arg: *const c_char,
    /// Lv1 launcher: at most this many commands in flight; 0 = 8.
    pub lv1_threshold: u32,
    /// Lv1 launcher: a sync point every this many commands; 0 = 4.
    pub lv1_batch: u32,
    /// The scheduler daemon that schedules the session's helper across the node's processes
    /// (docs/scheduler-daemon.md): `"unix:PATH"` (its socket), `"none"` (the in-process helper
    /// whatever the environment says), or NULL: `$PREEMPT_SCHEDULER` if set (the same words),
    /// else the in-process helper. A daemon that cannot be reached fails the open
    /// (`PREEMPT_ERR_SCHEDULER`); once connected the session reconnects by itself.
    pub scheduler: *const c_char,
    /// The helper's time-driven policy, a `preempt_policy` (`PREEMPT_POLICY_HPF`, 0, by
    /// default: blocks only). Another number is PREEMPT_ERR_INVALID_ARGUMENT at open.
    pub policy: i32,
    /// `PREEMPT_POLICY_KEDF`: how many streams run at once, 1 to PREEMPT_MAX_POLICY_K (default
    /// 1). Read for that policy only.
    pub policy_k: u32,
    /// `PREEMPT_POLICY_UP`: the round (XSched's time slice: one turn of every ready stream), in
    /// ns, 1 to PREEMPT_MAX_POLICY_ROUND_NS (default PREEMPT_POLICY_ROUND_NS_DEFAULT, 10 ms).
    /// Read for that policy only.
    pub policy_round_ns: u64,
}

/// `struct_size` of the first version of `preempt_options` (without `scheduler`), still accepted.
pub const PREEMPT_OPTIONS_V1_SIZE: usize = std::mem::offset_of!(preempt_options, scheduler);

/// `struct_size` of the second version (with `scheduler`, without `policy`), still accepted.
pub const PREEMPT_OPTIONS_V2_SIZE: usize = std::mem::offset_of!(preempt_options, policy);

/// An explicit KFD queue of this process, for `preempt_queue_bind`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct preempt_queue_desc {
    /// The KFD queue id (`/sys/class/kfd/kfd/proc/<pid>/queues/<id>`).
    pub queue_id: u32,
    /// The KFD gpu id; 0 = unknown.
    pub gpu_id: u32,
    /// The ring's address and size in bytes (a power of two); 0 = look them up in
    /// GET_QUEUE_SNAPSHOT (needs this process's debug trap on: dbg-trap sessions). Only
    /// update-queue needs them (it restores the ring from them).
    pub ring_base_address: u64,
    pub ring_size: u32,
    /// KFD priority 0..=15; a negative value = 7 (ROCr's normal priority).
    pub priority: i32,
}

/// What `preempt_check` found about the delay commands submitted through the library.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct preempt_check_result {
    pub submitted: u64,
    pub completed: u64,
    /// Commands that ran exactly once with the right result.
    pub exactly_once: u64,
    /// 0 while commands are pending or in flight (a partial check).
    pub finished: u32,
    /// Number of problem lines (written to the caller's buffer).
    pub problems: u32,
}
