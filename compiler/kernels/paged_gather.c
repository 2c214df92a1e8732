/* paged_gather.c -- docs/ops.md 2b: for request r and i < g_r,
 *   pos = seq_lens[r] - g_r + i, blk = block_table[r, pos / bs],
 *   out[r, offset + i, :] = dequant(blk, pos % bs).
 *
 * grid.y is the request, grid.x covers the out_rows - offset rows a request
 * can write.  Rows outside [offset, offset + g) are never touched.  Guards
 * keep every access in bounds: rows past out_rows and positions whose
 * block-table column is past max_blocks are skipped, and a block number
 * outside [0, num_blocks) gives a zero row instead of a read.
 */
#include "gen.h"

/* Parameter positions: DSV4_A_PAGED_GATHER_<name> (dsv4_abi.h). */
#define ARG(name) DSV4_A_PAGED_GATHER_##name

int dsv4_gen_paged_gather(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d)
{
  (void)d;
  LLVMBuilderRef b = kb->b;
  dsv4_token_lane tl = dsv4_emit_token_lane(kb, k);
  LLVMValueRef r = kb->t->block_id(kb, 1);
  LLVMValueRef room = LLVMBuildSub(b, kb_arg(kb, ARG(out_rows)), kb_arg(kb, ARG(offset)), "room");
  kb_return_if(kb, LLVMBuildOr(b, LLVMBuildICmp(b, LLVMIntSGE, dsv4_emit_token(kb, k, &tl, 0), room, ""),
                               LLVMBuildICmp(b, LLVMIntSGE, r, kb_arg(kb, ARG(num_requests)), ""), ""));
  LLVMValueRef r64 = kb_zext64(kb, r);
  LLVMValueRef seq =
      kb_load(kb, kb->i32, kb_byte_ptr(kb, kb_arg(kb, ARG(seq_lens)), LLVMBuildMul(b, r64, kb_i64(kb, 4), "")), 4);
  /* g = has_gather_lens ? gather_lens[r] : seq_lens[r] (no load when absent) */
  LLVMValueRef has = LLVMBuildICmp(b, LLVMIntNE, kb_arg(kb, ARG(has_gather_lens)), kb_i32(kb, 0), "");
  LLVMValueRef g =
      kb_load_if(kb, has, kb->i32, kb_arg(kb, ARG(gather_lens)), LLVMBuildMul(b, r64, kb_i64(kb, 4), ""), 4, seq);
  kb_return_if(kb, LLVMBuildICmp(b, LLVMIntSGE, dsv4_emit_token(kb, k, &tl, 0), g, ""));

  LLVMValueRef bs = kb_sext64(kb, kb_arg(kb, ARG(block_size)));
  LLVMValueRef maxb = kb_sext64(kb, kb_arg(kb, ARG(max_blocks)));
  LLVMValueRef nblocks = kb_sext64(kb, kb_arg(kb, ARG(num_blocks)));
  dsv4_lane_token t[8] = {0};
  int U = k->tile.tokens_per_thread;
  for (int u = 0; u < U; u++) {
    LLVMValueRef i = dsv4_emit_token(kb, k, &tl, u);
    LLVMValueRef pos = kb_sext64(kb, LLVMBuildAdd(b, LLVMBuildSub(b, seq, g, ""), i, "pos"));
    LLVMValueRef col = LLVMBuildUDiv(b, pos, bs, "col");
    t[u].row = LLVMBuildURem(b, pos, bs, "row");
    t[u].write = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSLT, i, g, ""), LLVMBuildICmp(b, LLVMIntSLT, i, room, ""), "");
    t[u].write = LLVMBuildAnd(b, t[u].write, LLVMBuildICmp(b, LLVMIntSGE, pos, kb_i64(kb, 0), ""), "");
    t[u].write = LLVMBuildAnd(b, t[u].write, LLVMBuildICmp(b, LLVMIntSLT, col, maxb, ""), "write");
    /* the block number, read only for rows that will be written */
    LLVMValueRef to = LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, r64, kb_arg(kb, ARG(bt_stride)), ""), col, ""),
                                   kb_i64(kb, 4), "");
    LLVMValueRef blkno =
        kb_sext64(kb, kb_load_if(kb, t[u].write, kb->i32, kb_arg(kb, ARG(block_table)), to, 4, kb_i32(kb, -1)));
    t[u].valid = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, blkno, kb_i64(kb, 0), ""),
                              LLVMBuildICmp(b, LLVMIntSLT, blkno, nblocks, ""), "valid");
    blkno = LLVMBuildSelect(b, t[u].valid, blkno, kb_i64(kb, 0), "");
    t[u].blk = kb_byte_ptr(kb, kb_arg(kb, ARG(cache)), LLVMBuildMul(b, blkno, kb_arg(kb, ARG(block_stride)), ""));
    /* out + (r * stride_r + (offset + i) * stride_m) * 2 bytes */
    LLVMValueRef m = kb_sext64(kb, LLVMBuildAdd(b, kb_arg(kb, ARG(offset)), i, ""));
    LLVMValueRef eo = LLVMBuildAdd(b, LLVMBuildMul(b, r64, kb_arg(kb, ARG(out_stride_r)), ""),
                                   LLVMBuildMul(b, m, kb_arg(kb, ARG(out_stride_m)), ""), "");
    t[u].out_row = kb_byte_ptr(kb, kb_arg(kb, ARG(out)), LLVMBuildMul(b, eo, kb_i64(kb, 2), ""));
  }
  dsv4_emit_dequant_tokens(kb, k, tl.lane, bs, kb_arg(kb, ARG(tensor_scale)), t, U);
  return 0;
}
