/* ext.h -- what the files of dsv4c._dsv4c share: the object structs, a
 * tensor argument (tview), one op call (call), and the functions one file
 * calls in another.  The files, by job (docs/python.md):
 *   module.c  the module, its three phases, the Context type;
 *   errors.c  dsv4c.Error and ArgumentError, and messages that start with
 *             the argument's Python name;
 *   tensor.c  tensor intake: DLPack, the array interfaces and the buffer
 *             protocol, checked into a tview; the shape helpers;
 *   torch.c   torch tensors read through torch's own accessors, and
 *             torch's current stream;
 *   call.c    one op call: the kernel it resolves to, its scalars, the
 *             cache geometry, and phases 2 and 3 (bind, launch, release);
 *   ops.c     each op's arguments, parsed and checked against its kernel;
 *   bundle.c  the Bundle and Prepared types. */
#ifndef DSV4C_PY_EXT_H
#define DSV4C_PY_EXT_H

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

#include "dsv4_abi.h"
#include "dsv4rt.h"

/* ---- DLPack (the parts a consumer reads) ---- */

enum { DL_CPU = 1, DL_CUDA = 2, DL_CUDA_HOST = 3, DL_ROCM = 10, DL_CUDA_MANAGED = 13 };
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

/* ---- module state ---- */

extern PyObject *Error, *ArgumentError; /* dsv4c.Error (RuntimeError), dsv4c.ArgumentError (Error, ValueError) */

#define MAXDIM 8

typedef struct {
  PyObject_HEAD
  dsv4rt_context *ctx;
  PyThread_type_lock lock;
  dsv4rt_buffer *scratch; /* stands in for empty tensors (a buffer argument must exist) */
  int cuda, device; /* cuda: a GPU context (CUDA or HIP): device memory, streams */
  int dl;           /* its DLPack device type: DL_CUDA, DL_ROCM (0 on OpenCL) */
  uint64_t stream; /* the stream launches go on when a call names none */
} CtxObject;

/* An op is its dsv4_op (DSV4_OPS in dsv4_abi.h); op_names[op] its spec name ("dequant_gather"). */
extern const char *const op_names[DSV4_OP_COUNT];

typedef struct {
  PyObject_HEAD
  CtxObject *ctx;
  dsv4rt_bundle *b;
  int dflt[DSV4_OP_COUNT]; /* the entry an unnamed call of each op resolves to (-1: not yet) */
} BundleObject;

extern PyObject *CtxType, *BundleType, *PreparedType; /* heap types (the stable ABI has no static ones) */

/* ---- tensors ---- */

enum { DT_BF16, DT_F32, DT_I32, DT_I64, DT_E4M3, DT_CACHE };

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

/* ---- one op call ---- */

#define MAXT 12 /* tensors a call takes, at most (ops.c checks each op's) */

typedef struct {
  int op, entry;
  dsv4_layout L;
  dsv4rt_kernel_info info;
  const char *kernel; /* the name the caller gave, or NULL */
  int want_topk;      /* unnamed: the K the kernel must have (the fused logits_topk's k=; 0: any) */
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
    dsv4rt_mqa_logits_topk_args mlt;
  } a;
} call;

/* ---- what one file calls in another ---- */

/* errors.c */
PyObject *raise_status(dsv4rt_status s, const char *msg);
void name_exception(const char *name);
void name_runtime_argument(int op, dsv4rt_status s, char *msg, size_t cap);

/* tensor.c */
int acquire(CtxObject *c, PyObject *obj, int cls, int use, uint64_t stream, tview *t);
void release(tview *t);
const char *shape_str(const tview *t, char *buf, size_t n);
const char *strides_str(const tview *t, char *buf, size_t n);
int bad_shape(const tview *t, const char *fmt, ...);
int64_t numel(const tview *t);
int need_contig(const tview *t);
int tail_contig(const tview *t, int from);
int finish_view(tview *t, const int64_t *byte_strides, const int64_t *elem_strides);

/* torch.c */
extern PyObject *torch_tensor; /* torch.Tensor, once torch_ready() saw torch imported */
int torch_ready(void);
int from_torch(PyObject *obj, tview *t);
int torch_current_stream(int device, uint64_t *out);
int take_handle(PyObject *h, uint64_t *out);

/* call.c */
int tensor(call *c, CtxObject *ctx, PyObject *obj, const char *name, int cls, int use, int opt, tview **out);
void release_all(call *c);
int resolve(BundleObject *self, call *c);
int64_t token_bytes(const dsv4_layout *L);
int cache_geometry(const call *c, tview *t, PyObject *bs_arg, const char *bs_name, int64_t *nb, int64_t *bs,
                   int64_t *stride);
int check_overlap(const call *c);
dsv4rt_status bind_all(CtxObject *ctx, call *c);
void unbind_all(call *c);
void fill_buffers(CtxObject *ctx, call *c, tview **tv);
dsv4rt_status launch_bound(BundleObject *self, call *c, uint64_t stream, long iters, double *secs);
PyObject *run(BundleObject *self, call *c, tview **tv, long iters, double *secs);
int as_i64(PyObject *o, const char *name, int64_t dflt, int64_t *out);
int as_f32(PyObject *o, const char *name, float dflt, float *out);
int as_int(PyObject *o, const char *name, int dflt, int *out);
int as_flag(PyObject *o, const char *name, int *out);
int parse_stream(CtxObject *ctx, PyObject *o, uint64_t *out);
int begin_call(BundleObject *self, call *c, int op, PyObject *kernel_o, PyObject *cc_o, PyObject *stream);
/* The same for an op whose kernels differ by K (the fused logits_topk):
 * unnamed, the first that runs with K k (0: any). */
int begin_call_k(BundleObject *self, call *c, int op, PyObject *kernel_o, PyObject *cc_o, PyObject *stream, int k);

/* ops.c: each op's tensors, parser and runtime call (ops[op]), the op methods.
 * A tensor argument of an op: name is at once its Python keyword, its field
 * of the op's dsv4rt_<op>_args and its kernel argument in DSV4_ARGS_<OP>;
 * abi is that argument's position DSV4_A_<OP>_<name>, the slot of the
 * call's tv[] it lands in; use is USE_OUT where the kernel argument's kind
 * is PTR (written), USE_IN where it is IN.  ops.c checks all of it against
 * DSV4_ARGS_<OP> when it compiles. */
typedef struct {
  const char *name;
  int abi, cls, use, opt; /* opt: the argument may be None */
  size_t field;           /* offsetof(dsv4rt_<op>_args, name) */
} op_tensor;
typedef int (*parse_fn)(BundleObject *, PyObject *, PyObject *, call *, tview **);
typedef struct {
  const op_tensor *tensors; /* in the order a call takes them */
  int ntensors;
  const op_tensor *runtime; /* DSV4_ARGS_<OP>'s buffers the runtime makes (no Python argument) */
  int nruntime;
  parse_fn parse;
  dsv4rt_status (*launch)(dsv4rt_bundle *b, const void *args, const dsv4rt_launch_opts *opts);
} op_def;
extern const op_def ops[DSV4_OP_COUNT];
int op_index(const char *name);
PyObject *op_table(PyObject *module, PyObject *unused);
PyObject *Bundle_dequant_gather(BundleObject *self, PyObject *args, PyObject *kw);
PyObject *Bundle_paged_gather(BundleObject *self, PyObject *args, PyObject *kw);
PyObject *Bundle_kv_insert(BundleObject *self, PyObject *args, PyObject *kw);
PyObject *Bundle_sparse_decode(BundleObject *self, PyObject *args, PyObject *kw);
PyObject *Bundle_paged_mqa_logits(BundleObject *self, PyObject *args, PyObject *kw);
PyObject *Bundle_topk(BundleObject *self, PyObject *args, PyObject *kw);
PyObject *Bundle_paged_mqa_logits_topk(BundleObject *self, PyObject *args, PyObject *kw);
PyObject *Bundle_bench_c_loop(BundleObject *self, PyObject *args);

/* bundle.c */
extern PyType_Spec Bundle_spec, Prepared_spec;
void free_self(PyObject *self);

#endif
