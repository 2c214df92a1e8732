/* shape.h -- what the files of the indexer's paged MQA logits generator
 * share (docs/ops.md section 4), and nothing form-specific:
 *
 *   logits[r, k] = kscale_k * sum_h weights[r, h] * max(0, sum_d q[r, h, d] * K_k[d])
 *
 * for row r = b * next_n + j and k < context_lens[b, j]; -inf for k in
 * [ctx, row_len).  Heads and head dim are the kernel's (the spec).  K rows
 * are e4m3 values with one fp32 scale per token, addressed through the
 * layout and the block table; q is e4m3 and the products accumulate in
 * fp32.
 *
 * The generator is one entry point (logits.c: dsv4_gen_paged_mqa_logits,
 * which picks the form) over kernel forms in files that include none of
 * each other:
 *
 *   logits_portable.c   no matrix units: a CTA covers tokens_per_cta
 *                       positions of one row, a position's heads split
 *                       over threads that reduce their partial sums
 *   logits_warp.c       PTX mma.sync m16n8k32 e4m3: the row-per-CTA matrix
 *                       path (the portable form's launch geometry, taken
 *                       where it fits), and the warp-matrix form
 *                       (tile.matrix: a CTA per batch entry, a cp.async
 *                       ring of K per warp)
 *   logits_warpgroup.c  tile.matrix on targets with wgmma: one warpgroup a
 *                       CTA, K by cp.async or TMA, the head sum a second
 *                       product
 *
 * What more than one form needs lives in logits_rows.c (where a position's
 * K row and scale lie, the rows' contexts, a weight's offset, storing a
 * logit), declared here with an lg_ prefix.  The indexer's other op, top-k,
 * is topk.c beside them; it shares nothing with these.
 *
 * Short names the forms use throughout:
 *
 *   H      heads (k->heads)              D    head dim, bytes of e4m3 (layout.dim)
 *   NM     DSV4_LOGITS_MAX_NEXT_N: the rows (of one batch entry) a matrix-form CTA takes
 *   P      tokens_per_cta: the positions a CTA covers
 *   S      DSV4_LOGITS_STAGES: steps of K a ring holds
 *   MT, NT 16-row m-tiles, 8-column n-tiles of a product
 *   KS     32-byte k-steps of D          CW   16-byte pieces of a lane's D/4-byte slice
 *   QS, RS stride of a staged q row, K row (D + 16: padded against bank conflicts)
 *   QR     q rows the warpgroup form stages (NM H)
 *   WG_M   positions a warpgroup step takes (64)
 *   r0     the CTA's first logits row (batch entry x next_n)
 *   breq   the batch entry (request), i64
 *   ctxj   context length of row r0 + j  cmax  the longest of them
 *   p0     first position of a tile or step
 *   g, c   lane >> 2, lane & 3: the PTX m16n8 fragment's row (and g + 8) and
 *          column pair (2c, 2c + 1); gid, tig in the row-per-CTA path (the
 *          PTX ISA's groupID, threadID_in_group)
 *   hh     0/1: which of a lane's two fragment rows, g or g + 8
 *   e      element of a fragment         it   step of a ring
 */
#ifndef DSV4_INDEXER_SHAPE_H
#define DSV4_INDEXER_SHAPE_H

#include "../gen.h"

/* The kernel's argument indices, in the order dsv4_abi.h's X-macro gives:
 * LG_<name>. */
#define LG_ARG_INDEX(nm, kind) LG_##nm,
enum { DSV4_ARGS_PAGED_MQA_LOGITS(LG_ARG_INDEX) LG_NARGS };
#undef LG_ARG_INDEX

/* Warps of a matrix-form CTA (the warp form's four; the warpgroup form's
 * one warpgroup). */
enum { LG_WARPS = DSV4_LOGITS_WARPS };

/* Where position pos (i64) of a row of request breq (i64, context ctx) lives:
 * ok (i1) says it is a position to compute (before ctx and the row's end,
 * inside the block table, at a block of the cache); row and scale are the
 * i64 byte offsets, in the cache, of its values and of its scale (those of
 * block 0 when !ok, so always in bounds). */
typedef struct {
  LLVMValueRef ok, row, scale;
} lg_kpos;
lg_kpos lg_locate(dsv4_kb *kb, const dsv4_layout *L, LLVMValueRef pos, LLVMValueRef ctx, LLVMValueRef breq);

/* The byte offset in `weights` of column f (i32, = j H + h: row r0 + j's
 * head h) of the CTA's rows from r0. */
LLVMValueRef lg_weight_at(dsv4_kb *kb, LLVMValueRef r0, LLVMValueRef f, int H);

/* The context lengths of rows r0 + j (0 past next_n) into ctxj; returns
 * the longest, up to which K rows are loaded. */
LLVMValueRef lg_row_contexts(dsv4_kb *kb, LLVMValueRef r0, LLVMValueRef *ctxj);

/* Where a form puts its logits: NULL, the logits argument's rows; else
 * the chunk (byte pointer to shared f32) of the fused logits_topk, row r0
 * + j's position p0 + i at word j P + i: the form sets r0 (i32, its CTA's
 * first row) and p0 (i32, its CTA's first position), and spare (NULL or
 * shared memory of its own, at least dsv4_topk_select_bytes(threads), no
 * longer used once it returns). */
typedef struct {
  LLVMValueRef chunk, r0, p0, spare;
  int P;
} lg_dest;

/* Where `mine` and the position pos (i32) is in the row: logits row r64
 * (i64) at pos gets scale * sum where the position is ok and before ctx,
 * -inf where it is not (in dest's chunk where dest is not NULL). */
void lg_store_logit(dsv4_kb *kb, const lg_dest *dest, LLVMValueRef sum, LLVMValueRef mine, LLVMValueRef r64,
                    LLVMValueRef pos, LLVMValueRef ok, LLVMValueRef ctx, LLVMValueRef scale);

/* The forms: each builds kernel k's body into kb from its entry block.
 * lg_portable always can; lg_row_mma where lg_row_mma_fits; lg_warp where
 * lg_warp_target_ok, returning 1 when its shared memory is not
 * dsv4_logits_warp_shared_bytes(); lg_warpgroup where lg_warpgroup_fits,
 * returning 1 when its shared memory is not dsv4_logits_wg_shared_bytes(). */
void lg_portable(dsv4_kb *kb, const dsv4_kernel *k);
/* The portable form's body for the positions from first (i32) of row
 * dest->r0 (a step of threads / groups; the fused logits_topk's). */
void lg_portable_step(dsv4_kb *kb, const dsv4_kernel *k, LLVMValueRef first, const lg_dest *dest);
int lg_row_mma_fits(dsv4_kb *kb, const dsv4_kernel *k);
void lg_row_mma(dsv4_kb *kb, const dsv4_kernel *k);
int lg_warp_target_ok(dsv4_kb *kb);
int lg_warp(dsv4_kb *kb, const dsv4_kernel *k);
int lg_warpgroup_fits(dsv4_kb *kb, const dsv4_kernel *k);
/* dest NULL: the logits argument; else the fused op's chunk (dynamic
 * shared memory; extra_smem: the bytes of it a CTA uses as the form
 * reckons its occupancy), its ring spare after the steps */
int lg_warpgroup(dsv4_kb *kb, const dsv4_kernel *k, lg_dest *dest, int extra_smem);

#endif
