/* combine.c -- <name>_combine, the second kernel of the sparse decode's
 * matrix forms: with split-KV (splits > 1) each split wrote its partial
 * state of a (token, head) row to work (sd_head_out); this kernel merges
 * them into out and lse.
 *
 * One CTA per (token, head) row, 4 dims a thread:  M = max m_z,
 * w_z = 2^(m_z - M), L = sum l_z w_z, O = sum acc_z w_z, then the row is
 * finished as in the one-CTA form (sd_finish_row).  With bf16 partials
 * (tile.partials) a thread's 4 values are the packed positions 4t..4t+3,
 * dims base + 2c + (0, 1, 8, 9) (sd_head_out's order), stored as two
 * pairs.
 */
#include <math.h>
#include <stdio.h>

#include "shape.h"

enum { COMBINE_BATCH = DSV4_DECODE_COMBINE_BATCH }; /* splits loaded together (the runtime splits a row at most so) */

/* The row a thread merges and where its splits' partials lie. */
typedef struct {
  LLVMValueRef S;    /* i32 splits */
  LLVMValueRef row;  /* i64 (token, head) row: token * heads + head */
  LLVMValueRef orow; /* i64 the row's byte offset in out, and lrow in lse (their strides) */
  LLVMValueRef lrow;
  LLVMValueRef tid;   /* i32 */
  LLVMValueRef dim;   /* i64 the thread's first dim (4 a thread) */
  LLVMValueRef in;    /* i1 dim < v_dim */
  LLVMValueRef slot0; /* i64 the row's first split slot in work */
  LLVMValueRef mlb;   /* i64 byte offset of the (m, l) pairs in work, after every acc */
} combine_row;

/* Start <name>_combine in kb's module (DSV4_ARGS_DECODE_COMBINE). */
static void start_kernel(dsv4_kb *kb, const dsv4_kernel *k)
{
  dsv4_gen_second_kernel(kb, k, DSV4_SECOND_COMBINE, dsv4_decode_combine_threads(k->v_dim));
  /* nothing is read before the splits' kernel has finished: the runtime may
   * then launch this one as its programmatic dependent (DSV4_ENTRY_SECOND_WAITS);
   * and the next decode's splits may be placed as this grid runs */
  if (kb->t->grid_dep && kb->t->grid_dep(kb, 1)) {
    kb->entry_flags |= DSV4_ENTRY_SECOND_WAITS;
    kb->t->grid_dep(kb, 0);
  }
}

/* Splits iv .. iv + COMBINE_BATCH of the row: acc[u] (4 f32, zeros past
 * the splits or dims), ml[u] ((m, l), (-inf, 0) past the splits). */
static void load_batch(dsv4_kb *kb, const dsv4_kernel *k, const combine_row *r, LLVMValueRef iv, LLVMValueRef *acc,
                       LLVMValueRef *ml)
{
  LLVMBuilderRef b = kb->b;
  LLVMTypeRef v2 = LLVMVectorType(kb->f32, 2), v4 = LLVMVectorType(kb->f32, 4);
  for (int u = 0; u < COMBINE_BATCH; u++) {
    LLVMValueRef z = LLVMBuildAdd(b, iv, kb_i32(kb, u), "");
    LLVMValueRef have = LLVMBuildICmp(b, LLVMIntSLT, z, r->S, "");
    LLVMValueRef slot = LLVMBuildAdd(b, r->slot0, kb_zext64(kb, z), "");
    int pb = sd_partial_bytes(k);
    LLVMValueRef aoff = LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, slot, kb_i64(kb, k->v_dim), ""), r->dim, ""),
                                     kb_i64(kb, pb), "");
    if (pb == 2) {
      LLVMTypeRef h4 = LLVMVectorType(kb->i16, 4);
      LLVMValueRef w =
          kb_load_if(kb, LLVMBuildAnd(b, r->in, have, ""), h4, kb_arg(kb, SD_C_work), aoff, 8, LLVMConstNull(h4));
      acc[u] = LLVMGetUndef(v4);
      for (int e = 0; e < 4; e++)
        acc[u] = LLVMBuildInsertElement(b, acc[u], kb_bf16_to_f32(kb, LLVMBuildExtractElement(b, w, kb_i32(kb, e), "")),
                                        kb_i32(kb, e), "");
    } else
      acc[u] = kb_load_if(kb, LLVMBuildAnd(b, r->in, have, ""), v4, kb_arg(kb, SD_C_work), aoff, 16, LLVMConstNull(v4));
    LLVMValueRef none = LLVMConstVector((LLVMValueRef[]){sd_f32(kb, -INFINITY), sd_f32(kb, 0.0)}, 2);
    ml[u] = kb_load_if(kb, have, v2, kb_arg(kb, SD_C_work),
                       LLVMBuildAdd(b, r->mlb, LLVMBuildMul(b, slot, kb_i64(kb, 8), ""), ""), 8, none);
  }
}

/* The row's splits merged: *M, *L and O[4].  One pass, COMBINE_BATCH
 * splits at a time, every load of a batch ((m, l) and acc) issued together
 * (no load waits on another; measured no faster than two passes, but
 * simpler): M the running max, L and O the sums weighted 2^(m_z - M),
 * rescaled when M grows (from nothing: -inf, sums 0, no rescale).  With up
 * to COMBINE_BATCH splits this is the two-pass sum exactly. */
static void merge_splits(dsv4_kb *kb, const dsv4_kernel *k, const combine_row *r, LLVMValueRef *M, LLVMValueRef *L,
                         LLVMValueRef *O)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef init[6] = {sd_f32(kb, -INFINITY), sd_f32(kb, 0.0), sd_f32(kb, 0.0),
                          sd_f32(kb, 0.0),       sd_f32(kb, 0.0), sd_f32(kb, 0.0)};
  kb_loop_t ls;
  kb_for(kb, &ls, kb_i32(kb, 0), r->S, 6, init);
  LLVMValueRef acc[COMBINE_BATCH], ml[COMBINE_BATCH], cm = sd_f32(kb, -INFINITY);
  load_batch(kb, k, r, ls.iv, acc, ml);
  for (int u = 0; u < COMBINE_BATCH; u++)
    cm = sd_fmax2(kb, cm, LLVMBuildExtractElement(b, ml[u], kb_i32(kb, 0), ""));
  LLVMValueRef M0 = ls.vars[0], Mn = sd_fmax2(kb, M0, cm);
  LLVMValueRef ninf = sd_f32(kb, -INFINITY);
  LLVMValueRef Mu = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOEQ, Mn, ninf, ""), sd_f32(kb, 0.0), Mn, "");
  LLVMValueRef rs = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOEQ, M0, ninf, ""), sd_f32(kb, 0.0),
                                    kb_exp2(kb, LLVMBuildFSub(b, M0, Mu, "")), "rescale");
  LLVMValueRef nx[6];
  nx[0] = Mn;
  for (int e = 1; e < 6; e++)
    nx[e] = LLVMBuildFMul(b, ls.vars[e], rs, "");
  for (int u = 0; u < COMBINE_BATCH; u++) {
    LLVMValueRef wz =
        kb_exp2(kb, LLVMBuildFSub(b, LLVMBuildExtractElement(b, ml[u], kb_i32(kb, 0), ""), Mu, "")); /* (0 past S) */
    nx[1] = LLVMBuildFAdd(b, nx[1], LLVMBuildFMul(b, LLVMBuildExtractElement(b, ml[u], kb_i32(kb, 1), ""), wz, ""), "");
    for (int e = 0; e < 4; e++)
      nx[2 + e] = LLVMBuildFAdd(b, nx[2 + e],
                                LLVMBuildFMul(b, LLVMBuildExtractElement(b, acc[u], kb_i32(kb, e), ""), wz, ""), "");
  }
  ls.step = COMBINE_BATCH;
  kb_for_end(kb, &ls, nx);
  *M = ls.vars[0], *L = ls.vars[1];
  for (int e = 0; e < 4; e++)
    O[e] = ls.vars[2 + e];
}

/* The finished row: the thread's 4 bf16 values of out, and lse (thread 0). */
static void store_row(dsv4_kb *kb, const dsv4_kernel *k, const combine_row *r, LLVMValueRef sk, LLVMValueRef M,
                      LLVMValueRef L, const LLVMValueRef *O)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef lse, factor;
  sd_finish_row(kb, M, L, sk, sd_tensor_scaled(k) ? kb_arg(kb, SD_C_tensor_scale) : NULL, &lse, &factor);
  kb_if_t f = kb_if(kb, r->in, "out");
  LLVMValueRef h16[4];
  for (int e = 0; e < 4; e += 2)
    kb_f32x2_to_bf16(kb, LLVMBuildFMul(b, O[e], factor, ""), LLVMBuildFMul(b, O[e + 1], factor, ""), &h16[e]);
  /* the thread's 4 values are dims d + 0..3, or with bf16 partials d + (0, 1, 8, 9) (sd_partial_dim): w values a
   * store, values e.. at byte 8 e (the second pair 8 dims on) */
  int w = sd_bf16_partials(k) ? 2 : 4;
  LLVMValueRef d = w == 2 ? sd_partial_dim(kb, r->dim) : r->dim;
  LLVMValueRef ob = LLVMBuildAdd(b, r->orow, LLVMBuildMul(b, d, kb_i64(kb, 2), ""), "");
  for (int e = 0; e < 4; e += w) {
    LLVMValueRef v = LLVMGetUndef(LLVMVectorType(kb->i16, (unsigned)w));
    for (int i = 0; i < w; i++)
      v = LLVMBuildInsertElement(b, v, h16[e + i], kb_i32(kb, i), "");
    kb_store(kb, v, kb_byte_ptr(kb, kb_arg(kb, SD_C_out), LLVMBuildAdd(b, ob, kb_i64(kb, e * 8), "")), 2 * w);
  }
  kb_endif(kb, &f);
  kb_if_t g = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, r->tid, kb_i32(kb, 0), ""), "lse");
  kb_store(kb, lse, kb_byte_ptr(kb, kb_arg(kb, SD_C_lse), r->lrow), 4);
  kb_endif(kb, &g);
}

void sd_combine(dsv4_kb *kb, const dsv4_kernel *k)
{
  start_kernel(kb, k);
  LLVMBuilderRef b = kb->b;
  int DV = k->v_dim;
  combine_row r;
  LLVMValueRef H = kb_sext64(kb, kb_arg(kb, SD_C_heads));
  r.S = kb_arg(kb, SD_C_splits);
  LLVMValueRef rows = LLVMBuildMul(b, kb_sext64(kb, kb_arg(kb, SD_C_n_tokens)), H, "rows");
  r.row = kb_zext64(kb, kb->t->block_id(kb, 0));
  kb_return_if(kb, LLVMBuildICmp(b, LLVMIntSGE, r.row, rows, ""));
  r.tid = kb->t->thread_id(kb);
  r.dim = LLVMBuildMul(b, kb_zext64(kb, r.tid), kb_i64(kb, 4), "dim");
  r.in = LLVMBuildICmp(b, LLVMIntSLT, r.dim, kb_i64(kb, DV), "");
  r.slot0 = LLVMBuildMul(b, r.row, kb_sext64(kb, r.S), "");
  r.mlb = LLVMBuildMul(b, LLVMBuildMul(b, rows, kb_sext64(kb, r.S), ""),
                       kb_i64(kb, (long long)DV * sd_partial_bytes(k)), "");
  LLVMValueRef h = LLVMBuildSRem(b, r.row, H, "head");
  LLVMValueRef t = LLVMBuildTrunc(b, LLVMBuildSDiv(b, r.row, H, ""), kb->i32, "token");
  r.orow = sd_head_at(kb, t, h, SD_C_seq_q, SD_C_out_sb, SD_C_out_ss, SD_C_out_sh, 2);
  r.lrow = sd_head_at(kb, t, h, SD_C_seq_q, SD_C_lse_sb, SD_C_lse_ss, SD_C_lse_sh, 4);
  LLVMValueRef has = LLVMBuildICmp(b, LLVMIntNE, kb_arg(kb, SD_C_has_sink), kb_i32(kb, 0), "");
  LLVMValueRef sk = kb_load_if(kb, has, kb->f32, kb_arg(kb, SD_C_attn_sink), LLVMBuildMul(b, h, kb_i64(kb, 4), ""), 4,
                               sd_f32(kb, -INFINITY));
  LLVMValueRef M, L, O[4];
  merge_splits(kb, k, &r, &M, &L, O);
  store_row(kb, k, &r, sk, M, L, O);
}
