/* lock.h -- the tuning lockfile (docs/tuning.md): its model, its canonical
 * JSON text, reading, writing and merging, and what every reader of it
 * shares: SHA-256, a small JSON reader, shape buckets and GPU models.
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
#ifndef DSV4_TUNE_LOCK_H
#define DSV4_TUNE_LOCK_H

#include <stddef.h>
#include <stdint.h>

#define DSV4_LOCK_FORMAT "dsv4c-tune-lock 1"
#define DSV4_SWEEP_FORMAT "dsv4c-sweep 1"

/* ---- SHA-256 ---------------------------------------------------------------- */

typedef struct {
  uint32_t h[8];
  uint64_t bytes;
  unsigned char buf[64];
  size_t nbuf;
} dsv4_sha256_ctx;
void dsv4_sha256_init(dsv4_sha256_ctx *c);
void dsv4_sha256_update(dsv4_sha256_ctx *c, const void *p, size_t n);
void dsv4_sha256_final(dsv4_sha256_ctx *c, unsigned char out[32]);
/* The hash of n bytes as 64 lower-case hex digits (and a NUL). */
void dsv4_sha256_hex(const void *p, size_t n, char hex[65]);
void dsv4_hex(const unsigned char *p, size_t n, char *out); /* 2n digits and a NUL */

/* ---- a small JSON reader ------------------------------------------------------ */

enum { DSV4_JSON_NULL, DSV4_JSON_BOOL, DSV4_JSON_NUM, DSV4_JSON_STR, DSV4_JSON_ARR, DSV4_JSON_OBJ };
typedef struct dsv4_json {
  int type;
  int line;          /* the line the value starts on (1 the first) */
  double num;        /* NUM; BOOL: 0 or 1 */
  char *str;         /* STR (NUL-terminated, escapes decoded; \u00XX only) */
  char **keys;       /* OBJ: n keys */
  struct dsv4_json *items; /* ARR, OBJ: n values */
  int n;
} dsv4_json;
/* Parse text (at most 64 levels deep, at most DSV4_JSON_MAX_VALUES values);
 * NULL with the reason and the line in err on a syntax error, past those
 * limits or when memory runs out. */
#define DSV4_JSON_MAX_VALUES (1 << 21)
dsv4_json *dsv4_json_parse(const char *text, size_t len, char *err, size_t errlen);
void dsv4_json_free(dsv4_json *j);
/* Member key of an object (NULL if absent or j is not an object). */
const dsv4_json *dsv4_json_get(const dsv4_json *j, const char *key);
/* Member key as a string / number, or def when absent or of another type. */
const char *dsv4_json_str(const dsv4_json *j, const char *key, const char *def);
double dsv4_json_num(const dsv4_json *j, const char *key, double def);
/* s as a JSON string literal (quotes, escapes) appended to a growing buffer. */
typedef struct {
  char *s;
  size_t n, cap;
  int failed; /* out of memory: the text is incomplete */
} dsv4_text;
void dsv4_text_printf(dsv4_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void dsv4_text_json_str(dsv4_text *t, const char *s);

/* ---- GPU models and shape buckets ---------------------------------------------- */

/* The GPU model of a device description (dsv4rt_device_name): the text
 * before " (" (the description adds the arch and the driver, which are not
 * the model). */
void dsv4_tune_device_model(const char *device, char *out, size_t n);

/* The shape of an op call that tuning sees, and its bucket: the key a
 * lockfile entry and the runtime's choice share.
 *   sparse_decode      T (tokens), H (heads), topk, extra (extra_topk), xbs (extra block size)
 *   paged_mqa_logits   B (batch), next_n, L (row length: the context)
 *   the other ops      n (the call's main count: tokens, requests or rows)
 * A bucket rounds T, H, topk, extra, B, L and n up to a power of two (0
 * stays 0) and keeps xbs and next_n exact: T 100 and T 128 share a bucket. */
#define DSV4_SHAPE_DIMS 5
typedef struct {
  int op;                          /* dsv4_op */
  int n;                           /* dims in use */
  int64_t dim[DSV4_SHAPE_DIMS];
} dsv4_shape;
/* The dims' names for op ("T", "H", ...); the number of dims (0: an op not known). */
int dsv4_shape_names(int op, const char *const **names);
/* The bucket of s (same op, dims rounded). */
dsv4_shape dsv4_shape_bucket(const dsv4_shape *s);
/* "T=8,H=128,topk=128,extra=1024,xbs=64" */
void dsv4_shape_format(const dsv4_shape *s, char *out, size_t n);
/* Parse that form for op (every dim named once, non-negative integers); 0 on success. */
int dsv4_shape_parse(int op, const char *text, dsv4_shape *out);
/* Whether s is a bucket the runtime can match a call's shape to: s->n is
 * its op's count of dims, each dim non-negative and as dsv4_shape_bucket
 * leaves it (T=3 or L=384 are no bucket: a call's T 3 falls in T=4).  The
 * one check of the writer (dsv4c --lock's choice records), the bundle
 * reader (a choice record) and the lockfile reader.  0, or 1 with the
 * reason (naming the dim) in why. */
int dsv4_shape_check_bucket(const dsv4_shape *s, char *why, size_t n);
/* dsv4_op by name ("sparse_decode"), 0 when unknown; and back ("?"). */
int dsv4_tune_op_from_name(const char *s);
const char *dsv4_tune_op_name(int op);

/* ---- the lockfile ---------------------------------------------------------------- */

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

/* ---- small shared file helpers ------------------------------------------------ */

/* Read a whole file (NUL-terminated, malloc'd); -1 on failure. */
int dsv4_tune_read_file(const char *path, char **text, size_t *len);
/* The same for a regular file of at most max bytes: -1 with errno EFBIG
 * past it (found before reading), EINVAL for a FIFO, device or folder. */
int dsv4_tune_read_file_max(const char *path, size_t max, char **text, size_t *len);
/* Write a whole file atomically; 0 or -1. */
int dsv4_tune_write_file(const char *path, const void *p, size_t n);

#endif
