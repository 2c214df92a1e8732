/* cuda.c -- the CUDA backend through the driver API of a dlopen'd
 * libcuda.so.1 (DSV4RT_CUDA_LIBRARY names another, read at context
 * creation).  No CUDA header or library is needed to build; the few types
 * and constants used are declared here from the driver API reference.
 * Symbols are loaded once per context and checked at init (no asserts);
 * a driver older than CUDA 12 is refused there, since the PTX dsv4c emits
 * (ISA 7.4 for sm_80, 8.4 for sm_89 / sm_90a) and the launches (clusters,
 * tensor maps) need one.  A failed allocation or module load leaves the
 * context usable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;

enum {
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
  CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4,
  CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6,
  CU_JIT_ERROR_LOG_BUFFER = 5,
  CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
  CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
};

/* The oldest driver (cuDriverGetVersion's 1000 * major + 10 * minor) the
 * runtime takes: CUDA 12.0.  PTX ISA 8.4 (the sm_89 / sm_90a kernels)
 * needs 12.4: an older 12.x driver takes the other kernels and says so
 * when loading one of those (CUDA_ERROR_UNSUPPORTED_PTX_VERSION). */
#define RT_CUDA_MIN_DRIVER 12000

/* The driver entry points used, by their exported names. */
#define CU_FUNCS(F)                                                                                     \
  F(cuInit, CUresult, (unsigned))                                                                       \
  F(cuDriverGetVersion, CUresult, (int *))                                                              \
  F(cuDeviceGetCount, CUresult, (int *))                                                                \
  F(cuDeviceGet, CUresult, (CUdevice *, int))                                                           \
  F(cuDeviceGetName, CUresult, (char *, int, CUdevice))                                                 \
  F(cuDeviceGetAttribute, CUresult, (int *, int, CUdevice))                                             \
  F(cuDevicePrimaryCtxRetain, CUresult, (CUcontext *, CUdevice))                                        \
  F(cuDevicePrimaryCtxRelease_v2, CUresult, (CUdevice))                                                 \
  F(cuCtxSetCurrent, CUresult, (CUcontext))                                                             \
  F(cuCtxSynchronize, CUresult, (void))                                                                 \
  F(cuMemAlloc_v2, CUresult, (CUdeviceptr *, size_t))                                                   \
  F(cuMemFree_v2, CUresult, (CUdeviceptr))                                                              \
  F(cuMemcpyHtoD_v2, CUresult, (CUdeviceptr, const void *, size_t))                                     \
  F(cuMemcpyDtoH_v2, CUresult, (void *, CUdeviceptr, size_t))                                           \
  F(cuMemcpyDtoDAsync_v2, CUresult, (CUdeviceptr, CUdeviceptr, size_t, CUstream))                       \
  F(cuModuleLoadDataEx, CUresult, (CUmodule *, const void *, unsigned, int *, void **))                 \
  F(cuModuleGetFunction, CUresult, (CUfunction *, CUmodule, const char *))                              \
  F(cuModuleUnload, CUresult, (CUmodule))                                                               \
  F(cuFuncSetAttribute, CUresult, (CUfunction, int, int))                                               \
  F(cuLaunchKernel, CUresult,                                                                           \
    (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void **, \
     void **))                                                                                          \
  F(cuEventCreate, CUresult, (CUevent *, unsigned))                                                     \
  F(cuEventRecord, CUresult, (CUevent, CUstream))                                                       \
  F(cuEventSynchronize, CUresult, (CUevent))                                                            \
  F(cuEventElapsedTime, CUresult, (float *, CUevent, CUevent))                                          \
  F(cuEventDestroy_v2, CUresult, (CUevent))                                                             \
  F(cuGetErrorString, CUresult, (CUresult, const char **))

/* cuLaunchKernelEx's configuration (CUDA 12 driver API): attributes with
 * a 64-byte value union, of which two are used: the cluster's dimensions,
 * and programmatic stream serialization (an int: the grid may start
 * before the one before it in the stream ends, since it waits for it with
 * griddepcontrol.wait itself). */
typedef struct {
  int id;
  char pad[4];
  _Alignas(8) union { /* (8-aligned, as cuda.h's) */
    char bytes[64];
    struct {
      unsigned x, y, z;
    } cluster;
    int programmatic;
  } value;
} CUlaunchAttribute;
typedef struct {
  unsigned grid[3], block[3], shared;
  CUstream stream;
  CUlaunchAttribute *attrs;
  unsigned nattrs;
} CUlaunchConfig;
typedef CUresult (*cu_launch_ex_fn)(const CUlaunchConfig *, CUfunction, void **, void **);

/* cuTensorMapEncodeTiled (CUDA 12 driver API): the enums as ints (data type
 * 0 = uint8; interleave 0 = none; swizzle 2 = 64 B, 3 = 128 B; L2 promotion
 * 3 = 256 B; out-of-bounds fill 0 = zeros). */
typedef CUresult (*cu_tmap_fn)(void *map, int type, unsigned rank, void *base, const uint64_t *dims,
                               const uint64_t *strides, const unsigned *box, const unsigned *estrides, int interleave,
                               int swizzle, int l2, int oob);

typedef struct {
  void *lib;
  cu_launch_ex_fn cuLaunchKernelEx; /* optional (CUDA 12 drivers on): clusters, early launches */
  cu_tmap_fn cuTensorMapEncodeTiled; /* optional (CUDA 12 drivers on): tensor maps */
  CUresult (*cuStreamSynchronize)(CUstream); /* optional: without it a blocking copy waits for the device */
#define F(name, ret, args) ret(*name) args;
  CU_FUNCS(F)
#undef F
  CUdevice dev;
  CUcontext cu;
  int cc;         /* compute capability, e.g. 90 */
  int max_shared; /* opt-in shared memory per CTA */
  int max_threads; /* threads per CTA */
  int version;    /* cuDriverGetVersion: 1000 * major + 10 * minor */
  CUevent ev[2];
} cuda_state;

#define S(ctx) ((cuda_state *)(ctx)->state)
/* The stream dsv4rt_set_stream chose (NULL: the legacy default stream). */
#define STREAM(ctx) ((CUstream)(uintptr_t)(ctx)->stream)

/* Record a driver error as the context's message. */
static int cu_fail(dsv4rt_context *ctx, CUresult r, dsv4rt_status s, const char *what)
{
  const char *msg = NULL;
  cuda_state *st = S(ctx);
  if (st && st->cuGetErrorString)
    st->cuGetErrorString(r, &msg);
  return rt_fail(ctx, s, "CUDA %s failed: error %d (%s)", what, r, msg ? msg : "unknown");
}

static void cu_fini(dsv4rt_context *ctx)
{
  cuda_state *st = S(ctx);
  if (!st)
    return;
  if (st->cu) {
    st->cuCtxSetCurrent(st->cu);
    for (int i = 0; i < 2; i++)
      if (st->ev[i])
        st->cuEventDestroy_v2(st->ev[i]);
    st->cuDevicePrimaryCtxRelease_v2(st->dev);
  }
  rt_dlclose(st->lib);
  free(st);
  ctx->state = NULL;
}

/* Fail context set-up with status s and the message already on ctx,
 * after freeing the backend's state. */
static int cu_init_fail(dsv4rt_context *ctx, int s)
{
  char m[sizeof ctx->err];
  snprintf(m, sizeof m, "%s", ctx->err);
  cu_fini(ctx);
  return rt_fail(ctx, (dsv4rt_status)s, "%s", m);
}

/* Open the driver library (DSV4RT_CUDA_LIBRARY, if set, instead of
 * libcuda.so.1), its entry points, and check its version; 0 or a status. */
static int cu_open(dsv4rt_context *ctx)
{
  static const char *const names[] = {"libcuda.so.1", "libcuda.so", NULL};
  cuda_state *st = S(ctx);
  const char *env = getenv("DSV4RT_CUDA_LIBRARY");
  const char *const chosen[] = {env, NULL};
  const char *lib = env && *env ? env : names[0];
  st->lib = rt_dlopen(env && *env ? chosen : names);
  if (!st->lib)
    return rt_fail(ctx, DSV4RT_ERR_NO_BACKEND, "%s not found or not loadable%s", lib,
                   env && *env ? " (DSV4RT_CUDA_LIBRARY)" : " (no NVIDIA driver)");
#define F(name, ret, args)                                                                                 \
  st->name = (ret(*) args)rt_dlsym(st->lib, #name);                                                        \
  if (!st->name)                                                                                           \
    return rt_fail(ctx, DSV4RT_ERR_NO_BACKEND, "%s lacks %s (a driver older than CUDA 12)", lib, #name);
  CU_FUNCS(F)
#undef F
  st->cuLaunchKernelEx = (cu_launch_ex_fn)rt_dlsym(st->lib, "cuLaunchKernelEx");
  st->cuTensorMapEncodeTiled = (cu_tmap_fn)rt_dlsym(st->lib, "cuTensorMapEncodeTiled");
  st->cuStreamSynchronize = (CUresult(*)(CUstream))rt_dlsym(st->lib, "cuStreamSynchronize");
  int ver = 0;
  CUresult r = st->cuDriverGetVersion(&ver); /* (needs no cuInit) */
  if (r)
    return cu_fail(ctx, r, DSV4RT_ERR_NO_BACKEND, "cuDriverGetVersion");
  if (ver < RT_CUDA_MIN_DRIVER)
    return rt_fail(ctx, DSV4RT_ERR_NO_BACKEND,
                   "the NVIDIA driver supports CUDA %d.%d; dsv4c's PTX needs a CUDA 12.0 driver or later (12.4 for "
                   "the sm_89 / sm_90a kernels): update the driver",
                   ver / 1000, ver % 1000 / 10);
  st->version = ver;
  return 0;
}

static int cu_init(dsv4rt_context *ctx, int device)
{
  cuda_state *st = calloc(1, sizeof *st);
  if (!st)
    return rt_fail(ctx, DSV4RT_ERR_OUT_OF_MEMORY, "out of host memory");
  ctx->state = st;
  int rc = cu_open(ctx);
  if (rc)
    return cu_init_fail(ctx, rc);
  CUresult r;
  int count = 0, ver = st->version;
  if ((r = st->cuInit(0)) || (r = st->cuDeviceGetCount(&count))) {
    cu_fail(ctx, r, DSV4RT_ERR_NO_BACKEND, "initialisation");
    return cu_init_fail(ctx, DSV4RT_ERR_NO_BACKEND);
  }
  if (device >= count) {
    cu_fini(ctx);
    return rt_fail(ctx, DSV4RT_ERR_NO_BACKEND, "CUDA device %d requested, %d present", device, count);
  }
  int maj = 0, min = 0;
  char name[200] = "";
  if ((r = st->cuDeviceGet(&st->dev, device)) || (r = st->cuDeviceGetName(name, sizeof name, st->dev)) ||
      (r = st->cuDeviceGetAttribute(&maj, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, st->dev)) ||
      (r = st->cuDeviceGetAttribute(&min, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, st->dev)) ||
      (r = st->cuDeviceGetAttribute(&st->max_shared, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, st->dev)) ||
      (r = st->cuDeviceGetAttribute(&st->max_threads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, st->dev)) ||
      (r = st->cuDeviceGetAttribute(&ctx->units, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, st->dev)) ||
      (r = st->cuDevicePrimaryCtxRetain(&st->cu, st->dev)) || (r = st->cuCtxSetCurrent(st->cu)) ||
      (r = st->cuEventCreate(&st->ev[0], 0)) || (r = st->cuEventCreate(&st->ev[1], 0))) {
    cu_fail(ctx, r, DSV4RT_ERR_NO_BACKEND, "device set-up");
    return cu_init_fail(ctx, DSV4RT_ERR_NO_BACKEND);
  }
  st->cc = maj * 10 + min;
  ctx->tensor_maps = st->cuTensorMapEncodeTiled && st->cc >= 90;
  snprintf(ctx->device, sizeof ctx->device, "%s (sm_%d, CUDA driver %d.%d)", name, st->cc, ver / 1000,
           ver % 1000 / 10);
  return 0;
}

static int cu_alloc(dsv4rt_context *ctx, size_t n, uint64_t *native)
{
  CUdeviceptr p = 0;
  CUresult r = S(ctx)->cuMemAlloc_v2(&p, n);
  if (r) {
    char what[64];
    snprintf(what, sizeof what, "cuMemAlloc of %zu bytes", n);
    return cu_fail(ctx, r, DSV4RT_ERR_OUT_OF_MEMORY, what);
  }
  *native = p;
  return 0;
}

static void cu_release(dsv4rt_context *ctx, uint64_t native) { S(ctx)->cuMemFree_v2((CUdeviceptr)native); }

/* A blocking copy runs on the legacy default stream, which does not wait
 * for a non-blocking stream's work: with a stream set, wait for it first
 * (dsv4rt_set_stream). */
static CUresult cu_wait_stream(dsv4rt_context *ctx)
{
  if (!ctx->stream)
    return 0;
  return S(ctx)->cuStreamSynchronize ? S(ctx)->cuStreamSynchronize(STREAM(ctx)) : S(ctx)->cuCtxSynchronize();
}

static int cu_write(dsv4rt_context *ctx, uint64_t native, size_t off, const void *src, size_t n)
{
  CUresult r = cu_wait_stream(ctx);
  if (r)
    return cu_fail(ctx, r, DSV4RT_ERR_BACKEND, "cuStreamSynchronize (before a copy)");
  r = S(ctx)->cuMemcpyHtoD_v2((CUdeviceptr)native + off, src, n);
  return r ? cu_fail(ctx, r, DSV4RT_ERR_BACKEND, "cuMemcpyHtoD") : 0;
}

static int cu_read(dsv4rt_context *ctx, uint64_t native, size_t off, void *dst, size_t n)
{
  CUresult r = cu_wait_stream(ctx);
  if (r)
    return cu_fail(ctx, r, DSV4RT_ERR_BACKEND, "cuStreamSynchronize (before a copy)");
  r = S(ctx)->cuMemcpyDtoH_v2(dst, (CUdeviceptr)native + off, n);
  return r ? cu_fail(ctx, r, DSV4RT_ERR_BACKEND, "cuMemcpyDtoH") : 0;
}

static int cu_copy(dsv4rt_context *ctx, uint64_t dst, uint64_t src, size_t n, int wait)
{
  CUresult r = S(ctx)->cuMemcpyDtoDAsync_v2((CUdeviceptr)dst, (CUdeviceptr)src, n, STREAM(ctx));
  if (!r && wait)
    r = S(ctx)->cuCtxSynchronize();
  return r ? cu_fail(ctx, r, DSV4RT_ERR_BACKEND, "cuMemcpyDtoD") : 0;
}

/* PTX for sm_XY runs on capability >= XY; sm_XYa only on exactly XY; and
 * only where the launch record fits the device: its threads and shared
 * memory, and clusters (CTA pairs) only through cuLaunchKernelEx on
 * capability 9.0 and later. */
static int cu_accepts(dsv4rt_context *ctx, const dsv4_bundle_entry *e, const uint8_t *code, char *why, size_t n)
{
  (void)code, (void)why, (void)n; /* PTX asks nothing of the device its arch and launch record do not say */
  int v = 0;
  char suffix = 0;
  if (e->target != 0 || sscanf(e->arch, "sm_%d%c", &v, &suffix) < 1)
    return 0;
  if (e->launch.shared_bytes > (uint32_t)S(ctx)->max_shared || e->launch.threads > (uint32_t)S(ctx)->max_threads ||
      e->launch.second_threads > (uint32_t)S(ctx)->max_threads)
    return 0;
  if (e->launch.cluster > 1 && (!S(ctx)->cuLaunchKernelEx || S(ctx)->cc < 90))
    return 0;
  return suffix == 'a' ? S(ctx)->cc == v : S(ctx)->cc >= v;
}

/* A failure of `what` for kernel e (its name in the message). */
static int cu_kernel_fail(dsv4rt_context *ctx, CUresult r, const dsv4_bundle_entry *e, const char *what)
{
  char w[128];
  snprintf(w, sizeof w, "%s of kernel %s", what, e->name);
  return cu_fail(ctx, r, DSV4RT_ERR_BACKEND, w);
}

/* "ISA x.y" from PTX text's .version directive, into v ("ISA ?" without one). */
static const char *ptx_version(const char *ptx, char v[16])
{
  const char *p = strstr(ptx, ".version ");
  int maj = 0, min = 0;
  if (!p || sscanf(p + 9, "%d.%d", &maj, &min) != 2)
    return "ISA ?";
  snprintf(v, 16, "ISA %d.%d", maj % 100, min % 100);
  return v;
}

static int cu_load(dsv4rt_context *ctx, const dsv4_bundle_entry *e, const uint8_t *code, const uint8_t *aux,
                   void **module, void **kernel)
{
  (void)aux;
  cuda_state *st = S(ctx);
  /* PTX must be NUL-terminated for the JIT: copy it */
  char *ptx = malloc(e->code_len + 1);
  if (!ptx)
    return rt_fail(ctx, DSV4RT_ERR_OUT_OF_MEMORY, "out of host memory");
  memcpy(ptx, code, e->code_len);
  ptx[e->code_len] = 0;
  char log[4096] = "";
  int opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *vals[2] = {log, (void *)(uintptr_t)sizeof log};
  CUmodule m = NULL;
  CUfunction f = NULL;
  CUresult r = st->cuModuleLoadDataEx(&m, ptx, 2, opts, vals);
  if (r) {
    char what[128];
    snprintf(what, sizeof what, "PTX load of kernel %s", e->name);
    cu_fail(ctx, r, DSV4RT_ERR_BACKEND, what);
    size_t l = strlen(ctx->err);
    char isa[16];
    if (r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
      snprintf(ctx->err + l, sizeof ctx->err - l, ": its PTX is %.12s, newer than this CUDA %d.%d driver takes",
               ptx_version(ptx, isa), st->version / 1000, st->version % 1000 / 10);
    else
      snprintf(ctx->err + l, sizeof ctx->err - l, ": %.600s", log[0] ? log : "(no JIT log)");
    free(ptx);
    return DSV4RT_ERR_BACKEND;
  }
  free(ptx);
  r = st->cuModuleGetFunction(&f, m, e->name);
  if (r) {
    st->cuModuleUnload(m);
    return cu_kernel_fail(ctx, r, e, "cuModuleGetFunction");
  }
  /* beyond 48 KiB of shared memory, static and dynamic together, a kernel
   * must opt in to its dynamic part (the static part is the code's: opt in
   * wherever there is a dynamic part) */
  if (e->launch.shared_bytes > 0 &&
      (r = st->cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)e->launch.shared_bytes))) {
    st->cuModuleUnload(m);
    return cu_kernel_fail(ctx, r, e, "cuFuncSetAttribute (dynamic shared memory)");
  }
  *module = m, *kernel = f;
  return 0;
}

static int cu_symbol(dsv4rt_context *ctx, void *module, const char *name, void **kernel)
{
  CUfunction f = NULL;
  CUresult r = S(ctx)->cuModuleGetFunction(&f, (CUmodule)module, name);
  if (r)
    return cu_fail(ctx, r, DSV4RT_ERR_BACKEND, "cuModuleGetFunction");
  *kernel = f;
  return 0;
}

static void cu_unload(dsv4rt_context *ctx, void *module, void *kernel)
{
  (void)kernel;
  S(ctx)->cuModuleUnload(module);
}

static int cu_tensor_map(dsv4rt_context *ctx, uint64_t base, const uint64_t dims[3], const uint64_t strides[2],
                         const uint32_t box[3], int swizzle, uint8_t out[128])
{
  cuda_state *st = S(ctx); /* (called only where ctx->tensor_maps: rt_tensor_map) */
  _Alignas(64) uint8_t map[128];
  unsigned b[3] = {box[0], box[1], box[2]}, one[3] = {1, 1, 1};
  CUresult r = st->cuTensorMapEncodeTiled(map, 0, 3, (void *)(uintptr_t)base, dims, strides, b, one, 0,
                                          swizzle == 128 ? 3 : 2, 3, 0);
  if (r)
    return cu_fail(ctx, r, DSV4RT_ERR_BACKEND, "cuTensorMapEncodeTiled");
  memcpy(out, map, 128);
  return 0;
}

static int cu_launch(dsv4rt_context *ctx, void *kernel, const uint32_t grid[3], const uint32_t block[3],
                     uint32_t shared, uint32_t cluster, unsigned flags, const rt_arg *args, int nargs)
{
  void *params[DSV4_MAX_ARGS];
  CUdeviceptr ptrs[DSV4_MAX_ARGS];
  for (int i = 0; i < nargs; i++) {
    if (args[i].kind == DSV4_ARG_PTR || args[i].kind == DSV4_ARG_IN) {
      ptrs[i] = args[i].v.buf ? (CUdeviceptr)args[i].v.buf->native : 0;
      params[i] = &ptrs[i];
    } else
      params[i] = (void *)&args[i].v; /* i32, i64 and f32 all sit at the union's start */
  }
  /* cu_accepts took no entry that needs clusters where there are none; an
   * early launch where cuLaunchKernelEx is missing is an ordinary one */
  if (cluster > 1 || ((flags & RT_LAUNCH_EARLY) && S(ctx)->cuLaunchKernelEx)) {
    CUlaunchAttribute at[2];
    unsigned n = 0;
    if (cluster > 1)
      at[n++] = (CUlaunchAttribute){.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, .value.cluster = {cluster, 1, 1}};
    if (flags & RT_LAUNCH_EARLY)
      at[n++] =
          (CUlaunchAttribute){.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, .value.programmatic = 1};
    CUlaunchConfig c = {{grid[0], grid[1], grid[2]}, {block[0], block[1], block[2]}, shared, STREAM(ctx), at, n};
    CUresult r = S(ctx)->cuLaunchKernelEx(&c, (CUfunction)kernel, params, NULL);
    return r ? cu_fail(ctx, r, DSV4RT_ERR_BACKEND, "cuLaunchKernelEx") : 0;
  }
  CUresult r = S(ctx)->cuLaunchKernel((CUfunction)kernel, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                                      shared, STREAM(ctx), params, NULL);
  return r ? cu_fail(ctx, r, DSV4RT_ERR_BACKEND, "cuLaunchKernel") : 0;
}

static int cu_sync(dsv4rt_context *ctx)
{
  CUresult r = S(ctx)->cuCtxSynchronize();
  return r ? cu_fail(ctx, r, DSV4RT_ERR_BACKEND, "cuCtxSynchronize (a kernel failed)") : 0;
}

static int cu_timer_start(dsv4rt_context *ctx)
{
  CUresult r = S(ctx)->cuEventRecord(S(ctx)->ev[0], STREAM(ctx));
  return r ? cu_fail(ctx, r, DSV4RT_ERR_BACKEND, "cuEventRecord") : 0;
}

static int cu_timer_stop(dsv4rt_context *ctx, double *ms)
{
  cuda_state *st = S(ctx);
  float f = 0;
  CUresult r = st->cuEventRecord(st->ev[1], STREAM(ctx));
  if (!r)
    r = st->cuEventSynchronize(st->ev[1]);
  if (!r)
    r = st->cuEventElapsedTime(&f, st->ev[0], st->ev[1]);
  *ms = f;
  return r ? cu_fail(ctx, r, DSV4RT_ERR_BACKEND, "event timing") : 0;
}

const rt_backend rt_cuda_backend = {
    .kind = DSV4RT_BACKEND_CUDA,
    .name = "cuda",
    .addresses = 1,
    .init = cu_init,
    .fini = cu_fini,
    .alloc = cu_alloc,
    .release = cu_release,
    .symbol = cu_symbol,
    .write = cu_write,
    .read = cu_read,
    .copy = cu_copy,
    .accepts = cu_accepts,
    .load = cu_load,
    .unload = cu_unload,
    .launch = cu_launch,
    .tensor_map = cu_tensor_map,
    .sync = cu_sync,
    .timer_start = cu_timer_start,
    .timer_stop = cu_timer_stop,
};
