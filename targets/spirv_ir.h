/* spirv_ir.h -- the SPIR-V target's IR hooks (LLVM 15 helper only). */
#ifndef DSV4_SPIRV_IR_H
#define DSV4_SPIRV_IR_H
#include "../compiler/kb.h"
extern const dsv4_target_ir dsv4_spirv_ir;
/* spirv_subgroups.c: define sub_group_shuffle_xor in module m (a SPIR 1.2
 * module, typed pointers) as sub-groups of `size` over a work-group of at
 * most `threads`, and inline it; 0, or 1 with *err (malloc'd). */
int dsv4_spirv_emulate_subgroups(LLVMModuleRef m, int size, int threads, char **err);
#endif
