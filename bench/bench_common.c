/* bench_common.c -- shared benchmark plumbing (see bench_common.h). */
#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

dsv4rt_context *bench_ctx;
const char *bench_name = "bench";
double bench_issue_ms;

static double host_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

void bench_die(const char *what)
{
  fprintf(stderr, "%s: %s: %s\n", bench_name, what, dsv4rt_last_error(bench_ctx));
  exit(1);
}

dsv4rt_buffer *bench_dev(const void *host, size_t n)
{
  dsv4rt_buffer *b;
  if (dsv4rt_buffer_create(bench_ctx, n, &b))
    bench_die("allocation");
  if (host && dsv4rt_buffer_write(b, 0, host, n))
    bench_die("upload");
  return b;
}

static int cmp(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double bench_time_ms(void (*fn)(int i, void *arg), void *arg)
{
  double t[BENCH_REPS], h[BENCH_REPS];
  for (int i = 0; i < BENCH_SETS; i++) /* warm-up: loads modules, touches memory */
    fn(i, arg);
  dsv4rt_synchronize(bench_ctx);
  for (int r = 0; r < BENCH_REPS; r++) {
    if (dsv4rt_timer_start(bench_ctx))
      bench_die("timer");
    double h0 = host_ms();
    for (int i = 0; i < BENCH_BATCH; i++)
      fn(i, arg);
    h[r] = (host_ms() - h0) / BENCH_BATCH;
    if (dsv4rt_timer_stop(bench_ctx, &t[r]))
      bench_die("timer");
    t[r] /= BENCH_BATCH;
  }
  qsort(t, BENCH_REPS, sizeof *t, cmp);
  qsort(h, BENCH_REPS, sizeof *h, cmp);
  bench_issue_ms = h[BENCH_REPS / 2];
  return t[BENCH_REPS / 2];
}

typedef struct {
  dsv4rt_buffer *src[BENCH_SETS], *dst[BENCH_SETS];
  size_t n;
} copy_arg;

static void run_copy(int i, void *p)
{
  copy_arg *c = p;
  if (dsv4rt_buffer_copy_async(c->dst[i % BENCH_SETS], c->src[i % BENCH_SETS], c->n))
    bench_die("copy");
}

double bench_copy_gbs(size_t n, double *ms)
{
  copy_arg c = {.n = n};
  for (int i = 0; i < BENCH_SETS; i++)
    c.src[i] = bench_dev(NULL, n), c.dst[i] = bench_dev(NULL, n);
  *ms = bench_time_ms(run_copy, &c);
  for (int i = 0; i < BENCH_SETS; i++)
    dsv4rt_buffer_destroy(c.src[i]), dsv4rt_buffer_destroy(c.dst[i]);
  return 2.0 * (double)n / (*ms * 1e-3) / 1e9;
}

void bench_open(int argc, char **argv, int backend_arg)
{
  const char *b = argc > backend_arg ? argv[backend_arg] : "";
  dsv4rt_backend be = DSV4RT_BACKEND_AUTO;
  dsv4rt_backend_parse(b, &be); /* (anything else: auto) */
  if (dsv4rt_context_create(be, 0, &bench_ctx)) {
    printf("SKIPPED: %s\n", dsv4rt_last_error(NULL));
    exit(77);
  }
}

void bench_close(dsv4rt_bundle *b)
{
  dsv4rt_bundle_destroy(b);
  dsv4rt_context_destroy(bench_ctx);
  bench_ctx = NULL;
}
