/* dsv4_abi.h -- what the compiler and the runtime must agree on: each op's
 * kernel argument signature and launch rule, and the bundle file format.
 *
 * Defined once here (X-macros) and used by the generators (parameter lists),
 * the bundle writer (manifest) and the runtime (marshalling and checks), so a
 * bundle whose signature differs from what this runtime expects is refused
 * rather than launched with the wrong arguments.
 *
 * Installed, so it holds the file format and the call ABI only: the
 * kernel geometry both sides share beyond it (tiles, the logits' tensor
 * map, split-KV sizing) is in common/kernel_geometry.h, each form's in
 * compiler/form_rules.h; neither is installed.
 */
#ifndef DSV4_ABI_H
#define DSV4_ABI_H

#include <stdint.h>

#include "dsv4_layout.h"

/* Operations: X(enum suffix, spec name, one-line meaning). */
#define DSV4_OPS(X)                                                          \
  X(DEQUANT_GATHER, "dequant_gather", "docs/ops.md 2a: rows of scattered slots") \
  X(PAGED_GATHER, "paged_gather", "docs/ops.md 2b: per-request paged gather")    \
  X(KV_INSERT, "kv_insert", "docs/ops.md 5: (q norm + RoPE,) KV RoPE + quantize + insert") \
  X(SPARSE_DECODE, "sparse_decode", "docs/ops.md 3: sparse MLA decode over one or two caches") \
  X(PAGED_MQA_LOGITS, "paged_mqa_logits", "docs/ops.md 4: the indexer's paged MQA logits") \
  X(TOPK, "topk", "docs/ops.md 4: top-k positions of each logits row") \
  X(PAGED_MQA_LOGITS_TOPK, "paged_mqa_logits_topk", "docs/ops.md 4: the logits' top-k positions, no logits row written")

typedef enum {
  DSV4_OP_NONE = 0,
#define X(e, s, d) DSV4_OP_##e,
  DSV4_OPS(X)
#undef X
      DSV4_OP_COUNT
} dsv4_op;

/* PTR: device memory the kernel writes; IN: device memory it only reads. */
typedef enum { DSV4_ARG_PTR = 1, DSV4_ARG_I32 = 2, DSV4_ARG_I64 = 3, DSV4_ARG_IN = 4, DSV4_ARG_F32 = 5 } dsv4_arg_kind;

/* dequant_gather(out, cache, indices, n, num_blocks, block_size, block_stride)
 * tensor_scale: the per-tensor kv_scale of layouts that have one (else unused)
 * grid.x = ceil(n / tokens_per_cta), block.x = threads
 * (= dim / values_per_thread * tokens_per_cta / tokens_per_thread) */
#define DSV4_ARGS_DEQUANT_GATHER(A) \
  A(out, PTR)                       \
  A(cache, IN)                      \
  A(indices, IN)                    \
  A(n, I32)                         \
  A(num_blocks, I32)                \
  A(block_size, I32)                \
  A(block_stride, I64)              \
  A(tensor_scale, F32)

/* paged_gather(out, cache, seq_lens, gather_lens, block_table, ...)
 * grid = (ceil((M - offset) / tokens_per_cta), R), block.x = threads;
 * out strides are in elements; has_gather_lens = 0 reads g = seq_len. */
#define DSV4_ARGS_PAGED_GATHER(A) \
  A(out, PTR)                     \
  A(cache, IN)                    \
  A(seq_lens, IN)                 \
  A(gather_lens, IN)              \
  A(block_table, IN)              \
  A(num_requests, I32)            \
  A(max_blocks, I32)              \
  A(num_blocks, I32)              \
  A(block_size, I32)              \
  A(block_stride, I64)            \
  A(out_stride_r, I64)            \
  A(out_stride_m, I64)            \
  A(out_rows, I32)                \
  A(offset, I32)                  \
  A(has_gather_lens, I32)         \
  A(tensor_scale, F32)            \
  A(bt_stride, I64)

/* kv_insert(cache, q_out, kv, q, slot_mapping, positions, cos_sin, ...)
 * 1-D grid: the first kv_ctas CTAs write kv rows (tokens_per_cta each, rows
 * past n_insert or with slot < 0 skipped), the rest normalize q rows
 * (n_tokens * padded_heads of them, threads / pow2(q_dim / vpt) a CTA).
 * q, q_out, positions and cos_sin are unused when the kernel has no q
 * branch / no RoPE. */
#define DSV4_ARGS_KV_INSERT(A) \
  A(cache, PTR)                \
  A(q_out, PTR)                \
  A(kv, IN)                    \
  A(q, IN)                     \
  A(slot_mapping, IN)          \
  A(positions, IN)             \
  A(cos_sin, IN)               \
  A(n_tokens, I32)             \
  A(n_insert, I32)             \
  A(num_blocks, I32)           \
  A(block_size, I32)           \
  A(block_stride, I64)         \
  A(max_pos, I32)              \
  A(heads, I32)                \
  A(padded_heads, I32)         \
  A(eps, F32)                  \
  A(kv_ctas, I32)

/* sparse_decode(out, lse, q, cache, indices, lens, extra_cache, ...)
 * grid = (ceil(heads / heads_per_cta), n_tokens, splits); the extra list is
 * absent when extra_topk is 0, the sink when has_sink is 0.  The warp-matrix
 * form splits a token's tiles over `splits` CTAs (split-KV): with splits > 1
 * each writes its partial state to work (which the runtime sizes and
 * lays out: common/kernel_geometry.h, not installed) and the module's
 * second kernel, <name>_combine (DSV4_ARGS_DECODE_COMBINE, grid
 * n_tokens * heads), merges them into out and lse.  The portable form
 * ignores work and splits (always 1).
 * Token t is position t % seq_q of batch entry t / seq_q, and every
 * token-major argument is addressed through its strides in elements (the
 * last dim packed): q[t, h] at (t / seq_q) q_sb + (t % seq_q) q_ss + h q_sh,
 * out and lse alike, a list's row and length at its _sb, _ss (lengths one a
 * batch entry: lens_ss = 0).  The runtime passes packed strides for packed
 * arguments; the work space stays packed [n_tokens, heads]. */
#define DSV4_ARGS_SPARSE_DECODE(A) \
  A(out, PTR)                      \
  A(lse, PTR)                      \
  A(q, IN)                         \
  A(cache, IN)                     \
  A(indices, IN)                   \
  A(lens, IN)                      \
  A(extra_cache, IN)               \
  A(extra_indices, IN)             \
  A(extra_lens, IN)                \
  A(attn_sink, IN)                 \
  A(n_tokens, I32)                 \
  A(heads, I32)                    \
  A(topk, I32)                     \
  A(num_blocks, I32)               \
  A(block_size, I32)               \
  A(block_stride, I64)             \
  A(extra_topk, I32)               \
  A(extra_num_blocks, I32)         \
  A(extra_block_size, I32)         \
  A(extra_block_stride, I64)       \
  A(has_sink, I32)                 \
  A(softmax_scale, F32)            \
  A(tensor_scale, F32)             \
  A(work, PTR)                     \
  A(splits, I32)                   \
  A(seq_q, I32)                    \
  A(q_sb, I64)                     \
  A(q_ss, I64)                     \
  A(q_sh, I64)                     \
  A(out_sb, I64)                   \
  A(out_ss, I64)                   \
  A(out_sh, I64)                   \
  A(lse_sb, I64)                   \
  A(lse_ss, I64)                   \
  A(lse_sh, I64)                   \
  A(indices_sb, I64)               \
  A(indices_ss, I64)               \
  A(lens_sb, I64)                  \
  A(lens_ss, I64)                  \
  A(extra_indices_sb, I64)         \
  A(extra_indices_ss, I64)         \
  A(extra_lens_sb, I64)            \
  A(extra_lens_ss, I64)

/* The combine kernel of sparse_decode's split-KV: per (token, head) row the
 * splits' partial (m, l, unnormalized acc) states from work, merged with the
 * sink and tensor scale as the one-CTA form finishes a row; out and lse
 * through sparse_decode's strides. */
#define DSV4_ARGS_DECODE_COMBINE(A) \
  A(out, PTR)                       \
  A(lse, PTR)                       \
  A(work, IN)                       \
  A(attn_sink, IN)                  \
  A(n_tokens, I32)                  \
  A(heads, I32)                     \
  A(splits, I32)                    \
  A(has_sink, I32)                  \
  A(tensor_scale, F32)              \
  A(seq_q, I32)                     \
  A(out_sb, I64)                    \
  A(out_ss, I64)                    \
  A(out_sh, I64)                    \
  A(lse_sb, I64)                    \
  A(lse_ss, I64)                    \
  A(lse_sh, I64)

/* paged_mqa_logits(logits, q, cache, weights, context_lens, block_table, ...)
 * grid = (ceil(L / tokens_per_cta), rows = B * next_n), or B for the
 * warp-matrix form (each CTA all next_n <= DSV4_LOGITS_MAX_NEXT_N rows of
 * one batch entry); heads and head dim are the kernel's (spec),
 * context_lens is [B, next_n].  kv_map: NULL, or (CUDA, block_size a
 * multiple of 64) a tensor map of the cache's K rows in device memory
 * (the runtime builds it by its geometry rule, common/kernel_geometry.h,
 * not installed), which the warpgroup form copies K by (TMA); the other
 * forms ignore it.  kv_map_fresh: 1 when the host wrote the map
 * since its last launch (the kernel then acquires it before use). */
#define DSV4_ARGS_PAGED_MQA_LOGITS(A) \
  A(logits, PTR)                      \
  A(q, IN)                            \
  A(cache, IN)                        \
  A(weights, IN)                      \
  A(context_lens, IN)                 \
  A(block_table, IN)                  \
  A(rows, I32)                        \
  A(next_n, I32)                      \
  A(num_blocks, I32)                  \
  A(block_size, I32)                  \
  A(block_stride, I64)                \
  A(max_blocks, I32)                  \
  A(row_len, I32)                     \
  A(row_stride, I64)                  \
  A(kv_map, IN)                       \
  A(kv_map_fresh, I32)                \
  A(bt_stride, I64)

/* topk(out, logits, context_lens, rows, row_stride, row_len, work, chunk):
 * K is the kernel's; a row's positions are those below min(ctx, row_len).
 * chunk 0: grid (rows), one CTA a row, writing its K into out (rows with
 * ctx <= K get 0..ctx-1 then -1).  chunk > 0 (a split): grid (rows,
 * chunks = ceil(row_len / chunk)); CTA (r, c) takes the row's positions in
 * [c chunk, (c + 1) chunk) and writes the K largest (all of them, then -1,
 * where there are no more than K) as positions to work[(r chunks + c) K ..
 * + K) (i32) and their keys (the float bits made monotone, u32) rows chunks
 * K words further on; the module's second kernel, <name>_merge
 * (DSV4_ARGS_TOPK_MERGE, grid (rows)), then takes each row's K among its
 * chunks' candidates into out. */
#define DSV4_ARGS_TOPK(A) \
  A(out, PTR)             \
  A(logits, IN)           \
  A(context_lens, IN)     \
  A(rows, I32)            \
  A(row_stride, I64)      \
  A(row_len, I32)         \
  A(work, PTR)            \
  A(chunk, I32)

/* topk's merge: each row's K largest among the chunks x K candidate
 * positions its split wrote to work (-1: none), into out; rows with ctx
 * <= K get 0..ctx-1 then -1, as the one-CTA form's. */
#define DSV4_ARGS_TOPK_MERGE(A) \
  A(out, PTR)                   \
  A(logits, IN)                 \
  A(context_lens, IN)           \
  A(rows, I32)                  \
  A(row_stride, I64)            \
  A(row_len, I32)               \
  A(work, IN)                   \
  A(chunks, I32)

/* paged_mqa_logits_topk(out, q, cache, ...): each logits row's K largest
 * positions (K the kernel's, topk's contract) straight from the cache, the
 * logits of a chunk of tokens_per_cta positions held on chip.  The
 * arguments the logits take sit at the logits' positions (the generators
 * share their code); out [rows, K] int32 replaces logits, work its
 * row_stride; chunk is the runtime's tokens_per_cta (a CTA whose code was
 * built for another writes nothing).  grid = (chunks = ceil(row_len /
 * chunk), rows), or B for the warpgroup form (a CTA every next_n row of
 * one batch entry).  One chunk: a CTA writes its rows' K into out.  More:
 * hist holds, in 32-bit words, row r's histogram of 4096 bins (the
 * logits' keys' top 12 bits) and its candidate count at r 4097 .. + 4097,
 * all 0 before the launch; work the candidates' positions at r row_len +
 * i and their keys rows row_len words further on.  Each CTA adds its chunk's bins to its row's
 * histogram, takes as its threshold the lowest bin at or above which the
 * histogram (as far as it sees it) and its own chunk each hold K keys,
 * and appends its keys from that bin up as candidates: a superset of the
 * row's K.  The module's second kernel, <name>_merge
 * (DSV4_ARGS_LOGITS_TOPK_MERGE, grid (rows)), takes each row's K among its
 * candidates into out and sets its histogram and count back to 0 (so hist
 * stays 0 between calls); a merge built for another chunk writes nothing
 * either.  A CTA appends at most row_len candidates a row. */
#define DSV4_TOPK_BINS 4096 /* a row's histogram (hist): the keys' top 12 bits */
#define DSV4_ARGS_PAGED_MQA_LOGITS_TOPK(A) \
  A(out, PTR)                              \
  A(q, IN)                                 \
  A(cache, IN)                             \
  A(weights, IN)                           \
  A(context_lens, IN)                      \
  A(block_table, IN)                       \
  A(rows, I32)                             \
  A(next_n, I32)                           \
  A(num_blocks, I32)                       \
  A(block_size, I32)                       \
  A(block_stride, I64)                     \
  A(max_blocks, I32)                       \
  A(row_len, I32)                          \
  A(work, PTR)                             \
  A(kv_map, IN)                            \
  A(kv_map_fresh, I32)                     \
  A(bt_stride, I64)                        \
  A(chunk, I32)                            \
  A(hist, PTR)

/* paged_mqa_logits_topk's merge: row r's K largest candidates (work, as
 * above) into out, rows with ctx <= K as 0..ctx-1 then -1; then the row's
 * histogram and count back to 0. */
#define DSV4_ARGS_LOGITS_TOPK_MERGE(A) \
  A(out, PTR)                          \
  A(context_lens, IN)                  \
  A(rows, I32)                         \
  A(row_len, I32)                      \
  A(work, IN)                          \
  A(hist, PTR)                         \
  A(chunk, I32)

/* Argument positions, from the same lists: DSV4_A_<OP>_<name> (and
 * DSV4_A_<OP>_COUNT).  The generators read their parameters and the
 * runtime places its arguments by these, so neither writes the order. */
#define DSV4_A_IDX_DEQUANT_GATHER(nm, kind) DSV4_A_DEQUANT_GATHER_##nm,
#define DSV4_A_IDX_PAGED_GATHER(nm, kind) DSV4_A_PAGED_GATHER_##nm,
#define DSV4_A_IDX_KV_INSERT(nm, kind) DSV4_A_KV_INSERT_##nm,
#define DSV4_A_IDX_SPARSE_DECODE(nm, kind) DSV4_A_SPARSE_DECODE_##nm,
#define DSV4_A_IDX_DECODE_COMBINE(nm, kind) DSV4_A_DECODE_COMBINE_##nm,
#define DSV4_A_IDX_PAGED_MQA_LOGITS(nm, kind) DSV4_A_PAGED_MQA_LOGITS_##nm,
#define DSV4_A_IDX_TOPK(nm, kind) DSV4_A_TOPK_##nm,
#define DSV4_A_IDX_TOPK_MERGE(nm, kind) DSV4_A_TOPK_MERGE_##nm,
#define DSV4_A_IDX_PAGED_MQA_LOGITS_TOPK(nm, kind) DSV4_A_PAGED_MQA_LOGITS_TOPK_##nm,
#define DSV4_A_IDX_LOGITS_TOPK_MERGE(nm, kind) DSV4_A_LOGITS_TOPK_MERGE_##nm,
enum { DSV4_ARGS_DEQUANT_GATHER(DSV4_A_IDX_DEQUANT_GATHER) DSV4_A_DEQUANT_GATHER_COUNT };
enum { DSV4_ARGS_PAGED_GATHER(DSV4_A_IDX_PAGED_GATHER) DSV4_A_PAGED_GATHER_COUNT };
enum { DSV4_ARGS_KV_INSERT(DSV4_A_IDX_KV_INSERT) DSV4_A_KV_INSERT_COUNT };
enum { DSV4_ARGS_SPARSE_DECODE(DSV4_A_IDX_SPARSE_DECODE) DSV4_A_SPARSE_DECODE_COUNT };
enum { DSV4_ARGS_DECODE_COMBINE(DSV4_A_IDX_DECODE_COMBINE) DSV4_A_DECODE_COMBINE_COUNT };
enum { DSV4_ARGS_PAGED_MQA_LOGITS(DSV4_A_IDX_PAGED_MQA_LOGITS) DSV4_A_PAGED_MQA_LOGITS_COUNT };
enum { DSV4_ARGS_TOPK(DSV4_A_IDX_TOPK) DSV4_A_TOPK_COUNT };
enum { DSV4_ARGS_TOPK_MERGE(DSV4_A_IDX_TOPK_MERGE) DSV4_A_TOPK_MERGE_COUNT };
enum { DSV4_ARGS_PAGED_MQA_LOGITS_TOPK(DSV4_A_IDX_PAGED_MQA_LOGITS_TOPK) DSV4_A_PAGED_MQA_LOGITS_TOPK_COUNT };
enum { DSV4_ARGS_LOGITS_TOPK_MERGE(DSV4_A_IDX_LOGITS_TOPK_MERGE) DSV4_A_LOGITS_TOPK_MERGE_COUNT };

/* The argument list of op: kinds (and names when names is not NULL), from
 * the DSV4_ARGS_<OP> lists above; returns the count, -1 for an unknown op.
 * The one definition both the generators and the runtime use. */
static inline int dsv4_op_args(int op, unsigned char *kinds, const char **names)
{
  int n = 0;
#define A(nm, kind)                \
  kinds[n] = DSV4_ARG_##kind;      \
  if (names)                       \
    names[n] = #nm;                \
  n++;
#define X(e, s, d)    \
  case DSV4_OP_##e:   \
    DSV4_ARGS_##e(A)  \
    return n;
  switch (op) {
    DSV4_OPS(X)
  default:
    return -1;
  }
#undef X
#undef A
}

/* An op that reads no cache (its kernels carry no layout). */
static inline int dsv4_op_has_layout(int op) { return op != DSV4_OP_TOPK; }

#define DSV4_MAX_ARGS 64 /* (bundle version 8: sparse_decode's strides made it 43) */

/* paged_mqa_logits' matrix forms (grid rule POSITIONS_BATCH): a CTA holds
 * every next_n row of one batch entry, so next_n is at most this
 * (DeepSeek-V4 uses 1 and 2) */
#define DSV4_LOGITS_MAX_NEXT_N 2

/* ---- bundle file format (version 9), all integers little-endian ----------
 *
 *   header   (32 bytes)
 *            @0   magic "DSV4BNDL"                  (every version)
 *            @8   u32 version                       (every version)
 *            @12  u32 crc32 of bytes [16, file_size): everything after it,
 *                 the rest of the header included
 *            @16  u32 nentries
 *            @20  u32 nchoices: choice records (0 for an untuned bundle;
 *                 at most DSV4_BUNDLE_MAX_CHOICES)
 *            @24  u64 file_size
 *   entries  nentries x dsv4_bundle_entry (fixed size, below)
 *   choices  nchoices x dsv4_bundle_choice (fixed size, below): the
 *            tuned winners dsv4c --lock wrote (docs/tuning.md), right after
 *            the entry table
 *   blobs    each entry's code, then its aux (if any), each 16-byte aligned
 *            (the writer keeps entry order); only zero padding (< 16 bytes)
 *            before each and at the end
 *
 * Magic and version stay where every version had them, so a reader meeting
 * another version says which it is.  The reader holds every byte to the
 * format: a field outside the ranges below (a layout's: the runtime's
 * layout_check.h), a choice record that is not one (below), a byte that
 * belongs to no entry or two blobs overlapping refuse the whole bundle.
 */
#define DSV4_BUNDLE_MAGIC "DSV4BNDL"
/* 3: the entries' flags; 4: the pair form's 512 threads (dsv4_op_threads);
 * 5: the checksum covers the header's fields (count, size) too, every
 * field is range-checked and every byte accounted for; 6: each entry holds
 * its launch record (dsv4_launch); 7: the choice records (dsv4_bundle_choice,
 * their count in the header's former reserved word); 8: 64 argument kinds
 * an entry (sparse_decode's strided arguments); 9: topk's split rows
 * (its work and chunk arguments, the <name>_merge second kernel) */
#define DSV4_BUNDLE_VERSION 9u
#define DSV4_BUNDLE_HEADER_BYTES 32
#define DSV4_BUNDLE_AT_VERSION 8
#define DSV4_BUNDLE_AT_CRC 12
#define DSV4_BUNDLE_AT_NENTRIES 16 /* also where the checksummed bytes start */
#define DSV4_BUNDLE_AT_NCHOICES 20 /* the reserved word (0) until version 6 */
#define DSV4_BUNDLE_AT_SIZE 24
#define DSV4_BUNDLE_ALIGN 16
#define DSV4_BUNDLE_MAX_ENTRIES 256 /* the most a reader takes */
#define DSV4_BUNDLE_MAX_CHOICES 512 /* the most choice records a reader takes */

/* The ranges an entry's fields may hold: what the spec checker
 * (compiler/spec/) can emit.  The reader holds every entry to them before
 * any arithmetic on them, so the launch rules above (int arithmetic) cannot
 * overflow on a hostile bundle. */
#define DSV4_ENTRY_MAX_THREADS 1024
#define DSV4_ENTRY_MAX_TOKENS_PER_CTA 1024
#define DSV4_ENTRY_MAX_LOGITS_STEP 65536 /* tokens_per_cta of the logits' matrix form */
#define DSV4_ENTRY_MAX_VALUES_PER_THREAD 64
#define DSV4_ENTRY_MAX_TOKENS_PER_THREAD 8
#define DSV4_ENTRY_MAX_DIMS 4096 /* v_dim, q_dim, rope_first + rope_dims */
#define DSV4_ENTRY_MAX_HEADS 1024
#define DSV4_ENTRY_MAX_TOPK 65536
#define DSV4_ENTRY_MAX_SHARED (1 << 20)

/* The launch record: how to launch an entry's kernel, decided once by the
 * compiler (its choose_form, per kernel and target) and stored with it.
 * The runtime holds it, when a bundle opens, to the rule the compiler
 * wrote it by (dsv4_form_launch in compiler/form_rules.h, compiled into
 * the runtime, not installed) from the entry's layout and tile, checks it
 * against the device's limits and sizes grids by its grid rule. */
enum {
  DSV4_FORM_PORTABLE = 0,       /* scalar code: every target */
  DSV4_FORM_WARP = 1,           /* warp matrix units (mma.sync) */
  DSV4_FORM_WARPGROUP = 2,      /* warpgroup matrix units (wgmma), one CTA */
  DSV4_FORM_WARPGROUP_PAIR = 3, /* the same in clusters of two CTAs (sparse_decode's tile.pair) */
  DSV4_FORM_ROW_WARP = 4,       /* paged_mqa_logits: the portable geometry, rows on mma.sync */
  DSV4_FORM_WARP_DIRECT = 5,    /* sparse_decode: mma.sync on operands read straight from the cache bytes */
  DSV4_FORM_COUNT
};
/* Grid rules (each op's call in ops.c implements its own):
 *   TOKENS            (ceil(n / tokens_per_cta))                     dequant_gather
 *   TOKENS_REQUESTS   (ceil((M - offset) / tokens_per_cta), R)       paged_gather
 *   INSERT            (kv CTAs + q-branch CTAs)                      kv_insert
 *   HEADS_TOKENS      (ceil(H / tokens_per_cta) * cluster, T, splits) sparse_decode
 *   POSITIONS_ROWS    (ceil(row_len / tokens_per_cta), B * next_n)   paged_mqa_logits(_topk)
 *   POSITIONS_BATCH   (ceil(row_len / tokens_per_cta), B): a CTA every
 *                     next_n row (<= DSV4_LOGITS_MAX_NEXT_N) of one entry
 *   ROWS              (rows, chunks): a CTA a row or chunk of one     topk
 *                     (then <name>_merge, grid (rows); so too after
 *                     paged_mqa_logits_topk's chunks) */
enum {
  DSV4_GRID_TOKENS = 1,
  DSV4_GRID_TOKENS_REQUESTS = 2,
  DSV4_GRID_INSERT = 3,
  DSV4_GRID_HEADS_TOKENS = 4,
  DSV4_GRID_POSITIONS_ROWS = 5,
  DSV4_GRID_POSITIONS_BATCH = 6,
  DSV4_GRID_ROWS = 7,
  DSV4_GRID_COUNT
};
/* The companion kernel (the module's second): the split-KV combine of
 * sparse_decode's matrix forms, named <name>_combine; topk's merge of a
 * split row's chunks, and paged_mqa_logits_topk's of a row's candidates,
 * named <name>_merge. */
enum {
  DSV4_SECOND_NONE = 0,
  DSV4_SECOND_COMBINE = 1,
  DSV4_SECOND_MERGE = 2,
  DSV4_SECOND_LOGITS_TOPK_MERGE = 3,
  DSV4_SECOND_COUNT
};

/* The second kernel's name suffix ("_combine", "_merge"; NULL for none). */
static inline const char *dsv4_second_suffix(uint32_t second)
{
  return second == DSV4_SECOND_COMBINE                                         ? "_combine"
         : second == DSV4_SECOND_MERGE || second == DSV4_SECOND_LOGITS_TOPK_MERGE ? "_merge"
                                                                                : (const char *)0;
}

/* The second kernel's argument kinds (and names when names is not NULL),
 * as dsv4_op_args gives an op's; the count (0 for none). */
static inline int dsv4_second_args(uint32_t second, unsigned char *kinds, const char **names)
{
  int n = 0;
#define A(nm, kind) (names ? (void)(names[n] = #nm) : (void)0), kinds[n++] = DSV4_ARG_##kind;
  if (second == DSV4_SECOND_COMBINE) {
    DSV4_ARGS_DECODE_COMBINE(A)
  } else if (second == DSV4_SECOND_MERGE) {
    DSV4_ARGS_TOPK_MERGE(A)
  } else if (second == DSV4_SECOND_LOGITS_TOPK_MERGE) {
    DSV4_ARGS_LOGITS_TOPK_MERGE(A)
  }
#undef A
  return n;
}

typedef struct {
  uint32_t form;           /* DSV4_FORM_* */
  uint32_t threads;        /* block.x of the first kernel */
  uint32_t shared_bytes;   /* its dynamic shared memory (0: none) */
  uint32_t cluster;        /* CTAs a cluster along grid.x: 1, or 2 (CTA pairs) */
  uint32_t grid;           /* DSV4_GRID_* */
  uint32_t second;         /* DSV4_SECOND_* */
  uint32_t second_threads; /* the second kernel's block.x (0 without one) */
  uint32_t reserved;       /* 0 */
} dsv4_launch;

typedef struct {
  char name[48];        /* kernel (and symbol) name, NUL-terminated */
  uint32_t op;          /* dsv4_op, numbered as in compiler/plan.h */
  uint32_t target;      /* 0 ptx, 1 amdgcn, 2 spirv (DSV4_BUNDLE_TARGETS) */
  char arch[16];        /* sm_90a, gfx942, opencl1.2 */
  dsv4_launch launch;   /* how to launch it (version 6) */
  uint32_t tokens_per_cta; /* what a CTA covers along grid.x: tokens, heads (sparse_decode), positions (logits), threads
                              (topk) */
  uint32_t values_per_thread;
  uint32_t tokens_per_thread;
  uint32_t rope_first, rope_dims; /* kv_insert: GPT-J RoPE range (dims 0: none) */
  uint32_t q_dim;                 /* kv_insert: head size of the q branch (0: none) */
  uint32_t quant_floor;           /* kv_insert: 0 floor amax at 1e-4 (vLLM), 1 floor amax/448 (FlashMLA tests) */
  uint32_t v_dim;                 /* sparse_decode: output (V) dims, the first v_dim of K */
  uint32_t heads;                 /* paged_mqa_logits: query heads */
  uint32_t topk;                  /* topk: K */
  uint32_t flags;                /* DSV4_ENTRY_* */
  uint32_t nargs;
  uint8_t args[DSV4_MAX_ARGS]; /* dsv4_arg_kind per argument */
  dsv4_layout layout;
  uint64_t code_off, code_len; /* .ptx text, .hsaco ELF, .spv words (offsets: in the file, past the entries) */
  uint64_t aux_off, aux_len;   /* spirv: SPIR 1.2 bitcode fallback; else both 0 */
} dsv4_bundle_entry;

#define DSV4_BUNDLE_TARGETS 3 /* the targets an entry may name */

/* A choice record (version 7): on a device of GPU model `device`, a call of
 * `op` whose shape falls in the bucket runs entry `entry` (among kernels of
 * that entry's kind: the runtime's choice, docs/tuning.md).  dsv4c --lock
 * writes one per fresh lockfile entry; dsv4rt_bundle_open installs those
 * whose device is the context's GPU model.  The reader refuses a record
 * whose device is not a non-empty NUL-terminated string with zeros after
 * the NUL, whose entry is not < nentries or not of op `op`, whose ndims is
 * not the op's bucket dims (common/bucket.h: DSV4_SHAPE_DIMS at most),
 * whose dims are negative, not a bucket (rounded as the runtime rounds
 * shapes) or set past ndims, or whose reserved word is not 0. */
#define DSV4_CHOICE_DEVICE 96
#define DSV4_CHOICE_DIMS 5
typedef struct {
  char device[DSV4_CHOICE_DEVICE]; /* the GPU model (dsv4_tune_device_model), NUL-terminated */
  uint32_t op;                     /* dsv4_op */
  uint32_t entry;                  /* the winner's entry index, of op `op` */
  uint32_t ndims;                  /* bucket dims in use */
  uint32_t reserved;               /* 0 */
  int64_t bucket[DSV4_CHOICE_DIMS]; /* the shape bucket; 0 past ndims */
  uint64_t median_ps;              /* the winner's median launch time (two sweeps' winners of one bucket: the faster) */
} dsv4_bundle_choice;

/* Entry flags.  SECOND_WAITS: the entry's second kernel (the split-KV
 * combine of a matrix sparse_decode) waits for the grid launched before it
 * in the stream to finish (PTX griddepcontrol.wait) before it reads
 * anything, so the runtime may launch it as that grid's programmatic
 * dependent: its CTAs are placed while the first kernel still runs.
 * FIRST_WAITS: the same for the entry's first kernel, which waits before
 * it touches any memory (so it may be placed while whatever kernel came
 * before it in the stream ends, where that kernel allows it).  A kernel
 * built without the wait must never be launched so.
 * SUBGROUPS_EMULATED (SPIR-V entries whose SPIR-V requires a sub-group
 * size, its SubgroupSize execution mode): the SPIR 1.2 fallback carries
 * its own sub-groups of that size (local memory and work-group barriers:
 * targets/spirv_subgroups.c), so it runs on a device that has none; the
 * SPIR-V itself still needs the device's. */
#define DSV4_ENTRY_SECOND_WAITS 1u
#define DSV4_ENTRY_FIRST_WAITS 2u
#define DSV4_ENTRY_SUBGROUPS_EMULATED 4u
#define DSV4_ENTRY_FLAGS_KNOWN (DSV4_ENTRY_SECOND_WAITS | DSV4_ENTRY_FIRST_WAITS | DSV4_ENTRY_SUBGROUPS_EMULATED)

/* CRC-32 (IEEE, reflected), shared by writer and reader. */
static inline uint32_t dsv4_crc32(const uint8_t *p, uint64_t n)
{
  uint32_t c = 0xFFFFFFFFu;
  for (uint64_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++)
      c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

#endif
