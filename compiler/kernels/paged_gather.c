/* paged_gather.c -- OPS.md 2b: for request r and i < g_r,
 *   pos = seq_lens[r] - g_r + i, blk = block_table[r, pos / bs],
 *   out[r, offset + i, :] = dequant(blk, pos % bs).
 *
 * grid.y is the request, grid.x covers the out_rows - offset rows a request
 * can write.  Rows outside [offset, offset + g) are never touched.  Guards
 * keep every access in bounds: positions past out_rows, block-table columns
 * past max_blocks are skipped, and a block number outside [0, num_blocks)
 * gives a zero row instead of a read.
 */
#include "gen.h"

enum {
  OUT, CACHE, SEQ_LENS, GATHER_LENS, BLOCK_TABLE, NUM_REQUESTS, MAX_BLOCKS, NUM_BLOCKS, BLOCK_SIZE,
  BLOCK_STRIDE, OUT_STRIDE_R, OUT_STRIDE_M, OUT_ROWS, OFFSET, HAS_GATHER_LENS
};

/* Load an i32 element idx (i64) of an int32 array argument. */
static LLVMValueRef load_i32_at(dsv4_kb *kb, int arg, LLVMValueRef idx)
{
  LLVMValueRef off = LLVMBuildMul(kb->b, idx, kb_i64(kb, 4), "");
  return kb_load(kb, kb->i32, kb_byte_ptr(kb, kb_arg(kb, arg), off), 4);
}

int dsv4_gen_paged_gather(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d)
{
  (void)d;
  LLVMBuilderRef b = kb->b;
  unsigned char kinds[32];
  const char *names[32];
  int n = dsv4_op_signature(k->op, kinds, names);
  kb_kernel(kb, k->name, kinds, names, n, k->tile.threads);

  dsv4_token_lane tl = dsv4_emit_token_lane(kb, k);
  LLVMValueRef r = kb->t->block_id(kb, 1);
  LLVMValueRef room = LLVMBuildSub(b, kb_arg(kb, OUT_ROWS), kb_arg(kb, OFFSET), "");
  kb_return_if(kb, LLVMBuildOr(b, LLVMBuildICmp(b, LLVMIntSGE, tl.tok, room, ""),
                               LLVMBuildICmp(b, LLVMIntSGE, r, kb_arg(kb, NUM_REQUESTS), ""), ""));
  LLVMValueRef r64 = kb_zext64(kb, r);
  LLVMValueRef seq = load_i32_at(kb, SEQ_LENS, r64);
  /* g = has_gather_lens ? gather_lens[r] : seq_lens[r] (no load when absent) */
  LLVMValueRef has = LLVMBuildICmp(b, LLVMIntNE, kb_arg(kb, HAS_GATHER_LENS), kb_i32(kb, 0), "");
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
  kb_if_t f = kb_if(kb, has, "gather_len");
  LLVMValueRef gl = load_i32_at(kb, GATHER_LENS, r64);
  LLVMBasicBlockRef then_end = LLVMGetInsertBlock(b);
  kb_endif(kb, &f);
  LLVMValueRef g = LLVMBuildPhi(b, kb->i32, "g");
  LLVMValueRef inc[2] = {gl, seq};
  LLVMBasicBlockRef from[2] = {then_end, pre};
  LLVMAddIncoming(g, inc, from, 2);

  kb_return_if(kb, LLVMBuildICmp(b, LLVMIntSGE, tl.tok, g, ""));
  LLVMValueRef pos = kb_sext64(kb, LLVMBuildAdd(b, LLVMBuildSub(b, seq, g, ""), tl.tok, "pos"));
  kb_return_if(kb, LLVMBuildICmp(b, LLVMIntSLT, pos, kb_i64(kb, 0), ""));
  LLVMValueRef bs = kb_sext64(kb, kb_arg(kb, BLOCK_SIZE));
  LLVMValueRef col = LLVMBuildUDiv(b, pos, bs, "col");
  LLVMValueRef row = LLVMBuildURem(b, pos, bs, "row");
  LLVMValueRef maxb = kb_sext64(kb, kb_arg(kb, MAX_BLOCKS));
  kb_return_if(kb, LLVMBuildICmp(b, LLVMIntSGE, col, maxb, ""));
  LLVMValueRef blkno = kb_sext64(kb, load_i32_at(kb, BLOCK_TABLE, LLVMBuildAdd(b, LLVMBuildMul(b, r64, maxb, ""), col, "")));

  /* out + (r * stride_r + (offset + i) * stride_m) * 2 bytes */
  LLVMValueRef m = kb_sext64(kb, LLVMBuildAdd(b, kb_arg(kb, OFFSET), tl.tok, ""));
  LLVMValueRef eo = LLVMBuildAdd(b, LLVMBuildMul(b, r64, kb_arg(kb, OUT_STRIDE_R), ""),
                                 LLVMBuildMul(b, m, kb_arg(kb, OUT_STRIDE_M), ""), "");
  LLVMValueRef out_row = kb_byte_ptr(kb, kb_arg(kb, OUT), LLVMBuildMul(b, eo, kb_i64(kb, 2), ""));

  LLVMValueRef valid = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, blkno, kb_i64(kb, 0), ""),
                                    LLVMBuildICmp(b, LLVMIntSLT, blkno, kb_sext64(kb, kb_arg(kb, NUM_BLOCKS)), ""), "");
  kb_if_t v = kb_if(kb, valid, "block");
  LLVMValueRef blk = kb_byte_ptr(kb, kb_arg(kb, CACHE), LLVMBuildMul(b, blkno, kb_arg(kb, BLOCK_STRIDE), ""));
  dsv4_emit_dequant_lane(kb, k, tl.lane, blk, row, bs, out_row);
  kb_else(kb, &v);
  dsv4_emit_zero_lane(kb, k, tl.lane, out_row);
  kb_endif(kb, &v);
  return 0;
}
