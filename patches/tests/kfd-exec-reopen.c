// SPDX-License-Identifier: MIT
/*
 * Reproducer for a use-after-free in stock amdkfd (Linux 6.12.y, fixed by
 * patch 0001 of this series): exec() with a /dev/kfd fd still open, then
 * open /dev/kfd again from the new image.
 *
 * The old kfd_process lives on through the inherited fd, and so does its
 * sysfs directory kfd/proc/<pid>. The second open creates a new kfd_process
 * for the same pid; kobject_init_and_add() fails on the duplicate name,
 * kfd_create_process() frees the kobject but keeps the pointer, and the
 * release work of the new process frees it again (refcount_t underflow,
 * kernfs warnings, list-poison faults, slab corruption).
 *
 * Needs no GPU: /dev/kfd with only a CPU node is enough.
 *
 *   kfd-exec-reopen [rounds]      (default 3)
 *
 * Exit status: 0 no sign of the bug, 1 the bug showed (kernel log lines
 * printed), 2 the test could not run. Build: gcc -static -O2 -Wall.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
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

static int kfd_version(int fd, unsigned int v[2])
{
	return ioctl(fd, KFD_GET_VERSION, v);
}

/* The image after exec: fd is the /dev/kfd fd of the image before. */
static int stage2(int oldfd)
{
	unsigned int v[2];
	int fd, r = 0;

	if (kfd_version(oldfd, v)) {
		printf("stage2: GET_VERSION on the inherited fd: %s\n",
		       strerror(errno));
	}
	fd = open("/dev/kfd", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		printf("stage2: reopening /dev/kfd: %s\n", strerror(errno));
		r = 3;
	} else {
		if (kfd_version(fd, v)) {
			printf("stage2: GET_VERSION on the new fd: %s\n",
			       strerror(errno));
			r = 3;
		}
		close(fd);
	}
	close(oldfd);
	return r;
}

static const char *const bad[] = {
	"refcount_t", "WARNING:", "BUG:", "KASAN", "Oops",
	"general protection", "kernfs: can not remove",
	"is not initialized, yet kobject_put", "list_del corruption",
	"list_add corruption", "Kernel panic", NULL
};

/* Prints and counts the kernel log lines after MARKER that show the bug. */
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
	int rounds = 3, failed = 0, hits = -1, fd, kmsg;
	unsigned int v[2];

	if (argc == 3 && !strcmp(argv[1], "--stage2"))
		return stage2(atoi(argv[2]));
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
	printf("kfd-exec-reopen: KFD %u.%u, %d round(s) of: open /dev/kfd, exec with the fd open, open /dev/kfd again\n",
	       v[0], v[1], rounds);

	for (int i = 0; i < rounds; i++) {
		char path[64], fdstr[16];
		struct stat st;
		int status;
		pid_t pid = fork();

		if (pid < 0) {
			perror("fork");
			return 2;
		}
		if (!pid) {
			int kfd = open("/dev/kfd", O_RDWR); /* not O_CLOEXEC */

			if (kfd < 0 || kfd_version(kfd, v))
				_exit(4);
			snprintf(fdstr, sizeof(fdstr), "%d", kfd);
			execl("/proc/self/exe", argv[0], "--stage2", fdstr,
			      (char *)NULL);
			_exit(5);
		}
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status)) {
			printf("round %d: child pid %d ended with status 0x%x\n",
			       i, pid, status);
			failed = 1;
		}
		/* Both kfd_processes of the pid are released by a work item. */
		snprintf(path, sizeof(path), "/sys/class/kfd/kfd/proc/%d", pid);
		for (int t = 0; t < 50 && !stat(path, &st); t++)
			usleep(100 * 1000);
		if (!stat(path, &st)) {
			printf("round %d: %s still exists 5 s after the process ended\n",
			       i, path);
			failed = 1;
		}
	}
	/* Let the release work run for the last round too. */
	sleep(2);
	hits = scan_log();
	if (hits < 0)
		return 2;
	if (hits)
		printf("kfd-exec-reopen: %d kernel log line(s) show the use-after-free in kfd_create_process()/kfd_process_wq_release()\n",
		       hits);
	if (failed || hits) {
		printf("kfd-exec-reopen: FAIL\n");
		return 1;
	}
	printf("kfd-exec-reopen: PASS (%d rounds, no kernel warning, no leftover kfd/proc directory)\n",
	       rounds);
	return 0;
}
