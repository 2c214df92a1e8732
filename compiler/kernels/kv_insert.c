/* kv_insert.c -- docs/ops.md section 5 (and the DSv3.2 / indexer writers of
 * sections 4 and 8): the layout-driven KV quant-insert, optionally fused with
 * the q branch (per-head RMSNorm without weight + RoPE).
 *
 * KV rows: a token's dim / vpt lanes, padded to a power of two P so that the
 * lanes of one scale group are an aligned group of threads.  Each thread
 * loads vpt bf16 values, applies GPT-J RoPE where the spec says, rounds to
 * bf16, and the group's amax comes from a reduction across its lanes.  The
 * exponent e = ceil(log2(max(amax, 1e-4) / 448)) is computed exactly from
 * amax's bits (amax is a bf16 value or the 1e-4 floor, so the fp32 quotient
 * never rounds across a power of two and this equals vLLM's fp32 formula),
 * values are scaled by 2^-e exactly and encoded e4m3 RNE-satfinite.  Scales
 * go where the layout puts them; bytes of a block-tail scale row that no
 * scale covers (the DSv4 pad byte) are written 0.
 *
 * q rows (when the spec has q = { dim }): one row per (token, padded head),
 * q_dim / vpt lanes; sum of squares reduced across the row's lanes, then
 * y = x / sqrt(mean + eps), RoPE without intermediate rounding, one
 * rounding to bf16; padded heads (h >= heads) read nothing and give zeros.
 *
 * One 1-D launch: CTAs below kv_ctas write KV rows, the rest q rows.  All
 * control flow around the reductions is uniform (no early return), since
 * the shared-memory reduction of targets without shuffles uses barriers.
 */
#include "gen.h"

/* Parameter positions: DSV4_A_KV_INSERT_<name> (dsv4_abi.h). */
#define ARG(name) DSV4_A_KV_INSERT_##name

#define MAXV 64

/* n bf16 values at byte offset off of argument arg, as f32 (zeros unless cond). */
static void load_bf16_row(dsv4_kb *kb, LLVMValueRef cond, int arg, LLVMValueRef off, int n, int align, LLVMValueRef *x)
{
  int bytes = align < 16 ? align : 16;
  int per = bytes / 2 > n ? n : bytes / 2;
  if (per < 1)
    per = 1;
  for (int c = 0; c < n; c += per) {
    LLVMTypeRef ty = per == 1 ? kb->i16 : LLVMVectorType(kb->i16, (unsigned)per);
    LLVMValueRef o = LLVMBuildAdd(kb->b, off, kb_i64(kb, (long long)c * 2), "");
    LLVMValueRef v = kb_load_if(kb, cond, ty, kb_arg(kb, arg), o, (unsigned)(per * 2 < align ? per * 2 : align),
                                LLVMConstNull(ty));
    for (int j = 0; j < per; j++) {
      LLVMValueRef h = per == 1 ? v : LLVMBuildExtractElement(kb->b, v, kb_i32(kb, j), "");
      x[c + j] = kb_bf16_to_f32(kb, h);
    }
  }
}

/* GPT-J RoPE on a run of n values starting at value index v0 (i32, a
 * multiple of n; the spec's range is aligned to runs) when they fall in the
 * spec's range: pairs (d, d+1), pair i using cos_sin[pos, i] and
 * cos_sin[pos, dims/2 + i], in fp32.  cond: the row is live, pos valid. */
static void rope(dsv4_kb *kb, const dsv4_kernel *k, LLVMValueRef *x, int n, LLVMValueRef v0, LLVMValueRef pos,
                 LLVMValueRef cond)
{
  if (!k->rope_dims)
    return;
  LLVMBuilderRef b = kb->b;
  int half = n / 2, dims = k->rope_dims, first = k->rope_first;
  LLVMValueRef in = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntUGE, v0, kb_i32(kb, first), ""),
                                 LLVMBuildICmp(b, LLVMIntULT, v0, kb_i32(kb, first + dims), ""), "");
  in = LLVMBuildAnd(b, in, cond, "rope");
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(b);
  kb_if_t f = kb_if(kb, in, "rope");
  LLVMValueRef i0 = LLVMBuildUDiv(b, kb_zext64(kb, LLVMBuildSub(b, v0, kb_i32(kb, first), "")), kb_i64(kb, 2), "");
  LLVMValueRef row = LLVMBuildMul(b, pos, kb_i64(kb, dims), "");
  LLVMValueRef co = LLVMBuildMul(b, LLVMBuildAdd(b, row, i0, ""), kb_i64(kb, 4), "");
  LLVMValueRef so = LLVMBuildAdd(b, co, kb_i64(kb, (long long)dims / 2 * 4), "");
  int align = dsv4_gcd(16, dsv4_gcd(half * 4, dims * 2)); /* rows of dims floats; half of them apart */
  LLVMValueRef r[MAXV];
  for (int j = 0; j < half; j++) {
    LLVMValueRef c =
        kb_load(kb, kb->f32, kb_byte_ptr(kb, kb_arg(kb, ARG(cos_sin)), LLVMBuildAdd(b, co, kb_i64(kb, 4 * j), "")),
                (unsigned)(j ? 4 : align));
    LLVMValueRef s =
        kb_load(kb, kb->f32, kb_byte_ptr(kb, kb_arg(kb, ARG(cos_sin)), LLVMBuildAdd(b, so, kb_i64(kb, 4 * j), "")),
                (unsigned)(j ? 4 : align));
    LLVMValueRef e = x[2 * j], o = x[2 * j + 1];
    r[2 * j] = LLVMBuildFSub(b, LLVMBuildFMul(b, e, c, ""), LLVMBuildFMul(b, o, s, ""), "");
    r[2 * j + 1] = LLVMBuildFAdd(b, LLVMBuildFMul(b, e, s, ""), LLVMBuildFMul(b, o, c, ""), "");
  }
  LLVMBasicBlockRef done = LLVMGetInsertBlock(b);
  kb_endif(kb, &f);
  for (int j = 0; j < n; j++)
    x[j] = kb_phi(kb, r[j], done, x[j], pre);
}

/* Round n f32 values to bf16 bits (pairs through the target's instruction). */
static void to_bf16(dsv4_kb *kb, LLVMValueRef *x, int n, LLVMValueRef *h)
{
  for (int j = 0; j + 1 < n; j += 2)
    kb_f32x2_to_bf16(kb, x[j], x[j + 1], &h[j]);
  if (n % 2)
    h[n - 1] = kb_f32_to_bf16(kb, x[n - 1]);
}

/* Store n i16 (bf16) values at byte pointer p (align bytes known). */
static void store_i16(dsv4_kb *kb, LLVMValueRef *h, int n, LLVMValueRef p, int align)
{
  int per = align / 2 < 1 ? 1 : align / 2 > 8 ? 8 : align / 2;
  per = per > n ? n : per;
  for (int c = 0; c < n; c += per) {
    LLVMValueRef dst = kb_byte_ptr(kb, p, kb_i64(kb, (long long)c * 2));
    if (per == 1) {
      kb_store(kb, h[c], dst, 2);
      continue;
    }
    LLVMValueRef v = LLVMGetUndef(LLVMVectorType(kb->i16, (unsigned)per));
    for (int j = 0; j < per; j++)
      v = LLVMBuildInsertElement(kb->b, v, h[c + j], kb_i32(kb, j), "");
    kb_store(kb, v, dst, (unsigned)(per * 2 < align ? per * 2 : align));
  }
}

/* e = ceil(log2(max(amax, 1e-4) / 448)), exactly, from amax's bits:
 * amax = m * 2^E with m in [1, 2) and 448 = 1.75 * 2^8, so e = E - 8, plus
 * one when m > 1.75. */
static LLVMValueRef exponent_floor_amax(dsv4_kb *kb, LLVMValueRef amax)
{
  LLVMBuilderRef b = kb->b;
  LLVMValueRef floor = LLVMConstReal(kb->f32, 1e-4);
  amax = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, amax, floor, ""), amax, floor, "amax");
  LLVMValueRef u = LLVMBuildBitCast(b, amax, kb->i32, "");
  LLVMValueRef E = LLVMBuildSub(b, LLVMBuildLShr(b, u, kb_i32(kb, 23), ""), kb_i32(kb, 127 + 8), "");
  LLVMValueRef up =
      LLVMBuildICmp(b, LLVMIntUGT, LLVMBuildAnd(b, u, kb_i32(kb, 0x7FFFFF), ""), kb_i32(kb, 0x600000), "");
  return LLVMBuildAdd(b, E, LLVMBuildZExt(b, up, kb->i32, ""), "e");
}

/* The kernel's rule.  With the quotient floor (FlashMLA's test quantizer,
 * ceil(log2(max(amax / 448, 1e-4)))) amax below 0.0448 gives -13, and no
 * bf16 amax lies within fp32 rounding of that threshold. */
static LLVMValueRef exponent(dsv4_kb *kb, const dsv4_kernel *k, LLVMValueRef amax)
{
  LLVMValueRef e = exponent_floor_amax(kb, amax);
  if (k->quant_floor != DSV4_FLOOR_QUOTIENT)
    return e;
  LLVMValueRef small = LLVMBuildFCmp(kb->b, LLVMRealOLT, amax, LLVMConstReal(kb->f32, 0.0448), "");
  return LLVMBuildSelect(kb->b, small, kb_i32(kb, -13), e, "e");
}

/* 2^v as f32 for v in [-126, 127] (i32). */
static LLVMValueRef pow2f(dsv4_kb *kb, LLVMValueRef v)
{
  LLVMValueRef bits = LLVMBuildShl(kb->b, LLVMBuildAdd(kb->b, v, kb_i32(kb, 127), ""), kb_i32(kb, 23), "");
  return LLVMBuildBitCast(kb->b, bits, kb->f32, "");
}

/* The KV rows of CTA cta (i32). */
static void kv_rows(dsv4_kb *kb, const dsv4_kernel *k, LLVMValueRef cta)
{
  LLVMBuilderRef b = kb->b;
  const dsv4_layout *l = &k->layout;
  int vpt = k->tile.values_per_thread, lanes = l->dim / vpt, P = dsv4_pow2ceil(lanes);
  LLVMValueRef tid = kb->t->thread_id(kb);
  LLVMValueRef lane = LLVMBuildURem(b, tid, kb_i32(kb, P), "lane");
  LLVMValueRef tok = LLVMBuildAdd(b, LLVMBuildMul(b, cta, kb_i32(kb, k->tile.tokens_per_cta), ""),
                                  LLVMBuildUDiv(b, tid, kb_i32(kb, P), ""), "tok");
  LLVMValueRef nrows =
      LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, kb_arg(kb, ARG(n_insert)), kb_arg(kb, ARG(n_tokens)), ""),
                      kb_arg(kb, ARG(n_insert)), kb_arg(kb, ARG(n_tokens)), "");
  LLVMValueRef in = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntULT, lane, kb_i32(kb, lanes), ""),
                                 LLVMBuildICmp(b, LLVMIntSLT, tok, nrows, ""), "in");
  LLVMValueRef tok64 = kb_zext64(kb, tok);
  LLVMValueRef slot = kb_load_if(kb, in, kb->i64, kb_arg(kb, ARG(slot_mapping)),
                                 LLVMBuildMul(b, tok64, kb_i64(kb, 8), ""), 8, kb_i64(kb, 0));
  LLVMValueRef bs = kb_sext64(kb, kb_arg(kb, ARG(block_size)));
  LLVMValueRef nslots = LLVMBuildMul(b, kb_sext64(kb, kb_arg(kb, ARG(num_blocks))), bs, "");
  LLVMValueRef write = LLVMBuildAnd(b, in, LLVMBuildICmp(b, LLVMIntSGE, slot, kb_i64(kb, 0), ""), "");
  write = LLVMBuildAnd(b, write, LLVMBuildICmp(b, LLVMIntSLT, slot, nslots, ""), "write");
  LLVMValueRef pos = NULL;
  if (k->rope_dims) { /* a position outside the cos/sin table skips the row */
    pos = kb_load_if(kb, write, kb->i64, kb_arg(kb, ARG(positions)), LLVMBuildMul(b, tok64, kb_i64(kb, 8), ""), 8,
                     kb_i64(kb, 0));
    LLVMValueRef ok = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, pos, kb_i64(kb, 0), ""),
                                   LLVMBuildICmp(b, LLVMIntSLT, pos, kb_sext64(kb, kb_arg(kb, ARG(max_pos))), ""), "");
    write = LLVMBuildAnd(b, write, ok, "write");
  }
  /* the row's values: load, RoPE, round to bf16 */
  LLVMValueRef x[MAXV], h[MAXV];
  LLVMValueRef vo = LLVMBuildMul(b, tok64, kb_i64(kb, (long long)l->dim * 2), "");
  vo = LLVMBuildAdd(b, vo, LLVMBuildMul(b, kb_zext64(kb, lane), kb_i64(kb, (long long)vpt * 2), ""), "");
  load_bf16_row(kb, write, ARG(kv), vo, vpt, dsv4_gcd(16, dsv4_gcd(l->dim * 2, vpt * 2)), x);
  rope(kb, k, x, vpt, LLVMBuildMul(b, lane, kb_i32(kb, vpt), ""), pos, write);
  to_bf16(kb, x, vpt, h);
  for (int j = 0; j < vpt; j++)
    x[j] = kb_bf16_to_f32(kb, h[j]);

  /* the scale group's amax, across its lanes (uniform control flow) */
  int group = 0;
  for (int i = 0; i < l->nseg; i++)
    if (l->seg[i].scale_type != DSV4_DT_NONE)
      group = l->seg[i].scale_group;
  LLVMValueRef amax = NULL;
  if (group) {
    LLVMValueRef a = LLVMConstReal(kb->f32, 0.0);
    LLVMTypeRef ft = kb->f32;
    for (int j = 0; j < vpt; j++) {
      LLVMValueRef ax = kb_call(kb, "llvm.fabs.f32", kb->f32, &ft, &x[j], 1, LLVMCCallConv);
      a = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, ax, a, ""), ax, a, "");
    }
    amax = kb_lane_reduce(kb, a, group / vpt, KB_REDUCE_MAX, dsv4_gen_threads(kb, k));
  }

  LLVMValueRef s0 = LLVMBuildSelect(b, write, slot, kb_i64(kb, 0), "");
  LLVMValueRef blk = kb_byte_ptr(kb, kb_arg(kb, ARG(cache)),
                                 LLVMBuildMul(b, LLVMBuildUDiv(b, s0, bs, ""), kb_arg(kb, ARG(block_stride)), ""));
  LLVMValueRef row = LLVMBuildURem(b, s0, bs, "row");
  int tail = l->scale_place == DSV4_SCALES_BLOCK_TAIL;
  int sstride = tail ? l->scale_row_bytes : l->row_bytes;
  LLVMValueRef srow = LLVMBuildMul(b, row, kb_i64(kb, sstride), "");
  if (tail)
    srow = LLVMBuildAdd(b, srow, LLVMBuildMul(b, bs, kb_i64(kb, l->row_bytes), ""), "srow");
  LLVMValueRef drow = LLVMBuildMul(b, row, kb_i64(kb, l->row_bytes), "drow");

  for (int i = 0; i < l->nseg; i++) {
    const dsv4_segment *s = &l->seg[i];
    int lo = s->d0 / vpt, hi = s->d1 / vpt, sz = dsv4_dtype_size(s->type);
    LLVMValueRef cond = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntUGE, lane, kb_i32(kb, lo), ""),
                                     LLVMBuildICmp(b, LLVMIntULT, lane, kb_i32(kb, hi), ""), "");
    kb_if_t f = kb_if(kb, LLVMBuildAnd(b, cond, write, ""), "segment");
    LLVMValueRef li = LLVMBuildSub(b, lane, kb_i32(kb, lo), "");
    LLVMValueRef vi = LLVMBuildMul(b, kb_zext64(kb, li), kb_i64(kb, vpt), "vi");
    LLVMValueRef dst = kb_byte_ptr(
        kb, blk,
        LLVMBuildAdd(b, drow, LLVMBuildAdd(b, kb_i64(kb, s->offset), LLVMBuildMul(b, vi, kb_i64(kb, sz), ""), ""), ""));
    int align = dsv4_gcd(dsv4_gcd(l->align, l->row_bytes), dsv4_gcd(s->offset ? s->offset : l->align, vpt * sz));
    if (s->type == DSV4_DT_BF16) {
      store_i16(kb, h, vpt, dst, align);
    } else if (s->type == DSV4_DT_F32) {
      for (int j = 0; j < vpt; j++)
        kb_store(kb, x[j], kb_byte_ptr(kb, dst, kb_i64(kb, 4 * j)), (unsigned)(j ? 4 : (align < 4 ? align : 4)));
    } else { /* e4m3, scaled by 2^-e per group or unscaled */
      LLVMValueRef e = s->scale_type != DSV4_DT_NONE ? exponent(kb, k, amax) : NULL;
      LLVMValueRef inv = e ? pow2f(kb, LLVMBuildNeg(b, e, "")) : NULL;
      LLVMValueRef q[MAXV], y[MAXV];
      for (int j = 0; j < vpt; j++) {
        LLVMValueRef v = inv ? LLVMBuildFMul(b, x[j], inv, "") : x[j];
        LLVMValueRef hi448 = LLVMConstReal(kb->f32, 448.0), lo448 = LLVMConstReal(kb->f32, -448.0);
        v = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOGT, v, hi448, ""), hi448, v, "");
        y[j] = LLVMBuildSelect(b, LLVMBuildFCmp(b, LLVMRealOLT, v, lo448, ""), lo448, v, "");
      }
      for (int j = 0; j + 1 < vpt; j += 2)
        kb_f32x2_to_e4m3(kb, y[j], y[j + 1], &q[j]);
      if (vpt % 2)
        q[vpt - 1] = kb_f32_to_e4m3(kb, y[vpt - 1]);
      int per = align < 16 ? align : 16;
      per = per > vpt ? vpt : per;
      for (int c = 0; c < vpt; c += per) {
        LLVMValueRef v;
        if (per >= 4) { /* 32-bit words assembled from bytes: one vector store */
          v = LLVMGetUndef(LLVMVectorType(kb->i32, (unsigned)per / 4));
          for (int wd = 0; wd < per / 4; wd++) {
            LLVMValueRef word = kb_i32(kb, 0);
            for (int j = 0; j < 4; j++)
              word = LLVMBuildOr(b, word, LLVMBuildShl(b, LLVMBuildZExt(b, q[c + 4 * wd + j], kb->i32, ""),
                                                       kb_i32(kb, 8 * j), ""), "");
            v = LLVMBuildInsertElement(b, v, word, kb_i32(kb, wd), "");
          }
          if (per == 4)
            v = LLVMBuildExtractElement(b, v, kb_i32(kb, 0), "");
        } else {
          v = per == 1 ? q[c] : LLVMGetUndef(LLVMVectorType(kb->i8, (unsigned)per));
          for (int j = 0; per > 1 && j < per; j++)
            v = LLVMBuildInsertElement(b, v, q[c + j], kb_i32(kb, j), "");
        }
        kb_store(kb, v, kb_byte_ptr(kb, dst, kb_i64(kb, c)), (unsigned)per);
      }
      if (e) { /* the first lane of each group stores the group's scale */
        int w = s->scale_group / vpt;
        kb_if_t g = kb_if(kb, LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildURem(b, li, kb_i32(kb, w), ""), kb_i32(kb, 0), ""),
                          "scale");
        int ssz = dsv4_dtype_size(s->scale_type);
        LLVMValueRef gi = LLVMBuildUDiv(b, vi, kb_i64(kb, s->scale_group), "");
        LLVMValueRef so = LLVMBuildAdd(b, srow, LLVMBuildAdd(b, kb_i64(kb, s->scale_offset),
                                                             LLVMBuildMul(b, gi, kb_i64(kb, ssz), ""), ""), "");
        LLVMValueRef sv;
        if (s->scale_type == DSV4_DT_UE8M0) {
          LLVMValueRef byte = LLVMBuildAdd(b, e, kb_i32(kb, 127), "");
          byte = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSLT, byte, kb_i32(kb, 0), ""), kb_i32(kb, 0), byte, "");
          byte = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntSGT, byte, kb_i32(kb, 255), ""), kb_i32(kb, 255), byte, "");
          sv = LLVMBuildTrunc(b, byte, kb->i8, "");
        } else
          sv = pow2f(kb, e);
        int salign = dsv4_gcd(dsv4_gcd(l->align, l->row_bytes), dsv4_gcd(sstride, ssz));
        if (s->scale_offset)
          salign = dsv4_gcd(salign, s->scale_offset);
        kb_store(kb, sv, kb_byte_ptr(kb, blk, so), (unsigned)salign);
        kb_endif(kb, &g);
      }
    }
    kb_endif(kb, &f);
  }

  /* bytes of a block-tail scale row no scale covers (the pad byte): zero */
  if (tail) {
    char covered[4096] = {0};
    for (int i = 0; i < l->nseg; i++) {
      const dsv4_segment *s = &l->seg[i];
      if (s->scale_type == DSV4_DT_NONE || s->scale_tensor)
        continue;
      int n = (s->d1 - s->d0) / s->scale_group * dsv4_dtype_size(s->scale_type);
      for (int j = 0; j < n && s->scale_offset + j < 4096; j++)
        covered[s->scale_offset + j] = 1;
    }
    int any = 0;
    for (int j = 0; j < l->scale_row_bytes && j < 4096; j++)
      any |= !covered[j];
    if (any) {
      kb_if_t f = kb_if(kb, LLVMBuildAnd(b, write, LLVMBuildICmp(b, LLVMIntEQ, lane, kb_i32(kb, 0), ""), ""), "pad");
      for (int j = 0; j < l->scale_row_bytes && j < 4096; j++)
        if (!covered[j])
          kb_store(kb, LLVMConstInt(kb->i8, 0, 0), kb_byte_ptr(kb, blk, LLVMBuildAdd(b, srow, kb_i64(kb, j), "")), 1);
      kb_endif(kb, &f);
    }
  }
}

/* The q rows of CTA cta (i32): RMSNorm without weight, RoPE, bf16.  A
 * lane's vpt values come in two pieces of vpt/2, q_dim/2 apart, so each
 * load and store instruction of a warp covers whole contiguous sectors. */
static void q_rows(dsv4_kb *kb, const dsv4_kernel *k, LLVMValueRef cta)
{
  LLVMBuilderRef b = kb->b;
  int vpt = k->tile.values_per_thread, D = k->q_dim, lanes = D / vpt, P = dsv4_pow2ceil(lanes);
  int parts = (vpt % 2 == 0 && (D / 2) % (vpt / 2) == 0 && k->rope_first % (vpt / 2) == 0) ? 2 : 1;
  int w = vpt / parts, span = D / parts;
  int rows_per_cta = dsv4_gen_threads(kb, k) / P;
  LLVMValueRef tid = kb->t->thread_id(kb);
  LLVMValueRef lane = LLVMBuildURem(b, tid, kb_i32(kb, P), "lane");
  LLVMValueRef r = LLVMBuildAdd(b, LLVMBuildMul(b, kb_zext64(kb, cta), kb_i64(kb, rows_per_cta), ""),
                                kb_zext64(kb, LLVMBuildUDiv(b, tid, kb_i32(kb, P), "")), "qrow");
  LLVMValueRef hp = kb_sext64(kb, kb_arg(kb, ARG(padded_heads)));
  LLVMValueRef nrows = LLVMBuildMul(b, kb_sext64(kb, kb_arg(kb, ARG(n_tokens))), hp, "");
  LLVMValueRef in = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntULT, lane, kb_i32(kb, lanes), ""),
                                 LLVMBuildICmp(b, LLVMIntSLT, r, nrows, ""), "in");
  LLVMValueRef r0 = LLVMBuildSelect(b, in, r, kb_i64(kb, 0), "");
  LLVMValueRef n = LLVMBuildUDiv(b, r0, hp, "n"), h = LLVMBuildURem(b, r0, hp, "h");
  LLVMValueRef load =
      LLVMBuildAnd(b, in, LLVMBuildICmp(b, LLVMIntSLT, h, kb_sext64(kb, kb_arg(kb, ARG(heads))), ""), "");
  LLVMValueRef src =
      LLVMBuildMul(b, LLVMBuildAdd(b, LLVMBuildMul(b, n, kb_sext64(kb, kb_arg(kb, ARG(heads))), ""), h, ""),
                   kb_i64(kb, (long long)D * 2), "");
  LLVMValueRef x[MAXV], hb[MAXV], v0[2];
  int align = dsv4_gcd(16, dsv4_gcd(D * 2, w * 2));
  if (parts == 2)
    align = dsv4_gcd(align, span * 2);
  for (int p = 0; p < parts; p++) {
    v0[p] = LLVMBuildAdd(b, kb_i32(kb, p * span), LLVMBuildMul(b, lane, kb_i32(kb, w), ""), "v0");
    load_bf16_row(kb, load, ARG(q), LLVMBuildAdd(b, src, LLVMBuildMul(b, kb_zext64(kb, v0[p]), kb_i64(kb, 2), ""), ""),
                  w, align, x + p * w);
  }
  LLVMValueRef ss = LLVMConstReal(kb->f32, 0.0);
  for (int j = 0; j < vpt; j++)
    ss = LLVMBuildFAdd(b, ss, LLVMBuildFMul(b, x[j], x[j], ""), "");
  ss = kb_lane_reduce(kb, ss, P, KB_REDUCE_ADD, dsv4_gen_threads(kb, k));
  LLVMValueRef ms = LLVMBuildFAdd(b, LLVMBuildFDiv(b, ss, LLVMConstReal(kb->f32, D), ""), kb_arg(kb, ARG(eps)), "");
  LLVMTypeRef ft = kb->f32;
  LLVMValueRef rs = LLVMBuildFDiv(b, LLVMConstReal(kb->f32, 1.0),
                                  kb_call(kb, "llvm.sqrt.f32", kb->f32, &ft, &ms, 1, LLVMCCallConv), "");
  for (int j = 0; j < vpt; j++)
    x[j] = LLVMBuildFMul(b, x[j], rs, "");
  if (k->rope_dims) {
    LLVMValueRef pos = kb_load_if(kb, load, kb->i64, kb_arg(kb, ARG(positions)), LLVMBuildMul(b, n, kb_i64(kb, 8), ""),
                                  8, kb_i64(kb, 0));
    LLVMValueRef ok = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntSGE, pos, kb_i64(kb, 0), ""),
                                   LLVMBuildICmp(b, LLVMIntSLT, pos, kb_sext64(kb, kb_arg(kb, ARG(max_pos))), ""), "");
    for (int p = 0; p < parts; p++)
      rope(kb, k, x + p * w, w, v0[p], pos, LLVMBuildAnd(b, load, ok, ""));
  }
  to_bf16(kb, x, vpt, hb);
  kb_if_t f = kb_if(kb, in, "store");
  LLVMValueRef dst = LLVMBuildMul(b, r0, kb_i64(kb, (long long)D * 2), "");
  for (int p = 0; p < parts; p++)
    store_i16(kb, hb + p * w, w,
              kb_byte_ptr(kb, kb_arg(kb, ARG(q_out)),
                          LLVMBuildAdd(b, dst, LLVMBuildMul(b, kb_zext64(kb, v0[p]), kb_i64(kb, 2), ""), "")),
              align);
  kb_endif(kb, &f);
}

int dsv4_gen_kv_insert(dsv4_kb *kb, const dsv4_kernel *k, dsv4_diags *d)
{
  (void)d;
  LLVMBuilderRef b = kb->b;
  LLVMValueRef cta = kb->t->block_id(kb, 0);
  if (!k->q_dim) {
    kv_rows(kb, k, cta);
    return 0;
  }
  /* the branch is uniform per CTA, so each side may use barriers */
  kb_if_t f = kb_if(kb, LLVMBuildICmp(b, LLVMIntULT, cta, kb_arg(kb, ARG(kv_ctas)), ""), "kv");
  kv_rows(kb, k, cta);
  kb_else(kb, &f);
  q_rows(kb, k, LLVMBuildSub(b, cta, kb_arg(kb, ARG(kv_ctas)), ""));
  kb_endif(kb, &f);
  return 0;
}
