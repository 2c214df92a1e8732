/* spirv_ir.h -- the SPIR-V target's IR hooks (LLVM 15 helper only). */
#ifndef DSV4_SPIRV_IR_H
#define DSV4_SPIRV_IR_H
#include "../compiler/kb.h"
extern const dsv4_target_ir dsv4_spirv_ir;
#endif
