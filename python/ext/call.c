/* call.c -- one op call: the kernel it resolves to, the scalars every op
 * takes, a paged cache's geometry, and phases 2 and 3 (bind each tensor to
 * a device buffer, launch, copy outputs back, release). */
#include "ext.h"
static tview *slot(call *c, const char *name)
{
  tview *t = &c->t[c->nt++];
  memset(t, 0, sizeof *t);
  t->name = name;
  return t;
}

/* Take obj (required unless opt) as the call's tensor `name`; *out is NULL
 * when an optional one is absent. */
int tensor(call *c, CtxObject *ctx, PyObject *obj, const char *name, int cls, int use, int opt, tview **out)
{
  *out = NULL;
  if (!obj || obj == Py_None) {
    if (opt)
      return 0;
    PyErr_Format(PyExc_TypeError, "%s: a tensor is required", name);
    return -1;
  }
  tview *t = slot(c, name);
  *out = t;
  if (acquire(ctx, obj, cls, use, c->stream, t)) {
    name_exception(name); /* (CPython's own errors, e.g. from the buffer protocol) */
    return -1;
  }
  c->torch_cuda |= t->via_torch && t->device_type == DL_CUDA;
  return 0;
}

void release_all(call *c)
{
  for (int i = 0; i < c->nt; i++)
    release(&c->t[i]);
}

/* The entry a call of op runs (named kernel or the bundle's default), with
 * its layout and parameters: the shapes are checked against it.  The
 * runtime's own choice for an unnamed call may be the warp-matrix form of
 * the same layout, which has the same parameters. */
int resolve(BundleObject *self, call *c)
{
  int n = dsv4rt_bundle_count(self->b), named = 0, found = -1;
  if (!c->kernel && !c->want_topk && self->dflt[c->op] >= 0)
    found = self->dflt[c->op];
  for (int i = 0; found < 0 && i < n; i++) {
    const char *name, *op, *target, *arch;
    if (dsv4rt_bundle_entry(self->b, i, &name, &op, &target, &arch))
      continue;
    if (c->kernel && strcmp(name, c->kernel))
      continue;
    named = 1;
    dsv4rt_kernel_info ki;
    if (!strcmp(op, op_names[c->op]) && dsv4rt_bundle_entry_runs(self->b, i) &&
        (!c->want_topk || (!dsv4rt_bundle_entry_info(self->b, i, &ki) && ki.topk == c->want_topk)))
      found = i;
  }
  if (found < 0) {
    char m[512];
    if (c->kernel && !named)
      snprintf(m, sizeof m, "kernel: the bundle has no kernel named '%s' (%s)", c->kernel, op_names[c->op]);
    else if (c->kernel)
      snprintf(m, sizeof m, "kernel: the bundle's kernel '%s' is no %s kernel that runs on %s", c->kernel,
               op_names[c->op], dsv4rt_device_name(self->ctx->ctx));
    else if (c->want_topk)
      snprintf(m, sizeof m, "k: the bundle has no %s kernel of K %d that runs on %s", op_names[c->op], c->want_topk,
               dsv4rt_device_name(self->ctx->ctx));
    else
      snprintf(m, sizeof m, "%s: the bundle has no %s kernel that runs on %s", op_names[c->op], op_names[c->op],
               dsv4rt_device_name(self->ctx->ctx));
    raise_status(DSV4RT_ERR_NO_KERNEL, m);
    return -1;
  }
  if (!c->kernel && !c->want_topk)
    self->dflt[c->op] = found;
  c->entry = found;
  if (dsv4rt_bundle_entry_layout(self->b, found, &c->L) || dsv4rt_bundle_entry_info(self->b, found, &c->info)) {
    raise_status(DSV4RT_ERR_BUNDLE_FORMAT, dsv4rt_last_error(self->ctx->ctx));
    return -1;
  }
  return 0;
}

/* Bytes a token takes in a block of layout L (data row and scale row). */
int64_t token_bytes(const dsv4_layout *L) { return dsv4_layout_min_block_bytes(L, 1); }

/* A paged cache tensor: [num_blocks, block_size, ...token bytes] (block
 * stride from stride 0, block size from dim 1), or [num_blocks, block
 * bytes] with block_size given. */
int cache_geometry(const call *c, tview *t, PyObject *bs_arg, const char *bs_name, int64_t *nb, int64_t *bs,
                          int64_t *stride)
{
  int64_t tb = token_bytes(&c->L), given = -1;
  if (bs_arg && bs_arg != Py_None) {
    given = PyLong_AsLongLong(bs_arg);
    if (given == -1 && PyErr_Occurred()) {
      name_exception(bs_name);
      return -1;
    }
    if (given <= 0) {
      PyErr_Format(PyExc_ValueError, "%s: %lld is not a block size", bs_name, (long long)given);
      return -1;
    }
  }
  if (t->ndim < 2)
    return bad_shape(t, "[num_blocks, block_size, %lld bytes] or [num_blocks, block_bytes] (layout %s)", (long long)tb,
                     c->L.name);
  *nb = t->shape[0];
  *stride = t->strides[0] * t->itemsize;
  if (t->ndim == 2) {
    if (given < 0) {
      PyErr_Format(PyExc_ValueError, "%s: a [num_blocks, block_bytes] cache needs %s=", t->name, bs_name);
      return -1;
    }
    *bs = given;
    if (t->shape[0] > 0 && t->shape[1] > 1 && t->strides[1] != 1) {
      PyErr_Format(PyExc_ValueError, "%s: a block's bytes must be contiguous (stride(1) == 1, got %lld)", t->name,
                   (long long)t->strides[1]);
      return -1;
    }
    if (t->shape[0] > 0 && t->shape[1] * t->itemsize < given * tb)
      return bad_shape(t, "[num_blocks, >= %lld bytes]: %lld tokens of %lld bytes (layout %s)",
                       (long long)(given * tb), (long long)given, (long long)tb, c->L.name);
  } else {
    int64_t row = t->itemsize;
    for (int i = 2; i < t->ndim; i++)
      row *= t->shape[i];
    if (row != tb)
      return bad_shape(t, "[num_blocks, block_size, %lld bytes] (layout %s: %lld bytes a token)", (long long)tb,
                       c->L.name, (long long)tb);
    *bs = t->shape[1];
    if (given >= 0 && given != *bs) {
      PyErr_Format(PyExc_ValueError, "%s = %lld, but %s has %lld tokens a block (shape[1])", bs_name, (long long)given,
                   t->name, (long long)*bs);
      return -1;
    }
    if (!tail_contig(t, 2) || (t->shape[1] > 1 && t->strides[1] * t->itemsize != tb)) {
      char st[160];
      PyErr_Format(PyExc_ValueError, "%s: each token's %lld bytes must follow each other (stride(1) == %lld bytes, "
                   "trailing dims contiguous); strides %s (in elements)", t->name, (long long)tb, (long long)tb,
                   strides_str(t, st, sizeof st));
      return -1;
    }
  }
  if (*nb == 1 && t->ndim >= 2) /* a lone block's stride is not meaningful: its size */
    *stride = *stride < *bs * tb ? *bs * tb : *stride;
  if (*nb > 0 && (uint64_t)*nb * (uint64_t)(*stride > 0 ? *stride : 0) > t->span)
    t->need = (size_t)*nb * (size_t)*stride;
  return 0;
}

/* An output must not share memory with any other argument (the runtime
 * sees device copies on OpenCL, so this is checked on the host). */
int check_overlap(const call *c)
{
  for (int i = 0; i < c->nt; i++) {
    const tview *x = &c->t[i];
    if (x->use != USE_OUT || !x->span)
      continue;
    for (int j = 0; j < c->nt; j++) {
      const tview *y = &c->t[j];
      if (i == j || !y->span)
        continue;
      if (x->data < y->data + y->span && y->data < x->data + x->span) {
        PyErr_Format(PyExc_ValueError, "%s: shares memory with %s", x->name, y->name);
        return -1;
      }
    }
  }
  return 0;
}

/* OpenCL: every tensor's bytes into its device buffer (outputs too: rows
 * an op leaves alone keep their values).  CUDA: the buffers are the
 * tensors' own memory; nothing to do. */
static dsv4rt_status upload_all(CtxObject *ctx, call *c)
{
  dsv4rt_status s = DSV4RT_OK;
  for (int i = 0; i < c->nt && !s && !ctx->cuda; i++)
    if (c->t[i].span)
      s = dsv4rt_buffer_write(c->t[i].buf, 0, c->t[i].data, c->t[i].span);
  return s;
}

/* OpenCL: the outputs' device bytes back into the arrays. */
static dsv4rt_status download_outputs(CtxObject *ctx, call *c)
{
  dsv4rt_status s = DSV4RT_OK;
  for (int i = 0; i < c->nt && !s && !ctx->cuda; i++)
    if (c->t[i].use == USE_OUT && c->t[i].span)
      s = dsv4rt_buffer_read(c->t[i].buf, 0, c->t[i].data, c->t[i].span);
  return s;
}

/* Phase 2 (no GIL, context locked): device buffers for every tensor. */
dsv4rt_status bind_all(CtxObject *ctx, call *c)
{
  dsv4rt_status s = DSV4RT_OK;
  if (!ctx->scratch && (s = dsv4rt_buffer_create(ctx->ctx, 256, &ctx->scratch)))
    return s;
  for (int i = 0; i < c->nt && !s; i++) {
    tview *t = &c->t[i];
    size_t size = t->need > t->span ? t->need : t->span;
    if (!t->span) {
      t->buf = NULL;
      continue;
    }
    if (ctx->cuda)
      s = dsv4rt_buffer_wrap(ctx->ctx, (uint64_t)(uintptr_t)t->data, size, &t->buf);
    else
      s = dsv4rt_buffer_create(ctx->ctx, size, &t->buf);
  }
  return s;
}

void unbind_all(call *c)
{
  for (int i = 0; i < c->nt; i++) {
    dsv4rt_buffer_destroy(c->t[i].buf);
    c->t[i].buf = NULL;
  }
}

static dsv4rt_buffer *B(const CtxObject *ctx, const tview *t) { return !t ? NULL : t->buf ? t->buf : ctx->scratch; }

/* Fill the op's argument struct's buffers (after bind_all): each tensor's
 * field from the tensor in its ABI slot (NULL for an absent one). */
void fill_buffers(CtxObject *ctx, call *c, tview **tv)
{
  const op_def *d = &ops[c->op];
  for (int i = 0; i < d->ntensors; i++)
    *(dsv4rt_buffer **)((char *)&c->a + d->tensors[i].field) = B(ctx, tv[d->tensors[i].abi]);
}

static dsv4rt_status launch_once(BundleObject *self, call *c) { return ops[c->op].launch(self->b, &c->a, &c->opts); }

static double now_s(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Phase 2 for bound buffers (no GIL, the context's lock held): the stream
 * set, the tensors' bytes in (OpenCL), `iters` launches (*secs, when
 * given, their host seconds; the work then waited for, untimed), the
 * outputs back (OpenCL).  An op call and each prepared launch. */
dsv4rt_status launch_bound(BundleObject *self, call *c, uint64_t stream, long iters, double *secs)
{
  CtxObject *ctx = self->ctx;
  dsv4rt_status s = dsv4rt_set_stream(ctx->ctx, stream);
  if (!s)
    s = upload_all(ctx, c);
  double t0 = now_s();
  for (long i = 0; i < iters && !s; i++)
    s = launch_once(self, c);
  if (secs)
    *secs = now_s() - t0;
  if (!s && secs) /* the bench loop: wait for the work (not timed) */
    s = dsv4rt_synchronize(ctx->ctx);
  return s ? s : download_outputs(ctx, c);
}

/* Phases 2 and 3: bind, launch `iters` times (1 for an op call; the bench
 * loop times them, *secs the host seconds of the launches), copy outputs
 * back (OpenCL), unbind, release.  NULL with an exception, or Py_None. */
PyObject *run(BundleObject *self, call *c, tview **tv, long iters, double *secs)
{
  CtxObject *ctx = self->ctx;
  if (check_overlap(c)) {
    release_all(c);
    return NULL;
  }
  dsv4rt_status s;
  char msg[1024] = "";
  Py_BEGIN_ALLOW_THREADS
  PyThread_acquire_lock(ctx->lock, WAIT_LOCK);
  if (!self->b) { /* closed by another thread since the call was checked (Bundle.close takes this lock) */
    s = DSV4RT_ERR_INVALID_ARG;
    snprintf(msg, sizeof msg, "the bundle is closed");
  } else {
    s = bind_all(ctx, c);
    if (!s) {
      fill_buffers(ctx, c, tv);
      s = launch_bound(self, c, c->stream, iters, secs);
    }
    if (s)
      snprintf(msg, sizeof msg, "%s", dsv4rt_last_error(ctx->ctx));
    unbind_all(c);
  }
  PyThread_release_lock(ctx->lock);
  Py_END_ALLOW_THREADS
  release_all(c);
  if (s) {
    name_runtime_argument(c->op, s, msg, sizeof msg);
    return raise_status(s, msg);
  }
  Py_RETURN_NONE;
}

/* ---- argument parsing shared by the ops ---- */

int as_i64(PyObject *o, const char *name, int64_t dflt, int64_t *out)
{
  *out = dflt;
  if (!o || o == Py_None)
    return 0;
  long long v = PyLong_AsLongLong(o);
  if (v == -1 && PyErr_Occurred()) {
    name_exception(name);
    return -1;
  }
  *out = v;
  return 0;
}

/* The scalar arguments, converted here rather than by PyArg's format
 * codes, whose errors ("must be real number, not str") name no argument:
 * each refusal starts with the argument's name.  NULL: not given (dflt). */
int as_f32(PyObject *o, const char *name, float dflt, float *out)
{
  *out = dflt;
  if (!o)
    return 0;
  double v = PyFloat_AsDouble(o);
  if (v == -1.0 && PyErr_Occurred()) {
    name_exception(name);
    return -1;
  }
  *out = (float)v; /* out of float's range: inf, refused by the runtime as not finite */
  return 0;
}

int as_int(PyObject *o, const char *name, int dflt, int *out)
{
  int64_t v;
  if (as_i64(o, name, dflt, &v))
    return -1;
  if (v < INT32_MIN || v > INT32_MAX) {
    PyErr_Format(PyExc_ValueError, "%s: %lld is out of range", name, (long long)v);
    return -1;
  }
  *out = (int)v;
  return 0;
}

int as_flag(PyObject *o, const char *name, int *out)
{
  *out = 0;
  if (!o)
    return 0;
  int v = PyObject_IsTrue(o);
  if (v < 0) {
    name_exception(name);
    return -1;
  }
  *out = v;
  return 0;
}

/* kernel=: a kernel name or None (*out NULL). */
static int as_kernel(PyObject *o, const char **out)
{
  *out = NULL;
  if (!o || o == Py_None)
    return 0;
  if (!PyUnicode_Check(o)) {
    PyErr_Format(PyExc_TypeError, "kernel: expected a kernel name (str) or None, got %S", (PyObject *)Py_TYPE(o));
    return -1;
  }
  Py_ssize_t n;
  const char *k = PyUnicode_AsUTF8AndSize(o, &n);
  if (!k) {
    name_exception("kernel");
    return -1;
  }
  if ((Py_ssize_t)strlen(k) != n) {
    PyErr_SetString(PyExc_ValueError, "kernel: the name holds a NUL character");
    return -1;
  }
  *out = k;
  return 0;
}

/* stream=: None (the context's), an int handle, or an object with
 * .cuda_stream (torch.cuda.Stream). */
int parse_stream(CtxObject *ctx, PyObject *o, uint64_t *out)
{
  *out = ctx->stream;
  if (!o || o == Py_None)
    return 0;
  PyObject *h = NULL;
  if (PyLong_Check(o))
    h = (Py_INCREF(o), o);
  else if (PyObject_HasAttrString(o, "cuda_stream"))
    h = PyObject_GetAttrString(o, "cuda_stream");
  else {
    PyErr_Format(PyExc_TypeError, "stream: expected an int handle or an object with .cuda_stream, got %S",
                 (PyObject *)Py_TYPE(o));
    return -1;
  }
  uint64_t v;
  if (take_handle(h, &v)) {
    name_exception("stream");
    return -1;
  }
  if (v && !ctx->cuda) {
    PyErr_SetString(PyExc_ValueError, "stream: an OpenCL context has one queue; pass None or 0");
    return -1;
  }
  *out = v;
  return 0;
}

/* The arguments every op takes (kernel=, check_contents=, stream=), then
 * the entry the call resolves to. */
int begin_call(BundleObject *self, call *c, int op, PyObject *kernel_o, PyObject *cc_o, PyObject *stream)
{
  return begin_call_k(self, c, op, kernel_o, cc_o, stream, 0);
}

int begin_call_k(BundleObject *self, call *c, int op, PyObject *kernel_o, PyObject *cc_o, PyObject *stream, int k)
{
  memset(c, 0, sizeof *c);
  c->want_topk = k;
  const char *kernel;
  int check_contents;
  if (as_kernel(kernel_o, &kernel) || as_flag(cc_o, "check_contents", &check_contents))
    return -1;
  c->op = op, c->kernel = kernel;
  c->opts.kernel = kernel, c->opts.check_contents = check_contents;
  if (parse_stream(self->ctx, stream, &c->stream))
    return -1;
  c->stream_given = stream && stream != Py_None;
  return resolve(self, c);
}
