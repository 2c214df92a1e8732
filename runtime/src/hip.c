/* hip.c -- the HIP backend (AMD GPUs) through the module API of a dlopen'd
 * libamdhip64 (DSV4RT_HIP_LIBRARY names another, read at context
 * creation).  No ROCm header or library is needed to build: the few types,
 * constants and entry points used are declared here from the HIP API
 * reference (hip_runtime_api.h); they are the same in ROCm 5.0 through 6.x.
 *
 * The AMDGCN entries of a bundle are HSA code objects (.hsaco) that dsv4c
 * linked and held to their AMDHSA metadata (common/hsaco_meta.h).  This
 * backend loads an entry only on a device whose gcnArchName names the
 * entry's processor (target features after ':' aside: dsv4c's code is
 * built for either setting of xnack and sramecc), and builds each launch's
 * kernarg block itself: every argument at the offset the code object's
 * metadata gives, checked when the bundle opened and again at load against
 * the op's argument list, handed over whole (HIP_LAUNCH_PARAM_BUFFER_*);
 * the HIP runtime appends the hidden arguments it owns.
 *
 * HIP selects the device per thread (hipSetDevice), so every call that
 * touches the device selects the context's first.  A failed allocation or
 * load leaves the context usable.  Nothing here was run on an AMD GPU:
 * tests/unit/fake_libamdhip64.c stands in for the library in CI. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hsaco_meta.h"
#include "rt.h"

typedef int hipError_t;
typedef int hipDevice_t;
typedef struct ihipModule_t *hipModule_t;
typedef struct ihipModuleSymbol_t *hipFunction_t;
typedef struct ihipStream_t *hipStream_t;
typedef struct ihipEvent_t *hipEvent_t;

/* hipDeviceAttribute_t values (the numbering since ROCm 5.0: CUDA-compatible
 * attributes from 0, AMD-specific ones from 10000). */
enum {
  hipDeviceAttributeMaxThreadsPerBlock = 56,
  hipDeviceAttributeMultiprocessorCount = 63,
  hipDeviceAttributeMaxSharedMemoryPerBlock = 74,
  hipDeviceAttributeWarpSize = 87,
};
#define HIP_LAUNCH_PARAM_BUFFER_POINTER ((void *)0x01)
#define HIP_LAUNCH_PARAM_BUFFER_SIZE ((void *)0x02)
#define HIP_LAUNCH_PARAM_END ((void *)0x03)

/* The oldest HIP runtime taken (hipRuntimeGetVersion: 10^7 major + 10^5
 * minor + patch): 5.0, the first with the attribute numbering above. */
#define RT_HIP_MIN_VERSION 50000000

/* hipGetDeviceProperties fills the pre-6.0 structure (hipDeviceProp_tR0000;
 * ROCm 6 keeps that symbol for it and renames the new one): name[256] at 0,
 * warpSize at 276, maxThreadsPerBlock at 280, gcnArchName[256] at 396.
 * The buffer is larger than the structure; name and warpSize are checked
 * against the API's own answers before the arch name is trusted. */
enum { PROP_BYTES = 8192, PROP_WARP = 276, PROP_THREADS = 280, PROP_ARCH = 396 };

#define HIP_FUNCS(F)                                                                                          \
  F(hipInit, hipError_t, (unsigned))                                                                          \
  F(hipRuntimeGetVersion, hipError_t, (int *))                                                                \
  F(hipGetDeviceCount, hipError_t, (int *))                                                                   \
  F(hipDeviceGet, hipError_t, (hipDevice_t *, int))                                                           \
  F(hipSetDevice, hipError_t, (int))                                                                          \
  F(hipDeviceGetName, hipError_t, (char *, int, hipDevice_t))                                                 \
  F(hipDeviceGetAttribute, hipError_t, (int *, int, int))                                                     \
  F(hipGetDeviceProperties, hipError_t, (void *, int))                                                        \
  F(hipDeviceSynchronize, hipError_t, (void))                                                                 \
  F(hipStreamSynchronize, hipError_t, (hipStream_t))                                                          \
  F(hipMalloc, hipError_t, (void **, size_t))                                                                 \
  F(hipFree, hipError_t, (void *))                                                                            \
  F(hipMemcpyHtoD, hipError_t, (void *, void *, size_t))                                                      \
  F(hipMemcpyDtoH, hipError_t, (void *, void *, size_t))                                                      \
  F(hipMemcpyDtoDAsync, hipError_t, (void *, void *, size_t, hipStream_t))                                    \
  F(hipModuleLoadData, hipError_t, (hipModule_t *, const void *))                                             \
  F(hipModuleGetFunction, hipError_t, (hipFunction_t *, hipModule_t, const char *))                           \
  F(hipModuleUnload, hipError_t, (hipModule_t))                                                               \
  F(hipModuleLaunchKernel, hipError_t,                                                                        \
    (hipFunction_t, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, hipStream_t, void **, \
     void **))                                                                                                \
  F(hipEventCreate, hipError_t, (hipEvent_t *))                                                               \
  F(hipEventRecord, hipError_t, (hipEvent_t, hipStream_t))                                                    \
  F(hipEventSynchronize, hipError_t, (hipEvent_t))                                                            \
  F(hipEventElapsedTime, hipError_t, (float *, hipEvent_t, hipEvent_t))                                       \
  F(hipEventDestroy, hipError_t, (hipEvent_t))                                                                \
  F(hipGetErrorString, const char *, (hipError_t))

typedef struct {
  void *lib;
#define F(name, ret, args) ret(*name) args;
  HIP_FUNCS(F)
#undef F
  int dev;         /* the ordinal hipSetDevice takes */
  int max_threads; /* threads a work-group */
  int max_lds;     /* LDS bytes a work-group */
  int warp;        /* the wavefront */
  int version;     /* hipRuntimeGetVersion */
  char arch[64];   /* gcnArchName up to its first ':' (gfx942) */
  hipEvent_t ev[2];
} hip_state;

/* A loaded kernel: the function and what its code object says of it. */
typedef struct {
  hipFunction_t f;
  uint32_t kernarg_bytes; /* the explicit arguments' block */
  dsv4_hsaco_kernel meta;
} hip_kernel;

/* A loaded module: its code object (the bundle's bytes, alive while the
 * bundle is) and the kernels taken from it (the entry's and its second). */
typedef struct {
  hipModule_t m;
  const uint8_t *code;
  size_t len;
  const dsv4_bundle_entry *e;
  hip_kernel *k[2];
} hip_module;

#define S(ctx) ((hip_state *)(ctx)->state)
#define STREAM(ctx) ((hipStream_t)(uintptr_t)(ctx)->stream)

/* Record a HIP error as the context's message. */
static int hip_fail(dsv4rt_context *ctx, hipError_t r, dsv4rt_status s, const char *what)
{
  hip_state *st = S(ctx);
  const char *msg = st && st->hipGetErrorString ? st->hipGetErrorString(r) : NULL;
  return rt_fail(ctx, s, "HIP %s failed: error %d (%s)", what, r, msg ? msg : "unknown");
}

/* Make the context's device the calling thread's (HIP's device is per thread). */
static hipError_t hip_use(dsv4rt_context *ctx) { return S(ctx)->hipSetDevice(S(ctx)->dev); }

static void hip_fini(dsv4rt_context *ctx)
{
  hip_state *st = S(ctx);
  if (!st)
    return;
  if (st->hipSetDevice && st->ev[0]) {
    st->hipSetDevice(st->dev);
    for (int i = 0; i < 2; i++)
      if (st->ev[i])
        st->hipEventDestroy(st->ev[i]);
  }
  rt_dlclose(st->lib);
  free(st);
  ctx->state = NULL;
}

/* Fail set-up with status s and the message already on ctx, after freeing
 * the backend's state. */
static int hip_init_fail(dsv4rt_context *ctx, int s)
{
  char m[sizeof ctx->err];
  snprintf(m, sizeof m, "%s", ctx->err);
  hip_fini(ctx);
  return rt_fail(ctx, (dsv4rt_status)s, "%s", m);
}

/* Open the library (DSV4RT_HIP_LIBRARY, if set, instead of libamdhip64),
 * its entry points, and check its version; 0 or a status. */
static int hip_open(dsv4rt_context *ctx)
{
  static const char *const names[] = {"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5", NULL};
  hip_state *st = S(ctx);
  const char *env = getenv("DSV4RT_HIP_LIBRARY");
  const char *const chosen[] = {env, NULL};
  const char *lib = env && *env ? env : names[0];
  st->lib = rt_dlopen(env && *env ? chosen : names);
  if (!st->lib)
    return rt_fail(ctx, DSV4RT_ERR_NO_BACKEND, "%s not found or not loadable%s", lib,
                   env && *env ? " (DSV4RT_HIP_LIBRARY)" : " (no ROCm HIP runtime: Debian package libamdhip64-5)");
#define F(name, ret, args)                                                                                 \
  st->name = (ret(*) args)rt_dlsym(st->lib, #name);                                                        \
  if (!st->name)                                                                                           \
    return rt_fail(ctx, DSV4RT_ERR_NO_BACKEND, "%s lacks %s (not a HIP runtime, or one older than ROCm 5.0)", lib, \
                   #name);
  HIP_FUNCS(F)
#undef F
  int ver = 0;
  hipError_t r = st->hipRuntimeGetVersion(&ver);
  if (r)
    return hip_fail(ctx, r, DSV4RT_ERR_NO_BACKEND, "hipRuntimeGetVersion");
  if (ver < RT_HIP_MIN_VERSION)
    return rt_fail(ctx, DSV4RT_ERR_NO_BACKEND,
                   "the HIP runtime is version %d.%d; dsv4c's runtime needs ROCm 5.0 or later: update ROCm",
                   ver / 10000000, ver / 100000 % 100);
  st->version = ver;
  return 0;
}

/* The device's processor (gcnArchName up to ':') into st->arch; 0 or a
 * status (a properties layout this file does not know is refused, not
 * guessed at). */
static int hip_arch(dsv4rt_context *ctx, const char *name)
{
  hip_state *st = S(ctx);
  unsigned char *p = calloc(1, PROP_BYTES);
  if (!p)
    return rt_fail(ctx, DSV4RT_ERR_OUT_OF_MEMORY, "out of host memory");
  hipError_t r = st->hipGetDeviceProperties(p, st->dev);
  if (r) {
    free(p);
    return hip_fail(ctx, r, DSV4RT_ERR_NO_BACKEND, "hipGetDeviceProperties");
  }
  int warp, threads;
  memcpy(&warp, p + PROP_WARP, 4);
  memcpy(&threads, p + PROP_THREADS, 4);
  const char *arch = (const char *)p + PROP_ARCH;
  int ok = !strncmp((const char *)p, name, 255) && warp == st->warp && threads == st->max_threads &&
           memchr(arch, 0, 256) && !strncmp(arch, "gfx", 3);
  if (ok)
    snprintf(st->arch, sizeof st->arch, "%.*s", (int)strcspn(arch, ":"), arch);
  free(p);
  if (!ok)
    return rt_fail(ctx, DSV4RT_ERR_NO_BACKEND,
                   "hipGetDeviceProperties of '%s' does not have the layout this runtime reads (HIP %d.%d): no "
                   "processor name",
                   name, st->version / 10000000, st->version / 100000 % 100);
  return 0;
}

static int hip_init(dsv4rt_context *ctx, int device)
{
  hip_state *st = calloc(1, sizeof *st);
  if (!st)
    return rt_fail(ctx, DSV4RT_ERR_OUT_OF_MEMORY, "out of host memory");
  ctx->state = st;
  int rc = hip_open(ctx);
  if (rc)
    return hip_init_fail(ctx, rc);
  hipError_t r;
  int count = 0;
  if ((r = st->hipInit(0)) || (r = st->hipGetDeviceCount(&count))) {
    hip_fail(ctx, r, DSV4RT_ERR_NO_BACKEND, "initialisation");
    return hip_init_fail(ctx, DSV4RT_ERR_NO_BACKEND);
  }
  if (device >= count) {
    hip_fini(ctx);
    return rt_fail(ctx, DSV4RT_ERR_NO_BACKEND, "HIP device %d requested, %d present", device, count);
  }
  hipDevice_t dev = 0;
  char name[256] = "";
  if ((r = st->hipDeviceGet(&dev, device)) || (r = st->hipSetDevice(device)) ||
      (r = st->hipDeviceGetName(name, sizeof name - 1, dev)) ||
      (r = st->hipDeviceGetAttribute(&st->max_threads, hipDeviceAttributeMaxThreadsPerBlock, device)) ||
      (r = st->hipDeviceGetAttribute(&st->max_lds, hipDeviceAttributeMaxSharedMemoryPerBlock, device)) ||
      (r = st->hipDeviceGetAttribute(&st->warp, hipDeviceAttributeWarpSize, device)) ||
      (r = st->hipDeviceGetAttribute(&ctx->units, hipDeviceAttributeMultiprocessorCount, device))) {
    hip_fail(ctx, r, DSV4RT_ERR_NO_BACKEND, "device set-up");
    return hip_init_fail(ctx, DSV4RT_ERR_NO_BACKEND);
  }
  st->dev = device;
  if ((rc = hip_arch(ctx, name)))
    return hip_init_fail(ctx, rc);
  if ((r = st->hipEventCreate(&st->ev[0])) || (r = st->hipEventCreate(&st->ev[1]))) {
    hip_fail(ctx, r, DSV4RT_ERR_NO_BACKEND, "hipEventCreate");
    return hip_init_fail(ctx, DSV4RT_ERR_NO_BACKEND);
  }
  snprintf(ctx->device, sizeof ctx->device, "%s (%s, wave%d, HIP %d.%d)", name, st->arch, st->warp,
           st->version / 10000000, st->version / 100000 % 100);
  return 0;
}

static int hip_alloc(dsv4rt_context *ctx, size_t n, uint64_t *native)
{
  void *p = NULL;
  hipError_t r = hip_use(ctx);
  if (!r)
    r = S(ctx)->hipMalloc(&p, n);
  if (r) {
    char what[64];
    snprintf(what, sizeof what, "hipMalloc of %zu bytes", n);
    return hip_fail(ctx, r, DSV4RT_ERR_OUT_OF_MEMORY, what);
  }
  *native = (uint64_t)(uintptr_t)p;
  return 0;
}

static void hip_release(dsv4rt_context *ctx, uint64_t native)
{
  hip_use(ctx);
  S(ctx)->hipFree((void *)(uintptr_t)native);
}

/* A blocking copy does not wait for another stream's work: with a stream
 * set, wait for it first (dsv4rt_set_stream). */
static hipError_t hip_wait_stream(dsv4rt_context *ctx)
{
  hipError_t r = hip_use(ctx);
  return r || !ctx->stream ? r : S(ctx)->hipStreamSynchronize(STREAM(ctx));
}

static int hip_write(dsv4rt_context *ctx, uint64_t native, size_t off, const void *src, size_t n)
{
  hipError_t r = hip_wait_stream(ctx);
  if (!r)
    r = S(ctx)->hipMemcpyHtoD((void *)(uintptr_t)(native + off), (void *)(uintptr_t)src, n);
  return r ? hip_fail(ctx, r, DSV4RT_ERR_BACKEND, "hipMemcpyHtoD") : 0;
}

static int hip_read(dsv4rt_context *ctx, uint64_t native, size_t off, void *dst, size_t n)
{
  hipError_t r = hip_wait_stream(ctx);
  if (!r)
    r = S(ctx)->hipMemcpyDtoH(dst, (void *)(uintptr_t)(native + off), n);
  return r ? hip_fail(ctx, r, DSV4RT_ERR_BACKEND, "hipMemcpyDtoH") : 0;
}

static int hip_copy(dsv4rt_context *ctx, uint64_t dst, uint64_t src, size_t n, int wait)
{
  hipError_t r = hip_use(ctx);
  if (!r)
    r = S(ctx)->hipMemcpyDtoDAsync((void *)(uintptr_t)dst, (void *)(uintptr_t)src, n, STREAM(ctx));
  if (!r && wait)
    r = S(ctx)->hipDeviceSynchronize();
  return r ? hip_fail(ctx, r, DSV4RT_ERR_BACKEND, "hipMemcpyDtoDAsync") : 0;
}

/* An AMDGCN entry for this device's processor whose launch record fits
 * it: threads, dynamic LDS, no clusters (static LDS and the wavefront are
 * the code object's: checked when it loads). */
static int hip_accepts(dsv4rt_context *ctx, const dsv4_bundle_entry *e, const uint8_t *code, char *why, size_t n)
{
  (void)code, (void)why, (void)n; /* (nothing beyond the target, arch and record to say) */
  hip_state *st = S(ctx);
  char arch[sizeof e->arch + 1];
  snprintf(arch, sizeof arch, "%.*s", (int)strcspn(e->arch, ":"), e->arch);
  return e->target == 1 && !strcmp(arch, st->arch) && e->launch.cluster == 1 &&
         e->launch.threads <= (uint32_t)st->max_threads && e->launch.second_threads <= (uint32_t)st->max_threads &&
         e->launch.shared_bytes <= (uint32_t)st->max_lds;
}

/* Kernel `name` of module md: its metadata held to the launch (the op's
 * argument kinds, threads, dynamic LDS) and to this device into a new
 * md->k[slot]; its function is taken once the module is loaded
 * (hip_function).  0 or a status. */
static int hip_kernel_of(dsv4rt_context *ctx, hip_module *md, int slot, const char *name, const uint8_t *kinds,
                         int nargs, uint32_t threads, uint32_t shared)
{
  hip_state *st = S(ctx);
  hip_kernel *k = md->k[slot] = calloc(1, sizeof *k);
  if (!k)
    return rt_fail(ctx, DSV4RT_ERR_OUT_OF_MEMORY, "out of host memory");
  char why[256];
  if (dsv4_hsaco_kernel_meta(md->code, md->len, name, &k->meta, why, sizeof why) ||
      dsv4_hsaco_launch_agrees(&k->meta, md->e->arch, kinds, nargs, threads, shared, why, sizeof why))
    return rt_fail(ctx, DSV4RT_ERR_BUNDLE_FORMAT, "kernel %s: its code object does not fit its launch: %s", name, why);
  if (k->meta.wavefront != (uint32_t)st->warp || k->meta.group_segment + shared > (uint32_t)st->max_lds)
    return rt_fail(ctx, DSV4RT_ERR_BACKEND,
                   "kernel %s needs wave%u and %u bytes of LDS a work-group; %s runs wave%d with %d bytes", name,
                   k->meta.wavefront, k->meta.group_segment + shared, ctx->device, st->warp, st->max_lds);
  k->kernarg_bytes = dsv4_hsaco_explicit_bytes(&k->meta);
  return 0;
}

/* md->k[slot]'s function from the loaded module. */
static int hip_function(dsv4rt_context *ctx, hip_module *md, int slot)
{
  hipError_t r = S(ctx)->hipModuleGetFunction(&md->k[slot]->f, md->m, md->k[slot]->meta.name);
  if (!r)
    return 0;
  char what[128];
  snprintf(what, sizeof what, "hipModuleGetFunction of kernel %.63s", md->k[slot]->meta.name);
  return hip_fail(ctx, r, DSV4RT_ERR_BACKEND, what);
}

static void hip_module_free(dsv4rt_context *ctx, hip_module *md)
{
  if (md->m) {
    hip_use(ctx);
    S(ctx)->hipModuleUnload(md->m);
  }
  free(md->k[0]);
  free(md->k[1]);
  free(md);
}

/* Free md, keeping the message already on ctx; status rc. */
static int hip_load_fail(dsv4rt_context *ctx, hip_module *md, int rc)
{
  char m[sizeof ctx->err];
  snprintf(m, sizeof m, "%s", ctx->err);
  hip_module_free(ctx, md);
  return rt_fail(ctx, (dsv4rt_status)rc, "%s", m);
}

/* The entry's code object is held to its launch and this device before
 * the driver sees it; then loaded, and its kernel taken. */
static int hip_load(dsv4rt_context *ctx, const dsv4_bundle_entry *e, const uint8_t *code, const uint8_t *aux,
                    void **module, void **kernel)
{
  (void)aux;
  hip_state *st = S(ctx);
  hip_module *md = calloc(1, sizeof *md);
  if (!md)
    return rt_fail(ctx, DSV4RT_ERR_OUT_OF_MEMORY, "out of host memory");
  md->code = code, md->len = e->code_len, md->e = e;
  int rc = hip_kernel_of(ctx, md, 0, e->name, e->args, (int)e->nargs, e->launch.threads, e->launch.shared_bytes);
  if (rc)
    return hip_load_fail(ctx, md, rc);
  hipError_t r = hip_use(ctx);
  if (!r)
    r = st->hipModuleLoadData(&md->m, code);
  if (r) {
    char what[200];
    snprintf(what, sizeof what, "hipModuleLoadData of kernel %.47s (code for %.15s, device %.63s)", e->name, e->arch,
             st->arch);
    hip_fail(ctx, r, DSV4RT_ERR_BACKEND, what);
    md->m = NULL;
    return hip_load_fail(ctx, md, DSV4RT_ERR_BACKEND);
  }
  if ((rc = hip_function(ctx, md, 0)))
    return hip_load_fail(ctx, md, rc);
  *module = md, *kernel = md->k[0];
  return 0;
}

/* The module's second kernel (a matrix sparse_decode's combine, topk's
 * merge: its argument kinds are the second kernel's, dsv4_abi.h). */
static int hip_symbol(dsv4rt_context *ctx, void *module, const char *name, void **kernel)
{
  hip_module *md = module;
  uint8_t second[DSV4_MAX_ARGS];
  int nsecond = dsv4_second_args(md->e->launch.second, second, NULL);
  if (md->k[1])
    return rt_fail(ctx, DSV4RT_ERR_BACKEND, "kernel %s: a second kernel was already taken", md->e->name);
  int rc = hip_kernel_of(ctx, md, 1, name, second, nsecond, md->e->launch.second_threads, 0);
  if (!rc)
    rc = hip_function(ctx, md, 1);
  if (rc) {
    free(md->k[1]);
    md->k[1] = NULL;
    return rc;
  }
  *kernel = md->k[1];
  return 0;
}

static void hip_unload(dsv4rt_context *ctx, void *module, void *kernel)
{
  (void)kernel; /* (the module's) */
  hip_module_free(ctx, module);
}

static int hip_launch(dsv4rt_context *ctx, void *kernel, const uint32_t grid[3], const uint32_t block[3],
                      uint32_t shared, uint32_t cluster, unsigned flags, const rt_arg *args, int nargs)
{
  (void)cluster; /* always 1: hip_accepts takes no entry that needs clusters */
  (void)flags;   /* an early launch is an ordinary one here */
  hip_kernel *k = kernel;
  _Alignas(16) uint8_t block_bytes[8 * DSV4_MAX_ARGS];
  size_t size = k->kernarg_bytes;
  if (size > sizeof block_bytes || nargs > k->meta.nargs)
    return rt_fail(ctx, DSV4RT_ERR_BACKEND, "kernel %s: %d arguments in a %zu-byte block do not fit", k->meta.name,
                   nargs, size);
  memset(block_bytes, 0, size);
  for (int i = 0; i < nargs; i++) {
    const dsv4_hsaco_arg *m = &k->meta.args[i];
    uint64_t v = 0;
    if (args[i].kind == DSV4_ARG_PTR || args[i].kind == DSV4_ARG_IN)
      v = args[i].v.buf ? args[i].v.buf->native : 0;
    else if (args[i].kind == DSV4_ARG_I64)
      memcpy(&v, &args[i].v.i64, 8);
    else
      memcpy(&v, &args[i].v, 4); /* i32 and f32 sit at the union's start */
    if (m->offset + m->size > size || (m->size != 4 && m->size != 8))
      return rt_fail(ctx, DSV4RT_ERR_BACKEND, "kernel %s: argument %d does not fit its block", k->meta.name, i);
    memcpy(block_bytes + m->offset, &v, m->size); /* (little-endian: the low bytes first) */
  }
  void *extra[] = {HIP_LAUNCH_PARAM_BUFFER_POINTER, block_bytes, HIP_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   HIP_LAUNCH_PARAM_END};
  hipError_t r = hip_use(ctx);
  if (!r)
    r = S(ctx)->hipModuleLaunchKernel(k->f, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared,
                                      STREAM(ctx), NULL, extra);
  return r ? hip_fail(ctx, r, DSV4RT_ERR_BACKEND, "hipModuleLaunchKernel") : 0;
}

static int hip_sync(dsv4rt_context *ctx)
{
  hipError_t r = hip_use(ctx);
  if (!r)
    r = S(ctx)->hipDeviceSynchronize();
  return r ? hip_fail(ctx, r, DSV4RT_ERR_BACKEND, "hipDeviceSynchronize (a kernel failed)") : 0;
}

static int hip_timer_start(dsv4rt_context *ctx)
{
  hipError_t r = hip_use(ctx);
  if (!r)
    r = S(ctx)->hipEventRecord(S(ctx)->ev[0], STREAM(ctx));
  return r ? hip_fail(ctx, r, DSV4RT_ERR_BACKEND, "hipEventRecord") : 0;
}

static int hip_timer_stop(dsv4rt_context *ctx, double *ms)
{
  hip_state *st = S(ctx);
  float f = 0;
  hipError_t r = hip_use(ctx);
  if (!r)
    r = st->hipEventRecord(st->ev[1], STREAM(ctx));
  if (!r)
    r = st->hipEventSynchronize(st->ev[1]);
  if (!r)
    r = st->hipEventElapsedTime(&f, st->ev[0], st->ev[1]);
  *ms = f;
  return r ? hip_fail(ctx, r, DSV4RT_ERR_BACKEND, "event timing") : 0;
}

const rt_backend rt_hip_backend = {
    .kind = DSV4RT_BACKEND_HIP,
    .name = "hip",
    .addresses = 1,
    .init = hip_init,
    .fini = hip_fini,
    .alloc = hip_alloc,
    .release = hip_release,
    .symbol = hip_symbol,
    .write = hip_write,
    .read = hip_read,
    .copy = hip_copy,
    .accepts = hip_accepts,
    .load = hip_load,
    .unload = hip_unload,
    .launch = hip_launch,
    .sync = hip_sync,
    .timer_start = hip_timer_start,
    .timer_stop = hip_timer_stop,
};
