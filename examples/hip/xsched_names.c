/* A HIP program written for XSched's C API (XpuOS/xsched): it loads XSched's libraries by
 * their names (libpreempt.so, libhalhip.so) from a directory, as XSched's programs do, wraps
 * two streams in XQueues and gives them XSched priorities, one high and one low. Over this
 * project those names are xsched-compat (scripts/install-xsched-compat.sh), and the priorities
 * are enforced by the HIP interposer when it is preloaded (docs/interposer.md#xscheds-c-api-names).
 *
 * The low-priority queue's stream is given N delay kernels of T ms up front; meanwhile the
 * program makes K high-priority requests (one delay kernel of H ms each, G ms apart), timed on
 * the host clock. At the end every LP command's slot must say it completed exactly once.
 *
 *   xsched_names LIBDIR CODE_OBJECT [--lp N] [--lp-ms T] [--hp K] [--hp-ms H] [--gap-ms G]
 *
 * Prints one line of key=value pairs: the XSched calls' results (hint_hp, hint_lp, and the
 * answers to hostile calls: null out-pointers, unknown handles, the null stream), then the run's
 * (latencies in microseconds). Exit 0 when every LP command completed exactly once, 1 when one
 * did not, 2 on bad arguments, 3 on a HIP error, 4 when a library or an XSched call that must
 * succeed failed. XHintPriority may fail (without the interposer): the run goes on, as it would
 * under XSched with priorities ignored.
 * Build: cc -D__HIP_PLATFORM_AMD__ xsched_names.c -lamdhip64 -ldl -o xsched_names */
#define __HIP_PLATFORM_AMD__ 1
#define PROG "xsched_names"
#include "delay_run.h"
#include <dlfcn.h>

/* XSched's declarations (include/xsched/types.h, xqueue.h, hint.h; the HIP HAL's hal.h). */
typedef int XResult;
typedef uint64_t XQueueHandle, HwQueueHandle;
typedef int32_t Priority;
enum { kXSchedSuccess = 0 };
enum { kPreemptLevelBlock = 1 };
enum { kQueueCreateFlagNone = 0 };
enum { kSchedulerLocal = 2 };
enum { kPolicyHighestPriorityFirst = 1 };

static XResult (*XHintSetScheduler)(int, int);
static XResult (*HipQueueCreate)(HwQueueHandle *, hipStream_t);
static XResult (*HwQueueDestroy)(HwQueueHandle);
static XResult (*XQueueCreate)(XQueueHandle *, HwQueueHandle, int64_t, int64_t);
static XResult (*XQueueGet)(XQueueHandle *, HwQueueHandle);
static XResult (*XQueueSetLaunchConfig)(XQueueHandle, int64_t, int64_t);
static XResult (*XHintPriority)(XQueueHandle, Priority);
static XResult (*XQueueSuspend)(XQueueHandle, int64_t);
static XResult (*XQueueDestroy)(XQueueHandle);

#define MUST(call)                                                                      \
  do {                                                                                  \
    XResult r_ = (call);                                                                \
    if (r_ != kXSchedSuccess) {                                                         \
      fprintf(stderr, "xsched_names: %s returned %d\n", #call, r_);                     \
      exit(4);                                                                          \
    }                                                                                   \
  } while (0)

static void *open_lib(const char *dir, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    fprintf(stderr, "xsched_names: dlopen %s: %s\n", path, dlerror());
    exit(4);
  }
  return h;
}

static void *need(void *lib, const char *name) {
  void *p = dlsym(lib, name);
  if (!p) {
    fprintf(stderr, "xsched_names: no %s: %s\n", name, dlerror());
    exit(4);
  }
  return p;
}

/* A stream wrapped as XSched's programs do: HwQueue, XQueue at Lv1 with a launch window of
 * (8, 4), then its priority. Returns XHintPriority's result. */
static XResult wrap(hipStream_t s, Priority prio, HwQueueHandle *hwq, XQueueHandle *xq) {
  MUST(HipQueueCreate(hwq, s));
  MUST(XQueueCreate(xq, *hwq, kPreemptLevelBlock, kQueueCreateFlagNone));
  MUST(XQueueSetLaunchConfig(*xq, 8, 4));
  return XHintPriority(*xq, prio);
}

int main(int argc, char **argv) {
  if (argc < 3 || argv[1][0] == '-' || argv[2][0] == '-') {
    fprintf(stderr, "usage: xsched_names LIBDIR CODE_OBJECT [--lp N] [--lp-ms T] [--hp K] [--hp-ms H] [--gap-ms G]\n");
    return 2;
  }
  long n_lp = arg(argc, argv, "--lp", 40), lp_ms = arg(argc, argv, "--lp-ms", 20);
  long k_hp = arg(argc, argv, "--hp", 20), hp_ms = arg(argc, argv, "--hp-ms", 1);
  long gap_ms = arg(argc, argv, "--gap-ms", 10);
  if (k_hp < 1) {
    fprintf(stderr, "xsched_names: --hp wants at least 1 request\n");
    return 2;
  }

  void *preempt = open_lib(argv[1], "libpreempt.so"), *halhip = open_lib(argv[1], "libhalhip.so");
  *(void **)&XHintSetScheduler = need(preempt, "XHintSetScheduler");
  *(void **)&XQueueCreate = need(preempt, "XQueueCreate");
  *(void **)&XQueueGet = need(preempt, "XQueueGet");
  *(void **)&XQueueSetLaunchConfig = need(preempt, "XQueueSetLaunchConfig");
  *(void **)&XHintPriority = need(preempt, "XHintPriority");
  *(void **)&XQueueSuspend = need(preempt, "XQueueSuspend");
  *(void **)&XQueueDestroy = need(preempt, "XQueueDestroy");
  *(void **)&HwQueueDestroy = need(preempt, "HwQueueDestroy");
  *(void **)&HipQueueCreate = need(halhip, "HipQueueCreate");

  MUST(XHintSetScheduler(kSchedulerLocal, kPolicyHighestPriorityFirst));
  hipStream_t lp, hp;
  CHECK(hipStreamCreate(&lp));
  CHECK(hipStreamCreate(&hp));
  HwQueueHandle lp_hwq, hp_hwq;
  XQueueHandle lp_xq, hp_xq, got;
  XResult hint_hp = wrap(hp, 1, &hp_hwq, &hp_xq);
  XResult hint_lp = wrap(lp, -1, &lp_hwq, &lp_xq);
  MUST(XQueueGet(&got, hp_hwq));
  int get_ok = got == hp_xq;

  /* Hostile calls: each must answer an error code, never crash. */
  HwQueueHandle h;
  XQueueHandle x;
  XResult null_out = XQueueCreate(NULL, hp_hwq, kPreemptLevelBlock, 0);
  XResult null_stream = HipQueueCreate(&h, NULL);
  XResult bad_hwq = XQueueCreate(&x, 0xdeadbeef, kPreemptLevelBlock, 0);
  XResult bad_xq = XHintPriority(0xdeadbeef, 1);
  XResult bad_level = XQueueCreate(&x, hp_hwq, 99, 0);
  XResult suspend = XQueueSuspend(lp_xq, 0);

  hipFunction_t delay = load_delay_kernel(argv[2]);
  struct slot *lp_slots = device_slots(n_lp), *hp_slots = device_slots(k_hp);

  for (long i = 0; i < n_lp; i++) launch(delay, lp, lp_slots, (uint32_t)i, (uint64_t)lp_ms * TICKS_PER_MS);
  if (n_lp) sleep_ms(lp_ms / 2.0); /* the first LP kernel is running */
  double *lat = calloc((size_t)k_hp, sizeof(double));
  for (long r = 0; r < k_hp; r++) {
    double t0 = now_us();
    launch(delay, hp, hp_slots, (uint32_t)r, (uint64_t)hp_ms * TICKS_PER_MS);
    CHECK(hipStreamSynchronize(hp));
    lat[r] = now_us() - t0;
    sleep_ms((double)gap_ms);
  }
  CHECK(hipStreamSynchronize(lp));

  long once, bad;
  count_exactly_once(lp_slots, n_lp, &once, &bad);
  double p50, p99, max;
  summarize(lat, k_hp, &p50, &p99, &max);
  MUST(XQueueDestroy(hp_xq));
  MUST(XQueueDestroy(lp_xq));
  MUST(HwQueueDestroy(hp_hwq));
  MUST(HwQueueDestroy(lp_hwq));
  XResult destroyed_twice = XQueueDestroy(lp_xq);
  printf("hint_hp=%d hint_lp=%d get_ok=%d null_out=%d null_stream=%d bad_hwq=%d bad_xq=%d bad_level=%d suspend=%d destroyed_twice=%d "
         "hp_requests=%ld p50_us=%.0f p99_us=%.0f max_us=%.0f lp_commands=%ld lp_exactly_once=%ld lp_bad=%ld\n",
         hint_hp, hint_lp, get_ok, null_out, null_stream, bad_hwq, bad_xq, bad_level, suspend, destroyed_twice, k_hp,
         p50, p99, max, n_lp, once, bad);
  CHECK(hipStreamDestroy(lp));
  CHECK(hipStreamDestroy(hp));
  CHECK(hipFree(lp_slots));
  CHECK(hipFree(hp_slots));
  free(lat);
  return bad ? 1 : 0;
}
