/* choice.c -- the runtime's side of tuning (docs/tuning.md): the choices a
 * bundle carries (its choice records, bundle version 7, installed on open
 * for the context's GPU model: rt_install_bundle_choices), a lockfile's
 * winners loaded over them (dsv4rt_bundle_load_tuning), and the kernel an
 * op call made without opts->kernel runs for its shape bucket
 * (rt_tuned_kernel, which ops.c's begin() asks).
 *
 * A bundle's own records need no code check: dsv4c --lock wrote them next
 * to the code that was measured (it checked the hashes when it built).  A
 * lockfile loaded later (retuning without rebuilding) holds each choice to
 * the code it was measured on: the SHA-256 of the winner's code in this
 * bundle must equal the lockfile's, so a bundle built from another spec,
 * toolchain or generator never runs a choice made for other code (the call
 * says which entries were stale).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bucket.h"
#include "choice.h"
#include "files.h"
#include "lock.h"
#include "rt.h"
#include "sha256.h"

#define NCHOICES ((int)(sizeof ((dsv4rt_bundle *)0)->choices / sizeof ((dsv4rt_bundle *)0)->choices[0]))

/* The shape of an op call (bucket.h's dims for op): tuning's bucket and the
 * default rule's heads and rows (rt.h). */
int rt_call_shape(dsv4_op op, const void *args, dsv4_shape *s)
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
  case DSV4_OP_PAGED_MQA_LOGITS_TOPK: {
    const dsv4rt_mqa_logits_topk_args *a = args;
    s->n = 4;
    s->dim[0] = a->batch, s->dim[1] = a->next_n, s->dim[2] = a->row_len, s->dim[3] = a->topk;
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

/* The choices being made (a table of NCHOICES): each with the median of
 * its winner and where it came from (0 the bundle's records, 1 a lockfile). */
typedef struct {
  struct rt_choice *ch;
  double *best;
  unsigned char *from;
  int n;
} choice_set;

/* Put the choice (op, bucket s, entry) with its winner's median: one a
 * (op, bucket, kind), a lockfile's over the bundle's, else the faster (equal:
 * the name first in byte order).  0, or 1 when the table is full. */
static int put_choice(const dsv4rt_bundle *b, choice_set *cs, uint32_t op, const dsv4_shape *s, int entry,
                      double median, int from)
{
  for (int k = 0; k < cs->n; k++) {
    struct rt_choice *c = &cs->ch[k];
    if (c->op != op || c->n != s->n || memcmp(c->dim, s->dim, sizeof c->dim) ||
        !same_kind(&b->entries[c->entry], &b->entries[entry]))
      continue;
    if (from > cs->from[k] || median < cs->best[k] ||
        (median == cs->best[k] && strcmp(b->entries[entry].name, b->entries[c->entry].name) < 0))
      c->entry = entry, cs->best[k] = median, cs->from[k] = (unsigned char)from;
    return 0;
  }
  if (cs->n == NCHOICES)
    return 1;
  struct rt_choice *c = &cs->ch[cs->n];
  memset(c, 0, sizeof *c);
  c->op = op, c->n = s->n, c->entry = entry;
  memcpy(c->dim, s->dim, sizeof c->dim);
  cs->best[cs->n] = median, cs->from[cs->n] = (unsigned char)from;
  cs->n++;
  return 0;
}

/* The bundle's choice records of the context's GPU model (checked on open)
 * whose entry runs here, into cs. */
static void put_records(const dsv4rt_bundle *b, choice_set *cs)
{
  char model[DSV4_LOCK_TEXT];
  dsv4_tune_device_model(b->ctx->device, model, sizeof model);
  if (!model[0])
    return; /* no device (a stub context): no record is this model's */
  uint64_t at = DSV4_BUNDLE_HEADER_BYTES + (uint64_t)b->n * sizeof(dsv4_bundle_entry);
  for (int i = 0; i < b->nrecords; i++) {
    dsv4_bundle_choice r;
    memcpy(&r, b->data + at + (size_t)i * sizeof r, sizeof r);
    if (strcmp(r.device, model) || !b->ctx->be || !rt_accepts(b, (int)r.entry, NULL, 0))
      continue; /* another GPU model (the default rule applies), or a target that does not run here */
    dsv4_shape s;
    memset(&s, 0, sizeof s);
    s.op = (int)r.op, s.n = (int)r.ndims;
    memcpy(s.dim, r.bucket, sizeof s.dim);
    put_choice(b, cs, r.op, &s, (int)r.entry, (double)r.median_ps / 1e6, 0);
  }
}

void rt_install_bundle_choices(dsv4rt_bundle *b)
{
  b->nchoices = 0;
  if (!b->nrecords)
    return;
  struct rt_choice *c = calloc(NCHOICES, sizeof *c);
  double *bt = calloc(NCHOICES, sizeof *bt);
  unsigned char *fr = calloc(NCHOICES, 1);
  if (!c || !bt || !fr) {
    free(c), free(bt), free(fr);
    return; /* out of host memory: no choices, the default rule */
  }
  choice_set cs = {c, bt, fr, 0};
  put_records(b, &cs);
  memcpy(b->choices, c, (size_t)cs.n * sizeof *c);
  b->nchoices = cs.n;
  free(c), free(bt), free(fr);
}

const char *rt_tuned_kernel(const dsv4rt_bundle *b, dsv4_op op, const dsv4_shape *s)
{
  if (!b || !b->nchoices || !s || s->op != (int)op)
    return NULL;
  /* the kind of kernel the default choice would take (the first of the op
   * that runs here, as rt_find): tuning picks among that kind only */
  int ref = rt_first_runnable(b, op);
  if (ref < 0)
    return NULL;
  dsv4_shape bucket = dsv4_shape_bucket(s);
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
  int ref = rt_first_runnable(b, (dsv4_op)s.op); /* as rt_tuned_kernel: the kind the default choice takes */
  const struct rt_choice *c = ref < 0 ? NULL : lookup(b, &bucket, ref);
  return c ? b->entries[c->entry].name : NULL;
}

dsv4rt_status dsv4rt_bundle_load_tuning_text(dsv4rt_bundle *b, const char *text, size_t len)
{
  if (!b)
    return rt_fail(NULL, DSV4RT_ERR_NULL_ARG, "dsv4rt_bundle_load_tuning: bundle is NULL");
  if (!text) { /* back to the bundle's own choices */
    rt_install_bundle_choices(b);
    return DSV4RT_OK;
  }
  dsv4_lock l;
  char err[512];
  if (dsv4_lock_parse(text, len, &l, err, sizeof err))
    return rt_fail(b->ctx, DSV4RT_ERR_BUNDLE_FORMAT, "dsv4rt_bundle_load_tuning: not a tuning lockfile: %.900s", err);
  char model[DSV4_LOCK_TEXT];
  dsv4_tune_device_model(b->ctx->device, model, sizeof model);
  /* the new choices: the bundle's records of this GPU model, then the
   * lockfile's over them, with the best winner's median of each (for two
   * entries that choose for one bucket and kind: two sweeps of an op) */
  struct rt_choice *ch = calloc(NCHOICES, sizeof *ch);
  double *best = calloc(NCHOICES, sizeof *best);
  unsigned char *from = calloc(NCHOICES, 1);
  char (*hashes)[65] = calloc((size_t)b->n, sizeof *hashes); /* entry code hashes, made once */
  if (!ch || !best || !from || !hashes) {
    free(ch), free(best), free(from), free(hashes);
    dsv4_lock_free(&l);
    return rt_fail(b->ctx, DSV4RT_ERR_OUT_OF_MEMORY, "dsv4rt_bundle_load_tuning: out of host memory");
  }
  choice_set cs = {ch, best, from, 0};
  put_records(b, &cs);
  int stale = 0, mine = 0;
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
    else if (!why && !rt_accepts(b, entry, NULL, 0))
      why = "that kernel does not run on this device";
    if (!why) {
      if (!hashes[entry][0])
        dsv4_sha256_hex(b->data + b->entries[entry].code_off, (size_t)b->entries[entry].code_len, hashes[entry]);
      if (!v || strcmp(v->code, hashes[entry]))
        why = "its code in this bundle differs from the code that was measured (another spec, toolchain or "
              "generator)";
    }
    if (!why && put_choice(b, &cs, (uint32_t)op, &s, entry, v->median_us, 1))
      why = "the choice table is full (the rest are left out)";
    if (why) {
      if (!stale++)
        snprintf(first, sizeof first, "kernel %s, bucket %s: winner %s: %s", e->key.kernel, e->key.bucket, e->winner,
                 why);
      continue;
    }
  }
  memcpy(b->choices, ch, (size_t)cs.n * sizeof *ch);
  b->nchoices = cs.n;
  free(ch), free(best), free(from), free(hashes);
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
  if (dsv4_tune_read_file_max(path, DSV4_LOCK_MAX_BYTES, &text, &len)) {
    if (errno == EFBIG || errno == EINVAL)
      return rt_fail(b->ctx, DSV4RT_ERR_BUNDLE_FORMAT, "dsv4rt_bundle_load_tuning: %.900s: %s", path,
                     errno == EFBIG ? "larger than a lockfile may be (32 MiB)" : "not a regular file");
    return rt_fail(b->ctx, DSV4RT_ERR_IO, "dsv4rt_bundle_load_tuning: cannot read %.900s", path);
  }
  dsv4rt_status s = dsv4rt_bundle_load_tuning_text(b, text, len);
  free(text);
  return s;
}
