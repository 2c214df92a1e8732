/* jobs.c -- the compile threads of dsv4c -j (see jobs.h). */
#define _GNU_SOURCE
#include "jobs.h"

#include "caps.h" /* compile_weight */

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
  dsv4_job *jobs;
  int *order; /* job indices, heaviest first */
  int n;
  int next;   /* the next position in order (under lock) */
  pthread_mutex_t lock;
} pool;

/* A rough cost, for starting the long compiles first (the last thread to
 * finish sets the time): the matrix forms of the decode take seconds
 * (most of it in ptxas), the portable forms a fraction. */
static int cost(const dsv4_job *j)
{
  const dsv4_launch *ln = &j->kernel->launch[j->target];
  int c = ln->form == DSV4_FORM_WARPGROUP || ln->form == DSV4_FORM_WARPGROUP_PAIR ? 16
          : ln->form == DSV4_FORM_WARP || ln->form == DSV4_FORM_WARP_DIRECT        ? 8
          : ln->form == DSV4_FORM_PORTABLE                                        ? 2
                                                                                  : 4;
  return c * dsv4_target_build_of(j->target)->compile_weight;
}

static dsv4_job *sort_jobs;
static int by_cost(const void *a, const void *b)
{
  int x = *(const int *)a, y = *(const int *)b, cx = cost(&sort_jobs[x]), cy = cost(&sort_jobs[y]);
  return cx != cy ? cy - cx : x - y;
}

static void run_one(dsv4_job *j)
{
  const dsv4_target *tg = dsv4_target_get(j->target);
  memset(&j->art, 0, sizeof j->art);
  j->failed = tg->compile(tg, j->kernel, j->want, &j->art, &j->diags) != 0;
}

static void *worker(void *arg)
{
  pool *p = arg;
  for (;;) {
    pthread_mutex_lock(&p->lock);
    int k = p->next < p->n ? p->order[p->next++] : -1;
    pthread_mutex_unlock(&p->lock);
    if (k < 0)
      return NULL;
    run_one(&p->jobs[k]);
  }
}

void dsv4_run_jobs(dsv4_job *jobs, int n, int threads)
{
  dsv4_targets_init(); /* before any thread: LLVM's registry and options */
  if (threads > n)
    threads = n;
  if (threads <= 1) {
    for (int i = 0; i < n; i++)
      run_one(&jobs[i]);
    return;
  }
  pool p = {.jobs = jobs, .n = n, .order = malloc((size_t)n * sizeof(int))};
  if (!p.order) {
    for (int i = 0; i < n; i++)
      run_one(&jobs[i]);
    return;
  }
  for (int i = 0; i < n; i++)
    p.order[i] = i;
  sort_jobs = jobs;
  qsort(p.order, (size_t)n, sizeof *p.order, by_cost);
  pthread_mutex_init(&p.lock, NULL);
  pthread_t *tid = calloc((size_t)threads, sizeof *tid);
  int started = 0;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, (size_t)64 << 20); /* LLVM's code generators recurse deeply */
  for (int i = 0; tid && i < threads; i++)
    if (!pthread_create(&tid[i], &attr, worker, &p))
      started++;
  pthread_attr_destroy(&attr);
  if (!started) /* no thread to be had: this one does the work */
    worker(&p);
  for (int i = 0; i < started; i++)
    pthread_join(tid[i], NULL);
  pthread_mutex_destroy(&p.lock);
  free(tid);
  free(p.order);
}

int dsv4_cpu_count(void)
{
  cpu_set_t set;
  if (!sched_getaffinity(0, sizeof set, &set) && CPU_COUNT(&set) > 0)
    return CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}
