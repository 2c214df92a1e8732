/* test_choice.c -- the runtime's choice from a tuning lockfile
 * (runtime/src/choice.c) on a device:
 *
 *   test_choice BUNDLE opencl|cuda [TUNED_BUNDLE TUNED_LOCK [OTHER_BUNDLE]]
 *
 * BUNDLE holds a sweep of the decode (tests/tune/tiny_sweep.lua).  The test
 * writes lockfiles for this device from the bundle's own code hashes:
 *   - two buckets choosing two different variants: each chosen for its
 *     shape (T 3 falls in the T 4 bucket), no choice (the default rule)
 *     for a shape no entry covers, and an unnamed decode at a tuned shape
 *     runs and matches the same decode named;
 *   - an entry of another GPU model: left out silently;
 *   - a winner whose code hash differs, and one the bundle lacks: stale,
 *     DSV4RT_ERR_STALE_TUNING naming them, never chosen, the fresh ones
 *     loaded;
 *   - a file that is not a lockfile: refused, the earlier choices kept;
 *     NULL: cleared;
 *   - with TUNED_BUNDLE and TUNED_LOCK (dsv4c --lock's output): the bundle's
 *     own choice records (version 7) choose each of this device's entries'
 *     winner with no lockfile loaded; the lockfile then loads fresh over
 *     them with the same choices, and NULL goes back to the bundle's;
 *   - with OTHER_BUNDLE (dsv4c --lock from the same lockfile, its device
 *     renamed): no choice record is this device's, none installed, every
 *     shape gets the default rule.
 * Exit 77 (skipped) without a device or without two decode variants that
 * run on it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4_ref.h"
#include "harness.h"
#include "bucket.h"
#include "lock.h"

static dsv4rt_bundle *bundle;

/* A lockfile of one device model: entries (bucket, winner, loser). */
typedef struct {
  const char *bucket, *winner, *loser;
  const char *winner_code; /* NULL: the bundle's */
  const char *device;      /* NULL: this device's model */
} ent;

static char *lockfile(const ent *es, int n, const char *model)
{
  dsv4_lock l = {0};
  for (int i = 0; i < n; i++) {
    dsv4_lock_key k;
    memset(&k, 0, sizeof k);
    snprintf(k.kernel, sizeof k.kernel, "sd");
    snprintf(k.op, sizeof k.op, "sparse_decode");
    snprintf(k.device, sizeof k.device, "%s", es[i].device ? es[i].device : model);
    snprintf(k.toolchain, sizeof k.toolchain, "test");
    snprintf(k.spec_hash, sizeof k.spec_hash, "test");
    snprintf(k.bucket, sizeof k.bucket, "%s", es[i].bucket);
    const char *names[2] = {es[i].winner, es[i].loser};
    char code[2][65] = {"", ""};
    for (int w = 0; w < 2; w++) /* the key's target and arch: where the variants run here */
      for (int e = 0; e < dsv4rt_bundle_count(bundle); e++) {
        const char *name, *target, *arch;
        if (!dsv4rt_bundle_entry(bundle, e, &name, NULL, &target, &arch) && !strcmp(name, names[w]) &&
            dsv4rt_bundle_entry_runs(bundle, e)) {
          dsv4rt_bundle_entry_code_hash(bundle, e, code[w]);
          snprintf(k.target, sizeof k.target, "%s", target);
          snprintf(k.arch, sizeof k.arch, "%s", arch);
        }
      }
    for (int w = 0; w < 2; w++) {
      dsv4_lock_variant v;
      memset(&v, 0, sizeof v);
      snprintf(v.name, sizeof v.name, "%s", names[w]);
      snprintf(v.code, sizeof v.code, "%s", code[w]);
      if (!w && es[i].winner_code)
        snprintf(v.code, sizeof v.code, "%s", es[i].winner_code);
      v.gate = DSV4_GATE_PASS, v.median_us = w ? 20 : 10, v.min_us = w ? 19 : 9, v.max_us = 30, v.samples = 3;
      dsv4_lock_entry *e = dsv4_lock_find(&l, &k, 1);
      dsv4_lock_put(e, &v);
    }
  }
  char *t = dsv4_lock_format(&l, NULL);
  dsv4_lock_free(&l);
  return t;
}

static const char *tuned(int64_t T, int64_t xtopk)
{
  int64_t dims[5] = {T, 64, 64, xtopk, xtopk ? 64 : 0};
  return dsv4rt_bundle_tuned_kernel(bundle, "sparse_decode", dims, 5);
}

/* A small decode, unnamed and named: the unnamed call (tuning's choice)
 * runs and gives what the named one gives. */
static void run_decode(int64_t T, const char *name)
{
  dsv4_layout L = dsv4_check_layout_v4();
  int64_t H = 64, bs = 64, nb = 4, stride = 37440, topk = 64;
  uint8_t *cache = calloc(1, (size_t)(nb * stride));
  uint16_t *kv = malloc((size_t)(nb * bs * 512) * 2), *q = malloc((size_t)(T * H * 512) * 2);
  int64_t *slots = malloc((size_t)(nb * bs) * 8);
  for (int64_t i = 0; i < nb * bs * 512; i++)
    kv[i] = dsv4_ref_f32_to_bf16((rnd01() - 0.5f) * 0.2f);
  for (int64_t i = 0; i < nb * bs; i++)
    slots[i] = i;
  dsv4_ref_kv_insert(&L, kv, nb * bs, slots, nb * bs, NULL, NULL, 0, 0, 0, cache, nb, bs, stride);
  for (int64_t i = 0; i < T * H * 512; i++)
    q[i] = dsv4_ref_f32_to_bf16(rnd01() - 0.5f);
  int32_t *idx = malloc((size_t)(T * topk) * 4), *lens = malloc((size_t)T * 4);
  for (int64_t t = 0; t < T; t++) {
    lens[t] = (int32_t)topk;
    for (int64_t j = 0; j < topk; j++)
      idx[t * topk + j] = (int32_t)dsv4_rng_range(&rng, 0, nb * bs - 1);
  }
  dsv4rt_buffer *qb = dev(q, (size_t)(T * H * 512) * 2), *cb = dev(cache, (size_t)(nb * stride)),
                *ib = dev(idx, (size_t)(T * topk) * 4), *lb = dev(lens, (size_t)T * 4),
                *o1 = dev(NULL, (size_t)(T * H * 512) * 2), *o2 = dev(NULL, (size_t)(T * H * 512) * 2),
                *l1 = dev(NULL, (size_t)(T * H) * 4), *l2 = dev(NULL, (size_t)(T * H) * 4);
  dsv4rt_sparse_decode_args a = {.out = o1, .lse = l1, .q = qb, .n_tokens = T, .heads = H, .cache = cb,
                                 .num_blocks = nb, .block_size = bs, .block_stride = stride, .indices = ib,
                                 .lens = lb, .topk = topk, .softmax_scale = 0.0442f, .tensor_scale = 1};
  dsv4rt_status s = dsv4rt_sparse_decode(bundle, &a, NULL);
  dsv4rt_launch_opts named = {.kernel = name};
  a.out = o2, a.lse = l2;
  if (!s)
    s = dsv4rt_sparse_decode(bundle, &a, &named);
  if (!s)
    s = dsv4rt_synchronize(ctx);
  CHECK(s == DSV4RT_OK, "decode T=%lld: %s", (long long)T, dsv4rt_last_error(ctx));
  uint16_t *g1 = malloc((size_t)(T * H * 512) * 2), *g2 = malloc((size_t)(T * H * 512) * 2);
  dsv4rt_buffer_read(o1, 0, g1, (size_t)(T * H * 512) * 2);
  dsv4rt_buffer_read(o2, 0, g2, (size_t)(T * H * 512) * 2);
  size_t first = 0;
  CHECK(dsv4_check_bf16(g1, g2, (size_t)(T * H * 512), &first) == 0,
        "T=%lld: the unnamed decode (tuned: %s) differs from the named one at %zu", (long long)T, name, first);
  dsv4rt_buffer *all[] = {qb, cb, ib, lb, o1, o2, l1, l2};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++)
    dsv4rt_buffer_destroy(all[i]);
  free(cache), free(kv), free(q), free(slots), free(idx), free(lens), free(g1), free(g2);
}

int main(int argc, char **argv)
{
  if (argc != 3 && argc != 5 && argc != 6) {
    fprintf(stderr, "usage: test_choice BUNDLE opencl|cuda [TUNED_BUNDLE TUNED_LOCK [OTHER_BUNDLE]]\n");
    return 2;
  }
  int st = harness_open(argv[2]);
  if (st)
    return st;
  if (harness_bundle(argv[1], &bundle))
    return 1;
  /* two decode variants of the sweep that run here */
  const char *x = NULL, *y = NULL;
  for (int e = 0; e < dsv4rt_bundle_count(bundle); e++) {
    const char *name, *op;
    if (dsv4rt_bundle_entry(bundle, e, &name, &op, NULL, NULL) || strcmp(op, "sparse_decode") ||
        strncmp(name, "sd__", 4) || !dsv4rt_bundle_entry_runs(bundle, e))
      continue;
    if (!x)
      x = name;
    else if (strcmp(name, x) && !y)
      y = name;
  }
  if (!x || !y) {
    printf("SKIPPED: the bundle has no two sd__ decode variants that run on %s\n", dsv4rt_device_name(ctx));
    dsv4rt_bundle_destroy(bundle);
    dsv4rt_context_destroy(ctx);
    return 77;
  }
  char model[DSV4_LOCK_TEXT];
  dsv4_tune_device_model(dsv4rt_device_name(ctx), model, sizeof model);
  CHECK(dsv4rt_bundle_tuning_count(bundle) == 0 && !tuned(2, 64), "a fresh bundle has no tuning");

  /* two buckets, two winners; T 3 falls in the T 4 bucket; other shapes: none */
  ent fresh[] = {{"T=2,H=64,topk=64,extra=64,xbs=64", y, x, NULL, NULL},
                 {"T=4,H=64,topk=64,extra=0,xbs=0", x, y, NULL, NULL},
                 {"T=8,H=64,topk=64,extra=0,xbs=0", y, x, NULL, "Some Other GPU"}};
  char *t = lockfile(fresh, 3, model);
  dsv4rt_status s = dsv4rt_bundle_load_tuning_text(bundle, t, strlen(t));
  CHECK(s == DSV4RT_OK, "load: %s", dsv4rt_last_error(ctx));
  CHECK(dsv4rt_bundle_tuning_count(bundle) == 2, "choices loaded: %d (the other GPU's entry left out)",
        dsv4rt_bundle_tuning_count(bundle));
  const char *c2 = tuned(2, 64), *c3 = tuned(3, 0), *c4 = tuned(4, 0), *c100 = tuned(100, 0), *c8 = tuned(8, 0);
  CHECK(c2 && !strcmp(c2, y), "T 2: %s, expected %s", c2 ? c2 : "none", y);
  CHECK(c3 && !strcmp(c3, x) && c4 && !strcmp(c4, x), "T 3 and 4 (one bucket): %s, %s, expected %s", c3 ? c3 : "none",
        c4 ? c4 : "none", x);
  CHECK(!c100 && !c8, "shapes no entry of this GPU covers: no choice (the default rule)");
  CHECK(!tuned(2, 0), "T 2 without an extra list is another bucket: no choice");
  run_decode(3, x);
  /* a path that is no file: IO, the choices stay */
  CHECK(dsv4rt_bundle_load_tuning(bundle, "/nonexistent/x.lock") == DSV4RT_ERR_IO &&
            dsv4rt_bundle_tuning_count(bundle) == 2,
        "a missing file: %s", dsv4rt_last_error(ctx));
  const char *junk = "{\"format\": \"something else\"}";
  CHECK(dsv4rt_bundle_load_tuning_text(bundle, junk, strlen(junk)) == DSV4RT_ERR_BUNDLE_FORMAT &&
            dsv4rt_bundle_tuning_count(bundle) == 2,
        "not a lockfile: refused, the choices kept");
  free(t);

  /* stale: a winner measured on other code, a winner the bundle lacks */
  char other[65];
  memset(other, 'a', 64), other[64] = 0;
  ent stale[] = {{"T=2,H=64,topk=64,extra=64,xbs=64", y, x, other, NULL},
                 {"T=4,H=64,topk=64,extra=0,xbs=0", x, y, NULL, NULL},
                 {"T=16,H=64,topk=64,extra=0,xbs=0", "sd__not_in_the_bundle", x, NULL, NULL}};
  t = lockfile(stale, 3, model);
  s = dsv4rt_bundle_load_tuning_text(bundle, t, strlen(t));
  CHECK(s == DSV4RT_ERR_STALE_TUNING && strstr(dsv4rt_last_error(ctx), "2 of the 3 entries") &&
            strstr(dsv4rt_last_error(ctx), "differs"),
        "stale entries: status %d: %s", s, dsv4rt_last_error(ctx));
  CHECK(dsv4rt_bundle_tuning_count(bundle) == 1 && !tuned(2, 64) && !tuned(16, 0) && tuned(4, 0),
        "stale entries are never chosen; the fresh one is (%d choices)", dsv4rt_bundle_tuning_count(bundle));
  run_decode(2, x); /* no choice: the default rule's kernel, checked against the named x only for running */
  free(t);
  CHECK(dsv4rt_bundle_load_tuning(bundle, NULL) == DSV4RT_OK && dsv4rt_bundle_tuning_count(bundle) == 0, "NULL clears");
  dsv4rt_bundle_destroy(bundle);
  if (argc >= 5) { /* a tuned bundle (dsv4c --lock) and the lockfile written beside it */
    dsv4_lock l;
    char err[400];
    CHECK(dsv4_lock_read(argv[4], &l, err, sizeof err) == 0, "%s", err);
    if (harness_bundle(argv[3], &bundle))
      return 1;
    /* pass 0: the bundle's choice records alone; 1: the lockfile loaded over
     * them; 2: NULL, back to the records */
    for (int pass = 0; pass < 3; pass++) {
      if (pass == 1) {
        s = dsv4rt_bundle_load_tuning(bundle, argv[4]);
        CHECK(s == DSV4RT_OK, "the tuned bundle's lockfile: %s", dsv4rt_last_error(ctx));
      } else if (pass == 2)
        CHECK(dsv4rt_bundle_load_tuning(bundle, NULL) == DSV4RT_OK, "NULL: %s", dsv4rt_last_error(ctx));
      int mine = 0;
      for (int i = 0; i < l.n; i++) {
        dsv4_lock_entry *e = &l.e[i];
        dsv4_shape sh;
        if (strcmp(e->key.device, model) || !e->winner[0] ||
            dsv4_shape_parse(dsv4_tune_op_from_name(e->key.op), e->key.bucket, &sh))
          continue;
        mine++;
        const char *c = dsv4rt_bundle_tuned_kernel(bundle, e->key.op, sh.dim, sh.n);
        CHECK(c && !strcmp(c, e->winner), "%s: bucket %s: tuning chooses %s, the lockfile's winner is %s",
              pass == 0 ? "the bundle's records" : pass == 1 ? "the lockfile over them" : "back to the records",
              e->key.bucket, c ? c : "none", e->winner);
      }
      CHECK(mine > 0 && dsv4rt_bundle_tuning_count(bundle) == mine, "pass %d: %d choices for %d entries of this device",
            pass, dsv4rt_bundle_tuning_count(bundle), mine);
    }
    dsv4rt_bundle_destroy(bundle);
    if (argc == 6) { /* the same winners recorded for another GPU model: the default rule here */
      if (harness_bundle(argv[5], &bundle))
        return 1;
      CHECK(dsv4rt_bundle_tuning_count(bundle) == 0, "another GPU model's records: %d choices installed",
            dsv4rt_bundle_tuning_count(bundle));
      for (int i = 0; i < l.n; i++) {
        dsv4_lock_entry *e = &l.e[i];
        dsv4_shape sh;
        if (dsv4_shape_parse(dsv4_tune_op_from_name(e->key.op), e->key.bucket, &sh))
          continue;
        const char *c = dsv4rt_bundle_tuned_kernel(bundle, e->key.op, sh.dim, sh.n);
        CHECK(!c, "another GPU model's records: bucket %s chooses %s (the default rule expected)", e->key.bucket, c);
      }
      dsv4rt_bundle_destroy(bundle);
    }
    dsv4_lock_free(&l);
  }
  dsv4rt_context_destroy(ctx);
  return harness_finish();
}
