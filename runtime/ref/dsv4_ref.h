/* dsv4_ref.h -- plain-C11 host reference for the dsv4c dequant ops
 * (docs/ops.md sections 1 and 2).  Library code: never prints, never exits.
 *
 * Every function reads the cache through a dsv4_layout (dsv4_layout.h), so
 * any layout expressible as data is supported, not only DSv4 fp8_ds_mla.
 * All byte offsets are computed in 64-bit arithmetic.
 */
#ifndef DSV4_REF_H
#define DSV4_REF_H

#include <stddef.h>
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

/* docs/ops.md 2a: out[i, :] (row-major [n, l->dim] bf16) = dequant(slot indices[i]), or +0.0 for indices[i] < 0.
 * Returns 0 on success; nonzero, with nothing written, if the layout/arguments are invalid or any
 * non-negative index is >= num_blocks*bs. */
int dsv4_ref_dequant_gather(const dsv4_layout *l, const uint8_t *cache, int64_t num_blocks, int64_t bs,
                            int64_t block_stride, const int32_t *indices, int64_t n, uint16_t *out);

/* docs/ops.md 2b (dequantize_and_gather_k_cache): for request r < R and i < g_r (g_r = gather_lens[r], or
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

/* ---- Writers: FP8 quantize-insert and the fused Q branch (docs/ops.md sections 1, 4, 5 and 8) ---- */

/* fp32 -> OCP e4m3fn byte, round-to-nearest-even, saturating to +-448 (satfinite: |x| > 448 and +-inf
 * give 0x7E/0xFE), NaN -> 0x7F, subnormals exact in steps of 2^-9, sign kept on zero results. */
uint8_t dsv4_ref_f32_to_e4m3(float x);

/* The quantizer's block exponent e = ceil(log2(max(amax, 1e-4f) / 448.0f)): the fp32 quotient is rounded
 * once, then its ceil-log2 is taken exactly from its bits.  amax = +inf or NaN gives 128, whose UE8M0
 * byte clamps to 255. */
int dsv4_ref_quant_exponent(float amax);

/* FlashMLA tests/quant.py's exponent e = ceil(log2(max(amax / 448.0f, 1e-4f))): it floors the quotient,
 * so e >= -13.  It differs from dsv4_ref_quant_exponent only for amax <= 448*2^-14 (about 0.0273).  The
 * DSv3.2 (V32) golden cache was made with it; vLLM's writers use dsv4_ref_quant_exponent. */
int dsv4_ref_quant_exponent_flashmla(float amax);

/* Exponent rules of dsv4_ref_kv_insert_ex. */
#define DSV4_REF_FLOOR_AMAX 0     /* vLLM's writers: dsv4_ref_quant_exponent (docs/ops.md sections 1, 4, 5) */
#define DSV4_REF_FLOOR_QUOTIENT 1 /* FlashMLA tests/quant.py: dsv4_ref_quant_exponent_flashmla */

/* Layout-driven KV quant-insert (docs/ops.md sections 1, 5; the DSv3.2 and indexer writers of sections 4, 8).
 * For each row n < min(n_ins, N) with slot_mapping[n] >= 0: x = bf16 kv[n, :] (row-major [N, l->dim])
 * widened to fp32; if rope_dims > 0, GPT-J RoPE on dims [rope_first, rope_first+rope_dims) at
 * positions[n] with cos_sin [max_pos, rope_dims] fp32 (cos in the first half, sin in the second), in fp32;
 * every value rounded to bf16; then each segment is stored: e4m3 with a UE8M0 or f32 power-of-two scale
 * per scale_group values (dsv4_ref_quant_exponent), e4m3 unscaled, bf16 or f32.  Block-tail scale rows
 * are zeroed before their scales are written (the DSv4 pad byte); no other byte is touched.  Slots < 0
 * and rows >= n_ins are skipped (positions of skipped rows are not read).  Returns 0 on success; nonzero,
 * with nothing written, if the layout or geometry is invalid, a segment is unsupported (scale_tensor set,
 * or a scaled bf16/f32 segment), the RoPE range is invalid, a slot is >= num_blocks*bs or a written row's
 * position is outside [0, max_pos). */
int dsv4_ref_kv_insert(const dsv4_layout *l, const uint16_t *kv, int64_t N, const int64_t *slot_mapping,
                       int64_t n_ins, const int64_t *positions /* [N] or NULL when rope_dims == 0 */,
                       const float *cos_sin /* [max_pos, rope_dims] */, int64_t max_pos, int rope_first,
                       int rope_dims, uint8_t *cache, int64_t num_blocks, int64_t bs, int64_t block_stride);

/* dsv4_ref_kv_insert with the exponent rule chosen: floor_rule DSV4_REF_FLOOR_AMAX (what
 * dsv4_ref_kv_insert uses) or DSV4_REF_FLOOR_QUOTIENT (FlashMLA's test quantizer, which made the V32
 * golden); any other value returns nonzero with nothing written. */
int dsv4_ref_kv_insert_ex(const dsv4_layout *l, const uint16_t *kv, int64_t N, const int64_t *slot_mapping,
                          int64_t n_ins, const int64_t *positions, const float *cos_sin, int64_t max_pos,
                          int rope_first, int rope_dims, uint8_t *cache, int64_t num_blocks, int64_t bs,
                          int64_t block_stride, int floor_rule);

/* docs/ops.md section 5 Q branch: for n < N, h < H, q_out[n, h, :] = bf16(RoPE(y)) with
 * y = x * (1 / sqrt(sum(x^2)/D + eps)) in fp32 (the sum accumulated in double, then cast to float),
 * RoPE (same rule as dsv4_ref_kv_insert) on dims [rope_first, rope_first+rope_dims) of y without
 * intermediate rounding; heads [H, Hp) of q_out are +0.0.  q is [N, H, D] bf16, q_out [N, Hp, D] bf16;
 * they must not overlap unless q_out == q and Hp == H (in place).  Returns 0 on success; nonzero, with
 * nothing written, if Hp < H, H < 0, N < 0, D <= 0, the RoPE range is invalid or (when rope_dims > 0 and
 * H > 0) a position is outside [0, max_pos). */
int dsv4_ref_q_norm_rope(const uint16_t *q, int64_t N, int64_t H, int64_t Hp, int64_t D,
                         const int64_t *positions, const float *cos_sin, int64_t max_pos, int rope_first,
                         int rope_dims, float eps, uint16_t *q_out);

/* ---- Sparse MLA decode (docs/ops.md sections 3 and 8) ---- */

/* docs/ops.md section 3.  q [T, H, l->dim] bf16; main cache (bs, stride, num_blocks) with indices [T, topk]
 * and lens [T]; optional extra cache (extra == NULL or extra_topk == 0: none) with extra_indices
 * [T, extra_topk] and extra_lens [T]; attn_sink [H] fp32 or NULL (= -inf, no effect); out [T, H, v_dim]
 * bf16; lse [T, H] fp32 (natural log, excludes the sink). Both caches use layout l.
 * Entry j of a row participates iff j < min(len, topk) (a negative len counts as 0) and its value is not
 * -1; main and extra entries form one joint softmax.  With K_j the slot's dequantized l->dim values
 * (dsv4_ref_dequant_token_ts, widened) and V_j its first v_dim: s_j = softmax_scale * sum_d q*K_j,
 * lse = ln sum_j exp(s_j), out = bf16(sum_j exp(s_j - lse) V_j / (1 + exp(sink_h - lse))), all in double
 * and rounded once.  No participating entry: out +0.0, lse +inf (whatever the sink); every score -inf:
 * out +0.0, lse -inf.  Dims of a per-tensor segment (scale_tensor set) use the raw stored value, not
 * rounded to bf16, with tensor_scale folded in as docs/ops.md section 8's bmm1_scale (softmax_scale *
 * tensor_scale on their part of the dot) and bmm2_scale (tensor_scale on their outputs); tensor_scale is
 * unused by other layouts.  Returns 0 on success; nonzero, with nothing written, if the layout or either
 * cache's geometry is invalid, T, H, topk or extra_topk < 0, v_dim is outside [1, l->dim], a needed
 * pointer is NULL, a participating position holds a value < -1 or >= that cache's num_blocks*bs, or
 * memory for the work buffers cannot be had. */
int dsv4_ref_sparse_decode(const dsv4_layout *l, int v_dim, const uint16_t *q, int64_t T, int64_t H,
                           const uint8_t *cache, int64_t num_blocks, int64_t bs, int64_t block_stride,
                           const int32_t *indices, const int32_t *lens, int64_t topk,
                           const uint8_t *extra, int64_t extra_num_blocks, int64_t extra_bs, int64_t extra_stride,
                           const int32_t *extra_indices, const int32_t *extra_lens, int64_t extra_topk,
                           const float *attn_sink, float softmax_scale, float tensor_scale,
                           uint16_t *out, float *lse);

/* dsv4_ref_sparse_decode (the same arguments, checks and out / lse, bit for bit), also writing what docs/ops.md
 * section 3's condition-aware bound needs: pv_abs [T, H, v_dim] fp32, sum_j p_j |V_j[d]| with p_j =
 * exp(s_j - lse) / (1 + exp(sink_h - lse)) the final weights (the sink in the denominator; |tensor_scale|
 * folded in on per-tensor dims, as out has it), 0 for rows with no participating entry or every score -inf;
 * n_valid [T], the participating entries of each token (both lists).  The bound on an output is then
 * max(abs, rel |ref|) + (u_P + n_valid 2^-24) pv_abs, u_P the unit roundoff of the kernel's P format
 * (dsv4_check_cond_ok).  lse_abs [T, H] (may be NULL) is lse's counterpart: |m| + |lse - m| + sum_j w_j
 * a_j, with m the largest score, w_j = exp(s_j - lse) (no sink), a_j = |softmax_scale| sum_d |q_d K_j[d]|
 * (|tensor_scale| on per-tensor dims): the magnitudes lse's fp32 arithmetic rounds (the two terms of
 * m + ln S, which cancel where lse is near 0, and each score's summands); 0 where lse is +-inf.  The bound
 * on lse is then max(abs, rel |ref|) + (2 sqrt(dim) + 8) 2^-24 lse_abs (dsv4_check_lse_cond_ok).  Returns
 * nonzero, with nothing written, where dsv4_ref_sparse_decode would, or when pv_abs or n_valid is NULL. */
int dsv4_ref_sparse_decode_cond(const dsv4_layout *l, int v_dim, const uint16_t *q, int64_t T, int64_t H,
                                const uint8_t *cache, int64_t num_blocks, int64_t bs, int64_t block_stride,
                                const int32_t *indices, const int32_t *lens, int64_t topk,
                                const uint8_t *extra, int64_t extra_num_blocks, int64_t extra_bs,
                                int64_t extra_stride, const int32_t *extra_indices, const int32_t *extra_lens,
                                int64_t extra_topk, const float *attn_sink, float softmax_scale,
                                float tensor_scale, uint16_t *out, float *lse, float *pv_abs, int64_t *n_valid,
                                float *lse_abs);

/* ---- Indexer: paged MQA logits and top-k (docs/ops.md section 4) ---- */

/* docs/ops.md section 4 fp8_paged_mqa_logits.  l is the indexer layout: exactly one e4m3 segment over dims
 * [0, l->dim) with one stored f32 scale per token (scale_group >= l->dim, not per tensor).  q is
 * [B, next_n, H, l->dim] e4m3, weights [B*next_n, H] fp32, context_lens [B, next_n] int32, block_table
 * [B, maxb] int32.  For row r = b*next_n + j and k < min(ctx = context_lens[r], L), with token k at
 * block block_table[b, k/bs], row k%bs:
 *   logits[r*row_stride + k] = kscale_k * sum_h weights[r,h] * max(0, sum_d q[b,j,h,d] * kfp8_k[d])
 * (decoded e4m3 values, all in double, rounded to fp32 once; a NaN dot product propagates like torch's
 * relu); entries k in [min(ctx, L), L) are -inf; entries [L, row_stride) are untouched.  Returns 0 on
 * success; nonzero, with nothing written, if the layout is not of that form or the cache geometry is
 * invalid, B, next_n, H, maxb or L < 0, row_stride < L, a needed pointer is NULL, a ctx is < 0, or a used
 * k has k/bs >= maxb or a block-table entry outside [0, num_blocks). */
int dsv4_ref_paged_mqa_logits(const dsv4_layout *l, const uint8_t *q, int64_t B, int64_t next_n, int64_t H,
                              const uint8_t *cache, int64_t num_blocks, int64_t bs, int64_t block_stride,
                              const float *weights, const int32_t *context_lens, const int32_t *block_table,
                              int64_t maxb, float *logits, int64_t L, int64_t row_stride);

/* docs/ops.md section 4 top-k over logits[r*row_stride + 0 .. ctx[r]-1] into out [rows, K] int32.  Row r with
 * ctx[r] <= K gets [0, 1, ..., ctx[r]-1, -1, ...]; otherwise the K positions of the K largest logits,
 * written in ascending position order.  The contract (vLLM, docs/ops.md) is set equality with UNSPECIFIED
 * tie-breaking; this reference picks, among the logits equal to the K-th largest, the lowest positions.
 * Ordering: -0.0 equals +0.0 and every NaN ranks above +inf (as torch.topk).  Use dsv4_ref_topk_check
 * to judge another implementation's output.  Returns 0 on success; nonzero, with nothing written, if
 * rows or K < 0, a needed pointer is NULL, a ctx is < 0, a row with ctx > K has ctx > row_stride, or
 * rows*row_stride or rows*K overflows. */
int dsv4_ref_topk(const float *logits, int64_t rows, int64_t row_stride, const int32_t *ctx, int64_t K,
                  int32_t *out);

/* Tie-tolerant check of any top-k output got [rows, K] against the logits (same ordering rules as
 * dsv4_ref_topk): a row with ctx <= K must hold 0..ctx-1 in any order followed by K-ctx entries of -1;
 * a row with ctx > K must hold K distinct positions in [0, ctx) (no -1), in any order, such that every
 * chosen logit >= every unchosen logit of [0, ctx), so ties at the threshold may go either way.  Returns
 * 0 when valid; nonzero with the first problem written to err (when err != NULL and errlen > 0) when
 * not, or when the arguments are invalid (as dsv4_ref_topk) or memory for a work buffer cannot be had. */
int dsv4_ref_topk_check(const float *logits, int64_t rows, int64_t row_stride, const int32_t *ctx, int64_t K,
                        const int32_t *got, char *err, size_t errlen);

/* The same for a top-k taken over logits computed another way (the fused paged_mqa_logits_topk's own,
 * rounded otherwise than the reference's logits given here): where the chosen and unchosen logits are
 * finite, every chosen one must be >= every unchosen one - tol * (the row's largest finite |logit|).  So
 * the sets must be equal exactly unless the K-th and (K+1)-th logits lie within that rounding of each
 * other, and then may differ only among the near-tied.  tol 0 is dsv4_ref_topk_check. */
int dsv4_ref_topk_check_within(const float *logits, int64_t rows, int64_t row_stride, const int32_t *ctx, int64_t K,
                               const int32_t *got, double tol, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
