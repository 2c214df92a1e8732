/* test_decode_ref.c -- unit test of the host sparse MLA decode reference (dsv4_ref_sparse_decode,
 * and dsv4_ref_sparse_decode_cond's sums for docs/ops.md section 3's condition-aware bound,
 * docs/ops.md sections 3 and 8): the four golden v4_sparse_decode_* fixtures (FlashMLA's tests/ref.py) within
 * their own tolerances, and hand-made checks of the edge cases (empty rows, -1 indices, sinks of +-inf,
 * one index, the joint softmax of main + extra, v_dim, argument validation) and of the per-tensor FP8
 * fold against a direct computation.
 * Usage: test_decode_ref GOLDEN_ROOT   (e.g. /work/shared/golden).  Exit 0 on pass, 1 on any failure.
 * Random inputs are seeded from DSV4_SEED when set, else from the clock (the seed is printed). */
#include "dsv4_check.h"
#include "dsv4_ref.h"
#include "golden_load.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int n_pass, n_fail;
static dsv4_rng rng;

/* Record and print one check. */
static void check(int ok, const char *name, const char *detail)
{
  if (ok) {
    n_pass++;
    printf("PASS %s\n", name);
  } else {
    n_fail++;
    printf("FAIL %s%s%s\n", name, detail && *detail ? ": " : "", detail ? detail : "");
  }
}

/* fp32 bits (no aliasing UB), for bitwise comparisons of lse. */
static uint32_t bits_of(float f)
{
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* Exact e4m3fn value of a (non-NaN) code from its fields, independent of the library decoder. */
static double e4m3_val(unsigned c)
{
  int s = (c >> 7) & 1, e = (c >> 3) & 15, m = c & 7;
  double v = e == 0 ? ldexp((double)m, -9) : ldexp(8.0 + m, e - 10);
  return s ? -v : v;
}

/* The fixture tolerance rule: |got - want| <= abs + rel*|want|; NaN never passes, infinities must match. */
static int within(double got, double want, double ab, double rel)
{
  if (got != got || want != want)
    return 0;
  if (isinf(got) || isinf(want))
    return got == want;
  return fabs(got - want) <= ab + rel * fabs(want);
}

/* got (bf16) is a correct rounding of the exact value want: within half a bf16 ulp (2^-8 relative). */
static int bf16_rounds(uint16_t got, double want)
{
  double g = dsv4_ref_bf16_to_f32(got);
  return g == g && fabs(g - want) <= ldexp(fabs(want), -8) + 1e-38;
}

/* Uniform double in [-1, 1). */
static double urand(void)
{
  return (double)(dsv4_rng_next(&rng) >> 11) * 0x1p-52 - 1.0;
}

/* n random bf16 values, each uniform in [-amp, amp) times a random power of two in [2^-lo2, 1]. */
static void rand_bf16(uint16_t *p, int64_t n, double amp, int lo2)
{
  for (int64_t i = 0; i < n; i++)
    p[i] = dsv4_ref_f32_to_bf16((float)(urand() * amp * ldexp(1.0, -(int)dsv4_rng_range(&rng, 0, lo2))));
}

/* ---- golden fixtures ---- */

/* Tensor by name with dtype and rank checked; NULL (and a FAIL) when missing or mistyped. */
static const golden_tensor *need(const golden_case *c, const char *cname, const char *name, const char *dtype,
                                 int ndim)
{
  const golden_tensor *t = golden_tensor_get(c, name);
  char n[200];
  if (t && strcmp(t->dtype, dtype) == 0 && t->ndim == ndim)
    return t;
  snprintf(n, sizeof n, "%s: tensor %s present as %s rank %d", cname, name, dtype, ndim);
  check(0, n, t ? t->dtype : "missing");
  return NULL;
}

/* One golden case: run the reference with the DSv4 layout and hold out and lse to the case tolerances. */
static void test_golden(const char *root, const char *name)
{
  char dir[1024], err[512], cname[256], msg[400];
  dsv4_layout l = dsv4_check_layout_v4();
  golden_case *c;
  const golden_tensor *q, *sc, *si, *sl, *sk, *ec = NULL, *ei = NULL, *el = NULL, *eo, *elt;
  double scale, sbs, sst, ebs = 0, est = 0;
  int has_extra;

  snprintf(dir, sizeof dir, "%s/%s", root, name);
  c = golden_open(dir, err, sizeof err);
  snprintf(cname, sizeof cname, "%s: golden_open", name);
  check(c != NULL, cname, err);
  if (!c)
    return;
  has_extra = golden_tensor_get(c, "extra_cache") != NULL;
  q = need(c, name, "q", "bf16", 3);
  sc = need(c, name, "swa_cache", "u8", 2);
  si = need(c, name, "swa_indices", "i32", 2);
  sl = need(c, name, "swa_lens", "i32", 1);
  sk = need(c, name, "attn_sink", "f32", 1);
  eo = need(c, name, "out", "bf16", 3);
  elt = need(c, name, "lse", "f32", 2);
  if (has_extra) {
    ec = need(c, name, "extra_cache", "u8", 2);
    ei = need(c, name, "extra_indices", "i32", 2);
    el = need(c, name, "extra_lens", "i32", 1);
  }
  if (!q || !sc || !si || !sl || !sk || !eo || !elt || (has_extra && (!ec || !ei || !el)) ||
      golden_param_num(c, "softmax_scale", &scale) || golden_param_num(c, "swa_block_size", &sbs) ||
      golden_param_num(c, "swa_block_stride", &sst) ||
      (has_extra && (golden_param_num(c, "extra_block_size", &ebs) ||
                     golden_param_num(c, "extra_block_stride", &est))) ||
      !eo->has_tol || !elt->has_tol) {
    snprintf(cname, sizeof cname, "%s: tensors, params and tolerances usable", name);
    check(0, cname, "");
    golden_close(c);
    return;
  }
  int64_t T = q->shape[0], H = q->shape[1], D = q->shape[2];
  int shapes_ok = D == 512 && sc->shape[1] == (int64_t)sst && si->shape[0] == T && sl->shape[0] == T &&
                  sk->shape[0] == H && eo->shape[0] == T && eo->shape[1] == H && eo->shape[2] == 512 &&
                  elt->shape[0] == T && elt->shape[1] == H &&
                  (!has_extra || (ec->shape[1] == (int64_t)est && ei->shape[0] == T && el->shape[0] == T));
  snprintf(cname, sizeof cname, "%s: shapes agree (T %lld, H %lld, swa topk %lld, extra topk %lld)", name,
           (long long)T, (long long)H, (long long)si->shape[1], has_extra ? (long long)ei->shape[1] : 0LL);
  check(shapes_ok, cname, "");
  if (!shapes_ok) {
    golden_close(c);
    return;
  }
  uint16_t *out = malloc((size_t)(T * H * 512) * 2);
  float *lse = malloc((size_t)(T * H) * sizeof(float));
  if (!out || !lse) {
    check(0, "golden: allocation", "");
    free(out);
    free(lse);
    golden_close(c);
    return;
  }
  int rc = dsv4_ref_sparse_decode(
      &l, 512, q->data, T, H, sc->data, sc->shape[0], (int64_t)sbs, (int64_t)sst, si->data, sl->data, si->shape[1],
      has_extra ? ec->data : NULL, has_extra ? ec->shape[0] : 0, (int64_t)ebs, (int64_t)est,
      has_extra ? ei->data : NULL, has_extra ? el->data : NULL, has_extra ? ei->shape[1] : 0, sk->data,
      (float)scale, 1.0f, out, lse);
  snprintf(cname, sizeof cname, "%s: dsv4_ref_sparse_decode returns 0", name);
  check(rc == 0, cname, "");
  if (rc == 0) {
    const uint16_t *wo = eo->data;
    const float *wl = elt->data;
    int64_t n = T * H * 512, bad = 0, exact = 0, first = -1, lbad = 0, ninf = 0, lfirst = -1;
    double maxe = 0, maxr = 0, lmaxe = 0, lmaxr = 0;
    for (int64_t i = 0; i < n; i++) {
      double g = dsv4_ref_bf16_to_f32(out[i]), w = dsv4_ref_bf16_to_f32(wo[i]);
      double e = fabs(g - w), lim = eo->tol_abs + eo->tol_rel * fabs(w);
      if (!within(g, w, eo->tol_abs, eo->tol_rel) && !bad++)
        first = i;
      exact += out[i] == wo[i];
      if (e == e) {
        maxe = e > maxe ? e : maxe;
        maxr = e / lim > maxr ? e / lim : maxr;
      }
    }
    snprintf(msg, sizeof msg, "%lld of %lld outside; first at %lld", (long long)bad, (long long)n, (long long)first);
    snprintf(cname, sizeof cname,
             "%s: out within abs %g + rel %g (max abs err %.3g, worst err/tol %.3g, %lld of %lld bit-exact)", name,
             eo->tol_abs, eo->tol_rel, maxe, maxr, (long long)exact, (long long)n);
    check(bad == 0, cname, msg);
    for (int64_t i = 0; i < T * H; i++) {
      double g = lse[i], w = wl[i];
      if (!within(g, w, elt->tol_abs, elt->tol_rel) && !lbad++)
        lfirst = i;
      if (isinf(w) && g == w)
        ninf++;
      else if (isfinite(g) && isfinite(w)) {
        double e = fabs(g - w), lim = elt->tol_abs + elt->tol_rel * fabs(w);
        lmaxe = e > lmaxe ? e : lmaxe;
        lmaxr = e / lim > lmaxr ? e / lim : lmaxr;
      }
    }
    snprintf(msg, sizeof msg, "%lld of %lld outside; first at %lld (got %.9g want %.9g)", (long long)lbad,
             (long long)(T * H), (long long)lfirst, lfirst >= 0 ? (double)lse[lfirst] : 0.0,
             lfirst >= 0 ? (double)wl[lfirst] : 0.0);
    snprintf(cname, sizeof cname,
             "%s: lse within abs %g + rel %g (max abs err %.3g, worst err/tol %.3g, %lld rows +inf matched)", name,
             elt->tol_abs, elt->tol_rel, lmaxe, lmaxr, (long long)ninf);
    check(lbad == 0, cname, msg);
  }
  free(out);
  free(lse);
  golden_close(c);
}

/* ---- hand-made checks on DSv4 caches written by dsv4_ref_kv_insert ---- */

#define NS 128  /* slots in each synthetic cache */
#define DIM 512

static dsv4_layout L;                  /* dsv4_check_layout_v4() */
static uint16_t kv[NS * DIM];          /* the tokens: slot i of both caches holds kv row i */
static uint8_t *cache_a;               /* main: bs 64, stride 37440, 2 blocks */
static uint8_t *cache_b;               /* extra: bs 2, stride 1728, 64 blocks */
static uint16_t kdq[NS * DIM];         /* dsv4_ref_dequant_gather of cache_a, slot by slot */
#define A_BS 64
#define A_ST 37440
#define A_NB 2
#define B_BS 2
#define B_ST 1728
#define B_NB 64

/* Fill both caches with the same random tokens (slot i = row i) and dequantize cache_a; 0 on success. */
static int build_caches(void)
{
  int64_t slots[NS];
  int32_t idx[NS];
  L = dsv4_check_layout_v4();
  cache_a = calloc(A_NB, A_ST);
  cache_b = calloc(B_NB, B_ST);
  if (!cache_a || !cache_b)
    return 1;
  rand_bf16(kv, NS * DIM, 2.0, 6);
  for (int i = 0; i < NS; i++)
    slots[i] = i, idx[i] = i;
  if (dsv4_ref_kv_insert(&L, kv, NS, slots, NS, NULL, NULL, 0, 0, 0, cache_a, A_NB, A_BS, A_ST) ||
      dsv4_ref_kv_insert(&L, kv, NS, slots, NS, NULL, NULL, 0, 0, 0, cache_b, B_NB, B_BS, B_ST))
    return 1;
  return dsv4_ref_dequant_gather(&L, cache_a, A_NB, A_BS, A_ST, idx, NS, kdq);
}

/* Decode over cache_a only (plus cache_b as the extra cache when etopk > 0). */
static int run(int v_dim, const uint16_t *q, int64_t T, int64_t H, const int32_t *idx, const int32_t *lens,
               int64_t topk, const int32_t *eidx, const int32_t *elens, int64_t etopk, const float *sink,
               float ts, uint16_t *out, float *lse)
{
  return dsv4_ref_sparse_decode(&L, v_dim, q, T, H, cache_a, A_NB, A_BS, A_ST, idx, lens, topk,
                                etopk > 0 ? cache_b : NULL, B_NB, B_BS, B_ST, eidx, elens, etopk, sink,
                                0.044194173824159216f, ts, out, lse);
}

/* docs/ops.md 3's unnormalized form sum exp(s)K / (sum exp(s) + exp(sink)), independently, on K from dequant_gather. */
static void naive(const uint16_t *qh, const int32_t *slots, int n, double scale, const float *sink_h,
                  double *o /* [DIM] */, double *ls)
{
  double se = 0;
  for (int d = 0; d < DIM; d++)
    o[d] = 0;
  for (int j = 0; j < n; j++) {
    const uint16_t *k = kdq + (int64_t)slots[j] * DIM;
    double dot = 0, e;
    for (int d = 0; d < DIM; d++)
      dot += (double)dsv4_ref_bf16_to_f32(qh[d]) * dsv4_ref_bf16_to_f32(k[d]);
    e = exp(scale * dot);
    se += e;
    for (int d = 0; d < DIM; d++)
      o[d] += e * dsv4_ref_bf16_to_f32(k[d]);
  }
  *ls = log(se);
  for (int d = 0; d < DIM; d++)
    o[d] /= se + (sink_h ? exp((double)*sink_h) : 0.0);
}

#define T0 3
#define H0 8
#define K0 64  /* main topk */
#define E0 32  /* extra topk */

/* Random rows over both lists with finite sinks against the naive formula; empty rows and -1 rows. */
static void test_random_and_empty(void)
{
  static uint16_t q[T0 * H0 * DIM], out[T0 * H0 * DIM], out2[T0 * H0 * DIM];
  static int32_t idx[T0 * K0], eidx[T0 * E0];
  int32_t lens[T0], elens[T0];
  float sink[H0], lse[T0 * H0], lse2[T0 * H0];
  char msg[200] = "";
  int bad = 0;

  rand_bf16(q, T0 * H0 * DIM, 4.0, 2);
  for (int h = 0; h < H0; h++)
    sink[h] = (float)(urand() * 3.0);
  for (int t = 0; t < T0; t++) {
    for (int j = 0; j < K0; j++)
      idx[t * K0 + j] = (int32_t)dsv4_rng_range(&rng, -1, NS - 1); /* some -1 mixed in */
    for (int j = 0; j < E0; j++)
      eidx[t * E0 + j] = (int32_t)dsv4_rng_range(&rng, -1, NS - 1);
  }
  lens[0] = K0, elens[0] = E0;         /* full lists */
  lens[1] = 17, elens[1] = 5;          /* short lists: the rest is never read ... */
  for (int j = 17; j < K0; j++)
    idx[1 * K0 + j] = -12345;          /* ... so garbage beyond the length is fine */
  for (int j = 5; j < E0; j++)
    eidx[1 * E0 + j] = 999999;
  lens[2] = 0, elens[2] = 0;           /* empty row */
  int rc = run(DIM, q, T0, H0, idx, lens, K0, eidx, elens, E0, sink, 1.0f, out, lse);
  check(rc == 0, "random: returns 0 (garbage beyond the lengths is not validated)", "");
  for (int t = 0; t < 2 && rc == 0; t++) {
    int32_t sl[K0 + E0];
    int n = 0;
    for (int j = 0; j < lens[t]; j++)
      if (idx[t * K0 + j] != -1)
        sl[n++] = idx[t * K0 + j];
    for (int j = 0; j < elens[t]; j++)
      if (eidx[t * E0 + j] != -1)
        sl[n++] = eidx[t * E0 + j];
    for (int h = 0; h < H0; h++) {
      double o[DIM], ls;
      naive(q + (t * H0 + h) * DIM, sl, n, 0.044194173824159216f, &sink[h], o, &ls);
      for (int d = 0; d < DIM; d++)
        if (!bf16_rounds(out[(t * H0 + h) * DIM + d], o[d]) && !bad++)
          snprintf(msg, sizeof msg, "t %d h %d d %d: got %.9g want %.9g", t, h, d,
                   (double)dsv4_ref_bf16_to_f32(out[(t * H0 + h) * DIM + d]), o[d]);
      if (!within(lse[t * H0 + h], ls, 0, 1e-6) && !bad++)
        snprintf(msg, sizeof msg, "t %d h %d: lse %.9g want %.9g", t, h, (double)lse[t * H0 + h], ls);
    }
  }
  check(rc == 0 && !bad, "random main+extra with sinks: out is the correct bf16 rounding of docs/ops.md's "
        "sum exp(s)K / (sum exp(s) + exp(sink)), lse within 1e-6 rel of ln sum exp(s)", msg);

  bad = 0;
  for (int h = 0; h < H0 && rc == 0; h++) {
    for (int d = 0; d < DIM; d++)
      bad += out[(2 * H0 + h) * DIM + d] != 0;
    bad += !(isinf(lse[2 * H0 + h]) && lse[2 * H0 + h] > 0);
  }
  check(rc == 0 && !bad, "empty row (both lengths 0): out +0.0, lse +inf, finite sink ignored", "");

  /* every index -1 with full lengths, and a sink of +inf: still out 0, lse +inf */
  for (int j = 0; j < K0; j++)
    idx[2 * K0 + j] = -1;
  for (int j = 0; j < E0; j++)
    eidx[2 * E0 + j] = -1;
  lens[2] = K0, elens[2] = E0;
  for (int h = 0; h < H0; h++)
    sink[h] = h & 1 ? INFINITY : -INFINITY;
  rc = run(DIM, q, T0, H0, idx, lens, K0, eidx, elens, E0, sink, 1.0f, out2, lse2);
  bad = rc != 0;
  for (int h = 0; h < H0 && rc == 0; h++) {
    for (int d = 0; d < DIM; d++)
      bad += out2[(2 * H0 + h) * DIM + d] != 0;
    bad += !(isinf(lse2[2 * H0 + h]) && lse2[2 * H0 + h] > 0);
  }
  check(!bad, "row of -1 indices at full length: out +0.0, lse +inf, with sinks +inf and -inf", "");

  /* sink +inf: out exactly 0 and lse unchanged; sink -inf: identical to no sink */
  float sp[H0], sm[H0];
  static uint16_t o_none[T0 * H0 * DIM], o_p[T0 * H0 * DIM], o_m[T0 * H0 * DIM];
  float l_none[T0 * H0], l_p[T0 * H0], l_m[T0 * H0];
  lens[2] = 0, elens[2] = 0;
  for (int h = 0; h < H0; h++)
    sp[h] = INFINITY, sm[h] = -INFINITY;
  rc = run(DIM, q, T0, H0, idx, lens, K0, eidx, elens, E0, NULL, 1.0f, o_none, l_none) |
       run(DIM, q, T0, H0, idx, lens, K0, eidx, elens, E0, sp, 1.0f, o_p, l_p) |
       run(DIM, q, T0, H0, idx, lens, K0, eidx, elens, E0, sm, 1.0f, o_m, l_m);
  bad = 0;
  for (int64_t i = 0; i < T0 * H0 * DIM; i++)
    bad += dsv4_ref_bf16_to_f32(o_p[i]) != 0.0f;
  for (int64_t i = 0; i < 2 * H0; i++) /* rows 0 and 1 have indices */
    bad += bits_of(l_p[i]) != bits_of(l_none[i]) || !isfinite(l_p[i]);
  check(rc == 0 && !bad, "sink +inf: out exactly 0 everywhere, lse finite and equal to the no-sink lse", "");
  check(rc == 0 && !memcmp(o_m, o_none, sizeof o_m) && !memcmp(l_m, l_none, sizeof l_m),
        "sink -inf: out and lse bit-identical to attn_sink NULL", "");

  /* v_dim 448: the first 448 values of the 512-wide output */
  static uint16_t o448[T0 * H0 * 448];
  float l448[T0 * H0];
  rc = run(448, q, T0, H0, idx, lens, K0, eidx, elens, E0, NULL, 1.0f, o448, l448);
  bad = rc != 0 || memcmp(l448, l_none, sizeof l448);
  for (int64_t r = 0; r < T0 * H0 && !bad; r++)
    bad = memcmp(o448 + r * 448, o_none + r * DIM, 448 * 2) != 0;
  check(!bad, "v_dim 448: out [T,H,448] equals the first 448 of v_dim 512, same lse", "");

  /* tensor_scale is unused by a layout without per-tensor segments */
  rc = run(DIM, q, T0, H0, idx, lens, K0, eidx, elens, E0, NULL, 3.0f, out2, lse2);
  check(rc == 0 && !memcmp(out2, o_none, sizeof out2) && !memcmp(lse2, l_none, sizeof lse2),
        "DSv4 layout: tensor_scale 3 gives the same bits as tensor_scale 1", "");
}

/* One valid index: weight exactly 1, so out is V itself and lse is s itself. */
static void test_one_index(void)
{
  static uint16_t q[H0 * DIM], out[H0 * DIM];
  int32_t idx[3] = {-1, 77, -1}, lens[1] = {3};
  float lse[H0];
  int bad = 0;
  char msg[200] = "";
  rand_bf16(q, H0 * DIM, 4.0, 2);
  int rc = run(DIM, q, 1, H0, idx, lens, 3, NULL, NULL, 0, NULL, 1.0f, out, lse);
  for (int h = 0; h < H0 && rc == 0; h++) {
    double dot = 0, s;
    for (int d = 0; d < DIM; d++)
      dot += (double)dsv4_ref_bf16_to_f32(q[h * DIM + d]) * dsv4_ref_bf16_to_f32(kdq[77 * DIM + d]);
    s = (double)0.044194173824159216f * dot;
    for (int d = 0; d < DIM; d++) /* numeric equality: a -0.0 in V comes out as +0.0 (0 + 1*-0) */
      if (dsv4_ref_bf16_to_f32(out[h * DIM + d]) != dsv4_ref_bf16_to_f32(kdq[77 * DIM + d]) && !bad++)
        snprintf(msg, sizeof msg, "head %d dim %d: out %04x, dequantized slot %04x", h, d, out[h * DIM + d],
                 kdq[77 * DIM + d]);
    if (bits_of(lse[h]) != bits_of((float)s) && !bad++)
      snprintf(msg, sizeof msg, "head %d: lse %.9g, s %.9g", h, (double)lse[h], s);
  }
  check(rc == 0 && !bad, "one valid index (among -1s): out == dequantized V exactly, lse == fp32(s)", msg);
}

/* The joint softmax over main + extra equals one list holding both (extra slot i = main slot i). */
static void test_joint(void)
{
  static uint16_t q[2 * H0 * DIM], oj[2 * H0 * DIM], os[2 * H0 * DIM];
  int32_t idx[2 * K0], eidx[2 * E0], all[2 * (K0 + E0)], lens[2] = {40, K0}, elens[2] = {E0, 9},
                                                              alens[2];
  float sink[H0], lj[2 * H0], lsg[2 * H0];
  int bad = 0, exact = 0;
  char msg[200] = "";
  rand_bf16(q, 2 * H0 * DIM, 4.0, 2);
  for (int h = 0; h < H0; h++)
    sink[h] = (float)(urand() * 2.0);
  for (int t = 0; t < 2; t++) {
    int n = 0;
    for (int j = 0; j < K0; j++)
      idx[t * K0 + j] = j % 7 == 3 ? -1 : (int32_t)dsv4_rng_range(&rng, 0, NS - 1);
    for (int j = 0; j < E0; j++)
      eidx[t * E0 + j] = j % 5 == 1 ? -1 : (int32_t)dsv4_rng_range(&rng, 0, NS - 1);
    for (int j = 0; j < lens[t]; j++)
      all[t * (K0 + E0) + n++] = idx[t * K0 + j];
    for (int j = 0; j < elens[t]; j++)
      all[t * (K0 + E0) + n++] = eidx[t * E0 + j];
    alens[t] = n;
    for (; n < K0 + E0; n++)
      all[t * (K0 + E0) + n] = -1;
  }
  int rc = run(DIM, q, 2, H0, idx, lens, K0, eidx, elens, E0, sink, 1.0f, oj, lj);
  rc |= run(DIM, q, 2, H0, all, alens, K0 + E0, NULL, NULL, 0, sink, 1.0f, os, lsg);
  for (int64_t i = 0; i < 2 * H0 * DIM && rc == 0; i++) {
    double a = dsv4_ref_bf16_to_f32(oj[i]), b = dsv4_ref_bf16_to_f32(os[i]);
    exact += oj[i] == os[i];
    if (fabs(a - b) > ldexp(fabs(b), -7) && !bad++) /* one bf16 ulp at most (summation order) */
      snprintf(msg, sizeof msg, "out[%lld] %.9g vs %.9g", (long long)i, a, b);
  }
  for (int i = 0; i < 2 * H0 && rc == 0; i++)
    if (!within(lj[i], lsg[i], 0, 1e-6) && !bad++)
      snprintf(msg, sizeof msg, "lse[%d] %.9g vs %.9g", i, (double)lj[i], (double)lsg[i]);
  snprintf(msg + strlen(msg), sizeof msg - strlen(msg), "%s%d of %d out bit-exact", msg[0] ? "; " : "", exact,
           2 * H0 * DIM);
  check(rc == 0 && !bad, "joint softmax: main (bs 64) + extra (bs 2) equals one list holding both", msg);
}

/* Validation: a participating index < -1 or past the cache fails with nothing written. */
static void test_validation(void)
{
  static uint16_t q[H0 * DIM], out[H0 * DIM];
  int32_t idx[4] = {1, 2, -2, 3}, lens[1] = {4}, eidx[2] = {5, 6}, elens[1] = {2};
  float lse[H0];
  int rc, bad;
  rand_bf16(q, H0 * DIM, 1.0, 0);
  {
    int cases_bad = 0;
    char msg[200] = "";
    struct {
      const char *what;
      int32_t i2, len, e1, v_dim, elen;
      int64_t topk;
    } cs[] = {
        {"index -2 at a participating position", -2, 4, 6, DIM, 2, 4},
        {"main slot == num_blocks*bs", A_NB * A_BS, 4, 6, DIM, 2, 4},
        {"extra slot == extra num_blocks*bs", 2, 4, B_NB * B_BS, DIM, 2, 4},
        {"extra index -5", 2, 4, -5, DIM, 2, 4},
        {"v_dim 0", 2, 4, 6, 0, 2, 4},
        {"v_dim 513", 2, 4, 6, DIM + 1, 2, 4},
        {"topk -1", 2, 4, 6, DIM, 2, -1},
    };
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
      for (int i = 0; i < H0 * DIM; i++)
        out[i] = 0x1234;
      for (int i = 0; i < H0; i++) {
        uint32_t u = 0x12345678u;
        memcpy(&lse[i], &u, 4);
      }
      idx[2] = cs[k].i2, lens[0] = cs[k].len, eidx[1] = cs[k].e1, elens[0] = cs[k].elen;
      rc = run(cs[k].v_dim, q, 1, H0, idx, lens, cs[k].topk, eidx, elens, 2, NULL, 1.0f, out, lse);
      bad = 0;
      for (int i = 0; i < H0 * DIM; i++)
        bad += out[i] != 0x1234;
      for (int i = 0; i < H0; i++)
        bad += bits_of(lse[i]) != 0x12345678u;
      if ((rc == 0 || bad) && !cases_bad++)
        snprintf(msg, sizeof msg, "%s: rc %d, %d values written", cs[k].what, rc, bad);
    }
    check(!cases_bad, "validation: index < -1, slots past either cache, bad v_dim/topk fail writing nothing",
          msg);
  }
  idx[2] = -2, lens[0] = 2;         /* the -2 sits past the main length ... */
  eidx[1] = 100000, elens[0] = 1;   /* ... and the bad extra slot past the extra length */
  rc = run(DIM, q, 1, H0, idx, lens, 4, eidx, elens, 2, NULL, 1.0f, out, lse);
  check(rc == 0, "validation: -2 past the length and a bad extra slot past extra_lens are not read", "");
  elens[0] = 2; /* would read the bad extra slot, but extra == NULL */
  rc = dsv4_ref_sparse_decode(&L, DIM, q, 1, H0, cache_a, A_NB, A_BS, A_ST, idx, lens, 4, NULL, 0, 0, 0, eidx,
                              elens, 2, NULL, 0.04f, 1.0f, out, lse);
  check(rc == 0, "validation: extra == NULL means no extra cache (its arguments are ignored)", "");
}

/* Per-tensor FP8 (docs/ops.md 8): raw e4m3 K with kv_scale folded into the softmax scale and the output. */
static void test_per_tensor(void)
{
  enum { BS = 16, NB = 4, N = BS * NB, T = 2, H = 4, TOPK = 24 };
  dsv4_layout pl = dsv4_check_layout_per_tensor();
  static uint8_t pc[NB * BS * 512];
  static uint16_t q[T * H * 512], out[T * H * 512];
  int32_t idx[T * TOPK], lens[T] = {TOPK, 11};
  float sink[H] = {0.5f, -1.0f, INFINITY, -INFINITY}, lse[T * H];
  const float ts = 0.0078125f * 1.37f, sm = 0.044194173824159216f;
  int bad = 0;
  double worst_round = 0;
  char msg[240] = "";

  dsv4_rng_bytes(&rng, pc, sizeof pc);
  for (size_t i = 0; i < sizeof pc; i++)
    if ((pc[i] & 0x7F) == 0x7F) /* no NaN codes */
      pc[i] ^= 1;
  rand_bf16(q, T * H * 512, 1.0, 2);
  for (int i = 0; i < T * TOPK; i++)
    idx[i] = i % 9 == 4 ? -1 : (int32_t)dsv4_rng_range(&rng, 0, N - 1);
  /* block stride larger than the minimum page (BS*512), as vLLM's packed pages may be */
  static uint8_t big[NB * (BS * 512 + 256)];
  memset(big, 0xEE, sizeof big);
  for (int b = 0; b < NB; b++)
    memcpy(big + b * (BS * 512 + 256), pc + b * BS * 512, BS * 512);
  int rc = dsv4_ref_sparse_decode(&pl, 512, q, T, H, big, NB, BS, BS * 512 + 256, idx, lens, TOPK, NULL, 0, 0, 0,
                                  NULL, NULL, 0, sink, sm, ts, out, lse);
  for (int t = 0; t < T && rc == 0; t++) {
    for (int h = 0; h < H; h++) {
      const uint16_t *qh = q + (t * H + h) * 512;
      double s[TOPK], sr[TOPK], m = -INFINITY, mr = -INFINITY, se = 0, ser = 0, ls, lsr, o[512];
      int n = 0, js[TOPK];
      for (int j = 0; j < lens[t]; j++) {
        int32_t v = idx[t * TOPK + j];
        double dot = 0, dotr = 0;
        if (v == -1)
          continue;
        for (int d = 0; d < 512; d++) {
          double k = e4m3_val(pc[(int64_t)v * 512 + d]), x = dsv4_ref_bf16_to_f32(qh[d]);
          dot += x * k;
          dotr += x * dsv4_ref_bf16_to_f32(dsv4_ref_f32_to_bf16((float)(k * ts))); /* the rounded-K variant */
        }
        s[n] = (double)sm * (double)ts * dot;  /* bmm1_scale = softmax_scale * kv_scale */
        sr[n] = (double)sm * dotr;
        m = s[n] > m ? s[n] : m;
        mr = sr[n] > mr ? sr[n] : mr;
        js[n++] = v;
      }
      for (int j = 0; j < n; j++)
        se += exp(s[j] - m), ser += exp(sr[j] - mr);
      ls = m + log(se);
      lsr = mr + log(ser);
      worst_round = fabs(lsr - ls) > worst_round ? fabs(lsr - ls) : worst_round;
      for (int d = 0; d < 512; d++)
        o[d] = 0;
      for (int j = 0; j < n; j++)
        for (int d = 0; d < 512; d++)
          o[d] += exp(s[j] - ls) * e4m3_val(pc[(int64_t)js[j] * 512 + d]);
      for (int d = 0; d < 512; d++) {
        double want = (double)ts * o[d] / (1.0 + exp((double)sink[h] - ls)); /* bmm2_scale = kv_scale */
        uint16_t g = out[(t * H + h) * 512 + d];
        if (!(isinf(sink[h]) && sink[h] > 0 ? dsv4_ref_bf16_to_f32(g) == 0.0f : bf16_rounds(g, want)) && !bad++)
          snprintf(msg, sizeof msg, "t %d h %d d %d: got %.9g want %.9g", t, h, d,
                   (double)dsv4_ref_bf16_to_f32(g), want);
      }
      if (!within(lse[t * H + h], ls, 0, 1e-6) && !bad++)
        snprintf(msg, sizeof msg, "t %d h %d: lse %.9g want %.9g", t, h, (double)lse[t * H + h], ls);
    }
  }
  snprintf(msg + strlen(msg), sizeof msg - strlen(msg), "%sbf16-rounded K would move lse by up to %.3g",
           msg[0] ? "; " : "", worst_round);
  check(rc == 0 && !bad,
        "per-tensor FP8: s = softmax_scale*kv_scale*q.Kraw, out = kv_scale*sum p Vraw (unrounded K), with sinks",
        msg);
  {
    char cname[160];
    snprintf(cname, sizeof cname,
             "per-tensor FP8: the check tells the fold from bf16-rounded K (which moves lse by up to %.3g)",
             worst_round);
    check(worst_round > 1e-5, cname, msg);
  }
}

/* dsv4_ref_sparse_decode_cond: out and lse bit-identical to dsv4_ref_sparse_decode, n_valid the rows'
 * participating entries, pv_abs = sum_j p_j |V_j| (the sink in the denominator) against a direct sum;
 * 0 for an empty row; NULL sums refused. */
static void test_cond(void)
{
  static uint16_t q[T0 * H0 * DIM], out[T0 * H0 * DIM], out2[T0 * H0 * DIM];
  static float pv[T0 * H0 * DIM];
  static int32_t idx[T0 * K0], eidx[T0 * E0];
  int32_t lens[T0] = {K0, 9, 0}, elens[T0] = {E0, 3, 0};
  float sink[H0], lse[T0 * H0], lse2[T0 * H0], la[T0 * H0];
  int64_t nv[T0];
  char msg[200] = "";
  int bad = 0;
  rand_bf16(q, T0 * H0 * DIM, 4.0, 2);
  for (int h = 0; h < H0; h++)
    sink[h] = h == 0 ? INFINITY : h == 1 ? -INFINITY : (float)(urand() * 3.0);
  for (int t = 0; t < T0; t++) {
    for (int j = 0; j < K0; j++)
      idx[t * K0 + j] = (int32_t)dsv4_rng_range(&rng, -1, NS - 1);
    for (int j = 0; j < E0; j++)
      eidx[t * E0 + j] = (int32_t)dsv4_rng_range(&rng, -1, NS - 1);
  }
  int rc = run(DIM, q, T0, H0, idx, lens, K0, eidx, elens, E0, sink, 1.0f, out, lse);
  int rc2 = dsv4_ref_sparse_decode_cond(&L, DIM, q, T0, H0, cache_a, A_NB, A_BS, A_ST, idx, lens, K0, cache_b, B_NB,
                                        B_BS, B_ST, eidx, elens, E0, sink, 0.044194173824159216f, 1.0f, out2, lse2, pv,
                                        nv, la);
  check(rc == 0 && rc2 == 0 && !memcmp(out, out2, sizeof out) && !memcmp(lse, lse2, sizeof lse),
        "cond: out and lse bit-identical to dsv4_ref_sparse_decode", "");
  for (int t = 0; t < T0 && rc2 == 0; t++) {
    int32_t sl[K0 + E0];
    int n = 0;
    for (int j = 0; j < lens[t]; j++)
      if (idx[t * K0 + j] != -1)
        sl[n++] = idx[t * K0 + j];
    for (int j = 0; j < elens[t]; j++)
      if (eidx[t * E0 + j] != -1)
        sl[n++] = eidx[t * E0 + j];
    if (nv[t] != n && !bad++)
      snprintf(msg, sizeof msg, "t %d: n_valid %lld, want %d", t, (long long)nv[t], n);
    for (int h = 0; h < H0; h++) {
      const uint16_t *qh = q + (t * H0 + h) * DIM;
      double s[K0 + E0], sa[K0 + E0], mx = -INFINITY, se = 0, a[DIM] = {0};
      for (int j = 0; j < n; j++) {
        double dot = 0, adot = 0;
        for (int d = 0; d < DIM; d++) {
          double x = (double)dsv4_ref_bf16_to_f32(qh[d]) * dsv4_ref_bf16_to_f32(kdq[(int64_t)sl[j] * DIM + d]);
          dot += x, adot += fabs(x);
        }
        s[j] = 0.044194173824159216f * dot;
        sa[j] = 0.044194173824159216f * adot;
        mx = s[j] > mx ? s[j] : mx;
      }
      for (int j = 0; j < n; j++)
        se += exp(s[j] - mx);
      double den = se + (n ? exp((double)sink[h] - mx) : 0.0);
      for (int j = 0; j < n; j++)
        for (int d = 0; d < DIM; d++)
          a[d] += exp(s[j] - mx) / den * fabs(dsv4_ref_bf16_to_f32(kdq[(int64_t)sl[j] * DIM + d]));
      double ls = mx + log(se), wa = n ? fabs(mx) + fabs(ls - mx) : 0.0;
      for (int j = 0; j < n; j++)
        wa += exp(s[j] - ls) * sa[j];
      if (!(fabs(la[t * H0 + h] - wa) <= 1e-6 * wa) && !bad++)
        snprintf(msg, sizeof msg, "t %d h %d: lse_abs %.9g, want %.9g", t, h, la[t * H0 + h], wa);
      for (int d = 0; d < DIM; d++) {
        double got = pv[(t * H0 + h) * DIM + d];
        if (!(fabs(got - a[d]) <= 1e-6 * a[d] + 1e-30) && !bad++)
          snprintf(msg, sizeof msg, "t %d h %d d %d: pv_abs %.9g, want %.9g", t, h, d, got, a[d]);
      }
    }
  }
  check(rc2 == 0 && !bad, "cond: n_valid counts both lists; pv_abs = sum_j p_j |V_j| with the sink in p_j "
        "(0 for a sink of +inf and for the empty row); lse_abs = |m| + |lse - m| + sum_j w_j |s_j| terms", msg);
  check(dsv4_ref_sparse_decode_cond(&L, DIM, q, T0, H0, cache_a, A_NB, A_BS, A_ST, idx, lens, K0, NULL, 0, 0, 0, NULL,
                                    NULL, 0, sink, 0.04f, 1.0f, out2, lse2, NULL, nv, NULL) != 0,
        "cond: pv_abs NULL refused", "");
  /* the bound itself: FlashMLA's element rule plus (u_P + n 2^-24) pv_abs */
  check(dsv4_check_cond_ok(1e-3 + 0.9 * (0x1p-8 + 10 * 0x1p-24) * 0.5, 0.01, 1e-3, 2.01 / 128, 0x1p-8, 10, 0.5) &&
            !dsv4_check_cond_ok(1e-3 + 1.1 * (0x1p-8 + 10 * 0x1p-24) * 0.5, 0.01, 1e-3, 2.01 / 128, 0x1p-8, 10, 0.5) &&
            dsv4_check_cond_ok(0.9 * 2.01 / 128 * 3.0, 3.0, 1e-3, 2.01 / 128, 0x1p-16, 1, 0.0),
        "dsv4_check_cond_ok: max(abs, rel |want|) + (u_P + n 2^-24) sum p |V|", "");
  double c512 = (2 * sqrt(512.0) + 8) * 0x1p-24;
  check(dsv4_check_lse_cond_ok(1e-6 + 0.9 * c512 * 8.0, 8e-5, 1e-6, 8.0 / 65536, 512, 8.0) &&
            !dsv4_check_lse_cond_ok(1e-6 + 1.1 * c512 * 8.0, 8e-5, 1e-6, 8.0 / 65536, 512, 8.0) &&
            !dsv4_check_lse_cond_ok(1.5e-6, 8e-5, 1e-6, 8.0 / 65536, 512, 0.0),
        "dsv4_check_lse_cond_ok: max(abs, rel |want|) + (2 sqrt(dim) + 8) 2^-24 lse_abs", "");
}

int main(int argc, char **argv)
{
  static const char *cases[] = {"v4_sparse_decode_c128_h64", "v4_sparse_decode_c4_h128", "v4_sparse_decode_c4_h64",
                                "v4_sparse_decode_swa_only_h64"};
  uint64_t seed;
  if (argc < 2) {
    fprintf(stderr, "usage: %s GOLDEN_ROOT\n", argv[0]);
    return 1;
  }
  seed = dsv4_check_seed();
  rng.s = seed;
  printf("seed %llu (set DSV4_SEED to repeat)\n", (unsigned long long)seed);
  const char *groot = golden_root(argv[1]);
  for (size_t i = 0; groot && i < sizeof cases / sizeof cases[0]; i++)
    test_golden(groot, cases[i]);
  if (build_caches()) {
    check(0, "synthetic caches: kv_insert and dequant_gather", "");
  } else {
    test_random_and_empty();
    test_one_index();
    test_joint();
    test_validation();
    test_per_tensor();
    test_cond();
  }
  free(cache_a);
  free(cache_b);
  printf("%d passed, %d failed\n", n_pass, n_fail);
  return n_fail ? 1 : 0;
}
