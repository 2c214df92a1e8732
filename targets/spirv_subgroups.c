/* spirv_subgroups.c -- sub-groups emulated in the SPIR 1.2 fallback, for
 * OpenCL devices that have none (targets.spirv.emulate_subgroups).
 *
 * SPIR 1.2 is OpenCL 1.2, which has no sub-groups, and PoCL 3.1 (CI's
 * OpenCL) has none either: no cl_khr_subgroups, no sub-group built-ins in
 * its kernel library, CL_DEVICE_MAX_NUM_SUB_GROUPS 0 (docs/design.md).  A
 * kernel built with sub-groups therefore cannot run there, and the runtime
 * refuses it.  To run its sub-group code paths all the same (the
 * cross-lane reductions an AMDGCN wavefront or a PTX warp runs, at their
 * width), this pass gives the reverse-translated module a definition of
 * the one sub-group built-in the generators call, sub_group_shuffle_xor:
 *
 *   - a sub-group is `size` consecutive local ids of a 1-D work-group,
 *     starting at a multiple of size (how the devices that have sub-groups
 *     lay out a 1-D work-group, and how an AMD wavefront or an NVIDIA warp
 *     is made);
 *   - the exchange goes through a local array between two work-group
 *     barriers: every lane writes its value, every lane reads lane ^ mask's;
 *   - a lane outside the sub-group (mask >= size) or past the work-group's
 *     end reads NaN, where hardware gives an undefined value, so that code
 *     which reached such a lane fails its check rather than passing by luck.
 *
 * The barriers make it right only where the whole work-group reaches each
 * shuffle together, which kb_lane_reduce, its one caller, requires of every
 * target anyway.  The definition is inlined into the kernels.  The SPIR-V
 * (.spv) is never touched: it keeps the real shuffles.  Built only into the
 * LLVM 15 helper. */
#include <llvm-c/Core.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "spirv_ir.h"

enum { SPIR_FUNC_CC = 75 };

/* A built-in of the module by its SPIR mangled name, declared on first use. */
static LLVMValueRef builtin(LLVMModuleRef m, const char *name, LLVMTypeRef ret, LLVMTypeRef *ps, int n)
{
  LLVMValueRef f = LLVMGetNamedFunction(m, name);
  if (!f) {
    f = LLVMAddFunction(m, name, LLVMFunctionType(ret, ps, (unsigned)n, 0));
    LLVMSetFunctionCallConv(f, SPIR_FUNC_CC);
  }
  return f;
}

static LLVMValueRef call(LLVMBuilderRef b, LLVMModuleRef m, const char *name, LLVMTypeRef ret, LLVMTypeRef arg,
                         LLVMValueRef v)
{
  LLVMValueRef f = builtin(m, name, ret, &arg, 1);
  LLVMValueRef c = LLVMBuildCall2(b, LLVMFunctionType(ret, &arg, 1, 0), f, &v, 1, "");
  LLVMSetInstructionCallConv(c, SPIR_FUNC_CC);
  return c;
}

/* The body of float sub_group_shuffle_xor(float v, uint mask) over `lanes`, a
 * local array of the work-group's values. */
static void shuffle_body(LLVMModuleRef m, LLVMValueRef f, LLVMValueRef lanes, LLVMTypeRef lanes_ty, int size)
{
  LLVMContextRef cx = LLVMGetModuleContext(m);
  LLVMTypeRef i32 = LLVMInt32TypeInContext(cx), i64 = LLVMInt64TypeInContext(cx), f32 = LLVMFloatTypeInContext(cx);
  LLVMBuilderRef b = LLVMCreateBuilderInContext(cx);
  LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(cx, f, "entry"));
  LLVMValueRef v = LLVMGetParam(f, 0), mask = LLVMGetParam(f, 1), zero = LLVMConstInt(i32, 0, 0);
  LLVMValueRef lid = LLVMBuildTrunc(b, call(b, m, "_Z12get_local_idj", i64, i32, zero), i32, "lid");
  LLVMValueRef n = LLVMBuildTrunc(b, call(b, m, "_Z14get_local_sizej", i64, i32, zero), i32, "n");
  LLVMValueRef local_fence = LLVMConstInt(i32, 1, 0); /* CLK_LOCAL_MEM_FENCE */
  call(b, m, "_Z7barrierj", LLVMVoidTypeInContext(cx), i32, local_fence); /* earlier reads are done */
  LLVMValueRef at[2] = {zero, lid};
  LLVMBuildStore(b, v, LLVMBuildInBoundsGEP2(b, lanes_ty, lanes, at, 2, ""));
  call(b, m, "_Z7barrierj", LLVMVoidTypeInContext(cx), i32, local_fence);
  LLVMValueRef src = LLVMBuildXor(b, lid, mask, "src");
  LLVMValueRef ok = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntULT, mask, LLVMConstInt(i32, (unsigned)size, 0), ""),
                                 LLVMBuildICmp(b, LLVMIntULT, src, n, ""), "ok");
  at[1] = LLVMBuildSelect(b, ok, src, lid, "");
  LLVMValueRef x = LLVMBuildLoad2(b, f32, LLVMBuildInBoundsGEP2(b, lanes_ty, lanes, at, 2, ""), "");
  LLVMBuildRet(b, LLVMBuildSelect(b, ok, x, LLVMConstReal(f32, NAN), ""));
  LLVMDisposeBuilder(b);
}

int dsv4_spirv_emulate_subgroups(LLVMModuleRef m, int size, int threads, char **err)
{
  LLVMValueRef f = LLVMGetNamedFunction(m, "_Z21sub_group_shuffle_xorfj");
  if (!f)
    return 0; /* no shuffle: nothing to emulate */
  if (!LLVMIsDeclaration(f)) {
    *err = strdup("the module defines sub_group_shuffle_xor itself");
    return 1;
  }
  LLVMContextRef cx = LLVMGetModuleContext(m);
  LLVMTypeRef lanes_ty = LLVMArrayType(LLVMFloatTypeInContext(cx), (unsigned)threads);
  LLVMValueRef lanes = LLVMAddGlobalInAddressSpace(m, lanes_ty, "dsv4_subgroup_lanes", 3);
  LLVMSetLinkage(lanes, LLVMInternalLinkage);
  LLVMSetInitializer(lanes, LLVMGetUndef(lanes_ty));
  LLVMSetAlignment(lanes, 4);
  /* the declaration's memory attributes (a shuffle reads nothing) would
   * be wrong of a body with barriers and local stores */
  static const char *const mem[] = {"readnone", "readonly", "writeonly", "argmemonly", "inaccessiblememonly"};
  for (size_t i = 0; i < sizeof mem / sizeof *mem; i++)
    LLVMRemoveEnumAttributeAtIndex(f, LLVMAttributeFunctionIndex,
                                   LLVMGetEnumAttributeKindForName(mem[i], strlen(mem[i])));
  shuffle_body(m, f, lanes, lanes_ty, size);
  LLVMSetLinkage(f, LLVMInternalLinkage);
  unsigned inl = LLVMGetEnumAttributeKindForName("alwaysinline", 12);
  LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(cx, inl, 0));
  LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
  LLVMErrorRef e = LLVMRunPasses(m, "always-inline", NULL, po);
  LLVMDisposePassBuilderOptions(po);
  if (e) {
    char *msg = LLVMGetErrorMessage(e);
    *err = strdup(msg);
    LLVMDisposeErrorMessage(msg);
    return 1;
  }
  return 0;
}
