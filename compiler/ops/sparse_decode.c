/* sparse_decode.c -- the sparse MLA decode's rules (docs/ops.md 3). */
#include "ops.h"

/* tile.p: how the matrix forms hold P for the P V product, and
 * tile.partials: how a split-KV split hands its O to the combine (plan.h).
 * The portable form computes in fp32, in one CTA a row, and takes
 * neither.  (Bits: the fields' indices in `tile` below.) */
enum { F_P = 6, F_PARTIALS = 8 };
static const char *const p_names[] = {"bf16", "bf16x2", NULL}, *const partials_names[] = {"f32", "bf16", NULL};

static int p_and_partials(const dsv4_kernel *k, unsigned given, unsigned failed, dsv4_report *r)
{
  const dsv4_tile *t = &k->tile;
  int hp = given >> F_P & 1, hw = given >> F_PARTIALS & 1;
  if (failed >> F_P & 1)
    return 0;
  if ((hp || hw) && !t->matrix)
    return dsv4_reject(r, hp ? "tile.p" : "tile.partials",
                       "= '%s' applies to the matrix forms only (tile.matrix = true); the portable form %s",
                       hp ? p_names[t->p_format] : partials_names[t->partials],
                       hp ? "keeps P in fp32" : "has no split-KV");
  if (t->partials == DSV4_PARTIALS_BF16 && t->p_format != DSV4_P_BF16)
    return dsv4_reject(r, "tile.partials",
                       "= 'bf16' needs tile.p = 'bf16': with P as hi + lo, one more bf16 rounding of each split's O "
                       "would undo the precision the second P part buys");
  return 0;
}

/* A CTA heads_per_cta heads of one token (kept in tokens_per_cta), a head
 * dim / values_per_thread lanes; matrix asks for a matrix form, pair,
 * prefetch and longest_first for the warpgroup form's options (forms.c). */
static const dsv4_tile_field tile[] = {
    /* name, tag, slot, step, dump, then: required, bounds, default (a choice: its names, explained) */
    DSV4_TILE_INT("values_per_thread", "v", values_per_thread, 7, 1, DSV4_TF_REQUIRED, 1, 64, 1),
    DSV4_TILE_INT("heads_per_cta", "h", tokens_per_cta, 8, 2, DSV4_TF_REQUIRED, 1, 1024, 0),
    DSV4_TILE_BOOL("matrix", "m", matrix, 1, 4, 0),
    DSV4_TILE_INT("interleave", "i", interleave, 9, 3, DSV4_TF_OPTIONAL, 1, 8, 1),
    DSV4_TILE_BOOL("pair", "pair", pair, 2, 5, 0),
    DSV4_TILE_BOOL("prefetch", "pf", prefetch, 3, 6, 0),
    [F_P] = DSV4_TILE_CHOICE("p", "p", p_format, 5, 0, p_names,
                             "'bf16' (P rounded once, as FlashMLA) or 'bf16x2' (P as bf16 hi + lo)"),
    DSV4_TILE_BOOL("longest_first", "lf", longest_first, 4, 7, 0),
    [F_PARTIALS] = DSV4_TILE_CHOICE("partials", "w", partials, 6, 0, partials_names,
                                    "'f32' (split-KV partials in fp32, as FlashMLA) or 'bf16' (rounded once more, "
                                    "half the bytes)",
                                    .rule = p_and_partials),
    {NULL},
};

const dsv4_op_rules dsv4_sparse_decode_rules = {
    .tile = tile,
    .fixed = {.tokens_per_thread = 1, .streaming = 1},
    .swept = "v_dim",
    .swept_tag = "vd",
};
