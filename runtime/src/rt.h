/* rt.h -- libdsv4rt internals: the context, buffers, bundles, and the
 * backend table each vendor file (cuda.c, hip.c, opencl.c) fills. */
#ifndef DSV4RT_INTERNAL_H
#define DSV4RT_INTERNAL_H

#include "dsv4_abi.h"
#include "dsv4rt.h"
#include "bucket.h" /* dsv4_shape: the shape of a call, tuning's and the default rule's */

#define RT_MAX_ENTRIES DSV4_BUNDLE_MAX_ENTRIES

typedef struct rt_arg {
  int kind; /* dsv4_arg_kind */
  union {
    const dsv4rt_buffer *buf;
    int32_t i32;
    int64_t i64;
    float f32;
  } v;
} rt_arg;

/* Launch flags.  EARLY: the kernel itself waits for the grid launched
 * before it in the stream (DSV4_ENTRY_*_WAITS), so the backend may
 * start placing its CTAs before that grid ends (CUDA: programmatic stream
 * serialization); a backend without that launches it as usual. */
enum { RT_LAUNCH_EARLY = 1 };

typedef struct rt_backend {
  dsv4rt_backend kind;
  const char *name;
  int addresses; /* a buffer's native is a device address (CUDA, HIP): wrapped ranges can overlap or misalign */
  int (*init)(dsv4rt_context *ctx, int device);
  void (*fini)(dsv4rt_context *ctx);
  int (*alloc)(dsv4rt_context *ctx, size_t n, uint64_t *native);
  void (*release)(dsv4rt_context *ctx, uint64_t native);
  int (*write)(dsv4rt_context *ctx, uint64_t native, size_t off, const void *src, size_t n);
  int (*read)(dsv4rt_context *ctx, uint64_t native, size_t off, void *dst, size_t n);
  int (*copy)(dsv4rt_context *ctx, uint64_t dst, uint64_t src, size_t n, int wait);
  /* 1 if entry e's code runs on this device (target, arch, launch record,
   * and what its code requires: a SPIR-V sub-group size); 0 where it does
   * not, with why (n bytes; NULL: not asked) saying so where the reason is
   * more than the target or arch (rt_accepts calls it) */
  int (*accepts)(dsv4rt_context *ctx, const dsv4_bundle_entry *e, const uint8_t *code, char *why, size_t n);
  /* load entry e's code; *kernel is the backend's handle */
  int (*load)(dsv4rt_context *ctx, const dsv4_bundle_entry *e, const uint8_t *code, const uint8_t *aux,
              void **module, void **kernel);
  void (*unload)(dsv4rt_context *ctx, void *module, void *kernel);
  /* a further kernel of a loaded module by name (NULL: the backend has none) */
  int (*symbol)(dsv4rt_context *ctx, void *module, const char *name, void **kernel);
  /* shared: dynamic shared memory bytes (0 unless the entry says);
   * cluster: CTAs a cluster along x (1: none; entries that need clusters,
   * CTA pairs, are refused by accepts() where the backend has none: their
   * CTAs wait on each other and cannot run alone); flags: RT_LAUNCH_* */
  int (*launch)(dsv4rt_context *ctx, void *kernel, const uint32_t grid[3], const uint32_t block[3],
                uint32_t shared, uint32_t cluster, unsigned flags, const rt_arg *args, int nargs);
  /* optional: encode a tensor map (the 128-byte CUDA descriptor TMA copies
   * read) of a rank-3 tensor of bytes at device address base: dims[0] bytes
   * a row (contiguous), dims[1] rows of strides[0] bytes, dims[2] of
   * strides[1]; boxes of box[3] elements, swizzled in swizzle-byte spans
   * (64 or 128), out-of-bounds elements read as 0.  0 or a status (the
   * message set). */
  int (*tensor_map)(dsv4rt_context *ctx, uint64_t base, const uint64_t dims[3], const uint64_t strides[2],
                    const uint32_t box[3], int swizzle, uint8_t out[128]);
  int (*sync)(dsv4rt_context *ctx);
  int (*timer_start)(dsv4rt_context *ctx);
  int (*timer_stop)(dsv4rt_context *ctx, double *ms);
} rt_backend;

struct dsv4rt_context {
  const rt_backend *be;
  void *state; /* the backend's */
  int units; /* compute units (SMs): how many CTAs fill the device */
  int tensor_maps; /* 1: the backend's tensor_map() works on this device (CUDA 12 driver, sm_90 on) */
  uint64_t stream; /* dsv4rt_set_stream: the CUstream launches, copies and timers go on (0: the legacy default
                      stream); always 0 on OpenCL */
  char device[256];
  char err[1024];
};

struct dsv4rt_buffer {
  dsv4rt_context *ctx;
  uint64_t native; /* CUdeviceptr or cl_mem */
  size_t size;
  int owned;
};

#define RT_MAP_SLOTS 8

typedef struct {
  void *module, *kernel;
  void *kernel2;        /* sparse_decode matrix form: <name>_combine */
  dsv4rt_buffer *work;  /* its split-KV work space, grown on demand */
  dsv4rt_buffer *zeroed; /* work space its kernels leave as they found it: made zero (rt_zeroed) */
  dsv4rt_buffer *maps[RT_MAP_SLOTS]; /* paged_mqa_logits: tensor maps in device memory, one a slot */
  uint64_t map_key[RT_MAP_SLOTS][9]; /* ... what each encodes (rt_tensor_map's arguments; unused: all zero) */
  int map_next;         /* the slot the next new map replaces */
  int map_fresh[RT_MAP_SLOTS]; /* written since a launch last read it */
  int loaded; /* 0 not yet, 1 loaded, -1 failed */
  char *why;  /* the failed load's message (malloc'd; NULL when none) */
} rt_loaded;

/* A bundle: its bytes and its entries, every field checked when it was
 * opened.  Opening (dsv4rt_bundle_open_memory) and destroying a bundle
 * nothing was loaded from never call the backend (bar the accepts test of
 * a choice record naming the context's GPU model, which a stub's empty
 * device name never matches): they touch only the context's message, so
 * tests parse bundles on a stub context (a zeroed dsv4rt_context) without
 * a device. */
struct dsv4rt_bundle {
  dsv4rt_context *ctx;
  uint8_t *data;
  size_t size;
  int n;
  dsv4_bundle_entry entries[RT_MAX_ENTRIES];
  rt_loaded loaded[RT_MAX_ENTRIES];
  int nrecords; /* choice records in the file (after the entry table; checked) */
  /* tuning (choice.c): the choice records of the context's GPU model,
   * installed on open, then what dsv4rt_bundle_load_tuning loads over
   * them; held inline, so that destroying the bundle frees nothing more */
  int nchoices;
  struct rt_choice {
    uint32_t op;
    int n;
    int64_t dim[5]; /* the bucket */
    int entry;      /* the kernel calls of that bucket run */
  } choices[512];
};

/* Record an error message on ctx and return status s. */
dsv4rt_status rt_fail(dsv4rt_context *ctx, dsv4rt_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Launch entry e of bundle b (loading it first if needed) by its launch
 * record: threads, dynamic shared memory, clusters of `cluster` CTAs
 * along x (grid[0] a multiple). */
dsv4rt_status rt_launch(dsv4rt_bundle *b, int entry, const uint32_t grid[3], const rt_arg *args, int nargs);
/* The same with `shared` bytes of dynamic shared memory, at most the
 * record's (a kernel whose use depends on the call: the fused
 * logits_topk's warpgroup form holds next_n rows' chunks of the
 * DSV4_LOGITS_MAX_NEXT_N the record counts). */
dsv4rt_status rt_launch_shared(dsv4rt_bundle *b, int entry, const uint32_t grid[3], uint32_t shared,
                               const rt_arg *args, int nargs);
/* Load entry's code if not yet (0 or a status). */
dsv4rt_status rt_load(dsv4rt_bundle *b, int entry);
/* Launch entry's second kernel (kernel2) with the record's second_threads
 * and no dynamic shared memory. */
dsv4rt_status rt_launch2(dsv4rt_bundle *b, int entry, const uint32_t grid[3], const rt_arg *args, int nargs);
/* 1 if entry e is in a form tile.matrix asks for (warp, warpgroup, pair). */
static inline int rt_matrix_form(const dsv4_bundle_entry *e)
{
  return e->launch.form == DSV4_FORM_WARP || e->launch.form == DSV4_FORM_WARP_DIRECT ||
         e->launch.form == DSV4_FORM_WARPGROUP ||
         e->launch.form == DSV4_FORM_WARPGROUP_PAIR;
}
/* A device copy of the tensor map the backend's tensor_map() encodes from
 * these arguments, for entry's launches: one of the entry's slots, encoded
 * and written (synchronously, after the launches that read the slot) only
 * when no slot holds it; **fresh is 1 until a launch has read the slot
 * since it was written (the kernel must then acquire the map: the host
 * wrote it), for the caller to clear once its launch is queued. */
dsv4rt_status rt_tensor_map(dsv4rt_bundle *b, int entry, uint64_t base, const uint64_t dims[3],
                            const uint64_t strides[2], const uint32_t box[3], int swizzle, dsv4rt_buffer **buf,
                            int **fresh);
/* Entry's work space of at least n bytes (grown, contents undefined). */
dsv4rt_status rt_work(dsv4rt_bundle *b, int entry, size_t n, dsv4rt_buffer **out);
/* Its second, of at least n bytes, all 0 when made (grown: made again);
 * its kernels set back to 0 what they use (paged_mqa_logits_topk's
 * histograms). */
dsv4rt_status rt_zeroed(dsv4rt_bundle *b, int entry, size_t n, dsv4rt_buffer **out);
/* Forget it (a launch that would have set it back to 0 failed). */
void rt_zeroed_drop(dsv4rt_bundle *b, int entry);
/* The spec name of an op number ("?" when unknown). */
const char *rt_op_name(uint32_t op);
/* 1 if entry i of b runs on b's device (the backend's accepts, with the
 * entry's code); 0 with why (may be NULL) as accepts left it ("" if it said nothing). */
int rt_accepts(const dsv4rt_bundle *b, int i, char *why, size_t n);
/* The first entry of op that runs on b's device, or -1: it fixes the
 * layout and op fields an unnamed call's kernel must have. */
int rt_first_runnable(const dsv4rt_bundle *b, dsv4_op op);
/* The default rule's rank of entry e for a call of `heads` heads and
 * `next_n` rows a batch entry (0 where the op has none; rt.c). */
int rt_default_rank(const dsv4_bundle_entry *e, int64_t heads, int64_t next_n, int64_t tokens, int units);
/* Find the entry for op (and name, if given) that runs on b's device; an
 * unnamed call of shape s (NULL: unknown) gets the default rule's best. */
dsv4rt_status rt_find(dsv4rt_bundle *b, dsv4_op op, const char *name, const dsv4_shape *s, int *entry);

/* dlopen-style loading behind three functions (dl.c). */
void *rt_dlopen(const char *const *names);
void *rt_dlsym(void *lib, const char *sym);
void rt_dlclose(void *lib);

extern const rt_backend rt_cuda_backend, rt_opencl_backend, rt_hip_backend;

#endif
