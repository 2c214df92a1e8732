/* spec.h -- Lua spec -> checked plan.
 *
 * The only boundary between Lua and C: the spec runs once in a sandboxed
 * Lua 5.4 state (base, string, table and math libraries, plus layout{},
 * kernel{} and include()), then C walks the resulting tables, checks every
 * field and copies it into a dsv4_plan.  Nothing calls back into Lua later.
 */
#ifndef DSV4_SPEC_H
#define DSV4_SPEC_H

#include "diag.h"
#include "plan.h"

/* Bounds on running a spec (0 or NULL: the default).  The defaults are
 * far above what real specs take: specs/ runs in well under a million
 * instructions and a few MB. */
#define DSV4_SPEC_MAX_INSTRUCTIONS 100000000LL /* VM instructions + library work (spec/sandbox.h) */
#define DSV4_SPEC_MAX_MEMORY (256LL << 20)     /* bytes the Lua state may hold */
#define DSV4_SPEC_MAX_INCLUDE_DIRS 16
typedef struct {
  long long max_instructions;
  long long max_memory;
  const char *const *include_dirs; /* -I: searched after the including file's folder */
  int ninclude_dirs;
} dsv4_spec_opts;

/* Run and check the spec at path into *plan, bounded by opts (NULL: the
 * defaults).  Returns 0 on success; on failure returns nonzero with errors
 * (file:line, naming the field or the limit) in *d.  The caller owns plan
 * and d; nothing is allocated that outlives the call. */
int dsv4_spec_load(const char *path, const dsv4_spec_opts *opts, dsv4_plan *plan, dsv4_diags *d);

/* Check a layout and a kernel's tile against its targets; used by
 * dsv4_spec_load and by tools that build plans in C (sweeps). */
int dsv4_layout_check(const dsv4_layout *l, const char *file, dsv4_diags *d);

/* Print the plan in a stable text form (--emit plan) into a malloc'd
 * string the caller frees. */
char *dsv4_plan_dump(const dsv4_plan *plan);

#endif
