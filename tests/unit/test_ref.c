/* test_ref.c -- unit test of the host reference (runtime/ref/dsv4_ref.c) and the golden loader.
 * Usage: test_ref GOLDEN_ROOT   (e.g. /work/shared/golden).  Exit 0 on pass, 1 on any failure. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp/rmdir for the loader's error-path fixtures */
#include "dsv4_check.h"
#include "dsv4_ref.h"
#include "golden_load.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int n_pass, n_fail;

/* Record and print one check. */
static void check(int ok, const char *name, const char *detail)
{
  if (ok) {
    n_pass++;
    printf("PASS %s\n", name);
  } else {
    n_fail++;
    printf("FAIL %s%s%s\n", name, detail && *detail ? ": " : "", detail ? detail : "");
  }
}

static uint32_t bits_of(float f)
{
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float float_of(uint32_t u)
{
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Independent e4m3fn definition from its fields, in double via ldexp. */
static double e4m3_indep(unsigned code, int *is_nan)
{
  int s = (code >> 7) & 1, e = (code >> 3) & 15, m = code & 7;
  double v;
  *is_nan = (e == 15 && m == 7);
  if (*is_nan)
    return NAN;
  v = e == 0 ? ldexp((double)m, -9) : ldexp(8.0 + m, e - 10);
  return s ? -v : v;
}

/* bf16 bit equality where any two NaNs are equal. */
static int bf16_same(uint16_t a, uint16_t b)
{
  int an = (a & 0x7F80) == 0x7F80 && (a & 0x7F);
  int bn = (b & 0x7F80) == 0x7F80 && (b & 0x7F);
  return an || bn ? an && bn : a == b;
}

static void test_e4m3(void)
{
  int bad = 0;
  char msg[128] = "";
  for (unsigned c = 0; c < 256; c++) {
    int nan;
    double want = e4m3_indep(c, &nan);
    float got = dsv4_ref_e4m3_to_f32((uint8_t)c);
    int ok = nan ? isnan(got) : (!isnan(got) && (double)got == want && !!signbit(got) == !!signbit(want));
    if (!ok && !bad++)
      snprintf(msg, sizeof msg, "code 0x%02X: got %a want %a", c, (double)got, want);
  }
  check(!bad, "e4m3 decode, all 256 codes vs ldexp definition", msg);
  check(dsv4_ref_e4m3_to_f32(0x7E) == 448.0f && dsv4_ref_e4m3_to_f32(0xFE) == -448.0f,
        "e4m3 max finite is +-448", "");
  check(dsv4_ref_e4m3_to_f32(0x01) == 0x1p-9f && dsv4_ref_e4m3_to_f32(0x07) == 7 * 0x1p-9f &&
            dsv4_ref_e4m3_to_f32(0x08) == 0x1p-6f,
        "e4m3 subnormals M/8*2^-6 and smallest normal 2^-6", "");
  check(isnan(dsv4_ref_e4m3_to_f32(0x7F)) && isnan(dsv4_ref_e4m3_to_f32(0xFF)) &&
            !isnan(dsv4_ref_e4m3_to_f32(0x78)) && dsv4_ref_e4m3_to_f32(0x78) == 256.0f,
        "e4m3 only 0x7F/0xFF are NaN, no inf (0x78 = 256)", "");
  check(bits_of(dsv4_ref_e4m3_to_f32(0x80)) == 0x80000000u, "e4m3 0x80 is -0.0", "");
}

static void test_bf16(void)
{
  static const struct {
    uint32_t in;
    uint16_t want;
    const char *what;
  } cases[] = {
      {0x3F800000u, 0x3F80, "1.0 exact"},
      {0x3F808000u, 0x3F80, "tie, even below stays"},
      {0x3F818000u, 0x3F82, "tie, odd below rounds up to even"},
      {0x3F808001u, 0x3F81, "just above tie rounds up"},
      {0x3F807FFFu, 0x3F80, "just below tie rounds down"},
      {0xBF818000u, 0xBF82, "negative tie to even"},
      {0x7F800000u, 0x7F80, "+inf"},
      {0xFF800000u, 0xFF80, "-inf"},
      {0x7F7FFFFFu, 0x7F80, "FLT_MAX rounds to +inf"},
      {0x7F7F7FFFu, 0x7F7F, "largest value rounding down to bf16 max"},
      {0x7F7F8000u, 0x7F80, "tie at bf16 max rounds (to even) into +inf"},
      {0x7FC00000u, 0x7FC0, "quiet NaN"},
      {0x7F800001u, 0x7FC0, "signalling NaN, low payload only"},
      {0xFFC12345u, 0x7FC0, "negative NaN with payload"},
      {0x7FFFFFFFu, 0x7FC0, "NaN all ones"},
      {0x00000000u, 0x0000, "+0"},
      {0x80000000u, 0x8000, "-0"},
      {0x00000001u, 0x0000, "smallest subnormal rounds to +0"},
      {0x80000001u, 0x8000, "smallest negative subnormal rounds to -0"},
      {0x00008000u, 0x0000, "subnormal tie to even (0)"},
      {0x00018000u, 0x0002, "subnormal tie to even (up)"},
      {0x00010000u, 0x0001, "smallest bf16 subnormal exact"},
      {0x007FFFFFu, 0x0080, "largest subnormal rounds up to smallest normal"},
      {0x00400000u, 0x0040, "2^-127 exact"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char name[128], msg[96];
    uint16_t got = dsv4_ref_f32_to_bf16(float_of(cases[i].in));
    snprintf(name, sizeof name, "f32_to_bf16 0x%08X (%s)", (unsigned)cases[i].in, cases[i].what);
    snprintf(msg, sizeof msg, "got 0x%04X want 0x%04X", got, cases[i].want);
    check(got == cases[i].want, name, msg);
  }
  {
    int bad = 0;
    char msg[96] = "";
    for (uint32_t h = 0; h < 65536; h++) {
      float f = dsv4_ref_bf16_to_f32((uint16_t)h);
      int nan = (h & 0x7F80) == 0x7F80 && (h & 0x7F);
      int ok = bits_of(f) == h << 16 && (nan ? dsv4_ref_f32_to_bf16(f) == 0x7FC0
                                             : dsv4_ref_f32_to_bf16(f) == h);
      if (!ok && !bad++)
        snprintf(msg, sizeof msg, "bf16 0x%04X", (unsigned)h);
    }
    check(!bad, "bf16 -> f32 -> bf16 round trip, all 65536 patterns", msg);
  }
}

static void test_ue8m0(void)
{
  int bad = 0;
  char msg[96] = "";
  for (int b = 0; b < 255; b++) {
    float got = dsv4_ref_ue8m0_to_f32((uint8_t)b);
    if ((double)got != ldexp(1.0, b - 127) && !bad++)
      snprintf(msg, sizeof msg, "byte %d: got %a", b, (double)got);
  }
  check(!bad, "ue8m0 bytes 0..254 equal 2^(b-127) exactly", msg);
  check(bits_of(dsv4_ref_ue8m0_to_f32(0)) == 0x00400000u, "ue8m0 0 is the subnormal 2^-127", "");
  check(isinf(dsv4_ref_ue8m0_to_f32(255)) && dsv4_ref_ue8m0_to_f32(255) > 0, "ue8m0 255 is +inf", "");
  check(dsv4_ref_ue8m0_to_f32(127) == 1.0f, "ue8m0 127 is 1.0", "");
}

/* Hand-built DSv4 block, padded stride, checked against the section 1 byte map directly. */
static void test_synthetic_v4(void)
{
  dsv4_layout l = dsv4_check_layout_v4();
  const int64_t bs = 4, stride = 4 * 584 + 96, nb = 3;
  uint8_t *cache = calloc((size_t)(nb * stride), 1);
  uint16_t row[512];
  int bad = 0;
  char msg[128] = "";
  check(dsv4_layout_min_block_bytes(&l, bs) == bs * 584, "layout min block bytes = bs*584", "");
  if (!cache) {
    check(0, "synthetic v4 block", "out of memory");
    return;
  }
  /* Slot 2*bs+3: block 2, row 3.  Fill every block with noise so wrong addressing shows. */
  for (int64_t i = 0; i < nb * stride; i++)
    cache[i] = (uint8_t)(i * 131 + 7);
  uint8_t *B = cache + 2 * stride;
  const int64_t t = 3;
  for (int j = 0; j < 7; j++)
    B[bs * 576 + t * 8 + j] = (uint8_t)(110 + 19 * j); /* scale bytes 110..224 */
  B[bs * 576 + t * 8 + 7] = 0xAB;                     /* pad: ignored by readers */
  for (int d = 0; d < 448; d++) {
    uint8_t q = (uint8_t)(d * 37 + 3);
    if ((q & 0x7F) == 0x7F)
      q ^= 1; /* keep it finite for this check */
    B[t * 576 + d] = q;
  }
  for (int d = 448; d < 512; d++) {
    uint16_t h = (uint16_t)(0x3C00 + d * 3);
    B[t * 576 + 448 + 2 * (d - 448)] = (uint8_t)h;
    B[t * 576 + 448 + 2 * (d - 448) + 1] = (uint8_t)(h >> 8);
  }
  int32_t idx[3] = {(int32_t)(2 * bs + 3), -1, -5};
  uint16_t out[3 * 512];
  memset(out, 0xEE, sizeof out);
  int rc = dsv4_ref_dequant_gather(&l, cache, nb, bs, stride, idx, 3, out);
  check(rc == 0, "synthetic v4 dequant_gather returns 0", "");
  dsv4_ref_dequant_token(&l, B, bs, t, row);
  for (int d = 0; d < 512; d++) {
    uint16_t want;
    if (d < 448) {
      int nan;
      double v = e4m3_indep(B[t * 576 + d], &nan) * ldexp(1.0, B[bs * 576 + t * 8 + d / 64] - 127);
      uint32_t fb = bits_of((float)v); /* exact: at most 4 significant bits, normal range */
      want = (uint16_t)(fb >> 16);
    } else {
      want = (uint16_t)(0x3C00 + d * 3);
    }
    if ((row[d] != want || out[d] != want) && !bad++)
      snprintf(msg, sizeof msg, "dim %d: token 0x%04X gather 0x%04X want 0x%04X", d, row[d], out[d], want);
  }
  check(!bad, "synthetic v4 token (block 2 row 3, stride > bs*584) matches section 1 byte map", msg);
  {
    int z = 1;
    for (int d = 0; d < 1024; d++)
      z &= out[512 + d] == 0;
    check(z, "dequant_gather: index -1 and -5 give rows of +0.0", "");
  }
  /* NaN code and a 255 scale byte. */
  B[t * 576 + 0] = 0x7F;
  B[t * 576 + 64] = 0x38; /* 1.0 */
  B[bs * 576 + t * 8 + 1] = 255;
  B[t * 576 + 128] = 0x00; /* 0 * 2^(b-127) */
  dsv4_ref_dequant_token(&l, B, bs, t, row);
  check(row[0] == 0x7FC0, "e4m3 NaN code dequantizes to bf16 0x7FC0", "");
  check(row[64] == 0x7F80, "scale byte 255 makes 1.0 * scale = +inf", "");
  check(row[128] == 0x0000, "zero code gives +0.0", "");
  free(cache);
}

/* A layout with an uncovered dim range and an f32 unscaled segment. */
static void test_generic_layout(void)
{
  dsv4_layout l;
  uint8_t blk[2 * 24];
  uint16_t row[10];
  memset(&l, 0, sizeof l);
  memset(blk, 0, sizeof blk);
  l.dim = 10;
  l.row_bytes = 24;
  l.scale_place = DSV4_SCALES_NONE;
  l.nseg = 2;
  l.seg[0] = (dsv4_segment){.d0 = 0, .d1 = 4, .type = DSV4_DT_F32, .offset = 0};
  l.seg[1] = (dsv4_segment){.d0 = 6, .d1 = 10, .type = DSV4_DT_BF16, .offset = 16};
  uint32_t f = 0x3F818000u; /* ties to 0x3F82 */
  for (int k = 0; k < 4; k++)
    blk[24 + k] = (uint8_t)(f >> (8 * k));
  blk[24 + 16] = 0x34;
  blk[24 + 17] = 0x12;
  memset(row, 0xEE, sizeof row);
  dsv4_ref_dequant_token(&l, blk, 2, 1, row);
  check(row[0] == 0x3F82 && row[1] == 0 && row[6] == 0x1234 && row[4] == 0 && row[5] == 0,
        "generic layout: f32 rounded, bf16 copied, uncovered dims 4..5 are 0", "");
}

/* Compare n bf16 values, NaN == NaN. */
static int cmp_bf16(const uint16_t *got, const uint16_t *want, int64_t n, char *msg, size_t ml)
{
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < n; i++)
    if (!bf16_same(got[i], want[i]) && !bad++)
      first = i;
  if (bad)
    snprintf(msg, ml, "%lld mismatches, first at %lld: got 0x%04X want 0x%04X", (long long)bad,
             (long long)first, got[first], want[first]);
  return bad == 0;
}

static golden_case *open_case(const char *root, const char *name)
{
  char dir[1024], err[512], cname[160];
  golden_case *c;
  snprintf(dir, sizeof dir, "%s/%s", root, name);
  c = golden_open(dir, err, sizeof err);
  snprintf(cname, sizeof cname, "golden_open %s", name);
  check(c != NULL, cname, err);
  return c;
}

/* Fetch a tensor with a given dtype, recording a failure if it is absent. */
static const golden_tensor *need(const golden_case *c, const char *name, const char *dtype)
{
  const golden_tensor *t = golden_tensor_get(c, name);
  char msg[128];
  snprintf(msg, sizeof msg, "tensor '%s' (%s) present", name, dtype);
  if (!t || strcmp(t->dtype, dtype) != 0) {
    check(0, msg, "");
    return NULL;
  }
  return t;
}

static void test_loader(const char *root)
{
  char err[512], buf[64];
  double v;
  golden_case *c = golden_open("/nonexistent/golden/dir", err, sizeof err);
  check(c == NULL && err[0], "golden_open on a missing folder fails with a message", err);
  c = open_case(root, "v4_sparse_decode_c4_h64");
  if (c) {
    const golden_tensor *o = golden_tensor_get(c, "out"), *q = golden_tensor_get(c, "q");
    check(strcmp(golden_op(c), "sparse_mla_decode") == 0, "golden_op reads op", golden_op(c));
    check(o && o->has_tol && o->tol_abs == 0.001 && o->tol_rel > 0 && o->tol_calc_diff == -1.0,
          "tol fields read (abs, rel; calc_diff absent = -1)", "");
    check(q && !q->has_tol && q->ndim == 3 && q->nbytes == (size_t)q->nelem * 2, "input tensor shape/bytes",
          "");
    check(golden_param_num(c, "softmax_scale", &v) == 0 && fabs(v - 0.044194173824159216) < 1e-15,
          "golden_param_num", "");
    check(golden_param_num(c, "no_such_param", &v) != 0 && golden_tensor_get(c, "nope") == NULL,
          "absent param/tensor reported", "");
    golden_close(c);
  }
  c = open_case(root, "v4_dequant_gather");
  if (c) {
    check(golden_param_str(c, "layout", buf, sizeof buf) == 0 && strcmp(buf, "fp8_ds_mla_v4") == 0,
          "golden_param_str", buf);
    check(golden_param_str(c, "layout", buf, 4) != 0 && golden_param_str(c, "block_size", buf, sizeof buf) != 0,
          "golden_param_str rejects truncation and numbers", "");
    golden_close(c);
  }
}

/* Write a small file; 0 on success. */
static int write_file(const char *dir, const char *name, const void *data, size_t n)
{
  char path[512];
  FILE *f;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  f = fopen(path, "wb");
  if (!f)
    return 1;
  if (n && fwrite(data, 1, n, f) != n) {
    fclose(f);
    return 1;
  }
  return fclose(f) != 0;
}

/* Loader failure paths on fixtures written to a temporary folder. */
static void test_loader_errors(void)
{
  char tmpl[] = "/tmp/golden_test_XXXXXX", err[512], path[600];
  const char *dir = mkdtemp(tmpl);
  static const char *files[] = {"case.lua", "a.bin", "b.bin"};
  uint8_t bytes[12] = {1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0};
  golden_case *c;
  if (!dir) {
    check(0, "loader error fixtures: mkdtemp", "");
    return;
  }
  write_file(dir, "a.bin", bytes, 12);
  write_file(dir, "b.bin", bytes, 11);
#define CASE(body) "return { op = 'x', params = { p = 1.5, s = 'str', flag = true, t = {} }, " body " }"
  write_file(dir, "case.lua", CASE("inputs = { a = { dtype = 'i32', shape = { 3 }, file = 'a.bin' } }"),
             strlen(CASE("inputs = { a = { dtype = 'i32', shape = { 3 }, file = 'a.bin' } }")));
  c = golden_open(dir, err, sizeof err);
  {
    const golden_tensor *t = c ? golden_tensor_get(c, "a") : NULL;
    double v = 0, fl = 0;
    check(t && t->nelem == 3 && ((int32_t *)t->data)[2] == 3 && golden_param_num(c, "p", &v) == 0 && v == 1.5 &&
              golden_param_num(c, "flag", &fl) == 0 && fl == 1.0 && golden_param_num(c, "t", &v) != 0,
          "loader: small valid fixture (number, bool, ignored table param)", err);
    golden_close(c);
  }
#define EXPECT_FAIL(name, text)                                  \
  do {                                                           \
    write_file(dir, "case.lua", text, strlen(text));             \
    c = golden_open(dir, err, sizeof err);                       \
    check(c == NULL && err[0], name, c ? "unexpectedly loaded" : err); \
    golden_close(c);                                             \
  } while (0)
  EXPECT_FAIL("loader: file size != shape*dtype size rejected",
              CASE("inputs = { b = { dtype = 'i32', shape = { 3 }, file = 'b.bin' } }"));
  EXPECT_FAIL("loader: missing tensor file rejected",
              CASE("expect = { c = { dtype = 'u8', shape = { 3 }, file = 'c.bin' } }"));
  EXPECT_FAIL("loader: unknown dtype rejected",
              CASE("inputs = { a = { dtype = 'f16', shape = { 6 }, file = 'a.bin' } }"));
  EXPECT_FAIL("loader: duplicate tensor name rejected",
              CASE("inputs = { a = { dtype = 'i32', shape = { 3 }, file = 'a.bin' } }, "
                   "expect = { a = { dtype = 'u8', shape = { 12 }, file = 'a.bin' } }"));
  EXPECT_FAIL("loader: Lua syntax error reported", "return {");
  EXPECT_FAIL("loader: Lua runtime error reported", "error('boom')");
  EXPECT_FAIL("loader: only base library (os is nil, os.exit unreachable)", "os.exit(3) return { op = 'x' }");
  EXPECT_FAIL("loader: missing op rejected", "return { inputs = {} }");
  EXPECT_FAIL("loader: path escaping the folder rejected",
              CASE("inputs = { a = { dtype = 'u8', shape = { 1 }, file = '../x.bin' } }"));
#undef EXPECT_FAIL
#undef CASE
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    remove(path);
  }
  rmdir(dir);
}

/* Golden 2a: FlashMLA dequantize_k_cache rows by index. */
static void test_golden_dequant_gather(const char *root)
{
  dsv4_layout l = dsv4_check_layout_v4();
  golden_case *c = open_case(root, "v4_dequant_gather");
  const golden_tensor *cache, *idx, *exp;
  double bs, stride;
  char msg[256] = "";
  if (!c)
    return;
  cache = need(c, "cache", "u8");
  idx = need(c, "indices", "i32");
  exp = need(c, "out", "bf16");
  if (cache && idx && exp && golden_param_num(c, "block_size", &bs) == 0 &&
      golden_param_num(c, "block_stride", &stride) == 0) {
    int64_t nb = cache->shape[0], n = idx->nelem;
    uint16_t *out = malloc((size_t)n * 512 * 2), *out2 = malloc((size_t)n * 512 * 2);
    check(cache->ndim == 2 && cache->shape[1] == (int64_t)stride && exp->nelem == n * 512,
          "v4_dequant_gather shapes consistent", "");
    if (out && out2) {
      int rc = dsv4_ref_dequant_gather(&l, cache->data, nb, (int64_t)bs, (int64_t)stride, idx->data, n, out);
      check(rc == 0, "v4_dequant_gather returns 0", "");
      check(rc == 0 && cmp_bf16(out, exp->data, n * 512, msg, sizeof msg),
            "v4_dequant_gather bit-exact vs FlashMLA", msg);

      /* Same data at a larger block stride (docs/ops.md 7: strides > bs*584). */
      int64_t big = (int64_t)stride + 3 * 576 + 16;
      uint8_t *c2 = calloc((size_t)(nb * big), 1);
      if (c2) {
        for (int64_t b = 0; b < nb; b++)
          memcpy(c2 + b * big, (const uint8_t *)cache->data + b * (int64_t)stride, (size_t)stride);
        rc = dsv4_ref_dequant_gather(&l, c2, nb, (int64_t)bs, big, idx->data, n, out2);
        check(rc == 0 && cmp_bf16(out2, exp->data, n * 512, msg, sizeof msg),
              "v4_dequant_gather bit-exact at block stride 39184", msg);
        free(c2);
      }

      /* Error returns leave out untouched. */
      int32_t bad_idx[3] = {0, (int32_t)(nb * (int64_t)bs), 1};
      memset(out2, 0x5A, (size_t)3 * 512 * 2);
      rc = dsv4_ref_dequant_gather(&l, cache->data, nb, (int64_t)bs, (int64_t)stride, bad_idx, 3, out2);
      int untouched = 1;
      for (int64_t i = 0; i < 3 * 512; i++)
        untouched &= out2[i] == 0x5A5A;
      check(rc != 0 && untouched, "dequant_gather: index == num_blocks*bs fails, output untouched", "");
      bad_idx[1] = 0x7FFFFFFF;
      rc = dsv4_ref_dequant_gather(&l, cache->data, nb, (int64_t)bs, (int64_t)stride, bad_idx, 3, out2);
      check(rc != 0 && out2[0] == 0x5A5A, "dequant_gather: index INT32_MAX fails, output untouched", "");
      rc = dsv4_ref_dequant_gather(&l, cache->data, nb, (int64_t)bs, 64 * 584 - 1, idx->data, 1, out2);
      check(rc != 0 && out2[0] == 0x5A5A, "dequant_gather: block stride < bs*584 rejected", "");
      rc = dsv4_ref_dequant_gather(&l, cache->data, nb, 0, (int64_t)stride, idx->data, 1, out2);
      check(rc != 0, "dequant_gather: bs == 0 rejected", "");
      dsv4_layout lb = l;
      lb.seg[1].d1 = 513;
      rc = dsv4_ref_dequant_gather(&lb, cache->data, nb, (int64_t)bs, (int64_t)stride, idx->data, 1, out2);
      check(rc != 0 && out2[0] == 0x5A5A, "dequant_gather: segment beyond dim rejected", "");
      lb = l;
      lb.seg[0].scale_group = 0;
      rc = dsv4_ref_dequant_gather(&lb, cache->data, nb, (int64_t)bs, (int64_t)stride, idx->data, 1, out2);
      check(rc != 0, "dequant_gather: scale_group 0 rejected", "");
      rc = dsv4_ref_dequant_gather(&l, cache->data, nb, (int64_t)bs, (int64_t)stride, idx->data, 0, NULL);
      check(rc == 0, "dequant_gather: n == 0 is a no-op", "");
    }
    free(out);
    free(out2);
  }
  golden_close(c);
}

/* Golden 2b: vLLM dequantize_and_gather_k_cache into a poisoned [R, M, 512] buffer. */
static void test_golden_paged_gather(const char *root)
{
  dsv4_layout l = dsv4_check_layout_v4();
  golden_case *c = open_case(root, "v4_paged_gather");
  const golden_tensor *cache, *sl, *gl, *bt, *exp;
  double bs, stride, off, poison;
  char msg[256] = "";
  if (!c)
    return;
  cache = need(c, "cache", "u8");
  sl = need(c, "seq_lens", "i32");
  gl = need(c, "gather_lens", "i32");
  bt = need(c, "block_table", "i32");
  exp = need(c, "out", "bf16");
  if (cache && sl && gl && bt && exp && exp->ndim == 3 && golden_param_num(c, "block_size", &bs) == 0 &&
      golden_param_num(c, "block_stride", &stride) == 0 && golden_param_num(c, "offset", &off) == 0 &&
      golden_param_num(c, "poison", &poison) == 0) {
    int64_t R = exp->shape[0], M = exp->shape[1], D = exp->shape[2], nb = cache->shape[0];
    int64_t maxb = bt->shape[1], total = R * M * D;
    uint16_t pz = dsv4_ref_f32_to_bf16((float)poison);
    uint16_t *out = malloc((size_t)total * 2), *ref = malloc((size_t)total * 2);
    check(D == 512 && sl->nelem == R && bt->ndim == 2 && bt->shape[0] == R, "v4_paged_gather shapes consistent",
          "");
    if (out && ref) {
      int rc;
#define POISON(p)                        \
  for (int64_t i_ = 0; i_ < total; i_++) \
    (p)[i_] = pz
      POISON(out);
      rc = dsv4_ref_paged_gather(&l, cache->data, nb, (int64_t)bs, (int64_t)stride, sl->data, gl->data, bt->data,
                                 R, maxb, (int64_t)off, out, M * D, D, M);
      check(rc == 0, "v4_paged_gather returns 0", "");
      check(rc == 0 && cmp_bf16(out, exp->data, total, msg, sizeof msg),
            "v4_paged_gather bit-exact vs vLLM (poison rows kept)", msg);

      /* Transposed strides [M, R, D] give the same rows. */
      POISON(ref);
      rc = dsv4_ref_paged_gather(&l, cache->data, nb, (int64_t)bs, (int64_t)stride, sl->data, gl->data, bt->data,
                                 R, maxb, (int64_t)off, ref, D, R * D, M);
      int ok = rc == 0;
      for (int64_t r = 0; ok && r < R; r++)
        for (int64_t m = 0; ok && m < M; m++)
          ok = cmp_bf16(ref + (m * R + r) * D, (const uint16_t *)exp->data + (r * M + m) * D, D, msg, sizeof msg);
      check(ok, "v4_paged_gather with transposed out strides", msg);

      /* gather_lens NULL means g = seq_len: equals passing seq_lens as gather_lens. */
      int64_t M2 = 0;
      for (int64_t r = 0; r < R; r++)
        if (((const int32_t *)sl->data)[r] > M2)
          M2 = ((const int32_t *)sl->data)[r];
      uint16_t *a = malloc((size_t)(R * M2 * D) * 2), *b = malloc((size_t)(R * M2 * D) * 2);
      if (a && b) {
        memset(a, 0x11, (size_t)(R * M2 * D) * 2);
        memset(b, 0x11, (size_t)(R * M2 * D) * 2);
        int r1 = dsv4_ref_paged_gather(&l, cache->data, nb, (int64_t)bs, (int64_t)stride, sl->data, NULL,
                                       bt->data, R, maxb, 0, a, M2 * D, D, M2);
        int r2 = dsv4_ref_paged_gather(&l, cache->data, nb, (int64_t)bs, (int64_t)stride, sl->data, sl->data,
                                       bt->data, R, maxb, 0, b, M2 * D, D, M2);
        check(r1 == 0 && r2 == 0 && memcmp(a, b, (size_t)(R * M2 * D) * 2) == 0,
              "paged_gather: gather_lens NULL means g = seq_len", "");
        /* and the tail rows of each request agree with the golden rows */
        ok = r1 == 0;
        for (int64_t r = 0; ok && r < R; r++) {
          int64_t s = ((const int32_t *)sl->data)[r], g = ((const int32_t *)gl->data)[r];
          ok = cmp_bf16(a + (r * M2 + (s - g)) * D, (const uint16_t *)exp->data + (r * M + (int64_t)off) * D,
                        g * D, msg, sizeof msg);
        }
        check(ok, "paged_gather: full gather's last g rows equal the golden rows", msg);
      }
      free(a);
      free(b);

      /* Errors: nothing written. */
      int32_t sl2[3], gl2[3], bt2[12];
      memcpy(sl2, sl->data, sizeof sl2);
      memcpy(gl2, gl->data, sizeof gl2);
      memcpy(bt2, bt->data, sizeof bt2);
#define UNTOUCHED(p, ok_)                  \
  do {                                     \
    ok_ = 1;                               \
    for (int64_t i_ = 0; i_ < total; i_++) \
      ok_ &= (p)[i_] == pz;                \
  } while (0)
#define TRY_FAIL(name, ...)                                                                            \
  do {                                                                                                 \
    int u_;                                                                                            \
    POISON(ref);                                                                                       \
    rc = dsv4_ref_paged_gather(&l, cache->data, nb, (int64_t)bs, (int64_t)stride, __VA_ARGS__);       \
    UNTOUCHED(ref, u_);                                                                                \
    check(rc != 0 && u_, name, "");                                                                    \
  } while (0)
      gl2[2] = sl2[2] + 1;
      TRY_FAIL("paged_gather: g > seq_len fails, output untouched", sl2, gl2, bt2, R, maxb, (int64_t)off, ref,
               M * D, D, M);
      gl2[2] = -1;
      TRY_FAIL("paged_gather: g < 0 fails, output untouched", sl2, gl2, bt2, R, maxb, (int64_t)off, ref, M * D,
               D, M);
      memcpy(gl2, gl->data, sizeof gl2);
      TRY_FAIL("paged_gather: offset+g > M fails, output untouched", sl2, gl2, bt2, R, maxb,
               M - gl2[2] + 1, ref, M * D, D, M);
      TRY_FAIL("paged_gather: offset < 0 fails", sl2, gl2, bt2, R, maxb, (int64_t)-1, ref, M * D, D, M);
      bt2[2 * maxb + (sl2[2] - 1) / (int64_t)bs] = (int32_t)nb;
      TRY_FAIL("paged_gather: block index == num_blocks fails, output untouched", sl2, gl2, bt2, R, maxb,
               (int64_t)off, ref, M * D, D, M);
      bt2[2 * maxb + (sl2[2] - 1) / (int64_t)bs] = -1;
      TRY_FAIL("paged_gather: block index -1 fails, output untouched", sl2, gl2, bt2, R, maxb, (int64_t)off,
               ref, M * D, D, M);
      memcpy(bt2, bt->data, sizeof bt2);
      sl2[2] = (int32_t)(maxb * (int64_t)bs + 1);
      gl2[2] = 2;
      TRY_FAIL("paged_gather: pos/bs >= maxb fails, output untouched", sl2, gl2, bt2, R, maxb, (int64_t)off,
               ref, M * D, D, M);
      memcpy(sl2, sl->data, sizeof sl2);
      memcpy(gl2, gl->data, sizeof gl2);
      /* An unused out-of-range block-table entry is fine (only touched blocks matter). */
      bt2[1 * maxb + maxb - 1] = 9999; /* request 1 has seq_len 7: only block 0 touched */
      POISON(ref);
      rc = dsv4_ref_paged_gather(&l, cache->data, nb, (int64_t)bs, (int64_t)stride, sl2, gl2, bt2, R, maxb,
                                 (int64_t)off, ref, M * D, D, M);
      check(rc == 0 && cmp_bf16(ref, exp->data, total, msg, sizeof msg),
            "paged_gather: untouched block-table entries are not checked", msg);
    }
    free(out);
    free(ref);
  }
  golden_close(c);
}

/* Generic dequant_token against the kv_quant fixtures' dequant tensors (slot = row). */
static void test_golden_quant_dequant(const char *root, const char *name, dsv4_layout l)
{
  golden_case *c = open_case(root, name);
  const golden_tensor *cache, *dq;
  double bs, stride;
  char cname[160], msg[256] = "";
  if (!c)
    return;
  cache = need(c, "cache", "u8");
  dq = need(c, "dequant", "bf16");
  if (cache && dq && golden_param_num(c, "block_size", &bs) == 0 &&
      golden_param_num(c, "block_stride", &stride) == 0 && dq->ndim == 2 && dq->shape[1] == l.dim) {
    int64_t n = dq->shape[0];
    int32_t *idx = malloc((size_t)n * 4);
    uint16_t *out = malloc((size_t)(n * l.dim) * 2);
    if (idx && out) {
      for (int64_t i = 0; i < n; i++)
        idx[i] = (int32_t)i;
      int rc = dsv4_ref_dequant_gather(&l, cache->data, cache->shape[0], (int64_t)bs, (int64_t)stride, idx, n, out);
      snprintf(cname, sizeof cname, "%s: dequant of every slot bit-exact (layout %s)", name, l.name);
      check(rc == 0 && cmp_bf16(out, dq->data, n * l.dim, msg, sizeof msg), cname, msg);
    }
    free(idx);
    free(out);
  } else {
    snprintf(cname, sizeof cname, "%s: tensors/params usable", name);
    check(0, cname, "");
  }
  golden_close(c);
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: %s GOLDEN_ROOT\n", argv[0]);
    return 1;
  }
  test_e4m3();
  test_bf16();
  test_ue8m0();
  test_synthetic_v4();
  test_generic_layout();
  const char *groot = golden_root(argv[1]);
  if (groot)
    test_loader(groot);
  test_loader_errors();
  if (groot) {
    test_golden_dequant_gather(groot);
    test_golden_paged_gather(groot);
    test_golden_quant_dequant(groot, "v4_quant", dsv4_check_layout_v4());
    test_golden_quant_dequant(groot, "v32_quant", dsv4_check_layout_v32());
  }
  printf("%d passed, %d failed\n", n_pass, n_fail);
  return n_fail ? 1 : 0;
}
