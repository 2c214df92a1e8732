/* plan.c -- name tables for ops and targets, defined once by X-macros. */
#include "plan.h"

#include <stdio.h>
#include <string.h>

#include "dsv4_abi.h"

static const char *const op_names[] = {
    "none",
#define X(e, s, d) s,
    DSV4_OPS(X)
#undef X
};

const char *dsv4_op_name(dsv4_op op)
{
  return (op > 0 && op < DSV4_OP_COUNT) ? op_names[op] : "none";
}

dsv4_op dsv4_op_from_name(const char *s)
{
  for (int i = 1; i < DSV4_OP_COUNT; i++)
    if (strcmp(op_names[i], s) == 0)
      return (dsv4_op)i;
  return DSV4_OP_NONE;
}

static const struct {
  const char *name, *ext, *arch;
} targets[] = {
#define X(e, s, x, a) {s, x, a},
    DSV4_TARGETS(X)
#undef X
};

const char *dsv4_target_name(dsv4_target_kind t) { return targets[t].name; }
const char *dsv4_target_ext(dsv4_target_kind t) { return targets[t].ext; }
const char *dsv4_target_default_arch(dsv4_target_kind t) { return targets[t].arch; }

int dsv4_target_from_name(const char *s)
{
  for (int i = 0; i < DSV4_TARGET_COUNT; i++)
    if (strcmp(targets[i].name, s) == 0)
      return i;
  return -1;
}

/* Archs each target emits and its work-group limits. */
static const struct {
  const char *archs;
  int max_threads, warp;
} limits[DSV4_TARGET_COUNT] = {
    [DSV4_TARGET_PTX] = {"sm_80 sm_86 sm_89 sm_90 sm_90a", 1024, 32},
    [DSV4_TARGET_AMDGCN] = {"gfx90a gfx942", 1024, 64},
    [DSV4_TARGET_SPIRV] = {"opencl1.2", 1024, 1},
};

int dsv4_target_max_threads(dsv4_target_kind t) { return limits[t].max_threads; }

/* Every PTX arch dsv4c emits (sm_80 and later) has mma.sync m16n8k16 with
 * bf16 operands; the AMDGCN and SPIR-V targets have no matrix hooks yet. */
int dsv4_target_has_bf16_mma(dsv4_target_kind t, const char *arch)
{
  (void)arch;
  return t == DSV4_TARGET_PTX;
}

/* mma.sync m16n8k32 with e4m3 operands: PTX sm_89 and later. */
int dsv4_target_has_e4m3_mma(dsv4_target_kind t, const char *arch)
{
  int v = 0;
  return t == DSV4_TARGET_PTX && sscanf(arch, "sm_%d", &v) == 1 && v >= 89;
}

/* wgmma (the warpgroup matrix units): PTX sm_90a only. */
int dsv4_target_has_wgmma(dsv4_target_kind t, const char *arch)
{
  return t == DSV4_TARGET_PTX && strcmp(arch, "sm_90a") == 0;
}

/* Per-CTA shared memory an opt-in launch may take (CUDA's "max shared memory
 * per block optin"): 227 KiB on sm_90, 163 KiB on sm_80, 99 KiB on sm_86 and
 * sm_89.  The runtimes pass dynamic shared memory only to CUDA. */
int dsv4_target_max_shared(dsv4_target_kind t, const char *arch)
{
  if (t != DSV4_TARGET_PTX)
    return 0;
  int v = 0;
  sscanf(arch, "sm_%d", &v);
  return v >= 90 ? 232448 : v == 80 ? 166912 : 101376;
}

int dsv4_kernel_shared_bytes(const dsv4_kernel *k)
{
  if (k->op == DSV4_OP_SPARSE_DECODE && k->tile.matrix)
    return dsv4_decode_shared_bytes(&k->layout, k->tile.tokens_per_cta, k->tile.matrix);
  return 0;
}
int dsv4_target_warp(dsv4_target_kind t, const char *arch)
{
  (void)arch;
  return limits[t].warp;
}
const char *dsv4_target_arch_list(dsv4_target_kind t) { return limits[t].archs; }

int dsv4_target_arch_ok(dsv4_target_kind t, const char *arch)
{
  size_t n = strlen(arch);
  for (const char *p = limits[t].archs; *p;) {
    const char *e = strchr(p, ' ');
    size_t m = e ? (size_t)(e - p) : strlen(p);
    if (m == n && strncmp(p, arch, n) == 0)
      return 1;
    p += m;
    while (*p == ' ')
      p++;
  }
  return 0;
}

/* The argument list of an op, from the one definition in dsv4_abi.h. */
int dsv4_op_signature(dsv4_op op, unsigned char *kinds, const char **names)
{
  int n = dsv4_op_args(op, kinds, names);
  return n < 0 ? 0 : n;
}
