/* harness.c -- the execution tests' shared plumbing (see harness.h). */
#include "harness.h"

#include <dlfcn.h>
#include <string.h>

#include "../unit/fake_libamdhip64.h"

int passed, failed;
dsv4rt_context *ctx;
dsv4_rng rng;

dsv4rt_buffer *dev(const void *host, size_t n)
{
  dsv4rt_buffer *b = NULL;
  if (dsv4rt_buffer_create(ctx, n ? n : 16, &b) || (host && n && dsv4rt_buffer_write(b, 0, host, n))) {
    printf("FAIL: device buffer of %zu bytes: %s\n", n, dsv4rt_last_error(ctx));
    exit(1);
  }
  return b;
}

float rnd01(void) { return (float)(dsv4_rng_next(&rng) >> 40) / (float)(1 << 24); }

int harness_open(const char *backend)
{
  dsv4rt_backend be = !strcmp(backend, "cuda")  ? DSV4RT_BACKEND_CUDA
                      : !strcmp(backend, "hip") ? DSV4RT_BACKEND_HIP
                                                : DSV4RT_BACKEND_OPENCL;
  dsv4rt_status s = dsv4rt_context_create(be, 0, &ctx);
  if (s == DSV4RT_ERR_NO_BACKEND) {
    printf("SKIPPED: no %s device: %s\n", backend, dsv4rt_last_error(NULL));
    return 77;
  }
  if (s) {
    printf("FAIL: context: %s\n", dsv4rt_last_error(NULL));
    return 1;
  }
  rng.s = dsv4_check_seed();
  printf("device: %s\nseed: DSV4_SEED=%llu\n", dsv4rt_device_name(ctx), (unsigned long long)rng.s);
  return 0;
}

/* The fake HIP runtime's entry point sym, when the context runs on it. */
static void *fake_hip(const char *sym)
{
  const char *lib = getenv("DSV4RT_HIP_LIBRARY");
  if (!ctx || dsv4rt_context_backend(ctx) != DSV4RT_BACKEND_HIP || !lib || !*lib)
    return NULL;
  void *h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD); /* the copy libdsv4rt opened */
  return h ? dlsym(h, sym) : NULL;
}

int harness_launches(void)
{
  fake_hip_launch_count_fn f = (fake_hip_launch_count_fn)fake_hip("fake_hip_launch_count");
  return f ? f() : -1;
}

int harness_fake_violations(char *why, size_t n)
{
  fake_hip_violations_fn f = (fake_hip_violations_fn)fake_hip("fake_hip_violations");
  return f ? f(why, n) : 0;
}

int harness_kernel(const dsv4rt_bundle *b, int e, const char *op, kern *k)
{
  const char *kop;
  if (!dsv4rt_bundle_entry_is_first(b, e) || dsv4rt_bundle_entry(b, e, &k->name, &kop, NULL, NULL) || strcmp(kop, op))
    return 0;
  int runs = dsv4rt_bundle_kernel_runs(b, k->name);
  if (!runs) {
    printf("SKIPPED: kernel %s has no code this device runs\n", k->name);
    return 0;
  }
  dsv4rt_bundle_entry_layout(b, e, &k->L);
  dsv4rt_bundle_entry_info(b, e, &k->info);
  return 1;
}

int harness_bundle(const char *path, dsv4rt_bundle **out)
{
  if (!dsv4rt_bundle_open(ctx, path, out))
    return 0;
  printf("FAIL: %s: %s\n", path, dsv4rt_last_error(ctx));
  return 1;
}

int harness_finish(void)
{
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
