/* llvm_emit.c -- LLVM 19 in process: plan -> IR -> optimized IR -> asm/obj. */
#include "llvm_emit.h"

#include <llvm-c/Support.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../compiler/kernels/gen.h"
#include "../compiler/lower.h"

/* Register the targets LLVM was built with, once (dsv4c calls it before
 * its compile threads start; the once guard keeps other callers right). */
static void init_targets_once(void)
{
  LLVMInitializeAllTargetInfos();
  LLVMInitializeAllTargets();
  LLVMInitializeAllTargetMCs();
  LLVMInitializeAllAsmPrinters();
  /* 32-bit pointers to NVPTX shared memory (the data layout's p3:32): a
   * CTA's shared window is below 4 GB, so 64-bit shared addresses only
   * doubled the address arithmetic of every swizzled store and load.  The
   * option is process-wide and read only by the NVPTX target machine (the
   * AMDGCN and SPIR-V output is byte-identical with it).  LLVM-C parses
   * with its errors sent nowhere, so this never prints or exits; were the
   * option ignored, shared pointers would stay 64-bit and every hook that
   * needs a 32-bit address (nvptx.c's saddr) would still truncate right. */
  const char *opts[] = {"dsv4c", "-nvptx-short-ptr"};
  LLVMParseCommandLineOptions(2, opts, NULL);
}

void dsv4_llvm_init(void)
{
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, init_targets_once);
}

/* Emit the module as the given file type into a malloc'd buffer. */
static int emit(LLVMTargetMachineRef tm, LLVMModuleRef m, LLVMCodeGenFileType ft, unsigned char **p, size_t *n,
                char **err)
{
  LLVMMemoryBufferRef mb = NULL;
  if (LLVMTargetMachineEmitToMemoryBuffer(tm, m, ft, err, &mb))
    return 1;
  *n = LLVMGetBufferSize(mb);
  *p = malloc(*n + 1);
  if (*p) {
    memcpy(*p, LLVMGetBufferStart(mb), *n);
    (*p)[*n] = 0;
  }
  LLVMDisposeMemoryBuffer(mb);
  return *p == NULL;
}

int dsv4_llvm_compile(const dsv4_target_ir *ir, const dsv4_kernel *k, const char *cpu, const char *features,
                      unsigned want, int want_obj, dsv4_artifact *a, char **asm_out, unsigned char **obj,
                      size_t *obj_len, dsv4_diags *d)
{
  dsv4_llvm_init();
  const char *triple = ir->triple(cpu);
  char *err = NULL;
  LLVMTargetRef tgt;
  if (LLVMGetTargetFromTriple(triple, &tgt, &err)) {
    dsv4_error(d, k->file, k->line, "kernel '%s': this LLVM has no target for %s: %s", k->name, triple, err);
    LLVMDisposeMessage(err);
    return 1;
  }
  LLVMTargetMachineRef tm = LLVMCreateTargetMachine(tgt, triple, cpu, features, LLVMCodeGenLevelAggressive,
                                                    LLVMRelocDefault, LLVMCodeModelDefault);
  dsv4_kb kb;
  kb_init(&kb, ir, k); /* cpu is k's arch for the target */
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
  char *dl = LLVMCopyStringRepOfTargetData(td);
  LLVMSetDataLayout(kb.mod, dl);
  LLVMDisposeMessage(dl);
  LLVMDisposeTargetData(td);
  int rc = dsv4_lower(&kb, k, tm, d);
  a->flags = kb.entry_flags;
  if (!rc && (want & DSV4_WANT_LLVM)) {
    char *s = LLVMPrintModuleToString(kb.mod);
    a->llvm = strdup(s);
    LLVMDisposeMessage(s);
  }
  size_t n;
  /* codegen rewrites the IR it runs on (AMDGPU annotates control flow), so
   * each emission gets its own copy of the module */
  LLVMModuleRef copy = rc ? NULL : LLVMCloneModule(kb.mod);
  if (!rc && emit(tm, copy, LLVMAssemblyFile, (unsigned char **)asm_out, &n, &err)) {
    dsv4_error(d, k->file, k->line, "kernel '%s': %s code generation failed: %s", k->name, cpu, err ? err : "");
    LLVMDisposeMessage(err);
    rc = 1;
  }
  if (!rc && want_obj && emit(tm, kb.mod, LLVMObjectFile, obj, obj_len, &err)) {
    dsv4_error(d, k->file, k->line, "kernel '%s': %s object emission failed: %s", k->name, cpu, err ? err : "");
    LLVMDisposeMessage(err);
    rc = 1;
  }
  if (copy)
    LLVMDisposeModule(copy);
  kb_dispose(&kb);
  LLVMDisposeTargetMachine(tm);
  return rc;
}
