/* topk.c -- topk's rules (docs/ops.md 4): tile.threads, the threads
 * working on one row (kept in tokens_per_cta). */
#include "ops.h"

static const dsv4_tile_field tile[] = {
    /* name, tag, slot, step, dump, then: required, bounds, default */
    DSV4_TILE_INT("threads", "thr", tokens_per_cta, 1, 1, DSV4_TF_REQUIRED, 32, 1024, 0),
    {NULL},
};

/* The row's threads: whole warps of every target named. */
static int topk_check(const dsv4_kernel *k, dsv4_report *r)
{
  for (int i = 0; i < DSV4_TARGET_COUNT; i++) {
    int w = k->target[i].enabled ? dsv4_kernel_warp(k, (dsv4_target_kind)i) : 1;
    if (k->tile.threads % w)
      return dsv4_reject(r, "tile.threads", "= %d is not a multiple of target '%s' width %d", k->tile.threads,
                         dsv4_target_name((dsv4_target_kind)i), w);
  }
  return 0;
}

/* One form: portable, on every target. */
static int topk_form(dsv4_choice *c)
{
  return dsv4_choice_record(c, DSV4_FORM_PORTABLE);
}

/* k: K, read before the tile */
const dsv4_kernel_field dsv4_topk_k_field = {"k", 1, 1, 65536, 0, offsetof(dsv4_kernel, topk), 0, NULL};

const dsv4_op_rules dsv4_rules_TOPK = {
    .kints = (const dsv4_kernel_field *const[]){&dsv4_topk_k_field, NULL},
    .tile = tile,
    .fields = (const char *const[]){"k", NULL},
    .fixed = {.values_per_thread = 1, .tokens_per_thread = 1, .interleave = 1},
    .swept = "k",
    .swept_tag = "k",
    .check_tile = topk_check,
    .choose_form = topk_form,
};
