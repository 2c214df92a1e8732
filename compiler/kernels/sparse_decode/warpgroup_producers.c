/* warpgroup_producers.c -- the producer warps of the sparse decode's
 * warpgroup form (warpgroup.h says how the roles fit together).
 *
 * Per tile, each producer thread loads the indices of its rows, waits for
 * the K buffer to be free, dequantizes its lane of the rows from the cache
 * into the buffer (the gathers' code, dequant.c), optionally prefetches the
 * next tile's rows into the L2, and hands the buffer to the consumers
 * (FULL); in CTA pairs one thread also copies this CTA's half of the tile
 * into the other CTA.  After the last tile the producers copy the
 * consumers' staged output rows out in whole 16-byte chunks.
 */
#include "warpgroup.h"

/* Tile i's list and the producer thread's coordinates. */
typedef struct {
  sd_tile_list l;
  LLVMValueRef lane, local; /* i32: lane in a row, row in a pass */
  int per, passes;          /* rows a pass, passes a tile */
} wgtile;

static wgtile wg_tile(dsv4_kb *kb, const wg_ctx *x, LLVMValueRef i, LLVMValueRef h)
{
  LLVMBuilderRef b = kb->b;
  wgtile r;
  int lanes = x->dim / x->k->tile.values_per_thread, parts = h ? 2 : 1; /* h: as in wg_produce */
  r.per = x->producers / lanes, r.passes = SD_TILE / parts / r.per;
  LLVMValueRef ptid = LLVMBuildSub(b, x->tid, kb_i32(kb, 256), "ptid");
  r.lane = LLVMBuildURem(b, ptid, kb_i32(kb, lanes), ""), r.local = LLVMBuildUDiv(b, ptid, kb_i32(kb, lanes), "");
  if (h)
    r.local = LLVMBuildAdd(b, r.local, LLVMBuildMul(b, h, kb_i32(kb, SD_TILE / parts), ""), "");
  r.l = sd_pick_list(kb, x->token, i, x->n, x->ntiles);
  return r;
}

/* The producer thread's row j of pass u. */
static LLVMValueRef wg_row(dsv4_kb *kb, const wgtile *r, int u)
{
  return LLVMBuildAdd(kb->b, kb_i32(kb, u * r->per), r->local, "j");
}

/* Tile i's indices of this producer thread's rows (-1 past the list), all
 * loads in flight together (measured 9% faster than each group loading its
 * own; loading them a tile ahead, carried by the loop, 10% slower). */
static void wg_indices(dsv4_kb *kb, const wg_ctx *x, const wgtile *r, LLVMValueRef *idx)
{
  LLVMBuilderRef b = kb->b;
  const sd_tile_list *l = &r->l;
  LLVMValueRef ibase = l->irow;
  for (int u = 0; u < r->passes; u++) {
    LLVMValueRef p = LLVMBuildAdd(b, LLVMBuildMul(b, l->lt, kb_i32(kb, SD_TILE), ""), wg_row(kb, r, u), "pos");
    LLVMValueRef want = LLVMBuildICmp(b, LLVMIntSLT, p, l->n, "");
    LLVMValueRef ioff = LLVMBuildMul(b, LLVMBuildAdd(b, ibase, kb_zext64(kb, p), ""), kb_i64(kb, 4), "");
    idx[u] = kb_load_if(kb, want, kb->i32, l->ind, ioff, 4, kb_i32(kb, -1));
  }
}

/* What the producer does between its tile's loads and its first store
 * into the K buffer: wait until the buffer is free (its EMPTY hand-off, from
 * the third tile on), then write the validity words of the tile's rows
 * tok[0 .. n). */
typedef struct {
  const wg_ctx *x;
  LLVMValueRef i, h, buf, lane;
  const dsv4_lane_token *tok;
  int n;
} wg_free_wait;

static void wg_await_free(dsv4_kb *kb, void *arg)
{
  wg_free_wait *w = arg;
  LLVMBuilderRef b = kb->b;
  const wg_ctx *x = w->x;
  kb_if_t fw = kb_if(kb, LLVMBuildICmp(b, LLVMIntSGE, w->i, LLVMBuildAdd(b, x->lo, kb_i32(kb, 2), ""), ""), "wait");
  if (w->h)
    kb->t->mbar_wait(kb, sd_wg_mbar(kb, x, WG_MB_EMPTY, w->buf), sd_wg_parity(kb, x, w->i, 1));
  else
    sd_wg_bar(kb, 0, WG_BAR_EMPTY, w->buf, x->threads);
  kb_endif(kb, &fw);
  kb_if_t f = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, w->lane, kb_i32(kb, 0), ""), "vm");
  for (int u = 0; u < w->n; u++) {
    LLVMValueRef j = LLVMBuildTrunc(b, w->tok[u].out_index, kb->i32, ""); /* (the row, as wg_produce set it) */
    LLVMValueRef vo =
        LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, w->buf, kb_i32(kb, SD_TILE), ""), j, ""), kb_i32(kb, 4), "");
    kb_store(kb, LLVMBuildZExt(b, w->tok[u].valid, kb->i32, ""), kb_byte_ptr(kb, x->valid, kb_zext64(kb, vo)), 4);
  }
  kb_endif(kb, &f);
}

/* Tile i + 1's rows (this producer thread's lane of them) into the L2, so
 * that their loads in the next turn of the loop are L2 hits: a row's data
 * lines spread over its first lanes, one each (a row of more lines than
 * lanes leaves its last ones out: a hint, never a fault), the last lane
 * its scale row's line when the scales sit at the block's tail and that
 * lane is free.  idx: tile i + 1's indices, as wg_indices loads them. */
static void wg_prefetch(dsv4_kb *kb, const wg_ctx *x, const wgtile *r, const LLVMValueRef *idx)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_layout *L = &x->k->layout;
  const sd_tile_list *l = &r->l;
  int lines = (L->row_bytes + 127) / 128 + 1; /* a row not aligned to 128 bytes spans one line more */
  int lanes = x->dim / x->k->tile.values_per_thread, tail = L->scale_place == DSV4_SCALES_BLOCK_TAIL;
  LLVMValueRef dl = LLVMBuildICmp(b, LLVMIntULT, r->lane, kb_i32(kb, lines), "");
  LLVMValueRef sl = LLVMBuildICmp(b, LLVMIntEQ, r->lane, kb_i32(kb, lanes - 1), "");
  LLVMValueRef at = LLVMBuildMul(b, kb_zext64(kb, r->lane), kb_i64(kb, 128), "");
  at = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntUGT, at, kb_i64(kb, L->row_bytes - 1), ""),
                       kb_i64(kb, L->row_bytes - 1), at, "");
  for (int u = 0; u < r->passes; u++) {
    LLVMValueRef id = kb_sext64(kb, idx[u]);
    LLVMValueRef want = LLVMBuildAnd(b, sd_row_valid(kb, id, l->nb, l->bs),
                                     tail && lanes - 1 >= lines ? LLVMBuildOr(b, dl, sl, "") : dl, "");
    kb_if_t f = kb_if(kb, want, "prefetch");
    LLVMValueRef blk, row;
    kb_udivrem_fast(kb, id, l->bs, &blk, &row);
    LLVMValueRef base = kb_byte_ptr(kb, l->cache, LLVMBuildMul(b, blk, l->stride, ""));
    LLVMValueRef off = LLVMBuildAdd(b, LLVMBuildMul(b, row, kb_i64(kb, L->row_bytes), ""), at, "");
    if (tail && lanes - 1 >= lines)
      off = LLVMBuildSelect(b, sl, sd_tail_scale_offset(kb, L, l->bs, row), off, "");
    kb->t->prefetch_l2(kb, kb_byte_ptr(kb, base, off));
    kb_endif(kb, &f);
  }
}

/* The producer thread's rows of a tile (indices idx) as tokens for the
 * dequantization, each stored at its row of K buffer kbuf. */
static void tile_tokens(dsv4_kb *kb, const wgtile *r, const LLVMValueRef *idx, LLVMValueRef kbuf, dsv4_lane_token *tok)
{
  LLVMBuilderRef b = kb->b;
  const sd_tile_list *l = &r->l;
  LLVMValueRef slot[SD_TILE];
  for (int u = 0; u < r->passes; u++) { /* (validity first, then the divisions: 40% fewer spills) */
    LLVMValueRef id = kb_sext64(kb, idx[u]);
    tok[u].valid = sd_row_valid(kb, id, l->nb, l->bs);
    slot[u] = LLVMBuildSelect(b, tok[u].valid, id, kb_i64(kb, 0), "");
  }
  for (int u = 0; u < r->passes; u++) {
    LLVMValueRef j = wg_row(kb, r, u), blk, row;
    kb_udivrem_fast(kb, slot[u], l->bs, &blk, &row);
    tok[u].blk = kb_byte_ptr(kb, l->cache, LLVMBuildMul(b, blk, l->stride, ""));
    tok[u].row = row;
    tok[u].write = LLVMConstInt(kb->i1, 1, 0); /* every row: invalid ones as zeros */
    tok[u].out_row = kbuf;
    tok[u].out_sw = 128, tok[u].out_rows = SD_TILE;
    tok[u].out_index = kb_zext64(kb, j);
  }
}

/* Producer: tile i's rows into K buffer (i & 1), zeros for rows past the
 * list or with bad indices (valid says which).  h NULL: all of
 * them; else half h (i32 0/1: rows 32h .. 32h + 31), which wg_producer
 * then copies into the other CTA of the pair.  The tile's index and row
 * loads go out before the wait for the buffer (wg_await_free). */
static void wg_produce(dsv4_kb *kb, const wg_ctx *x, LLVMValueRef i, LLVMValueRef h)
{
  LLVMBuilderRef b = kb->b;
  wgtile r = wg_tile(kb, x, i, h);
  const sd_tile_list *l = &r.l;
  LLVMValueRef idx[SD_TILE];
  wg_indices(kb, x, &r, idx);
  /* tile.prefetch: tile i + 1's indices now (loaded again next turn: carried
   * by the loop instead, they held it up and measured 7% slower), its rows
   * into the L2 once this tile is stored; the last tile's own again */
  int pf = x->k->tile.prefetch && kb->t->prefetch_l2;
  wgtile r1 = r;
  LLVMValueRef idx1[SD_TILE];
  if (pf) {
    LLVMValueRef i1 = LLVMBuildAdd(b, i, kb_i32(kb, 1), "");
    i1 = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, i1, x->hi, ""), i1, i, "");
    r1 = wg_tile(kb, x, i1, h);
    wg_indices(kb, x, &r1, idx1);
  }
  LLVMValueRef buf = LLVMBuildAnd(b, i, kb_i32(kb, 1), "");
  LLVMValueRef kbuf = wg_buf(kb, x->k_tiles, buf, wg_kbytes(x));
  enum { GROUP = 4 }; /* tokens a thread loads before converting (2 measured 2-4% slower, 1 slower still) */
  dsv4_lane_token tok[SD_TILE] = {{0}};
  tile_tokens(kb, &r, idx, kbuf, tok);
  /* in pairs the wait goes between the first group's loads and its stores;
   * alone before them (four rows' loads a thread held across the wait spilled,
   * and the buffer is mostly free by then; not measured again at two rows) */
  wg_free_wait w = {.x = x, .i = i, .h = h, .buf = buf, .lane = r.lane, .tok = tok, .n = r.passes};
  if (!h)
    wg_await_free(kb, &w);
  dsv4_kernel kd = *x->k;
  kd.tile.streaming = 0; /* two head groups read the same rows: keep them in the caches */
  for (int u0 = 0; u0 < r.passes; u0 += GROUP)
    dsv4_emit_dequant_tokens_split(kb, &kd, r.lane, l->bs, sd_f32(kb, 1.0), &tok[u0],
                                   r.passes - u0 < GROUP ? r.passes - u0 : GROUP, h && u0 == 0 ? wg_await_free : NULL,
                                   &w, 1);
  if (pf)
    wg_prefetch(kb, x, &r1, idx1);
}

/* The producers' loop: tile after tile into the K buffers (h: as in
 * wg_produce), each once both CTAs' consumers have released it. */
static void wg_producer(dsv4_kb *kb, const wg_ctx *x, LLVMValueRef h)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_target_ir *T = kb->t;
  kb_loop_t loop;
  kb_for(kb, &loop, x->lo, x->hi, 0, NULL);
  LLVMValueRef i = loop.iv, buf = LLVMBuildAnd(b, i, kb_i32(kb, 1), "");
  wg_produce(kb, x, i, h); /* (it waits for the buffer's EMPTY itself: in pairs after the tile's loads) */
  if (!h) { /* alone: named barriers (barrier objects here measured 205.9 against 187 us at V4-Pro) */
    T->fence_proxy_async(kb);
    sd_wg_bar(kb, 1, WG_BAR_FULL, buf, 128 + x->producers);
    kb_for_end(kb, &loop, NULL);
    return;
  }
  /* the producers meet; then one thread copies this CTA's half of the tile
   * (its 4 KB of each 128-byte column block, and its rows' validity words)
   * into the other CTA, completing there on FULL, and arrives here, where
   * FULL also waits for the other CTA's copies: asynchronous copies need
   * no cluster-scope fence, which the generic remote stores before them
   * paid for on every tile (measured: about a fifth of the producers' time) */
  T->fence_proxy_async(kb);
  T->bar_sync(kb, WG_BAR_PROD, x->producers);
  kb_if_t f = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, x->tid, kb_i32(kb, 256), ""), "full");
  {
    LLVMValueRef mb = sd_wg_mbar(kb, x, WG_MB_FULL, buf);
    LLVMValueRef kbuf = wg_buf(kb, x->k_tiles, buf, wg_kbytes(x));
    LLVMValueRef half = wg_buf(kb, kbuf, h, SD_TILE / 2 * 128); /* rows 32h .. 32h + 31 of column block 0 */
    for (int cb = 0; cb < x->dim / 64; cb++) {
      LLVMValueRef p = kb_byte_ptr(kb, half, kb_i64(kb, (long long)cb * SD_TILE * 128));
      T->copy_to_peer(kb, p, p, SD_TILE / 2 * 128, mb, x->peer);
    }
    LLVMValueRef vp = wg_buf(kb, wg_buf(kb, x->valid, buf, SD_TILE * 4), h, SD_TILE / 2 * 4);
    T->copy_to_peer(kb, vp, vp, SD_TILE / 2 * 4, mb, x->peer);
    T->mbar_expect(kb, mb, kb_i32(kb, x->dim / 64 * (SD_TILE / 2 * 128) + SD_TILE / 2 * 4));
  }
  kb_endif(kb, &f);
  kb_for_end(kb, &loop, NULL);
}

/* wg_out's copy of the staged rows, by the producer warps, idle by then
 * (in the consumers' branches the copy loop made the register allocator
 * spill), once the consumers have staged them (OUT). */
static void wg_copy_out(dsv4_kb *kb, const wg_ctx *x)
{
  LLVMBuilderRef b = kb->b;
  int DV = x->k->v_dim, np = x->producers;
  LLVMValueRef h0 = LLVMBuildMul(b, kb->t->block_id(kb, 0), kb_i32(kb, x->heads), "h0");
  LLVMValueRef ptid = LLVMBuildSub(b, x->tid, kb_i32(kb, 256), "ptid");
  kb->t->bar_sync(kb, WG_BAR_OUT, x->threads);
  /* rows of DV / 8 16-byte chunks, none with split-KV (partials went straight out) */
  LLVMValueRef S = kb_arg(kb, SD_splits), H = kb_arg(kb, SD_heads);
  LLVMValueRef split = LLVMBuildICmp(b, LLVMIntSGT, S, kb_i32(kb, 1), "split");
  LLVMValueRef orow0 = sd_head_at(kb, x->token, h0, SD_seq_q, SD_out_sb, SD_out_ss, SD_out_sh, 2);
  LLVMValueRef osh = LLVMBuildMul(b, kb_arg(kb, SD_out_sh), kb_i64(kb, 2), "");
  LLVMTypeRef v4 = LLVMVectorType(kb->i32, 4);
  kb_loop_t cl;
  kb_for(kb, &cl, kb_i32(kb, 0), LLVMBuildSelect(b, split, kb_i32(kb, 0), kb_i32(kb, x->heads * (DV / 8) / np), ""), 0,
         NULL);
  {
    LLVMValueRef ch = LLVMBuildAdd(b, LLVMBuildMul(b, cl.iv, kb_i32(kb, np), ""), ptid, "chunk");
    LLVMValueRef row = LLVMBuildUDiv(b, ch, kb_i32(kb, DV / 8), "row");
    LLVMValueRef cc = kb_zext64(kb, LLVMBuildURem(b, ch, kb_i32(kb, DV / 8), ""));
    kb_if_t g = kb_if(kb, LLVMBuildICmp(b, LLVMIntSLT, LLVMBuildAdd(b, h0, row, ""), H, ""), "row");
    LLVMValueRef v =
        kb_load(kb, v4,
                kb_byte_ptr(kb, x->q_tile,
                            LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, row), kb_i64(kb, wg_stage_row(x)), ""),
                                         LLVMBuildMul(b, cc, kb_i64(kb, 16), ""), "")),
                16);
    LLVMValueRef oo = LLVMBuildAdd(b, LLVMBuildAdd(b, orow0, LLVMBuildMul(b, kb_zext64(kb, row), osh, ""), ""),
                                   LLVMBuildMul(b, cc, kb_i64(kb, 16), ""), "");
    kb_store(kb, v, kb_byte_ptr(kb, kb_arg(kb, SD_out), oo), 16);
    kb_endif(kb, &g);
  }
  kb_for_end(kb, &cl, NULL);
}

void sd_wg_producers(dsv4_kb *kb, const wg_ctx *x)
{
  kb->t->set_max_regs(kb, x->prod_regs, x->prod_regs > x->reg_cap);
  wg_producer(kb, x, x->pair ? x->rank : NULL); /* pairs: this CTA's half of the rows */
  wg_copy_out(kb, x);
}
