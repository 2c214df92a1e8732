/* layout.c -- layout{} tables checked into dsv4_layout, and the layout rules. */
#include "internal.h"

#define DT(t) (1u << DSV4_DT_##t)

/* One segment table into seg. */
static int check_segment(cursor *k, dsv4_segment *seg)
{
  static const char *const known[] = {"dims", "type", "offset", "scale", NULL};
  static const char *const scale_known[] = {"type", "group", "offset", "per", NULL};
  int bad = sc_check_known(k, known);
  seg->line = sc_field_line(k, NULL);
  cursor dims;
  int r = sc_enter(k, "dims", &dims, 1);
  if (r == 0) {
    int32_t a = 0, b = 0;
    bad |= sc_get_int(&dims, "#1", 1, 0, 65536, 0, &a);
    bad |= sc_get_int(&dims, "#2", 1, 0, 65536, 0, &b);
    if (lua_rawlen(k->c->L, dims.idx) != 2) {
      FERR(k, "dims", "must be a pair {first, last+1}");
      bad = 1;
    }
    seg->d0 = a, seg->d1 = b;
    sc_leave(&dims);
  } else
    bad = 1;
  bad |= sc_get_dtype(k, "type", 1, DT(E4M3) | DT(BF16) | DT(F32), &seg->type);
  bad |= sc_get_int(k, "offset", 1, 0, 1 << 20, 0, &seg->offset);
  cursor sc;
  r = sc_enter(k, "scale", &sc, 0);
  seg->scale_type = DSV4_DT_NONE;
  seg->scale_group = 0;
  seg->scale_offset = 0;
  if (r == 0) {
    char per[16];
    bad |= sc_check_known(&sc, scale_known);
    bad |= sc_get_str(&sc, "per", 0, "group", per, sizeof per);
    if (!strcmp(per, "tensor")) { /* one f32 for the cache, given at launch */
      seg->scale_tensor = 1;
      bad |= sc_get_dtype(&sc, "type", 1, DT(F32), &seg->scale_type);
      int g = lua_getfield(k->c->L, sc.idx, "group"), o = lua_getfield(k->c->L, sc.idx, "offset");
      lua_pop(k->c->L, 2);
      if (g != LUA_TNIL || o != LUA_TNIL) {
        FERR(&sc, g != LUA_TNIL ? "group" : "offset",
             "is not allowed with per = 'tensor' (the scale is a launch argument)");
        bad = 1;
      }
    } else if (!strcmp(per, "group")) {
      bad |= sc_get_dtype(&sc, "type", 1, DT(UE8M0) | DT(F32), &seg->scale_type);
      bad |= sc_get_int(&sc, "group", 1, 1, 65536, 0, &seg->scale_group);
      bad |= sc_get_int(&sc, "offset", 1, 0, 1 << 20, 0, &seg->scale_offset);
    } else {
      FERR(&sc, "per", "must be 'group' or 'tensor', got '%s'", per);
      bad = 1;
    }
    sc_leave(&sc);
  } else if (r < 0)
    bad = 1;
  return bad;
}

/* The table at idx (made by layout{}) into l; its own position is looked up. */
int sc_check_layout_table(checker *c, int idx, const char *owner, dsv4_layout *l)
{
  static const char *const known[] = {"name", "dim", "row_bytes", "scales", "align", "segments", "block", NULL};
  static const char *const scales_known[] = {"placement", "row_bytes", NULL};
  static const char *const block_known[] = {"tokens", "stride", NULL};
  char file[DSV4_PATH_MAX];
  int line = 0;
  memset(l, 0, sizeof *l);
  if (!sc_table_pos(c, idx, file, sizeof file, &line)) {
    dsv4_error(c->d, c->plan->file, 0, "%s: field 'layout' must be a table made by layout { ... }", owner);
    return 1;
  }
  cursor k = {.c = c, .idx = idx, .file = file, .line = line, .what = "layout"};
  char what[96];
  int bad = sc_get_str(&k, "name", 1, "", l->name, sizeof l->name);
  snprintf(what, sizeof what, "layout '%s'", l->name);
  k.what = what;
  bad |= sc_check_known(&k, known);
  bad |= sc_get_int(&k, "dim", 1, 1, 4096, 0, &l->dim);
  bad |= sc_get_int(&k, "row_bytes", 1, 1, 1 << 20, 0, &l->row_bytes);
  bad |= sc_get_int(&k, "align", 0, 1, 256, 16, &l->align);
  if (!bad && (l->align & (l->align - 1))) {
    FERR(&k, "align", "must be a power of two, got %d", l->align);
    bad = 1;
  }
  cursor sc;
  int r = sc_enter(&k, "scales", &sc, 0);
  l->scale_place = DSV4_SCALES_NONE;
  if (r == 0) {
    char place[32];
    bad |= sc_check_known(&sc, scales_known);
    bad |= sc_get_str(&sc, "placement", 1, "", place, sizeof place);
    if (strcmp(place, "block_tail") == 0) {
      l->scale_place = DSV4_SCALES_BLOCK_TAIL;
      bad |= sc_get_int(&sc, "row_bytes", 1, 1, 1 << 16, 0, &l->scale_row_bytes);
    } else if (strcmp(place, "inline") == 0) {
      l->scale_place = DSV4_SCALES_INLINE;
      bad |= sc_get_int(&sc, "row_bytes", 0, 0, 0, 0, &l->scale_row_bytes);
    } else if (place[0]) {
      FERR(&sc, "placement", "must be 'block_tail' or 'inline', got '%s'", place);
      bad = 1;
    }
    sc_leave(&sc);
  } else if (r < 0)
    bad = 1;
  cursor blk;
  r = sc_enter(&k, "block", &blk, 0);
  if (r == 0) {
    bad |= sc_check_known(&blk, block_known);
    bad |= sc_get_int(&blk, "tokens", 1, 1, 1 << 20, 0, &l->block_tokens);
    bad |= sc_get_int(&blk, "stride", 1, 1, 1 << 30, 0, &l->block_stride);
    l->block_line = sc_field_line(&blk, "stride"); /* where a misfit is reported */
    sc_leave(&blk);
  } else if (r < 0)
    bad = 1;
  cursor segs;
  r = sc_enter(&k, "segments", &segs, 1);
  if (r == 0) {
    int n = (int)lua_rawlen(c->L, segs.idx);
    if (n < 1 || n > DSV4_LAYOUT_MAX_SEGS) {
      FERR(&k, "segments", "must list 1 to %d segments, got %d", DSV4_LAYOUT_MAX_SEGS, n);
      bad = 1;
    }
    static char idx_names[DSV4_LAYOUT_MAX_SEGS][8];
    for (int i = 0; i < n && i < DSV4_LAYOUT_MAX_SEGS; i++) {
      snprintf(idx_names[i], sizeof idx_names[i], "#%d", i + 1);
      cursor s;
      r = sc_enter(&segs, idx_names[i], &s, 1);
      if (r == 0) {
        bad |= check_segment(&s, &l->seg[i]);
        sc_leave(&s);
      } else
        bad = 1;
    }
    l->nseg = n < DSV4_LAYOUT_MAX_SEGS ? n : DSV4_LAYOUT_MAX_SEGS;
    sc_leave(&segs);
  } else
    bad = 1;
  l->line = line;
  if (!bad)
    bad = dsv4_layout_check(l, file, c->d);
  return bad;
}

/* Consistency of a layout: dims tiled without overlap, bytes inside rows
 * and not overlapping, scale groups dividing segments. */
int dsv4_layout_check(const dsv4_layout *l, const char *file, dsv4_diags *d)
{
  int bad = 0;
  int covered = 0;
  for (int i = 0; i < l->nseg; i++) {
    const dsv4_segment *s = &l->seg[i];
    int line = s->line ? s->line : l->line;
    int n = s->d1 - s->d0, sz = dsv4_dtype_size(s->type);
    if (s->d0 >= s->d1 || s->d1 > l->dim) {
      dsv4_error(d, file, line, "layout '%s': segments[%d].dims {%d, %d} must satisfy 0 <= first < last <= dim (%d)",
                 l->name, i + 1, s->d0, s->d1, l->dim);
      bad = 1;
      continue;
    }
    covered += n;
    if (s->offset + (int64_t)n * sz > l->row_bytes) {
      dsv4_error(d, file, line, "layout '%s': segments[%d] bytes [%d, %lld) do not fit row_bytes %d", l->name,
                 i + 1, s->offset, (long long)s->offset + (long long)n * sz, l->row_bytes);
      bad = 1;
    }
    for (int j = 0; j < i; j++) {
      const dsv4_segment *o = &l->seg[j];
      int osz = dsv4_dtype_size(o->type);
      if (s->d0 < o->d1 && o->d0 < s->d1) {
        dsv4_error(d, file, line, "layout '%s': segments[%d].dims overlap segments[%d].dims", l->name, i + 1, j + 1);
        bad = 1;
      }
      int64_t a0 = s->offset, a1 = s->offset + (int64_t)n * sz;
      int64_t b0 = o->offset, b1 = o->offset + (int64_t)(o->d1 - o->d0) * osz;
      if (a0 < b1 && b0 < a1) {
        dsv4_error(d, file, line,
                   "layout '%s': segments[%d] bytes [%lld, %lld) overlap segments[%d] bytes [%lld, %lld)", l->name,
                   i + 1, (long long)a0, (long long)a1, j + 1, (long long)b0, (long long)b1);
        bad = 1;
      }
    }
    if (s->scale_type == DSV4_DT_NONE || s->scale_tensor)
      continue;
    if (l->scale_place == DSV4_SCALES_NONE) {
      dsv4_error(d, file, line, "layout '%s': segments[%d].scale needs a 'scales' placement in the layout", l->name,
                 i + 1);
      bad = 1;
      continue;
    }
    if (n % s->scale_group) {
      dsv4_error(d, file, line, "layout '%s': segments[%d].scale.group %d does not divide the segment's %d values",
                 l->name, i + 1, s->scale_group, n);
      bad = 1;
      continue;
    }
    int64_t s0 = s->scale_offset, s1 = s0 + (int64_t)(n / s->scale_group) * dsv4_dtype_size(s->scale_type);
    int64_t lim = l->scale_place == DSV4_SCALES_BLOCK_TAIL ? l->scale_row_bytes : l->row_bytes;
    if (s1 > lim) {
      dsv4_error(d, file, line, "layout '%s': segments[%d].scale bytes [%lld, %lld) do not fit the %s (%lld bytes)",
                 l->name, i + 1, (long long)s0, (long long)s1,
                 l->scale_place == DSV4_SCALES_BLOCK_TAIL ? "scale row" : "data row", (long long)lim);
      bad = 1;
    }
    for (int j = 0; j < l->nseg && l->scale_place == DSV4_SCALES_INLINE; j++) {
      const dsv4_segment *o = &l->seg[j];
      int64_t b0 = o->offset, b1 = o->offset + (int64_t)(o->d1 - o->d0) * dsv4_dtype_size(o->type);
      if (s0 < b1 && b0 < s1) {
        dsv4_error(d, file, line, "layout '%s': segments[%d].scale bytes overlap segments[%d] data", l->name, i + 1,
                   j + 1);
        bad = 1;
      }
    }
  }
  if (!bad && covered != l->dim) {
    dsv4_error(d, file, l->line, "layout '%s': segments cover %d of the %d dims", l->name, covered, l->dim);
    bad = 1;
  }
  int64_t need = dsv4_layout_min_block_bytes(l, l->block_tokens);
  if (!bad && l->block_tokens && need > l->block_stride) {
    dsv4_error(d, file, l->block_line, "layout '%s': a block of %d tokens needs %lld bytes, more than block.stride %d",
               l->name, l->block_tokens, (long long)need, l->block_stride);
    bad = 1;
  }
  if (!bad && l->block_tokens && l->block_stride % l->align) {
    dsv4_error(d, file, l->block_line, "layout '%s': block.stride %d is not a multiple of align %d", l->name,
               l->block_stride, l->align);
    bad = 1;
  }
  return bad;
}
