/* direct.c -- the direct warp-matrix form of the sparse MLA decode
 * (DSV4_FORM_WARP_DIRECT): mma.sync on operands read straight from the
 * cache's bytes, for at most 32 heads a CTA (dsv4_decode_warp_direct in
 * form_rules.h says which layouts).  With few heads the matrix work is small and the
 * K bytes bound the kernel, so it keeps no dequantized K tile: no pass
 * that writes bf16 K to shared memory and no second read of it.
 *
 * One CTA per (token, heads_per_cta heads): 16-head row blocks of
 * DSV4_DECODE_DIRECT_WARPS warps.  The tiles of 64 K rows (the main list's, then
 * the extra list's) land by cp.async in two raw tiles as the cache stores
 * them (rows dsv4_decode_direct_pitch() apart, block-tail scale rows after
 * them); while tile i computes, tile i + 1 is copied, its indices loaded a
 * tile earlier.  Warp (rblk, part):
 *
 *   S     for its 16 heads and the tile's rows 8 part .. 8 part + 7
 *         (mma.sync m16n8k16, heads as M).  An e4m3 operand word is four
 *         bytes of one row: lane (g, c) takes dims 4c .. 4c + 3 of each
 *         16-dim k-step as its k = 2c, 2c + 1, 2c + 8, 2c + 9 (the sum over
 *         k does not care which dim is which k, so q's fragment is the same
 *         four dims, 8 bytes), and kb_e4m3x2_bits_bf16x2 makes the bf16
 *         pairs by moving bits: each value 2^-120 times its e4m3 value.
 *         Each scale group's k-steps sum into their own fragment, which
 *         then adds into S times 2^88 and the row's UE8M0 scale; q's e4m3
 *         dims were staged times 2^32 (exact), so products stay far from
 *         fp32's subnormals.  bf16 dims: 8-byte loads, the same k order.
 *   softmax  base 2, maxima over the row block's parts through shared
 *         memory; P in fp32 to shared memory.
 *   P V   for its v_dim / 8 dims.  V's reduction dim is the row, so the
 *         B fragment lane (g, c) needs one byte of four rows (2c, 2c + 1,
 *         2c + 8, 2c + 9 of the k-step) for its n = g: it loads a word of
 *         four dims from each of the four rows and byte-permutes them into
 *         four n-tiles, n-tile u holding dims 4n + u of a 32-dim piece (so
 *         a lane's accumulators hold 8 consecutive dims, put back into the
 *         usual fragment order at the end by a quad exchange).  The scale
 *         of a row and group multiplies P instead of V: the A fragment is
 *         bf16(p x scale x 2^32), exactly bf16(p) x scale x 2^32 for a
 *         power-of-two scale, so P V is FlashMLA's arithmetic (P rounded
 *         once to bf16, or as hi + lo parts with tile.p = 'bf16x2'); the
 *         accumulators are scaled by 2^88 at the end.  bf16 dims: ldmatrix
 *         .trans of the raw rows, P unscaled.
 *
 * Exact while q's e4m3-dim values stay below 2^96 and the cache's scales
 * below 2^96 (2^-120 x 2^32 keeps the operands' products normal in fp32
 * down to products of 2^-38; the warpgroup form's bf16 product has its
 * own limits, docs/ops.md section 3).
 */
#include <math.h>
#include <string.h>

#include "shape.h"

#define DT_OTILES_MAX 32 /* n-tiles of V a warp at most (v_dim 1024) */

enum { DT_ROWS = SD_TILE / DSV4_DECODE_DIRECT_WARPS, DT_STILES = DT_ROWS / 8 }; /* K rows, n-tiles of a warp's S */

typedef struct {
  const dsv4_kernel *k;
  const dsv4_layout *L;
  int heads, row_blocks, parts, o_tiles, dim, v_dim, vpart, threads, tpr;
  int pitch, q_row, p_row, tile_bytes, p_parts;
  LLVMValueRef q_tile, p_tile, raw, red, valid;
  LLVMValueRef tid, lane, g, c, rblk, part, jrow, sub, token, scale2, hi;
  LLVMValueRef n[2], ntiles[2];
} dctx;

static const double UP = 4294967296.0;                    /* 2^32: q's e4m3 dims, P's scale */
static const double DOWN = 309485009821345068724781056.0; /* 2^88 = 2^120 / 2^32 */

static const dsv4_segment *seg_at(const dsv4_layout *L, int d)
{
  for (int s = 0; s < L->nseg; s++)
    if (d >= L->seg[s].d0 && d < L->seg[s].d1)
      return &L->seg[s];
  return NULL;
}

static LLVMValueRef raw_buf(dsv4_kb *kb, const dctx *x, LLVMValueRef buf)
{
  return kb_byte_ptr(kb, x->raw, LLVMBuildMul(kb->b, kb_zext64(kb, buf), kb_i64(kb, x->tile_bytes), ""));
}

/* Raw row r's (i64) scale of e4m3 segment s for dim d (i64) as f32: its
 * UE8M0 byte (dsv4_decode_warp_direct admits only group-scaled e4m3). */
static LLVMValueRef row_scale(dsv4_kb *kb, const dctx *x, LLVMValueRef rbase, LLVMValueRef r, const dsv4_segment *s,
                              LLVMValueRef d)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef at =
      LLVMBuildAdd(b, kb_i64(kb, s->scale_offset),
                   LLVMBuildUDiv(b, LLVMBuildSub(b, d, kb_i64(kb, s->d0), ""), kb_i64(kb, s->scale_group), ""), "");
  LLVMValueRef off = x->L->scale_place == DSV4_SCALES_BLOCK_TAIL
                         ? LLVMBuildAdd(b, LLVMBuildAdd(b, kb_i64(kb, (long long)SD_TILE * x->pitch), at, ""),
                                        LLVMBuildMul(b, r, kb_i64(kb, x->L->scale_row_bytes), ""), "")
                         : LLVMBuildAdd(b, at, LLVMBuildMul(b, r, kb_i64(kb, x->pitch), ""), "");
  return kb_ue8m0_to_f32(kb, kb_load(kb, kb->i8, kb_byte_ptr(kb, rbase, off), 1));
}

/* The index (i32) of this thread's row (jrow) of tile i, -1 past its list
 * or at i >= hi. */
static LLVMValueRef load_index(dsv4_kb *kb, const dctx *x, LLVMValueRef i)
{
  LLVMBuilderRef b = kb->b;
  sd_tile_list tl = sd_pick_list(kb, x->token, i, x->n, x->ntiles);
  LLVMValueRef pos = LLVMBuildAdd(b, LLVMBuildMul(b, tl.lt, kb_i32(kb, SD_TILE), ""), x->jrow, "pos");
  LLVMValueRef want =
      LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSLT, i, x->hi, ""), LLVMBuildICmp(b, LLVMIntSLT, pos, tl.n, ""), "want");
  LLVMValueRef ioff = LLVMBuildMul(b, LLVMBuildAdd(b, tl.irow, kb_zext64(kb, pos), ""), kb_i64(kb, 4), "");
  return kb_load_if(kb, want, kb->i32, tl.ind, ioff, 4, kb_i32(kb, -1));
}

/* Tile i's rows into raw tile buf: each of a row's tpr threads copies
 * every tpr-th 16-byte piece (zeros for a bad or absent index), the first
 * also the row's scale row and validity word. */
static void issue_copy(dsv4_kb *kb, const dctx *x, LLVMValueRef i, LLVMValueRef idx, LLVMValueRef buf)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_layout *L = x->L;
  sd_tile_list tl = sd_pick_list(kb, x->token, i, x->n, x->ntiles);
  LLVMValueRef i64 = kb_sext64(kb, idx);
  LLVMValueRef valid = sd_row_valid(kb, i64, tl.nb, tl.bs);
  LLVMValueRef s0 = LLVMBuildSelect(b, valid, i64, kb_i64(kb, 0), "");
  LLVMValueRef row = LLVMBuildURem(b, s0, tl.bs, ""),
               blk = LLVMBuildMul(b, LLVMBuildUDiv(b, s0, tl.bs, ""), tl.stride, "");
  LLVMValueRef rp =
      kb_byte_ptr(kb, tl.cache, LLVMBuildAdd(b, blk, LLVMBuildMul(b, row, kb_i64(kb, L->row_bytes), ""), ""));
  LLVMValueRef rb = raw_buf(kb, x, buf), jr = kb_zext64(kb, x->jrow);
  LLVMValueRef dst = kb_byte_ptr(kb, rb, LLVMBuildMul(b, jr, kb_i64(kb, x->pitch), ""));
  LLVMValueRef n16 = LLVMBuildSelect(b, valid, kb_i32(kb, 16), kb_i32(kb, 0), "");
  int pieces = L->row_bytes / 16;
  for (int u = 0; u * x->tpr < pieces; u++) {
    LLVMValueRef q = kb_zext64(kb, LLVMBuildAdd(b, x->sub, kb_i32(kb, u * x->tpr), ""));
    LLVMValueRef off = LLVMBuildMul(b, q, kb_i64(kb, 16), "");
    int guard = (u + 1) * x->tpr > pieces;
    kb_if_t f;
    if (guard)
      f = kb_if(kb, LLVMBuildICmp(b, LLVMIntULT, q, kb_i64(kb, pieces), ""), "piece");
    kb->t->cp_async(kb, kb_byte_ptr(kb, dst, off), kb_byte_ptr(kb, rp, off), 16, n16);
    if (guard)
      kb_endif(kb, &f);
  }
  kb_if_t f0 = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, x->sub, kb_i32(kb, 0), ""), "first");
  if (L->scale_place == DSV4_SCALES_BLOCK_TAIL) {
    int srb = L->scale_row_bytes, sz = srb % 16 == 0 ? 16 : srb % 8 == 0 ? 8 : 4;
    LLVMValueRef sp = kb_byte_ptr(kb, tl.cache, LLVMBuildAdd(b, blk, sd_tail_scale_offset(kb, L, tl.bs, row), ""));
    LLVMValueRef sd = kb_byte_ptr(
        kb, rb,
        LLVMBuildAdd(b, kb_i64(kb, (long long)SD_TILE * x->pitch), LLVMBuildMul(b, jr, kb_i64(kb, srb), ""), ""));
    LLVMValueRef nz = LLVMBuildSelect(b, valid, kb_i32(kb, sz), kb_i32(kb, 0), "");
    for (int o = 0; o < srb; o += sz)
      kb->t->cp_async(kb, kb_byte_ptr(kb, sd, kb_i64(kb, o)), kb_byte_ptr(kb, sp, kb_i64(kb, o)), sz, nz);
  }
  LLVMValueRef vo = LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, buf), kb_i64(kb, SD_TILE * 4), ""),
                                 LLVMBuildMul(b, jr, kb_i64(kb, 4), ""), "");
  kb_store(kb, LLVMBuildZExt(b, valid, kb->i32, ""), kb_byte_ptr(kb, x->valid, vo), 4);
  kb_endif(kb, &f0);
}

/* The A fragment of q for the 16 dims at d: q_tile holds q in fragment
 * order (stage_q), the lane's four registers 16 bytes at ((row block x
 * k-steps + k-step) x 32 + lane) x 16: one conflict-free 16-byte load. */
static void q_frag(dsv4_kb *kb, const dctx *x, int d, LLVMValueRef a[4])
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef at = LLVMBuildAdd(
      b,
      LLVMBuildMul(
          b, kb_zext64(kb, LLVMBuildAdd(b, LLVMBuildMul(b, x->rblk, kb_i32(kb, x->dim / 16 * 32), ""), x->lane, "")),
          kb_i64(kb, 16), ""),
      kb_i64(kb, (long long)d / 16 * 32 * 16), "");
  LLVMValueRef v = kb_load(kb, LLVMVectorType(kb->i32, 4), kb_byte_ptr(kb, x->q_tile, at), 16);
  for (int r = 0; r < 4; r++)
    a[r] = LLVMBuildExtractElement(b, v, kb_i32(kb, r), "");
}

/* S = q K^T for the warp's rows of raw tile rb, scale groups folded in. */
static void qk(dsv4_kb *kb, const dctx *x, LLVMValueRef rb, LLVMValueRef S[2][4])
{
  LLVMBuilderRef b = kb->b;
  LLVMTypeRef v2 = LLVMVectorType(kb->i32, 2);
  LLVMValueRef rowp[2], col[2][2], c4 = kb_zext64(kb, LLVMBuildMul(b, x->c, kb_i32(kb, 4), ""));
  for (int j = 0; j < DT_STILES; j++) {
    LLVMValueRef r = LLVMBuildAdd(b, LLVMBuildMul(b, x->part, kb_i32(kb, DT_ROWS), ""),
                                  LLVMBuildAdd(b, x->g, kb_i32(kb, 8 * j), ""), "");
    rowp[j] = kb_byte_ptr(kb, rb, LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, r), kb_i64(kb, x->pitch), ""), c4, ""));
    for (int e = 0; e < 2; e++)
      col[j][e] = kb_zext64(
          kb, LLVMBuildAdd(b, LLVMBuildMul(b, x->part, kb_i32(kb, DT_ROWS), ""),
                           LLVMBuildAdd(b, LLVMBuildMul(b, x->c, kb_i32(kb, 2), ""), kb_i32(kb, 8 * j + e), ""), ""));
    for (int e = 0; e < 4; e++)
      S[j][e] = sd_f32(kb, 0.0);
  }
  for (int d = 0; d < x->dim;) {
    const dsv4_segment *s = seg_at(x->L, d);
    if (s->type == DSV4_DT_BF16) {
      for (; d < s->d1; d += 16) {
        LLVMValueRef a[4];
        q_frag(kb, x, d, a);
        for (int j = 0; j < DT_STILES; j++) {
          LLVMValueRef at = LLVMBuildAdd(b, c4, kb_i64(kb, s->offset + 2LL * (d - s->d0)), ""); /* 8c in all */
          LLVMValueRef v = kb_load(kb, v2, kb_byte_ptr(kb, rowp[j], at), 8);
          LLVMValueRef bf[2] = {LLVMBuildExtractElement(b, v, kb_i32(kb, 0), ""),
                                LLVMBuildExtractElement(b, v, kb_i32(kb, 1), "")};
          kb->t->mma_bf16_16x8x16(kb, a, bf, S[j], S[j]);
        }
      }
      continue;
    }
    int group = s->scale_group;
    LLVMValueRef T[2][4];
    for (int j = 0; j < DT_STILES; j++)
      for (int e = 0; e < 4; e++)
        T[j][e] = sd_f32(kb, 0.0);
    for (int dd = d; dd < d + group; dd += 16) {
      LLVMValueRef a[4];
      q_frag(kb, x, dd, a);
      for (int j = 0; j < DT_STILES; j++) {
        LLVMValueRef w = kb_load(kb, kb->i32, kb_byte_ptr(kb, rowp[j], kb_i64(kb, s->offset + (dd - s->d0))), 4);
        LLVMValueRef bf[2] = {kb_e4m3x2_bits_bf16x2(kb, kb_byte_perm(kb, w, w, 0x1100)),
                              kb_e4m3x2_bits_bf16x2(kb, kb_byte_perm(kb, w, w, 0x3322))};
        kb->t->mma_bf16_16x8x16(kb, a, bf, T[j], T[j]);
      }
    }
    for (int j = 0; j < DT_STILES; j++)
      for (int e = 0; e < 2; e++) {
        LLVMValueRef sc = row_scale(kb, x, rb, col[j][e], s, kb_i64(kb, d));
        for (int h = 0; h < 2; h++) {
          LLVMValueRef t = LLVMBuildFMul(b, T[j][h * 2 + e], sd_f32(kb, DOWN), "");
          S[j][h * 2 + e] = LLVMBuildFAdd(b, S[j][h * 2 + e], LLVMBuildFMul(b, t, sc, ""), "");
        }
      }
    d += group;
  }
}

/* The online-softmax state a lane carries across tiles. */
typedef sd_rows dstate; /* (o_tiles <= DT_OTILES_MAX <= SD_ROWS_TILES_MAX) */

/* Byte offset (i64) in a per-head region of row h of the lane (g + 8 h
 * of its row block), 4 bytes a head. */
static LLVMValueRef head_off(dsv4_kb *kb, const dctx *x, int h)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef row =
      LLVMBuildAdd(b, LLVMBuildMul(b, x->rblk, kb_i32(kb, 16), ""), LLVMBuildAdd(b, x->g, kb_i32(kb, 8 * h), ""), "");
  return LLVMBuildMul(b, kb_zext64(kb, row), kb_i64(kb, 4), "");
}

/* Mask S (base 2, -inf for invalid rows), publish the lane's row maxima,
 * then (after the barrier) the step: new maxima, P into shared memory
 * (fp32), the state rescaled into nx. */
static void softmax(dsv4_kb *kb, const dctx *x, LLVMValueRef buf, LLVMValueRef S[2][4], const dstate *cur, dstate *nx)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef vbase = LLVMBuildMul(b, kb_zext64(kb, buf), kb_i64(kb, SD_TILE * 4), "");
  LLVMValueRef col0 = LLVMBuildAdd(b, LLVMBuildMul(b, x->part, kb_i32(kb, DT_ROWS), ""),
                                   LLVMBuildMul(b, x->c, kb_i32(kb, 2), ""), "col0");
  LLVMValueRef rowv[2][4], mx[2], ro[2];
  for (int j = 0; j < DT_STILES; j++)
    for (int e = 0; e < 2; e++) {
      LLVMValueRef colj = kb_zext64(kb, LLVMBuildAdd(b, col0, kb_i32(kb, 8 * j + e), ""));
      LLVMValueRef ok =
          kb_load(kb, kb->i32,
                  kb_byte_ptr(kb, x->valid, LLVMBuildAdd(b, vbase, LLVMBuildMul(b, colj, kb_i64(kb, 4), ""), "")), 4);
      ok = LLVMBuildICmp(b, LLVMIntNE, ok, kb_i32(kb, 0), "");
      for (int h = 0; h < 2; h++)
        S[j][h * 2 + e] = rowv[h][2 * j + e] =
            LLVMBuildSelect(b, ok, LLVMBuildFMul(b, S[j][h * 2 + e], x->scale2, ""), sd_f32(kb, -INFINITY), "");
    }
  for (int h = 0; h < 2; h++) {
    mx[h] = sd_fold_tree(kb, rowv[h], 2 * DT_STILES, 0);
    ro[h] = head_off(kb, x, h);
  }
  sd_publish_max(kb, x->red, x->part, x->c, x->heads, mx, ro);
  kb->t->barrier(kb);
  LLVMValueRef corr[2];
  sd_online_step(kb, x->red, x->parts, x->heads, ro, S, DT_STILES, cur->m, cur->l, nx->m, nx->l, corr);
  for (int h = 0; h < 2; h++) {
    for (int j = 0; j < x->o_tiles; j++)
      for (int e = 0; e < 2; e++)
        nx->acc[j][h * 2 + e] = LLVMBuildFMul(b, cur->acc[j][h * 2 + e], corr[h], "");
    LLVMValueRef prow = LLVMBuildMul(b, LLVMBuildUDiv(b, ro[h], kb_i64(kb, 4), ""), kb_i64(kb, x->p_row), "");
    for (int j = 0; j < DT_STILES; j++) {
      LLVMValueRef v = LLVMGetUndef(LLVMVectorType(kb->f32, 2));
      for (int e = 0; e < 2; e++)
        v = LLVMBuildInsertElement(b, v, S[j][h * 2 + e], kb_i32(kb, e), "");
      LLVMValueRef off = LLVMBuildAdd(
          b, prow, kb_zext64(kb, LLVMBuildMul(b, LLVMBuildAdd(b, col0, kb_i32(kb, 8 * j), ""), kb_i32(kb, 4), "")), "");
      kb_store(kb, v, kb_byte_ptr(kb, x->p_tile, off), 8);
    }
  }
}

/* P's A fragment words for the k-step's four rows q (2c, 2c + 1, 2c + 8,
 * 2c + 9) with row factors f[q]: hi (and, bf16x2, lo) parts. */
static void p_frag(dsv4_kb *kb, const dctx *x, LLVMValueRef p[2][4], const LLVMValueRef f[4], LLVMValueRef a[4],
                   LLVMValueRef al[4])
{
  LLVMBuilderRef b = kb->b;
  for (int h = 0; h < 2; h++)
    for (int half = 0; half < 2; half++) {
      LLVMValueRef u = LLVMBuildFMul(b, p[h][2 * half], f[2 * half], "");
      LLVMValueRef v = LLVMBuildFMul(b, p[h][2 * half + 1], f[2 * half + 1], "");
      LLVMValueRef lo = NULL;
      sd_p_words(kb, x->k, u, v, &a[2 * half + h], &lo);
      al[2 * half + h] = lo;
    }
}

/* The parts whose dims have the same pieces (segment, width, whether a
 * piece starts a scale group) share one body, addressed from the warp's
 * first dim at run time: V4's seven e4m3 parts one, the RoPE part another
 * (one body a part would be eight copies of P V, and warps running eight
 * bodies at once miss the instruction cache). */
static int same_pieces(const dctx *x, int p, int q)
{
  for (int r = 0; r < x->vpart;) {
    int d = p * x->vpart + r, e = q * x->vpart + r;
    const dsv4_segment *s = seg_at(x->L, d), *t = seg_at(x->L, e);
    int w = s->type == DSV4_DT_BF16 ? 16 : 32;
    if (s != t ||
        (s->type == DSV4_DT_E4M3 && ((d - s->d0) % s->scale_group == 0) != ((e - t->d0) % t->scale_group == 0)))
      return 0;
    r += w;
  }
  return 1;
}

/* acc += P V for the dims of a part with part pt's pieces (the warp's own
 * part at run time: dbase its first dim) of raw tile rb. */
static void pv_part(dsv4_kb *kb, const dctx *x, LLVMValueRef rb, int pt, LLVMValueRef (*acc)[4])
{
  LLVMBuilderRef b = kb->b;
  LLVMTypeRef v2 = LLVMVectorType(kb->f32, 2);
  LLVMValueRef l7 = kb_zext64(kb, LLVMBuildAnd(b, x->lane, kb_i32(kb, 7), ""));
  LLVMValueRef b3 = kb_zext64(kb, LLVMBuildAnd(b, LLVMBuildLShr(b, x->lane, kb_i32(kb, 3), ""), kb_i32(kb, 1), ""));
  LLVMValueRef b4 = kb_zext64(kb, LLVMBuildLShr(b, x->lane, kb_i32(kb, 4), ""));
  LLVMValueRef c2 = kb_zext64(kb, LLVMBuildMul(b, x->c, kb_i32(kb, 2), ""));
  LLVMValueRef g4 = kb_zext64(kb, LLVMBuildMul(b, x->g, kb_i32(kb, 4), ""));
  LLVMValueRef dbase = LLVMBuildMul(b, kb_zext64(kb, x->part), kb_i64(kb, x->vpart), "dbase");
  LLVMValueRef prow[2];
  for (int h = 0; h < 2; h++)
    prow[h] =
        kb_byte_ptr(kb, x->p_tile,
                    LLVMBuildMul(b, LLVMBuildUDiv(b, head_off(kb, x, h), kb_i64(kb, 4), ""), kb_i64(kb, x->p_row), ""));
  for (int ks = 0; ks < SD_TILE / 16; ks++) {
    LLVMValueRef r[4], p[2][4], a[4], al[4];
    for (int q = 0; q < 4; q++) /* the k-step's rows k = 2c, 2c + 1, 2c + 8, 2c + 9 */
      r[q] = LLVMBuildAdd(b, c2, kb_i64(kb, 16 * ks + (q & 1) + 8 * (q >> 1)), "");
    for (int h = 0; h < 2; h++)
      for (int half = 0; half < 2; half++) {
        LLVMValueRef v = kb_load(kb, v2, kb_byte_ptr(kb, prow[h], LLVMBuildMul(b, r[2 * half], kb_i64(kb, 4), "")), 8);
        p[h][2 * half] = LLVMBuildExtractElement(b, v, kb_i32(kb, 0), "");
        p[h][2 * half + 1] = LLVMBuildExtractElement(b, v, kb_i32(kb, 1), "");
      }
    const dsv4_segment *fs = NULL; /* the segment a[] holds P for (and, e4m3, whose group) */
    int o = 0;
    for (int rel = 0; rel < x->vpart;) {
      int d = pt * x->vpart + rel; /* (the representative's dim: its segment and group start) */
      const dsv4_segment *s = seg_at(x->L, d);
      LLVMValueRef dd = LLVMBuildAdd(b, dbase, kb_i64(kb, rel), ""); /* the warp's dim */
      LLVMValueRef at = LLVMBuildAdd(
          b, kb_i64(kb, s->offset),
          LLVMBuildMul(b, LLVMBuildSub(b, dd, kb_i64(kb, s->d0), ""), kb_i64(kb, s->type == DSV4_DT_BF16 ? 2 : 1), ""),
          "");
      if (s->type == DSV4_DT_BF16) { /* ldmatrix.trans of the rows, P unscaled */
        if (fs != s) {
          LLVMValueRef one[4] = {sd_f32(kb, 1.0), sd_f32(kb, 1.0), sd_f32(kb, 1.0), sd_f32(kb, 1.0)};
          p_frag(kb, x, p, one, a, al);
          fs = s;
        }
        LLVMValueRef row =
            LLVMBuildAdd(b, kb_i64(kb, 16 * ks), LLVMBuildAdd(b, l7, LLVMBuildMul(b, b3, kb_i64(kb, 8), ""), ""), "");
        LLVMValueRef off = LLVMBuildAdd(b, LLVMBuildMul(b, row, kb_i64(kb, x->pitch), ""),
                                        LLVMBuildAdd(b, at, LLVMBuildMul(b, b4, kb_i64(kb, 16), ""), ""), "");
        LLVMValueRef bv[4];
        kb->t->ldmatrix_x4(kb, kb_byte_ptr(kb, rb, off), 1, bv);
        for (int n = 0; n < 2; n++) {
          if (x->p_parts == 2)
            kb->t->mma_bf16_16x8x16(kb, al, &bv[2 * n], acc[o + n], acc[o + n]);
          kb->t->mma_bf16_16x8x16(kb, a, &bv[2 * n], acc[o + n], acc[o + n]);
        }
        o += 2, rel += 16;
        continue;
      }
      if (fs != s || (d - s->d0) % s->scale_group == 0) { /* P x each row's scale x 2^32 */
        LLVMValueRef f[4];
        for (int q = 0; q < 4; q++)
          f[q] = LLVMBuildFMul(b, row_scale(kb, x, rb, r[q], s, dd), sd_f32(kb, UP), "");
        p_frag(kb, x, p, f, a, al);
        fs = s;
      }
      LLVMValueRef w[4]; /* dims dd + 4g .. + 3 of the four rows */
      for (int q = 0; q < 4; q++)
        w[q] = kb_load(kb, kb->i32,
                       kb_byte_ptr(kb, rb,
                                   LLVMBuildAdd(b, LLVMBuildMul(b, r[q], kb_i64(kb, x->pitch), ""),
                                                LLVMBuildAdd(b, g4, at, ""), "")),
                       4);
      for (int u = 0; u < 4; u++) { /* n-tile u: dim dd + 4g + u of rows (2c, 2c + 1) and (2c + 8, 2c + 9) */
        int sel = u | u << 4 | (4 + u) << 8 | (4 + u) << 12;
        LLVMValueRef bf[2] = {kb_e4m3x2_bits_bf16x2(kb, kb_byte_perm(kb, w[0], w[1], sel)),
                              kb_e4m3x2_bits_bf16x2(kb, kb_byte_perm(kb, w[2], w[3], sel))};
        if (x->p_parts == 2)
          kb->t->mma_bf16_16x8x16(kb, al, bf, acc[o + u], acc[o + u]);
        kb->t->mma_bf16_16x8x16(kb, a, bf, acc[o + u], acc[o + u]);
      }
      o += 4, rel += 32;
    }
  }
}

/* body for each class of parts with the same pieces from part pt on (the
 * classes' first parts), the warp taking its own (part is uniform in a
 * warp); acc merged after. */
static void by_part(dsv4_kb *kb, const dctx *x, int pt, LLVMValueRef (*acc)[4],
                    void (*body)(dsv4_kb *, const dctx *, LLVMValueRef, int, LLVMValueRef (*)[4]), LLVMValueRef arg)
{
  int next = pt + 1; /* the next class's first part */
  for (; next < x->parts; next++) {
    int seen = 0;
    for (int q = 0; q <= pt && !seen; q++)
      seen = same_pieces(x, q, next);
    for (int q = pt + 1; q < next && !seen; q++)
      seen = same_pieces(x, q, next);
    if (!seen)
      break;
  }
  if (next >= x->parts) {
    body(kb, x, arg, pt, acc);
    return;
  }
  LLVMBuilderRef b = kb->b;
  LLVMValueRef in = LLVMConstInt(kb->i1, 0, 0);
  for (int q = 0; q < x->parts; q++)
    if (same_pieces(x, pt, q))
      in = LLVMBuildOr(b, in, LLVMBuildICmp(b, LLVMIntEQ, x->part, kb_i32(kb, q), ""), "");
  LLVMValueRef A[DT_OTILES_MAX][4], B[DT_OTILES_MAX][4];
  memcpy(A, acc, sizeof(LLVMValueRef) * 4 * x->o_tiles);
  memcpy(B, acc, sizeof(LLVMValueRef) * 4 * x->o_tiles);
  kb_if_t f = kb_if(kb, in, "parts");
  body(kb, x, arg, pt, A);
  LLVMBasicBlockRef ba = LLVMGetInsertBlock(kb->b);
  kb_else(kb, &f);
  by_part(kb, x, next, B, body, arg);
  LLVMBasicBlockRef bb = LLVMGetInsertBlock(kb->b);
  kb_endif(kb, &f);
  for (int j = 0; j < x->o_tiles; j++)
    for (int e = 0; e < 4; e++)
      acc[j][e] = kb_phi(kb, A[j][e], ba, B[j][e], bb);
}

/* The lane's accumulators of a part with part pt's pieces in the usual
 * fragment order (pairs of dims base + 8 j + 2c, + 1) and true scale: an
 * e4m3 piece's n-tile u holds dims base + 8c + 4e + u (e: the pair
 * element), which a quad exchange puts back (round r: the pair lane c ^ r
 * wants), times 2^88. */
static void order_part(dsv4_kb *kb, const dctx *x, LLVMValueRef unused, int pt, LLVMValueRef (*acc)[4])
{
  LLVMBuilderRef b = kb->b;
  (void)unused;
  int o = 0;
  for (int d = pt * x->vpart; d < (pt + 1) * x->vpart;) {
    const dsv4_segment *s = seg_at(x->L, d);
    if (s->type == DSV4_DT_BF16) {
      o += 2, d += 16;
      continue;
    }
    LLVMValueRef out[4][4];
    for (int h = 0; h < 2; h++)
      for (int r = 0; r < 4; r++) {
        LLVMValueRef p = LLVMBuildXor(b, x->c, kb_i32(kb, r), "");
        for (int e = 0; e < 2; e++) {
          LLVMValueRef send = NULL;
          for (int pp = 0; pp < 4; pp++) {
            int off = 2 * pp + e;
            LLVMValueRef v = acc[o + (off & 3)][h * 2 + (off >> 2)];
            send = pp ? LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, p, kb_i32(kb, pp), ""), v, send, "") : v;
          }
          LLVMValueRef got = r ? kb->t->shfl_xor(kb, send, r) : send;
          for (int jj = 0; jj < 4; jj++)
            out[jj][h * 2 + e] =
                r ? LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, p, kb_i32(kb, jj), ""), got, out[jj][h * 2 + e], "")
                  : LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, p, kb_i32(kb, jj), ""), got, sd_f32(kb, 0.0), "");
        }
      }
    for (int jj = 0; jj < 4; jj++)
      for (int e = 0; e < 4; e++)
        acc[o + jj][e] = LLVMBuildFMul(b, out[jj][e], sd_f32(kb, DOWN), "");
    o += 4, d += 32;
  }
}

static void pv(dsv4_kb *kb, const dctx *x, LLVMValueRef rb, dstate *nx) { by_part(kb, x, 0, nx->acc, pv_part, rb); }

/* Each row's sum over its quad and the row block's parts (through red, in
 * a fixed order), then sd_head_out for the lane's two rows. */
static void finish_rows(dsv4_kb *kb, const dsv4_kernel *k, const dctx *x, dstate *st, LLVMValueRef h0)
{
  LLVMValueRef ro[2] = {head_off(kb, x, 0), head_off(kb, x, 1)}, l[2] = {st->l[0], st->l[1]};
  sd_sum_parts(kb, kb_byte_ptr(kb, x->red, kb_i64(kb, (long long)x->heads * 4 * x->parts)), x->part, x->c, x->parts,
               x->heads, ro, l);
  by_part(kb, x, 0, st->acc, order_part, NULL);
  sd_rows_out(kb, k, x->token, h0, x->rblk, x->g, x->c, x->part, x->vpart, st, l, x->o_tiles);
}

/* q rows h0 .. h0 + heads of the token (zeros past the heads) into q_tile
 * in fragment order (q_frag), each e4m3 dim times 2^32 (exact below 2^96).
 * The rows land first in `temp` (a raw tile no copy is using yet), then
 * each thread moves words: word w of row r (dims 2w, 2w + 1) is register
 * 2 ((2w mod 16) / 2 mod 2) + (r mod 16) / 8 of lane 4 ((r mod 16) mod 8) +
 * (2w mod 16) / 4 at k-step 2w / 16 of row block r / 16.  Ends with a
 * barrier. */
static void stage_q(dsv4_kb *kb, const dctx *x, LLVMValueRef h0, LLVMValueRef temp)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef H = kb_arg(kb, SD_heads);
  LLVMValueRef qvalid =
      LLVMBuildMul(b, kb_sext64(kb, LLVMBuildSub(b, H, h0, "")), kb_i64(kb, (long long)x->dim * 2), "");
  kb_stage_rows(kb, kb_arg(kb, SD_q), sd_head_at(kb, x->token, h0, SD_seq_q, SD_q_sb, SD_q_ss, SD_q_sh, 2),
                LLVMBuildMul(b, kb_arg(kb, SD_q_sh), kb_i64(kb, 2), ""), (long long)x->heads * x->dim * 2, qvalid,
                x->dim * 2, x->q_row, temp, x->tid, x->threads);
  kb->t->barrier(kb);
  int words = x->dim / 2, total = x->heads * words;
  for (int u = 0; u * x->threads < total; u++) {
    LLVMValueRef t = LLVMBuildAdd(b, x->tid, kb_i32(kb, u * x->threads), "");
    kb_if_t f = kb_if(kb, LLVMBuildICmp(b, LLVMIntULT, t, kb_i32(kb, total), ""), "q2");
    LLVMValueRef row = LLVMBuildUDiv(b, t, kb_i32(kb, words), ""), wd = LLVMBuildURem(b, t, kb_i32(kb, words), "");
    LLVMValueRef f2 = sd_f32(kb, 1.0); /* the factor of dim 2 wd (and 2 wd + 1: pieces are even) */
    for (int s = 0; s < x->L->nseg; s++) {
      const dsv4_segment *g = &x->L->seg[s];
      if (g->type != DSV4_DT_E4M3)
        continue;
      LLVMValueRef in = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntUGE, wd, kb_i32(kb, g->d0 / 2), ""),
                                     LLVMBuildICmp(b, LLVMIntULT, wd, kb_i32(kb, g->d1 / 2), ""), "");
      f2 = LLVMBuildSelect(b, in, sd_f32(kb, UP), f2, "");
    }
    LLVMValueRef src = kb_byte_ptr(kb, temp,
                                   LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, row), kb_i64(kb, x->q_row), ""),
                                                LLVMBuildMul(b, kb_zext64(kb, wd), kb_i64(kb, 4), ""), ""));
    LLVMValueRef w = kb_load(kb, kb->i32, src, 4);
    LLVMValueRef lo = LLVMBuildBitCast(b, LLVMBuildShl(b, w, kb_i32(kb, 16), ""), kb->f32, "");
    LLVMValueRef hi = LLVMBuildBitCast(b, LLVMBuildAnd(b, w, kb_i32(kb, (int)0xffff0000u), ""), kb->f32, "");
    lo = LLVMBuildBitCast(b, LLVMBuildFMul(b, lo, f2, ""), kb->i32, "");
    hi = LLVMBuildBitCast(b, LLVMBuildFMul(b, hi, f2, ""), kb->i32, "");
    LLVMValueRef v = LLVMBuildOr(b, LLVMBuildLShr(b, lo, kb_i32(kb, 16), ""),
                                 LLVMBuildAnd(b, hi, kb_i32(kb, (int)0xffff0000u), ""), "");
    LLVMValueRef in16 = LLVMBuildURem(b, wd, kb_i32(kb, 8), ""), r16 = LLVMBuildURem(b, row, kb_i32(kb, 16), "");
    LLVMValueRef reg = LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildURem(b, in16, kb_i32(kb, 2), ""), kb_i32(kb, 2), ""),
                                    LLVMBuildUDiv(b, r16, kb_i32(kb, 8), ""), "reg");
    LLVMValueRef lane = LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildURem(b, r16, kb_i32(kb, 8), ""), kb_i32(kb, 4), ""),
                                     LLVMBuildUDiv(b, in16, kb_i32(kb, 2), ""), "qlane");
    LLVMValueRef frag =
        LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildUDiv(b, row, kb_i32(kb, 16), ""), kb_i32(kb, x->dim / 16), ""),
                     LLVMBuildUDiv(b, wd, kb_i32(kb, 8), ""), "");
    LLVMValueRef dst = LLVMBuildAdd(
        b,
        LLVMBuildMul(b, kb_zext64(kb, LLVMBuildAdd(b, LLVMBuildMul(b, frag, kb_i32(kb, 32), ""), lane, "")),
                     kb_i64(kb, 16), ""),
        LLVMBuildMul(b, kb_zext64(kb, reg), kb_i64(kb, 4), ""), "");
    kb_store(kb, v, kb_byte_ptr(kb, x->q_tile, dst), 4);
    kb_endif(kb, &f);
  }
  kb->t->barrier(kb);
}

/* The form's shape from kernel k (no IR). */
static void set_shape(const dsv4_kb *kb, const dsv4_kernel *k, dctx *x)
{
  x->k = k, x->L = &k->layout;
  x->heads = k->tile.tokens_per_cta, x->row_blocks = x->heads / 16, x->dim = k->layout.dim, x->v_dim = k->v_dim;
  x->parts = DSV4_DECODE_DIRECT_WARPS, x->vpart = x->v_dim / x->parts, x->o_tiles = x->vpart / 8;
  x->threads = dsv4_gen_threads(kb, k), x->tpr = x->threads / SD_TILE;
  x->pitch = dsv4_decode_direct_pitch(k->layout.row_bytes), x->tile_bytes = dsv4_decode_direct_tile_bytes(&k->layout);
  x->q_row = x->dim * 2 + 32, x->p_row = SD_TILE * 4 + 32, x->p_parts = sd_p_parts(k);
}

static int check_target(dsv4_kb *kb, const dsv4_kernel *k, const dctx *x, dsv4_diags *d)
{
  if (!sd_warp_mma_ok(kb) || x->o_tiles > DT_OTILES_MAX || x->threads % SD_TILE ||
      (long long)x->heads * x->q_row > x->tile_bytes || 4 + 4 * x->o_tiles > KB_LOOP_MAX_VARS - 1) {
    dsv4_error(d, k->file, k->line,
               "kernel '%s': this target (%s) cannot build the warp-matrix form of sparse_decode with operands read "
               "from the cache",
               k->name, kb->arch);
    return 1;
  }
  return 0;
}

static int carve_shared(dsv4_kb *kb, const dsv4_kernel *k, dctx *x, dsv4_diags *d)
{
  LLVMValueRef sm = kb_dyn_shared(kb);
  long long o = 0;
  x->q_tile = sd_carve(kb, sm, &o, (long long)x->heads * x->dim * 2);
  x->p_tile = sd_carve(kb, sm, &o, (long long)x->heads * x->p_row);
  x->raw = sd_carve(kb, sm, &o, 2LL * x->tile_bytes);
  x->red = sd_carve(kb, sm, &o, (long long)x->heads * 8 * x->parts);
  x->valid = sd_carve(kb, sm, &o, 2LL * SD_TILE * 4);
  return sd_shared_agrees(k, o, DSV4_FORM_WARP_DIRECT, d);
}

int sd_direct(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d)
{
  LLVMBuilderRef b = kb->b;
  dctx x;
  set_shape(kb, k, &x);
  if (check_target(kb, k, &x, d) || carve_shared(kb, k, &x, d))
    return 1;
  x.tid = kb->t->thread_id(kb);
  LLVMValueRef warp = LLVMBuildUDiv(b, x.tid, kb_i32(kb, 32), "warp");
  x.lane = LLVMBuildURem(b, x.tid, kb_i32(kb, 32), "lane");
  x.g = LLVMBuildLShr(b, x.lane, kb_i32(kb, 2), "g");
  x.c = LLVMBuildAnd(b, x.lane, kb_i32(kb, 3), "c");
  x.rblk = LLVMBuildURem(b, warp, kb_i32(kb, x.row_blocks), "rblk");
  x.part = LLVMBuildUDiv(b, warp, kb_i32(kb, x.row_blocks), "part");
  x.jrow = LLVMBuildUDiv(b, x.tid, kb_i32(kb, x.tpr), "jrow");
  x.sub = LLVMBuildURem(b, x.tid, kb_i32(kb, x.tpr), "sub");
  x.token = kb->t->block_id(kb, 1);
  kb_return_if(kb, LLVMBuildICmp(b, LLVMIntSGE, x.token, kb_arg(kb, SD_n_tokens), "")); /* whole CTAs */
  LLVMValueRef h0 = LLVMBuildMul(b, kb->t->block_id(kb, 0), kb_i32(kb, x.heads), "h0");
  x.scale2 = sd_scale2(kb, k);
  dstate st;
  for (int h = 0; h < 2; h++)
    st.m[h] = sd_f32(kb, -INFINITY), st.l[h] = sd_f32(kb, 0.0);
  for (int j = 0; j < x.o_tiles; j++)
    for (int e = 0; e < 4; e++)
      st.acc[j][e] = sd_f32(kb, 0.0);
  LLVMValueRef lo;
  sd_token_tiles(kb, x.token, x.n, x.ntiles, &lo, &x.hi);
  /* the first tile on its way, the second's indices loaded */
  LLVMValueRef idx = load_index(kb, &x, lo);
  kb_if_t any = kb_if(kb, LLVMBuildICmp(b, LLVMIntSLT, lo, x.hi, ""), "tiles");
  issue_copy(kb, &x, lo, idx, LLVMBuildAnd(b, lo, kb_i32(kb, 1), ""));
  kb_endif(kb, &any);
  /* q through the raw tile the first copy leaves free (tile lo + 1's) */
  stage_q(kb, &x, h0, raw_buf(kb, &x, LLVMBuildAnd(b, LLVMBuildAdd(b, lo, kb_i32(kb, 1), ""), kb_i32(kb, 1), "")));
  LLVMValueRef init[KB_LOOP_MAX_VARS];
  sd_rows_pack(&st, x.o_tiles, init);
  init[4 + 4 * x.o_tiles] = load_index(kb, &x, LLVMBuildAdd(b, lo, kb_i32(kb, 1), ""));
  kb_loop_t loop;
  kb_for(kb, &loop, lo, x.hi, 5 + 4 * x.o_tiles, init);
  dstate cur, nx;
  sd_rows_unpack(&cur, x.o_tiles, loop.vars);
  LLVMValueRef i = loop.iv, i1 = LLVMBuildAdd(b, i, kb_i32(kb, 1), "");
  kb->t->cp_async_wait_all(kb);
  kb->t->barrier(kb); /* tile i landed; every thread is past tile i - 1 */
  kb_if_t more = kb_if(kb, LLVMBuildICmp(b, LLVMIntSLT, i1, x.hi, ""), "next");
  issue_copy(kb, &x, i1, loop.vars[4 + 4 * x.o_tiles], LLVMBuildAnd(b, i1, kb_i32(kb, 1), ""));
  kb_endif(kb, &more);
  LLVMValueRef nidx = load_index(kb, &x, LLVMBuildAdd(b, i, kb_i32(kb, 2), ""));
  LLVMValueRef buf = LLVMBuildAnd(b, i, kb_i32(kb, 1), ""), rb = raw_buf(kb, &x, buf);
  LLVMValueRef S[2][4];
  qk(kb, &x, rb, S);
  softmax(kb, &x, buf, S, &cur, &nx);
  kb->t->barrier(kb); /* P published */
  pv(kb, &x, rb, &nx);
  LLVMValueRef next[KB_LOOP_MAX_VARS];
  sd_rows_pack(&nx, x.o_tiles, next);
  next[4 + 4 * x.o_tiles] = nidx;
  kb_for_end(kb, &loop, next);
  sd_rows_unpack(&st, x.o_tiles, loop.vars);
  finish_rows(kb, k, &x, &st, h0);
  return 0;
}
