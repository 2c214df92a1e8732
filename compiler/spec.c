/* spec.c -- run a Lua spec in the sandbox and check its tables into a plan.
 *
 * Spec files call three functions the sandbox (spec_lua.c) provides:
 *   layout { ... }   a cache layout (dsv4_layout); returns the table
 *   kernel { ... }   a kernel to build (dsv4_kernel)
 *   include "f.lua"  runs another spec file (found in the caller's folder
 *                    or a -I folder) and returns its value, so layouts
 *                    live in a library
 * layout{} and kernel{} remember where they were called (file, line); a
 * field's own line is then found by scanning the source text (srcpos.c),
 * since Lua keeps no positions for table fields.
 *
 * The check is a walk with a cursor (table, file, constructor line, key
 * path): every error names the field by its path and points at its line.
 */
#include "spec.h"

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spec_lua.h"
#include "srcpos.h"

#define POS_KEY DSV4_SPEC_POS_KEY
#define KERNELS_KEY DSV4_SPEC_KERNELS_KEY
#define FILES_MAX 16

typedef struct {
  char path[DSV4_PATH_MAX];
  char *text;
  size_t len;
} src_file;

typedef struct {
  lua_State *L;
  dsv4_diags *d;
  dsv4_plan *plan;
  src_file files[FILES_MAX];
  int nfiles;
} checker;

/* A place in the spec: the table at stack index idx, built by a call at
 * file:line, reached from that call's table by path. */
typedef struct {
  checker *c;
  int idx;
  const char *file;
  int line;
  const char *what; /* "kernel 'x'" or "layout 'y'" for messages */
  const char *path[8];
  int npath;
} cursor;

/* ---- source text, for field lines ---------------------------------------- */

/* Read (once) the text of a spec file for srcpos scans. */
static const src_file *source(checker *c, const char *path)
{
  for (int i = 0; i < c->nfiles; i++)
    if (strcmp(c->files[i].path, path) == 0)
      return &c->files[i];
  if (c->nfiles == FILES_MAX)
    return NULL;
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  src_file *s = &c->files[c->nfiles];
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  s->text = malloc(n > 0 ? (size_t)n + 1 : 1);
  s->len = s->text && n > 0 ? fread(s->text, 1, (size_t)n, f) : 0;
  fclose(f);
  if (!s->text)
    return NULL;
  s->text[s->len] = 0;
  snprintf(s->path, sizeof s->path, "%s", path);
  c->nfiles++;
  return s;
}

/* Line of cursor field `key` (NULL: the cursor's table itself), and in
 * *col its column (0 when unknown). */
static int field_pos(const cursor *k, const char *key, int *col)
{
  const char *path[9];
  int n = 0;
  for (int i = 0; i < k->npath; i++)
    path[n++] = k->path[i];
  if (key)
    path[n++] = key;
  const src_file *s = source(k->c, k->file);
  *col = 0;
  if (!s || k->line <= 0)
    return k->line;
  return dsv4_srcpos_find_col(s->text, s->len, k->line, path, n, col);
}

static int field_line(const cursor *k, const char *key)
{
  int col;
  return field_pos(k, key, &col);
}

/* An error at cursor field `key` (NULL: the table), with its column. */
static void field_error(const cursor *k, const char *key, const char *fmt, ...) DSV4_PRINTF(3, 4);
static void field_error(const cursor *k, const char *key, const char *fmt, ...)
{
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  int col, line = field_pos(k, key, &col);
  dsv4_error_at(k->c->d, k->file, line, col, "%s", msg);
}

/* "tile.values_per_thread" for messages. */
static const char *field_name(const cursor *k, const char *key, char *buf, size_t n)
{
  size_t o = 0;
  buf[0] = 0;
  for (int i = 0; i <= k->npath && o < n; i++) {
    const char *p = i < k->npath ? k->path[i] : key;
    if (!p)
      break;
    if (p[0] == '#')
      o += (size_t)snprintf(buf + o, n - o, "[%s]", p + 1);
    else
      o += (size_t)snprintf(buf + o, n - o, "%s%s", o ? "." : "", p);
  }
  return buf;
}

/* "kernel 'x': missing required field 'f'" or, nested, "kernel 'x': field
 * 'tile' is missing required field 'f'" */
static void missing(cursor *k, const char *what, const char *key)
{
  char fb[128];
  if (k->npath == 0)
    field_error(k, NULL, "%s: missing required %s '%s'", k->what, what, key);
  else
    field_error(k, NULL, "%s: field '%s' is missing required %s '%s'", k->what, field_name(k, NULL, fb, sizeof fb),
                what, key);
}

#define FERR(k, key, ...)                                                             \
  do {                                                                                \
    char fb_[128], mb_[512];                                                          \
    snprintf(mb_, sizeof mb_, __VA_ARGS__);                                           \
    field_error((k), (key), "%s: field '%s' %s", (k)->what, \
               field_name((k), (key), fb_, sizeof fb_), mb_);                         \
  } while (0)

/* ---- field access ---------------------------------------------------------- */

/* Edit distance, for "did you mean" hints on unknown fields. */
static int edit_distance(const char *a, const char *b)
{
  int la = (int)strlen(a), lb = (int)strlen(b);
  if (la > 31 || lb > 31)
    return 99;
  int d[32][32];
  for (int i = 0; i <= la; i++)
    d[i][0] = i;
  for (int j = 0; j <= lb; j++)
    d[0][j] = j;
  for (int i = 1; i <= la; i++)
    for (int j = 1; j <= lb; j++) {
      int v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      if (d[i - 1][j] + 1 < v)
        v = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < v)
        v = d[i][j - 1] + 1;
      d[i][j] = v;
    }
  return d[la][lb];
}

/* Reject keys not in allowed (NULL-terminated); 0 if all are known. */
static int check_known(cursor *k, const char *const *allowed)
{
  lua_State *L = k->c->L;
  int bad = 0;
  lua_pushnil(L);
  while (lua_next(L, k->idx)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TSTRING) {
      FERR(k, NULL, "has a positional or non-string key; only named fields are allowed here");
      bad = 1;
      continue;
    }
    const char *key = lua_tostring(L, -1);
    int known = 0, best = 99;
    const char *hint = NULL;
    for (const char *const *a = allowed; *a; a++) {
      if (strcmp(*a, key) == 0)
        known = 1;
      int e = edit_distance(*a, key);
      if (e < best)
        best = e, hint = *a;
    }
    if (!known) {
      char fb[128];
      if (best <= 2)
        field_error(k, key, "%s: unknown field '%s' (did you mean '%s'?)", k->what, field_name(k, key, fb, sizeof fb),
                    hint);
      else
        field_error(k, key, "%s: unknown field '%s'", k->what, field_name(k, key, fb, sizeof fb));
      bad = 1;
    }
  }
  return bad;
}

/* Push field key of the cursor's table; returns its Lua type. */
static int push_field(cursor *k, const char *key)
{
  if (key[0] == '#')
    return lua_geti(k->c->L, k->idx, atoi(key + 1));
  return lua_getfield(k->c->L, k->idx, key);
}

/* Integer field in [lo, hi]; def used when absent and not required. */
static int get_int(cursor *k, const char *key, int required, long lo, long hi, long def, int32_t *out)
{
  lua_State *L = k->c->L;
  int t = push_field(k, key);
  int rc = 0;
  *out = (int32_t)def; /* defined on every error path too */
  if (t == LUA_TNIL) {
    if (required) {
      missing(k, "field", key);
      rc = 1;
    }
    *out = (int32_t)def;
  } else if (!lua_isinteger(L, -1)) {
    if (t == LUA_TNUMBER)
      FERR(k, key, "must be an integer, got %g", lua_tonumber(L, -1));
    else
      FERR(k, key, "must be an integer, got a %s", luaL_typename(L, -1));
    rc = 1;
  } else {
    lua_Integer v = lua_tointeger(L, -1);
    if (v < lo || v > hi) {
      FERR(k, key, "must be in [%ld, %ld], got %lld", lo, hi, (long long)v);
      rc = 1;
    } else
      *out = (int32_t)v;
  }
  lua_pop(L, 1);
  return rc;
}

/* String field copied into buf; absent gives def (or an error if required). */
static int get_str(cursor *k, const char *key, int required, const char *def, char *buf, size_t n)
{
  lua_State *L = k->c->L;
  int t = push_field(k, key);
  int rc = 0;
  buf[0] = 0; /* defined on every error path too */
  if (t == LUA_TNIL) {
    if (required) {
      missing(k, "field", key);
      rc = 1;
    }
    snprintf(buf, n, "%s", def ? def : "");
  } else if (t != LUA_TSTRING) {
    FERR(k, key, "must be a string, got a %s", luaL_typename(L, -1));
    rc = 1;
  } else {
    size_t len;
    const char *s = lua_tolstring(L, -1, &len);
    if (len >= n) {
      FERR(k, key, "is longer than %zu characters", n - 1);
      rc = 1;
    } else if (strlen(s) != len) {
      FERR(k, key, "holds a NUL byte");
      rc = 1;
    } else
      snprintf(buf, n, "%s", s);
  }
  lua_pop(L, 1);
  return rc;
}

/* Boolean field; def when absent. */
static int get_bool(cursor *k, const char *key, int def, int32_t *out)
{
  lua_State *L = k->c->L;
  int t = push_field(k, key), rc = 0;
  if (t == LUA_TNIL)
    *out = def;
  else if (t != LUA_TBOOLEAN) {
    FERR(k, key, "must be true or false, got a %s", luaL_typename(L, -1));
    rc = 1;
  } else
    *out = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return rc;
}

/* Enter the table in field key: pushes it and fills *sub; 1 if absent. */
static int enter(cursor *k, const char *key, cursor *sub, int required)
{
  lua_State *L = k->c->L;
  int t = push_field(k, key);
  if (t != LUA_TTABLE) {
    if (t == LUA_TNIL) {
      if (required)
        missing(k, "table", key);
    } else
      FERR(k, key, "must be a table, got a %s", luaL_typename(L, -1));
    lua_pop(L, 1);
    return t == LUA_TNIL ? 1 : -1;
  }
  *sub = *k;
  sub->idx = lua_gettop(L);
  sub->path[sub->npath++] = key;
  return 0;
}

static void leave(cursor *sub) { lua_pop(sub->c->L, 1); }

/* Element type by name, restricted to the mask of allowed types. */
static int get_dtype(cursor *k, const char *key, int required, unsigned mask, int32_t *out)
{
  char s[16];
  *out = DSV4_DT_NONE;
  if (get_str(k, key, required, "", s, sizeof s))
    return 1;
  if (!s[0])
    return 0;
  for (int t = 1; t < DSV4_DT_COUNT; t++)
    if ((mask & (1u << t)) && strcmp(dsv4_dtype_name(t), s) == 0) {
      *out = t;
      return 0;
    }
  char list[128] = "";
  for (int t = 1; t < DSV4_DT_COUNT; t++)
    if (mask & (1u << t))
      snprintf(list + strlen(list), sizeof list - strlen(list), "%s'%s'", list[0] ? ", " : "",
               dsv4_dtype_name(t));
  FERR(k, key, "has unknown type '%s' (expected one of %s)", s, list);
  return 1;
}

/* Where a table was built by layout{} / kernel{}: file and line. */
static int table_pos(checker *c, int idx, char *file, size_t n, int *line)
{
  lua_State *L = c->L;
  lua_getfield(L, LUA_REGISTRYINDEX, POS_KEY);
  lua_pushvalue(L, idx);
  int found = lua_gettable(L, -2) == LUA_TTABLE;
  if (found) {
    lua_getfield(L, -1, "file");
    lua_getfield(L, -2, "line");
    snprintf(file, n, "%s", lua_tostring(L, -2));
    *line = (int)lua_tointeger(L, -1);
    lua_pop(L, 2);
  }
  lua_pop(L, 2);
  return found;
}

/* ---- layouts ---------------------------------------------------------------- */

#define DT(t) (1u << DSV4_DT_##t)

/* One segment table into seg. */
static int check_segment(cursor *k, dsv4_segment *seg)
{
  static const char *const known[] = {"dims", "type", "offset", "scale", NULL};
  static const char *const scale_known[] = {"type", "group", "offset", "per", NULL};
  int bad = check_known(k, known);
  seg->line = field_line(k, NULL);
  cursor dims;
  int r = enter(k, "dims", &dims, 1);
  if (r == 0) {
    int32_t a = 0, b = 0;
    bad |= get_int(&dims, "#1", 1, 0, 65536, 0, &a);
    bad |= get_int(&dims, "#2", 1, 0, 65536, 0, &b);
    if (lua_rawlen(k->c->L, dims.idx) != 2) {
      FERR(k, "dims", "must be a pair {first, last+1}");
      bad = 1;
    }
    seg->d0 = a, seg->d1 = b;
    leave(&dims);
  } else
    bad = 1;
  bad |= get_dtype(k, "type", 1, DT(E4M3) | DT(BF16) | DT(F32), &seg->type);
  bad |= get_int(k, "offset", 1, 0, 1 << 20, 0, &seg->offset);
  cursor sc;
  r = enter(k, "scale", &sc, 0);
  seg->scale_type = DSV4_DT_NONE;
  seg->scale_group = 0;
  seg->scale_offset = 0;
  if (r == 0) {
    char per[16];
    bad |= check_known(&sc, scale_known);
    bad |= get_str(&sc, "per", 0, "group", per, sizeof per);
    if (!strcmp(per, "tensor")) { /* one f32 for the cache, given at launch */
      seg->scale_tensor = 1;
      bad |= get_dtype(&sc, "type", 1, DT(F32), &seg->scale_type);
      int g = lua_getfield(k->c->L, sc.idx, "group"), o = lua_getfield(k->c->L, sc.idx, "offset");
      lua_pop(k->c->L, 2);
      if (g != LUA_TNIL || o != LUA_TNIL) {
        FERR(&sc, g != LUA_TNIL ? "group" : "offset", "is not allowed with per = 'tensor' (the scale is a launch argument)");
        bad = 1;
      }
    } else if (!strcmp(per, "group")) {
      bad |= get_dtype(&sc, "type", 1, DT(UE8M0) | DT(F32), &seg->scale_type);
      bad |= get_int(&sc, "group", 1, 1, 65536, 0, &seg->scale_group);
      bad |= get_int(&sc, "offset", 1, 0, 1 << 20, 0, &seg->scale_offset);
    } else {
      FERR(&sc, "per", "must be 'group' or 'tensor', got '%s'", per);
      bad = 1;
    }
    leave(&sc);
  } else if (r < 0)
    bad = 1;
  return bad;
}

/* The table at idx (made by layout{}) into l; its own position is looked up. */
static int check_layout_table(checker *c, int idx, const char *owner, dsv4_layout *l)
{
  static const char *const known[] = {"name", "dim", "row_bytes", "scales", "align", "segments", "block", NULL};
  static const char *const scales_known[] = {"placement", "row_bytes", NULL};
  static const char *const block_known[] = {"tokens", "stride", NULL};
  char file[DSV4_PATH_MAX];
  int line = 0;
  memset(l, 0, sizeof *l);
  if (!table_pos(c, idx, file, sizeof file, &line)) {
    dsv4_error(c->d, c->plan->file, 0, "%s: field 'layout' must be a table made by layout { ... }", owner);
    return 1;
  }
  cursor k = {.c = c, .idx = idx, .file = file, .line = line, .what = "layout"};
  char what[96];
  int bad = get_str(&k, "name", 1, "", l->name, sizeof l->name);
  snprintf(what, sizeof what, "layout '%s'", l->name);
  k.what = what;
  bad |= check_known(&k, known);
  bad |= get_int(&k, "dim", 1, 1, 4096, 0, &l->dim);
  bad |= get_int(&k, "row_bytes", 1, 1, 1 << 20, 0, &l->row_bytes);
  bad |= get_int(&k, "align", 0, 1, 256, 16, &l->align);
  if (!bad && (l->align & (l->align - 1))) {
    FERR(&k, "align", "must be a power of two, got %d", l->align);
    bad = 1;
  }
  cursor sc;
  int r = enter(&k, "scales", &sc, 0);
  l->scale_place = DSV4_SCALES_NONE;
  if (r == 0) {
    char place[32];
    bad |= check_known(&sc, scales_known);
    bad |= get_str(&sc, "placement", 1, "", place, sizeof place);
    if (strcmp(place, "block_tail") == 0) {
      l->scale_place = DSV4_SCALES_BLOCK_TAIL;
      bad |= get_int(&sc, "row_bytes", 1, 1, 1 << 16, 0, &l->scale_row_bytes);
    } else if (strcmp(place, "inline") == 0) {
      l->scale_place = DSV4_SCALES_INLINE;
      bad |= get_int(&sc, "row_bytes", 0, 0, 0, 0, &l->scale_row_bytes);
    } else if (place[0]) {
      FERR(&sc, "placement", "must be 'block_tail' or 'inline', got '%s'", place);
      bad = 1;
    }
    leave(&sc);
  } else if (r < 0)
    bad = 1;
  cursor blk;
  r = enter(&k, "block", &blk, 0);
  if (r == 0) {
    bad |= check_known(&blk, block_known);
    bad |= get_int(&blk, "tokens", 1, 1, 1 << 20, 0, &l->block_tokens);
    bad |= get_int(&blk, "stride", 1, 1, 1 << 30, 0, &l->block_stride);
    l->block_line = field_line(&blk, "stride"); /* where a misfit is reported */
    leave(&blk);
  } else if (r < 0)
    bad = 1;
  cursor segs;
  r = enter(&k, "segments", &segs, 1);
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
      r = enter(&segs, idx_names[i], &s, 1);
      if (r == 0) {
        bad |= check_segment(&s, &l->seg[i]);
        leave(&s);
      } else
        bad = 1;
    }
    l->nseg = n < DSV4_LAYOUT_MAX_SEGS ? n : DSV4_LAYOUT_MAX_SEGS;
    leave(&segs);
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
        dsv4_error(d, file, line, "layout '%s': segments[%d] bytes [%lld, %lld) overlap segments[%d] bytes [%lld, %lld)",
                   l->name, i + 1, (long long)a0, (long long)a1, j + 1, (long long)b0, (long long)b1);
        bad = 1;
      }
    }
    if (s->scale_type == DSV4_DT_NONE || s->scale_tensor)
      continue;
    if (l->scale_place == DSV4_SCALES_NONE) {
      dsv4_error(d, file, line, "layout '%s': segments[%d].scale needs a 'scales' placement in the layout", l->name, i + 1);
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
    dsv4_error(d, file, l->block_line, "layout '%s': a block of %d tokens needs %lld bytes, more than block.stride %d", l->name,
               l->block_tokens, (long long)need, l->block_stride);
    bad = 1;
  }
  if (!bad && l->block_tokens && l->block_stride % l->align) {
    dsv4_error(d, file, l->block_line, "layout '%s': block.stride %d is not a multiple of align %d", l->name, l->block_stride,
               l->align);
    bad = 1;
  }
  return bad;
}

/* ---- kernels ----------------------------------------------------------------- */

/* The targets table: { ptx = { arch = "sm_90a" }, spirv = { subgroups = false } } */
static int check_targets(cursor *k, dsv4_kernel *kn)
{
  static const char *const known[] = {
#define X(e, s, x, a) s,
      DSV4_TARGETS(X)
#undef X
          NULL};
  static const char *const opt_known[] = {"arch", "subgroups", NULL};
  cursor t;
  int r = enter(k, "targets", &t, 1);
  if (r)
    return 1;
  int bad = check_known(&t, known), any = 0;
  for (int i = 0; i < DSV4_TARGET_COUNT; i++) {
    dsv4_target_opts *o = &kn->target[i];
    const char *name = dsv4_target_name((dsv4_target_kind)i);
    int ty = lua_getfield(k->c->L, t.idx, name);
    lua_pop(k->c->L, 1);
    if (ty == LUA_TNIL || (ty == LUA_TBOOLEAN && !lua_toboolean(k->c->L, -1)))
      continue;
    o->enabled = 1;
    any = 1;
    snprintf(o->arch, sizeof o->arch, "%s", dsv4_target_default_arch((dsv4_target_kind)i));
    if (ty == LUA_TBOOLEAN)
      continue;
    cursor ot;
    r = enter(&t, name, &ot, 1);
    if (r) {
      bad = 1;
      continue;
    }
    bad |= check_known(&ot, opt_known);
    char def[DSV4_ARCH_MAX];
    snprintf(def, sizeof def, "%s", o->arch);
    bad |= get_str(&ot, "arch", 0, def, o->arch, sizeof o->arch);
    if (!dsv4_target_arch_ok((dsv4_target_kind)i, o->arch)) {
      FERR(&ot, "arch", "names '%s', which target '%s' cannot emit (one of: %s)", o->arch, name,
           dsv4_target_arch_list((dsv4_target_kind)i));
      bad = 1;
    }
    int st = lua_getfield(k->c->L, ot.idx, "subgroups");
    if (st == LUA_TBOOLEAN)
      o->subgroups = lua_toboolean(k->c->L, -1);
    else if (st != LUA_TNIL) {
      FERR(&ot, "subgroups", "must be a boolean, got a %s", luaL_typename(k->c->L, -1));
      bad = 1;
    }
    lua_pop(k->c->L, 1);
    if (o->subgroups && i != DSV4_TARGET_SPIRV) {
      FERR(&ot, "subgroups", "applies to the spirv target only");
      bad = 1;
    } else if (o->subgroups) {
      /* reported as missing rather than silently ignored */
      FERR(&ot, "subgroups", "= true is not implemented yet: no generator emits subgroup code (the gathers need none)");
      bad = 1;
    }
    leave(&ot);
  }
  if (!any && !bad) {
    FERR(k, "targets", "names no target (one or more of ptx, amdgcn, spirv)");
    bad = 1;
  }
  leave(&t);
  return bad;
}

/* The tile must map the layout onto threads and fit every target named. */
static int check_tile(cursor *k, dsv4_kernel *kn)
{
  static const char *const known[] = {"values_per_thread", "tokens_per_cta", "tokens_per_thread", "interleave", "streaming", NULL};
  static const char *const decode_known[] = {"values_per_thread", "heads_per_cta", "matrix", "interleave", "pair", "prefetch",
                                             NULL};
  static const char *const logits_known[] = {"tokens_per_cta", "heads_per_thread", "matrix", NULL};
  static const char *const topk_known[] = {"threads", NULL};
  int decode = kn->op == DSV4_OP_SPARSE_DECODE, logits = kn->op == DSV4_OP_PAGED_MQA_LOGITS;
  if (kn->op == DSV4_OP_TOPK) { /* threads working on one row */
    cursor t;
    if (enter(k, "tile", &t, 1))
      return 1;
    int bad = check_known(&t, topk_known);
    bad |= get_int(&t, "threads", 1, 32, 1024, 0, &kn->tile.tokens_per_cta);
    kn->tile.values_per_thread = kn->tile.tokens_per_thread = kn->tile.interleave = 1;
    kn->tile.threads = kn->tile.tokens_per_cta;
    for (int i = 0; i < DSV4_TARGET_COUNT && !bad; i++)
      if (kn->target[i].enabled && kn->tile.threads % dsv4_target_warp((dsv4_target_kind)i, kn->target[i].arch)) {
        FERR(&t, "threads", "= %d is not a multiple of target '%s' width %d", kn->tile.threads,
             dsv4_target_name((dsv4_target_kind)i), dsv4_target_warp((dsv4_target_kind)i, kn->target[i].arch));
        bad = 1;
      }
    leave(&t);
    return bad;
  }
  cursor t;
  if (enter(k, "tile", &t, 1))
    return 1;
  int bad = check_known(&t, decode ? decode_known : logits ? logits_known : known);
  dsv4_tile *tl = &kn->tile;
  if (decode || logits)
    bad |= get_bool(&t, "matrix", 0, &tl->matrix);
  if (decode) {
    bad |= get_bool(&t, "pair", 0, &tl->pair);
    bad |= get_bool(&t, "prefetch", 0, &tl->prefetch);
  }
  /* logits: a thread sums heads_per_thread heads of one position (the
   * matrix form has its own mapping and ignores it) */
  int lm = logits && tl->matrix;
  bad |= get_int(&t, logits ? "heads_per_thread" : "values_per_thread", !lm, 1, 64, 1, &tl->values_per_thread);
  /* the decode kernel's CTA holds heads of one token, the others' tokens
   * (the logits matrix form's CTA walks its positions in steps: more) */
  bad |= get_int(&t, decode ? "heads_per_cta" : "tokens_per_cta", 1, 1, lm ? 65536 : 1024, 0, &tl->tokens_per_cta);
  bad |= get_int(&t, "tokens_per_thread", 0, 1, 8, 1, &tl->tokens_per_thread);
  bad |= get_bool(&t, "streaming", 1, &tl->streaming);
  bad |= get_int(&t, "interleave", 0, 1, 8, 1, &tl->interleave);
  if (!bad && lm) {
    /* four warps, two 16-position m-tiles each a step; 8-head n-tiles;
     * a quad's four threads read D/4 bytes each in 16-byte pieces */
    const dsv4_layout *l = &kn->layout;
    const char *why = NULL;
    if (tl->tokens_per_cta % (DSV4_LOGITS_WARPS * 32)) {
      FERR(&t, "tokens_per_cta", "= %d: tile.matrix walks positions %d at a time: give a multiple", tl->tokens_per_cta,
           DSV4_LOGITS_WARPS * 32);
      bad = 1;
    } else if (kn->heads % 8 || kn->heads > 128)
      why = "heads must be a multiple of 8, at most 128";
    else if (l->dim % 64 || l->dim > 256)
      why = "the layout's dim must be a multiple of 64, at most 256";
    else if (l->row_bytes % 16 || l->align % 16 || l->seg[0].offset % 16)
      why = "the layout's rows must start and its values lie on 16-byte boundaries";
    if (why) {
      FERR(&t, "matrix", "= true needs the warp-matrix shape: %s", why);
      bad = 1;
    }
    for (int i = 0; i < DSV4_TARGET_COUNT && !bad; i++) {
      if (!kn->target[i].enabled)
        continue;
      if (!dsv4_target_has_e4m3_mma((dsv4_target_kind)i, kn->target[i].arch)) {
        FERR(&t, "matrix", "= true: target '%s' (%s) has no e4m3 warp matrix instructions in dsv4c; give this kernel only targets that do (ptx sm_89 and later)",
             dsv4_target_name((dsv4_target_kind)i), kn->target[i].arch);
        bad = 1;
        continue;
      }
      /* the form the arch gets (warpgroup on sm_90a) keeps its q rows and
       * K ring in static shared memory */
      int wg = dsv4_target_has_wgmma((dsv4_target_kind)i, kn->target[i].arch) && dsv4_logits_wg_shape_ok(l->dim);
      int need = wg ? dsv4_logits_wg_shared_bytes(l->dim, kn->heads) : dsv4_logits_warp_shared_bytes(l->dim, kn->heads);
      if (need > DSV4_LOGITS_STATIC_MAX) {
        FERR(&t, "matrix", "= true: %d heads x %d dims need %d bytes of shared memory in the %s form on %s, more than the %d a kernel holds statically; take fewer heads or a narrower layout",
             kn->heads, l->dim, need, wg ? "warpgroup" : "warp", kn->target[i].arch, DSV4_LOGITS_STATIC_MAX);
        bad = 1;
      }
    }
  }
  if (!bad && tl->matrix && decode) {
    /* two warps a 16-head row block; K rows as 16-dim k-steps; V in two
     * halves of 16-dim n-tile pairs */
    const char *why = NULL;
    if (tl->tokens_per_cta % 16 || tl->tokens_per_cta > 64) {
      FERR(&t, "heads_per_cta", "= %d: tile.matrix takes 16, 32, 48 or 64 (%d warps a 16-head row block)",
           tl->tokens_per_cta, DSV4_DECODE_WARPS);
      bad = 1;
    } else if (kn->layout.row_bytes % 16 || kn->layout.align % 16 ||
               (kn->layout.scale_place == DSV4_SCALES_BLOCK_TAIL && kn->layout.scale_row_bytes % 4))
      why = "the layout's rows must be copied in 16-byte pieces (row bytes and alignment multiples of 16, "
            "scale rows of 4)";
    else if (kn->layout.dim % 16)
      why = "the layout's dim must be a multiple of 16";
    else if (kn->layout.dim / tl->values_per_thread * 8 > tl->tokens_per_cta / 16 * DSV4_DECODE_WARPS * 32)
      why = "the CTA must dequantize at least 8 K rows at a time (dim / values_per_thread threads a row): "
            "raise values_per_thread";
    if (why) {
      FERR(&t, "matrix", "= true needs the warp-matrix shape: %s", why);
      bad = 1;
    }
    for (int i = 0; i < DSV4_TARGET_COUNT && !bad; i++) {
      dsv4_target_kind tk = (dsv4_target_kind)i;
      if (!kn->target[i].enabled)
        continue;
      int need = dsv4_decode_shared_bytes(&kn->layout, tl->tokens_per_cta, DSV4_MATRIX_WARP);
      if (!dsv4_target_has_bf16_mma(tk, kn->target[i].arch)) {
        FERR(&t, "matrix", "= true: target '%s' (%s) has no bf16 warp matrix instructions in dsv4c; give this kernel only targets that do (ptx)",
             dsv4_target_name(tk), kn->target[i].arch);
        bad = 1;
      } else if (need > dsv4_target_max_shared(tk, kn->target[i].arch)) {
        FERR(&t, "heads_per_cta", "= %d needs %d bytes of shared memory, more than target '%s' %s allows (%d)",
             tl->tokens_per_cta, need, dsv4_target_name(tk), kn->target[i].arch,
             dsv4_target_max_shared(tk, kn->target[i].arch));
        bad = 1;
      }
    }
  }
  if (!bad && tl->tokens_per_cta % tl->tokens_per_thread) {
    FERR(&t, "tokens_per_thread", "= %d does not divide tokens_per_cta %d", tl->tokens_per_thread, tl->tokens_per_cta);
    bad = 1;
  }
  if (!bad && logits && !lm) {
    int v = tl->values_per_thread, groups = kn->heads / v;
    if (kn->heads % v || groups & (groups - 1) || groups > 32) {
      FERR(&t, "heads_per_thread", "= %d must divide the %d heads into a power of two (at most 32) of groups", v,
           kn->heads);
      bad = 1;
    }
  }
  if (!bad && !logits) {
    const dsv4_layout *l = &kn->layout;
    int v = tl->values_per_thread;
    if (v & (v - 1)) {
      FERR(&t, "values_per_thread", "must be a power of two, got %d", v);
      bad = 1;
    }
    int w = v / tl->interleave; /* values in one piece */
    if (!bad && (v % tl->interleave || (tl->interleave & (tl->interleave - 1)) || l->dim % tl->interleave ||
                 (l->dim / tl->interleave) % w)) {
      FERR(&t, "interleave", "= %d does not split %d values a thread and the layout's %d values into equal pieces",
           tl->interleave, v, l->dim);
      bad = 1;
    }
    for (int i = 0; i < l->nseg && !bad; i++) {
      const dsv4_segment *s = &l->seg[i];
      if (s->d0 % w || s->d1 % w) {
        FERR(&t, "values_per_thread", "= %d (in pieces of %d) does not divide layout '%s' segment [%d, %d)", v, w,
             l->name, s->d0, s->d1);
        bad = 1;
      } else if (s->scale_type != DSV4_DT_NONE && !s->scale_tensor && s->scale_group % w) {
        FERR(&t, "values_per_thread", "= %d (in pieces of %d) does not divide layout '%s' scale group %d (one scale per piece)", v, w,
             l->name, s->scale_group);
        bad = 1;
      }
    }
    if (!bad && l->dim % v) {
      FERR(&t, "values_per_thread", "= %d does not divide the layout's %d values", v, l->dim);
      bad = 1;
    }
  }
  if (!bad) {
    tl->threads = dsv4_op_threads(kn->op, kn->layout.dim, tl->values_per_thread, tl->tokens_per_cta,
                                  tl->tokens_per_thread, kn->heads, tl->matrix);
    for (int i = 0; i < DSV4_TARGET_COUNT && !bad; i++) {
      if (!kn->target[i].enabled)
        continue;
      int mx = dsv4_target_max_threads((dsv4_target_kind)i);
      int w = dsv4_target_warp((dsv4_target_kind)i, kn->target[i].arch);
      if (tl->threads > mx) {
        FERR(&t, decode ? "heads_per_cta" : "tokens_per_cta", "gives %d threads per CTA, more than target '%s' allows (%d)",
             tl->threads, dsv4_target_name((dsv4_target_kind)i), mx);
        bad = 1;
      } else if (tl->threads % w) {
        FERR(&t, decode ? "heads_per_cta" : "tokens_per_cta", "gives %d threads per CTA, not a multiple of target '%s' %s width %d", tl->threads,
             dsv4_target_name((dsv4_target_kind)i), kn->target[i].arch, w);
        bad = 1;
      }
    }
  }
  leave(&t);
  return bad;
}

/* A power of two (and not zero). */
static int pow2(int v) { return v > 0 && !(v & (v - 1)); }

/* A kernel field that only op takes: *present says whether the spec has it.
 * Returns 1 when kn is another op (an error if the field is there), else 0. */
static int op_field(cursor *k, const dsv4_kernel *kn, dsv4_op op, const char *field, int *present, int *bad)
{
  *present = lua_getfield(k->c->L, k->idx, field) != LUA_TNIL;
  lua_pop(k->c->L, 1);
  if (kn->op == op)
    return 0;
  if (*present) {
    FERR(k, field, "applies to op '%s' only", dsv4_op_name(op));
    *bad = 1;
  }
  return 1;
}

/* The writer's own fields (rope, q) and what its thread mapping needs of
 * the layout: one scale group size, groups aligned to lanes. */
static int check_writer(cursor *k, dsv4_kernel *kn)
{
  static const char *const rope_known[] = {"first", "dims", NULL};
  static const char *const q_known[] = {"dim", NULL};
  const dsv4_layout *l = &kn->layout;
  int v = kn->tile.values_per_thread, bad = 0, has_rope, has_q, has_quant;
  int other = op_field(k, kn, DSV4_OP_KV_INSERT, "rope", &has_rope, &bad);
  op_field(k, kn, DSV4_OP_KV_INSERT, "q", &has_q, &bad);
  op_field(k, kn, DSV4_OP_KV_INSERT, "quant", &has_quant, &bad);
  if (other)
    return bad;
  static const char *const quant_known[] = {"floor", NULL};
  cursor qu;
  if (has_quant && enter(k, "quant", &qu, 1) == 0) {
    char fl[16];
    bad |= check_known(&qu, quant_known);
    bad |= get_str(&qu, "floor", 1, "", fl, sizeof fl);
    if (!strcmp(fl, "quotient"))
      kn->quant_floor = DSV4_FLOOR_QUOTIENT;
    else if (strcmp(fl, "amax") && !bad) {
      FERR(&qu, "floor", "must be 'amax' (vLLM's writers) or 'quotient' (FlashMLA's test quantizer), got '%s'", fl);
      bad = 1;
    }
    leave(&qu);
  } else if (has_quant)
    bad = 1;
  cursor r;
  if (has_rope && enter(k, "rope", &r, 1) == 0) {
    bad |= check_known(&r, rope_known);
    bad |= get_int(&r, "first", 1, 0, 4096, 0, &kn->rope_first);
    bad |= get_int(&r, "dims", 1, 2, 4096, 0, &kn->rope_dims);
    if (!bad && (kn->rope_first + kn->rope_dims > l->dim || kn->rope_dims % 2 || kn->rope_first % v ||
                 kn->rope_dims % v)) {
      FERR(&r, "dims", "[%d, %d) must lie in the layout's %d dims, with first and dims multiples of values_per_thread %d",
           kn->rope_first, kn->rope_first + kn->rope_dims, l->dim, v);
      bad = 1;
    }
    leave(&r);
  } else if (has_rope)
    bad = 1;
  cursor q;
  if (has_q && enter(k, "q", &q, 1) == 0) {
    bad |= check_known(&q, q_known);
    bad |= get_int(&q, "dim", 1, 1, 4096, 0, &kn->q_dim);
    int lanes = kn->q_dim / v;
    if (!bad && (kn->q_dim % v || kn->tile.threads % dsv4_pow2ceil(lanes) ||
                 (kn->rope_dims && kn->rope_first + kn->rope_dims > kn->q_dim))) {
      FERR(&q, "dim", "= %d must be a multiple of values_per_thread %d, its %d lanes (padded to %d) must divide the CTA's %d "
           "threads, and it must hold the RoPE dims", kn->q_dim, v, lanes, dsv4_pow2ceil(lanes), kn->tile.threads);
      bad = 1;
    }
    leave(&q);
  } else if (has_q)
    bad = 1;
  if (kn->tile.tokens_per_thread != 1 || kn->tile.interleave != 1) {
    FERR(k, "tile", "of a kv_insert kernel takes tokens_per_thread = 1 and interleave = 1");
    bad = 1;
  }
  int group = 0;
  for (int i = 0; i < l->nseg && !bad; i++) {
    const dsv4_segment *s = &l->seg[i];
    if (s->scale_tensor) {
      FERR(k, "layout", "'%s' scales per tensor; OPS.md defines no writer for that", l->name);
      bad = 1;
    } else if (s->scale_type != DSV4_DT_NONE) {
      if (s->type != DSV4_DT_E4M3) {
        FERR(k, "layout", "'%s' segment %d: the writer quantizes to e4m3 only", l->name, i + 1);
        bad = 1;
      } else if ((group && s->scale_group != group) || !pow2(s->scale_group / v) || s->scale_group % v ||
                 s->d0 % s->scale_group || s->scale_group / v > 32) {
        FERR(k, "layout", "'%s': the writer needs one scale group size for all segments, a power-of-two multiple (at most 32) "
             "of values_per_thread %d, with each segment starting on a group", l->name, v);
        bad = 1;
      }
      group = s->scale_group;
    }
  }
  return bad;
}

/* The logits kernel's heads and what it needs of the layout: every value
 * e4m3 in one segment with one scale per token (applied after the head
 * sum, OPS.md section 4). */
static int check_logits(cursor *k, dsv4_kernel *kn)
{
  int has, bad = 0;
  if (op_field(k, kn, DSV4_OP_PAGED_MQA_LOGITS, "heads", &has, &bad))
    return bad;
  const dsv4_layout *l = &kn->layout;
  bad = get_int(k, "heads", 1, 1, 1024, 0, &kn->heads);
  const dsv4_segment *s = &l->seg[0];
  if (!bad && (l->nseg != 1 || s->type != DSV4_DT_E4M3 || s->d0 != 0 || s->d1 != l->dim || s->scale_tensor ||
               s->scale_type != DSV4_DT_F32 || s->scale_group != l->dim || l->dim % 16)) {
    FERR(k, "layout", "'%s': the logits kernel reads one e4m3 segment over all dims (a multiple of 16) with one fp32 "
         "scale per token, like indexer_fp8", l->name);
    bad = 1;
  }
  return bad;
}

/* The top-k kernel's K. */
static int check_topk(cursor *k, dsv4_kernel *kn)
{
  int has, bad = 0;
  if (op_field(k, kn, DSV4_OP_TOPK, "k", &has, &bad))
    return bad;
  return get_int(k, "k", 1, 1, 65536, 0, &kn->topk);
}

/* The decode kernel's v_dim: the first v_dim dims of K are V (576 / 512 for
 * DSv3.2); lanes of V are whole lanes, and a row's lanes one reduction group. */
static int check_decode(cursor *k, dsv4_kernel *kn)
{
  int has, bad = 0;
  if (op_field(k, kn, DSV4_OP_SPARSE_DECODE, "v_dim", &has, &bad))
    return bad;
  const dsv4_layout *l = &kn->layout;
  int v = kn->tile.values_per_thread;
  bad = get_int(k, "v_dim", 0, 1, 4096, l->dim, &kn->v_dim);
  if (!bad && (kn->v_dim > l->dim || kn->v_dim % v)) {
    FERR(k, "v_dim", "= %d must be at most the layout's %d dims and a multiple of values_per_thread %d", kn->v_dim,
         l->dim, v);
    bad = 1;
  }
  if (!bad && kn->tile.matrix && kn->v_dim % (16 * DSV4_DECODE_WARPS)) {
    FERR(k, "v_dim", "= %d: tile.matrix needs a multiple of %d (%d parts of 16-dim n-tile pairs)", kn->v_dim,
         16 * DSV4_DECODE_WARPS, DSV4_DECODE_WARPS);
    bad = 1;
  }
  /* a matrix kernel for a target with the warpgroup units takes the
   * warpgroup form when its shape maps and fits the arch's shared memory */
  for (int i = 0; !bad && kn->tile.matrix && i < DSV4_TARGET_COUNT; i++)
    if (kn->target[i].enabled && dsv4_target_has_wgmma((dsv4_target_kind)i, kn->target[i].arch) &&
        dsv4_decode_wg_shape_ok(l->dim, kn->v_dim, kn->tile.tokens_per_cta) &&
        dsv4_decode_wg_shared_bytes(l->dim) <= dsv4_target_max_shared((dsv4_target_kind)i, kn->target[i].arch)) {
      kn->tile.matrix = kn->tile.pair ? DSV4_MATRIX_WARPGROUP_PAIR : DSV4_MATRIX_WARPGROUP;
      kn->tile.threads = dsv4_op_threads(kn->op, l->dim, v, kn->tile.tokens_per_cta, kn->tile.tokens_per_thread,
                                         kn->heads, kn->tile.matrix);
    }
  /* options of the warpgroup form only */
  int wg = kn->tile.matrix == DSV4_MATRIX_WARPGROUP || kn->tile.matrix == DSV4_MATRIX_WARPGROUP_PAIR;
  const char *wg_only = kn->tile.prefetch && !wg                                           ? "prefetch"
                        : kn->tile.pair && kn->tile.matrix != DSV4_MATRIX_WARPGROUP_PAIR ? "pair"
                                                                                         : NULL;
  if (!bad && wg_only) {
    FERR(k, "tile", "sets %s = true, which needs the warpgroup form (tile.matrix, 64 heads a CTA, 512 dims with V = K, and "
         "only targets with wgmma: ptx sm_90a)", wg_only);
    bad = 1;
  }
  if (!bad && !kn->tile.matrix && dsv4_pow2ceil(l->dim / v) > 32) {
    FERR(k, "tile", "gives %d lanes a head (padded to %d); a head's lanes must fit one 32-wide reduction: raise "
         "values_per_thread", l->dim / v, dsv4_pow2ceil(l->dim / v));
    bad = 1;
  }
  return bad;
}

/* Identifier rule for kernel names (they become symbol and file names). */
static int is_ident(const char *s)
{
  if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || *s == '_'))
    return 0;
  for (s++; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
      return 0;
  return 1;
}

/* One kernel{} table (on the stack top) into the plan. */
static int check_kernel(checker *c, int idx)
{
  static const char *const known[] = {"name", "op", "layout", "tile", "targets", "rope", "q", "quant", "v_dim", "heads", "k", NULL};
  dsv4_plan *p = c->plan;
  if (p->nkernels == DSV4_MAX_KERNELS) {
    dsv4_error(c->d, p->file, 0, "more than %d kernels in one spec", DSV4_MAX_KERNELS);
    return 1;
  }
  dsv4_kernel *kn = &p->kernels[p->nkernels];
  memset(kn, 0, sizeof *kn);
  table_pos(c, idx, kn->file, sizeof kn->file, &kn->line);
  cursor k = {.c = c, .idx = idx, .file = kn->file, .line = kn->line, .what = "kernel"};
  char what[96];
  int bad = get_str(&k, "name", 1, "", kn->name, sizeof kn->name);
  snprintf(what, sizeof what, "kernel '%s'", kn->name);
  k.what = what;
  if (!bad && !is_ident(kn->name)) {
    FERR(&k, "name", "must be an identifier ([A-Za-z_][A-Za-z0-9_]*), got '%s'", kn->name);
    bad = 1;
  }
  for (int i = 0; i < p->nkernels && !bad; i++)
    if (strcmp(p->kernels[i].name, kn->name) == 0) {
      FERR(&k, "name", "repeats the name of the kernel declared at %s:%d", p->kernels[i].file, p->kernels[i].line);
      bad = 1;
    }
  bad |= check_known(&k, known);
  char op[32];
  if (!get_str(&k, "op", 1, "", op, sizeof op)) {
    kn->op = dsv4_op_from_name(op);
    if (kn->op == DSV4_OP_NONE) {
      char list[256] = "";
      for (int i = 1; i < DSV4_OP_COUNT; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s'%s'", i > 1 ? ", " : "",
                 dsv4_op_name((dsv4_op)i));
      FERR(&k, "op", "names unknown op '%s' (expected one of %s)", op, list);
      bad = 1;
    }
  } else
    bad = 1;
  int lt = lua_getfield(c->L, idx, "layout");
  int needs = kn->op == DSV4_OP_NONE || dsv4_op_has_layout(kn->op);
  if (lt != LUA_TNIL && !needs) {
    FERR(&k, "layout", "is not taken by op '%s', which reads no cache", dsv4_op_name(kn->op));
    bad = 1;
  } else if (lt == LUA_TTABLE)
    bad |= check_layout_table(c, lua_gettop(c->L), what, &kn->layout);
  else if (lt == LUA_TNIL) {
    if (needs) {
      missing(&k, "field", "layout");
      bad = 1;
    }
  } else {
    FERR(&k, "layout", "must be a table made by layout { ... }, got a %s", luaL_typename(c->L, -1));
    bad = 1;
  }
  lua_pop(c->L, 1);
  bad |= check_targets(&k, kn);
  if (!bad)
    bad |= check_logits(&k, kn);
  if (!bad)
    bad |= check_topk(&k, kn);
  if (!bad)
    bad |= check_tile(&k, kn);
  if (!bad)
    bad |= check_writer(&k, kn);
  if (!bad)
    bad |= check_decode(&k, kn);
  if (!bad) {
    p->nkernels++;
    /* remember each distinct layout once, for --emit plan and the bundle */
    int seen = 0;
    for (int i = 0; i < p->nlayouts; i++)
      seen |= strcmp(p->layouts[i].name, kn->layout.name) == 0;
    if (!seen && p->nlayouts < DSV4_MAX_LAYOUTS && dsv4_op_has_layout(kn->op))
      p->layouts[p->nlayouts++] = kn->layout;
  }
  return bad;
}

/* Check every queued kernel{} table (called through lua_pcall). */
static int check_all(lua_State *L)
{
  checker *c = lua_touserdata(L, 1);
  int rc = 0;
  lua_getfield(L, LUA_REGISTRYINDEX, KERNELS_KEY);
  int list = lua_gettop(L);
  int n = (int)lua_rawlen(L, list);
  if (n == 0) {
    dsv4_error(c->d, c->plan->file, 0, "the spec declares no kernel (call kernel { ... })");
    rc = 1;
  }
  for (int i = 1; i <= n; i++) {
    lua_rawgeti(L, list, i);
    rc |= check_kernel(c, lua_gettop(L));
    lua_pop(L, 1);
  }
  lua_pushinteger(L, rc);
  return 1;
}

int dsv4_spec_load(const char *path, const dsv4_spec_opts *opts, dsv4_plan *plan, dsv4_diags *d)
{
  memset(plan, 0, sizeof *plan);
  snprintf(plan->file, sizeof plan->file, "%s", path);
  FILE *f = fopen(path, "rb");
  if (!f) {
    dsv4_error(d, path, 0, "cannot open spec file");
    return 1;
  }
  fclose(f);
  checker c = {.d = d, .plan = plan};
  dsv4_sandbox *sb = dsv4_sandbox_open(path, opts, d);
  if (!sb)
    return 1;
  c.L = dsv4_sandbox_state(sb);
  int rc = dsv4_sandbox_run(sb, path, d);
  /* checking runs protected and bounded: a metamethod in the spec's tables may raise or loop */
  if (!rc && dsv4_sandbox_call(sb, check_all, &c, &rc, d))
    rc = 1;
  dsv4_sandbox_close(sb);
  for (int i = 0; i < c.nfiles; i++)
    free(c.files[i].text);
  return rc || d->errors;
}

/* ---- --emit plan ------------------------------------------------------------- */

typedef struct {
  char *s;
  size_t n, cap;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) DSV4_PRINTF(2, 3);
static void sb_printf(sbuf *b, const char *fmt, ...)
{
  va_list ap;
  for (;;) {
    va_start(ap, fmt);
    int m = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
    va_end(ap);
    if (m < 0)
      return;
    if (b->s && b->n + (size_t)m < b->cap) {
      b->n += (size_t)m;
      return;
    }
    size_t cap = (b->cap + (size_t)m + 1) * 2;
    char *s = realloc(b->s, cap);
    if (!s)
      return;
    b->s = s, b->cap = cap;
  }
}

static void dump_layout(sbuf *b, const dsv4_layout *l)
{
  static const char *place[] = {"none", "block_tail", "inline"};
  sb_printf(b, "layout %s: dim %d, row_bytes %d, scales %s", l->name, l->dim, l->row_bytes, place[l->scale_place]);
  if (l->scale_place == DSV4_SCALES_BLOCK_TAIL)
    sb_printf(b, " (row_bytes %d)", l->scale_row_bytes);
  sb_printf(b, ", align %d", l->align);
  if (l->block_tokens)
    sb_printf(b, ", block %d tokens in %d bytes (%lld used)", l->block_tokens, l->block_stride,
              (long long)dsv4_layout_min_block_bytes(l, l->block_tokens));
  sb_printf(b, "\n");
  for (int i = 0; i < l->nseg; i++) {
    const dsv4_segment *s = &l->seg[i];
    sb_printf(b, "  segment %d: dims [%d, %d) %s at byte %d", i + 1, s->d0, s->d1, dsv4_dtype_name(s->type), s->offset);
    if (s->scale_tensor)
      sb_printf(b, ", scale %s per tensor (launch argument)", dsv4_dtype_name(s->scale_type));
    else if (s->scale_type)
      sb_printf(b, ", scale %s per %d values at byte %d", dsv4_dtype_name(s->scale_type), s->scale_group,
                s->scale_offset);
    sb_printf(b, "\n");
  }
}

char *dsv4_plan_dump(const dsv4_plan *p)
{
  sbuf b = {0};
  sb_printf(&b, "spec %s: %d layout(s), %d kernel(s)\n", p->file, p->nlayouts, p->nkernels);
  for (int i = 0; i < p->nlayouts; i++)
    dump_layout(&b, &p->layouts[i]);
  for (int i = 0; i < p->nkernels; i++) {
    const dsv4_kernel *k = &p->kernels[i];
    sb_printf(&b,
              "kernel %s (%s:%d): op %s, layout %s, tile values_per_thread %d tokens_per_cta %d tokens_per_thread %d "
              "interleave %d streaming %d threads %d\n",
              k->name, k->file, k->line, dsv4_op_name(k->op), k->layout.name, k->tile.values_per_thread,
              k->tile.tokens_per_cta, k->tile.tokens_per_thread, k->tile.interleave, k->tile.streaming, k->tile.threads);
    if (k->rope_dims)
      sb_printf(&b, "  rope dims [%d, %d)\n", k->rope_first, k->rope_first + k->rope_dims);
    if (k->q_dim)
      sb_printf(&b, "  q branch: head size %d\n", k->q_dim);
    if (k->op == DSV4_OP_KV_INSERT)
      sb_printf(&b, "  quant: floor %s at 1e-4\n", k->quant_floor ? "amax/448" : "amax");
    if (k->op == DSV4_OP_TOPK)
      sb_printf(&b, "  k %d\n", k->topk);
    if (k->op == DSV4_OP_SPARSE_DECODE)
      sb_printf(&b, "  v_dim %d, %d heads per CTA%s\n", k->v_dim, k->tile.tokens_per_cta,
                k->tile.matrix == DSV4_MATRIX_WARPGROUP_PAIR ? ", warpgroup matrix form in CTA pairs"
                : k->tile.matrix == DSV4_MATRIX_WARPGROUP ? ", warpgroup matrix form"
                : k->tile.matrix                        ? ", warp matrix form"
                                                        : "");
    if (k->op == DSV4_OP_SPARSE_DECODE && k->tile.prefetch)
      sb_printf(&b, "  each tile's producers prefetch the next tile's rows into the L2\n");
    if (k->op == DSV4_OP_SPARSE_DECODE &&
        (k->tile.matrix == DSV4_MATRIX_WARPGROUP || k->tile.matrix == DSV4_MATRIX_WARPGROUP_PAIR))
      sb_printf(&b,
                "  roles: %d producer warps (%d registers a thread), a lead warpgroup (%d: q K^T, softmax, "
                "P V dims [0, %d)), a follower warpgroup (%d: P V dims [%d, %d))%s\n",
                dsv4_decode_wg_producers(k->tile.matrix), dsv4_decode_wg_producer_regs(k->tile.matrix),
                DSV4_DECODE_WG_LEAD_REGS,
                DSV4_DECODE_WG_LEAD_DIMS, DSV4_DECODE_WG_FOLLOW_REGS, DSV4_DECODE_WG_LEAD_DIMS, k->v_dim,
                k->tile.matrix == DSV4_MATRIX_WARPGROUP_PAIR ? "; each CTA dequantizes half a tile and copies it to the other" : "");
    if (dsv4_kernel_shared_bytes(k))
      sb_printf(&b, "  dynamic shared memory %d bytes\n", dsv4_kernel_shared_bytes(k));
    for (int t = 0; t < DSV4_TARGET_COUNT; t++)
      if (k->target[t].enabled)
        sb_printf(&b, "  target %s arch %s%s\n", dsv4_target_name((dsv4_target_kind)t), k->target[t].arch,
                  k->target[t].subgroups ? " subgroups" : "");
  }
  return b.s;
}
