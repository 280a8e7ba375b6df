// SPDX-License-Identifier: MIT
/*
 * Reproducer for patches 0001 and 0002 of this series: exec() with a
 * /dev/kfd fd still open, then open /dev/kfd again from the new image.
 *
 * The old kfd_process lives on through the inherited fd. On stock amdkfd
 * (Linux 6.12.y) its sysfs directory kfd/proc/<pid> lives on with it; the
 * second open creates a new kfd_process for the same pid,
 * kobject_init_and_add() fails on the duplicate name (a stack dump:
 * "sysfs: cannot create duplicate filename"), kfd_create_process() frees
 * the kobject but keeps the pointer, and the release work of the new
 * process frees it again (refcount_t underflow, kernfs warnings,
 * list-poison faults, slab corruption). Patch 0001 stops the double free;
 * patch 0002 has the old kfd_process give proc/<pid> up when its mm goes
 * away, so that the new one gets it: no dump, and proc/<pid> shows the new
 * process (a pasid other than the old image's).
 *
 * Rounds alternate between two ways of reaching the reopen:
 *   plain:    a forked child opens /dev/kfd (no O_CLOEXEC) and execs;
 *   clone-vm: a task created with clone(CLONE_VM) (not a thread: a process
 *             of its own sharing its parent's mm) opens /dev/kfd and execs;
 *             the parent keeps the old mm, and with it the old kfd_process,
 *             alive across the exec.
 * In both, the new image checks that /dev/kfd opens again and that
 * proc/<pid> exists with a pasid other than the one before exec. Then the
 * kernel log is checked for the lines above and proc/<pid> for leftovers.
 *
 * Needs no GPU: /dev/kfd with only a CPU node is enough.
 *
 *   kfd-exec-reopen [rounds]      (default 4)
 *
 * Exit status: 0 no sign of the bugs, 1 a bug showed (the kernel log lines
 * and the failed checks printed), 2 the test could not run.
 * Build: gcc -static -O2 -Wall.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/klog.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* AMDKFD_IOC_GET_VERSION = _IOR('K', 0x01, struct { u32 major, minor; }) */
#define KFD_GET_VERSION 0x80084b01UL
#define MARKER "kfd-exec-reopen: start"
#define PROC_DIR "/sys/class/kfd/kfd/proc"

/* Exit statuses of the child stages (main reports them by name). */
enum {
	ST_OPEN_BEFORE = 4,	/* /dev/kfd did not open before exec */
	ST_EXEC = 5,		/* exec failed */
	ST_REOPEN = 3,		/* /dev/kfd did not open again after exec */
	ST_NO_DIR = 6,		/* no proc/<pid>/pasid after the reopen */
	ST_OLD_DIR = 7,		/* proc/<pid> still shows the old image */
	ST_NO_OLD_DIR = 8,	/* no proc/<pid>/pasid before exec */
	ST_CLONE = 9,		/* clone(CLONE_VM) failed */
};

static const char *status_name(int st)
{
	switch (st) {
	case ST_OPEN_BEFORE: return "/dev/kfd did not open before exec";
	case ST_EXEC: return "exec failed";
	case ST_REOPEN: return "/dev/kfd did not open again after exec";
	case ST_NO_DIR: return "the new process has no " PROC_DIR "/<pid> after the reopen";
	case ST_OLD_DIR: return PROC_DIR "/<pid> still shows the old image's process (same pasid) after the reopen";
	case ST_NO_OLD_DIR: return "no " PROC_DIR "/<pid> before exec";
	case ST_CLONE: return "clone(CLONE_VM) failed";
	default: return "unexpected status";
	}
}

static int kfd_version(int fd, unsigned int v[2])
{
	return ioctl(fd, KFD_GET_VERSION, v);
}

/*
 * proc/<pid>/pasid into buf (NUL-terminated, newline stripped); 0 on
 * success. Plain syscalls only: the clone-vm task shares its parent's
 * memory and must not take stdio locks.
 */
static int read_pasid(pid_t pid, char *buf, size_t len)
{
	char path[96];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), PROC_DIR "/%d/pasid", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
	return 0;
}

/* The image after exec: oldfd is the /dev/kfd fd of the image before. */
static int stage2(int oldfd, const char *oldpasid)
{
	char pasid[32];
	unsigned int v[2];
	int fd, r = 0;

	setvbuf(stdout, NULL, _IONBF, 0);
	if (kfd_version(oldfd, v)) {
		printf("stage2: GET_VERSION on the inherited fd: %s\n",
		       strerror(errno));
	}
	fd = open("/dev/kfd", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		printf("stage2: reopening /dev/kfd: %s\n", strerror(errno));
		r = ST_REOPEN;
	} else {
		if (kfd_version(fd, v)) {
			printf("stage2: GET_VERSION on the new fd: %s\n",
			       strerror(errno));
			r = ST_REOPEN;
		} else if (read_pasid(getpid(), pasid, sizeof(pasid))) {
			printf("stage2: pid %d: no %s/%d/pasid after the reopen\n",
			       (int)getpid(), PROC_DIR, (int)getpid());
			r = ST_NO_DIR;
		} else if (!strcmp(pasid, oldpasid)) {
			printf("stage2: pid %d: %s/%d shows pasid %s, the old image's\n",
			       (int)getpid(), PROC_DIR, (int)getpid(), pasid);
			r = ST_OLD_DIR;
		}
		close(fd);
	}
	close(oldfd);
	return r;
}

/*
 * Open /dev/kfd without O_CLOEXEC, note the pasid proc/<pid> shows, exec
 * stage 2 with both. Plain syscalls and snprintf only (see read_pasid()).
 */
static int open_and_exec(const char *argv0)
{
	char fdstr[16], pasid[32];
	unsigned int v[2];
	int kfd = open("/dev/kfd", O_RDWR); /* not O_CLOEXEC */

	if (kfd < 0 || kfd_version(kfd, v))
		return ST_OPEN_BEFORE;
	if (read_pasid(getpid(), pasid, sizeof(pasid)))
		return ST_NO_OLD_DIR;
	snprintf(fdstr, sizeof(fdstr), "%d", kfd);
	execl("/proc/self/exe", argv0, "--stage2", fdstr, pasid, (char *)NULL);
	return ST_EXEC;
}

static const char *clone_argv0;

static int clone_vm_task(void *unused)
{
	(void)unused;
	return open_and_exec(clone_argv0);
}

/*
 * The clone-vm round's forked child: a task that shares this process's mm
 * opens /dev/kfd and execs; this process keeps the old mm alive until that
 * task has reopened /dev/kfd and ended. Its pid goes to report_fd (the
 * directory main checks for leftovers).
 */
static int clone_vm_round(const char *argv0, int report_fd)
{
	static char stack[256 * 1024] __attribute__((aligned(16)));
	int status;
	pid_t task;

	clone_argv0 = argv0;
	task = clone(clone_vm_task, stack + sizeof(stack), CLONE_VM | SIGCHLD,
		     NULL);
	if (task < 0)
		return ST_CLONE;
	if (write(report_fd, &task, sizeof(task)) != sizeof(task))
		return ST_CLONE;
	if (waitpid(task, &status, 0) != task || !WIFEXITED(status))
		return ST_EXEC;
	return WEXITSTATUS(status);
}

static const char *const bad[] = {
	"refcount_t", "WARNING:", "BUG:", "KASAN", "Oops",
	"general protection", "kernfs: can not remove",
	"is not initialized, yet kobject_put", "list_del corruption",
	"list_add corruption", "Kernel panic",
	/* patch 0002: the duplicate proc/<pid> and its stack dump */
	"cannot create duplicate filename", "kobject_add_internal failed",
	"Creating procfs pid directory failed", "Call Trace:", NULL
};

/* Prints and counts the kernel log lines after MARKER that show a bug. */
static int scan_log(void)
{
	int n = klogctl(10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0);
	char *buf, *line, *save, *start;
	int hits = 0;

	if (n <= 0)
		n = 1 << 20;
	buf = malloc(n + 1);
	if (!buf)
		return -1;
	n = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, buf, n);
	if (n < 0) {
		printf("klogctl: %s\n", strerror(errno));
		free(buf);
		return -1;
	}
	buf[n] = 0;
	start = buf;
	for (char *m = strstr(buf, MARKER); m; m = strstr(m + 1, MARKER))
		start = m;
	for (line = strtok_r(start, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		for (int i = 0; bad[i]; i++) {
			if (strstr(line, bad[i])) {
				printf("kernel: %s\n", line);
				hits++;
				break;
			}
		}
	}
	free(buf);
	return hits;
}

int main(int argc, char **argv)
{
	int rounds = 4, failed = 0, hits = -1, fd, kmsg;
	unsigned int v[2];

	if (argc == 4 && !strcmp(argv[1], "--stage2"))
		return stage2(atoi(argv[2]), argv[3]);
	if (argc > 1)
		rounds = atoi(argv[1]);
	setvbuf(stdout, NULL, _IONBF, 0);

	fd = open("/dev/kfd", O_RDWR | O_CLOEXEC);
	if (fd < 0 || kfd_version(fd, v)) {
		printf("kfd-exec-reopen: cannot use /dev/kfd: %s\n",
		       strerror(errno));
		return 2;
	}
	close(fd);
	kmsg = open("/dev/kmsg", O_WRONLY);
	if (kmsg < 0 || write(kmsg, MARKER "\n", strlen(MARKER) + 1) < 0) {
		printf("kfd-exec-reopen: cannot write /dev/kmsg: %s\n",
		       strerror(errno));
		return 2;
	}
	close(kmsg);
	printf("kfd-exec-reopen: KFD %u.%u, %d round(s) of: open /dev/kfd, exec with the fd open, open /dev/kfd again (plain and clone-vm in turn)\n",
	       v[0], v[1], rounds);

	for (int i = 0; i < rounds; i++) {
		const char *mode = i % 2 ? "clone-vm" : "plain";
		char path[64];
		struct stat st;
		int status, p[2];
		pid_t pid, dirpid;

		if (pipe(p)) {
			perror("pipe");
			return 2;
		}
		pid = fork();
		if (pid < 0) {
			perror("fork");
			return 2;
		}
		if (!pid) {
			close(p[0]);
			if (i % 2)
				_exit(clone_vm_round(argv[0], p[1]));
			dirpid = getpid();
			if (write(p[1], &dirpid, sizeof(dirpid)) != sizeof(dirpid))
				_exit(2);
			close(p[1]);
			_exit(open_and_exec(argv[0]));
		}
		close(p[1]);
		if (read(p[0], &dirpid, sizeof(dirpid)) != sizeof(dirpid))
			dirpid = pid;
		close(p[0]);
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status)) {
			printf("round %d (%s): pid %d ended with status 0x%x: %s\n",
			       i, mode, (int)dirpid, status,
			       WIFEXITED(status) ? status_name(WEXITSTATUS(status)) : "killed");
			failed = 1;
		}
		/* Both kfd_processes of the pid are released by a work item. */
		snprintf(path, sizeof(path), PROC_DIR "/%d", (int)dirpid);
		for (int t = 0; t < 50 && !stat(path, &st); t++)
			usleep(100 * 1000);
		if (!stat(path, &st)) {
			printf("round %d (%s): %s still exists 5 s after the process ended\n",
			       i, mode, path);
			failed = 1;
		}
	}
	/* Let the release work run for the last round too. */
	sleep(2);
	hits = scan_log();
	if (hits < 0)
		return 2;
	if (hits)
		printf("kfd-exec-reopen: %d kernel log line(s) show the duplicate proc/<pid> or the use-after-free in kfd_create_process()/kfd_process_wq_release()\n",
		       hits);
	if (failed || hits) {
		printf("kfd-exec-reopen: FAIL\n");
		return 1;
	}
	printf("kfd-exec-reopen: PASS (%d rounds, the new process has its own %s/<pid>, no kernel warning or stack dump, no leftover directory)\n",
	       rounds, PROC_DIR);
	return 0;
}
