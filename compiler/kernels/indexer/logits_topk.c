/* logits_topk.c -- paged_mqa_logits_topk (docs/ops.md section 4): each
 * logits row's K largest positions, the logits never written to memory.
 *
 * A CTA computes the logits of its chunk of tokens_per_cta = P positions
 * with a logits form's own code (its lg_dest is the chunk in shared
 * memory instead of the logits rows), then runs topk's radix select
 * (select.h) over the chunk: with one chunk a row (row_len <= P) into out,
 * else, like a split topk, the chunk's K largest as candidates (positions
 * and keys) into work, which the module's second kernel, topk's merge,
 * narrows to the row's K.  So at most K candidates a chunk reach memory,
 * against P logits.
 *
 * Forms: portable (every target; the logits' portable form in steps of
 * DSV4_LOGITS_TOPK_THREADS / groups positions, the chunk and the select's
 * arrays static), and on sm_90a the logits' warpgroup form (a CTA every
 * next_n row of one batch entry, their chunks and the select's arrays in
 * dynamic shared memory: form_rules.h's dsv4_logits_topk_shared_bytes;
 * the select's arrays in the form's ring, free by then).
 */
#include "select.h"
#include "shape.h"

/* The logits forms read their arguments at the logits' positions. */
#define SAME(nm)                                                                                                       \
  _Static_assert((int)DSV4_A_PAGED_MQA_LOGITS_TOPK_##nm == (int)LG_##nm,                                               \
                 "paged_mqa_logits_topk's " #nm " is not at the logits' position");
SAME(q)
SAME(cache)
SAME(weights)
SAME(context_lens)
SAME(block_table)
SAME(rows)
SAME(next_n)
SAME(num_blocks)
SAME(block_size)
SAME(block_stride)
SAME(max_blocks)
SAME(row_len)
SAME(kv_map)
SAME(kv_map_fresh)
SAME(bt_stride)
#undef SAME

#define ARG(name) DSV4_A_PAGED_MQA_LOGITS_TOPK_##name

enum { BINS = DSV4_TOPK_BINS };

/* Word w (i64) of work. */
static LLVMValueRef work_word(dsv4_kb *kb, LLVMValueRef work, LLVMValueRef w)
{
  return kb_byte_ptr(kb, work, LLVMBuildMul(kb->b, w, kb_i64(kb, 4), ""));
}

/* Where row r64's histogram and count lie in hist, its candidates in
 * work (dsv4_abi.h). */
typedef struct {
  LLVMValueRef hist, count, pos, keys;
} row_work;

static row_work row_work_of(dsv4_kb *kb, LLVMValueRef hist, LLVMValueRef work, LLVMValueRef rows, LLVMValueRef row_len,
                            LLVMValueRef r64)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef R = kb_zext64(kb, rows), L = kb_zext64(kb, row_len);
  row_work w;
  LLVMValueRef h = LLVMBuildMul(b, r64, kb_i64(kb, BINS + 1), "");
  w.hist = work_word(kb, hist, h);
  w.count = work_word(kb, hist, LLVMBuildAdd(b, h, kb_i64(kb, BINS), ""));
  LLVMValueRef cand = LLVMBuildMul(b, r64, L, "");
  w.pos = work_word(kb, work, cand);
  w.keys = work_word(kb, work, LLVMBuildAdd(b, cand, LLVMBuildMul(b, R, L, ""), ""));
  return w;
}

/* Row r0 + j's part of the CTA's chunk (at word j P of dest's), by T
 * threads.  One chunk a row: its K by the select, into out.  More: where
 * the row is longer than K and the chunk holds some of it, the chunk's
 * bins added to the row's histogram, the threshold bin (the higher of the
 * chunk's own and the row histogram's K-th key's) and the chunk's keys
 * from it up appended to the row's candidates (dsv4_abi.h). */
static void select_row(dsv4_kb *kb, const dsv4_kernel *k, const tk_mem *m, const lg_dest *dest, LLVMValueRef j,
                       LLVMValueRef tid, int T)
{
  LLVMBuilderRef b = kb->b;
  int K = k->topk, P = dest->P;
  LLVMValueRef r = LLVMBuildAdd(b, dest->r0, j, "r"), r64 = kb_zext64(kb, r);
  LLVMValueRef row_len = kb_arg(kb, ARG(row_len));
  LLVMValueRef n = tk_row_length(kb, kb_arg(kb, ARG(context_lens)), row_len, r64);
  LLVMValueRef left = LLVMBuildSub(b, n, dest->p0, "");
  left = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, left, kb_i32(kb, 0), ""), kb_i32(kb, 0), left, "");
  left = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, left, kb_i32(kb, P), ""), kb_i32(kb, P), left, "left");
  LLVMValueRef at = LLVMBuildMul(b, LLVMBuildMul(b, kb_zext64(kb, j), kb_i64(kb, P), ""), kb_i64(kb, 4), "");
  tk_keys src = {kb_byte_ptr(kb, dest->chunk, at), dest->p0, NULL, NULL};
  LLVMValueRef split = LLVMBuildICmp(b, LLVMIntSGT, row_len, kb_i32(kb, P), "split");
  kb_if_t whole = kb_if(kb, LLVMBuildNot(b, split, ""), "whole");
  tk_sink out = {kb_byte_ptr(kb, kb_arg(kb, ARG(out)), LLVMBuildMul(b, r64, kb_i64(kb, (long long)K * 4), "")), NULL,
                 NULL};
  tk_select(kb, m, &src, left, &out, tid, T, K);
  kb_else(kb, &whole);
  LLVMValueRef part = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGT, n, kb_i32(kb, K), ""),
                                   LLVMBuildICmp(b, LLVMIntSGT, left, kb_i32(kb, 0), ""), "part");
  kb_if_t some = kb_if(kb, part, "part");
  row_work w = row_work_of(kb, kb_arg(kb, ARG(hist)), kb_arg(kb, ARG(work)), kb_arg(kb, ARG(rows)), row_len, r64);
  tk_histogram(kb, m, &src, left, tid, T);
  for (int c = 0; c < BINS; c += T) { /* the chunk's bins into the row's */
    LLVMValueRef i = kb_zext64(kb, LLVMBuildAdd(b, tid, kb_i32(kb, c), ""));
    kb_if_t in = kb_if(kb, LLVMBuildICmp(b, LLVMIntULT, i, kb_i64(kb, BINS), ""), "bin");
    LLVMValueRef v = kb_load(kb, kb->i32, kb_byte_ptr(kb, m->hist, LLVMBuildMul(b, i, kb_i64(kb, 4), "")), 4);
    kb_if_t nz = kb_if(kb, LLVMBuildICmp(b, LLVMIntNE, v, kb_i32(kb, 0), ""), "nz");
    kb_atomic_add_i32(kb, kb_byte_ptr(kb, w.hist, LLVMBuildMul(b, i, kb_i64(kb, 4), "")), v);
    kb_endif(kb, &nz);
    kb_endif(kb, &in);
  }
  LLVMValueRef own = tk_top_bin(kb, m, m->hist, tid, T, kb_i32(kb, K));
  LLVMValueRef seen = tk_top_bin(kb, m, w.hist, tid, T, kb_i32(kb, K));
  LLVMValueRef bin = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntUGT, own, seen, ""), own, seen, "bin");
  tk_emit_from(kb, &src, left, tid, T, bin, w.count, w.pos, w.keys, row_len);
  kb_endif(kb, &some);
  kb_endif(kb, &whole);
}

/* <name>_merge (DSV4_ARGS_LOGITS_TOPK_MERGE), T threads: row r's K among
 * its candidates (rows no longer than K: 0 .. n-1 then -1), then its
 * histogram and count back to 0. */
static void merge_kernel(dsv4_kb *kb, const dsv4_kernel *k, int T)
{
#define MARG(name) DSV4_A_LOGITS_TOPK_MERGE_##name
  dsv4_gen_second_kernel(kb, k, DSV4_SECOND_LOGITS_TOPK_MERGE, T);
  LLVMBuilderRef b = kb->b;
  int K = k->topk;
  LLVMValueRef tid = kb->t->thread_id(kb), r = kb->t->block_id(kb, 0);
  kb_return_if(kb, LLVMBuildICmp(b, LLVMIntSGE, r, kb_arg(kb, MARG(rows)), ""));
  kb_return_if(kb, LLVMBuildICmp(b, LLVMIntNE, kb_arg(kb, MARG(chunk)), kb_i32(kb, k->tile.tokens_per_cta), ""));
  LLVMValueRef r64 = kb_zext64(kb, r), row_len = kb_arg(kb, MARG(row_len));
  LLVMValueRef n = tk_row_length(kb, kb_arg(kb, MARG(context_lens)), row_len, r64);
  row_work w = row_work_of(kb, kb_arg(kb, MARG(hist)), kb_arg(kb, MARG(work)), kb_arg(kb, MARG(rows)), row_len, r64);
  LLVMValueRef count = kb_load(kb, kb->i32, w.count, 4);
  /* (at most row_len were stored: more only where hist was not 0 at the launch) */
  count = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntUGT, count, row_len, ""), row_len, count, "count");
  tk_mem m = tk_arrays(kb, T, "_merge");
  tk_sink out = {kb_byte_ptr(kb, kb_arg(kb, MARG(out)), LLVMBuildMul(b, r64, kb_i64(kb, (long long)K * 4), "")), NULL,
                 NULL};
  LLVMValueRef longer = LLVMBuildICmp(b, LLVMIntSGT, n, kb_i32(kb, K), "");
  tk_keys src = {NULL, kb_i32(kb, 0), w.pos, w.keys};
  kb_if_t f = kb_if(kb, longer, "long_row");
  tk_select(kb, &m, &src, count, &out, tid, T, K);
  kb_else(kb, &f);
  for (int i0 = 0; i0 < K; i0 += T) { /* 0 .. n-1 then -1 */
    LLVMValueRef i = LLVMBuildAdd(b, tid, kb_i32(kb, i0), "");
    kb_if_t in = kb_if(kb, LLVMBuildICmp(b, LLVMIntSLT, i, kb_i32(kb, K), ""), "w");
    LLVMValueRef v = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, i, n, ""), i, kb_i32(kb, -1), "");
    kb_store(kb, v, kb_byte_ptr(kb, out.orow, LLVMBuildMul(b, kb_zext64(kb, i), kb_i64(kb, 4), "")), 4);
    kb_endif(kb, &in);
  }
  kb_endif(kb, &f);
  kb->t->barrier(kb); /* every count and candidate read */
  for (int c = 0; c < BINS; c += T)
    kb_store(kb, kb_i32(kb, 0),
             kb_byte_ptr(kb, w.hist,
                         LLVMBuildMul(b, kb_zext64(kb, LLVMBuildAdd(b, tid, kb_i32(kb, c), "")), kb_i64(kb, 4), "")),
             4);
  kb_if_t z = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, tid, kb_i32(kb, 0), ""), "count");
  kb_store(kb, kb_i32(kb, 0), w.count, 4);
  kb_endif(kb, &z);
#undef MARG
}

int dsv4_gen_paged_mqa_logits_topk(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d)
{
  LLVMBuilderRef b = kb->b;
  int T = dsv4_gen_threads(kb, k), P = k->tile.tokens_per_cta;
  LLVMValueRef tid = kb->t->thread_id(kb);
  lg_dest dest = {NULL, NULL, NULL, NULL, P};
  /* a runtime that sized the grid by another chunk: nothing written */
  kb_return_if(kb, LLVMBuildICmp(b, LLVMIntNE, kb_arg(kb, ARG(chunk)), kb_i32(kb, P), ""));
  if (dsv4_kernel_launch(k, kb->t->kind)->form == DSV4_FORM_WARPGROUP) {
    int NM = DSV4_LOGITS_MAX_NEXT_N;
    if (!lg_warpgroup_fits(kb, k)) {
      dsv4_error(d, k->file, k->line,
                 "kernel '%s': internal error: the warpgroup form was chosen for %s, whose hooks cannot build it",
                 k->name, kb->arch);
      return 1;
    }
    dest.chunk = kb_dyn_shared(kb);
    int extra = dsv4_logits_topk_shared_bytes(DSV4_FORM_WARPGROUP, &k->layout, P, 0);
    /* (its occupancy reckoned at next_n 1: the runtime launches next_n rows' chunks) */
    if (extra != NM * P * 4 || lg_warpgroup(kb, k, &dest, P * 4)) {
      dsv4_error(d, k->file, k->line,
                 "kernel '%s': internal error: the warpgroup form's shared memory is not form_rules.h's count",
                 k->name);
      return 1;
    }
    kb->t->barrier(kb); /* every row's chunk written, the ring free */
    tk_mem m = tk_arrays_at(kb, dest.spare);
    LLVMValueRef next_n = kb_arg(kb, ARG(next_n));
    for (int j = 0; j < NM; j++) { /* (next_n is the CTA's alike: uniform) */
      kb_if_t f = kb_if(kb, LLVMBuildICmp(b, LLVMIntSLT, kb_i32(kb, j), next_n, ""), "row");
      if (j)
        kb->t->barrier(kb); /* the row before's select done with the arrays */
      select_row(kb, k, &m, &dest, kb_i32(kb, j), tid, T);
      kb_endif(kb, &f);
    }
  } else {
    int groups = k->heads / k->tile.values_per_thread, step = T / groups;
    LLVMValueRef r = kb->t->block_id(kb, 1);
    kb_return_if(kb, LLVMBuildICmp(b, LLVMIntSGE, r, kb_arg(kb, ARG(rows)), "")); /* whole CTAs */
    dest.chunk = kb_shared_array(kb, kb->f32, P, "dsv4_chunk");
    dest.r0 = r, dest.p0 = LLVMBuildMul(b, kb->t->block_id(kb, 0), kb_i32(kb, P), "p0");
    tk_mem m = tk_arrays(kb, T, "");
    kb_loop_t l;
    kb_for(kb, &l, kb_i32(kb, 0), kb_i32(kb, P), 0, NULL);
    lg_portable_step(kb, k, LLVMBuildAdd(b, dest.p0, l.iv, ""), &dest);
    l.step = step;
    kb_for_end(kb, &l, NULL);
    kb->t->barrier(kb); /* the chunk written */
    select_row(kb, k, &m, &dest, kb_i32(kb, 0), tid, T);
  }
  LLVMBuildRetVoid(b); /* the module's second kernel follows; dsv4_generate ends that one */
  merge_kernel(kb, k, DSV4_LOGITS_TOPK_MERGE_THREADS);
  return 0;
}
