/* lower.h -- the one lowering step of both LLVM builds (lower.c). */
#ifndef DSV4_LOWER_H
#define DSV4_LOWER_H

#include <llvm-c/TargetMachine.h>

#include "kb.h"

/* Build kernel k into kb->mod with its op's generator (which verifies the
 * module), and run kb's target pipeline (kb->t->opt_pipeline) for the target
 * machine tm (NULL where there is none: SPIR-V).  0 on success, else 1
 * with a diagnostic positioned at the kernel in *d. */
int dsv4_lower(dsv4_kb *kb, const dsv4_kernel *k, LLVMTargetMachineRef tm, dsv4_diags *d);

#endif
