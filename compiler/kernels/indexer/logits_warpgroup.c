/* logits_warpgroup.c -- the warpgroup form of the indexer's logits
 * (tile.matrix where the target has e4m3 warpgroup matrix units: PTX
 * sm_90a wgmma).
 *
 * The CTA is one warpgroup taking every next_n row of one batch entry over
 * tokens_per_cta positions, 64 a step: S = K[64 positions x D] q^T[D x
 * next_n H] per step, both operands read by the matrix unit from shared
 * memory (K-major, swizzled); the relu-weighted head sum is a second
 * product, relu(S) (bf16, from the accumulators in registers) times the
 * weights (wsum_op).  The K rows come through a ring of DSV4_LOGITS_STAGES
 * steps filled with cp.async (zero-filled where a position is not valid),
 * or by tensor map (TMA) where the launch passes kv_map.
 *
 * The shared helpers (lg_locate, lg_row_contexts, lg_store_logit,
 * lg_weight_at) are logits_rows.c's; shape.h names the short names.
 */
#include "shape.h"
#include "caps.h"

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

/* Whether this target can build the warpgroup form of kernel k. */
int lg_warpgroup_fits(dsv4_kb *kb, const dsv4_kernel *k)
{
  const dsv4_target_ir *t = kb->t;
  const dsv4_layout *L = &k->layout;
  int D = L->dim, H = k->heads;
  kb_wgmma op = wg_op(D, DSV4_LOGITS_MAX_NEXT_N * H), wop = wsum_op(DSV4_LOGITS_MAX_NEXT_N * H);
  return t->wgmma && t->wgmma_wait && t->fence_proxy_async && t->cp_async && t->cp_async_commit && t->cp_async_wait &&
         t->shfl_xor && t->cvt_bf16x2_relu && kb->warp == 32 && LG_WARPS == 4 && dsv4_logits_wg_shape_ok(D) &&
         H % 8 == 0 && t->wgmma(kb, &op, NULL, NULL, NULL) && t->wgmma(kb, &wop, NULL, NULL, NULL) &&
         t->cp_async(kb, NULL, NULL, 16, NULL) && t->cp_async(kb, NULL, NULL, 4, NULL) &&
         k->tile.tokens_per_cta % WG_M == 0 && L->align % 16 == 0 && L->row_bytes % 16 == 0 &&
         L->seg[0].offset % 16 == 0;
}

/* What the warpgroup kernel's pieces share. */
typedef struct {
  const dsv4_kernel *k;
  LLVMValueRef ring, sc;     /* K stages; per stage 64 scales, then 64 validity words */
  LLVMValueRef mb, tma;      /* with TMA (wg_tma_ok): a barrier object a stage; i1, kv_map given */
  LLVMValueRef qs, ws;       /* q rows (next_n max x H); the head sum's weights W (wsum_op) */
  LLVMValueRef tid, p0cta, cmax, breq, r0, ctxj[DSV4_LOGITS_MAX_NEXT_N];
  const lg_dest *dest; /* where the logits go (shape.h) */
  int S;               /* stages of the ring */
} wg_state;

/* Stage s (i32, carried by the loop rather than it mod the stage count) of
 * a ring of `bytes`-byte stages at base. */
static LLVMValueRef wg_stage(dsv4_kb *kb, LLVMValueRef base, LLVMValueRef s, int bytes)
{
  return kb_byte_ptr(kb, base, LLVMBuildMul(kb->b, kb_zext64(kb, s), kb_i64(kb, bytes), ""));
}

/* W (wsum_op) for rows r0 .. r0 + next_n - 1, K-major in 128-byte
 * swizzled atoms: thread t writes column (k) t of all 8 of W's rows. */
static void stage_wsum(dsv4_kb *kb, const wg_state *w, int threads)
{
  LLVMBuilderRef b = kb->b;
  int H = w->k->heads, NM = DSV4_LOGITS_MAX_NEXT_N;
  for (int c0 = 0; c0 < NM * H; c0 += threads) {
    LLVMValueRef f = LLVMBuildAdd(b, kb_i32(kb, c0), w->tid, ""); /* column j H + h */
    kb_if_t in = kb_if(kb, LLVMBuildICmp(b, LLVMIntSLT, f, kb_i32(kb, NM * H), ""), "wcopy");
    LLVMValueRef j = LLVMBuildUDiv(b, f, kb_i32(kb, H), "");
    LLVMValueRef real = LLVMBuildICmp(b, LLVMIntSLT, f, LLVMBuildMul(b, kb_arg(kb, LG_next_n), kb_i32(kb, H), ""), "");
    LLVMValueRef wv = kb_load_if(kb, real, kb->f32, kb_arg(kb, LG_weights), lg_weight_at(kb, w->r0, f, H), 4,
                                 LLVMConstReal(kb->f32, 0.0));
    LLVMValueRef hi = kb_f32_to_bf16(kb, wv);
    LLVMValueRef lo = kb_f32_to_bf16(kb, LLVMBuildFSub(b, wv, kb_bf16_to_f32(kb, hi), ""));
    LLVMValueRef zero = LLVMConstInt(kb->i16, 0, 0);
    for (int n = 0; n < 8; n++) {
      LLVMValueRef v = n < 2 * NM ? LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, j, kb_i32(kb, n % NM), ""),
                                                    n < NM ? hi : lo, zero, "")
                                  : zero;
      LLVMValueRef off = kb_mma_offset(kb, 128, 8, kb_i64(kb, n), LLVMBuildMul(b, kb_zext64(kb, f), kb_i64(kb, 2), ""));
      kb_store(kb, v, kb_byte_ptr(kb, w->ws, off), 2);
    }
    kb_endif(kb, &in);
  }
}

/* Step it's copies: thread t takes row t / 2 (one lookup: wg_find, issued
 * well before wg_copy needs it) and half its bytes; the even thread also
 * copies its scale and writes the validity.  (Pieces alternating between
 * the pair, so that each copy instruction of a warp reads whole 32-byte
 * sectors, measured 10% slower at next_n 1.) */
static lg_kpos wg_find(dsv4_kb *kb, const wg_state *w, LLVMValueRef it)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef m = LLVMBuildLShr(b, w->tid, kb_i32(kb, 1), "m");
  LLVMValueRef pos = LLVMBuildAdd(b, w->p0cta, LLVMBuildAdd(b, LLVMBuildMul(b, it, kb_i32(kb, WG_M), ""), m, ""), "");
  return lg_locate(kb, &w->k->layout, kb_zext64(kb, pos), w->cmax, w->breq);
}

static void wg_copy(dsv4_kb *kb, const wg_state *w, lg_kpos kp, LLVMValueRef stage)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_layout *L = &w->k->layout;
  int D = L->dim;
  LLVMValueRef m = LLVMBuildLShr(b, w->tid, kb_i32(kb, 1), "m"), half = LLVMBuildAnd(b, w->tid, kb_i32(kb, 1), "");
  LLVMValueRef st = wg_stage(kb, w->ring, stage, WG_M * D), cache = kb_arg(kb, LG_cache);
  LLVMValueRef m64 = kb_zext64(kb, m), nbytes = LLVMBuildSelect(b, kp.ok, kb_i32(kb, 16), kb_i32(kb, 0), "");
  for (int i = 0; i < D / 32; i++) {
    /* byte kb of the row: half * D / 2 + 16 i */
    LLVMValueRef kbyte =
        LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, half), kb_i64(kb, D / 2), ""), kb_i64(kb, 16 * i), "");
    /* (an invalid position's offsets are block 0's, in bounds; none read) */
    kb->t->cp_async(kb, kb_byte_ptr(kb, st, wg_off(kb, D, WG_M, m64, kbyte)),
                    kb_byte_ptr(kb, cache, LLVMBuildAdd(b, kp.row, kbyte, "")), 16, nbytes);
  }
  kb_if_t even = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, half, kb_i32(kb, 0), ""), "scale");
  LLVMValueRef scale_at =
      kb_byte_ptr(kb, wg_stage(kb, w->sc, stage, WG_M * 8), LLVMBuildMul(b, m64, kb_i64(kb, 4), ""));
  kb->t->cp_async(kb, scale_at, kb_byte_ptr(kb, cache, kp.scale), 4,
                  LLVMBuildSelect(b, kp.ok, kb_i32(kb, 4), kb_i32(kb, 0), ""));
  kb_store(kb, LLVMBuildZExt(b, kp.ok, kb->i32, ""), kb_byte_ptr(kb, scale_at, kb_i64(kb, 4 * WG_M)), 4);
  kb_endif(kb, &even);
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
 * which give only positions stored as -inf).  The lookup is lg_locate()'s
 * for the step's first position, written out for thread 0 alone: calling
 * lg_locate() itself (and taking its scale offset) measured 0.5-0.7% slower
 * at both next_n. */
static void wg_tma_copy(dsv4_kb *kb, const wg_state *w, LLVMValueRef it, LLVMValueRef stage)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_layout *L = &w->k->layout;
  int D = L->dim, sw = wg_sw(D);
  kb_if_t producer = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, w->tid, kb_i32(kb, 0), ""), "producer");
  LLVMValueRef first = LLVMBuildAdd(b, w->p0cta, LLVMBuildMul(b, it, kb_i32(kb, WG_M), ""), "");
  LLVMValueRef bs = kb_sext64(kb, kb_arg(kb, LG_block_size)), maxb = kb_sext64(kb, kb_arg(kb, LG_max_blocks)), col,
               brow;
  kb_udivrem_fast(kb, kb_zext64(kb, first), bs, &col, &brow);
  LLVMValueRef want = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSLT, first, w->cmax, ""),
                                   LLVMBuildICmp(b, LLVMIntSLT, first, kb_arg(kb, LG_row_len), ""), "");
  want = LLVMBuildAnd(b, want, LLVMBuildICmp(b, LLVMIntSLT, col, maxb, ""), "");
  LLVMValueRef entry_off =
      LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, w->breq, kb_arg(kb, LG_bt_stride), ""), col, ""),
                   kb_i64(kb, 4), "");
  LLVMValueRef blk = kb_load_if(kb, want, kb->i32, kb_arg(kb, LG_block_table), entry_off, 4, kb_i32(kb, -1));
  LLVMValueRef ok = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, blk, kb_i32(kb, 0), ""),
                                 LLVMBuildICmp(b, LLVMIntSLT, blk, kb_arg(kb, LG_num_blocks), ""), "ok");
  LLVMValueRef scales = wg_stage(kb, w->sc, stage, WG_M * 8), full = wg_stage(kb, w->mb, stage, 8);
  kb_store(kb, LLVMBuildZExt(b, ok, kb->i32, ""), kb_byte_ptr(kb, scales, kb_i64(kb, 4 * WG_M)), 4);
  kb->t->mbar_expect(kb, full, LLVMBuildSelect(b, ok, kb_i32(kb, WG_M * D + 4 * WG_M), kb_i32(kb, 0), ""));
  kb_if_t copy = kb_if(kb, ok, "copy");
  LLVMValueRef st = wg_stage(kb, w->ring, stage, WG_M * D), brow32 = LLVMBuildTrunc(b, brow, kb->i32, "");
  for (int x = 0; x < D / sw; x++) {
    LLVMValueRef coord[3] = {kb_i32(kb, x * sw), brow32, blk};
    kb->t->tma_load3(kb, kb_byte_ptr(kb, st, kb_i64(kb, (long long)x * WG_M * sw)), kb_arg(kb, LG_kv_map), coord, full);
  }
  LLVMValueRef scale_off = LLVMBuildAdd(
      b, LLVMBuildMul(b, kb_sext64(kb, blk), kb_arg(kb, LG_block_stride), ""),
      LLVMBuildAdd(b, LLVMBuildMul(b, bs, kb_i64(kb, L->row_bytes), ""),
                   LLVMBuildAdd(b, LLVMBuildMul(b, brow, kb_i64(kb, 4), ""), kb_i64(kb, L->seg[0].scale_offset), ""),
                   ""),
      "");
  kb->t->bulk_load(kb, scales, kb_byte_ptr(kb, kb_arg(kb, LG_cache), scale_off), 4 * WG_M, full);
  kb_endif(kb, &copy);
  kb_endif(kb, &producer);
}

/* Step it's copies into stage `stage`: by TMA where kv_map is given, else
 * each thread's cp.async (kp: its row, from wg_find; NULL: found here). */
static void wg_fill(dsv4_kb *kb, const wg_state *w, const lg_kpos *kp, LLVMValueRef it, LLVMValueRef stage)
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
 * goes step next_it's block-table read, under the head sum its copies into
 * stage fill_stage (if next_it < iters).  Measured at next_n 2 and not kept: the rows'
 * products as separate groups, each row's head sum issued under the next
 * row's product (1% slower); the next step's copy wait and barrier moved
 * under the head sum (flat). */
static void wg_step(dsv4_kb *kb, const wg_state *w, LLVMValueRef it, int nr, LLVMValueRef stage, LLVMValueRef next_it,
                    LLVMValueRef fill_stage, LLVMValueRef iters)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_kernel *k = w->k;
  int D = k->layout.dim, H = k->heads, n = nr * H, KS = D / 32;
  LLVMValueRef st = wg_stage(kb, w->ring, stage, WG_M * D), A[8], B[8], sacc[128];
  for (int ks = 0; ks < KS; ks++) {
    A[ks] = kb_byte_ptr(kb, st, wg_off(kb, D, WG_M, kb_i64(kb, 0), kb_i64(kb, ks * 32)));
    B[ks] = kb_byte_ptr(kb, w->qs, wg_off(kb, D, DSV4_LOGITS_MAX_NEXT_N * H, kb_i64(kb, 0), kb_i64(kb, ks * 32)));
  }
  kb_wgmma op = wg_op(D, n);
  kb->t->wgmma(kb, &op, A, B, sacc);
  /* step next_it's block-table read, in flight under the product (with TMA,
   * thread 0's alone, under the head sum) */
  lg_kpos kp = {LLVMConstInt(LLVMInt1TypeInContext(kb->ctx), 0, 0), kb_i64(kb, 0), kb_i64(kb, 0)};
  if (w->tma) {
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
    kb_if_t no_tma = kb_if(kb, LLVMBuildNot(b, w->tma, ""), "find");
    lg_kpos found = wg_find(kb, w, next_it);
    LLVMBasicBlockRef got = LLVMGetInsertBlock(b);
    kb_endif(kb, &no_tma);
    kp.ok = kb_phi(kb, found.ok, got, kp.ok, pre), kp.row = kb_phi(kb, found.row, got, kp.row, pre);
    kp.scale = kb_phi(kb, found.scale, got, kp.scale, pre);
  } else
    kp = wg_find(kb, w, next_it);
  kb->t->wgmma_wait(kb, 0, sacc, n / 2);
  LLVMValueRef lane = LLVMBuildURem(b, w->tid, kb_i32(kb, 32), ""), warp = LLVMBuildUDiv(b, w->tid, kb_i32(kb, 32), "");
  LLVMValueRef g = LLVMBuildLShr(b, lane, kb_i32(kb, 2), "g"), c = LLVMBuildAnd(b, lane, kb_i32(kb, 3), "c");
  /* quad lanes 0 and 1 store: lane hh the position 16 warp + g + 8 hh of
   * every row (its scale and validity read before the head sum) */
  LLVMValueRef hh = LLVMBuildAnd(b, c, kb_i32(kb, 1), ""), odd = LLVMBuildICmp(b, LLVMIntNE, hh, kb_i32(kb, 0), "");
  LLVMValueRef m = LLVMBuildAdd(b, LLVMBuildMul(b, warp, kb_i32(kb, 16), ""),
                                LLVMBuildAdd(b, g, LLVMBuildMul(b, hh, kb_i32(kb, 8), ""), ""), "");
  LLVMValueRef pos =
      LLVMBuildAdd(b, w->p0cta, LLVMBuildAdd(b, LLVMBuildMul(b, it, kb_i32(kb, WG_M), ""), m, ""), "pos");
  LLVMValueRef scales = wg_stage(kb, w->sc, stage, WG_M * 8); /* (with TMA, the step's validity in word 0) */
  LLVMValueRef valid_at = w->tma ? LLVMBuildSelect(b, w->tma, kb_i32(kb, 0), m, "") : m;
  LLVMValueRef ksc =
      kb_load(kb, kb->f32, kb_byte_ptr(kb, scales, LLVMBuildMul(b, kb_zext64(kb, m), kb_i64(kb, 4), "")), 4);
  LLVMValueRef ok_word =
      kb_load(kb, kb->i32,
              kb_byte_ptr(kb, scales,
                          LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, valid_at), kb_i64(kb, 4), ""),
                                       kb_i64(kb, 4 * WG_M), "")),
              4);
  /* relu(S) as bf16 pairs: the A of the head sum, in place */
  kb_wgmma sum_op = wsum_op(n);
  LLVMValueRef relu_s[4 * 16], wptr[16], sums[4 + 4 * 16];
  for (int ks = 0; ks < sum_op.ksteps; ks++) {
    for (int r = 0; r < 4; r++)
      relu_s[4 * ks + r] = 8 * ks + 2 * r < n / 2
                               ? kb->t->cvt_bf16x2_relu(kb, sacc[8 * ks + 2 * r], sacc[8 * ks + 2 * r + 1])
                               : kb_i32(kb, 0);
    wptr[ks] = kb_byte_ptr(kb, w->ws, kb_mma_offset(kb, 128, 8, kb_i64(kb, 0), kb_i64(kb, 32 * ks)));
  }
  kb->t->wgmma(kb, &sum_op, relu_s, wptr, sums);
  /* step next_it's copies into fill_stage (if next_it < iters) under the head sum */
  kb_if_t produce = kb_if(kb, LLVMBuildICmp(b, LLVMIntSLT, next_it, iters, ""), "produce");
  wg_fill(kb, w, &kp, next_it, fill_stage);
  kb_endif(kb, &produce);
  kb->t->cp_async_commit(kb);
  for (int i = 0; i < 4 * sum_op.ksteps; i++) /* A stays the unit's until the wait */
    sums[4 + i] = LLVMBuildBitCast(b, relu_s[i], kb->f32, "");
  kb->t->wgmma_wait(kb, 0, sums, 4 + 4 * sum_op.ksteps);
  /* lane c holds columns 2c, 2c + 1 at positions g (sums 0, 1) and g + 8
   * (sums 2, 3): lane 0 the rows' high parts, lane 1 their remainders;
   * lane hh keeps position g + 8 hh and takes the other's part of it */
  LLVMValueRef ok = LLVMBuildICmp(b, LLVMIntNE, ok_word, kb_i32(kb, 0), "");
  LLVMValueRef mine = LLVMBuildICmp(b, LLVMIntULT, c, kb_i32(kb, 2), "");
  for (int j = 0; j < nr; j++) {
    LLVMValueRef keep = LLVMBuildSelect(b, odd, sums[2 + j], sums[j], ""),
                 send = LLVMBuildSelect(b, odd, sums[j], sums[2 + j], "");
    LLVMValueRef sum = LLVMBuildFAdd(b, keep, kb->t->shfl_xor(kb, send, 1), "");
    LLVMValueRef r64 = kb_zext64(kb, LLVMBuildAdd(b, w->r0, kb_i32(kb, j), ""));
    lg_store_logit(kb, w->dest, sum, mine, r64, pos, ok, w->ctxj[j], ksc);
  }
}

/* With TMA possible (wg_tma_ok): w->tma, whether kv_map is given, and
 * then the stages' barrier objects (one arrival: thread 0's, with the
 * bytes) and kv_map acquired when the host wrote it since the last launch. */
static void wg_tma_init(dsv4_kb *kb, wg_state *w)
{
  LLVMBuilderRef b = kb->b;
  w->tma = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildPtrToInt(b, kb_arg(kb, LG_kv_map), kb->i64, ""), kb_i64(kb, 0), "tma");
  kb_if_t f = kb_if(kb, LLVMBuildAnd(b, w->tma, LLVMBuildICmp(b, LLVMIntEQ, w->tid, kb_i32(kb, 0), ""), ""), "mbinit");
  for (int i = 0; i < w->S; i++)
    kb->t->mbar_init(kb, wg_stage(kb, w->mb, kb_i32(kb, i), 8), kb_i32(kb, 1));
  kb_if_t fresh = kb_if(kb, LLVMBuildICmp(b, LLVMIntNE, kb_arg(kb, LG_kv_map_fresh), kb_i32(kb, 0), ""), "fresh");
  kb->t->tma_acquire(kb, kb_arg(kb, LG_kv_map)); /* (thread 0 issues every copy) */
  kb_endif(kb, &fresh);
  kb_endif(kb, &f);
  kb->t->barrier(kb);
}

/* The CTAs a multiprocessor holds: as many as its shared memory takes
 * (smem bytes a CTA; 1 KB of each reserved), up to what leaves WG_REGS
 * registers a thread besides qr / 2 accumulators; more CTAs hide more of
 * each one's serial steps (measured: 5 instead of the 4 the allocator's
 * own choice of ~100 registers gave, +2-3%). */
static void wg_min_ctas(dsv4_kb *kb, int smem, int threads, int qr)
{
  if (!kb->t->min_ctas)
    return;
  int by_smem = (dsv4_target_max_shared(kb->t->kind, kb->arch) + 1024) / (smem + 1024);
  int by_regs = 65536 / (threads * (qr / 2 + WG_REGS));
  int n = by_smem < by_regs ? by_smem : by_regs;
  if (n > 1)
    kb->t->min_ctas(kb, n);
}

/* q rows (row j's head h at row j H + h) by cp.async, zeros past next_n:
 * the oldest copy group, complete by the first step's wait. */
static void wg_copy_q(dsv4_kb *kb, const wg_state *w, LLVMValueRef next_n, int threads)
{
  LLVMBuilderRef b = kb->b;
  int H = w->k->heads, D = w->k->layout.dim, QR = DSV4_LOGITS_MAX_NEXT_N * H;
  LLVMValueRef qbytes = LLVMBuildMul(b, kb_zext64(kb, next_n), kb_i64(kb, (long long)H * D), "");
  LLVMValueRef qsrc = LLVMBuildMul(b, kb_zext64(kb, w->r0), kb_i64(kb, (long long)H * D), "");
  for (int c0 = 0; c0 < QR * D; c0 += 16 * threads) {
    LLVMValueRef off = LLVMBuildAdd(b, kb_i64(kb, c0), LLVMBuildMul(b, kb_zext64(kb, w->tid), kb_i64(kb, 16), ""), "");
    kb_if_t in = kb_if(kb, LLVMBuildICmp(b, LLVMIntULT, off, kb_i64(kb, (long long)QR * D), ""), "qcopy");
    LLVMValueRef real = LLVMBuildICmp(b, LLVMIntULT, off, qbytes, "");
    LLVMValueRef row = LLVMBuildUDiv(b, off, kb_i64(kb, D), ""), kbyte = LLVMBuildURem(b, off, kb_i64(kb, D), "");
    kb->t->cp_async(
        kb, kb_byte_ptr(kb, w->qs, wg_off(kb, D, QR, row, kbyte)),
        kb_byte_ptr(kb, kb_arg(kb, LG_q), LLVMBuildSelect(b, real, LLVMBuildAdd(b, qsrc, off, ""), kb_i64(kb, 0), "")),
        16, LLVMBuildSelect(b, real, kb_i32(kb, 16), kb_i32(kb, 0), ""));
    kb_endif(kb, &in);
  }
}

/* The steps: iters (up to the row's end, at most P / WG_M), the first
 * S - 1 filled ahead, then each step's wait, product, head sum and
 * logits, with the next refill under them. */
static void wg_steps(dsv4_kb *kb, const wg_state *w, LLVMValueRef next_n)
{
  LLVMBuilderRef b = kb->b;
  int NM = DSV4_LOGITS_MAX_NEXT_N, S = w->S, P = w->k->tile.tokens_per_cta;
  LLVMValueRef left = LLVMBuildSub(b, kb_arg(kb, LG_row_len), w->p0cta, "");
  LLVMValueRef iters = LLVMBuildSDiv(b, LLVMBuildAdd(b, left, kb_i32(kb, WG_M - 1), ""), kb_i32(kb, WG_M), "");
  iters = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, iters, kb_i32(kb, P / WG_M), ""), iters, kb_i32(kb, P / WG_M),
                          "iters");
  for (int s0 = 0; s0 < S - 1; s0++) {
    kb_if_t f = kb_if(kb, LLVMBuildICmp(b, LLVMIntSLT, kb_i32(kb, s0), iters, ""), "prologue");
    wg_fill(kb, w, NULL, kb_i32(kb, s0), kb_i32(kb, s0));
    kb_endif(kb, &f);
    kb->t->cp_async_commit(kb);
  }
  kb_loop_t lp;
  LLVMValueRef stage0 = kb_i32(kb, 0);
  kb_for(kb, &lp, kb_i32(kb, 0), iters, 1, &stage0);
  LLVMValueRef stage = lp.vars[0]; /* this step's stage; the one refilled is the step before's */
  LLVMValueRef fill_stage = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, stage, kb_i32(kb, 0), ""), kb_i32(kb, S - 1),
                                            LLVMBuildSub(b, stage, kb_i32(kb, 1), ""), "fstage");
  kb->t->cp_async_wait(kb, S - 2); /* this step's copies (and q) landed */
  if (w->tma) { /* ... or its TMA copies: the stage's (it / S)-th phase */
    kb_if_t f = kb_if(kb, w->tma, "full");
    kb->t->mbar_wait(kb, wg_stage(kb, w->mb, stage, 8),
                     LLVMBuildAnd(b, LLVMBuildUDiv(b, lp.iv, kb_i32(kb, S), ""), kb_i32(kb, 1), ""));
    kb_endif(kb, &f);
  }
  kb->t->fence_proxy_async(kb); /* ... visible to the matrix unit */
  kb->t->barrier(kb);           /* everyone's; the stage refilled next is read by no one */
  LLVMValueRef next_it = LLVMBuildAdd(b, lp.iv, kb_i32(kb, S - 1), "");
  for (int nr = 1; nr <= NM; nr++) { /* the product as wide as next_n rows */
    kb_if_t f = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, next_n, kb_i32(kb, nr), ""), "rows");
    wg_step(kb, w, lp.iv, nr, stage, next_it, fill_stage, iters);
    kb_endif(kb, &f);
  }
  LLVMValueRef next_stage = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, stage, kb_i32(kb, S - 1), ""), kb_i32(kb, 0),
                                            LLVMBuildAdd(b, stage, kb_i32(kb, 1), ""), "");
  kb_for_end(kb, &lp, &next_stage);
}

/* Kernel k's body in the warpgroup form; 1 when its shared memory is not
 * dsv4_logits_wg_shared_bytes() (the checker's rule is out of step). */
int lg_warpgroup(dsv4_kb *kb, const dsv4_kernel *k, lg_dest *dest, int extra_smem)
{
  LLVMBuilderRef b = kb->b;
  int H = k->heads, D = k->layout.dim, NM = DSV4_LOGITS_MAX_NEXT_N, threads = LG_WARPS * 32;
  int P = k->tile.tokens_per_cta, QR = NM * H, S = DSV4_LOGITS_STAGES;
  wg_state w = {.k = k, .dest = dest, .S = S};
  w.tid = kb->t->thread_id(kb);
  LLVMValueRef batch = kb->t->block_id(kb, 1), next_n = kb_arg(kb, LG_next_n);
  w.r0 = LLVMBuildMul(b, batch, next_n, "r0");
  kb_return_if(kb, LLVMBuildICmp(b, LLVMIntSGE, w.r0, kb_arg(kb, LG_rows), "")); /* whole CTAs */
  w.breq = kb_zext64(kb, batch);
  w.p0cta = LLVMBuildMul(b, kb->t->block_id(kb, 0), kb_i32(kb, P), "p0cta");
  w.qs = kb_shared_array_aligned(kb, kb->i8, QR * D, 1024, "dsv4_q");
  w.ring = kb_shared_array_aligned(kb, kb->i8, S * WG_M * D, 1024, "dsv4_ring");
  w.sc = kb_shared_array_aligned(kb, kb->i32, S * WG_M * 2, 16, "dsv4_scale");
  int wbytes = 8 * ((2 * QR + 127) / 128 * 128); /* W: 8 rows of 128-byte K-blocks */
  w.ws = kb_shared_array_aligned(kb, kb->i8, wbytes, 1024, "dsv4_w");
  int smem = QR * D + S * WG_M * D + S * WG_M * 8 + wbytes + 8 * S;
  w.mb = kb_shared_array_aligned(kb, kb->i64, S, 8, "dsv4_full");
  if (smem != dsv4_logits_wg_shared_bytes(D, H))
    return 1; /* form_rules.h's rule (choose_form's record) is out of step with this code */
  if (dest) { /* the fused op: the ring free for it once the steps are done */
    dest->r0 = w.r0, dest->p0 = w.p0cta, dest->spare = w.ring;
    if (S * WG_M * D < dsv4_topk_select_bytes(threads))
      return 1;
  }
  if (wg_tma_ok(kb, &k->layout))
    wg_tma_init(kb, &w);
  wg_min_ctas(kb, smem + extra_smem, threads, QR);
  wg_copy_q(kb, &w, next_n, threads);
  kb->t->cp_async_commit(kb);
  stage_wsum(kb, &w, threads);
  w.cmax = lg_row_contexts(kb, w.r0, w.ctxj);
  wg_steps(kb, &w, next_n);
  kb->t->cp_async_wait(kb, 0);
  return 0;
}
