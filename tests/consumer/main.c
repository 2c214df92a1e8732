/* Opens the bundle built at this project's build time and lists it. */
#include <dsv4rt.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
  dsv4rt_context *ctx;
  if (dsv4rt_context_create(DSV4RT_BACKEND_OPENCL, 0, &ctx)) {
    printf("no OpenCL device: %s\n", dsv4rt_last_error(NULL));
    return 77;
  }
  dsv4rt_bundle *b;
  if (dsv4rt_bundle_open(ctx, BUNDLE, &b)) {
    printf("FAIL: %s\n", dsv4rt_last_error(ctx));
    return 1;
  }
  int n = dsv4rt_bundle_count(b), ptx = 0, spirv = 0;
  for (int i = 0; i < n; i++) {
    const char *name, *op, *target, *arch;
    dsv4rt_bundle_entry(b, i, &name, &op, &target, &arch);
    printf("%s %s %s %s\n", name, op, target, arch);
    ptx += !strcmp(target, "ptx"), spirv += !strcmp(target, "spirv");
  }
  dsv4rt_bundle_destroy(b);
  dsv4rt_context_destroy(ctx);
  /* TARGETS spirv ptx: entries for those targets only, every portable kernel
   * for both (the matrix kernels are PTX only) */
  return n > 0 && spirv > 0 && ptx >= spirv && ptx + spirv == n ? 0 : 1;
}
