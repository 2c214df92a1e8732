/* ops.c -- the typed operation calls: validate everything that can be
 * validated on the host, then marshal the arguments in the order the
 * bundle's signature (dsv4_abi.h) gives and launch.  A failed check returns
 * before any launch, so nothing on the device is written. */
#include <stdlib.h>
#include <string.h>

#include "rt.h"

#define I32_MAX 2147483647LL

/* A buffer argument: present, of this context, at least `need` bytes. */
static dsv4rt_status need_buf(dsv4rt_context *ctx, const dsv4rt_buffer *b, const char *fn, const char *name,
                              long double need)
{
  if (!b)
    return rt_fail(ctx, DSV4RT_ERR_INVALID_ARG, "%s: %s is NULL", fn, name);
  if (b->ctx != ctx)
    return rt_fail(ctx, DSV4RT_ERR_INVALID_ARG, "%s: %s belongs to another context", fn, name);
  if ((long double)b->size < need)
    return rt_fail(ctx, DSV4RT_ERR_INVALID_ARG, "%s: %s holds %zu bytes, the arguments need %.0Lf", fn, name,
                   b->size, need);
  return DSV4RT_OK;
}

/* Device addresses must meet the kernel's vector alignment (CUDA pointers;
 * OpenCL buffers are aligned by the implementation). */
static dsv4rt_status need_align(dsv4rt_context *ctx, const dsv4rt_buffer *b, const char *fn, const char *name,
                                int align)
{
  if (ctx->be->kind == DSV4RT_BACKEND_CUDA && b->native % (uint64_t)align)
    return rt_fail(ctx, DSV4RT_ERR_INVALID_ARG, "%s: %s is not %d-byte aligned", fn, name, align);
  return DSV4RT_OK;
}

static dsv4rt_status need_range(dsv4rt_context *ctx, const char *fn, const char *name, int64_t v, int64_t lo,
                                int64_t hi)
{
  if (v < lo || v > hi)
    return rt_fail(ctx, DSV4RT_ERR_INVALID_ARG, "%s: %s = %lld is outside [%lld, %lld]", fn, name, (long long)v,
                   (long long)lo, (long long)hi);
  return DSV4RT_OK;
}

/* The cache geometry every gather shares. */
static dsv4rt_status check_cache(dsv4rt_context *ctx, const char *fn, const dsv4_layout *l, const dsv4rt_buffer *cache,
                                 int64_t num_blocks, int64_t bs, int64_t stride)
{
  dsv4rt_status s;
  if ((s = need_range(ctx, fn, "num_blocks", num_blocks, 0, I32_MAX)) ||
      (s = need_range(ctx, fn, "block_size", bs, 1, 1 << 20)))
    return s;
  int64_t min = dsv4_layout_min_block_bytes(l, bs);
  if (stride < min)
    return rt_fail(ctx, DSV4RT_ERR_INVALID_ARG, "%s: block_stride %lld is below layout %s's %lld bytes for %lld tokens",
                   fn, (long long)stride, l->name, (long long)min, (long long)bs);
  if (stride % l->align)
    return rt_fail(ctx, DSV4RT_ERR_INVALID_ARG, "%s: block_stride %lld is not a multiple of layout %s's alignment %d",
                   fn, (long long)stride, l->name, l->align);
  if ((s = need_buf(ctx, cache, fn, "cache", (long double)num_blocks * (long double)stride)))
    return s;
  return need_align(ctx, cache, fn, "cache", l->align);
}

/* A per-tensor layout needs a finite kv_scale at launch. */
static dsv4rt_status check_tensor_scale(dsv4rt_context *ctx, const char *fn, const dsv4_layout *l, float v)
{
  for (int i = 0; i < l->nseg; i++)
    if (l->seg[i].scale_tensor && !(v == v && v - v == 0))
      return rt_fail(ctx, DSV4RT_ERR_INVALID_ARG, "%s: layout %s scales per tensor; tensor_scale %g is not finite", fn,
                     l->name, (double)v);
  return DSV4RT_OK;
}

/* Read an int32 device array back for content checks. */
static int32_t *fetch_i32(dsv4rt_context *ctx, dsv4rt_buffer *b, int64_t n, dsv4rt_status *s)
{
  int32_t *p = malloc((size_t)(n ? n : 1) * 4);
  if (!p) {
    *s = rt_fail(ctx, DSV4RT_ERR_OUT_OF_MEMORY, "out of host memory for a content check");
    return NULL;
  }
  *s = n ? dsv4rt_buffer_read(b, 0, p, (size_t)n * 4) : DSV4RT_OK;
  if (*s) {
    free(p);
    return NULL;
  }
  return p;
}

/* What every op call starts with: a bundle, an argument struct, and the
 * entry of the bundle that runs op on this device (named by opts->kernel,
 * or the first). */
static dsv4rt_status begin(dsv4rt_bundle *b, const void *args, dsv4_op op, const dsv4rt_launch_opts *opts,
                           const char *fn, int *entry)
{
  if (!b)
    return DSV4RT_ERR_INVALID_ARG;
  if (!args)
    return rt_fail(b->ctx, DSV4RT_ERR_INVALID_ARG, "%s: args is NULL", fn);
  return rt_find(b, op, opts ? opts->kernel : NULL, entry);
}

dsv4rt_status dsv4rt_dequant_gather(dsv4rt_bundle *b, const dsv4rt_dequant_gather_args *a,
                                    const dsv4rt_launch_opts *opts)
{
  static const char fn[] = "dsv4rt_dequant_gather";
  int e;
  dsv4rt_status s = begin(b, a, DSV4_OP_DEQUANT_GATHER, opts, fn, &e);
  if (s)
    return s;
  dsv4rt_context *ctx = b->ctx;
  const dsv4_bundle_entry *en = &b->entries[e];
  const dsv4_layout *l = &en->layout;
  if ((s = need_range(ctx, fn, "n", a->n, 0, I32_MAX)) ||
      (s = check_cache(ctx, fn, l, a->cache, a->num_blocks, a->block_size, a->block_stride)) ||
      (s = need_buf(ctx, a->indices, fn, "indices", (long double)a->n * 4)) ||
      (s = need_buf(ctx, a->out, fn, "out", (long double)a->n * l->dim * 2)) ||
      (s = need_align(ctx, a->indices, fn, "indices", 4)) || (s = need_align(ctx, a->out, fn, "out", 16)) ||
      (s = check_tensor_scale(ctx, fn, l, a->tensor_scale)))
    return s;
  if (opts && opts->check_contents) {
    int32_t *idx = fetch_i32(ctx, a->indices, a->n, &s);
    if (!idx)
      return s;
    int64_t slots = a->num_blocks * a->block_size;
    for (int64_t i = 0; i < a->n && !s; i++)
      if (idx[i] >= slots)
        s = rt_fail(ctx, DSV4RT_ERR_INVALID_ARG, "%s: indices[%lld] = %d is past the cache's %lld slots", fn,
                    (long long)i, idx[i], (long long)slots);
    free(idx);
    if (s)
      return s;
  }
  rt_arg args[] = {
      {DSV4_ARG_PTR, {.buf = a->out}},
      {DSV4_ARG_IN, {.buf = a->cache}},
      {DSV4_ARG_IN, {.buf = a->indices}},
      {DSV4_ARG_I32, {.i32 = (int32_t)a->n}},
      {DSV4_ARG_I32, {.i32 = (int32_t)a->num_blocks}},
      {DSV4_ARG_I32, {.i32 = (int32_t)a->block_size}},
      {DSV4_ARG_I64, {.i64 = a->block_stride}},
      {DSV4_ARG_F32, {.f32 = a->tensor_scale}},
  };
  uint32_t grid[3] = {(uint32_t)((a->n + en->tokens_per_cta - 1) / en->tokens_per_cta), 1, 1};
  return rt_launch(b, e, grid, args, (int)(sizeof args / sizeof *args));
}

/* Content checks of the paged gather: every row it would write fits out,
 * every position has a block-table column, every block is in the cache. */
static dsv4rt_status check_paged_contents(dsv4rt_context *ctx, const dsv4rt_paged_gather_args *a)
{
  static const char fn[] = "dsv4rt_paged_gather";
  dsv4rt_status s = DSV4RT_OK;
  int32_t *seq = fetch_i32(ctx, a->seq_lens, a->num_requests, &s);
  int32_t *gl = seq && a->gather_lens ? fetch_i32(ctx, a->gather_lens, a->num_requests, &s) : NULL;
  int32_t *bt = seq && !s ? fetch_i32(ctx, a->block_table, a->num_requests * a->max_blocks, &s) : NULL;
  for (int64_t r = 0; r < a->num_requests && bt && !s; r++) {
    int64_t g = gl ? gl[r] : seq[r];
    if (seq[r] < 0 || g < 0 || g > seq[r] || a->offset + g > a->out_rows) {
      s = rt_fail(ctx, DSV4RT_ERR_INVALID_ARG,
                  "%s: request %lld: seq_len %d, gather_len %lld do not fit offset %lld + out_rows %lld", fn,
                  (long long)r, seq[r], (long long)g, (long long)a->offset, (long long)a->out_rows);
      break;
    }
    for (int64_t pos = seq[r] - g; g > 0 && pos < seq[r] && !s; pos += a->block_size - pos % a->block_size) {
      int64_t col = pos / a->block_size;
      if (col >= a->max_blocks)
        s = rt_fail(ctx, DSV4RT_ERR_INVALID_ARG, "%s: request %lld position %lld needs block-table column %lld of %lld",
                    fn, (long long)r, (long long)pos, (long long)col, (long long)a->max_blocks);
      else if (bt[r * a->max_blocks + col] < 0 || bt[r * a->max_blocks + col] >= a->num_blocks)
        s = rt_fail(ctx, DSV4RT_ERR_INVALID_ARG, "%s: block_table[%lld, %lld] = %d is not a block of the cache (%lld)",
                    fn, (long long)r, (long long)col, bt[r * a->max_blocks + col], (long long)a->num_blocks);
    }
  }
  free(seq), free(gl), free(bt);
  return s;
}

dsv4rt_status dsv4rt_paged_gather(dsv4rt_bundle *b, const dsv4rt_paged_gather_args *a, const dsv4rt_launch_opts *opts)
{
  static const char fn[] = "dsv4rt_paged_gather";
  int e;
  dsv4rt_status s = begin(b, a, DSV4_OP_PAGED_GATHER, opts, fn, &e);
  if (s)
    return s;
  dsv4rt_context *ctx = b->ctx;
  const dsv4_bundle_entry *en = &b->entries[e];
  const dsv4_layout *l = &en->layout;
  int64_t R = a->num_requests, M = a->out_rows;
  if ((s = need_range(ctx, fn, "num_requests", R, 0, 65535)) || (s = need_range(ctx, fn, "out_rows", M, 0, I32_MAX)) ||
      (s = need_range(ctx, fn, "offset", a->offset, 0, M)) ||
      (s = need_range(ctx, fn, "max_blocks", a->max_blocks, 1, I32_MAX)) ||
      (s = need_range(ctx, fn, "out_stride_m", a->out_stride_m, l->dim, INT64_MAX / 4)) ||
      (s = need_range(ctx, fn, "out_stride_r", a->out_stride_r, 0, INT64_MAX / 4)) ||
      (s = check_cache(ctx, fn, l, a->cache, a->num_blocks, a->block_size, a->block_stride)))
    return s;
  if (a->out_stride_m % 8 || a->out_stride_r % 8)
    return rt_fail(ctx, DSV4RT_ERR_INVALID_ARG, "%s: out strides (%lld, %lld) must be multiples of 8 elements (16 bytes)",
                   fn, (long long)a->out_stride_r, (long long)a->out_stride_m);
  long double out_need = R && M ? ((long double)(R - 1) * a->out_stride_r + (long double)(M - 1) * a->out_stride_m + l->dim) * 2 : 0;
  if ((s = need_buf(ctx, a->out, fn, "out", out_need)) || (s = need_align(ctx, a->out, fn, "out", 16)) ||
      (s = need_buf(ctx, a->seq_lens, fn, "seq_lens", (long double)R * 4)) ||
      (s = need_buf(ctx, a->block_table, fn, "block_table", (long double)R * a->max_blocks * 4)))
    return s;
  if ((a->gather_lens && (s = need_buf(ctx, a->gather_lens, fn, "gather_lens", (long double)R * 4))) ||
      (s = check_tensor_scale(ctx, fn, l, a->tensor_scale)))
    return s;
  if (opts && opts->check_contents && (s = check_paged_contents(ctx, a)))
    return s;
  rt_arg args[] = {
      {DSV4_ARG_PTR, {.buf = a->out}},
      {DSV4_ARG_IN, {.buf = a->cache}},
      {DSV4_ARG_IN, {.buf = a->seq_lens}},
      {DSV4_ARG_IN, {.buf = a->gather_lens ? a->gather_lens : a->seq_lens}},
      {DSV4_ARG_IN, {.buf = a->block_table}},
      {DSV4_ARG_I32, {.i32 = (int32_t)R}},
      {DSV4_ARG_I32, {.i32 = (int32_t)a->max_blocks}},
      {DSV4_ARG_I32, {.i32 = (int32_t)a->num_blocks}},
      {DSV4_ARG_I32, {.i32 = (int32_t)a->block_size}},
      {DSV4_ARG_I64, {.i64 = a->block_stride}},
      {DSV4_ARG_I64, {.i64 = a->out_stride_r}},
      {DSV4_ARG_I64, {.i64 = a->out_stride_m}},
      {DSV4_ARG_I32, {.i32 = (int32_t)M}},
      {DSV4_ARG_I32, {.i32 = (int32_t)a->offset}},
      {DSV4_ARG_I32, {.i32 = a->gather_lens != NULL}},
      {DSV4_ARG_F32, {.f32 = a->tensor_scale}},
  };
  uint32_t grid[3] = {(uint32_t)((M - a->offset + en->tokens_per_cta - 1) / en->tokens_per_cta), (uint32_t)R, 1};
  return rt_launch(b, e, grid, args, (int)(sizeof args / sizeof *args));
}

/* Positions must index the cos/sin table; slots the cache (content checks). */
static dsv4rt_status check_insert_contents(dsv4rt_context *ctx, const dsv4rt_kv_insert_args *a, int rope)
{
  static const char fn[] = "dsv4rt_kv_insert";
  dsv4rt_status s = DSV4RT_OK;
  int64_t nins = a->n_insert, nslots = a->num_blocks * a->block_size;
  int64_t *v = malloc((size_t)(a->n_tokens > nins ? a->n_tokens : nins) * 8 + 8);
  if (!v)
    return rt_fail(ctx, DSV4RT_ERR_OUT_OF_MEMORY, "out of host memory for a content check");
  if (nins && !(s = dsv4rt_buffer_read(a->slot_mapping, 0, v, (size_t)nins * 8)))
    for (int64_t i = 0; i < nins && !s; i++)
      if (v[i] >= nslots)
        s = rt_fail(ctx, DSV4RT_ERR_INVALID_ARG, "%s: slot_mapping[%lld] = %lld is past the cache's %lld slots", fn,
                    (long long)i, (long long)v[i], (long long)nslots);
  if (!s && rope && a->n_tokens && !(s = dsv4rt_buffer_read(a->positions, 0, v, (size_t)a->n_tokens * 8)))
    for (int64_t i = 0; i < a->n_tokens && !s; i++)
      if (v[i] < 0 || v[i] >= a->max_pos)
        s = rt_fail(ctx, DSV4RT_ERR_INVALID_ARG, "%s: positions[%lld] = %lld is outside the cos/sin table's %lld rows",
                    fn, (long long)i, (long long)v[i], (long long)a->max_pos);
  free(v);
  return s;
}

dsv4rt_status dsv4rt_kv_insert(dsv4rt_bundle *b, const dsv4rt_kv_insert_args *a, const dsv4rt_launch_opts *opts)
{
  static const char fn[] = "dsv4rt_kv_insert";
  int e;
  dsv4rt_status s = begin(b, a, DSV4_OP_KV_INSERT, opts, fn, &e);
  if (s)
    return s;
  dsv4rt_context *ctx = b->ctx;
  const dsv4_bundle_entry *en = &b->entries[e];
  const dsv4_layout *l = &en->layout;
  int rope = en->rope_dims > 0, qd = (int)en->q_dim;
  int64_t N = a->n_tokens;
  if ((s = need_range(ctx, fn, "n_tokens", N, 0, I32_MAX)) ||
      (s = need_range(ctx, fn, "n_insert", a->n_insert, 0, N)) ||
      (s = check_cache(ctx, fn, l, a->cache, a->num_blocks, a->block_size, a->block_stride)) ||
      (s = need_buf(ctx, a->kv, fn, "kv", (long double)N * l->dim * 2)) || (s = need_align(ctx, a->kv, fn, "kv", 16)) ||
      (s = need_buf(ctx, a->slot_mapping, fn, "slot_mapping", (long double)a->n_insert * 8)) ||
      (s = need_align(ctx, a->slot_mapping, fn, "slot_mapping", 8)))
    return s;
  if (rope && ((s = need_range(ctx, fn, "max_pos", a->max_pos, 1, I32_MAX)) ||
               (s = need_buf(ctx, a->positions, fn, "positions", (long double)N * 8)) ||
               (s = need_align(ctx, a->positions, fn, "positions", 8)) ||
               (s = need_buf(ctx, a->cos_sin, fn, "cos_sin", (long double)a->max_pos * en->rope_dims * 4)) ||
               (s = need_align(ctx, a->cos_sin, fn, "cos_sin", 16))))
    return s;
  int64_t q_ctas = 0;
  if (qd) {
    if ((s = need_range(ctx, fn, "heads", a->heads, 0, 1 << 16)) ||
        (s = need_range(ctx, fn, "padded_heads", a->padded_heads, a->heads, 1 << 16)) ||
        (s = need_range(ctx, fn, "n_tokens * padded_heads", N * a->padded_heads, 0, I32_MAX)) ||
        (s = need_buf(ctx, a->q, fn, "q", (long double)N * a->heads * qd * 2)) ||
        (s = need_buf(ctx, a->q_out, fn, "q_out", (long double)N * a->padded_heads * qd * 2)) ||
        (s = need_align(ctx, a->q_out, fn, "q_out", 16)) || (s = need_align(ctx, a->q, fn, "q", 16)))
      return s;
    if (!(a->eps >= 0 && a->eps - a->eps == 0))
      return rt_fail(ctx, DSV4RT_ERR_INVALID_ARG, "%s: eps %g must be finite and >= 0", fn, (double)a->eps);
    int64_t rows_per_cta = en->threads / dsv4_pow2ceil(qd / (int)en->values_per_thread);
    q_ctas = (N * a->padded_heads + rows_per_cta - 1) / rows_per_cta;
  }
  if (opts && opts->check_contents && (s = check_insert_contents(ctx, a, rope)))
    return s;
  int64_t kv_ctas = (a->n_insert + en->tokens_per_cta - 1) / en->tokens_per_cta;
  if (kv_ctas + q_ctas > I32_MAX)
    return rt_fail(ctx, DSV4RT_ERR_INVALID_ARG, "%s: %lld CTAs are too many for one launch", fn,
                   (long long)(kv_ctas + q_ctas));
  /* arguments a kernel without rope or a q branch ignores still need a buffer */
  const dsv4rt_buffer *any = a->kv;
  rt_arg args[] = {
      {DSV4_ARG_PTR, {.buf = a->cache}},
      {DSV4_ARG_PTR, {.buf = qd ? a->q_out : any}},
      {DSV4_ARG_IN, {.buf = a->kv}},
      {DSV4_ARG_IN, {.buf = qd ? a->q : any}},
      {DSV4_ARG_IN, {.buf = a->slot_mapping}},
      {DSV4_ARG_IN, {.buf = rope ? a->positions : any}},
      {DSV4_ARG_IN, {.buf = rope ? a->cos_sin : any}},
      {DSV4_ARG_I32, {.i32 = (int32_t)N}},
      {DSV4_ARG_I32, {.i32 = (int32_t)a->n_insert}},
      {DSV4_ARG_I32, {.i32 = (int32_t)a->num_blocks}},
      {DSV4_ARG_I32, {.i32 = (int32_t)a->block_size}},
      {DSV4_ARG_I64, {.i64 = a->block_stride}},
      {DSV4_ARG_I32, {.i32 = (int32_t)(rope ? a->max_pos : 0)}},
      {DSV4_ARG_I32, {.i32 = (int32_t)(qd ? a->heads : 0)}},
      {DSV4_ARG_I32, {.i32 = (int32_t)(qd ? a->padded_heads : 0)}},
      {DSV4_ARG_F32, {.f32 = a->eps}},
      {DSV4_ARG_I32, {.i32 = (int32_t)kv_ctas}},
  };
  uint32_t grid[3] = {(uint32_t)(kv_ctas + q_ctas), 1, 1};
  return rt_launch(b, e, grid, args, (int)(sizeof args / sizeof *args));
}

/* Every listed entry the kernel would use is -1 or a slot of its cache. */
static dsv4rt_status check_list(dsv4rt_context *ctx, dsv4rt_buffer *idx, dsv4rt_buffer *lens, int64_t T, int64_t topk,
                                int64_t nslots, const char *which)
{
  dsv4rt_status s = DSV4RT_OK;
  int32_t *l = fetch_i32(ctx, lens, T, &s);
  int32_t *v = l ? fetch_i32(ctx, idx, T * topk, &s) : NULL;
  for (int64_t t = 0; v && t < T && !s; t++)
    for (int64_t j = 0; j < l[t] && j < topk && !s; j++) {
      int32_t x = v[t * topk + j];
      if (x != -1 && (x < 0 || x >= nslots))
        s = rt_fail(ctx, DSV4RT_ERR_INVALID_ARG, "dsv4rt_sparse_decode: %s[%lld, %lld] = %d is neither -1 nor one of the cache's %lld slots",
                    which, (long long)t, (long long)j, x, (long long)nslots);
    }
  free(l), free(v);
  return s;
}

dsv4rt_status dsv4rt_sparse_decode(dsv4rt_bundle *b, const dsv4rt_sparse_decode_args *a,
                                   const dsv4rt_launch_opts *opts)
{
  static const char fn[] = "dsv4rt_sparse_decode";
  int e;
  dsv4rt_status s = begin(b, a, DSV4_OP_SPARSE_DECODE, opts, fn, &e);
  if (s)
    return s;
  dsv4rt_context *ctx = b->ctx;
  const dsv4_bundle_entry *en = &b->entries[e];
  const dsv4_layout *l = &en->layout;
  int64_t T = a->n_tokens, H = a->heads, vd = en->v_dim;
  int extra = a->extra_cache != NULL;
  if ((s = need_range(ctx, fn, "n_tokens", T, 0, 65535)) || (s = need_range(ctx, fn, "heads", H, 1, 4096)) ||
      (s = need_range(ctx, fn, "topk", a->topk, 0, I32_MAX)) ||
      (s = check_cache(ctx, fn, l, a->cache, a->num_blocks, a->block_size, a->block_stride)) ||
      (s = need_buf(ctx, a->q, fn, "q", (long double)T * H * l->dim * 2)) || (s = need_align(ctx, a->q, fn, "q", 16)) ||
      (s = need_buf(ctx, a->out, fn, "out", (long double)T * H * vd * 2)) ||
      (s = need_align(ctx, a->out, fn, "out", 16)) || (s = need_buf(ctx, a->lse, fn, "lse", (long double)T * H * 4)) ||
      (s = need_buf(ctx, a->indices, fn, "indices", (long double)T * a->topk * 4)) ||
      (s = need_buf(ctx, a->lens, fn, "lens", (long double)T * 4)) ||
      (s = check_tensor_scale(ctx, fn, l, a->tensor_scale)))
    return s;
  if (a->attn_sink && (s = need_buf(ctx, a->attn_sink, fn, "attn_sink", (long double)H * 4)))
    return s;
  if (!(a->softmax_scale - a->softmax_scale == 0))
    return rt_fail(ctx, DSV4RT_ERR_INVALID_ARG, "%s: softmax_scale %g is not finite", fn, (double)a->softmax_scale);
  if (extra && ((s = need_range(ctx, fn, "extra_topk", a->extra_topk, 0, I32_MAX)) ||
                (s = check_cache(ctx, fn, l, a->extra_cache, a->extra_num_blocks, a->extra_block_size,
                                 a->extra_block_stride)) ||
                (s = need_buf(ctx, a->extra_indices, fn, "extra_indices", (long double)T * a->extra_topk * 4)) ||
                (s = need_buf(ctx, a->extra_lens, fn, "extra_lens", (long double)T * 4))))
    return s;
  if (opts && opts->check_contents &&
      ((s = check_list(ctx, a->indices, a->lens, T, a->topk, a->num_blocks * a->block_size, "indices")) ||
       (extra && (s = check_list(ctx, a->extra_indices, a->extra_lens, T, a->extra_topk,
                                 a->extra_num_blocks * a->extra_block_size, "extra_indices")))))
    return s;
  /* split-KV (warp-matrix kernels): enough CTAs to fill the device when
   * the (token, head group) pairs alone do not, at most one a tile; then
   * the fewest splits with the same longest share (T 8 at 1152 indices: 6
   * splits of 3 tiles, not 8 of 2 or 3: fewer partials to write and merge,
   * measured 2% faster on the H200) */
  int64_t groups = (H + en->tokens_per_cta - 1) / en->tokens_per_cta * T;
  int64_t tiles = (a->topk + DSV4_DECODE_TILE - 1) / DSV4_DECODE_TILE +
                  (extra ? (a->extra_topk + DSV4_DECODE_TILE - 1) / DSV4_DECODE_TILE : 0);
  int64_t S = 1;
  if (opts && (opts->splits < 0 || opts->splits > DSV4_DECODE_MAX_SPLITS))
    return rt_fail(ctx, DSV4RT_ERR_INVALID_ARG, "%s: splits %d is outside [0, %d]", fn, opts->splits, DSV4_DECODE_MAX_SPLITS);
  if (en->matrix) {
    S = opts && opts->splits ? opts->splits : groups > 0 && groups * 2 <= ctx->units ? ctx->units / groups : 1;
    S = S > tiles ? tiles : S;
    S = S < 1 ? 1 : S > DSV4_DECODE_MAX_SPLITS ? DSV4_DECODE_MAX_SPLITS : S;
    if (!(opts && opts->splits) && tiles > 0) {
      int64_t share = (tiles + S - 1) / S;
      S = (tiles + share - 1) / share;
    }
  }
  dsv4rt_buffer *work = NULL;
  if (S > 1 && (s = rt_work(b, e, (size_t)dsv4_decode_work_floats(T, H, (int)S, (int)vd) * 4, &work)))
    return s;
  const dsv4rt_buffer *dummy = a->lens; /* stands in for absent buffers; never read */
  rt_arg args[] = {
      {DSV4_ARG_PTR, {.buf = a->out}},
      {DSV4_ARG_PTR, {.buf = a->lse}},
      {DSV4_ARG_IN, {.buf = a->q}},
      {DSV4_ARG_IN, {.buf = a->cache}},
      {DSV4_ARG_IN, {.buf = a->indices}},
      {DSV4_ARG_IN, {.buf = a->lens}},
      {DSV4_ARG_IN, {.buf = extra ? a->extra_cache : a->cache}},
      {DSV4_ARG_IN, {.buf = extra ? a->extra_indices : dummy}},
      {DSV4_ARG_IN, {.buf = extra ? a->extra_lens : dummy}},
      {DSV4_ARG_IN, {.buf = a->attn_sink ? a->attn_sink : dummy}},
      {DSV4_ARG_I32, {.i32 = (int32_t)T}},
      {DSV4_ARG_I32, {.i32 = (int32_t)H}},
      {DSV4_ARG_I32, {.i32 = (int32_t)a->topk}},
      {DSV4_ARG_I32, {.i32 = (int32_t)a->num_blocks}},
      {DSV4_ARG_I32, {.i32 = (int32_t)a->block_size}},
      {DSV4_ARG_I64, {.i64 = a->block_stride}},
      {DSV4_ARG_I32, {.i32 = extra ? (int32_t)a->extra_topk : 0}},
      {DSV4_ARG_I32, {.i32 = extra ? (int32_t)a->extra_num_blocks : 0}},
      {DSV4_ARG_I32, {.i32 = extra ? (int32_t)a->extra_block_size : 1}},
      {DSV4_ARG_I64, {.i64 = extra ? a->extra_block_stride : 0}},
      {DSV4_ARG_I32, {.i32 = a->attn_sink != NULL}},
      {DSV4_ARG_F32, {.f32 = a->softmax_scale}},
      {DSV4_ARG_F32, {.f32 = a->tensor_scale}},
      {DSV4_ARG_PTR, {.buf = work}},
      {DSV4_ARG_I32, {.i32 = (int32_t)S}},
  };
  uint32_t grid[3] = {(uint32_t)((H + en->tokens_per_cta - 1) / en->tokens_per_cta), (uint32_t)T, (uint32_t)S};
  /* CTA pairs (tile.pair): a token's head groups two by two, an odd last
   * one beside a CTA of padding heads that only helps dequantize */
  uint32_t pair = en->matrix == DSV4_MATRIX_WARPGROUP_PAIR ? 2 : 1;
  grid[0] = (grid[0] + pair - 1) / pair * pair;
  if ((s = rt_launch_cluster(b, e, grid, pair, args, (int)(sizeof args / sizeof *args))) || S == 1)
    return s;
  rt_arg cargs[] = {
      {DSV4_ARG_PTR, {.buf = a->out}},
      {DSV4_ARG_PTR, {.buf = a->lse}},
      {DSV4_ARG_IN, {.buf = work}},
      {DSV4_ARG_IN, {.buf = a->attn_sink ? a->attn_sink : dummy}},
      {DSV4_ARG_I32, {.i32 = (int32_t)T}},
      {DSV4_ARG_I32, {.i32 = (int32_t)H}},
      {DSV4_ARG_I32, {.i32 = (int32_t)S}},
      {DSV4_ARG_I32, {.i32 = a->attn_sink != NULL}},
      {DSV4_ARG_F32, {.f32 = a->tensor_scale}},
  };
  uint32_t cgrid[3] = {(uint32_t)(T * H), 1, 1};
  return rt_launch2(b, e, cgrid, (uint32_t)dsv4_decode_combine_threads((int)vd), cargs, (int)(sizeof cargs / sizeof *cargs));
}

dsv4rt_status dsv4rt_paged_mqa_logits(dsv4rt_bundle *b, const dsv4rt_mqa_logits_args *a,
                                      const dsv4rt_launch_opts *opts)
{
  static const char fn[] = "dsv4rt_paged_mqa_logits";
  int e;
  dsv4rt_status s = begin(b, a, DSV4_OP_PAGED_MQA_LOGITS, opts, fn, &e);
  if (s)
    return s;
  dsv4rt_context *ctx = b->ctx;
  const dsv4_bundle_entry *en = &b->entries[e];
  const dsv4_layout *l = &en->layout;
  int64_t B = a->batch, nn = a->next_n, R = B * nn, H = en->heads;
  if ((s = need_range(ctx, fn, "batch", B, 0, 65535)) ||
      (s = need_range(ctx, fn, "next_n", nn, 1, en->matrix ? DSV4_LOGITS_MAX_NEXT_N : 64)) ||
      (s = need_range(ctx, fn, "row_len", a->row_len, 0, I32_MAX)) ||
      (s = need_range(ctx, fn, "row_stride", a->row_stride, a->row_len, INT64_MAX / 8)) ||
      (s = need_range(ctx, fn, "max_blocks", a->max_blocks, 1, I32_MAX)) ||
      (s = check_cache(ctx, fn, l, a->cache, a->num_blocks, a->block_size, a->block_stride)) ||
      (s = need_buf(ctx, a->logits, fn, "logits", R ? ((long double)(R - 1) * a->row_stride + a->row_len) * 4 : 0)) ||
      (s = need_buf(ctx, a->q, fn, "q", (long double)R * H * l->dim)) || (s = need_align(ctx, a->q, fn, "q", 16)) ||
      (s = need_buf(ctx, a->weights, fn, "weights", (long double)R * H * 4)) ||
      (s = need_buf(ctx, a->context_lens, fn, "context_lens", (long double)R * 4)) ||
      (s = need_buf(ctx, a->block_table, fn, "block_table", (long double)B * a->max_blocks * 4)))
    return s;
  if (opts && opts->check_contents) {
    int32_t *cl = fetch_i32(ctx, a->context_lens, R, &s);
    int32_t *bt = cl ? fetch_i32(ctx, a->block_table, B * a->max_blocks, &s) : NULL;
    for (int64_t r = 0; bt && r < R && !s; r++) {
      int64_t n = cl[r] < a->row_len ? cl[r] : a->row_len;
      for (int64_t k = 0; k < n && !s; k += a->block_size) {
        int64_t c = k / a->block_size;
        if (c >= a->max_blocks || bt[(r / nn) * a->max_blocks + c] < 0 || bt[(r / nn) * a->max_blocks + c] >= a->num_blocks)
          s = rt_fail(ctx, DSV4RT_ERR_INVALID_ARG, "%s: row %lld position %lld has no valid block (column %lld)", fn,
                      (long long)r, (long long)k, (long long)c);
      }
    }
    free(cl), free(bt);
    if (s)
      return s;
  }
  /* the matrix forms on a backend with tensor maps: the K rows' map
   * (DSV4_ARGS_PAGED_MQA_LOGITS), where the cache can have one */
  dsv4rt_buffer *kv_map = NULL;
  int none = 0, *fresh = &none;
  uint64_t dims[3], strides[2];
  uint32_t box[3];
  int sw;
  if (en->matrix && ctx->tensor_maps && !(opts && opts->no_tensor_maps) && R > 0 && a->row_len > 0 &&
      dsv4_logits_kv_map(l, a->block_size, a->block_stride, a->num_blocks, dims, strides, box, &sw) &&
      (a->cache->native + (uint64_t)l->seg[0].offset) % 16 == 0 &&
      (s = rt_tensor_map(b, e, a->cache->native + (uint64_t)l->seg[0].offset, dims, strides, box, sw, &kv_map, &fresh)))
    return s;
  rt_arg args[] = {
      {DSV4_ARG_PTR, {.buf = a->logits}},
      {DSV4_ARG_IN, {.buf = a->q}},
      {DSV4_ARG_IN, {.buf = a->cache}},
      {DSV4_ARG_IN, {.buf = a->weights}},
      {DSV4_ARG_IN, {.buf = a->context_lens}},
      {DSV4_ARG_IN, {.buf = a->block_table}},
      {DSV4_ARG_I32, {.i32 = (int32_t)R}},
      {DSV4_ARG_I32, {.i32 = (int32_t)nn}},
      {DSV4_ARG_I32, {.i32 = (int32_t)a->num_blocks}},
      {DSV4_ARG_I32, {.i32 = (int32_t)a->block_size}},
      {DSV4_ARG_I64, {.i64 = a->block_stride}},
      {DSV4_ARG_I32, {.i32 = (int32_t)a->max_blocks}},
      {DSV4_ARG_I32, {.i32 = (int32_t)a->row_len}},
      {DSV4_ARG_I64, {.i64 = a->row_stride}},
      {DSV4_ARG_IN, {.buf = kv_map}},
      {DSV4_ARG_I32, {.i32 = *fresh}},
  };
  /* the warp-matrix form's CTA takes every next_n row of one batch entry */
  uint32_t grid[3] = {(uint32_t)((a->row_len + en->tokens_per_cta - 1) / en->tokens_per_cta),
                      (uint32_t)(en->matrix ? B : R), 1};
  if ((s = rt_launch(b, e, grid, args, (int)(sizeof args / sizeof *args))))
    return s;
  *fresh = 0; /* the map acquired by this launch's CTAs */
  return DSV4RT_OK;
}

dsv4rt_status dsv4rt_topk(dsv4rt_bundle *b, const dsv4rt_topk_args *a, const dsv4rt_launch_opts *opts)
{
  static const char fn[] = "dsv4rt_topk";
  int e;
  dsv4rt_status s = begin(b, a, DSV4_OP_TOPK, opts, fn, &e);
  if (s)
    return s;
  dsv4rt_context *ctx = b->ctx;
  const dsv4_bundle_entry *en = &b->entries[e];
  int64_t R = a->rows, K = en->topk;
  if ((s = need_range(ctx, fn, "rows", R, 0, I32_MAX)) || (s = need_range(ctx, fn, "row_len", a->row_len, 0, I32_MAX)) ||
      (s = need_range(ctx, fn, "row_stride", a->row_stride, a->row_len, INT64_MAX / 8)) ||
      (s = need_buf(ctx, a->out, fn, "out", (long double)R * K * 4)) ||
      (s = need_buf(ctx, a->logits, fn, "logits", R ? ((long double)(R - 1) * a->row_stride + a->row_len) * 4 : 0)) ||
      (s = need_buf(ctx, a->context_lens, fn, "context_lens", (long double)R * 4)))
    return s;
  rt_arg args[] = {
      {DSV4_ARG_PTR, {.buf = a->out}},
      {DSV4_ARG_IN, {.buf = a->logits}},
      {DSV4_ARG_IN, {.buf = a->context_lens}},
      {DSV4_ARG_I32, {.i32 = (int32_t)R}},
      {DSV4_ARG_I64, {.i64 = a->row_stride}},
      {DSV4_ARG_I32, {.i32 = (int32_t)a->row_len}},
  };
  uint32_t grid[3] = {(uint32_t)R, 1, 1};
  return rt_launch(b, e, grid, args, (int)(sizeof args / sizeof *args));
}
