/* test_decode.c -- execution tests of the sparse MLA decode kernels through
 * libdsv4rt.
 *
 *   test_decode BUNDLE GOLDEN_DIR opencl|cuda
 *
 * Every sparse_decode kernel of the bundle, with its own layout: fresh
 * random caches with realistic values, q, index lists with -1 entries and
 * partial lengths (p < 127), an extra (compressed) cache with its own block
 * size and stride, and sinks including +inf and -inf; rows with no valid
 * index.  out and lse are compared with the reference written from OPS.md
 * within FlashMLA's own tolerances, by its own rule (a value fails when its
 * error reaches both bounds; out: abs 1e-3, rel 2.01/128 and a cosine diff
 * within 5e-6; lse: abs 1e-6, rel 8/65536), after poisoning both.  The DSv4
 * kernel also runs the four FlashMLA fixtures.  Exit 77 (skipped) without a
 * device.
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

static dsv4rt_bundle *bundle;




/* A cache of realistic values for any layout: finite e4m3 codes, bf16 in
 * [-2, 2], group scales 2^-9 .. 2^-5. */
static uint8_t *make_cache(const dsv4_layout *L, int64_t nb, int64_t bs, int64_t stride)
{
  uint8_t *c = malloc((size_t)(nb * stride));
  dsv4_rng_bytes(&rng, c, (size_t)(nb * stride));
  int tail = L->scale_place == DSV4_SCALES_BLOCK_TAIL;
  for (int64_t b = 0; b < nb; b++)
    for (int64_t t = 0; t < bs; t++) {
      uint8_t *blk = c + b * stride, *row = blk + t * L->row_bytes;
      uint8_t *srow = blk + (tail ? bs * L->row_bytes + t * L->scale_row_bytes : t * L->row_bytes);
      for (int i = 0; i < L->nseg; i++) {
        const dsv4_segment *s = &L->seg[i];
        for (int d = 0; d < s->d1 - s->d0; d++) {
          uint8_t *p = row + s->offset + d * dsv4_dtype_size(s->type);
          if (s->type == DSV4_DT_E4M3) {
            if ((p[0] & 0x7F) == 0x7F)
              p[0] &= 0xFE; /* no NaN codes */
          } else if (s->type == DSV4_DT_BF16) {
            uint16_t h = dsv4_ref_f32_to_bf16((rnd01() - 0.5f) * 4.0f);
            memcpy(p, &h, 2);
          } else {
            float f = (rnd01() - 0.5f) * 4.0f;
            memcpy(p, &f, 4);
          }
        }
        if (s->scale_type == DSV4_DT_NONE || s->scale_tensor)
          continue;
        for (int g = 0; g < (s->d1 - s->d0) / s->scale_group; g++) {
          int e = (int)dsv4_rng_range(&rng, -9, -5);
          if (s->scale_type == DSV4_DT_UE8M0)
            srow[s->scale_offset + g] = (uint8_t)(e + 127);
          else {
            uint32_t bits = (uint32_t)(e + 127) << 23;
            memcpy(srow + s->scale_offset + 4 * g, &bits, 4);
          }
        }
      }
    }
  return c;
}

/* FlashMLA's own check (its tests' check_is_allclose), not the looser
 * abs + rel * |want| of torch.allclose: a value fails when its error
 * reaches both abs_tol and rel_tol * (|want| + 1e-6); +inf, -inf and NaN
 * must sit at the same places in both (and count as 0 after that); and
 * where cos_tol >= 0, the cosine diff over the whole tensor,
 * 1 - 2 sum(got want) / sum(got^2 + want^2) in double (0 when want is all
 * but zero), must stay within it. */
static int anomaly(float v) { return isnan(v) ? 3 : isinf(v) ? (v > 0 ? 1 : 2) : 0; }

static void close_enough(const char *what, const float *got, const float *want, size_t n, double abs_tol,
                         double rel_tol, double cos_tol)
{
  size_t bad = 0, first = 0;
  double gw = 0, gg_ww = 0, ww = 0;
  for (size_t i = 0; i < n; i++) {
    int ag = anomaly(got[i]), aw = anomaly(want[i]);
    double g = ag ? 0.0 : got[i], w = aw ? 0.0 : want[i], err = fabs(g - w);
    int ok = ag == aw && dsv4_check_flashmla_ok(err, w, abs_tol, rel_tol);
    if (!ok && !bad++)
      first = i;
    gw += g * w, gg_ww += g * g + w * w, ww += w * w;
  }
  CHECK(bad == 0, "%s: %zu of %zu values outside tolerance; first at %zu: got %.9g want %.9g", what, bad, n, first,
        bad ? got[first] : 0, bad ? want[first] : 0);
  double cos_diff = ww < 1e-12 ? 0.0 : 1.0 - 2.0 * gw / gg_ww;
  CHECK(cos_tol < 0 || fabs(cos_diff) <= cos_tol, "%s: cosine diff %.3g above %.3g", what, cos_diff, cos_tol);
}

/* Poison a decode's host outputs (n values of out, nl of lse). */
static void poison(uint16_t *got, float *lgot, size_t n, size_t nl)
{
  dsv4_check_fill16(got, n, 0x7F81);
  for (size_t i = 0; i < nl; i++)
    lgot[i] = NAN;
}

/* Read a decode's out and lse back (into got, lgot) and compare them with
 * the reference's within FlashMLA's tolerances; fo, fw: n floats of room. */
static void check_decode(const char *label, dsv4rt_buffer *ob, dsv4rt_buffer *lseb, uint16_t *got, float *lgot,
                         const uint16_t *want, const float *lwant, float *fo, float *fw, size_t n, size_t nl)
{
  dsv4rt_buffer_read(ob, 0, got, n * 2);
  dsv4rt_buffer_read(lseb, 0, lgot, nl * 4);
  for (size_t i = 0; i < n; i++)
    fo[i] = dsv4_ref_bf16_to_f32(got[i]), fw[i] = dsv4_ref_bf16_to_f32(want[i]);
  char what[224];
  snprintf(what, sizeof what, "%s: out", label);
  close_enough(what, fo, fw, n, 1e-3, 2.01 / 128, 5e-6);
  snprintf(what, sizeof what, "%s: lse", label);
  close_enough(what, lgot, lwant, nl, 1e-6, 8.0 / 65536, -1);
}

/* One random case, a main list of topk entries; unnamed: launch with no
 * kernel name, so the runtime picks (the warp-matrix kernel of k's layout
 * where the device runs one). */
static void random_case_ex(const kern *k, int64_t T, int64_t H, int with_extra, int64_t xbs, int unnamed, int64_t topk)
{
  const dsv4_layout *L = &k->L;
  int D = L->dim, V = k->info.v_dim;
  int64_t bs = 64, nb = 24, stride = (dsv4_layout_min_block_bytes(L, bs) + 1024 + 15) / 16 * 16;
  int64_t xnb = with_extra ? (xbs == 2 ? 300 : 24) : 0;
  int64_t xstride = with_extra ? (dsv4_layout_min_block_bytes(L, xbs) + 15) / 16 * 16 : 0;
  int64_t xtopk = with_extra ? 256 : 0;
  uint8_t *cache = make_cache(L, nb, bs, stride), *xcache = with_extra ? make_cache(L, xnb, xbs, xstride) : NULL;
  uint16_t *q = malloc((size_t)(T * H * D) * 2);
  for (int64_t i = 0; i < T * H * D; i++)
    q[i] = dsv4_ref_f32_to_bf16((rnd01() - 0.5f) * 2.0f);
  int32_t *idx = malloc((size_t)(T * topk) * 4 + 4), *lens = malloc((size_t)T * 4);
  int32_t *xidx = malloc((size_t)(T * xtopk) * 4 + 4), *xlens = malloc((size_t)T * 4);
  for (int64_t t = 0; t < T; t++) {
    int u = (int)dsv4_rng_range(&rng, 0, 7);
    /* empty, a window of fewer than topk positions, or full */
    lens[t] = u == 0 || !topk ? 0 : u == 1 ? (int32_t)dsv4_rng_range(&rng, 1, topk - 1) : (int32_t)topk;
    xlens[t] = (int32_t)dsv4_rng_range(&rng, 0, xtopk);
    for (int64_t j = 0; j < topk; j++)
      idx[t * topk + j] = j < lens[t] && (u != 2) ? (int32_t)dsv4_rng_range(&rng, 0, nb * bs - 1) : -1;
    for (int64_t j = 0; j < xtopk; j++)
      xidx[t * xtopk + j] = dsv4_rng_range(&rng, 0, 9) ? (int32_t)dsv4_rng_range(&rng, 0, xnb * xbs - 1) : -1;
  }
  float *sink = malloc((size_t)H * 4);
  for (int64_t h = 0; h < H; h++) {
    int u = (int)dsv4_rng_range(&rng, 0, 9);
    sink[h] = u == 0 ? INFINITY : u == 1 ? -INFINITY : (rnd01() - 0.5f) * 8.0f;
  }
  float scale = 1.0f / sqrtf((float)D), ts = 0.0371f;
  uint16_t *want = malloc((size_t)(T * H * V) * 2), *got = malloc((size_t)(T * H * V) * 2);
  float *lwant = malloc((size_t)(T * H) * 4), *lgot = malloc((size_t)(T * H) * 4);
  int rr = dsv4_ref_sparse_decode(L, V, q, T, H, cache, nb, bs, stride, idx, lens, topk, xcache, xnb, xbs, xstride, xidx,
                                  xlens, xtopk, sink, scale, ts, want, lwant);
  CHECK(rr == 0, "%s: reference refused the inputs", k->name);
  poison(got, lgot, (size_t)(T * H * V), (size_t)(T * H));
  dsv4rt_buffer *qb = dev(q, (size_t)(T * H * D) * 2), *cb = dev(cache, (size_t)(nb * stride)),
                *ib = dev(idx, (size_t)(T * topk) * 4 + 4), *lb = dev(lens, (size_t)T * 4),
                *xcb = with_extra ? dev(xcache, (size_t)(xnb * xstride)) : NULL,
                *xib = with_extra ? dev(xidx, (size_t)(T * xtopk) * 4) : NULL,
                *xlb = with_extra ? dev(xlens, (size_t)T * 4) : NULL, *sb = dev(sink, (size_t)H * 4),
                *ob = dev(got, (size_t)(T * H * V) * 2), *lseb = dev(lgot, (size_t)(T * H) * 4);
  dsv4rt_sparse_decode_args a = {.out = ob, .lse = lseb, .q = qb, .n_tokens = T, .heads = H, .cache = cb,
                                 .num_blocks = nb, .block_size = bs, .block_stride = stride, .indices = ib,
                                 .lens = lb, .topk = topk, .extra_cache = xcb, .extra_num_blocks = xnb,
                                 .extra_block_size = xbs, .extra_block_stride = xstride, .extra_indices = xib,
                                 .extra_lens = xlb, .extra_topk = xtopk, .attn_sink = sb, .softmax_scale = scale,
                                 .tensor_scale = ts};
  /* a second decode with another q, launched right behind the first with
   * no synchronization between them (the matrix forms' kernels may start
   * before the one before them ends: they share the split-KV work space),
   * checked with the last run */
  uint16_t *q2 = malloc((size_t)(T * H * D) * 2), *want2 = malloc((size_t)(T * H * V) * 2),
           *got2 = malloc((size_t)(T * H * V) * 2);
  float *lwant2 = malloc((size_t)(T * H) * 4), *lgot2 = malloc((size_t)(T * H) * 4);
  for (int64_t i = 0; i < T * H * D; i++)
    q2[i] = dsv4_ref_f32_to_bf16((rnd01() - 0.5f) * 2.0f);
  rr = dsv4_ref_sparse_decode(L, V, q2, T, H, cache, nb, bs, stride, idx, lens, topk, xcache, xnb, xbs, xstride, xidx,
                              xlens, xtopk, sink, scale, ts, want2, lwant2);
  CHECK(rr == 0, "%s: reference refused the inputs", k->name);
  poison(got2, lgot2, (size_t)(T * H * V), (size_t)(T * H));
  dsv4rt_buffer *qb2 = dev(q2, (size_t)(T * H * D) * 2), *ob2 = dev(got2, (size_t)(T * H * V) * 2),
                *lseb2 = dev(lgot2, (size_t)(T * H) * 4);
  dsv4rt_sparse_decode_args a2 = a;
  a2.q = qb2, a2.out = ob2, a2.lse = lseb2;
  /* the matrix forms: split-KV as the runtime chooses, one CTA a token,
   * and an uneven split; each run on freshly poisoned outputs */
  static const int splits[] = {0, 1, 3};
  int runs = k->info.matrix ? 3 : 1;
  float *fo = malloc((size_t)(T * H * V) * 4), *fw = malloc((size_t)(T * H * V) * 4);
  for (int si = 0; si < runs; si++) {
    poison(got, lgot, (size_t)(T * H * V), (size_t)(T * H));
    dsv4rt_buffer_write(ob, 0, got, (size_t)(T * H * V) * 2);
    dsv4rt_buffer_write(lseb, 0, lgot, (size_t)(T * H) * 4);
    dsv4rt_launch_opts o = {.kernel = unnamed ? NULL : k->name, .check_contents = 1, .splits = splits[si]};
    dsv4rt_status s = dsv4rt_sparse_decode(bundle, &a, &o);
    int second = si == runs - 1;
    if (!s && second)
      s = dsv4rt_sparse_decode(bundle, &a2, &o);
    if (!s)
      s = dsv4rt_synchronize(ctx);
    CHECK(s == DSV4RT_OK, "%s: launch: %s", k->name, dsv4rt_last_error(ctx));
    char label[192];
    snprintf(label, sizeof label, "%s%s T=%lld H=%lld extra=%s topk=%lld splits=%d", unnamed ? "unnamed, layout of " : "",
             k->name, (long long)T, (long long)H, with_extra ? (xbs == 2 ? "bs 2" : "bs 64") : "none", (long long)topk,
             splits[si]);
    check_decode(label, ob, lseb, got, lgot, want, lwant, fo, fw, (size_t)(T * H * V), (size_t)(T * H));
    if (second) {
      strncat(label, ", the decode launched right behind", sizeof label - strlen(label) - 1);
      check_decode(label, ob2, lseb2, got2, lgot2, want2, lwant2, fo, fw, (size_t)(T * H * V), (size_t)(T * H));
    }
  }
  dsv4rt_buffer_destroy(qb2), dsv4rt_buffer_destroy(ob2), dsv4rt_buffer_destroy(lseb2);
  free(q2), free(want2), free(got2), free(lwant2), free(lgot2);
  dsv4rt_buffer_destroy(qb), dsv4rt_buffer_destroy(cb), dsv4rt_buffer_destroy(ib), dsv4rt_buffer_destroy(lb),
      dsv4rt_buffer_destroy(xcb), dsv4rt_buffer_destroy(xib), dsv4rt_buffer_destroy(xlb), dsv4rt_buffer_destroy(sb),
      dsv4rt_buffer_destroy(ob), dsv4rt_buffer_destroy(lseb);
  free(cache), free(xcache), free(q), free(idx), free(lens), free(xidx), free(xlens), free(sink), free(want), free(got),
      free(lwant), free(lgot), free(fo), free(fw);
}

static void random_case(const kern *k, int64_t T, int64_t H, int with_extra, int64_t xbs)
{
  random_case_ex(k, T, H, with_extra, xbs, 0, 128);
}

/* A FlashMLA fixture (DSv4 layout). */
static void golden_case_run(const kern *k, const char *root, const char *name)
{
  char dir[1024], err[512];
  snprintf(dir, sizeof dir, "%s/%s", root, name);
  golden_case *g = golden_open(dir, err, sizeof err);
  CHECK(g != NULL, "golden %s: %s", dir, err);
  if (!g)
    return;
  const golden_tensor *q = golden_tensor_get(g, "q"), *sc = golden_tensor_get(g, "swa_cache"),
                      *si = golden_tensor_get(g, "swa_indices"), *sl = golden_tensor_get(g, "swa_lens"),
                      *sink = golden_tensor_get(g, "attn_sink"), *xc = golden_tensor_get(g, "extra_cache"),
                      *xi = golden_tensor_get(g, "extra_indices"), *xl = golden_tensor_get(g, "extra_lens"),
                      *out = golden_tensor_get(g, "out"), *lse = golden_tensor_get(g, "lse");
  double scale, bs, stride, xbs = 1, xstride = 0;
  golden_param_num(g, "softmax_scale", &scale);
  golden_param_num(g, "swa_block_size", &bs);
  golden_param_num(g, "swa_block_stride", &stride);
  if (xc) {
    golden_param_num(g, "extra_block_size", &xbs);
    golden_param_num(g, "extra_block_stride", &xstride);
  }
  int64_t T = q->shape[0], H = q->shape[1];
  dsv4rt_buffer *qb = dev(q->data, q->nbytes), *cb = dev(sc->data, sc->nbytes), *ib = dev(si->data, si->nbytes),
                *lb = dev(sl->data, sl->nbytes), *skb = dev(sink->data, sink->nbytes),
                *xcb = xc ? dev(xc->data, xc->nbytes) : NULL, *xib = xc ? dev(xi->data, xi->nbytes) : NULL,
                *xlb = xc ? dev(xl->data, xl->nbytes) : NULL, *ob = dev(NULL, out->nbytes),
                *lseb = dev(NULL, lse->nbytes);
  dsv4rt_sparse_decode_args a = {.out = ob, .lse = lseb, .q = qb, .n_tokens = T, .heads = H, .cache = cb,
                                 .num_blocks = sc->shape[0], .block_size = (int64_t)bs, .block_stride = (int64_t)stride,
                                 .indices = ib, .lens = lb, .topk = si->shape[1], .extra_cache = xcb,
                                 .extra_num_blocks = xc ? xc->shape[0] : 0, .extra_block_size = (int64_t)xbs,
                                 .extra_block_stride = (int64_t)xstride, .extra_indices = xib, .extra_lens = xlb,
                                 .extra_topk = xc ? xi->shape[1] : 0, .attn_sink = skb, .softmax_scale = (float)scale,
                                 .tensor_scale = 1};
  dsv4rt_launch_opts o = {.kernel = k->name, .check_contents = 1};
  dsv4rt_status s = dsv4rt_sparse_decode(bundle, &a, &o);
  if (!s)
    s = dsv4rt_synchronize(ctx);
  CHECK(s == DSV4RT_OK, "golden %s: %s", name, dsv4rt_last_error(ctx));
  uint16_t *go = malloc(out->nbytes);
  float *gl = malloc(lse->nbytes), *fo = malloc((size_t)out->nelem * 4), *fw = malloc((size_t)out->nelem * 4);
  dsv4rt_buffer_read(ob, 0, go, out->nbytes);
  dsv4rt_buffer_read(lseb, 0, gl, lse->nbytes);
  for (int64_t i = 0; i < out->nelem; i++)
    fo[i] = dsv4_ref_bf16_to_f32(go[i]), fw[i] = dsv4_ref_bf16_to_f32(((const uint16_t *)out->data)[i]);
  char what[160];
  snprintf(what, sizeof what, "golden %s (FlashMLA ref_sparse_attn_decode) out", name);
  close_enough(what, fo, fw, (size_t)out->nelem, out->tol_abs, out->tol_rel, 5e-6); /* (OPS.md: FlashMLA's cosine tolerance) */
  snprintf(what, sizeof what, "golden %s lse", name);
  close_enough(what, gl, lse->data, (size_t)lse->nelem, lse->tol_abs, lse->tol_rel, -1);
  printf("golden %s with %s: checked %lld outputs\n", name, k->name, (long long)out->nelem);
  dsv4rt_buffer_destroy(qb), dsv4rt_buffer_destroy(cb), dsv4rt_buffer_destroy(ib), dsv4rt_buffer_destroy(lb),
      dsv4rt_buffer_destroy(skb), dsv4rt_buffer_destroy(xcb), dsv4rt_buffer_destroy(xib), dsv4rt_buffer_destroy(xlb),
      dsv4rt_buffer_destroy(ob), dsv4rt_buffer_destroy(lseb);
  free(go), free(gl), free(fo), free(fw);
  golden_close(g);
}

/* Bad arguments: refused, outputs untouched. */
static void validation(const kern *k)
{
  const dsv4_layout *L = &k->L;
  int64_t T = 2, H = 4, nb = 2, bs = 64, stride = dsv4_layout_min_block_bytes(L, bs), topk = 4;
  uint8_t *cache = make_cache(L, nb, bs, stride);
  int32_t idx[8] = {0, 1, 2, -1, 5, 6, 7, 8}, lens[2] = {4, 4};
  uint16_t *q = calloc((size_t)(T * H * L->dim), 2), *o = malloc((size_t)(T * H * k->info.v_dim) * 2);
  dsv4_check_fill16(o, (size_t)(T * H * k->info.v_dim), 0x5A5A);
  dsv4rt_buffer *qb = dev(q, (size_t)(T * H * L->dim) * 2), *cb = dev(cache, (size_t)(nb * stride)),
                *ib = dev(idx, sizeof idx), *lb = dev(lens, sizeof lens),
                *ob = dev(o, (size_t)(T * H * k->info.v_dim) * 2), *lseb = dev(NULL, (size_t)(T * H) * 4);
  dsv4rt_sparse_decode_args ok = {.out = ob, .lse = lseb, .q = qb, .n_tokens = T, .heads = H, .cache = cb,
                                  .num_blocks = nb, .block_size = bs, .block_stride = stride, .indices = ib,
                                  .lens = lb, .topk = topk, .softmax_scale = 0.04f, .tensor_scale = 1};
  dsv4rt_launch_opts opt = {.kernel = k->name, .check_contents = 1};
  dsv4rt_sparse_decode_args a;
  const char *what[8];
  dsv4rt_status st[8], want[8];
  int n = 0;
  a = ok, a.heads = 8, what[n] = "q smaller than n_tokens x heads", want[n] = DSV4RT_ERR_BUFFER_TOO_SMALL,
  st[n++] = dsv4rt_sparse_decode(bundle, &a, &opt);
  a = ok, a.topk = 5, what[n] = "indices smaller than n_tokens x topk", want[n] = DSV4RT_ERR_BUFFER_TOO_SMALL,
  st[n++] = dsv4rt_sparse_decode(bundle, &a, &opt);
  a = ok, a.softmax_scale = NAN, what[n] = "softmax_scale NaN", want[n] = DSV4RT_ERR_NOT_FINITE,
  st[n++] = dsv4rt_sparse_decode(bundle, &a, &opt);
  dsv4rt_launch_opts bad = opt;
  bad.splits = 65, what[n] = "splits 65", want[n] = DSV4RT_ERR_OUT_OF_RANGE, st[n++] = dsv4rt_sparse_decode(bundle, &ok, &bad);
  bad.splits = -1, what[n] = "splits -1", want[n] = DSV4RT_ERR_OUT_OF_RANGE, st[n++] = dsv4rt_sparse_decode(bundle, &ok, &bad);
  a = ok, a.block_stride = stride - 16, what[n] = "stride below the page", want[n] = DSV4RT_ERR_OUT_OF_RANGE,
  st[n++] = dsv4rt_sparse_decode(bundle, &a, &opt);
  idx[5] = (int32_t)(nb * bs); /* past the cache */
  dsv4rt_buffer_write(ib, 0, idx, sizeof idx);
  what[n] = "index past the cache (checked)", want[n] = DSV4RT_ERR_BAD_CONTENTS,
  st[n++] = dsv4rt_sparse_decode(bundle, &ok, &opt);
  idx[5] = -2;
  dsv4rt_buffer_write(ib, 0, idx, sizeof idx);
  what[n] = "index -2 (checked)", want[n] = DSV4RT_ERR_BAD_CONTENTS, st[n++] = dsv4rt_sparse_decode(bundle, &ok, &opt);
  dsv4rt_synchronize(ctx);
  for (int i = 0; i < n; i++)
    CHECK(st[i] == want[i], "%s: %s: status %d (%s), expected %d", k->name, what[i], st[i], dsv4rt_status_name(st[i]),
          want[i]);
  uint16_t *back = malloc((size_t)(T * H * k->info.v_dim) * 2);
  dsv4rt_buffer_read(ob, 0, back, (size_t)(T * H * k->info.v_dim) * 2);
  CHECK(!memcmp(back, o, (size_t)(T * H * k->info.v_dim) * 2), "%s: a refused call wrote out", k->name);
  dsv4rt_buffer_destroy(qb), dsv4rt_buffer_destroy(cb), dsv4rt_buffer_destroy(ib), dsv4rt_buffer_destroy(lb),
      dsv4rt_buffer_destroy(ob), dsv4rt_buffer_destroy(lseb);
  free(cache), free(q), free(o), free(back);
}

int main(int argc, char **argv)
{
  if (argc != 4) {
    fprintf(stderr, "usage: test_decode BUNDLE GOLDEN_DIR opencl|cuda\n");
    return 2;
  }
  int st = harness_open(argv[3]);
  if (st)
    return st;
  if (harness_bundle(argv[1], &bundle))
    return 1;
  const char *groot = golden_root(argv[2]);
  int ran = 0;
  for (int e = 0; e < dsv4rt_bundle_count(bundle); e++) {
    kern k;
    if (!harness_kernel(bundle, e, "sparse_decode", &k))
      continue;
    if (!ran) /* the first kernel: also without a name (the runtime's choice keeps its layout) */
      random_case_ex(&k, 3, 64, 1, 64, 1, 128);
    random_case(&k, 5, 64, 1, 64);  /* C4: extra cache of 64-token pages */
    random_case(&k, 3, 128, 1, 2);  /* C128: pages of 2 entries */
    random_case(&k, 4, 64, 0, 64);  /* SWA only */
    random_case(&k, 3, 20, 1, 64);  /* heads not a multiple of the CTA's */
    random_case(&k, 2, 100, 1, 64); /* two head groups, the second part padding */
    random_case(&k, 2, 192, 0, 64); /* three head groups (CTA pairs: the last beside a padding CTA) */
    random_case_ex(&k, 2, 64, 1, 64, 0, 0); /* topk 0: the extra list alone */
    random_case_ex(&k, 2, 64, 0, 64, 0, 0); /* topk 0 and no extra list: no tiles, every row empty */
    if (groot && !strcmp(k.L.name, "fp8_ds_mla_v4")) {
      golden_case_run(&k, groot, "v4_sparse_decode_c128_h64");
      golden_case_run(&k, groot, "v4_sparse_decode_c4_h128");
      golden_case_run(&k, groot, "v4_sparse_decode_c4_h64");
      golden_case_run(&k, groot, "v4_sparse_decode_swa_only_h64");
    }
    validation(&k);
    ran++;
  }
  CHECK(ran > 0, "the bundle has no sparse_decode kernel");
  dsv4rt_bundle_destroy(bundle);
  dsv4rt_context_destroy(ctx);
  return harness_finish();
}
