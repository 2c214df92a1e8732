/* dsv4_ref.c -- plain-C11 host reference for the dsv4c ops (docs/ops.md), in four files: the
 * number formats, layouts and the dequant-gathers (here, sections 1 and 2), the writers
 * (ref_insert.c), the sparse decode (ref_decode.c) and the indexer (ref_indexer.c); ref_internal.h
 * has what they share.  Written from docs/ops.md and dsv4_layout.h, not from any kernel.  Never
 * prints, never exits. */
#include "dsv4_ref.h"
#include "ref_internal.h"
#include "../src/layout_check.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Reinterpret 32 bits as fp32 (no aliasing UB). */
float rf_f32_from_bits(uint32_t u)
{
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Reinterpret fp32 as its 32 bits (no aliasing UB). */
uint32_t rf_f32_bits(float f)
{
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

/* Little-endian 16-bit load, independent of host byte order. */
uint16_t rf_ld_le16(const uint8_t *p)
{
  return (uint16_t)(p[0] | ((uint16_t)p[1] << 8));
}

/* Little-endian 32-bit load, independent of host byte order. */
uint32_t rf_ld_le32(const uint8_t *p)
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
    return rf_f32_from_bits(sign | 0x7FC00000u); /* NaN, sign kept */
  if (e == 0) {
    float v = (float)m * 0x1p-9f;          /* M/8 * 2^-6 */
    return sign ? -v : v;
  }
  return rf_f32_from_bits(sign | ((e - 7u + 127u) << 23) | (m << 20));
}

/* Round-to-nearest-even on the top 16 bits; overflow correctly rounds to inf; NaN -> 0x7FC0. */
uint16_t dsv4_ref_f32_to_bf16(float f)
{
  uint32_t u = rf_f32_bits(f);
  if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu) != 0)
    return 0x7FC0u;
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

/* bf16 is the top half of fp32. */
float dsv4_ref_bf16_to_f32(uint16_t h)
{
  return rf_f32_from_bits((uint32_t)h << 16);
}

/* 2^(b-127) built from bits: b in 1..254 is a normal with exponent field b, 0 is 2^-127, 255 is +inf. */
float dsv4_ref_ue8m0_to_f32(uint8_t b)
{
  if (b == 0)
    return rf_f32_from_bits(0x00400000u);
  if (b == 255)
    return rf_f32_from_bits(0x7F800000u);
  return rf_f32_from_bits((uint32_t)b << 23);
}

/* Decode one stored value of dtype t at p to fp32 (0 for types that are not value types). */
float rf_load_value(int t, const uint8_t *p)
{
  switch (t) {
  case DSV4_DT_E4M3:
    return dsv4_ref_e4m3_to_f32(p[0]);
  case DSV4_DT_BF16:
    return dsv4_ref_bf16_to_f32(rf_ld_le16(p));
  case DSV4_DT_F32:
    return rf_f32_from_bits(rf_ld_le32(p));
  default:
    return 0.0f;
  }
}

/* Decode one stored scale of dtype t at p to fp32. */
float rf_load_scale(int t, const uint8_t *p)
{
  if (t == DSV4_DT_UE8M0)
    return dsv4_ref_ue8m0_to_f32(p[0]);
  return rf_f32_from_bits(rf_ld_le32(p));
}

/* Byte offset of token 0's scale row inside a block, and the per-token scale row stride. */
void rf_scale_geometry(const dsv4_layout *l, int64_t bs, int64_t *base, int64_t *stride)
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
  rf_scale_geometry(l, bs, &sbase, &sstride);
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
        x = dsv4_ref_f32_to_bf16(rf_load_value(sg->type, p) * tensor_scale);
      } else if (scaled) {
        const uint8_t *sp = srow + (int64_t)sg->scale_offset + (i / sg->scale_group) * ss;
        x = dsv4_ref_f32_to_bf16(rf_load_value(sg->type, p) * rf_load_scale(sg->scale_type, sp));
      } else if (sg->type == DSV4_DT_BF16) {
        x = rf_ld_le16(p);
      } else {
        x = dsv4_ref_f32_to_bf16(rf_load_value(sg->type, p));
      }
      out_bf16[d] = x;
    }
  }
}

/* Validate a layout (the rule the runtime's bundle reader uses too,
 * layout_check.c) and the cache geometry (bs, num_blocks, block_stride);
 * 0 if usable. */
int rf_check_layout(const dsv4_layout *l, int64_t num_blocks, int64_t bs, int64_t block_stride)
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

/* docs/ops.md 2a: validate every index first so that a failure writes nothing, then gather. */
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
  if (rf_check_layout(l, num_blocks, bs, block_stride) || n < 0)
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

/* docs/ops.md 2b: validate every request's range and block-table entries first, then gather. */
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
  if (rf_check_layout(l, num_blocks, bs, block_stride) || R < 0 || maxb < 0 || offset < 0 || M < 0)
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
