/* opencl.c -- the OpenCL backend through a dlopen'd libOpenCL.so.1 (the ICD
 * loader; DSV4RT_OPENCL_LIBRARY names another, read at context creation).
 * A SPIR-V entry is loaded as IL where the device takes SPIR-V
 * (CL_DEVICE_IL_VERSION), else as its SPIR 1.2 bitcode fallback where the
 * device has cl_khr_spir (PoCL 3.1, DESIGN.md).  An entry whose SPIR-V
 * requires a sub-group size (its SubgroupSize execution mode, read from the
 * code) runs only where the device offers that size
 * (cl_intel_required_subgroup_size's CL_DEVICE_SUB_GROUP_SIZES_INTEL), or
 * from a SPIR 1.2 fallback that emulates its sub-groups
 * (DSV4_ENTRY_SUBGROUPS_EMULATED); any other is refused before anything is
 * built, saying why.  Types and constants are
 * declared here from the OpenCL 1.2 / 2.1 specification.  Every failure
 * says what failed, with the error's name; a failed allocation or kernel
 * build leaves the context usable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "code_check.h"
#include "rt.h"

typedef int32_t cl_int;
typedef uint32_t cl_uint;
typedef uint64_t cl_ulong;
typedef uint64_t cl_bitfield;
typedef struct _cl_platform_id *cl_platform_id;
typedef struct _cl_device_id *cl_device_id;
typedef struct _cl_context *cl_context;
typedef struct _cl_command_queue *cl_command_queue;
typedef struct _cl_mem *cl_mem;
typedef struct _cl_program *cl_program;
typedef struct _cl_kernel *cl_kernel;
typedef struct _cl_event *cl_event;

enum {
  CL_DEVICE_TYPE_ALL = (int)0xFFFFFFFF,
  CL_DEVICE_NAME = 0x102B,
  CL_DEVICE_VERSION = 0x102F,
  CL_DEVICE_MAX_COMPUTE_UNITS = 0x1002,
  CL_DEVICE_MAX_WORK_GROUP_SIZE = 0x1004,
  CL_DEVICE_EXTENSIONS = 0x1030,
  CL_DEVICE_IL_VERSION = 0x105B,
  CL_DEVICE_SUB_GROUP_SIZES_INTEL = 0x4108, /* cl_intel_required_subgroup_size: size_t[] */
  CL_PLATFORM_NAME = 0x0902,
  CL_MEM_READ_WRITE = 1,
  CL_QUEUE_PROFILING_ENABLE = 2,
  CL_PROGRAM_BUILD_LOG = 0x1183,
  CL_PROFILING_COMMAND_END = 0x1283,
};

#define CL_FUNCS(F)                                                                                              \
  F(clGetPlatformIDs, cl_int, (cl_uint, cl_platform_id *, cl_uint *))                                            \
  F(clGetPlatformInfo, cl_int, (cl_platform_id, cl_uint, size_t, void *, size_t *))                              \
  F(clGetDeviceIDs, cl_int, (cl_platform_id, cl_bitfield, cl_uint, cl_device_id *, cl_uint *))                   \
  F(clGetDeviceInfo, cl_int, (cl_device_id, cl_uint, size_t, void *, size_t *))                                  \
  F(clCreateContext, cl_context, (const intptr_t *, cl_uint, const cl_device_id *, void *, void *, cl_int *))    \
  F(clReleaseContext, cl_int, (cl_context))                                                                      \
  F(clCreateCommandQueue, cl_command_queue, (cl_context, cl_device_id, cl_bitfield, cl_int *))                   \
  F(clReleaseCommandQueue, cl_int, (cl_command_queue))                                                           \
  F(clCreateBuffer, cl_mem, (cl_context, cl_bitfield, size_t, void *, cl_int *))                                 \
  F(clReleaseMemObject, cl_int, (cl_mem))                                                                        \
  F(clEnqueueWriteBuffer, cl_int,                                                                                \
    (cl_command_queue, cl_mem, cl_uint, size_t, size_t, const void *, cl_uint, const cl_event *, cl_event *))    \
  F(clEnqueueReadBuffer, cl_int,                                                                                 \
    (cl_command_queue, cl_mem, cl_uint, size_t, size_t, void *, cl_uint, const cl_event *, cl_event *))          \
  F(clEnqueueCopyBuffer, cl_int,                                                                                 \
    (cl_command_queue, cl_mem, cl_mem, size_t, size_t, size_t, cl_uint, const cl_event *, cl_event *))           \
  F(clCreateProgramWithBinary, cl_program,                                                                       \
    (cl_context, cl_uint, const cl_device_id *, const size_t *, const unsigned char **, cl_int *, cl_int *))     \
  F(clBuildProgram, cl_int, (cl_program, cl_uint, const cl_device_id *, const char *, void *, void *))           \
  F(clGetProgramBuildInfo, cl_int, (cl_program, cl_device_id, cl_uint, size_t, void *, size_t *))                \
  F(clReleaseProgram, cl_int, (cl_program))                                                                      \
  F(clCreateKernel, cl_kernel, (cl_program, const char *, cl_int *))                                             \
  F(clReleaseKernel, cl_int, (cl_kernel))                                                                        \
  F(clSetKernelArg, cl_int, (cl_kernel, cl_uint, size_t, const void *))                                          \
  F(clEnqueueNDRangeKernel, cl_int,                                                                              \
    (cl_command_queue, cl_kernel, cl_uint, const size_t *, const size_t *, const size_t *, cl_uint,              \
     const cl_event *, cl_event *))                                                                              \
  F(clEnqueueMarkerWithWaitList, cl_int, (cl_command_queue, cl_uint, const cl_event *, cl_event *))              \
  F(clGetEventProfilingInfo, cl_int, (cl_event, cl_uint, size_t, void *, size_t *))                              \
  F(clWaitForEvents, cl_int, (cl_uint, const cl_event *))                                                        \
  F(clReleaseEvent, cl_int, (cl_event))                                                                          \
  F(clFinish, cl_int, (cl_command_queue))

typedef cl_program (*create_with_il_fn)(cl_context, const void *, size_t, cl_int *);

typedef struct {
  void *lib;
#define F(name, ret, args) ret(*name) args;
  CL_FUNCS(F)
#undef F
  create_with_il_fn clCreateProgramWithIL; /* OpenCL 2.1+, may be absent */
  cl_device_id dev;
  cl_context cx;
  cl_command_queue q;
  int takes_il, takes_spir;
  size_t max_group; /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
  size_t sg_sizes[16]; /* the sub-group sizes a kernel may require here (none without the Intel extension) */
  int n_sg_sizes;
  cl_event t0;
} cl_state;

#define S(ctx) ((cl_state *)(ctx)->state)

/* The name of an OpenCL error code (the common ones), or "". */
static const char *cl_error_name(cl_int r)
{
  switch (r) {
  case -1: return " (CL_DEVICE_NOT_FOUND)";
  case -2: return " (CL_DEVICE_NOT_AVAILABLE)";
  case -4: return " (CL_MEM_OBJECT_ALLOCATION_FAILURE)";
  case -5: return " (CL_OUT_OF_RESOURCES)";
  case -6: return " (CL_OUT_OF_HOST_MEMORY)";
  case -11: return " (CL_BUILD_PROGRAM_FAILURE)";
  case -30: return " (CL_INVALID_VALUE)";
  case -42: return " (CL_INVALID_BINARY)";
  case -43: return " (CL_INVALID_BUILD_OPTIONS)";
  case -44: return " (CL_INVALID_PROGRAM)";
  case -45: return " (CL_INVALID_PROGRAM_EXECUTABLE)";
  case -46: return " (CL_INVALID_KERNEL_NAME)";
  case -54: return " (CL_INVALID_WORK_GROUP_SIZE)";
  case -61: return " (CL_INVALID_BUFFER_SIZE)";
  case -1001: return " (CL_PLATFORM_NOT_FOUND_KHR)";
  default: return "";
  }
}

static int cl_fail(dsv4rt_context *ctx, cl_int r, dsv4rt_status s, const char *what)
{
  return rt_fail(ctx, s, "OpenCL %s failed: error %d%s", what, (int)r, cl_error_name(r));
}

/* Record a failure to load kernel e's code (it names the kernel). */
static int cl_load_fail(dsv4rt_context *ctx, cl_int r, const dsv4_bundle_entry *e, const char *what)
{
  return rt_fail(ctx, DSV4RT_ERR_BACKEND, "OpenCL %s of kernel %s failed: error %d%s", what, e->name, (int)r,
                 cl_error_name(r));
}

static void ocl_fini(dsv4rt_context *ctx)
{
  cl_state *st = S(ctx);
  if (!st)
    return;
  if (st->t0)
    st->clReleaseEvent(st->t0);
  if (st->q)
    st->clReleaseCommandQueue(st->q);
  if (st->cx)
    st->clReleaseContext(st->cx);
  rt_dlclose(st->lib);
  free(st);
  ctx->state = NULL;
}

/* "name, name, ..." of the first np platforms, into out. */
static void platform_names(cl_state *st, const cl_platform_id *plats, cl_uint np, char *out, size_t size)
{
  size_t len = 0;
  out[0] = 0;
  for (cl_uint p = 0; p < np && len + 2 < size; p++) {
    char name[128] = "";
    st->clGetPlatformInfo(plats[p], CL_PLATFORM_NAME, sizeof name - 1, name, NULL);
    len += (size_t)snprintf(out + len, size - len, "%s%s", p ? ", " : "", name[0] ? name : "(unnamed)");
  }
}

/* Device number `device` counting across all platforms. */
static int pick_device(dsv4rt_context *ctx, int device, cl_platform_id *plat_out)
{
  cl_state *st = S(ctx);
  cl_platform_id plats[16];
  cl_uint np = 0;
  cl_int r = st->clGetPlatformIDs(16, plats, &np);
  if (r || np == 0)
    return rt_fail(ctx, DSV4RT_ERR_NO_BACKEND,
                   "no OpenCL platform (error %d%s; is an ICD such as pocl-opencl-icd installed?)", (int)r,
                   cl_error_name(r));
  if (np > 16)
    np = 16;
  int seen = 0;
  for (cl_uint p = 0; p < np; p++) {
    cl_device_id devs[64];
    cl_uint nd = 0;
    if (st->clGetDeviceIDs(plats[p], (cl_bitfield)(cl_uint)CL_DEVICE_TYPE_ALL, 64, devs, &nd) || nd == 0)
      continue;
    if (device < seen + (int)nd) {
      st->dev = devs[device - seen];
      *plat_out = plats[p];
      return 0;
    }
    seen += (int)nd;
  }
  char names[256];
  platform_names(st, plats, np, names, sizeof names);
  if (seen == 0)
    return rt_fail(ctx, DSV4RT_ERR_NO_BACKEND, "OpenCL: no device on %u platform%s (%s)", (unsigned)np,
                   np == 1 ? "" : "s", names);
  return rt_fail(ctx, DSV4RT_ERR_NO_BACKEND, "OpenCL device %d requested, %d present (%s)", device, seen, names);
}

/* Fail context set-up with status s and the message already on ctx,
 * after freeing the backend's state (which may overwrite it). */
static int ocl_init_fail(dsv4rt_context *ctx, int s)
{
  char m[sizeof ctx->err];
  snprintf(m, sizeof m, "%s", ctx->err);
  ocl_fini(ctx);
  return rt_fail(ctx, (dsv4rt_status)s, "%s", m);
}

/* Open the ICD loader (DSV4RT_OPENCL_LIBRARY, if set, instead of
 * libOpenCL.so.1) and its entry points; 0 or a status. */
static int ocl_open(dsv4rt_context *ctx)
{
  static const char *const names[] = {"libOpenCL.so.1", "libOpenCL.so", NULL};
  cl_state *st = S(ctx);
  const char *env = getenv("DSV4RT_OPENCL_LIBRARY");
  const char *const chosen[] = {env, NULL};
  const char *lib = env && *env ? env : names[0];
  st->lib = rt_dlopen(env && *env ? chosen : names);
  if (!st->lib)
    return rt_fail(ctx, DSV4RT_ERR_NO_BACKEND, "%s not found or not loadable%s", lib,
                   env && *env ? " (DSV4RT_OPENCL_LIBRARY)" : " (install ocl-icd-libopencl1 and an ICD)");
#define F(name, ret, args)                                                                              \
  st->name = (ret(*) args)rt_dlsym(st->lib, #name);                                                     \
  if (!st->name)                                                                                        \
    return rt_fail(ctx, DSV4RT_ERR_NO_BACKEND, "%s lacks %s (an OpenCL older than 1.2)", lib, #name);
  CL_FUNCS(F)
#undef F
  return 0;
}

static int ocl_init(dsv4rt_context *ctx, int device)
{
  cl_state *st = calloc(1, sizeof *st);
  if (!st)
    return rt_fail(ctx, DSV4RT_ERR_OUT_OF_MEMORY, "out of host memory");
  ctx->state = st;
  int rc = ocl_open(ctx);
  if (rc)
    return ocl_init_fail(ctx, rc);
  st->clCreateProgramWithIL = (create_with_il_fn)rt_dlsym(st->lib, "clCreateProgramWithIL");
  cl_platform_id plat = NULL;
  if ((rc = pick_device(ctx, device, &plat)))
    return ocl_init_fail(ctx, rc);
  char name[128] = "", ver[128] = "", pname[128] = "", il[256] = "";
  char *ext = calloc(1, 16384);
  if (!ext) {
    rt_fail(ctx, DSV4RT_ERR_OUT_OF_MEMORY, "out of host memory");
    return ocl_init_fail(ctx, DSV4RT_ERR_OUT_OF_MEMORY);
  }
  st->clGetDeviceInfo(st->dev, CL_DEVICE_NAME, sizeof name, name, NULL);
  st->clGetDeviceInfo(st->dev, CL_DEVICE_VERSION, sizeof ver, ver, NULL);
  cl_uint units = 1;
  st->clGetDeviceInfo(st->dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, NULL);
  ctx->units = (int)units;
  st->max_group = 0;
  st->clGetDeviceInfo(st->dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof st->max_group, &st->max_group, NULL);
  st->clGetDeviceInfo(st->dev, CL_DEVICE_EXTENSIONS, 16384 - 1, ext, NULL);
  st->clGetPlatformInfo(plat, CL_PLATFORM_NAME, sizeof pname, pname, NULL);
  if (st->clGetDeviceInfo(st->dev, CL_DEVICE_IL_VERSION, sizeof il, il, NULL))
    il[0] = 0;
  const char *force = getenv("DSV4RT_OPENCL_SPIR");
  st->takes_il = st->clCreateProgramWithIL && strstr(il, "SPIR-V") && !(force && *force == '1');
  st->takes_spir = strstr(ext, "cl_khr_spir") != NULL;
  size_t sgb = 0;
  if (strstr(ext, "cl_intel_required_subgroup_size") &&
      !st->clGetDeviceInfo(st->dev, CL_DEVICE_SUB_GROUP_SIZES_INTEL, sizeof st->sg_sizes, st->sg_sizes, &sgb))
    st->n_sg_sizes = (int)(sgb / sizeof(size_t) < 16 ? sgb / sizeof(size_t) : 16);
  free(ext);
  cl_int r = 0;
  st->cx = st->clCreateContext(NULL, 1, &st->dev, NULL, NULL, &r);
  if (!r)
    st->q = st->clCreateCommandQueue(st->cx, st->dev, CL_QUEUE_PROFILING_ENABLE, &r);
  if (r) {
    cl_fail(ctx, r, DSV4RT_ERR_NO_BACKEND, "context set-up");
    return ocl_init_fail(ctx, DSV4RT_ERR_NO_BACKEND);
  }
  snprintf(ctx->device, sizeof ctx->device, "%s (%s, %s; takes %s)", name, pname, ver,
           st->takes_il ? "SPIR-V" : st->takes_spir ? "SPIR 1.2" : "neither SPIR-V nor SPIR");
  return 0;
}

static int ocl_alloc(dsv4rt_context *ctx, size_t n, uint64_t *native)
{
  cl_int r = 0;
  cl_mem m = S(ctx)->clCreateBuffer(S(ctx)->cx, CL_MEM_READ_WRITE, n, NULL, &r);
  if (r || !m)
    return rt_fail(ctx, DSV4RT_ERR_OUT_OF_MEMORY, "OpenCL clCreateBuffer of %zu bytes failed: error %d%s", n, (int)r,
                   cl_error_name(r));
  *native = (uint64_t)(uintptr_t)m;
  return 0;
}

static void ocl_release(dsv4rt_context *ctx, uint64_t native) { S(ctx)->clReleaseMemObject((cl_mem)(uintptr_t)native); }

static int ocl_write(dsv4rt_context *ctx, uint64_t native, size_t off, const void *src, size_t n)
{
  cl_int r = S(ctx)->clEnqueueWriteBuffer(S(ctx)->q, (cl_mem)(uintptr_t)native, 1, off, n, src, 0, NULL, NULL);
  return r ? cl_fail(ctx, r, DSV4RT_ERR_BACKEND, "clEnqueueWriteBuffer") : 0;
}

static int ocl_read(dsv4rt_context *ctx, uint64_t native, size_t off, void *dst, size_t n)
{
  cl_int r = S(ctx)->clEnqueueReadBuffer(S(ctx)->q, (cl_mem)(uintptr_t)native, 1, off, n, dst, 0, NULL, NULL);
  return r ? cl_fail(ctx, r, DSV4RT_ERR_BACKEND, "clEnqueueReadBuffer") : 0;
}

static int ocl_copy(dsv4rt_context *ctx, uint64_t dst, uint64_t src, size_t n, int wait)
{
  cl_int r = S(ctx)->clEnqueueCopyBuffer(S(ctx)->q, (cl_mem)(uintptr_t)src, (cl_mem)(uintptr_t)dst, 0, 0, n, 0,
                                         NULL, NULL);
  if (!r && wait)
    r = S(ctx)->clFinish(S(ctx)->q);
  return r ? cl_fail(ctx, r, DSV4RT_ERR_BACKEND, "clEnqueueCopyBuffer") : 0;
}

/* 1 if the device offers sub-groups of `size` for a kernel to require. */
static int offers_subgroups(const cl_state *st, uint32_t size)
{
  for (int i = 0; i < st->n_sg_sizes; i++)
    if (st->sg_sizes[i] == size)
      return 1;
  return 0;
}

/* 0 if entry e's code gets the sub-group size its SPIR-V requires (none,
 * the device's, or the fallback's emulation where the SPIR path is taken),
 * else 1 with why. */
static int subgroups_missing(const cl_state *st, const dsv4_bundle_entry *e, const uint8_t *code, char *why,
                             size_t n)
{
  uint32_t size = rt_spirv_subgroup_size(code, e->code_len);
  if (!size || offers_subgroups(st, size) || (!st->takes_il && (e->flags & DSV4_ENTRY_SUBGROUPS_EMULATED)))
    return 0;
  char sizes[96] = "";
  for (int i = 0, len = 0; i < st->n_sg_sizes && len < (int)sizeof sizes - 8; i++)
    len += snprintf(sizes + len, sizeof sizes - (size_t)len, "%s%zu", i ? ", " : "", st->sg_sizes[i]);
  if (why && n)
    snprintf(why, n,
             "kernel %s requires sub-groups of %u (its SPIR-V's SubgroupSize), which this device does not offer "
             "(%s%s)%s", e->name, size, st->n_sg_sizes ? "its sizes: " : "no cl_intel_required_subgroup_size",
             sizes, e->flags & DSV4_ENTRY_SUBGROUPS_EMULATED ? "; its emulating SPIR 1.2 fallback is for devices "
                                                                "that take SPIR, not SPIR-V" : "");
  return 1;
}

/* A SPIR-V entry whose launch record fits the device: work-group size,
 * no dynamic local memory (it would be an extra kernel argument: none
 * asked yet) and no clusters; and whose code gets its sub-group size. */
static int ocl_accepts(dsv4rt_context *ctx, const dsv4_bundle_entry *e, const uint8_t *code, char *why, size_t n)
{
  size_t mg = S(ctx)->max_group ? S(ctx)->max_group : 1024;
  return e->target == 2 && e->launch.shared_bytes == 0 && e->launch.cluster == 1 && e->launch.threads <= mg &&
         e->launch.second_threads <= mg && (S(ctx)->takes_il || (S(ctx)->takes_spir && e->aux_len)) &&
         !subgroups_missing(S(ctx), e, code, why, n);
}

/* Keep the first n lines of a build log, joined by spaces, trailing blanks dropped. */
static void first_lines(char *log, int n)
{
  char *p = log;
  for (int line = 1; *p; p++)
    if (*p == '\n') {
      if (line++ == n || !p[1]) {
        *p = 0;
        break;
      }
      *p = ' '; /* one line in the message */
    }
  size_t len = strlen(log);
  while (len && (log[len - 1] == ' ' || log[len - 1] == '\r' || log[len - 1] == '\n'))
    log[--len] = 0;
}

/* A loaded program and the second kernel taken from it (ocl_symbol), so
 * that unloading the module releases both. */
typedef struct {
  cl_program p;
  cl_kernel second;
} ocl_module;

static int ocl_load(dsv4rt_context *ctx, const dsv4_bundle_entry *e, const uint8_t *code, const uint8_t *aux,
                    void **module, void **kernel)
{
  cl_state *st = S(ctx);
  cl_int r = 0;
  cl_program p;
  const char *opts = "";
  char why[512];
  if (subgroups_missing(st, e, code, why, sizeof why)) /* accepts() refused it: never handed to the driver */
    return rt_fail(ctx, DSV4RT_ERR_NO_KERNEL, "OpenCL: %s", why);
  if (st->takes_il)
    p = st->clCreateProgramWithIL(st->cx, code, e->code_len, &r);
  else {
    size_t n = e->aux_len;
    cl_int bs = 0;
    p = st->clCreateProgramWithBinary(st->cx, 1, &st->dev, &n, &aux, &bs, &r);
    opts = "-x spir -spir-std=1.2";
  }
  if (r || !p) {
    if (p)
      st->clReleaseProgram(p);
    return cl_load_fail(ctx, r, e, st->takes_il ? "clCreateProgramWithIL" : "clCreateProgramWithBinary");
  }
  r = st->clBuildProgram(p, 1, &st->dev, opts, NULL, NULL);
  if (r) {
    char log[2048] = "";
    if (st->clGetProgramBuildInfo(p, st->dev, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL))
      log[0] = 0;
    st->clReleaseProgram(p);
    first_lines(log, 4);
    return rt_fail(ctx, DSV4RT_ERR_BACKEND, "OpenCL build of kernel %s failed: error %d%s; build log: %.700s", e->name,
                   (int)r, cl_error_name(r), log[0] ? log : "(empty)");
  }
  cl_kernel k = st->clCreateKernel(p, e->name, &r);
  ocl_module *m = r || !k ? NULL : calloc(1, sizeof *m);
  if (!m) {
    if (k)
      st->clReleaseKernel(k);
    st->clReleaseProgram(p);
    if (r || !k)
      return cl_load_fail(ctx, r, e, "clCreateKernel");
    return rt_fail(ctx, DSV4RT_ERR_OUT_OF_MEMORY, "out of host memory");
  }
  m->p = p;
  *module = m, *kernel = k;
  return 0;
}

/* The program's second kernel (topk's merge: the portable form's). */
static int ocl_symbol(dsv4rt_context *ctx, void *module, const char *name, void **kernel)
{
  ocl_module *m = module;
  cl_int r = 0;
  cl_kernel k = m->second ? NULL : S(ctx)->clCreateKernel(m->p, name, &r);
  if (r || !k)
    return rt_fail(ctx, DSV4RT_ERR_BACKEND, "OpenCL clCreateKernel of %s failed: error %d%s", name, (int)r,
                   cl_error_name(r));
  *kernel = m->second = k;
  return 0;
}

static void ocl_unload(dsv4rt_context *ctx, void *module, void *kernel)
{
  ocl_module *m = module;
  S(ctx)->clReleaseKernel(kernel);
  if (m->second)
    S(ctx)->clReleaseKernel(m->second);
  S(ctx)->clReleaseProgram(m->p);
  free(m);
}

static int ocl_launch(dsv4rt_context *ctx, void *kernel, const uint32_t grid[3], const uint32_t block[3],
                      uint32_t shared, uint32_t cluster, unsigned flags, const rt_arg *args, int nargs)
{
  (void)shared;  /* always 0: ocl_accepts takes no entry that needs it */
  (void)cluster; /* always 1: CTA pairs are PTX only (the spec checker refuses them elsewhere) */
  (void)flags;   /* an in-order queue: an early launch is an ordinary one */
  cl_state *st = S(ctx);
  for (int i = 0; i < nargs; i++) {
    cl_int r;
    if (args[i].kind == DSV4_ARG_PTR || args[i].kind == DSV4_ARG_IN) {
      cl_mem m = args[i].v.buf ? (cl_mem)(uintptr_t)args[i].v.buf->native : NULL;
      r = st->clSetKernelArg(kernel, (cl_uint)i, sizeof m, &m);
    } else if (args[i].kind == DSV4_ARG_I32)
      r = st->clSetKernelArg(kernel, (cl_uint)i, 4, &args[i].v.i32);
    else if (args[i].kind == DSV4_ARG_F32)
      r = st->clSetKernelArg(kernel, (cl_uint)i, 4, &args[i].v.f32);
    else
      r = st->clSetKernelArg(kernel, (cl_uint)i, 8, &args[i].v.i64);
    if (r)
      return cl_fail(ctx, r, DSV4RT_ERR_BACKEND, "clSetKernelArg");
  }
  size_t global[3], local[3];
  for (int d = 0; d < 3; d++)
    global[d] = (size_t)grid[d] * block[d], local[d] = block[d];
  cl_int r = st->clEnqueueNDRangeKernel(st->q, kernel, 3, NULL, global, local, 0, NULL, NULL);
  return r ? cl_fail(ctx, r, DSV4RT_ERR_BACKEND, "clEnqueueNDRangeKernel") : 0;
}

static int ocl_sync(dsv4rt_context *ctx)
{
  cl_int r = S(ctx)->clFinish(S(ctx)->q);
  return r ? cl_fail(ctx, r, DSV4RT_ERR_BACKEND, "clFinish") : 0;
}

static int ocl_timer_start(dsv4rt_context *ctx)
{
  cl_state *st = S(ctx);
  if (st->t0)
    st->clReleaseEvent(st->t0), st->t0 = NULL;
  cl_int r = st->clEnqueueMarkerWithWaitList(st->q, 0, NULL, &st->t0);
  return r ? cl_fail(ctx, r, DSV4RT_ERR_BACKEND, "clEnqueueMarkerWithWaitList") : 0;
}

static int ocl_timer_stop(dsv4rt_context *ctx, double *ms)
{
  cl_state *st = S(ctx);
  cl_event t1 = NULL;
  cl_ulong a = 0, b = 0;
  if (!st->t0)
    return rt_fail(ctx, DSV4RT_ERR_INVALID_ARG, "dsv4rt_timer_stop without dsv4rt_timer_start");
  cl_int r = st->clEnqueueMarkerWithWaitList(st->q, 0, NULL, &t1);
  if (!r)
    r = st->clWaitForEvents(1, &t1);
  if (!r)
    r = st->clGetEventProfilingInfo(st->t0, CL_PROFILING_COMMAND_END, sizeof a, &a, NULL);
  if (!r)
    r = st->clGetEventProfilingInfo(t1, CL_PROFILING_COMMAND_END, sizeof b, &b, NULL);
  if (t1)
    st->clReleaseEvent(t1);
  *ms = (double)(b - a) * 1e-6;
  return r ? cl_fail(ctx, r, DSV4RT_ERR_BACKEND, "event profiling") : 0;
}

const rt_backend rt_opencl_backend = {
    .kind = DSV4RT_BACKEND_OPENCL,
    .name = "opencl",
    .init = ocl_init,
    .fini = ocl_fini,
    .alloc = ocl_alloc,
    .release = ocl_release,
    .write = ocl_write,
    .read = ocl_read,
    .copy = ocl_copy,
    .accepts = ocl_accepts,
    .load = ocl_load,
    .unload = ocl_unload,
    .symbol = ocl_symbol,
    .launch = ocl_launch,
    .sync = ocl_sync,
    .timer_start = ocl_timer_start,
    .timer_stop = ocl_timer_stop,
};
