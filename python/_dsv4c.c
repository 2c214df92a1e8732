/* _dsv4c.c -- dsv4c._dsv4c, the CPython extension behind the dsv4c package:
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
 * The DLPack structures below are written from the DLPack specification
 * (dlpack.h v1.x, the Python exchange protocol), not copied. */
#define PY_SSIZE_T_CLEAN
/* The stable ABI of CPython 3.11 (abi3): one build loads into every later
 * interpreter, as serving engines run various ones. */
#define Py_LIMITED_API 0x030B0000
#include <Python.h>
#include <pythread.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "dsv4rt.h"

/* ---- DLPack (the parts a consumer reads) ---- */

enum { DL_CPU = 1, DL_CUDA = 2, DL_CUDA_HOST = 3, DL_CUDA_MANAGED = 13 };
enum {
  DL_INT = 0,
  DL_UINT = 1,
  DL_FLOAT = 2,
  DL_OPAQUE = 3,
  DL_BFLOAT = 4,
  DL_COMPLEX = 5,
  DL_BOOL = 6,
  DL_F8_E3M4 = 7,
  DL_F8_E4M3 = 8,
  DL_F8_E4M3B11FNUZ = 9,
  DL_F8_E4M3FN = 10,
  DL_F8_E4M3FNUZ = 11,
  DL_F8_E5M2 = 12,
  DL_F8_E5M2FNUZ = 13,
  DL_F8_E8M0FNU = 14,
};

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

/* ---- module state ---- */

static PyObject *Error, *ArgumentError; /* dsv4c.Error (RuntimeError), dsv4c.ArgumentError (Error, ValueError) */

#define MAXDIM 8

typedef struct {
  PyObject_HEAD
  dsv4rt_context *ctx;
  PyThread_type_lock lock;
  dsv4rt_buffer *scratch; /* stands in for empty tensors (a buffer argument must exist) */
  int cuda, device;
  uint64_t stream; /* the stream launches go on when a call names none */
} CtxObject;

enum { OP_DEQUANT_GATHER, OP_PAGED_GATHER, OP_KV_INSERT, OP_SPARSE_DECODE, OP_MQA_LOGITS, OP_TOPK, OP_COUNT };
static const char *const op_names[OP_COUNT] = {"dequant_gather", "paged_gather",     "kv_insert",
                                               "sparse_decode",  "paged_mqa_logits", "topk"};

typedef struct {
  PyObject_HEAD
  CtxObject *ctx;
  dsv4rt_bundle *b;
  int dflt[OP_COUNT]; /* the entry an unnamed call of each op resolves to (-1: not yet) */
} BundleObject;

static PyObject *CtxType, *BundleType; /* heap types (the stable ABI has no static ones) */

/* ---- errors ---- */

static int is_argument_status(dsv4rt_status s)
{
  switch (s) {
  case DSV4RT_ERR_INVALID_ARG:
  case DSV4RT_ERR_NULL_ARG:
  case DSV4RT_ERR_WRONG_CONTEXT:
  case DSV4RT_ERR_BUFFER_TOO_SMALL:
  case DSV4RT_ERR_OUT_OF_RANGE:
  case DSV4RT_ERR_MISALIGNED:
  case DSV4RT_ERR_ALIASING:
  case DSV4RT_ERR_NOT_FINITE:
  case DSV4RT_ERR_BAD_CONTENTS:
    return 1;
  default:
    return 0;
  }
}

/* Raise dsv4c.Error (ArgumentError for the argument statuses) with the
 * status code, its name and msg; returns NULL. */
static PyObject *raise_status(dsv4rt_status s, const char *msg)
{
  PyObject *type = is_argument_status(s) ? ArgumentError : Error;
  PyObject *exc = PyObject_CallFunction(type, "s", msg && *msg ? msg : dsv4rt_status_name(s));
  if (!exc)
    return NULL;
  PyObject *code = PyLong_FromLong((long)s), *name = PyUnicode_FromString(dsv4rt_status_name(s));
  if (!code || !name || PyObject_SetAttrString(exc, "status", code) ||
      PyObject_SetAttrString(exc, "status_name", name)) {
    Py_XDECREF(code), Py_XDECREF(name), Py_DECREF(exc);
    return NULL;
  }
  Py_DECREF(code), Py_DECREF(name);
  PyErr_SetObject(type, exc);
  Py_DECREF(exc);
  return NULL;
}

/* The exception being raised, its message made to start with the
 * argument's Python name ("block_size: int too big to convert") where
 * CPython's own conversion raised it; dsv4c's errors and messages that
 * name the argument already are left as they are. */
static void name_exception(const char *name)
{
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  if (!type)
    return;
  PyErr_NormalizeException(&type, &value, &tb);
  PyObject *str = value ? PyObject_Str(value) : NULL;
  const char *m = str ? PyUnicode_AsUTF8AndSize(str, NULL) : NULL;
  size_t n = strlen(name);
  if (!m || PyErr_GivenExceptionMatches(type, Error) ||
      (!strncmp(m, name, n) && (m[n] == ':' || m[n] == '[' || m[n] == ' '))) {
    PyErr_Clear();
    Py_XDECREF(str);
    PyErr_Restore(type, value, tb);
    return;
  }
  PyErr_Format(type, "%s: %s", name, m);
  Py_DECREF(str);
  Py_DECREF(type);
  Py_XDECREF(value), Py_XDECREF(tb);
}

/* A runtime status of an argument (dsv4rt's message names the C field:
 * "dsv4rt_sparse_decode: heads = 0 is outside [1, 4096]") as a message that
 * starts with the op's Python argument: "q: heads = 0 is outside [1, 4096]
 * (dsv4rt_sparse_decode)".  Fields that are an argument's own name
 * (indices[5], softmax_scale) keep it; the others map to the argument they
 * come from (heads, n_tokens: q's shape).  Other messages are left alone. */
static void name_runtime_argument(int op, dsv4rt_status s, char *msg, size_t cap)
{
  static const struct {
    int op; /* -1: every op */
    const char *field, *arg;
  } map[] = {
      {-1, "num_blocks", "cache"}, {-1, "block_size", "cache"}, {-1, "block_stride", "cache"},
      {-1, "extra_num_blocks", "extra_cache"}, {-1, "extra_block_size", "extra_cache"},
      {-1, "extra_block_stride", "extra_cache"}, {-1, "opts->splits", "splits"}, {-1, "splits", "splits"},
      {0 /* OP_DEQUANT_GATHER */, "n", "indices"},
      {1 /* OP_PAGED_GATHER */, "num_requests", "seq_lens"}, {1, "out_rows", "out"}, {1, "out_stride_m", "out"},
      {1, "out_stride_r", "out"}, {1, "max_blocks", "block_table"},
      {2 /* OP_KV_INSERT */, "n_tokens", "kv"}, {2, "n_insert", "slot_mapping"}, {2, "max_pos", "cos_sin"},
      {2, "heads", "q"}, {2, "padded_heads", "q_out"},
      {3 /* OP_SPARSE_DECODE */, "n_tokens", "q"}, {3, "heads", "q"}, {3, "topk", "indices"},
      {3, "extra_topk", "extra_indices"},
      {4 /* OP_MQA_LOGITS */, "batch", "q"}, {4, "next_n", "q"}, {4, "row_len", "logits"}, {4, "row_stride", "logits"},
      {4, "max_blocks", "block_table"},
      {5 /* OP_TOPK */, "rows", "logits"}, {5, "row_len", "logits"}, {5, "row_stride", "logits"},
  };
  if (!is_argument_status(s) || op < 0)
    return;
  const char *colon = strstr(msg, ": ");
  if (!colon || strncmp(msg, "dsv4rt_", 7))
    return;
  const char *rest = colon + 2, *f = rest;
  if (!strncmp(f, "output ", 7)) /* "output out shares memory with ..." */
    f += 7;
  char field[48];
  size_t n = 0;
  while (n + 1 < sizeof field && f[n] && (f[n] == '_' || f[n] == '-' || f[n] == '>' || (f[n] >= 'a' && f[n] <= 'z') ||
                                          (f[n] >= 'A' && f[n] <= 'Z') || (f[n] >= '0' && f[n] <= '9')))
    field[n] = f[n], n++;
  field[n] = 0;
  const char *arg = NULL;
  for (size_t i = 0; !arg && i < sizeof map / sizeof *map; i++)
    if ((map[i].op < 0 || map[i].op == op) && !strcmp(map[i].field, field))
      arg = map[i].arg;
  if (!arg && n) /* a field with the argument's own name: indices[5], softmax_scale */
    arg = field;
  if (!arg)
    return;
  char out[1200];
  size_t len = (size_t)snprintf(out, sizeof out, "%s: %s (%.*s)", arg, rest, (int)(colon - msg), msg);
  len = len < sizeof out ? len : sizeof out - 1;
  len = len < cap ? len : cap - 1;
  memcpy(msg, out, len);
  msg[len] = 0;
}

/* ---- tensors ---- */

enum { DT_BF16, DT_F32, DT_I32, DT_I64, DT_E4M3, DT_CACHE };
static const char *const dt_want[] = {
    "bfloat16 (or its raw bits as uint16)", "float32", "int32", "int64",
    "float8_e4m3fn (or its raw bits as uint8)", "a byte-addressed cache (uint8, int8, float8 or bfloat16)"};

enum { USE_IN, USE_OUT }; /* OUT: written (also read: rows it leaves alone keep their values) */

typedef struct {
  const char *name;
  int present, use;
  int device_type, device_id; /* DLPack's codes */
  char *data;                 /* element [0, ..., 0] */
  int ndim;
  int64_t shape[MAXDIM], strides[MAXDIM]; /* strides in elements */
  uint8_t code, bits;
  int itemsize, readonly;
  int via_torch; /* read through torch's own accessors */
  size_t span; /* bytes from data to the end of the last element (0: empty) */
  size_t need; /* device bytes the op addresses, when more than span (a cache's last block) */
  /* what to release */
  PyObject *capsule;
  void *managed;
  int versioned;
  Py_buffer view;
  int has_view;
  dsv4rt_buffer *buf;
} tview;

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

static const char *shape_str(const tview *t, char *buf, size_t n) { return tuple_str(t->shape, t->ndim, buf, n); }
static const char *strides_str(const tview *t, char *buf, size_t n) { return tuple_str(t->strides, t->ndim, buf, n); }

/* ValueError "<name>: expected <what>, got shape (...)". */
static int bad_shape(const tview *t, const char *fmt, ...)
{
  char what[256], sh[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  PyErr_Format(PyExc_ValueError, "%s: expected shape %s, got %s", t->name, what, shape_str(t, sh, sizeof sh));
  return -1;
}

static int64_t numel(const tview *t)
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

static int need_contig(const tview *t)
{
  if (is_contig(t))
    return 0;
  char sh[160], st[160];
  PyErr_Format(PyExc_ValueError, "%s: must be contiguous (row-major); shape %s has strides %s (in elements)", t->name,
               shape_str(t, sh, sizeof sh), strides_str(t, st, sizeof st));
  return -1;
}

/* Dims [from, ndim) contiguous among themselves. */
static int tail_contig(const tview *t, int from)
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
static int finish_view(tview *t, const int64_t *byte_strides, const int64_t *elem_strides)
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

static void release(tview *t)
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
  if (c->cuda)
    PyErr_Format(PyExc_ValueError, "%s: %s memory (DLPack device %d:%d); this CUDA context (device %d) takes CUDA "
                 "device memory", t->name, k, t->device_type, t->device_id, c->device);
  else
    PyErr_Format(PyExc_ValueError, "%s: %s memory (DLPack device %d:%d); this OpenCL context takes host memory "
                 "(e.g. NumPy arrays), which it copies to the device", t->name, k, t->device_type, t->device_id);
  return -1;
}

/* ---- torch tensors, read directly ----
 *
 * torch.Tensor.__dlpack__ is Python code (argument checks, stream objects,
 * a capsule) that costs about 12 us a tensor, ten times a whole launch in
 * C: a torch tensor is read through its own accessors instead (data_ptr(),
 * shape, stride(), dtype, is_cuda / get_device()), the facts DLPack would
 * carry.  Only where torch is already imported; docs/python.md. */

static PyObject *torch_tensor;    /* torch.Tensor, once torch is imported */
static PyObject *torch_stream_fn; /* torch._C._cuda_getCurrentRawStream (device -> handle), where torch has it */
static PyObject *torch_module;
static PyObject *torch_dtypes; /* torch dtype -> code << 8 | bits */
/* the accessors' names, interned once (a str made per call costs as much as the call) */
static PyObject *s_is_cuda, *s_get_device, *s_dtype, *s_shape, *s_stride, *s_data_ptr;

static int torch_ready(void)
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
static int take_handle(PyObject *h, uint64_t *out)
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
static int torch_current_stream(int device, uint64_t *out)
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

static int from_torch(PyObject *obj, tview *t)
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
  if (d && PyArg_ParseTuple(d, "ii", &ty, &id) && !((ty == DL_CUDA || ty == DL_CUDA_MANAGED) && id == c->device)) {
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
static int acquire(CtxObject *c, PyObject *obj, int cls, int use, uint64_t stream, tview *t)
{
  t->present = 1, t->use = use;
  int rc;
  if (torch_ready() && PyObject_IsInstance(obj, torch_tensor) == 1) {
    if (from_torch(obj, t))
      return -1;
    t->via_torch = 1;
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
      t->device_type = DL_CUDA, t->device_id = c->device; /* (the interface does not say) */
    } else if (PyObject_CheckBuffer(obj) || PyObject_HasAttrString(obj, "__array_interface__")) {
      t->device_type = DL_CPU, t->device_id = 0;
      return device_error(t, c);
    } else {
      PyErr_Format(PyExc_TypeError, "%s: expected a CUDA tensor (__dlpack__ or __cuda_array_interface__), got %S",
                   t->name, (PyObject *)Py_TYPE(obj));
      return -1;
    }
    if (rc)
      return -1;
    if (!((t->device_type == DL_CUDA || t->device_type == DL_CUDA_MANAGED) && t->device_id == c->device))
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

/* ---- one op call ---- */

#define MAXT 12

typedef struct {
  int op, entry;
  dsv4_layout L;
  dsv4rt_kernel_info info;
  const char *kernel; /* the name the caller gave, or NULL */
  uint64_t stream;
  int stream_given; /* stream= named one; else torch CUDA tensors take torch's current stream */
  int torch_cuda;   /* a tensor was a torch CUDA tensor */
  tview t[MAXT];
  int nt;
  dsv4rt_launch_opts opts;
  union {
    dsv4rt_dequant_gather_args dg;
    dsv4rt_paged_gather_args pg;
    dsv4rt_kv_insert_args ki;
    dsv4rt_sparse_decode_args sd;
    dsv4rt_mqa_logits_args ml;
    dsv4rt_topk_args tk;
  } a;
} call;

static tview *slot(call *c, const char *name)
{
  tview *t = &c->t[c->nt++];
  memset(t, 0, sizeof *t);
  t->name = name;
  return t;
}

/* Take obj (required unless opt) as the call's tensor `name`; *out is NULL
 * when an optional one is absent. */
static int tensor(call *c, CtxObject *ctx, PyObject *obj, const char *name, int cls, int use, int opt, tview **out)
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

static void release_all(call *c)
{
  for (int i = 0; i < c->nt; i++)
    release(&c->t[i]);
}

/* The entry a call of op runs (named kernel or the bundle's default), with
 * its layout and parameters: the shapes are checked against it.  The
 * runtime's own choice for an unnamed call may be the warp-matrix form of
 * the same layout, which has the same parameters. */
static int resolve(BundleObject *self, call *c)
{
  int n = dsv4rt_bundle_count(self->b), named = 0, found = -1;
  if (!c->kernel && self->dflt[c->op] >= 0)
    found = self->dflt[c->op];
  for (int i = 0; found < 0 && i < n; i++) {
    const char *name, *op, *target, *arch;
    if (dsv4rt_bundle_entry(self->b, i, &name, &op, &target, &arch))
      continue;
    if (c->kernel && strcmp(name, c->kernel))
      continue;
    named = 1;
    if (!strcmp(op, op_names[c->op]) && dsv4rt_bundle_entry_runs(self->b, i))
      found = i;
  }
  if (found < 0) {
    char m[512];
    if (c->kernel && !named)
      snprintf(m, sizeof m, "kernel: the bundle has no kernel named '%s' (%s)", c->kernel, op_names[c->op]);
    else if (c->kernel)
      snprintf(m, sizeof m, "kernel: the bundle's kernel '%s' is no %s kernel that runs on %s", c->kernel,
               op_names[c->op], dsv4rt_device_name(self->ctx->ctx));
    else
      snprintf(m, sizeof m, "%s: the bundle has no %s kernel that runs on %s", op_names[c->op], op_names[c->op],
               dsv4rt_device_name(self->ctx->ctx));
    raise_status(DSV4RT_ERR_NO_KERNEL, m);
    return -1;
  }
  if (!c->kernel)
    self->dflt[c->op] = found;
  c->entry = found;
  if (dsv4rt_bundle_entry_layout(self->b, found, &c->L) || dsv4rt_bundle_entry_info(self->b, found, &c->info)) {
    raise_status(DSV4RT_ERR_BUNDLE_FORMAT, dsv4rt_last_error(self->ctx->ctx));
    return -1;
  }
  return 0;
}

/* Bytes a token takes in a block of layout L (data row and scale row). */
static int64_t token_bytes(const dsv4_layout *L) { return dsv4_layout_min_block_bytes(L, 1); }

/* A paged cache tensor: [num_blocks, block_size, ...token bytes] (block
 * stride from stride 0, block size from dim 1), or [num_blocks, block
 * bytes] with block_size given. */
static int cache_geometry(const call *c, tview *t, PyObject *bs_arg, const char *bs_name, int64_t *nb, int64_t *bs,
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
static int check_overlap(const call *c)
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
static dsv4rt_status bind_all(CtxObject *ctx, call *c)
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

static void unbind_all(call *c)
{
  for (int i = 0; i < c->nt; i++) {
    dsv4rt_buffer_destroy(c->t[i].buf);
    c->t[i].buf = NULL;
  }
}

static dsv4rt_buffer *B(const CtxObject *ctx, const tview *t) { return !t ? NULL : t->buf ? t->buf : ctx->scratch; }

/* Fill the op's argument struct's buffers (after bind_all). */
static void fill_buffers(CtxObject *ctx, call *c, tview **tv)
{
  switch (c->op) {
  case OP_DEQUANT_GATHER:
    c->a.dg.out = B(ctx, tv[0]), c->a.dg.cache = B(ctx, tv[1]), c->a.dg.indices = B(ctx, tv[2]);
    break;
  case OP_PAGED_GATHER:
    c->a.pg.out = B(ctx, tv[0]), c->a.pg.cache = B(ctx, tv[1]), c->a.pg.seq_lens = B(ctx, tv[2]);
    c->a.pg.block_table = B(ctx, tv[3]), c->a.pg.gather_lens = B(ctx, tv[4]);
    break;
  case OP_KV_INSERT:
    c->a.ki.cache = B(ctx, tv[0]), c->a.ki.kv = B(ctx, tv[1]), c->a.ki.slot_mapping = B(ctx, tv[2]);
    c->a.ki.positions = B(ctx, tv[3]), c->a.ki.cos_sin = B(ctx, tv[4]), c->a.ki.q = B(ctx, tv[5]);
    c->a.ki.q_out = B(ctx, tv[6]);
    break;
  case OP_SPARSE_DECODE:
    c->a.sd.out = B(ctx, tv[0]), c->a.sd.lse = B(ctx, tv[1]), c->a.sd.q = B(ctx, tv[2]);
    c->a.sd.cache = B(ctx, tv[3]), c->a.sd.indices = B(ctx, tv[4]), c->a.sd.lens = B(ctx, tv[5]);
    c->a.sd.extra_cache = B(ctx, tv[6]), c->a.sd.extra_indices = B(ctx, tv[7]), c->a.sd.extra_lens = B(ctx, tv[8]);
    c->a.sd.attn_sink = B(ctx, tv[9]);
    break;
  case OP_MQA_LOGITS:
    c->a.ml.logits = B(ctx, tv[0]), c->a.ml.q = B(ctx, tv[1]), c->a.ml.cache = B(ctx, tv[2]);
    c->a.ml.weights = B(ctx, tv[3]), c->a.ml.context_lens = B(ctx, tv[4]), c->a.ml.block_table = B(ctx, tv[5]);
    break;
  case OP_TOPK:
    c->a.tk.out = B(ctx, tv[0]), c->a.tk.logits = B(ctx, tv[1]), c->a.tk.context_lens = B(ctx, tv[2]);
    break;
  }
}

static dsv4rt_status launch_once(BundleObject *self, call *c)
{
  switch (c->op) {
  case OP_DEQUANT_GATHER: return dsv4rt_dequant_gather(self->b, &c->a.dg, &c->opts);
  case OP_PAGED_GATHER: return dsv4rt_paged_gather(self->b, &c->a.pg, &c->opts);
  case OP_KV_INSERT: return dsv4rt_kv_insert(self->b, &c->a.ki, &c->opts);
  case OP_SPARSE_DECODE: return dsv4rt_sparse_decode(self->b, &c->a.sd, &c->opts);
  case OP_MQA_LOGITS: return dsv4rt_paged_mqa_logits(self->b, &c->a.ml, &c->opts);
  case OP_TOPK: return dsv4rt_topk(self->b, &c->a.tk, &c->opts);
  }
  return DSV4RT_ERR_INVALID_ARG;
}

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
static dsv4rt_status launch_bound(BundleObject *self, call *c, uint64_t stream, long iters, double *secs)
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
static PyObject *run(BundleObject *self, call *c, tview **tv, long iters, double *secs)
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

static int as_i64(PyObject *o, const char *name, int64_t dflt, int64_t *out)
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
static int as_f32(PyObject *o, const char *name, float dflt, float *out)
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

static int as_int(PyObject *o, const char *name, int dflt, int *out)
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

static int as_flag(PyObject *o, const char *name, int *out)
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
static int parse_stream(CtxObject *ctx, PyObject *o, uint64_t *out)
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
static int begin_call(BundleObject *self, call *c, int op, PyObject *kernel_o, PyObject *cc_o, PyObject *stream)
{
  memset(c, 0, sizeof *c);
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

/* ---- the ops ---- */

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

typedef int (*parse_fn)(BundleObject *, PyObject *, PyObject *, call *, tview **);
static const parse_fn parsers[OP_COUNT] = {parse_dequant_gather, parse_paged_gather, parse_kv_insert,
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
  static PyObject *Bundle_##fn(BundleObject *self, PyObject *args, PyObject *kw) { return op_call(self, op, args, kw, 1, NULL); }
OP_METHOD(dequant_gather, OP_DEQUANT_GATHER)
OP_METHOD(paged_gather, OP_PAGED_GATHER)
OP_METHOD(kv_insert, OP_KV_INSERT)
OP_METHOD(sparse_decode, OP_SPARSE_DECODE)
OP_METHOD(paged_mqa_logits, OP_MQA_LOGITS)
OP_METHOD(topk, OP_TOPK)

static int op_index(const char *name)
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
static PyObject *Bundle_bench_c_loop(BundleObject *self, PyObject *args)
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
  tview *tv[MAXT];
  PyObject *keep;      /* the kwargs: what holds the tensors */
  PyObject *outputs; /* what a launch returns */
  int fixed_stream;  /* prepared with stream=: every launch goes there unless it names one */
  int torch_cuda;    /* else torch CUDA tensors: torch's current stream at each launch */
  int busy;          /* launches in flight in other threads (the GIL let go): close waits for none */
} PreparedObject;

static PyObject *PreparedType;
static void free_self(PyObject *self);

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
  tview *tv[MAXT] = {0};
  c->nt = 0;
  int bad = parsers[op](self, empty, keep, c, tv) || check_overlap(c);
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
static PyType_Spec Prepared_spec = {"dsv4c._dsv4c.Prepared", sizeof(PreparedObject), 0, Py_TPFLAGS_DEFAULT,
                                    Prepared_slots};

static PyObject *info_dict(BundleObject *self, int i)
{
  const char *name, *op, *target, *arch;
  dsv4_layout L;
  dsv4rt_kernel_info k;
  char code[65];
  if (dsv4rt_bundle_entry(self->b, i, &name, &op, &target, &arch) || dsv4rt_bundle_entry_layout(self->b, i, &L) ||
      dsv4rt_bundle_entry_info(self->b, i, &k) || dsv4rt_bundle_entry_code_hash(self->b, i, code))
    return raise_status(DSV4RT_ERR_BUNDLE_FORMAT, dsv4rt_last_error(self->ctx->ctx));
  return Py_BuildValue("{s:s,s:s,s:s,s:s,s:s,s:O,s:s,s:i,s:L,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i}", "name", name,
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
  static const char *const dim_names[OP_COUNT] = {"n: indices.size", "R: len(seq_lens)", "N: kv.shape[0]",
                                                  "T, H, topk, extra_topk, extra_block_size", "B, next_n, row_len",
                                                  "rows: logits.shape[0]"};
  static const int ndims[OP_COUNT] = {1, 1, 1, 5, 3, 1};
  PyObject *op_o, *dims_o;
  if (!PyArg_ParseTuple(args, "OO:tuned_kernel", &op_o, &dims_o))
    return NULL;
  const char *opname = PyUnicode_Check(op_o) ? PyUnicode_AsUTF8AndSize(op_o, NULL) : NULL;
  int op = -1;
  for (int i = 0; opname && i < OP_COUNT; i++)
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
static void free_self(PyObject *self)
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
static PyType_Spec Bundle_spec = {"dsv4c._dsv4c.Bundle", sizeof(BundleObject), 0, Py_TPFLAGS_DEFAULT, Bundle_slots};

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
  self->cuda = dsv4rt_context_backend(ctx) == DSV4RT_BACKEND_CUDA;
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
  for (int i = 0; i < OP_COUNT; i++)
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
  return ready(self) ? PyUnicode_FromString(self->cuda ? "cuda" : "opencl") : NULL;
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
    {"backend", (getter)Ctx_get_backend, NULL, "'cuda' or 'opencl'", NULL},
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

static struct PyModuleDef moddef = {
    PyModuleDef_HEAD_INIT, "_dsv4c", "libdsv4rt bindings (use the dsv4c package).", -1, NULL, NULL, NULL, NULL, NULL,
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
