/* sparse_decode.c -- the sparse MLA decode's rules (docs/ops.md 3). */
#include "ops.h"

/* With tile.matrix, the warp-matrix shape: DSV4_DECODE_WARPS warps a
 * 16-head row block; K rows as 16-dim k-steps; V in halves of 16-dim
 * n-tile pairs (the target's matrix units and shared memory:
 * sparse_decode_form below).  Then the lanes and the threads. */
static int decode_check(const dsv4_kernel *k, dsv4_report *r)
{
  const dsv4_layout *l = &k->layout;
  const dsv4_tile *t = &k->tile;
  if (t->matrix) {
    const char *why = NULL;
    if (t->tokens_per_cta % 16 || t->tokens_per_cta > 64)
      return dsv4_reject(r, "tile.heads_per_cta",
                         "= %d: tile.matrix takes 16, 32, 48 or 64 (%d warps a 16-head row block)",
                         t->tokens_per_cta, DSV4_DECODE_WARPS);
    if (l->row_bytes % 16 || l->align % 16 || (l->scale_place == DSV4_SCALES_BLOCK_TAIL && l->scale_row_bytes % 4))
      why = "the layout's rows must be copied in 16-byte pieces (row bytes and alignment multiples of 16, "
            "scale rows of 4)";
    else if (l->dim % 16)
      why = "the layout's dim must be a multiple of 16";
    else if (l->dim / t->values_per_thread * 8 > t->tokens_per_cta / 16 * DSV4_DECODE_WARPS * 32)
      why = "the CTA must dequantize at least 8 K rows at a time (dim / values_per_thread threads a row): "
            "raise values_per_thread";
    if (why)
      return dsv4_reject(r, "tile.matrix", "= true needs the warp-matrix shape: %s", why);
  }
  return dsv4_tile_lanes_check(k, r) || dsv4_tile_threads_check(k, r);
}

/* Whether the warpgroup form (alone or, form PAIR, in CTA pairs) maps
 * kernel k's tile onto its producer warps: a row's lanes (dim /
 * values_per_thread threads) divide the producers, whose rows a pass then
 * divide the tile (half a tile in pairs), at most 32 16-dim k-steps, and in
 * pairs 16-byte pieces (values_per_thread / interleave = 8), which the bulk
 * copies to the peer move.  The generator asks the same (warpgroup.c). */
int dsv4_decode_wg_maps(const dsv4_kernel *k, int form)
{
  int lanes = k->layout.dim / k->tile.values_per_thread, np = 32 * dsv4_decode_wg_producers(form);
  int tile = DSV4_DECODE_TILE / (form == DSV4_FORM_WARPGROUP_PAIR ? 2 : 1);
  return lanes > 0 && np % lanes == 0 && tile % (np / lanes) == 0 && k->layout.dim / 16 <= 32 &&
         (form != DSV4_FORM_WARPGROUP_PAIR || k->tile.values_per_thread / k->tile.interleave == 8);
}

/* sparse_decode: portable without tile.matrix; with it the direct warp
 * form for up to 32 heads a CTA where the layout lets it (form_rules.h),
 * the warpgroup form (in CTA pairs with tile.pair) where the arch has wgmma
 * and the shape maps and fits its shared memory, else the warp form on
 * bf16 mma.sync.  The
 * matrix forms come with the split-KV combine kernel. */
static int sparse_decode_form(dsv4_choice *c)
{
  const dsv4_kernel *k = c->k;
  const char *arch = c->k->target[c->t].arch, *tname = dsv4_target_name(c->t);
  if (!k->tile.matrix)
    return dsv4_choice_record(c, DSV4_FORM_PORTABLE);
  if (!c->caps->bf16_mma)
    return dsv4_choice_refuse(c, "tile.matrix",
                              "= true: target '%s' (%s) has no bf16 warp matrix instructions in dsv4c; give this "
                              "kernel only targets that do (ptx)",
                              tname, arch);
  int form = DSV4_FORM_WARP;
  if (dsv4_decode_warp_direct(&k->layout, k->tile.tokens_per_cta, k->v_dim) &&
      dsv4_decode_direct_shared_bytes(&k->layout, k->tile.tokens_per_cta) <= c->caps->max_shared)
    form = DSV4_FORM_WARP_DIRECT;
  else if (c->caps->wgmma && dsv4_decode_wg_shape_ok(k->layout.dim, k->v_dim, k->tile.tokens_per_cta) &&
      dsv4_decode_wg_shared_bytes(k->layout.dim) <= c->caps->max_shared &&
      dsv4_decode_wg_maps(k, DSV4_FORM_WARPGROUP))
    form = k->tile.pair ? DSV4_FORM_WARPGROUP_PAIR : DSV4_FORM_WARPGROUP;
  if (form == DSV4_FORM_WARPGROUP_PAIR && !dsv4_decode_wg_maps(k, form))
    return dsv4_choice_refuse(c, "tile",
                              "sets pair = true, whose CTA pairs move 16-byte pieces: values_per_thread / "
                              "interleave must be 8, and a row's %d lanes must divide the %d producer threads",
                              k->layout.dim / k->tile.values_per_thread, 32 * dsv4_decode_wg_producers(form));
  if (k->tile.longest_first && form != DSV4_FORM_WARPGROUP_PAIR)
    return dsv4_choice_refuse(c, "tile",
                              "sets longest_first = true, which needs CTA pairs (tile.pair in the warpgroup form: "
                              "alone, a ranked token held in a register made the producers spill)");
  int wg = dsv4_decode_wg_form(form);
  const char *wg_only = k->tile.prefetch && !wg ? "prefetch" : k->tile.pair && !wg ? "pair" : NULL;
  if (wg_only)
    return dsv4_choice_refuse(c, "tile",
                              "sets %s = true, which needs the warpgroup form (tile.matrix, 64 heads a CTA, 512 dims "
                              "with V = K, and only targets with wgmma: ptx sm_90a)",
                              wg_only);
  int shared = dsv4_decode_shared_bytes(&k->layout, k->tile.tokens_per_cta, form, k->v_dim);
  if (shared > c->caps->max_shared)
    return dsv4_choice_refuse(c, "tile.heads_per_cta",
                              "= %d needs %d bytes of shared memory, more than target '%s' %s allows (%d)",
                              k->tile.tokens_per_cta, shared, tname, arch, c->caps->max_shared);
  return dsv4_choice_record(c, form); /* (its shared_bytes: the `shared` just checked) */
}

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
 * prefetch and longest_first for the warpgroup form's options (sparse_decode_form). */
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

/* v_dim: the first v_dim dims of K are V (576 / 512 for DSv3.2); lanes of
 * V are whole lanes, and a row's lanes one reduction group. */
static int v_dim_check(const dsv4_kernel *k, dsv4_report *r)
{
  const dsv4_layout *l = &k->layout;
  int v = k->tile.values_per_thread;
  if (k->v_dim > l->dim || k->v_dim % v)
    return dsv4_reject(r, "v_dim", "= %d must be at most the layout's %d dims and a multiple of values_per_thread %d",
                       k->v_dim, l->dim, v);
  if (k->tile.matrix && k->v_dim % (16 * DSV4_DECODE_WARPS))
    return dsv4_reject(r, "v_dim", "= %d: tile.matrix needs a multiple of %d (%d parts of 16-dim n-tile pairs)",
                       k->v_dim, 16 * DSV4_DECODE_WARPS, DSV4_DECODE_WARPS);
  /* which matrix form (and whether tile.pair and tile.prefetch have
   * one to apply to) is choose_form's, per target (sparse_decode_form) */
  if (!k->tile.matrix && dsv4_pow2ceil(l->dim / v) > 32)
    return dsv4_reject(r, "tile",
                       "gives %d lanes a head (padded to %d); a head's lanes must fit one 32-wide "
                       "reduction: raise values_per_thread",
                       l->dim / v, dsv4_pow2ceil(l->dim / v));
  return 0;
}

/* v_dim: read after the tile (its bounds are in values_per_thread) */
static const dsv4_kernel_field v_dim = {"v_dim", 0, 1, 4096, DSV4_KF_DIM, offsetof(dsv4_kernel, v_dim), 1, v_dim_check};

const dsv4_op_rules dsv4_rules_SPARSE_DECODE = {
    .kints = (const dsv4_kernel_field *const[]){&v_dim, NULL},
    .tile = tile,
    .fields = (const char *const[]){"v_dim", NULL},
    .fixed = {.tokens_per_thread = 1, .streaming = 1},
    .swept = "v_dim",
    .swept_tag = "vd",
    .check_tile = decode_check,
    .choose_form = sparse_decode_form,
};
