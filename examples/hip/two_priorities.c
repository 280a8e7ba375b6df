/* An ordinary HIP program with two streams at two priorities, written against HIP's own API
 * and nothing of this project: what the interposer (libpreempt_hip.so, docs/interposer.md) is
 * tested and measured with, unmodified.
 *
 * The low-priority stream is given N delay kernels of T ms up front; meanwhile the program makes
 * K high-priority requests (one delay kernel of H ms each, G ms apart) and times each from its
 * launch to the end of hipStreamSynchronize on the host clock. At the end every LP command's
 * slot must say it completed exactly once.
 *
 *   two_priorities CODE_OBJECT [--lp N] [--lp-ms T] [--hp K] [--hp-ms H] [--gap-ms G]
 *                  [--no-lp] [--hp-waits-on-lp] [--spawn-child]
 *                  [--extra-streams S] [--lp-on-null] [--blocking-stream]
 *
 * CODE_OBJECT holds the project's delay kernels (gpu-device/kernels/delay.hip, compiled for the
 * GPU; the stand-in runtime accepts any file). --hp-waits-on-lp makes the first request wait on
 * an event recorded on the LP stream (hipStreamWaitEvent): a high-priority stream that depends
 * on low-priority work, which must not deadlock when the LP stream is suspended. --spawn-child
 * forks once its streams exist and the child execs this program for a small run of its own (an
 * interposed program that starts another one, as launchers and job runners do); the parent waits
 * for it at the end and fails if it failed. --extra-streams S creates S more low-priority streams
 * first, used for nothing and destroyed at the end (a program with many streams). --lp-on-null
 * puts the low-priority work on the null stream instead of a stream of its own (as a program
 * using only the default stream, PyTorch's way, does). --blocking-stream makes one blocking
 * stream (hipStreamCreate) once the LP work is launched, used for nothing: legacy null-stream
 * ordering then binds it to the null stream.
 *
 * Prints one line: key=value pairs (latencies in microseconds, host clock). Exit 0 when every
 * LP command completed exactly once, 1 when one did not, 2 on bad arguments, 3 on a HIP error.
 * Build: cc -D__HIP_PLATFORM_AMD__ two_priorities.c -lamdhip64 -lpthread -o two_priorities */
#define __HIP_PLATFORM_AMD__ 1
#define PROG "two_priorities"
#include "delay_run.h"
#include <sys/wait.h>
#include <unistd.h>

static int flag(int argc, char **argv, const char *name) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], name)) return 1;
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2 || argv[1][0] == '-') {
    fprintf(stderr, "usage: two_priorities CODE_OBJECT [--lp N] [--lp-ms T] [--hp K] [--hp-ms H] [--gap-ms G] [--no-lp] [--hp-waits-on-lp] [--spawn-child] [--extra-streams S] [--lp-on-null] [--blocking-stream]\n");
    return 2;
  }
  long n_lp = flag(argc, argv, "--no-lp") ? 0 : arg(argc, argv, "--lp", 100);
  long lp_ms = arg(argc, argv, "--lp-ms", 20), k_hp = arg(argc, argv, "--hp", 50);
  long hp_ms = arg(argc, argv, "--hp-ms", 1), gap_ms = arg(argc, argv, "--gap-ms", 10);
  int waits = flag(argc, argv, "--hp-waits-on-lp"), spawn = flag(argc, argv, "--spawn-child");
  if (k_hp < 1) {
    fprintf(stderr, "two_priorities: --hp wants at least 1 request\n");
    return 2;
  }

  long n_extra = arg(argc, argv, "--extra-streams", 0);
  int least, greatest;
  CHECK(hipDeviceGetStreamPriorityRange(&least, &greatest));
  hipStream_t *extra = calloc((size_t)n_extra + 1, sizeof(hipStream_t));
  for (long i = 0; i < n_extra; i++) CHECK(hipStreamCreateWithPriority(&extra[i], hipStreamNonBlocking, least));
  hipStream_t lp = NULL, hp;
  int lp_on_null = flag(argc, argv, "--lp-on-null");
  if (!lp_on_null) CHECK(hipStreamCreateWithPriority(&lp, hipStreamNonBlocking, least));
  CHECK(hipStreamCreateWithPriority(&hp, hipStreamNonBlocking, greatest));
  pid_t child = -1;
  if (spawn) {
    fflush(NULL);
    child = fork();
    if (child < 0) {
      perror("two_priorities: fork");
      return 3;
    }
    if (child == 0) {
      char *args[] = {argv[0], argv[1], "--lp", "5", "--lp-ms", "5", "--hp", "3", "--gap-ms", "1", NULL};
      execv(argv[0], args);
      perror("two_priorities: execv");
      _exit(127);
    }
  }
  hipFunction_t delay = load_delay_kernel(argv[1]);
  struct slot *lp_slots = device_slots(n_lp), *hp_slots = device_slots(k_hp);

  hipEvent_t lp_mark;
  CHECK(hipEventCreateWithFlags(&lp_mark, hipEventDisableTiming));
  for (long i = 0; i < n_lp; i++) {
    launch(delay, lp, lp_slots, (uint32_t)i, (uint64_t)lp_ms * TICKS_PER_MS);
    if (i == 0) CHECK(hipEventRecord(lp_mark, lp));
  }
  if (n_lp) sleep_ms(lp_ms / 2.0); /* the first LP kernel is running */
  hipStream_t blocking = NULL;
  if (flag(argc, argv, "--blocking-stream")) CHECK(hipStreamCreate(&blocking));

  double *lat = calloc((size_t)k_hp, sizeof(double));
  for (long r = 0; r < k_hp; r++) {
    double t0 = now_us();
    if (waits && r == 0 && n_lp) CHECK(hipStreamWaitEvent(hp, lp_mark, 0));
    launch(delay, hp, hp_slots, (uint32_t)r, (uint64_t)hp_ms * TICKS_PER_MS);
    CHECK(hipStreamSynchronize(hp));
    lat[r] = now_us() - t0;
    sleep_ms((double)gap_ms);
  }
  CHECK(hipStreamSynchronize(lp));

  int child_status = 0;
  if (child > 0) {
    int st;
    if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 0) child_status = 1;
  }
  long once, bad;
  count_exactly_once(lp_slots, n_lp, &once, &bad);
  double p50, p99, max;
  summarize(lat, k_hp, &p50, &p99, &max);
  printf("hp_requests=%ld hp_ms=%ld p50_us=%.0f p99_us=%.0f max_us=%.0f lp_commands=%ld lp_ms=%ld lp_exactly_once=%ld lp_bad=%ld child_failed=%d\n",
         k_hp, hp_ms, p50, p99, max, n_lp, lp_ms, once, bad, child_status);
  if (!lp_on_null) CHECK(hipStreamDestroy(lp));
  if (blocking) CHECK(hipStreamDestroy(blocking));
  CHECK(hipStreamDestroy(hp));
  CHECK(hipEventDestroy(lp_mark));
  for (long i = 0; i < n_extra; i++) CHECK(hipStreamDestroy(extra[i]));
  free(extra);
  CHECK(hipFree(lp_slots));
  CHECK(hipFree(hp_slots));
  free(lat);
  return bad || child_status ? 1 : 0;
}
