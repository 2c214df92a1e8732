/* hsaco_check.c -- dsv4c's check of a whole AMDGPU HSA code object: what
 * common/hsaco_meta.c reads (the ELF header, the metadata note, each
 * kernel's entry, the symbols), held to the processor dsv4c compiled for
 * and the kernels it generated.  All reading is hsaco_meta.c's, the one
 * reader the runtime uses too; this file holds the processor table and
 * the rules.  EF_AMDGPU_MACH values are those of llvm/BinaryFormat/ELF.h
 * in LLVM 19.
 */
#include "hsaco_check.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "hsaco_meta.h"

#define STT_OBJECT 1
#define STT_FUNC 2
#define KERNEL_DESCRIPTOR_SIZE 64

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Format a one-line message into err and return 1 (the failure code). */
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
  va_list ap;
  if (err && errlen > 0) {
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return 1;
}

/* Processor names and EF_AMDGPU_MACH_* values (LLVM 19 ELF.h). */
static const struct {
  const char *name;
  unsigned mach;
} MACHS[] = {
    {"gfx600", 0x20},          {"gfx601", 0x21},          {"gfx700", 0x22},  {"gfx701", 0x23},
    {"gfx702", 0x24},          {"gfx703", 0x25},          {"gfx704", 0x26},  {"gfx801", 0x28},
    {"gfx802", 0x29},          {"gfx803", 0x2a},          {"gfx810", 0x2b},  {"gfx900", 0x2c},
    {"gfx902", 0x2d},          {"gfx904", 0x2e},          {"gfx906", 0x2f},  {"gfx908", 0x30},
    {"gfx909", 0x31},          {"gfx90c", 0x32},          {"gfx1010", 0x33}, {"gfx1011", 0x34},
    {"gfx1012", 0x35},         {"gfx1030", 0x36},         {"gfx1031", 0x37}, {"gfx1032", 0x38},
    {"gfx1033", 0x39},         {"gfx602", 0x3a},          {"gfx705", 0x3b},  {"gfx805", 0x3c},
    {"gfx1035", 0x3d},         {"gfx1034", 0x3e},         {"gfx90a", 0x3f},  {"gfx940", 0x40},
    {"gfx1100", 0x41},         {"gfx1013", 0x42},         {"gfx1150", 0x43}, {"gfx1103", 0x44},
    {"gfx1036", 0x45},         {"gfx1101", 0x46},         {"gfx1102", 0x47}, {"gfx1200", 0x48},
    {"gfx1151", 0x4a},         {"gfx941", 0x4b},          {"gfx942", 0x4c},  {"gfx1201", 0x4e},
    {"gfx9-generic", 0x51},    {"gfx10-1-generic", 0x52}, {"gfx10-3-generic", 0x53},
    {"gfx11-generic", 0x54},   {"gfx1152", 0x55},         {"gfx12-generic", 0x59},
};

/* EF_AMDGPU_MACH value of the processor part of gpu (before any ':'), or
 * -1 when unknown. */
static int gpu_mach(const char *gpu)
{
  size_t base = strcspn(gpu, ":");
  for (size_t k = 0; k < sizeof MACHS / sizeof MACHS[0]; k++)
    if (strlen(MACHS[k].name) == base && memcmp(MACHS[k].name, gpu, base) == 0)
      return (int)MACHS[k].mach;
  return -1;
}

/* Processor name for a mach value, for messages. */
static const char *mach_name(unsigned mach)
{
  for (size_t k = 0; k < sizeof MACHS / sizeof MACHS[0]; k++)
    if (MACHS[k].mach == mach)
      return MACHS[k].name;
  return "unknown";
}

/* Is target "amdgcn-amd-amdhsa--<gpu>", followed by its end or ':'? */
static int target_is(const char *target, const char *gpu)
{
  static const char prefix[] = "amdgcn-amd-amdhsa--";
  size_t plen = sizeof prefix - 1, glen = strlen(gpu);
  return strncmp(target, prefix, plen) == 0 && strncmp(target + plen, gpu, glen) == 0 &&
         (target[plen + glen] == '\0' || target[plen + glen] == ':');
}

/* See hsaco_check.h. */
int dsv4_hsaco_check(const unsigned char *elf, size_t len, const char *gpu, const char *const *kernels, int nkernels,
                     char *err, size_t errlen)
{
  dsv4_hsaco_object o;
  dsv4_hsaco_kernel md;

  if (err && errlen > 0)
    err[0] = '\0';
  if (!gpu || !*gpu)
    return fail(err, errlen, "hsaco: no gpu named");
  if (nkernels < 0 || (nkernels > 0 && !kernels))
    return fail(err, errlen, "hsaco: bad kernel list");
  for (int i = 0; i < nkernels; i++)
    if (!kernels[i] || !*kernels[i])
      return fail(err, errlen, "hsaco: kernel name %d is empty", i);
  int mach = gpu_mach(gpu);
  if (mach < 0)
    return fail(err, errlen, "hsaco: unknown gpu '%s'", gpu);
  if (dsv4_hsaco_object_read(elf, len, &o, err, errlen))
    return 1;
  if (o.mach != (unsigned)mach)
    return fail(err, errlen, "hsaco: e_flags processor 0x%02x (%s) does not match %s (0x%02x)", o.mach,
                mach_name(o.mach), gpu, (unsigned)mach);
  if (!target_is(o.target, gpu))
    return fail(err, errlen, "hsaco: amdhsa.target is '%s', expected 'amdgcn-amd-amdhsa--%s'", o.target, gpu);
  /* every entry complete and consistent, then one for each named kernel */
  for (int i = 0; i < o.nkernels; i++)
    if (dsv4_hsaco_kernel_at(elf, len, i, &md, err, errlen))
      return 1;
  for (int i = 0; i < nkernels; i++)
    if (dsv4_hsaco_kernel_meta(elf, len, kernels[i], &md, err, errlen))
      return 1;
  for (int i = 0; i < nkernels; i++) {
    int r = dsv4_hsaco_symbol(elf, len, kernels[i], ".kd", STT_OBJECT, KERNEL_DESCRIPTOR_SIZE);
    if (r < 0)
      return fail(err, errlen, "hsaco: malformed symbol table");
    if (r == 0)
      return fail(err, errlen, "hsaco: no defined %d-byte STT_OBJECT symbol '%s.kd'", KERNEL_DESCRIPTOR_SIZE,
                  kernels[i]);
    r = dsv4_hsaco_symbol(elf, len, kernels[i], "", STT_FUNC, 0);
    if (r < 0)
      return fail(err, errlen, "hsaco: malformed symbol table");
    if (r == 0)
      return fail(err, errlen, "hsaco: no defined STT_FUNC symbol '%s'", kernels[i]);
  }
  return 0;
}
