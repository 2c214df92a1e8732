/* ops.c -- the typed operation calls: validate everything that can be
 * validated on the host, then marshal the arguments in the order the
 * bundle's signature (dsv4_abi.h) gives and launch.  A failed check returns
 * before any launch, so nothing on the device is written.
 *
 * Every call runs the same prologue, in this order: begin() (the bundle,
 * the argument struct, the entry that runs the op here); need_range() on
 * each count, length and stride; check_cache() on the cache geometry;
 * check_bufs() on a table of the buffer arguments (present, of this
 * context, large enough, aligned, no output sharing memory with another
 * argument); need_finite() on float scalars; then, with check_contents,
 * the op's contents_*() check of the lengths and indices in device memory.
 * Byte counts are long double products, so no product of int64 arguments
 * overflows before its factors' ranges are checked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "choice.h" /* rt_call_shape, rt_tuned_kernel */
#include "kernel_geometry.h" /* the logits' tensor map, split-KV sizing */
#include "rt.h"

#define I32_MAX 2147483647LL
#define COUNT(v) ((int)(sizeof(v) / sizeof *(v)))

/* One op call being validated: its context, entry and function name. */
typedef struct {
  dsv4rt_context *ctx;
  const dsv4_bundle_entry *en;
  const dsv4_layout *l;
  const char *fn;
  int e;
} call;

/* What every op call starts with: a bundle, an argument struct, and the
 * entry of the bundle that runs op on this device (named by opts->kernel,
 * or the first); rt_find's message gets the function's name in front. */
static dsv4rt_status begin(call *c, dsv4rt_bundle *b, const void *args, dsv4_op op, const dsv4rt_launch_opts *opts,
                           const char *fn)
{
  if (!b)
    return rt_fail(NULL, DSV4RT_ERR_NULL_ARG, "%s: bundle is NULL", fn);
  if (!args)
    return rt_fail(b->ctx, DSV4RT_ERR_NULL_ARG, "%s: args is NULL", fn);
  dsv4_shape shape; /* read once: tuning's bucket and the default rule's ranks */
  const dsv4_shape *sh = rt_call_shape(op, args, &shape) ? NULL : &shape;
  const char *name = opts ? opts->kernel : NULL;
  if (!name) /* tuning's winner for the call's shape bucket (a tuned bundle or a loaded lockfile: choice.c) */
    name = rt_tuned_kernel(b, op, sh);
  dsv4rt_status s = rt_find(b, op, name, sh, &c->e);
  if (s) {
    char m[sizeof b->ctx->err];
    memcpy(m, b->ctx->err, sizeof m);
    return rt_fail(b->ctx, s, "%s: %.960s", fn, m);
  }
  c->ctx = b->ctx, c->en = &b->entries[c->e], c->l = &c->en->layout, c->fn = fn;
  return DSV4RT_OK;
}

/* Whether the call asked for its device contents to be checked. */
static int checked(const dsv4rt_launch_opts *opts) { return opts && opts->check_contents; }

/* An integer argument inside [lo, hi]. */
static dsv4rt_status need_range(const call *c, const char *name, int64_t v, int64_t lo, int64_t hi)
{
  if (v < lo || v > hi)
    return rt_fail(c->ctx, DSV4RT_ERR_OUT_OF_RANGE, "%s: %s = %lld is outside [%lld, %lld]", c->fn, name,
                   (long long)v, (long long)lo, (long long)hi);
  return DSV4RT_OK;
}

/* A float argument that is neither NaN nor infinite. */
static dsv4rt_status need_finite(const call *c, const char *name, float v)
{
  if (!(v - v == 0))
    return rt_fail(c->ctx, DSV4RT_ERR_NOT_FINITE, "%s: %s = %g is not finite", c->fn, name, (double)v);
  return DSV4RT_OK;
}

/* The cache geometry every op shares (pre: "" or "extra_", for names). */
static dsv4rt_status check_cache(const call *c, const char *pre, int64_t num_blocks, int64_t bs, int64_t stride)
{
  char nb[32], bsz[32], bst[32];
  snprintf(nb, sizeof nb, "%snum_blocks", pre), snprintf(bsz, sizeof bsz, "%sblock_size", pre);
  snprintf(bst, sizeof bst, "%sblock_stride", pre);
  dsv4rt_status s;
  if ((s = need_range(c, nb, num_blocks, 0, I32_MAX)) || (s = need_range(c, bsz, bs, 1, 1 << 20)))
    return s;
  int64_t min = dsv4_layout_min_block_bytes(c->l, bs);
  if (stride < min)
    return rt_fail(c->ctx, DSV4RT_ERR_OUT_OF_RANGE,
                   "%s: %sblock_stride %lld is below layout %s's %lld bytes for %lld tokens", c->fn, pre,
                   (long long)stride, c->l->name, (long long)min, (long long)bs);
  if ((s = need_range(c, bst, stride, min, INT64_MAX / 2)))
    return s;
  if (stride % c->l->align)
    return rt_fail(c->ctx, DSV4RT_ERR_MISALIGNED,
                   "%s: %sblock_stride %lld is not a multiple of layout %s's alignment %d", c->fn, pre,
                   (long long)stride, c->l->name, c->l->align);
  return DSV4RT_OK;
}

/* A per-tensor layout needs a finite kv_scale at launch. */
static dsv4rt_status check_tensor_scale(const call *c, float v)
{
  for (int i = 0; i < c->l->nseg; i++)
    if (c->l->seg[i].scale_tensor)
      return need_finite(c, "tensor_scale", v);
  return DSV4RT_OK;
}

/* ---- the buffer arguments ---- */

/* How a call uses a buffer argument: read, written, read when not NULL,
 * or not at all by this kernel (then it is not checked). */
enum { IN, OUT, OPT, OFF };

/* One buffer argument: the bytes the call addresses from its start, the
 * alignment its device address needs (CUDA), and its use. */
typedef struct {
  const char *name;
  const dsv4rt_buffer *buf;
  long double need;
  int align, use;
} barg;

/* Whether the call passes this buffer to the kernel. */
static int used(const barg *v) { return v->use != OFF && v->buf; }

/* Present, of this context, at least `need` bytes, aligned. */
static dsv4rt_status need_buf(const call *c, const barg *v)
{
  if (!v->buf)
    return rt_fail(c->ctx, DSV4RT_ERR_NULL_ARG, "%s: %s is NULL", c->fn, v->name);
  if (v->buf->ctx != c->ctx)
    return rt_fail(c->ctx, DSV4RT_ERR_WRONG_CONTEXT, "%s: %s belongs to another context", c->fn, v->name);
  if ((long double)v->buf->size < v->need)
    return rt_fail(c->ctx, DSV4RT_ERR_BUFFER_TOO_SMALL, "%s: %s holds %zu bytes, the arguments need %.0Lf", c->fn,
                   v->name, v->buf->size, v->need);
  /* OpenCL buffers are aligned by the implementation */
  if (c->ctx->be->addresses && v->buf->native % (uint64_t)v->align)
    return rt_fail(c->ctx, DSV4RT_ERR_MISALIGNED, "%s: %s is not %d-byte aligned", c->fn, v->name, v->align);
  return DSV4RT_OK;
}

/* Whether the bytes two arguments address share memory: one buffer, one
 * native handle, or (CUDA, HIP: natives are addresses) overlapping
 * ranges.  Arguments that address no bytes share nothing. */
static int overlap(const call *c, const barg *x, const barg *y)
{
  if (x->need <= 0 || y->need <= 0)
    return 0;
  uint64_t p = x->buf->native, q = y->buf->native;
  if (x->buf == y->buf || p == q)
    return 1;
  if (!c->ctx->be->addresses)
    return 0;
  return p < q ? (long double)(q - p) < x->need : (long double)(p - q) < y->need;
}

/* The whole table: each argument in order, then every output against
 * every other argument. */
static dsv4rt_status check_bufs(const call *c, const barg *v, int n)
{
  dsv4rt_status s;
  for (int i = 0; i < n; i++)
    if (v[i].use != OFF && (v[i].use != OPT || v[i].buf) && (s = need_buf(c, &v[i])))
      return s;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      if (i != j && v[i].use == OUT && used(&v[j]) && (j > i || v[j].use != OUT) && overlap(c, &v[i], &v[j]))
        return rt_fail(c->ctx, DSV4RT_ERR_ALIASING, "%s: output %s shares memory with %s", c->fn, v[i].name,
                       v[j].name);
  return DSV4RT_OK;
}

/* The bytes a cache of num_blocks blocks of stride bytes addresses. */
static long double cache_bytes(int64_t num_blocks, int64_t stride) { return (long double)num_blocks * stride; }

/* ---- device contents (check_contents) ---- */

/* Read n elements of `size` bytes of a device array back (NULL on failure,
 * the status in *s). */
static void *fetch(const call *c, const dsv4rt_buffer *b, int64_t n, int size, dsv4rt_status *s)
{
  void *p = malloc((size_t)(n > 0 ? n : 1) * (size_t)size);
  if (!p) {
    *s = rt_fail(c->ctx, DSV4RT_ERR_OUT_OF_MEMORY, "%s: out of host memory for a content check", c->fn);
    return NULL;
  }
  *s = n > 0 ? dsv4rt_buffer_read((dsv4rt_buffer *)b, 0, p, (size_t)n * (size_t)size) : DSV4RT_OK;
  if (*s) {
    free(p);
    return NULL;
  }
  return p;
}

/* A bad value found in device memory (what: the array, position and value). */
static dsv4rt_status bad(const call *c, const char *what)
{
  return rt_fail(c->ctx, DSV4RT_ERR_BAD_CONTENTS, "%s: %.400s (check_contents)", c->fn, what);
}

/* The first length of v[0..n) outside [0, hi] (name[i] = value). */
static dsv4rt_status check_lens(const call *c, const int32_t *v, int64_t n, int64_t hi, const char *name,
                                const char *hi_name)
{
  char m[256];
  for (int64_t i = 0; i < n; i++)
    if (v[i] < 0 || v[i] > hi) {
      snprintf(m, sizeof m, "%s[%lld] = %d is outside [0, %s %lld]", name, (long long)i, v[i], hi_name, (long long)hi);
      return bad(c, m);
    }
  return DSV4RT_OK;
}

/* A block table's row stride in elements: the one given, or (0) packed
 * rows of max_blocks. */
static int64_t table_stride(int64_t given, int64_t max_blocks) { return given ? given : max_blocks; }

/* Elements from a block table's first to one past its last: `rows` rows
 * of max_blocks, `stride` apart. */
static int64_t table_elems(int64_t rows, int64_t stride, int64_t max_blocks)
{
  return rows ? (rows - 1) * stride + max_blocks : 0;
}

/* Block-table column col of row `row` holds a block of the cache; `who`
 * names the length whose positions reach that column. */
static dsv4rt_status check_block(const call *c, const int32_t *bt, int64_t row, int64_t col, int64_t max_blocks,
                                 int64_t bt_stride, int64_t num_blocks, const char *who)
{
  char m[320];
  if (col >= max_blocks)
    snprintf(m, sizeof m, "%s reaches block-table column %lld, past max_blocks %lld", who, (long long)col,
             (long long)max_blocks);
  else if (bt[row * bt_stride + col] < 0 || bt[row * bt_stride + col] >= num_blocks)
    snprintf(m, sizeof m, "block_table[%lld, %lld] = %d is not a block of the cache (num_blocks %lld)",
             (long long)row, (long long)col, bt[row * bt_stride + col], (long long)num_blocks);
  else
    return DSV4RT_OK;
  return bad(c, m);
}

/* Every index is negative (a zero row) or a slot of the cache. */
static dsv4rt_status contents_dequant(const call *c, const dsv4rt_dequant_gather_args *a)
{
  dsv4rt_status s;
  int32_t *idx = fetch(c, a->indices, a->n, 4, &s);
  int64_t slots = a->num_blocks * a->block_size;
  char m[256];
  for (int64_t i = 0; idx && i < a->n && !s; i++)
    if (idx[i] >= slots) {
      snprintf(m, sizeof m, "indices[%lld] = %d is past the cache's %lld slots", (long long)i, idx[i],
               (long long)slots);
      s = bad(c, m);
    }
  free(idx);
  return s;
}

/* Each request: lengths that fit, rows inside out, blocks in the cache for
 * every position gathered. */
static dsv4rt_status contents_paged(const call *c, const dsv4rt_paged_gather_args *a)
{
  dsv4rt_status s;
  int64_t R = a->num_requests, bs = a->block_size;
  int32_t *seq = fetch(c, a->seq_lens, R, 4, &s);
  int32_t *gl = seq && a->gather_lens ? fetch(c, a->gather_lens, R, 4, &s) : NULL;
  int64_t bst = table_stride(a->block_table_stride, a->max_blocks);
  int32_t *bt = seq && !s && R ? fetch(c, a->block_table, table_elems(R, bst, a->max_blocks), 4, &s) : NULL;
  const char *gname = a->gather_lens ? "gather_lens" : "seq_lens";
  char m[256], who[64];
  for (int64_t r = 0; bt && r < R && !s; r++) {
    int64_t g = gl ? gl[r] : seq[r];
    if (seq[r] < 0)
      snprintf(m, sizeof m, "seq_lens[%lld] = %d is negative", (long long)r, seq[r]), s = bad(c, m);
    else if (g < 0 || g > seq[r])
      snprintf(m, sizeof m, "gather_lens[%lld] = %lld is outside [0, seq_lens %d]", (long long)r, (long long)g, seq[r]),
          s = bad(c, m);
    else if (a->offset + g > a->out_rows)
      snprintf(m, sizeof m, "%s[%lld] = %lld rows from offset %lld pass out_rows %lld", gname, (long long)r,
               (long long)g, (long long)a->offset, (long long)a->out_rows),
          s = bad(c, m);
    snprintf(who, sizeof who, "seq_lens[%lld] = %d", (long long)r, seq[r]);
    for (int64_t pos = seq[r] - g; !s && g > 0 && pos < seq[r]; pos += bs - pos % bs)
      s = check_block(c, bt, r, pos / bs, a->max_blocks, bst, a->num_blocks, who);
  }
  free(seq), free(gl), free(bt);
  return s;
}

/* Slots inside the cache (negative: skipped); positions inside the cos/sin
 * table for every row the kernel reads one for. */
static dsv4rt_status contents_insert(const call *c, const dsv4rt_kv_insert_args *a, int rope, int qd)
{
  dsv4rt_status s;
  int64_t nins = a->n_insert, nslots = a->num_blocks * a->block_size;
  int64_t *slot = fetch(c, a->slot_mapping, nins, 8, &s);
  int64_t *pos = slot && rope ? fetch(c, a->positions, a->n_tokens, 8, &s) : NULL;
  char m[256];
  for (int64_t i = 0; slot && i < nins && !s; i++)
    if (slot[i] >= nslots)
      snprintf(m, sizeof m, "slot_mapping[%lld] = %lld is past the cache's %lld slots", (long long)i,
               (long long)slot[i], (long long)nslots),
          s = bad(c, m);
  for (int64_t i = 0; pos && i < a->n_tokens && !s; i++)
    if ((qd || (i < nins && slot[i] >= 0)) && (pos[i] < 0 || pos[i] >= a->max_pos))
      snprintf(m, sizeof m, "positions[%lld] = %lld is outside the cos/sin table's %lld rows", (long long)i,
               (long long)pos[i], (long long)a->max_pos),
          s = bad(c, m);
  free(slot), free(pos);
  return s;
}

/* sparse_decode's token-major arguments as the kernel addresses them:
 * tokens per batch entry, and each argument's strides in elements (batch
 * entry, position, head), packed ones filled in (dsv4rt.h). */
typedef struct {
  int64_t sq, q[3], out[3], lse[3], ind[2], lens[2], xind[2], xlens[2];
} decode_view;

static int all_zero(const int64_t *v, int n)
{
  for (int i = 0; i < n; i++)
    if (v[i])
      return 0;
  return 1;
}

/* v = given, or the packed strides of [B, S, inner...] (n of them; row:
 * the elements of one position). */
static void strides_or_packed(int64_t *v, const int64_t *given, int n, int64_t S, int64_t row, int64_t inner)
{
  if (!all_zero(given, n)) {
    memcpy(v, given, (size_t)n * sizeof *v);
    return;
  }
  v[0] = S * row, v[1] = row;
  if (n == 3)
    v[2] = inner;
}

static void decode_view_of(const call *c, const dsv4rt_sparse_decode_args *a, decode_view *w)
{
  int64_t S = a->seq_q > 0 ? a->seq_q : 1, H = a->heads;
  w->sq = S;
  strides_or_packed(w->q, a->q_strides, 3, S, H * c->l->dim, c->l->dim);
  strides_or_packed(w->out, a->out_strides, 3, S, H * c->en->v_dim, c->en->v_dim);
  strides_or_packed(w->lse, a->lse_strides, 3, S, H, 1);
  strides_or_packed(w->ind, a->indices_strides, 2, S, a->topk, 0);
  strides_or_packed(w->lens, a->lens_strides, 2, S, 1, 0);
  strides_or_packed(w->xind, a->extra_indices_strides, 2, S, a->extra_topk, 0);
  strides_or_packed(w->xlens, a->extra_lens_strides, 2, S, 1, 0);
}

/* Elements from an argument's first to one past its last: B batch
 * entries of S positions (of H heads when st has three strides), each a
 * packed run of `inner`. */
static long double reach(int64_t B, int64_t S, int64_t H, const int64_t *st, int n, int64_t inner)
{
  if (B == 0 || inner == 0)
    return 0;
  long double r = (long double)(B - 1) * st[0] + (long double)(S - 1) * st[1] + inner;
  return n == 3 ? r + (long double)(H - 1) * st[2] : r;
}

/* Strides of one argument: each in [0, 2^40], a multiple of `mult` where
 * its dim has more than one element (a stride never stepped over is not
 * used); for an output (distinct), no two of its elements at one address:
 * ordered by stride, each dim of extent > 1 steps past all the ones
 * inside it. */
static dsv4rt_status check_strides(const call *c, const char *name, const int64_t *st, int n, const int64_t *ext,
                                   int64_t inner, int mult, int distinct)
{
  char nm[48];
  dsv4rt_status s;
  for (int i = 0; i < n; i++) {
    snprintf(nm, sizeof nm, "%s_strides[%d]", name, i);
    if ((s = need_range(c, nm, st[i], 0, 1LL << 40)))
      return s;
    if (ext[i] > 1 && st[i] % mult)
      return rt_fail(c->ctx, DSV4RT_ERR_MISALIGNED, "%s: %s = %lld is not a multiple of %d (16-byte rows)", c->fn,
                     nm, (long long)st[i], mult);
  }
  if (!distinct)
    return DSV4RT_OK;
  int used[3] = {0, 0, 0};
  long double span = inner;
  for (int k = 0; k < n; k++) {
    int m = -1;
    for (int i = 0; i < n; i++)
      if (!used[i] && ext[i] > 1 && (m < 0 || st[i] < st[m]))
        m = i;
    if (m < 0)
      break;
    used[m] = 1;
    if (st[m] < span)
      return rt_fail(c->ctx, DSV4RT_ERR_ALIASING,
                     "%s: %s_strides[%d] = %lld overlaps the %.0Lf elements inside it: two elements of %s would share "
                     "an address",
                     c->fn, name, m, (long long)st[m], span, name);
    span = (long double)st[m] * (ext[m] - 1) + span;
  }
  return DSV4RT_OK;
}

/* seq_q and every argument's strides (decode_view_of's w). */
static dsv4rt_status check_decode_view(const call *c, const dsv4rt_sparse_decode_args *a, const decode_view *w)
{
  dsv4rt_status s;
  if (a->n_tokens % w->sq)
    return rt_fail(c->ctx, DSV4RT_ERR_OUT_OF_RANGE, "%s: n_tokens = %lld is not a multiple of seq_q = %lld", c->fn,
                   (long long)a->n_tokens, (long long)w->sq);
  int64_t ext[3] = {a->n_tokens / w->sq, w->sq, a->heads};
  int x = a->extra_cache != NULL;
  /* rows moved in 16-byte pieces where a row is a multiple of 16 bytes (the matrix forms' always are; the
   * portable form moves other rows 2 bytes at a time) */
  int qm = c->l->dim % 8 ? 1 : 8, om = c->en->v_dim % 8 ? 1 : 8;
  if ((s = check_strides(c, "q", w->q, 3, ext, c->l->dim, qm, 0)) ||
      (s = check_strides(c, "out", w->out, 3, ext, c->en->v_dim, om, 1)) ||
      (s = check_strides(c, "lse", w->lse, 3, ext, 1, 1, 1)) ||
      (s = check_strides(c, "indices", w->ind, 2, ext, a->topk, 1, 0)) ||
      (s = check_strides(c, "lens", w->lens, 2, ext, 1, 1, 0)) ||
      (x && (s = check_strides(c, "extra_indices", w->xind, 2, ext, a->extra_topk, 1, 0))) ||
      (x && (s = check_strides(c, "extra_lens", w->xlens, 2, ext, 1, 1, 0))))
    return s;
  return DSV4RT_OK;
}

/* One index list of the decode: lengths in [0, topk] (read only when
 * topk > 0), and each listed entry -1 or a slot of its cache. */
static dsv4rt_status contents_list(const call *c, dsv4rt_buffer *idx, dsv4rt_buffer *lens, int64_t T, int64_t topk,
                                   int64_t nslots, const char *iname, const char *lname, const char *kname,
                                   const int64_t *ist, const int64_t *lst, int64_t sq)
{
  if (topk == 0 || T == 0)
    return DSV4RT_OK;
  dsv4rt_status s;
  int32_t *lv = fetch(c, lens, (int64_t)reach(T / sq, sq, 1, lst, 2, 1), 4, &s);
  int32_t *v = lv ? fetch(c, idx, (int64_t)reach(T / sq, sq, 1, ist, 2, topk), 4, &s) : NULL;
  int32_t *l = v ? calloc((size_t)T, 4) : NULL;
  if (v && !l)
    s = rt_fail(c->ctx, DSV4RT_ERR_OUT_OF_MEMORY, "%s: out of host memory for a content check", c->fn);
  for (int64_t t = 0; l && t < T; t++)
    l[t] = lv[t / sq * lst[0] + t % sq * lst[1]];
  if (l)
    s = check_lens(c, l, T, topk, lname, kname);
  char m[256];
  for (int64_t t = 0; l && t < T && !s; t++)
    for (int64_t j = 0; j < l[t] && !s; j++) {
      int32_t x = v[t / sq * ist[0] + t % sq * ist[1] + j];
      if (x != -1 && (x < 0 || x >= nslots))
        snprintf(m, sizeof m, "%s[%lld, %lld] = %d is neither -1 nor one of the cache's %lld slots", iname,
                 (long long)t, (long long)j, x, (long long)nslots),
            s = bad(c, m);
    }
  free(l), free(lv), free(v);
  return s;
}

/* Both index lists of the decode (the extra one where there is an extra cache). */
static dsv4rt_status contents_decode(const call *c, const dsv4rt_sparse_decode_args *a, const decode_view *w)
{
  dsv4rt_status s = contents_list(c, a->indices, a->lens, a->n_tokens, a->topk, a->num_blocks * a->block_size,
                                  "indices", "lens", "topk", w->ind, w->lens, w->sq);
  if (!s && a->extra_cache)
    s = contents_list(c, a->extra_indices, a->extra_lens, a->n_tokens, a->extra_topk,
                      a->extra_num_blocks * a->extra_block_size, "extra_indices", "extra_lens", "extra_topk", w->xind,
                      w->xlens, w->sq);
  return s;
}

/* Context lengths in [0, row_len]; for the logits (bt non-NULL) also a
 * block of the cache behind every position below them. */
static dsv4rt_status contents_ctx(const call *c, dsv4rt_buffer *lens, int64_t R, int64_t row_len,
                                  const dsv4rt_mqa_logits_args *lg)
{
  dsv4rt_status s;
  int32_t *cl = fetch(c, lens, R, 4, &s);
  int64_t bst = lg ? table_stride(lg->block_table_stride, lg->max_blocks) : 0;
  int32_t *bt = cl && lg && lg->batch ? fetch(c, lg->block_table, table_elems(lg->batch, bst, lg->max_blocks), 4, &s)
                                      : NULL;
  if (cl && !s)
    s = check_lens(c, cl, R, row_len, "context_lens", "row_len");
  char who[64];
  for (int64_t r = 0; bt && r < R && !s; r++) {
    snprintf(who, sizeof who, "context_lens[%lld] = %d", (long long)r, cl[r]);
    for (int64_t k = 0; k < cl[r] && !s; k += lg->block_size)
      s = check_block(c, bt, r / lg->next_n, k / lg->block_size, lg->max_blocks, bst, lg->num_blocks, who);
  }
  free(cl), free(bt);
  return s;
}

/* ---- the ops ---- */

dsv4rt_status dsv4rt_dequant_gather(dsv4rt_bundle *b, const dsv4rt_dequant_gather_args *a,
                                    const dsv4rt_launch_opts *opts)
{
  call c;
  dsv4rt_status s = begin(&c, b, a, DSV4_OP_DEQUANT_GATHER, opts, "dsv4rt_dequant_gather");
  if (s || (s = need_range(&c, "n", a->n, 0, I32_MAX)) ||
      (s = check_cache(&c, "", a->num_blocks, a->block_size, a->block_stride)))
    return s;
  barg v[] = {
      {"cache", a->cache, cache_bytes(a->num_blocks, a->block_stride), c.l->align, IN},
      {"indices", a->indices, (long double)a->n * 4, 4, IN},
      {"out", a->out, (long double)a->n * c.l->dim * 2, 16, OUT},
  };
  if ((s = check_bufs(&c, v, COUNT(v))) || (s = check_tensor_scale(&c, a->tensor_scale)) ||
      (checked(opts) && (s = contents_dequant(&c, a))))
    return s;
  rt_arg args[DSV4_A_DEQUANT_GATHER_COUNT] = {
      [DSV4_A_DEQUANT_GATHER_out] = {DSV4_ARG_PTR, {.buf = a->out}},
      [DSV4_A_DEQUANT_GATHER_cache] = {DSV4_ARG_IN, {.buf = a->cache}},
      [DSV4_A_DEQUANT_GATHER_indices] = {DSV4_ARG_IN, {.buf = a->indices}},
      [DSV4_A_DEQUANT_GATHER_n] = {DSV4_ARG_I32, {.i32 = (int32_t)a->n}},
      [DSV4_A_DEQUANT_GATHER_num_blocks] = {DSV4_ARG_I32, {.i32 = (int32_t)a->num_blocks}},
      [DSV4_A_DEQUANT_GATHER_block_size] = {DSV4_ARG_I32, {.i32 = (int32_t)a->block_size}},
      [DSV4_A_DEQUANT_GATHER_block_stride] = {DSV4_ARG_I64, {.i64 = a->block_stride}},
      [DSV4_A_DEQUANT_GATHER_tensor_scale] = {DSV4_ARG_F32, {.f32 = a->tensor_scale}},
  };
  uint32_t grid[3] = {(uint32_t)((a->n + c.en->tokens_per_cta - 1) / c.en->tokens_per_cta), 1, 1};
  return rt_launch(b, c.e, grid, args, COUNT(args));
}

/* paged_gather's out strides: 16-byte rows that never overlap (see
 * dsv4rt_paged_gather_args). */
static dsv4rt_status check_out_strides(const call *c, const dsv4rt_paged_gather_args *a)
{
  int64_t R = a->num_requests, M = a->out_rows, dim = c->l->dim, sr = a->out_stride_r, sm = a->out_stride_m;
  if (sm % 8 || sr % 8)
    return rt_fail(c->ctx, DSV4RT_ERR_MISALIGNED,
                   "%s: out_stride_r %lld, out_stride_m %lld: must be multiples of 8 elements (16 bytes)", c->fn,
                   (long long)sr, (long long)sm);
  if (R > 1 && M > 0 && sr < (long double)(M - 1) * sm + dim && (sr < dim || sm < (long double)(R - 1) * sr + dim))
    return rt_fail(c->ctx, DSV4RT_ERR_OUT_OF_RANGE,
                   "%s: out_stride_r %lld with out_stride_m %lld makes the rows of %lld requests overlap", c->fn,
                   (long long)sr, (long long)sm, (long long)R);
  return DSV4RT_OK;
}

dsv4rt_status dsv4rt_paged_gather(dsv4rt_bundle *b, const dsv4rt_paged_gather_args *a, const dsv4rt_launch_opts *opts)
{
  call c;
  dsv4rt_status s = begin(&c, b, a, DSV4_OP_PAGED_GATHER, opts, "dsv4rt_paged_gather");
  if (s)
    return s;
  int64_t R = a->num_requests, M = a->out_rows;
  if ((s = need_range(&c, "num_requests", R, 0, 65535)) || (s = need_range(&c, "out_rows", M, 0, I32_MAX)) ||
      (s = need_range(&c, "offset", a->offset, 0, M)) ||
      (s = need_range(&c, "max_blocks", a->max_blocks, 1, I32_MAX)) ||
      (s = need_range(&c, "block_table_stride", a->block_table_stride, 0, 1LL << 40)) ||
      (s = need_range(&c, "out_stride_m", a->out_stride_m, c.l->dim, INT64_MAX / 4)) ||
      (s = need_range(&c, "out_stride_r", a->out_stride_r, 0, INT64_MAX / 4)) || (s = check_out_strides(&c, a)) ||
      (s = check_cache(&c, "", a->num_blocks, a->block_size, a->block_stride)))
    return s;
  int64_t bst = table_stride(a->block_table_stride, a->max_blocks);
  long double out_need =
      R && M ? ((long double)(R - 1) * a->out_stride_r + (long double)(M - 1) * a->out_stride_m + c.l->dim) * 2 : 0;
  barg v[] = {
      {"cache", a->cache, cache_bytes(a->num_blocks, a->block_stride), c.l->align, IN},
      {"out", a->out, out_need, 16, OUT},
      {"seq_lens", a->seq_lens, (long double)R * 4, 4, IN},
      {"block_table", a->block_table, (long double)table_elems(R, bst, a->max_blocks) * 4, 4, IN},
      {"gather_lens", a->gather_lens, (long double)R * 4, 4, OPT},
  };
  if ((s = check_bufs(&c, v, COUNT(v))) || (s = check_tensor_scale(&c, a->tensor_scale)) ||
      (checked(opts) && (s = contents_paged(&c, a))))
    return s;
  rt_arg args[DSV4_A_PAGED_GATHER_COUNT] = {
      [DSV4_A_PAGED_GATHER_out] = {DSV4_ARG_PTR, {.buf = a->out}},
      [DSV4_A_PAGED_GATHER_cache] = {DSV4_ARG_IN, {.buf = a->cache}},
      [DSV4_A_PAGED_GATHER_seq_lens] = {DSV4_ARG_IN, {.buf = a->seq_lens}},
      [DSV4_A_PAGED_GATHER_gather_lens] = {DSV4_ARG_IN, {.buf = a->gather_lens ? a->gather_lens : a->seq_lens}},
      [DSV4_A_PAGED_GATHER_block_table] = {DSV4_ARG_IN, {.buf = a->block_table}},
      [DSV4_A_PAGED_GATHER_num_requests] = {DSV4_ARG_I32, {.i32 = (int32_t)R}},
      [DSV4_A_PAGED_GATHER_max_blocks] = {DSV4_ARG_I32, {.i32 = (int32_t)a->max_blocks}},
      [DSV4_A_PAGED_GATHER_num_blocks] = {DSV4_ARG_I32, {.i32 = (int32_t)a->num_blocks}},
      [DSV4_A_PAGED_GATHER_block_size] = {DSV4_ARG_I32, {.i32 = (int32_t)a->block_size}},
      [DSV4_A_PAGED_GATHER_block_stride] = {DSV4_ARG_I64, {.i64 = a->block_stride}},
      [DSV4_A_PAGED_GATHER_out_stride_r] = {DSV4_ARG_I64, {.i64 = a->out_stride_r}},
      [DSV4_A_PAGED_GATHER_out_stride_m] = {DSV4_ARG_I64, {.i64 = a->out_stride_m}},
      [DSV4_A_PAGED_GATHER_bt_stride] = {DSV4_ARG_I64, {.i64 = bst}},
      [DSV4_A_PAGED_GATHER_out_rows] = {DSV4_ARG_I32, {.i32 = (int32_t)M}},
      [DSV4_A_PAGED_GATHER_offset] = {DSV4_ARG_I32, {.i32 = (int32_t)a->offset}},
      [DSV4_A_PAGED_GATHER_has_gather_lens] = {DSV4_ARG_I32, {.i32 = a->gather_lens != NULL}},
      [DSV4_A_PAGED_GATHER_tensor_scale] = {DSV4_ARG_F32, {.f32 = a->tensor_scale}},
  };
  uint32_t grid[3] = {(uint32_t)((M - a->offset + c.en->tokens_per_cta - 1) / c.en->tokens_per_cta), (uint32_t)R, 1};
  return rt_launch(b, c.e, grid, args, COUNT(args));
}

/* kv_insert's scalars: counts, the cos/sin rows (rope), heads and eps (a q
 * branch). */
static dsv4rt_status check_insert_scalars(const call *c, const dsv4rt_kv_insert_args *a, int rope, int qd)
{
  dsv4rt_status s;
  int64_t N = a->n_tokens;
  if ((s = need_range(c, "n_tokens", N, 0, I32_MAX)) || (s = need_range(c, "n_insert", a->n_insert, 0, N)) ||
      (rope && (s = need_range(c, "max_pos", a->max_pos, 1, I32_MAX))))
    return s;
  if (qd && ((s = need_range(c, "heads", a->heads, 0, 1 << 16)) ||
             (s = need_range(c, "padded_heads", a->padded_heads, a->heads, 1 << 16)) ||
             (s = need_range(c, "n_tokens * padded_heads", N * a->padded_heads, 0, I32_MAX)) ||
             (s = need_finite(c, "eps", a->eps))))
    return s;
  if (qd && a->eps < 0)
    return rt_fail(c->ctx, DSV4RT_ERR_OUT_OF_RANGE, "%s: eps = %g is negative", c->fn, (double)a->eps);
  return DSV4RT_OK;
}

dsv4rt_status dsv4rt_kv_insert(dsv4rt_bundle *b, const dsv4rt_kv_insert_args *a, const dsv4rt_launch_opts *opts)
{
  call c;
  dsv4rt_status s = begin(&c, b, a, DSV4_OP_KV_INSERT, opts, "dsv4rt_kv_insert");
  if (s)
    return s;
  const dsv4_bundle_entry *en = c.en;
  int rope = en->rope_dims > 0, qd = (int)en->q_dim;
  int64_t N = a->n_tokens;
  if ((s = check_insert_scalars(&c, a, rope, qd)) ||
      (s = check_cache(&c, "", a->num_blocks, a->block_size, a->block_stride)))
    return s;
  int64_t kv_ctas = (a->n_insert + en->tokens_per_cta - 1) / en->tokens_per_cta, q_ctas = 0;
  if (qd) {
    int64_t rows_per_cta = en->launch.threads / dsv4_pow2ceil(qd / (int)en->values_per_thread);
    q_ctas = (N * a->padded_heads + rows_per_cta - 1) / rows_per_cta;
  }
  if (kv_ctas + q_ctas > I32_MAX)
    return rt_fail(c.ctx, DSV4RT_ERR_OUT_OF_RANGE,
                   "%s: n_tokens %lld, padded_heads %lld: %lld CTAs are too many for one launch", c.fn, (long long)N,
                   (long long)a->padded_heads, (long long)(kv_ctas + q_ctas));
  barg v[] = {
      {"cache", a->cache, cache_bytes(a->num_blocks, a->block_stride), c.l->align, OUT},
      {"kv", a->kv, (long double)N * c.l->dim * 2, 16, IN},
      {"slot_mapping", a->slot_mapping, (long double)a->n_insert * 8, 8, IN},
      {"positions", a->positions, (long double)N * 8, 8, rope ? IN : OFF},
      {"cos_sin", a->cos_sin, (long double)a->max_pos * en->rope_dims * 4, 16, rope ? IN : OFF},
      {"q", a->q, (long double)N * a->heads * qd * 2, 16, qd ? IN : OFF},
      {"q_out", a->q_out, (long double)N * a->padded_heads * qd * 2, 16, qd ? OUT : OFF},
  };
  if ((s = check_bufs(&c, v, COUNT(v))) || (checked(opts) && (s = contents_insert(&c, a, rope, qd))))
    return s;
  /* arguments a kernel without rope or a q branch ignores still need a buffer */
  const dsv4rt_buffer *any = a->kv;
  rt_arg args[DSV4_A_KV_INSERT_COUNT] = {
      [DSV4_A_KV_INSERT_cache] = {DSV4_ARG_PTR, {.buf = a->cache}},
      [DSV4_A_KV_INSERT_q_out] = {DSV4_ARG_PTR, {.buf = qd ? a->q_out : any}},
      [DSV4_A_KV_INSERT_kv] = {DSV4_ARG_IN, {.buf = a->kv}},
      [DSV4_A_KV_INSERT_q] = {DSV4_ARG_IN, {.buf = qd ? a->q : any}},
      [DSV4_A_KV_INSERT_slot_mapping] = {DSV4_ARG_IN, {.buf = a->slot_mapping}},
      [DSV4_A_KV_INSERT_positions] = {DSV4_ARG_IN, {.buf = rope ? a->positions : any}},
      [DSV4_A_KV_INSERT_cos_sin] = {DSV4_ARG_IN, {.buf = rope ? a->cos_sin : any}},
      [DSV4_A_KV_INSERT_n_tokens] = {DSV4_ARG_I32, {.i32 = (int32_t)N}},
      [DSV4_A_KV_INSERT_n_insert] = {DSV4_ARG_I32, {.i32 = (int32_t)a->n_insert}},
      [DSV4_A_KV_INSERT_num_blocks] = {DSV4_ARG_I32, {.i32 = (int32_t)a->num_blocks}},
      [DSV4_A_KV_INSERT_block_size] = {DSV4_ARG_I32, {.i32 = (int32_t)a->block_size}},
      [DSV4_A_KV_INSERT_block_stride] = {DSV4_ARG_I64, {.i64 = a->block_stride}},
      [DSV4_A_KV_INSERT_max_pos] = {DSV4_ARG_I32, {.i32 = (int32_t)(rope ? a->max_pos : 0)}},
      [DSV4_A_KV_INSERT_heads] = {DSV4_ARG_I32, {.i32 = (int32_t)(qd ? a->heads : 0)}},
      [DSV4_A_KV_INSERT_padded_heads] = {DSV4_ARG_I32, {.i32 = (int32_t)(qd ? a->padded_heads : 0)}},
      [DSV4_A_KV_INSERT_eps] = {DSV4_ARG_F32, {.f32 = a->eps}},
      [DSV4_A_KV_INSERT_kv_ctas] = {DSV4_ARG_I32, {.i32 = (int32_t)kv_ctas}},
  };
  uint32_t grid[3] = {(uint32_t)(kv_ctas + q_ctas), 1, 1};
  return rt_launch(b, c.e, grid, args, COUNT(args));
}

/* sparse_decode's scalars and cache geometries. */
static dsv4rt_status check_decode_scalars(const call *c, const dsv4rt_sparse_decode_args *a,
                                          const dsv4rt_launch_opts *opts)
{
  dsv4rt_status s;
  if ((s = need_range(c, "n_tokens", a->n_tokens, 0, 65535)) || (s = need_range(c, "heads", a->heads, 1, 4096)) ||
      (s = need_range(c, "seq_q", a->seq_q, 0, 65535)) ||
      (s = need_range(c, "topk", a->topk, 0, I32_MAX)) ||
      (opts && (s = need_range(c, "opts->splits", opts->splits, 0, DSV4_DECODE_MAX_SPLITS))) ||
      (s = check_cache(c, "", a->num_blocks, a->block_size, a->block_stride)))
    return s;
  if (a->extra_cache &&
      ((s = need_range(c, "extra_topk", a->extra_topk, 0, I32_MAX)) ||
       (s = check_cache(c, "extra_", a->extra_num_blocks, a->extra_block_size, a->extra_block_stride))))
    return s;
  if ((s = need_finite(c, "softmax_scale", a->softmax_scale)) || (s = check_tensor_scale(c, a->tensor_scale)))
    return s;
  return DSV4RT_OK;
}

/* split-KV (warp-matrix kernels): enough CTAs to fill the device when the
 * (token, head group) pairs alone do not, at most one a tile and at most
 * DSV4_DECODE_COMBINE_BATCH: the combine loads that many splits of a row
 * at once, and one more costs a second dependent round of loads (V4-Flash
 * T 8, ten tiles: 8 splits 14.2 us, 10 splits 14.9, H200).  It does not
 * round down to the fewest splits with the same longest share: 8 uneven
 * splits measured 4% faster than 6 even ones (docs/perf-log.md).  The
 * direct warp form's CTAs are small enough that several share a processor
 * (two of 16 heads: its shared memory): it fills that many a processor. */
static int64_t decode_splits(const call *c, const dsv4rt_sparse_decode_args *a, const dsv4rt_launch_opts *opts)
{
  int64_t groups = (a->heads + c->en->tokens_per_cta - 1) / c->en->tokens_per_cta * a->n_tokens;
  int64_t tiles = (a->topk + DSV4_DECODE_TILE - 1) / DSV4_DECODE_TILE +
                  (a->extra_cache ? (a->extra_topk + DSV4_DECODE_TILE - 1) / DSV4_DECODE_TILE : 0);
  if (c->en->launch.second != DSV4_SECOND_COMBINE)
    return 1;
  int64_t units = c->ctx->units;
  if (c->en->launch.form == DSV4_FORM_WARP_DIRECT) /* CTAs a processor holds by shared memory (227 KiB on sm_90) */
    units *= 1 + (c->en->launch.shared_bytes + 1024 <= 227 * 1024 / 2);
  int64_t S = opts && opts->splits ? opts->splits : groups > 0 && groups * 2 <= units ? units / groups : 1;
  S = S > tiles ? tiles : S;
  if (!(opts && opts->splits) && S > DSV4_DECODE_COMBINE_BATCH)
    S = DSV4_DECODE_COMBINE_BATCH;
  return S < 1 ? 1 : S > DSV4_DECODE_MAX_SPLITS ? DSV4_DECODE_MAX_SPLITS : S;
}

dsv4rt_status dsv4rt_sparse_decode(dsv4rt_bundle *b, const dsv4rt_sparse_decode_args *a,
                                   const dsv4rt_launch_opts *opts)
{
  call c;
  dsv4rt_status s = begin(&c, b, a, DSV4_OP_SPARSE_DECODE, opts, "dsv4rt_sparse_decode");
  decode_view w;
  if (s || (s = check_decode_scalars(&c, a, opts)))
    return s;
  decode_view_of(&c, a, &w);
  if ((s = check_decode_view(&c, a, &w)))
    return s;
  int64_t T = a->n_tokens, H = a->heads, vd = c.en->v_dim, B = T / w.sq, P = w.sq;
  int extra = a->extra_cache != NULL, x = extra ? IN : OFF;
  barg v[] = {
      {"cache", a->cache, cache_bytes(a->num_blocks, a->block_stride), c.l->align, IN},
      {"q", a->q, reach(B, P, H, w.q, 3, c.l->dim) * 2, 16, IN},
      {"out", a->out, reach(B, P, H, w.out, 3, vd) * 2, 16, OUT},
      {"lse", a->lse, reach(B, P, H, w.lse, 3, 1) * 4, 4, OUT},
      {"indices", a->indices, reach(B, P, 1, w.ind, 2, a->topk) * 4, 4, IN},
      {"lens", a->lens, reach(B, P, 1, w.lens, 2, 1) * 4, 4, IN},
      {"attn_sink", a->attn_sink, (long double)H * 4, 4, OPT},
      {"extra_cache", a->extra_cache, cache_bytes(a->extra_num_blocks, a->extra_block_stride), c.l->align, x},
      {"extra_indices", a->extra_indices, reach(B, P, 1, w.xind, 2, a->extra_topk) * 4, 4, x},
      {"extra_lens", a->extra_lens, reach(B, P, 1, w.xlens, 2, 1) * 4, 4, x},
  };
  if ((s = check_bufs(&c, v, COUNT(v))) || (checked(opts) && (s = contents_decode(&c, a, &w))))
    return s;
  int64_t S = decode_splits(&c, a, opts);
  dsv4rt_buffer *work = NULL;
  if (S > 1 && (s = rt_work(b, c.e, (size_t)dsv4_decode_work_floats(T, H, (int)S, (int)vd) * 4, &work)))
    return s;
  const dsv4rt_buffer *dummy = a->lens; /* stands in for absent buffers; never read */
  rt_arg args[DSV4_A_SPARSE_DECODE_COUNT] = {
      [DSV4_A_SPARSE_DECODE_out] = {DSV4_ARG_PTR, {.buf = a->out}},
      [DSV4_A_SPARSE_DECODE_lse] = {DSV4_ARG_PTR, {.buf = a->lse}},
      [DSV4_A_SPARSE_DECODE_q] = {DSV4_ARG_IN, {.buf = a->q}},
      [DSV4_A_SPARSE_DECODE_cache] = {DSV4_ARG_IN, {.buf = a->cache}},
      [DSV4_A_SPARSE_DECODE_indices] = {DSV4_ARG_IN, {.buf = a->indices}},
      [DSV4_A_SPARSE_DECODE_lens] = {DSV4_ARG_IN, {.buf = a->lens}},
      [DSV4_A_SPARSE_DECODE_extra_cache] = {DSV4_ARG_IN, {.buf = extra ? a->extra_cache : a->cache}},
      [DSV4_A_SPARSE_DECODE_extra_indices] = {DSV4_ARG_IN, {.buf = extra ? a->extra_indices : dummy}},
      [DSV4_A_SPARSE_DECODE_extra_lens] = {DSV4_ARG_IN, {.buf = extra ? a->extra_lens : dummy}},
      [DSV4_A_SPARSE_DECODE_attn_sink] = {DSV4_ARG_IN, {.buf = a->attn_sink ? a->attn_sink : dummy}},
      [DSV4_A_SPARSE_DECODE_n_tokens] = {DSV4_ARG_I32, {.i32 = (int32_t)T}},
      [DSV4_A_SPARSE_DECODE_heads] = {DSV4_ARG_I32, {.i32 = (int32_t)H}},
      [DSV4_A_SPARSE_DECODE_topk] = {DSV4_ARG_I32, {.i32 = (int32_t)a->topk}},
      [DSV4_A_SPARSE_DECODE_num_blocks] = {DSV4_ARG_I32, {.i32 = (int32_t)a->num_blocks}},
      [DSV4_A_SPARSE_DECODE_block_size] = {DSV4_ARG_I32, {.i32 = (int32_t)a->block_size}},
      [DSV4_A_SPARSE_DECODE_block_stride] = {DSV4_ARG_I64, {.i64 = a->block_stride}},
      [DSV4_A_SPARSE_DECODE_extra_topk] = {DSV4_ARG_I32, {.i32 = extra ? (int32_t)a->extra_topk : 0}},
      [DSV4_A_SPARSE_DECODE_extra_num_blocks] = {DSV4_ARG_I32, {.i32 = extra ? (int32_t)a->extra_num_blocks : 0}},
      [DSV4_A_SPARSE_DECODE_extra_block_size] = {DSV4_ARG_I32, {.i32 = extra ? (int32_t)a->extra_block_size : 1}},
      [DSV4_A_SPARSE_DECODE_extra_block_stride] = {DSV4_ARG_I64, {.i64 = extra ? a->extra_block_stride : 0}},
      [DSV4_A_SPARSE_DECODE_has_sink] = {DSV4_ARG_I32, {.i32 = a->attn_sink != NULL}},
      [DSV4_A_SPARSE_DECODE_softmax_scale] = {DSV4_ARG_F32, {.f32 = a->softmax_scale}},
      [DSV4_A_SPARSE_DECODE_tensor_scale] = {DSV4_ARG_F32, {.f32 = a->tensor_scale}},
      [DSV4_A_SPARSE_DECODE_work] = {DSV4_ARG_PTR, {.buf = work}},
      [DSV4_A_SPARSE_DECODE_splits] = {DSV4_ARG_I32, {.i32 = (int32_t)S}},
      [DSV4_A_SPARSE_DECODE_seq_q] = {DSV4_ARG_I32, {.i32 = (int32_t)P}},
      [DSV4_A_SPARSE_DECODE_q_sb] = {DSV4_ARG_I64, {.i64 = w.q[0]}},
      [DSV4_A_SPARSE_DECODE_q_ss] = {DSV4_ARG_I64, {.i64 = w.q[1]}},
      [DSV4_A_SPARSE_DECODE_q_sh] = {DSV4_ARG_I64, {.i64 = w.q[2]}},
      [DSV4_A_SPARSE_DECODE_out_sb] = {DSV4_ARG_I64, {.i64 = w.out[0]}},
      [DSV4_A_SPARSE_DECODE_out_ss] = {DSV4_ARG_I64, {.i64 = w.out[1]}},
      [DSV4_A_SPARSE_DECODE_out_sh] = {DSV4_ARG_I64, {.i64 = w.out[2]}},
      [DSV4_A_SPARSE_DECODE_lse_sb] = {DSV4_ARG_I64, {.i64 = w.lse[0]}},
      [DSV4_A_SPARSE_DECODE_lse_ss] = {DSV4_ARG_I64, {.i64 = w.lse[1]}},
      [DSV4_A_SPARSE_DECODE_lse_sh] = {DSV4_ARG_I64, {.i64 = w.lse[2]}},
      [DSV4_A_SPARSE_DECODE_indices_sb] = {DSV4_ARG_I64, {.i64 = w.ind[0]}},
      [DSV4_A_SPARSE_DECODE_indices_ss] = {DSV4_ARG_I64, {.i64 = w.ind[1]}},
      [DSV4_A_SPARSE_DECODE_lens_sb] = {DSV4_ARG_I64, {.i64 = w.lens[0]}},
      [DSV4_A_SPARSE_DECODE_lens_ss] = {DSV4_ARG_I64, {.i64 = w.lens[1]}},
      [DSV4_A_SPARSE_DECODE_extra_indices_sb] = {DSV4_ARG_I64, {.i64 = extra ? w.xind[0] : 0}},
      [DSV4_A_SPARSE_DECODE_extra_indices_ss] = {DSV4_ARG_I64, {.i64 = extra ? w.xind[1] : 0}},
      [DSV4_A_SPARSE_DECODE_extra_lens_sb] = {DSV4_ARG_I64, {.i64 = extra ? w.xlens[0] : 0}},
      [DSV4_A_SPARSE_DECODE_extra_lens_ss] = {DSV4_ARG_I64, {.i64 = extra ? w.xlens[1] : 0}},
  };
  uint32_t grid[3] = {(uint32_t)((H + c.en->tokens_per_cta - 1) / c.en->tokens_per_cta), (uint32_t)T, (uint32_t)S};
  /* CTA pairs (tile.pair): a token's head groups two by two, an odd last
   * one beside a CTA of padding heads that only helps dequantize */
  uint32_t pair = c.en->launch.cluster;
  grid[0] = (grid[0] + pair - 1) / pair * pair;
  if ((s = rt_launch(b, c.e, grid, args, COUNT(args))) || S == 1)
    return s;
  rt_arg cargs[DSV4_A_DECODE_COMBINE_COUNT] = {
      [DSV4_A_DECODE_COMBINE_out] = {DSV4_ARG_PTR, {.buf = a->out}},
      [DSV4_A_DECODE_COMBINE_lse] = {DSV4_ARG_PTR, {.buf = a->lse}},
      [DSV4_A_DECODE_COMBINE_work] = {DSV4_ARG_IN, {.buf = work}},
      [DSV4_A_DECODE_COMBINE_attn_sink] = {DSV4_ARG_IN, {.buf = a->attn_sink ? a->attn_sink : dummy}},
      [DSV4_A_DECODE_COMBINE_n_tokens] = {DSV4_ARG_I32, {.i32 = (int32_t)T}},
      [DSV4_A_DECODE_COMBINE_heads] = {DSV4_ARG_I32, {.i32 = (int32_t)H}},
      [DSV4_A_DECODE_COMBINE_splits] = {DSV4_ARG_I32, {.i32 = (int32_t)S}},
      [DSV4_A_DECODE_COMBINE_has_sink] = {DSV4_ARG_I32, {.i32 = a->attn_sink != NULL}},
      [DSV4_A_DECODE_COMBINE_tensor_scale] = {DSV4_ARG_F32, {.f32 = a->tensor_scale}},
      [DSV4_A_DECODE_COMBINE_seq_q] = {DSV4_ARG_I32, {.i32 = (int32_t)P}},
      [DSV4_A_DECODE_COMBINE_out_sb] = {DSV4_ARG_I64, {.i64 = w.out[0]}},
      [DSV4_A_DECODE_COMBINE_out_ss] = {DSV4_ARG_I64, {.i64 = w.out[1]}},
      [DSV4_A_DECODE_COMBINE_out_sh] = {DSV4_ARG_I64, {.i64 = w.out[2]}},
      [DSV4_A_DECODE_COMBINE_lse_sb] = {DSV4_ARG_I64, {.i64 = w.lse[0]}},
      [DSV4_A_DECODE_COMBINE_lse_ss] = {DSV4_ARG_I64, {.i64 = w.lse[1]}},
      [DSV4_A_DECODE_COMBINE_lse_sh] = {DSV4_ARG_I64, {.i64 = w.lse[2]}},
  };
  uint32_t cgrid[3] = {(uint32_t)(T * H), 1, 1};
  return rt_launch2(b, c.e, cgrid, cargs, COUNT(cargs));
}

/* The longest logits row the indexer's kernels take: their positions, and
 * the counters of loops over a row (steps of up to 64 K positions), are
 * 32-bit. */
#define ROW_LEN_MAX (I32_MAX - (1 << 17))

/* The logits' call and the fused logits_topk's share their arguments but
 * the first (logits, or out) and the fourteenth (row_stride, or work), at
 * the same positions (the generators read them there). */
#define SAME_ARG(nm, fused) \
  _Static_assert((int)DSV4_A_PAGED_MQA_LOGITS_##nm == (int)DSV4_A_PAGED_MQA_LOGITS_TOPK_##fused, #nm " moved");
SAME_ARG(logits, out)
SAME_ARG(q, q)
SAME_ARG(cache, cache)
SAME_ARG(weights, weights)
SAME_ARG(context_lens, context_lens)
SAME_ARG(block_table, block_table)
SAME_ARG(rows, rows)
SAME_ARG(next_n, next_n)
SAME_ARG(num_blocks, num_blocks)
SAME_ARG(block_size, block_size)
SAME_ARG(block_stride, block_stride)
SAME_ARG(max_blocks, max_blocks)
SAME_ARG(row_len, row_len)
SAME_ARG(row_stride, work)
SAME_ARG(kv_map, kv_map)
SAME_ARG(kv_map_fresh, kv_map_fresh)
SAME_ARG(bt_stride, bt_stride)
SAME_ARG(COUNT, COUNT - 2) /* (and the fused op's chunk and hist after them) */
#undef SAME_ARG

/* What both calls check and pass, c begun for op (a's logits and
 * row_stride unread where fused: out and its bytes instead): the ranges,
 * the buffers, under check_contents the lengths and tables, the K rows'
 * tensor map where the form takes one; args filled but for the first and
 * fourteenth, grid sized, *fresh (the caller's own flag until then) the
 * map's flag to clear after launch. */
static dsv4rt_status logits_call(dsv4rt_bundle *b, call *c, const dsv4rt_mqa_logits_args *a, dsv4rt_buffer *out,
                                 long double out_bytes, const dsv4rt_launch_opts *opts, rt_arg *args,
                                 uint32_t grid[3], int **fresh)
{
  dsv4rt_status s;
  int fused = c->en->op == DSV4_OP_PAGED_MQA_LOGITS_TOPK;
  /* grid.y: a row (batch x next_n), or by POSITIONS_BATCH a batch entry, 65535 at most */
  int per_batch = c->en->launch.grid == DSV4_GRID_POSITIONS_BATCH;
  if ((s = need_range(c, "batch", a->batch, 0, 65535)) ||
      (s = need_range(c, "next_n", a->next_n, 1, per_batch ? DSV4_LOGITS_MAX_NEXT_N : 64)) ||
      (s = need_range(c, "batch * next_n", a->batch * a->next_n, 0, per_batch ? I32_MAX : 65535)) ||
      (s = need_range(c, "row_len", a->row_len, 0, ROW_LEN_MAX)) ||
      (!fused && (s = need_range(c, "row_stride", a->row_stride, a->row_len, INT64_MAX / 8))) ||
      (s = need_range(c, "max_blocks", a->max_blocks, 1, I32_MAX)) ||
      (s = need_range(c, "block_table_stride", a->block_table_stride, 0, 1LL << 40)) ||
      (s = check_cache(c, "", a->num_blocks, a->block_size, a->block_stride)))
    return s;
  const dsv4_layout *l = c->l;
  int64_t bst = table_stride(a->block_table_stride, a->max_blocks);
  int64_t B = a->batch, nn = a->next_n, R = B * nn, H = c->en->heads;
  barg v[] = {
      {fused ? "out" : "logits", out, out_bytes, 4, OUT},
      {"q", a->q, (long double)R * H * l->dim, 16, IN},
      {"cache", a->cache, cache_bytes(a->num_blocks, a->block_stride), l->align, IN},
      {"weights", a->weights, (long double)R * H * 4, 4, IN},
      {"context_lens", a->context_lens, (long double)R * 4, 4, IN},
      {"block_table", a->block_table, (long double)table_elems(B, bst, a->max_blocks) * 4, 4, IN},
  };
  if ((s = check_bufs(c, v, COUNT(v))) || (checked(opts) && (s = contents_ctx(c, a->context_lens, R, a->row_len, a))))
    return s;
  /* the matrix forms on a backend with tensor maps: the K rows' map
   * (DSV4_ARGS_PAGED_MQA_LOGITS), where the cache can have one */
  dsv4rt_buffer *kv_map = NULL;
  uint64_t dims[3], strides[2];
  uint32_t box[3];
  int sw;
  if (per_batch && c->ctx->tensor_maps && !(opts && opts->no_tensor_maps) && R > 0 && a->row_len > 0 &&
      dsv4_logits_kv_map(l, a->block_size, a->block_stride, a->num_blocks, dims, strides, box, &sw) &&
      (a->cache->native + (uint64_t)l->seg[0].offset) % 16 == 0 &&
      (s = rt_tensor_map(b, c->e, a->cache->native + (uint64_t)l->seg[0].offset, dims, strides, box, sw, &kv_map,
                         fresh)))
    return s;
  rt_arg common[DSV4_A_PAGED_MQA_LOGITS_COUNT] = {
      [DSV4_A_PAGED_MQA_LOGITS_q] = {DSV4_ARG_IN, {.buf = a->q}},
      [DSV4_A_PAGED_MQA_LOGITS_cache] = {DSV4_ARG_IN, {.buf = a->cache}},
      [DSV4_A_PAGED_MQA_LOGITS_weights] = {DSV4_ARG_IN, {.buf = a->weights}},
      [DSV4_A_PAGED_MQA_LOGITS_context_lens] = {DSV4_ARG_IN, {.buf = a->context_lens}},
      [DSV4_A_PAGED_MQA_LOGITS_block_table] = {DSV4_ARG_IN, {.buf = a->block_table}},
      [DSV4_A_PAGED_MQA_LOGITS_rows] = {DSV4_ARG_I32, {.i32 = (int32_t)R}},
      [DSV4_A_PAGED_MQA_LOGITS_next_n] = {DSV4_ARG_I32, {.i32 = (int32_t)nn}},
      [DSV4_A_PAGED_MQA_LOGITS_num_blocks] = {DSV4_ARG_I32, {.i32 = (int32_t)a->num_blocks}},
      [DSV4_A_PAGED_MQA_LOGITS_block_size] = {DSV4_ARG_I32, {.i32 = (int32_t)a->block_size}},
      [DSV4_A_PAGED_MQA_LOGITS_block_stride] = {DSV4_ARG_I64, {.i64 = a->block_stride}},
      [DSV4_A_PAGED_MQA_LOGITS_max_blocks] = {DSV4_ARG_I32, {.i32 = (int32_t)a->max_blocks}},
      [DSV4_A_PAGED_MQA_LOGITS_row_len] = {DSV4_ARG_I32, {.i32 = (int32_t)a->row_len}},
      [DSV4_A_PAGED_MQA_LOGITS_kv_map] = {DSV4_ARG_IN, {.buf = kv_map}},
      [DSV4_A_PAGED_MQA_LOGITS_kv_map_fresh] = {DSV4_ARG_I32, {.i32 = **fresh}},
      [DSV4_A_PAGED_MQA_LOGITS_bt_stride] = {DSV4_ARG_I64, {.i64 = bst}},
  };
  memcpy(args, common, sizeof common);
  grid[0] = (uint32_t)((a->row_len + c->en->tokens_per_cta - 1) / c->en->tokens_per_cta);
  grid[1] = (uint32_t)(per_batch ? B : R), grid[2] = 1;
  return DSV4RT_OK;
}

dsv4rt_status dsv4rt_paged_mqa_logits(dsv4rt_bundle *b, const dsv4rt_mqa_logits_args *a,
                                      const dsv4rt_launch_opts *opts)
{
  call c;
  rt_arg args[DSV4_A_PAGED_MQA_LOGITS_COUNT];
  uint32_t grid[3];
  int none = 0, *fresh = &none; /* (the map's flag where logits_call makes one) */
  dsv4rt_status s = begin(&c, b, a, DSV4_OP_PAGED_MQA_LOGITS, opts, "dsv4rt_paged_mqa_logits");
  if (s)
    return s;
  long double R = (long double)a->batch * a->next_n;
  if ((s = logits_call(b, &c, a, a->logits, R > 0 ? ((R - 1) * a->row_stride + a->row_len) * 4 : 0, opts, args, grid,
                       &fresh)))
    return s;
  args[DSV4_A_PAGED_MQA_LOGITS_logits] = (rt_arg){DSV4_ARG_PTR, {.buf = a->logits}};
  args[DSV4_A_PAGED_MQA_LOGITS_row_stride] = (rt_arg){DSV4_ARG_I64, {.i64 = a->row_stride}};
  if ((s = rt_launch(b, c.e, grid, args, DSV4_A_PAGED_MQA_LOGITS_COUNT)))
    return s;
  *fresh = 0; /* the map acquired by this launch's CTAs */
  return DSV4RT_OK;
}

dsv4rt_status dsv4rt_paged_mqa_logits_topk(dsv4rt_bundle *b, const dsv4rt_mqa_logits_topk_args *a,
                                           const dsv4rt_launch_opts *opts)
{
  call c;
  rt_arg args[DSV4_A_PAGED_MQA_LOGITS_TOPK_COUNT] = {0};
  uint32_t grid[3];
  int none = 0, *fresh = &none; /* (the map's flag where logits_call makes one) */
  dsv4rt_status s = begin(&c, b, a, DSV4_OP_PAGED_MQA_LOGITS_TOPK, opts, "dsv4rt_paged_mqa_logits_topk");
  if (s)
    return s;
  dsv4rt_mqa_logits_args la = {.row_len = a->row_len,
                               .row_stride = a->row_len,
                               .q = a->q,
                               .batch = a->batch,
                               .next_n = a->next_n,
                               .cache = a->cache,
                               .num_blocks = a->num_blocks,
                               .block_size = a->block_size,
                               .block_stride = a->block_stride,
                               .weights = a->weights,
                               .context_lens = a->context_lens,
                               .block_table = a->block_table,
                               .max_blocks = a->max_blocks,
                               .block_table_stride = a->block_table_stride};
  int64_t K = c.en->topk;
  if (a->topk && a->topk != K)
    return rt_fail(c.ctx, DSV4RT_ERR_OUT_OF_RANGE,
                   "dsv4rt_paged_mqa_logits_topk: topk = %lld, but kernel %s takes %lld", (long long)a->topk,
                   c.en->name, (long long)K);
  if ((s = logits_call(b, &c, &la, a->out, (long double)a->batch * a->next_n * K * 4, opts, args, grid, &fresh)))
    return s;
  int64_t R = a->batch * a->next_n; /* (in range: logits_call held it) */
  /* one chunk a row: the CTAs write out (row_len 0 too: a chunk of no
   * positions, rows of -1); more: the rows' histograms and candidates in
   * work (dsv4_abi.h), zero where the merge leaves them */
  grid[0] = grid[0] ? grid[0] : 1;
  int64_t chunks = grid[0], L = a->row_len;
  dsv4rt_buffer *work = NULL, *hist = NULL;
  if (chunks > 1 && R > 0 &&
      ((s = rt_work(b, c.e, (size_t)(2 * R * L) * 4, &work)) ||
       (s = rt_zeroed(b, c.e, (size_t)(R * (DSV4_TOPK_BINS + 1)) * 4, &hist))))
    return s;
  args[DSV4_A_PAGED_MQA_LOGITS_TOPK_out] = (rt_arg){DSV4_ARG_PTR, {.buf = a->out}};
  args[DSV4_A_PAGED_MQA_LOGITS_TOPK_work] = (rt_arg){DSV4_ARG_PTR, {.buf = work}};
  args[DSV4_A_PAGED_MQA_LOGITS_TOPK_chunk] = (rt_arg){DSV4_ARG_I32, {.i32 = (int32_t)c.en->tokens_per_cta}};
  args[DSV4_A_PAGED_MQA_LOGITS_TOPK_hist] = (rt_arg){DSV4_ARG_PTR, {.buf = hist}};
  /* the warpgroup form's chunks: next_n rows' (more CTAs a multiprocessor at next_n 1) */
  uint32_t shared = c.en->launch.shared_bytes;
  if (c.en->launch.grid == DSV4_GRID_POSITIONS_BATCH)
    shared = (uint32_t)(a->next_n * c.en->tokens_per_cta * 4);
  if ((s = rt_launch_shared(b, c.e, grid, shared, args, DSV4_A_PAGED_MQA_LOGITS_TOPK_COUNT)))
    return s;
  *fresh = 0;
  if (chunks < 2 || R == 0)
    return DSV4RT_OK;
  rt_arg margs[DSV4_A_LOGITS_TOPK_MERGE_COUNT] = {
      [DSV4_A_LOGITS_TOPK_MERGE_out] = {DSV4_ARG_PTR, {.buf = a->out}},
      [DSV4_A_LOGITS_TOPK_MERGE_context_lens] = {DSV4_ARG_IN, {.buf = a->context_lens}},
      [DSV4_A_LOGITS_TOPK_MERGE_rows] = {DSV4_ARG_I32, {.i32 = (int32_t)R}},
      [DSV4_A_LOGITS_TOPK_MERGE_row_len] = {DSV4_ARG_I32, {.i32 = (int32_t)L}},
      [DSV4_A_LOGITS_TOPK_MERGE_work] = {DSV4_ARG_IN, {.buf = work}},
      [DSV4_A_LOGITS_TOPK_MERGE_hist] = {DSV4_ARG_PTR, {.buf = hist}},
      [DSV4_A_LOGITS_TOPK_MERGE_chunk] = {DSV4_ARG_I32, {.i32 = (int32_t)c.en->tokens_per_cta}},
  };
  uint32_t mgrid[3] = {(uint32_t)R, 1, 1};
  if ((s = rt_launch2(b, c.e, mgrid, margs, COUNT(margs))))
    rt_zeroed_drop(b, c.e); /* its histograms left as the first kernel filled them: made 0 again next call */
  return s;
}

/* A topk row split over chunks (docs/ops.md 4, dsv4_abi.h): where the rows
 * alone leave processors idle, each row's positions go to up to
 * ceil(units / rows) CTAs, each of at least TOPK_MIN_CHUNK positions and 4
 * K, and at most TOPK_MAX_CANDIDATES / K of them, so that the merge, one
 * CTA a row, selects among at most that many candidates (on an H200 one
 * CTA takes a 1M-position row in 606 us, torch.topk 108-110: bench/
 * RESULTS.md).  A chunk's time grows with its L / S positions and the
 * merge's with its S K candidates, so S near sqrt(L / K) balances them:
 * 0.7 sqrt(L / K) fits the H200's best counts (1M rows: 32, 16-32, 16 at
 * K 512, 1024, 2048; 128K rows: 8-16, 8, 8).  The merge also costs a
 * launch, which rows under TOPK_MIN_SPLIT_ROW positions, or split in two
 * under TOPK_MIN_HALVED_ROW, do not win back (8K rows 10.4 us whole, 14.2
 * in two; 128 rows of 32K 28.0 whole, 31.3 in two; of 128K 132.4 whole,
 * 96.8 in two).  opts->splits forces the count (1: whole rows).  Returns
 * the chunk length, 0 for whole rows; *chunks the count. */
#define TOPK_MIN_CHUNK 4096
#define TOPK_MAX_CANDIDATES 65536
#define TOPK_MIN_SPLIT_ROW 16384
#define TOPK_MIN_HALVED_ROW 65536
static int64_t topk_chunk(const call *c, const dsv4rt_topk_args *a, const dsv4rt_launch_opts *opts, int64_t *chunks)
{
  int64_t R = a->rows, L = a->row_len, K = c->en->topk, S;
  if (opts && opts->splits)
    S = opts->splits;
  else {
    int64_t least = K * 4 > TOPK_MIN_CHUNK ? K * 4 : TOPK_MIN_CHUNK;
    S = R > 0 && R < c->ctx->units ? (c->ctx->units + R - 1) / R : 1;
    S = S > TOPK_MAX_CANDIDATES / K ? TOPK_MAX_CANDIDATES / K : S;
    S = S > L / least ? L / least : S;
    int64_t q = L / K, root = 0;
    while ((root + 1) * (root + 1) <= q)
      root++;
    int64_t best = (7 * root + 5) / 10;
    S = S > best ? best : S;
    if (L < TOPK_MIN_SPLIT_ROW || (S == 2 && L < TOPK_MIN_HALVED_ROW))
      S = 1;
  }
  *chunks = 1;
  if (S < 2 || L <= K || c->en->launch.second != DSV4_SECOND_MERGE)
    return 0;
  int64_t chunk = (L + S - 1) / S;
  *chunks = (L + chunk - 1) / chunk; /* (at least 2: S >= 2 and L > K >= 1) */
  return chunk;
}

dsv4rt_status dsv4rt_topk(dsv4rt_bundle *b, const dsv4rt_topk_args *a, const dsv4rt_launch_opts *opts)
{
  call c;
  dsv4rt_status s = begin(&c, b, a, DSV4_OP_TOPK, opts, "dsv4rt_topk");
  if (s || (s = need_range(&c, "rows", a->rows, 0, I32_MAX)) ||
      (s = need_range(&c, "row_len", a->row_len, 0, ROW_LEN_MAX)) ||
      (s = need_range(&c, "row_stride", a->row_stride, a->row_len, INT64_MAX / 8)) ||
      (opts && (s = need_range(&c, "opts->splits", opts->splits, 0, DSV4_DECODE_MAX_SPLITS))))
    return s;
  int64_t R = a->rows, K = c.en->topk;
  barg v[] = {
      {"out", a->out, (long double)R * K * 4, 4, OUT},
      {"logits", a->logits, R ? ((long double)(R - 1) * a->row_stride + a->row_len) * 4 : 0, 4, IN},
      {"context_lens", a->context_lens, (long double)R * 4, 4, IN},
  };
  if ((s = check_bufs(&c, v, COUNT(v))) ||
      (checked(opts) && (s = contents_ctx(&c, a->context_lens, R, a->row_len, NULL))))
    return s;
  int64_t chunks, chunk = topk_chunk(&c, a, opts, &chunks);
  dsv4rt_buffer *work = NULL;
  if (chunk && (s = rt_work(b, c.e, (size_t)(R * chunks * K) * 8, &work))) /* positions, then their keys */
    return s;
  rt_arg args[DSV4_A_TOPK_COUNT] = {
      [DSV4_A_TOPK_out] = {DSV4_ARG_PTR, {.buf = a->out}},
      [DSV4_A_TOPK_logits] = {DSV4_ARG_IN, {.buf = a->logits}},
      [DSV4_A_TOPK_context_lens] = {DSV4_ARG_IN, {.buf = a->context_lens}},
      [DSV4_A_TOPK_rows] = {DSV4_ARG_I32, {.i32 = (int32_t)R}},
      [DSV4_A_TOPK_row_stride] = {DSV4_ARG_I64, {.i64 = a->row_stride}},
      [DSV4_A_TOPK_row_len] = {DSV4_ARG_I32, {.i32 = (int32_t)a->row_len}},
      [DSV4_A_TOPK_work] = {DSV4_ARG_PTR, {.buf = work}},
      [DSV4_A_TOPK_chunk] = {DSV4_ARG_I32, {.i32 = (int32_t)chunk}},
  };
  uint32_t grid[3] = {(uint32_t)R, (uint32_t)chunks, 1};
  if ((s = rt_launch(b, c.e, grid, args, COUNT(args))) || !chunk)
    return s;
  rt_arg margs[DSV4_A_TOPK_MERGE_COUNT] = {
      [DSV4_A_TOPK_MERGE_out] = {DSV4_ARG_PTR, {.buf = a->out}},
      [DSV4_A_TOPK_MERGE_logits] = {DSV4_ARG_IN, {.buf = a->logits}},
      [DSV4_A_TOPK_MERGE_context_lens] = {DSV4_ARG_IN, {.buf = a->context_lens}},
      [DSV4_A_TOPK_MERGE_rows] = {DSV4_ARG_I32, {.i32 = (int32_t)R}},
      [DSV4_A_TOPK_MERGE_row_stride] = {DSV4_ARG_I64, {.i64 = a->row_stride}},
      [DSV4_A_TOPK_MERGE_row_len] = {DSV4_ARG_I32, {.i32 = (int32_t)a->row_len}},
      [DSV4_A_TOPK_MERGE_work] = {DSV4_ARG_IN, {.buf = work}},
      [DSV4_A_TOPK_MERGE_chunks] = {DSV4_ARG_I32, {.i32 = (int32_t)chunks}},
  };
  uint32_t mgrid[3] = {(uint32_t)R, 1, 1};
  return rt_launch2(b, c.e, mgrid, margs, COUNT(margs));
}
