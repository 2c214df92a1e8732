/* layout_check.h -- the one validity rule for a dsv4_layout that comes from
 * outside: a bundle entry's (rt.c) or a caller's of the host reference
 * (dsv4_ref.c).  Internal to libdsv4rt and libdsv4ref, each of which
 * compiles layout_check.c in. */
#ifndef DSV4_LAYOUT_CHECK_H
#define DSV4_LAYOUT_CHECK_H

#include <stddef.h>

#include "dsv4_layout.h"

/* The ranges a layout's fields may hold: those the spec checker
 * (compiler/spec/) takes. */
#define DSV4_LAYOUT_MAX_DIM 4096
#define DSV4_LAYOUT_MAX_ROW_BYTES (1 << 20)
#define DSV4_LAYOUT_MAX_SCALE_ROW_BYTES (1 << 16)
#define DSV4_LAYOUT_MAX_ALIGN 256
#define DSV4_LAYOUT_MAX_BLOCK_TOKENS (1 << 20)
#define DSV4_LAYOUT_MAX_BLOCK_STRIDE (1 << 30)

/* 0 when l can be addressed safely: every field in range, each segment's
 * dims inside [0, dim) and its bytes inside the row, no two segments
 * sharing output dims or row bytes, scales of a known type inside their
 * scale row (and, inline, clear of every segment's values), the declared
 * block (if any) large enough and aligned.  Segments need not cover every
 * dim.  Otherwise 1, with a message naming the field (segments numbered
 * from 1, as a spec lists them) in why[cap] when why is not NULL.  Never
 * overflows, whatever the fields hold. */
int dsv4_layout_valid(const dsv4_layout *l, char *why, size_t cap);

#endif
