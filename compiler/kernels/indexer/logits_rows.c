/* logits_rows.c -- what more than one form of the indexer's logits needs
 * (declared in shape.h): where a position's K row and scale lie in the
 * paged cache, the context lengths of a CTA's rows, the offset of a row's
 * head weight, and storing one logit (or -inf) with its guards.
 *
 * Here so that the form files (logits_portable.c, logits_warp.c,
 * logits_warpgroup.c) include none of each other.
 */
#include <math.h>

#include "shape.h"

/* Where position pos lives (shape.h): its block through the table, then
 * its row's and its scale's offsets in that block. */
lg_kpos lg_locate(dsv4_kb *kb, const dsv4_layout *L, LLVMValueRef pos, LLVMValueRef ctx, LLVMValueRef breq)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef bs = kb_sext64(kb, kb_arg(kb, LG_block_size)), maxb = kb_sext64(kb, kb_arg(kb, LG_max_blocks));
  /* a shift and a mask for a power-of-two block size (the usual case) */
  LLVMValueRef col, row;
  kb_udivrem_fast(kb, pos, bs, &col, &row);
  LLVMValueRef want = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSLT, pos, kb_sext64(kb, ctx), ""),
                                   LLVMBuildICmp(b, LLVMIntSLT, pos, kb_sext64(kb, kb_arg(kb, LG_row_len)), ""), "");
  want = LLVMBuildAnd(b, want, LLVMBuildICmp(b, LLVMIntSLT, col, maxb, ""), "");
  LLVMValueRef entry_off =
      LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, breq, kb_arg(kb, LG_bt_stride), ""), col, ""), kb_i64(kb, 4), "");
  LLVMValueRef entry = kb_load_if(kb, want, kb->i32, kb_arg(kb, LG_block_table), entry_off, 4, kb_i32(kb, 0));
  LLVMValueRef blk = kb_sext64(kb, entry);
  lg_kpos at;
  at.ok = LLVMBuildAnd(b, want, LLVMBuildICmp(b, LLVMIntSGE, blk, kb_i64(kb, 0), ""), "");
  at.ok =
      LLVMBuildAnd(b, at.ok, LLVMBuildICmp(b, LLVMIntSLT, blk, kb_sext64(kb, kb_arg(kb, LG_num_blocks)), ""), "valid");
  LLVMValueRef blk_off =
      LLVMBuildMul(b, LLVMBuildSelect(b, at.ok, blk, kb_i64(kb, 0), ""), kb_arg(kb, LG_block_stride), "");
  at.row = LLVMBuildAdd(b, blk_off, LLVMBuildAdd(b, LLVMBuildMul(b, row, kb_i64(kb, L->row_bytes), ""),
                                                kb_i64(kb, L->seg[0].offset), ""), "krow");
  int tail = L->scale_place == DSV4_SCALES_BLOCK_TAIL;
  LLVMValueRef scale_off = LLVMBuildMul(b, row, kb_i64(kb, tail ? L->scale_row_bytes : L->row_bytes), "");
  if (tail)
    scale_off = LLVMBuildAdd(b, scale_off, LLVMBuildMul(b, bs, kb_i64(kb, L->row_bytes), ""), "");
  at.scale = LLVMBuildAdd(b, blk_off, LLVMBuildAdd(b, scale_off, kb_i64(kb, L->seg[0].scale_offset), ""), "kscale");
  return at;
}

/* The offset of a weight (shape.h): row-major [rows, H] f32. */
LLVMValueRef lg_weight_at(dsv4_kb *kb, LLVMValueRef r0, LLVMValueRef f, int H)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef row0 = LLVMBuildMul(b, kb_zext64(kb, r0), kb_i64(kb, (long long)H * 4), "");
  return LLVMBuildAdd(b, row0, LLVMBuildMul(b, kb_zext64(kb, f), kb_i64(kb, 4), ""), "");
}

/* The CTA's rows' contexts and their longest (shape.h). */
LLVMValueRef lg_row_contexts(dsv4_kb *kb, LLVMValueRef r0, LLVMValueRef *ctxj)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef cmax = kb_i32(kb, 0);
  for (int j = 0; j < DSV4_LOGITS_MAX_NEXT_N; j++) {
    LLVMValueRef in = LLVMBuildICmp(b, LLVMIntSLT, kb_i32(kb, j), kb_arg(kb, LG_next_n), "");
    LLVMValueRef ctx_off = LLVMBuildMul(b, kb_zext64(kb, LLVMBuildAdd(b, r0, kb_i32(kb, j), "")), kb_i64(kb, 4), "");
    ctxj[j] = kb_load_if(kb, in, kb->i32, kb_arg(kb, LG_context_lens), ctx_off, 4, kb_i32(kb, 0));
    cmax = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, ctxj[j], cmax, ""), ctxj[j], cmax, "");
  }
  return cmax;
}

/* One logit or -inf, stored by the lanes that own it (shape.h). */
void lg_store_logit(dsv4_kb *kb, const lg_dest *dest, LLVMValueRef sum, LLVMValueRef mine, LLVMValueRef r64,
                    LLVMValueRef pos, LLVMValueRef ok, LLVMValueRef ctx, LLVMValueRef scale)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef valid = LLVMBuildAnd(b, ok, LLVMBuildICmp(b, LLVMIntSLT, pos, ctx, ""), "");
  LLVMValueRef logit =
      LLVMBuildSelect(b, valid, LLVMBuildFMul(b, sum, scale, ""), LLVMConstReal(kb->f32, -INFINITY), "");
  LLVMValueRef store = LLVMBuildAnd(b, mine, LLVMBuildICmp(b, LLVMIntSLT, pos, kb_arg(kb, LG_row_len), ""), "");
  kb_if_t in_row = kb_if(kb, store, "store");
  if (dest) {
    LLVMValueRef j = LLVMBuildSub(b, r64, kb_zext64(kb, dest->r0), "");
    LLVMValueRef i = kb_zext64(kb, LLVMBuildSub(b, pos, dest->p0, ""));
    LLVMValueRef w = LLVMBuildAdd(b, LLVMBuildMul(b, j, kb_i64(kb, dest->P), ""), i, "");
    kb_store(kb, logit, kb_byte_ptr(kb, dest->chunk, LLVMBuildMul(b, w, kb_i64(kb, 4), "")), 4);
  } else {
    LLVMValueRef out_off =
        LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, r64, kb_arg(kb, LG_row_stride), ""), kb_zext64(kb, pos), ""),
                     kb_i64(kb, 4), "");
    kb_store(kb, logit, kb_byte_ptr(kb, kb_arg(kb, LG_logits), out_off), 4);
  }
  kb_endif(kb, &in_row);
}
