/* shapes.c -- the shapes dsv4c-tune measures.
 *
 * "v4", the workload of issue 27 (docs/ops.md sections 3, 4 and 6):
 *   sparse MLA decode, V4-Pro C4 layers: 128 heads, 128 SWA + 1024 indexer
 *     entries (64-token pages); V4-Flash C4: 64 heads, 128 + 512; at
 *     T = 8, 16, 32, 64, 128, 256, 512 decode tokens;
 *   at tensor parallelism 8 (16 heads V4-Pro, 8 V4-Flash) at T = 8, 128,
 *     512, and V4-Flash with 2048 compressed entries at T = 64, 512;
 *   the C128 layers: 128 SWA + 512 compressed entries (a 64K context / 128)
 *     in pages of 2, for 128 and 64 heads at T = 8, 64, 512, timed with
 *     compressed lengths drawn between 0 and the width a token (a C128
 *     list is its context / 128 long, so a batch's lengths vary; FlashMLA's
 *     C128 case draws them so too);
 *   the indexer's paged MQA logits: B = 64, 128, 256, next_n 1 and 2,
 *     contexts (the logits row: indexer entries) of 4K, 16K and 64K.
 * "quick": a few small shapes of each op, for a CPU device (CI).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4_abi.h"
#include "files.h"
#include "tune.h"

void tune_shape_text(const tune_shape *s, char *out, size_t n)
{
  dsv4_shape_format(&s->shape, out, n);
  if (s->xdrawn && strlen(out) + 13 < n)
    strcat(out, ",xlens=drawn");
}

static int add(tune_shape **v, int *n, int *cap, int op, const int64_t *dims, int nd, const char *label)
{
  if (*n == *cap) {
    int c = *cap ? *cap * 2 : 32;
    tune_shape *w = realloc(*v, (size_t)c * sizeof *w);
    if (!w)
      return 1;
    *v = w, *cap = c;
  }
  tune_shape *s = &(*v)[(*n)++];
  memset(s, 0, sizeof *s);
  s->shape.op = op, s->shape.n = nd;
  memcpy(s->shape.dim, dims, (size_t)nd * sizeof *dims);
  snprintf(s->label, sizeof s->label, "%s", label);
  return 0;
}

static int preset(const char *name, tune_shape **v, int *n, int *cap)
{
  int bad = 0;
  if (!strcmp(name, "quick")) {
    static const int64_t d[][5] = {{2, 64, 64, 64, 64}, {3, 64, 64, 0, 0}};
    for (int i = 0; i < 2; i++)
      bad |= add(v, n, cap, DSV4_OP_SPARSE_DECODE, d[i], 5, i ? "small, SWA only" : "small, C4");
    static const int64_t l[][3] = {{2, 1, 384}, {2, 2, 384}};
    for (int i = 0; i < 2; i++)
      bad |= add(v, n, cap, DSV4_OP_PAGED_MQA_LOGITS, l[i], 3, "small");
    return bad;
  }
  if (strcmp(name, "v4"))
    return -1;
  static const int64_t T[] = {8, 16, 32, 64, 128, 256, 512};
  for (int i = 0; i < 7; i++) {
    int64_t pro[5] = {T[i], 128, 128, 1024, 64}, flash[5] = {T[i], 64, 128, 512, 64};
    bad |= add(v, n, cap, DSV4_OP_SPARSE_DECODE, pro, 5, "V4-Pro C4");
    bad |= add(v, n, cap, DSV4_OP_SPARSE_DECODE, flash, 5, "V4-Flash C4");
  }
  static const int64_t T128[] = {8, 64, 512};
  for (int i = 0; i < 3; i++) {
    int64_t pro[5] = {T128[i], 128, 128, 512, 2}, flash[5] = {T128[i], 64, 128, 512, 2};
    bad |= add(v, n, cap, DSV4_OP_SPARSE_DECODE, pro, 5, "V4-Pro C128");
    if (!bad)
      (*v)[*n - 1].xdrawn = 1;
    bad |= add(v, n, cap, DSV4_OP_SPARSE_DECODE, flash, 5, "V4-Flash C128");
    if (!bad)
      (*v)[*n - 1].xdrawn = 1;
  }
  /* tensor parallelism 8: 16 heads a GPU for V4-Pro, 8 for V4-Flash (the
   * direct warp form's shapes), and V4-Flash with a 2048-wide compressed
   * list (a 512K context at C4, where a tuned bundle once ran another
   * bucket's winner); MTP (s_q 3-4) needs s_q in the bucket (not yet) */
  static const int64_t Ttp[] = {8, 128, 512}, Tw[] = {64, 512};
  for (int i = 0; i < 3; i++) {
    int64_t pro[5] = {Ttp[i], 16, 128, 1024, 64}, flash[5] = {Ttp[i], 8, 128, 512, 64};
    bad |= add(v, n, cap, DSV4_OP_SPARSE_DECODE, pro, 5, "V4-Pro C4, TP 8");
    bad |= add(v, n, cap, DSV4_OP_SPARSE_DECODE, flash, 5, "V4-Flash C4, TP 8");
  }
  for (int i = 0; i < 2; i++) {
    int64_t wide[5] = {Tw[i], 64, 128, 2048, 64};
    bad |= add(v, n, cap, DSV4_OP_SPARSE_DECODE, wide, 5, "V4-Flash C4, 2048-wide list");
  }
  static const int64_t B[] = {64, 128, 256}, L[] = {4096, 16384, 65536};
  for (int b = 0; b < 3; b++)
    for (int nn = 1; nn <= 2; nn++)
      for (int c = 0; c < 3; c++) {
        int64_t d[3] = {B[b], nn, L[c]};
        bad |= add(v, n, cap, DSV4_OP_PAGED_MQA_LOGITS, d, 3, "indexer logits");
      }
  return bad;
}

int tune_shapes(const char *list, tune_shape **out, int *n, char *err, size_t errlen)
{
  tune_shape *v = NULL;
  int cap = 0;
  *n = 0;
  int p = preset(list, &v, n, &cap);
  if (p > 0) {
    free(v);
    snprintf(err, errlen, "out of memory");
    return 1;
  }
  if (p < 0) { /* a file */
    char *text;
    size_t len;
    if (dsv4_tune_read_file(list, &text, &len)) {
      snprintf(err, errlen, "shapes '%s': neither v4, quick nor a readable file", list);
      return 1;
    }
    int lineno = 0;
    for (char *line = text, *next; line && *line; line = next) {
      next = strchr(line, '\n');
      if (next)
        *next++ = 0;
      lineno++;
      char *hash = strchr(line, '#');
      if (hash)
        *hash = 0;
      char op[64] = "", dims[200] = "", label[64] = "";
      int got = sscanf(line, "%63s %199s %63[^\n]", op, dims, label), xdrawn = -1;
      if (!strncmp(label, "xlens=", 6)) { /* the timing's extra lengths */
        size_t w = strcspn(label + 6, " \t");
        xdrawn = w == 5 && !strncmp(label + 6, "drawn", 5) ? 1 : w == 4 && !strncmp(label + 6, "full", 4) ? 0 : -2;
        const char *rest = label + 6 + w;
        rest += strspn(rest, " \t");
        memmove(label, rest, strlen(rest) + 1); /* the label after it */
      }
      if (got <= 0)
        continue;
      dsv4_shape s;
      int o = dsv4_tune_op_from_name(op);
      if (xdrawn == -2 || (xdrawn == 1 && o != DSV4_OP_SPARSE_DECODE)) {
        snprintf(err, errlen, "%s:%d: xlens= takes drawn or full, and only for sparse_decode", list, lineno);
        free(text), free(v);
        return 1;
      }
      if (got < 2 || !o || dsv4_shape_parse(o, dims, &s)) {
        const char *const *names;
        int nn = dsv4_shape_names(o, &names);
        char want[128] = "";
        for (int i = 0; i < nn; i++)
          snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s=N", i ? "," : "", names[i]);
        snprintf(err, errlen,
                 "%s:%d: expected '<op> <dims>'%s%s, e.g. 'sparse_decode T=8,H=128,topk=128,extra=1024,xbs=64'", list,
                 lineno, nn ? " with dims " : "", want);
        free(text), free(v);
        return 1;
      }
      if (add(&v, n, &cap, o, s.dim, s.n, label[0] ? label : "")) {
        free(text), free(v);
        snprintf(err, errlen, "out of memory");
        return 1;
      }
      v[*n - 1].xdrawn = xdrawn == 1;
    }
    free(text);
  }
  /* a list names each bucket of an op once: the lockfile keeps one entry a bucket */
  for (int i = 0; i < *n; i++) {
    dsv4_shape *s = &v[i].shape;
    if (s->op == DSV4_OP_SPARSE_DECODE && !s->dim[3])
      s->dim[4] = 0; /* no extra list: no extra block size (as the runtime sees a call) */
    for (int j = 0; j < i; j++) {
      dsv4_shape a = dsv4_shape_bucket(&v[i].shape), b = dsv4_shape_bucket(&v[j].shape);
      if (a.op == b.op && !memcmp(a.dim, b.dim, sizeof a.dim)) {
        char x[128], y[128];
        dsv4_shape_format(&v[i].shape, x, sizeof x);
        dsv4_shape_format(&v[j].shape, y, sizeof y);
        snprintf(err, errlen, "shapes %s and %s of %s fall in one bucket; keep one", y, x, dsv4_tune_op_name(a.op));
        free(v);
        return 1;
      }
    }
  }
  *out = v;
  return 0;
}
