/* warpgroup.h -- the warpgroup form of the sparse MLA decode (tile.matrix
 * where the target has wgmma: DSV4_FORM_WARPGROUP, and
 * DSV4_FORM_WARPGROUP_PAIR for CTA pairs), shared by its two files:
 * warpgroup.c (the entry, the consumer warpgroups), which calls
 * warpgroup_producers.c (the producer warps); the producers call nothing
 * of warpgroup.c (the hand-offs both use are below).  No other file
 * includes it.
 *
 * One CTA per (token, 64 heads), in three roles (form_rules.h fixes the
 * shape and the shared memory).  dsv4_decode_wg_producers() producer warps
 * find each tile's 64 K rows and dequantize them with the gathers'
 * layout-driven code straight from the cache into one of two bf16 K tiles,
 * laid out for the matrix units (128-byte swizzled atoms), while two
 * consumer warpgroups compute the tile before it (FlashMLA's split of the
 * sparse decode's math warpgroups):
 *
 *   lead:     S = q K^T                    (wgmma m64n64k16, q and K from shared memory)
 *             online softmax, base 2 (no maxima cross warpgroups)
 *             P (tile.p: bf16, or hi + lo bf16 parts, as in the warp
 *             form) and each row's rescale factor -> shared memory, for
 *             the follower
 *             O_lead += P V[:, 0 .. LEAD_DIMS)        (wgmma m64n128k16 in 512-thread CTAs, as both forms are;
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
 * writes its dims at the end through the same sd_head_out as the warp form,
 * finished rows staged in shared memory and copied out by the producers.
 */
#ifndef DSV4_SPARSE_DECODE_WARPGROUP_H
#define DSV4_SPARSE_DECODE_WARPGROUP_H

#include "shape.h"

/* Named barriers (a double-buffered one takes base and base + 1). */
enum {
  WG_BAR_FULL = 1,
  WG_BAR_EMPTY = 3,
  WG_BAR_CONS = 5,
  WG_BAR_PROD = 6,
  WG_BAR_PREADY = 7,
  WG_BAR_PFREE = 9,
  WG_BAR_OUT = 11
};

/* The pair's hand-offs are barrier objects in shared memory (mbars):
 * FULL[b] completes when this CTA's producers have stored their half of
 * tile i into K buffer b = i & 1 and the other CTA's copy of its half has
 * landed, EMPTY[b] when both CTAs' consumers have finished reading it. */
enum { WG_MB_FULL = 0, WG_MB_EMPTY = 2, WG_MBARS = 4 };

#define WG_PBYTES (DSV4_DECODE_WG_HEADS * SD_TILE * 2) /* one P part */

typedef struct {
  const dsv4_kernel *k;
  int dim;       /* the layout's dim (q and K row length) */
  int heads;     /* heads a CTA: DSV4_DECODE_WG_HEADS */
  int threads;   /* the CTA: 256 consumer threads, then the producers */
  int producers; /* producer threads (from thread 256 on) */
  int reg_cap;   /* registers a thread at launch, which setmaxnreg redistributes */
  int prod_regs; /* a producer thread's registers after setmaxnreg */
  LLVMValueRef q_tile;  /* q rows (128-byte swizzled atoms); output staging at the end */
  LLVMValueRef k_tiles; /* two K tiles (the same layout), wg_kbytes() each */
  LLVMValueRef p_bufs;  /* two P buffers, each a hi and a lo part (WG_PBYTES each; bf16 P uses hi alone) */
  LLVMValueRef red;     /* per buffer the rows' rescale factors; the rows' final (m, l); sinks */
  LLVMValueRef sinks;   /* red's third slot: the rows' sinks (read with q) */
  LLVMValueRef valid;   /* per K row of each buffer: i32 validity word */
  LLVMValueRef mbars;   /* pairs: WG_MBARS barrier objects */
  LLVMValueRef tid, token, lo, hi;
  LLVMValueRef rank, peer; /* i32: this CTA's rank in its pair, the other's */
  int pair;                /* tile.pair: launched as pairs of CTAs */
  LLVMValueRef n[2], ntiles[2];
} wg_ctx;

/* Bytes of one K tile. */
static inline long long wg_kbytes(const wg_ctx *x) { return (long long)SD_TILE * x->dim * 2; }

/* Staged output rows: v_dim bf16 values and 16 bytes of padding (a row's
 * 16-byte shift spreads a warp's eight rows over all banks). */
static inline long long wg_stage_row(const wg_ctx *x) { return (long long)x->k->v_dim * 2 + 16; }

/* Buffer buf (i32 0/1) of a double-buffered shared region of `bytes` each. */
static inline LLVMValueRef wg_buf(dsv4_kb *kb, LLVMValueRef region, LLVMValueRef buf, long long bytes)
{
  return kb_byte_ptr(kb, region, LLVMBuildMul(kb->b, kb_zext64(kb, buf), kb_i64(kb, bytes), ""));
}

/* The hand-offs both roles use (here, so the producers need nothing of
 * warpgroup.c). */

/* bar.sync (arrive 0) or bar.arrive (arrive 1) on barrier base + buf (buf
 * i32 0 or 1, uniform: the barrier id must be an immediate). */
static inline void sd_wg_bar(dsv4_kb *kb, int arrive, int base, LLVMValueRef buf, int threads)
{
  void (*f)(dsv4_kb *, int, int) = arrive ? kb->t->bar_arrive : kb->t->bar_sync;
  kb_if_t g = kb_if(kb, LLVMBuildICmp(kb->b, LLVMIntEQ, buf, kb_i32(kb, 0), ""), "bar0");
  f(kb, base, threads);
  kb_else(kb, &g);
  f(kb, base + 1, threads);
  kb_endif(kb, &g);
}

/* Barrier object base + buf (pairs). */
static inline LLVMValueRef sd_wg_mbar(dsv4_kb *kb, const wg_ctx *x, int base, LLVMValueRef buf)
{
  return kb_byte_ptr(kb, x->mbars, LLVMBuildMul(kb->b, kb_zext64(kb, LLVMBuildAdd(kb->b, buf, kb_i32(kb, base), "")),
                                                kb_i64(kb, 8), ""));
}

/* The parity of the phase of tile i's buffer that tile i (back 0) or tile
 * i - 2 (back 1) completes: its (i - lo) / 2-th use. */
static inline LLVMValueRef sd_wg_parity(dsv4_kb *kb, const wg_ctx *x, LLVMValueRef i, int back)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef u = LLVMBuildLShr(b, LLVMBuildSub(b, i, x->lo, ""), kb_i32(kb, 1), "");
  return LLVMBuildAnd(b, LLVMBuildAdd(b, u, kb_i32(kb, back), ""), kb_i32(kb, 1), "parity");
}

/* The producers' role (warpgroup_producers.c): every tile into the K
 * buffers, then the staged output rows out. */
void sd_wg_producers(dsv4_kb *kb, const wg_ctx *x);

#endif
