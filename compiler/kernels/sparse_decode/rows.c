/* rows.c -- what the forms of the sparse MLA decode share (shape.h):
 * finishing a row (docs/ops.md section 3's last step), the softmax scale, folds
 * across lanes, walking the two index lists tile by tile, row validity,
 * carving dynamic shared memory, and a matrix form's head output.
 *
 * Kept apart from the forms so that none of them includes another; each
 * piece here is used by at least two of portable.c, warp.c, warpgroup.c
 * and combine.c.
 */
#include <math.h>

#include "shape.h"

#define LOG2E 1.4426950408889634
#define LN2 0.6931471805599453

const sd_list sd_main = {SD_cache,        SD_indices,    SD_lens,       SD_topk,    SD_num_blocks, SD_block_size,
                         SD_block_stride, SD_indices_sb, SD_indices_ss, SD_lens_sb, SD_lens_ss};
const sd_list sd_extra = {SD_extra_cache,      SD_extra_indices,    SD_extra_lens,         SD_extra_topk,
                          SD_extra_num_blocks, SD_extra_block_size, SD_extra_block_stride, SD_extra_indices_sb,
                          SD_extra_indices_ss, SD_extra_lens_sb,    SD_extra_lens_ss};

/* i32 division by seq_q, once a CTA: t and seq_q are below 2^31 (the
 * runtime's bounds), and the forms' callers pass the same t, which LLVM
 * then computes once. */
LLVMValueRef sd_token_row(dsv4_kb *kb, LLVMValueRef t, int seq, int sb, int ss)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef sq = kb_arg(kb, seq);
  LLVMValueRef bi = LLVMBuildUDiv(b, t, sq, "entry");
  LLVMValueRef si = LLVMBuildSub(b, t, LLVMBuildMul(b, bi, sq, ""), "pos");
  return LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, bi), kb_arg(kb, sb), ""),
                      LLVMBuildMul(b, kb_zext64(kb, si), kb_arg(kb, ss), ""), "trow");
}

LLVMValueRef sd_head_at(dsv4_kb *kb, LLVMValueRef t, LLVMValueRef h, int seq, int sb, int ss, int sh, int elem)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef e =
      LLVMBuildAdd(b, sd_token_row(kb, t, seq, sb, ss), LLVMBuildMul(b, kb_sext64(kb, h), kb_arg(kb, sh), ""), "");
  return LLVMBuildMul(b, e, kb_i64(kb, elem), "");
}

LLVMValueRef sd_fmax2(dsv4_kb *kb, LLVMValueRef a, LLVMValueRef c)
{
  return LLVMBuildSelect(kb->b, LLVMBuildFCmp(kb->b, LLVMRealOGT, c, a, ""), c, a, "");
}

int sd_tensor_scaled(const dsv4_kernel *k)
{
  int fold = 0;
  for (int i = 0; i < k->layout.nseg; i++)
    fold |= k->layout.seg[i].scale_tensor;
  return fold;
}

LLVMValueRef sd_scale2(dsv4_kb *kb, const dsv4_kernel *k)
{
  LLVMValueRef scale = kb_arg(kb, SD_softmax_scale);
  if (sd_tensor_scaled(k))
    scale = LLVMBuildFMul(kb->b, scale, kb_arg(kb, SD_tensor_scale), "");
  return LLVMBuildFMul(kb->b, scale, sd_f32(kb, LOG2E), "scale2");
}

void sd_finish_row(dsv4_kb *kb, LLVMValueRef m2, LLVMValueRef l, LLVMValueRef sink, LLVMValueRef ts, LLVMValueRef *lse,
                   LLVMValueRef *factor)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef one = LLVMConstReal(kb->f32, 1.0);
  LLVMValueRef empty = LLVMBuildFCmp(b, LLVMRealOEQ, l, LLVMConstReal(kb->f32, 0.0), "empty");
  LLVMValueRef lse2 = LLVMBuildFAdd(b, m2, kb_log2(kb, l), "lse2");
  *lse = LLVMBuildSelect(b, empty, LLVMConstReal(kb->f32, INFINITY),
                         LLVMBuildFMul(b, lse2, LLVMConstReal(kb->f32, LN2), ""), "lse");
  LLVMValueRef e = kb_exp2(kb, LLVMBuildFSub(b, LLVMBuildFMul(b, sink, LLVMConstReal(kb->f32, LOG2E), ""), lse2, ""));
  LLVMValueRef f =
      LLVMBuildFMul(b, LLVMBuildFDiv(b, one, l, ""), LLVMBuildFDiv(b, one, LLVMBuildFAdd(b, one, e, ""), ""), "");
  if (ts)
    f = LLVMBuildFMul(b, f, ts, "");
  *factor = LLVMBuildSelect(b, empty, LLVMConstReal(kb->f32, 0.0), f, "factor");
}

void sd_p_words(dsv4_kb *kb, const dsv4_kernel *k, LLVMValueRef a, LLVMValueRef c, LLVMValueRef *hi, LLVMValueRef *lo)
{
  if (sd_p_parts(k) == 2) {
    kb_f32x2_to_bf16_split(kb, a, c, hi, lo);
    return;
  }
  *lo = NULL;
  *hi = kb->t->cvt_bf16x2 ? kb->t->cvt_bf16x2(kb, a, c) : NULL;
  if (*hi)
    return;
  LLVMBuilderRef b = kb->b;
  LLVMValueRef h[2];
  kb_f32x2_to_bf16(kb, a, c, h);
  *hi = LLVMBuildOr(b, LLVMBuildZExt(b, h[0], kb->i32, ""),
                    LLVMBuildShl(b, LLVMBuildZExt(b, h[1], kb->i32, ""), kb_i32(kb, 16), ""), "pw");
}

LLVMValueRef sd_quad_fold(dsv4_kb *kb, LLVMValueRef v, int add)
{
  for (int m = 1; m <= 2; m *= 2) {
    LLVMValueRef o = kb->t->shfl_xor(kb, v, m);
    v = add ? LLVMBuildFAdd(kb->b, v, o, "") : sd_fmax2(kb, v, o);
  }
  return v;
}

/* maxnum passes a NaN over unless both are NaN (a row whose scores are
 * all NaN gives NaN either way); the tree has depth log2 n where a chain
 * was n dependent steps on the softmax's critical path. */
LLVMValueRef sd_fold_tree(dsv4_kb *kb, const LLVMValueRef *v, int n, int add)
{
  LLVMValueRef t[64];
  LLVMTypeRef f2[2] = {kb->f32, kb->f32};
  for (int i = 0; i < n; i++)
    t[i] = v[i];
  for (; n > 1; n = (n + 1) / 2) {
    for (int i = 0; i < n / 2; i++) {
      LLVMValueRef ab[2] = {t[2 * i], t[2 * i + 1]};
      t[i] = add ? LLVMBuildFAdd(kb->b, ab[0], ab[1], "")
                 : kb_call(kb, "llvm.maxnum.f32", kb->f32, f2, ab, 2, LLVMCCallConv);
    }
    if (n % 2)
      t[n / 2] = t[n - 1];
  }
  return t[0];
}

/* n = min(lens[t], topk), at least 0 (lens read only when topk > 0 and
 * `has`, i1, holds: NULL for always). */
static LLVMValueRef list_len(dsv4_kb *kb, const sd_list *la, LLVMValueRef t, LLVMValueRef has)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef topk = kb_arg(kb, la->topk);
  LLVMValueRef off = LLVMBuildMul(b, sd_token_row(kb, t, SD_seq_q, la->lens_sb, la->lens_ss), kb_i64(kb, 4), "");
  LLVMValueRef lens = kb_arg(kb, la->lens);
  LLVMValueRef read = LLVMBuildICmp(b, LLVMIntSGT, topk, kb_i32(kb, 0), "");
  if (has)
    read = LLVMBuildAnd(b, read, has, "");
  LLVMValueRef n = kb_load_if(kb, read, kb->i32, lens, off, 4, kb_i32(kb, 0));
  n = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, n, topk, ""), n, topk, "n");
  return LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, n, kb_i32(kb, 0), ""), kb_i32(kb, 0), n, "");
}

/* The tiles of a list of n valid entries: ceil(n / SD_TILE). */
static LLVMValueRef list_tiles(dsv4_kb *kb, LLVMValueRef n)
{
  return LLVMBuildSDiv(kb->b, LLVMBuildAdd(kb->b, n, kb_i32(kb, SD_TILE - 1), ""), kb_i32(kb, SD_TILE), "");
}

void sd_token_tiles(dsv4_kb *kb, LLVMValueRef t, LLVMValueRef *n, LLVMValueRef *ntiles, LLVMValueRef *lo,
                    LLVMValueRef *hi)
{
  LLVMBuilderRef b = kb->b;
  const sd_list *lists[2] = {&sd_main, &sd_extra};
  for (int li = 0; li < 2; li++) {
    n[li] = list_len(kb, lists[li], t, NULL);
    ntiles[li] = list_tiles(kb, n[li]);
  }
  LLVMValueRef nt = kb_sext64(kb, LLVMBuildAdd(b, ntiles[0], ntiles[1], "nt"));
  LLVMValueRef S64 = kb_sext64(kb, kb_arg(kb, SD_splits)), z64 = kb_zext64(kb, kb->t->block_id(kb, 2));
  *lo = LLVMBuildTrunc(b, LLVMBuildSDiv(b, LLVMBuildMul(b, z64, nt, ""), S64, ""), kb->i32, "lo");
  *hi = LLVMBuildTrunc(b, LLVMBuildSDiv(b, LLVMBuildMul(b, LLVMBuildAdd(b, z64, kb_i64(kb, 1), ""), nt, ""), S64, ""),
                       kb->i32, "hi");
}

/* Token t's tiles (both lists), for thread tid < T (else -1), clamped to
 * SD_RANK_KEYS - 1. */
static LLVMValueRef rank_key(dsv4_kb *kb, LLVMValueRef t, LLVMValueRef has)
{
  LLVMBuilderRef b = kb->b;
  const sd_list *lists[2] = {&sd_main, &sd_extra};
  LLVMValueRef tiles = kb_i32(kb, 0);
  for (int li = 0; li < 2; li++)
    tiles = LLVMBuildAdd(b, tiles, list_tiles(kb, list_len(kb, lists[li], t, has)), "");
  LLVMValueRef top = kb_i32(kb, SD_RANK_KEYS - 1);
  tiles = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, tiles, top, ""), tiles, top, "");
  return LLVMBuildSelect(b, has, tiles, kb_i32(kb, -1), "key");
}

LLVMValueRef sd_shfl_i32(dsv4_kb *kb, LLVMValueRef v, LLVMValueRef lane)
{
  LLVMBuilderRef b = kb->b;
  return LLVMBuildBitCast(b, kb->t->shfl_idx(kb, LLVMBuildBitCast(b, v, kb->f32, ""), lane), kb->i32, "");
}

static LLVMValueRef popc(dsv4_kb *kb, LLVMValueRef v)
{
  return kb_call(kb, "llvm.ctpop.i32", kb->i32, &kb->i32, &v, 1, LLVMCCallConv);
}

/* The ranking itself (sd_longest_first's comment): every thread reaches
 * it with its token's key (-1 past the tokens); the token of rank `by` is
 * in slot after it. */
static void rank_tokens(dsv4_kb *kb, LLVMValueRef scratch, LLVMValueRef slot, LLVMValueRef key, LLVMValueRef tid,
                        int threads, LLVMValueRef by)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_target_ir *T = kb->t;
  const int nw = threads / 32, K = SD_RANK_KEYS;
  LLVMValueRef has = LLVMBuildICmp(b, LLVMIntSGE, key, kb_i32(kb, 0), "has");
  LLVMValueRef w = LLVMBuildLShr(b, tid, kb_i32(kb, 5), "w"), lane = LLVMBuildAnd(b, tid, kb_i32(kb, 31), "lane");
  /* cnt[w][k]: how many of warp w's tokens have key k (each warp clears
   * its own row, then the first lane of each key writes its count) */
  LLVMValueRef row = kb_byte_ptr(kb, scratch, LLVMBuildMul(b, kb_zext64(kb, w), kb_i64(kb, K * 4), ""));
  for (int h = 0; h < K / 32; h++)
    kb_store(
        kb, kb_i32(kb, 0),
        kb_byte_ptr(kb, row,
                    LLVMBuildMul(b, kb_zext64(kb, LLVMBuildAdd(b, lane, kb_i32(kb, 32 * h), "")), kb_i64(kb, 4), "")),
        4);
  T->warp_sync(kb);
  LLVMValueRef mask;
  T->match_any(kb, key, &mask);
  LLVMValueRef lt = LLVMBuildSub(b, LLVMBuildShl(b, kb_i32(kb, 1), lane, ""), kb_i32(kb, 1), "lanemask_lt");
  LLVMValueRef pos = popc(kb, LLVMBuildAnd(b, mask, lt, "")); /* same-key lanes before this one */
  LLVMValueRef kk = LLVMBuildAnd(b, key, kb_i32(kb, K - 1), "kk");
  kb_if_t fw = kb_if(kb, LLVMBuildAnd(b, has, LLVMBuildICmp(b, LLVMIntEQ, pos, kb_i32(kb, 0), ""), ""), "count");
  kb_store(kb, popc(kb, mask), kb_byte_ptr(kb, row, LLVMBuildMul(b, kb_zext64(kb, kk), kb_i64(kb, 4), "")), 4);
  kb_endif(kb, &fw);
  T->barrier(kb);
  /* lane l: the totals of keys 2l and 2l + 1, then G, the tokens of
   * greater keys, by a suffix sum over the lanes; and this thread's
   * same-key tokens in the warps before its own */
  LLVMValueRef ta = kb_i32(kb, 0), tb = kb_i32(kb, 0), before = kb_i32(kb, 0);
  LLVMTypeRef v2 = LLVMVectorType(kb->i32, 2);
  LLVMValueRef pair = LLVMBuildMul(b, kb_zext64(kb, lane), kb_i64(kb, 8), "");
  for (int v = 0; v < nw; v++) {
    LLVMValueRef r = kb_byte_ptr(kb, scratch, kb_i64(kb, (long long)v * K * 4));
    LLVMValueRef t2 = kb_load(kb, v2, kb_byte_ptr(kb, r, pair), 8);
    ta = LLVMBuildAdd(b, ta, LLVMBuildExtractElement(b, t2, kb_i32(kb, 0), ""), "");
    tb = LLVMBuildAdd(b, tb, LLVMBuildExtractElement(b, t2, kb_i32(kb, 1), ""), "");
    LLVMValueRef c = kb_load(kb, kb->i32, kb_byte_ptr(kb, r, LLVMBuildMul(b, kb_zext64(kb, kk), kb_i64(kb, 4), "")), 4);
    before = LLVMBuildAdd(
        b, before, LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntULT, kb_i32(kb, v), w, ""), c, kb_i32(kb, 0), ""), "");
  }
  LLVMValueRef s = LLVMBuildAdd(b, ta, tb, ""), inc = s;
  for (int d = 1; d < 32; d *= 2) {
    LLVMValueRef src = LLVMBuildAdd(b, lane, kb_i32(kb, d), "");
    LLVMValueRef o = sd_shfl_i32(kb, inc, LLVMBuildAnd(b, src, kb_i32(kb, 31), ""));
    inc = LLVMBuildAdd(
        b, inc, LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntULT, src, kb_i32(kb, 32), ""), o, kb_i32(kb, 0), ""), "");
  }
  LLVMValueRef g_odd = LLVMBuildSub(b, inc, s, ""), g_even = LLVMBuildAdd(b, g_odd, tb, "");
  LLVMValueRef from = LLVMBuildLShr(b, kk, kb_i32(kb, 1), "");
  LLVMValueRef ge = sd_shfl_i32(kb, g_even, from), go = sd_shfl_i32(kb, g_odd, from);
  LLVMValueRef g = LLVMBuildSelect(
      b, LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, kk, kb_i32(kb, 1), ""), kb_i32(kb, 0), ""), go, ge, "");
  LLVMValueRef rank = LLVMBuildAdd(b, LLVMBuildAdd(b, g, before, ""), pos, "rank");
  kb_if_t fr = kb_if(kb, LLVMBuildAnd(b, has, LLVMBuildICmp(b, LLVMIntEQ, rank, by, ""), ""), "mine");
  kb_store(kb, tid, slot, 4);
  kb_endif(kb, &fr);
  T->barrier(kb);
}

/* The hooks the ranking needs. */
static int can_rank(dsv4_kb *kb)
{
  const dsv4_target_ir *T = kb->t;
  return T->match_any && T->match_any(kb, NULL, NULL) && T->grid_ctas && T->units && T->warp_sync && T->shfl_idx &&
         T->vote_any && kb->warp == 32;
}

LLVMValueRef sd_longest_first(dsv4_kb *kb, LLVMValueRef scratch, LLVMValueRef tid, int threads)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_target_ir *T = kb->t;
  LLVMValueRef by = T->block_id(kb, 1);
  if (!can_rank(kb) || threads % 32 || threads > 32 * 32)
    return by;
  LLVMValueRef n = kb_arg(kb, SD_n_tokens);
  LLVMValueRef go = LLVMBuildAnd(b,
                                 LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGT, n, kb_i32(kb, 1), ""),
                                              LLVMBuildICmp(b, LLVMIntSLE, n, kb_i32(kb, threads), ""), ""),
                                 LLVMBuildICmp(b, LLVMIntUGT, T->grid_ctas(kb), T->units(kb), ""), "waves");
  kb_if_t f = kb_if(kb, go, "rank");
  LLVMValueRef has = LLVMBuildICmp(b, LLVMIntSLT, tid, n, "has");
  LLVMValueRef key = rank_key(kb, tid, has);
  LLVMValueRef slot = kb_byte_ptr(kb, scratch, kb_i64(kb, (long long)threads / 32 * SD_RANK_KEYS * 4));
  kb_if_t f0 = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, tid, kb_i32(kb, 0), ""), "slot");
  kb_store(kb, by, slot, 4); /* (the permutation's thread overwrites it; this only keeps the token in range) */
  kb_endif(kb, &f0);
  /* Lists all of one tile count keep the given order, and skip the
   * ranking: each warp writes whether any of its keys differs from token
   * 0's (a vote), and after one barrier every thread reads the warps' words.
   * (The same test as one barrier that also reduces, bar.red.or, made the
   * pairs spill 60 bytes and V4-Pro 16% slower.) */
  const int nw = threads / 32;
  LLVMValueRef key0 = rank_key(kb, kb_i32(kb, 0), LLVMConstInt(kb->i1, 1, 0));
  LLVMValueRef flags = kb_byte_ptr(kb, slot, kb_i64(kb, 4));
  LLVMValueRef d = T->vote_any(kb, LLVMBuildAnd(b, has, LLVMBuildICmp(b, LLVMIntNE, key, key0, ""), ""));
  kb_if_t fs =
      kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildAnd(b, tid, kb_i32(kb, 31), ""), kb_i32(kb, 0), ""), "vote");
  kb_store(kb, LLVMBuildZExt(b, d, kb->i32, ""),
           kb_byte_ptr(kb, flags,
                       LLVMBuildMul(b, kb_zext64(kb, LLVMBuildLShr(b, tid, kb_i32(kb, 5), "")), kb_i64(kb, 4), "")),
           4);
  kb_endif(kb, &fs);
  T->barrier(kb);
  LLVMValueRef any = kb_i32(kb, 0);
  for (int v = 0; v < nw; v++)
    any = LLVMBuildOr(b, any, kb_load(kb, kb->i32, kb_byte_ptr(kb, flags, kb_i64(kb, 4 * v)), 4), "");
  kb_if_t fd = kb_if(kb, LLVMBuildICmp(b, LLVMIntNE, any, kb_i32(kb, 0), ""), "differ");
  rank_tokens(kb, scratch, slot, key, tid, threads, by);
  kb_endif(kb, &fd);
  LLVMValueRef tok = kb_load(kb, kb->i32, slot, 4);
  LLVMBasicBlockRef did = LLVMGetInsertBlock(b);
  kb_endif(kb, &f);
  return kb_phi(kb, tok, did, by, LLVMGetInstructionParent(f.br));
}

sd_tile_list sd_pick_list(dsv4_kb *kb, LLVMValueRef t, LLVMValueRef i, const LLVMValueRef *n,
                          const LLVMValueRef *ntiles)
{
  LLVMBuilderRef b = kb->b;
  sd_tile_list r;
  LLVMValueRef ex = LLVMBuildICmp(b, LLVMIntSGE, i, ntiles[0], "extra");
#define PICK(m, e) LLVMBuildSelect(b, ex, (e), (m), "")
  r.lt = PICK(i, LLVMBuildSub(b, i, ntiles[0], ""));
  r.n = PICK(n[0], n[1]);
  r.topk = PICK(kb_arg(kb, sd_main.topk), kb_arg(kb, sd_extra.topk));
  r.bs = kb_sext64(kb, PICK(kb_arg(kb, sd_main.block_size), kb_arg(kb, sd_extra.block_size)));
  r.nb = kb_sext64(kb, PICK(kb_arg(kb, sd_main.num_blocks), kb_arg(kb, sd_extra.num_blocks)));
  r.stride = PICK(kb_arg(kb, sd_main.block_stride), kb_arg(kb, sd_extra.block_stride));
  r.cache = PICK(kb_arg(kb, sd_main.cache), kb_arg(kb, sd_extra.cache));
  r.ind = PICK(kb_arg(kb, sd_main.indices), kb_arg(kb, sd_extra.indices));
  r.irow = PICK(sd_token_row(kb, t, SD_seq_q, sd_main.indices_sb, sd_main.indices_ss),
                sd_token_row(kb, t, SD_seq_q, sd_extra.indices_sb, sd_extra.indices_ss));
#undef PICK
  return r;
}

LLVMValueRef sd_row_valid(dsv4_kb *kb, LLVMValueRef idx, LLVMValueRef nb, LLVMValueRef bs)
{
  LLVMBuilderRef b = kb->b;
  return LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, idx, kb_i64(kb, 0), ""),
                      LLVMBuildICmp(b, LLVMIntSLT, idx, LLVMBuildMul(b, nb, bs, ""), ""), "valid");
}

LLVMValueRef sd_tail_scale_offset(dsv4_kb *kb, const dsv4_layout *L, LLVMValueRef bs, LLVMValueRef row)
{
  LLVMBuilderRef b = kb->b;
  return LLVMBuildAdd(b, LLVMBuildMul(b, bs, kb_i64(kb, L->row_bytes), ""),
                      LLVMBuildMul(b, row, kb_i64(kb, L->scale_row_bytes), ""), "");
}

LLVMValueRef sd_partial_pos(dsv4_kb *kb, LLVMValueRef dim)
{
  return LLVMBuildAdd(kb->b, dim, LLVMBuildAnd(kb->b, dim, kb_i64(kb, 15), ""), "pos");
}

LLVMValueRef sd_partial_dim(dsv4_kb *kb, LLVMValueRef pos)
{
  LLVMValueRef in16 = LLVMBuildAnd(kb->b, pos, kb_i64(kb, 15), "");
  return LLVMBuildSub(kb->b, pos, LLVMBuildLShr(kb->b, in16, kb_i64(kb, 1), ""), "dim");
}

/* One row's end as sd_head_out gets it, and th: the row (t * heads + head)
 * of out and lse, i64. */
typedef struct {
  LLVMValueRef head, m, l, (*acc)[2], dim0, first, stage, sink, th, orow, lrow; /* orow, lrow: out's, lse's bytes */
  int nb;
} head_row;

/* split-KV: this split's (m, l) and unnormalized acc for <name>_combine:
 * fp32 in dim order, or (tile.partials = 'bf16') rounded to bf16 with a
 * quad lane's pairs j and j + 1 (dims base + 2c + 8j + 0, 1, 8, 9: base a
 * multiple of 16, j even) packed at positions base + 4c + 8j + 0..3, so
 * that each store is 8 bytes and a quad's four fill one 32-byte sector,
 * as the fp32 pairs do.  The checker's v_dim rule (16-dim n-tile pairs a
 * part) and the warpgroups' 256 dims keep base and the pair count so. */
static void head_partial(dsv4_kb *kb, const dsv4_kernel *k, const head_row *r, LLVMValueRef H, LLVMValueRef S,
                         LLVMValueRef z)
{
  LLVMBuilderRef b = kb->b;
  int DV = k->v_dim;
  LLVMValueRef slot = LLVMBuildAdd(b, LLVMBuildMul(b, r->th, kb_sext64(kb, S), ""), kb_zext64(kb, z), "slot");
  LLVMValueRef ab =
      LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, slot, kb_i64(kb, DV), ""), r->dim0, ""), kb_i64(kb, 4), "");
  if (sd_bf16_partials(k)) { /* pairs j and j + 1 in one 8-byte store (sd_partial_pos) */
    LLVMValueRef pos = sd_partial_pos(kb, r->dim0);
    LLVMValueRef pb =
        LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, slot, kb_i64(kb, DV), ""), pos, ""), kb_i64(kb, 2), "");
    for (int j = 0; j < r->nb; j += 2) {
      LLVMValueRef h16[4], v = LLVMGetUndef(LLVMVectorType(kb->i16, 4));
      kb_f32x2_to_bf16(kb, r->acc[j][0], r->acc[j][1], &h16[0]);
      kb_f32x2_to_bf16(kb, r->acc[j + 1][0], r->acc[j + 1][1], &h16[2]);
      for (int e = 0; e < 4; e++)
        v = LLVMBuildInsertElement(b, v, h16[e], kb_i32(kb, e), "");
      kb_store(kb, v, kb_byte_ptr(kb, kb_arg(kb, SD_work), LLVMBuildAdd(b, pb, kb_i64(kb, j * 16), "")), 8);
    }
  } else
    for (int j = 0; j < r->nb; j++) {
      LLVMValueRef v = LLVMGetUndef(LLVMVectorType(kb->f32, 2));
      for (int e = 0; e < 2; e++)
        v = LLVMBuildInsertElement(b, v, r->acc[j][e], kb_i32(kb, e), "");
      kb_store(kb, v, kb_byte_ptr(kb, kb_arg(kb, SD_work), LLVMBuildAdd(b, ab, kb_i64(kb, j * 32), "")), 8);
    }
  kb_if_t g = kb_if(kb, r->first, "ml");
  LLVMValueRef rows = LLVMBuildMul(b, LLVMBuildMul(b, kb_sext64(kb, kb_arg(kb, SD_n_tokens)), kb_sext64(kb, H), ""),
                                   kb_sext64(kb, S), "");
  LLVMValueRef mo = LLVMBuildAdd(b, LLVMBuildMul(b, rows, kb_i64(kb, (long long)DV * sd_partial_bytes(k)), ""),
                                 LLVMBuildMul(b, slot, kb_i64(kb, 8), ""), "");
  LLVMValueRef v = LLVMBuildInsertElement(b, LLVMGetUndef(LLVMVectorType(kb->f32, 2)), r->m, kb_i32(kb, 0), "");
  v = LLVMBuildInsertElement(b, v, r->l, kb_i32(kb, 1), "");
  kb_store(kb, v, kb_byte_ptr(kb, kb_arg(kb, SD_work), mo), 8);
  kb_endif(kb, &g);
}

/* One CTA: the finished bf16 output (to r->stage when set) and lse.  has:
 * i1, the kernel has sinks. */
static void head_finish(dsv4_kb *kb, const dsv4_kernel *k, const head_row *r, LLVMValueRef has)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef hoff = LLVMBuildMul(b, kb_sext64(kb, r->head), kb_i64(kb, 4), "");
  LLVMValueRef sk =
      r->sink ? r->sink : kb_load_if(kb, has, kb->f32, kb_arg(kb, SD_attn_sink), hoff, 4, sd_f32(kb, -INFINITY));
  LLVMValueRef lse, factor;
  sd_finish_row(kb, r->m, r->l, sk, sd_tensor_scaled(k) ? kb_arg(kb, SD_tensor_scale) : NULL, &lse, &factor);
  LLVMValueRef ob = LLVMBuildAdd(b, r->orow, LLVMBuildMul(b, r->dim0, kb_i64(kb, 2), ""), "");
  for (int j = 0; j < r->nb; j++) {
    LLVMValueRef h16[2];
    kb_f32x2_to_bf16(kb, LLVMBuildFMul(b, r->acc[j][0], factor, ""), LLVMBuildFMul(b, r->acc[j][1], factor, ""), h16);
    LLVMValueRef wv =
        LLVMBuildOr(b, kb_zext64(kb, h16[0]), LLVMBuildShl(b, kb_zext64(kb, h16[1]), kb_i64(kb, 16), ""), "");
    LLVMValueRef at =
        r->stage ? kb_byte_ptr(kb, r->stage,
                               LLVMBuildMul(b, LLVMBuildAdd(b, r->dim0, kb_i64(kb, 8 * j), ""), kb_i64(kb, 2), ""))
                 : kb_byte_ptr(kb, kb_arg(kb, SD_out), LLVMBuildAdd(b, ob, kb_i64(kb, j * 16), ""));
    kb_store(kb, LLVMBuildTrunc(b, wv, kb->i32, ""), at, 4);
  }
  kb_if_t g = kb_if(kb, r->first, "lse");
  kb_store(kb, lse, kb_byte_ptr(kb, kb_arg(kb, SD_lse), r->lrow), 4);
  kb_endif(kb, &g);
}

/* The end of a (token, head) row for the thread holding pairs acc[j] of
 * dims dim0 + 8 j + (0, 1) (j < nb) and the row's base-2 max m and sum l:
 * with split-KV, this split's unnormalized acc and (m, l) (written by the
 * `first` thread) into the work space for <name>_combine; otherwise the
 * finished bf16 output and (first) lse.  Heads past `heads` write nothing.
 * With stage (a byte pointer to the row in shared memory) the finished
 * output values go there, at their dim's offset (2 bytes a value), for the
 * caller to copy out in whole lines; lse and split-KV partials still go
 * straight out (a partial's 8-byte pairs fill whole 32-byte sectors).
 * sink: the row's sink (f32), or NULL to read it here. */
void sd_head_out(dsv4_kb *kb, const dsv4_kernel *k, LLVMValueRef t, LLVMValueRef head, LLVMValueRef m, LLVMValueRef l,
                 LLVMValueRef (*acc)[2], int nb, LLVMValueRef dim0, LLVMValueRef first, LLVMValueRef stage,
                 LLVMValueRef sink)
{
  LLVMBuilderRef b = kb->b;
  head_row r = {
      .head = head, .m = m, .l = l, .acc = acc, .nb = nb, .dim0 = dim0, .first = first, .stage = stage, .sink = sink};
  LLVMValueRef H = kb_arg(kb, SD_heads);
  LLVMValueRef has = LLVMBuildICmp(b, LLVMIntNE, kb_arg(kb, SD_has_sink), kb_i32(kb, 0), "");
  LLVMValueRef S = kb_arg(kb, SD_splits), z = kb->t->block_id(kb, 2);
  LLVMValueRef split = LLVMBuildICmp(b, LLVMIntSGT, S, kb_i32(kb, 1), "split");
  LLVMValueRef live = LLVMBuildICmp(b, LLVMIntSLT, head, H, "");
  r.th = LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, t), kb_sext64(kb, H), ""), kb_zext64(kb, head), "");
  r.orow = sd_head_at(kb, t, head, SD_seq_q, SD_out_sb, SD_out_ss, SD_out_sh, 2);
  r.lrow = sd_head_at(kb, t, head, SD_seq_q, SD_lse_sb, SD_lse_ss, SD_lse_sh, 4);
  kb_if_t w = kb_if(kb, live, "out");
  kb_if_t sp = kb_if(kb, split, "partial");
  head_partial(kb, k, &r, H, S, z);
  kb_else(kb, &sp);
  head_finish(kb, k, &r, has);
  kb_endif(kb, &sp);
  kb_endif(kb, &w);
}

/* v[h] folded over the quad (max or add) and stored by lane c = 0 into
 * region's slot of part, at rowoff[h]. */
static void publish_rows(dsv4_kb *kb, LLVMValueRef region, LLVMValueRef part, LLVMValueRef c, int heads,
                         LLVMValueRef v[2], const LLVMValueRef rowoff[2], int add)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef mine = LLVMBuildMul(b, kb_zext64(kb, part), kb_i64(kb, (long long)heads * 4), "");
  for (int h = 0; h < 2; h++)
    v[h] = sd_quad_fold(kb, v[h], add);
  kb_if_t f = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, c, kb_i32(kb, 0), ""), "publish");
  for (int h = 0; h < 2; h++)
    kb_store(kb, v[h], kb_byte_ptr(kb, region, LLVMBuildAdd(b, mine, rowoff[h], "")), 4);
  kb_endif(kb, &f);
}

/* Part w's value of row rowoff in region (f32). */
static LLVMValueRef part_row(dsv4_kb *kb, LLVMValueRef region, int w, int heads, LLVMValueRef rowoff)
{
  return kb_load(kb, kb->f32,
                 kb_byte_ptr(kb, region, LLVMBuildAdd(kb->b, kb_i64(kb, (long long)w * heads * 4), rowoff, "")), 4);
}

void sd_publish_max(dsv4_kb *kb, LLVMValueRef red, LLVMValueRef part, LLVMValueRef c, int heads, LLVMValueRef mx[2],
                    const LLVMValueRef rowoff[2])
{
  publish_rows(kb, red, part, c, heads, mx, rowoff, 0);
}

void sd_online_step(dsv4_kb *kb, LLVMValueRef red, int parts, int heads, const LLVMValueRef rowoff[2],
                    LLVMValueRef (*S)[4], int s_tiles, const LLVMValueRef m[2], const LLVMValueRef l[2],
                    LLVMValueRef nm[2], LLVMValueRef nl[2], LLVMValueRef corr[2])
{
  LLVMBuilderRef b = kb->b;
  for (int h = 0; h < 2; h++) {
    LLVMValueRef mn = m[h];
    for (int w = 0; w < parts; w++)
      mn = sd_fmax2(kb, mn, part_row(kb, red, w, heads, rowoff[h]));
    LLVMValueRef inf = LLVMBuildFCmp(b, LLVMRealOEQ, mn, sd_f32(kb, -INFINITY), "");
    LLVMValueRef mu = LLVMBuildSelect(b, inf, sd_f32(kb, 0.0), mn, "");
    corr[h] = kb_exp2(kb, LLVMBuildFSub(b, m[h], mu, ""));
    LLVMValueRef pv[64];
    for (int j = 0; j < s_tiles; j++)
      for (int e = 0; e < 2; e++)
        S[j][h * 2 + e] = pv[2 * j + e] = kb_exp2_ftz(kb, LLVMBuildFSub(b, S[j][h * 2 + e], mu, ""));
    nm[h] = mn;
    nl[h] = LLVMBuildFAdd(b, LLVMBuildFMul(b, l[h], corr[h], ""), sd_fold_tree(kb, pv, 2 * s_tiles, 1), "");
  }
}

void sd_sum_parts(dsv4_kb *kb, LLVMValueRef sums, LLVMValueRef part, LLVMValueRef c, int parts, int heads,
                  const LLVMValueRef rowoff[2], LLVMValueRef l[2])
{
  publish_rows(kb, sums, part, c, heads, l, rowoff, 1);
  kb->t->barrier(kb);
  for (int h = 0; h < 2; h++) {
    l[h] = sd_f32(kb, 0.0);
    for (int w = 0; w < parts; w++)
      l[h] = LLVMBuildFAdd(kb->b, l[h], part_row(kb, sums, w, heads, rowoff[h]), "l");
  }
}

/* Both matrix forms carve their regions this way, and sd_shared_agrees()
 * then holds the total to the checker's rule. */
LLVMValueRef sd_carve(dsv4_kb *kb, LLVMValueRef sm, long long *o, long long bytes)
{
  LLVMValueRef p = kb_byte_ptr(kb, sm, kb_i64(kb, *o));
  *o += bytes;
  return p;
}

/* The generator's own layout of dynamic shared memory (o bytes) against
 * form_rules.h's rule, which choose_form recorded in the launch record. */
int sd_shared_agrees(const dsv4_kernel *k, long long o, int form, dsv4_diags *d)
{
  int want = dsv4_decode_shared_bytes(&k->layout, k->tile.tokens_per_cta, form, k->v_dim);
  if (o == want)
    return 0;
  dsv4_error(d, k->file, k->line, "internal error: kernel '%s' lays out %lld bytes of shared memory, not %d", k->name,
             o, want);
  return 1;
}

void sd_rows_pack(const sd_rows *st, int o_tiles, LLVMValueRef *v)
{
  v[0] = st->m[0], v[1] = st->m[1], v[2] = st->l[0], v[3] = st->l[1];
  for (int j = 0; j < o_tiles; j++)
    for (int e = 0; e < 4; e++)
      v[4 + 4 * j + e] = st->acc[j][e];
}

void sd_rows_unpack(sd_rows *st, int o_tiles, const LLVMValueRef *v)
{
  st->m[0] = v[0], st->m[1] = v[1], st->l[0] = v[2], st->l[1] = v[3];
  for (int j = 0; j < o_tiles; j++)
    for (int e = 0; e < 4; e++)
      st->acc[j][e] = v[4 + 4 * j + e];
}

void sd_rows_out(dsv4_kb *kb, const dsv4_kernel *k, LLVMValueRef token, LLVMValueRef h0, LLVMValueRef rblk,
                 LLVMValueRef g, LLVMValueRef c, LLVMValueRef part, int vpart, const sd_rows *st,
                 const LLVMValueRef l[2], int o_tiles)
{
  LLVMBuilderRef b = kb->b;
  for (int h = 0; h < 2; h++) {
    LLVMValueRef first = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntEQ, c, kb_i32(kb, 0), ""),
                                      LLVMBuildICmp(b, LLVMIntEQ, part, kb_i32(kb, 0), ""), "");
    LLVMValueRef dim0 = LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, part), kb_i64(kb, vpart), ""),
                                     LLVMBuildMul(b, kb_zext64(kb, c), kb_i64(kb, 2), ""), "dim0");
    LLVMValueRef pr[SD_ROWS_TILES_MAX][2];
    for (int j = 0; j < o_tiles; j++)
      pr[j][0] = st->acc[j][h * 2], pr[j][1] = st->acc[j][h * 2 + 1];
    LLVMValueRef row =
        LLVMBuildAdd(b, LLVMBuildMul(b, rblk, kb_i32(kb, 16), ""), LLVMBuildAdd(b, g, kb_i32(kb, h * 8), ""), "");
    sd_head_out(kb, k, token, LLVMBuildAdd(b, h0, row, "head"), st->m[h], l[h], pr, o_tiles, dim0, first, NULL, NULL);
  }
}

int sd_warp_mma_ok(dsv4_kb *kb)
{
  const dsv4_target_ir *T = kb->t;
  return T->mma_bf16_16x8x16 && T->ldmatrix_x4 && T->shfl_xor && T->cp_async && T->cp_async_wait_all &&
         kb->warp == 32 && T->mma_bf16_16x8x16(kb, NULL, NULL, NULL, NULL) && T->ldmatrix_x4(kb, NULL, 0, NULL) &&
         T->cp_async(kb, NULL, NULL, 16, NULL);
}
