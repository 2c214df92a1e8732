/* tuned.c -- the sweep manifest, the toolchain line and tuned builds (see
 * tuned.h and docs/tuning.md). */
#include "tuned.h"

#include "bucket.h"
#include "caps.h" /* dsv4_target_build_of: the LLVM and translator of a target */
#include "sha256.h"
#include "text.h"

#include <llvm/Config/llvm-config.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef DSV4C_VERSION
#define DSV4C_VERSION "0.1.0"
#endif
#ifndef DSV4C_LLVM15_VERSION
#define DSV4C_LLVM15_VERSION "15"
#endif

void dsv4_toolchain(dsv4_target_kind t, char *buf, size_t n)
{
  const dsv4_target_build *b = dsv4_target_build_of(t);
  const char *llvm = b->llvm == DSV4_LLVM_SPIRV ? DSV4C_LLVM15_VERSION : LLVM_VERSION_STRING;
  snprintf(buf, n, "dsv4c %s, LLVM %s%s%s", DSV4C_VERSION, llvm, b->translator ? ", " : "",
           b->translator ? b->translator : "");
}

static void warn(dsv4_diags *d, const char *file, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void warn(dsv4_diags *d, const char *file, const char *fmt, ...)
{
  dsv4_diag g;
  memset(&g, 0, sizeof g);
  g.sev = DSV4_SEV_WARNING;
  snprintf(g.file, sizeof g.file, "%s", file);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g.msg, sizeof g.msg, fmt, ap);
  va_end(ap);
  dsv4_diag_add(d, &g);
}

/* The job that compiled kernel k for target t (NULL if none did). */
static const dsv4_job *job_of(const dsv4_job *jobs, int n, const dsv4_kernel *k, dsv4_target_kind t)
{
  for (int i = 0; i < n; i++)
    if (jobs[i].kernel == k && jobs[i].target == t && !jobs[i].failed)
      return &jobs[i];
  return NULL;
}

static void code_hash(const dsv4_artifact *a, char hex[65]) { dsv4_sha256_hex(a->code, a->code_len, hex); }

char *dsv4_sweep_manifest(const dsv4_plan *p, const char *spec, const dsv4_job *jobs, int njobs, size_t *len)
{
  dsv4_text t = {0};
  const char *base = strrchr(spec, '/');
  dsv4_text_printf(&t, "{\n  \"format\": \"%s\",\n  \"spec\": ", DSV4_SWEEP_FORMAT);
  dsv4_text_json_str(&t, base ? base + 1 : spec);
  dsv4_text_printf(&t, ",\n  \"spec_hash\": \"%s\",\n  \"toolchain\": {", p->spec_hash);
  for (int tg = 0; tg < DSV4_TARGET_COUNT; tg++) {
    char tc[160];
    dsv4_toolchain((dsv4_target_kind)tg, tc, sizeof tc);
    dsv4_text_printf(&t, "%s\"%s\": ", tg ? ", " : "", dsv4_target_name((dsv4_target_kind)tg));
    dsv4_text_json_str(&t, tc);
  }
  dsv4_text_printf(&t, "},\n  \"sweeps\": [");
  for (int s = 0; s < p->nsweeps; s++) {
    const dsv4_sweep *sw = &p->sweeps[s];
    dsv4_text_printf(&t, "%s\n    {\n      \"kernel\": ", s ? "," : "");
    dsv4_text_json_str(&t, sw->kernel);
    dsv4_text_printf(&t, ", \"op\": \"%s\",\n      \"fields\": [", dsv4_op_name(sw->op));
    for (int f = 0; f < sw->nparams; f++) {
      dsv4_text_printf(&t, "%s{\"field\": \"%s\", \"tag\": \"%s\", \"values\": [", f ? ", " : "", sw->param[f].field,
                       sw->param[f].tag);
      for (int v = 0; v < sw->param[f].nvalues; v++) {
        dsv4_text_printf(&t, "%s", v ? ", " : "");
        dsv4_text_json_str(&t, sw->param[f].value[v]);
      }
      dsv4_text_printf(&t, "]}");
    }
    dsv4_text_printf(&t, "],\n      \"variants\": [");
    for (int i = 0; i < sw->nvariants; i++) {
      const dsv4_variant *var = &p->variants[sw->first + i];
      dsv4_text_printf(&t, "%s\n        {\"name\": \"%s\", \"values\": [", i ? "," : "", var->name);
      for (int f = 0; f < sw->nparams; f++) {
        dsv4_text_printf(&t, "%s", f ? ", " : "");
        dsv4_text_json_str(&t, sw->param[f].value[var->value[f]]);
      }
      /* expanded and built (-k builds only some): the variants the bundle holds */
      int built = 0;
      for (int tg = 0; var->kernel >= 0 && tg < DSV4_TARGET_COUNT; tg++)
        built |= job_of(jobs, njobs, &p->kernels[var->kernel], (dsv4_target_kind)tg) != NULL;
      dsv4_text_printf(&t, "], \"expanded\": %s", built ? "true" : "false");
      if (built) {
        const dsv4_kernel *k = &p->kernels[var->kernel];
        dsv4_text_printf(&t, ", \"code\": {");
        int any = 0;
        for (int tg = 0; tg < DSV4_TARGET_COUNT; tg++) {
          const dsv4_job *j = job_of(jobs, njobs, k, (dsv4_target_kind)tg);
          if (!j)
            continue;
          char hex[65];
          code_hash(&j->art, hex);
          dsv4_text_printf(&t, "%s\"%s\": {\"arch\": \"%s\", \"sha256\": \"%s\"}", any++ ? ", " : "",
                           dsv4_target_name((dsv4_target_kind)tg), k->target[tg].arch, hex);
        }
        dsv4_text_printf(&t, "}");
      } else {
        dsv4_text_printf(&t, ", \"reason\": ");
        dsv4_text_json_str(&t, var->kernel >= 0 ? "not built (dsv4c -k or -t left it out)" : var->reason);
      }
      dsv4_text_printf(&t, "}");
    }
    dsv4_text_printf(&t, "\n      ]\n    }");
  }
  dsv4_text_printf(&t, "%s]\n}\n", p->nsweeps ? "\n  " : "");
  if (t.failed) {
    free(t.s);
    return NULL;
  }
  *len = t.n;
  return t.s;
}

/* The kernel of p named name, or -1. */
static int kernel_index(const dsv4_plan *p, const char *name)
{
  for (int i = 0; i < p->nkernels; i++)
    if (!strcmp(p->kernels[i].name, name))
      return i;
  return -1;
}

/* Whether kernel k is a variant of sweep s. */
static int in_sweep(const dsv4_plan *p, int s, int k)
{
  const dsv4_sweep *sw = &p->sweeps[s];
  for (int i = sw->first; i < sw->first + sw->nvariants; i++)
    if (p->variants[i].kernel == k)
      return 1;
  return 0;
}

static int sweep_index(const dsv4_plan *p, const char *kernel)
{
  for (int s = 0; s < p->nsweeps; s++)
    if (!strcmp(p->sweeps[s].kernel, kernel))
      return s;
  return -1;
}

/* "kernel sd, ptx sm_90a, NVIDIA H100, bucket T=8,..." */
static void describe(const dsv4_lock_entry *e, char *buf, size_t n)
{
  snprintf(buf, n, "kernel %s, %s %s, %s, bucket %s", e->key.kernel, e->key.target, e->key.arch, e->key.device,
           e->key.bucket);
}

/* Keep, of sweep sw, every variant the untuned default rule could run
 * for a call on some target: the first of each key it goes by (the form
 * on that target, and tokens_per_cta where dsv4_rule_sees_tokens_per_cta).
 * Without them a call outside every tuned bucket would get the rule's
 * pick among the winners alone, which can be a kernel the untuned bundle
 * never ran there (issue 40: a 2048-wide list, tuned for none, ran a
 * winner of another bucket 12% slower than the untuned rule's kernel). */
static void keep_rule_picks(const dsv4_plan *p, int sw, unsigned char *keep)
{
  const dsv4_sweep *s = &p->sweeps[sw];
  for (int i = s->first; i < s->first + s->nvariants; i++) {
    int k = p->variants[i].kernel;
    if (k < 0)
      continue;
    for (int t = 0; t < DSV4_TARGET_COUNT; t++) {
      const dsv4_kernel *a = &p->kernels[k];
      if (!a->target[t].enabled)
        continue;
      int form = a->launch[t].form, tpc = dsv4_rule_sees_tokens_per_cta(a->op, form), first = 1;
      for (int j = s->first; j < i && first; j++) {
        const dsv4_kernel *o = p->variants[j].kernel >= 0 ? &p->kernels[p->variants[j].kernel] : NULL;
        first = !o || !o->target[t].enabled || (int)o->launch[t].form != form ||
                (tpc && o->tile.tokens_per_cta != a->tile.tokens_per_cta);
      }
      if (first)
        keep[k] = 1;
    }
  }
}

int dsv4_tuned_select(const dsv4_plan *p, const char *lock_path, unsigned targets, unsigned char *keep,
                      dsv4_lock *fresh, dsv4_diags *d)
{
  char err[512];
  dsv4_lock all;
  memset(fresh, 0, sizeof *fresh);
  if (dsv4_lock_read(lock_path, &all, err, sizeof err)) {
    dsv4_error(d, lock_path, 0, "%s", err);
    return 1;
  }
  for (int i = 0; i < p->nkernels; i++)
    keep[i] = !dsv4_plan_variant(p, p->kernels[i].name);
  int stale = 0, used = 0, none = 0;
  for (int i = 0; i < all.n; i++) {
    dsv4_lock_entry *e = &all.e[i];
    char what[600], tc[160], why[400] = "";
    describe(e, what, sizeof what);
    int t = dsv4_target_from_name(e->key.target);
    if (t < 0) {
      warn(d, lock_path, "stale entry (%s): unknown target '%s'; not used", what, e->key.target), stale++;
      continue;
    }
    if (targets && !(targets & (1u << t)))
      continue; /* another target than the ones built: not this build's concern */
    dsv4_toolchain((dsv4_target_kind)t, tc, sizeof tc);
    int s = sweep_index(p, e->key.kernel), k = e->winner[0] ? kernel_index(p, e->winner) : -1;
    if (strcmp(e->key.spec_hash, p->spec_hash))
      snprintf(why, sizeof why, "the spec (or a file it includes) changed since it was tuned (the entry's spec hash "
               "%.12s..., the spec's %.12s...)", e->key.spec_hash, p->spec_hash);
    else if (strcmp(e->key.toolchain, tc))
      snprintf(why, sizeof why, "it was tuned with another toolchain (%s; this is %s)", e->key.toolchain, tc);
    else if (s < 0)
      snprintf(why, sizeof why, "the spec has no sweep named '%s'", e->key.kernel);
    else if (e->winner[0] && (k < 0 || !in_sweep(p, s, k)))
      snprintf(why, sizeof why, "its winner '%s' is %s", e->winner,
               k < 0 ? "not a kernel of the spec (not in the bundle)" : "not a variant of that sweep");
    else if (e->winner[0] && (!p->kernels[k].target[t].enabled || strcmp(p->kernels[k].target[t].arch, e->key.arch)))
      snprintf(why, sizeof why, "its winner '%s' is not built for %s %s", e->winner, e->key.target, e->key.arch);
    if (why[0]) {
      warn(d, lock_path, "stale entry (%s): %s; not used", what, why);
      stale++;
      continue;
    }
    if (!e->winner[0]) { /* every variant failed its gate: nothing to choose */
      warn(d, lock_path, "entry (%s) has no winner (no variant passed its gate); that shape keeps the default kernel",
           what);
      none++;
      continue;
    }
    /* merged into fresh: the entry as it is (its shape and seed too) */
    if (dsv4_lock_merge(fresh, &(dsv4_lock){1, 1, e, NULL, 0, 0})) {
      dsv4_error(d, lock_path, 0, "out of memory");
      dsv4_lock_free(&all);
      return 1;
    }
    keep[k] = 1;
    used++;
  }
  dsv4_lock_free(&all);
  /* every sweep keeps, beside its winners, the variants the untuned
   * default rule could run (its op, layout and target keep a kernel; a
   * call outside every tuned bucket runs the untuned rule's pick); each
   * kernel compiled is one the bundle holds */
  for (int sw = 0; sw < p->nsweeps; sw++)
    keep_rule_picks(p, sw, keep);
  if (stale)
    warn(d, lock_path, "%d of the lockfile's entries are stale and not used (tune again: dsv4c-tune)", stale);
  (void)used, (void)none;
  return 0;
}

int dsv4_tuned_verify(const dsv4_plan *p, const char *lock_path, const dsv4_job *jobs, int njobs, unsigned char *keep,
                      dsv4_lock *fresh, dsv4_diags *d)
{
  unsigned char stale_code[DSV4_MAX_KERNELS] = {0}; /* winners compiled whose code is not the code measured */
  for (int i = 0; i < fresh->n; i++) {
    dsv4_lock_entry *e = &fresh->e[i];
    int k = kernel_index(p, e->winner), t = dsv4_target_from_name(e->key.target);
    const dsv4_job *j = k >= 0 && t >= 0 ? job_of(jobs, njobs, &p->kernels[k], (dsv4_target_kind)t) : NULL;
    const dsv4_lock_variant *v = dsv4_lock_variant_find(e, e->winner);
    char hex[65] = "", what[600];
    if (j)
      code_hash(&j->art, hex);
    if (!j || !v || strcmp(v->code, hex)) {
      describe(e, what, sizeof what);
      if (!j) /* -k or -t left the winner out: not this build's concern, but said */
        warn(d, lock_path, "entry (%s): its winner '%s' is not built (dsv4c -k or -t left it out); not used", what,
             e->winner);
      else {
        warn(d, lock_path, "stale entry (%s): %s's compiled code differs from the code that was measured (the code "
             "generator changed); not used", what, e->winner);
        stale_code[k] = 1;
      }
      free(e->v);
      memmove(e, e + 1, (size_t)(fresh->n - i - 1) * sizeof *e);
      fresh->n--, i--;
      dsv4_lock_unindex(fresh);
      continue;
    }
  }
  /* a stale winner no fresh entry names: still in the bundle (it was
   * compiled, and -v said so), untuned: no choice record names it */
  for (int sw = 0; sw < p->nsweeps; sw++) {
    const dsv4_sweep *s = &p->sweeps[sw];
    for (int i = s->first; i < s->first + s->nvariants; i++) {
      int k = p->variants[i].kernel, named = 0;
      if (k < 0 || !keep[k] || !stale_code[k])
        continue;
      for (int x = 0; x < fresh->n && !named; x++)
        named = !strcmp(fresh->e[x].winner, p->kernels[k].name);
      if (!named)
        warn(d, lock_path, "sweep %s: %s stays in the bundle untuned (its entries are stale; the default rule may "
             "run it)", s->kernel, p->kernels[k].name);
    }
  }
  return fresh->n;
}

int dsv4_tuned_choices(const dsv4_lock *fresh, const dsv4_bundle_item *items, int n, const char *lock_path,
                       dsv4_bundle_choice **out, int *nout, dsv4_diags *d)
{
  *out = NULL, *nout = 0;
  if (!fresh->n)
    return 0;
  dsv4_bundle_choice *c = calloc((size_t)fresh->n, sizeof *c);
  if (!c) {
    dsv4_error(d, lock_path, 0, "out of memory");
    return 1;
  }
  int nc = 0;
  for (int i = 0; i < fresh->n; i++) {
    dsv4_lock_entry *e = &fresh->e[i];
    int t = dsv4_target_from_name(e->key.target), op = dsv4_tune_op_from_name(e->key.op), entry = -1;
    for (int k = 0; k < n && entry < 0; k++)
      if ((int)items[k].target == t && !strcmp(items[k].kernel->name, e->winner))
        entry = k;
    const dsv4_lock_variant *v = dsv4_lock_variant_find(e, e->winner);
    dsv4_shape s;
    char what[600];
    describe(e, what, sizeof what);
    char bw[300] = "", absent[120];
    snprintf(absent, sizeof absent, "its winner '%s' is not in the bundle", e->winner);
    const char *why = entry < 0 || !v                                  ? absent
                      : !op || (int)items[entry].kernel->op != op ||
                                dsv4_shape_parse(op, e->key.bucket, &s) ? "its op or bucket is not the winner's"
                      : dsv4_shape_check_bucket(&s, bw, sizeof bw) ? bw /* what the bundle reader checks */
                      : !e->key.device[0] || strlen(e->key.device) >= DSV4_CHOICE_DEVICE
                          ? "its device model is empty or longer than a choice record holds (95 bytes)"
                      : nc == DSV4_BUNDLE_MAX_CHOICES ? "the bundle holds no more choice records"
                                                      : NULL;
    if (why) {
      warn(d, lock_path, "entry (%s): %s; not in the bundle's choices (dsv4rt_bundle_load_tuning still takes it)",
           what, why);
      continue;
    }
    dsv4_bundle_choice *r = &c[nc++];
    snprintf(r->device, sizeof r->device, "%s", e->key.device);
    r->op = (uint32_t)op, r->entry = (uint32_t)entry, r->ndims = (uint32_t)s.n;
    for (int k = 0; k < s.n && k < DSV4_CHOICE_DIMS; k++)
      r->bucket[k] = s.dim[k];
    r->median_ps = (uint64_t)llround(v->median_us * 1e6);
  }
  *out = c, *nout = nc;
  return 0;
}
