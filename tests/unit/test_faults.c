/* test_faults.c -- libdsv4rt under faults: each gives a clear status and
 * message, and a context that exists stays usable for what still works.
 *
 *   test_faults DECODE_BUNDLE FAKE_LIBCUDA
 *
 * Rows:
 *   - a missing vendor library (DSV4RT_OPENCL_LIBRARY / DSV4RT_CUDA_LIBRARY
 *     naming a file that is not there): NO_BACKEND, naming the library;
 *   - a CUDA driver older than CUDA 12, and one without a device (a fake
 *     libcuda, tests/unit/fake_libcuda.c): NO_BACKEND, saying which;
 *   - no OpenCL platform (OCL_ICD_VENDORS: an empty folder), and a platform
 *     without a device (POCL_DEVICES naming none), each in a child process
 *     since the ICD loader reads them once a process: NO_BACKEND;
 *   then on each backend with a device (OpenCL here, through PoCL; CUDA
 *   where a GPU is; skipped rows are listed):
 *   - an allocation of 2^50 bytes: OUT_OF_MEMORY (or BACKEND) with a
 *     message, then a small buffer is created, written and read back;
 *   - a bundle (decode.dsv4b, in memory) whose paged_gather_v4 code bytes
 *     are corrupted, its checksum recomputed: refused at open
 *     (BUNDLE_FORMAT naming the entry: the code a driver is handed is
 *     checked first; tests/unit/test_code_mutants.c has more of these);
 *   - the same bundle with paged_gather_v4's symbol name changed (the
 *     code has no such kernel): BACKEND naming it, twice, the second
 *     repeating the driver's message, while dequant_gather_v4 of the
 *     same bundle runs and matches the host reference.
 * Exit 77 only if no row could run at all.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dsv4_abi.h"
#include "dsv4_check.h"
#include "dsv4_ref.h"
#include "dsv4rt.h"
#include "../check.h"
#include "../../common/files.h" /* dsv4_tune_read_file: the whole-file read libdsv4rt uses */

/* Where the bundle header keeps its checksum and where the checksummed
 * bytes start (dsv4_abi.h: the header's fields after it, then the rest). */
#define CRC_AT DSV4_BUNDLE_AT_CRC
#define CRC_FROM DSV4_BUNDLE_AT_NENTRIES

static int passed, failed, ran;
static char skipped[2048];
static dsv4_rng rng;


/* Note a row that could not run, and why. */
static void skip(const char *row, const char *why)
{
  size_t l = strlen(skipped);
  snprintf(skipped + l, sizeof skipped - l, "  skipped: %s (%.300s)\n", row, why);
}

/* ---- context creation: missing libraries, old drivers, no devices ---- */

/* Create a context of backend with env var `var` set to `val` (unset
 * again afterwards); expect NO_BACKEND and a message holding want1 and
 * want2 (NULL: anything). */
static void no_backend_row(const char *row, dsv4rt_backend be, const char *var, const char *val, const char *want1,
                           const char *want2)
{
  setenv(var, val, 1);
  dsv4rt_context *ctx = (dsv4rt_context *)1;
  dsv4rt_status s = dsv4rt_context_create(be, 0, &ctx);
  const char *m = dsv4rt_last_error(NULL);
  CHECK(s == DSV4RT_ERR_NO_BACKEND && ctx == NULL && strstr(m, want1) && (!want2 || strstr(m, want2)),
        "%s: status %d (%s), message '%s' (wanted NO_BACKEND naming '%s')", row, s, dsv4rt_status_name(s), m, want1);
  printf("%s: %s: %s\n", row, dsv4rt_status_name(s), m);
  if (s == DSV4RT_OK)
    dsv4rt_context_destroy(ctx);
  unsetenv(var);
  ran++;
}

/* The same in a child process, for settings a library reads once a
 * process (the child's checks count through its exit status).  Where the
 * setting does not take (another ICD loader, another platform with a
 * device), the context opens: the row is skipped, saying so. */
static void child_row(const char *row, const char *var, const char *val, const char *want)
{
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    setenv(var, val, 1);
    dsv4rt_context *ctx;
    if (dsv4rt_context_create(DSV4RT_BACKEND_OPENCL, 0, &ctx) == DSV4RT_OK) {
      printf("%s: %s=%s leaves device %s\n", row, var, val, dsv4rt_device_name(ctx));
      dsv4rt_context_destroy(ctx);
      fflush(stdout);
      exit(77);
    }
    passed = failed = 0;
    no_backend_row(row, DSV4RT_BACKEND_OPENCL, var, val, want, NULL);
    fflush(stdout);
    exit(failed ? 1 : 0);
  }
  int st = 0;
  int ok = pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st);
  if (ok && WEXITSTATUS(st) == 77) {
    char why[128];
    snprintf(why, sizeof why, "%s=%s does not take here: another ICD loader or platform", var, val);
    skip(row, why);
    return;
  }
  CHECK(ok && WEXITSTATUS(st) == 0, "%s: the child failed (status 0x%x)", row, st);
  ran++;
}

static void library_rows(const char *fake_cuda, const char *tmpdir)
{
  /* first, while this process has not loaded the ICD loader */
  char empty[512];
  snprintf(empty, sizeof empty, "%s/no_icds", tmpdir);
  mkdir(empty, 0755);
  child_row("OpenCL without a platform", "OCL_ICD_VENDORS", empty, "no OpenCL platform");
  child_row("OpenCL platform without a device", "POCL_DEVICES", "none", "no device on 1 platform");

  no_backend_row("missing libOpenCL", DSV4RT_BACKEND_OPENCL, "DSV4RT_OPENCL_LIBRARY",
                 "/nonexistent/libOpenCL-gone.so.1", "/nonexistent/libOpenCL-gone.so.1", NULL);
  no_backend_row("missing libcuda", DSV4RT_BACKEND_CUDA, "DSV4RT_CUDA_LIBRARY", "/nonexistent/libcuda-gone.so.1",
                 "/nonexistent/libcuda-gone.so.1", NULL);
  setenv("DSV4RT_OPENCL_LIBRARY", "/nonexistent/libOpenCL-gone.so.1", 1);
  no_backend_row("auto, both missing", DSV4RT_BACKEND_AUTO, "DSV4RT_CUDA_LIBRARY", "/nonexistent/libcuda-gone.so.1",
                 "libcuda-gone.so.1", "libOpenCL-gone.so.1");
  unsetenv("DSV4RT_OPENCL_LIBRARY");

  setenv("DSV4_FAKE_CUDA_VERSION", "11080", 1);
  no_backend_row("CUDA 11.8 driver", DSV4RT_BACKEND_CUDA, "DSV4RT_CUDA_LIBRARY", fake_cuda, "CUDA 11.8",
                 "CUDA 12.0 driver or later");
  setenv("DSV4_FAKE_CUDA_VERSION", "12040", 1);
  no_backend_row("CUDA 12.4 driver without a device", DSV4RT_BACKEND_CUDA, "DSV4RT_CUDA_LIBRARY", fake_cuda,
                 "error 100", "no CUDA-capable device");
  unsetenv("DSV4_FAKE_CUDA_VERSION");
}

/* ---- on a device: allocations ---- */

static void allocation_rows(dsv4rt_context *ctx, const char *be)
{
  dsv4rt_buffer *huge = (dsv4rt_buffer *)1, *small = NULL;
  size_t n = (size_t)1 << 50;
  dsv4rt_status s = dsv4rt_buffer_create(ctx, n, &huge);
  const char *m = dsv4rt_last_error(ctx);
  CHECK((s == DSV4RT_ERR_OUT_OF_MEMORY || s == DSV4RT_ERR_BACKEND) && huge == NULL && strstr(m, "1125899906842624"),
        "%s: 2^50 bytes: status %d, message '%s'", be, s, m);
  printf("%s: 2^50-byte buffer: %s: %s\n", be, dsv4rt_status_name(s), m);
  if (s == DSV4RT_OK)
    dsv4rt_buffer_destroy(huge);
  uint8_t w[4096], r[4096];
  dsv4_rng_bytes(&rng, w, sizeof w);
  memset(r, 0, sizeof r);
  s = dsv4rt_buffer_create(ctx, sizeof w, &small);
  if (!s)
    s = dsv4rt_buffer_write(small, 0, w, sizeof w);
  if (!s)
    s = dsv4rt_buffer_read(small, 0, r, sizeof r);
  CHECK(!s && !memcmp(w, r, sizeof w), "%s: after the failed allocation, a 4 KiB buffer: %s", be,
        s ? dsv4rt_last_error(ctx) : "contents differ");
  dsv4rt_buffer_destroy(small);
  ran++;
}

/* ---- on a device: kernels that do not load ---- */

/* The whole file at path (malloc'd; *size), or NULL. */
static uint8_t *read_file(const char *path, size_t *size)
{
  char *text = NULL;
  *size = 0;
  return dsv4_tune_read_file(path, &text, size) ? NULL : (uint8_t *)text;
}

static uint32_t rd32(const uint8_t *p)
{
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

/* Entry i of a bundle image (a copy), and where it lies. */
static dsv4_bundle_entry *entry_at(uint8_t *img, int i)
{
  return (dsv4_bundle_entry *)(img + DSV4_BUNDLE_HEADER_BYTES + (size_t)i * sizeof(dsv4_bundle_entry));
}

/* Recompute the header's checksum after an edit (1: the stored one
 * matched before, so the header layout is the one assumed). */
static int fix_crc(uint8_t *img, size_t size, int check_first)
{
  uint32_t crc = dsv4_crc32(img + CRC_FROM, size - CRC_FROM);
  int ok = !check_first || rd32(img + CRC_AT) == crc;
  memcpy(img + CRC_AT, &crc, 4);
  return ok;
}

/* Overwrite the first bytes of every code blob (and SPIR fallback) of
 * every entry of kernel `name`: no valid PTX, SPIR-V or bitcode. */
static int corrupt_code(uint8_t *img, int n, const char *name)
{
  static const char junk[] = "#### dsv4c test_faults: these are not the code bytes ####\n";
  int hits = 0;
  for (int i = 0; i < n; i++) {
    dsv4_bundle_entry e;
    memcpy(&e, entry_at(img, i), sizeof e);
    if (strcmp(e.name, name))
      continue;
    memcpy(img + e.code_off, junk, e.code_len < sizeof junk - 1 ? e.code_len : sizeof junk - 1);
    if (e.aux_len)
      memcpy(img + e.aux_off, junk, e.aux_len < sizeof junk - 1 ? e.aux_len : sizeof junk - 1);
    hits++;
  }
  return hits;
}

/* Rename every entry of kernel `name` to `to` (the code keeps the old
 * symbol, so the new name is missing from it). */
static int rename_kernel(uint8_t *img, int n, const char *name, const char *to)
{
  int hits = 0;
  for (int i = 0; i < n; i++) {
    dsv4_bundle_entry *e = entry_at(img, i);
    if (!strcmp(e->name, name)) {
      memset(e->name, 0, sizeof e->name);
      snprintf(e->name, sizeof e->name, "%s", to);
      hits++;
    }
  }
  return hits;
}

/* The layout kernel `name` of b was built for (0), or 1. */
static int layout_of(const dsv4rt_bundle *b, const char *name, dsv4_layout *L)
{
  for (int i = 0; i < dsv4rt_bundle_count(b); i++) {
    const char *n;
    if (!dsv4rt_bundle_entry(b, i, &n, NULL, NULL, NULL) && !strcmp(n, name))
      return dsv4rt_bundle_entry_layout(b, i, L) != DSV4RT_OK;
  }
  return 1;
}

/* Buffers for one dequant_gather and one paged_gather of layout L. */
typedef struct {
  dsv4_layout L;
  int64_t nb, bs, stride, n;
  uint8_t *host;
  int32_t idx[16], seq[1], table[2];
  dsv4rt_buffer *cache, *indices, *out, *seqb, *tableb, *pout;
} gather_io;

static int gather_io_make(dsv4rt_context *ctx, const dsv4_layout *L, gather_io *g)
{
  memset(g, 0, sizeof *g);
  g->L = *L, g->nb = 2, g->bs = 64, g->n = 16;
  g->stride = (dsv4_layout_min_block_bytes(L, g->bs) + L->align - 1) / L->align * L->align;
  size_t cb = (size_t)(g->nb * g->stride);
  g->host = malloc(cb);
  if (!g->host)
    return 1;
  dsv4_rng_bytes(&rng, g->host, cb);
  for (int i = 0; i < g->n; i++)
    g->idx[i] = i == 3 ? -1 : (int32_t)dsv4_rng_range(&rng, 0, g->nb * g->bs - 1);
  g->seq[0] = 8, g->table[0] = 1, g->table[1] = 0;
  size_t out = (size_t)(g->n * L->dim) * 2;
  dsv4rt_status s;
  if ((s = dsv4rt_buffer_create(ctx, cb, &g->cache)) || (s = dsv4rt_buffer_write(g->cache, 0, g->host, cb)) ||
      (s = dsv4rt_buffer_create(ctx, sizeof g->idx, &g->indices)) ||
      (s = dsv4rt_buffer_write(g->indices, 0, g->idx, sizeof g->idx)) ||
      (s = dsv4rt_buffer_create(ctx, out, &g->out)) || (s = dsv4rt_buffer_create(ctx, out, &g->pout)) ||
      (s = dsv4rt_buffer_create(ctx, 16, &g->seqb)) || (s = dsv4rt_buffer_write(g->seqb, 0, g->seq, 4)) ||
      (s = dsv4rt_buffer_create(ctx, 16, &g->tableb)) || (s = dsv4rt_buffer_write(g->tableb, 0, g->table, 8)))
    printf("FAIL: buffers: %s\n", dsv4rt_last_error(ctx));
  return s != DSV4RT_OK;
}

static void gather_io_free(gather_io *g)
{
  dsv4rt_buffer_destroy(g->cache), dsv4rt_buffer_destroy(g->indices), dsv4rt_buffer_destroy(g->out);
  dsv4rt_buffer_destroy(g->pout), dsv4rt_buffer_destroy(g->seqb), dsv4rt_buffer_destroy(g->tableb);
  free(g->host);
}

static dsv4rt_status run_dequant(dsv4rt_bundle *b, gather_io *g, const char *kernel)
{
  dsv4rt_dequant_gather_args a = {.out = g->out, .cache = g->cache, .indices = g->indices, .n = g->n,
                                  .num_blocks = g->nb, .block_size = g->bs, .block_stride = g->stride,
                                  .tensor_scale = 1};
  dsv4rt_launch_opts o = {.kernel = kernel};
  return dsv4rt_dequant_gather(b, &a, &o);
}

static dsv4rt_status run_paged(dsv4rt_bundle *b, gather_io *g, const char *kernel)
{
  dsv4rt_paged_gather_args a = {.out = g->pout, .out_stride_r = 8 * g->L.dim, .out_stride_m = g->L.dim,
                                .out_rows = 8, .offset = 0, .cache = g->cache, .num_blocks = g->nb,
                                .block_size = g->bs, .block_stride = g->stride, .seq_lens = g->seqb,
                                .gather_lens = NULL, .block_table = g->tableb, .num_requests = 1, .max_blocks = 2,
                                .tensor_scale = 1};
  dsv4rt_launch_opts o = {.kernel = kernel};
  return dsv4rt_paged_gather(b, &a, &o);
}

/* dequant_gather's output against the host reference. */
static int dequant_matches(dsv4rt_context *ctx, gather_io *g)
{
  size_t n = (size_t)(g->n * g->L.dim), first;
  uint16_t *got = malloc(n * 2), *want = malloc(n * 2);
  int ok = got && want && !dsv4rt_synchronize(ctx) && !dsv4rt_buffer_read(g->out, 0, got, n * 2) &&
           !dsv4_ref_dequant_gather(&g->L, g->host, g->nb, g->bs, g->stride, g->idx, g->n, want) &&
           dsv4_check_bf16(got, want, n, &first) == 0;
  free(got), free(want);
  return ok;
}

/* A launch that must fail with BACKEND, the message naming the kernel. */
static void expect_load_failure(dsv4rt_context *ctx, dsv4rt_status s, const char *be, const char *what,
                                const char *kernel)
{
  const char *m = dsv4rt_last_error(ctx);
  CHECK(s == DSV4RT_ERR_BACKEND && strstr(m, kernel), "%s: %s: status %d (%s), message '%s'", be, what, s,
        dsv4rt_status_name(s), m);
  printf("%s: %s: %s: %s\n", be, what, dsv4rt_status_name(s), m);
}

/* The corrupted-code bundle: junk where paged_gather_v4's SPIR-V and SPIR
 * 1.2 bitcode were is refused when the bundle opens (the code a driver
 * is handed is checked first: runtime/src/code_check.c), naming the entry. */
static void corrupted_row(dsv4rt_context *ctx, const char *be, uint8_t *img, size_t size, int n)
{
  dsv4rt_bundle *b = (dsv4rt_bundle *)1;
  CHECK(corrupt_code(img, n, "paged_gather_v4") > 0, "%s: decode.dsv4b has no paged_gather_v4", be);
  fix_crc(img, size, 0);
  dsv4rt_status s = dsv4rt_bundle_open_memory(ctx, img, size, &b);
  const char *m = dsv4rt_last_error(ctx);
  CHECK(s == DSV4RT_ERR_BUNDLE_FORMAT && b == NULL && strstr(m, "(paged_gather_v4): code: SPIR-V: magic"),
        "%s: corrupted paged_gather_v4: status %d (%s), message '%s'", be, s, dsv4rt_status_name(s), m);
  printf("%s: corrupted paged_gather_v4: %s: %s\n", be, dsv4rt_status_name(s), m);
  if (s == DSV4RT_OK)
    dsv4rt_bundle_destroy(b);
}

/* The renamed-symbol bundle: paged_gather_v4 (renamed) fails to load, twice
 * with the driver's message; dequant_gather_v4 runs beside it and matches
 * the host reference. */
static void missing_symbol_row(dsv4rt_context *ctx, const char *be, uint8_t *img, size_t size, int n)
{
  static const char *const gone = "paged_gather_v4_gone";
  dsv4rt_bundle *b = NULL;
  CHECK(rename_kernel(img, n, "paged_gather_v4", gone) > 0, "%s: decode.dsv4b has no paged_gather_v4", be);
  fix_crc(img, size, 0);
  dsv4rt_status s = dsv4rt_bundle_open_memory(ctx, img, size, &b);
  CHECK(s == DSV4RT_OK, "%s: the renamed bundle does not open: %s", be, dsv4rt_last_error(ctx));
  if (s)
    return;
  dsv4_layout L;
  gather_io g;
  memset(&g, 0, sizeof g);
  if (!layout_of(b, "dequant_gather_v4", &L) && gather_io_make(ctx, &L, &g) == 0) {
    expect_load_failure(ctx, run_paged(b, &g, gone), be, "kernel missing from its code", gone);
    char first[1024];
    snprintf(first, sizeof first, "%s", dsv4rt_last_error(ctx));
    expect_load_failure(ctx, run_paged(b, &g, gone), be, "kernel missing from its code, again", gone);
    CHECK(strstr(dsv4rt_last_error(ctx), first) != NULL,
          "%s: the second failure does not repeat the driver's message '%s'", be, first);
    s = run_dequant(b, &g, "dequant_gather_v4");
    CHECK(s == DSV4RT_OK && dequant_matches(ctx, &g), "%s: dequant_gather_v4 beside the missing kernel: %s", be,
          s ? dsv4rt_last_error(ctx) : "differs from the reference");
    printf("%s: dequant_gather_v4 of the same bundle: %s\n", be, s ? dsv4rt_last_error(ctx) : "runs, matches");
  } else
    failed++;
  gather_io_free(&g);
  dsv4rt_bundle_destroy(b);
}

static void kernel_rows(dsv4rt_context *ctx, const char *be, const char *path)
{
  size_t size = 0;
  if (access(path, F_OK)) { /* a build without the compiler writes no bundle */
    char row[64];
    snprintf(row, sizeof row, "%s kernel rows", be);
    skip(row, "no bundle at the path given: built without DSV4C_BUILD_COMPILER?");
    return;
  }
  uint8_t *orig = read_file(path, &size), *img = orig ? malloc(size) : NULL;
  dsv4rt_bundle *b = NULL;
  if (!img || dsv4rt_bundle_open_memory(ctx, orig, size, &b)) {
    printf("FAIL: %s: bundle %s: %s\n", be, path, img ? dsv4rt_last_error(ctx) : "cannot read it");
    failed++;
    free(orig), free(img);
    return;
  }
  int n = dsv4rt_bundle_count(b);
  dsv4rt_bundle_destroy(b);
  memcpy(img, orig, size);
  CHECK(fix_crc(img, size, 1), "%s: the checksum is not at byte %d over [%d, size): dsv4_abi.h's header changed?", be,
        CRC_AT, CRC_FROM);
  corrupted_row(ctx, be, img, size, n);
  memcpy(img, orig, size);
  missing_symbol_row(ctx, be, img, size, n);
  free(orig), free(img);
  ran++;
}

/* Every device row on backend be, or a note why they were skipped. */
static void device_rows(dsv4rt_backend kind, const char *be, const char *bundle)
{
  dsv4rt_context *ctx;
  if (dsv4rt_context_create(kind, 0, &ctx)) {
    char row[64];
    snprintf(row, sizeof row, "%s rows (allocation, kernels)", be);
    skip(row, dsv4rt_last_error(NULL));
    return;
  }
  printf("%s device: %s\n", be, dsv4rt_device_name(ctx));
  allocation_rows(ctx, be);
  kernel_rows(ctx, be, bundle);
  dsv4rt_context_destroy(ctx);
}

int main(int argc, char **argv)
{
  if (argc < 3) {
    fprintf(stderr, "usage: test_faults DECODE_BUNDLE FAKE_LIBCUDA\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0); /* whole lines even where LeakSanitizer ends the process */
  rng.s = dsv4_check_seed();
  char tmp[] = "/tmp/dsv4_faults_XXXXXX";
  if (!mkdtemp(tmp)) {
    perror("mkdtemp");
    return 1;
  }
  library_rows(argv[2], tmp);
  char empty[600];
  snprintf(empty, sizeof empty, "%s/no_icds", tmp);
  rmdir(empty), rmdir(tmp);
  device_rows(DSV4RT_BACKEND_OPENCL, "opencl", argv[1]);
  device_rows(DSV4RT_BACKEND_CUDA, "cuda", argv[1]);
  printf("%s%d passed, %d failed\n", skipped, passed, failed);
  if (!ran)
    return 77;
  return failed ? 1 : 0;
}
