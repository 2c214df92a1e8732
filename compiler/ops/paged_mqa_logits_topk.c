/* paged_mqa_logits_topk.c -- the fused logits + top-k's rules (docs/ops.md
 * 4): the logits' kernel fields and tile (heads, heads_per_thread, matrix)
 * with topk's k; tokens_per_cta is the chunk of positions whose logits a
 * CTA holds on chip before it selects among them. */
#include "ops.h"

static const dsv4_tile_field tile[] = {
    /* name, tag, slot, step, dump, then: required, bounds, default */
    DSV4_TILE_INT("tokens_per_cta", "c", tokens_per_cta, 3, 2, DSV4_TF_REQUIRED, 1, 65536, 0),
    DSV4_TILE_INT("heads_per_thread", "hpt", values_per_thread, 2, 1, DSV4_TF_UNLESS_MATRIX, 1, 64, 1),
    DSV4_TILE_BOOL("matrix", "m", matrix, 1, 3, 0),
    {NULL},
};

/* The portable form walks a chunk in steps of DSV4_LOGITS_TOPK_THREADS /
 * groups positions (a thread's heads divide the heads into a power of two
 * of groups, as the logits' portable form); the matrix form in the
 * logits' warpgroup steps. */
static int fused_check(const dsv4_kernel *k, dsv4_report *r)
{
  const dsv4_tile *t = &k->tile;
  int step = DSV4_LOGITS_WARPS * 32;
  if (!t->matrix) {
    int v = t->values_per_thread, groups = k->heads / v;
    if (k->heads % v || groups & (groups - 1) || groups > 32)
      return dsv4_reject(r, "tile.heads_per_thread",
                         "= %d must divide the %d heads into a power of two (at most 32) of groups", v, k->heads);
    step = DSV4_LOGITS_TOPK_THREADS / groups;
  } else if (k->heads % 8 || k->heads > 128 || k->layout.dim % 64 || k->layout.dim > 256 || k->layout.row_bytes % 16 ||
             k->layout.align % 16 || k->layout.seg[0].offset % 16)
    return dsv4_reject(r, "tile.matrix",
                       "= true needs the logits' warpgroup shape: heads a multiple of 8 up to 128, "
                       "dims a multiple of 64 up to 256, rows and values on 16-byte boundaries");
  if (t->tokens_per_cta % step)
    return dsv4_reject(r, "tile.tokens_per_cta", "= %d: the %s form walks positions %d at a time: give a multiple",
                       t->tokens_per_cta, t->matrix ? "matrix" : "portable", step);
  return dsv4_tile_threads_check(k, r);
}

/* Portable everywhere, its chunk and the select in static shared memory;
 * with tile.matrix the logits' warpgroup form, where the arch has wgmma. */
static int fused_form(dsv4_choice *c)
{
  const dsv4_kernel *k = c->k;
  const char *arch = k->target[c->t].arch, *tname = dsv4_target_name(c->t);
  if (!k->tile.matrix) {
    int need = dsv4_logits_topk_static_bytes(k->tile.tokens_per_cta);
    if (need > DSV4_LOGITS_STATIC_MAX)
      return dsv4_choice_refuse(c, "tile.tokens_per_cta",
                                "= %d: the portable form holds the chunk's logits and the select in %d bytes of "
                                "static shared memory, more than the %d a kernel holds on every target; take at "
                                "most %d positions (or tile.matrix on sm_90a)",
                                k->tile.tokens_per_cta, need, DSV4_LOGITS_STATIC_MAX,
                                (DSV4_LOGITS_STATIC_MAX - dsv4_logits_topk_static_bytes(0)) / 4);
    return dsv4_choice_record(c, DSV4_FORM_PORTABLE);
  }
  if (!c->caps->wgmma || !dsv4_logits_wg_shape_ok(k->layout.dim))
    return dsv4_choice_refuse(c, "tile.matrix",
                              "= true: the fused form is the logits' warpgroup form, and target '%s' (%s) has no "
                              "wgmma in dsv4c; give this kernel ptx sm_90a only",
                              tname, arch);
  if (dsv4_logits_wg_shared_bytes(k->layout.dim, k->heads) > DSV4_LOGITS_STATIC_MAX)
    return dsv4_choice_refuse(c, "tile.matrix",
                              "= true: %d heads x %d dims do not fit the warpgroup form's static "
                              "shared memory; take fewer heads or a narrower layout",
                              k->heads, k->layout.dim);
  return dsv4_choice_record(c, DSV4_FORM_WARPGROUP);
}

const dsv4_op_rules dsv4_rules_PAGED_MQA_LOGITS_TOPK = {
    .kints = (const dsv4_kernel_field *const[]){&dsv4_logits_heads_field, &dsv4_topk_k_field, NULL},
    .tile = tile,
    .fields = (const char *const[]){"heads", "k", NULL},
    .fixed = {.tokens_per_thread = 1, .interleave = 1, .streaming = 1},
    .swept = "k",
    .swept_tag = "k",
    .check_tile = fused_check,
    .choose_form = fused_form,
};
