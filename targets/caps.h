/* caps.h -- what each target and arch offers, as data: one table a target
 * (targets/caps.c), asked by the spec checker, the generators and the
 * target hooks alike.  No LLVM: the front end links it.  Compile-time
 * facts only; never a device query. */
#ifndef DSV4_CAPS_H
#define DSV4_CAPS_H

#include "plan.h"

/* Matrix instructions an arch has that a generator can use. */
enum {
  DSV4_MMA_BF16 = 1u << 0, /* mma.sync m16n8k16, bf16 operands */
  DSV4_MMA_E4M3 = 1u << 1, /* mma.sync m16n8k32, e4m3 operands */
  DSV4_WGMMA = 1u << 2     /* wgmma.mma_async (warpgroup matrix units) */
};

typedef struct {
  const char *arch;
  int max_threads; /* threads a CTA / work-group may have */
  int warp;        /* threads a warp / wavefront (1: no subgroup assumed) */
  int max_shared;  /* dynamic shared memory a CTA may opt in to (0: none passed) */
  unsigned matrix; /* DSV4_MMA_*, DSV4_WGMMA */
  int subgroup_switch; /* a spec may turn subgroup code on or off (targets.<t>.subgroups) */
} dsv4_arch_caps;

/* The row of (t, arch), or NULL when t does not emit arch. */
const dsv4_arch_caps *dsv4_caps(dsv4_target_kind t, const char *arch);
/* The archs of t, space-separated, in the table's order (static). */
const char *dsv4_caps_arch_list(dsv4_target_kind t);
/* Row i of t's table (NULL past its end): for listings and tests. */
const dsv4_arch_caps *dsv4_caps_row(dsv4_target_kind t, int i);

/* The compile-time questions the compiler asks of a target (never a device
 * query), answered from the target's table. */
int dsv4_target_max_threads(dsv4_target_kind t);
int dsv4_target_warp(dsv4_target_kind t, const char *arch);
/* The threads of a warp of kernel k on t: the sub-group size its spec
 * requires (targets.<t>.subgroup_size, with subgroups on), else its
 * arch's.  What the spec checker, the forms and the generators (kb->warp)
 * all hold the kernel to. */
int dsv4_kernel_warp(const dsv4_kernel *k, dsv4_target_kind t);
/* 1 if n is the warp of some target's arch (above 1): the sub-group sizes a
 * spec may require, so that a sub-group form runs the code a PTX warp or an
 * AMDGCN wavefront would.  The list writes them as "32 or 64" into buf. */
int dsv4_subgroup_size_ok(int n);
const char *dsv4_subgroup_size_list(char *buf, size_t n);
/* 1 if (t, arch) has bf16 warp matrix instructions a generator can use. */
int dsv4_target_has_bf16_mma(dsv4_target_kind t, const char *arch);
int dsv4_target_has_e4m3_mma(dsv4_target_kind t, const char *arch);
int dsv4_target_has_wgmma(dsv4_target_kind t, const char *arch);
/* 1 if a spec may switch t's subgroup code on or off. */
int dsv4_target_has_subgroup_switch(dsv4_target_kind t);
/* The most dynamic shared memory a CTA of (t, arch) may have. */
int dsv4_target_max_shared(dsv4_target_kind t, const char *arch);
/* 1 if arch is one this target can emit; list is a space-separated list. */
int dsv4_target_arch_ok(dsv4_target_kind t, const char *arch);
const char *dsv4_target_arch_list(dsv4_target_kind t);

/* How a target's code is built, for the driver rather than the generators. */
typedef enum {
  DSV4_LLVM_MAIN,  /* the LLVM dsv4c links (19: PTX, AMDGCN) */
  DSV4_LLVM_SPIRV  /* the dsv4c-spirv helper's LLVM (15), whose IR the Khronos translator reads */
} dsv4_llvm_build;
typedef struct {
  dsv4_llvm_build llvm;   /* the LLVM that builds the target's code */
  const char *translator; /* the tool after LLVM, named in the toolchain line (NULL: none) */
  int compile_weight;     /* a compile's cost against the others' (PTX 2: ptxas runs after LLVM) */
} dsv4_target_build;
/* The build facts of t (a zeroed record past the known targets). */
const dsv4_target_build *dsv4_target_build_of(dsv4_target_kind t);

#endif
