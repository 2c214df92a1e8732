/* dsv4rt_check.c -- run every kernel of a bundle on the best device present
 * and check it against the host reference.
 *
 *   dsv4rt-check BUNDLE [auto|cuda|opencl]
 *
 * The main job of the README's first command: after dsv4c has compiled
 * specs/decode.lua for every target, this picks the device (a CUDA GPU if
 * there is one, else OpenCL, e.g. PoCL on the CPU), runs each kernel that
 * can run there on fresh random inputs, compares bit for bit with the
 * reference written from OPS.md and prints a short report.  Exit 0 when
 * every kernel matched, 1 otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4_check.h"
#include "dsv4_ref.h"
#include "dsv4rt.h"

static dsv4rt_context *ctx;
static dsv4_rng rng;

static dsv4rt_buffer *dev(const void *host, size_t n)
{
  dsv4rt_buffer *b = NULL;
  if (dsv4rt_buffer_create(ctx, n, &b) || (host && dsv4rt_buffer_write(b, 0, host, n))) {
    fprintf(stderr, "dsv4rt-check: %s\n", dsv4rt_last_error(ctx));
    exit(1);
  }
  return b;
}

/* A random DSv4 cache of nb blocks of bs tokens (vLLM page stride). */
static uint8_t *make_cache(int64_t nb, int64_t bs, int64_t *stride)
{
  *stride = (bs * 584 + 575) / 576 * 576;
  uint8_t *c = malloc((size_t)(nb * *stride));
  dsv4_rng_bytes(&rng, c, (size_t)(nb * *stride));
  for (int64_t b = 0; b < nb; b++)
    for (int64_t t = 0; t < bs; t++)
      for (int j = 0; j < 7; j++)
        c[b * *stride + bs * 576 + t * 8 + j] = (uint8_t)dsv4_rng_range(&rng, 105, 140);
  return c;
}

/* Report one kernel's comparison; returns 1 on mismatch. */
static int report(const char *name, const char *what, const uint16_t *got, const uint16_t *want, size_t n, double ms)
{
  size_t first, bad = dsv4_check_bf16(got, want, n, &first);
  printf("  %-22s %-28s %s", name, what, bad ? "MISMATCH" : "bit-exact");
  if (bad)
    printf(" (%zu of %zu values, first at %zu)", bad, n, first);
  printf("  %.3f ms\n", ms);
  return bad != 0;
}

static int check_dequant(dsv4rt_bundle *b, const char *name)
{
  dsv4_layout L = dsv4_check_layout_v4();
  int64_t nb = 64, bs = 64, stride, n = 4096;
  uint8_t *cache = make_cache(nb, bs, &stride);
  int32_t *idx = malloc((size_t)n * 4);
  for (int64_t i = 0; i < n; i++)
    idx[i] = dsv4_rng_range(&rng, 0, 15) ? (int32_t)dsv4_rng_range(&rng, 0, nb * bs - 1) : -1;
  uint16_t *want = malloc((size_t)n * 1024), *got = malloc((size_t)n * 1024);
  dsv4_ref_dequant_gather(&L, cache, nb, bs, stride, idx, n, want);
  dsv4_check_fill16(got, (size_t)n * 512, 0x7F81);
  dsv4rt_buffer *cb = dev(cache, (size_t)(nb * stride)), *ib = dev(idx, (size_t)n * 4), *ob = dev(got, (size_t)n * 1024);
  dsv4rt_dequant_gather_args a = {.out = ob, .cache = cb, .indices = ib, .n = n, .num_blocks = nb, .block_size = bs,
                                  .block_stride = stride};
  dsv4rt_launch_opts o = {.kernel = name, .check_contents = 1};
  double ms = 0;
  dsv4rt_status s = dsv4rt_dequant_gather(b, &a, &o); /* first launch: loads the module */
  if (!s)
    s = dsv4rt_timer_start(ctx);
  if (!s)
    s = dsv4rt_dequant_gather(b, &a, &o);
  if (!s)
    s = dsv4rt_timer_stop(ctx, &ms);
  if (!s)
    s = dsv4rt_buffer_read(ob, 0, got, (size_t)n * 1024);
  int rc = s ? (printf("  %-22s error: %s\n", name, dsv4rt_last_error(ctx)), 1)
             : report(name, "4096 scattered slots", got, want, (size_t)n * 512, ms);
  dsv4rt_buffer_destroy(cb), dsv4rt_buffer_destroy(ib), dsv4rt_buffer_destroy(ob);
  free(cache), free(idx), free(want), free(got);
  return rc;
}

static int check_paged(dsv4rt_bundle *b, const char *name)
{
  dsv4_layout L = dsv4_check_layout_v4();
  int64_t nb = 80, bs = 64, stride, R = 4, M = 1024, maxb = 16, offset = 8;
  uint8_t *cache = make_cache(nb, bs, &stride);
  int32_t seq[4], gl[4], *bt = malloc((size_t)(R * maxb) * 4);
  for (int64_t r = 0; r < R; r++) {
    seq[r] = (int32_t)dsv4_rng_range(&rng, 0, 1000);
    gl[r] = (int32_t)dsv4_rng_range(&rng, 0, seq[r]);
    for (int64_t j = 0; j < maxb; j++)
      bt[r * maxb + j] = (int32_t)dsv4_rng_range(&rng, 0, nb - 1);
  }
  size_t ne = (size_t)(R * M * 512);
  uint16_t *want = malloc(ne * 2), *got = malloc(ne * 2);
  dsv4_check_fill16(want, ne, 0x7F81);
  dsv4_check_fill16(got, ne, 0x7F81);
  dsv4_ref_paged_gather(&L, cache, nb, bs, stride, seq, gl, bt, R, maxb, offset, want, M * 512, 512, M);
  dsv4rt_buffer *cb = dev(cache, (size_t)(nb * stride)), *sb = dev(seq, sizeof seq), *gb = dev(gl, sizeof gl),
                *bb = dev(bt, (size_t)(R * maxb) * 4), *ob = dev(got, ne * 2);
  dsv4rt_paged_gather_args a = {.out = ob, .out_stride_r = M * 512, .out_stride_m = 512, .out_rows = M,
                                .offset = offset, .cache = cb, .num_blocks = nb, .block_size = bs,
                                .block_stride = stride, .seq_lens = sb, .gather_lens = gb, .block_table = bb,
                                .num_requests = R, .max_blocks = maxb};
  dsv4rt_launch_opts o = {.kernel = name, .check_contents = 1};
  double ms = 0;
  dsv4rt_status s = dsv4rt_paged_gather(b, &a, &o); /* first launch: loads the module */
  if (!s)
    s = dsv4rt_timer_start(ctx);
  if (!s)
    s = dsv4rt_paged_gather(b, &a, &o);
  if (!s)
    s = dsv4rt_timer_stop(ctx, &ms);
  if (!s)
    s = dsv4rt_buffer_read(ob, 0, got, ne * 2);
  int rc = s ? (printf("  %-22s error: %s\n", name, dsv4rt_last_error(ctx)), 1)
             : report(name, "4 requests, up to 1000 rows", got, want, ne, ms);
  dsv4rt_buffer_destroy(cb), dsv4rt_buffer_destroy(sb), dsv4rt_buffer_destroy(gb), dsv4rt_buffer_destroy(bb),
      dsv4rt_buffer_destroy(ob);
  free(cache), free(bt), free(want), free(got);
  return rc;
}

int main(int argc, char **argv)
{
  if (argc < 2 || argc > 3) {
    fprintf(stderr, "usage: dsv4rt-check BUNDLE [auto|cuda|opencl]\n");
    return 2;
  }
  dsv4rt_backend be = DSV4RT_BACKEND_AUTO;
  if (argc == 3)
    be = !strcmp(argv[2], "cuda") ? DSV4RT_BACKEND_CUDA : !strcmp(argv[2], "opencl") ? DSV4RT_BACKEND_OPENCL
                                                                                    : DSV4RT_BACKEND_AUTO;
  if (dsv4rt_context_create(be, 0, &ctx)) {
    fprintf(stderr, "dsv4rt-check: %s\n", dsv4rt_last_error(NULL));
    return 1;
  }
  dsv4rt_bundle *b;
  if (dsv4rt_bundle_open(ctx, argv[1], &b)) {
    fprintf(stderr, "dsv4rt-check: %s\n", dsv4rt_last_error(ctx));
    return 1;
  }
  rng.s = dsv4_check_seed();
  printf("dsv4rt-check: %s\n  device: %s [%s]\n  seed: DSV4_SEED=%llu\n", argv[1], dsv4rt_device_name(ctx),
         dsv4rt_context_backend(ctx) == DSV4RT_BACKEND_CUDA ? "cuda" : "opencl", (unsigned long long)rng.s);
  int bad = 0, ran = 0;
  for (int i = 0; i < dsv4rt_bundle_count(b); i++) {
    const char *name, *op, *target, *arch;
    dsv4rt_bundle_entry(b, i, &name, &op, &target, &arch);
    int dup = 0; /* one run per kernel name: it has an entry per target */
    for (int j = 0; j < i; j++) {
      const char *other;
      dsv4rt_bundle_entry(b, j, &other, NULL, NULL, NULL);
      dup |= !strcmp(other, name);
    }
    if (dup)
      continue;
    int r = !strcmp(op, "dequant_gather") ? check_dequant(b, name) : !strcmp(op, "paged_gather") ? check_paged(b, name) : -1;
    if (r < 0)
      printf("  %-22s op %s: no check for this op yet\n", name, op);
    else
      bad += r, ran++;
  }
  printf("%d kernel(s) run on %s: %s\n", ran, dsv4rt_device_name(ctx), bad ? "MISMATCHES" : "all match the reference");
  dsv4rt_bundle_destroy(b);
  dsv4rt_context_destroy(ctx);
  return bad || !ran;
}
