/* form_rules.h -- the geometry of each kernel form: threads, shared
 * memory, warps and producer counts.  choose_form (compiler/ops/) decides the
 * form once per (kernel, target) and records, by dsv4_form_launch below,
 * the launch record the bundle carries (dsv4_abi.h); the generators build
 * exactly what these rules say.  The runtime's bundle reader
 * (runtime/src/bundle.c, which includes this header privately; it is not
 * installed) holds every entry's record to the same dsv4_form_launch, from
 * the fields the entry carries, so that a record that disagrees with the
 * kernel's tile is refused rather than launched. */
#ifndef DSV4_FORM_RULES_H
#define DSV4_FORM_RULES_H

#include <stddef.h>

#include "dsv4_abi.h"
#include "dsv4_layout.h"
#include "kernel_geometry.h"

/* sparse_decode's warp-matrix form: K rows a tile, warps a 16-head row
 * block (each takes a quarter of a tile's rows and of V); its direct form
 * (below) has twice the warps, each an eighth. */
#define DSV4_DECODE_WARPS 4
#define DSV4_DECODE_DIRECT_WARPS 8
/* paged_mqa_logits' warp-matrix form: warps a CTA (two 16-position
 * m-tiles each a step: tokens_per_cta a multiple of 128). */
#define DSV4_LOGITS_WARPS 4
#define DSV4_LOGITS_STAGES 3 /* m-tiles of K a warp has in its cp.async ring */
/* The static shared memory of its two forms (the spec checker holds them
 * to a kernel's 48 KB; the generators build exactly these): the warp form
 * (mma.sync: q rows padded by 16 bytes, weights, a ring of 16-row steps a
 * warp) and the warpgroup form (wgmma: q rows, a ring of 64-row steps,
 * 8 bytes of scale and validity a row, weights). */
#define DSV4_LOGITS_STATIC_MAX 49152
static inline int dsv4_logits_warp_shared_bytes(int dim, int heads)
{
  return DSV4_LOGITS_MAX_NEXT_N * heads * (dim + 16) + DSV4_LOGITS_MAX_NEXT_N * heads * 4 +
         DSV4_LOGITS_WARPS * DSV4_LOGITS_STAGES * (16 * (dim + 16) + 128);
}

static inline int dsv4_logits_wg_shared_bytes(int dim, int heads)
{
  /* q, the ring (K, scale + validity), the head sum's bf16 weights (8 rows
   * of 128-byte K-blocks), a TMA barrier object a stage */
  return DSV4_LOGITS_MAX_NEXT_N * heads * dim + DSV4_LOGITS_STAGES * 64 * (dim + 8) +
         8 * ((2 * DSV4_LOGITS_MAX_NEXT_N * heads + 127) / 128 * 128) + 8 * DSV4_LOGITS_STAGES;
}

/* sparse_decode's warpgroup form (tile.matrix where the target has wgmma,
 * form DSV4_FORM_WARPGROUP): 64 heads a CTA, two consumer
 * warpgroups (the lead: S for a whole tile, the softmax, P V for V's first
 * dims; the follower: P V for the rest) and a
 * producer role (dsv4_decode_wg_producers() warps) that dequantizes the
 * next tile.  Dynamic shared memory: q, two K tiles (bf16, 128-byte
 * swizzled atoms), two P buffers (high and low bf16 parts), three slots of
 * 2 x 64 floats (the rows' rescale factors of the two P buffers; the rows'
 * final m and l; the rows' sinks), two validity words a K row; in CTA pairs
 * (DSV4_FORM_WARPGROUP_PAIR: clusters of two, the two 64-head groups of
 * a token, each dequantizing half of every tile for both) also four
 * barrier objects of 8 bytes. */
/* Producer warps of a form: eight in both (with 64-value lanes a thread
 * takes two rows of a tile alone, one in CTA pairs; the compiler's
 * kernel_regs.h says why). */
#define DSV4_DECODE_WG_PRODUCERS 8
#define DSV4_DECODE_WG_HEADS 64
#define DSV4_DECODE_WG_VDIM 512
static inline int dsv4_decode_wg_producers(int form)
{
  (void)form;
  return DSV4_DECODE_WG_PRODUCERS;
}
static inline int dsv4_decode_wg_threads(int form) { return 2 * 128 + 32 * dsv4_decode_wg_producers(form); }
static inline int dsv4_decode_wg_shared_bytes(int dim)
{
  return (DSV4_DECODE_WG_HEADS + 2 * DSV4_DECODE_TILE) * dim * 2 + 2 * 2 * DSV4_DECODE_WG_HEADS * DSV4_DECODE_TILE * 2 +
         3 * 2 * DSV4_DECODE_WG_HEADS * 4 + 2 * DSV4_DECODE_TILE * 4;
}
/* The shapes it maps (smem: the caller checks the arch's limit). */
static inline int dsv4_decode_wg_shape_ok(int dim, int v_dim, int heads_per_cta)
{
  return heads_per_cta == DSV4_DECODE_WG_HEADS && v_dim == DSV4_DECODE_WG_VDIM && dim % 64 == 0 && dim >= v_dim;
}
static inline int dsv4_decode_combine_threads(int v_dim) { return (v_dim / 4 + 31) / 32 * 32; }

/* The warp-matrix form of sparse_decode (tile.matrix) stages, in dynamic
 * shared memory: q (heads_per_cta rows) and one tile of DSV4_DECODE_TILE
 * dequantized K rows (bf16, rows padded by 16 bytes so that the 8 rows one
 * ldmatrix reads fall in distinct banks), P as two bf16 parts (high and
 * low, heads x tile each, padded the same way), a row maximum and a row
 * sum a head and warp of its row block, two validity words a K row (double-buffered), the next
 * tile's cache bytes as one block of DSV4_DECODE_TILE rows in the layout
 * (copied asynchronously while the current tile computes), and that
 * tile's row and scale-row addresses.  One rule, for choose_form's launch
 * record and the generator (which checks its arrays against it). */
static inline int dsv4_decode_row_bytes(int dim) { return dim * 2 + 16; }
static inline int dsv4_decode_raw_bytes(const dsv4_layout *l)
{
  return (int)((dsv4_layout_min_block_bytes(l, DSV4_DECODE_TILE) + 15) / 16 * 16);
}
/* The direct warp form (DSV4_FORM_WARP_DIRECT) reads its matrix operands
 * straight from the cache bytes (compiler/kernels/sparse_decode/direct.c:
 * no dequantized K tile), for CTAs of at most 32 heads, where the bytes,
 * not the matrix work, bound the decode, and layouts whose every segment
 * lets it: e4m3 values with UE8M0 group scales whose dims and groups come
 * in whole 32-dim pieces at 4-byte offsets, or bf16 values in 16-dim
 * pieces at 16-byte offsets (unscaled and tensor-scaled e4m3 keep the
 * other forms: no GPU run has checked them in this one); V (the first v_dim dims) in DSV4_DECODE_DIRECT_WARPS
 * parts of such pieces.  Its raw tiles keep rows dsv4_decode_direct_pitch()
 * apart: a multiple of 16 bytes whose word count is 4 mod 8, so that the
 * 8 rows x 4 words a fragment load reads fall in distinct banks. */
static inline int dsv4_decode_direct_piece(const dsv4_layout *l, int d, int end)
{
  for (int s = 0; s < l->nseg; s++) {
    const dsv4_segment *g = &l->seg[s];
    if (d < g->d0 || d >= g->d1)
      continue;
    if (g->type == DSV4_DT_E4M3) {
      if (g->scale_type != DSV4_DT_UE8M0 || g->scale_tensor || g->offset % 4 || g->scale_group % 32 ||
          d + 32 > g->d1 || d + 32 > end || (d - g->d0) % 32)
        return 0;
      return 32;
    }
    if (g->type == DSV4_DT_BF16)
      return g->offset % 16 == 0 && (d - g->d0) % 16 == 0 && d + 16 <= g->d1 && d + 16 <= end ? 16 : 0;
    return 0;
  }
  return 0;
}
static inline int dsv4_decode_warp_direct(const dsv4_layout *l, int heads_per_cta, int v_dim)
{
  if (heads_per_cta > 32 || heads_per_cta % 16 || v_dim % DSV4_DECODE_DIRECT_WARPS || v_dim > l->dim ||
      l->row_bytes % 16 || l->align % 16 || (l->scale_place == DSV4_SCALES_BLOCK_TAIL && l->scale_row_bytes % 4))
    return 0;
  int e4m3 = 0; /* (a cache without e4m3 values has nothing to convert: the warp form's copy suits it) */
  for (int s = 0; s < l->nseg; s++)
    e4m3 |= l->seg[s].type == DSV4_DT_E4M3;
  if (!e4m3)
    return 0;
  int part = v_dim / DSV4_DECODE_DIRECT_WARPS;
  for (int p = 0; p < DSV4_DECODE_DIRECT_WARPS; p++)
    for (int d = p * part, w; d < (p + 1) * part; d += w)
      if (!(w = dsv4_decode_direct_piece(l, d, (p + 1) * part)))
        return 0;
  for (int d = v_dim, w; d < l->dim; d += w) /* K's dims past V */
    if (!(w = dsv4_decode_direct_piece(l, d, l->dim)))
      return 0;
  return 1;
}
static inline int dsv4_decode_direct_pitch(int row_bytes)
{
  int p = (row_bytes + 15) / 16 * 16;
  while (p / 4 % 8 != 4)
    p += 16;
  return p;
}
/* One raw tile: DSV4_DECODE_TILE data rows, then (block-tail scales)
 * their scale rows, a multiple of 16 bytes. */
static inline int dsv4_decode_direct_tile_bytes(const dsv4_layout *l)
{
  int s = l->scale_place == DSV4_SCALES_BLOCK_TAIL ? DSV4_DECODE_TILE * l->scale_row_bytes : 0;
  return DSV4_DECODE_TILE * dsv4_decode_direct_pitch(l->row_bytes) + (s + 15) / 16 * 16;
}
/* Its shared memory: q (in fragment order: dim * 2 bytes a head), P in fp32 (rows of
 * DSV4_DECODE_TILE * 4 + 32 bytes), two raw tiles, a row maximum and a
 * row sum a head and part, a validity word a row of each raw tile. */
static inline int dsv4_decode_direct_shared_bytes(const dsv4_layout *l, int heads_per_cta)
{
  return heads_per_cta * l->dim * 2 + heads_per_cta * (DSV4_DECODE_TILE * 4 + 32) +
         2 * dsv4_decode_direct_tile_bytes(l) + heads_per_cta * 8 * DSV4_DECODE_DIRECT_WARPS +
         2 * DSV4_DECODE_TILE * 4;
}
static inline int dsv4_decode_shared_bytes(const dsv4_layout *l, int heads_per_cta, int form, int v_dim)
{
  if (form == DSV4_FORM_WARPGROUP || form == DSV4_FORM_WARPGROUP_PAIR)
    return dsv4_decode_wg_shared_bytes(l->dim) + (form == DSV4_FORM_WARPGROUP_PAIR ? 4 * 8 : 0);
  if (form == DSV4_FORM_WARP_DIRECT)
    return dsv4_decode_direct_shared_bytes(l, heads_per_cta);
  return (heads_per_cta + DSV4_DECODE_TILE) * dsv4_decode_row_bytes(l->dim) +
         2 * heads_per_cta * (DSV4_DECODE_TILE * 2 + 16) + heads_per_cta * 8 * DSV4_DECODE_WARPS +
         DSV4_DECODE_TILE * 8 + dsv4_decode_raw_bytes(l) + DSV4_DECODE_TILE * 16;
}


/* Whether the runtime's default rule (rt.c: rt_default_rank, fills_better)
 * tells apart two kernels of one op and form by tokens_per_cta: the direct
 * decode form (which heads a CTA covers) and the logits' batch forms (the
 * step that fills the device).  Elsewhere it goes by the form alone (and
 * the bundle's order).  A tuned build keeps, of every sweep, the first
 * variant of each (form, and this) key, so that a call outside every tuned
 * bucket runs what the untuned bundle's rule would (compiler/tuned.c). */
static inline int dsv4_rule_sees_tokens_per_cta(int op, int form)
{
  return (op == DSV4_OP_SPARSE_DECODE && form == DSV4_FORM_WARP_DIRECT) ||
         (op == DSV4_OP_PAGED_MQA_LOGITS && (form == DSV4_FORM_WARP || form == DSV4_FORM_WARPGROUP)) ||
         op == DSV4_OP_PAGED_MQA_LOGITS_TOPK;
}

/* Each op's geometry in a form: threads per CTA (the rule choose_form,
 * compiler/ops/, records in the launch record), whether the form takes the
 * shape (NULL: every shape), and its dynamic shared memory (NULL: none).
 * dsv4_op_geometry_of indexes them by op from DSV4_OPS: a new op is its
 * DSV4_GEOMETRY_<OP> row here, or the header does not compile.  vpt and
 * tokens_per_thread are positive (dsv4_op_threads holds them). */
typedef struct {
  int (*threads)(int form, int dim, int vpt, int tokens_per_cta, int tokens_per_thread, int heads);
  int (*takes)(int form, const dsv4_layout *l, int tokens_per_cta, int v_dim);
  int (*shared_bytes)(int form, const dsv4_layout *l, int tokens_per_cta, int v_dim);
} dsv4_op_geometry;

/* The gathers give each token dim/vpt lanes. */
static inline int dsv4_gather_threads(int form, int dim, int vpt, int tokens_per_cta, int tokens_per_thread,
                                      int heads)
{
  return dim / vpt * (tokens_per_cta / tokens_per_thread);
}
/* The writer pads a token's lanes to a power of two so that scale groups
 * are aligned thread groups. */
static inline int dsv4_insert_threads(int form, int dim, int vpt, int tokens_per_cta, int tokens_per_thread,
                                      int heads)
{
  return dsv4_pow2ceil(dim / vpt) * tokens_per_cta;
}
static inline int dsv4_decode_wg_form(int form)
{
  return form == DSV4_FORM_WARPGROUP || form == DSV4_FORM_WARPGROUP_PAIR;
}
/* sparse_decode: tokens_per_cta = heads per CTA; the warp form has
 * DSV4_DECODE_WARPS warps per 16 heads, the portable one the writer's lanes */
static inline int dsv4_decode_threads(int form, int dim, int vpt, int tokens_per_cta, int tokens_per_thread,
                                      int heads)
{
  if (dsv4_decode_wg_form(form))
    return dsv4_decode_wg_threads(form);
  if (form == DSV4_FORM_WARP)
    return tokens_per_cta % 16 ? 0 : tokens_per_cta / 16 * DSV4_DECODE_WARPS * 32;
  if (form == DSV4_FORM_WARP_DIRECT)
    return tokens_per_cta % 16 ? 0 : tokens_per_cta / 16 * DSV4_DECODE_DIRECT_WARPS * 32;
  return dsv4_pow2ceil(dim / vpt) * tokens_per_cta;
}
/* the warpgroup forms: 64 heads a CTA, V of 512 dims; the direct form:
 * dsv4_decode_warp_direct */
static inline int dsv4_decode_takes(int form, const dsv4_layout *l, int tokens_per_cta, int v_dim)
{
  if (form == DSV4_FORM_WARP_DIRECT)
    return dsv4_decode_warp_direct(l, tokens_per_cta, v_dim);
  return !dsv4_decode_wg_form(form) || dsv4_decode_wg_shape_ok(l->dim, v_dim, tokens_per_cta);
}
static inline int dsv4_decode_form_shared_bytes(int form, const dsv4_layout *l, int tokens_per_cta, int v_dim)
{
  return form != DSV4_FORM_PORTABLE ? dsv4_decode_shared_bytes(l, tokens_per_cta, form, v_dim) : 0;
}
static inline int dsv4_logits_batch_form(int form) { return form == DSV4_FORM_WARP || form == DSV4_FORM_WARPGROUP; }
/* paged_mqa_logits: the batch forms DSV4_LOGITS_WARPS warps (the row
 * warp-matrix form keeps the portable geometry); vpt = heads per thread:
 * a position's head groups */
static inline int dsv4_logits_threads(int form, int dim, int vpt, int tokens_per_cta, int tokens_per_thread,
                                      int heads)
{
  return dsv4_logits_batch_form(form) ? DSV4_LOGITS_WARPS * 32 : tokens_per_cta * (heads / vpt);
}
/* the batch forms: a step of whole DSV4_LOGITS_WARPS * 32 positions, as
 * the spec checker holds tokens_per_cta */
static inline int dsv4_logits_takes(int form, const dsv4_layout *l, int tokens_per_cta, int v_dim)
{
  return !dsv4_logits_batch_form(form) || tokens_per_cta % (DSV4_LOGITS_WARPS * 32) == 0;
}
/* topk: tokens_per_cta = threads working on one row */
static inline int dsv4_topk_threads(int form, int dim, int vpt, int tokens_per_cta, int tokens_per_thread, int heads)
{
  return tokens_per_cta;
}

/* The top-k select's shared bytes with `threads` a CTA: a histogram of
 * DSV4_TOPK_BINS bins and 4 counters, and a scan slot a thread (topk.c's
 * arrays). */
static inline int dsv4_topk_select_bytes(int threads) { return (DSV4_TOPK_BINS + 4) * 4 + threads * 4; }
/* paged_mqa_logits_topk: the portable form DSV4_LOGITS_TOPK_THREADS a CTA
 * (a step of that many / (heads / heads_per_thread) positions), the
 * warpgroup form the logits' one warpgroup.  tokens_per_cta = the chunk of
 * positions whose logits a CTA holds: the portable form in static shared
 * memory (dsv4_logits_topk_static_bytes, beside the select's arrays), the
 * warpgroup form every next_n row's chunk in dynamic (its static arrays
 * the logits form's, the select's then in its ring). */
#define DSV4_LOGITS_TOPK_THREADS 256
#define DSV4_LOGITS_TOPK_MERGE_THREADS 512 /* its merge's: one CTA a row, over the row's candidates */
static inline int dsv4_logits_topk_threads(int form, int dim, int vpt, int tokens_per_cta, int tokens_per_thread,
                                           int heads)
{
  return form == DSV4_FORM_WARPGROUP ? DSV4_LOGITS_WARPS * 32 : DSV4_LOGITS_TOPK_THREADS;
}
static inline int dsv4_logits_topk_takes(int form, const dsv4_layout *l, int tokens_per_cta, int v_dim)
{
  return form != DSV4_FORM_WARPGROUP || tokens_per_cta % (DSV4_LOGITS_WARPS * 32) == 0;
}
static inline int dsv4_logits_topk_shared_bytes(int form, const dsv4_layout *l, int tokens_per_cta, int v_dim)
{
  return form == DSV4_FORM_WARPGROUP ? DSV4_LOGITS_MAX_NEXT_N * tokens_per_cta * 4 : 0;
}
static inline int dsv4_logits_topk_static_bytes(int tokens_per_cta)
{
  return tokens_per_cta * 4 + dsv4_topk_select_bytes(DSV4_LOGITS_TOPK_THREADS);
}

#define DSV4_GEOMETRY_DEQUANT_GATHER {dsv4_gather_threads, NULL, NULL}
#define DSV4_GEOMETRY_PAGED_GATHER {dsv4_gather_threads, NULL, NULL}
#define DSV4_GEOMETRY_KV_INSERT {dsv4_insert_threads, NULL, NULL}
#define DSV4_GEOMETRY_SPARSE_DECODE {dsv4_decode_threads, dsv4_decode_takes, dsv4_decode_form_shared_bytes}
#define DSV4_GEOMETRY_PAGED_MQA_LOGITS {dsv4_logits_threads, dsv4_logits_takes, NULL}
#define DSV4_GEOMETRY_TOPK {dsv4_topk_threads, NULL, NULL}
#define DSV4_GEOMETRY_PAGED_MQA_LOGITS_TOPK                                                                           \
  {dsv4_logits_topk_threads, dsv4_logits_topk_takes, dsv4_logits_topk_shared_bytes}

/* Op op's geometry (an op out of range: the gathers'). */
static inline const dsv4_op_geometry *dsv4_op_geometry_of(int op)
{
  static const dsv4_op_geometry rows[DSV4_OP_COUNT] = {
#define X(e, s, d) [DSV4_OP_##e] = DSV4_GEOMETRY_##e,
      DSV4_OPS(X)
#undef X
  };
  static const dsv4_op_geometry other = DSV4_GEOMETRY_DEQUANT_GATHER;
  return op > DSV4_OP_NONE && op < DSV4_OP_COUNT ? &rows[op] : &other;
}

/* Threads per CTA of an op's kernel in a form (0: none maps). */
static inline int dsv4_op_threads(int op, int dim, int vpt, int tokens_per_cta, int tokens_per_thread, int heads,
                                  int form)
{
  if (vpt <= 0 || tokens_per_thread <= 0)
    return 0;
  return dsv4_op_geometry_of(op)->threads(form, dim, vpt, tokens_per_cta, tokens_per_thread, heads);
}

/* The forms each op has, with the grid rule each launches by and its
 * companion kernel: the one table of op -> form -> grid.  The compiler's
 * record writer (dsv4_form_launch below) and the runtime's reader
 * (runtime/src/bundle.c, which refuses a form an op lacks or a record that
 * disagrees) both read it.  A new form of an op is its name and a row
 * here, its geometry above, and its op's choose_form (compiler/ops/). */
typedef struct {
  uint8_t grid;   /* DSV4_GRID_*; 0: the op has no such form */
  uint8_t second; /* DSV4_SECOND_* */
} dsv4_form_row;

/* A form's name in messages and --emit plan. */
static inline const char *dsv4_form_name(int form)
{
  static const char *const names[DSV4_FORM_COUNT] = {
      [DSV4_FORM_PORTABLE] = "portable",
      [DSV4_FORM_WARP] = "warp-matrix",
      [DSV4_FORM_WARPGROUP] = "warpgroup",
      [DSV4_FORM_WARPGROUP_PAIR] = "warpgroup CTA-pair",
      [DSV4_FORM_ROW_WARP] = "row warp-matrix",
      [DSV4_FORM_WARP_DIRECT] = "direct warp-matrix",
  };
  return form >= 0 && form < DSV4_FORM_COUNT ? names[form] : "?";
}

static inline dsv4_form_row dsv4_form_of(uint32_t op, uint32_t form)
{
  static const dsv4_form_row rows[DSV4_OP_COUNT][DSV4_FORM_COUNT] = {
      [DSV4_OP_DEQUANT_GATHER] = {[DSV4_FORM_PORTABLE] = {DSV4_GRID_TOKENS, DSV4_SECOND_NONE}},
      [DSV4_OP_PAGED_GATHER] = {[DSV4_FORM_PORTABLE] = {DSV4_GRID_TOKENS_REQUESTS, DSV4_SECOND_NONE}},
      [DSV4_OP_KV_INSERT] = {[DSV4_FORM_PORTABLE] = {DSV4_GRID_INSERT, DSV4_SECOND_NONE}},
      [DSV4_OP_SPARSE_DECODE] =
          {
              [DSV4_FORM_PORTABLE] = {DSV4_GRID_HEADS_TOKENS, DSV4_SECOND_NONE},
              [DSV4_FORM_WARP] = {DSV4_GRID_HEADS_TOKENS, DSV4_SECOND_COMBINE},
              [DSV4_FORM_WARP_DIRECT] = {DSV4_GRID_HEADS_TOKENS, DSV4_SECOND_COMBINE},
              [DSV4_FORM_WARPGROUP] = {DSV4_GRID_HEADS_TOKENS, DSV4_SECOND_COMBINE},
              [DSV4_FORM_WARPGROUP_PAIR] = {DSV4_GRID_HEADS_TOKENS, DSV4_SECOND_COMBINE},
          },
      [DSV4_OP_PAGED_MQA_LOGITS] =
          {
              [DSV4_FORM_PORTABLE] = {DSV4_GRID_POSITIONS_ROWS, DSV4_SECOND_NONE},
              [DSV4_FORM_ROW_WARP] = {DSV4_GRID_POSITIONS_ROWS, DSV4_SECOND_NONE},
              [DSV4_FORM_WARP] = {DSV4_GRID_POSITIONS_BATCH, DSV4_SECOND_NONE},
              [DSV4_FORM_WARPGROUP] = {DSV4_GRID_POSITIONS_BATCH, DSV4_SECOND_NONE},
          },
      [DSV4_OP_TOPK] = {[DSV4_FORM_PORTABLE] = {DSV4_GRID_ROWS, DSV4_SECOND_MERGE}},
      [DSV4_OP_PAGED_MQA_LOGITS_TOPK] =
          {
              [DSV4_FORM_PORTABLE] = {DSV4_GRID_POSITIONS_ROWS, DSV4_SECOND_LOGITS_TOPK_MERGE},
              [DSV4_FORM_WARPGROUP] = {DSV4_GRID_POSITIONS_BATCH, DSV4_SECOND_LOGITS_TOPK_MERGE},
          },
  };
  dsv4_form_row none = {0, DSV4_SECOND_NONE};
  return op < DSV4_OP_COUNT && form < DSV4_FORM_COUNT ? rows[op][form] : none;
}

/* The launch record of op's kernel in `form`, from what a bundle entry
 * carries (the layout, the tile, v_dim, heads): threads, dynamic shared
 * memory, cluster, grid rule and companion kernel.  The one rule: forms.c
 * writes the record with it and the bundle reader checks the record
 * against it.  Returns 0, or 1 where the form is not one of the op's
 * or not a form of the op (dsv4_form_of), or does not take this shape
 * (sparse_decode's warpgroup forms: 64 heads a CTA, V of 512 dims; the
 * logits' batch forms: a step of whole DSV4_LOGITS_WARPS * 32 positions,
 * as the spec checker holds tokens_per_cta). */
static inline int dsv4_form_launch(int op, int form, const dsv4_layout *l, int vpt, int tokens_per_cta,
                                   int tokens_per_thread, int heads, int v_dim, dsv4_launch *out)
{
  dsv4_form_row row = dsv4_form_of((uint32_t)op, (uint32_t)form);
  if (!row.grid)
    return 1;
  const dsv4_op_geometry *g = dsv4_op_geometry_of(op);
  if (g->takes && !g->takes(form, l, tokens_per_cta, v_dim))
    return 1;
  out->form = (uint32_t)form;
  out->threads = (uint32_t)dsv4_op_threads(op, l->dim, vpt, tokens_per_cta, tokens_per_thread, heads, form);
  out->shared_bytes = g->shared_bytes ? (uint32_t)g->shared_bytes(form, l, tokens_per_cta, v_dim) : 0;
  out->cluster = form == DSV4_FORM_WARPGROUP_PAIR ? 2 : 1;
  out->grid = row.grid;
  out->second = row.second;
  out->second_threads = row.second == DSV4_SECOND_COMBINE ? (uint32_t)dsv4_decode_combine_threads(v_dim)
                        : row.second == DSV4_SECOND_MERGE ? out->threads /* the merge: the select's CTA */
                        : row.second == DSV4_SECOND_LOGITS_TOPK_MERGE ? DSV4_LOGITS_TOPK_MERGE_THREADS
                                                                      : 0;
  out->reserved = 0;
  return 0;
}

#endif
