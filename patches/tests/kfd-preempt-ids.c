// SPDX-License-Identifier: MIT
/*
 * Guest test of the id handling that AMDKFD_IOC_PREEMPT_QUEUES and
 * AMDKFD_IOC_RESUME_QUEUES document in kfd_ioctl.h (patch 0004), in a guest
 * with no GPU (so no queue exists and every id must come back INVALID):
 * duplicate ids, bit 31 and bit 30 of an id, ids >= 1024, a full array of
 * 1024 ids, and num_done/kernel_ns/version written back on -EFAULT.
 *
 *   kfd-preempt-ids --patched    the kernel must have the ioctls
 *   kfd-preempt-ids --stock      they must answer -ENOTTY
 *
 * Exit status: 0 pass, 1 fail, 2 cannot run. Build: gcc -static -O2 -Wall.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

struct preempt_args {		/* struct kfd_ioctl_preempt_queues_args */
	uint64_t queue_array_ptr;
	uint32_t num_queues;
	uint32_t flags;
	uint32_t grace_period;
	uint32_t version;
	uint64_t kernel_ns;
	uint32_t num_done;
	uint32_t pad;
};
_Static_assert(sizeof(struct preempt_args) == 40, "40-byte struct");

#define IOC_PREEMPT 0xc0284b40UL	/* _IOWR('K', 0x40, 40 bytes) */
#define IOC_RESUME  0xc0284b41UL
#define INVALID (1u << 31)
#define ERROR   (1u << 30)

static int fails;

#define CHECK(cond, ...) do { if (!(cond)) { printf("FAIL: " __VA_ARGS__); \
	printf("\n"); fails++; } } while (0)

static int call(int fd, unsigned long nr, uint32_t *ids, uint32_t n,
		uint32_t flags, uint32_t grace, struct preempt_args *a)
{
	memset(a, 0, sizeof(*a));
	a->queue_array_ptr = (uintptr_t)ids;
	a->num_queues = n;
	a->flags = flags;
	a->grace_period = grace;
	a->kernel_ns = 12345;
	a->num_done = 0xdeadbeef;
	return ioctl(fd, nr, a) ? -errno : 0;
}

int main(int argc, char **argv)
{
	static uint32_t big[1024];
	const uint32_t in[] = { 5, 5, ERROR | 5, INVALID | 5, 1024, 2000, 1023, 0 };
	const unsigned int n = sizeof(in) / sizeof(in[0]);
	unsigned long nrs[2] = { IOC_PREEMPT, IOC_RESUME };
	struct preempt_args a;
	uint32_t ids[8], *ro;
	int fd, r, patched;

	if (argc != 2 || (strcmp(argv[1], "--patched") && strcmp(argv[1], "--stock"))) {
		printf("usage: kfd-preempt-ids --patched|--stock\n");
		return 2;
	}
	patched = !strcmp(argv[1], "--patched");
	fd = open("/dev/kfd", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		printf("kfd-preempt-ids: /dev/kfd: %s\n", strerror(errno));
		return 2;
	}

	r = call(fd, IOC_PREEMPT, NULL, 0, 0, 0, &a);
	if (!patched) {
		CHECK(r == -ENOTTY, "stock kernel: probe gave %d, want -ENOTTY", r);
		printf("kfd-preempt-ids: %s (stock: AMDKFD_IOC_PREEMPT_QUEUES is -ENOTTY)\n",
		       fails ? "FAIL" : "PASS");
		return !!fails;
	}
	CHECK(r == 0 && a.version == 1, "probe: r %d version %u", r, a.version);

	for (int k = 0; k < 2; k++) {
		const char *what = k ? "resume" : "preempt";

		memcpy(ids, in, sizeof(in));
		r = call(fd, nrs[k], ids, n, k ? 0 : 1, k ? 0 : 0xff, &a);
		CHECK(r == 0, "%s: r %d", what, r);
		CHECK(a.num_done == 0 && a.kernel_ns == 0 && a.version == 1,
		      "%s: num_done %u kernel_ns %llu version %u", what,
		      a.num_done, (unsigned long long)a.kernel_ns, a.version);
		for (unsigned int i = 0; i < n; i++) {
			/* No queue exists: INVALID everywhere; bit 30 only where given */
			uint32_t want = (in[i] & ~INVALID) | INVALID;

			CHECK(ids[i] == want, "%s: id[%u] 0x%x came back 0x%x, want 0x%x",
			      what, i, in[i], ids[i], want);
		}
	}

	for (unsigned int i = 0; i < 1024; i++)
		big[i] = i % 3 ? i : 7;	/* every id < 1024, many duplicates */
	r = call(fd, IOC_PREEMPT, big, 1024, 0, 0, &a);
	CHECK(r == 0 && a.num_done == 0, "1024 ids: r %d num_done %u", r, a.num_done);
	for (unsigned int i = 0; i < 1024; i++)
		CHECK(big[i] == ((i % 3 ? i : 7) | INVALID), "1024 ids: [%u] = 0x%x", i, big[i]);
	r = call(fd, IOC_PREEMPT, big, 1025, 0, 0, &a);
	CHECK(r == -EINVAL, "1025 ids: r %d, want -EINVAL", r);

	/* The ids can be read but not written back: -EFAULT, the outputs still written */
	ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (ro == MAP_FAILED) {
		printf("kfd-preempt-ids: mmap: %s\n", strerror(errno));
		return 2;
	}
	r = call(fd, IOC_PREEMPT, ro, 4, 0, 0, &a);
	CHECK(r == -EFAULT, "read-only ids: r %d, want -EFAULT", r);
	CHECK(a.num_done == 0 && a.kernel_ns == 0 && a.version == 1,
	      "read-only ids: num_done 0x%x kernel_ns %llu version %u (want 0, 0, 1)",
	      a.num_done, (unsigned long long)a.kernel_ns, a.version);

	close(fd);
	printf("kfd-preempt-ids: %s (duplicates, bit 31/30, ids >= 1024, 1024 ids, EFAULT write-back)\n",
	       fails ? "FAIL" : "PASS");
	return !!fails;
}
