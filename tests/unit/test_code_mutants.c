/* test_code_mutants.c -- a bundle whose driver code was tampered with (the
 * checksum recomputed) never takes the process down: each mutant is
 * refused with a status, at open or at its first launch, or runs.
 *
 *   test_code_mutants DECODE_BUNDLE
 *
 * Mutants of decode.dsv4b's spirv dequant_gather_v4 entry, each opened
 * and launched (with check_contents) in a child process of its own, so
 * that one that kills its process is counted rather than ending the test:
 *   - its SPIR 1.2 bitcode (the module PoCL is handed), one bit flipped,
 *     for every bit of each run of exactly 38 one-bits: the VBR6 encoding
 *     of 0xFFFFFFFF (six chunks 111111, then 11 of 000011), the
 *     function's attribute index in an attribute group.  One flipped value
 *     bit there made PoCL's LLVM ask for 30 GB and abort (issue 37.1); a
 *     flipped continuation bit reshapes the records after it.
 *   - its SPIR-V: the magic, version, id bound and schema words and the
 *     first instruction's word count, each changed: refused at open.
 * A child killed by a signal (SIGALRM: still running after 60 s) fails
 * the test.  A control (the bundle unchanged) must run first; exit 77
 * when there is no OpenCL device.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dsv4_abi.h"
#include "dsv4rt.h"
#include "../check.h"
#include "../../common/files.h" /* dsv4_tune_read_file: the whole-file read libdsv4rt uses */

static int passed, failed;

/* How a child ended. */
enum { RAN = 0, REFUSED_OPEN = 10, REFUSED_LAUNCH = 11, NO_DEVICE = 77, CHILD_FAIL = 12 };

static uint8_t *read_file(const char *path, size_t *size)
{
  char *text = NULL;
  *size = 0;
  return dsv4_tune_read_file(path, &text, size) ? NULL : (uint8_t *)text;
}

static void fix_crc(uint8_t *img, size_t size)
{
  uint32_t crc = dsv4_crc32(img + DSV4_BUNDLE_AT_NENTRIES, size - DSV4_BUNDLE_AT_NENTRIES);
  memcpy(img + DSV4_BUNDLE_AT_CRC, &crc, 4);
}

/* In the child: open img, launch dequant_gather_v4 on 16 rows, wait. */
static int child(const uint8_t *img, size_t size, const char **msg)
{
  static char m[1024];
  dsv4rt_context *ctx;
  *msg = m;
  if (dsv4rt_context_create(DSV4RT_BACKEND_OPENCL, 0, &ctx)) {
    snprintf(m, sizeof m, "%s", dsv4rt_last_error(NULL));
    return NO_DEVICE;
  }
  dsv4rt_bundle *b = NULL;
  if (dsv4rt_bundle_open_memory(ctx, img, size, &b)) {
    snprintf(m, sizeof m, "%s", dsv4rt_last_error(ctx));
    return REFUSED_OPEN;
  }
  dsv4_layout L;
  int e = -1;
  for (int i = 0; i < dsv4rt_bundle_count(b) && e < 0; i++) {
    const char *name, *target;
    if (!dsv4rt_bundle_entry(b, i, &name, NULL, &target, NULL) && !strcmp(name, "dequant_gather_v4") &&
        !strcmp(target, "spirv"))
      e = i;
  }
  if (e < 0 || dsv4rt_bundle_entry_layout(b, e, &L)) {
    snprintf(m, sizeof m, "no spirv dequant_gather_v4 entry");
    return CHILD_FAIL;
  }
  int64_t nb = 2, bs = 64, stride = (dsv4_layout_min_block_bytes(&L, bs) + L.align - 1) / L.align * L.align;
  int32_t idx[16];
  for (int i = 0; i < 16; i++)
    idx[i] = i * 7 % (int)(nb * bs);
  size_t cb = (size_t)(nb * stride), ob = (size_t)16 * (size_t)L.dim * 2;
  uint8_t *host = calloc(1, cb);
  dsv4rt_buffer *cache = NULL, *ind = NULL, *out = NULL;
  dsv4rt_status s;
  if (!host || (s = dsv4rt_buffer_create(ctx, cb, &cache)) || (s = dsv4rt_buffer_write(cache, 0, host, cb)) ||
      (s = dsv4rt_buffer_create(ctx, sizeof idx, &ind)) || (s = dsv4rt_buffer_write(ind, 0, idx, sizeof idx)) ||
      (s = dsv4rt_buffer_create(ctx, ob, &out))) {
    snprintf(m, sizeof m, "buffers: %s", dsv4rt_last_error(ctx));
    return CHILD_FAIL;
  }
  dsv4rt_dequant_gather_args a = {.out = out, .cache = cache, .indices = ind, .n = 16, .num_blocks = nb,
                                  .block_size = bs, .block_stride = stride, .tensor_scale = 1};
  dsv4rt_launch_opts o = {.kernel = "dequant_gather_v4", .check_contents = 1};
  s = dsv4rt_dequant_gather(b, &a, &o);
  if (!s)
    s = dsv4rt_synchronize(ctx);
  snprintf(m, sizeof m, "%s", s ? dsv4rt_last_error(ctx) : "ran");
  return s ? REFUSED_LAUNCH : RAN;
}

/* Run one image in a child; its exit code, or -signal. */
static int run(const uint8_t *img, size_t size, char *msg, size_t msg_len)
{
  int fd[2];
  if (pipe(fd))
    return -1000;
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    alarm(60);
    const char *m = "";
    int r = child(img, size, &m);
    if (write(fd[1], m, strlen(m)) < 0)
      r = CHILD_FAIL;
    _exit(r);
  }
  close(fd[1]);
  ssize_t got = 0, r;
  while (pid > 0 && (size_t)got < msg_len - 1 && (r = read(fd[0], msg + got, msg_len - 1 - (size_t)got)) > 0)
    got += r;
  msg[got > 0 ? got : 0] = 0;
  close(fd[0]);
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) != pid)
    return -1000;
  return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? -WTERMSIG(st) : -1000;
}

/* The entry of the spirv dequant_gather_v4 in the image, or NULL. */
static const dsv4_bundle_entry *find_entry(const uint8_t *img, dsv4_bundle_entry *e)
{
  uint32_t n;
  memcpy(&n, img + DSV4_BUNDLE_AT_NENTRIES, 4);
  for (uint32_t i = 0; i < n && i < DSV4_BUNDLE_MAX_ENTRIES; i++) {
    memcpy(e, img + DSV4_BUNDLE_HEADER_BYTES + (size_t)i * sizeof *e, sizeof *e);
    if (!strcmp(e->name, "dequant_gather_v4") && e->target == 2 && e->aux_len)
      return e;
  }
  return NULL;
}

static int bit(const uint8_t *p, uint64_t k) { return p[k >> 3] >> (k & 7) & 1; }

static int counts[4]; /* ran, refused at open, refused at launch, killed */

/* One mutant: run it, count how it ended, fail on a signal. */
static void mutant(const uint8_t *img, size_t size, const char *what)
{
  char msg[1024];
  int r = run(img, size, msg, sizeof msg);
  int k = r == RAN ? 0 : r == REFUSED_OPEN ? 1 : r == REFUSED_LAUNCH ? 2 : 3;
  counts[k]++;
  CHECK(k < 3, "%s: the process ended with %s %d (%s)", what, r < 0 ? "signal" : "exit code", r < 0 ? -r : r,
        r == -SIGALRM ? "still running after 60 s" : msg);
  if (k == 3 || getenv("DSV4_TEST_VERBOSE"))
    printf("%s: %s: %.300s\n", what,
           k == 0   ? "ran"
           : k == 1 ? "refused at open"
           : k == 2 ? "refused at launch"
                    : "killed",
           msg);
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: test_code_mutants DECODE_BUNDLE\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  setenv("POCL_KERNEL_CACHE", "0", 1); /* the mutants' builds are not kept */
  if (access(argv[1], F_OK)) { /* a build without the compiler writes no bundle */
    printf("no bundle at %s: built without DSV4C_BUILD_COMPILER?\n", argv[1]);
    return 77;
  }
  size_t size = 0;
  uint8_t *orig = read_file(argv[1], &size), *img = orig ? malloc(size) : NULL;
  dsv4_bundle_entry e;
  if (!img || !find_entry(orig, &e)) {
    printf("FAIL: %s: cannot read it, or it has no spirv dequant_gather_v4 with a SPIR 1.2 fallback\n", argv[1]);
    return 1;
  }
  char msg[1024];
  int r = run(orig, size, msg, sizeof msg);
  if (r == NO_DEVICE) {
    printf("no OpenCL device: %s\n", msg);
    return 77;
  }
  CHECK(r == RAN, "the bundle unchanged does not run: %d (%s)", r, msg);
  if (r != RAN)
    return 1;

  /* the bitcode: every bit of each run of 38 one-bits */
  const uint8_t *bc = orig + e.aux_off;
  uint64_t nbits = e.aux_len * 8;
  int runs = 0, flips = 0;
  for (uint64_t k = 0; k < nbits;) {
    uint64_t j = k;
    while (j < nbits && bit(bc, j))
      j++;
    if (j - k == 38 && (j == nbits || !bit(bc, j))) {
      runs++;
      for (uint64_t f = k; f < j; f++) {
        char what[96];
        memcpy(img, orig, size);
        img[e.aux_off + f / 8] ^= (uint8_t)(1u << (f % 8));
        fix_crc(img, size);
        snprintf(what, sizeof what, "bitcode bit %llu flipped", (unsigned long long)f);
        mutant(img, size, what);
        flips++;
      }
    }
    k = j + 1;
  }
  CHECK(runs > 0, "the bitcode has no run of 38 one-bits (no attribute index 0xFFFFFFFF?)");
  int bitcode_refused = counts[1] + counts[2];

  /* the SPIR-V header and first instruction */
  static const struct {
    uint32_t word, xor_;
    const char *what;
  } sv[] = {{0, 0x01000000u, "SPIR-V magic"},       {1, 0x00ff0000u, "SPIR-V major version"},
            {3, 0xfff00000u, "SPIR-V id bound"},     {4, 1u, "SPIR-V schema"},
            {5, 0xffff0000u, "first instruction's word count"}};
  int before = counts[1];
  for (size_t k = 0; k < sizeof sv / sizeof *sv; k++) {
    memcpy(img, orig, size);
    uint32_t w;
    memcpy(&w, img + e.code_off + 4 * sv[k].word, 4);
    w ^= sv[k].xor_;
    memcpy(img + e.code_off + 4 * sv[k].word, &w, 4);
    fix_crc(img, size);
    mutant(img, size, sv[k].what);
  }
  CHECK(counts[1] - before == (int)(sizeof sv / sizeof *sv), "%d of %d SPIR-V header mutants refused at open",
        counts[1] - before, (int)(sizeof sv / sizeof *sv));

  printf("%d bitcode mutants (%d runs of one-bits): %d refused; SPIR-V: %d; in all %d ran, %d refused at open, "
         "%d refused at launch, %d killed the process\n",
         flips, runs, bitcode_refused, (int)(sizeof sv / sizeof *sv), counts[0], counts[1], counts[2], counts[3]);
  printf("%d passed, %d failed\n", passed, failed);
  free(orig), free(img);
  return failed ? 1 : 0;
}
