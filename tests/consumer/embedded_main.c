/* A program whose kernels are compiled into it (dsv4c --emit c: the bundle
 * as C in embedded_kernels.c, embedded_kernels.h), so it reads no bundle
 * file: it gathers cache rows with the embedded BF16 gather, through the
 * generated launcher that names it, and checks them against the host.
 *   usage: embedded_main [opencl|cuda]   (default opencl; 77: no device) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "embedded_kernels.h"

enum { NB = 2, BS = 64, DIM = 512, ROW = 1024, STRIDE = 65536, N = 8 };

int main(int argc, char **argv)
{
  int cuda = argc > 1 && !strcmp(argv[1], "cuda");
  dsv4rt_context *ctx;
  if (dsv4rt_context_create(cuda ? DSV4RT_BACKEND_CUDA : DSV4RT_BACKEND_OPENCL, 0, &ctx)) {
    printf("no %s device: %s\n", cuda ? "CUDA" : "OpenCL", dsv4rt_last_error(NULL));
    return 77;
  }
  int fail = 0;
  dsv4rt_bundle *b = NULL;
  dsv4rt_buffer *cache = NULL, *idx = NULL, *out = NULL;
  unsigned char *host = malloc((size_t)NB * STRIDE), *got = malloc((size_t)N * DIM * 2);
  static const int32_t slots[N] = {0, 5, 63, 64, 127, -1, 70, 5};
  if (!host || !got) {
    printf("FAIL: out of memory\n");
    fail = 1;
    goto done;
  }
  if (embedded_kernels_bundle_size < 32 || memcmp(embedded_kernels_bundle, "DSV4BNDL", 8) ||
      (uintptr_t)embedded_kernels_bundle % 16) {
    printf("FAIL: the embedded bytes are not an aligned bundle\n");
    fail = 1;
    goto done;
  }
  if (embedded_kernels_open(ctx, &b)) {
    printf("FAIL: embedded_kernels_open: %s\n", dsv4rt_last_error(ctx));
    fail = 1;
    goto done;
  }
  if (!dsv4rt_bundle_kernel_runs(b, EMBEDDED_KERNEL_GATHER_BF16)) {
    printf("FAIL: %s does not run on %s\n", EMBEDDED_KERNEL_GATHER_BF16, dsv4rt_device_name(ctx));
    fail = 1;
    goto done;
  }
  /* finite bf16 values: the top halves of floats */
  for (size_t i = 0; i < (size_t)NB * STRIDE / 2; i++) {
    float f = (float)((int)(i * 7919u % 2001u) - 1000) / 37.0f;
    uint32_t u;
    memcpy(&u, &f, 4);
    host[2 * i] = (unsigned char)(u >> 16), host[2 * i + 1] = (unsigned char)(u >> 24);
  }
  memset(got, 0xAA, (size_t)N * DIM * 2);
  if (dsv4rt_buffer_create(ctx, (size_t)NB * STRIDE, &cache) || dsv4rt_buffer_create(ctx, sizeof slots, &idx) ||
      dsv4rt_buffer_create(ctx, (size_t)N * DIM * 2, &out) ||
      dsv4rt_buffer_write(cache, 0, host, (size_t)NB * STRIDE) || dsv4rt_buffer_write(idx, 0, slots, sizeof slots) ||
      dsv4rt_buffer_write(out, 0, got, (size_t)N * DIM * 2)) {
    printf("FAIL: buffers: %s\n", dsv4rt_last_error(ctx));
    fail = 1;
    goto done;
  }
  dsv4rt_dequant_gather_args a = {.out = out, .cache = cache, .indices = idx, .n = N, .num_blocks = NB,
                                  .block_size = BS, .block_stride = STRIDE};
  if (embedded_gather_bf16(b, &a, NULL) || dsv4rt_synchronize(ctx) ||
      dsv4rt_buffer_read(out, 0, got, (size_t)N * DIM * 2)) {
    printf("FAIL: embedded_gather_bf16: %s\n", dsv4rt_last_error(ctx));
    fail = 1;
    goto done;
  }
  for (int i = 0; i < N; i++) {
    unsigned char want[DIM * 2];
    if (slots[i] < 0)
      memset(want, 0, sizeof want); /* a negative index gives a zero row */
    else
      memcpy(want, host + (size_t)(slots[i] / BS) * STRIDE + (size_t)(slots[i] % BS) * ROW, sizeof want);
    if (memcmp(want, got + (size_t)i * DIM * 2, sizeof want)) {
      printf("FAIL: row %d (slot %d) differs from the cache row\n", i, (int)slots[i]);
      fail = 1;
    }
  }
  if (!fail)
    printf("%s on %s, from the %zu embedded bytes: %d rows as expected\n", EMBEDDED_KERNEL_GATHER_BF16,
           dsv4rt_device_name(ctx), embedded_kernels_bundle_size, N);
done:
  dsv4rt_buffer_destroy(out);
  dsv4rt_buffer_destroy(idx);
  dsv4rt_buffer_destroy(cache);
  dsv4rt_bundle_destroy(b);
  dsv4rt_context_destroy(ctx);
  free(host);
  free(got);
  return fail;
}
