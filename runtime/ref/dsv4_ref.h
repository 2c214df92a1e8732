/* dsv4_ref.h -- plain-C11 host reference for the dsv4c dequant ops
 * (OPS.md sections 1 and 2).  Library code: never prints, never exits.
 *
 * Every function reads the cache through a dsv4_layout (dsv4_layout.h), so
 * any layout expressible as data is supported, not only DSv4 fp8_ds_mla.
 * All byte offsets are computed in 64-bit arithmetic.
 */
#ifndef DSV4_REF_H
#define DSV4_REF_H

#include <stdint.h>

#include "dsv4_layout.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Decode one OCP e4m3fn byte (bias 7, no inf, 0x7F/0xFF NaN, subnormals M/8*2^-6) exactly to fp32. */
float dsv4_ref_e4m3_to_f32(uint8_t b);

/* Round fp32 to bf16 bits, nearest-even; every NaN becomes 0x7FC0 (PyTorch's canonical NaN). */
uint16_t dsv4_ref_f32_to_bf16(float f);

/* Widen bf16 bits to fp32 (exact). */
float dsv4_ref_bf16_to_f32(uint16_t h);

/* UE8M0 scale byte b -> exp2f(b-127) exactly in fp32 (b=0 gives subnormal 2^-127, b=255 gives +inf). */
float dsv4_ref_ue8m0_to_f32(uint8_t b);

/* Dequantize token `row` of the block starting at `block` (bs tokens per block) into l->dim bf16 values,
 * following the layout's addressing; dims covered by no segment are +0.0.  The layout is trusted here
 * (the gather functions validate it); segments that are malformed are skipped. */
void dsv4_ref_dequant_token(const dsv4_layout *l, const uint8_t *block, int64_t bs, int64_t row,
                            uint16_t *out_bf16);

/* OPS.md 2a: out[i, :] (row-major [n, l->dim] bf16) = dequant(slot indices[i]), or +0.0 for indices[i] < 0.
 * Returns 0 on success; nonzero, with nothing written, if the layout/arguments are invalid or any
 * non-negative index is >= num_blocks*bs. */
int dsv4_ref_dequant_gather(const dsv4_layout *l, const uint8_t *cache, int64_t num_blocks, int64_t bs,
                            int64_t block_stride, const int32_t *indices, int64_t n, uint16_t *out);

/* OPS.md 2b (dequantize_and_gather_k_cache): for request r < R and i < g_r (g_r = gather_lens[r], or
 * seq_lens[r] when gather_lens is NULL), pos = seq_lens[r] - g_r + i,
 * out[r*out_stride_r + (offset+i)*out_stride_m + d] = dequant(block_table[r*maxb + pos/bs], pos%bs)[d].
 * Rows outside [offset, offset+g_r) are untouched.  Strides are in bf16 elements; the last dim is
 * contiguous.  Returns 0 on success; nonzero, with nothing written, if the layout/arguments are invalid,
 * g_r < 0, g_r > seq_lens[r], offset < 0, offset+g_r > M, pos/bs >= maxb or a block index is outside
 * [0, num_blocks). */
int dsv4_ref_paged_gather(const dsv4_layout *l, const uint8_t *cache, int64_t num_blocks, int64_t bs,
                          int64_t block_stride, const int32_t *seq_lens,
                          const int32_t *gather_lens /* may be NULL */, const int32_t *block_table,
                          int64_t R, int64_t maxb, int64_t offset, uint16_t *out, int64_t out_stride_r,
                          int64_t out_stride_m /* in elements */, int64_t M);

/* The three above with tensor_scale, the launch-time scale of layouts whose
 * scale is per tensor (dsv4_segment.scale_tensor; the per-tensor FP8
 * kv_scale).  The names without _ts pass 1.0. */
void dsv4_ref_dequant_token_ts(const dsv4_layout *l, const uint8_t *block, int64_t bs, int64_t row,
                               float tensor_scale, uint16_t *out_bf16);
int dsv4_ref_dequant_gather_ts(const dsv4_layout *l, const uint8_t *cache, int64_t num_blocks, int64_t bs,
                               int64_t block_stride, float tensor_scale, const int32_t *indices, int64_t n,
                               uint16_t *out);
int dsv4_ref_paged_gather_ts(const dsv4_layout *l, const uint8_t *cache, int64_t num_blocks, int64_t bs,
                             int64_t block_stride, float tensor_scale, const int32_t *seq_lens,
                             const int32_t *gather_lens, const int32_t *block_table, int64_t R, int64_t maxb,
                             int64_t offset, uint16_t *out, int64_t out_stride_r, int64_t out_stride_m, int64_t M);

#ifdef __cplusplus
}
#endif

#endif
