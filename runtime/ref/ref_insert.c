/* ref_insert.c -- the reference writers: e4m3 and UE8M0 quantization, the KV quant-insert into
 * every cache layout and the fused q-norm + RoPE (docs/ops.md sections 1, 4, 5 and 8). */
#include "dsv4_ref.h"
#include "ref_internal.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---- Writers (docs/ops.md sections 1, 4, 5 and 8) ---- */

/* Little-endian 16-bit store, independent of host byte order. */
static void st_le16(uint8_t *p, uint16_t v)
{
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}

/* Little-endian 32-bit store, independent of host byte order. */
static void st_le32(uint8_t *p, uint32_t v)
{
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

/* From the format: value = sign * units * 2^qexp with qexp = max(E, -6) - 3 (E the binade, -6 the
 * smallest normal binade, 3 mantissa bits); the fp32 significand is shifted down to whole units with
 * round-to-nearest-even on the dropped bits, and the code is the unit count plus the binade's base code,
 * so a carry out of the mantissa moves into the next binade (or from subnormal 7 to normal 0x08). */
uint8_t dsv4_ref_f32_to_e4m3(float x)
{
  uint32_t u = rf_f32_bits(x);
  uint8_t sign = (uint8_t)((u >> 31) << 7);
  uint32_t field = (u >> 23) & 0xFFu, mant = u & 0x007FFFFFu;
  uint32_t sig, shift, units, rem, half;
  int32_t e;

  if (field == 0xFFu && mant != 0)
    return 0x7Fu;                       /* NaN */
  if (fabsf(x) > 448.0f)
    return (uint8_t)(sign | 0x7Eu);     /* satfinite, infinities included */
  if (field == 0)
    return sign;                        /* zero or fp32 subnormal (< 2^-126): far below 2^-10 */
  e = (int32_t)field - 127;
  sig = mant | 0x00800000u;             /* |x| = sig * 2^(e-23) */
  shift = 20u + (uint32_t)(e < -6 ? -6 - e : 0);
  if (shift >= 25u)
    return sign;                        /* |x| < 2^-10: below half the smallest subnormal */
  units = sig >> shift;
  rem = sig & ((1u << shift) - 1u);
  half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (units & 1u)))
    units++;
  if (e < -6)
    return (uint8_t)(sign | units);     /* units in [0, 8]; 8 is the smallest normal 0x08 */
  /* e in [-6, 8]; units in [8, 16]; the |x| <= 448 test keeps the result at or below 0x7E. */
  return (uint8_t)(sign | (uint32_t)(((e + 7) << 3) + (int32_t)units - 8));
}

/* ceil(log2(q)) of a positive fp32 q, exact from its bits: a power of two gives its exponent, anything
 * else the next one up; +inf and NaN give 128 (the UE8M0 byte then clamps to 255). */
static int ceil_log2_f32(float q)
{
  uint32_t u = rf_f32_bits(q), field = (u >> 23) & 0xFFu, mant = u & 0x007FFFFFu;
  if (field == 0xFFu)
    return 128;
  if (field == 0) {                     /* subnormal q: not reachable behind the 1e-4 floors */
    int p = 22;
    while (p > 0 && !(mant >> p))
      p--;
    return p - 149 + ((mant & (mant - 1u)) != 0);
  }
  return (int)field - 127 + (mant != 0);
}

/* Exact is right: amax is a bf16 value m*2^j (m an 8-bit significand) and 448 = 7*2^6, so amax/448 is a
 * power of two only when m = 224 (amax = 448*2^k), and otherwise lies at least a factor 224/223 from every
 * power of two; the 1e-4 floor gives log2 of about -22.09.  fp32 division and log2 errors are far smaller than that
 * margin, so this equals vLLM's fp32 torch.ceil(torch.log2(amax / 448)) on every input its writers see. */
int dsv4_ref_quant_exponent(float amax)
{
  if (amax != amax)
    return 128;
  return ceil_log2_f32((amax > 1e-4f ? amax : 1e-4f) / 448.0f);
}

/* FlashMLA tests/quant.py (_cast_scale_inv_to_ue8m0) floors the quotient instead of amax; same exactness
 * argument (log2(1e-4f) is about -13.29, far from an integer). */
int dsv4_ref_quant_exponent_flashmla(float amax)
{
  float q;
  if (amax != amax)
    return 128;
  q = amax / 448.0f;
  return ceil_log2_f32(q > 1e-4f ? q : 1e-4f);
}

/* The float 2^e built from its bits (e in [-149, 127]; +inf above, 0 below): the f32 scale stored. */
static float pow2f_bits(int e)
{
  if (e > 127)
    return rf_f32_from_bits(0x7F800000u);
  if (e >= -126)
    return rf_f32_from_bits((uint32_t)(e + 127) << 23);
  if (e >= -149)
    return rf_f32_from_bits(1u << (e + 149));
  return 0.0f;
}

/* RoPE range check shared by the writers: rope_dims 0 means none, else even and inside [0, dim), with a
 * cos/sin table of max_pos > 0 rows whose size fits 64 bits; 0 if usable. */
static int check_rope(int64_t dim, int rope_first, int rope_dims, const float *cos_sin, int64_t max_pos)
{
  if (rope_dims == 0)
    return 0;
  if (rope_dims < 0 || (rope_dims & 1) || rope_first < 0 || (int64_t)rope_first + rope_dims > dim)
    return 1;
  if (!cos_sin || max_pos <= 0 || max_pos > INT64_MAX / rope_dims)
    return 1;
  return 0;
}

/* The writers' value rule for dim d of a bf16 row: widen, apply GPT-J RoPE in fp32 when d is in the rope
 * range (cs = cos_sin row of the position, NULL for no rope), round to bf16 and widen again.  The two
 * products are separate statements so that no FMA contraction is allowed (ISO C). */
static float kv_value(const uint16_t *row, int64_t d, const float *cs, int rope_first, int rope_dims)
{
  float x = dsv4_ref_bf16_to_f32(row[d]);
  if (cs && d >= rope_first && d < (int64_t)rope_first + rope_dims) {
    int64_t i = (d - rope_first) / 2, de = rope_first + 2 * i;
    float c = cs[i], s = cs[rope_dims / 2 + i];
    float xe = dsv4_ref_bf16_to_f32(row[de]), xo = dsv4_ref_bf16_to_f32(row[de + 1]);
    float a, b;
    if (d == de) {
      a = xe * c;
      b = xo * s;
      x = a - b;
    } else {
      a = xe * s;
      b = xo * c;
      x = a + b;
    }
  }
  return dsv4_ref_bf16_to_f32(dsv4_ref_f32_to_bf16(x));
}

/* Segments the writer can store: e4m3 (scaled by a stored UE8M0/f32 group scale or not), unscaled bf16
 * and unscaled f32; never a per-tensor scale.  0 if every segment is writable. */
static int check_insert_segments(const dsv4_layout *l)
{
  for (int32_t s = 0; s < l->nseg; s++) {
    const dsv4_segment *sg = &l->seg[s];
    if (sg->scale_tensor)
      return 1;
    if (sg->type != DSV4_DT_E4M3 && sg->scale_type != DSV4_DT_NONE)
      return 1;
  }
  return 0;
}

/* Write one validated row into its slot: zero a block-tail scale row, then store every segment. */
static void insert_row(const dsv4_layout *l, const uint16_t *row, const float *cs, int rope_first, int rope_dims,
                       int (*qexp)(float), uint8_t *block, int64_t bs, int64_t r)
{
  int64_t sbase, sstride;
  uint8_t *data = block + r * (int64_t)l->row_bytes, *srow;
  rf_scale_geometry(l, bs, &sbase, &sstride);
  srow = block + sbase + r * sstride;
  if (l->scale_place == DSV4_SCALES_BLOCK_TAIL)
    memset(srow, 0, (size_t)l->scale_row_bytes);
  for (int32_t s = 0; s < l->nseg; s++) {
    const dsv4_segment *sg = &l->seg[s];
    int64_t n = (int64_t)sg->d1 - sg->d0;
    uint8_t *p = data + (int64_t)sg->offset;
    if (sg->type == DSV4_DT_E4M3 && sg->scale_type != DSV4_DT_NONE) {
      int64_t G = sg->scale_group, ss = dsv4_dtype_size(sg->scale_type);
      for (int64_t g0 = 0, gi = 0; g0 < n; g0 += G, gi++) {
        int64_t g1 = g0 + G < n ? g0 + G : n;
        float amax = 0.0f;
        int e;
        for (int64_t i = g0; i < g1; i++) {
          float ax = fabsf(kv_value(row, sg->d0 + i, cs, rope_first, rope_dims));
          if (ax > amax || ax != ax) /* a NaN sticks: later comparisons with it are false */
            amax = ax;
        }
        e = qexp(amax);
        uint8_t *sp = srow + (int64_t)sg->scale_offset + gi * ss;
        if (sg->scale_type == DSV4_DT_UE8M0)
          sp[0] = (uint8_t)(e + 127 < 0 ? 0 : (e + 127 > 255 ? 255 : e + 127));
        else
          st_le32(sp, rf_f32_bits(pow2f_bits(e)));
        for (int64_t i = g0; i < g1; i++) {
          float v = ldexpf(kv_value(row, sg->d0 + i, cs, rope_first, rope_dims), -e); /* exact */
          v = v > 448.0f ? 448.0f : (v < -448.0f ? -448.0f : v);                      /* NaN stays */
          p[i] = dsv4_ref_f32_to_e4m3(v);
        }
      }
    } else {
      int64_t ts = dsv4_dtype_size(sg->type);
      for (int64_t i = 0; i < n; i++) {
        float v = kv_value(row, sg->d0 + i, cs, rope_first, rope_dims);
        if (sg->type == DSV4_DT_E4M3)
          p[i] = dsv4_ref_f32_to_e4m3(v);
        else if (sg->type == DSV4_DT_BF16)
          st_le16(p + i * ts, dsv4_ref_f32_to_bf16(v));
        else
          st_le32(p + i * ts, rf_f32_bits(v));
      }
    }
  }
}

/* docs/ops.md sections 1 and 5 KV branch with vLLM's exponent rule (see dsv4_ref_kv_insert_ex). */
int dsv4_ref_kv_insert(const dsv4_layout *l, const uint16_t *kv, int64_t N, const int64_t *slot_mapping,
                       int64_t n_ins, const int64_t *positions, const float *cos_sin, int64_t max_pos, int rope_first,
                       int rope_dims, uint8_t *cache, int64_t num_blocks, int64_t bs, int64_t block_stride)
{
  return dsv4_ref_kv_insert_ex(l, kv, N, slot_mapping, n_ins, positions, cos_sin, max_pos, rope_first, rope_dims,
                               cache, num_blocks, bs, block_stride, DSV4_REF_FLOOR_AMAX);
}

/* Generic over the layout: validate everything (layout, segments, RoPE, every written row's slot and
 * position) before the first byte is stored, then write row by row with the chosen exponent rule. */
int dsv4_ref_kv_insert_ex(const dsv4_layout *l, const uint16_t *kv, int64_t N, const int64_t *slot_mapping,
                          int64_t n_ins, const int64_t *positions, const float *cos_sin, int64_t max_pos,
                          int rope_first, int rope_dims, uint8_t *cache, int64_t num_blocks, int64_t bs,
                          int64_t block_stride, int floor_rule)
{
  int64_t rows, nslots;
  int (*qexp)(float) = floor_rule == DSV4_REF_FLOOR_AMAX       ? dsv4_ref_quant_exponent
                        : floor_rule == DSV4_REF_FLOOR_QUOTIENT ? dsv4_ref_quant_exponent_flashmla
                                                                : NULL;
  if (!qexp || rf_check_layout(l, num_blocks, bs, block_stride) || check_insert_segments(l) || N < 0 || n_ins < 0)
    return 1;
  if (check_rope(l->dim, rope_first, rope_dims, cos_sin, max_pos))
    return 1;
  rows = n_ins < N ? n_ins : N;
  if (rows > 0 && (!kv || !slot_mapping || !cache || (rope_dims > 0 && !positions)))
    return 1;
  if (rows > 0 && N > INT64_MAX / l->dim)
    return 1;
  nslots = num_blocks * bs;
  for (int64_t n = 0; n < rows; n++) {
    if (slot_mapping[n] < 0)
      continue;
    if (slot_mapping[n] >= nslots)
      return 1;
    if (rope_dims > 0 && (positions[n] < 0 || positions[n] >= max_pos))
      return 1;
  }
  for (int64_t n = 0; n < rows; n++) {
    int64_t s = slot_mapping[n];
    const float *cs = rope_dims > 0 ? cos_sin + positions[n] * (int64_t)rope_dims : NULL;
    if (s < 0)
      continue;
    insert_row(l, kv + n * (int64_t)l->dim, cs, rope_first, rope_dims, qexp, cache + (s / bs) * block_stride, bs,
               s % bs);
  }
  return 0;
}

/* docs/ops.md section 5 Q branch: RMS-normalize each head without a weight, rotate the rope dims in fp32 and
 * round once; padded heads are +0.0.  Rope pairs are read before either is written, so q_out == q works. */
int dsv4_ref_q_norm_rope(const uint16_t *q, int64_t N, int64_t H, int64_t Hp, int64_t D, const int64_t *positions,
                         const float *cos_sin, int64_t max_pos, int rope_first, int rope_dims, float eps,
                         uint16_t *q_out)
{
  if (N < 0 || H < 0 || Hp < H || D <= 0)
    return 1;
  if (check_rope(D, rope_first, rope_dims, cos_sin, max_pos))
    return 1;
  if (Hp > 0 && (N > INT64_MAX / Hp || N * Hp > INT64_MAX / D))
    return 1;
  if (N > 0 && Hp > 0 && !q_out)
    return 1;
  if (N > 0 && H > 0 && (!q || (rope_dims > 0 && !positions)))
    return 1;
  if (rope_dims > 0 && H > 0)
    for (int64_t n = 0; n < N; n++)
      if (positions[n] < 0 || positions[n] >= max_pos)
        return 1;
  for (int64_t n = 0; n < N; n++) {
    const float *cs = rope_dims > 0 && H > 0 ? cos_sin + positions[n] * (int64_t)rope_dims : NULL;
    for (int64_t h = 0; h < H; h++) {
      const uint16_t *x = q + (n * H + h) * D;
      uint16_t *o = q_out + (n * Hp + h) * D;
      double acc = 0.0;
      float ms, r;
      for (int64_t d = 0; d < D; d++) {
        double v = dsv4_ref_bf16_to_f32(x[d]);
        acc += v * v;
      }
      ms = (float)acc / (float)D;
      r = 1.0f / sqrtf(ms + eps);
      for (int64_t d = 0; d < D; d++) {
        if (cs && d >= rope_first && d < (int64_t)rope_first + rope_dims) {
          int64_t i = (d - rope_first) / 2;
          float c = cs[i], s = cs[rope_dims / 2 + i];
          float ye = dsv4_ref_bf16_to_f32(x[d]) * r, yo = dsv4_ref_bf16_to_f32(x[d + 1]) * r;
          float a = ye * c, b = yo * s, a2 = ye * s, b2 = yo * c;
          float re = a - b, ro = a2 + b2;
          o[d] = dsv4_ref_f32_to_bf16(re);
          o[d + 1] = dsv4_ref_f32_to_bf16(ro);
          d++;
          continue;
        }
        o[d] = dsv4_ref_f32_to_bf16(dsv4_ref_bf16_to_f32(x[d]) * r);
      }
    }
    for (int64_t h = H; h < Hp; h++) {
      uint16_t *o = q_out + (n * Hp + h) * D;
      for (int64_t d = 0; d < D; d++)
        o[d] = 0;
    }
  }
  return 0;
}
