// SPDX-License-Identifier: MIT OR Apache-2.0
/*
 * Sessions scheduled by the preempt-sched daemon, from C, on the host device
 * (docs/scheduler-daemon.md, docs/c-api.md "Scheduled by a daemon"):
 *
 *   - preempt_options.scheduler: a bad word is PREEMPT_ERR_INVALID_ARGUMENT, a daemon that
 *     cannot be reached PREEMPT_ERR_SCHEDULER; NULL takes $PREEMPT_SCHEDULER, "none" wins over
 *     it; a struct of the first version's size (before `scheduler`) is still accepted;
 *   - another process's high-priority block (preempt_helper_enter in a child process with its
 *     own scheduled session) suspends this process's registered stream: its workers are stopped,
 *     preempt_resume is PREEMPT_ERR_BUSY;
 *   - the daemon killed by SIGKILL with that block active: the stream is resumed by itself, no
 *     worker is left stopped (/proc/PID/stat), and every command ran exactly once.
 *
 *   capi_sched_test DAEMON     DAEMON: the preempt-sched binary
 *
 * Output: "PASS capi-sched: ..." / "FAIL capi-sched: ..." lines, then
 * "capi_sched_test: N passed, M failed". Exit status: 0 all passed, 1 a failure, 2 bad usage.
 * Every wait is bounded (LONG_MS).
 */
#define _GNU_SOURCE
#include "preempt_kfd.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MS 1000000ull
/* Every wait of this test is bounded by this many milliseconds. */
#define LONG_MS 20000

static int passed, failed;

static void check(int ok, const char *what, int code)
{
	if (ok) {
		passed++;
		printf("PASS capi-sched: %s\n", what);
	} else {
		failed++;
		printf("FAIL capi-sched: %s: got %s (%d): %s\n", what, preempt_status_name(code), code,
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

/* The state letter of /proc/PID/stat and the parent's pid; 0 once the process is gone. */
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
	char *close = strrchr(buf, ')');
	char state = 0;
	int parent = 0;
	if (!close || sscanf(close + 1, " %c %d", &state, &parent) != 2)
		return 0;
	if (ppid)
		*ppid = parent;
	return state;
}

/* Children of this process in state `state` other than `skip1`, `skip2` (the daemon and the
 * high-priority child): the host workers. */
static int children_in(char state, pid_t skip1, pid_t skip2)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;
	while (d && (e = readdir(d)) != NULL) {
		pid_t pid = (pid_t)atoi(e->d_name), ppid = 0;
		if (pid <= 0 || pid == skip1 || pid == skip2)
			continue;
		if (proc_state(pid, &ppid) == state && ppid == getpid())
			n++;
	}
	if (d)
		closedir(d);
	return n;
}

static int is_suspended(preempt_stream_t st)
{
	int s = -1;
	return preempt_is_suspended(st, &s) == PREEMPT_OK ? s : -1;
}

/* Polls until is_suspended(st) == want, at most LONG_MS. */
static int wait_suspended(preempt_stream_t st, int want)
{
	for (int i = 0; i < LONG_MS / 2; i++) {
		if (is_suspended(st) == want)
			return 1;
		sleep_ms(2);
	}
	return 0;
}

/* Reads one byte from `fd`, at most LONG_MS; 0 on timeout or end. */
static char read_byte(int fd)
{
	for (int i = 0; i < LONG_MS / 2; i++) {
		char c;
		ssize_t n = read(fd, &c, 1);
		if (n == 1)
			return c;
		if (n == 0)
			return 0;
		sleep_ms(2);
	}
	return 0;
}

static int open_scheduled(const char *scheduler, preempt_session_t *out)
{
	preempt_options o;
	preempt_options_init(&o);
	o.host_workers = 2;
	o.scheduler = scheduler;
	return preempt_session_open("host", &o, out);
}

/* The high-priority side, in a child process: its own session scheduled by the daemon, no
 * stream; 'e' enters a block of priority 1, 'l' leaves it, 'q' closes and exits. Each command
 * is answered with one byte: 'k' done, 'x' failed. */
static void hp_child(const char *scheduler, int cmd, int ack)
{
	preempt_session_t s = 0;
	char r = open_scheduled(scheduler, &s) == PREEMPT_OK ? 'k' : 'x';
	if (write(ack, &r, 1) != 1)
		_exit(3);
	for (;;) {
		char c = read_byte(cmd);
		int rc = PREEMPT_OK;
		if (c == 'e')
			rc = preempt_helper_enter(s, 1);
		else if (c == 'l')
			rc = preempt_helper_leave(s, 1);
		else
			break;
		r = rc == PREEMPT_OK ? 'k' : 'x';
		if (write(ack, &r, 1) != 1)
			_exit(3);
	}
	_exit(preempt_session_close(s) == PREEMPT_OK ? 0 : 4);
}

static pid_t start_daemon(const char *daemon, const char *socket, const char *log)
{
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd >= 0)
			dup2(fd, 2);
		execl(daemon, daemon, "--socket", socket, "--ack-timeout-ms", "20000", "--block-silence-ms",
		      "60000", (char *)NULL);
		_exit(127);
	}
	/* Ready once its log says it listens. */
	for (int i = 0; pid > 0 && i < LONG_MS / 5; i++) {
		char buf[4096] = { 0 };
		FILE *f = fopen(log, "r");
		if (f) {
			size_t n = fread(buf, 1, sizeof buf - 1, f);
			buf[n] = 0;
			fclose(f);
			if (strstr(buf, "listening on"))
				return pid;
		}
		sleep_ms(5);
	}
	return -1;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: capi_sched_test DAEMON\n");
		return 2;
	}
	/* Calm bounds on the waits for the daemon (default 50 ms): on a loaded machine a reply can be
	 * late, and the block would then run unscheduled; the bound itself is tested in preempt-sched. */
	setenv("PREEMPT_SCHEDULER_TIMEOUT_MS", "20000", 1);
	char dir[] = "/tmp/capi-sched-XXXXXX";
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	char socket[256], word[300], log[256], missing[300];
	snprintf(socket, sizeof socket, "%s/s.sock", dir);
	snprintf(word, sizeof word, "unix:%s", socket);
	snprintf(log, sizeof log, "%s/daemon.log", dir);
	snprintf(missing, sizeof missing, "unix:%s/nobody.sock", dir);

	/* The high-priority child is forked first, before this process has any thread (a child of
	 * a threaded process may not call the library before exec). */
	int to_child[2], from_child[2];
	/* O_CLOEXEC: the workers (exec'd from this process) must not hold the child's input open. */
	if (pipe2(to_child, O_CLOEXEC) || pipe2(from_child, O_CLOEXEC)) {
		perror("pipe");
		return 1;
	}
	pid_t daemon = start_daemon(argv[1], socket, log);
	check(daemon > 0, "the daemon starts and listens", 0);
	if (daemon <= 0)
		return 1;
	pid_t hp = fork();
	if (hp == 0) {
		close(to_child[1]);
		close(from_child[0]);
		hp_child(word, to_child[0], from_child[1]);
	}
	close(to_child[0]);
	close(from_child[1]);
	fcntl(from_child[0], F_SETFL, O_NONBLOCK);
	fcntl(to_child[1], F_SETFL, 0);
	check(read_byte(from_child[0]) == 'k', "the high-priority process opens its scheduled session", 0);

	/* The word, the environment and the precedence between them. */
	preempt_session_t s = 0;
	EXPECT(PREEMPT_ERR_INVALID_ARGUMENT, open_scheduled("tcp:localhost:1", &s), "a bad scheduler word is refused");
	check(strstr(preempt_last_error(), "unix:PATH") != NULL, "its message names the words", 0);
	EXPECT(PREEMPT_ERR_SCHEDULER, open_scheduled(missing, &s), "a daemon that cannot be reached fails the open");
	check(strstr(preempt_last_error(), "nobody.sock") != NULL, "its message names the socket", 0);
	setenv("PREEMPT_SCHEDULER", missing, 1);
	EXPECT(PREEMPT_ERR_SCHEDULER, open_scheduled(NULL, &s), "NULL takes $PREEMPT_SCHEDULER");
	EXPECT(PREEMPT_OK, open_scheduled("none", &s), "\"none\" wins over $PREEMPT_SCHEDULER");
	EXPECT(PREEMPT_OK, preempt_session_close(s), "close of the unscheduled session");
	{
		/* A program built against the first header: no scheduler field, $PREEMPT_SCHEDULER
		 * still applies (here: the daemon that is not there). */
		preempt_options o;
		preempt_options_init(&o);
		o.struct_size = (uint32_t)offsetof(preempt_options, scheduler);
		o.scheduler = "not read";
		EXPECT(PREEMPT_ERR_SCHEDULER, preempt_session_open("host", &o, &s),
		       "the first version's struct size is accepted, the environment applies");
	}
	setenv("PREEMPT_SCHEDULER", word, 1);
	EXPECT(PREEMPT_OK, open_scheduled(NULL, &s), "a session scheduled through $PREEMPT_SCHEDULER");
	unsetenv("PREEMPT_SCHEDULER");

	preempt_stream_t lp = 0;
	EXPECT(PREEMPT_OK, preempt_stream_create(s, PREEMPT_LEVEL_LV3, &lp), "an Lv3 stream");
	for (int i = 0; i < 10; i++)
		preempt_submit_delay(lp, 20 * MS, NULL);
	EXPECT(PREEMPT_OK, preempt_helper_register(lp, 0), "registered with the daemon");

	/* Another process's block suspends this process's stream. */
	char c = 'e';
	check(write(to_child[1], &c, 1) == 1 && read_byte(from_child[0]) == 'k',
	      "the other process enters its block", 0);
	check(is_suspended(lp) == 1, "the stream is suspended once the other's enter returned", 0);
	check(children_in('T', daemon, hp) == 2, "both workers are stopped (/proc/PID/stat: T)", 0);
	EXPECT(PREEMPT_ERR_BUSY, preempt_resume(lp), "the daemon's suspension is not the caller's to lift");

	/* The daemon dies with the block active: the stream resumes by itself. */
	kill(daemon, SIGKILL);
	waitpid(daemon, NULL, 0);
	check(wait_suspended(lp, 0), "resumed after the daemon's SIGKILL", 0);
	check(children_in('T', daemon, hp) == 0, "no worker left stopped", 0);
	EXPECT(PREEMPT_OK, preempt_synchronize(lp), "the commands run to the end");
	preempt_check_result r;
	EXPECT(PREEMPT_OK, preempt_check(lp, &r, NULL, 0), "check");
	check(r.exactly_once == 10 && r.problems == 0, "every command ran exactly once", 0);

	/* The other process leaves (unscheduled now) and closes. */
	c = 'l';
	check(write(to_child[1], &c, 1) == 1 && read_byte(from_child[0]) == 'k',
	      "the other process leaves its block without a daemon", 0);
	close(to_child[1]);
	int st = -1;
	for (int i = 0; i < LONG_MS / 5 && waitpid(hp, &st, WNOHANG) == 0; i++)
		sleep_ms(5);
	check(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the other process closes its session and exits 0", 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		printf("  the other process: wait status %#x\n", st);
	EXPECT(PREEMPT_OK, preempt_session_close(s), "close");

	char cmd[400];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "capi_sched_test: could not remove %s\n", dir);
	printf("capi_sched_test: %d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
