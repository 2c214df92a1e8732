/* spec.c -- run a Lua spec in the sandbox and check its tables into a plan.
 *
 * Spec files call three functions the sandbox (sandbox.c) provides:
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
 * path): every error names the field by its path and points at its line
 * and column.  internal.h says which file of compiler/spec/ does what.
 */
#include "internal.h"

#include <errno.h>
#include <sys/stat.h>

#define FREEZE_DEPTH 16 /* tables deeper than the checker reads (kernel.layout.segments[i].scale) stay shared */

/* Push a copy of the value at stack index idx (absolute): a table is
 * copied with its fields copied likewise (keys as they are), keeping its
 * metatable and its layout{} / kernel{} position; other values are pushed
 * as they are.  seen (a stack index) maps each table copied to its copy,
 * so shared tables stay shared and cycles end.  A metatable with __gc is
 * not put on a copy (Lua would then finalize it outside the budget): that
 * table is kept as it is. */
static void push_frozen(lua_State *L, int idx, int seen, int depth)
{
  luaL_checkstack(L, 8, "the spec's tables nest too deeply");
  if (lua_type(L, idx) != LUA_TTABLE || depth == 0) {
    lua_pushvalue(L, idx);
    return;
  }
  lua_pushvalue(L, idx);
  if (lua_rawget(L, seen) != LUA_TNIL)
    return; /* copied already */
  lua_pop(L, 1);
  int mt = lua_getmetatable(L, idx);
  if (mt && (lua_pushliteral(L, "__gc"), lua_rawget(L, -2) != LUA_TNIL)) {
    lua_pop(L, 2);
    lua_pushvalue(L, idx);
    return;
  }
  if (mt)
    lua_pop(L, 2); /* __gc's nil and the metatable (fetched again below) */
  lua_newtable(L);
  int copy = lua_gettop(L);
  lua_pushvalue(L, idx);
  lua_pushvalue(L, copy);
  lua_rawset(L, seen);
  if (lua_getmetatable(L, idx))
    lua_setmetatable(L, copy);
  lua_getfield(L, LUA_REGISTRYINDEX, POS_KEY);
  lua_pushvalue(L, idx);
  if (lua_rawget(L, -2) != LUA_TNIL) {
    lua_pushvalue(L, copy);
    lua_insert(L, -2);
    lua_rawset(L, -3);
  } else
    lua_pop(L, 1);
  lua_pop(L, 1);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    int v = lua_gettop(L);
    lua_pushvalue(L, v - 1);
    push_frozen(L, v, seen, depth - 1);
    lua_rawset(L, copy);
    lua_pop(L, 1);
  }
}

/* Check every queued kernel{} table (called through lua_pcall).  The
 * tables are copied first, all of them, before any is checked: a sweep's
 * constraints run during the check, and a constraint writing into the
 * spec's tables through an upvalue (a swept list, the tile, a layout)
 * must not change what this or any later kernel is built from. */
int sc_check_all(lua_State *L)
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
  lua_newtable(L);
  int seen = lua_gettop(L);
  lua_createtable(L, n, 0);
  int frozen = lua_gettop(L);
  for (int i = 1; i <= n; i++) {
    lua_rawgeti(L, list, i);
    push_frozen(L, lua_gettop(L), seen, FREEZE_DEPTH);
    lua_rawseti(L, frozen, i);
    lua_pop(L, 1);
  }
  for (int i = 1; i <= n; i++) {
    lua_rawgeti(L, frozen, i);
    /* a kernel{} with a sweep stands for its variants (sweep.c) */
    rc |= sc_has_sweep(c, lua_gettop(L)) ? sc_check_sweep(c, lua_gettop(L)) : sc_check_kernel(c, lua_gettop(L));
    lua_pop(L, 1);
  }
  lua_pushinteger(L, rc);
  return 1;
}

int dsv4_spec_load(const char *path, const dsv4_spec_opts *opts, dsv4_plan *plan, dsv4_diags *d)
{
  memset(plan, 0, sizeof *plan);
  snprintf(plan->file, sizeof plan->file, "%s", path);
  struct stat st; /* not opened here: a FIFO would block (the sandbox opens it once, without blocking) */
  if (stat(path, &st)) {
    dsv4_error(d, path, 0, "cannot open spec file: %s", strerror(errno));
    return 1;
  }
  checker c = {.d = d, .plan = plan};
  dsv4_sandbox *sb = dsv4_sandbox_open(path, opts, d);
  if (!sb)
    return 1;
  c.L = dsv4_sandbox_state(sb);
  int rc = dsv4_sandbox_run(sb, path, d);
  if (!rc)
    sc_spec_hash(&c, path); /* the spec and what it included: the tuning lockfile's key */
  /* checking runs protected and bounded: a metamethod in the spec's tables may raise or loop */
  if (!rc && dsv4_sandbox_call(sb, sc_check_all, &c, &rc, d))
    rc = 1;
  dsv4_sandbox_close(sb);
  for (int i = 0; i < c.nfiles; i++)
    free(c.files[i].text);
  return rc || d->errors;
}
