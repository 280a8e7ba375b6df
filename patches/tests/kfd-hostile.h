/* SPDX-License-Identifier: MIT */
/* Shared by kfd-hostile.c (the args phase, main) and kfd-hostile-races.c. */
#ifndef KFD_HOSTILE_H
#define KFD_HOSTILE_H
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/kfd_ioctl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The patched ABI (patches/0003), kept here so that the test builds against
 * the stock header too. */
struct preempt_args {
	uint64_t queue_array_ptr;
	uint32_t num_queues, flags, grace_period, version;
	uint64_t kernel_ns;
	uint32_t num_done, pad;
};
_Static_assert(sizeof(struct preempt_args) == 40, "40-byte struct");
#define NR_PREEMPT 0x40
#define NR_RESUME 0x41
#define FLAG_GRACE 1u
#define MAX_IDS 1024u
#define INVALID (1u << 31)
#define PG 4096UL
/* The numbers both tables dispatch end here (AMDKFD_COMMAND_END). */
#define NR_END 0x27
#define PREEMPT_REQ(nr) (0xc0284b00UL | (nr))	/* _IOWR('K', nr, 40 bytes) */

extern int patched, known_stock_bugs;
extern atomic_long unexpected, calls;
extern const char *phase;

/* Counts every unexpected answer, prints the first 40. */
#define BAD(...) do { if (atomic_fetch_add(&unexpected, 1) < 40) { \
	printf("UNEXPECTED [%s] ", phase); printf(__VA_ARGS__); printf("\n"); \
	fflush(stdout); } } while (0)

uint64_t rnd(uint64_t *s);
unsigned int req(unsigned int dir, unsigned int type, unsigned int nr, unsigned int size);
/* ioctl(): the return value if >= 0, else -errno; counts the call. */
int kcall(int fd, unsigned long cmd, void *arg);
/* "0", "EINVAL", ... for a kcall() result. */
const char *ename(int r);

int phase_threads(int fd, uint64_t seed);
void phase_procs(int fd, uint64_t seed);
int exec_stage(int fd, unsigned int flags);
#endif
