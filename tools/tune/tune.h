/* tune.h -- what the files of dsv4c-tune share (tools/tune/; the lockfile
 * itself is common/lock.h).
 *
 *   main.c      the command line, the work list, shards, resuming,
 *               handing out work under a time limit, progress, merge
 *   workers.c   the processes: the probe and the workers (one a device,
 *               each variant run in a child), their pipes (workers.h)
 *   manifest.c  the sweep manifest dsv4c writes beside a sweep's bundle
 *   shapes.c    shape lists (the built-in V4 list, --quick, a file)
 *   measure.c   one shape's inputs and reference (in the parent, shared
 *               with the workers through fork), the gate and the timing
 *   report.c    the Markdown table and SVG plots beside the lockfile
 */
#ifndef DSV4_TUNE_H
#define DSV4_TUNE_H

#include <stddef.h>
#include <stdint.h>

#include "bucket.h"
#include "dsv4rt.h"
#include "lock.h"

#define TUNE_MAX_SWEEPS 16
#define TUNE_MAX_FIELDS 8

/* ---- the sweep manifest (manifest.c) ---- */

typedef struct {
  char name[DSV4_LOCK_NAME];
  int expanded;
  char values[TUNE_MAX_FIELDS][24]; /* each field's value, as the spec gave it */
  char reason[512];                 /* rejected: why */
} tune_variant;

typedef struct {
  char kernel[DSV4_LOCK_NAME];
  int op;
  int nfields;
  char field[TUNE_MAX_FIELDS][32];
  int nvariants;
  tune_variant *v; /* sorted by name */
} tune_sweep;

typedef struct {
  char spec[256];
  char spec_hash[65];
  char toolchain[3][DSV4_LOCK_TEXT]; /* ptx, amdgcn, spirv */
  int nsweeps;
  tune_sweep s[TUNE_MAX_SWEEPS];
} tune_manifest;

int tune_manifest_read(const char *path, tune_manifest *m, char *err, size_t errlen);
void tune_manifest_free(tune_manifest *m);
/* The sweep and variant of name (NULL when none). */
const tune_variant *tune_manifest_variant(const tune_manifest *m, const char *name, const tune_sweep **sweep);

/* ---- shapes (shapes.c) ---- */

typedef struct {
  dsv4_shape shape; /* the dims measured */
  char label[64];   /* "V4-Pro C4", ... */
  int xdrawn;       /* decode: the timing's extra lists have lengths drawn in [0, extra] a token (else full) */
} tune_shape;

/* The shape as the lockfile and the log name it: its dims, and
 * ",xlens=drawn" where the timing's extra lengths are drawn. */
void tune_shape_text(const tune_shape *s, char *out, size_t n);

/* The shapes of a list: "v4" (V4-Pro and V4-Flash decode at T 8..512, the
 * C128 case; the indexer logits at B 64..256, next_n 1 and 2, contexts to
 * 64K), "quick" (small shapes for a CPU device), or a file of lines
 * "<op> <dims> [xlens=drawn|full] [label]"
 * ("sparse_decode T=8,H=128,topk=128,extra=1024,xbs=64 V4-Pro C4").
 * malloc'd array in *out; 0, or 1 with err. */
int tune_shapes(const char *list, tune_shape **out, int *n, char *err, size_t errlen);

/* ---- measuring (measure.c) ---- */

typedef struct {
  int reps, batch, warmup; /* timing: reps events of batch launches, after warmup launches */
  size_t rotate_bytes;     /* the inputs rotated through per timing (the caches, mostly): past the L2 */
  uint64_t seed;           /* below 2^53 (the lockfile holds it as a JSON number) */
  int fault;               /* tests only (DSV4C_TUNE_FAULT): 1 makes the outputs wrong, 2 the second run differ */
} tune_opts;

typedef struct tune_inputs tune_inputs;
/* The gate's inputs and reference rows and the timing's inputs for shape s
 * and kernels of layout L (v_dim: the decode's; heads: the logits')
 * (host memory; made once in the parent, read by the workers it forks).
 * NULL with err when the shape cannot be made. */
tune_inputs *tune_inputs_make(const tune_shape *s, const dsv4_layout *L, int v_dim, int heads, const tune_opts *o,
                              char *err, size_t errlen);
void tune_inputs_free(tune_inputs *in);

/* A worker's device-side copy of the inputs. */
typedef struct tune_device tune_device;
tune_device *tune_device_upload(dsv4rt_context *ctx, const tune_inputs *in, char *err, size_t errlen);
void tune_device_free(tune_device *d);

typedef struct {
  int gate; /* DSV4_GATE_* */
  double median_us, min_us, max_us;
  int samples;
  int backend_failed; /* the context may be unusable: the worker starts afresh */
  char reason[DSV4_LOCK_REASON];
} tune_result;

/* Gate, then time, kernel on the inputs (in a worker). */
void tune_measure(dsv4rt_context *ctx, dsv4rt_bundle *b, const char *kernel, const tune_inputs *in,
                  tune_device *dev, const tune_opts *o, tune_result *r);

/* ---- the report (report.c) ---- */

/* Write <lock stem>.md (a table per kernel and shape) and one SVG a
 * kernel and shape (time against each swept field, the winner marked)
 * beside the lockfile; m may be NULL (then no field values).  0 or -1. */
int tune_report(const char *lock_path, dsv4_lock *l, const tune_manifest *m, char *err, size_t errlen);

#endif
