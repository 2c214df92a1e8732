/* ops.c -- each op's arguments: parsed, each tensor taken and its shape
 * checked against the kernel the call resolves to, the runtime's argument
 * struct filled; the op methods, _bench_c_loop and op_index. */
#include "ext.h"

const char *const op_names[OP_COUNT] = {"dequant_gather", "paged_gather",     "kv_insert",
                                        "sparse_decode",  "paged_mqa_logits", "topk"};
static int parse_dequant_gather(BundleObject *self, PyObject *args, PyObject *kw, call *c, tview **tv)
{
  static char *kwl[] = {"out", "cache", "indices", "block_size", "tensor_scale", "kernel", "check_contents", "stream",
                        NULL};
  PyObject *out, *cache, *idx, *bs = NULL, *ts_o = NULL, *kernel = NULL, *cc = NULL, *stream = NULL;
  float ts;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|OOOOO:dequant_gather", kwl, &out, &cache, &idx, &bs, &ts_o, &kernel,
                                   &cc, &stream) ||
      as_f32(ts_o, "tensor_scale", 1.0f, &ts) || begin_call(self, c, OP_DEQUANT_GATHER, kernel, cc, stream))
    return -1;
  CtxObject *x = self->ctx;
  if (tensor(c, x, out, "out", DT_BF16, USE_OUT, 0, &tv[0]) || tensor(c, x, cache, "cache", DT_CACHE, USE_IN, 0, &tv[1]) ||
      tensor(c, x, idx, "indices", DT_I32, USE_IN, 0, &tv[2]))
    return -1;
  dsv4rt_dequant_gather_args *a = &c->a.dg;
  tview *o = tv[0], *ix = tv[2];
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
  return cache_geometry(c, tv[1], bs, "block_size", &a->num_blocks, &a->block_size, &a->block_stride);
}

static int parse_paged_gather(BundleObject *self, PyObject *args, PyObject *kw, call *c, tview **tv)
{
  static char *kwl[] = {"out",          "cache",  "seq_lens",       "block_table", "gather_lens", "offset", "block_size",
                        "tensor_scale", "kernel", "check_contents", "stream",      NULL};
  PyObject *out, *cache, *seq, *bt, *gl = NULL, *off = NULL, *bs = NULL, *ts_o = NULL, *kernel = NULL, *cc = NULL,
                                   *stream = NULL;
  float ts;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOO|OOOOOOO:paged_gather", kwl, &out, &cache, &seq, &bt, &gl, &off, &bs,
                                   &ts_o, &kernel, &cc, &stream) ||
      as_f32(ts_o, "tensor_scale", 1.0f, &ts) || begin_call(self, c, OP_PAGED_GATHER, kernel, cc, stream))
    return -1;
  CtxObject *x = self->ctx;
  if (tensor(c, x, out, "out", DT_BF16, USE_OUT, 0, &tv[0]) || tensor(c, x, cache, "cache", DT_CACHE, USE_IN, 0, &tv[1]) ||
      tensor(c, x, seq, "seq_lens", DT_I32, USE_IN, 0, &tv[2]) ||
      tensor(c, x, bt, "block_table", DT_I32, USE_IN, 0, &tv[3]) ||
      tensor(c, x, gl, "gather_lens", DT_I32, USE_IN, 1, &tv[4]))
    return -1;
  dsv4rt_paged_gather_args *a = &c->a.pg;
  tview *o = tv[0], *sl = tv[2], *b = tv[3], *g = tv[4];
  if (sl->ndim != 1)
    return bad_shape(sl, "[R]");
  int64_t R = sl->shape[0];
  if (b->ndim != 2 || b->shape[0] != R)
    return bad_shape(b, "[R, max_blocks] with R = %lld", (long long)R);
  if (g && (g->ndim != 1 || g->shape[0] != R))
    return bad_shape(g, "[R] = [%lld]", (long long)R);
  if (o->ndim != 3 || o->shape[0] < R || o->shape[2] != c->L.dim)
    return bad_shape(o, "[>= R, rows, %d] with R = %lld (layout %s)", c->L.dim, (long long)R, c->L.name);
  if (need_contig(sl) || need_contig(b) || (g && need_contig(g)))
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
  return cache_geometry(c, tv[1], bs, "block_size", &a->num_blocks, &a->block_size, &a->block_stride);
}

static int parse_kv_insert(BundleObject *self, PyObject *args, PyObject *kw, call *c, tview **tv)
{
  static char *kwl[] = {"cache", "kv",         "slot_mapping", "positions",      "cos_sin", "q", "q_out",
                        "eps",   "block_size", "kernel",       "check_contents", "stream",  NULL};
  PyObject *cache, *kv, *sm, *pos = NULL, *cs = NULL, *q = NULL, *qo = NULL, *eps_o = NULL, *bs = NULL, *kernel = NULL,
                                *cc = NULL, *stream = NULL;
  float eps;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|OOOOOOOOO:kv_insert", kwl, &cache, &kv, &sm, &pos, &cs, &q, &qo,
                                   &eps_o, &bs, &kernel, &cc, &stream) ||
      as_f32(eps_o, "eps", 1e-6f, &eps) || begin_call(self, c, OP_KV_INSERT, kernel, cc, stream))
    return -1;
  CtxObject *x = self->ctx;
  int rope = c->info.rope_dims > 0, qd = c->info.q_dim;
  const char *kn = c->kernel ? c->kernel : "the bundle's kv_insert kernel";
  if (!rope && ((pos && pos != Py_None) || (cs && cs != Py_None))) {
    PyErr_Format(PyExc_TypeError, "%s: %s applies no RoPE: positions and cos_sin must be None",
                 pos && pos != Py_None ? "positions" : "cos_sin", kn);
    return -1;
  }
  if (!qd && ((q && q != Py_None) || (qo && qo != Py_None))) {
    PyErr_Format(PyExc_TypeError, "%s: %s has no q branch: q and q_out must be None", q && q != Py_None ? "q" : "q_out",
                 kn);
    return -1;
  }
  if (tensor(c, x, cache, "cache", DT_CACHE, USE_OUT, 0, &tv[0]) || tensor(c, x, kv, "kv", DT_BF16, USE_IN, 0, &tv[1]) ||
      tensor(c, x, sm, "slot_mapping", DT_I64, USE_IN, 0, &tv[2]) ||
      (rope && (tensor(c, x, pos, "positions", DT_I64, USE_IN, 0, &tv[3]) ||
                tensor(c, x, cs, "cos_sin", DT_F32, USE_IN, 0, &tv[4]))) ||
      (qd && (tensor(c, x, q, "q", DT_BF16, USE_IN, 0, &tv[5]) || tensor(c, x, qo, "q_out", DT_BF16, USE_OUT, 0, &tv[6]))))
    return -1;
  dsv4rt_kv_insert_args *a = &c->a.ki;
  tview *k = tv[1], *s = tv[2];
  if (k->ndim != 2 || k->shape[1] != c->L.dim)
    return bad_shape(k, "[N, %d] (layout %s)", c->L.dim, c->L.name);
  int64_t N = k->shape[0];
  if (s->ndim != 1 || s->shape[0] > N)
    return bad_shape(s, "[n_insert] with n_insert <= N = %lld", (long long)N);
  if (need_contig(k) || need_contig(s))
    return -1;
  a->n_tokens = N, a->n_insert = s->shape[0], a->eps = eps;
  if (rope) {
    tview *p = tv[3], *t = tv[4];
    if (p->ndim != 1 || p->shape[0] != N)
      return bad_shape(p, "[N] = [%lld]", (long long)N);
    if (t->ndim != 2 || t->shape[1] != c->info.rope_dims)
      return bad_shape(t, "[max_pos, %d] (cos in the first half, sin in the second)", c->info.rope_dims);
    if (need_contig(p) || need_contig(t))
      return -1;
    a->max_pos = t->shape[0];
  }
  if (qd) {
    tview *qi = tv[5], *qq = tv[6];
    if (qi->ndim != 3 || qi->shape[0] != N || qi->shape[2] != qd)
      return bad_shape(qi, "[N, heads, %d] with N = %lld", qd, (long long)N);
    if (qq->ndim != 3 || qq->shape[0] != N || qq->shape[1] < qi->shape[1] || qq->shape[2] != qd)
      return bad_shape(qq, "[%lld, padded_heads >= %lld, %d]", (long long)N, (long long)qi->shape[1], qd);
    if (need_contig(qi) || need_contig(qq))
      return -1;
    a->heads = qi->shape[1], a->padded_heads = qq->shape[1];
  }
  return cache_geometry(c, tv[0], bs, "block_size", &a->num_blocks, &a->block_size, &a->block_stride);
}

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
      as_int(splits_o, "splits", 0, &splits) || begin_call(self, c, OP_SPARSE_DECODE, kernel, cc, stream))
    return -1;
  int hx = xc && xc != Py_None, hi = xi && xi != Py_None, hl = xl && xl != Py_None;
  if (hx + hi + hl != 0 && hx + hi + hl != 3) {
    PyErr_Format(PyExc_TypeError, "%s: extra_cache, extra_indices and extra_lens go together (%s is missing)",
                 !hx ? "extra_cache" : !hi ? "extra_indices" : "extra_lens",
                 !hx ? "extra_cache" : !hi ? "extra_indices" : "extra_lens");
    return -1;
  }
  CtxObject *x = self->ctx;
  if (tensor(c, x, out, "out", DT_BF16, USE_OUT, 0, &tv[0]) || tensor(c, x, lse, "lse", DT_F32, USE_OUT, 0, &tv[1]) ||
      tensor(c, x, q, "q", DT_BF16, USE_IN, 0, &tv[2]) || tensor(c, x, cache, "cache", DT_CACHE, USE_IN, 0, &tv[3]) ||
      tensor(c, x, idx, "indices", DT_I32, USE_IN, 0, &tv[4]) || tensor(c, x, lens, "lens", DT_I32, USE_IN, 0, &tv[5]) ||
      tensor(c, x, xc, "extra_cache", DT_CACHE, USE_IN, 1, &tv[6]) ||
      tensor(c, x, xi, "extra_indices", DT_I32, USE_IN, 1, &tv[7]) ||
      tensor(c, x, xl, "extra_lens", DT_I32, USE_IN, 1, &tv[8]) ||
      tensor(c, x, sink, "attn_sink", DT_F32, USE_IN, 1, &tv[9]))
    return -1;
  dsv4rt_sparse_decode_args *a = &c->a.sd;
  tview *qq = tv[2], *o = tv[0], *l = tv[1], *ix = tv[4], *ln = tv[5];
  if (qq->ndim != 3 || qq->shape[2] != c->L.dim)
    return bad_shape(qq, "[T, H, %d] (layout %s)", c->L.dim, c->L.name);
  int64_t T = qq->shape[0], H = qq->shape[1], vd = c->info.v_dim;
  if (o->ndim != 3 || o->shape[0] != T || o->shape[1] != H || o->shape[2] != vd)
    return bad_shape(o, "[T, H, v_dim] = [%lld, %lld, %lld]", (long long)T, (long long)H, (long long)vd);
  if (l->ndim != 2 || l->shape[0] != T || l->shape[1] != H)
    return bad_shape(l, "[T, H] = [%lld, %lld]", (long long)T, (long long)H);
  if (ix->ndim != 2 || ix->shape[0] != T)
    return bad_shape(ix, "[T, topk] with T = %lld", (long long)T);
  if (ln->ndim != 1 || ln->shape[0] != T)
    return bad_shape(ln, "[T] = [%lld]", (long long)T);
  if (tv[9] && (tv[9]->ndim != 1 || tv[9]->shape[0] != H))
    return bad_shape(tv[9], "[H] = [%lld]", (long long)H);
  if (need_contig(qq) || need_contig(o) || need_contig(l) || need_contig(ix) || need_contig(ln) ||
      (tv[9] && need_contig(tv[9])))
    return -1;
  a->n_tokens = T, a->heads = H, a->topk = ix->shape[1];
  a->softmax_scale = scale, a->tensor_scale = ts;
  c->opts.splits = splits;
  if (tv[6]) {
    tview *xix = tv[7], *xln = tv[8];
    if (xix->ndim != 2 || xix->shape[0] != T)
      return bad_shape(xix, "[T, extra_topk] with T = %lld", (long long)T);
    if (xln->ndim != 1 || xln->shape[0] != T)
      return bad_shape(xln, "[T] = [%lld]", (long long)T);
    if (need_contig(xix) || need_contig(xln))
      return -1;
    a->extra_topk = xix->shape[1];
    if (cache_geometry(c, tv[6], xbs, "extra_block_size", &a->extra_num_blocks, &a->extra_block_size,
                       &a->extra_block_stride))
      return -1;
  }
  return cache_geometry(c, tv[3], bs, "block_size", &a->num_blocks, &a->block_size, &a->block_stride);
}

static int parse_mqa_logits(BundleObject *self, PyObject *args, PyObject *kw, call *c, tview **tv)
{
  static char *kwl[] = {"logits", "q",      "cache",          "weights", "context_lens",   "block_table",
                        "block_size", "kernel", "check_contents", "stream", "no_tensor_maps", NULL};
  PyObject *lg, *q, *cache, *w, *cl, *bt, *bs = NULL, *kernel = NULL, *cc = NULL, *stream = NULL, *ntm_o = NULL;
  int ntm;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOOOO|OOOOO:paged_mqa_logits", kwl, &lg, &q, &cache, &w, &cl, &bt, &bs,
                                   &kernel, &cc, &stream, &ntm_o) ||
      as_flag(ntm_o, "no_tensor_maps", &ntm) || begin_call(self, c, OP_MQA_LOGITS, kernel, cc, stream))
    return -1;
  c->opts.no_tensor_maps = ntm;
  CtxObject *x = self->ctx;
  if (tensor(c, x, lg, "logits", DT_F32, USE_OUT, 0, &tv[0]) || tensor(c, x, q, "q", DT_E4M3, USE_IN, 0, &tv[1]) ||
      tensor(c, x, cache, "cache", DT_CACHE, USE_IN, 0, &tv[2]) ||
      tensor(c, x, w, "weights", DT_F32, USE_IN, 0, &tv[3]) ||
      tensor(c, x, cl, "context_lens", DT_I32, USE_IN, 0, &tv[4]) ||
      tensor(c, x, bt, "block_table", DT_I32, USE_IN, 0, &tv[5]))
    return -1;
  dsv4rt_mqa_logits_args *a = &c->a.ml;
  tview *o = tv[0], *qq = tv[1], *ww = tv[3], *ctx = tv[4], *b = tv[5];
  int H = c->info.heads, D = c->L.dim;
  if (qq->ndim != 4 || qq->shape[2] != H || qq->shape[3] != D)
    return bad_shape(qq, "[B, next_n, %d, %d] (the kernel's heads and head size)", H, D);
  int64_t Bn = qq->shape[0], nn = qq->shape[1], R = Bn * nn;
  if (ww->ndim != 2 || ww->shape[0] != R || ww->shape[1] != H)
    return bad_shape(ww, "[B * next_n, %d] = [%lld, %d]", H, (long long)R, H);
  if (ctx->ndim != 2 || ctx->shape[0] != Bn || ctx->shape[1] != nn)
    return bad_shape(ctx, "[B, next_n] = [%lld, %lld]", (long long)Bn, (long long)nn);
  if (b->ndim != 2 || b->shape[0] != Bn)
    return bad_shape(b, "[B, max_blocks] with B = %lld", (long long)Bn);
  if (o->ndim != 2 || o->shape[0] != R)
    return bad_shape(o, "[B * next_n, row_len] with B * next_n = %lld", (long long)R);
  if (need_contig(qq) || need_contig(ww) || need_contig(ctx) || need_contig(b))
    return -1;
  if (o->shape[1] > 1 && o->strides[1] != 1) {
    PyErr_Format(PyExc_ValueError, "logits: rows must be contiguous (stride(1) == 1, got %lld)",
                 (long long)o->strides[1]);
    return -1;
  }
  a->batch = Bn, a->next_n = nn, a->max_blocks = b->shape[1];
  a->row_len = o->shape[1];
  a->row_stride = R > 1 ? o->strides[0] : a->row_len;
  return cache_geometry(c, tv[2], bs, "block_size", &a->num_blocks, &a->block_size, &a->block_stride);
}

static int parse_topk(BundleObject *self, PyObject *args, PyObject *kw, call *c, tview **tv)
{
  static char *kwl[] = {"out", "logits", "context_lens", "kernel", "check_contents", "stream", NULL};
  PyObject *out, *lg, *cl, *kernel = NULL, *cc = NULL, *stream = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|OOO:topk", kwl, &out, &lg, &cl, &kernel, &cc, &stream) ||
      begin_call(self, c, OP_TOPK, kernel, cc, stream))
    return -1;
  CtxObject *x = self->ctx;
  if (tensor(c, x, out, "out", DT_I32, USE_OUT, 0, &tv[0]) || tensor(c, x, lg, "logits", DT_F32, USE_IN, 0, &tv[1]) ||
      tensor(c, x, cl, "context_lens", DT_I32, USE_IN, 0, &tv[2]))
    return -1;
  dsv4rt_topk_args *a = &c->a.tk;
  tview *o = tv[0], *l = tv[1], *ctx = tv[2];
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

const parse_fn parsers[OP_COUNT] = {parse_dequant_gather, parse_paged_gather, parse_kv_insert,
                                           parse_sparse_decode,  parse_mqa_logits,   parse_topk};

static PyObject *op_call(BundleObject *self, int op, PyObject *args, PyObject *kw, long iters, double *secs)
{
  if (!self->b) {
    PyErr_SetString(PyExc_ValueError, "the bundle is closed");
    return NULL;
  }
  call *c = PyMem_Malloc(sizeof *c); /* (a few KB: not on the stack) */
  if (!c)
    return PyErr_NoMemory();
  tview *tv[MAXT] = {0};
  c->nt = 0;
  PyObject *r;
  if (parsers[op](self, args, kw, c, tv) ||
      (!c->stream_given && c->torch_cuda && self->ctx->cuda && torch_current_stream(self->ctx->device, &c->stream))) {
    release_all(c);
    r = NULL;
  } else
    r = run(self, c, tv, iters, secs);
  PyMem_Free(c);
  return r;
}

#define OP_METHOD(fn, op) \
  PyObject *Bundle_##fn(BundleObject *self, PyObject *args, PyObject *kw) { return op_call(self, op, args, kw, 1, NULL); }
OP_METHOD(dequant_gather, OP_DEQUANT_GATHER)
OP_METHOD(paged_gather, OP_PAGED_GATHER)
OP_METHOD(kv_insert, OP_KV_INSERT)
OP_METHOD(sparse_decode, OP_SPARSE_DECODE)
OP_METHOD(paged_mqa_logits, OP_MQA_LOGITS)
OP_METHOD(topk, OP_TOPK)

int op_index(const char *name)
{
  for (int i = 0; i < OP_COUNT; i++)
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

