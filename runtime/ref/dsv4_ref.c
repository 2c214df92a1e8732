/* dsv4_ref.c -- plain-C11 host reference for the dsv4c dequant ops (OPS.md sections 1 and 2).
 * Written from OPS.md and dsv4_layout.h, not from any kernel.  Never prints, never exits. */
#include "dsv4_ref.h"
#include "../src/layout_check.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h> /* snprintf only, for dsv4_ref_topk_check messages */
#include <stdlib.h>
#include <string.h>

/* Reinterpret 32 bits as fp32 (no aliasing UB). */
static float f32_from_bits(uint32_t u)
{
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Reinterpret fp32 as its 32 bits (no aliasing UB). */
static uint32_t f32_bits(float f)
{
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* Little-endian 16-bit load, independent of host byte order. */
static uint16_t ld_le16(const uint8_t *p)
{
  return (uint16_t)(p[0] | ((uint16_t)p[1] << 8));
}

/* Little-endian 32-bit load, independent of host byte order. */
static uint32_t ld_le32(const uint8_t *p)
{
  return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* e4m3fn: normals map onto fp32 fields directly, subnormals are M * 2^-9 (exact). */
float dsv4_ref_e4m3_to_f32(uint8_t b)
{
  uint32_t sign = (uint32_t)(b >> 7) << 31;
  uint32_t e = (b >> 3) & 0xFu;
  uint32_t m = b & 0x7u;
  if (e == 0xFu && m == 0x7u)
    return f32_from_bits(sign | 0x7FC00000u); /* NaN, sign kept */
  if (e == 0) {
    float v = (float)m * 0x1p-9f;          /* M/8 * 2^-6 */
    return sign ? -v : v;
  }
  return f32_from_bits(sign | ((e - 7u + 127u) << 23) | (m << 20));
}

/* Round-to-nearest-even on the top 16 bits; overflow correctly rounds to inf; NaN -> 0x7FC0. */
uint16_t dsv4_ref_f32_to_bf16(float f)
{
  uint32_t u = f32_bits(f);
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu) != 0)
    return 0x7FC0u;
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

/* bf16 is the top half of fp32. */
float dsv4_ref_bf16_to_f32(uint16_t h)
{
  return f32_from_bits((uint32_t)h << 16);
}

/* 2^(b-127) built from bits: b in 1..254 is a normal with exponent field b, 0 is 2^-127, 255 is +inf. */
float dsv4_ref_ue8m0_to_f32(uint8_t b)
{
  if (b == 0)
    return f32_from_bits(0x00400000u);
  if (b == 255)
    return f32_from_bits(0x7F800000u);
  return f32_from_bits((uint32_t)b << 23);
}

/* Decode one stored value of dtype t at p to fp32 (0 for types that are not value types). */
static float load_value(int t, const uint8_t *p)
{
  switch (t) {
  case DSV4_DT_E4M3:
    return dsv4_ref_e4m3_to_f32(p[0]);
  case DSV4_DT_BF16:
    return dsv4_ref_bf16_to_f32(ld_le16(p));
  case DSV4_DT_F32:
    return f32_from_bits(ld_le32(p));
  default:
    return 0.0f;
  }
}

/* Decode one stored scale of dtype t at p to fp32. */
static float load_scale(int t, const uint8_t *p)
{
  if (t == DSV4_DT_UE8M0)
    return dsv4_ref_ue8m0_to_f32(p[0]);
  return f32_from_bits(ld_le32(p));
}

/* Byte offset of token 0's scale row inside a block, and the per-token scale row stride. */
static void scale_geometry(const dsv4_layout *l, int64_t bs, int64_t *base, int64_t *stride)
{
  if (l->scale_place == DSV4_SCALES_BLOCK_TAIL) {
    *base = bs * (int64_t)l->row_bytes;
    *stride = l->scale_row_bytes;
  } else {
    *base = 0;
    *stride = l->row_bytes;
  }
}

/* Generic per-token dequant, following the addressing comment of dsv4_layout.h. */
void dsv4_ref_dequant_token(const dsv4_layout *l, const uint8_t *block, int64_t bs, int64_t row,
                            uint16_t *out_bf16)
{
  dsv4_ref_dequant_token_ts(l, block, bs, row, 1.0f, out_bf16);
}

/* The same with the per-tensor scale of layouts that have one. */
void dsv4_ref_dequant_token_ts(const dsv4_layout *l, const uint8_t *block, int64_t bs, int64_t row,
                               float tensor_scale, uint16_t *out_bf16)
{
  int64_t sbase, sstride;
  int32_t nseg = l->nseg < 0 ? 0 : (l->nseg > DSV4_LAYOUT_MAX_SEGS ? DSV4_LAYOUT_MAX_SEGS : l->nseg);
  const uint8_t *data = block + row * (int64_t)l->row_bytes;

  for (int64_t d = 0; d < l->dim; d++)
    out_bf16[d] = 0;
  scale_geometry(l, bs, &sbase, &sstride);
  const uint8_t *srow = block + sbase + row * sstride;

  for (int32_t s = 0; s < nseg; s++) {
    const dsv4_segment *sg = &l->seg[s];
    int64_t ts = dsv4_dtype_size(sg->type);
    int scaled = sg->scale_type != DSV4_DT_NONE;
    int64_t ss = dsv4_dtype_size(sg->scale_type);
    if (sg->type != DSV4_DT_E4M3 && sg->type != DSV4_DT_BF16 && sg->type != DSV4_DT_F32)
      continue;
    if (scaled && (sg->scale_type != DSV4_DT_UE8M0 && sg->scale_type != DSV4_DT_F32))
      continue;
    if (scaled && !sg->scale_tensor && (sg->scale_group <= 0 || l->scale_place == DSV4_SCALES_NONE))
      continue;
    for (int64_t d = sg->d0; d < sg->d1; d++) {
      int64_t i = d - sg->d0;
      const uint8_t *p = data + (int64_t)sg->offset + i * ts;
      uint16_t x;
      if (d < 0 || d >= l->dim)
        continue;
      if (scaled && sg->scale_tensor) {
        x = dsv4_ref_f32_to_bf16(load_value(sg->type, p) * tensor_scale);
      } else if (scaled) {
        const uint8_t *sp = srow + (int64_t)sg->scale_offset + (i / sg->scale_group) * ss;
        x = dsv4_ref_f32_to_bf16(load_value(sg->type, p) * load_scale(sg->scale_type, sp));
      } else if (sg->type == DSV4_DT_BF16) {
        x = ld_le16(p);
      } else {
        x = dsv4_ref_f32_to_bf16(load_value(sg->type, p));
      }
      out_bf16[d] = x;
    }
  }
}

/* Validate a layout (the rule the runtime's bundle reader uses too,
 * layout_check.c) and the cache geometry (bs, num_blocks, block_stride);
 * 0 if usable. */
static int check_layout(const dsv4_layout *l, int64_t num_blocks, int64_t bs, int64_t block_stride)
{
  int64_t per;
  if (dsv4_layout_valid(l, NULL, 0))
    return 1;
  if (bs <= 0 || num_blocks < 0 || block_stride <= 0)
    return 1;
  per = (int64_t)l->row_bytes + (l->scale_place == DSV4_SCALES_BLOCK_TAIL ? l->scale_row_bytes : 0);
  if (bs > INT64_MAX / per || block_stride < bs * per)
    return 1;
  if (num_blocks > INT64_MAX / bs || num_blocks > INT64_MAX / block_stride)
    return 1;
  return 0;
}

/* OPS.md 2a: validate every index first so that a failure writes nothing, then gather. */
int dsv4_ref_dequant_gather(const dsv4_layout *l, const uint8_t *cache, int64_t num_blocks, int64_t bs,
                            int64_t block_stride, const int32_t *indices, int64_t n, uint16_t *out)
{
  return dsv4_ref_dequant_gather_ts(l, cache, num_blocks, bs, block_stride, 1.0f, indices, n, out);
}

int dsv4_ref_dequant_gather_ts(const dsv4_layout *l, const uint8_t *cache, int64_t num_blocks, int64_t bs,
                               int64_t block_stride, float tensor_scale, const int32_t *indices, int64_t n,
                               uint16_t *out)
{
  int64_t nslots;
  if (check_layout(l, num_blocks, bs, block_stride) || n < 0)
    return 1;
  if (n > 0 && (!indices || !out || !cache))
    return 1;
  nslots = num_blocks * bs;
  for (int64_t i = 0; i < n; i++)
    if (indices[i] >= 0 && (int64_t)indices[i] >= nslots)
      return 1;
  for (int64_t i = 0; i < n; i++) {
    uint16_t *o = out + i * (int64_t)l->dim;
    int64_t s = indices[i];
    if (s < 0) {
      for (int64_t d = 0; d < l->dim; d++)
        o[d] = 0;
      continue;
    }
    dsv4_ref_dequant_token_ts(l, cache + (s / bs) * block_stride, bs, s % bs, tensor_scale, o);
  }
  return 0;
}

/* OPS.md 2b: validate every request's range and block-table entries first, then gather. */
int dsv4_ref_paged_gather(const dsv4_layout *l, const uint8_t *cache, int64_t num_blocks, int64_t bs,
                          int64_t block_stride, const int32_t *seq_lens, const int32_t *gather_lens,
                          const int32_t *block_table, int64_t R, int64_t maxb, int64_t offset, uint16_t *out,
                          int64_t out_stride_r, int64_t out_stride_m, int64_t M)
{
  return dsv4_ref_paged_gather_ts(l, cache, num_blocks, bs, block_stride, 1.0f, seq_lens, gather_lens, block_table,
                                  R, maxb, offset, out, out_stride_r, out_stride_m, M);
}

int dsv4_ref_paged_gather_ts(const dsv4_layout *l, const uint8_t *cache, int64_t num_blocks, int64_t bs,
                             int64_t block_stride, float tensor_scale, const int32_t *seq_lens,
                             const int32_t *gather_lens, const int32_t *block_table, int64_t R, int64_t maxb,
                             int64_t offset, uint16_t *out, int64_t out_stride_r, int64_t out_stride_m, int64_t M)
{
  if (check_layout(l, num_blocks, bs, block_stride) || R < 0 || maxb < 0 || offset < 0 || M < 0)
    return 1;
  if (R > 0 && (!seq_lens || !block_table || !out || !cache))
    return 1;
  if (R > 0 && maxb > INT64_MAX / R)
    return 1;
  for (int64_t r = 0; r < R; r++) {
    int64_t s = seq_lens[r];
    int64_t g = gather_lens ? gather_lens[r] : s;
    if (g < 0 || g > s || offset > M - g)
      return 1;
    if (g == 0)
      continue;
    int64_t b0 = (s - g) / bs, b1 = (s - 1) / bs; /* logical blocks touched */
    if (b1 >= maxb)
      return 1;
    for (int64_t b = b0; b <= b1; b++) {
      int64_t blk = block_table[r * maxb + b];
      if (blk < 0 || blk >= num_blocks)
        return 1;
    }
  }
  for (int64_t r = 0; r < R; r++) {
    int64_t s = seq_lens[r];
    int64_t g = gather_lens ? gather_lens[r] : s;
    for (int64_t i = 0; i < g; i++) {
      int64_t pos = s - g + i;
      int64_t blk = block_table[r * maxb + pos / bs];
      uint16_t *o = out + r * out_stride_r + (offset + i) * out_stride_m;
      dsv4_ref_dequant_token_ts(l, cache + blk * block_stride, bs, pos % bs, tensor_scale, o);
    }
  }
  return 0;
}

/* ---- Writers (OPS.md sections 1, 4, 5 and 8) ---- */

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
  uint32_t u = f32_bits(x);
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
  uint32_t u = f32_bits(q), field = (u >> 23) & 0xFFu, mant = u & 0x007FFFFFu;
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
    return f32_from_bits(0x7F800000u);
  if (e >= -126)
    return f32_from_bits((uint32_t)(e + 127) << 23);
  if (e >= -149)
    return f32_from_bits(1u << (e + 149));
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
  scale_geometry(l, bs, &sbase, &sstride);
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
          st_le32(sp, f32_bits(pow2f_bits(e)));
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
          st_le32(p + i * ts, f32_bits(v));
      }
    }
  }
}

/* OPS.md sections 1 and 5 KV branch with vLLM's exponent rule (see dsv4_ref_kv_insert_ex). */
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
  if (!qexp || check_layout(l, num_blocks, bs, block_stride) || check_insert_segments(l) || N < 0 || n_ins < 0)
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

/* OPS.md section 5 Q branch: RMS-normalize each head without a weight, rotate the rope dims in fp32 and
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

/* ---- Sparse MLA decode (OPS.md sections 3 and 8) ---- */

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
static float f32_from_double(double x)
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

/* OPS.md 3 validity: each position j < row_len holds -1 or a slot < nslots (0 if so); counts into cnt[t]. */
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

/* One slot's K in double: bf16 dequant widened, but raw unscaled values on per-tensor dims (OPS.md 8 fold). */
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
      k[d] = load_value(sg->type, data + (int64_t)sg->offset + (d - sg->d0) * ts);
  }
}

/* OPS.md 3 + 8's fold: validate all, then per token dequantize its slots once and softmax each head in double;
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

  if (check_layout(l, num_blocks, bs, block_stride) || T < 0 || H < 0 || topk < 0 || extra_topk < 0)
    return 1;
  if (use_extra && check_layout(l, extra_num_blocks, extra_bs, extra_stride))
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
          pa[d] = f32_from_double((raw[d] ? fabs((double)tensor_scale) * aacc[d] : aacc[d]) / den);
      lse[t * H + h] = f32_from_double(ls);
      if (lse_abs) { /* what lse's fp32 arithmetic rounds: the two terms of m + ln S, and the scores' summands */
        double a = fabs(m) + fabs(ls - m);
        for (int64_t j = 0; j < n; j++)
          a += exp(sbuf[j] - ls) * abuf[j];
        lse_abs[t * H + h] = f32_from_double(a);
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

/* ---- Indexer: paged MQA logits and top-k (OPS.md section 4) ---- */

/* The indexer layout of OPS.md 4: a valid layout/geometry with one e4m3 segment over every dim and one
 * stored f32 scale per token; 0 if so. */
static int check_indexer_layout(const dsv4_layout *l, int64_t num_blocks, int64_t bs, int64_t block_stride)
{
  const dsv4_segment *sg;
  if (check_layout(l, num_blocks, bs, block_stride) || l->nseg != 1)
    return 1;
  sg = &l->seg[0];
  if (sg->d0 != 0 || sg->d1 != l->dim || sg->type != DSV4_DT_E4M3 || sg->scale_type != DSV4_DT_F32 ||
      sg->scale_tensor || sg->scale_group < l->dim || l->scale_place == DSV4_SCALES_NONE)
    return 1;
  return 0;
}

/* OPS.md 4 logits: validate shapes, every ctx and every block-table entry a valid k touches, then compute
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
  scale_geometry(l, bs, &sbase, &sstride);
  for (int64_t r = 0; r < rows; r++) {
    int64_t c = context_lens[r], n = c < L ? c : L, b = r / next_n;
    float *row = logits + r * row_stride;
    for (int64_t k = 0; k < n; k++) {
      int64_t blk = block_table[b * maxb + k / bs], t = k % bs;
      const uint8_t *block = cache + blk * block_stride;
      const uint8_t *kd = block + t * (int64_t)l->row_bytes + (int64_t)sg->offset;
      double ks = load_scale(DSV4_DT_F32, block + sbase + t * sstride + (int64_t)sg->scale_offset);
      double acc = 0.0;
      for (int64_t h = 0; h < H; h++) {
        const uint8_t *qh = q + (r * H + h) * D;
        double dot = 0.0;
        for (int64_t d = 0; d < D; d++)
          dot += tab[qh[d]] * tab[kd[d]];
        if (!(dot <= 0.0)) /* relu; a NaN dot stays NaN */
          acc += (double)weights[r * H + h] * dot;
      }
      row[k] = f32_from_double(ks * acc);
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
  u = f32_bits(x);
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

/* OPS.md 4 top-k: validate all rows, then per row either the identity prefix or a radix-selected threshold
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
      if (rank_key(row[kmin]) < rank_key(row[kmax])) {
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
