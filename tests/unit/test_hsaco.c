/* test_hsaco.c -- unit tests for dsv4_hsaco_check (targets/hsaco_check.c).
 *
 * argv[1] is a code object built from tests/unit/data/hsaco_k.ll for gfx942
 * (llc -filetype=obj, then ld.lld -shared).  Every call that feeds mutated
 * bytes uses an exact-size heap copy so ASan/valgrind catch any overread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hsaco_check.h"

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

/* Load argv[1] and run every case; exit status 1 when any failed. */
int main(int argc, char **argv) {
  static const char *const K[] = {"k"};
  static const char *const KK[] = {"k", "k"};
  static const char *const MISSING[] = {"nope"};
  static const char *const SOME_MISSING[] = {"k", "k2"};
  unsigned char *buf;
  char err[256];
  long sz;
  size_t n, i;
  FILE *fp;
  int r, hits;

  if (argc < 2) {
    printf("usage: %s hsaco_k.hsaco\n", argv[0]);
    return 1;
  }
  fp = fopen(argv[1], "rb");
  if (!fp || fseek(fp, 0, SEEK_END) != 0 || (sz = ftell(fp)) <= 0 ||
      fseek(fp, 0, SEEK_SET) != 0) {
    printf("cannot read %s\n", argv[1]);
    return 1;
  }
  n = (size_t)sz;
  buf = malloc(n);
  if (!buf || fread(buf, 1, n, fp) != n) {
    printf("cannot read %s\n", argv[1]);
    return 1;
  }
  fclose(fp);

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
      if (!c) return 1;
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
    if (!c) return 1;
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
    if (!c) return 1;
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

  free(buf);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
