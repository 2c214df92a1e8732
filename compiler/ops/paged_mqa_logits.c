/* paged_mqa_logits.c -- the indexer's logits' rules (docs/ops.md 4). */
#include "ops.h"

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

const dsv4_op_rules dsv4_paged_mqa_logits_rules = {
    .tile = tile,
    .fixed = {.tokens_per_thread = 1, .interleave = 1, .streaming = 1},
    .swept = "heads",
    .swept_tag = "nh",
};
