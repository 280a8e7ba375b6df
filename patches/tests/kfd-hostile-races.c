// SPDX-License-Identifier: MIT
/*
 * The racy phases of kfd-hostile (see kfd-hostile.c): threads against each
 * other and against close(), the debugger ioctls interleaved with the new
 * ones, and fork/exit/exec while calls are in flight.
 */
#include "kfd-hostile.h"

static atomic_int cur_fd = -1, fd_gen, stop_workers, stop_closer;

/* Each worker owns its buffers: no other thread writes them. */
struct worker {
	pthread_t t;
	uint64_t seed;
	int fixed_fd;		/* >= 0: use this fd (children), else cur_fd */
	uint32_t ids[MAX_IDS];
};

/* A preempt/resume call with a private struct and id array, checked against
 * what the ABI promises in a guest without queues: every id INVALID. */
static void checked_preempt(int fd, uint64_t *s, uint32_t *ids, int gen_before)
{
	static const uint32_t counts[] = { 0, 1, 7, MAX_IDS, MAX_IDS + 1 };
	unsigned int nr = NR_PREEMPT + rnd(s) % 2;
	struct preempt_args a = { 0 };
	uint32_t i;
	int r, want;

	a.num_queues = counts[rnd(s) % 5];
	a.flags = nr == NR_PREEMPT ? rnd(s) % 2 : 0;
	a.grace_period = rnd(s) % 0x100;
	a.queue_array_ptr = rnd(s) % 8 ? (uintptr_t)ids : 0;
	for (i = 0; i < a.num_queues && i < MAX_IDS; i++)
		ids[i] = rnd(s) % 2048;
	if (!patched)
		want = -ENOTTY;
	else if (a.num_queues > MAX_IDS || (a.num_queues && !a.queue_array_ptr))
		want = -EINVAL;
	else
		want = 0;
	r = kcall(fd, PREEMPT_REQ(nr), &a);
	if (r == -EBADF && (gen_before & 1 || atomic_load(&fd_gen) != gen_before))
		return;		/* the fd was closed under the call */
	if (r != want) {
		BAD("nr 0x%x num %u ids@%#llx: %s, want %s", nr, a.num_queues,
		    (unsigned long long)a.queue_array_ptr, ename(r), ename(want));
		return;
	}
	if (r || !a.queue_array_ptr)
		return;
	if (a.version != 1 || a.num_done)
		BAD("nr 0x%x: version %u num_done %u", nr, a.version, a.num_done);
	for (i = 0; i < a.num_queues; i++)
		if (!(ids[i] & INVALID)) {
			BAD("nr 0x%x: id %u came back without INVALID", nr, i);
			break;
		}
}

static void *worker_main(void *p)
{
	struct worker *w = p;

	while (!atomic_load(&stop_workers)) {
		int gen = atomic_load(&fd_gen);
		int fd = w->fixed_fd >= 0 ? w->fixed_fd : atomic_load(&cur_fd);

		checked_preempt(fd, &w->seed, w->ids, gen);
	}
	return NULL;
}

/* Closes the shared fd under the workers and opens /dev/kfd again (the same
 * kfd_process: it is found by the mm). fd_gen is odd while the fd is closed. */
static void *closer_main(void *p)
{
	uint64_t *s = p;

	while (!atomic_load(&stop_closer)) {
		int fd = atomic_load(&cur_fd), nfd;

		usleep(1000 + rnd(s) % 20000);
		atomic_fetch_add(&fd_gen, 1);
		close(fd);
		nfd = open("/dev/kfd", O_RDWR | O_CLOEXEC);
		if (nfd < 0) {
			BAD("reopening /dev/kfd: %s", strerror(errno));
			nfd = fd;
		}
		atomic_store(&cur_fd, nfd);
		atomic_fetch_add(&fd_gen, 1);
	}
	return NULL;
}

/* A call on the shared fd, made again when it met EBADF because the closer
 * closed the fd under it (a debugger step must not be skipped: a RUNTIME_ENABLE
 * while the debug trap stays on would wait for a debugger). */
static int shared_call(unsigned long cmd, void *arg)
{
	int r, gen;

	do {
		gen = atomic_load(&fd_gen);
		r = kcall(atomic_load(&cur_fd), cmd, arg);
	} while (r == -EBADF && (gen & 1 || atomic_load(&fd_gen) != gen));
	return r;
}

/* A DBG_TRAP call on this process. */
static int dbg(struct kfd_ioctl_dbg_trap_args *a, uint32_t op)
{
	a->pid = getpid();
	a->op = op;
	return shared_call(AMDKFD_IOC_DBG_TRAP, a);
}

#define END_OK INT32_MIN	/* ends a list of accepted kcall() results */

static void expect(int r, const char *what, const int *ok)
{
	for (; *ok != END_OK; ok++)
		if (r == *ok)
			return;
	BAD("%s: %s", what, ename(r));
}

/* The debugger API on this process, interleaved with the workers' calls:
 * RUNTIME_ENABLE, DBG_TRAP ENABLE, random SUSPEND/RESUME/SNAPSHOT/unknown ops,
 * DISABLE, runtime disable (this order: a RUNTIME_ENABLE while the debug trap
 * is on waits for a debugger, by design; docs/kfd-facts.md). */
static void *debugger_main(void *p)
{
	static uint32_t ids[MAX_IDS];
	static uint8_t snap[64 * 64];
	static const int ok_rt[] = { 0, -EBUSY, END_OK }, ok_zero[] = { 0, END_OK };
	static const int ok_op[] = { 0, -EINVAL, -EFAULT, -ENOMEM, -ENODEV, END_OK };
	uint64_t *s = p;
	struct kfd_runtime_info rinfo;
	int pipefd[2], rounds = 0;

	if (pipe2(pipefd, O_CLOEXEC | O_NONBLOCK))
		return NULL;
	while (!atomic_load(&stop_workers)) {
		struct kfd_ioctl_runtime_enable_args rt = { .mode_mask = KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK };
		struct kfd_ioctl_dbg_trap_args a;
		int k;

		expect(shared_call(AMDKFD_IOC_RUNTIME_ENABLE, &rt), "RUNTIME_ENABLE", ok_rt);
		memset(&a, 0, sizeof(a));
		a.enable.rinfo_ptr = (uintptr_t)&rinfo;
		a.enable.rinfo_size = sizeof(rinfo);
		a.enable.dbg_fd = pipefd[1];
		expect(dbg(&a, KFD_IOC_DBG_TRAP_ENABLE), "DBG_TRAP ENABLE", ok_zero);
		for (k = 0; k < 8; k++) {
			uint32_t n = rnd(s) % 4 ? rnd(s) % (MAX_IDS + 2) : (uint32_t)rnd(s), i;

			for (i = 0; i < n && i < MAX_IDS; i++)
				ids[i] = rnd(s) % 2048;
			memset(&a, 0, sizeof(a));
			switch (rnd(s) % 4) {
			case 0:
				a.suspend_queues.queue_array_ptr = (uintptr_t)ids;
				a.suspend_queues.num_queues = n;
				a.suspend_queues.grace_period = (uint32_t)rnd(s);
				expect(dbg(&a, KFD_IOC_DBG_TRAP_SUSPEND_QUEUES), "DBG_TRAP SUSPEND_QUEUES", ok_op);
				break;
			case 1:
				a.resume_queues.queue_array_ptr = (uintptr_t)ids;
				a.resume_queues.num_queues = n;
				expect(dbg(&a, KFD_IOC_DBG_TRAP_RESUME_QUEUES), "DBG_TRAP RESUME_QUEUES", ok_op);
				break;
			case 2:
				a.queue_snapshot.snapshot_buf_ptr = rnd(s) % 4 ? (uintptr_t)snap : (uintptr_t)rnd(s);
				a.queue_snapshot.num_queues = rnd(s) % 70;
				a.queue_snapshot.entry_size = rnd(s) % 128;
				expect(dbg(&a, KFD_IOC_DBG_TRAP_GET_QUEUE_SNAPSHOT), "DBG_TRAP GET_QUEUE_SNAPSHOT", ok_op);
				break;
			default:
				expect(dbg(&a, 15 + rnd(s) % 200), "DBG_TRAP unknown op", ok_op);
			}
		}
		memset(&a, 0, sizeof(a));
		expect(dbg(&a, KFD_IOC_DBG_TRAP_DISABLE), "DBG_TRAP DISABLE", ok_zero);
		rt.mode_mask = 0;
		expect(shared_call(AMDKFD_IOC_RUNTIME_ENABLE, &rt), "runtime disable", ok_zero);
		rounds++;
	}
	close(pipefd[0]);
	close(pipefd[1]);
	return (void *)(intptr_t)rounds;
}

static void start_workers(struct worker *w, int n, uint64_t seed, int fixed_fd)
{
	int i;

	atomic_store(&stop_workers, 0);
	for (i = 0; i < n; i++) {
		w[i].seed = seed * (i + 3) | 1;
		w[i].fixed_fd = fixed_fd;
		pthread_create(&w[i].t, NULL, worker_main, &w[i]);
	}
}

static void stop_all(struct worker *w, int n)
{
	int i;

	atomic_store(&stop_workers, 1);
	for (i = 0; i < n; i++)
		pthread_join(w[i].t, NULL);
}

/* Returns the fd the process ends the phase with (the closer replaced it). */
int phase_threads(int fd, uint64_t seed)
{
	static struct worker w[4];
	uint64_t cs = seed * 7 | 1, ds = seed * 11 | 1;
	pthread_t closer, debugger;
	void *rounds;
	long c0 = atomic_load(&calls);

	phase = "threads";
	atomic_store(&cur_fd, fd);
	start_workers(w, 4, seed, -1);
	pthread_create(&debugger, NULL, debugger_main, &ds);
	pthread_create(&closer, NULL, closer_main, &cs);
	sleep(3);
	atomic_store(&stop_closer, 1);
	pthread_join(closer, NULL);
	atomic_store(&stop_workers, 1);
	pthread_join(debugger, &rounds);
	stop_all(w, 4);
	printf("kfd-hostile: threads: %ld calls (4 workers, %ld debugger rounds, fd closed %d times), %ld unexpected\n",
	       atomic_load(&calls) - c0, (long)(intptr_t)rounds, atomic_load(&fd_gen) / 2, atomic_load(&unexpected));
	fflush(stdout);
	return atomic_load(&cur_fd);
}

/* A forked child: the parent's fd is not its own, then its own fd under its
 * own threads, and an end in the middle of their calls. */
static int child(int parent_fd, uint64_t seed)
{
	static struct worker w[2];
	struct kfd_ioctl_get_version_args v;
	struct preempt_args a = { 0 };
	int fd, r;

	atomic_store(&unexpected, 0);	/* the parent's count is the parent's */
	r = kcall(parent_fd, AMDKFD_IOC_GET_VERSION, &v);
	if (r != -EBADF)
		BAD("child: GET_VERSION on the parent's fd: %s, want EBADF", ename(r));
	r = kcall(parent_fd, PREEMPT_REQ(NR_PREEMPT), &a);
	if (r != (patched ? -EBADF : -ENOTTY))
		BAD("child: PREEMPT on the parent's fd: %s, want %s", ename(r), patched ? "EBADF" : "ENOTTY");
	fd = open("/dev/kfd", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		BAD("child: open /dev/kfd: %s", strerror(errno));
		_exit(1);
	}
	start_workers(w, 2, seed, fd);
	usleep(rnd(&seed) % 3000);
	switch (rnd(&seed) % 3) {
	case 0: exit(atomic_load(&unexpected) ? 1 : 0);		/* threads still in their calls */
	case 1: _exit(atomic_load(&unexpected) ? 1 : 0);
	default: pause();				/* the parent's SIGKILL */
	}
	return 1;
}

/* After exec: the fd opened before exec (no O_CLOEXEC) is still accepted (same
 * group leader). Reopening /dev/kfd here is the stock use-after-free. */
int exec_stage(int fd, unsigned int flags)
{
	struct kfd_ioctl_get_version_args v;
	struct kfd_ioctl_dbg_trap_args d = { 0 };
	uint32_t ids[4] = { 1, 2, 3, 4 };
	struct preempt_args a = { .queue_array_ptr = (uintptr_t)ids, .num_queues = 4 };
	int r, nfd;

	phase = "exec";
	patched = (flags & 1) != 0;
	known_stock_bugs = (flags & 2) != 0;
	if ((r = kcall(fd, AMDKFD_IOC_GET_VERSION, &v)))
		BAD("exec: GET_VERSION on the inherited fd: %s, want 0", ename(r));
	r = kcall(fd, PREEMPT_REQ(NR_PREEMPT), &a);
	if (r != (patched ? 0 : -ENOTTY))
		BAD("exec: PREEMPT on the inherited fd: %s", ename(r));
	else if (patched && !(ids[0] & ids[3] & INVALID))
		BAD("exec: PREEMPT on the inherited fd: ids not INVALID");
	d.pid = getpid();
	d.op = KFD_IOC_DBG_TRAP_DISABLE;	/* no kfd_process for the new mm yet */
	r = kcall(fd, AMDKFD_IOC_DBG_TRAP, &d);
	if (r != -ESRCH)
		BAD("exec: DBG_TRAP DISABLE before any open in the new image: %s, want ESRCH", ename(r));
	if (patched || known_stock_bugs) {
		nfd = open("/dev/kfd", O_RDWR | O_CLOEXEC);
		if (nfd < 0 || (r = kcall(nfd, AMDKFD_IOC_GET_VERSION, &v)))
			BAD("exec: reopen: %s", nfd < 0 ? strerror(errno) : ename(r));
		else
			close(nfd);
	}
	return atomic_load(&unexpected) ? 1 : 0;
}

static void run_exec_child(uint64_t seed)
{
	static struct worker w[1];
	char fds[16], flags[16];
	int kfd = open("/dev/kfd", O_RDWR);	/* no O_CLOEXEC: inherited by the new image */

	if (kfd < 0)
		_exit(2);
	start_workers(w, 1, seed, kfd);		/* a thread inside the ioctls at exec */
	usleep(rnd(&seed) % 2000);
	snprintf(fds, sizeof(fds), "%d", kfd);
	snprintf(flags, sizeof(flags), "%d", patched | known_stock_bugs << 1);
	execl("/proc/self/exe", "kfd-hostile", "--exec-stage", fds, flags, (char *)NULL);
	_exit(2);
}

void phase_procs(int fd, uint64_t seed)
{
	static struct worker w[2];
	uint64_t s = seed * 13 | 1;
	int i, forks = 0, execs = 0, killed = 0;
	long c0 = atomic_load(&calls);

	phase = "procs";
	start_workers(w, 2, seed * 17 | 1, fd);	/* the parent keeps calling through it all */
	for (i = 0; i < 48; i++) {
		int is_exec = i % 6 == 5, st;
		pid_t pid;

		fflush(stdout);
		pid = fork();
		if (pid < 0) {
			BAD("fork: %s", strerror(errno));
			break;
		}
		if (!pid) {
			phase = is_exec ? "exec" : "child";
			if (is_exec)
				run_exec_child(rnd(&s));
			child(fd, rnd(&s));
		}
		usleep(rnd(&s) % 4000);
		if (!is_exec && !kill(pid, SIGKILL))
			killed++;
		if (waitpid(pid, &st, 0) != pid) {
			BAD("waitpid: %s", strerror(errno));
			continue;
		}
		if (WIFEXITED(st) && WEXITSTATUS(st))
			BAD("%s %d exited with %d (its lines above)", is_exec ? "exec child" : "child", i, WEXITSTATUS(st));
		if (WIFSIGNALED(st) && WTERMSIG(st) != SIGKILL)
			BAD("%s %d died of signal %d", is_exec ? "exec child" : "child", i, WTERMSIG(st));
		is_exec ? execs++ : forks++;
	}
	stop_all(w, 2);
	printf("kfd-hostile: procs: %d forks (%d SIGKILLs sent), %d execs with an inherited fd%s, parent %ld calls, %ld unexpected\n",
	       forks, killed, execs,
	       patched || known_stock_bugs ? " and a reopen" : " (no reopen: the stock use-after-free, kfd-exec-reopen)",
	       atomic_load(&calls) - c0, atomic_load(&unexpected));
	fflush(stdout);
}
