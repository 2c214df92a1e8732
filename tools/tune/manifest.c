/* manifest.c -- the sweep manifest (<spec>.sweep.json, written by dsv4c
 * -o beside a sweep's bundle: compiler/tuned.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "json.h"
#include "tune.h"

static int cmp_variant(const void *a, const void *b)
{
  return strcmp(((const tune_variant *)a)->name, ((const tune_variant *)b)->name);
}

static void copy(char *dst, size_t n, const char *src) { snprintf(dst, n, "%s", src ? src : ""); }

int tune_manifest_read(const char *path, tune_manifest *m, char *err, size_t errlen)
{
  char *text, jerr[200];
  size_t len;
  memset(m, 0, sizeof *m);
  if (dsv4_tune_read_file(path, &text, &len)) {
    snprintf(err, errlen, "cannot read the sweep manifest %s (dsv4c -o writes it beside a sweep's bundle)", path);
    return 1;
  }
  dsv4_json *j = dsv4_json_parse(text, len, jerr, sizeof jerr);
  free(text);
  if (!j) {
    snprintf(err, errlen, "%s: not JSON: %s", path, jerr);
    return 1;
  }
  int rc = 1;
  const char *fmt = dsv4_json_str(j, "format", "");
  const dsv4_json *sweeps = dsv4_json_get(j, "sweeps"), *tc = dsv4_json_get(j, "toolchain");
  if (strcmp(fmt, DSV4_SWEEP_FORMAT) || !sweeps || sweeps->type != DSV4_JSON_ARR) {
    snprintf(err, errlen, "%s: not a sweep manifest (format '%s', expected '%s')", path, fmt, DSV4_SWEEP_FORMAT);
    goto done;
  }
  copy(m->spec, sizeof m->spec, dsv4_json_str(j, "spec", ""));
  copy(m->spec_hash, sizeof m->spec_hash, dsv4_json_str(j, "spec_hash", ""));
  static const char *const targets[3] = {"ptx", "amdgcn", "spirv"};
  for (int t = 0; t < 3; t++)
    copy(m->toolchain[t], sizeof m->toolchain[t], dsv4_json_str(tc, targets[t], ""));
  if (sweeps->n > TUNE_MAX_SWEEPS) {
    snprintf(err, errlen, "%s: more than %d sweeps", path, TUNE_MAX_SWEEPS);
    goto done;
  }
  for (int s = 0; s < sweeps->n; s++) {
    const dsv4_json *o = &sweeps->items[s];
    tune_sweep *sw = &m->s[m->nsweeps++];
    copy(sw->kernel, sizeof sw->kernel, dsv4_json_str(o, "kernel", ""));
    sw->op = dsv4_tune_op_from_name(dsv4_json_str(o, "op", ""));
    const dsv4_json *fields = dsv4_json_get(o, "fields"), *vars = dsv4_json_get(o, "variants");
    if (!sw->kernel[0] || !sw->op || !fields || fields->type != DSV4_JSON_ARR || fields->n > TUNE_MAX_FIELDS || !vars ||
        vars->type != DSV4_JSON_ARR) {
      snprintf(err, errlen, "%s: sweep %d is malformed", path, s + 1);
      goto done;
    }
    sw->nfields = fields->n;
    for (int f = 0; f < fields->n; f++)
      copy(sw->field[f], sizeof sw->field[f], dsv4_json_str(&fields->items[f], "field", ""));
    sw->v = calloc((size_t)(vars->n ? vars->n : 1), sizeof *sw->v);
    if (!sw->v) {
      snprintf(err, errlen, "out of memory");
      goto done;
    }
    for (int i = 0; i < vars->n; i++) {
      const dsv4_json *x = &vars->items[i], *vals = dsv4_json_get(x, "values"), *ex = dsv4_json_get(x, "expanded");
      tune_variant *v = &sw->v[sw->nvariants++];
      copy(v->name, sizeof v->name, dsv4_json_str(x, "name", ""));
      v->expanded = ex && ex->type == DSV4_JSON_BOOL && ex->num != 0;
      copy(v->reason, sizeof v->reason, dsv4_json_str(x, "reason", ""));
      for (int f = 0; vals && vals->type == DSV4_JSON_ARR && f < vals->n && f < TUNE_MAX_FIELDS; f++)
        copy(v->values[f], sizeof v->values[f], vals->items[f].type == DSV4_JSON_STR ? vals->items[f].str : "");
      if (!v->name[0]) {
        snprintf(err, errlen, "%s: sweep %s: variant %d has no name", path, sw->kernel, i + 1);
        goto done;
      }
    }
    qsort(sw->v, (size_t)sw->nvariants, sizeof *sw->v, cmp_variant);
  }
  rc = 0;
done:
  dsv4_json_free(j);
  if (rc)
    tune_manifest_free(m);
  return rc;
}

void tune_manifest_free(tune_manifest *m)
{
  for (int s = 0; s < m->nsweeps; s++)
    free(m->s[s].v);
  memset(m, 0, sizeof *m);
}

const tune_variant *tune_manifest_variant(const tune_manifest *m, const char *name, const tune_sweep **sweep)
{
  for (int s = 0; s < m->nsweeps; s++)
    for (int i = 0; i < m->s[s].nvariants; i++)
      if (!strcmp(m->s[s].v[i].name, name)) {
        if (sweep)
          *sweep = &m->s[s];
        return &m->s[s].v[i];
      }
  return NULL;
}
