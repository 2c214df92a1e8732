/* sandbox.h -- the Lua sandbox a spec runs in (internal to the front end).
 *
 * One state per spec: the base, string, table and math libraries less
 * everything that reaches outside (files, code loading, printing) or
 * whose work no budget can bound (pattern matching), plus layout{},
 * kernel{} and include().  Every run is bounded:
 *   - an instruction budget: Lua VM instructions, plus the work of the
 *     library functions (a unit an element of a table they are given or
 *     16 bytes of a string), plus a unit for every 64 bytes allocated;
 *   - a memory cap on everything the state holds;
 * and a spec cannot catch the error that ends it for exceeding either.
 * include() resolves only inside the spec's own folder and the -I
 * folders, once per file, and names the files of a cycle.  Every file
 * (the spec and what it includes) must be a regular file; it is opened
 * once, without blocking, read through that descriptor (an include: the
 * resolved path, checked to be the file opened), and its text is kept
 * for the checker (positions) and the spec's hash.  Once the spec has
 * run, kernel{} is an error (a sweep constraint must not declare one).
 */
#ifndef DSV4_SPEC_SANDBOX_H
#define DSV4_SPEC_SANDBOX_H

#include <lua.h>

#include "diag.h"
#include "spec.h"

#define DSV4_SPEC_POS_KEY "dsv4.pos"         /* registry: table -> {file, line} */
#define DSV4_SPEC_KERNELS_KEY "dsv4.kernels" /* registry: list of kernel tables */
#define DSV4_SPEC_INCLUDED_KEY "dsv4.included" /* registry: real path of each included file -> its value */
#define DSV4_SPEC_SOURCES_KEY "dsv4.sources"   /* registry: each file run, as named (chunk name) -> its text */
#define DSV4_SPEC_TEXTS_KEY "dsv4.texts"       /* registry: real path of each included file -> its text */
#define DSV4_SPEC_LAYOUTS_KEY "dsv4.layouts"   /* registry: list of the tables layout{} made */

typedef struct dsv4_sandbox dsv4_sandbox;

/* A fresh sandbox for the spec at path (its folder and opts' -I folders
 * bound include()); NULL with an error in *d when it cannot be made.
 * Freed with dsv4_sandbox_close. */
dsv4_sandbox *dsv4_sandbox_open(const char *path, const dsv4_spec_opts *opts, dsv4_diags *d);
void dsv4_sandbox_close(dsv4_sandbox *s);
lua_State *dsv4_sandbox_state(dsv4_sandbox *s);

/* Run the spec file; 0 on success, else 1 with a positioned error in *d. */
int dsv4_sandbox_run(dsv4_sandbox *s, const char *path, dsv4_diags *d);

/* Call f(ud) protected and bounded like the spec itself (for the checker,
 * which may reach the spec's metamethods); f returns an integer result,
 * stored in *result.  0 on success, else 1 with an error in *d. */
int dsv4_sandbox_call(dsv4_sandbox *s, lua_CFunction f, void *ud, int *result, dsv4_diags *d);

#endif
