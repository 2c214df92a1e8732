/* fuzz_hsaco.c -- libFuzzer harness for the AMDGPU code-object reader
 * (common/hsaco_meta.c: the one reader dsv4c's artifact check and the
 * runtime's HIP backend share).
 *
 * An input is read as a code object.  A refusal must say why (a message).
 * Each kernel entry that reads must hold what the reader promises (its
 * arguments inside the kernarg segment, at most DSV4_HSACO_MAX_ARGS, a
 * NUL-terminated name), and the launch check, asked with the argument
 * list the entry's own explicit arguments spell, may accept it only where
 * this file's restatement of the rules (hsaco_meta.h) agrees: arguments
 * at their natural alignment one after another, hidden ones after,
 * wave64, the threads, LDS and registers within gfx942's limits.
 * Anything else is a finding.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4_abi.h"
#include "hsaco_meta.h"

static void check(int ok)
{
  if (!ok)
    abort();
}

/* The dsv4_arg_kind list m's leading explicit arguments spell; its count. */
static int kinds_of(const dsv4_hsaco_kernel *m, uint8_t *kinds)
{
  int n = 0;
  for (; n < m->nargs; n++) {
    const dsv4_hsaco_arg *a = &m->args[n];
    if (a->kind == DSV4_HSACO_ARG_GLOBAL && a->size == 8)
      kinds[n] = DSV4_ARG_PTR;
    else if (a->kind == DSV4_HSACO_ARG_VALUE && (a->size == 4 || a->size == 8))
      kinds[n] = a->size == 4 ? DSV4_ARG_I32 : DSV4_ARG_I64;
    else
      break;
  }
  return n;
}

/* What an accepted launch must be (hsaco_meta.h, restated for gfx942). */
static void accepted(const dsv4_hsaco_kernel *m, int n, uint32_t threads)
{
  uint64_t end = 0;
  for (int i = 0; i < n; i++) {
    uint32_t s = m->args[i].size;
    end = (end + s - 1) / s * s;
    check(m->args[i].offset == end);
    end += s;
  }
  for (int i = n; i < m->nargs; i++)
    check(m->args[i].kind == DSV4_HSACO_ARG_HIDDEN && m->args[i].offset >= end);
  check(m->wavefront == 64 && threads >= 1 && threads <= 1024 && threads <= m->max_flat_workgroup);
  check(m->group_segment <= 65536 && m->sgprs <= 108 && m->agprs <= m->vgprs);
  uint32_t per_simd = ((threads + 63) / 64 + 3) / 4, per_wave = (m->vgprs + 7) / 8 * 8;
  check((uint64_t)per_simd * per_wave <= 512);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  dsv4_hsaco_object o;
  static dsv4_hsaco_kernel m;
  uint8_t kinds[DSV4_HSACO_MAX_ARGS];
  char err[512];
  err[0] = 0;
  if (dsv4_hsaco_object_read(data, size, &o, err, sizeof err)) {
    check(err[0] != 0);
    return 0;
  }
  check(memchr(o.target, 0, sizeof o.target) != NULL && o.nkernels >= 0);
  for (int i = 0; i < o.nkernels && i < 16; i++) {
    err[0] = 0;
    if (dsv4_hsaco_kernel_at(data, size, i, &m, err, sizeof err)) {
      check(err[0] != 0);
      continue;
    }
    check(memchr(m.name, 0, sizeof m.name) != NULL && m.nargs >= 0 && m.nargs <= DSV4_HSACO_MAX_ARGS);
    for (int a = 0; a < m.nargs; a++)
      check((uint64_t)m.args[a].offset + m.args[a].size <= m.kernarg_size &&
            memchr(m.args[a].value_kind, 0, sizeof m.args[a].value_kind) != NULL);
    check(dsv4_hsaco_explicit_bytes(&m) <= m.kernarg_size);
    int n = kinds_of(&m, kinds);
    uint32_t threads = m.max_flat_workgroup < 2048 ? m.max_flat_workgroup : 2048;
    if (!dsv4_hsaco_launch_agrees(&m, "gfx942", kinds, n, threads, 0, err, sizeof err))
      accepted(&m, n, threads);
    else
      check(err[0] != 0);
    /* one by name finds an entry of that name, or says why not */
    dsv4_hsaco_kernel byname;
    err[0] = 0;
    if (dsv4_hsaco_kernel_meta(data, size, m.name, &byname, err, sizeof err))
      check(err[0] != 0);
    else
      check(strcmp(byname.name, m.name) == 0);
  }
  return 0;
}
