/* sandbox.c -- the bounded Lua sandbox specs run in (see sandbox.h).
 *
 * Why the budget counts more than VM instructions: a spec can make one
 * instruction do unbounded work inside C (a string concatenation, a
 * table.insert into a long table, string.rep of an empty string), and a
 * count hook only runs between instructions.  So allocation is charged in
 * the allocator and library work in a wrapper around each library
 * function, both before the work is done; the hook (every HOOK_STEP
 * instructions) adds the instructions and checks the total.  Pattern
 * matching (find, match, gmatch, gsub) is left out: its backtracking does
 * exponential work no wrapper can price beforehand.
 *
 * Why errors are rebuilt here: a spec may raise anything (error({}),
 * error(), an object with __tostring), so the message handler turns every
 * error object into "file:line: message" without running spec code; a
 * limit error is sticky (the sandbox's pcall re-raises it), so a spec
 * cannot catch it and go on.
 */
#define _DEFAULT_SOURCE /* realpath, readlink */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <limits.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HOOK_STEP 100     /* VM instructions between budget checks */
#define INCLUDE_DEPTH 16  /* files open at once through include() */
#define INCLUDED_KEY DSV4_SPEC_INCLUDED_KEY /* registry: real path -> the file's value */
#define FD_BOX_KEY "dsv4.fd_box" /* registry: the metatable closing a file being read */

typedef struct {
  char shown[DSV4_PATH_MAX]; /* as the spec named it (the chunk's source) */
  char real[PATH_MAX];       /* canonical, for containment and cycles */
} inc_file;

struct dsv4_sandbox {
  lua_State *L;
  long long max_work, work;    /* the instruction budget and what is spent */
  long long max_mem, mem;      /* the memory cap and what the state holds */
  int over_budget, over_memory; /* a limit was hit: the run fails */
  char where_file[DSV4_PATH_MAX]; /* the line last entered, for memory errors */
  int where_line;
  const char *where_src;        /* the source string where_file was copied from */
  char roots[1 + DSV4_SPEC_MAX_INCLUDE_DIRS][PATH_MAX]; /* include() stays inside these */
  int nroots;
  inc_file stack[INCLUDE_DEPTH]; /* the files being run, outermost first */
  int depth;
  int sealed; /* the spec has run: kernel{} now would be lost (a sweep constraint, a metamethod) */
};

static dsv4_sandbox *sandbox_of(lua_State *L)
{
  void *ud;
  lua_getallocf(L, &ud);
  return ud;
}

/* ---- limits ----------------------------------------------------------------- */

/* The allocator: refuses to grow past the cap; charges 1 unit per 64 bytes. */
static void *bounded_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
  dsv4_sandbox *s = ud;
  if (!ptr)
    osize = 0; /* then osize says what kind of object is made */
  if (nsize == 0) {
    free(ptr);
    s->mem -= (long long)osize;
    return NULL;
  }
  if (nsize > osize && (long long)(nsize - osize) > s->max_mem - s->mem) {
    s->over_memory = 1;
    return NULL;
  }
  void *p = realloc(ptr, nsize);
  if (!p) {
    s->over_memory = nsize > osize;
    return NULL;
  }
  s->mem += (long long)nsize - (long long)osize;
  if (nsize > osize) { /* saturating, like charge(): the budget may be near LLONG_MAX */
    long long add = (long long)(nsize - osize) / 64;
    s->work = add > LLONG_MAX - s->work ? LLONG_MAX : s->work + add;
  }
  return p;
}

/* "file:line" of the innermost Lua function on the stack (0 if none). */
static int lua_position(lua_State *L, char *file, size_t n, int *line)
{
  lua_Debug ar;
  for (int level = 0; lua_getstack(L, level, &ar); level++)
    if (lua_getinfo(L, "Sl", &ar) && ar.currentline > 0) {
      snprintf(file, n, "%s", ar.source[0] == '@' ? ar.source + 1 : ar.short_src);
      *line = ar.currentline;
      return 1;
    }
  return 0;
}

/* Raise the budget error at the running line. */
static int budget_error(lua_State *L, dsv4_sandbox *s)
{
  char file[DSV4_PATH_MAX] = "?";
  int line = 0;
  s->over_budget = 1;
  lua_position(L, file, sizeof file, &line);
  lua_pushfstring(L, "%s:%d: the spec exceeds its instruction budget of %I (--max-instructions)", file, line,
                  (lua_Integer)s->max_work);
  return lua_error(L);
}

/* Charge `units` of work; raises once the budget is spent. */
static void charge(lua_State *L, long long units)
{
  dsv4_sandbox *s = sandbox_of(L);
  if (units < 0 || units > s->max_work - s->work || s->over_budget) { /* saturating: no overflow */
    s->work = s->max_work;
    budget_error(L, s);
  }
  s->work += units;
}

/* Count hook: instructions; line hook: where we are (for memory errors,
 * which Lua raises without a position). */
static void hook(lua_State *L, lua_Debug *ar)
{
  dsv4_sandbox *s = sandbox_of(L);
  if (ar->event == LUA_HOOKCOUNT) {
    charge(L, HOOK_STEP);
    return;
  }
  s->where_line = ar->currentline;
  if (lua_getinfo(L, "S", ar) && ar->source != s->where_src) {
    s->where_src = ar->source;
    snprintf(s->where_file, sizeof s->where_file, "%s", ar->source[0] == '@' ? ar->source + 1 : ar->short_src);
  }
}

/* ---- library functions, priced ----------------------------------------------- */

/* The length the table library will take for the table at i: its __len
 * where it has one (which runs under the hook), else its border; huge or
 * non-integer lengths saturate. */
static long long table_len(lua_State *L, int i)
{
  lua_len(L, i);
  int ok;
  lua_Integer n = lua_tointegerx(L, -1, &ok);
  lua_pop(L, 1);
  return !ok || n > LLONG_MAX / 64 ? LLONG_MAX / 64 : n < 0 ? 0 : (long long)n;
}

/* Units of work a library call may do on its arguments: an element of a
 * table (by the length the library will see), 16 bytes of a string
 * (table.sort: n log n); saturating. */
static long long price(lua_State *L, int sort)
{
  long long units = 1;
  for (int i = 1, n = lua_gettop(L); i <= n; i++) {
    long long len = lua_type(L, i) == LUA_TSTRING ? (long long)lua_rawlen(L, i) / 16
                    : lua_type(L, i) == LUA_TTABLE ? table_len(L, i)
                                                   : 0;
    for (long long m = len; sort && m > 1; m /= 2)
      units += len;
    units += len;
    if (units > LLONG_MAX / 128)
      return LLONG_MAX / 128;
  }
  return units;
}

/* An integer argument, or dflt (no error: the library checks types). */
static lua_Integer int_arg(lua_State *L, int i, lua_Integer dflt)
{
  int ok;
  lua_Integer v = lua_tointegerx(L, i, &ok);
  return ok ? v : dflt;
}

/* Extra units for calls whose work is in a count, not in a table's size:
 * table.move(a, f, e) and table.unpack(t, i, j) walk e - f + 1 slots. */
static long long span(lua_State *L, int first)
{
  lua_Integer f = int_arg(L, first, 1), e = int_arg(L, first + 1, 0);
  if (e < f)
    return 0;
  if (f < 0 && e > LLONG_MAX + f)
    return LLONG_MAX / 2;
  return e - f >= LLONG_MAX / 2 ? LLONG_MAX / 2 : (long long)(e - f) + 1; /* e - f + 1 may not fit */
}

enum { PRICE_PLAIN, PRICE_SORT, PRICE_SPAN2, PRICE_SPAN3 };

/* The wrapper: upvalue 1 the library function, upvalue 2 its pricing. */
static int priced_call(lua_State *L)
{
  int how = (int)lua_tointeger(L, lua_upvalueindex(2));
  long long units = price(L, how == PRICE_SORT);
  if (how == PRICE_SPAN2 || how == PRICE_SPAN3)
    units += span(L, how == PRICE_SPAN2 ? 2 : 3);
  charge(L, units);
  int n = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, n, LUA_MULTRET);
  return lua_gettop(L);
}

/* string.rep: priced by its result; an empty result without the loop
 * (Lua's own spins n times copying nothing). */
static int priced_rep(lua_State *L)
{
  size_t l, lsep;
  luaL_checklstring(L, 1, &l);
  lua_Integer n = luaL_checkinteger(L, 2);
  luaL_optlstring(L, 3, "", &lsep);
  if (n <= 0 || l + lsep == 0) {
    lua_pushliteral(L, "");
    return 1;
  }
  if ((long long)(l + lsep) > LLONG_MAX / 16 / n)
    return luaL_error(L, "string.rep: the result would be too large");
  charge(L, (long long)n * (long long)(l + lsep) / 16 + 1);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 1);
  return 1;
}

/* Wrap every function of the library table at the top of the stack. */
static void price_library(lua_State *L, int tbl)
{
  static const struct {
    const char *name;
    int how;
  } special[] = {{"sort", PRICE_SORT}, {"move", PRICE_SPAN2}, {"unpack", PRICE_SPAN2}, {NULL, 0}};
  lua_pushnil(L);
  while (lua_next(L, tbl)) {
    if (lua_type(L, -2) == LUA_TSTRING && lua_iscfunction(L, -1)) {
      const char *name = lua_tostring(L, -2);
      int how = PRICE_PLAIN;
      for (int i = 0; special[i].name; i++)
        if (!strcmp(name, special[i].name))
          how = special[i].how;
      lua_pushvalue(L, -2); /* key */
      lua_pushvalue(L, -2); /* function */
      if (!strcmp(name, "rep"))
        lua_pushcclosure(L, priced_rep, 1);
      else {
        lua_pushinteger(L, how);
        lua_pushcclosure(L, priced_call, 2);
      }
      lua_rawset(L, tbl); /* replacing an existing key's value keeps lua_next valid */
    }
    lua_pop(L, 1);
  }
}

/* setmetatable without finalizers: Lua runs __gc with hooks off (at
 * collection and at close), so a finalizer would run outside the budget.
 * Lua marks an object for finalization only when its metatable has __gc
 * as it is set, so refusing it here is enough. */
static int l_setmetatable(lua_State *L)
{
  if (lua_type(L, 2) == LUA_TTABLE && (lua_pushliteral(L, "__gc"), lua_rawget(L, 2) != LUA_TNIL))
    return luaL_error(L, "setmetatable: __gc metamethods are not allowed in a spec (finalizers run outside the "
                         "instruction budget)");
  lua_settop(L, 2);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, 2, 1);
  return 1;
}

/* pcall that cannot swallow a limit error. */
static int l_pcall(lua_State *L)
{
  luaL_checkany(L, 1);
  int status = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
  dsv4_sandbox *s = sandbox_of(L);
  if (status != LUA_OK && (s->over_budget || s->over_memory))
    return lua_error(L);
  lua_pushboolean(L, status == LUA_OK);
  lua_insert(L, 1);
  return lua_gettop(L);
}

/* ---- layout{}, kernel{}, include() ------------------------------------------- */

/* Record where the table argument was constructed. */
static void remember_pos(lua_State *L)
{
  char file[DSV4_PATH_MAX] = "?";
  int line = 0;
  lua_Debug ar;
  if (lua_getstack(L, 1, &ar) && lua_getinfo(L, "Sl", &ar)) {
    snprintf(file, sizeof file, "%s", ar.source[0] == '@' ? ar.source + 1 : ar.short_src);
    line = ar.currentline;
  }
  lua_getfield(L, LUA_REGISTRYINDEX, DSV4_SPEC_POS_KEY);
  lua_pushvalue(L, 1);
  lua_createtable(L, 0, 2);
  lua_pushstring(L, file);
  lua_setfield(L, -2, "file");
  lua_pushinteger(L, line);
  lua_setfield(L, -2, "line");
  lua_settable(L, -3);
  lua_pop(L, 1);
}

/* layout { ... }: remembers its position, returns the table. */
static int l_layout(lua_State *L)
{
  luaL_checktype(L, 1, LUA_TTABLE);
  remember_pos(L);
  lua_getfield(L, LUA_REGISTRYINDEX, DSV4_SPEC_LAYOUTS_KEY); /* for "names no layout" hints (kernel.c) */
  lua_pushvalue(L, 1);
  lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
  lua_settop(L, 1);
  return 1;
}

static int ident_char(char ch)
{
  return ch == '_' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
}

/* The 1-based column of the first call of `name` on line `line` of the
 * spec file `file` (its text as read: DSV4_SPEC_SOURCES_KEY); 0 if not
 * found.  Lua keeps lines only. */
static int call_column(lua_State *L, const char *file, int line, const char *name)
{
  lua_getfield(L, LUA_REGISTRYINDEX, DSV4_SPEC_SOURCES_KEY);
  lua_getfield(L, -1, file);
  size_t len = 0;
  const char *t = lua_tolstring(L, -1, &len), *end = t + len;
  lua_pop(L, 2); /* the registry still holds the string */
  if (!t)
    return 0;
  for (int l = 1; l < line && t < end; t++)
    l += *t == '\n';
  size_t n = strlen(name);
  for (const char *p = t; p < end && *p != '\n'; p++) {
    int before = p > t && ident_char(p[-1]), after = p + n < end && ident_char(p[n]);
    if ((size_t)(end - p) >= n && !memcmp(p, name, n) && !before && !after)
      return (int)(p - t) + 1;
  }
  return 0;
}

/* kernel { ... }: remembers its position and queues it for checking.
 * Once the spec has run, the kernels are being checked and one declared
 * now (by a sweep constraint, or a metamethod the checker reaches) would
 * be lost: an error at the call, "file:line:col: ..." (report() reads the
 * column). */
static int l_kernel(lua_State *L)
{
  luaL_checktype(L, 1, LUA_TTABLE);
  dsv4_sandbox *s = sandbox_of(L);
  if (s->sealed) {
    char file[DSV4_PATH_MAX] = "?";
    int line = 0;
    lua_Debug ar;
    if (lua_getstack(L, 1, &ar) && lua_getinfo(L, "Sl", &ar) && ar.currentline > 0) {
      snprintf(file, sizeof file, "%s", ar.source[0] == '@' ? ar.source + 1 : ar.short_src);
      line = ar.currentline;
    }
    const char *name = lua_getfield(L, 1, "name") == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    int col = call_column(L, file, line, "kernel");
    lua_pushfstring(L, "%s:%d:", file, line);
    if (col)
      lua_pushfstring(L, "%d:", col);
    else
      lua_pushliteral(L, "");
    lua_pushfstring(L, " kernel%s%s%s called while the spec's kernels are checked (in a sweep constraint or a "
                       "metamethod), where it would be lost: declare every kernel when the spec runs; a constraint "
                       "only reads the variant it is given",
                    name ? " '" : " {}", name ? name : "", name ? "'" : "");
    lua_concat(L, 3);
    return lua_error(L);
  }
  remember_pos(L);
  lua_getfield(L, LUA_REGISTRYINDEX, DSV4_SPEC_KERNELS_KEY);
  lua_pushvalue(L, 1);
  lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
  lua_settop(L, 1);
  return 1;
}

/* The folder part of path ("." when it has none) into dir. */
static void folder_of(const char *path, char *dir, size_t n)
{
  const char *slash = strrchr(path, '/');
  if (!slash)
    snprintf(dir, n, ".");
  else if (slash == path)
    snprintf(dir, n, "/");
  else
    snprintf(dir, n, "%.*s", (int)(slash - path), path);
}

/* 1 if the canonical path lies inside one of the include roots. */
static int inside_roots(const dsv4_sandbox *s, const char *real)
{
  for (int i = 0; i < s->nroots; i++) {
    size_t n = strlen(s->roots[i]);
    if (!strncmp(real, s->roots[i], n) && (real[n] == '/' || (n == 1 && s->roots[i][0] == '/')))
      return 1;
  }
  return 0;
}

/* Find rel in the includer's folder, then the -I folders: the first that
 * exists and lies inside a root.  0 found; 1 not found; 2 found only
 * outside the roots (shown names the escaping file). */
static int resolve(dsv4_sandbox *s, const char *includer_dir, const char *rel, inc_file *out)
{
  int escaped = 0;
  for (int i = -1; i < s->nroots - 1; i++) {
    const char *dir = i < 0 ? includer_dir : s->roots[i + 1];
    char path[DSV4_PATH_MAX], real[PATH_MAX];
    int n = strcmp(dir, ".") ? snprintf(path, sizeof path, "%s/%s", dir, rel) : snprintf(path, sizeof path, "%s", rel);
    if (n >= (int)sizeof path || !realpath(path, real))
      continue;
    if (!inside_roots(s, real)) {
      escaped = 1;
      snprintf(out->real, sizeof out->real, "%s", real);
      continue;
    }
    snprintf(out->shown, sizeof out->shown, "%s", path);
    snprintf(out->real, sizeof out->real, "%s", real);
    return 0;
  }
  return escaped ? 2 : 1;
}

/* A file being read: closed by __close when an error (memory, the
 * budget) unwinds past it, so a failed read leaks no descriptor. */
typedef struct {
  int fd;
} fd_box;

static int fd_box_close(lua_State *L)
{
  fd_box *b = luaL_checkudata(L, 1, FD_BOX_KEY);
  if (b->fd >= 0)
    close(b->fd);
  b->fd = -1;
  return 0;
}

/* What a file that is not a regular one is, for the error. */
static const char *file_kind(mode_t m)
{
  return S_ISDIR(m)    ? "a folder"
         : S_ISFIFO(m) ? "a FIFO"
         : S_ISCHR(m)  ? "a character device"
         : S_ISBLK(m)  ? "a block device"
         : S_ISSOCK(m) ? "a socket"
                       : "not a plain file";
}

/* Load the spec file at path as the chunk "@shown": opened once (without
 * blocking: a FIFO must not hang the run), refused unless it is a regular
 * file, read through that descriptor and loaded from the bytes read, which
 * are kept (DSV4_SPEC_SOURCES_KEY: shown -> text, for the checker's field
 * positions; DSV4_SPEC_TEXTS_KEY: real path -> text, for the spec's hash)
 * so nothing reopens the file by name.  real: the canonical path include()
 * resolved and checked against the roots: opened without following a link
 * in its last part, and (where /proc/self/fd tells) the file opened must be
 * that one, so a link swapped in after the check cannot send the run
 * elsewhere.  Returns LUA_OK with the chunk pushed, LUA_ERRFILE with what
 * is wrong with the file pushed ("is a FIFO, not a regular file": the
 * caller names it), or Lua's syntax error (memory and budget errors are
 * raised). */
static int load_file(lua_State *L, dsv4_sandbox *s, const char *path, const char *shown, const char *real)
{
  fd_box *box = lua_newuserdatauv(L, sizeof *box, 0);
  box->fd = -1;
  luaL_setmetatable(L, FD_BOX_KEY);
  int slot = lua_gettop(L);
  lua_toclose(L, slot);
  box->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY | (real ? O_NOFOLLOW : 0));
  if (box->fd < 0) {
    int e = errno;
    lua_pushfstring(L, "cannot be opened (%s)", strerror(e));
    goto fail;
  }
  struct stat st;
  if (fstat(box->fd, &st)) {
    int e = errno;
    lua_pushfstring(L, "cannot be read (%s)", strerror(e));
    goto fail;
  }
  if (!S_ISREG(st.st_mode)) {
    lua_pushfstring(L, "is %s, not a regular file", file_kind(st.st_mode));
    goto fail;
  }
  if (real) {
    char proc[64], at[PATH_MAX];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", box->fd);
    ssize_t n = readlink(proc, at, sizeof at - 1);
    if (n >= 0 && (at[n] = 0, strcmp(at, real))) {
      lua_pushfstring(L, "changed while it was opened (it resolved to %s, then opened %s)", real, at);
      goto fail;
    }
  }
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  long long total = 0;
  for (;;) {
    char *p = luaL_prepbuffsize(&b, 1 << 16);
    ssize_t r = read(box->fd, p, 1 << 16);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      int e = errno;
      luaL_pushresult(&b);
      lua_pushfstring(L, "cannot be read (%s)", strerror(e));
      goto fail;
    }
    if (r == 0)
      break;
    if ((total += r) > s->max_mem) { /* the state could not hold it: say so before reading on */
      luaL_pushresult(&b);
      lua_pushfstring(L, "is larger than the spec's memory limit of %d MiB (--max-memory)",
                      (int)((s->max_mem + (1 << 20) - 1) >> 20));
      goto fail;
    }
    luaL_addsize(&b, (size_t)r);
  }
  luaL_pushresult(&b);
  lua_closeslot(L, slot); /* the file is read: close it now */
  size_t len;
  const char *text = lua_tolstring(L, -1, &len), *from = text;
  /* as luaL_loadfilex: a UTF-8 byte-order mark and a first line of '#' are skipped (lines kept) */
  if (len >= 3 && !memcmp(from, "\xEF\xBB\xBF", 3))
    from += 3;
  if (from < text + len && *from == '#')
    while (from < text + len && *from != '\n')
      from++;
  lua_getfield(L, LUA_REGISTRYINDEX, DSV4_SPEC_SOURCES_KEY);
  lua_pushvalue(L, -2);
  lua_setfield(L, -2, shown);
  lua_pop(L, 1);
  if (real) {
    lua_getfield(L, LUA_REGISTRYINDEX, DSV4_SPEC_TEXTS_KEY);
    lua_pushvalue(L, -2);
    lua_setfield(L, -2, real);
    lua_pop(L, 1);
  }
  lua_pushfstring(L, "@%s", shown);
  int status = luaL_loadbufferx(L, from, (size_t)(text + len - from), lua_tostring(L, -1), "t");
  lua_replace(L, slot); /* the chunk (or the message) where the box was */
  lua_settop(L, slot);
  return status;
fail:
  lua_closeslot(L, slot); /* the file closed, the slot nil */
  lua_replace(L, slot);   /* the message where the box was */
  lua_settop(L, slot);
  return LUA_ERRFILE;
}

/* "a.lua -> b.lua -> a.lua" for the cycle closing at stack index from. */
static void cycle_text(const dsv4_sandbox *s, int from, const char *again, char *buf, size_t n)
{
  size_t o = 0;
  buf[0] = 0;
  for (int i = from; i < s->depth && o < n; i++)
    o += (size_t)snprintf(buf + o, n - o, "%s -> ", s->stack[i].shown);
  if (o < n)
    snprintf(buf + o, n - o, "%s", again);
}

/* include "file.lua": run a spec file of the spec's folder or the -I
 * folders, in the same sandbox, once; returns its value. */
static int l_include(lua_State *L)
{
  dsv4_sandbox *s = sandbox_of(L);
  const char *rel = luaL_checkstring(L, 1);
  if (!rel[0] || rel[0] == '/')
    return luaL_error(L, "include: '%s' must be a relative path (includes resolve inside the spec's folder and the "
                         "-I folders)", rel);
  char dir[DSV4_PATH_MAX]; /* the calling function's file's folder */
  lua_Debug ar;
  if (lua_getstack(L, 1, &ar) && lua_getinfo(L, "S", &ar) && ar.source[0] == '@')
    folder_of(ar.source + 1, dir, sizeof dir);
  else
    folder_of(s->stack[0].shown, dir, sizeof dir);
  inc_file f;
  int r = resolve(s, dir, rel, &f);
  if (r == 2)
    return luaL_error(L, "include: '%s' resolves to %s, outside the spec's folder and the -I folders", rel, f.real);
  if (r == 1)
    return luaL_error(L, "include: cannot find '%s' in %s or the -I folders", rel, dir);
  for (int i = 0; i < s->depth; i++)
    if (!strcmp(s->stack[i].real, f.real)) {
      char cyc[1024];
      cycle_text(s, i, f.shown, cyc, sizeof cyc);
      return luaL_error(L, "include cycle: %s", cyc);
    }
  lua_getfield(L, LUA_REGISTRYINDEX, INCLUDED_KEY);
  if (lua_getfield(L, -1, f.real) != LUA_TNIL)
    return 1; /* run once: its value again */
  lua_pop(L, 1);
  if (s->depth == INCLUDE_DEPTH)
    return luaL_error(L, "include: '%s' nests includes deeper than %d files", rel, INCLUDE_DEPTH);
  int loaded = load_file(L, s, f.real, f.shown, f.real);
  if (loaded == LUA_ERRFILE)
    return strcmp(rel, f.shown) ? luaL_error(L, "include: '%s' (%s) %s", rel, f.shown, lua_tostring(L, -1))
                                : luaL_error(L, "include: '%s' %s", rel, lua_tostring(L, -1));
  if (loaded != LUA_OK)
    return luaL_error(L, "include: %s", lua_tostring(L, -1));
  s->stack[s->depth++] = f;
  int status = lua_pcall(L, 0, 1, 0); /* the stack stays right when a spec's pcall catches this */
  s->depth--;
  if (status != LUA_OK)
    return lua_error(L);
  if (lua_isnil(L, -1)) { /* remember files that return nothing too */
    lua_pop(L, 1);
    lua_pushboolean(L, 1);
  }
  lua_pushvalue(L, -1);
  lua_setfield(L, -3, f.real);
  return 1;
}

/* ---- the state -------------------------------------------------------------- */

/* Only the safe parts of the libraries, priced, and the spec functions. */
static void populate(lua_State *L)
{
  luaL_requiref(L, LUA_GNAME, luaopen_base, 1);
  luaL_requiref(L, LUA_STRLIBNAME, luaopen_string, 1);
  luaL_requiref(L, LUA_TABLIBNAME, luaopen_table, 1);
  luaL_requiref(L, LUA_MATHLIBNAME, luaopen_math, 1);
  lua_settop(L, 0);
  static const char *const unsafe[] = {"dofile", "loadfile", "load", "require", "collectgarbage", "print", "warn",
                                       "xpcall", NULL};
  for (const char *const *u = unsafe; *u; u++) {
    lua_pushnil(L);
    lua_setglobal(L, *u);
  }
  static const char *const patterns[] = {"find", "match", "gmatch", "gsub", NULL};
  lua_getglobal(L, LUA_STRLIBNAME);
  for (const char *const *p = patterns; *p; p++) {
    lua_pushnil(L);
    lua_setfield(L, -2, *p);
  }
  price_library(L, lua_gettop(L));
  lua_getglobal(L, LUA_TABLIBNAME);
  price_library(L, lua_gettop(L));
  lua_settop(L, 0);
  lua_register(L, "pcall", l_pcall);
  lua_getglobal(L, "setmetatable");
  lua_pushcclosure(L, l_setmetatable, 1);
  lua_setglobal(L, "setmetatable");
  lua_register(L, "layout", l_layout);
  lua_register(L, "kernel", l_kernel);
  lua_register(L, "include", l_include);
  lua_newtable(L); /* positions, weak in their keys */
  lua_newtable(L);
  lua_pushstring(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_setfield(L, LUA_REGISTRYINDEX, DSV4_SPEC_POS_KEY);
  lua_newtable(L);
  lua_setfield(L, LUA_REGISTRYINDEX, DSV4_SPEC_KERNELS_KEY);
  lua_newtable(L);
  lua_setfield(L, LUA_REGISTRYINDEX, INCLUDED_KEY);
  static const char *const lists[] = {DSV4_SPEC_SOURCES_KEY, DSV4_SPEC_TEXTS_KEY, DSV4_SPEC_LAYOUTS_KEY, NULL};
  for (const char *const *k = lists; *k; k++) {
    lua_newtable(L);
    lua_setfield(L, LUA_REGISTRYINDEX, *k);
  }
  luaL_newmetatable(L, FD_BOX_KEY);
  lua_pushcfunction(L, fd_box_close);
  lua_setfield(L, -2, "__close");
  lua_pushcfunction(L, fd_box_close); /* never needed (the slot closes it), but no descriptor can leak */
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
}

/* Made in protected mode: running out of memory here is an error, not a
 * panic. */
static int populate_protected(lua_State *L)
{
  populate(L);
  return 0;
}

/* The include roots: the spec's folder, then each -I folder (canonical). */
static int set_roots(dsv4_sandbox *s, const char *path, const dsv4_spec_opts *o, dsv4_diags *d)
{
  char dir[DSV4_PATH_MAX];
  folder_of(path, dir, sizeof dir);
  if (!realpath(dir, s->roots[0])) {
    dsv4_error(d, path, 0, "cannot resolve the spec's folder %s", dir);
    return 1;
  }
  s->nroots = 1;
  for (int i = 0; o && i < o->ninclude_dirs; i++) {
    if (s->nroots > DSV4_SPEC_MAX_INCLUDE_DIRS) {
      dsv4_error(d, NULL, 0, "more than %d -I folders", DSV4_SPEC_MAX_INCLUDE_DIRS);
      return 1;
    }
    if (!realpath(o->include_dirs[i], s->roots[s->nroots])) {
      dsv4_error(d, NULL, 0, "-I %s: no such folder", o->include_dirs[i]);
      return 1;
    }
    s->nroots++;
  }
  return 0;
}

dsv4_sandbox *dsv4_sandbox_open(const char *path, const dsv4_spec_opts *o, dsv4_diags *d)
{
  dsv4_sandbox *s = calloc(1, sizeof *s);
  if (!s) {
    dsv4_error(d, path, 0, "out of memory creating the Lua state");
    return NULL;
  }
  s->max_work = o && o->max_instructions > 0 ? o->max_instructions : DSV4_SPEC_MAX_INSTRUCTIONS;
  s->max_mem = o && o->max_memory > 0 ? o->max_memory : DSV4_SPEC_MAX_MEMORY;
  if (set_roots(s, path, o, d)) {
    free(s);
    return NULL;
  }
  s->L = lua_newstate(bounded_alloc, s);
  if (!s->L || (lua_pushcfunction(s->L, populate_protected), lua_pcall(s->L, 0, 0, 0) != LUA_OK)) {
    dsv4_error(d, path, 0, "cannot create the Lua state within the memory limit of %lld MiB (--max-memory)",
               (s->max_mem + (1 << 20) - 1) >> 20);
    dsv4_sandbox_close(s);
    return NULL;
  }
  s->work = 0; /* the libraries' setup is not the spec's */
  lua_sethook(s->L, hook, LUA_MASKCOUNT | LUA_MASKLINE, HOOK_STEP);
  return s;
}

void dsv4_sandbox_close(dsv4_sandbox *s)
{
  if (!s)
    return;
  if (s->L) {
    lua_close(s->L); /* no spec finalizer can run here: l_setmetatable refuses __gc */
  }
  free(s);
}

lua_State *dsv4_sandbox_state(dsv4_sandbox *s) { return s->L; }

/* ---- errors ----------------------------------------------------------------- */

/* Where msg names a position "file:line:": the colon ending the file,
 * with *line and *rest (the text after the position) set; else NULL. */
static const char *find_position(const char *msg, long *line, const char **rest)
{
  for (const char *colon = strchr(msg, ':'); colon; colon = strchr(colon + 1, ':')) {
    char *end;
    *line = strtol(colon + 1, &end, 10);
    if (end != colon + 1 && *end == ':') {
      *rest = end + 1;
      return colon;
    }
  }
  return NULL;
}

/* 1 if msg starts with "file:line:" (the position Lua or we put there). */
static int positioned(const char *msg)
{
  long line;
  const char *rest;
  return find_position(msg, &line, &rest) != NULL;
}

/* Message handler: any error object becomes "file:line: text" without
 * running spec code (no __tostring: it could raise or loop). */
static int message_handler(lua_State *L)
{
  char file[DSV4_PATH_MAX] = "?";
  int line = 0, have = lua_position(L, file, sizeof file, &line);
  int t = lua_type(L, 1);
  if (t == LUA_TSTRING || t == LUA_TNUMBER) {
    const char *msg = lua_tostring(L, 1);
    if (positioned(msg) || !have)
      return 1;
    lua_pushfstring(L, "%s:%d: %s", file, line, msg);
    return 1;
  }
  lua_pushfstring(L, "%s:%d: the spec raised an error with a %s value, not a message", file, line,
                  luaL_typename(L, 1));
  return 1;
}

/* A failed protected call into a diagnostic at the position it names. */
static void report(dsv4_sandbox *s, int status, const char *path, dsv4_diags *d)
{
  if (s->over_memory) {
    dsv4_error(d, s->where_line ? s->where_file : path, s->where_line,
               "the spec exceeds its memory limit of %lld MiB (--max-memory)", (s->max_mem + (1 << 20) - 1) >> 20);
    return;
  }
  const char *msg = lua_type(s->L, -1) == LUA_TSTRING ? lua_tostring(s->L, -1) : NULL;
  if (!msg)
    msg = status == LUA_ERRERR ? "error while handling an error" : "unknown error";
  long line;
  const char *m, *colon = find_position(msg, &line, &m);
  if (colon && line >= 0 && line <= INT_MAX) {
    char file[DSV4_PATH_MAX], *end;
    snprintf(file, sizeof file, "%.*s", (int)(colon - msg), msg);
    long col = *m >= '0' && *m <= '9' ? strtol(m, &end, 10) : 0; /* "file:line:col:" where the sandbox knew it */
    if (col > 0 && col <= INT_MAX && *end == ':')
      m = end + 1;
    else
      col = 0;
    while (*m == ' ')
      m++;
    dsv4_error_at(d, file, (int)line, (int)col, "%s", m);
    return;
  }
  dsv4_error(d, path, 0, "%s", msg);
}

/* Call the function under the message handler at the top of the stack
 * with nargs arguments and nres results; 0 or 1 with the error in *d. */
static int protected_call(dsv4_sandbox *s, int nargs, int nres, const char *path, dsv4_diags *d)
{
  lua_State *L = s->L;
  int fn = lua_gettop(L) - nargs;
  lua_pushcfunction(L, message_handler);
  lua_insert(L, fn);
  int status = lua_pcall(L, nargs, nres, fn);
  int failed = status != LUA_OK || s->over_memory || s->over_budget;
  if (failed)
    report(s, status, path, d);
  lua_remove(L, fn);
  s->depth = 0;
  return failed;
}

/* The spec file, read through one descriptor (load_file) and run;
 * protected: reading it allocates in the state. */
static int run_top(lua_State *L)
{
  dsv4_sandbox *s = sandbox_of(L);
  const char *path = s->stack[0].shown;
  int status = load_file(L, s, path, path, NULL);
  if (status == LUA_ERRFILE)
    return luaL_error(L, "the spec file %s", lua_tostring(L, -1));
  if (status != LUA_OK)
    return lua_error(L); /* "file:line: message" already */
  lua_call(L, 0, 0);
  return 0;
}

int dsv4_sandbox_run(dsv4_sandbox *s, const char *path, dsv4_diags *d)
{
  inc_file *top = &s->stack[0];
  snprintf(top->shown, sizeof top->shown, "%s", path);
  if (!realpath(path, top->real)) {
    dsv4_error(d, path, 0, "cannot open spec file: %s", strerror(errno));
    return 1;
  }
  s->depth = 1;
  lua_pushcfunction(s->L, run_top);
  int failed = protected_call(s, 0, 0, path, d);
  if (failed)
    lua_pop(s->L, 1);
  s->sealed = 1; /* from here on the kernels are checked: kernel{} would be lost */
  return failed;
}

int dsv4_sandbox_call(dsv4_sandbox *s, lua_CFunction f, void *ud, int *result, dsv4_diags *d)
{
  lua_pushcfunction(s->L, f);
  lua_pushlightuserdata(s->L, ud);
  int failed = protected_call(s, 1, 1, s->stack[0].shown, d);
  *result = failed ? 1 : (int)lua_tointeger(s->L, -1);
  lua_pop(s->L, 1);
  return failed;
}
