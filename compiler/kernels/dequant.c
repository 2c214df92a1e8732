/* dequant.c -- layout-driven dequantization of one thread's lane of a token.
 *
 * The layout (dsv4_layout.h) is data: for each segment the generator emits
 * one guarded block that loads the lane's stored values with the widest
 * loads the layout's alignment allows, loads the lane's scale, converts each
 * value with the bit-exact rule of OPS.md section 1 (fp32 product, one
 * rounding to bf16) and stores the bf16 results.  A new layout changes the
 * constants below, never this code.
 */
#include "gen.h"

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
  LLVMValueRef local = LLVMBuildUDiv(b, tid, kb_i32(kb, lanes), "tok_local");
  dsv4_token_lane r;
  r.lane = LLVMBuildURem(b, tid, kb_i32(kb, lanes), "lane");
  LLVMValueRef base = LLVMBuildMul(b, kb->t->block_id(kb, 0), kb_i32(kb, k->tile.tokens_per_cta), "");
  r.tok = LLVMBuildAdd(b, base, local, "tok");
  return r;
}

/* Alignment (bytes) guaranteed for the output of value index d0 + i*vpt. */
static int out_align(const dsv4_kernel *k, int d0)
{
  int a = gcd(16, k->layout.dim * 2);
  a = gcd(a, k->tile.values_per_thread * 2);
  return d0 ? gcd(a, d0 * 2) : a;
}

/* Store n bf16 values (i16) at p in chunks as wide as align allows. */
static void store_bf16(dsv4_kb *kb, LLVMValueRef *vals, int n, LLVMValueRef p, int align)
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
    LLVMTypeRef vt = LLVMVectorType(kb->i16, (unsigned)per);
    LLVMValueRef v = LLVMGetUndef(vt);
    for (int j = 0; j < per; j++)
      v = LLVMBuildInsertElement(kb->b, v, vals[c + j], kb_i32(kb, j), "");
    kb_store(kb, v, dst, (unsigned)(align < 16 ? align : 16));
  }
}

/* Load n stored values of type t at p (chunked by align) as raw integers. */
static void load_raw(dsv4_kb *kb, int t, int n, LLVMValueRef p, int align, LLVMValueRef *raw)
{
  int sz = dsv4_dtype_size(t);
  LLVMTypeRef et = sz == 1 ? kb->i8 : sz == 2 ? kb->i16 : kb->i32;
  int chunk = align < 16 ? align : 16;
  if (chunk < sz)
    chunk = sz;
  int per = chunk / sz;
  if (per > n)
    per = n;
  for (int c = 0; c < n; c += per) {
    LLVMValueRef src = kb_byte_ptr(kb, p, kb_i64(kb, (long long)c * sz));
    if (per == 1) {
      raw[c] = kb_load(kb, et, src, (unsigned)(align < sz ? align : sz));
      continue;
    }
    LLVMValueRef v = kb_load(kb, LLVMVectorType(et, (unsigned)per), src, (unsigned)(align < chunk ? align : chunk));
    for (int j = 0; j < per; j++)
      raw[c + j] = LLVMBuildExtractElement(kb->b, v, kb_i32(kb, j), "");
  }
}

/* A stored value as fp32. */
static LLVMValueRef widen(dsv4_kb *kb, int t, LLVMValueRef raw)
{
  switch (t) {
  case DSV4_DT_E4M3:
    return kb_e4m3_to_f32(kb, raw);
  case DSV4_DT_BF16:
    return kb_bf16_to_f32(kb, raw);
  default:
    return LLVMBuildBitCast(kb->b, raw, kb->f32, "");
  }
}

/* One segment's share of the lane: values [vi, vi + vpt) of segment s. */
static void emit_segment(dsv4_kb *kb, const dsv4_kernel *k, const dsv4_segment *s, LLVMValueRef li,
                         LLVMValueRef blk, LLVMValueRef row, LLVMValueRef bs, LLVMValueRef out_row)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_layout *l = &k->layout;
  int vpt = k->tile.values_per_thread, sz = dsv4_dtype_size(s->type);
  LLVMValueRef vi = LLVMBuildMul(b, kb_zext64(kb, li), kb_i64(kb, vpt), "vi");
  /* data: blk + row*row_bytes + offset + vi*size */
  LLVMValueRef off = LLVMBuildMul(b, row, kb_i64(kb, l->row_bytes), "");
  off = LLVMBuildAdd(b, off, kb_i64(kb, s->offset), "");
  off = LLVMBuildAdd(b, off, LLVMBuildMul(b, vi, kb_i64(kb, sz), ""), "");
  int align = gcd(gcd(l->align, l->row_bytes), gcd(s->offset ? s->offset : l->align, vpt * sz));
  LLVMValueRef raw[64];
  load_raw(kb, s->type, vpt, kb_byte_ptr(kb, blk, off), align, raw);

  LLVMValueRef out[64];
  LLVMValueRef scale = NULL;
  if (s->scale_type != DSV4_DT_NONE) {
    int ssz = dsv4_dtype_size(s->scale_type);
    int tail = l->scale_place == DSV4_SCALES_BLOCK_TAIL;
    int sstride = tail ? l->scale_row_bytes : l->row_bytes;
    LLVMValueRef g = LLVMBuildUDiv(b, li, kb_i32(kb, s->scale_group / vpt), "group");
    LLVMValueRef so = LLVMBuildMul(b, row, kb_i64(kb, sstride), "");
    if (tail)
      so = LLVMBuildAdd(b, so, LLVMBuildMul(b, bs, kb_i64(kb, l->row_bytes), ""), "");
    so = LLVMBuildAdd(b, so, kb_i64(kb, s->scale_offset), "");
    so = LLVMBuildAdd(b, so, LLVMBuildMul(b, kb_zext64(kb, g), kb_i64(kb, ssz), ""), "");
    int salign = gcd(gcd(l->align, l->row_bytes), gcd(sstride, ssz));
    if (s->scale_offset)
      salign = gcd(salign, s->scale_offset);
    LLVMValueRef sraw = kb_load(kb, ssz == 1 ? kb->i8 : kb->i32, kb_byte_ptr(kb, blk, so), (unsigned)salign);
    scale = s->scale_type == DSV4_DT_UE8M0 ? kb_ue8m0_to_f32(kb, sraw) : LLVMBuildBitCast(b, sraw, kb->f32, "");
  }
  for (int j = 0; j < vpt; j++) {
    if (s->type == DSV4_DT_BF16 && !scale) {
      out[j] = raw[j]; /* stored as bf16: copied bit for bit */
      continue;
    }
    LLVMValueRef f = widen(kb, s->type, raw[j]);
    if (scale)
      f = LLVMBuildFMul(b, f, scale, "");
    out[j] = kb_f32_to_bf16(kb, f);
  }
  LLVMValueRef o = LLVMBuildAdd(b, kb_i64(kb, (long long)s->d0 * 2), LLVMBuildMul(b, vi, kb_i64(kb, 2), ""), "");
  store_bf16(kb, out, vpt, kb_byte_ptr(kb, out_row, o), out_align(k, s->d0));
}

void dsv4_emit_dequant_lane(dsv4_kb *kb, const dsv4_kernel *k, LLVMValueRef lane, LLVMValueRef blk,
                            LLVMValueRef row, LLVMValueRef bs, LLVMValueRef out_row)
{
  LLVMBuilderRef b = kb->b;
  int vpt = k->tile.values_per_thread;
  for (int i = 0; i < k->layout.nseg; i++) {
    const dsv4_segment *s = &k->layout.seg[i];
    int lo = s->d0 / vpt, hi = s->d1 / vpt;
    LLVMValueRef in = LLVMBuildICmp(b, LLVMIntULT, lane, kb_i32(kb, hi), "");
    if (lo)
      in = LLVMBuildAnd(b, in, LLVMBuildICmp(b, LLVMIntUGE, lane, kb_i32(kb, lo), ""), "");
    kb_if_t f = kb_if(kb, in, "segment");
    LLVMValueRef li = lo ? LLVMBuildSub(b, lane, kb_i32(kb, lo), "") : lane;
    emit_segment(kb, k, s, li, blk, row, bs, out_row);
    kb_endif(kb, &f);
  }
}

void dsv4_emit_zero_lane(dsv4_kb *kb, const dsv4_kernel *k, LLVMValueRef lane, LLVMValueRef out_row)
{
  int vpt = k->tile.values_per_thread;
  LLVMValueRef z[64];
  for (int j = 0; j < vpt; j++)
    z[j] = LLVMConstInt(kb->i16, 0, 0);
  LLVMValueRef o = LLVMBuildMul(kb->b, kb_zext64(kb, lane), kb_i64(kb, (long long)vpt * 2), "");
  store_bf16(kb, z, vpt, kb_byte_ptr(kb, out_row, o), out_align(k, 0));
}
