/* gen.h -- code generators, one per op, over the kernel builder (kb.h).
 *
 * dsv4_generate() looks the op up in one table; each generator builds its
 * kernel's function into kb's module using only kb and the target hooks.
 */
#ifndef DSV4_GEN_H
#define DSV4_GEN_H

#include "../kb.h"
#include "../ops/ops.h" /* the shape predicates the generators share with choose_form */

/* Build kernel k into kb->mod.  0 on success, else diagnostics in d.
 * It starts the op's kernel (kb_kernel with the op's signature), then
 * calls the op's generator with the builder in its entry block. */
int dsv4_generate(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d);

int dsv4_gen_dequant_gather(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d);
int dsv4_gen_paged_gather(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d);
int dsv4_gen_kv_insert(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d);


/* The threads a CTA of kernel k has on kb's target: its launch record's
 * (choose_form's, compiler/ops/), never the tile's own count. */
static inline int dsv4_gen_threads(const dsv4_kb *kb, const dsv4_kernel *k)
{
  return (int)dsv4_kernel_launch(k, kb->t->kind)->threads;
}

/* Start kernel k's module's second kernel (dsv4_abi.h: <name><suffix>, its
 * argument list), `threads` wide, in kb's module. */
void dsv4_gen_second_kernel(dsv4_kb *kb, const dsv4_kernel *k, uint32_t second, int threads);

/* Greatest common divisor (alignments of strided accesses). */
static inline int dsv4_gcd(int a, int b)
{
  while (b) {
    int t = a % b;
    a = b, b = t;
  }
  return a;
}

/* ---- shared pieces of the gather family (dequant.c) ---- */

/* Thread mapping: a CTA covers tokens_per_cta tokens; each thread owns lane
 * `lane` (values_per_thread values) of tokens_per_thread of them, token u
 * being base + u * (tokens_per_cta / tokens_per_thread) + local. */
typedef struct {
  LLVMValueRef lane;  /* i32 lane within a token, [0, dim / vpt) */
  LLVMValueRef local; /* i32 token slot of this thread within the CTA */
  LLVMValueRef base;  /* i32 first token of the CTA */
} dsv4_token_lane;
dsv4_token_lane dsv4_emit_token_lane(dsv4_kb *kb, const dsv4_kernel *k);
/* i32 index of this thread's u-th token. */
LLVMValueRef dsv4_emit_token(dsv4_kb *kb, const dsv4_kernel *k, const dsv4_token_lane *tl, int u);

/* One token a thread dequantizes: where it is and whether to read/write. */
typedef struct {
  LLVMValueRef blk;     /* byte pointer to its cache block (any value when !valid) */
  LLVMValueRef row;     /* i64 row in the block */
  LLVMValueRef out_row; /* byte pointer to its first output value, 16-byte aligned; with out_sw the
                           base of a region laid out for the matrix units (kb_mma_offset) */
  int out_sw, out_rows; /* 0, or that region's swizzle atom row bytes and rows */
  LLVMValueRef out_index; /* with out_sw: i64 row of the token in the region */
  LLVMValueRef valid;   /* i1: read the cache (else the row is +0.0) */
  LLVMValueRef write;   /* i1: store the row at all */
} dsv4_lane_token;

/* Dequantize this thread's lane of n tokens (block size bs, i64): all loads
 * first, then conversions and stores.  tensor_scale (f32) scales segments
 * whose layout scale is per tensor.  The _split form emits between(kb, arg)
 * (when not NULL) after the loads and before the stores: a wait for the
 * destination to be free, which the loads need not wait for.  With
 * `operand` the rows feed a matrix product rather than an output, so the
 * values must be the same but not the bits of a NaN: an e4m3 segment with
 * UE8M0 group scales then takes the scale in bf16 arithmetic where the
 * target has it (mul_bf16x2: e4m3 and 2^k are exact in bf16, and so is
 * their fp32 product (4 significant bits, none below 2^-136; fp32
 * overflows only where bf16 does), so one bf16 rounding of the exact
 * product is docs/ops.md's fp32 product rounded once).  n <= 8 (MAX_TOK in
 * dequant.c): the gathers' tokens_per_thread, the warp form's passes and
 * the producers' groups are held to it. */
void dsv4_emit_dequant_tokens_split(dsv4_kb *kb, const dsv4_kernel *k, LLVMValueRef lane, LLVMValueRef bs,
                                    LLVMValueRef tensor_scale, const dsv4_lane_token *t, int n,
                                    void (*between)(dsv4_kb *kb, void *arg), void *arg, int operand);
void dsv4_emit_dequant_tokens(dsv4_kb *kb, const dsv4_kernel *k, LLVMValueRef lane, LLVMValueRef bs,
                              LLVMValueRef tensor_scale, const dsv4_lane_token *t, int n);

/* The lane's vpt values of one token as f32, for computing with them: the
 * cache's bf16 dequantization (group scales), raw values for per-tensor
 * scales (the caller folds the scale in), zeros when !t->valid or for lanes
 * past the layout.  Uses t->blk, t->row, t->valid. */
void dsv4_emit_dequant_values(dsv4_kb *kb, const dsv4_kernel *k, LLVMValueRef lane, LLVMValueRef bs,
                              const dsv4_lane_token *t, LLVMValueRef *x);
int dsv4_gen_sparse_decode(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d);
int dsv4_gen_paged_mqa_logits(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d);
int dsv4_gen_topk(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d);
int dsv4_gen_paged_mqa_logits_topk(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d);

#endif
