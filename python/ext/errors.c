/* errors.c -- dsv4c.Error and dsv4c.ArgumentError from a runtime status,
 * and messages made to start with the argument's Python name. */
#include "ext.h"

PyObject *Error, *ArgumentError;
static int is_argument_status(dsv4rt_status s)
{
  switch (s) {
  case DSV4RT_ERR_INVALID_ARG:
  case DSV4RT_ERR_NULL_ARG:
  case DSV4RT_ERR_WRONG_CONTEXT:
  case DSV4RT_ERR_BUFFER_TOO_SMALL:
  case DSV4RT_ERR_OUT_OF_RANGE:
  case DSV4RT_ERR_MISALIGNED:
  case DSV4RT_ERR_ALIASING:
  case DSV4RT_ERR_NOT_FINITE:
  case DSV4RT_ERR_BAD_CONTENTS:
    return 1;
  default:
    return 0;
  }
}

/* Raise dsv4c.Error (ArgumentError for the argument statuses) with the
 * status code, its name and msg; returns NULL. */
PyObject *raise_status(dsv4rt_status s, const char *msg)
{
  PyObject *type = is_argument_status(s) ? ArgumentError : Error;
  PyObject *exc = PyObject_CallFunction(type, "s", msg && *msg ? msg : dsv4rt_status_name(s));
  if (!exc)
    return NULL;
  PyObject *code = PyLong_FromLong((long)s), *name = PyUnicode_FromString(dsv4rt_status_name(s));
  if (!code || !name || PyObject_SetAttrString(exc, "status", code) ||
      PyObject_SetAttrString(exc, "status_name", name)) {
    Py_XDECREF(code), Py_XDECREF(name), Py_DECREF(exc);
    return NULL;
  }
  Py_DECREF(code), Py_DECREF(name);
  PyErr_SetObject(type, exc);
  Py_DECREF(exc);
  return NULL;
}

/* The exception being raised, its message made to start with the
 * argument's Python name ("block_size: int too big to convert") where
 * CPython's own conversion raised it; dsv4c's errors and messages that
 * name the argument already are left as they are. */
void name_exception(const char *name)
{
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  if (!type)
    return;
  PyErr_NormalizeException(&type, &value, &tb);
  PyObject *str = value ? PyObject_Str(value) : NULL;
  const char *m = str ? PyUnicode_AsUTF8AndSize(str, NULL) : NULL;
  size_t n = strlen(name);
  if (!m || PyErr_GivenExceptionMatches(type, Error) ||
      (!strncmp(m, name, n) && (m[n] == ':' || m[n] == '[' || m[n] == ' '))) {
    PyErr_Clear();
    Py_XDECREF(str);
    PyErr_Restore(type, value, tb);
    return;
  }
  PyErr_Format(type, "%s: %s", name, m);
  Py_DECREF(str);
  Py_DECREF(type);
  Py_XDECREF(value), Py_XDECREF(tb);
}

/* A runtime status of an argument (dsv4rt's message names the C field:
 * "dsv4rt_sparse_decode: heads = 0 is outside [1, 4096]") as a message that
 * starts with the op's Python argument: "q: heads = 0 is outside [1, 4096]
 * (dsv4rt_sparse_decode)".  Fields that are an argument's own name
 * (indices[5], softmax_scale) keep it; the others map to the argument they
 * come from (heads, n_tokens: q's shape).  Other messages are left alone. */
void name_runtime_argument(int op, dsv4rt_status s, char *msg, size_t cap)
{
  static const struct {
    int op; /* -1: every op */
    const char *field, *arg;
  } map[] = {
      {-1, "num_blocks", "cache"}, {-1, "block_size", "cache"}, {-1, "block_stride", "cache"},
      {-1, "extra_num_blocks", "extra_cache"}, {-1, "extra_block_size", "extra_cache"},
      {-1, "extra_block_stride", "extra_cache"}, {-1, "opts->splits", "splits"}, {-1, "splits", "splits"},
      {DSV4_OP_DEQUANT_GATHER, "n", "indices"},
      {DSV4_OP_PAGED_GATHER, "num_requests", "seq_lens"}, {DSV4_OP_PAGED_GATHER, "out_rows", "out"},
      {DSV4_OP_PAGED_GATHER, "out_stride_m", "out"}, {DSV4_OP_PAGED_GATHER, "out_stride_r", "out"},
      {DSV4_OP_PAGED_GATHER, "max_blocks", "block_table"},
      {DSV4_OP_KV_INSERT, "n_tokens", "kv"}, {DSV4_OP_KV_INSERT, "n_insert", "slot_mapping"},
      {DSV4_OP_KV_INSERT, "max_pos", "cos_sin"}, {DSV4_OP_KV_INSERT, "heads", "q"},
      {DSV4_OP_KV_INSERT, "padded_heads", "q_out"},
      {DSV4_OP_SPARSE_DECODE, "n_tokens", "q"}, {DSV4_OP_SPARSE_DECODE, "heads", "q"},
      {DSV4_OP_SPARSE_DECODE, "topk", "indices"}, {DSV4_OP_SPARSE_DECODE, "extra_topk", "extra_indices"},
      {DSV4_OP_PAGED_MQA_LOGITS, "batch", "q"}, {DSV4_OP_PAGED_MQA_LOGITS, "next_n", "q"},
      {DSV4_OP_PAGED_MQA_LOGITS, "row_len", "logits"}, {DSV4_OP_PAGED_MQA_LOGITS, "row_stride", "logits"},
      {DSV4_OP_PAGED_MQA_LOGITS, "max_blocks", "block_table"},
      {DSV4_OP_TOPK, "rows", "logits"}, {DSV4_OP_TOPK, "row_len", "logits"}, {DSV4_OP_TOPK, "row_stride", "logits"},
      {DSV4_OP_PAGED_MQA_LOGITS_TOPK, "batch", "q"}, {DSV4_OP_PAGED_MQA_LOGITS_TOPK, "next_n", "q"},
      {DSV4_OP_PAGED_MQA_LOGITS_TOPK, "row_len", "row_len"},
      {DSV4_OP_PAGED_MQA_LOGITS_TOPK, "max_blocks", "block_table"},
  };
  if (!is_argument_status(s) || op < 0)
    return;
  const char *colon = strstr(msg, ": ");
  if (!colon || strncmp(msg, "dsv4rt_", 7))
    return;
  const char *rest = colon + 2, *f = rest;
  if (!strncmp(f, "output ", 7)) /* "output out shares memory with ..." */
    f += 7;
  char field[48];
  size_t n = 0;
  while (n + 1 < sizeof field && f[n] && (f[n] == '_' || f[n] == '-' || f[n] == '>' || (f[n] >= 'a' && f[n] <= 'z') ||
                                          (f[n] >= 'A' && f[n] <= 'Z') || (f[n] >= '0' && f[n] <= '9')))
    field[n] = f[n], n++;
  field[n] = 0;
  const char *arg = NULL;
  for (size_t i = 0; !arg && i < sizeof map / sizeof *map; i++)
    if ((map[i].op < 0 || map[i].op == op) && !strcmp(map[i].field, field))
      arg = map[i].arg;
  if (!arg && n) /* a field with the argument's own name: indices[5], softmax_scale */
    arg = field;
  if (!arg)
    return;
  char out[1200];
  size_t len = (size_t)snprintf(out, sizeof out, "%s: %s (%.*s)", arg, rest, (int)(colon - msg), msg);
  len = len < sizeof out ? len : sizeof out - 1;
  len = len < cap ? len : cap - 1;
  memcpy(msg, out, len);
  msg[len] = 0;
}

