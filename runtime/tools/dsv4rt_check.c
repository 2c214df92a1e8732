/* dsv4rt_check.c -- run every kernel of a bundle on the best device present
 * and check it against the host reference.
 *
 *   dsv4rt-check BUNDLE [auto|cuda|hip|opencl] [--lock LOCKFILE] [--choose OP=D1,D2,...]
 *
 * The main job of the README's first command: after dsv4c has compiled
 * specs/decode.lua for every target, this picks the device (a CUDA GPU if
 * there is one, else OpenCL, e.g. PoCL on the CPU), runs each kernel that
 * can run there on fresh random inputs, compares bit for bit with the
 * reference written from docs/ops.md and prints a short report.  Exit 0 when
 * every kernel run matched and at least one was run; 1 otherwise (a
 * bundle none of whose kernels this device runs, or this tool checks,
 * proves nothing and fails).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4_check.h"
#include "dsv4_ref.h"
#include "dsv4rt.h"

static dsv4rt_context *ctx;
static dsv4_rng rng;

static dsv4rt_buffer *dev(const void *host, size_t n)
{
  dsv4rt_buffer *b = NULL;
  if (dsv4rt_buffer_create(ctx, n, &b) || (host && dsv4rt_buffer_write(b, 0, host, n))) {
    fprintf(stderr, "dsv4rt-check: %s\n", dsv4rt_last_error(ctx));
    exit(1);
  }
  return b;
}

/* A random DSv4 cache of nb blocks of bs tokens (vLLM page stride). */
static uint8_t *make_cache(int64_t nb, int64_t bs, int64_t *stride)
{
  *stride = (bs * 584 + 575) / 576 * 576;
  uint8_t *c = malloc((size_t)(nb * *stride));
  dsv4_rng_bytes(&rng, c, (size_t)(nb * *stride));
  for (int64_t b = 0; b < nb; b++)
    for (int64_t t = 0; t < bs; t++)
      for (int j = 0; j < 7; j++)
        c[b * *stride + bs * 576 + t * 8 + j] = (uint8_t)dsv4_rng_range(&rng, 105, 140);
  return c;
}

/* Report one kernel's comparison; returns 1 on mismatch. */
static int report(const char *name, const char *what, const uint16_t *got, const uint16_t *want, size_t n, double ms)
{
  size_t first, bad = dsv4_check_bf16(got, want, n, &first);
  printf("  %-22s %-28s %s", name, what, bad ? "MISMATCH" : "bit-exact");
  if (bad)
    printf(" (%zu of %zu values, first at %zu)", bad, n, first);
  printf("  %.3f ms\n", ms);
  return bad != 0;
}

static int check_dequant(dsv4rt_bundle *b, const char *name)
{
  dsv4_layout L = dsv4_check_layout_v4();
  int64_t nb = 64, bs = 64, stride, n = 4096;
  uint8_t *cache = make_cache(nb, bs, &stride);
  int32_t *idx = malloc((size_t)n * 4);
  for (int64_t i = 0; i < n; i++)
    idx[i] = dsv4_rng_range(&rng, 0, 15) ? (int32_t)dsv4_rng_range(&rng, 0, nb * bs - 1) : -1;
  uint16_t *want = malloc((size_t)n * 1024), *got = malloc((size_t)n * 1024);
  dsv4_ref_dequant_gather(&L, cache, nb, bs, stride, idx, n, want);
  dsv4_check_fill16(got, (size_t)n * 512, 0x7F81);
  dsv4rt_buffer *cb = dev(cache, (size_t)(nb * stride)), *ib = dev(idx, (size_t)n * 4),
                *ob = dev(got, (size_t)n * 1024);
  dsv4rt_dequant_gather_args a = {.out = ob, .cache = cb, .indices = ib, .n = n, .num_blocks = nb, .block_size = bs,
                                  .block_stride = stride};
  dsv4rt_launch_opts o = {.kernel = name, .check_contents = 1};
  double ms = 0;
  dsv4rt_status s = dsv4rt_dequant_gather(b, &a, &o); /* first launch: loads the module */
  if (!s)
    s = dsv4rt_timer_start(ctx);
  if (!s)
    s = dsv4rt_dequant_gather(b, &a, &o);
  if (!s)
    s = dsv4rt_timer_stop(ctx, &ms);
  if (!s)
    s = dsv4rt_buffer_read(ob, 0, got, (size_t)n * 1024);
  int rc = s ? (printf("  %-22s error: %s\n", name, dsv4rt_last_error(ctx)), 1)
             : report(name, "4096 scattered slots", got, want, (size_t)n * 512, ms);
  dsv4rt_buffer_destroy(cb), dsv4rt_buffer_destroy(ib), dsv4rt_buffer_destroy(ob);
  free(cache), free(idx), free(want), free(got);
  return rc;
}

static int check_paged(dsv4rt_bundle *b, const char *name)
{
  dsv4_layout L = dsv4_check_layout_v4();
  int64_t nb = 80, bs = 64, stride, R = 4, M = 1024, maxb = 16, offset = 8;
  uint8_t *cache = make_cache(nb, bs, &stride);
  int32_t seq[4], gl[4], *bt = malloc((size_t)(R * maxb) * 4);
  for (int64_t r = 0; r < R; r++) {
    seq[r] = (int32_t)dsv4_rng_range(&rng, 0, 1000);
    gl[r] = (int32_t)dsv4_rng_range(&rng, 0, seq[r]);
    for (int64_t j = 0; j < maxb; j++)
      bt[r * maxb + j] = (int32_t)dsv4_rng_range(&rng, 0, nb - 1);
  }
  size_t ne = (size_t)(R * M * 512);
  uint16_t *want = malloc(ne * 2), *got = malloc(ne * 2);
  dsv4_check_fill16(want, ne, 0x7F81);
  dsv4_check_fill16(got, ne, 0x7F81);
  dsv4_ref_paged_gather(&L, cache, nb, bs, stride, seq, gl, bt, R, maxb, offset, want, M * 512, 512, M);
  dsv4rt_buffer *cb = dev(cache, (size_t)(nb * stride)), *sb = dev(seq, sizeof seq), *gb = dev(gl, sizeof gl),
                *bb = dev(bt, (size_t)(R * maxb) * 4), *ob = dev(got, ne * 2);
  dsv4rt_paged_gather_args a = {.out = ob, .out_stride_r = M * 512, .out_stride_m = 512, .out_rows = M,
                                .offset = offset, .cache = cb, .num_blocks = nb, .block_size = bs,
                                .block_stride = stride, .seq_lens = sb, .gather_lens = gb, .block_table = bb,
                                .num_requests = R, .max_blocks = maxb};
  dsv4rt_launch_opts o = {.kernel = name, .check_contents = 1};
  double ms = 0;
  dsv4rt_status s = dsv4rt_paged_gather(b, &a, &o); /* first launch: loads the module */
  if (!s)
    s = dsv4rt_timer_start(ctx);
  if (!s)
    s = dsv4rt_paged_gather(b, &a, &o);
  if (!s)
    s = dsv4rt_timer_stop(ctx, &ms);
  if (!s)
    s = dsv4rt_buffer_read(ob, 0, got, ne * 2);
  int rc = s ? (printf("  %-22s error: %s\n", name, dsv4rt_last_error(ctx)), 1)
             : report(name, "4 requests, up to 1000 rows", got, want, ne, ms);
  dsv4rt_buffer_destroy(cb), dsv4rt_buffer_destroy(sb), dsv4rt_buffer_destroy(gb), dsv4rt_buffer_destroy(bb),
      dsv4rt_buffer_destroy(ob);
  free(cache), free(bt), free(want), free(got);
  return rc;
}

/* The fused writer: cache bytes exact, q within 1e-2 (vLLM's tolerance). */
static int check_insert(dsv4rt_bundle *b, int e, const char *name)
{
  dsv4_layout L;
  dsv4rt_kernel_info info;
  dsv4rt_bundle_entry_layout(b, e, &L);
  dsv4rt_bundle_entry_info(b, e, &info);
  int64_t N = 256, nb = 5, bs = 64, H = 16, Hp = 64, max_pos = 1024, D = L.dim, qd = info.q_dim, rope = info.rope_dims;
  int64_t stride = (dsv4_layout_min_block_bytes(&L, bs) + 575) / 576 * 576;
  size_t csize = (size_t)(nb * stride);
  uint16_t *kv = malloc((size_t)(N * D) * 2);
  for (int64_t i = 0; i < N * D; i++)
    kv[i] = dsv4_ref_f32_to_bf16(ldexpf((float)(dsv4_rng_next(&rng) >> 40) / 16777216.0f - 0.5f,
                                        (int)dsv4_rng_range(&rng, -20, 8)));
  int64_t *slots = malloc((size_t)N * 8), *pos = malloc((size_t)N * 8);
  for (int64_t i = 0; i < N; i++)
    slots[i] = dsv4_rng_range(&rng, 0, 9) ? i : -1, pos[i] = dsv4_rng_range(&rng, 0, max_pos - 1);
  float *cs = malloc((size_t)(max_pos * (rope ? rope : 2)) * 4);
  for (int64_t p = 0; p < max_pos * (rope ? rope : 2); p++)
    cs[p] = cosf((float)p * 0.37f);
  uint16_t *q = malloc((size_t)(N * H * (qd ? qd : 1)) * 2), *qw = malloc((size_t)(N * Hp * (qd ? qd : 1)) * 2),
           *qg = malloc((size_t)(N * Hp * (qd ? qd : 1)) * 2);
  for (int64_t i = 0; i < N * H * qd; i++)
    q[i] = dsv4_ref_f32_to_bf16((float)(dsv4_rng_next(&rng) >> 40) / 16777216.0f - 0.5f);
  uint8_t *want = calloc(1, csize), *got = malloc(csize);
  dsv4_ref_kv_insert_ex(&L, kv, N, slots, N, rope ? pos : NULL, cs, max_pos, info.rope_first, rope, want, nb, bs,
                        stride, info.quant_floor ? DSV4_REF_FLOOR_QUOTIENT : DSV4_REF_FLOOR_AMAX);
  if (qd)
    dsv4_ref_q_norm_rope(q, N, H, Hp, qd, pos, cs, max_pos, info.rope_first, rope, 1e-6f, qw);
  dsv4rt_buffer *cb = dev(want, csize), *kb = dev(kv, (size_t)(N * D) * 2), *sb = dev(slots, (size_t)N * 8),
                *pb = dev(pos, (size_t)N * 8), *csb = dev(cs, (size_t)(max_pos * (rope ? rope : 2)) * 4),
                *qb = dev(q, (size_t)(N * H * (qd ? qd : 1)) * 2),
                *qob = dev(NULL, (size_t)(N * Hp * (qd ? qd : 1)) * 2);
  memset(got, 0, csize);
  dsv4rt_buffer_write(cb, 0, got, csize);
  dsv4rt_kv_insert_args a = {.cache = cb, .num_blocks = nb, .block_size = bs, .block_stride = stride, .kv = kb,
                             .n_tokens = N, .slot_mapping = sb, .n_insert = N, .positions = pb, .cos_sin = csb,
                             .max_pos = max_pos, .q = qb, .q_out = qob, .heads = H, .padded_heads = Hp, .eps = 1e-6f};
  dsv4rt_launch_opts o = {.kernel = name, .check_contents = 1};
  double ms = 0;
  dsv4rt_status s = dsv4rt_kv_insert(b, &a, &o);
  if (!s)
    s = dsv4rt_timer_start(ctx);
  if (!s)
    s = dsv4rt_kv_insert(b, &a, &o);
  if (!s)
    s = dsv4rt_timer_stop(ctx, &ms);
  if (!s)
    s = dsv4rt_buffer_read(cb, 0, got, csize);
  if (!s && qd)
    s = dsv4rt_buffer_read(qob, 0, qg, (size_t)(N * Hp * qd) * 2);
  int rc;
  if (s)
    rc = (printf("  %-22s error: %s\n", name, dsv4rt_last_error(ctx)), 1);
  else {
    size_t qbad = 0;
    for (int64_t i = 0; i < N * Hp * qd; i++) {
      float x = dsv4_ref_bf16_to_f32(qg[i]), y = dsv4_ref_bf16_to_f32(qw[i]);
      qbad += !(fabsf(x - y) <= 1e-2f + 1e-2f * fabsf(y));
    }
    int cbad = memcmp(got, want, csize) != 0;
    printf("  %-22s %-28s %s%s  %.3f ms\n", name, "256 tokens into the cache",
           cbad ? "CACHE BYTES DIFFER" : "cache bit-exact", qd ? (qbad ? ", q OUTSIDE 1e-2" : ", q within 1e-2") : "",
           ms);
    rc = cbad || qbad;
  }
  dsv4rt_buffer_destroy(cb), dsv4rt_buffer_destroy(kb), dsv4rt_buffer_destroy(sb), dsv4rt_buffer_destroy(pb),
      dsv4rt_buffer_destroy(csb), dsv4rt_buffer_destroy(qb), dsv4rt_buffer_destroy(qob);
  free(kv), free(slots), free(pos), free(cs), free(q), free(qw), free(qg), free(want), free(got);
  return rc;
}

/* Sparse decode with FlashMLA's rule on FlashMLA's input distribution
 * (docs/ops.md section 3, the inputs its tolerances hold on: q randn clamped to
 * +-1, K randn / 10 clamped and written by the reference writer,
 * softmax_scale dim^-0.55, sinks +inf, -inf and finite, every row no valid
 * index names NaN).  Returns 1 on mismatch, 0 when it matched, -1 when
 * this layout has no check here. */
static int check_decode(dsv4rt_bundle *b, int e, const char *name)
{
  dsv4_layout L;
  dsv4rt_kernel_info info;
  dsv4rt_bundle_entry_layout(b, e, &L);
  dsv4rt_bundle_entry_info(b, e, &info);
  int64_t T = 4, H = 64, D = L.dim, V = info.v_dim, nb = 8, bs = 64, topk = 128;
  int64_t stride = dsv4_layout_min_block_bytes(&L, bs);
  uint8_t *cache = dsv4_check_flashmla_cache(&rng, &L, nb, bs, stride, 0.1f);
  if (!cache) { /* a per-tensor scale: the writer's inputs are the caller's */
    printf("  %-22s layout %s: no check for this layout here\n", name, L.name);
    return -1;
  }
  uint16_t *q = malloc((size_t)(T * H * D) * 2), *want = malloc((size_t)(T * H * V) * 2),
           *got = malloc((size_t)(T * H * V) * 2);
  for (int64_t i = 0; i < T * H * D; i++) {
    double v = dsv4_rng_randn(&rng);
    q[i] = dsv4_ref_f32_to_bf16((float)(v > 1 ? 1 : v < -1 ? -1 : v));
  }
  int32_t idx[4 * 128], lens[4] = {128, 77, 0, 128};
  unsigned char used[8 * 64] = {0};
  for (int64_t i = 0; i < T * topk; i++) {
    idx[i] = dsv4_rng_range(&rng, 0, 9) ? (int32_t)dsv4_rng_range(&rng, 0, nb * bs - 1) : -1;
    if (idx[i] >= 0 && i % topk < lens[i / topk])
      used[idx[i]] = 1;
  }
  for (int64_t s = 0; s < nb * bs; s++)
    if (!used[s])
      dsv4_check_nan_row(&L, cache, bs, stride, s);
  float sink[64], lw[4 * 64], lg[4 * 64];
  for (int h = 0; h < H; h++)
    sink[h] = h % 3 == 0 ? INFINITY : h % 3 == 1 ? -INFINITY : (float)dsv4_rng_randn(&rng);
  float scale = powf((float)D, -0.55f);
  dsv4_ref_sparse_decode(&L, (int)V, q, T, H, cache, nb, bs, stride, idx, lens, topk, NULL, 0, 1, 0, NULL, NULL, 0,
                         sink, scale, 1, want, lw);
  dsv4rt_buffer *qb = dev(q, (size_t)(T * H * D) * 2), *cb = dev(cache, (size_t)(nb * stride)),
                *ib = dev(idx, sizeof idx), *lb = dev(lens, sizeof lens), *sb = dev(sink, sizeof sink),
                *ob = dev(NULL, (size_t)(T * H * V) * 2), *lsb = dev(NULL, sizeof lg);
  dsv4rt_sparse_decode_args a = {.out = ob, .lse = lsb, .q = qb, .n_tokens = T, .heads = H, .cache = cb,
                                 .num_blocks = nb, .block_size = bs, .block_stride = stride, .indices = ib, .lens = lb,
                                 .topk = topk, .attn_sink = sb, .softmax_scale = scale, .tensor_scale = 1};
  dsv4rt_launch_opts o = {.kernel = name, .check_contents = 1};
  double ms = 0;
  dsv4rt_status s = dsv4rt_sparse_decode(b, &a, &o);
  if (!s)
    s = dsv4rt_timer_start(ctx);
  if (!s)
    s = dsv4rt_sparse_decode(b, &a, &o);
  if (!s)
    s = dsv4rt_timer_stop(ctx, &ms);
  if (!s)
    s = dsv4rt_buffer_read(ob, 0, got, (size_t)(T * H * V) * 2);
  if (!s)
    s = dsv4rt_buffer_read(lsb, 0, lg, sizeof lg);
  int rc;
  if (s)
    rc = (printf("  %-22s error: %s\n", name, dsv4rt_last_error(ctx)), 1);
  else {
    size_t bad = 0;
    for (int64_t i = 0; i < T * H * V; i++) {
      float x = dsv4_ref_bf16_to_f32(got[i]), y = dsv4_ref_bf16_to_f32(want[i]);
      bad += !(fabsf(x - y) <= 1e-3f + 2.01f / 128 * fabsf(y));
    }
    for (int64_t i = 0; i < T * H; i++)
      bad += isinf(lw[i]) ? lg[i] != lw[i] : !(fabsf(lg[i] - lw[i]) <= 1e-6f + 8.0f / 65536 * fabsf(lw[i]));
    printf("  %-22s %-28s %s  %.3f ms\n", name, "4 tokens x 64 heads",
           bad ? "OUTSIDE FlashMLA's tolerances" : "within FlashMLA's tolerances", ms);
    rc = bad != 0;
  }
  dsv4rt_buffer_destroy(qb), dsv4rt_buffer_destroy(cb), dsv4rt_buffer_destroy(ib), dsv4rt_buffer_destroy(lb),
      dsv4rt_buffer_destroy(sb), dsv4rt_buffer_destroy(ob), dsv4rt_buffer_destroy(lsb);
  free(cache), free(q), free(want), free(got);
  return rc;
}

/* --choose OP=D1,D2,...: which kernel the bundle's tuning picks for a call
 * of OP with those dims (dsv4rt_bundle_tuned_kernel); 0 printed, 2 bad. */
static int choose(dsv4rt_bundle *b, const char *spec)
{
  char op[64];
  int64_t dims[8];
  int nd = 0;
  const char *eq = strchr(spec, '=');
  if (!eq || eq == spec || (size_t)(eq - spec) >= sizeof op) {
    fprintf(stderr, "dsv4rt-check: --choose takes OP=D1,D2,... (sparse_decode=8,128,128,1024,64), not '%s'\n", spec);
    return 2;
  }
  snprintf(op, sizeof op, "%.*s", (int)(eq - spec), spec);
  for (const char *p = eq + 1; *p;) {
    char *end;
    long long v = strtoll(p, &end, 10);
    if (end == p || nd == 8 || (*end && *end != ',')) {
      fprintf(stderr, "dsv4rt-check: --choose %s: the dims are whole numbers separated by commas (at most 8)\n", spec);
      return 2;
    }
    dims[nd++] = v;
    p = *end ? end + 1 : end;
  }
  const char *k = dsv4rt_bundle_tuned_kernel(b, op, dims, nd);
  printf("%s: %s\n", spec,
         k ? k : "no tuning entry for this device's GPU model covers this shape: the runtime's default rule chooses");
  printf("  (%d tuned choice(s) loaded for %s)\n", dsv4rt_bundle_tuning_count(b), dsv4rt_device_name(ctx));
  return 0;
}

static void usage(void)
{
  fprintf(stderr, "usage: dsv4rt-check BUNDLE [auto|cuda|hip|opencl] [--lock LOCKFILE] [--choose OP=D1,D2,...]\n"
                  "  run every kernel of BUNDLE on the device against the C reference; or, with --choose,\n"
                  "  say which kernel the bundle's tuning (and LOCKFILE's) picks for a call of OP with\n"
                  "  those dims (sparse_decode: tokens,heads,topk,extra_topk,extra_block_size;\n"
                  "  paged_mqa_logits: batch,next_n,row_len; the other ops: their main count)\n");
}

int main(int argc, char **argv)
{
  dsv4rt_backend be = DSV4RT_BACKEND_AUTO;
  const char *path = NULL, *lock = NULL, *pick = NULL;
  for (int i = 1; i < argc; i++) {
    if ((!strcmp(argv[i], "--lock") || !strcmp(argv[i], "--choose")) && i + 1 < argc)
      *(argv[i][2] == 'l' ? &lock : &pick) = argv[i + 1], i++;
    else if (!dsv4rt_backend_parse(argv[i], &be))
      continue;
    else if (!path && argv[i][0] != '-')
      path = argv[i];
    else {
      fprintf(stderr, "dsv4rt-check: unexpected argument '%s'\n", argv[i]);
      usage();
      return 2;
    }
  }
  if (!path) {
    usage();
    return 2;
  }
  if (dsv4rt_context_create(be, 0, &ctx)) {
    fprintf(stderr, "dsv4rt-check: %s\n", dsv4rt_last_error(NULL));
    return 1;
  }
  dsv4rt_bundle *b;
  if (dsv4rt_bundle_open(ctx, path, &b)) {
    fprintf(stderr, "dsv4rt-check: %s\n", dsv4rt_last_error(ctx));
    dsv4rt_context_destroy(ctx);
    return 1;
  }
  if (lock && dsv4rt_bundle_load_tuning(b, lock)) {
    fprintf(stderr, "dsv4rt-check: %s\n", dsv4rt_last_error(ctx));
    if (dsv4rt_bundle_tuning_count(b) == 0) {
      dsv4rt_bundle_destroy(b);
      dsv4rt_context_destroy(ctx);
      return 1;
    }
  }
  if (pick) {
    int rc = choose(b, pick);
    dsv4rt_bundle_destroy(b);
    dsv4rt_context_destroy(ctx);
    return rc;
  }
  rng.s = dsv4_check_seed();
  printf("dsv4rt-check: %s\n  device: %s [%s]\n  seed: DSV4_SEED=%llu\n", path, dsv4rt_device_name(ctx),
         dsv4rt_backend_name(dsv4rt_context_backend(ctx)), (unsigned long long)rng.s);
  int bad = 0, ran = 0, unchecked = 0;
  for (int i = 0; i < dsv4rt_bundle_count(b); i++) {
    const char *name, *op, *target, *arch;
    dsv4rt_bundle_entry(b, i, &name, &op, &target, &arch);
    if (!dsv4rt_bundle_entry_is_first(b, i)) /* one run per kernel, not per target */
      continue;
    int runs = dsv4rt_bundle_kernel_runs(b, name);
    if (!runs) {
      printf("  %-22s skipped: no code for this device\n", name);
      unchecked++;
      continue;
    }
    int r = !strcmp(op, "dequant_gather")  ? check_dequant(b, name)
            : !strcmp(op, "paged_gather")  ? check_paged(b, name)
            : !strcmp(op, "kv_insert")     ? check_insert(b, i, name)
            : !strcmp(op, "sparse_decode") ? check_decode(b, i, name)
                                           : -2;
    if (r == -2)
      printf("  %-22s op %s: no check for this op yet\n", name, op);
    if (r < 0)
      unchecked++;
    else
      bad += r, ran++;
  }
  dsv4rt_bundle_destroy(b);
  if (!ran) { /* nothing compared: not a success */
    printf("no kernel run on %s: FAILED\n", dsv4rt_device_name(ctx));
    fprintf(stderr, "dsv4rt-check: %s: none of its %d kernel(s) was run and checked on %s (no code for this device, "
            "or no check here for its op or layout)\n", path, unchecked, dsv4rt_device_name(ctx));
    dsv4rt_context_destroy(ctx);
    return 1;
  }
  printf("%d kernel(s) run on %s, %d not: %s\n", ran, dsv4rt_device_name(ctx), unchecked,
         bad ? "MISMATCHES" : "all match the reference");
  dsv4rt_context_destroy(ctx);
  return bad != 0;
}
