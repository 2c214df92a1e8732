/* bench_indexer.c -- the indexer's logits and top-k on the shape.
 *
 *   bench_indexer BUNDLE [cuda|opencl] [LOGITS_KERNEL...]
 *
 * B = 128 rows of 32K context (DSV4_BENCH_SMALL: 4 x 2K), next_n 1 and 2.
 * Logits bandwidth counts the KV bytes read (132 a position, once per
 * request) and the logits written, beside a device-to-device copy in the
 * same run; top-k is timed on the kernel's own logits.  One row of each run
 * is checked against the reference first.  With kernel names (a spec's
 * tuning variants, say), those instead of the indexer spec's three.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "dsv4_check.h"
#include "dsv4_ref.h"

static dsv4rt_bundle *bundle;
static dsv4rt_launch_opts kopts;
static dsv4_rng rng;

typedef struct {
  dsv4rt_mqa_logits_args a[BENCH_SETS];
  dsv4rt_topk_args t[BENCH_SETS];
} idx_arg;

static void run_logits(int i, void *p)
{
  if (dsv4rt_paged_mqa_logits(bundle, &((idx_arg *)p)->a[i % BENCH_SETS], &kopts))
    bench_die("paged_mqa_logits");
}

static void run_topk(int i, void *p)
{
  if (dsv4rt_topk(bundle, &((idx_arg *)p)->t[i % BENCH_SETS], &kopts))
    bench_die("topk");
}

static float rnd01(void) { return (float)(dsv4_rng_next(&rng) >> 40) / (float)(1 << 24); }

static void shape(const char *logits_kernel, const char *topk_kernel, const dsv4_layout *L, int H, int64_t B,
                  int64_t nn, int64_t C, double copy_gbs)
{
  int64_t D = L->dim, bs = 64, maxb = C / bs, nb = B * maxb, stride = 8448, R = B * nn, Lr = C;
  int64_t rstride = (Lr + 255) / 256 * 256;
  uint8_t *cache = malloc((size_t)(nb * stride));
  for (int64_t i = 0; i < nb * stride; i++)
    cache[i] = (uint8_t)(dsv4_rng_next(&rng) & 0x77); /* finite e4m3 codes */
  for (int64_t b = 0; b < nb; b++)
    for (int64_t t = 0; t < bs; t++) {
      float s = ldexpf(1.0f, (int)dsv4_rng_range(&rng, -8, -4));
      memcpy(cache + b * stride + bs * 128 + t * 4, &s, 4);
    }
  uint8_t *q = malloc((size_t)(R * H * D));
  for (int64_t i = 0; i < R * H * D; i++)
    q[i] = dsv4_ref_f32_to_e4m3((rnd01() - 0.5f) * 8.0f);
  float *w = malloc((size_t)(R * H) * 4);
  for (int64_t i = 0; i < R * H; i++)
    w[i] = rnd01() - 0.3f;
  int32_t *cl = malloc((size_t)R * 4), *bt = malloc((size_t)(B * maxb) * 4);
  for (int64_t r = 0; r < R; r++)
    cl[r] = (int32_t)(C - nn + 1 + r % nn);
  for (int64_t i = 0; i < B * maxb; i++)
    bt[i] = (int32_t)((i * 7919) % nb);
  idx_arg g;
  for (int s = 0; s < BENCH_SETS; s++) {
    dsv4rt_buffer *lb = bench_dev(NULL, (size_t)(R * rstride) * 4), *clb = bench_dev(cl, (size_t)R * 4);
    g.a[s] = (dsv4rt_mqa_logits_args){.logits = lb, .row_len = Lr, .row_stride = rstride,
                                      .q = bench_dev(q, (size_t)(R * H * D)), .batch = B, .next_n = nn,
                                      .cache = bench_dev(cache, (size_t)(nb * stride)), .num_blocks = nb,
                                      .block_size = bs, .block_stride = stride,
                                      .weights = bench_dev(w, (size_t)(R * H) * 4), .context_lens = clb,
                                      .block_table = bench_dev(bt, (size_t)(B * maxb) * 4), .max_blocks = maxb};
    g.t[s] = (dsv4rt_topk_args){.out = bench_dev(NULL, (size_t)R * 1024 * 4), .logits = lb, .rows = R, .row_len = Lr,
                                .row_stride = rstride, .context_lens = clb};
  }
  kopts.kernel = logits_kernel;
  run_logits(0, &g);
  dsv4rt_synchronize(bench_ctx);
  /* check the first row against the reference */
  float *got = malloc((size_t)rstride * 4), *want = malloc((size_t)rstride * 4);
  dsv4rt_buffer_read(g.a[0].logits, 0, got, (size_t)rstride * 4);
  dsv4_ref_paged_mqa_logits(L, q, 1, 1, H, cache, nb, bs, stride, w, cl, bt, maxb, want, Lr, rstride);
  double xy = 0, xx = 0;
  for (int64_t k = 0; k < cl[0]; k++)
    xy += (double)got[k] * want[k], xx += (double)got[k] * got[k] + (double)want[k] * want[k];
  if (!(1 - 2 * xy / xx < 5e-6)) {
    fprintf(stderr, "bench_indexer: logits differ from the reference (calc_diff %g)\n", 1 - 2 * xy / xx);
    exit(1);
  }
  double lms = bench_time_ms(run_logits, &g);
  double bytes = (double)B * C * 132 + (double)R * Lr * 4;
  double flop = (double)R * C * H * D * 2;
  kopts.kernel = topk_kernel;
  double tms = bench_time_ms(run_topk, &g);
  char label[96];
  snprintf(label, sizeof label, "B %lld, ctx %lld, next_n %lld", (long long)B, (long long)C, (long long)nn);
  double gbs = bytes / (lms * 1e-3) / 1e9;
  printf("%-30s %10.1f %9.0f %8.1f%% %9.1f %12.1f\n", label, lms * 1e3, gbs, 100 * gbs / copy_gbs,
         flop / (lms * 1e-3) / 1e12, tms * 1e3);
  for (int s = 0; s < BENCH_SETS; s++) {
    dsv4rt_mqa_logits_args *a = &g.a[s];
    dsv4rt_buffer_destroy(a->logits), dsv4rt_buffer_destroy(a->q), dsv4rt_buffer_destroy(a->cache),
        dsv4rt_buffer_destroy(a->weights), dsv4rt_buffer_destroy(a->context_lens), dsv4rt_buffer_destroy(a->block_table),
        dsv4rt_buffer_destroy(g.t[s].out);
  }
  free(cache), free(q), free(w), free(cl), free(bt), free(got), free(want);
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: bench_indexer BUNDLE [cuda|opencl] [LOGITS_KERNEL...]\n");
    return 2;
  }
  bench_name = "bench_indexer";
  bench_open(argc, argv, 2);
  if (dsv4rt_bundle_open(bench_ctx, argv[1], &bundle))
    bench_die("bundle");
  rng.s = dsv4_check_seed();
  dsv4_layout L;
  int e;
  for (e = 0; e < dsv4rt_bundle_count(bundle); e++) {
    const char *name;
    dsv4rt_bundle_entry(bundle, e, &name, NULL, NULL, NULL);
    if (!strcmp(name, "mqa_logits_v4"))
      break;
  }
  dsv4rt_bundle_entry_layout(bundle, e, &L);
  int small = getenv("DSV4_BENCH_SMALL") != NULL;
  printf("device: %s\n\n", dsv4rt_device_name(bench_ctx));
  double cms, copy = bench_copy_gbs(small ? (size_t)64 << 20 : (size_t)1 << 30, &cms);
  printf("d2d copy: %.0f GB/s\n", copy);
  /* the matrix form (sm_90a: wgmma; sm_89: mma.sync) beside the portable tile's first matrix path */
  static const char *const spec_kernels[] = {"mqa_logits_v4_mma", "mqa_logits_v4_mma_sm89", "mqa_logits_v4"};
  const char *const *kernels = argc > 3 ? (const char *const *)argv + 3 : spec_kernels;
  int nk = argc > 3 ? argc - 3 : 3;
  for (int i = 0; i < nk; i++) {
    int runs = dsv4rt_bundle_kernel_runs(bundle, kernels[i]);
    if (!runs) {
      printf("\n(no %s kernel for this device)\n", kernels[i]);
      continue;
    }
    /* DSV4_BENCH_TOPK: another top-k kernel of the bundle (a sweep point) */
    const char *topk = getenv("DSV4_BENCH_TOPK") ? getenv("DSV4_BENCH_TOPK") : "topk_512";
    char head[96];
    snprintf(head, sizeof head, "%s, %s", kernels[i], topk);
    printf("\n%-30s %10s %9s %9s %9s %12s\n", head, "logits us", "GB/s", "vs copy", "TFLOP/s", "top-k us");
    if (small) {
      shape(kernels[i], topk, &L, 64, 4, 1, 2048, copy);
      continue;
    }
    /* DSV4_BENCH_NEXT_N=1 or 2: that shape alone (for a profiler) */
    const char *only = getenv("DSV4_BENCH_NEXT_N");
    for (int nn = 1; nn <= 2; nn++)
      if (!only || atoi(only) == nn)
        shape(kernels[i], topk, &L, 64, 128, nn, 32768, copy);
  }
  bench_close(bundle);
  return 0;
}
