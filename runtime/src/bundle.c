/* bundle.c -- reading a bundle (dsv4_abi.h's format) and listing it. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../compiler/form_rules.h" /* dsv4_form_launch: the rule the compiler writes launch records by */
#include "bucket.h"
#include "choice.h" /* rt_install_bundle_choices */
#include "code_check.h"
#include "hsaco_meta.h"
#include "kernel_geometry.h" /* dsv4_pow2ceil */
#include "layout_check.h"
#include "rt.h"

_Static_assert(sizeof(dsv4_bundle_entry) == 624, "bundle entry layout differs from the writer's");
_Static_assert(sizeof(dsv4_bundle_choice) == 160, "choice record layout differs from the writer's");
_Static_assert(DSV4_CHOICE_DIMS == DSV4_SHAPE_DIMS, "a choice record's bucket is a shape bucket");

/* A bundle's checks hold every field to the format (dsv4_abi.h) before
 * anything computes with it: strings terminated, enumerations known,
 * integers inside the ranges the compiler can emit, a launch record whose
 * form, grid rule, cluster and companion kernel go together and whose
 * threads, shared memory and second kernel's threads are what the form's
 * rule gives the entry's tile (check_rule: the compiler's own
 * dsv4_form_launch; against the device they are checked when a kernel is
 * chosen, cuda.c / opencl.c), the layout addressable (layout_check.c), code inside the
 * file past the entry table and the choice records, the code a driver is
 * handed well formed (code_check.c: SPIR-V and LLVM bitcode), each choice record's
 * fields (check_choice), and every byte of the file accounted for.  A
 * refused bundle gets DSV4RT_ERR_BUNDLE_FORMAT and a message naming the
 * entry or choice record and the field. */

#define RT_WHY 512 /* a field check's message, before the entry's prefix */
/* The largest bundle dsv4rt_bundle_open reads (a bundle of 256 entries is
 * a few MB today; past this it is refused, not read). */
#define RT_MAX_BUNDLE_BYTES ((uint64_t)1 << 30)

static uint32_t rd32(const uint8_t *p)
{
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

static uint64_t rd64(const uint8_t *p)
{
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

/* 1 if the n bytes at p are all zero. */
static int zeros(const uint8_t *p, uint64_t n)
{
  for (uint64_t k = 0; k < n; k++)
    if (p[k])
      return 0;
  return 1;
}

/* Record a field check's message in why[RT_WHY]; returns 1 (refused). */
static int bad(char *why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(char *why, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, RT_WHY, fmt, ap);
  va_end(ap);
  return 1;
}

/* The launch record: a form of the op with its grid rule, a cluster only
 * for CTA pairs, the companion kernel the form's row names, and
 * threads and shared memory inside what any device could take. */
static int check_launch(const dsv4_bundle_entry *e, char *why)
{
  const dsv4_launch *ln = &e->launch;
  dsv4_form_row row = dsv4_form_of(e->op, ln->form); /* form_rules.h: the op -> form -> grid table */
  uint32_t grid = row.grid;
  if (!grid)
    return bad(why, "launch form %u is not a form of op %s", ln->form, rt_op_name(e->op));
  if (ln->grid != grid)
    return bad(why, "launch grid rule %u is not the one of op %s's form %u (%u)", ln->grid, rt_op_name(e->op), ln->form,
               grid);
  if (ln->threads < 1 || ln->threads > DSV4_ENTRY_MAX_THREADS)
    return bad(why, "launch threads %u is outside [1, %d]", ln->threads, DSV4_ENTRY_MAX_THREADS);
  if (ln->shared_bytes > DSV4_ENTRY_MAX_SHARED)
    return bad(why, "launch shared_bytes %u is outside [0, %d]", ln->shared_bytes, DSV4_ENTRY_MAX_SHARED);
  if (ln->cluster != (ln->form == DSV4_FORM_WARPGROUP_PAIR ? 2u : 1u))
    return bad(why, "launch cluster %u does not go with form %u (2 for CTA pairs, else 1)", ln->cluster, ln->form);
  int second = dsv4_second_suffix(row.second) != NULL;
  if (ln->second != row.second)
    return bad(why, "launch second kernel %u does not go with op %s's form %u", ln->second, rt_op_name(e->op),
               ln->form);
  if (second ? ln->second_threads < 32 || ln->second_threads > DSV4_ENTRY_MAX_THREADS || ln->second_threads % 32
             : ln->second_threads != 0)
    return bad(why, "launch second_threads %u is not %s", ln->second_threads,
               second ? "a multiple of 32 in [32, 1024]" : "0 without a second kernel");
  if (ln->reserved)
    return bad(why, "launch reserved word is %u, not 0", ln->reserved);
  return 0;
}

/* The arch string, op, target and argument signature. */
static int check_kind(const dsv4_bundle_entry *e, char *why)
{
  if (!memchr(e->arch, 0, sizeof e->arch))
    return bad(why, "arch is not a NUL-terminated string");
  if (!e->arch[0])
    return bad(why, "arch is empty");
  uint8_t kinds[DSV4_MAX_ARGS];
  int n = dsv4_op_args((int)e->op, kinds, NULL); /* what this runtime passes; -1 for none or unknown */
  if (n < 0)
    return bad(why, "unknown op %u", e->op);
  if (e->target >= DSV4_BUNDLE_TARGETS)
    return bad(why, "unknown target %u", e->target);
  if (e->nargs != (uint32_t)n || memcmp(e->args, kinds, (size_t)n) || !zeros(e->args + n, sizeof e->args - (size_t)n))
    return bad(why, "argument signature differs from the one this runtime passes");
  return check_launch(e, why);
}

/* Entry flags: known bits; the waits only on PTX sm_90 on matrix
 * sparse_decode entries (early launches: griddepcontrol), the emulated
 * sub-groups only on SPIR-V entries with a SPIR 1.2 fallback. */
static int check_flags(const dsv4_bundle_entry *e, char *why)
{
  int sm = 0;
  unsigned waits = e->flags & (DSV4_ENTRY_SECOND_WAITS | DSV4_ENTRY_FIRST_WAITS);
  if ((e->flags & ~DSV4_ENTRY_FLAGS_KNOWN) ||
      (waits && (e->op != DSV4_OP_SPARSE_DECODE || e->launch.form == DSV4_FORM_PORTABLE || e->target != 0 ||
                 sscanf(e->arch, "sm_%d", &sm) != 1 || sm < 90)) ||
      ((e->flags & DSV4_ENTRY_SUBGROUPS_EMULATED) && (e->target != 2 || !e->aux_len)))
    return bad(why, "flags 0x%x do not apply to this entry", e->flags);
  return 0;
}

/* The tile's integers, inside what the compiler emits (before any arithmetic). */
static int check_tile(const dsv4_bundle_entry *e, char *why)
{
  uint32_t tpc_max = e->launch.grid == DSV4_GRID_POSITIONS_BATCH || e->op == DSV4_OP_PAGED_MQA_LOGITS_TOPK
                         ? DSV4_ENTRY_MAX_LOGITS_STEP
                         : DSV4_ENTRY_MAX_TOKENS_PER_CTA;
  if (e->tokens_per_cta < 1 || e->tokens_per_cta > tpc_max)
    return bad(why, "tokens_per_cta %u is outside [1, %u]", e->tokens_per_cta, tpc_max);
  if (e->values_per_thread < 1 || e->values_per_thread > DSV4_ENTRY_MAX_VALUES_PER_THREAD)
    return bad(why, "values_per_thread %u is outside [1, %d]", e->values_per_thread, DSV4_ENTRY_MAX_VALUES_PER_THREAD);
  if (e->tokens_per_thread < 1 || e->tokens_per_thread > DSV4_ENTRY_MAX_TOKENS_PER_THREAD)
    return bad(why, "tokens_per_thread %u is outside [1, %d]", e->tokens_per_thread, DSV4_ENTRY_MAX_TOKENS_PER_THREAD);
  if (e->tokens_per_cta % e->tokens_per_thread)
    return bad(why, "tokens_per_thread %u does not divide tokens_per_cta %u", e->tokens_per_thread, e->tokens_per_cta);
  return 0;
}

/* The fields an op reads (op, or op2 too where not 0): inside their range
 * there, 0 on every other op. */
static int check_op_fields(const dsv4_bundle_entry *e, char *why)
{
  static const struct {
    const char *name;
    size_t at;
    uint32_t op, lo, hi, op2;
  } f[] = {
      {"heads", offsetof(dsv4_bundle_entry, heads), DSV4_OP_PAGED_MQA_LOGITS, 1, DSV4_ENTRY_MAX_HEADS,
       DSV4_OP_PAGED_MQA_LOGITS_TOPK},
      {"topk", offsetof(dsv4_bundle_entry, topk), DSV4_OP_TOPK, 1, DSV4_ENTRY_MAX_TOPK, DSV4_OP_PAGED_MQA_LOGITS_TOPK},
      {"v_dim", offsetof(dsv4_bundle_entry, v_dim), DSV4_OP_SPARSE_DECODE, 1, DSV4_ENTRY_MAX_DIMS, 0},
      {"q_dim", offsetof(dsv4_bundle_entry, q_dim), DSV4_OP_KV_INSERT, 0, DSV4_ENTRY_MAX_DIMS, 0},
      {"rope_first", offsetof(dsv4_bundle_entry, rope_first), DSV4_OP_KV_INSERT, 0, DSV4_ENTRY_MAX_DIMS, 0},
      {"rope_dims", offsetof(dsv4_bundle_entry, rope_dims), DSV4_OP_KV_INSERT, 0, DSV4_ENTRY_MAX_DIMS, 0},
      {"quant_floor", offsetof(dsv4_bundle_entry, quant_floor), DSV4_OP_KV_INSERT, 0, 1, 0},
  };
  for (size_t k = 0; k < sizeof f / sizeof *f; k++) {
    uint32_t v;
    memcpy(&v, (const char *)e + f[k].at, 4);
    int takes = e->op == f[k].op || (f[k].op2 && e->op == f[k].op2);
    if (!takes && v)
      return bad(why, "%s %u is set, but only op %s%s%s has one", f[k].name, v, rt_op_name(f[k].op),
                 f[k].op2 ? " or " : "", f[k].op2 ? rt_op_name(f[k].op2) : "");
    if (takes && (v < f[k].lo || v > f[k].hi))
      return bad(why, "%s %u is outside [%u, %u]", f[k].name, v, f[k].lo, f[k].hi);
  }
  return 0;
}

/* The layout: addressable (layout_check.c) and covering every dim, or,
 * for an op that reads no cache, all zero. */
static int check_entry_layout(const dsv4_bundle_entry *e, char *why)
{
  const dsv4_layout *l = &e->layout;
  if (!dsv4_op_has_layout((int)e->op)) {
    static const dsv4_layout none;
    return memcmp(l, &none, sizeof none)
               ? bad(why, "op %s reads no cache, yet the entry has a layout", rt_op_name(e->op))
               : 0;
  }
  if (dsv4_layout_valid(l, why, RT_WHY))
    return 1;
  int covered = 0; /* segments are disjoint: their widths add up to dim when they cover it */
  for (int i = 0; i < l->nseg; i++)
    covered += l->seg[i].d1 - l->seg[i].d0;
  if (covered != l->dim)
    return bad(why, "layout segments cover %d of the %d dims", covered, l->dim);
  return 0;
}

/* The op's fields against the layout and the launch, on values the
 * checks above bounded. */
static int check_geometry(const dsv4_bundle_entry *e, char *why)
{
  const dsv4_layout *l = &e->layout;
  int dim = dsv4_op_has_layout((int)e->op) ? l->dim : 0;
  if (e->op == DSV4_OP_SPARSE_DECODE && (e->v_dim > (uint32_t)dim || e->v_dim % e->values_per_thread))
    return bad(why, "v_dim %u is not a multiple of values_per_thread %u inside the layout's %d dims", e->v_dim,
               e->values_per_thread, dim);
  if (e->rope_dims % 2 || (!e->rope_dims && e->rope_first) || e->rope_first + e->rope_dims > (uint32_t)dim ||
      (e->q_dim && e->rope_first + e->rope_dims > e->q_dim))
    return bad(why, "rope dims [%u, %u) are not an even range inside the layout's %d dims (and q_dim %u)",
               e->rope_first, e->rope_first + e->rope_dims, dim, e->q_dim);
  if (e->q_dim && (e->q_dim % e->values_per_thread ||
                   e->launch.threads % (uint32_t)dsv4_pow2ceil((int)(e->q_dim / e->values_per_thread))))
    return bad(why, "q_dim %u: its lanes (values_per_thread %u each, padded to a power of two) do not divide the "
               "%u threads", e->q_dim, e->values_per_thread, e->launch.threads);
  return 0;
}

/* The launch record against the rule its form launches by
 * (form_rules.h's dsv4_form_launch, which the compiler wrote it with),
 * from the entry's layout, tile, v_dim and heads (bounded by the checks
 * before): a record in range but not the kernel's (threads 128 -> 64, or
 * tokens_per_cta 4 -> 8 under a kernel built for 4) would launch and give
 * wrong output silently.  A tile field changed together with the record
 * to agree still passes: the tile the code was built with is not in the
 * entry to compare. */
static int check_rule(const dsv4_bundle_entry *e, char *why)
{
  static const struct {
    const char *name;
    size_t at;
  } f[] = {
      {"threads", offsetof(dsv4_launch, threads)},
      {"shared_bytes", offsetof(dsv4_launch, shared_bytes)},
      {"cluster", offsetof(dsv4_launch, cluster)},
      {"grid rule", offsetof(dsv4_launch, grid)},
      {"second kernel", offsetof(dsv4_launch, second)},
      {"second_threads", offsetof(dsv4_launch, second_threads)},
  };
  static const dsv4_layout none;
  const dsv4_layout *l = dsv4_op_has_layout((int)e->op) ? &e->layout : &none;
  dsv4_launch want;
  char tile[160];
  snprintf(tile, sizeof tile, "dim %d, values_per_thread %u, tokens_per_cta %u, tokens_per_thread %u%s", l->dim,
           e->values_per_thread, e->tokens_per_cta, e->tokens_per_thread,
           e->op == DSV4_OP_SPARSE_DECODE                                            ? ", v_dim"
           : e->op == DSV4_OP_PAGED_MQA_LOGITS || e->op == DSV4_OP_PAGED_MQA_LOGITS_TOPK ? ", heads"
                                                                                     : "");
  if (e->op == DSV4_OP_SPARSE_DECODE || e->op == DSV4_OP_PAGED_MQA_LOGITS || e->op == DSV4_OP_PAGED_MQA_LOGITS_TOPK)
    snprintf(tile + strlen(tile), sizeof tile - strlen(tile), " %u",
             e->op == DSV4_OP_SPARSE_DECODE ? e->v_dim : e->heads);
  if (dsv4_form_launch((int)e->op, (int)e->launch.form, l, (int)e->values_per_thread, (int)e->tokens_per_cta,
                       (int)e->tokens_per_thread, (int)e->heads, (int)e->v_dim, &want))
    return bad(why, "launch form %u of op %s does not take this tile (%s)", e->launch.form, rt_op_name(e->op), tile);
  for (size_t k = 0; k < sizeof f / sizeof *f; k++) {
    uint32_t got, rule;
    memcpy(&got, (const char *)&e->launch + f[k].at, 4);
    memcpy(&rule, (const char *)&want + f[k].at, 4);
    if (got != rule)
      return bad(why, "launch %s %u is not the %u that op %s's form %u gives its tile (%s)", f[k].name, got, rule,
                 rt_op_name(e->op), e->launch.form, tile);
  }
  return 0;
}

/* The code and aux ranges: 16-byte aligned, past the entry table, inside
 * the file (compared so that nothing overflows); aux only for spirv. */
static int check_code(const dsv4_bundle_entry *e, uint64_t table_end, uint64_t size, char *why)
{
  if (e->code_off < table_end)
    return bad(why, "code offset %llu lies in the header or entry table or the choice records (which end at %llu)",
               (unsigned long long)e->code_off, (unsigned long long)table_end);
  if (e->code_off % DSV4_BUNDLE_ALIGN)
    return bad(why, "code offset %llu is not %d-byte aligned", (unsigned long long)e->code_off, DSV4_BUNDLE_ALIGN);
  if (e->code_len == 0 || e->code_off > size || e->code_len > size - e->code_off)
    return bad(why, "code [%llu, +%llu) is empty or passes the end of the file (%llu bytes)",
               (unsigned long long)e->code_off, (unsigned long long)e->code_len, (unsigned long long)size);
  if (!e->aux_len)
    return e->aux_off ? bad(why, "aux offset %llu with no aux bytes", (unsigned long long)e->aux_off) : 0;
  if (e->target != 2)
    return bad(why, "aux code (a SPIR fallback) on a target other than spirv");
  if (e->aux_off < table_end || e->aux_off % DSV4_BUNDLE_ALIGN)
    return bad(why, "aux offset %llu lies in the header or entry table or the choice records (which end at %llu) or is "
               "not %d-byte aligned",
               (unsigned long long)e->aux_off, (unsigned long long)table_end, DSV4_BUNDLE_ALIGN);
  if (e->aux_off > size || e->aux_len > size - e->aux_off)
    return bad(why, "aux [%llu, +%llu) passes the end of the file (%llu bytes)", (unsigned long long)e->aux_off,
               (unsigned long long)e->aux_len, (unsigned long long)size);
  return 0;
}

/* The code a backend hands to a driver, held to its format (on ranges
 * check_code put inside the file): a spirv entry's SPIR-V and its SPIR 1.2
 * bitcode (code_check.c); on a HIP context, an amdgcn entry's code
 * object, whose AMDHSA metadata must describe the kernel the entry names
 * with the op's arguments at the offsets the HIP backend writes them to,
 * the record's threads and LDS, and the processor's limits
 * (common/hsaco_meta.h; the backend holds it to that again when it loads,
 * with a matrix form's second kernel).  Elsewhere no driver is ever handed
 * that code, which dsv4c held to the same rules before writing it. */
static int check_driver_code(const dsv4rt_context *ctx, const dsv4_bundle_entry *e, const uint8_t *data, char *why)
{
  char m[RT_WHY - 64];
  if (e->target == 1 && ctx->be && ctx->be->kind == DSV4RT_BACKEND_HIP) {
    dsv4_hsaco_kernel meta; /* (about 5 KB) */
    if (dsv4_hsaco_kernel_meta(data + e->code_off, e->code_len, e->name, &meta, m, sizeof m) ||
        dsv4_hsaco_launch_agrees(&meta, e->arch, e->args, (int)e->nargs, e->launch.threads, e->launch.shared_bytes, m,
                                 sizeof m))
      return bad(why, "code object: %s", m);
    return 0;
  }
  if (e->target != 2)
    return 0;
  if (rt_spirv_check(data + e->code_off, e->code_len, m, sizeof m))
    return bad(why, "code: %s", m);
  if (e->aux_len && rt_bitcode_check(data + e->aux_off, e->aux_len, m, sizeof m))
    return bad(why, "aux (SPIR 1.2): %s", m);
  return 0;
}

/* Every field of entry i (of a table ending at table_end in a file of size bytes). */
static dsv4rt_status check_entry(dsv4rt_context *ctx, const dsv4_bundle_entry *e, int i, uint64_t table_end,
                                 const uint8_t *data, uint64_t size)
{
  if (!memchr(e->name, 0, sizeof e->name))
    return rt_fail(ctx, DSV4RT_ERR_BUNDLE_FORMAT, "bundle entry %d: name is not a NUL-terminated string", i);
  if (!e->name[0])
    return rt_fail(ctx, DSV4RT_ERR_BUNDLE_FORMAT, "bundle entry %d: name is empty", i);
  char why[RT_WHY];
  if (check_kind(e, why) || check_flags(e, why) || check_tile(e, why) || check_op_fields(e, why) ||
      check_entry_layout(e, why) || check_geometry(e, why) || check_rule(e, why) ||
      check_code(e, table_end, size, why) || check_driver_code(ctx, e, data, why))
    return rt_fail(ctx, DSV4RT_ERR_BUNDLE_FORMAT, "bundle entry %d (%s): %s", i, e->name, why);
  return DSV4RT_OK;
}

/* One code or aux range of an entry, for check_blobs. */
typedef struct {
  uint64_t off, len;
  int entry, aux;
} rt_blob;

/* The entries' code and aux ranges (checked inside the file) sorted by offset into v; returns their count. */
static int sorted_blobs(const dsv4rt_bundle *b, rt_blob *v)
{
  int n = 0;
  for (int i = 0; i < b->n; i++) {
    const dsv4_bundle_entry *e = &b->entries[i];
    v[n++] = (rt_blob){e->code_off, e->code_len, i, 0};
    if (e->aux_len)
      v[n++] = (rt_blob){e->aux_off, e->aux_len, i, 1};
  }
  for (int k = 1; k < n; k++) /* insertion sort: a few hundred at most */
    for (int j = k; j > 0 && v[j - 1].off > v[j].off; j--) {
      rt_blob t = v[j];
      v[j] = v[j - 1], v[j - 1] = t;
    }
  return n;
}

/* Every byte past the entry table belongs to one entry's code or aux, bar
 * zero padding of less than DSV4_BUNDLE_ALIGN bytes before each and at the
 * end, as the writer lays them out: a lowered entry count (which leaves
 * entries nobody reads) or blobs shared or overlapping are refused. */
static dsv4rt_status check_blobs(dsv4rt_context *ctx, const dsv4rt_bundle *b, uint64_t table_end)
{
  rt_blob v[2 * RT_MAX_ENTRIES];
  int n = sorted_blobs(b, v);
  uint64_t at = table_end;
  for (int k = 0; k <= n; k++) {
    uint64_t next = k < n ? v[k].off : b->size;
    if (k > 0 && next < at) {
      const rt_blob *p = &v[k - 1], *q = &v[k];
      return rt_fail(ctx, DSV4RT_ERR_BUNDLE_FORMAT,
                     "bundle entry %d (%s): %s [%llu, +%llu) overlaps entry %d's %s [%llu, +%llu)", q->entry,
                     b->entries[q->entry].name, q->aux ? "aux" : "code", (unsigned long long)q->off,
                     (unsigned long long)q->len, p->entry, p->aux ? "aux" : "code", (unsigned long long)p->off,
                     (unsigned long long)p->len);
    }
    if (next - at >= DSV4_BUNDLE_ALIGN || !zeros(b->data + at, next - at))
      return rt_fail(ctx, DSV4RT_ERR_BUNDLE_FORMAT,
                     "bundle bytes [%llu, %llu) belong to no entry (was the entry count changed?)",
                     (unsigned long long)at, (unsigned long long)next);
    if (k < n)
      at = v[k].off + v[k].len;
  }
  return DSV4RT_OK;
}

/* The magic and version (the first bytes of every version's header). */
static dsv4rt_status check_magic_version(dsv4rt_context *ctx, const uint8_t *p, size_t size)
{
  if (!p || size < DSV4_BUNDLE_HEADER_BYTES || memcmp(p, DSV4_BUNDLE_MAGIC, 8))
    return rt_fail(ctx, DSV4RT_ERR_BUNDLE_FORMAT, "not a dsv4c bundle (bad magic or shorter than its %d-byte header)",
                   DSV4_BUNDLE_HEADER_BYTES);
  uint32_t version = rd32(p + DSV4_BUNDLE_AT_VERSION);
  if (version != DSV4_BUNDLE_VERSION)
    return rt_fail(ctx, DSV4RT_ERR_BUNDLE_VERSION, "bundle version %u; this runtime reads version %u: %s", version,
                   DSV4_BUNDLE_VERSION,
                   version < DSV4_BUNDLE_VERSION ? "compile the spec again with a dsv4c of this release"
                                                 : "it was written by a newer dsv4c; use that release's runtime");
  return DSV4RT_OK;
}

/* The header: magic, version, size, checksum (of every byte after it),
 * and an entry count and choice record count the file can hold (into *n,
 * *nc). */
static dsv4rt_status check_header(dsv4rt_context *ctx, const uint8_t *p, size_t size, uint32_t *n, uint32_t *nc)
{
  dsv4rt_status s = check_magic_version(ctx, p, size);
  if (s)
    return s;
  uint64_t fsize = rd64(p + DSV4_BUNDLE_AT_SIZE);
  if (fsize != size)
    return rt_fail(ctx, DSV4RT_ERR_BUNDLE_FORMAT, "bundle is %zu bytes but its header says %llu (truncated?)", size,
                   (unsigned long long)fsize);
  if (dsv4_crc32(p + DSV4_BUNDLE_AT_NENTRIES, size - DSV4_BUNDLE_AT_NENTRIES) != rd32(p + DSV4_BUNDLE_AT_CRC))
    return rt_fail(ctx, DSV4RT_ERR_BUNDLE_FORMAT, "bundle checksum mismatch (corrupted)");
  *n = rd32(p + DSV4_BUNDLE_AT_NENTRIES);
  if (*n == 0 || *n > RT_MAX_ENTRIES)
    return rt_fail(ctx, DSV4RT_ERR_BUNDLE_FORMAT, "bundle lists %u entries; a bundle holds 1 to %d", *n,
                   RT_MAX_ENTRIES);
  *nc = rd32(p + DSV4_BUNDLE_AT_NCHOICES);
  if (*nc > DSV4_BUNDLE_MAX_CHOICES)
    return rt_fail(ctx, DSV4RT_ERR_BUNDLE_FORMAT, "bundle lists %u choice records; a bundle holds 0 to %d", *nc,
                   DSV4_BUNDLE_MAX_CHOICES);
  if ((uint64_t)*n * sizeof(dsv4_bundle_entry) > size - DSV4_BUNDLE_HEADER_BYTES)
    return rt_fail(ctx, DSV4RT_ERR_BUNDLE_FORMAT, "bundle lists %u entries, which its %zu bytes cannot hold", *n, size);
  if ((uint64_t)*n * sizeof(dsv4_bundle_entry) + (uint64_t)*nc * sizeof(dsv4_bundle_choice) >
      size - DSV4_BUNDLE_HEADER_BYTES)
    return rt_fail(ctx, DSV4RT_ERR_BUNDLE_FORMAT,
                   "bundle lists %u entries and %u choice records, which its %zu bytes cannot hold", *n, *nc, size);
  return DSV4RT_OK;
}

/* Choice record r (dsv4_abi.h): a device string, an entry of its op, the
 * op's bucket dims (non-negative, a bucket, zero past ndims), reserved 0. */
static int check_choice(const dsv4rt_bundle *b, const dsv4_bundle_choice *r, char *why)
{
  const char *end = memchr(r->device, 0, sizeof r->device);
  if (!end)
    return bad(why, "device is not a NUL-terminated string");
  if (!r->device[0])
    return bad(why, "device is empty");
  if (!zeros((const uint8_t *)end, (uint64_t)(r->device + sizeof r->device - end)))
    return bad(why, "device has bytes after its NUL");
  if (r->entry >= (uint32_t)b->n)
    return bad(why, "entry %u is not one of the bundle's %d", r->entry, b->n);
  if (r->op != b->entries[r->entry].op)
    return bad(why, "op %u (%s) is not the op of entry %u (%s), %s", r->op, rt_op_name(r->op), r->entry,
               b->entries[r->entry].name, rt_op_name(b->entries[r->entry].op));
  const char *const *names;
  int nd = dsv4_shape_names((int)r->op, &names);
  if (r->ndims != (uint32_t)nd)
    return bad(why, "ndims %u is not op %s's %d bucket dims", r->ndims, rt_op_name(r->op), nd);
  dsv4_shape s;
  memset(&s, 0, sizeof s);
  s.op = (int)r->op, s.n = nd;
  for (int k = 0; k < DSV4_CHOICE_DIMS; k++) {
    if (k >= nd && r->bucket[k])
      return bad(why, "bucket dim %d is set past its %d dims", k + 1, nd);
    s.dim[k] = r->bucket[k];
  }
  char bw[300]; /* the check dsv4c --lock applies when it writes the record */
  if (dsv4_shape_check_bucket(&s, bw, sizeof bw))
    return bad(why, "%s", bw);
  if (r->reserved)
    return bad(why, "reserved word is %u, not 0", r->reserved);
  return 0;
}

/* The checked entries and choice records of a copied bundle (0 or a
 * status, the message set). */
static dsv4rt_status check_entries(dsv4rt_context *ctx, dsv4rt_bundle *b)
{
  uint64_t choices_at = DSV4_BUNDLE_HEADER_BYTES + (uint64_t)b->n * sizeof(dsv4_bundle_entry);
  uint64_t table_end = choices_at + (uint64_t)b->nrecords * sizeof(dsv4_bundle_choice); /* where the blobs start */
  for (int i = 0; i < b->n; i++) {
    memcpy(&b->entries[i], b->data + DSV4_BUNDLE_HEADER_BYTES + (size_t)i * sizeof(dsv4_bundle_entry),
           sizeof(dsv4_bundle_entry));
    dsv4rt_status s = check_entry(ctx, &b->entries[i], i, table_end, b->data, b->size);
    if (s)
      return s;
  }
  for (int i = 0; i < b->nrecords; i++) {
    dsv4_bundle_choice r;
    char why[RT_WHY];
    memcpy(&r, b->data + choices_at + (size_t)i * sizeof r, sizeof r);
    if (check_choice(b, &r, why))
      return rt_fail(ctx, DSV4RT_ERR_BUNDLE_FORMAT, "bundle choice record %d: %s", i, why);
  }
  return check_blobs(ctx, b, table_end);
}

dsv4rt_status dsv4rt_bundle_open_memory(dsv4rt_context *ctx, const void *data, size_t size, dsv4rt_bundle **out)
{
  if (!ctx || !out)
    return ctx ? rt_fail(ctx, DSV4RT_ERR_INVALID_ARG, "dsv4rt_bundle_open: out is NULL") : DSV4RT_ERR_INVALID_ARG;
  *out = NULL;
  uint32_t n = 0, nc = 0;
  dsv4rt_status s = check_header(ctx, data, size, &n, &nc);
  if (s)
    return s;
  dsv4rt_bundle *b = calloc(1, sizeof *b);
  if (!b || !(b->data = malloc(size))) {
    free(b);
    return rt_fail(ctx, DSV4RT_ERR_OUT_OF_MEMORY, "out of host memory for the bundle");
  }
  memcpy(b->data, data, size);
  b->ctx = ctx, b->size = size, b->n = (int)n, b->nrecords = (int)nc;
  if ((s = check_entries(ctx, b))) {
    free(b->data);
    free(b);
    return s;
  }
  rt_install_bundle_choices(b); /* those of the context's GPU model (choice.c) */
  *out = b;
  return DSV4RT_OK;
}

/* Read the n bytes at fd into p (1: a read failed or the file ended first). */
static int read_all(int fd, uint8_t *p, size_t n)
{
  while (n) {
    ssize_t r = read(fd, p, n > ((size_t)1 << 30) ? (size_t)1 << 30 : n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return 1;
    p += r, n -= (size_t)r;
  }
  return 0;
}

/* The file at path: a regular file (opened without blocking, so that a
 * FIFO or a device is refused rather than waited on or read without end)
 * whose header is a bundle's, read to the size the header gives, which
 * must be the file's; then checked as dsv4rt_bundle_open_memory checks. */
static dsv4rt_status open_file(dsv4rt_context *ctx, const char *path, dsv4rt_bundle **out)
{
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return rt_fail(ctx, DSV4RT_ERR_IO, "cannot open bundle: %s", strerror(errno));
  struct stat st;
  uint8_t head[DSV4_BUNDLE_HEADER_BYTES], *buf = NULL;
  uint64_t size = 0;
  dsv4rt_status s;
  if (fstat(fd, &st)) {
    s = rt_fail(ctx, DSV4RT_ERR_IO, "cannot stat the bundle: %s", strerror(errno));
    goto done;
  }
  if (!S_ISREG(st.st_mode)) {
    s = rt_fail(ctx, DSV4RT_ERR_IO, "not a regular file (a %s): a bundle is read from a file",
                S_ISDIR(st.st_mode)    ? "directory"
                : S_ISFIFO(st.st_mode) ? "FIFO"
                : S_ISCHR(st.st_mode)  ? "character device"
                : S_ISBLK(st.st_mode)  ? "block device"
                : S_ISSOCK(st.st_mode) ? "socket"
                                       : "special file");
    goto done;
  }
  if ((uint64_t)st.st_size < DSV4_BUNDLE_HEADER_BYTES || read_all(fd, head, sizeof head)) {
    s = rt_fail(ctx, DSV4RT_ERR_BUNDLE_FORMAT, "not a dsv4c bundle (%lld bytes: shorter than its %d-byte header)",
                (long long)st.st_size, DSV4_BUNDLE_HEADER_BYTES);
    goto done;
  }
  if ((s = check_magic_version(ctx, head, sizeof head)))
    goto done;
  size = rd64(head + DSV4_BUNDLE_AT_SIZE);
  if (size != (uint64_t)st.st_size)
    s = rt_fail(ctx, DSV4RT_ERR_BUNDLE_FORMAT, "bundle is %lld bytes but its header says %llu (truncated?)",
                (long long)st.st_size, (unsigned long long)size);
  else if (size > RT_MAX_BUNDLE_BYTES)
    s = rt_fail(ctx, DSV4RT_ERR_BUNDLE_FORMAT, "bundle of %llu bytes; this runtime reads bundles up to %llu bytes",
                (unsigned long long)size, (unsigned long long)RT_MAX_BUNDLE_BYTES);
  else if (!(buf = malloc((size_t)size)))
    s = rt_fail(ctx, DSV4RT_ERR_OUT_OF_MEMORY, "out of host memory for a bundle of %llu bytes",
                (unsigned long long)size);
  else {
    memcpy(buf, head, sizeof head);
    if (read_all(fd, buf + sizeof head, (size_t)size - sizeof head))
      s = rt_fail(ctx, DSV4RT_ERR_IO, "the bundle's %llu bytes could not be read (did it change while read?)",
                  (unsigned long long)size);
  }
done:
  close(fd);
  if (!s)
    s = dsv4rt_bundle_open_memory(ctx, buf, (size_t)size, out);
  free(buf);
  return s;
}

dsv4rt_status dsv4rt_bundle_open(dsv4rt_context *ctx, const char *path, dsv4rt_bundle **out)
{
  if (!ctx || !path || !out)
    return ctx ? rt_fail(ctx, DSV4RT_ERR_INVALID_ARG, "dsv4rt_bundle_open: null argument") : DSV4RT_ERR_INVALID_ARG;
  *out = NULL;
  dsv4rt_status s = open_file(ctx, path, out);
  if (s) {
    char m[sizeof ctx->err];
    snprintf(m, sizeof m, "%s", ctx->err);
    rt_fail(ctx, s, "%s: %s", path, m);
  }
  return s;
}

void dsv4rt_bundle_destroy(dsv4rt_bundle *b)
{
  if (!b)
    return;
  for (int i = 0; i < b->n; i++) {
    if (b->loaded[i].loaded == 1)
      b->ctx->be->unload(b->ctx, b->loaded[i].module, b->loaded[i].kernel);
    dsv4rt_buffer_destroy(b->loaded[i].work);
    dsv4rt_buffer_destroy(b->loaded[i].zeroed);
    free(b->loaded[i].why);
    for (int k = 0; k < RT_MAP_SLOTS; k++)
      dsv4rt_buffer_destroy(b->loaded[i].maps[k]);
  }
  free(b->data);
  free(b);
}

int dsv4rt_bundle_count(const dsv4rt_bundle *b) { return b ? b->n : 0; }

dsv4rt_status dsv4rt_bundle_entry(const dsv4rt_bundle *b, int i, const char **name, const char **op,
                                  const char **target, const char **arch)
{
  static const char *const targets[DSV4_BUNDLE_TARGETS] = {"ptx", "amdgcn", "spirv"};
  if (!b || i < 0 || i >= b->n)
    return DSV4RT_ERR_INVALID_ARG;
  const dsv4_bundle_entry *e = &b->entries[i];
  if (name)
    *name = e->name;
  if (op)
    *op = rt_op_name(e->op);
  if (target) /* (checked when the bundle was opened; bounded here all the same) */
    *target = e->target < DSV4_BUNDLE_TARGETS ? targets[e->target] : "?";
  if (arch)
    *arch = e->arch;
  return DSV4RT_OK;
}

int dsv4rt_bundle_entry_is_first(const dsv4rt_bundle *b, int i)
{
  if (!b || i < 0 || i >= b->n)
    return 0;
  for (int j = 0; j < i; j++)
    if (!strcmp(b->entries[j].name, b->entries[i].name))
      return 0;
  return 1;
}

int dsv4rt_bundle_entry_runs(const dsv4rt_bundle *b, int i)
{
  if (!b || i < 0 || i >= b->n)
    return 0;
  return rt_accepts(b, i, NULL, 0);
}

int dsv4rt_bundle_kernel_runs(const dsv4rt_bundle *b, const char *name)
{
  for (int i = 0; b && name && i < b->n; i++)
    if (!strcmp(b->entries[i].name, name) && dsv4rt_bundle_entry_runs(b, i))
      return 1;
  return 0;
}

dsv4rt_status dsv4rt_bundle_entry_layout(const dsv4rt_bundle *b, int i, dsv4_layout *out)
{
  if (!b || !out || i < 0 || i >= b->n)
    return DSV4RT_ERR_INVALID_ARG;
  *out = b->entries[i].layout;
  return DSV4RT_OK;
}

dsv4rt_status dsv4rt_bundle_entry_info(const dsv4rt_bundle *b, int i, dsv4rt_kernel_info *out)
{
  if (!b || !out || i < 0 || i >= b->n)
    return DSV4RT_ERR_INVALID_ARG;
  const dsv4_bundle_entry *e = &b->entries[i];
  out->threads = (int)e->launch.threads;
  out->tokens_per_cta = (int)e->tokens_per_cta;
  out->values_per_thread = (int)e->values_per_thread;
  out->tokens_per_thread = (int)e->tokens_per_thread;
  out->rope_first = (int)e->rope_first;
  out->rope_dims = (int)e->rope_dims;
  out->q_dim = (int)e->q_dim;
  out->quant_floor = (int)e->quant_floor;
  out->v_dim = (int)e->v_dim;
  out->heads = (int)e->heads;
  out->topk = (int)e->topk;
  out->matrix = rt_matrix_form(e);
  out->form = (int)e->launch.form;
  out->cluster = (int)e->launch.cluster;
  out->shared_bytes = (int)e->launch.shared_bytes;
  return DSV4RT_OK;
}
