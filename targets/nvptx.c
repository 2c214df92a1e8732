/* nvptx.c -- the PTX target: NVVM intrinsics for ids, nvvm.annotations for
 * kernels, LLVM 19's NVPTX back end, and ptxas (when installed) as judge. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../compiler/kb.h"
#include "caps.h"
#include "llvm_emit.h"
#include "target.h"

static const char *ptx_triple(const char *arch)
{
  (void)arch;
  return "nvptx64-nvidia-cuda";
}

/* Add !{fn, !"key", i32 v} to nvvm.annotations. */
static void annotate(dsv4_kb *kb, LLVMValueRef fn, const char *key, int v)
{
  LLVMMetadataRef ops[3] = {LLVMValueAsMetadata(fn), LLVMMDStringInContext2(kb->ctx, key, strlen(key)),
                            LLVMValueAsMetadata(kb_i32(kb, v))};
  LLVMValueRef node = LLVMMetadataAsValue(kb->ctx, LLVMMDNodeInContext2(kb->ctx, ops, 3));
  LLVMAddNamedMetadataOperand(kb->mod, "nvvm.annotations", node);
}

static void ptx_mark_kernel(dsv4_kb *kb, LLVMValueRef fn, int threads)
{
  annotate(kb, fn, "kernel", 1);
  annotate(kb, fn, "maxntidx", threads);
}

static void ptx_min_ctas(dsv4_kb *kb, int n) { annotate(kb, kb->fn, "minctasm", n); }

static LLVMValueRef sreg(dsv4_kb *kb, const char *name)
{
  return kb_call(kb, name, kb->i32, NULL, NULL, 0, LLVMCCallConv);
}

static LLVMValueRef ptx_thread_id(dsv4_kb *kb) { return sreg(kb, "llvm.nvvm.read.ptx.sreg.tid.x"); }

static LLVMValueRef ptx_block_id(dsv4_kb *kb, int dim)
{
  static const char *const n[] = {"llvm.nvvm.read.ptx.sreg.ctaid.x", "llvm.nvvm.read.ptx.sreg.ctaid.y",
                                  "llvm.nvvm.read.ptx.sreg.ctaid.z"};
  return sreg(kb, n[dim]);
}

static void ptx_barrier(dsv4_kb *kb) { kb_call(kb, "llvm.nvvm.barrier0", kb->v, NULL, NULL, 0, LLVMCCallConv); }

static int arch_number(const char *arch)
{
  int v = 0;
  sscanf(arch, "sm_%d", &v);
  return v;
}

/* One inline-asm statement: text over operands of types ps (constraints
 * cons), returning ret (void: none). */
static LLVMValueRef asm_call(dsv4_kb *kb, const char *text, const char *cons, LLVMTypeRef ret, LLVMTypeRef *ps,
                             LLVMValueRef *args, int n, int side_effects)
{
  LLVMTypeRef fty = LLVMFunctionType(ret, ps, (unsigned)n, 0);
  LLVMValueRef fn = LLVMGetInlineAsm(fty, (char *)text, strlen(text), (char *)cons, strlen(cons), side_effects, 0,
                                     LLVMInlineAsmDialectATT, 0);
  LLVMValueRef call = LLVMBuildCall2(kb->b, fty, fn, args, (unsigned)n, "");
  if (side_effects) { /* barriers, wgmma, setmaxnreg ...: the optimizer must not make them depend on more values
                         (convergent) */
    unsigned id = LLVMGetEnumAttributeKindForName("convergent", strlen("convergent"));
    LLVMAddCallSiteAttribute(call, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(kb->ctx, id, 0));
  }
  return call;
}

/* sm_89+: cvt.rn.f16x2.e4m3x2 (exact; e4m3 fits f16), then f16 -> f32. */
static int ptx_cvt_e4m3x2(dsv4_kb *kb, LLVMValueRef pair, LLVMValueRef out[2])
{
  if (arch_number(kb->arch) < 89)
    return 0;
  LLVMValueRef h2 = asm_call(kb, "cvt.rn.f16x2.e4m3x2 $0, $1;", "=r,h", kb->i32, &kb->i16, &pair, 1, 0);
  LLVMValueRef v = LLVMBuildBitCast(kb->b, h2, LLVMVectorType(LLVMHalfTypeInContext(kb->ctx), 2), "");
  for (int i = 0; i < 2; i++)
    out[i] = LLVMBuildFPExt(kb->b, LLVMBuildExtractElement(kb->b, v, kb_i32(kb, i), ""), kb->f32, "");
  return 1;
}

/* sm_80+: cvt.rn.bf16x2.f32 (its first operand lands in the upper half). */
static LLVMValueRef ptx_cvt_bf16x2(dsv4_kb *kb, LLVMValueRef lo, LLVMValueRef hi)
{
  LLVMTypeRef v2 = LLVMVectorType(LLVMBFloatTypeInContext(kb->ctx), 2);
  LLVMTypeRef ps[2] = {kb->f32, kb->f32};
  LLVMValueRef args[2] = {hi, lo};
  LLVMValueRef r = kb_call(kb, "llvm.nvvm.ff2bf16x2.rn", v2, ps, args, 2, LLVMCCallConv);
  return LLVMBuildBitCast(kb->b, r, kb->i32, "");
}

/* A packing cvt of two f32 (the PTX form takes the upper half's value
 * first) from arch `since` on; NULL before it. */
static LLVMValueRef cvt_f32x2(dsv4_kb *kb, int since, const char *text, const char *cons, LLVMTypeRef ret,
                              LLVMValueRef lo, LLVMValueRef hi)
{
  if (arch_number(kb->arch) < since)
    return NULL;
  LLVMTypeRef ps[2] = {kb->f32, kb->f32};
  LLVMValueRef args[2] = {hi, lo};
  return asm_call(kb, text, cons, ret, ps, args, 2, 0);
}

/* sm_80+: cvt.rn.relu.bf16x2.f32: negatives become +0, a NaN stays NaN. */
static LLVMValueRef ptx_cvt_bf16x2_relu(dsv4_kb *kb, LLVMValueRef lo, LLVMValueRef hi)
{
  return cvt_f32x2(kb, 80, "cvt.rn.relu.bf16x2.f32 $0, $1, $2;", "=r,f,f", kb->i32, lo, hi);
}

/* sm_90+: mul.rn.bf16x2 (round to nearest even; subnormals are not flushed:
 * PTX's bf16 arithmetic has no .ftz). */
static LLVMValueRef ptx_mul_bf16x2(dsv4_kb *kb, LLVMValueRef a, LLVMValueRef c)
{
  if (arch_number(kb->arch) < 90)
    return NULL;
  LLVMTypeRef ps[2] = {kb->i32, kb->i32};
  LLVMValueRef args[2] = {a, c};
  return asm_call(kb, "mul.rn.bf16x2 $0, $1, $2;", "=r,r,r", kb->i32, ps, args, 2, 0);
}

/* Read-once data: non-coherent, no L1 allocation; 2 or 4 words. */
static LLVMValueRef ptx_load_stream(dsv4_kb *kb, LLVMValueRef bptr, int words)
{
  const char *text = words == 4 ? "ld.global.nc.L1::no_allocate.v4.u32 {$0, $1, $2, $3}, [$4];"
                                : "ld.global.nc.L1::no_allocate.v2.u32 {$0, $1}, [$2];";
  const char *cons = words == 4 ? "=r,=r,=r,=r,l" : "=r,=r,l";
  LLVMTypeRef f4[4] = {kb->i32, kb->i32, kb->i32, kb->i32};
  LLVMTypeRef st = LLVMStructTypeInContext(kb->ctx, f4, (unsigned)words, 0);
  LLVMTypeRef pt = LLVMTypeOf(bptr);
  LLVMValueRef r = asm_call(kb, text, cons, st, &pt, &bptr, 1, 0);
  LLVMValueRef v = LLVMGetUndef(LLVMVectorType(kb->i32, (unsigned)words));
  for (unsigned i = 0; i < (unsigned)words; i++)
    v = LLVMBuildInsertElement(kb->b, v, LLVMBuildExtractValue(kb->b, r, i, ""), kb_i32(kb, i), "");
  return v;
}

/* Write-once output: the streaming (evict-first) store. */
static void ptx_store_stream16(dsv4_kb *kb, LLVMValueRef v, LLVMValueRef bptr)
{
  LLVMTypeRef ps[5] = {LLVMTypeOf(bptr), kb->i32, kb->i32, kb->i32, kb->i32};
  LLVMValueRef args[5] = {bptr};
  for (unsigned i = 0; i < 4; i++)
    args[i + 1] = LLVMBuildExtractElement(kb->b, v, kb_i32(kb, i), "");
  asm_call(kb, "st.global.cs.v4.u32 [$0], {$1, $2, $3, $4};", "l,r,r,r,r,~{memory}", kb->v, ps, args, 5, 1);
}

/* sm_89+: cvt.rn.satfinite.e4m3x2.f32 (its first operand lands in the upper byte). */
static LLVMValueRef ptx_cvt_e4m3x2_from_f32(dsv4_kb *kb, LLVMValueRef lo, LLVMValueRef hi)
{
  return cvt_f32x2(kb, 89, "cvt.rn.satfinite.e4m3x2.f32 $0, $1, $2;", "=h,f,f", kb->i16, lo, hi);
}

static LLVMValueRef ptx_shfl_xor(dsv4_kb *kb, LLVMValueRef v, int mask);

/* Butterfly shuffles within the warp (shfl.sync.bfly), log2(width) steps. */
static LLVMValueRef ptx_lane_reduce(dsv4_kb *kb, LLVMValueRef v, int width, int op)
{
  return kb_butterfly(kb, v, width, op, ptx_shfl_xor);
}

/* ex2.approx / lg2.approx: LLVM 19 lowers llvm.exp2 / llvm.log2 on NVPTX
 * only with afn; these are the instructions that would give.  ex2.approx.ftz
 * is a single MUFU.EX2; without .ftz ptxas wraps it in a range check, a
 * halved input and a squared result to reach the subnormal results. */
static LLVMValueRef ptx_math(dsv4_kb *kb, int fn, LLVMValueRef x)
{
  LLVMTypeRef ft = kb->f32;
  const char *name = fn == KB_EXP2_FTZ ? "llvm.nvvm.ex2.approx.ftz.f"
                     : fn == KB_EXP2   ? "llvm.nvvm.ex2.approx.f"
                                       : "llvm.nvvm.lg2.approx.f";
  return kb_call(kb, name, kb->f32, &ft, &x, 1, LLVMCCallConv);
}

/* mma.sync m16n8k32 e4m3 x e4m3 -> f32 (sm_89+). */
static int ptx_mma_e4m3(dsv4_kb *kb, LLVMValueRef *a, LLVMValueRef *bf, LLVMValueRef *c, LLVMValueRef *d)
{
  if (arch_number(kb->arch) < 89 || !d)
    return arch_number(kb->arch) >= 89;
  static const char text[] = "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {$0, $1, $2, $3}, "
                             "{$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};";
  static const char cons[] = "=f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f";
  LLVMTypeRef f4[4] = {kb->f32, kb->f32, kb->f32, kb->f32};
  LLVMTypeRef st = LLVMStructTypeInContext(kb->ctx, f4, 4, 0);
  LLVMTypeRef ps[10] = {kb->i32, kb->i32, kb->i32, kb->i32, kb->i32, kb->i32, kb->f32, kb->f32, kb->f32, kb->f32};
  LLVMValueRef args[10] = {a[0], a[1], a[2], a[3], bf[0], bf[1], c[0], c[1], c[2], c[3]};
  LLVMValueRef r = asm_call(kb, text, cons, st, ps, args, 10, 0);
  for (unsigned i = 0; i < 4; i++)
    d[i] = LLVMBuildExtractValue(kb->b, r, i, "");
  return 1;
}

/* mma.sync m16n8k16 bf16 x bf16 -> f32 and ldmatrix (sm_80+): NVVM
 * intrinsics, so LLVM sees their memory effects. */
/* prmt.b32 (default mode). */
static LLVMValueRef ptx_byte_perm(dsv4_kb *kb, LLVMValueRef a, LLVMValueRef c, int sel)
{
  LLVMTypeRef ps[3] = {kb->i32, kb->i32, kb->i32};
  LLVMValueRef args[3] = {a, c, kb_i32(kb, sel)};
  return kb_call(kb, "llvm.nvvm.prmt", kb->i32, ps, args, 3, LLVMCCallConv);
}

static int ptx_mma_bf16(dsv4_kb *kb, LLVMValueRef *a, LLVMValueRef *bf, LLVMValueRef *c, LLVMValueRef *d)
{
  if (arch_number(kb->arch) < 80 || !d)
    return arch_number(kb->arch) >= 80;
  LLVMTypeRef f4[4] = {kb->f32, kb->f32, kb->f32, kb->f32};
  LLVMTypeRef st = LLVMStructTypeInContext(kb->ctx, f4, 4, 0);
  LLVMTypeRef ps[10] = {kb->i32, kb->i32, kb->i32, kb->i32, kb->i32, kb->i32, kb->f32, kb->f32, kb->f32, kb->f32};
  LLVMValueRef args[10] = {a[0], a[1], a[2], a[3], bf[0], bf[1], c[0], c[1], c[2], c[3]};
  LLVMValueRef r = kb_call(kb, "llvm.nvvm.mma.m16n8k16.row.col.bf16", st, ps, args, 10, LLVMCCallConv);
  for (unsigned i = 0; i < 4; i++)
    d[i] = LLVMBuildExtractValue(kb->b, r, i, "");
  return 1;
}

/* i32 shared-window address of a shared pointer. */
static LLVMValueRef saddr(dsv4_kb *kb, LLVMValueRef sptr)
{
  return LLVMBuildTrunc(kb->b, LLVMBuildPtrToInt(kb->b, sptr, kb->i64, ""), kb->i32, "saddr");
}

static int ptx_ldmatrix_x4(dsv4_kb *kb, LLVMValueRef sptr, int trans, LLVMValueRef *out)
{
  if (arch_number(kb->arch) < 75 || !out)
    return arch_number(kb->arch) >= 75;
  LLVMTypeRef i4[4] = {kb->i32, kb->i32, kb->i32, kb->i32};
  LLVMTypeRef st = LLVMStructTypeInContext(kb->ctx, i4, 4, 0);
  LLVMTypeRef pt = kb_ptr_to(kb, kb->i8, 3);
  LLVMValueRef r = kb_call(kb,
                           trans ? "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.trans.b16.p3"
                                 : "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.b16.p3",
                           st, &pt, &sptr, 1, LLVMCCallConv);
  for (unsigned i = 0; i < 4; i++)
    out[i] = LLVMBuildExtractValue(kb->b, r, i, "");
  return 1;
}

/* cp.async (sm_80+): .cg (L2 only) for 16 bytes, .ca for 4 and 8.  asm on
 * the shared-window address: with 32-bit shared pointers (llvm_emit.c sets
 * -nvptx-short-ptr) LLVM 19 cannot select the cp.async intrinsics. */
static int ptx_cp_async(dsv4_kb *kb, LLVMValueRef sdst, LLVMValueRef gsrc, int bytes, LLVMValueRef src_bytes)
{
  if (arch_number(kb->arch) < 80 || (bytes != 4 && bytes != 8 && bytes != 16))
    return 0;
  if (!sdst)
    return 1;
  char text[96];
  snprintf(text, sizeof text, "cp.async.%s.shared.global [$0], [$1], %d, $2;", bytes == 16 ? "cg" : "ca", bytes);
  LLVMTypeRef ps[3] = {kb->i32, kb_ptr_to(kb, kb->i8, 1), kb->i32};
  LLVMValueRef args[3] = {saddr(kb, sdst), gsrc, src_bytes};
  asm_call(kb, text, "r,l,r,~{memory}", kb->v, ps, args, 3, 1);
  return 1;
}

static void ptx_prefetch_l2(dsv4_kb *kb, LLVMValueRef gptr)
{
  LLVMTypeRef ps[1] = {kb_ptr_to(kb, kb->i8, 1)};
  asm_call(kb, "prefetch.global.L2 [$0];", "l", kb->v, ps, &gptr, 1, 1);
}

static void ptx_cp_async_commit(dsv4_kb *kb)
{
  kb_call(kb, "llvm.nvvm.cp.async.commit.group", kb->v, NULL, NULL, 0, LLVMCCallConv);
}

static void ptx_cp_async_wait(dsv4_kb *kb, int n)
{
  LLVMTypeRef i = kb->i32;
  LLVMValueRef z = kb_i32(kb, n);
  kb_call(kb, "llvm.nvvm.cp.async.wait.group", kb->v, &i, &z, 1, LLVMCCallConv);
}

static void ptx_warp_sync(dsv4_kb *kb)
{
  LLVMTypeRef i = kb->i32;
  LLVMValueRef m = kb_i32(kb, -1);
  kb_call(kb, "llvm.nvvm.bar.warp.sync", kb->v, &i, &m, 1, LLVMCCallConv);
}

static void ptx_cp_async_wait_all(dsv4_kb *kb)
{
  kb_call(kb, "llvm.nvvm.cp.async.commit.group", kb->v, NULL, NULL, 0, LLVMCCallConv);
  LLVMTypeRef i = kb->i32;
  LLVMValueRef z = kb_i32(kb, 0);
  kb_call(kb, "llvm.nvvm.cp.async.wait.group", kb->v, &i, &z, 1, LLVMCCallConv);
}

/* A shared-memory matrix descriptor: start address, leading byte offset
 * (lbo: unused by swizzled K-major operands, 16 there; for N-major ones
 * the bytes between sw-byte column blocks), stride byte offset between
 * 8-row atoms (8 sw), swizzle mode (1: 128 bytes, 2: 64) in bits 62-63. */
static LLVMValueRef smem_desc(dsv4_kb *kb, LLVMValueRef sptr, int sw, int lbo)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef a = LLVMBuildPtrToInt(b, sptr, kb->i64, "");
  a = LLVMBuildLShr(b, LLVMBuildAnd(b, a, kb_i64(kb, 0x3FFFF), ""), kb_i64(kb, 4), "");
  unsigned long long fixed = ((unsigned long long)(lbo / 16) << 16) | ((unsigned long long)(8 * sw / 16) << 32) |
                             ((sw == 128 ? 1ULL : 2ULL) << 62);
  return LLVMBuildOr(b, a, LLVMConstInt(kb->i64, fixed, 0), "desc");
}

/* p as base + a constant byte offset: a one-index i8 GEP (instruction or
 * constant) of a constant index, else itself + 0. */
static LLVMValueRef byte_base(dsv4_kb *kb, LLVMValueRef p, long long *off)
{
  *off = 0;
  int gep = LLVMIsAGetElementPtrInst(p) || (LLVMIsAConstantExpr(p) && LLVMGetConstOpcode(p) == LLVMGetElementPtr);
  if (gep && LLVMGetNumOperands(p) == 2 && LLVMGetGEPSourceElementType(p) == kb->i8 &&
      LLVMIsAConstantInt(LLVMGetOperand(p, 1))) {
    *off = LLVMConstIntGetSExtValue(LLVMGetOperand(p, 1));
    return LLVMGetOperand(p, 0);
  }
  return p;
}

/* The descriptor of sptr (swizzle sw, leading offset lbo) where that of p0
 * is d0: where both are one base plus constants, d0 plus their difference
 * / 16 (both are shared-memory addresses under 256 KB and multiples of 16,
 * so the 14-bit address field neither carries nor borrows): one add a step
 * instead of the mask, shift and or.  Otherwise computed whole. */
static LLVMValueRef desc_step(dsv4_kb *kb, LLVMValueRef d0, LLVMValueRef p0, LLVMValueRef sptr, int sw, int lbo)
{
  long long o0, o1;
  if (byte_base(kb, p0, &o0) == byte_base(kb, sptr, &o1) && (o1 - o0) % 16 == 0)
    return LLVMBuildAdd(kb->b, d0, kb_i64(kb, (o1 - o0) / 16), "desc");
  return smem_desc(kb, sptr, sw, lbo);
}

/* One inline-asm block: fence, ksteps wgmma (the first overwriting D unless
 * accumulating, the rest accumulating), commit.  The accumulators go back
 * to LLVM only through ptx_wgmma_wait, whose asm takes and returns them:
 * nothing reads them while the unit owns them. */
static int ptx_wgmma(dsv4_kb *kb, const kb_wgmma *op, LLVMValueRef *a, LLVMValueRef *bm, LLVMValueRef *d)
{
  int n = op->n, ksteps = op->ksteps, sw = op->sw, bf = op->type == KB_MMA_BF16, ar = op->a_regs;
  if (!dsv4_target_has_wgmma(DSV4_TARGET_PTX, kb->arch) || n < 8 || n > 256 || n % 8 || (sw != 64 && sw != 128) ||
      ksteps < 1 || ksteps > 32 || (op->type != KB_MMA_E4M3 && !bf) || (op->b_mn_major && !bf) || (ar && !bf) ||
      (op->b_mn_major && (op->b_lbo <= 0 || op->b_lbo % 16 || op->b_lbo / 16 >= (1 << 14))))
    return 0;
  if (!d)
    return 1;
  /* Where every k-step's A and B are their first ones' plus constant byte
   * offsets (the usual case), the asm takes the two first descriptors and
   * steps them itself (the descriptors' start-address field counts 16 bytes
   * a unit, and every address stays inside the shared window, so a step
   * never carries or borrows out of the field): two 64-bit operands instead
   * of 2 * ksteps, all live at once.  A from registers: B's alone. */
  long long ao[32] = {0}, bo[32], a0 = 0, b0;
  LLVMValueRef abase = ar ? NULL : byte_base(kb, a[0], &a0), bbase = byte_base(kb, bm[0], &b0);
  int stepped = 1;
  for (int ks = 0; ks < ksteps; ks++) {
    LLVMValueRef pb = byte_base(kb, bm[ks], &bo[ks]);
    bo[ks] -= b0;
    stepped &= pb == bbase && bo[ks] % 16 == 0;
    if (!ar) {
      LLVMValueRef pa = byte_base(kb, a[ks], &ao[ks]);
      ao[ks] -= a0;
      stepped &= pa == abase && ao[ks] % 16 == 0;
    }
  }
  /* operands: d[nd], A registers[4 ksteps] (a_regs), descriptors[np], flag, (tied d[nd]) */
  int nd = n / 2, nar = ar ? 4 * ksteps : 0, np = (ar ? 1 : 2) * (stepped ? 1 : ksteps), nds = ar ? 1 : 2;
  int fl = nd + nar + np; /* the flag's operand number */
  char text[16384], cons[4096];
  int t = snprintf(text, sizeof text,
                   "{\n.reg .pred p0, p1;\n%ssetp.ne.b32 p0, $%d, 0;\nsetp.eq.b32 p1, $%d, 0;\n"
                   "wgmma.fence.sync.aligned;\n",
                   stepped ? (ar ? ".reg .b64 db;\n" : ".reg .b64 da, db;\n") : "", fl, fl);
  for (int ks = 0; ks < ksteps; ks++) {
    char da[64], db[16];
    int d0 = nd + nar + (stepped ? 0 : nds * ks); /* this step's first descriptor operand */
    if (ar)
      snprintf(da, sizeof da, "{$%d, $%d, $%d, $%d}", nd + 4 * ks, nd + 4 * ks + 1, nd + 4 * ks + 2, nd + 4 * ks + 3);
    else if (stepped) {
      t += snprintf(text + t, sizeof text - t, "add.s64 da, $%d, %lld;\n", d0, ao[ks] / 16);
      snprintf(da, sizeof da, "da");
    } else
      snprintf(da, sizeof da, "$%d", d0);
    if (stepped) {
      t += snprintf(text + t, sizeof text - t, "add.s64 db, $%d, %lld;\n", d0 + nds - 1, bo[ks] / 16);
      snprintf(db, sizeof db, "db");
    } else
      snprintf(db, sizeof db, "$%d", d0 + nds - 1);
    t += snprintf(text + t, sizeof text - t, "wgmma.mma_async.sync.aligned.m64n%dk%d.f32.%s {", n, bf ? 16 : 32,
                  bf ? "bf16.bf16" : "e4m3.e4m3");
    for (int i = 0; i < nd; i++)
      t += snprintf(text + t, sizeof text - t, "%s$%d", i ? ", " : "", i);
    /* bf16 takes transpose flags: A's (shared memory only), then B's */
    t += snprintf(text + t, sizeof text - t, "}, %s, %s, %s, 1, 1%s%s;\n", da, db, ks || op->accumulate ? "p1" : "p0",
                  bf && !ar ? ", 0" : "", bf ? (op->b_mn_major ? ", 1" : ", 0") : "");
  }
  snprintf(text + t, sizeof text - t, "wgmma.commit_group.sync.aligned;\n}");
  int c = 0;
  for (int i = 0; i < nd; i++)
    c += snprintf(cons + c, sizeof cons - c, "%s=f", i ? "," : "");
  for (int i = 0; i < nar; i++)
    c += snprintf(cons + c, sizeof cons - c, ",r");
  for (int i = 0; i < np; i++)
    c += snprintf(cons + c, sizeof cons - c, ",l");
  c += snprintf(cons + c, sizeof cons - c, ",r");
  for (int i = 0; op->accumulate && i < nd; i++)
    c += snprintf(cons + c, sizeof cons - c, ",%d", i);
  snprintf(cons + c, sizeof cons - c, ",~{memory}");
  LLVMTypeRef fs[128], ps[128 + 64 + 1 + 128];
  LLVMValueRef args[128 + 64 + 1 + 128];
  for (int i = 0; i < nd; i++)
    fs[i] = kb->f32;
  int blbo = op->b_mn_major ? op->b_lbo : 16, na = 0;
  for (int i = 0; i < nar; i++)
    ps[na] = kb->i32, args[na++] = a[i];
  LLVMValueRef da0 = NULL;
  for (int ks = 0; ks < (stepped ? 1 : ksteps); ks++) {
    if (!ar) {
      LLVMValueRef v = ks ? desc_step(kb, da0, a[0], a[ks], sw, 16) : smem_desc(kb, a[0], sw, 16);
      da0 = da0 ? da0 : v;
      ps[na] = kb->i64, args[na++] = v;
    }
    ps[na] = kb->i64,
    args[na++] = smem_desc(kb, bm[ks], sw, blbo); /* (B's whole: stepped, the decode's spilled more) */
  }
  ps[na] = kb->i32;
  args[na++] = kb_i32(kb, 0); /* p0 false, p1 true: the first step overwrites unless accumulating */
  for (int i = 0; op->accumulate && i < nd; i++)
    ps[na] = kb->f32, args[na++] = d[i];
  LLVMValueRef r = asm_call(kb, text, cons, LLVMStructTypeInContext(kb->ctx, fs, (unsigned)nd, 0), ps, args, na, 1);
  for (int i = 0; i < nd; i++)
    d[i] = LLVMBuildExtractValue(kb->b, r, (unsigned)i, "");
  return 1;
}

/* barrier.sync / barrier.arrive on a named barrier (asm: the ids and counts
 * are immediates, and the memory clobber keeps shared accesses on their
 * side).  Not bar.sync / bar.arrive: those are the .aligned forms, which
 * promise that every participating thread executes the same instruction,
 * and a warp-specialised kernel's roles meet at a named barrier from
 * different places in the code (compute-sanitizer's synccheck stops such a
 * kernel at the first one).  Each warp still reaches it converged. */
static void named_bar(dsv4_kb *kb, const char *verb, int id, int threads)
{
  char text[64];
  snprintf(text, sizeof text, "barrier.%s %d, %d;", verb, id, threads);
  asm_call(kb, text, "~{memory}", kb->v, NULL, NULL, 0, 1);
}
/* setmaxnreg (sm_90a): this warpgroup's register allotment grows or shrinks
 * to regs; 0 where the arch has none. */
static int ptx_set_max_regs(dsv4_kb *kb, int regs, int grow)
{
  if (!dsv4_target_has_wgmma(DSV4_TARGET_PTX, kb->arch) || (regs && (regs < 24 || regs > 256 || regs % 8)))
    return 0;
  if (!regs)
    return 1;
  char text[64];
  snprintf(text, sizeof text, "setmaxnreg.%s.sync.aligned.u32 %d;", grow ? "inc" : "dec", regs);
  asm_call(kb, text, "~{memory}", kb->v, NULL, NULL, 0, 1);
  return 1;
}

static void ptx_bar_sync(dsv4_kb *kb, int id, int threads) { named_bar(kb, "sync", id, threads); }
static void ptx_bar_arrive(dsv4_kb *kb, int id, int threads) { named_bar(kb, "arrive", id, threads); }

static void ptx_wgmma_wait(dsv4_kb *kb, int pending, LLVMValueRef *d, int nd)
{
  char text[64], cons[1024];
  snprintf(text, sizeof text, "wgmma.wait_group.sync.aligned %d;", pending);
  int c = 0;
  for (int i = 0; i < nd; i++)
    c += snprintf(cons + c, sizeof cons - c, "%s=f", i ? "," : "");
  for (int i = 0; i < nd; i++)
    c += snprintf(cons + c, sizeof cons - c, ",%d", i);
  snprintf(cons + c, sizeof cons - c, ",~{memory}");
  LLVMTypeRef fs[128];
  for (int i = 0; i < nd; i++)
    fs[i] = kb->f32;
  LLVMValueRef r = asm_call(kb, text, cons, LLVMStructTypeInContext(kb->ctx, fs, (unsigned)nd, 0), fs, d, nd, 1);
  for (int i = 0; i < nd; i++)
    d[i] = LLVMBuildExtractValue(kb->b, r, (unsigned)i, "");
}

static void ptx_fence_proxy_async(dsv4_kb *kb)
{
  asm_call(kb, "fence.proxy.async.shared::cta;", "~{memory}", kb->v, NULL, NULL, 0, 1);
}

/* Clusters (sm_90): %cluster_ctarank. */
static int ptx_cluster_rank(dsv4_kb *kb, LLVMValueRef *rank)
{
  if (arch_number(kb->arch) < 90)
    return 0;
  if (rank)
    *rank = asm_call(kb, "mov.u32 $0, %cluster_ctarank;", "=r", kb->i32, NULL, NULL, 0, 0);
  return 1;
}

static int ptx_grid_dep(dsv4_kb *kb, int wait)
{
  if (arch_number(kb->arch) < 90)
    return 0;
  asm_call(kb, wait ? "griddepcontrol.wait;" : "griddepcontrol.launch_dependents;", "~{memory}", kb->v, NULL, NULL, 0,
           1);
  return 1;
}

static void ptx_cluster_sync(dsv4_kb *kb, int ordered)
{
  asm_call(kb, ordered ? "barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;"
                       : "barrier.cluster.arrive.relaxed;\nbarrier.cluster.wait;",
           "~{memory}", kb->v, NULL, NULL, 0, 1);
}

static void ptx_mbar_init(dsv4_kb *kb, LLVMValueRef sptr, LLVMValueRef count)
{
  LLVMTypeRef ps[2] = {kb->i32, kb->i32};
  LLVMValueRef args[2] = {saddr(kb, sptr), count};
  asm_call(kb, "mbarrier.init.shared::cta.b64 [$0], $1;\nfence.mbarrier_init.release.cluster;", "r,r,~{memory}",
           kb->v, ps, args, 2, 1);
}

/* (the default semantics, release at CTA scope) */
static void ptx_mbar_arrive(dsv4_kb *kb, LLVMValueRef sptr, LLVMValueRef peer)
{
  LLVMTypeRef ps[2] = {kb->i32, kb->i32};
  LLVMValueRef args[2] = {saddr(kb, sptr), peer};
  if (!peer)
    asm_call(kb, "{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [$0];\n}", "r,~{memory}", kb->v, ps, args, 1,
             1);
  else
    asm_call(kb,
             "{\n.reg .b32 ra;\nmapa.shared::cluster.u32 ra, $0, $1;\nmbarrier.arrive.shared::cluster.b64 _, [ra];\n}",
             "r,r,~{memory}", kb->v, ps, args, 2, 1);
}

/* try_wait in a loop (the braces scope the label to each use), with the
 * default acquire at CTA scope: an acquire at cluster scope invalidates the
 * SM's L1 each time (CCTL.IVALL), which the waits of a tile loop paid for
 * in stalls and in every later global load missing L1. */
static void ptx_mbar_wait(dsv4_kb *kb, LLVMValueRef sptr, LLVMValueRef parity)
{
  LLVMTypeRef ps[2] = {kb->i32, kb->i32};
  LLVMValueRef args[2] = {saddr(kb, sptr), parity};
  asm_call(kb, "{\n.reg .pred done;\nwait:\nmbarrier.try_wait.parity.shared::cta.b64 done, [$0], $1;\n"
               "@!done bra wait;\n}", "r,r,~{memory}", kb->v, ps, args, 2, 1);
}

static void ptx_copy_to_peer(dsv4_kb *kb, LLVMValueRef dst, LLVMValueRef src, int bytes, LLVMValueRef mbar,
                             LLVMValueRef peer)
{
  LLVMTypeRef ps[4] = {kb->i32, kb->i32, kb->i32, kb->i32};
  LLVMValueRef args[4] = {saddr(kb, dst), saddr(kb, src), saddr(kb, mbar), peer};
  char text[512];
  snprintf(text, sizeof text,
           "{\n.reg .b32 rd, rm;\nmapa.shared::cluster.u32 rd, $0, $3;\nmapa.shared::cluster.u32 rm, $2, $3;\n"
           "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [rd], [$1], %d, [rm];\n}",
           bytes);
  asm_call(kb, text, "r,r,r,r,~{memory}", kb->v, ps, args, 4, 1);
}

static void ptx_mbar_expect(dsv4_kb *kb, LLVMValueRef sptr, LLVMValueRef bytes)
{
  LLVMTypeRef ps[2] = {kb->i32, kb->i32};
  LLVMValueRef args[2] = {saddr(kb, sptr), bytes};
  asm_call(kb, "{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [$0], $1;\n}", "r,r,~{memory}", kb->v,
           ps, args, 2, 1);
}

/* i64 address of a global pointer */
static LLVMValueRef gaddr(dsv4_kb *kb, LLVMValueRef gptr) { return LLVMBuildPtrToInt(kb->b, gptr, kb->i64, "gaddr"); }

static void ptx_tma_load3(dsv4_kb *kb, LLVMValueRef dst, LLVMValueRef map, const LLVMValueRef c[3], LLVMValueRef mbar)
{
  LLVMTypeRef ps[6] = {kb->i32, kb->i64, kb->i32, kb->i32, kb->i32, kb->i32};
  LLVMValueRef args[6] = {saddr(kb, dst), gaddr(kb, map), c[0], c[1], c[2], saddr(kb, mbar)};
  asm_call(kb,
           "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$0], [$1, {$2, $3, $4}], "
           "[$5];",
           "r,l,r,r,r,r,~{memory}", kb->v, ps, args, 6, 1);
}

/* a tensor map written to global memory by the host: acquired before its
 * first use (PTX 8.3) */
static void ptx_tma_acquire(dsv4_kb *kb, LLVMValueRef map)
{
  LLVMTypeRef ps[1] = {kb->i64};
  LLVMValueRef args[1] = {gaddr(kb, map)};
  asm_call(kb, "fence.proxy.tensormap::generic.acquire.sys [$0], 128;", "l,~{memory}", kb->v, ps, args, 1, 1);
}

static void ptx_bulk_load(dsv4_kb *kb, LLVMValueRef dst, LLVMValueRef src, int bytes, LLVMValueRef mbar)
{
  LLVMTypeRef ps[3] = {kb->i32, kb->i64, kb->i32};
  LLVMValueRef args[3] = {saddr(kb, dst), gaddr(kb, src), saddr(kb, mbar)};
  char text[160];
  snprintf(text, sizeof text, "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1], %d, [$2];",
           bytes);
  asm_call(kb, text, "r,l,r,~{memory}", kb->v, ps, args, 3, 1);
}

static LLVMValueRef ptx_shfl_xor(dsv4_kb *kb, LLVMValueRef v, int mask)
{
  LLVMTypeRef ps[4] = {kb->i32, kb->f32, kb->i32, kb->i32};
  LLVMValueRef args[4] = {kb_i32(kb, -1), v, kb_i32(kb, mask), kb_i32(kb, 0x1f)};
  return kb_call(kb, "llvm.nvvm.shfl.sync.bfly.f32", kb->f32, ps, args, 4, LLVMCCallConv);
}

static LLVMValueRef ptx_shfl_idx(dsv4_kb *kb, LLVMValueRef v, LLVMValueRef src)
{
  LLVMTypeRef ps[4] = {kb->i32, kb->f32, kb->i32, kb->i32};
  LLVMValueRef args[4] = {kb_i32(kb, -1), v, src, kb_i32(kb, 0x1f)};
  return kb_call(kb, "llvm.nvvm.shfl.sync.idx.f32", kb->f32, ps, args, 4, LLVMCCallConv);
}

static LLVMValueRef ptx_vote_any(dsv4_kb *kb, LLVMValueRef pred)
{
  LLVMTypeRef ps[2] = {kb->i32, kb->i1};
  LLVMValueRef args[2] = {kb_i32(kb, -1), pred};
  return kb_call(kb, "llvm.nvvm.vote.any.sync", kb->i1, ps, args, 2, LLVMCCallConv);
}

/* sm_70+: match.any.sync over the whole warp. */
static int ptx_match_any(dsv4_kb *kb, LLVMValueRef v, LLVMValueRef *mask)
{
  if (arch_number(kb->arch) < 70)
    return 0;
  if (mask) {
    LLVMTypeRef ps[2] = {kb->i32, kb->i32};
    LLVMValueRef args[2] = {kb_i32(kb, -1), v};
    *mask = kb_call(kb, "llvm.nvvm.match.any.sync.i32", kb->i32, ps, args, 2, LLVMCCallConv);
  }
  return 1;
}

static LLVMValueRef ptx_grid_ctas(dsv4_kb *kb)
{
  LLVMBuilderRef b = kb->b;
  return LLVMBuildMul(
      b,
      LLVMBuildMul(b, sreg(kb, "llvm.nvvm.read.ptx.sreg.nctaid.x"), sreg(kb, "llvm.nvvm.read.ptx.sreg.nctaid.y"), ""),
      sreg(kb, "llvm.nvvm.read.ptx.sreg.nctaid.z"), "ctas");
}

static LLVMValueRef ptx_units(dsv4_kb *kb) { return sreg(kb, "llvm.nvvm.read.ptx.sreg.nsmid"); }

static const dsv4_target_ir ptx_ir = {
    .kind = DSV4_TARGET_PTX,
    .global_as = 1,
    .shared_as = 3,
    .triple = ptx_triple,
    .opt_pipeline = "default<O3>",
    .mark_kernel = ptx_mark_kernel,
    .thread_id = ptx_thread_id,
    .block_id = ptx_block_id,
    .barrier = ptx_barrier,
    .cvt_e4m3x2 = ptx_cvt_e4m3x2,
    .cvt_bf16x2 = ptx_cvt_bf16x2,
    .cvt_bf16x2_relu = ptx_cvt_bf16x2_relu,
    .mul_bf16x2 = ptx_mul_bf16x2,
    .load_stream = ptx_load_stream,
    .cvt_e4m3x2_from_f32 = ptx_cvt_e4m3x2_from_f32,
    .lane_reduce = ptx_lane_reduce,
    .math = ptx_math,
    .mma_e4m3_16x8x32 = ptx_mma_e4m3,
    .shfl_xor = ptx_shfl_xor,
    .shfl_idx = ptx_shfl_idx,
    .vote_any = ptx_vote_any,
    .match_any = ptx_match_any,
    .grid_ctas = ptx_grid_ctas,
    .units = ptx_units,
    .mma_bf16_16x8x16 = ptx_mma_bf16,
    .ldmatrix_x4 = ptx_ldmatrix_x4,
    .cp_async = ptx_cp_async,
    .prefetch_l2 = ptx_prefetch_l2,
    .cp_async_wait_all = ptx_cp_async_wait_all,
    .cp_async_commit = ptx_cp_async_commit,
    .cp_async_wait = ptx_cp_async_wait,
    .warp_sync = ptx_warp_sync,
    .byte_perm = ptx_byte_perm,
    .wgmma = ptx_wgmma,
    .bar_sync = ptx_bar_sync,
    .bar_arrive = ptx_bar_arrive,
    .set_max_regs = ptx_set_max_regs,
    .wgmma_wait = ptx_wgmma_wait,
    .min_ctas = ptx_min_ctas,
    .fence_proxy_async = ptx_fence_proxy_async,
    .cluster_rank = ptx_cluster_rank,
    .grid_dep = ptx_grid_dep,
    .cluster_sync = ptx_cluster_sync,
    .mbar_init = ptx_mbar_init,
    .mbar_arrive = ptx_mbar_arrive,
    .mbar_wait = ptx_mbar_wait,
    .copy_to_peer = ptx_copy_to_peer,
    .mbar_expect = ptx_mbar_expect,
    .tma_load3 = ptx_tma_load3,
    .tma_acquire = ptx_tma_acquire,
    .bulk_load = ptx_bulk_load,
    .store_stream16 = ptx_store_stream16,
};

/* The PTX ISA version: 8.4 on sm_89/sm_90(a), for mma with e4m3 operands
 * (sm_90a itself needs 8.0); 7.4 gives sm_80/86 the L1::no_allocate loads. */
static const char *ptx_features(const char *arch)
{
  int v = arch_number(arch);
  return v >= 89 ? "+ptx84" : "+ptx74"; /* 8.4: mma with e4m3 operands on sm_89 and sm_90 */
}

/* Assemble with ptxas when present: what LLVM accepts but the driver
 * would reject is caught here, before the artifact is written. */
static int ptxas_check(const dsv4_kernel *k, const char *arch, const char *ptx, unsigned want, dsv4_artifact *a,
                       dsv4_diags *d)
{
  static const char *const cands[] = {"ptxas", "/usr/local/cuda/bin/ptxas", NULL};
  char tool[512], dir[512], in[600];
  if (want & DSV4_WANT_NO_PTXAS) {
    snprintf(a->note, sizeof a->note, "ptxas left out (--no-ptxas): PTX checked by LLVM only");
    return 0;
  }
  if (!dsv4_find_tool(cands, tool, sizeof tool)) {
    snprintf(a->note, sizeof a->note, "ptxas not found: PTX checked by LLVM only");
    return 0;
  }
  if (dsv4_tmpdir(dir, sizeof dir)) {
    dsv4_error(d, k->file, k->line, "kernel '%s': cannot create a temporary directory for ptxas", k->name);
    return 1;
  }
  snprintf(in, sizeof in, "%s/k.ptx", dir);
  int rc = dsv4_write_file(in, ptx, strlen(ptx));
  char archopt[32];
  snprintf(archopt, sizeof archopt, "-arch=%s", arch);
  char *argv[] = {tool, archopt, "-o", "/dev/null", in, NULL};
  unsigned char *out = NULL;
  size_t on = 0;
  char *err = NULL;
  if (!rc)
    rc = dsv4_run_tool(argv, NULL, 0, &out, &on, &err);
  if (rc)
    dsv4_error(d, k->file, k->line, "kernel '%s': ptxas -arch=%s rejected the PTX (status %d): %s", k->name, arch, rc,
               err ? err : "");
  else
    snprintf(a->note, sizeof a->note, "assembled by %.200s -arch=%s", tool, arch);
  free(out);
  free(err);
  dsv4_rmtree_flat(dir);
  return rc != 0;
}

static int ptx_compile(const dsv4_target *t, const dsv4_kernel *k, unsigned want, dsv4_artifact *a, dsv4_diags *d)
{
  const char *arch = k->target[DSV4_TARGET_PTX].arch;
  char *ptx = NULL;
  if (dsv4_llvm_compile(t->ir, k, arch, ptx_features(arch), want, 0, a, &ptx, NULL, NULL, d))
    return 1;
  char entry[96];
  snprintf(entry, sizeof entry, ".entry %s(", k->name);
  if (!strstr(ptx, entry)) {
    dsv4_error(d, k->file, k->line, "kernel '%s': emitted PTX has no '%s' entry", k->name, k->name);
    free(ptx);
    return 1;
  }
  if (ptxas_check(k, arch, ptx, want, a, d)) {
    free(ptx);
    return 1;
  }
  a->code = (unsigned char *)ptx;
  a->code_len = strlen(ptx);
  if (want & DSV4_WANT_ASM)
    a->asm_text = strdup(ptx);
  return 0;
}

const dsv4_target dsv4_target_ptx = {.kind = DSV4_TARGET_PTX, .ir = &ptx_ir, .compile = ptx_compile};
