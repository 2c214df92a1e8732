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
#include <stdio.h>

#include "gen.h"

enum {
  OUT, LSE, Q, CACHE, INDICES, LENS, XCACHE, XINDICES, XLENS, SINK, N_TOKENS, HEADS, TOPK, NUM_BLOCKS, BLOCK_SIZE,
  BLOCK_STRIDE, XTOPK, XNUM_BLOCKS, XBLOCK_SIZE, XBLOCK_STRIDE, HAS_SINK, SOFTMAX_SCALE, TENSOR_SCALE, WORK, SPLITS
};
enum { C_OUT, C_LSE, C_WORK, C_SINK, C_TOKENS, C_HEADS, C_SPLITS, C_HAS_SINK, C_TENSOR_SCALE };

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

/* The last step of OPS.md section 3 for a row whose base-2 running max is
 * m2 and whose sum is l: *lse (natural log; +inf when no index was valid)
 * and *factor, what the accumulator is scaled by: 1/l, the sink only in
 * the denominator (sink: f32, -inf for none), times ts (the folded tensor
 * scale, or NULL); 0 when no index was valid. */
static void finish_row(dsv4_kb *kb, LLVMValueRef m2, LLVMValueRef l, LLVMValueRef sink, LLVMValueRef ts,
                       LLVMValueRef *lse, LLVMValueRef *factor)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef one = LLVMConstReal(kb->f32, 1.0);
  LLVMValueRef empty = LLVMBuildFCmp(b, LLVMRealOEQ, l, LLVMConstReal(kb->f32, 0.0), "empty");
  LLVMValueRef lse2 = LLVMBuildFAdd(b, m2, kb_log2(kb, l), "lse2");
  *lse = LLVMBuildSelect(b, empty, LLVMConstReal(kb->f32, INFINITY), LLVMBuildFMul(b, lse2, LLVMConstReal(kb->f32, LN2), ""),
                         "lse");
  LLVMValueRef e = kb_exp2(kb, LLVMBuildFSub(b, LLVMBuildFMul(b, sink, LLVMConstReal(kb->f32, LOG2E), ""), lse2, ""));
  LLVMValueRef f = LLVMBuildFMul(b, LLVMBuildFDiv(b, one, l, ""), LLVMBuildFDiv(b, one, LLVMBuildFAdd(b, one, e, ""), ""), "");
  if (ts)
    f = LLVMBuildFMul(b, f, ts, "");
  *factor = LLVMBuildSelect(b, empty, LLVMConstReal(kb->f32, 0.0), f, "factor");
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
  dsv4_lane_token tok = {0};
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

/* ---- the warp-matrix form (tile.matrix) ------------------------------------
 *
 * One CTA per (token, heads_per_cta heads): HC = 16 R heads, W R warps
 * (W = DSV4_DECODE_WARPS).  q
 * (HC x D bf16) is staged once in dynamic shared memory.  The two index
 * lists are one sequence of tiles of DSV4_DECODE_TILE (64) K rows (the main
 * list's tiles, then the extra list's), software-pipelined: while tile i
 * computes, the cache bytes of tile i+1 are copied asynchronously (cp.async;
 * rows past a list or with a bad index are zero-filled) into a block of 64
 * rows in the layout, and after tile i the CTA dequantizes that block with
 * the gathers' layout-driven code (bf16, exactly the dequantized cache).
 *
 * Per tile, warp (r, part) of row block r computes S = q K^T for its 16
 * heads and its part (1/W) of the tile's rows with mma.sync m16n8k16
 * (operands by ldmatrix), the row block's warps exchange row maxima
 * through shared memory for the online softmax (base 2), write P to shared memory as a high and a low
 * bf16 part (hi = bf16(p), lo = bf16(p - hi): one bf16 rounding of p puts
 * outputs with large, cancelling V values outside FlashMLA's tolerances,
 * its own fixtures included), and each accumulates P V = hi V + lo V for
 * its part of the V dims (V = the first v_dim dims of the same rows,
 * ldmatrix.trans).  At the end the warps add their row sums and each
 * thread writes its accumulator rows scaled as OPS.md section 3 says.
 */
enum { TILE = DSV4_DECODE_TILE };

typedef struct {
  int HC, R, W, TPW, NTQ, D, DV, NT2, RB, PB, threads;
  LLVMValueRef qs, ks, ps, pl, red, vm, raw, addr; /* shared regions (byte pointers) */
  LLVMValueRef tid, lane, g, c, r, part;           /* i32 */
  LLVMValueRef qa, ka, pa, va;                     /* i64 per-lane ldmatrix offsets */
  LLVMValueRef t, scale2;
  LLVMValueRef n[2], ntiles[2]; /* valid-prefix length and tiles of each list */
} mctx;

#define NT2_MAX 64

static LLVMValueRef f32c(dsv4_kb *kb, double v) { return LLVMConstReal(kb->f32, v); }

/* v of the lanes sharing this quad (lane ^ 1, ^ 2) folded with max or add. */
static LLVMValueRef quad_fold(dsv4_kb *kb, LLVMValueRef v, int add)
{
  for (int m = 1; m <= 2; m *= 2) {
    LLVMValueRef o = kb->t->shfl_xor(kb, v, m);
    v = add ? LLVMBuildFAdd(kb->b, v, o, "") : fmax2(kb, v, o);
  }
  return v;
}

/* v[0..n) (n <= 64) folded pairwise, with max (maxnum: a NaN is passed
 * over unless both are NaN; a row whose scores are all NaN gives NaN either
 * way) or add: a tree of depth log2 n where a chain was n dependent steps
 * on the softmax's critical path. */
static LLVMValueRef fold_tree(dsv4_kb *kb, const LLVMValueRef *v, int n, int add)
{
  LLVMValueRef t[64];
  LLVMTypeRef f2[2] = {kb->f32, kb->f32};
  for (int i = 0; i < n; i++)
    t[i] = v[i];
  for (; n > 1; n = (n + 1) / 2) {
    for (int i = 0; i < n / 2; i++) {
      LLVMValueRef ab[2] = {t[2 * i], t[2 * i + 1]};
      t[i] = add ? LLVMBuildFAdd(kb->b, ab[0], ab[1], "") : kb_call(kb, "llvm.maxnum.f32", kb->f32, f2, ab, 2, LLVMCCallConv);
    }
    if (n % 2)
      t[n / 2] = t[n - 1];
  }
  return t[0];
}

/* n = min(lens[t], topk), at least 0 (lens read only when topk > 0). */
static LLVMValueRef list_len(dsv4_kb *kb, const list_args *la, LLVMValueRef t)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef topk = kb_arg(kb, la->topk);
  LLVMValueRef n = kb_load_if(kb, LLVMBuildICmp(b, LLVMIntSGT, topk, kb_i32(kb, 0), ""), kb->i32, kb_arg(kb, la->lens),
                              LLVMBuildMul(b, kb_zext64(kb, t), kb_i64(kb, 4), ""), 4, kb_i32(kb, 0));
  n = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, n, topk, ""), n, topk, "n");
  return LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, n, kb_i32(kb, 0), ""), kb_i32(kb, 0), n, "");
}

/* Token t's two lists: valid-prefix lengths n[], tiles ntiles[] (the main
 * list's, then the extra list's), and this CTA's share [lo, hi) of them
 * (split z = ctaid.z of `splits`). */
static void token_tiles(dsv4_kb *kb, LLVMValueRef t, LLVMValueRef *n, LLVMValueRef *ntiles, LLVMValueRef *lo,
                        LLVMValueRef *hi)
{
  LLVMBuilderRef b = kb->b;
  const list_args *lists[2] = {&MAIN, &EXTRA};
  for (int li = 0; li < 2; li++) {
    n[li] = list_len(kb, lists[li], t);
    ntiles[li] = LLVMBuildSDiv(b, LLVMBuildAdd(b, n[li], kb_i32(kb, TILE - 1), ""), kb_i32(kb, TILE), "");
  }
  LLVMValueRef nt = kb_sext64(kb, LLVMBuildAdd(b, ntiles[0], ntiles[1], "nt"));
  LLVMValueRef S64 = kb_sext64(kb, kb_arg(kb, SPLITS)), z64 = kb_zext64(kb, kb->t->block_id(kb, 2));
  *lo = LLVMBuildTrunc(b, LLVMBuildSDiv(b, LLVMBuildMul(b, z64, nt, ""), S64, ""), kb->i32, "lo");
  *hi = LLVMBuildTrunc(b, LLVMBuildSDiv(b, LLVMBuildMul(b, LLVMBuildAdd(b, z64, kb_i64(kb, 1), ""), nt, ""), S64, ""),
                       kb->i32, "hi");
}

/* Tile i's list (the main one's tiles, then the extra one's): its local
 * tile index, valid-prefix length and arguments. */
typedef struct {
  LLVMValueRef lt, n, topk, bs, nb, stride, cache, ind; /* bs, nb: i64 */
} tile_list;

static tile_list pick_list(dsv4_kb *kb, LLVMValueRef i, const LLVMValueRef *n, const LLVMValueRef *ntiles)
{
  LLVMBuilderRef b = kb->b;
  tile_list r;
  LLVMValueRef ex = LLVMBuildICmp(b, LLVMIntSGE, i, ntiles[0], "extra");
#define PICK(m, e) LLVMBuildSelect(b, ex, (e), (m), "")
  r.lt = PICK(i, LLVMBuildSub(b, i, ntiles[0], ""));
  r.n = PICK(n[0], n[1]);
  r.topk = PICK(kb_arg(kb, MAIN.topk), kb_arg(kb, EXTRA.topk));
  r.bs = kb_sext64(kb, PICK(kb_arg(kb, MAIN.block_size), kb_arg(kb, EXTRA.block_size)));
  r.nb = kb_sext64(kb, PICK(kb_arg(kb, MAIN.num_blocks), kb_arg(kb, EXTRA.num_blocks)));
  r.stride = PICK(kb_arg(kb, MAIN.block_stride), kb_arg(kb, EXTRA.block_stride));
  r.cache = PICK(kb_arg(kb, MAIN.cache), kb_arg(kb, EXTRA.cache));
  r.ind = PICK(kb_arg(kb, MAIN.indices), kb_arg(kb, EXTRA.indices));
#undef PICK
  return r;
}

/* i1: index idx (i64) names a row of a cache of nb blocks of bs rows. */
static LLVMValueRef row_valid(dsv4_kb *kb, LLVMValueRef idx, LLVMValueRef nb, LLVMValueRef bs)
{
  LLVMBuilderRef b = kb->b;
  return LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, idx, kb_i64(kb, 0), ""),
                      LLVMBuildICmp(b, LLVMIntSLT, idx, LLVMBuildMul(b, nb, bs, ""), ""), "valid");
}

/* i64 offset, in its block, of row `row`'s scale row (block-tail scales). */
static LLVMValueRef tail_scale_offset(dsv4_kb *kb, const dsv4_layout *L, LLVMValueRef bs, LLVMValueRef row)
{
  LLVMBuilderRef b = kb->b;
  return LLVMBuildAdd(b, LLVMBuildMul(b, bs, kb_i64(kb, L->row_bytes), ""), LLVMBuildMul(b, row, kb_i64(kb, L->scale_row_bytes), ""),
                      "");
}

/* Tile i's K rows: threads 0..63 find row tid's slot and store its row and
 * scale-row addresses (global, as i64) and its validity (vm[buf]). */
static void find_rows(dsv4_kb *kb, const dsv4_kernel *k, const mctx *x, LLVMValueRef i, LLVMValueRef buf)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_layout *L = &k->layout;
  kb_if_t f = kb_if(kb, LLVMBuildICmp(b, LLVMIntULT, x->tid, kb_i32(kb, TILE), ""), "rows");
  tile_list tl = pick_list(kb, i, x->n, x->ntiles);
  LLVMValueRef lt = tl.lt, n = tl.n, topk = tl.topk, bs = tl.bs, nb = tl.nb, stride = tl.stride, cache = tl.cache,
               ind = tl.ind;
  LLVMValueRef p = LLVMBuildAdd(b, LLVMBuildMul(b, lt, kb_i32(kb, TILE), ""), x->tid, "pos");
  LLVMValueRef want = LLVMBuildICmp(b, LLVMIntSLT, p, n, "");
  LLVMValueRef ioff = LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, x->t), kb_sext64(kb, topk), ""),
                                                   kb_zext64(kb, p), ""), kb_i64(kb, 4), "");
  LLVMValueRef idx = kb_sext64(kb, kb_load_if(kb, want, kb->i32, ind, ioff, 4, kb_i32(kb, -1)));
  LLVMValueRef valid = row_valid(kb, idx, nb, bs);
  LLVMValueRef s0 = LLVMBuildSelect(b, valid, idx, kb_i64(kb, 0), "");
  LLVMValueRef row = LLVMBuildURem(b, s0, bs, ""), blk = LLVMBuildMul(b, LLVMBuildUDiv(b, s0, bs, ""), stride, "");
  LLVMValueRef rp = kb_byte_ptr(kb, cache, LLVMBuildAdd(b, blk, LLVMBuildMul(b, row, kb_i64(kb, L->row_bytes), ""), ""));
  LLVMValueRef sp = rp;
  if (L->scale_place == DSV4_SCALES_BLOCK_TAIL)
    sp = kb_byte_ptr(kb, cache, LLVMBuildAdd(b, blk, tail_scale_offset(kb, L, bs, row), ""));
  LLVMValueRef a0 = LLVMBuildMul(b, kb_zext64(kb, x->tid), kb_i64(kb, 16), "");
  kb_store(kb, LLVMBuildPtrToInt(b, rp, kb->i64, ""), kb_byte_ptr(kb, x->addr, a0), 8);
  kb_store(kb, LLVMBuildPtrToInt(b, sp, kb->i64, ""), kb_byte_ptr(kb, x->addr, LLVMBuildAdd(b, a0, kb_i64(kb, 8), "")), 8);
  LLVMValueRef vo = LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, buf), kb_i64(kb, TILE * 4), ""),
                                 LLVMBuildMul(b, kb_zext64(kb, x->tid), kb_i64(kb, 4), ""), "");
  kb_store(kb, LLVMBuildZExt(b, valid, kb->i32, ""), kb_byte_ptr(kb, x->vm, vo), 4);
  kb_endif(kb, &f);
}

/* Copy the rows find_rows chose into the raw block (zeros for invalid
 * rows): rows at j * row_bytes, tail scale rows after TILE rows. */
static void copy_rows(dsv4_kb *kb, const dsv4_kernel *k, const mctx *x, LLVMValueRef buf)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_layout *L = &k->layout;
  int tail = L->scale_place == DSV4_SCALES_BLOCK_TAIL;
  for (int part = 0; part < 1 + tail; part++) {
    int rb = part ? L->scale_row_bytes : L->row_bytes;
    int sz = rb % 16 == 0 ? 16 : rb % 8 == 0 ? 8 : 4, per = rb / sz, total = TILE * per;
    long long dst0 = part ? (long long)TILE * L->row_bytes : 0;
    for (int c0 = 0; c0 < total; c0 += x->threads) {
      LLVMValueRef ci = LLVMBuildAdd(b, x->tid, kb_i32(kb, c0), "");
      kb_if_t f = kb_if(kb, LLVMBuildICmp(b, LLVMIntULT, ci, kb_i32(kb, total), ""), "cp");
      LLVMValueRef j = kb_zext64(kb, LLVMBuildUDiv(b, ci, kb_i32(kb, per), ""));
      LLVMValueRef q = kb_zext64(kb, LLVMBuildURem(b, ci, kb_i32(kb, per), ""));
      LLVMValueRef a = kb_load(kb, kb->i64, kb_byte_ptr(kb, x->addr, LLVMBuildAdd(b, LLVMBuildMul(b, j, kb_i64(kb, 16), ""), kb_i64(kb, part * 8), "")), 8);
      LLVMValueRef vo = LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, buf), kb_i64(kb, TILE * 4), ""), LLVMBuildMul(b, j, kb_i64(kb, 4), ""), "");
      LLVMValueRef ok = LLVMBuildICmp(b, LLVMIntNE, kb_load(kb, kb->i32, kb_byte_ptr(kb, x->vm, vo), 4), kb_i32(kb, 0), "");
      LLVMValueRef src = kb_byte_ptr(kb, LLVMBuildIntToPtr(b, a, kb->gptr, ""), LLVMBuildMul(b, q, kb_i64(kb, sz), ""));
      LLVMValueRef dst = kb_byte_ptr(kb, x->raw, LLVMBuildAdd(b, kb_i64(kb, dst0), LLVMBuildAdd(b, LLVMBuildMul(b, j, kb_i64(kb, rb), ""),
                                                                                              LLVMBuildMul(b, q, kb_i64(kb, sz), ""), ""), ""));
      kb->t->cp_async(kb, dst, src, sz, LLVMBuildSelect(b, ok, kb_i32(kb, sz), kb_i32(kb, 0), ""));
      kb_endif(kb, &f);
    }
  }
}

/* Dequantize the raw block into the K tile (bf16 rows). */
static void dequant_rows(dsv4_kb *kb, const dsv4_kernel *k, const mctx *x)
{
  LLVMBuilderRef b = kb->b;
  int lanes = x->D / k->tile.values_per_thread, tp = x->threads / lanes, passes = (TILE + tp - 1) / tp;
  LLVMValueRef local = LLVMBuildUDiv(b, x->tid, kb_i32(kb, lanes), ""), ln = LLVMBuildURem(b, x->tid, kb_i32(kb, lanes), "");
  dsv4_lane_token tok[8] = {0};
  for (int u = 0; u < passes; u++) {
    LLVMValueRef j = LLVMBuildAdd(b, kb_i32(kb, u * tp), local, "");
    LLVMValueRef in = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntULT, j, kb_i32(kb, TILE), ""),
                                   LLVMBuildICmp(b, LLVMIntULT, local, kb_i32(kb, tp), ""), "");
    LLVMValueRef jr = kb_zext64(kb, LLVMBuildSelect(b, in, j, kb_i32(kb, 0), ""));
    tok[u].blk = x->raw;
    tok[u].row = jr;
    tok[u].valid = in; /* invalid rows were zero-filled: they dequantize to +0.0 */
    tok[u].write = in;
    tok[u].out_row = kb_byte_ptr(kb, x->ks, LLVMBuildMul(b, jr, kb_i64(kb, x->RB), ""));
  }
  dsv4_kernel kd = *k;
  kd.tile.streaming = 0; /* shared memory on both sides */
  dsv4_emit_dequant_tokens(kb, &kd, ln, kb_i64(kb, TILE), f32c(kb, 1.0), tok, passes);
}

/* S (NTQ n-tiles of 8 rows: this warp's part of the tile) = q K^T. */
static void qk(dsv4_kb *kb, const mctx *x, LLVMValueRef S[4][4])
{
  for (int j = 0; j < x->NTQ; j++)
    for (int e = 0; e < 4; e++)
      S[j][e] = f32c(kb, 0.0);
  for (int kk = 0; kk < x->D / 16; kk++) {
    LLVMValueRef a[4], bq[2][4];
    kb->t->ldmatrix_x4(kb, kb_byte_ptr(kb, x->qs, LLVMBuildAdd(kb->b, x->qa, kb_i64(kb, kk * 32), "")), 0, a);
    for (int jp = 0; jp < x->NTQ / 2; jp++)
      kb->t->ldmatrix_x4(kb, kb_byte_ptr(kb, x->ks, LLVMBuildAdd(kb->b, x->ka, kb_i64(kb, (long long)jp * 16 * x->RB + kk * 32), "")), 0,
                         bq[jp]);
    for (int j = 0; j < x->NTQ; j++)
      kb->t->mma_bf16_16x8x16(kb, a, &bq[j / 2][(j % 2) * 2], S[j], S[j]);
  }
}

typedef struct {
  LLVMValueRef m[2], l[2], acc[NT2_MAX][4];
} mstate;

static void pack(const mctx *x, const mstate *st, LLVMValueRef *v)
{
  v[0] = st->m[0], v[1] = st->m[1], v[2] = st->l[0], v[3] = st->l[1];
  for (int j = 0; j < x->NT2; j++)
    for (int e = 0; e < 4; e++)
      v[4 + j * 4 + e] = st->acc[j][e];
}

static void unpack(const mctx *x, mstate *st, const LLVMValueRef *v)
{
  st->m[0] = v[0], st->m[1] = v[1], st->l[0] = v[2], st->l[1] = v[3];
  for (int j = 0; j < x->NT2; j++)
    for (int e = 0; e < 4; e++)
      st->acc[j][e] = v[4 + j * 4 + e];
}

/* Fold tiles [lo, hi) of the token into the state. */
static void matrix_tiles(dsv4_kb *kb, const dsv4_kernel *k, const mctx *x, LLVMValueRef lo, LLVMValueRef hi, mstate *st)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef nt = hi;
  /* prologue: tile lo into the K tile */
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

  int nv = 4 + 4 * x->NT2;
  LLVMValueRef init[KB_LOOP_MAX_VARS];
  pack(x, st, init);
  kb_loop_t loop;
  kb_for(kb, &loop, lo, nt, nv, init);
  mstate cur;
  unpack(x, &cur, loop.vars);
  LLVMValueRef i = loop.iv, i1 = LLVMBuildAdd(b, i, kb_i32(kb, 1), "");
  LLVMValueRef more = LLVMBuildICmp(b, LLVMIntSLT, i1, nt, "more");
  LLVMValueRef buf = LLVMBuildAnd(b, i, kb_i32(kb, 1), ""), nbuf = LLVMBuildAnd(b, i1, kb_i32(kb, 1), "");
  kb_if_t f1 = kb_if(kb, more, "next");
  find_rows(kb, k, x, i1, nbuf);
  kb_endif(kb, &f1);

  LLVMValueRef S[4][4];
  qk(kb, x, S);
  /* scores in base 2; rows past the list or with bad indices are -inf */
  LLVMValueRef col0 = LLVMBuildAdd(b, LLVMBuildMul(b, x->part, kb_i32(kb, x->TPW), ""), LLVMBuildMul(b, x->c, kb_i32(kb, 2), ""), "");
  LLVMValueRef vbase = LLVMBuildMul(b, kb_zext64(kb, buf), kb_i64(kb, TILE * 4), "");
  LLVMValueRef mx[2], rowv[2][8];
  for (int j = 0; j < x->NTQ; j++)
    for (int e = 0; e < 2; e++) {
      LLVMValueRef col = LLVMBuildAdd(b, col0, kb_i32(kb, j * 8 + e), "");
      LLVMValueRef ok = kb_load(kb, kb->i32, kb_byte_ptr(kb, x->vm, LLVMBuildAdd(b, vbase, LLVMBuildMul(b, kb_zext64(kb, col), kb_i64(kb, 4), ""), "")), 4);
      ok = LLVMBuildICmp(b, LLVMIntNE, ok, kb_i32(kb, 0), "");
      for (int h = 0; h < 2; h++) {
        LLVMValueRef v = LLVMBuildFMul(b, S[j][h * 2 + e], x->scale2, "");
        S[j][h * 2 + e] = rowv[h][2 * j + e] = LLVMBuildSelect(b, ok, v, f32c(kb, -INFINITY), "");
      }
    }
  for (int h = 0; h < 2; h++)
    mx[h] = fold_tree(kb, rowv[h], 2 * x->NTQ, 0);
  /* row maxima: quad, then the row block's other warps through shared memory */
  LLVMValueRef rowoff[2];
  for (int h = 0; h < 2; h++) {
    mx[h] = quad_fold(kb, mx[h], 0);
    LLVMValueRef row = LLVMBuildAdd(b, LLVMBuildMul(b, x->r, kb_i32(kb, 16), ""), LLVMBuildAdd(b, x->g, kb_i32(kb, h * 8), ""), "");
    rowoff[h] = LLVMBuildMul(b, kb_zext64(kb, row), kb_i64(kb, 4), "");
  }
  LLVMValueRef mine = LLVMBuildMul(b, kb_zext64(kb, x->part), kb_i64(kb, (long long)x->HC * 4), "");
  kb_if_t f = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, x->c, kb_i32(kb, 0), ""), "rmax");
  for (int h = 0; h < 2; h++)
    kb_store(kb, mx[h], kb_byte_ptr(kb, x->red, LLVMBuildAdd(b, mine, rowoff[h], "")), 4);
  kb_endif(kb, &f);
  kb->t->barrier(kb); /* maxima, and the next tile's rows, published */
  kb_if_t f2 = kb_if(kb, more, "copy");
  copy_rows(kb, k, x, nbuf);
  kb_endif(kb, &f2);
  mstate nx;
  for (int h = 0; h < 2; h++) {
    LLVMValueRef mn = cur.m[h];
    for (int w = 0; w < x->W; w++)
      mn = fmax2(kb, mn, kb_load(kb, kb->f32, kb_byte_ptr(kb, x->red, LLVMBuildAdd(b, kb_i64(kb, (long long)w * x->HC * 4), rowoff[h], "")), 4));
    LLVMValueRef inf = LLVMBuildFCmp(b, LLVMRealOEQ, mn, f32c(kb, -INFINITY), "");
    LLVMValueRef mu = LLVMBuildSelect(b, inf, f32c(kb, 0.0), mn, "");
    LLVMValueRef corr = kb_exp2(kb, LLVMBuildFSub(b, cur.m[h], mu, ""));
    LLVMValueRef pv[8];
    for (int j = 0; j < x->NTQ; j++)
      for (int e = 0; e < 2; e++)
        S[j][h * 2 + e] = pv[2 * j + e] = kb_exp2_ftz(kb, LLVMBuildFSub(b, S[j][h * 2 + e], mu, ""));
    LLVMValueRef sum = fold_tree(kb, pv, 2 * x->NTQ, 1);
    nx.m[h] = mn;
    nx.l[h] = LLVMBuildFAdd(b, LLVMBuildFMul(b, cur.l[h], corr, ""), sum, "");
    for (int j = 0; j < x->NT2; j++)
      for (int e = 0; e < 2; e++)
        nx.acc[j][h * 2 + e] = LLVMBuildFMul(b, cur.acc[j][h * 2 + e], corr, "");
  }
  /* P as hi + lo bf16 parts for the whole row block */
  for (int h = 0; h < 2; h++) {
    LLVMValueRef prow = LLVMBuildMul(b, LLVMBuildUDiv(b, rowoff[h], kb_i64(kb, 4), ""), kb_i64(kb, x->PB), "");
    for (int j = 0; j < x->NTQ; j++) {
      LLVMValueRef w[2];
      kb_f32x2_to_bf16_split(kb, S[j][h * 2], S[j][h * 2 + 1], &w[0], &w[1]);
      LLVMValueRef col = LLVMBuildAdd(b, col0, kb_i32(kb, j * 8), "");
      LLVMValueRef off = LLVMBuildAdd(b, prow, LLVMBuildMul(b, kb_zext64(kb, col), kb_i64(kb, 2), ""), "");
      LLVMValueRef base[2] = {x->ps, x->pl};
      for (int q = 0; q < 2; q++)
        kb_store(kb, w[q], kb_byte_ptr(kb, base[q], off), 4);
    }
  }
  kb->t->barrier(kb);
  /* acc += P V over this warp's part of V */
  for (int kk = 0; kk < TILE / 16; kk++) {
    LLVMValueRef a[4], al[4];
    kb->t->ldmatrix_x4(kb, kb_byte_ptr(kb, x->ps, LLVMBuildAdd(b, x->pa, kb_i64(kb, kk * 32), "")), 0, a);
    kb->t->ldmatrix_x4(kb, kb_byte_ptr(kb, x->pl, LLVMBuildAdd(b, x->pa, kb_i64(kb, kk * 32), "")), 0, al);
    for (int dp = 0; dp < x->NT2 / 2; dp++) {
      LLVMValueRef bv[4];
      long long off = (long long)kk * 16 * x->RB + dp * 32;
      kb->t->ldmatrix_x4(kb, kb_byte_ptr(kb, x->ks, LLVMBuildAdd(b, x->va, kb_i64(kb, off), "")), 1, bv);
      for (int n = 0; n < 2; n++) {
        kb->t->mma_bf16_16x8x16(kb, al, &bv[2 * n], nx.acc[2 * dp + n], nx.acc[2 * dp + n]);
        kb->t->mma_bf16_16x8x16(kb, a, &bv[2 * n], nx.acc[2 * dp + n], nx.acc[2 * dp + n]);
      }
    }
  }
  kb->t->cp_async_wait_all(kb);
  kb->t->barrier(kb); /* K and P read; the next tile's bytes arrived */
  kb_if_t f3 = kb_if(kb, more, "deq");
  dequant_rows(kb, k, x);
  kb_endif(kb, &f3);
  kb->t->barrier(kb);
  LLVMValueRef next[KB_LOOP_MAX_VARS];
  pack(x, &nx, next);
  kb_for_end(kb, &loop, next);
  unpack(x, st, loop.vars);
}

/* The end of a (token, head) row for the thread holding pairs acc[j] of
 * dims dim0 + 8 j + (0, 1) (j < nb) and the row's base-2 max m and sum l:
 * with split-KV, this split's unnormalized acc and (m, l) (written by the
 * `first` thread) into the work space for <name>_combine; otherwise the
 * finished bf16 output and (first) lse.  Heads past `heads` write nothing.
 * With stage (a byte pointer to the row in shared memory) the finished
 * output values go there, at their dim's offset (2 bytes a value), for the
 * caller to copy out in whole lines; lse and split-KV partials still go
 * straight out (a partial's 8-byte pairs fill whole 32-byte sectors). */
static void head_out(dsv4_kb *kb, const dsv4_kernel *k, LLVMValueRef t, LLVMValueRef head, LLVMValueRef m,
                     LLVMValueRef l, LLVMValueRef (*acc)[2], int nb, LLVMValueRef dim0, LLVMValueRef first,
                     LLVMValueRef stage, LLVMValueRef sink)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_target_ir *T = kb->t;
  int DV = k->v_dim, fold = 0;
  for (int i = 0; i < k->layout.nseg; i++)
    fold |= k->layout.seg[i].scale_tensor;
  LLVMValueRef H = kb_arg(kb, HEADS);
  LLVMValueRef has = LLVMBuildICmp(b, LLVMIntNE, kb_arg(kb, HAS_SINK), kb_i32(kb, 0), "");
  LLVMValueRef S = kb_arg(kb, SPLITS), z = T->block_id(kb, 2);
  LLVMValueRef split = LLVMBuildICmp(b, LLVMIntSGT, S, kb_i32(kb, 1), "split");
  LLVMValueRef live = LLVMBuildICmp(b, LLVMIntSLT, head, H, "");
  LLVMValueRef th = LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, t), kb_sext64(kb, H), ""), kb_zext64(kb, head), "");
  kb_if_t w = kb_if(kb, live, "out");
  kb_if_t sp = kb_if(kb, split, "partial");
  { /* split-KV: this split's (m, l) and unnormalized acc for <name>_combine */
    LLVMValueRef slot = LLVMBuildAdd(b, LLVMBuildMul(b, th, kb_sext64(kb, S), ""), kb_zext64(kb, z), "slot");
    LLVMValueRef ab = LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, slot, kb_i64(kb, DV), ""), dim0, ""), kb_i64(kb, 4), "");
    for (int j = 0; j < nb; j++) {
      LLVMValueRef v = LLVMGetUndef(LLVMVectorType(kb->f32, 2));
      for (int e = 0; e < 2; e++)
        v = LLVMBuildInsertElement(b, v, acc[j][e], kb_i32(kb, e), "");
      kb_store(kb, v, kb_byte_ptr(kb, kb_arg(kb, WORK), LLVMBuildAdd(b, ab, kb_i64(kb, j * 32), "")), 8);
    }
    kb_if_t g = kb_if(kb, first, "ml");
    LLVMValueRef rows = LLVMBuildMul(b, LLVMBuildMul(b, kb_sext64(kb, kb_arg(kb, N_TOKENS)), kb_sext64(kb, H), ""), kb_sext64(kb, S), "");
    LLVMValueRef mo = LLVMBuildAdd(b, LLVMBuildMul(b, rows, kb_i64(kb, (long long)DV * 4), ""),
                                   LLVMBuildMul(b, slot, kb_i64(kb, 8), ""), "");
    LLVMValueRef v = LLVMBuildInsertElement(b, LLVMGetUndef(LLVMVectorType(kb->f32, 2)), m, kb_i32(kb, 0), "");
    v = LLVMBuildInsertElement(b, v, l, kb_i32(kb, 1), "");
    kb_store(kb, v, kb_byte_ptr(kb, kb_arg(kb, WORK), mo), 8);
    kb_endif(kb, &g);
  }
  kb_else(kb, &sp);
  {
    LLVMValueRef hoff = LLVMBuildMul(b, kb_sext64(kb, head), kb_i64(kb, 4), "");
    LLVMValueRef sk = sink ? sink : kb_load_if(kb, has, kb->f32, kb_arg(kb, SINK), hoff, 4, f32c(kb, -INFINITY));
    LLVMValueRef lse, factor;
    finish_row(kb, m, l, sk, fold ? kb_arg(kb, TENSOR_SCALE) : NULL, &lse, &factor);
    LLVMValueRef ob = LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, th, kb_i64(kb, DV), ""), dim0, ""), kb_i64(kb, 2), "");
    for (int j = 0; j < nb; j++) {
      LLVMValueRef h16[2];
      kb_f32x2_to_bf16(kb, LLVMBuildFMul(b, acc[j][0], factor, ""), LLVMBuildFMul(b, acc[j][1], factor, ""), h16);
      LLVMValueRef wv = LLVMBuildOr(b, kb_zext64(kb, h16[0]), LLVMBuildShl(b, kb_zext64(kb, h16[1]), kb_i64(kb, 16), ""), "");
      LLVMValueRef at = stage ? kb_byte_ptr(kb, stage, LLVMBuildMul(b, LLVMBuildAdd(b, dim0, kb_i64(kb, 8 * j), ""), kb_i64(kb, 2), ""))
                              : kb_byte_ptr(kb, kb_arg(kb, OUT), LLVMBuildAdd(b, ob, kb_i64(kb, j * 16), ""));
      kb_store(kb, LLVMBuildTrunc(b, wv, kb->i32, ""), at, 4);
    }
    kb_if_t g = kb_if(kb, first, "lse");
    kb_store(kb, lse, kb_byte_ptr(kb, kb_arg(kb, LSE), LLVMBuildMul(b, th, kb_i64(kb, 4), "")), 4);
    kb_endif(kb, &g);
  }
  kb_endif(kb, &sp);
  kb_endif(kb, &w);
}

/* The next `bytes` of dynamic shared memory sm, laid out from offset *o
 * (advanced): both matrix forms carve their regions this way, and
 * shared_agrees() then holds the total to the checker's rule. */
static LLVMValueRef carve(dsv4_kb *kb, LLVMValueRef sm, long long *o, long long bytes)
{
  LLVMValueRef p = kb_byte_ptr(kb, sm, kb_i64(kb, *o));
  *o += bytes;
  return p;
}

/* The generator's own layout of dynamic shared memory (o bytes) against
 * the dsv4_abi.h rule the checker and the runtime use: 0 if equal. */
static int shared_agrees(const dsv4_kernel *k, long long o, int form, dsv4_diags *d)
{
  int want = dsv4_decode_shared_bytes(&k->layout, k->tile.tokens_per_cta, form);
  if (o == want)
    return 0;
  dsv4_error(d, k->file, k->line, "internal error: kernel '%s' lays out %lld bytes of shared memory, not %d", k->name, o,
             want);
  return 1;
}

static int matrix_decode(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_target_ir *T = kb->t;
  mctx x;
  x.HC = k->tile.tokens_per_cta, x.R = x.HC / 16, x.D = k->layout.dim, x.DV = k->v_dim;
  x.W = DSV4_DECODE_WARPS, x.TPW = TILE / x.W, x.NTQ = x.TPW / 8, x.NT2 = x.DV / x.W / 8;
  x.RB = dsv4_decode_row_bytes(x.D), x.PB = TILE * 2 + 16, x.threads = k->tile.threads;
  int lanes = x.D / k->tile.values_per_thread;
  if (!T->mma_bf16_16x8x16 || !T->ldmatrix_x4 || !T->shfl_xor || !T->cp_async || !T->cp_async_wait_all ||
      T->warp != 32 || !T->mma_bf16_16x8x16(kb, NULL, NULL, NULL, NULL) || !T->ldmatrix_x4(kb, NULL, 0, NULL) ||
      !T->cp_async(kb, NULL, NULL, 16, NULL) || x.NT2 > NT2_MAX || lanes > x.threads ||
      (TILE + x.threads / lanes - 1) / (x.threads / lanes) > 8 || x.threads < TILE) {
    dsv4_error(d, k->file, k->line, "kernel '%s': this target (%s) cannot build the warp-matrix form of sparse_decode",
               k->name, kb->arch);
    return 1;
  }
  LLVMValueRef sm = kb_dyn_shared(kb);
  long long o = 0;
  x.qs = carve(kb, sm, &o, (long long)x.HC * x.RB);
  x.ks = carve(kb, sm, &o, (long long)TILE * x.RB);
  x.ps = carve(kb, sm, &o, (long long)x.HC * x.PB);
  x.pl = carve(kb, sm, &o, (long long)x.HC * x.PB);
  x.raw = carve(kb, sm, &o, dsv4_decode_raw_bytes(&k->layout));
  x.addr = carve(kb, sm, &o, TILE * 16);
  x.red = carve(kb, sm, &o, (long long)x.HC * 8 * x.W);
  x.vm = carve(kb, sm, &o, TILE * 8);
  if (shared_agrees(k, o, DSV4_MATRIX_WARP, d))
    return 1;
  x.tid = T->thread_id(kb);
  LLVMValueRef warp = LLVMBuildUDiv(b, x.tid, kb_i32(kb, 32), "warp");
  x.lane = LLVMBuildURem(b, x.tid, kb_i32(kb, 32), "lane");
  x.g = LLVMBuildLShr(b, x.lane, kb_i32(kb, 2), "g");
  x.c = LLVMBuildAnd(b, x.lane, kb_i32(kb, 3), "c");
  x.r = LLVMBuildURem(b, warp, kb_i32(kb, x.R), "rblk");
  x.part = LLVMBuildUDiv(b, warp, kb_i32(kb, x.R), "part");
  x.t = T->block_id(kb, 1);
  kb_return_if(kb, LLVMBuildICmp(b, LLVMIntSGE, x.t, kb_arg(kb, N_TOKENS), "")); /* whole CTAs */
  LLVMValueRef h0 = LLVMBuildMul(b, T->block_id(kb, 0), kb_i32(kb, x.HC), "h0");
  LLVMValueRef H = kb_arg(kb, HEADS);
  /* ldmatrix row addresses: lane l gives row (l & 7) + 8 ((l >> 3) & 1) or
   * (l & 7) + 8 (l >> 4) of a 16 x 16 block, column 8 (l >> 4) or 8 ((l >> 3) & 1) */
  LLVMValueRef l7 = kb_zext64(kb, LLVMBuildAnd(b, x.lane, kb_i32(kb, 7), ""));
  LLVMValueRef b3 = kb_zext64(kb, LLVMBuildAnd(b, LLVMBuildLShr(b, x.lane, kb_i32(kb, 3), ""), kb_i32(kb, 1), ""));
  LLVMValueRef b4 = kb_zext64(kb, LLVMBuildLShr(b, x.lane, kb_i32(kb, 4), ""));
  LLVMValueRef rowA = LLVMBuildAdd(b, l7, LLVMBuildMul(b, b3, kb_i64(kb, 8), ""), ""); /* A: rows 0-15 */
  LLVMValueRef colA = LLVMBuildMul(b, b4, kb_i64(kb, 16), "");                         /* bytes */
  LLVMValueRef r16 = LLVMBuildMul(b, kb_zext64(kb, x.r), kb_i64(kb, 16), "");
  LLVMValueRef h32 = LLVMBuildMul(b, kb_zext64(kb, x.part), kb_i64(kb, x.TPW), "");
  x.qa = LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildAdd(b, r16, rowA, ""), kb_i64(kb, x.RB), ""), colA, "qa");
  x.pa = LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildAdd(b, r16, rowA, ""), kb_i64(kb, x.PB), ""), colA, "pa");
  LLVMValueRef rowB = LLVMBuildAdd(b, l7, LLVMBuildMul(b, b4, kb_i64(kb, 8), ""), ""); /* K rows (tokens) */
  x.ka = LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildAdd(b, h32, rowB, ""), kb_i64(kb, x.RB), ""),
                      LLVMBuildMul(b, b3, kb_i64(kb, 16), ""), "ka");
  LLVMValueRef vcol = LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, x.part), kb_i64(kb, (long long)x.DV / x.W * 2), ""),
                                   LLVMBuildMul(b, b4, kb_i64(kb, 16), ""), ""); /* bytes */
  x.va = LLVMBuildAdd(b, LLVMBuildMul(b, rowA, kb_i64(kb, x.RB), ""), vcol, "va");

  /* q rows h0 .. h0+HC of token t (zeros past the heads) */
  LLVMValueRef qrow = LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, x.t), kb_sext64(kb, H), ""), kb_zext64(kb, h0), "");
  LLVMValueRef qvalid = LLVMBuildMul(b, kb_sext64(kb, LLVMBuildSub(b, H, h0, "")), kb_i64(kb, (long long)x.D * 2), "");
  kb_stage_rows(kb, kb_arg(kb, Q), LLVMBuildMul(b, qrow, kb_i64(kb, (long long)x.D * 2), ""), (long long)x.HC * x.D * 2,
                qvalid, x.D * 2, x.RB, x.qs, x.tid, x.threads);
  int fold = 0;
  for (int i = 0; i < k->layout.nseg; i++)
    fold |= k->layout.seg[i].scale_tensor;
  LLVMValueRef scale = kb_arg(kb, SOFTMAX_SCALE);
  if (fold)
    scale = LLVMBuildFMul(b, scale, kb_arg(kb, TENSOR_SCALE), "");
  x.scale2 = LLVMBuildFMul(b, scale, f32c(kb, LOG2E), "scale2");
  /* the prologue's barriers also publish q */
  mstate st;
  for (int h = 0; h < 2; h++)
    st.m[h] = f32c(kb, -INFINITY), st.l[h] = f32c(kb, 0.0);
  for (int j = 0; j < x.NT2; j++)
    for (int e = 0; e < 4; e++)
      st.acc[j][e] = f32c(kb, 0.0);
  LLVMValueRef lo, hi; /* this CTA's share of the token's tiles */
  token_tiles(kb, x.t, x.n, x.ntiles, &lo, &hi);
  matrix_tiles(kb, k, &x, lo, hi, &st);

  /* row sums: the quad, then the row block's warps (through shared memory) */
  LLVMValueRef rowoff[2], rowi[2];
  LLVMValueRef sums = kb_byte_ptr(kb, x.red, kb_i64(kb, (long long)x.HC * 4 * x.W));
  LLVMValueRef mine = LLVMBuildMul(b, kb_zext64(kb, x.part), kb_i64(kb, (long long)x.HC * 4), "");
  for (int h = 0; h < 2; h++) {
    st.l[h] = quad_fold(kb, st.l[h], 1);
    rowi[h] = LLVMBuildAdd(b, LLVMBuildMul(b, x.r, kb_i32(kb, 16), ""), LLVMBuildAdd(b, x.g, kb_i32(kb, h * 8), ""), "");
    rowoff[h] = LLVMBuildMul(b, kb_zext64(kb, rowi[h]), kb_i64(kb, 4), "");
  }
  kb_if_t f = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, x.c, kb_i32(kb, 0), ""), "lsum");
  for (int h = 0; h < 2; h++)
    kb_store(kb, st.l[h], kb_byte_ptr(kb, sums, LLVMBuildAdd(b, mine, rowoff[h], "")), 4);
  kb_endif(kb, &f);
  T->barrier(kb);
  for (int h = 0; h < 2; h++) {
    LLVMValueRef l = f32c(kb, 0.0);
    for (int w = 0; w < x.W; w++) /* every warp's sum, in a fixed order: the same l in each */
      l = LLVMBuildFAdd(b, l, kb_load(kb, kb->f32, kb_byte_ptr(kb, sums, LLVMBuildAdd(b, kb_i64(kb, (long long)w * x.HC * 4), rowoff[h], "")), 4), "l");
    LLVMValueRef first = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntEQ, x.c, kb_i32(kb, 0), ""),
                                      LLVMBuildICmp(b, LLVMIntEQ, x.part, kb_i32(kb, 0), ""), "");
    LLVMValueRef dim0 = LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, x.part), kb_i64(kb, (long long)x.DV / x.W), ""),
                                     LLVMBuildMul(b, kb_zext64(kb, x.c), kb_i64(kb, 2), ""), "dim0");
    LLVMValueRef pr[NT2_MAX][2];
    for (int j = 0; j < x.NT2; j++)
      pr[j][0] = st.acc[j][h * 2], pr[j][1] = st.acc[j][h * 2 + 1];
    head_out(kb, k, x.t, LLVMBuildAdd(b, h0, rowi[h], "head"), st.m[h], l, pr, x.NT2, dim0, first, NULL, NULL);
  }
  return 0;
}


/* ---- the warpgroup form (tile.matrix where the target has wgmma) -----------
 *
 * One CTA per (token, 64 heads), in three roles (dsv4_abi.h fixes the
 * shape and the shared memory).  dsv4_decode_wg_producers() producer warps
 * find each tile's 64 K rows and dequantize them with the gathers'
 * layout-driven code straight from the cache into one of two bf16 K tiles,
 * laid out for the matrix units (128-byte swizzled atoms), while two
 * consumer warpgroups compute the tile before it (FlashMLA's split of the
 * sparse decode's math warpgroups):
 *
 *   lead:     S = q K^T                    (wgmma m64n64k16, q and K from shared memory)
 *             online softmax, base 2 (no maxima cross warpgroups)
 *             P (hi + lo bf16 parts, as in the warp form) and each row's
 *             rescale factor -> shared memory, for the follower
 *             O_lead += P V[:, 0 .. LEAD_DIMS)        (wgmma m64n256k16, m64n128k16 in 512-thread CTAs;
 *                                                      V N-major: the K tile itself)
 *   follower: O_follow *= the lead's factors; O_follow += P V[:, LEAD_DIMS .. 512)
 *
 * so the follower's P V of tile i runs beside the lead's q K^T and softmax
 * of tile i + 1.  Named barriers carry the hand-offs: FULL[b] (producers
 * arrive, the lead waits), EMPTY[b] (both consumer warpgroups arrive, the
 * producers wait, from the third tile on), PREADY[b] / PFREE[b] (P buffer
 * b: the lead publishes it, the follower hands it back), CONS (the rows'
 * final m and l).  In CTA pairs (tile.pair: a token's two 64-head CTAs as
 * a cluster of two) each CTA's producers dequantize half of every tile's
 * rows into their own K buffer, and one thread copies that half into the
 * other CTA's asynchronously (FlashMLA's "crossover"); FULL and EMPTY are
 * then barrier objects in shared memory: FULL waits for this CTA's
 * producers and the other CTA's copy, EMPTY counts both CTAs' consumer
 * warps.  The accumulators stay in registers across tiles; each warpgroup
 * writes its dims at the end through the same head_out as the warp form,
 * finished rows staged in shared memory and copied out by the producers. */
enum {
  WG_BAR_FULL = 1, WG_BAR_EMPTY = 3, WG_BAR_CONS = 5, WG_BAR_PROD = 6, WG_BAR_PREADY = 7, WG_BAR_PFREE = 9, WG_BAR_OUT = 11,
  /* V dims of the lead's P V, the follower taking the rest (dsv4_abi.h:
   * smaller shares for the lead measured no faster) */
  WG_LEAD_DIMS = DSV4_DECODE_WG_LEAD_DIMS,
  WG_NB_MAX = (DSV4_DECODE_WG_VDIM - WG_LEAD_DIMS) / 8 > WG_LEAD_DIMS / 8 ? (DSV4_DECODE_WG_VDIM - WG_LEAD_DIMS) / 8 : WG_LEAD_DIMS / 8
};
#define WG_LAZY 8.0 /* base-2 headroom of the lazy running max */

typedef struct {
  const dsv4_kernel *k;
  int D, HC, threads, np; /* np: producer threads */
  LLVMValueRef qs, ks, ps, red, vm, mb; /* shared regions */
  LLVMValueRef sinks;                     /* red's third slot: the rows' sinks (read with q) */
  LLVMValueRef tid, t, lo, hi;
  LLVMValueRef rank, peer; /* i32: this CTA's rank in its pair, the other's */
  int pair;                /* tile.pair: launched as pairs of CTAs */
  LLVMValueRef n[2], ntiles[2];
} wgd;

static long long wg_kbytes(const wgd *x) { return (long long)TILE * x->D * 2; }

/* Buffer buf (i32 0/1) of a double-buffered shared region of `bytes` each. */
static LLVMValueRef wg_buf(dsv4_kb *kb, LLVMValueRef region, LLVMValueRef buf, long long bytes)
{
  return kb_byte_ptr(kb, region, LLVMBuildMul(kb->b, kb_zext64(kb, buf), kb_i64(kb, bytes), ""));
}
#define WG_PBYTES (DSV4_DECODE_WG_HEADS * TILE * 2) /* one P part */

/* bar.sync (arrive 0) or bar.arrive (arrive 1) on barrier base + buf (buf
 * i32 0 or 1, uniform: the barrier id must be an immediate). */
static void wg_bar(dsv4_kb *kb, int arrive, int base, LLVMValueRef buf, int threads)
{
  void (*f)(dsv4_kb *, int, int) = arrive ? kb->t->bar_arrive : kb->t->bar_sync;
  kb_if_t g = kb_if(kb, LLVMBuildICmp(kb->b, LLVMIntEQ, buf, kb_i32(kb, 0), ""), "bar0");
  f(kb, base, threads);
  kb_else(kb, &g);
  f(kb, base + 1, threads);
  kb_endif(kb, &g);
}

/* The pair's hand-offs are barrier objects in shared memory (mb): FULL[b]
 * completes when this CTA's producers have stored their half of tile i
 * into K buffer b = i & 1 and the other CTA's copy of its half has landed,
 * EMPTY[b] when both CTAs' consumers have finished reading it. */
enum { WG_MB_FULL = 0, WG_MB_EMPTY = 2, WG_MBARS = 4 };

static LLVMValueRef wg_mbar(dsv4_kb *kb, const wgd *x, int base, LLVMValueRef buf)
{
  return kb_byte_ptr(kb, x->mb, LLVMBuildMul(kb->b, kb_zext64(kb, LLVMBuildAdd(kb->b, buf, kb_i32(kb, base), "")),
                                             kb_i64(kb, 8), ""));
}

/* The parity of the phase of tile i's buffer that tile i (back 0) or tile
 * i - 2 (back 1) completes: its (i - lo) / 2-th use. */
static LLVMValueRef wg_parity(dsv4_kb *kb, const wgd *x, LLVMValueRef i, int back)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef u = LLVMBuildLShr(b, LLVMBuildSub(b, i, x->lo, ""), kb_i32(kb, 1), "");
  return LLVMBuildAnd(b, LLVMBuildAdd(b, u, kb_i32(kb, back), ""), kb_i32(kb, 1), "parity");
}

/* Arrive on barrier base + buf here and in the other CTA of the pair. */
static void wg_release(dsv4_kb *kb, const wgd *x, int base, LLVMValueRef buf)
{
  LLVMValueRef m = wg_mbar(kb, x, base, buf);
  kb->t->mbar_arrive(kb, m, NULL);
  kb->t->mbar_arrive(kb, m, x->peer);
}

/* Tile i's list and the producer thread's coordinates. */
typedef struct {
  tile_list l;
  LLVMValueRef lane, local; /* i32: lane in a row, row in a pass */
  int per, passes;          /* rows a pass, passes a tile */
} wgtile;

static wgtile wg_tile(dsv4_kb *kb, const wgd *x, LLVMValueRef i, LLVMValueRef h)
{
  LLVMBuilderRef b = kb->b;
  wgtile r;
  int lanes = x->D / x->k->tile.values_per_thread, parts = h ? 2 : 1; /* h: as in wg_produce */
  r.per = x->np / lanes, r.passes = TILE / parts / r.per;
  LLVMValueRef ptid = LLVMBuildSub(b, x->tid, kb_i32(kb, 256), "ptid");
  r.lane = LLVMBuildURem(b, ptid, kb_i32(kb, lanes), ""), r.local = LLVMBuildUDiv(b, ptid, kb_i32(kb, lanes), "");
  if (h)
    r.local = LLVMBuildAdd(b, r.local, LLVMBuildMul(b, h, kb_i32(kb, TILE / parts), ""), "");
  r.l = pick_list(kb, i, x->n, x->ntiles);
  return r;
}

/* The producer thread's row j of pass u. */
static LLVMValueRef wg_row(dsv4_kb *kb, const wgtile *r, int u)
{
  return LLVMBuildAdd(kb->b, kb_i32(kb, u * r->per), r->local, "j");
}

/* Tile i's indices of this producer thread's rows (-1 past the list), all
 * loads in flight together (measured 9% faster than each group loading its
 * own; loading them a tile ahead, carried by the loop, 10% slower). */
static void wg_indices(dsv4_kb *kb, const wgd *x, const wgtile *r, LLVMValueRef *idx)
{
  LLVMBuilderRef b = kb->b;
  const tile_list *l = &r->l;
  LLVMValueRef ibase = LLVMBuildMul(b, kb_zext64(kb, x->t), kb_sext64(kb, l->topk), "");
  for (int u = 0; u < r->passes; u++) {
    LLVMValueRef p = LLVMBuildAdd(b, LLVMBuildMul(b, l->lt, kb_i32(kb, TILE), ""), wg_row(kb, r, u), "pos");
    LLVMValueRef want = LLVMBuildICmp(b, LLVMIntSLT, p, l->n, "");
    LLVMValueRef ioff = LLVMBuildMul(b, LLVMBuildAdd(b, ibase, kb_zext64(kb, p), ""), kb_i64(kb, 4), "");
    idx[u] = kb_load_if(kb, want, kb->i32, l->ind, ioff, 4, kb_i32(kb, -1));
  }
}

/* What the producer does between its tile's loads and its first store
 * into the K buffer: wait until the buffer is free (its EMPTY hand-off, from
 * the third tile on), then write the validity words of the tile's rows
 * tok[0 .. n). */
typedef struct {
  const wgd *x;
  LLVMValueRef i, h, buf, lane;
  const dsv4_lane_token *tok;
  int n;
} wg_free_wait;

static void wg_await_free(dsv4_kb *kb, void *arg)
{
  wg_free_wait *w = arg;
  LLVMBuilderRef b = kb->b;
  const wgd *x = w->x;
  kb_if_t fw = kb_if(kb, LLVMBuildICmp(b, LLVMIntSGE, w->i, LLVMBuildAdd(b, x->lo, kb_i32(kb, 2), ""), ""), "wait");
  if (w->h)
    kb->t->mbar_wait(kb, wg_mbar(kb, x, WG_MB_EMPTY, w->buf), wg_parity(kb, x, w->i, 1));
  else
    wg_bar(kb, 0, WG_BAR_EMPTY, w->buf, x->threads);
  kb_endif(kb, &fw);
  kb_if_t f = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, w->lane, kb_i32(kb, 0), ""), "vm");
  for (int u = 0; u < w->n; u++) {
    LLVMValueRef j = LLVMBuildTrunc(b, w->tok[u].out_index, kb->i32, ""); /* (the row, as wg_produce set it) */
    LLVMValueRef vo = LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, w->buf, kb_i32(kb, TILE), ""), j, ""), kb_i32(kb, 4), "");
    kb_store(kb, LLVMBuildZExt(b, w->tok[u].valid, kb->i32, ""), kb_byte_ptr(kb, x->vm, kb_zext64(kb, vo)), 4);
  }
  kb_endif(kb, &f);
}

/* Tile i + 1's rows (this producer thread's lane of them) into the L2, so
 * that their loads in the next turn of the loop are L2 hits: a row's data
 * lines spread over its first lanes, one each (a row of more lines than
 * lanes leaves its last ones out: a hint, never a fault), the last lane
 * its scale row's line when the scales sit at the block's tail and that
 * lane is free.  idx: tile i + 1's indices, as wg_indices loads them. */
static void wg_prefetch(dsv4_kb *kb, const wgd *x, const wgtile *r, const LLVMValueRef *idx)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_layout *L = &x->k->layout;
  const tile_list *l = &r->l;
  int lines = (L->row_bytes + 127) / 128 + 1; /* a row not aligned to 128 bytes spans one line more */
  int lanes = x->D / x->k->tile.values_per_thread, tail = L->scale_place == DSV4_SCALES_BLOCK_TAIL;
  LLVMValueRef dl = LLVMBuildICmp(b, LLVMIntULT, r->lane, kb_i32(kb, lines), "");
  LLVMValueRef sl = LLVMBuildICmp(b, LLVMIntEQ, r->lane, kb_i32(kb, lanes - 1), "");
  LLVMValueRef at = LLVMBuildMul(b, kb_zext64(kb, r->lane), kb_i64(kb, 128), "");
  at = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntUGT, at, kb_i64(kb, L->row_bytes - 1), ""), kb_i64(kb, L->row_bytes - 1), at, "");
  for (int u = 0; u < r->passes; u++) {
    LLVMValueRef id = kb_sext64(kb, idx[u]);
    LLVMValueRef want = LLVMBuildAnd(b, row_valid(kb, id, l->nb, l->bs), tail && lanes - 1 >= lines ? LLVMBuildOr(b, dl, sl, "") : dl, "");
    kb_if_t f = kb_if(kb, want, "prefetch");
    LLVMValueRef blk, row;
    kb_udivrem_fast(kb, id, l->bs, &blk, &row);
    LLVMValueRef base = kb_byte_ptr(kb, l->cache, LLVMBuildMul(b, blk, l->stride, ""));
    LLVMValueRef off = LLVMBuildAdd(b, LLVMBuildMul(b, row, kb_i64(kb, L->row_bytes), ""), at, "");
    if (tail && lanes - 1 >= lines)
      off = LLVMBuildSelect(b, sl, tail_scale_offset(kb, L, l->bs, row), off, "");
    kb->t->prefetch_l2(kb, kb_byte_ptr(kb, base, off));
    kb_endif(kb, &f);
  }
}

/* Producer: tile i's rows into K buffer (i & 1), zeros for rows past the
 * list or with bad indices (vm says which are valid).  h NULL: all of
 * them; else half h (i32 0/1: rows 32h .. 32h + 31), which wg_producer
 * then copies into the other CTA of the pair.  The tile's index and row
 * loads go out before the wait for the buffer (wg_await_free). */
static void wg_produce(dsv4_kb *kb, const wgd *x, LLVMValueRef i, LLVMValueRef h)
{
  LLVMBuilderRef b = kb->b;
  wgtile r = wg_tile(kb, x, i, h);
  const tile_list *l = &r.l;
  LLVMValueRef idx[TILE];
  wg_indices(kb, x, &r, idx);
  /* tile.prefetch: tile i + 1's indices now (loaded again next turn: carried
   * by the loop instead, they held it up and measured 7% slower), its rows
   * into the L2 once this tile is stored; the last tile's own again */
  int pf = x->k->tile.prefetch && kb->t->prefetch_l2;
  wgtile r1 = r;
  LLVMValueRef idx1[TILE];
  if (pf) {
    LLVMValueRef i1 = LLVMBuildAdd(b, i, kb_i32(kb, 1), "");
    i1 = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, i1, x->hi, ""), i1, i, "");
    r1 = wg_tile(kb, x, i1, h);
    wg_indices(kb, x, &r1, idx1);
  }
  LLVMValueRef buf = LLVMBuildAnd(b, i, kb_i32(kb, 1), "");
  LLVMValueRef kbuf = wg_buf(kb, x->ks, buf, wg_kbytes(x));
  enum { GROUP = 4 }; /* tokens a thread loads before converting (2 measured 2-4% slower, 1 slower still) */
  dsv4_lane_token tok[TILE] = {{0}};
  LLVMValueRef slot[TILE];
  for (int u = 0; u < r.passes; u++) { /* (validity first, then the divisions: 40% fewer spills) */
    LLVMValueRef id = kb_sext64(kb, idx[u]);
    tok[u].valid = row_valid(kb, id, l->nb, l->bs);
    slot[u] = LLVMBuildSelect(b, tok[u].valid, id, kb_i64(kb, 0), "");
  }
  for (int u = 0; u < r.passes; u++) {
    LLVMValueRef j = wg_row(kb, &r, u), blk, row;
    kb_udivrem_fast(kb, slot[u], l->bs, &blk, &row);
    tok[u].blk = kb_byte_ptr(kb, l->cache, LLVMBuildMul(b, blk, l->stride, ""));
    tok[u].row = row;
    tok[u].write = LLVMConstInt(kb->i1, 1, 0); /* every row: invalid ones as zeros */
    tok[u].out_row = kbuf;
    tok[u].out_sw = 128, tok[u].out_rows = TILE;
    tok[u].out_index = kb_zext64(kb, j);
  }
  /* in pairs the wait goes between the first group's loads and its stores;
   * alone before them (its four rows' loads held across the wait spilled,
   * and the buffer is mostly free by then) */
  wg_free_wait w = {.x = x, .i = i, .h = h, .buf = buf, .lane = r.lane, .tok = tok, .n = r.passes};
  if (!h)
    wg_await_free(kb, &w);
  dsv4_kernel kd = *x->k;
  kd.tile.streaming = 0; /* two head groups read the same rows: keep them in the caches */
  for (int u0 = 0; u0 < r.passes; u0 += GROUP)
    dsv4_emit_dequant_tokens_split(kb, &kd, r.lane, l->bs, f32c(kb, 1.0), &tok[u0], r.passes - u0 < GROUP ? r.passes - u0 : GROUP,
                                   h && u0 == 0 ? wg_await_free : NULL, &w);
  if (pf)
    wg_prefetch(kb, x, &r1, idx1);
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
static void wg_empty(dsv4_kb *kb, const wgd *x, LLVMValueRef i, LLVMValueRef buf)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_target_ir *T = kb->t;
  kb_if_t fe = kb_if(kb, LLVMBuildICmp(b, LLVMIntSLT, LLVMBuildAdd(b, i, kb_i32(kb, 2), ""), x->hi, ""), "empty");
  if (x->pair) {
    T->warp_sync(kb);
    kb_if_t f0 = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildAnd(b, x->tid, kb_i32(kb, 31), ""), kb_i32(kb, 0), ""), "lane0");
    wg_release(kb, x, WG_MB_EMPTY, buf);
    kb_endif(kb, &f0);
  } else
    wg_bar(kb, 1, WG_BAR_EMPTY, buf, x->threads);
  kb_endif(kb, &fe);
}

/* O (this warpgroup's nb blocks of dims) rescaled by corr[h] for its rows, skipped
 * by a warp none of whose rows moved (vote_any; without it, always). */
static void wg_rescale(dsv4_kb *kb, LLVMValueRef (*o)[4], int nb, const LLVMValueRef *corr)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef moved = LLVMBuildOr(b, LLVMBuildFCmp(b, LLVMRealUNE, corr[0], f32c(kb, 1.0), ""),
                                   LLVMBuildFCmp(b, LLVMRealUNE, corr[1], f32c(kb, 1.0), ""), "moved");
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

/* O += P V over V dims d0 .. d0 + 8 nb of K buffer kbuf: P's lo part then
 * its hi part (P buffer pb), 4 k-steps each; products of at most 256
 * columns (128 in CTAs of over 384 threads), all in flight before the
 * wait. */
static void wg_pv(dsv4_kb *kb, const wgd *x, LLVMValueRef pb, LLVMValueRef kbuf, int d0, int nb, LLVMValueRef (*o)[4])
{
  /* ptxas compiles every instruction within the launch's register cap
   * (65536 / threads), whatever setmaxnreg grants the code around it: at
   * 512 threads (128) an m64n256 product's 128 accumulators do not fit
   * beside its operands ("insufficient registers"), m64n128 ones do */
  const int CHUNK = 65536 / x->threads >= 160 ? 256 : 128;
  LLVMValueRef O[4 * WG_NB_MAX];
  int parts = 0, dims = 8 * nb;
  for (int c0 = 0; c0 < dims; c0 += CHUNK, parts++) {
    int n = dims - c0 < CHUNK ? dims - c0 : CHUNK;
    LLVMValueRef A[8], B[8];
    LLVMValueRef vcols = kb_byte_ptr(kb, kbuf, kb_i64(kb, (long long)(d0 + c0) / 64 * TILE * 128));
    for (int q = 0; q < 2; q++)
      for (int ks = 0; ks < TILE / 16; ks++) {
        A[q * 4 + ks] = kb_byte_ptr(kb, pb, kb_i64(kb, (1 - q) * WG_PBYTES + ks * 32));
        B[q * 4 + ks] = kb_byte_ptr(kb, vcols, kb_i64(kb, (long long)ks * 16 * 128));
      }
    for (int j = 0; j < n / 8; j++)
      for (int e = 0; e < 4; e++)
        O[4 * (c0 / 8 + j) + e] = o[c0 / 8 + j][e];
    kb_wgmma pv = {KB_MMA_BF16, n, 2 * TILE / 16, 128, 1, TILE * 128, 1, 0};
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

/* The lead warpgroup (0; rowi the lane's two rows of the 64 heads, c its
 * column pair in the quad): tiles [lo, hi) folded into the state (m, l, O
 * over V dims [0, LEAD_DIMS)).  Per
 * tile it alone computes S = q K^T over all 64 rows (wgmma m64n64k16: q is
 * read from shared memory once a tile, where two 32-row halves read it
 * twice and were bound by shared-memory bandwidth), the softmax, and P
 * (hi + lo) with each row's rescale factor for the follower; then its own
 * half of P V.  No maxima cross between warpgroups, so the follower's P V
 * of tile i runs beside the lead's q K^T and softmax of tile i + 1
 * (FlashMLA's split of the sparse decode's two math warpgroups). */
static void wg_lead(dsv4_kb *kb, const wgd *x, const LLVMValueRef *rowi, LLVMValueRef c, LLVMValueRef scale2,
                    wgstate *st)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_target_ir *T = kb->t;
  int D = x->D, HC = x->HC;
  LLVMValueRef init[KB_LOOP_MAX_VARS];
  wg_pack(st, init);
  kb_loop_t loop;
  kb_for(kb, &loop, x->lo, x->hi, 4 + 4 * st->nb, init);
  wgstate cur = {.nb = st->nb}, nx = {.nb = st->nb};
  wg_unpack(&cur, loop.vars);
  LLVMValueRef i = loop.iv, buf = LLVMBuildAnd(b, i, kb_i32(kb, 1), "buf");
  LLVMValueRef kbuf = wg_buf(kb, x->ks, buf, wg_kbytes(x));
  if (x->pair)
    T->mbar_wait(kb, wg_mbar(kb, x, WG_MB_FULL, buf), wg_parity(kb, x, i, 0));
  else
    wg_bar(kb, 0, WG_BAR_FULL, buf, 128 + x->np); /* the producers and the lead */

  /* S = q K^T for the tile's 64 rows */
  LLVMValueRef A[32], B[32], S[32];
  for (int ks = 0; ks < D / 16; ks++) {
    A[ks] = kb_byte_ptr(kb, x->qs, wg_at(kb, HC, 0, ks * 32));
    B[ks] = kb_byte_ptr(kb, kbuf, wg_at(kb, TILE, 0, ks * 32));
  }
  kb_wgmma qk = {KB_MMA_BF16, TILE, D / 16, 128, 0, 0, 0, 0};
  T->wgmma(kb, &qk, A, B, S);
  T->wgmma_wait(kb, 0, S, 32);

  /* scores in base 2, -inf for rows without a valid index; row maxima over
   * the quad (the whole tile) */
  LLVMValueRef col0 = LLVMBuildMul(b, c, kb_i32(kb, 2), "col0");
  LLVMValueRef vbase = wg_buf(kb, x->vm, buf, TILE * 4);
  LLVMValueRef mx[2], rowv[2][TILE / 4];
  for (int j = 0; j < TILE / 8; j++) {
    LLVMValueRef col = LLVMBuildAdd(b, col0, kb_i32(kb, 8 * j), "");
    LLVMValueRef okw = kb_load(kb, kb->i64, kb_byte_ptr(kb, vbase, LLVMBuildMul(b, kb_zext64(kb, col), kb_i64(kb, 4), "")), 8);
    for (int e = 0; e < 2; e++) {
      LLVMValueRef ok = LLVMBuildTrunc(b, LLVMBuildLShr(b, okw, kb_i64(kb, 32 * e), ""), kb->i32, "");
      ok = LLVMBuildICmp(b, LLVMIntNE, ok, kb_i32(kb, 0), "");
      for (int h = 0; h < 2; h++) {
        LLVMValueRef v = LLVMBuildFMul(b, S[4 * j + 2 * h + e], scale2, "");
        S[4 * j + 2 * h + e] = rowv[h][2 * j + e] = LLVMBuildSelect(b, ok, v, f32c(kb, -INFINITY), "");
      }
    }
  }
  for (int h = 0; h < 2; h++)
    mx[h] = fold_tree(kb, rowv[h], TILE / 4, 0);
  /* The running max m only moves when a tile's max exceeds it by more than
   * WG_LAZY (base 2): scores then stay below 2^WG_LAZY relative to m, l and
   * O are kept relative to the same m, and lse = m + log2 l is the same
   * value.  Most tiles then leave O as it is, and a warp skips its
   * multiplications when none of its rows moved (FlashAttention-4's lazy
   * rescaling). */
  LLVMValueRef corr[2];
  for (int h = 0; h < 2; h++) {
    mx[h] = quad_fold(kb, mx[h], 0);
    LLVMValueRef grow = LLVMBuildFCmp(b, LLVMRealOGT, mx[h], LLVMBuildFAdd(b, cur.m[h], f32c(kb, WG_LAZY), ""), "grow");
    LLVMValueRef mn = LLVMBuildSelect(b, grow, mx[h], cur.m[h], "");
    LLVMValueRef mu = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOEQ, mn, f32c(kb, -INFINITY), ""), f32c(kb, 0.0), mn, "");
    corr[h] = kb_exp2(kb, LLVMBuildFSub(b, cur.m[h], mu, ""));
    LLVMValueRef pv[TILE / 4];
    for (int j = 0; j < TILE / 8; j++)
      for (int e = 0; e < 2; e++)
        S[4 * j + 2 * h + e] = pv[2 * j + e] = kb_exp2_ftz(kb, LLVMBuildFSub(b, S[4 * j + 2 * h + e], mu, ""));
    LLVMValueRef sum = fold_tree(kb, pv, TILE / 4, 1);
    nx.m[h] = mn;
    nx.l[h] = LLVMBuildFAdd(b, LLVMBuildFMul(b, cur.l[h], corr[h], ""), sum, "");
  }
  /* P buffer (i & 1) is free once the follower's P V of tile i - 2 is done */
  kb_if_t fw = kb_if(kb, LLVMBuildICmp(b, LLVMIntSGE, i, LLVMBuildAdd(b, x->lo, kb_i32(kb, 2), ""), ""), "pfree");
  wg_bar(kb, 0, WG_BAR_PFREE, buf, 256);
  kb_endif(kb, &fw);
  /* P: hi and lo parts, 128-byte rows; the rows' rescale factors beside it */
  LLVMValueRef pb = wg_buf(kb, x->ps, buf, 2 * WG_PBYTES);
  for (int h = 0; h < 2; h++)
    for (int j = 0; j < TILE / 8; j++) {
      LLVMValueRef w[2];
      kb_f32x2_to_bf16_split(kb, S[4 * j + 2 * h], S[4 * j + 2 * h + 1], &w[0], &w[1]);
      LLVMValueRef col = LLVMBuildAdd(b, col0, kb_i32(kb, 8 * j), "");
      LLVMValueRef off = kb_mma_offset(kb, 128, HC, kb_zext64(kb, rowi[h]), LLVMBuildMul(b, kb_zext64(kb, col), kb_i64(kb, 2), ""));
      for (int q = 0; q < 2; q++)
        kb_store(kb, w[q], kb_byte_ptr(kb, pb, LLVMBuildAdd(b, off, kb_i64(kb, q * WG_PBYTES), "")), 4);
    }
  LLVMValueRef cb = wg_buf(kb, x->red, buf, HC * 4);
  kb_if_t fc = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, c, kb_i32(kb, 0), ""), "corr");
  for (int h = 0; h < 2; h++)
    kb_store(kb, corr[h], kb_byte_ptr(kb, cb, LLVMBuildMul(b, kb_zext64(kb, rowi[h]), kb_i64(kb, 4), "")), 4);
  kb_endif(kb, &fc);
  T->fence_proxy_async(kb);
  wg_bar(kb, 1, WG_BAR_PREADY, buf, 256);
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

/* The follower warpgroup (1; rowi as for the lead): per tile, once the
 * lead has published P, O over V dims [LEAD_DIMS, 512) rescaled by the
 * lead's factors, then its share of P V. */
static void wg_follow(dsv4_kb *kb, const wgd *x, const LLVMValueRef *rowi, wgstate *st)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef init[KB_LOOP_MAX_VARS];
  wg_pack(st, init);
  kb_loop_t loop;
  kb_for(kb, &loop, x->lo, x->hi, 4 + 4 * st->nb, init);
  wgstate cur = {.nb = st->nb};
  wg_unpack(&cur, loop.vars);
  LLVMValueRef i = loop.iv, buf = LLVMBuildAnd(b, i, kb_i32(kb, 1), "buf");
  LLVMValueRef kbuf = wg_buf(kb, x->ks, buf, wg_kbytes(x));
  wg_bar(kb, 0, WG_BAR_PREADY, buf, 256);
  LLVMValueRef cb = wg_buf(kb, x->red, buf, x->HC * 4), corr[2];
  for (int h = 0; h < 2; h++)
    corr[h] = kb_load(kb, kb->f32, kb_byte_ptr(kb, cb, LLVMBuildMul(b, kb_zext64(kb, rowi[h]), kb_i64(kb, 4), "")), 4);
  wg_rescale(kb, cur.o, cur.nb, corr);
  LLVMValueRef pb = wg_buf(kb, x->ps, buf, 2 * WG_PBYTES);
  wg_pv(kb, x, pb, kbuf, WG_LEAD_DIMS, cur.nb, cur.o);
  kb_if_t ff = kb_if(kb, LLVMBuildICmp(b, LLVMIntSLT, LLVMBuildAdd(b, i, kb_i32(kb, 2), ""), x->hi, ""), "pfree");
  wg_bar(kb, 1, WG_BAR_PFREE, buf, 256);
  kb_endif(kb, &ff);
  wg_empty(kb, x, i, buf);
  LLVMValueRef next[KB_LOOP_MAX_VARS];
  wg_pack(&cur, next);
  kb_for_end(kb, &loop, next);
  wg_unpack(st, loop.vars);
}

/* The producers' loop: tile after tile into the K buffers (h: as in
 * wg_produce), each once both CTAs' consumers have released it. */
static void wg_producer(dsv4_kb *kb, const wgd *x, LLVMValueRef h)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_target_ir *T = kb->t;
  kb_loop_t loop;
  kb_for(kb, &loop, x->lo, x->hi, 0, NULL);
  LLVMValueRef i = loop.iv, buf = LLVMBuildAnd(b, i, kb_i32(kb, 1), "");
  wg_produce(kb, x, i, h); /* (it waits for the buffer's EMPTY itself: in pairs after the tile's loads) */
  if (!h) { /* alone: named barriers (barrier objects here measured 205.9 against 187 us at V4-Pro) */
    T->fence_proxy_async(kb);
    wg_bar(kb, 1, WG_BAR_FULL, buf, 128 + x->np);
    kb_for_end(kb, &loop, NULL);
    return;
  }
  /* the producers meet; then one thread copies this CTA's half of the tile
   * (its 4 KB of each 128-byte column block, and its rows' validity words)
   * into the other CTA, completing there on FULL, and arrives here, where
   * FULL also waits for the other CTA's copies: asynchronous copies need
   * no cluster-scope fence, which the generic remote stores before them
   * paid for on every tile (measured: about a fifth of the producers' time) */
  T->fence_proxy_async(kb);
  T->bar_sync(kb, WG_BAR_PROD, x->np);
  kb_if_t f = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, x->tid, kb_i32(kb, 256), ""), "full");
  {
    LLVMValueRef mb = wg_mbar(kb, x, WG_MB_FULL, buf);
    LLVMValueRef kbuf = wg_buf(kb, x->ks, buf, wg_kbytes(x));
    LLVMValueRef half = wg_buf(kb, kbuf, h, TILE / 2 * 128); /* rows 32h .. 32h + 31 of column block 0 */
    for (int cb = 0; cb < x->D / 64; cb++) {
      LLVMValueRef p = kb_byte_ptr(kb, half, kb_i64(kb, (long long)cb * TILE * 128));
      T->copy_to_peer(kb, p, p, TILE / 2 * 128, mb, x->peer);
    }
    LLVMValueRef vp = wg_buf(kb, wg_buf(kb, x->vm, buf, TILE * 4), h, TILE / 2 * 4);
    T->copy_to_peer(kb, vp, vp, TILE / 2 * 4, mb, x->peer);
    T->mbar_expect(kb, mb, kb_i32(kb, x->D / 64 * (TILE / 2 * 128) + TILE / 2 * 4));
  }
  kb_endif(kb, &f);
  kb_for_end(kb, &loop, NULL);
}

/* Staged output rows: v_dim bf16 values and 16 bytes of padding (a row's
 * 16-byte shift spreads a warp's eight rows over all banks). */
static long long wg_stage_row(const wgd *x) { return (long long)x->k->v_dim * 2 + 16; }

/* A consumer warpgroup's output: its V dims from d0 of each of its rows,
 * with the row's (m, l) as the lead published them in ml.  The values go
 * through shared memory (the q and K regions, free once both warpgroups
 * have met on CONS after their last tile): a quad of lanes holds 16
 * contiguous bytes of a row every 8 dims, so stores straight from the
 * fragments wrote each row in 16-byte pieces, 8 rows an instruction, and
 * took 3.7-4.7 us of a CTA's time (H200, timed in the kernel).  After a barrier of both warpgroups
 * (wg_copy_out) each thread copies 16-byte chunks of whole rows: the CTA's
 * rows of out are one contiguous block.  (Split-KV partials, fp32, go
 * straight out: staged, their copy by the producers alone measured 1.5 us
 * slower at T 8.) */
static void wg_out(dsv4_kb *kb, const wgd *x, const wgstate *st, int d0, const LLVMValueRef *rowi, LLVMValueRef c,
                   LLVMValueRef h0, LLVMValueRef ml)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef first = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntEQ, c, kb_i32(kb, 0), ""), LLVMConstInt(kb->i1, d0 == 0, 0), "");
  LLVMValueRef dim0 = LLVMBuildAdd(b, kb_i64(kb, d0), LLVMBuildMul(b, kb_zext64(kb, c), kb_i64(kb, 2), ""), "dim0");
  for (int h = 0; h < 2; h++) {
    LLVMValueRef at = LLVMBuildMul(b, kb_zext64(kb, rowi[h]), kb_i64(kb, 4), "");
    LLVMValueRef m = kb_load(kb, kb->f32, kb_byte_ptr(kb, ml, at), 4);
    LLVMValueRef l = kb_load(kb, kb->f32, kb_byte_ptr(kb, ml, LLVMBuildAdd(b, at, kb_i64(kb, x->HC * 4), "")), 4);
    LLVMValueRef pr[WG_NB_MAX][2];
    for (int j = 0; j < st->nb; j++)
      pr[j][0] = st->o[j][2 * h], pr[j][1] = st->o[j][2 * h + 1];
    LLVMValueRef stage = kb_byte_ptr(kb, x->qs, LLVMBuildMul(b, kb_zext64(kb, rowi[h]), kb_i64(kb, wg_stage_row(x)), ""));
    LLVMValueRef sink = kb_load(kb, kb->f32, kb_byte_ptr(kb, x->sinks, at), 4);
    head_out(kb, x->k, x->t, LLVMBuildAdd(b, h0, rowi[h], "head"), m, l, pr, st->nb, dim0, first, stage, sink);
  }
}

/* wg_out's copy of the staged rows, by the producer warps, idle by then
 * (in the consumers' branches the copy loop made the register allocator
 * spill), once the consumers have staged them (OUT). */
static void wg_copy_out(dsv4_kb *kb, const wgd *x)
{
  LLVMBuilderRef b = kb->b;
  int DV = x->k->v_dim, np = x->np;
  LLVMValueRef h0 = LLVMBuildMul(b, kb->t->block_id(kb, 0), kb_i32(kb, x->HC), "h0");
  LLVMValueRef ptid = LLVMBuildSub(b, x->tid, kb_i32(kb, 256), "ptid");
  kb->t->bar_sync(kb, WG_BAR_OUT, x->threads);
  /* rows of DV / 8 16-byte chunks, none with split-KV (partials went straight out) */
  LLVMValueRef S = kb_arg(kb, SPLITS), H = kb_arg(kb, HEADS);
  LLVMValueRef split = LLVMBuildICmp(b, LLVMIntSGT, S, kb_i32(kb, 1), "split");
  LLVMValueRef rows0 = LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, x->t), kb_sext64(kb, H), ""), kb_zext64(kb, h0), "");
  LLVMTypeRef v4 = LLVMVectorType(kb->i32, 4);
  kb_loop_t cl;
  kb_for(kb, &cl, kb_i32(kb, 0), LLVMBuildSelect(b, split, kb_i32(kb, 0), kb_i32(kb, x->HC * (DV / 8) / np), ""), 0, NULL);
  {
    LLVMValueRef ch = LLVMBuildAdd(b, LLVMBuildMul(b, cl.iv, kb_i32(kb, np), ""), ptid, "chunk");
    LLVMValueRef row = LLVMBuildUDiv(b, ch, kb_i32(kb, DV / 8), "row");
    LLVMValueRef cc = kb_zext64(kb, LLVMBuildURem(b, ch, kb_i32(kb, DV / 8), ""));
    kb_if_t g = kb_if(kb, LLVMBuildICmp(b, LLVMIntSLT, LLVMBuildAdd(b, h0, row, ""), H, ""), "row");
    LLVMValueRef v = kb_load(kb, v4, kb_byte_ptr(kb, x->qs, LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, row), kb_i64(kb, wg_stage_row(x)), ""),
                                                                      LLVMBuildMul(b, cc, kb_i64(kb, 16), ""), "")), 16);
    LLVMValueRef oo = LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildAdd(b, rows0, kb_zext64(kb, row), ""), kb_i64(kb, (long long)DV * 2), ""),
                                   LLVMBuildMul(b, cc, kb_i64(kb, 16), ""), "");
    kb_store(kb, v, kb_byte_ptr(kb, kb_arg(kb, OUT), oo), 16);
    kb_endif(kb, &g);
  }
  kb_for_end(kb, &cl, NULL);
}

static int wg_decode(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_target_ir *T = kb->t;
  wgd x = {0};
  x.k = k, x.pair = k->tile.matrix == DSV4_MATRIX_WARPGROUP_PAIR, x.D = k->layout.dim, x.HC = k->tile.tokens_per_cta, x.threads = k->tile.threads;
  x.np = 32 * dsv4_decode_wg_producers(k->tile.matrix);
  int lanes = x.D / k->tile.values_per_thread, np = x.np, preg = dsv4_decode_wg_producer_regs(k->tile.matrix);
  int cap = 65536 / x.threads / 8 * 8; /* registers a thread at launch, which setmaxnreg redistributes */
  kb_wgmma probe = {KB_MMA_BF16, DSV4_DECODE_WG_VDIM / 2, 8, 128, 1, TILE * 128, 1, 0};
  if (!T->wgmma || !T->wgmma_wait || !T->bar_sync || !T->bar_arrive || !T->fence_proxy_async || !T->shfl_xor || !T->shfl_idx ||
      !T->set_max_regs || !T->min_ctas || T->warp != 32 || !T->wgmma(kb, &probe, NULL, NULL, NULL) ||
      (x.pair && (!T->cluster_rank || !T->cluster_rank(kb, NULL) || !T->cluster_sync || !T->mbar_init ||
                  !T->mbar_arrive || !T->mbar_wait || !T->copy_to_peer || !T->mbar_expect || !T->warp_sync ||
                  k->tile.values_per_thread / k->tile.interleave != 8)) ||
      !T->set_max_regs(kb, 0, 0) ||
      !dsv4_decode_wg_shape_ok(x.D, k->v_dim, x.HC) || x.threads != dsv4_decode_wg_threads(k->tile.matrix) ||
      np % lanes || TILE / (x.pair ? 2 : 1) % (np / lanes) || x.D / 16 > 32 ||
      4 * (DSV4_DECODE_WG_LEAD_REGS + DSV4_DECODE_WG_FOLLOW_REGS) + np / 32 * preg > cap * (x.threads / 32)) {
    dsv4_error(d, k->file, k->line, "kernel '%s': this target (%s) cannot build the warpgroup form of sparse_decode",
               k->name, kb->arch);
    return 1;
  }
  LLVMValueRef sm = kb_dyn_shared(kb);
  long long o = 0;
  x.qs = carve(kb, sm, &o, (long long)x.HC * x.D * 2);
  x.ks = carve(kb, sm, &o, 2 * wg_kbytes(&x));
  x.ps = carve(kb, sm, &o, 2 * 2 * WG_PBYTES);
  x.red = carve(kb, sm, &o, 3 * 2 * x.HC * 4);
  x.sinks = kb_byte_ptr(kb, x.red, kb_i64(kb, 2 * 2 * x.HC * 4));
  x.vm = carve(kb, sm, &o, 2 * TILE * 4);
  if (x.pair)
    x.mb = carve(kb, sm, &o, WG_MBARS * 8);
  if (shared_agrees(k, o, k->tile.matrix, d))
    return 1;
  if ((long long)x.HC * wg_stage_row(&x) > (long long)x.HC * x.D * 2 + 2 * wg_kbytes(&x) || k->v_dim % 8 ||
      x.HC * (k->v_dim / 8) % np) { /* wg_out's staging (the q and K regions) and its copy */
    dsv4_error(d, k->file, k->line, "kernel '%s': internal error: the output staging does not fit", k->name);
    return 1;
  }
  x.tid = T->thread_id(kb);
  x.t = T->block_id(kb, 1);
  kb_return_if(kb, LLVMBuildICmp(b, LLVMIntSGE, x.t, kb_arg(kb, N_TOKENS), "")); /* whole CTAs */
  LLVMValueRef h0 = LLVMBuildMul(b, T->block_id(kb, 0), kb_i32(kb, x.HC), "h0");
  LLVMValueRef H = kb_arg(kb, HEADS);
  token_tiles(kb, x.t, x.n, x.ntiles, &x.lo, &x.hi);

  LLVMValueRef cons = LLVMBuildICmp(b, LLVMIntULT, x.tid, kb_i32(kb, 256), "consumer");
  if (x.pair) { /* a cluster of two: the other CTA is rank ^ 1; barrier objects ready in both */
    T->cluster_rank(kb, &x.rank);
    x.peer = LLVMBuildXor(b, x.rank, kb_i32(kb, 1), "peer");
    kb_if_t fi = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, x.tid, kb_i32(kb, 0), ""), "init");
    for (int m = 0; m < WG_MBARS; m++) /* FULL: this CTA's producer thread (and the other's copies); EMPTY: every consumer warp */
      T->mbar_init(kb, wg_mbar(kb, &x, m, kb_i32(kb, 0)), kb_i32(kb, m < WG_MB_EMPTY ? 1 : 2 * 8));
    kb_endif(kb, &fi);
    T->cluster_sync(kb, 1);
  } /* (alone, nothing before the roles needs a CTA barrier: q is the consumers' own) */

  T->min_ctas(kb, 1); /* the register cap setmaxnreg redistributes */
  kb_if_t role = kb_if(kb, cons, "role");
  { /* consumers */
    /* q rows h0 .. h0+HC of token t (zeros past the heads), here and not
     * before the roles part, so that the producers start the first tile
     * while q arrives */
    int per_row = x.D * 2 / 16;
    LLVMValueRef qrow = LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, x.t), kb_sext64(kb, H), ""), kb_zext64(kb, h0), "");
    LLVMValueRef hv = LLVMBuildSub(b, H, h0, "");
    LLVMTypeRef v4 = LLVMVectorType(kb->i32, 4);
    /* the rows' sinks, with q, into x.sinks (wg_out reads them there):
     * read after the last tile, their round trip was on the output's
     * critical path */
    kb_if_t fk = kb_if(kb, LLVMBuildICmp(b, LLVMIntULT, x.tid, kb_i32(kb, x.HC), ""), "sinks");
    {
      LLVMValueRef head = LLVMBuildAdd(b, h0, x.tid, "");
      LLVMValueRef has = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntNE, kb_arg(kb, HAS_SINK), kb_i32(kb, 0), ""),
                                      LLVMBuildICmp(b, LLVMIntSLT, head, H, ""), "");
      kb_store(kb, kb_load_if(kb, has, kb->f32, kb_arg(kb, SINK), LLVMBuildMul(b, kb_zext64(kb, head), kb_i64(kb, 4), ""), 4,
                              f32c(kb, -INFINITY)),
               kb_byte_ptr(kb, x.sinks, LLVMBuildMul(b, kb_zext64(kb, x.tid), kb_i64(kb, 4), "")), 4);
    }
    kb_endif(kb, &fk);
    for (int it = 0; it < x.HC * per_row / 256; it++) {
      LLVMValueRef pi = LLVMBuildAdd(b, x.tid, kb_i32(kb, it * 256), "");
      LLVMValueRef r = LLVMBuildUDiv(b, pi, kb_i32(kb, per_row), ""), cb = LLVMBuildURem(b, pi, kb_i32(kb, per_row), "");
      LLVMValueRef kbyte = LLVMBuildMul(b, kb_zext64(kb, cb), kb_i64(kb, 16), "");
      LLVMValueRef src = LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildAdd(b, qrow, kb_zext64(kb, r), ""), kb_i64(kb, (long long)x.D * 2), ""), kbyte, "");
      LLVMValueRef v = kb_load_if(kb, LLVMBuildICmp(b, LLVMIntSLT, r, hv, ""), v4, kb_arg(kb, Q), src, 16, LLVMConstNull(v4));
      kb_store(kb, v, kb_byte_ptr(kb, x.qs, kb_mma_offset(kb, 128, x.HC, kb_zext64(kb, r), kbyte)), 16);
    }
    T->fence_proxy_async(kb);
    T->bar_sync(kb, WG_BAR_CONS, 256);
    int fold = 0;
    for (int i = 0; i < k->layout.nseg; i++)
      fold |= k->layout.seg[i].scale_tensor;
    LLVMValueRef scale = kb_arg(kb, SOFTMAX_SCALE);
    if (fold)
      scale = LLVMBuildFMul(b, scale, kb_arg(kb, TENSOR_SCALE), "");
    LLVMValueRef scale2 = LLVMBuildFMul(b, scale, f32c(kb, LOG2E), "scale2");
    /* the warpgroup, broadcast from lane 0 so that the compiler knows it is
     * the same in every lane: the descriptors built from it then stay in
     * uniform registers instead of being moved there at every product */
    LLVMValueRef w = LLVMBuildUDiv(b, x.tid, kb_i32(kb, 128), "");
    w = LLVMBuildBitCast(b, T->shfl_idx(kb, LLVMBuildBitCast(b, w, kb->f32, ""), kb_i32(kb, 0)), kb->i32, "wg");
    LLVMValueRef wi = LLVMBuildAnd(b, LLVMBuildUDiv(b, x.tid, kb_i32(kb, 32), ""), kb_i32(kb, 3), "wi");
    LLVMValueRef lane = LLVMBuildAnd(b, x.tid, kb_i32(kb, 31), "lane");
    LLVMValueRef g = LLVMBuildLShr(b, lane, kb_i32(kb, 2), "g"), c = LLVMBuildAnd(b, lane, kb_i32(kb, 3), "c");
    wgstate st = {.nb = WG_LEAD_DIMS / 8}, fst = {.nb = (DSV4_DECODE_WG_VDIM - WG_LEAD_DIMS) / 8};
    for (int h = 0; h < 2; h++)
      st.m[h] = fst.m[h] = f32c(kb, -INFINITY), st.l[h] = fst.l[h] = f32c(kb, 0.0);
    for (int j = 0; j < WG_NB_MAX; j++)
      for (int e = 0; e < 4; e++)
        st.o[j][e] = fst.o[j][e] = f32c(kb, 0.0);
    /* the lead folds the tiles and publishes each row's (m, l) at the end
     * (red's second slot); the follower reads them */
    LLVMValueRef ml = kb_byte_ptr(kb, x.red, kb_i64(kb, 2 * x.HC * 4)), rowi[2];
    for (int h = 0; h < 2; h++)
      rowi[h] = LLVMBuildAdd(b, LLVMBuildMul(b, wi, kb_i32(kb, 16), ""), LLVMBuildAdd(b, g, kb_i32(kb, 8 * h), ""), "row");
    LLVMValueRef c0 = LLVMBuildICmp(b, LLVMIntEQ, c, kb_i32(kb, 0), "");
    kb_if_t lead = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, w, kb_i32(kb, 0), ""), "lead");
    {
      T->set_max_regs(kb, DSV4_DECODE_WG_LEAD_REGS, DSV4_DECODE_WG_LEAD_REGS > cap);
      wg_lead(kb, &x, rowi, c, scale2, &st);
      for (int h = 0; h < 2; h++) /* (shuffles: before the branch, in every lane) */
        st.l[h] = quad_fold(kb, st.l[h], 1);
      kb_if_t fs = kb_if(kb, c0, "ml");
      for (int h = 0; h < 2; h++) {
        LLVMValueRef at = LLVMBuildMul(b, kb_zext64(kb, rowi[h]), kb_i64(kb, 4), "");
        kb_store(kb, st.m[h], kb_byte_ptr(kb, ml, at), 4);
        kb_store(kb, st.l[h], kb_byte_ptr(kb, ml, LLVMBuildAdd(b, at, kb_i64(kb, x.HC * 4), "")), 4);
      }
      kb_endif(kb, &fs);
      T->bar_sync(kb, WG_BAR_CONS, 256);
      wg_out(kb, &x, &st, 0, rowi, c, h0, ml);
    }
    kb_else(kb, &lead);
    {
      T->set_max_regs(kb, DSV4_DECODE_WG_FOLLOW_REGS, DSV4_DECODE_WG_FOLLOW_REGS > cap);
      wg_follow(kb, &x, rowi, &fst);
      T->bar_sync(kb, WG_BAR_CONS, 256);
      wg_out(kb, &x, &fst, WG_LEAD_DIMS, rowi, c, h0, ml);
    }
    kb_endif(kb, &lead);
    T->bar_arrive(kb, WG_BAR_OUT, x.threads); /* staged: the producers copy it out */
  }
  kb_else(kb, &role);
  { /* producers: fill the two K buffers ahead of the consumers */
    T->set_max_regs(kb, preg, preg > cap);
    wg_producer(kb, &x, x.pair ? x.rank : NULL); /* pairs: this CTA's half of the rows */
    wg_copy_out(kb, &x);
  }
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

/* <name>_combine: one CTA per (token, head) row merges the splits'
 * partial states, 4 dims a thread:  M = max m_z, w_z = 2^(m_z - M),
 * L = sum l_z w_z, O = sum acc_z w_z, then the row is finished as in the
 * one-CTA form. */
static void decode_combine(dsv4_kb *kb, const dsv4_kernel *k)
{
  unsigned char kinds[DSV4_MAX_ARGS];
  const char *names[DSV4_MAX_ARGS];
  int n = 0;
#define A(nm, kind) kinds[n] = DSV4_ARG_##kind, names[n++] = #nm;
  DSV4_ARGS_DECODE_COMBINE(A)
#undef A
  char name[DSV4_NAME_MAX + 16];
  snprintf(name, sizeof name, "%s_combine", k->name);
  int DV = k->v_dim, threads = dsv4_decode_combine_threads(DV);
  kb_kernel(kb, name, kinds, names, n, threads);
  /* nothing is read before the splits' kernel has finished: the runtime may
   * then launch this one as its programmatic dependent (DSV4_ENTRY_SECOND_WAITS);
   * and the next decode's splits may be placed as this grid runs */
  if (kb->t->grid_dep && kb->t->grid_dep(kb, 1)) {
    kb->entry_flags |= DSV4_ENTRY_SECOND_WAITS;
    kb->t->grid_dep(kb, 0);
  }
  LLVMBuilderRef b = kb->b;
  LLVMValueRef H = kb_sext64(kb, kb_arg(kb, C_HEADS)), S = kb_arg(kb, C_SPLITS);
  LLVMValueRef rows = LLVMBuildMul(b, kb_sext64(kb, kb_arg(kb, C_TOKENS)), H, "rows");
  LLVMValueRef row = kb_zext64(kb, kb->t->block_id(kb, 0));
  kb_return_if(kb, LLVMBuildICmp(b, LLVMIntSGE, row, rows, ""));
  LLVMValueRef tid = kb->t->thread_id(kb);
  LLVMValueRef dim = LLVMBuildMul(b, kb_zext64(kb, tid), kb_i64(kb, 4), "dim");
  LLVMValueRef in = LLVMBuildICmp(b, LLVMIntSLT, dim, kb_i64(kb, DV), "");
  LLVMValueRef slot0 = LLVMBuildMul(b, row, kb_sext64(kb, S), "");
  LLVMValueRef mlb = LLVMBuildMul(b, LLVMBuildMul(b, rows, kb_sext64(kb, S), ""), kb_i64(kb, (long long)DV * 4), "");
  LLVMTypeRef v2 = LLVMVectorType(kb->f32, 2), v4 = LLVMVectorType(kb->f32, 4);
  LLVMValueRef h = LLVMBuildSRem(b, row, H, "head");
  LLVMValueRef has = LLVMBuildICmp(b, LLVMIntNE, kb_arg(kb, C_HAS_SINK), kb_i32(kb, 0), "");
  LLVMValueRef sk = kb_load_if(kb, has, kb->f32, kb_arg(kb, C_SINK), LLVMBuildMul(b, h, kb_i64(kb, 4), ""), 4, f32c(kb, -INFINITY));
  /* One pass, COMBINE_BATCH splits at a time, every load of a batch ((m,
   * l) and acc) issued together (no load waits on another; measured no
   * faster than two passes, but simpler): M the running max, L and O the sums
   * weighted 2^(m_z - M), rescaled when M grows (from nothing: -inf, sums
   * 0, no rescale).  With up to COMBINE_BATCH splits this is the two-pass
   * sum exactly. */
  enum { COMBINE_BATCH = 8 };
  LLVMValueRef init[6] = {f32c(kb, -INFINITY), f32c(kb, 0.0), f32c(kb, 0.0), f32c(kb, 0.0), f32c(kb, 0.0), f32c(kb, 0.0)};
  kb_loop_t ls;
  kb_for(kb, &ls, kb_i32(kb, 0), S, 6, init);
  LLVMValueRef acc[COMBINE_BATCH], ml[COMBINE_BATCH], have[COMBINE_BATCH], cm = f32c(kb, -INFINITY);
  for (int u = 0; u < COMBINE_BATCH; u++) {
    LLVMValueRef z = LLVMBuildAdd(b, ls.iv, kb_i32(kb, u), "");
    have[u] = LLVMBuildICmp(b, LLVMIntSLT, z, S, "");
    LLVMValueRef slot = LLVMBuildAdd(b, slot0, kb_zext64(kb, z), "");
    LLVMValueRef aoff = LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, slot, kb_i64(kb, DV), ""), dim, ""), kb_i64(kb, 4), "");
    acc[u] = kb_load_if(kb, LLVMBuildAnd(b, in, have[u], ""), v4, kb_arg(kb, C_WORK), aoff, 16, LLVMConstNull(v4));
    LLVMValueRef none = LLVMConstVector((LLVMValueRef[]){f32c(kb, -INFINITY), f32c(kb, 0.0)}, 2);
    ml[u] = kb_load_if(kb, have[u], v2, kb_arg(kb, C_WORK), LLVMBuildAdd(b, mlb, LLVMBuildMul(b, slot, kb_i64(kb, 8), ""), ""), 8, none);
  }
  for (int u = 0; u < COMBINE_BATCH; u++)
    cm = fmax2(kb, cm, LLVMBuildExtractElement(b, ml[u], kb_i32(kb, 0), ""));
  LLVMValueRef M0 = ls.vars[0], M = fmax2(kb, M0, cm);
  LLVMValueRef ninf = f32c(kb, -INFINITY);
  LLVMValueRef Mu = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOEQ, M, ninf, ""), f32c(kb, 0.0), M, "");
  LLVMValueRef r = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOEQ, M0, ninf, ""), f32c(kb, 0.0),
                                   kb_exp2(kb, LLVMBuildFSub(b, M0, Mu, "")), "rescale");
  LLVMValueRef nx[6];
  nx[0] = M;
  for (int e = 1; e < 6; e++)
    nx[e] = LLVMBuildFMul(b, ls.vars[e], r, "");
  for (int u = 0; u < COMBINE_BATCH; u++) {
    LLVMValueRef wz = kb_exp2(kb, LLVMBuildFSub(b, LLVMBuildExtractElement(b, ml[u], kb_i32(kb, 0), ""), Mu, "")); /* (0 past S) */
    nx[1] = LLVMBuildFAdd(b, nx[1], LLVMBuildFMul(b, LLVMBuildExtractElement(b, ml[u], kb_i32(kb, 1), ""), wz, ""), "");
    for (int e = 0; e < 4; e++)
      nx[2 + e] = LLVMBuildFAdd(b, nx[2 + e], LLVMBuildFMul(b, LLVMBuildExtractElement(b, acc[u], kb_i32(kb, e), ""), wz, ""), "");
  }
  ls.step = COMBINE_BATCH;
  kb_for_end(kb, &ls, nx);
  M = ls.vars[0];
  LLVMValueRef Lsum = ls.vars[1], O[4] = {ls.vars[2], ls.vars[3], ls.vars[4], ls.vars[5]};
  int fold = 0;
  for (int i = 0; i < k->layout.nseg; i++)
    fold |= k->layout.seg[i].scale_tensor;
  LLVMValueRef lse, factor;
  finish_row(kb, M, Lsum, sk, fold ? kb_arg(kb, C_TENSOR_SCALE) : NULL, &lse, &factor);
  kb_if_t f = kb_if(kb, in, "out");
  LLVMValueRef h16[4];
  for (int e = 0; e < 4; e += 2)
    kb_f32x2_to_bf16(kb, LLVMBuildFMul(b, O[e], factor, ""), LLVMBuildFMul(b, O[e + 1], factor, ""), &h16[e]);
  LLVMValueRef o = LLVMGetUndef(LLVMVectorType(kb->i16, 4));
  for (int e = 0; e < 4; e++)
    o = LLVMBuildInsertElement(b, o, h16[e], kb_i32(kb, e), "");
  kb_store(kb, o, kb_byte_ptr(kb, kb_arg(kb, C_OUT), LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, row, kb_i64(kb, DV), ""), dim, ""), kb_i64(kb, 2), "")), 8);
  kb_endif(kb, &f);
  kb_if_t g = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, tid, kb_i32(kb, 0), ""), "lse");
  kb_store(kb, lse, kb_byte_ptr(kb, kb_arg(kb, C_LSE), LLVMBuildMul(b, row, kb_i64(kb, 4), "")), 4);
  kb_endif(kb, &g);
}

int dsv4_gen_sparse_decode(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d)
{
  if (k->tile.matrix) {
    /* The combine (which waits for this grid's end before reading) may be
     * placed as soon as every CTA has started: its launch overlaps this
     * one.  And this grid touches no memory before the grid before it in
     * the stream has finished, so the runtime may launch it as that grid's
     * programmatic dependent (DSV4_ENTRY_FIRST_WAITS): its launch then
     * overlaps the end of that grid where that grid allows it (the
     * combine, or this kernel, of the decode before). */
    if (kb->t->grid_dep && kb->t->grid_dep(kb, 0) && kb->t->grid_dep(kb, 1))
      kb->entry_flags |= DSV4_ENTRY_FIRST_WAITS;
    if (k->tile.matrix >= DSV4_MATRIX_WARPGROUP ? wg_decode(kb, k, d) : matrix_decode(kb, k, d))
      return 1;
    LLVMBuildRetVoid(kb->b); /* the module's second kernel follows; dsv4_generate ends that one */
    decode_combine(kb, k);
    return 0;
  }
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
  LLVMValueRef has = LLVMBuildICmp(b, LLVMIntNE, kb_arg(kb, HAS_SINK), kb_i32(kb, 0), "");
  LLVMValueRef sk = kb_load_if(kb, LLVMBuildAnd(b, has, live, ""), kb->f32, kb_arg(kb, SINK),
                               LLVMBuildMul(b, kb_sext64(kb, h), kb_i64(kb, 4), ""), 4, LLVMConstReal(kb->f32, -INFINITY));
  LLVMValueRef lse, factor;
  finish_row(kb, st.m, st.l, sk, fold ? kb_arg(kb, TENSOR_SCALE) : NULL, &lse, &factor);

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
