// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The C ABI (include/preempt_kfd.h) from C, as an application uses it.
 *
 *   capi_test host                 the host device end to end, and the documented errors of a
 *                                  machine without a GPU (README's test command, on the host);
 *                                  the contracts of fork, of who holds a suspension, and of a
 *                                  bounded close
 *   capi_test kfd --stock|--patched   /dev/kfd through the ABI in the QEMU guest (no GPU): open,
 *                                  probe, bind made-up queue ids (INVALID), suspend/resume of
 *                                  bogus ids, close; without /dev/kfd every open is NO_KFD
 *
 * The program serves as its own host-device worker (preempt_options.host_worker_arg).
 * Output: "PASS capi: ..." / "FAIL capi: ..." lines, then "capi_test: N passed, M failed".
 * Exit status: 0 all passed, 1 a failure, 2 bad usage.
 */
#define _GNU_SOURCE
#include "preempt_kfd.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WORKER_ARG "--preempt-host-worker"
#define MS 1000000ull

static int passed, failed;

static void check(int ok, const char *what, int code)
{
	if (ok) {
		passed++;
		printf("PASS capi: %s\n", what);
	} else {
		failed++;
		printf("FAIL capi: %s: got %s (%d): %s\n", what, preempt_status_name(code), code, preempt_last_error());
	}
	fflush(stdout);
}

/* The call returned `want`. */
#define EXPECT(want, call, what) do { int rc_ = (call); check(rc_ == (want), what, rc_); } while (0)
/* The call returned `want` and the thread's message contains `needle`. */
#define EXPECT_MSG(want, call, needle, what) do { int rc_ = (call); \
	check(rc_ == (want) && strstr(preempt_last_error(), (needle)) != NULL, what, rc_); } while (0)

static void sleep_ms(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&t, NULL);
}

static preempt_options host_options(void)
{
	preempt_options o;
	preempt_options_init(&o);
	o.host_worker = "/proc/self/exe";
	o.host_worker_arg = WORKER_ARG;
	o.host_workers = 1;
	return o;
}

static preempt_check_result checked(preempt_stream_t s)
{
	preempt_check_result r;
	char problems[512] = "";
	memset(&r, 0, sizeof(r));
	if (preempt_check(s, &r, problems, sizeof(problems)) != PREEMPT_OK)
		printf("  check failed: %s\n", preempt_last_error());
	if (r.problems)
		printf("  problems: %s\n", problems);
	return r;
}

static int exactly_once(preempt_stream_t s, uint64_t n)
{
	preempt_check_result r = checked(s);
	return r.finished && r.problems == 0 && r.submitted == n && r.exactly_once == n;
}

struct racer { preempt_stream_t s; int bad; };

/* Suspends and resumes one stream from several threads at once: each call either works or says
 * why it cannot (already suspended / not suspended), never anything else. */
static void *race(void *arg)
{
	struct racer *r = arg;
	for (int i = 0; i < 200; i++) {
		int a = preempt_suspend(r->s, NULL);
		if (a != PREEMPT_OK && a != PREEMPT_ERR_ALREADY_SUSPENDED)
			r->bad++;
		int b = preempt_resume(r->s);
		if (b != PREEMPT_OK && b != PREEMPT_ERR_NOT_SUSPENDED)
			r->bad++;
	}
	return NULL;
}

static void host_tests(void)
{
	char name[32], why[512], probe[2048];
	preempt_session_t s = 0, bad = 0;
	preempt_stream_t lv3 = 0, lv1 = 0, lv2 = 0;
	preempt_options o = host_options();
	int flag = -1;
	uint64_t lat = 0;
	void *handle = (void *)1;

	check(strcmp(preempt_status_name(PREEMPT_ERR_QUEUE_REFUSED), "PREEMPT_ERR_QUEUE_REFUSED") == 0 &&
	      strcmp(preempt_status_name(-1000), "PREEMPT_ERR_UNKNOWN") == 0 && preempt_version()[0] != '\0',
	      "status names and version", 0);
	EXPECT_MSG(PREEMPT_ERR_INVALID_ARGUMENT, preempt_session_open("gpu:0", &o, &s), "unknown device \"gpu:0\": expected auto, host",
		   "an unknown device is INVALID_ARGUMENT");
	EXPECT(PREEMPT_ERR_INVALID_ARGUMENT, preempt_session_open("host", &o, NULL), "a NULL out pointer is INVALID_ARGUMENT");
	o.mechanism = "dbg-trap";
	EXPECT_MSG(PREEMPT_ERR_INVALID_ARGUMENT, preempt_session_open("host", &o, &bad), "SIGSTOP",
		   "a KFD mechanism on the host device is INVALID_ARGUMENT");
	o.mechanism = "ioctl";
	EXPECT_MSG(PREEMPT_ERR_INVALID_ARGUMENT, preempt_session_open("host", &o, &bad), "renamed preempt-queues",
		   "the old mechanism name ioctl is INVALID_ARGUMENT, naming the new one");
	o.mechanism = NULL;
	EXPECT(PREEMPT_OK, preempt_probe(probe, sizeof(probe)), "probe");
	check(strstr(probe, "kfd:") && strstr(probe, "preempt-queues") && strstr(probe, "dbg-trap") && strstr(probe, "update-queue"),
	      "probe lists /dev/kfd and the three mechanisms", 0);
	if (access("/dev/kfd", F_OK) != 0) {
		EXPECT(PREEMPT_ERR_NO_DEVICE, preempt_session_open("hip:0", NULL, &bad), "hip:0 without a GPU is NO_DEVICE");
		EXPECT(PREEMPT_ERR_NO_KFD, preempt_session_open("kfd", NULL, &bad), "kfd without /dev/kfd is NO_KFD");
		check(preempt_last_errno() == ENOENT, "... with errno ENOENT", preempt_last_errno());
	}

	EXPECT(PREEMPT_OK, preempt_session_open("auto", &o, &s), "auto opens (the host device here)");
	EXPECT(PREEMPT_OK, preempt_session_mechanism(s, name, sizeof(name), why, sizeof(why)), "mechanism query");
	check(strcmp(name, "sigstop") == 0 && strstr(why, "host device") != NULL, "the host device's Lv3 is sigstop", 0);
	printf("  mechanism: %s: %s\n", name, why);

	/* Lv3 on the host: SIGSTOP of the workers. */
	EXPECT(PREEMPT_OK, preempt_stream_create(s, PREEMPT_LEVEL_LV3, &lv3), "create an Lv3 LP stream");
	EXPECT_MSG(PREEMPT_ERR_INVALID_ARGUMENT, preempt_stream_create(s, 4, &bad),
		   "unknown level \"4\": expected auto (0), lv1 (1), lv2 (2) or lv3 (3)", "level 4 is INVALID_ARGUMENT");
	EXPECT(PREEMPT_OK, preempt_stream_handle(lv3, &handle), "stream handle");
	check(handle == NULL, "no hipStream_t on the host device", 0);
	EXPECT(PREEMPT_ERR_UNSUPPORTED, preempt_stream_queue(lv3, NULL, NULL), "no KFD queue behind a host stream");
	for (int i = 0; i < 20; i++)
		preempt_submit_delay(lv3, 2 * MS, NULL);
	sleep_ms(5);
	EXPECT(PREEMPT_OK, preempt_suspend(lv3, &lat), "Lv3 suspend");
	printf("  host Lv3 suspend took %llu ns (a host figure)\n", (unsigned long long)lat);
	EXPECT(PREEMPT_OK, preempt_is_suspended(lv3, &flag), "is_suspended");
	check(flag == 1, "... says suspended", flag);
	sleep_ms(20);
	preempt_check_result c1 = checked(lv3);
	sleep_ms(60);
	preempt_check_result c2 = checked(lv3);
	check(c1.completed == c2.completed && c2.completed < 20, "nothing completes while suspended at Lv3", 0);
	EXPECT(PREEMPT_ERR_ALREADY_SUSPENDED, preempt_suspend(lv3, NULL), "a second suspend is ALREADY_SUSPENDED");
	EXPECT(PREEMPT_OK, preempt_resume(lv3), "resume");
	EXPECT(PREEMPT_ERR_NOT_SUSPENDED, preempt_resume(lv3), "a second resume is NOT_SUSPENDED");
	EXPECT(PREEMPT_OK, preempt_synchronize(lv3), "synchronize");
	check(exactly_once(lv3, 20), "every command ran exactly once after an Lv3 suspension", 0);

	/* Lv1: the launcher's drain. */
	EXPECT(PREEMPT_OK, preempt_stream_create(s, PREEMPT_LEVEL_LV1, &lv1), "create an Lv1 LP stream");
	for (int i = 0; i < 30; i++)
		preempt_submit_delay(lv1, MS, NULL);
	EXPECT(PREEMPT_OK, preempt_suspend(lv1, NULL), "Lv1 suspend (drain)");
	EXPECT(PREEMPT_ERR_UNSUPPORTED, preempt_synchronize(lv1), "synchronize under an Lv1 suspension is refused");
	EXPECT(PREEMPT_OK, preempt_resume(lv1), "Lv1 resume");
	EXPECT(PREEMPT_OK, preempt_synchronize(lv1), "Lv1 synchronize");
	check(exactly_once(lv1, 30), "every Lv1 command ran exactly once", 0);

	/* Lv2 (the host device only): the command each worker runs finishes, no new one starts. */
	EXPECT(PREEMPT_OK, preempt_stream_create(s, PREEMPT_LEVEL_LV2, &lv2), "create an Lv2 LP stream");
	for (int i = 0; i < 10; i++)
		preempt_submit_delay(lv2, 20 * MS, NULL);
	sleep_ms(5);
	EXPECT(PREEMPT_OK, preempt_suspend(lv2, &lat), "Lv2 suspend");
	printf("  host Lv2 suspend took %llu ns (the rest of a 20 ms command; a host figure)\n", (unsigned long long)lat);
	sleep_ms(20);
	preempt_check_result h1 = checked(lv2);
	sleep_ms(60);
	preempt_check_result h2 = checked(lv2);
	check(h1.completed == h2.completed && h2.completed < 10, "nothing completes while suspended at Lv2", 0);
	EXPECT(PREEMPT_ERR_ALREADY_SUSPENDED, preempt_suspend(lv2, NULL), "a second Lv2 suspend is ALREADY_SUSPENDED");
	EXPECT(PREEMPT_OK, preempt_resume(lv2), "Lv2 resume");
	EXPECT(PREEMPT_OK, preempt_synchronize(lv2), "Lv2 synchronize");
	check(exactly_once(lv2, 10), "every command held back at Lv2 ran exactly once after the resume", 0);

	/* The helper. */
	EXPECT(PREEMPT_OK, preempt_helper_register(lv3, 0), "helper register (Lv3)");
	EXPECT(PREEMPT_OK, preempt_helper_register(lv1, 0), "helper register (Lv1)");
	for (int i = 0; i < 10; i++) {
		preempt_submit_delay(lv3, MS, NULL);
		preempt_submit_delay(lv1, MS, NULL);
	}
	EXPECT(PREEMPT_OK, preempt_helper_enter(s, 1), "helper enter (HP block)");
	int f3 = 0, f1 = 0;
	preempt_is_suspended(lv3, &f3);
	preempt_is_suspended(lv1, &f1);
	check(f3 == 1 && f1 == 1, "during the HP block both LP streams are suspended", 0);
	EXPECT(PREEMPT_OK, preempt_hp_submit_delay(s, MS), "HP delay");
	EXPECT(PREEMPT_OK, preempt_hp_synchronize(s), "HP synchronize");
	EXPECT(PREEMPT_OK, preempt_helper_leave(s, 1), "helper leave");
	preempt_is_suspended(lv3, &f3);
	preempt_is_suspended(lv1, &f1);
	check(f3 == 0 && f1 == 0, "after the HP block both run again", 0);
	EXPECT(PREEMPT_ERR_INVALID_ARGUMENT, preempt_helper_leave(s, 1), "leaving a block never entered is INVALID_ARGUMENT");

	/* Sets. */
	preempt_stream_t both[2] = { lv3, lv1 };
	EXPECT(PREEMPT_OK, preempt_suspend_set(both, 2), "suspend a set");
	EXPECT(PREEMPT_OK, preempt_resume_set(both, 2), "resume a set");
	EXPECT(PREEMPT_OK, preempt_suspend(lv1, NULL), "suspend one member by hand");
	EXPECT(PREEMPT_ERR_ALREADY_SUSPENDED, preempt_suspend_set(both, 2), "a set with a suspended member fails");
	preempt_is_suspended(lv3, &f3);
	check(f3 == 0, "... and leaves the others as they were (all or nothing)", f3);
	preempt_resume(lv1);
	{
		/* Stream ids start at 1 in every session: another session's stream is refused from
		   this one's sets and helper, and nothing is suspended. */
		preempt_session_t s2 = 0;
		preempt_stream_t other = 0;
		EXPECT(PREEMPT_OK, preempt_session_open("host", &o, &s2), "open a second session");
		EXPECT(PREEMPT_OK, preempt_stream_create(s2, PREEMPT_LEVEL_LV3, &other), "its LP stream");
		preempt_stream_t mixed[2] = { lv3, other };
		EXPECT(PREEMPT_ERR_INVALID_ARGUMENT, preempt_suspend_set(mixed, 2), "a set of two sessions is INVALID_ARGUMENT");
		preempt_is_suspended(lv3, &f3);
		check(f3 == 0, "... and suspends nothing", f3);
		EXPECT(PREEMPT_OK, preempt_session_close(s2), "close the second session");
	}

	/* Many cycles, explicit and through the helper, then the exactly-once check. */
	for (int i = 0; i < 200; i++) {
		preempt_submit_delay(lv3, 200000, NULL);
		if (i % 2) {
			preempt_suspend(lv3, NULL);
			preempt_resume(lv3);
		} else {
			preempt_helper_enter(s, 1);
			preempt_helper_leave(s, 1);
		}
	}
	EXPECT(PREEMPT_OK, preempt_synchronize(lv3), "synchronize after 200 suspend/resume cycles");
	check(exactly_once(lv3, 20 + 10 + 200), "every command ran exactly once after 200 cycles", 0);

	/* Threads. */
	struct racer r[3] = { { lv3, 0 }, { lv3, 0 }, { lv3, 0 } };
	pthread_t t[3];
	for (int i = 0; i < 3; i++)
		pthread_create(&t[i], NULL, race, &r[i]);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	preempt_is_suspended(lv3, &f3);
	check(r[0].bad + r[1].bad + r[2].bad == 0 && f3 == 0, "3 threads suspending and resuming one stream", 0);

	/* Close with a stream suspended: it is resumed, every handle becomes invalid. */
	preempt_submit_delay(lv3, 50 * MS, NULL);
	EXPECT(PREEMPT_OK, preempt_suspend(lv3, NULL), "suspend before close");
	EXPECT(PREEMPT_OK, preempt_session_close(s), "close resumes and closes everything");
	EXPECT(PREEMPT_ERR_BAD_HANDLE, preempt_resume(lv3), "a closed session's stream handle is BAD_HANDLE");
	EXPECT(PREEMPT_ERR_BAD_HANDLE, preempt_session_close(s), "closing twice is BAD_HANDLE");

	/* All defaults: the worker is preempt-host-worker beside libpreempt_kfd (or in
	 * ../libexec/preempt-kfd/ from it, as scripts/install-capi.sh installs it). */
	preempt_session_t d = 0;
	preempt_stream_t ds = 0;
	EXPECT(PREEMPT_OK, preempt_session_open("host", NULL, &d), "host session with all defaults");
	EXPECT(PREEMPT_OK, preempt_stream_create(d, PREEMPT_LEVEL_AUTO, &ds), "... finds the default worker program");
	preempt_submit_delay(ds, MS, NULL);
	EXPECT(PREEMPT_OK, preempt_synchronize(ds), "... and runs a command on it");
	EXPECT(PREEMPT_OK, preempt_stream_close(ds), "close the stream");
	EXPECT(PREEMPT_ERR_BAD_HANDLE, preempt_synchronize(ds), "a closed stream's handle is BAD_HANDLE");
	EXPECT(PREEMPT_OK, preempt_session_close(d), "close the session");
}

/* The child of signal_test: resume-on-signals installed first, a host stream suspended, then it
 * waits for a signal. */
static int signal_child(void)
{
	preempt_options o = host_options();
	preempt_session_t s;
	preempt_stream_t lp;
	uint32_t unblocked = 99;
	if (preempt_resume_on_signals(&unblocked) != PREEMPT_OK || unblocked != 0 ||
	    preempt_session_open("host", &o, &s) != PREEMPT_OK ||
	    preempt_stream_create(s, PREEMPT_LEVEL_LV3, &lp) != PREEMPT_OK ||
	    preempt_submit_delay(lp, 500 * MS, NULL) != PREEMPT_OK || preempt_suspend(lp, NULL) != PREEMPT_OK) {
		printf("signal-child: %s\n", preempt_last_error());
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}

/* SIGTERM to a process that called preempt_resume_on_signals with a queue suspended: the library
 * resumes it, then the signal takes its course (the process dies by SIGTERM, not by a hang). */
static void signal_test(void)
{
	int fds[2];
	char line[64] = "";
	if (pipe(fds) != 0) {
		check(0, "pipe", errno);
		return;
	}
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fds[1], 1);
		execl("/proc/self/exe", "capi_test", "signal-child", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	FILE *f = fdopen(fds[0], "r");
	int ready = f && fgets(line, sizeof(line), f) && strcmp(line, "ready\n") == 0;
	check(ready, "a child with resume-on-signals suspends a host stream", 0);
	if (!ready)
		printf("  child said: %s\n", line);
	kill(pid, SIGTERM);
	int st = 0;
	for (int i = 0; i < 200 && waitpid(pid, &st, WNOHANG) == 0; i++)
		sleep_ms(50);
	check(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM,
	      "SIGTERM: the library resumes, then the process dies by SIGTERM", st);
	if (f)
		fclose(f);
}

/* Waits at most `ms` for `pid`; kills it past that. Returns its wait status, or -1 if it hung. */
static int wait_bounded(pid_t pid, long ms)
{
	int st = 0;
	for (long waited = 0; waited < ms; waited += 10) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return st;
		sleep_ms(10);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

/* The child of fork_test: every call on the parent's handles is FORKED, a close releases only the
 * child's handles (OK, and they are then BAD_HANDLE here), and the child's own session works.
 * Returns the number of the first unexpected step (0: all as documented). */
static int fork_child(preempt_session_t s, preempt_stream_t lp, preempt_stream_t held)
{
	preempt_stream_t out = 0;
	int flag = 0;
	int rc[] = {
		preempt_submit_delay(lp, MS, NULL), preempt_synchronize(lp), preempt_resume(held),
		preempt_suspend(lp, NULL), preempt_hp_submit_delay(s, MS), preempt_hp_synchronize(s),
		preempt_helper_enter(s, 1), preempt_is_suspended(held, &flag), preempt_stream_create(s, 0, &out),
		preempt_suspend_set(&lp, 1),
	};
	for (unsigned i = 0; i < sizeof(rc) / sizeof(rc[0]); i++)
		if (rc[i] != PREEMPT_ERR_FORKED)
			return 1 + (int)i;
	if (!strstr(preempt_last_error(), "fork") || !strstr(preempt_last_error(), "own session"))
		return 20;
	if (preempt_stream_close(held) != PREEMPT_OK || preempt_resume(held) != PREEMPT_ERR_BAD_HANDLE)
		return 24;
	if (preempt_session_close(s) != PREEMPT_OK)
		return 21;
	if (preempt_synchronize(lp) != PREEMPT_ERR_BAD_HANDLE)
		return 22;
	preempt_options o = host_options();
	preempt_session_t mine = 0;
	preempt_stream_t st = 0;
	if (preempt_session_open("host", &o, &mine) != PREEMPT_OK || preempt_stream_create(mine, PREEMPT_LEVEL_LV3, &st) != PREEMPT_OK ||
	    preempt_submit_delay(st, MS, NULL) != PREEMPT_OK || preempt_synchronize(st) != PREEMPT_OK ||
	    preempt_session_close(mine) != PREEMPT_OK)
		return 23;
	return 0;
}

/* fork() after opening a session: the child's calls fail with FORKED and touch nothing of the
 * parent's; the parent's suspended stream stays suspended, its LP and HP workers live, and it goes
 * on working. */
static void fork_test(void)
{
	preempt_options o = host_options();
	preempt_session_t s = 0;
	preempt_stream_t lp = 0, held = 0;
	preempt_check_result r;
	int flag = 0;
	EXPECT(PREEMPT_OK, preempt_session_open("host", &o, &s), "fork: open a session");
	preempt_stream_create(s, PREEMPT_LEVEL_LV3, &lp);
	preempt_stream_create(s, PREEMPT_LEVEL_LV3, &held);
	preempt_submit_delay(lp, MS, NULL);
	preempt_synchronize(lp);
	preempt_hp_submit_delay(s, MS);
	preempt_hp_synchronize(s);
	EXPECT(PREEMPT_OK, preempt_suspend(held, NULL), "fork: suspend a stream before the fork");
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0)
		_exit(fork_child(s, lp, held));
	int st = wait_bounded(pid, 20000);
	check(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "fork: every child call on the parent's handles is FORKED, its close is OK, its own session works", st);
	if (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) != 0)
		printf("  the child's first unexpected step: %d\n", WEXITSTATUS(st));
	preempt_is_suspended(held, &flag);
	check(flag == 1, "fork: the parent's suspension stands after the child's calls and close", flag);
	EXPECT(PREEMPT_OK, preempt_resume(held), "fork: the parent resumes it");
	for (int i = 0; i < 5; i++)
		preempt_submit_delay(lp, MS, NULL);
	EXPECT(PREEMPT_OK, preempt_hp_submit_delay(s, MS), "fork: the parent's HP worker lives");
	EXPECT(PREEMPT_OK, preempt_hp_synchronize(s), "fork: ... and runs");
	EXPECT(PREEMPT_OK, preempt_synchronize(lp), "fork: the parent's LP stream runs");
	r = checked(lp);
	check(r.finished && r.problems == 0 && r.exactly_once == r.submitted && r.submitted == 6,
	      "fork: ... every command exactly once", 0);
	EXPECT(PREEMPT_OK, preempt_session_close(s), "fork: the parent closes");
}

/* Who holds a suspension: the helper resumes only what it suspended; a hand resume of its
 * suspension is BUSY; a hand suspension survives a block. And the messages name the handle, the
 * one id a C caller knows. */
static void hold_test(void)
{
	preempt_options o = host_options();
	preempt_session_t s = 0;
	preempt_stream_t lp = 0, other = 0;
	char handle[48];
	int flag = 0;
	preempt_session_open("host", &o, &s);
	preempt_stream_create(s, PREEMPT_LEVEL_LV3, &other);
	preempt_stream_create(s, PREEMPT_LEVEL_LV3, &lp);
	snprintf(handle, sizeof(handle), "stream handle %llu", (unsigned long long)lp);
	preempt_submit_delay(lp, 100 * MS, NULL);
	EXPECT(PREEMPT_OK, preempt_helper_register(lp, 0), "hold: register");
	EXPECT(PREEMPT_OK, preempt_helper_enter(s, 1), "hold: enter");
	EXPECT_MSG(PREEMPT_ERR_BUSY, preempt_resume(lp), "helper", "hold: a hand resume of the helper's suspension is BUSY");
	check(strstr(preempt_last_error(), handle) != NULL, "hold: ... and the message names the handle", 0);
	EXPECT(PREEMPT_OK, preempt_suspend(lp, NULL), "hold: a hand suspend inside the block is the user's");
	EXPECT(PREEMPT_OK, preempt_helper_leave(s, 1), "hold: leave");
	preempt_is_suspended(lp, &flag);
	check(flag == 1, "hold: the hand suspension outlives the block", flag);
	EXPECT(PREEMPT_OK, preempt_helper_enter(s, 1), "hold: a block over a stream suspended by hand begins");
	EXPECT(PREEMPT_OK, preempt_helper_leave(s, 1), "hold: ... and leaves");
	preempt_is_suspended(lp, &flag);
	check(flag == 1, "hold: the helper did not resume what it did not suspend", flag);
	EXPECT_MSG(PREEMPT_ERR_ALREADY_SUSPENDED, preempt_suspend(lp, NULL), handle,
		   "hold: ALREADY_SUSPENDED names the handle, not an internal id");
	EXPECT(PREEMPT_OK, preempt_resume(lp), "hold: the user resumes their suspension");
	EXPECT(PREEMPT_OK, preempt_synchronize(lp), "hold: synchronize");
	check(exactly_once(lp, 1), "hold: exactly once", 0);
	EXPECT(PREEMPT_OK, preempt_session_close(s), "hold: close");
}

/* The child of close_test: its own session, a command of the maximum delay on an LP and the HP
 * stream, then close; prints the status and how long close took. */
static int close_child(void)
{
	preempt_options o = host_options();
	preempt_session_t s = 0;
	preempt_stream_t lp = 0;
	struct timespec a, b;
	if (preempt_session_open("host", &o, &s) != PREEMPT_OK || preempt_stream_create(s, PREEMPT_LEVEL_LV3, &lp) != PREEMPT_OK) {
		printf("close-child: %s\n", preempt_last_error());
		return 1;
	}
	int over = preempt_submit_delay(lp, PREEMPT_MAX_DELAY_NS + 1, NULL);
	int huge = preempt_hp_submit_delay(s, UINT64_MAX);
	printf("%d %d\n", over, huge);
	preempt_submit_delay(lp, PREEMPT_MAX_DELAY_NS, NULL);
	preempt_hp_submit_delay(s, PREEMPT_MAX_DELAY_NS);
	sleep_ms(50);
	clock_gettime(CLOCK_MONOTONIC, &a);
	int rc = preempt_session_close(s);
	clock_gettime(CLOCK_MONOTONIC, &b);
	long ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
	printf("%d %ld %s\n", rc, ms, preempt_last_error());
	return 0;
}

/* Delays past PREEMPT_MAX_DELAY_NS are INVALID, and close is bounded: with commands of the maximum
 * delay running, close waits PREEMPT_CLOSE_WAIT_MS, abandons them and returns
 * PREEMPT_ERR_ABANDONED, long before they would have ended. Run in a child process so that a close
 * that does not return fails the test instead of hanging it. */
static void close_test(void)
{
	int fds[2];
	char line1[64] = "", line2[512] = "";
	int over = 0, huge = 0, rc = 0;
	long ms = -1;
	if (pipe(fds) != 0) {
		check(0, "pipe", errno);
		return;
	}
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(fds[1], 1);
		execl("/proc/self/exe", "capi_test", "close-child", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	int st = wait_bounded(pid, (long)(PREEMPT_MAX_DELAY_NS / 1000000ull) * 3);
	FILE *f = fdopen(fds[0], "r");
	if (f && fgets(line1, sizeof(line1), f))
		sscanf(line1, "%d %d", &over, &huge);
	if (f && fgets(line2, sizeof(line2), f))
		sscanf(line2, "%d %ld", &rc, &ms);
	if (f)
		fclose(f);
	check(over == PREEMPT_ERR_INVALID_ARGUMENT && huge == PREEMPT_ERR_INVALID_ARGUMENT,
	      "a delay past PREEMPT_MAX_DELAY_NS (LP and HP) is INVALID_ARGUMENT", over ? over : huge);
	check(st != -1 && rc == PREEMPT_ERR_ABANDONED, "close with the maximum delay in flight is ABANDONED", rc);
	check(ms >= PREEMPT_CLOSE_WAIT_MS && ms < (long)(PREEMPT_MAX_DELAY_NS / 2000000ull),
	      "... after waiting PREEMPT_CLOSE_WAIT_MS, long before the commands would end", (int)ms);
	printf("  close: %s", line2);
}

static void kfd_tests(int patched)
{
	char name[32], why[1024], probe[2048];
	preempt_session_t s = 0;
	preempt_stream_t q = 0, q2 = 0;
	preempt_options o;
	preempt_queue_desc d;
	int have_kfd = access("/dev/kfd", F_OK) == 0;

	EXPECT(PREEMPT_OK, preempt_probe(probe, sizeof(probe)), "probe");
	printf("  probe:\n%s\n", probe);
	preempt_options_init(&o);
	if (!have_kfd) {
		/* Every open is NO_KFD with ENOENT; the calls on a handle that never opened are BAD_HANDLE. */
		const char *mechs[] = { "auto", "preempt-queues", "dbg-trap", "update-queue" };
		for (int i = 0; i < 4; i++) {
			o.mechanism = mechs[i];
			o.force = 1;
			char what[96];
			snprintf(what, sizeof(what), "kfd session (%s, forced) without /dev/kfd is NO_KFD", mechs[i]);
			EXPECT(PREEMPT_ERR_NO_KFD, preempt_session_open("kfd", &o, &s), what);
			check(preempt_last_errno() == ENOENT, "... with errno ENOENT", preempt_last_errno());
		}
		memset(&d, 0, sizeof(d));
		EXPECT(PREEMPT_ERR_BAD_HANDLE, preempt_queue_bind(0, &d, &q), "bind on no session is BAD_HANDLE");
		EXPECT(PREEMPT_ERR_BAD_HANDLE, preempt_suspend(0, NULL), "suspend of no stream is BAD_HANDLE");
		EXPECT(PREEMPT_ERR_BAD_HANDLE, preempt_session_close(0), "close of no session is BAD_HANDLE");
		return;
	}

	EXPECT_MSG(PREEMPT_ERR_UNAVAILABLE, preempt_session_open("kfd", &o, &s), "no GPU node",
		   "kfd auto without a GPU is UNAVAILABLE (no GPU node)");
	o.mechanism = "dbg-trap";
	EXPECT(PREEMPT_ERR_UNAVAILABLE, preempt_session_open("kfd", &o, &s), "dbg-trap without a GPU is UNAVAILABLE unless forced");

	/* dbg-trap, forced: the kernel answers for made-up queues. */
	o.force = 1;
	EXPECT(PREEMPT_OK, preempt_session_open("kfd", &o, &s), "kfd session with dbg-trap (forced)");
	preempt_session_mechanism(s, name, sizeof(name), why, sizeof(why));
	check(strcmp(name, "dbg-trap") == 0, "the mechanism is dbg-trap", 0);
	printf("  mechanism: %s: %s\n", name, why);
	EXPECT(PREEMPT_ERR_UNSUPPORTED, preempt_stream_create(s, PREEMPT_LEVEL_AUTO, &q), "a kfd session creates no streams");
	EXPECT_MSG(PREEMPT_ERR_UNAVAILABLE, preempt_stream_create(s, PREEMPT_LEVEL_LV2, &q),
		   "no per-queue Lv2 on gfx942 under HWS", "Lv2 on a kfd session is UNAVAILABLE, saying why");
	check(strstr(preempt_last_error(), "docs/kfd-facts.md#lv2-on-gfx942-no-route-under-hws") != NULL,
	      "... and where the sources are", 0);
	memset(&d, 0, sizeof(d));
	d.queue_id = 0xdead;
	d.priority = -1;
	EXPECT(PREEMPT_OK, preempt_queue_bind(s, &d, &q), "bind made-up queue 0xdead");
	uint32_t qid = 0;
	EXPECT(PREEMPT_OK, preempt_stream_queue(q, &qid, NULL), "stream queue");
	check(qid == 0xdead, "... is 0xdead", (int)qid);
	EXPECT_MSG(PREEMPT_ERR_QUEUE_REFUSED, preempt_suspend(q, NULL), "INVALID",
		   "dbg-trap suspend of a made-up queue: the kernel says INVALID");
	EXPECT(PREEMPT_ERR_NOT_SUSPENDED, preempt_resume(q), "resume of a queue never suspended is NOT_SUSPENDED");
	d.queue_id = 0xbeef;
	EXPECT(PREEMPT_OK, preempt_queue_bind(s, &d, &q2), "bind made-up queue 0xbeef");
	preempt_stream_t set[2] = { q, q2 };
	EXPECT(PREEMPT_ERR_QUEUE_REFUSED, preempt_suspend_set(set, 2), "suspend of a set of bogus ids is QUEUE_REFUSED");
	EXPECT(PREEMPT_ERR_NOT_SUSPENDED, preempt_resume_set(set, 2), "resume of that set is NOT_SUSPENDED");
	EXPECT(PREEMPT_ERR_UNSUPPORTED, preempt_submit_delay(q, MS, NULL), "a bound queue takes no delay commands");
	EXPECT(PREEMPT_OK, preempt_helper_register(q, 0), "helper register of a bound queue");
	EXPECT(PREEMPT_ERR_QUEUE_REFUSED, preempt_helper_enter(s, 1), "helper enter over a bogus queue fails");
	EXPECT(PREEMPT_ERR_INVALID_ARGUMENT, preempt_helper_leave(s, 1), "... and entered nothing (all or nothing)");
	EXPECT(PREEMPT_OK, preempt_session_close(s), "close the dbg-trap session (debugging off)");

	/* update-queue, forced. */
	o.mechanism = "update-queue";
	EXPECT(PREEMPT_OK, preempt_session_open("kfd", &o, &s), "kfd session with update-queue (forced)");
	d.queue_id = 0xdead;
	EXPECT_MSG(PREEMPT_ERR_INVALID_ARGUMENT, preempt_queue_bind(s, &d, &q), "ring address",
		   "update-queue needs the ring of a queue the snapshot does not know");
	d.ring_base_address = 0x7f0000000000ull;
	d.ring_size = 4096;
	EXPECT(PREEMPT_OK, preempt_queue_bind(s, &d, &q), "bind 0xdead with a ring");
	EXPECT(PREEMPT_ERR_KFD, preempt_suspend(q, NULL), "update-queue suspend of a made-up queue is a KFD error");
	check(preempt_last_errno() == EFAULT, "... with errno EFAULT (amdkfd: no such queue)", preempt_last_errno());
	printf("  %s\n", preempt_last_error());
	EXPECT(PREEMPT_OK, preempt_session_close(s), "close the update-queue session");

	/* preempt-queues, forced: the patched kernel's per-queue ioctls, ENOTTY on a stock kernel. */
	o.mechanism = "preempt-queues";
	if (patched) {
		EXPECT(PREEMPT_OK, preempt_session_open("kfd", &o, &s), "kfd session with preempt-queues (patched kernel)");
		EXPECT(PREEMPT_OK, preempt_queue_bind(s, &d, &q), "bind 0xdead");
		EXPECT_MSG(PREEMPT_ERR_QUEUE_REFUSED, preempt_suspend(q, NULL), "INVALID",
			   "preempt-queues suspend of a made-up queue: the kernel says INVALID");
		EXPECT(PREEMPT_OK, preempt_session_close(s), "close the preempt-queues session");
	} else {
		EXPECT_MSG(PREEMPT_ERR_UNAVAILABLE, preempt_session_open("kfd", &o, &s), "ENOTTY",
			   "preempt-queues on a stock kernel is UNAVAILABLE (ENOTTY)");
	}

	/* The first session's close turned debugging off: a new dbg-trap session opens. */
	o.mechanism = "dbg-trap";
	EXPECT(PREEMPT_OK, preempt_session_open("kfd", &o, &s), "dbg-trap again after close (state restored)");
	EXPECT(PREEMPT_OK, preempt_session_close(s), "close it");
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], WORKER_ARG) == 0)
		return preempt_host_worker_main() == PREEMPT_OK ? 0 : 1;
	if (argc > 1 && strcmp(argv[1], "signal-child") == 0)
		return signal_child();
	if (argc > 1 && strcmp(argv[1], "close-child") == 0)
		return close_child();
	if (argc > 1 && strcmp(argv[1], "host") == 0) {
		host_tests();
		signal_test();
		fork_test();
		hold_test();
		close_test();
	} else if (argc > 2 && strcmp(argv[1], "kfd") == 0 &&
		   (strcmp(argv[2], "--stock") == 0 || strcmp(argv[2], "--patched") == 0)) {
		kfd_tests(strcmp(argv[2], "--patched") == 0);
	} else {
		fprintf(stderr, "usage: %s host | kfd --stock|--patched\n", argv[0]);
		return 2;
	}
	printf("capi_test: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
