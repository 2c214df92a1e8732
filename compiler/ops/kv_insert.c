/* kv_insert.c -- kv_insert's rules (docs/ops.md 5): the gather tile, a
 * token's dim / values_per_thread lanes padded to a power of two. */
#include "ops.h"

const dsv4_op_rules dsv4_kv_insert_rules = {.tile = dsv4_gather_tile};
