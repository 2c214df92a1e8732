/* bundle.c -- the Bundle type (its op methods are in ops.c) and the
 * Prepared type (Bundle._prepare: an op call checked and bound once). */
#include "ext.h"
/* ---- prepared calls ---- */

/* A call whose arguments were parsed, checked and bound once
 * (Bundle._prepare): each launch then costs the runtime's own call plus
 * the stream's lookup.  It holds its tensors (the kwargs dict, and on
 * OpenCL their buffer views) until closed or freed; their memory must stay
 * where it was (no resize_ / set_ on a torch tensor), as for a CUDA graph.
 * On OpenCL each launch copies the arrays' current bytes in and the
 * outputs back, as an op call does. */
typedef struct {
  PyObject_HEAD
  BundleObject *bundle;
  call *c; /* NULL once closed */
  tview *tv[DSV4_MAX_ARGS]; /* by kernel argument position */
  PyObject *keep;      /* the kwargs: what holds the tensors */
  PyObject *outputs; /* what a launch returns */
  int fixed_stream;  /* prepared with stream=: every launch goes there unless it names one */
  int torch_cuda;    /* else torch CUDA tensors: torch's current stream at each launch */
  int busy;          /* launches in flight in other threads (the GIL let go): close waits for none */
} PreparedObject;


static void Prepared_free_call(PreparedObject *self)
{
  if (!self->c)
    return;
  CtxObject *ctx = self->bundle->ctx;
  Py_BEGIN_ALLOW_THREADS
  PyThread_acquire_lock(ctx->lock, WAIT_LOCK);
  unbind_all(self->c);
  PyThread_release_lock(ctx->lock);
  Py_END_ALLOW_THREADS
  release_all(self->c);
  PyMem_Free(self->c);
  self->c = NULL;
}

/* _prepare(op, kwargs, outputs) -> Prepared */
static PyObject *Bundle_prepare(BundleObject *self, PyObject *args)
{
  const char *opname;
  PyObject *kw, *outputs;
  if (!PyArg_ParseTuple(args, "sO!O:_prepare", &opname, &PyDict_Type, &kw, &outputs))
    return NULL;
  int op = op_index(opname);
  if (op < 0)
    return NULL;
  if (!self->b) {
    PyErr_SetString(PyExc_ValueError, "the bundle is closed");
    return NULL;
  }
  PyObject *keep = PyDict_Copy(kw), *empty = PyTuple_New(0);
  PreparedObject *p = NULL;
  call *c = PyMem_Malloc(sizeof *c);
  if (!keep || !empty || !c) {
    Py_XDECREF(keep), Py_XDECREF(empty), PyMem_Free(c);
    return PyErr_NoMemory();
  }
  tview *tv[DSV4_MAX_ARGS] = {0};
  c->nt = 0;
  int bad = ops[op].parse(self, empty, keep, c, tv) || check_overlap(c);
  Py_DECREF(empty);
  if (!bad) {
    CtxObject *ctx = self->ctx;
    dsv4rt_status s;
    char msg[1024] = "";
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(ctx->lock, WAIT_LOCK);
    s = bind_all(ctx, c);
    if (s) {
      snprintf(msg, sizeof msg, "%s", dsv4rt_last_error(ctx->ctx));
      unbind_all(c);
    } else
      fill_buffers(ctx, c, tv);
    PyThread_release_lock(ctx->lock);
    Py_END_ALLOW_THREADS
    if (s) {
      name_runtime_argument(op, s, msg, sizeof msg);
      raise_status(s, msg);
      bad = 1;
    }
  }
  if (bad || !(p = PyObject_New(PreparedObject, (PyTypeObject *)PreparedType))) {
    release_all(c);
    PyMem_Free(c);
    Py_DECREF(keep);
    return NULL;
  }
  p->bundle = self, Py_INCREF((PyObject *)self);
  p->c = c, memcpy(p->tv, tv, sizeof tv);
  p->keep = keep;
  p->outputs = (Py_INCREF(outputs), outputs);
  p->fixed_stream = c->stream_given, p->busy = 0;
  p->torch_cuda = c->torch_cuda && self->ctx->cuda;
  return (PyObject *)p;
}

/* prepared(stream=None): launch; returns the outputs. */
static PyObject *Prepared_call(PreparedObject *self, PyObject *args, PyObject *kw)
{
  PyObject *so = NULL;
  if ((args && PyTuple_Size(args)) || (kw && PyDict_Size(kw))) {
    static char *kwl[] = {"stream", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|O:Prepared", kwl, &so))
      return NULL;
  }
  if (!self->c) {
    PyErr_SetString(PyExc_ValueError, "the prepared call is closed");
    return NULL;
  }
  BundleObject *b = self->bundle;
  CtxObject *ctx = b->ctx;
  call *c = self->c;
  uint64_t stream = ctx->stream;
  if (so && so != Py_None) {
    if (parse_stream(ctx, so, &stream))
      return NULL;
  } else if (self->fixed_stream)
    stream = c->stream;
  else if (self->torch_cuda && torch_current_stream(ctx->device, &stream))
    return NULL;
  dsv4rt_status s;
  char msg[1024] = "";
  self->busy++;
  Py_BEGIN_ALLOW_THREADS
  PyThread_acquire_lock(ctx->lock, WAIT_LOCK);
  if (!b->b) {
    s = DSV4RT_ERR_INVALID_ARG;
    snprintf(msg, sizeof msg, "the bundle is closed");
  } else {
    s = launch_bound(b, c, stream, 1, NULL);
    if (s)
      snprintf(msg, sizeof msg, "%s", dsv4rt_last_error(ctx->ctx));
  }
  PyThread_release_lock(ctx->lock);
  Py_END_ALLOW_THREADS
  self->busy--;
  if (s) {
    name_runtime_argument(c->op, s, msg, sizeof msg);
    return raise_status(s, msg);
  }
  Py_INCREF(self->outputs);
  return self->outputs;
}

static PyObject *Prepared_close(PreparedObject *self, PyObject *unused)
{
  (void)unused;
  if (self->busy) { /* another thread is launching it: its call must not lose its buffers under it */
    PyErr_SetString(PyExc_RuntimeError, "the prepared call is being launched in another thread; close it after");
    return NULL;
  }
  Prepared_free_call(self);
  Py_CLEAR(self->keep);
  Py_RETURN_NONE;
}

static void Prepared_dealloc(PreparedObject *self)
{
  Prepared_free_call(self);
  Py_XDECREF(self->keep), Py_XDECREF(self->outputs);
  Py_XDECREF((PyObject *)self->bundle);
  free_self((PyObject *)self);
}

static PyObject *Prepared_get_outputs(PreparedObject *self, void *unused)
{
  (void)unused;
  Py_INCREF(self->outputs);
  return self->outputs;
}

static PyObject *Prepared_get_op(PreparedObject *self, void *unused)
{
  (void)unused;
  if (!self->c)
    Py_RETURN_NONE;
  return PyUnicode_FromString(op_names[self->c->op]);
}

static PyMethodDef Prepared_methods[] = {
    {"close", (PyCFunction)Prepared_close, METH_NOARGS, "close(): unbind and let go of the tensors now"},
    {NULL, NULL, 0, NULL},
};
static PyGetSetDef Prepared_getset[] = {
    {"outputs", (getter)Prepared_get_outputs, NULL, "what each launch returns (the op's outputs)", NULL},
    {"op", (getter)Prepared_get_op, NULL, "the op (None once closed)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
static PyType_Slot Prepared_slots[] = {
    {Py_tp_dealloc, (void *)Prepared_dealloc},
    {Py_tp_call, (void *)Prepared_call},
    {Py_tp_doc, (void *)"An op call checked and bound once (Bundle.prepare); call it (stream=None) to launch."},
    {Py_tp_methods, Prepared_methods},
    {Py_tp_getset, Prepared_getset},
    {0, NULL},
};
PyType_Spec Prepared_spec = {"dsv4c._dsv4c.Prepared", sizeof(PreparedObject), 0, Py_TPFLAGS_DEFAULT,
                            Prepared_slots};


/* ---- Bundle ---- */

static PyObject *info_dict(BundleObject *self, int i)
{
  const char *name, *op, *target, *arch;
  dsv4_layout L;
  dsv4rt_kernel_info k;
  char code[65];
  if (dsv4rt_bundle_entry(self->b, i, &name, &op, &target, &arch) || dsv4rt_bundle_entry_layout(self->b, i, &L) ||
      dsv4rt_bundle_entry_info(self->b, i, &k) || dsv4rt_bundle_entry_code_hash(self->b, i, code))
    return raise_status(DSV4RT_ERR_BUNDLE_FORMAT, dsv4rt_last_error(self->ctx->ctx));
  return Py_BuildValue("{s:s,s:s,s:s,s:s,s:s,s:O,s:s,s:i,s:L,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i}",
                       "name", name,
                       "op", op, "target", target, "arch", arch, "code", code, "runs",
                       dsv4rt_bundle_entry_runs(self->b, i) ? Py_True : Py_False, "layout", L.name, "dim", L.dim,
                       "token_bytes", (long long)token_bytes(&L), "block_tokens", L.block_tokens, "block_stride",
                       L.block_stride, "threads", k.threads, "v_dim", k.v_dim, "heads", k.heads, "topk", k.topk,
                       "q_dim", k.q_dim, "rope_first", k.rope_first, "rope_dims", k.rope_dims, "matrix", k.matrix,
                       "quant_floor", k.quant_floor);
}

/* entries(): one dict per (kernel, target) entry. */
static PyObject *Bundle_entries(BundleObject *self, PyObject *unused)
{
  (void)unused;
  if (!self->b) {
    PyErr_SetString(PyExc_ValueError, "the bundle is closed");
    return NULL;
  }
  int n = dsv4rt_bundle_count(self->b);
  PyObject *list = PyList_New(0);
  for (int i = 0; list && i < n; i++) {
    PyObject *d = info_dict(self, i);
    if (!d || PyList_Append(list, d)) {
      Py_XDECREF(d);
      Py_CLEAR(list);
      break;
    }
    Py_DECREF(d);
  }
  return list;
}

/* op_info(op, kernel=None): the entry a call of op would check its
 * shapes against (dict as entries()). */
static PyObject *Bundle_op_info(BundleObject *self, PyObject *args)
{
  const char *opname, *kernel = NULL;
  if (!PyArg_ParseTuple(args, "s|z:op_info", &opname, &kernel))
    return NULL;
  if (!self->b) {
    PyErr_SetString(PyExc_ValueError, "the bundle is closed");
    return NULL;
  }
  int op = op_index(opname);
  if (op < 0)
    return NULL;
  call c;
  memset(&c, 0, sizeof c);
  c.op = op, c.kernel = kernel;
  if (resolve(self, &c))
    return NULL;
  return info_dict(self, c.entry);
}

/* close(): the bundle destroyed and self->b cleared under the context's
 * lock, so a call in another thread (which reads self->b under that lock,
 * the GIL let go: run(), Prepared_call) sees either the bundle or NULL,
 * never a destroyed one.  The GIL is held throughout: the calls that read
 * self->b with the GIL (their argument checks) cannot run meanwhile. */
static PyObject *Bundle_close(BundleObject *self, PyObject *unused)
{
  (void)unused;
  if (self->b) {
    PyThread_acquire_lock(self->ctx->lock, WAIT_LOCK);
    dsv4rt_bundle *b = self->b;
    self->b = NULL;
    dsv4rt_bundle_destroy(b);
    PyThread_release_lock(self->ctx->lock);
  }
  Py_RETURN_NONE;
}

/* tuned_kernel(op, dims): the kernel the loaded tuning (a lockfile, or
 * the bundle's own choice records) chooses for an unnamed call of op with
 * these dims (dsv4rt_bundle_tuned_kernel), or None when none covers their
 * bucket and the default rule applies. */
static PyObject *Bundle_tuned_kernel(BundleObject *self, PyObject *args)
{
  static const char *const dim_names[DSV4_OP_COUNT] = {
      [DSV4_OP_DEQUANT_GATHER] = "n: indices.size",
      [DSV4_OP_PAGED_GATHER] = "R: len(seq_lens)",
      [DSV4_OP_KV_INSERT] = "N: kv.shape[0]",
      [DSV4_OP_SPARSE_DECODE] = "T, H, topk, extra_topk, extra_block_size",
      [DSV4_OP_PAGED_MQA_LOGITS] = "B, next_n, row_len",
      [DSV4_OP_TOPK] = "rows: logits.shape[0]",
      [DSV4_OP_PAGED_MQA_LOGITS_TOPK] = "B, next_n, row_len, K",
  };
  static const int ndims[DSV4_OP_COUNT] = {[DSV4_OP_DEQUANT_GATHER] = 1,   [DSV4_OP_PAGED_GATHER] = 1,
                                           [DSV4_OP_KV_INSERT] = 1,        [DSV4_OP_SPARSE_DECODE] = 5,
                                           [DSV4_OP_PAGED_MQA_LOGITS] = 3, [DSV4_OP_TOPK] = 1,
                                           [DSV4_OP_PAGED_MQA_LOGITS_TOPK] = 4};
  PyObject *op_o, *dims_o;
  if (!PyArg_ParseTuple(args, "OO:tuned_kernel", &op_o, &dims_o))
    return NULL;
  const char *opname = PyUnicode_Check(op_o) ? PyUnicode_AsUTF8AndSize(op_o, NULL) : NULL;
  int op = -1;
  for (int i = 1; opname && i < DSV4_OP_COUNT; i++)
    if (!strcmp(opname, op_names[i]))
      op = i;
  if (op < 0) {
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError, "op: %R is no op (one of dequant_gather, paged_gather, kv_insert, sparse_decode, "
                 "paged_mqa_logits, topk)", op_o);
    return NULL;
  }
  int64_t dims[8];
  PyObject *seq = PyLong_Check(dims_o) ? PyTuple_Pack(1, dims_o) : PySequence_Tuple(dims_o);
  if (!seq) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "dims: expected a sequence of ints (%s), got %S", dim_names[op],
                 (PyObject *)Py_TYPE(dims_o));
    return NULL;
  }
  Py_ssize_t n = PyTuple_Size(seq);
  if (n != ndims[op]) {
    PyErr_Format(PyExc_ValueError, "dims: %s takes %d dim%s (%s), got %zd", op_names[op], ndims[op],
                 ndims[op] > 1 ? "s" : "", dim_names[op], n);
    Py_DECREF(seq);
    return NULL;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    long long v = PyLong_AsLongLong(PyTuple_GetItem(seq, i));
    if (v == -1 && PyErr_Occurred()) {
      Py_DECREF(seq);
      name_exception("dims");
      return NULL;
    }
    if (v < 0) {
      Py_DECREF(seq);
      PyErr_Format(PyExc_ValueError, "dims: dim %zd (of %s) is %lld, below 0", i, dim_names[op], v);
      return NULL;
    }
    dims[i] = v;
  }
  Py_DECREF(seq);
  if (!self->b) {
    PyErr_SetString(PyExc_ValueError, "the bundle is closed");
    return NULL;
  }
  const char *k = dsv4rt_bundle_tuned_kernel(self->b, op_names[op], dims, (int)n);
  if (!k)
    Py_RETURN_NONE;
  return PyUnicode_FromString(k);
}

/* load_tuning(path): the runtime's dsv4rt_bundle_load_tuning (a dsv4c-tune
 * lockfile: unnamed calls then run its winner for their shape bucket).
 * A stale entry raises dsv4c.Error (ERR_STALE_TUNING) naming it, after the
 * fresh entries were loaded. */
static PyObject *Bundle_load_tuning(BundleObject *self, PyObject *args)
{
  const char *path;
  if (!PyArg_ParseTuple(args, "s", &path))
    return NULL;
  if (!self->b)
    return raise_status(DSV4RT_ERR_INVALID_ARG, "load_tuning: the bundle is closed");
  dsv4rt_status s;
  char msg[1024] = "";
  PyThread_acquire_lock(self->ctx->lock, WAIT_LOCK);
  s = dsv4rt_bundle_load_tuning(self->b, path);
  if (s)
    snprintf(msg, sizeof msg, "%s", dsv4rt_last_error(self->ctx->ctx));
  PyThread_release_lock(self->ctx->lock);
  if (s)
    return raise_status(s, msg);
  Py_RETURN_NONE;
}

/* A heap type's instance: free it and drop its reference to the type. */
void free_self(PyObject *self)
{
  PyTypeObject *tp = Py_TYPE(self);
  freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
  f(self);
  Py_DECREF(tp);
}

static void Bundle_dealloc(BundleObject *self)
{
  Py_XDECREF(Bundle_close(self, NULL));
  Py_XDECREF((PyObject *)self->ctx);
  free_self((PyObject *)self);
}

static PyMethodDef Bundle_methods[] = {
    {"dequant_gather", (PyCFunction)(void (*)(void))Bundle_dequant_gather, METH_VARARGS | METH_KEYWORDS,
     "dequant_gather(out, cache, indices, block_size=None, tensor_scale=1.0, kernel=None, check_contents=False, "
     "stream=None)"},
    {"paged_gather", (PyCFunction)(void (*)(void))Bundle_paged_gather, METH_VARARGS | METH_KEYWORDS,
     "paged_gather(out, cache, seq_lens, block_table, gather_lens=None, offset=0, block_size=None, tensor_scale=1.0, "
     "kernel=None, check_contents=False, stream=None)"},
    {"kv_insert", (PyCFunction)(void (*)(void))Bundle_kv_insert, METH_VARARGS | METH_KEYWORDS,
     "kv_insert(cache, kv, slot_mapping, positions=None, cos_sin=None, q=None, q_out=None, eps=1e-6, block_size=None, "
     "kernel=None, check_contents=False, stream=None)"},
    {"sparse_decode", (PyCFunction)(void (*)(void))Bundle_sparse_decode, METH_VARARGS | METH_KEYWORDS,
     "sparse_decode(out, lse, q, cache, indices, lens, softmax_scale, extra_cache=None, extra_indices=None, "
     "extra_lens=None, attn_sink=None, tensor_scale=1.0, block_size=None, extra_block_size=None, splits=0, "
     "kernel=None, check_contents=False, stream=None)"},
    {"paged_mqa_logits", (PyCFunction)(void (*)(void))Bundle_paged_mqa_logits, METH_VARARGS | METH_KEYWORDS,
     "paged_mqa_logits(logits, q, cache, weights, context_lens, block_table, block_size=None, kernel=None, "
     "check_contents=False, stream=None, no_tensor_maps=False)"},
    {"topk", (PyCFunction)(void (*)(void))Bundle_topk, METH_VARARGS | METH_KEYWORDS,
     "topk(out, logits, context_lens, kernel=None, check_contents=False, stream=None)"},
    {"paged_mqa_logits_topk", (PyCFunction)(void (*)(void))Bundle_paged_mqa_logits_topk, METH_VARARGS | METH_KEYWORDS,
     "paged_mqa_logits_topk(out, q, cache, weights, context_lens, block_table, row_len, block_size=None, "
     "kernel=None, check_contents=False, stream=None, no_tensor_maps=False, k=0)"},
    {"_prepare", (PyCFunction)Bundle_prepare, METH_VARARGS,
     "_prepare(op, kwargs, outputs) -> Prepared: the op's arguments checked and bound once"},
    {"_bench_c_loop", (PyCFunction)Bundle_bench_c_loop, METH_VARARGS,
     "_bench_c_loop(op, iters, kwargs) -> host seconds per runtime call, the arguments taken once"},
    {"entries", (PyCFunction)Bundle_entries, METH_NOARGS, "entries() -> one dict per (kernel, target) entry"},
    {"op_info", (PyCFunction)Bundle_op_info, METH_VARARGS, "op_info(op, kernel=None) -> the entry a call resolves to"},
    {"close", (PyCFunction)Bundle_close, METH_NOARGS, "close(): free the bundle now"},
    {"load_tuning", (PyCFunction)Bundle_load_tuning, METH_VARARGS,
     "load_tuning(path): a dsv4c-tune lockfile; unnamed calls run its winner for their shape"},
    {"tuned_kernel", (PyCFunction)Bundle_tuned_kernel, METH_VARARGS,
     "tuned_kernel(op, dims) -> the kernel tuning chooses for an unnamed call with these dims, or None"},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot Bundle_slots[] = {
    {Py_tp_dealloc, (void *)Bundle_dealloc},
    {Py_tp_doc, (void *)"A bundle opened on a context (Context.open_bundle)."},
    {Py_tp_methods, Bundle_methods},
    {0, NULL},
};
PyType_Spec Bundle_spec = {"dsv4c._dsv4c.Bundle", sizeof(BundleObject), 0, Py_TPFLAGS_DEFAULT, Bundle_slots};

