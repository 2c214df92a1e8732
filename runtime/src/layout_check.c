/* layout_check.c -- dsv4_layout_valid(): every field of a layout read from
 * outside checked before anything addresses memory through it.  Each field
 * is bounded first and every sum or product is taken in 64 bits on bounded
 * values, so a hostile layout gets a message, never an overflow.  The rule
 * matches what the spec checker (compiler/spec/) holds a spec to, less its
 * demand that segments cover every dim (the reference fills gaps with 0;
 * the bundle reader asks for full cover itself). */
#include "layout_check.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Record a message (when asked for one) and report a failure. */
static int fail(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *why, size_t cap, const char *fmt, ...)
{
  if (why && cap) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
  }
  return 1;
}

/* Bytes of segment s's values in a row (its dims already checked). */
static int64_t value_bytes(const dsv4_segment *s) { return ((int64_t)s->d1 - s->d0) * dsv4_dtype_size(s->type); }

/* The bytes a scale row holds for s: the block-tail row or the data row. */
static int64_t scale_row(const dsv4_layout *l)
{
  return l->scale_place == DSV4_SCALES_BLOCK_TAIL ? l->scale_row_bytes : l->row_bytes;
}

/* The layout's own fields: name, sizes, alignment, scale placement, count. */
static int check_fields(const dsv4_layout *l, char *why, size_t cap)
{
  if (!memchr(l->name, 0, sizeof l->name))
    return fail(why, cap, "layout name is not NUL-terminated");
  if (l->dim < 1 || l->dim > DSV4_LAYOUT_MAX_DIM)
    return fail(why, cap, "layout dim %d is outside [1, %d]", l->dim, DSV4_LAYOUT_MAX_DIM);
  if (l->row_bytes < 1 || l->row_bytes > DSV4_LAYOUT_MAX_ROW_BYTES)
    return fail(why, cap, "layout row_bytes %d is outside [1, %d]", l->row_bytes, DSV4_LAYOUT_MAX_ROW_BYTES);
  if (l->align < 1 || l->align > DSV4_LAYOUT_MAX_ALIGN || (l->align & (l->align - 1)))
    return fail(why, cap, "layout align %d is not a power of two in [1, %d]", l->align, DSV4_LAYOUT_MAX_ALIGN);
  if (l->scale_place != DSV4_SCALES_NONE && l->scale_place != DSV4_SCALES_BLOCK_TAIL &&
      l->scale_place != DSV4_SCALES_INLINE)
    return fail(why, cap, "layout scale placement %d is unknown", l->scale_place);
  if (l->scale_place == DSV4_SCALES_BLOCK_TAIL &&
      (l->scale_row_bytes < 1 || l->scale_row_bytes > DSV4_LAYOUT_MAX_SCALE_ROW_BYTES))
    return fail(why, cap, "layout scale_row_bytes %d is outside [1, %d] (scales at the block tail)",
                l->scale_row_bytes, DSV4_LAYOUT_MAX_SCALE_ROW_BYTES);
  if (l->scale_place != DSV4_SCALES_BLOCK_TAIL && l->scale_row_bytes != 0)
    return fail(why, cap, "layout scale_row_bytes %d is not 0 (no scales at the block tail)", l->scale_row_bytes);
  if (l->nseg < 1 || l->nseg > DSV4_LAYOUT_MAX_SEGS)
    return fail(why, cap, "layout nseg %d is outside [1, %d]", l->nseg, DSV4_LAYOUT_MAX_SEGS);
  return 0;
}

/* Segment i's values: dims inside [0, dim), a value type, bytes inside the row. */
static int check_values(const dsv4_layout *l, int i, char *why, size_t cap)
{
  const dsv4_segment *s = &l->seg[i];
  if (s->d0 < 0 || s->d0 >= s->d1 || s->d1 > l->dim)
    return fail(why, cap, "layout segment %d: dims [%d, %d) are not a non-empty range inside [0, %d)", i + 1, s->d0,
                s->d1, l->dim);
  if (s->type != DSV4_DT_E4M3 && s->type != DSV4_DT_BF16 && s->type != DSV4_DT_F32)
    return fail(why, cap, "layout segment %d: value type %d is unknown (e4m3, bf16 or f32)", i + 1, s->type);
  if (s->offset < 0 || s->offset >= l->row_bytes)
    return fail(why, cap, "layout segment %d: offset %d is outside the row (%d bytes)", i + 1, s->offset, l->row_bytes);
  if (s->offset + value_bytes(s) > l->row_bytes)
    return fail(why, cap, "layout segment %d: bytes [%d, %lld) pass the end of the row (%d bytes)", i + 1, s->offset,
                (long long)(s->offset + value_bytes(s)), l->row_bytes);
  return 0;
}

/* Segment i against the ones before it: no shared output dims or row bytes. */
static int check_overlap(const dsv4_layout *l, int i, char *why, size_t cap)
{
  const dsv4_segment *s = &l->seg[i];
  for (int j = 0; j < i; j++) {
    const dsv4_segment *o = &l->seg[j];
    if (s->d0 < o->d1 && o->d0 < s->d1)
      return fail(why, cap, "layout segment %d: dims [%d, %d) overlap segment %d's [%d, %d)", i + 1, s->d0, s->d1,
                  j + 1, o->d0, o->d1);
    int64_t a1 = s->offset + value_bytes(s), b1 = o->offset + value_bytes(o);
    if (s->offset < b1 && o->offset < a1)
      return fail(why, cap, "layout segment %d: bytes [%d, %lld) overlap segment %d's [%d, %lld)", i + 1, s->offset,
                  (long long)a1, j + 1, o->offset, (long long)b1);
  }
  return 0;
}

/* Segment i's per-tensor scale, or none: no stray scale fields. */
static int check_unstored_scale(const dsv4_segment *s, int i, char *why, size_t cap)
{
  if (s->scale_tensor != 0 && s->scale_tensor != 1)
    return fail(why, cap, "layout segment %d: scale_tensor %d is not 0 or 1", i + 1, s->scale_tensor);
  if (s->scale_tensor && s->scale_type != DSV4_DT_F32)
    return fail(why, cap, "layout segment %d: a per-tensor scale has type %d, not f32", i + 1, s->scale_type);
  if (s->scale_tensor ? s->scale_group || s->scale_offset : s->scale_group || s->scale_offset || s->scale_type)
    return fail(why, cap, "layout segment %d: scale group %d / offset %d set on a segment without stored scales", i + 1,
                s->scale_group, s->scale_offset);
  return 0;
}

/* Segment i's stored scales: a type, a placement, a group dividing the
 * segment, bytes inside the scale row and, inline, clear of every value. */
static int check_stored_scale(const dsv4_layout *l, int i, char *why, size_t cap)
{
  const dsv4_segment *s = &l->seg[i];
  int64_t n = (int64_t)s->d1 - s->d0, srow = scale_row(l);
  if (s->scale_type != DSV4_DT_UE8M0 && s->scale_type != DSV4_DT_F32)
    return fail(why, cap, "layout segment %d: scale type %d is unknown (ue8m0 or f32)", i + 1, s->scale_type);
  if (l->scale_place == DSV4_SCALES_NONE)
    return fail(why, cap, "layout segment %d: scales need a scale placement in the layout", i + 1);
  if (s->scale_group < 1 || n % s->scale_group)
    return fail(why, cap, "layout segment %d: scale group %d does not divide the segment's %lld values", i + 1,
                s->scale_group, (long long)n);
  if (s->scale_offset < 0 || s->scale_offset >= srow)
    return fail(why, cap, "layout segment %d: scale offset %d is outside the scale row (%lld bytes)", i + 1,
                s->scale_offset, (long long)srow);
  int64_t s1 = s->scale_offset + n / s->scale_group * dsv4_dtype_size(s->scale_type);
  if (s1 > srow)
    return fail(why, cap, "layout segment %d: scale bytes [%d, %lld) pass the end of the scale row (%lld bytes)", i + 1,
                s->scale_offset, (long long)s1, (long long)srow);
  for (int j = 0; j < l->nseg && l->scale_place == DSV4_SCALES_INLINE; j++) {
    const dsv4_segment *o = &l->seg[j];
    if (s->scale_offset < o->offset + value_bytes(o) && o->offset < s1)
      return fail(why, cap, "layout segment %d: inline scale bytes [%d, %lld) overlap segment %d's values", i + 1,
                  s->scale_offset, (long long)s1, j + 1);
  }
  return 0;
}

/* The declared block (none: both 0): large enough for its tokens, aligned. */
static int check_block(const dsv4_layout *l, char *why, size_t cap)
{
  if (l->block_tokens < 0 || l->block_tokens > DSV4_LAYOUT_MAX_BLOCK_TOKENS)
    return fail(why, cap, "layout block_tokens %d is outside [0, %d]", l->block_tokens, DSV4_LAYOUT_MAX_BLOCK_TOKENS);
  if (l->block_stride < 0 || l->block_stride > DSV4_LAYOUT_MAX_BLOCK_STRIDE)
    return fail(why, cap, "layout block_stride %d is outside [0, %d]", l->block_stride, DSV4_LAYOUT_MAX_BLOCK_STRIDE);
  if (!l->block_tokens != !l->block_stride)
    return fail(why, cap, "layout block_tokens %d and block_stride %d: give both (a block) or neither", l->block_tokens,
                l->block_stride);
  int64_t need = dsv4_layout_min_block_bytes(l, l->block_tokens);
  if (l->block_stride < need)
    return fail(why, cap, "layout block_stride %d is below the %lld bytes a block of %d tokens needs", l->block_stride,
                (long long)need, l->block_tokens);
  if (l->block_stride % l->align)
    return fail(why, cap, "layout block_stride %d is not a multiple of align %d", l->block_stride, l->align);
  return 0;
}

int dsv4_layout_valid(const dsv4_layout *l, char *why, size_t cap)
{
  if (!l)
    return fail(why, cap, "no layout");
  if (check_fields(l, why, cap))
    return 1;
  for (int i = 0; i < l->nseg; i++)
    if (check_values(l, i, why, cap) || check_overlap(l, i, why, cap))
      return 1;
  for (int i = 0; i < l->nseg; i++) {
    const dsv4_segment *s = &l->seg[i];
    int stored = s->scale_type != DSV4_DT_NONE && !s->scale_tensor;
    if (stored ? check_stored_scale(l, i, why, cap) : check_unstored_scale(s, i, why, cap))
      return 1;
  }
  return check_block(l, why, cap);
}
