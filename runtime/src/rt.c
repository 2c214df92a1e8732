/* rt.c -- contexts, buffers and timers of libdsv4rt, and the launch path
 * the ops share (find an entry, load it, launch it); bundle.c reads bundles. */
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

/* The message of the calling thread's last failure that had no context to
 * record it on (a context creation, a call on a NULL handle): one per
 * thread, so that threads creating contexts at once (each its own, as
 * dsv4rt.h allows) neither race on it nor read each other's. */
static _Thread_local char create_err[1024];
_Static_assert(sizeof create_err == sizeof(((dsv4rt_context *)0)->err), "one message size");

dsv4rt_status rt_fail(dsv4rt_context *ctx, dsv4rt_status s, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx ? ctx->err : create_err, sizeof create_err, fmt, ap);
  va_end(ap);
  return s;
}

const char *dsv4rt_last_error(const dsv4rt_context *ctx) { return ctx ? ctx->err : create_err; }

/* An op's spec name ("?" past the known ones): bucket.h's, op 0 "none". */
const char *rt_op_name(uint32_t op) { return op ? dsv4_tune_op_name(op < DSV4_OP_COUNT ? (int)op : -1) : "none"; }

const char *dsv4rt_status_name(dsv4rt_status s)
{
  static const char *const names[] = {"ok", "invalid argument", "no backend", "bad bundle format",
                                      "unsupported bundle version", "no kernel", "backend error",
                                      "out of memory", "i/o error", "null argument",
                                      "buffer of another context", "buffer too small", "out of range",
                                      "misaligned", "aliasing", "not finite", "bad device contents",
                                      "stale tuning"};
  _Static_assert(sizeof names / sizeof *names == DSV4RT_ERR_STALE_TUNING + 1, "a status without a name");
  return (unsigned)s < sizeof names / sizeof *names ? names[s] : "unknown status";
}

/* ---- contexts ---- */

/* Backend set-ups, one at a time in the process: the first OpenCL calls
 * of a process are not safe to make from two threads at once (PoCL 3.1
 * through ocl-icd 2.3.1: threads creating their first contexts together
 * found "no device" while one thread's platform set-up ran, or crashed),
 * and a context is created once, not per launch. */
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

static dsv4rt_status try_backend(const rt_backend *be, int device, dsv4rt_context **out)
{
  dsv4rt_context *ctx = calloc(1, sizeof *ctx);
  if (!ctx)
    return rt_fail(NULL, DSV4RT_ERR_OUT_OF_MEMORY, "out of memory");
  ctx->be = be;
  pthread_mutex_lock(&init_lock);
  int rc = be->init(ctx, device);
  pthread_mutex_unlock(&init_lock);
  if (rc) {
    snprintf(create_err, sizeof create_err, "%s", ctx->err);
    free(ctx);
    return (dsv4rt_status)rc;
  }
  *out = ctx;
  return DSV4RT_OK;
}

dsv4rt_status dsv4rt_context_create(dsv4rt_backend backend, int device, dsv4rt_context **out)
{
  if (!out)
    return rt_fail(NULL, DSV4RT_ERR_INVALID_ARG, "dsv4rt_context_create: out is NULL");
  *out = NULL;
  if (device < 0)
    return rt_fail(NULL, DSV4RT_ERR_INVALID_ARG, "dsv4rt_context_create: device %d is negative", device);
  switch (backend) {
  case DSV4RT_BACKEND_CUDA:
    return try_backend(&rt_cuda_backend, device, out);
  case DSV4RT_BACKEND_OPENCL:
    return try_backend(&rt_opencl_backend, device, out);
  case DSV4RT_BACKEND_HIP:
    return try_backend(&rt_hip_backend, device, out);
  case DSV4RT_BACKEND_AUTO: {
    /* the first that opens a device: CUDA, HIP, then OpenCL (which takes
     * CPUs too) */
    static const rt_backend *const order[] = {&rt_cuda_backend, &rt_hip_backend, &rt_opencl_backend};
    char why[3][330];
    dsv4rt_status s = DSV4RT_ERR_NO_BACKEND;
    for (int i = 0; i < 3; i++) {
      if ((s = try_backend(order[i], device, out)) == DSV4RT_OK)
        return DSV4RT_OK;
      snprintf(why[i], sizeof why[i], "%.320s", create_err);
    }
    return rt_fail(NULL, s, "no usable device: CUDA: %s; HIP: %s; OpenCL: %s", why[0], why[1], why[2]);
  }
  default:
    return rt_fail(NULL, DSV4RT_ERR_INVALID_ARG, "dsv4rt_context_create: unknown backend %d", (int)backend);
  }
}

void dsv4rt_context_destroy(dsv4rt_context *ctx)
{
  if (!ctx)
    return;
  ctx->be->fini(ctx);
  free(ctx);
}

dsv4rt_backend dsv4rt_context_backend(const dsv4rt_context *ctx) { return ctx ? ctx->be->kind : DSV4RT_BACKEND_AUTO; }

static const char *const backend_names[] = {
    [DSV4RT_BACKEND_AUTO] = "auto", [DSV4RT_BACKEND_CUDA] = "cuda", [DSV4RT_BACKEND_OPENCL] = "opencl",
    [DSV4RT_BACKEND_HIP] = "hip"};

const char *dsv4rt_backend_name(dsv4rt_backend be)
{
  return (unsigned)be < sizeof backend_names / sizeof *backend_names ? backend_names[be] : "?";
}

dsv4rt_status dsv4rt_backend_parse(const char *name, dsv4rt_backend *out)
{
  for (unsigned i = 0; name && out && i < sizeof backend_names / sizeof *backend_names; i++)
    if (!strcmp(name, backend_names[i])) {
      *out = (dsv4rt_backend)i;
      return DSV4RT_OK;
    }
  return DSV4RT_ERR_INVALID_ARG;
}
const char *dsv4rt_device_name(const dsv4rt_context *ctx) { return ctx ? ctx->device : ""; }

dsv4rt_status dsv4rt_synchronize(dsv4rt_context *ctx)
{
  if (!ctx)
    return DSV4RT_ERR_INVALID_ARG;
  return (dsv4rt_status)ctx->be->sync(ctx);
}

dsv4rt_status dsv4rt_set_stream(dsv4rt_context *ctx, uint64_t stream)
{
  if (!ctx)
    return rt_fail(NULL, DSV4RT_ERR_INVALID_ARG, "dsv4rt_set_stream: ctx is NULL");
  if (stream && ctx->be->kind == DSV4RT_BACKEND_OPENCL)
    return rt_fail(ctx, DSV4RT_ERR_INVALID_ARG, "dsv4rt_set_stream: %s has one queue; the stream must be 0",
                   ctx->be->name);
  ctx->stream = stream;
  return DSV4RT_OK;
}

uint64_t dsv4rt_get_stream(const dsv4rt_context *ctx) { return ctx ? ctx->stream : 0; }

dsv4rt_status dsv4rt_timer_start(dsv4rt_context *ctx)
{
  if (!ctx)
    return DSV4RT_ERR_INVALID_ARG;
  return (dsv4rt_status)ctx->be->timer_start(ctx);
}

dsv4rt_status dsv4rt_timer_stop(dsv4rt_context *ctx, double *ms)
{
  if (!ctx || !ms)
    return ctx ? rt_fail(ctx, DSV4RT_ERR_INVALID_ARG, "dsv4rt_timer_stop: ms is NULL") : DSV4RT_ERR_INVALID_ARG;
  return (dsv4rt_status)ctx->be->timer_stop(ctx, ms);
}

/* ---- buffers ---- */

dsv4rt_status dsv4rt_buffer_create(dsv4rt_context *ctx, size_t size, dsv4rt_buffer **out)
{
  if (!ctx || !out)
    return rt_fail(ctx, DSV4RT_ERR_NULL_ARG, "dsv4rt_buffer_create: %s is NULL", ctx ? "out" : "ctx");
  *out = NULL;
  if (size == 0)
    return rt_fail(ctx, DSV4RT_ERR_OUT_OF_RANGE, "dsv4rt_buffer_create: size 0");
  dsv4rt_buffer *b = calloc(1, sizeof *b);
  if (!b)
    return rt_fail(ctx, DSV4RT_ERR_OUT_OF_MEMORY, "out of host memory");
  int rc = ctx->be->alloc(ctx, size, &b->native);
  if (rc) {
    free(b);
    return (dsv4rt_status)rc;
  }
  b->ctx = ctx, b->size = size, b->owned = 1;
  *out = b;
  return DSV4RT_OK;
}

dsv4rt_status dsv4rt_buffer_wrap(dsv4rt_context *ctx, uint64_t native, size_t size, dsv4rt_buffer **out)
{
  if (!ctx || !out)
    return rt_fail(ctx, DSV4RT_ERR_NULL_ARG, "dsv4rt_buffer_wrap: %s is NULL", ctx ? "out" : "ctx");
  *out = NULL;
  if (!native)
    return rt_fail(ctx, DSV4RT_ERR_NULL_ARG, "dsv4rt_buffer_wrap: native memory is NULL");
  if (!size)
    return rt_fail(ctx, DSV4RT_ERR_OUT_OF_RANGE, "dsv4rt_buffer_wrap: size 0");
  dsv4rt_buffer *b = calloc(1, sizeof *b);
  if (!b)
    return rt_fail(ctx, DSV4RT_ERR_OUT_OF_MEMORY, "out of host memory");
  b->ctx = ctx, b->native = native, b->size = size, b->owned = 0;
  *out = b;
  return DSV4RT_OK;
}

void dsv4rt_buffer_destroy(dsv4rt_buffer *b)
{
  if (!b)
    return;
  if (b->owned)
    b->ctx->be->release(b->ctx, b->native);
  free(b);
}

size_t dsv4rt_buffer_size(const dsv4rt_buffer *b) { return b ? b->size : 0; }
uint64_t dsv4rt_buffer_native(const dsv4rt_buffer *b) { return b ? b->native : 0; }

/* Range check for a copy of n bytes at offset within buf. */
static dsv4rt_status range(const dsv4rt_buffer *b, size_t off, size_t n, const void *host, const char *fn)
{
  if (!b)
    return rt_fail(NULL, DSV4RT_ERR_NULL_ARG, "%s: buffer is NULL", fn);
  if (!host && n)
    return rt_fail(b->ctx, DSV4RT_ERR_NULL_ARG, "%s: host pointer is NULL", fn);
  if (off > b->size || n > b->size - off)
    return rt_fail(b->ctx, DSV4RT_ERR_OUT_OF_RANGE, "%s: bytes [%zu, %zu + %zu) pass the buffer's %zu bytes", fn, off,
                   off, n, b->size);
  return DSV4RT_OK;
}

dsv4rt_status dsv4rt_buffer_write(dsv4rt_buffer *b, size_t off, const void *src, size_t n)
{
  dsv4rt_status s = range(b, off, n, src, "dsv4rt_buffer_write");
  if (s || !n)
    return s;
  return (dsv4rt_status)b->ctx->be->write(b->ctx, b->native, off, src, n);
}

dsv4rt_status dsv4rt_buffer_read(dsv4rt_buffer *b, size_t off, void *dst, size_t n)
{
  dsv4rt_status s = range(b, off, n, dst, "dsv4rt_buffer_read");
  if (s || !n)
    return s;
  return (dsv4rt_status)b->ctx->be->read(b->ctx, b->native, off, dst, n);
}

static dsv4rt_status copy(dsv4rt_buffer *dst, const dsv4rt_buffer *src, size_t n, int wait)
{
  if (!dst || !src)
    return rt_fail(dst ? dst->ctx : src ? src->ctx : NULL, DSV4RT_ERR_NULL_ARG, "dsv4rt_buffer_copy: %s is NULL",
                   dst ? "src" : "dst");
  if (dst->ctx != src->ctx)
    return rt_fail(dst->ctx, DSV4RT_ERR_WRONG_CONTEXT, "dsv4rt_buffer_copy: buffers of different contexts");
  if (n > dst->size || n > src->size)
    return rt_fail(dst->ctx, DSV4RT_ERR_BUFFER_TOO_SMALL, "dsv4rt_buffer_copy: %zu bytes pass a buffer (%zu, %zu)", n,
                   src->size, dst->size);
  if (!n)
    return DSV4RT_OK;
  /* overlapping ranges: undefined for cuMemcpyDtoD, CL_MEM_COPY_OVERLAP for
   * OpenCL; one buffer or native handle, or (CUDA, HIP: natives are
   * addresses) wrapped ranges that meet */
  uint64_t p = dst->native, q = src->native;
  if (dst == src || p == q ||
      (dst->ctx->be->addresses && (p < q ? q - p < (uint64_t)n : p - q < (uint64_t)n)))
    return rt_fail(dst->ctx, DSV4RT_ERR_ALIASING,
                   "dsv4rt_buffer_copy: dst and src share memory in the %zu bytes copied", n);
  return (dsv4rt_status)dst->ctx->be->copy(dst->ctx, dst->native, src->native, n, wait);
}

dsv4rt_status dsv4rt_buffer_copy(dsv4rt_buffer *dst, const dsv4rt_buffer *src, size_t n)
{
  return copy(dst, src, n, 1);
}
dsv4rt_status dsv4rt_buffer_copy_async(dsv4rt_buffer *dst, const dsv4rt_buffer *src, size_t n)
{
  return copy(dst, src, n, 0);
}

/* The default rule: how well entry e suits a call of this shape when the
 * caller names no kernel (higher is better; ties go to the bundle's order,
 * the spec's).  The one place this is decided, from the launch records
 * alone (no op is named): the warpgroup form, then the warp form, then the
 * logits' row warp-matrix form, then the portable one; CTA pairs first
 * where a token has at least two 64-head groups (V4-Pro's 128 heads: the
 * pair shares each tile's dequantization), else last of the matrix forms
 * (V4-Flash's 64 heads: a pair would dequantize for a CTA of padding).
 * Above all of them the direct warp form (its operands read from the
 * cache) in CTAs of 16 heads where a token's heads fit one and the tokens
 * come three a processor or more: tensor-parallel head counts at serving
 * batches.  On an H200 at 16 heads (bench_decode, one run) it took 123.5
 * us against the 64-head warpgroup form's 138.6 at T 512, 65.8 against
 * 71.0 at T 256, but 42.5 against 37.0 at T 128 and 12.7 against 12.0 at
 * T 8 (its split CTAs each take few tiles); on FlashMLA's V4-Pro tensors
 * at T 256 it lost (104.3 us against 97.2, peer_flashmla_tp.py), so the
 * rule starts above that.  Its 32-head CTA (16 warps) was slower than the
 * warpgroup form at 32 heads at every T measured.  Elsewhere it ranks
 * with the portable form.  A
 * form whose CTA holds every next_n row of a batch entry cannot take more
 * than DSV4_LOGITS_MAX_NEXT_N of them: -1 then (MTP with next_n 3 runs
 * the row forms).  The split count is decode_splits' (ops.c).  Measured
 * choices from a tuned bundle or lockfile come first where they exist. */
int rt_default_rank(const dsv4_bundle_entry *e, int64_t heads, int64_t next_n, int64_t tokens, int units)
{
  if (e->launch.grid == DSV4_GRID_POSITIONS_BATCH && next_n > DSV4_LOGITS_MAX_NEXT_N)
    return -1;
  switch (e->launch.form) {
  case DSV4_FORM_WARPGROUP_PAIR:
    return heads >= 2 * 64 ? 4 : 1;
  case DSV4_FORM_WARPGROUP:
    return 3;
  case DSV4_FORM_WARP_DIRECT:
    return heads > 0 && heads <= e->tokens_per_cta && e->tokens_per_cta <= 16 && tokens >= 3 * (int64_t)units
               ? 5
               : 0;
  case DSV4_FORM_WARP:
    return 2;
  case DSV4_FORM_ROW_WARP:
    return 1;
  default:
    return 0;
  }
}

/* Dim `name` of shape s (bucket.h's names), 0 where s has none. */
static int64_t dim_of(const dsv4_shape *s, const char *name)
{
  const char *const *names;
  int n = s ? dsv4_shape_names(s->op, &names) : 0;
  for (int i = 0; i < n && i < s->n; i++)
    if (!strcmp(names[i], name))
      return s->dim[i];
  return 0;
}

/* Among entries the rule ranks equal, whether m fills the device better
 * than e for a call of shape s: for the logits' batch forms (a CTA every
 * next_n row of a batch entry, tokens_per_cta positions), the largest step
 * whose grid (B x ceil(L / step)) reaches twice the processors, else the
 * smallest.  A small batch on 1024-position CTAs leaves most of the device
 * idle: on an H200, B 1 / 8K takes 11.1 us at 1024 positions a CTA and 5.0
 * at 256; B 8 / 32K 15.9 at 1024, 13.6 at 512; at B 128 / 32K the 1024
 * step is the fastest (bench/RESULTS.md).  The fused logits_topk's
 * warpgroup kernels the same by their chunks, reaching the processors once. */
static int fills_better(const dsv4rt_bundle *b, const dsv4_bundle_entry *m, const dsv4_bundle_entry *e,
                        const dsv4_shape *s)
{
  if (!s || m->launch.grid != DSV4_GRID_POSITIONS_BATCH || e->launch.grid != m->launch.grid ||
      m->tokens_per_cta == e->tokens_per_cta)
    return 0;
  /* the fused logits_topk: once the processors (its CTAs hold more; H200,
   * K 512: B 1 / 1M 68.0 us at 4096 positions a CTA, 94.4 at 2048; B 1 /
   * 128K 29.6 at 512, 56.5 at 4096) */
  int64_t fill = m->op == DSV4_OP_PAGED_MQA_LOGITS_TOPK ? 1 : 2;
  int64_t B = dim_of(s, "B"), L = dim_of(s, "L"), want = fill * (int64_t)b->ctx->units;
  int64_t gm = B * ((L + m->tokens_per_cta - 1) / m->tokens_per_cta);
  int64_t ge = B * ((L + e->tokens_per_cta - 1) / e->tokens_per_cta);
  int fm = gm >= want, fe = ge >= want;
  if (fm != fe)
    return fm;
  return fm ? m->tokens_per_cta > e->tokens_per_cta : m->tokens_per_cta < e->tokens_per_cta;
}

int rt_accepts(const dsv4rt_bundle *b, int i, char *why, size_t n)
{
  if (why && n)
    why[0] = 0;
  const dsv4_bundle_entry *e = &b->entries[i];
  return b->ctx->be->accepts(b->ctx, e, b->data + e->code_off, why, n) ? 1 : 0;
}

int rt_first_runnable(const dsv4rt_bundle *b, dsv4_op op)
{
  for (int i = 0; i < b->n; i++)
    if (b->entries[i].op == (uint32_t)op && rt_accepts(b, i, NULL, 0))
      return i;
  return -1;
}

dsv4rt_status rt_find(dsv4rt_bundle *b, dsv4_op op, const char *name, const dsv4_shape *shape, int *entry)
{
  int64_t heads = dim_of(shape, "H"), next_n = dim_of(shape, "next_n"), tokens = dim_of(shape, "T");
  int units = b->ctx->units;
  int named = 0;
  int64_t want_k = name ? 0 : dim_of(shape, "K"); /* (the fused logits_topk: the K asked for) */
  char why[512] = "", w[512];
  for (int i = 0; i < b->n; i++) {
    const dsv4_bundle_entry *e = &b->entries[i];
    if (name && strcmp(e->name, name))
      continue;
    named = 1;
    if (e->op != (uint32_t)op || (want_k && e->topk != want_k))
      continue;
    if (!rt_accepts(b, i, w, sizeof w)) {
      if (!why[0]) /* the first entry refused for more than its target: said in the message */
        snprintf(why, sizeof why, "%s", w);
      continue;
    }
    *entry = i;
    /* unnamed: the best-ranked entry of the same op, layout and op
     * fields (the first one found fixes them: the caller's buffers are
     * laid out for it) that runs here */
    int best = rt_default_rank(e, heads, next_n, tokens, units);
    for (int j = i + 1; !name && j < b->n; j++) {
      const dsv4_bundle_entry *m = &b->entries[j];
      int r = rt_default_rank(m, heads, next_n, tokens, units);
      int better = r > best || (r == best && fills_better(b, m, &b->entries[*entry], shape));
      if (better && m->op == e->op && m->v_dim == e->v_dim && m->heads == e->heads && m->topk == e->topk &&
          !strcmp(m->layout.name, e->layout.name) && rt_accepts(b, j, NULL, 0))
        *entry = j, best = r;
    }
    return DSV4RT_OK;
  }
  if (name && !named)
    return rt_fail(b->ctx, DSV4RT_ERR_NO_KERNEL, "the bundle has no kernel named '%s'", name);
  /* name what the bundle has instead: the archs of the op's kernels */
  char archs[200] = "";
  size_t at = 0;
  for (int i = 0; i < b->n && at < sizeof archs - 24; i++) {
    const dsv4_bundle_entry *e = &b->entries[i];
    int seen = e->op != (uint32_t)op || (name && strcmp(e->name, name));
    for (int j = 0; j < i && !seen; j++)
      seen = b->entries[j].op == (uint32_t)op && (!name || !strcmp(b->entries[j].name, name)) &&
             !strcmp(b->entries[j].arch, e->arch);
    if (!seen)
      at += (size_t)snprintf(archs + at, sizeof archs - at, "%s%.15s", at ? ", " : "", e->arch);
  }
  return rt_fail(b->ctx, DSV4RT_ERR_NO_KERNEL, "the bundle has no %s kernel%s%s that runs on %s (%s)%s%s%s%s%s",
                 rt_op_name(op), name ? " named " : "", name ? name : "", b->ctx->device, b->ctx->be->name,
                 why[0] ? ": " : "", why, at ? "; its kernels are for " : "", archs,
                 at && !why[0] ? " (or do not fit this device's limits)" : "");
}

dsv4rt_status rt_load(dsv4rt_bundle *b, int i)
{
  dsv4rt_context *ctx = b->ctx;
  rt_loaded *ld = &b->loaded[i];
  const dsv4_bundle_entry *e = &b->entries[i];
  if (ld->loaded == -1)
    return rt_fail(ctx, DSV4RT_ERR_BACKEND, "kernel %s failed to load earlier: %s", e->name, ld->why ? ld->why : "");
  if (ld->loaded == 1)
    return DSV4RT_OK;
  int rc = ctx->be->load(ctx, e, b->data + e->code_off, e->aux_len ? b->data + e->aux_off : NULL, &ld->module,
                         &ld->kernel);
  if (!rc && dsv4_second_suffix(e->launch.second)) { /* the second kernel: a combine, a merge */
    char name[sizeof e->name + 16];
    snprintf(name, sizeof name, "%s%s", e->name, dsv4_second_suffix(e->launch.second));
    rc = ctx->be->symbol
             ? ctx->be->symbol(ctx, ld->module, name, &ld->kernel2)
             : (int)rt_fail(ctx, DSV4RT_ERR_BACKEND, "kernel %s: %s cannot look up %s", e->name, ctx->be->name, name);
    if (rc)
      ctx->be->unload(ctx, ld->module, ld->kernel);
  }
  ld->loaded = rc ? -1 : 1;
  if (rc) /* kept, so that every later launch says what the driver said */
    ld->why = strdup(ctx->err);
  return (dsv4rt_status)rc;
}

/* The arguments the runtime built against the signature the kernel was
 * built for: the entry's (checked against dsv4_abi.h when the bundle was
 * opened) or its second kernel's.  A mismatch is a runtime bug (ops.c
 * places arguments by the DSV4_A_* positions, so a slot it missed has kind
 * 0): refused before any launch. */
static dsv4rt_status check_signature(const dsv4rt_bundle *b, int i, int second, const rt_arg *args, int nargs)
{
  const dsv4_bundle_entry *e = &b->entries[i];
  unsigned char kinds[DSV4_MAX_ARGS];
  int n = second ? dsv4_second_args(e->launch.second, kinds, NULL) : (int)e->nargs;
  const unsigned char *want = second ? kinds : e->args;
  for (int a = 0; a < nargs && a < n; a++)
    if (args[a].kind != want[a])
      return rt_fail(b->ctx, DSV4RT_ERR_INVALID_ARG,
                     "kernel %s%s: argument %d has kind %d where its signature has %d (a runtime bug)", e->name,
                     second ? dsv4_second_suffix(e->launch.second) : "", a, args[a].kind, want[a]);
  if (nargs != n)
    return rt_fail(b->ctx, DSV4RT_ERR_INVALID_ARG,
                   "kernel %s%s: %d arguments where its signature has %d (a runtime bug)", e->name,
                   second ? dsv4_second_suffix(e->launch.second) : "", nargs, n);
  return DSV4RT_OK;
}

/* Entry i's code loaded, launch its first or second kernel (an empty grid
 * launches nothing). */
static dsv4rt_status launch(dsv4rt_bundle *b, int i, int second, const uint32_t grid[3], uint32_t threads,
                            uint32_t shared, uint32_t cluster, const rt_arg *args, int nargs)
{
  dsv4rt_status s = check_signature(b, i, second, args, nargs);
  if (s || (s = rt_load(b, i)))
    return s;
  void *kernel = second ? b->loaded[i].kernel2 : b->loaded[i].kernel;
  if (!kernel)
    return rt_fail(b->ctx, DSV4RT_ERR_BACKEND, "kernel %s has no second kernel", b->entries[i].name);
  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0)
    return DSV4RT_OK; /* nothing to do */
  uint32_t block[3] = {threads, 1, 1};
  if (cluster < 1 || grid[0] % cluster)
    return rt_fail(b->ctx, DSV4RT_ERR_INVALID_ARG, "kernel %s: a grid of %u CTAs does not divide into clusters of %u",
                   b->entries[i].name, grid[0], cluster);
  unsigned early =
      b->entries[i].flags & (second ? DSV4_ENTRY_SECOND_WAITS : DSV4_ENTRY_FIRST_WAITS) ? RT_LAUNCH_EARLY : 0;
  return (dsv4rt_status)b->ctx->be->launch(b->ctx, kernel, grid, block, shared, cluster, early, args, nargs);
}

/* Entry i's first kernel by its launch record (threads, shared memory,
 * cluster); grid.x must be a multiple of the cluster. */
dsv4rt_status rt_launch(dsv4rt_bundle *b, int i, const uint32_t grid[3], const rt_arg *args, int nargs)
{
  const dsv4_launch *ln = &b->entries[i].launch;
  return launch(b, i, 0, grid, ln->threads, ln->shared_bytes, ln->cluster, args, nargs);
}

dsv4rt_status rt_launch_shared(dsv4rt_bundle *b, int i, const uint32_t grid[3], uint32_t shared, const rt_arg *args,
                               int nargs)
{
  const dsv4_launch *ln = &b->entries[i].launch;
  if (shared > ln->shared_bytes)
    return rt_fail(b->ctx, DSV4RT_ERR_INVALID_ARG, "kernel %s: %u bytes of shared memory asked, its record has %u",
                   b->entries[i].name, shared, ln->shared_bytes);
  return launch(b, i, 0, grid, ln->threads, shared, ln->cluster, args, nargs);
}

/* Its second kernel (the record's second_threads a CTA). */
dsv4rt_status rt_launch2(dsv4rt_bundle *b, int i, const uint32_t grid[3], const rt_arg *args, int nargs)
{
  return launch(b, i, 1, grid, b->entries[i].launch.second_threads, 0, 1, args, nargs);
}

dsv4rt_status rt_tensor_map(dsv4rt_bundle *b, int i, uint64_t base, const uint64_t dims[3], const uint64_t strides[2],
                            const uint32_t box[3], int swizzle, dsv4rt_buffer **buf, int **fresh)
{
  dsv4rt_context *ctx = b->ctx;
  rt_loaded *ld = &b->loaded[i];
  uint64_t key[9] = {base, dims[0], dims[1], dims[2], strides[0], strides[1],
                     box[0] | (uint64_t)box[1] << 32, box[2], (uint64_t)swizzle};
  int k = 0;
  while (k < RT_MAP_SLOTS && !(ld->maps[k] && !memcmp(ld->map_key[k], key, sizeof key)))
    k++;
  if (k == RT_MAP_SLOTS) { /* a new map, into the oldest slot */
    if (!ctx->be->tensor_map || !ctx->tensor_maps)
      return rt_fail(ctx, DSV4RT_ERR_BACKEND, "no tensor maps on %s (%s)", ctx->device, ctx->be->name);
    uint8_t map[128];
    dsv4rt_status s;
    k = ld->map_next;
    if ((s = (dsv4rt_status)ctx->be->tensor_map(ctx, base, dims, strides, box, swizzle, map)) ||
        (!ld->maps[k] && (s = dsv4rt_buffer_create(ctx, 128, &ld->maps[k]))))
      return s;
    memset(ld->map_key[k], 0, sizeof key);
    if ((s = dsv4rt_buffer_write(ld->maps[k], 0, map, 128)))
      return s;
    memcpy(ld->map_key[k], key, sizeof key);
    ld->map_fresh[k] = 1;
    ld->map_next = (k + 1) % RT_MAP_SLOTS;
  }
  *buf = ld->maps[k], *fresh = &ld->map_fresh[k];
  return DSV4RT_OK;
}

/* A work buffer of at least n bytes in *slot (grown), its first `zero`
 * bytes set to 0 where it is made. */
static dsv4rt_status grow(dsv4rt_bundle *b, dsv4rt_buffer **slot, size_t n, size_t zero)
{
  if (*slot && (*slot)->size >= n)
    return DSV4RT_OK;
  dsv4rt_buffer *w = NULL;
  dsv4rt_status s = dsv4rt_buffer_create(b->ctx, n, &w);
  if (s)
    return s;
  if (zero) { /* once, from the host: the kernels keep it so */
    void *z = calloc(1, zero);
    s = z ? dsv4rt_buffer_write(w, 0, z, zero) : rt_fail(b->ctx, DSV4RT_ERR_OUT_OF_MEMORY, "out of host memory");
    free(z);
    if (s) {
      dsv4rt_buffer_destroy(w);
      return s;
    }
  }
  dsv4rt_buffer_destroy(*slot); /* waits for launches that use it: the backends free synchronously */
  *slot = w;
  return DSV4RT_OK;
}

dsv4rt_status rt_work(dsv4rt_bundle *b, int i, size_t n, dsv4rt_buffer **out)
{
  dsv4rt_status s = grow(b, &b->loaded[i].work, n, 0);
  *out = b->loaded[i].work;
  return s;
}

void rt_zeroed_drop(dsv4rt_bundle *b, int i)
{
  dsv4rt_buffer_destroy(b->loaded[i].zeroed);
  b->loaded[i].zeroed = NULL;
}

dsv4rt_status rt_zeroed(dsv4rt_bundle *b, int i, size_t n, dsv4rt_buffer **out)
{
  dsv4rt_status s = grow(b, &b->loaded[i].zeroed, n, n);
  *out = b->loaded[i].zeroed;
  return s;
}
