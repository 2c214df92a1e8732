/* bundle.c -- one file holding every artifact of a spec with its manifest:
 * per (kernel, target) the op, layout, tile, argument signature, launch
 * rule inputs and code.  Versioned and checksummed (every byte after the
 * checksum, header fields included); see dsv4_abi.h for the format, which
 * the runtime's reader holds every byte to. */
#include "bundle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4_abi.h"

_Static_assert(sizeof(dsv4_bundle_entry) == 624, "bundle entry layout changed: bump DSV4_BUNDLE_VERSION");
_Static_assert(sizeof(dsv4_bundle_choice) == 160, "choice record layout changed: bump DSV4_BUNDLE_VERSION");
_Static_assert(sizeof(dsv4_bundle_entry) % DSV4_BUNDLE_ALIGN == 0 &&
                   sizeof(dsv4_bundle_choice) % DSV4_BUNDLE_ALIGN == 0,
               "the entry table and the choice records keep the blobs aligned");

static uint64_t align16(uint64_t x) { return (x + DSV4_BUNDLE_ALIGN - 1) & ~(uint64_t)(DSV4_BUNDLE_ALIGN - 1); }

static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }

/* What a reader takes: 1 to DSV4_BUNDLE_MAX_ENTRIES items, none empty. */
static int check_items(const dsv4_bundle_item *items, int n, dsv4_diags *d)
{
  if (n < 1 || n > DSV4_BUNDLE_MAX_ENTRIES) {
    dsv4_error(d, NULL, 0, "a bundle holds 1 to %d artifacts, not %d", DSV4_BUNDLE_MAX_ENTRIES, n);
    return 1;
  }
  for (int i = 0; i < n; i++)
    if (!items[i].art->code_len) {
      dsv4_error(d, NULL, 0, "kernel %s: its %s artifact is empty", items[i].kernel->name,
                 dsv4_target_name(items[i].target));
      return 1;
    }
  return 0;
}

/* The manifest of one item (everything but the code's place). */
static void fill_entry(const dsv4_bundle_item *it, dsv4_bundle_entry *e)
{
  const dsv4_kernel *k = it->kernel;
  memset(e, 0, sizeof *e);
  snprintf(e->name, sizeof e->name, "%s", k->name);
  e->op = (uint32_t)k->op;
  e->target = (uint32_t)it->target;
  snprintf(e->arch, sizeof e->arch, "%s", k->target[it->target].arch);
  e->launch = k->launch[it->target];
  e->tokens_per_cta = (uint32_t)k->tile.tokens_per_cta;
  e->values_per_thread = (uint32_t)k->tile.values_per_thread;
  e->tokens_per_thread = (uint32_t)k->tile.tokens_per_thread;
  e->rope_first = (uint32_t)k->rope_first;
  e->rope_dims = (uint32_t)k->rope_dims;
  e->q_dim = (uint32_t)k->q_dim;
  e->quant_floor = (uint32_t)k->quant_floor;
  e->v_dim = (uint32_t)k->v_dim;
  e->heads = (uint32_t)k->heads;
  e->topk = (uint32_t)k->topk;
  e->flags = it->art->flags;
  const char *names[DSV4_MAX_ARGS];
  e->nargs = (uint32_t)dsv4_op_signature(k->op, e->args, names);
  e->layout = k->layout;
}

/* What a reader takes of the choice records (dsv4_abi.h): at most
 * DSV4_BUNDLE_MAX_CHOICES, each naming a non-empty terminated device, an
 * item of its op, dims within the record and reserved 0. */
static int check_choices(const dsv4_bundle_item *items, int n, const dsv4_bundle_choice *c, int nc, dsv4_diags *d)
{
  if (nc < 0 || nc > DSV4_BUNDLE_MAX_CHOICES || (nc && !c)) {
    dsv4_error(d, NULL, 0, "a bundle holds 0 to %d choice records, not %d", DSV4_BUNDLE_MAX_CHOICES, nc);
    return 1;
  }
  for (int i = 0; i < nc; i++) {
    const dsv4_bundle_choice *r = &c[i];
    const char *why = !memchr(r->device, 0, sizeof r->device) || !r->device[0] ? "its device is not a non-empty string"
                      : r->entry >= (uint32_t)n                                 ? "its entry is not one of the bundle's"
                      : r->op != (uint32_t)items[r->entry].kernel->op           ? "its entry is of another op"
                      : r->ndims > DSV4_CHOICE_DIMS || r->reserved              ? "its dims or reserved word"
                                                                                : NULL;
    if (why) {
      dsv4_error(d, NULL, 0, "choice record %d: %s", i, why);
      return 1;
    }
  }
  return 0;
}

int dsv4_bundle_build(const dsv4_bundle_item *items, int n, unsigned char **out, size_t *len, dsv4_diags *d)
{
  return dsv4_bundle_build_tuned(items, n, NULL, 0, out, len, d);
}

int dsv4_bundle_build_tuned(const dsv4_bundle_item *items, int n, const dsv4_bundle_choice *choices, int nchoices,
                            unsigned char **out, size_t *len, dsv4_diags *d)
{
  if (check_items(items, n, d) || check_choices(items, n, choices, nchoices, d))
    return 1;
  uint64_t choices_at = DSV4_BUNDLE_HEADER_BYTES + (uint64_t)n * sizeof(dsv4_bundle_entry);
  uint64_t table_end = choices_at + (uint64_t)nchoices * sizeof(dsv4_bundle_choice); /* where the blobs start */
  uint64_t size = table_end;
  for (int i = 0; i < n; i++) {
    size = align16(size) + items[i].art->code_len;
    size = align16(size) + items[i].art->aux_len;
  }
  size = align16(size);
  unsigned char *buf = calloc(1, size); /* zeros: the padding between blobs */
  if (!buf) {
    dsv4_error(d, NULL, 0, "out of memory building the bundle");
    return 1;
  }
  uint64_t off = table_end;
  for (int i = 0; i < n; i++) {
    const dsv4_artifact *a = items[i].art;
    dsv4_bundle_entry e;
    fill_entry(&items[i], &e);
    off = align16(off);
    e.code_off = off, e.code_len = a->code_len;
    memcpy(buf + off, a->code, a->code_len);
    off = align16(off + a->code_len);
    if (a->aux_len) {
      e.aux_off = off, e.aux_len = a->aux_len;
      memcpy(buf + off, a->aux, a->aux_len);
      off += a->aux_len;
    }
    memcpy(buf + DSV4_BUNDLE_HEADER_BYTES + (size_t)i * sizeof e, &e, sizeof e);
  }
  for (int i = 0; i < nchoices; i++) { /* as given, padding zeroed */
    dsv4_bundle_choice r;
    memset(&r, 0, sizeof r);
    memcpy(r.device, choices[i].device, strlen(choices[i].device));
    r.op = choices[i].op, r.entry = choices[i].entry, r.ndims = choices[i].ndims;
    memcpy(r.bucket, choices[i].bucket, (size_t)r.ndims * sizeof *r.bucket);
    r.median_ps = choices[i].median_ps;
    memcpy(buf + choices_at + (size_t)i * sizeof r, &r, sizeof r);
  }
  memcpy(buf, DSV4_BUNDLE_MAGIC, 8);
  put32(buf + DSV4_BUNDLE_AT_VERSION, DSV4_BUNDLE_VERSION);
  put32(buf + DSV4_BUNDLE_AT_NENTRIES, (uint32_t)n);
  put32(buf + DSV4_BUNDLE_AT_NCHOICES, (uint32_t)nchoices);
  put64(buf + DSV4_BUNDLE_AT_SIZE, size);
  /* last: the checksum of every byte after it, the header's fields included */
  put32(buf + DSV4_BUNDLE_AT_CRC, dsv4_crc32(buf + DSV4_BUNDLE_AT_NENTRIES, size - DSV4_BUNDLE_AT_NENTRIES));
  *out = buf;
  *len = size;
  return 0;
}
