/* bucket.c -- op names, GPU models, and the shapes and buckets of op calls (see bucket.h). */
#include "bucket.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsv4_abi.h"

/* ---- GPU models, ops and shapes ------------------------------------------------------ */

void dsv4_tune_device_model(const char *device, char *out, size_t n)
{
  const char *paren = strstr(device, " (");
  size_t m = paren ? (size_t)(paren - device) : strlen(device);
  snprintf(out, n, "%.*s", (int)m, device);
}

static const char *const op_names[] = {"none",
#define X(e, s, d) s,
                                       DSV4_OPS(X)
#undef X
};

int dsv4_tune_op_from_name(const char *s)
{
  for (int i = 1; i < DSV4_OP_COUNT; i++)
    if (!strcmp(op_names[i], s))
      return i;
  return 0;
}

const char *dsv4_tune_op_name(int op) { return op > 0 && op < DSV4_OP_COUNT ? op_names[op] : "?"; }

int dsv4_shape_names(int op, const char *const **names)
{
  static const char *const decode[] = {"T", "H", "topk", "extra", "xbs"};
  static const char *const logits[] = {"B", "next_n", "L"};
  static const char *const other[] = {"n"};
  if (op == DSV4_OP_SPARSE_DECODE)
    return *names = decode, 5;
  static const char *const fused[] = {"B", "next_n", "L", "K"};
  if (op == DSV4_OP_PAGED_MQA_LOGITS)
    return *names = logits, 3;
  if (op == DSV4_OP_PAGED_MQA_LOGITS_TOPK)
    return *names = fused, 4;
  if (op > 0 && op < DSV4_OP_COUNT)
    return *names = other, 1;
  return *names = NULL, 0;
}

static int64_t pow2ceil(int64_t v)
{
  if (v <= 0)
    return 0;
  int64_t p = 1;
  while (p < v && p < ((int64_t)1 << 61))
    p <<= 1;
  return p;
}

dsv4_shape dsv4_shape_bucket(const dsv4_shape *s)
{
  dsv4_shape b = *s;
  for (int i = 0; i < s->n; i++) {
    int exact = (s->op == DSV4_OP_SPARSE_DECODE && i == 4) ||
                ((s->op == DSV4_OP_PAGED_MQA_LOGITS || s->op == DSV4_OP_PAGED_MQA_LOGITS_TOPK) && i == 1) ||
                (s->op == DSV4_OP_PAGED_MQA_LOGITS_TOPK && i == 3);
    if (!exact)
      b.dim[i] = pow2ceil(s->dim[i]);
  }
  return b;
}

void dsv4_shape_format(const dsv4_shape *s, char *out, size_t n)
{
  const char *const *names;
  int m = dsv4_shape_names(s->op, &names);
  size_t o = 0;
  out[0] = 0;
  for (int i = 0; i < m && i < s->n && o < n; i++)
    o += (size_t)snprintf(out + o, n - o, "%s%s=%lld", i ? "," : "", names[i], (long long)s->dim[i]);
}

int dsv4_shape_parse(int op, const char *text, dsv4_shape *out)
{
  const char *const *names;
  int m = dsv4_shape_names(op, &names);
  if (!m)
    return 1;
  memset(out, 0, sizeof *out);
  out->op = op, out->n = m;
  int seen[DSV4_SHAPE_DIMS] = {0};
  const char *p = text;
  while (*p) {
    const char *eq = strchr(p, '='), *comma = strchr(p, ',');
    if (!eq || (comma && comma < eq))
      return 1;
    int k = -1;
    for (int i = 0; i < m; i++)
      if (strlen(names[i]) == (size_t)(eq - p) && !strncmp(p, names[i], (size_t)(eq - p)))
        k = i;
    if (k < 0 || seen[k]++)
      return 1;
    char *end;
    errno = 0;
    long long v = strtoll(eq + 1, &end, 10);
    if (errno || end == eq + 1 || v < 0 || (*end && *end != ','))
      return 1;
    out->dim[k] = v;
    p = *end ? end + 1 : end;
  }
  for (int i = 0; i < m; i++)
    if (!seen[i])
      return 1;
  return 0;
}

int dsv4_shape_check_bucket(const dsv4_shape *s, char *why, size_t n)
{
  const char *const *names;
  int m = dsv4_shape_names(s->op, &names);
  if (!m || s->n != m) {
    snprintf(why, n, "%d bucket dims for op %s, which has %d", s->n, dsv4_tune_op_name(s->op), m);
    return 1;
  }
  dsv4_shape b = dsv4_shape_bucket(s);
  for (int i = 0; i < m; i++) {
    if (s->dim[i] < 0) {
      snprintf(why, n, "bucket dim %s %lld is negative", names[i], (long long)s->dim[i]);
      return 1;
    }
    if (b.dim[i] != s->dim[i]) {
      snprintf(why, n, "bucket dims are not a bucket: %s=%lld is not a power of two (a call's %s %lld falls in "
               "the bucket %s=%lld: the runtime rounds a shape's dims up to powers of two)", names[i],
               (long long)s->dim[i], names[i], (long long)s->dim[i], names[i], (long long)b.dim[i]);
      return 1;
    }
  }
  return 0;
}
