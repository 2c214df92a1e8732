/* gathers.c -- the gather family's rules: dequant_gather and paged_gather
 * (docs/ops.md 2a, 2b), and the tile kv_insert shares with them. */
#include "ops.h"

/* A CTA's tokens_per_cta tokens, dim / values_per_thread lanes a token,
 * each lane tokens_per_thread tokens (their loads issued first); a lane's
 * values in `interleave` pieces dim / interleave apart; streaming: cache
 * reads and output writes bypass the caches where the target can. */
const dsv4_tile_field dsv4_gather_tile[] = {
    /* name, tag, slot, step, dump, then: required, bounds, default */
    DSV4_TILE_INT("values_per_thread", "v", values_per_thread, 1, 1, DSV4_TF_REQUIRED, 1, 64, 1),
    DSV4_TILE_INT("tokens_per_cta", "c", tokens_per_cta, 2, 2, DSV4_TF_REQUIRED, 1, 1024, 0),
    DSV4_TILE_INT("tokens_per_thread", "t", tokens_per_thread, 3, 3, DSV4_TF_OPTIONAL, 1, 8, 1),
    DSV4_TILE_INT("interleave", "i", interleave, 5, 4, DSV4_TF_OPTIONAL, 1, 8, 1),
    DSV4_TILE_BOOL("streaming", "s", streaming, 4, 5, 1),
    {NULL},
};

int dsv4_tile_lanes_check(const dsv4_kernel *k, dsv4_report *r)
{
  const dsv4_layout *l = &k->layout;
  const dsv4_tile *t = &k->tile;
  int v = t->values_per_thread;
  if (v & (v - 1))
    return dsv4_reject(r, "tile.values_per_thread", "must be a power of two, got %d", v);
  int w = v / t->interleave; /* values in one piece */
  if (v % t->interleave || (t->interleave & (t->interleave - 1)) || l->dim % t->interleave ||
      (l->dim / t->interleave) % w)
    return dsv4_reject(r, "tile.interleave",
                       "= %d does not split %d values a thread and the layout's %d values into equal pieces",
                       t->interleave, v, l->dim);
  for (int i = 0; i < l->nseg; i++) {
    const dsv4_segment *s = &l->seg[i];
    if (s->d0 % w || s->d1 % w)
      return dsv4_reject(r, "tile.values_per_thread",
                         "= %d (in pieces of %d) does not divide layout '%s' segment [%d, %d)", v, w, l->name, s->d0,
                         s->d1);
    if (s->scale_type != DSV4_DT_NONE && !s->scale_tensor && s->scale_group % w)
      return dsv4_reject(r, "tile.values_per_thread",
                         "= %d (in pieces of %d) does not divide layout '%s' scale group %d (one scale per piece)", v,
                         w, l->name, s->scale_group);
  }
  if (l->dim % v)
    return dsv4_reject(r, "tile.values_per_thread", "= %d does not divide the layout's %d values", v, l->dim);
  return 0;
}

/* A thread's tokens divide the CTA's, its lanes the layout; the CTA
 * launches on every target named (kv_insert's check too). */
int dsv4_gather_check(const dsv4_kernel *k, dsv4_report *r)
{
  const dsv4_tile *t = &k->tile;
  if (t->tokens_per_cta % t->tokens_per_thread)
    return dsv4_reject(r, "tile.tokens_per_thread", "= %d does not divide tokens_per_cta %d", t->tokens_per_thread,
                       t->tokens_per_cta);
  return dsv4_tile_lanes_check(k, r) || dsv4_tile_threads_check(k, r);
}

/* One form: portable, on every target. */
static int gather_form(dsv4_choice *c)
{
  return dsv4_choice_record(c, DSV4_FORM_PORTABLE);
}

const dsv4_op_rules dsv4_rules_DEQUANT_GATHER = {
    .tile = dsv4_gather_tile, .check_tile = dsv4_gather_check, .choose_form = gather_form};
const dsv4_op_rules dsv4_rules_PAGED_GATHER = {
    .tile = dsv4_gather_tile, .check_tile = dsv4_gather_check, .choose_form = gather_form};
