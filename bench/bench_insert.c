/* bench_insert.c -- achieved bandwidth of the cache writer beside a
 * device-to-device copy measured in the same run.
 *
 *   bench_insert INSERT_BUNDLE [cuda|hip|opencl]
 *
 * 16K tokens (DSV4_BENCH_SMALL: 1K), every kv_insert kernel of the bundle:
 * the KV part alone and, for kernels with the q branch, the fused op with
 * 64 heads (V4-Flash) as vLLM runs it.  Bytes counted are the fewest the op
 * must move: kv rows and slots (and positions) read, the token's cache bytes
 * written; with q, q read and q_out written.  The cos/sin rows a token
 * reads are counted too.  Each kernel's output is first checked against the
 * host reference (cache bytes exactly, q within 1e-2).  Prints a table;
 * asserts nothing about time.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_common.h"
#include "dsv4_check.h"
#include "dsv4_ref.h"

static dsv4rt_bundle *bundle;
static dsv4rt_launch_opts kopts;
static dsv4_rng rng;

typedef struct {
  dsv4rt_kv_insert_args a[BENCH_SETS];
} insert_arg;

static void run_insert(int i, void *p)
{
  if (dsv4rt_kv_insert(bundle, &((insert_arg *)p)->a[i % BENCH_SETS], &kopts))
    bench_die("kv_insert");
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: bench_insert INSERT_BUNDLE [cuda|hip|opencl]\n");
    return 2;
  }
  bench_name = "bench_insert";
  bench_open(argc, argv, 2);
  if (dsv4rt_bundle_open(bench_ctx, argv[1], &bundle))
    bench_die("bundle");
  rng.s = dsv4_check_seed();
  int small = getenv("DSV4_BENCH_SMALL") != NULL;
  int64_t N = small ? 1024 : 16384, H = 64, max_pos = 65536;
  printf("device: %s\n\n", dsv4rt_device_name(bench_ctx));
  double cms, big = bench_copy_gbs(small ? (size_t)64 << 20 : (size_t)1 << 30, &cms);
  printf("%-44s %10s %9s %9s %14s\n", "kernel, 16K tokens (bytes read + written)", "time us", "GB/s", "vs copy",
         "vs equal copy");
  printf("%-44s %10.1f %9.0f %8.1f%% %13s\n", small ? "d2d copy 64 MiB" : "d2d copy 1 GiB", cms * 1e3, big, 100.0, "");

  for (int e = 0; e < dsv4rt_bundle_count(bundle); e++) {
    const char *name, *op;
    dsv4rt_bundle_entry(bundle, e, &name, &op, NULL, NULL);
    if (!dsv4rt_bundle_entry_is_first(bundle, e) || strcmp(op, "kv_insert"))
      continue;
    dsv4_layout L;
    dsv4rt_kernel_info info;
    dsv4rt_bundle_entry_layout(bundle, e, &L);
    dsv4rt_bundle_entry_info(bundle, e, &info);
    int D = L.dim, rope = info.rope_dims, qd = info.q_dim;
    int64_t bs = 64, nb = N / bs + 1, stride = L.block_stride ? L.block_stride : dsv4_layout_min_block_bytes(&L, bs);
    size_t csize = (size_t)(nb * stride);
    /* host inputs: one set, uploaded into BENCH_SETS device copies */
    uint16_t *kv = malloc((size_t)(N * D) * 2);
    for (int64_t i = 0; i < N * D; i++)
      kv[i] = dsv4_ref_f32_to_bf16(ldexpf((float)(dsv4_rng_next(&rng) >> 40) / 16777216.0f - 0.5f,
                                          (int)dsv4_rng_range(&rng, -8, 4)));
    int64_t *slots = malloc((size_t)N * 8), *pos = malloc((size_t)N * 8);
    for (int64_t i = 0; i < N; i++)
      slots[i] = i, pos[i] = dsv4_rng_range(&rng, 0, max_pos - 1);
    float *cs = NULL;
    if (rope) {
      cs = malloc((size_t)(max_pos * rope) * 4);
      for (int64_t p = 0; p < max_pos; p++)
        for (int i = 0; i < rope / 2; i++) {
          float th = (float)p * powf(160000.0f, -2.0f * (float)i / (float)rope);
          cs[p * rope + i] = cosf(th), cs[p * rope + rope / 2 + i] = sinf(th);
        }
    }
    uint16_t *q = NULL;
    size_t nq = qd ? (size_t)(N * H * qd) : 0;
    if (qd) {
      q = malloc(nq * 2);
      for (size_t i = 0; i < nq; i++)
        q[i] = dsv4_ref_f32_to_bf16((float)(dsv4_rng_next(&rng) >> 40) / 16777216.0f - 0.5f);
    }
    insert_arg g;
    for (int s = 0; s < BENCH_SETS; s++)
      g.a[s] = (dsv4rt_kv_insert_args){.cache = bench_dev(NULL, csize), .num_blocks = nb, .block_size = bs,
                                       .block_stride = stride, .kv = bench_dev(kv, (size_t)(N * D) * 2), .n_tokens = N,
                                       .slot_mapping = bench_dev(slots, (size_t)N * 8), .n_insert = N,
                                       .positions = bench_dev(pos, (size_t)N * 8),
                                       .cos_sin = rope ? bench_dev(cs, (size_t)(max_pos * rope) * 4) : NULL,
                                       .max_pos = max_pos, .q = qd ? bench_dev(q, nq * 2) : NULL,
                                       .q_out = qd ? bench_dev(NULL, nq * 2) : NULL, .heads = H, .padded_heads = H,
                                       .eps = 1e-6f};
    kopts.kernel = name;
    /* check once against the reference */
    uint8_t *want = calloc(1, csize), *got = calloc(1, csize);
    dsv4rt_buffer_write(g.a[0].cache, 0, want, csize);
    run_insert(0, &g);
    dsv4rt_synchronize(bench_ctx);
    dsv4rt_buffer_read(g.a[0].cache, 0, got, csize);
    dsv4_ref_kv_insert_ex(&L, kv, N, slots, N, rope ? pos : NULL, cs, max_pos, info.rope_first, rope, want, nb, bs,
                          stride, info.quant_floor ? DSV4_REF_FLOOR_QUOTIENT : DSV4_REF_FLOOR_AMAX);
    if (memcmp(got, want, csize)) {
      fprintf(stderr, "bench_insert: %s: cache bytes differ from the reference\n", name);
      return 1;
    }
    if (qd) {
      uint16_t *qw = malloc(nq * 2), *qg = malloc(nq * 2);
      dsv4_ref_q_norm_rope(q, N, H, H, qd, pos, cs, max_pos, info.rope_first, rope, 1e-6f, qw);
      dsv4rt_buffer_read(g.a[0].q_out, 0, qg, nq * 2);
      for (size_t i = 0; i < nq; i++) {
        float a = dsv4_ref_bf16_to_f32(qg[i]), b = dsv4_ref_bf16_to_f32(qw[i]);
        if (!(fabsf(a - b) <= 1e-2f + 1e-2f * fabsf(b))) {
          fprintf(stderr, "bench_insert: %s: q_out[%zu] = %g, reference %g\n", name, i, a, b);
          return 1;
        }
      }
      free(qw), free(qg);
    }
    double ms = bench_time_ms(run_insert, &g);
    double per_tok = (double)D * 2 + 8 + (double)dsv4_layout_min_block_bytes(&L, 1) + (rope ? 8 + rope * 4 : 0);
    double bytes = (double)N * per_tok + (qd ? 2.0 * (double)nq * 2 : 0);
    double gbs = bytes / (ms * 1e-3) / 1e9, ems, eq = bench_copy_gbs((size_t)(bytes / 2), &ems);
    char label[96];
    snprintf(label, sizeof label, "%s%s", name, qd ? " (KV + q, 64 heads)" : "");
    printf("%-44s %10.1f %9.0f %8.1f%% %12.1f%%\n", label, ms * 1e3, gbs, 100 * gbs / big, 100 * gbs / eq);
    for (int s = 0; s < BENCH_SETS; s++) {
      dsv4rt_kv_insert_args *a = &g.a[s];
      dsv4rt_buffer_destroy(a->cache), dsv4rt_buffer_destroy(a->kv), dsv4rt_buffer_destroy(a->slot_mapping),
          dsv4rt_buffer_destroy(a->positions), dsv4rt_buffer_destroy(a->cos_sin), dsv4rt_buffer_destroy(a->q),
          dsv4rt_buffer_destroy(a->q_out);
    }
    free(kv), free(slots), free(pos), free(cs), free(q), free(want), free(got);
  }
  bench_close(bundle);
  return 0;
}
