/* logits_warp.c -- the indexer's logits on warp matrix units (PTX
 * mma.sync m16n8k32 e4m3), in two launch geometries:
 *
 *   lg_row_mma  the portable form's (a CTA one row, tile.matrix off), taken
 *               by targets with the units where the shape fits
 *   lg_warp     the warp-matrix form (tile.matrix): a CTA every next_n row
 *               of one batch entry, K through a cp.async ring per warp, the
 *               head sum mostly in registers
 *
 * The shared helpers (lg_locate, lg_row_contexts, lg_store_logit,
 * lg_weight_at) are logits_rows.c's; shape.h names the short names.
 */
#include <math.h>

#include "shape.h"

/* Whether this target's hooks can take the row-per-CTA matrix path for
 * kernel k, whose shape the rule choose_form asks maps (compiler/ops/). */
int lg_row_mma_fits(dsv4_kb *kb, const dsv4_kernel *k)
{
  const dsv4_target_ir *t = kb->t;
  return t->mma_e4m3_16x8x32 && t->shfl_xor && t->shfl_idx && kb->warp == 32 &&
         t->mma_e4m3_16x8x32(kb, NULL, NULL, NULL, NULL) && dsv4_logits_row_warp_maps(k, dsv4_gen_threads(kb, k));
}

/* The row-per-CTA matrix path (PTX m16n8k32 e4m3; the portable form's
 * launch geometry, tile.matrix off): a warp holds the row's q as A
 * fragments (heads x dims) and, 8 positions at a time, takes K rows as the
 * B fragment; the relu-weighted head sum folds the accumulator's rows, a
 * butterfly over the lanes that share a column finishes it.  What its
 * pieces share: */
typedef struct {
  const dsv4_kernel *k;
  LLVMValueRef gid, tig;        /* lane >> 2, lane & 3 (i32) */
  LLVMValueRef r64, ctx, breq;  /* the row (i64), its context, its batch entry (i64) */
  LLVMValueRef dcol;            /* i64 byte 4 tig of a row: the lane's fragment column */
  LLVMValueRef a[8][8][4];      /* a[mt][ks]: q as A fragments */
  LLVMValueRef w_g[8], w_g8[8]; /* m-tile mt's weights of heads mt*16 + gid, + 8 */
} row_mma_state;

/* The row's q (H x D bytes) staged once per CTA in shared memory with
 * 16-byte loads, then read as A fragments: a[mt][ks][0..3] =
 * q[h][d..d+3], h = mt*16 + gid (+8), d = ks*32 + tig*4 (+16); and the
 * weights of the lane's heads. */
static void row_mma_q(dsv4_kb *kb, row_mma_state *s, LLVMValueRef tid)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_kernel *k = s->k;
  int H = k->heads, D = k->layout.dim, MT = H / 16, KS = D / 32;
  int QS = D + 16; /* padded rows: the 8 rows a fragment load touches hit 8 bank groups */
  LLVMValueRef qs = kb_shared_array(kb, kb->i8, H * QS, "dsv4_q");
  kb_stage_rows(kb, kb_arg(kb, LG_q), LLVMBuildMul(b, s->r64, kb_i64(kb, (long long)H * D), ""), NULL,
                (long long)H * D, NULL, D, QS, qs, tid, dsv4_gen_threads(kb, k));
  kb->t->barrier(kb);
  LLVMValueRef hrow = LLVMBuildMul(b, kb_zext64(kb, s->gid), kb_i64(kb, QS), "");
  s->dcol = LLVMBuildMul(b, kb_zext64(kb, s->tig), kb_i64(kb, 4), "");
  for (int mt = 0; mt < MT; mt++)
    for (int ks = 0; ks < KS; ks++)
      for (int i = 0; i < 4; i++) {
        long long c = (long long)(mt * 16 + (i & 1) * 8) * QS + ks * 32 + (i >> 1) * 16;
        LLVMValueRef off = LLVMBuildAdd(b, hrow, LLVMBuildAdd(b, s->dcol, kb_i64(kb, c), ""), "");
        s->a[mt][ks][i] = kb_load(kb, kb->i32, kb_byte_ptr(kb, qs, off), 4);
      }
  LLVMValueRef wbase = LLVMBuildMul(
      b, LLVMBuildAdd(b, LLVMBuildMul(b, s->r64, kb_i64(kb, H), ""), kb_zext64(kb, s->gid), ""), kb_i64(kb, 4), "");
  for (int mt = 0; mt < MT; mt++) {
    s->w_g[mt] = kb_load(kb, kb->f32,
                         kb_byte_ptr(kb, kb_arg(kb, LG_weights), LLVMBuildAdd(b, wbase, kb_i64(kb, mt * 64), "")), 4);
    s->w_g8[mt] = kb_load(
        kb, kb->f32, kb_byte_ptr(kb, kb_arg(kb, LG_weights), LLVMBuildAdd(b, wbase, kb_i64(kb, mt * 64 + 32), "")), 4);
  }
}

/* An n-tile's loads from position p0: the B fragment (K row of position
 * p0 + gid, bytes ks*32 + tig*4 (+16)) into kfrag[ks], and its scale,
 * under one guard; an invalid position's scale is -inf (its logit becomes
 * -inf in row_mma_tile). */
static void row_mma_load(dsv4_kb *kb, const row_mma_state *s, LLVMValueRef p0, LLVMValueRef (*kfrag)[2],
                         LLVMValueRef *kscale)
{
  LLVMBuilderRef b = kb->b;
  int KS = s->k->layout.dim / 32;
  LLVMValueRef pos = kb_zext64(kb, LLVMBuildAdd(b, p0, s->gid, ""));
  lg_kpos kp = lg_locate(kb, &s->k->layout, pos, s->ctx, s->breq);
  LLVMValueRef ok = kp.ok, scale_off = kp.scale;
  LLVMValueRef krow = LLVMBuildAdd(b, kp.row, s->dcol, "");
  LLVMValueRef loaded[8][2];
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
  kb_if_t guard = kb_if(kb, ok, "kload");
  for (int ks = 0; ks < KS; ks++)
    for (int i = 0; i < 2; i++)
      loaded[ks][i] =
          kb_load(kb, kb->i32,
                  kb_byte_ptr(kb, kb_arg(kb, LG_cache), LLVMBuildAdd(b, krow, kb_i64(kb, ks * 32 + i * 16), "")), 4);
  LLVMValueRef sc = kb_load(kb, kb->f32, kb_byte_ptr(kb, kb_arg(kb, LG_cache), scale_off), 4);
  LLVMBasicBlockRef got = LLVMGetInsertBlock(b);
  kb_endif(kb, &guard);
  for (int ks = 0; ks < KS; ks++)
    for (int i = 0; i < 2; i++)
      kfrag[ks][i] = kb_phi(kb, loaded[ks][i], got, kb_i32(kb, 0), pre);
  *kscale = kb_phi(kb, sc, got, LLVMConstReal(kb->f32, -INFINITY), pre);
}

/* An n-tile's math from position p0 (kfrag, ksc: its loads): the products
 * over the m-tiles, the relu-weighted head sum, the butterfly, and the
 * stores of lanes 0..3. */
static void row_mma_tile(dsv4_kb *kb, row_mma_state *s, LLVMValueRef p0, LLVMValueRef (*kfrag)[2], LLVMValueRef ksc)
{
  LLVMBuilderRef b = kb->b;
  int MT = s->k->heads / 16, KS = s->k->layout.dim / 32;
  LLVMValueRef zero = LLVMConstReal(kb->f32, 0.0), tig = s->tig;
  LLVMValueRef part[2] = {zero, zero};
  for (int mt = 0; mt < MT; mt++) {
    LLVMValueRef acc[4] = {zero, zero, zero, zero};
    for (int ks = 0; ks < KS; ks++)
      kb->t->mma_e4m3_16x8x32(kb, s->a[mt][ks], kfrag[ks], acc, acc);
    for (int j = 0; j < 2; j++) {
      LLVMValueRef relu0 = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, acc[j], zero, ""), acc[j], zero, "");
      LLVMValueRef relu1 =
          LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, acc[2 + j], zero, ""), acc[2 + j], zero, "");
      part[j] = LLVMBuildFAdd(b, part[j], LLVMBuildFAdd(b, LLVMBuildFMul(b, relu0, s->w_g[mt], ""),
                                                        LLVMBuildFMul(b, relu1, s->w_g8[mt], ""), ""), "");
    }
  }
  for (int j = 0; j < 2; j++)
    for (int m = 4; m <= 16; m *= 2)
      part[j] = LLVMBuildFAdd(b, part[j], kb->t->shfl_xor(kb, part[j], m), "");
  /* lanes 0..3 write columns p0 + tig*2 + j; the column's scale comes from
   * the lane that loaded that position's row (lane = column * 4) */
  LLVMValueRef col_scale[2];
  for (int j = 0; j < 2; j++)
    col_scale[j] = kb->t->shfl_idx(kb, ksc, LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, tig, kb_i32(kb, 2), ""),
                                                                         kb_i32(kb, j), ""), kb_i32(kb, 4), ""));
  kb_if_t st = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, s->gid, kb_i32(kb, 0), ""), "store");
  for (int j = 0; j < 2; j++) {
    LLVMValueRef n = kb_zext64(kb, LLVMBuildAdd(b, p0, LLVMBuildAdd(b, LLVMBuildMul(b, tig, kb_i32(kb, 2), ""),
                                                                     kb_i32(kb, j), ""), ""));
    LLVMValueRef valid = LLVMBuildFCmp(b, LLVMRealONE, col_scale[j], LLVMConstReal(kb->f32, -INFINITY), "");
    LLVMValueRef logit =
        LLVMBuildSelect(b, valid, LLVMBuildFMul(b, part[j], col_scale[j], ""), LLVMConstReal(kb->f32, -INFINITY), "");
    kb_if_t in = kb_if(kb, LLVMBuildICmp(b, LLVMIntSLT, n, kb_sext64(kb, kb_arg(kb, LG_row_len)), ""), "inrow");
    LLVMValueRef lo = LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, s->r64, kb_arg(kb, LG_row_stride), ""), n, ""),
                                   kb_i64(kb, 4), "");
    kb_store(kb, logit, kb_byte_ptr(kb, kb_arg(kb, LG_logits), lo), 4);
    kb_endif(kb, &in);
  }
  kb_endif(kb, &st);
}

/* Kernel k's body on the row-per-CTA path: every n-tile's loads first
 * (table, K fragments, scale), then the math: NT tiles of loads in flight
 * instead of one. */
void lg_row_mma(dsv4_kb *kb, const dsv4_kernel *k)
{
  LLVMBuilderRef b = kb->b;
  int warps = dsv4_gen_threads(kb, k) / 32, per_warp = k->tile.tokens_per_cta / warps, NT = per_warp / 8;
  row_mma_state s = {.k = k};
  LLVMValueRef tid = kb->t->thread_id(kb);
  LLVMValueRef warp = LLVMBuildUDiv(b, tid, kb_i32(kb, 32), "warp"), lane = LLVMBuildURem(b, tid, kb_i32(kb, 32), "");
  s.gid = LLVMBuildLShr(b, lane, kb_i32(kb, 2), "gid"), s.tig = LLVMBuildAnd(b, lane, kb_i32(kb, 3), "tig");
  LLVMValueRef r = kb->t->block_id(kb, 1);
  kb_return_if(kb, LLVMBuildICmp(b, LLVMIntSGE, r, kb_arg(kb, LG_rows), "")); /* whole CTAs */
  s.r64 = kb_zext64(kb, r);
  s.ctx =
      kb_load(kb, kb->i32, kb_byte_ptr(kb, kb_arg(kb, LG_context_lens), LLVMBuildMul(b, s.r64, kb_i64(kb, 4), "")), 4);
  s.breq = LLVMBuildUDiv(b, s.r64, kb_sext64(kb, kb_arg(kb, LG_next_n)), "b");
  row_mma_q(kb, &s, tid);
  LLVMValueRef warp_p0 =
      LLVMBuildAdd(b, LLVMBuildMul(b, kb->t->block_id(kb, 0), kb_i32(kb, k->tile.tokens_per_cta), ""),
                   LLVMBuildMul(b, warp, kb_i32(kb, per_warp), ""), "pw");
  LLVMValueRef kfrag[8][8][2], kscale[8], tile_p0[8];
  for (int nt = 0; nt < NT && nt < 8; nt++) {
    tile_p0[nt] = LLVMBuildAdd(b, warp_p0, kb_i32(kb, nt * 8), "p0");
    row_mma_load(kb, &s, tile_p0[nt], kfrag[nt], &kscale[nt]);
  }
  for (int nt = 0; nt < NT && nt < 8; nt++)
    row_mma_tile(kb, &s, tile_p0[nt], kfrag[nt], kscale[nt]);
}

/* Whether this target has what the warp-matrix form needs. */
int lg_warp_target_ok(dsv4_kb *kb)
{
  const dsv4_target_ir *t = kb->t;
  return t->mma_e4m3_16x8x32 && t->shfl_xor && t->shfl_idx && t->cp_async && t->cp_async_commit && t->cp_async_wait &&
         t->warp_sync && kb->warp == 32 && t->mma_e4m3_16x8x32(kb, NULL, NULL, NULL, NULL) &&
         t->cp_async(kb, NULL, NULL, 16, NULL);
}

/* The warp-matrix form (tile.matrix; PTX m16n8k32 e4m3), transposed: the
 * K rows are the A operand (16 positions a m-tile), q^T the B operand (8
 * heads an n-tile), so a thread's accumulator holds two positions x two
 * heads and the relu-weighted head sum is mostly in registers (a quad
 * butterfly finishes it).  The k order is permuted alike in A and B so that
 * thread c of a quad reads its K and q bytes [c D/4, (c+1) D/4) with 16-byte
 * loads: k-step ks takes bytes 8 ks .. 8 ks + 7 of that slice, the first
 * four as the fragment's k 4c..4c+3 and the next four as 4c+16..4c+19.
 * q is staged in shared memory and read as q^T fragments per m-tile, which
 * leaves the registers to the K side; a CTA of 4 warps walks
 * tokens_per_cta positions, each warp one 16-position m-tile a step. */

/* A warp's ring of DSV4_LOGITS_STAGES steps of K rows.  A stage is 16 rows
 * (padded by 16 bytes like q), 16 scales (zero-filled when invalid) and
 * 16 validity words. */
#define RING_STAGE_BYTES(D) (16 * ((D) + 16) + 128)
typedef struct {
  const dsv4_kernel *k;
  LLVMValueRef smem, lane; /* this warp's ring; i32 lane */
  LLVMValueRef base;       /* i32 first position of the warp's first step */
  LLVMValueRef cmax, breq; /* the rows' longest context; i64 batch entry */
} warp_ring;

static LLVMValueRef ring_stage(dsv4_kb *kb, const warp_ring *r, LLVMValueRef it)
{
  LLVMValueRef s = LLVMBuildURem(kb->b, it, kb_i32(kb, DSV4_LOGITS_STAGES), "");
  return kb_byte_ptr(kb, r->smem,
                     LLVMBuildMul(kb->b, kb_zext64(kb, s), kb_i64(kb, RING_STAGE_BYTES(r->k->layout.dim)), ""));
}

/* i32 first position of step it (the warps interleave, 16 positions each) */
static LLVMValueRef ring_p0(dsv4_kb *kb, const warp_ring *r, LLVMValueRef it)
{
  return LLVMBuildAdd(kb->b, r->base, LLVMBuildMul(kb->b, it, kb_i32(kb, LG_WARPS * 16), ""), "p0");
}

/* Issue the copies of step it into its stage: lanes 0..15 find the rows
 * (and write their validity and scales), every lane copies 16-byte pieces
 * of rows whose addresses it gets by shuffle. */
static void ring_fill(dsv4_kb *kb, const warp_ring *r, LLVMValueRef it)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_layout *L = &r->k->layout;
  int D = L->dim, RS = D + 16;
  LLVMValueRef st = ring_stage(kb, r, it), cache = kb_arg(kb, LG_cache);
  LLVMValueRef my_row = LLVMBuildAnd(b, r->lane, kb_i32(kb, 15), "");
  LLVMValueRef pos = kb_zext64(kb, LLVMBuildAdd(b, ring_p0(kb, r, it), my_row, ""));
  lg_kpos kp = lg_locate(kb, L, pos, r->cmax, r->breq);
  LLVMValueRef ok32 = LLVMBuildZExt(b, kp.ok, kb->i32, "");
  LLVMValueRef my_word = LLVMBuildMul(b, kb_zext64(kb, my_row), kb_i64(kb, 4), "");
  kb_if_t finders = kb_if(kb, LLVMBuildICmp(b, LLVMIntULT, r->lane, kb_i32(kb, 16), ""), "scale");
  kb_store(kb, ok32, kb_byte_ptr(kb, st, LLVMBuildAdd(b, kb_i64(kb, 16 * RS + 64), my_word, "")), 4);
  kb->t->cp_async(kb, kb_byte_ptr(kb, st, LLVMBuildAdd(b, kb_i64(kb, 16 * RS), my_word, "")),
                  kb_byte_ptr(kb, cache, LLVMBuildSelect(b, kp.ok, kp.scale, kb_i64(kb, 0), "")), 4,
                  LLVMBuildSelect(b, kp.ok, kb_i32(kb, 4), kb_i32(kb, 0), ""));
  kb_endif(kb, &finders);
  LLVMValueRef row_lo = LLVMBuildBitCast(b, LLVMBuildTrunc(b, kp.row, kb->i32, ""), kb->f32, "");
  LLVMValueRef row_hi =
      LLVMBuildBitCast(b, LLVMBuildTrunc(b, LLVMBuildLShr(b, kp.row, kb_i64(kb, 32), ""), kb->i32, ""), kb->f32, "");
  LLVMValueRef ok_bits = LLVMBuildBitCast(b, ok32, kb->f32, "");
  for (int ch = 0; ch < D / 32; ch++) {
    LLVMValueRef piece = LLVMBuildAdd(b, r->lane, kb_i32(kb, ch * 32), "");
    LLVMValueRef row = LLVMBuildUDiv(b, piece, kb_i32(kb, D / 16), ""),
                 col = LLVMBuildURem(b, piece, kb_i32(kb, D / 16), "");
    LLVMValueRef addr_lo = LLVMBuildBitCast(b, kb->t->shfl_idx(kb, row_lo, row), kb->i32, "");
    LLVMValueRef addr_hi = LLVMBuildBitCast(b, kb->t->shfl_idx(kb, row_hi, row), kb->i32, "");
    LLVMValueRef row_ok = LLVMBuildICmp(
        b, LLVMIntNE, LLVMBuildBitCast(b, kb->t->shfl_idx(kb, ok_bits, row), kb->i32, ""), kb_i32(kb, 0), "");
    LLVMValueRef addr =
        LLVMBuildOr(b, kb_zext64(kb, addr_lo), LLVMBuildShl(b, kb_zext64(kb, addr_hi), kb_i64(kb, 32), ""), "");
    LLVMValueRef piece_off = LLVMBuildMul(b, kb_zext64(kb, col), kb_i64(kb, 16), "");
    LLVMValueRef dst =
        kb_byte_ptr(kb, st, LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, row), kb_i64(kb, RS), ""), piece_off, ""));
    kb->t->cp_async(
        kb, dst,
        kb_byte_ptr(kb, cache, LLVMBuildSelect(b, row_ok, LLVMBuildAdd(b, addr, piece_off, ""), kb_i64(kb, 0), "")), 16,
        LLVMBuildSelect(b, row_ok, kb_i32(kb, 16), kb_i32(kb, 0), ""));
  }
}

/* The matrix forms' CTA takes next_n (<= DSV4_LOGITS_MAX_NEXT_N) rows
 * from r0 (i32).  The warp form stages their weights into shared ws (f32,
 * rows past next_n not written, never read), in the order the epilogue
 * reads them: column f = j H + h (row j's head h) is block i = f / 8, pair
 * c = f % 8 / 2, e = f % 2 of the accumulator layout, and sits at
 * ws_index(): the four
 * weights of blocks i, i + 1 (i even) of quad lane c are one 16-byte piece,
 * and the four lanes' pieces are adjacent (one conflict-free load). */
static LLVMValueRef ws_index(dsv4_kb *kb, LLVMValueRef c, LLVMValueRef i, LLVMValueRef e)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef chunk =
      LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildLShr(b, i, kb_i32(kb, 1), ""), kb_i32(kb, 4), ""), c, "");
  LLVMValueRef w =
      LLVMBuildAdd(b, LLVMBuildMul(b, chunk, kb_i32(kb, 2), ""), LLVMBuildAnd(b, i, kb_i32(kb, 1), ""), "");
  return LLVMBuildAdd(b, LLVMBuildMul(b, w, kb_i32(kb, 2), ""), e, "");
}

static void stage_weights(dsv4_kb *kb, const dsv4_kernel *k, LLVMValueRef r0, LLVMValueRef ws, LLVMValueRef tid,
                          int threads)
{
  LLVMBuilderRef b = kb->b;
  int H = k->heads;
  for (int c0 = 0; c0 < DSV4_LOGITS_MAX_NEXT_N * H; c0 += threads) {
    LLVMValueRef f = LLVMBuildAdd(b, kb_i32(kb, c0), tid, "");
    kb_if_t in = kb_if(
        kb, LLVMBuildICmp(b, LLVMIntSLT, f, LLVMBuildMul(b, kb_arg(kb, LG_next_n), kb_i32(kb, H), ""), ""), "wcopy");
    LLVMValueRef at = ws_index(kb, LLVMBuildAnd(b, LLVMBuildLShr(b, f, kb_i32(kb, 1), ""), kb_i32(kb, 3), ""),
                               LLVMBuildLShr(b, f, kb_i32(kb, 3), ""), LLVMBuildAnd(b, f, kb_i32(kb, 1), ""));
    kb_store(kb, kb_load(kb, kb->f32, kb_byte_ptr(kb, kb_arg(kb, LG_weights), lg_weight_at(kb, r0, f, H)), 4),
             kb_byte_ptr(kb, ws, LLVMBuildMul(b, kb_zext64(kb, at), kb_i64(kb, 4), "")), 4);
    kb_endif(kb, &in);
  }
}

/* The warp-matrix form's epilogue (the warpgroup form's head sum is a
 * product: logits_warpgroup.c's wsum_op).  relu_weigh: for nb (1 or 2) accumulator blocks from
 * block i0 (each rows g, g + 8 and columns 8i + 2c, + 1: the PTX m16n8
 * layout), part[hh] += max(acc[4 (i - i0) + 2 hh + e], 0) * weight(column
 * 8i + 2c + e) over i and e, as a max and an fma (maxnum: a NaN gives 0,
 * as the reference's max(0, x) comparison does), from wv: the 2 nb weights of those columns (ws_load: one load
 * from shared ws, as ws_index lays them out). */
static LLVMValueRef ws_load(dsv4_kb *kb, LLVMValueRef ws, LLVMValueRef c, int i0, int nb)
{
  LLVMValueRef at = ws_index(kb, c, kb_i32(kb, i0), kb_i32(kb, 0));
  return kb_load(kb, LLVMVectorType(kb->f32, 2 * nb),
                 kb_byte_ptr(kb, ws, LLVMBuildMul(kb->b, kb_zext64(kb, at), kb_i64(kb, 4), "")), 8 * nb);
}

static void relu_weigh(dsv4_kb *kb, LLVMValueRef wv, int nb, const LLVMValueRef *acc, LLVMValueRef part[2])
{
  LLVMBuilderRef b = kb->b;
  LLVMTypeRef f32x2[2] = {kb->f32, kb->f32}, f32x3[3] = {kb->f32, kb->f32, kb->f32};
  for (int i = 0; i < nb; i++)
    for (int hh = 0; hh < 2; hh++)
      for (int e = 0; e < 2; e++) {
        LLVMValueRef max_args[2] = {acc[4 * i + 2 * hh + e], LLVMConstReal(kb->f32, 0.0)};
        LLVMValueRef fma_args[3] = {kb_call(kb, "llvm.maxnum.f32", kb->f32, f32x2, max_args, 2, LLVMCCallConv),
                                    LLVMBuildExtractElement(b, wv, kb_i32(kb, 2 * i + e), ""), part[hh]};
        part[hh] = kb_call(kb, "llvm.fma.f32", kb->f32, f32x3, fma_args, 3, LLVMCCallConv);
      }
}

/* The quad's sums: v[0], v[1] are this lane's parts of two sums over the
 * four lanes of a quad (lane % 4 = c); returns the whole of sum c % 2,
 * reduce-scatter style (2 shuffles where two butterflies take 4). */
static LLVMValueRef quad_sum(dsv4_kb *kb, LLVMValueRef c, const LLVMValueRef *v)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef odd = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, c, kb_i32(kb, 1), ""), kb_i32(kb, 0), "");
  LLVMValueRef mine = LLVMBuildSelect(b, odd, v[1], v[0], ""), send = LLVMBuildSelect(b, odd, v[0], v[1], "");
  LLVMValueRef t = LLVMBuildFAdd(b, mine, kb->t->shfl_xor(kb, send, 1), "");
  return LLVMBuildFAdd(b, t, kb->t->shfl_xor(kb, t, 2), "");
}

/* What the warp form's steps share: the lane's place, the CTA's rows, the
 * staged q and weights. */
typedef struct {
  const dsv4_kernel *k;
  LLVMValueRef g, c, slice;   /* lane >> 2, lane & 3 (i32); c's D/4-byte slice of a row (i64) */
  LLVMValueRef r0, next_n;    /* the CTA's first row, how many it takes (i32) */
  LLVMValueRef qs, ws, qlane; /* staged q rows and weights; the lane's bytes of a staged q row (i64) */
  LLVMValueRef ctxj[DSV4_LOGITS_MAX_NEXT_N];
} warp_cta;

/* The K rows of a landed stage as A fragments (rows g: a0, a2; g + 8: a1,
 * a3), and the scales and validity of rows g, g + 8. */
static void warp_stage_a(dsv4_kb *kb, const warp_cta *w, LLVMValueRef stage, LLVMValueRef (*A)[4], LLVMValueRef *kscale,
                         LLVMValueRef *kvalid)
{
  LLVMBuilderRef b = kb->b;
  int D = w->k->layout.dim, KS = D / 32, CW = D / 64, RS = D + 16;
  LLVMTypeRef v4 = LLVMVectorType(kb->i32, 4);
  LLVMValueRef g = w->g, kwords[16];
  for (int hh = 0; hh < 2; hh++) {
    LLVMValueRef row_off =
        LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, LLVMBuildAdd(b, g, kb_i32(kb, hh * 8), "")), kb_i64(kb, RS), ""),
                     w->slice, "");
    for (int q = 0; q < CW; q++) {
      LLVMValueRef v = kb_load(kb, v4, kb_byte_ptr(kb, stage, LLVMBuildAdd(b, row_off, kb_i64(kb, q * 16), "")), 16);
      for (int e = 0; e < 4; e++)
        kwords[hh * CW * 4 + q * 4 + e] = LLVMBuildExtractElement(b, v, kb_i32(kb, e), "");
    }
    LLVMValueRef word_off =
        LLVMBuildMul(b, kb_zext64(kb, LLVMBuildAdd(b, g, kb_i32(kb, hh * 8), "")), kb_i64(kb, 4), "");
    kscale[hh] = kb_load(kb, kb->f32, kb_byte_ptr(kb, stage, LLVMBuildAdd(b, kb_i64(kb, 16 * RS), word_off, "")), 4);
    kvalid[hh] = LLVMBuildICmp(
        b, LLVMIntNE,
        kb_load(kb, kb->i32, kb_byte_ptr(kb, stage, LLVMBuildAdd(b, kb_i64(kb, 16 * RS + 64), word_off, "")), 4),
        kb_i32(kb, 0), "");
  }
  for (int ks = 0; ks < KS; ks++) {
    A[ks][0] = kwords[2 * ks], A[ks][2] = kwords[2 * ks + 1];
    A[ks][1] = kwords[CW * 4 + 2 * ks], A[ks][3] = kwords[CW * 4 + 2 * ks + 1];
  }
}

/* Row j's part of a step (when j < next_n): its heads' products with the
 * stage's A, the relu-weighted head sum, and the logits of positions
 * p0 + g (+ 8), stored by quad lanes 0 and 1. */
static void warp_row(dsv4_kb *kb, const warp_cta *w, int j, LLVMValueRef (*A)[4], LLVMValueRef p0,
                     const LLVMValueRef *kscale, const LLVMValueRef *kvalid)
{
  LLVMBuilderRef b = kb->b;
  int H = w->k->heads, D = w->k->layout.dim, NT = H / 8, KS = D / 32, CW = D / 64, QS = D + 16;
  LLVMTypeRef v4 = LLVMVectorType(kb->i32, 4);
  LLVMValueRef zero = LLVMConstReal(kb->f32, 0.0), g = w->g, c = w->c;
  kb_if_t row_j = kb_if(kb, LLVMBuildICmp(b, LLVMIntSLT, kb_i32(kb, j), w->next_n, ""), "rowj");
  LLVMValueRef part[2] = {zero, zero};
  for (int nt = 0; nt < NT; nt++) {
    LLVMValueRef qfrag[8][2], acc[4] = {zero, zero, zero, zero};
    for (int q = 0; q < CW; q++) { /* head 8 nt + g of row j, this thread's slice */
      long long off = ((long long)j * H + nt * 8) * QS + q * 16;
      LLVMValueRef v = kb_load(kb, v4, kb_byte_ptr(kb, w->qs, LLVMBuildAdd(b, w->qlane, kb_i64(kb, off), "")), 16);
      for (int e = 0; e < 4; e++)
        qfrag[(q * 4 + e) / 2][e % 2] = LLVMBuildExtractElement(b, v, kb_i32(kb, e), "");
    }
    for (int ks = 0; ks < KS; ks++)
      kb->t->mma_e4m3_16x8x32(kb, A[ks], qfrag[ks], acc, acc);
    relu_weigh(kb, ws_load(kb, w->ws, c, (j * H + nt * 8) / 8, 1), 1, acc, part);
  }
  /* lanes 0 and 1 of the quad store rows g and g + 8 */
  LLVMValueRef sum = quad_sum(kb, c, part), hh = LLVMBuildAnd(b, c, kb_i32(kb, 1), "");
  LLVMValueRef upper = LLVMBuildICmp(b, LLVMIntNE, hh, kb_i32(kb, 0), "");
  lg_store_logit(kb, NULL, sum, LLVMBuildICmp(b, LLVMIntULT, c, kb_i32(kb, 2), ""),
                 kb_zext64(kb, LLVMBuildAdd(b, w->r0, kb_i32(kb, j), "")),
                 LLVMBuildAdd(b, p0, LLVMBuildAdd(b, g, LLVMBuildMul(b, hh, kb_i32(kb, 8), ""), ""), ""),
                 LLVMBuildSelect(b, upper, kvalid[1], kvalid[0], ""), w->ctxj[j],
                 LLVMBuildSelect(b, upper, kscale[1], kscale[0], ""));
  kb_endif(kb, &row_j);
}

/* Kernel k's body in the warp-matrix form; 1 when its shared memory is not
 * dsv4_logits_warp_shared_bytes() (the checker's rule is out of step). */
int lg_warp(dsv4_kb *kb, const dsv4_kernel *k)
{
  LLVMBuilderRef b = kb->b;
  int H = k->heads, D = k->layout.dim, NM = DSV4_LOGITS_MAX_NEXT_N, QS = D + 16, threads = LG_WARPS * 32;
  warp_cta w = {.k = k};
  LLVMValueRef tid = kb->t->thread_id(kb);
  LLVMValueRef warp = LLVMBuildUDiv(b, tid, kb_i32(kb, 32), "warp"), lane = LLVMBuildURem(b, tid, kb_i32(kb, 32), "");
  w.g = LLVMBuildLShr(b, lane, kb_i32(kb, 2), "g"), w.c = LLVMBuildAnd(b, lane, kb_i32(kb, 3), "c");
  /* one CTA per (batch entry, chunk of positions): all next_n rows of the
   * entry share its K rows, loaded once */
  LLVMValueRef batch = kb->t->block_id(kb, 1);
  w.next_n = kb_arg(kb, LG_next_n);
  w.r0 = LLVMBuildMul(b, batch, w.next_n, "r0");
  kb_return_if(kb, LLVMBuildICmp(b, LLVMIntSGE, w.r0, kb_arg(kb, LG_rows), "")); /* whole CTAs */
  LLVMValueRef breq = kb_zext64(kb, batch);
  w.slice = LLVMBuildMul(b, kb_zext64(kb, w.c), kb_i64(kb, D / 4), "slice");
  /* the rows' q and weights staged once in shared memory (q rows padded by
   * 16 bytes: a quarter warp's 16-byte reads of 2 rows x 4 slices hit
   * distinct banks), read per m-tile as q^T fragments and column weights */
  if (NM * H * QS + NM * H * 4 + LG_WARPS * DSV4_LOGITS_STAGES * RING_STAGE_BYTES(D) !=
      dsv4_logits_warp_shared_bytes(D, H))
    return 1; /* form_rules.h's rule (choose_form's record) is out of step with the arrays below */
  w.qs = kb_shared_array(kb, kb->i8, NM * H * QS, "dsv4_q");
  w.ws = kb_shared_array(kb, kb->f32, NM * H, "dsv4_w");
  LLVMValueRef qbytes =
      LLVMBuildMul(b, kb_zext64(kb, w.next_n), kb_i64(kb, (long long)H * D), ""); /* rows past next_n: zeros */
  kb_stage_rows(kb, kb_arg(kb, LG_q), LLVMBuildMul(b, kb_zext64(kb, w.r0), kb_i64(kb, (long long)H * D), ""), NULL,
                (long long)NM * H * D, qbytes, D, QS, w.qs, tid, threads);
  stage_weights(kb, k, w.r0, w.ws, tid, threads);
  kb->t->barrier(kb);
  LLVMValueRef cmax = lg_row_contexts(kb, w.r0, w.ctxj);
  w.qlane = LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, w.g), kb_i64(kb, QS), ""), w.slice, "qlane");
  int P = k->tile.tokens_per_cta, iters = P / (LG_WARPS * 16);
  LLVMValueRef base = LLVMBuildAdd(b, LLVMBuildMul(b, kb->t->block_id(kb, 0), kb_i32(kb, P), ""),
                                   LLVMBuildMul(b, warp, kb_i32(kb, 16), ""), "base");
  /* each warp's ring of S m-tiles in shared memory, filled with cp.async
   * S - 1 steps ahead: K bytes in flight without registers. */
  int S = DSV4_LOGITS_STAGES;
  warp_ring ring = {k, NULL, lane, base, cmax, breq};
  ring.smem = kb_shared_array(kb, kb->i8, LG_WARPS * S * RING_STAGE_BYTES(D), "dsv4_ring");
  ring.smem = kb_byte_ptr(kb, ring.smem,
                          LLVMBuildMul(b, kb_zext64(kb, warp), kb_i64(kb, (long long)S * RING_STAGE_BYTES(D)), ""));
  for (int s0 = 0; s0 < S - 1; s0++) {
    if (s0 < iters)
      ring_fill(kb, &ring, kb_i32(kb, s0));
    kb->t->cp_async_commit(kb);
  }
  kb_loop_t lp;
  kb_for(kb, &lp, kb_i32(kb, 0), kb_i32(kb, iters), 0, NULL);
  kb->t->warp_sync(kb); /* every lane is done with the stage refilled next */
  LLVMValueRef next_it = LLVMBuildAdd(b, lp.iv, kb_i32(kb, S - 1), "");
  kb_if_t produce = kb_if(kb, LLVMBuildICmp(b, LLVMIntSLT, next_it, kb_i32(kb, iters), ""), "produce");
  ring_fill(kb, &ring, next_it);
  kb_endif(kb, &produce);
  kb->t->cp_async_commit(kb); /* (possibly empty: the group count stays in step) */
  kb->t->cp_async_wait(kb, S - 1);
  kb->t->warp_sync(kb); /* the other lanes' copies of this stage, visible */
  LLVMValueRef A[8][4], kscale[2], kvalid[2];
  warp_stage_a(kb, &w, ring_stage(kb, &ring, lp.iv), A, kscale, kvalid);
  LLVMValueRef p0 = ring_p0(kb, &ring, lp.iv);
  for (int j = 0; j < NM; j++)
    warp_row(kb, &w, j, A, p0, kscale, kvalid);
  kb_for_end(kb, &lp, NULL);
  kb->t->cp_async_wait(kb, 0);
  return 0;
}
