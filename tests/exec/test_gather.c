/* test_gather.c -- execution tests of the gather kernels through libdsv4rt.
 *
 *   test_gather BUNDLE GOLDEN_DIR opencl|cuda
 *
 * Every case draws fresh random inputs (seed printed; DSV4_SEED repeats a
 * run), poisons the output with two different patterns in two runs so an
 * unwritten element cannot pass, and compares bit for bit with the host
 * reference written from docs/ops.md (runtime/ref).  Also the golden fixtures
 * of FlashMLA / vLLM, the docs/ops.md edge cases, argument validation (nothing
 * launched, output untouched) and damaged bundles.  With no device for the
 * backend it prints why and exits 77, which CTest reports as skipped.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4_abi.h"
#include "dsv4_check.h"
#include "dsv4_ref.h"
#include "dsv4rt.h"
#include "harness.h"
#include "golden_load.h"

static dsv4rt_bundle *bundle;
static dsv4_layout L;       /* the layout of the kernel under test (from the bundle) */
static const char *kname; /* the kernel under test */
static float tscale = 1.0f; /* tensor_scale passed to it */



/* A random cache: every byte random (all fp8 codes, NaNs and every scale
 * byte included), so the bit-exact comparison covers all encodings. */
typedef struct {
  uint8_t *host;
  dsv4rt_buffer *buf;
  int64_t nb, bs, stride;
} cache_t;

static cache_t make_cache(int64_t nb, int64_t bs, int64_t extra)
{
  cache_t c = {.nb = nb, .bs = bs};
  int64_t min = dsv4_layout_min_block_bytes(&L, bs);
  c.stride = (min + extra + L.align - 1) / L.align * L.align;
  size_t n = (size_t)(nb * c.stride);
  c.host = malloc(n);
  dsv4_rng_bytes(&rng, c.host, n);
  /* realistic scales in 3 of 4 tokens so values are finite too */
  int tail = L.scale_place == DSV4_SCALES_BLOCK_TAIL;
  int64_t sbase = tail ? bs * L.row_bytes : 0, sstride = tail ? L.scale_row_bytes : L.row_bytes;
  for (int64_t b = 0; b < nb; b++)
    for (int64_t t = 0; t < bs; t++) {
      if (!dsv4_rng_range(&rng, 0, 3))
        continue;
      for (int i = 0; i < L.nseg; i++) {
        const dsv4_segment *sg = &L.seg[i];
        if (sg->scale_type == DSV4_DT_NONE || sg->scale_tensor)
          continue;
        uint8_t *p = c.host + b * c.stride + sbase + t * sstride + sg->scale_offset;
        for (int g = 0; g < (sg->d1 - sg->d0) / sg->scale_group; g++) {
          if (sg->scale_type == DSV4_DT_UE8M0)
            p[g] = (uint8_t)dsv4_rng_range(&rng, 105, 140);
          else {
            uint32_t bits = (uint32_t)dsv4_rng_range(&rng, 127 - 20, 127 + 5) << 23; /* 2^-20 .. 2^5 */
            memcpy(p + 4 * g, &bits, 4);
          }
        }
      }
    }
  c.buf = dev(c.host, n);
  return c;
}

static void free_cache(cache_t *c)
{
  free(c->host);
  dsv4rt_buffer_destroy(c->buf);
}

/* ---- dequant_gather ---- */

/* Run the scattered gather on indices twice (two poisons) and compare. */
static void run_dequant(const char *name, const cache_t *c, const int32_t *idx, int64_t n)
{
  size_t D = (size_t)L.dim, ne = (size_t)n * D;
  uint16_t *want = calloc(ne + 1, 2), *got = calloc(ne + 1, 2);
  int rr = dsv4_ref_dequant_gather_ts(&L, c->host, c->nb, c->bs, c->stride, tscale, idx, n, want);
  CHECK(rr == 0, "%s: reference refused the inputs", name);
  dsv4rt_buffer *ib = dev(idx, (size_t)n * 4), *ob = dev(NULL, ne * 2);
  static const uint16_t poisons[2] = {0x7F81, 0x1234};
  for (int p = 0; p < 2; p++) {
    dsv4_check_fill16(got, ne, poisons[p]);
    dsv4rt_buffer_write(ob, 0, got, ne * 2);
    dsv4rt_dequant_gather_args a = {.out = ob, .cache = c->buf, .indices = ib, .n = n, .num_blocks = c->nb,
                                    .block_size = c->bs, .block_stride = c->stride, .tensor_scale = tscale};
    dsv4rt_launch_opts o = {.kernel = kname};
    dsv4rt_status s = dsv4rt_dequant_gather(bundle, &a, &o);
    if (!s)
      s = dsv4rt_synchronize(ctx);
    CHECK(s == DSV4RT_OK, "%s: launch: %s", name, dsv4rt_last_error(ctx));
    dsv4rt_buffer_read(ob, 0, got, ne * 2);
    size_t first;
    size_t bad = dsv4_check_bf16(got, want, ne, &first);
    CHECK(bad == 0, "%s (poison %04x): %zu of %zu values differ; first at row %zu dim %zu: got %04x want %04x", name,
          poisons[p], bad, ne, first / D, first % D, got[first], want[first]);
  }
  dsv4rt_buffer_destroy(ib);
  dsv4rt_buffer_destroy(ob);
  free(want);
  free(got);
}

static void test_dequant_random(void)
{
  static const struct {
    int64_t nb, bs, extra, n;
  } cases[] = {
      {37, 64, 0, 5000},     /* vLLM SWA/C4 page: stride 37440 = roundup(64*584, 576) */
      {40, 64, 4096, 777},   /* block stride larger than the page */
      {300, 2, 152, 1999},   /* C128 cache: bs 2, stride 1728 */
      {5, 16, 0, 1},         /* one row */
      {3, 64, 100, 8 * 64 + 3}, /* rows past a whole CTA */
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    cache_t c = make_cache(cases[k].nb, cases[k].bs, cases[k].extra);
    int64_t n = cases[k].n, slots = c.nb * c.bs;
    int32_t *idx = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) {
      int64_t u = dsv4_rng_range(&rng, 0, 9);
      idx[i] = u == 0 ? -1 : u == 1 ? (int32_t)-dsv4_rng_range(&rng, 2, 100000)
               : u == 2 ? (int32_t)dsv4_rng_range(&rng, slots - c.bs, slots - 1) /* the last block */
                        : (int32_t)dsv4_rng_range(&rng, 0, slots - 1);
    }
    char name[128];
    snprintf(name, sizeof name, "%s nb=%lld bs=%lld stride=%lld n=%lld", kname, (long long)c.nb,
             (long long)c.bs, (long long)c.stride, (long long)n);
    run_dequant(name, &c, idx, n);
    free(idx);
    free_cache(&c);
  }
}

static void test_dequant_edges(void)
{
  cache_t c = make_cache(4, 64, 0);
  int32_t idx[130];
  for (int i = 0; i < 130; i++)
    idx[i] = -1;
  run_dequant("dequant_gather all -1", &c, idx, 130); /* kname is in the CHECK lines */
  for (int i = 0; i < 130; i++)
    idx[i] = 4 * 64 - 1 - i % 64; /* slots of the last block, last row first */
  run_dequant("dequant_gather last block", &c, idx, 130);
  /* n = 0: nothing to do, the output is untouched */
  uint16_t o[1024];
  dsv4_check_fill16(o, 1024, 0x5555);
  dsv4rt_buffer *ob = dev(o, sizeof o), *ib = dev(idx, 4);
  dsv4rt_dequant_gather_args a = {.out = ob, .cache = c.buf, .indices = ib, .n = 0, .num_blocks = 4, .block_size = 64,
                                  .block_stride = c.stride, .tensor_scale = tscale};
  dsv4rt_launch_opts ko = {.kernel = kname};
  CHECK(dsv4rt_dequant_gather(bundle, &a, &ko) == DSV4RT_OK && dsv4rt_synchronize(ctx) == DSV4RT_OK,
        "%s n=0: %s", kname, dsv4rt_last_error(ctx));
  uint16_t back[1024];
  dsv4rt_buffer_read(ob, 0, back, sizeof back);
  CHECK(!memcmp(back, o, sizeof o), "dequant_gather n=0 wrote to out");
  dsv4rt_buffer_destroy(ob);
  dsv4rt_buffer_destroy(ib);
  free_cache(&c);
}

/* ---- paged_gather ---- */

typedef struct {
  int64_t R, maxb, M, offset, stride_m, stride_r;
  int32_t *seq, *gl, *bt;
  int use_gl;
} paged_t;

static void run_paged(const char *name, const cache_t *c, const paged_t *p)
{
  size_t ne = (size_t)((p->R - 1) * p->stride_r + (p->M - 1) * p->stride_m + L.dim);
  uint16_t *want = malloc(ne * 2), *got = malloc(ne * 2);
  dsv4rt_buffer *sb = dev(p->seq, (size_t)p->R * 4), *gb = dev(p->gl, (size_t)p->R * 4);
  /* the block table twice: packed, and (the second round) rows of a wider table, as a column slice of vLLM's
   * block table is, the columns past max_blocks holding blocks of the cache that must not be read */
  int64_t bst = p->maxb + 5;
  int32_t *wide = malloc((size_t)(p->R * bst) * 4);
  for (int64_t r = 0; r < p->R; r++)
    for (int64_t j = 0; j < bst; j++)
      wide[r * bst + j] = j < p->maxb ? p->bt[r * p->maxb + j] : (int32_t)((r + j) % c->nb);
  dsv4rt_buffer *bb = dev(p->bt, (size_t)(p->R * p->maxb) * 4), *ob = dev(NULL, ne * 2);
  dsv4rt_buffer *wb = dev(wide, (size_t)(p->R * bst) * 4);
  static const uint16_t poisons[2] = {0x7F81, 0x1234};
  for (int k = 0; k < 2; k++) {
    dsv4_check_fill16(want, ne, poisons[k]);
    dsv4_check_fill16(got, ne, poisons[k]);
    int rr = dsv4_ref_paged_gather_ts(&L, c->host, c->nb, c->bs, c->stride, tscale, p->seq, p->use_gl ? p->gl : NULL,
                                      p->bt, p->R, p->maxb, p->offset, want, p->stride_r, p->stride_m, p->M);
    CHECK(rr == 0, "%s: reference refused the inputs", name);
    dsv4rt_buffer_write(ob, 0, got, ne * 2);
    dsv4rt_paged_gather_args a = {.out = ob, .out_stride_r = p->stride_r, .out_stride_m = p->stride_m,
                                  .out_rows = p->M, .offset = p->offset, .cache = c->buf, .num_blocks = c->nb,
                                  .block_size = c->bs, .block_stride = c->stride, .seq_lens = sb,
                                  .gather_lens = p->use_gl ? gb : NULL, .block_table = bb, .num_requests = p->R,
                                  .max_blocks = p->maxb, .tensor_scale = tscale};
    if (k == 1)
      a.block_table = wb, a.block_table_stride = bst;
    dsv4rt_launch_opts o = {.kernel = kname, .check_contents = 1};
    dsv4rt_status s = dsv4rt_paged_gather(bundle, &a, &o);
    if (!s)
      s = dsv4rt_synchronize(ctx);
    CHECK(s == DSV4RT_OK, "%s: launch: %s", name, dsv4rt_last_error(ctx));
    dsv4rt_buffer_read(ob, 0, got, ne * 2);
    size_t first;
    size_t bad = dsv4_check_bf16(got, want, ne, &first);
    CHECK(bad == 0, "%s (poison %04x%s): %zu of %zu values differ; first at element %zu: got %04x want %04x", name,
          poisons[k], k == 1 ? ", block table rows of a wider table" : "", bad, ne, first, got[first], want[first]);
  }
  dsv4rt_buffer_destroy(sb), dsv4rt_buffer_destroy(gb), dsv4rt_buffer_destroy(bb), dsv4rt_buffer_destroy(ob),
      dsv4rt_buffer_destroy(wb);
  free(want), free(got), free(wide);
}

static void test_paged_random(void)
{
  for (int round = 0; round < 4; round++) {
    int64_t bs = round == 2 ? 2 : 64;
    cache_t c = make_cache(round == 2 ? 400 : 48, bs, round == 1 ? 2048 : 0);
    paged_t p = {.R = dsv4_rng_range(&rng, 1, 6), .use_gl = round != 3};
    p.offset = round == 0 ? 0 : dsv4_rng_range(&rng, 1, 40);
    int64_t maxlen = 300;
    p.M = p.offset + maxlen + (round == 1 ? 7 : 0);
    p.stride_m = L.dim + (round == 1 ? 8 : 0);
    p.stride_r = p.M * p.stride_m + (round == 1 ? 64 : 0);
    p.maxb = (maxlen + bs - 1) / bs + 1;
    p.seq = malloc((size_t)p.R * 4), p.gl = malloc((size_t)p.R * 4), p.bt = malloc((size_t)(p.R * p.maxb) * 4);
    for (int64_t r = 0; r < p.R; r++) {
      int64_t u = dsv4_rng_range(&rng, 0, 5);
      p.seq[r] = u == 0 ? 0 : (int32_t)dsv4_rng_range(&rng, 1, maxlen); /* empty requests too */
      p.gl[r] = u == 1 ? 0 : (int32_t)dsv4_rng_range(&rng, 0, p.seq[r]);
      if (!p.use_gl)
        p.gl[r] = p.seq[r];
      for (int64_t j = 0; j < p.maxb; j++)
        p.bt[r * p.maxb + j] = (int32_t)dsv4_rng_range(&rng, 0, c.nb - 1);
    }
    char name[160];
    snprintf(name, sizeof name, "%s R=%lld bs=%lld stride=%lld offset=%lld M=%lld strides=(%lld,%lld)%s",
             kname, (long long)p.R, (long long)bs, (long long)c.stride, (long long)p.offset, (long long)p.M,
             (long long)p.stride_r, (long long)p.stride_m, p.use_gl ? "" : " no gather_lens");
    run_paged(name, &c, &p);
    free(p.seq), free(p.gl), free(p.bt);
    free_cache(&c);
  }
}

/* ---- golden fixtures (FlashMLA / vLLM references) ---- */

/* Gather from a fixture's cache with the kernel under test and compare with
 * its expected bf16 rows: the `indices` of a dequant_gather case, or every
 * token in slot order for a kv_quant case (expect "dequant"). */
static void golden_gather(const char *root, const char *name)
{
  char dir[1024], err[512];
  snprintf(dir, sizeof dir, "%s/%s", root, name);
  golden_case *g = golden_open(dir, err, sizeof err);
  CHECK(g != NULL, "golden %s: %s", dir, err);
  if (!g)
    return;
  const golden_tensor *cache = golden_tensor_get(g, "cache"), *idx = golden_tensor_get(g, "indices");
  const golden_tensor *out = golden_tensor_get(g, idx ? "out" : "dequant");
  double bs, stride;
  golden_param_num(g, "block_size", &bs);
  golden_param_num(g, "block_stride", &stride);
  int64_t n = out->shape[0];
  int32_t *seq = malloc((size_t)n * 4);
  for (int64_t i = 0; i < n; i++)
    seq[i] = idx ? ((const int32_t *)idx->data)[i] : (int32_t)i;
  CHECK(out->shape[1] == L.dim, "golden %s: rows of %lld values, layout %s has %d", name, (long long)out->shape[1],
        L.name, L.dim);
  dsv4rt_buffer *cb = dev(cache->data, cache->nbytes), *ib = dev(seq, (size_t)n * 4), *ob = dev(NULL, out->nbytes);
  uint16_t *got = malloc(out->nbytes);
  dsv4_check_fill16(got, out->nelem, 0x7F81);
  dsv4rt_buffer_write(ob, 0, got, out->nbytes);
  dsv4rt_dequant_gather_args a = {.out = ob, .cache = cb, .indices = ib, .n = n, .num_blocks = cache->shape[0],
                                  .block_size = (int64_t)bs, .block_stride = (int64_t)stride, .tensor_scale = 1};
  dsv4rt_launch_opts o = {.kernel = kname};
  dsv4rt_status s = dsv4rt_dequant_gather(bundle, &a, &o);
  if (!s)
    s = dsv4rt_synchronize(ctx);
  CHECK(s == DSV4RT_OK, "golden %s with %s: %s", name, kname, dsv4rt_last_error(ctx));
  dsv4rt_buffer_read(ob, 0, got, out->nbytes);
  size_t first, bad = dsv4_check_bf16(got, out->data, (size_t)out->nelem, &first);
  CHECK(bad == 0, "golden %s (%s) with %s: %zu values differ, first at %zu", name, golden_op(g), kname, bad, first);
  printf("golden %s with %s: %s\n", name, kname, bad ? "DIFFERS" : "bit-exact");
  free(got), free(seq);
  dsv4rt_buffer_destroy(cb), dsv4rt_buffer_destroy(ib), dsv4rt_buffer_destroy(ob);
  golden_close(g);
}

static void golden_paged(const char *root)
{
  char dir[1024], err[512];
  golden_case *g;
  snprintf(dir, sizeof dir, "%s/v4_paged_gather", root);
  g = golden_open(dir, err, sizeof err);
  CHECK(g != NULL, "golden %s: %s", dir, err);
  if (g) {
    const golden_tensor *cache = golden_tensor_get(g, "cache"), *seq = golden_tensor_get(g, "seq_lens"),
                        *gl = golden_tensor_get(g, "gather_lens"), *bt = golden_tensor_get(g, "block_table"),
                        *out = golden_tensor_get(g, "out");
    double bs, stride, offset, poison;
    golden_param_num(g, "block_size", &bs);
    golden_param_num(g, "block_stride", &stride);
    golden_param_num(g, "offset", &offset);
    golden_param_num(g, "poison", &poison);
    uint16_t pz = dsv4_ref_f32_to_bf16((float)poison);
    dsv4rt_buffer *cb = dev(cache->data, cache->nbytes), *sb = dev(seq->data, seq->nbytes),
                  *gb = dev(gl->data, gl->nbytes), *bb = dev(bt->data, bt->nbytes), *ob = dev(NULL, out->nbytes);
    uint16_t *got = malloc(out->nbytes);
    dsv4_check_fill16(got, out->nelem, pz);
    dsv4rt_buffer_write(ob, 0, got, out->nbytes);
    int64_t R = out->shape[0], M = out->shape[1];
    dsv4rt_paged_gather_args a = {.out = ob, .out_stride_r = M * 512, .out_stride_m = 512, .out_rows = M,
                                  .offset = (int64_t)offset, .cache = cb, .num_blocks = cache->shape[0],
                                  .block_size = (int64_t)bs, .block_stride = (int64_t)stride, .seq_lens = sb,
                                  .gather_lens = gb, .block_table = bb, .num_requests = R,
                                  .max_blocks = bt->shape[1]};
    dsv4rt_launch_opts o = {.kernel = kname};
    dsv4rt_status s = dsv4rt_paged_gather(bundle, &a, &o);
    if (!s)
      s = dsv4rt_synchronize(ctx);
    CHECK(s == DSV4RT_OK, "golden v4_paged_gather: %s", dsv4rt_last_error(ctx));
    dsv4rt_buffer_read(ob, 0, got, out->nbytes);
    size_t first, bad = dsv4_check_bf16(got, out->data, (size_t)out->nelem, &first);
    CHECK(bad == 0, "golden v4_paged_gather (vLLM) with %s: %zu values differ, first at %zu", kname, bad, first);
    printf("golden v4_paged_gather with %s: %s\n", kname, bad ? "DIFFERS" : "bit-exact");
    free(got);
    dsv4rt_buffer_destroy(cb), dsv4rt_buffer_destroy(sb), dsv4rt_buffer_destroy(gb), dsv4rt_buffer_destroy(bb),
        dsv4rt_buffer_destroy(ob);
    golden_close(g);
  }
}

/* ---- validation: bad arguments are refused, nothing is written ---- */

static void expect_refused(const char *what, dsv4rt_status s, dsv4rt_status want, dsv4rt_buffer *out, size_t n)
{
  dsv4rt_synchronize(ctx);
  CHECK(s == want, "%s: status %d (%s), expected %d; message: %s", what, s, dsv4rt_status_name(s), want,
        dsv4rt_last_error(ctx));
  CHECK(dsv4rt_last_error(ctx)[0] != 0, "%s: no error message", what);
  uint16_t *b = malloc(n * 2);
  dsv4rt_buffer_read(out, 0, b, n * 2);
  size_t untouched = 0;
  for (size_t i = 0; i < n; i++)
    untouched += b[i] == 0x5A5A;
  CHECK(untouched == n, "%s: %zu of %zu output values were overwritten", what, n - untouched, n);
  free(b);
}

static void test_validation(void)
{
  cache_t c = make_cache(4, 64, 0);
  int32_t idx[64];
  for (int i = 0; i < 64; i++)
    idx[i] = i;
  size_t ne = 64 * 512;
  uint16_t *fill = malloc(ne * 2);
  dsv4_check_fill16(fill, ne, 0x5A5A);
  dsv4rt_buffer *ob = dev(fill, ne * 2), *ib = dev(idx, sizeof idx), *small = dev(fill, 1024);
  dsv4rt_dequant_gather_args ok = {.out = ob, .cache = c.buf, .indices = ib, .n = 64, .num_blocks = 4,
                                   .block_size = 64, .block_stride = c.stride};
  dsv4rt_dequant_gather_args a;
  a = ok, a.out = NULL;
  expect_refused("null out", dsv4rt_dequant_gather(bundle, &a, NULL), DSV4RT_ERR_NULL_ARG, ob, ne);
  a = ok, a.n = -1;
  expect_refused("negative n", dsv4rt_dequant_gather(bundle, &a, NULL), DSV4RT_ERR_OUT_OF_RANGE, ob, ne);
  a = ok, a.out = small;
  expect_refused("out too small", dsv4rt_dequant_gather(bundle, &a, NULL), DSV4RT_ERR_BUFFER_TOO_SMALL, ob, ne);
  a = ok, a.indices = small, a.n = 64 * 64;
  expect_refused("indices too small", dsv4rt_dequant_gather(bundle, &a, NULL), DSV4RT_ERR_BUFFER_TOO_SMALL, ob, ne);
  a = ok, a.num_blocks = 5;
  expect_refused("cache smaller than num_blocks*stride", dsv4rt_dequant_gather(bundle, &a, NULL),
                 DSV4RT_ERR_BUFFER_TOO_SMALL, ob, ne);
  a = ok, a.block_stride = c.stride - 16;
  expect_refused("stride below the page size", dsv4rt_dequant_gather(bundle, &a, NULL), DSV4RT_ERR_OUT_OF_RANGE, ob,
                 ne);
  a = ok, a.block_stride = c.stride + 4, a.num_blocks = 3;
  expect_refused("stride not 16-byte aligned", dsv4rt_dequant_gather(bundle, &a, NULL), DSV4RT_ERR_MISALIGNED, ob,
                 ne);
  a = ok, a.block_size = 0;
  expect_refused("block_size 0", dsv4rt_dequant_gather(bundle, &a, NULL), DSV4RT_ERR_OUT_OF_RANGE, ob, ne);
  idx[17] = 4 * 64; /* one past the last slot */
  dsv4rt_buffer_write(ib, 0, idx, sizeof idx);
  dsv4rt_launch_opts chk = {.check_contents = 1};
  expect_refused("index past the cache (checked)", dsv4rt_dequant_gather(bundle, &ok, &chk), DSV4RT_ERR_BAD_CONTENTS,
                 ob, ne);
  dsv4rt_launch_opts named = {.kernel = "no_such_kernel"};
  expect_refused("unknown kernel name", dsv4rt_dequant_gather(bundle, &ok, &named), DSV4RT_ERR_NO_KERNEL, ob, ne);

  /* paged */
  int32_t seq[2] = {100, 50}, gl[2] = {100, 50}, bt[2 * 2] = {0, 1, 2, 3};
  dsv4rt_buffer *sb = dev(seq, sizeof seq), *gb = dev(gl, sizeof gl), *bb = dev(bt, sizeof bt);
  dsv4rt_paged_gather_args pok = {.out = ob, .out_stride_r = 32 * 512, .out_stride_m = 512, .out_rows = 32,
                                  .offset = 0, .cache = c.buf, .num_blocks = 4, .block_size = 64,
                                  .block_stride = c.stride, .seq_lens = sb, .gather_lens = gb, .block_table = bb,
                                  .num_requests = 2, .max_blocks = 2};
  dsv4rt_paged_gather_args p;
  p = pok, p.offset = 33;
  expect_refused("offset past out_rows", dsv4rt_paged_gather(bundle, &p, NULL), DSV4RT_ERR_OUT_OF_RANGE, ob, ne);
  p = pok, p.out_stride_m = 516;
  expect_refused("out stride not a multiple of 8", dsv4rt_paged_gather(bundle, &p, NULL), DSV4RT_ERR_MISALIGNED, ob,
                 ne);
  p = pok, p.max_blocks = 3;
  expect_refused("block_table too small", dsv4rt_paged_gather(bundle, &p, NULL), DSV4RT_ERR_BUFFER_TOO_SMALL, ob, ne);
  p = pok, p.out_stride_r = 64 * 512;
  expect_refused("out too small for its strides", dsv4rt_paged_gather(bundle, &p, NULL), DSV4RT_ERR_BUFFER_TOO_SMALL,
                 ob, ne);
  p = pok;
  expect_refused("gather length past out_rows (checked)", dsv4rt_paged_gather(bundle, &p, &chk),
                 DSV4RT_ERR_BAD_CONTENTS, ob, ne);
  seq[0] = gl[0] = 60, bt[0] = 9; /* request 0 reads block-table column 0 */
  dsv4rt_buffer_write(sb, 0, seq, sizeof seq);
  dsv4rt_buffer_write(gb, 0, gl, sizeof gl);
  dsv4rt_buffer_write(bb, 0, bt, sizeof bt);
  p = pok, p.out_rows = 64, p.out_stride_r = 0;
  expect_refused("out_stride_r 0 with two requests", dsv4rt_paged_gather(bundle, &p, &chk), DSV4RT_ERR_OUT_OF_RANGE,
                 ob, ne);
  p.num_requests = 1;
  expect_refused("block id past the cache (checked)", dsv4rt_paged_gather(bundle, &p, &chk), DSV4RT_ERR_BAD_CONTENTS,
                 ob, ne);
  dsv4rt_buffer_destroy(sb), dsv4rt_buffer_destroy(gb), dsv4rt_buffer_destroy(bb);
  dsv4rt_buffer_destroy(ob), dsv4rt_buffer_destroy(ib), dsv4rt_buffer_destroy(small);
  free(fill);
  free_cache(&c);
}

/* ---- damaged bundles are refused with a message ---- */

static void test_bundles(const char *path)
{
  FILE *f = fopen(path, "rb");
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *b = malloc((size_t)n);
  CHECK(fread(b, 1, (size_t)n, f) == (size_t)n, "read bundle");
  fclose(f);
  dsv4rt_bundle *x = NULL;
  CHECK(dsv4rt_bundle_open_memory(ctx, b, (size_t)n, &x) == DSV4RT_OK, "intact bundle: %s", dsv4rt_last_error(ctx));
  dsv4rt_bundle_destroy(x);
  for (long cut = 0; cut < n; cut += n / 97 + 1) {
    dsv4rt_status s = dsv4rt_bundle_open_memory(ctx, b, (size_t)cut, &x);
    CHECK(s == DSV4RT_ERR_BUNDLE_FORMAT && x == NULL, "truncated to %ld bytes: status %d", cut, s);
  }
  for (int k = 0; k < 200; k++) {
    long at = (long)dsv4_rng_range(&rng, 0, n - 1);
    uint8_t old = b[at];
    b[at] ^= (uint8_t)dsv4_rng_range(&rng, 1, 255);
    dsv4rt_status s = dsv4rt_bundle_open_memory(ctx, b, (size_t)n, &x);
    CHECK(s != DSV4RT_OK && x == NULL, "byte %ld flipped: accepted", at);
    b[at] = old;
  }
  /* entry flags (checksum made good): unknown bits, and early launches on
   * an entry whose kernels do not wait for them */
  static const uint32_t bad_flags[] = {0x80u, DSV4_ENTRY_SECOND_WAITS, DSV4_ENTRY_FIRST_WAITS};
  for (int k = 0; k < 3; k++) {
    long at = DSV4_BUNDLE_HEADER_BYTES + (long)offsetof(dsv4_bundle_entry, flags); /* entry 0: a gather kernel */
    uint32_t old, crc;
    memcpy(&old, b + at, 4);
    memcpy(b + at, &bad_flags[k], 4);
    crc = dsv4_crc32(b + DSV4_BUNDLE_AT_NENTRIES, (uint64_t)(n - DSV4_BUNDLE_AT_NENTRIES));
    memcpy(b + DSV4_BUNDLE_AT_CRC, &crc, 4);
    dsv4rt_status s = dsv4rt_bundle_open_memory(ctx, b, (size_t)n, &x);
    CHECK(s == DSV4RT_ERR_BUNDLE_FORMAT && x == NULL && strstr(dsv4rt_last_error(ctx), "flags"),
          "entry flags 0x%x on a gather entry: status %d: %s", bad_flags[k], s, dsv4rt_last_error(ctx));
    memcpy(b + at, &old, 4);
    crc = dsv4_crc32(b + DSV4_BUNDLE_AT_NENTRIES, (uint64_t)(n - DSV4_BUNDLE_AT_NENTRIES));
    memcpy(b + DSV4_BUNDLE_AT_CRC, &crc, 4);
  }
  CHECK(dsv4rt_bundle_open_memory(ctx, b, (size_t)n, &x) == DSV4RT_OK, "restored bundle: %s", dsv4rt_last_error(ctx));
  dsv4rt_bundle_destroy(x);
  uint32_t v = DSV4_BUNDLE_VERSION + 1;
  memcpy(b + 8, &v, 4);
  dsv4rt_status s = dsv4rt_bundle_open_memory(ctx, b, (size_t)n, &x);
  CHECK(s == DSV4RT_ERR_BUNDLE_VERSION && strstr(dsv4rt_last_error(ctx), "version"), "version %u bundle: status %d: %s",
        v, s, dsv4rt_last_error(ctx));
  free(b);
  s = dsv4rt_bundle_open(ctx, "/nonexistent/x.dsv4b", &x);
  CHECK(s == DSV4RT_ERR_IO, "missing bundle file: status %d", s);
}

int main(int argc, char **argv)
{
  if (argc != 4) {
    fprintf(stderr, "usage: test_gather BUNDLE GOLDEN_DIR opencl|cuda\n");
    return 2;
  }
  int st = harness_open(argv[3]);
  if (st)
    return st;
  if (harness_bundle(argv[1], &bundle))
    return 1;
  const char *groot = golden_root(argv[2]);
  /* every kernel of the bundle, each with the layout it was compiled for */
  const char *v4_dequant = NULL, *v4_paged = NULL;
  dsv4_layout v4 = dsv4_check_layout_v4();
  int ran = 0;
  for (int e = 0; e < dsv4rt_bundle_count(bundle); e++) {
    const char *name, *op;
    dsv4rt_bundle_entry(bundle, e, &name, &op, NULL, NULL);
    if (!dsv4rt_bundle_entry_is_first(bundle, e))
      continue;
    dsv4rt_bundle_entry_layout(bundle, e, &L);
    kname = name;
    tscale = 1.0f;
    for (int i = 0; i < L.nseg; i++)
      if (L.seg[i].scale_tensor)
        tscale = 0.0371f; /* a kv_scale that is not a power of two: real rounding */
    int is_v4 = !strcmp(L.name, v4.name);
    if (is_v4) { /* the spec's layout is the one docs/ops.md section 1 describes */
      dsv4_layout a = L, b = v4;
      a.line = b.line = a.block_line = b.block_line = a.block_tokens = b.block_tokens = 0;
      a.block_stride = b.block_stride = 0;
      for (int i = 0; i < DSV4_LAYOUT_MAX_SEGS; i++)
        a.seg[i].line = b.seg[i].line = 0;
      CHECK(!memcmp(&a, &b, sizeof a), "layout %s of %s differs from docs/ops.md section 1", L.name, name);
    }
    if (!strcmp(op, "dequant_gather")) {
      test_dequant_random();
      test_dequant_edges();
      if (is_v4 && groot) {
        golden_gather(groot, "v4_dequant_gather");
        golden_gather(groot, "v4_quant");
      }
      if (is_v4) {
        v4_dequant = v4_dequant ? v4_dequant : name;
      }
      if (groot && !strcmp(L.name, "fp8_ds_mla_v32"))
        golden_gather(groot, "v32_quant");
      ran++;
    } else if (!strcmp(op, "paged_gather")) {
      test_paged_random();
      if (is_v4 && groot)
        golden_paged(groot);
      if (is_v4) {
        v4_paged = v4_paged ? v4_paged : name;
      }
      ran++;
    }
  }
  CHECK(ran > 0, "the bundle has no gather kernel");
  /* validation and damaged bundles, once, with the DSv4 kernels */
  L = v4;
  tscale = 1.0f;
  if (v4_dequant && v4_paged) {
    kname = v4_dequant;
    test_validation();
    test_bundles(argv[1]);
  }
  dsv4rt_bundle_destroy(bundle);
  dsv4rt_context_destroy(ctx);
  return harness_finish();
}
