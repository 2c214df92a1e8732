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

#endif
