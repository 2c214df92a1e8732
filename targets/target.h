/* target.h -- one hook table per target.
 *
 * A dsv4_target pairs the IR hooks the generators use (kb.h's
 * dsv4_target_ir) with how the target turns a kernel plan into a validated
 * artifact.  The CLI and the bundle writer see only this table.
 */
#ifndef DSV4_TARGET_H
#define DSV4_TARGET_H

#include <stddef.h>

#include "../compiler/artifact.h"
#include "../compiler/diag.h"
#include "../compiler/plan.h"

typedef struct dsv4_target_ir dsv4_target_ir;


typedef struct dsv4_target {
  dsv4_target_kind kind;
  const dsv4_target_ir *ir; /* NULL where the IR is built in a helper process */
  /* Generate, emit and validate kernel k for this target; the artifact is
   * only filled when every check passed.  0 on success. */
  int (*compile)(const struct dsv4_target *t, const dsv4_kernel *k, unsigned want, dsv4_artifact *a,
                 dsv4_diags *d);
} dsv4_target;

const dsv4_target *dsv4_target_get(dsv4_target_kind kind);
/* What the in-process targets need set up once per process (LLVM's target
 * registry and options): called before compiling on several threads. */
void dsv4_targets_init(void);
/* The SPIRV-Tools release SPIR-V is validated with (dsv4c --version). */
const char *dsv4_spirv_tools_version(void);

/* ---- helpers shared by the target files (tool.c) ---- */

/* Run argv (argv[0] searched in PATH), feeding `in`, capturing stdout and
 * stderr into malloc'd buffers.  Returns the exit status, or -1 if it could
 * not run (message in *err_out) and 128+sig on a signal. */
int dsv4_run_tool(char *const argv[], const void *in, size_t in_len, unsigned char **out, size_t *out_len,
                  char **err_out);
/* First of the candidate program names found in PATH or as a path; NULL if none. */
const char *dsv4_find_tool(const char *const *candidates, char *buf, size_t n);
/* Make a private temporary directory; returns 0 and fills dir. */
int dsv4_tmpdir(char *dir, size_t n);
void dsv4_rmtree_flat(const char *dir);
int dsv4_write_file(const char *path, const void *p, size_t n);
int dsv4_read_file(const char *path, unsigned char **p, size_t *n);

#endif
