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
 *
 * Targets with e4m3 warp matrix units (PTX sm_89+: mma.sync m16n8k32) take
 * the matrix path instead, for the same launch geometry: the CTA's warps
 * split its positions 8 at a time.
 */
#include <math.h>

#include "gen.h"

enum {
  LOGITS, Q, CACHE, WEIGHTS, CTX, TABLE, ROWS, NEXT_N, NUM_BLOCKS, BLOCK_SIZE, BLOCK_STRIDE, MAX_BLOCKS, ROW_LEN,
  ROW_STRIDE, KV_MAP, KV_MAP_FRESH
};

/* 16 e4m3 values of a 16-byte vector at byte pointer p, as f32. */
static void load16_e4m3(dsv4_kb *kb, LLVMValueRef p, LLVMValueRef *f)
{
  LLVMValueRef v = kb_load(kb, LLVMVectorType(kb->i32, 4), p, 16);
  v = LLVMBuildBitCast(kb->b, v, LLVMVectorType(kb->i16, 8), ""); /* pairs as 16-bit halves, no bytes taken apart */
  for (int j = 0; j < 16; j += 2)
    kb_e4m3x2_pair_to_f32(kb, LLVMBuildExtractElement(kb->b, v, kb_i32(kb, j / 2), ""), &f[j]);
}

/* Where position pos (i64) of a row of request breq (i64, context ctx) lives:
 * ok (i1) says it is a position to compute (before ctx and the row's end,
 * inside the block table, at a block of the cache); row and scale are the
 * i64 byte offsets, in the cache, of its values and of its scale (those of
 * block 0 when !ok, so always in bounds). */
typedef struct {
  LLVMValueRef ok, row, scale;
} kpos;

static kpos locate(dsv4_kb *kb, const dsv4_layout *L, LLVMValueRef pos, LLVMValueRef ctx, LLVMValueRef breq)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef bs = kb_sext64(kb, kb_arg(kb, BLOCK_SIZE)), maxb = kb_sext64(kb, kb_arg(kb, MAX_BLOCKS));
  /* a shift and a mask for a power-of-two block size (the usual case) */
  LLVMValueRef col, row;
  kb_udivrem_fast(kb, pos, bs, &col, &row);
  LLVMValueRef want = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSLT, pos, kb_sext64(kb, ctx), ""),
                                   LLVMBuildICmp(b, LLVMIntSLT, pos, kb_sext64(kb, kb_arg(kb, ROW_LEN)), ""), "");
  want = LLVMBuildAnd(b, want, LLVMBuildICmp(b, LLVMIntSLT, col, maxb, ""), "");
  LLVMValueRef to = LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, breq, maxb, ""), col, ""), kb_i64(kb, 4), "");
  LLVMValueRef pre_blk = kb_load_if(kb, want, kb->i32, kb_arg(kb, TABLE), to, 4, kb_i32(kb, 0));
  LLVMValueRef bl = kb_sext64(kb, pre_blk);
  kpos k;
  k.ok = LLVMBuildAnd(b, want, LLVMBuildICmp(b, LLVMIntSGE, bl, kb_i64(kb, 0), ""), "");
  k.ok = LLVMBuildAnd(b, k.ok, LLVMBuildICmp(b, LLVMIntSLT, bl, kb_sext64(kb, kb_arg(kb, NUM_BLOCKS)), ""), "valid");
  LLVMValueRef bb = LLVMBuildMul(b, LLVMBuildSelect(b, k.ok, bl, kb_i64(kb, 0), ""), kb_arg(kb, BLOCK_STRIDE), "");
  k.row = LLVMBuildAdd(b, bb, LLVMBuildAdd(b, LLVMBuildMul(b, row, kb_i64(kb, L->row_bytes), ""),
                                           kb_i64(kb, L->seg[0].offset), ""), "krow");
  int tail = L->scale_place == DSV4_SCALES_BLOCK_TAIL;
  LLVMValueRef so = LLVMBuildMul(b, row, kb_i64(kb, tail ? L->scale_row_bytes : L->row_bytes), "");
  if (tail)
    so = LLVMBuildAdd(b, so, LLVMBuildMul(b, bs, kb_i64(kb, L->row_bytes), ""), "");
  k.scale = LLVMBuildAdd(b, bb, LLVMBuildAdd(b, so, kb_i64(kb, L->seg[0].scale_offset), ""), "kscale");
  return k;
}

/* Whether this target can take the matrix path for kernel k. */
static int use_mma(dsv4_kb *kb, const dsv4_kernel *k)
{
  const dsv4_target_ir *t = kb->t;
  int warps = k->tile.threads / 32;
  return t->mma_e4m3_16x8x32 && t->shfl_xor && t->shfl_idx && t->warp == 32 &&
         k->tile.tokens_per_cta / (k->tile.threads / 32) <= 64 && k->heads * (k->layout.dim + 16) <= 40960 && k->layout.dim % 16 == 0 && t->mma_e4m3_16x8x32(kb, NULL, NULL, NULL, NULL) &&
         k->heads % 16 == 0 && k->heads <= 128 && k->layout.dim % 32 == 0 && k->layout.dim <= 256 &&
         k->tile.threads % 32 == 0 && warps > 0 && k->tile.tokens_per_cta % (warps * 8) == 0 &&
         k->layout.row_bytes % 4 == 0 && k->layout.seg[0].offset % 4 == 0;
}

/* The matrix path (PTX m16n8k32 e4m3): a warp holds the row's q as A
 * fragments (heads x dims) and, 8 positions at a time, takes K rows as the
 * B fragment; the relu-weighted head sum folds the accumulator's rows, a
 * butterfly over the lanes that share a column finishes it. */
static void mma_logits(dsv4_kb *kb, const dsv4_kernel *k)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_layout *L = &k->layout;
  int H = k->heads, D = L->dim, MT = H / 16, KS = D / 32, warps = k->tile.threads / 32;
  int ppw = k->tile.tokens_per_cta / warps, NT = ppw / 8;
  LLVMValueRef tid = kb->t->thread_id(kb);
  LLVMValueRef warp = LLVMBuildUDiv(b, tid, kb_i32(kb, 32), "warp"), lane = LLVMBuildURem(b, tid, kb_i32(kb, 32), "");
  LLVMValueRef gid = LLVMBuildLShr(b, lane, kb_i32(kb, 2), "gid"), tig = LLVMBuildAnd(b, lane, kb_i32(kb, 3), "tig");
  LLVMValueRef r = kb->t->block_id(kb, 1);
  kb_return_if(kb, LLVMBuildICmp(b, LLVMIntSGE, r, kb_arg(kb, ROWS), "")); /* whole CTAs */
  LLVMValueRef r64 = kb_zext64(kb, r);
  LLVMValueRef ctx = kb_load(kb, kb->i32, kb_byte_ptr(kb, kb_arg(kb, CTX), LLVMBuildMul(b, r64, kb_i64(kb, 4), "")), 4);
  LLVMValueRef breq = LLVMBuildUDiv(b, r64, kb_sext64(kb, kb_arg(kb, NEXT_N)), "b");
  /* the row's q (H x D bytes) staged once per CTA in shared memory with
   * 16-byte loads, then read as A fragments: a[mt][ks][0..3] =
   * q[h][d..d+3], h = mt*16 + gid (+8), d = ks*32 + tig*4 (+16) */
  LLVMValueRef a[8][8][4], w0[8], w1[8];
  int QS = D + 16; /* padded rows: the 8 rows a fragment load touches hit 8 bank groups */
  LLVMValueRef qs = kb_shared_array(kb, kb->i8, H * QS, "dsv4_q");
  kb_stage_rows(kb, kb_arg(kb, Q), LLVMBuildMul(b, r64, kb_i64(kb, (long long)H * D), ""), (long long)H * D, NULL, D, QS,
                qs, tid, k->tile.threads);
  kb->t->barrier(kb);
  LLVMValueRef hrow = LLVMBuildMul(b, kb_zext64(kb, gid), kb_i64(kb, QS), "");
  LLVMValueRef dcol = LLVMBuildMul(b, kb_zext64(kb, tig), kb_i64(kb, 4), "");
  for (int mt = 0; mt < MT; mt++)
    for (int ks = 0; ks < KS; ks++)
      for (int i = 0; i < 4; i++) {
        long long c = (long long)(mt * 16 + (i & 1) * 8) * QS + ks * 32 + (i >> 1) * 16;
        LLVMValueRef off = LLVMBuildAdd(b, hrow, LLVMBuildAdd(b, dcol, kb_i64(kb, c), ""), "");
        a[mt][ks][i] = kb_load(kb, kb->i32, kb_byte_ptr(kb, qs, off), 4);
      }
  LLVMValueRef wbase = LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, r64, kb_i64(kb, H), ""), kb_zext64(kb, gid), ""),
                                    kb_i64(kb, 4), "");
  for (int mt = 0; mt < MT; mt++) {
    w0[mt] = kb_load(kb, kb->f32, kb_byte_ptr(kb, kb_arg(kb, WEIGHTS), LLVMBuildAdd(b, wbase, kb_i64(kb, mt * 64), "")), 4);
    w1[mt] = kb_load(kb, kb->f32, kb_byte_ptr(kb, kb_arg(kb, WEIGHTS), LLVMBuildAdd(b, wbase, kb_i64(kb, mt * 64 + 32), "")), 4);
  }
  LLVMValueRef pw = LLVMBuildAdd(b, LLVMBuildMul(b, kb->t->block_id(kb, 0), kb_i32(kb, k->tile.tokens_per_cta), ""),
                                 LLVMBuildMul(b, warp, kb_i32(kb, ppw), ""), "pw");
  LLVMValueRef zero = LLVMConstReal(kb->f32, 0.0);
  /* every n-tile's loads first (table, K fragments, scale), then the math:
   * NT tiles of loads in flight instead of one */
  LLVMValueRef BF[8][8][2], KSC[8], P0[8];
  for (int nt = 0; nt < NT && nt < 8; nt++) {
    LLVMValueRef p0 = LLVMBuildAdd(b, pw, kb_i32(kb, nt * 8), "p0");
    P0[nt] = p0;
    /* B fragment: K row of position p0 + gid, bytes ks*32 + tig*4 (+16) */
    LLVMValueRef pos = kb_zext64(kb, LLVMBuildAdd(b, p0, gid, ""));
    kpos kp = locate(kb, L, pos, ctx, breq);
    LLVMValueRef ok = kp.ok, so = kp.scale;
    LLVMValueRef krow = LLVMBuildAdd(b, kp.row, dcol, "");
    LLVMValueRef bf[8][2], ld[8][2], ksc;
    { /* the position's B loads and its scale, under one guard */
      LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
      kb_if_t g = kb_if(kb, ok, "kload");
      for (int ks = 0; ks < KS; ks++)
        for (int i = 0; i < 2; i++)
          ld[ks][i] = kb_load(kb, kb->i32, kb_byte_ptr(kb, kb_arg(kb, CACHE), LLVMBuildAdd(b, krow, kb_i64(kb, ks * 32 + i * 16), "")), 4);
      LLVMValueRef sc = kb_load(kb, kb->f32, kb_byte_ptr(kb, kb_arg(kb, CACHE), so), 4);
      LLVMBasicBlockRef got = LLVMGetInsertBlock(b);
      kb_endif(kb, &g);
      for (int ks = 0; ks < KS; ks++)
        for (int i = 0; i < 2; i++)
          bf[ks][i] = kb_phi(kb, ld[ks][i], got, kb_i32(kb, 0), pre);
      /* an invalid position's scale is -inf: its logit becomes -inf below */
      ksc = kb_phi(kb, sc, got, LLVMConstReal(kb->f32, -INFINITY), pre);
    }
    for (int ks = 0; ks < KS; ks++)
      for (int i = 0; i < 2; i++)
        BF[nt][ks][i] = bf[ks][i];
    KSC[nt] = ksc;
  }
  for (int nt = 0; nt < NT && nt < 8; nt++) {
    LLVMValueRef p0 = P0[nt], ksc = KSC[nt];
    LLVMValueRef(*bf)[2] = BF[nt];
    LLVMValueRef part[2] = {zero, zero};
    for (int mt = 0; mt < MT; mt++) {
      LLVMValueRef acc[4] = {zero, zero, zero, zero};
      for (int ks = 0; ks < KS; ks++)
        kb->t->mma_e4m3_16x8x32(kb, a[mt][ks], bf[ks], acc, acc);
      for (int j = 0; j < 2; j++) {
        LLVMValueRef r0 = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, acc[j], zero, ""), acc[j], zero, "");
        LLVMValueRef r1 = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, acc[2 + j], zero, ""), acc[2 + j], zero, "");
        part[j] = LLVMBuildFAdd(b, part[j], LLVMBuildFAdd(b, LLVMBuildFMul(b, r0, w0[mt], ""),
                                                          LLVMBuildFMul(b, r1, w1[mt], ""), ""), "");
      }
    }
    for (int j = 0; j < 2; j++)
      for (int m = 4; m <= 16; m *= 2)
        part[j] = LLVMBuildFAdd(b, part[j], kb->t->shfl_xor(kb, part[j], m), "");
    /* lanes 0..3 write columns p0 + tig*2 + j; the column's scale comes from
     * the lane that loaded that position's row (lane = column * 4) */
    LLVMValueRef ksj[2];
    for (int j = 0; j < 2; j++)
      ksj[j] = kb->t->shfl_idx(kb, ksc, LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, tig, kb_i32(kb, 2), ""),
                                                                     kb_i32(kb, j), ""), kb_i32(kb, 4), ""));
    kb_if_t st = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, gid, kb_i32(kb, 0), ""), "store");
    for (int j = 0; j < 2; j++) {
      LLVMValueRef n = kb_zext64(kb, LLVMBuildAdd(b, p0, LLVMBuildAdd(b, LLVMBuildMul(b, tig, kb_i32(kb, 2), ""),
                                                                       kb_i32(kb, j), ""), ""));
      LLVMValueRef valid = LLVMBuildFCmp(b, LLVMRealONE, ksj[j], LLVMConstReal(kb->f32, -INFINITY), "");
      LLVMValueRef logit = LLVMBuildSelect(b, valid, LLVMBuildFMul(b, part[j], ksj[j], ""), LLVMConstReal(kb->f32, -INFINITY), "");
      kb_if_t in = kb_if(kb, LLVMBuildICmp(b, LLVMIntSLT, n, kb_sext64(kb, kb_arg(kb, ROW_LEN)), ""), "inrow");
      LLVMValueRef lo = LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, r64, kb_arg(kb, ROW_STRIDE), ""), n, ""), kb_i64(kb, 4), "");
      kb_store(kb, logit, kb_byte_ptr(kb, kb_arg(kb, LOGITS), lo), 4);
      kb_endif(kb, &in);
    }
    kb_endif(kb, &st);
  }
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
enum { MLW = DSV4_LOGITS_WARPS };

/* A warp's ring of DSV4_LOGITS_STAGES steps of K rows.  A stage is 16 rows
 * (padded by 16 bytes like q), 16 scales (zero-filled when invalid) and
 * 16 validity words. */
#define RING_SB(D) (16 * ((D) + 16) + 128)
typedef struct {
  const dsv4_kernel *k;
  LLVMValueRef ring, lane; /* this warp's ring; i32 lane */
  LLVMValueRef base;       /* i32 first position of the warp's first step */
  LLVMValueRef cmax, breq; /* the rows' longest context; i64 batch entry */
} kring;

static LLVMValueRef ring_stage(dsv4_kb *kb, const kring *r, LLVMValueRef it)
{
  LLVMValueRef s = LLVMBuildURem(kb->b, it, kb_i32(kb, DSV4_LOGITS_STAGES), "");
  return kb_byte_ptr(kb, r->ring, LLVMBuildMul(kb->b, kb_zext64(kb, s), kb_i64(kb, RING_SB(r->k->layout.dim)), ""));
}

/* i32 first position of step it (the warps interleave, 16 positions each) */
static LLVMValueRef ring_p0(dsv4_kb *kb, const kring *r, LLVMValueRef it)
{
  return LLVMBuildAdd(kb->b, r->base, LLVMBuildMul(kb->b, it, kb_i32(kb, MLW * 16), ""), "p0");
}

/* Issue the copies of step it into its stage: lanes 0..15 find the rows
 * (and write their validity and scales), every lane copies 16-byte pieces
 * of rows whose addresses it gets by shuffle. */
static void ring_fill(dsv4_kb *kb, const kring *r, LLVMValueRef it)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_layout *L = &r->k->layout;
  int D = L->dim, RS = D + 16;
  LLVMValueRef st = ring_stage(kb, r, it), cache = kb_arg(kb, CACHE);
  LLVMValueRef l16 = LLVMBuildAnd(b, r->lane, kb_i32(kb, 15), "");
  LLVMValueRef pos = kb_zext64(kb, LLVMBuildAdd(b, ring_p0(kb, r, it), l16, ""));
  kpos kp = locate(kb, L, pos, r->cmax, r->breq);
  LLVMValueRef oki = LLVMBuildZExt(b, kp.ok, kb->i32, "");
  LLVMValueRef l4 = LLVMBuildMul(b, kb_zext64(kb, l16), kb_i64(kb, 4), "");
  kb_if_t lf = kb_if(kb, LLVMBuildICmp(b, LLVMIntULT, r->lane, kb_i32(kb, 16), ""), "scale");
  kb_store(kb, oki, kb_byte_ptr(kb, st, LLVMBuildAdd(b, kb_i64(kb, 16 * RS + 64), l4, "")), 4);
  kb->t->cp_async(kb, kb_byte_ptr(kb, st, LLVMBuildAdd(b, kb_i64(kb, 16 * RS), l4, "")), kb_byte_ptr(kb, cache, LLVMBuildSelect(b, kp.ok, kp.scale, kb_i64(kb, 0), "")), 4,
                  LLVMBuildSelect(b, kp.ok, kb_i32(kb, 4), kb_i32(kb, 0), ""));
  kb_endif(kb, &lf);
  LLVMValueRef lo32 = LLVMBuildBitCast(b, LLVMBuildTrunc(b, kp.row, kb->i32, ""), kb->f32, "");
  LLVMValueRef hi32 = LLVMBuildBitCast(b, LLVMBuildTrunc(b, LLVMBuildLShr(b, kp.row, kb_i64(kb, 32), ""), kb->i32, ""), kb->f32, "");
  LLVMValueRef okf = LLVMBuildBitCast(b, oki, kb->f32, "");
  for (int ch = 0; ch < D / 32; ch++) {
    LLVMValueRef q = LLVMBuildAdd(b, r->lane, kb_i32(kb, ch * 32), "");
    LLVMValueRef rr = LLVMBuildUDiv(b, q, kb_i32(kb, D / 16), ""), pc = LLVMBuildURem(b, q, kb_i32(kb, D / 16), "");
    LLVMValueRef a0 = LLVMBuildBitCast(b, kb->t->shfl_idx(kb, lo32, rr), kb->i32, "");
    LLVMValueRef a1 = LLVMBuildBitCast(b, kb->t->shfl_idx(kb, hi32, rr), kb->i32, "");
    LLVMValueRef ok2 = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildBitCast(b, kb->t->shfl_idx(kb, okf, rr), kb->i32, ""), kb_i32(kb, 0), "");
    LLVMValueRef addr = LLVMBuildOr(b, kb_zext64(kb, a0), LLVMBuildShl(b, kb_zext64(kb, a1), kb_i64(kb, 32), ""), "");
    LLVMValueRef p16 = LLVMBuildMul(b, kb_zext64(kb, pc), kb_i64(kb, 16), "");
    LLVMValueRef dst = kb_byte_ptr(kb, st, LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, rr), kb_i64(kb, RS), ""), p16, ""));
    kb->t->cp_async(kb, dst, kb_byte_ptr(kb, cache, LLVMBuildSelect(b, ok2, LLVMBuildAdd(b, addr, p16, ""), kb_i64(kb, 0), "")), 16,
                    LLVMBuildSelect(b, ok2, kb_i32(kb, 16), kb_i32(kb, 0), ""));
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
  LLVMValueRef chunk = LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildLShr(b, i, kb_i32(kb, 1), ""), kb_i32(kb, 4), ""), c, "");
  LLVMValueRef w = LLVMBuildAdd(b, LLVMBuildMul(b, chunk, kb_i32(kb, 2), ""), LLVMBuildAnd(b, i, kb_i32(kb, 1), ""), "");
  return LLVMBuildAdd(b, LLVMBuildMul(b, w, kb_i32(kb, 2), ""), e, "");
}

/* The byte offset in `weights` of column f (i32, = j H + h: row r0 + j's
 * head h) of the CTA's rows from r0. */
static LLVMValueRef weight_at(dsv4_kb *kb, LLVMValueRef r0, LLVMValueRef f, int H)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef row0 = LLVMBuildMul(b, kb_zext64(kb, r0), kb_i64(kb, (long long)H * 4), "");
  return LLVMBuildAdd(b, row0, LLVMBuildMul(b, kb_zext64(kb, f), kb_i64(kb, 4), ""), "");
}

static void stage_weights(dsv4_kb *kb, const dsv4_kernel *k, LLVMValueRef r0, LLVMValueRef ws, LLVMValueRef tid,
                          int threads)
{
  LLVMBuilderRef b = kb->b;
  int H = k->heads;
  for (int c0 = 0; c0 < DSV4_LOGITS_MAX_NEXT_N * H; c0 += threads) {
    LLVMValueRef f = LLVMBuildAdd(b, kb_i32(kb, c0), tid, "");
    kb_if_t in = kb_if(kb, LLVMBuildICmp(b, LLVMIntSLT, f, LLVMBuildMul(b, kb_arg(kb, NEXT_N), kb_i32(kb, H), ""), ""), "wcopy");
    LLVMValueRef at = ws_index(kb, LLVMBuildAnd(b, LLVMBuildLShr(b, f, kb_i32(kb, 1), ""), kb_i32(kb, 3), ""),
                               LLVMBuildLShr(b, f, kb_i32(kb, 3), ""), LLVMBuildAnd(b, f, kb_i32(kb, 1), ""));
    kb_store(kb, kb_load(kb, kb->f32, kb_byte_ptr(kb, kb_arg(kb, WEIGHTS), weight_at(kb, r0, f, H)), 4),
             kb_byte_ptr(kb, ws, LLVMBuildMul(b, kb_zext64(kb, at), kb_i64(kb, 4), "")), 4);
    kb_endif(kb, &in);
  }
}

/* The context lengths of rows r0 + j (0 past next_n) into ctxj; returns
 * the longest, up to which K rows are loaded. */
static LLVMValueRef row_contexts(dsv4_kb *kb, LLVMValueRef r0, LLVMValueRef *ctxj)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef cmax = kb_i32(kb, 0);
  for (int j = 0; j < DSV4_LOGITS_MAX_NEXT_N; j++) {
    LLVMValueRef in = LLVMBuildICmp(b, LLVMIntSLT, kb_i32(kb, j), kb_arg(kb, NEXT_N), "");
    LLVMValueRef ro = LLVMBuildMul(b, kb_zext64(kb, LLVMBuildAdd(b, r0, kb_i32(kb, j), "")), kb_i64(kb, 4), "");
    ctxj[j] = kb_load_if(kb, in, kb->i32, kb_arg(kb, CTX), ro, 4, kb_i32(kb, 0));
    cmax = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, ctxj[j], cmax, ""), ctxj[j], cmax, "");
  }
  return cmax;
}

/* The warp-matrix form's epilogue (the warpgroup form's head sum is a
 * product, wsum_op).  relu_weigh: for nb (1 or 2) accumulator blocks from
 * block i0 (each rows g, g + 8 and columns 8i + 2c, + 1: the PTX m16n8
 * layout), part[hh] += max(acc[4 (i - i0) + 2 hh + e], 0) * weight(column
 * 8i + 2c + e) over i and e, as a max and an fma (maxnum: a NaN gives 0,
 * as the reference's max(0, x) comparison does), from wv: the 2 nb weights of those columns (ws_load: one load
 * from shared ws, as ws_index lays them out). */
static LLVMValueRef ws_load(dsv4_kb *kb, LLVMValueRef ws, LLVMValueRef c, int i0, int nb)
{
  LLVMValueRef at = ws_index(kb, c, kb_i32(kb, i0), kb_i32(kb, 0));
  return kb_load(kb, LLVMVectorType(kb->f32, 2 * nb), kb_byte_ptr(kb, ws, LLVMBuildMul(kb->b, kb_zext64(kb, at), kb_i64(kb, 4), "")),
                 8 * nb);
}

static void relu_weigh(dsv4_kb *kb, LLVMValueRef wv, int nb, const LLVMValueRef *acc, LLVMValueRef part[2])
{
  LLVMBuilderRef b = kb->b;
  LLVMTypeRef f2[2] = {kb->f32, kb->f32}, f3[3] = {kb->f32, kb->f32, kb->f32};
  for (int i = 0; i < nb; i++)
    for (int hh = 0; hh < 2; hh++)
      for (int e = 0; e < 2; e++) {
        LLVMValueRef ma[2] = {acc[4 * i + 2 * hh + e], LLVMConstReal(kb->f32, 0.0)};
        LLVMValueRef fa[3] = {kb_call(kb, "llvm.maxnum.f32", kb->f32, f2, ma, 2, LLVMCCallConv),
                              LLVMBuildExtractElement(b, wv, kb_i32(kb, 2 * i + e), ""), part[hh]};
        part[hh] = kb_call(kb, "llvm.fma.f32", kb->f32, f3, fa, 3, LLVMCCallConv);
      }
}

/* The quad's sums: v[0], v[1] are this lane's parts of two sums over the
 * four lanes of a quad (lane % 4 = c); returns the whole of sum c % 2,
 * reduce-scatter style (2 shuffles where two butterflies take 4). */
static LLVMValueRef quad_sum(dsv4_kb *kb, LLVMValueRef c, const LLVMValueRef *v)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef b0 = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, c, kb_i32(kb, 1), ""), kb_i32(kb, 0), "");
  LLVMValueRef mine = LLVMBuildSelect(b, b0, v[1], v[0], ""), send = LLVMBuildSelect(b, b0, v[0], v[1], "");
  LLVMValueRef t = LLVMBuildFAdd(b, mine, kb->t->shfl_xor(kb, send, 1), "");
  return LLVMBuildFAdd(b, t, kb->t->shfl_xor(kb, t, 2), "");
}

/* Where `mine` and the position pos (i32) is in the row: logits row r64
 * (i64) at pos gets scale * sum where the position is ok and before ctx,
 * -inf where it is not. */
static void store_logit(dsv4_kb *kb, LLVMValueRef sum, LLVMValueRef mine, LLVMValueRef r64, LLVMValueRef pos,
                        LLVMValueRef ok, LLVMValueRef ctx, LLVMValueRef scale)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef valid = LLVMBuildAnd(b, ok, LLVMBuildICmp(b, LLVMIntSLT, pos, ctx, ""), "");
  LLVMValueRef logit = LLVMBuildSelect(b, valid, LLVMBuildFMul(b, sum, scale, ""), LLVMConstReal(kb->f32, -INFINITY), "");
  LLVMValueRef sto = LLVMBuildAnd(b, mine, LLVMBuildICmp(b, LLVMIntSLT, pos, kb_arg(kb, ROW_LEN), ""), "");
  kb_if_t f = kb_if(kb, sto, "store");
  LLVMValueRef lo = LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, r64, kb_arg(kb, ROW_STRIDE), ""), kb_zext64(kb, pos), ""),
                                 kb_i64(kb, 4), "");
  kb_store(kb, logit, kb_byte_ptr(kb, kb_arg(kb, LOGITS), lo), 4);
  kb_endif(kb, &f);
}

static int matrix_logits(dsv4_kb *kb, const dsv4_kernel *k)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_layout *L = &k->layout;
  int H = k->heads, D = L->dim, NT = H / 8, KS = D / 32, CW = D / 64; /* 16-byte pieces of a thread's D/4-byte slice */
  int NM = DSV4_LOGITS_MAX_NEXT_N, QS = D + 16, threads = MLW * 32;
  LLVMValueRef tid = kb->t->thread_id(kb);
  LLVMValueRef warp = LLVMBuildUDiv(b, tid, kb_i32(kb, 32), "warp"), lane = LLVMBuildURem(b, tid, kb_i32(kb, 32), "");
  LLVMValueRef g = LLVMBuildLShr(b, lane, kb_i32(kb, 2), "g"), c = LLVMBuildAnd(b, lane, kb_i32(kb, 3), "c");
  /* one CTA per (batch entry, chunk of positions): all next_n rows of the
   * entry share its K rows, loaded once */
  LLVMValueRef bq = kb->t->block_id(kb, 1), NN = kb_arg(kb, NEXT_N);
  LLVMValueRef r0 = LLVMBuildMul(b, bq, NN, "r0");
  kb_return_if(kb, LLVMBuildICmp(b, LLVMIntSGE, r0, kb_arg(kb, ROWS), "")); /* whole CTAs */
  LLVMValueRef breq = kb_zext64(kb, bq);
  LLVMValueRef slice = LLVMBuildMul(b, kb_zext64(kb, c), kb_i64(kb, D / 4), "slice");
  LLVMTypeRef v4 = LLVMVectorType(kb->i32, 4);
  LLVMValueRef zero = LLVMConstReal(kb->f32, 0.0);
  /* the rows' q and weights staged once in shared memory (q rows padded by
   * 16 bytes: a quarter warp's 16-byte reads of 2 rows x 4 slices hit
   * distinct banks), read per m-tile as q^T fragments and column weights */
  if (NM * H * QS + NM * H * 4 + MLW * DSV4_LOGITS_STAGES * RING_SB(D) != dsv4_logits_warp_shared_bytes(D, H))
    return 1; /* the checker's rule (dsv4_abi.h) is out of step with the arrays below */
  LLVMValueRef qs = kb_shared_array(kb, kb->i8, NM * H * QS, "dsv4_q");
  LLVMValueRef ws = kb_shared_array(kb, kb->f32, NM * H, "dsv4_w");
  LLVMValueRef qbytes = LLVMBuildMul(b, kb_zext64(kb, NN), kb_i64(kb, (long long)H * D), ""); /* rows past next_n: zeros */
  kb_stage_rows(kb, kb_arg(kb, Q), LLVMBuildMul(b, kb_zext64(kb, r0), kb_i64(kb, (long long)H * D), ""),
                (long long)NM * H * D, qbytes, D, QS, qs, tid, threads);
  stage_weights(kb, k, r0, ws, tid, threads);
  kb->t->barrier(kb);
  LLVMValueRef ctxj[DSV4_LOGITS_MAX_NEXT_N], cmax = row_contexts(kb, r0, ctxj);
  LLVMValueRef qlane = LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, g), kb_i64(kb, QS), ""), slice, "qlane");
  int P = k->tile.tokens_per_cta, iters = P / (MLW * 16);
  LLVMValueRef base = LLVMBuildAdd(b, LLVMBuildMul(b, kb->t->block_id(kb, 0), kb_i32(kb, P), ""),
                                   LLVMBuildMul(b, warp, kb_i32(kb, 16), ""), "base");
  /* each warp's ring of STG m-tiles in shared memory, filled with cp.async
   * STG - 1 steps ahead: K bytes in flight without registers. */
  int STG = DSV4_LOGITS_STAGES, RS = D + 16;
  kring rg = {k, NULL, lane, base, cmax, breq};
  rg.ring = kb_shared_array(kb, kb->i8, MLW * STG * RING_SB(D), "dsv4_ring");
  rg.ring = kb_byte_ptr(kb, rg.ring, LLVMBuildMul(b, kb_zext64(kb, warp), kb_i64(kb, (long long)STG * RING_SB(D)), ""));
  for (int s0 = 0; s0 < STG - 1; s0++) {
    if (s0 < iters)
      ring_fill(kb, &rg, kb_i32(kb, s0));
    kb->t->cp_async_commit(kb);
  }
  kb_loop_t lp;
  kb_for(kb, &lp, kb_i32(kb, 0), kb_i32(kb, iters), 0, NULL);
  kb->t->warp_sync(kb); /* every lane is done with the stage refilled next */
  LLVMValueRef nx = LLVMBuildAdd(b, lp.iv, kb_i32(kb, STG - 1), "");
  kb_if_t pf = kb_if(kb, LLVMBuildICmp(b, LLVMIntSLT, nx, kb_i32(kb, iters), ""), "produce");
  ring_fill(kb, &rg, nx);
  kb_endif(kb, &pf);
  kb->t->cp_async_commit(kb); /* (possibly empty: the group count stays in step) */
  kb->t->cp_async_wait(kb, STG - 1);
  kb->t->warp_sync(kb); /* the other lanes' copies of this stage, visible */
  LLVMValueRef st = ring_stage(kb, &rg, lp.iv);
  LLVMValueRef wd[16], ksc[2], vok[2];
  for (int hh = 0; hh < 2; hh++) {
    LLVMValueRef rowb = LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, LLVMBuildAdd(b, g, kb_i32(kb, hh * 8), "")), kb_i64(kb, RS), ""), slice, "");
    for (int q = 0; q < CW; q++) {
      LLVMValueRef v = kb_load(kb, v4, kb_byte_ptr(kb, st, LLVMBuildAdd(b, rowb, kb_i64(kb, q * 16), "")), 16);
      for (int e = 0; e < 4; e++)
        wd[hh * CW * 4 + q * 4 + e] = LLVMBuildExtractElement(b, v, kb_i32(kb, e), "");
    }
    LLVMValueRef r4 = LLVMBuildMul(b, kb_zext64(kb, LLVMBuildAdd(b, g, kb_i32(kb, hh * 8), "")), kb_i64(kb, 4), "");
    ksc[hh] = kb_load(kb, kb->f32, kb_byte_ptr(kb, st, LLVMBuildAdd(b, kb_i64(kb, 16 * RS), r4, "")), 4);
    vok[hh] = LLVMBuildICmp(b, LLVMIntNE, kb_load(kb, kb->i32, kb_byte_ptr(kb, st, LLVMBuildAdd(b, kb_i64(kb, 16 * RS + 64), r4, "")), 4),
                            kb_i32(kb, 0), "");
  }
  LLVMValueRef A[8][4];
  for (int ks = 0; ks < KS; ks++) { /* rows g (a0, a2) and g + 8 (a1, a3) */
    A[ks][0] = wd[2 * ks], A[ks][2] = wd[2 * ks + 1];
    A[ks][1] = wd[CW * 4 + 2 * ks], A[ks][3] = wd[CW * 4 + 2 * ks + 1];
  }
  LLVMValueRef p0 = ring_p0(kb, &rg, lp.iv);
  for (int j = 0; j < NM; j++) {
    kb_if_t fj = kb_if(kb, LLVMBuildICmp(b, LLVMIntSLT, kb_i32(kb, j), NN, ""), "rowj");
    LLVMValueRef part[2] = {zero, zero};
    for (int nt = 0; nt < NT; nt++) {
      LLVMValueRef bqf[8][2], acc[4] = {zero, zero, zero, zero};
      for (int q = 0; q < CW; q++) { /* head 8 nt + g of row j, this thread's slice */
        long long off = ((long long)j * H + nt * 8) * QS + q * 16;
        LLVMValueRef v = kb_load(kb, v4, kb_byte_ptr(kb, qs, LLVMBuildAdd(b, qlane, kb_i64(kb, off), "")), 16);
        for (int e = 0; e < 4; e++)
          bqf[(q * 4 + e) / 2][e % 2] = LLVMBuildExtractElement(b, v, kb_i32(kb, e), "");
      }
      for (int ks = 0; ks < KS; ks++)
        kb->t->mma_e4m3_16x8x32(kb, A[ks], bqf[ks], acc, acc);
      relu_weigh(kb, ws_load(kb, ws, c, (j * H + nt * 8) / 8, 1), 1, acc, part);
    }
    /* lanes 0 and 1 of the quad store rows g and g + 8 */
    LLVMValueRef sum = quad_sum(kb, c, part), hh = LLVMBuildAnd(b, c, kb_i32(kb, 1), "");
    LLVMValueRef hi = LLVMBuildICmp(b, LLVMIntNE, hh, kb_i32(kb, 0), "");
    store_logit(kb, sum, LLVMBuildICmp(b, LLVMIntULT, c, kb_i32(kb, 2), ""), kb_zext64(kb, LLVMBuildAdd(b, r0, kb_i32(kb, j), "")),
                LLVMBuildAdd(b, p0, LLVMBuildAdd(b, g, LLVMBuildMul(b, hh, kb_i32(kb, 8), ""), ""), ""),
                LLVMBuildSelect(b, hi, vok[1], vok[0], ""), ctxj[j], LLVMBuildSelect(b, hi, ksc[1], ksc[0], ""));
    kb_endif(kb, &fj);
  }
  kb_for_end(kb, &lp, NULL);
  kb->t->cp_async_wait(kb, 0);
  return 0;
}

/* The warpgroup form (tile.matrix where the target has e4m3 warpgroup
 * matrix units: PTX sm_90a wgmma).  The CTA is one warpgroup taking every
 * next_n row of one batch entry over tokens_per_cta positions, 64 a step:
 * S = K[64 positions x D] q^T[D x next_n H] per step, both operands read by
 * the matrix unit from shared memory (K-major, swizzled); the relu-weighted
 * head sum is a second product, relu(S) (bf16, from the accumulators in
 * registers) times the weights (wsum_op).  The K rows come through a ring
 * of DSV4_LOGITS_STAGES steps filled with cp.async (zero-filled where a
 * position is not valid). */
enum { WG_M = 64, WG_REGS = 32 /* a thread's registers besides its accumulators (next_n max x heads / 2) */ };

/* The operand layout: rows of sw bytes in K-blocks of sw bytes (each block
 * rows x sw, 1024-byte aligned as rows is a multiple of 16), swizzled. */
static int wg_sw(int D) { return dsv4_logits_wg_swizzle(D); }
static LLVMValueRef wg_off(dsv4_kb *kb, int D, int rows, LLVMValueRef row, LLVMValueRef kbyte)
{
  return kb_mma_offset(kb, wg_sw(D), rows, row, kbyte);
}

/* The product of a step: n columns, e4m3, both operands K-major. */
static kb_wgmma wg_op(int D, int n)
{
  kb_wgmma op = {KB_MMA_E4M3, n, D / 32, wg_sw(D), 0, 0, 0, 0};
  return op;
}

/* The head sum of a step on the matrix unit: D[64 positions x 8] = relu(S)
 * [64 x cols] (bf16, from the product's accumulators in registers) times
 * the weights W[cols x 8] (bf16, shared memory): column j of W holds row
 * j's weights (bf16(w)) under row j's heads, column j + NM their
 * remainders (bf16(w - bf16(w))), zeros elsewhere, so D[., j] + D[., j +
 * NM] is row j's weighted sum with the weights exact to 16 bits. */
static kb_wgmma wsum_op(int cols)
{
  kb_wgmma op = {KB_MMA_BF16, 8, (cols + 15) / 16, 128, 0, 0, 0, 1}; /* (a half step's other half zero) */
  return op;
}

static int wgmma_fits(dsv4_kb *kb, const dsv4_kernel *k)
{
  const dsv4_target_ir *t = kb->t;
  const dsv4_layout *L = &k->layout;
  int D = L->dim, H = k->heads;
  kb_wgmma op = wg_op(D, DSV4_LOGITS_MAX_NEXT_N * H), wop = wsum_op(DSV4_LOGITS_MAX_NEXT_N * H);
  return t->wgmma && t->wgmma_wait && t->fence_proxy_async && t->cp_async && t->cp_async_commit && t->cp_async_wait &&
         t->shfl_xor && t->cvt_bf16x2_relu && t->warp == 32 && MLW == 4 && dsv4_logits_wg_shape_ok(D) && H % 8 == 0 &&
         t->wgmma(kb, &op, NULL, NULL, NULL) && t->wgmma(kb, &wop, NULL, NULL, NULL) &&
         t->cp_async(kb, NULL, NULL, 16, NULL) && t->cp_async(kb, NULL, NULL, 4, NULL) &&
         k->tile.tokens_per_cta % WG_M == 0 && L->align % 16 == 0 && L->row_bytes % 16 == 0 &&
         L->seg[0].offset % 16 == 0;
}

typedef struct {
  const dsv4_kernel *k;
  LLVMValueRef ring, sc;     /* K stages; per stage 64 scales, then 64 validity words */
  LLVMValueRef mb, tma;      /* with TMA (wg_tma_ok): a barrier object a stage; i1, kv_map given */
  LLVMValueRef qs, ws;       /* q rows (next_n max x H); the head sum's weights W (wsum_op) */
  LLVMValueRef tid, p0cta, cmax, breq, r0, ctxj[DSV4_LOGITS_MAX_NEXT_N];
} wgk;

/* Stage s (i32, carried by the loop rather than it mod the stage count) of
 * a ring of `bytes`-byte stages at base. */
static LLVMValueRef wg_stage(dsv4_kb *kb, LLVMValueRef base, LLVMValueRef s, int bytes)
{
  return kb_byte_ptr(kb, base, LLVMBuildMul(kb->b, kb_zext64(kb, s), kb_i64(kb, bytes), ""));
}

/* W (wsum_op) for rows r0 .. r0 + next_n - 1, K-major in 128-byte
 * swizzled atoms: thread t writes column (k) t of all 8 of W's rows. */
static void stage_wsum(dsv4_kb *kb, const wgk *w, int threads)
{
  LLVMBuilderRef b = kb->b;
  int H = w->k->heads, NM = DSV4_LOGITS_MAX_NEXT_N;
  for (int c0 = 0; c0 < NM * H; c0 += threads) {
    LLVMValueRef f = LLVMBuildAdd(b, kb_i32(kb, c0), w->tid, ""); /* column j H + h */
    kb_if_t in = kb_if(kb, LLVMBuildICmp(b, LLVMIntSLT, f, kb_i32(kb, NM * H), ""), "wcopy");
    LLVMValueRef j = LLVMBuildUDiv(b, f, kb_i32(kb, H), "");
    LLVMValueRef rd = LLVMBuildICmp(b, LLVMIntSLT, f, LLVMBuildMul(b, kb_arg(kb, NEXT_N), kb_i32(kb, H), ""), "");
    LLVMValueRef wv = kb_load_if(kb, rd, kb->f32, kb_arg(kb, WEIGHTS), weight_at(kb, w->r0, f, H), 4, LLVMConstReal(kb->f32, 0.0));
    LLVMValueRef hi = kb_f32_to_bf16(kb, wv);
    LLVMValueRef lo = kb_f32_to_bf16(kb, LLVMBuildFSub(b, wv, kb_bf16_to_f32(kb, hi), ""));
    LLVMValueRef zero = LLVMConstInt(kb->i16, 0, 0);
    for (int n = 0; n < 8; n++) {
      LLVMValueRef v = n < 2 * NM ? LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, j, kb_i32(kb, n % NM), ""), n < NM ? hi : lo, zero, "")
                                  : zero;
      LLVMValueRef o = kb_mma_offset(kb, 128, 8, kb_i64(kb, n), LLVMBuildMul(b, kb_zext64(kb, f), kb_i64(kb, 2), ""));
      kb_store(kb, v, kb_byte_ptr(kb, w->ws, o), 2);
    }
    kb_endif(kb, &in);
  }
}

/* Step it's copies: thread t takes row t / 2 (one lookup: wg_find, issued
 * well before wg_copy needs it) and half its bytes; the even thread also
 * copies its scale and writes the validity.  (Pieces alternating between
 * the pair, so that each copy instruction of a warp reads whole 32-byte
 * sectors, measured 10% slower at next_n 1.) */
static kpos wg_find(dsv4_kb *kb, const wgk *w, LLVMValueRef it)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef m = LLVMBuildLShr(b, w->tid, kb_i32(kb, 1), "m");
  LLVMValueRef pos = LLVMBuildAdd(b, w->p0cta, LLVMBuildAdd(b, LLVMBuildMul(b, it, kb_i32(kb, WG_M), ""), m, ""), "");
  return locate(kb, &w->k->layout, kb_zext64(kb, pos), w->cmax, w->breq);
}

static void wg_copy(dsv4_kb *kb, const wgk *w, kpos kp, LLVMValueRef stage)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_layout *L = &w->k->layout;
  int D = L->dim;
  LLVMValueRef m = LLVMBuildLShr(b, w->tid, kb_i32(kb, 1), "m"), half = LLVMBuildAnd(b, w->tid, kb_i32(kb, 1), "");
  LLVMValueRef st = wg_stage(kb, w->ring, stage, WG_M * D), cache = kb_arg(kb, CACHE);
  LLVMValueRef m64 = kb_zext64(kb, m), n16 = LLVMBuildSelect(b, kp.ok, kb_i32(kb, 16), kb_i32(kb, 0), "");
  for (int i = 0; i < D / 32; i++) {
    /* byte kb of the row: half * D / 2 + 16 i */
    LLVMValueRef kb0 = LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, half), kb_i64(kb, D / 2), ""), kb_i64(kb, 16 * i), "");
    /* (an invalid position's offsets are block 0's, in bounds; none read) */
    kb->t->cp_async(kb, kb_byte_ptr(kb, st, wg_off(kb, D, WG_M, m64, kb0)), kb_byte_ptr(kb, cache, LLVMBuildAdd(b, kp.row, kb0, "")),
                    16, n16);
  }
  kb_if_t ev = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, half, kb_i32(kb, 0), ""), "scale");
  LLVMValueRef sv = kb_byte_ptr(kb, wg_stage(kb, w->sc, stage, WG_M * 8), LLVMBuildMul(b, m64, kb_i64(kb, 4), ""));
  kb->t->cp_async(kb, sv, kb_byte_ptr(kb, cache, kp.scale), 4, LLVMBuildSelect(b, kp.ok, kb_i32(kb, 4), kb_i32(kb, 0), ""));
  kb_store(kb, LLVMBuildZExt(b, kp.ok, kb->i32, ""), kb_byte_ptr(kb, sv, kb_i64(kb, 4 * WG_M)), 4);
  kb_endif(kb, &ev);
}

/* Whether the warpgroup form can also copy K by tensor map (TMA): the
 * target's bulk copies, and scales a block's tail of 4-byte words. */
static int wg_tma_ok(dsv4_kb *kb, const dsv4_layout *L)
{
  const dsv4_target_ir *t = kb->t;
  return t->tma_load3 && t->tma_acquire && t->bulk_load && t->mbar_init && t->mbar_wait && t->mbar_expect &&
         L->scale_place == DSV4_SCALES_BLOCK_TAIL && L->scale_row_bytes == 4 && L->seg[0].scale_offset % 16 == 0 &&
         L->row_bytes % 16 == 0;
}

/* Step it's copies by TMA into stage `stage` (kv_map given: the block size
 * a multiple of 64, so the step's 64 positions are rows r0.. of one block):
 * thread 0 reads the block-table entry, writes the step's validity, and
 * copies the rows (dim / sw boxes of 64 rows) and their 64 scales, all
 * completing on the stage's barrier object.  A step past the rows' context
 * or at no block copies nothing (its stage keeps an older step's rows,
 * which give only positions stored as -inf).  The lookup is locate()'s for
 * the step's first position, written out for thread 0 alone: calling
 * locate() itself (and taking its scale offset) measured 0.5-0.7% slower
 * at both next_n. */
static void wg_tma_copy(dsv4_kb *kb, const wgk *w, LLVMValueRef it, LLVMValueRef stage)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_layout *L = &w->k->layout;
  int D = L->dim, sw = wg_sw(D);
  kb_if_t one = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, w->tid, kb_i32(kb, 0), ""), "producer");
  LLVMValueRef first = LLVMBuildAdd(b, w->p0cta, LLVMBuildMul(b, it, kb_i32(kb, WG_M), ""), "");
  LLVMValueRef bs = kb_sext64(kb, kb_arg(kb, BLOCK_SIZE)), maxb = kb_sext64(kb, kb_arg(kb, MAX_BLOCKS)), col, r0;
  kb_udivrem_fast(kb, kb_zext64(kb, first), bs, &col, &r0);
  LLVMValueRef want = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSLT, first, w->cmax, ""),
                                   LLVMBuildICmp(b, LLVMIntSLT, first, kb_arg(kb, ROW_LEN), ""), "");
  want = LLVMBuildAnd(b, want, LLVMBuildICmp(b, LLVMIntSLT, col, maxb, ""), "");
  LLVMValueRef to = LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, w->breq, maxb, ""), col, ""), kb_i64(kb, 4), "");
  LLVMValueRef blk = kb_load_if(kb, want, kb->i32, kb_arg(kb, TABLE), to, 4, kb_i32(kb, -1));
  LLVMValueRef ok = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, blk, kb_i32(kb, 0), ""),
                                 LLVMBuildICmp(b, LLVMIntSLT, blk, kb_arg(kb, NUM_BLOCKS), ""), "ok");
  LLVMValueRef sv = wg_stage(kb, w->sc, stage, WG_M * 8), mb = wg_stage(kb, w->mb, stage, 8);
  kb_store(kb, LLVMBuildZExt(b, ok, kb->i32, ""), kb_byte_ptr(kb, sv, kb_i64(kb, 4 * WG_M)), 4);
  kb->t->mbar_expect(kb, mb, LLVMBuildSelect(b, ok, kb_i32(kb, WG_M * D + 4 * WG_M), kb_i32(kb, 0), ""));
  kb_if_t go = kb_if(kb, ok, "copy");
  LLVMValueRef st = wg_stage(kb, w->ring, stage, WG_M * D), r32 = LLVMBuildTrunc(b, r0, kb->i32, "");
  for (int x = 0; x < D / sw; x++) {
    LLVMValueRef c[3] = {kb_i32(kb, x * sw), r32, blk};
    kb->t->tma_load3(kb, kb_byte_ptr(kb, st, kb_i64(kb, (long long)x * WG_M * sw)), kb_arg(kb, KV_MAP), c, mb);
  }
  LLVMValueRef so = LLVMBuildAdd(b, LLVMBuildMul(b, kb_sext64(kb, blk), kb_arg(kb, BLOCK_STRIDE), ""),
                                 LLVMBuildAdd(b, LLVMBuildMul(b, bs, kb_i64(kb, L->row_bytes), ""),
                                              LLVMBuildAdd(b, LLVMBuildMul(b, r0, kb_i64(kb, 4), ""), kb_i64(kb, L->seg[0].scale_offset), ""), ""), "");
  kb->t->bulk_load(kb, sv, kb_byte_ptr(kb, kb_arg(kb, CACHE), so), 4 * WG_M, mb);
  kb_endif(kb, &go);
  kb_endif(kb, &one);
}

/* Step it's copies into stage `stage`: by TMA where kv_map is given, else
 * each thread's cp.async (kp: its row, from wg_find; NULL: found here). */
static void wg_fill(dsv4_kb *kb, const wgk *w, const kpos *kp, LLVMValueRef it, LLVMValueRef stage)
{
  kb_if_t t;
  if (w->tma) {
    t = kb_if(kb, w->tma, "tma");
    wg_tma_copy(kb, w, it, stage);
    kb_else(kb, &t);
  }
  wg_copy(kb, w, kp ? *kp : wg_find(kb, w, it), stage);
  if (w->tma)
    kb_endif(kb, &t);
}

/* Step it's product for rows 0..nr-1 (n = nr H columns, one group), its
 * head sum (a second product, wsum_op) and its logits.  Under the product
 * goes step nx's block-table read, under the head sum its copies into
 * stage fs (if nx < iters).  Measured at next_n 2 and not kept: the rows'
 * products as separate groups, each row's head sum issued under the next
 * row's product (1% slower); the next step's copy wait and barrier moved
 * under the head sum (flat). */
static void wg_step(dsv4_kb *kb, const wgk *w, LLVMValueRef it, int nr, LLVMValueRef stage, LLVMValueRef nx,
                    LLVMValueRef fs, LLVMValueRef iters)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_kernel *k = w->k;
  int D = k->layout.dim, H = k->heads, n = nr * H, KS = D / 32;
  LLVMValueRef st = wg_stage(kb, w->ring, stage, WG_M * D), A[8], B[8], d[128];
  for (int ks = 0; ks < KS; ks++) {
    A[ks] = kb_byte_ptr(kb, st, wg_off(kb, D, WG_M, kb_i64(kb, 0), kb_i64(kb, ks * 32)));
    B[ks] = kb_byte_ptr(kb, w->qs, wg_off(kb, D, DSV4_LOGITS_MAX_NEXT_N * H, kb_i64(kb, 0), kb_i64(kb, ks * 32)));
  }
  kb_wgmma op = wg_op(D, n);
  kb->t->wgmma(kb, &op, A, B, d);
  /* step nx's block-table read, in flight under the product (with TMA,
   * thread 0's alone, under the head sum) */
  kpos kp = {LLVMConstInt(LLVMInt1TypeInContext(kb->ctx), 0, 0), kb_i64(kb, 0), kb_i64(kb, 0)};
  if (w->tma) {
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
    kb_if_t nt = kb_if(kb, LLVMBuildNot(b, w->tma, ""), "find");
    kpos f = wg_find(kb, w, nx);
    LLVMBasicBlockRef got = LLVMGetInsertBlock(b);
    kb_endif(kb, &nt);
    kp.ok = kb_phi(kb, f.ok, got, kp.ok, pre), kp.row = kb_phi(kb, f.row, got, kp.row, pre);
    kp.scale = kb_phi(kb, f.scale, got, kp.scale, pre);
  } else
    kp = wg_find(kb, w, nx);
  kb->t->wgmma_wait(kb, 0, d, n / 2);
  LLVMValueRef lane = LLVMBuildURem(b, w->tid, kb_i32(kb, 32), ""), warp = LLVMBuildUDiv(b, w->tid, kb_i32(kb, 32), "");
  LLVMValueRef g = LLVMBuildLShr(b, lane, kb_i32(kb, 2), "g"), c = LLVMBuildAnd(b, lane, kb_i32(kb, 3), "c");
  /* quad lanes 0 and 1 store: lane hh the position 16 warp + g + 8 hh of
   * every row (its scale and validity read before the head sum) */
  LLVMValueRef hh = LLVMBuildAnd(b, c, kb_i32(kb, 1), ""), odd = LLVMBuildICmp(b, LLVMIntNE, hh, kb_i32(kb, 0), "");
  LLVMValueRef m = LLVMBuildAdd(b, LLVMBuildMul(b, warp, kb_i32(kb, 16), ""), LLVMBuildAdd(b, g, LLVMBuildMul(b, hh, kb_i32(kb, 8), ""), ""), "");
  LLVMValueRef pos = LLVMBuildAdd(b, w->p0cta, LLVMBuildAdd(b, LLVMBuildMul(b, it, kb_i32(kb, WG_M), ""), m, ""), "pos");
  LLVMValueRef sv = wg_stage(kb, w->sc, stage, WG_M * 8); /* (with TMA, the step's validity in word 0) */
  LLVMValueRef vm = w->tma ? LLVMBuildSelect(b, w->tma, kb_i32(kb, 0), m, "") : m;
  LLVMValueRef ksc = kb_load(kb, kb->f32, kb_byte_ptr(kb, sv, LLVMBuildMul(b, kb_zext64(kb, m), kb_i64(kb, 4), "")), 4);
  LLVMValueRef okw = kb_load(kb, kb->i32, kb_byte_ptr(kb, sv, LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, vm), kb_i64(kb, 4), ""), kb_i64(kb, 4 * WG_M), "")), 4);
  /* relu(S) as bf16 pairs: the A of the head sum, in place */
  kb_wgmma wop = wsum_op(n);
  LLVMValueRef A2[4 * 16], Bw[16], dw[4 + 4 * 16];
  for (int ks = 0; ks < wop.ksteps; ks++) {
    for (int r = 0; r < 4; r++)
      A2[4 * ks + r] = 8 * ks + 2 * r < n / 2 ? kb->t->cvt_bf16x2_relu(kb, d[8 * ks + 2 * r], d[8 * ks + 2 * r + 1]) : kb_i32(kb, 0);
    Bw[ks] = kb_byte_ptr(kb, w->ws, kb_mma_offset(kb, 128, 8, kb_i64(kb, 0), kb_i64(kb, 32 * ks)));
  }
  kb->t->wgmma(kb, &wop, A2, Bw, dw);
  /* step nx's copies into stage fs (if nx < iters) under the head sum */
  kb_if_t pf = kb_if(kb, LLVMBuildICmp(b, LLVMIntSLT, nx, iters, ""), "produce");
  wg_fill(kb, w, &kp, nx, fs);
  kb_endif(kb, &pf);
  kb->t->cp_async_commit(kb);
  for (int i = 0; i < 4 * wop.ksteps; i++) /* A stays the unit's until the wait */
    dw[4 + i] = LLVMBuildBitCast(b, A2[i], kb->f32, "");
  kb->t->wgmma_wait(kb, 0, dw, 4 + 4 * wop.ksteps);
  /* lane c holds columns 2c, 2c + 1 at positions g (dw 0, 1) and g + 8
   * (dw 2, 3): lane 0 the rows' high parts, lane 1 their remainders;
   * lane hh keeps position g + 8 hh and takes the other's part of it */
  LLVMValueRef ok = LLVMBuildICmp(b, LLVMIntNE, okw, kb_i32(kb, 0), "");
  LLVMValueRef mine = LLVMBuildICmp(b, LLVMIntULT, c, kb_i32(kb, 2), "");
  for (int j = 0; j < nr; j++) {
    LLVMValueRef keep = LLVMBuildSelect(b, odd, dw[2 + j], dw[j], ""), send = LLVMBuildSelect(b, odd, dw[j], dw[2 + j], "");
    LLVMValueRef sum = LLVMBuildFAdd(b, keep, kb->t->shfl_xor(kb, send, 1), "");
    store_logit(kb, sum, mine, kb_zext64(kb, LLVMBuildAdd(b, w->r0, kb_i32(kb, j), "")), pos, ok, w->ctxj[j], ksc);
  }
}

static int wgmma_logits(dsv4_kb *kb, const dsv4_kernel *k)
{
  LLVMBuilderRef b = kb->b;
  int H = k->heads, D = k->layout.dim, NM = DSV4_LOGITS_MAX_NEXT_N, S = DSV4_LOGITS_STAGES, threads = MLW * 32;
  int P = k->tile.tokens_per_cta, QR = NM * H;
  wgk w = {.k = k};
  w.tid = kb->t->thread_id(kb);
  LLVMValueRef bq = kb->t->block_id(kb, 1), NN = kb_arg(kb, NEXT_N);
  w.r0 = LLVMBuildMul(b, bq, NN, "r0");
  kb_return_if(kb, LLVMBuildICmp(b, LLVMIntSGE, w.r0, kb_arg(kb, ROWS), "")); /* whole CTAs */
  w.breq = kb_zext64(kb, bq);
  w.p0cta = LLVMBuildMul(b, kb->t->block_id(kb, 0), kb_i32(kb, P), "p0cta");
  w.qs = kb_shared_array_aligned(kb, kb->i8, QR * D, 1024, "dsv4_q");
  w.ring = kb_shared_array_aligned(kb, kb->i8, S * WG_M * D, 1024, "dsv4_ring");
  w.sc = kb_shared_array_aligned(kb, kb->i32, S * WG_M * 2, 16, "dsv4_scale");
  int wbytes = 8 * ((2 * QR + 127) / 128 * 128); /* W: 8 rows of 128-byte K-blocks */
  w.ws = kb_shared_array_aligned(kb, kb->i8, wbytes, 1024, "dsv4_w");
  int smem = QR * D + S * WG_M * D + S * WG_M * 8 + wbytes + 8 * S;
  w.mb = kb_shared_array_aligned(kb, kb->i64, S, 8, "dsv4_full");
  if (wg_tma_ok(kb, &k->layout)) {
    w.tma = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildPtrToInt(b, kb_arg(kb, KV_MAP), kb->i64, ""), kb_i64(kb, 0), "tma");
    /* the stages' barrier objects (one arrival: thread 0's, with the bytes) */
    kb_if_t f = kb_if(kb, LLVMBuildAnd(b, w.tma, LLVMBuildICmp(b, LLVMIntEQ, w.tid, kb_i32(kb, 0), ""), ""), "mbinit");
    for (int i = 0; i < S; i++)
      kb->t->mbar_init(kb, wg_stage(kb, w.mb, kb_i32(kb, i), 8), kb_i32(kb, 1));
    kb_if_t fr = kb_if(kb, LLVMBuildICmp(b, LLVMIntNE, kb_arg(kb, KV_MAP_FRESH), kb_i32(kb, 0), ""), "fresh");
    kb->t->tma_acquire(kb, kb_arg(kb, KV_MAP)); /* (thread 0 issues every copy) */
    kb_endif(kb, &fr);
    kb_endif(kb, &f);
    kb->t->barrier(kb);
  }
  if (smem != dsv4_logits_wg_shared_bytes(D, H))
    return 1; /* the checker's rule (dsv4_abi.h) is out of step with this code */
  /* The CTAs a multiprocessor holds: as many as its shared memory takes
   * (1 KB of each reserved), up to what leaves WG_REGS registers a thread;
   * more CTAs hide more of each one's serial steps (measured: 5 instead of
   * the 4 the allocator's own choice of ~100 registers gave, +2-3%). */
  if (kb->t->min_ctas) {
    int by_smem = (dsv4_target_max_shared(kb->t->kind, kb->arch) + 1024) / (smem + 1024);
    int by_regs = 65536 / (threads * (QR / 2 + WG_REGS));
    int n = by_smem < by_regs ? by_smem : by_regs;
    if (n > 1)
      kb->t->min_ctas(kb, n);
  }
  /* q rows (row j's head h at row j H + h) by cp.async, zeros past next_n:
   * the oldest copy group, complete by the first step's wait */
  LLVMValueRef qv = LLVMBuildMul(b, kb_zext64(kb, NN), kb_i64(kb, (long long)H * D), "");
  LLVMValueRef qsrc = LLVMBuildMul(b, kb_zext64(kb, w.r0), kb_i64(kb, (long long)H * D), "");
  for (int c0 = 0; c0 < QR * D; c0 += 16 * threads) {
    LLVMValueRef o = LLVMBuildAdd(b, kb_i64(kb, c0), LLVMBuildMul(b, kb_zext64(kb, w.tid), kb_i64(kb, 16), ""), "");
    kb_if_t in = kb_if(kb, LLVMBuildICmp(b, LLVMIntULT, o, kb_i64(kb, (long long)QR * D), ""), "qcopy");
    LLVMValueRef rd = LLVMBuildICmp(b, LLVMIntULT, o, qv, "");
    LLVMValueRef row = LLVMBuildUDiv(b, o, kb_i64(kb, D), ""), kbyte = LLVMBuildURem(b, o, kb_i64(kb, D), "");
    kb->t->cp_async(kb, kb_byte_ptr(kb, w.qs, wg_off(kb, D, QR, row, kbyte)),
                    kb_byte_ptr(kb, kb_arg(kb, Q), LLVMBuildSelect(b, rd, LLVMBuildAdd(b, qsrc, o, ""), kb_i64(kb, 0), "")), 16,
                    LLVMBuildSelect(b, rd, kb_i32(kb, 16), kb_i32(kb, 0), ""));
    kb_endif(kb, &in);
  }
  kb->t->cp_async_commit(kb);
  stage_wsum(kb, &w, threads);
  w.cmax = row_contexts(kb, w.r0, w.ctxj);
  /* steps up to the row's end */
  LLVMValueRef left = LLVMBuildSub(b, kb_arg(kb, ROW_LEN), w.p0cta, "");
  LLVMValueRef iters = LLVMBuildSDiv(b, LLVMBuildAdd(b, left, kb_i32(kb, WG_M - 1), ""), kb_i32(kb, WG_M), "");
  iters = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, iters, kb_i32(kb, P / WG_M), ""), iters, kb_i32(kb, P / WG_M), "iters");
  for (int s0 = 0; s0 < S - 1; s0++) {
    kb_if_t f = kb_if(kb, LLVMBuildICmp(b, LLVMIntSLT, kb_i32(kb, s0), iters, ""), "prologue");
    wg_fill(kb, &w, NULL, kb_i32(kb, s0), kb_i32(kb, s0));
    kb_endif(kb, &f);
    kb->t->cp_async_commit(kb);
  }
  kb_loop_t lp;
  LLVMValueRef s0v = kb_i32(kb, 0);
  kb_for(kb, &lp, kb_i32(kb, 0), iters, 1, &s0v);
  LLVMValueRef cs = lp.vars[0]; /* this step's stage; the one refilled is the step before's */
  LLVMValueRef fs = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, cs, kb_i32(kb, 0), ""), kb_i32(kb, S - 1),
                                    LLVMBuildSub(b, cs, kb_i32(kb, 1), ""), "fstage");
  kb->t->cp_async_wait(kb, S - 2); /* this step's copies (and q) landed */
  if (w.tma) { /* ... or its TMA copies: the stage's (it / S)-th phase */
    kb_if_t f = kb_if(kb, w.tma, "full");
    kb->t->mbar_wait(kb, wg_stage(kb, w.mb, cs, 8),
                     LLVMBuildAnd(b, LLVMBuildUDiv(b, lp.iv, kb_i32(kb, S), ""), kb_i32(kb, 1), ""));
    kb_endif(kb, &f);
  }
  kb->t->fence_proxy_async(kb);      /* ... visible to the matrix unit */
  kb->t->barrier(kb);                /* everyone's; the stage refilled next is read by no one */
  LLVMValueRef nx = LLVMBuildAdd(b, lp.iv, kb_i32(kb, S - 1), "");
  for (int nr = 1; nr <= NM; nr++) { /* the product as wide as next_n rows */
    kb_if_t f = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, NN, kb_i32(kb, nr), ""), "rows");
    wg_step(kb, &w, lp.iv, nr, cs, nx, fs, iters);
    kb_endif(kb, &f);
  }
  LLVMValueRef ns = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, cs, kb_i32(kb, S - 1), ""), kb_i32(kb, 0),
                                    LLVMBuildAdd(b, cs, kb_i32(kb, 1), ""), "");
  kb_for_end(kb, &lp, &ns);
  kb->t->cp_async_wait(kb, 0);
  return 0;
}

int dsv4_gen_paged_mqa_logits(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d)
{
  if (k->tile.matrix && wgmma_fits(kb, k)) {
    if (wgmma_logits(kb, k)) {
      dsv4_error(d, k->file, k->line, "kernel '%s': internal error: the warpgroup form's shared memory is not dsv4_logits_wg_shared_bytes()", k->name);
      return 1;
    }
    return 0;
  }
  if (k->tile.matrix) {
    const dsv4_target_ir *t = kb->t;
    if (!t->mma_e4m3_16x8x32 || !t->shfl_xor || !t->shfl_idx || !t->cp_async || !t->cp_async_commit ||
        !t->cp_async_wait || !t->warp_sync || t->warp != 32 || !t->mma_e4m3_16x8x32(kb, NULL, NULL, NULL, NULL) ||
        !t->cp_async(kb, NULL, NULL, 16, NULL)) {
      dsv4_error(d, k->file, k->line, "kernel '%s': this target (%s) cannot build the warp-matrix form of paged_mqa_logits",
                 k->name, kb->arch);
      return 1;
    }
    if (matrix_logits(kb, k)) {
      dsv4_error(d, k->file, k->line, "kernel '%s': internal error: the warp form's shared memory is not dsv4_logits_warp_shared_bytes()", k->name);
      return 1;
    }
    return 0;
  }
  if (use_mma(kb, k)) {
    mma_logits(kb, k);
    return 0;
  }
  LLVMBuilderRef b = kb->b;
  const dsv4_layout *L = &k->layout;
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
  LLVMValueRef breq = LLVMBuildUDiv(b, r64, kb_sext64(kb, kb_arg(kb, NEXT_N)), "b");
  kpos kp = locate(kb, L, p64, ctx, breq);
  LLVMValueRef valid = LLVMBuildAnd(b, live, kp.ok, "");

  /* the partial sum over this thread's heads */
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
  kb_if_t f = kb_if(kb, valid, "dots");
  LLVMValueRef krow = kb_byte_ptr(kb, kb_arg(kb, CACHE), kp.row);
  LLVMValueRef kscale = kb_load(kb, kb->f32, kb_byte_ptr(kb, kb_arg(kb, CACHE), kp.scale), 4);
  /* q row of head (hg * hpt + h): ((r * H) + head) * D bytes.  A loop over
   * the thread's heads (not unrolled: 64 heads x 128 dims would be 8K
   * multiply-adds of straight-line code); K chunks come again from L1 */
  LLVMValueRef qrow0 = LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, r64, kb_i64(kb, H), ""),
                                                    LLVMBuildMul(b, kb_zext64(kb, hg), kb_i64(kb, hpt), ""), ""),
                                    kb_i64(kb, D), "");
  LLVMValueRef wrow = LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, r64, kb_i64(kb, H), ""),
                                                   LLVMBuildMul(b, kb_zext64(kb, hg), kb_i64(kb, hpt), ""), ""),
                                   kb_i64(kb, 4), "");
  LLVMValueRef zero = LLVMConstReal(kb->f32, 0.0);
  kb_loop_t hl;
  kb_for(kb, &hl, kb_i32(kb, 0), kb_i32(kb, hpt), 1, &zero);
  LLVMValueRef h64 = kb_zext64(kb, hl.iv);
  LLVMValueRef qh = LLVMBuildAdd(b, qrow0, LLVMBuildMul(b, h64, kb_i64(kb, D), ""), "");
  LLVMValueRef acc = zero;
  for (int c = 0; c < D; c += 16) {
    LLVMValueRef kv[16], qv[16];
    load16_e4m3(kb, kb_byte_ptr(kb, krow, kb_i64(kb, c)), kv);
    load16_e4m3(kb, kb_byte_ptr(kb, kb_arg(kb, Q), LLVMBuildAdd(b, qh, kb_i64(kb, c), "")), qv);
    for (int j = 0; j < 16; j++)
      acc = LLVMBuildFAdd(b, acc, LLVMBuildFMul(b, qv[j], kv[j], ""), "");
  }
  LLVMValueRef w = kb_load(kb, kb->f32, kb_byte_ptr(kb, kb_arg(kb, WEIGHTS), LLVMBuildAdd(b, wrow, LLVMBuildMul(b, h64, kb_i64(kb, 4), ""), "")), 4);
  LLVMValueRef relu = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, acc, zero, ""), acc, zero, "");
  LLVMValueRef next = LLVMBuildFAdd(b, hl.vars[0], LLVMBuildFMul(b, w, relu, ""), "");
  kb_for_end(kb, &hl, &next);
  LLVMValueRef part = hl.vars[0];
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
