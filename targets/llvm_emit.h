/* llvm_emit.h -- the in-process LLVM path shared by PTX and AMDGCN:
 * generate the kernel, optimize it, emit assembly or an object. */
#ifndef DSV4_LLVM_EMIT_H
#define DSV4_LLVM_EMIT_H

#include "../compiler/kb.h"
#include "target.h"

/* Build kernel k with ir's hooks for cpu/features, optimize, and emit:
 * the assembly text into *asm_out (always) and, when want_obj, an object
 * file into obj, obj_len.  IR text goes to a->llvm when asked. */
/* Register LLVM's targets and dsv4c's options, once per process; safe to
 * call from any thread, and called before compiling on several. */
void dsv4_llvm_init(void);

int dsv4_llvm_compile(const dsv4_target_ir *ir, const dsv4_kernel *k, const char *cpu, const char *features,
                      unsigned want, int want_obj, dsv4_artifact *a, char **asm_out, unsigned char **obj,
                      size_t *obj_len, dsv4_diags *d);

#endif
