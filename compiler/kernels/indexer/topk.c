/* topk.c -- docs/ops.md section 4's top-k: for each logits row, the K positions
 * of the largest values among [0, ctx), in no particular order; a row with
 * ctx <= K gets 0 .. ctx-1 then -1.
 *
 * One CTA a row (or, split, a chunk of one: then the module's second
 * kernel, <name>_merge, selects the row's K among the chunks' candidates
 * with the same code, reading each candidate's key through its position),
 * portable radix select over the logits' 32-bit keys (the
 * float bits made monotone): three passes of a histogram in shared memory
 * (atomic adds) over digits of 12, 12 and 8 bits narrow the K-th largest
 * key T and how many keys equal to T still belong to the answer; a last
 * pass writes every position above T and as many equal to T as needed,
 * through two shared counters.  Ties at T are taken in whatever order the
 * atomics give (the contract leaves tie-breaking unspecified).
 *
 * Why 12-bit digits: logits of one row share a few binades, so the top 8
 * bits (sign and 7 of the exponent) put nearly every key of a row in a
 * handful of bins, and the atomic adds on one address serialise; 12 bits
 * (3 of the mantissa too) spread them over eight times as many.  The bin
 * holding the K-th key is found in parallel (each thread sums a run of
 * bins, a scan over the threads' sums, then the one thread whose run
 * holds it), not by one thread walking 4096 bins, and each thread keeps
 * UNROLL loads in flight.  Barriers separate the phases; the branch on
 * ctx <= K is uniform per CTA.
 */
#include <stdio.h>

#include "select.h"

/* Parameter positions: DSV4_A_TOPK_<name> (dsv4_abi.h). */
#define ARG(name) DSV4_A_TOPK_##name

/* The order-preserving unsigned key of a float's bits. */
static LLVMValueRef key_of(dsv4_kb *kb, LLVMValueRef bits)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef neg = LLVMBuildICmp(b, LLVMIntSLT, bits, kb_i32(kb, 0), "");
  return LLVMBuildSelect(b, neg, LLVMBuildNot(b, bits, ""), LLVMBuildOr(b, bits, kb_i32(kb, (int)0x80000000u), ""),
                         "key");
}

/* Shared i32 word i of array base (byte pointer). */
static LLVMValueRef word(dsv4_kb *kb, LLVMValueRef base, LLVMValueRef i)
{
  return kb_byte_ptr(kb, base, LLVMBuildMul(kb->b, kb_zext64(kb, i), kb_i64(kb, 4), ""));
}

/* The digits, most significant first (they cover the 32-bit key); NB_MAX
 * is the widest one's bin count. */
enum { UNROLL = 8, DIGITS = 3, NB_MAX = DSV4_TOPK_BINS }; /* (form_rules.h's select bytes count them) */
static const int digit_bits[DIGITS] = {12, 12, 8};

/* For each index i < n in the CTA's stride, UNROLL loads at a time:
 * body(key, position) for those with a key (the loads of a round are
 * issued before any body runs, so that their latencies overlap). */
typedef void (*key_fn)(dsv4_kb *kb, LLVMValueRef key, LLVMValueRef pos, void *ctx);
static void for_keys(dsv4_kb *kb, const tk_keys *src, LLVMValueRef tid, LLVMValueRef n, int T, key_fn body, void *ctx)
{
  LLVMBuilderRef b = kb->b;
  kb_loop_t l;
  kb_for(kb, &l, kb_i32(kb, 0), n, 0, NULL);
  LLVMValueRef pos[UNROLL], key[UNROLL], in[UNROLL];
  for (int u = 0; u < UNROLL; u++) {
    LLVMValueRef idx = LLVMBuildAdd(b, l.iv, LLVMBuildAdd(b, tid, kb_i32(kb, u * T), ""), "");
    in[u] = LLVMBuildICmp(b, LLVMIntSLT, idx, n, "");
    LLVMValueRef at = kb_zext64(kb, LLVMBuildSelect(b, in[u], idx, kb_i32(kb, 0), ""));
    LLVMValueRef off = LLVMBuildMul(b, at, kb_i64(kb, 4), "");
    if (src->cand) { /* the candidate's position, and its key stored beside it */
      pos[u] = kb_load_if(kb, in[u], kb->i32, src->cand, off, 4, kb_i32(kb, -1));
      key[u] = kb_load_if(kb, in[u], kb->i32, src->ckey, off, 4, kb_i32(kb, 0));
      in[u] = LLVMBuildICmp(b, LLVMIntSGE, pos[u], kb_i32(kb, 0), "");
      continue;
    }
    pos[u] = LLVMBuildAdd(b, src->base, idx, "pos");
    key[u] = key_of(kb, kb_load_if(kb, in[u], kb->i32, src->lrow, off, 4, kb_i32(kb, 0)));
  }
  for (int u = 0; u < UNROLL; u++) {
    kb_if_t f = kb_if(kb, in[u], "key");
    body(kb, key[u], pos[u], ctx);
    kb_endif(kb, &f);
  }
  l.step = T * UNROLL;
  kb_for_end(kb, &l, NULL);
}

typedef struct {
  LLVMValueRef hist, prefix, mask;
  int shift, bits;
} count_ctx;

static void count_key(dsv4_kb *kb, LLVMValueRef key, LLVMValueRef i, void *vc)
{
  (void)i;
  LLVMBuilderRef b = kb->b;
  count_ctx *c = vc;
  kb_if_t m = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildAnd(b, key, c->mask, ""), c->prefix, ""), "match");
  LLVMValueRef bin =
      LLVMBuildAnd(b, LLVMBuildLShr(b, key, kb_i32(kb, c->shift), ""), kb_i32(kb, (1 << c->bits) - 1), "");
  kb_atomic_add_i32(kb, word(kb, c->hist, bin), kb_i32(kb, 1));
  kb_endif(kb, &m);
}

/* Put position pos (and its key) at index at of the sink. */
static void put(dsv4_kb *kb, const tk_sink *s, LLVMValueRef at, LLVMValueRef pos, LLVMValueRef key)
{
  kb_store(kb, pos, word(kb, s->orow, at), 4);
  if (!s->okey)
    return;
  kb_if_t on = kb_if(kb, s->okey_on, "keys");
  kb_store(kb, key, word(kb, s->okey, at), 4);
  kb_endif(kb, &on);
}

typedef struct {
  LLVMValueRef prefix, remaining, base_eq, gt_slot, eq_slot;
  const tk_sink *out;
} take_ctx;

static void take_key(dsv4_kb *kb, LLVMValueRef key, LLVMValueRef i, void *vc)
{
  LLVMBuilderRef b = kb->b;
  take_ctx *c = vc;
  kb_if_t gt = kb_if(kb, LLVMBuildICmp(b, LLVMIntUGT, key, c->prefix, ""), "gt");
  LLVMValueRef at = kb_atomic_add_i32(kb, c->gt_slot, kb_i32(kb, 1));
  put(kb, c->out, at, i, key);
  kb_else(kb, &gt);
  kb_if_t eq = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, key, c->prefix, ""), "eq");
  LLVMValueRef e = kb_atomic_add_i32(kb, c->eq_slot, kb_i32(kb, 1));
  kb_if_t take = kb_if(kb, LLVMBuildICmp(b, LLVMIntSLT, e, c->remaining, ""), "take");
  put(kb, c->out, LLVMBuildAdd(b, c->base_eq, e, ""), i, key);
  kb_endif(kb, &take);
  kb_endif(kb, &eq);
  kb_endif(kb, &gt);
}

/* The bin of nb holding the remaining-th largest counted key, found by all
 * T threads: thread t sums the run of C = ceil(nb / T) bins from the top
 * (bin nb-1 - tC down), an inclusive scan of the sums over the threads in
 * psum (log2 T steps, barriers between), then the thread whose run holds
 * it stores the bin and the count of keys in bins above it. */
static void find_bin(dsv4_kb *kb, LLVMValueRef hist, LLVMValueRef psum, LLVMValueRef tid, int T, int nb,
                     LLVMValueRef remaining, LLVMValueRef bin_slot, LLVMValueRef above_slot)
{
  LLVMBuilderRef b = kb->b;
  int C = (nb + T - 1) / T;
  LLVMValueRef cnt[NB_MAX / 32], bins[NB_MAX / 32], sum = kb_i32(kb, 0);
  for (int j = 0; j < C; j++) {
    LLVMValueRef r = LLVMBuildAdd(b, LLVMBuildMul(b, tid, kb_i32(kb, C), ""), kb_i32(kb, j), "");
    LLVMValueRef in = LLVMBuildICmp(b, LLVMIntSLT, r, kb_i32(kb, nb), "");
    bins[j] = LLVMBuildSub(b, kb_i32(kb, nb - 1), r, "");
    LLVMValueRef at =
        LLVMBuildMul(b, kb_zext64(kb, LLVMBuildSelect(b, in, bins[j], kb_i32(kb, 0), "")), kb_i64(kb, 4), "");
    cnt[j] = kb_load_if(kb, in, kb->i32, hist, at, 4, kb_i32(kb, 0));
    sum = LLVMBuildAdd(b, sum, cnt[j], "");
  }
  kb_store(kb, sum, word(kb, psum, tid), 4);
  LLVMValueRef incl = sum;
  for (int off = 1; off < T; off *= 2) {
    kb->t->barrier(kb);
    LLVMValueRef has = LLVMBuildICmp(b, LLVMIntSGE, tid, kb_i32(kb, off), "");
    LLVMValueRef at = LLVMBuildMul(
        b, kb_zext64(kb, LLVMBuildSelect(b, has, LLVMBuildSub(b, tid, kb_i32(kb, off), ""), kb_i32(kb, 0), "")),
        kb_i64(kb, 4), "");
    incl = LLVMBuildAdd(b, incl, kb_load_if(kb, has, kb->i32, psum, at, 4, kb_i32(kb, 0)), "");
    kb->t->barrier(kb);
    kb_store(kb, incl, word(kb, psum, tid), 4);
  }
  LLVMValueRef acc = LLVMBuildSub(b, incl, sum, "above");
  for (int j = 0; j < C; j++) {
    LLVMValueRef next = LLVMBuildAdd(b, acc, cnt[j], "");
    LLVMValueRef here = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSLT, acc, remaining, ""),
                                     LLVMBuildICmp(b, LLVMIntSGE, next, remaining, ""), "");
    kb_if_t f = kb_if(kb, here, "found");
    kb_store(kb, bins[j], bin_slot, 4);
    kb_store(kb, acc, above_slot, 4);
    kb_endif(kb, &f);
    acc = next;
  }
}

/* The select's arrays from hist (NB_MAX + 4 words) and psum (T). */
static tk_mem arrays(dsv4_kb *kb, LLVMValueRef hist, LLVMValueRef psum)
{
  tk_mem m;
  m.hist = hist, m.psum = psum;
  m.bin_slot = word(kb, m.hist, kb_i32(kb, NB_MAX)), m.above_slot = word(kb, m.hist, kb_i32(kb, NB_MAX + 1));
  m.gt_slot = word(kb, m.hist, kb_i32(kb, NB_MAX + 2)), m.eq_slot = word(kb, m.hist, kb_i32(kb, NB_MAX + 3));
  return m;
}

tk_mem tk_arrays(dsv4_kb *kb, int T, const char *tag)
{
  char h[48], p[48];
  snprintf(h, sizeof h, "dsv4_topk%s_hist", tag);
  snprintf(p, sizeof p, "dsv4_topk%s_scan", tag);
  /* + bin, above, gt, eq */
  return arrays(kb, kb_shared_array(kb, kb->i32, NB_MAX + 4, h), kb_shared_array(kb, kb->i32, T, p));
}

tk_mem tk_arrays_at(dsv4_kb *kb, LLVMValueRef at)
{
  return arrays(kb, at, kb_byte_ptr(kb, at, kb_i64(kb, (NB_MAX + 4) * 4)));
}

/* The histogram of cc's digit over src's n keys that match cc's prefix:
 * the digit's bins cleared, a barrier, the count, a barrier. */
static void count_digit(dsv4_kb *kb, const tk_mem *m, const tk_keys *src, LLVMValueRef n, LLVMValueRef tid, int T,
                        count_ctx *cc)
{
  int nb = 1 << cc->bits;
  for (int c = 0; c < nb; c += T) {
    LLVMValueRef i = LLVMBuildAdd(kb->b, tid, kb_i32(kb, c), "");
    kb_if_t in = kb_if(kb, LLVMBuildICmp(kb->b, LLVMIntULT, i, kb_i32(kb, nb), ""), "clr");
    kb_store(kb, kb_i32(kb, 0), word(kb, m->hist, i), 4);
    kb_endif(kb, &in);
  }
  kb->t->barrier(kb);
  for_keys(kb, src, tid, n, T, count_key, cc);
  kb->t->barrier(kb);
}

/* The K largest keys of src's n indices as positions into orow (K i32),
 * by T threads: where n <= K, every index's position (-1 for a candidate
 * that is none) then -1; else the radix select.  Uniform in n: every
 * thread reaches the barriers. */
void tk_select(dsv4_kb *kb, const tk_mem *m, const tk_keys *src, LLVMValueRef n, const tk_sink *out, LLVMValueRef tid,
               int T, int K)
{
  LLVMBuilderRef b = kb->b;
  kb_if_t small = kb_if(kb, LLVMBuildICmp(b, LLVMIntSLE, n, kb_i32(kb, K), ""), "short_row");
  { /* the positions of 0 .. n-1 then -1 */
    kb_loop_t l;
    kb_for(kb, &l, kb_i32(kb, 0), kb_i32(kb, (K + T - 1) / T), 0, NULL);
    LLVMValueRef i = LLVMBuildAdd(b, LLVMBuildMul(b, l.iv, kb_i32(kb, T), ""), tid, "");
    kb_if_t in = kb_if(kb, LLVMBuildICmp(b, LLVMIntSLT, i, kb_i32(kb, K), ""), "w");
    LLVMValueRef have = LLVMBuildICmp(b, LLVMIntSLT, i, n, "");
    LLVMValueRef at = LLVMBuildMul(b, kb_zext64(kb, LLVMBuildSelect(b, have, i, kb_i32(kb, 0), "")), kb_i64(kb, 4), "");
    LLVMValueRef v, key;
    if (src->cand) {
      v = kb_load_if(kb, have, kb->i32, src->cand, at, 4, kb_i32(kb, -1));
      key = kb_load_if(kb, have, kb->i32, src->ckey, at, 4, kb_i32(kb, 0));
    } else {
      v = LLVMBuildSelect(b, have, LLVMBuildAdd(b, src->base, i, ""), kb_i32(kb, -1), "");
      key = out->okey ? key_of(kb, kb_load_if(kb, have, kb->i32, src->lrow, at, 4, kb_i32(kb, 0))) : NULL;
    }
    put(kb, out, i, v, key);
    kb_endif(kb, &in);
    kb_for_end(kb, &l, NULL);
  }
  kb_else(kb, &small);
  {
    LLVMValueRef prefix = kb_i32(kb, 0), mask = kb_i32(kb, 0), remaining = kb_i32(kb, K);
    for (int p = 0, shift = 32; p < DIGITS; p++) {
      int nb = 1 << digit_bits[p];
      shift -= digit_bits[p];
      /* count the keys that match the prefix so far, by their next digit */
      count_ctx cc = {m->hist, prefix, mask, shift, digit_bits[p]};
      count_digit(kb, m, src, n, tid, T, &cc);
      find_bin(kb, m->hist, m->psum, tid, T, nb, remaining, m->bin_slot, m->above_slot);
      kb->t->barrier(kb);
      LLVMValueRef bin = kb_load(kb, kb->i32, m->bin_slot, 4), above = kb_load(kb, kb->i32, m->above_slot, 4);
      remaining = LLVMBuildSub(b, remaining, above, "remaining");
      prefix = LLVMBuildOr(b, prefix, LLVMBuildShl(b, bin, kb_i32(kb, shift), ""), "prefix");
      mask = LLVMBuildOr(b, mask, kb_i32(kb, (int)((unsigned)(nb - 1) << shift)), "mask");
      kb->t->barrier(kb); /* everyone read bin/above before the next pass rewrites them */
    }
    /* prefix is the K-th largest key T; take all above it and `remaining` equal to it */
    kb_if_t z = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, tid, kb_i32(kb, 0), ""), "cnt");
    kb_store(kb, kb_i32(kb, 0), m->gt_slot, 4);
    kb_store(kb, kb_i32(kb, 0), m->eq_slot, 4);
    kb_endif(kb, &z);
    kb->t->barrier(kb);
    take_ctx tc = {prefix, remaining, LLVMBuildSub(b, kb_i32(kb, K), remaining, ""), m->gt_slot, m->eq_slot, out};
    for_keys(kb, src, tid, n, T, take_key, &tc);
  }
  kb_endif(kb, &small);
}

void tk_histogram(dsv4_kb *kb, const tk_mem *m, const tk_keys *src, LLVMValueRef n, LLVMValueRef tid, int T)
{
  count_ctx cc = {m->hist, kb_i32(kb, 0), kb_i32(kb, 0), 32 - digit_bits[0], digit_bits[0]};
  count_digit(kb, m, src, n, tid, T, &cc);
}

LLVMValueRef tk_top_bin(dsv4_kb *kb, const tk_mem *m, LLVMValueRef hist, LLVMValueRef tid, int T, LLVMValueRef k)
{
  kb_if_t z = kb_if(kb, LLVMBuildICmp(kb->b, LLVMIntEQ, tid, kb_i32(kb, 0), ""), "none");
  kb_store(kb, kb_i32(kb, 0), m->bin_slot, 4); /* (fewer than k keys: bin 0) */
  kb_endif(kb, &z);
  kb->t->barrier(kb);
  find_bin(kb, hist, m->psum, tid, T, 1 << digit_bits[0], k, m->bin_slot, m->above_slot);
  kb->t->barrier(kb);
  LLVMValueRef bin = kb_load(kb, kb->i32, m->bin_slot, 4);
  kb->t->barrier(kb); /* read by all before the slot is written again */
  return bin;
}

typedef struct {
  LLVMValueRef low, count, pos, keys, cap;
} emit_ctx;

static void emit_key(dsv4_kb *kb, LLVMValueRef key, LLVMValueRef pos, void *vc)
{
  emit_ctx *c = vc;
  kb_if_t up = kb_if(kb, LLVMBuildICmp(kb->b, LLVMIntUGE, key, c->low, ""), "emit");
  LLVMValueRef at = kb_atomic_add_i32(kb, c->count, kb_i32(kb, 1));
  kb_if_t room = kb_if(kb, LLVMBuildICmp(kb->b, LLVMIntULT, at, c->cap, ""), "room");
  kb_store(kb, pos, word(kb, c->pos, at), 4);
  kb_store(kb, key, word(kb, c->keys, at), 4);
  kb_endif(kb, &room);
  kb_endif(kb, &up);
}

/* The same a warp at a time (the loop's trip count is every thread's, so
 * its lanes stay converged): the lanes that append in one round take one
 * atomic add, their leader's, and their places by their rank among them.
 * Appends to one count from every CTA of a row otherwise queue at one
 * address (H200, B 1 / 1M positions: measured the fused op's largest
 * cost). */
static void emit_by_warps(dsv4_kb *kb, const tk_keys *src, LLVMValueRef n, LLVMValueRef tid, int T, emit_ctx *c)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_target_ir *t = kb->t;
  LLVMValueRef lane = LLVMBuildAnd(b, tid, kb_i32(kb, 31), "lane");
  LLVMValueRef lt = LLVMBuildSub(b, LLVMBuildShl(b, kb_i32(kb, 1), lane, ""), kb_i32(kb, 1), "lanemask_lt");
  kb_loop_t l;
  kb_for(kb, &l, kb_i32(kb, 0), n, 0, NULL);
  for (int u = 0; u < UNROLL; u++) {
    LLVMValueRef idx = LLVMBuildAdd(b, l.iv, LLVMBuildAdd(b, tid, kb_i32(kb, u * T), ""), "");
    LLVMValueRef in = LLVMBuildICmp(b, LLVMIntSLT, idx, n, "");
    LLVMValueRef at = kb_zext64(kb, LLVMBuildSelect(b, in, idx, kb_i32(kb, 0), ""));
    LLVMValueRef key =
        key_of(kb, kb_load_if(kb, in, kb->i32, src->lrow, LLVMBuildMul(b, at, kb_i64(kb, 4), ""), 4, kb_i32(kb, 0)));
    LLVMValueRef want = LLVMBuildAnd(b, in, LLVMBuildICmp(b, LLVMIntUGE, key, c->low, ""), "want");
    LLVMValueRef mask;
    t->match_any(kb, LLVMBuildZExt(b, want, kb->i32, ""), &mask);
    LLVMValueRef lead = kb_call(kb, "llvm.cttz.i32", kb->i32, (LLVMTypeRef[]){kb->i32, kb->i1},
                                (LLVMValueRef[]){mask, LLVMConstInt(kb->i1, 1, 0)}, 2, LLVMCCallConv);
    LLVMValueRef cnt = kb_call(kb, "llvm.ctpop.i32", kb->i32, &kb->i32, &mask, 1, LLVMCCallConv);
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
    kb_if_t f = kb_if(kb, LLVMBuildAnd(b, want, LLVMBuildICmp(b, LLVMIntEQ, lane, lead, ""), ""), "reserve");
    LLVMValueRef got = kb_atomic_add_i32(kb, c->count, cnt);
    LLVMBasicBlockRef done = LLVMGetInsertBlock(b);
    kb_endif(kb, &f);
    LLVMValueRef base = kb_phi(kb, got, done, kb_i32(kb, 0), pre);
    base = LLVMBuildBitCast(b, t->shfl_idx(kb, LLVMBuildBitCast(b, base, kb->f32, ""), lead), kb->i32, "base");
    LLVMValueRef rank = kb_call(kb, "llvm.ctpop.i32", kb->i32, &kb->i32,
                                (LLVMValueRef[]){LLVMBuildAnd(b, mask, lt, "")}, 1, LLVMCCallConv);
    LLVMValueRef slot = LLVMBuildAdd(b, base, rank, "");
    kb_if_t w = kb_if(kb, LLVMBuildAnd(b, want, LLVMBuildICmp(b, LLVMIntULT, slot, c->cap, ""), ""), "emit");
    kb_store(kb, LLVMBuildAdd(b, src->base, idx, ""), word(kb, c->pos, slot), 4);
    kb_store(kb, key, word(kb, c->keys, slot), 4);
    kb_endif(kb, &w);
  }
  l.step = T * UNROLL;
  kb_for_end(kb, &l, NULL);
}

void tk_emit_from(dsv4_kb *kb, const tk_keys *src, LLVMValueRef n, LLVMValueRef tid, int T, LLVMValueRef bin,
                  LLVMValueRef count, LLVMValueRef pos, LLVMValueRef keys, LLVMValueRef cap)
{
  emit_ctx c = {LLVMBuildShl(kb->b, bin, kb_i32(kb, 32 - digit_bits[0]), "low"), count, pos, keys, cap};
  if (kb->t->match_any && kb->t->match_any(kb, NULL, NULL) && kb->t->shfl_idx && kb->warp == 32)
    emit_by_warps(kb, src, n, tid, T, &c);
  else
    for_keys(kb, src, tid, n, T, emit_key, &c);
}

LLVMValueRef tk_row_length(dsv4_kb *kb, LLVMValueRef ctx_lens, LLVMValueRef row_len, LLVMValueRef r64)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef ctx = kb_load(kb, kb->i32, kb_byte_ptr(kb, ctx_lens, LLVMBuildMul(b, r64, kb_i64(kb, 4), "")), 4);
  LLVMValueRef n = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, ctx, row_len, ""), ctx, row_len, "");
  return LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, n, kb_i32(kb, 0), ""), kb_i32(kb, 0), n, "n");
}

void tk_merge_kernel(dsv4_kb *kb, const dsv4_kernel *k, int T)
{
#define MARG(name) DSV4_A_TOPK_MERGE_##name
  dsv4_gen_second_kernel(kb, k, DSV4_SECOND_MERGE, T);
  LLVMBuilderRef b = kb->b;
  int K = k->topk;
  LLVMValueRef tid = kb->t->thread_id(kb), r = kb->t->block_id(kb, 0);
  kb_return_if(kb, LLVMBuildICmp(b, LLVMIntSGE, r, kb_arg(kb, MARG(rows)), ""));
  LLVMValueRef r64 = kb_zext64(kb, r), chunks = kb_arg(kb, MARG(chunks));
  LLVMValueRef n = tk_row_length(kb, kb_arg(kb, MARG(context_lens)), kb_arg(kb, MARG(row_len)), r64);
  LLVMValueRef orow = kb_byte_ptr(kb, kb_arg(kb, MARG(out)), LLVMBuildMul(b, r64, kb_i64(kb, (long long)K * 4), ""));
  LLVMValueRef lrow = LLVMBuildMul(b, LLVMBuildMul(b, r64, kb_arg(kb, MARG(row_stride)), ""), kb_i64(kb, 4), "");
  tk_keys src = {kb_byte_ptr(kb, kb_arg(kb, MARG(logits)), lrow), kb_i32(kb, 0), NULL, NULL};
  tk_sink out = {orow, NULL, NULL};
  tk_mem m = tk_arrays(kb, T, "_merge");
  kb_if_t small = kb_if(kb, LLVMBuildICmp(b, LLVMIntSLE, n, kb_i32(kb, K), ""), "short_row");
  tk_select(kb, &m, &src, n, &out, tid, T, K); /* (0 .. n-1 then -1) */
  kb_else(kb, &small);
  /* candidates: the row's chunks x K positions, their keys rows x chunks x
   * K words further on */
  LLVMValueRef ncand = kb_zext64(kb, LLVMBuildMul(b, chunks, kb_i32(kb, K), "ncand"));
  LLVMValueRef all = LLVMBuildMul(b, kb_zext64(kb, kb_arg(kb, MARG(rows))), ncand, "");
  LLVMValueRef at = LLVMBuildMul(b, r64, ncand, "");
  src.cand = kb_byte_ptr(kb, kb_arg(kb, MARG(work)), LLVMBuildMul(b, at, kb_i64(kb, 4), ""));
  src.ckey = kb_byte_ptr(kb, kb_arg(kb, MARG(work)), LLVMBuildMul(b, LLVMBuildAdd(b, all, at, ""), kb_i64(kb, 4), ""));
  tk_select(kb, &m, &src, LLVMBuildTrunc(b, ncand, kb->i32, ""), &out, tid, T, K);
  kb_endif(kb, &small);
#undef MARG
}

int dsv4_gen_topk(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d)
{
  (void)d;
  LLVMBuilderRef b = kb->b;
  int T = dsv4_gen_threads(kb, k), K = k->topk;
  LLVMValueRef tid = kb->t->thread_id(kb), r = kb->t->block_id(kb, 0), c = kb->t->block_id(kb, 1);
  kb_return_if(kb, LLVMBuildICmp(b, LLVMIntSGE, r, kb_arg(kb, ARG(rows)), "")); /* whole CTAs only */
  LLVMValueRef r64 = kb_zext64(kb, r), row_len = kb_arg(kb, ARG(row_len)), chunk = kb_arg(kb, ARG(chunk));
  LLVMValueRef n = tk_row_length(kb, kb_arg(kb, ARG(context_lens)), row_len, r64);
  tk_keys src = {kb_byte_ptr(kb, kb_arg(kb, ARG(logits)),
                             LLVMBuildMul(b, LLVMBuildMul(b, r64, kb_arg(kb, ARG(row_stride)), ""), kb_i64(kb, 4), "")),
                 kb_i32(kb, 0), NULL, NULL};
  /* whole row: into out; a chunk c of `chunk` positions (split): its part
   * of the row, into slot (r chunks + c) of work's positions, its keys
   * rows x chunks x K words further on; chunks = ceil(row_len / chunk) (the
   * grid's) */
  LLVMValueRef split = LLVMBuildICmp(b, LLVMIntSGT, chunk, kb_i32(kb, 0), "split");
  LLVMValueRef one = LLVMBuildSelect(b, split, chunk, kb_i32(kb, 1), "");
  LLVMValueRef chunks =
      LLVMBuildUDiv(b, LLVMBuildAdd(b, row_len, LLVMBuildSub(b, one, kb_i32(kb, 1), ""), ""), one, "chunks");
  LLVMValueRef base = LLVMBuildSelect(b, split, LLVMBuildMul(b, c, chunk, ""), kb_i32(kb, 0), "base");
  LLVMValueRef left = LLVMBuildSub(b, n, base, "");
  left = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, left, kb_i32(kb, 0), ""), kb_i32(kb, 0), left, "");
  left = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, left, chunk, ""), chunk, left, "");
  src.base = base, src.lrow = kb_byte_ptr(kb, src.lrow, LLVMBuildMul(b, kb_zext64(kb, base), kb_i64(kb, 4), ""));
  n = LLVMBuildSelect(b, split, left, n, "n");
  LLVMValueRef slot = LLVMBuildAdd(b, LLVMBuildMul(b, r64, kb_zext64(kb, chunks), ""), kb_zext64(kb, c), "");
  LLVMValueRef all = LLVMBuildMul(b, kb_zext64(kb, kb_arg(kb, ARG(rows))), kb_zext64(kb, chunks), "");
  LLVMValueRef work = kb_arg(kb, ARG(work)), K4 = kb_i64(kb, (long long)K * 4);
  tk_sink out = {LLVMBuildSelect(b, split, kb_byte_ptr(kb, work, LLVMBuildMul(b, slot, K4, "")),
                                 kb_byte_ptr(kb, kb_arg(kb, ARG(out)), LLVMBuildMul(b, r64, K4, "")), "orow"),
                 kb_byte_ptr(kb, work, LLVMBuildMul(b, LLVMBuildAdd(b, all, slot, ""), K4, "")), split};
  tk_mem m = tk_arrays(kb, T, "");
  tk_select(kb, &m, &src, n, &out, tid, T, K);
  LLVMBuildRetVoid(kb->b); /* the module's second kernel follows; dsv4_generate ends that one */
  tk_merge_kernel(kb, k, T);
  return 0;
}
