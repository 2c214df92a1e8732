/* sweep.c -- a kernel{}'s sweep field: the variants it stands for, each
 * checked by the kernel checker (kernel.c) as if the spec had written it
 * out, and the spec's hash (the tuning lockfile's key; docs/tuning.md).
 *
 *   kernel {
 *     name = "sd", op = "sparse_decode", layout = L.fp8_ds_mla_v4,
 *     tile = { values_per_thread = 64, heads_per_cta = 64, matrix = true, interleave = 8 },
 *     targets = { ptx = { arch = "sm_90a" } },
 *     sweep = {
 *       tile = { pair = { false, true }, p = { "bf16", "bf16x2" } },   -- tile fields
 *       v_dim = { ... }, heads = { ... }, k = { ... },                  -- kernel fields of their op
 *       constraints = { function(v) return not v.pair or v.prefetch, "pair without prefetch" end },
 *     },
 *   }
 *
 * The swept fields (sorted by their path) span a product; the first varies
 * slowest, each field's values in the order given.  A point is a variant
 * named <kernel>__<tag><value>_<tag><value>... (the tags: each op's
 * tile table, compiler/ops/; booleans as 0 / 1).  A constraint is called with the variant's tile fields
 * and swept fields (v.pair, v.heads_per_cta, ...); a false result (and its
 * second result, a reason) rejects the variant.  The others are built as
 * kernel tables and checked by sc_check_kernel with their diagnostics kept
 * aside: a variant the checker refuses (a shape that does not fit, a form
 * the target lacks) is rejected with the checker's own message, while an
 * error of the spec's form (an unknown field, a wrong type: the checker's
 * `structural` count) is the spec's error, reported as such.  A sweep
 * whose every variant is rejected is an error.
 */
#include "internal.h"

#include "sha256.h"
#include "text.h"
#include "ops/ops.h"

#define MAX_POINTS 4096 /* a sweep's product, before constraints */

/* Read raw: a table whose reads raise reaches the kernel checker first, as
 * before sweeps (tests/diag/metamethod.lua). */
int sc_has_sweep(checker *c, int idx)
{
  lua_pushliteral(c->L, "sweep");
  int t = lua_rawget(c->L, idx);
  lua_pop(c->L, 1);
  return t != LUA_TNIL;
}

const dsv4_variant *dsv4_plan_variant(const dsv4_plan *p, const char *name)
{
  for (int i = 0; i < p->nvariants; i++)
    if (!strcmp(p->variants[i].name, name))
      return &p->variants[i];
  return NULL;
}

/* A swept field being read: where its values are (stack index of the list). */
typedef struct {
  const char *field; /* the tile field's or the kernel field's name */
  int type;          /* DSV4_TF_INT, _BOOL or _CHOICE (a kernel field: an integer) */
  int tile, list;
} swept;

/* One swept field's list of values (at the stack top) into param q; 0 or 1
 * after an error at the field. */
static int read_values(cursor *at, const char *key, int type, dsv4_sweep_param *q)
{
  lua_State *L = at->c->L;
  int list = lua_gettop(L);
  if (lua_type(L, list) != LUA_TTABLE) {
    FERR(at, key, "must be a list of the values to sweep, got a %s", luaL_typename(L, list));
    at->c->structural++;
    return 1;
  }
  lua_Integer n = (lua_Integer)lua_rawlen(L, list), keys = 0;
  lua_pushnil(L);
  while (lua_next(L, list))
    keys++, lua_pop(L, 1);
  if (n < 1 || keys != n || n > DSV4_SWEEP_VALUES) {
    FERR(at, key, "must be a list of 1 to %d values (no named fields), got %lld entries", DSV4_SWEEP_VALUES,
         (long long)keys);
    at->c->structural++;
    return 1;
  }
  static const char *const type_name[] = {"integers", "booleans", "strings"};
  q->nvalues = (int)n;
  for (lua_Integer i = 1; i <= n; i++) {
    int t = lua_rawgeti(L, list, i), ok;
    char *out = q->value[i - 1];
    size_t cap = sizeof q->value[i - 1];
    if (type == DSV4_TF_INT && t == LUA_TNUMBER && lua_isinteger(L, -1))
      ok = snprintf(out, cap, "%lld", (long long)lua_tointeger(L, -1)) > 0;
    else if (type == DSV4_TF_BOOL && t == LUA_TBOOLEAN)
      ok = snprintf(out, cap, "%s", lua_toboolean(L, -1) ? "true" : "false") > 0;
    else if (type == DSV4_TF_CHOICE && t == LUA_TSTRING) {
      size_t len;
      const char *s = lua_tolstring(L, -1, &len);
      ok = len > 0 && len < cap;
      for (size_t j = 0; ok && j < len; j++)
        ok =
            (s[j] >= 'a' && s[j] <= 'z') || (s[j] >= 'A' && s[j] <= 'Z') || (s[j] >= '0' && s[j] <= '9') || s[j] == '_';
      if (ok)
        snprintf(out, cap, "%s", s);
      else {
        lua_pop(L, 1);
        FERR(at, key, "value %lld must be a name of letters, digits and '_' (at most %zu): it becomes part of the "
             "variants' names", (long long)i, cap - 1);
        at->c->structural++;
        return 1;
      }
    } else
      ok = 0;
    lua_pop(L, 1);
    if (!ok) {
      FERR(at, key, "value %lld must be one of the field's %s, got a %s", (long long)i, type_name[type],
           lua_typename(L, t));
      at->c->structural++;
      return 1;
    }
    for (lua_Integer j = 1; j < i; j++)
      if (!strcmp(q->value[j - 1], out)) {
        FERR(at, key, "lists the value %s twice", out);
        at->c->structural++;
        return 1;
      }
  }
  /* frozen: the variants are built from a copy of the values read here,
   * so a constraint that writes into the spec's list (through an upvalue)
   * cannot make a variant other than its name and the plan say */
  lua_createtable(L, (int)n, 0);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, list, i);
    lua_rawseti(L, -2, i);
  }
  lua_replace(L, list);
  return 0;
}

/* A shallow copy of the table at idx (less the field `skip`) pushed: what
 * the variants are built from, taken before any constraint runs. */
static void push_copy(lua_State *L, int idx, const char *skip)
{
  lua_newtable(L);
  int t = lua_gettop(L);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (skip && lua_type(L, -2) == LUA_TSTRING && !strcmp(lua_tostring(L, -2), skip)) {
      lua_pop(L, 1);
      continue;
    }
    lua_pushvalue(L, -2);
    lua_insert(L, -2);
    lua_rawset(L, t);
  }
}

/* Push value v of swept field s (as the Lua value it was). */
static void push_value(lua_State *L, const swept *s, int v)
{
  lua_rawgeti(L, s->list, v + 1);
}

static int cmp_param(const void *a, const void *b)
{
  return strcmp(((const dsv4_sweep_param *)a)->field, ((const dsv4_sweep_param *)b)->field);
}

/* Where a constraint function was written ("file:line"). */
static void fn_where(lua_State *L, int idx, char *buf, size_t n)
{
  lua_Debug ar;
  lua_pushvalue(L, idx);
  if (lua_getinfo(L, ">S", &ar) && ar.linedefined > 0)
    snprintf(buf, n, "%s:%d", ar.source[0] == '@' ? ar.source + 1 : ar.short_src, ar.linedefined);
  else
    snprintf(buf, n, "?");
}

/* A sweep being expanded: the kernel{} table (cursor k) and its sweep
 * (cursor s); the swept fields' value lists, the constraints, and the
 * copies the variants are built from, all on the Lua stack above top; the
 * diagnostics of the variant being checked kept aside. */
typedef struct {
  checker *c;
  int idx, top;
  char file[DSV4_PATH_MAX], what[96];
  int line;
  cursor k, s;
  dsv4_sweep *sw;
  int the_sweep;
  swept sv[DSV4_SWEEP_PARAMS];
  int ns;
  int cons, ncons;       /* the constraints list (a stack index) and its length */
  long long points;      /* the product's size */
  int base_tile, fields; /* copies of the kernel{}'s tile (0: none) and of its fields less the sweep */
  dsv4_diags *real, *scratch, *first_diags;
  int accepted, first_checked;
} expansion;

/* The kernel{}'s name and op, read with their diagnostics aside: without
 * both, and a name that is an identifier, there is nothing to sweep (and
 * the kernel checker says what is wrong): DSV4_OP_NONE then. */
static dsv4_op sweep_op(checker *c, cursor *k, char *name)
{
  char opname[32];
  int pre = c->structural;
  dsv4_diags *real = c->d, *probe = lua_newuserdatauv(c->L, sizeof *probe, 0);
  memset(probe, 0, sizeof *probe);
  c->d = probe;
  int bad = sc_get_str(k, "name", 1, "", name, DSV4_NAME_MAX) || sc_get_str(k, "op", 1, "", opname, sizeof opname);
  c->d = real;
  c->structural = pre;
  dsv4_op op = bad ? DSV4_OP_NONE : dsv4_op_from_name(opname);
  int ident = (name[0] >= 'a' && name[0] <= 'z') || (name[0] >= 'A' && name[0] <= 'Z') || name[0] == '_';
  for (const char *q = name; *q && ident; q++)
    ident = (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') || *q == '_';
  return ident ? op : DSV4_OP_NONE;
}

/* The plan's next sweep for kernel name of op, and the sweep table
 * entered; 1 after an error. */
static int begin(expansion *e, const char *name, dsv4_op op)
{
  dsv4_plan *p = e->c->plan;
  snprintf(e->what, sizeof e->what, "kernel '%s'", name);
  e->k.what = e->what;
  if (p->nsweeps == DSV4_MAX_SWEEPS) {
    FERR(&e->k, "sweep", "is one sweep more than the %d a spec may hold", DSV4_MAX_SWEEPS);
    return 1;
  }
  e->sw = &p->sweeps[p->nsweeps];
  memset(e->sw, 0, sizeof *e->sw);
  snprintf(e->sw->kernel, sizeof e->sw->kernel, "%s", name);
  snprintf(e->sw->file, sizeof e->sw->file, "%s", e->file);
  e->sw->line = e->line, e->sw->op = op;
  return sc_enter(&e->k, "sweep", &e->s, 1) != 0;
}

/* The swept tile fields, sweep.tile.<field> (their rows: the op's tile
 * table, compiler/ops/), each field's list left on the stack; bad: an
 * error so far (then none is read).  Returns bad. */
static int read_tile_swept(expansion *e, int bad)
{
  lua_State *L = e->c->L;
  checker *c = e->c;
  dsv4_op op = e->sw->op;
  cursor st;
  int has_tile = sc_enter(&e->s, "tile", &st, 0);
  if (has_tile < 0)
    return 1;
  if (has_tile)
    return bad;
  const char *fields[DSV4_TILE_FIELDS_MAX + 1];
  sc_tile_fields(op, fields);
  lua_pushnil(L);
  while (!bad && lua_next(L, st.idx)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TSTRING) {
      FERR(&st, NULL, "has a positional or non-string key; name the tile fields to sweep");
      c->structural++, bad = 1;
      break;
    }
    const char *f = lua_tostring(L, -1);
    const dsv4_tile_field *tf = dsv4_tile_field_of(op, f);
    if (!tf) {
      char list[256] = "";
      for (const char *const *a = fields; *a; a++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", list[0] ? ", " : "", *a);
      FERR(&st, f, "is not a tile field of op '%s' (one of %s)", dsv4_op_name(op), list);
      c->structural++, bad = 1;
      break;
    }
    if (e->ns == DSV4_SWEEP_PARAMS) {
      FERR(&e->s, NULL, "sweeps more than %d fields", DSV4_SWEEP_PARAMS);
      c->structural++, bad = 1;
      break;
    }
    lua_pushvalue(L, -1);
    lua_gettable(L, st.idx);
    dsv4_sweep_param *q = &e->sw->param[e->ns];
    snprintf(q->field, sizeof q->field, "tile.%s", f);
    snprintf(q->tag, sizeof q->tag, "%s", tf->tag);
    if (read_values(&st, f, tf->type, q)) {
      bad = 1;
      break;
    }
    lua_insert(L, -2); /* keep the list below the key */
    e->sv[e->ns++] = (swept){tf->name, tf->type, 1, 0};
  }
  /* the lists sit on the stack in order; remember their slots */
  for (int i = 0, slot = st.idx + 1; i < e->ns; i++, slot++)
    e->sv[i].list = slot;
  return bad;
}

/* The swept kernel fields, sweep.<field>: the one each op lets a sweep
 * vary (its rules' `swept`), an error for another op's.  Returns bad. */
static int read_kernel_swept(expansion *e, int bad)
{
  lua_State *L = e->c->L;
  checker *c = e->c;
  for (int o = 1; o < DSV4_OP_COUNT && !bad; o++) {
    const dsv4_op_rules *r = dsv4_op_rules_of((dsv4_op)o);
    if (!r->swept)
      continue;
    if (lua_getfield(L, e->s.idx, r->swept) == LUA_TNIL) {
      lua_pop(L, 1);
      continue;
    }
    if ((dsv4_op)o != e->sw->op) {
      FERR(&e->s, r->swept, "sweeps a field of op '%s' only", dsv4_op_name((dsv4_op)o));
      c->structural++, bad = 1;
      break;
    }
    if (e->ns == DSV4_SWEEP_PARAMS) {
      FERR(&e->s, NULL, "sweeps more than %d fields", DSV4_SWEEP_PARAMS);
      c->structural++, bad = 1;
      break;
    }
    dsv4_sweep_param *q = &e->sw->param[e->ns];
    snprintf(q->field, sizeof q->field, "%s", r->swept);
    snprintf(q->tag, sizeof q->tag, "%s", r->swept_tag);
    if (read_values(&e->s, r->swept, DSV4_TF_INT, q)) {
      bad = 1;
      break;
    }
    e->sv[e->ns++] = (swept){r->swept, DSV4_TF_INT, 0, lua_gettop(L)};
  }
  return bad;
}

/* At least one swept field, and the constraints: a list of functions, on
 * the stack.  Returns bad. */
static int read_constraints(expansion *e, int bad)
{
  lua_State *L = e->c->L;
  checker *c = e->c;
  if (!bad && e->ns == 0) {
    char fields[128] = ""; /* the ops' swept kernel fields: "v_dim, heads or k" */
    const char *last = NULL;
    for (int o = 1; o < DSV4_OP_COUNT; o++) {
      const char *f = dsv4_op_rules_of((dsv4_op)o)->swept;
      if (f && last)
        snprintf(fields + strlen(fields), sizeof fields - strlen(fields), "%s%s", fields[0] ? ", " : "", last);
      last = f ? f : last;
    }
    FERR(&e->k, "sweep", "sweeps no field (give sweep.tile.<field> = { values }, or %s%s%s)", fields,
         fields[0] ? " or " : "", last ? last : "");
    c->structural++, bad = 1;
  }
  if (bad)
    return bad;
  int t = lua_getfield(L, e->s.idx, "constraints");
  e->cons = lua_gettop(L);
  if (t == LUA_TTABLE) {
    e->ncons = (int)lua_rawlen(L, e->cons);
    for (int i = 1; i <= e->ncons && !bad; i++) {
      if (lua_rawgeti(L, e->cons, i) != LUA_TFUNCTION) {
        FERR(&e->s, "constraints", "entry %d must be a function(v) returning true to keep a variant (false and a "
             "reason to reject it), got a %s", i, luaL_typename(L, -1));
        c->structural++, bad = 1;
      }
      lua_pop(L, 1);
    }
  } else if (t != LUA_TNIL) {
    FERR(&e->s, "constraints", "must be a list of functions, got a %s", luaL_typename(L, -1));
    c->structural++, bad = 1;
  }
  return bad;
}

/* The fields sorted by path (the order names and the product take), and
 * the product's size within the spec's limits; 1 after an error. */
static int order_fields(expansion *e)
{
  dsv4_sweep *sw = e->sw;
  int ns = e->ns, order[DSV4_SWEEP_PARAMS];
  dsv4_sweep_param sorted[DSV4_SWEEP_PARAMS];
  swept ssorted[DSV4_SWEEP_PARAMS];
  memcpy(sorted, sw->param, sizeof sorted);
  for (int i = 0; i < ns; i++)
    order[i] = i;
  for (int i = 1; i < ns; i++) /* insertion sort of the indices by field */
    for (int j = i; j > 0 && cmp_param(&sw->param[order[j - 1]], &sw->param[order[j]]) > 0; j--) {
      int x = order[j];
      order[j] = order[j - 1], order[j - 1] = x;
    }
  for (int i = 0; i < ns; i++)
    sorted[i] = sw->param[order[i]], ssorted[i] = e->sv[order[i]];
  memcpy(sw->param, sorted, sizeof sorted);
  memcpy(e->sv, ssorted, sizeof e->sv);
  sw->nparams = ns;
  sw->nconstraints = e->ncons;
  e->points = 1;
  for (int i = 0; i < ns; i++)
    e->points *= sw->param[i].nvalues;
  if (e->points > MAX_POINTS || e->c->plan->nvariants + e->points > DSV4_MAX_VARIANTS) {
    FERR(&e->k, "sweep", "spans %lld variants; a spec holds at most %d (%d a sweep)", e->points, DSV4_MAX_VARIANTS,
         MAX_POINTS);
    e->c->structural++;
    return 1;
  }
  return 0;
}

/* Variant var's name at point idxv (booleans as 0 / 1); 1 after an error
 * (too long, or another kernel's or variant's). */
static int variant_name(expansion *e, const int *idxv, dsv4_variant *var)
{
  const dsv4_plan *p = e->c->plan;
  char vname[256];
  int o = snprintf(vname, sizeof vname, "%s_", e->sw->kernel);
  for (int i = 0; i < e->ns; i++) {
    const char *val = e->sw->param[i].value[idxv[i]];
    int boolean = e->sv[i].type == DSV4_TF_BOOL;
    const char *shown = !strcmp(val, "true") && boolean ? "1" : !strcmp(val, "false") && boolean ? "0" : val;
    o += snprintf(vname + o, sizeof vname - (size_t)o, "_%s%s", e->sw->param[i].tag, shown);
    var->value[i] = (unsigned char)idxv[i];
  }
  if (strlen(vname) >= DSV4_NAME_MAX) {
    FERR(&e->k, "name", "makes the sweep variant name '%s', longer than %d characters: give the kernel a shorter "
         "name", vname, DSV4_NAME_MAX - 1);
    return 1;
  }
  int clash = 0;
  for (int i = 0; i < p->nkernels && !clash; i++)
    clash = !strcmp(p->kernels[i].name, vname);
  for (int i = 0; i < p->nvariants && !clash; i++)
    clash = !strcmp(p->variants[i].name, vname);
  if (clash) {
    FERR(&e->k, "name", "makes the sweep variant name '%s', which another kernel or variant has", vname);
    return 1;
  }
  snprintf(var->name, sizeof var->name, "%s", vname);
  return 0;
}

/* Whether the constraints keep the variant at idxv: each called with v,
 * the variant's tile fields and swept fields; a rejection's reason into
 * var. */
static int kept(expansion *e, const int *idxv, dsv4_variant *var)
{
  lua_State *L = e->c->L;
  lua_newtable(L);
  int v = lua_gettop(L);
  if (e->base_tile) {
    lua_pushnil(L);
    while (lua_next(L, e->base_tile)) {
      if (lua_type(L, -2) == LUA_TSTRING) {
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, v);
      } else
        lua_pop(L, 1);
    }
  }
  for (int i = 0; i < e->ns; i++) {
    push_value(L, &e->sv[i], idxv[i]);
    lua_setfield(L, v, e->sv[i].field);
  }
  for (int ci = 1; ci <= e->ncons; ci++) {
    lua_rawgeti(L, e->cons, ci);
    int fn = lua_gettop(L);
    char where[DSV4_PATH_MAX + 16];
    fn_where(L, fn, where, sizeof where);
    lua_pushvalue(L, v);
    lua_call(L, 1, 2); /* an error in a constraint is the spec's error, raised as such */
    if (!lua_toboolean(L, -2)) {
      const char *why = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "the constraint is false";
      snprintf(var->reason, sizeof var->reason, "constraint %d (%s): %s", ci, where, why);
      lua_pop(L, 2);
      return 0;
    }
    lua_pop(L, 2);
  }
  return 1;
}

/* Push the variant at idxv as a kernel table: the kernel{}'s fields less
 * the sweep, its name, a tile with the swept values, the swept kernel
 * fields; positioned where the kernel{} was (the checker's field lines). */
static void push_variant(expansion *e, const int *idxv, const char *vname)
{
  lua_State *L = e->c->L;
  push_copy(L, e->fields, NULL);
  int kt = lua_gettop(L);
  lua_pushstring(L, vname);
  lua_setfield(L, kt, "name");
  lua_newtable(L);
  int tt = lua_gettop(L);
  if (e->base_tile) {
    lua_pushnil(L);
    while (lua_next(L, e->base_tile)) {
      lua_pushvalue(L, -2);
      lua_insert(L, -2);
      lua_rawset(L, tt);
    }
  }
  for (int i = 0; i < e->ns; i++) {
    push_value(L, &e->sv[i], idxv[i]);
    lua_setfield(L, e->sv[i].tile ? tt : kt, e->sv[i].field);
  }
  lua_setfield(L, kt, "tile");
  lua_getfield(L, LUA_REGISTRYINDEX, POS_KEY);
  lua_pushvalue(L, kt);
  lua_pushvalue(L, e->idx);
  lua_gettable(L, -3);
  lua_settable(L, -3);
  lua_pop(L, 1);
}

/* The variant table on the stack top checked by the kernel checker with
 * its diagnostics aside: built, rejected with the checker's message, or
 * (an error of the spec's form) the spec's error: 1 then. */
static int check_variant(expansion *e, dsv4_variant *var)
{
  checker *c = e->c;
  memset(e->scratch, 0, sizeof *e->scratch);
  int pre_s = c->structural;
  c->d = e->scratch;
  int r = sc_check_kernel(c, lua_gettop(c->L));
  c->d = e->real;
  if (!r) {
    var->kernel = c->plan->nkernels - 1;
    e->accepted++;
  } else if (c->structural != pre_s) {
    for (int i = 0; i < e->scratch->n; i++) /* the spec's own error: reported as it is */
      dsv4_diag_add(e->real, &e->scratch->items[i]);
    return 1;
  } else {
    snprintf(var->reason, sizeof var->reason, "%.*s", (int)sizeof var->reason - 1,
             e->scratch->n ? e->scratch->items[0].msg : "refused by the checker");
    if (e->first_checked < 0)
      e->first_checked = c->plan->nvariants, *e->first_diags = *e->scratch;
  }
  return 0;
}

/* Every point of the product, the last field fastest: a variant, named,
 * kept or rejected by the constraints, checked; then an error if none was
 * built. */
static int expand(expansion *e)
{
  lua_State *L = e->c->L;
  dsv4_plan *p = e->c->plan;
  e->sw->first = p->nvariants;
  e->the_sweep = p->nsweeps++;
  /* the base tile (a table, or none: the checker then says it is missing),
   * and the kernel{}'s own fields: copied before any constraint runs, as
   * the swept lists were (read_values) */
  if (lua_getfield(L, e->idx, "tile") == LUA_TTABLE) {
    push_copy(L, lua_gettop(L), NULL);
    e->base_tile = lua_gettop(L);
  }
  push_copy(L, e->idx, "sweep");
  e->fields = lua_gettop(L);
  e->scratch = lua_newuserdatauv(L, sizeof *e->scratch, 0);
  e->first_diags = lua_newuserdatauv(L, sizeof *e->first_diags, 0);
  memset(e->first_diags, 0, sizeof *e->first_diags);
  e->first_checked = -1;
  int idxv[DSV4_SWEEP_PARAMS] = {0}, rc = 0;
  for (long long pt = 0; pt < e->points && !rc; pt++) {
    int loop_top = lua_gettop(L);
    dsv4_variant *var = &p->variants[p->nvariants];
    memset(var, 0, sizeof *var);
    var->sweep = e->the_sweep, var->kernel = -1;
    if (variant_name(e, idxv, var))
      return 1;
    int keep = kept(e, idxv, var);
    if (keep && p->nkernels == DSV4_MAX_KERNELS) {
      /* no silent limit: the variants past it would be missing from the build */
      FERR(&e->k, "sweep", "builds more than %d kernels, the most one spec (and its bundle) holds: variant '%s' and "
           "those after it do not fit; sweep fewer values or reject more variants with constraints",
           DSV4_MAX_KERNELS, var->name);
      e->c->structural++;
      return 1;
    }
    if (keep) {
      push_variant(e, idxv, var->name);
      rc = check_variant(e, var);
    }
    p->nvariants++;
    e->sw->nvariants++;
    lua_settop(L, loop_top);
    for (int i = e->ns - 1; i >= 0; i--) /* the next point: the last field fastest */
      if (++idxv[i] < e->sw->param[i].nvalues)
        break;
      else
        idxv[i] = 0;
  }
  if (!rc && !e->accepted) {
    /* nothing left to build: say why, at the sweep, then the first refusal
     * as the checker reported it (with its position) */
    FERR(&e->k, "sweep", "rejects every one of its %d variants%s", e->sw->nvariants,
         e->first_checked < 0 ? " by its constraints" : "; the first refusal follows");
    for (int i = 0; i < e->first_diags->n; i++)
      dsv4_diag_add(e->real, &e->first_diags->items[i]);
    rc = 1;
  }
  return rc;
}

/* A kernel{} with a sweep: its variants, in steps (above). */
int sc_check_sweep(checker *c, int idx)
{
  const char *sweep_known[DSV4_OP_COUNT + 3] = {"tile"}; /* the tile, each op's swept field, the constraints */
  int nknown = 1;
  for (int o = 1; o < DSV4_OP_COUNT; o++)
    if (dsv4_op_rules_of((dsv4_op)o)->swept)
      sweep_known[nknown++] = dsv4_op_rules_of((dsv4_op)o)->swept;
  sweep_known[nknown] = "constraints";
  expansion e = {.c = c, .idx = idx, .top = lua_gettop(c->L), .real = c->d};
  sc_table_pos(c, idx, e.file, sizeof e.file, &e.line);
  e.k = (cursor){.c = c, .idx = idx, .file = e.file, .line = e.line, .what = "kernel"};
  char name[DSV4_NAME_MAX];
  dsv4_op op = sweep_op(c, &e.k, name);
  if (op == DSV4_OP_NONE) {
    lua_settop(c->L, e.top);
    return sc_check_kernel(c, idx); /* which reports the name or the op */
  }
  int rc = begin(&e, name, op);
  if (!rc) {
    int bad = sc_check_known(&e.s, sweep_known);
    bad = read_tile_swept(&e, bad);
    bad = read_kernel_swept(&e, bad);
    rc = read_constraints(&e, bad) || order_fields(&e) || expand(&e);
  }
  lua_settop(c->L, e.top);
  return rc;
}

/* SHA-256 of the spec's bytes and of each file it included, the latter
 * sorted by their own hash: the same text gives the same hash wherever the
 * files sit (no path enters it).  The bytes are those the sandbox read and
 * ran (never the files reopened by name). */
static int cmp_hex(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

void sc_spec_hash(checker *c, const char *path)
{
  lua_State *L = c->L;
  char(*hex)[65] = NULL;
  int n = 0, cap = 0;
  size_t len;
  char top[65] = "";
  lua_getfield(L, LUA_REGISTRYINDEX, DSV4_SPEC_SOURCES_KEY);
  if (lua_getfield(L, -1, path) == LUA_TSTRING) {
    const char *text = lua_tolstring(L, -1, &len);
    dsv4_sha256_hex(text, len, top);
  }
  lua_pop(L, 2);
  lua_getfield(L, LUA_REGISTRYINDEX, DSV4_SPEC_TEXTS_KEY);
  if (lua_type(L, -1) == LUA_TTABLE) {
    lua_pushnil(L);
    while (lua_next(L, -2)) {
      if (lua_type(L, -1) == LUA_TSTRING) {
        if (n == cap) {
          char(*h)[65] = realloc(hex, (size_t)(cap = cap ? cap * 2 : 8) * sizeof *hex);
          if (!h) {
            lua_pop(L, 2);
            break;
          }
          hex = h;
        }
        const char *text = lua_tolstring(L, -1, &len);
        dsv4_sha256_hex(text, len, hex[n++]);
      }
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
  if (n)
    qsort(hex, (size_t)n, sizeof *hex, cmp_hex);
  dsv4_sha256_ctx h;
  unsigned char out[32];
  dsv4_sha256_init(&h);
  dsv4_sha256_update(&h, top, 64);
  for (int i = 0; i < n; i++)
    dsv4_sha256_update(&h, "\n", 1), dsv4_sha256_update(&h, hex[i], 64);
  dsv4_sha256_final(&h, out);
  dsv4_hex(out, 32, c->plan->spec_hash);
  free(hex);
}
