/* ref_decode.c -- the reference sparse MLA decode, in double precision with FlashMLA's
 * roundings (docs/ops.md sections 3 and 8). */
#include "dsv4_ref.h"
#include "ref_internal.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---- Sparse MLA decode (docs/ops.md sections 3 and 8) ---- */

/* Round a double to bf16 bits once, nearest-even (not via fp32, which could round twice); NaN -> 0x7FC0. */
static uint16_t bf16_from_double(double x)
{
  uint16_t sign;
  double a, m, r;
  int e, qe;
  if (x != x)
    return 0x7FC0u;
  sign = signbit(x) ? 0x8000u : 0u;
  a = fabs(x);
  if (a == 0.0)
    return sign;
  if (isinf(a))
    return (uint16_t)(sign | 0x7F80u);
  (void)frexp(a, &e);                   /* a in [2^(e-1), 2^e): 8 significant bits step by 2^(e-8) */
  qe = e - 8 < -133 ? -133 : e - 8;     /* bf16 subnormals share fp32's 2^-126 floor, 7 fraction bits */
  m = nearbyint(ldexp(a, -qe));         /* exact scaling, then RNE (the default rounding mode) */
  r = ldexp(m, qe);                     /* a bf16 value, possibly the next binade up */
  if (r >= 0x1p128)
    return (uint16_t)(sign | 0x7F80u);
  return (uint16_t)(sign | dsv4_ref_f32_to_bf16((float)r)); /* exact: r is representable */
}

/* Round a double to fp32, giving +-inf past FLT_MAX's rounding midpoint instead of an out-of-range cast. */
float rf_f32_from_double(double x)
{
  if (x >= 0x1.ffffffp127)
    return INFINITY;
  if (x <= -0x1.ffffffp127)
    return -INFINITY;
  return (float)x;
}

/* Participating count bound of row t of a list: min(lens[t], topk), a negative length counting as 0. */
static int64_t row_len(const int32_t *lens, int64_t t, int64_t topk)
{
  int64_t n = lens[t];
  return n < 0 ? 0 : (n < topk ? n : topk);
}

/* docs/ops.md 3 validity: each position j < row_len holds -1 or a slot < nslots (0 if so); counts into cnt[t]. */
static int check_index_list(const int32_t *idx, const int32_t *lens, int64_t T, int64_t topk, int64_t nslots,
                            int64_t *cnt)
{
  for (int64_t t = 0; t < T; t++) {
    int64_t n = row_len(lens, t, topk);
    for (int64_t j = 0; j < n; j++) {
      int64_t v = idx[t * topk + j];
      if (v == -1)
        continue;
      if (v < 0 || v >= nslots)
        return 1;
      cnt[t]++;
    }
  }
  return 0;
}

/* One slot's K in double: bf16 dequant widened, but raw unscaled values on per-tensor dims (docs/ops.md 8 fold). */
static void load_k(const dsv4_layout *l, const uint8_t *block, int64_t bs, int64_t row, uint16_t *tmp, double *k)
{
  const uint8_t *data = block + row * (int64_t)l->row_bytes;
  dsv4_ref_dequant_token_ts(l, block, bs, row, 1.0f, tmp);
  for (int64_t d = 0; d < l->dim; d++)
    k[d] = dsv4_ref_bf16_to_f32(tmp[d]);
  for (int32_t s = 0; s < l->nseg; s++) {
    const dsv4_segment *sg = &l->seg[s];
    int64_t ts = dsv4_dtype_size(sg->type);
    if (sg->scale_type == DSV4_DT_NONE || !sg->scale_tensor)
      continue;
    for (int64_t d = sg->d0; d < sg->d1; d++)
      k[d] = rf_load_value(sg->type, data + (int64_t)sg->offset + (d - sg->d0) * ts);
  }
}

/* docs/ops.md 3 + 8's fold: validate all, then per token dequantize its slots once and softmax each head in double;
 * pv_abs and n_valid (either may be NULL) as dsv4_ref_sparse_decode_cond says. */
static int sparse_decode(const dsv4_layout *l, int v_dim, const uint16_t *q, int64_t T, int64_t H,
                         const uint8_t *cache, int64_t num_blocks, int64_t bs, int64_t block_stride,
                         const int32_t *indices, const int32_t *lens, int64_t topk,
                         const uint8_t *extra, int64_t extra_num_blocks, int64_t extra_bs, int64_t extra_stride,
                         const int32_t *extra_indices, const int32_t *extra_lens, int64_t extra_topk,
                         const float *attn_sink, float softmax_scale, float tensor_scale,
                         uint16_t *out, float *lse, float *pv_abs, int64_t *n_valid, float *lse_abs)
{
  int use_extra = extra != NULL && extra_topk != 0;
  int64_t D, nmax = 0, *cnt = NULL;
  double *kbuf = NULL, *sbuf = NULL, *abuf = NULL, *acc = NULL, *aacc = NULL;
  uint16_t *tmp = NULL;
  unsigned char *raw = NULL;
  int has_raw = 0, rc = 1;

  if (rf_check_layout(l, num_blocks, bs, block_stride) || T < 0 || H < 0 || topk < 0 || extra_topk < 0)
    return 1;
  if (use_extra && rf_check_layout(l, extra_num_blocks, extra_bs, extra_stride))
    return 1;
  D = l->dim;
  if (v_dim < 1 || v_dim > D)
    return 1;
  if (T == 0 || H == 0)
    return 0;
  if (H > INT64_MAX / T || T * H > INT64_MAX / D || (topk > 0 && T > INT64_MAX / topk) ||
      (use_extra && T > INT64_MAX / extra_topk) || topk > INT64_MAX - extra_topk)
    return 1;
  if (!q || !out || !lse || (topk > 0 && (!cache || !indices || !lens)) ||
      (use_extra && (!extra_indices || !extra_lens)))
    return 1;
  if ((uint64_t)T > SIZE_MAX / sizeof(int64_t) || !(cnt = calloc((size_t)T, sizeof(int64_t))))
    return 1;
  if ((topk > 0 && check_index_list(indices, lens, T, topk, num_blocks * bs, cnt)) ||
      (use_extra && check_index_list(extra_indices, extra_lens, T, extra_topk, extra_num_blocks * extra_bs, cnt)))
    goto done;
  for (int64_t t = 0; t < T; t++)
    nmax = cnt[t] > nmax ? cnt[t] : nmax;
  if ((uint64_t)nmax > SIZE_MAX / sizeof(double) / (uint64_t)D)
    goto done;
  kbuf = malloc((size_t)(nmax > 0 ? nmax : 1) * (size_t)D * sizeof(double));
  sbuf = malloc((size_t)(nmax > 0 ? nmax : 1) * sizeof(double));
  abuf = malloc((size_t)(nmax > 0 ? nmax : 1) * sizeof(double));
  acc = malloc((size_t)D * sizeof(double));
  aacc = malloc((size_t)D * sizeof(double));
  tmp = malloc((size_t)D * sizeof(uint16_t));
  raw = calloc((size_t)D, 1);
  if (!kbuf || !sbuf || !abuf || !acc || !aacc || !tmp || !raw)
    goto done;
  for (int32_t s = 0; s < l->nseg; s++)
    if (l->seg[s].scale_type != DSV4_DT_NONE && l->seg[s].scale_tensor)
      for (int64_t d = l->seg[s].d0; d < l->seg[s].d1; d++)
        raw[d] = 1, has_raw = 1;

  for (int64_t t = 0; t < T; t++) {
    int64_t n = 0;
    /* Gather the participating K vectors of both lists (main first; the softmax is order-free). */
    for (int list = 0; list < 2; list++) {
      const int32_t *ix = list ? extra_indices : indices;
      const uint8_t *base = list ? extra : cache;
      int64_t k = list ? extra_topk : topk, b = list ? extra_bs : bs, st = list ? extra_stride : block_stride;
      int64_t len;
      if (list ? !use_extra : topk == 0)
        continue;
      len = row_len(list ? extra_lens : lens, t, k);
      for (int64_t j = 0; j < len; j++) {
        int64_t v = ix[t * k + j];
        if (v == -1)
          continue;
        load_k(l, base + (v / b) * st, b, v % b, tmp, kbuf + n * D);
        n++;
      }
    }
    if (n_valid)
      n_valid[t] = n;
    for (int64_t h = 0; h < H; h++) {
      const uint16_t *qr = q + (t * H + h) * D;
      uint16_t *o = out + (t * H + h) * (int64_t)v_dim;
      float *pa = pv_abs ? pv_abs + (t * H + h) * (int64_t)v_dim : NULL;
      double m = -INFINITY, sum = 0.0, ls, den;
      if (pa)
        for (int64_t d = 0; d < v_dim; d++)
          pa[d] = 0.0f;
      if (n == 0) { /* no participating index: out 0, lse +inf, whatever the sink */
        for (int64_t d = 0; d < v_dim; d++)
          o[d] = 0;
        lse[t * H + h] = INFINITY;
        if (lse_abs)
          lse_abs[t * H + h] = 0.0f;
        continue;
      }
      for (int64_t j = 0; j < n; j++) {
        const double *kj = kbuf + j * D;
        double dp = 0.0, dr = 0.0, ap = 0.0, ar = 0.0;
        for (int64_t d = 0; d < D; d++) {
          double x = (double)dsv4_ref_bf16_to_f32(qr[d]) * kj[d];
          if (raw[d])
            dr += x, ar += fabs(x);
          else
            dp += x, ap += fabs(x);
        }
        sbuf[j] = has_raw ? softmax_scale * (dp + (double)tensor_scale * dr) : softmax_scale * dp;
        abuf[j] = fabs((double)softmax_scale) * (ap + fabs((double)tensor_scale) * ar);
        if (sbuf[j] > m)
          m = sbuf[j];
      }
      if (m == -INFINITY) { /* every score -inf: sum exp = 0, so lse = -inf and the output is 0 */
        for (int64_t d = 0; d < v_dim; d++)
          o[d] = 0;
        lse[t * H + h] = -INFINITY;
        if (lse_abs)
          lse_abs[t * H + h] = 0.0f;
        continue;
      }
      for (int64_t j = 0; j < n; j++)
        sum += exp(sbuf[j] - m);
      ls = m + log(sum);
      for (int64_t d = 0; d < v_dim; d++)
        acc[d] = 0.0, aacc[d] = 0.0;
      for (int64_t j = 0; j < n; j++) {
        const double *kj = kbuf + j * D;
        double w = exp(sbuf[j] - ls);
        for (int64_t d = 0; d < v_dim; d++)
          acc[d] += w * kj[d];
        if (pa)
          for (int64_t d = 0; d < v_dim; d++)
            aacc[d] += w * fabs(kj[d]);
      }
      den = 1.0 + (attn_sink ? exp((double)attn_sink[h] - ls) : 0.0);
      for (int64_t d = 0; d < v_dim; d++)
        o[d] = bf16_from_double((raw[d] ? (double)tensor_scale * acc[d] : acc[d]) / den);
      if (pa)
        for (int64_t d = 0; d < v_dim; d++)
          pa[d] = rf_f32_from_double((raw[d] ? fabs((double)tensor_scale) * aacc[d] : aacc[d]) / den);
      lse[t * H + h] = rf_f32_from_double(ls);
      if (lse_abs) { /* what lse's fp32 arithmetic rounds: the two terms of m + ln S, and the scores' summands */
        double a = fabs(m) + fabs(ls - m);
        for (int64_t j = 0; j < n; j++)
          a += exp(sbuf[j] - ls) * abuf[j];
        lse_abs[t * H + h] = rf_f32_from_double(a);
      }
    }
  }
  rc = 0;
done:
  free(cnt);
  free(kbuf);
  free(sbuf);
  free(abuf);
  free(acc);
  free(aacc);
  free(tmp);
  free(raw);
  return rc;
}

int dsv4_ref_sparse_decode(const dsv4_layout *l, int v_dim, const uint16_t *q, int64_t T, int64_t H,
                           const uint8_t *cache, int64_t num_blocks, int64_t bs, int64_t block_stride,
                           const int32_t *indices, const int32_t *lens, int64_t topk,
                           const uint8_t *extra, int64_t extra_num_blocks, int64_t extra_bs, int64_t extra_stride,
                           const int32_t *extra_indices, const int32_t *extra_lens, int64_t extra_topk,
                           const float *attn_sink, float softmax_scale, float tensor_scale,
                           uint16_t *out, float *lse)
{
  return sparse_decode(l, v_dim, q, T, H, cache, num_blocks, bs, block_stride, indices, lens, topk, extra,
                       extra_num_blocks, extra_bs, extra_stride, extra_indices, extra_lens, extra_topk, attn_sink,
                       softmax_scale, tensor_scale, out, lse, NULL, NULL, NULL);
}

int dsv4_ref_sparse_decode_cond(const dsv4_layout *l, int v_dim, const uint16_t *q, int64_t T, int64_t H,
                                const uint8_t *cache, int64_t num_blocks, int64_t bs, int64_t block_stride,
                                const int32_t *indices, const int32_t *lens, int64_t topk,
                                const uint8_t *extra, int64_t extra_num_blocks, int64_t extra_bs,
                                int64_t extra_stride, const int32_t *extra_indices, const int32_t *extra_lens,
                                int64_t extra_topk, const float *attn_sink, float softmax_scale,
                                float tensor_scale, uint16_t *out, float *lse, float *pv_abs, int64_t *n_valid,
                                float *lse_abs)
{
  if (!pv_abs || !n_valid)
    return 1;
  return sparse_decode(l, v_dim, q, T, H, cache, num_blocks, bs, block_stride, indices, lens, topk, extra,
                       extra_num_blocks, extra_bs, extra_stride, extra_indices, extra_lens, extra_topk, attn_sink,
                       softmax_scale, tensor_scale, out, lse, pv_abs, n_valid, lse_abs);
}
