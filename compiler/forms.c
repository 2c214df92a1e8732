/* forms.c -- each op's choose_form: the one place a kernel's form is
 * decided, once per (kernel, target), by the spec checker.
 *
 * A form is decided from three things only: what the spec asked
 * (tile.matrix, tile.pair, ...), the kernel's shape, and the target's row
 * in its capability table (targets/caps.c).  The result is the launch
 * record (dsv4_abi.h): form, threads, dynamic shared memory, cluster,
 * grid rule and the companion kernel, by form_rules.h's dsv4_form_launch.
 * The checker stores it in the plan (dsv4_kernel.launch[t]); the
 * generators build the form it names (and check that their target hooks
 * can: an internal error otherwise); the bundle carries it; the runtime
 * holds it to the same dsv4_form_launch when it opens a bundle, checks it
 * against the device and sizes grids by its rule.  No LLVM and no Lua here: the front end links it.
 *
 * The rows of `ops` are the ops' descriptors on this layer: name, whether
 * the op reads a cache, and choose_form.  The argument list of each op is
 * the X-macro in dsv4_abi.h (one definition, used by the generators'
 * indices and the runtime's marshalling); the spec rules of each op are in
 * spec/kernel.c (they need Lua); the generators are gen.c's table (they
 * need LLVM).  Each layer has one table indexed by op, so adding an op adds
 * one row to each.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "plan.h"
#include "caps.h"

/* What the target's table says of the arch (plan.h's questions, answered
 * by targets/caps.c). */
typedef struct {
  int max_threads, warp, max_shared;
  int bf16_mma, e4m3_mma, wgmma;
} arch_caps;

typedef struct {
  const dsv4_kernel *k;
  dsv4_target_kind t;
  const arch_caps *caps;
  dsv4_launch *out;
  const char **field;
  char *why;
  int why_len;
} choice;

/* Refuse: the spec field to blame and why. */
static int refuse(choice *c, const char *field, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->why, (size_t)c->why_len, fmt, ap);
  va_end(ap);
  *c->field = field;
  return 1;
}

/* The launch record of the form chosen: form_rules.h's dsv4_form_launch,
 * the rule the runtime's bundle reader holds the record to. */
static int record(choice *c, int form)
{
  const dsv4_kernel *k = c->k;
  if (dsv4_form_launch(k->op, form, &k->layout, k->tile.values_per_thread, k->tile.tokens_per_cta,
                       k->tile.tokens_per_thread, k->heads, k->v_dim, c->out))
    return refuse(c, "tile", "does not map onto the %s form (internal error)", dsv4_form_name(form));
  return 0;
}

static int dequant_gather_form(choice *c)
{
  return record(c, DSV4_FORM_PORTABLE);
}

static int paged_gather_form(choice *c)
{
  return record(c, DSV4_FORM_PORTABLE);
}

static int kv_insert_form(choice *c)
{
  return record(c, DSV4_FORM_PORTABLE);
}

static int topk_form(choice *c)
{
  return record(c, DSV4_FORM_PORTABLE);
}

/* Whether the warpgroup form (alone or, form PAIR, in CTA pairs) maps
 * kernel k's tile onto its producer warps: a row's lanes (dim /
 * values_per_thread threads) divide the producers, whose rows a pass then
 * divide the tile (half a tile in pairs), at most 32 16-dim k-steps, and in
 * pairs 16-byte pieces (values_per_thread / interleave = 8), which the bulk
 * copies to the peer move.  The generator checks the same (warpgroup.c). */
static int decode_wg_maps(const dsv4_kernel *k, int form)
{
  int lanes = k->layout.dim / k->tile.values_per_thread, np = 32 * dsv4_decode_wg_producers(form);
  int tile = DSV4_DECODE_TILE / (form == DSV4_FORM_WARPGROUP_PAIR ? 2 : 1);
  return lanes > 0 && np % lanes == 0 && tile % (np / lanes) == 0 && k->layout.dim / 16 <= 32 &&
         (form != DSV4_FORM_WARPGROUP_PAIR || k->tile.values_per_thread / k->tile.interleave == 8);
}

/* sparse_decode: portable without tile.matrix; with it the warpgroup form
 * (in CTA pairs with tile.pair) where the arch has wgmma and the shape maps
 * and fits its shared memory, else the warp form on bf16 mma.sync.  The
 * matrix forms come with the split-KV combine kernel. */
static int sparse_decode_form(choice *c)
{
  const dsv4_kernel *k = c->k;
  const char *arch = c->k->target[c->t].arch, *tname = dsv4_target_name(c->t);
  if (!k->tile.matrix)
    return record(c, DSV4_FORM_PORTABLE);
  if (!c->caps->bf16_mma)
    return refuse(c, "tile.matrix",
                  "= true: target '%s' (%s) has no bf16 warp matrix instructions in dsv4c; give this kernel only targets that do (ptx)",
                  tname, arch);
  int form = DSV4_FORM_WARP;
  if (c->caps->wgmma && dsv4_decode_wg_shape_ok(k->layout.dim, k->v_dim, k->tile.tokens_per_cta) &&
      dsv4_decode_wg_shared_bytes(k->layout.dim) <= c->caps->max_shared &&
      decode_wg_maps(k, DSV4_FORM_WARPGROUP))
    form = k->tile.pair ? DSV4_FORM_WARPGROUP_PAIR : DSV4_FORM_WARPGROUP;
  if (form == DSV4_FORM_WARPGROUP_PAIR && !decode_wg_maps(k, form))
    return refuse(c, "tile", "sets pair = true, whose CTA pairs move 16-byte pieces: values_per_thread / interleave "
                  "must be 8, and a row's %d lanes must divide the %d producer threads", k->layout.dim /
                  k->tile.values_per_thread, 32 * dsv4_decode_wg_producers(form));
  if (k->tile.longest_first && form != DSV4_FORM_WARPGROUP_PAIR)
    return refuse(c, "tile", "sets longest_first = true, which needs CTA pairs (tile.pair in the warpgroup form: "
                  "alone, a ranked token held in a register made the producers spill)");
  int wg = form != DSV4_FORM_WARP;
  const char *wg_only = k->tile.prefetch && !wg ? "prefetch" : k->tile.pair && !wg ? "pair" : NULL;
  if (wg_only)
    return refuse(c, "tile",
                  "sets %s = true, which needs the warpgroup form (tile.matrix, 64 heads a CTA, 512 dims with V = K, and "
                  "only targets with wgmma: ptx sm_90a)",
                  wg_only);
  int shared = dsv4_decode_shared_bytes(&k->layout, k->tile.tokens_per_cta, form);
  if (shared > c->caps->max_shared)
    return refuse(c, "tile.heads_per_cta", "= %d needs %d bytes of shared memory, more than target '%s' %s allows (%d)",
                  k->tile.tokens_per_cta, shared, tname, arch, c->caps->max_shared);
  return record(c, form); /* (its shared_bytes: the `shared` just checked) */
}

/* paged_mqa_logits without tile.matrix keeps the portable geometry (a CTA
 * of tokens_per_cta positions of one row), on e4m3 mma.sync rows where the
 * arch has them and the shape maps (DSV4_FORM_ROW_WARP). */
static int logits_row_warp_ok(const choice *c)
{
  const dsv4_kernel *k = c->k;
  const dsv4_layout *L = &k->layout;
  int threads = dsv4_op_threads(k->op, L->dim, k->tile.values_per_thread, k->tile.tokens_per_cta,
                                k->tile.tokens_per_thread, k->heads, DSV4_FORM_PORTABLE);
  int warps = threads / 32;
  return c->caps->e4m3_mma && c->caps->warp == 32 && threads % 32 == 0 && warps > 0 &&
         k->tile.tokens_per_cta / warps <= 64 && k->tile.tokens_per_cta % (warps * 8) == 0 &&
         k->heads * (L->dim + 16) <= 40960 && k->heads % 16 == 0 && k->heads <= 128 && L->dim % 32 == 0 &&
         L->dim <= 256 && L->row_bytes % 4 == 0 && L->seg[0].offset % 4 == 0;
}

/* With tile.matrix: the warpgroup form where the arch has wgmma and the
 * dim is whole swizzle atoms, else the warp form; both keep their arrays
 * in static shared memory. */
static int logits_form(choice *c)
{
  const dsv4_kernel *k = c->k;
  const char *arch = c->k->target[c->t].arch, *tname = dsv4_target_name(c->t);
  if (!k->tile.matrix)
    return record(c, logits_row_warp_ok(c) ? DSV4_FORM_ROW_WARP : DSV4_FORM_PORTABLE);
  if (!c->caps->e4m3_mma)
    return refuse(c, "tile.matrix",
                  "= true: target '%s' (%s) has no e4m3 warp matrix instructions in dsv4c; give this kernel only targets "
                  "that do (ptx sm_89 and later)",
                  tname, arch);
  int wg = c->caps->wgmma && dsv4_logits_wg_shape_ok(k->layout.dim);
  int need = wg ? dsv4_logits_wg_shared_bytes(k->layout.dim, k->heads)
                : dsv4_logits_warp_shared_bytes(k->layout.dim, k->heads);
  if (need > DSV4_LOGITS_STATIC_MAX)
    return refuse(c, "tile.matrix",
                  "= true: %d heads x %d dims need %d bytes of shared memory in the %s form on %s, more than the %d a "
                  "kernel holds statically; take fewer heads or a narrower layout",
                  k->heads, k->layout.dim, need, wg ? "warpgroup" : "warp", arch, DSV4_LOGITS_STATIC_MAX);
  return record(c, wg ? DSV4_FORM_WARPGROUP : DSV4_FORM_WARP);
}

/* The ops' descriptors on this layer (see the top of the file). */
static const struct {
  int (*choose_form)(choice *c);
} ops[DSV4_OP_COUNT] = {
    [DSV4_OP_DEQUANT_GATHER] = {dequant_gather_form},
    [DSV4_OP_PAGED_GATHER] = {paged_gather_form},
    [DSV4_OP_KV_INSERT] = {kv_insert_form},
    [DSV4_OP_SPARSE_DECODE] = {sparse_decode_form},
    [DSV4_OP_PAGED_MQA_LOGITS] = {logits_form},
    [DSV4_OP_TOPK] = {topk_form},
};

int dsv4_choose_form(const dsv4_kernel *k, dsv4_target_kind t, dsv4_launch *out, const char **field, char *why,
                     int why_len)
{
  const char *arch = k->target[t].arch;
  arch_caps caps = {dsv4_target_max_threads(t),     dsv4_target_warp(t, arch),         dsv4_target_max_shared(t, arch),
                    dsv4_target_has_bf16_mma(t, arch), dsv4_target_has_e4m3_mma(t, arch), dsv4_target_has_wgmma(t, arch)};
  choice c = {k, t, &caps, out, field, why, why_len};
  memset(out, 0, sizeof *out);
  if ((unsigned)k->op >= DSV4_OP_COUNT || !ops[k->op].choose_form)
    return refuse(&c, "op", "has no form rule (internal error)");
  if (!dsv4_target_arch_ok(t, arch))
    return refuse(&c, "targets", "names arch '%s', which target '%s' does not emit", arch, dsv4_target_name(t));
  if (ops[k->op].choose_form(&c))
    return 1;
  /* every form against the arch's limits: the record must launch there */
  if ((int)out->threads < 1 || (int)out->threads > c.caps->max_threads || out->threads % (uint32_t)c.caps->warp)
    return refuse(&c, "tile", "gives %u threads a CTA in the %s form, which target '%s' %s cannot launch (at most %d, "
                  "a multiple of %d)", out->threads, dsv4_form_name((int)out->form), dsv4_target_name(t),
                  k->target[t].arch, c.caps->max_threads, c.caps->warp);
  if ((int)out->shared_bytes > c.caps->max_shared)
    return refuse(&c, "tile", "needs %u bytes of dynamic shared memory in the %s form, more than target '%s' %s "
                  "gives (%d)", out->shared_bytes, dsv4_form_name((int)out->form), dsv4_target_name(t),
                  k->target[t].arch, c.caps->max_shared);
  return 0;
}

const char *dsv4_form_name(int form)
{
  static const char *const names[DSV4_FORM_COUNT] = {
      [DSV4_FORM_PORTABLE] = "portable",
      [DSV4_FORM_WARP] = "warp-matrix",
      [DSV4_FORM_WARPGROUP] = "warpgroup",
      [DSV4_FORM_WARPGROUP_PAIR] = "warpgroup CTA-pair",
      [DSV4_FORM_ROW_WARP] = "row warp-matrix",
  };
  return form >= 0 && form < DSV4_FORM_COUNT ? names[form] : "?";
}
