/* caps.c -- one table of archs a target, with what each offers.
 *
 * PTX: every arch dsv4c emits (sm_80 on) has bf16 mma.sync; e4m3 mma.sync
 * comes with sm_89; wgmma only with sm_90a.  Shared memory is CUDA's "max
 * shared memory per block optin": 163 KiB on sm_80, 99 KiB on sm_86 and
 * sm_89, 227 KiB on sm_90.  AMDGCN and SPIR-V have no matrix hooks yet,
 * and their runtimes pass no dynamic shared memory. */
#include "caps.h"

#include <stdio.h>
#include <string.h>

static const dsv4_arch_caps ptx[] = {
    {"sm_80", 1024, 32, 166912, DSV4_MMA_BF16, 0},
    {"sm_86", 1024, 32, 101376, DSV4_MMA_BF16, 0},
    {"sm_89", 1024, 32, 101376, DSV4_MMA_BF16 | DSV4_MMA_E4M3, 0},
    {"sm_90", 1024, 32, 232448, DSV4_MMA_BF16 | DSV4_MMA_E4M3, 0},
    {"sm_90a", 1024, 32, 232448, DSV4_MMA_BF16 | DSV4_MMA_E4M3 | DSV4_WGMMA, 0},
    {NULL, 0, 0, 0, 0, 0},
};
static const dsv4_arch_caps amdgcn[] = {
    {"gfx90a", 1024, 64, 0, 0, 0},
    {"gfx942", 1024, 64, 0, 0, 0},
    {NULL, 0, 0, 0, 0, 0},
};
static const dsv4_arch_caps spirv[] = {
    {"opencl1.2", 1024, 1, 0, 0, 1},
    {NULL, 0, 0, 0, 0, 0},
};

/* Each target's table, its archs as one line for messages (the same
 * names in the same order: test_caps checks it), and how its code is built
 * (the LLVM that builds it, the translator after it, the compile's weight
 * for dsv4c -j's ordering: ptxas doubles a PTX compile). */
static const struct {
  const dsv4_arch_caps *rows;
  const char *list;
  dsv4_target_build build;
} tables[DSV4_TARGET_COUNT] = {
    [DSV4_TARGET_PTX] = {ptx, "sm_80 sm_86 sm_89 sm_90 sm_90a", {DSV4_LLVM_MAIN, NULL, 2}},
    [DSV4_TARGET_AMDGCN] = {amdgcn, "gfx90a gfx942", {DSV4_LLVM_MAIN, NULL, 1}},
    [DSV4_TARGET_SPIRV] = {spirv, "opencl1.2", {DSV4_LLVM_SPIRV, "SPIRV-LLVM-Translator", 1}},
};

const dsv4_target_build *dsv4_target_build_of(dsv4_target_kind t)
{
  static const dsv4_target_build none;
  return (unsigned)t < DSV4_TARGET_COUNT ? &tables[t].build : &none;
}

const dsv4_arch_caps *dsv4_caps(dsv4_target_kind t, const char *arch)
{
  if ((unsigned)t >= DSV4_TARGET_COUNT || !arch)
    return NULL;
  for (const dsv4_arch_caps *r = tables[t].rows; r->arch; r++)
    if (!strcmp(r->arch, arch))
      return r;
  return NULL;
}

const char *dsv4_caps_arch_list(dsv4_target_kind t)
{
  return (unsigned)t < DSV4_TARGET_COUNT ? tables[t].list : "";
}

const dsv4_arch_caps *dsv4_caps_row(dsv4_target_kind t, int i)
{
  if ((unsigned)t >= DSV4_TARGET_COUNT || i < 0)
    return NULL;
  for (const dsv4_arch_caps *r = tables[t].rows; r->arch; r++, i--)
    if (i == 0)
      return r;
  return NULL;
}

/* ---- the questions caps.h lists for the compiler, answered from the table ---- */

int dsv4_target_max_threads(dsv4_target_kind t)
{
  const dsv4_arch_caps *r = dsv4_caps_row(t, 0);
  return r ? r->max_threads : 0;
}

int dsv4_target_warp(dsv4_target_kind t, const char *arch)
{
  const dsv4_arch_caps *r = dsv4_caps(t, arch);
  return r ? r->warp : 1;
}

int dsv4_kernel_warp(const dsv4_kernel *k, dsv4_target_kind t)
{
  const dsv4_target_opts *o = &k->target[t];
  return o->subgroups && o->subgroup_size > 0 ? o->subgroup_size : dsv4_target_warp(t, o->arch);
}

int dsv4_subgroup_size_ok(int n)
{
  for (int t = 0; t < DSV4_TARGET_COUNT; t++)
    for (const dsv4_arch_caps *r = tables[t].rows; r->arch; r++)
      if (r->warp > 1 && r->warp == n)
        return 1;
  return 0;
}

/* The warps above 1 of every table, smallest first, each once. */
const char *dsv4_subgroup_size_list(char *buf, size_t n)
{
  size_t len = 0;
  int prev = 1;
  buf[0] = 0;
  for (;;) {
    int next = 0;
    for (int t = 0; t < DSV4_TARGET_COUNT; t++)
      for (const dsv4_arch_caps *r = tables[t].rows; r->arch; r++)
        if (r->warp > prev && (!next || r->warp < next))
          next = r->warp;
    if (!next || len >= n)
      return buf;
    len += (size_t)snprintf(buf + len, n - len, "%s%d", len ? " or " : "", next);
    prev = next;
  }
}

int dsv4_target_has_bf16_mma(dsv4_target_kind t, const char *arch)
{
  const dsv4_arch_caps *r = dsv4_caps(t, arch);
  return r && (r->matrix & DSV4_MMA_BF16);
}

int dsv4_target_has_e4m3_mma(dsv4_target_kind t, const char *arch)
{
  const dsv4_arch_caps *r = dsv4_caps(t, arch);
  return r && (r->matrix & DSV4_MMA_E4M3);
}

int dsv4_target_has_wgmma(dsv4_target_kind t, const char *arch)
{
  const dsv4_arch_caps *r = dsv4_caps(t, arch);
  return r && (r->matrix & DSV4_WGMMA);
}

int dsv4_target_max_shared(dsv4_target_kind t, const char *arch)
{
  const dsv4_arch_caps *r = dsv4_caps(t, arch);
  return r ? r->max_shared : 0;
}

int dsv4_target_arch_ok(dsv4_target_kind t, const char *arch) { return dsv4_caps(t, arch) != NULL; }
const char *dsv4_target_arch_list(dsv4_target_kind t) { return dsv4_caps_arch_list(t); }

int dsv4_target_has_subgroup_switch(dsv4_target_kind t)
{
  const dsv4_arch_caps *r = dsv4_caps_row(t, 0);
  return r && r->subgroup_switch;
}
