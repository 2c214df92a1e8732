/* sparse_decode.c -- OPS.md section 3: sparse MLA decode with FlashMLA's
 * semantics, portable form (no matrix units yet).
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
 * kv_scale into the softmax scale and into the output (OPS.md section 8).
 */
#include <math.h>

#include "gen.h"

enum {
  OUT, LSE, Q, CACHE, INDICES, LENS, XCACHE, XINDICES, XLENS, SINK, N_TOKENS, HEADS, TOPK, NUM_BLOCKS, BLOCK_SIZE,
  BLOCK_STRIDE, XTOPK, XNUM_BLOCKS, XBLOCK_SIZE, XBLOCK_STRIDE, HAS_SINK, SOFTMAX_SCALE, TENSOR_SCALE
};

#define MAXV 64
#define LOG2E 1.4426950408889634
#define LN2 0.6931471805599453

typedef struct {
  int cache, indices, lens, topk, num_blocks, block_size, block_stride;
} list_args;

static const list_args MAIN = {CACHE, INDICES, LENS, TOPK, NUM_BLOCKS, BLOCK_SIZE, BLOCK_STRIDE};
static const list_args EXTRA = {XCACHE, XINDICES, XLENS, XTOPK, XNUM_BLOCKS, XBLOCK_SIZE, XBLOCK_STRIDE};

/* The online-softmax state a lane carries: m, l (base 2) and acc[vpt]. */
typedef struct {
  LLVMValueRef m, l, acc[MAXV];
} state;

static LLVMValueRef fmax2(dsv4_kb *kb, LLVMValueRef a, LLVMValueRef c)
{
  return LLVMBuildSelect(kb->b, LLVMBuildFCmp(kb->b, LLVMRealOGT, c, a, ""), c, a, "");
}

/* Fold one index list of token t into the state. */
static void fold_list(dsv4_kb *kb, const dsv4_kernel *k, const list_args *la, LLVMValueRef t, LLVMValueRef lane,
                      LLVMValueRef *qv, LLVMValueRef scale2, state *st)
{
  LLVMBuilderRef b = kb->b;
  int vpt = k->tile.values_per_thread, P = dsv4_pow2ceil(k->layout.dim / vpt);
  LLVMValueRef topk = kb_arg(kb, la->topk);
  LLVMValueRef t64 = kb_zext64(kb, t);
  /* n = min(lens[t], topk), clamped at 0; lens is read only when topk > 0 */
  LLVMValueRef n = kb_load_if(kb, LLVMBuildICmp(b, LLVMIntSGT, topk, kb_i32(kb, 0), ""), kb->i32, kb_arg(kb, la->lens),
                              LLVMBuildMul(b, t64, kb_i64(kb, 4), ""), 4, kb_i32(kb, 0));
  n = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, n, topk, ""), n, topk, "n");
  n = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, n, kb_i32(kb, 0), ""), kb_i32(kb, 0), n, "");

  LLVMValueRef init[2 + MAXV];
  init[0] = st->m, init[1] = st->l;
  for (int j = 0; j < vpt; j++)
    init[2 + j] = st->acc[j];
  kb_loop_t loop;
  kb_for(kb, &loop, kb_i32(kb, 0), n, 2 + vpt, init);
  LLVMValueRef m = loop.vars[0], l = loop.vars[1], *acc = &loop.vars[2];
  /* the index: uniform across the CTA */
  LLVMValueRef row_off = LLVMBuildMul(b, t64, kb_sext64(kb, topk), "");
  LLVMValueRef ioff = LLVMBuildMul(b, LLVMBuildAdd(b, row_off, kb_zext64(kb, loop.iv), ""), kb_i64(kb, 4), "");
  LLVMValueRef idx = kb_sext64(kb, kb_load(kb, kb->i32, kb_byte_ptr(kb, kb_arg(kb, la->indices), ioff), 4));
  LLVMValueRef bs = kb_sext64(kb, kb_arg(kb, la->block_size));
  LLVMValueRef nslots = LLVMBuildMul(b, kb_sext64(kb, kb_arg(kb, la->num_blocks)), bs, "");
  dsv4_lane_token tok;
  tok.valid = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, idx, kb_i64(kb, 0), ""),
                           LLVMBuildICmp(b, LLVMIntSLT, idx, nslots, ""), "valid");
  LLVMValueRef s0 = LLVMBuildSelect(b, tok.valid, idx, kb_i64(kb, 0), "");
  tok.row = LLVMBuildURem(b, s0, bs, "row");
  tok.blk = kb_byte_ptr(kb, kb_arg(kb, la->cache), LLVMBuildMul(b, LLVMBuildUDiv(b, s0, bs, ""), kb_arg(kb, la->block_stride), ""));
  tok.write = tok.valid;
  tok.out_row = NULL;
  LLVMValueRef kv[MAXV];
  dsv4_emit_dequant_values(kb, k, lane, bs, &tok, kv);
  LLVMValueRef part = LLVMConstReal(kb->f32, 0.0);
  for (int j = 0; j < vpt; j++)
    part = LLVMBuildFAdd(b, part, LLVMBuildFMul(b, qv[j], kv[j], ""), "");
  LLVMValueRef dot = kb_lane_reduce(kb, part, P, KB_REDUCE_ADD, k->tile.threads);
  LLVMValueRef s2 = LLVMBuildFMul(b, dot, scale2, "s2");
  LLVMValueRef mn = fmax2(kb, m, s2);
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

int dsv4_gen_sparse_decode(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d)
{
  (void)d;
  unsigned char kinds[32];
  const char *names[32];
  int na = dsv4_op_signature(k->op, kinds, names);
  kb_kernel(kb, k->name, kinds, names, na, k->tile.threads);
  LLVMBuilderRef b = kb->b;
  const dsv4_layout *L = &k->layout;
  int vpt = k->tile.values_per_thread, D = L->dim, lanes = D / vpt, P = dsv4_pow2ceil(lanes);
  int fold = 0;
  for (int i = 0; i < L->nseg; i++)
    fold |= L->seg[i].scale_tensor;

  LLVMValueRef tid = kb->t->thread_id(kb);
  LLVMValueRef lane = LLVMBuildURem(b, tid, kb_i32(kb, P), "lane");
  LLVMValueRef h = LLVMBuildAdd(b, LLVMBuildMul(b, kb->t->block_id(kb, 0), kb_i32(kb, k->tile.tokens_per_cta), ""),
                                LLVMBuildUDiv(b, tid, kb_i32(kb, P), ""), "head");
  LLVMValueRef t = kb->t->block_id(kb, 1);
  LLVMValueRef live = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSLT, h, kb_arg(kb, HEADS), ""),
                                   LLVMBuildICmp(b, LLVMIntSLT, t, kb_arg(kb, N_TOKENS), ""), "live");
  LLVMValueRef mine = LLVMBuildAnd(b, live, LLVMBuildICmp(b, LLVMIntULT, lane, kb_i32(kb, lanes), ""), "");
  /* row (t, h) of q and out: (t * heads + h) */
  LLVMValueRef th = LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, t), kb_sext64(kb, kb_arg(kb, HEADS)), ""),
                                 kb_sext64(kb, LLVMBuildSelect(b, live, h, kb_i32(kb, 0), "")), "th");
  /* q slice */
  LLVMValueRef qv[MAXV];
  {
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
    kb_if_t f = kb_if(kb, mine, "q");
    LLVMValueRef off = LLVMBuildAdd(b, LLVMBuildMul(b, th, kb_i64(kb, (long long)D * 2), ""),
                                    LLVMBuildMul(b, kb_zext64(kb, lane), kb_i64(kb, (long long)vpt * 2), ""), "");
    LLVMValueRef v[MAXV];
    int per = vpt * 2 >= 16 && D * 2 % 16 == 0 ? 8 : 1;
    for (int c = 0; c < vpt; c += per) {
      LLVMValueRef p = kb_byte_ptr(kb, kb_arg(kb, Q), LLVMBuildAdd(b, off, kb_i64(kb, c * 2), ""));
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
  LLVMValueRef scale = kb_arg(kb, SOFTMAX_SCALE);
  if (fold)
    scale = LLVMBuildFMul(b, scale, kb_arg(kb, TENSOR_SCALE), "");
  LLVMValueRef scale2 = LLVMBuildFMul(b, scale, LLVMConstReal(kb->f32, LOG2E), "scale2");

  state st;
  st.m = LLVMConstReal(kb->f32, -INFINITY);
  st.l = LLVMConstReal(kb->f32, 0.0);
  for (int j = 0; j < vpt; j++)
    st.acc[j] = LLVMConstReal(kb->f32, 0.0);
  LLVMValueRef tt = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, t, kb_arg(kb, N_TOKENS), ""), t, kb_i32(kb, 0), "");
  fold_list(kb, k, &MAIN, tt, lane, qv, scale2, &st);
  fold_list(kb, k, &EXTRA, tt, lane, qv, scale2, &st);

  /* finish: lse = (m + log2 l) ln 2; the sink only in the denominator */
  LLVMValueRef empty = LLVMBuildFCmp(b, LLVMRealOEQ, st.l, LLVMConstReal(kb->f32, 0.0), "empty");
  LLVMValueRef lse2 = LLVMBuildFAdd(b, st.m, kb_log2(kb, st.l), "lse2");
  LLVMValueRef lse = LLVMBuildSelect(b, empty, LLVMConstReal(kb->f32, INFINITY),
                                     LLVMBuildFMul(b, lse2, LLVMConstReal(kb->f32, LN2), ""), "lse");
  LLVMValueRef factor = LLVMBuildFDiv(b, LLVMConstReal(kb->f32, 1.0), st.l, "");
  {
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
    LLVMValueRef has = LLVMBuildICmp(b, LLVMIntNE, kb_arg(kb, HAS_SINK), kb_i32(kb, 0), "");
    kb_if_t f = kb_if(kb, LLVMBuildAnd(b, has, live, ""), "sink");
    LLVMValueRef sk = kb_load(kb, kb->f32, kb_byte_ptr(kb, kb_arg(kb, SINK), LLVMBuildMul(b, kb_sext64(kb, h), kb_i64(kb, 4), "")), 4);
    LLVMValueRef e = kb_exp2(kb, LLVMBuildFSub(b, LLVMBuildFMul(b, sk, LLVMConstReal(kb->f32, LOG2E), ""), lse2, ""));
    LLVMValueRef g = LLVMBuildFDiv(b, LLVMConstReal(kb->f32, 1.0), LLVMBuildFAdd(b, LLVMConstReal(kb->f32, 1.0), e, ""), "");
    LLVMBasicBlockRef got = LLVMGetInsertBlock(b);
    kb_endif(kb, &f);
    factor = LLVMBuildFMul(b, factor, kb_phi(kb, g, got, LLVMConstReal(kb->f32, 1.0), pre), "");
  }
  if (fold)
    factor = LLVMBuildFMul(b, factor, kb_arg(kb, TENSOR_SCALE), "");
  factor = LLVMBuildSelect(b, empty, LLVMConstReal(kb->f32, 0.0), factor, "factor");

  /* out: the lanes holding V dims; lse: lane 0 */
  int vlanes = k->v_dim / vpt;
  kb_if_t f = kb_if(kb, LLVMBuildAnd(b, live, LLVMBuildICmp(b, LLVMIntULT, lane, kb_i32(kb, vlanes), ""), ""), "out");
  LLVMValueRef o[MAXV], h16[MAXV];
  for (int j = 0; j < vpt; j++)
    o[j] = LLVMBuildFMul(b, st.acc[j], factor, "");
  for (int j = 0; j + 1 < vpt; j += 2)
    kb_f32x2_to_bf16(kb, o[j], o[j + 1], &h16[j]);
  if (vpt % 2)
    h16[vpt - 1] = kb_f32_to_bf16(kb, o[vpt - 1]);
  LLVMValueRef ooff = LLVMBuildAdd(b, LLVMBuildMul(b, th, kb_i64(kb, (long long)k->v_dim * 2), ""),
                                   LLVMBuildMul(b, kb_zext64(kb, lane), kb_i64(kb, (long long)vpt * 2), ""), "");
  int per = (k->v_dim * 2) % 16 == 0 && vpt % 8 == 0 ? 8 : 1;
  for (int c = 0; c < vpt; c += per) {
    LLVMValueRef p = kb_byte_ptr(kb, kb_arg(kb, OUT), LLVMBuildAdd(b, ooff, kb_i64(kb, c * 2), ""));
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
  kb_store(kb, lse, kb_byte_ptr(kb, kb_arg(kb, LSE), LLVMBuildMul(b, th, kb_i64(kb, 4), "")), 4);
  kb_endif(kb, &g);
  kb_endif(kb, &f);
  return 0;
}
