/* shape.h -- what the forms of the sparse MLA decode generator share
 * (docs/ops.md section 3, FlashMLA's semantics), and nothing form-specific.
 *
 * The generator is one entry point (op.c: dsv4_gen_sparse_decode) over four
 * kernel forms, each in its own file, none including another:
 *
 *   portable.c   no matrix units: lanes of a head dequantize K, reduce q.K
 *                across them, online softmax (every target)
 *   warp.c       tile.matrix: mma.sync m16n8k16 over 64-row tiles staged
 *                by cp.async (DSV4_FORM_WARP)
 *   direct.c     the same form for up to 32 heads a CTA, its operands read
 *                straight from the cache bytes (dsv4_decode_warp_direct)
 *   warpgroup.c  tile.matrix on targets with wgmma: producer warps and two
 *                consumer warpgroups, alone or as CTA pairs
 *                (DSV4_FORM_WARPGROUP, DSV4_FORM_WARPGROUP_PAIR)
 *   combine.c    <name>_combine, the second kernel of the matrix forms:
 *                merges the split-KV partial states
 *
 * What more than one form needs lives in rows.c (finishing a row, a list's
 * tiles, picking a tile's list, row validity, carving shared memory, a
 * head's output), declared here with an sd_ prefix.
 *
 * Short names the matrix forms use throughout (the PTX ISA's names for an
 * mma fragment's coordinates, and the online softmax's):
 *
 *   tid    thread in the CTA          lane   thread in its warp
 *   g      lane >> 2: the fragment row (and g + 8) the lane holds
 *   c      lane & 3: the column pair (2c, 2c + 1) of each 8 the lane holds
 *   h      0/1: which of the lane's two rows, g or g + 8
 *   e      element of a fragment      j      8-wide n-tile of a fragment
 *   t      the CTA's token            h0     its first head
 *   i      tile index, over the main list's tiles then the extra list's
 *   lo, hi this CTA's share [lo, hi) of the token's tiles (split-KV)
 *   m, l   a row's running max (base 2) and sum of exp2(s - m)
 *   scale2 softmax_scale (x tensor_scale when folded) x log2 e
 *   D, DV  the layout's dim and v_dim   H  the heads argument
 */
#ifndef DSV4_SPARSE_DECODE_SHAPE_H
#define DSV4_SPARSE_DECODE_SHAPE_H

#include "../gen.h"

/* The kernels' argument indices, in the order dsv4_abi.h's X-macros give:
 * SD_<name> for sparse_decode, SD_C_<name> for <name>_combine. */
#define SD_ARG_INDEX(nm, kind) SD_##nm,
enum { DSV4_ARGS_SPARSE_DECODE(SD_ARG_INDEX) SD_NARGS };
#undef SD_ARG_INDEX
#define SD_C_ARG_INDEX(nm, kind) SD_C_##nm,
enum { DSV4_ARGS_DECODE_COMBINE(SD_C_ARG_INDEX) SD_C_NARGS };
#undef SD_C_ARG_INDEX

/* K rows a matrix form's tile holds (its lists are walked tile by tile). */
enum { SD_TILE = DSV4_DECODE_TILE };

/* One index list's arguments: the main list or the extra one. */
typedef struct {
  int cache, indices, lens, topk, num_blocks, block_size, block_stride, indices_sb, indices_ss, lens_sb, lens_ss;
} sd_list;
extern const sd_list sd_main, sd_extra;

/* Element offset (i64) of token t's row of a token-major argument: batch
 * entry t / seq_q times the argument sb, plus position t % seq_q times ss
 * (argument indices of the kernel being built: seq is SD_seq_q or
 * SD_C_seq_q).  dsv4_abi.h says how the arguments are addressed. */
LLVMValueRef sd_token_row(dsv4_kb *kb, LLVMValueRef t, int seq, int sb, int ss);

/* Byte offset (i64) of element (token t, head h) of q, out or lse (elem:
 * its bytes; sb, ss, sh its stride arguments; seq as above). */
LLVMValueRef sd_head_at(dsv4_kb *kb, LLVMValueRef t, LLVMValueRef h, int seq, int sb, int ss, int sh, int elem);

/* f32 constant v. */
static inline LLVMValueRef sd_f32(dsv4_kb *kb, double v) { return LLVMConstReal(kb->f32, v); }

/* max(a, c) as a compare and select (a kept when c is NaN). */
LLVMValueRef sd_fmax2(dsv4_kb *kb, LLVMValueRef a, LLVMValueRef c);

/* Whether kernel k's layout has a per-tensor scaled segment: its
 * tensor_scale then folds into the softmax scale and the output. */
int sd_tensor_scaled(const dsv4_kernel *k);

/* scale2: the softmax scale in base 2 (f32), tensor_scale folded in when
 * sd_tensor_scaled(k). */
LLVMValueRef sd_scale2(dsv4_kb *kb, const dsv4_kernel *k);

/* The last step of docs/ops.md section 3 for a row whose base-2 running max is
 * m2 and whose sum is l: *lse (natural log; +inf when no index was valid)
 * and *factor, what the accumulator is scaled by: 1/l, the sink only in
 * the denominator (sink: f32, -inf for none), times ts (the folded tensor
 * scale, or NULL); 0 when no index was valid. */
void sd_finish_row(dsv4_kb *kb, LLVMValueRef m2, LLVMValueRef l, LLVMValueRef sink, LLVMValueRef ts,
                   LLVMValueRef *lse, LLVMValueRef *factor);

/* v of the lanes sharing this quad (lane ^ 1, ^ 2) folded with max or add. */
LLVMValueRef sd_quad_fold(dsv4_kb *kb, LLVMValueRef v, int add);

/* The warp forms' row exchange through shared memory.  A 16-head row
 * block's `parts` warps each hold the lane's two rows (rowoff[h]: their
 * byte offsets in a part's slot of heads x 4 bytes) over their own part of
 * a tile's columns.  sd_publish_max: the rows' maxima mx[h] over the lane's
 * quad (folded in place) into red at part (the quad's lane c = 0 stores).
 * sd_online_step, after a barrier: each row's new max over m[h] and every
 * part's, S's n-tiles' values (s_tiles of them, rows h at S[j][2h + e])
 * made P = exp2(S - max) in place, nm, nl (l rescaled plus this tile's sum
 * over the lane's columns) and corr[h], what the accumulators are scaled
 * by.  sd_sum_parts: each l[h] over the quad and then over the parts (a
 * barrier between; a fixed order, so every warp gets the same sum). */
void sd_publish_max(dsv4_kb *kb, LLVMValueRef red, LLVMValueRef part, LLVMValueRef c, int heads, LLVMValueRef mx[2],
                    const LLVMValueRef rowoff[2]);
void sd_online_step(dsv4_kb *kb, LLVMValueRef red, int parts, int heads, const LLVMValueRef rowoff[2],
                    LLVMValueRef (*S)[4], int s_tiles, const LLVMValueRef m[2], const LLVMValueRef l[2],
                    LLVMValueRef nm[2], LLVMValueRef nl[2], LLVMValueRef corr[2]);
void sd_sum_parts(dsv4_kb *kb, LLVMValueRef sums, LLVMValueRef part, LLVMValueRef c, int parts, int heads,
                  const LLVMValueRef rowoff[2], LLVMValueRef l[2]);

/* A warp form's lane state over its tile loop: its two rows' max and sum
 * and its o_tiles accumulator fragments (row g at acc[j][0..1], g + 8 at
 * [2..3]), carried as 4 + 4 o_tiles loop values (sd_rows_pack, _unpack). */
#define SD_ROWS_TILES_MAX 64
typedef struct {
  LLVMValueRef m[2], l[2], acc[SD_ROWS_TILES_MAX][4];
} sd_rows;
void sd_rows_pack(const sd_rows *st, int o_tiles, LLVMValueRef *v);
void sd_rows_unpack(sd_rows *st, int o_tiles, const LLVMValueRef *v);
/* The lane's two rows' ends: head h0 + 16 rblk + g + 8 h gets sd_head_out
 * of st's max and accumulators and of l[h] (the rows' sums over the parts,
 * sd_sum_parts), its dims from part vpart + 2c on, the row written once
 * (by lane c 0 of part 0). */
void sd_rows_out(dsv4_kb *kb, const dsv4_kernel *k, LLVMValueRef token, LLVMValueRef h0, LLVMValueRef rblk,
                 LLVMValueRef g, LLVMValueRef c, LLVMValueRef part, int vpart, const sd_rows *st,
                 const LLVMValueRef l[2], int o_tiles);
/* Whether the target has the warp forms' hooks: mma.sync bf16, ldmatrix,
 * cp.async, lane shuffles, 32-lane warps. */
int sd_warp_mma_ok(dsv4_kb *kb);

/* v[0..n) (n <= 64) folded pairwise with max (maxnum) or add. */
LLVMValueRef sd_fold_tree(dsv4_kb *kb, const LLVMValueRef *v, int n, int add);

/* Token t's two lists: valid-prefix lengths n[], tiles ntiles[] (the main
 * list's, then the extra list's), and this CTA's share [lo, hi) of them
 * (split z = ctaid.z of `splits`). */
void sd_token_tiles(dsv4_kb *kb, LLVMValueRef t, LLVMValueRef *n, LLVMValueRef *ntiles, LLVMValueRef *lo,
                    LLVMValueRef *hi);

/* The token of this CTA's row of the grid (ctaid.y), longest first.  The
 * hardware starts a grid's CTAs in their order, and where they come in
 * more than one wave (more CTAs than the device has processors) a token
 * with many tiles started last ends the kernel late: V4-Pro with C128
 * lists of lengths drawn between 0 and the width simulates at 82-89 us
 * in the order given and 60-62 us longest first (docs/perf-log.md).  So
 * where the grid has more CTAs than processors and 1 < T <= threads, the
 * CTA ranks the tokens by their tile count (both lists; keys clamped to
 * SD_RANK_KEYS - 1), greatest first and in token order among equals, and
 * takes the token of rank ctaid.y: the same permutation in every CTA (a
 * stable counting sort, integers only), so every token is done once;
 * where every token has the same key (one barrier tells) the order stays.
 * Elsewhere, or on a target without the hooks it needs (match_any,
 * grid_ctas, units, vote_any, warp_sync, shfl_idx), ctaid.y itself.
 * Every thread of the CTA must reach it (up to three CTA barriers), and
 * scratch holds sd_rank_bytes(threads) bytes of shared memory that nothing
 * else uses until it returns. */
enum { SD_RANK_KEYS = 64 };
static inline long long sd_rank_bytes(int threads) { return (long long)threads / 32 * (SD_RANK_KEYS + 1) * 4 + 4; }
LLVMValueRef sd_longest_first(dsv4_kb *kb, LLVMValueRef scratch, LLVMValueRef tid, int threads);

/* i32 v of lane `lane` (the target's f32 shfl_idx, bit for bit). */
LLVMValueRef sd_shfl_i32(dsv4_kb *kb, LLVMValueRef v, LLVMValueRef lane);

/* Tile i's list (the main one's tiles, then the extra one's): its local
 * tile index, valid-prefix length and arguments. */
typedef struct {
  LLVMValueRef lt, n, topk, bs, nb, stride, cache, ind, irow; /* bs, nb, irow: i64 */
} sd_tile_list;
/* irow: the element offset of token t's row in the list's indices. */
sd_tile_list sd_pick_list(dsv4_kb *kb, LLVMValueRef t, LLVMValueRef i, const LLVMValueRef *n,
                          const LLVMValueRef *ntiles);

/* i1: index idx (i64) names a row of a cache of nb blocks of bs rows. */
LLVMValueRef sd_row_valid(dsv4_kb *kb, LLVMValueRef idx, LLVMValueRef nb, LLVMValueRef bs);

/* The parts of P a matrix form stores and multiplies V by (tile.p): 1
 * for DSV4_P_BF16 (P rounded once to bf16, as FlashMLA), 2 for
 * DSV4_P_BF16X2 (hi = bf16(p) and lo = bf16(p - hi): P V = hi V + lo V,
 * twice the P V matrix work).  The row sums take the fp32 p either way. */
static inline int sd_p_parts(const dsv4_kernel *k) { return k->tile.p_format == DSV4_P_BF16X2 ? 2 : 1; }
/* tile.partials: each split's unnormalised O goes to the work space as
 * bf16 (2 bytes a value) or fp32 (sd_head_out, combine.c). */
static inline int sd_bf16_partials(const dsv4_kernel *k) { return k->tile.partials == DSV4_PARTIALS_BF16; }
static inline int sd_partial_bytes(const dsv4_kernel *k) { return sd_bf16_partials(k) ? 2 : 4; }
/* The bf16 partials' packing (sd_head_out, combine.c): a quad lane's dims
 * base + 2c + 8j + (0, 1, 8, 9), j even, lie at positions base + 4c + 8j
 * + 0..3.  sd_partial_pos: the position of the lane's first dim (i64);
 * sd_partial_dim: the first dim at a position of four (i64). */
LLVMValueRef sd_partial_pos(dsv4_kb *kb, LLVMValueRef dim);
LLVMValueRef sd_partial_dim(dsv4_kb *kb, LLVMValueRef pos);

/* Two f32 weights a and c of P as the words a matrix operand takes (bf16
 * pairs packed in an i32, a's in bits 0..15): *hi, and for bf16x2 *lo
 * (kb_f32x2_to_bf16_split); with bf16, *lo is NULL. */
void sd_p_words(dsv4_kb *kb, const dsv4_kernel *k, LLVMValueRef a, LLVMValueRef c, LLVMValueRef *hi, LLVMValueRef *lo);

/* i64 offset, in its block, of row `row`'s scale row (block-tail scales). */
LLVMValueRef sd_tail_scale_offset(dsv4_kb *kb, const dsv4_layout *L, LLVMValueRef bs, LLVMValueRef row);

/* The end of a (token t, head) row in a matrix form: the split-KV partial
 * or the finished output and lse (rows.c says which, and where). */
void sd_head_out(dsv4_kb *kb, const dsv4_kernel *k, LLVMValueRef t, LLVMValueRef head, LLVMValueRef m,
                 LLVMValueRef l, LLVMValueRef (*acc)[2], int nb, LLVMValueRef dim0, LLVMValueRef first,
                 LLVMValueRef stage, LLVMValueRef sink);

/* The next `bytes` of dynamic shared memory sm, from offset *o (advanced). */
LLVMValueRef sd_carve(dsv4_kb *kb, LLVMValueRef sm, long long *o, long long bytes);

/* 0 if o bytes of shared memory carved for `form` match form_rules.h's rule;
 * else an internal error in d. */
int sd_shared_agrees(const dsv4_kernel *k, long long o, int form, dsv4_diags *d);

/* The forms: each builds kernel k's body into kb from its entry block;
 * 0 on success, else diagnostics in d (a target that cannot build it). */
int sd_portable(dsv4_kb *kb, const dsv4_kernel *k);
int sd_warp(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d);
int sd_direct(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d);
int sd_warpgroup(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d);
/* <name>_combine, the module's second kernel (it starts it). */
void sd_combine(dsv4_kb *kb, const dsv4_kernel *k);

#endif
