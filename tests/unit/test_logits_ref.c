/* test_logits_ref.c -- unit test of the host indexer reference (docs/ops.md section 4): dsv4_ref_paged_mqa_logits
 * against the golden indexer_logits_n1/n2 fixtures (DeepGEMM's ref_paged_mqa_logits) with DeepGEMM's
 * calc_diff, dsv4_ref_topk against their topk_sorted exactly, and dsv4_ref_topk_check on the golden answer,
 * on reorderings and tie swaps (must pass) and on corrupted variants (must fail), plus argument validation.
 * Usage: test_logits_ref GOLDEN_ROOT   (e.g. /work/shared/golden).  Exit 0 on pass, 1 on any failure. */
#include "dsv4_check.h"
#include "dsv4_ref.h"
#include "golden_load.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int n_pass, n_fail;

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

/* The indexer K layout of docs/ops.md section 4, written out here: 128 e4m3 per token, one f32 scale per token
 * in the block tail. */
/* DeepGEMM's calc_diff = 1 - 2*sum(x*y)/sum(x*x + y*y), in double. */
static double calc_diff(const double *x, const double *y, int64_t n)
{
  double sxy = 0.0, sxx = 0.0;
  for (int64_t i = 0; i < n; i++) {
    sxy += x[i] * y[i];
    sxx += x[i] * x[i] + y[i] * y[i];
  }
  return sxx == 0.0 ? 0.0 : 1.0 - 2.0 * sxy / sxx;
}

/* Check that a tensor exists with the given dtype and rank. */
static const golden_tensor *need(const golden_case *c, const char *name, const char *dtype, int ndim)
{
  const golden_tensor *t = golden_tensor_get(c, name);
  if (!t || strcmp(t->dtype, dtype) != 0 || t->ndim != ndim)
    return NULL;
  return t;
}

/* Expect dsv4_ref_topk_check to reject got, with a named reason. */
static void expect_reject(const float *lg, int64_t rows, int64_t stride, const int32_t *ctx, int64_t K,
                          const int32_t *got, const char *name)
{
  char err[256] = "";
  int rc = dsv4_ref_topk_check(lg, rows, stride, ctx, K, got, err, sizeof err);
  char det[320];
  snprintf(det, sizeof det, "%s", rc ? err : "accepted");
  check(rc != 0 && err[0] != 0, name, det);
  if (rc)
    printf("     (reason: %s)\n", err);
}

/* One golden case: logits, -inf tails, padded stride, top-k exact and the checker on good and bad lists. */
static void test_golden(const char *root, const char *name)
{
  char dir[1024], err[512], cname[256], det[512];
  golden_case *c;
  const golden_tensor *tq, *tkv, *tw, *tctx, *tbt, *tlg, *ttk;
  double heads, hd, bsd, bstr, nn, Ld, Kd;
  dsv4_layout l = dsv4_check_layout_indexer();
  int64_t B, next_n, H, bs, block_stride, num_blocks, maxb, L, K, rows, padded;
  float *lg = NULL, *lgp = NULL;
  int32_t *tk = NULL, *bad = NULL;
  double *xv = NULL, *yv = NULL;

  snprintf(dir, sizeof dir, "%s/%s", root, name);
  c = golden_open(dir, err, sizeof err);
  snprintf(cname, sizeof cname, "%s: load", name);
  check(c != NULL, cname, err);
  if (!c)
    return;
  tq = need(c, "q", "e4m3", 4);
  tkv = need(c, "kv_cache", "u8", 2);
  tw = need(c, "weights", "f32", 2);
  tctx = need(c, "context_lens", "i32", 2);
  tbt = need(c, "block_table", "i32", 2);
  tlg = need(c, "logits", "f32", 2);
  ttk = need(c, "topk_sorted", "i32", 2);
  snprintf(cname, sizeof cname, "%s: tensors and params present", name);
  if (!tq || !tkv || !tw || !tctx || !tbt || !tlg || !ttk || golden_param_num(c, "heads", &heads) ||
      golden_param_num(c, "head_dim", &hd) || golden_param_num(c, "block_size", &bsd) ||
      golden_param_num(c, "block_stride", &bstr) || golden_param_num(c, "next_n", &nn) ||
      golden_param_num(c, "max_context_len", &Ld) || golden_param_num(c, "topk", &Kd)) {
    check(0, cname, "");
    golden_close(c);
    return;
  }
  B = tq->shape[0];
  next_n = (int64_t)nn;
  H = (int64_t)heads;
  bs = (int64_t)bsd;
  block_stride = (int64_t)bstr;
  num_blocks = tkv->shape[0];
  maxb = tbt->shape[1];
  L = (int64_t)Ld;
  K = (int64_t)Kd;
  rows = B * next_n;
  {
    int ok = tq->shape[1] == next_n && tq->shape[2] == H && tq->shape[3] == 128 && (int64_t)hd == 128 &&
             tkv->shape[1] == block_stride && tw->shape[0] == rows && tw->shape[1] == H && tctx->shape[0] == B &&
             tctx->shape[1] == next_n && tbt->shape[0] == B && tlg->shape[0] == rows && tlg->shape[1] == L &&
             ttk->shape[0] == rows && ttk->shape[1] == K && tlg->has_tol && tlg->tol_calc_diff > 0;
    check(ok, cname, "shape mismatch");
    if (!ok) {
      golden_close(c);
      return;
    }
  }
  const uint8_t *q = tq->data, *kv = tkv->data;
  const float *w = tw->data, *want = tlg->data;
  const int32_t *ctx = tctx->data, *bt = tbt->data, *wtk = ttk->data;
  int64_t nshort = 0, nlong = 0;
  for (int64_t r = 0; r < rows; r++)
    *(ctx[r] <= K ? &nshort : &nlong) += 1;
  printf("     %s: B %lld next_n %lld H %lld bs %lld stride %lld blocks %lld maxb %lld L %lld K %lld; rows with "
         "ctx <= K: %lld, ctx > K: %lld\n",
         name, (long long)B, (long long)next_n, (long long)H, (long long)bs, (long long)block_stride,
         (long long)num_blocks, (long long)maxb, (long long)L, (long long)K, (long long)nshort, (long long)nlong);

  lg = malloc((size_t)(rows * L) * sizeof(float));
  padded = (L + 255) / 256 * 256 + 256; /* a padded row stride, as the kernel's output has */
  lgp = malloc((size_t)(rows * padded) * sizeof(float));
  tk = malloc((size_t)(rows * K) * sizeof(int32_t));
  bad = malloc((size_t)(rows * K) * sizeof(int32_t));
  xv = malloc((size_t)(rows * L) * sizeof(double));
  yv = malloc((size_t)(rows * L) * sizeof(double));
  if (!lg || !lgp || !tk || !bad || !xv || !yv) {
    check(0, "out of memory", name);
    goto out;
  }

  /* Logits: calc_diff over the valid entries, exact -inf over the rest, in both. */
  {
    int rc = dsv4_ref_paged_mqa_logits(&l, q, B, next_n, H, kv, num_blocks, bs, block_stride, w, ctx, bt, maxb, lg,
                                       L, L);
    int64_t nv = 0, ninf_bad = 0, nonfinite = 0, first = -1;
    double cd, maxabs = 0.0, maxref = 0.0;
    snprintf(cname, sizeof cname, "%s: paged_mqa_logits returns 0", name);
    check(rc == 0, cname, "");
    if (rc)
      goto out;
    for (int64_t r = 0; r < rows; r++) {
      int64_t n = ctx[r] < L ? ctx[r] : L;
      for (int64_t k = 0; k < L; k++) {
        float g = lg[r * L + k], e = want[r * L + k];
        if (k < n) {
          if (!isfinite(g) || !isfinite(e))
            nonfinite++;
          xv[nv] = g;
          yv[nv] = e;
          nv++;
          maxabs = fmax(maxabs, fabs((double)g - e));
          maxref = fmax(maxref, fabs((double)e));
        } else if (!(isinf(g) && g < 0) || !(isinf(e) && e < 0)) {
          if (first < 0)
            first = r * L + k;
          ninf_bad++;
        }
      }
    }
    cd = calc_diff(xv, yv, nv);
    snprintf(cname, sizeof cname, "%s: valid logits calc_diff < %g (DeepGEMM's tolerance)", name, tlg->tol_calc_diff);
    snprintf(det, sizeof det, "calc_diff %.3e over %lld entries (max |diff| %.3g, max |ref| %.3g), %lld non-finite",
             cd, (long long)nv, maxabs, maxref, (long long)nonfinite);
    check(nonfinite == 0 && nv > 0 && cd < tlg->tol_calc_diff, cname, det);
    printf("     %s\n", det);
    snprintf(cname, sizeof cname, "%s: entries k in [ctx, L) are -inf in both", name);
    snprintf(det, sizeof det, "%lld bad, first at flat %lld", (long long)ninf_bad, (long long)first);
    check(ninf_bad == 0, cname, det);
  }

  /* Padded row stride: same values, padding untouched. */
  {
    const float sentinel = 12345.0f;
    int64_t diff = 0, touched = 0;
    for (int64_t i = 0; i < rows * padded; i++)
      lgp[i] = sentinel;
    int rc = dsv4_ref_paged_mqa_logits(&l, q, B, next_n, H, kv, num_blocks, bs, block_stride, w, ctx, bt, maxb, lgp,
                                       L, padded);
    for (int64_t r = 0; r < rows; r++) {
      for (int64_t k = 0; k < L; k++)
        if (memcmp(&lgp[r * padded + k], &lg[r * L + k], sizeof(float)) != 0)
          diff++;
      for (int64_t k = L; k < padded; k++)
        if (lgp[r * padded + k] != sentinel)
          touched++;
    }
    snprintf(cname, sizeof cname, "%s: row_stride %lld gives the same bits, padding untouched", name,
             (long long)padded);
    snprintf(det, sizeof det, "rc %d, %lld differ, %lld padding written", rc, (long long)diff, (long long)touched);
    check(rc == 0 && diff == 0 && touched == 0, cname, det);
  }

  /* Top-k on the EXPECTED logits: exactly topk_sorted. */
  {
    int rc = dsv4_ref_topk(want, rows, L, ctx, K, tk);
    int64_t mism = 0, first = -1;
    for (int64_t i = 0; i < rows * K; i++)
      if (tk[i] != wtk[i] && !mism++)
        first = i;
    snprintf(cname, sizeof cname, "%s: topk on the expected logits == topk_sorted", name);
    snprintf(det, sizeof det, "rc %d, %lld mismatches, first at [%lld, %lld]: got %d want %d", rc, (long long)mism,
             first < 0 ? -1LL : (long long)(first / K), first < 0 ? -1LL : (long long)(first % K),
             first < 0 ? 0 : tk[first], first < 0 ? 0 : wtk[first]);
    check(rc == 0 && mism == 0, cname, det);
  }

  /* Top-k on our own logits passes the tie-tolerant check against our logits. */
  {
    int rc = dsv4_ref_topk(lg, rows, L, ctx, K, tk);
    err[0] = 0;
    int ck = rc == 0 ? dsv4_ref_topk_check(lg, rows, L, ctx, K, tk, err, sizeof err) : 1;
    snprintf(cname, sizeof cname, "%s: topk on the reference logits passes topk_check", name);
    check(rc == 0 && ck == 0, cname, err);
  }

  /* The checker accepts the golden answer and a reordering of it. */
  err[0] = 0;
  snprintf(cname, sizeof cname, "%s: topk_check accepts topk_sorted", name);
  check(dsv4_ref_topk_check(want, rows, L, ctx, K, wtk, err, sizeof err) == 0, cname, err);
  for (int64_t r = 0; r < rows; r++) { /* reverse each row's filled prefix */
    int64_t m = ctx[r] < K ? ctx[r] : K;
    for (int64_t j = 0; j < K; j++)
      bad[r * K + j] = j < m ? wtk[r * K + (m - 1 - j)] : wtk[r * K + j];
  }
  err[0] = 0;
  snprintf(cname, sizeof cname, "%s: topk_check accepts every row reversed (order is free)", name);
  check(dsv4_ref_topk_check(want, rows, L, ctx, K, bad, err, sizeof err) == 0, cname, err);

  /* Corruptions: a long row (ctx > K) and a short one, where the case has them. */
  {
    int64_t rl = -1, rs = -1;
    for (int64_t r = 0; r < rows; r++) {
      if (ctx[r] > K && rl < 0)
        rl = r;
      if (ctx[r] > 0 && ctx[r] <= K && rs < 0)
        rs = r;
    }
    snprintf(cname, sizeof cname, "%s: has a row with ctx > K for the corruption tests", name);
    check(rl >= 0, cname, "");
    if (rl >= 0) {
      int32_t *g = bad + rl * K;
      const int32_t *good = wtk + rl * K;
      const float *row = want + rl * L;
      unsigned char *chosen = calloc((size_t)ctx[rl], 1);
      int64_t jmax = 0, u = -1;

      memcpy(bad, wtk, (size_t)(rows * K) * sizeof(int32_t));
      g[1] = g[0];
      snprintf(cname, sizeof cname, "%s: topk_check rejects a duplicate (row %lld)", name, (long long)rl);
      expect_reject(want, rows, L, ctx, K, bad, cname);

      memcpy(g, good, (size_t)K * sizeof(int32_t));
      g[K - 1] = -1;
      snprintf(cname, sizeof cname, "%s: topk_check rejects a -1 in a row with ctx > K", name);
      expect_reject(want, rows, L, ctx, K, bad, cname);

      memcpy(g, good, (size_t)K * sizeof(int32_t));
      g[K / 2] = ctx[rl];
      snprintf(cname, sizeof cname, "%s: topk_check rejects a position == ctx", name);
      expect_reject(want, rows, L, ctx, K, bad, cname);

      memcpy(g, good, (size_t)K * sizeof(int32_t));
      g[0] = -7;
      snprintf(cname, sizeof cname, "%s: topk_check rejects a negative position other than -1", name);
      expect_reject(want, rows, L, ctx, K, bad, cname);

      /* Swap the largest chosen position for an unchosen one with a strictly smaller logit. */
      memcpy(g, good, (size_t)K * sizeof(int32_t));
      if (chosen) {
        for (int64_t j = 0; j < K; j++) {
          chosen[good[j]] = 1;
          if (row[good[j]] > row[good[jmax]])
            jmax = j;
        }
        for (int64_t k = 0; k < ctx[rl] && u < 0; k++)
          if (!chosen[k] && row[k] < row[good[jmax]])
            u = k;
      }
      snprintf(cname, sizeof cname, "%s: topk_check rejects a chosen position swapped for a smaller unchosen one",
               name);
      if (u < 0) {
        check(0, cname, "no smaller unchosen position found");
      } else {
        g[jmax] = (int32_t)u;
        expect_reject(want, rows, L, ctx, K, bad, cname);
      }
      free(chosen);
      memcpy(g, good, (size_t)K * sizeof(int32_t));
    }
    if (rs >= 0) {
      int32_t *g = bad + rs * K;
      const int32_t *good = wtk + rs * K;
      memcpy(bad, wtk, (size_t)(rows * K) * sizeof(int32_t));
      g[ctx[rs] - 1] = -1;
      snprintf(cname, sizeof cname, "%s: topk_check rejects a missing position in a row with ctx <= K", name);
      expect_reject(want, rows, L, ctx, K, bad, cname);
      if (ctx[rs] < K) {
        memcpy(g, good, (size_t)K * sizeof(int32_t));
        g[ctx[rs]] = 0;
        snprintf(cname, sizeof cname, "%s: topk_check rejects a non -1 past ctx in a row with ctx <= K", name);
        expect_reject(want, rows, L, ctx, K, bad, cname);
      }
    }
  }

out:
  free(lg);
  free(lgp);
  free(tk);
  free(bad);
  free(xv);
  free(yv);
  golden_close(c);
}

/* Hand-made top-k rows: ties at the threshold (lowest positions win, either way passes the check), signed
 * zeros, NaN ranking, short rows, K = 0, and argument validation writing nothing. */
static void test_topk_synthetic(void)
{
  char err[256];
  /* Row 0: ties at the threshold value 2.0 (positions 1, 3, 4, 6); K = 3 takes 5.0 and two of the ties. */
  const float row0[8] = {1.0f, 2.0f, 0.5f, 2.0f, 2.0f, 5.0f, 2.0f, -1.0f};
  const float zeros[6] = {-0.0f, 0.0f, -1.0f, -0.0f, 1.0f, 0.0f};
  const float nanrow[5] = {1.0f, NAN, INFINITY, -INFINITY, 3.0f};
  int32_t ctx1[1] = {8}, out[8];
  int rc;

  rc = dsv4_ref_topk(row0, 1, 8, ctx1, 3, out);
  check(rc == 0 && out[0] == 1 && out[1] == 3 && out[2] == 5, "topk: ties at the threshold go to the lowest positions",
        "");
  {
    int32_t alt[3] = {6, 5, 4}; /* the other tie-break, in another order */
    err[0] = 0;
    check(dsv4_ref_topk_check(row0, 1, 8, ctx1, 3, alt, err, sizeof err) == 0,
          "topk_check: accepts ties at the threshold broken the other way", err);
    int32_t worse[3] = {5, 1, 0}; /* 1.0 chosen over an unchosen 2.0 */
    expect_reject(row0, 1, 8, ctx1, 3, worse, "topk_check: rejects a smaller logit chosen over a larger one");
  }
  {
    int32_t c6[1] = {6};
    rc = dsv4_ref_topk(zeros, 1, 6, c6, 4, out);
    check(rc == 0 && out[0] == 0 && out[1] == 1 && out[2] == 3 && out[3] == 4,
          "topk: -0.0 ranks equal to +0.0 (lowest positions among the zeros)", "");
    int32_t alt[4] = {4, 5, 1, 0};
    err[0] = 0;
    check(dsv4_ref_topk_check(zeros, 1, 6, c6, 4, alt, err, sizeof err) == 0,
          "topk_check: +0.0 and -0.0 are ties", err);
  }
  {
    int32_t c5[1] = {5};
    rc = dsv4_ref_topk(nanrow, 1, 5, c5, 2, out);
    check(rc == 0 && out[0] == 1 && out[1] == 2, "topk: NaN ranks above +inf", "");
  }
  {
    int32_t c3[2] = {3, 0};
    int32_t o[8];
    rc = dsv4_ref_topk(NULL, 2, 0, c3, 4, o);
    check(rc == 0 && o[0] == 0 && o[1] == 1 && o[2] == 2 && o[3] == -1 && o[4] == -1 && o[7] == -1,
          "topk: ctx <= K rows are 0..ctx-1 then -1 without reading logits", "");
    err[0] = 0;
    int32_t perm[8] = {2, 0, 1, -1, -1, -1, -1, -1};
    check(dsv4_ref_topk_check(NULL, 2, 0, c3, 4, perm, err, sizeof err) == 0,
          "topk_check: ctx <= K accepts 0..ctx-1 in any order", err);
    int32_t c4[1] = {4};
    int32_t exact[4] = {0, 1, 2, 3};
    rc = dsv4_ref_topk(row0, 1, 8, c4, 4, o);
    check(rc == 0 && memcmp(o, exact, sizeof exact) == 0, "topk: ctx == K gives 0..K-1", "");
  }
  {
    int32_t o[4] = {99, 99, 99, 99};
    rc = dsv4_ref_topk(row0, 1, 8, ctx1, 0, o);
    check(rc == 0 && o[0] == 99, "topk: K = 0 writes nothing", "");
    int32_t neg[2] = {8, -1};
    int32_t o2[6] = {99, 99, 99, 99, 99, 99};
    rc = dsv4_ref_topk(row0, 2, 8, neg, 3, o2);
    check(rc != 0 && o2[0] == 99 && o2[2] == 99, "topk: a negative ctx fails and writes nothing", "");
    int32_t big[1] = {9};
    rc = dsv4_ref_topk(row0, 1, 8, big, 3, o2);
    check(rc != 0 && o2[0] == 99, "topk: ctx > row_stride (ctx > K) fails", "");
    rc = dsv4_ref_topk(row0, 1, 8, ctx1, -1, o2);
    check(rc != 0, "topk: K < 0 fails", "");
    err[0] = 0;
    rc = dsv4_ref_topk_check(row0, 1, 8, neg + 1, 3, o2, err, sizeof err);
    check(rc != 0 && err[0], "topk_check: invalid arguments fail with a message", err);
  }
}

/* A small hand-built cache: the logit formula directly (incl. next_n = 2, a permuted block table, ctx > L,
 * ctx = 0, relu and negative weights) and argument validation writing nothing. */
static void test_logits_synthetic(void)
{
  dsv4_layout l = dsv4_check_layout_indexer();
  enum { BS = 4, NB = 3, STRIDE = BS * 132 + 16, Bn = 1, NN = 2, H = 2, D = 128, L = 10, MAXB = 3 };
  static uint8_t cache[NB * STRIDE];
  static uint8_t q[Bn * NN * H * D];
  float w[Bn * NN * H] = {0.5f, -2.0f, 1.5f, 0.25f};
  int32_t ctx[Bn * NN] = {7, 12}, bt[Bn * MAXB] = {2, 0, 1};
  float lg[Bn * NN * L], ref[Bn * NN * L];
  unsigned s = 12345u;
  int bad = 0, rc;

  for (size_t i = 0; i < sizeof cache; i++) {
    s = s * 1103515245u + 12345u;
    cache[i] = (uint8_t)(s >> 16);
    if ((cache[i] & 0x7F) == 0x7F) /* no NaN codes */
      cache[i] ^= 1;
  }
  for (size_t i = 0; i < sizeof q; i++) {
    s = s * 1103515245u + 12345u;
    q[i] = (uint8_t)((s >> 16) & 0xBF); /* moderate magnitudes, both signs */
  }
  for (int b = 0; b < NB; b++) /* f32 scales: powers of two */
    for (int t = 0; t < BS; t++) {
      float sc = ldexpf(1.0f, (b * BS + t) % 5 - 2);
      memcpy(cache + (int64_t)b * STRIDE + BS * 128 + t * 4, &sc, 4);
    }
  for (int r = 0; r < NN; r++) {
    int64_t n = ctx[r] < L ? ctx[r] : L;
    for (int64_t k = 0; k < L; k++) {
      if (k >= n) {
        ref[r * L + k] = -INFINITY;
        continue;
      }
      const uint8_t *blk = cache + (int64_t)bt[k / BS] * STRIDE;
      float sc;
      memcpy(&sc, blk + BS * 128 + (k % BS) * 4, 4);
      double acc = 0.0;
      for (int h = 0; h < H; h++) {
        double dot = 0.0;
        for (int d = 0; d < D; d++)
          dot += (double)dsv4_ref_e4m3_to_f32(q[(r * H + h) * D + d]) *
                 dsv4_ref_e4m3_to_f32(blk[(k % BS) * 128 + d]);
        acc += (double)w[r * H + h] * (dot > 0 ? dot : 0.0);
      }
      ref[r * L + k] = (float)(sc * acc);
    }
  }
  rc = dsv4_ref_paged_mqa_logits(&l, q, Bn, NN, H, cache, NB, BS, STRIDE, w, ctx, bt, MAXB, lg, L, L);
  for (int i = 0; i < NN * L; i++)
    if (memcmp(&lg[i], &ref[i], 4) != 0)
      bad++;
  check(rc == 0 && bad == 0, "logits: hand-built cache matches the formula bit for bit (ctx < L, ctx > L)", "");

  {
    int32_t z[2] = {0, 0};
    rc = dsv4_ref_paged_mqa_logits(&l, NULL, Bn, NN, H, NULL, NB, BS, STRIDE, NULL, z, NULL, MAXB, lg, L, L);
    int allinf = 1;
    for (int i = 0; i < NN * L; i++)
      allinf &= isinf(lg[i]) && lg[i] < 0;
    check(rc == 0 && allinf, "logits: ctx = 0 rows are all -inf (nothing else read)", "");
  }

  /* Validation: each failure leaves the output untouched. */
  {
    struct {
      const char *what;
      int kind;
    } cases[] = {{"a block-table entry >= num_blocks", 0}, {"a negative block-table entry", 1},
                 {"k/bs >= maxb", 2},                      {"a negative ctx", 3},
                 {"a layout with two segments", 4},        {"a UE8M0-scaled layout", 5},
                 {"a layout with a per-64 scale group", 6}, {"row_stride < L", 7},
                 {"a block stride too small", 8}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      dsv4_layout lb = dsv4_check_layout_indexer();
      int32_t bt2[MAXB] = {2, 0, 1}, ctx2[2] = {7, 12};
      int64_t maxb = MAXB, stride = STRIDE, rs = L;
      char name[160];
      switch (cases[c].kind) {
      case 0: bt2[1] = NB; break;
      case 1: bt2[2] = -1; break;
      case 2: maxb = 2; break;
      case 3: ctx2[0] = -1; break;
      case 4:
        lb.nseg = 2;
        lb.seg[0].d1 = 64;
        lb.seg[1] = lb.seg[0];
        lb.seg[1].d0 = 64, lb.seg[1].d1 = 128, lb.seg[1].offset = 64;
        break;
      case 5: lb.seg[0].scale_type = DSV4_DT_UE8M0; break;
      case 6: lb.seg[0].scale_group = 64; lb.seg[0].d1 = 128; break;
      case 7: rs = L - 1; break;
      case 8: stride = BS * 132 - 4; break;
      }
      for (int i = 0; i < NN * L; i++)
        lg[i] = 7.0f;
      rc = dsv4_ref_paged_mqa_logits(&lb, q, Bn, NN, H, cache, stride == STRIDE ? NB : 1, BS, stride, w, ctx2, bt2,
                                     maxb, lg, L, rs);
      int untouched = 1;
      for (int i = 0; i < NN * L; i++)
        untouched &= lg[i] == 7.0f;
      snprintf(name, sizeof name, "logits: %s fails and writes nothing", cases[c].what);
      check(rc != 0 && untouched, name, "");
    }
  }
  {
    /* Block-table entries past the used range are not validated: ctx 4 uses block 0 only. */
    int32_t bt3[MAXB] = {1, -5, 99}, ctx3[2] = {4, 3};
    rc = dsv4_ref_paged_mqa_logits(&l, q, Bn, NN, H, cache, NB, BS, STRIDE, w, ctx3, bt3, MAXB, lg, L, L);
    check(rc == 0, "logits: unused block-table entries are not checked", "");
  }
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: %s GOLDEN_ROOT\n", argv[0]);
    return 1;
  }
  const char *groot = golden_root(argv[1]);
  if (groot) {
    test_golden(groot, "indexer_logits_n1");
    test_golden(groot, "indexer_logits_n2");
  }
  test_topk_synthetic();
  test_logits_synthetic();
  printf("%d passed, %d failed\n", n_pass, n_fail);
  return n_fail ? 1 : 0;
}
