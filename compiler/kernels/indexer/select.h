/* select.h -- topk.c's radix select, for the ops that take K positions of
 * a row: topk (over a logits row in global memory) and the fused
 * paged_mqa_logits_topk (over a chunk of logits it holds in shared
 * memory).  Every function is reached by all T threads of the CTA alike
 * (barriers inside).
 */
#ifndef DSV4_INDEXER_SELECT_H
#define DSV4_INDEXER_SELECT_H

#include "../gen.h"

/* Where the keys come from: index i (< n) is position base + i, whose
 * float lies at lrow[i] (global or shared memory); or (cand non-NULL) the
 * position cand[i], -1 for none, whose key is ckey[i] (a merge's
 * candidates, keys beside them). */
typedef struct {
  LLVMValueRef lrow, base, cand, ckey;
} tk_keys;

/* Where the chosen positions go: orow; with okey (non-NULL), where okey_on
 * holds, each one's key too, at the same index (a split row's candidates,
 * so that the merge reads keys in order instead of gathering them). */
typedef struct {
  LLVMValueRef orow, okey, okey_on;
} tk_sink;

/* The select's shared arrays: dsv4_topk_select_bytes(T) (form_rules.h). */
typedef struct {
  LLVMValueRef hist, psum, bin_slot, above_slot, gt_slot, eq_slot;
} tk_mem;

/* Static arrays named per kernel of the module (tag), or at byte pointer
 * at of shared memory (16-byte aligned). */
tk_mem tk_arrays(dsv4_kb *kb, int T, const char *tag);
tk_mem tk_arrays_at(dsv4_kb *kb, LLVMValueRef at);

/* The K largest keys of src's n indices as positions into out (K i32),
 * by T threads: where n <= K, every index's position (-1 for a candidate
 * that is none) then -1; else the radix select.  Uniform in n. */
void tk_select(dsv4_kb *kb, const tk_mem *m, const tk_keys *src, LLVMValueRef n, const tk_sink *out, LLVMValueRef tid,
               int T, int K);

/* The histogram of src's n keys by their top 12 bits (DSV4_TOPK_BINS
 * bins) into m->hist, cleared first; barriers before and after. */
void tk_histogram(dsv4_kb *kb, const tk_mem *m, const tk_keys *src, LLVMValueRef n, LLVMValueRef tid, int T);

/* The highest bin b of hist (DSV4_TOPK_BINS counts, shared or global
 * memory) whose bins b and up hold k (i32) or more keys, 0 where all of
 * them hold fewer; every thread gets it (m's scan and slots, barriers). */
LLVMValueRef tk_top_bin(dsv4_kb *kb, const tk_mem *m, LLVMValueRef hist, LLVMValueRef tid, int T, LLVMValueRef k);

/* Each of src's n keys in bin `bin` or above, appended (an atomic add on
 * count, a u32 in any memory) as its position at pos[i] and its key at
 * keys[i] (byte pointers), where i < cap (i32: the room there is). */
void tk_emit_from(dsv4_kb *kb, const tk_keys *src, LLVMValueRef n, LLVMValueRef tid, int T, LLVMValueRef bin,
                  LLVMValueRef count, LLVMValueRef pos, LLVMValueRef keys, LLVMValueRef cap);

/* Row r64's positions below min(ctx_lens[r], row_len), at least 0. */
LLVMValueRef tk_row_length(dsv4_kb *kb, LLVMValueRef ctx_lens, LLVMValueRef row_len, LLVMValueRef r64);

/* The module's second kernel <name>_merge (DSV4_ARGS_TOPK_MERGE), T
 * threads: row r's K among its chunks' K candidates each (work), into
 * out; rows no longer than K as the one-CTA form writes them. */
void tk_merge_kernel(dsv4_kb *kb, const dsv4_kernel *k, int T);

#endif
