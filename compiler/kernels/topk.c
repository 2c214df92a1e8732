/* topk.c -- OPS.md section 4's top-k: for each logits row, the K positions
 * of the largest values among [0, ctx), in no particular order; a row with
 * ctx <= K gets 0 .. ctx-1 then -1.
 *
 * One CTA a row, portable radix select over the logits' 32-bit keys (the
 * float bits made monotone): four passes of an 8-bit histogram in shared
 * memory (atomic adds) narrow the K-th largest key T and how many keys
 * equal to T still belong to the answer; a last pass writes every position
 * above T and as many equal to T as needed, through two shared counters.
 * Ties at T are taken in whatever order the atomics give (the contract
 * leaves tie-breaking unspecified).  Barriers separate the phases; the
 * branch on ctx <= K is uniform per CTA.
 */
#include "gen.h"

enum { OUT, LOGITS, CTX, ROWS, ROW_STRIDE, ROW_LEN };

/* The order-preserving unsigned key of a float's bits. */
static LLVMValueRef key_of(dsv4_kb *kb, LLVMValueRef bits)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef neg = LLVMBuildICmp(b, LLVMIntSLT, bits, kb_i32(kb, 0), "");
  return LLVMBuildSelect(b, neg, LLVMBuildNot(b, bits, ""), LLVMBuildOr(b, bits, kb_i32(kb, (int)0x80000000u), ""), "key");
}

/* Shared i32 word i of array base (byte pointer). */
static LLVMValueRef word(dsv4_kb *kb, LLVMValueRef base, LLVMValueRef i)
{
  return kb_byte_ptr(kb, base, LLVMBuildMul(kb->b, kb_zext64(kb, i), kb_i64(kb, 4), ""));
}

int dsv4_gen_topk(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d)
{
  (void)d;
  LLVMBuilderRef b = kb->b;
  int T = k->tile.threads, K = k->topk;
  LLVMValueRef tid = kb->t->thread_id(kb), r = kb->t->block_id(kb, 0);
  kb_return_if(kb, LLVMBuildICmp(b, LLVMIntSGE, r, kb_arg(kb, ROWS), "")); /* whole CTAs only */
  LLVMValueRef r64 = kb_zext64(kb, r);
  LLVMValueRef ctx = kb_load(kb, kb->i32, kb_byte_ptr(kb, kb_arg(kb, CTX), LLVMBuildMul(b, r64, kb_i64(kb, 4), "")), 4);
  LLVMValueRef n = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, ctx, kb_arg(kb, ROW_LEN), ""), ctx, kb_arg(kb, ROW_LEN), "");
  n = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, n, kb_i32(kb, 0), ""), kb_i32(kb, 0), n, "n");
  LLVMValueRef orow = kb_byte_ptr(kb, kb_arg(kb, OUT), LLVMBuildMul(b, r64, kb_i64(kb, (long long)K * 4), ""));
  LLVMValueRef lrow = kb_byte_ptr(kb, kb_arg(kb, LOGITS), LLVMBuildMul(b, LLVMBuildMul(b, r64, kb_arg(kb, ROW_STRIDE), ""), kb_i64(kb, 4), ""));
  LLVMValueRef hist = kb_shared_array(kb, kb->i32, 256 + 4, "dsv4_topk_hist"); /* + bin, above, gt, eq */
  LLVMValueRef bin_slot = word(kb, hist, kb_i32(kb, 256)), above_slot = word(kb, hist, kb_i32(kb, 257));
  LLVMValueRef gt_slot = word(kb, hist, kb_i32(kb, 258)), eq_slot = word(kb, hist, kb_i32(kb, 259));

  kb_if_t small = kb_if(kb, LLVMBuildICmp(b, LLVMIntSLE, n, kb_i32(kb, K), ""), "short_row");
  { /* 0 .. n-1 then -1 */
    kb_loop_t l;
    kb_for(kb, &l, kb_i32(kb, 0), kb_i32(kb, (K + T - 1) / T), 0, NULL);
    LLVMValueRef i = LLVMBuildAdd(b, LLVMBuildMul(b, l.iv, kb_i32(kb, T), ""), tid, "");
    kb_if_t in = kb_if(kb, LLVMBuildICmp(b, LLVMIntSLT, i, kb_i32(kb, K), ""), "w");
    LLVMValueRef v = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, i, n, ""), i, kb_i32(kb, -1), "");
    kb_store(kb, v, word(kb, orow, i), 4);
    kb_endif(kb, &in);
    kb_for_end(kb, &l, NULL);
  }
  kb_else(kb, &small);
  {
    LLVMValueRef prefix = kb_i32(kb, 0), mask = kb_i32(kb, 0), remaining = kb_i32(kb, K);
    for (int shift = 24; shift >= 0; shift -= 8) {
      /* clear the histogram */
      for (int c = 0; c < 256; c += T) {
        LLVMValueRef i = LLVMBuildAdd(b, tid, kb_i32(kb, c), "");
        kb_if_t in = kb_if(kb, LLVMBuildICmp(b, LLVMIntULT, i, kb_i32(kb, 256), ""), "clr");
        kb_store(kb, kb_i32(kb, 0), word(kb, hist, i), 4);
        kb_endif(kb, &in);
      }
      kb->t->barrier(kb);
      /* count the keys that match the prefix so far, by their next byte */
      kb_loop_t l;
      kb_for(kb, &l, tid, n, 0, NULL);
      {
        LLVMValueRef key = key_of(kb, kb_load(kb, kb->i32, word(kb, lrow, l.iv), 4));
        kb_if_t m = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildAnd(b, key, mask, ""), prefix, ""), "match");
        LLVMValueRef bin = LLVMBuildAnd(b, LLVMBuildLShr(b, key, kb_i32(kb, shift), ""), kb_i32(kb, 255), "");
        kb_atomic_add_i32(kb, word(kb, hist, bin), kb_i32(kb, 1));
        kb_endif(kb, &m);
      }
      l.step = T; /* the CTA strides over the row */
      kb_for_end(kb, &l, NULL);
      kb->t->barrier(kb);
      /* thread 0 finds the bin holding the remaining-th largest */
      kb_if_t z = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, tid, kb_i32(kb, 0), ""), "scan");
      {
        LLVMValueRef init[3] = {kb_i32(kb, 0), kb_i32(kb, 0), kb_i32(kb, 0)}; /* acc, bin, found */
        kb_loop_t s;
        kb_for(kb, &s, kb_i32(kb, 0), kb_i32(kb, 256), 3, init);
        LLVMValueRef bin = LLVMBuildSub(b, kb_i32(kb, 255), s.iv, "");
        LLVMValueRef cnt = kb_load(kb, kb->i32, word(kb, hist, bin), 4);
        LLVMValueRef notyet = LLVMBuildICmp(b, LLVMIntEQ, s.vars[2], kb_i32(kb, 0), "");
        LLVMValueRef reach = LLVMBuildAnd(b, notyet, LLVMBuildICmp(b, LLVMIntSGE, LLVMBuildAdd(b, s.vars[0], cnt, ""), remaining, ""), "");
        LLVMValueRef next[3];
        next[0] = LLVMBuildSelect(b, LLVMBuildAnd(b, notyet, LLVMBuildNot(b, reach, ""), ""), LLVMBuildAdd(b, s.vars[0], cnt, ""), s.vars[0], "");
        next[1] = LLVMBuildSelect(b, reach, bin, s.vars[1], "");
        next[2] = LLVMBuildSelect(b, reach, kb_i32(kb, 1), s.vars[2], "");
        kb_for_end(kb, &s, next);
        kb_store(kb, s.vars[1], bin_slot, 4);
        kb_store(kb, s.vars[0], above_slot, 4); /* keys of higher bins */
      }
      kb_endif(kb, &z);
      kb->t->barrier(kb);
      LLVMValueRef bin = kb_load(kb, kb->i32, bin_slot, 4), above = kb_load(kb, kb->i32, above_slot, 4);
      remaining = LLVMBuildSub(b, remaining, above, "remaining");
      prefix = LLVMBuildOr(b, prefix, LLVMBuildShl(b, bin, kb_i32(kb, shift), ""), "prefix");
      mask = LLVMBuildOr(b, mask, kb_i32(kb, (int)(0xFFu << shift)), "mask");
      kb->t->barrier(kb); /* everyone read bin/above before the next pass rewrites them */
    }
    /* prefix is the K-th largest key T; take all above it and `remaining` equal to it */
    kb_if_t z = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, tid, kb_i32(kb, 0), ""), "cnt");
    kb_store(kb, kb_i32(kb, 0), gt_slot, 4);
    kb_store(kb, kb_i32(kb, 0), eq_slot, 4);
    kb_endif(kb, &z);
    kb->t->barrier(kb);
    LLVMValueRef base_eq = LLVMBuildSub(b, kb_i32(kb, K), remaining, "");
    kb_loop_t l;
    kb_for(kb, &l, tid, n, 0, NULL);
    {
      LLVMValueRef key = key_of(kb, kb_load(kb, kb->i32, word(kb, lrow, l.iv), 4));
      kb_if_t gt = kb_if(kb, LLVMBuildICmp(b, LLVMIntUGT, key, prefix, ""), "gt");
      LLVMValueRef at = kb_atomic_add_i32(kb, gt_slot, kb_i32(kb, 1));
      kb_store(kb, l.iv, word(kb, orow, at), 4);
      kb_else(kb, &gt);
      kb_if_t eq = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, key, prefix, ""), "eq");
      LLVMValueRef e = kb_atomic_add_i32(kb, eq_slot, kb_i32(kb, 1));
      kb_if_t take = kb_if(kb, LLVMBuildICmp(b, LLVMIntSLT, e, remaining, ""), "take");
      kb_store(kb, l.iv, word(kb, orow, LLVMBuildAdd(b, base_eq, e, "")), 4);
      kb_endif(kb, &take);
      kb_endif(kb, &eq);
      kb_endif(kb, &gt);
    }
    l.step = T;
    kb_for_end(kb, &l, NULL);
  }
  kb_endif(kb, &small);
  return 0;
}
