/* test_runtime.c -- libdsv4rt's API contract apart from the kernels: status
 * codes and messages for bad handles, sizes and missing backends. */
#include <stdio.h>
#include <string.h>

#include "dsv4rt.h"
#include "../check.h"

static int passed, failed;


int main(void)
{
  for (int s = 0; s <= DSV4RT_ERR_STALE_TUNING; s++) {
    CHECK(strlen(dsv4rt_status_name((dsv4rt_status)s)) > 1 &&
              strcmp(dsv4rt_status_name((dsv4rt_status)s), "unknown status"),
          "status %d has no name", s);
    for (int t = 0; t < s; t++)
      CHECK(strcmp(dsv4rt_status_name((dsv4rt_status)s), dsv4rt_status_name((dsv4rt_status)t)),
            "statuses %d and %d share a name", t, s);
  }
  CHECK(!strcmp(dsv4rt_status_name((dsv4rt_status)(DSV4RT_ERR_STALE_TUNING + 1)), "unknown status"),
        "a status past the last");
  CHECK(dsv4rt_context_create(DSV4RT_BACKEND_AUTO, 0, NULL) == DSV4RT_ERR_INVALID_ARG, "null out accepted");
  dsv4rt_context *ctx = (dsv4rt_context *)1;
  CHECK(dsv4rt_context_create(DSV4RT_BACKEND_OPENCL, -1, &ctx) == DSV4RT_ERR_INVALID_ARG && ctx == NULL,
        "negative device accepted");
  CHECK(dsv4rt_context_create((dsv4rt_backend)42, 0, &ctx) == DSV4RT_ERR_INVALID_ARG, "unknown backend accepted");
  dsv4rt_status s = dsv4rt_context_create(DSV4RT_BACKEND_OPENCL, 9999, &ctx);
  CHECK(s == DSV4RT_ERR_NO_BACKEND && ctx == NULL && strstr(dsv4rt_last_error(NULL), "9999"),
        "device 9999: status %d, message '%s'", s, dsv4rt_last_error(NULL));
  s = dsv4rt_context_create(DSV4RT_BACKEND_CUDA, 0, &ctx);
  if (s == DSV4RT_OK)
    dsv4rt_context_destroy(ctx);
  else
    CHECK(s == DSV4RT_ERR_NO_BACKEND && strlen(dsv4rt_last_error(NULL)) > 10,
          "no CUDA: status %d, message '%s' (a missing driver must be an error code, not a crash)", s,
          dsv4rt_last_error(NULL));

  if (dsv4rt_context_create(DSV4RT_BACKEND_OPENCL, 0, &ctx)) {
    printf("SKIPPED: no OpenCL device: %s\n", dsv4rt_last_error(NULL));
    return 77;
  }
  dsv4rt_buffer *a = NULL, *b = NULL;
  CHECK(dsv4rt_buffer_create(ctx, 0, &a) == DSV4RT_ERR_OUT_OF_RANGE && a == NULL, "size 0 buffer");
  CHECK(dsv4rt_buffer_create(ctx, 256, &a) == DSV4RT_OK, "buffer: %s", dsv4rt_last_error(ctx));
  CHECK(dsv4rt_buffer_create(ctx, 128, &b) == DSV4RT_OK, "buffer: %s", dsv4rt_last_error(ctx));
  char host[512] = {0};
  CHECK(dsv4rt_buffer_write(a, 200, host, 100) == DSV4RT_ERR_OUT_OF_RANGE && strstr(dsv4rt_last_error(ctx), "256"),
        "write past the end: %s", dsv4rt_last_error(ctx));
  CHECK(dsv4rt_buffer_read(a, 0, NULL, 8) == DSV4RT_ERR_NULL_ARG, "read into NULL");
  CHECK(dsv4rt_buffer_read(a, (size_t)-1, host, 8) == DSV4RT_ERR_OUT_OF_RANGE, "offset overflow");
  CHECK(dsv4rt_buffer_copy(b, a, 200) == DSV4RT_ERR_BUFFER_TOO_SMALL, "copy larger than the destination");
  CHECK(dsv4rt_buffer_copy(a, b, 128) == DSV4RT_OK, "copy: %s", dsv4rt_last_error(ctx));
  CHECK(dsv4rt_buffer_copy(a, a, 64) == DSV4RT_ERR_ALIASING && strstr(dsv4rt_last_error(ctx), "share memory"),
        "a copy onto itself is refused: %s", dsv4rt_last_error(ctx));
  CHECK(dsv4rt_buffer_copy_async(b, b, 8) == DSV4RT_ERR_ALIASING, "an async copy onto itself is refused");
  CHECK(dsv4rt_buffer_size(a) == 256 && dsv4rt_buffer_size(NULL) == 0, "buffer_size");
  dsv4rt_buffer *w = NULL;
  CHECK(dsv4rt_buffer_wrap(ctx, 0, 16, &w) == DSV4RT_ERR_NULL_ARG && w == NULL, "wrap of null memory");
  double ms;
  CHECK(dsv4rt_timer_stop(ctx, NULL) == DSV4RT_ERR_INVALID_ARG, "timer_stop(NULL)");
  CHECK(dsv4rt_timer_start(ctx) == DSV4RT_OK && dsv4rt_timer_stop(ctx, &ms) == DSV4RT_OK && ms >= 0, "timer: %s",
        dsv4rt_last_error(ctx));

  dsv4rt_bundle *bu = (dsv4rt_bundle *)1;
  CHECK(dsv4rt_bundle_open_memory(ctx, host, sizeof host, &bu) == DSV4RT_ERR_BUNDLE_FORMAT && bu == NULL &&
            strstr(dsv4rt_last_error(ctx), "not a dsv4c bundle"),
        "zeros as a bundle: %s", dsv4rt_last_error(ctx));
  CHECK(dsv4rt_bundle_open_memory(ctx, NULL, 64, &bu) == DSV4RT_ERR_BUNDLE_FORMAT, "NULL bundle bytes");
  CHECK(dsv4rt_bundle_count(NULL) == 0, "count(NULL)");
  CHECK(dsv4rt_bundle_entry_runs(NULL, 0) == 0 && dsv4rt_bundle_kernel_runs(NULL, "x") == 0, "runs(NULL)");
  CHECK(dsv4rt_bundle_entry(NULL, 0, NULL, NULL, NULL, NULL) == DSV4RT_ERR_INVALID_ARG, "entry(NULL)");
  dsv4rt_dequant_gather_args ga = {0};
  CHECK(dsv4rt_dequant_gather(NULL, &ga, NULL) == DSV4RT_ERR_NULL_ARG &&
            strstr(dsv4rt_last_error(NULL), "dsv4rt_dequant_gather: bundle"),
        "gather on a NULL bundle: %s", dsv4rt_last_error(NULL));
  CHECK(dsv4rt_paged_gather(NULL, NULL, NULL) == DSV4RT_ERR_NULL_ARG, "paged gather on a NULL bundle");
  CHECK(dsv4rt_buffer_write(NULL, 0, host, 8) == DSV4RT_ERR_NULL_ARG &&
            strstr(dsv4rt_last_error(NULL), "buffer is NULL"),
        "write to a NULL buffer: %s", dsv4rt_last_error(NULL));
  CHECK(dsv4rt_synchronize(NULL) == DSV4RT_ERR_INVALID_ARG, "synchronize(NULL)");
  dsv4rt_buffer_destroy(a);
  dsv4rt_buffer_destroy(b);
  dsv4rt_buffer_destroy(NULL);
  dsv4rt_bundle_destroy(NULL);
  dsv4rt_context_destroy(ctx);
  dsv4rt_context_destroy(NULL);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
