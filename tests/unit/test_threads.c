/* test_threads.c -- libdsv4rt from many threads at once, one context per
 * thread (dsv4rt.h: a context is used by one thread at a time; threads
 * with their own contexts may run together).
 *
 *   test_threads DECODE_BUNDLE
 *
 * Rows:
 *   - failing creations, no device needed: 8 threads, each 2,000 times
 *     asking for a backend or a device number of its own that does not
 *     exist; every message dsv4rt_last_error(NULL) gives a thread must
 *     name that thread's number (the creation error is per thread: it was
 *     one library-global buffer, written by all, issue 37.5);
 *   - on OpenCL, 4 threads, each creating its context, opening the bundle
 *     (from the file), launching decode.dsv4b's dequant_gather_v4 three
 *     times on inputs of its own and comparing with the host reference,
 *     with a failing creation (device 9000 + thread) between launches.
 * scripts/test.sh also runs it built with -fsanitize=thread (DSV4C_TSAN:
 * the runtime and this test only), where a data race fails it too.  The
 * first row needs no device, so the test always runs; without an OpenCL
 * device (or a bundle) the second row says it was skipped.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dsv4_check.h"
#include "dsv4_ref.h"
#include "dsv4rt.h"

#if defined(__SANITIZE_ADDRESS__)
#define TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN 1
#endif
#endif
#ifdef TEST_ASAN
/* Under AddressSanitizer: no alternate signal stacks of ASan's.  A thread
 * that built an OpenCL program has LLVM's (PoCL's compiler installs one,
 * allocated with malloc) when it exits, and ASan then fails a CHECK
 * unmapping it as its own.  Read before ASAN_OPTIONS, which still applies. */
__attribute__((used)) const char *__asan_default_options(void) { return "use_sigaltstack=0"; }
#endif

#define FAIL_THREADS 8
#define FAIL_ROUNDS 2000
#define DEV_THREADS 4

static atomic_int failed, passed;
static const char *bundle_path;
static pthread_mutex_t print_lock = PTHREAD_MUTEX_INITIALIZER;

static void fail(const char *fmt, const char *a, long n)
{
  pthread_mutex_lock(&print_lock);
  printf("FAIL ");
  printf(fmt, a, n);
  printf("\n");
  pthread_mutex_unlock(&print_lock);
  failed++;
}

/* 1 if message m names the number n (as a whole number). */
static int names(const char *m, long n)
{
  char want[32];
  snprintf(want, sizeof want, "%ld", n);
  for (const char *p = strstr(m, want); p; p = strstr(p + 1, want))
    if ((p == m || p[-1] < '0' || p[-1] > '9') && (p[strlen(want)] < '0' || p[strlen(want)] > '9'))
      return 1;
  return 0;
}

/* ---- failing creations ---- */

static void *failing(void *arg)
{
  long t = (long)(intptr_t)arg;
  int bad = 0;
  for (int r = 0; r < FAIL_ROUNDS; r++) {
    dsv4rt_context *ctx = (dsv4rt_context *)1;
    long n = r % 2 ? 100 + t : -1 - t; /* an unknown backend, a negative device: both this thread's */
    dsv4rt_status s = r % 2 ? dsv4rt_context_create((dsv4rt_backend)n, 0, &ctx)
                            : dsv4rt_context_create(DSV4RT_BACKEND_OPENCL, (int)n, &ctx);
    sched_yield(); /* (a wider window for another thread's failure to land in a shared message) */
    const char *m = dsv4rt_last_error(NULL);
    if (s != DSV4RT_ERR_INVALID_ARG || ctx != NULL || !names(m, n)) {
      if (bad++ < 3)
        fail("a failed creation's message '%s' does not name this thread's %ld", m, n);
      else
        failed++;
    } else
      passed++;
  }
  return NULL;
}

/* ---- one context per thread on OpenCL ---- */

typedef struct {
  long t;
  int ran;
  char why[1024];
} dev_job;

/* Entry e's layout where e is the spirv dequant_gather_v4 of b; -1 when none. */
static int find_gather(const dsv4rt_bundle *b, dsv4_layout *L)
{
  for (int i = 0; i < dsv4rt_bundle_count(b); i++) {
    const char *name, *target;
    if (!dsv4rt_bundle_entry(b, i, &name, NULL, &target, NULL) && !strcmp(name, "dequant_gather_v4") &&
        !strcmp(target, "spirv"))
      return dsv4rt_bundle_entry_layout(b, i, L) ? -1 : i;
  }
  return -1;
}

/* Three launches of dequant_gather_v4 against the reference; 0, or 1 with why. */
static int gathers(dsv4rt_context *ctx, dsv4rt_bundle *b, dev_job *j)
{
  dsv4_layout L;
  if (find_gather(b, &L) < 0)
    return snprintf(j->why, sizeof j->why, "no spirv dequant_gather_v4 in the bundle"), 1;
  dsv4_rng rng;
  rng.s = dsv4_check_seed() + (uint64_t)j->t * 7919u;
  int64_t nb = 4, bs = 64, n = 64;
  int64_t stride = (dsv4_layout_min_block_bytes(&L, bs) + L.align - 1) / L.align * L.align;
  size_t cb = (size_t)(nb * stride), ob = (size_t)n * (size_t)L.dim * 2;
  uint8_t *host = malloc(cb);
  uint16_t *got = malloc(ob), *want = malloc(ob);
  int32_t idx[64];
  dsv4rt_buffer *cache = NULL, *ind = NULL, *out = NULL;
  int rc = 1;
  if (!host || !got || !want || dsv4rt_buffer_create(ctx, cb, &cache) || dsv4rt_buffer_create(ctx, sizeof idx, &ind) ||
      dsv4rt_buffer_create(ctx, ob, &out)) {
    snprintf(j->why, sizeof j->why, "buffers: %s", dsv4rt_last_error(ctx));
    goto done;
  }
  for (int round = 0; round < 3; round++) {
    dsv4_rng_bytes(&rng, host, cb);
    for (int i = 0; i < n; i++)
      idx[i] = (int32_t)dsv4_rng_range(&rng, -1, nb * bs - 1);
    dsv4rt_dequant_gather_args a = {.out = out, .cache = cache, .indices = ind, .n = n, .num_blocks = nb,
                                    .block_size = bs, .block_stride = stride, .tensor_scale = 1};
    dsv4rt_launch_opts o = {.kernel = "dequant_gather_v4", .check_contents = 1};
    size_t first = 0;
    if (dsv4rt_buffer_write(cache, 0, host, cb) || dsv4rt_buffer_write(ind, 0, idx, sizeof idx) ||
        dsv4rt_dequant_gather(b, &a, &o) || dsv4rt_synchronize(ctx) || dsv4rt_buffer_read(out, 0, got, ob)) {
      snprintf(j->why, sizeof j->why, "round %d: %s", round, dsv4rt_last_error(ctx));
      goto done;
    }
    if (dsv4_ref_dequant_gather(&L, host, nb, bs, stride, idx, n, want) ||
        dsv4_check_bf16(got, want, (size_t)n * (size_t)L.dim, &first)) {
      snprintf(j->why, sizeof j->why, "round %d: output differs from the reference at value %zu", round, first);
      goto done;
    }
    /* a failing creation between launches: its message is this thread's */
    dsv4rt_context *none = (dsv4rt_context *)1;
    long dev = 9000 + j->t;
    if (dsv4rt_context_create(DSV4RT_BACKEND_OPENCL, (int)dev, &none) != DSV4RT_ERR_NO_BACKEND || none ||
        !names(dsv4rt_last_error(NULL), dev)) {
      snprintf(j->why, sizeof j->why, "device %ld: '%s' (wanted NO_BACKEND naming it)", dev, dsv4rt_last_error(NULL));
      goto done;
    }
  }
  rc = 0;
done:
  dsv4rt_buffer_destroy(cache), dsv4rt_buffer_destroy(ind), dsv4rt_buffer_destroy(out);
  free(host), free(got), free(want);
  return rc;
}

static void *device(void *arg)
{
  dev_job *j = arg;
  dsv4rt_context *ctx;
  if (dsv4rt_context_create(DSV4RT_BACKEND_OPENCL, 0, &ctx)) {
    snprintf(j->why, sizeof j->why, "context: %s", dsv4rt_last_error(NULL));
    return NULL;
  }
  dsv4rt_bundle *b = NULL;
  if (dsv4rt_bundle_open(ctx, bundle_path, &b))
    snprintf(j->why, sizeof j->why, "%s", dsv4rt_last_error(ctx));
  else
    j->ran = !gathers(ctx, b, j);
  dsv4rt_bundle_destroy(b);
  dsv4rt_context_destroy(ctx);
  return NULL;
}

/* Whether this process could create an OpenCL context, asked in a child
 * (before any thread: this process's first creations are the test's). */
static int has_opencl(char *why, size_t len)
{
  int fd[2];
  if (pipe(fd))
    return 0;
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    dsv4rt_context *ctx;
    int ok = dsv4rt_context_create(DSV4RT_BACKEND_OPENCL, 0, &ctx) == DSV4RT_OK;
    const char *m = ok ? "" : dsv4rt_last_error(NULL);
    if (write(fd[1], m, strlen(m)) < 0)
      ok = 0;
    _exit(ok ? 0 : 1);
  }
  close(fd[1]);
  ssize_t n = pid > 0 ? read(fd[0], why, len - 1) : -1;
  why[n > 0 ? n : 0] = 0;
  close(fd[0]);
  int st = 0;
  return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: test_threads DECODE_BUNDLE\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  bundle_path = argv[1];
  pthread_t th[FAIL_THREADS];
  for (long t = 0; t < FAIL_THREADS; t++)
    if (pthread_create(&th[t], NULL, failing, (void *)(intptr_t)t))
      fail("%s thread %ld not started", "failing-creation", t);
  for (int t = 0; t < FAIL_THREADS; t++)
    pthread_join(th[t], NULL);
  printf("failing creations: %d threads x %d, %d with the thread's own message\n", FAIL_THREADS, FAIL_ROUNDS,
         (int)passed);

  dev_job jobs[DEV_THREADS];
  pthread_t dt[DEV_THREADS];
  int ran = 0;
  char why[1024];
  if (access(bundle_path, F_OK))
    printf("device rows skipped: no bundle at %s (built without DSV4C_BUILD_COMPILER?)\n", bundle_path);
  else if (!has_opencl(why, sizeof why))
    printf("device rows skipped: no OpenCL device (%s)\n", why);
  else {
    for (long t = 0; t < DEV_THREADS; t++) {
      memset(&jobs[t], 0, sizeof jobs[t]);
      jobs[t].t = t;
      if (pthread_create(&dt[t], NULL, device, &jobs[t]))
        fail("%s thread %ld not started", "device", t);
    }
    for (int t = 0; t < DEV_THREADS; t++) {
      pthread_join(dt[t], NULL);
      ran += jobs[t].ran;
      if (jobs[t].ran)
        passed++;
      else
        fail("device thread: %s (thread %ld; a context opens in a process alone)", jobs[t].why, t);
    }
    printf("one context per thread: %d of %d threads created, opened, launched 3 times, matched the reference\n", ran,
           DEV_THREADS);
  }
  printf("%d passed, %d failed\n", (int)passed, (int)failed);
  return failed ? 1 : 0;
}
