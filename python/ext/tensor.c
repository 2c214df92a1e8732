/* tensor.c -- tensor intake: an argument taken through torch's own
 * accessors (torch.c), DLPack (__dlpack__), __cuda_array_interface__, the
 * buffer protocol or __array_interface__ into a tview, its dtype and device
 * checked; the shape and stride helpers the ops' checks use.
 * The DLPack structures below are written from the DLPack specification
 * (dlpack.h v1.x, the Python exchange protocol), not copied. */
#include "ext.h"

/* ---- DLPack (the parts a consumer reads; the codes are in ext.h) ---- */
typedef struct {
  int32_t device_type, device_id;
} dl_device;
typedef struct {
  uint8_t code, bits;
  uint16_t lanes;
} dl_dtype;
typedef struct {
  void *data;
  dl_device device;
  int32_t ndim;
  dl_dtype dtype;
  int64_t *shape;
  int64_t *strides; /* in elements; NULL: compact row-major */
  uint64_t byte_offset;
} dl_tensor;
typedef struct dl_managed {
  dl_tensor t;
  void *manager_ctx;
  void (*deleter)(struct dl_managed *self);
} dl_managed;
typedef struct dl_managed_v {
  struct {
    uint32_t major, minor;
  } version;
  void *manager_ctx;
  void (*deleter)(struct dl_managed_v *self);
  uint64_t flags; /* bit 0: read-only */
  dl_tensor t;
} dl_managed_v;
#define DL_FLAG_READ_ONLY 1u

/* ---- tensors ---- */

static const char *const dt_want[] = {
    "bfloat16 (or its raw bits as uint16)", "float32", "int32", "int64",
    "float8_e4m3fn (or its raw bits as uint8)", "a byte-addressed cache (uint8, int8, float8 or bfloat16)"};

static const char *dtype_name(uint8_t code, uint8_t bits, char *buf, size_t n)
{
  switch (code) {
  case DL_INT: snprintf(buf, n, "int%d", bits); break;
  case DL_UINT: snprintf(buf, n, "uint%d", bits); break;
  case DL_FLOAT: snprintf(buf, n, "float%d", bits); break;
  case DL_BFLOAT: snprintf(buf, n, "bfloat%d", bits); break;
  case DL_COMPLEX: snprintf(buf, n, "complex%d", bits); break;
  case DL_BOOL: snprintf(buf, n, "bool"); break;
  case DL_F8_E4M3FN: snprintf(buf, n, "float8_e4m3fn"); break;
  case DL_F8_E5M2: snprintf(buf, n, "float8_e5m2"); break;
  case DL_F8_E4M3FNUZ: snprintf(buf, n, "float8_e4m3fnuz"); break;
  case DL_F8_E5M2FNUZ: snprintf(buf, n, "float8_e5m2fnuz"); break;
  case DL_F8_E8M0FNU: snprintf(buf, n, "float8_e8m0fnu"); break;
  default: snprintf(buf, n, "dtype code %d, %d bits", code, bits); break;
  }
  return buf;
}

static int dtype_ok(int cls, uint8_t code, uint8_t bits)
{
  switch (cls) {
  case DT_BF16: return (code == DL_BFLOAT || code == DL_UINT) && bits == 16;
  case DT_F32: return code == DL_FLOAT && bits == 32;
  case DT_I32: return code == DL_INT && bits == 32;
  case DT_I64: return code == DL_INT && bits == 64;
  case DT_E4M3: return (code == DL_F8_E4M3FN || code == DL_UINT) && bits == 8;
  case DT_CACHE:
    return (bits == 8 && (code == DL_UINT || code == DL_INT || (code >= DL_F8_E3M4 && code <= DL_F8_E8M0FNU))) ||
           (bits == 16 && code == DL_BFLOAT);
  default: return 0;
  }
}

/* A Python-style tuple of the ndim values v, "(a, b)" or "(a,)", into buf. */
static const char *tuple_str(const int64_t *v, int ndim, char *buf, size_t n)
{
  size_t k = (size_t)snprintf(buf, n, "(");
  for (int i = 0; i < ndim && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)v[i]);
  if (k < n)
    snprintf(buf + k, n - k, "%s)", ndim == 1 ? "," : "");
  return buf;
}

const char *shape_str(const tview *t, char *buf, size_t n) { return tuple_str(t->shape, t->ndim, buf, n); }
const char *strides_str(const tview *t, char *buf, size_t n) { return tuple_str(t->strides, t->ndim, buf, n); }

/* ValueError "<name>: expected <what>, got shape (...)". */
int bad_shape(const tview *t, const char *fmt, ...)
{
  char what[256], sh[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  PyErr_Format(PyExc_ValueError, "%s: expected shape %s, got %s", t->name, what, shape_str(t, sh, sizeof sh));
  return -1;
}

int64_t numel(const tview *t)
{
  int64_t n = 1;
  for (int i = 0; i < t->ndim; i++)
    n *= t->shape[i];
  return n;
}

/* Row-major contiguous (dims of size 1 may have any stride). */
static int is_contig(const tview *t)
{
  int64_t want = 1;
  if (numel(t) == 0)
    return 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] != 1 && t->strides[i] != want)
      return 0;
    want *= t->shape[i];
  }
  return 1;
}

int need_contig(const tview *t)
{
  if (is_contig(t))
    return 0;
  char sh[160], st[160];
  PyErr_Format(PyExc_ValueError, "%s: must be contiguous (row-major); shape %s has strides %s (in elements)", t->name,
               shape_str(t, sh, sizeof sh), strides_str(t, st, sizeof st));
  return -1;
}

/* Dims [from, ndim) contiguous among themselves. */
int tail_contig(const tview *t, int from)
{
  int64_t want = 1;
  for (int i = t->ndim - 1; i >= from; i--) {
    if (t->shape[i] != 1 && t->strides[i] != want)
      return 0;
    want *= t->shape[i];
  }
  return 1;
}

/* Element strides from byte strides (NULL: row-major), shape and the span. */
int finish_view(tview *t, const int64_t *byte_strides, const int64_t *elem_strides)
{
  char dn[48];
  if (t->bits == 0 || t->bits % 8) {
    PyErr_Format(PyExc_TypeError, "%s: dtype %s is not byte-sized", t->name,
                 dtype_name(t->code, t->bits, dn, sizeof dn));
    return -1;
  }
  t->itemsize = t->bits / 8;
  int64_t n = 1, want = 1;
  for (int i = t->ndim - 1; i >= 0; i--) {
    if (t->shape[i] < 0) {
      PyErr_Format(PyExc_ValueError, "%s: negative extent %lld", t->name, (long long)t->shape[i]);
      return -1;
    }
    if (elem_strides)
      t->strides[i] = elem_strides[i];
    else if (byte_strides) {
      if (byte_strides[i] % t->itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: stride %lld bytes is not a multiple of the %d-byte element", t->name,
                     (long long)byte_strides[i], t->itemsize);
        return -1;
      }
      t->strides[i] = byte_strides[i] / t->itemsize;
    } else
      t->strides[i] = want;
    want *= t->shape[i] ? t->shape[i] : 1;
    n *= t->shape[i];
  }
  t->span = 0;
  if (n == 0)
    return 0;
  uint64_t last = 0;
  for (int i = 0; i < t->ndim; i++) {
    if (t->strides[i] < 0 && t->shape[i] > 1) {
      char st[160];
      PyErr_Format(PyExc_ValueError, "%s: negative strides %s are not supported", t->name,
                   strides_str(t, st, sizeof st));
      return -1;
    }
    uint64_t add;
    if (t->shape[i] > 1 && __builtin_mul_overflow((uint64_t)(t->shape[i] - 1), (uint64_t)t->strides[i], &add)) {
      PyErr_Format(PyExc_ValueError, "%s: strides overflow", t->name);
      return -1;
    }
    if (t->shape[i] > 1 && __builtin_add_overflow(last, add, &last)) {
      PyErr_Format(PyExc_ValueError, "%s: strides overflow", t->name);
      return -1;
    }
  }
  if (__builtin_mul_overflow(last + 1, (uint64_t)t->itemsize, &last) || last > SIZE_MAX / 2) {
    PyErr_Format(PyExc_ValueError, "%s: tensor too large", t->name);
    return -1;
  }
  t->span = (size_t)last;
  if (!t->data) {
    PyErr_Format(PyExc_ValueError, "%s: data pointer is NULL", t->name);
    return -1;
  }
  return 0;
}

void release(tview *t)
{
  if (t->managed) {
    if (t->versioned) {
      dl_managed_v *m = t->managed;
      if (m->deleter)
        m->deleter(m);
    } else {
      dl_managed *m = t->managed;
      if (m->deleter)
        m->deleter(m);
    }
    t->managed = NULL;
  }
  Py_CLEAR(t->capsule);
  if (t->has_view) {
    PyBuffer_Release(&t->view);
    t->has_view = 0;
  }
}

/* Take a DLPack capsule from obj.__dlpack__ (on CUDA with stream=, the
 * stream the consumer will use: 1 for the legacy default stream). */
static int from_dlpack(PyObject *obj, int cuda, uint64_t stream, tview *t)
{
  PyObject *cap = NULL;
  if (cuda) {
    PyObject *meth = PyObject_GetAttrString(obj, "__dlpack__");
    if (!meth)
      return -1;
    PyObject *kw = Py_BuildValue("{s:K}", "stream", (unsigned long long)(stream ? stream : 1));
    PyObject *noargs = PyTuple_New(0);
    if (kw && noargs)
      cap = PyObject_Call(meth, noargs, kw);
    Py_XDECREF(kw), Py_XDECREF(noargs);
    if (!cap && PyErr_ExceptionMatches(PyExc_TypeError)) { /* a producer without the stream keyword */
      PyErr_Clear();
      cap = PyObject_CallNoArgs(meth);
    }
    Py_DECREF(meth);
  } else
    cap = PyObject_CallMethod(obj, "__dlpack__", NULL);
  if (!cap) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyErr_Format(PyExc_TypeError, "%s: __dlpack__() failed: %S", t->name, value ? value : Py_None);
    Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(tb);
    return -1;
  }
  dl_tensor *dt;
  if (PyCapsule_IsValid(cap, "dltensor")) {
    dl_managed *m = PyCapsule_GetPointer(cap, "dltensor");
    if (PyCapsule_SetName(cap, "used_dltensor")) {
      Py_DECREF(cap);
      return -1;
    }
    t->managed = m, t->versioned = 0, dt = &m->t;
  } else if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
    dl_managed_v *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
    if (PyCapsule_SetName(cap, "used_dltensor_versioned")) {
      Py_DECREF(cap);
      return -1;
    }
    t->managed = m, t->versioned = 1, dt = &m->t;
    t->readonly = (m->flags & DL_FLAG_READ_ONLY) != 0;
    if (m->version.major != 1) {
      t->capsule = cap;
      PyErr_Format(PyExc_TypeError, "%s: DLPack version %u.%u is not supported (1.x)", t->name, m->version.major,
                   m->version.minor);
      return -1;
    }
  } else {
    Py_DECREF(cap);
    PyErr_Format(PyExc_TypeError, "%s: __dlpack__() did not return a DLPack capsule", t->name);
    return -1;
  }
  t->capsule = cap;
  if (dt->ndim < 0 || dt->ndim > MAXDIM) {
    PyErr_Format(PyExc_ValueError, "%s: %d dimensions (at most %d)", t->name, (int)dt->ndim, MAXDIM);
    return -1;
  }
  if (dt->dtype.lanes != 1) {
    PyErr_Format(PyExc_TypeError, "%s: vector dtypes (%d lanes) are not supported", t->name, dt->dtype.lanes);
    return -1;
  }
  t->device_type = dt->device.device_type, t->device_id = dt->device.device_id;
  t->data = (char *)dt->data + dt->byte_offset;
  t->ndim = dt->ndim;
  t->code = dt->dtype.code, t->bits = dt->dtype.bits;
  for (int i = 0; i < t->ndim; i++)
    t->shape[i] = dt->shape[i];
  return finish_view(t, NULL, dt->strides);
}

/* A (ptr, readonly), shape, typestr, strides dictionary: the CUDA array
 * interface, or NumPy's array interface with a data tuple. */
static int from_interface(PyObject *d, tview *t, const char *which)
{
  if (!PyDict_Check(d)) {
    PyErr_Format(PyExc_TypeError, "%s: %s is not a dict", t->name, which);
    return -1;
  }
  PyObject *data = PyDict_GetItemString(d, "data"), *shape = PyDict_GetItemString(d, "shape");
  PyObject *typestr = PyDict_GetItemString(d, "typestr"), *strides = PyDict_GetItemString(d, "strides");
  PyObject *mask = PyDict_GetItemString(d, "mask");
  if (!data || !PyTuple_Check(data) || PyTuple_Size(data) != 2 || !shape || !PyTuple_Check(shape) || !typestr ||
      !PyUnicode_Check(typestr)) {
    PyErr_Format(PyExc_TypeError, "%s: %s lacks a (pointer, read-only) data tuple, a shape or a typestr", t->name,
                 which);
    return -1;
  }
  if (mask && mask != Py_None) {
    PyErr_Format(PyExc_ValueError, "%s: masked arrays are not supported", t->name);
    return -1;
  }
  unsigned long long p = PyLong_AsUnsignedLongLong(PyTuple_GetItem(data, 0));
  if (PyErr_Occurred())
    return -1;
  t->data = (char *)(uintptr_t)p;
  t->readonly = PyObject_IsTrue(PyTuple_GetItem(data, 1)) == 1;
  Py_ssize_t nd = PyTuple_Size(shape);
  if (nd > MAXDIM) {
    PyErr_Format(PyExc_ValueError, "%s: %zd dimensions (at most %d)", t->name, nd, MAXDIM);
    return -1;
  }
  t->ndim = (int)nd;
  for (int i = 0; i < t->ndim; i++) {
    t->shape[i] = PyLong_AsLongLong(PyTuple_GetItem(shape, i));
    if (PyErr_Occurred())
      return -1;
  }
  const char *ts = PyUnicode_AsUTF8AndSize(typestr, NULL);
  if (!ts)
    return -1;
  int size = 0;
  char order = ts[0], kind = ts[0] ? ts[1] : 0;
  if (!kind || sscanf(ts + 2, "%d", &size) != 1 || size <= 0 || size > 16) {
    PyErr_Format(PyExc_TypeError, "%s: typestr '%s' is not understood", t->name, ts);
    return -1;
  }
  if (order == '>' && size > 1) {
    PyErr_Format(PyExc_TypeError, "%s: big-endian typestr '%s'", t->name, ts);
    return -1;
  }
  switch (kind) {
  case 'i': t->code = DL_INT; break;
  case 'u': t->code = DL_UINT; break;
  case 'f': t->code = DL_FLOAT; break;
  case 'b': t->code = DL_BOOL; break;
  case 'c': t->code = DL_COMPLEX; break;
  default: PyErr_Format(PyExc_TypeError, "%s: typestr '%s' is not supported", t->name, ts); return -1;
  }
  t->bits = (uint8_t)(size * 8);
  int64_t bstr[MAXDIM];
  if (strides && strides != Py_None) {
    if (!PyTuple_Check(strides) || PyTuple_Size(strides) != nd) {
      PyErr_Format(PyExc_TypeError, "%s: %s strides do not match its shape", t->name, which);
      return -1;
    }
    for (int i = 0; i < t->ndim; i++) {
      bstr[i] = PyLong_AsLongLong(PyTuple_GetItem(strides, i));
      if (PyErr_Occurred())
        return -1;
    }
    return finish_view(t, bstr, NULL);
  }
  return finish_view(t, NULL, NULL);
}

static int from_buffer(PyObject *obj, int use, tview *t)
{
  (void)use; /* (a read-only output is refused by acquire()) */
  if (PyObject_GetBuffer(obj, &t->view, PyBUF_STRIDES | PyBUF_FORMAT)) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyErr_Format(PyExc_TypeError, "%s: the buffer protocol refused it: %S", t->name, value ? value : Py_None);
    Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(tb);
    return -1;
  }
  t->has_view = 1;
  Py_buffer *v = &t->view;
  if (v->ndim > MAXDIM) {
    PyErr_Format(PyExc_ValueError, "%s: %d dimensions (at most %d)", t->name, v->ndim, MAXDIM);
    return -1;
  }
  const char *f = v->format ? v->format : "B";
  if (*f == '@' || *f == '=' || *f == '<')
    f++;
  else if ((*f == '>' || *f == '!') && v->itemsize > 1) {
    PyErr_Format(PyExc_TypeError, "%s: big-endian buffer format '%s'", t->name, v->format);
    return -1;
  } else if (*f == '>' || *f == '!')
    f++;
  int bits = (int)v->itemsize * 8;
  switch (f[0] && !f[1] ? f[0] : 0) {
  case 'b': case 'h': case 'i': case 'l': case 'q': case 'n': t->code = DL_INT; break;
  case 'B': case 'H': case 'I': case 'L': case 'Q': case 'N': t->code = DL_UINT; break;
  case 'e': case 'f': case 'd': t->code = DL_FLOAT; break;
  case '?': t->code = DL_BOOL; break;
  default:
    PyErr_Format(PyExc_TypeError, "%s: buffer format '%s' is not supported (a bfloat16 or float8 NumPy array: "
                 "pass .view(np.uint16) or .view(np.uint8))", t->name, v->format ? v->format : "B");
    return -1;
  }
  t->bits = (uint8_t)bits;
  t->data = v->buf;
  t->ndim = v->ndim;
  t->readonly = v->readonly;
  t->device_type = DL_CPU, t->device_id = 0;
  int64_t bstr[MAXDIM];
  for (int i = 0; i < t->ndim; i++) {
    t->shape[i] = v->shape[i];
    bstr[i] = v->strides ? v->strides[i] : 0;
  }
  return finish_view(t, v->strides ? bstr : NULL, NULL);
}

static int device_error(tview *t, CtxObject *c)
{
  static const char *const kinds[] = {"?", "CPU (host)", "CUDA", "CUDA pinned host", "OpenCL", "Vulkan", "Metal",
                                      "VPI", "ROCm", "ROCm host", "ext_dev", "CUDA managed", "oneAPI"};
  const char *k = t->device_type >= 1 && t->device_type <= 14 ? kinds[t->device_type < 13 ? t->device_type : 0] : "?";
  if (t->device_type == DL_CUDA_MANAGED)
    k = "CUDA managed";
  const char *gpu = c->dl == DL_ROCM ? "ROCm" : "CUDA";
  if (c->cuda)
    PyErr_Format(PyExc_ValueError, "%s: %s memory (DLPack device %d:%d); this %s context (device %d) takes %s "
                 "device memory", t->name, k, t->device_type, t->device_id, c->dl == DL_ROCM ? "HIP" : "CUDA",
                 c->device, gpu);
  else
    PyErr_Format(PyExc_ValueError, "%s: %s memory (DLPack device %d:%d); this OpenCL context takes host memory "
                 "(e.g. NumPy arrays), which it copies to the device", t->name, k, t->device_type, t->device_id);
  return -1;
}

/* After __dlpack__ failed: where the object says it lives on another
 * device, that is the error to report (a CPU torch tensor refuses a CUDA
 * stream); else the failure itself. */
static int dlpack_failed(CtxObject *c, PyObject *obj, tview *t)
{
  if (!PyObject_HasAttrString(obj, "__dlpack_device__"))
    return -1;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyObject *d = PyObject_CallMethod(obj, "__dlpack_device__", NULL);
  int ty = 0, id = 0;
  if (d && PyArg_ParseTuple(d, "ii", &ty, &id) && !((ty == c->dl || ty == DL_CUDA_MANAGED) && id == c->device)) {
    Py_XDECREF(d), Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(tb);
    t->device_type = ty, t->device_id = id;
    return device_error(t, c);
  }
  Py_XDECREF(d);
  PyErr_Clear();
  PyErr_Restore(type, value, tb);
  return -1;
}

/* Take obj as tensor argument t: its memory, dtype and device, checked
 * against dtype class cls and the context's device. */
int acquire(CtxObject *c, PyObject *obj, int cls, int use, uint64_t stream, tview *t)
{
  t->present = 1, t->use = use;
  int rc;
  if (torch_ready() && PyObject_IsInstance(obj, torch_tensor) == 1) {
    if (from_torch(obj, t))
      return -1;
    t->via_torch = 1;
    /* (torch calls its ROCm devices 'cuda' too) */
    if (c->cuda ? !(t->device_type == DL_CUDA && t->device_id == c->device) : t->device_type != DL_CPU)
      return device_error(t, c);
  } else if (c->cuda) {
    if (PyObject_HasAttrString(obj, "__dlpack__")) {
      if ((rc = from_dlpack(obj, 1, stream, t)) && !t->managed)
        return dlpack_failed(c, obj, t);
    } else if (PyObject_HasAttrString(obj, "__cuda_array_interface__")) {
      PyObject *d = PyObject_GetAttrString(obj, "__cuda_array_interface__");
      if (!d)
        return -1;
      rc = from_interface(d, t, "__cuda_array_interface__");
      Py_DECREF(d);
      t->device_type = c->dl, t->device_id = c->device; /* (the interface does not say) */
    } else if (PyObject_CheckBuffer(obj) || PyObject_HasAttrString(obj, "__array_interface__")) {
      t->device_type = DL_CPU, t->device_id = 0;
      return device_error(t, c);
    } else {
      PyErr_Format(PyExc_TypeError, "%s: expected a %s tensor (__dlpack__ or __cuda_array_interface__), got %S",
                   t->name, c->dl == DL_ROCM ? "ROCm" : "CUDA", (PyObject *)Py_TYPE(obj));
      return -1;
    }
    if (rc)
      return -1;
    if (!((t->device_type == c->dl || t->device_type == DL_CUDA_MANAGED) && t->device_id == c->device))
      return device_error(t, c);
  } else {
    if (PyObject_HasAttrString(obj, "__dlpack_device__")) {
      PyObject *d = PyObject_CallMethod(obj, "__dlpack_device__", NULL);
      if (!d)
        return -1;
      int ty = 0, id = 0;
      if (!PyArg_ParseTuple(d, "ii", &ty, &id)) {
        Py_DECREF(d);
        return -1;
      }
      Py_DECREF(d);
      if (ty != DL_CPU) {
        t->device_type = ty, t->device_id = id;
        return device_error(t, c);
      }
    }
    if (PyObject_CheckBuffer(obj))
      rc = from_buffer(obj, use, t);
    else if (PyObject_HasAttrString(obj, "__dlpack__"))
      rc = from_dlpack(obj, 0, 0, t);
    else if (PyObject_HasAttrString(obj, "__array_interface__")) {
      PyObject *d = PyObject_GetAttrString(obj, "__array_interface__");
      if (!d)
        return -1;
      rc = from_interface(d, t, "__array_interface__");
      Py_DECREF(d);
      t->device_type = DL_CPU, t->device_id = 0;
    } else if (PyObject_HasAttrString(obj, "__cuda_array_interface__")) {
      t->device_type = DL_CUDA, t->device_id = 0;
      return device_error(t, c);
    } else {
      PyErr_Format(PyExc_TypeError, "%s: expected an array (NumPy, buffer protocol, __dlpack__ or "
                   "__array_interface__), got %S", t->name, (PyObject *)Py_TYPE(obj));
      return -1;
    }
    if (rc)
      return -1;
    if (t->device_type != DL_CPU)
      return device_error(t, c);
  }
  if (!dtype_ok(cls, t->code, t->bits)) {
    char dn[48];
    PyErr_Format(PyExc_TypeError, "%s: dtype %s, expected %s", t->name, dtype_name(t->code, t->bits, dn, sizeof dn),
                 dt_want[cls]);
    return -1;
  }
  if (use == USE_OUT && t->readonly) {
    PyErr_Format(PyExc_ValueError, "%s: the tensor is read-only and the op writes it", t->name);
    return -1;
  }
  return 0;
}
