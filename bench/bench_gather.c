/* bench_gather.c -- achieved bandwidth of the two gathers beside a
 * device-to-device copy measured in the same run.
 *
 *   bench_gather BUNDLE [cuda|hip|opencl]
 *
 * Bytes counted are the fewest each kernel must move: per token the 584
 * cache bytes and its index/table entry read, 1024 output bytes written;
 * the copy counts bytes read plus bytes written.  Inputs are rotated over
 * several sets larger than the L2 so repeated launches do not hit in it.
 * Each row is the median of several timed batches of launches (device
 * events).  Results are checked against the host reference once first.
 * Prints a table; asserts nothing about time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4_check.h"
#include "dsv4_ref.h"
#include "dsv4rt.h"

#include "bench_common.h"

static dsv4rt_bundle *bundle;
static dsv4rt_launch_opts kopts; /* .kernel: the variant being timed */
static dsv4_rng rng;

/* ---- the gathers ---- */

typedef struct {
  dsv4rt_dequant_gather_args a[BENCH_SETS];
  dsv4rt_paged_gather_args p[BENCH_SETS];
} gather_arg;

static void run_dequant(int i, void *p)
{
  if (dsv4rt_dequant_gather(bundle, &((gather_arg *)p)->a[i % BENCH_SETS], &kopts))
    bench_die("dequant_gather");
}

static void run_paged(int i, void *p)
{
  if (dsv4rt_paged_gather(bundle, &((gather_arg *)p)->p[i % BENCH_SETS], &kopts))
    bench_die("paged_gather");
}

/* A cache of nb blocks of 64 tokens (vLLM's page stride) with random bytes
 * and realistic scale bytes. */
static uint8_t *make_cache(int64_t nb, int64_t stride)
{
  uint8_t *c = malloc((size_t)(nb * stride));
  dsv4_rng_bytes(&rng, c, (size_t)(nb * stride));
  for (int64_t b = 0; b < nb; b++)
    for (int64_t t = 0; t < 64; t++)
      for (int j = 0; j < 7; j++)
        c[b * stride + 64 * 576 + t * 8 + j] = (uint8_t)dsv4_rng_range(&rng, 110, 135);
  return c;
}

/* Free the device buffers of every set (the 28 bench_dev made). */
static void free_sets(gather_arg *g)
{
  for (int s = 0; s < BENCH_SETS; s++) {
    dsv4rt_dequant_gather_args *a = &g->a[s];
    dsv4rt_paged_gather_args *p = &g->p[s];
    dsv4rt_buffer_destroy(a->out), dsv4rt_buffer_destroy(a->cache), dsv4rt_buffer_destroy(a->indices);
    dsv4rt_buffer_destroy(p->out), dsv4rt_buffer_destroy(p->cache), dsv4rt_buffer_destroy(p->seq_lens),
        dsv4rt_buffer_destroy(p->block_table);
  }
}

/* Check one result of a set against the reference before timing it. */
static void verify(const char *what, dsv4rt_buffer *out, const uint16_t *want, size_t n)
{
  uint16_t *got = malloc(n * 2);
  dsv4rt_synchronize(bench_ctx);
  if (dsv4rt_buffer_read(out, 0, got, n * 2))
    bench_die("download");
  size_t first, bad = dsv4_check_bf16(got, want, n, &first);
  if (bad) {
    fprintf(stderr, "bench_gather: %s: %zu of %zu values differ from the reference\n", what, bad, n);
    exit(1);
  }
  free(got);
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: bench_gather BUNDLE [cuda|hip|opencl]\n");
    return 2;
  }
  bench_name = "bench_gather";
  bench_open(argc, argv, 2);
  if (dsv4rt_bundle_open(bench_ctx, argv[1], &bundle))
    bench_die("bundle");
  rng.s = dsv4_check_seed();
  int small = getenv("DSV4_BENCH_SMALL") != NULL; /* CPU smoke runs */
  dsv4_layout L = dsv4_check_layout_v4();
  const int64_t bs = 64, stride = 37440;
  printf("device: %s\n\n", dsv4rt_device_name(bench_ctx));

  double cms, big_gbs = bench_copy_gbs(small ? (size_t)64 << 20 : (size_t)1 << 30, &cms);
  printf("%-40s %10s %9s %9s %14s\n", "kernel (bytes read + written)", "time us", "GB/s", "vs copy", "vs equal copy");
  printf("%-40s %10.1f %9.0f %8.1f%% %13s\n", small ? "d2d copy 64 MiB" : "d2d copy 1 GiB", cms * 1e3, big_gbs, 100.0,
         "");

  /* scattered: 64K slots from a cache of nb blocks (several times the L2) */
  int64_t n = small ? 4096 : 65536, nb = small ? 64 : 2048;
  gather_arg g;
  memset(&g, 0, sizeof g);
  uint8_t *host_cache = make_cache(nb, stride);
  int32_t *idx = malloc((size_t)n * 4), *idx0 = malloc((size_t)n * 4);
  for (int s = 0; s < BENCH_SETS; s++) {
    for (int64_t i = 0; i < n; i++)
      idx[i] = (int32_t)dsv4_rng_range(&rng, 0, nb * bs - 1);
    if (s == 0)
      memcpy(idx0, idx, (size_t)n * 4);
    g.a[s] = (dsv4rt_dequant_gather_args){.out = bench_dev(NULL, (size_t)n * 1024),
                                          .cache = bench_dev(host_cache, (size_t)(nb * stride)),
                                          .indices = bench_dev(idx, (size_t)n * 4),
                                          .n = n,
                                          .num_blocks = nb,
                                          .block_size = bs,
                                          .block_stride = stride};
  }
  uint16_t *dwant = malloc((size_t)n * 1024);
  dsv4_ref_dequant_gather(&L, host_cache, nb, bs, stride, idx0, n, dwant);
  double dbytes = (double)n * (584 + 4 + 1024);
  double ems, eq_gbs = bench_copy_gbs((size_t)(dbytes / 2), &ems);

  /* paged: R requests x T tokens, each request's blocks scattered */
  int64_t R = 8, T = small ? 512 : 8192, per = T / bs, pnb = R * per;
  int32_t *seq = malloc((size_t)R * 4), *bt = malloc((size_t)(R * per) * 4);
  uint8_t *pcache = make_cache(pnb, stride);
  for (int64_t r = 0; r < R; r++) {
    seq[r] = (int32_t)T;
    for (int64_t j = 0; j < per; j++)
      bt[r * per + j] = (int32_t)((r * per + j) * 7919 % pnb); /* a permutation */
  }
  for (int s = 0; s < BENCH_SETS; s++)
    g.p[s] = (dsv4rt_paged_gather_args){.out = bench_dev(NULL, (size_t)(R * T) * 1024),
                                        .out_stride_r = T * 512,
                                        .out_stride_m = 512,
                                        .out_rows = T,
                                        .offset = 0,
                                        .cache = bench_dev(pcache, (size_t)(pnb * stride)),
                                        .num_blocks = pnb,
                                        .block_size = bs,
                                        .block_stride = stride,
                                        .seq_lens = bench_dev(seq, (size_t)R * 4),
                                        .gather_lens = NULL,
                                        .block_table = bench_dev(bt, (size_t)(R * per) * 4),
                                        .num_requests = R,
                                        .max_blocks = per};
  uint16_t *pwant = malloc((size_t)(R * T) * 1024);
  dsv4_ref_paged_gather(&L, pcache, pnb, bs, stride, seq, NULL, bt, R, per, 0, pwant, T * 512, 512, T);
  double pbytes = (double)(R * T) * (584 + 1024) + (double)(R * per) * 4;
  double pems, peq_gbs = bench_copy_gbs((size_t)(pbytes / 2), &pems);

  /* every kernel of the bundle that runs here, each checked then timed */
  for (int op = 0; op < 2; op++) {
    for (int e = 0; e < dsv4rt_bundle_count(bundle); e++) {
      const char *name, *opn, *tgt, *arch;
      dsv4rt_bundle_entry(bundle, e, &name, &opn, &tgt, &arch);
      if (strcmp(opn, op ? "paged_gather" : "dequant_gather"))
        continue;
      if (!dsv4rt_bundle_entry_is_first(bundle, e)) /* one row per kernel, not per target */
        continue;
      kopts.kernel = name;
      dsv4rt_status st =
          op ? dsv4rt_paged_gather(bundle, &g.p[0], &kopts) : dsv4rt_dequant_gather(bundle, &g.a[0], &kopts);
      if (st == DSV4RT_ERR_NO_KERNEL)
        continue; /* built for another target */
      if (st)
        bench_die(name);
      if (op)
        verify(name, g.p[0].out, pwant, (size_t)(R * T) * 512);
      else
        verify(name, g.a[0].out, dwant, (size_t)n * 512);
      double ms = bench_time_ms(op ? run_paged : run_dequant, &g);
      double gbs = (op ? pbytes : dbytes) / (ms * 1e-3) / 1e9;
      char label[96];
      if (op)
        snprintf(label, sizeof label, "%s (%lldx%lld)", name, (long long)R, (long long)T);
      else
        snprintf(label, sizeof label, "%s (%lld slots)", name, (long long)n);
      printf("%-40s %10.1f %9.0f %8.1f%% %12.1f%%\n", label, ms * 1e3, gbs, 100 * gbs / big_gbs,
             100 * gbs / (op ? peq_gbs : eq_gbs));
    }
  }
  printf("\n(equal copy: a d2d copy moving the same bytes as each gather, %.1f and %.1f us)\n", ems * 1e3, pems * 1e3);
  free_sets(&g);
  free(host_cache), free(idx), free(idx0), free(dwant), free(seq), free(bt), free(pcache), free(pwant);
  bench_close(bundle);
  return 0;
}
