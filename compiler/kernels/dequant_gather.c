/* dequant_gather.c -- docs/ops.md 2a: out[i, :] = dequant(cache slot indices[i]),
 * a zero row for a negative index.
 *
 * dim / vpt threads share a token; each thread converts vpt values of
 * tokens_per_thread tokens, issuing every load before the first use.  A
 * slot past the cache (>= num_blocks * block_size) also gives a zero row,
 * so a bad index never reads out of bounds.  The block address is a 64-bit
 * product (block * block_stride can pass 2^31).
 */
#include "gen.h"

/* Parameter positions: DSV4_A_DEQUANT_GATHER_<name> (dsv4_abi.h). */
#define ARG(name) DSV4_A_DEQUANT_GATHER_##name

int dsv4_gen_dequant_gather(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d)
{
  (void)d;
  LLVMBuilderRef b = kb->b;
  dsv4_token_lane tl = dsv4_emit_token_lane(kb, k);
  kb_return_if(kb, LLVMBuildICmp(b, LLVMIntSGE, dsv4_emit_token(kb, k, &tl, 0), kb_arg(kb, ARG(n)), ""));
  LLVMValueRef bs = kb_sext64(kb, kb_arg(kb, ARG(block_size)));
  LLVMValueRef nslots = LLVMBuildMul(b, kb_sext64(kb, kb_arg(kb, ARG(num_blocks))), bs, "");
  dsv4_lane_token t[8] = {0};
  int U = k->tile.tokens_per_thread;
  for (int u = 0; u < U; u++) {
    LLVMValueRef tok = dsv4_emit_token(kb, k, &tl, u);
    t[u].write = LLVMBuildICmp(b, LLVMIntSLT, tok, kb_arg(kb, ARG(n)), "write");
    LLVMValueRef tok64 = kb_zext64(kb, tok);
    /* the index, read only for tokens that exist */
    LLVMValueRef slot = kb_sext64(kb, kb_load_if(kb, t[u].write, kb->i32, kb_arg(kb, ARG(indices)),
                                                 LLVMBuildMul(b, tok64, kb_i64(kb, 4), ""), 4, kb_i32(kb, -1)));
    t[u].valid = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, slot, kb_i64(kb, 0), ""),
                              LLVMBuildICmp(b, LLVMIntSLT, slot, nslots, ""), "valid");
    LLVMValueRef s0 = LLVMBuildSelect(b, t[u].valid, slot, kb_i64(kb, 0), "");
    LLVMValueRef blkno = LLVMBuildUDiv(b, s0, bs, "block");
    t[u].row = LLVMBuildURem(b, s0, bs, "row");
    t[u].blk = kb_byte_ptr(kb, kb_arg(kb, ARG(cache)), LLVMBuildMul(b, blkno, kb_arg(kb, ARG(block_stride)), ""));
    t[u].out_row =
        kb_byte_ptr(kb, kb_arg(kb, ARG(out)), LLVMBuildMul(b, tok64, kb_i64(kb, (long long)k->layout.dim * 2), ""));
  }
  dsv4_emit_dequant_tokens(kb, k, tl.lane, bs, kb_arg(kb, ARG(tensor_scale)), t, U);
  return 0;
}
