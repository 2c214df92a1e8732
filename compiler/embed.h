/* embed.h -- dsv4c --emit c: a bundle as C source.
 *
 * The bundle dsv4c writes to <stem>.dsv4b, the same bytes, as a C array in
 * <prefix>_kernels.c, and a header <prefix>_kernels.h with an opener
 * (dsv4rt_bundle_open_memory, so the runtime checks the embedded bytes as
 * it checks a file) and, per kernel, a name constant and a typed launcher.
 * <prefix> is the spec's stem made a C identifier.  Text only: the caller
 * writes the files.  Same items, same bytes, same text (no paths, times or
 * addresses).
 */
#ifndef DSV4_EMBED_H
#define DSV4_EMBED_H

#include <stddef.h>

#include "bundle.h"
#include "diag.h"

#define DSV4_EMBED_PREFIX_MAX 200

typedef struct {
  char prefix[DSV4_EMBED_PREFIX_MAX]; /* "decode" for specs/decode.lua */
  char c_name[DSV4_EMBED_PREFIX_MAX + 16], h_name[DSV4_EMBED_PREFIX_MAX + 16]; /* <prefix>_kernels.c / .h */
  char *c_text, *h_text; /* malloc'd */
  size_t c_len, h_len;
} dsv4_embed;

/* The C identifier for a spec path's stem ("specs/my-spec.lua" -> "my_spec":
 * each byte outside [A-Za-z0-9_] becomes '_'); 0 on success, else an error
 * in d (a stem that does not begin with a letter, or one in the runtime's
 * dsv4_ / dsv4rt namespace). */
int dsv4_embed_prefix(const char *spec, char *out, size_t n, dsv4_diags *d);

/* Build the bundle of items and choice records (dsv4_bundle_build_tuned:
 * none, or a tuned build's) and the two texts into *e;
 * 0 on success, else errors in d (a generated name taken twice, naming the
 * kernel's file:line) and *e empty.  spec is the spec's path (only its file
 * name appears in the text).  Free with dsv4_embed_free. */
int dsv4_embed_build(const char *spec, const dsv4_bundle_item *items, int n, const dsv4_bundle_choice *choices,
                     int nchoices, dsv4_embed *e, dsv4_diags *d);
void dsv4_embed_free(dsv4_embed *e);

#endif
