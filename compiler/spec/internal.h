/* internal.h -- what the spec checker's files share (compiler/spec/):
 * the checker and its cursor over the spec's Lua tables, and the field
 * readers every rule uses.  Not a public header: spec.h is.
 *
 *   cursor.c  source text, field positions, reading typed fields
 *   layout.c  layout{} tables into dsv4_layout, and the layout rules
 *   kernel.c  kernel{} tables: targets, the tile (read by each op's table and checked by its
 *             rules, compiler/ops/), the kernel fields of each op
 *   sweep.c   a kernel{}'s sweep: its variants, each checked by kernel.c
 *   sandbox.c the bounded Lua sandbox (sandbox.h)
 *   spec.c    dsv4_spec_load: the sandbox, then the checks (each kernel{} table frozen,
 *             then handed to sweep.c or kernel.c: neither calls back into the other's caller)
 *   dump.c    --emit plan
 */
#ifndef DSV4_SPEC_INTERNAL_H
#define DSV4_SPEC_INTERNAL_H

#include <lauxlib.h>
#include <lua.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox.h"
#include "spec.h"
#include "srcpos.h"

#define POS_KEY DSV4_SPEC_POS_KEY
#define KERNELS_KEY DSV4_SPEC_KERNELS_KEY
#define FILES_MAX 16

typedef struct {
  char path[DSV4_PATH_MAX];
  char *text;
  size_t len;
} src_file;

typedef struct {
  lua_State *L;
  dsv4_diags *d;
  dsv4_plan *plan;
  src_file files[FILES_MAX];
  int nfiles;
  int structural; /* errors of the spec's form (an unknown field, a wrong type, a missing field): a sweep
                     variant with one is a spec error, one without is a rejected variant (sweep.c) */
} checker;

/* A place in the spec: the table at stack index idx, built by a call at
 * file:line, reached from that call's table by path. */
typedef struct {
  checker *c;
  int idx;
  const char *file;
  int line;
  const char *what; /* "kernel 'x'" or "layout 'y'" for messages */
  const char *path[8];
  int npath;
} cursor;

/* An error at cursor field `key` naming it by its path. */
#define FERR(k, key, ...)                                                                                  \
  do {                                                                                                     \
    char fb_[128], mb_[512];                                                                               \
    snprintf(mb_, sizeof mb_, __VA_ARGS__);                                                                \
    sc_field_error((k), (key), "%s: field '%s' %s", (k)->what, sc_field_name((k), (key), fb_, sizeof fb_), mb_); \
  } while (0)

/* cursor.c: source text, positions, typed field reads (comments there) */
const src_file *sc_source(checker *c, const char *path);
int sc_field_pos(const cursor *k, const char *key, int *col);
int sc_field_line(const cursor *k, const char *key);
void sc_field_error(const cursor *k, const char *key, const char *fmt, ...) DSV4_PRINTF(3, 4);
const char *sc_field_name(const cursor *k, const char *key, char *buf, size_t n);
void sc_missing(cursor *k, const char *what, const char *key);
int sc_check_known(cursor *k, const char *const *allowed);
int sc_edit_distance(const char *a, const char *b);
int sc_push_field(cursor *k, const char *key);
int sc_get_int(cursor *k, const char *key, int required, long lo, long hi, long def, int32_t *out);
int sc_get_str(cursor *k, const char *key, int required, const char *def, char *buf, size_t n);
int sc_get_bool(cursor *k, const char *key, int def, int32_t *out);
int sc_enter(cursor *k, const char *key, cursor *sub, int required);
void sc_leave(cursor *sub);
int sc_get_dtype(cursor *k, const char *key, int required, unsigned mask, int32_t *out);
int sc_table_pos(checker *c, int idx, char *file, size_t n, int *line);
/* layout.c */
int sc_check_layout_table(checker *c, int idx, const char *owner, dsv4_layout *l);
/* kernel.c: one kernel{} table (sweep.c checks each variant by it; kernel.c
 * calls nothing of sweep.c) */
int sc_check_kernel(checker *c, int idx);
void sc_tile_fields(dsv4_op op, const char **names); /* NULL-ended; DSV4_TILE_FIELDS_MAX + 1 */
/* sweep.c: whether the kernel{} table at idx has a sweep field; its
 * expansion into checked variants; the spec's hash (spec.c calls it) */
int sc_has_sweep(checker *c, int idx);
int sc_check_sweep(checker *c, int idx);
void sc_spec_hash(checker *c, const char *path);
/* spec.c: every queued kernel{} table, frozen, then checked by sweep.c or
 * kernel.c (through lua_pcall) */
int sc_check_all(lua_State *L);

#endif
