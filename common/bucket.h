/* bucket.h -- what every reader of tuning shares about a call: op names,
 * GPU models, and the shape of an op call and its bucket (the key a
 * lockfile entry, a bundle's choice record and the runtime's choice
 * share). */
#ifndef DSV4_BUCKET_H
#define DSV4_BUCKET_H

#include <stddef.h>
#include <stdint.h>

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

#endif
