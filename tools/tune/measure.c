/* measure.c -- one shape's inputs, the correctness gate and the timing.
 *
 * Inputs (made once a shape and kernel kind, in the parent, read by the
 * workers it forks):
 *   - the gate's: drawn as docs/ops.md section 3 says FlashMLA tests the decode
 *     (q = randn clamped to +-1, K = randn / 10 clamped, written into the
 *     cache by the reference writer; softmax_scale = dim^-0.55; sinks a
 *     third +inf, a third -inf; every cache row no valid index names set to
 *     NaN, so a kernel that reads a skipped row fails) with lengths below
 *     the list width, -1 entries and empty rows; and as section 4 says for
 *     the logits (test_indexer's draws, contexts 0, short, full and
 *     between).  The reference (runtime/ref) runs on at most 64 decode
 *     tokens or 8 logits batch entries spread over the shape (its cost is
 *     the shape's work in double precision on one core); the kernel runs
 *     the whole shape, and its two runs are compared in full;
 *   - the timing's: caches of --rotate bytes (256 MiB by default, past any
 *     L2 today) with valid values everywhere, and 8 sets of index lists
 *     (block tables) drawn over all of them, rotated from launch to launch,
 *     every list full (the serving case).
 * Gate: poison the outputs, run, run again; the two runs must agree bit for
 * bit (else NONDETERMINISTIC), and the first must match the reference by
 * the op's rule (FlashMLA's element rule and cosine for the decode,
 * DeepGEMM's calc_diff and exact -inf for the logits; else WRONG).  Then
 * time: warm-up launches, then reps device-timed batches of launches
 * (dsv4rt_timer_start / stop); the median, min and max of a launch.
 */
#include <pthread.h>
#include <unistd.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4_abi.h"
#include "dsv4_check.h"
#include "dsv4_ref.h"
#include "tune.h"

#define SETS 8

struct tune_inputs {
  int op;
  dsv4_shape s;
  dsv4_layout L;
  int v_dim, heads;
  int xdrawn; /* decode: the timing's extra lengths drawn (tune_shape.xdrawn) */
  /* decode, gate */
  int64_t T, H, topk, xtopk, bs, nb, stride, xbs, xnb, xstride;
  uint16_t *q;
  uint8_t *cache, *xcache;
  int32_t *idx, *lens, *xidx, *xlens;
  float *sink, scale, tscale;
  int nref;
  int64_t *ref_rows; /* decode: tokens; logits: batch entries */
  uint16_t *want;
  float *lwant;
  /* decode, timing */
  int64_t tnb, txnb;
  uint8_t *tcache, *txcache;
  int32_t *tidx[SETS], *txidx[SETS], *tlens, *txlens;
  /* logits */
  int64_t B, nn, Lr, rstride, lnb, lmaxb, lstride, ltnb;
  uint8_t *q8, *lcache, *ltcache;
  float *w, *lwant_rows;
  int32_t *ctx, *bt, *tctx, *tbt[SETS];
};

struct tune_device {
  dsv4rt_buffer *q, *cache, *xcache, *idx, *lens, *xidx, *xlens, *sink, *out, *lse;
  dsv4rt_buffer *tcache, *txcache, *tidx[SETS], *txidx[SETS], *tlens, *txlens, *tout, *tlse;
  dsv4rt_buffer *q8, *lcache, *w, *ctx, *bt, *logits, *ltcache, *tctx, *tbt[SETS], *tlogits;
};

static dsv4_rng rng;
static float rnd01(void) { return (float)(dsv4_rng_next(&rng) >> 40) / (float)(1 << 24); }
static float randn(void) { return (float)dsv4_rng_randn(&rng); }
static float clampf(float x, float lo, float hi) { return x < lo ? lo : x > hi ? hi : x; }

/* fn over rows [0, n) split in one contiguous part a core: the host reference in double precision is
 * the tuner's slowest host work (a V4-Pro T 512 shape's 64 tokens: about 14 s on one core), and its
 * rows are independent.  Threads end before any worker is forked.  Nonzero if any part failed. */
typedef struct {
  int (*fn)(void *, int64_t, int64_t);
  void *arg;
  int64_t r0, r1;
  int rc;
} par_part;

static void *par_run(void *p)
{
  par_part *j = p;
  j->rc = j->fn(j->arg, j->r0, j->r1);
  return NULL;
}

static int par_rows(int64_t n, int (*fn)(void *, int64_t, int64_t), void *arg)
{
  enum { MAXT = 32 };
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int nt = (int)(cores < 1 ? 1 : cores > MAXT ? MAXT : cores), rc = 0;
  if (nt > n)
    nt = (int)n;
  if (nt <= 1)
    return n > 0 ? fn(arg, 0, n) : 0;
  par_part j[MAXT];
  pthread_t th[MAXT];
  int started[MAXT];
  for (int i = 0; i < nt; i++) {
    j[i] = (par_part){fn, arg, n * i / nt, n * (i + 1) / nt, 0};
    started[i] = pthread_create(&th[i], NULL, par_run, &j[i]) == 0;
    if (!started[i]) /* no thread to be had: this part here */
      j[i].rc = fn(arg, j[i].r0, j[i].r1);
  }
  for (int i = 0; i < nt; i++) {
    if (started[i])
      pthread_join(th[i], NULL);
    rc |= j[i].rc;
  }
  return rc;
}

/* A cache of valid random values for any layout (finite e4m3 codes, bf16 /
 * f32 in [-1, 1), scales 2^-9 .. 2^-5): the timing caches, and the gate's
 * where the reference writer does not write the layout (per tensor). */
static uint8_t *random_cache(const dsv4_layout *L, int64_t nb, int64_t bs, int64_t stride)
{
  return dsv4_check_random_cache(&rng, L, nb, bs, stride, 1.0f);
}

/* A gate cache: FlashMLA's K (randn / 10 clamped to +-1) written by the
 * reference writer where it takes the layout, else valid random values. */
static uint8_t *gate_cache(const dsv4_layout *L, int64_t nb, int64_t bs, int64_t stride, float sigma)
{
  uint8_t *c = dsv4_check_flashmla_cache(&rng, L, nb, bs, stride, sigma);
  return c ? c : random_cache(L, nb, bs, stride);
}

/* An index list of T rows of width w over n slots for the gate: lengths 0,
 * short or full, -1 entries among the valid ones, anything past the length. */
static void gate_lists(int64_t T, int64_t w, int64_t n, int32_t *idx, int32_t *lens, unsigned char *named)
{
  for (int64_t t = 0; t < T; t++) {
    int u = (int)(dsv4_rng_next(&rng) % 8);
    lens[t] = !w || u == 0 ? 0 : u == 1 ? (int32_t)(1 + dsv4_rng_next(&rng) % (uint64_t)w) : (int32_t)w;
    if (lens[t] > w)
      lens[t] = (int32_t)w;
    for (int64_t j = 0; j < w; j++) {
      int32_t v = (int32_t)(dsv4_rng_next(&rng) % (uint64_t)n);
      if (j < lens[t] && dsv4_rng_next(&rng) % 16 == 0)
        v = -1;
      idx[t * w + j] = v;
      if (j < lens[t] && v >= 0)
        named[v] = 1;
    }
  }
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Up to max rows of n, spread evenly (all when n <= max). */
static int pick_rows(int64_t n, int max, int64_t *rows)
{
  int k = (int)min64(n, max);
  for (int i = 0; i < k; i++)
    rows[i] = k == n ? i : (int64_t)((double)i * (double)(n - 1) / (double)(k - 1));
  return k;
}

/* The decode's reference over rows [r0, r1) of the picked tokens (a token's output depends on its own q
 * and lists only). */
typedef struct {
  const dsv4_layout *L;
  int V;
  int64_t H, D;
  tune_inputs *in;
  const uint16_t *qs;
  const int32_t *is, *ls, *xs, *xls;
} decode_ref;

static int decode_ref_rows(void *arg, int64_t r0, int64_t r1)
{
  const decode_ref *d = arg;
  tune_inputs *in = d->in;
  return dsv4_ref_sparse_decode(d->L, d->V, d->qs + r0 * d->H * d->D, r1 - r0, d->H, in->cache, in->nb, in->bs,
                                in->stride, d->is + r0 * in->topk, d->ls + r0, in->topk, in->xcache, in->xnb, in->xbs,
                                in->xstride, d->xs + r0 * in->xtopk, d->xls + r0, in->xtopk, in->sink, in->scale,
                                in->tscale, in->want + r0 * d->H * d->V, in->lwant + r0 * d->H);
}

/* The logits' reference over batch entries [k0, k1) of the picked ones. */
typedef struct {
  const dsv4_layout *L;
  int64_t nn, H, D, Lr;
  tune_inputs *in;
  const uint8_t *qs;
  const float *ws;
  const int32_t *cs, *bts;
} logits_ref;

static int logits_ref_rows(void *arg, int64_t k0, int64_t k1)
{
  const logits_ref *d = arg;
  tune_inputs *in = d->in;
  return dsv4_ref_paged_mqa_logits(d->L, d->qs + k0 * d->nn * d->H * d->D, k1 - k0, d->nn, d->H, in->lcache, in->lnb,
                                   64, in->lstride, d->ws + k0 * d->nn * d->H, d->cs + k0 * d->nn,
                                   d->bts + k0 * in->lmaxb, in->lmaxb, in->lwant_rows + k0 * d->nn * in->rstride, d->Lr,
                                   in->rstride);
}

static int make_decode(tune_inputs *in, const tune_opts *o, char *err, size_t errlen)
{
  const dsv4_layout *L = &in->L;
  int D = L->dim, V = in->v_dim;
  in->T = in->s.dim[0], in->H = in->s.dim[1], in->topk = in->s.dim[2], in->xtopk = in->s.dim[3];
  in->xbs = in->xtopk ? in->s.dim[4] : 0;
  if (in->xtopk && in->xbs < 1) {
    snprintf(err, errlen, "a decode shape with an extra list needs xbs >= 1");
    return 1;
  }
  int64_t T = in->T, H = in->H;
  in->bs = 64;
  in->stride = (dsv4_layout_min_block_bytes(L, 64) + 575) / 576 * 576;
  in->nb = max64(16, (T * in->topk) / 64 / 2 + 4);
  if (in->xtopk) {
    in->xstride = (dsv4_layout_min_block_bytes(L, in->xbs) + 575) / 576 * 576;
    in->xnb = max64(16, (max64(in->xtopk, T * in->xtopk / 4) + in->xbs - 1) / in->xbs + 4);
  }
  /* the gate */
  in->q = malloc((size_t)(T * H * D) * 2);
  in->idx = malloc((size_t)(T * in->topk) * 4 + 4), in->lens = malloc((size_t)T * 4 + 4);
  in->xidx = malloc((size_t)(T * in->xtopk) * 4 + 4), in->xlens = malloc((size_t)T * 4 + 4);
  in->sink = malloc((size_t)H * 4);
  unsigned char *named = calloc((size_t)(in->nb * in->bs), 1), *xnamed = calloc((size_t)(in->xnb * in->xbs) + 1, 1);
  in->cache = gate_cache(L, in->nb, in->bs, in->stride, 0.1f);
  in->xcache = in->xtopk ? gate_cache(L, in->xnb, in->xbs, in->xstride, 0.1f) : NULL;
  if (!in->q || !in->idx || !in->lens || !in->xidx || !in->xlens || !in->sink || !named || !xnamed || !in->cache ||
      (in->xtopk && !in->xcache)) {
    free(named), free(xnamed);
    snprintf(err, errlen, "out of host memory for the gate's inputs");
    return 1;
  }
  for (int64_t i = 0; i < T * H * D; i++)
    in->q[i] = dsv4_ref_f32_to_bf16(clampf(randn(), -1, 1));
  gate_lists(T, in->topk, in->nb * in->bs, in->idx, in->lens, named);
  gate_lists(T, in->xtopk, max64(1, in->xnb * in->xbs), in->xidx, in->xlens, xnamed);
  for (int64_t s = 0; s < in->nb * in->bs; s++)
    if (!named[s])
      dsv4_check_nan_row(L, in->cache, in->bs, in->stride, s);
  for (int64_t s = 0; in->xtopk && s < in->xnb * in->xbs; s++)
    if (!xnamed[s])
      dsv4_check_nan_row(L, in->xcache, in->xbs, in->xstride, s);
  free(named), free(xnamed);
  for (int64_t h = 0; h < H; h++) {
    int u = (int)(dsv4_rng_next(&rng) % 3);
    in->sink[h] = u == 0 ? INFINITY : u == 1 ? -INFINITY : randn();
  }
  in->scale = powf((float)D, -0.55f);
  in->tscale = 0.0371f; /* a per-tensor layout's kv_scale (unused by the others) */
  /* the reference, on up to 64 tokens */
  in->ref_rows = malloc(64 * sizeof *in->ref_rows);
  in->nref = pick_rows(T, 64, in->ref_rows);
  int64_t R = in->nref;
  uint16_t *qs = malloc((size_t)(R * H * D) * 2);
  int32_t *is = malloc((size_t)(R * in->topk) * 4 + 4), *ls = malloc((size_t)R * 4),
          *xs = malloc((size_t)(R * in->xtopk) * 4 + 4), *xls = malloc((size_t)R * 4);
  in->want = malloc((size_t)(R * H * V) * 2);
  in->lwant = malloc((size_t)(R * H) * 4);
  int rc = !qs || !is || !ls || !xs || !xls || !in->want || !in->lwant;
  for (int64_t r = 0; !rc && r < R; r++) {
    int64_t t = in->ref_rows[r];
    memcpy(qs + r * H * D, in->q + t * H * D, (size_t)(H * D) * 2);
    memcpy(is + r * in->topk, in->idx + t * in->topk, (size_t)in->topk * 4);
    memcpy(xs + r * in->xtopk, in->xidx + t * in->xtopk, (size_t)in->xtopk * 4);
    ls[r] = in->lens[t], xls[r] = in->xlens[t];
  }
  decode_ref dr = {L, V, H, D, in, qs, is, ls, xs, xls};
  if (!rc && par_rows(R, decode_ref_rows, &dr)) {
    snprintf(err, errlen, "the reference refused the decode inputs");
    rc = 1;
  } else if (rc)
    snprintf(err, errlen, "out of host memory for the reference");
  free(qs), free(is), free(ls), free(xs), free(xls);
  if (rc)
    return 1;
  /* the timing: caches past the L2, full lists drawn over all of them */
  size_t half = o->rotate_bytes / (in->xtopk ? 2 : 1);
  in->tnb = max64(in->nb, (int64_t)(half / (size_t)in->stride));
  in->tcache = random_cache(L, in->tnb, in->bs, in->stride);
  if (in->xtopk) {
    in->txnb = max64(in->xnb, (int64_t)(half / (size_t)in->xstride));
    in->txcache = random_cache(L, in->txnb, in->xbs, in->xstride);
  }
  in->tlens = malloc((size_t)T * 4), in->txlens = malloc((size_t)T * 4);
  if (!in->tcache || (in->xtopk && !in->txcache) || !in->tlens || !in->txlens) {
    snprintf(err, errlen, "out of host memory for the timing's inputs (--rotate)");
    return 1;
  }
  for (int64_t t = 0; t < T; t++) { /* full, or the extra list's lengths drawn (tune_shape.xdrawn) */
    in->tlens[t] = (int32_t)in->topk;
    in->txlens[t] = (int32_t)(in->xdrawn ? dsv4_rng_range(&rng, 0, in->xtopk) : in->xtopk);
  }
  for (int k = 0; k < SETS; k++) {
    in->tidx[k] = malloc((size_t)(T * in->topk) * 4 + 4);
    in->txidx[k] = malloc((size_t)(T * in->xtopk) * 4 + 4);
    if (!in->tidx[k] || !in->txidx[k]) {
      snprintf(err, errlen, "out of host memory for the timing's index lists");
      return 1;
    }
    for (int64_t i = 0; i < T * in->topk; i++)
      in->tidx[k][i] = (int32_t)(dsv4_rng_next(&rng) % (uint64_t)(in->tnb * in->bs));
    for (int64_t i = 0; i < T * in->xtopk; i++)
      in->txidx[k][i] = (int32_t)(dsv4_rng_next(&rng) % (uint64_t)(in->txnb * in->xbs));
  }
  return 0;
}

static int make_logits(tune_inputs *in, const tune_opts *o, char *err, size_t errlen)
{
  const dsv4_layout *L = &in->L;
  int64_t D = L->dim, H = in->heads;
  in->B = in->s.dim[0], in->nn = in->s.dim[1], in->Lr = in->s.dim[2];
  int64_t B = in->B, nn = in->nn, R = B * nn, Lr = in->Lr;
  in->rstride = (Lr + 255) / 256 * 256; /* DeepGEMM's padded row (docs/ops.md 4) */
  in->bs = 64;
  in->lstride = L->block_stride ? L->block_stride
                                : (dsv4_layout_min_block_bytes(L, 64) + L->align - 1) / L->align * L->align;
  in->lmaxb = (Lr + 63) / 64;
  in->lnb = min64(B * in->lmaxb, 4096) + 1;
  in->q8 = malloc((size_t)(R * H * D) + 1);
  in->w = malloc((size_t)(R * H) * 4);
  in->ctx = malloc((size_t)R * 4), in->tctx = malloc((size_t)R * 4);
  in->bt = malloc((size_t)(B * in->lmaxb) * 4);
  in->lcache = gate_cache(L, in->lnb, 64, in->lstride, 1.0f);
  if (!in->q8 || !in->w || !in->ctx || !in->tctx || !in->bt || !in->lcache) {
    snprintf(err, errlen, "out of host memory for the gate's inputs");
    return 1;
  }
  for (int64_t i = 0; i < R * H * D; i++)
    in->q8[i] = dsv4_ref_f32_to_e4m3((rnd01() - 0.5f) * 8.0f);
  for (int64_t i = 0; i < R * H; i++)
    in->w[i] = rnd01() - 0.3f;
  for (int64_t r = 0; r < R; r++) {
    int u = (int)(dsv4_rng_next(&rng) % 5);
    in->ctx[r] = u == 0 ? 0 : u == 1 ? (int32_t)(1 + dsv4_rng_next(&rng) % (uint64_t)min64(500, Lr))
                 : u == 2 ? (int32_t)Lr : (int32_t)(dsv4_rng_next(&rng) % (uint64_t)(Lr + 1));
    in->tctx[r] = (int32_t)Lr;
  }
  for (int64_t i = 0; i < B * in->lmaxb; i++)
    in->bt[i] = (int32_t)(dsv4_rng_next(&rng) % (uint64_t)in->lnb);
  /* the reference, on up to 8 batch entries */
  in->ref_rows = malloc(8 * sizeof *in->ref_rows);
  in->nref = pick_rows(B, 8, in->ref_rows);
  int64_t Bs = in->nref;
  uint8_t *qs = malloc((size_t)(Bs * nn * H * D));
  float *ws = malloc((size_t)(Bs * nn * H) * 4);
  int32_t *cs = malloc((size_t)(Bs * nn) * 4), *bts = malloc((size_t)(Bs * in->lmaxb) * 4);
  in->lwant_rows = malloc((size_t)(Bs * nn * in->rstride) * 4);
  int rc = !qs || !ws || !cs || !bts || !in->lwant_rows;
  for (int64_t k = 0; !rc && k < Bs; k++) {
    int64_t b = in->ref_rows[k];
    memcpy(qs + k * nn * H * D, in->q8 + b * nn * H * D, (size_t)(nn * H * D));
    memcpy(ws + k * nn * H, in->w + b * nn * H, (size_t)(nn * H) * 4);
    memcpy(cs + k * nn, in->ctx + b * nn, (size_t)nn * 4);
    memcpy(bts + k * in->lmaxb, in->bt + b * in->lmaxb, (size_t)in->lmaxb * 4);
  }
  logits_ref lr = {L, nn, H, D, Lr, in, qs, ws, cs, bts};
  if (!rc && par_rows(Bs, logits_ref_rows, &lr)) {
    snprintf(err, errlen, "the reference refused the logits inputs");
    rc = 1;
  } else if (rc)
    snprintf(err, errlen, "out of host memory for the reference");
  free(qs), free(ws), free(cs), free(bts);
  if (rc)
    return 1;
  /* the timing: a cache past the L2, block tables drawn over all of it */
  in->ltnb = max64(in->lnb, (int64_t)(o->rotate_bytes / (size_t)in->lstride));
  in->ltcache = random_cache(L, in->ltnb, 64, in->lstride);
  if (!in->ltcache) {
    snprintf(err, errlen, "out of host memory for the timing's cache (--rotate)");
    return 1;
  }
  for (int k = 0; k < SETS; k++) {
    in->tbt[k] = malloc((size_t)(B * in->lmaxb) * 4);
    if (!in->tbt[k]) {
      snprintf(err, errlen, "out of host memory for the timing's block tables");
      return 1;
    }
    for (int64_t i = 0; i < B * in->lmaxb; i++)
      in->tbt[k][i] = (int32_t)(dsv4_rng_next(&rng) % (uint64_t)in->ltnb);
  }
  return 0;
}

tune_inputs *tune_inputs_make(const tune_shape *s, const dsv4_layout *L, int v_dim, int heads, const tune_opts *o,
                              char *err, size_t errlen)
{
  tune_inputs *in = calloc(1, sizeof *in);
  if (!in) {
    snprintf(err, errlen, "out of host memory");
    return NULL;
  }
  in->op = s->shape.op, in->s = s->shape, in->L = *L, in->v_dim = v_dim, in->heads = heads, in->xdrawn = s->xdrawn;
  rng.s =
      o->seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(s->shape.dim[0] + 31 * s->shape.dim[1] + 977 * s->shape.dim[2]));
  int rc = in->op == DSV4_OP_SPARSE_DECODE      ? make_decode(in, o, err, errlen)
           : in->op == DSV4_OP_PAGED_MQA_LOGITS ? make_logits(in, o, err, errlen)
                                                : (snprintf(err, errlen, "dsv4c-tune measures sparse_decode and "
                                                            "paged_mqa_logits, not %s", dsv4_tune_op_name(in->op)), 1);
  if (rc) {
    tune_inputs_free(in);
    return NULL;
  }
  return in;
}

void tune_inputs_free(tune_inputs *in)
{
  if (!in)
    return;
  free(in->q), free(in->cache), free(in->xcache), free(in->idx), free(in->lens), free(in->xidx), free(in->xlens);
  free(in->sink), free(in->ref_rows), free(in->want), free(in->lwant), free(in->tcache), free(in->txcache);
  free(in->tlens), free(in->txlens), free(in->q8), free(in->lcache), free(in->ltcache), free(in->w);
  free(in->lwant_rows), free(in->ctx), free(in->bt), free(in->tctx);
  for (int k = 0; k < SETS; k++)
    free(in->tidx[k]), free(in->txidx[k]), free(in->tbt[k]);
  free(in);
}

/* ---- the device side ------------------------------------------------------------- */

static dsv4rt_buffer *up(dsv4rt_context *ctx, const void *host, size_t n, int *bad)
{
  dsv4rt_buffer *b = NULL;
  if (*bad)
    return NULL;
  if (dsv4rt_buffer_create(ctx, n < 16 ? 16 : n, &b) || (host && n && dsv4rt_buffer_write(b, 0, host, n))) {
    dsv4rt_buffer_destroy(b);
    *bad = 1;
    return NULL;
  }
  return b;
}

tune_device *tune_device_upload(dsv4rt_context *ctx, const tune_inputs *in, char *err, size_t errlen)
{
  tune_device *d = calloc(1, sizeof *d);
  int bad = !d;
  if (!bad && in->op == DSV4_OP_SPARSE_DECODE) {
    int64_t T = in->T, H = in->H, D = in->L.dim, V = in->v_dim;
    d->q = up(ctx, in->q, (size_t)(T * H * D) * 2, &bad);
    d->cache = up(ctx, in->cache, (size_t)(in->nb * in->stride), &bad);
    d->idx = up(ctx, in->idx, (size_t)(T * in->topk) * 4, &bad);
    d->lens = up(ctx, in->lens, (size_t)T * 4, &bad);
    if (in->xtopk) {
      d->xcache = up(ctx, in->xcache, (size_t)(in->xnb * in->xstride), &bad);
      d->xidx = up(ctx, in->xidx, (size_t)(T * in->xtopk) * 4, &bad);
      d->xlens = up(ctx, in->xlens, (size_t)T * 4, &bad);
      d->txcache = up(ctx, in->txcache, (size_t)(in->txnb * in->xstride), &bad);
      d->txlens = up(ctx, in->txlens, (size_t)T * 4, &bad);
    }
    d->sink = up(ctx, in->sink, (size_t)H * 4, &bad);
    d->out = up(ctx, NULL, (size_t)(T * H * V) * 2, &bad);
    d->lse = up(ctx, NULL, (size_t)(T * H) * 4, &bad);
    d->tcache = up(ctx, in->tcache, (size_t)(in->tnb * in->stride), &bad);
    d->tlens = up(ctx, in->tlens, (size_t)T * 4, &bad);
    d->tout = up(ctx, NULL, (size_t)(T * H * V) * 2, &bad);
    d->tlse = up(ctx, NULL, (size_t)(T * H) * 4, &bad);
    for (int k = 0; k < SETS; k++) {
      d->tidx[k] = up(ctx, in->tidx[k], (size_t)(T * in->topk) * 4, &bad);
      if (in->xtopk)
        d->txidx[k] = up(ctx, in->txidx[k], (size_t)(T * in->xtopk) * 4, &bad);
    }
  } else if (!bad) {
    int64_t R = in->B * in->nn, H = in->heads, D = in->L.dim;
    d->q8 = up(ctx, in->q8, (size_t)(R * H * D), &bad);
    d->w = up(ctx, in->w, (size_t)(R * H) * 4, &bad);
    d->ctx = up(ctx, in->ctx, (size_t)R * 4, &bad);
    d->tctx = up(ctx, in->tctx, (size_t)R * 4, &bad);
    d->bt = up(ctx, in->bt, (size_t)(in->B * in->lmaxb) * 4, &bad);
    d->lcache = up(ctx, in->lcache, (size_t)(in->lnb * in->lstride), &bad);
    d->logits = up(ctx, NULL, (size_t)(R * in->rstride) * 4, &bad);
    d->ltcache = up(ctx, in->ltcache, (size_t)(in->ltnb * in->lstride), &bad);
    d->tlogits = up(ctx, NULL, (size_t)(R * in->rstride) * 4, &bad);
    for (int k = 0; k < SETS; k++)
      d->tbt[k] = up(ctx, in->tbt[k], (size_t)(in->B * in->lmaxb) * 4, &bad);
  }
  if (bad) {
    snprintf(err, errlen, "uploading the inputs: %s", d ? dsv4rt_last_error(ctx) : "out of host memory");
    tune_device_free(d);
    return NULL;
  }
  return d;
}

void tune_device_free(tune_device *d)
{
  if (!d)
    return;
  dsv4rt_buffer *all[] = {d->q, d->cache, d->xcache, d->idx, d->lens, d->xidx, d->xlens, d->sink, d->out, d->lse,
                          d->tcache, d->txcache, d->tlens, d->txlens, d->tout, d->tlse, d->q8, d->lcache, d->w,
                          d->ctx, d->bt, d->logits, d->ltcache, d->tctx, d->tlogits};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++)
    dsv4rt_buffer_destroy(all[i]);
  for (int k = 0; k < SETS; k++)
    dsv4rt_buffer_destroy(d->tidx[k]), dsv4rt_buffer_destroy(d->txidx[k]), dsv4rt_buffer_destroy(d->tbt[k]);
  free(d);
}

/* ---- launches ------------------------------------------------------------------------ */

/* One launch of kernel: the gate's inputs (set < 0) or timing set `set`. */
static dsv4rt_status launch(dsv4rt_bundle *b, const char *kernel, const tune_inputs *in, tune_device *d, int set)
{
  dsv4rt_launch_opts o = {.kernel = kernel, .check_contents = set < 0};
  int g = set < 0;
  if (in->op == DSV4_OP_SPARSE_DECODE) {
    dsv4rt_sparse_decode_args a = {
        .out = g ? d->out : d->tout, .lse = g ? d->lse : d->tlse, .q = d->q, .n_tokens = in->T, .heads = in->H,
        .cache = g ? d->cache : d->tcache, .num_blocks = g ? in->nb : in->tnb, .block_size = in->bs,
        .block_stride = in->stride, .indices = g ? d->idx : d->tidx[set], .lens = g ? d->lens : d->tlens,
        .topk = in->topk, .extra_cache = in->xtopk ? (g ? d->xcache : d->txcache) : NULL,
        .extra_num_blocks = g ? in->xnb : in->txnb, .extra_block_size = in->xtopk ? in->xbs : 0,
        .extra_block_stride = in->xstride, .extra_indices = in->xtopk ? (g ? d->xidx : d->txidx[set]) : NULL,
        .extra_lens = in->xtopk ? (g ? d->xlens : d->txlens) : NULL, .extra_topk = in->xtopk,
        .attn_sink = d->sink, .softmax_scale = in->scale, .tensor_scale = in->tscale};
    return dsv4rt_sparse_decode(b, &a, &o);
  }
  dsv4rt_mqa_logits_args a = {.logits = g ? d->logits : d->tlogits,
                              .row_len = in->Lr,
                              .row_stride = in->rstride,
                              .q = d->q8,
                              .batch = in->B,
                              .next_n = in->nn,
                              .cache = g ? d->lcache : d->ltcache,
                              .num_blocks = g ? in->lnb : in->ltnb,
                              .block_size = 64,
                              .block_stride = in->lstride,
                              .weights = d->w,
                              .context_lens = g ? d->ctx : d->tctx,
                              .block_table = g ? d->bt : d->tbt[set],
                              .max_blocks = in->lmaxb};
  return dsv4rt_paged_mqa_logits(b, &a, &o);
}

/* FlashMLA's rule over n values (as test_decode.c): the first failure in why. */
static int anomaly(float v) { return isnan(v) ? 3 : isinf(v) ? (v > 0 ? 1 : 2) : 0; }
static int close_enough(const float *got, const float *want, size_t n, double abs_tol, double rel_tol, double cos_tol,
                        const char *what, char *why, size_t wl)
{
  size_t bad = 0, first = 0;
  double gw = 0, gg_ww = 0, ww = 0;
  for (size_t i = 0; i < n; i++) {
    int ag = anomaly(got[i]), aw = anomaly(want[i]);
    double g = ag ? 0.0 : got[i], w = aw ? 0.0 : want[i], err = fabs(g - w);
    if (!(ag == aw && dsv4_check_flashmla_ok(err, w, abs_tol, rel_tol)) && !bad++)
      first = i;
    gw += g * w, gg_ww += g * g + w * w, ww += w * w;
  }
  if (bad) {
    snprintf(why, wl, "%s: %zu of %zu values outside FlashMLA's tolerance; the first at %zu: %.9g, reference %.9g",
             what, bad, n, first, got[first], want[first]);
    return 1;
  }
  double cd = ww < 1e-12 ? 0.0 : 1.0 - 2.0 * gw / gg_ww;
  if (cos_tol >= 0 && !(fabs(cd) <= cos_tol)) {
    snprintf(why, wl, "%s: cosine diff %.3g above %.3g", what, cd, cos_tol);
    return 1;
  }
  return 0;
}

/* Read the gate's outputs (into one host buffer: out then lse, or the logits). */
static size_t gate_bytes(const tune_inputs *in)
{
  if (in->op == DSV4_OP_SPARSE_DECODE)
    return (size_t)(in->T * in->H * in->v_dim) * 2 + (size_t)(in->T * in->H) * 4;
  return (size_t)(in->B * in->nn * in->rstride) * 4;
}

static dsv4rt_status poison(const tune_inputs *in, tune_device *d, uint8_t *host)
{
  size_t n = gate_bytes(in);
  if (in->op == DSV4_OP_SPARSE_DECODE) {
    size_t no = (size_t)(in->T * in->H * in->v_dim) * 2;
    dsv4_check_fill16((uint16_t *)host, no / 2, 0x7F81);
    for (size_t i = no; i + 4 <= n; i += 4) {
      float f = NAN;
      memcpy(host + i, &f, 4);
    }
    dsv4rt_status s = dsv4rt_buffer_write(d->out, 0, host, no);
    return s ? s : dsv4rt_buffer_write(d->lse, 0, host + no, n - no);
  }
  for (size_t i = 0; i + 4 <= n; i += 4) {
    float f = NAN;
    memcpy(host + i, &f, 4);
  }
  return dsv4rt_buffer_write(d->logits, 0, host, n);
}

static dsv4rt_status read_back(const tune_inputs *in, tune_device *d, uint8_t *host)
{
  if (in->op == DSV4_OP_SPARSE_DECODE) {
    size_t no = (size_t)(in->T * in->H * in->v_dim) * 2;
    dsv4rt_status s = dsv4rt_buffer_read(d->out, 0, host, no);
    return s ? s : dsv4rt_buffer_read(d->lse, 0, host + no, gate_bytes(in) - no);
  }
  return dsv4rt_buffer_read(d->logits, 0, host, gate_bytes(in));
}

/* The first run's outputs against the reference rows; 0 or 1 with why. */
static int check(const tune_inputs *in, const uint8_t *got, char *why, size_t wl)
{
  if (in->op == DSV4_OP_SPARSE_DECODE) {
    int64_t H = in->H, V = in->v_dim, R = in->nref;
    const uint16_t *o = (const uint16_t *)got;
    const float *lse = (const float *)(got + (size_t)(in->T * H * V) * 2);
    float *fo = malloc((size_t)(R * H * V) * 4), *fw = malloc((size_t)(R * H * V) * 4);
    float *lg = malloc((size_t)(R * H) * 4);
    if (!fo || !fw || !lg) {
      free(fo), free(fw), free(lg);
      snprintf(why, wl, "out of host memory for the comparison");
      return 1;
    }
    for (int64_t r = 0; r < R; r++) {
      int64_t t = in->ref_rows[r];
      for (int64_t i = 0; i < H * V; i++)
        fo[r * H * V + i] = dsv4_ref_bf16_to_f32(o[t * H * V + i]),
        fw[r * H * V + i] = dsv4_ref_bf16_to_f32(in->want[r * H * V + i]);
      memcpy(lg + r * H, lse + t * H, (size_t)H * 4);
    }
    int bad = close_enough(fo, fw, (size_t)(R * H * V), 1e-3, 2.01 / 128, 5e-6, "out", why, wl) ||
              close_enough(lg, in->lwant, (size_t)(R * H), 1e-6, 8.0 / 65536, -1, "lse", why, wl);
    free(fo), free(fw), free(lg);
    return bad;
  }
  const float *lg = (const float *)got;
  int64_t nn = in->nn, Lr = in->Lr, rs = in->rstride;
  size_t unwritten = 0, past = 0, wrong_inf = 0;
  for (int64_t r = 0; r < in->B * nn; r++) {
    for (int64_t k = 0; k < Lr; k++)
      unwritten += isnan(lg[r * rs + k]);
    for (int64_t k = Lr; k < rs; k++)
      past += !isnan(lg[r * rs + k]);
  }
  if (unwritten || past) {
    snprintf(why, wl, "logits: %zu entries of the rows left unwritten, %zu written past row_len", unwritten, past);
    return 1;
  }
  double xy = 0, xx = 0;
  for (int k = 0; k < in->nref; k++)
    for (int64_t j = 0; j < nn; j++) {
      const float *g = lg + (in->ref_rows[k] * nn + j) * rs, *w = in->lwant_rows + (k * nn + j) * rs;
      for (int64_t p = 0; p < Lr; p++) {
        if (isinf(w[p]) && w[p] < 0) {
          wrong_inf += !(isinf(g[p]) && g[p] < 0);
          continue;
        }
        xy += (double)g[p] * w[p], xx += (double)g[p] * g[p] + (double)w[p] * w[p];
      }
    }
  double diff = xx > 0 ? 1 - 2 * xy / xx : 0;
  if (wrong_inf) {
    snprintf(why, wl, "logits: %zu entries past the context are not -inf", wrong_inf);
    return 1;
  }
  if (!(diff < 5e-6)) {
    snprintf(why, wl, "logits: calc_diff %.3g against the reference (DeepGEMM's tolerance 5e-6)", diff);
    return 1;
  }
  return 0;
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

void tune_measure(dsv4rt_context *ctx, dsv4rt_bundle *b, const char *kernel, const tune_inputs *in, tune_device *d,
                  const tune_opts *o, tune_result *r)
{
  memset(r, 0, sizeof *r);
  size_t n = gate_bytes(in);
  uint8_t *run1 = malloc(n), *run2 = malloc(n);
  double *t = malloc((size_t)(o->reps > 0 ? o->reps : 1) * sizeof *t);
  dsv4rt_status s = DSV4RT_OK;
  if (!run1 || !run2 || !t) {
    r->gate = DSV4_GATE_ERROR;
    snprintf(r->reason, sizeof r->reason, "out of host memory");
    goto done;
  }
  /* the gate: two runs on fresh poison, the same inputs */
  for (int k = 0; k < 2 && !s; k++) {
    uint8_t *h = k ? run2 : run1;
    if (!(s = poison(in, d, h)) && !(s = launch(b, kernel, in, d, -1)) && !(s = dsv4rt_synchronize(ctx)))
      s = read_back(in, d, h);
  }
  if (s) {
    r->gate = DSV4_GATE_ERROR;
    r->backend_failed = s == DSV4RT_ERR_BACKEND;
    snprintf(r->reason, sizeof r->reason, "%s: %.360s", dsv4rt_status_name(s), dsv4rt_last_error(ctx));
    goto done;
  }
  if (o->fault == 1) /* tests only: a wrong but deterministic result */
    memset(run1, 0x3F, n < 4096 ? n : 4096), memset(run2, 0x3F, n < 4096 ? n : 4096);
  if (o->fault == 2) /* tests only: a second run that differs */
    run2[n - 1] ^= 1;
  if (memcmp(run1, run2, n)) {
    size_t i = 0;
    while (run1[i] == run2[i])
      i++;
    r->gate = DSV4_GATE_NONDETERMINISTIC;
    snprintf(r->reason, sizeof r->reason,
             "two runs on the same inputs differ (first at byte %zu of %zu of the outputs)", i, n);
    goto done;
  }
  if (check(in, run1, r->reason, sizeof r->reason)) {
    r->gate = DSV4_GATE_WRONG;
    goto done;
  }
  /* the timing */
  int set = 0;
  for (int k = 0; k < o->warmup && !s; k++)
    s = launch(b, kernel, in, d, set++ % SETS);
  if (!s)
    s = dsv4rt_synchronize(ctx);
  for (int k = 0; k < o->reps && !s; k++) {
    double ms = 0;
    if ((s = dsv4rt_timer_start(ctx)))
      break;
    for (int i = 0; i < o->batch && !s; i++)
      s = launch(b, kernel, in, d, set++ % SETS);
    if (!s)
      s = dsv4rt_timer_stop(ctx, &ms);
    t[k] = ms * 1e3 / o->batch;
  }
  if (s) {
    r->gate = DSV4_GATE_ERROR;
    r->backend_failed = s == DSV4RT_ERR_BACKEND;
    snprintf(r->reason, sizeof r->reason, "timing: %s: %.360s", dsv4rt_status_name(s), dsv4rt_last_error(ctx));
    goto done;
  }
  qsort(t, (size_t)o->reps, sizeof *t, cmp_double);
  r->gate = DSV4_GATE_PASS;
  r->samples = o->reps;
  r->median_us = dsv4_lock_round(o->reps % 2 ? t[o->reps / 2] : (t[o->reps / 2 - 1] + t[o->reps / 2]) / 2);
  r->min_us = dsv4_lock_round(t[0]);
  r->max_us = dsv4_lock_round(t[o->reps - 1]);
done:
  free(run1), free(run2), free(t);
}
