/* test_insert.c -- execution tests of the cache writer (kv_insert) through
 * libdsv4rt.
 *
 *   test_insert INSERT_BUNDLE GATHER_BUNDLE GOLDEN_DIR opencl|cuda
 *
 * For every kv_insert kernel of the bundle, with the layout and RoPE range
 * it was compiled for: fresh random rows whose magnitudes spread over many
 * decades (with all-zero groups, groups below the 1e-4 floor and groups
 * whose amax sits exactly on a scale boundary), slots with -1 and DP
 * padding, a block stride past the page; the cache is poisoned and must
 * equal, byte for byte, what the docs/ops.md reference writes into a copy of the
 * same poisoned cache.  The q branch is compared within vLLM's tolerance
 * (padded heads exactly zero).  Then the round trip: what the kernel wrote is
 * read back by the dequant-gather kernel of the same layout and must equal
 * the reference's dequantization of the reference's cache.  Also the
 * FlashMLA / vLLM fixtures, and refused arguments that leave the cache
 * untouched.  Exit 77 (skipped) without a device for the backend.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4_check.h"
#include "dsv4_ref.h"
#include "dsv4rt.h"
#include "harness.h"
#include "golden_load.h"

static dsv4rt_bundle *bundle, *gathers;




/* A bf16 row of n values: per 64-value block a magnitude class, so that the
 * scale exponent ranges widely and the edge cases occur. */
static void random_row(uint16_t *x, int n)
{
  for (int g = 0; g < n; g += 16) {
    int kind = (int)dsv4_rng_range(&rng, 0, 9);
    int ex = (int)dsv4_rng_range(&rng, -30, 12);
    for (int j = g; j < g + 16 && j < n; j++) {
      float v;
      switch (kind) {
      case 0: /* a zero block */
        v = 0.0f;
        break;
      case 1: /* below the 1e-4 floor */
        v = ldexpf(rnd01(), -16) * (rnd01() < 0.5f ? -1 : 1);
        break;
      case 2: /* amax exactly 448 * 2^k: the boundary of two scales */
        v = j == g ? ldexpf(448.0f, ex - 8) : ldexpf(rnd01(), ex - 9);
        break;
      default: /* spread over decades */
        v = ldexpf(1.0f + rnd01(), ex + (int)dsv4_rng_range(&rng, -6, 0)) * (rnd01() < 0.5f ? -1 : 1);
      }
      x[j] = dsv4_ref_f32_to_bf16(v);
    }
  }
}

/* A cos/sin table of max_pos rows of `dims` floats (cos first). */
static float *make_cos_sin(int64_t max_pos, int dims)
{
  float *t = malloc((size_t)(max_pos * dims) * 4);
  for (int64_t p = 0; p < max_pos; p++)
    for (int i = 0; i < dims / 2; i++) {
      float th = (float)p * powf(10000.0f, -2.0f * (float)i / (float)dims);
      t[p * dims + i] = cosf(th);
      t[p * dims + dims / 2 + i] = sinf(th);
    }
  return t;
}

/* Compare two byte arrays; report the first difference. */
static void same_bytes(const char *what, const uint8_t *got, const uint8_t *want, size_t n)
{
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < n; i++)
    if (got[i] != want[i] && !bad++)
      first = i;
  CHECK(bad == 0, "%s: %zu of %zu bytes differ; first at %zu: got %02x want %02x", what, bad, n, first,
        bad ? got[first] : 0, bad ? want[first] : 0);
}

/* Find the dequant_gather kernel of the gather bundle for a layout. */
static const char *gather_for(const char *layout)
{
  static char name[96];
  snprintf(name, sizeof name, "dequant_gather_%s", layout);
  for (int i = 0; i < dsv4rt_bundle_count(gathers); i++) {
    const char *n;
    dsv4rt_bundle_entry(gathers, i, &n, NULL, NULL, NULL);
    if (!strcmp(n, name))
      return name;
  }
  return NULL;
}

/* One random case of kernel k: N rows, n_ins of them inserted. */
static void random_case(const kern *k, int64_t N, int64_t n_ins, int64_t bs, int64_t extra, int64_t heads, int64_t hp)
{
  const dsv4_layout *L = &k->L;
  int D = L->dim, rope = k->info.rope_dims, qd = k->info.q_dim;
  int64_t stride = (dsv4_layout_min_block_bytes(L, bs) + extra + L->align - 1) / L->align * L->align;
  int64_t nb = (n_ins + bs - 1) / bs + 2, nslots = nb * bs, max_pos = 4096;
  size_t csize = (size_t)(nb * stride);
  uint16_t *kv = malloc((size_t)(N * D) * 2);
  for (int64_t n = 0; n < N; n++)
    random_row(kv + n * D, D);
  /* distinct slots, a few -1 */
  int64_t *perm = malloc((size_t)nslots * 8), *slots = malloc((size_t)(n_ins + 1) * 8), *pos = malloc((size_t)N * 8);
  for (int64_t i = 0; i < nslots; i++)
    perm[i] = i;
  for (int64_t i = nslots - 1; i > 0; i--) {
    int64_t j = dsv4_rng_range(&rng, 0, i), t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
  for (int64_t i = 0; i < n_ins; i++)
    slots[i] = dsv4_rng_range(&rng, 0, 9) ? perm[i] : -1;
  for (int64_t n = 0; n < N; n++)
    pos[n] = dsv4_rng_range(&rng, 0, max_pos - 1);
  float *cs = rope ? make_cos_sin(max_pos, rope) : NULL;
  uint8_t *want = malloc(csize), *got = malloc(csize);
  memset(want, 0xA5, csize);
  int rr = dsv4_ref_kv_insert_ex(L, kv, N, slots, n_ins, rope ? pos : NULL, cs, max_pos, k->info.rope_first, rope,
                                 want, nb, bs, stride,
                                 k->info.quant_floor ? DSV4_REF_FLOOR_QUOTIENT : DSV4_REF_FLOOR_AMAX);
  CHECK(rr == 0, "%s: the reference refused the inputs", k->name);
  dsv4rt_buffer *cb = dev(want, csize), *kb = dev(kv, (size_t)(N * D) * 2), *sb = dev(slots, (size_t)n_ins * 8 + 8),
                *pb = dev(pos, (size_t)N * 8), *csb = dev(cs, cs ? (size_t)(max_pos * rope) * 4 : 16);
  memset(got, 0xA5, csize);
  dsv4rt_buffer_write(cb, 0, got, csize);
  /* the q branch */
  uint16_t *q = NULL, *qref = NULL, *qgot = NULL;
  dsv4rt_buffer *qb = NULL, *qob = NULL;
  size_t nq = 0, nqo = 0;
  if (qd) {
    nq = (size_t)(N * heads * qd), nqo = (size_t)(N * hp * qd);
    q = malloc(nq * 2), qref = malloc(nqo * 2), qgot = malloc(nqo * 2);
    for (size_t i = 0; i < nq; i++)
      q[i] = dsv4_ref_f32_to_bf16((rnd01() - 0.5f) * 8.0f);
    CHECK(dsv4_ref_q_norm_rope(q, N, heads, hp, qd, pos, cs, max_pos, k->info.rope_first, rope, 1e-6f, qref) == 0,
          "%s: q reference refused the inputs", k->name);
    dsv4_check_fill16(qgot, nqo, 0x7F81);
    qb = dev(q, nq * 2), qob = dev(qgot, nqo * 2);
  }
  dsv4rt_kv_insert_args a = {.cache = cb, .num_blocks = nb, .block_size = bs, .block_stride = stride, .kv = kb,
                             .n_tokens = N, .slot_mapping = sb, .n_insert = n_ins, .positions = pb, .cos_sin = csb,
                             .max_pos = max_pos, .q = qb, .q_out = qob, .heads = heads, .padded_heads = hp,
                             .eps = 1e-6f};
  dsv4rt_launch_opts o = {.kernel = k->name, .check_contents = 1};
  dsv4rt_status s = dsv4rt_kv_insert(bundle, &a, &o);
  if (!s)
    s = dsv4rt_synchronize(ctx);
  CHECK(s == DSV4RT_OK, "%s: launch: %s", k->name, dsv4rt_last_error(ctx));
  dsv4rt_buffer_read(cb, 0, got, csize);
  char what[160];
  snprintf(what, sizeof what, "%s N=%lld n_insert=%lld bs=%lld stride=%lld: cache bytes", k->name, (long long)N,
           (long long)n_ins, (long long)bs, (long long)stride);
  same_bytes(what, got, want, csize);
  if (qd) {
    dsv4rt_buffer_read(qob, 0, qgot, nqo * 2);
    size_t bad = 0, pad_bad = 0, first = 0;
    for (size_t i = 0; i < nqo; i++) {
      int64_t h = (int64_t)(i / (size_t)qd) % hp;
      float g = dsv4_ref_bf16_to_f32(qgot[i]), w = dsv4_ref_bf16_to_f32(qref[i]);
      if (h >= heads)
        pad_bad += qgot[i] != 0;
      else if (!(fabsf(g - w) <= 1e-2f + 1e-2f * fabsf(w)) && !bad++)
        first = i;
    }
    CHECK(bad == 0, "%s: q_out: %zu of %zu values outside 1e-2; first at %zu: got %g want %g", k->name, bad, nqo, first,
          dsv4_ref_bf16_to_f32(qgot[first]), dsv4_ref_bf16_to_f32(qref[first]));
    CHECK(pad_bad == 0, "%s: q_out: %zu values of padded heads are not +0", k->name, pad_bad);
  }
  /* round trip: the gather kernel reads back what the writer wrote */
  const char *g = gather_for(L->name);
  CHECK(g != NULL, "no dequant_gather kernel for layout %s in the gather bundle", L->name);
  if (g) {
    int32_t *idx = malloc((size_t)n_ins * 4 + 4);
    for (int64_t i = 0; i < n_ins; i++)
      idx[i] = (int32_t)slots[i]; /* -1 rows read back as zeros */
    uint16_t *dw = malloc((size_t)(n_ins * D) * 2 + 2), *dg = malloc((size_t)(n_ins * D) * 2 + 2);
    dsv4_ref_dequant_gather(L, want, nb, bs, stride, idx, n_ins, dw);
    dsv4rt_buffer *ib = dev(idx, (size_t)n_ins * 4), *ob = dev(NULL, (size_t)(n_ins * D) * 2);
    dsv4rt_dequant_gather_args ga = {.out = ob, .cache = cb, .indices = ib, .n = n_ins, .num_blocks = nb,
                                     .block_size = bs, .block_stride = stride, .tensor_scale = 1};
    dsv4rt_launch_opts go = {.kernel = g};
    s = dsv4rt_dequant_gather(gathers, &ga, &go);
    if (!s)
      s = dsv4rt_synchronize(ctx);
    CHECK(s == DSV4RT_OK, "round trip gather %s: %s", g, dsv4rt_last_error(ctx));
    dsv4rt_buffer_read(ob, 0, dg, (size_t)(n_ins * D) * 2);
    size_t first, bad = dsv4_check_bf16(dg, dw, (size_t)(n_ins * D), &first);
    CHECK(bad == 0, "round trip %s -> %s: %zu values differ from the reference dequantization, first at %zu", k->name,
          g, bad, first);
    /* and the quantization error is what docs/ops.md allows: within 16 * the
     * group's scale for quantized segments, none for stored-as-is ones
     * (kernels without RoPE, whose input is what was quantized) */
    size_t far = 0;
    for (int64_t i = 0; i < n_ins && !rope; i++) {
      if (slots[i] < 0)
        continue;
      for (int sg = 0; sg < L->nseg; sg++) {
        const dsv4_segment *seg = &L->seg[sg];
        int grp = seg->scale_type != DSV4_DT_NONE ? seg->scale_group : seg->d1 - seg->d0;
        for (int g0 = seg->d0; g0 < seg->d1; g0 += grp) {
          float amax = 0;
          for (int d = g0; d < g0 + grp; d++)
            amax = fmaxf(amax, fabsf(dsv4_ref_bf16_to_f32(kv[i * D + d])));
          int e = k->info.quant_floor ? dsv4_ref_quant_exponent_flashmla(amax) : dsv4_ref_quant_exponent(amax);
          float tol = seg->scale_type != DSV4_DT_NONE ? ldexpf(16.0f, e) : 0.0f;
          for (int d = g0; d < g0 + grp; d++)
            far += !(fabsf(dsv4_ref_bf16_to_f32(kv[i * D + d]) - dsv4_ref_bf16_to_f32(dg[i * D + d])) <= tol);
        }
      }
    }
    CHECK(far == 0, "round trip %s: %zu values further from their input than 16 * scale", k->name, far);
    dsv4rt_buffer_destroy(ib), dsv4rt_buffer_destroy(ob);
    free(idx), free(dw), free(dg);
  }
  dsv4rt_buffer_destroy(cb), dsv4rt_buffer_destroy(kb), dsv4rt_buffer_destroy(sb), dsv4rt_buffer_destroy(pb),
      dsv4rt_buffer_destroy(csb), dsv4rt_buffer_destroy(qb), dsv4rt_buffer_destroy(qob);
  free(kv), free(perm), free(slots), free(pos), free(cs), free(want), free(got), free(q), free(qref), free(qgot);
}

/* The fixtures: vLLM's writer (v4_quant) and FlashMLA's V32 quantizer, slot i = row i. */
static void golden_insert(const kern *k, const char *root, const char *name)
{
  char dir[1024], err[512];
  snprintf(dir, sizeof dir, "%s/%s", root, name);
  golden_case *g = golden_open(dir, err, sizeof err);
  CHECK(g != NULL, "golden %s: %s", dir, err);
  if (!g)
    return;
  const golden_tensor *kv = golden_tensor_get(g, "kv"), *cache = golden_tensor_get(g, "cache");
  double bs, stride;
  golden_param_num(g, "block_size", &bs);
  golden_param_num(g, "block_stride", &stride);
  int64_t N = kv->shape[0], nb = cache->shape[0];
  int64_t *slots = malloc((size_t)N * 8);
  for (int64_t i = 0; i < N; i++)
    slots[i] = i;
  size_t csize = cache->nbytes;
  uint8_t *got = malloc(csize);
  memset(got, 0, csize); /* the fixture's block padding is zero */
  dsv4rt_buffer *cb = dev(got, csize), *kb = dev(kv->data, kv->nbytes), *sb = dev(slots, (size_t)N * 8);
  dsv4rt_kv_insert_args a = {.cache = cb, .num_blocks = nb, .block_size = (int64_t)bs, .block_stride = (int64_t)stride,
                             .kv = kb, .n_tokens = N, .slot_mapping = sb, .n_insert = N};
  dsv4rt_launch_opts o = {.kernel = k->name};
  dsv4rt_status s = dsv4rt_kv_insert(bundle, &a, &o);
  if (!s)
    s = dsv4rt_synchronize(ctx);
  CHECK(s == DSV4RT_OK, "golden %s with %s: %s", name, k->name, dsv4rt_last_error(ctx));
  dsv4rt_buffer_read(cb, 0, got, csize);
  char what[160];
  snprintf(what, sizeof what, "golden %s (%s) with %s", name, golden_op(g), k->name);
  same_bytes(what, got, cache->data, csize);
  printf("golden %s with %s: checked %zu cache bytes\n", name, k->name, csize);
  dsv4rt_buffer_destroy(cb), dsv4rt_buffer_destroy(kb), dsv4rt_buffer_destroy(sb);
  free(slots), free(got);
  golden_close(g);
}

/* Bad arguments: refused with a message, the cache untouched. */
static void validation(const kern *k)
{
  const dsv4_layout *L = &k->L;
  int64_t bs = 64, nb = 2, stride = dsv4_layout_min_block_bytes(L, bs), N = 8, D = L->dim;
  size_t csize = (size_t)(nb * stride);
  uint8_t *c = malloc(csize), *back = malloc(csize);
  memset(c, 0x3C, csize);
  int64_t slots[8] = {0, 1, 2, 3, 4, 5, 6, 7}, pos[8] = {0};
  uint16_t *kv = calloc((size_t)(N * D), 2);
  float cs[64 * 2];
  for (int i = 0; i < 128; i++)
    cs[i] = 0.5f;
  dsv4rt_buffer *cb = dev(c, csize), *kb = dev(kv, (size_t)(N * D) * 2), *sb = dev(slots, sizeof slots),
                *pb = dev(pos, sizeof pos), *csb = dev(cs, sizeof cs), *qb = dev(NULL, 16);
  dsv4rt_kv_insert_args ok = {.cache = cb, .num_blocks = nb, .block_size = bs, .block_stride = stride, .kv = kb,
                              .n_tokens = N, .slot_mapping = sb, .n_insert = N, .positions = pb, .cos_sin = csb,
                              .max_pos = 1, .q = qb, .q_out = qb, .heads = 0, .padded_heads = 0, .eps = 1e-6f};
  dsv4rt_launch_opts o = {.kernel = k->name, .check_contents = 1};
  struct {
    const char *what;
    dsv4rt_kv_insert_args a;
    dsv4rt_status want;
  } cases[8];
  int n = 0;
  cases[n].what = "n_insert > n_tokens", cases[n].a = ok, cases[n].want = DSV4RT_ERR_OUT_OF_RANGE,
  cases[n++].a.n_insert = N + 1;
  cases[n].what = "cache smaller than num_blocks * stride", cases[n].a = ok,
  cases[n].want = DSV4RT_ERR_BUFFER_TOO_SMALL, cases[n++].a.num_blocks = nb + 1;
  cases[n].what = "null kv", cases[n].a = ok, cases[n].want = DSV4RT_ERR_NULL_ARG, cases[n++].a.kv = NULL;
  cases[n].what = "slot_mapping too small", cases[n].a = ok, cases[n].want = DSV4RT_ERR_BUFFER_TOO_SMALL,
  cases[n].a.n_tokens = 64, cases[n++].a.n_insert = 64;
  if (k->info.rope_dims) {
    cases[n].what = "cos_sin smaller than max_pos rows", cases[n].a = ok, cases[n].want = DSV4RT_ERR_BUFFER_TOO_SMALL,
    cases[n++].a.max_pos = 4096;
  }
  if (k->info.q_dim) {
    cases[n].what = "padded_heads < heads", cases[n].a = ok, cases[n].want = DSV4RT_ERR_OUT_OF_RANGE,
    cases[n].a.heads = 2, cases[n++].a.padded_heads = 1;
    cases[n].what = "eps NaN", cases[n].a = ok, cases[n].want = DSV4RT_ERR_NOT_FINITE, cases[n++].a.eps = NAN;
  }
  for (int i = 0; i < n; i++) {
    dsv4rt_status s = dsv4rt_kv_insert(bundle, &cases[i].a, &o);
    dsv4rt_synchronize(ctx);
    CHECK(s == cases[i].want && dsv4rt_last_error(ctx)[0], "%s: %s: status %d (%s), expected %d", k->name,
          cases[i].what, s, dsv4rt_status_name(s), cases[i].want);
  }
  slots[5] = nb * bs; /* past the cache */
  dsv4rt_buffer_write(sb, 0, slots, sizeof slots);
  dsv4rt_status s = dsv4rt_kv_insert(bundle, &ok, &o);
  dsv4rt_synchronize(ctx);
  CHECK(s == DSV4RT_ERR_BAD_CONTENTS && strstr(dsv4rt_last_error(ctx), "slot_mapping[5]"),
        "%s: slot past the cache: %s", k->name, dsv4rt_last_error(ctx));
  dsv4rt_buffer_read(cb, 0, back, csize);
  CHECK(!memcmp(back, c, csize), "%s: a refused call changed the cache", k->name);
  dsv4rt_buffer_destroy(cb), dsv4rt_buffer_destroy(kb), dsv4rt_buffer_destroy(sb), dsv4rt_buffer_destroy(pb),
      dsv4rt_buffer_destroy(csb), dsv4rt_buffer_destroy(qb);
  free(c), free(back), free(kv);
}

int main(int argc, char **argv)
{
  if (argc != 5) {
    fprintf(stderr, "usage: test_insert INSERT_BUNDLE GATHER_BUNDLE GOLDEN_DIR opencl|cuda\n");
    return 2;
  }
  int st = harness_open(argv[4]);
  if (st)
    return st;
  if (harness_bundle(argv[1], &bundle) || harness_bundle(argv[2], &gathers))
    return 1;
  const char *groot = golden_root(argv[3]);
  int ran = 0;
  for (int e = 0; e < dsv4rt_bundle_count(bundle); e++) {
    kern k;
    if (!harness_kernel(bundle, e, "kv_insert", &k))
      continue;
    random_case(&k, 300, 300, 64, 0, 64, 64);
    random_case(&k, 200, 150, 64, 4096, 8, 64); /* DP padding, padded heads, a stride past the page */
    random_case(&k, 37, 37, 2, 96, 1, 2);       /* C128-sized pages */
    /* vLLM's writer made v4_quant, FlashMLA's test quantizer v32_quant */
    if (groot && !k.info.rope_dims && !k.info.quant_floor && !strcmp(k.L.name, "fp8_ds_mla_v4"))
      golden_insert(&k, groot, "v4_quant");
    if (groot && !k.info.rope_dims && k.info.quant_floor && !strcmp(k.L.name, "fp8_ds_mla_v32"))
      golden_insert(&k, groot, "v32_quant");
    validation(&k);
    ran++;
  }
  CHECK(ran > 0, "the bundle has no kv_insert kernel");
  dsv4rt_bundle_destroy(bundle);
  dsv4rt_bundle_destroy(gathers);
  dsv4rt_context_destroy(ctx);
  return harness_finish();
}
