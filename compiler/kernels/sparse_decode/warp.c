/* warp.c -- the warp-matrix form of the sparse MLA decode (tile.matrix,
 * DSV4_FORM_WARP): mma.sync m16n8k16 with ldmatrix operands, cp.async
 * staging.
 *
 * One CTA per (token, heads_per_cta heads): heads = 16 row_blocks heads,
 * parts x row_blocks warps (parts = DSV4_DECODE_WARPS).  q (heads x D
 * bf16) is staged once in dynamic shared memory.  The two index lists are
 * one sequence of tiles of DSV4_DECODE_TILE (64) K rows (the main list's
 * tiles, then the extra list's), software-pipelined: while tile i
 * computes, the cache bytes of tile i+1 are copied asynchronously
 * (cp.async; rows past a list or with a bad index are zero-filled) into a
 * block of 64 rows in the layout, and after tile i the CTA dequantizes
 * that block with the gathers' layout-driven code (bf16, exactly the
 * dequantized cache).
 *
 * Per tile, warp (rblk, part) of row block rblk computes S = q K^T for its
 * 16 heads and its part (1/parts) of the tile's rows with mma.sync, the
 * row block's warps exchange row maxima through shared memory for the
 * online softmax (base 2), write P to shared memory in the spec's format
 * (tile.p: bf16, rounded once as FlashMLA does; or bf16x2, a high and a
 * low bf16 part, hi = bf16(p), lo = bf16(p - hi), for inputs where one
 * rounding is too coarse: docs/ops.md section 3), and each accumulates P V
 * (= hi V + lo V with bf16x2) for its part of the V dims (V = the first
 * v_dim dims of the same rows, ldmatrix.trans).  The row sums take the
 * fp32 p in both formats.  At the end the warps add their row sums and each
 * thread writes its accumulator rows scaled as docs/ops.md section 3 says
 * (sd_head_out).
 */
#include <math.h>

#include "shape.h"

#define O_TILES_MAX 64 /* o_tiles at most (v_dim 2048 over 4 parts) */

/* The form's shape (ints), shared regions (byte pointers) and the
 * thread's coordinates. */
typedef struct {
  int heads;       /* heads a CTA (tile.heads_per_cta), 16 a row block */
  int row_blocks;  /* row blocks of 16 heads: heads / 16 */
  int parts;       /* warps a row block, each a part of the tile's rows and V dims */
  int part_rows;   /* K rows of a tile in one part: SD_TILE / parts */
  int s_tiles;     /* n-tiles of 8 K rows in a part: S fragments a warp holds */
  int o_tiles;     /* n-tiles of 8 V dims a warp accumulates: v_dim / parts / 8 */
  int dim, v_dim;  /* the layout's dim, the kernel's v_dim */
  int row_bytes;   /* a q or K row in shared memory: dim * 2 + 16 (bank shift) */
  int p_row_bytes; /* a P row in shared memory: SD_TILE * 2 + 16 */
  int p_parts;     /* sd_p_parts: 1 (bf16 P) or 2 (bf16x2: hi and lo) */
  int threads;
  LLVMValueRef q_tile, k_tile;              /* q rows, the current tile's dequantized K rows (bf16) */
  LLVMValueRef p_hi, p_lo;                  /* P's high and low bf16 parts (bf16 P: p_hi alone; p_lo's room unused) */
  LLVMValueRef raw;                         /* the next tile's cache bytes, as cp.async lands them */
  LLVMValueRef row_addr;                    /* per K row: its row's and scale row's global address (i64 each) */
  LLVMValueRef red;                         /* row maxima, then row sums, of each part */
  LLVMValueRef valid;                       /* per K row of each of two tiles: i32 validity word */
  LLVMValueRef tid, lane, g, c, rblk, part; /* i32; rblk, part: the warp's row block and part */
  LLVMValueRef q_ld, k_ld, p_ld, v_ld;      /* i64 per-lane ldmatrix offsets into q, K, P, V */
  LLVMValueRef token, scale2;
  LLVMValueRef n[2], ntiles[2]; /* valid-prefix length and tiles of each list */
} warp_ctx;

/* Tile i's K rows: threads 0..63 find row tid's slot and store its row and
 * scale-row addresses (global, as i64) and its validity (valid[buf]). */
static void find_rows(dsv4_kb *kb, const dsv4_kernel *k, const warp_ctx *x, LLVMValueRef i, LLVMValueRef buf)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_layout *L = &k->layout;
  kb_if_t f = kb_if(kb, LLVMBuildICmp(b, LLVMIntULT, x->tid, kb_i32(kb, SD_TILE), ""), "rows");
  sd_tile_list tl = sd_pick_list(kb, x->token, i, x->n, x->ntiles);
  LLVMValueRef lt = tl.lt, n = tl.n, bs = tl.bs, nb = tl.nb, stride = tl.stride, cache = tl.cache, ind = tl.ind;
  LLVMValueRef p = LLVMBuildAdd(b, LLVMBuildMul(b, lt, kb_i32(kb, SD_TILE), ""), x->tid, "pos");
  LLVMValueRef want = LLVMBuildICmp(b, LLVMIntSLT, p, n, "");
  LLVMValueRef ioff = LLVMBuildMul(b, LLVMBuildAdd(b, tl.irow, kb_zext64(kb, p), ""), kb_i64(kb, 4), "");
  LLVMValueRef idx = kb_sext64(kb, kb_load_if(kb, want, kb->i32, ind, ioff, 4, kb_i32(kb, -1)));
  LLVMValueRef valid = sd_row_valid(kb, idx, nb, bs);
  LLVMValueRef s0 = LLVMBuildSelect(b, valid, idx, kb_i64(kb, 0), "");
  LLVMValueRef row = LLVMBuildURem(b, s0, bs, ""), blk = LLVMBuildMul(b, LLVMBuildUDiv(b, s0, bs, ""), stride, "");
  LLVMValueRef rp =
      kb_byte_ptr(kb, cache, LLVMBuildAdd(b, blk, LLVMBuildMul(b, row, kb_i64(kb, L->row_bytes), ""), ""));
  LLVMValueRef sp = rp;
  if (L->scale_place == DSV4_SCALES_BLOCK_TAIL)
    sp = kb_byte_ptr(kb, cache, LLVMBuildAdd(b, blk, sd_tail_scale_offset(kb, L, bs, row), ""));
  LLVMValueRef a0 = LLVMBuildMul(b, kb_zext64(kb, x->tid), kb_i64(kb, 16), "");
  kb_store(kb, LLVMBuildPtrToInt(b, rp, kb->i64, ""), kb_byte_ptr(kb, x->row_addr, a0), 8);
  kb_store(kb, LLVMBuildPtrToInt(b, sp, kb->i64, ""),
           kb_byte_ptr(kb, x->row_addr, LLVMBuildAdd(b, a0, kb_i64(kb, 8), "")), 8);
  LLVMValueRef vo = LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, buf), kb_i64(kb, SD_TILE * 4), ""),
                                 LLVMBuildMul(b, kb_zext64(kb, x->tid), kb_i64(kb, 4), ""), "");
  kb_store(kb, LLVMBuildZExt(b, valid, kb->i32, ""), kb_byte_ptr(kb, x->valid, vo), 4);
  kb_endif(kb, &f);
}

/* Copy the rows find_rows chose into the raw block (zeros for invalid
 * rows): rows at j * row_bytes, tail scale rows after SD_TILE rows. */
static void copy_rows(dsv4_kb *kb, const dsv4_kernel *k, const warp_ctx *x, LLVMValueRef buf)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_layout *L = &k->layout;
  int tail = L->scale_place == DSV4_SCALES_BLOCK_TAIL;
  for (int part = 0; part < 1 + tail; part++) {
    int rb = part ? L->scale_row_bytes : L->row_bytes;
    int sz = rb % 16 == 0 ? 16 : rb % 8 == 0 ? 8 : 4, per = rb / sz, total = SD_TILE * per;
    long long dst0 = part ? (long long)SD_TILE * L->row_bytes : 0;
    for (int c0 = 0; c0 < total; c0 += x->threads) {
      LLVMValueRef ci = LLVMBuildAdd(b, x->tid, kb_i32(kb, c0), "");
      kb_if_t f = kb_if(kb, LLVMBuildICmp(b, LLVMIntULT, ci, kb_i32(kb, total), ""), "cp");
      LLVMValueRef j = kb_zext64(kb, LLVMBuildUDiv(b, ci, kb_i32(kb, per), ""));
      LLVMValueRef q = kb_zext64(kb, LLVMBuildURem(b, ci, kb_i32(kb, per), ""));
      LLVMValueRef a =
          kb_load(kb, kb->i64,
                  kb_byte_ptr(kb, x->row_addr,
                              LLVMBuildAdd(b, LLVMBuildMul(b, j, kb_i64(kb, 16), ""), kb_i64(kb, part * 8), "")),
                  8);
      LLVMValueRef vo = LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, buf), kb_i64(kb, SD_TILE * 4), ""),
                                     LLVMBuildMul(b, j, kb_i64(kb, 4), ""), "");
      LLVMValueRef ok =
          LLVMBuildICmp(b, LLVMIntNE, kb_load(kb, kb->i32, kb_byte_ptr(kb, x->valid, vo), 4), kb_i32(kb, 0), "");
      LLVMValueRef src = kb_byte_ptr(kb, LLVMBuildIntToPtr(b, a, kb->gptr, ""), LLVMBuildMul(b, q, kb_i64(kb, sz), ""));
      LLVMValueRef dst = kb_byte_ptr(kb, x->raw,
                                     LLVMBuildAdd(b, kb_i64(kb, dst0),
                                                  LLVMBuildAdd(b, LLVMBuildMul(b, j, kb_i64(kb, rb), ""),
                                                               LLVMBuildMul(b, q, kb_i64(kb, sz), ""), ""),
                                                  ""));
      kb->t->cp_async(kb, dst, src, sz, LLVMBuildSelect(b, ok, kb_i32(kb, sz), kb_i32(kb, 0), ""));
      kb_endif(kb, &f);
    }
  }
}

/* Dequantize the raw block into the K tile (bf16 rows). */
static void dequant_rows(dsv4_kb *kb, const dsv4_kernel *k, const warp_ctx *x)
{
  LLVMBuilderRef b = kb->b;
  int lanes = x->dim / k->tile.values_per_thread, tp = x->threads / lanes, passes = (SD_TILE + tp - 1) / tp;
  LLVMValueRef local = LLVMBuildUDiv(b, x->tid, kb_i32(kb, lanes), ""),
               ln = LLVMBuildURem(b, x->tid, kb_i32(kb, lanes), "");
  dsv4_lane_token tok[8] = {0};
  for (int u = 0; u < passes; u++) {
    LLVMValueRef j = LLVMBuildAdd(b, kb_i32(kb, u * tp), local, "");
    LLVMValueRef in = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntULT, j, kb_i32(kb, SD_TILE), ""),
                                   LLVMBuildICmp(b, LLVMIntULT, local, kb_i32(kb, tp), ""), "");
    LLVMValueRef jr = kb_zext64(kb, LLVMBuildSelect(b, in, j, kb_i32(kb, 0), ""));
    tok[u].blk = x->raw;
    tok[u].row = jr;
    tok[u].valid = in; /* invalid rows were zero-filled: they dequantize to +0.0 */
    tok[u].write = in;
    tok[u].out_row = kb_byte_ptr(kb, x->k_tile, LLVMBuildMul(b, jr, kb_i64(kb, x->row_bytes), ""));
  }
  dsv4_kernel kd = *k;
  kd.tile.streaming = 0; /* shared memory on both sides */
  dsv4_emit_dequant_tokens_split(kb, &kd, ln, kb_i64(kb, SD_TILE), sd_f32(kb, 1.0), tok, passes, NULL, NULL,
                                 1); /* a matrix operand */
}

/* S (s_tiles n-tiles of 8 rows: this warp's part of the tile) = q K^T. */
static void qk(dsv4_kb *kb, const warp_ctx *x, LLVMValueRef S[4][4])
{
  for (int j = 0; j < x->s_tiles; j++)
    for (int e = 0; e < 4; e++)
      S[j][e] = sd_f32(kb, 0.0);
  for (int kk = 0; kk < x->dim / 16; kk++) {
    LLVMValueRef a[4], bq[2][4];
    kb->t->ldmatrix_x4(kb, kb_byte_ptr(kb, x->q_tile, LLVMBuildAdd(kb->b, x->q_ld, kb_i64(kb, kk * 32), "")), 0, a);
    for (int jp = 0; jp < x->s_tiles / 2; jp++)
      kb->t->ldmatrix_x4(
          kb,
          kb_byte_ptr(kb, x->k_tile,
                      LLVMBuildAdd(kb->b, x->k_ld, kb_i64(kb, (long long)jp * 16 * x->row_bytes + kk * 32), "")),
          0, bq[jp]);
    for (int j = 0; j < x->s_tiles; j++)
      kb->t->mma_bf16_16x8x16(kb, a, &bq[j / 2][(j % 2) * 2], S[j], S[j]);
  }
}

/* The online-softmax state a lane carries across tiles: its two rows' m
 * and l, and its accumulator fragments. */
typedef sd_rows warp_state; /* (o_tiles <= O_TILES_MAX <= SD_ROWS_TILES_MAX) */

/* Tile lo into the K tile before the loop (when the CTA has any tile). */
static void first_tile(dsv4_kb *kb, const dsv4_kernel *k, const warp_ctx *x, LLVMValueRef lo, LLVMValueRef hi)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef lbuf = LLVMBuildAnd(b, lo, kb_i32(kb, 1), "");
  kb_if_t any = kb_if(kb, LLVMBuildICmp(b, LLVMIntSLT, lo, hi, ""), "tiles");
  find_rows(kb, k, x, lo, lbuf);
  kb->t->barrier(kb);
  copy_rows(kb, k, x, lbuf);
  kb->t->cp_async_wait_all(kb);
  kb->t->barrier(kb);
  dequant_rows(kb, k, x);
  kb->t->barrier(kb);
  kb_endif(kb, &any);
}

/* S = q K^T for K tile buf's rows, in base 2, -inf for rows past the list
 * or with bad indices; mx: the lane's two rows' maxima over its part.
 * Returns col0, the lane's first column of the tile (i32). */
static LLVMValueRef scores(dsv4_kb *kb, const warp_ctx *x, LLVMValueRef buf, LLVMValueRef S[4][4], LLVMValueRef *mx)
{
  LLVMBuilderRef b = kb->b;
  qk(kb, x, S);
  LLVMValueRef col0 = LLVMBuildAdd(b, LLVMBuildMul(b, x->part, kb_i32(kb, x->part_rows), ""),
                                   LLVMBuildMul(b, x->c, kb_i32(kb, 2), ""), "");
  LLVMValueRef vbase = LLVMBuildMul(b, kb_zext64(kb, buf), kb_i64(kb, SD_TILE * 4), "");
  LLVMValueRef rowv[2][8];
  for (int j = 0; j < x->s_tiles; j++)
    for (int e = 0; e < 2; e++) {
      LLVMValueRef col = LLVMBuildAdd(b, col0, kb_i32(kb, j * 8 + e), "");
      LLVMValueRef ok = kb_load(
          kb, kb->i32,
          kb_byte_ptr(kb, x->valid, LLVMBuildAdd(b, vbase, LLVMBuildMul(b, kb_zext64(kb, col), kb_i64(kb, 4), ""), "")),
          4);
      ok = LLVMBuildICmp(b, LLVMIntNE, ok, kb_i32(kb, 0), "");
      for (int h = 0; h < 2; h++) {
        LLVMValueRef v = LLVMBuildFMul(b, S[j][h * 2 + e], x->scale2, "");
        S[j][h * 2 + e] = rowv[h][2 * j + e] = LLVMBuildSelect(b, ok, v, sd_f32(kb, -INFINITY), "");
      }
    }
  for (int h = 0; h < 2; h++)
    mx[h] = sd_fold_tree(kb, rowv[h], 2 * x->s_tiles, 0);
  return col0;
}

/* The rows' byte offsets (i64) in a part's slot of red: the lane's rows
 * g and g + 8 of its row block. */
static void row_offsets(dsv4_kb *kb, const warp_ctx *x, LLVMValueRef *rowoff)
{
  LLVMBuilderRef b = kb->b;
  for (int h = 0; h < 2; h++) {
    LLVMValueRef row =
        LLVMBuildAdd(b, LLVMBuildMul(b, x->rblk, kb_i32(kb, 16), ""), LLVMBuildAdd(b, x->g, kb_i32(kb, h * 8), ""), "");
    rowoff[h] = LLVMBuildMul(b, kb_zext64(kb, row), kb_i64(kb, 4), "");
  }
}

/* The online softmax's step (sd_online_step) and cur's accumulators
 * rescaled into nx. */
static void softmax(dsv4_kb *kb, const warp_ctx *x, LLVMValueRef S[4][4], const LLVMValueRef *rowoff,
                    const warp_state *cur, warp_state *nx)
{
  LLVMValueRef corr[2];
  sd_online_step(kb, x->red, x->parts, x->heads, rowoff, S, x->s_tiles, cur->m, cur->l, nx->m, nx->l, corr);
  for (int h = 0; h < 2; h++)
    for (int j = 0; j < x->o_tiles; j++)
      for (int e = 0; e < 2; e++)
        nx->acc[j][h * 2 + e] = LLVMBuildFMul(kb->b, cur->acc[j][h * 2 + e], corr[h], "");
}

/* P (the lane's S fragments) into shared memory: bf16, or hi + lo bf16
 * parts (bf16x2). */
static void store_p(dsv4_kb *kb, const dsv4_kernel *k, const warp_ctx *x, LLVMValueRef S[4][4],
                    const LLVMValueRef *rowoff, LLVMValueRef col0)
{
  LLVMBuilderRef b = kb->b;
  for (int h = 0; h < 2; h++) {
    LLVMValueRef prow = LLVMBuildMul(b, LLVMBuildUDiv(b, rowoff[h], kb_i64(kb, 4), ""), kb_i64(kb, x->p_row_bytes), "");
    for (int j = 0; j < x->s_tiles; j++) {
      LLVMValueRef w[2];
      sd_p_words(kb, k, S[j][h * 2], S[j][h * 2 + 1], &w[0], &w[1]);
      LLVMValueRef col = LLVMBuildAdd(b, col0, kb_i32(kb, j * 8), "");
      LLVMValueRef off = LLVMBuildAdd(b, prow, LLVMBuildMul(b, kb_zext64(kb, col), kb_i64(kb, 2), ""), "");
      LLVMValueRef base[2] = {x->p_hi, x->p_lo};
      for (int q = 0; q < x->p_parts; q++)
        kb_store(kb, w[q], kb_byte_ptr(kb, base[q], off), 4);
    }
  }
}

/* acc += P V over this warp's part of V (bf16x2: the lo part, then the hi
 * part; bf16: the one part). */
static void pv(dsv4_kb *kb, const warp_ctx *x, warp_state *nx)
{
  LLVMBuilderRef b = kb->b;
  for (int kk = 0; kk < SD_TILE / 16; kk++) {
    LLVMValueRef a[4], al[4];
    kb->t->ldmatrix_x4(kb, kb_byte_ptr(kb, x->p_hi, LLVMBuildAdd(b, x->p_ld, kb_i64(kb, kk * 32), "")), 0, a);
    if (x->p_parts == 2)
      kb->t->ldmatrix_x4(kb, kb_byte_ptr(kb, x->p_lo, LLVMBuildAdd(b, x->p_ld, kb_i64(kb, kk * 32), "")), 0, al);
    for (int dp = 0; dp < x->o_tiles / 2; dp++) {
      LLVMValueRef bv[4];
      long long off = (long long)kk * 16 * x->row_bytes + dp * 32;
      kb->t->ldmatrix_x4(kb, kb_byte_ptr(kb, x->k_tile, LLVMBuildAdd(b, x->v_ld, kb_i64(kb, off), "")), 1, bv);
      for (int n = 0; n < 2; n++) {
        if (x->p_parts == 2)
          kb->t->mma_bf16_16x8x16(kb, al, &bv[2 * n], nx->acc[2 * dp + n], nx->acc[2 * dp + n]);
        kb->t->mma_bf16_16x8x16(kb, a, &bv[2 * n], nx->acc[2 * dp + n], nx->acc[2 * dp + n]);
      }
    }
  }
}

/* Fold tiles [lo, hi) of the token into the state: per tile, the next
 * tile's rows found and copied while this one computes, then dequantized. */
static void fold_tiles(dsv4_kb *kb, const dsv4_kernel *k, const warp_ctx *x, LLVMValueRef lo, LLVMValueRef hi,
                       warp_state *st)
{
  LLVMBuilderRef b = kb->b;
  first_tile(kb, k, x, lo, hi);
  LLVMValueRef init[KB_LOOP_MAX_VARS];
  sd_rows_pack(st, x->o_tiles, init);
  kb_loop_t loop;
  kb_for(kb, &loop, lo, hi, 4 + 4 * x->o_tiles, init);
  warp_state cur, nx;
  sd_rows_unpack(&cur, x->o_tiles, loop.vars);
  LLVMValueRef i = loop.iv, i1 = LLVMBuildAdd(b, i, kb_i32(kb, 1), "");
  LLVMValueRef more = LLVMBuildICmp(b, LLVMIntSLT, i1, hi, "more");
  LLVMValueRef buf = LLVMBuildAnd(b, i, kb_i32(kb, 1), ""), nbuf = LLVMBuildAnd(b, i1, kb_i32(kb, 1), "");
  kb_if_t f1 = kb_if(kb, more, "next");
  find_rows(kb, k, x, i1, nbuf);
  kb_endif(kb, &f1);

  LLVMValueRef S[4][4], mx[2], rowoff[2];
  LLVMValueRef col0 = scores(kb, x, buf, S, mx);
  row_offsets(kb, x, rowoff);
  sd_publish_max(kb, x->red, x->part, x->c, x->heads, mx, rowoff);
  kb->t->barrier(kb); /* maxima, and the next tile's rows, published */
  kb_if_t f2 = kb_if(kb, more, "copy");
  copy_rows(kb, k, x, nbuf);
  kb_endif(kb, &f2);
  softmax(kb, x, S, rowoff, &cur, &nx);
  store_p(kb, k, x, S, rowoff, col0);
  kb->t->barrier(kb);
  pv(kb, x, &nx);
  kb->t->cp_async_wait_all(kb);
  kb->t->barrier(kb); /* K and P read; the next tile's bytes arrived */
  kb_if_t f3 = kb_if(kb, more, "deq");
  dequant_rows(kb, k, x);
  kb_endif(kb, &f3);
  kb->t->barrier(kb);
  LLVMValueRef next[KB_LOOP_MAX_VARS];
  sd_rows_pack(&nx, x->o_tiles, next);
  kb_for_end(kb, &loop, next);
  sd_rows_unpack(st, x->o_tiles, loop.vars);
}

/* The form's shape from kernel k and its launch record here (no IR). */
static void set_shape(const dsv4_kb *kb, const dsv4_kernel *k, warp_ctx *x)
{
  x->heads = k->tile.tokens_per_cta, x->row_blocks = x->heads / 16, x->dim = k->layout.dim, x->v_dim = k->v_dim;
  x->parts = DSV4_DECODE_WARPS, x->part_rows = SD_TILE / x->parts, x->s_tiles = x->part_rows / 8;
  x->o_tiles = x->v_dim / x->parts / 8;
  x->row_bytes = dsv4_decode_row_bytes(x->dim), x->p_row_bytes = SD_TILE * 2 + 16, x->threads = dsv4_gen_threads(kb, k);
  x->p_parts = sd_p_parts(k);
}

/* 0 if this target can build the form for k, else an error in d. */
static int check_target(dsv4_kb *kb, const dsv4_kernel *k, const warp_ctx *x, dsv4_diags *d)
{
  int lanes = x->dim / k->tile.values_per_thread;
  if (!sd_warp_mma_ok(kb) || x->o_tiles > O_TILES_MAX || lanes > x->threads ||
      (SD_TILE + x->threads / lanes - 1) / (x->threads / lanes) > 8 || x->threads < SD_TILE) {
    dsv4_error(d, k->file, k->line, "kernel '%s': this target (%s) cannot build the warp-matrix form of sparse_decode",
               k->name, kb->arch);
    return 1;
  }
  return 0;
}

/* The shared regions, in form_rules.h's order; 0 if they add up to its rule. */
static int carve_shared(dsv4_kb *kb, const dsv4_kernel *k, warp_ctx *x, dsv4_diags *d)
{
  LLVMValueRef sm = kb_dyn_shared(kb);
  long long o = 0;
  x->q_tile = sd_carve(kb, sm, &o, (long long)x->heads * x->row_bytes);
  x->k_tile = sd_carve(kb, sm, &o, (long long)SD_TILE * x->row_bytes);
  x->p_hi = sd_carve(kb, sm, &o, (long long)x->heads * x->p_row_bytes);
  x->p_lo = sd_carve(kb, sm, &o, (long long)x->heads * x->p_row_bytes); /* (unused with bf16 P: the rule keeps it) */
  x->raw = sd_carve(kb, sm, &o, dsv4_decode_raw_bytes(&k->layout));
  x->row_addr = sd_carve(kb, sm, &o, SD_TILE * 16);
  x->red = sd_carve(kb, sm, &o, (long long)x->heads * 8 * x->parts);
  x->valid = sd_carve(kb, sm, &o, SD_TILE * 8);
  return sd_shared_agrees(k, o, DSV4_FORM_WARP, d);
}

/* The thread's warp, lane and fragment coordinates. */
static void thread_coords(dsv4_kb *kb, warp_ctx *x)
{
  LLVMBuilderRef b = kb->b;
  x->tid = kb->t->thread_id(kb);
  LLVMValueRef warp = LLVMBuildUDiv(b, x->tid, kb_i32(kb, 32), "warp");
  x->lane = LLVMBuildURem(b, x->tid, kb_i32(kb, 32), "lane");
  x->g = LLVMBuildLShr(b, x->lane, kb_i32(kb, 2), "g");
  x->c = LLVMBuildAnd(b, x->lane, kb_i32(kb, 3), "c");
  x->rblk = LLVMBuildURem(b, warp, kb_i32(kb, x->row_blocks), "rblk");
  x->part = LLVMBuildUDiv(b, warp, kb_i32(kb, x->row_blocks), "part");
}

/* The lane's ldmatrix row addresses: lane l gives row (l & 7) + 8 ((l >> 3)
 * & 1) or (l & 7) + 8 (l >> 4) of a 16 x 16 block, column 8 (l >> 4) or
 * 8 ((l >> 3) & 1). */
static void ldmatrix_offsets(dsv4_kb *kb, warp_ctx *x)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef l7 = kb_zext64(kb, LLVMBuildAnd(b, x->lane, kb_i32(kb, 7), ""));
  LLVMValueRef b3 = kb_zext64(kb, LLVMBuildAnd(b, LLVMBuildLShr(b, x->lane, kb_i32(kb, 3), ""), kb_i32(kb, 1), ""));
  LLVMValueRef b4 = kb_zext64(kb, LLVMBuildLShr(b, x->lane, kb_i32(kb, 4), ""));
  LLVMValueRef rowA = LLVMBuildAdd(b, l7, LLVMBuildMul(b, b3, kb_i64(kb, 8), ""), ""); /* A: rows 0-15 */
  LLVMValueRef colA = LLVMBuildMul(b, b4, kb_i64(kb, 16), "");                         /* bytes */
  LLVMValueRef r16 = LLVMBuildMul(b, kb_zext64(kb, x->rblk), kb_i64(kb, 16), "");      /* the row block's first head */
  LLVMValueRef krow0 =
      LLVMBuildMul(b, kb_zext64(kb, x->part), kb_i64(kb, x->part_rows), ""); /* the part's first K row */
  x->q_ld = LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildAdd(b, r16, rowA, ""), kb_i64(kb, x->row_bytes), ""), colA, "qa");
  x->p_ld =
      LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildAdd(b, r16, rowA, ""), kb_i64(kb, x->p_row_bytes), ""), colA, "pa");
  LLVMValueRef rowB = LLVMBuildAdd(b, l7, LLVMBuildMul(b, b4, kb_i64(kb, 8), ""), ""); /* K rows (tokens) */
  x->k_ld = LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildAdd(b, krow0, rowB, ""), kb_i64(kb, x->row_bytes), ""),
                         LLVMBuildMul(b, b3, kb_i64(kb, 16), ""), "ka");
  LLVMValueRef vcol =
      LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, x->part), kb_i64(kb, (long long)x->v_dim / x->parts * 2), ""),
                   LLVMBuildMul(b, b4, kb_i64(kb, 16), ""), ""); /* bytes */
  x->v_ld = LLVMBuildAdd(b, LLVMBuildMul(b, rowA, kb_i64(kb, x->row_bytes), ""), vcol, "va");
}

/* q rows h0 .. h0 + heads of the token into q_tile (zeros past the heads). */
static void stage_q(dsv4_kb *kb, const warp_ctx *x, LLVMValueRef h0)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef H = kb_arg(kb, SD_heads);
  LLVMValueRef qvalid =
      LLVMBuildMul(b, kb_sext64(kb, LLVMBuildSub(b, H, h0, "")), kb_i64(kb, (long long)x->dim * 2), "");
  kb_stage_rows(kb, kb_arg(kb, SD_q), sd_head_at(kb, x->token, h0, SD_seq_q, SD_q_sb, SD_q_ss, SD_q_sh, 2),
                LLVMBuildMul(b, kb_arg(kb, SD_q_sh), kb_i64(kb, 2), ""), (long long)x->heads * x->dim * 2, qvalid,
                x->dim * 2, x->row_bytes, x->q_tile, x->tid, x->threads);
}

/* The rows' ends: each row's sum over the row block's parts
 * (sd_sum_parts), then sd_head_out for the lane's two rows. */
static void finish_rows(dsv4_kb *kb, const dsv4_kernel *k, const warp_ctx *x, warp_state *st, LLVMValueRef h0)
{
  LLVMValueRef rowoff[2], l[2] = {st->l[0], st->l[1]};
  row_offsets(kb, x, rowoff);
  sd_sum_parts(kb, kb_byte_ptr(kb, x->red, kb_i64(kb, (long long)x->heads * 4 * x->parts)), x->part, x->c, x->parts,
               x->heads, rowoff, l);
  sd_rows_out(kb, k, x->token, h0, x->rblk, x->g, x->c, x->part, x->v_dim / x->parts, st, l, x->o_tiles);
}

int sd_warp(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d)
{
  LLVMBuilderRef b = kb->b;
  warp_ctx x;
  set_shape(kb, k, &x);
  if (check_target(kb, k, &x, d) || carve_shared(kb, k, &x, d))
    return 1;
  thread_coords(kb, &x);
  x.token = kb->t->block_id(kb, 1);
  kb_return_if(kb, LLVMBuildICmp(b, LLVMIntSGE, x.token, kb_arg(kb, SD_n_tokens), "")); /* whole CTAs */
  LLVMValueRef h0 = LLVMBuildMul(b, kb->t->block_id(kb, 0), kb_i32(kb, x.heads), "h0");
  ldmatrix_offsets(kb, &x);
  stage_q(kb, &x, h0);
  x.scale2 = sd_scale2(kb, k);
  /* the prologue's barriers also publish q */
  warp_state st;
  for (int h = 0; h < 2; h++)
    st.m[h] = sd_f32(kb, -INFINITY), st.l[h] = sd_f32(kb, 0.0);
  for (int j = 0; j < x.o_tiles; j++)
    for (int e = 0; e < 4; e++)
      st.acc[j][e] = sd_f32(kb, 0.0);
  LLVMValueRef lo, hi; /* this CTA's share of the token's tiles */
  sd_token_tiles(kb, x.token, x.n, x.ntiles, &lo, &hi);
  fold_tiles(kb, k, &x, lo, hi, &st);
  finish_rows(kb, k, &x, &st, h0);
  return 0;
}
