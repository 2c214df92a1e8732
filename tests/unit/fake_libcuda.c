/* fake_libcuda.c -- a stand-in libcuda for test_faults, loaded through
 * DSV4RT_CUDA_LIBRARY: it exports every driver entry point libdsv4rt looks
 * up, so the runtime gets past its symbol checks, and reports the driver
 * version in DSV4_FAKE_CUDA_VERSION (default 11080: CUDA 11.8) and no
 * device.  That is how the "driver too old" and "driver without a device"
 * paths run on machines without an NVIDIA driver.  Nothing else is
 * implemented: every other entry point fails with CUDA_ERROR_NOT_SUPPORTED. */
#include <stdlib.h>

#define FAKE_EXPORT __attribute__((visibility("default")))

enum { CUDA_ERROR_NO_DEVICE = 100, CUDA_ERROR_NOT_SUPPORTED = 801 };

FAKE_EXPORT int cuDriverGetVersion(int *v)
{
  const char *e = getenv("DSV4_FAKE_CUDA_VERSION");
  *v = e ? atoi(e) : 11080;
  return 0;
}

FAKE_EXPORT int cuInit(unsigned flags)
{
  (void)flags;
  return CUDA_ERROR_NO_DEVICE;
}

FAKE_EXPORT int cuGetErrorString(int r, const char **s)
{
  *s = r == CUDA_ERROR_NO_DEVICE ? "no CUDA-capable device is detected" : "operation not supported";
  return 0;
}

/* The rest: present, never expected to be called. */
#define FAKE(name) \
  FAKE_EXPORT int name(void) { return CUDA_ERROR_NOT_SUPPORTED; }
FAKE(cuDeviceGetCount)
FAKE(cuDeviceGet)
FAKE(cuDeviceGetName)
FAKE(cuDeviceGetAttribute)
FAKE(cuDevicePrimaryCtxRetain)
FAKE(cuDevicePrimaryCtxRelease_v2)
FAKE(cuCtxSetCurrent)
FAKE(cuCtxSynchronize)
FAKE(cuMemAlloc_v2)
FAKE(cuMemFree_v2)
FAKE(cuMemcpyHtoD_v2)
FAKE(cuMemcpyDtoH_v2)
FAKE(cuMemcpyDtoDAsync_v2)
FAKE(cuModuleLoadDataEx)
FAKE(cuModuleGetFunction)
FAKE(cuModuleUnload)
FAKE(cuFuncSetAttribute)
FAKE(cuLaunchKernel)
FAKE(cuEventCreate)
FAKE(cuEventRecord)
FAKE(cuEventSynchronize)
FAKE(cuEventElapsedTime)
FAKE(cuEventDestroy_v2)
