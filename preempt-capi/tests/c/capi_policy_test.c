// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The helper's time-driven policy from C, on the host device (docs/c-api.md, "The helper's
 * policy"):
 *
 *   - preempt_options.policy and its settings: the defaults of preempt_options_init (HPF, a
 *     10 ms round, k = 1), an unknown policy number, a round of 0 or past
 *     PREEMPT_MAX_POLICY_ROUND_NS, a k of 0 or past PREEMPT_MAX_POLICY_K are
 *     PREEMPT_ERR_INVALID_ARGUMENT at open; a struct of the earlier size (before `policy`) opens
 *     a highest-priority-first session whatever lies past it;
 *   - PREEMPT_POLICY_UP: two streams scheduled 3:1, both held while idle (their workers stopped:
 *     /proc/PID/stat says T), a hand resume of the policy's hold is PREEMPT_ERR_BUSY; then both
 *     saturated with delay commands for about a second, and the share-3 stream completes clearly
 *     more (a host figure, printed; loose bounds, as preempt-api/tests/host_policy.rs's: the
 *     machine is shared); the policy's counters; close leaves no worker stopped;
 *   - PREEMPT_POLICY_KEDF and PREEMPT_POLICY_LAXITY: the stream their rule picks runs;
 *   - misuse: a share of 0, a deadline of 0 or past PREEMPT_MAX_POLICY_SPAN_NS, a laxity past
 *     it, another policy's parameters, ready of a stream not scheduled, NULL counters, a
 *     session without a policy: PREEMPT_ERR_INVALID_ARGUMENT.
 *
 * The program serves as its own host-device worker (preempt_options.host_worker_arg).
 * Output: "PASS capi-policy: ..." / "FAIL capi-policy: ..." lines, then
 * "capi_policy_test: N passed, M failed". Exit status: 0 all passed, 1 a failure. The whole run
 * is bounded by alarm(LIMIT_S): past it SIGALRM ends the program (a failure, not a hang).
 */
#define _GNU_SOURCE
#include "preempt_kfd.h"

#include <dirent.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WORKER_ARG "--preempt-host-worker"
#define MS 1000000ull
#define LIMIT_S 120
/* The partition's round here, as preempt-api/tests/host_policy.rs's (slices of 15 and 5 ms). */
#define ROUND_NS (20 * MS)
/* How long the shares are measured. */
#define MEASURE_MS 1000
/* Delay commands of 1 ms, enough for about 3 s of work on each stream: both stay busy. */
#define COMMANDS 3000

static int passed, failed;

static void check(int ok, const char *what, int code)
{
	if (ok) {
		passed++;
		printf("PASS capi-policy: %s\n", what);
	} else {
		failed++;
		printf("FAIL capi-policy: %s: got %s (%d): %s\n", what, preempt_status_name(code), code,
		       preempt_last_error());
	}
	fflush(stdout);
}

#define EXPECT(want, call, what) do { int rc_ = (call); check(rc_ == (want), what, rc_); } while (0)
/* The call returned `want` and the thread's message contains `needle`. */
#define EXPECT_MSG(want, call, needle, what) do { int rc_ = (call); \
	check(rc_ == (want) && strstr(preempt_last_error(), (needle)) != NULL, what, rc_); } while (0)

static void sleep_ms(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&t, NULL);
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static preempt_options host_options(int32_t policy)
{
	preempt_options o;
	preempt_options_init(&o);
	o.host_worker = "/proc/self/exe";
	o.host_worker_arg = WORKER_ARG;
	o.host_workers = 1;
	o.policy = policy;
	return o;
}

/* The state letter of /proc/PID/stat ('R', 'S', 'T', 'Z', ...), 0 once the process is gone; its
 * parent in *ppid. */
static char proc_state(pid_t pid, pid_t *ppid)
{
	char path[64], buf[512];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	char *close = strrchr(buf, ')'); /* the command name may contain anything */
	char state = 0;
	int parent = 0;
	if (!close || sscanf(close + 1, " %c %d", &state, &parent) != 2)
		return 0;
	if (ppid)
		*ppid = parent;
	return state;
}

/* The live children of this process (the workers it started), by scanning /proc. */
static int children(pid_t *out, int max)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;
	while (d && (e = readdir(d)) != NULL && n < max) {
		pid_t pid = (pid_t)atoi(e->d_name), ppid = 0;
		char st = pid > 0 ? proc_state(pid, &ppid) : 0;
		if (st && st != 'Z' && st != 'X' && ppid == getpid())
			out[n++] = pid;
	}
	if (d)
		closedir(d);
	return n;
}

/* A stream of one worker, and that worker's pid (0 if it could not be told apart). */
static preempt_stream_t stream_with_worker(preempt_session_t s, pid_t *worker)
{
	pid_t before[64], after[64];
	int nb = children(before, 64);
	preempt_stream_t st = 0;
	*worker = 0;
	if (preempt_stream_create(s, PREEMPT_LEVEL_LV3, &st) != PREEMPT_OK)
		return 0;
	int na = children(after, 64);
	for (int i = 0; i < na && na == nb + 1; i++) {
		int known = 0;
		for (int j = 0; j < nb; j++)
			known |= after[i] == before[j];
		if (!known)
			*worker = after[i];
	}
	return st;
}

/* Polls (at most 5 s) until `pid` is in state `want` (or, with `not`, in any other); 1 if so. */
static int wait_state(pid_t pid, char want, int not)
{
	for (int i = 0; i < 2500; i++) {
		char st = proc_state(pid, NULL);
		if (not ? st != want : st == want)
			return 1;
		sleep_ms(2);
	}
	return 0;
}

static int is_suspended(preempt_stream_t st)
{
	int f = -1;
	return preempt_is_suspended(st, &f) == PREEMPT_OK ? f : -1;
}

static uint64_t completed(preempt_stream_t st)
{
	preempt_check_result r;
	memset(&r, 0, sizeof r);
	if (preempt_check(st, &r, NULL, 0) != PREEMPT_OK)
		printf("  check failed: %s\n", preempt_last_error());
	return r.completed;
}

static void options_test(void)
{
	preempt_session_t s = 0;
	preempt_stream_t lp = 0;
	preempt_options o;
	preempt_options_init(&o);
	check(o.policy == PREEMPT_POLICY_HPF && o.policy_round_ns == PREEMPT_POLICY_ROUND_NS_DEFAULT &&
	      o.policy_k == 1, "preempt_options_init: HPF, a 10 ms round, k = 1", o.policy);

	o = host_options(7);
	EXPECT_MSG(PREEMPT_ERR_INVALID_ARGUMENT, preempt_session_open("host", &o, &s), "unknown policy \"7\"",
		   "an unknown policy number is INVALID_ARGUMENT at open");
	check(strstr(preempt_last_error(), "laxity (3)") != NULL, "... and the message lists the policies", 0);
	o = host_options(PREEMPT_POLICY_UP);
	o.policy_round_ns = 0;
	EXPECT_MSG(PREEMPT_ERR_INVALID_ARGUMENT, preempt_session_open("host", &o, &s), "policy_round_ns",
		   "a round of 0 is INVALID_ARGUMENT, naming the field");
	o.policy_round_ns = PREEMPT_MAX_POLICY_ROUND_NS + 1;
	EXPECT(PREEMPT_ERR_INVALID_ARGUMENT, preempt_session_open("host", &o, &s),
	       "a round past PREEMPT_MAX_POLICY_ROUND_NS is INVALID_ARGUMENT");
	o = host_options(PREEMPT_POLICY_KEDF);
	o.policy_k = 0;
	EXPECT_MSG(PREEMPT_ERR_INVALID_ARGUMENT, preempt_session_open("host", &o, &s), "policy_k",
		   "k = 0 is INVALID_ARGUMENT, naming the field");
	o.policy_k = PREEMPT_MAX_POLICY_K + 1;
	EXPECT(PREEMPT_ERR_INVALID_ARGUMENT, preempt_session_open("host", &o, &s),
	       "k past PREEMPT_MAX_POLICY_K is INVALID_ARGUMENT");

	/* A program built against the header before `policy`: its struct ends at `policy`. */
	o = host_options(PREEMPT_POLICY_UP);
	o.struct_size = (uint32_t)offsetof(preempt_options, policy);
	EXPECT(PREEMPT_OK, preempt_session_open("host", &o, &s), "the earlier struct size (before policy) opens");
	EXPECT(PREEMPT_OK, preempt_stream_create(s, PREEMPT_LEVEL_LV3, &lp), "... a stream");
	EXPECT_MSG(PREEMPT_ERR_INVALID_ARGUMENT, preempt_helper_schedule_share(lp, 1), "PREEMPT_POLICY_HPF",
		   "... whose session is HPF: the policy past its struct was not read");
	EXPECT(PREEMPT_OK, preempt_session_close(s), "... close");

	/* The default: HPF, nothing to schedule. */
	uint64_t actions = 0, failures = 0;
	o = host_options(PREEMPT_POLICY_HPF);
	EXPECT(PREEMPT_OK, preempt_session_open("host", &o, &s), "an HPF session");
	EXPECT(PREEMPT_OK, preempt_stream_create(s, PREEMPT_LEVEL_LV3, &lp), "... a stream");
	EXPECT_MSG(PREEMPT_ERR_INVALID_ARGUMENT, preempt_helper_schedule_share(lp, 1), "PREEMPT_POLICY_UP",
		   "schedule without a policy is INVALID_ARGUMENT, saying how to get one");
	EXPECT(PREEMPT_ERR_INVALID_ARGUMENT, preempt_helper_ready(lp), "ready without a policy is INVALID_ARGUMENT");
	EXPECT(PREEMPT_ERR_INVALID_ARGUMENT, preempt_helper_policy_counts(s, &actions, &failures),
	       "counters without a policy are INVALID_ARGUMENT");
	EXPECT(PREEMPT_OK, preempt_session_close(s), "... close");
}

static void partition_test(void)
{
	preempt_session_t s = 0;
	preempt_stream_t a = 0, b = 0, other = 0;
	pid_t wa = 0, wb = 0;
	uint64_t actions = 0, failures = 0;
	char name[48];
	preempt_options o = host_options(PREEMPT_POLICY_UP);
	o.policy_round_ns = ROUND_NS;
	EXPECT(PREEMPT_OK, preempt_session_open("host", &o, &s), "up: open with PREEMPT_POLICY_UP");
	a = stream_with_worker(s, &wa);
	b = stream_with_worker(s, &wb);
	other = stream_with_worker(s, &(pid_t){ 0 });
	check(a && b && other && wa && wb, "up: three streams, one worker each", 0);
	EXPECT(PREEMPT_OK, preempt_helper_schedule_share(a, 3), "up: schedule a at share 3");
	EXPECT(PREEMPT_OK, preempt_helper_schedule_share(b, 1), "up: schedule b at share 1");

	/* Idle, both are held: the policy's hold is the workers' SIGSTOP, and not the caller's. */
	check(is_suspended(a) == 1 && is_suspended(b) == 1, "up: idle scheduled streams are held", 0);
	check(wait_state(wa, 'T', 0) && wait_state(wb, 'T', 0), "up: ... their workers are stopped (T)", 0);
	snprintf(name, sizeof name, "stream handle %llu", (unsigned long long)b);
	EXPECT_MSG(PREEMPT_ERR_BUSY, preempt_resume(b), "policy", "up: a hand resume of the policy's hold is BUSY");
	check(strstr(preempt_last_error(), name) != NULL, "up: ... naming the stream's handle", 0);

	/* Misuse. */
	EXPECT_MSG(PREEMPT_ERR_INVALID_ARGUMENT, preempt_helper_schedule_share(other, 0), "share of 0",
		   "up: a share of 0 is INVALID_ARGUMENT");
	EXPECT_MSG(PREEMPT_ERR_INVALID_ARGUMENT, preempt_helper_schedule_deadline(other, MS), "with a share",
		   "up: a deadline (K-EDF's parameter) is INVALID_ARGUMENT");
	EXPECT(PREEMPT_ERR_INVALID_ARGUMENT, preempt_helper_schedule_laxity(other, MS, 1, 2),
	       "up: a laxity is INVALID_ARGUMENT");
	EXPECT_MSG(PREEMPT_ERR_INVALID_ARGUMENT, preempt_helper_ready(other), "not scheduled",
		   "up: ready of a stream not scheduled is INVALID_ARGUMENT");
	EXPECT(PREEMPT_ERR_INVALID_ARGUMENT, preempt_helper_idle(other), "up: idle of a stream not scheduled too");
	EXPECT(PREEMPT_ERR_INVALID_ARGUMENT, preempt_helper_policy_counts(s, NULL, &failures),
	       "up: NULL actions is INVALID_ARGUMENT");
	EXPECT(PREEMPT_ERR_INVALID_ARGUMENT, preempt_helper_policy_counts(s, &actions, NULL),
	       "up: NULL failures is INVALID_ARGUMENT");
	EXPECT(PREEMPT_ERR_BAD_HANDLE, preempt_helper_schedule_share(0, 1), "up: handle 0 is BAD_HANDLE");

	/* Both saturated: device time by the shares. */
	int submitted = 1;
	for (int i = 0; i < COMMANDS && submitted; i++)
		submitted = preempt_submit_delay(a, MS, NULL) == PREEMPT_OK && preempt_submit_delay(b, MS, NULL) == PREEMPT_OK;
	check(submitted, "up: both streams saturated with 1 ms delay commands", 0);
	uint64_t a0 = completed(a), b0 = completed(b);
	double t0 = now_s();
	sleep_ms(MEASURE_MS);
	uint64_t da = completed(a) - a0, db = completed(b) - b0;
	double secs = now_s() - t0;
	double frac = (double)da / (double)(da + db > 0 ? da + db : 1);
	printf("  host figure: 3:1 asked, %llu:%llu commands completed in %.2f s (%.1f %% for share 3)\n",
	       (unsigned long long)da, (unsigned long long)db, secs, frac * 100.0);
	check(da + db > 100 && frac >= 0.6 && frac <= 0.9,
	      "up: the share-3 stream completes clearly more (60-90 % of the commands)", 0);
	EXPECT(PREEMPT_OK, preempt_helper_policy_counts(s, &actions, &failures), "up: the policy's counters");
	printf("  policy: %llu actions, %llu failures\n", (unsigned long long)actions, (unsigned long long)failures);
	check(actions > 10 && failures == 0, "up: ... the policy switched the streams, and nothing failed", 0);

	EXPECT(PREEMPT_OK, preempt_session_close(s), "up: close with both streams busy");
	char sa = proc_state(wa, NULL), sb = proc_state(wb, NULL);
	check(sa != 'T' && sb != 'T', "up: no worker is left stopped after close", 0);
	pid_t left[64];
	int n = children(left, 64), stopped = 0;
	for (int i = 0; i < n; i++)
		stopped += proc_state(left[i], NULL) == 'T';
	check(stopped == 0, "up: no child of this process is stopped", stopped);
}

static void kedf_laxity_test(void)
{
	preempt_session_t s = 0;
	preempt_stream_t late = 0, soon = 0;
	preempt_options o = host_options(PREEMPT_POLICY_KEDF);
	EXPECT(PREEMPT_OK, preempt_session_open("host", &o, &s), "kedf: open with PREEMPT_POLICY_KEDF, k = 1");
	preempt_stream_create(s, PREEMPT_LEVEL_LV3, &late);
	preempt_stream_create(s, PREEMPT_LEVEL_LV3, &soon);
	EXPECT(PREEMPT_ERR_INVALID_ARGUMENT, preempt_helper_schedule_deadline(late, 0), "kedf: a deadline of 0 is INVALID_ARGUMENT");
	EXPECT(PREEMPT_ERR_INVALID_ARGUMENT, preempt_helper_schedule_deadline(late, PREEMPT_MAX_POLICY_SPAN_NS + 1),
	       "kedf: a deadline past PREEMPT_MAX_POLICY_SPAN_NS is INVALID_ARGUMENT");
	EXPECT(PREEMPT_ERR_INVALID_ARGUMENT, preempt_helper_schedule_share(late, 1), "kedf: a share is INVALID_ARGUMENT");
	EXPECT(PREEMPT_OK, preempt_helper_schedule_deadline(late, 1000 * MS), "kedf: schedule one due in 1 s");
	EXPECT(PREEMPT_OK, preempt_helper_schedule_deadline(soon, 10 * MS), "kedf: and one due in 10 ms");
	EXPECT(PREEMPT_OK, preempt_helper_ready(late), "kedf: ready (the one due in 1 s first)");
	EXPECT(PREEMPT_OK, preempt_helper_ready(soon), "kedf: ready (the one due in 10 ms)");
	check(is_suspended(soon) == 0 && is_suspended(late) == 1, "kedf: the stream due first runs, the other waits", 0);
	EXPECT(PREEMPT_OK, preempt_helper_idle(soon), "kedf: idle");
	check(is_suspended(late) == 0, "kedf: ... and the other runs", 0);
	EXPECT(PREEMPT_OK, preempt_session_close(s), "kedf: close");

	preempt_stream_t slack = 0, other = 0;
	o = host_options(PREEMPT_POLICY_LAXITY);
	EXPECT(PREEMPT_OK, preempt_session_open("host", &o, &s), "laxity: open with PREEMPT_POLICY_LAXITY");
	preempt_stream_create(s, PREEMPT_LEVEL_LV3, &slack);
	preempt_stream_create(s, PREEMPT_LEVEL_LV3, &other);
	EXPECT(PREEMPT_ERR_INVALID_ARGUMENT, preempt_helper_schedule_laxity(slack, PREEMPT_MAX_POLICY_SPAN_NS + 1, 1, 5),
	       "laxity: a laxity past PREEMPT_MAX_POLICY_SPAN_NS is INVALID_ARGUMENT");
	EXPECT(PREEMPT_OK, preempt_helper_schedule_laxity(slack, 1000 * 1000 * MS, 1, 5),
	       "laxity: schedule one at priority 1 for 1000 s, then 5");
	EXPECT(PREEMPT_OK, preempt_helper_schedule_laxity(other, 0, 2, 2), "laxity: and one at 2");
	EXPECT(PREEMPT_OK, preempt_helper_ready(slack), "laxity: ready");
	EXPECT(PREEMPT_OK, preempt_helper_ready(other), "laxity: ready");
	check(is_suspended(other) == 0 && is_suspended(slack) == 1, "laxity: with slack left, priority 2 runs over 1", 0);
	EXPECT(PREEMPT_OK, preempt_session_close(s), "laxity: close resumes what the policy held");
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], WORKER_ARG) == 0)
		return preempt_host_worker_main() == PREEMPT_OK ? 0 : 1;
	alarm(LIMIT_S);
	options_test();
	partition_test();
	kedf_laxity_test();
	printf("capi_policy_test: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
