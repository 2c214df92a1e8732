/* choice.h -- tuning's choice of kernel (choice.c): the bundle's choice
 * records, a loaded lockfile's winners, and the shape of a call they are
 * keyed by.
 *
 * The runtime's files depend one way: bundle.c (opening) and ops.c (the
 * typed calls) use choice.c, and choice.c uses rt.c (the context, errors,
 * op names, finding and launching entries); rt.c uses neither. */
#ifndef DSV4RT_CHOICE_H
#define DSV4RT_CHOICE_H

#include "bucket.h"
#include "rt.h"

/* Install the bundle's choice records whose device is the context's GPU
 * model into b->choices (on open, after every check).  Calls no backend but
 * the accepts test, and that only for a record of this model. */
void rt_install_bundle_choices(dsv4rt_bundle *b);
/* The shape of an op call with these args (bucket.h's dims for op): what
 * tuning buckets and the default rule ranks by; 1 for an unknown op. */
int rt_call_shape(dsv4_op op, const void *args, dsv4_shape *s);
/* The kernel tuning chooses for an op call of shape s (the winner of its
 * bucket), or NULL when no tuning covers it. */
const char *rt_tuned_kernel(const dsv4rt_bundle *b, dsv4_op op, const dsv4_shape *s);

#endif
