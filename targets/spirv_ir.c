/* spirv_ir.c -- SPIR-V IR hooks: OpenCL C built-ins by their SPIR mangled
 * names (the translator maps them to SPIR-V built-in variables), the
 * spir_kernel convention, and OpenCL 1.2 module metadata.  Built only into
 * the LLVM 15 helper. */
#include <string.h>

#include "../compiler/kb.h"
#include "spirv_ir.h"

enum { SPIR_FUNC_CC = 75, SPIR_KERNEL_CC = 76 };

static const char *spir_triple(const char *arch)
{
  (void)arch;
  return "spir64-unknown-unknown";
}

/* !{i32 1, i32 2} under a named metadata, once per module. */
static void version_md(dsv4_kb *kb, const char *name)
{
  if (LLVMGetNamedMetadata(kb->mod, name, strlen(name)))
    return;
  LLVMMetadataRef ops[2] = {LLVMValueAsMetadata(kb_i32(kb, 1)), LLVMValueAsMetadata(kb_i32(kb, 2))};
  LLVMAddNamedMetadataOperand(kb->mod, name, LLVMMetadataAsValue(kb->ctx, LLVMMDNodeInContext2(kb->ctx, ops, 2)));
}

static void spir_mark_kernel(dsv4_kb *kb, LLVMValueRef fn, int threads)
{
  (void)threads;
  LLVMSetFunctionCallConv(fn, SPIR_KERNEL_CC);
  version_md(kb, "opencl.ocl.version");
  version_md(kb, "opencl.spir.version");
}

/* size_t get_xxx_id(uint dim), truncated to i32. */
static LLVMValueRef builtin_id(dsv4_kb *kb, const char *mangled, int dim)
{
  LLVMTypeRef pt = kb->i32;
  LLVMValueRef arg = kb_i32(kb, dim);
  LLVMValueRef v = kb_call(kb, mangled, kb->i64, &pt, &arg, 1, SPIR_FUNC_CC);
  return LLVMBuildTrunc(kb->b, v, kb->i32, "");
}

static LLVMValueRef spir_thread_id(dsv4_kb *kb) { return builtin_id(kb, "_Z12get_local_idj", 0); }
static LLVMValueRef spir_block_id(dsv4_kb *kb, int dim) { return builtin_id(kb, "_Z12get_group_idj", dim); }

static void spir_barrier(dsv4_kb *kb)
{
  LLVMTypeRef pt = kb->i32;
  LLVMValueRef arg = kb_i32(kb, 1); /* CLK_LOCAL_MEM_FENCE */
  kb_call(kb, "_Z7barrierj", kb->v, &pt, &arg, 1, SPIR_FUNC_CC);
}

const dsv4_target_ir dsv4_spirv_ir = {
    .kind = DSV4_TARGET_SPIRV,
    .global_as = 1,
    .shared_as = 3,
    .triple = spir_triple,
    .datalayout = "e-i64:64-v16:16-v24:32-v32:32-v48:64-v96:128-v192:256-v256:256-v512:512-v1024:1024",
    .opt_pipeline = "function(sroa,early-cse,instcombine,simplifycfg)",
    .mark_kernel = spir_mark_kernel,
    .thread_id = spir_thread_id,
    .block_id = spir_block_id,
    .barrier = spir_barrier,
};
