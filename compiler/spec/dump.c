/* dump.c -- the plan in a stable text form (--emit plan). */
#include "internal.h"
#include "text.h" /* dsv4_text: the growing buffer the lockfile writer uses too */
#include "ops/ops.h"

static void dump_layout(dsv4_text *b, const dsv4_layout *l)
{
  static const char *place[] = {"none", "block_tail", "inline"};
  dsv4_text_printf(b, "layout %s: dim %d, row_bytes %d, scales %s", l->name, l->dim, l->row_bytes,
                   place[l->scale_place]);
  if (l->scale_place == DSV4_SCALES_BLOCK_TAIL)
    dsv4_text_printf(b, " (row_bytes %d)", l->scale_row_bytes);
  dsv4_text_printf(b, ", align %d", l->align);
  if (l->block_tokens)
    dsv4_text_printf(b, ", block %d tokens in %d bytes (%lld used)", l->block_tokens, l->block_stride,
              (long long)dsv4_layout_min_block_bytes(l, l->block_tokens));
  dsv4_text_printf(b, "\n");
  for (int i = 0; i < l->nseg; i++) {
    const dsv4_segment *s = &l->seg[i];
    dsv4_text_printf(b, "  segment %d: dims [%d, %d) %s at byte %d", i + 1, s->d0, s->d1, dsv4_dtype_name(s->type),
                     s->offset);
    if (s->scale_tensor)
      dsv4_text_printf(b, ", scale %s per tensor (launch argument)", dsv4_dtype_name(s->scale_type));
    else if (s->scale_type)
      dsv4_text_printf(b, ", scale %s per %d values at byte %d", dsv4_dtype_name(s->scale_type), s->scale_group,
                s->scale_offset);
    dsv4_text_printf(b, "\n");
  }
}

/* A target's line: the arch and choose_form's launch record; for the
 * decode's warpgroup forms, the roles. */
static void dump_launch(dsv4_text *b, const dsv4_kernel *k, dsv4_target_kind t)
{
  const dsv4_launch *ln = &k->launch[t];
  static const char *const grids[DSV4_GRID_COUNT] = {
      [DSV4_GRID_TOKENS] = "ceil(n / tokens_per_cta)",
      [DSV4_GRID_TOKENS_REQUESTS] = "ceil((M - offset) / tokens_per_cta) x requests",
      [DSV4_GRID_INSERT] = "kv CTAs + q-branch CTAs",
      [DSV4_GRID_HEADS_TOKENS] = "ceil(heads / heads_per_cta) x tokens x splits",
      [DSV4_GRID_POSITIONS_ROWS] = "ceil(row_len / tokens_per_cta) x rows",
      [DSV4_GRID_POSITIONS_BATCH] = "ceil(row_len / tokens_per_cta) x batch",
      [DSV4_GRID_ROWS] = "rows",
  };
  char sg[64] = "";
  if (k->target[t].subgroups)
    snprintf(sg, sizeof sg, " subgroups of %d%s", k->target[t].subgroup_size,
             k->target[t].emulate_subgroups ? " (emulated in the SPIR 1.2 fallback)" : "");
  dsv4_text_printf(
      b, "  target %s arch %s%s: %s form, %u threads, %u bytes dynamic shared memory, cluster %u, grid %s%s",
      dsv4_target_name(t), k->target[t].arch, sg, dsv4_form_name((int)ln->form),
      ln->threads, ln->shared_bytes, ln->cluster, ln->grid < DSV4_GRID_COUNT && grids[ln->grid] ? grids[ln->grid] : "?",
      ln->second != DSV4_SECOND_NONE ? "" : "\n");
  if (ln->second == DSV4_SECOND_COMBINE)
    dsv4_text_printf(b, "; then %s_combine (%u threads) over the splits\n", k->name, ln->second_threads);
  if (ln->second == DSV4_SECOND_MERGE || ln->second == DSV4_SECOND_LOGITS_TOPK_MERGE)
    dsv4_text_printf(b, "; then %s_merge (%u threads, grid rows) where a row spans chunks\n", k->name,
                     ln->second_threads);
  if (k->op == DSV4_OP_SPARSE_DECODE && (ln->form == DSV4_FORM_WARPGROUP || ln->form == DSV4_FORM_WARPGROUP_PAIR))
    dsv4_text_printf(
        b,
        "    roles: %d producer warps (%d registers a thread), a lead warpgroup (%d: q K^T, softmax, "
        "P V dims [0, %d)), a follower warpgroup (%d: P V dims [%d, %d))%s\n",
        dsv4_decode_wg_producers((int)ln->form), dsv4_decode_wg_producer_regs((int)ln->form), DSV4_DECODE_WG_LEAD_REGS,
        DSV4_DECODE_WG_LEAD_DIMS, DSV4_DECODE_WG_FOLLOW_REGS, DSV4_DECODE_WG_LEAD_DIMS, k->v_dim,
        ln->form == DSV4_FORM_WARPGROUP_PAIR ? "; each CTA dequantizes half a tile and copies it to the other" : "");
}

/* The tile line in the spec's own field names, in the order of each
 * field's `dump` place in its op's table (compiler/ops/); fields without
 * one (tile.p, tile.partials) have lines of their own below. */
static void dump_tile(dsv4_text *b, const dsv4_kernel *k)
{
  const dsv4_tile_field *tile = dsv4_op_rules_of(k->op)->tile;
  for (int place = 1;; place++) {
    const dsv4_tile_field *f = tile;
    while (f->name && f->dump != place)
      f++;
    if (!f->name)
      break;
    dsv4_text_printf(b, " %s %d", f->name, dsv4_tile_value(&k->tile, f));
  }
  dsv4_text_printf(b, "\n");
}

char *dsv4_plan_dump(const dsv4_plan *p)
{
  dsv4_text b = {0};
  dsv4_text_printf(&b, "spec %s: %d layout(s), %d kernel(s)\n", p->file, p->nlayouts, p->nkernels);
  for (int i = 0; i < p->nlayouts; i++)
    dump_layout(&b, &p->layouts[i]);
  for (int i = 0; i < p->nkernels; i++) {
    const dsv4_kernel *k = &p->kernels[i];
    dsv4_text_printf(&b, "kernel %s (%s:%d): op %s, layout %s, tile", k->name, k->file, k->line, dsv4_op_name(k->op),
                     k->layout.name[0] ? k->layout.name : "(none)");
    dump_tile(&b, k);
    if (k->rope_dims)
      dsv4_text_printf(&b, "  rope dims [%d, %d)\n", k->rope_first, k->rope_first + k->rope_dims);
    if (k->q_dim)
      dsv4_text_printf(&b, "  q branch: head size %d\n", k->q_dim);
    if (k->op == DSV4_OP_KV_INSERT)
      dsv4_text_printf(&b, "  quant: floor %s at 1e-4\n", k->quant_floor ? "amax/448" : "amax");
    if (k->op == DSV4_OP_TOPK)
      dsv4_text_printf(&b, "  k %d\n", k->topk);
    if (k->op == DSV4_OP_PAGED_MQA_LOGITS_TOPK)
      dsv4_text_printf(&b, "  heads %d, k %d: a CTA's chunk of %d positions held on chip\n", k->heads, k->topk,
                       k->tile.tokens_per_cta);
    if (k->op == DSV4_OP_SPARSE_DECODE)
      dsv4_text_printf(&b, "  v_dim %d, %d heads per CTA\n", k->v_dim, k->tile.tokens_per_cta);
    if (k->op == DSV4_OP_SPARSE_DECODE && k->tile.matrix)
      dsv4_text_printf(&b, "  P for the P V product: %s\n",
                k->tile.p_format == DSV4_P_BF16 ? "bf16 (rounded once; row sums in fp32)" : "bf16x2 (bf16 hi + lo)");
    if (k->op == DSV4_OP_SPARSE_DECODE && k->tile.matrix)
      dsv4_text_printf(&b, "  split-KV partials: %s\n",
                k->tile.partials == DSV4_PARTIALS_BF16 ? "bf16 (each split's O rounded once more; half the bytes)"
                                                       : "f32");
    if (k->op == DSV4_OP_SPARSE_DECODE && k->tile.prefetch)
      dsv4_text_printf(&b, "  each tile's producers prefetch the next tile's rows into the L2\n");
    if (k->op == DSV4_OP_SPARSE_DECODE && k->tile.longest_first)
      dsv4_text_printf(&b, "  tokens taken longest first (more CTAs than processors: ranked by tiles in each CTA)\n");
    for (int t = 0; t < DSV4_TARGET_COUNT; t++)
      if (k->target[t].enabled)
        dump_launch(&b, k, (dsv4_target_kind)t);
  }
  /* each sweep: its fields, then every variant, expanded or rejected with the reason */
  for (int i = 0; i < p->nsweeps; i++) {
    const dsv4_sweep *sw = &p->sweeps[i];
    int expanded = 0;
    for (int v = sw->first; v < sw->first + sw->nvariants; v++)
      expanded += p->variants[v].kernel >= 0;
    dsv4_text_printf(&b,
                     "sweep %s (%s:%d): op %s, %d field(s), %d constraint(s); %d variants: %d expanded, %d rejected\n",
                     sw->kernel, sw->file, sw->line, dsv4_op_name(sw->op), sw->nparams, sw->nconstraints, sw->nvariants,
                     expanded, sw->nvariants - expanded);
    for (int f = 0; f < sw->nparams; f++) {
      dsv4_text_printf(&b, "  field %s (tag %s):", sw->param[f].field, sw->param[f].tag);
      for (int x = 0; x < sw->param[f].nvalues; x++)
        dsv4_text_printf(&b, " %s", sw->param[f].value[x]);
      dsv4_text_printf(&b, "\n");
    }
    for (int v = sw->first; v < sw->first + sw->nvariants; v++) {
      const dsv4_variant *var = &p->variants[v];
      if (var->kernel >= 0)
        dsv4_text_printf(&b, "  expanded %s\n", var->name);
      else
        dsv4_text_printf(&b, "  rejected %s: %s\n", var->name, var->reason);
    }
  }
  return b.s;
}
