/* bench_decode.c -- sparse MLA decode speed at the DeepSeek-V4 shapes,
 * beside the physical floor measured in the same run.
 *
 *   bench_decode BUNDLE [cuda|hip|opencl] [KERNEL[,KERNEL...]]
 *
 * Shapes (issue 26; FlashMLA's MODEL1 decode configurations, T query
 * tokens): V4-Pro (H 128; 128 SWA indices into 256-token blocks; 1024
 * compressed into 64-token blocks) and V4-Flash (H 64; 128 + 512) at T 8,
 * 128, 256 and 512, and V4-Pro with C128 compressed blocks of 2 whose
 * per-token compressed lengths are drawn between 0 and the width.  The
 * caches are of serving size (262144 rows each, 153 MB: past the L2), the
 * same caches for every shape; q, indices and outputs rotate over
 * BENCH_SETS sets.
 *
 * TFLOP/s as FlashMLA counts them: 2 * H * 1024 a valid index a token (QK
 * and PV, 512 dims each).  The floor of a shape is the larger of its matrix
 * work at the bf16 matrix product's rate and its KV bytes (584 a row) read
 * once at the copy bandwidth, both measured in the same run: the copy here,
 * the product by the caller (DSV4_BENCH_MM_TFLOPS, gpu_run.sh measures it
 * with PyTorch in the same command; without it the floor is the bytes').
 * "x floor" is the kernel's time over that floor.
 *
 * Kernels: the named ones (comma-separated), else the bundle's matrix
 * forms by name, after "auto" (no name: the runtime's rule, ops.c).  Every
 * output is checked against the reference (FlashMLA's element rule) first.
 * DSV4_BENCH_SPLITS=n forces the split count; DSV4_BENCH_SHAPE=NAME runs
 * the shapes whose label contains NAME, DSV4_BENCH_SHAPE=T,H,NX[;T,H,NX...]
 * shapes of T tokens, H heads and NX compressed indices each (64-token
 * blocks; time against tiles a CTA); DSV4_BENCH_SMALL runs one small
 * shape with small caches (CI, CPU).
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
  dsv4rt_sparse_decode_args a[BENCH_SETS];
} decode_arg;

static void run_decode(int i, void *p)
{
  if (dsv4rt_sparse_decode(bundle, &((decode_arg *)p)->a[i % BENCH_SETS], &kopts))
    bench_die("sparse_decode");
}

static float rnd01(void) { return (float)(dsv4_rng_next(&rng) >> 40) / (float)(1 << 24); }

/* A cache of nb blocks of bs rows, written by the reference writer from
 * random rows, on the host and on the device. */
typedef struct {
  int64_t nb, bs, stride;
  uint8_t *host;
  dsv4rt_buffer *dev;
} cache;

static cache make_cache(const dsv4_layout *L, int64_t rows, int64_t bs)
{
  cache c = {rows / bs, bs, (dsv4_layout_min_block_bytes(L, bs) + 575) / 576 * 576, NULL, NULL};
  int64_t n = c.nb * bs;
  uint16_t *kv = malloc((size_t)(n * L->dim) * 2);
  int64_t *slots = malloc((size_t)n * 8);
  for (int64_t i = 0; i < n * L->dim; i++)
    kv[i] = dsv4_ref_f32_to_bf16((rnd01() - 0.5f) * 4.0f);
  for (int64_t i = 0; i < n; i++)
    slots[i] = i;
  c.host = calloc(1, (size_t)(c.nb * c.stride));
  dsv4_ref_kv_insert(L, kv, n, slots, n, NULL, NULL, 0, 0, 0, c.host, c.nb, bs, c.stride);
  free(kv), free(slots);
  c.dev = bench_dev(c.host, (size_t)(c.nb * c.stride));
  return c;
}

typedef struct {
  const char *label;
  int64_t T, H, nx; /* tokens, heads, compressed indices a token (its width) */
  int xcache;       /* 0: 64-token compressed blocks; 1: C128, blocks of 2 */
  int xrand;        /* compressed lengths drawn in [0, nx] a token */
} shape_t;

static const shape_t shapes[] = {
    {"V4-Pro T 8", 8, 128, 1024, 0, 0},      {"V4-Pro T 128", 128, 128, 1024, 0, 0},
    {"V4-Pro T 256", 256, 128, 1024, 0, 0},  {"V4-Pro T 512", 512, 128, 1024, 0, 0},
    {"V4-Flash T 8", 8, 64, 512, 0, 0},      {"V4-Flash T 128", 128, 64, 512, 0, 0},
    {"V4-Flash T 256", 256, 64, 512, 0, 0},  {"V4-Flash T 512", 512, 64, 512, 0, 0},
    {"V4-Pro C128 T 128", 128, 128, 1024, 1, 1},
};

static const dsv4_layout *lay;
static cache swa, cmp[2];
static double copy_gbs, mm_tflops;
static int wrong; /* outputs outside the rule: the exit status */

/* The reference checks the first CHECK_T tokens of set 0 (a token's output
 * depends on its own q and indices only): the host reference of a whole
 * T 512 shape would take minutes. */
#define CHECK_T 16

/* One shape: its input sets and reference once, then each kernel (NULL:
 * the runtime's choice) checked, timed and printed. */
static void run_shape(const shape_t *sh, const char *const *kernels, int nk)
{
  const int64_t T = sh->T, H = sh->H, topk = 128, nx = sh->nx, CT = T < CHECK_T ? T : CHECK_T;
  const cache *x = &cmp[sh->xcache];
  uint16_t *q = malloc((size_t)(T * H * 512) * 2);
  int32_t *idx = malloc((size_t)(T * topk) * 4), *lens = malloc((size_t)T * 4);
  int32_t *xidx = malloc((size_t)(T * nx) * 4 + 4), *xlens = malloc((size_t)T * 4);
  float *sink = malloc((size_t)H * 4);
  uint16_t *want = malloc((size_t)(CT * H * 512) * 2), *got = malloc((size_t)(CT * H * 512) * 2);
  float *lw = malloc((size_t)(CT * H) * 4);
  decode_arg g;
  double valid = 0;
  for (int s = 0; s < BENCH_SETS; s++) {
    for (int64_t i = 0; i < T * H * 512; i++)
      q[i] = dsv4_ref_f32_to_bf16((rnd01() - 0.5f) * 2.0f);
    for (int64_t t = 0; t < T; t++) {
      lens[t] = (int32_t)topk;
      xlens[t] = sh->xrand ? (int32_t)dsv4_rng_range(&rng, 0, nx) : (int32_t)nx;
      for (int64_t j = 0; j < topk; j++)
        idx[t * topk + j] = (int32_t)dsv4_rng_range(&rng, 0, swa.nb * swa.bs - 1);
      for (int64_t j = 0; j < nx; j++)
        xidx[t * nx + j] = (int32_t)dsv4_rng_range(&rng, 0, x->nb * x->bs - 1);
      if (s == 0)
        valid += (double)(lens[t] + xlens[t]);
    }
    for (int64_t h = 0; h < H; h++)
      sink[h] = rnd01() - 0.5f;
    g.a[s] = (dsv4rt_sparse_decode_args){
        .out = bench_dev(NULL, (size_t)(T * H * 512) * 2), .lse = bench_dev(NULL, (size_t)(T * H) * 4),
        .q = bench_dev(q, (size_t)(T * H * 512) * 2), .n_tokens = T, .heads = H, .cache = swa.dev,
        .num_blocks = swa.nb, .block_size = swa.bs, .block_stride = swa.stride,
        .indices = bench_dev(idx, (size_t)(T * topk) * 4), .lens = bench_dev(lens, (size_t)T * 4), .topk = topk,
        .extra_cache = x->dev, .extra_num_blocks = x->nb, .extra_block_size = x->bs, .extra_block_stride = x->stride,
        .extra_indices = bench_dev(xidx, (size_t)(T * nx) * 4), .extra_lens = bench_dev(xlens, (size_t)T * 4),
        .extra_topk = nx, .attn_sink = bench_dev(sink, (size_t)H * 4), .softmax_scale = 0.04419417382f,
        .tensor_scale = 1};
    if (s == 0) /* the reference of set 0's first tokens (its host arrays are overwritten after) */
      dsv4_ref_sparse_decode(lay, 512, q, CT, H, swa.host, swa.nb, swa.bs, swa.stride, idx, lens, topk, x->host, x->nb,
                             x->bs, x->stride, xidx, xlens, nx, sink, 0.04419417382f, 1, want, lw);
  }
  double flop = 2.0 * (double)H * 1024.0 * valid;
  double bytes_us = valid * 584.0 / (copy_gbs * 1e9) * 1e6;
  double mm_us = mm_tflops > 0 ? flop / (mm_tflops * 1e12) * 1e6 : 0;
  double floor_us = bytes_us > mm_us ? bytes_us : mm_us;
  for (int k = 0; k < nk; k++) {
    const char *kernel = kernels[k];
    if (kernel && !dsv4rt_bundle_kernel_runs(bundle, kernel))
      continue;
    kopts.kernel = kernel;
    kopts.splits = getenv("DSV4_BENCH_SPLITS") ? atoi(getenv("DSV4_BENCH_SPLITS")) : 0;
    memset(got, 0xFF, (size_t)(CT * H * 512) * 2); /* the checked outputs poisoned (NaN bits) */
    if (dsv4rt_buffer_write(g.a[0].out, 0, got, (size_t)(CT * H * 512) * 2))
      bench_die("poison");
    run_decode(0, &g);
    dsv4rt_synchronize(bench_ctx);
    dsv4rt_buffer_read(g.a[0].out, 0, got, (size_t)(CT * H * 512) * 2);
    int64_t bad = 0;
    for (int64_t i = 0; i < CT * H * 512; i++) { /* FlashMLA's element rule */
      float a = dsv4_ref_bf16_to_f32(got[i]), w = dsv4_ref_bf16_to_f32(want[i]);
      bad += !(fabsf(a - w) <= 1e-3f + 2.01f / 128 * fabsf(w));
    }
    double ms = bench_time_ms(run_decode, &g);
    /* auto: the tuned choice of the call's bucket where the bundle holds one (dsv4c --lock), else the rule */
    const int64_t dims[5] = {T, H, topk, nx, x->bs};
    const char *tuned = kernel ? NULL : dsv4rt_bundle_tuned_kernel(bundle, "sparse_decode", dims, 5);
    char label[64];
    snprintf(label, sizeof label, "%s%s", tuned ? "tuned: " : "",
             kernel  ? kernel
             : tuned ? tuned
                     : "auto (runtime's rule)");
    printf("%-20s %-34s %9.1f %8.1f %9.1f %7.2f %8.1f %s\n", sh->label, label,
           ms * 1e3, flop / (ms * 1e-3) / 1e12, floor_us, ms * 1e3 / floor_us, bench_issue_ms * 1e3,
           bad ? "WRONG" : "ok");
    wrong += bad != 0;
    if (bad)
      fprintf(stderr, "bench_decode: %s %s: %lld elements outside FlashMLA's rule\n", sh->label,
              kernel ? kernel : "auto", (long long)bad);
  }
  for (int s = 0; s < BENCH_SETS; s++) {
    dsv4rt_sparse_decode_args *a = &g.a[s];
    dsv4rt_buffer_destroy(a->out), dsv4rt_buffer_destroy(a->lse), dsv4rt_buffer_destroy(a->q),
        dsv4rt_buffer_destroy(a->indices), dsv4rt_buffer_destroy(a->lens), dsv4rt_buffer_destroy(a->extra_indices),
        dsv4rt_buffer_destroy(a->extra_lens), dsv4rt_buffer_destroy(a->attn_sink);
  }
  free(q), free(idx), free(lens), free(xidx), free(xlens), free(sink), free(want), free(got), free(lw);
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: bench_decode BUNDLE [cuda|hip|opencl] [KERNEL[,KERNEL...]]\n");
    return 2;
  }
  bench_name = "bench_decode";
  bench_open(argc, argv, 2);
  if (dsv4rt_bundle_open(bench_ctx, argv[1], &bundle))
    bench_die("bundle");
  rng.s = dsv4_check_seed();
  static dsv4_layout L;
  L = dsv4_check_layout_v4();
  lay = &L;
  int small = getenv("DSV4_BENCH_SMALL") != NULL;
  mm_tflops = getenv("DSV4_BENCH_MM_TFLOPS") ? atof(getenv("DSV4_BENCH_MM_TFLOPS")) : 0;
  setvbuf(stdout, NULL, _IOLBF, 0); /* a row as soon as it is measured */
  printf("device: %s\n", dsv4rt_device_name(bench_ctx));
  double cms;
  copy_gbs = bench_copy_gbs(small ? (size_t)64 << 20 : (size_t)1 << 30, &cms);
  printf("ceilings, same run: d2d copy %.0f GB/s; bf16 matrix product %s\n", copy_gbs,
         mm_tflops > 0 ? getenv("DSV4_BENCH_MM_TFLOPS") : "not given (DSV4_BENCH_MM_TFLOPS): floors are the bytes'");
  int64_t rows = small ? 4096 : 262144;
  swa = make_cache(&L, rows, 256), cmp[0] = make_cache(&L, rows, 64), cmp[1] = make_cache(&L, rows, 2);
  /* the runtime's choice (NULL) first, so that the row a serving engine gets is timed on a card in the state the
   * peer's first run found it (a run after the heavier bf16x2 and single-CTA rows measured 2-4% slower: 22nd and
   * 23rd sessions, bench/RESULTS.md); then the kernels named, else each matrix form of the bundle that runs here */
  const char *names[32];
  int nk = 0;
  names[nk++] = NULL;
  char list[1024] = "";
  if (argc > 3) {
    snprintf(list, sizeof list, "%s", argv[3]);
    for (char *t = strtok(list, ","); t && nk < 32; t = strtok(NULL, ","))
      names[nk++] = t;
  } else
    for (int i = 0; i < dsv4rt_bundle_count(bundle) && nk < 32; i++) {
      const char *n, *op, *tg, *arch;
      dsv4rt_kernel_info info;
      dsv4_layout el;
      if (!dsv4rt_bundle_entry(bundle, i, &n, &op, &tg, &arch) && !strcmp(op, "sparse_decode") &&
          dsv4rt_bundle_entry_runs(bundle, i) && !dsv4rt_bundle_entry_info(bundle, i, &info) && info.matrix &&
          !dsv4rt_bundle_entry_layout(bundle, i, &el) && !strcmp(el.name, L.name) && info.v_dim == 512)
        names[nk++] = n;
    }
  printf("\n%-20s %-34s %9s %8s %9s %7s %8s\n", "shape", "kernel", "time us", "TFLOP/s", "floor us", "x floor",
         "issue us");
  const char *only = getenv("DSV4_BENCH_SHAPE");
  if (only && !small && strchr(only, ',')) { /* T,H,NX;... */
    static char labels[16][80];
    int n = 0;
    for (const char *p = only; p && *p && n < 16; n++) {
      long long t, h, nx;
      if (sscanf(p, "%lld,%lld,%lld", &t, &h, &nx) != 3 || t < 1 || h < 1 || nx < 0) {
        fprintf(stderr, "bench_decode: DSV4_BENCH_SHAPE: '%s' is not T,H,NX\n", p);
        return 2;
      }
      snprintf(labels[n], sizeof labels[n], "T %lld H %lld NX %lld", t, h, nx);
      shape_t sh = {labels[n], t, h, nx, 0, 0};
      run_shape(&sh, names, nk);
      p = strchr(p, ';');
      p = p ? p + 1 : NULL;
    }
    only = "\x01"; /* no named shape */
  }
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    shape_t sh = shapes[s];
    if (small) {
      if (s)
        break;
      sh = (shape_t){"small: T 2, H 64", 2, 64, 64, 0, 1};
    } else if (only && !strstr(sh.label, only))
      continue;
    run_shape(&sh, names, nk);
  }
  dsv4rt_buffer_destroy(swa.dev), dsv4rt_buffer_destroy(cmp[0].dev), dsv4rt_buffer_destroy(cmp[1].dev);
  free(swa.host), free(cmp[0].host), free(cmp[1].host);
  bench_close(bundle);
  return wrong ? 1 : 0;
}
