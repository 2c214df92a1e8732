/* lock.c -- the tuning lockfile: its model, canonical text, reading,
 * writing and merging (see lock.h). */
#define _POSIX_C_SOURCE 200809L
#include "lock.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bucket.h"
#include "files.h"
#include "json.h"

/* ---- gates ----------------------------------------------------------------------- */

static const char *const gate_names[DSV4_GATE_COUNT] = {"pass", "wrong", "nondeterministic", "crashed",
                                                        "timeout", "error", "skipped"};

const char *dsv4_gate_name(int g) { return g >= 0 && g < DSV4_GATE_COUNT ? gate_names[g] : "?"; }

int dsv4_gate_from_name(const char *s)
{
  for (int i = 0; i < DSV4_GATE_COUNT; i++)
    if (!strcmp(gate_names[i], s))
      return i;
  return -1;
}

/* How merging ranks a gate: a failure over a pass over a skip. */
static int gate_rank(int g) { return g == DSV4_GATE_SKIPPED ? 0 : g == DSV4_GATE_PASS ? 1 : 2; }

/* ---- the lock model ---------------------------------------------------------------- */

double dsv4_lock_round(double us)
{
  if (!(us == us) || us < 0)
    return 0;
  if (us > 1e9) /* what the reader takes: 1000 s a launch; and 1e9 * 1e4 is exact in a double */
    us = 1e9;
  return (double)(long long)(us * 1e4 + 0.5) / 1e4; /* no libm in the runtime */
}

/* Buckets of one op compare by their dims, others as text. */
static int bucket_cmp(const char *op, const char *a, const char *b)
{
  int o = dsv4_tune_op_from_name(op);
  dsv4_shape x, y;
  if (o && !dsv4_shape_parse(o, a, &x) && !dsv4_shape_parse(o, b, &y))
    for (int i = 0; i < x.n; i++)
      if (x.dim[i] != y.dim[i])
        return x.dim[i] < y.dim[i] ? -1 : 1;
  return strcmp(a, b);
}

int dsv4_lock_key_cmp(const dsv4_lock_key *a, const dsv4_lock_key *b)
{
  int c;
  if ((c = strcmp(a->kernel, b->kernel)) || (c = strcmp(a->op, b->op)) || (c = strcmp(a->target, b->target)) ||
      (c = strcmp(a->arch, b->arch)) || (c = strcmp(a->device, b->device)) ||
      (c = strcmp(a->toolchain, b->toolchain)) || (c = bucket_cmp(a->op, a->bucket, b->bucket)) ||
      (c = strcmp(a->spec_hash, b->spec_hash)))
    return c;
  return 0;
}

/* The hash of a key: FNV-1a of its fields.  Two keys are one entry's when
 * every field is the same text (key_cmp is 0 exactly then: equal bucket
 * dims still compare their text), so equality needs no bucket parsing. */
static uint32_t key_hash(const dsv4_lock_key *k)
{
  const char *f[8] = {k->spec_hash, k->kernel, k->op, k->target, k->arch, k->device, k->toolchain, k->bucket};
  uint32_t h = 2166136261u;
  for (int i = 0; i < 8; i++)
    for (const unsigned char *p = (const unsigned char *)f[i];; p++) {
      h = (h ^ *p) * 16777619u;
      if (!*p)
        break;
    }
  return h;
}

static int key_same(const dsv4_lock_key *a, const dsv4_lock_key *b)
{
  return !strcmp(a->bucket, b->bucket) && !strcmp(a->kernel, b->kernel) && !strcmp(a->spec_hash, b->spec_hash) &&
         !strcmp(a->device, b->device) && !strcmp(a->op, b->op) && !strcmp(a->target, b->target) &&
         !strcmp(a->arch, b->arch) && !strcmp(a->toolchain, b->toolchain);
}

void dsv4_lock_unindex(dsv4_lock *l)
{
  free(l->slot);
  l->slot = NULL, l->nslot = 0, l->indexed = 0;
}

/* Entry i into the index (which has room: at most half full). */
static void index_put(dsv4_lock *l, int i)
{
  uint32_t mask = (uint32_t)l->nslot - 1, h = key_hash(&l->e[i].key) & mask;
  while (l->slot[h])
    h = (h + 1) & mask;
  l->slot[h] = i + 1;
}

/* The index made current for entries [0, n + extra); -1 when memory runs out. */
static int index_update(dsv4_lock *l, int extra)
{
  if (l->indexed > l->n)
    dsv4_lock_unindex(l); /* entries were removed without a word */
  int want = l->n + extra;
  if (!l->slot || (long)want * 2 > l->nslot) {
    long ns = 64;
    while (ns < (long)want * 2)
      ns *= 2;
    int *slot = calloc((size_t)ns, sizeof *slot);
    if (!slot)
      return -1;
    free(l->slot);
    l->slot = slot, l->nslot = (int)ns, l->indexed = 0;
  }
  for (; l->indexed < l->n; l->indexed++)
    index_put(l, l->indexed);
  return 0;
}

dsv4_lock_entry *dsv4_lock_find(dsv4_lock *l, const dsv4_lock_key *k, int create)
{
  if (index_update(l, create ? 1 : 0))
    return NULL;
  uint32_t mask = (uint32_t)l->nslot - 1;
  for (uint32_t h = key_hash(k) & mask; l->slot[h]; h = (h + 1) & mask) {
    int i = l->slot[h] - 1;
    if (i < l->n && key_same(&l->e[i].key, k))
      return &l->e[i];
  }
  if (!create)
    return NULL;
  if (l->n == l->cap) {
    int cap = l->cap ? l->cap * 2 : 16;
    dsv4_lock_entry *e = realloc(l->e, (size_t)cap * sizeof *e);
    if (!e)
      return NULL;
    l->e = e, l->cap = cap;
  }
  dsv4_lock_entry *e = &l->e[l->n++];
  memset(e, 0, sizeof *e);
  e->key = *k;
  index_put(l, l->n - 1);
  l->indexed = l->n;
  return e;
}

dsv4_lock_variant *dsv4_lock_variant_find(dsv4_lock_entry *e, const char *name)
{
  for (int i = 0; i < e->nvariants; i++)
    if (!strcmp(e->v[i].name, name))
      return &e->v[i];
  return NULL;
}

/* Room for n more variants in e; -1 when memory runs out. */
static int variant_room(dsv4_lock_entry *e, int n)
{
  if (e->nvariants + n <= e->cap)
    return 0;
  long cap = e->cap ? e->cap : 16;
  while (cap < (long)e->nvariants + n)
    cap *= 2;
  if (cap > (1 << 28))
    return -1;
  dsv4_lock_variant *nv = realloc(e->v, (size_t)cap * sizeof *nv);
  if (!nv)
    return -1;
  e->v = nv, e->cap = (int)cap;
  return 0;
}

/* v as the file holds it into d: times rounded, a failure's zeroed, a pass's reason empty. */
static void variant_set(dsv4_lock_variant *d, const dsv4_lock_variant *v)
{
  *d = *v;
  d->median_us = dsv4_lock_round(v->median_us);
  d->min_us = dsv4_lock_round(v->min_us);
  d->max_us = dsv4_lock_round(v->max_us);
  if (d->gate != DSV4_GATE_PASS)
    d->median_us = d->min_us = d->max_us = 0, d->samples = 0;
  else
    d->reason[0] = 0;
}

int dsv4_lock_put(dsv4_lock_entry *e, const dsv4_lock_variant *v)
{
  dsv4_lock_variant *d = dsv4_lock_variant_find(e, v->name);
  if (!d) {
    if (variant_room(e, 1))
      return -1;
    d = &e->v[e->nvariants++];
  }
  variant_set(d, v);
  return 0;
}

/* The tie-break (DSV4_LOCK_TIE_BREAK): <0 when a beats b. */
static int better(const dsv4_lock_variant *a, const dsv4_lock_variant *b)
{
  if (a->median_us != b->median_us)
    return a->median_us < b->median_us ? -1 : 1;
  if (a->min_us != b->min_us)
    return a->min_us < b->min_us ? -1 : 1;
  return strcmp(a->name, b->name);
}

void dsv4_lock_decide(dsv4_lock_entry *e)
{
  const dsv4_lock_variant *w = NULL;
  for (int i = 0; i < e->nvariants; i++)
    if (e->v[i].gate == DSV4_GATE_PASS && (!w || better(&e->v[i], w) < 0))
      w = &e->v[i];
  snprintf(e->winner, sizeof e->winner, "%s", w ? w->name : "");
}

void dsv4_lock_free(dsv4_lock *l)
{
  for (int i = 0; i < l->n; i++)
    free(l->e[i].v);
  free(l->e);
  free(l->slot);
  memset(l, 0, sizeof *l);
}

/* ---- text ---------------------------------------------------------------------------- */

void dsv4_lock_variant_text(const dsv4_lock_variant *v, dsv4_text *t)
{
  dsv4_text_printf(t, "{\"name\": ");
  dsv4_text_json_str(t, v->name);
  dsv4_text_printf(t, ", \"gate\": \"%s\", \"median_us\": %.4f, \"min_us\": %.4f, \"max_us\": %.4f, \"samples\": %d, "
                      "\"code\": ", dsv4_gate_name(v->gate), v->median_us, v->min_us, v->max_us, v->samples);
  dsv4_text_json_str(t, v->code);
  dsv4_text_printf(t, ", \"reason\": ");
  dsv4_text_json_str(t, v->reason);
  dsv4_text_printf(t, "}");
}

static int cmp_variant(const void *a, const void *b)
{
  return strcmp(((const dsv4_lock_variant *)a)->name, ((const dsv4_lock_variant *)b)->name);
}

static int cmp_entry(const void *a, const void *b)
{
  return dsv4_lock_key_cmp(&((const dsv4_lock_entry *)a)->key, &((const dsv4_lock_entry *)b)->key);
}

/* l's entries in key order (buckets by their dims): each bucket parsed
 * once, not at every comparison. */
typedef struct {
  const dsv4_lock_entry *e;
  dsv4_shape s;
  int parsed;
} sort_item;

static int cmp_sort_item(const void *pa, const void *pb)
{
  const sort_item *x = pa, *y = pb;
  const dsv4_lock_key *a = &x->e->key, *b = &y->e->key;
  int c;
  if ((c = strcmp(a->kernel, b->kernel)) || (c = strcmp(a->op, b->op)) || (c = strcmp(a->target, b->target)) ||
      (c = strcmp(a->arch, b->arch)) || (c = strcmp(a->device, b->device)) ||
      (c = strcmp(a->toolchain, b->toolchain)))
    return c;
  if (x->parsed && y->parsed) /* as bucket_cmp: the same op, so the same dims */
    for (int i = 0; i < x->s.n; i++)
      if (x->s.dim[i] != y->s.dim[i])
        return x->s.dim[i] < y->s.dim[i] ? -1 : 1;
  if ((c = strcmp(a->bucket, b->bucket)) || (c = strcmp(a->spec_hash, b->spec_hash)))
    return c;
  return 0;
}

static void sort_entries(dsv4_lock *l)
{
  sort_item *it = malloc((size_t)l->n * sizeof *it);
  dsv4_lock_entry *sorted = malloc((size_t)l->n * sizeof *sorted);
  if (!it || !sorted) { /* short of memory: the slower sort, in place */
    free(it), free(sorted);
    qsort(l->e, (size_t)l->n, sizeof *l->e, cmp_entry);
  } else {
    for (int i = 0; i < l->n; i++) {
      int o = dsv4_tune_op_from_name(l->e[i].key.op);
      it[i].e = &l->e[i];
      it[i].parsed = o && !dsv4_shape_parse(o, l->e[i].key.bucket, &it[i].s);
    }
    qsort(it, (size_t)l->n, sizeof *it, cmp_sort_item);
    for (int i = 0; i < l->n; i++)
      sorted[i] = *it[i].e;
    memcpy(l->e, sorted, (size_t)l->n * sizeof *sorted);
    free(it), free(sorted);
  }
  dsv4_lock_unindex(l);
}

static void field(dsv4_text *t, const char *name, const char *value, const char *after)
{
  dsv4_text_printf(t, "\"%s\": ", name);
  dsv4_text_json_str(t, value);
  dsv4_text_printf(t, "%s", after);
}

char *dsv4_lock_format(dsv4_lock *l, size_t *len)
{
  dsv4_text t = {0};
  if (l->n)
    sort_entries(l);
  dsv4_text_printf(&t, "{\n  \"format\": \"%s\",\n  \"tie_break\": \"%s\",\n  \"entries\": [", DSV4_LOCK_FORMAT,
                   DSV4_LOCK_TIE_BREAK);
  for (int i = 0; i < l->n; i++) {
    dsv4_lock_entry *e = &l->e[i];
    if (e->nvariants)
      qsort(e->v, (size_t)e->nvariants, sizeof *e->v, cmp_variant);
    dsv4_lock_decide(e);
    dsv4_text_printf(&t, "%s\n    {\n      ", i ? "," : "");
    field(&t, "kernel", e->key.kernel, ", ");
    field(&t, "op", e->key.op, ", ");
    field(&t, "target", e->key.target, ", ");
    field(&t, "arch", e->key.arch, ",\n      ");
    field(&t, "device", e->key.device, ",\n      ");
    field(&t, "toolchain", e->key.toolchain, ",\n      ");
    field(&t, "spec_hash", e->key.spec_hash, ",\n      ");
    field(&t, "bucket", e->key.bucket, ", ");
    field(&t, "shape", e->shape, ", ");
    dsv4_text_printf(&t, "\"seed\": %lld,\n      ", e->seed);
    field(&t, "winner", e->winner, ",\n      \"variants\": [");
    for (int k = 0; k < e->nvariants; k++) {
      dsv4_text_printf(&t, "%s\n        ", k ? "," : "");
      dsv4_lock_variant_text(&e->v[k], &t);
    }
    dsv4_text_printf(&t, "%s]\n    }", e->nvariants ? "\n      " : "");
  }
  dsv4_text_printf(&t, "%s]\n}\n", l->n ? "\n  " : "");
  if (t.failed) {
    free(t.s);
    return NULL;
  }
  if (len)
    *len = t.n;
  return t.s;
}

/* The JSON type's name, for messages. */
static const char *jtype(const dsv4_json *v)
{
  static const char *const names[] = {"null", "a boolean", "a number", "a string", "a list", "an object"};
  return v->type >= 0 && v->type <= DSV4_JSON_OBJ ? names[v->type] : "?";
}

/* A string member copied into buf; 1 (with err naming the line) when of
 * another type, too long, or missing and required (absent and optional: ""). */
static int take_str(const dsv4_json *o, const char *key, char *buf, size_t n, int required, const char *where,
                    char *err, size_t errlen)
{
  const dsv4_json *v = dsv4_json_get(o, key);
  if (!v || v->type != DSV4_JSON_STR) {
    if (!required && !v) {
      buf[0] = 0;
      return 0;
    }
    if (!v)
      snprintf(err, errlen, "line %d: %s: '%s' is missing", o->line, where, key);
    else
      snprintf(err, errlen, "line %d: %s: '%s' is %s, not a string", v->line, where, key, jtype(v));
    return 1;
  }
  if (strlen(v->str) >= n) {
    snprintf(err, errlen, "line %d: %s: '%s' is longer than %zu characters", v->line, where, key, n - 1);
    return 1;
  }
  snprintf(buf, n, "%s", v->str);
  return 0;
}

/* A number member in [lo, hi] (whole when whole) into *out; 1 (with err
 * naming the line) when of another type, out of range, or missing and
 * required (absent and optional: *out unchanged). */
static int take_num(const dsv4_json *o, const char *key, double lo, double hi, int whole, int required,
                    const char *where, double *out, char *err, size_t errlen)
{
  const dsv4_json *v = dsv4_json_get(o, key);
  if (!v) {
    if (!required)
      return 0;
    snprintf(err, errlen, "line %d: %s: '%s' is missing (a passing variant needs its times)", o->line, where, key);
    return 1;
  }
  if (v->type != DSV4_JSON_NUM) {
    snprintf(err, errlen, "line %d: %s: '%s' is %s, not a number", v->line, where, key, jtype(v));
    return 1;
  }
  /* range first: a whole-number test casts, which only an in-range value may */
  if (!(v->num >= lo && v->num <= hi) || (whole && (double)(long long)v->num != v->num)) {
    snprintf(err, errlen, "line %d: %s: '%s' is %.16g; it takes %s from %.16g to %.16g", v->line, where, key, v->num,
             whole ? "a whole number" : "a number", lo, hi);
    return 1;
  }
  *out = v->num;
  return 0;
}

/* The largest seed: a JSON number holds every whole number below 2^53. */
#define SEED_MAX 9007199254740991.0

typedef struct {
  const char *name;
  int line, j;
} vname;

static int cmp_vname(const void *a, const void *b)
{
  const vname *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  return c ? c : x->j - y->j;
}

/* Entry e's variants, read from list vs (after the entry's key). */
static int parse_variants(dsv4_lock_entry *e, const dsv4_json *vs, const char *where, char *err, size_t errlen)
{
  if (vs->n && variant_room(e, vs->n)) {
    snprintf(err, errlen, "out of memory");
    return 1;
  }
  for (int j = 0; j < vs->n; j++) {
    const dsv4_json *x = &vs->items[j];
    dsv4_lock_variant v;
    memset(&v, 0, sizeof v);
    char vw[96], gate[24];
    snprintf(vw, sizeof vw, "%s variant %d", where, j + 1);
    if (x->type != DSV4_JSON_OBJ) {
      snprintf(err, errlen, "line %d: %s is %s, not an object", x->line, vw, jtype(x));
      return 1;
    }
    if (take_str(x, "name", v.name, sizeof v.name, 1, vw, err, errlen) ||
        take_str(x, "gate", gate, sizeof gate, 1, vw, err, errlen) ||
        take_str(x, "code", v.code, sizeof v.code, 0, vw, err, errlen) ||
        take_str(x, "reason", v.reason, sizeof v.reason, 0, vw, err, errlen))
      return 1;
    if ((v.gate = dsv4_gate_from_name(gate)) < 0) {
      snprintf(err, errlen, "line %d: %s: unknown gate '%s'", dsv4_json_get(x, "gate")->line, vw, gate);
      return 1;
    }
    /* a pass is ranked by its times: each must be there, a number; a
     * failure's are not used, but a present one is still a number */
    int pass = v.gate == DSV4_GATE_PASS;
    double samples = 0;
    if (take_num(x, "median_us", 0, 1e9, 0, pass, vw, &v.median_us, err, errlen) ||
        take_num(x, "min_us", 0, 1e9, 0, pass, vw, &v.min_us, err, errlen) ||
        take_num(x, "max_us", 0, 1e9, 0, pass, vw, &v.max_us, err, errlen) ||
        take_num(x, "samples", 0, 1e9, 1, 0, vw, &samples, err, errlen))
      return 1;
    v.samples = (int)samples;
    variant_set(&e->v[e->nvariants++], &v);
  }
  if (e->nvariants < 2)
    return 0;
  /* no name twice: sorted, neighbours compared (not each against all) */
  vname *nm = malloc((size_t)e->nvariants * sizeof *nm);
  if (!nm) {
    snprintf(err, errlen, "out of memory");
    return 1;
  }
  for (int j = 0; j < e->nvariants; j++)
    nm[j] = (vname){e->v[j].name, vs->items[j].line, j};
  qsort(nm, (size_t)e->nvariants, sizeof *nm, cmp_vname);
  for (int j = 1; j < e->nvariants; j++)
    if (!strcmp(nm[j].name, nm[j - 1].name)) {
      snprintf(err, errlen, "line %d: %s variant %d repeats variant %s (line %d)", nm[j].line, where, nm[j].j + 1,
               nm[j].name, nm[j - 1].line);
      free(nm);
      return 1;
    }
  free(nm);
  qsort(e->v, (size_t)e->nvariants, sizeof *e->v, cmp_variant);
  return 0;
}

int dsv4_lock_parse(const char *text, size_t len, dsv4_lock *out, char *err, size_t errlen)
{
  char jerr[160];
  memset(out, 0, sizeof *out);
  if (len > DSV4_LOCK_MAX_BYTES) {
    snprintf(err, errlen, "%zu bytes; a lockfile is at most %zu MiB", len, DSV4_LOCK_MAX_BYTES >> 20);
    return -1;
  }
  dsv4_json *root = dsv4_json_parse(text, len, jerr, sizeof jerr);
  if (!root) {
    snprintf(err, errlen, "not JSON: %s", jerr);
    return -1;
  }
  int rc = -1;
  const char *fmt = dsv4_json_str(root, "format", NULL);
  const dsv4_json *entries = dsv4_json_get(root, "entries");
  if (!fmt || strcmp(fmt, DSV4_LOCK_FORMAT)) {
    const dsv4_json *f = dsv4_json_get(root, "format");
    snprintf(err, errlen, "line %d: format is '%s', not '%s'", f ? f->line : root->line, fmt ? fmt : "(missing)",
             DSV4_LOCK_FORMAT);
    goto done;
  }
  if (!entries || entries->type != DSV4_JSON_ARR) {
    snprintf(err, errlen, "line %d: 'entries' is %s, not a list", entries ? entries->line : root->line,
             entries ? jtype(entries) : "missing");
    goto done;
  }
  for (int i = 0; i < entries->n; i++) {
    const dsv4_json *o = &entries->items[i];
    char where[64];
    snprintf(where, sizeof where, "entry %d", i + 1);
    dsv4_lock_key k;
    memset(&k, 0, sizeof k);
    if (o->type != DSV4_JSON_OBJ) {
      snprintf(err, errlen, "line %d: %s is %s, not an object", o->line, where, jtype(o));
      goto done;
    }
    if (take_str(o, "kernel", k.kernel, sizeof k.kernel, 1, where, err, errlen) ||
        take_str(o, "op", k.op, sizeof k.op, 1, where, err, errlen) ||
        take_str(o, "target", k.target, sizeof k.target, 1, where, err, errlen) ||
        take_str(o, "arch", k.arch, sizeof k.arch, 1, where, err, errlen) ||
        take_str(o, "device", k.device, sizeof k.device, 1, where, err, errlen) ||
        take_str(o, "toolchain", k.toolchain, sizeof k.toolchain, 1, where, err, errlen) ||
        take_str(o, "spec_hash", k.spec_hash, sizeof k.spec_hash, 1, where, err, errlen) ||
        take_str(o, "bucket", k.bucket, sizeof k.bucket, 1, where, err, errlen))
      goto done;
    /* a known op's bucket: the runtime's check, and one text a bucket (two
     * spellings of one bucket would be two entries) */
    int op = dsv4_tune_op_from_name(k.op);
    if (op) {
      dsv4_shape s;
      char why[300], canon[DSV4_LOCK_TEXT];
      int bl = dsv4_json_get(o, "bucket")->line;
      if (dsv4_shape_parse(op, k.bucket, &s)) {
        const char *const *names;
        int m = dsv4_shape_names(op, &names);
        char form[120] = "";
        for (int d = 0, at = 0; d < m; d++)
          at += snprintf(form + at, sizeof form - (size_t)at, "%s%s=N", d ? "," : "", names[d]);
        snprintf(err, errlen, "line %d: %s: bucket '%s' is not op %s's %s", bl, where, k.bucket, k.op, form);
        goto done;
      }
      if (dsv4_shape_check_bucket(&s, why, sizeof why)) {
        snprintf(err, errlen, "line %d: %s: bucket '%s': %s", bl, where, k.bucket, why);
        goto done;
      }
      dsv4_shape_format(&s, canon, sizeof canon);
      if (strcmp(canon, k.bucket)) {
        snprintf(err, errlen, "line %d: %s: bucket '%s' is written '%s'", bl, where, k.bucket, canon);
        goto done;
      }
    }
    int before = out->n;
    dsv4_lock_entry *e = dsv4_lock_find(out, &k, 1);
    if (!e) {
      snprintf(err, errlen, "out of memory");
      goto done;
    }
    if (out->n == before) {
      snprintf(err, errlen, "line %d: %s repeats the key of an earlier entry (kernel %s, bucket %s)", o->line, where,
               k.kernel, k.bucket);
      goto done;
    }
    double seed = 0;
    if (take_str(o, "shape", e->shape, sizeof e->shape, 0, where, err, errlen) ||
        take_num(o, "seed", 0, SEED_MAX, 1, 0, where, &seed, err, errlen))
      goto done;
    e->seed = (long long)seed;
    const dsv4_json *vs = dsv4_json_get(o, "variants");
    if (!vs || vs->type != DSV4_JSON_ARR) {
      if (vs)
        snprintf(err, errlen, "line %d: %s: 'variants' is %s, not a list", vs->line, where, jtype(vs));
      else
        snprintf(err, errlen, "line %d: %s: 'variants' is missing", o->line, where);
      goto done;
    }
    if (parse_variants(e, vs, where, err, errlen))
      goto done;
    dsv4_lock_decide(e);
  }
  rc = 0;
done:
  dsv4_json_free(root);
  if (rc)
    dsv4_lock_free(out);
  return rc;
}

int dsv4_lock_read(const char *path, dsv4_lock *out, char *err, size_t errlen)
{
  char *text;
  size_t len;
  memset(out, 0, sizeof *out);
  if (dsv4_tune_read_file_max(path, DSV4_LOCK_MAX_BYTES, &text, &len)) {
    if (errno == EFBIG)
      snprintf(err, errlen, "%s: larger than a lockfile may be (%zu MiB)", path, DSV4_LOCK_MAX_BYTES >> 20);
    else if (errno == EINVAL)
      snprintf(err, errlen, "%s: not a regular file", path);
    else
      snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
    return -1;
  }
  char e2[400];
  int rc = dsv4_lock_parse(text, len, out, e2, sizeof e2);
  if (rc)
    snprintf(err, errlen, "%s: %s", path, e2);
  free(text);
  return rc;
}

int dsv4_lock_write(const char *path, dsv4_lock *l)
{
  size_t n;
  char *s = dsv4_lock_format(l, &n);
  if (!s) {
    errno = ENOMEM;
    return -1;
  }
  int rc = dsv4_tune_write_file(path, s, n);
  free(s);
  return rc;
}

/* ---- merging ------------------------------------------------------------------------- */

/* The variant merging keeps of a and b (see lock.h). */
static const dsv4_lock_variant *pick(const dsv4_lock_variant *a, const dsv4_lock_variant *b)
{
  int ra = gate_rank(a->gate), rb = gate_rank(b->gate);
  if (ra != rb)
    return ra > rb ? a : b;
  dsv4_text ta = {0}, tb = {0};
  dsv4_lock_variant_text(a, &ta);
  dsv4_lock_variant_text(b, &tb);
  int c = ta.s && tb.s ? strcmp(ta.s, tb.s) : 0;
  free(ta.s), free(tb.s);
  return c <= 0 ? a : b;
}

static int cmp_variant_pick(const void *a, const void *b)
{
  const dsv4_lock_variant *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  if (c)
    return c;
  const dsv4_lock_variant *p = pick(x, y); /* one name: the kept one first */
  return p == x ? (pick(y, x) == y ? 0 : -1) : 1;
}

/* f's variants into e: both lists sorted by name together, each name kept
 * once (pick), so an entry of m variants merges in O(m log m), not m^2. */
static int merge_variants(dsv4_lock_entry *e, const dsv4_lock_entry *f)
{
  if (!f->nvariants)
    return 0;
  if (variant_room(e, f->nvariants))
    return -1;
  for (int k = 0; k < f->nvariants; k++)
    variant_set(&e->v[e->nvariants++], &f->v[k]);
  qsort(e->v, (size_t)e->nvariants, sizeof *e->v, cmp_variant_pick);
  int m = 0;
  for (int k = 0; k < e->nvariants; k++)
    if (!m || strcmp(e->v[m - 1].name, e->v[k].name))
      e->v[m++] = e->v[k]; /* the first of a name is the one pick keeps */
  e->nvariants = m;
  return 0;
}

int dsv4_lock_merge(dsv4_lock *into, const dsv4_lock *from)
{
  for (int i = 0; i < from->n; i++) {
    const dsv4_lock_entry *f = &from->e[i];
    int before = into->n;
    dsv4_lock_entry *e = dsv4_lock_find(into, &f->key, 1);
    if (!e)
      return -1;
    if (into->n > before) {
      snprintf(e->shape, sizeof e->shape, "%s", f->shape);
      e->seed = f->seed;
    } else {
      if (f->seed < e->seed)
        e->seed = f->seed;
      if (strcmp(f->shape, e->shape) < 0)
        snprintf(e->shape, sizeof e->shape, "%s", f->shape);
    }
    if (merge_variants(e, f))
      return -1;
    dsv4_lock_decide(e);
  }
  return 0;
}
