/* bench_decode.c -- sparse MLA decode throughput on the issue's shapes.
 *
 *   bench_decode BUNDLE [cuda|opencl] [KERNEL]
 *
 * DSV4_BENCH_SPLITS=n forces the warp-matrix kernels' split-KV count (0:
 * the runtime's choice), for sweeps.  DSV4_BENCH_SHAPE=pro, pro-dram, flash
 * or small runs one of the shapes below; DSV4_BENCH_SHAPE=T,H,NX one of T tokens, H
 * heads and NX compressed + 128 SWA indices (time against tiles).
 * DSV4_BENCH_UNCHECKED (set to anything) times without the reference
 * check (ablation builds, whose results are wrong by design; the row says
 * unchecked).
 * DSV4_BENCH_KV_SCALE=k makes both caches k times larger (the indices
 * spread over all of it): by default each set's caches (about 5 MB) sit in
 * the L2, as they would not in serving, where the rows a token selects come
 * from DRAM; so the table also has V4-Pro with caches 16 times larger (80
 * MB a set, four sets rotating: past the L2).
 *
 * TFLOP/s counted as T * H * (valid indices) * 2048 (QK and PV, 512 dims,
 * two FLOPs a multiply-add) over the kernel time, and the time beside the
 * time to read the shape's KV bytes once at the copy bandwidth measured in
 * the same run (the matrix-unit ceiling is measured by gpu_run.sh with a
 * bf16 matrix product in the same run).  Shapes: V4-Pro (H 128, 1024
 * compressed + 128 SWA, T 128), V4-Flash (H 64, 512 + 128, T 128) and a
 * small batch (T 8).  Every output is checked against the reference first.
 * "issue us" is the host's time to issue one decode (validation and both
 * launches): where it reaches the device time, the host sets the figure.
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
static int64_t kv_scale = 1; /* DSV4_BENCH_KV_SCALE */

typedef struct {
  dsv4rt_sparse_decode_args a[BENCH_SETS];
} decode_arg;

static void run_decode(int i, void *p)
{
  if (dsv4rt_sparse_decode(bundle, &((decode_arg *)p)->a[i % BENCH_SETS], &kopts))
    bench_die("sparse_decode");
}

static float rnd01(void) { return (float)(dsv4_rng_next(&rng) >> 40) / (float)(1 << 24); }

/* A DSv4 cache of nb blocks written by the reference writer from random rows. */
static uint8_t *make_cache(const dsv4_layout *L, int64_t nb, int64_t bs, int64_t stride)
{
  int64_t n = nb * bs;
  uint16_t *kv = malloc((size_t)(n * L->dim) * 2);
  int64_t *slots = malloc((size_t)n * 8);
  for (int64_t i = 0; i < n * L->dim; i++)
    kv[i] = dsv4_ref_f32_to_bf16((rnd01() - 0.5f) * 4.0f);
  for (int64_t i = 0; i < n; i++)
    slots[i] = i;
  uint8_t *c = calloc(1, (size_t)(nb * stride));
  dsv4_ref_kv_insert(L, kv, n, slots, n, NULL, NULL, 0, 0, 0, c, nb, bs, stride);
  free(kv), free(slots);
  return c;
}

static void shape(const char *label, const char *kernel, const dsv4_layout *L, int64_t T, int64_t H, int64_t nx,
                  int64_t xbs, double copy_gbs)
{
  int64_t bs = 64, nb = 64 * kv_scale, stride = 37440, topk = 128;
  int64_t xstride = (dsv4_layout_min_block_bytes(L, xbs) + 575) / 576 * 576, xnb = nx ? ((nx * 4) / xbs + 1) * kv_scale : 0;
  uint8_t *cache = make_cache(L, nb, bs, stride), *xcache = nx ? make_cache(L, xnb, xbs, xstride) : NULL;
  uint16_t *q = malloc((size_t)(T * H * 512) * 2);
  for (int64_t i = 0; i < T * H * 512; i++)
    q[i] = dsv4_ref_f32_to_bf16((rnd01() - 0.5f) * 2.0f);
  int32_t *idx = malloc((size_t)(T * topk) * 4), *lens = malloc((size_t)T * 4);
  int32_t *xidx = malloc((size_t)(T * nx) * 4 + 4), *xlens = malloc((size_t)T * 4);
  for (int64_t t = 0; t < T; t++) {
    lens[t] = (int32_t)topk, xlens[t] = (int32_t)nx;
    for (int64_t j = 0; j < topk; j++)
      idx[t * topk + j] = (int32_t)dsv4_rng_range(&rng, 0, nb * bs - 1);
    for (int64_t j = 0; j < nx; j++)
      xidx[t * nx + j] = (int32_t)dsv4_rng_range(&rng, 0, xnb * xbs - 1);
  }
  float *sink = malloc((size_t)H * 4);
  for (int64_t h = 0; h < H; h++)
    sink[h] = rnd01() - 0.5f;
  decode_arg g;
  for (int s = 0; s < BENCH_SETS; s++)
    g.a[s] = (dsv4rt_sparse_decode_args){
        .out = bench_dev(NULL, (size_t)(T * H * 512) * 2), .lse = bench_dev(NULL, (size_t)(T * H) * 4),
        .q = bench_dev(q, (size_t)(T * H * 512) * 2), .n_tokens = T, .heads = H,
        .cache = bench_dev(cache, (size_t)(nb * stride)), .num_blocks = nb, .block_size = bs, .block_stride = stride,
        .indices = bench_dev(idx, (size_t)(T * topk) * 4), .lens = bench_dev(lens, (size_t)T * 4), .topk = topk,
        .extra_cache = nx ? bench_dev(xcache, (size_t)(xnb * xstride)) : NULL, .extra_num_blocks = xnb,
        .extra_block_size = xbs, .extra_block_stride = xstride,
        .extra_indices = nx ? bench_dev(xidx, (size_t)(T * nx) * 4) : NULL,
        .extra_lens = nx ? bench_dev(xlens, (size_t)T * 4) : NULL, .extra_topk = nx,
        .attn_sink = bench_dev(sink, (size_t)H * 4), .softmax_scale = 0.044194173824159216f, .tensor_scale = 1};
  kopts.kernel = kernel;
  kopts.splits = getenv("DSV4_BENCH_SPLITS") ? atoi(getenv("DSV4_BENCH_SPLITS")) : 0; /* split-KV sweeps */
  /* check against the reference */
  uint16_t *want = malloc((size_t)(T * H * 512) * 2), *got = malloc((size_t)(T * H * 512) * 2);
  float *lw = malloc((size_t)(T * H) * 4), *lg = malloc((size_t)(T * H) * 4);
  int unchecked = getenv("DSV4_BENCH_UNCHECKED") != NULL;
  if (!unchecked)
    dsv4_ref_sparse_decode(L, 512, q, T, H, cache, nb, bs, stride, idx, lens, topk, xcache, xnb, xbs, xstride, xidx,
                           xlens, nx, sink, 0.044194173824159216f, 1, want, lw);
  run_decode(0, &g);
  dsv4rt_synchronize(bench_ctx);
  dsv4rt_buffer_read(g.a[0].out, 0, got, (size_t)(T * H * 512) * 2);
  dsv4rt_buffer_read(g.a[0].lse, 0, lg, (size_t)(T * H) * 4);
  for (int64_t i = 0; i < T * H * 512 && !unchecked; i++) {
    float x = dsv4_ref_bf16_to_f32(got[i]), y = dsv4_ref_bf16_to_f32(want[i]);
    if (!(fabsf(x - y) <= 1e-3f + 2.01f / 128 * fabsf(y))) {
      fprintf(stderr, "bench_decode: %s: out[%lld] = %g, reference %g\n", label, (long long)i, x, y);
      exit(1);
    }
  }
  double ms = bench_time_ms(run_decode, &g);
  double flop = (double)T * H * (double)(topk + nx) * 2048.0;
  double kv_bytes = (double)T * (double)(topk + nx) * 584.0; /* each token's rows, read once */
  double floor_us = kv_bytes / (copy_gbs * 1e9) * 1e6;
  printf("%-44s %10.1f %9.1f %14.1f %9.1f%s\n", label, ms * 1e3, flop / (ms * 1e-3) / 1e12, floor_us, bench_issue_ms * 1e3,
         unchecked ? "  (unchecked)" : "");
  for (int s = 0; s < BENCH_SETS; s++) {
    dsv4rt_sparse_decode_args *a = &g.a[s];
    dsv4rt_buffer_destroy(a->out), dsv4rt_buffer_destroy(a->lse), dsv4rt_buffer_destroy(a->q),
        dsv4rt_buffer_destroy(a->cache), dsv4rt_buffer_destroy(a->indices), dsv4rt_buffer_destroy(a->lens),
        dsv4rt_buffer_destroy(a->extra_cache), dsv4rt_buffer_destroy(a->extra_indices),
        dsv4rt_buffer_destroy(a->extra_lens), dsv4rt_buffer_destroy(a->attn_sink);
  }
  free(cache), free(xcache), free(q), free(idx), free(lens), free(xidx), free(xlens), free(sink), free(want), free(got),
      free(lw), free(lg);
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: bench_decode BUNDLE [cuda|opencl] [KERNEL]\n");
    return 2;
  }
  bench_name = "bench_decode";
  bench_open(argc, argv, 2);
  if (dsv4rt_bundle_open(bench_ctx, argv[1], &bundle))
    bench_die("bundle");
  rng.s = dsv4_check_seed();
  dsv4_layout L = dsv4_check_layout_v4();
  int small = getenv("DSV4_BENCH_SMALL") != NULL;
  if (getenv("DSV4_BENCH_KV_SCALE") && (kv_scale = atoll(getenv("DSV4_BENCH_KV_SCALE"))) < 1) {
    fprintf(stderr, "bench_decode: DSV4_BENCH_KV_SCALE must be a positive integer\n");
    return 2;
  }
  printf("device: %s\n\n", dsv4rt_device_name(bench_ctx));
  double cms, copy = bench_copy_gbs(small ? (size_t)64 << 20 : (size_t)1 << 30, &cms);
  printf("d2d copy: %.0f GB/s\n", copy);
  if (kv_scale > 1)
    printf("caches %lld times the default size (DSV4_BENCH_KV_SCALE)\n", (long long)kv_scale);
  /* the warp-matrix form (where the device runs it) beside the portable form */
  static const char *kernels[] = {"sparse_decode_v4_mma", "sparse_decode_v4"};
  int nk = 2;
  if (argc > 3) /* one kernel of the bundle (variants of a spec) */
    kernels[0] = argv[3], nk = 1;
  for (int i = 0; i < nk; i++) {
    int runs = dsv4rt_bundle_kernel_runs(bundle, kernels[i]);
    if (!runs) {
      printf("\n(no %s kernel for this device)\n", kernels[i]);
      continue;
    }
    printf("\n%-44s %10s %9s %14s %9s\n", kernels[i], "time us", "TFLOP/s", "KV once, us", "issue us");
    if (small) {
      shape("T 2, H 64, 64 compressed + 128 SWA", kernels[i], &L, 2, 64, 64, 64, copy);
      continue;
    }
    /* DSV4_BENCH_SHAPE=pro, pro-dram, flash or small: that shape alone (for a profiler); or T,H,NX */
    const char *only = getenv("DSV4_BENCH_SHAPE");
    if (!only || !strcmp(only, "pro"))
      shape("V4-Pro: T 128, H 128, 1024 + 128", kernels[i], &L, 128, 128, 1024, 64, copy);
    /* the same, its rows from DRAM as in serving (with DSV4_BENCH_KV_SCALE
     * set, the row above is that already) */
    if ((!only && kv_scale == 1) || (only && !strcmp(only, "pro-dram"))) {
      int64_t keep = kv_scale;
      kv_scale = kv_scale == 1 ? 16 : kv_scale;
      char label[64];
      snprintf(label, sizeof label, "V4-Pro, caches %lldx (rows from DRAM)", (long long)kv_scale);
      shape(label, kernels[i], &L, 128, 128, 1024, 64, copy);
      kv_scale = keep;
    }
    if (!only || !strcmp(only, "flash"))
      shape("V4-Flash: T 128, H 64, 512 + 128", kernels[i], &L, 128, 64, 512, 64, copy);
    if (!only || !strcmp(only, "small"))
      shape("small batch: T 8, H 128, 1024 + 128", kernels[i], &L, 8, 128, 1024, 64, copy);
    long long cT, cH, cX; /* DSV4_BENCH_SHAPE=T,H,NX: T tokens, H heads, NX compressed + 128 SWA (sweeps) */
    char label[96];
    if (only && sscanf(only, "%lld,%lld,%lld", &cT, &cH, &cX) == 3 && cT > 0 && cH > 0 && cX >= 0) {
      snprintf(label, sizeof label, "T %lld, H %lld, %lld + 128", cT, cH, cX);
      shape(label, kernels[i], &L, cT, cH, cX, 64, copy);
    }
  }
  bench_close(bundle);
  return 0;
}
