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
