/* test_hip.c -- the HIP backend (runtime/src/hip.c) without an AMD GPU,
 * through the fake runtime tests/unit/fake_libamdhip64.c:
 *
 *   test_hip KERNEL_DIR FAKE_LIBAMDHIP64 FAKE_LIBCUDA
 *
 * KERNEL_DIR holds decode.dsv4b (every op of specs/decode.lua, gfx942
 * among its targets) and the .hsaco files dsv4c wrote beside it.
 *   - set-up faults, each a status and a message naming the cause: no
 *     library, a library that is not HIP, a runtime older than ROCm 5.0, no
 *     device, a device index past the count, device properties of an
 *     unknown layout, a failed event creation (the next creation works);
 *   - the device: its name, processor and wavefront in the description;
 *     buffers through the fake's memory (a failed allocation leaves the
 *     context usable; every allocation freed at the end);
 *   - a launch: the kernel, grid, block and LDS the launch record gives,
 *     the context's stream, and the kernarg block: every argument of the op
 *     (dsv4_abi.h's order) at the offset the code object's metadata gives,
 *     with the value the call passed;
 *   - load and launch failures (a status, the kernel named, the next call
 *     works), a device whose processor the bundle lacks (both named), a
 *     wave32 device, a bundle whose code object's metadata was altered
 *     (refused when it opens). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../check.h"
#include "dsv4_abi.h"
#include "dsv4rt.h"
#include "fake_libamdhip64.h"
#include "hsaco_meta.h"

static int passed, failed;

static int finish(void)
{
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}

static const char *kdir, *fake_path;
static fake_hip_fail_fn fail_next;
static fake_hip_launch_count_fn launch_count;
static fake_hip_launch_at_fn launch_at;
static fake_hip_live_fn live;
static fake_hip_violations_fn violations;

/* Create a HIP context with env var name = value (NULL: unset) on top of
 * the defaults; *st its status, the context or NULL. */
static dsv4rt_context *open_with(const char *lib, const char *name, const char *value, int device,
                                 dsv4rt_status *st)
{
  static const char *const vars[] = {"DSV4_FAKE_HIP_VERSION", "DSV4_FAKE_HIP_DEVICES", "DSV4_FAKE_HIP_ARCH",
                                     "DSV4_FAKE_HIP_WARP", "DSV4_FAKE_HIP_LAYOUT"};
  for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
    unsetenv(vars[i]);
  setenv("DSV4RT_HIP_LIBRARY", lib, 1);
  if (name)
    setenv(name, value, 1);
  dsv4rt_context *ctx = NULL;
  *st = dsv4rt_context_create(DSV4RT_BACKEND_HIP, device, &ctx);
  return ctx;
}

/* A set-up that must fail with NO_BACKEND and a message holding want (and want2). */
static void refused(const char *what, const char *lib, const char *name, const char *value, int device,
                    const char *want, const char *want2)
{
  dsv4rt_status st;
  dsv4rt_context *ctx = open_with(lib, name, value, device, &st);
  const char *m = dsv4rt_last_error(NULL);
  CHECK(st == DSV4RT_ERR_NO_BACKEND && !ctx, "%s: status %d (%s)", what, st, m);
  CHECK(strstr(m, want) && (!want2 || strstr(m, want2)), "%s: message '%s' lacks '%s'%s%s", what, m, want,
        want2 ? " / " : "", want2 ? want2 : "");
  printf("  %-34s %s\n", what, m);
  dsv4rt_context_destroy(ctx);
}

static void test_setup_faults(const char *fake_cuda)
{
  refused("no library", "/nonexistent/libamdhip64.so", NULL, NULL, 0, "not found", "DSV4RT_HIP_LIBRARY");
  refused("not a HIP runtime", fake_cuda, NULL, NULL, 0, "lacks hip", NULL);
  refused("runtime older than ROCm 5.0", fake_path, "DSV4_FAKE_HIP_VERSION", "40500000", 0, "version 4.5",
          "ROCm 5.0");
  refused("no device", fake_path, "DSV4_FAKE_HIP_DEVICES", "0", 0, "no ROCm-capable device", NULL);
  refused("device past the count", fake_path, NULL, NULL, 1, "HIP device 1 requested, 1 present", NULL);
  refused("unknown properties layout", fake_path, "DSV4_FAKE_HIP_LAYOUT", "bad", 0, "layout", NULL);
  fail_next("hipEventCreate", 2, 1);
  refused("failed event creation", fake_path, NULL, NULL, 0, "hipEventCreate", "out of memory");
  /* auto: no CUDA here, the fake's device comes before OpenCL */
  setenv("DSV4RT_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
  dsv4rt_context *ctx = NULL;
  dsv4rt_status st = dsv4rt_context_create(DSV4RT_BACKEND_AUTO, 0, &ctx);
  CHECK(st == DSV4RT_OK && dsv4rt_context_backend(ctx) == DSV4RT_BACKEND_HIP, "auto took %d: %s",
        ctx ? (int)dsv4rt_context_backend(ctx) : -1, dsv4rt_last_error(NULL));
  dsv4rt_context_destroy(ctx);
}

/* Buffers through the fake's memory; a failed allocation leaves the context usable. */
static void test_buffers(dsv4rt_context *ctx)
{
  int before = live();
  dsv4rt_buffer *a = NULL, *b = NULL;
  fail_next("hipMalloc", 2, 0);
  dsv4rt_status st = dsv4rt_buffer_create(ctx, 4096, &a);
  CHECK(st == DSV4RT_ERR_OUT_OF_MEMORY && !a && strstr(dsv4rt_last_error(ctx), "hipMalloc of 4096 bytes"),
        "failed allocation: %d %s", st, dsv4rt_last_error(ctx));
  CHECK(!dsv4rt_buffer_create(ctx, 4096, &a) && !dsv4rt_buffer_create(ctx, 4096, &b), "allocation after: %s",
        dsv4rt_last_error(ctx));
  uint8_t in[4096], out[4096];
  for (int i = 0; i < 4096; i++)
    in[i] = (uint8_t)(i * 7 + 1);
  CHECK(!dsv4rt_buffer_write(a, 0, in, sizeof in) && !dsv4rt_buffer_copy(b, a, sizeof in) &&
            !dsv4rt_buffer_read(b, 0, out, sizeof out) && !memcmp(in, out, sizeof in),
        "write, copy, read back: %s", dsv4rt_last_error(ctx));
  dsv4rt_buffer_destroy(a), dsv4rt_buffer_destroy(b);
  CHECK(live() == before, "allocations left: %d, %d before", live(), before);
}

/* Entry of op `op` for gfx942 in b, its name in *name; -1 when none. */
static int amd_entry(dsv4rt_bundle *b, const char *op, const char **name)
{
  for (int i = 0; i < dsv4rt_bundle_count(b); i++) {
    const char *n, *o, *t, *arch;
    if (!dsv4rt_bundle_entry(b, i, &n, &o, &t, &arch) && !strcmp(o, op) && !strcmp(arch, "gfx942")) {
      *name = n;
      return i;
    }
  }
  return -1;
}

/* The metadata of kernel `name` from the .hsaco dsv4c wrote beside the bundle. */
static int meta_of(const char *name, dsv4_hsaco_kernel *m)
{
  char path[1024], why[256];
  snprintf(path, sizeof path, "%s/%s.hsaco", kdir, name);
  FILE *f = fopen(path, "rb");
  if (!f) {
    CHECK(0, "%s: not readable", path);
    return 1;
  }
  static unsigned char buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  int rc = dsv4_hsaco_kernel_meta(buf, n, name, m, why, sizeof why);
  CHECK(rc == 0, "%s: %s", path, why);
  return rc;
}

/* A dequant_gather launch and the fake's record of it. */
static void test_launch(dsv4rt_context *ctx, dsv4rt_bundle *b)
{
  const char *name = NULL;
  int e = amd_entry(b, "dequant_gather", &name);
  CHECK(e >= 0, "decode.dsv4b has no gfx942 dequant_gather");
  if (e < 0)
    return;
  dsv4rt_kernel_info info;
  dsv4_layout L;
  dsv4rt_bundle_entry_info(b, e, &info);
  dsv4rt_bundle_entry_layout(b, e, &L);
  int64_t n = 37, S = L.block_stride ? L.block_stride : 65536;
  dsv4rt_buffer *out = NULL, *cache = NULL, *idx = NULL;
  dsv4rt_buffer_create(ctx, (size_t)(n * L.dim * 2), &out);
  dsv4rt_buffer_create(ctx, (size_t)(3 * S), &cache);
  dsv4rt_buffer_create(ctx, (size_t)n * 4, &idx);
  int32_t ix[37];
  for (int i = 0; i < 37; i++)
    ix[i] = (i * 5) % 150 - 1;
  dsv4rt_buffer_write(idx, 0, ix, sizeof ix);
  dsv4rt_dequant_gather_args a = {out, cache, idx, n, 3, 64, S, 0.75f};
  dsv4rt_set_stream(ctx, 0x5150);
  int before = launch_count();
  dsv4rt_launch_opts o = {.kernel = name};
  dsv4rt_status st = dsv4rt_dequant_gather(b, &a, &o);
  CHECK(st == DSV4RT_OK && launch_count() == before + 1, "dequant_gather: %d %s; %d launches", st,
        dsv4rt_last_error(ctx), launch_count() - before);
  dsv4rt_set_stream(ctx, 0);
  const fake_hip_launch *l = launch_at(launch_count() - 1);
  dsv4_hsaco_kernel m;
  if (!l || meta_of(name, &m))
    return;
  CHECK(!strcmp(l->kernel, name), "launched %s, not %s", l->kernel, name);
  CHECK(l->block[0] == (unsigned)info.threads && l->block[1] == 1 && l->grid[0] == (unsigned)((n + info.tokens_per_cta -
                                                                                                 1) /
                                                                                                info.tokens_per_cta),
        "geometry: grid %u block %u (threads %d, tokens a CTA %d)", l->grid[0], l->block[0], info.threads,
        info.tokens_per_cta);
  CHECK(l->shared == 0 && l->stream == (void *)0x5150, "LDS %u, stream %p", l->shared, l->stream);
  CHECK(l->kernarg_size == dsv4_hsaco_explicit_bytes(&m), "kernarg block %zu bytes, explicit arguments %u",
        l->kernarg_size, dsv4_hsaco_explicit_bytes(&m));
  /* the op's arguments in dsv4_abi.h's order, at the metadata's offsets */
  uint64_t want[] = {dsv4rt_buffer_native(out), dsv4rt_buffer_native(cache), dsv4rt_buffer_native(idx), (uint64_t)n,
                     3, 64, (uint64_t)S, 0};
  float ts = 0.75f;
  memcpy(&want[7], &ts, 4);
  static const char *const names[] = {
#define N(nm, kind) #nm,
      DSV4_ARGS_DEQUANT_GATHER(N)
#undef N
  };
  CHECK(m.nargs >= 8, "%s: %d arguments in its metadata", name, m.nargs);
  for (int i = 0; i < 8 && i < m.nargs; i++) {
    uint64_t got = 0;
    memcpy(&got, l->kernarg + m.args[i].offset, m.args[i].size);
    uint64_t w = m.args[i].size == 4 ? (want[i] & 0xffffffffu) : want[i];
    CHECK(got == w, "%s: argument %d (%s) at offset %u: 0x%llx, expected 0x%llx", name, i, names[i],
          m.args[i].offset, (unsigned long long)got, (unsigned long long)w);
  }
  /* a failed launch: a status, the next one goes through */
  fail_next("hipModuleLaunchKernel", 1, 0);
  st = dsv4rt_dequant_gather(b, &a, &o);
  CHECK(st == DSV4RT_ERR_BACKEND && strstr(dsv4rt_last_error(ctx), "hipModuleLaunchKernel"), "failed launch: %d %s",
        st, dsv4rt_last_error(ctx));
  CHECK(dsv4rt_dequant_gather(b, &a, &o) == DSV4RT_OK, "launch after a failed one: %s", dsv4rt_last_error(ctx));
  double ms = -1;
  CHECK(!dsv4rt_timer_start(ctx) && !dsv4rt_timer_stop(ctx, &ms) && ms == 0.25, "timer: %g ms", ms);
  dsv4rt_buffer_destroy(out), dsv4rt_buffer_destroy(cache), dsv4rt_buffer_destroy(idx);
}

/* A failed module load: the op fails naming the kernel; another kernel still loads. */
static void test_load_failure(dsv4rt_context *ctx, const char *path)
{
  dsv4rt_bundle *b = NULL;
  CHECK(!dsv4rt_bundle_open(ctx, path, &b), "%s: %s", path, dsv4rt_last_error(ctx));
  if (!b)
    return;
  const char *name = NULL;
  int e = amd_entry(b, "dequant_gather", &name);
  dsv4rt_buffer *out = NULL, *cache = NULL, *idx = NULL;
  dsv4_layout L;
  dsv4rt_bundle_entry_layout(b, e, &L);
  dsv4rt_buffer_create(ctx, (size_t)(4 * L.dim * 2), &out);
  dsv4rt_buffer_create(ctx, 1 << 20, &cache);
  dsv4rt_buffer_create(ctx, 16, &idx);
  int32_t ix[4] = {0, 1, 2, 3};
  dsv4rt_buffer_write(idx, 0, ix, sizeof ix);
  dsv4rt_dequant_gather_args a = {out, cache, idx, 4, 1, 64, L.block_stride ? L.block_stride : 65536, 1};
  dsv4rt_launch_opts o = {.kernel = name};
  fail_next("hipModuleLoadData", 200, 0);
  dsv4rt_status st = dsv4rt_dequant_gather(b, &a, &o);
  const char *m = dsv4rt_last_error(ctx);
  CHECK(st == DSV4RT_ERR_BACKEND && strstr(m, "hipModuleLoadData") && strstr(m, name) && strstr(m, "invalid"),
        "failed load: %d %s", st, m);
  printf("  %-34s %s\n", "failed module load", m);
  st = dsv4rt_dequant_gather(b, &a, &o);
  CHECK(st == DSV4RT_ERR_BACKEND && strstr(dsv4rt_last_error(ctx), "failed to load earlier"),
        "the same kernel again: %d %s", st, dsv4rt_last_error(ctx));
  const char *pg = NULL;
  CHECK(amd_entry(b, "paged_gather", &pg) >= 0, "no gfx942 paged_gather");
  dsv4rt_buffer_destroy(out), dsv4rt_buffer_destroy(cache), dsv4rt_buffer_destroy(idx);
  dsv4rt_bundle_destroy(b);
}

/* Devices the bundle's code does not run on. */
static void test_wrong_devices(const char *path)
{
  const struct {
    const char *what, *var, *value, *want, *want2;
    dsv4rt_status status;
  } cases[] = {
      {"a processor the bundle lacks", "DSV4_FAKE_HIP_ARCH", "gfx1100", "gfx1100", "gfx942", DSV4RT_ERR_NO_KERNEL},
      {"a wave32 device", "DSV4_FAKE_HIP_WARP", "32", "wave64", "wave32", DSV4RT_ERR_BACKEND},
  };
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    dsv4rt_status st;
    dsv4rt_context *ctx = open_with(fake_path, cases[c].var, cases[c].value, 0, &st);
    CHECK(st == DSV4RT_OK, "%s: context: %s", cases[c].what, dsv4rt_last_error(NULL));
    if (!ctx)
      continue;
    dsv4rt_bundle *b = NULL;
    CHECK(!dsv4rt_bundle_open(ctx, path, &b), "%s: open: %s", cases[c].what, dsv4rt_last_error(ctx));
    dsv4rt_buffer *out = NULL, *cache = NULL, *idx = NULL;
    dsv4rt_buffer_create(ctx, 4096, &out), dsv4rt_buffer_create(ctx, 1 << 20, &cache);
    dsv4rt_buffer_create(ctx, 16, &idx);
    dsv4rt_dequant_gather_args a = {out, cache, idx, 1, 1, 64, 65536, 1};
    int before = launch_count();
    st = dsv4rt_dequant_gather(b, &a, NULL);
    const char *m = dsv4rt_last_error(ctx);
    CHECK(st == cases[c].status && strstr(m, cases[c].want) && strstr(m, cases[c].want2) && launch_count() == before,
          "%s: %d (%s) %s", cases[c].what, st, dsv4rt_status_name(st), m);
    printf("  %-34s %s\n", cases[c].what, m);
    dsv4rt_buffer_destroy(out), dsv4rt_buffer_destroy(cache), dsv4rt_buffer_destroy(idx);
    dsv4rt_bundle_destroy(b);
    dsv4rt_context_destroy(ctx);
  }
}

/* A bundle whose gfx942 code object says wave32 in its metadata: refused
 * when it opens, naming the entry. */
static void test_altered_metadata(dsv4rt_context *ctx, const char *path)
{
  FILE *f = fopen(path, "rb");
  static uint8_t d[64 << 20];
  size_t n = f ? fread(d, 1, sizeof d, f) : 0;
  if (f)
    fclose(f);
  uint32_t count;
  memcpy(&count, d + DSV4_BUNDLE_AT_NENTRIES, 4);
  int patched = 0;
  for (uint32_t i = 0; i < count && !patched; i++) {
    dsv4_bundle_entry e;
    memcpy(&e, d + DSV4_BUNDLE_HEADER_BYTES + i * sizeof e, sizeof e);
    if (e.target != 1)
      continue;
    static const char key[] = "\xaf.wavefront_size\x40";
    for (uint64_t j = e.code_off; j + sizeof key - 1 <= e.code_off + e.code_len && !patched; j++)
      if (!memcmp(d + j, key, sizeof key - 1))
        d[j + sizeof key - 2] = 0x20, patched = 1;
  }
  CHECK(patched, "no AMDGCN code object with .wavefront_size 64 in %s", path);
  uint32_t crc = dsv4_crc32(d + 16, n - 16);
  memcpy(d + DSV4_BUNDLE_AT_CRC, &crc, 4);
  dsv4rt_bundle *b = NULL;
  dsv4rt_status st = dsv4rt_bundle_open_memory(ctx, d, n, &b);
  const char *m = dsv4rt_last_error(ctx);
  CHECK(st == DSV4RT_ERR_BUNDLE_FORMAT && !b && strstr(m, "code object") && strstr(m, "32"),
        "altered metadata: %d %s", st, m);
  printf("  %-34s %s\n", "altered metadata", m);
  dsv4rt_bundle_destroy(b);
}

int main(int argc, char **argv)
{
  if (argc != 4) {
    fprintf(stderr, "usage: test_hip KERNEL_DIR FAKE_LIBAMDHIP64 FAKE_LIBCUDA\n");
    return 2;
  }
  kdir = argv[1], fake_path = argv[2];
  void *h = dlopen(fake_path, RTLD_NOW);
  if (!h) {
    printf("FAIL: %s: %s\n", fake_path, dlerror());
    return 1;
  }
  fail_next = (fake_hip_fail_fn)dlsym(h, "fake_hip_fail");
  launch_count = (fake_hip_launch_count_fn)dlsym(h, "fake_hip_launch_count");
  launch_at = (fake_hip_launch_at_fn)dlsym(h, "fake_hip_launch_at");
  live = (fake_hip_live_fn)dlsym(h, "fake_hip_live");
  violations = (fake_hip_violations_fn)dlsym(h, "fake_hip_violations");
  printf("set-up faults\n");
  test_setup_faults(argv[3]);
  dsv4rt_status st;
  dsv4rt_context *ctx = open_with(fake_path, NULL, NULL, 0, &st);
  CHECK(st == DSV4RT_OK, "context: %s", dsv4rt_last_error(NULL));
  if (!ctx)
    return finish();
  const char *dn = dsv4rt_device_name(ctx);
  CHECK(strstr(dn, "gfx942") && strstr(dn, "wave64") && strstr(dn, "HIP 5.2") && !strstr(dn, "sramecc"),
        "device: %s", dn);
  printf("device: %s\n", dn);
  test_buffers(ctx);
  char path[1024];
  snprintf(path, sizeof path, "%s/decode.dsv4b", kdir);
  dsv4rt_bundle *b = NULL;
  CHECK(!dsv4rt_bundle_open(ctx, path, &b), "%s: %s", path, dsv4rt_last_error(ctx));
  if (b)
    test_launch(ctx, b);
  printf("load, device and bundle faults\n");
  test_load_failure(ctx, path);
  test_altered_metadata(ctx, path);
  dsv4rt_bundle_destroy(b);
  test_wrong_devices(path);
  char why[512];
  int v = violations(why, sizeof why);
  CHECK(v == 0, "the fake found %d disagreement(s), the last: %s", v, why);
  int left = live();
  dsv4rt_context_destroy(ctx);
  CHECK(left == 0, "%d allocations left before the context went", left);
  return finish();
}
