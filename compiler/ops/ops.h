/* ops.h -- each op's compile-time rules, in one file an op (or op family):
 *
 *   gathers.c           dequant_gather, paged_gather, and the gather tile kv_insert shares
 *   kv_insert.c         kv_insert
 *   sparse_decode.c     sparse_decode
 *   paged_mqa_logits.c  paged_mqa_logits
 *   topk.c              topk
 *   paged_mqa_logits_topk.c  paged_mqa_logits_topk (the logits' fields and topk's k)
 *
 * An op's file holds its tile fields as one table (dsv4_tile_field: the
 * spec checker reads the tile by it, the sweep expander takes its fields
 * and tags from it, --emit plan prints the tile line by it), the rules
 * run as a field is read, and the op's row of dsv4_op_rules.  ops.c
 * indexes the rows by op.  No Lua and no LLVM here: rules report through
 * dsv4_report, which the checker maps onto spec positions.
 */
#ifndef DSV4_OPS_H
#define DSV4_OPS_H

#include <stddef.h>

#include "diag.h"
#include "caps.h" /* the target questions choose_form asks (targets/caps.c answers) */
#include "plan.h"

/* Where a rule reports a refusal: the spec field to blame ("tile.p",
 * "tile", "v_dim": relative to the kernel{} table) and the message. */
typedef struct dsv4_report {
  void (*error)(struct dsv4_report *r, const char *field, const char *msg);
} dsv4_report;

/* Report msg at field through r; returns 1 (refused). */
int dsv4_reject(dsv4_report *r, const char *field, const char *fmt, ...) DSV4_PRINTF(3, 4);

enum { DSV4_TF_INT, DSV4_TF_BOOL, DSV4_TF_CHOICE };              /* a tile field's Lua type */
enum { DSV4_TF_OPTIONAL, DSV4_TF_REQUIRED, DSV4_TF_UNLESS_MATRIX }; /* whether the spec must give it */

/* One tile field of an op: its name in the spec (tile.<name>), its type,
 * its part of a sweep variant's name, the dsv4_tile slot it is kept in
 * (several ops' fields share slots: the decode's heads_per_cta is
 * tokens_per_cta), when the checker reads it, where --emit plan prints it,
 * and what values it takes. */
typedef struct dsv4_tile_field {
  const char *name;
  int type;
  const char *tag;
  size_t slot;                /* offsetof(dsv4_tile, ...) */
  int step;                   /* the checker reads the fields in this order (1 first: matrix before
                                 the fields whose bounds depend on it) */
  int dump;                   /* its place on the plan's tile line (0: none; a line of its own) */
  int required;               /* DSV4_TF_OPTIONAL, _REQUIRED or _UNLESS_MATRIX */
  int lo, hi, def;            /* an integer's bounds and default; a boolean's default */
  int hi_matrix;              /* an integer's upper bound with tile.matrix (0: hi) */
  const char *const *choices; /* a choice's names, NULL-ended, the first the default */
  const char *means;          /* a choice's names explained, for the error */
  /* run once the field is read without error: given and failed have a bit
   * a field (its index in the table) */
  int (*rule)(const dsv4_kernel *k, unsigned given, unsigned failed, dsv4_report *r);
} dsv4_tile_field;

#define DSV4_TILE_FIELDS_MAX 16

/* An op's integer kernel{} field besides the tile (sparse_decode's v_dim,
 * the logits' heads, topk's k; an op may take another's: the fused
 * logits_topk takes both of the last two): its name, whether the spec must give it,
 * bounds and default (DSV4_KF_DIM: the layout's dims), the dsv4_kernel
 * slot it is kept in, whether the checker reads it after the tile (else
 * before: the tile's threads depend on it), and the rule run once it is
 * read without error (NULL: none).  Another op's kernel given it is an error. */
#define DSV4_KF_DIM (-1)
typedef struct dsv4_kernel_field {
  const char *name;
  int required, lo, hi, def;
  size_t slot; /* offsetof(dsv4_kernel, ...) */
  int after_tile;
  int (*rule)(const dsv4_kernel *k, dsv4_report *r);
} dsv4_kernel_field;

/* What choose_form knows of a target: its row in the capability table
 * (targets/caps.c, through caps.h's questions). */
typedef struct {
  int max_threads, warp, max_shared;
  int bf16_mma, e4m3_mma, wgmma;
} dsv4_form_caps;

/* One choose_form call: kernel k on target t, the launch record to fill
 * (out) or the refusal (*field and why). */
typedef struct {
  const dsv4_kernel *k;
  dsv4_target_kind t;
  const dsv4_form_caps *caps;
  dsv4_launch *out;
  const char **field;
  char *why;
  int why_len;
} dsv4_choice;

/* forms.c: refuse (the spec field to blame and why; returns 1), or record
 * `form`'s launch record (form_rules.h's dsv4_form_launch; returns 0). */
int dsv4_choice_refuse(dsv4_choice *c, const char *field, const char *fmt, ...) DSV4_PRINTF(3, 4);
int dsv4_choice_record(dsv4_choice *c, int form);

/* An op's row: its tile fields (NULL-name-ended, in the order messages
 * list them), the tile slots no field of the op sets, the kernel field a
 * sweep may vary besides the tile (NULL: none) with its tag; check_tile,
 * the tile's rules once every field is read without error (tile.threads
 * set: the tile's own bound); and choose_form, the one place its form is
 * decided (forms.c's dsv4_choose_form calls it, then holds the record to
 * the arch's limits). */
typedef struct {
  const dsv4_tile_field *tile;
  const char *const *fields; /* the kernel{} fields the op takes besides the shared ones (NULL-ended; NULL: none) */
  const dsv4_kernel_field *const *kints; /* those read as integers by their rows (NULL-ended; NULL: none) */
  dsv4_tile fixed;
  const char *swept, *swept_tag;
  int (*check_tile)(const dsv4_kernel *k, dsv4_report *r);
  int (*choose_form)(dsv4_choice *c);
} dsv4_op_rules;

/* Rules several ops' check_tile share: */
/* gathers.c: a lane's values_per_thread values, in `interleave` equal
 * pieces, divide the layout's segments and scale groups */
int dsv4_tile_lanes_check(const dsv4_kernel *k, dsv4_report *r);
/* ops.c: tile.threads within what each target named launches */
int dsv4_tile_threads_check(const dsv4_kernel *k, dsv4_report *r);

/* The shape predicates choose_form and the generators both ask (the
 * generators add their target hooks): */
/* sparse_decode.c: whether the warpgroup form (`form`: alone or in CTA
 * pairs) maps kernel k's tile onto its producer warps */
int dsv4_decode_wg_maps(const dsv4_kernel *k, int form);
/* paged_mqa_logits.c: whether the row warp-matrix form maps kernel k with
 * `threads` a CTA (the portable geometry's) */
int dsv4_logits_row_warp_maps(const dsv4_kernel *k, int threads);
/* The integer kernel fields the fused logits_topk shares: the logits'
 * heads (paged_mqa_logits.c, with its rule on the layout) and topk's k
 * (topk.c). */
extern const dsv4_kernel_field dsv4_logits_heads_field, dsv4_topk_k_field;

/* Op op's row (NULL for DSV4_OP_NONE or out of range). */
const dsv4_op_rules *dsv4_op_rules_of(dsv4_op op);
/* The kernel fields of every op (each rules' `fields`), in op order, put
 * at names[n] on; returns the new count (at most max: the rest dropped). */
int dsv4_op_kernel_fields(const char **names, int n, int max);
/* The tile field of op named name, or NULL. */
const dsv4_tile_field *dsv4_tile_field_of(dsv4_op op, const char *name);
/* The tile slot field f is kept in. */
static inline int *dsv4_tile_slot(dsv4_tile *t, const dsv4_tile_field *f) { return (int *)((char *)t + f->slot); }
static inline int dsv4_tile_value(const dsv4_tile *t, const dsv4_tile_field *f)
{
  return *(const int *)((const char *)t + f->slot);
}

/* The rows (each op's file), one an op of dsv4_abi.h's DSV4_OPS, named by
 * its enum suffix: a new op without its row does not link. */
#define X(e, s, d) extern const dsv4_op_rules dsv4_rules_##e;
DSV4_OPS(X)
#undef X
/* gathers.c: the gather family's tile and its check (kv_insert takes both) */
extern const dsv4_tile_field dsv4_gather_tile[];
int dsv4_gather_check(const dsv4_kernel *k, dsv4_report *r);

/* Rows of a tile table: the field's name, tag, dsv4_tile slot, step and
 * dump place, then what its type takes; more fields (.hi_matrix, .rule)
 * may follow. */
#define DSV4_TILE_SLOT(f) offsetof(dsv4_tile, f)
#define DSV4_TILE_INT(n, tg, s, st, dp, req, l, h, d, ...)                                                      \
  {.name = n, .type = DSV4_TF_INT, .tag = tg, .slot = offsetof(dsv4_tile, s), .step = st, .dump = dp,             \
   .required = req, .lo = l, .hi = h, .def = d, __VA_ARGS__}
#define DSV4_TILE_BOOL(n, tg, s, st, dp, d, ...)                                                                \
  {.name = n, .type = DSV4_TF_BOOL, .tag = tg, .slot = offsetof(dsv4_tile, s), .step = st, .dump = dp, .def = d,  \
   __VA_ARGS__}
#define DSV4_TILE_CHOICE(n, tg, s, st, dp, names, m, ...)                                                       \
  {.name = n, .type = DSV4_TF_CHOICE, .tag = tg, .slot = offsetof(dsv4_tile, s), .step = st, .dump = dp,          \
   .choices = names, .means = m, __VA_ARGS__}

#endif
