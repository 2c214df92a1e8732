/* test_subgroups.c -- kernels with a required sub-group size, on OpenCL.
 *
 *   test_subgroups WAVE64_BUNDLE NATIVE_BUNDLE
 *
 * WAVE64_BUNDLE (tests/exec/wave64.lua): every entry's SPIR-V requires
 * sub-groups of 64 (an OpExecutionMode SubgroupSize 64 in its code, read
 * here from the bundle's bytes), the kernels that reduce across lanes do it
 * with OpGroupNonUniformShuffleXor, every entry carries the emulating SPIR
 * 1.2 fallback (DSV4_ENTRY_SUBGROUPS_EMULATED) and the device runs every
 * one of them: so the wave64 exec tests, which skip a kernel the device
 * cannot run, skip none.
 *
 * NATIVE_BUNDLE (tests/exec/subgroups_native.lua): the same requirement
 * without the emulation.  Where the device offers sub-groups of 64 it runs;
 * where it does not (PoCL 3.1 has no sub-groups at all) the runtime must
 * refuse it: not runnable, and a launch, named or not, returns
 * DSV4RT_ERR_NO_KERNEL with a message naming the size, and writes nothing.
 * Exit 77 when there is no OpenCL device.
 */
#include <string.h>

#include "dsv4_abi.h"
#include "harness.h"
#include "../../common/files.h" /* dsv4_tune_read_file */

enum { OP_EXECUTION_MODE = 16, MODE_SUBGROUP_SIZE = 35, OP_SHUFFLE_XOR = 346 };

/* What a SPIR-V module holds: its SubgroupSize (0: none) and xor shuffles. */
static void scan_spirv(const uint8_t *p, uint64_t n, uint32_t *size, int *shuffles)
{
  *size = 0, *shuffles = 0;
  for (uint64_t at = 5; at + 1 <= n / 4;) {
    uint32_t w[4] = {0};
    memcpy(w, p + at * 4, 4);
    uint32_t len = w[0] >> 16, op = w[0] & 0xffff;
    if (!len || at + len > n / 4)
      return;
    if (op == OP_EXECUTION_MODE && len == 4) {
      memcpy(w, p + at * 4, 16);
      if (w[2] == MODE_SUBGROUP_SIZE)
        *size = w[3];
    }
    *shuffles += op == OP_SHUFFLE_XOR;
    at += len;
  }
}

/* The bundle's entries as written (dsv4_abi.h), with its bytes. */
static int read_entries(const char *path, uint8_t **img, dsv4_bundle_entry **es, uint32_t *n)
{
  char *text = NULL;
  size_t size = 0;
  if (dsv4_tune_read_file(path, &text, &size) || size < DSV4_BUNDLE_HEADER_BYTES)
    return 1;
  *img = (uint8_t *)text;
  memcpy(n, *img + DSV4_BUNDLE_AT_NENTRIES, 4);
  if (*n > DSV4_BUNDLE_MAX_ENTRIES || DSV4_BUNDLE_HEADER_BYTES + (size_t)*n * sizeof **es > size)
    return 1;
  *es = calloc(*n ? *n : 1, sizeof **es);
  if (!*es)
    return 1;
  memcpy(*es, *img + DSV4_BUNDLE_HEADER_BYTES, (size_t)*n * sizeof **es);
  return 0;
}

/* Kernels whose generators reduce across lanes (kb_lane_reduce): all but
 * the gathers and topk. */
static int reduces(const char *name)
{
  return strncmp(name, "dequant_gather", 14) && strncmp(name, "paged_gather", 12) && strncmp(name, "topk", 4);
}

static void wave64(const char *path)
{
  uint8_t *img = NULL;
  dsv4_bundle_entry *es = NULL;
  uint32_t n = 0;
  if (read_entries(path, &img, &es, &n)) {
    CHECK(0, "%s: cannot read its entries", path);
    return;
  }
  dsv4rt_bundle *b = NULL;
  if (harness_bundle(path, &b))
    return;
  CHECK(n >= 9, "%s: %u entries, the spec has 9 kernels", path, n);
  int spir = strstr(dsv4rt_device_name(ctx), "takes SPIR 1.2") != NULL;
  for (uint32_t i = 0; i < n; i++) {
    const dsv4_bundle_entry *e = &es[i];
    uint32_t size;
    int shuffles;
    scan_spirv(img + e->code_off, e->code_len, &size, &shuffles);
    CHECK(e->target == 2 && size == 64, "%s: SubgroupSize %u in its SPIR-V (target %u), not 64", e->name, size,
          e->target);
    CHECK(reduces(e->name) ? shuffles > 0 : shuffles == 0, "%s: %d OpGroupNonUniformShuffleXor", e->name, shuffles);
    CHECK(e->flags & DSV4_ENTRY_SUBGROUPS_EMULATED, "%s: flags 0x%x lack SUBGROUPS_EMULATED", e->name, e->flags);
    int runs = dsv4rt_bundle_entry_runs(b, (int)i);
    /* a device that takes SPIR 1.2 (PoCL: CI) runs the emulating fallback */
    CHECK(runs || !spir, "%s: the device does not run it: the wave64 exec tests would skip it", e->name);
    printf("%s: SubgroupSize %u, %d xor shuffles, %s\n", e->name, size, shuffles,
           runs ? "runs here" : "not run here (a device taking SPIR-V without sub-groups of 64)");
  }
  dsv4rt_bundle_destroy(b);
  free(es);
  free(img);
}

/* A dequant_gather of 4 rows into a buffer of 0x5A bytes: the status, and
 * whether out still holds only 0x5A afterwards. */
static dsv4rt_status gather(dsv4rt_bundle *b, const char *kernel, int *untouched)
{
  dsv4_layout L;
  dsv4rt_bundle_entry_layout(b, 0, &L);
  int64_t nb = 1, bs = 64, stride = (dsv4_layout_min_block_bytes(&L, bs) + L.align - 1) / L.align * L.align;
  int32_t idx[4] = {0, 1, 2, 3};
  size_t ob = (size_t)4 * (size_t)L.dim * 2;
  uint8_t *o = malloc(ob), *cache = calloc(1, (size_t)stride);
  memset(o, 0x5A, ob);
  dsv4rt_buffer *dc = dev(cache, (size_t)stride), *di = dev(idx, sizeof idx), *dout = dev(o, ob);
  dsv4rt_dequant_gather_args a = {.out = dout, .cache = dc, .indices = di, .n = 4, .num_blocks = nb,
                                  .block_size = bs, .block_stride = stride, .tensor_scale = 1};
  dsv4rt_launch_opts opts = {.kernel = kernel};
  dsv4rt_status s = dsv4rt_dequant_gather(b, &a, &opts);
  dsv4rt_synchronize(ctx);
  memset(o, 0, ob);
  dsv4rt_buffer_read(dout, 0, o, ob);
  *untouched = 1;
  for (size_t i = 0; i < ob; i++)
    *untouched &= o[i] == 0x5A;
  dsv4rt_buffer_destroy(dc), dsv4rt_buffer_destroy(di), dsv4rt_buffer_destroy(dout);
  free(o), free(cache);
  return s;
}

static void native(const char *path)
{
  dsv4rt_bundle *b = NULL;
  if (harness_bundle(path, &b))
    return;
  const char *name = "dequant_gather_sg64";
  int untouched;
  if (dsv4rt_bundle_kernel_runs(b, name)) { /* a device that offers sub-groups of 64 */
    CHECK(gather(b, name, &untouched) == DSV4RT_OK, "%s runs here but its launch fails: %s", name,
          dsv4rt_last_error(ctx));
    printf("%s: the device offers sub-groups of 64 and runs it\n", name);
  } else {
    for (int named = 0; named < 2; named++) {
      dsv4rt_status s = gather(b, named ? name : NULL, &untouched);
      const char *m = dsv4rt_last_error(ctx);
      CHECK(s == DSV4RT_ERR_NO_KERNEL, "%s launch of %s: status %s, not DSV4RT_ERR_NO_KERNEL (%s)",
            named ? "a named" : "an unnamed", name, dsv4rt_status_name(s), m);
      CHECK(strstr(m, "requires sub-groups of 64") != NULL, "the refusal does not name the size: %s", m);
      CHECK(untouched, "the refused launch wrote to its output");
      printf("refused (%s): %s\n", named ? "named" : "unnamed", m);
    }
  }
  dsv4rt_bundle_destroy(b);
}

int main(int argc, char **argv)
{
  if (argc != 3) {
    fprintf(stderr, "usage: test_subgroups WAVE64_BUNDLE NATIVE_BUNDLE\n");
    return 2;
  }
  int st = harness_open("opencl");
  if (st)
    return st;
  wave64(argv[1]);
  native(argv[2]);
  dsv4rt_context_destroy(ctx);
  return harness_finish();
}
