/* test_indexer.c -- execution tests of the top-k indexer kernels (paged MQA
 * logits and top-k) through libdsv4rt.
 *
 *   test_indexer BUNDLE GOLDEN_DIR opencl|cuda
 *
 * Logits: fresh random q, weights and an indexer cache written by the
 * reference writer, next_n 1 and 2, contexts of 0, <= K, not a multiple of
 * the block size and past the row length, a padded row stride; valid
 * entries compared with DeepGEMM's calc_diff < 5e-6 against the reference
 * written from docs/ops.md, the rest exactly -inf; every written entry checked
 * after poisoning.  Top-k: every topk kernel on the kernel's logits, checked
 * as sets with the tie-tolerant rule (and rows with heavy ties).  Also the
 * DeepGEMM fixtures indexer_logits_n1 / _n2.  Exit 77 without a device.
 */
#include <math.h>
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




/* DeepGEMM's calc_diff over entries where want is finite; -inf must match.
 * The largest seen is reported at the end: the margin, not only the verdict. */
static double worst_ratio = -1;
static char worst_what[160] = "none";

static void check_logits(const char *what, const float *got, const float *want, int64_t rows, int64_t L,
                         int64_t stride, double tol)
{
  double xy = 0, xx = 0;
  size_t wrong_inf = 0, n = 0;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t k = 0; k < L; k++) {
      float g = got[r * stride + k], w = want[r * stride + k];
      if (isinf(w) && w < 0) {
        wrong_inf += !(isinf(g) && g < 0);
        continue;
      }
      xy += (double)g * w, xx += (double)g * g + (double)w * w, n++;
    }
  double diff = xx > 0 ? 1 - 2 * xy / xx : 0;
  if (diff / tol > worst_ratio || diff != diff) {
    worst_ratio = diff / tol;
    snprintf(worst_what, sizeof worst_what, "%s: %.3g against %g", what, diff, tol);
  }
  CHECK(wrong_inf == 0, "%s: %zu entries past the context are not -inf", what, wrong_inf);
  CHECK(diff < tol && diff == diff, "%s: calc_diff %.3g over %zu valid entries (tolerance %g)", what, diff, n, tol);
}

/* Run every topk kernel of the bundle on device logits, rows split over
 * `splits` CTAs (0: as the runtime's rule chooses), and check the sets. */
static void run_topks_split(const char *what, dsv4rt_buffer *lb, const float *host, int64_t rows, int64_t L,
                            int64_t stride, dsv4rt_buffer *cb, const int32_t *ctxs, int splits)
{
  for (int e = 0; e < dsv4rt_bundle_count(bundle); e++) {
    const char *name, *op;
    dsv4rt_bundle_entry(bundle, e, &name, &op, NULL, NULL);
    if (!dsv4rt_bundle_entry_is_first(bundle, e) || strcmp(op, "topk"))
      continue;
    dsv4rt_kernel_info info;
    dsv4rt_bundle_entry_info(bundle, e, &info);
    int64_t K = info.topk;
    int32_t *got = malloc((size_t)(rows * K) * 4 + 4);
    for (int64_t i = 0; i < rows * K; i++)
      got[i] = 0x7EADBEEF;
    dsv4rt_buffer *ob = dev(got, (size_t)(rows * K) * 4);
    dsv4rt_topk_args a = {
        .out = ob, .logits = lb, .rows = rows, .row_len = L, .row_stride = stride, .context_lens = cb};
    dsv4rt_launch_opts o = {.kernel = name, .splits = splits};
    dsv4rt_status s = dsv4rt_topk(bundle, &a, &o);
    if (!s)
      s = dsv4rt_synchronize(ctx);
    CHECK(s == DSV4RT_OK, "%s %s (splits %d): %s", what, name, splits, dsv4rt_last_error(ctx));
    dsv4rt_buffer_read(ob, 0, got, (size_t)(rows * K) * 4);
    /* the kernel sees at most row_len positions */
    int32_t *c = malloc((size_t)rows * 4);
    for (int64_t r = 0; r < rows; r++)
      c[r] = ctxs[r] < L ? ctxs[r] : (int32_t)L;
    char err[256] = "";
    int bad = dsv4_ref_topk_check(host, rows, stride, c, K, got, err, sizeof err);
    CHECK(!bad, "%s %s (K %lld, splits %d): %s", what, name, (long long)K, splits, err);
    free(c), free(got);
    dsv4rt_buffer_destroy(ob);
  }
}

/* Every topk kernel as the rule chooses, whole rows, and rows split over 2, 3 and 16
 * chunks (then the merge kernel; 16 gives the long-row tests chunks
 * shorter than K, which hand on every position). */
static void run_topks(const char *what, dsv4rt_buffer *lb, const float *host, int64_t rows, int64_t L, int64_t stride,
                      dsv4rt_buffer *cb, const int32_t *ctxs)
{
  static const int splits[] = {0, 1, 2, 3, 16};
  for (size_t i = 0; i < sizeof splits / sizeof *splits; i++)
    run_topks_split(what, lb, host, rows, L, stride, cb, ctxs, splits[i]);
}

/* Top-k alone on long rows (more positions than one pass of a CTA's loads
 * covers) of three kinds: spread values, values packed into one binade
 * (many keys share their leading bits), and heavy ties; contexts 0, <= K,
 * past the row and in between. */
static void topk_rows(void)
{
  const int64_t rows = 8, L = 21011, stride = L + 5;
  float *lg = malloc((size_t)(rows * stride) * 4);
  int32_t cl[8] = {0, 300, (int32_t)L + 9, 19999, 1100, 20001, 7000, (int32_t)L};
  for (int64_t r = 0; r < rows; r++)
    for (int64_t i = 0; i < stride; i++) {
      int kind = (int)(r % 3);
      float v = kind == 0 ? (rnd01() - 0.5f) * 200.0f : kind == 1 ? 1.0f + rnd01() : (float)(int)(rnd01() * 4.0f);
      lg[r * stride + i] = i < L ? v : NAN;
    }
  dsv4rt_buffer *lb = dev(lg, (size_t)(rows * stride) * 4), *clb = dev(cl, sizeof cl);
  run_topks("top-k on long rows", lb, lg, rows, L, stride, clb, cl);
  dsv4rt_buffer_destroy(lb), dsv4rt_buffer_destroy(clb);
  free(lg);
}

/* A random case with blocks of bs tokens: 64 (the layout's stride), or
 * another size (a power of two or not, above or below the kernels' 64-position
 * steps) at the smallest stride the layout allows, rounded up to its
 * alignment. */
static int case_no_maps; /* launch option no_tensor_maps (the matrix forms' cp.async copies where TMA would serve) */

/* The fused logits_topk kernel kname on a's inputs (out in place of
 * logits) against the reference logits want: its K positions checked with
 * the tie-tolerant rule within its logits' rounding, out poisoned first.
 * The rounding: the portable form sums in fp32 (2e-5 of the row's largest
 * |logit|); the warpgroup form takes relu(q.k) and the weights to bf16 for
 * its head-sum product (2^-8 of it).  The sets are equal unless the K-th
 * and next logits lie that close. */
static void run_fused(const char *what, const char *kname, const dsv4rt_mqa_logits_args *a, const float *want,
                      const int32_t *cl, const dsv4rt_launch_opts *o, int64_t K, int matrix)
{
  int64_t R = a->batch * a->next_n;
  int32_t *got = malloc((size_t)(R * K) * 4 + 4);
  for (int64_t i = 0; i < R * K; i++)
    got[i] = 0x7EADBEEF;
  dsv4rt_buffer *ob = dev(got, (size_t)(R * K) * 4);
  dsv4rt_mqa_logits_topk_args f = {.out = ob, .row_len = a->row_len, .q = a->q, .batch = a->batch,
                                   .next_n = a->next_n, .cache = a->cache, .num_blocks = a->num_blocks,
                                   .block_size = a->block_size, .block_stride = a->block_stride,
                                   .weights = a->weights, .context_lens = a->context_lens,
                                   .block_table = a->block_table, .max_blocks = a->max_blocks,
                                   .block_table_stride = a->block_table_stride};
  dsv4rt_status s = dsv4rt_paged_mqa_logits_topk(bundle, &f, o);
  if (!s)
    s = dsv4rt_synchronize(ctx);
  CHECK(s == DSV4RT_OK, "%s: launch: %s", what, dsv4rt_last_error(ctx));
  dsv4rt_buffer_read(ob, 0, got, (size_t)(R * K) * 4);
  int32_t *c = malloc((size_t)R * 4);
  for (int64_t r = 0; r < R; r++)
    c[r] = cl[r] < a->row_len ? cl[r] : (int32_t)a->row_len;
  char err[256] = "";
  int bad = dsv4_ref_topk_check_within(want, R, a->row_stride, c, K, got, matrix ? 1.0 / 256 : 2e-5, err, sizeof err);
  CHECK(!bad, "%s %s (K %lld): %s", what, kname, (long long)K, err);
  free(c), free(got);
  dsv4rt_buffer_destroy(ob);
}

/* blocks: 64-token blocks of context a batch entry (40: rows within one
 * chunk of every fused kernel; more: rows over several, the merge). */
static void random_case_blocks(const char *kname, const dsv4_layout *L, int64_t H, int64_t B, int64_t nn, int ties,
                               int matrix, int64_t bs, int64_t blocks, int64_t K)
{
  int64_t D = L->dim, maxb = blocks * 64 / bs, nb = B * maxb;
  int64_t stride = bs == 64 && L->block_stride
                       ? L->block_stride
                       : (dsv4_layout_min_block_bytes(L, bs) + L->align - 1) / L->align * L->align;
  int64_t Lr = maxb * bs - 37, rstride = Lr + 64; /* row length not a multiple of 64; padded stride */
  /* the cache, written by the reference writer from random rows */
  int64_t ntok = nb * bs;
  uint16_t *kv = malloc((size_t)(ntok * D) * 2);
  int64_t *slots = malloc((size_t)ntok * 8);
  for (int64_t i = 0; i < ntok * D; i++)
    kv[i] = dsv4_ref_f32_to_bf16(ties ? (i % 3 ? 1.0f : -1.0f) : (rnd01() - 0.5f) * 4.0f);
  for (int64_t i = 0; i < ntok; i++)
    slots[i] = i;
  uint8_t *cache = calloc(1, (size_t)(nb * stride));
  dsv4_ref_kv_insert(L, kv, ntok, slots, ntok, NULL, NULL, 0, 0, 0, cache, nb, bs, stride);
  int64_t R = B * nn;
  uint8_t *q = malloc((size_t)(R * H * D));
  for (int64_t i = 0; i < R * H * D; i++)
    q[i] = dsv4_ref_f32_to_e4m3(ties ? 0.5f : (rnd01() - 0.5f) * 8.0f);
  float *w = malloc((size_t)(R * H) * 4);
  for (int64_t i = 0; i < R * H; i++)
    w[i] = ties ? 0.25f : (rnd01() - 0.3f);
  int32_t *cl = malloc((size_t)R * 4), *bt = malloc((size_t)(B * maxb) * 4);
  for (int64_t r = 0; r < R; r++) {
    int u = (int)dsv4_rng_range(&rng, 0, 4);
    cl[r] = u == 0 ? 0 : u == 1 ? (int32_t)dsv4_rng_range(&rng, 1, 500) /* <= K */
            : u == 2 ? (int32_t)(Lr + 50)                                 /* past the row */
                     : (int32_t)dsv4_rng_range(&rng, 513, Lr);            /* not a multiple of 64 */
  }
  for (int64_t i = 0; i < B * maxb; i++)
    bt[i] = (int32_t)((i * 7 + 3) % nb);
  float *want = malloc((size_t)(R * rstride) * 4), *got = malloc((size_t)(R * rstride) * 4);
  for (int64_t i = 0; i < R * rstride; i++)
    want[i] = got[i] = NAN;
  int rr = dsv4_ref_paged_mqa_logits(L, q, B, nn, H, cache, nb, bs, stride, w, cl, bt, maxb, want, Lr, rstride);
  CHECK(rr == 0, "%s: reference refused the inputs", kname);
  dsv4rt_buffer *qb = dev(q, (size_t)(R * H * D)), *cb = dev(cache, (size_t)(nb * stride)),
                *wb = dev(w, (size_t)(R * H) * 4), *clb = dev(cl, (size_t)R * 4),
                *lb = dev(got, (size_t)(R * rstride) * 4);
  /* the block table as rows of a wider one (a column slice of vLLM's), the columns past max_blocks holding
   * blocks of the cache that must not be read */
  int64_t bst = maxb + 3;
  int32_t *wide = malloc((size_t)(B * bst) * 4);
  for (int64_t i = 0; i < B * bst; i++)
    wide[i] = i % bst < maxb ? bt[i / bst * maxb + i % bst] : (int32_t)((i * 5 + 1) % nb);
  dsv4rt_buffer *btb = dev(wide, (size_t)(B * bst) * 4);
  free(wide);
  dsv4rt_mqa_logits_args a = {.logits = lb, .row_len = Lr, .row_stride = rstride, .q = qb, .batch = B, .next_n = nn,
                              .cache = cb, .num_blocks = nb, .block_size = bs, .block_stride = stride, .weights = wb,
                              .context_lens = clb, .block_table = btb, .max_blocks = maxb, .block_table_stride = bst};
  /* contexts past the row break check_contents' contract (ctx <= row_len):
   * refused there, clamped by the kernel without it */
  int past = 0;
  for (int64_t r = 0; r < R; r++)
    past |= cl[r] > Lr;
  dsv4rt_launch_opts o = {.kernel = kname, .check_contents = 1, .no_tensor_maps = case_no_maps};
  char what[128];
  snprintf(what, sizeof what, "%s B=%lld next_n=%lld bs=%lld L=%lld%s%s", kname, (long long)B, (long long)nn,
           (long long)bs, (long long)Lr, ties ? " (ties)" : "", case_no_maps ? " (no tensor maps)" : "");
  if (K) { /* the fused op: contexts past the row refused when checked, the rest as the logits */
    dsv4rt_mqa_logits_topk_args f = {.out = lb, .row_len = Lr, .q = qb, .batch = B, .next_n = nn, .cache = cb,
                                     .num_blocks = nb, .block_size = bs, .block_stride = stride, .weights = wb,
                                     .context_lens = clb, .block_table = btb, .max_blocks = maxb,
                                     .block_table_stride = bst};
    if (past) {
      dsv4rt_status st = dsv4rt_paged_mqa_logits_topk(bundle, &f, &o);
      CHECK(st == DSV4RT_ERR_BAD_CONTENTS && strstr(dsv4rt_last_error(ctx), "context_lens["),
            "%s: a context past the row, checked: status %d, %s", kname, st, dsv4rt_last_error(ctx));
      o.check_contents = 0;
    }
    if (matrix) {
      f.next_n = DSV4_LOGITS_MAX_NEXT_N + 1, f.batch = 1;
      CHECK(dsv4rt_paged_mqa_logits_topk(bundle, &f, &o) == DSV4RT_ERR_OUT_OF_RANGE, "%s: next_n %d accepted",
            kname, DSV4_LOGITS_MAX_NEXT_N + 1);
    }
    run_fused(what, kname, &a, want, cl, &o, K, matrix);
    { /* row_len 0: every row -1 (a grid of one chunk of no positions) */
      int32_t *got0 = malloc((size_t)(R * K) * 4);
      for (int64_t i = 0; i < R * K; i++)
        got0[i] = 0x7EADBEEF;
      dsv4rt_buffer *ob = dev(got0, (size_t)(R * K) * 4);
      f.out = ob, f.row_len = 0, f.next_n = nn, f.batch = B;
      dsv4rt_launch_opts o0 = o; /* (unchecked: contexts past a row of 0 are clamped) */
      o0.check_contents = 0;
      dsv4rt_status s0 = dsv4rt_paged_mqa_logits_topk(bundle, &f, &o0);
      if (!s0)
        s0 = dsv4rt_synchronize(ctx);
      CHECK(s0 == DSV4RT_OK, "%s: row_len 0: %s", what, dsv4rt_last_error(ctx));
      dsv4rt_buffer_read(ob, 0, got0, (size_t)(R * K) * 4);
      int64_t bad0 = 0;
      for (int64_t i = 0; i < R * K; i++)
        bad0 += got0[i] != -1;
      CHECK(bad0 == 0, "%s: row_len 0: %lld entries not -1", what, (long long)bad0);
      dsv4rt_buffer_destroy(ob);
      free(got0);
    }
    goto out;
  }
  if (past) {
    dsv4rt_status st = dsv4rt_paged_mqa_logits(bundle, &a, &o);
    CHECK(st == DSV4RT_ERR_BAD_CONTENTS && strstr(dsv4rt_last_error(ctx), "context_lens["),
          "%s: a context past the row, checked: status %d, %s", kname, st, dsv4rt_last_error(ctx));
    o.check_contents = 0;
  }
  if (matrix) { /* the warp-matrix form holds at most DSV4_LOGITS_MAX_NEXT_N rows a CTA: more is refused */
    dsv4rt_mqa_logits_args big = a;
    big.next_n = DSV4_LOGITS_MAX_NEXT_N + 1, big.batch = 1;
    CHECK(dsv4rt_paged_mqa_logits(bundle, &big, &o) == DSV4RT_ERR_OUT_OF_RANGE, "%s: next_n %d accepted", kname,
          DSV4_LOGITS_MAX_NEXT_N + 1);
  }
  dsv4rt_status s = dsv4rt_paged_mqa_logits(bundle, &a, &o);
  if (!s)
    s = dsv4rt_synchronize(ctx);
  CHECK(s == DSV4RT_OK, "%s: launch: %s", kname, dsv4rt_last_error(ctx));
  dsv4rt_buffer_read(lb, 0, got, (size_t)(R * rstride) * 4);
  size_t unwritten = 0, extra = 0;
  for (int64_t r = 0; r < R; r++) {
    for (int64_t k = 0; k < Lr; k++)
      unwritten += isnan(got[r * rstride + k]);
    for (int64_t k = Lr; k < rstride; k++)
      extra += !isnan(got[r * rstride + k]);
  }
  CHECK(unwritten == 0, "%s: %zu logits left unwritten", kname, unwritten);
  CHECK(extra == 0, "%s: %zu entries past row_len were written", kname, extra);
  check_logits(what, got, want, R, Lr, rstride, ties ? 1e-5 : 5e-6);
  run_topks(what, lb, got, R, Lr, rstride, clb, cl);
out:
  dsv4rt_buffer_destroy(qb), dsv4rt_buffer_destroy(cb), dsv4rt_buffer_destroy(wb), dsv4rt_buffer_destroy(clb),
      dsv4rt_buffer_destroy(btb), dsv4rt_buffer_destroy(lb);
  free(kv), free(slots), free(cache), free(q), free(w), free(cl), free(bt), free(want), free(got);
}

static void random_case(const char *kname, const dsv4_layout *L, int64_t H, int64_t B, int64_t nn, int ties,
                        int matrix, int64_t bs)
{
  random_case_blocks(kname, L, H, B, nn, ties, matrix, bs, 40, 0);
}

static void golden(const char *kname, const char *root, const char *name, int no_maps)
{
  char dir[1024], err[512];
  snprintf(dir, sizeof dir, "%s/%s", root, name);
  golden_case *g = golden_open(dir, err, sizeof err);
  CHECK(g != NULL, "golden %s: %s", dir, err);
  if (!g)
    return;
  const golden_tensor *q = golden_tensor_get(g, "q"), *kv = golden_tensor_get(g, "kv_cache"),
                      *w = golden_tensor_get(g, "weights"), *cl = golden_tensor_get(g, "context_lens"),
                      *bt = golden_tensor_get(g, "block_table"), *lg = golden_tensor_get(g, "logits");
  double bs, stride;
  golden_param_num(g, "block_size", &bs);
  golden_param_num(g, "block_stride", &stride);
  int64_t B = q->shape[0], nn = q->shape[1], R = B * nn, L = lg->shape[1];
  float *got = malloc(lg->nbytes);
  for (int64_t i = 0; i < lg->nelem; i++)
    got[i] = NAN;
  dsv4rt_buffer *qb = dev(q->data, q->nbytes), *cb = dev(kv->data, kv->nbytes), *wb = dev(w->data, w->nbytes),
                *clb = dev(cl->data, cl->nbytes), *btb = dev(bt->data, bt->nbytes), *lb = dev(got, lg->nbytes);
  dsv4rt_mqa_logits_args a = {.logits = lb, .row_len = L, .row_stride = L, .q = qb, .batch = B, .next_n = nn,
                              .cache = cb, .num_blocks = kv->shape[0], .block_size = (int64_t)bs,
                              .block_stride = (int64_t)stride, .weights = wb, .context_lens = clb, .block_table = btb,
                              .max_blocks = bt->shape[1]};
  dsv4rt_launch_opts o = {.kernel = kname, .check_contents = 1, .no_tensor_maps = no_maps};
  dsv4rt_status s = dsv4rt_paged_mqa_logits(bundle, &a, &o);
  if (!s)
    s = dsv4rt_synchronize(ctx);
  CHECK(s == DSV4RT_OK, "golden %s: %s", name, dsv4rt_last_error(ctx));
  dsv4rt_buffer_read(lb, 0, got, lg->nbytes);
  char what[128];
  snprintf(what, sizeof what, "golden %s (DeepGEMM ref_paged_mqa_logits)%s", name, no_maps ? " (no tensor maps)" : "");
  check_logits(what, got, lg->data, R, L, L, lg->tol_calc_diff);
  run_topks(what, lb, got, R, L, L, clb, cl->data);
  printf("golden %s with %s%s: checked\n", name, kname, no_maps ? " (no tensor maps)" : "");
  dsv4rt_buffer_destroy(qb), dsv4rt_buffer_destroy(cb), dsv4rt_buffer_destroy(wb), dsv4rt_buffer_destroy(clb),
      dsv4rt_buffer_destroy(btb), dsv4rt_buffer_destroy(lb);
  free(got);
  golden_close(g);
}

int main(int argc, char **argv)
{
  if (argc != 4) {
    fprintf(stderr, "usage: test_indexer BUNDLE GOLDEN_DIR opencl|cuda\n");
    return 2;
  }
  int st = harness_open(argv[3]);
  if (st)
    return st;
  if (harness_bundle(argv[1], &bundle))
    return 1;
  const char *groot = golden_root(argv[2]);
  int ran = 0;
  for (int e = 0; e < dsv4rt_bundle_count(bundle); e++) {
    kern k;
    if (!harness_kernel(bundle, e, "paged_mqa_logits", &k))
      continue;
    random_case(k.name, &k.L, k.info.heads, 3, 1, 0, k.info.matrix, 64);
    random_case(k.name, &k.L, k.info.heads, 2, 2, 0, k.info.matrix, 64);
    random_case(k.name, &k.L, k.info.heads, 2, 2, 0, k.info.matrix, 48);  /* block size not a power of two */
    random_case(k.name, &k.L, k.info.heads, 2, 1, 0, k.info.matrix, 16);  /* several blocks a 64-position step */
    random_case(k.name, &k.L, k.info.heads, 1, 2, 0, k.info.matrix, 128); /* a block over two steps */
    if (!k.info.matrix) { /* MTP: next_n 3 and 4 (the matrix form refuses them, checked in every case) */
      random_case(k.name, &k.L, k.info.heads, 2, 3, 0, 0, 64);
      random_case(k.name, &k.L, k.info.heads, 1, 4, 0, 0, 64);
    }
    random_case(k.name, &k.L, k.info.heads, 2, 1, 1, k.info.matrix, 64); /* many equal logits: ties at the threshold */
    if (k.info.matrix) { /* block sizes of 64 and 128 again on the per-thread copies (CUDA: not by tensor map) */
      case_no_maps = 1;
      random_case(k.name, &k.L, k.info.heads, 3, 1, 0, k.info.matrix, 64);
      random_case(k.name, &k.L, k.info.heads, 2, 2, 0, k.info.matrix, 128);
      case_no_maps = 0;
    }
    if (groot && k.info.heads == 64 && k.L.dim == 128 && !strcmp(k.L.name, "indexer_fp8")) { /* the fixtures' shape */
      golden(k.name, groot, "indexer_logits_n1", 0);
      golden(k.name, groot, "indexer_logits_n2", 0);
      if (k.info.matrix)
        golden(k.name, groot, "indexer_logits_n2", 1);
    }
    ran++;
  }
  CHECK(ran > 0, "the bundle has no paged_mqa_logits kernel");
  /* the fused logits_topk: rows within one chunk and over several (the
   * merge), next_n 1 and 2, a block size not a power of two, heavy ties */
  for (int e = 0; e < dsv4rt_bundle_count(bundle); e++) {
    kern k;
    if (!harness_kernel(bundle, e, "paged_mqa_logits_topk", &k))
      continue;
    int64_t K = k.info.topk, H = k.info.heads, m = k.info.matrix;
    random_case_blocks(k.name, &k.L, H, 3, 1, 0, m, 64, 40, K);
    random_case_blocks(k.name, &k.L, H, 2, 1, 0, m, 64, 300, K);
    random_case_blocks(k.name, &k.L, H, 1, 2, 0, m, 48, 200, K);
    random_case_blocks(k.name, &k.L, H, 1, 1, 1, m, 64, 200, K);
    if (!m)
      random_case_blocks(k.name, &k.L, H, 1, 3, 0, m, 64, 100, K); /* next_n 3: the portable form's */
  }
  topk_rows();
  dsv4rt_bundle_destroy(bundle);
  dsv4rt_context_destroy(ctx);
  printf("closest logits calc_diff to its tolerance: %s\n", worst_what);
  return harness_finish();
}
