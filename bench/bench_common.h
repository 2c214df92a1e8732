/* bench_common.h -- what every bench program shares: device buffers, event
 * timing (median of batches, inputs rotated over sets), and the copy
 * ceiling measured in the same run. */
#ifndef DSV4_BENCH_COMMON_H
#define DSV4_BENCH_COMMON_H

#include <stddef.h>

#include "dsv4rt.h"

#define BENCH_SETS 4
#define BENCH_BATCH 20
#define BENCH_REPS 7

extern dsv4rt_context *bench_ctx;
extern const char *bench_name; /* program name for messages */

/* Print what failed with the runtime's message and exit (programs only). */
void bench_die(const char *what);
/* A device buffer of n bytes, filled from host when given. */
dsv4rt_buffer *bench_dev(const void *host, size_t n);
/* Median over BENCH_REPS of (time of BENCH_BATCH calls fn(i, arg), i
 * rotating over BENCH_SETS input sets) / BENCH_BATCH, in ms; warmed up. */
double bench_time_ms(void (*fn)(int i, void *arg), void *arg);
/* The host's time to issue one call in bench_time_ms's last measurement
 * (median, ms): where it reaches the device time, the host's launch path,
 * not the kernels, sets the figure. */
extern double bench_issue_ms;
/* Bandwidth (bytes read + written per second, GB/s) of n-byte
 * device-to-device copies; *ms gets the time of one. */
double bench_copy_gbs(size_t n, double *ms);
/* Open the context (argument cuda / opencl / absent = auto); exit 77 when
 * there is no device. */
void bench_open(int argc, char **argv, int backend_arg);
/* Destroy bundle b (may be NULL) and the context, at a program's end: every
 * runtime object freed, so LeakSanitizer sees the close paths too. */
void bench_close(dsv4rt_bundle *b);

#endif
