/* ops.c -- the ops' rows of rules (ops.h), indexed by op from DSV4_OPS. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ops.h"

const dsv4_op_rules *dsv4_op_rules_of(dsv4_op op)
{
  static const dsv4_op_rules *const rows[DSV4_OP_COUNT] = {
#define X(e, s, d) [DSV4_OP_##e] = &dsv4_rules_##e,
      DSV4_OPS(X)
#undef X
  };
  return (unsigned)op < DSV4_OP_COUNT ? rows[op] : NULL;
}

const dsv4_tile_field *dsv4_tile_field_of(dsv4_op op, const char *name)
{
  const dsv4_op_rules *r = dsv4_op_rules_of(op);
  for (const dsv4_tile_field *f = r ? r->tile : NULL; f && f->name; f++)
    if (!strcmp(f->name, name))
      return f;
  return NULL;
}

int dsv4_op_kernel_fields(const char **names, int n, int max)
{
  for (int o = 1; o < DSV4_OP_COUNT; o++)
    for (const char *const *f = dsv4_op_rules_of((dsv4_op)o)->fields; f && *f && n < max; f++)
      names[n++] = *f;
  return n;
}

int dsv4_reject(dsv4_report *r, const char *field, const char *fmt, ...)
{
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  r->error(r, field, msg);
  return 1;
}

int dsv4_tile_threads_check(const dsv4_kernel *k, dsv4_report *r)
{
  const dsv4_tile_field *f = dsv4_op_rules_of(k->op)->tile;
  while (f->name && f->slot != DSV4_TILE_SLOT(tokens_per_cta)) /* the field that sets the CTA's size */
    f++;
  char field[48];
  snprintf(field, sizeof field, "tile.%s", f->name ? f->name : "tokens_per_cta");
  for (int i = 0; i < DSV4_TARGET_COUNT; i++) {
    if (!k->target[i].enabled)
      continue;
    int mx = dsv4_target_max_threads((dsv4_target_kind)i);
    int w = dsv4_kernel_warp(k, (dsv4_target_kind)i);
    if (k->tile.threads > mx)
      return dsv4_reject(r, field, "gives %d threads per CTA, more than target '%s' allows (%d)", k->tile.threads,
                         dsv4_target_name((dsv4_target_kind)i), mx);
    if (k->tile.threads % w)
      return dsv4_reject(r, field, "gives %d threads per CTA, not a multiple of target '%s' %s width %d",
                         k->tile.threads, dsv4_target_name((dsv4_target_kind)i), k->target[i].arch, w);
  }
  return 0;
}
