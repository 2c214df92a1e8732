/* paged_mqa_logits.c -- OPS.md section 4: the indexer's logits, portable form
 * (no matrix units yet).
 *
 *   logits[r, k] = kscale_k * sum_h weights[r, h] * max(0, sum_d q[r, h, d] * K_k[d])
 *
 * for row r = b * next_n + j and k < context_lens[b, j]; -inf for k in
 * [ctx, row_len).  Heads and head dim are the kernel's (the spec).  A CTA
 * covers tokens_per_cta positions of one row; each position's heads are
 * split over heads / heads_per_thread threads, which reduce their partial
 * sums.  K rows are e4m3 values with one fp32 scale per token, addressed
 * through the layout; q is e4m3 and the products accumulate in fp32.  The
 * reduction is reached by every thread (uniform control flow).
 */
#include <math.h>

#include "gen.h"

enum {
  LOGITS, Q, CACHE, WEIGHTS, CTX, TABLE, ROWS, NEXT_N, NUM_BLOCKS, BLOCK_SIZE, BLOCK_STRIDE, MAX_BLOCKS, ROW_LEN,
  ROW_STRIDE
};

/* 16 e4m3 values of a 16-byte vector at byte pointer p, as f32. */
static void load16_e4m3(dsv4_kb *kb, LLVMValueRef p, LLVMValueRef *f)
{
  LLVMValueRef v = kb_load(kb, LLVMVectorType(kb->i32, 4), p, 16);
  v = LLVMBuildBitCast(kb->b, v, LLVMVectorType(kb->i8, 16), "");
  for (int j = 0; j < 16; j += 2) {
    LLVMValueRef a = LLVMBuildExtractElement(kb->b, v, kb_i32(kb, j), "");
    LLVMValueRef c = LLVMBuildExtractElement(kb->b, v, kb_i32(kb, j + 1), "");
    kb_e4m3x2_to_f32(kb, a, c, &f[j]);
  }
}

int dsv4_gen_paged_mqa_logits(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d)
{
  (void)d;
  unsigned char kinds[32];
  const char *names[32];
  int na = dsv4_op_signature(k->op, kinds, names);
  kb_kernel(kb, k->name, kinds, names, na, k->tile.threads);
  LLVMBuilderRef b = kb->b;
  const dsv4_layout *L = &k->layout;
  const dsv4_segment *seg = &L->seg[0];
  int H = k->heads, hpt = k->tile.values_per_thread, G = H / hpt, D = L->dim;

  LLVMValueRef tid = kb->t->thread_id(kb);
  LLVMValueRef hg = LLVMBuildURem(b, tid, kb_i32(kb, G), "hgroup");
  LLVMValueRef pos = LLVMBuildAdd(b, LLVMBuildMul(b, kb->t->block_id(kb, 0), kb_i32(kb, k->tile.tokens_per_cta), ""),
                                  LLVMBuildUDiv(b, tid, kb_i32(kb, G), ""), "pos");
  LLVMValueRef r = kb->t->block_id(kb, 1);
  LLVMValueRef live = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSLT, r, kb_arg(kb, ROWS), ""),
                                   LLVMBuildICmp(b, LLVMIntSLT, pos, kb_arg(kb, ROW_LEN), ""), "live");
  LLVMValueRef r64 = kb_zext64(kb, LLVMBuildSelect(b, live, r, kb_i32(kb, 0), ""));
  LLVMValueRef p64 = kb_zext64(kb, LLVMBuildSelect(b, live, pos, kb_i32(kb, 0), ""));
  /* ctx of the row, and the position's block through the table */
  LLVMValueRef ctx = kb_load(kb, kb->i32, kb_byte_ptr(kb, kb_arg(kb, CTX), LLVMBuildMul(b, r64, kb_i64(kb, 4), "")), 4);
  LLVMValueRef want = LLVMBuildAnd(b, live, LLVMBuildICmp(b, LLVMIntSLT, pos, ctx, ""), "");
  LLVMValueRef bs = kb_sext64(kb, kb_arg(kb, BLOCK_SIZE));
  LLVMValueRef col = LLVMBuildUDiv(b, p64, bs, "col");
  LLVMValueRef maxb = kb_sext64(kb, kb_arg(kb, MAX_BLOCKS));
  want = LLVMBuildAnd(b, want, LLVMBuildICmp(b, LLVMIntSLT, col, maxb, ""), "");
  LLVMValueRef breq = LLVMBuildUDiv(b, r64, kb_sext64(kb, kb_arg(kb, NEXT_N)), "b");
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
  kb_if_t f = kb_if(kb, want, "table");
  LLVMValueRef to = LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, breq, maxb, ""), col, ""), kb_i64(kb, 4), "");
  LLVMValueRef blk_ld = kb_load(kb, kb->i32, kb_byte_ptr(kb, kb_arg(kb, TABLE), to), 4);
  LLVMBasicBlockRef got = LLVMGetInsertBlock(b);
  kb_endif(kb, &f);
  LLVMValueRef blk = kb_sext64(kb, kb_phi(kb, blk_ld, got, kb_i32(kb, -1), pre));
  LLVMValueRef valid = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, blk, kb_i64(kb, 0), ""),
                                    LLVMBuildICmp(b, LLVMIntSLT, blk, kb_sext64(kb, kb_arg(kb, NUM_BLOCKS)), ""), "valid");
  valid = LLVMBuildAnd(b, valid, want, "");

  /* the partial sum over this thread's heads */
  pre = LLVMGetInsertBlock(b);
  f = kb_if(kb, valid, "dots");
  LLVMValueRef base = kb_byte_ptr(kb, kb_arg(kb, CACHE), LLVMBuildMul(b, blk, kb_arg(kb, BLOCK_STRIDE), ""));
  LLVMValueRef row = LLVMBuildURem(b, p64, bs, "row");
  LLVMValueRef krow = kb_byte_ptr(kb, base, LLVMBuildAdd(b, LLVMBuildMul(b, row, kb_i64(kb, L->row_bytes), ""),
                                                         kb_i64(kb, seg->offset), ""));
  int tail = L->scale_place == DSV4_SCALES_BLOCK_TAIL;
  LLVMValueRef so = LLVMBuildMul(b, row, kb_i64(kb, tail ? L->scale_row_bytes : L->row_bytes), "");
  if (tail)
    so = LLVMBuildAdd(b, so, LLVMBuildMul(b, bs, kb_i64(kb, L->row_bytes), ""), "");
  so = LLVMBuildAdd(b, so, kb_i64(kb, seg->scale_offset), "");
  LLVMValueRef kscale = kb_load(kb, kb->f32, kb_byte_ptr(kb, base, so), 4);
  LLVMValueRef acc[64];
  for (int h = 0; h < hpt; h++)
    acc[h] = LLVMConstReal(kb->f32, 0.0);
  /* q row of head (hg * hpt + h): ((r * H) + head) * D bytes */
  LLVMValueRef qrow0 = LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, r64, kb_i64(kb, H), ""),
                                                    LLVMBuildMul(b, kb_zext64(kb, hg), kb_i64(kb, hpt), ""), ""),
                                    kb_i64(kb, D), "");
  for (int c = 0; c < D; c += 16) {
    LLVMValueRef kv[16];
    load16_e4m3(kb, kb_byte_ptr(kb, krow, kb_i64(kb, c)), kv);
    for (int h = 0; h < hpt; h++) {
      LLVMValueRef qv[16];
      load16_e4m3(kb, kb_byte_ptr(kb, kb_arg(kb, Q), LLVMBuildAdd(b, qrow0, kb_i64(kb, (long long)h * D + c), "")), qv);
      for (int j = 0; j < 16; j++)
        acc[h] = LLVMBuildFAdd(b, acc[h], LLVMBuildFMul(b, qv[j], kv[j], ""), "");
    }
  }
  LLVMValueRef wrow = LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, r64, kb_i64(kb, H), ""),
                                                   LLVMBuildMul(b, kb_zext64(kb, hg), kb_i64(kb, hpt), ""), ""),
                                   kb_i64(kb, 4), "");
  LLVMValueRef part = LLVMConstReal(kb->f32, 0.0);
  for (int h = 0; h < hpt; h++) {
    LLVMValueRef w = kb_load(kb, kb->f32, kb_byte_ptr(kb, kb_arg(kb, WEIGHTS), LLVMBuildAdd(b, wrow, kb_i64(kb, 4 * h), "")), 4);
    LLVMValueRef relu = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, acc[h], LLVMConstReal(kb->f32, 0.0), ""), acc[h],
                                        LLVMConstReal(kb->f32, 0.0), "");
    part = LLVMBuildFAdd(b, part, LLVMBuildFMul(b, w, relu, ""), "");
  }
  LLVMBasicBlockRef done = LLVMGetInsertBlock(b);
  kb_endif(kb, &f);
  LLVMValueRef ps = kb_phi(kb, part, done, LLVMConstReal(kb->f32, 0.0), pre);
  LLVMValueRef sc = kb_phi(kb, kscale, done, LLVMConstReal(kb->f32, 0.0), pre);
  LLVMValueRef total = kb_lane_reduce(kb, ps, G, KB_REDUCE_ADD, k->tile.threads);
  LLVMValueRef logit = LLVMBuildSelect(b, valid, LLVMBuildFMul(b, total, sc, ""), LLVMConstReal(kb->f32, -INFINITY), "");
  kb_if_t st = kb_if(kb, LLVMBuildAnd(b, live, LLVMBuildICmp(b, LLVMIntEQ, hg, kb_i32(kb, 0), ""), ""), "store");
  LLVMValueRef lo = LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, r64, kb_arg(kb, ROW_STRIDE), ""), p64, ""), kb_i64(kb, 4), "");
  kb_store(kb, logit, kb_byte_ptr(kb, kb_arg(kb, LOGITS), lo), 4);
  kb_endif(kb, &st);
  return 0;
}
