/* kb.c -- the kernel-builder layer (see kb.h).  Compiled twice: against
 * LLVM 19 for the PTX and AMDGCN targets and against LLVM 15 for SPIR-V. */
#include "kb.h"

#include <llvm-c/Analysis.h>
#include <llvm/Config/llvm-config.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4_abi.h"
#include "caps.h"

void kb_init(dsv4_kb *kb, const dsv4_target_ir *t, const dsv4_kernel *k)
{
  const char *arch = k->target[t->kind].arch;
  memset(kb, 0, sizeof *kb);
  kb->ctx = LLVMContextCreate();
#if LLVM_VERSION_MAJOR < 16
  /* translator 15 aborts on some opaque-pointer IR (DESIGN.md): typed here */
  LLVMContextSetOpaquePointers(kb->ctx, 0);
#endif
  kb->mod = LLVMModuleCreateWithNameInContext(k->name, kb->ctx);
  kb->b = LLVMCreateBuilderInContext(kb->ctx);
  kb->t = t;
  kb->arch = arch;
  kb->warp = dsv4_kernel_warp(k, t->kind);
  kb->v = LLVMVoidTypeInContext(kb->ctx);
  kb->i1 = LLVMInt1TypeInContext(kb->ctx);
  kb->i8 = LLVMInt8TypeInContext(kb->ctx);
  kb->i16 = LLVMInt16TypeInContext(kb->ctx);
  kb->i32 = LLVMInt32TypeInContext(kb->ctx);
  kb->i64 = LLVMInt64TypeInContext(kb->ctx);
  kb->f32 = LLVMFloatTypeInContext(kb->ctx);
  kb->gptr = kb_ptr_to(kb, kb->i8, t->global_as);
  LLVMSetTarget(kb->mod, t->triple(arch));
  if (t->datalayout)
    LLVMSetDataLayout(kb->mod, t->datalayout);
}

void kb_dispose(dsv4_kb *kb)
{
  if (kb->b)
    LLVMDisposeBuilder(kb->b);
  if (kb->mod)
    LLVMDisposeModule(kb->mod);
  if (kb->ctx)
    LLVMContextDispose(kb->ctx);
  memset(kb, 0, sizeof *kb);
}

LLVMTypeRef kb_ptr_to(dsv4_kb *kb, LLVMTypeRef elem, unsigned as)
{
  (void)kb;
  return LLVMPointerType(elem, as); /* opaque `ptr addrspace(as)` under LLVM 19 */
}

LLVMValueRef kb_kernel(dsv4_kb *kb, const char *name, const unsigned char *kinds, const char *const *names, int n,
                       int threads)
{
  LLVMTypeRef ps[DSV4_MAX_ARGS];
  for (int i = 0; i < n; i++)
    ps[i] = kinds[i] == DSV4_ARG_PTR || kinds[i] == DSV4_ARG_IN ? kb->gptr
            : kinds[i] == DSV4_ARG_I64                          ? kb->i64
            : kinds[i] == DSV4_ARG_F32                          ? kb->f32
                                                                : kb->i32;
  LLVMTypeRef fty = LLVMFunctionType(kb->v, ps, (unsigned)n, 0);
  kb->fn = LLVMAddFunction(kb->mod, name, fty);
  for (int i = 0; i < n; i++) {
    LLVMValueRef p = LLVMGetParam(kb->fn, (unsigned)i);
    LLVMSetValueName2(p, names[i], strlen(names[i]));
    if (kinds[i] == DSV4_ARG_PTR || kinds[i] == DSV4_ARG_IN) {
      unsigned k = LLVMGetEnumAttributeKindForName("noalias", 7);
      LLVMAddAttributeAtIndex(kb->fn, (unsigned)i + 1, LLVMCreateEnumAttribute(kb->ctx, k, 0));
    }
    if (kinds[i] == DSV4_ARG_IN) { /* read-only: lets loads use the non-coherent path */
      unsigned k = LLVMGetEnumAttributeKindForName("readonly", 8);
      LLVMAddAttributeAtIndex(kb->fn, (unsigned)i + 1, LLVMCreateEnumAttribute(kb->ctx, k, 0));
    }
  }
  kb->t->mark_kernel(kb, kb->fn, threads);
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(kb->ctx, kb->fn, "entry");
  LLVMPositionBuilderAtEnd(kb->b, entry);
  return kb->fn;
}

LLVMValueRef kb_arg(dsv4_kb *kb, int i) { return LLVMGetParam(kb->fn, (unsigned)i); }
LLVMValueRef kb_i32(dsv4_kb *kb, long long v) { return LLVMConstInt(kb->i32, (unsigned long long)v, 1); }
LLVMValueRef kb_i64(dsv4_kb *kb, long long v) { return LLVMConstInt(kb->i64, (unsigned long long)v, 1); }
LLVMValueRef kb_sext64(dsv4_kb *kb, LLVMValueRef v) { return LLVMBuildSExt(kb->b, v, kb->i64, ""); }
LLVMValueRef kb_zext64(dsv4_kb *kb, LLVMValueRef v) { return LLVMBuildZExt(kb->b, v, kb->i64, ""); }

LLVMValueRef kb_byte_ptr(dsv4_kb *kb, LLVMValueRef base, LLVMValueRef off)
{
  return LLVMBuildGEP2(kb->b, kb->i8, base, &off, 1, "");
}

/* The byte pointer reinterpreted as a pointer to ty (no-op when opaque). */
static LLVMValueRef typed(dsv4_kb *kb, LLVMTypeRef ty, LLVMValueRef bptr)
{
  unsigned as = LLVMGetPointerAddressSpace(LLVMTypeOf(bptr));
  return LLVMBuildPointerCast(kb->b, bptr, kb_ptr_to(kb, ty, as), "");
}

LLVMValueRef kb_load(dsv4_kb *kb, LLVMTypeRef ty, LLVMValueRef bptr, unsigned align)
{
  LLVMValueRef v = LLVMBuildLoad2(kb->b, ty, typed(kb, ty, bptr), "");
  LLVMSetAlignment(v, align);
  return v;
}

void kb_store(dsv4_kb *kb, LLVMValueRef val, LLVMValueRef bptr, unsigned align)
{
  LLVMValueRef s = LLVMBuildStore(kb->b, val, typed(kb, LLVMTypeOf(val), bptr));
  LLVMSetAlignment(s, align);
}

/* 16 bytes at 16-byte alignment: what the streaming hooks take. */
static int is_vec16(dsv4_kb *kb, LLVMTypeRef ty, unsigned align)
{
  (void)kb;
  return align >= 16 && LLVMGetTypeKind(ty) == LLVMVectorTypeKind &&
         LLVMGetVectorSize(ty) * LLVMGetIntTypeWidth(LLVMGetElementType(ty)) == 128;
}

LLVMValueRef kb_load_stream(dsv4_kb *kb, LLVMTypeRef ty, LLVMValueRef bptr, unsigned align)
{
  int bits = LLVMGetTypeKind(ty) == LLVMVectorTypeKind
                 ? (int)(LLVMGetVectorSize(ty) * LLVMGetIntTypeWidth(LLVMGetElementType(ty)))
                 : 0;
  if (!kb->t->load_stream || (bits != 64 && bits != 128) || align * 8 < (unsigned)bits)
    return kb_load(kb, ty, bptr, align);
  return LLVMBuildBitCast(kb->b, kb->t->load_stream(kb, bptr, bits / 32), ty, "");
}

void kb_store_stream(dsv4_kb *kb, LLVMValueRef val, LLVMValueRef bptr, unsigned align)
{
  if (!kb->t->store_stream16 || !is_vec16(kb, LLVMTypeOf(val), align)) {
    kb_store(kb, val, bptr, align);
    return;
  }
  kb->t->store_stream16(kb, LLVMBuildBitCast(kb->b, val, LLVMVectorType(kb->i32, 4), ""), bptr);
}

LLVMValueRef kb_atomic_add_i32(dsv4_kb *kb, LLVMValueRef bptr, LLVMValueRef v)
{
  return LLVMBuildAtomicRMW(kb->b, LLVMAtomicRMWBinOpAdd, typed(kb, kb->i32, bptr), v, LLVMAtomicOrderingMonotonic, 0);
}

kb_if_t kb_if(dsv4_kb *kb, LLVMValueRef cond, const char *name)
{
  kb_if_t f;
  f.then_bb = LLVMAppendBasicBlockInContext(kb->ctx, kb->fn, name);
  f.else_bb = NULL;
  f.end_bb = LLVMAppendBasicBlockInContext(kb->ctx, kb->fn, "endif");
  f.br = LLVMBuildCondBr(kb->b, cond, f.then_bb, f.end_bb);
  LLVMPositionBuilderAtEnd(kb->b, f.then_bb);
  return f;
}

void kb_else(dsv4_kb *kb, kb_if_t *f)
{
  f->else_bb = LLVMAppendBasicBlockInContext(kb->ctx, kb->fn, "else");
  LLVMMoveBasicBlockBefore(f->else_bb, f->end_bb);
  if (!LLVMGetBasicBlockTerminator(LLVMGetInsertBlock(kb->b)))
    LLVMBuildBr(kb->b, f->end_bb);
  LLVMSetSuccessor(f->br, 1, f->else_bb); /* the false edge now enters else */
  LLVMPositionBuilderAtEnd(kb->b, f->else_bb);
}

void kb_endif(dsv4_kb *kb, kb_if_t *f)
{
  if (!LLVMGetBasicBlockTerminator(LLVMGetInsertBlock(kb->b)))
    LLVMBuildBr(kb->b, f->end_bb);
  LLVMPositionBuilderAtEnd(kb->b, f->end_bb);
}

void kb_return_if(dsv4_kb *kb, LLVMValueRef cond)
{
  LLVMBasicBlockRef ret = LLVMAppendBasicBlockInContext(kb->ctx, kb->fn, "ret");
  LLVMBasicBlockRef cont = LLVMAppendBasicBlockInContext(kb->ctx, kb->fn, "cont");
  LLVMBuildCondBr(kb->b, cond, ret, cont);
  LLVMPositionBuilderAtEnd(kb->b, ret);
  LLVMBuildRetVoid(kb->b);
  LLVMPositionBuilderAtEnd(kb->b, cont);
}

LLVMValueRef kb_phi(dsv4_kb *kb, LLVMValueRef a, LLVMBasicBlockRef from_a, LLVMValueRef b, LLVMBasicBlockRef from_b)
{
  LLVMValueRef p = LLVMBuildPhi(kb->b, LLVMTypeOf(a), "");
  LLVMValueRef v[2] = {a, b};
  LLVMBasicBlockRef f[2] = {from_a, from_b};
  LLVMAddIncoming(p, v, f, 2);
  return p;
}

LLVMValueRef kb_load_if(dsv4_kb *kb, LLVMValueRef cond, LLVMTypeRef ty, LLVMValueRef base, LLVMValueRef off,
                        unsigned align, LLVMValueRef otherwise)
{
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(kb->b);
  kb_if_t f = kb_if(kb, cond, "ld");
  LLVMValueRef v = kb_load(kb, ty, kb_byte_ptr(kb, base, off), align);
  LLVMBasicBlockRef got = LLVMGetInsertBlock(kb->b);
  kb_endif(kb, &f);
  return kb_phi(kb, v, got, otherwise, pre);
}

void kb_stage_rows(dsv4_kb *kb, LLVMValueRef src, LLVMValueRef off, LLVMValueRef src_stride, long long total,
                   LLVMValueRef valid, int row_bytes, int dst_stride, LLVMValueRef dst, LLVMValueRef tid, int threads)
{
  LLVMBuilderRef b = kb->b;
  LLVMTypeRef v4 = LLVMVectorType(kb->i32, 4);
  for (long long c0 = 0; c0 < total; c0 += 16LL * threads) {
    LLVMValueRef o = LLVMBuildAdd(b, kb_i64(kb, c0), LLVMBuildMul(b, kb_zext64(kb, tid), kb_i64(kb, 16), ""), "");
    LLVMValueRef in = LLVMBuildICmp(b, LLVMIntULT, o, kb_i64(kb, total), "");
    LLVMValueRef rd = valid ? LLVMBuildAnd(b, in, LLVMBuildICmp(b, LLVMIntSLT, o, valid, ""), "") : in;
    LLVMValueRef at = o;
    if (src_stride)
      at = LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildUDiv(b, o, kb_i64(kb, row_bytes), ""), src_stride, ""),
                        LLVMBuildURem(b, o, kb_i64(kb, row_bytes), ""), "");
    LLVMValueRef v = kb_load_if(kb, rd, v4, src, LLVMBuildAdd(b, off, at, ""), 16, LLVMConstNull(v4));
    kb_if_t f = kb_if(kb, in, "stage");
    LLVMValueRef so =
        LLVMBuildAdd(b, LLVMBuildMul(b, LLVMBuildUDiv(b, o, kb_i64(kb, row_bytes), ""), kb_i64(kb, dst_stride), ""),
                     LLVMBuildURem(b, o, kb_i64(kb, row_bytes), ""), "");
    kb_store(kb, v, kb_byte_ptr(kb, dst, so), 16);
    kb_endif(kb, &f);
  }
}

LLVMValueRef kb_call(dsv4_kb *kb, const char *name, LLVMTypeRef ret, LLVMTypeRef *ptys, LLVMValueRef *args, int n,
                     unsigned cc)
{
  LLVMTypeRef fty = LLVMFunctionType(ret, ptys, (unsigned)n, 0);
  LLVMValueRef f = LLVMGetNamedFunction(kb->mod, name);
  if (!f) {
    f = LLVMAddFunction(kb->mod, name, fty);
    LLVMSetFunctionCallConv(f, cc);
  }
  LLVMValueRef c = LLVMBuildCall2(kb->b, fty, f, args, (unsigned)n, "");
  LLVMSetInstructionCallConv(c, cc);
  return c;
}

/* ---- conversions ------------------------------------------------------------ */

static LLVMValueRef bits_to_f32(dsv4_kb *kb, LLVMValueRef u32) { return LLVMBuildBitCast(kb->b, u32, kb->f32, ""); }
static LLVMValueRef f32c(dsv4_kb *kb, double v) { return LLVMConstReal(kb->f32, v); }

/* e4m3fn: place the 7 magnitude bits under the fp32 exponent/mantissa so
 * that normals and subnormals alike become exact after one multiply by
 * 2^120 (the bias difference 127 - 7); 0x7F/0xFF are NaN. */
LLVMValueRef kb_e4m3_to_f32(dsv4_kb *kb, LLVMValueRef byte)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef x = LLVMBuildZExt(b, byte, kb->i32, "");
  LLVMValueRef mag = LLVMBuildAnd(b, x, kb_i32(kb, 0x7F), "");
  LLVMValueRef sign = LLVMBuildShl(b, LLVMBuildAnd(b, x, kb_i32(kb, 0x80), ""), kb_i32(kb, 24), "");
  LLVMValueRef f = bits_to_f32(kb, LLVMBuildShl(b, mag, kb_i32(kb, 20), ""));
  f = LLVMBuildFMul(b, f, f32c(kb, 1329227995784915872903807060280344576.0 /* 2^120 */), "");
  LLVMValueRef fb = LLVMBuildOr(b, LLVMBuildBitCast(b, f, kb->i32, ""), sign, "");
  LLVMValueRef isnan = LLVMBuildICmp(b, LLVMIntEQ, mag, kb_i32(kb, 0x7F), "");
  fb = LLVMBuildSelect(b, isnan, kb_i32(kb, 0x7FC00000), fb, "");
  return bits_to_f32(kb, fb);
}

/* UE8M0: 2^(b-127) exactly in fp32; b = 0 is the subnormal 2^-127, 255 is +inf. */
LLVMValueRef kb_ue8m0_to_f32(dsv4_kb *kb, LLVMValueRef byte)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef x = LLVMBuildZExt(b, byte, kb->i32, "");
  LLVMValueRef bits = LLVMBuildShl(b, x, kb_i32(kb, 23), "");
  LLVMValueRef zero = LLVMBuildICmp(b, LLVMIntEQ, x, kb_i32(kb, 0), "");
  return bits_to_f32(kb, LLVMBuildSelect(b, zero, kb_i32(kb, 0x00400000), bits, ""));
}

LLVMValueRef kb_byte_perm(dsv4_kb *kb, LLVMValueRef a, LLVMValueRef c, int sel)
{
  if (kb->t->byte_perm)
    return kb->t->byte_perm(kb, a, c, sel);
  LLVMBuilderRef b = kb->b;
  LLVMValueRef ab = LLVMBuildOr(b, LLVMBuildZExt(b, a, kb->i64, ""),
                                LLVMBuildShl(b, LLVMBuildZExt(b, c, kb->i64, ""), kb_i64(kb, 32), ""), "");
  LLVMValueRef r = kb_i32(kb, 0);
  for (int i = 0; i < 4; i++) {
    int from = sel >> 4 * i & 7;
    LLVMValueRef v = LLVMBuildAnd(b, LLVMBuildLShr(b, ab, kb_i64(kb, 8 * from), ""), kb_i64(kb, 0xff), "");
    r = LLVMBuildOr(b, r, LLVMBuildShl(b, LLVMBuildTrunc(b, v, kb->i32, ""), kb_i32(kb, 8 * i), ""), "");
  }
  return r;
}

LLVMValueRef kb_e4m3x2_bits_bf16x2(dsv4_kb *kb, LLVMValueRef y)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef mag = LLVMBuildAnd(b, LLVMBuildLShr(b, y, kb_i32(kb, 4), ""), kb_i32(kb, 0x07f007f0), "");
  return LLVMBuildOr(b, mag, LLVMBuildAnd(b, y, kb_i32(kb, (int)0x80008000u), ""), "bf16x2");
}

/* UE8M0 as bf16 (the same 8-bit exponent field): b << 7; b = 0 is the
 * bf16 subnormal 2^-127 (0x0040), 255 is +inf, as kb_ue8m0_to_f32. */
LLVMValueRef kb_ue8m0_to_bf16x2(dsv4_kb *kb, LLVMValueRef byte)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef x = LLVMBuildZExt(b, byte, kb->i32, "");
  LLVMValueRef bits = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, x, kb_i32(kb, 0), ""), kb_i32(kb, 0x40),
                                      LLVMBuildShl(b, x, kb_i32(kb, 7), ""), "");
  return LLVMBuildOr(b, bits, LLVMBuildShl(b, bits, kb_i32(kb, 16), ""), "s2");
}

LLVMValueRef kb_bf16_to_f32(dsv4_kb *kb, LLVMValueRef h)
{
  LLVMValueRef x = LLVMBuildZExt(kb->b, h, kb->i32, "");
  return bits_to_f32(kb, LLVMBuildShl(kb->b, x, kb_i32(kb, 16), ""));
}

/* Round to nearest even on the bit pattern; NaN becomes 0x7FC0. */
LLVMValueRef kb_f32_to_bf16(dsv4_kb *kb, LLVMValueRef f)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef u = LLVMBuildBitCast(b, f, kb->i32, "");
  LLVMValueRef lsb = LLVMBuildAnd(b, LLVMBuildLShr(b, u, kb_i32(kb, 16), ""), kb_i32(kb, 1), "");
  LLVMValueRef r = LLVMBuildAdd(b, u, LLVMBuildAdd(b, lsb, kb_i32(kb, 0x7FFF), ""), "");
  r = LLVMBuildLShr(b, r, kb_i32(kb, 16), "");
  LLVMValueRef mag = LLVMBuildAnd(b, u, kb_i32(kb, 0x7FFFFFFF), "");
  LLVMValueRef isnan = LLVMBuildICmp(b, LLVMIntUGT, mag, kb_i32(kb, 0x7F800000), "");
  r = LLVMBuildSelect(b, isnan, kb_i32(kb, 0x7FC0), r, "");
  return LLVMBuildTrunc(b, r, kb->i16, "");
}

void kb_e4m3x2_to_f32(dsv4_kb *kb, LLVMValueRef b0, LLVMValueRef b1, LLVMValueRef out[2])
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef lo = LLVMBuildZExt(b, b0, kb->i16, ""), hi = LLVMBuildZExt(b, b1, kb->i16, "");
  kb_e4m3x2_pair_to_f32(kb, LLVMBuildOr(b, lo, LLVMBuildShl(b, hi, LLVMConstInt(kb->i16, 8, 0), ""), ""), out);
}

void kb_e4m3x2_pair_to_f32(dsv4_kb *kb, LLVMValueRef pair, LLVMValueRef out[2])
{
  if (kb->t->cvt_e4m3x2 && kb->t->cvt_e4m3x2(kb, pair, out))
    return;
  LLVMBuilderRef b = kb->b;
  out[0] = kb_e4m3_to_f32(kb, LLVMBuildTrunc(b, pair, kb->i8, ""));
  out[1] = kb_e4m3_to_f32(kb, LLVMBuildTrunc(b, LLVMBuildLShr(b, pair, LLVMConstInt(kb->i16, 8, 0), ""), kb->i8, ""));
}

void kb_f32x2_to_bf16(dsv4_kb *kb, LLVMValueRef a, LLVMValueRef c, LLVMValueRef out[2])
{
  LLVMValueRef packed = kb->t->cvt_bf16x2 ? kb->t->cvt_bf16x2(kb, a, c) : NULL;
  if (packed) {
    out[0] = LLVMBuildTrunc(kb->b, packed, kb->i16, "");
    out[1] = LLVMBuildTrunc(kb->b, LLVMBuildLShr(kb->b, packed, kb_i32(kb, 16), ""), kb->i16, "");
    return;
  }
  out[0] = kb_f32_to_bf16(kb, a);
  out[1] = kb_f32_to_bf16(kb, c);
}

/* Two bf16 bit patterns (i16) as one i32, a in bits 0..15. */
static LLVMValueRef pack_bf16x2(dsv4_kb *kb, LLVMValueRef a, LLVMValueRef c)
{
  LLVMBuilderRef b = kb->b;
  return LLVMBuildOr(b, LLVMBuildZExt(b, a, kb->i32, ""),
                     LLVMBuildShl(b, LLVMBuildZExt(b, c, kb->i32, ""), kb_i32(kb, 16), ""), "");
}

void kb_f32x2_to_bf16_split(dsv4_kb *kb, LLVMValueRef a, LLVMValueRef c, LLVMValueRef *hi, LLVMValueRef *lo)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef packed = kb->t->cvt_bf16x2 ? kb->t->cvt_bf16x2(kb, a, c) : NULL;
  if (!packed) {
    LLVMValueRef h[2] = {kb_f32_to_bf16(kb, a), kb_f32_to_bf16(kb, c)};
    *hi = pack_bf16x2(kb, h[0], h[1]);
    *lo = pack_bf16x2(kb, kb_f32_to_bf16(kb, LLVMBuildFSub(b, a, kb_bf16_to_f32(kb, h[0]), "")),
                      kb_f32_to_bf16(kb, LLVMBuildFSub(b, c, kb_bf16_to_f32(kb, h[1]), "")));
    return;
  }
  LLVMValueRef ha = bits_to_f32(kb, LLVMBuildShl(b, packed, kb_i32(kb, 16), ""));
  LLVMValueRef hc = bits_to_f32(kb, LLVMBuildAnd(b, packed, kb_i32(kb, (int)0xFFFF0000u), ""));
  *hi = packed;
  *lo = kb->t->cvt_bf16x2(kb, LLVMBuildFSub(b, a, ha, ""), LLVMBuildFSub(b, c, hc, ""));
}

/* The generic e4m3 encoder: normals round on the fp32 bit pattern (a carry
 * into the exponent is the right answer), subnormals (< 2^-6) are a
 * round-half-even of |x| * 2^9, which is exact in fp32. */
LLVMValueRef kb_f32_to_e4m3(dsv4_kb *kb, LLVMValueRef f)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef u = LLVMBuildBitCast(b, f, kb->i32, "");
  LLVMValueRef sign = LLVMBuildAnd(b, LLVMBuildLShr(b, u, kb_i32(kb, 24), ""), kb_i32(kb, 0x80), "");
  LLVMValueRef a = LLVMBuildAnd(b, u, kb_i32(kb, 0x7FFFFFFF), "");
  LLVMValueRef lsb = LLVMBuildAnd(b, LLVMBuildLShr(b, a, kb_i32(kb, 20), ""), kb_i32(kb, 1), "");
  LLVMValueRef r = LLVMBuildAdd(b, a, LLVMBuildAdd(b, lsb, kb_i32(kb, 0x7FFFF), ""), "");
  LLVMValueRef normal = LLVMBuildSub(b, LLVMBuildLShr(b, r, kb_i32(kb, 20), ""), kb_i32(kb, 120 << 3), "");
  LLVMValueRef af = LLVMBuildBitCast(b, a, kb->f32, "");
  LLVMValueRef t = LLVMBuildFMul(b, af, LLVMConstReal(kb->f32, 512.0), "");
  LLVMTypeRef ft = kb->f32;
  LLVMValueRef rt = kb_call(kb, "llvm.rint.f32", kb->f32, &ft, &t, 1, LLVMCCallConv);
  LLVMValueRef sub = LLVMBuildFPToUI(b, rt, kb->i32, "");
  LLVMValueRef q = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntULT, a, kb_i32(kb, 0x3C800000), ""), sub, normal, "");
  q = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntUGE, a, kb_i32(kb, 0x43E00000 /* 448 */), ""), kb_i32(kb, 0x7E), q,
                      "");
  q = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntUGT, a, kb_i32(kb, 0x7F800000), ""), kb_i32(kb, 0x7F), q, "");
  return LLVMBuildTrunc(b, LLVMBuildOr(b, q, sign, ""), kb->i8, "");
}

void kb_f32x2_to_e4m3(dsv4_kb *kb, LLVMValueRef a, LLVMValueRef c, LLVMValueRef out[2])
{
  LLVMValueRef pair = kb->t->cvt_e4m3x2_from_f32 ? kb->t->cvt_e4m3x2_from_f32(kb, a, c) : NULL;
  if (pair) {
    out[0] = LLVMBuildTrunc(kb->b, pair, kb->i8, "");
    out[1] = LLVMBuildTrunc(kb->b, LLVMBuildLShr(kb->b, pair, LLVMConstInt(kb->i16, 8, 0), ""), kb->i8, "");
    return;
  }
  out[0] = kb_f32_to_e4m3(kb, a);
  out[1] = kb_f32_to_e4m3(kb, c);
}

LLVMValueRef kb_dyn_shared(dsv4_kb *kb)
{
  static const char name[] = "dsv4_dyn_shared";
  LLVMValueRef g = LLVMGetNamedGlobal(kb->mod, name);
  if (!g) {
    g = LLVMAddGlobalInAddressSpace(kb->mod, LLVMArrayType(kb->i8, 0), name, kb->t->shared_as);
    LLVMSetLinkage(g, LLVMExternalLinkage);
    LLVMSetAlignment(g, 1024); /* matrix-unit operands are laid out in 1024-byte atoms */
  }
  return LLVMBuildPointerCast(kb->b, g, kb_ptr_to(kb, kb->i8, kb->t->shared_as), "");
}

LLVMValueRef kb_shared_array_aligned(dsv4_kb *kb, LLVMTypeRef ty, int n, int align, const char *name)
{
  LLVMTypeRef at = LLVMArrayType(ty, (unsigned)n);
  LLVMValueRef g = LLVMAddGlobalInAddressSpace(kb->mod, at, name, kb->t->shared_as);
  LLVMSetLinkage(g, LLVMInternalLinkage);
  LLVMSetInitializer(g, LLVMGetUndef(at));
  LLVMSetAlignment(g, (unsigned)align);
  return LLVMBuildPointerCast(kb->b, g, kb_ptr_to(kb, kb->i8, kb->t->shared_as), "");
}

LLVMValueRef kb_shared_array(dsv4_kb *kb, LLVMTypeRef ty, int n, const char *name)
{
  return kb_shared_array_aligned(kb, ty, n, 16, name);
}

LLVMValueRef kb_swizzle(dsv4_kb *kb, LLVMValueRef off, int sw)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef bits = LLVMBuildAnd(b, LLVMBuildLShr(b, off, kb_i64(kb, 7), ""), kb_i64(kb, sw / 16 - 1), "");
  return LLVMBuildXor(b, off, LLVMBuildShl(b, bits, kb_i64(kb, 4), ""), "swz");
}

LLVMValueRef kb_mma_offset(dsv4_kb *kb, int sw, int rows, LLVMValueRef row, LLVMValueRef kbyte)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef blk = LLVMBuildMul(b, LLVMBuildUDiv(b, kbyte, kb_i64(kb, sw), ""), kb_i64(kb, (long long)rows * sw), "");
  LLVMValueRef o = LLVMBuildAdd(b, LLVMBuildMul(b, row, kb_i64(kb, sw), ""),
                                LLVMBuildAdd(b, blk, LLVMBuildURem(b, kbyte, kb_i64(kb, sw), ""), ""), "");
  return kb_swizzle(kb, o, sw);
}

void kb_udivrem_fast(dsv4_kb *kb, LLVMValueRef x, LLVMValueRef d, LLVMValueRef *q, LLVMValueRef *r)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef dm1 = LLVMBuildSub(b, d, kb_i64(kb, 1), "");
  LLVMValueRef pow2 = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildAnd(b, d, dm1, ""), kb_i64(kb, 0), "pow2");
  kb_if_t p2 = kb_if(kb, pow2, "pow2");
  LLVMTypeRef c2[2] = {kb->i64, kb->i1};
  LLVMValueRef ca[2] = {d, LLVMConstInt(kb->i1, 1, 0)};
  LLVMValueRef sh = kb_call(kb, "llvm.cttz.i64", kb->i64, c2, ca, 2, LLVMCCallConv);
  LLVMValueRef qs = LLVMBuildLShr(b, x, sh, ""), rs = LLVMBuildAnd(b, x, dm1, "");
  LLVMBasicBlockRef from_s = LLVMGetInsertBlock(b);
  kb_else(kb, &p2);
  LLVMValueRef qd = LLVMBuildUDiv(b, x, d, ""), rd = LLVMBuildURem(b, x, d, "");
  LLVMBasicBlockRef from_d = LLVMGetInsertBlock(b);
  kb_endif(kb, &p2);
  *q = kb_phi(kb, qs, from_s, qd, from_d);
  *r = kb_phi(kb, rs, from_s, rd, from_d);
}

static LLVMValueRef reduce_op(dsv4_kb *kb, LLVMValueRef a, LLVMValueRef c, int op)
{
  if (op == KB_REDUCE_ADD)
    return LLVMBuildFAdd(kb->b, a, c, "");
  return LLVMBuildSelect(kb->b, LLVMBuildFCmp(kb->b, LLVMRealOGT, c, a, ""), c, a, "");
}

LLVMValueRef kb_butterfly(dsv4_kb *kb, LLVMValueRef v, int width, int op,
                          LLVMValueRef (*xor_lane)(dsv4_kb *kb, LLVMValueRef v, int mask))
{
  for (int m = width / 2; m >= 1; m /= 2)
    v = reduce_op(kb, v, xor_lane(kb, v, m), op);
  return v;
}

LLVMValueRef kb_lane_reduce(dsv4_kb *kb, LLVMValueRef v, int width, int op, int threads)
{
  if (width <= 1)
    return v;
  /* the hook where each group is whole and inside one warp: width divides
   * the warp (both powers of two) and the CTA, whose warps start at
   * multiples of the warp, so no group reaches a lane past the CTA's end */
  int whole = !(width & (width - 1)) && width <= kb->warp && threads % width == 0;
  LLVMValueRef r = kb->t->lane_reduce && whole ? kb->t->lane_reduce(kb, v, width, op) : NULL;
  if (r)
    return r;
  /* shared memory: write, barrier, each thread folds its group in order */
  LLVMBuilderRef b = kb->b;
  LLVMValueRef smem = kb_shared_array(kb, kb->f32, threads, "dsv4_reduce");
  LLVMValueRef tid = kb->t->thread_id(kb);
  kb->t->barrier(kb); /* earlier readers of the array are done */
  kb_store(kb, v, kb_byte_ptr(kb, smem, LLVMBuildMul(b, kb_zext64(kb, tid), kb_i64(kb, 4), "")), 4);
  kb->t->barrier(kb);
  LLVMValueRef base = LLVMBuildAnd(b, tid, kb_i32(kb, ~(width - 1)), "");
  LLVMValueRef off = LLVMBuildMul(b, kb_zext64(kb, base), kb_i64(kb, 4), "");
  r = NULL;
  for (int j = 0; j < width; j++) {
    LLVMValueRef x = kb_load(kb, kb->f32, kb_byte_ptr(kb, smem, LLVMBuildAdd(b, off, kb_i64(kb, 4 * j), "")), 4);
    r = r ? reduce_op(kb, r, x, op) : x;
  }
  return r;
}

static LLVMValueRef math(dsv4_kb *kb, int fn, LLVMValueRef x)
{
  LLVMValueRef r = kb->t->math ? kb->t->math(kb, fn, x) : NULL;
  if (r)
    return r;
  LLVMTypeRef ft = kb->f32;
  return kb_call(kb, fn == KB_LOG2 ? "llvm.log2.f32" : "llvm.exp2.f32", kb->f32, &ft, &x, 1, LLVMCCallConv);
}

LLVMValueRef kb_exp2(dsv4_kb *kb, LLVMValueRef x) { return math(kb, KB_EXP2, x); }
LLVMValueRef kb_exp2_ftz(dsv4_kb *kb, LLVMValueRef x) { return math(kb, KB_EXP2_FTZ, x); }
LLVMValueRef kb_log2(dsv4_kb *kb, LLVMValueRef x) { return math(kb, KB_LOG2, x); }

void kb_for(dsv4_kb *kb, kb_loop_t *l, LLVMValueRef start, LLVMValueRef end, int n, const LLVMValueRef *init)
{
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(kb->b);
  l->head = LLVMAppendBasicBlockInContext(kb->ctx, kb->fn, "loop");
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(kb->ctx, kb->fn, "body");
  l->exit = LLVMAppendBasicBlockInContext(kb->ctx, kb->fn, "after");
  LLVMBuildBr(kb->b, l->head);
  LLVMPositionBuilderAtEnd(kb->b, l->head);
  l->iv = LLVMBuildPhi(kb->b, kb->i32, "iv");
  l->step = 1;
  LLVMAddIncoming(l->iv, &start, &pre, 1);
  l->n = n;
  for (int i = 0; i < n; i++) {
    l->vars[i] = LLVMBuildPhi(kb->b, LLVMTypeOf(init[i]), "");
    LLVMValueRef v = init[i];
    LLVMAddIncoming(l->vars[i], &v, &pre, 1);
  }
  LLVMBuildCondBr(kb->b, LLVMBuildICmp(kb->b, LLVMIntSLT, l->iv, end, ""), body, l->exit);
  LLVMPositionBuilderAtEnd(kb->b, body);
}

void kb_for_end(dsv4_kb *kb, kb_loop_t *l, const LLVMValueRef *next)
{
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(kb->b);
  LLVMValueRef inc = LLVMBuildAdd(kb->b, l->iv, kb_i32(kb, l->step), "");
  LLVMAddIncoming(l->iv, &inc, &latch, 1);
  for (int i = 0; i < l->n; i++) {
    LLVMValueRef v = next[i];
    LLVMAddIncoming(l->vars[i], &v, &latch, 1);
  }
  LLVMBuildBr(kb->b, l->head);
  LLVMPositionBuilderAtEnd(kb->b, l->exit);
}

int kb_verify(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d)
{
  char *msg = NULL;
  if (LLVMVerifyModule(kb->mod, LLVMReturnStatusAction, &msg)) {
    dsv4_error(d, k->file, k->line, "kernel '%s': internal error: generated IR does not verify: %s", k->name,
               msg ? msg : "");
    LLVMDisposeMessage(msg);
    return 1;
  }
  LLVMDisposeMessage(msg);
  return 0;
}
