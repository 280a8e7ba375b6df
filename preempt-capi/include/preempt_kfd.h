/*
 * libpreempt_kfd: Lv3 (CWSR queue preemption through /dev/kfd) and Lv1 (progressive launching) for
 * applications on AMD Instinct GPUs, and the same calls over the host device (CPU worker
 * processes standing in for a GPU). Link with -lpreempt_kfd (pkg-config: preempt-kfd).
 *
 * ERRORS. Every function but the four string/number getters returns an int: PREEMPT_OK (0) or a
 * negative preempt_status. The failing call also records, for the calling thread only, a
 * message (preempt_last_error(): one line naming what failed, with the errno and amdkfd's
 * meaning of it where a system call failed) and the errno (preempt_last_errno(), 0 if none).
 * A successful call leaves them as they were. No function panics across the boundary or exits
 * the process: an internal panic is caught and returned as PREEMPT_ERR_PANIC, and every queue
 * it had suspended is resumed while it unwinds. The library prints nothing.
 *
 * HANDLES AND OWNERSHIP. Sessions and streams are handles (numbers, never pointers; 0 is never
 * a handle): a closed or made-up handle gives PREEMPT_ERR_BAD_HANDLE, never undefined
 * behaviour. Messages name a stream by its handle ("stream handle 3"). A session owns its
 * streams: preempt_session_close resumes everything the session suspended (explicit suspends
 * and the helper's), closes every stream (their handles become invalid; commands not yet
 * launched are dropped), waits at most PREEMPT_CLOSE_WAIT_MS for the commands in flight, and
 * tears the Lv3 mechanism down (dbg-trap: this process's debug trap off). A stream's hipStream_t
 * (preempt_stream_handle) belongs to the library: launch on it with any library, never destroy
 * it, and stop using it before closing its stream or session. Strings the library returns are
 * static (preempt_status_name, preempt_version) or owned by the calling thread
 * (preempt_last_error: valid until that thread's next failing call). Strings and structs the
 * caller passes are only read during the call.
 *
 * THREADS. Every function may be called from any thread, concurrently, on the same or different
 * handles: sessions and streams lock internally. A suspend of a stream that is being suspended by
 * another thread waits for it, then fails with PREEMPT_ERR_ALREADY_SUSPENDED. The exceptions:
 * do not close a session (or stream) while another thread is still calling on it (the other
 * call then fails with PREEMPT_ERR_BAD_HANDLE or PREEMPT_ERR_CLOSED, or finishes first);
 * preempt_resume_on_signals must be called first in main, before any other thread exists.
 * Host device: any thread may create a stream, which may outlive that thread. Its worker
 * processes end with the process, not with a thread; they run in a process group of their own,
 * so terminal job control (Ctrl-Z, then fg) cannot continue a suspended stream. After a worker
 * died (killed, OOM), submit, synchronize and suspend on its stream (and resume at Lv3) fail
 * with PREEMPT_ERR_DEVICE naming its pid and how it ended, preempt_check lists it as a problem,
 * no call raises SIGPIPE, and close still works.
 *
 * CLOSE IS BOUNDED. A delay command takes at most PREEMPT_MAX_DELAY_NS (longer:
 * PREEMPT_ERR_INVALID_ARGUMENT). A close (session or stream) waits at most PREEMPT_CLOSE_WAIT_MS
 * for the commands in flight; what still runs then is abandoned and the close returns
 * PREEMPT_ERR_ABANDONED, the handle being closed all the same: the host device kills those
 * workers; a GPU cannot stop a running kernel, so its queue runs it out and its stream is freed
 * when the process exits (work you launched yourself on a hipStream_t: wait for it first).
 *
 * WHO HOLDS A SUSPENSION. A stream's suspension has up to four holders, the caller
 * (preempt_suspend, preempt_suspend_set), the helper (a block of higher priority), the helper's
 * policy (preempt_options.policy, for a stream scheduled with it) and, for a session opened with
 * a scheduler, the scheduler daemon; the stream runs again only when none holds it. So the
 * helper (or its policy, or the daemon) resumes only what it suspended: a stream suspended by
 * hand stays suspended after a block until preempt_resume; preempt_suspend inside a block is
 * the caller's own hold (it outlives the block); preempt_resume of a stream that only the helper
 * or its policy holds is PREEMPT_ERR_BUSY (it resumes when the block leaves, or when the policy
 * gives it its turn).
 *
 * FORK. A session belongs to the process that opened it. In a fork child every call on the
 * parent's sessions and streams fails with PREEMPT_ERR_FORKED and touches nothing of the
 * parent's (no signal to its workers, no write to their pipes, no wait on its children); the
 * child must open its own session (a child of a threaded process: after exec, as POSIX says).
 * preempt_session_close and preempt_stream_close in the child return PREEMPT_OK and release the
 * child's handles only; the memory they held is left to the child's exit or exec (freeing it
 * would run the parent's teardown).
 *
 * WHAT IS GUARANTEED. Nothing is left suspended by the library: not on close, not on a panic
 * inside it, and, after preempt_resume_on_signals, not on SIGINT/SIGTERM (every suspended queue
 * is resumed before the signal takes its course). A process killed by SIGKILL cannot resume
 * anything; the kernel then tears its queues down (host device: its workers are killed).
 *
 * DEVICES. "host": the host device (Lv3 = SIGSTOP/SIGCONT of a stream's worker processes;
 * figures are host figures); "host:N": host device N ("host" = "host:0"), the same but for a
 * scheduler daemon, which schedules each device apart. "hip:N": HIP device N; an Lv3 stream is a HIP stream with a
 * hardware queue of its own, whose KFD queue is found when the stream is created. "kfd": only
 * /dev/kfd, no HIP: bind explicit KFD queue ids (preempt_queue_bind). "auto": hip:0 where it can
 * run, else host. Mechanisms (Lv3 on hip:N and kfd): "auto" (the first usable of preempt-queues,
 * dbg-trap, update-queue: see preempt_session_mechanism for which and why), "preempt-queues" (the
 * project's patched kernel's PREEMPT_QUEUES; "ioctl" before, now refused with its new name),
 * "dbg-trap", "update-queue".
 */


#ifndef PREEMPT_KFD_H
#define PREEMPT_KFD_H

/* Generated by cbindgen from preempt-capi/src: do not edit (scripts/check-capi-header.sh regenerates it). */

#include <stddef.h>
#include <stdint.h>

// The longest delay command `preempt_submit_delay` and `preempt_hp_submit_delay` take, in ns
// (10 s); a longer one is PREEMPT_ERR_INVALID_ARGUMENT.
#define PREEMPT_MAX_DELAY_NS 10000000000

// How long `preempt_session_close` and `preempt_stream_close` wait for the work in flight, in
// ms, before they abandon what still runs (PREEMPT_ERR_ABANDONED).
#define PREEMPT_CLOSE_WAIT_MS 1000

// `preempt_options.policy_round_ns` as `preempt_options_init` sets it: 10 ms (XSched's time
// slice; `preempt-lat priority --round-ms`'s default).
#define PREEMPT_POLICY_ROUND_NS_DEFAULT 10000000

// The longest `policy_round_ns`, in ns (10 s: a longer round would starve a stream for that
// long); 0 or a longer round is PREEMPT_ERR_INVALID_ARGUMENT at open.
#define PREEMPT_MAX_POLICY_ROUND_NS 10000000000

// The largest `policy_k` (more streams than a session has); 0 or a larger k is
// PREEMPT_ERR_INVALID_ARGUMENT at open.
#define PREEMPT_MAX_POLICY_K 4096

// The longest relative deadline (`preempt_helper_schedule_deadline`) and laxity
// (`preempt_helper_schedule_laxity`), in ns: one hour. A stream's work is commands of at most
// PREEMPT_MAX_DELAY_NS each, scheduled in rounds of at most PREEMPT_MAX_POLICY_ROUND_NS: a
// deadline or slack of an hour already orders a stream after every realistic one, so a longer
// value is taken for what it almost always is, a unit mistake, an absolute clock reading or
// `(uint64_t)-1`, and refused (PREEMPT_ERR_INVALID_ARGUMENT) instead of scheduling the stream
// last for centuries.
#define PREEMPT_MAX_POLICY_SPAN_NS 3600000000000

// What every function returns: `PREEMPT_OK` (0) or a negative error code. The message of the
// last failure on the calling thread is `preempt_last_error()`, its errno (0 if none)
// `preempt_last_errno()`.
typedef enum preempt_status {
  PREEMPT_OK = 0,
  // A bad argument: a NULL pointer, an unknown device, mechanism or level name, a queue
  // descriptor that cannot be restored, an options struct of an unknown size.
  PREEMPT_ERR_INVALID_ARGUMENT = -1,
  // The handle is not (or no longer) open.
  PREEMPT_ERR_BAD_HANDLE = -2,
  // The device does not exist or cannot run (no GPU, no HIP runtime, hip:N out of range).
  PREEMPT_ERR_NO_DEVICE = -3,
  // /dev/kfd is missing or cannot be opened (errno set: ENOENT, EACCES, ...).
  PREEMPT_ERR_NO_KFD = -4,
  // The asked mechanism or level cannot work here; the message says why.
  PREEMPT_ERR_UNAVAILABLE = -5,
  // The kernel refused the queue: INVALID (no such queue in this process) or ERROR.
  PREEMPT_ERR_QUEUE_REFUSED = -6,
  // A KFD call failed (errno set; the message gives amdkfd's meaning of it).
  PREEMPT_ERR_KFD = -7,
  // The device failed (a HIP call, a host worker process).
  PREEMPT_ERR_DEVICE = -8,
  // The stream is suspended already.
  PREEMPT_ERR_ALREADY_SUSPENDED = -9,
  // Resume of a stream that is not suspended.
  PREEMPT_ERR_NOT_SUSPENDED = -10,
  // Every try to resume failed: the queue may still be suspended.
  PREEMPT_ERR_RESUME_FAILED = -11,
  // SIGINT/SIGTERM handling is resuming every queue before exit: no new suspend.
  PREEMPT_ERR_SHUTTING_DOWN = -12,
  // The session is closed.
  PREEMPT_ERR_CLOSED = -13,
  // The call does not apply to this object (e.g. submitting to a bound KFD queue).
  PREEMPT_ERR_UNSUPPORTED = -14,
  // A panic inside the library was caught (a bug); what it held was resumed.
  PREEMPT_ERR_PANIC = -15,
  // A call in a fork child on a session (or stream) the parent opened: a session belongs to
  // the process that opened it; the child must open its own. Nothing of the parent's is
  // touched (see FORK in the opening comment).
  PREEMPT_ERR_FORKED = -16,
  // A hand resume of a stream whose suspension is the helper's (a block of higher priority
  // is active): it resumes when the block leaves.
  PREEMPT_ERR_BUSY = -17,
  // Close waited PREEMPT_CLOSE_WAIT_MS for the work in flight and abandoned what still ran
  // (the host device kills its workers; a GPU runs it out): closed all the same.
  PREEMPT_ERR_ABANDONED = -18,
  // The scheduler daemon (`preempt_options.scheduler`, `$PREEMPT_SCHEDULER`) could not be
  // reached, refused a request or did not answer in time; the message says which.
  PREEMPT_ERR_SCHEDULER = -19,
} preempt_status;

// The level a low-priority stream is suspended at.
typedef enum preempt_level {
  // Lv3 where the session has an Lv3 mechanism, else Lv1.
  PREEMPT_LEVEL_AUTO = 0,
  // Progressive launching: suspend stops the library's launcher and waits until everything
  // on the stream completed (only work submitted through the library is held back).
  PREEMPT_LEVEL_LV1 = 1,
  // Deactivation: suspend lets the commands running finish and starts no new one; those held
  // back run after resume. The host device only (its worker processes finish the command they
  // run); on a GPU (`"hip:N"`, `"kfd"`) `preempt_stream_create` fails with
  // `PREEMPT_ERR_UNAVAILABLE`: there is no per-queue Lv2 on gfx942 under HWS
  // (docs/kfd-facts.md#lv2-on-gfx942-no-route-under-hws).
  PREEMPT_LEVEL_LV2 = 2,
  // Preemption where the work is (CWSR on a GPU, SIGSTOP on the host device).
  PREEMPT_LEVEL_LV3 = 3,
} preempt_level;

// The helper's time-driven policy (`preempt_options.policy`; docs/c-api.md, "The helper's
// policy"): besides the highest-priority-first blocks, which every session has, the session
// runs one of these over the streams scheduled with `preempt_helper_schedule_share`,
// `_deadline` or `_laxity`.
typedef enum preempt_policy {
  // Highest-priority-first blocks only (`preempt_helper_enter`/`_leave`); no stream can be
  // scheduled. The default.
  PREEMPT_POLICY_HPF = 0,
  // Utilization partition: one scheduled stream at a time holds the device for
  // `policy_round_ns x share / sum of shares`, then the ready one that had the least time for
  // its share; every other scheduled stream is suspended. Streams are scheduled with
  // `preempt_helper_schedule_share`.
  PREEMPT_POLICY_UP = 1,
  // K earliest deadlines first: the `policy_k` ready streams due first run (a stream is due
  // its relative deadline after it became ready); idle ones fill free places. Streams are
  // scheduled with `preempt_helper_schedule_deadline`.
  PREEMPT_POLICY_KEDF = 2,
  // Least laxity: a ready stream counts at its laxity priority until its laxity (slack) is
  // used up, then at its critical priority; streams below the highest ready one are
  // suspended. Streams are scheduled with `preempt_helper_schedule_laxity`.
  PREEMPT_POLICY_LAXITY = 3,
} preempt_policy;

// How a session is opened. Initialise with `preempt_options_init` (which sets `struct_size`),
// then change fields; a NULL options pointer means all defaults. Fields are only ever added at
// the end: a program built against an earlier header (a smaller `struct_size`: the version
// without `policy`, or the first one, without `scheduler`) is accepted, the fields it does not
// have taking their defaults.
typedef struct preempt_options {
  // `sizeof(preempt_options)`, for later versions of this struct.
  uint32_t struct_size;
  // Nonzero: build the asked mechanism even where the facts gathered say it cannot work
  // (tests on a GPU-less kernel); its setup can still fail.
  uint32_t force;
  // `"auto"` (also NULL), `"preempt-queues"`, `"dbg-trap"` or `"update-queue"`; the host
  // device accepts only `"auto"` (its Lv3 is SIGSTOP/SIGCONT). The old name `"ioctl"` is
  // refused (INVALID_ARGUMENT, naming `"preempt-queues"`).
  const char *mechanism;
  // The grace period of preempt-queues and dbg-trap suspends: 0 = the firmware's default,
  // 1..255 = that many units of about 1K GPU clocks (update-queue has none).
  uint32_t grace_period;
  // Worker processes per host low-priority stream; 0 = every core but one (at least 1).
  uint32_t host_workers;
  // The host worker program; NULL: `$PREEMPT_HOST_WORKER`, else `preempt-host-worker` beside
  // libpreempt_kfd (or in `../libexec/preempt-kfd/`), else beside the executable.
  const char *host_worker;
  // NULL, or one argument passed to the worker program first (a program that serves as its
  // own worker passes e.g. `"--preempt-host-worker"` and calls `preempt_host_worker_main`).
  const char *host_worker_arg;
  // Lv1 launcher: at most this many commands in flight; 0 = 8.
  uint32_t lv1_threshold;
  // Lv1 launcher: a sync point every this many commands; 0 = 4.
  uint32_t lv1_batch;
  // The scheduler daemon that schedules the session's helper across the node's processes
  // (docs/scheduler-daemon.md): `"unix:PATH"` (its socket), `"none"` (the in-process helper
  // whatever the environment says), or NULL: `$PREEMPT_SCHEDULER` if set (the same words),
  // else the in-process helper. A daemon that cannot be reached fails the open
  // (`PREEMPT_ERR_SCHEDULER`); once connected the session reconnects by itself.
  const char *scheduler;
  // The helper's time-driven policy, a `preempt_policy` (`PREEMPT_POLICY_HPF`, 0, by
  // default: blocks only). Another number is PREEMPT_ERR_INVALID_ARGUMENT at open.
  int32_t policy;
  // `PREEMPT_POLICY_KEDF`: how many streams run at once, 1 to PREEMPT_MAX_POLICY_K (default
  // 1). Read for that policy only.
  uint32_t policy_k;
  // `PREEMPT_POLICY_UP`: the round (XSched's time slice: one turn of every ready stream), in
  // ns, 1 to PREEMPT_MAX_POLICY_ROUND_NS (default PREEMPT_POLICY_ROUND_NS_DEFAULT, 10 ms).
  // Read for that policy only.
  uint64_t policy_round_ns;
} preempt_options;

// A session handle (0 is never one).
typedef uint64_t preempt_session_t;

// A stream handle (0 is never one).
typedef uint64_t preempt_stream_t;

// An explicit KFD queue of this process, for `preempt_queue_bind`.
typedef struct preempt_queue_desc {
  // The KFD queue id (`/sys/class/kfd/kfd/proc/<pid>/queues/<id>`).
  uint32_t queue_id;
  // The KFD gpu id; 0 = unknown.
  uint32_t gpu_id;
  // The ring's address and size in bytes (a power of two); 0 = look them up in
  // GET_QUEUE_SNAPSHOT (needs this process's debug trap on: dbg-trap sessions). Only
  // update-queue needs them (it restores the ring from them).
  uint64_t ring_base_address;
  uint32_t ring_size;
  // KFD priority 0..=15; a negative value = 7 (ROCr's normal priority).
  int32_t priority;
} preempt_queue_desc;

// What `preempt_check` found about the delay commands submitted through the library.
typedef struct preempt_check_result {
  uint64_t submitted;
  uint64_t completed;
  // Commands that ran exactly once with the right result.
  uint64_t exactly_once;
  // 0 while commands are pending or in flight (a partial check).
  uint32_t finished;
  // Number of problem lines (written to the caller's buffer).
  uint32_t problems;
} preempt_check_result;

// Every status, in code order (0, -1, -2, ...).
#define preempt_status_ALL { PREEMPT_OK, PREEMPT_ERR_INVALID_ARGUMENT, PREEMPT_ERR_BAD_HANDLE, PREEMPT_ERR_NO_DEVICE, PREEMPT_ERR_NO_KFD, PREEMPT_ERR_UNAVAILABLE, PREEMPT_ERR_QUEUE_REFUSED, PREEMPT_ERR_KFD, PREEMPT_ERR_DEVICE, PREEMPT_ERR_ALREADY_SUSPENDED, PREEMPT_ERR_NOT_SUSPENDED, PREEMPT_ERR_RESUME_FAILED, PREEMPT_ERR_SHUTTING_DOWN, PREEMPT_ERR_CLOSED, PREEMPT_ERR_UNSUPPORTED, PREEMPT_ERR_PANIC, PREEMPT_ERR_FORKED, PREEMPT_ERR_BUSY, PREEMPT_ERR_ABANDONED, PREEMPT_ERR_SCHEDULER, }

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

// Fills `*opts` with the defaults (and its `struct_size`).
//
// # Safety
// `opts` is NULL (refused) or valid for writing a `preempt_options`.
int preempt_options_init(struct preempt_options *opts);

// Opens a session on `device`: `"host"` (= `"host:0"`; `"host:N"`: host device N, which a
// scheduler daemon schedules apart), `"hip:N"` (`"hip"` = `"hip:0"`), `"kfd"` (no HIP:
// bind explicit queue ids) or `"auto"` (hip:0 where it can run, else host). On a GPU the Lv3
// mechanism is set up now (dbg-trap enables this process's debug trap); with `"auto"` and no
// usable mechanism the session still opens (streams default to Lv1, see
// `preempt_session_mechanism`); `"kfd"` then fails with `PREEMPT_ERR_UNAVAILABLE`. With a
// scheduler daemon (`preempt_options.scheduler`, else `$PREEMPT_SCHEDULER`) the helper calls
// go to the daemon; one that cannot be reached is `PREEMPT_ERR_SCHEDULER`. With a policy
// (`preempt_options.policy`) the helper also runs it over the streams scheduled with it; an
// unknown policy number, a `policy_round_ns` (up) or `policy_k` (kedf) out of range is
// `PREEMPT_ERR_INVALID_ARGUMENT`.
//
// # Safety
// `device` is a NUL-terminated string; `opts` is NULL (defaults) or a `preempt_options`
// initialised by `preempt_options_init`, whose strings are NULL or NUL-terminated; `out` is
// valid for writing a `preempt_session_t`.
int preempt_session_open(const char *device,
                         const struct preempt_options *opts,
                         preempt_session_t *out);

// Closes the session: resumes every stream it suspended (helper included), closes its streams
// (their handles become invalid; commands not yet launched are dropped), waits at most
// `PREEMPT_CLOSE_WAIT_MS` for the commands in flight, tears the mechanism down (dbg-trap:
// debugging off). Returns the first failure (e.g. a queue that could not be resumed) after
// trying everything, else `PREEMPT_ERR_ABANDONED` if commands were still running when the wait
// ended (the host device kills those workers; a GPU cannot stop a running kernel: its queue
// runs it out, freed when the process exits); the handle is invalid afterwards either way. In
// a fork child it releases the child's handles of the parent's session and returns
// `PREEMPT_OK`, touching nothing of the parent's.
//
// # Safety
// None beyond the handle rules of the header (call it once no other thread uses the session).
int preempt_session_close(preempt_session_t session);

// The Lv3 mechanism of the session and why: `name` gets `"preempt-queues"`, `"dbg-trap"`,
// `"update-queue"`, `"sigstop"` (host device) or `"none"`; `why` one line. Both are truncated
// to their buffer's size (always NUL-terminated); either buffer may be NULL.
//
// # Safety
// `name` is NULL or valid for `name_len` bytes; `why` is NULL or valid for `why_len` bytes.
int preempt_session_mechanism(preempt_session_t session,
                              char *name,
                              size_t name_len,
                              char *why,
                              size_t why_len);

// What this machine offers, one line per item (`/dev/kfd`, then each mechanism in `auto` order
// with its verdict), newline-separated, truncated to `len` (always NUL-terminated). Opens no
// session; needs no GPU.
//
// # Safety
// `buf` is valid for `len` bytes (`len` > 0).
int preempt_probe(char *buf, size_t len);

// Creates a low-priority stream suspended at `level` (`preempt_level`). Host device: a queue
// of worker processes fed through the library (`preempt_submit_delay`). GPU: a HIP stream with
// a hardware queue of its own; at Lv3 its KFD queue is discovered now (see
// `preempt_stream_queue`); launch on `preempt_stream_handle` with any library.
//
// # Safety
// `out` is valid for writing a `preempt_stream_t`.
int preempt_stream_create(preempt_session_t session, int level, preempt_stream_t *out);

// Binds an explicit KFD queue of this process as an Lv3 stream of the session (`"kfd"` and
// `"hip:N"` sessions). The kernel is not asked here: a suspend of a queue that does not exist
// fails with `PREEMPT_ERR_QUEUE_REFUSED` (preempt-queues, dbg-trap: INVALID) or
// `PREEMPT_ERR_KFD` (update-queue: EFAULT).
//
// # Safety
// `desc` is valid for reading a `preempt_queue_desc`; `out` for writing a `preempt_stream_t`.
int preempt_queue_bind(preempt_session_t session,
                       const struct preempt_queue_desc *desc,
                       preempt_stream_t *out);

// Closes a stream: resumes it if suspended, leaves the helper, drops its commands not yet
// launched and waits at most `PREEMPT_CLOSE_WAIT_MS` for those in flight (then
// `PREEMPT_ERR_ABANDONED`, as `preempt_session_close`). The handle is invalid afterwards. In a
// fork child it releases the child's handle and returns `PREEMPT_OK`.
//
// # Safety
// None beyond the handle rules of the header.
int preempt_stream_close(preempt_stream_t stream);

// The stream's `hipStream_t` (GPU streams), for launching with any library; NULL on the host
// device and for a bound queue. Valid until the stream or its session is closed.
//
// # Safety
// `out` is valid for writing a pointer.
int preempt_stream_handle(preempt_stream_t stream, void **out);

// The KFD queue behind the stream: its id and KFD gpu id; `PREEMPT_ERR_UNSUPPORTED` where
// there is none (host streams, Lv1 GPU streams).
//
// # Safety
// `queue_id` and `gpu_id` are NULL or valid for writing a `uint32_t`.
int preempt_stream_queue(preempt_stream_t stream, uint32_t *queue_id, uint32_t *gpu_id);

// Suspends the stream at its level (Lv3: the session's mechanism with its grace period, or
// SIGSTOP on the host; Lv1: stop the launcher and wait for the stream to drain). When it
// returns OK, the stream runs nothing, until `preempt_resume`: the suspension is the caller's,
// whatever the helper (its blocks, its policy) does meanwhile (if the helper holds the stream
// already, it just stays suspended). `PREEMPT_ERR_ALREADY_SUSPENDED` if the caller holds it
// already. `latency_ns` (may be NULL) gets the call's wall time.
//
// # Safety
// `latency_ns` is NULL or valid for writing a `uint64_t`.
int preempt_suspend(preempt_stream_t stream, uint64_t *latency_ns);

// Releases the suspension `preempt_suspend` made; the stream runs again unless the helper
// holds it too (then it resumes when the helper's block leaves, or when its policy gives it its
// turn). `PREEMPT_ERR_BUSY` if only the helper holds it (a block of higher priority is active,
// or the policy holds it suspended), `PREEMPT_ERR_NOT_SUSPENDED` if nothing does.
//
// # Safety
// None beyond the handle rules of the header.
int preempt_resume(preempt_stream_t stream);

// Suspends every stream of `set` (`n` handles of one session), or none: on a failure the ones
// already suspended are resumed and the failure is returned.
//
// # Safety
// `set` is valid for reading `n` handles.
int preempt_suspend_set(const preempt_stream_t *set, size_t n);

// Resumes every stream of `set`; returns the first failure after trying all.
//
// # Safety
// `set` is valid for reading `n` handles.
int preempt_resume_set(const preempt_stream_t *set, size_t n);

// `*out` = 1 if the stream is suspended (by `preempt_suspend`, the helper's blocks or policy, or
// several of them), else 0.
//
// # Safety
// `out` is valid for writing an `int`.
int preempt_is_suspended(preempt_stream_t stream, int *out);

// Submits a delay command of `ns` nanoseconds of work through the stream's launcher (host: CPU
// work on every worker; GPU: the delay kernel on every CU). `id` (may be NULL) gets its id.
// `ns` above `PREEMPT_MAX_DELAY_NS` is `PREEMPT_ERR_INVALID_ARGUMENT`.
//
// # Safety
// `id` is NULL or valid for writing a `uint64_t`.
int preempt_submit_delay(preempt_stream_t stream, uint64_t ns, uint64_t *id);

// Waits until every command submitted through the library completed. Blocks through an Lv3
// or Lv2 suspension (until another thread resumes) and through an Lv1 suspension the helper,
// its policy or the daemon holds (it ends by itself); fails with `PREEMPT_ERR_UNSUPPORTED`
// under an Lv1 suspension of yours (`preempt_suspend`) with commands pending.
//
// # Safety
// None beyond the handle rules of the header.
int preempt_synchronize(preempt_stream_t stream);

// The exactly-once check of the delay commands submitted so far (call after
// `preempt_synchronize`); problem lines go to `buf` (may be NULL), newline-separated.
//
// # Safety
// `out` is valid for writing a `preempt_check_result`; `buf` is NULL or valid for `len` bytes.
int preempt_check(preempt_stream_t stream, struct preempt_check_result *out, char *buf, size_t len);

// Submits a delay command of `ns` to the session's high-priority stream (created on first
// use; nothing suspends it). `ns` above `PREEMPT_MAX_DELAY_NS` is
// `PREEMPT_ERR_INVALID_ARGUMENT`.
//
// # Safety
// None beyond the handle rules of the header.
int preempt_hp_submit_delay(preempt_session_t session, uint64_t ns);

// Waits for everything submitted to the session's high-priority stream.
//
// # Safety
// None beyond the handle rules of the header.
int preempt_hp_synchronize(preempt_session_t session);

// Registers the stream with the session's highest-priority-first helper at `priority`
// (low-priority streams: 0). If a block of higher priority is active, it is suspended now.
//
// # Safety
// None beyond the handle rules of the header.
int preempt_helper_register(preempt_stream_t stream, int32_t priority);

// Removes the stream from the helper, its blocks and its policy (resuming it if either had
// suspended it).
//
// # Safety
// None beyond the handle rules of the header.
int preempt_helper_unregister(preempt_stream_t stream);

// A block of `priority` begins: every registered stream of lower priority is suspended at its
// level; all of them or, on a failure, none (the error names the stream). A stream the caller
// suspended by hand stays the caller's: the block holds it too, and it stays suspended after
// the block until the caller's `preempt_resume`.
//
// # Safety
// None beyond the handle rules of the header.
int preempt_helper_enter(preempt_session_t session, int32_t priority);

// A block of `priority` ended; call it once the block's GPU work is done. Streams that no
// other active block outranks resume, unless the caller holds them suspended by hand.
//
// # Safety
// None beyond the handle rules of the header.
int preempt_helper_leave(preempt_session_t session, int32_t priority);

// Blocks SIGINT and SIGTERM in the calling thread and starts a thread that, on either,
// resumes every queue suspended through the library and then lets the signal take its course
// (default action or the application's handler). Call it first in `main`, before any other
// thread exists. `unblocked` (may be NULL) gets the number of threads that already existed
// and do not block the signals.
//
// # Safety
// `unblocked` is NULL or valid for writing a `uint32_t`.
int preempt_resume_on_signals(uint32_t *unblocked);

// Runs this process as a host-device worker (reads commands on stdin until EOF): for a
// program that serves as its own worker (`preempt_options.host_worker_arg`). Returns
// `PREEMPT_OK` at EOF.
//
// # Safety
// None.
int preempt_host_worker_main(void);

// What the library reported but could not return (a resume-on-drop that failed, ...),
// newline-separated into `buf` (truncated); taking them empties the list.
//
// # Safety
// `buf` is NULL or valid for `len` bytes.
int preempt_take_events(char *buf, size_t len);

// The message of the calling thread's last failure ("" if none). Owned by the library, valid
// until the thread's next failing call; never NULL.
const char *preempt_last_error(void);

// The errno of the calling thread's last failure (0 if it had none).
int preempt_last_errno(void);

// The name of a status code (`"PREEMPT_ERR_QUEUE_REFUSED"`), `"PREEMPT_ERR_UNKNOWN"` for
// others. A static string.
const char *preempt_status_name(int code);

// The library's version (`"0.1.0"`). A static string.
const char *preempt_version(void);

// Schedules the stream with the session's utilization partition (`PREEMPT_POLICY_UP`) at
// `share` (its weight against the other scheduled streams': 3 and 1, or 75 and 25; again: a new
// share). From now on the policy suspends and resumes it, a hold of its own beside the caller's
// and the blocks': every scheduled stream but the one whose turn it is stays suspended, idle
// ones included. A delay command submitted through the library makes it ready; work launched
// on its handle is announced with `preempt_helper_ready`. The session's policy thread starts
// with the first scheduled stream. `PREEMPT_ERR_INVALID_ARGUMENT`: a share of 0, a session
// without a policy, or one with another policy (which schedules with a deadline or a laxity).
//
// # Safety
// None beyond the handle rules of the header.
int preempt_helper_schedule_share(preempt_stream_t stream, uint32_t share);

// Schedules the stream with the session's K-EDF policy (`PREEMPT_POLICY_KEDF`) at the relative
// deadline `deadline_ns` (its work is due that long after it becomes ready; again: a new
// deadline). The `policy_k` ready streams due first run, the others are suspended by the policy
// (a hold of its own, as `preempt_helper_schedule_share`'s). `PREEMPT_ERR_INVALID_ARGUMENT`: a
// deadline of 0 or above PREEMPT_MAX_POLICY_SPAN_NS, a session without a policy or with another.
//
// # Safety
// None beyond the handle rules of the header.
int preempt_helper_schedule_deadline(preempt_stream_t stream, uint64_t deadline_ns);

// Schedules the stream with the session's least-laxity policy (`PREEMPT_POLICY_LAXITY`; again:
// new parameters): once ready it counts at `laxity_priority` for `laxity_ns` (its slack; 0:
// critical at once), then at `critical_priority` (larger runs first, as the helper's blocks);
// the policy suspends every scheduled stream below the highest ready one (a hold of its own, as
// `preempt_helper_schedule_share`'s). `PREEMPT_ERR_INVALID_ARGUMENT`: a laxity above
// PREEMPT_MAX_POLICY_SPAN_NS, a session without a policy or with another.
//
// # Safety
// None beyond the handle rules of the header.
int preempt_helper_schedule_laxity(preempt_stream_t stream,
                                   uint64_t laxity_ns,
                                   int32_t laxity_priority,
                                   int32_t critical_priority);

// The scheduled stream has work the library does not see (kernels launched on its handle) from
// now on, until `preempt_helper_idle`: call it before launching. (Delay commands submitted
// through the library make the stream ready by themselves, and idle once they are done.)
// `PREEMPT_ERR_INVALID_ARGUMENT` unless the stream is scheduled.
//
// # Safety
// None beyond the handle rules of the header.
int preempt_helper_ready(preempt_stream_t stream);

// All of the scheduled stream's work announced with `preempt_helper_ready` is done: call it
// after the stream's synchronize. `PREEMPT_ERR_INVALID_ARGUMENT` unless the stream is scheduled.
//
// # Safety
// None beyond the handle rules of the header.
int preempt_helper_idle(preempt_stream_t stream);

// The policy's counters: `*actions` gets the suspends and resumes it carried out, `*failures`
// those that failed (each is retried at the policy's next decision). Neither pointer may be
// NULL. `PREEMPT_ERR_INVALID_ARGUMENT` for a session without a policy.
//
// # Safety
// `actions` and `failures` are valid for writing a `uint64_t` each.
int preempt_helper_policy_counts(preempt_session_t session, uint64_t *actions, uint64_t *failures);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* PREEMPT_KFD_H */
