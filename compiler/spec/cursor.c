/* cursor.c -- the spec's source text and field positions, and typed reads of its
 * tables' fields through a cursor (table, file, constructor line, key path):
 * every error names the field by its path and points at its line and column. */
#include "internal.h"

/* The text of a spec file for srcpos scans: the bytes the sandbox read
 * and ran (DSV4_SPEC_SOURCES_KEY), never the file reopened by name, which
 * may have changed since; copied once. */
const src_file *sc_source(checker *c, const char *path)
{
  for (int i = 0; i < c->nfiles; i++)
    if (strcmp(c->files[i].path, path) == 0)
      return &c->files[i];
  if (c->nfiles == FILES_MAX)
    return NULL;
  lua_State *L = c->L;
  lua_getfield(L, LUA_REGISTRYINDEX, DSV4_SPEC_SOURCES_KEY);
  size_t n = 0;
  const char *text = lua_getfield(L, -1, path) == LUA_TSTRING ? lua_tolstring(L, -1, &n) : NULL;
  src_file *s = &c->files[c->nfiles];
  s->text = text ? malloc(n + 1) : NULL;
  if (s->text) {
    memcpy(s->text, text, n);
    s->text[n] = 0;
    s->len = n;
  }
  lua_pop(L, 2);
  if (!s->text)
    return NULL;
  snprintf(s->path, sizeof s->path, "%s", path);
  c->nfiles++;
  return s;
}

/* Line of cursor field `key` (NULL: the cursor's table itself), and in
 * *col its column (0 when unknown). */
int sc_field_pos(const cursor *k, const char *key, int *col)
{
  const char *path[9];
  int n = 0;
  for (int i = 0; i < k->npath; i++)
    path[n++] = k->path[i];
  if (key)
    path[n++] = key;
  const src_file *s = sc_source(k->c, k->file);
  *col = 0;
  if (!s || k->line <= 0)
    return k->line;
  return dsv4_srcpos_find_col(s->text, s->len, k->line, path, n, col);
}

int sc_field_line(const cursor *k, const char *key)
{
  int col;
  return sc_field_pos(k, key, &col);
}

/* An error at cursor field `key` (NULL: the table), with its column. */
void sc_field_error(const cursor *k, const char *key, const char *fmt, ...)
{
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  int col, line = sc_field_pos(k, key, &col);
  dsv4_error_at(k->c->d, k->file, line, col, "%s", msg);
}

/* "tile.values_per_thread" for messages. */
const char *sc_field_name(const cursor *k, const char *key, char *buf, size_t n)
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
void sc_missing(cursor *k, const char *what, const char *key)
{
  char fb[128];
  k->c->structural++;
  if (k->npath == 0)
    sc_field_error(k, NULL, "%s: missing required %s '%s'", k->what, what, key);
  else
    sc_field_error(k, NULL, "%s: field '%s' is missing required %s '%s'", k->what,
                   sc_field_name(k, NULL, fb, sizeof fb), what, key);
}

/* Edit distance, for "did you mean" hints on unknown fields and names. */
int sc_edit_distance(const char *a, const char *b)
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
int sc_check_known(cursor *k, const char *const *allowed)
{
  lua_State *L = k->c->L;
  int bad = 0;
  lua_pushnil(L);
  while (lua_next(L, k->idx)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TSTRING) {
      FERR(k, NULL, "has a positional or non-string key; only named fields are allowed here");
      bad = 1, k->c->structural++;
      continue;
    }
    const char *key = lua_tostring(L, -1);
    int known = 0, best = 99;
    const char *hint = NULL;
    for (const char *const *a = allowed; *a; a++) {
      if (strcmp(*a, key) == 0)
        known = 1;
      int e = sc_edit_distance(*a, key);
      if (e < best)
        best = e, hint = *a;
    }
    if (!known) {
      char fb[128];
      if (best <= 2)
        sc_field_error(k, key, "%s: unknown field '%s' (did you mean '%s'?)", k->what,
                       sc_field_name(k, key, fb, sizeof fb), hint);
      else
        sc_field_error(k, key, "%s: unknown field '%s'", k->what, sc_field_name(k, key, fb, sizeof fb));
      bad = 1, k->c->structural++;
    }
  }
  return bad;
}

/* Push field key of the cursor's table; returns its Lua type. */
int sc_push_field(cursor *k, const char *key)
{
  if (key[0] == '#')
    return lua_geti(k->c->L, k->idx, atoi(key + 1));
  return lua_getfield(k->c->L, k->idx, key);
}

/* Integer field in [lo, hi]; def used when absent and not required. */
int sc_get_int(cursor *k, const char *key, int required, long lo, long hi, long def, int32_t *out)
{
  lua_State *L = k->c->L;
  int t = sc_push_field(k, key);
  int rc = 0;
  *out = (int32_t)def; /* defined on every error path too */
  if (t == LUA_TNIL) {
    if (required) {
      sc_missing(k, "field", key);
      rc = 1;
    }
    *out = (int32_t)def;
  } else if (!lua_isinteger(L, -1)) {
    if (t == LUA_TNUMBER)
      FERR(k, key, "must be an integer, got %g", lua_tonumber(L, -1));
    else
      FERR(k, key, "must be an integer, got a %s", luaL_typename(L, -1));
    rc = 1, k->c->structural++;
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
int sc_get_str(cursor *k, const char *key, int required, const char *def, char *buf, size_t n)
{
  lua_State *L = k->c->L;
  int t = sc_push_field(k, key);
  int rc = 0;
  buf[0] = 0; /* defined on every error path too */
  if (t == LUA_TNIL) {
    if (required) {
      sc_missing(k, "field", key);
      rc = 1;
    }
    snprintf(buf, n, "%s", def ? def : "");
  } else if (t != LUA_TSTRING) {
    FERR(k, key, "must be a string, got a %s", luaL_typename(L, -1));
    rc = 1, k->c->structural++;
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
int sc_get_bool(cursor *k, const char *key, int def, int32_t *out)
{
  lua_State *L = k->c->L;
  int t = sc_push_field(k, key), rc = 0;
  if (t == LUA_TNIL)
    *out = def;
  else if (t != LUA_TBOOLEAN) {
    FERR(k, key, "must be true or false, got a %s", luaL_typename(L, -1));
    rc = 1, k->c->structural++;
  } else
    *out = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return rc;
}

/* Enter the table in field key: pushes it and fills *sub; 1 if absent. */
int sc_enter(cursor *k, const char *key, cursor *sub, int required)
{
  lua_State *L = k->c->L;
  int t = sc_push_field(k, key);
  if (t != LUA_TTABLE) {
    if (t == LUA_TNIL) {
      if (required)
        sc_missing(k, "table", key);
    } else
      FERR(k, key, "must be a table, got a %s", luaL_typename(L, -1));
    k->c->structural += t != LUA_TNIL || required;
    lua_pop(L, 1);
    return t == LUA_TNIL ? 1 : -1;
  }
  *sub = *k;
  sub->idx = lua_gettop(L);
  sub->path[sub->npath++] = key;
  return 0;
}

void sc_leave(cursor *sub) { lua_pop(sub->c->L, 1); }

/* Element type by name, restricted to the mask of allowed types. */
int sc_get_dtype(cursor *k, const char *key, int required, unsigned mask, int32_t *out)
{
  char s[16];
  *out = DSV4_DT_NONE;
  if (sc_get_str(k, key, required, "", s, sizeof s))
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
int sc_table_pos(checker *c, int idx, char *file, size_t n, int *line)
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
