// SPDX-License-Identifier: MIT
/*
 * Hostile-input suite for /dev/kfd, run in the QEMU guest (no GPU) on the
 * stock and the patched kernel, with lockdep and KASAN on. It calls the
 * kernel as an attacker would and checks every answer against an oracle
 * derived from the dispatch code (kfd_ioctl()) and the documented ABI of
 * AMDKFD_IOC_PREEMPT_QUEUES/RESUME_QUEUES (patches/README.md):
 *
 *   args     fixed cases (counts 0/1/1024/1025/0xffffffff, every flag bit,
 *            NULL/unmapped/read-only/PROT_NONE/kernel/straddling pointers,
 *            struct sizes 0..16383 through the request's size bits, other
 *            type letters and direction bits, unknown numbers around
 *            0x27..0x4f), then seeded random structs;
 *   threads  four threads preempting/resuming, a debugger thread running
 *            RUNTIME_ENABLE, DBG_TRAP ENABLE/SUSPEND/RESUME/SNAPSHOT/DISABLE
 *            on the same process, and a thread closing and reopening the fd
 *            under them;
 *   procs    fork (the child's inherited fd must answer EBADF), exit, _exit
 *            and SIGKILL while the child's threads are inside the ioctls,
 *            and exec with an inherited fd while another thread is inside
 *            an ioctl (the new image may still use the fd: same group
 *            leader).
 *
 * Any answer outside the oracle fails the run; the guest harness also fails
 * on any WARNING/BUG/KASAN/lockdep line in the kernel log and on a hang (an
 * alarm here, QEMU's timeout there). The seed is printed; single-threaded
 * phases replay exactly, the racy phases only statistically.
 *
 * Not run on the stock kernel unless --known-stock-bugs: reopening /dev/kfd
 * after such an exec (the use-after-free that patch 0001 fixes; its own
 * expected-failure test is kfd-exec-reopen.c).
 *
 *   kfd-hostile --patched|--stock [--seed N] [--iters N] [--known-stock-bugs]
 *
 * Exit status: 0 pass, 1 an unexpected answer or a hang, 2 cannot run.
 * Build: gcc -static -O2 -Wall -pthread.
 */
#include "kfd-hostile.h"

int patched, known_stock_bugs;
atomic_long unexpected, calls;
const char *phase = "start";

uint64_t rnd(uint64_t *s)		/* xorshift64* */
{
	*s ^= *s >> 12; *s ^= *s << 25; *s ^= *s >> 27;
	return *s * 2685821657736338717ULL;
}

unsigned int req(unsigned int dir, unsigned int type, unsigned int nr, unsigned int size)
{
	return (dir << 30) | ((size & 0x3fff) << 16) | ((type & 0xff) << 8) | (nr & 0xff);
}

int kcall(int fd, unsigned long cmd, void *arg)
{
	int r;

	atomic_fetch_add(&calls, 1);
	r = ioctl(fd, cmd, arg);
	return r < 0 ? -errno : r;
}

const char *ename(int r)
{
	return r >= 0 ? (r ? "positive" : "0") : strerrorname_np(-r) ? strerrorname_np(-r) : "?";
}

/* ---- memory the pointers point into, and what the kernel can do there ----
 * Structs live in one area, id arrays in another, so that the kernel's write
 * of one never lands on the other; each area ends in a PROT_NONE guard page. */
static uint8_t *sa, *ia;	/* struct area, id area (RW) */
static uint8_t *ro;		/* 1 read-only page */
static uint8_t *gone;		/* unmapped */
#define SA_LEN (5 * PG)
#define IA_LEN (3 * PG)
#define KERNEL_PTR 0xffff888000000000ULL

static int in(uint64_t a, uint64_t len, const uint8_t *base, uint64_t size)
{
	return a >= (uintptr_t)base && a + len >= a && a + len <= (uintptr_t)base + size;
}

static int in_rw(uint64_t a, uint64_t len)
{
	return in(a, len, sa, SA_LEN) || in(a, len, ia, IA_LEN);
}

static int readable(uint64_t a, uint64_t len)
{
	return !len || in_rw(a, len) || in(a, len, ro, PG);
}

static uint8_t *map_guarded(size_t len)
{
	uint8_t *p = mmap(NULL, len + PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED || mprotect(p + len, PG, PROT_NONE))
		return NULL;
	return p;
}

static int setup_memory(void)
{
	sa = map_guarded(SA_LEN);
	ia = map_guarded(IA_LEN);
	ro = mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	gone = mmap(NULL, PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!sa || !ia || ro == MAP_FAILED || gone == MAP_FAILED)
		return -1;
	memset(ro, 0x5a, PG);
	return mprotect(ro, PG, PROT_READ) || munmap(gone, PG);
}

/* A pointer for len bytes in the struct area (0) or the id area (1), of a random kind. */
static uint64_t pick_ptr(uint64_t *s, uint64_t len, int ids)
{
	uint8_t *base = ids ? ia : sa;
	uint64_t size = ids ? IA_LEN : SA_LEN;

	switch (rnd(s) % 8) {
	case 0: return 0;
	case 1: return (uintptr_t)gone;
	case 2: return (uintptr_t)ro;
	case 3: return KERNEL_PTR + (rnd(s) % PG);
	case 4: return (uintptr_t)base + size - (len ? rnd(s) % len : 0);	/* runs into the guard */
	case 5: return (uintptr_t)base + 1;				/* misaligned */
	default: return (uintptr_t)base + (len < size ? (rnd(s) % (size - len)) & ~3ULL : 0);
	}
}

/* ---- the oracle for one call to 0x40/0x41 (and anything near them) ---- */
struct want {
	int err;		/* the errno, 0 for success */
	int ids_written;	/* the ids came back with statuses */
};

static struct want oracle(unsigned int nr, uint64_t sp, unsigned int usize, const struct preempt_args *a)
{
	struct want w = { 0, 0 };
	uint32_t valid = nr == NR_PREEMPT ? FLAG_GRACE : 0;
	uint64_t bytes = (uint64_t)a->num_queues * 4;

	/* Only numbers at or above AMDKFD_COMMAND_END are tried: of those, the
	 * patched table dispatches 0x40 and 0x41, the stock one none. The type
	 * letter and the direction bits are not checked by kfd_ioctl(). */
	if (!patched || (nr != NR_PREEMPT && nr != NR_RESUME)) {
		w.err = ENOTTY;
		return w;
	}
	if (!readable(sp, usize)) {		/* copy_from_user of the struct */
		w.err = EFAULT;
		return w;
	}
	if ((a->flags & ~valid) || a->pad || a->num_queues > MAX_IDS ||
	    ((a->flags & FLAG_GRACE) && a->grace_period > 0xff))
		w.err = EINVAL;
	else if (!a->num_queues)
		w.err = 0;
	else if (!a->queue_array_ptr)
		w.err = EINVAL;
	else if (!readable(a->queue_array_ptr, bytes))
		w.err = EFAULT;
	else if (!in_rw(a->queue_array_ptr, bytes))
		w.err = EFAULT;			/* read, processed, write-back fails */
	else
		w.ids_written = 1;
	if (usize && !in_rw(sp, usize))		/* copy_to_user of the struct */
		w.err = EFAULT;
	return w;
}

static void random_args(uint64_t *s, struct preempt_args *a)
{
	static const uint32_t counts[] = { 0, 1, 2, 1023, MAX_IDS, MAX_IDS + 1, 0xffffffffu, 0x80000000u };

	memset(a, 0, sizeof(*a));
	a->num_queues = rnd(s) % 3 ? counts[rnd(s) % 8] : (uint32_t)rnd(s);
	a->flags = rnd(s) % 4 ? (rnd(s) % 2) : (uint32_t)(1u << (rnd(s) % 32));
	a->grace_period = rnd(s) % 3 ? rnd(s) % 0x100 : (uint32_t)rnd(s);
	a->pad = rnd(s) % 8 ? 0 : (uint32_t)rnd(s);
	a->version = (uint32_t)rnd(s);
	a->num_done = (uint32_t)rnd(s);
	a->queue_array_ptr = pick_ptr(s, (uint64_t)(a->num_queues <= MAX_IDS ? a->num_queues : 1) * 4, 1);
}

/* One call with a struct of usize bytes at sp (in the struct area), checked. */
static void one(int fd, uint64_t *s, unsigned int dir, unsigned int type, unsigned int nr,
		unsigned int usize, uint64_t sp, struct preempt_args *a, const char *what)
{
	struct preempt_args eff, back;
	struct want w;
	int r, i;

	if (in_rw(sp, usize ? usize : 1)) {
		memset((void *)(uintptr_t)sp, 0, usize);
		memcpy((void *)(uintptr_t)sp, a, usize < sizeof(*a) ? usize : sizeof(*a));
	}
	memset(&eff, 0, sizeof(eff));		/* what the kernel sees: zero-padded */
	if (readable(sp, usize))
		memcpy(&eff, (void *)(uintptr_t)sp, usize < sizeof(eff) ? usize : sizeof(eff));
	if (eff.queue_array_ptr && in_rw(eff.queue_array_ptr, (uint64_t)eff.num_queues * 4))
		for (i = 0; i < (int)eff.num_queues; i++)
			((uint32_t *)(uintptr_t)eff.queue_array_ptr)[i] = (uint32_t)rnd(s) % 2048;
	w = oracle(nr, sp, usize, &eff);
	r = kcall(fd, req(dir, type, nr, usize), (void *)(uintptr_t)sp);
	if (r != -w.err) {
		BAD("%s: nr 0x%x size %u dir %u type 0x%x struct@%#llx num %u flags %#x grace %u pad %u ids@%#llx: %s, want %s",
		    what, nr, usize, dir, type, (unsigned long long)sp, eff.num_queues, eff.flags,
		    eff.grace_period, eff.pad, (unsigned long long)eff.queue_array_ptr, ename(r), ename(-w.err));
		return;
	}
	if (r || !in_rw(sp, usize) || !(patched && (nr == NR_PREEMPT || nr == NR_RESUME)))
		return;
	memset(&back, 0, sizeof(back));
	memcpy(&back, (void *)(uintptr_t)sp, usize < sizeof(back) ? usize : sizeof(back));
	if (usize >= 24 && back.version != 1)
		BAD("%s: nr 0x%x size %u: version %u, want 1", what, nr, usize, back.version);
	if (usize >= 36 && back.num_done != 0)
		BAD("%s: nr 0x%x: num_done %u with no queue in the guest", what, nr, back.num_done);
	if (w.ids_written)
		for (i = 0; i < (int)eff.num_queues; i++)
			if (!(((uint32_t *)(uintptr_t)eff.queue_array_ptr)[i] & INVALID)) {
				BAD("%s: id %d came back without INVALID (no queue exists)", what, i);
				break;
			}
}

static void phase_args(int fd, uint64_t seed, long iters)
{
	static const unsigned int sizes[] = { 0, 1, 8, 12, 16, 20, 24, 32, 36, 39, 40, 41, 64, 128, 129, 4096, 16383 };
	static const uint32_t counts[] = { 0, 1, MAX_IDS, MAX_IDS + 1, 0xffffffffu };
	uint64_t s = seed * 2 + 1, sp_room = (uintptr_t)sa, sp_tight = (uintptr_t)sa + SA_LEN - 40;
	struct preempt_args a;
	unsigned int nr, i, j, k;
	long n;

	phase = "args";
	for (nr = 0x20; nr <= 0x4f; nr++)	/* numbers around the range, a valid probe struct */
		if (nr >= NR_END) {
			memset(&a, 0, sizeof(a));
			one(fd, &s, 3, 'K', nr, 40, sp_room, &a, "number");
		}
	for (nr = NR_PREEMPT; nr <= NR_RESUME; nr++) {
		for (i = 0; i < 5; i++)			/* counts x pointer kinds x grace flag */
			for (j = 0; j < 16; j++) {
				memset(&a, 0, sizeof(a));
				a.num_queues = counts[i];
				a.flags = j & 1;
				a.grace_period = (j & 2) ? 0x100 : 0xff;
				a.queue_array_ptr = pick_ptr(&s, (uint64_t)(counts[i] <= MAX_IDS ? counts[i] : 1) * 4, 1);
				one(fd, &s, 3, 'K', nr, 40, sp_room, &a, "count");
			}
		for (k = 0; k < 32; k++) {		/* every flag bit */
			memset(&a, 0, sizeof(a));
			a.flags = 1u << k;
			one(fd, &s, 3, 'K', nr, 40, sp_room, &a, "flag bit");
		}
		for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {	/* size bits */
			random_args(&s, &a);
			one(fd, &s, rnd(&s) % 4, 'K', nr, sizes[i], sp_room, &a, "size");
			one(fd, &s, 3, 'K', nr, sizes[i], sp_tight, &a, "size at a guard page");
		}
		memset(&a, 0, sizeof(a));		/* bad struct pointers */
		one(fd, &s, 3, 'K', nr, 40, 0, &a, "NULL struct");
		one(fd, &s, 3, 'K', nr, 40, (uintptr_t)gone, &a, "unmapped struct");
		one(fd, &s, 3, 'K', nr, 40, (uintptr_t)ro, &a, "read-only struct");
		one(fd, &s, 3, 'K', nr, 40, KERNEL_PTR, &a, "kernel struct");
		one(fd, &s, 3, 'D', nr, 40, sp_room, &a, "type letter D");
	}
	for (n = 0; n < iters; n++) {		/* seeded random */
		unsigned int usize = rnd(&s) % 4 ? 40 : sizes[rnd(&s) % 17];
		uint64_t sp;

		switch (rnd(&s) % 16) {
		case 0: sp = pick_ptr(&s, usize, 0); break;
		case 1: sp = sp_tight; break;
		default: sp = sp_room + ((rnd(&s) % 64) & ~7ULL);
		}
		nr = rnd(&s) % 8 ? NR_PREEMPT + rnd(&s) % 2 : 0x3e + rnd(&s) % 6;
		random_args(&s, &a);
		one(fd, &s, rnd(&s) % 8 ? 3 : rnd(&s) % 4, rnd(&s) % 16 ? 'K' : rnd(&s) % 256, nr, usize, sp, &a, "random");
	}
}

static void on_alarm(int sig)
{
	static const char m[] = "kfd-hostile: HANG: a phase did not finish in time\n";

	(void)sig;
	(void)!write(1, m, sizeof(m) - 1);
	_exit(1);
}

int main(int argc, char **argv)
{
	uint64_t seed = (uint64_t)time(NULL);
	long iters = 3000;
	int fd, i;

	if (argc == 4 && !strcmp(argv[1], "--exec-stage"))	/* the image after exec (procs phase) */
		return exec_stage(atoi(argv[2]), (unsigned int)atoi(argv[3]));
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--patched") || !strcmp(argv[i], "--stock"))
			patched = !strcmp(argv[i], "--patched");
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
			iters = atol(argv[++i]);
		else if (!strcmp(argv[i], "--known-stock-bugs"))
			known_stock_bugs = 1;
		else {
			printf("usage: kfd-hostile --patched|--stock [--seed N] [--iters N] [--known-stock-bugs]\n");
			return 2;
		}
	}
	if (setup_memory()) {
		printf("kfd-hostile: mmap: %s\n", strerror(errno));
		return 2;
	}
	fd = open("/dev/kfd", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		printf("kfd-hostile: /dev/kfd: %s\n", strerror(errno));
		return 2;
	}
	signal(SIGALRM, on_alarm);
	alarm(240);
	printf("kfd-hostile: seed %#llx, %ld random calls, %s kernel\n", (unsigned long long)seed, iters,
	       patched ? "patched" : "stock");
	fflush(stdout);
	phase_args(fd, seed, iters);
	printf("kfd-hostile: args: %ld calls, %ld unexpected\n", atomic_load(&calls), atomic_load(&unexpected));
	fflush(stdout);
	fd = phase_threads(fd, seed);
	phase_procs(fd, seed);
	alarm(0);
	printf("kfd-hostile: %s: %ld calls, %ld unexpected (seed %#llx)\n",
	       atomic_load(&unexpected) ? "FAIL" : "PASS", atomic_load(&calls), atomic_load(&unexpected),
	       (unsigned long long)seed);
	return atomic_load(&unexpected) ? 1 : 0;
}
