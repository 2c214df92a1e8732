/* lock.h -- the tuning lockfile (docs/tuning.md): its model, its canonical
 * JSON text, reading, writing and merging.  What every reader of it
 * shares besides sits beside it in common/: SHA-256 (sha256.h), the JSON
 * reader (json.h), the text buffer (text.h), shapes, buckets and GPU
 * models (bucket.h) and file helpers (files.h).
 *
 * One C file (lock.c) serves three programs, so that they cannot disagree
 * on the format: dsv4c (--lock, and the sweep manifest it writes beside a
 * sweep's bundle), libdsv4rt (dsv4rt_bundle_load_tuning, runtime/src/choice.c;
 * compiled into the library with hidden visibility) and dsv4c-tune.  Like
 * the runtime it never prints and never exits; errors come back as text.
 *
 * The file is JSON, written in one canonical form: entries sorted by their
 * key, each entry's variants sorted by name, one variant a line, times in
 * microseconds with 4 decimals (rounded when measured, so a read and a
 * write give the same bytes), and the winner recomputed on every write.
 * The same measurements therefore always give the same bytes, whatever
 * order they arrived in (shards, devices, resumed runs).
 */
#ifndef DSV4_LOCK_H
#define DSV4_LOCK_H

#include <stddef.h>
#include <stdint.h>

#include "text.h" /* dsv4_lock_variant_text */

#define DSV4_LOCK_FORMAT "dsv4c-tune-lock 1"
#define DSV4_SWEEP_FORMAT "dsv4c-sweep 1"

/* What a variant's measurement came to (its "gate"). */
enum {
  DSV4_GATE_PASS = 0,         /* right and deterministic: timed */
  DSV4_GATE_WRONG,            /* differs from the reference */
  DSV4_GATE_NONDETERMINISTIC, /* two runs on the same inputs differ */
  DSV4_GATE_CRASHED,          /* its process died (signal, exit) */
  DSV4_GATE_TIMEOUT,          /* ran past the time limit */
  DSV4_GATE_ERROR,            /* refused by the runtime or the driver */
  DSV4_GATE_SKIPPED,          /* does not run on this device */
  DSV4_GATE_COUNT
};
const char *dsv4_gate_name(int gate);
int dsv4_gate_from_name(const char *s); /* -1 when unknown */

#define DSV4_LOCK_NAME 48
#define DSV4_LOCK_TEXT 160
#define DSV4_LOCK_REASON 400

typedef struct {
  char name[DSV4_LOCK_NAME];
  char code[65];               /* SHA-256 of the compiled code the runtime loads for this target */
  int gate;                    /* DSV4_GATE_* */
  double median_us, min_us, max_us; /* PASS only (rounded to 4 decimals by dsv4_lock_round) */
  int samples;
  char reason[DSV4_LOCK_REASON]; /* why it is not PASS ("" for PASS) */
} dsv4_lock_variant;

/* An entry's key: what must match for its measurements to apply. */
typedef struct {
  char spec_hash[65];                /* dsv4c's hash of the spec and what it includes */
  char kernel[DSV4_LOCK_NAME];       /* the sweep (its kernel{}'s name) */
  char op[24];
  char target[8];                    /* ptx, amdgcn, spirv */
  char arch[16];
  char device[DSV4_LOCK_TEXT];       /* the GPU model (dsv4_tune_device_model) */
  char toolchain[DSV4_LOCK_TEXT];    /* the dsv4c and LLVM that compiled it (dsv4c --version's line) */
  char bucket[DSV4_LOCK_TEXT];       /* dsv4_shape_format of the shape's bucket */
} dsv4_lock_key;

typedef struct {
  dsv4_lock_key key;
  char shape[DSV4_LOCK_TEXT];        /* the shape measured (in the bucket) */
  long long seed;                    /* the inputs' seed (shards that merge share it; else the smaller) */
  char winner[DSV4_LOCK_NAME];       /* derived: dsv4_lock_decide */
  int nvariants, cap;
  dsv4_lock_variant *v;
} dsv4_lock_entry;

typedef struct {
  int n, cap;
  dsv4_lock_entry *e;
  /* dsv4_lock_find's hash index of the keys (made and kept by it): slot[]
   * holds entry number + 1 (0 empty), nslot a power of two; entries
   * [0, indexed) are in it.  Code that reorders or removes entries of e
   * calls dsv4_lock_unindex. */
  int *slot, nslot, indexed;
} dsv4_lock;

/* The largest lockfile the readers take (dsv4_lock_read, dsv4_lock_parse,
 * dsv4rt_bundle_load_tuning): 32 MiB, about 100,000 variant lines. */
#define DSV4_LOCK_MAX_BYTES ((size_t)32 << 20)

/* The tie-break, as written into the file and the docs. */
#define DSV4_LOCK_TIE_BREAK "lowest median_us; equal medians: lowest min_us; then the name in byte order"

/* A time rounded as the file holds it (4 decimals of a microsecond). */
double dsv4_lock_round(double us);
int dsv4_lock_key_cmp(const dsv4_lock_key *a, const dsv4_lock_key *b);
/* The entry with key k (made, empty, when create and absent; NULL when
 * absent or out of memory).  Constant time (a hash index of l's keys). */
dsv4_lock_entry *dsv4_lock_find(dsv4_lock *l, const dsv4_lock_key *k, int create);
/* Drop l's index (after reordering or removing entries; the next find remakes it). */
void dsv4_lock_unindex(dsv4_lock *l);
/* The variant of e named name, or NULL. */
dsv4_lock_variant *dsv4_lock_variant_find(dsv4_lock_entry *e, const char *name);
/* Insert v into e or replace the one of its name (times rounded); 0 or -1 (memory). */
int dsv4_lock_put(dsv4_lock_entry *e, const dsv4_lock_variant *v);
/* e's winner by the tie-break among PASS variants ("" when none). */
void dsv4_lock_decide(dsv4_lock_entry *e);
/* Parse / read a lockfile; 0, or -1 with the reason in err (with the line
 * for a field of the wrong type or range).  A missing file is an error
 * here (callers that resume check for it first); so is one larger than
 * DSV4_LOCK_MAX_BYTES (refused before it is read) or one that is not a
 * regular file.  Every string is checked against its field's size, every
 * number's type and range (a passing variant's times are required), a
 * known op's bucket with dsv4_shape_check_bucket and in its canonical
 * text; the seed is a whole number below 2^53. */
int dsv4_lock_parse(const char *text, size_t len, dsv4_lock *out, char *err, size_t errlen);
int dsv4_lock_read(const char *path, dsv4_lock *out, char *err, size_t errlen);
/* The canonical text (sorted, winners decided; l is sorted in place);
 * malloc'd, NULL when memory runs out. */
char *dsv4_lock_format(dsv4_lock *l, size_t *len);
/* Write the canonical text to path atomically (a temporary file, then a
 * rename); 0 or -1 with errno. */
int dsv4_lock_write(const char *path, dsv4_lock *l);
/* Merge from into into: the union of the entries and of their variants;
 * a variant in both keeps the worse gate (a failure over a pass over a
 * skip), then the smaller canonical line, so merging is commutative and
 * associative; seeds keep the smaller.  0 or -1 (memory). */
int dsv4_lock_merge(dsv4_lock *into, const dsv4_lock *from);
void dsv4_lock_free(dsv4_lock *l);

/* One variant's canonical line (what the file holds and merges compare). */
void dsv4_lock_variant_text(const dsv4_lock_variant *v, dsv4_text *t);

#endif
