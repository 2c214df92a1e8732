/* harness.h -- what the execution tests share: pass/fail counting with a
 * message per failure, the device context, fresh random inputs and device
 * buffers.  Each test program is one file including this. */
#ifndef DSV4_HARNESS_H
#define DSV4_HARNESS_H

#include <stdio.h>
#include <stdlib.h>

#include "dsv4_check.h"
#include "dsv4rt.h"
#include "../check.h"

extern int passed, failed;
extern dsv4rt_context *ctx;
extern dsv4_rng rng;


/* A device buffer of n bytes (at least 16), filled from host when given;
 * exits the test on failure. */
dsv4rt_buffer *dev(const void *host, size_t n);
/* Uniform in [0, 1). */
float rnd01(void);
/* Open the context for backend name ("cuda", "hip" or anything else: OpenCL) and
 * seed the generator (DSV4_SEED repeats a run).  Returns 77 when there is
 * no such device (the caller exits with it: CTest's "skipped"), 1 on
 * another failure, 0 when ready. */
int harness_open(const char *backend);
/* Open the bundle at path on ctx: 0, or 1 after printing FAIL. */
int harness_bundle(const char *path, dsv4rt_bundle **out);
/* A kernel of a bundle: its name, the layout and op parameters it was built with. */
typedef struct {
  const char *name;
  dsv4_layout L;
  dsv4rt_kernel_info info;
} kern;

/* 1 when entry e of b is the first entry of a kernel of op (one test per
 * kernel, not per target) and the device runs one of its entries, filling
 * *k; else 0 (printing SKIPPED for a kernel of op the device cannot run). */
int harness_kernel(const dsv4rt_bundle *b, int e, const char *op, kern *k);

/* On the fake HIP runtime (DSV4RT_HIP_LIBRARY=libfake_libamdhip64.so,
 * tests/unit/fake_libamdhip64.h), which runs no kernel: the launches it
 * recorded so far, else -1; and the disagreements it found (kernarg blocks
 * against the code object's metadata, pointers or copies outside every
 * allocation), the last one's description into why (else 0). */
int harness_launches(void);
int harness_fake_violations(char *why, size_t n);

/* Print "N passed, M failed"; the exit status. */
int harness_finish(void);

#endif
