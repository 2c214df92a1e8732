/* kernel_geometry.h -- kernel geometry the compiler and the runtime share
 * but no caller of libdsv4rt needs: the tiles the runtime sizes split-KV
 * by, the tensor map it builds for the logits' warpgroup form, and the
 * split-KV work space.  Not installed: the installed headers (dsv4_abi.h,
 * dsv4_layout.h, dsv4rt.h) hold the bundle format and the call ABI only.
 * Each form's own geometry (threads, shared memory) is in
 * compiler/form_rules.h, which includes this header. */
#ifndef DSV4_KERNEL_GEOMETRY_H
#define DSV4_KERNEL_GEOMETRY_H

#include <stdint.h>

#include "dsv4_layout.h"

/* Smallest power of two >= n. */
static inline int dsv4_pow2ceil(int n)
{
  int p = 1;
  while (p < n)
    p *= 2;
  return p;
}

/* sparse_decode's matrix forms walk K in tiles of this many rows: the
 * split-KV granularity the runtime sizes splits by. */
#define DSV4_DECODE_TILE 64
/* The warpgroup form takes dims of one 64-byte swizzle atom or whole
 * 128-byte ones (up to 256); other widths get the warp form. */
static inline int dsv4_logits_wg_shape_ok(int dim) { return dim == 64 || (dim % 128 == 0 && dim <= 256); }
/* ... whose operands are K-major rows in swizzle spans of this many bytes
 * (one 64-byte atom for dim 64, else 128-byte ones). */
static inline int dsv4_logits_wg_swizzle(int dim) { return dim < 128 ? 64 : 128; }
/* kv_map's geometry for a cache of num_blocks blocks of block_size rows
 * (block_size a multiple of 64, block_stride bytes apart): the K values of
 * the layout's first segment, a rank-3 tensor of bytes (dim row bytes,
 * block_size rows of row_bytes, num_blocks blocks), read in boxes of 64
 * rows by the swizzle span of the warpgroup form's operands
 * (dsv4_logits_wg_swizzle: dim / span boxes a step).  Returns 0 where the
 * layout or the cache cannot have one (then kv_map is NULL). */
static inline int dsv4_logits_kv_map(const dsv4_layout *l, long long block_size, long long block_stride,
                                     long long num_blocks, uint64_t dims[3], uint64_t strides[2],
                                     uint32_t box[3], int *swizzle)
{
  int sw = dsv4_logits_wg_swizzle(l->dim);
  if (block_size % 64 || num_blocks < 1 || num_blocks > 0xFFFFFFFFll || l->row_bytes % 16 || block_stride % 16 ||
      block_stride >= (1ll << 40) || /* (a tensor map's strides stay below 2^40 bytes) */
      l->seg[0].offset % 16 || !dsv4_logits_wg_shape_ok(l->dim))
    return 0;
  dims[0] = (uint64_t)l->dim, dims[1] = (uint64_t)block_size, dims[2] = (uint64_t)num_blocks;
  strides[0] = (uint64_t)l->row_bytes, strides[1] = (uint64_t)block_stride;
  box[0] = (uint32_t)sw, box[1] = 64, box[2] = 1;
  *swizzle = sw;
  return 1;
}

/* Split-KV: at most this many splits a row; the combine kernel loads this
 * many splits of a row at once (more take another round of loads), and
 * the runtime's own split count stays within it. */
#define DSV4_DECODE_MAX_SPLITS 64
#define DSV4_DECODE_COMBINE_BATCH 8
/* Split-KV work space (floats): a row's partials are acc[v_dim] per
 * split, after all of them (m, l) per split.  A kernel with bf16 partials
 * (the spec's tile.partials) packs the accs at 2 bytes a value, (m, l)
 * right after them, in the first part of the same space: the runtime
 * sizes for fp32, the module's two kernels agree on the offsets.  (The
 * combine kernel's CTA size: dsv4_decode_combine_threads, form_rules.h.) */
static inline long long dsv4_decode_work_floats(long long tokens, long long heads, int splits, int v_dim)
{
  return tokens * heads * splits * (long long)(v_dim + 2);
}

#endif
