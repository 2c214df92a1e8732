/* golden_load.h -- loader for the golden fixture folders (/work/shared/golden, see its README.md).
 *
 * A folder holds case.lua, which returns { op, source, params, inputs, expect }, and one raw
 * little-endian file per tensor.  golden_open runs case.lua in a fresh Lua 5.4 state with only the
 * base library, copies everything into C structs, closes the state and reads the tensor files.
 * Library code: never prints, never exits.
 */
#ifndef GOLDEN_LOAD_H
#define GOLDEN_LOAD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GOLDEN_MAX_DIMS 8

typedef struct golden_tensor {
  char name[64];
  char dtype[8];                  /* u8 i32 i64 f32 bf16 e4m3 */
  int ndim;
  int64_t shape[GOLDEN_MAX_DIMS]; /* row-major */
  int64_t nelem;
  size_t nbytes;
  void *data;                     /* nbytes of host-order data (files are little-endian) */
  int has_tol;                    /* 1 if the fixture gives tol = { ... } */
  double tol_abs, tol_rel, tol_calc_diff; /* -1 where tol lacks the field (or has_tol == 0) */
} golden_tensor;

typedef struct golden_case golden_case;

/* Whether root, the fixtures' folder, exists: a clone without ../shared has
 * none.  golden_root() returns root where it does, else NULL after saying
 * on stdout that the golden checks are left out (CTest's golden.fixtures
 * reports them skipped); callers then skip every golden check. */
int golden_present(const char *root);
const char *golden_root(const char *root);

/* Load the case in folder dir; NULL with a message in err (if err != NULL) on any failure. */
golden_case *golden_open(const char *dir, char *err, size_t errlen);

/* Free a case (NULL is allowed). */
void golden_close(golden_case *c);

/* Tensor by name, searching inputs then expect; NULL if absent. */
const golden_tensor *golden_tensor_get(const golden_case *c, const char *name);

/* Numeric param (booleans read as 0/1); 0 on success, nonzero if absent or not a number. */
int golden_param_num(const golden_case *c, const char *name, double *out);

/* String param copied into buf; 0 on success, nonzero if absent, not a string or longer than n-1. */
int golden_param_str(const golden_case *c, const char *name, char *buf, size_t n);

/* The case's op string ("" never: golden_open requires it). */
const char *golden_op(const golden_case *c);

#ifdef __cplusplus
}
#endif

#endif
