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

/* One form: portable, on every target. */
static int gather_form(dsv4_choice *c)
{
  return dsv4_choice_record(c, DSV4_FORM_PORTABLE);
}

const dsv4_op_rules dsv4_dequant_gather_rules = {.tile = dsv4_gather_tile, .choose_form = gather_form};
const dsv4_op_rules dsv4_paged_gather_rules = {.tile = dsv4_gather_tile, .choose_form = gather_form};
