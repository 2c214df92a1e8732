/* artifact.h -- what compiling one kernel for one target produces: the
 * code, its fallback, the dumps asked for.  Shared by the targets, which
 * fill it, and the bundle writer and CLI, which read it, so that nothing
 * in compiler/ needs a header of targets/ for it. */
#ifndef DSV4_ARTIFACT_H
#define DSV4_ARTIFACT_H

#include <stddef.h>

/* What a compile keeps (LLVM, ASM) and how it validates: NO_PTXAS leaves
 * ptxas's assembly of PTX out (dsv4c --no-ptxas: sweeps, where the driver
 * assembles each variant when the tuner loads it, and a refusal
 * disqualifies that variant). */
enum { DSV4_WANT_LLVM = 1, DSV4_WANT_ASM = 2, DSV4_WANT_NO_PTXAS = 4 };

/* What compiling one kernel for one target produced; every field malloc'd. */
typedef struct {
  unsigned char *code; /* the artifact: PTX text, HSACO ELF, SPIR-V words */
  size_t code_len;
  unsigned char *aux;  /* SPIR-V: SPIR 1.2 bitcode fallback for OpenCL without IL */
  size_t aux_len;
  char *llvm;          /* optimized LLVM IR text, when DSV4_WANT_LLVM */
  char *asm_text;      /* target assembly / disassembly, when DSV4_WANT_ASM */
  char note[256];      /* how it was validated, for the CLI's verbose output */
  unsigned flags;      /* the bundle entry's DSV4_ENTRY_* (what the generator built) */
} dsv4_artifact;

void dsv4_artifact_free(dsv4_artifact *a);

#endif
