/* paged_mqa_logits.c -- the indexer's logits' rules (docs/ops.md 4). */
#include "ops.h"

/* With tile.matrix, the warp-matrix shape: four warps, two 16-position
 * m-tiles each a step; 8-head n-tiles; a quad's four threads read D/4
 * bytes each in 16-byte pieces (the target's matrix units and the form's
 * static shared memory: logits_form below).  Without, a thread's heads
 * divide the heads into a power of two of groups. */
static int logits_check(const dsv4_kernel *k, dsv4_report *r)
{
  const dsv4_layout *l = &k->layout;
  const dsv4_tile *t = &k->tile;
  if (t->matrix) {
    const char *why = NULL;
    if (t->tokens_per_cta % (DSV4_LOGITS_WARPS * 32))
      return dsv4_reject(r, "tile.tokens_per_cta", "= %d: tile.matrix walks positions %d at a time: give a multiple",
                         t->tokens_per_cta, DSV4_LOGITS_WARPS * 32);
    if (k->heads % 8 || k->heads > 128)
      why = "heads must be a multiple of 8, at most 128";
    else if (l->dim % 64 || l->dim > 256)
      why = "the layout's dim must be a multiple of 64, at most 256";
    else if (l->row_bytes % 16 || l->align % 16 || l->seg[0].offset % 16)
      why = "the layout's rows must start and its values lie on 16-byte boundaries";
    if (why)
      return dsv4_reject(r, "tile.matrix", "= true needs the warp-matrix shape: %s", why);
  } else {
    int v = t->values_per_thread, groups = k->heads / v;
    if (k->heads % v || groups & (groups - 1) || groups > 32)
      return dsv4_reject(r, "tile.heads_per_thread",
                         "= %d must divide the %d heads into a power of two (at most 32) of groups", v, k->heads);
  }
  return dsv4_tile_threads_check(k, r);
}

/* Whether the row warp-matrix form (DSV4_FORM_ROW_WARP: the portable
 * geometry, a CTA tokens_per_cta positions of one row, on e4m3 mma.sync
 * rows) maps kernel k with `threads` a CTA: whole warps, each 8-position
 * n-tiles of at most 64 positions, q of at most 128 heads in 16-head
 * m-tiles within 40 KB of shared memory, 32-dim k-steps up to 256 dims,
 * rows read in 4-byte words.  choose_form asks it with the portable
 * geometry's threads, the generator (logits_warp.c) with the launch's. */
int dsv4_logits_row_warp_maps(const dsv4_kernel *k, int threads)
{
  const dsv4_layout *L = &k->layout;
  int warps = threads / 32;
  return threads % 32 == 0 && warps > 0 && k->tile.tokens_per_cta / warps <= 64 &&
         k->tile.tokens_per_cta % (warps * 8) == 0 && k->heads * (L->dim + 16) <= 40960 && k->heads % 16 == 0 &&
         k->heads <= 128 && L->dim % 32 == 0 && L->dim <= 256 && L->row_bytes % 4 == 0 && L->seg[0].offset % 4 == 0;
}

/* Without tile.matrix: the portable geometry, on e4m3 mma.sync rows where
 * the arch has them and the shape maps (DSV4_FORM_ROW_WARP). */
static int logits_row_warp_ok(const dsv4_choice *c)
{
  const dsv4_kernel *k = c->k;
  int threads = dsv4_op_threads(k->op, k->layout.dim, k->tile.values_per_thread, k->tile.tokens_per_cta,
                                k->tile.tokens_per_thread, k->heads, DSV4_FORM_PORTABLE);
  return c->caps->e4m3_mma && c->caps->warp == 32 && dsv4_logits_row_warp_maps(k, threads);
}

/* With tile.matrix: the warpgroup form where the arch has wgmma and the
 * dim is whole swizzle atoms, else the warp form; both keep their arrays
 * in static shared memory. */
static int logits_form(dsv4_choice *c)
{
  const dsv4_kernel *k = c->k;
  const char *arch = c->k->target[c->t].arch, *tname = dsv4_target_name(c->t);
  if (!k->tile.matrix)
    return dsv4_choice_record(c, logits_row_warp_ok(c) ? DSV4_FORM_ROW_WARP : DSV4_FORM_PORTABLE);
  if (!c->caps->e4m3_mma)
    return dsv4_choice_refuse(c, "tile.matrix",
                              "= true: target '%s' (%s) has no e4m3 warp matrix instructions in dsv4c; give this "
                              "kernel only targets that do (ptx sm_89 and later)",
                              tname, arch);
  int wg = c->caps->wgmma && dsv4_logits_wg_shape_ok(k->layout.dim);
  int need = wg ? dsv4_logits_wg_shared_bytes(k->layout.dim, k->heads)
                : dsv4_logits_warp_shared_bytes(k->layout.dim, k->heads);
  if (need > DSV4_LOGITS_STATIC_MAX)
    return dsv4_choice_refuse(c, "tile.matrix",
                              "= true: %d heads x %d dims need %d bytes of shared memory in the %s form on %s, more "
                              "than the %d a kernel holds statically; take fewer heads or a narrower layout",
                              k->heads, k->layout.dim, need, wg ? "warpgroup" : "warp", arch, DSV4_LOGITS_STATIC_MAX);
  return dsv4_choice_record(c, wg ? DSV4_FORM_WARPGROUP : DSV4_FORM_WARP);
}

/* A thread sums heads_per_thread heads of one position (kept in
 * values_per_thread; the matrix forms have their own mapping and need
 * none); a CTA tokens_per_cta positions (the matrix forms walk them in
 * steps: more). */
static const dsv4_tile_field tile[] = {
    /* name, tag, slot, step, dump, then: required, bounds, default */
    DSV4_TILE_INT("tokens_per_cta", "c", tokens_per_cta, 3, 2, DSV4_TF_REQUIRED, 1, 1024, 0, .hi_matrix = 65536),
    DSV4_TILE_INT("heads_per_thread", "hpt", values_per_thread, 2, 1, DSV4_TF_UNLESS_MATRIX, 1, 64, 1),
    DSV4_TILE_BOOL("matrix", "m", matrix, 1, 3, 0),
    {NULL},
};

/* What the logits kernel needs of the layout: every value e4m3 in one
 * segment with one scale per token (applied after the head sum,
 * docs/ops.md section 4). */
static int logits_layout_check(const dsv4_kernel *k, dsv4_report *r)
{
  const dsv4_layout *l = &k->layout;
  const dsv4_segment *s = &l->seg[0];
  if (l->nseg != 1 || s->type != DSV4_DT_E4M3 || s->d0 != 0 || s->d1 != l->dim || s->scale_tensor ||
      s->scale_type != DSV4_DT_F32 || s->scale_group != l->dim || l->dim % 16)
    return dsv4_reject(r, "layout",
                       "'%s': the logits kernel reads one e4m3 segment over all dims (a multiple of 16) "
                       "with one fp32 scale per token, like indexer_fp8",
                       l->name);
  return 0;
}

/* heads: read before the tile (a thread's heads divide it) */
const dsv4_kernel_field dsv4_logits_heads_field = {
    "heads", 1, 1, 1024, 0, offsetof(dsv4_kernel, heads), 0, logits_layout_check};

const dsv4_op_rules dsv4_rules_PAGED_MQA_LOGITS = {
    .kints = (const dsv4_kernel_field *const[]){&dsv4_logits_heads_field, NULL},
    .tile = tile,
    .fields = (const char *const[]){"heads", NULL},
    .fixed = {.tokens_per_thread = 1, .interleave = 1, .streaming = 1},
    .swept = "heads",
    .swept_tag = "nh",
    .check_tile = logits_check,
    .choose_form = logits_form,
};
