/* lower.c -- generate, verify, optimise: the lowering step that dsv4c
 * (LLVM 19: PTX, AMDGCN) and its SPIR-V helper dsv4c-spirv (LLVM 15) both
 * run, so the two builds cannot drift apart in how a kernel becomes
 * optimised IR.  What follows differs by target and stays with it: code
 * emission for a target machine (targets/llvm_emit.c), the translator
 * (targets/spirv_gen.c).  The LLVM-C calls used here exist alike in both
 * LLVMs. */
#include "lower.h"

#include <llvm-c/Transforms/PassBuilder.h>

#include "kernels/gen.h"

int dsv4_lower(dsv4_kb *kb, const dsv4_kernel *k, LLVMTargetMachineRef tm, dsv4_diags *d)
{
  if (dsv4_generate(kb, k, d)) /* which ends by verifying the module (kb_verify) */
    return 1;
  LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
  LLVMErrorRef e = LLVMRunPasses(kb->mod, kb->t->opt_pipeline, tm, po);
  LLVMDisposePassBuilderOptions(po);
  if (!e)
    return 0;
  char *m = LLVMGetErrorMessage(e);
  dsv4_error(d, k->file, k->line, "kernel '%s': optimizer failed: %s", k->name, m);
  LLVMDisposeErrorMessage(m);
  return 1;
}
