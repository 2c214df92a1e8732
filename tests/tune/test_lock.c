/* test_lock.c -- the tuning lockfile without a device (common/lock.c):
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
#include "bucket.h"
#include "json.h"
#include "lock.h"
#include "sha256.h"

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
  CHECK(dsv4_shape_parse(DSV4_OP_SPARSE_DECODE, "T=8,T=8,H=64,topk=128,extra=512,xbs=64", &p),
        "a repeated dim refused");
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

  /* issue 37: a field of the wrong type is an error naming its line, not a 0 that wins */
  {
    static const struct {
      const char *variant, *want;
    } typed[] = {
        {"{\"name\": \"slow\", \"gate\": \"pass\", \"median_us\": \"999\", \"min_us\": 1, \"max_us\": 1}",
         "line 4: entry 1 variant 2: 'median_us' is a string, not a number"},
        {"{\"name\": \"slow\", \"gate\": \"pass\", \"median_us\": true, \"min_us\": 1, \"max_us\": 1}",
         "line 4: entry 1 variant 2: 'median_us' is a boolean, not a number"},
        {"{\"name\": \"slow\", \"gate\": \"pass\", \"min_us\": 1, \"max_us\": 1}",
         "line 4: entry 1 variant 2: 'median_us' is missing"},
        {"{\"name\": \"slow\", \"gate\": \"pass\", \"median_us\": null, \"min_us\": 1, \"max_us\": 1}",
         "line 4: entry 1 variant 2: 'median_us' is null, not a number"},
        {"{\"name\": \"slow\", \"gate\": \"pass\", \"median_us\": -3, \"min_us\": 1, \"max_us\": 1}",
         "line 4: entry 1 variant 2: 'median_us' is -3; it takes a number from 0 to 1000000000"},
        {"{\"name\": \"slow\", \"gate\": \"pass\", \"median_us\": 1000000001, \"min_us\": 1, \"max_us\": 1}",
         "line 4: entry 1 variant 2: 'median_us' is 1000000001; it takes a number from 0 to 1000000000"},
        {"{\"name\": \"slow\", \"gate\": \"pass\", \"median_us\": 9, \"min_us\": \"1\", \"max_us\": 1}",
         "line 4: entry 1 variant 2: 'min_us' is a string, not a number"},
        {"{\"name\": \"slow\", \"gate\": \"pass\", \"median_us\": 9, \"min_us\": 1, \"max_us\": 1, \"samples\": 2.5}",
         "line 4: entry 1 variant 2: 'samples' is 2.5; it takes a whole number"},
        {"{\"name\": \"slow\", \"gate\": \"wrong\", \"median_us\": \"x\"}",
         "line 4: entry 1 variant 2: 'median_us' is a string, not a number"},
        {"{\"name\": 7, \"gate\": \"pass\", \"median_us\": 9, \"min_us\": 1, \"max_us\": 1}",
         "line 4: entry 1 variant 2: 'name' is a number, not a string"},
        {"{\"name\": \"fast\", \"gate\": \"pass\", \"median_us\": 9, \"min_us\": 1, \"max_us\": 1}",
         "line 4: entry 1 variant 2 repeats variant fast (line 3)"},
    };
    for (size_t i = 0; i < sizeof typed / sizeof *typed; i++) {
      char doc[1200];
      snprintf(doc, sizeof doc,
               "{\"format\": \"dsv4c-tune-lock 1\", \"entries\": [{\"kernel\": \"sd\", \"op\": \"sparse_decode\", "
               "\"target\": \"ptx\", \"arch\": \"sm_90a\", \"device\": \"d\", \"toolchain\": \"t\", \"spec_hash\": "
               "\"h\", \"bucket\": \"T=8,H=64,topk=64,extra=0,xbs=0\", \"seed\": 1,\n\"variants\": [\n"
               "{\"name\": \"fast\", \"gate\": \"pass\", \"median_us\": 5, \"min_us\": 5, \"max_us\": 5},\n%s]}]}",
               typed[i].variant);
      dsv4_lock q;
      err[0] = 0;
      int rc = dsv4_lock_parse(doc, strlen(doc), &q, err, sizeof err);
      CHECK(rc != 0 && strstr(err, typed[i].want), "typed %zu: want '%s', got %s (winner %s)", i, typed[i].want,
            rc ? err : "accepted", rc ? "-" : q.e[0].winner);
      if (!rc)
        dsv4_lock_free(&q);
    }
    /* the seed: a whole number a JSON number holds (1e400 was a cast of a double out of range) */
    static const struct {
      const char *seed, *want;
    } seeds[] = {{"1e400", "'seed' is inf; it takes a whole number from 0 to 9007199254740991"},
                 {"-1e400", "'seed' is -inf"},
                 {"9223372036854775808", "'seed' is 9.22337203685477"},
                 {"9007199254740992", "'seed' is 9007199254740992; it takes a whole number from 0 to 9007199254740991"},
                 {"1.5", "'seed' is 1.5"},
                 {"-1", "'seed' is -1"},
                 {"\"12\"", "'seed' is a string, not a number"},
                 {"9007199254740991", NULL},
                 {"0", NULL}};
    for (size_t i = 0; i < sizeof seeds / sizeof *seeds; i++) {
      char doc[1200];
      snprintf(doc, sizeof doc,
               "{\"format\": \"dsv4c-tune-lock 1\", \"entries\": [{\"kernel\": \"sd\", \"op\": \"sparse_decode\", "
               "\"target\": \"ptx\", \"arch\": \"sm_90a\", \"device\": \"d\", \"toolchain\": \"t\", \"spec_hash\": "
               "\"h\", \"bucket\": \"T=8,H=64,topk=64,extra=0,xbs=0\",\n\"seed\": %s, \"variants\": []}]}",
               seeds[i].seed);
      dsv4_lock q;
      err[0] = 0;
      int rc = dsv4_lock_parse(doc, strlen(doc), &q, err, sizeof err);
      if (seeds[i].want)
        CHECK(rc != 0 && strstr(err, "line 2: entry 1: ") && strstr(err, seeds[i].want), "seed %s: want '%s', got %s",
              seeds[i].seed, seeds[i].want, rc ? err : "accepted");
      else
        CHECK(rc == 0 && q.e[0].seed == atoll(seeds[i].seed), "seed %s refused: %s", seeds[i].seed, err);
      if (!rc)
        dsv4_lock_free(&q);
    }
    /* a bucket the runtime refuses (T=3, L=384), one of another spelling, one not of the op: errors */
    static const struct {
      const char *op, *bucket, *want;
    } buckets[] = {{"sparse_decode", "T=3,H=64,topk=64,extra=0,xbs=0", "T=3 is not a power of two"},
                   {"paged_mqa_logits", "B=64,next_n=1,L=384", "L=384 is not a power of two"},
                   {"paged_mqa_logits", "B=64,next_n=3,L=512", NULL}, /* next_n is exact */
                   {"sparse_decode", "H=64,T=8,topk=64,extra=0,xbs=0", "is written 'T=8,H=64,topk=64,extra=0,xbs=0'"},
                   {"sparse_decode", "T=8,H=64", "is not op sparse_decode's T=N,H=N,topk=N,extra=N,xbs=N"},
                   {"some_future_op", "z=3", NULL}}; /* an op this reader does not know: its users say stale */
    for (size_t i = 0; i < sizeof buckets / sizeof *buckets; i++) {
      char doc[1200];
      snprintf(doc, sizeof doc,
               "{\"format\": \"dsv4c-tune-lock 1\", \"entries\": [{\"kernel\": \"sd\", \"op\": \"%s\", "
               "\"target\": \"ptx\", \"arch\": \"sm_90a\", \"device\": \"d\", \"toolchain\": \"t\", \"spec_hash\": "
               "\"h\",\n\"bucket\": \"%s\", \"variants\": []}]}",
               buckets[i].op, buckets[i].bucket);
      dsv4_lock q;
      err[0] = 0;
      int rc = dsv4_lock_parse(doc, strlen(doc), &q, err, sizeof err);
      if (buckets[i].want)
        CHECK(rc != 0 && strstr(err, "line 2: entry 1: bucket ") && strstr(err, buckets[i].want),
              "bucket %s: want '%s', got %s", buckets[i].bucket, buckets[i].want, rc ? err : "accepted");
      else
        CHECK(rc == 0, "bucket %s refused: %s", buckets[i].bucket, err);
      if (!rc)
        dsv4_lock_free(&q);
    }
    dsv4_shape t3 = {DSV4_OP_SPARSE_DECODE, 5, {3, 64, 64, 0, 0}}, t4 = {DSV4_OP_SPARSE_DECODE, 5, {4, 64, 64, 0, 0}};
    char why[300];
    CHECK(dsv4_shape_check_bucket(&t3, why, sizeof why) && strstr(why, "T=3"), "T=3 taken as a bucket");
    CHECK(!dsv4_shape_check_bucket(&t4, why, sizeof why), "T=4 refused: %s", why);
    /* past the size limit: refused before it is parsed */
    CHECK(dsv4_lock_parse("{}", DSV4_LOCK_MAX_BYTES + 1, &r, err, sizeof err) != 0 && strstr(err, "at most 32 MiB"),
          "a text past the limit: %s", err);
    /* a list of zeros below the byte limit: refused at the value limit */
    size_t nz = 2 * (size_t)DSV4_JSON_MAX_VALUES + 100;
    char *zeros = malloc(nz + 2);
    if (zeros) {
      zeros[0] = '[';
      for (size_t i = 1; i < nz; i += 2)
        zeros[i] = '0', zeros[i + 1] = ',';
      zeros[nz] = '0', zeros[nz + 1] = ']';
      CHECK(dsv4_json_parse(zeros, nz + 2, err, sizeof err) == NULL && strstr(err, "more than 2097152 values"),
            "a list of zeros: %s", err);
      free(zeros);
    }
  }

  /* a large lockfile (16K entries, one variant each, as the 3.9 MB
   * one): parsed, merged with a second of other variants, written and read
   * back; each entry found (the reader and merge were quadratic) */
  {
    enum { N = 16384 };
    dsv4_text big[2] = {{0}, {0}};
    for (int f = 0; f < 2; f++) {
      dsv4_text_printf(&big[f], "{\"format\": \"dsv4c-tune-lock 1\", \"entries\": [");
      for (int i = 0; i < N; i++)
        dsv4_text_printf(&big[f],
                         "%s\n{\"kernel\": \"sd\", \"op\": \"sparse_decode\", \"target\": \"ptx\", \"arch\": "
                         "\"sm_90a\", \"device\": \"GPU X\", \"toolchain\": \"t\", \"spec_hash\": \"h\", \"bucket\": "
                         "\"T=%d,H=%d,topk=%d,extra=%d,xbs=64\", \"seed\": %d, \"variants\": [{\"name\": \"sd__%c\", "
                         "\"gate\": \"pass\", \"median_us\": %d.5, \"min_us\": 1, \"max_us\": 99, \"samples\": 3, "
                         "\"code\": \"c\", \"reason\": \"\"}]}",
                         i ? "," : "", 1 << (i % 16), 1 << (i / 16 % 16), 1 << (i / 256 % 16), 1 << (i / 4096),
                         f + 1, f ? 'b' : 'a', f ? 97 - i % 97 : i % 97);
      dsv4_text_printf(&big[f], "]}\n");
    }
    CHECK(!big[0].failed && !big[1].failed, "the large lockfiles' text");
    dsv4_lock b0, b1, mg = {0};
    CHECK(dsv4_lock_parse(big[0].s, big[0].n, &b0, err, sizeof err) == 0 && b0.n == N, "16K entries: %s", err);
    CHECK(dsv4_lock_parse(big[1].s, big[1].n, &b1, err, sizeof err) == 0 && b1.n == N, "16K entries (2): %s", err);
    CHECK(!dsv4_lock_merge(&mg, &b1) && !dsv4_lock_merge(&mg, &b0) && mg.n == N, "16K merged: %d entries", mg.n);
    size_t mlen;
    char *mtext = dsv4_lock_format(&mg, &mlen);
    dsv4_lock back;
    CHECK(mtext && dsv4_lock_parse(mtext, mlen, &back, err, sizeof err) == 0 && back.n == N, "merged read back: %s",
          err);
    int right = 0;
    for (int i = 0; i < N; i++) {
      char bk[96];
      snprintf(bk, sizeof bk, "T=%d,H=%d,topk=%d,extra=%d,xbs=64", 1 << (i % 16), 1 << (i / 16 % 16),
               1 << (i / 256 % 16), 1 << (i / 4096));
      dsv4_lock_key k = key("sd", bk);
      snprintf(k.device, sizeof k.device, "GPU X"), snprintf(k.toolchain, sizeof k.toolchain, "t");
      snprintf(k.spec_hash, sizeof k.spec_hash, "h");
      const dsv4_lock_entry *x = dsv4_lock_find(&back, &k, 0);
      double a0 = i % 97 + 0.5, a1 = 97 - i % 97 + 0.5;
      right += x && x->nvariants == 2 && x->seed == 1 && !strcmp(x->winner, a0 <= a1 ? "sd__a" : "sd__b");
    }
    CHECK(right == N, "%d of %d entries found with both variants, the right winner and the smaller seed", right, N);
    /* the same key twice, far apart: still found */
    char *dup = malloc(big[0].n + 600);
    if (dup) {
      size_t cut = big[0].n - 3; /* before "]}\n" */
      memcpy(dup, big[0].s, cut);
      int m = snprintf(dup + cut, 600,
                       ",\n{\"kernel\": \"sd\", \"op\": \"sparse_decode\", \"target\": \"ptx\", \"arch\": \"sm_90a\", "
                       "\"device\": \"GPU X\", \"toolchain\": \"t\", \"spec_hash\": \"h\", \"bucket\": "
                       "\"T=1,H=1,topk=1,extra=1,xbs=64\", \"variants\": []}]}\n");
      dsv4_lock q;
      CHECK(dsv4_lock_parse(dup, cut + (size_t)m, &q, err, sizeof err) != 0 &&
                strstr(err, "line 16386: entry 16385 repeats the key of an earlier entry"),
            "a repeated key among 16K: %s", err);
      free(dup);
    }
    free(mtext), free(big[0].s), free(big[1].s);
    dsv4_lock_free(&b0), dsv4_lock_free(&b1), dsv4_lock_free(&mg), dsv4_lock_free(&back);
  }

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
