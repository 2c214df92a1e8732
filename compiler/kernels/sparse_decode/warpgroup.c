/* warpgroup.c -- the warpgroup form of the sparse MLA decode: its entry
 * (what the target must offer, shared memory, the pair's setup, the
 * roles) and the two consumer warpgroups, the lead and the follower.
 * warpgroup.h says how the roles work together; the producer warps are in
 * warpgroup_producers.c.
 */
#include <math.h>

#include "warpgroup.h"

enum {
  /* V dims of the lead's P V, the follower taking the rest (kernel_regs.h:
   * smaller shares for the lead measured no faster) */
  WG_LEAD_DIMS = DSV4_DECODE_WG_LEAD_DIMS,
  WG_NB_MAX = (DSV4_DECODE_WG_VDIM - WG_LEAD_DIMS) / 8 > WG_LEAD_DIMS / 8 ? (DSV4_DECODE_WG_VDIM - WG_LEAD_DIMS) / 8
                                                                          : WG_LEAD_DIMS / 8
};
#define WG_LAZY 8.0 /* base-2 headroom of the lazy running max */

/* Arrive on barrier base + buf here and in the other CTA of the pair. */
static void wg_release(dsv4_kb *kb, const wg_ctx *x, int base, LLVMValueRef buf)
{
  LLVMValueRef m = sd_wg_mbar(kb, x, base, buf);
  kb->t->mbar_arrive(kb, m, NULL);
  kb->t->mbar_arrive(kb, m, x->peer);
}

/* i64 offset of (row, kbyte) in a 128-byte-atom region of `rows` rows. */
static LLVMValueRef wg_at(dsv4_kb *kb, int rows, long long row, long long kbyte)
{
  return kb_mma_offset(kb, 128, rows, kb_i64(kb, row), kb_i64(kb, kbyte));
}

_Static_assert(4 + 4 * WG_NB_MAX <= KB_LOOP_MAX_VARS, "a warpgroup's state must fit a loop's carried values");
typedef struct {
  int nb; /* blocks of 8 V dims held (the warpgroup's share / 8) */
  LLVMValueRef m[2], l[2], o[WG_NB_MAX][4];
} wgstate;

static void wg_pack(const wgstate *s, LLVMValueRef *v)
{
  v[0] = s->m[0], v[1] = s->m[1], v[2] = s->l[0], v[3] = s->l[1];
  for (int j = 0; j < s->nb; j++)
    for (int e = 0; e < 4; e++)
      v[4 + 4 * j + e] = s->o[j][e];
}

static void wg_unpack(wgstate *s, const LLVMValueRef *v)
{
  s->m[0] = v[0], s->m[1] = v[1], s->l[0] = v[2], s->l[1] = v[3];
  for (int j = 0; j < s->nb; j++)
    for (int e = 0; e < 4; e++)
      s->o[j][e] = v[4 + 4 * j + e];
}

/* The EMPTY hand-off of tile i's K buffer, from the third tile on: a
 * warp's arrival here and across (pairs), or the named barrier. */
static void wg_empty(dsv4_kb *kb, const wg_ctx *x, LLVMValueRef i, LLVMValueRef buf)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_target_ir *T = kb->t;
  kb_if_t fe = kb_if(kb, LLVMBuildICmp(b, LLVMIntSLT, LLVMBuildAdd(b, i, kb_i32(kb, 2), ""), x->hi, ""), "empty");
  if (x->pair) {
    T->warp_sync(kb);
    kb_if_t f0 =
        kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildAnd(b, x->tid, kb_i32(kb, 31), ""), kb_i32(kb, 0), ""), "lane0");
    wg_release(kb, x, WG_MB_EMPTY, buf);
    kb_endif(kb, &f0);
  } else
    sd_wg_bar(kb, 1, WG_BAR_EMPTY, buf, x->threads);
  kb_endif(kb, &fe);
}

/* O (this warpgroup's nb blocks of dims) rescaled by corr[h] for its rows, skipped
 * by a warp none of whose rows moved (vote_any; without it, always). */
static void wg_rescale(dsv4_kb *kb, LLVMValueRef (*o)[4], int nb, const LLVMValueRef *corr)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef moved = LLVMBuildOr(b, LLVMBuildFCmp(b, LLVMRealUNE, corr[0], sd_f32(kb, 1.0), ""),
                                   LLVMBuildFCmp(b, LLVMRealUNE, corr[1], sd_f32(kb, 1.0), ""), "moved");
  kb_if_t fr = kb_if(kb, kb->t->vote_any ? kb->t->vote_any(kb, moved) : LLVMConstInt(kb->i1, 1, 0), "rescale");
  LLVMValueRef scaled[WG_NB_MAX][4];
  for (int h = 0; h < 2; h++)
    for (int j = 0; j < nb; j++)
      for (int e = 0; e < 2; e++)
        scaled[j][2 * h + e] = LLVMBuildFMul(b, o[j][2 * h + e], corr[h], "");
  LLVMBasicBlockRef did = LLVMGetInsertBlock(b);
  kb_endif(kb, &fr);
  for (int j = 0; j < nb; j++)
    for (int e = 0; e < 4; e++)
      o[j][e] = kb_phi(kb, scaled[j][e], did, o[j][e], LLVMGetInstructionParent(fr.br));
}

/* O += P V over V dims d0 .. d0 + 8 nb of K buffer kbuf: with bf16x2 P's
 * lo part then its hi part (P buffer pb), with bf16 its one part, 4
 * k-steps a part; products of at most 256 columns (128 in CTAs of over
 * 384 threads: both forms have 512 today), all in flight before the wait. */
static void wg_pv(dsv4_kb *kb, const wg_ctx *x, LLVMValueRef pb, LLVMValueRef kbuf, int d0, int nb,
                  LLVMValueRef (*o)[4])
{
  /* ptxas compiles every instruction within the launch's register cap
   * (65536 / threads), whatever setmaxnreg grants the code around it: at
   * 512 threads (128) an m64n256 product's 128 accumulators do not fit
   * beside its operands ("insufficient registers"), m64n128 ones do */
  const int CHUNK = 65536 / x->threads >= 160 ? 256 : 128;
  LLVMValueRef O[4 * WG_NB_MAX];
  int parts = 0, dims = 8 * nb, np = sd_p_parts(x->k);
  for (int c0 = 0; c0 < dims; c0 += CHUNK, parts++) {
    int n = dims - c0 < CHUNK ? dims - c0 : CHUNK;
    LLVMValueRef A[8], B[8];
    LLVMValueRef vcols = kb_byte_ptr(kb, kbuf, kb_i64(kb, (long long)(d0 + c0) / 64 * SD_TILE * 128));
    for (int q = 0; q < np; q++)
      for (int ks = 0; ks < SD_TILE / 16; ks++) {
        A[q * 4 + ks] = kb_byte_ptr(kb, pb, kb_i64(kb, (np - 1 - q) * WG_PBYTES + ks * 32));
        B[q * 4 + ks] = kb_byte_ptr(kb, vcols, kb_i64(kb, (long long)ks * 16 * 128));
      }
    for (int j = 0; j < n / 8; j++)
      for (int e = 0; e < 4; e++)
        O[4 * (c0 / 8 + j) + e] = o[c0 / 8 + j][e];
    kb_wgmma pv = {KB_MMA_BF16, n, np * SD_TILE / 16, 128, 1, SD_TILE * 128, 1, 0};
    kb->t->wgmma(kb, &pv, A, B, &O[4 * (c0 / 8)]);
  }
  for (int c0 = 0, p = 0; c0 < dims; c0 += CHUNK, p++) {
    int n = dims - c0 < CHUNK ? dims - c0 : CHUNK;
    kb->t->wgmma_wait(kb, parts - 1 - p, &O[4 * (c0 / 8)], 4 * (n / 8));
  }
  for (int j = 0; j < nb; j++)
    for (int e = 0; e < 4; e++)
      o[j][e] = O[4 * j + e];
}


/* A consumer lane's rows: rowi its two rows of the 64 heads (g and g + 8
 * of its warp's 16), c its column pair in the quad (c0: c == 0), h0 the
 * CTA's first head, ml the rows' final (m, l) as the lead publishes them
 * (red's second slot). */
typedef struct {
  LLVMValueRef rowi[2], c, c0, h0, ml;
} wg_rows;

/* Wait until tile i's K buffer (buf) is full: the pair's barrier object,
 * or the named barrier of the producers and the lead. */
static void lead_wait_full(dsv4_kb *kb, const wg_ctx *x, LLVMValueRef i, LLVMValueRef buf)
{
  if (x->pair)
    kb->t->mbar_wait(kb, sd_wg_mbar(kb, x, WG_MB_FULL, buf), sd_wg_parity(kb, x, i, 0));
  else
    sd_wg_bar(kb, 0, WG_BAR_FULL, buf, 128 + x->producers);
}

/* S = q K^T for the tile's 64 rows (K buffer kbuf): one wgmma m64n64k16
 * chain, q and K from shared memory. */
static void lead_qk(dsv4_kb *kb, const wg_ctx *x, LLVMValueRef kbuf, LLVMValueRef *S)
{
  int D = x->dim;
  LLVMValueRef A[32], B[32];
  for (int ks = 0; ks < D / 16; ks++) {
    A[ks] = kb_byte_ptr(kb, x->q_tile, wg_at(kb, x->heads, 0, ks * 32));
    B[ks] = kb_byte_ptr(kb, kbuf, wg_at(kb, SD_TILE, 0, ks * 32));
  }
  kb_wgmma qk = {KB_MMA_BF16, SD_TILE, D / 16, 128, 0, 0, 0, 0};
  kb->t->wgmma(kb, &qk, A, B, S);
  kb->t->wgmma_wait(kb, 0, S, 32);
}

/* S in base 2, -inf for rows without a valid index (validity words of
 * buffer buf); mx: the lane's two rows' maxima over its columns.  Returns
 * col0, the lane's first column (i32). */
static LLVMValueRef lead_scores(dsv4_kb *kb, const wg_ctx *x, LLVMValueRef buf, LLVMValueRef c, LLVMValueRef scale2,
                                LLVMValueRef *S, LLVMValueRef *mx)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef col0 = LLVMBuildMul(b, c, kb_i32(kb, 2), "col0");
  LLVMValueRef vbase = wg_buf(kb, x->valid, buf, SD_TILE * 4);
  LLVMValueRef rowv[2][SD_TILE / 4];
  for (int j = 0; j < SD_TILE / 8; j++) {
    LLVMValueRef col = LLVMBuildAdd(b, col0, kb_i32(kb, 8 * j), "");
    LLVMValueRef okw =
        kb_load(kb, kb->i64, kb_byte_ptr(kb, vbase, LLVMBuildMul(b, kb_zext64(kb, col), kb_i64(kb, 4), "")), 8);
    for (int e = 0; e < 2; e++) {
      LLVMValueRef ok = LLVMBuildTrunc(b, LLVMBuildLShr(b, okw, kb_i64(kb, 32 * e), ""), kb->i32, "");
      ok = LLVMBuildICmp(b, LLVMIntNE, ok, kb_i32(kb, 0), "");
      for (int h = 0; h < 2; h++) {
        LLVMValueRef v = LLVMBuildFMul(b, S[4 * j + 2 * h + e], scale2, "");
        S[4 * j + 2 * h + e] = rowv[h][2 * j + e] = LLVMBuildSelect(b, ok, v, sd_f32(kb, -INFINITY), "");
      }
    }
  }
  for (int h = 0; h < 2; h++)
    mx[h] = sd_fold_tree(kb, rowv[h], SD_TILE / 4, 0);
  return col0;
}

/* The online softmax's step with a lazy running max, the row maxima over
 * the quad (the whole tile): S -> P, nx's m and l, corr the rows' rescale
 * factors.  The running max m only moves when a tile's max exceeds it by
 * more than WG_LAZY (base 2): scores then stay below 2^WG_LAZY relative to
 * m, l and O are kept relative to the same m, and lse = m + log2 l is the
 * same value.  Most tiles then leave O as it is, and a warp skips its
 * multiplications when none of its rows moved (FlashAttention-4's lazy
 * rescaling). */
static void lead_softmax(dsv4_kb *kb, LLVMValueRef *S, LLVMValueRef *mx, const wgstate *cur, wgstate *nx,
                         LLVMValueRef *corr)
{
  LLVMBuilderRef b = kb->b;
  for (int h = 0; h < 2; h++) {
    mx[h] = sd_quad_fold(kb, mx[h], 0);
    LLVMValueRef grow =
        LLVMBuildFCmp(b, LLVMRealOGT, mx[h], LLVMBuildFAdd(b, cur->m[h], sd_f32(kb, WG_LAZY), ""), "grow");
    LLVMValueRef mn = LLVMBuildSelect(b, grow, mx[h], cur->m[h], "");
    LLVMValueRef mu =
        LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOEQ, mn, sd_f32(kb, -INFINITY), ""), sd_f32(kb, 0.0), mn, "");
    corr[h] = kb_exp2(kb, LLVMBuildFSub(b, cur->m[h], mu, ""));
    LLVMValueRef pv[SD_TILE / 4];
    for (int j = 0; j < SD_TILE / 8; j++)
      for (int e = 0; e < 2; e++)
        S[4 * j + 2 * h + e] = pv[2 * j + e] = kb_exp2_ftz(kb, LLVMBuildFSub(b, S[4 * j + 2 * h + e], mu, ""));
    LLVMValueRef sum = sd_fold_tree(kb, pv, SD_TILE / 4, 1);
    nx->m[h] = mn;
    nx->l[h] = LLVMBuildFAdd(b, LLVMBuildFMul(b, cur->l[h], corr[h], ""), sum, "");
  }
}

/* P (bf16, or hi and lo parts with bf16x2; 128-byte rows) and the rows'
 * rescale factors corr into P buffer buf, once the follower has handed it
 * back, published to the follower (PREADY).  Returns the P buffer. */
static LLVMValueRef lead_publish(dsv4_kb *kb, const wg_ctx *x, LLVMValueRef i, LLVMValueRef buf, const LLVMValueRef *S,
                                 LLVMValueRef col0, const wg_rows *r, const LLVMValueRef *corr)
{
  LLVMBuilderRef b = kb->b;
  int heads = x->heads;
  /* P buffer (i & 1) is free once the follower's P V of tile i - 2 is done */
  kb_if_t fw = kb_if(kb, LLVMBuildICmp(b, LLVMIntSGE, i, LLVMBuildAdd(b, x->lo, kb_i32(kb, 2), ""), ""), "pfree");
  sd_wg_bar(kb, 0, WG_BAR_PFREE, buf, 256);
  kb_endif(kb, &fw);
  LLVMValueRef pb = wg_buf(kb, x->p_bufs, buf, 2 * WG_PBYTES);
  for (int h = 0; h < 2; h++)
    for (int j = 0; j < SD_TILE / 8; j++) {
      LLVMValueRef w[2];
      sd_p_words(kb, x->k, S[4 * j + 2 * h], S[4 * j + 2 * h + 1], &w[0], &w[1]);
      LLVMValueRef col = LLVMBuildAdd(b, col0, kb_i32(kb, 8 * j), "");
      LLVMValueRef off = kb_mma_offset(kb, 128, heads, kb_zext64(kb, r->rowi[h]),
                                       LLVMBuildMul(b, kb_zext64(kb, col), kb_i64(kb, 2), ""));
      for (int q = 0; q < sd_p_parts(x->k); q++)
        kb_store(kb, w[q], kb_byte_ptr(kb, pb, LLVMBuildAdd(b, off, kb_i64(kb, q * WG_PBYTES), "")), 4);
    }
  LLVMValueRef cb = wg_buf(kb, x->red, buf, heads * 4);
  kb_if_t fc = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, r->c, kb_i32(kb, 0), ""), "corr");
  for (int h = 0; h < 2; h++)
    kb_store(kb, corr[h], kb_byte_ptr(kb, cb, LLVMBuildMul(b, kb_zext64(kb, r->rowi[h]), kb_i64(kb, 4), "")), 4);
  kb_endif(kb, &fc);
  kb->t->fence_proxy_async(kb);
  sd_wg_bar(kb, 1, WG_BAR_PREADY, buf, 256);
  return pb;
}

/* The lead warpgroup (0): tiles [lo, hi) folded into the state (m, l, O
 * over V dims [0, LEAD_DIMS)).  Per tile it alone computes S = q K^T over
 * all 64 rows (wgmma m64n64k16: q is read from shared memory once a tile,
 * where two 32-row halves read it twice and were bound by shared-memory
 * bandwidth), the softmax, and P (tile.p's format) with each row's rescale factor
 * for the follower; then its own half of P V.  No maxima cross between
 * warpgroups, so the follower's P V of tile i runs beside the lead's
 * q K^T and softmax of tile i + 1 (FlashMLA's split of the sparse
 * decode's two math warpgroups). */
static void wg_lead(dsv4_kb *kb, const wg_ctx *x, const wg_rows *r, LLVMValueRef scale2, wgstate *st)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef init[KB_LOOP_MAX_VARS];
  wg_pack(st, init);
  kb_loop_t loop;
  kb_for(kb, &loop, x->lo, x->hi, 4 + 4 * st->nb, init);
  wgstate cur = {.nb = st->nb}, nx = {.nb = st->nb};
  wg_unpack(&cur, loop.vars);
  LLVMValueRef i = loop.iv, buf = LLVMBuildAnd(b, i, kb_i32(kb, 1), "buf");
  LLVMValueRef kbuf = wg_buf(kb, x->k_tiles, buf, wg_kbytes(x));
  lead_wait_full(kb, x, i, buf);
  LLVMValueRef S[32], mx[2], corr[2];
  lead_qk(kb, x, kbuf, S);
  LLVMValueRef col0 = lead_scores(kb, x, buf, r->c, scale2, S, mx);
  lead_softmax(kb, S, mx, &cur, &nx, corr);
  LLVMValueRef pb = lead_publish(kb, x, i, buf, S, col0, r, corr);
  for (int j = 0; j < nx.nb; j++)
    for (int e = 0; e < 4; e++)
      nx.o[j][e] = cur.o[j][e];
  wg_rescale(kb, nx.o, nx.nb, corr);
  wg_pv(kb, x, pb, kbuf, 0, nx.nb, nx.o);
  wg_empty(kb, x, i, buf);
  LLVMValueRef next[KB_LOOP_MAX_VARS];
  wg_pack(&nx, next);
  kb_for_end(kb, &loop, next);
  wg_unpack(st, loop.vars);
}

/* The follower warpgroup (1): per tile, once the lead has published P, O
 * over V dims [LEAD_DIMS, 512) rescaled by the lead's factors, then its
 * share of P V. */
static void wg_follow(dsv4_kb *kb, const wg_ctx *x, const wg_rows *r, wgstate *st)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef init[KB_LOOP_MAX_VARS];
  wg_pack(st, init);
  kb_loop_t loop;
  kb_for(kb, &loop, x->lo, x->hi, 4 + 4 * st->nb, init);
  wgstate cur = {.nb = st->nb};
  wg_unpack(&cur, loop.vars);
  LLVMValueRef i = loop.iv, buf = LLVMBuildAnd(b, i, kb_i32(kb, 1), "buf");
  LLVMValueRef kbuf = wg_buf(kb, x->k_tiles, buf, wg_kbytes(x));
  sd_wg_bar(kb, 0, WG_BAR_PREADY, buf, 256);
  LLVMValueRef cb = wg_buf(kb, x->red, buf, x->heads * 4), corr[2];
  for (int h = 0; h < 2; h++)
    corr[h] =
        kb_load(kb, kb->f32, kb_byte_ptr(kb, cb, LLVMBuildMul(b, kb_zext64(kb, r->rowi[h]), kb_i64(kb, 4), "")), 4);
  wg_rescale(kb, cur.o, cur.nb, corr);
  LLVMValueRef pb = wg_buf(kb, x->p_bufs, buf, 2 * WG_PBYTES);
  wg_pv(kb, x, pb, kbuf, WG_LEAD_DIMS, cur.nb, cur.o);
  kb_if_t ff = kb_if(kb, LLVMBuildICmp(b, LLVMIntSLT, LLVMBuildAdd(b, i, kb_i32(kb, 2), ""), x->hi, ""), "pfree");
  sd_wg_bar(kb, 1, WG_BAR_PFREE, buf, 256);
  kb_endif(kb, &ff);
  wg_empty(kb, x, i, buf);
  LLVMValueRef next[KB_LOOP_MAX_VARS];
  wg_pack(&cur, next);
  kb_for_end(kb, &loop, next);
  wg_unpack(st, loop.vars);
}

/* A consumer warpgroup's output: its V dims from d0 of each of its rows,
 * with the row's (m, l) as the lead published them in r->ml.  The values
 * go through shared memory (the q and K regions, free once both
 * warpgroups have met on CONS after their last tile): a quad of lanes
 * holds 16 contiguous bytes of a row every 8 dims, so stores straight from
 * the fragments wrote each row in 16-byte pieces, 8 rows an instruction,
 * and took 3.7-4.7 us of a CTA's time (H200, timed in the kernel).  After
 * a barrier of both warpgroups (the producers' copy-out) each thread
 * copies 16-byte chunks of whole rows: the CTA's rows of out are one
 * contiguous block.  (Split-KV partials, fp32, go straight out: staged,
 * their copy by the producers alone measured 1.5 us slower at T 8.) */
static void wg_out(dsv4_kb *kb, const wg_ctx *x, const wgstate *st, int d0, const wg_rows *r)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef first =
      LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntEQ, r->c, kb_i32(kb, 0), ""), LLVMConstInt(kb->i1, d0 == 0, 0), "");
  LLVMValueRef dim0 = LLVMBuildAdd(b, kb_i64(kb, d0), LLVMBuildMul(b, kb_zext64(kb, r->c), kb_i64(kb, 2), ""), "dim0");
  for (int h = 0; h < 2; h++) {
    LLVMValueRef at = LLVMBuildMul(b, kb_zext64(kb, r->rowi[h]), kb_i64(kb, 4), "");
    LLVMValueRef m = kb_load(kb, kb->f32, kb_byte_ptr(kb, r->ml, at), 4);
    LLVMValueRef l = kb_load(kb, kb->f32, kb_byte_ptr(kb, r->ml, LLVMBuildAdd(b, at, kb_i64(kb, x->heads * 4), "")), 4);
    LLVMValueRef pr[WG_NB_MAX][2];
    for (int j = 0; j < st->nb; j++)
      pr[j][0] = st->o[j][2 * h], pr[j][1] = st->o[j][2 * h + 1];
    LLVMValueRef stage =
        kb_byte_ptr(kb, x->q_tile, LLVMBuildMul(b, kb_zext64(kb, r->rowi[h]), kb_i64(kb, wg_stage_row(x)), ""));
    LLVMValueRef sink = kb_load(kb, kb->f32, kb_byte_ptr(kb, x->sinks, at), 4);
    sd_head_out(kb, x->k, x->token, LLVMBuildAdd(b, r->h0, r->rowi[h], "head"), m, l, pr, st->nb, dim0, first, stage,
                sink);
  }
}

/* The lead's role: its tiles, then each row's (m, l) published (the quad's
 * sum first), then its output. */
static void lead_role(dsv4_kb *kb, const wg_ctx *x, const wg_rows *r, LLVMValueRef scale2, wgstate *st)
{
  LLVMBuilderRef b = kb->b;
  kb->t->set_max_regs(kb, DSV4_DECODE_WG_LEAD_REGS, DSV4_DECODE_WG_LEAD_REGS > x->reg_cap);
  wg_lead(kb, x, r, scale2, st);
  for (int h = 0; h < 2; h++) /* (shuffles: before the branch, in every lane) */
    st->l[h] = sd_quad_fold(kb, st->l[h], 1);
  kb_if_t fs = kb_if(kb, r->c0, "ml");
  for (int h = 0; h < 2; h++) {
    LLVMValueRef at = LLVMBuildMul(b, kb_zext64(kb, r->rowi[h]), kb_i64(kb, 4), "");
    kb_store(kb, st->m[h], kb_byte_ptr(kb, r->ml, at), 4);
    kb_store(kb, st->l[h], kb_byte_ptr(kb, r->ml, LLVMBuildAdd(b, at, kb_i64(kb, x->heads * 4), "")), 4);
  }
  kb_endif(kb, &fs);
  kb->t->bar_sync(kb, WG_BAR_CONS, 256);
  wg_out(kb, x, st, 0, r);
}

/* The follower's role: its tiles, then, once the lead has published the
 * rows' (m, l), its output. */
static void follow_role(dsv4_kb *kb, const wg_ctx *x, const wg_rows *r, wgstate *st)
{
  kb->t->set_max_regs(kb, DSV4_DECODE_WG_FOLLOW_REGS, DSV4_DECODE_WG_FOLLOW_REGS > x->reg_cap);
  wg_follow(kb, x, r, st);
  kb->t->bar_sync(kb, WG_BAR_CONS, 256);
  wg_out(kb, x, st, WG_LEAD_DIMS, r);
}

/* q rows h0 .. h0 + heads of the token (zeros past the heads) into q_tile,
 * and the rows' sinks into sinks (wg_out reads them there: read after the
 * last tile, their round trip was on the output's critical path).  Done by
 * the consumers and not before the roles part, so that the producers
 * start the first tile while q arrives. */
static void stage_q(dsv4_kb *kb, const wg_ctx *x, LLVMValueRef h0)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef H = kb_arg(kb, SD_heads);
  int per_row = x->dim * 2 / 16;
  LLVMValueRef qrow = sd_head_at(kb, x->token, h0, SD_seq_q, SD_q_sb, SD_q_ss, SD_q_sh, 2);
  LLVMValueRef qsh = LLVMBuildMul(b, kb_arg(kb, SD_q_sh), kb_i64(kb, 2), "");
  LLVMValueRef hv = LLVMBuildSub(b, H, h0, "");
  LLVMTypeRef v4 = LLVMVectorType(kb->i32, 4);
  kb_if_t fk = kb_if(kb, LLVMBuildICmp(b, LLVMIntULT, x->tid, kb_i32(kb, x->heads), ""), "sinks");
  {
    LLVMValueRef head = LLVMBuildAdd(b, h0, x->tid, "");
    LLVMValueRef has = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntNE, kb_arg(kb, SD_has_sink), kb_i32(kb, 0), ""),
                                    LLVMBuildICmp(b, LLVMIntSLT, head, H, ""), "");
    kb_store(kb,
             kb_load_if(kb, has, kb->f32, kb_arg(kb, SD_attn_sink),
                        LLVMBuildMul(b, kb_zext64(kb, head), kb_i64(kb, 4), ""), 4, sd_f32(kb, -INFINITY)),
             kb_byte_ptr(kb, x->sinks, LLVMBuildMul(b, kb_zext64(kb, x->tid), kb_i64(kb, 4), "")), 4);
  }
  kb_endif(kb, &fk);
  for (int it = 0; it < x->heads * per_row / 256; it++) {
    LLVMValueRef pi = LLVMBuildAdd(b, x->tid, kb_i32(kb, it * 256), "");
    LLVMValueRef r = LLVMBuildUDiv(b, pi, kb_i32(kb, per_row), ""), cb = LLVMBuildURem(b, pi, kb_i32(kb, per_row), "");
    LLVMValueRef kbyte = LLVMBuildMul(b, kb_zext64(kb, cb), kb_i64(kb, 16), "");
    LLVMValueRef src =
        LLVMBuildAdd(b, LLVMBuildAdd(b, qrow, LLVMBuildMul(b, kb_zext64(kb, r), qsh, ""), ""), kbyte, "");
    LLVMValueRef v =
        kb_load_if(kb, LLVMBuildICmp(b, LLVMIntSLT, r, hv, ""), v4, kb_arg(kb, SD_q), src, 16, LLVMConstNull(v4));
    kb_store(kb, v, kb_byte_ptr(kb, x->q_tile, kb_mma_offset(kb, 128, x->heads, kb_zext64(kb, r), kbyte)), 16);
  }
}

/* The consumers' role: q staged, then the lead (warpgroup 0) or the
 * follower (1), the output staged for the producers to copy out. */
static void consumers(dsv4_kb *kb, const dsv4_kernel *k, const wg_ctx *x, LLVMValueRef h0)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_target_ir *T = kb->t;
  stage_q(kb, x, h0);
  T->fence_proxy_async(kb);
  T->bar_sync(kb, WG_BAR_CONS, 256);
  LLVMValueRef scale2 = sd_scale2(kb, k);
  /* the warpgroup, broadcast from lane 0 so that the compiler knows it is
   * the same in every lane: the descriptors built from it then stay in
   * uniform registers instead of being moved there at every product */
  LLVMValueRef w = LLVMBuildUDiv(b, x->tid, kb_i32(kb, 128), "");
  w = sd_shfl_i32(kb, w, kb_i32(kb, 0));
  LLVMValueRef wi =
      LLVMBuildAnd(b, LLVMBuildUDiv(b, x->tid, kb_i32(kb, 32), ""), kb_i32(kb, 3), "wi"); /* warp in its warpgroup */
  LLVMValueRef lane = LLVMBuildAnd(b, x->tid, kb_i32(kb, 31), "lane");
  LLVMValueRef g = LLVMBuildLShr(b, lane, kb_i32(kb, 2), "g");
  wg_rows r = {.h0 = h0};
  r.c = LLVMBuildAnd(b, lane, kb_i32(kb, 3), "c");
  wgstate st = {.nb = WG_LEAD_DIMS / 8}, fst = {.nb = (DSV4_DECODE_WG_VDIM - WG_LEAD_DIMS) / 8};
  for (int h = 0; h < 2; h++)
    st.m[h] = fst.m[h] = sd_f32(kb, -INFINITY), st.l[h] = fst.l[h] = sd_f32(kb, 0.0);
  for (int j = 0; j < WG_NB_MAX; j++)
    for (int e = 0; e < 4; e++)
      st.o[j][e] = fst.o[j][e] = sd_f32(kb, 0.0);
  r.ml = kb_byte_ptr(kb, x->red, kb_i64(kb, 2 * x->heads * 4));
  for (int h = 0; h < 2; h++)
    r.rowi[h] =
        LLVMBuildAdd(b, LLVMBuildMul(b, wi, kb_i32(kb, 16), ""), LLVMBuildAdd(b, g, kb_i32(kb, 8 * h), ""), "row");
  r.c0 = LLVMBuildICmp(b, LLVMIntEQ, r.c, kb_i32(kb, 0), "");
  kb_if_t lead = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, w, kb_i32(kb, 0), ""), "lead");
  lead_role(kb, x, &r, scale2, &st);
  kb_else(kb, &lead);
  follow_role(kb, x, &r, &fst);
  kb_endif(kb, &lead);
  T->bar_arrive(kb, WG_BAR_OUT, x->threads); /* staged: the producers copy it out */
}

/* The form's shape from kernel k and its launch record here (no IR). */
static void set_shape(const dsv4_kb *kb, const dsv4_kernel *k, wg_ctx *x)
{
  const dsv4_launch *ln = dsv4_kernel_launch(k, kb->t->kind);
  int form = (int)ln->form;
  x->k = k, x->pair = form == DSV4_FORM_WARPGROUP_PAIR, x->dim = k->layout.dim;
  x->heads = k->tile.tokens_per_cta, x->threads = (int)ln->threads;
  x->producers = 32 * dsv4_decode_wg_producers(form);
  x->prod_regs = dsv4_decode_wg_producer_regs(form);
  x->reg_cap = 65536 / x->threads / 8 * 8;
}

/* 0 if this target can build the form for k, else an error in d: the
 * hooks, the shape form_rules.h fixes, and the roles' registers within the
 * launch's. */
static int check_target(dsv4_kb *kb, const dsv4_kernel *k, const wg_ctx *x, dsv4_diags *d)
{
  const dsv4_target_ir *T = kb->t;
  int np = x->producers, preg = x->prod_regs;
  kb_wgmma probe = {KB_MMA_BF16, DSV4_DECODE_WG_VDIM / 2, 8, 128, 1, SD_TILE * 128, 1, 0};
  if (!T->wgmma || !T->wgmma_wait || !T->bar_sync || !T->bar_arrive || !T->fence_proxy_async || !T->shfl_xor ||
      !T->shfl_idx || !T->set_max_regs || !T->min_ctas || kb->warp != 32 || !T->wgmma(kb, &probe, NULL, NULL, NULL) ||
      (x->pair && (!T->cluster_rank || !T->cluster_rank(kb, NULL) || !T->cluster_sync || !T->mbar_init ||
                   !T->mbar_arrive || !T->mbar_wait || !T->copy_to_peer || !T->mbar_expect || !T->warp_sync)) ||
      !T->set_max_regs(kb, 0, 0) || !dsv4_decode_wg_shape_ok(x->dim, k->v_dim, x->heads) ||
      x->threads != dsv4_decode_wg_threads(x->pair ? DSV4_FORM_WARPGROUP_PAIR : DSV4_FORM_WARPGROUP) ||
      !dsv4_decode_wg_maps(k, x->pair ? DSV4_FORM_WARPGROUP_PAIR : DSV4_FORM_WARPGROUP) ||
      4 * (DSV4_DECODE_WG_LEAD_REGS + DSV4_DECODE_WG_FOLLOW_REGS) + np / 32 * preg > x->reg_cap * (x->threads / 32)) {
    dsv4_error(d, k->file, k->line, "kernel '%s': this target (%s) cannot build the warpgroup form of sparse_decode",
               k->name, kb->arch);
    return 1;
  }
  return 0;
}

/* The shared regions, in form_rules.h's order; 0 if they add up to its rule
 * and the output staging fits the q and K regions. */
static int carve_shared(dsv4_kb *kb, const dsv4_kernel *k, wg_ctx *x, dsv4_diags *d)
{
  LLVMValueRef sm = kb_dyn_shared(kb);
  long long o = 0;
  x->q_tile = sd_carve(kb, sm, &o, (long long)x->heads * x->dim * 2);
  x->k_tiles = sd_carve(kb, sm, &o, 2 * wg_kbytes(x));
  x->p_bufs = sd_carve(kb, sm, &o, 2 * 2 * WG_PBYTES);
  x->red = sd_carve(kb, sm, &o, 3 * 2 * x->heads * 4);
  x->sinks = kb_byte_ptr(kb, x->red, kb_i64(kb, 2 * 2 * x->heads * 4));
  x->valid = sd_carve(kb, sm, &o, 2 * SD_TILE * 4);
  if (x->pair)
    x->mbars = sd_carve(kb, sm, &o, WG_MBARS * 8);
  if (sd_shared_agrees(k, o, x->pair ? DSV4_FORM_WARPGROUP_PAIR : DSV4_FORM_WARPGROUP, d))
    return 1;
  if ((long long)x->heads * wg_stage_row(x) > (long long)x->heads * x->dim * 2 + 2 * wg_kbytes(x) || k->v_dim % 8 ||
      x->heads * (k->v_dim / 8) % x->producers || /* wg_out's staging (the q and K regions) and its copy */
      (k->tile.longest_first &&
       sd_rank_bytes(x->threads) > 2 * wg_kbytes(x))) { /* the ranking's scratch: the K tiles */
    dsv4_error(d, k->file, k->line,
               "kernel '%s': internal error: the output staging or the ranking's scratch does not fit", k->name);
    return 1;
  }
  return 0;
}

/* Pairs: a cluster of two, the other CTA rank ^ 1; the barrier objects
 * ready in both before either role uses them. */
static void pair_setup(dsv4_kb *kb, wg_ctx *x)
{
  const dsv4_target_ir *T = kb->t;
  T->cluster_rank(kb, &x->rank);
  x->peer = LLVMBuildXor(kb->b, x->rank, kb_i32(kb, 1), "peer");
  kb_if_t fi = kb_if(kb, LLVMBuildICmp(kb->b, LLVMIntEQ, x->tid, kb_i32(kb, 0), ""), "init");
  for (int m = 0; m < WG_MBARS;
       m++) /* FULL: this CTA's producer thread (and the other's copies); EMPTY: every consumer warp */
    T->mbar_init(kb, sd_wg_mbar(kb, x, m, kb_i32(kb, 0)), kb_i32(kb, m < WG_MB_EMPTY ? 1 : 2 * 8));
  kb_endif(kb, &fi);
  T->cluster_sync(kb, 1);
}

int sd_warpgroup(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_target_ir *T = kb->t;
  wg_ctx x = {0};
  set_shape(kb, k, &x);
  if (check_target(kb, k, &x, d) || carve_shared(kb, k, &x, d))
    return 1;
  x.tid = T->thread_id(kb);
  /* tile.longest_first (pairs only, compiler/ops/sparse_decode.c): the K tiles as the ranking's
   * scratch, which the other CTA writes only after pair_setup's cluster
   * barrier */
  x.token = k->tile.longest_first ? sd_longest_first(kb, x.k_tiles, x.tid, x.threads) : T->block_id(kb, 1);
  kb_return_if(kb, LLVMBuildICmp(b, LLVMIntSGE, x.token, kb_arg(kb, SD_n_tokens), "")); /* whole CTAs */
  LLVMValueRef h0 = LLVMBuildMul(b, T->block_id(kb, 0), kb_i32(kb, x.heads), "h0");
  sd_token_tiles(kb, x.token, x.n, x.ntiles, &x.lo, &x.hi);

  LLVMValueRef cons = LLVMBuildICmp(b, LLVMIntULT, x.tid, kb_i32(kb, 256), "consumer");
  if (x.pair)
    pair_setup(kb, &x); /* (alone, nothing before the roles needs a CTA barrier: q is the consumers' own) */
  T->min_ctas(kb, 1); /* the register cap setmaxnreg redistributes */
  kb_if_t role = kb_if(kb, cons, "role");
  consumers(kb, k, &x, h0);
  kb_else(kb, &role);
  sd_wg_producers(kb, &x); /* fill the two K buffers ahead of the consumers */
  kb_endif(kb, &role);
  /* neither CTA of a pair leaves while the other may still use its shared
   * memory.  Every such use has completed before this CTA's last FULL (the
   * other CTA's copies complete there, and the last two tiles hand no
   * buffer back), so the barrier orders execution only: an ordered one
   * made each thread wait for its output stores to be performed first
   * (about 1 us a CTA, timed in the kernel) */
  if (x.pair)
    T->cluster_sync(kb, 0);
  return 0;
}
