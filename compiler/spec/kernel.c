/* kernel.c -- kernel{} tables checked into dsv4_kernel: targets, the tile
 * (read by its op's table, checked by its op's rules: compiler/ops/), the
 * kernel fields each op takes, and the walk over every queued kernel. */
#include "internal.h"
#include "caps.h"
#include "ops/ops.h"

/* The names of the targets whose subgroup code a spec may switch on, into with. */
static void subgroup_targets(char *with, size_t n)
{
  with[0] = 0;
  for (int j = 0; j < DSV4_TARGET_COUNT; j++)
    if (dsv4_target_has_subgroup_switch((dsv4_target_kind)j))
      snprintf(with + strlen(with), n - strlen(with), "%s%s", with[0] ? ", " : "",
               dsv4_target_name((dsv4_target_kind)j));
}

/* A target's subgroups, subgroup_size and emulate_subgroups (t's table
 * open in ot): sub-group code at a size some PTX or AMDGCN arch's warp
 * has, so that it is the code that warp would run; 1 on an error. */
static int check_subgroups(cursor *ot, dsv4_target_kind t, dsv4_target_opts *o)
{
  int bad = 0;
  int st = lua_getfield(ot->c->L, ot->idx, "subgroups");
  if (st == LUA_TBOOLEAN)
    o->subgroups = lua_toboolean(ot->c->L, -1);
  else if (st != LUA_TNIL) {
    FERR(ot, "subgroups", "must be a boolean, got a %s", luaL_typename(ot->c->L, -1));
    bad = 1;
  }
  lua_pop(ot->c->L, 1);
  int32_t size = 0, emulate = -1;
  bad |= sc_get_int(ot, "subgroup_size", 0, 1, 1 << 20, 0, &size);
  bad |= sc_get_bool(ot, "emulate_subgroups", -1, &emulate);
  char with[64], sizes[64];
  subgroup_targets(with, sizeof with);
  dsv4_subgroup_size_list(sizes, sizeof sizes);
  if (o->subgroups && !dsv4_target_has_subgroup_switch(t)) {
    FERR(ot, "subgroups", "applies to the %s target only", with);
    return 1;
  }
  if (!o->subgroups) {
    if (size)
      FERR(ot, "subgroup_size", "applies only with subgroups = true");
    if (emulate == 1)
      FERR(ot, "emulate_subgroups", "applies only with subgroups = true");
    return bad || size || emulate == 1;
  }
  if (!size && !bad) {
    FERR(ot, "subgroups", "= true needs subgroup_size, the sub-group size the kernel requires (%s)", sizes);
    return 1;
  }
  if (size && !dsv4_subgroup_size_ok(size)) {
    FERR(ot, "subgroup_size", "must be %s (the warp of a PTX or AMDGCN arch, whose code the sub-groups run), got %d",
         sizes, (int)size);
    return 1;
  }
  o->subgroup_size = size;
  o->emulate_subgroups = emulate == 1;
  return bad;
}

/* The targets table: { ptx = { arch = "sm_90a" },
 *                      spirv = { subgroups = true, subgroup_size = 64 } } */
static int check_targets(cursor *k, dsv4_kernel *kn)
{
  static const char *const known[] = {
#define X(e, s, x, a) s,
      DSV4_TARGETS(X)
#undef X
          NULL};
  static const char *const opt_known[] = {"arch", "subgroups", "subgroup_size", "emulate_subgroups", NULL};
  cursor t;
  int r = sc_enter(k, "targets", &t, 1);
  if (r)
    return 1;
  int bad = sc_check_known(&t, known), any = 0;
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
    r = sc_enter(&t, name, &ot, 1);
    if (r) {
      bad = 1;
      continue;
    }
    bad |= sc_check_known(&ot, opt_known);
    char def[DSV4_ARCH_MAX];
    snprintf(def, sizeof def, "%s", o->arch);
    bad |= sc_get_str(&ot, "arch", 0, def, o->arch, sizeof o->arch);
    if (!dsv4_target_arch_ok((dsv4_target_kind)i, o->arch)) {
      FERR(&ot, "arch", "names '%s', which target '%s' cannot emit (one of: %s)", o->arch, name,
           dsv4_target_arch_list((dsv4_target_kind)i));
      bad = 1;
    }
    bad |= check_subgroups(&ot, (dsv4_target_kind)i, o);
    sc_leave(&ot);
  }
  if (!any && !bad) {
    FERR(k, "targets", "names no target (one or more of ptx, amdgcn, spirv)");
    bad = 1;
  }
  sc_leave(&t);
  return bad;
}

/* Where an op's rule (ops.h) reports: at the spec field it names, a
 * tile field ("tile.p") inside the tile table, any other at the kernel{}. */
typedef struct {
  dsv4_report r;
  cursor *k, *tile; /* the kernel{} table; the tile table where it is open (else NULL) */
} spec_report;

static void report_at(dsv4_report *r, const char *field, const char *msg)
{
  spec_report *s = (spec_report *)r;
  if (strncmp(field, "tile.", 5))
    FERR(s->k, field, "%s", msg);
  else if (s->tile)
    FERR(s->tile, field + 5, "%s", msg);
  else {
    cursor t;
    if (!sc_enter(s->k, "tile", &t, 1)) {
      FERR(&t, field + 5, "%s", msg);
      sc_leave(&t);
    }
  }
}

/* A choice field f of the tile (its names: the first the default): its
 * index into *out; *has whether the spec gave it. */
static int get_choice(cursor *t, const dsv4_tile_field *f, int *out, int *has)
{
  char v[16];
  *has = sc_push_field(t, f->name) != LUA_TNIL;
  lua_pop(t->c->L, 1);
  if (sc_get_str(t, f->name, 0, f->choices[0], v, sizeof v))
    return 1;
  for (int i = 0; f->choices[i]; i++)
    if (!strcmp(v, f->choices[i])) {
      *out = i;
      return 0;
    }
  FERR(t, f->name, "must be %s, got '%s'", f->means, v);
  return 1;
}

/* One tile field by its row (ops.h) into its slot of kn's tile. */
static int read_field(cursor *t, dsv4_kernel *kn, const dsv4_tile_field *f, int *given)
{
  int *slot = dsv4_tile_slot(&kn->tile, f), matrix = kn->tile.matrix;
  *given = 0;
  if (f->type == DSV4_TF_BOOL)
    return sc_get_bool(t, f->name, f->def, slot);
  if (f->type == DSV4_TF_CHOICE)
    return get_choice(t, f, slot, given);
  int required = f->required == DSV4_TF_UNLESS_MATRIX ? !matrix : f->required == DSV4_TF_REQUIRED;
  return sc_get_int(t, f->name, required, f->lo, matrix && f->hi_matrix ? f->hi_matrix : f->hi, f->def, slot);
}

/* The names of op's tile fields, NULL-ended (also what a sweep may vary:
 * sweep.c). */
void sc_tile_fields(dsv4_op op, const char **names)
{
  int n = 0;
  for (const dsv4_tile_field *f = dsv4_op_rules_of(op)->tile; f->name; f++)
    names[n++] = f->name;
  names[n] = NULL;
}

/* The tile fields of kn's op, in their rows' order of reading, each
 * followed by its rule (ops.h); the slots no field sets are the op's. */
static int read_tile(cursor *k, cursor *t, dsv4_kernel *kn)
{
  const dsv4_op_rules *rules = dsv4_op_rules_of(kn->op);
  const char *names[DSV4_TILE_FIELDS_MAX + 1];
  sc_tile_fields(kn->op, names);
  int bad = sc_check_known(t, names);
  unsigned given = 0, failed = 0;
  spec_report rep = {{report_at}, k, t};
  kn->tile = rules->fixed;
  for (int step = 1;; step++) {
    const dsv4_tile_field *f = rules->tile;
    while (f->name && f->step != step)
      f++;
    if (!f->name)
      return bad;
    int i = (int)(f - rules->tile), has, r = read_field(t, kn, f, &has);
    given |= (unsigned)has << i;
    failed |= (unsigned)r << i;
    bad |= r;
    if (!r && f->rule)
      bad |= f->rule(kn, given, failed, &rep.r);
  }
}

/* The tile must map the layout onto threads and fit every target named. */
static int check_tile(cursor *k, dsv4_kernel *kn)
{
  cursor t;
  if (sc_enter(k, "tile", &t, 1))
    return 1;
  int bad = read_tile(k, &t, kn);
  dsv4_tile *tl = &kn->tile;
  if (!bad) {
    /* the bound the tile itself sets: its warp-matrix geometry with
     * tile.matrix, else its portable one (the form each target takes, and
     * its threads, are choose_form's: compiler/ops/, held to the target by forms.c) */
    tl->threads = dsv4_op_threads(kn->op, kn->layout.dim, tl->values_per_thread, tl->tokens_per_cta,
                                  tl->tokens_per_thread, kn->heads, tl->matrix ? DSV4_FORM_WARP : DSV4_FORM_PORTABLE);
    spec_report rep = {{report_at}, k, &t};
    bad = dsv4_op_rules_of(kn->op)->check_tile(kn, &rep.r); /* the op's rules (compiler/ops/) */
  }
  sc_leave(&t);
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
  if (has_quant && sc_enter(k, "quant", &qu, 1) == 0) {
    char fl[16];
    bad |= sc_check_known(&qu, quant_known);
    bad |= sc_get_str(&qu, "floor", 1, "", fl, sizeof fl);
    if (!strcmp(fl, "quotient"))
      kn->quant_floor = DSV4_FLOOR_QUOTIENT;
    else if (strcmp(fl, "amax") && !bad) {
      FERR(&qu, "floor", "must be 'amax' (vLLM's writers) or 'quotient' (FlashMLA's test quantizer), got '%s'", fl);
      bad = 1;
    }
    sc_leave(&qu);
  } else if (has_quant)
    bad = 1;
  cursor r;
  if (has_rope && sc_enter(k, "rope", &r, 1) == 0) {
    bad |= sc_check_known(&r, rope_known);
    bad |= sc_get_int(&r, "first", 1, 0, 4096, 0, &kn->rope_first);
    bad |= sc_get_int(&r, "dims", 1, 2, 4096, 0, &kn->rope_dims);
    if (!bad && (kn->rope_first + kn->rope_dims > l->dim || kn->rope_dims % 2 || kn->rope_first % v ||
                 kn->rope_dims % v)) {
      FERR(&r, "dims",
           "[%d, %d) must lie in the layout's %d dims, with first and dims multiples of values_per_thread %d",
           kn->rope_first, kn->rope_first + kn->rope_dims, l->dim, v);
      bad = 1;
    }
    sc_leave(&r);
  } else if (has_rope)
    bad = 1;
  cursor q;
  if (has_q && sc_enter(k, "q", &q, 1) == 0) {
    bad |= sc_check_known(&q, q_known);
    bad |= sc_get_int(&q, "dim", 1, 1, 4096, 0, &kn->q_dim);
    int lanes = kn->q_dim / v;
    if (!bad && (kn->q_dim % v || kn->tile.threads % dsv4_pow2ceil(lanes) ||
                 (kn->rope_dims && kn->rope_first + kn->rope_dims > kn->q_dim))) {
      FERR(&q, "dim",
           "= %d must be a multiple of values_per_thread %d, its %d lanes (padded to %d) must divide the CTA's %d "
           "threads, and it must hold the RoPE dims",
           kn->q_dim, v, lanes, dsv4_pow2ceil(lanes), kn->tile.threads);
      bad = 1;
    }
    sc_leave(&q);
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
      FERR(k, "layout", "'%s' scales per tensor; docs/ops.md defines no writer for that", l->name);
      bad = 1;
    } else if (s->scale_type != DSV4_DT_NONE) {
      if (s->type != DSV4_DT_E4M3) {
        FERR(k, "layout", "'%s' segment %d: the writer quantizes to e4m3 only", l->name, i + 1);
        bad = 1;
      } else if ((group && s->scale_group != group) || !pow2(s->scale_group / v) || s->scale_group % v ||
                 s->d0 % s->scale_group || s->scale_group / v > 32) {
        FERR(k, "layout",
             "'%s': the writer needs one scale group size for all segments, a power-of-two multiple (at most 32) "
             "of values_per_thread %d, with each segment starting on a group",
             l->name, v);
        bad = 1;
      }
      group = s->scale_group;
    }
  }
  return bad;
}

/* Whether op's rules read an integer kernel field named name. */
static int op_takes_int(dsv4_op op, const char *name)
{
  const dsv4_kernel_field *const *f = dsv4_op_rules_of(op)->kints;
  for (; f && *f; f++)
    if (!strcmp((*f)->name, name))
      return 1;
  return 0;
}

/* Each op's integer kernel fields (its rules' kints: ops.h) the checker
 * reads at this point (after: after the tile, else before), in op order:
 * read and ruled for the kernel's op; where the kernel's op takes no field
 * of that name and the spec gives it, an error naming the first op that
 * does (once a name). */
static int check_op_ints(cursor *k, dsv4_kernel *kn, int after)
{
  int bad = 0;
  for (int o = 1; o < DSV4_OP_COUNT && !bad; o++) {
    for (const dsv4_kernel_field *const *fp = dsv4_op_rules_of((dsv4_op)o)->kints; fp && *fp && !bad; fp++) {
      const dsv4_kernel_field *f = *fp;
      int has, first = 1;
      for (int p = 1; p < o; p++)
        first &= !op_takes_int((dsv4_op)p, f->name);
      if (f->after_tile != after || (kn->op != (dsv4_op)o && (op_takes_int(kn->op, f->name) || !first)) ||
          op_field(k, kn, (dsv4_op)o, f->name, &has, &bad))
        continue;
      int32_t *slot = (int32_t *)((char *)kn + f->slot);
      bad = sc_get_int(k, f->name, f->required, f->lo, f->hi, f->def == DSV4_KF_DIM ? kn->layout.dim : f->def, slot);
      if (!bad && f->rule) {
        spec_report rep = {{report_at}, k, NULL};
        bad = f->rule(kn, &rep.r);
      }
    }
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

/* The form and launch record of each target (forms.c), decided here once;
 * a refusal is reported at the spec field it names. */
static int choose_forms(cursor *k, dsv4_kernel *kn)
{
  for (int i = 0; i < DSV4_TARGET_COUNT; i++) {
    if (!kn->target[i].enabled)
      continue;
    const char *field = NULL;
    char why[512];
    if (!dsv4_choose_form(kn, (dsv4_target_kind)i, &kn->launch[i], &field, why, (int)sizeof why))
      continue;
    spec_report rep = {{report_at}, k, NULL};
    report_at(&rep.r, field, why);
    return 1;
  }
  return 0;
}

/* The text of the value the spec wrote for field key of the cursor's
 * table ("L.no_such_layout"), into buf; 0 when the source has no such
 * field there (Lua drops a field whose value is nil, so the source says
 * whether one was written). */
static int written_value(cursor *k, const char *key, char *buf, size_t n)
{
  const src_file *src = sc_source(k->c, k->file);
  int col, line = sc_field_pos(k, key, &col);
  if (!src || col <= 0)
    return 0;
  const char *p = src->text, *end = src->text + src->len;
  for (int l = 1; l < line && p < end; p++)
    l += *p == '\n';
  p += col - 1;
  size_t kl = strlen(key);
  if (p + kl > end || memcmp(p, key, kl))
    return 0;
  for (p += kl; p < end && (*p == ' ' || *p == '\t'); p++)
    ;
  if (p == end || *p != '=')
    return 0;
  for (p++; p < end && (*p == ' ' || *p == '\t'); p++)
    ;
  size_t o = 0;
  int depth = 0;
  for (; p < end && o + 1 < n && *p != '\n'; p++) {
    if (depth == 0 && (*p == ',' || *p == ';' || *p == '}' || (*p == '-' && p + 1 < end && p[1] == '-')))
      break;
    depth += (*p == '(' || *p == '[' || *p == '{') - (*p == ')' || *p == ']' || *p == '}');
    buf[o++] = *p;
  }
  while (o && (buf[o - 1] == ' ' || buf[o - 1] == '\t'))
    o--;
  buf[o] = 0;
  return o > 0;
}

/* kernel{}'s layout is nil: missing, or (where the source has the field)
 * an expression that named no layout, such as L.misspelt: then say so, with
 * the closest name of the layouts the spec made and the list of them. */
static void nil_layout(cursor *k)
{
  char expr[64];
  if (!written_value(k, "layout", expr, sizeof expr)) {
    sc_missing(k, "field", "layout");
    return;
  }
  lua_State *L = k->c->L;
  const char *last = expr; /* the name after the last '.' */
  for (const char *q = expr; *q; q++)
    if (*q == '.' || *q == '[' || *q == '"' || *q == '\'')
      last = q + 1;
  char names[256] = "", hint[48] = "";
  int best = 3, count = 0;
  lua_getfield(L, LUA_REGISTRYINDEX, DSV4_SPEC_LAYOUTS_KEY);
  for (lua_Integer i = 1, n = (lua_Integer)lua_rawlen(L, -1); i <= n; i++) {
    lua_rawgeti(L, -1, i);
    lua_pushliteral(L, "name");
    if (lua_type(L, -2) == LUA_TTABLE && lua_rawget(L, -2) == LUA_TSTRING) {
      const char *nm = lua_tostring(L, -1);
      size_t used = strlen(names);
      if (used + strlen(nm) + 8 < sizeof names)
        snprintf(names + used, sizeof names - used, "%s%s", count ? ", " : "", nm);
      else if (!strstr(names, ", ..."))
        snprintf(names + used, sizeof names - used, ", ...");
      count++;
      int e = sc_edit_distance(last, nm);
      if (e < best && strlen(nm) < sizeof hint)
        best = e, snprintf(hint, sizeof hint, "%s", nm);
    }
    lua_pop(L, 2);
  }
  lua_pop(L, 1);
  char more[320];
  if (hint[0])
    snprintf(more, sizeof more, " (did you mean '%s'?)", hint);
  else if (count)
    snprintf(more, sizeof more, " (the spec's layouts: %s)", names);
  else
    snprintf(more, sizeof more, " (the spec made none with layout { ... })");
  FERR(k, "layout", "is nil: %s names no layout%s", expr, more);
  k->c->structural++;
}

/* One kernel{} table (on the stack top) into the plan. */
int sc_check_kernel(checker *c, int idx)
{
  const char *known[32] = {"name", "op", "layout", "tile", "targets"}; /* the shared fields, each op's, sweep */
  int nknown = dsv4_op_kernel_fields(known, 5, 30);
  known[nknown++] = "sweep";
  dsv4_plan *p = c->plan;
  dsv4_kernel *kn = &p->kernels[p->nkernels == DSV4_MAX_KERNELS ? 0 : p->nkernels];
  char kfile[DSV4_PATH_MAX] = "";
  int kline = 0;
  sc_table_pos(c, idx, kfile, sizeof kfile, &kline);
  if (p->nkernels == DSV4_MAX_KERNELS) { /* at the kernel{} that does not fit (a sweep says so itself: sweep.c) */
    cursor at = {.c = c, .idx = idx, .file = kfile, .line = kline, .what = "kernel"};
    sc_field_error(&at, NULL, "kernel{} is one kernel more than the %d one spec (and its bundle) holds",
                   DSV4_MAX_KERNELS);
    c->structural++;
    return 1;
  }
  memset(kn, 0, sizeof *kn);
  snprintf(kn->file, sizeof kn->file, "%s", kfile);
  kn->line = kline;
  cursor k = {.c = c, .idx = idx, .file = kn->file, .line = kn->line, .what = "kernel"};
  char what[96];
  int bad = sc_get_str(&k, "name", 1, "", kn->name, sizeof kn->name);
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
  bad |= sc_check_known(&k, known);
  char op[32];
  if (!sc_get_str(&k, "op", 1, "", op, sizeof op)) {
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
    bad |= sc_check_layout_table(c, lua_gettop(c->L), what, &kn->layout);
  else if (lt == LUA_TNIL) {
    if (needs) {
      nil_layout(&k);
      bad = 1;
    }
  } else {
    FERR(&k, "layout", "must be a table made by layout { ... }, got a %s", luaL_typename(c->L, -1));
    bad = 1;
  }
  lua_pop(c->L, 1);
  bad |= check_targets(&k, kn);
  if (!bad)
    bad |= check_op_ints(&k, kn, 0);
  if (!bad)
    bad |= check_tile(&k, kn);
  if (!bad)
    bad |= check_writer(&k, kn);
  if (!bad)
    bad |= check_op_ints(&k, kn, 1);
  if (!bad)
    bad |= choose_forms(&k, kn);
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
