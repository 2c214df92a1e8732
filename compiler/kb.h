/* kb.h -- the small target-neutral kernel-builder layer over the LLVM C API.
 *
 * Generators speak only this layer and the target hook table: they never
 * test a target's name.  The same source compiles against LLVM 19 (PTX and
 * AMDGCN, opaque pointers) and LLVM 15 (SPIR-V through the translator, which
 * needs typed pointers); pointer types are made in one place, kb_ptr_to().
 * Memory is addressed as byte pointers plus 64-bit byte offsets.
 */
#ifndef DSV4_KB_H
#define DSV4_KB_H

#include <llvm-c/Core.h>

#include "diag.h"
#include "plan.h"

typedef struct dsv4_kb dsv4_kb;

/* One warpgroup matrix product (dsv4_target_ir.wgmma). */
enum { KB_MMA_E4M3 = 1, KB_MMA_BF16 = 2 };
typedef struct kb_wgmma {
  int type;       /* KB_MMA_E4M3 or KB_MMA_BF16 */
  int n, ksteps;  /* columns (8..256, multiple of 8), k-steps (1..32) */
  int sw;         /* swizzle atom row bytes: 64 or 128 */
  int b_mn_major; /* B N-major (bf16 only) */
  int b_lbo;      /* N-major B: bytes between its sw-byte column blocks */
  int accumulate; /* D += (d given) rather than D = */
  int a_regs;     /* A from registers (bf16): a[4 ks + r] is this thread's i32 r of step ks */
} kb_wgmma;

/* Per-target IR hooks: everything a generator may need that differs by
 * target.  Each target file defines one of these. */
typedef struct dsv4_target_ir {
  dsv4_target_kind kind;
  unsigned global_as;       /* address space of kernel pointer arguments */
  unsigned shared_as;       /* address space of CTA-shared memory */
  const char *(*triple)(const char *arch);
  const char *datalayout;   /* NULL: taken from the target machine */
  const char *opt_pipeline; /* new-PM pipeline run before emission */
  /* Declare fn a kernel: calling convention, annotations, launch bounds. */
  void (*mark_kernel)(dsv4_kb *kb, LLVMValueRef fn, int threads);
  LLVMValueRef (*thread_id)(dsv4_kb *kb);         /* i32 thread index in CTA (x) */
  LLVMValueRef (*block_id)(dsv4_kb *kb, int dim); /* i32 CTA index */
  void (*barrier)(dsv4_kb *kb);                   /* CTA barrier + shared fence */
  /* Optional fast conversions; NULL (or a hook that declines by returning
   * 0) falls back to the generic integer code of kb.c. */
  int (*cvt_e4m3x2)(dsv4_kb *kb, LLVMValueRef pair_i16, LLVMValueRef out_f32[2]);
  LLVMValueRef (*cvt_bf16x2)(dsv4_kb *kb, LLVMValueRef lo, LLVMValueRef hi); /* -> i32 (lo in bits 0..15) */
  /* Optional: the same of max(x, 0) (a NaN stays NaN), or NULL. */
  LLVMValueRef (*cvt_bf16x2_relu)(dsv4_kb *kb, LLVMValueRef lo, LLVMValueRef hi);
  /* Optional: two bf16 products, each rounded once to nearest even, bf16
   * subnormals kept (i32-packed pairs, lo in bits 0..15); NULL or a NULL
   * result where the target has no such instruction. */
  LLVMValueRef (*mul_bf16x2)(dsv4_kb *kb, LLVMValueRef a, LLVMValueRef b);
  /* Optional streaming (read-once / write-once) accesses that keep data out
   * of the caches; NULL: plain accesses.  Loads take 2 or 4 words. */
  LLVMValueRef (*load_stream)(dsv4_kb *kb, LLVMValueRef bptr, int words); /* -> <words x i32> */
  /* Optional f32 pair -> two e4m3 bytes (RNE, satfinite) as i16 (lo first). */
  LLVMValueRef (*cvt_e4m3x2_from_f32)(dsv4_kb *kb, LLVMValueRef lo, LLVMValueRef hi);
  /* Optional reduction of an f32 across aligned groups of `width` threads
   * without shared memory (kb_lane_reduce asks only for width a power of
   * two <= kb->warp and the CTA a whole number of groups, so that each
   * group is whole and inside one warp); NULL or a NULL result:
   * kb_lane_reduce's shared-memory version.  kb_butterfly builds one from
   * a target's lane exchange. */
  LLVMValueRef (*lane_reduce)(dsv4_kb *kb, LLVMValueRef v, int width, int op);
  /* Optional f32 special functions (KB_EXP2, KB_LOG2, KB_EXP2_FTZ); NULL or a NULL
   * result: the llvm.exp2 / llvm.log2 intrinsics. */
  LLVMValueRef (*math)(dsv4_kb *kb, int fn, LLVMValueRef x);
  /* Optional warp matrix units.  mma_e4m3_16x8x32: D[16x8] = A[16x32] *
   * B[32x8] + C in f32 with e4m3 A and B in the PTX m16n8k32 fragment
   * layout (a: 4 x i32, b: 2 x i32, c/d: 4 x f32); returns 0 when the
   * target or arch has none.  shfl_xor: f32 v of the lane (lane ^ mask). */
  int (*mma_e4m3_16x8x32)(dsv4_kb *kb, LLVMValueRef *a, LLVMValueRef *b, LLVMValueRef *c, LLVMValueRef *d);
  LLVMValueRef (*shfl_xor)(dsv4_kb *kb, LLVMValueRef v, int mask);
  LLVMValueRef (*shfl_idx)(dsv4_kb *kb, LLVMValueRef v, LLVMValueRef src_lane); /* f32 v of lane src_lane */
  LLVMValueRef (*vote_any)(dsv4_kb *kb,
                           LLVMValueRef pred); /* optional: i1, pred holds in some lane of the (whole) warp */
  /* Optional: *mask (i32) gets the lanes of the (whole) warp whose v (i32)
   * equals this lane's; returns 0 when the target or arch has none (a NULL
   * mask asks only that). */
  int (*match_any)(dsv4_kb *kb, LLVMValueRef v, LLVMValueRef *mask);
  /* Optional, for choices made at run time (never at compile time): the
   * CTAs of the grid (i32), and an upper bound on the device's processors
   * (i32; PTX %nsmid); NULL where the target has none. */
  LLVMValueRef (*grid_ctas)(dsv4_kb *kb);
  LLVMValueRef (*units)(dsv4_kb *kb);
  /* Optional bf16 warp matrix units.  mma_bf16_16x8x16: D[16x8] = A[16x16]
   * * B[16x8] + C in f32, bf16 pairs packed in i32 in the PTX m16n8k16
   * fragment layout (a: 4 x i32, b: 2 x i32, c/d: 4 x f32).  ldmatrix_x4:
   * four 8x8 b16 matrices from shared memory (lanes 8i..8i+7 give matrix
   * i's row addresses; trans: transposed), out[i] = this lane's part of
   * matrix i.  Both return 0 when the target or arch has none. */
  int (*mma_bf16_16x8x16)(dsv4_kb *kb, LLVMValueRef *a, LLVMValueRef *b, LLVMValueRef *c, LLVMValueRef *d);
  int (*ldmatrix_x4)(dsv4_kb *kb, LLVMValueRef sptr, int trans, LLVMValueRef *out);
  /* Optional asynchronous global -> shared copies of 4, 8 or 16 bytes
   * (src_bytes, i32, of them read, the rest zero-filled) and a wait for all
   * of this thread's outstanding ones; cp_async returns 0 when the target
   * or arch has none (a NULL dst asks only that). */
  int (*cp_async)(dsv4_kb *kb, LLVMValueRef sdst, LLVMValueRef gsrc, int bytes, LLVMValueRef src_bytes);
  void (*cp_async_wait_all)(dsv4_kb *kb);
  /* a hint: bring the line holding global address gptr into the L2 (NULL: none) */
  void (*prefetch_l2)(dsv4_kb *kb, LLVMValueRef gptr);
  /* Close this thread's current group of copies; wait until at most n
   * groups are outstanding (NULL: the target has no groups). */
  void (*cp_async_commit)(dsv4_kb *kb);
  void (*cp_async_wait)(dsv4_kb *kb, int n);
  /* Optional barrier of the warp's threads (memory ordered among them). */
  void (*warp_sync)(dsv4_kb *kb);
  /* Optional byte permute (kb_byte_perm says what it computes; NULL: the
   * helper builds it from shifts and masks). */
  LLVMValueRef (*byte_perm)(dsv4_kb *kb, LLVMValueRef a, LLVMValueRef b, int sel);
  /* Optional warpgroup matrix units (PTX sm_90a wgmma).  wgmma: for the
   * 128 threads of a warpgroup (4 consecutive warps from a multiple of 4),
   * starts D[64 x n] (+)= sum over ks < ksteps of A_ks[64 x k] * B_ks[k x n]
   * in f32 as one group (k = 32 e4m3 or 16 bf16 values a step; op says
   * which), both operands read from shared memory in atoms of 8 rows of sw
   * bytes (64 or 128; atoms 8 sw bytes apart, the first 1024-byte
   * aligned) whose 16-byte pieces are swizzled as kb_swizzle() says.  A is
   * K-major: a[ks] points at the first row's bytes of step ks (with
   * op->a_regs, bf16, A comes from registers instead: a[4 ks + r], r < 4,
   * is this thread's i32 r of step ks in the layout of an m64n16 f32
   * accumulator's values 8 ks + 2 r, + 1, packed as bf16 pairs, so the
   * converted accumulators of one product are the A of the next; they too
   * belong to the unit until wgmma_wait).  B is
   * K-major the same way (rows are its n columns), or, with op->b_mn_major
   * (bf16), N-major: rows of B are k rows of sw bytes of n values, b[ks]
   * points at step ks's first row, and the next sw bytes of n are
   * op->b_lbo bytes on.  d gets this thread's n / 2 values (with
   * op->accumulate it also gives them), not to be touched before
   * wgmma_wait has returned them: d[4i + e] is row 16 (warp % 4) + lane / 4
   * + 8 (e / 2), column 8i + 2 (lane % 4) + (e % 2).  Returns 0 when the
   * target or arch has none (d NULL asks only that).  wgmma_wait: waits
   * until at most `pending` groups are running and hands back the nd
   * values of a group that has finished (d in, d out; an a_regs group's A
   * registers ride along, bitcast to f32, so that nothing reuses them
   * while the unit reads them).  fence_proxy_async:
   * orders this thread's earlier ordinary shared-memory writes (cp.async
   * included) before later matrix-unit reads of them (then a barrier). */
  int (*wgmma)(dsv4_kb *kb, const struct kb_wgmma *op, LLVMValueRef *a, LLVMValueRef *b, LLVMValueRef *d);
  void (*wgmma_wait)(dsv4_kb *kb, int pending, LLVMValueRef *d, int nd);
  /* Optional named barriers (ids 1..15; 0 is `barrier`'s) over `threads`
   * threads, whole warps: sync waits until that many have arrived (its
   * own warp included), arrive counts this warp and goes on; shared
   * memory written before an arrive is visible after the sync. */
  void (*bar_sync)(dsv4_kb *kb, int id, int threads);
  void (*bar_arrive)(dsv4_kb *kb, int id, int threads);
  /* Optional per-warpgroup register allotment (PTX setmaxnreg): this
   * warpgroup's registers a thread grow (grow) or shrink to regs.  The
   * kernel needs a register cap at entry (min_ctas) and each role in one
   * branch of an if/else.  Returns 0 when the target or arch has none (regs
   * 0 asks only that). */
  int (*set_max_regs)(dsv4_kb *kb, int regs, int grow);
  /* Optional occupancy request: the kernel being built should keep n CTAs
   * a multiprocessor resident (the register allocation is capped to fit). */
  void (*min_ctas)(dsv4_kb *kb, int n);
  void (*fence_proxy_async)(dsv4_kb *kb);
  /* Optional CTA pairs (PTX sm_90 clusters, sized at launch; a CTA
   * launched alone is a cluster of one).  cluster_rank: this CTA's rank in
   * its cluster (i32); returns 0 when the target or arch has none (a NULL
   * output asks only that).  cluster_sync: every thread
   * of every CTA of the cluster arrives and waits; ordered 1: with release /
   * acquire (barrier initialisation before it is visible after it), 0:
   * execution only (the arrival does not wait for this thread's earlier
   * stores, global ones included, to be performed).  mbar_*: a
   * barrier object in shared memory (8 bytes, 8-aligned) completing a phase
   * each `count` arrivals: init (one thread, then a cluster_sync), arrive on
   * this CTA's (peer NULL) or on the one at the same address in CTA `peer`
   * (the default release at CTA scope: for handing back a buffer whose
   * reads have completed), wait until the phase of parity `parity`
   * (i32 0/1) has completed (the default acquire at CTA scope: the barrier
   * and the data it guards are this CTA's shared memory). */
  int (*cluster_rank)(dsv4_kb *kb, LLVMValueRef *rank);
  void (*cluster_sync)(dsv4_kb *kb, int ordered);
  void (*mbar_init)(dsv4_kb *kb, LLVMValueRef sptr, LLVMValueRef count);
  void (*mbar_arrive)(dsv4_kb *kb, LLVMValueRef sptr, LLVMValueRef peer);
  void (*mbar_wait)(dsv4_kb *kb, LLVMValueRef sptr, LLVMValueRef parity);
  /* Optional programmatic dependent launch (PTX sm_90 griddepcontrol):
   * wait 1, this grid waits until the grid launched before it in the stream
   * has finished and its memory writes are visible (at once when this grid
   * was not launched as its dependent); wait 0, this CTA allows the grid
   * launched after it to be placed before this grid ends (once every CTA
   * has allowed it or exited).  Returns 0 when
   * the target or arch has none (nothing emitted). */
  int (*grid_dep)(dsv4_kb *kb, int wait);
  /* Optional asynchronous copies to the other CTA of a pair (the matrix
   * unit's proxy: no fence between them and its reads there).
   * copy_to_peer: `bytes` (a multiple of 16, both addresses 16-aligned)
   * from src here to the same address as dst in CTA `peer`, completing
   * that many bytes of transactions on the barrier object at mbar's
   * address there.  mbar_expect: arrive on this CTA's barrier object (the
   * default release at CTA scope) and have its phase also wait for `bytes`
   * (i32) of such transactions. */
  void (*copy_to_peer)(dsv4_kb *kb, LLVMValueRef dst, LLVMValueRef src, int bytes, LLVMValueRef mbar,
                       LLVMValueRef peer);
  void (*mbar_expect)(dsv4_kb *kb, LLVMValueRef sptr, LLVMValueRef bytes);
  /* optional (TMA): tma_load3 copies the box of the rank-3 tensor map at
   * global address map (device memory, 64-byte aligned) at element
   * coordinates c[0..2] (i32; outside the tensor: zeros) to shared dst
   * (128-byte aligned; 1024 for a 128-byte swizzle); bulk_load copies
   * `bytes` (a multiple of 16, both addresses 16-aligned) from global src.
   * Both complete on the shared barrier object mbar, counting the box's or
   * the copy's bytes against its transaction count (mbar_expect). */
  void (*tma_load3)(dsv4_kb *kb, LLVMValueRef dst, LLVMValueRef map, const LLVMValueRef c[3], LLVMValueRef mbar);
  void (*tma_acquire)(dsv4_kb *kb, LLVMValueRef map); /* before a thread's first tma_load3 of a host-written map */
  void (*bulk_load)(dsv4_kb *kb, LLVMValueRef dst, LLVMValueRef src, int bytes, LLVMValueRef mbar);
  void (*store_stream16)(dsv4_kb *kb, LLVMValueRef v4i32, LLVMValueRef bptr);
} dsv4_target_ir;

struct dsv4_kb {
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMBuilderRef b;
  const dsv4_target_ir *t;
  const char *arch;
  int warp; /* threads a warp: the arch's (targets/caps.c), or the sub-group size the kernel's spec requires */
  LLVMValueRef fn;
  LLVMTypeRef v, i1, i8, i16, i32, i64, f32;
  LLVMTypeRef gptr; /* i8 pointer in the global address space */
  unsigned entry_flags; /* DSV4_ENTRY_* the generators' code earns the bundle entry */
};

/* Create a context, module (named after the kernel) and builder for kernel
 * k on target t: its arch and its warp (dsv4_kernel_warp) from the plan. */
void kb_init(dsv4_kb *kb, const dsv4_target_ir *t, const dsv4_kernel *k);
/* Free everything kb_init made (the module too, unless taken). */
void kb_dispose(dsv4_kb *kb);

/* Start kernel `name` with the given argument kinds (dsv4_arg_kind); the
 * builder is left at the start of its entry block. */
LLVMValueRef kb_kernel(dsv4_kb *kb, const char *name, const unsigned char *kinds, const char *const *names, int n,
                       int threads);
LLVMValueRef kb_arg(dsv4_kb *kb, int i);

LLVMValueRef kb_i32(dsv4_kb *kb, long long v);
LLVMValueRef kb_i64(dsv4_kb *kb, long long v);
LLVMValueRef kb_sext64(dsv4_kb *kb, LLVMValueRef v);
LLVMValueRef kb_zext64(dsv4_kb *kb, LLVMValueRef v);

/* Pointer to `elem` in address space as (the one typed/opaque difference). */
LLVMTypeRef kb_ptr_to(dsv4_kb *kb, LLVMTypeRef elem, unsigned as);
/* base (byte pointer) + off bytes (i64). */
LLVMValueRef kb_byte_ptr(dsv4_kb *kb, LLVMValueRef base, LLVMValueRef off);
/* Load / store a value of type ty at a byte pointer with known alignment. */
LLVMValueRef kb_load(dsv4_kb *kb, LLVMTypeRef ty, LLVMValueRef bptr, unsigned align);
void kb_store(dsv4_kb *kb, LLVMValueRef val, LLVMValueRef bptr, unsigned align);
/* The same for data touched once: naturally aligned 8- or 16-byte loads and
 * 16-byte stores go through the target's streaming accesses when it has them. */
LLVMValueRef kb_load_stream(dsv4_kb *kb, LLVMTypeRef ty, LLVMValueRef bptr, unsigned align);
void kb_store_stream(dsv4_kb *kb, LLVMValueRef val, LLVMValueRef bptr, unsigned align);

/* A load of ty at byte pointer base + off (i64) executed only when cond
 * holds; the value is `otherwise` when it does not (the load is skipped,
 * so an out-of-bounds address under a false cond is never touched). */
LLVMValueRef kb_load_if(dsv4_kb *kb, LLVMValueRef cond, LLVMTypeRef ty, LLVMValueRef base, LLVMValueRef off,
                        unsigned align, LLVMValueRef otherwise);

/* Stage `total` bytes (a multiple of 16) from global src + off (i64) into
 * shared memory at dst as rows of row_bytes at stride dst_stride (padding
 * rows against bank conflicts), 16 bytes a thread at a time over the CTA's
 * `threads` threads (tid its index).  The source rows lie src_stride bytes
 * apart (i64, a multiple of 16; NULL: row_bytes, packed).  Bytes at or
 * past valid (i64, counted packed; NULL: all) are not read and land as
 * zeros.  No barrier. */
void kb_stage_rows(dsv4_kb *kb, LLVMValueRef src, LLVMValueRef off, LLVMValueRef src_stride, long long total,
                   LLVMValueRef valid, int row_bytes, int dst_stride, LLVMValueRef dst, LLVMValueRef tid, int threads);

/* Structured control flow: if (cond) { ... } [else { ... }] */
typedef struct {
  LLVMBasicBlockRef then_bb, else_bb, end_bb;
  LLVMValueRef br; /* the conditional branch that opened it */
} kb_if_t;
kb_if_t kb_if(dsv4_kb *kb, LLVMValueRef cond, const char *name);
void kb_else(dsv4_kb *kb, kb_if_t *f);
void kb_endif(dsv4_kb *kb, kb_if_t *f);
/* phi of a (reaching from block from_a) and b (from from_b). */
LLVMValueRef kb_phi(dsv4_kb *kb, LLVMValueRef a, LLVMBasicBlockRef from_a, LLVMValueRef b, LLVMBasicBlockRef from_b);
/* Return early from the kernel when cond holds. */
void kb_return_if(dsv4_kb *kb, LLVMValueRef cond);

/* Call a function declared by name (intrinsic or built-in), declaring it on
 * first use with the given type and calling convention. */
LLVMValueRef kb_call(dsv4_kb *kb, const char *name, LLVMTypeRef ret, LLVMTypeRef *ptys, LLVMValueRef *args, int n,
                     unsigned cc);

/* Numeric conversions, in plain integer/float IR (bit-exact by construction). */
LLVMValueRef kb_e4m3_to_f32(dsv4_kb *kb, LLVMValueRef byte_i8);   /* OCP e4m3fn */
LLVMValueRef kb_ue8m0_to_f32(dsv4_kb *kb, LLVMValueRef byte_i8);  /* 2^(b-127) */
LLVMValueRef kb_ue8m0_to_bf16x2(dsv4_kb *kb, LLVMValueRef byte_i8); /* the same, exactly, as an i32 bf16 pair */
/* Byte i of the result (i32) is byte (sel >> 4 i) & 7 of the pair (a, b):
 * 0-3 a's, 4-7 b's (PTX prmt's default mode; sel's other bits 0). */
LLVMValueRef kb_byte_perm(dsv4_kb *kb, LLVMValueRef a, LLVMValueRef b, int sel);
/* Two e4m3 values, bytes 1 and 3 of y (its other bytes ignored), as a bf16
 * pair (byte 1's in bits 0..15) each 2^-120 times its value, exactly: the
 * e4m3 sign, exponent and mantissa bits moved into bf16's (an e4m3
 * subnormal becomes a bf16 subnormal).  Four integer instructions a pair,
 * where a convert and a scale multiply take more; the caller multiplies
 * 2^120 back in wherever it folds the scale. */
LLVMValueRef kb_e4m3x2_bits_bf16x2(dsv4_kb *kb, LLVMValueRef y);
LLVMValueRef kb_bf16_to_f32(dsv4_kb *kb, LLVMValueRef bits_i16);
LLVMValueRef kb_f32_to_bf16(dsv4_kb *kb, LLVMValueRef f);         /* RNE, NaN -> 0x7FC0 */
/* Two at a time, through the target's instructions where it has them
 * (a NaN then keeps the target's canonical NaN pattern). */
void kb_e4m3x2_to_f32(dsv4_kb *kb, LLVMValueRef b0_i8, LLVMValueRef b1_i8, LLVMValueRef out[2]);
/* The same from the two bytes as one i16 (b0 in the low byte). */
void kb_e4m3x2_pair_to_f32(dsv4_kb *kb, LLVMValueRef pair_i16, LLVMValueRef out[2]);
void kb_f32x2_to_bf16(dsv4_kb *kb, LLVMValueRef a, LLVMValueRef b, LLVMValueRef out_i16[2]);
/* a and b as hi + lo bf16 parts (hi = bf16(x), lo = bf16(x - hi)), each
 * pair packed in an i32 with a's part in bits 0..15: the words a matrix
 * operand takes.  The hi parts are widened back from the packed word (a
 * shift and a mask), never unpacked and packed again. */
void kb_f32x2_to_bf16_split(dsv4_kb *kb, LLVMValueRef a, LLVMValueRef b, LLVMValueRef *hi_i32, LLVMValueRef *lo_i32);

/* f32 -> OCP e4m3fn byte (i8): round to nearest even, saturating at 448,
 * NaN -> 0x7F; two at a time through the target where it can. */
LLVMValueRef kb_f32_to_e4m3(dsv4_kb *kb, LLVMValueRef f);
void kb_f32x2_to_e4m3(dsv4_kb *kb, LLVMValueRef a, LLVMValueRef b, LLVMValueRef out_i8[2]);

/* Reductions across aligned groups of `width` consecutive threads of a CTA
 * (result in every thread of the group).  Must be reached by every thread
 * of the CTA (uniform control flow): the shared-memory fallback uses CTA
 * barriers.  threads is the CTA size. */
enum { KB_REDUCE_MAX = 1, KB_REDUCE_ADD = 2 };
LLVMValueRef kb_lane_reduce(dsv4_kb *kb, LLVMValueRef v, int width, int op, int threads);
/* The cross-lane reduction every target's lane_reduce hook shares: log2(width)
 * butterfly steps, m = width / 2 down to 1, each folding in the value of
 * lane ^ m, which xor_lane(kb, v, m) fetches (a shuffle of the target's warp);
 * every lane of an aligned group of width ends with the group's result.  The
 * same steps in the same order on every target, so the sums agree bit for bit. */
LLVMValueRef kb_butterfly(dsv4_kb *kb, LLVMValueRef v, int width, int op,
                          LLVMValueRef (*xor_lane)(dsv4_kb *kb, LLVMValueRef v, int mask));

/* 2^x and log2(x) in f32 (the target's fast instructions where it has them).
 * kb_exp2_ftz may flush results below 2^-126 to zero (where the target
 * gains from it: one instruction instead of a range check, a scaled input
 * and a squared result on PTX): for softmax weights, whose sum is at least
 * 1 in the units they are kept in, such terms are far below any rounding. */
enum { KB_EXP2 = 1, KB_LOG2 = 2, KB_EXP2_FTZ = 3 };
LLVMValueRef kb_exp2(dsv4_kb *kb, LLVMValueRef x);
LLVMValueRef kb_exp2_ftz(dsv4_kb *kb, LLVMValueRef x);
LLVMValueRef kb_log2(dsv4_kb *kb, LLVMValueRef x);

/* A counted loop for (iv = start; iv < end; iv++) (i32, signed compare)
 * carrying n values: after kb_for the builder is in the body, iv and
 * vars[] (phis) are the current values; kb_for_end takes the next values and
 * leaves the builder after the loop, where vars[] hold the final values. */
#define KB_LOOP_MAX_VARS 192
typedef struct {
  LLVMBasicBlockRef head, exit;
  LLVMValueRef iv;
  int step; /* 1 unless the caller sets another before kb_for_end */
  int n;
  LLVMValueRef vars[KB_LOOP_MAX_VARS];
} kb_loop_t;
void kb_for(dsv4_kb *kb, kb_loop_t *l, LLVMValueRef start, LLVMValueRef end, int n, const LLVMValueRef *init);
void kb_for_end(dsv4_kb *kb, kb_loop_t *l, const LLVMValueRef *next);

/* Atomic add of an i32 at a byte pointer (any address space); returns the
 * old value.  Relaxed ordering: barriers order the phases around it. */
LLVMValueRef kb_atomic_add_i32(dsv4_kb *kb, LLVMValueRef bptr, LLVMValueRef v);

/* Where byte off (i64) of a region of 8-row atoms of sw-byte rows
 * (sw 64 or 128, the region 1024-byte aligned) lives under the matrix
 * units' swizzle: its 16-byte piece index XORed with the row-in-atom bits
 * (off bits 7.. onward), so a column of pieces spreads over all banks. */
LLVMValueRef kb_swizzle(dsv4_kb *kb, LLVMValueRef off, int sw);
/* Byte offset of (row, kbyte) in a region of `rows` rows laid out for the
 * matrix units: rows of sw bytes (64 or 128) in 8-row atoms, byte kbyte of
 * a row in column block kbyte / sw (blocks rows * sw bytes apart), the
 * 16-byte pieces swizzled (row, kbyte: i64). */
LLVMValueRef kb_mma_offset(dsv4_kb *kb, int sw, int rows, LLVMValueRef row, LLVMValueRef kbyte);
/* x / d and x % d (i64, d > 0), by shift and mask when d (run-time) is a
 * power of two (a branch, uniform when d is). */
void kb_udivrem_fast(dsv4_kb *kb, LLVMValueRef x, LLVMValueRef d, LLVMValueRef *q, LLVMValueRef *r);
/* A shared array like kb_shared_array, aligned to `align` bytes. */
LLVMValueRef kb_shared_array_aligned(dsv4_kb *kb, LLVMTypeRef ty, int n, int align, const char *name);
/* The CTA's dynamic shared memory (a byte pointer; its size is the
 * launch's, dsv4_kernel_shared_bytes()). */
LLVMValueRef kb_dyn_shared(dsv4_kb *kb);

/* A CTA-shared array of n elements of type ty (one per call). */
LLVMValueRef kb_shared_array(dsv4_kb *kb, LLVMTypeRef ty, int n, const char *name);

/* Check the module (no LLVM abort on bad IR): 0 if valid, else a diagnostic. */
int kb_verify(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d);

#endif
