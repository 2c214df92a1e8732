/* test_lock.c -- the tuning lockfile without a device (tools/tune/lock.c):
 * SHA-256 against known vectors, buckets, the canonical text's round
 * trip, the winner and its tie-break, merge determinism (shards merged in
 * any order give the same bytes), malformed files refused, and the JSON
 * reader on hostile input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../check.h"
#include "dsv4_abi.h"
#include "lock.h"

int passed, failed;

static dsv4_lock_key key(const char *kernel, const char *bucket)
{
  dsv4_lock_key k;
  memset(&k, 0, sizeof k);
  snprintf(k.kernel, sizeof k.kernel, "%s", kernel);
  snprintf(k.op, sizeof k.op, "sparse_decode");
  snprintf(k.target, sizeof k.target, "ptx");
  snprintf(k.arch, sizeof k.arch, "sm_90a");
  snprintf(k.device, sizeof k.device, "NVIDIA H100 80GB HBM3");
  snprintf(k.toolchain, sizeof k.toolchain, "dsv4c 0.1.0, LLVM 19.1.7");
  snprintf(k.spec_hash, sizeof k.spec_hash, "%064d", 7);
  snprintf(k.bucket, sizeof k.bucket, "%s", bucket);
  return k;
}

static void put(dsv4_lock *l, const char *kernel, const char *bucket, const char *name, int gate, double med,
                double mn)
{
  dsv4_lock_key k = key(kernel, bucket);
  dsv4_lock_entry *e = dsv4_lock_find(l, &k, 1);
  snprintf(e->shape, sizeof e->shape, "%s", bucket);
  e->seed = 42;
  dsv4_lock_variant v;
  memset(&v, 0, sizeof v);
  snprintf(v.name, sizeof v.name, "%s", name);
  snprintf(v.code, sizeof v.code, "%064x", (unsigned)strlen(name));
  v.gate = gate, v.median_us = med, v.min_us = mn, v.max_us = med * 1.1, v.samples = gate ? 0 : 30;
  if (gate)
    snprintf(v.reason, sizeof v.reason, "a reason with \"quotes\", a \\ and a\nnewline");
  CHECK(dsv4_lock_put(e, &v) == 0, "put %s", name);
}

static char *text(dsv4_lock *l)
{
  size_t n;
  char *s = dsv4_lock_format(l, &n);
  CHECK(s && strlen(s) == n, "format");
  return s;
}

int main(void)
{
  /* SHA-256 (FIPS 180-4 examples) */
  char hex[65];
  dsv4_sha256_hex("abc", 3, hex);
  CHECK(!strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"), "sha256(abc) = %s", hex);
  dsv4_sha256_hex("", 0, hex);
  CHECK(!strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"), "sha256('') = %s", hex);
  const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  dsv4_sha256_hex(two, strlen(two), hex);
  CHECK(!strcmp(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"), "sha256(448 bits) = %s", hex);

  /* buckets: powers of two up, xbs and next_n exact */
  dsv4_shape s = {DSV4_OP_SPARSE_DECODE, 5, {100, 100, 128, 1000, 2}}, b = dsv4_shape_bucket(&s);
  char buf[128];
  dsv4_shape_format(&b, buf, sizeof buf);
  CHECK(!strcmp(buf, "T=128,H=128,topk=128,extra=1024,xbs=2"), "decode bucket %s", buf);
  dsv4_shape l = {DSV4_OP_PAGED_MQA_LOGITS, 3, {65, 2, 65536}}, lb = dsv4_shape_bucket(&l);
  dsv4_shape_format(&lb, buf, sizeof buf);
  CHECK(!strcmp(buf, "B=128,next_n=2,L=65536"), "logits bucket %s", buf);
  dsv4_shape z = {DSV4_OP_SPARSE_DECODE, 5, {0, 1, 64, 0, 0}}, zb = dsv4_shape_bucket(&z);
  CHECK(zb.dim[0] == 0 && zb.dim[1] == 1 && zb.dim[2] == 64, "bucket of 0 and 1: %lld %lld", (long long)zb.dim[0],
        (long long)zb.dim[1]);
  dsv4_shape p;
  CHECK(!dsv4_shape_parse(DSV4_OP_SPARSE_DECODE, "T=8,H=64,topk=128,extra=512,xbs=64", &p) && p.dim[3] == 512,
        "parse a decode shape");
  CHECK(dsv4_shape_parse(DSV4_OP_SPARSE_DECODE, "T=8,H=64,topk=128,extra=512", &p), "a missing dim refused");
  CHECK(dsv4_shape_parse(DSV4_OP_SPARSE_DECODE, "T=8,T=8,H=64,topk=128,extra=512,xbs=64", &p), "a repeated dim refused");
  CHECK(dsv4_shape_parse(DSV4_OP_PAGED_MQA_LOGITS, "B=-1,next_n=1,L=4", &p), "a negative dim refused");
  char model[64];
  dsv4_tune_device_model("NVIDIA H100 80GB HBM3 (sm_90, CUDA driver 12.8)", model, sizeof model);
  CHECK(!strcmp(model, "NVIDIA H100 80GB HBM3"), "model %s", model);

  /* the winner and its tie-break: median, then min, then the name */
  dsv4_lock a = {0};
  put(&a, "sd", "T=8,H=128,topk=128,extra=1024,xbs=64", "sd__h64_pair1", DSV4_GATE_PASS, 10.0, 9.0);
  put(&a, "sd", "T=8,H=128,topk=128,extra=1024,xbs=64", "sd__h64_pair0", DSV4_GATE_PASS, 10.0, 8.5);
  put(&a, "sd", "T=8,H=128,topk=128,extra=1024,xbs=64", "sd__h32_pair0", DSV4_GATE_WRONG, 0, 0);
  put(&a, "sd", "T=8,H=128,topk=128,extra=1024,xbs=64", "sd__h16_pair0", DSV4_GATE_PASS, 10.00004, 9.5);
  dsv4_lock_entry *e = &a.e[0];
  dsv4_lock_decide(e);
  CHECK(!strcmp(e->winner, "sd__h64_pair0"), "equal medians: the lower min wins (got %s)", e->winner);
  CHECK(dsv4_lock_variant_find(e, "sd__h16_pair0")->median_us == 10.0, "times are rounded to 4 decimals");
  put(&a, "sd", "T=8,H=128,topk=128,extra=1024,xbs=64", "sd__h16_pair0", DSV4_GATE_PASS, 10.0, 8.5);
  dsv4_lock_decide(e);
  CHECK(!strcmp(e->winner, "sd__h16_pair0"), "equal medians and mins: the first name wins (got %s)", e->winner);
  put(&a, "sd", "T=16,H=128,topk=128,extra=1024,xbs=64", "sd__h64_pair1", DSV4_GATE_TIMEOUT, 0, 0);

  /* the canonical text: format, parse, format gives the same bytes; buckets sorted by their dims */
  char *t1 = text(&a);
  dsv4_lock r;
  char err[400];
  CHECK(dsv4_lock_parse(t1, strlen(t1), &r, err, sizeof err) == 0, "parse: %s", err);
  char *t2 = text(&r);
  CHECK(!strcmp(t1, t2), "round trip: the text differs");
  CHECK(strstr(t1, "T=8,") < strstr(t1, "T=16,"), "buckets sorted by their dims, not as text");
  CHECK(r.n == 2 && !r.e[1].winner[0] && !strcmp(dsv4_gate_name(r.e[1].v[0].gate), "timeout"),
        "an entry whose variants all failed has no winner");
  CHECK(strstr(t1, "\\\"quotes\\\"") && strstr(t1, "\\n"), "reasons escaped");
  free(t2);
  dsv4_lock_free(&r);

  /* merging: shards in any order, the same bytes; a failure beats a pass of the same variant */
  dsv4_lock s1 = {0}, s2 = {0}, s3 = {0};
  put(&s1, "sd", "T=8,H=64,topk=128,extra=512,xbs=64", "sd__a", DSV4_GATE_PASS, 5, 4);
  put(&s1, "sd", "T=8,H=64,topk=128,extra=512,xbs=64", "sd__b", DSV4_GATE_PASS, 6, 4);
  put(&s2, "sd", "T=8,H=64,topk=128,extra=512,xbs=64", "sd__c", DSV4_GATE_PASS, 3, 2);
  put(&s2, "sd", "T=16,H=64,topk=128,extra=512,xbs=64", "sd__a", DSV4_GATE_PASS, 7, 6);
  put(&s3, "sd", "T=8,H=64,topk=128,extra=512,xbs=64", "sd__c", DSV4_GATE_NONDETERMINISTIC, 0, 0);
  s2.e[0].seed = 41;
  dsv4_lock m1 = {0}, m2 = {0}, m3 = {0};
  CHECK(!dsv4_lock_merge(&m1, &s1) && !dsv4_lock_merge(&m1, &s2) && !dsv4_lock_merge(&m1, &s3), "merge 1 2 3");
  CHECK(!dsv4_lock_merge(&m2, &s3) && !dsv4_lock_merge(&m2, &s2) && !dsv4_lock_merge(&m2, &s1), "merge 3 2 1");
  CHECK(!dsv4_lock_merge(&m3, &s2) && !dsv4_lock_merge(&m3, &s1) && !dsv4_lock_merge(&m3, &s3), "merge 2 1 3");
  char *x1 = text(&m1), *x2 = text(&m2), *x3 = text(&m3);
  CHECK(!strcmp(x1, x2) && !strcmp(x1, x3), "merges in three orders differ");
  dsv4_lock_key k8 = key("sd", "T=8,H=64,topk=128,extra=512,xbs=64");
  dsv4_lock_entry *m8 = dsv4_lock_find(&m1, &k8, 0);
  CHECK(m8 && m8->nvariants == 3 && !strcmp(m8->winner, "sd__a") && m8->seed == 41,
        "merged entry: 3 variants, sd__c's failure kept (winner %s), the smaller seed", m8 ? m8->winner : "?");
  CHECK(m1.n == 2, "merged entries: %d", m1.n);
  free(x1), free(x2), free(x3);

  /* malformed lockfiles are refused with a reason */
  static const char *const bad[] = {
      "", "{", "[]", "{\"format\": \"other 1\", \"entries\": []}",
      "{\"format\": \"dsv4c-tune-lock 1\", \"entries\": [{\"kernel\": \"sd\"}]}",
      "{\"format\": \"dsv4c-tune-lock 1\", \"entries\": 3}",
      "{\"format\": \"dsv4c-tune-lock 1\", \"entries\": [{\"kernel\": \"sd\", \"op\": \"sparse_decode\", \"target\": "
      "\"ptx\", \"arch\": \"sm_90a\", \"device\": \"d\", \"toolchain\": \"t\", \"spec_hash\": \"h\", \"bucket\": "
      "\"b\", \"variants\": [{\"name\": \"x\", \"gate\": \"maybe\"}]}]}",
      "{\"format\": \"dsv4c-tune-lock 1\", \"entries\": [] } trailing",
      "{\"a\": \"\\u12\"}",
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    dsv4_lock q;
    err[0] = 0;
    CHECK(dsv4_lock_parse(bad[i], strlen(bad[i]), &q, err, sizeof err) != 0 && err[0], "malformed %zu accepted", i);
  }
  /* deep nesting stops at 64 levels, without recursion trouble */
  char deep[4096];
  memset(deep, '[', 3000);
  deep[3000] = 0;
  CHECK(dsv4_json_parse(deep, 3000, err, sizeof err) == NULL && strstr(err, "64 levels"), "deep nesting: %s", err);
  const char *js = "{\"s\": \"a\\u00e9\\n\", \"n\": -12.5e1, \"t\": true}";
  dsv4_json *j = dsv4_json_parse(js, strlen(js), err, sizeof err);
  CHECK(j && !strcmp(dsv4_json_str(j, "s", ""), "a\xc3\xa9\n") && dsv4_json_num(j, "n", 0) == -125 &&
            dsv4_json_num(j, "t", 0) == 1,
        "JSON values: %s", j ? "wrong" : err);
  dsv4_json_free(j);

  /* a file round trip (atomic write) */
  char path[] = "/tmp/dsv4c-test-lock-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0, "mkstemp");
  if (fd >= 0) {
    close(fd);
    CHECK(dsv4_lock_write(path, &m1) == 0, "write");
    dsv4_lock back;
    CHECK(dsv4_lock_read(path, &back, err, sizeof err) == 0, "read: %s", err);
    char *y = text(&back), *y0 = text(&m1);
    CHECK(!strcmp(y, y0), "file round trip differs");
    free(y), free(y0);
    dsv4_lock_free(&back);
    unlink(path);
  }
  dsv4_lock_free(&a), dsv4_lock_free(&s1), dsv4_lock_free(&s2), dsv4_lock_free(&s3);
  dsv4_lock_free(&m1), dsv4_lock_free(&m2), dsv4_lock_free(&m3);
  free(t1);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
