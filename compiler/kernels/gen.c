/* gen.c -- the op -> generator table and the argument signatures. */
#include "gen.h"

#include <stdio.h>

#include "dsv4_abi.h"

typedef int (*gen_fn)(dsv4_kb *, const dsv4_kernel *, dsv4_diags *);

static const gen_fn generators[DSV4_OP_COUNT] = {
    [DSV4_OP_DEQUANT_GATHER] = dsv4_gen_dequant_gather,
    [DSV4_OP_PAGED_GATHER] = dsv4_gen_paged_gather,
    [DSV4_OP_KV_INSERT] = dsv4_gen_kv_insert,
    [DSV4_OP_SPARSE_DECODE] = dsv4_gen_sparse_decode,
    [DSV4_OP_PAGED_MQA_LOGITS] = dsv4_gen_paged_mqa_logits,
    [DSV4_OP_TOPK] = dsv4_gen_topk,
    [DSV4_OP_PAGED_MQA_LOGITS_TOPK] = dsv4_gen_paged_mqa_logits_topk,
};

void dsv4_gen_second_kernel(dsv4_kb *kb, const dsv4_kernel *k, uint32_t second, int threads)
{
  unsigned char kinds[DSV4_MAX_ARGS];
  const char *names[DSV4_MAX_ARGS];
  int n = dsv4_second_args(second, kinds, names);
  char name[DSV4_NAME_MAX + 16];
  snprintf(name, sizeof name, "%s%s", k->name, dsv4_second_suffix(second));
  kb_kernel(kb, name, kinds, names, n, threads);
}

int dsv4_generate(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d)
{
  if (k->op <= DSV4_OP_NONE || k->op >= DSV4_OP_COUNT || !generators[k->op]) {
    dsv4_error(d, k->file, k->line, "kernel '%s': no generator for op %d", k->name, (int)k->op);
    return 1;
  }
  /* the op's kernel with its argument signature (dsv4_abi.h); the
   * generator fills it in (and may add kernels of its own after it) */
  unsigned char kinds[DSV4_MAX_ARGS];
  const char *names[DSV4_MAX_ARGS];
  int n = dsv4_op_signature(k->op, kinds, names);
  kb_kernel(kb, k->name, kinds, names, n, (int)dsv4_kernel_launch(k, kb->t->kind)->threads);
  if (generators[k->op](kb, k, d))
    return 1;
  LLVMBuildRetVoid(kb->b);
  return kb_verify(kb, k, d);
}
