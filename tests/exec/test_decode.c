/* test_decode.c -- execution tests of the sparse MLA decode kernels through
 * libdsv4rt.
 *
 *   test_decode BUNDLE GOLDEN_DIR opencl|cuda
 *
 * Every sparse_decode kernel of the bundle that the device runs (on the
 * CPU through OpenCL only the portable form; on CUDA every matrix form too,
 * in both P formats: a matrix kernel named *_bf16x2 keeps P as bf16 hi +
 * lo, any other rounds it once to bf16, as specs/ declares them), checked
 * against the double-precision reference (runtime/ref) on four sets of
 * inputs, docs/ops.md section 3 saying which bound holds on which:
 *
 *  - FlashMLA's distribution, drawn as its tests/lib.py draws it (q randn
 *    clamped to +-1, K randn / 10 clamped, softmax_scale dim^-0.55, sinks
 *    about a third +inf and a third -inf, every cache row that no valid
 *    index names NaN, block sizes 2 to 576, H 64 and 128, 1 to a few hundred
 *    tokens, lists shorter than their width with -1 holes), one draw per
 *    layout shared by that layout's kernels, and the golden fm_sparse_decode_*
 *    fixtures (made by FlashMLA's own test code) for the DSv4 layout: both
 *    held to FlashMLA's rule (its tests' check_is_allclose: a value fails
 *    when its error reaches both abs 1e-3 and rel 2.01/128 of |want| + 1e-6;
 *    the cosine diff within 5e-6; +-inf and NaN at the same places; lse abs
 *    1e-6, rel 8/65536);
 *  - the golden v4_sparse_decode_* stress fixtures (token magnitudes over five
 *    decades) and fresh random caches of realistic values for any layout
 *    (-1 entries, partial lengths, an extra cache with its own block size,
 *    sinks of +-inf, empty rows, heads not a multiple of a CTA's, split-KV
 *    as chosen, 1 and 3 splits, two decodes launched back to back): held
 *    to docs/ops.md's condition-aware bound, max(abs, rel |want|) + (u_P + n
 *    2^-24) sum_j p_j |V_j| (dsv4_check_cond_ok; the reference computes the
 *    sum), u_P the kernel's P format's unit roundoff; lse to its tolerance
 *    plus (2 sqrt(dim) + 8) 2^-24 of its conditioning (dsv4_check_lse_cond_ok).
 *    Kernels whose split-KV partials are bf16 (tile.partials) are held to
 *    the same bound: no term is added for that rounding (docs/kernels.md
 *    says why it stays inside; the fixtures also run with 3 and 8 splits).
 *
 * Outputs are poisoned (NaN) before every launch.  Exit 77 (skipped)
 * without a device.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4_check.h"
#include "dsv4_ref.h"
#include "dsv4rt.h"
#include "harness.h"
#include "golden_load.h"

static dsv4rt_bundle *bundle;
static int on_cuda; /* more and larger cases where the device is a GPU */

#define OUT_ABS 1e-3
#define OUT_REL (2.01 / 128)
#define OUT_COS 5e-6
#define LSE_ABS 1e-6
#define LSE_REL (8.0 / 65536)

/* The unit roundoff of a kernel's P for the P V product: the matrix forms
 * round P to bf16 (2^-8) or keep it as bf16 hi + lo (2^-16, the *_bf16x2
 * kernels; the bundle does not record the format, the names do); the
 * portable form keeps fp32 weights from the target's exp2, taken as a few
 * fp32 ulps.  A launch without a kernel name (unnamed) runs the kernel
 * the runtime picks, a matrix kernel of k's layout where the device has
 * one: the coarsest format, bf16's. */
static double p_roundoff(const kern *k, int unnamed)
{
  size_t n = strlen(k->name);
  if (unnamed)
    return 0x1p-8;
  if (!k->info.matrix)
    return 0x1p-21;
  return n > 7 && !strcmp(k->name + n - 7, "_bf16x2") ? 0x1p-16 : 0x1p-8;
}

/* A cache of realistic values for any layout: finite e4m3 codes, bf16 in
 * [-2, 2), group scales 2^-9 .. 2^-5 (dsv4_check.c). */
static uint8_t *make_cache(const dsv4_layout *L, int64_t nb, int64_t bs, int64_t stride)
{
  return dsv4_check_random_cache(&rng, L, nb, bs, stride, 2.0f);
}

/* ---- the comparison ---- */

/* How outputs are judged: FlashMLA's rule (its tests' check_is_allclose,
 * not torch.allclose's looser abs + rel |want|: a value fails when its
 * error reaches both abs_tol and rel_tol (|want| + 1e-6); +inf, -inf and
 * NaN must sit at the same places in both, and count as 0 after that;
 * where cos_tol >= 0, the cosine diff 1 - 2 sum(got want) / sum(got^2 +
 * want^2) in double, 0 when want is all but zero, within it), or, where
 * pv_abs is given, the condition-aware bound of dsv4_check_cond_ok for
 * element i with n_valid[i / per_token] entries and pv_abs[i]. */
typedef struct {
  double abs_tol, rel_tol, cos_tol;
  const float *pv_abs;    /* NULL: FlashMLA's rule */
  const int64_t *n_valid; /* per token */
  size_t per_token;       /* values a token */
  double u_p;
  int lse_dim; /* > 0: the values are lse and pv_abs its lse_abs (dsv4_check_lse_cond_ok, dim lse_dim) */
} rule;

static int anomaly(float v) { return isnan(v) ? 3 : isinf(v) ? (v > 0 ? 1 : 2) : 0; }

static void close_enough(const char *what, const float *got, const float *want, size_t n, const rule *r)
{
  size_t bad = 0, first = 0;
  double gw = 0, gg_ww = 0, ww = 0, worst = 0;
  for (size_t i = 0; i < n; i++) {
    int ag = anomaly(got[i]), aw = anomaly(want[i]);
    double g = ag ? 0.0 : got[i], w = aw ? 0.0 : want[i], err = fabs(g - w);
    double lim = fmax(r->abs_tol, r->rel_tol * (fabs(w) + 1e-6));
    int ok;
    if (r->pv_abs) { /* the condition-aware bounds (dsv4_check_cond_ok / dsv4_check_lse_cond_ok) */
      lim = r->lse_dim > 0
                ? dsv4_check_lse_cond_bound(w, r->abs_tol, r->rel_tol, r->lse_dim, r->pv_abs[i])
                : dsv4_check_cond_bound(w, r->abs_tol, r->rel_tol, r->u_p, r->n_valid[i / r->per_token], r->pv_abs[i]);
      ok = ag == aw && err < lim;
    } else
      ok = ag == aw && dsv4_check_flashmla_ok(err, w, r->abs_tol, r->rel_tol);
    if (ag == aw && err / lim > worst)
      worst = err / lim;
    if (!ok && !bad++)
      first = i;
    gw += g * w, gg_ww += g * g + w * w, ww += w * w;
  }
  CHECK(bad == 0, "%s: %zu of %zu values outside %s; first at %zu: got %.9g want %.9g", what, bad, n,
        r->pv_abs ? "the condition-aware bound" : "FlashMLA's tolerance", first, bad ? got[first] : 0,
        bad ? want[first] : 0);
  double cos_diff = ww < 1e-12 ? 0.0 : 1.0 - 2.0 * gw / gg_ww;
  CHECK(r->cos_tol < 0 || fabs(cos_diff) <= r->cos_tol, "%s: cosine diff %.3g above %.3g", what, cos_diff, r->cos_tol);
  if (getenv("DSV4_VERBOSE"))
    printf("  %s: worst error / bound %.3g, cosine diff %.3g\n", what, worst, cos_diff);
}

/* ---- one decode's inputs, reference and device buffers ---- */

typedef struct {
  uint8_t *cache;
  int64_t nb, bs, stride;
  int32_t *idx, *lens;
  int64_t topk;
} dlist;

typedef struct {
  const dsv4_layout *L;
  int V;
  int64_t T, H;
  dlist m, x; /* main and extra list (x.topk 0 or x.cache NULL: none) */
  uint16_t *q;
  float *sink, scale, ts;
  /* what the kernel's output is held to */
  const uint16_t *want;
  const float *lwant;
  float *pv_abs;  /* sum_j p_j |V_j| (the reference's) */
  float *lse_abs; /* lse's counterpart (dsv4_ref_sparse_decode_cond) */
  int64_t *n_valid;
  int owned; /* 1: the host arrays above are this case's (freed with it) */
  /* device */
  dsv4rt_buffer *qb, *cb, *ib, *lb, *xcb, *xib, *xlb, *sb, *ob, *lseb;
  uint16_t *got;
  float *lgot, *fo, *fw;
} dcase;

static int64_t nout(const dcase *c) { return c->T * c->H * c->V; }

/* The reference's output (into want / lwant unless keep_want) and the
 * condition-aware bound's sums; 0 on success. */
static int reference(dcase *c, int keep_want)
{
  int64_t n = nout(c);
  uint16_t *o = malloc((size_t)n * 2 + 2);
  float *l = malloc((size_t)(c->T * c->H) * 4 + 4);
  c->pv_abs = malloc((size_t)n * 4 + 4);
  c->n_valid = malloc((size_t)c->T * 8 + 8);
  c->lse_abs = malloc((size_t)(c->T * c->H) * 4 + 4);
  int has_x = c->x.cache && c->x.topk;
  int rc = dsv4_ref_sparse_decode_cond(
      c->L, c->V, c->q, c->T, c->H, c->m.cache, c->m.nb, c->m.bs, c->m.stride, c->m.idx, c->m.lens, c->m.topk,
      has_x ? c->x.cache : NULL, c->x.nb, c->x.bs, c->x.stride, has_x ? c->x.idx : NULL, has_x ? c->x.lens : NULL,
      has_x ? c->x.topk : 0, c->sink, c->scale, c->ts, o, l, c->pv_abs, c->n_valid, c->lse_abs);
  if (keep_want)
    free(o), free(l);
  else
    c->want = o, c->lwant = l;
  return rc;
}

/* Device copies of the inputs and room for the outputs. */
static void upload(dcase *c)
{
  int64_t n = nout(c), D = c->L->dim;
  int has_x = c->x.cache && c->x.topk;
  c->qb = dev(c->q, (size_t)(c->T * c->H * D) * 2);
  c->cb = dev(c->m.cache, (size_t)(c->m.nb * c->m.stride));
  c->ib = dev(c->m.idx, (size_t)(c->T * c->m.topk) * 4);
  c->lb = dev(c->m.lens, (size_t)c->T * 4);
  c->xcb = has_x ? dev(c->x.cache, (size_t)(c->x.nb * c->x.stride)) : NULL;
  c->xib = has_x ? dev(c->x.idx, (size_t)(c->T * c->x.topk) * 4) : NULL;
  c->xlb = has_x ? dev(c->x.lens, (size_t)c->T * 4) : NULL;
  c->sb = dev(c->sink, (size_t)c->H * 4);
  c->ob = dev(NULL, (size_t)n * 2);
  c->lseb = dev(NULL, (size_t)(c->T * c->H) * 4);
  c->got = malloc((size_t)n * 2 + 2);
  c->lgot = malloc((size_t)(c->T * c->H) * 4 + 4);
  c->fo = malloc((size_t)n * 4 + 4);
  c->fw = malloc((size_t)n * 4 + 4);
}

static void dcase_free(dcase *c)
{
  dsv4rt_buffer_destroy(c->qb), dsv4rt_buffer_destroy(c->cb), dsv4rt_buffer_destroy(c->ib),
      dsv4rt_buffer_destroy(c->lb), dsv4rt_buffer_destroy(c->xcb), dsv4rt_buffer_destroy(c->xib),
      dsv4rt_buffer_destroy(c->xlb), dsv4rt_buffer_destroy(c->sb), dsv4rt_buffer_destroy(c->ob),
      dsv4rt_buffer_destroy(c->lseb);
  free(c->got), free(c->lgot), free(c->fo), free(c->fw), free(c->pv_abs), free(c->n_valid), free(c->lse_abs);
  if (c->owned) {
    free(c->m.cache), free(c->m.idx), free(c->m.lens), free(c->x.cache), free(c->x.idx), free(c->x.lens);
    free(c->q), free(c->sink), free((void *)c->want), free((void *)c->lwant);
  }
}

static dsv4rt_sparse_decode_args launch_args(const dcase *c)
{
  int has_x = c->x.cache && c->x.topk;
  dsv4rt_sparse_decode_args a = {.out = c->ob,
                                 .lse = c->lseb,
                                 .q = c->qb,
                                 .n_tokens = c->T,
                                 .heads = c->H,
                                 .cache = c->cb,
                                 .num_blocks = c->m.nb,
                                 .block_size = c->m.bs,
                                 .block_stride = c->m.stride,
                                 .indices = c->ib,
                                 .lens = c->lb,
                                 .topk = c->m.topk,
                                 .extra_cache = c->xcb,
                                 .extra_num_blocks = has_x ? c->x.nb : 0,
                                 .extra_block_size = has_x ? c->x.bs : 1,
                                 .extra_block_stride = has_x ? c->x.stride : 0,
                                 .extra_indices = c->xib,
                                 .extra_lens = c->xlb,
                                 .extra_topk = has_x ? c->x.topk : 0,
                                 .attn_sink = c->sb,
                                 .softmax_scale = c->scale,
                                 .tensor_scale = c->ts};
  return a;
}

/* NaN in every output and lse value, on the device. */
static void poison(dcase *c)
{
  size_t n = (size_t)nout(c), nl = (size_t)(c->T * c->H);
  dsv4_check_fill16(c->got, n, 0x7F81);
  for (size_t i = 0; i < nl; i++)
    c->lgot[i] = NAN;
  dsv4rt_buffer_write(c->ob, 0, c->got, n * 2);
  dsv4rt_buffer_write(c->lseb, 0, c->lgot, nl * 4);
}

/* Hold the outputs read back (got, lgot) to r (out) and lse's tolerance. */
static void compare_outputs(const char *label, dcase *c, const rule *r)
{
  size_t n = (size_t)nout(c), nl = (size_t)(c->T * c->H);
  for (size_t i = 0; i < n; i++)
    c->fo[i] = dsv4_ref_bf16_to_f32(c->got[i]), c->fw[i] = dsv4_ref_bf16_to_f32(c->want[i]);
  char what[320];
  snprintf(what, sizeof what, "%s: out", label);
  close_enough(what, c->fo, c->fw, n, r);
  snprintf(what, sizeof what, "%s: lse", label);
  rule lr = {LSE_ABS, LSE_REL, -1, NULL, NULL, 1, 0, 0};
  if (r->pv_abs) /* the condition-aware inputs: lse's own bound (docs/ops.md's fixed one cannot hold there) */
    lr.pv_abs = c->lse_abs, lr.lse_dim = c->L->dim;
  close_enough(what, c->lgot, c->lwant, nl, &lr);
}

/* Read the outputs back and hold them to r (out) and lse's tolerance. */
static void check_outputs(const char *label, dcase *c, const rule *r)
{
  dsv4rt_buffer_read(c->ob, 0, c->got, (size_t)nout(c) * 2);
  dsv4rt_buffer_read(c->lseb, 0, c->lgot, (size_t)(c->T * c->H) * 4);
  compare_outputs(label, c, r);
}

/* Kernel k (NULL name: the runtime's choice) on case c with `splits`,
 * outputs poisoned first, held to FlashMLA's rule (cond 0) or the
 * condition-aware bound at k's P format (cond 1). */
static void run_case(const kern *k, const char *name, dcase *c, int splits, int cond, const char *what)
{
  poison(c);
  dsv4rt_sparse_decode_args a = launch_args(c);
  dsv4rt_launch_opts o = {.kernel = name, .check_contents = 1, .splits = splits};
  dsv4rt_status s = dsv4rt_sparse_decode(bundle, &a, &o);
  if (!s)
    s = dsv4rt_synchronize(ctx);
  char label[288];
  snprintf(label, sizeof label, "%s%s, %s, splits %d", name ? "" : "unnamed, layout of ", k->name, what, splits);
  CHECK(s == DSV4RT_OK, "%s: launch: %s", label, dsv4rt_last_error(ctx));
  if (s)
    return;
  rule r = {OUT_ABS, OUT_REL, OUT_COS, NULL, NULL, (size_t)(c->H * c->V), p_roundoff(k, !name), 0};
  if (cond)
    r.cos_tol = -1, r.pv_abs = c->pv_abs, r.n_valid = c->n_valid;
  check_outputs(label, c, &r);
}

/* ---- realistic random caches, any layout (the condition-aware bound) ---- */

/* One random case, a main list of topk entries; unnamed: launch with no
 * kernel name, so the runtime picks (the warp-matrix kernel of k's layout
 * where the device runs one).  Matrix kernels run with the split-KV count
 * the runtime chooses, 1 and 3, the last with a second decode (another q)
 * launched right behind it with no synchronization between them (the
 * matrix forms' kernels may start before the one before them ends: they
 * share the split-KV work space), checked too. */
/* Case c: random inputs of kernel k's layout (the lengths equal within
 * each run of `tie` tokens: a batch entry's, as FlashMLA's topk_length),
 * its reference output, and its device buffers. */
static void make_random(const kern *k, int64_t T, int64_t H, int with_extra, int64_t xbs, int64_t topk, int64_t tie,
                        dcase *out)
{
  const dsv4_layout *L = &k->L;
  int D = L->dim;
  dcase c = {.L = L, .V = k->info.v_dim, .T = T, .H = H, .owned = 1, .scale = 1.0f / sqrtf((float)D), .ts = 0.0371f};
  c.m.bs = 64, c.m.nb = 24, c.m.stride = (dsv4_layout_min_block_bytes(L, c.m.bs) + 1024 + 15) / 16 * 16;
  c.m.topk = topk;
  c.x.bs = xbs, c.x.nb = with_extra ? (xbs == 2 ? 300 : 24) : 0;
  c.x.stride = with_extra ? (dsv4_layout_min_block_bytes(L, xbs) + 15) / 16 * 16 : 0;
  c.x.topk = with_extra ? 256 : 0;
  c.m.cache = make_cache(L, c.m.nb, c.m.bs, c.m.stride);
  c.x.cache = with_extra ? make_cache(L, c.x.nb, c.x.bs, c.x.stride) : NULL;
  c.q = malloc((size_t)(T * H * D) * 2);
  for (int64_t i = 0; i < T * H * D; i++)
    c.q[i] = dsv4_ref_f32_to_bf16((rnd01() - 0.5f) * 2.0f);
  c.m.idx = malloc((size_t)(T * topk) * 4 + 4), c.m.lens = malloc((size_t)T * 4);
  c.x.idx = malloc((size_t)(T * c.x.topk) * 4 + 4), c.x.lens = malloc((size_t)T * 4);
  for (int64_t t = 0; t < T; t++) {
    int u = (int)dsv4_rng_range(&rng, 0, 7);
    /* empty, a window of fewer than topk positions, or full */
    c.m.lens[t] = u == 0 || !topk ? 0 : u == 1 ? (int32_t)dsv4_rng_range(&rng, 1, topk - 1) : (int32_t)topk;
    c.x.lens[t] = (int32_t)dsv4_rng_range(&rng, 0, c.x.topk);
    for (int64_t j = 0; j < topk; j++)
      c.m.idx[t * topk + j] = j < c.m.lens[t] && (u != 2) ? (int32_t)dsv4_rng_range(&rng, 0, c.m.nb * c.m.bs - 1) : -1;
    for (int64_t j = 0; j < c.x.topk; j++)
      c.x.idx[t * c.x.topk + j] =
          dsv4_rng_range(&rng, 0, 9) ? (int32_t)dsv4_rng_range(&rng, 0, c.x.nb * c.x.bs - 1) : -1;
  }
  c.sink = malloc((size_t)H * 4);
  for (int64_t h = 0; h < H; h++) {
    int u = (int)dsv4_rng_range(&rng, 0, 9);
    c.sink[h] = u == 0 ? INFINITY : u == 1 ? -INFINITY : (rnd01() - 0.5f) * 8.0f;
  }
  for (int64_t t = 0; t < T; t++)
    c.m.lens[t] = c.m.lens[t - t % tie], c.x.lens[t] = c.x.lens[t - t % tie];
  CHECK(reference(&c, 0) == 0, "%s: reference refused the inputs", k->name);
  upload(&c);
  *out = c;
}

static void random_case_ex(const kern *k, int64_t T, int64_t H, int with_extra, int64_t xbs, int unnamed, int64_t topk)
{
  int D = k->L.dim;
  dcase c;
  make_random(k, T, H, with_extra, xbs, topk, 1, &c);
  /* the second decode: another q, its own outputs */
  dcase c2 = c;
  c2.owned = 0;
  c2.q = malloc((size_t)(T * H * D) * 2);
  for (int64_t i = 0; i < T * H * D; i++)
    c2.q[i] = dsv4_ref_f32_to_bf16((rnd01() - 0.5f) * 2.0f);
  CHECK(reference(&c2, 0) == 0, "%s: reference refused the inputs", k->name);
  c2.qb = dev(c2.q, (size_t)(T * H * D) * 2), c2.ob = dev(NULL, (size_t)nout(&c) * 2),
  c2.lseb = dev(NULL, (size_t)(T * H) * 4);
  c2.got = malloc((size_t)nout(&c) * 2 + 2), c2.lgot = malloc((size_t)(T * H) * 4 + 4);
  static const int splits[] = {0, 1, 3};
  int runs = k->info.matrix ? 3 : 1;
  char what[128];
  snprintf(what, sizeof what, "realistic random T=%lld H=%lld extra=%s topk=%lld", (long long)T, (long long)H,
           with_extra ? (xbs == 2 ? "bs 2" : "bs 64") : "none", (long long)topk);
  rule r = {OUT_ABS, OUT_REL, -1, c.pv_abs, c.n_valid, (size_t)(H * c.V), p_roundoff(k, unnamed), 0};
  for (int si = 0; si < runs; si++) {
    const char *name = unnamed ? NULL : k->name;
    if (si < runs - 1) {
      run_case(k, name, &c, splits[si], 1, what);
      continue;
    }
    poison(&c), poison(&c2);
    dsv4rt_sparse_decode_args a = launch_args(&c), a2 = launch_args(&c2);
    dsv4rt_launch_opts o = {.kernel = name, .check_contents = 1, .splits = splits[si]};
    dsv4rt_status s = dsv4rt_sparse_decode(bundle, &a, &o);
    if (!s)
      s = dsv4rt_sparse_decode(bundle, &a2, &o);
    if (!s)
      s = dsv4rt_synchronize(ctx);
    char label[288];
    snprintf(label, sizeof label, "%s%s, %s, splits %d", unnamed ? "unnamed, layout of " : "", k->name, what,
             splits[si]);
    CHECK(s == DSV4RT_OK, "%s: launch: %s", label, dsv4rt_last_error(ctx));
    if (s)
      continue;
    check_outputs(label, &c, &r);
    strncat(label, ", the decode launched right behind", sizeof label - strlen(label) - 1);
    c2.fo = c.fo, c2.fw = c.fw;
    rule r2 = r;
    r2.pv_abs = c2.pv_abs, r2.n_valid = c2.n_valid;
    check_outputs(label, &c2, &r2);
  }
  dsv4rt_buffer_destroy(c2.qb), dsv4rt_buffer_destroy(c2.ob), dsv4rt_buffer_destroy(c2.lseb);
  free(c2.q), free((void *)c2.want), free((void *)c2.lwant), free(c2.pv_abs), free(c2.n_valid), free(c2.lse_abs),
      free(c2.got), free(c2.lgot);
  dcase_free(&c);
}

/* ---- strided, batched arguments (FlashMLA's views) ---- */

#define OUT_GAP 0x1234u     /* what out's gaps hold (bf16 bits) */
#define LSE_GAP 0x12345678u /* and lse's (f32 bits) */

/* One token-major argument laid out at strides st (elements) as [B, SQ,
 * (H,) inner] in a buffer of `total` elements of `size` bytes: where row
 * (b, s, h) starts. */
static int64_t at3(const int64_t *st, int64_t t, int64_t SQ, int64_t h)
{
  return t / SQ * st[0] + t % SQ * st[1] + h * st[2];
}

/* Case c (lengths tied within batch entries of SQ tokens) launched through
 * strided views the way FlashMLA's tests hand them over: q [B, SQ, H, D]
 * with every dim padded, the index lists' rows padded, the main list's
 * lengths one a batch entry ([B], strides {1, 0}), the extra list's
 * [B, SQ] padded, out [B, SQ, H, V] in head-major order with gaps, lse
 * [B, H, SQ] (FlashMLA's).  Every gap holds what a misaddressing kernel
 * would visibly use: NaN in q, valid slots in the lists, valid lengths;
 * out's and lse's gaps a sentinel that must survive.  The outputs are
 * gathered back and held to r. */
static void run_strided(const kern *k, const char *name, dcase *c, int64_t SQ, int splits, const char *what,
                        const rule *r)
{
  int64_t T = c->T, H = c->H, D = c->L->dim, V = c->V, B = T / SQ, tk = c->m.topk, xtk = c->x.topk;
  int has_x = c->x.cache && xtk;
  int64_t qs[3], os[3], ls[3], is[3] = {0, 0, 0}, xs[3] = {0, 0, 0}, xl[3] = {2 * SQ + 1, 2, 0}, ml[3] = {1, 0, 0};
  qs[2] = D + 8, qs[1] = (H + 1) * qs[2], qs[0] = (SQ + 1) * qs[1];
  os[1] = V + 8, os[2] = SQ * os[1] + 8, os[0] = H * os[2] + 16;
  ls[1] = 1, ls[2] = SQ, ls[0] = H * SQ + 5;
  is[1] = tk + 3, is[0] = (SQ + 1) * is[1];
  xs[1] = xtk + 5, xs[0] = SQ * xs[1] + 7;
  int64_t nq = B * qs[0], no = B * os[0], nl = B * ls[0], ni = B * is[0] + 1, nx = B * xs[0] + 1, nxl = B * xl[0];
  uint16_t *q = malloc((size_t)nq * 2), *o = malloc((size_t)no * 2);
  int32_t *ix = malloc((size_t)ni * 4), *xx = malloc((size_t)nx * 4), *mlen = malloc((size_t)B * 4),
          *xlen = malloc((size_t)nxl * 4);
  uint32_t *l = malloc((size_t)nl * 4);
  char *oreal = calloc((size_t)no, 1), *lreal = calloc((size_t)nl, 1);
  dsv4_check_fill16(q, (size_t)nq, 0x7FC0);
  for (int64_t i = 0; i < ni; i++)
    ix[i] = (int32_t)dsv4_rng_range(&rng, 0, c->m.nb * c->m.bs - 1);
  for (int64_t i = 0; i < nx; i++)
    xx[i] = has_x ? (int32_t)dsv4_rng_range(&rng, 0, c->x.nb * c->x.bs - 1) : 0;
  for (int64_t i = 0; i < nxl; i++)
    xlen[i] = (int32_t)xtk;
  dsv4_check_fill16(o, (size_t)no, OUT_GAP);
  for (int64_t i = 0; i < nl; i++)
    l[i] = LSE_GAP;
  for (int64_t t = 0; t < T; t++) {
    for (int64_t h = 0; h < H; h++) {
      memcpy(q + at3(qs, t, SQ, h), c->q + (t * H + h) * D, (size_t)D * 2);
      memset(oreal + at3(os, t, SQ, h), 1, (size_t)V);
      lreal[at3(ls, t, SQ, h)] = 1;
    }
    memcpy(ix + at3(is, t, SQ, 0), c->m.idx + t * tk, (size_t)tk * 4);
    if (has_x)
      memcpy(xx + at3(xs, t, SQ, 0), c->x.idx + t * xtk, (size_t)xtk * 4), xlen[at3(xl, t, SQ, 0)] = c->x.lens[t];
    mlen[t / SQ] = c->m.lens[t];
  }
  dsv4rt_buffer *qb = dev(q, (size_t)nq * 2), *ob = dev(o, (size_t)no * 2), *lb = dev(l, (size_t)nl * 4),
                *ib = dev(ix, (size_t)ni * 4), *mlb = dev(mlen, (size_t)B * 4),
                *xib = has_x ? dev(xx, (size_t)nx * 4) : NULL, *xlb = has_x ? dev(xlen, (size_t)nxl * 4) : NULL;
  dsv4rt_sparse_decode_args a = launch_args(c);
  a.q = qb, a.out = ob, a.lse = lb, a.indices = ib, a.lens = mlb, a.seq_q = SQ;
  memcpy(a.q_strides, qs, sizeof a.q_strides), memcpy(a.out_strides, os, sizeof a.out_strides);
  memcpy(a.lse_strides, ls, sizeof a.lse_strides), memcpy(a.indices_strides, is, sizeof a.indices_strides);
  memcpy(a.lens_strides, ml, sizeof a.lens_strides);
  if (has_x) {
    a.extra_indices = xib, a.extra_lens = xlb;
    memcpy(a.extra_indices_strides, xs, sizeof a.extra_indices_strides);
    memcpy(a.extra_lens_strides, xl, sizeof a.extra_lens_strides);
  }
  dsv4rt_launch_opts opt = {.kernel = name, .check_contents = 1, .splits = splits};
  dsv4rt_status st = dsv4rt_sparse_decode(bundle, &a, &opt);
  if (!st)
    st = dsv4rt_synchronize(ctx);
  char label[320];
  snprintf(label, sizeof label, "%s%s, %s, strided views B %lld x seq_q %lld, splits %d", name ? "" : "unnamed, ",
           k->name, what, (long long)B, (long long)SQ, splits);
  CHECK(st == DSV4RT_OK, "%s: launch: %s", label, dsv4rt_last_error(ctx));
  if (!st) {
    dsv4rt_buffer_read(ob, 0, o, (size_t)no * 2);
    dsv4rt_buffer_read(lb, 0, l, (size_t)nl * 4);
    int64_t og = 0, lg = 0;
    for (int64_t i = 0; i < no; i++)
      og += !oreal[i] && o[i] != OUT_GAP;
    for (int64_t i = 0; i < nl; i++)
      lg += !lreal[i] && l[i] != LSE_GAP;
    CHECK(og == 0 && lg == 0, "%s: wrote %lld of out's and %lld of lse's gaps", label, (long long)og, (long long)lg);
    for (int64_t t = 0; t < T; t++)
      for (int64_t h = 0; h < H; h++) {
        memcpy(c->got + (t * H + h) * V, o + at3(os, t, SQ, h), (size_t)V * 2);
        memcpy(&c->lgot[t * H + h], &l[at3(ls, t, SQ, h)], 4);
      }
    compare_outputs(label, c, r);
  }
  dsv4rt_buffer_destroy(qb), dsv4rt_buffer_destroy(ob), dsv4rt_buffer_destroy(lb), dsv4rt_buffer_destroy(ib),
      dsv4rt_buffer_destroy(mlb), dsv4rt_buffer_destroy(xib), dsv4rt_buffer_destroy(xlb);
  free(q), free(o), free(ix), free(xx), free(mlen), free(xlen), free(l), free(oreal), free(lreal);
}

/* B batch entries of SQ tokens through strided views (run_strided), with
 * the runtime's split count, and 3 splits on a matrix form (the combine
 * kernel writes out and lse then). */
static void strided_case(const kern *k, int64_t B, int64_t SQ, int64_t H, int with_extra, int64_t xbs)
{
  dcase c;
  make_random(k, B * SQ, H, with_extra, xbs, 128, SQ, &c);
  char what[96];
  snprintf(what, sizeof what, "realistic random H=%lld extra=%s", (long long)H,
           with_extra ? (xbs == 2 ? "bs 2" : "bs 64") : "none");
  rule r = {OUT_ABS, OUT_REL, -1, c.pv_abs, c.n_valid, (size_t)(H * c.V), p_roundoff(k, 0), 0};
  run_strided(k, k->name, &c, SQ, 0, what, &r);
  if (k->info.matrix)
    run_strided(k, k->name, &c, SQ, 3, what, &r);
  dcase_free(&c);
}

static void random_case(const kern *k, int64_t T, int64_t H, int with_extra, int64_t xbs)
{
  random_case_ex(k, T, H, with_extra, xbs, 0, 128);
}

/* ---- FlashMLA's distribution (its rule) ---- */

/* N(0, 1) (Box-Muller). */
static double randn(void) { return dsv4_rng_randn(&rng); }

static float clampf(double v, double lim) { return (float)(v > lim ? lim : v < -lim ? -lim : v); }

/* The per-tensor scale of FlashMLA-distribution caches of per-tensor layouts
 * (K / 2^-6 stays within e4m3's normal range). */
#define FM_TENSOR_SCALE 0x1p-6f

/* One index list of T tokens and its cache, drawn as FlashMLA's tests draw
 * them (lib.py generate_one_k_scope): tokens in requests of two (its s_q
 * = 2), each request a range of slots of its own length (normal around
 * 1.25 width, sd half that), scattered over the cache's blocks by a random
 * block table; a token takes distinct random slots of its request's range
 * (-1 where the range is shorter than the width), its length is random in
 * [0, width] (the entries past it keep their slots), and some tokens get
 * -1 holes inside their length.  K = randn / 10 clamped to +-1, quantized
 * by FlashMLA's quantizer rule (DSV4_REF_FLOOR_QUOTIENT), and every cache
 * row that no valid entry (position < length, value >= 0) names is NaN
 * (bytes 0xFF: e4m3, bf16, f32 and UE8M0 NaN or inf alike). */
static int fm_list(const dsv4_layout *L, int64_t T, int64_t width, int64_t bs, dlist *o)
{
  int64_t nreq = (T + 1) / 2, span = width + width / 4 + 8, room = 2 * span; /* a request's slots */
  o->bs = bs, o->topk = width;
  o->nb = (nreq * room + bs - 1) / bs;
  o->stride = (dsv4_layout_min_block_bytes(L, bs) + 15) / 16 * 16;
  o->cache = malloc((size_t)(o->nb * o->stride));
  o->idx = malloc((size_t)(T * width) * 4 + 4);
  o->lens = malloc((size_t)T * 4 + 4);
  int64_t *perm = malloc((size_t)o->nb * 8), *pick = malloc((size_t)room * 8);
  uint8_t *used = calloc((size_t)(o->nb * bs), 1);
  if (!o->cache || !o->idx || !o->lens || !perm || !pick || !used)
    return 1;
  memset(o->cache, 0xFF, (size_t)(o->nb * o->stride));
  for (int64_t b = 0; b < o->nb; b++)
    perm[b] = b;
  for (int64_t b = o->nb - 1; b > 0; b--) {
    int64_t j = dsv4_rng_range(&rng, 0, b), v = perm[b];
    perm[b] = perm[j], perm[j] = v;
  }
  int64_t seqlen = 0;
  for (int64_t t = 0; t < T; t++) {
    int64_t r = t / 2;
    if (t % 2 == 0) {
      double s = span + randn() * span / 2;
      seqlen = s < 1 ? 1 : s > room ? room : (int64_t)s;
    }
    for (int64_t i = 0; i < seqlen; i++)
      pick[i] = i;
    int holes = dsv4_rng_range(&rng, 0, 3) == 0;
    int64_t len = dsv4_rng_range(&rng, 0, 3) == 0 ? width : dsv4_rng_range(&rng, 0, width);
    o->lens[t] = (int32_t)len;
    for (int64_t j = 0; j < width; j++) {
      int32_t v = -1;
      if (j < seqlen) { /* a partial Fisher-Yates: distinct slots of the range */
        int64_t u = dsv4_rng_range(&rng, j, seqlen - 1), s = pick[u];
        pick[u] = pick[j], pick[j] = s;
        int64_t logical = r * room + s;
        v = (int32_t)(perm[logical / bs] * bs + logical % bs);
      }
      if (holes && j < len && dsv4_rng_range(&rng, 0, 15) == 0)
        v = -1;
      o->idx[t * width + j] = v;
      if (j < len && v >= 0)
        used[v] = 1;
    }
  }
  /* the rows in use: K drawn and quantized; per-tensor segments stored as
   * unscaled e4m3 of K / FM_TENSOR_SCALE */
  int64_t nused = 0;
  for (int64_t s = 0; s < o->nb * bs; s++)
    nused += used[s];
  uint16_t *kv = malloc((size_t)(nused * L->dim) * 2 + 2);
  int64_t *slots = malloc((size_t)nused * 8 + 8);
  dsv4_layout Lq = *L;
  for (int i = 0; i < Lq.nseg; i++)
    if (Lq.seg[i].scale_tensor)
      Lq.seg[i].scale_type = DSV4_DT_NONE, Lq.seg[i].scale_tensor = 0;
  int64_t u = 0;
  for (int64_t s = 0; s < o->nb * bs; s++) {
    if (!used[s])
      continue;
    slots[u] = s;
    for (int d = 0; d < L->dim; d++) {
      float k = clampf(randn() / 10, 1.0);
      for (int i = 0; i < L->nseg; i++)
        if (L->seg[i].scale_tensor && d >= L->seg[i].d0 && d < L->seg[i].d1)
          k /= FM_TENSOR_SCALE;
      kv[u * L->dim + d] = dsv4_ref_f32_to_bf16(k);
    }
    u++;
  }
  int rc = dsv4_ref_kv_insert_ex(&Lq, kv, nused, slots, nused, NULL, NULL, 0, 0, 0, o->cache, o->nb, bs, o->stride,
                                 DSV4_REF_FLOOR_QUOTIENT);
  free(kv), free(slots), free(perm), free(pick), free(used);
  return rc;
}

/* A FlashMLA-distribution case's shape: tokens, heads, the main list's
 * width and block size, the extra list's (width 0: none). */
typedef struct {
  int64_t T, H, width, bs, xwidth, xbs;
  int big; /* CUDA only, DSv4 layout only (the host reference's time) */
} fm_shape;

/* Every kernel of layout L (kernels ks[0..nk)) on one FlashMLA-distribution
 * draw, held to FlashMLA's rule; matrix kernels also with 3 splits. */
static void fm_random(const kern *ks, int nk, const dsv4_layout *L, const fm_shape *sh)
{
  int V = 0;
  for (int i = 0; i < nk; i++)
    if (!strcmp(ks[i].L.name, L->name))
      V = ks[i].info.v_dim;
  int D = L->dim, tensor = 0;
  for (int i = 0; i < L->nseg; i++)
    tensor |= L->seg[i].scale_tensor;
  dcase c = {.L = L,
             .V = V,
             .T = sh->T,
             .H = sh->H,
             .owned = 1,
             .scale = (float)pow(D, -0.55),
             .ts = tensor ? FM_TENSOR_SCALE : 1.0f};
  int bad = fm_list(L, sh->T, sh->width, sh->bs, &c.m) || (sh->xwidth && fm_list(L, sh->T, sh->xwidth, sh->xbs, &c.x));
  c.q = malloc((size_t)(sh->T * sh->H * D) * 2);
  for (int64_t i = 0; i < sh->T * sh->H * D; i++)
    c.q[i] = dsv4_ref_f32_to_bf16(clampf(randn(), 1.0));
  c.sink = malloc((size_t)sh->H * 4);
  for (int64_t h = 0; h < sh->H; h++) {
    double v = randn(), m = randn();
    c.sink[h] = m > 0.5 ? INFINITY : m < -0.5 ? -INFINITY : (float)v;
  }
  char what[160];
  snprintf(what, sizeof what, "FlashMLA's distribution T=%lld H=%lld width %lld bs %lld, extra width %lld bs %lld",
           (long long)sh->T, (long long)sh->H, (long long)sh->width, (long long)sh->bs, (long long)sh->xwidth,
           (long long)sh->xbs);
  CHECK(!bad && reference(&c, 0) == 0, "%s (%s): inputs or reference refused", what, L->name);
  if (bad) {
    dcase_free(&c);
    return;
  }
  upload(&c);
  for (int i = 0; i < nk; i++) {
    if (strcmp(ks[i].L.name, L->name))
      continue;
    run_case(&ks[i], ks[i].name, &c, 0, 0, what);
    if (ks[i].info.matrix && sh->T < 64)
      run_case(&ks[i], ks[i].name, &c, 3, 0, what);
  }
  dcase_free(&c);
}

/* ---- the golden fixtures (DSv4 layout) ---- */

/* A sparse_mla_decode fixture as a case (its arrays, not owned); NULL g
 * on failure (reported). */
static golden_case *golden_dcase(const dsv4_layout *L, const char *root, const char *name, dcase *c)
{
  char dir[1024], err[512];
  snprintf(dir, sizeof dir, "%s/%s", root, name);
  golden_case *g = golden_open(dir, err, sizeof err);
  CHECK(g != NULL, "golden %s: %s", dir, err);
  if (!g)
    return NULL;
  const golden_tensor *q = golden_tensor_get(g, "q"), *sc = golden_tensor_get(g, "swa_cache"),
                      *si = golden_tensor_get(g, "swa_indices"), *sl = golden_tensor_get(g, "swa_lens"),
                      *sink = golden_tensor_get(g, "attn_sink"), *xc = golden_tensor_get(g, "extra_cache"),
                      *xi = golden_tensor_get(g, "extra_indices"), *xl = golden_tensor_get(g, "extra_lens"),
                      *out = golden_tensor_get(g, "out"), *lse = golden_tensor_get(g, "lse");
  double scale = 0, bs = 0, stride = 0, xbs = 1, xstride = 0;
  int ok = q && sc && si && sl && sink && out && lse && (!xc || (xi && xl)) &&
           !golden_param_num(g, "softmax_scale", &scale) && !golden_param_num(g, "swa_block_size", &bs) &&
           !golden_param_num(g, "swa_block_stride", &stride) &&
           (!xc ||
            (!golden_param_num(g, "extra_block_size", &xbs) && !golden_param_num(g, "extra_block_stride", &xstride))) &&
           q->shape[2] == L->dim && out->tol_abs == OUT_ABS;
  CHECK(ok, "golden %s: not a DSv4 sparse_mla_decode case with FlashMLA's tolerances", name);
  if (!ok) {
    golden_close(g);
    return NULL;
  }
  *c = (dcase){.L = L,
               .V = (int)out->shape[2],
               .T = q->shape[0],
               .H = q->shape[1],
               .q = q->data,
               .sink = sink->data,
               .scale = (float)scale,
               .ts = 1.0f,
               .want = out->data,
               .lwant = lse->data};
  c->m = (dlist){sc->data, sc->shape[0], (int64_t)bs, (int64_t)stride, si->data, sl->data, si->shape[1]};
  if (xc)
    c->x = (dlist){xc->data, xc->shape[0], (int64_t)xbs, (int64_t)xstride, xi->data, xl->data, xi->shape[1]};
  CHECK(reference(c, 1) == 0, "golden %s: the reference refused the inputs", name);
  upload(c);
  return g;
}

/* Every DSv4 kernel of ks[0..nk) on fixture name: held to FlashMLA's rule
 * (fm_*) or the condition-aware bound (cond, the v4_* stress set).  Matrix
 * kernels run with the split-KV count the runtime chooses, then 3 and 8
 * (each split's partial O rounded once more where the kernel's partials
 * are bf16). */
static void golden_run(const kern *ks, int nk, const char *root, const char *name, int cond)
{
  const kern *k0 = NULL;
  for (int i = 0; i < nk && !k0; i++)
    if (!strcmp(ks[i].L.name, "fp8_ds_mla_v4"))
      k0 = &ks[i];
  if (!k0)
    return;
  dcase c;
  golden_case *g = golden_dcase(&k0->L, root, name, &c);
  if (!g)
    return;
  char what[160];
  snprintf(what, sizeof what, "golden %s (FlashMLA ref_sparse_attn_decode)", name);
  for (int i = 0; i < nk; i++)
    if (!strcmp(ks[i].L.name, "fp8_ds_mla_v4")) {
      static const int splits[] = {0, 3, 8};
      for (int si = 0; si < (ks[i].info.matrix ? 3 : 1); si++)
        run_case(&ks[i], ks[i].name, &c, splits[si], cond, what);
      printf("golden %s with %s: checked %lld outputs%s\n", name, ks[i].name, (long long)nout(&c),
             ks[i].info.matrix ? " (splits as chosen, 3 and 8)" : "");
    }
  dcase_free(&c);
  golden_close(g);
}

/* Bad arguments: refused, outputs untouched. */
static void validation(const kern *k)
{
  const dsv4_layout *L = &k->L;
  int64_t T = 2, H = 4, nb = 2, bs = 64, stride = dsv4_layout_min_block_bytes(L, bs), topk = 4;
  uint8_t *cache = make_cache(L, nb, bs, stride);
  int32_t idx[8] = {0, 1, 2, -1, 5, 6, 7, 8}, lens[2] = {4, 4};
  uint16_t *q = calloc((size_t)(T * H * L->dim), 2), *o = malloc((size_t)(T * H * k->info.v_dim) * 2);
  dsv4_check_fill16(o, (size_t)(T * H * k->info.v_dim), 0x5A5A);
  dsv4rt_buffer *qb = dev(q, (size_t)(T * H * L->dim) * 2), *cb = dev(cache, (size_t)(nb * stride)),
                *ib = dev(idx, sizeof idx), *lb = dev(lens, sizeof lens),
                *ob = dev(o, (size_t)(T * H * k->info.v_dim) * 2), *lseb = dev(NULL, (size_t)(T * H) * 4);
  dsv4rt_sparse_decode_args ok = {.out = ob,
                                  .lse = lseb,
                                  .q = qb,
                                  .n_tokens = T,
                                  .heads = H,
                                  .cache = cb,
                                  .num_blocks = nb,
                                  .block_size = bs,
                                  .block_stride = stride,
                                  .indices = ib,
                                  .lens = lb,
                                  .topk = topk,
                                  .softmax_scale = 0.04f,
                                  .tensor_scale = 1};
  dsv4rt_launch_opts opt = {.kernel = k->name, .check_contents = 1};
  dsv4rt_sparse_decode_args a;
  const char *what[16];
  dsv4rt_status st[16], want[16];
  int n = 0;
  a = ok, a.heads = 8, what[n] = "q smaller than n_tokens x heads", want[n] = DSV4RT_ERR_BUFFER_TOO_SMALL,
  st[n++] = dsv4rt_sparse_decode(bundle, &a, &opt);
  a = ok, a.topk = 5, what[n] = "indices smaller than n_tokens x topk", want[n] = DSV4RT_ERR_BUFFER_TOO_SMALL,
  st[n++] = dsv4rt_sparse_decode(bundle, &a, &opt);
  a = ok, a.softmax_scale = NAN, what[n] = "softmax_scale NaN", want[n] = DSV4RT_ERR_NOT_FINITE,
  st[n++] = dsv4rt_sparse_decode(bundle, &a, &opt);
  dsv4rt_launch_opts bad = opt;
  bad.splits = 65, what[n] = "splits 65", want[n] = DSV4RT_ERR_OUT_OF_RANGE,
  st[n++] = dsv4rt_sparse_decode(bundle, &ok, &bad);
  bad.splits = -1, what[n] = "splits -1", want[n] = DSV4RT_ERR_OUT_OF_RANGE,
  st[n++] = dsv4rt_sparse_decode(bundle, &ok, &bad);
  a = ok, a.block_stride = stride - 16, what[n] = "stride below the page", want[n] = DSV4RT_ERR_OUT_OF_RANGE,
  st[n++] = dsv4rt_sparse_decode(bundle, &a, &opt);
  a = ok, a.seq_q = 3, what[n] = "n_tokens 2 not a multiple of seq_q 3", want[n] = DSV4RT_ERR_OUT_OF_RANGE,
  st[n++] = dsv4rt_sparse_decode(bundle, &a, &opt);
  a = ok, a.q_strides[0] = 4 * L->dim + 4, a.q_strides[2] = L->dim, what[n] = "q stride off 16 bytes",
  want[n] = DSV4RT_ERR_MISALIGNED, st[n++] = dsv4rt_sparse_decode(bundle, &a, &opt);
  a = ok, a.out_strides[0] = H * k->info.v_dim, a.out_strides[2] = k->info.v_dim - 8, what[n] = "out rows overlapping",
  want[n] = DSV4RT_ERR_ALIASING, st[n++] = dsv4rt_sparse_decode(bundle, &a, &opt);
  a = ok, a.lse_strides[0] = H + 1, a.lse_strides[2] = 1, what[n] = "lse strides reaching past it",
  want[n] = DSV4RT_ERR_BUFFER_TOO_SMALL, st[n++] = dsv4rt_sparse_decode(bundle, &a, &opt);
  a = ok, a.indices_strides[0] = -4, what[n] = "a negative stride", want[n] = DSV4RT_ERR_OUT_OF_RANGE,
  st[n++] = dsv4rt_sparse_decode(bundle, &a, &opt);
  idx[5] = (int32_t)(nb * bs); /* past the cache */
  dsv4rt_buffer_write(ib, 0, idx, sizeof idx);
  what[n] = "index past the cache (checked)", want[n] = DSV4RT_ERR_BAD_CONTENTS,
  st[n++] = dsv4rt_sparse_decode(bundle, &ok, &opt);
  idx[5] = -2;
  dsv4rt_buffer_write(ib, 0, idx, sizeof idx);
  what[n] = "index -2 (checked)", want[n] = DSV4RT_ERR_BAD_CONTENTS, st[n++] = dsv4rt_sparse_decode(bundle, &ok, &opt);
  dsv4rt_synchronize(ctx);
  for (int i = 0; i < n; i++)
    CHECK(st[i] == want[i], "%s: %s: status %d (%s), expected %d", k->name, what[i], st[i], dsv4rt_status_name(st[i]),
          want[i]);
  uint16_t *back = malloc((size_t)(T * H * k->info.v_dim) * 2);
  dsv4rt_buffer_read(ob, 0, back, (size_t)(T * H * k->info.v_dim) * 2);
  CHECK(!memcmp(back, o, (size_t)(T * H * k->info.v_dim) * 2), "%s: a refused call wrote out", k->name);
  dsv4rt_buffer_destroy(qb), dsv4rt_buffer_destroy(cb), dsv4rt_buffer_destroy(ib), dsv4rt_buffer_destroy(lb),
      dsv4rt_buffer_destroy(ob), dsv4rt_buffer_destroy(lseb);
  free(cache), free(q), free(o), free(back);
}

#define MAX_KERNELS 64

int main(int argc, char **argv)
{
  if (argc != 4) {
    fprintf(stderr, "usage: test_decode BUNDLE GOLDEN_DIR opencl|cuda\n");
    return 2;
  }
  int st = harness_open(argv[3]);
  if (st)
    return st;
  on_cuda = dsv4rt_context_backend(ctx) == DSV4RT_BACKEND_CUDA;
  if (harness_bundle(argv[1], &bundle))
    return 1;
  const char *groot = golden_root(argv[2]);
  kern ks[MAX_KERNELS];
  int nk = 0;
  for (int e = 0; e < dsv4rt_bundle_count(bundle) && nk < MAX_KERNELS; e++)
    if (harness_kernel(bundle, e, "sparse_decode", &ks[nk]))
      nk++;
  CHECK(nk > 0, "the bundle has no sparse_decode kernel this device runs");

  /* each kernel: realistic random caches of its layout, bad arguments */
  for (int i = 0; i < nk; i++) {
    const kern *k = &ks[i];
    printf("kernel %s: %s form, P unit roundoff 2^%d\n", k->name, k->info.matrix ? "matrix" : "portable",
           (int)log2(p_roundoff(k, 0)));
    if (i == 0) /* also without a name (the runtime's choice keeps its layout) */
      random_case_ex(k, 3, 64, 1, 64, 1, 128);
    random_case(k, 5, 64, 1, 64);          /* C4: extra cache of 64-token pages */
    random_case(k, 3, 128, 1, 2);          /* C128: pages of 2 entries */
    random_case(k, 4, 64, 0, 64);          /* SWA only */
    random_case(k, 3, 20, 1, 64);          /* heads not a multiple of the CTA's */
    random_case(k, 3, 8, 1, 64);           /* tensor-parallel head counts: 8, 16, 32 a GPU */
    random_case(k, 3, 16, 1, 2);
    random_case(k, 3, 32, 1, 64);
    random_case(k, 2, 100, 1, 64);         /* two head groups, the second part padding */
    random_case(k, 2, 192, 0, 64);         /* three head groups (CTA pairs: the last beside a padding CTA) */
    random_case_ex(k, 2, 64, 1, 64, 0, 0); /* topk 0: the extra list alone */
    random_case_ex(k, 2, 64, 0, 64, 0, 0); /* topk 0 and no extra list: no tiles, every row empty */
    strided_case(k, 3, 2, 64, 1, 64);      /* FlashMLA's views: s_q 2 (MTP), topk_length a batch entry */
    strided_case(k, 2, 1, 20, 1, 2);       /* s_q 1, heads not a multiple of the CTA's, C128 pages */
    strided_case(k, 2, 2, 128, 0, 64);     /* SWA only, the extra list absent */
    validation(k);
  }

  /* each layout: FlashMLA's distribution, one draw for all of its kernels */
  static const fm_shape shapes[] = {
      {1, 64, 128, 2, 0, 0, 0},        /* one token, SWA only, pages of 2 */
      {3, 128, 128, 61, 576, 69, 0},   /* odd page sizes, both lists */
      {2, 64, 64, 576, 512, 256, 0},   /* large pages */
      {4, 128, 128, 64, 512, 2, 0},    /* C128: compressed pages of 2 */
      {37, 64, 128, 256, 512, 64, 1},  /* V4-Flash C4 */
      {64, 128, 128, 64, 1024, 64, 1}, /* V4-Pro C4 */
      {300, 64, 128, 256, 0, 0, 1},    /* SWA only, a few hundred tokens */
      {160, 128, 128, 64, 1024, 2, 1}, /* V4-Pro C128 in 320 CTAs, more than a GPU's processors: CTA pairs
                                          take their tokens longest first (rows.c), each exactly once */
  };
  int ncpu = 3; /* shapes on the CPU (PoCL runs the portable form slowly) */
  for (int i = 0; i < nk; i++) {
    int first = 1;
    for (int j = 0; j < i; j++)
      first &= strcmp(ks[j].L.name, ks[i].L.name) != 0;
    if (!first)
      continue;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
      if (on_cuda ? !shapes[s].big || !strcmp(ks[i].L.name, "fp8_ds_mla_v4") : (int)s < ncpu)
        fm_random(ks, nk, &ks[i].L, &shapes[s]);
  }

  if (groot) {
    static const char *const fm[] = {"fm_sparse_decode_c128_h128", "fm_sparse_decode_c4_h128",
                                     "fm_sparse_decode_c4_h64", "fm_sparse_decode_odd_blocks_h64",
                                     "fm_sparse_decode_swa_only_h128"};
    static const char *const stress[] = {"v4_sparse_decode_c128_h64", "v4_sparse_decode_c4_h128",
                                         "v4_sparse_decode_c4_h64", "v4_sparse_decode_swa_only_h64"};
    for (size_t i = 0; i < sizeof fm / sizeof *fm; i++)
      golden_run(ks, nk, groot, fm[i], 0);
    for (size_t i = 0; i < sizeof stress / sizeof *stress; i++)
      golden_run(ks, nk, groot, stress[i], 1);
  }
  dsv4rt_bundle_destroy(bundle);
  dsv4rt_context_destroy(ctx);
  return harness_finish();
}
