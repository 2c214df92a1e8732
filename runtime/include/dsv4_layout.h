/* dsv4_layout.h -- a paged KV-cache layout as data (docs/ops.md sections 1 and 8).
 *
 * A layout says where each token's values live inside a cache block and how
 * they are dequantized.  The compiler's generators, the runtime's argument
 * checks and the host reference all read this one description, so a new
 * layout is a spec, not code.
 *
 * Addressing (all byte offsets, 64-bit):
 *   block base      B = base + (slot / bs) * block_stride
 *   token t's data  B + t * row_bytes + segment.offset + i * sizeof(type)
 *   token t's scale B + scale_base + t * scale_stride + segment.scale_offset
 *                     + (i / scale_group) * sizeof(scale_type)
 * where scale_base = bs * row_bytes and scale_stride = scale_row_bytes for
 * scales at the block tail (DSv4), and scale_base = 0, scale_stride =
 * row_bytes for scales stored inline in the token (DSv3.2).  A segment with
 * scale_tensor set has no stored scale: one f32 for the whole cache is a
 * launch argument (the per-tensor FP8 kv_scale).
 */
#ifndef DSV4_LAYOUT_H
#define DSV4_LAYOUT_H

#include <stdint.h>

#define DSV4_LAYOUT_NAME_MAX 48
#define DSV4_LAYOUT_MAX_SEGS 8

/* Element types: X(enum suffix, spec name, bytes). */
#define DSV4_DTYPES(X) \
  X(E4M3, "e4m3", 1)   \
  X(BF16, "bf16", 2)   \
  X(F32, "f32", 4)     \
  X(UE8M0, "ue8m0", 1)

typedef enum {
  DSV4_DT_NONE = 0,
#define X(e, s, n) DSV4_DT_##e,
  DSV4_DTYPES(X)
#undef X
      DSV4_DT_COUNT
} dsv4_dtype;

typedef enum {
  DSV4_SCALES_NONE = 0,   /* no scales (bf16 cache) */
  DSV4_SCALES_BLOCK_TAIL, /* all data rows first, then all scale rows */
  DSV4_SCALES_INLINE      /* scales inside the token's own row */
} dsv4_scale_place;

typedef struct {
  int32_t d0, d1;          /* output dims [d0, d1) */
  int32_t type;            /* dsv4_dtype of the stored values */
  int32_t offset;          /* byte offset of value d0 in the data row */
  int32_t scale_type;      /* DSV4_DT_NONE, DSV4_DT_UE8M0 or DSV4_DT_F32 */
  int32_t scale_group;     /* values per scale */
  int32_t scale_offset;    /* byte offset of the first scale in the scale row */
  int32_t scale_tensor;    /* 1: one f32 scale for the whole cache, given at launch (kv_scale) */
  int32_t line;            /* spec line, for diagnostics (0 if unknown) */
} dsv4_segment;

typedef struct {
  char name[DSV4_LAYOUT_NAME_MAX];
  int32_t dim;             /* values per token (output width) */
  int32_t row_bytes;       /* data row stride per token */
  int32_t scale_place;     /* dsv4_scale_place */
  int32_t scale_row_bytes; /* bytes per token's scale row (block tail) */
  int32_t align;           /* alignment the block stride and base must have */
  int32_t block_tokens;    /* the page a spec declares (0: none): tokens ... */
  int32_t block_stride;    /* ... and bytes; checked to fit, used as defaults */
  int32_t nseg;
  dsv4_segment seg[DSV4_LAYOUT_MAX_SEGS];
  int32_t line;            /* spec lines, for diagnostics: the layout, its block */
  int32_t block_line;
} dsv4_layout;

/* Bytes a block of bs tokens needs: the smallest legal block stride. */
static inline int64_t dsv4_layout_min_block_bytes(const dsv4_layout *l, int64_t bs)
{
  int64_t per = l->row_bytes;
  if (l->scale_place == DSV4_SCALES_BLOCK_TAIL)
    per += l->scale_row_bytes;
  return bs * per;
}

static inline int dsv4_dtype_size(int t)
{
  switch (t) {
#define X(e, s, n) \
  case DSV4_DT_##e: \
    return n;
    DSV4_DTYPES(X)
#undef X
  default:
    return 0;
  }
}

static inline const char *dsv4_dtype_name(int t)
{
  switch (t) {
#define X(e, s, n) \
  case DSV4_DT_##e: \
    return s;
    DSV4_DTYPES(X)
#undef X
  default:
    return "none";
  }
}

#endif
