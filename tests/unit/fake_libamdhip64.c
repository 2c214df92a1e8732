/* fake_libamdhip64.c -- a stand-in HIP runtime for the tests, loaded by
 * libdsv4rt through DSV4RT_HIP_LIBRARY: every entry point the HIP backend
 * (runtime/src/hip.c) uses, over host memory, with one AMD device whose
 * answers the environment sets (fake_libamdhip64.h).  It runs no kernel: a
 * launch is recorded (kernel, grid, block, LDS, stream, the kernarg bytes)
 * and held to the code object it came from, read with the same metadata
 * reader dsv4c uses (common/hsaco_meta.h) but checked here on its own
 * terms: the block handed over must be the explicit arguments' bytes
 * exactly, every pointer argument 0 or inside a live allocation, the
 * work-group within the kernel's flat size.  Copies outside an allocation
 * and frees of unknown pointers are refused as HIP refuses them.  Faults
 * are injected per entry point (fake_hip_fail). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_libamdhip64.h"
#include "hsaco_meta.h"

#define FAKE_EXPORT __attribute__((visibility("default")))

enum {
  hipSuccess = 0,
  hipErrorInvalidValue = 1,
  hipErrorOutOfMemory = 2,
  hipErrorNoDevice = 100,
  hipErrorInvalidDevice = 101,
  hipErrorInvalidImage = 200,
  hipErrorNotFound = 500,
};

/* ---- set-up and faults ---- */

static int env_int(const char *name, int dflt)
{
  const char *e = getenv(name);
  return e && *e ? atoi(e) : dflt;
}

static struct {
  char fn[64];
  int err, after;
} fault;

FAKE_EXPORT void fake_hip_fail(const char *fn, int err, int after)
{
  snprintf(fault.fn, sizeof fault.fn, "%s", fn ? fn : "");
  fault.err = err, fault.after = after;
}

/* The injected fault of fn, if its turn has come (once). */
static int fault_of(const char *fn)
{
  if (!fault.fn[0] || strcmp(fault.fn, fn))
    return 0;
  if (fault.after-- > 0)
    return 0;
  fault.fn[0] = 0;
  return fault.err;
}
#define FAULT(fn)                  \
  do {                             \
    int f_ = fault_of(#fn);        \
    if (f_)                        \
      return f_;                   \
  } while (0)

static int violations;
static char violation[512];

static void violate(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void violate(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  violations++;
  vsnprintf(violation, sizeof violation, fmt, ap);
  va_end(ap);
}

FAKE_EXPORT int fake_hip_violations(char *why, size_t n)
{
  if (why && n)
    snprintf(why, n, "%s", violation);
  return violations;
}

/* ---- memory: host allocations standing in for device ones ---- */

#define MAX_ALLOCS 8192
static struct {
  uintptr_t base;
  size_t size;
} allocs[MAX_ALLOCS];
static int nallocs;

FAKE_EXPORT int fake_hip_live(void) { return nallocs; }

/* The allocation holding [p, p + n), or -1. */
static int alloc_of(uintptr_t p, size_t n)
{
  for (int i = 0; i < nallocs; i++)
    if (p >= allocs[i].base && p - allocs[i].base <= allocs[i].size && n <= allocs[i].size - (p - allocs[i].base))
      return i;
  return -1;
}

FAKE_EXPORT int hipMalloc(void **p, size_t n)
{
  FAULT(hipMalloc);
  if (!p || nallocs == MAX_ALLOCS)
    return hipErrorInvalidValue;
  void *m = aligned_alloc(256, (n + 255) / 256 * 256 + 256);
  if (!m)
    return hipErrorOutOfMemory;
  memset(m, 0xCD, n); /* (device memory is not cleared) */
  allocs[nallocs].base = (uintptr_t)m, allocs[nallocs++].size = n;
  *p = m;
  return hipSuccess;
}

FAKE_EXPORT int hipFree(void *p)
{
  if (!p)
    return hipSuccess;
  for (int i = 0; i < nallocs; i++)
    if (allocs[i].base == (uintptr_t)p) {
      free(p);
      allocs[i] = allocs[--nallocs];
      return hipSuccess;
    }
  violate("hipFree of 0x%llx, not an allocation", (unsigned long long)(uintptr_t)p);
  return hipErrorInvalidValue;
}

static int check_range(const char *fn, const void *p, size_t n)
{
  if (alloc_of((uintptr_t)p, n) >= 0)
    return 0;
  violate("%s outside every allocation: 0x%llx, %zu bytes", fn, (unsigned long long)(uintptr_t)p, n);
  return hipErrorInvalidValue;
}

FAKE_EXPORT int hipMemcpyHtoD(void *dst, void *src, size_t n)
{
  FAULT(hipMemcpyHtoD);
  int r = check_range("hipMemcpyHtoD", dst, n);
  if (!r)
    memcpy(dst, src, n);
  return r;
}

FAKE_EXPORT int hipMemcpyDtoH(void *dst, void *src, size_t n)
{
  FAULT(hipMemcpyDtoH);
  int r = check_range("hipMemcpyDtoH", src, n);
  if (!r)
    memcpy(dst, src, n);
  return r;
}

FAKE_EXPORT int hipMemcpyDtoDAsync(void *dst, void *src, size_t n, void *stream)
{
  (void)stream;
  FAULT(hipMemcpyDtoDAsync);
  int r = check_range("hipMemcpyDtoDAsync (destination)", dst, n);
  if (!r)
    r = check_range("hipMemcpyDtoDAsync (source)", src, n);
  if (!r)
    memmove(dst, src, n);
  return r;
}

/* ---- the device ---- */

FAKE_EXPORT int hipRuntimeGetVersion(int *v)
{
  FAULT(hipRuntimeGetVersion);
  *v = env_int("DSV4_FAKE_HIP_VERSION", 50200000);
  return hipSuccess;
}

FAKE_EXPORT int hipInit(unsigned flags)
{
  (void)flags;
  FAULT(hipInit);
  return hipSuccess;
}

FAKE_EXPORT int hipGetDeviceCount(int *n)
{
  FAULT(hipGetDeviceCount);
  *n = env_int("DSV4_FAKE_HIP_DEVICES", 1);
  return *n ? hipSuccess : hipErrorNoDevice;
}

static int device_ok(int d) { return d >= 0 && d < env_int("DSV4_FAKE_HIP_DEVICES", 1); }

FAKE_EXPORT int hipDeviceGet(int *dev, int ordinal)
{
  if (!device_ok(ordinal))
    return hipErrorInvalidDevice;
  *dev = ordinal;
  return hipSuccess;
}

static int current = -1;

FAKE_EXPORT int hipSetDevice(int d)
{
  if (!device_ok(d))
    return hipErrorInvalidDevice;
  current = d;
  return hipSuccess;
}

static const char *dev_name(void) { return "AMD Instinct MI300X (fake_libamdhip64)"; }

FAKE_EXPORT int hipDeviceGetName(char *name, int len, int dev)
{
  if (!device_ok(dev) || len < 1)
    return hipErrorInvalidValue;
  snprintf(name, (size_t)len, "%s", dev_name());
  return hipSuccess;
}

FAKE_EXPORT int hipDeviceGetAttribute(int *v, int attr, int dev)
{
  if (!device_ok(dev))
    return hipErrorInvalidDevice;
  switch (attr) {
  case 56: /* hipDeviceAttributeMaxThreadsPerBlock */
    *v = 1024;
    return hipSuccess;
  case 63: /* hipDeviceAttributeMultiprocessorCount */
    *v = 304;
    return hipSuccess;
  case 74: /* hipDeviceAttributeMaxSharedMemoryPerBlock */
    *v = 65536;
    return hipSuccess;
  case 87: /* hipDeviceAttributeWarpSize */
    *v = env_int("DSV4_FAKE_HIP_WARP", 64);
    return hipSuccess;
  default:
    return hipErrorInvalidValue;
  }
}

/* ROCm's pre-6.0 hipDeviceProp_t (what the hipGetDeviceProperties symbol
 * fills in 5.x and 6.x): name at 0, warpSize at 276, maxThreadsPerBlock at
 * 280, gcnArchName at 396; the structure is under 1 KiB. */
FAKE_EXPORT int hipGetDeviceProperties(void *prop, int dev)
{
  if (!device_ok(dev))
    return hipErrorInvalidDevice;
  unsigned char *p = prop;
  memset(p, 0, 1024);
  const char *layout = getenv("DSV4_FAKE_HIP_LAYOUT");
  int shift = layout && !strcmp(layout, "bad") ? 8 : 0; /* a field more before them */
  const char *arch = getenv("DSV4_FAKE_HIP_ARCH");
  int warp = env_int("DSV4_FAKE_HIP_WARP", 64), threads = 1024;
  snprintf((char *)p, 256, "%s", dev_name());
  memcpy(p + 276 + shift, &warp, 4);
  memcpy(p + 280 + shift, &threads, 4);
  snprintf((char *)p + 396 + shift, 256, "%s", arch && *arch ? arch : "gfx942:sramecc+:xnack-");
  return hipSuccess;
}

FAKE_EXPORT int hipDeviceSynchronize(void) { return current < 0 ? hipErrorInvalidDevice : hipSuccess; }
FAKE_EXPORT int hipStreamSynchronize(void *s)
{
  (void)s;
  return hipSuccess;
}

/* ---- modules and launches ---- */

typedef struct {
  const unsigned char *image;
  size_t len;
} fake_module;

typedef struct {
  fake_module *m;
  dsv4_hsaco_kernel meta;
} fake_function;

static uint64_t rd(const unsigned char *p, int n)
{
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

/* An ELF64 image's extent (its program and section header tables end it,
 * as ld.lld writes them). */
static size_t elf_extent(const unsigned char *e)
{
  uint64_t ph = rd(e + 32, 8) + rd(e + 54, 2) * rd(e + 56, 2), sh = rd(e + 40, 8) + rd(e + 58, 2) * rd(e + 60, 2);
  return (size_t)(ph > sh ? ph : sh);
}

FAKE_EXPORT int hipModuleLoadData(void **module, const void *image)
{
  FAULT(hipModuleLoadData);
  const unsigned char *e = image;
  if (!e || memcmp(e, "\177ELF", 4) || e[4] != 2)
    return hipErrorInvalidImage;
  fake_module *m = calloc(1, sizeof *m);
  m->image = e, m->len = elf_extent(e);
  *module = m;
  return hipSuccess;
}

FAKE_EXPORT int hipModuleUnload(void *module)
{
  free(module);
  return hipSuccess;
}

/* Functions handed out, freed when the library goes (never: the runtime
 * keeps it loaded); kept so that a leak check sees them reachable. */
static fake_function *functions[4096];
static int nfunctions;

FAKE_EXPORT int hipModuleGetFunction(void **f, void *module, const char *name)
{
  FAULT(hipModuleGetFunction);
  fake_module *m = module;
  char why[256];
  fake_function *fn = calloc(1, sizeof *fn);
  if (!fn || nfunctions == 4096)
    return hipErrorOutOfMemory;
  if (dsv4_hsaco_kernel_meta(m->image, m->len, name, &fn->meta, why, sizeof why)) {
    free(fn);
    return hipErrorNotFound;
  }
  fn->m = m;
  functions[nfunctions++] = fn;
  *f = fn;
  return hipSuccess;
}

#define KEEP 64
static fake_hip_launch launches[KEEP];
static int nlaunches;

FAKE_EXPORT int fake_hip_launch_count(void) { return nlaunches; }
FAKE_EXPORT const fake_hip_launch *fake_hip_launch_at(int i)
{
  return i >= 0 && i < nlaunches && i >= nlaunches - KEEP ? &launches[i % KEEP] : NULL;
}

FAKE_EXPORT int hipModuleLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                      unsigned bz, unsigned shared, void *stream, void **params, void **extra)
{
  FAULT(hipModuleLaunchKernel);
  fake_function *fn = f;
  const dsv4_hsaco_kernel *k = &fn->meta;
  if (params || !extra || extra[0] != (void *)1 || extra[2] != (void *)2 || extra[4] != (void *)3 || !extra[3])
    return hipErrorInvalidValue;
  const unsigned char *block = extra[1];
  size_t size = *(const size_t *)extra[3];
  if (!gx || !gy || !gz || (unsigned long long)bx * by * bz > k->max_flat_workgroup || !bx)
    return hipErrorInvalidValue;
  if (size != dsv4_hsaco_explicit_bytes(k) || size > FAKE_HIP_KERNARG_MAX)
    violate("kernel %s: a kernarg block of %zu bytes, its explicit arguments take %u", k->name, size,
            dsv4_hsaco_explicit_bytes(k));
  for (int i = 0; i < k->nargs && size <= FAKE_HIP_KERNARG_MAX; i++) {
    const dsv4_hsaco_arg *a = &k->args[i];
    if (a->kind == DSV4_HSACO_ARG_HIDDEN)
      break;
    if (a->offset + a->size > size) {
      violate("kernel %s: the argument at offset %u lies past the %zu-byte block", k->name, a->offset, size);
      continue;
    }
    uint64_t v = rd(block + a->offset, a->size < 8 ? (int)a->size : 8);
    if (a->kind == DSV4_HSACO_ARG_GLOBAL && v && alloc_of((uintptr_t)v, 0) < 0)
      violate("kernel %s: the pointer argument at offset %u is 0x%llx, in no allocation", k->name, a->offset,
              (unsigned long long)v);
  }
  fake_hip_launch *l = &launches[nlaunches++ % KEEP];
  memset(l, 0, sizeof *l);
  snprintf(l->kernel, sizeof l->kernel, "%s", k->name);
  l->grid[0] = gx, l->grid[1] = gy, l->grid[2] = gz, l->block[0] = bx, l->block[1] = by, l->block[2] = bz;
  l->shared = shared, l->stream = stream, l->kernarg_size = size;
  memcpy(l->kernarg, block, size < FAKE_HIP_KERNARG_MAX ? size : FAKE_HIP_KERNARG_MAX);
  return hipSuccess;
}

/* ---- events and errors ---- */

FAKE_EXPORT int hipEventCreate(void **e)
{
  FAULT(hipEventCreate);
  *e = malloc(1);
  return *e ? hipSuccess : hipErrorOutOfMemory;
}
FAKE_EXPORT int hipEventDestroy(void *e)
{
  free(e);
  return hipSuccess;
}
FAKE_EXPORT int hipEventRecord(void *e, void *s)
{
  (void)e, (void)s;
  return hipSuccess;
}
FAKE_EXPORT int hipEventSynchronize(void *e)
{
  (void)e;
  return hipSuccess;
}
FAKE_EXPORT int hipEventElapsedTime(float *ms, void *a, void *b)
{
  (void)a, (void)b;
  *ms = 0.25f;
  return hipSuccess;
}

FAKE_EXPORT const char *hipGetErrorString(int r)
{
  switch (r) {
  case hipSuccess:
    return "no error";
  case hipErrorInvalidValue:
    return "invalid argument";
  case hipErrorOutOfMemory:
    return "out of memory";
  case hipErrorNoDevice:
    return "no ROCm-capable device is detected";
  case hipErrorInvalidDevice:
    return "invalid device ordinal";
  case hipErrorInvalidImage:
    return "device kernel image is invalid";
  case hipErrorNotFound:
    return "named symbol not found";
  default:
    return "unknown error";
  }
}
