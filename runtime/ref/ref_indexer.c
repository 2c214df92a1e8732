/* ref_indexer.c -- the reference indexer: paged MQA logits and top-k (docs/ops.md section 4). */
#include "dsv4_ref.h"
#include "ref_internal.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h> /* snprintf only, for dsv4_ref_topk_check messages */
#include <stdlib.h>
#include <string.h>

/* ---- Indexer: paged MQA logits and top-k (docs/ops.md section 4) ---- */

/* The indexer layout of docs/ops.md 4: a valid layout/geometry with one e4m3 segment over every dim and one
 * stored f32 scale per token; 0 if so. */
static int check_indexer_layout(const dsv4_layout *l, int64_t num_blocks, int64_t bs, int64_t block_stride)
{
  const dsv4_segment *sg;
  if (rf_check_layout(l, num_blocks, bs, block_stride) || l->nseg != 1)
    return 1;
  sg = &l->seg[0];
  if (sg->d0 != 0 || sg->d1 != l->dim || sg->type != DSV4_DT_E4M3 || sg->scale_type != DSV4_DT_F32 ||
      sg->scale_tensor || sg->scale_group < l->dim || l->scale_place == DSV4_SCALES_NONE)
    return 1;
  return 0;
}

/* docs/ops.md 4 logits: validate shapes, every ctx and every block-table entry a valid k touches, then compute
 * each valid entry in double (e4m3 products are exact) and fill the rest of [0, L) with -inf. */
int dsv4_ref_paged_mqa_logits(const dsv4_layout *l, const uint8_t *q, int64_t B, int64_t next_n, int64_t H,
                              const uint8_t *cache, int64_t num_blocks, int64_t bs, int64_t block_stride,
                              const float *weights, const int32_t *context_lens, const int32_t *block_table,
                              int64_t maxb, float *logits, int64_t L, int64_t row_stride)
{
  double tab[256];
  int64_t D, rows, sbase, sstride;
  const dsv4_segment *sg;

  if (check_indexer_layout(l, num_blocks, bs, block_stride) || B < 0 || next_n < 0 || H < 0 || maxb < 0 ||
      L < 0 || row_stride < L)
    return 1;
  D = l->dim;
  if (next_n > 0 && B > INT64_MAX / next_n)
    return 1;
  rows = B * next_n;
  if (rows == 0 || L == 0)
    return 0;
  if ((H > 0 && (rows > INT64_MAX / H || rows * H > INT64_MAX / D)) || rows > INT64_MAX / row_stride ||
      (maxb > 0 && B > INT64_MAX / maxb))
    return 1;
  if (!logits || !context_lens)
    return 1;
  for (int64_t r = 0; r < rows; r++) {
    int64_t c = context_lens[r], n = c < L ? c : L, b = r / next_n;
    if (c < 0)
      return 1;
    if (n == 0)
      continue;
    if (!block_table || !cache || (H > 0 && (!q || !weights)))
      return 1;
    if ((n - 1) / bs >= maxb)
      return 1;
    for (int64_t i = 0; i <= (n - 1) / bs; i++) {
      int64_t blk = block_table[b * maxb + i];
      if (blk < 0 || blk >= num_blocks)
        return 1;
    }
  }

  for (int i = 0; i < 256; i++)
    tab[i] = dsv4_ref_e4m3_to_f32((uint8_t)i);
  sg = &l->seg[0];
  rf_scale_geometry(l, bs, &sbase, &sstride);
  for (int64_t r = 0; r < rows; r++) {
    int64_t c = context_lens[r], n = c < L ? c : L, b = r / next_n;
    float *row = logits + r * row_stride;
    for (int64_t k = 0; k < n; k++) {
      int64_t blk = block_table[b * maxb + k / bs], t = k % bs;
      const uint8_t *block = cache + blk * block_stride;
      const uint8_t *kd = block + t * (int64_t)l->row_bytes + (int64_t)sg->offset;
      double ks = rf_load_scale(DSV4_DT_F32, block + sbase + t * sstride + (int64_t)sg->scale_offset);
      double acc = 0.0;
      for (int64_t h = 0; h < H; h++) {
        const uint8_t *qh = q + (r * H + h) * D;
        double dot = 0.0;
        for (int64_t d = 0; d < D; d++)
          dot += tab[qh[d]] * tab[kd[d]];
        if (!(dot <= 0.0)) /* relu; a NaN dot stays NaN */
          acc += (double)weights[r * H + h] * dot;
      }
      row[k] = rf_f32_from_double(ks * acc);
    }
    for (int64_t k = n; k < L; k++)
      row[k] = -INFINITY;
  }
  return 0;
}

/* Monotone unsigned key of an fp32 for top-k ranking: -0.0 maps to +0.0's key, every NaN above +inf. */
static uint32_t rank_key(float x)
{
  uint32_t u;
  if (x != x)
    return 0xFFFFFFFFu;
  if (x == 0.0f)
    x = 0.0f;
  u = rf_f32_bits(x);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* Argument checks shared by dsv4_ref_topk and dsv4_ref_topk_check; 0 if usable. */
static int check_topk_args(const float *logits, int64_t rows, int64_t row_stride, const int32_t *ctx, int64_t K,
                           const int32_t *out)
{
  if (rows < 0 || K < 0 || row_stride < 0)
    return 1;
  if (rows == 0)
    return 0;
  if (!ctx || (K > 0 && !out) || (K > 0 && rows > INT64_MAX / K) ||
      (row_stride > 0 && rows > INT64_MAX / row_stride))
    return 1;
  for (int64_t r = 0; r < rows; r++) {
    if (ctx[r] < 0)
      return 1;
    if (ctx[r] > K && (ctx[r] > row_stride || !logits))
      return 1;
  }
  return 0;
}

/* Radix select on rank keys: the K-th largest key T of a row (n > K > 0) and how many entries equal to T
 * belong to the top K (*take_eq), in four 8-bit passes from the top byte down. */
static uint32_t select_threshold(const float *row, int64_t n, int64_t K, int64_t *take_eq)
{
  uint32_t prefix = 0, mask = 0;
  int64_t need = K;
  for (int shift = 24; shift >= 0; shift -= 8) {
    int64_t hist[256] = {0};
    int64_t above = 0;
    int bsel = 0;
    for (int64_t k = 0; k < n; k++) {
      uint32_t key = rank_key(row[k]);
      if ((key & mask) == prefix)
        hist[(key >> shift) & 0xFFu]++;
    }
    for (int bv = 255; bv >= 0; bv--) {
      if (above + hist[bv] >= need) {
        bsel = bv;
        break;
      }
      above += hist[bv];
    }
    need -= above;
    prefix |= (uint32_t)bsel << shift;
    mask |= 0xFFu << shift;
  }
  *take_eq = need;
  return prefix;
}

/* docs/ops.md 4 top-k: validate all rows, then per row either the identity prefix or a radix-selected threshold
 * followed by one ascending pass (ties at the threshold go to the lowest positions). */
int dsv4_ref_topk(const float *logits, int64_t rows, int64_t row_stride, const int32_t *ctx, int64_t K,
                  int32_t *out)
{
  if (check_topk_args(logits, rows, row_stride, ctx, K, out))
    return 1;
  if (K == 0)
    return 0;
  for (int64_t r = 0; r < rows; r++) {
    int64_t n = ctx[r], j = 0, take_eq;
    int32_t *o = out + r * K;
    const float *row;
    uint32_t thr;
    if (n <= K) {
      for (; j < n; j++)
        o[j] = (int32_t)j;
      for (; j < K; j++)
        o[j] = -1;
      continue;
    }
    row = logits + r * row_stride;
    thr = select_threshold(row, n, K, &take_eq);
    for (int64_t k = 0; k < n && j < K; k++) {
      uint32_t key = rank_key(row[k]);
      if (key > thr || (key == thr && take_eq > 0)) {
        if (key == thr)
          take_eq--;
        o[j++] = (int32_t)k;
      }
    }
  }
  return 0;
}

/* Tie-tolerant top-k check: per row, membership/duplicate/-1 rules with a marks array, then for long rows
 * min(chosen key) >= max(unchosen key); the first problem goes to err. */
int dsv4_ref_topk_check(const float *logits, int64_t rows, int64_t row_stride, const int32_t *ctx, int64_t K,
                        const int32_t *got, char *err, size_t errlen)
{
  return dsv4_ref_topk_check_within(logits, rows, row_stride, ctx, K, got, 0, err, errlen);
}

int dsv4_ref_topk_check_within(const float *logits, int64_t rows, int64_t row_stride, const int32_t *ctx, int64_t K,
                               const int32_t *got, double tol, char *err, size_t errlen)
{
  unsigned char *mark = NULL;
  int64_t cap = 0;
  int rc = 1;
  char msg[256];

  msg[0] = 0;
  if (check_topk_args(logits, rows, row_stride, ctx, K, got)) {
    snprintf(msg, sizeof msg, "invalid arguments");
    goto done;
  }
  for (int64_t r = 0; r < rows; r++)
    cap = ctx[r] > cap ? ctx[r] : cap;
  if ((uint64_t)cap > SIZE_MAX - 1 || !(mark = malloc((size_t)cap + 1))) {
    snprintf(msg, sizeof msg, "out of memory");
    goto done;
  }
  for (int64_t r = 0; r < rows; r++) {
    int64_t n = ctx[r], m = n < K ? n : K;
    const int32_t *g = got + r * K;
    memset(mark, 0, (size_t)n + 1);
    for (int64_t j = 0; j < m; j++) {
      int64_t v = g[j];
      if (v == -1) {
        snprintf(msg, sizeof msg, "row %lld: entry %lld is -1 but the row (ctx %lld, K %lld) needs %lld positions",
                 (long long)r, (long long)j, (long long)n, (long long)K, (long long)m);
        goto done;
      }
      if (v < 0 || v >= n) {
        snprintf(msg, sizeof msg, "row %lld: entry %lld = %lld is outside [0, ctx %lld)", (long long)r, (long long)j,
                 (long long)v, (long long)n);
        goto done;
      }
      if (mark[v]) {
        snprintf(msg, sizeof msg, "row %lld: entry %lld = %lld is a duplicate", (long long)r, (long long)j,
                 (long long)v);
        goto done;
      }
      mark[v] = 1;
    }
    for (int64_t j = m; j < K; j++)
      if (g[j] != -1) {
        snprintf(msg, sizeof msg, "row %lld: entry %lld = %lld, want -1 past ctx %lld", (long long)r, (long long)j,
                 (long long)g[j], (long long)n);
        goto done;
      }
    if (n > K && K > 0) {
      const float *row = logits + r * row_stride;
      int64_t kmin = -1, kmax = -1;
      for (int64_t k = 0; k < n; k++) {
        uint32_t key = rank_key(row[k]);
        if (mark[k] && (kmin < 0 || key < rank_key(row[kmin])))
          kmin = k;
        if (!mark[k] && (kmax < 0 || key > rank_key(row[kmax])))
          kmax = k;
      }
      double big = 0; /* the row's largest finite magnitude: what tol is relative to */
      for (int64_t k = 0; tol > 0 && k < n; k++)
        big = isfinite(row[k]) && fabs(row[k]) > big ? fabs(row[k]) : big;
      int finite = isfinite(row[kmin]) && isfinite(row[kmax]);
      if (tol > 0 && finite ? (double)row[kmin] < (double)row[kmax] - tol * big
                            : rank_key(row[kmin]) < rank_key(row[kmax])) {
        snprintf(msg, sizeof msg, "row %lld: chosen position %lld (logit %.9g) < unchosen position %lld (logit %.9g)",
                 (long long)r, (long long)kmin, (double)row[kmin], (long long)kmax, (double)row[kmax]);
        goto done;
      }
    }
  }
  rc = 0;
done:
  free(mark);
  if (rc && err && errlen > 0)
    snprintf(err, errlen, "%s", msg);
  return rc;
}
