/* kv_insert.c -- kv_insert's rules (docs/ops.md 5): the gather tile, a
 * token's dim / values_per_thread lanes padded to a power of two. */
#include "ops.h"

/* One form: portable, on every target. */
static int kv_insert_form(dsv4_choice *c)
{
  return dsv4_choice_record(c, DSV4_FORM_PORTABLE);
}

static const char *const fields[] = {"rope", "q", "quant", NULL};

const dsv4_op_rules dsv4_rules_KV_INSERT = {
    .tile = dsv4_gather_tile, .fields = fields, .check_tile = dsv4_gather_check, .choose_form = kv_insert_form};
