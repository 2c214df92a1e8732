/* ops.c -- each op's arguments: parsed, each tensor taken and its shape
 * checked against the kernel the call resolves to, the runtime's argument
 * struct filled; the op methods, _bench_c_loop, op_index and _op_table.
 *
 * The ops are DSV4_OPS' and each op's tensors are arguments of its
 * DSV4_ARGS_<OP> (runtime/include/dsv4_abi.h), the X-macros the generators
 * and the runtime read: a tensor lands in the call's tv[] at its position
 * DSV4_A_<OP>_<name> (as runtime/src/ops.c keys its argument arrays), the
 * struct field it fills is found by its name, and whether the op writes it
 * is its kernel argument's kind.  What the extension adds is below in one
 * table per op; the checks after it fail the build where that table and
 * DSV4_ARGS_<OP> disagree, and tests/python/test_abi.py compares _op_table()
 * with the header's text. */
#include <stddef.h>

#include "ext.h"

static int last_contig(tview *t);

/* A block table [rows, max_blocks] with contiguous rows: *stride, its row
 * stride (0 for one row: packed), so that a view of a wider table is read
 * where it lies.  Rows of stride 0 (a broadcast) are refused by name: the
 * runtime reads a 0 stride as packed. */
static int table_rows(tview *b, int64_t *stride)
{
  if (last_contig(b))
    return -1;
  int64_t rows = b->shape[0];
  *stride = rows > 1 ? b->strides[0] : 0;
  if (rows > 1 && b->strides[0] == 0) {
    PyErr_Format(PyExc_ValueError, "%s: a broadcast view (rows of stride 0) is not taken: pass it contiguous",
                 b->name);
    return -1;
  }
  return 0;
}

/* Each op's tensors, in the order a call takes them (the order its
 * refusals are found in): T(OP, name, dtype class, may be None). */
#define PY_TENSORS_DEQUANT_GATHER(T)                                                                             \
  T(DEQUANT_GATHER, out, DT_BF16, 0) T(DEQUANT_GATHER, cache, DT_CACHE, 0) T(DEQUANT_GATHER, indices, DT_I32, 0)
#define PY_TENSORS_PAGED_GATHER(T)                                                                          \
  T(PAGED_GATHER, out, DT_BF16, 0) T(PAGED_GATHER, cache, DT_CACHE, 0) T(PAGED_GATHER, seq_lens, DT_I32, 0) \
  T(PAGED_GATHER, block_table, DT_I32, 0) T(PAGED_GATHER, gather_lens, DT_I32, 1)
#define PY_TENSORS_KV_INSERT(T)                                                                       \
  T(KV_INSERT, cache, DT_CACHE, 0) T(KV_INSERT, kv, DT_BF16, 0) T(KV_INSERT, slot_mapping, DT_I64, 0) \
  T(KV_INSERT, positions, DT_I64, 0) T(KV_INSERT, cos_sin, DT_F32, 0) T(KV_INSERT, q, DT_BF16, 0)     \
  T(KV_INSERT, q_out, DT_BF16, 0)
#define PY_TENSORS_SPARSE_DECODE(T)                                                                           \
  T(SPARSE_DECODE, out, DT_BF16, 0) T(SPARSE_DECODE, lse, DT_F32, 0) T(SPARSE_DECODE, q, DT_BF16, 0)          \
  T(SPARSE_DECODE, cache, DT_CACHE, 0) T(SPARSE_DECODE, indices, DT_I32, 0) T(SPARSE_DECODE, lens, DT_I32, 0) \
  T(SPARSE_DECODE, extra_cache, DT_CACHE, 1) T(SPARSE_DECODE, extra_indices, DT_I32, 1)                       \
  T(SPARSE_DECODE, extra_lens, DT_I32, 1) T(SPARSE_DECODE, attn_sink, DT_F32, 1)
#define PY_TENSORS_PAGED_MQA_LOGITS(T)                                                                              \
  T(PAGED_MQA_LOGITS, logits, DT_F32, 0) T(PAGED_MQA_LOGITS, q, DT_E4M3, 0) T(PAGED_MQA_LOGITS, cache, DT_CACHE, 0) \
  T(PAGED_MQA_LOGITS, weights, DT_F32, 0) T(PAGED_MQA_LOGITS, context_lens, DT_I32, 0)                              \
  T(PAGED_MQA_LOGITS, block_table, DT_I32, 0)
#define PY_TENSORS_TOPK(T) T(TOPK, out, DT_I32, 0) T(TOPK, logits, DT_F32, 0) T(TOPK, context_lens, DT_I32, 0)
#define PY_TENSORS_PAGED_MQA_LOGITS_TOPK(T)                                                                  \
  T(PAGED_MQA_LOGITS_TOPK, out, DT_I32, 0) T(PAGED_MQA_LOGITS_TOPK, q, DT_E4M3, 0)                           \
  T(PAGED_MQA_LOGITS_TOPK, cache, DT_CACHE, 0) T(PAGED_MQA_LOGITS_TOPK, weights, DT_F32, 0)                  \
  T(PAGED_MQA_LOGITS_TOPK, context_lens, DT_I32, 0) T(PAGED_MQA_LOGITS_TOPK, block_table, DT_I32, 0)

/* The buffers of DSV4_ARGS_<OP> the runtime makes itself: R(OP, name). */
#define PY_RUNTIME_DEQUANT_GATHER(R)
#define PY_RUNTIME_PAGED_GATHER(R)
#define PY_RUNTIME_KV_INSERT(R)
#define PY_RUNTIME_SPARSE_DECODE(R) R(SPARSE_DECODE, work)
#define PY_RUNTIME_PAGED_MQA_LOGITS(R) R(PAGED_MQA_LOGITS, kv_map)
#define PY_RUNTIME_TOPK(R) R(TOPK, work)
#define PY_RUNTIME_PAGED_MQA_LOGITS_TOPK(R) \
  R(PAGED_MQA_LOGITS_TOPK, work) R(PAGED_MQA_LOGITS_TOPK, kv_map) R(PAGED_MQA_LOGITS_TOPK, hist)

/* Each op's runtime call (its argument struct and function) and parser. */
#define PY_STRUCT_DEQUANT_GATHER dsv4rt_dequant_gather_args
#define PY_STRUCT_PAGED_GATHER dsv4rt_paged_gather_args
#define PY_STRUCT_KV_INSERT dsv4rt_kv_insert_args
#define PY_STRUCT_SPARSE_DECODE dsv4rt_sparse_decode_args
#define PY_STRUCT_PAGED_MQA_LOGITS dsv4rt_mqa_logits_args
#define PY_STRUCT_TOPK dsv4rt_topk_args
#define PY_STRUCT_PAGED_MQA_LOGITS_TOPK dsv4rt_mqa_logits_topk_args
#define PY_LAUNCH_DEQUANT_GATHER dsv4rt_dequant_gather
#define PY_LAUNCH_PAGED_GATHER dsv4rt_paged_gather
#define PY_LAUNCH_KV_INSERT dsv4rt_kv_insert
#define PY_LAUNCH_SPARSE_DECODE dsv4rt_sparse_decode
#define PY_LAUNCH_PAGED_MQA_LOGITS dsv4rt_paged_mqa_logits
#define PY_LAUNCH_TOPK dsv4rt_topk
#define PY_LAUNCH_PAGED_MQA_LOGITS_TOPK dsv4rt_paged_mqa_logits_topk
#define PY_PARSE_DEQUANT_GATHER parse_dequant_gather
#define PY_PARSE_PAGED_GATHER parse_paged_gather
#define PY_PARSE_KV_INSERT parse_kv_insert
#define PY_PARSE_SPARSE_DECODE parse_sparse_decode
#define PY_PARSE_PAGED_MQA_LOGITS parse_mqa_logits
#define PY_PARSE_TOPK parse_topk
#define PY_PARSE_PAGED_MQA_LOGITS_TOPK parse_mqa_logits_topk

/* ---- the tables, and their agreement with DSV4_ARGS_<OP> ---- */

/* DSV4_ARGS_<OP>(A) calls A(name, kind) without the op; these put it back:
 * PY_ABI(OP, name, kind), PY_ABI being defined where a list is expanded.
 * An op of DSV4_OPS without one here (and without the tables above) does
 * not compile. */
#define PY_ABI_DEQUANT_GATHER(nm, kind) PY_ABI(DEQUANT_GATHER, nm, kind)
#define PY_ABI_PAGED_GATHER(nm, kind) PY_ABI(PAGED_GATHER, nm, kind)
#define PY_ABI_KV_INSERT(nm, kind) PY_ABI(KV_INSERT, nm, kind)
#define PY_ABI_SPARSE_DECODE(nm, kind) PY_ABI(SPARSE_DECODE, nm, kind)
#define PY_ABI_PAGED_MQA_LOGITS(nm, kind) PY_ABI(PAGED_MQA_LOGITS, nm, kind)
#define PY_ABI_TOPK(nm, kind) PY_ABI(TOPK, nm, kind)
#define PY_ABI_PAGED_MQA_LOGITS_TOPK(nm, kind) PY_ABI(PAGED_MQA_LOGITS_TOPK, nm, kind)

/* Each kernel argument's kind as a constant, PY_KIND_<OP>_<name>: a tensor
 * whose name is no argument of DSV4_ARGS_<OP> names none and fails. */
#define PY_ABI(OP, nm, kind) PY_KIND_##OP##_##nm = DSV4_ARG_##kind,
#define X(e, s, d) enum { DSV4_ARGS_##e(PY_ABI_##e) };
DSV4_OPS(X)
#undef X
#undef PY_ABI

#define PY_IS_BUFFER(kind) ((int)(kind) == DSV4_ARG_PTR || (int)(kind) == DSV4_ARG_IN)
/* The bit of each buffer argument of DSV4_ARGS_<OP>, its position's. */
#define PY_ABI(OP, nm, kind) | (PY_IS_BUFFER(DSV4_ARG_##kind) ? 1ull << DSV4_A_##OP##_##nm : 0)

/* A tensor's row (its use from its kernel argument's kind), its position
 * among the op's (PY_T_<OP>_<name>), its bit; a runtime buffer's. */
#define PY_ROW(OP, nm, cls, opt)                                                                   \
  {#nm, DSV4_A_##OP##_##nm, cls, (int)PY_KIND_##OP##_##nm == DSV4_ARG_PTR ? USE_OUT : USE_IN, opt, \
   offsetof(PY_STRUCT_##OP, nm)},
#define PY_POS(OP, nm, cls, opt) PY_T_##OP##_##nm,
#define PY_BIT(OP, nm, cls, opt) PY_RUNTIME_BIT(OP, nm)
#define PY_RUNTIME_BIT(OP, nm) +(1ull << DSV4_A_##OP##_##nm)
#define PY_RUNTIME_ROW(OP, nm) {#nm, DSV4_A_##OP##_##nm, 0, USE_OUT, 0, 0},

/* Each tensor: a buffer argument of DSV4_ARGS_<OP> (PY_KIND_<OP>_<name>
 * exists: the name is an argument), and a buffer field of the op's
 * argument struct; each of the runtime's: a buffer argument. */
#define PY_CHECK(OP, nm, cls, opt)                                                                     \
  PY_RUNTIME_CHECK(OP, nm)                                                                             \
  _Static_assert(__builtin_types_compatible_p(__typeof__(((PY_STRUCT_##OP *)0)->nm), dsv4rt_buffer *), \
                 #nm ": no dsv4rt_buffer * of the op's argument struct");
#define PY_RUNTIME_CHECK(OP, nm)                                                                      \
  _Static_assert(PY_IS_BUFFER(PY_KIND_##OP##_##nm), #nm ": DSV4_ARGS_" #OP " holds it as no buffer");

/* Each op of DSV4_OPS: the checks of its tensors; its tensors and the
 * runtime's buffers are DSV4_ARGS_<OP>'s buffers, each once; it takes at
 * most MAXT tensors; its rows; its runtime call. */
#define X(e, s, d)                                                                                              \
  PY_TENSORS_##e(PY_CHECK) PY_RUNTIME_##e(PY_RUNTIME_CHECK)                                                     \
  enum { PY_TENSORS_##e(PY_POS) PY_T_##e##_COUNT };                                                             \
  _Static_assert((0 PY_TENSORS_##e(PY_BIT) PY_RUNTIME_##e(PY_RUNTIME_BIT)) == (0 DSV4_ARGS_##e(PY_ABI_##e)),    \
                 "the buffers of DSV4_ARGS_" #e " are not PY_TENSORS_" #e " and PY_RUNTIME_" #e ", each once"); \
  _Static_assert(PY_T_##e##_COUNT <= MAXT, #e " takes more than MAXT tensors");                                 \
  static const op_tensor tensors_##e[] = {PY_TENSORS_##e(PY_ROW)};                                              \
  static const op_tensor runtime_##e[] = {PY_RUNTIME_##e(PY_RUNTIME_ROW){NULL, 0, 0, 0, 0, 0}};                 \
  static dsv4rt_status launch_##e(dsv4rt_bundle *b, const void *args, const dsv4rt_launch_opts *opts)           \
  {                                                                                                             \
    return PY_LAUNCH_##e(b, (const PY_STRUCT_##e *)args, opts);                                                 \
  }
DSV4_OPS(X)
#undef X

const char *const op_names[DSV4_OP_COUNT] = {
#define X(e, s, d) [DSV4_OP_##e] = s,
    DSV4_OPS(X)
#undef X
};

/* Take obj as the tensor nm of the op OP (#defined around each parser),
 * into its slot tv[DSV4_A_<OP>_<nm>]; TV(nm): that slot. */
#define TAKE(nm, obj) TAKE_(OP, nm, obj)
#define TAKE_(op, nm, obj) TAKE__(op, nm, obj)
#define TAKE__(op, nm, obj) take(self->ctx, c, tv, &tensors_##op[PY_T_##op##_##nm], obj)
#define TV(nm) TV_(OP, nm)
#define TV_(op, nm) TV__(op, nm)
#define TV__(op, nm) tv[DSV4_A_##op##_##nm]

static int take(CtxObject *x, call *c, tview **tv, const op_tensor *r, PyObject *obj)
{
  return tensor(c, x, obj, r->name, r->cls, r->use, r->opt, &tv[r->abi]);
}

#define OP DEQUANT_GATHER
static int parse_dequant_gather(BundleObject *self, PyObject *args, PyObject *kw, call *c, tview **tv)
{
  static char *kwl[] = {"out", "cache", "indices", "block_size", "tensor_scale", "kernel", "check_contents", "stream",
                        NULL};
  PyObject *out, *cache, *idx, *bs = NULL, *ts_o = NULL, *kernel = NULL, *cc = NULL, *stream = NULL;
  float ts;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|OOOOO:dequant_gather", kwl, &out, &cache, &idx, &bs, &ts_o, &kernel,
                                   &cc, &stream) ||
      as_f32(ts_o, "tensor_scale", 1.0f, &ts) || begin_call(self, c, DSV4_OP_DEQUANT_GATHER, kernel, cc, stream))
    return -1;
  if (TAKE(out, out) || TAKE(cache, cache) || TAKE(indices, idx))
    return -1;
  dsv4rt_dequant_gather_args *a = &c->a.dg;
  tview *o = TV(out), *ix = TV(indices);
  if (need_contig(ix) || need_contig(o))
    return -1;
  int ok = o->ndim == ix->ndim + 1 && o->shape[o->ndim - 1] == c->L.dim;
  for (int i = 0; ok && i < ix->ndim; i++)
    ok = o->shape[i] == ix->shape[i];
  if (!ok) {
    char sh[160];
    return bad_shape(o, "indices.shape + (%d,) = %s + (%d,) (layout %s)", c->L.dim, shape_str(ix, sh, sizeof sh),
                     c->L.dim, c->L.name);
  }
  a->n = numel(ix);
  a->tensor_scale = ts;
  return cache_geometry(c, TV(cache), bs, "block_size", &a->num_blocks, &a->block_size, &a->block_stride);
}
#undef OP

#define OP PAGED_GATHER
static int parse_paged_gather(BundleObject *self, PyObject *args, PyObject *kw, call *c, tview **tv)
{
  static char *kwl[] = {"out",          "cache",  "seq_lens",       "block_table", "gather_lens", "offset",
                        "block_size",   "tensor_scale", "kernel", "check_contents", "stream", NULL};
  PyObject *out, *cache, *seq, *bt, *gl = NULL, *off = NULL, *bs = NULL, *ts_o = NULL, *kernel = NULL, *cc = NULL,
                                   *stream = NULL;
  float ts;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOO|OOOOOOO:paged_gather", kwl, &out, &cache, &seq, &bt, &gl, &off, &bs,
                                   &ts_o, &kernel, &cc, &stream) ||
      as_f32(ts_o, "tensor_scale", 1.0f, &ts) || begin_call(self, c, DSV4_OP_PAGED_GATHER, kernel, cc, stream))
    return -1;
  if (TAKE(out, out) || TAKE(cache, cache) || TAKE(seq_lens, seq) || TAKE(block_table, bt) || TAKE(gather_lens, gl))
    return -1;
  dsv4rt_paged_gather_args *a = &c->a.pg;
  tview *o = TV(out), *sl = TV(seq_lens), *b = TV(block_table), *g = TV(gather_lens);
  if (sl->ndim != 1)
    return bad_shape(sl, "[R]");
  int64_t R = sl->shape[0];
  if (b->ndim != 2 || b->shape[0] != R)
    return bad_shape(b, "[R, max_blocks] with R = %lld", (long long)R);
  if (g && (g->ndim != 1 || g->shape[0] != R))
    return bad_shape(g, "[R] = [%lld]", (long long)R);
  if (o->ndim != 3 || o->shape[0] < R || o->shape[2] != c->L.dim)
    return bad_shape(o, "[>= R, rows, %d] with R = %lld (layout %s)", c->L.dim, (long long)R, c->L.name);
  if (need_contig(sl) || table_rows(b, &a->block_table_stride) || (g && need_contig(g)))
    return -1;
  if (o->shape[2] > 1 && o->strides[2] != 1) {
    PyErr_Format(PyExc_ValueError, "out: the last dim must be contiguous (stride(2) == 1, got %lld)",
                 (long long)o->strides[2]);
    return -1;
  }
  a->num_requests = R, a->max_blocks = b->shape[1], a->out_rows = o->shape[1];
  /* a stride of a dim that is never stepped over is not meaningful (NumPy
   * and torch report various ones): one the runtime's rules take */
  a->out_stride_r = R > 1 ? o->strides[0] : 0;
  a->out_stride_m = a->out_rows > 1 ? o->strides[1] : (c->L.dim + 7) / 8 * 8;
  if (as_i64(off, "offset", 0, &a->offset))
    return -1;
  a->tensor_scale = ts;
  return cache_geometry(c, TV(cache), bs, "block_size", &a->num_blocks, &a->block_size, &a->block_stride);
}
#undef OP

#define OP KV_INSERT
static int parse_kv_insert(BundleObject *self, PyObject *args, PyObject *kw, call *c, tview **tv)
{
  static char *kwl[] = {"cache", "kv",         "slot_mapping", "positions",      "cos_sin", "q", "q_out",
                        "eps",   "block_size", "kernel",       "check_contents", "stream",  NULL};
  PyObject *cache, *kv, *sm, *pos = NULL, *cs = NULL, *q = NULL, *qo = NULL, *eps_o = NULL, *bs = NULL, *kernel = NULL,
                                *cc = NULL, *stream = NULL;
  float eps;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|OOOOOOOOO:kv_insert", kwl, &cache, &kv, &sm, &pos, &cs, &q, &qo,
                                   &eps_o, &bs, &kernel, &cc, &stream) ||
      as_f32(eps_o, "eps", 1e-6f, &eps) || begin_call(self, c, DSV4_OP_KV_INSERT, kernel, cc, stream))
    return -1;
  int rope = c->info.rope_dims > 0, qd = c->info.q_dim;
  const char *kn = c->kernel ? c->kernel : "the bundle's kv_insert kernel";
  if (!rope && ((pos && pos != Py_None) || (cs && cs != Py_None))) {
    PyErr_Format(PyExc_TypeError, "%s: %s applies no RoPE: positions and cos_sin must be None",
                 pos && pos != Py_None ? "positions" : "cos_sin", kn);
    return -1;
  }
  if (!qd && ((q && q != Py_None) || (qo && qo != Py_None))) {
    PyErr_Format(PyExc_TypeError, "%s: %s has no q branch: q and q_out must be None",
                 q && q != Py_None ? "q" : "q_out", kn);
    return -1;
  }
  if (TAKE(cache, cache) || TAKE(kv, kv) || TAKE(slot_mapping, sm) ||
      (rope && (TAKE(positions, pos) || TAKE(cos_sin, cs))) || (qd && (TAKE(q, q) || TAKE(q_out, qo))))
    return -1;
  dsv4rt_kv_insert_args *a = &c->a.ki;
  tview *k = TV(kv), *s = TV(slot_mapping);
  if (k->ndim != 2 || k->shape[1] != c->L.dim)
    return bad_shape(k, "[N, %d] (layout %s)", c->L.dim, c->L.name);
  int64_t N = k->shape[0];
  if (s->ndim != 1 || s->shape[0] > N)
    return bad_shape(s, "[n_insert] with n_insert <= N = %lld", (long long)N);
  if (need_contig(k) || need_contig(s))
    return -1;
  a->n_tokens = N, a->n_insert = s->shape[0], a->eps = eps;
  if (rope) {
    tview *p = TV(positions), *t = TV(cos_sin);
    if (p->ndim != 1 || p->shape[0] != N)
      return bad_shape(p, "[N] = [%lld]", (long long)N);
    if (t->ndim != 2 || t->shape[1] != c->info.rope_dims)
      return bad_shape(t, "[max_pos, %d] (cos in the first half, sin in the second)", c->info.rope_dims);
    if (need_contig(p) || need_contig(t))
      return -1;
    a->max_pos = t->shape[0];
  }
  if (qd) {
    tview *qi = TV(q), *qq = TV(q_out);
    if (qi->ndim != 3 || qi->shape[0] != N || qi->shape[2] != qd)
      return bad_shape(qi, "[N, heads, %d] with N = %lld", qd, (long long)N);
    if (qq->ndim != 3 || qq->shape[0] != N || qq->shape[1] < qi->shape[1] || qq->shape[2] != qd)
      return bad_shape(qq, "[%lld, padded_heads >= %lld, %d]", (long long)N, (long long)qi->shape[1], qd);
    if (need_contig(qi) || need_contig(qq))
      return -1;
    a->heads = qi->shape[1], a->padded_heads = qq->shape[1];
  }
  return cache_geometry(c, TV(cache), bs, "block_size", &a->num_blocks, &a->block_size, &a->block_stride);
}
#undef OP

/* The last dim of t packed (any strides on the others). */
static int last_contig(tview *t)
{
  if (t->ndim == 0 || t->shape[t->ndim - 1] <= 1 || t->strides[t->ndim - 1] == 1)
    return 0;
  char sh[160], st[160];
  PyErr_Format(PyExc_ValueError, "%s: its last dim must be contiguous; shape %s has strides %s (in elements)", t->name,
               shape_str(t, sh, sizeof sh), strides_str(t, st, sizeof st));
  return -1;
}

/* A decode argument's strides as dsv4rt_sparse_decode_args takes them
 * (batch entry, position[, head]) from t [B, s_q, ...] (four) or [T, ...]:
 * a dim of extent 1 gets stride 8 (any serves the kernel; the runtime asks
 * multiples of 8 of some, and all zero would mean packed); n: 2 or 3.  A
 * view whose strides are all 0 is refused. */
static int batch_strides(const tview *t, int four, int64_t *v, int n)
{
  int dim[3] = {0, four ? 1 : -1, four ? 2 : 1};
  for (int i = 0; i < n; i++) /* 8: a multiple of every alignment the runtime asks of a stride */
    v[i] = dim[i] < 0 ? 0 : t->shape[dim[i]] == 1 ? 8 : t->strides[dim[i]];
  for (int i = 0; i < n; i++)
    if (v[i])
      return 0;
  PyErr_Format(PyExc_ValueError, "%s: a broadcast view (every stride 0) is not taken: pass it contiguous", t->name);
  return -1;
}

/* One index list: ix [B, s_q, topk] (four) or [T, topk], rows contiguous;
 * ln [T] (or, four, [B]: one length a batch entry, or [B, s_q]). */
static int decode_list(tview *ix, tview *ln, int64_t B, int64_t S, int four, const char *kname, int64_t *is,
                       int64_t *ls, int64_t *topk)
{
  int64_t T = B * S;
  if (four ? ix->ndim != 3 || ix->shape[0] != B || ix->shape[1] != S : ix->ndim != 2 || ix->shape[0] != T)
    return four ? bad_shape(ix, "[B, s_q, %s] with B = %lld, s_q = %lld", kname, (long long)B, (long long)S)
                : bad_shape(ix, "[T, %s] with T = %lld", kname, (long long)T);
  int per_entry = four && ln->ndim == 1 && ln->shape[0] == B;
  if (!(ln->ndim == 1 && ln->shape[0] == (four ? B : T)) && !(four && ln->ndim == 2 && ln->shape[0] == B &&
                                                              ln->shape[1] == S))
    return four ? bad_shape(ln, "[B] = [%lld] (one a batch entry) or [B, s_q] = [%lld, %lld]", (long long)B,
                            (long long)B, (long long)S)
                : bad_shape(ln, "[T] = [%lld]", (long long)T);
  if (last_contig(ix))
    return -1;
  *topk = ix->shape[ix->ndim - 1];
  if (batch_strides(ix, four, is, 2))
    return -1;
  ls[0] = ln->shape[0] == 1 ? 8 : ln->strides[0];
  ls[1] = per_entry ? 0 : four ? ln->strides[1] : 0;
  if (ls[0] == 0 && ls[1] == 0) {
    PyErr_Format(PyExc_ValueError, "%s: a broadcast view (every stride 0) is not taken: pass it contiguous",
                 ln->name);
    return -1;
  }
  return 0;
}

#define OP SPARSE_DECODE
static int parse_sparse_decode(BundleObject *self, PyObject *args, PyObject *kw, call *c, tview **tv)
{
  static char *kwl[] = {"out",        "lse",          "q",          "cache",     "indices", "lens",
                        "softmax_scale", "extra_cache", "extra_indices", "extra_lens", "attn_sink", "tensor_scale",
                        "block_size", "extra_block_size", "splits", "kernel", "check_contents", "stream", NULL};
  PyObject *out, *lse, *q, *cache, *idx, *lens, *scale_o, *xc = NULL, *xi = NULL, *xl = NULL, *sink = NULL,
                                                         *ts_o = NULL, *bs = NULL, *xbs = NULL, *splits_o = NULL,
                                                         *kernel = NULL, *cc = NULL, *stream = NULL;
  float scale, ts;
  int splits;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOOOO|OOOOOOOOOOO:sparse_decode", kwl, &out, &lse, &q, &cache, &idx,
                                   &lens, &scale_o, &xc, &xi, &xl, &sink, &ts_o, &bs, &xbs, &splits_o, &kernel, &cc,
                                   &stream) ||
      as_f32(scale_o, "softmax_scale", 0, &scale) || as_f32(ts_o, "tensor_scale", 1.0f, &ts) ||
      as_int(splits_o, "splits", 0, &splits) || begin_call(self, c, DSV4_OP_SPARSE_DECODE, kernel, cc, stream))
    return -1;
  int hx = xc && xc != Py_None, hi = xi && xi != Py_None, hl = xl && xl != Py_None;
  if (hx + hi + hl != 0 && hx + hi + hl != 3) {
    PyErr_Format(PyExc_TypeError, "%s: extra_cache, extra_indices and extra_lens go together (%s is missing)",
                 !hx ? "extra_cache" : !hi ? "extra_indices" : "extra_lens",
                 !hx ? "extra_cache" : !hi ? "extra_indices" : "extra_lens");
    return -1;
  }
  if (TAKE(out, out) || TAKE(lse, lse) || TAKE(q, q) || TAKE(cache, cache) || TAKE(indices, idx) ||
      TAKE(lens, lens) || TAKE(extra_cache, xc) || TAKE(extra_indices, xi) || TAKE(extra_lens, xl) ||
      TAKE(attn_sink, sink))
    return -1;
  dsv4rt_sparse_decode_args *a = &c->a.sd;
  tview *qq = TV(q), *o = TV(out), *l = TV(lse), *ix = TV(indices), *ln = TV(lens), *sk = TV(attn_sink);
  int four = qq->ndim == 4;
  if ((qq->ndim != 3 && !four) || qq->shape[qq->ndim - 1] != c->L.dim)
    return bad_shape(qq, "[T, H, %d] or [B, s_q, H, %d] (layout %s)", c->L.dim, c->L.dim, c->L.name);
  int64_t B = qq->shape[0], S = four ? qq->shape[1] : 1, H = qq->shape[qq->ndim - 2], T = B * S, vd = c->info.v_dim;
  if (four ? o->ndim != 4 || o->shape[0] != B || o->shape[1] != S || o->shape[2] != H || o->shape[3] != vd
           : o->ndim != 3 || o->shape[0] != T || o->shape[1] != H || o->shape[2] != vd)
    return four ? bad_shape(o, "[B, s_q, H, v_dim] = [%lld, %lld, %lld, %lld]", (long long)B, (long long)S,
                            (long long)H, (long long)vd)
                : bad_shape(o, "[T, H, v_dim] = [%lld, %lld, %lld]", (long long)T, (long long)H, (long long)vd);
  if (four ? l->ndim != 3 || l->shape[0] != B || l->shape[1] != H || l->shape[2] != S
           : l->ndim != 2 || l->shape[0] != T || l->shape[1] != H)
    return four ? bad_shape(l, "[B, H, s_q] = [%lld, %lld, %lld] (FlashMLA's)", (long long)B, (long long)H,
                            (long long)S)
                : bad_shape(l, "[T, H] = [%lld, %lld]", (long long)T, (long long)H);
  if (sk && (sk->ndim != 1 || sk->shape[0] != H))
    return bad_shape(sk, "[H] = [%lld]", (long long)H);
  if (last_contig(qq) || last_contig(o) || (sk && need_contig(sk)))
    return -1;
  a->seq_q = S;
  if (batch_strides(qq, four, a->q_strides, 3) || batch_strides(o, four, a->out_strides, 3))
    return -1;
  if (l->strides[0] == 0 && l->strides[1] == 0 && (!four || l->strides[2] == 0) && numel(l) > 1) {
    PyErr_Format(PyExc_ValueError, "lse: a broadcast view (every stride 0) is not taken: pass it contiguous");
    return -1;
  }
  if (four) /* [B, H, s_q]: batch entry, position, head */
    a->lse_strides[0] = l->strides[0], a->lse_strides[1] = l->strides[2], a->lse_strides[2] = l->strides[1];
  else
    a->lse_strides[0] = l->strides[0], a->lse_strides[1] = 0, a->lse_strides[2] = l->strides[1];
  for (int i = 0, d[3] = {0, four ? 2 : -1, 1}; i < 3; i++) /* (any stride serves a dim of one) */
    if (d[i] >= 0 && l->shape[d[i]] == 1)
      a->lse_strides[i] = 8;
  if (decode_list(ix, ln, B, S, four, "topk", a->indices_strides, a->lens_strides, &a->topk))
    return -1;
  a->n_tokens = T, a->heads = H;
  a->softmax_scale = scale, a->tensor_scale = ts;
  c->opts.splits = splits;
  if (TV(extra_cache)) {
    if (decode_list(TV(extra_indices), TV(extra_lens), B, S, four, "extra_topk", a->extra_indices_strides,
                    a->extra_lens_strides, &a->extra_topk))
      return -1;

    if (cache_geometry(c, TV(extra_cache), xbs, "extra_block_size", &a->extra_num_blocks, &a->extra_block_size,
                       &a->extra_block_stride))
      return -1;
  }
  return cache_geometry(c, TV(cache), bs, "block_size", &a->num_blocks, &a->block_size, &a->block_stride);
}
#undef OP

/* The logits' inputs (both logits ops; OP's positions): q [B, next_n, H,
 * D], weights [B * next_n, H], context_lens [B, next_n], block_table [B,
 * max_blocks] rows; B and next_n into *Bn, *nn. */
static int logits_inputs(call *c, tview *qq, tview *ww, tview *ctx, tview *b, int64_t *Bn, int64_t *nn,
                         int64_t *max_blocks, int64_t *bt_stride)
{
  int H = c->info.heads, D = c->L.dim;
  if (qq->ndim != 4 || qq->shape[2] != H || qq->shape[3] != D)
    return bad_shape(qq, "[B, next_n, %d, %d] (the kernel's heads and head size)", H, D);
  *Bn = qq->shape[0], *nn = qq->shape[1];
  int64_t R = *Bn * *nn;
  if (ww->ndim != 2 || ww->shape[0] != R || ww->shape[1] != H)
    return bad_shape(ww, "[B * next_n, %d] = [%lld, %d]", H, (long long)R, H);
  if (ctx->ndim != 2 || ctx->shape[0] != *Bn || ctx->shape[1] != *nn)
    return bad_shape(ctx, "[B, next_n] = [%lld, %lld]", (long long)*Bn, (long long)*nn);
  if (b->ndim != 2 || b->shape[0] != *Bn)
    return bad_shape(b, "[B, max_blocks] with B = %lld", (long long)*Bn);
  if (need_contig(qq) || need_contig(ww) || need_contig(ctx) || table_rows(b, bt_stride))
    return -1;
  *max_blocks = b->shape[1];
  return 0;
}

#define OP PAGED_MQA_LOGITS
static int parse_mqa_logits(BundleObject *self, PyObject *args, PyObject *kw, call *c, tview **tv)
{
  static char *kwl[] = {"logits", "q",      "cache",          "weights", "context_lens",   "block_table",
                        "block_size", "kernel", "check_contents", "stream", "no_tensor_maps", NULL};
  PyObject *lg, *q, *cache, *w, *cl, *bt, *bs = NULL, *kernel = NULL, *cc = NULL, *stream = NULL, *ntm_o = NULL;
  int ntm;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOOO|OOOOO:paged_mqa_logits", kwl, &lg, &q, &cache, &w, &cl, &bt, &bs,
                                   &kernel, &cc, &stream, &ntm_o) ||
      as_flag(ntm_o, "no_tensor_maps", &ntm) || begin_call(self, c, DSV4_OP_PAGED_MQA_LOGITS, kernel, cc, stream))
    return -1;
  c->opts.no_tensor_maps = ntm;
  if (TAKE(logits, lg) || TAKE(q, q) || TAKE(cache, cache) || TAKE(weights, w) || TAKE(context_lens, cl) ||
      TAKE(block_table, bt))
    return -1;
  dsv4rt_mqa_logits_args *a = &c->a.ml;
  tview *o = TV(logits);
  if (logits_inputs(c, TV(q), TV(weights), TV(context_lens), TV(block_table), &a->batch, &a->next_n, &a->max_blocks,
                    &a->block_table_stride))
    return -1;
  int64_t R = a->batch * a->next_n;
  if (o->ndim != 2 || o->shape[0] != R)
    return bad_shape(o, "[B * next_n, row_len] with B * next_n = %lld", (long long)R);
  if (o->shape[1] > 1 && o->strides[1] != 1) {
    PyErr_Format(PyExc_ValueError, "logits: rows must be contiguous (stride(1) == 1, got %lld)",
                 (long long)o->strides[1]);
    return -1;
  }
  a->row_len = o->shape[1];
  a->row_stride = R > 1 ? o->strides[0] : a->row_len;
  return cache_geometry(c, TV(cache), bs, "block_size", &a->num_blocks, &a->block_size, &a->block_stride);
}
#undef OP

#define OP PAGED_MQA_LOGITS_TOPK
static int parse_mqa_logits_topk(BundleObject *self, PyObject *args, PyObject *kw, call *c, tview **tv)
{
  static char *kwl[] = {"out",    "q",      "cache",          "weights", "context_lens",   "block_table", "row_len",
                        "block_size", "kernel", "check_contents", "stream", "no_tensor_maps", "k", NULL};
  PyObject *out, *q, *cache, *w, *cl, *bt, *rl_o, *bs = NULL, *kernel = NULL, *cc = NULL, *stream = NULL,
                                               *ntm_o = NULL, *k_o = NULL;
  int ntm, row_len, k;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOOOO|OOOOOO:paged_mqa_logits_topk", kwl, &out, &q, &cache, &w, &cl,
                                   &bt, &rl_o, &bs, &kernel, &cc, &stream, &ntm_o, &k_o) ||
      as_int(rl_o, "row_len", 0, &row_len) || as_flag(ntm_o, "no_tensor_maps", &ntm) || as_int(k_o, "k", 0, &k) ||
      begin_call_k(self, c, DSV4_OP_PAGED_MQA_LOGITS_TOPK, kernel, cc, stream, k))
    return -1;
  c->opts.no_tensor_maps = ntm;
  if (TAKE(out, out) || TAKE(q, q) || TAKE(cache, cache) || TAKE(weights, w) || TAKE(context_lens, cl) ||
      TAKE(block_table, bt))
    return -1;
  dsv4rt_mqa_logits_topk_args *a = &c->a.mlt;
  if (logits_inputs(c, TV(q), TV(weights), TV(context_lens), TV(block_table), &a->batch, &a->next_n, &a->max_blocks,
                    &a->block_table_stride))
    return -1;
  int64_t R = a->batch * a->next_n, K = c->info.topk;
  tview *o = TV(out);
  if (o->ndim != 2 || o->shape[0] != R || o->shape[1] != K)
    return bad_shape(o, "[B * next_n, K] = [%lld, %lld] (K is the kernel's)", (long long)R, (long long)K);
  if (need_contig(o))
    return -1;
  a->row_len = row_len, a->topk = K; /* (the runtime's rule: among the kernels of this K) */
  return cache_geometry(c, TV(cache), bs, "block_size", &a->num_blocks, &a->block_size, &a->block_stride);
}
#undef OP

#define OP TOPK
static int parse_topk(BundleObject *self, PyObject *args, PyObject *kw, call *c, tview **tv)
{
  static char *kwl[] = {"out", "logits", "context_lens", "splits", "kernel", "check_contents", "stream", NULL};
  PyObject *out, *lg, *cl, *splits_o = NULL, *kernel = NULL, *cc = NULL, *stream = NULL;
  int splits;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|OOOO:topk", kwl, &out, &lg, &cl, &splits_o, &kernel, &cc,
                                   &stream) ||
      as_int(splits_o, "splits", 0, &splits) || begin_call(self, c, DSV4_OP_TOPK, kernel, cc, stream))
    return -1;
  c->opts.splits = splits;
  if (TAKE(out, out) || TAKE(logits, lg) || TAKE(context_lens, cl))
    return -1;
  dsv4rt_topk_args *a = &c->a.tk;
  tview *o = TV(out), *l = TV(logits), *ctx = TV(context_lens);
  if (l->ndim != 2)
    return bad_shape(l, "[rows, row_len]");
  int64_t R = l->shape[0], K = c->info.topk;
  if (o->ndim != 2 || o->shape[0] != R || o->shape[1] != K)
    return bad_shape(o, "[rows, K] = [%lld, %lld] (K is the kernel's)", (long long)R, (long long)K);
  if (numel(ctx) != R || ctx->ndim < 1 || ctx->ndim > 2)
    return bad_shape(ctx, "[rows] or [B, next_n] with rows = %lld", (long long)R);
  if (need_contig(o) || need_contig(ctx))
    return -1;
  if (l->shape[1] > 1 && l->strides[1] != 1) {
    PyErr_Format(PyExc_ValueError, "logits: rows must be contiguous (stride(1) == 1, got %lld)",
                 (long long)l->strides[1]);
    return -1;
  }
  a->rows = R, a->row_len = l->shape[1];
  a->row_stride = R > 1 ? l->strides[0] : a->row_len;
  return 0;
}
#undef OP

/* Each op of DSV4_OPS: its tensors, the runtime's buffers (less the
 * closing NULL row), its parser and its runtime call. */
const op_def ops[DSV4_OP_COUNT] = {
#define X(e, s, d)                                                                         \
  [DSV4_OP_##e] = {tensors_##e, PY_T_##e##_COUNT, runtime_##e,                             \
                   (int)(sizeof runtime_##e / sizeof *runtime_##e) - 1, PY_PARSE_##e, launch_##e},
    DSV4_OPS(X)
#undef X
};

static PyObject *op_call(BundleObject *self, int op, PyObject *args, PyObject *kw, long iters, double *secs)
{
  if (!self->b) {
    PyErr_SetString(PyExc_ValueError, "the bundle is closed");
    return NULL;
  }
  call *c = PyMem_Malloc(sizeof *c); /* (a few KB: not on the stack) */
  if (!c)
    return PyErr_NoMemory();
  tview *tv[DSV4_MAX_ARGS] = {0}; /* by kernel argument position */
  c->nt = 0;
  PyObject *r;
  if (ops[op].parse(self, args, kw, c, tv) ||
      (!c->stream_given && c->torch_cuda && self->ctx->cuda && torch_current_stream(self->ctx->device, &c->stream))) {
    release_all(c);
    r = NULL;
  } else
    r = run(self, c, tv, iters, secs);
  PyMem_Free(c);
  return r;
}

#define OP_METHOD(fn, op)                                                 \
  PyObject *Bundle_##fn(BundleObject *self, PyObject *args, PyObject *kw) \
  {                                                                       \
    return op_call(self, op, args, kw, 1, NULL);                          \
  }
OP_METHOD(dequant_gather, DSV4_OP_DEQUANT_GATHER)
OP_METHOD(paged_gather, DSV4_OP_PAGED_GATHER)
OP_METHOD(kv_insert, DSV4_OP_KV_INSERT)
OP_METHOD(sparse_decode, DSV4_OP_SPARSE_DECODE)
OP_METHOD(paged_mqa_logits, DSV4_OP_PAGED_MQA_LOGITS)
OP_METHOD(topk, DSV4_OP_TOPK)
OP_METHOD(paged_mqa_logits_topk, DSV4_OP_PAGED_MQA_LOGITS_TOPK)

int op_index(const char *name)
{
  for (int i = 1; i < DSV4_OP_COUNT; i++)
    if (!strcmp(name, op_names[i]))
      return i;
  PyErr_Format(PyExc_ValueError, "unknown op '%s'", name);
  return -1;
}

/* _bench_c_loop(op, iters, kwargs): the op's arguments taken once, then
 * `iters` runtime calls in a C loop; returns host seconds a call (the
 * launches only: the final synchronization is not counted). */
PyObject *Bundle_bench_c_loop(BundleObject *self, PyObject *args)
{
  const char *opname;
  long iters;
  PyObject *kw;
  if (!PyArg_ParseTuple(args, "slO!:_bench_c_loop", &opname, &iters, &PyDict_Type, &kw))
    return NULL;
  int op = op_index(opname);
  if (op < 0)
    return NULL;
  if (iters < 1) {
    PyErr_SetString(PyExc_ValueError, "iters must be >= 1");
    return NULL;
  }
  PyObject *empty = PyTuple_New(0);
  if (!empty)
    return NULL;
  double secs = 0;
  PyObject *r = op_call(self, op, empty, kw, iters, &secs);
  Py_DECREF(empty);
  if (!r)
    return NULL;
  Py_DECREF(r);
  return PyFloat_FromDouble(secs / (double)iters);
}

/* _op_table(): {op: {"tensors": [(name, position in DSV4_ARGS_<OP>,
 * written, optional), ...] in the order a call takes them, "runtime":
 * [(name, position), ...]}}, for tests/python/test_abi.py. */
PyObject *op_table(PyObject *module, PyObject *unused)
{
  (void)module, (void)unused;
  PyObject *d = PyDict_New();
  for (int op = 1; d && op < DSV4_OP_COUNT; op++) {
    PyObject *t = PyList_New(0), *r = PyList_New(0), *e = NULL;
    for (int i = 0; t && i < ops[op].ntensors; i++) {
      const op_tensor *x = &ops[op].tensors[i];
      PyObject *row = Py_BuildValue("(siOO)", x->name, x->abi, x->use == USE_OUT ? Py_True : Py_False,
                                    x->opt ? Py_True : Py_False);
      if (!row || PyList_Append(t, row))
        Py_CLEAR(t);
      Py_XDECREF(row);
    }
    for (int i = 0; r && i < ops[op].nruntime; i++) {
      PyObject *row = Py_BuildValue("(si)", ops[op].runtime[i].name, ops[op].runtime[i].abi);
      if (!row || PyList_Append(r, row))
        Py_CLEAR(r);
      Py_XDECREF(row);
    }
    if (t && r)
      e = Py_BuildValue("{s:O,s:O}", "tensors", t, "runtime", r);
    if (!e || PyDict_SetItemString(d, op_names[op], e))
      Py_CLEAR(d);
    Py_XDECREF(t), Py_XDECREF(r), Py_XDECREF(e);
  }
  return d;
}
