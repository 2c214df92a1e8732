/* topk.c -- topk's rules (docs/ops.md 4): tile.threads, the threads
 * working on one row (kept in tokens_per_cta). */
#include "ops.h"

static const dsv4_tile_field tile[] = {
    /* name, tag, slot, step, dump, then: required, bounds, default */
    DSV4_TILE_INT("threads", "thr", tokens_per_cta, 1, 1, DSV4_TF_REQUIRED, 32, 1024, 0),
    {NULL},
};

/* One form: portable, on every target. */
static int topk_form(dsv4_choice *c)
{
  return dsv4_choice_record(c, DSV4_FORM_PORTABLE);
}

const dsv4_op_rules dsv4_topk_rules = {
    .tile = tile,
    .fixed = {.values_per_thread = 1, .tokens_per_thread = 1, .interleave = 1},
    .swept = "k",
    .swept_tag = "k",
    .choose_form = topk_form,
};
