/* torch.c -- torch tensors, read directly, and torch's current stream.
 *
 * torch.Tensor.__dlpack__ is Python code (argument checks, stream objects,
 * a capsule) that costs about 12 us a tensor, ten times a whole launch in
 * C: a torch tensor is read through its own accessors instead (data_ptr(),
 * shape, stride(), dtype, is_cuda / get_device()), the facts DLPack would
 * carry.  Only where torch is already imported; docs/python.md. */
#include "ext.h"

PyObject *torch_tensor;           /* torch.Tensor, once torch is imported */
static PyObject *torch_stream_fn; /* torch._C._cuda_getCurrentRawStream (device -> handle), where torch has it */
static PyObject *torch_module;
static PyObject *torch_dtypes; /* torch dtype -> code << 8 | bits */
/* the accessors' names, interned once (a str made per call costs as much as the call) */
static PyObject *s_is_cuda, *s_get_device, *s_dtype, *s_shape, *s_stride, *s_data_ptr;

int torch_ready(void)
{
  if (torch_tensor)
    return 1;
  PyObject *torch = PyDict_GetItemString(PyImport_GetModuleDict(), "torch"); /* borrowed; NULL: not imported */
  if (!torch)
    return 0;
  static const struct {
    const char *name;
    int code, bits;
  } dts[] = {
      {"bfloat16", DL_BFLOAT, 16},        {"float16", DL_FLOAT, 16},          {"float32", DL_FLOAT, 32},
      {"float64", DL_FLOAT, 64},          {"int8", DL_INT, 8},                {"int16", DL_INT, 16},
      {"int32", DL_INT, 32},              {"int64", DL_INT, 64},              {"uint8", DL_UINT, 8},
      {"uint16", DL_UINT, 16},            {"uint32", DL_UINT, 32},            {"uint64", DL_UINT, 64},
      {"bool", DL_BOOL, 8},               {"float8_e4m3fn", DL_F8_E4M3FN, 8}, {"float8_e5m2", DL_F8_E5M2, 8},
      {"float8_e4m3fnuz", DL_F8_E4M3FNUZ, 8}, {"float8_e5m2fnuz", DL_F8_E5M2FNUZ, 8},
      {"float8_e8m0fnu", DL_F8_E8M0FNU, 8},
  };
  PyObject *type = PyObject_GetAttrString(torch, "Tensor"), *map = PyDict_New();
  for (size_t i = 0; type && map && i < sizeof dts / sizeof *dts; i++) {
    PyObject *dt = PyObject_GetAttrString(torch, dts[i].name), *v = PyLong_FromLong(dts[i].code << 8 | dts[i].bits);
    if (dt && v)
      PyDict_SetItem(map, dt, v);
    Py_XDECREF(dt), Py_XDECREF(v);
  }
  PyErr_Clear(); /* (a torch still importing, or one without some dtype) */
  if (!type || !map || !PyType_Check(type) || !(s_is_cuda = PyUnicode_InternFromString("is_cuda")) ||
      !(s_get_device = PyUnicode_InternFromString("get_device")) || !(s_dtype = PyUnicode_InternFromString("dtype")) ||
      !(s_shape = PyUnicode_InternFromString("shape")) || !(s_stride = PyUnicode_InternFromString("stride")) ||
      !(s_data_ptr = PyUnicode_InternFromString("data_ptr"))) {
    Py_XDECREF(type), Py_XDECREF(map);
    PyErr_Clear();
    return 0;
  }
  torch_tensor = type, torch_dtypes = map;
  PyObject *tc = PyObject_GetAttrString(torch, "_C");
  torch_stream_fn = tc ? PyObject_GetAttrString(tc, "_cuda_getCurrentRawStream") : NULL;
  Py_XDECREF(tc);
  PyErr_Clear();
  torch_module = torch, Py_INCREF(torch);
  return 1;
}

/* A stream handle h (a new reference, taken; NULL: an error is set) as an
 * unsigned 64-bit value into *out; -1 with the error set. */
int take_handle(PyObject *h, uint64_t *out)
{
  if (!h)
    return -1;
  unsigned long long v = PyLong_AsUnsignedLongLong(h);
  Py_DECREF(h);
  if (v == (unsigned long long)-1 && PyErr_Occurred())
    return -1;
  *out = v;
  return 0;
}

/* torch's current stream of CUDA device `device` (its raw handle): the stream
 * a call on torch CUDA tensors launches on when it names none, as a torch op
 * would (docs/python.md, Streams). */
int torch_current_stream(int device, uint64_t *out)
{
  PyObject *d = PyLong_FromLong(device), *h = NULL;
  if (!d)
    return -1;
  if (torch_stream_fn)
    h = PyObject_CallFunctionObjArgs(torch_stream_fn, d, NULL);
  else { /* a torch without the raw accessor: torch.cuda.current_stream(d).cuda_stream */
    PyObject *cu = PyObject_GetAttrString(torch_module, "cuda");
    PyObject *st = cu ? PyObject_CallMethod(cu, "current_stream", "O", d) : NULL;
    h = st ? PyObject_GetAttrString(st, "cuda_stream") : NULL;
    Py_XDECREF(cu), Py_XDECREF(st);
  }
  Py_DECREF(d);
  return take_handle(h, out);
}

/* A tuple of ints into v (n of them, at most MAXDIM). */
static int int_tuple(PyObject *tup, const char *name, const char *what, int64_t *v, int *n)
{
  if (!tup || !PyTuple_Check(tup)) {
    PyErr_Format(PyExc_TypeError, "%s: its %s is not a tuple", name, what);
    return -1;
  }
  Py_ssize_t k = PyTuple_Size(tup);
  if (k > MAXDIM) {
    PyErr_Format(PyExc_ValueError, "%s: %zd dimensions (at most %d)", name, k, MAXDIM);
    return -1;
  }
  for (Py_ssize_t i = 0; i < k; i++) {
    v[i] = PyLong_AsLongLong(PyTuple_GetItem(tup, i));
    if (v[i] == -1 && PyErr_Occurred())
      return -1;
  }
  *n = (int)k;
  return 0;
}

int from_torch(PyObject *obj, tview *t)
{
  int rc = -1, nd = 0;
  int64_t st[MAXDIM];
  PyObject *cuda = PyObject_GetAttr(obj, s_is_cuda), *dt = NULL, *shape = NULL, *strides = NULL, *ptr = NULL;
  if (!cuda)
    goto out;
  if (cuda == Py_True) {
    PyObject *d = PyObject_CallMethodObjArgs(obj, s_get_device, NULL);
    if (!d)
      goto out;
    t->device_type = DL_CUDA, t->device_id = (int)PyLong_AsLong(d);
    Py_DECREF(d);
  } else {
    PyObject *dev = PyObject_GetAttrString(obj, "device"), *ty = dev ? PyObject_GetAttrString(dev, "type") : NULL;
    const char *tn = ty ? PyUnicode_AsUTF8AndSize(ty, NULL) : NULL;
    t->device_type = tn && !strcmp(tn, "cpu") ? DL_CPU : 0, t->device_id = 0;
    Py_XDECREF(dev), Py_XDECREF(ty);
    if (!tn)
      goto out;
  }
  if (!(dt = PyObject_GetAttr(obj, s_dtype)))
    goto out;
  PyObject *code = PyDict_GetItem(torch_dtypes, dt); /* borrowed */
  if (!code) {
    PyErr_Format(PyExc_TypeError, "%s: dtype %S is not supported", t->name, dt);
    goto out;
  }
  long cb = PyLong_AsLong(code);
  t->code = (uint8_t)(cb >> 8), t->bits = (uint8_t)(cb & 255);
  if (!(shape = PyObject_GetAttr(obj, s_shape)) || int_tuple(shape, t->name, "shape", t->shape, &t->ndim) ||
      !(strides = PyObject_CallMethodObjArgs(obj, s_stride, NULL)) || int_tuple(strides, t->name, "stride()", st, &nd))
    goto out;
  if (nd != t->ndim) {
    PyErr_Format(PyExc_ValueError, "%s: stride() and shape differ in length", t->name);
    goto out;
  }
  if (!(ptr = PyObject_CallMethodObjArgs(obj, s_data_ptr, NULL)))
    goto out;
  t->data = (char *)(uintptr_t)PyLong_AsUnsignedLongLong(ptr);
  if (PyErr_Occurred())
    goto out;
  rc = finish_view(t, NULL, st);
out:
  Py_XDECREF(cuda), Py_XDECREF(dt), Py_XDECREF(shape), Py_XDECREF(strides), Py_XDECREF(ptr);
  return rc;
}
