/* kernel_regs.h -- register allotments of the warp-specialised kernels:
 * compiler-internal tuning, not part of the bundle format (the runtime
 * never needs them), so kept out of the installed dsv4_abi.h.
 *
 * sparse_decode's warpgroup form gives each role its registers with
 * setmaxnreg.  A CTA of 256 + 32 p threads starts at the cap 65536 /
 * threads rounded down to 8 (168 at 384 threads, 128 at 512), each
 * scheduler holding a warp of each consumer warpgroup and p / 4 producer
 * warps: what the others give back must cover what one takes,
 * 4 (L + F) + p P <= cap x threads / 32, or a setmaxnreg.inc waits forever.
 * The lead holds S (32 registers) and its share of O (LEAD_DIMS of V), the
 * follower the rest of O.  Eight producer warps at 72 registers in both
 * forms: one row a thread a tile in CTA pairs, two alone; eight at 72
 * measured 15-17% faster at V4-Flash than four at 136.  How these values
 * were chosen, with the measurements: docs/perf-log.md. */
#ifndef DSV4_KERNEL_REGS_H
#define DSV4_KERNEL_REGS_H

#include "dsv4_abi.h"

#define DSV4_DECODE_WG_LEAD_DIMS 256 /* V dims whose P V the lead computes; the follower the rest */
#define DSV4_DECODE_WG_LEAD_REGS 208
#define DSV4_DECODE_WG_FOLLOW_REGS 160
#define DSV4_DECODE_WG_PRODUCER_REGS 72 /* a producer thread, both forms */

/* Registers a producer thread of `form` takes. */
static inline int dsv4_decode_wg_producer_regs(int form)
{
  (void)form;
  return DSV4_DECODE_WG_PRODUCER_REGS;
}

#endif
