/* logits_portable.c -- the portable form of the indexer's logits (no
 * matrix units; every target): a CTA covers tokens_per_cta positions of
 * one row; each position's heads are split over heads / heads_per_thread
 * threads (tile.values_per_thread heads each), which reduce their partial
 * sums.  The reduction is reached by every thread (uniform control flow).
 * Targets whose warp matrix units fit the same launch geometry take
 * lg_row_mma (logits_warp.c) instead; logits.c decides.
 */
#include <math.h>

#include "shape.h"

/* 16 e4m3 values of a 16-byte vector at byte pointer p, as f32. */
static void load16_e4m3(dsv4_kb *kb, LLVMValueRef p, LLVMValueRef *f)
{
  LLVMValueRef v = kb_load(kb, LLVMVectorType(kb->i32, 4), p, 16);
  v = LLVMBuildBitCast(kb->b, v, LLVMVectorType(kb->i16, 8), ""); /* pairs as 16-bit halves, no bytes taken apart */
  for (int j = 0; j < 16; j += 2)
    kb_e4m3x2_pair_to_f32(kb, LLVMBuildExtractElement(kb->b, v, kb_i32(kb, j / 2), ""), &f[j]);
}

/* The partial sum over this thread's heads of row r64 (i64), head group
 * hgroup, against the K row at krow: sum_h weights[r, h] * max(0, q[r, h] .
 * K).  q row of head (hgroup * heads_per_thread + h): ((r * H) + head) * D
 * bytes.  A loop over the thread's heads (not unrolled: 64 heads x 128
 * dims would be 8K multiply-adds of straight-line code); K chunks come
 * again from L1. */
static LLVMValueRef head_sum(dsv4_kb *kb, const dsv4_kernel *k, LLVMValueRef r64, LLVMValueRef hgroup,
                             LLVMValueRef krow)
{
  LLVMBuilderRef b = kb->b;
  int H = k->heads, heads_per_thread = k->tile.values_per_thread, D = k->layout.dim;
  LLVMValueRef qrow0 =
      LLVMBuildMul(b,
                   LLVMBuildAdd(b, LLVMBuildMul(b, r64, kb_i64(kb, H), ""),
                                LLVMBuildMul(b, kb_zext64(kb, hgroup), kb_i64(kb, heads_per_thread), ""), ""),
                   kb_i64(kb, D), "");
  LLVMValueRef wrow =
      LLVMBuildMul(b,
                   LLVMBuildAdd(b, LLVMBuildMul(b, r64, kb_i64(kb, H), ""),
                                LLVMBuildMul(b, kb_zext64(kb, hgroup), kb_i64(kb, heads_per_thread), ""), ""),
                   kb_i64(kb, 4), "");
  LLVMValueRef zero = LLVMConstReal(kb->f32, 0.0);
  kb_loop_t hloop;
  kb_for(kb, &hloop, kb_i32(kb, 0), kb_i32(kb, heads_per_thread), 1, &zero);
  LLVMValueRef h64 = kb_zext64(kb, hloop.iv);
  LLVMValueRef qhead = LLVMBuildAdd(b, qrow0, LLVMBuildMul(b, h64, kb_i64(kb, D), ""), "");
  LLVMValueRef acc = zero;
  for (int c = 0; c < D; c += 16) {
    LLVMValueRef kv[16], qv[16];
    load16_e4m3(kb, kb_byte_ptr(kb, krow, kb_i64(kb, c)), kv);
    load16_e4m3(kb, kb_byte_ptr(kb, kb_arg(kb, LG_q), LLVMBuildAdd(b, qhead, kb_i64(kb, c), "")), qv);
    for (int j = 0; j < 16; j++)
      acc = LLVMBuildFAdd(b, acc, LLVMBuildFMul(b, qv[j], kv[j], ""), "");
  }
  LLVMValueRef w = kb_load(
      kb, kb->f32,
      kb_byte_ptr(kb, kb_arg(kb, LG_weights), LLVMBuildAdd(b, wrow, LLVMBuildMul(b, h64, kb_i64(kb, 4), ""), "")), 4);
  LLVMValueRef relu = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, acc, zero, ""), acc, zero, "");
  LLVMValueRef next = LLVMBuildFAdd(b, hloop.vars[0], LLVMBuildFMul(b, w, relu, ""), "");
  kb_for_end(kb, &hloop, &next);
  return hloop.vars[0];
}

/* The positions from first of a row (shape.h): thread tid takes head
 * group tid % groups of position first + tid / groups, in row blockIdx.y. */
void lg_portable_step(dsv4_kb *kb, const dsv4_kernel *k, LLVMValueRef first, const lg_dest *dest)
{
  LLVMBuilderRef b = kb->b;
  int groups = k->heads / k->tile.values_per_thread; /* threads that share a position's heads */
  LLVMValueRef tid = kb->t->thread_id(kb);
  LLVMValueRef hgroup = LLVMBuildURem(b, tid, kb_i32(kb, groups), "hgroup");
  LLVMValueRef pos = LLVMBuildAdd(b, first, LLVMBuildUDiv(b, tid, kb_i32(kb, groups), ""), "pos");
  LLVMValueRef r = kb->t->block_id(kb, 1);
  LLVMValueRef live = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSLT, r, kb_arg(kb, LG_rows), ""),
                                   LLVMBuildICmp(b, LLVMIntSLT, pos, kb_arg(kb, LG_row_len), ""), "live");
  LLVMValueRef r64 = kb_zext64(kb, LLVMBuildSelect(b, live, r, kb_i32(kb, 0), ""));
  LLVMValueRef p64 = kb_zext64(kb, LLVMBuildSelect(b, live, pos, kb_i32(kb, 0), ""));
  /* ctx of the row, and the position's block through the table */
  LLVMValueRef ctx =
      kb_load(kb, kb->i32, kb_byte_ptr(kb, kb_arg(kb, LG_context_lens), LLVMBuildMul(b, r64, kb_i64(kb, 4), "")), 4);
  LLVMValueRef breq = LLVMBuildUDiv(b, r64, kb_sext64(kb, kb_arg(kb, LG_next_n)), "b");
  lg_kpos kp = lg_locate(kb, &k->layout, p64, ctx, breq);
  LLVMValueRef valid = LLVMBuildAnd(b, live, kp.ok, "");
  /* the partial sum over this thread's heads, where the position is valid */
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
  kb_if_t f = kb_if(kb, valid, "dots");
  LLVMValueRef krow = kb_byte_ptr(kb, kb_arg(kb, LG_cache), kp.row);
  LLVMValueRef kscale = kb_load(kb, kb->f32, kb_byte_ptr(kb, kb_arg(kb, LG_cache), kp.scale), 4);
  LLVMValueRef part = head_sum(kb, k, r64, hgroup, krow);
  LLVMBasicBlockRef done = LLVMGetInsertBlock(b);
  kb_endif(kb, &f);
  LLVMValueRef psum = kb_phi(kb, part, done, LLVMConstReal(kb->f32, 0.0), pre);
  LLVMValueRef sc = kb_phi(kb, kscale, done, LLVMConstReal(kb->f32, 0.0), pre);
  LLVMValueRef total = kb_lane_reduce(kb, psum, groups, KB_REDUCE_ADD, dsv4_gen_threads(kb, k));
  LLVMValueRef logit =
      LLVMBuildSelect(b, valid, LLVMBuildFMul(b, total, sc, ""), LLVMConstReal(kb->f32, -INFINITY), "");
  kb_if_t st = kb_if(kb, LLVMBuildAnd(b, live, LLVMBuildICmp(b, LLVMIntEQ, hgroup, kb_i32(kb, 0), ""), ""), "store");
  LLVMValueRef lo, at;
  if (dest) { /* the chunk's word pos - p0 */
    lo = LLVMBuildMul(b, kb_zext64(kb, LLVMBuildSub(b, pos, dest->p0, "")), kb_i64(kb, 4), "");
    at = dest->chunk;
  } else {
    lo = LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, r64, kb_arg(kb, LG_row_stride), ""), p64, ""),
                      kb_i64(kb, 4), "");
    at = kb_arg(kb, LG_logits);
  }
  kb_store(kb, logit, kb_byte_ptr(kb, at, lo), 4);
  kb_endif(kb, &st);
}

/* Kernel k's body: the CTA's tokens_per_cta positions of row blockIdx.y. */
void lg_portable(dsv4_kb *kb, const dsv4_kernel *k)
{
  lg_portable_step(kb, k, LLVMBuildMul(kb->b, kb->t->block_id(kb, 0), kb_i32(kb, k->tile.tokens_per_cta), ""), NULL);
}
