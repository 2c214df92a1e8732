/* dequant_gather.c -- OPS.md 2a: out[i, :] = dequant(cache slot indices[i]),
 * a zero row for a negative index.
 *
 * One token per dim/vpt threads; each thread converts vpt values.  A slot
 * past the cache (>= num_blocks * block_size) also gives a zero row, so a
 * bad index never reads out of bounds.  The block address is a 64-bit
 * product (block * block_stride can pass 2^31).
 */
#include "gen.h"

enum { OUT, CACHE, INDICES, N, NUM_BLOCKS, BLOCK_SIZE, BLOCK_STRIDE };

int dsv4_gen_dequant_gather(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d)
{
  (void)d;
  LLVMBuilderRef b = kb->b;
  unsigned char kinds[32];
  const char *names[32];
  int n = dsv4_op_signature(k->op, kinds, names);
  kb_kernel(kb, k->name, kinds, names, n, k->tile.threads);

  dsv4_token_lane tl = dsv4_emit_token_lane(kb, k);
  kb_return_if(kb, LLVMBuildICmp(b, LLVMIntSGE, tl.tok, kb_arg(kb, N), ""));
  LLVMValueRef tok64 = kb_zext64(kb, tl.tok);
  LLVMValueRef slot = kb_load(kb, kb->i32, kb_byte_ptr(kb, kb_arg(kb, INDICES), LLVMBuildMul(b, tok64, kb_i64(kb, 4), "")), 4);
  LLVMValueRef out_row = kb_byte_ptr(kb, kb_arg(kb, OUT), LLVMBuildMul(b, tok64, kb_i64(kb, (long long)k->layout.dim * 2), ""));

  LLVMValueRef slot64 = kb_sext64(kb, slot);
  LLVMValueRef bs = kb_sext64(kb, kb_arg(kb, BLOCK_SIZE));
  LLVMValueRef nslots = LLVMBuildMul(b, kb_sext64(kb, kb_arg(kb, NUM_BLOCKS)), bs, "");
  LLVMValueRef valid = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, slot64, kb_i64(kb, 0), ""),
                                    LLVMBuildICmp(b, LLVMIntSLT, slot64, nslots, ""), "valid");
  kb_if_t f = kb_if(kb, valid, "slot");
  LLVMValueRef blkno = LLVMBuildUDiv(b, slot64, bs, "block");
  LLVMValueRef row = LLVMBuildURem(b, slot64, bs, "row");
  LLVMValueRef blk = kb_byte_ptr(kb, kb_arg(kb, CACHE), LLVMBuildMul(b, blkno, kb_arg(kb, BLOCK_STRIDE), ""));
  dsv4_emit_dequant_lane(kb, k, tl.lane, blk, row, bs, out_row);
  kb_else(kb, &f);
  dsv4_emit_zero_lane(kb, k, tl.lane, out_row);
  kb_endif(kb, &f);
  return 0;
}
