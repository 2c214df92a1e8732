/* test_validate.c -- every bad launch is refused (issue 24): for each op, a
 * valid argument set that launches, then a table of bad ones, each with the
 * exact status it must get, a piece of the message naming the argument, and
 * proof that nothing was written.
 *
 *   test_validate KERNEL_DIR OTHER_TARGET_DIR opencl|cuda|hip
 *
 * KERNEL_DIR holds decode.dsv4b (the gathers, the writer, the decode),
 * indexer.dsv4b (logits, top-k) and gather_layouts.dsv4b (a per-tensor
 * gather, for tensor_scale); OTHER_TARGET_DIR the first two built for
 * AMDGCN only, which neither backend runs.  Before every row each output
 * buffer (kv_insert's cache included) is filled with a byte pattern, and
 * any buffer a row wraps anew is read; after the call and a synchronize
 * all of them are read back and compared byte for byte.  The valid launch
 * must change every output, so a row whose launch went through would be
 * seen.  Rows that need raw device addresses (misaligned and partly
 * overlapping wrapped memory) run where buffers are addresses: CUDA, HIP.  No device for the backend:
 * exit 77 (skipped).
 *
 * On the fake HIP runtime (tests/unit/fake_libamdhip64.c: no kernel runs)
 * the valid launch is seen in its launch records instead of its outputs:
 * every valid call must add launches, every refused one none, and the
 * fake must have found no kernarg block that disagrees with its code
 * object and no pointer outside an allocation.  OTHER_TARGET_DIR is then a
 * folder of bundles without AMDGCN code.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4rt.h"
#include "harness.h"

#define POISON 0xA5
#define SLACK 64 /* bytes past each fixture buffer: room to wrap it at an offset */

typedef dsv4rt_dequant_gather_args DG;
typedef dsv4rt_paged_gather_args PG;
typedef dsv4rt_kv_insert_args KI;
typedef dsv4rt_sparse_decode_args SD;
typedef dsv4rt_mqa_logits_args LG;
typedef dsv4rt_topk_args TK;
typedef dsv4rt_mqa_logits_topk_args LT;

/* The argument struct of any op. */
typedef union {
  DG dg;
  PG pg;
  KI ki;
  SD sd;
  LG lg;
  TK tk;
  LT lt;
} any_args;

static dsv4rt_context *ctx2; /* a second context: its buffers belong to another */
static int addresses; /* buffers are device addresses (CUDA, HIP): wrapped memory can overlap or misalign */
static int fake; /* the fake HIP runtime: launches are counted, not run */

/* The fake's launch count (0 elsewhere), and no disagreement found. */
static int launches(const char *fn, const char *what)
{
  char why[512];
  int v = harness_fake_violations(why, sizeof why);
  CHECK(v == 0, "%s: %s: the fake HIP runtime found %d disagreement(s), the last: %s", fn, what, v, why);
  return fake ? harness_launches() : 0;
}

/* ---- the table's vocabulary ---- */

typedef enum {
  M_NONE,
  M_I64,        /* the int64 field = v */
  M_F32,        /* the float field = f */
  M_NULL,       /* the buffer field = NULL */
  M_CTX2,       /* the buffer field = a buffer of the same size in ctx2 */
  M_SMALL,      /* the buffer field = a fresh 16-byte buffer */
  M_SAME,       /* the buffer field = the buffer of field `aux` (the same object) */
  M_WRAP,       /* the buffer field = the memory of field `aux` wrapped anew at byte offset v */
  M_PUT32,      /* element `aux` of the buffer field's int32 array = v (checked mode rows) */
  M_PUT64,      /* ... of its int64 array */
  M_NO_BUNDLE,  /* launch on a NULL bundle */
  M_NO_ARGS,    /* launch with NULL args */
  M_OTHER,      /* launch on the bundle built for another target */
  M_NAME,       /* launch naming a kernel the bundle lacks */
} mkind;

typedef struct {
  mkind k;
  size_t field, aux;
  int64_t v;
  float f;
} mut;

enum { CHECKED = 1, ADDRESSES = 2, PORTABLE_ONLY = 4 /* the op's portable form only */ };

typedef struct {
  const char *what;
  mut m[3];
  int flags;
  dsv4rt_status want;
  const char *msg; /* in the message (with the op's name for %s); the function's name must be there too */
} row;

#define I64(f, x) {M_I64, offsetof(A_, f), 0, (x), 0}
#define F32(f, x) {M_F32, offsetof(A_, f), 0, 0, (x)}
#define NUL(f) {M_NULL, offsetof(A_, f), 0, 0, 0}
#define CTX2(f) {M_CTX2, offsetof(A_, f), 0, 0, 0}
#define SMALL(f) {M_SMALL, offsetof(A_, f), 0, 0, 0}
#define SAME(f, g) {M_SAME, offsetof(A_, f), offsetof(A_, g), 0, 0}
#define WRAP(f, g, off) {M_WRAP, offsetof(A_, f), offsetof(A_, g), (off), 0}
#define PUT32(f, i, x) {M_PUT32, offsetof(A_, f), (i), (x), 0}
#define PUT64(f, i, x) {M_PUT64, offsetof(A_, f), (i), (x), 0}

#define E_NULL DSV4RT_ERR_NULL_ARG
#define E_CTX DSV4RT_ERR_WRONG_CONTEXT
#define E_SMALL DSV4RT_ERR_BUFFER_TOO_SMALL
#define E_RANGE DSV4RT_ERR_OUT_OF_RANGE
#define E_ALIGN DSV4RT_ERR_MISALIGNED
#define E_ALIAS DSV4RT_ERR_ALIASING
#define E_FINITE DSV4RT_ERR_NOT_FINITE
#define E_BAD DSV4RT_ERR_BAD_CONTENTS
#define HUGE_N ((int64_t)1 << 40)

/* Rows every op gets. */
static const row common_rows[] = {
    {"NULL bundle", {{M_NO_BUNDLE, 0, 0, 0, 0}}, 0, E_NULL, "bundle is NULL"},
    {"NULL args", {{M_NO_ARGS, 0, 0, 0, 0}}, 0, E_NULL, "args is NULL"},
    {"bundle of another target", {{M_OTHER, 0, 0, 0, 0}}, 0, DSV4RT_ERR_NO_KERNEL, "no %s kernel"},
    {"unknown kernel name", {{M_NAME, 0, 0, 0, 0}}, 0, DSV4RT_ERR_NO_KERNEL, "no_such_kernel"},
};

/* ---- one op under test ---- */

typedef struct {
  const char *op, *fn; /* the op (as the bundle names it) and its function (in messages) */
  kern k;              /* the kernel launched: the first of the op that the device runs */
  dsv4rt_bundle *b, *other;
  dsv4rt_status (*launch)(dsv4rt_bundle *, const any_args *, const dsv4rt_launch_opts *);
  any_args ok;
  dsv4rt_buffer *out[3];
  dsv4rt_buffer *own[12];
  int nout, nown;
} fixture;

static dsv4rt_status go_dg(dsv4rt_bundle *b, const any_args *a, const dsv4rt_launch_opts *o)
{
  return dsv4rt_dequant_gather(b, a ? &a->dg : NULL, o);
}
static dsv4rt_status go_pg(dsv4rt_bundle *b, const any_args *a, const dsv4rt_launch_opts *o)
{
  return dsv4rt_paged_gather(b, a ? &a->pg : NULL, o);
}
static dsv4rt_status go_ki(dsv4rt_bundle *b, const any_args *a, const dsv4rt_launch_opts *o)
{
  return dsv4rt_kv_insert(b, a ? &a->ki : NULL, o);
}
static dsv4rt_status go_sd(dsv4rt_bundle *b, const any_args *a, const dsv4rt_launch_opts *o)
{
  return dsv4rt_sparse_decode(b, a ? &a->sd : NULL, o);
}
static dsv4rt_status go_lg(dsv4rt_bundle *b, const any_args *a, const dsv4rt_launch_opts *o)
{
  return dsv4rt_paged_mqa_logits(b, a ? &a->lg : NULL, o);
}
static dsv4rt_status go_tk(dsv4rt_bundle *b, const any_args *a, const dsv4rt_launch_opts *o)
{
  return dsv4rt_topk(b, a ? &a->tk : NULL, o);
}
static dsv4rt_status go_lt(dsv4rt_bundle *b, const any_args *a, const dsv4rt_launch_opts *o)
{
  return dsv4rt_paged_mqa_logits_topk(b, a ? &a->lt : NULL, o);
}

/* A fixture buffer of n bytes (plus SLACK), holding host when given, else
 * zeros; out: a launch writes it. */
static dsv4rt_buffer *fbuf(fixture *f, const void *host, size_t n, int out)
{
  uint8_t *z = calloc(1, n + SLACK);
  if (host)
    memcpy(z, host, n);
  dsv4rt_buffer *b = dev(z, n + SLACK);
  free(z);
  f->own[f->nown++] = b;
  if (out)
    f->out[f->nout++] = b;
  return b;
}

/* The first kernel of op in b that the device runs (or the one named). */
static int find_kernel(fixture *f, const char *name)
{
  for (int e = 0; e < dsv4rt_bundle_count(f->b); e++) {
    const char *n;
    dsv4rt_bundle_entry(f->b, e, &n, NULL, NULL, NULL);
    if ((!name || !strcmp(n, name)) && harness_kernel(f->b, e, f->op, &f->k))
      return 1;
  }
  CHECK(0, "%s: no %s kernel%s%s runs on this device", f->fn, f->op, name ? " named " : "", name ? name : "");
  return 0;
}

/* Bytes of a layout block of 64 tokens: the layout's stride, else the
 * least it allows rounded up to its alignment. */
static int64_t block_stride(const dsv4_layout *L)
{
  int64_t min = dsv4_layout_min_block_bytes(L, 64);
  return L->block_stride ? L->block_stride : (min + L->align - 1) / L->align * L->align;
}

/* ---- the fixtures: small valid argument sets ---- */

static void fx_dequant(fixture *f)
{
  int64_t S = block_stride(&f->k.L), n = 8;
  int32_t idx[8] = {0, 1, 2, 3, 64, -1, 127, 5};
  DG *a = &f->ok.dg;
  a->cache = fbuf(f, NULL, (size_t)(2 * S), 0);
  a->indices = fbuf(f, idx, sizeof idx, 0);
  a->out = fbuf(f, NULL, (size_t)(n * f->k.L.dim * 2), 1);
  a->n = n, a->num_blocks = 2, a->block_size = 64, a->block_stride = S, a->tensor_scale = 0.5f;
}

static void fx_paged(fixture *f)
{
  int64_t S = block_stride(&f->k.L), dim = f->k.L.dim;
  int32_t seq[2] = {70, 5}, gl[2] = {8, 5}, bt[4] = {0, 1, 1, 0};
  PG *a = &f->ok.pg;
  a->cache = fbuf(f, NULL, (size_t)(2 * S), 0);
  a->seq_lens = fbuf(f, seq, sizeof seq, 0);
  a->gather_lens = fbuf(f, gl, sizeof gl, 0);
  a->block_table = fbuf(f, bt, sizeof bt, 0);
  a->out = fbuf(f, NULL, (size_t)(2 * 8 * dim * 2), 1);
  a->out_stride_r = 8 * dim, a->out_stride_m = dim, a->out_rows = 8, a->offset = 0;
  a->num_blocks = 2, a->block_size = 64, a->block_stride = S, a->num_requests = 2, a->max_blocks = 2;
  a->tensor_scale = 1;
}

static void fx_insert(fixture *f)
{
  int64_t S = block_stride(&f->k.L), N = 4, qd = f->k.info.q_dim, rd = f->k.info.rope_dims;
  int64_t slots[4] = {0, 5, -1, 70}, pos[4] = {0, 1, 2, 3};
  uint16_t *kv = malloc((size_t)(N * f->k.L.dim) * 2), *q = malloc((size_t)(N * 2 * qd) * 2 + 2);
  float *cs = malloc((size_t)(8 * rd) * 4 + 4);
  for (int64_t i = 0; i < N * f->k.L.dim; i++)
    kv[i] = (uint16_t)(0x3F80 + (i % 7)); /* bf16 near 1 */
  for (int64_t i = 0; i < N * 2 * qd; i++)
    q[i] = (uint16_t)(0x3F00 + (i % 5));
  for (int64_t i = 0; i < 8 * rd; i++)
    cs[i] = 0.5f;
  KI *a = &f->ok.ki;
  a->cache = fbuf(f, NULL, (size_t)(2 * S), 1);
  a->kv = fbuf(f, kv, (size_t)(N * f->k.L.dim) * 2, 0);
  a->slot_mapping = fbuf(f, slots, sizeof slots, 0);
  a->positions = fbuf(f, pos, sizeof pos, 0);
  a->cos_sin = fbuf(f, cs, (size_t)(8 * rd) * 4 + 4, 0);
  a->q = fbuf(f, q, (size_t)(N * 2 * qd) * 2 + 2, 0);
  a->q_out = qd ? fbuf(f, NULL, (size_t)(N * 4 * qd) * 2, 1) : NULL;
  a->num_blocks = 2, a->block_size = 64, a->block_stride = S, a->n_tokens = N, a->n_insert = N, a->max_pos = 8;
  a->heads = 2, a->padded_heads = 4, a->eps = 1e-6f;
  free(kv), free(q), free(cs);
}

static void fx_decode(fixture *f)
{
  int64_t S = block_stride(&f->k.L), T = 2, H = 4, D = f->k.L.dim, V = f->k.info.v_dim;
  int32_t idx[8] = {0, 1, 2, -1, 64, 65, -1, -1}, lens[2] = {4, 2}, xidx[4] = {0, 1, 2, -1}, xlens[2] = {2, 1};
  uint16_t *q = malloc((size_t)(T * H * D) * 2);
  for (int64_t i = 0; i < T * H * D; i++)
    q[i] = (uint16_t)(0x3C00 + (i % 9));
  SD *a = &f->ok.sd;
  a->cache = fbuf(f, NULL, (size_t)(2 * S), 0);
  a->q = fbuf(f, q, (size_t)(T * H * D) * 2, 0);
  a->indices = fbuf(f, idx, sizeof idx, 0);
  a->lens = fbuf(f, lens, sizeof lens, 0);
  a->extra_cache = fbuf(f, NULL, (size_t)S, 0);
  a->extra_indices = fbuf(f, xidx, sizeof xidx, 0);
  a->extra_lens = fbuf(f, xlens, sizeof xlens, 0);
  a->attn_sink = fbuf(f, NULL, (size_t)H * 4, 0);
  a->out = fbuf(f, NULL, (size_t)(T * H * V) * 2, 1);
  a->lse = fbuf(f, NULL, (size_t)(T * H) * 4, 1);
  a->n_tokens = T, a->heads = H, a->num_blocks = 2, a->block_size = 64, a->block_stride = S, a->topk = 4;
  a->extra_num_blocks = 1, a->extra_block_size = 64, a->extra_block_stride = S, a->extra_topk = 2;
  a->softmax_scale = 0.04f, a->tensor_scale = 1;
  free(q);
}

static void fx_logits(fixture *f)
{
  int64_t S = block_stride(&f->k.L), H = f->k.info.heads, D = f->k.L.dim, R = 2;
  int32_t cl[2] = {100, 64}, bt[2] = {1, 0};
  float *w = malloc((size_t)(R * H) * 4);
  for (int64_t i = 0; i < R * H; i++)
    w[i] = 0.25f;
  LG *a = &f->ok.lg;
  a->q = fbuf(f, NULL, (size_t)(R * H * D), 0);
  a->cache = fbuf(f, NULL, (size_t)(2 * S), 0);
  a->weights = fbuf(f, w, (size_t)(R * H) * 4, 0);
  a->context_lens = fbuf(f, cl, sizeof cl, 0);
  a->block_table = fbuf(f, bt, sizeof bt, 0);
  a->logits = fbuf(f, NULL, (size_t)(R * 104) * 4, 1);
  a->row_len = 100, a->row_stride = 104, a->batch = 1, a->next_n = 2;
  a->num_blocks = 2, a->block_size = 64, a->block_stride = S, a->max_blocks = 2;
  free(w);
}

/* The logits' fixture, out [2, K] in place of the logits: rows within one
 * chunk (a split row's merge and work space are test_indexer's). */
static void fx_fused(fixture *f)
{
  fx_logits(f);
  LG lg = f->ok.lg;
  f->nout--; /* (the logits, its last buffer, are no output of this op) */
  f->ok.lt = (LT){.q = lg.q, .batch = lg.batch, .next_n = lg.next_n, .cache = lg.cache, .num_blocks = lg.num_blocks,
                  .block_size = lg.block_size, .block_stride = lg.block_stride, .weights = lg.weights,
                  .context_lens = lg.context_lens, .block_table = lg.block_table, .max_blocks = lg.max_blocks,
                  .row_len = lg.row_len};
  f->ok.lt.out = fbuf(f, NULL, (size_t)(2 * f->k.info.topk) * 4, 1);
}

static void fx_topk(fixture *f)
{
  int64_t R = 2, L = 600, K = f->k.info.topk;
  int32_t cl[2] = {600, 300};
  float *lg = malloc((size_t)(R * L) * 4);
  for (int64_t i = 0; i < R * L; i++)
    lg[i] = rnd01();
  TK *a = &f->ok.tk;
  a->logits = fbuf(f, lg, (size_t)(R * L) * 4, 0);
  a->context_lens = fbuf(f, cl, sizeof cl, 0);
  a->out = fbuf(f, NULL, (size_t)(R * K) * 4, 1);
  a->rows = R, a->row_len = L, a->row_stride = L;
  free(lg);
}

/* ---- the rows of each op ---- */

#define A_ DG
static const row dequant_rows[] = {
    {"valid, a negative index other than -1 (a zero row)", {PUT32(indices, 2, -5)}, CHECKED, DSV4RT_OK, ""},
    {"out NULL", {NUL(out)}, 0, E_NULL, "out is NULL"},
    {"indices NULL", {NUL(indices)}, 0, E_NULL, "indices is NULL"},
    {"cache of another context", {CTX2(cache)}, 0, E_CTX, "cache belongs to another context"},
    {"out of another context", {CTX2(out)}, 0, E_CTX, "out belongs"},
    {"out too small", {SMALL(out)}, 0, E_SMALL, "out holds 16 bytes"},
    {"indices too small", {SMALL(indices)}, 0, E_SMALL, "indices holds 16 bytes"},
    {"cache smaller than num_blocks blocks", {I64(num_blocks, 3)}, 0, E_SMALL, "cache holds"},
    {"n negative", {I64(n, -1)}, 0, E_RANGE, "n = -1"},
    {"n huge", {I64(n, HUGE_N)}, 0, E_RANGE, "n = 1099511627776"},
    {"n INT64_MAX", {I64(n, INT64_MAX)}, 0, E_RANGE, "n = 9223372036854775807"},
    {"num_blocks negative", {I64(num_blocks, -2)}, 0, E_RANGE, "num_blocks = -2"},
    {"block_size 0", {I64(block_size, 0)}, 0, E_RANGE, "block_size = 0"},
    {"block_size huge", {I64(block_size, HUGE_N)}, 0, E_RANGE, "block_size = 1099511627776"},
    {"block_stride 0", {I64(block_stride, 0)}, 0, E_RANGE, "block_stride 0 is below"},
    {"block_stride negative", {I64(block_stride, -1024)}, 0, E_RANGE, "block_stride -1024"},
    {"block_stride huge", {I64(block_stride, INT64_MAX - 15)}, 0, E_RANGE, "block_stride"},
    {"indices is out", {SAME(indices, out)}, 0, E_ALIAS, "output out shares memory with indices"},
    {"out wraps the cache's memory", {WRAP(out, cache, 0)}, 0, E_ALIAS, "output out shares memory with cache"},
    {"out overlaps the cache (+32 bytes)", {WRAP(out, cache, 32)}, ADDRESSES, E_ALIAS, "output out shares memory"},
    {"out misaligned", {WRAP(out, out, 8)}, ADDRESSES, E_ALIGN, "out is not 16-byte aligned"},
    {"indices misaligned", {WRAP(indices, indices, 2)}, ADDRESSES, E_ALIGN, "indices is not 4-byte aligned"},
    {"cache misaligned", {WRAP(cache, cache, 2)}, ADDRESSES, E_ALIGN, "cache is not"},
    {"index past the cache (checked)", {PUT32(indices, 3, 128)}, CHECKED, E_BAD, "indices[3] = 128"},
    {"index 2^31-1 (checked)", {PUT32(indices, 7, 2147483647)}, CHECKED, E_BAD, "indices[7] = 2147483647"},
};
#undef A_

static const row per_tensor_rows[] = {
#define A_ DG
    {"tensor_scale NaN", {F32(tensor_scale, NAN)}, 0, E_FINITE, "tensor_scale = nan"},
    {"tensor_scale -inf", {F32(tensor_scale, -INFINITY)}, 0, E_FINITE, "tensor_scale = -inf"},
#undef A_
};

#define A_ PG
static const row paged_rows[] = {
    {"valid, no gather_lens (rows past out_rows skipped)", {NUL(gather_lens)}, 0, DSV4RT_OK, ""},
    {"valid, gather_lens is seq_lens (inputs may share)", {SAME(gather_lens, seq_lens)}, 0, DSV4RT_OK, ""},
    {"valid, requests interleaved", {I64(out_stride_r, 512), I64(out_stride_m, 1024)}, 0, DSV4RT_OK, ""},
    {"out NULL", {NUL(out)}, 0, E_NULL, "out is NULL"},
    {"seq_lens NULL", {NUL(seq_lens)}, 0, E_NULL, "seq_lens is NULL"},
    {"block_table NULL", {NUL(block_table)}, 0, E_NULL, "block_table is NULL"},
    {"block_table of another context", {CTX2(block_table)}, 0, E_CTX, "block_table belongs"},
    {"gather_lens of another context", {CTX2(gather_lens)}, 0, E_CTX, "gather_lens belongs"},
    {"out too small", {SMALL(out)}, 0, E_SMALL, "out holds 16 bytes"},
    {"block_table too small for max_blocks", {I64(max_blocks, 20)}, 0, E_SMALL, "block_table holds"},
    {"gather_lens too small", {SMALL(gather_lens), I64(num_requests, 5), I64(out_rows, 0)}, 0, E_SMALL,
     "gather_lens holds 16 bytes, the arguments need 20"},
    {"num_requests negative", {I64(num_requests, -1)}, 0, E_RANGE, "num_requests = -1"},
    {"num_requests huge", {I64(num_requests, HUGE_N)}, 0, E_RANGE, "num_requests = 1099511627776"},
    {"out_rows negative", {I64(out_rows, -8)}, 0, E_RANGE, "out_rows = -8"},
    {"offset past out_rows", {I64(offset, 9)}, 0, E_RANGE, "offset = 9"},
    {"max_blocks 0", {I64(max_blocks, 0)}, 0, E_RANGE, "max_blocks = 0"},
    {"out_stride_m below a row", {I64(out_stride_m, 504)}, 0, E_RANGE, "out_stride_m = 504"},
    {"out_stride_m not a multiple of 8", {I64(out_stride_m, 516)}, 0, E_ALIGN, "multiples of 8"},
    {"out_stride_r 0 with two requests", {I64(out_stride_r, 0)}, 0, E_RANGE, "out_stride_r 0"},
    {"out_stride_r overlapping the next request", {I64(out_stride_r, 4 * 512)}, 0, E_RANGE, "overlap"},
    {"out_stride_r negative", {I64(out_stride_r, -4096)}, 0, E_RANGE, "out_stride_r = -4096"},
    {"block_stride below the layout's block", {I64(block_stride, 64)}, 0, E_RANGE, "block_stride 64 is below"},
    {"block_table is out", {SAME(block_table, out)}, 0, E_ALIAS, "output out shares memory with block_table"},
    {"seq_lens wraps out's memory", {WRAP(seq_lens, out, 0)}, 0, E_ALIAS, "output out shares memory with seq_lens"},
    {"out overlaps gather_lens (+16 bytes)", {WRAP(gather_lens, out, 16)}, ADDRESSES, E_ALIAS,
     "output out shares memory with gather_lens"},
    {"seq_lens misaligned", {WRAP(seq_lens, seq_lens, 2)}, ADDRESSES, E_ALIGN, "seq_lens is not 4-byte aligned"},
    {"out misaligned", {WRAP(out, out, 8)}, ADDRESSES, E_ALIGN, "out is not 16-byte aligned"},
    {"seq_len negative (checked)", {PUT32(seq_lens, 1, -1)}, CHECKED, E_BAD, "seq_lens[1] = -1"},
    {"no gather_lens, seq_len past out_rows (checked)", {NUL(gather_lens)}, CHECKED, E_BAD,
     "seq_lens[0] = 70 rows from offset 0 pass out_rows 8"},
    {"gather_len past seq_len (checked)", {PUT32(gather_lens, 1, 6)}, CHECKED, E_BAD, "gather_lens[1] = 6"},
    {"gather_len negative (checked)", {PUT32(gather_lens, 0, -3)}, CHECKED, E_BAD, "gather_lens[0] = -3"},
    {"gather_len past out_rows (checked)", {PUT32(gather_lens, 0, 9)}, CHECKED, E_BAD, "gather_lens[0] = 9 rows"},
    {"seq_len past max_blocks (checked)", {PUT32(seq_lens, 0, 200)}, CHECKED, E_BAD,
     "seq_lens[0] = 200 reaches block-table column 3, past max_blocks 2"},
    {"block past the cache (checked)", {PUT32(block_table, 1, 2)}, CHECKED, E_BAD, "block_table[0, 1] = 2"},
    {"block -1 (checked)", {PUT32(block_table, 2, -1)}, CHECKED, E_BAD, "block_table[1, 0] = -1"},
};
#undef A_

#define A_ KI
static const row insert_rows[] = {
    {"valid, a negative slot other than -1 (skipped)", {PUT64(slot_mapping, 1, -7)}, CHECKED, DSV4RT_OK, ""},
    {"kv NULL", {NUL(kv)}, 0, E_NULL, "kv is NULL"},
    {"slot_mapping NULL", {NUL(slot_mapping)}, 0, E_NULL, "slot_mapping is NULL"},
    {"cache NULL", {NUL(cache)}, 0, E_NULL, "cache is NULL"},
    {"kv of another context", {CTX2(kv)}, 0, E_CTX, "kv belongs"},
    {"cache of another context", {CTX2(cache)}, 0, E_CTX, "cache belongs"},
    {"kv too small", {SMALL(kv)}, 0, E_SMALL, "kv holds 16 bytes"},
    {"slot_mapping too small", {SMALL(slot_mapping)}, 0, E_SMALL, "slot_mapping holds 16 bytes"},
    {"n_tokens negative", {I64(n_tokens, -1)}, 0, E_RANGE, "n_tokens = -1"},
    {"n_tokens huge", {I64(n_tokens, HUGE_N)}, 0, E_RANGE, "n_tokens = 1099511627776"},
    {"n_insert past n_tokens", {I64(n_insert, 5)}, 0, E_RANGE, "n_insert = 5"},
    {"n_insert negative", {I64(n_insert, -1)}, 0, E_RANGE, "n_insert = -1"},
    {"block_stride 0", {I64(block_stride, 0)}, 0, E_RANGE, "block_stride 0 is below"},
    {"kv is the cache", {SAME(kv, cache)}, 0, E_ALIAS, "output cache shares memory with kv"},
    {"slot_mapping wraps the cache's memory",
     {WRAP(slot_mapping, cache, 0)},
     0,
     E_ALIAS,
     "output cache shares memory with slot_mapping"},
    {"kv overlaps the cache (+64 bytes)",
     {WRAP(kv, cache, 64)},
     ADDRESSES,
     E_ALIAS,
     "output cache shares memory with kv"},
    {"slot_mapping misaligned",
     {WRAP(slot_mapping, slot_mapping, 4)},
     ADDRESSES,
     E_ALIGN,
     "slot_mapping is not 8-byte aligned"},
    {"kv misaligned", {WRAP(kv, kv, 2)}, ADDRESSES, E_ALIGN, "kv is not 16-byte aligned"},
    {"slot past the cache (checked)", {PUT64(slot_mapping, 3, 128)}, CHECKED, E_BAD, "slot_mapping[3] = 128"},
    {"slot 2^62 (checked)",
     {PUT64(slot_mapping, 0, (int64_t)1 << 62)},
     CHECKED,
     E_BAD,
     "slot_mapping[0] = 4611686018427387904"},
};
/* kernels with RoPE */
static const row insert_rope_rows[] = {
    {"positions NULL", {NUL(positions)}, 0, E_NULL, "positions is NULL"},
    {"cos_sin too small for max_pos", {I64(max_pos, 4096)}, 0, E_SMALL, "cos_sin holds"},
    {"max_pos 0", {I64(max_pos, 0)}, 0, E_RANGE, "max_pos = 0"},
    {"cos_sin wraps the cache's memory", {WRAP(cos_sin, cache, 0)}, 0, E_ALIAS,
     "output cache shares memory with cos_sin"},
    {"position past the table (checked)", {PUT64(positions, 1, 8)}, CHECKED, E_BAD, "positions[1] = 8"},
    {"position negative (checked)", {PUT64(positions, 0, -1)}, CHECKED, E_BAD, "positions[0] = -1"},
};
/* kernels with a q branch */
static const row insert_q_rows[] = {
    {"q NULL", {NUL(q)}, 0, E_NULL, "q is NULL"},
    {"q_out NULL", {NUL(q_out)}, 0, E_NULL, "q_out is NULL"},
    {"q_out too small", {SMALL(q_out)}, 0, E_SMALL, "q_out holds 16 bytes"},
    {"heads negative", {I64(heads, -1)}, 0, E_RANGE, "heads = -1"},
    {"heads huge", {I64(heads, HUGE_N), I64(padded_heads, HUGE_N)}, 0, E_RANGE, "heads = 1099511627776"},
    {"padded_heads below heads", {I64(padded_heads, 1)}, 0, E_RANGE, "padded_heads = 1"},
    {"eps NaN", {F32(eps, NAN)}, 0, E_FINITE, "eps = nan"},
    {"eps +inf", {F32(eps, INFINITY)}, 0, E_FINITE, "eps = inf"},
    {"eps negative", {F32(eps, -1e-6f)}, 0, E_RANGE, "eps = -1e-06"},
    {"q is q_out", {SAME(q, q_out)}, 0, E_ALIAS, "output q_out shares memory with q"},
    {"q_out is the cache", {SAME(q_out, cache)}, 0, E_ALIAS, "output cache shares memory with q_out"},
    {"q wraps q_out's memory", {WRAP(q, q_out, 0)}, 0, E_ALIAS, "output q_out shares memory with q"},
    {"q_out misaligned", {WRAP(q_out, q_out, 8)}, ADDRESSES, E_ALIGN, "q_out is not 16-byte aligned"},
    {"position past the table, row not inserted (checked)", {PUT64(positions, 2, 9)}, CHECKED, E_BAD,
     "positions[2] = 9"},
};
#undef A_

#define A_ SD
static const row decode_rows[] = {
    {"valid, no sink, no extra cache", {NUL(attn_sink), NUL(extra_cache)}, CHECKED, DSV4RT_OK, ""},
    {"valid, an index past lens is not read (checked)", {PUT32(indices, 7, 999)}, CHECKED, DSV4RT_OK, ""},
    {"valid, extra cache is the cache (inputs may share)", {SAME(extra_cache, cache)}, CHECKED, DSV4RT_OK, ""},
    {"out NULL", {NUL(out)}, 0, E_NULL, "out is NULL"},
    {"lse NULL", {NUL(lse)}, 0, E_NULL, "lse is NULL"},
    {"q NULL", {NUL(q)}, 0, E_NULL, "q is NULL"},
    {"lens NULL", {NUL(lens)}, 0, E_NULL, "lens is NULL"},
    {"extra_indices NULL", {NUL(extra_indices)}, 0, E_NULL, "extra_indices is NULL"},
    {"q of another context", {CTX2(q)}, 0, E_CTX, "q belongs"},
    {"lse of another context", {CTX2(lse)}, 0, E_CTX, "lse belongs"},
    {"attn_sink of another context", {CTX2(attn_sink)}, 0, E_CTX, "attn_sink belongs"},
    {"lse too small", {SMALL(lse)}, 0, E_SMALL, "lse holds 16 bytes, the arguments need 32"},
    {"indices too small for topk", {I64(topk, 64)}, 0, E_SMALL, "indices holds"},
    {"extra cache smaller than its blocks", {I64(extra_num_blocks, 2)}, 0, E_SMALL, "extra_cache holds"},
    {"n_tokens negative", {I64(n_tokens, -1)}, 0, E_RANGE, "n_tokens = -1"},
    {"n_tokens huge", {I64(n_tokens, HUGE_N)}, 0, E_RANGE, "n_tokens = 1099511627776"},
    {"heads 0", {I64(heads, 0)}, 0, E_RANGE, "heads = 0"},
    {"topk negative", {I64(topk, -4)}, 0, E_RANGE, "topk = -4"},
    {"topk huge", {I64(topk, HUGE_N)}, 0, E_RANGE, "topk = 1099511627776"},
    {"extra_topk negative", {I64(extra_topk, -1)}, 0, E_RANGE, "extra_topk = -1"},
    {"extra_block_size 0", {I64(extra_block_size, 0)}, 0, E_RANGE, "extra_block_size = 0"},
    {"extra_block_stride 0", {I64(extra_block_stride, 0)}, 0, E_RANGE, "extra_block_stride 0 is below"},
    {"softmax_scale NaN", {F32(softmax_scale, NAN)}, 0, E_FINITE, "softmax_scale = nan"},
    {"softmax_scale +inf", {F32(softmax_scale, INFINITY)}, 0, E_FINITE, "softmax_scale = inf"},
    {"out is q", {SAME(out, q)}, 0, E_ALIAS, "output out shares memory with q"},
    {"lse is out", {SAME(lse, out)}, 0, E_ALIAS, "output out shares memory with lse"},
    {"lse wraps the indices' memory", {WRAP(lse, indices, 0)}, 0, E_ALIAS, "output lse shares memory with indices"},
    {"attn_sink is lse", {SAME(attn_sink, lse)}, 0, E_ALIAS, "output lse shares memory with attn_sink"},
    {"q overlaps out (+16 bytes)", {WRAP(q, out, 16)}, ADDRESSES, E_ALIAS, "output out shares memory with q"},
    {"lse inside out (+256 bytes)", {WRAP(lse, out, 256)}, ADDRESSES, E_ALIAS, "output out shares memory with lse"},
    {"q misaligned", {WRAP(q, q, 8)}, ADDRESSES, E_ALIGN, "q is not 16-byte aligned"},
    {"lens misaligned", {WRAP(lens, lens, 2)}, ADDRESSES, E_ALIGN, "lens is not 4-byte aligned"},
    {"lens negative (checked)", {PUT32(lens, 1, -1)}, CHECKED, E_BAD, "lens[1] = -1 is outside [0, topk 4]"},
    {"lens past topk (checked)", {PUT32(lens, 0, 5)}, CHECKED, E_BAD, "lens[0] = 5"},
    {"index past the cache (checked)", {PUT32(indices, 2, 128)}, CHECKED, E_BAD, "indices[0, 2] = 128"},
    {"index -2 (checked)", {PUT32(indices, 1, -2)}, CHECKED, E_BAD, "indices[0, 1] = -2"},
    {"extra_lens past extra_topk (checked)", {PUT32(extra_lens, 0, 3)}, CHECKED, E_BAD, "extra_lens[0] = 3"},
    {"extra index past the extra cache (checked)", {PUT32(extra_indices, 2, 64)}, CHECKED, E_BAD,
     "extra_indices[1, 0] = 64"},
};
#undef A_

#define A_ LG
static const row logits_rows[] = {
    {"valid, context_lens 0", {PUT32(context_lens, 0, 0)}, CHECKED, DSV4RT_OK, ""},
    {"logits NULL", {NUL(logits)}, 0, E_NULL, "logits is NULL"},
    {"weights NULL", {NUL(weights)}, 0, E_NULL, "weights is NULL"},
    {"context_lens of another context", {CTX2(context_lens)}, 0, E_CTX, "context_lens belongs"},
    {"logits too small", {SMALL(logits)}, 0, E_SMALL, "logits holds 16 bytes"},
    {"q too small", {SMALL(q)}, 0, E_SMALL, "q holds 16 bytes"},
    {"block_table too small for max_blocks", {I64(max_blocks, 64)}, 0, E_SMALL, "block_table holds"},
    {"batch negative", {I64(batch, -1)}, 0, E_RANGE, "batch = -1"},
    {"batch huge", {I64(batch, HUGE_N)}, 0, E_RANGE, "batch = 1099511627776"},
    {"next_n 0", {I64(next_n, 0)}, 0, E_RANGE, "next_n = 0"},
    {"next_n huge", {I64(next_n, HUGE_N)}, 0, E_RANGE, "next_n = 1099511627776"},
    /* found in review: a grid.y past 65535 reached the driver (CUDA's launch failed, status BACKEND) */
    {"batch * next_n past a grid's 65535 rows", {I64(batch, 2048), I64(next_n, 64)}, PORTABLE_ONLY, E_RANGE,
     "batch * next_n = 131072"},
    {"row_len negative", {I64(row_len, -1)}, 0, E_RANGE, "row_len = -1"},
    {"row_stride below row_len", {I64(row_stride, 99)}, 0, E_RANGE, "row_stride = 99"},
    {"row_stride 0", {I64(row_stride, 0)}, 0, E_RANGE, "row_stride = 0"},
    {"max_blocks 0", {I64(max_blocks, 0)}, 0, E_RANGE, "max_blocks = 0"},
    {"block_size 0", {I64(block_size, 0)}, 0, E_RANGE, "block_size = 0"},
    {"weights is logits", {SAME(weights, logits)}, 0, E_ALIAS, "output logits shares memory with weights"},
    {"block_table wraps the logits' memory", {WRAP(block_table, logits, 0)}, 0, E_ALIAS,
     "output logits shares memory with block_table"},
    {"context_lens inside logits (+400 bytes)", {WRAP(context_lens, logits, 400)}, ADDRESSES, E_ALIAS,
     "output logits shares memory with context_lens"},
    {"context_lens misaligned", {WRAP(context_lens, context_lens, 2)}, ADDRESSES, E_ALIGN,
     "context_lens is not 4-byte aligned"},
    {"q misaligned", {WRAP(q, q, 8)}, ADDRESSES, E_ALIGN, "q is not 16-byte aligned"},
    {"context_lens -7 (checked)", {PUT32(context_lens, 0, -7)}, CHECKED, E_BAD, "context_lens[0] = -7"},
    {"context_lens 2^30 (checked)", {PUT32(context_lens, 1, 1 << 30)}, CHECKED, E_BAD, "context_lens[1] = 1073741824"},
    {"context_lens past row_len (checked)", {PUT32(context_lens, 1, 101)}, CHECKED, E_BAD,
     "context_lens[1] = 101 is outside [0, row_len 100]"},
    {"block past the cache (checked)", {PUT32(block_table, 0, 2)}, CHECKED, E_BAD, "block_table[0, 0] = 2"},
    {"block -1 (checked)", {PUT32(block_table, 1, -1)}, CHECKED, E_BAD, "block_table[0, 1] = -1"},
    {"context past max_blocks (checked)", {I64(max_blocks, 1)}, CHECKED, E_BAD,
     "context_lens[0] = 100 reaches block-table column 1, past max_blocks 1"},
};
#undef A_

#define A_ LT
static const row fused_rows[] = {
    {"valid, context_lens 0", {PUT32(context_lens, 0, 0)}, CHECKED, DSV4RT_OK, ""},
    {"out NULL", {NUL(out)}, 0, E_NULL, "out is NULL"},
    {"weights NULL", {NUL(weights)}, 0, E_NULL, "weights is NULL"},
    {"context_lens of another context", {CTX2(context_lens)}, 0, E_CTX, "context_lens belongs"},
    {"out too small", {SMALL(out)}, 0, E_SMALL, "out holds 16 bytes"},
    {"q too small", {SMALL(q)}, 0, E_SMALL, "q holds 16 bytes"},
    {"batch negative", {I64(batch, -1)}, 0, E_RANGE, "batch = -1"},
    {"batch huge", {I64(batch, HUGE_N)}, 0, E_RANGE, "batch = 1099511627776"},
    {"next_n 0", {I64(next_n, 0)}, 0, E_RANGE, "next_n = 0"},
    {"row_len negative", {I64(row_len, -1)}, 0, E_RANGE, "row_len = -1"},
    {"max_blocks 0", {I64(max_blocks, 0)}, 0, E_RANGE, "max_blocks = 0"},
    {"topk not the kernel's K", {I64(topk, 3)}, 0, E_RANGE, "topk = 3"},
    {"weights is out", {SAME(weights, out)}, 0, E_ALIAS, "output out shares memory with weights"},
    {"context_lens inside out (+400 bytes)", {WRAP(context_lens, out, 400)}, ADDRESSES, E_ALIAS,
     "output out shares memory with context_lens"},
    {"q misaligned", {WRAP(q, q, 8)}, ADDRESSES, E_ALIGN, "q is not 16-byte aligned"},
    {"context_lens past row_len (checked)", {PUT32(context_lens, 1, 101)}, CHECKED, E_BAD,
     "context_lens[1] = 101 is outside [0, row_len 100]"},
    {"block past the cache (checked)", {PUT32(block_table, 0, 2)}, CHECKED, E_BAD, "block_table[0, 0] = 2"},
};
#undef A_

#define A_ TK
static const row topk_rows[] = {
    {"valid, context_lens 0", {PUT32(context_lens, 1, 0)}, CHECKED, DSV4RT_OK, ""},
    {"out NULL", {NUL(out)}, 0, E_NULL, "out is NULL"},
    {"logits NULL", {NUL(logits)}, 0, E_NULL, "logits is NULL"},
    {"context_lens NULL", {NUL(context_lens)}, 0, E_NULL, "context_lens is NULL"},
    {"out of another context", {CTX2(out)}, 0, E_CTX, "out belongs"},
    {"logits of another context", {CTX2(logits)}, 0, E_CTX, "logits belongs"},
    {"out too small", {SMALL(out)}, 0, E_SMALL, "out holds 16 bytes"},
    {"logits too small for row_stride", {I64(row_stride, 2000)}, 0, E_SMALL, "logits holds"},
    {"rows negative", {I64(rows, -1)}, 0, E_RANGE, "rows = -1"},
    {"rows huge", {I64(rows, HUGE_N)}, 0, E_RANGE, "rows = 1099511627776"},
    {"row_len negative", {I64(row_len, -7)}, 0, E_RANGE, "row_len = -7"},
    {"row_len huge", {I64(row_len, HUGE_N), I64(row_stride, HUGE_N)}, 0, E_RANGE, "row_len = 1099511627776"},
    {"row_stride 0", {I64(row_stride, 0)}, 0, E_RANGE, "row_stride = 0"},
    {"row_stride below row_len", {I64(row_stride, 599)}, 0, E_RANGE, "row_stride = 599"},
    {"out is logits", {SAME(out, logits)}, 0, E_ALIAS, "output out shares memory with logits"},
    {"context_lens wraps out's memory", {WRAP(context_lens, out, 0)}, 0, E_ALIAS,
     "output out shares memory with context_lens"},
    {"context_lens inside out (+2000 bytes)", {WRAP(context_lens, out, 2000)}, ADDRESSES, E_ALIAS,
     "output out shares memory with context_lens"},
    {"out misaligned", {WRAP(out, out, 2)}, ADDRESSES, E_ALIGN, "out is not 4-byte aligned"},
    {"context_lens -7 (checked)", {PUT32(context_lens, 0, -7)}, CHECKED, E_BAD, "context_lens[0] = -7"},
    {"context_lens 2^30 (checked)", {PUT32(context_lens, 1, 1 << 30)}, CHECKED, E_BAD, "context_lens[1] = 1073741824"},
    {"context_lens past row_len (checked)", {PUT32(context_lens, 0, 601)}, CHECKED, E_BAD,
     "context_lens[0] = 601 is outside [0, row_len 600]"},
};
#undef A_

/* ---- running a row ---- */

/* A buffer whose bytes a row compares: before, what it held (or the
 * poison written into it); the fresh ones are freed after the row. */
typedef struct {
  dsv4rt_buffer *b;
  uint8_t *before;
  int fresh;
} watched;

/* A checked-mode row's element put into a device array, and what it held. */
typedef struct {
  dsv4rt_buffer *b;
  size_t at, size;
  uint8_t old[8];
} put_t;

typedef struct {
  watched w[8];
  int n;
  put_t put[3];
  int nput;
} row_state;

/* Watch b: poison it (outputs and fresh buffers) or read what it holds. */
static void watch(row_state *st, dsv4rt_buffer *b, int poison, int fresh)
{
  size_t n = dsv4rt_buffer_size(b);
  watched *w = &st->w[st->n++];
  w->b = b, w->fresh = fresh, w->before = malloc(n);
  if (poison) {
    memset(w->before, POISON, n);
    CHECK(dsv4rt_buffer_write(b, 0, w->before, n) == DSV4RT_OK, "poison: %s", dsv4rt_last_error(ctx));
  } else
    CHECK(dsv4rt_buffer_read(b, 0, w->before, n) == DSV4RT_OK, "snapshot: %s", dsv4rt_last_error(ctx));
}

/* A fresh buffer standing in for a field's, for one row. */
static dsv4rt_buffer *fresh(row_state *st, dsv4rt_context *c, size_t n, uint64_t wrap_native)
{
  dsv4rt_buffer *b = NULL;
  dsv4rt_status s = wrap_native ? dsv4rt_buffer_wrap(c, wrap_native, n, &b) : dsv4rt_buffer_create(c, n, &b);
  if (s) {
    printf("FAIL: a row's buffer: %s\n", dsv4rt_last_error(c));
    exit(1);
  }
  watch(st, b, !wrap_native, 1);
  return b;
}

/* Apply mutation m to args a (device writes for checked-mode rows). */
static void apply(row_state *st, any_args *a, const mut *m)
{
  char *base = (char *)a;
  dsv4rt_buffer **fb = (dsv4rt_buffer **)(base + m->field), *src;
  switch (m->k) {
  case M_I64:
    *(int64_t *)(base + m->field) = m->v;
    break;
  case M_F32:
    *(float *)(base + m->field) = m->f;
    break;
  case M_NULL:
    *fb = NULL;
    break;
  case M_CTX2:
    *fb = fresh(st, ctx2, dsv4rt_buffer_size(*fb), 0);
    break;
  case M_SMALL:
    *fb = fresh(st, ctx, 16, 0);
    break;
  case M_SAME:
    *fb = *(dsv4rt_buffer **)(base + m->aux);
    break;
  case M_WRAP:
    src = *(dsv4rt_buffer **)(base + m->aux);
    *fb = fresh(st, ctx, dsv4rt_buffer_size(src) - (size_t)m->v, dsv4rt_buffer_native(src) + (uint64_t)m->v);
    break;
  case M_PUT32:
  case M_PUT64: {
    put_t *p = &st->put[st->nput++];
    int32_t v32 = (int32_t)m->v;
    p->b = *fb, p->size = m->k == M_PUT32 ? 4 : 8, p->at = m->aux * p->size;
    CHECK(dsv4rt_buffer_read(p->b, p->at, p->old, p->size) == DSV4RT_OK, "put: %s", dsv4rt_last_error(ctx));
    CHECK(dsv4rt_buffer_write(p->b, p->at, p->size == 4 ? (const void *)&v32 : (const void *)&m->v, p->size) ==
              DSV4RT_OK,
          "put: %s", dsv4rt_last_error(ctx));
    break;
  }
  default:
    break;
  }
}

/* Whether any mutation of r is of kind k. */
static int has(const row *r, mkind k) { return r->m[0].k == k || r->m[1].k == k || r->m[2].k == k; }

/* Compare every watched buffer with what it held; undo the row. */
static void finish_row(const fixture *f, const row *r, row_state *st, int written_ok)
{
  for (int i = 0; i < st->n; i++) {
    size_t n = dsv4rt_buffer_size(st->w[i].b);
    uint8_t *now = malloc(n);
    dsv4rt_buffer_read(st->w[i].b, 0, now, n);
    size_t diff = 0;
    for (size_t j = 0; j < n; j++)
      diff += now[j] != st->w[i].before[j];
    CHECK(written_ok || diff == 0, "%s: %s: %zu of %zu bytes of a watched buffer were written", f->fn, r->what, diff,
          n);
    free(now), free(st->w[i].before);
    if (st->w[i].fresh)
      dsv4rt_buffer_destroy(st->w[i].b);
  }
  for (int i = st->nput - 1; i >= 0; i--)
    dsv4rt_buffer_write(st->put[i].b, st->put[i].at, st->put[i].old, st->put[i].size);
}

/* One row: mutate a copy of the valid arguments, poison, launch, and
 * check status, message and that nothing was written. */
static void run_row(fixture *f, const row *r)
{
  if ((r->flags & ADDRESSES) && !addresses) {
    printf("skipped (device addresses only: CUDA, HIP): %s: %s\n", f->fn, r->what);
    return;
  }
  if ((r->flags & PORTABLE_ONLY) && f->k.info.matrix) {
    printf("skipped (the portable form only): %s: %s\n", f->fn, r->what);
    return;
  }
  row_state st = {0};
  any_args a = f->ok;
  for (int i = 0; i < f->nout; i++)
    watch(&st, f->out[i], 1, 0);
  for (int i = 0; i < 3; i++)
    apply(&st, &a, &r->m[i]);
  /* messages left by a failing call of no interest, so a stale one cannot match */
  uint8_t x;
  dsv4rt_buffer_read(f->out[0], dsv4rt_buffer_size(f->out[0]), &x, 1);
  dsv4rt_buffer_read(NULL, 0, &x, 1);
  dsv4rt_launch_opts o = {.kernel = has(r, M_NAME) ? "no_such_kernel" : f->k.name,
                          .check_contents = (r->flags & CHECKED) != 0};
  dsv4rt_bundle *b = has(r, M_NO_BUNDLE) ? NULL : has(r, M_OTHER) ? f->other : f->b;
  int before = launches(f->fn, r->what);
  dsv4rt_status s = f->launch(b, has(r, M_NO_ARGS) ? NULL : &a, &o);
  dsv4rt_status sy = dsv4rt_synchronize(ctx);
  int launched = launches(f->fn, r->what) - before;
  if (fake)
    CHECK(r->want == DSV4RT_OK ? launched > 0 : launched == 0, "%s: %s: %d launch(es) reached the HIP runtime",
          f->fn, r->what, launched);
  const char *msg = dsv4rt_last_error(b ? ctx : NULL);
  char want_msg[128];
  snprintf(want_msg, sizeof want_msg, r->msg, f->op);
  CHECK(s == r->want, "%s: %s: status %d (%s), expected %d (%s); message: %s", f->fn, r->what, s,
        dsv4rt_status_name(s), r->want, dsv4rt_status_name(r->want), msg);
  CHECK(sy == DSV4RT_OK, "%s: %s: synchronize: %s", f->fn, r->what, dsv4rt_last_error(ctx));
  if (r->want != DSV4RT_OK)
    CHECK(strstr(msg, f->fn) && strstr(msg, want_msg), "%s: %s: message '%s' lacks '%s'", f->fn, r->what, msg,
          want_msg);
  printf("  %-52.52s %-20s %s\n", r->what, dsv4rt_status_name(s), s ? msg : "");
  finish_row(f, r, &st, r->want == DSV4RT_OK);
}

/* The valid set launches, unchecked and checked, and changes every output
 * (so the rows' comparisons can see a write). */
static void run_valid(fixture *f)
{
  for (int checked = 0; checked < 2; checked++) {
    row_state st = {0};
    for (int i = 0; i < f->nout; i++)
      watch(&st, f->out[i], 1, 0);
    dsv4rt_launch_opts o = {.kernel = f->k.name, .check_contents = checked};
    int before = launches(f->fn, "the valid arguments");
    dsv4rt_status s = f->launch(f->b, &f->ok, &o);
    if (!s)
      s = dsv4rt_synchronize(ctx);
    CHECK(s == DSV4RT_OK, "%s (%s): the valid arguments%s: %s", f->fn, f->k.name, checked ? ", checked" : "",
          dsv4rt_last_error(ctx));
    if (fake) { /* nothing ran: the launch records stand for the outputs */
      CHECK(launches(f->fn, "the valid arguments") > before, "%s: the valid launch reached no kernel", f->fn);
      for (int i = 0; i < st.n; i++)
        free(st.w[i].before);
      continue;
    }
    for (int i = 0; i < st.n; i++) {
      size_t n = dsv4rt_buffer_size(st.w[i].b);
      uint8_t *now = malloc(n);
      dsv4rt_buffer_read(st.w[i].b, 0, now, n);
      CHECK(memcmp(now, st.w[i].before, n), "%s: the valid launch left output %d unwritten", f->fn, i);
      free(now), free(st.w[i].before);
    }
  }
}

static void run_rows(fixture *f, const row *rows, int n)
{
  for (int i = 0; i < n; i++)
    run_row(f, &rows[i]);
}

static void free_fixture(fixture *f)
{
  for (int i = 0; i < f->nown; i++)
    dsv4rt_buffer_destroy(f->own[i]);
}

#define ROWS(t) t, (int)(sizeof t / sizeof *t)

/* An op: its fixture, the valid launch, the common rows and its own. */
static void test_op(const char *op, const char *fn, dsv4rt_bundle *b, dsv4rt_bundle *other, const char *kernel,
                    void (*setup)(fixture *), dsv4rt_status (*go)(dsv4rt_bundle *, const any_args *,
                                                                  const dsv4rt_launch_opts *),
                    const row *rows, int n)
{
  fixture f = {.op = op, .fn = fn, .b = b, .other = other, .launch = go};
  if (!find_kernel(&f, kernel))
    return;
  printf("%s with %s\n", fn, f.k.name);
  setup(&f);
  run_valid(&f);
  if (other)
    run_rows(&f, ROWS(common_rows));
  run_rows(&f, rows, n);
  if (!strcmp(op, "kv_insert") && f.k.info.rope_dims)
    run_rows(&f, ROWS(insert_rope_rows));
  if (!strcmp(op, "kv_insert") && f.k.info.q_dim)
    run_rows(&f, ROWS(insert_q_rows));
  free_fixture(&f);
}

static dsv4rt_bundle *open_bundle(const char *dir, const char *name)
{
  char path[1024];
  dsv4rt_bundle *b = NULL;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  if (harness_bundle(path, &b))
    exit(1);
  return b;
}

int main(int argc, char **argv)
{
  if (argc != 4) {
    fprintf(stderr, "usage: test_validate KERNEL_DIR OTHER_TARGET_DIR opencl|cuda|hip\n");
    return 2;
  }
  int st = harness_open(argv[3]);
  if (st)
    return st;
  addresses = dsv4rt_context_backend(ctx) == DSV4RT_BACKEND_CUDA || dsv4rt_context_backend(ctx) == DSV4RT_BACKEND_HIP;
  fake = harness_launches() >= 0;
  if (dsv4rt_context_create(dsv4rt_context_backend(ctx), 0, &ctx2)) {
    printf("FAIL: a second context: %s\n", dsv4rt_last_error(NULL));
    return 1;
  }
  dsv4rt_bundle *dec = open_bundle(argv[1], "decode.dsv4b"), *idx = open_bundle(argv[1], "indexer.dsv4b"),
                *lay = open_bundle(argv[1], "gather_layouts.dsv4b"), *odec = open_bundle(argv[2], "decode.dsv4b"),
                *oidx = open_bundle(argv[2], "indexer.dsv4b");
  test_op("dequant_gather", "dsv4rt_dequant_gather", dec, odec, NULL, fx_dequant, go_dg, ROWS(dequant_rows));
  test_op("dequant_gather", "dsv4rt_dequant_gather", lay, NULL, "dequant_gather_fp8_per_tensor", fx_dequant, go_dg,
          ROWS(per_tensor_rows));
  test_op("paged_gather", "dsv4rt_paged_gather", dec, odec, NULL, fx_paged, go_pg, ROWS(paged_rows));
  test_op("kv_insert", "dsv4rt_kv_insert", dec, odec, NULL, fx_insert, go_ki, ROWS(insert_rows));
  test_op("sparse_decode", "dsv4rt_sparse_decode", dec, odec, NULL, fx_decode, go_sd, ROWS(decode_rows));
  test_op("paged_mqa_logits", "dsv4rt_paged_mqa_logits", idx, oidx, NULL, fx_logits, go_lg, ROWS(logits_rows));
  test_op("topk", "dsv4rt_topk", idx, oidx, NULL, fx_topk, go_tk, ROWS(topk_rows));
  test_op("paged_mqa_logits_topk", "dsv4rt_paged_mqa_logits_topk", idx, oidx, NULL, fx_fused, go_lt,
          ROWS(fused_rows));
  dsv4rt_bundle_destroy(dec), dsv4rt_bundle_destroy(idx), dsv4rt_bundle_destroy(lay);
  dsv4rt_bundle_destroy(odec), dsv4rt_bundle_destroy(oidx);
  dsv4rt_context_destroy(ctx2);
  dsv4rt_context_destroy(ctx);
  return harness_finish();
}
