/* test_hsaco.c -- unit tests for dsv4_hsaco_check (targets/hsaco_check.c)
 * and the one code-object metadata reader under it (common/hsaco_meta.c).
 *
 *   usage: test_hsaco hsaco_k.hsaco hsaco_regs.hsaco DEQUANT_GATHER.hsaco SPARSE_DECODE.hsaco
 *
 * The first two are fixtures built from tests/unit/data/ for gfx942 (llc
 * -filetype=obj, then ld.lld -shared): k, the smallest kernel, and r, one
 * that uses 128 VGPRs and 72 AGPRs at most 256 threads (and many, of 98
 * arguments: more than the reader takes).  Both keep LLVM's
 * hidden arguments after their explicit ones.  The last two are code
 * objects dsv4c wrote for the bundle the execution tests run
 * (build/kernels/dequant_gather_v4.hsaco and sparse_decode_v4.hsaco).
 * Mutants patch bytes of the MessagePack metadata in place (same length)
 * and must be refused by the reader or by the launch check with the
 * expected message.  Every call that feeds mutated bytes uses an
 * exact-size heap copy so ASan/valgrind catch any overread.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4_abi.h"
#include "hsaco_check.h"
#include "hsaco_meta.h"

static int passed, failed;

/* Record one expectation; print details only on failure. */
static void expect(int ok, const char *what, const char *err) {
  if (ok) {
    passed++;
  } else {
    failed++;
    printf("FAIL %s (err: %s)\n", what, err ? err : "");
  }
}

/* Check an exact-size copy of buf[0..n) and return the result code. */
static int check_copy(const unsigned char *buf, size_t n, const char *gpu,
                      const char *const *k, int nk, char *err, size_t errlen) {
  unsigned char *copy = malloc(n ? n : 1);
  int r;
  if (!copy) {
    printf("out of memory\n");
    exit(1);
  }
  memcpy(copy, buf, n);
  r = dsv4_hsaco_check(n ? copy : NULL, n, gpu, k, nk, err, errlen);
  free(copy);
  return r;
}

/* Replace every occurrence of pattern `from` with `to` (same length) in a
 * copy of buf; returns the copy (caller frees) and the count in *hits. */
static unsigned char *patch(const unsigned char *buf, size_t n,
                            const char *from, const char *to, size_t plen,
                            int *hits) {
  unsigned char *c = malloc(n);
  size_t i;
  if (!c) exit(1);
  memcpy(c, buf, n);
  *hits = 0;
  for (i = 0; i + plen <= n; i++) {
    if (memcmp(c + i, from, plen) == 0) {
      memcpy(c + i, to, plen);
      (*hits)++;
    }
  }
  return c;
}

/* Does err contain needle? */
static int has(const char *err, const char *needle) {
  return strstr(err, needle) != NULL;
}

/* dsv4_hsaco_check on the fixture hsaco_k (buf[0..n)): the real file,
 * wrong requests, targeted corruptions, truncations, byte corruptions. */
static void whole_object(const unsigned char *buf, size_t n) {
  static const char *const K[] = {"k"};
  static const char *const KK[] = {"k", "k"};
  static const char *const MISSING[] = {"nope"};
  static const char *const SOME_MISSING[] = {"k", "k2"};
  char err[256];
  size_t i;
  int r, hits;

  /* The real file is valid. */
  r = check_copy(buf, n, "gfx942", K, 1, err, sizeof err);
  expect(r == 0, "valid file, kernel k", err);
  r = check_copy(buf, n, "gfx942", NULL, 0, err, sizeof err);
  expect(r == 0, "valid file, no kernels named", err);
  r = check_copy(buf, n, "gfx942", KK, 2, err, sizeof err);
  expect(r == 0, "valid file, k named twice", err);

  /* Wrong requests fail with a message. */
  r = check_copy(buf, n, "gfx942", MISSING, 1, err, sizeof err);
  expect(r != 0 && has(err, "'nope'"), "missing kernel", err);
  printf("missing kernel: %s\n", err);
  r = check_copy(buf, n, "gfx942", SOME_MISSING, 2, err, sizeof err);
  expect(r != 0 && has(err, "'k2'"), "one of two kernels missing", err);
  r = check_copy(buf, n, "gfx90a", K, 1, err, sizeof err);
  expect(r != 0 && has(err, "e_flags"), "wrong gpu gfx90a", err);
  printf("wrong gpu: %s\n", err);
  r = check_copy(buf, n, "gfx94", K, 1, err, sizeof err);
  expect(r != 0 && has(err, "unknown gpu"), "unknown gpu", err);
  r = check_copy(buf, n, "gfx942", K, 1, NULL, 0);
  expect(r == 0, "valid file with NULL err buffer", "");
  r = dsv4_hsaco_check(NULL, 0, "gfx942", K, 1, err, sizeof err);
  expect(r != 0, "NULL file", err);
  r = check_copy(buf, n, "gfx90a", K, 1, err, 8);
  expect(r != 0 && strlen(err) == 7, "message truncated to errlen", err);

  /* Targeted corruptions fail for the right reason. */
  {
    unsigned char *c = patch(buf, n, "amdhsa--gfx942", "amdhsa--gfx94x", 14, &hits);
    r = dsv4_hsaco_check(c, n, "gfx942", K, 1, err, sizeof err);
    expect(hits == 1 && r != 0 && has(err, "amdhsa.target"), "target mismatch", err);
    printf("target mismatch: %s\n", err);
    free(c);
  }
  {
    unsigned char *c = patch(buf, n, "\0k.kd\0", "\0k.kx\0", 6, &hits);
    r = dsv4_hsaco_check(c, n, "gfx942", K, 1, err, sizeof err);
    expect(hits == 2 && r != 0 && has(err, "'k.kd'"), "no k.kd symbol", err);
    printf("no k.kd symbol: %s\n", err);
    free(c);
  }
  {
    unsigned char *c = patch(buf, n, "\0k\0", "\0j\0", 3, &hits);
    r = dsv4_hsaco_check(c, n, "gfx942", K, 1, err, sizeof err);
    expect(hits == 2 && r != 0 && has(err, "STT_FUNC"), "no k function symbol", err);
    free(c);
  }
  {
    unsigned char *c = patch(buf, n, ".max_flat_workgroup_size",
                             ".max_flat_workgroup_sizX", 24, &hits);
    r = dsv4_hsaco_check(c, n, "gfx942", K, 1, err, sizeof err);
    expect(hits == 1 && r != 0 && has(err, ".max_flat_workgroup_size"),
           "missing .max_flat_workgroup_size", err);
    printf("missing field: %s\n", err);
    free(c);
  }
  {
    unsigned char *c = patch(buf, n, "\xa4k.kd", "\xa4k.kx", 5, &hits);
    r = dsv4_hsaco_check(c, n, "gfx942", K, 1, err, sizeof err);
    expect(hits == 1 && r != 0 && has(err, ".symbol"), "bad .symbol", err);
    free(c);
  }
  {
    static const struct { size_t off; unsigned char val; const char *what; } hdr[] = {
        {0, 0x7e, "magic"}, {4, 1, "ELFCLASS32"}, {5, 2, "big-endian"},
        {7, 0, "OS ABI"}, {8, 1, "ABI version v3"}, {8, 4, "ABI version v6"},
        {16, 1, "ET_REL"}, {18, 62, "EM_X86_64"}, {48, 0x3f, "e_flags gfx90a"},
        {60, 0, "no sections"}, {41, 0x7f, "e_shoff huge"},
    };
    size_t h;
    for (h = 0; h < sizeof hdr / sizeof hdr[0]; h++) {
      unsigned char *c = malloc(n);
      if (!c) exit(1);
      memcpy(c, buf, n);
      c[hdr[h].off] = hdr[h].val;
      r = dsv4_hsaco_check(c, n, "gfx942", K, 1, err, sizeof err);
      expect(r != 0, hdr[h].what, err);
      free(c);
    }
  }

  /* Every truncation (step 7, plus len-1) fails without crashing. */
  {
    int bad = 0, count = 0;
    for (i = 0; i < n; i += 7) {
      count++;
      if (check_copy(buf, i, "gfx942", K, 1, err, sizeof err) == 0) bad++;
    }
    count++;
    if (check_copy(buf, n - 1, "gfx942", K, 1, err, sizeof err) == 0) bad++;
    expect(bad == 0, "all truncations fail", "a truncated file passed");
    printf("truncations: %d lengths checked, %d passed (want 0)\n", count, bad);
  }

  /* Single-byte corruptions: every offset once, plus random ones.  They may
   * pass or fail; the point is that none crashes or reads out of bounds. */
  {
    unsigned long seed = 12345;
    int npass = 0, nfail = 0, k;
    unsigned char *c = malloc(n);
    if (!c) exit(1);
    for (k = 0; k < (int)n + 500; k++) {
      size_t off;
      unsigned char val;
      seed = seed * 6364136223846793005ul + 1442695040888963407ul;
      off = k < (int)n ? (size_t)k : (size_t)((seed >> 33) % n);
      val = (unsigned char)(seed >> 25);
      if (val == buf[off]) val ^= 0x5a;
      memcpy(c, buf, n);
      c[off] = val;
      if (dsv4_hsaco_check(c, n, "gfx942", K, 1, err, sizeof err) == 0) npass++;
      else nfail++;
    }
    free(c);
    expect(npass + nfail == (int)n + 500, "corruptions ran", "");
    printf("corruptions: %d run, %d still valid, %d rejected\n", npass + nfail,
           npass, nfail);
  }

  /* Every offset again with bytes that are MessagePack/ELF edge values
   * (huge map/array/str headers, the reserved 0xc1, 0, 0xff). */
  {
    static const unsigned char vals[] = {0x00, 0xff, 0xc1, 0xdf, 0xdd,
                                         0xdb, 0xcf, 0xc9, 0x9f, 0x8f};
    int npass = 0, nfail = 0;
    size_t v;
    unsigned char *c = malloc(n);
    if (!c) exit(1);
    for (i = 0; i < n; i++) {
      for (v = 0; v < sizeof vals; v++) {
        if (buf[i] == vals[v]) continue;
        memcpy(c, buf, n);
        c[i] = vals[v];
        if (dsv4_hsaco_check(c, n, "gfx942", K, 1, err, sizeof err) == 0) npass++;
        else nfail++;
      }
    }
    free(c);
    expect(npass + nfail > 0, "edge-value corruptions ran", "");
    printf("edge-value corruptions: %d run, %d still valid, %d rejected\n",
           npass + nfail, npass, nfail);
  }

}

/* ---- the metadata reader and the launch check ---- */

/* The whole of a file (malloc'd) and its size; exits when it cannot. */
static unsigned char *load(const char *path, size_t *n) {
  FILE *fp = fopen(path, "rb");
  long sz;
  unsigned char *buf;
  if (!fp || fseek(fp, 0, SEEK_END) != 0 || (sz = ftell(fp)) <= 0 || fseek(fp, 0, SEEK_SET) != 0) {
    printf("cannot read %s\n", path);
    exit(1);
  }
  *n = (size_t)sz;
  buf = malloc(*n);
  if (!buf || fread(buf, 1, *n, fp) != *n) {
    printf("cannot read %s\n", path);
    exit(1);
  }
  fclose(fp);
  return buf;
}

/* Kernel name's metadata from an exact-size copy of buf[0..n). */
static int meta_copy(const unsigned char *buf, size_t n, const char *name, dsv4_hsaco_kernel *m, char *err,
                     size_t errlen) {
  unsigned char *copy = malloc(n ? n : 1);
  int r;
  if (!copy)
    exit(1);
  memcpy(copy, buf, n);
  r = dsv4_hsaco_kernel_meta(n ? copy : NULL, n, name, m, err, errlen);
  free(copy);
  return r;
}

/* One explicit argument as the test expects it, written out by hand from
 * dsv4_abi.h's list and the natural-alignment rule. */
typedef struct {
  uint32_t offset, size;
  int kind;
} want_arg;

#define G DSV4_HSACO_ARG_GLOBAL
#define V DSV4_HSACO_ARG_VALUE

/* dequant_gather(out, cache, indices, n, num_blocks, block_size, block_stride, tensor_scale) */
static const want_arg DEQUANT[] = {{0, 8, G},  {8, 8, G},  {16, 8, G}, {24, 4, V},
                                   {28, 4, V}, {32, 4, V}, {40, 8, V}, {48, 4, V}};

/* Do m's first nw arguments match w, in order? */
static int args_are(const dsv4_hsaco_kernel *m, const want_arg *w, int nw) {
  if (m->nargs < nw)
    return 0;
  for (int i = 0; i < nw; i++)
    if (m->args[i].offset != w[i].offset || m->args[i].size != w[i].size || m->args[i].kind != w[i].kind)
      return 0;
  return 1;
}

/* A mutant: bytes `from` replaced by `to` (len bytes, found exactly once),
 * then kernel `name` read and held to the launch `kinds`/nk at `threads`
 * (0: the kernel's .max_flat_workgroup_size) with `dyn` bytes of dynamic
 * LDS.  stage: which refuses it (1 the reader, 2 the launch check, 0
 * neither), with needle in the message. */
typedef struct {
  const char *what, *from, *to;
  size_t len;
  int stage;
  const char *needle;
  uint32_t threads;
} mutant;

#define PATCH(a, b) a, b, sizeof(a) - 1

/* Run the mutants of table mu[0..n) on buf[0..len). */
static void mutants(const unsigned char *buf, size_t len, const char *name, const unsigned char *kinds, int nk,
                    const mutant *mu, int n) {
  for (int i = 0; i < n; i++) {
    dsv4_hsaco_kernel m;
    char err[512] = "";
    int hits, stage = 0;
    unsigned char *c = patch(buf, len, mu[i].from, mu[i].to, mu[i].len, &hits);
    if (dsv4_hsaco_kernel_meta(c, len, name, &m, err, sizeof err))
      stage = 1;
    else if (dsv4_hsaco_launch_agrees(&m, "gfx942", kinds, nk, mu[i].threads ? mu[i].threads : m.max_flat_workgroup,
                                      0, err, sizeof err))
      stage = 2;
    free(c);
    int ok = hits == 1 && stage == mu[i].stage && (stage ? has(err, mu[i].needle) : !err[0]);
    char why[640];
    snprintf(why, sizeof why, "%d hits, stage %d: %s", hits, stage, err);
    expect(ok, mu[i].what, why);
    printf("mutant %s: %s\n", mu[i].what, err[0] ? err : "(agrees)");
  }
}

/* launch_agrees on m, message must hold needle (NULL: must agree). */
static void launch(const dsv4_hsaco_kernel *m, const char *gpu, const unsigned char *kinds, int nk, uint32_t threads,
                   uint32_t dyn, const char *what, const char *needle) {
  char err[512] = "";
  int r = dsv4_hsaco_launch_agrees(m, gpu, kinds, nk, threads, dyn, err, sizeof err);
  expect(needle ? r != 0 && has(err, needle) : r == 0, what, err);
  if (needle)
    printf("%s: %s\n", what, err);
}

/* dsv4c's dequant_gather_v4: its arguments read as written, the launch
 * check's refusals of wrong lists and launches, byte mutants, and every
 * byte corrupted never accepted with another layout. */
static void dequant(const unsigned char *buf, size_t n) {
  static const char *name = "dequant_gather_v4";
  unsigned char kinds[DSV4_MAX_ARGS], bad[DSV4_MAX_ARGS];
  int nk = dsv4_op_args(DSV4_OP_DEQUANT_GATHER, kinds, NULL);
  dsv4_hsaco_kernel m, big;
  dsv4_hsaco_object o;
  char err[512];

  expect(dsv4_hsaco_object_read(buf, n, &o, err, sizeof err) == 0 && o.mach == 0x4c && o.abi_version == 3 &&
             o.nkernels == 1 && strncmp(o.target, "amdgcn-amd-amdhsa--gfx942", 25) == 0,
         "dequant_gather: the object's processor, code object v5, target, one kernel", err);
  expect(meta_copy(buf, n, name, &m, err, sizeof err) == 0, "dequant_gather: metadata read", err);
  expect(!strcmp(m.name, name) && m.nargs == nk && nk == 8 && args_are(&m, DEQUANT, 8),
         "dequant_gather: its 8 arguments in order, at their offsets, of their sizes and kinds", "");
  expect(m.kernarg_size == 52 && dsv4_hsaco_explicit_bytes(&m) == 52 && m.wavefront == 64 && m.vgprs > 0 &&
             m.sgprs > 0 && m.agprs == 0 && m.group_segment == 0 && m.kernarg_align == 8,
         "dequant_gather: 52 kernarg bytes, all explicit; wave64; registers", "");
  expect(!strcmp(m.args[0].value_kind, "global_buffer") && !strcmp(m.args[7].value_kind, "by_value"),
         "dequant_gather: .value_kind kept as written", m.args[0].value_kind);
  launch(&m, "gfx942", kinds, nk, m.max_flat_workgroup, 0, "dequant_gather agrees with its list", NULL);
  launch(&m, "gfx942:sramecc+:xnack-", kinds, nk, m.max_flat_workgroup, 0, "target features ignored", NULL);
  launch(&m, "gfx90a", kinds, nk, 64, 0, "gfx90a too", NULL);
  launch(&m, "gfx942", kinds, nk, 64, 65536, "all 64 KiB of LDS dynamic", NULL);

  /* wrong lists */
  memcpy(bad, kinds, (size_t)nk);
  bad[3] = DSV4_ARG_I64;
  launch(&m, "gfx942", bad, nk, 64, 0, "n passed as I64",
         "argument 3 is by_value of 4 bytes at offset 24 in the code object; the launch passes I64 (by_value of 8 "
         "bytes) at offset 24");
  memcpy(bad, kinds, (size_t)nk);
  bad[0] = DSV4_ARG_I64;
  launch(&m, "gfx942", bad, nk, 64, 0, "a pointer passed as I64 (same size)",
         "argument 0 is global_buffer of 8 bytes at offset 0 in the code object; the launch passes I64");
  memcpy(bad, kinds, (size_t)nk);
  bad[2] = 9;
  launch(&m, "gfx942", bad, nk, 64, 0, "a kind that is none", "argument 2 has kind 9, which is no dsv4_arg_kind");
  launch(&m, "gfx942", kinds, nk - 1, 64, 0, "one argument short",
         "argument 7 of the code object (by_value) follows the launch's 7 explicit arguments and is not a hidden one");
  memcpy(bad, kinds, (size_t)nk);
  bad[nk] = DSV4_ARG_I32;
  launch(&m, "gfx942", bad, nk + 1, 64, 0, "one argument more", "the code object has 8 arguments, the launch passes 9");
  launch(&m, "gfx942", NULL, nk, 64, 0, "no kinds", "out of range");

  /* wrong launches */
  launch(&m, "gfx942", kinds, nk, 0, 0, "no threads", "the launch record's 0 threads");
  launch(&m, "gfx942", kinds, nk, m.max_flat_workgroup + 64, 0, "more threads than .max_flat_workgroup_size",
         "threads a work-group are not within .max_flat_workgroup_size");
  big = m;
  big.max_flat_workgroup = 4096;
  launch(&big, "gfx942", kinds, nk, 2048, 0, "more threads than the arch's work-group", "(gfx942: at most 1024)");
  launch(&m, "gfx942", kinds, nk, 64, 65537, "dynamic LDS past 64 KiB",
         "the launch record's 65537 dynamic are more than the 65536 a work-group of gfx942 has");
  launch(&m, "gfx1100", kinds, nk, 64, 0, "unknown gpu", "unknown gpu 'gfx1100'");
  launch(&m, "gfx950", kinds, nk, 64, 0, "unknown gpu (160 KiB LDS there)", "unknown gpu 'gfx950'");
  launch(&m, NULL, kinds, nk, 64, 0, "no gpu", "unknown gpu ''");

  {
    static const mutant mu[] = {
        {"an offset (n: 24 -> 28)", PATCH("\xa7.offset\x18\xa5.size", "\xa7.offset\x1c\xa5.size"), 2,
         "argument 3 is by_value of 4 bytes at offset 28 in the code object; the launch passes I32 (by_value of 4 "
         "bytes) at offset 24", 0},
        {"a size (n: 4 -> 8)", PATCH("\xa7.offset\x18\xa5.size\x04", "\xa7.offset\x18\xa5.size\x08"), 2,
         "argument 3 is by_value of 8 bytes at offset 24", 0},
        {"a value_kind (cache: hidden)", PATCH("\xa7.offset\x08\xa5.size\x08\xab.value_kind\xadglobal_buffer",
                                               "\xa7.offset\x08\xa5.size\x08\xab.value_kind\xadhidden_global"),
         2, "argument 1 is hidden_global of 8 bytes at offset 8 in the code object; the launch passes IN", 0},
        {"a value_kind (n: unknown)", PATCH("\xa7.offset\x18\xa5.size\x04\xab.value_kind\xa8"
                                            "by_value",
                                            "\xa7.offset\x18\xa5.size\x04\xab.value_kind\xa8"
                                            "by_valuX"),
         2, "argument 3 is by_valuX of 4 bytes", 0},
        {"the wavefront (32)", PATCH("\xaf.wavefront_size\x40", "\xaf.wavefront_size\x20"), 2,
         ".wavefront_size is 32, gfx942 runs waves of 64", 0},
        {"the wavefront (nil)", PATCH("\xaf.wavefront_size\x40", "\xaf.wavefront_size\xc0"), 1,
         ".wavefront_size is not an unsigned 32-bit integer", 0},
        {"the kernarg segment (52 -> 48)", PATCH("\xb5.kernarg_segment_size\x34", "\xb5.kernarg_segment_size\x30"), 1,
         "argument 7 (by_value) at offset 48 of 4 bytes ends past .kernarg_segment_size 48", 0},
        {"the kernarg alignment (6)", PATCH("\xb6.kernarg_segment_align\x08", "\xb6.kernarg_segment_align\x06"), 1,
         ".kernarg_segment_align 6 is not a power of two", 0},
        {"the SGPRs (109)", PATCH("\xab.sgpr_count\x12", "\xab.sgpr_count\x6d"), 2,
         ".sgpr_count 109 is more than the 108 SGPRs a wave of gfx942 has", 0},
        {"the SGPRs (108: the most)", PATCH("\xab.sgpr_count\x12", "\xab.sgpr_count\x6c"), 0, "", 0},
        {".vgpr_count twice", PATCH("\xab.agpr_count", "\xab.vgpr_count"), 1, "has .vgpr_count twice", 0},
        {".vgpr_count missing", PATCH("\xab.vgpr_count", "\xab.vgpr_counX"), 1, "lacks .vgpr_count", 0},
    };
    mutants(buf, n, name, kinds, nk, mu, (int)(sizeof mu / sizeof mu[0]));
  }

  /* every length short of the file is refused (the section headers end it) */
  {
    int accepted = 0, count = 0;
    for (size_t i = 0; i < n; i += 5, count++)
      accepted += meta_copy(buf, i, name, &m, err, sizeof err) == 0;
    accepted += meta_copy(buf, n - 1, name, &m, err, sizeof err) == 0;
    expect(accepted == 0, "dequant_gather: every truncation refused", "a truncated file was read");
    printf("dequant_gather truncations: %d lengths, %d read (want 0)\n", count + 1, accepted);
  }

  /* every byte set to edge values: whatever the reader and the launch
   * check accept still has the layout the launch passes */
  {
    static const unsigned char vals[] = {0x00, 0xff, 0xc1, 0xdc, 0xdf, 0xcf, 0x7f};
    int runs = 0, accepted = 0, wrong = 0;
    unsigned char *c = malloc(n);
    if (!c)
      exit(1);
    for (size_t i = 0; i < n; i++) {
      for (size_t v = 0; v < sizeof vals; v++) {
        if (buf[i] == vals[v])
          continue;
        memcpy(c, buf, n);
        c[i] = vals[v];
        runs++;
        if (dsv4_hsaco_kernel_meta(c, n, name, &m, err, sizeof err) ||
            dsv4_hsaco_launch_agrees(&m, "gfx942", kinds, nk, m.max_flat_workgroup, 0, err, sizeof err))
          continue;
        accepted++;
        if (!args_are(&m, DEQUANT, 8) || m.wavefront != 64 || dsv4_hsaco_explicit_bytes(&m) != 52 ||
            m.max_flat_workgroup > 1024)
          wrong++;
      }
    }
    free(c);
    expect(runs > 0 && wrong == 0, "dequant_gather: no corruption accepted with another layout", "");
    printf("dequant_gather corruptions: %d run, %d accepted (the same layout), %d accepted with another (want 0)\n",
           runs, accepted, wrong);
  }
}

/* dsv4c's sparse_decode_v4: 43 arguments, the strides at the end. */
static void decode(const unsigned char *buf, size_t n) {
  static const char *name = "sparse_decode_v4";
  unsigned char kinds[DSV4_MAX_ARGS];
  int nk = dsv4_op_args(DSV4_OP_SPARSE_DECODE, kinds, NULL);
  dsv4_hsaco_kernel m;
  char err[512];
  expect(meta_copy(buf, n, name, &m, err, sizeof err) == 0, "sparse_decode: metadata read", err);
  static const struct {
    int i;
    want_arg w;
  } spots[] = {{0, {0, 8, G}},     {9, {72, 8, G}},   {10, {80, 4, V}},  {15, {104, 8, V}},
               {22, {144, 4, V}},  {23, {152, 8, G}}, {25, {164, 4, V}}, {26, {168, 8, V}},
               {42, {296, 8, V}}};
  int spots_ok = m.nargs == nk && nk == 43;
  for (size_t s = 0; s < sizeof spots / sizeof spots[0] && spots_ok; s++)
    spots_ok = m.args[spots[s].i].offset == spots[s].w.offset &&
               m.args[spots[s].i].size == spots[s].w.size && m.args[spots[s].i].kind == spots[s].w.kind;
  expect(spots_ok, "sparse_decode: 43 arguments; out, attn_sink, n_tokens, block_stride, tensor_scale, work, "
                   "seq_q, q_sb, extra_lens_ss where written", "");
  /* (its reductions cross lanes by ds_bpermute: no static LDS left; the
   * LDS rows below hold for any static size) */
  expect(m.kernarg_size == 304 && dsv4_hsaco_explicit_bytes(&m) == 304 && m.wavefront == 64 &&
             m.group_segment < 65536,
         "sparse_decode: 304 kernarg bytes, wave64, static LDS under 64 KiB", "");
  launch(&m, "gfx942", kinds, nk, m.max_flat_workgroup, 0, "sparse_decode agrees with its list", NULL);
  uint32_t room = 65536 - m.group_segment;
  char over[160];
  snprintf(over, sizeof over, "%u bytes of static LDS (.group_segment_fixed_size) and the launch record's %u dynamic",
           m.group_segment, room + 1);
  launch(&m, "gfx942", kinds, nk, m.max_flat_workgroup, room, "sparse_decode: LDS to the last byte", NULL);
  launch(&m, "gfx942", kinds, nk, m.max_flat_workgroup, room + 1, "sparse_decode: one LDS byte over", over);
  {
    static const mutant mu[] = {
        {"an offset (work: 152 -> 160)", PATCH("\xa7.offset\xcc\x98", "\xa7.offset\xcc\xa0"), 2,
         "argument 23 is global_buffer of 8 bytes at offset 160 in the code object; the launch passes PTR", 0},
        {"an .args count that lies (97)", PATCH("\xa5.args\xdc\x00\x2b", "\xa5.args\xdc\x00\x61"), 1,
         "hsaco: malformed MessagePack metadata", 0},
    };
    mutants(buf, n, name, kinds, nk, mu, (int)(sizeof mu / sizeof mu[0]));
  }
  {
    dsv4_hsaco_kernel e;
    expect(dsv4_hsaco_kernel_at(buf, n, 0, &e, err, sizeof err) == 0 && !strcmp(e.name, name),
           "sparse_decode: entry 0 by index", err);
    expect(dsv4_hsaco_kernel_at(buf, n, 1, &e, err, sizeof err) != 0 && has(err, "no entry 1"),
           "sparse_decode: no entry 1", err);
    expect(dsv4_hsaco_kernel_at(buf, n, -1, &e, err, sizeof err) != 0, "sparse_decode: no entry -1", err);
  }
}

/* The fixtures' hidden arguments (after the explicit ones) and the
 * unified register file at the work-group sizes that fit it or not. */
static void fixtures(const unsigned char *k, size_t kn, const unsigned char *r, size_t rn) {
  static const unsigned char PTR_ONLY[] = {DSV4_ARG_PTR}, PTR_I32[] = {DSV4_ARG_PTR, DSV4_ARG_I32};
  dsv4_hsaco_kernel m, w;
  char err[512];
  int hidden_after = 1;

  expect(meta_copy(k, kn, "k", &m, err, sizeof err) == 0, "k: metadata read", err);
  for (int i = 1; i < m.nargs; i++)
    hidden_after &= m.args[i].kind == DSV4_HSACO_ARG_HIDDEN && m.args[i].offset >= 8 &&
                    !strncmp(m.args[i].value_kind, "hidden_", 7);
  expect(m.nargs == 20 && m.args[0].kind == DSV4_HSACO_ARG_GLOBAL && m.args[0].offset == 0 && m.args[0].size == 8 &&
             hidden_after && dsv4_hsaco_explicit_bytes(&m) == 8 && m.kernarg_size > 8,
         "k: one pointer, then 19 hidden arguments, explicit block 8 bytes", "");
  launch(&m, "gfx942", PTR_ONLY, 1, 1024, 0, "k: {PTR} at 1024 threads", NULL);
  launch(&m, "gfx942", PTR_I32, 2, 64, 0, "k: a hidden argument where the launch passes one",
         "argument 1 is hidden_block_count_x of 4 bytes at offset 8 in the code object; the launch passes I32");
  launch(&m, "gfx942", PTR_ONLY, 0, 64, 0, "k: the launch passes none",
         "argument 0 of the code object (global_buffer) follows the launch's 0 explicit arguments");

  expect(meta_copy(r, rn, "r", &m, err, sizeof err) == 0, "r: metadata read", err);
  expect(m.vgprs == 200 && m.agprs == 72 && m.max_flat_workgroup == 256 && dsv4_hsaco_explicit_bytes(&m) == 12 &&
             m.args[1].kind == DSV4_HSACO_ARG_VALUE && m.args[2].kind == DSV4_HSACO_ARG_HIDDEN,
         "r: .vgpr_count 200 holds its 72 AGPRs (alignup(128, 4) + 72); hidden after n", "");
  launch(&m, "gfx942", PTR_I32, 2, 256, 0, "r at 256 threads (one wave a SIMD)", NULL);
  expect(meta_copy(r, rn, "many", &w, err, sizeof err) != 0 && has(err, "kernel 'many' has") &&
             has(err, "arguments, more than the 96 read"),
         "many: more arguments than the reader takes", err);
  {
    static const char *const R[] = {"r"};
    expect(check_copy(r, rn, "gfx942", R, 1, err, sizeof err) != 0 && has(err, "more than the 96 read"),
           "the whole-object check reads every entry, many too", err);
  }
  launch(&m, "gfx942", PTR_I32, 2, 257, 0, "r at 257 threads", "not within .max_flat_workgroup_size 256");
  w = m;
  w.vgprs = 330;
  launch(&w, "gfx942", PTR_I32, 2, 64, 0, "r with 258 arch VGPRs", "258 VGPRs and 72 AGPRs (.vgpr_count 330)");
  w = m;
  w.sgprs = 108;
  launch(&w, "gfx90a", PTR_I32, 2, 64, 0, "r with 108 SGPRs on gfx90a", NULL);
  {
    static const mutant mu[] = {
        /* 256 -> 1024: four waves a SIMD need 4 x 200 of the 512 registers */
        {"r at 1024 threads",
         PATCH("\xb8.max_flat_workgroup_size\xcd\x01\x00", "\xb8.max_flat_workgroup_size\xcd\x04\x00"), 2,
         "1024 threads put 4 waves on a SIMD, each taking 200 registers (.vgpr_count 200 in granules of 8): more "
         "than the 512 a SIMD lane of gfx942 has",
         1024},
        /* two waves of 200: .vgpr_count already holds the AGPRs, so they fit
         * (alignup(200, 4) + 72 would not) */
        {"r at 512 threads",
         PATCH("\xb8.max_flat_workgroup_size\xcd\x01\x00", "\xb8.max_flat_workgroup_size\xcd\x02\x00"), 0, "",
         512},
        {"r: fewer VGPRs than AGPRs", PATCH("\xab.vgpr_count\xcc\xc8", "\xab.vgpr_count\xcc\x40"), 2,
         ".agpr_count 72 is more than .vgpr_count 64", 64},
    };
    mutants(r, rn, "r", PTR_I32, 2, mu, (int)(sizeof mu / sizeof mu[0]));
  }
}

int main(int argc, char **argv) {
  size_t n[4];
  unsigned char *buf[4];
  if (argc < 5) {
    printf("usage: %s hsaco_k.hsaco hsaco_regs.hsaco dequant_gather_v4.hsaco sparse_decode_v4.hsaco\n", argv[0]);
    return 1;
  }
  for (int i = 0; i < 4; i++)
    buf[i] = load(argv[i + 1], &n[i]);
  whole_object(buf[0], n[0]);
  fixtures(buf[0], n[0], buf[1], n[1]);
  dequant(buf[2], n[2]);
  decode(buf[3], n[3]);
  for (int i = 0; i < 4; i++)
    free(buf[i]);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
