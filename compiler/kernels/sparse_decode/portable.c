/* portable.c -- the portable form of the sparse MLA decode (docs/ops.md
 * section 3, FlashMLA's semantics): no matrix units, every target.
 *
 * One CTA per (token, group of heads_per_cta heads).  A head's dim / vpt
 * lanes (padded to a power of two, at most 32) each hold vpt values of q
 * and of the output accumulator.  For every index of the main list, then of
 * the extra list (one joint softmax), the lanes dequantize their slice of
 * K_j from the layout (dequant.c, the same code as the gathers), the dot
 * product is reduced across the head's lanes, and an online softmax in base
 * 2 updates (m, l, acc).  The index loop is uniform per CTA, so every
 * thread reaches every reduction.
 *
 *   lse = ln sum exp(s_j)  (+inf when no index is valid)
 *   out = sum exp(s_j - lse) V_j / (1 + exp(sink - lse))  (0 when none valid)
 *
 * V_j is the first v_dim values of K_j.  Per-tensor scaled layouts fold
 * kv_scale into the softmax scale and into the output (docs/ops.md section 8).
 * This form ignores work and splits (always one CTA a row).
 */
#include <math.h>

#include "shape.h"

#define MAXV 64 /* values a lane holds at most (tile.values_per_thread) */

/* The online-softmax state a lane carries: m, l (base 2) and acc[vpt]. */
typedef struct {
  LLVMValueRef m, l, acc[MAXV];
} lane_state;

/* The cache row of iteration iv's index in list la, whose row for the
 * token starts at element row_off (i64), uniform across the CTA; *bs: the
 * block size. */
static dsv4_lane_token list_token(dsv4_kb *kb, const sd_list *la, LLVMValueRef row_off, LLVMValueRef iv,
                                  LLVMValueRef *bs)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef ioff = LLVMBuildMul(b, LLVMBuildAdd(b, row_off, kb_zext64(kb, iv), ""), kb_i64(kb, 4), "");
  LLVMValueRef idx = kb_sext64(kb, kb_load(kb, kb->i32, kb_byte_ptr(kb, kb_arg(kb, la->indices), ioff), 4));
  *bs = kb_sext64(kb, kb_arg(kb, la->block_size));
  LLVMValueRef nslots = LLVMBuildMul(b, kb_sext64(kb, kb_arg(kb, la->num_blocks)), *bs, "");
  dsv4_lane_token tok = {0};
  tok.valid = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, idx, kb_i64(kb, 0), ""),
                           LLVMBuildICmp(b, LLVMIntSLT, idx, nslots, ""), "valid");
  LLVMValueRef s0 = LLVMBuildSelect(b, tok.valid, idx, kb_i64(kb, 0), "");
  tok.row = LLVMBuildURem(b, s0, *bs, "row");
  tok.blk = kb_byte_ptr(kb, kb_arg(kb, la->cache),
                        LLVMBuildMul(b, LLVMBuildUDiv(b, s0, *bs, ""), kb_arg(kb, la->block_stride), ""));
  tok.write = tok.valid;
  tok.out_row = NULL;
  return tok;
}

/* Fold one index list of token t into the state. */
static void fold_list(dsv4_kb *kb, const dsv4_kernel *k, const sd_list *la, LLVMValueRef t, LLVMValueRef lane,
                      LLVMValueRef *qv, LLVMValueRef scale2, lane_state *st)
{
  LLVMBuilderRef b = kb->b;
  int vpt = k->tile.values_per_thread, lanes_p2 = dsv4_pow2ceil(k->layout.dim / vpt);
  LLVMValueRef topk = kb_arg(kb, la->topk);
  LLVMValueRef row_off = sd_token_row(kb, t, SD_seq_q, la->indices_sb, la->indices_ss);
  /* n = min(lens[t], topk), clamped at 0; lens is read only when topk > 0 */
  LLVMValueRef loff = LLVMBuildMul(b, sd_token_row(kb, t, SD_seq_q, la->lens_sb, la->lens_ss), kb_i64(kb, 4), "");
  LLVMValueRef n = kb_load_if(kb, LLVMBuildICmp(b, LLVMIntSGT, topk, kb_i32(kb, 0), ""), kb->i32, kb_arg(kb, la->lens),
                              loff, 4, kb_i32(kb, 0));
  n = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, n, topk, ""), n, topk, "n");
  n = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, n, kb_i32(kb, 0), ""), kb_i32(kb, 0), n, "");

  LLVMValueRef init[2 + MAXV];
  init[0] = st->m, init[1] = st->l;
  for (int j = 0; j < vpt; j++)
    init[2 + j] = st->acc[j];
  kb_loop_t loop;
  kb_for(kb, &loop, kb_i32(kb, 0), n, 2 + vpt, init);
  LLVMValueRef m = loop.vars[0], l = loop.vars[1], *acc = &loop.vars[2];
  LLVMValueRef bs;
  dsv4_lane_token tok = list_token(kb, la, row_off, loop.iv, &bs);
  LLVMValueRef kv[MAXV];
  dsv4_emit_dequant_values(kb, k, lane, bs, &tok, kv);
  LLVMValueRef part = LLVMConstReal(kb->f32, 0.0);
  for (int j = 0; j < vpt; j++)
    part = LLVMBuildFAdd(b, part, LLVMBuildFMul(b, qv[j], kv[j], ""), "");
  LLVMValueRef dot = kb_lane_reduce(kb, part, lanes_p2, KB_REDUCE_ADD, dsv4_gen_threads(kb, k));
  LLVMValueRef s2 = LLVMBuildFMul(b, dot, scale2, "s2");
  LLVMValueRef mn = sd_fmax2(kb, m, s2);
  LLVMValueRef c = kb_exp2(kb, LLVMBuildFSub(b, m, mn, ""));
  LLVMValueRef p = kb_exp2(kb, LLVMBuildFSub(b, s2, mn, ""));
  LLVMValueRef next[2 + MAXV];
  next[0] = LLVMBuildSelect(b, tok.valid, mn, m, "");
  next[1] = LLVMBuildSelect(b, tok.valid, LLVMBuildFAdd(b, LLVMBuildFMul(b, l, c, ""), p, ""), l, "");
  for (int j = 0; j < vpt; j++) {
    LLVMValueRef a = LLVMBuildFAdd(b, LLVMBuildFMul(b, acc[j], c, ""), LLVMBuildFMul(b, p, kv[j], ""), "");
    next[2 + j] = LLVMBuildSelect(b, tok.valid, a, acc[j], "");
  }
  kb_for_end(kb, &loop, next);
  st->m = loop.vars[0], st->l = loop.vars[1];
  for (int j = 0; j < vpt; j++)
    st->acc[j] = loop.vars[2 + j];
}

/* The lane's vpt values of the q row at byte qrow (i64) as f32 into qv,
 * zeros where the lane holds none (mine false). */
static void load_q(dsv4_kb *kb, const dsv4_kernel *k, LLVMValueRef qrow, LLVMValueRef lane, LLVMValueRef mine,
                   LLVMValueRef *qv)
{
  LLVMBuilderRef b = kb->b;
  int vpt = k->tile.values_per_thread, D = k->layout.dim;
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
  kb_if_t f = kb_if(kb, mine, "q");
  LLVMValueRef off =
      LLVMBuildAdd(b, qrow, LLVMBuildMul(b, kb_zext64(kb, lane), kb_i64(kb, (long long)vpt * 2), ""), "");
  LLVMValueRef v[MAXV];
  int per = vpt * 2 >= 16 && D * 2 % 16 == 0 ? 8 : 1;
  for (int c = 0; c < vpt; c += per) {
    LLVMValueRef p = kb_byte_ptr(kb, kb_arg(kb, SD_q), LLVMBuildAdd(b, off, kb_i64(kb, c * 2), ""));
    if (per == 1) {
      v[c] = kb_bf16_to_f32(kb, kb_load(kb, kb->i16, p, 2));
      continue;
    }
    LLVMValueRef w = kb_load(kb, LLVMVectorType(kb->i16, 8), p, 16);
    for (int j = 0; j < 8; j++)
      v[c + j] = kb_bf16_to_f32(kb, LLVMBuildExtractElement(b, w, kb_i32(kb, j), ""));
  }
  LLVMBasicBlockRef got = LLVMGetInsertBlock(b);
  kb_endif(kb, &f);
  for (int j = 0; j < vpt; j++)
    qv[j] = kb_phi(kb, v[j], got, LLVMConstReal(kb->f32, 0.0), pre);
}

/* The out row at byte orow (i64): the lanes holding V dims store acc
 * scaled by factor; lse at byte lrow: lane 0.  live: the row exists. */
static void store_row(dsv4_kb *kb, const dsv4_kernel *k, LLVMValueRef orow, LLVMValueRef lrow, LLVMValueRef lane,
                      LLVMValueRef live, const lane_state *st, LLVMValueRef lse, LLVMValueRef factor)
{
  LLVMBuilderRef b = kb->b;
  int vpt = k->tile.values_per_thread, vlanes = k->v_dim / vpt;
  kb_if_t f = kb_if(kb, LLVMBuildAnd(b, live, LLVMBuildICmp(b, LLVMIntULT, lane, kb_i32(kb, vlanes), ""), ""), "out");
  LLVMValueRef o[MAXV], h16[MAXV];
  for (int j = 0; j < vpt; j++)
    o[j] = LLVMBuildFMul(b, st->acc[j], factor, "");
  for (int j = 0; j + 1 < vpt; j += 2)
    kb_f32x2_to_bf16(kb, o[j], o[j + 1], &h16[j]);
  if (vpt % 2)
    h16[vpt - 1] = kb_f32_to_bf16(kb, o[vpt - 1]);
  LLVMValueRef ooff =
      LLVMBuildAdd(b, orow, LLVMBuildMul(b, kb_zext64(kb, lane), kb_i64(kb, (long long)vpt * 2), ""), "");
  int per = (k->v_dim * 2) % 16 == 0 && vpt % 8 == 0 ? 8 : 1;
  for (int c = 0; c < vpt; c += per) {
    LLVMValueRef p = kb_byte_ptr(kb, kb_arg(kb, SD_out), LLVMBuildAdd(b, ooff, kb_i64(kb, c * 2), ""));
    if (per == 1) {
      kb_store(kb, h16[c], p, 2);
      continue;
    }
    LLVMValueRef v = LLVMGetUndef(LLVMVectorType(kb->i16, 8));
    for (int j = 0; j < 8; j++)
      v = LLVMBuildInsertElement(b, v, h16[c + j], kb_i32(kb, j), "");
    kb_store(kb, v, p, 16);
  }
  kb_if_t g = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, lane, kb_i32(kb, 0), ""), "lse");
  kb_store(kb, lse, kb_byte_ptr(kb, kb_arg(kb, SD_lse), lrow), 4);
  kb_endif(kb, &g);
  kb_endif(kb, &f);
}

int sd_portable(dsv4_kb *kb, const dsv4_kernel *k)
{
  LLVMBuilderRef b = kb->b;
  int vpt = k->tile.values_per_thread, lanes = k->layout.dim / vpt, lanes_p2 = dsv4_pow2ceil(lanes);
  int fold = sd_tensor_scaled(k);

  LLVMValueRef tid = kb->t->thread_id(kb);
  LLVMValueRef lane = LLVMBuildURem(b, tid, kb_i32(kb, lanes_p2), "lane");
  LLVMValueRef h = LLVMBuildAdd(b, LLVMBuildMul(b, kb->t->block_id(kb, 0), kb_i32(kb, k->tile.tokens_per_cta), ""),
                                LLVMBuildUDiv(b, tid, kb_i32(kb, lanes_p2), ""), "head");
  LLVMValueRef t = kb->t->block_id(kb, 1);
  LLVMValueRef live = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSLT, h, kb_arg(kb, SD_heads), ""),
                                   LLVMBuildICmp(b, LLVMIntSLT, t, kb_arg(kb, SD_n_tokens), ""), "live");
  LLVMValueRef mine = LLVMBuildAnd(b, live, LLVMBuildICmp(b, LLVMIntULT, lane, kb_i32(kb, lanes), ""), "");
  LLVMValueRef tt =
      LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, t, kb_arg(kb, SD_n_tokens), ""), t, kb_i32(kb, 0), "");
  /* row (t, h) of q, out and lse, through their strides */
  LLVMValueRef hh = LLVMBuildSelect(b, live, h, kb_i32(kb, 0), "");
  LLVMValueRef qv[MAXV];
  load_q(kb, k, sd_head_at(kb, tt, hh, SD_seq_q, SD_q_sb, SD_q_ss, SD_q_sh, 2), lane, mine, qv);
  LLVMValueRef scale2 = sd_scale2(kb, k);

  lane_state st;
  st.m = LLVMConstReal(kb->f32, -INFINITY);
  st.l = LLVMConstReal(kb->f32, 0.0);
  for (int j = 0; j < vpt; j++)
    st.acc[j] = LLVMConstReal(kb->f32, 0.0);
  fold_list(kb, k, &sd_main, tt, lane, qv, scale2, &st);
  fold_list(kb, k, &sd_extra, tt, lane, qv, scale2, &st);

  /* finish: lse = (m + log2 l) ln 2; the sink only in the denominator */
  LLVMValueRef has = LLVMBuildICmp(b, LLVMIntNE, kb_arg(kb, SD_has_sink), kb_i32(kb, 0), "");
  LLVMValueRef sk =
      kb_load_if(kb, LLVMBuildAnd(b, has, live, ""), kb->f32, kb_arg(kb, SD_attn_sink),
                 LLVMBuildMul(b, kb_sext64(kb, h), kb_i64(kb, 4), ""), 4, LLVMConstReal(kb->f32, -INFINITY));
  LLVMValueRef lse, factor;
  sd_finish_row(kb, st.m, st.l, sk, fold ? kb_arg(kb, SD_tensor_scale) : NULL, &lse, &factor);
  store_row(kb, k, sd_head_at(kb, tt, hh, SD_seq_q, SD_out_sb, SD_out_ss, SD_out_sh, 2),
            sd_head_at(kb, tt, hh, SD_seq_q, SD_lse_sb, SD_lse_ss, SD_lse_sh, 4), lane, live, &st, lse, factor);
  return 0;
}
