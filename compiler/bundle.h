/* bundle.h -- writing the self-describing bundle (format in dsv4_abi.h). */
#ifndef DSV4_BUNDLE_H
#define DSV4_BUNDLE_H

#include "artifact.h"
#include "diag.h"
#include "plan.h"

typedef struct {
  const dsv4_kernel *kernel;
  dsv4_target_kind target;
  const dsv4_artifact *art;
} dsv4_bundle_item;

/* Serialize items into a malloc'd buffer (*out, *len); 0 on success. */
int dsv4_bundle_build(const dsv4_bundle_item *items, int n, unsigned char **out, size_t *len, dsv4_diags *d);
/* The same with choice records (a tuned bundle, dsv4c --lock): nchoices
 * records (entry: an index into items), written after the entry table;
 * dsv4_bundle_build is this with none. */
int dsv4_bundle_build_tuned(const dsv4_bundle_item *items, int n, const dsv4_bundle_choice *choices, int nchoices,
                            unsigned char **out, size_t *len, dsv4_diags *d);

#endif
