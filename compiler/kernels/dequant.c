/* dequant.c -- layout-driven dequantization of one thread's lane of one or
 * more tokens.
 *
 * The layout (dsv4_layout.h) is data: for each segment the generator emits
 * one guarded block in which, for every token the thread owns, it first
 * issues all loads (the widest the layout's alignment allows, plus the
 * lane's scale), and only then converts with the bit-exact rule of docs/ops.md
 * section 1 (fp32 product, one rounding to bf16) and stores.  Loads of an
 * invalid token are skipped and read as zero bytes, which dequantize to
 * +0.0: the zero row of docs/ops.md 2a needs no separate path.  A new layout
 * changes the constants below, never this code.
 */
#include "gen.h"

#define MAX_TOK 8
#define MAX_CHUNKS 16

dsv4_token_lane dsv4_emit_token_lane(dsv4_kb *kb, const dsv4_kernel *k)
{
  LLVMBuilderRef b = kb->b;
  int lanes = k->layout.dim / k->tile.values_per_thread;
  LLVMValueRef tid = kb->t->thread_id(kb);
  dsv4_token_lane r;
  r.local = LLVMBuildUDiv(b, tid, kb_i32(kb, lanes), "tok_local");
  r.lane = LLVMBuildURem(b, tid, kb_i32(kb, lanes), "lane");
  r.base = LLVMBuildMul(b, kb->t->block_id(kb, 0), kb_i32(kb, k->tile.tokens_per_cta), "tok_base");
  return r;
}

LLVMValueRef dsv4_emit_token(dsv4_kb *kb, const dsv4_kernel *k, const dsv4_token_lane *tl, int u)
{
  int slots = k->tile.tokens_per_cta / k->tile.tokens_per_thread;
  LLVMValueRef t = LLVMBuildAdd(kb->b, tl->base, kb_i32(kb, (long long)u * slots), "");
  return LLVMBuildAdd(kb->b, t, tl->local, "tok");
}

/* Store n bf16 values (i16) at byte o (i64) of token t's output row in
 * chunks as wide as align allows (at most 16 bytes: one swizzled piece). */
static void store_bf16(dsv4_kb *kb, const dsv4_kernel *k, LLVMValueRef *vals, int n, const dsv4_lane_token *t,
                       LLVMValueRef o, int align)
{
  int per = align / 2 > 0 ? align / 2 : 1;
  if (per > 8)
    per = 8;
  if (per > n)
    per = n;
  for (int c = 0; c < n; c += per) {
    LLVMValueRef oc = LLVMBuildAdd(kb->b, o, kb_i64(kb, (long long)c * 2), "");
    LLVMValueRef off = t->out_sw ? kb_mma_offset(kb, t->out_sw, t->out_rows, t->out_index, oc) : oc;
    LLVMValueRef dst = kb_byte_ptr(kb, t->out_row, off);
    if (per == 1) {
      kb_store(kb, vals[c], dst, (unsigned)align);
      continue;
    }
    LLVMValueRef v = LLVMGetUndef(LLVMVectorType(kb->i16, (unsigned)per));
    for (int j = 0; j < per; j++)
      v = LLVMBuildInsertElement(kb->b, v, vals[c + j], kb_i32(kb, j), "");
    unsigned a = (unsigned)(align < 16 ? align : 16);
    if (k->tile.streaming)
      kb_store_stream(kb, v, dst, a);
    else
      kb_store(kb, v, dst, a);
  }
}

/* One piece of work of a lane: W = vpt / interleave consecutive values of
 * one segment, starting at value p * span + lane * W (span = dim /
 * interleave), for the lanes in [lo, hi).  Interleaving makes each of a
 * warp's store instructions cover whole contiguous sectors. */
typedef struct {
  const dsv4_segment *s;
  int p, lo, hi;
  int w;            /* values in the piece */
  long long first;  /* value index in the segment of lane 0's piece: p*span - d0 */
  int sz, per, nchunks, align, out_align;
  LLVMTypeRef et, ct; /* element and chunk (load) types */
} piece;

/* The pieces of the layout under this tile, with their load shapes. */
static int make_pieces(dsv4_kb *kb, const dsv4_kernel *k, piece *out)
{
  const dsv4_layout *l = &k->layout;
  int parts = k->tile.interleave, w = k->tile.values_per_thread / parts, span = l->dim / parts, lanes = span / w;
  int n = 0;
  for (int p = 0; p < parts; p++)
    for (int i = 0; i < l->nseg; i++) {
      const dsv4_segment *s = &l->seg[i];
      int lo = (s->d0 - p * span) / w, hi = (s->d1 - p * span) / w;
      lo = lo < 0 ? 0 : lo;
      hi = hi > lanes ? lanes : hi;
      if (lo >= hi)
        continue;
      piece *c = &out[n++];
      c->s = s, c->p = p, c->lo = lo, c->hi = hi, c->w = w;
      c->first = (long long)p * span - s->d0;
      c->sz = dsv4_dtype_size(s->type);
      int off0 = (int)(s->offset + c->first * c->sz); /* byte offset of lane 0's piece (may be negative) */
      c->align = dsv4_gcd(dsv4_gcd(l->align, l->row_bytes), dsv4_gcd(off0 < 0 ? -off0
                                                                     : off0   ? off0
                                                                              : l->align,
                                                                     w * c->sz));
      int bytes = c->align < 16 ? c->align : 16;
      if (bytes < c->sz)
        bytes = c->sz;
      c->per = bytes / c->sz > w ? w : bytes / c->sz;
      c->nchunks = w / c->per;
      c->et = c->sz == 1 ? kb->i8 : c->sz == 2 ? kb->i16 : kb->i32;
      c->ct = c->per == 1 ? c->et : LLVMVectorType(c->et, (unsigned)c->per);
      c->out_align = dsv4_gcd(dsv4_gcd(16, l->dim * 2), w * 2);
      if (p * span != 0)
        c->out_align = dsv4_gcd(c->out_align, p * span * 2);
    }
  return n;
}

/* i64 index, within its segment, of this lane's first value of piece c. */
static LLVMValueRef piece_vi(dsv4_kb *kb, const piece *c, LLVMValueRef lane)
{
  LLVMValueRef v = LLVMBuildMul(kb->b, kb_zext64(kb, lane), kb_i64(kb, c->w), "");
  return LLVMBuildAdd(kb->b, v, kb_i64(kb, c->first), "vi");
}

/* Where one token's bytes are: its data row (blk + row * row_bytes) and,
 * with group scales, its scale row; byte pointers, computed once a token
 * and outside the loads' guards (any value when the token is not valid:
 * nothing reads them then). */
typedef struct {
  LLVMValueRef data, scales;
} token_rows;

static token_rows rows_of(dsv4_kb *kb, const dsv4_kernel *k, const dsv4_lane_token *t, LLVMValueRef bs)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_layout *l = &k->layout;
  token_rows r;
  r.data = kb_byte_ptr(kb, t->blk, LLVMBuildMul(b, t->row, kb_i64(kb, l->row_bytes), ""));
  int tail = l->scale_place == DSV4_SCALES_BLOCK_TAIL;
  LLVMValueRef so = LLVMBuildMul(b, t->row, kb_i64(kb, tail ? l->scale_row_bytes : l->row_bytes), "");
  if (tail)
    so = LLVMBuildAdd(b, so, LLVMBuildMul(b, bs, kb_i64(kb, l->row_bytes), ""), "");
  r.scales = kb_byte_ptr(kb, t->blk, so);
  return r;
}

/* Issue the loads of one token's piece (rows: rows_of the token): chunks
 * into raw[], scale into *sraw. */
static void issue_loads(dsv4_kb *kb, const dsv4_kernel *k, const piece *c, LLVMValueRef vi, const token_rows *rows,
                        LLVMValueRef *raw, LLVMValueRef *sraw)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_layout *l = &k->layout;
  const dsv4_segment *s = c->s;
  /* data: the row + offset + vi*size */
  LLVMValueRef off = LLVMBuildAdd(b, kb_i64(kb, s->offset), LLVMBuildMul(b, vi, kb_i64(kb, c->sz), ""), "");
  LLVMValueRef p = kb_byte_ptr(kb, rows->data, off);
  for (int j = 0; j < c->nchunks; j++) {
    LLVMValueRef src = kb_byte_ptr(kb, p, kb_i64(kb, (long long)j * c->per * c->sz));
    int a = c->align < c->per * c->sz ? c->align : c->per * c->sz;
    a = a > 16 ? 16 : a;
    int bytes = c->per * c->sz;
    if (bytes >= 4 && bytes % 4 == 0) { /* as 32-bit words: one vector load */
      LLVMTypeRef wt = bytes == 4 ? kb->i32 : LLVMVectorType(kb->i32, (unsigned)(bytes / 4));
      LLVMValueRef v = k->tile.streaming ? kb_load_stream(kb, wt, src, (unsigned)a) : kb_load(kb, wt, src, (unsigned)a);
      raw[j] = LLVMBuildBitCast(b, v, c->ct, "");
    } else
      raw[j] = k->tile.streaming ? kb_load_stream(kb, c->ct, src, (unsigned)a) : kb_load(kb, c->ct, src, (unsigned)a);
  }
  *sraw = NULL;
  if (s->scale_type == DSV4_DT_NONE || s->scale_tensor)
    return;
  int ssz = dsv4_dtype_size(s->scale_type);
  int sstride = l->scale_place == DSV4_SCALES_BLOCK_TAIL ? l->scale_row_bytes : l->row_bytes;
  LLVMValueRef g = LLVMBuildUDiv(b, vi, kb_i64(kb, s->scale_group), "group");
  LLVMValueRef so = LLVMBuildAdd(b, kb_i64(kb, s->scale_offset), LLVMBuildMul(b, g, kb_i64(kb, ssz), ""), "");
  int salign = dsv4_gcd(dsv4_gcd(l->align, l->row_bytes), dsv4_gcd(sstride, ssz));
  if (s->scale_offset)
    salign = dsv4_gcd(salign, s->scale_offset);
  *sraw = kb_load(kb, ssz == 1 ? kb->i8 : kb->i32, kb_byte_ptr(kb, rows->scales, so), (unsigned)salign);
}

/* Element j of the piece from its loaded chunks. */
static LLVMValueRef element(dsv4_kb *kb, const piece *c, LLVMValueRef *raw, int j)
{
  if (c->per == 1)
    return raw[j];
  return LLVMBuildExtractElement(kb->b, raw[j / c->per], kb_i32(kb, j % c->per), "");
}

/* Values j and j + 1 of an e4m3 piece as f32 (exact): from the 16-bit half
 * of the chunk they lie in, no bytes taken apart, when chunks hold whole
 * pairs; else byte by byte. */
static void e4m3_pair(dsv4_kb *kb, const piece *c, LLVMValueRef *raw, int j, LLVMValueRef *f)
{
  LLVMBuilderRef b = kb->b;
  if (c->per % 2 == 0) {
    LLVMValueRef h = LLVMBuildBitCast(b, raw[j / c->per], LLVMVectorType(kb->i16, (unsigned)(c->per / 2)), "");
    kb_e4m3x2_pair_to_f32(kb, LLVMBuildExtractElement(b, h, kb_i32(kb, j % c->per / 2), ""), f);
  } else
    kb_e4m3x2_to_f32(kb, element(kb, c, raw, j), element(kb, c, raw, j + 1), f);
}

/* A matrix operand's piece of e4m3 values with a UE8M0 scale (gen.h:
 * dsv4_emit_dequant_tokens_split's `operand`) into out[] as bf16, each pair
 * widened exactly to bf16 and multiplied by the scale's bf16 pair (one
 * rounding): 1 if done, 0 where the piece or the target does not allow it. */
static int bf16_product(dsv4_kb *kb, const piece *c, LLVMValueRef *raw, LLVMValueRef sraw, LLVMValueRef *out)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_segment *s = c->s;
  if (s->type != DSV4_DT_E4M3 || !sraw || s->scale_type != DSV4_DT_UE8M0 || c->per % 2 || c->w % 2 ||
      !kb->t->mul_bf16x2 || !kb->t->cvt_bf16x2 || !kb->t->cvt_e4m3x2)
    return 0;
  LLVMValueRef s2 = kb_ue8m0_to_bf16x2(kb, sraw), f[2];
  for (int j = 0; j < c->w; j += 2) {
    e4m3_pair(kb, c, raw, j, f);
    LLVMValueRef p = kb->t->cvt_bf16x2(kb, f[0], f[1]);
    LLVMValueRef m = p ? kb->t->mul_bf16x2(kb, p, s2) : NULL;
    if (!m)
      return 0; /* (declined by the target at the first pair: what was built is dead code) */
    out[j] = LLVMBuildTrunc(b, m, kb->i16, "");
    out[j + 1] = LLVMBuildTrunc(b, LLVMBuildLShr(b, m, kb_i32(kb, 16), ""), kb->i16, "");
  }
  return 1;
}

/* Convert one token's piece (fp32 product, one rounding) and store it. */
static void convert_store(dsv4_kb *kb, const dsv4_kernel *k, const piece *c, LLVMValueRef vi, LLVMValueRef *raw,
                          LLVMValueRef sraw, LLVMValueRef tensor_scale, const dsv4_lane_token *t, int operand)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_segment *s = c->s;
  int w = c->w;
  LLVMValueRef out[64], f[64];
  LLVMValueRef scale = NULL;
  if (s->scale_tensor)
    scale = tensor_scale;
  else if (sraw)
    scale = s->scale_type == DSV4_DT_UE8M0 ? kb_ue8m0_to_f32(kb, sraw) : LLVMBuildBitCast(b, sraw, kb->f32, "");
  if (operand && bf16_product(kb, c, raw, sraw, out))
    ; /* (a matrix operand: the scale's product in bf16) */
  else if (s->type == DSV4_DT_BF16 && !scale) {
    for (int j = 0; j < w; j++)
      out[j] = element(kb, c, raw, j); /* stored as bf16: copied bit for bit */
  } else {
    for (int j = 0; j < w; j++) {
      if (s->type == DSV4_DT_E4M3 && j % 2 == 0 && j + 1 < w) {
        e4m3_pair(kb, c, raw, j, &f[j]);
        j++;
        continue;
      }
      LLVMValueRef e = element(kb, c, raw, j);
      f[j] = s->type == DSV4_DT_E4M3   ? kb_e4m3_to_f32(kb, e)
             : s->type == DSV4_DT_BF16 ? kb_bf16_to_f32(kb, e)
                                       : LLVMBuildBitCast(b, e, kb->f32, "");
    }
    for (int j = 0; j < w; j++)
      if (scale)
        f[j] = LLVMBuildFMul(b, f[j], scale, "");
    for (int j = 0; j + 1 < w; j += 2)
      kb_f32x2_to_bf16(kb, f[j], f[j + 1], &out[j]);
    if (w % 2)
      out[w - 1] = kb_f32_to_bf16(kb, f[w - 1]);
  }
  LLVMValueRef o = LLVMBuildMul(b, LLVMBuildAdd(b, vi, kb_i64(kb, s->d0), ""), kb_i64(kb, 2), "");
  store_bf16(kb, k, out, w, t, o, c->out_align);
}

/* i1: lane in [lo, hi). */
static LLVMValueRef lane_in(dsv4_kb *kb, const piece *c, LLVMValueRef lane, int lanes)
{
  LLVMValueRef in = c->hi < lanes ? LLVMBuildICmp(kb->b, LLVMIntULT, lane, kb_i32(kb, c->hi), "") : NULL;
  if (c->lo) {
    LLVMValueRef ge = LLVMBuildICmp(kb->b, LLVMIntUGE, lane, kb_i32(kb, c->lo), "");
    in = in ? LLVMBuildAnd(kb->b, in, ge, "") : ge;
  }
  return in ? in : LLVMConstInt(kb->i1, 1, 0);
}

void dsv4_emit_dequant_tokens(dsv4_kb *kb, const dsv4_kernel *k, LLVMValueRef lane, LLVMValueRef bs,
                              LLVMValueRef tensor_scale, const dsv4_lane_token *t, int n)
{
  dsv4_emit_dequant_tokens_split(kb, k, lane, bs, tensor_scale, t, n, NULL, NULL, 0);
}

void dsv4_emit_dequant_tokens_split(dsv4_kb *kb, const dsv4_kernel *k, LLVMValueRef lane, LLVMValueRef bs,
                                    LLVMValueRef tensor_scale, const dsv4_lane_token *t, int n,
                                    void (*between)(dsv4_kb *kb, void *arg), void *arg, int operand)
{
  LLVMBuilderRef b = kb->b;
  piece pc[2 * DSV4_LAYOUT_MAX_SEGS * 4];
  int np = make_pieces(kb, k, pc);
  int lanes = k->layout.dim / k->tile.values_per_thread;
  LLVMValueRef raw[2 * DSV4_LAYOUT_MAX_SEGS * 4][MAX_TOK][MAX_CHUNKS], sraw[2 * DSV4_LAYOUT_MAX_SEGS * 4][MAX_TOK];
  LLVMValueRef in[2 * DSV4_LAYOUT_MAX_SEGS * 4], vi[2 * DSV4_LAYOUT_MAX_SEGS * 4];
  for (int i = 0; i < np; i++) {
    in[i] = lane_in(kb, &pc[i], lane, lanes);
    vi[i] = piece_vi(kb, &pc[i], lane);
  }
  /* every load of every piece and token first, each under its guard, in
   * the order the conversions take them (loads taken first were issued
   * first: measured 8% faster in the decode's producers than a token's
   * pieces under one guard, whose longer-lived registers spilled); a
   * token's row offsets computed once, before the guards, so that each
   * load is its row's address plus a constant; a skipped load reads as
   * zero bytes, which dequantize to +0.0 */
  token_rows rows[MAX_TOK];
  for (int u = 0; u < n; u++)
    rows[u] = rows_of(kb, k, &t[u], bs);
  for (int i = 0; i < np; i++)
    for (int u = 0; u < n; u++) {
      LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
      kb_if_t g = kb_if(kb, LLVMBuildAnd(b, in[i], t[u].valid, ""), "load");
      LLVMValueRef r[MAX_CHUNKS], sr;
      issue_loads(kb, k, &pc[i], vi[i], &rows[u], r, &sr);
      LLVMBasicBlockRef loaded = LLVMGetInsertBlock(b);
      kb_endif(kb, &g);
      for (int j = 0; j < pc[i].nchunks; j++)
        raw[i][u][j] = kb_phi(kb, r[j], loaded, LLVMConstNull(pc[i].ct), pre);
      sraw[i][u] = sr ? kb_phi(kb, sr, loaded, LLVMConstNull(LLVMTypeOf(sr)), pre) : NULL;
    }
  if (between)
    between(kb, arg);
  /* then conversions and stores */
  for (int i = 0; i < np; i++)
    for (int u = 0; u < n; u++) {
      kb_if_t w = kb_if(kb, LLVMBuildAnd(b, in[i], t[u].write, ""), "store");
      convert_store(kb, k, &pc[i], vi[i], raw[i][u], sraw[i][u], tensor_scale, &t[u], operand);
      kb_endif(kb, &w);
    }
}

void dsv4_emit_dequant_values(dsv4_kb *kb, const dsv4_kernel *k, LLVMValueRef lane, LLVMValueRef bs,
                              const dsv4_lane_token *t, LLVMValueRef *x)
{
  LLVMBuilderRef b = kb->b;
  piece pc[2 * DSV4_LAYOUT_MAX_SEGS * 4];
  int np = make_pieces(kb, k, pc), vpt = k->tile.values_per_thread;
  int lanes = 1 << 30; /* callers may pad lanes past the layout: always bound them */
  for (int j = 0; j < vpt; j++)
    x[j] = LLVMConstReal(kb->f32, 0.0);
  token_rows rows = rows_of(kb, k, t, bs);
  for (int i = 0; i < np; i++) {
    const piece *c = &pc[i];
    const dsv4_segment *s = c->s;
    LLVMValueRef in = lane_in(kb, c, lane, lanes);
    LLVMValueRef vi = piece_vi(kb, c, lane);
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
    kb_if_t f = kb_if(kb, LLVMBuildAnd(b, in, t->valid, ""), "kslice");
    LLVMValueRef raw[MAX_CHUNKS], sraw, v[64];
    issue_loads(kb, k, c, vi, &rows, raw, &sraw);
    LLVMValueRef scale = NULL;
    if (sraw) /* a group scale: the value is the bf16 dequantization */
      scale = s->scale_type == DSV4_DT_UE8M0 ? kb_ue8m0_to_f32(kb, sraw) : LLVMBuildBitCast(b, sraw, kb->f32, "");
    for (int j = 0; j < c->w; j++) {
      LLVMValueRef e = element(kb, c, raw, j);
      LLVMValueRef f = s->type == DSV4_DT_E4M3   ? kb_e4m3_to_f32(kb, e)
                       : s->type == DSV4_DT_BF16 ? kb_bf16_to_f32(kb, e)
                                                 : LLVMBuildBitCast(b, e, kb->f32, "");
      if (scale) /* bf16(value * scale), widened: exactly the dequantized cache */
        f = kb_bf16_to_f32(kb, kb_f32_to_bf16(kb, LLVMBuildFMul(b, f, scale, "")));
      v[j] = f; /* per-tensor scales are folded by the caller */
    }
    LLVMBasicBlockRef done = LLVMGetInsertBlock(b);
    kb_endif(kb, &f);
    /* piece p of the lane holds values p*span + lane*w + [0, w): for
     * interleave 1 that is x[0..vpt) */
    LLVMValueRef ph[64];
    for (int j = 0; j < c->w; j++) /* all phis first: they head the block */
      ph[j] = kb_phi(kb, v[j], done, LLVMConstReal(kb->f32, 0.0), pre);
    for (int j = 0; j < c->w; j++) {
      int slot = c->p * c->w + j;
      x[slot] = LLVMBuildSelect(b, in, ph[j], x[slot], "");
    }
  }
}
