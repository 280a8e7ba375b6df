/* What the example HIP programs share (two_priorities.c, xsched_names.c): the delay kernels'
 * slot layout and launch (gpu-device/kernels/delay.hip), the exactly-once check of LP slots,
 * the host clock, the latency summary and the argument reader. Define PROG (the program's name,
 * for messages) before including it. Plain HIP and C: nothing of this project. */
#ifndef DELAY_RUN_H
#define DELAY_RUN_H
#include <hip/hip_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(call)                                                                  \
  do {                                                                               \
    hipError_t e_ = (call);                                                          \
    if (e_ != hipSuccess) {                                                          \
      fprintf(stderr, PROG ": %s failed: %s\n", #call, hipGetErrorString(e_));       \
      exit(3);                                                                       \
    }                                                                                \
  } while (0)

/* struct DelaySlot of delay.hip. */
struct slot {
  uint64_t start, end;
  uint32_t blocks, done;
  uint64_t tag;
};
#define TAG_MAGIC 0x5052454d50544c41ull
/* MI300's wall clock (s_memrealtime) ticks at 100 MHz. */
#define TICKS_PER_MS 100000ull
#define NBLOCKS 1u

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void sleep_ms(double ms) {
  struct timespec t = {(time_t)(ms / 1e3), (long)((ms - (time_t)(ms / 1e3) * 1e3) * 1e6)};
  nanosleep(&t, NULL);
}

/* The delay kernel from the code object at `path`. */
static hipFunction_t load_delay_kernel(const char *path) {
  hipModule_t mod;
  hipFunction_t f;
  CHECK(hipModuleLoad(&mod, path));
  CHECK(hipModuleGetFunction(&f, mod, "delay_kernel"));
  return f;
}

/* n (at least one) zeroed slots in device memory: a command's slot must be zero before it runs. */
static struct slot *device_slots(long n) {
  size_t bytes = sizeof(struct slot) * (size_t)(n ? n : 1);
  struct slot *s;
  CHECK(hipMalloc((void **)&s, bytes));
  CHECK(hipMemset(s, 0, bytes));
  return s;
}

/* delay_kernel(slots, id, ticks, nblocks) on stream s: one block of 64 threads. */
static void launch(hipFunction_t f, hipStream_t s, struct slot *slots, uint32_t id, uint64_t ticks) {
  uint32_t nblocks = NBLOCKS;
  void *args[] = {&slots, &id, &ticks, &nblocks};
  CHECK(hipModuleLaunchKernel(f, NBLOCKS, 1, 1, 64, 1, 1, 0, s, args, NULL));
}

/* The value after option `name`, 0 to 1000000; `dflt` if absent; exit 2 if it is not a number. */
static long arg(int argc, char **argv, const char *name, long dflt) {
  for (int i = 1; i + 1 < argc; i++)
    if (!strcmp(argv[i], name)) {
      char *end;
      long v = strtol(argv[i + 1], &end, 10);
      if (*end || v < 0 || v > 1000000) {
        fprintf(stderr, PROG ": %s wants a number from 0 to 1000000, not '%s'\n", name, argv[i + 1]);
        exit(2);
      }
      return v;
    }
  return dflt;
}

/* Reads the n LP slots back and counts those that completed exactly once (done 1, every block,
 * the tag of their id) and those that did not. */
static void count_exactly_once(const struct slot *dev_slots, long n, long *once, long *bad) {
  size_t bytes = sizeof(struct slot) * (size_t)(n ? n : 1);
  struct slot *host = malloc(bytes);
  CHECK(hipMemcpy(host, dev_slots, bytes, hipMemcpyDeviceToHost));
  *once = *bad = 0;
  for (long i = 0; i < n; i++) {
    int ok = host[i].done == 1 && host[i].blocks == NBLOCKS && host[i].tag == ((uint64_t)i ^ TAG_MAGIC);
    *once += ok;
    *bad += !ok;
  }
  free(host);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Sorts the k (>= 1) latencies and gives their median, nearest-rank P99 and maximum. */
static void summarize(double *lat, long k, double *p50, double *p99, double *max) {
  qsort(lat, (size_t)k, sizeof(double), cmp_double);
  *p50 = lat[(k - 1) / 2];
  *p99 = lat[(99 * k + 99) / 100 - 1];
  *max = lat[k - 1];
}
#endif
