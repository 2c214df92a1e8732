/* choice.c -- the runtime's side of tuning (docs/tuning.md): a lockfile's
 * winners loaded into a bundle (dsv4rt_bundle_load_tuning), and the kernel
 * an op call made without opts->kernel runs for its shape bucket
 * (rt_tuned_kernel, which ops.c's begin() asks).
 *
 * Why a lockfile and not a table in the bundle: the bundle format (version
 * 6, bundle.c) has no place for it; docs/tuning.md proposes the table a
 * version 7 would carry.  Until then the choices live in the bundle's
 * memory only, loaded from the lockfile dsv4c --lock writes beside a tuned
 * bundle, and each is held to the code it was measured on: the SHA-256 of
 * the winner's code in this bundle must equal the lockfile's, so a bundle
 * built from another spec, toolchain or generator never runs a choice made
 * for other code (the call says which entries were stale).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lock.h"
#include "rt.h"

#define NCHOICES ((int)(sizeof ((dsv4rt_bundle *)0)->choices / sizeof ((dsv4rt_bundle *)0)->choices[0]))

/* The shape tuning sees of an op call (lock.h's dims for op). */
static int call_shape(dsv4_op op, const void *args, dsv4_shape *s)
{
  memset(s, 0, sizeof *s);
  s->op = (int)op;
  switch (op) {
  case DSV4_OP_SPARSE_DECODE: {
    const dsv4rt_sparse_decode_args *a = args;
    int x = a->extra_cache != NULL;
    s->n = 5;
    s->dim[0] = a->n_tokens, s->dim[1] = a->heads, s->dim[2] = a->topk;
    s->dim[3] = x ? a->extra_topk : 0, s->dim[4] = x ? a->extra_block_size : 0;
    return 0;
  }
  case DSV4_OP_PAGED_MQA_LOGITS: {
    const dsv4rt_mqa_logits_args *a = args;
    s->n = 3;
    s->dim[0] = a->batch, s->dim[1] = a->next_n, s->dim[2] = a->row_len;
    return 0;
  }
  case DSV4_OP_DEQUANT_GATHER:
    s->n = 1, s->dim[0] = ((const dsv4rt_dequant_gather_args *)args)->n;
    return 0;
  case DSV4_OP_PAGED_GATHER:
    s->n = 1, s->dim[0] = ((const dsv4rt_paged_gather_args *)args)->num_requests;
    return 0;
  case DSV4_OP_KV_INSERT:
    s->n = 1, s->dim[0] = ((const dsv4rt_kv_insert_args *)args)->n_tokens;
    return 0;
  case DSV4_OP_TOPK:
    s->n = 1, s->dim[0] = ((const dsv4rt_topk_args *)args)->rows;
    return 0;
  default:
    return 1;
  }
}

/* Two entries a call may take in each other's place: the same op, layout
 * and op fields (what the caller's buffers are laid out for). */
static int same_kind(const dsv4_bundle_entry *a, const dsv4_bundle_entry *b)
{
  return a->op == b->op && a->v_dim == b->v_dim && a->heads == b->heads && a->topk == b->topk &&
         !strcmp(a->layout.name, b->layout.name);
}

/* The choice for op's bucket s among kernels of entry ref's kind (NULL if none). */
static const struct rt_choice *lookup(const dsv4rt_bundle *b, const dsv4_shape *bucket, int ref)
{
  for (int i = 0; i < b->nchoices; i++) {
    const struct rt_choice *c = &b->choices[i];
    if (c->op != (uint32_t)bucket->op || c->n != bucket->n ||
        memcmp(c->dim, bucket->dim, (size_t)bucket->n * sizeof *c->dim))
      continue;
    if (ref < 0 || same_kind(&b->entries[c->entry], &b->entries[ref]))
      return c;
  }
  return NULL;
}

const char *rt_tuned_kernel(const dsv4rt_bundle *b, dsv4_op op, const void *args)
{
  dsv4_shape s;
  if (!b || !b->nchoices || !args || call_shape(op, args, &s))
    return NULL;
  /* the kind of kernel the default choice would take (the first of the op
   * that runs here, as rt_find): tuning picks among that kind only */
  int ref = -1;
  for (int i = 0; i < b->n && ref < 0; i++)
    if (b->entries[i].op == (uint32_t)op && b->ctx->be->accepts(b->ctx, &b->entries[i]))
      ref = i;
  if (ref < 0)
    return NULL;
  dsv4_shape bucket = dsv4_shape_bucket(&s);
  const struct rt_choice *c = lookup(b, &bucket, ref);
  return c ? b->entries[c->entry].name : NULL;
}

dsv4rt_status dsv4rt_bundle_entry_code_hash(const dsv4rt_bundle *b, int i, char hex[65])
{
  if (!b || !hex)
    return rt_fail(b ? b->ctx : NULL, DSV4RT_ERR_NULL_ARG, "dsv4rt_bundle_entry_code_hash: %s is NULL",
                   b ? "hex" : "bundle");
  if (i < 0 || i >= b->n)
    return rt_fail(b->ctx, DSV4RT_ERR_INVALID_ARG, "dsv4rt_bundle_entry_code_hash: entry %d of %d", i, b->n);
  const dsv4_bundle_entry *e = &b->entries[i];
  dsv4_sha256_hex(b->data + e->code_off, (size_t)e->code_len, hex);
  return DSV4RT_OK;
}

int dsv4rt_bundle_tuning_count(const dsv4rt_bundle *b) { return b ? b->nchoices : 0; }

const char *dsv4rt_bundle_tuned_kernel(const dsv4rt_bundle *b, const char *op, const int64_t *dims, int ndims)
{
  if (!b || !op || (!dims && ndims))
    return NULL;
  dsv4_shape s;
  memset(&s, 0, sizeof s);
  s.op = dsv4_tune_op_from_name(op);
  const char *const *names;
  s.n = dsv4_shape_names(s.op, &names);
  if (!s.n || ndims != s.n)
    return NULL;
  memcpy(s.dim, dims, (size_t)ndims * sizeof *dims);
  if (s.op == DSV4_OP_SPARSE_DECODE && !s.dim[3])
    s.dim[4] = 0; /* no extra list: no extra block size either */
  dsv4_shape bucket = dsv4_shape_bucket(&s);
  int ref = -1; /* as rt_tuned_kernel: the kind the default choice takes */
  for (int i = 0; i < b->n && ref < 0; i++)
    if (b->entries[i].op == (uint32_t)s.op && b->ctx->be->accepts(b->ctx, &b->entries[i]))
      ref = i;
  const struct rt_choice *c = ref < 0 ? NULL : lookup(b, &bucket, ref);
  return c ? b->entries[c->entry].name : NULL;
}

dsv4rt_status dsv4rt_bundle_load_tuning_text(dsv4rt_bundle *b, const char *text, size_t len)
{
  if (!b)
    return rt_fail(NULL, DSV4RT_ERR_NULL_ARG, "dsv4rt_bundle_load_tuning: bundle is NULL");
  if (!text) {
    b->nchoices = 0;
    return DSV4RT_OK;
  }
  dsv4_lock l;
  char err[512];
  if (dsv4_lock_parse(text, len, &l, err, sizeof err))
    return rt_fail(b->ctx, DSV4RT_ERR_BUNDLE_FORMAT, "dsv4rt_bundle_load_tuning: not a tuning lockfile: %.900s", err);
  char model[DSV4_LOCK_TEXT];
  dsv4_tune_device_model(b->ctx->device, model, sizeof model);
  /* the new choices, and the best winner's median of each (for two
   * entries that choose for one bucket and kind: two sweeps of an op) */
  struct rt_choice *ch = calloc(NCHOICES, sizeof *ch);
  double *best = calloc(NCHOICES, sizeof *best);
  char (*hashes)[65] = calloc((size_t)b->n, sizeof *hashes); /* entry code hashes, made once */
  if (!ch || !best || !hashes) {
    free(ch), free(best), free(hashes);
    dsv4_lock_free(&l);
    return rt_fail(b->ctx, DSV4RT_ERR_OUT_OF_MEMORY, "dsv4rt_bundle_load_tuning: out of host memory");
  }
  int n = 0, stale = 0, mine = 0;
  char first[700] = "";
  for (int i = 0; i < l.n; i++) {
    const dsv4_lock_entry *e = &l.e[i];
    if (strcmp(e->key.device, model) || !e->winner[0])
      continue; /* another GPU model, or nothing passed the gate there */
    mine++;
    const char *why = NULL;
    int op = dsv4_tune_op_from_name(e->key.op), t = -1, entry = -1, named = 0;
    static const char *const targets[DSV4_BUNDLE_TARGETS] = {"ptx", "amdgcn", "spirv"}; /* as bundle.c names them */
    for (int k = 0; k < DSV4_BUNDLE_TARGETS; k++)
      if (!strcmp(targets[k], e->key.target))
        t = k;
    dsv4_shape s;
    if (!op || t < 0 || dsv4_shape_parse(op, e->key.bucket, &s))
      why = "its op, target or bucket is not one this runtime knows";
    for (int k = 0; !why && k < b->n; k++) {
      const dsv4_bundle_entry *be = &b->entries[k];
      if (strcmp(be->name, e->winner))
        continue;
      named = 1;
      if (be->target == (uint32_t)t && be->op == (uint32_t)op && !strcmp(be->arch, e->key.arch))
        entry = k;
    }
    const dsv4_lock_variant *v = NULL;
    for (int k = 0; k < e->nvariants; k++)
      if (!strcmp(e->v[k].name, e->winner))
        v = &e->v[k];
    if (!why && !named)
      why = "the bundle has no kernel of that name";
    else if (!why && entry < 0)
      why = "the bundle has that kernel for another op, target or arch";
    else if (!why && !b->ctx->be->accepts(b->ctx, &b->entries[entry]))
      why = "that kernel does not run on this device";
    if (!why) {
      if (!hashes[entry][0])
        dsv4_sha256_hex(b->data + b->entries[entry].code_off, (size_t)b->entries[entry].code_len, hashes[entry]);
      if (!v || strcmp(v->code, hashes[entry]))
        why = "its code in this bundle differs from the code that was measured (another spec, toolchain or "
              "generator)";
    }
    if (why) {
      if (!stale++)
        snprintf(first, sizeof first, "kernel %s, bucket %s: winner %s: %s", e->key.kernel, e->key.bucket, e->winner,
                 why);
      continue;
    }
    /* one choice a (op, bucket, kind): the fastest winner */
    int at = -1;
    for (int k = 0; k < n && at < 0; k++)
      if (ch[k].op == (uint32_t)op && ch[k].n == s.n && !memcmp(ch[k].dim, s.dim, sizeof s.dim) &&
          same_kind(&b->entries[ch[k].entry], &b->entries[entry]))
        at = k;
    if (at >= 0) {
      if (v->median_us < best[at] ||
          (v->median_us == best[at] && strcmp(e->winner, b->entries[ch[at].entry].name) < 0))
        ch[at].entry = entry, best[at] = v->median_us;
      continue;
    }
    if (n == NCHOICES) {
      if (!stale++)
        snprintf(first, sizeof first, "more than %d choices: the rest are left out", NCHOICES);
      continue;
    }
    ch[n].op = (uint32_t)op, ch[n].n = s.n, ch[n].entry = entry;
    memcpy(ch[n].dim, s.dim, sizeof s.dim);
    best[n++] = v->median_us;
  }
  memcpy(b->choices, ch, (size_t)n * sizeof *ch);
  b->nchoices = n;
  free(ch), free(best), free(hashes);
  dsv4_lock_free(&l);
  if (stale)
    return rt_fail(b->ctx, DSV4RT_ERR_STALE_TUNING,
                   "dsv4rt_bundle_load_tuning: %d of the %d entries for %s are stale and not used (the other %d are "
                   "loaded); the first: %.600s", stale, mine, model, mine - stale, first);
  return DSV4RT_OK;
}

dsv4rt_status dsv4rt_bundle_load_tuning(dsv4rt_bundle *b, const char *path)
{
  if (!b)
    return rt_fail(NULL, DSV4RT_ERR_NULL_ARG, "dsv4rt_bundle_load_tuning: bundle is NULL");
  if (!path)
    return dsv4rt_bundle_load_tuning_text(b, NULL, 0);
  char *text;
  size_t len;
  if (dsv4_tune_read_file(path, &text, &len))
    return rt_fail(b->ctx, DSV4RT_ERR_IO, "dsv4rt_bundle_load_tuning: cannot read %.900s", path);
  dsv4rt_status s = dsv4rt_bundle_load_tuning_text(b, text, len);
  free(text);
  return s;
}
