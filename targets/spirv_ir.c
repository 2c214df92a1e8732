/* spirv_ir.c -- SPIR-V IR hooks: OpenCL C built-ins by their SPIR mangled
 * names (the translator maps them to SPIR-V built-in variables), the
 * spir_kernel convention, and OpenCL 1.2 module metadata.  Built only into
 * the LLVM 15 helper.
 *
 * With sub-groups on (targets.spirv.subgroups, kb->warp the size the spec
 * requires) a kernel carries intel_reqd_sub_group_size, which the
 * translator writes as the SubgroupSize execution mode, and reduces across
 * lanes with cl_khr_subgroup_shuffle's sub_group_shuffle_xor (SPIR-V 1.3's
 * OpGroupNonUniformShuffleXor): the butterfly of every target's hook
 * (kb_butterfly), at the width an AMDGCN wavefront or a PTX warp has. */
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

/* A function attribute by name (no value). */
static void fn_attr(dsv4_kb *kb, LLVMValueRef fn, const char *name)
{
  unsigned id = LLVMGetEnumAttributeKindForName(name, strlen(name));
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(kb->ctx, id, 0));
}

static void spir_mark_kernel(dsv4_kb *kb, LLVMValueRef fn, int threads)
{
  (void)threads;
  LLVMSetFunctionCallConv(fn, SPIR_KERNEL_CC);
  if (kb->warp > 1) { /* the sub-group size the spec requires: SPIR-V's SubgroupSize execution mode */
    const char *kind = "intel_reqd_sub_group_size";
    LLVMMetadataRef size = LLVMValueAsMetadata(kb_i32(kb, kb->warp));
    LLVMGlobalSetMetadata(fn, LLVMGetMDKindIDInContext(kb->ctx, kind, (unsigned)strlen(kind)),
                          LLVMMDNodeInContext2(kb->ctx, &size, 1));
  }
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

#ifndef DSV4_MUTANT_LANE_XOR
#define DSV4_MUTANT_LANE_XOR 0 /* a test build (dsv4c-spirv-mutant) flips these bits of every shuffle's mask */
#endif

/* f32 v of the sub-group's lane (lane ^ mask): sub_group_shuffle_xor(float,
 * uint), convergent (no pass may move it under a condition). */
static LLVMValueRef spir_xor_lane(dsv4_kb *kb, LLVMValueRef v, int mask)
{
  static const char name[] = "_Z21sub_group_shuffle_xorfj";
  LLVMTypeRef ps[2] = {kb->f32, kb->i32};
  LLVMValueRef args[2] = {v, kb_i32(kb, mask ^ DSV4_MUTANT_LANE_XOR)};
  LLVMValueRef r = kb_call(kb, name, kb->f32, ps, args, 2, SPIR_FUNC_CC);
  fn_attr(kb, LLVMGetNamedFunction(kb->mod, name), "convergent");
  return r;
}

/* Only with sub-groups on: kb_lane_reduce calls it for groups of at most
 * kb->warp lanes, which without them is 1 (no group). */
static LLVMValueRef spir_lane_reduce(dsv4_kb *kb, LLVMValueRef v, int width, int op)
{
  return kb->warp > 1 ? kb_butterfly(kb, v, width, op, spir_xor_lane) : NULL;
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
    .lane_reduce = spir_lane_reduce,
};
