/* bench_indexer.c -- the indexer's logits and top-k on the shape.
 *
 *   bench_indexer BUNDLE [cuda|hip|opencl] [LOGITS_KERNEL...]
 *
 * B = 128 requests of 32K context by default (DSV4_BENCH_SHAPES: issue 41's
 * matrix or a list; DSV4_BENCH_LENS: equal lengths or DeepGEMM's test's
 * draw; DSV4_BENCH_SMALL: 4 x 2K), next_n 1 and 2.  Logits bandwidth counts
 * the fewest bytes the op moves (each request's KV once, 132 a position;
 * each row's valid logits once; q and weights), beside a device-to-device
 * copy in the same run; top-k is timed on the kernel's own logits.  The
 * first and last requests' rows are checked against the reference first
 * (DeepGEMM's calc_diff rule).  With kernel names (a spec's tuning
 * variants, say), those instead of the indexer spec's three.
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
  dsv4rt_mqa_logits_topk_args f[BENCH_SETS];
} idx_arg;

static const char *fused_kernel; /* the fused logits_topk timed beside the two (NULL: none runs here) */
static int fused_rule;           /* 1: launched unnamed, the runtime's rule choosing */

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

static void run_fused(int i, void *p)
{
  if (dsv4rt_paged_mqa_logits_topk(bundle, &((idx_arg *)p)->f[i % BENCH_SETS], &kopts))
    bench_die("paged_mqa_logits_topk");
}

/* K of the bundle's kernel `name` (0: none such). */
static int64_t kernel_topk(const char *name)
{
  for (int e = 0; e < dsv4rt_bundle_count(bundle); e++) {
    const char *n, *op;
    dsv4rt_kernel_info info;
    if (!dsv4rt_bundle_entry(bundle, e, &n, &op, NULL, NULL) && !strcmp(n, name) &&
        !dsv4rt_bundle_entry_info(bundle, e, &info))
      return info.topk;
  }
  return 0;
}

/* One fused call on f, its K positions a row checked against the logits
 * kernel's rows lb (on the device) by the tie-tolerant rule within the two
 * kernels' rounding; 0 when they hold. */
static int run_fused_checked(dsv4rt_mqa_logits_topk_args *f, dsv4rt_buffer *lb, int64_t R, int64_t Lr,
                             int64_t rstride, const int32_t *cl, int64_t K)
{
  if (dsv4rt_paged_mqa_logits_topk(bundle, f, &kopts) || dsv4rt_synchronize(bench_ctx))
    bench_die("paged_mqa_logits_topk");
  float *lg = malloc((size_t)(R * rstride) * 4);
  int32_t *got = malloc((size_t)(R * K) * 4), *c = malloc((size_t)R * 4);
  if (!lg || !got || !c) {
    fprintf(stderr, "bench_indexer: out of host memory\n");
    exit(1);
  }
  dsv4rt_buffer_read(lb, 0, lg, (size_t)(R * rstride) * 4);
  dsv4rt_buffer_read(f->out, 0, got, (size_t)(R * K) * 4);
  for (int64_t r = 0; r < R; r++)
    c[r] = cl[r] < Lr ? cl[r] : (int32_t)Lr;
  char err[256] = "";
  int bad = dsv4_ref_topk_check_within(lg, R, rstride, c, K, got, 2e-5, err, sizeof err);
  if (bad)
    fprintf(stderr, "bench_indexer: %s: %s\n", fused_kernel, err);
  free(lg), free(got), free(c);
  return bad;
}

static float rnd01(void) { return (float)(dsv4_rng_next(&rng) >> 40) / (float)(1 << 24); }

/* Context lengths, drawn two ways (issue 41): "equal": every request has C
 * tokens and its next_n rows see C-next_n+1 .. C (decode with MTP); "test":
 * as DeepGEMM's test_paged_mqa_logits draws them: a request's length uniform
 * in [0.7 C, 1.3 C), its last row all of it, each earlier row a uniform
 * fraction of it, (len + 1) * U[0, 1) rounded down. */
static int64_t draw_lens(int test, int64_t B, int64_t nn, int64_t C, int32_t *len, int32_t *cl)
{
  int64_t lo = (int64_t)(0.7 * (double)C), hi = (int64_t)(1.3 * (double)C), maxl = 0;
  for (int64_t b = 0; b < B; b++) {
    len[b] = (int32_t)(test ? dsv4_rng_range(&rng, lo, hi - 1) : C);
    for (int64_t j = 0; j < nn; j++)
      cl[b * nn + j] = (int32_t)(!test ? C - nn + 1 + j
                                 : j == nn - 1 ? len[b]
                                               : (int64_t)((double)(len[b] + 1) * (double)rnd01()));
    maxl = len[b] > maxl ? len[b] : maxl;
  }
  return maxl;
}

/* Time the logits (and the top-k over them) at one shape.  Bytes counted as
 * the fewest the op must move, the same formula as bench/peer_deepgemm.py:
 * each request's KV read once (132 B a position), each row's valid logits
 * written once (4 B a position), q (e4m3) and weights read once. */
static void shape(const char *logits_kernel, const char *topk_kernel, const dsv4_layout *L, int H, int64_t B,
                  int64_t nn, int64_t C, int test, double copy_gbs)
{
  int64_t D = L->dim, bs = 64, stride = 8448, R = B * nn;
  int32_t *len = malloc((size_t)B * 4), *cl = malloc((size_t)R * 4);
  int64_t maxl = draw_lens(test, B, nn, C, len, cl);
  int64_t maxb = (maxl + bs - 1) / bs, nb = 0, Lr = maxb * bs, rstride = (Lr + 255) / 256 * 256;
  for (int64_t b = 0; b < B; b++)
    nb += (len[b] + bs - 1) / bs;
  /* the block table: a random permutation of the pool, each request's blocks in turn (as the test) */
  int32_t *perm = malloc((size_t)nb * 4), *bt = calloc((size_t)(B * maxb), 4);
  for (int64_t i = 0; i < nb; i++)
    perm[i] = (int32_t)i;
  for (int64_t i = nb - 1; i > 0; i--) {
    int64_t j = dsv4_rng_range(&rng, 0, i);
    int32_t t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  for (int64_t b = 0, o = 0; b < B; b++)
    for (int64_t k = 0; k < (len[b] + bs - 1) / bs; k++)
      bt[b * maxb + k] = perm[o++];
  uint8_t *cache = malloc((size_t)(nb * stride));
  if (!cache || !bt || !perm) {
    fprintf(stderr, "bench_indexer: out of host memory\n");
    exit(1);
  }
  dsv4_rng_bytes(&rng, cache, (size_t)(nb * stride));
  for (int64_t i = 0; i < nb * stride / 8; i++)
    ((uint64_t *)cache)[i] &= 0x7777777777777777ull; /* finite e4m3 codes */
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
  idx_arg g;
  for (int s = 0; s < BENCH_SETS; s++) {
    dsv4rt_buffer *lb = bench_dev(NULL, (size_t)(R * rstride) * 4), *clb = bench_dev(cl, (size_t)R * 4);
    g.a[s] = (dsv4rt_mqa_logits_args){.logits = lb, .row_len = Lr, .row_stride = rstride,
                                      .q = bench_dev(q, (size_t)(R * H * D)), .batch = B, .next_n = nn,
                                      .cache = bench_dev(cache, (size_t)(nb * stride)), .num_blocks = nb,
                                      .block_size = bs, .block_stride = stride,
                                      .weights = bench_dev(w, (size_t)(R * H) * 4), .context_lens = clb,
                                      .block_table = bench_dev(bt, (size_t)(B * maxb) * 4), .max_blocks = maxb};
    g.t[s] = (dsv4rt_topk_args){.out = bench_dev(NULL, (size_t)R * 2048 * 4), .logits = lb, .rows = R, .row_len = Lr,
                                .row_stride = rstride, .context_lens = clb};
    const dsv4rt_mqa_logits_args *a = &g.a[s];
    g.f[s] = (dsv4rt_mqa_logits_topk_args){.out = g.t[s].out, .row_len = Lr, .q = a->q, .batch = B, .next_n = nn,
                                           .cache = a->cache, .num_blocks = nb, .block_size = bs,
                                           .block_stride = stride, .weights = a->weights, .context_lens = clb,
                                           .block_table = a->block_table, .max_blocks = maxb};
  }
  kopts.kernel = logits_kernel;
  run_logits(0, &g);
  dsv4rt_synchronize(bench_ctx);
  /* check, by DeepGEMM's calc_diff rule (1 - 2 sum(xy) / sum(x^2 + y^2) below 5e-6, its threshold against
   * the reference on the same FP8 inputs), the rows of the first and the last request against the C
   * reference, each over its first 8192 positions (the reference is one CPU thread) */
  const int64_t cap = 8192;
  float *got = malloc((size_t)(nn * rstride) * 4), *want = malloc((size_t)(nn * rstride) * 4);
  int32_t *ccl = malloc((size_t)nn * 4);
  double xy = 0, xx = 0;
  for (int64_t b = 0; b < B; b += (B > 1 ? B - 1 : 1)) {
    for (int64_t j = 0; j < nn; j++)
      ccl[j] = cl[b * nn + j] < cap ? cl[b * nn + j] : (int32_t)cap;
    dsv4rt_buffer_read(g.a[0].logits, (size_t)(b * nn * rstride) * 4, got, (size_t)(nn * rstride) * 4);
    if (dsv4_ref_paged_mqa_logits(L, q + b * nn * H * D, 1, nn, H, cache, nb, bs, stride, w + b * nn * H, ccl,
                                  bt + b * maxb, maxb, want, Lr, rstride)) {
      fprintf(stderr, "bench_indexer: the reference refused its arguments\n");
      exit(1);
    }
    for (int64_t j = 0; j < nn; j++)
      for (int64_t k = 0; k < ccl[j]; k++) {
        double x = got[j * rstride + k], y = want[j * rstride + k];
        xy += x * y, xx += x * x + y * y;
      }
  }
  double diff = xx > 0 ? 1 - 2 * xy / xx : 0;
  if (!(diff < 5e-6)) {
    fprintf(stderr, "bench_indexer: logits differ from the reference (calc_diff %g)\n", diff);
    exit(1);
  }
  double lms = bench_time_ms(run_logits, &g);
  double bytes = (double)R * H * (D + 4), flop = 0;
  for (int64_t b = 0; b < B; b++)
    bytes += (double)len[b] * 132;
  for (int64_t r = 0; r < R; r++)
    bytes += (double)cl[r] * 4, flop += (double)cl[r] * H * D * 2;
  /* the top-k over those logits; a refusal (a row longer than the kernel takes, say) is not fatal */
  kopts.kernel = topk_kernel;
  double tms = -1;
  if (!dsv4rt_topk(bundle, &g.t[0], &kopts))
    tms = bench_time_ms(run_topk, &g);
  /* the fused op on the same inputs, its positions checked against our logits kernel's row (within the
   * two kernels' rounding), then timed */
  double fms = -1;
  if (fused_kernel) {
    kopts.kernel = fused_rule ? NULL : fused_kernel;
    dsv4rt_mqa_logits_topk_args *f = &g.f[0];
    int64_t K = kernel_topk(fused_kernel);
    if (K && !run_fused_checked(f, g.a[0].logits, R, Lr, rstride, cl, K))
      fms = bench_time_ms(run_fused, &g);
  }
  char label[96], tk[32] = "-", fu[32] = "-", ratio[32] = "-";
  snprintf(label, sizeof label, "B %lld, ctx %lld, next_n %lld, %s", (long long)B, (long long)C, (long long)nn,
           test ? "test" : "equal");
  if (tms >= 0)
    snprintf(tk, sizeof tk, "%.1f", tms * 1e3);
  if (fms >= 0)
    snprintf(fu, sizeof fu, "%.1f", fms * 1e3);
  if (fms > 0 && tms >= 0)
    snprintf(ratio, sizeof ratio, "%.2f", (lms + tms) / fms);
  double gbs = bytes / (lms * 1e-3) / 1e9;
  printf("%-36s %10.1f %9.0f %8.1f%% %9.1f %12s %10s %8s %10.1e\n", label, lms * 1e3, gbs, 100 * gbs / copy_gbs,
         flop / (lms * 1e-3) / 1e12, tk, fu, ratio, diff);
  fflush(stdout);
  for (int s = 0; s < BENCH_SETS; s++) {
    dsv4rt_mqa_logits_args *a = &g.a[s];
    dsv4rt_buffer_destroy(a->logits), dsv4rt_buffer_destroy(a->q), dsv4rt_buffer_destroy(a->cache),
        dsv4rt_buffer_destroy(a->weights), dsv4rt_buffer_destroy(a->context_lens),
        dsv4rt_buffer_destroy(a->block_table), dsv4rt_buffer_destroy(g.t[s].out);
  }
  free(cache), free(q), free(w), free(cl), free(len), free(bt), free(perm), free(got), free(want), free(ccl);
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: bench_indexer BUNDLE [cuda|hip|opencl] [LOGITS_KERNEL...]\n");
    return 2;
  }
  bench_name = "bench_indexer";
  bench_open(argc, argv, 2);
  if (dsv4rt_bundle_open(bench_ctx, argv[1], &bundle))
    bench_die("bundle");
  rng.s = dsv4_check_seed();
  /* the cache layout: the indexer spec's portable kernel's, else (a sweep's
   * or a probe's bundle) the first logits kernel's */
  dsv4_layout L;
  int e, first = -1;
  for (e = 0; e < dsv4rt_bundle_count(bundle); e++) {
    const char *name, *op;
    dsv4rt_bundle_entry(bundle, e, &name, &op, NULL, NULL);
    if (!strcmp(name, "mqa_logits_v4"))
      break;
    if (first < 0 && !strcmp(op, "paged_mqa_logits"))
      first = e;
  }
  if ((e == dsv4rt_bundle_count(bundle) && (e = first) < 0) || dsv4rt_bundle_entry_layout(bundle, e, &L)) {
    fprintf(stderr, "bench_indexer: %s has no paged_mqa_logits kernel\n", argv[1]);
    return 2;
  }
  int small = getenv("DSV4_BENCH_SMALL") != NULL;
  /* DSV4_BENCH_SHAPES: "matrix" (issue 41's: B 1, 8, 32, 128 at contexts 8K, 32K, 128K, and 1M at B 1) or a
   * list "B:CTX,B:CTX,..."; by default B 128 at 32K.  DSV4_BENCH_LENS: "equal" (the default), "test"
   * (DeepGEMM's test's draw) or both, "test,equal". */
  int64_t shapes[64][2], ns = 0;
  const char *sh = getenv("DSV4_BENCH_SHAPES") ? getenv("DSV4_BENCH_SHAPES") : "128:32768";
  if (!strcmp(sh, "matrix")) {
    static const int64_t ctxs[] = {8192, 32768, 131072}, bs_[] = {1, 8, 32, 128};
    for (int c = 0; c < 3; c++)
      for (int b = 0; b < 4; b++)
        shapes[ns][0] = bs_[b], shapes[ns++][1] = ctxs[c];
    shapes[ns][0] = 1, shapes[ns++][1] = 1 << 20;
  } else
    for (const char *p = sh; *p && ns < 64;) {
      char *e1, *e2 = NULL;
      long long b = strtoll(p, &e1, 10), c = *e1 == ':' ? strtoll(e1 + 1, &e2, 10) : 0;
      if (b < 1 || c < 1) {
        fprintf(stderr, "bench_indexer: DSV4_BENCH_SHAPES: want B:CTX[,B:CTX...], got %s\n", sh);
        return 2;
      }
      shapes[ns][0] = b, shapes[ns++][1] = c;
      p = *e2 == ',' ? e2 + 1 : e2;
    }
  const char *lens = getenv("DSV4_BENCH_LENS") ? getenv("DSV4_BENCH_LENS") : "equal";
  int lens_mask = (strstr(lens, "test") ? 1 : 0) | (strstr(lens, "equal") ? 2 : 0);
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
    /* DSV4_BENCH_FUSED: the fused logits_topk kernel (default mqa_logits_<topk>_mma, the 1024-position
     * chunk; "rule": the runtime's choice among the K 512 kernels (by their chunk, rt.c fills_better) */
    static char fname[96];
    snprintf(fname, sizeof fname, "mqa_logits_%s_mma", topk);
    fused_kernel = getenv("DSV4_BENCH_FUSED") ? getenv("DSV4_BENCH_FUSED") : fname;
    fused_rule = !strcmp(fused_kernel, "rule");
    if (fused_rule)
      fused_kernel = "mqa_logits_topk_512_mma";
    if (!dsv4rt_bundle_kernel_runs(bundle, fused_kernel))
      fused_kernel = NULL;
    printf("\n%-36s %10s %9s %9s %9s %12s %10s %8s %10s\n", head, "logits us", "GB/s", "vs copy", "TFLOP/s", "top-k us",
           "fused us", "l+t / f", "calc_diff");
    if (small) {
      shape(kernels[i], topk, &L, 64, 4, 1, 2048, 0, copy);
      continue;
    }
    /* DSV4_BENCH_NEXT_N=1 or 2: that next_n alone (for a profiler) */
    const char *only = getenv("DSV4_BENCH_NEXT_N");
    for (int s = 0; s < ns; s++)
      for (int nn = 1; nn <= 2; nn++)
        for (int t = 0; t < 2; t++)
          if ((!only || atoi(only) == nn) && (lens_mask >> t & 1))
            shape(kernels[i], topk, &L, 64, shapes[s][0], nn, shapes[s][1], t == 0, copy);
  }
  bench_close(bundle);
  return 0;
}
