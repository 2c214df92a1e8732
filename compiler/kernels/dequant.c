/* dequant.c -- layout-driven dequantization of one thread's lane of one or
 * more tokens.
 *
 * The layout (dsv4_layout.h) is data: for each segment the generator emits
 * one guarded block in which, for every token the thread owns, it first
 * issues all loads (the widest the layout's alignment allows, plus the
 * lane's scale), and only then converts with the bit-exact rule of OPS.md
 * section 1 (fp32 product, one rounding to bf16) and stores.  Loads of an
 * invalid token are skipped and read as zero bytes, which dequantize to
 * +0.0: the zero row of OPS.md 2a needs no separate path.  A new layout
 * changes the constants below, never this code.
 */
#include "gen.h"

#define MAX_TOK 8
#define MAX_CHUNKS 16

static int gcd(int a, int b)
{
  while (b) {
    int t = a % b;
    a = b, b = t;
  }
  return a;
}

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

/* Alignment (bytes) guaranteed for the output of value index d0 + i*vpt. */
static int out_align(const dsv4_kernel *k, int d0)
{
  int a = gcd(16, k->layout.dim * 2);
  a = gcd(a, k->tile.values_per_thread * 2);
  return d0 ? gcd(a, d0 * 2) : a;
}

/* Store n bf16 values (i16) at p in chunks as wide as align allows. */
static void store_bf16(dsv4_kb *kb, const dsv4_kernel *k, LLVMValueRef *vals, int n, LLVMValueRef p, int align)
{
  int per = align / 2 > 0 ? align / 2 : 1;
  if (per > n)
    per = n;
  for (int c = 0; c < n; c += per) {
    LLVMValueRef dst = kb_byte_ptr(kb, p, kb_i64(kb, (long long)c * 2));
    if (per == 1) {
      kb_store(kb, vals[c], dst, (unsigned)align);
      continue;
    }
    LLVMValueRef v = LLVMGetUndef(LLVMVectorType(kb->i16, (unsigned)per));
    for (int j = 0; j < per; j++)
      v = LLVMBuildInsertElement(kb->b, v, vals[c + j], kb_i32(kb, j), "");
    if (k->tile.streaming)
      kb_store_stream(kb, v, dst, (unsigned)(align < 16 ? align : 16));
    else
      kb_store(kb, v, dst, (unsigned)(align < 16 ? align : 16));
  }
}

/* How one segment's lane is loaded: chunk type and count. */
typedef struct {
  int sz, per, nchunks, align;
  LLVMTypeRef et, ct; /* element and chunk types */
} chunking;

static chunking chunks_for(dsv4_kb *kb, const dsv4_kernel *k, const dsv4_segment *s)
{
  const dsv4_layout *l = &k->layout;
  int vpt = k->tile.values_per_thread;
  chunking c;
  c.sz = dsv4_dtype_size(s->type);
  c.align = gcd(gcd(l->align, l->row_bytes), gcd(s->offset ? s->offset : l->align, vpt * c.sz));
  int bytes = c.align < 16 ? c.align : 16;
  if (bytes < c.sz)
    bytes = c.sz;
  c.per = bytes / c.sz;
  if (c.per > vpt)
    c.per = vpt;
  c.nchunks = vpt / c.per;
  c.et = c.sz == 1 ? kb->i8 : c.sz == 2 ? kb->i16 : kb->i32;
  c.ct = c.per == 1 ? c.et : LLVMVectorType(c.et, (unsigned)c.per);
  return c;
}

/* Issue the loads of one token's lane: chunks into raw[], scale into *sraw. */
static void issue_loads(dsv4_kb *kb, const dsv4_kernel *k, const dsv4_segment *s, const chunking *c,
                        LLVMValueRef li, const dsv4_lane_token *t, LLVMValueRef bs, LLVMValueRef *raw,
                        LLVMValueRef *sraw)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_layout *l = &k->layout;
  int vpt = k->tile.values_per_thread;
  LLVMValueRef vi = LLVMBuildMul(b, kb_zext64(kb, li), kb_i64(kb, vpt), "vi");
  /* data: blk + row*row_bytes + offset + vi*size */
  LLVMValueRef off = LLVMBuildMul(b, t->row, kb_i64(kb, l->row_bytes), "");
  off = LLVMBuildAdd(b, off, kb_i64(kb, s->offset), "");
  off = LLVMBuildAdd(b, off, LLVMBuildMul(b, vi, kb_i64(kb, c->sz), ""), "");
  LLVMValueRef p = kb_byte_ptr(kb, t->blk, off);
  for (int j = 0; j < c->nchunks; j++) {
    LLVMValueRef src = kb_byte_ptr(kb, p, kb_i64(kb, (long long)j * c->per * c->sz));
    int a = c->align < c->per * c->sz ? c->align : c->per * c->sz;
    raw[j] = k->tile.streaming ? kb_load_stream(kb, c->ct, src, (unsigned)(a > 16 ? 16 : a))
                               : kb_load(kb, c->ct, src, (unsigned)(a > 16 ? 16 : a));
  }
  *sraw = NULL;
  if (s->scale_type == DSV4_DT_NONE)
    return;
  int ssz = dsv4_dtype_size(s->scale_type);
  int tail = l->scale_place == DSV4_SCALES_BLOCK_TAIL;
  int sstride = tail ? l->scale_row_bytes : l->row_bytes;
  LLVMValueRef g = LLVMBuildUDiv(b, li, kb_i32(kb, s->scale_group / vpt), "group");
  LLVMValueRef so = LLVMBuildMul(b, t->row, kb_i64(kb, sstride), "");
  if (tail)
    so = LLVMBuildAdd(b, so, LLVMBuildMul(b, bs, kb_i64(kb, l->row_bytes), ""), "");
  so = LLVMBuildAdd(b, so, kb_i64(kb, s->scale_offset), "");
  so = LLVMBuildAdd(b, so, LLVMBuildMul(b, kb_zext64(kb, g), kb_i64(kb, ssz), ""), "");
  int salign = gcd(gcd(l->align, l->row_bytes), gcd(sstride, ssz));
  if (s->scale_offset)
    salign = gcd(salign, s->scale_offset);
  *sraw = kb_load(kb, ssz == 1 ? kb->i8 : kb->i32, kb_byte_ptr(kb, t->blk, so), (unsigned)salign);
}

/* Element j of the lane from its loaded chunks. */
static LLVMValueRef element(dsv4_kb *kb, const chunking *c, LLVMValueRef *raw, int j)
{
  if (c->per == 1)
    return raw[j];
  return LLVMBuildExtractElement(kb->b, raw[j / c->per], kb_i32(kb, j % c->per), "");
}

/* Convert one token's lane and store it. */
static void convert_store(dsv4_kb *kb, const dsv4_kernel *k, const dsv4_segment *s, const chunking *c,
                          LLVMValueRef li, LLVMValueRef *raw, LLVMValueRef sraw, LLVMValueRef out_row)
{
  LLVMBuilderRef b = kb->b;
  int vpt = k->tile.values_per_thread;
  LLVMValueRef out[64], f[64];
  LLVMValueRef scale = NULL;
  if (sraw)
    scale = s->scale_type == DSV4_DT_UE8M0 ? kb_ue8m0_to_f32(kb, sraw) : LLVMBuildBitCast(b, sraw, kb->f32, "");
  if (s->type == DSV4_DT_BF16 && !scale) {
    for (int j = 0; j < vpt; j++)
      out[j] = element(kb, c, raw, j); /* stored as bf16: copied bit for bit */
  } else {
    for (int j = 0; j < vpt; j++) {
      if (s->type == DSV4_DT_E4M3 && j % 2 == 0 && j + 1 < vpt) {
        kb_e4m3x2_to_f32(kb, element(kb, c, raw, j), element(kb, c, raw, j + 1), &f[j]);
        j++;
        continue;
      }
      LLVMValueRef e = element(kb, c, raw, j);
      f[j] = s->type == DSV4_DT_E4M3   ? kb_e4m3_to_f32(kb, e)
             : s->type == DSV4_DT_BF16 ? kb_bf16_to_f32(kb, e)
                                       : LLVMBuildBitCast(b, e, kb->f32, "");
    }
    for (int j = 0; j < vpt; j++)
      if (scale)
        f[j] = LLVMBuildFMul(b, f[j], scale, "");
    for (int j = 0; j + 1 < vpt; j += 2)
      kb_f32x2_to_bf16(kb, f[j], f[j + 1], &out[j]);
    if (vpt % 2)
      out[vpt - 1] = kb_f32_to_bf16(kb, f[vpt - 1]);
  }
  LLVMValueRef vi = LLVMBuildMul(b, kb_zext64(kb, li), kb_i64(kb, vpt), "");
  LLVMValueRef o = LLVMBuildAdd(b, kb_i64(kb, (long long)s->d0 * 2), LLVMBuildMul(b, vi, kb_i64(kb, 2), ""), "");
  store_bf16(kb, k, out, vpt, kb_byte_ptr(kb, out_row, o), out_align(k, s->d0));
}

void dsv4_emit_dequant_tokens(dsv4_kb *kb, const dsv4_kernel *k, LLVMValueRef lane, LLVMValueRef bs,
                              const dsv4_lane_token *t, int n)
{
  LLVMBuilderRef b = kb->b;
  int vpt = k->tile.values_per_thread;
  for (int i = 0; i < k->layout.nseg; i++) {
    const dsv4_segment *s = &k->layout.seg[i];
    chunking c = chunks_for(kb, k, s);
    int lo = s->d0 / vpt, hi = s->d1 / vpt;
    LLVMValueRef in = LLVMBuildICmp(b, LLVMIntULT, lane, kb_i32(kb, hi), "");
    if (lo)
      in = LLVMBuildAnd(b, in, LLVMBuildICmp(b, LLVMIntUGE, lane, kb_i32(kb, lo), ""), "");
    kb_if_t f = kb_if(kb, in, "segment");
    LLVMValueRef li = lo ? LLVMBuildSub(b, lane, kb_i32(kb, lo), "") : lane;
    LLVMValueRef raw[MAX_TOK][MAX_CHUNKS], sraw[MAX_TOK];
    /* all loads first, each token's under its own guard (zero when skipped) */
    for (int u = 0; u < n; u++) {
      LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
      kb_if_t g = kb_if(kb, t[u].valid, "load");
      LLVMValueRef r[MAX_CHUNKS], sr;
      issue_loads(kb, k, s, &c, li, &t[u], bs, r, &sr);
      LLVMBasicBlockRef loaded = LLVMGetInsertBlock(b);
      kb_endif(kb, &g);
      for (int j = 0; j < c.nchunks; j++)
        raw[u][j] = kb_phi(kb, r[j], loaded, LLVMConstNull(c.ct), pre);
      sraw[u] = sr ? kb_phi(kb, sr, loaded, LLVMConstNull(LLVMTypeOf(sr)), pre) : NULL;
    }
    for (int u = 0; u < n; u++) {
      kb_if_t w = kb_if(kb, t[u].write, "store");
      convert_store(kb, k, s, &c, li, raw[u], sraw[u], t[u].out_row);
      kb_endif(kb, &w);
    }
    kb_endif(kb, &f);
  }
}
