/* fake_libamdhip64.h -- what the fake HIP runtime (fake_libamdhip64.c)
 * offers the tests that load it, besides the HIP entry points libdsv4rt
 * uses: its launch records, the disagreements it found, and faults to
 * inject.  A test opens the same library file libdsv4rt opened
 * (DSV4RT_HIP_LIBRARY) with dlopen and looks these up by name, so both
 * see one copy of its state.
 *
 * Set-up, read from the environment at hipRuntimeGetVersion / hipInit:
 *   DSV4_FAKE_HIP_VERSION  hipRuntimeGetVersion's answer (default 50200000: ROCm 5.2, Debian 12's)
 *   DSV4_FAKE_HIP_DEVICES  devices present (default 1)
 *   DSV4_FAKE_HIP_ARCH     gcnArchName (default gfx942:sramecc+:xnack-)
 *   DSV4_FAKE_HIP_WARP     warpSize (default 64)
 *   DSV4_FAKE_HIP_LAYOUT   "bad": hipGetDeviceProperties fills another layout than ROCm's pre-6.0 one */
#ifndef DSV4_FAKE_LIBAMDHIP64_H
#define DSV4_FAKE_LIBAMDHIP64_H

#include <stddef.h>

#define FAKE_HIP_KERNARG_MAX 2048

typedef struct {
  char kernel[64];
  unsigned grid[3], block[3], shared;
  void *stream;
  size_t kernarg_size;
  unsigned char kernarg[FAKE_HIP_KERNARG_MAX];
} fake_hip_launch;

/* Launches recorded since the library loaded. */
typedef int (*fake_hip_launch_count_fn)(void);
/* The i-th recorded launch (the last 64 are kept; NULL when gone or past the end). */
typedef const fake_hip_launch *(*fake_hip_launch_at_fn)(int i);
/* Disagreements found so far (a kernarg block that does not match the code
 * object's metadata, a pointer argument outside every live allocation, a
 * copy outside one); the last one's description into why. */
typedef int (*fake_hip_violations_fn)(char *why, size_t n);
/* The next call of entry point fn (e.g. "hipMalloc") after `after` more
 * successful ones fails with err, once. */
typedef void (*fake_hip_fail_fn)(const char *fn, int err, int after);
/* Allocations not freed. */
typedef int (*fake_hip_live_fn)(void);

#endif
