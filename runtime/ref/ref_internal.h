/* ref_internal.h -- what the reference's four files share (dsv4_ref.c has
 * the formats and layouts; ref_decode.c the double-to-fp32 rounding).
 * Not installed, not part of dsv4_ref.h's interface. */
#ifndef DSV4_REF_INTERNAL_H
#define DSV4_REF_INTERNAL_H

#include <stdint.h>

#include "dsv4_layout.h"

/* Bits as fp32 and back (no aliasing UB); little-endian loads, independent of host byte order. */
float rf_f32_from_bits(uint32_t u);
uint32_t rf_f32_bits(float f);
uint16_t rf_ld_le16(const uint8_t *p);
uint32_t rf_ld_le32(const uint8_t *p);
/* One stored value (e4m3, bf16, f32; 0 for other types) or scale (UE8M0, else f32) of dtype t at p, as fp32. */
float rf_load_value(int t, const uint8_t *p);
float rf_load_scale(int t, const uint8_t *p);
/* Byte offset of token 0's scale row inside a block, and the per-token scale row stride. */
void rf_scale_geometry(const dsv4_layout *l, int64_t bs, int64_t *base, int64_t *stride);
/* A usable layout (layout_check.c's rule) and cache geometry: 0 if so. */
int rf_check_layout(const dsv4_layout *l, int64_t num_blocks, int64_t bs, int64_t block_stride);
/* A double rounded to fp32, +-inf past FLT_MAX's rounding midpoint instead of an out-of-range cast. */
float rf_f32_from_double(double x);

#endif
