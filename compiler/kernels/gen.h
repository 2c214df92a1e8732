/* gen.h -- code generators, one per op, over the kernel builder (kb.h).
 *
 * dsv4_generate() looks the op up in one table; each generator builds its
 * kernel's function into kb's module using only kb and the target hooks.
 */
#ifndef DSV4_GEN_H
#define DSV4_GEN_H

#include "../kb.h"

/* Build kernel k into kb->mod.  0 on success, else diagnostics in d. */
int dsv4_generate(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d);

int dsv4_gen_dequant_gather(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d);
int dsv4_gen_paged_gather(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d);


/* ---- shared pieces (dequant.c) ---- */

/* Thread mapping of the gather family: which token of the CTA this thread
 * works on and which lane (group of values_per_thread values) of it. */
typedef struct {
  LLVMValueRef tok;  /* i32 token index in the grid's x range */
  LLVMValueRef lane; /* i32 lane within the token, [0, dim / vpt) */
} dsv4_token_lane;
dsv4_token_lane dsv4_emit_token_lane(dsv4_kb *kb, const dsv4_kernel *k);

/* Dequantize this thread's lane of token `row` (i64) of the block at byte
 * pointer blk, with block size bs (i64), into bf16 at out_row (byte pointer
 * to the token's first output value, 16-byte aligned). */
void dsv4_emit_dequant_lane(dsv4_kb *kb, const dsv4_kernel *k, LLVMValueRef lane, LLVMValueRef blk,
                            LLVMValueRef row, LLVMValueRef bs, LLVMValueRef out_row);
/* Store zeros over this thread's lane of the output row. */
void dsv4_emit_zero_lane(dsv4_kb *kb, const dsv4_kernel *k, LLVMValueRef lane, LLVMValueRef out_row);

#endif
