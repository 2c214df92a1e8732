/* plan.c -- name tables for ops and targets, defined once by X-macros.
 * What each target and arch can do is targets/caps.c's table. */
#include "plan.h"

#include <stdio.h>
#include <string.h>

#include "dsv4_abi.h"

static const char *const op_names[] = {
    "none",
#define X(e, s, d) s,
    DSV4_OPS(X)
#undef X
};

const char *dsv4_op_name(dsv4_op op)
{
  return (op > 0 && op < DSV4_OP_COUNT) ? op_names[op] : "none";
}

dsv4_op dsv4_op_from_name(const char *s)
{
  for (int i = 1; i < DSV4_OP_COUNT; i++)
    if (strcmp(op_names[i], s) == 0)
      return (dsv4_op)i;
  return DSV4_OP_NONE;
}

static const struct {
  const char *name, *ext, *arch;
} targets[] = {
#define X(e, s, x, a) {s, x, a},
    DSV4_TARGETS(X)
#undef X
};

const char *dsv4_target_name(dsv4_target_kind t) { return targets[t].name; }
const char *dsv4_target_ext(dsv4_target_kind t) { return targets[t].ext; }
const char *dsv4_target_default_arch(dsv4_target_kind t) { return targets[t].arch; }

int dsv4_target_from_name(const char *s)
{
  for (int i = 0; i < DSV4_TARGET_COUNT; i++)
    if (strcmp(targets[i].name, s) == 0)
      return i;
  return -1;
}

/* The argument list of an op, from the one definition in dsv4_abi.h. */
int dsv4_op_signature(dsv4_op op, unsigned char *kinds, const char **names)
{
  int n = dsv4_op_args(op, kinds, names);
  return n < 0 ? 0 : n;
}
