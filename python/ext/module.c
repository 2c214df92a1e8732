/* module.c -- dsv4c._dsv4c, the CPython extension behind the dsv4c package:
 * libdsv4rt's contexts, bundles and ops, called with tensors.
 *
 * A call runs in three phases (docs/python.md):
 *   1. with the GIL: parse the arguments, take each tensor through DLPack
 *      (__dlpack__), __cuda_array_interface__, the buffer protocol or
 *      __array_interface__, and check dtype, device, shape, strides and
 *      contiguity against the kernel the call will run; any refusal is a
 *      TypeError or ValueError naming the argument, before any device work;
 *   2. without the GIL, holding the context's lock (a dsv4rt context is not
 *      thread-safe): wrap the device pointers (CUDA) or copy the host arrays
 *      into device buffers (OpenCL), set the stream, launch, copy outputs
 *      back (OpenCL), free the wrappers;
 *   3. with the GIL: release the tensors (DLPack deleters, buffer views)
 *      and raise dsv4c.Error for a runtime status.
 * ext.h names the other files: tensor intake (tensor.c, torch.c), one
 * call (call.c), each op's arguments (ops.c), the Bundle and Prepared
 * types (bundle.c), the exceptions (errors.c). */
#include "ext.h"

PyObject *CtxType, *BundleType, *PreparedType;

/* ---- Context ---- */

static int Ctx_init(CtxObject *self, PyObject *args, PyObject *kw)
{
  static char *kwl[] = {"backend", "device", NULL};
  int backend = DSV4RT_BACKEND_AUTO, device = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|ii:Context", kwl, &backend, &device))
    return -1;
  if (self->ctx) {
    PyErr_SetString(PyExc_RuntimeError, "Context already initialised");
    return -1;
  }
  dsv4rt_status s;
  char msg[1024];
  dsv4rt_context *ctx = NULL;
  Py_BEGIN_ALLOW_THREADS
  s = dsv4rt_context_create((dsv4rt_backend)backend, device, &ctx);
  if (s)
    snprintf(msg, sizeof msg, "%s", dsv4rt_last_error(NULL));
  Py_END_ALLOW_THREADS
  if (s) {
    raise_status(s, msg);
    return -1;
  }
  self->lock = PyThread_allocate_lock();
  if (!self->lock) {
    dsv4rt_context_destroy(ctx);
    PyErr_NoMemory();
    return -1;
  }
  self->ctx = ctx;
  dsv4rt_backend be = dsv4rt_context_backend(ctx);
  self->cuda = be == DSV4RT_BACKEND_CUDA || be == DSV4RT_BACKEND_HIP;
  self->dl = be == DSV4RT_BACKEND_CUDA ? DL_CUDA : be == DSV4RT_BACKEND_HIP ? DL_ROCM : 0;
  self->device = device;
  return 0;
}

static void Ctx_dealloc(CtxObject *self)
{
  dsv4rt_buffer_destroy(self->scratch);
  dsv4rt_context_destroy(self->ctx);
  if (self->lock)
    PyThread_free_lock(self->lock);
  free_self((PyObject *)self);
}

static int ready(CtxObject *self)
{
  if (!self->ctx)
    PyErr_SetString(PyExc_ValueError, "Context is not initialised");
  return self->ctx != NULL;
}

static PyObject *new_bundle(CtxObject *self, const char *path, const void *data, size_t size)
{
  dsv4rt_status s;
  char msg[1024];
  dsv4rt_bundle *b = NULL;
  Py_BEGIN_ALLOW_THREADS
  PyThread_acquire_lock(self->lock, WAIT_LOCK);
  s = path ? dsv4rt_bundle_open(self->ctx, path, &b) : dsv4rt_bundle_open_memory(self->ctx, data, size, &b);
  if (s)
    snprintf(msg, sizeof msg, "%s", dsv4rt_last_error(self->ctx));
  PyThread_release_lock(self->lock);
  Py_END_ALLOW_THREADS
  if (s)
    return raise_status(s, msg);
  BundleObject *o = PyObject_New(BundleObject, (PyTypeObject *)BundleType);
  if (!o) {
    dsv4rt_bundle_destroy(b);
    return NULL;
  }
  o->b = b;
  o->ctx = self;
  Py_INCREF((PyObject *)self);
  for (int i = 0; i < DSV4_OP_COUNT; i++)
    o->dflt[i] = -1;
  return (PyObject *)o;
}

static PyObject *Ctx_open_bundle(CtxObject *self, PyObject *args)
{
  PyObject *path;
  if (!ready(self) || !PyArg_ParseTuple(args, "O&:open_bundle", PyUnicode_FSConverter, &path))
    return NULL;
  PyObject *r = new_bundle(self, PyBytes_AsString(path), NULL, 0);
  Py_DECREF(path);
  return r;
}

static PyObject *Ctx_open_bundle_bytes(CtxObject *self, PyObject *args)
{
  Py_buffer data;
  if (!ready(self) || !PyArg_ParseTuple(args, "y*:open_bundle_bytes", &data))
    return NULL;
  PyObject *r = new_bundle(self, NULL, data.buf, (size_t)data.len);
  PyBuffer_Release(&data);
  return r;
}

static PyObject *Ctx_synchronize(CtxObject *self, PyObject *unused)
{
  (void)unused;
  if (!ready(self))
    return NULL;
  dsv4rt_status s;
  char msg[1024];
  Py_BEGIN_ALLOW_THREADS
  PyThread_acquire_lock(self->lock, WAIT_LOCK);
  s = dsv4rt_synchronize(self->ctx);
  if (s)
    snprintf(msg, sizeof msg, "%s", dsv4rt_last_error(self->ctx));
  PyThread_release_lock(self->lock);
  Py_END_ALLOW_THREADS
  if (s)
    return raise_status(s, msg);
  Py_RETURN_NONE;
}

static PyObject *Ctx_get_backend(CtxObject *self, void *unused)
{
  (void)unused;
  return ready(self) ? PyUnicode_FromString(dsv4rt_backend_name(dsv4rt_context_backend(self->ctx))) : NULL;
}
static PyObject *Ctx_get_device_name(CtxObject *self, void *unused)
{
  (void)unused;
  return ready(self) ? PyUnicode_FromString(dsv4rt_device_name(self->ctx)) : NULL;
}
static PyObject *Ctx_get_device(CtxObject *self, void *unused)
{
  (void)unused;
  return PyLong_FromLong(self->device);
}
static PyObject *Ctx_get_stream(CtxObject *self, void *unused)
{
  (void)unused;
  return PyLong_FromUnsignedLongLong(self->stream);
}
static int Ctx_set_stream(CtxObject *self, PyObject *v, void *unused)
{
  (void)unused;
  if (!v) {
    PyErr_SetString(PyExc_TypeError, "stream cannot be deleted");
    return -1;
  }
  uint64_t s, old = self->stream;
  if (!ready(self))
    return -1;
  self->stream = 0; /* (None sets 0) */
  if (parse_stream(self, v, &s)) {
    self->stream = old;
    return -1;
  }
  self->stream = s;
  return 0;
}

static PyMethodDef Ctx_methods[] = {
    {"open_bundle", (PyCFunction)Ctx_open_bundle, METH_VARARGS, "open_bundle(path) -> Bundle"},
    {"open_bundle_bytes", (PyCFunction)Ctx_open_bundle_bytes, METH_VARARGS, "open_bundle_bytes(data) -> Bundle"},
    {"synchronize", (PyCFunction)Ctx_synchronize, METH_NOARGS, "synchronize(): wait for all queued work"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Ctx_getset[] = {
    {"backend", (getter)Ctx_get_backend, NULL, "'cuda', 'hip' or 'opencl'", NULL},
    {"device_name", (getter)Ctx_get_device_name, NULL, "the device's description", NULL},
    {"device", (getter)Ctx_get_device, NULL, "the device index", NULL},
    {"stream", (getter)Ctx_get_stream, (setter)Ctx_set_stream,
     "the CUDA stream handle calls without stream= launch on (0: the legacy default stream)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot Ctx_slots[] = {
    {Py_tp_dealloc, (void *)Ctx_dealloc},
    {Py_tp_doc, (void *)"Context(backend=0, device=0): a libdsv4rt context (backend 0 auto, 1 CUDA, 2 OpenCL)."},
    {Py_tp_methods, Ctx_methods},
    {Py_tp_getset, Ctx_getset},
    {Py_tp_init, (void *)Ctx_init},
    {Py_tp_new, (void *)PyType_GenericNew},
    {0, NULL},
};
static PyType_Spec Ctx_spec = {"dsv4c._dsv4c.Context", sizeof(CtxObject), 0, Py_TPFLAGS_DEFAULT, Ctx_slots};


/* ---- module ---- */

static PyMethodDef mod_methods[] = {
    {"_op_table", (PyCFunction)op_table, METH_NOARGS,
     "_op_table() -> each op's tensors and runtime-made buffers with their DSV4_ARGS_<OP> positions (ops.c)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {
    PyModuleDef_HEAD_INIT, "_dsv4c", "libdsv4rt bindings (use the dsv4c package).", -1, mod_methods, NULL, NULL, NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__dsv4c(void)
{
  if (!CtxType && !(CtxType = PyType_FromSpec(&Ctx_spec)))
    return NULL;
  if (!BundleType && !(BundleType = PyType_FromSpec(&Bundle_spec)))
    return NULL;
  if (!PreparedType && !(PreparedType = PyType_FromSpec(&Prepared_spec)))
    return NULL;
  PyObject *m = PyModule_Create(&moddef);
  if (!m)
    return NULL;
  Error = PyErr_NewExceptionWithDoc("dsv4c.Error",
                                    "A libdsv4rt status: .status (the code), .status_name, and the runtime's message.",
                                    PyExc_RuntimeError, NULL);
  PyObject *bases = Error ? PyTuple_Pack(2, Error, PyExc_ValueError) : NULL;
  ArgumentError = bases ? PyErr_NewExceptionWithDoc("dsv4c.ArgumentError",
                                                    "A runtime refusal of an argument (range, alignment, aliasing, "
                                                    "contents): a dsv4c.Error and a ValueError.",
                                                    bases, NULL)
                        : NULL;
  Py_XDECREF(bases);
  if (!ArgumentError || PyModule_AddObjectRef(m, "Error", Error) ||
      PyModule_AddObjectRef(m, "ArgumentError", ArgumentError) ||
      PyModule_AddObjectRef(m, "Context", CtxType) || PyModule_AddObjectRef(m, "Bundle", BundleType) ||
      PyModule_AddObjectRef(m, "Prepared", PreparedType)) {
    Py_DECREF(m);
    return NULL;
  }
  static const struct {
    const char *name;
    int v;
  } consts[] = {
      {"BACKEND_AUTO", DSV4RT_BACKEND_AUTO},
      {"BACKEND_CUDA", DSV4RT_BACKEND_CUDA},
      {"BACKEND_OPENCL", DSV4RT_BACKEND_OPENCL},
      {"BACKEND_HIP", DSV4RT_BACKEND_HIP},
      {"OK", DSV4RT_OK},
      {"ERR_INVALID_ARG", DSV4RT_ERR_INVALID_ARG},
      {"ERR_NO_BACKEND", DSV4RT_ERR_NO_BACKEND},
      {"ERR_BUNDLE_FORMAT", DSV4RT_ERR_BUNDLE_FORMAT},
      {"ERR_BUNDLE_VERSION", DSV4RT_ERR_BUNDLE_VERSION},
      {"ERR_NO_KERNEL", DSV4RT_ERR_NO_KERNEL},
      {"ERR_BACKEND", DSV4RT_ERR_BACKEND},
      {"ERR_OUT_OF_MEMORY", DSV4RT_ERR_OUT_OF_MEMORY},
      {"ERR_IO", DSV4RT_ERR_IO},
      {"ERR_NULL_ARG", DSV4RT_ERR_NULL_ARG},
      {"ERR_WRONG_CONTEXT", DSV4RT_ERR_WRONG_CONTEXT},
      {"ERR_BUFFER_TOO_SMALL", DSV4RT_ERR_BUFFER_TOO_SMALL},
      {"ERR_OUT_OF_RANGE", DSV4RT_ERR_OUT_OF_RANGE},
      {"ERR_MISALIGNED", DSV4RT_ERR_MISALIGNED},
      {"ERR_ALIASING", DSV4RT_ERR_ALIASING},
      {"ERR_NOT_FINITE", DSV4RT_ERR_NOT_FINITE},
      {"ERR_BAD_CONTENTS", DSV4RT_ERR_BAD_CONTENTS},
  };
  for (size_t i = 0; i < sizeof consts / sizeof *consts; i++)
    if (PyModule_AddIntConstant(m, consts[i].name, consts[i].v)) {
      Py_DECREF(m);
      return NULL;
    }
  return m;
}

