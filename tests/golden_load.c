/* golden_load.c -- golden fixture loader (see golden_load.h).  Runs case.lua in a fresh Lua 5.4 state
 * with only the base library, copies everything into C structs inside one protected call, closes the
 * state, then reads the raw tensor files.  Never prints, never exits. */
#include "golden_load.h"

#include <sys/stat.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char name[64];
  int is_num;
  double num;
  char *str;
} golden_param;

struct golden_case {
  char op[64];
  golden_param *params;
  int nparams;
  golden_tensor *tensors; /* inputs first, then expect */
  char **files;           /* file name of each tensor, relative to the folder */
  int ntensors;
};

/* Context handed to the protected extraction function. */
typedef struct {
  golden_case *c;
  const char *path; /* case.lua path */
} load_ctx;

/* Bytes per element of a fixture dtype, 0 if unknown. */
static size_t dtype_bytes(const char *dt)
{
  static const struct {
    const char *n;
    size_t b;
  } t[] = {{"u8", 1}, {"i32", 4}, {"i64", 8}, {"f32", 4}, {"bf16", 2}, {"e4m3", 1}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    if (strcmp(dt, t[i].n) == 0)
      return t[i].b;
  return 0;
}

/* Write a formatted message into err (if any). */
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
  va_list ap;
  if (!err || errlen == 0)
    return;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

/* Free a case and everything attached to it, complete or partial. */
void golden_close(golden_case *c)
{
  if (!c)
    return;
  for (int i = 0; i < c->nparams; i++)
    free(c->params[i].str);
  free(c->params);
  for (int i = 0; i < c->ntensors; i++) {
    free(c->tensors[i].data);
    if (c->files)
      free(c->files[i]);
  }
  free(c->tensors);
  free(c->files);
  free(c);
}

/* strdup in C11, raising a Lua error on allocation failure (only used inside the protected call). */
static char *dup_or_raise(lua_State *L, const char *s)
{
  size_t n = strlen(s) + 1;
  char *p = malloc(n);
  if (!p)
    luaL_error(L, "out of memory");
  memcpy(p, s, n);
  return p;
}

/* Copy a string key of at most 63 bytes into dst, raising a Lua error otherwise. */
static void copy_name(lua_State *L, char *dst, size_t cap, int keyidx, const char *what)
{
  size_t len;
  const char *k;
  if (lua_type(L, keyidx) != LUA_TSTRING)
    luaL_error(L, "%s: key is not a string", what);
  k = lua_tolstring(L, keyidx, &len);
  if (len == 0 || len >= cap || strlen(k) != len)
    luaL_error(L, "%s: bad name '%s'", what, k);
  memcpy(dst, k, len + 1);
}

/* Read optional number field `f` of the table at idx into *out; leaves *out alone if absent. */
static void opt_num_field(lua_State *L, int idx, const char *f, double *out, const char *who)
{
  int t = lua_getfield(L, idx, f);
  if (t == LUA_TNUMBER)
    *out = (double)lua_tonumber(L, -1);
  else if (t != LUA_TNIL)
    luaL_error(L, "tensor '%s': tol.%s is not a number", who, f);
  lua_pop(L, 1);
}

/* Append the tensors of the table at the top of the stack (inputs or expect) to the case. */
static void read_tensors(lua_State *L, golden_case *c, const char *group)
{
  int tbl = lua_gettop(L);
  lua_pushnil(L);
  while (lua_next(L, tbl)) {
    golden_tensor *tv;
    char **fv;
    golden_tensor *t;
    int ent = lua_gettop(L);
    size_t esz = 0;
    if (lua_type(L, ent) != LUA_TTABLE)
      luaL_error(L, "%s: entry is not a table", group);
    tv = realloc(c->tensors, (size_t)(c->ntensors + 1) * sizeof *tv);
    if (!tv)
      luaL_error(L, "out of memory");
    c->tensors = tv;
    fv = realloc(c->files, (size_t)(c->ntensors + 1) * sizeof *fv);
    if (!fv)
      luaL_error(L, "out of memory");
    c->files = fv;
    t = &c->tensors[c->ntensors];
    memset(t, 0, sizeof *t);
    c->files[c->ntensors] = NULL;
    c->ntensors++;
    t->tol_abs = t->tol_rel = t->tol_calc_diff = -1.0;
    copy_name(L, t->name, sizeof t->name, ent - 1, group);
    for (int i = 0; i < c->ntensors - 1; i++)
      if (strcmp(c->tensors[i].name, t->name) == 0)
        luaL_error(L, "tensor '%s' appears twice", t->name);

    if (lua_getfield(L, ent, "dtype") != LUA_TSTRING)
      luaL_error(L, "tensor '%s': dtype missing", t->name);
    {
      const char *dt = lua_tostring(L, -1);
      if (strlen(dt) >= sizeof t->dtype || (esz = dtype_bytes(dt)) == 0)
        luaL_error(L, "tensor '%s': unknown dtype '%s'", t->name, dt);
      strcpy(t->dtype, dt);
    }
    lua_pop(L, 1);

    if (lua_getfield(L, ent, "shape") != LUA_TTABLE)
      luaL_error(L, "tensor '%s': shape missing", t->name);
    {
      lua_Unsigned nd = lua_rawlen(L, -1);
      size_t ne = 1;
      if (nd > GOLDEN_MAX_DIMS)
        luaL_error(L, "tensor '%s': more than %d dims", t->name, GOLDEN_MAX_DIMS);
      t->ndim = (int)nd;
      for (int d = 0; d < t->ndim; d++) {
        int isint = 0;
        lua_Integer v;
        lua_rawgeti(L, -1, d + 1);
        v = lua_tointegerx(L, -1, &isint);
        lua_pop(L, 1);
        if (!isint || v < 0)
          luaL_error(L, "tensor '%s': shape[%d] is not a non-negative integer", t->name, d + 1);
        if (v > 0 && (size_t)v > (SIZE_MAX / esz) / ne)
          luaL_error(L, "tensor '%s': shape too large", t->name);
        t->shape[d] = (int64_t)v;
        ne *= (size_t)v;
      }
      t->nelem = (int64_t)ne;
      t->nbytes = ne * esz;
    }
    lua_pop(L, 1);

    if (lua_getfield(L, ent, "file") != LUA_TSTRING)
      luaL_error(L, "tensor '%s': file missing", t->name);
    {
      const char *f = lua_tostring(L, -1);
      if (f[0] == '\0' || f[0] == '/' || strstr(f, ".."))
        luaL_error(L, "tensor '%s': bad file name '%s'", t->name, f);
      c->files[c->ntensors - 1] = dup_or_raise(L, f);
    }
    lua_pop(L, 1);

    {
      int tt = lua_getfield(L, ent, "tol");
      if (tt == LUA_TTABLE) {
        int ti = lua_gettop(L);
        t->has_tol = 1;
        opt_num_field(L, ti, "abs", &t->tol_abs, t->name);
        opt_num_field(L, ti, "rel", &t->tol_rel, t->name);
        opt_num_field(L, ti, "calc_diff", &t->tol_calc_diff, t->name);
      } else if (tt != LUA_TNIL) {
        luaL_error(L, "tensor '%s': tol is not a table", t->name);
      }
      lua_pop(L, 1);
    }
    lua_settop(L, ent - 1); /* keep the key for lua_next */
  }
}

/* Protected body: open base, run case.lua, copy op, params, inputs and expect into the case. */
static int run_case(lua_State *L)
{
  load_ctx *ctx = lua_touserdata(L, 1);
  golden_case *c = ctx->c;
  int res;

  luaL_requiref(L, "_G", luaopen_base, 1);
  lua_pop(L, 1);
  if (luaL_loadfilex(L, ctx->path, "t") != LUA_OK)
    return lua_error(L);
  lua_call(L, 0, 1);
  if (!lua_istable(L, -1))
    return luaL_error(L, "%s: did not return a table", ctx->path);
  res = lua_gettop(L);

  if (lua_getfield(L, res, "op") != LUA_TSTRING)
    return luaL_error(L, "%s: op missing", ctx->path);
  {
    size_t len;
    const char *op = lua_tolstring(L, -1, &len);
    if (len >= sizeof c->op)
      return luaL_error(L, "%s: op too long", ctx->path);
    memcpy(c->op, op, len + 1);
  }
  lua_pop(L, 1);

  {
    int t = lua_getfield(L, res, "params");
    if (t == LUA_TTABLE) {
      int pt = lua_gettop(L);
      lua_pushnil(L);
      while (lua_next(L, pt)) {
        int vt = lua_type(L, -1);
        if (vt == LUA_TNUMBER || vt == LUA_TSTRING || vt == LUA_TBOOLEAN) {
          golden_param *pv = realloc(c->params, (size_t)(c->nparams + 1) * sizeof *pv);
          golden_param *p;
          if (!pv)
            return luaL_error(L, "out of memory");
          c->params = pv;
          p = &c->params[c->nparams];
          memset(p, 0, sizeof *p);
          c->nparams++;
          copy_name(L, p->name, sizeof p->name, -2, "params");
          if (vt == LUA_TNUMBER) {
            p->is_num = 1;
            p->num = (double)lua_tonumber(L, -1);
          } else if (vt == LUA_TBOOLEAN) {
            p->is_num = 1;
            p->num = lua_toboolean(L, -1) ? 1.0 : 0.0;
          } else {
            p->str = dup_or_raise(L, lua_tostring(L, -1));
          }
        } /* other value types are not exposed */
        lua_pop(L, 1);
      }
    } else if (t != LUA_TNIL) {
      return luaL_error(L, "%s: params is not a table", ctx->path);
    }
    lua_pop(L, 1);
  }

  if (lua_getfield(L, res, "inputs") == LUA_TTABLE)
    read_tensors(L, c, "inputs");
  else if (!lua_isnil(L, -1))
    return luaL_error(L, "%s: inputs is not a table", ctx->path);
  lua_pop(L, 1);
  if (lua_getfield(L, res, "expect") == LUA_TTABLE)
    read_tensors(L, c, "expect");
  else if (!lua_isnil(L, -1))
    return luaL_error(L, "%s: expect is not a table", ctx->path);
  lua_pop(L, 1);
  return 0;
}

/* 1 on a big-endian host (fixture files are little-endian). */
static int host_big_endian(void)
{
  const uint16_t one = 1;
  unsigned char b;
  memcpy(&b, &one, 1);
  return b == 0;
}

/* Reverse each esz-byte element in place. */
static void swap_elems(unsigned char *p, size_t nbytes, size_t esz)
{
  for (size_t o = 0; o + esz <= nbytes; o += esz)
    for (size_t i = 0; i < esz / 2; i++) {
      unsigned char t = p[o + i];
      p[o + i] = p[o + esz - 1 - i];
      p[o + esz - 1 - i] = t;
    }
}

/* Join dir and name with '/', malloc'd; NULL on allocation failure. */
static char *join_path(const char *dir, const char *name)
{
  size_t a = strlen(dir), b = strlen(name);
  char *p = malloc(a + b + 2);
  if (!p)
    return NULL;
  memcpy(p, dir, a);
  p[a] = '/';
  memcpy(p + a + 1, name, b + 1);
  return p;
}

/* Read a tensor file, checking that its size equals shape * dtype size. */
static int read_tensor_file(const char *dir, const char *file, golden_tensor *t, char *err, size_t errlen)
{
  char *path = join_path(dir, file);
  FILE *f;
  long sz;
  if (!path) {
    set_err(err, errlen, "out of memory");
    return 1;
  }
  f = fopen(path, "rb");
  if (!f) {
    set_err(err, errlen, "%s: cannot open (tensor '%s')", path, t->name);
    free(path);
    return 1;
  }
  if (fseek(f, 0, SEEK_END) != 0 || (sz = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
    set_err(err, errlen, "%s: cannot determine size", path);
    goto fail;
  }
  if ((unsigned long)sz != t->nbytes) {
    set_err(err, errlen, "%s: size %ld bytes, but tensor '%s' (%s, %lld elements) needs %zu", path, sz,
            t->name, t->dtype, (long long)t->nelem, t->nbytes);
    goto fail;
  }
  t->data = malloc(t->nbytes ? t->nbytes : 1);
  if (!t->data) {
    set_err(err, errlen, "out of memory for %s", path);
    goto fail;
  }
  if (t->nbytes && fread(t->data, 1, t->nbytes, f) != t->nbytes) {
    set_err(err, errlen, "%s: short read", path);
    goto fail;
  }
  if (host_big_endian())
    swap_elems(t->data, t->nbytes, dtype_bytes(t->dtype));
  fclose(f);
  free(path);
  return 0;
fail:
  fclose(f);
  free(path);
  return 1;
}

int golden_present(const char *root)
{
  struct stat st;
  return root && stat(root, &st) == 0 && S_ISDIR(st.st_mode);
}

const char *golden_root(const char *root)
{
  if (golden_present(root))
    return root;
  printf("golden checks left out: no fixtures at %s (CTest's golden.fixtures reports them skipped)\n",
         root ? root : "(none)");
  return NULL;
}

golden_case *golden_open(const char *dir, char *err, size_t errlen)
{
  golden_case *c;
  lua_State *L;
  load_ctx ctx;
  char *path;
  FILE *probe;

  set_err(err, errlen, "%s", "");
  if (!dir) {
    set_err(err, errlen, "no folder given");
    return NULL;
  }
  path = join_path(dir, "case.lua");
  c = calloc(1, sizeof *c);
  if (!path || !c) {
    free(path);
    free(c);
    set_err(err, errlen, "out of memory");
    return NULL;
  }
  probe = fopen(path, "rb");
  if (!probe) {
    set_err(err, errlen, "%s: cannot open", path);
    goto fail;
  }
  fclose(probe);

  L = luaL_newstate();
  if (!L) {
    set_err(err, errlen, "cannot create a Lua state");
    goto fail;
  }
  ctx.c = c;
  ctx.path = path;
  lua_pushcfunction(L, run_case);
  lua_pushlightuserdata(L, &ctx);
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
    const char *m = lua_tostring(L, -1);
    set_err(err, errlen, "%s", m ? m : "error in case.lua (non-string error object)");
    lua_close(L);
    goto fail;
  }
  lua_close(L);

  for (int i = 0; i < c->ntensors; i++)
    if (read_tensor_file(dir, c->files[i], &c->tensors[i], err, errlen))
      goto fail;
  free(path);
  return c;
fail:
  free(path);
  golden_close(c);
  return NULL;
}

const golden_tensor *golden_tensor_get(const golden_case *c, const char *name)
{
  if (!c || !name)
    return NULL;
  for (int i = 0; i < c->ntensors; i++)
    if (strcmp(c->tensors[i].name, name) == 0)
      return &c->tensors[i];
  return NULL;
}

/* Find a param by name, NULL if absent. */
static const golden_param *find_param(const golden_case *c, const char *name)
{
  if (!c || !name)
    return NULL;
  for (int i = 0; i < c->nparams; i++)
    if (strcmp(c->params[i].name, name) == 0)
      return &c->params[i];
  return NULL;
}

int golden_param_num(const golden_case *c, const char *name, double *out)
{
  const golden_param *p = find_param(c, name);
  if (!p || !p->is_num)
    return 1;
  if (out)
    *out = p->num;
  return 0;
}

int golden_param_str(const golden_case *c, const char *name, char *buf, size_t n)
{
  const golden_param *p = find_param(c, name);
  size_t len;
  if (!p || p->is_num || !p->str || !buf || n == 0)
    return 1;
  len = strlen(p->str);
  if (len >= n)
    return 1;
  memcpy(buf, p->str, len + 1);
  return 0;
}

const char *golden_op(const golden_case *c)
{
  return c ? c->op : "";
}
