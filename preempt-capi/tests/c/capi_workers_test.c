// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * The host device's worker processes against the world outside the library, from C:
 *
 *   - a worker killed (from outside, while its stream is suspended, while a command runs): every
 *     later call on the stream returns PREEMPT_ERR_DEVICE naming the worker's pid and how it
 *     ended, and the application lives on (a write to the dead worker raised SIGPIPE, whose
 *     default action killed a C application: exit 141);
 *   - streams created by a thread that then exits keep their workers (PR_SET_PDEATHSIG fires
 *     when the *thread* that forked a worker exits);
 *   - Ctrl-Z then fg (SIGTSTP, then SIGCONT, to the application's process group) leaves a
 *     suspended stream's workers stopped;
 *   - an application that ignores SIGCHLD (its children are reaped by the kernel).
 *
 *   capi_workers_test      every case, each in a child process of its own (a case that kills
 *                          its process, e.g. by SIGPIPE, is a failure, not the end of the run)
 *
 * The program serves as its own host-device worker (preempt_options.host_worker_arg).
 * Output: "PASS capi-workers: ..." / "FAIL capi-workers: ..." lines, then
 * "capi_workers_test: N passed, M failed". Exit status: 0 all passed, 1 a failure.
 */
#define _GNU_SOURCE
#include "preempt_kfd.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WORKER_ARG "--preempt-host-worker"
#define MS 1000000ull
/* Every wait of this test is bounded by this many milliseconds. */
#define LONG_MS 30000

static int passed, failed;

static void check(int ok, const char *what, int code)
{
	if (ok) {
		passed++;
		printf("PASS capi-workers: %s\n", what);
	} else {
		failed++;
		printf("FAIL capi-workers: %s: got %s (%d): %s\n", what, preempt_status_name(code), code,
		       preempt_last_error());
	}
	fflush(stdout);
}

#define EXPECT(want, call, what) do { int rc_ = (call); check(rc_ == (want), what, rc_); } while (0)

static void sleep_ms(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&t, NULL);
}

static preempt_options host_options(uint32_t workers)
{
	preempt_options o;
	preempt_options_init(&o);
	o.host_worker = "/proc/self/exe";
	o.host_worker_arg = WORKER_ARG;
	o.host_workers = workers;
	return o;
}

/* The scheduler state of `pid` ('R', 'S', 'T', 'Z', ...), 0 if it is gone; its parent in *ppid. */
static char proc_state(pid_t pid, pid_t *ppid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')'); /* the command name may contain anything */
	char st = 0;
	int pp = 0;
	if (!p || sscanf(p + 1, " %c %d", &st, &pp) != 2)
		return 0;
	if (ppid)
		*ppid = pp;
	return st;
}

static int has_ended(pid_t pid)
{
	char s = proc_state(pid, NULL);
	return s == 0 || s == 'Z' || s == 'X';
}

/* Up to `max` children of this process (the workers it started), by scanning /proc. */
static int children(pid_t *out, int max)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;
	while (d && (e = readdir(d)) != NULL && n < max) {
		pid_t pid = (pid_t)atoi(e->d_name), ppid = 0;
		if (pid > 0 && proc_state(pid, &ppid) && ppid == getpid() && !has_ended(pid))
			out[n++] = pid;
	}
	if (d)
		closedir(d);
	return n;
}

/* The one worker started since `before` (its count of children), or 0. */
static pid_t new_worker(int before)
{
	pid_t pids[64];
	int n = children(pids, 64);
	return n == before + 1 ? pids[n - 1] : 0;
}

/* SIGKILL `pid` and wait (bounded) until it has ended. */
static int kill_worker(pid_t pid)
{
	if (pid <= 0 || kill(pid, SIGKILL) != 0)
		return 0;
	for (int i = 0; i < LONG_MS && !has_ended(pid); i++)
		sleep_ms(1);
	return has_ended(pid);
}

/* The call failed with PREEMPT_ERR_DEVICE, and the message names worker `pid` and `how`. */
static void expect_dead(int rc, pid_t pid, const char *how, const char *what)
{
	char needle[64];
	snprintf(needle, sizeof(needle), "(pid %d) %s", (int)pid, how);
	int ok = rc == PREEMPT_ERR_DEVICE && strstr(preempt_last_error(), needle) != NULL;
	check(ok, what, rc);
	if (!ok)
		printf("  expected the message to name \"%s\"\n", needle);
}

/* Every call on `lp`, whose worker `pid` ended `how`, fails naming it; check lists it; close works. */
static void expect_stream_dead(preempt_session_t s, preempt_stream_t lp, pid_t pid, const char *how)
{
	expect_dead(preempt_submit_delay(lp, MS, NULL), pid, how, "submit_delay on a stream with a dead worker");
	printf("  %s\n", preempt_last_error());
	expect_dead(preempt_synchronize(lp), pid, how, "synchronize on a stream with a dead worker");
	expect_dead(preempt_suspend(lp, NULL), pid, how, "suspend of a stream with a dead worker");
	int flag = -1;
	preempt_is_suspended(lp, &flag);
	check(flag == 0, "... which is not left suspended", flag);
	preempt_check_result r;
	char problems[1024] = "", needle[32];
	snprintf(needle, sizeof(needle), "(pid %d)", (int)pid);
	EXPECT(PREEMPT_OK, preempt_check(lp, &r, problems, sizeof(problems)), "check");
	check(r.problems > 0 && strstr(problems, needle) != NULL, "... lists the dead worker as a problem", 0);
	EXPECT(PREEMPT_OK, preempt_session_close(s), "close a session with a dead worker");
}

static void case_lp_worker_killed(void)
{
	preempt_options o = host_options(1);
	preempt_session_t s = 0;
	preempt_stream_t lp = 0;
	EXPECT(PREEMPT_OK, preempt_session_open("host", &o, &s), "open");
	EXPECT(PREEMPT_OK, preempt_stream_create(s, PREEMPT_LEVEL_LV3, &lp), "create an Lv3 stream");
	pid_t pid = new_worker(0);
	EXPECT(PREEMPT_OK, preempt_submit_delay(lp, MS, NULL), "submit");
	EXPECT(PREEMPT_OK, preempt_synchronize(lp), "synchronize");
	check(kill_worker(pid), "SIGKILL the stream's worker", pid);
	expect_stream_dead(s, lp, pid, "was killed by SIGKILL");
}

static void case_hp_worker_killed(void)
{
	preempt_options o = host_options(1);
	preempt_session_t s = 0;
	EXPECT(PREEMPT_OK, preempt_session_open("host", &o, &s), "open");
	EXPECT(PREEMPT_OK, preempt_hp_submit_delay(s, MS), "HP submit (starts the HP worker)");
	EXPECT(PREEMPT_OK, preempt_hp_synchronize(s), "HP synchronize");
	pid_t pid = new_worker(0);
	check(kill_worker(pid), "SIGKILL the HP worker", pid);
	for (int i = 0; i < 3; i++)
		expect_dead(preempt_hp_submit_delay(s, MS), pid, "was killed by SIGKILL",
			    "HP submit to a dead worker is DEVICE (no SIGPIPE)");
	expect_dead(preempt_hp_synchronize(s), pid, "was killed by SIGKILL", "HP synchronize with a dead worker");
	EXPECT(PREEMPT_OK, preempt_session_close(s), "close");
}

static void case_killed_while_suspended(void)
{
	preempt_options o = host_options(2);
	preempt_session_t s = 0;
	preempt_stream_t lp = 0;
	pid_t w[64];
	EXPECT(PREEMPT_OK, preempt_session_open("host", &o, &s), "open");
	EXPECT(PREEMPT_OK, preempt_stream_create(s, PREEMPT_LEVEL_LV3, &lp), "create an Lv3 stream of 2 workers");
	check(children(w, 64) == 2, "2 workers", 0);
	EXPECT(PREEMPT_OK, preempt_submit_delay(lp, 20 * MS, NULL), "submit");
	sleep_ms(5);
	EXPECT(PREEMPT_OK, preempt_suspend(lp, NULL), "suspend");
	check(kill_worker(w[0]), "SIGKILL a stopped worker", w[0]);
	expect_dead(preempt_resume(lp), w[0], "was killed by SIGKILL", "resume: DEVICE, naming the dead worker");
	int flag = -1;
	preempt_is_suspended(lp, &flag);
	check(flag == 0, "... and the stream is no longer suspended", flag);
	char st = 'T';
	for (int i = 0; i < LONG_MS && st == 'T'; i++, sleep_ms(1))
		st = proc_state(w[1], NULL);
	check(st != 'T', "... and the living worker runs again", st);
	expect_stream_dead(s, lp, w[0], "was killed by SIGKILL");
}

static void case_killed_while_running(void)
{
	preempt_options o = host_options(1);
	preempt_session_t s = 0;
	preempt_stream_t lp = 0;
	EXPECT(PREEMPT_OK, preempt_session_open("host", &o, &s), "open");
	EXPECT(PREEMPT_OK, preempt_stream_create(s, PREEMPT_LEVEL_LV3, &lp), "create an Lv3 stream");
	pid_t pid = new_worker(0);
	EXPECT(PREEMPT_OK, preempt_submit_delay(lp, 9000 * MS, NULL), "submit a 9 s command (under the 10 s maximum)");
	sleep_ms(50);
	check(kill_worker(pid), "SIGKILL the worker while it runs the command", pid);
	expect_dead(preempt_synchronize(lp), pid, "was killed by SIGKILL", "synchronize ends with DEVICE");
	expect_stream_dead(s, lp, pid, "was killed by SIGKILL");
}

struct made { preempt_session_t s; preempt_stream_t lp; int rc; };

static void *make_streams(void *arg)
{
	struct made *m = arg;
	preempt_options o = host_options(1);
	m->rc = preempt_session_open("host", &o, &m->s);
	if (m->rc == PREEMPT_OK)
		m->rc = preempt_stream_create(m->s, PREEMPT_LEVEL_LV3, &m->lp);
	if (m->rc == PREEMPT_OK)
		m->rc = preempt_hp_submit_delay(m->s, MS);
	return NULL;
}

static void case_created_by_a_thread_that_exits(void)
{
	struct made m = { 0, 0, -1 };
	pthread_t t;
	pthread_create(&t, NULL, make_streams, &m);
	pthread_join(t, NULL);
	check(m.rc == PREEMPT_OK, "a thread opens a session, creates an LP stream and uses HP, then exits", m.rc);
	sleep_ms(100); /* the parent-death signal came, if it did, when the thread exited */
	for (int i = 0; i < 5; i++)
		EXPECT(PREEMPT_OK, preempt_submit_delay(m.lp, MS, NULL), "submit from main");
	EXPECT(PREEMPT_OK, preempt_suspend(m.lp, NULL), "suspend");
	EXPECT(PREEMPT_OK, preempt_resume(m.lp), "resume");
	EXPECT(PREEMPT_OK, preempt_synchronize(m.lp), "synchronize");
	preempt_check_result r;
	EXPECT(PREEMPT_OK, preempt_check(m.lp, &r, NULL, 0), "check");
	check(r.finished && r.problems == 0 && r.exactly_once == 5, "... every command ran exactly once", 0);
	EXPECT(PREEMPT_OK, preempt_hp_submit_delay(m.s, MS), "HP submit from main");
	EXPECT(PREEMPT_OK, preempt_hp_synchronize(m.s), "HP synchronize");
	EXPECT(PREEMPT_OK, preempt_session_close(m.s), "close");
}

static void case_sigchld_ignored(void)
{
	/* The kernel reaps the children of a process that ignores SIGCHLD: no zombie, no exit
	 * status for the library to read. */
	signal(SIGCHLD, SIG_IGN);
	preempt_options o = host_options(1);
	preempt_session_t s = 0;
	preempt_stream_t lp = 0;
	EXPECT(PREEMPT_OK, preempt_session_open("host", &o, &s), "open (SIGCHLD ignored)");
	EXPECT(PREEMPT_OK, preempt_stream_create(s, PREEMPT_LEVEL_LV3, &lp), "create an Lv3 stream");
	pid_t pid = new_worker(0);
	for (int i = 0; i < 10; i++)
		preempt_submit_delay(lp, MS, NULL);
	EXPECT(PREEMPT_OK, preempt_suspend(lp, NULL), "suspend");
	EXPECT(PREEMPT_OK, preempt_resume(lp), "resume");
	EXPECT(PREEMPT_OK, preempt_synchronize(lp), "synchronize");
	check(kill_worker(pid), "SIGKILL the worker (reaped by the kernel at once)", pid);
	expect_stream_dead(s, lp, pid, "has ended and was reaped by someone else");
}

/* Ctrl-Z then fg, as a shell does it, to a job that holds a stream suspended: the job is this
 * child, in a process group of its own; the test's parent process plays the shell. */
static void job_control(void)
{
	int up[2], down[2];
	if (pipe(up) != 0 || pipe(down) != 0) {
		check(0, "pipes", errno);
		return;
	}
	pid_t job = fork();
	if (job == 0) {
		setpgid(0, 0);
		close(up[0]);
		close(down[1]);
		preempt_options o = host_options(2);
		preempt_session_t s = 0;
		preempt_stream_t lp = 0;
		pid_t w[64];
		char ch;
		if (preempt_session_open("host", &o, &s) != PREEMPT_OK ||
		    preempt_stream_create(s, PREEMPT_LEVEL_LV3, &lp) != PREEMPT_OK ||
		    preempt_submit_delay(lp, 50 * MS, NULL) != PREEMPT_OK || children(w, 64) != 2)
			_exit(3);
		sleep_ms(5);
		if (preempt_suspend(lp, NULL) != PREEMPT_OK)
			_exit(4);
		dprintf(up[1], "%d %d\n", (int)w[0], (int)w[1]);
		while (read(down[0], &ch, 1) > 0) /* until the shell closes it */
			;
		preempt_check_result r;
		int ok = preempt_resume(lp) == PREEMPT_OK && preempt_synchronize(lp) == PREEMPT_OK &&
			 preempt_check(lp, &r, NULL, 0) == PREEMPT_OK && r.exactly_once == 1 && r.problems == 0 &&
			 preempt_session_close(s) == PREEMPT_OK;
		_exit(ok ? 0 : 5);
	}
	setpgid(job, job);
	close(up[1]);
	close(down[0]);
	int w0 = 0, w1 = 0;
	FILE *f = fdopen(up[0], "r");
	int ready = f && fscanf(f, "%d %d", &w0, &w1) == 2;
	check(ready, "a job (own process group) suspends a stream of 2 workers", 0);
	if (ready) {
		kill(-job, SIGTSTP);
		char st = 0;
		for (int i = 0; i < LONG_MS && st != 'T'; i++, sleep_ms(1))
			st = proc_state(job, NULL);
		check(st == 'T', "Ctrl-Z (SIGTSTP to the job's group) stops the application", st);
		kill(-job, SIGCONT);
		for (int i = 0; i < LONG_MS && st == 'T'; i++, sleep_ms(1))
			st = proc_state(job, NULL);
		check(st != 'T', "fg (SIGCONT to the job's group) continues the application", st);
		/* SIGCONT wakes whatever it reaches before kill() returns; look a while longer. */
		int stopped = 1;
		for (int i = 0; i < 40; i++, sleep_ms(5))
			stopped &= proc_state(w0, NULL) == 'T' && proc_state(w1, NULL) == 'T';
		check(stopped, "... and the suspended stream's workers stay stopped", 0);
	}
	close(down[1]);
	int status = 0;
	pid_t done = 0;
	for (int i = 0; i < LONG_MS / 10 && (done = waitpid(job, &status, WNOHANG)) == 0; i++)
		sleep_ms(10);
	if (done == 0) {
		kill(-job, SIGKILL);
		waitpid(job, &status, 0);
	}
	check(done == job && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "the job resumes its stream, every command ran exactly once, it closes", status);
	if (f)
		fclose(f);
}

/* Runs `fn` in a child process: its checks count there; here, whether it ended well. */
static void in_child(const char *name, void (*fn)(void))
{
	printf("-- %s\n", name);
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		fn();
		fflush(stdout);
		_exit(failed ? 1 : 0);
	}
	int status = 0;
	pid_t done = 0;
	for (int i = 0; i < LONG_MS / 10 * 2 && (done = waitpid(pid, &status, WNOHANG)) == 0; i++)
		sleep_ms(10);
	if (done == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	int ok = done == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
	ok ? passed++ : failed++;
	if (ok)
		printf("PASS capi-workers: %s: every check passed\n", name);
	else if (WIFSIGNALED(status))
		printf("FAIL capi-workers: %s: the application was killed by signal %d (%s)\n", name, WTERMSIG(status),
		       strsignal(WTERMSIG(status)));
	else
		printf("FAIL capi-workers: %s: exit status %d\n", name, WEXITSTATUS(status));
	fflush(stdout);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], WORKER_ARG) == 0)
		return preempt_host_worker_main() == PREEMPT_OK ? 0 : 1;
	if (argc > 1) {
		fprintf(stderr, "usage: %s\n", argv[0]);
		return 2;
	}
	in_child("an LP worker killed from outside", case_lp_worker_killed);
	in_child("the HP worker killed from outside", case_hp_worker_killed);
	in_child("a worker killed while its stream is suspended", case_killed_while_suspended);
	in_child("a worker killed while a command runs", case_killed_while_running);
	in_child("streams created by a thread that exits", case_created_by_a_thread_that_exits);
	in_child("an application that ignores SIGCHLD", case_sigchld_ignored);
	in_child("Ctrl-Z then fg while a stream is suspended", job_control);
	printf("capi_workers_test: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
