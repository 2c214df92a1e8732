/* spirv_proto.h -- the pipe protocol between dsv4c (LLVM 19) and its SPIR-V
 * helper dsv4c-spirv (LLVM 15 + SPIRV-LLVM-Translator).
 *
 * The two LLVMs never share a process (DESIGN.md), and an abort inside the
 * translator becomes a diagnostic in the parent.  Both sides are built from
 * this header and plan.h in one build, so the kernel plan travels as bytes.
 *   request:  magic "DSV4SPQ1", u32 sizeof(dsv4_kernel), u32 want, dsv4_kernel
 *   reply:    magic "DSV4SPR2", u32 status, then four (u64 length, bytes)
 *             records: SPIR-V, SPIR 1.2 bitcode, LLVM IR text, and the
 *             diagnostics as dsv4_diag records (positions kept, so the
 *             parent reports them as the helper made them)
 */
#ifndef DSV4_SPIRV_PROTO_H
#define DSV4_SPIRV_PROTO_H

#include <stdint.h>

#include "../compiler/plan.h"

#define DSV4_SPQ_MAGIC "DSV4SPQ1"
#define DSV4_SPR_MAGIC "DSV4SPR2"

typedef struct {
  char magic[8];
  uint32_t kernel_size;
  uint32_t want;
  dsv4_kernel kernel;
} dsv4_spirv_request;

#endif
