/* lock.c -- the tuning lockfile and what its readers share (see lock.h). */
#define _POSIX_C_SOURCE 200809L
#include "lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dsv4_abi.h"

/* ---- SHA-256 (FIPS 180-4) ------------------------------------------------------ */

static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
    0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
    0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
    0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

static uint32_t ror(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void sha_block(dsv4_sha256_ctx *c, const unsigned char *p)
{
  uint32_t w[64], s[8];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  memcpy(s, c->h, sizeof s);
  for (int i = 0; i < 64; i++) {
    uint32_t S1 = ror(s[4], 6) ^ ror(s[4], 11) ^ ror(s[4], 25), ch = (s[4] & s[5]) ^ (~s[4] & s[6]);
    uint32_t t1 = s[7] + S1 + ch + K256[i] + w[i];
    uint32_t S0 = ror(s[0], 2) ^ ror(s[0], 13) ^ ror(s[0], 22), maj = (s[0] & s[1]) ^ (s[0] & s[2]) ^ (s[1] & s[2]);
    uint32_t t2 = S0 + maj;
    memmove(s + 1, s, 7 * sizeof *s);
    s[4] += t1;
    s[0] = t1 + t2;
  }
  for (int i = 0; i < 8; i++)
    c->h[i] += s[i];
}

void dsv4_sha256_init(dsv4_sha256_ctx *c)
{
  static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(c->h, h0, sizeof h0);
  c->bytes = 0, c->nbuf = 0;
}

void dsv4_sha256_update(dsv4_sha256_ctx *c, const void *data, size_t n)
{
  const unsigned char *p = data;
  c->bytes += n;
  while (n) {
    size_t k = 64 - c->nbuf < n ? 64 - c->nbuf : n;
    memcpy(c->buf + c->nbuf, p, k);
    c->nbuf += k, p += k, n -= k;
    if (c->nbuf == 64)
      sha_block(c, c->buf), c->nbuf = 0;
  }
}

void dsv4_sha256_final(dsv4_sha256_ctx *c, unsigned char out[32])
{
  uint64_t bits = c->bytes * 8;
  unsigned char pad = 0x80, zero = 0, len[8];
  dsv4_sha256_update(c, &pad, 1);
  while (c->nbuf != 56)
    dsv4_sha256_update(c, &zero, 1);
  for (int i = 0; i < 8; i++)
    len[i] = (unsigned char)(bits >> (56 - 8 * i));
  dsv4_sha256_update(c, len, 8);
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 4; j++)
      out[4 * i + j] = (unsigned char)(c->h[i] >> (24 - 8 * j));
}

void dsv4_hex(const unsigned char *p, size_t n, char *out)
{
  static const char d[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++)
    out[2 * i] = d[p[i] >> 4], out[2 * i + 1] = d[p[i] & 15];
  out[2 * n] = 0;
}

void dsv4_sha256_hex(const void *p, size_t n, char hex[65])
{
  dsv4_sha256_ctx c;
  unsigned char h[32];
  dsv4_sha256_init(&c);
  dsv4_sha256_update(&c, p, n);
  dsv4_sha256_final(&c, h);
  dsv4_hex(h, 32, hex);
}

/* ---- text building --------------------------------------------------------------- */

void dsv4_text_printf(dsv4_text *t, const char *fmt, ...)
{
  va_list ap;
  for (;;) {
    va_start(ap, fmt);
    int m = vsnprintf(t->s ? t->s + t->n : NULL, t->s ? t->cap - t->n : 0, fmt, ap);
    va_end(ap);
    if (m < 0 || t->failed) {
      t->failed = 1;
      return;
    }
    if (t->s && t->n + (size_t)m < t->cap) {
      t->n += (size_t)m;
      return;
    }
    size_t cap = (t->cap + (size_t)m + 64) * 2;
    char *s = realloc(t->s, cap);
    if (!s) {
      t->failed = 1;
      return;
    }
    t->s = s, t->cap = cap;
  }
}

void dsv4_text_json_str(dsv4_text *t, const char *s)
{
  dsv4_text_printf(t, "\"");
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      dsv4_text_printf(t, "\\%c", *p);
    else if (*p == '\n')
      dsv4_text_printf(t, "\\n");
    else if (*p == '\t')
      dsv4_text_printf(t, "\\t");
    else if (*p < 0x20)
      dsv4_text_printf(t, "\\u%04x", *p);
    else
      dsv4_text_printf(t, "%c", *p);
  }
  dsv4_text_printf(t, "\"");
}

/* ---- JSON reader ------------------------------------------------------------------- */

typedef struct {
  const char *p, *end, *start;
  char *err;
  size_t errlen;
  int failed;
  int line;    /* of j->p: newlines are white space only (a string refuses them) */
  long values; /* made so far (DSV4_JSON_MAX_VALUES) */
} jparser;

static void jfail(jparser *j, const char *what)
{
  if (!j->failed && j->err && j->errlen)
    snprintf(j->err, j->errlen, "line %d: %s", j->line, what);
  j->failed = 1;
}

static void jspace(jparser *j)
{
  while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
    j->line += *j->p++ == '\n';
}

static void json_clear(dsv4_json *v)
{
  if (!v)
    return;
  free(v->str);
  for (int i = 0; i < v->n; i++) {
    if (v->keys)
      free(v->keys[i]);
    if (v->items)
      json_clear(&v->items[i]);
  }
  free(v->keys);
  free(v->items);
  memset(v, 0, sizeof *v);
}

/* A string literal at j->p (past the quote on return). */
static char *jstring(jparser *j)
{
  if (j->p >= j->end || *j->p != '"')
    return jfail(j, "expected a string"), NULL;
  j->p++;
  size_t cap = 16, n = 0;
  char *s = malloc(cap);
  while (s && j->p < j->end && *j->p != '"') {
    unsigned c = (unsigned char)*j->p++;
    char enc[4];
    int m = 1;
    if (c < 0x20) {
      free(s);
      return jfail(j, "a control character in a string"), NULL;
    }
    if (c == '\\') {
      if (j->p >= j->end)
        break;
      char e = *j->p++;
      switch (e) {
      case '"': case '\\': case '/': c = (unsigned)e; break;
      case 'b': c = '\b'; break;
      case 'f': c = '\f'; break;
      case 'n': c = '\n'; break;
      case 'r': c = '\r'; break;
      case 't': c = '\t'; break;
      case 'u': {
        unsigned v = 0;
        for (int i = 0; i < 4; i++) {
          char h = j->p < j->end ? *j->p++ : 0;
          v = v * 16 + (unsigned)(h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                                                         : h >= 'A' && h <= 'F' ? h - 'A' + 10 : 99);
          if (v > 0xFFFF) {
            free(s);
            return jfail(j, "a bad \\u escape"), NULL;
          }
        }
        if (v == 0 || (v >= 0xD800 && v <= 0xDFFF))
          v = '?';
        if (v < 0x80)
          c = v;
        else if (v < 0x800)
          enc[0] = (char)(0xC0 | v >> 6), enc[1] = (char)(0x80 | (v & 63)), m = 2;
        else
          enc[0] = (char)(0xE0 | v >> 12), enc[1] = (char)(0x80 | ((v >> 6) & 63)), enc[2] = (char)(0x80 | (v & 63)),
          m = 3;
        break;
      }
      default:
        free(s);
        return jfail(j, "a bad escape in a string"), NULL;
      }
    }
    if (m == 1)
      enc[0] = (char)c;
    if (n + (size_t)m + 1 > cap) {
      char *t = realloc(s, cap *= 2);
      if (!t) {
        free(s);
        s = NULL;
        break;
      }
      s = t;
    }
    memcpy(s + n, enc, (size_t)m);
    n += (size_t)m;
  }
  if (!s)
    return jfail(j, "out of memory"), NULL;
  if (j->p >= j->end) {
    free(s);
    return jfail(j, "an unterminated string"), NULL;
  }
  j->p++;
  s[n] = 0;
  return s;
}

/* A number, parsed without the locale: mantissa digits and a decimal
 * exponent, exact for what the lockfile writes (integers, 4 decimals). */
static int jnumber(jparser *j, double *out)
{
  const char *p = j->p;
  int neg = 0;
  if (p < j->end && *p == '-')
    neg = 1, p++;
  if (p >= j->end || *p < '0' || *p > '9')
    return jfail(j, "expected a value"), 1;
  double mant = 0;
  int exp10 = 0, digits = 0;
  for (; p < j->end && *p >= '0' && *p <= '9'; p++)
    if (digits < 18)
      mant = mant * 10 + (*p - '0'), digits += mant > 0;
    else
      exp10++;
  if (p < j->end && *p == '.') {
    p++;
    if (p >= j->end || *p < '0' || *p > '9')
      return jfail(j, "a bad number"), 1;
    for (; p < j->end && *p >= '0' && *p <= '9'; p++)
      if (digits < 18)
        mant = mant * 10 + (*p - '0'), exp10--, digits += mant > 0;
  }
  if (p < j->end && (*p == 'e' || *p == 'E')) {
    p++;
    int eneg = 0, e = 0;
    if (p < j->end && (*p == '+' || *p == '-'))
      eneg = *p++ == '-';
    if (p >= j->end || *p < '0' || *p > '9')
      return jfail(j, "a bad number"), 1;
    for (; p < j->end && *p >= '0' && *p <= '9'; p++)
      e = e < 10000 ? e * 10 + (*p - '0') : e;
    exp10 += eneg ? -e : e;
  }
  double v = mant, scale = 1;
  for (int e = exp10 < 0 ? -exp10 : exp10; e > 0 && scale < 1e308; e--)
    scale *= 10; /* past 1e308: inf (1e400 reads as inf, not as 1e300) */
  if (scale >= 1e308 && (exp10 > 308 || exp10 < -308))
    scale = scale * 10;
  v = mant == 0 ? 0 : exp10 < 0 ? v / scale : v * scale;
  *out = neg ? -v : v;
  j->p = p;
  return 0;
}

static int jvalue(jparser *j, dsv4_json *v, int depth);

/* Room for one more member: the capacity doubles (8, 16, 32, ...), so a
 * list of n values costs O(n) copying. */
static int jgrow(dsv4_json *v, int with_keys)
{
  if (v->n == 0 || (v->n >= 8 && !(v->n & (v->n - 1)))) {
    size_t cap = v->n ? (size_t)v->n * 2 : 8;
    dsv4_json *it = realloc(v->items, cap * sizeof *it);
    if (!it)
      return 1;
    v->items = it;
    if (with_keys) {
      char **k = realloc(v->keys, cap * sizeof *k);
      if (!k)
        return 1;
      v->keys = k;
    }
  }
  memset(&v->items[v->n], 0, sizeof *v->items);
  if (with_keys)
    v->keys[v->n] = NULL;
  return 0;
}

static int jvalue(jparser *j, dsv4_json *v, int depth)
{
  memset(v, 0, sizeof *v);
  jspace(j);
  v->line = j->line;
  if (depth > 64)
    return jfail(j, "nested more than 64 levels deep"), 1;
  if (j->p >= j->end)
    return jfail(j, "unexpected end of text"), 1;
  if (++j->values > DSV4_JSON_MAX_VALUES)
    return jfail(j, "more than 2097152 values (a lockfile or manifest has far fewer)"), 1;
  char c = *j->p;
  if (c == '{' || c == '[') {
    int obj = c == '{';
    v->type = obj ? DSV4_JSON_OBJ : DSV4_JSON_ARR;
    j->p++;
    jspace(j);
    if (j->p < j->end && *j->p == (obj ? '}' : ']')) {
      j->p++;
      return 0;
    }
    for (;;) {
      if (jgrow(v, obj))
        return jfail(j, "out of memory"), 1;
      jspace(j);
      if (obj) {
        char *k = jstring(j);
        if (!k)
          return 1;
        v->keys[v->n] = k;
        jspace(j);
        if (j->p >= j->end || *j->p != ':') {
          v->n++;
          return jfail(j, "expected ':'"), 1;
        }
        j->p++;
      }
      int bad = jvalue(j, &v->items[v->n], depth + 1);
      v->n++;
      if (bad)
        return 1;
      jspace(j);
      if (j->p < j->end && *j->p == ',') {
        j->p++;
        continue;
      }
      if (j->p < j->end && *j->p == (obj ? '}' : ']')) {
        j->p++;
        return 0;
      }
      return jfail(j, obj ? "expected ',' or '}'" : "expected ',' or ']'"), 1;
    }
  }
  if (c == '"') {
    v->type = DSV4_JSON_STR;
    return (v->str = jstring(j)) == NULL;
  }
  static const struct {
    const char *w;
    int type;
    double num;
  } words[] = {{"true", DSV4_JSON_BOOL, 1}, {"false", DSV4_JSON_BOOL, 0}, {"null", DSV4_JSON_NULL, 0}};
  for (int i = 0; i < 3; i++) {
    size_t n = strlen(words[i].w);
    if ((size_t)(j->end - j->p) >= n && !memcmp(j->p, words[i].w, n)) {
      j->p += n;
      v->type = words[i].type, v->num = words[i].num;
      return 0;
    }
  }
  v->type = DSV4_JSON_NUM;
  return jnumber(j, &v->num);
}

dsv4_json *dsv4_json_parse(const char *text, size_t len, char *err, size_t errlen)
{
  jparser j = {text, text + len, text, err, errlen, 0, 1, 0};
  dsv4_json *v = calloc(1, sizeof *v);
  if (!v) {
    jfail(&j, "out of memory");
    return NULL;
  }
  if (!jvalue(&j, v, 0)) {
    jspace(&j);
    if (j.p != j.end)
      jfail(&j, "text after the value");
  }
  if (j.failed) {
    dsv4_json_free(v);
    return NULL;
  }
  return v;
}

void dsv4_json_free(dsv4_json *j)
{
  json_clear(j);
  free(j);
}

const dsv4_json *dsv4_json_get(const dsv4_json *j, const char *key)
{
  if (!j || j->type != DSV4_JSON_OBJ)
    return NULL;
  for (int i = j->n - 1; i >= 0; i--) /* the last of a repeated key, as most readers do */
    if (!strcmp(j->keys[i], key))
      return &j->items[i];
  return NULL;
}

const char *dsv4_json_str(const dsv4_json *j, const char *key, const char *def)
{
  const dsv4_json *v = dsv4_json_get(j, key);
  return v && v->type == DSV4_JSON_STR ? v->str : def;
}

double dsv4_json_num(const dsv4_json *j, const char *key, double def)
{
  const dsv4_json *v = dsv4_json_get(j, key);
  return v && (v->type == DSV4_JSON_NUM || v->type == DSV4_JSON_BOOL) ? v->num : def;
}

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
  if (op == DSV4_OP_PAGED_MQA_LOGITS)
    return *names = logits, 3;
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
    int exact = (s->op == DSV4_OP_SPARSE_DECODE && i == 4) || (s->op == DSV4_OP_PAGED_MQA_LOGITS && i == 1);
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

/* ---- gates ----------------------------------------------------------------------- */

static const char *const gate_names[DSV4_GATE_COUNT] = {"pass", "wrong", "nondeterministic", "crashed",
                                                        "timeout", "error", "skipped"};

const char *dsv4_gate_name(int g) { return g >= 0 && g < DSV4_GATE_COUNT ? gate_names[g] : "?"; }

int dsv4_gate_from_name(const char *s)
{
  for (int i = 0; i < DSV4_GATE_COUNT; i++)
    if (!strcmp(gate_names[i], s))
      return i;
  return -1;
}

/* How merging ranks a gate: a failure over a pass over a skip. */
static int gate_rank(int g) { return g == DSV4_GATE_SKIPPED ? 0 : g == DSV4_GATE_PASS ? 1 : 2; }

/* ---- the lock model ---------------------------------------------------------------- */

double dsv4_lock_round(double us)
{
  if (!(us == us) || us < 0)
    return 0;
  if (us > 1e9) /* what the reader takes: 1000 s a launch; and 1e9 * 1e4 is exact in a double */
    us = 1e9;
  return (double)(long long)(us * 1e4 + 0.5) / 1e4; /* no libm in the runtime */
}

/* Buckets of one op compare by their dims, others as text. */
static int bucket_cmp(const char *op, const char *a, const char *b)
{
  int o = dsv4_tune_op_from_name(op);
  dsv4_shape x, y;
  if (o && !dsv4_shape_parse(o, a, &x) && !dsv4_shape_parse(o, b, &y))
    for (int i = 0; i < x.n; i++)
      if (x.dim[i] != y.dim[i])
        return x.dim[i] < y.dim[i] ? -1 : 1;
  return strcmp(a, b);
}

int dsv4_lock_key_cmp(const dsv4_lock_key *a, const dsv4_lock_key *b)
{
  int c;
  if ((c = strcmp(a->kernel, b->kernel)) || (c = strcmp(a->op, b->op)) || (c = strcmp(a->target, b->target)) ||
      (c = strcmp(a->arch, b->arch)) || (c = strcmp(a->device, b->device)) ||
      (c = strcmp(a->toolchain, b->toolchain)) || (c = bucket_cmp(a->op, a->bucket, b->bucket)) ||
      (c = strcmp(a->spec_hash, b->spec_hash)))
    return c;
  return 0;
}

/* The hash of a key: FNV-1a of its fields.  Two keys are one entry's when
 * every field is the same text (key_cmp is 0 exactly then: equal bucket
 * dims still compare their text), so equality needs no bucket parsing. */
static uint32_t key_hash(const dsv4_lock_key *k)
{
  const char *f[8] = {k->spec_hash, k->kernel, k->op, k->target, k->arch, k->device, k->toolchain, k->bucket};
  uint32_t h = 2166136261u;
  for (int i = 0; i < 8; i++)
    for (const unsigned char *p = (const unsigned char *)f[i];; p++) {
      h = (h ^ *p) * 16777619u;
      if (!*p)
        break;
    }
  return h;
}

static int key_same(const dsv4_lock_key *a, const dsv4_lock_key *b)
{
  return !strcmp(a->bucket, b->bucket) && !strcmp(a->kernel, b->kernel) && !strcmp(a->spec_hash, b->spec_hash) &&
         !strcmp(a->device, b->device) && !strcmp(a->op, b->op) && !strcmp(a->target, b->target) &&
         !strcmp(a->arch, b->arch) && !strcmp(a->toolchain, b->toolchain);
}

void dsv4_lock_unindex(dsv4_lock *l)
{
  free(l->slot);
  l->slot = NULL, l->nslot = 0, l->indexed = 0;
}

/* Entry i into the index (which has room: at most half full). */
static void index_put(dsv4_lock *l, int i)
{
  uint32_t mask = (uint32_t)l->nslot - 1, h = key_hash(&l->e[i].key) & mask;
  while (l->slot[h])
    h = (h + 1) & mask;
  l->slot[h] = i + 1;
}

/* The index made current for entries [0, n + extra); -1 when memory runs out. */
static int index_update(dsv4_lock *l, int extra)
{
  if (l->indexed > l->n)
    dsv4_lock_unindex(l); /* entries were removed without a word */
  int want = l->n + extra;
  if (!l->slot || (long)want * 2 > l->nslot) {
    long ns = 64;
    while (ns < (long)want * 2)
      ns *= 2;
    int *slot = calloc((size_t)ns, sizeof *slot);
    if (!slot)
      return -1;
    free(l->slot);
    l->slot = slot, l->nslot = (int)ns, l->indexed = 0;
  }
  for (; l->indexed < l->n; l->indexed++)
    index_put(l, l->indexed);
  return 0;
}

dsv4_lock_entry *dsv4_lock_find(dsv4_lock *l, const dsv4_lock_key *k, int create)
{
  if (index_update(l, create ? 1 : 0))
    return NULL;
  uint32_t mask = (uint32_t)l->nslot - 1;
  for (uint32_t h = key_hash(k) & mask; l->slot[h]; h = (h + 1) & mask) {
    int i = l->slot[h] - 1;
    if (i < l->n && key_same(&l->e[i].key, k))
      return &l->e[i];
  }
  if (!create)
    return NULL;
  if (l->n == l->cap) {
    int cap = l->cap ? l->cap * 2 : 16;
    dsv4_lock_entry *e = realloc(l->e, (size_t)cap * sizeof *e);
    if (!e)
      return NULL;
    l->e = e, l->cap = cap;
  }
  dsv4_lock_entry *e = &l->e[l->n++];
  memset(e, 0, sizeof *e);
  e->key = *k;
  index_put(l, l->n - 1);
  l->indexed = l->n;
  return e;
}

dsv4_lock_variant *dsv4_lock_variant_find(dsv4_lock_entry *e, const char *name)
{
  for (int i = 0; i < e->nvariants; i++)
    if (!strcmp(e->v[i].name, name))
      return &e->v[i];
  return NULL;
}

/* Room for n more variants in e; -1 when memory runs out. */
static int variant_room(dsv4_lock_entry *e, int n)
{
  if (e->nvariants + n <= e->cap)
    return 0;
  long cap = e->cap ? e->cap : 16;
  while (cap < (long)e->nvariants + n)
    cap *= 2;
  if (cap > (1 << 28))
    return -1;
  dsv4_lock_variant *nv = realloc(e->v, (size_t)cap * sizeof *nv);
  if (!nv)
    return -1;
  e->v = nv, e->cap = (int)cap;
  return 0;
}

/* v as the file holds it into d: times rounded, a failure's zeroed, a pass's reason empty. */
static void variant_set(dsv4_lock_variant *d, const dsv4_lock_variant *v)
{
  *d = *v;
  d->median_us = dsv4_lock_round(v->median_us);
  d->min_us = dsv4_lock_round(v->min_us);
  d->max_us = dsv4_lock_round(v->max_us);
  if (d->gate != DSV4_GATE_PASS)
    d->median_us = d->min_us = d->max_us = 0, d->samples = 0;
  else
    d->reason[0] = 0;
}

int dsv4_lock_put(dsv4_lock_entry *e, const dsv4_lock_variant *v)
{
  dsv4_lock_variant *d = dsv4_lock_variant_find(e, v->name);
  if (!d) {
    if (variant_room(e, 1))
      return -1;
    d = &e->v[e->nvariants++];
  }
  variant_set(d, v);
  return 0;
}

/* The tie-break (DSV4_LOCK_TIE_BREAK): <0 when a beats b. */
static int better(const dsv4_lock_variant *a, const dsv4_lock_variant *b)
{
  if (a->median_us != b->median_us)
    return a->median_us < b->median_us ? -1 : 1;
  if (a->min_us != b->min_us)
    return a->min_us < b->min_us ? -1 : 1;
  return strcmp(a->name, b->name);
}

void dsv4_lock_decide(dsv4_lock_entry *e)
{
  const dsv4_lock_variant *w = NULL;
  for (int i = 0; i < e->nvariants; i++)
    if (e->v[i].gate == DSV4_GATE_PASS && (!w || better(&e->v[i], w) < 0))
      w = &e->v[i];
  snprintf(e->winner, sizeof e->winner, "%s", w ? w->name : "");
}

void dsv4_lock_free(dsv4_lock *l)
{
  for (int i = 0; i < l->n; i++)
    free(l->e[i].v);
  free(l->e);
  free(l->slot);
  memset(l, 0, sizeof *l);
}

/* ---- text ---------------------------------------------------------------------------- */

void dsv4_lock_variant_text(const dsv4_lock_variant *v, dsv4_text *t)
{
  dsv4_text_printf(t, "{\"name\": ");
  dsv4_text_json_str(t, v->name);
  dsv4_text_printf(t, ", \"gate\": \"%s\", \"median_us\": %.4f, \"min_us\": %.4f, \"max_us\": %.4f, \"samples\": %d, "
                      "\"code\": ", dsv4_gate_name(v->gate), v->median_us, v->min_us, v->max_us, v->samples);
  dsv4_text_json_str(t, v->code);
  dsv4_text_printf(t, ", \"reason\": ");
  dsv4_text_json_str(t, v->reason);
  dsv4_text_printf(t, "}");
}

static int cmp_variant(const void *a, const void *b)
{
  return strcmp(((const dsv4_lock_variant *)a)->name, ((const dsv4_lock_variant *)b)->name);
}

static int cmp_entry(const void *a, const void *b)
{
  return dsv4_lock_key_cmp(&((const dsv4_lock_entry *)a)->key, &((const dsv4_lock_entry *)b)->key);
}

/* l's entries in key order (buckets by their dims): each bucket parsed
 * once, not at every comparison. */
typedef struct {
  const dsv4_lock_entry *e;
  dsv4_shape s;
  int parsed;
} sort_item;

static int cmp_sort_item(const void *pa, const void *pb)
{
  const sort_item *x = pa, *y = pb;
  const dsv4_lock_key *a = &x->e->key, *b = &y->e->key;
  int c;
  if ((c = strcmp(a->kernel, b->kernel)) || (c = strcmp(a->op, b->op)) || (c = strcmp(a->target, b->target)) ||
      (c = strcmp(a->arch, b->arch)) || (c = strcmp(a->device, b->device)) ||
      (c = strcmp(a->toolchain, b->toolchain)))
    return c;
  if (x->parsed && y->parsed) /* as bucket_cmp: the same op, so the same dims */
    for (int i = 0; i < x->s.n; i++)
      if (x->s.dim[i] != y->s.dim[i])
        return x->s.dim[i] < y->s.dim[i] ? -1 : 1;
  if ((c = strcmp(a->bucket, b->bucket)) || (c = strcmp(a->spec_hash, b->spec_hash)))
    return c;
  return 0;
}

static void sort_entries(dsv4_lock *l)
{
  sort_item *it = malloc((size_t)l->n * sizeof *it);
  dsv4_lock_entry *sorted = malloc((size_t)l->n * sizeof *sorted);
  if (!it || !sorted) { /* short of memory: the slower sort, in place */
    free(it), free(sorted);
    qsort(l->e, (size_t)l->n, sizeof *l->e, cmp_entry);
  } else {
    for (int i = 0; i < l->n; i++) {
      int o = dsv4_tune_op_from_name(l->e[i].key.op);
      it[i].e = &l->e[i];
      it[i].parsed = o && !dsv4_shape_parse(o, l->e[i].key.bucket, &it[i].s);
    }
    qsort(it, (size_t)l->n, sizeof *it, cmp_sort_item);
    for (int i = 0; i < l->n; i++)
      sorted[i] = *it[i].e;
    memcpy(l->e, sorted, (size_t)l->n * sizeof *sorted);
    free(it), free(sorted);
  }
  dsv4_lock_unindex(l);
}

static void field(dsv4_text *t, const char *name, const char *value, const char *after)
{
  dsv4_text_printf(t, "\"%s\": ", name);
  dsv4_text_json_str(t, value);
  dsv4_text_printf(t, "%s", after);
}

char *dsv4_lock_format(dsv4_lock *l, size_t *len)
{
  dsv4_text t = {0};
  if (l->n)
    sort_entries(l);
  dsv4_text_printf(&t, "{\n  \"format\": \"%s\",\n  \"tie_break\": \"%s\",\n  \"entries\": [", DSV4_LOCK_FORMAT,
                   DSV4_LOCK_TIE_BREAK);
  for (int i = 0; i < l->n; i++) {
    dsv4_lock_entry *e = &l->e[i];
    if (e->nvariants)
      qsort(e->v, (size_t)e->nvariants, sizeof *e->v, cmp_variant);
    dsv4_lock_decide(e);
    dsv4_text_printf(&t, "%s\n    {\n      ", i ? "," : "");
    field(&t, "kernel", e->key.kernel, ", ");
    field(&t, "op", e->key.op, ", ");
    field(&t, "target", e->key.target, ", ");
    field(&t, "arch", e->key.arch, ",\n      ");
    field(&t, "device", e->key.device, ",\n      ");
    field(&t, "toolchain", e->key.toolchain, ",\n      ");
    field(&t, "spec_hash", e->key.spec_hash, ",\n      ");
    field(&t, "bucket", e->key.bucket, ", ");
    field(&t, "shape", e->shape, ", ");
    dsv4_text_printf(&t, "\"seed\": %lld,\n      ", e->seed);
    field(&t, "winner", e->winner, ",\n      \"variants\": [");
    for (int k = 0; k < e->nvariants; k++) {
      dsv4_text_printf(&t, "%s\n        ", k ? "," : "");
      dsv4_lock_variant_text(&e->v[k], &t);
    }
    dsv4_text_printf(&t, "%s]\n    }", e->nvariants ? "\n      " : "");
  }
  dsv4_text_printf(&t, "%s]\n}\n", l->n ? "\n  " : "");
  if (t.failed) {
    free(t.s);
    return NULL;
  }
  if (len)
    *len = t.n;
  return t.s;
}

/* The JSON type's name, for messages. */
static const char *jtype(const dsv4_json *v)
{
  static const char *const names[] = {"null", "a boolean", "a number", "a string", "a list", "an object"};
  return v->type >= 0 && v->type <= DSV4_JSON_OBJ ? names[v->type] : "?";
}

/* A string member copied into buf; 1 (with err naming the line) when of
 * another type, too long, or missing and required (absent and optional: ""). */
static int take_str(const dsv4_json *o, const char *key, char *buf, size_t n, int required, const char *where,
                    char *err, size_t errlen)
{
  const dsv4_json *v = dsv4_json_get(o, key);
  if (!v || v->type != DSV4_JSON_STR) {
    if (!required && !v) {
      buf[0] = 0;
      return 0;
    }
    if (!v)
      snprintf(err, errlen, "line %d: %s: '%s' is missing", o->line, where, key);
    else
      snprintf(err, errlen, "line %d: %s: '%s' is %s, not a string", v->line, where, key, jtype(v));
    return 1;
  }
  if (strlen(v->str) >= n) {
    snprintf(err, errlen, "line %d: %s: '%s' is longer than %zu characters", v->line, where, key, n - 1);
    return 1;
  }
  snprintf(buf, n, "%s", v->str);
  return 0;
}

/* A number member in [lo, hi] (whole when whole) into *out; 1 (with err
 * naming the line) when of another type, out of range, or missing and
 * required (absent and optional: *out unchanged). */
static int take_num(const dsv4_json *o, const char *key, double lo, double hi, int whole, int required,
                    const char *where, double *out, char *err, size_t errlen)
{
  const dsv4_json *v = dsv4_json_get(o, key);
  if (!v) {
    if (!required)
      return 0;
    snprintf(err, errlen, "line %d: %s: '%s' is missing (a passing variant needs its times)", o->line, where, key);
    return 1;
  }
  if (v->type != DSV4_JSON_NUM) {
    snprintf(err, errlen, "line %d: %s: '%s' is %s, not a number", v->line, where, key, jtype(v));
    return 1;
  }
  /* range first: a whole-number test casts, which only an in-range value may */
  if (!(v->num >= lo && v->num <= hi) || (whole && (double)(long long)v->num != v->num)) {
    snprintf(err, errlen, "line %d: %s: '%s' is %.16g; it takes %s from %.16g to %.16g", v->line, where, key, v->num,
             whole ? "a whole number" : "a number", lo, hi);
    return 1;
  }
  *out = v->num;
  return 0;
}

/* The largest seed: a JSON number holds every whole number below 2^53. */
#define SEED_MAX 9007199254740991.0

typedef struct {
  const char *name;
  int line, j;
} vname;

static int cmp_vname(const void *a, const void *b)
{
  const vname *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  return c ? c : x->j - y->j;
}

/* Entry e's variants, read from list vs (after the entry's key). */
static int parse_variants(dsv4_lock_entry *e, const dsv4_json *vs, const char *where, char *err, size_t errlen)
{
  if (vs->n && variant_room(e, vs->n)) {
    snprintf(err, errlen, "out of memory");
    return 1;
  }
  for (int j = 0; j < vs->n; j++) {
    const dsv4_json *x = &vs->items[j];
    dsv4_lock_variant v;
    memset(&v, 0, sizeof v);
    char vw[96], gate[24];
    snprintf(vw, sizeof vw, "%s variant %d", where, j + 1);
    if (x->type != DSV4_JSON_OBJ) {
      snprintf(err, errlen, "line %d: %s is %s, not an object", x->line, vw, jtype(x));
      return 1;
    }
    if (take_str(x, "name", v.name, sizeof v.name, 1, vw, err, errlen) ||
        take_str(x, "gate", gate, sizeof gate, 1, vw, err, errlen) ||
        take_str(x, "code", v.code, sizeof v.code, 0, vw, err, errlen) ||
        take_str(x, "reason", v.reason, sizeof v.reason, 0, vw, err, errlen))
      return 1;
    if ((v.gate = dsv4_gate_from_name(gate)) < 0) {
      snprintf(err, errlen, "line %d: %s: unknown gate '%s'", dsv4_json_get(x, "gate")->line, vw, gate);
      return 1;
    }
    /* a pass is ranked by its times: each must be there, a number; a
     * failure's are not used, but a present one is still a number */
    int pass = v.gate == DSV4_GATE_PASS;
    double samples = 0;
    if (take_num(x, "median_us", 0, 1e9, 0, pass, vw, &v.median_us, err, errlen) ||
        take_num(x, "min_us", 0, 1e9, 0, pass, vw, &v.min_us, err, errlen) ||
        take_num(x, "max_us", 0, 1e9, 0, pass, vw, &v.max_us, err, errlen) ||
        take_num(x, "samples", 0, 1e9, 1, 0, vw, &samples, err, errlen))
      return 1;
    v.samples = (int)samples;
    variant_set(&e->v[e->nvariants++], &v);
  }
  if (e->nvariants < 2)
    return 0;
  /* no name twice: sorted, neighbours compared (not each against all) */
  vname *nm = malloc((size_t)e->nvariants * sizeof *nm);
  if (!nm) {
    snprintf(err, errlen, "out of memory");
    return 1;
  }
  for (int j = 0; j < e->nvariants; j++)
    nm[j] = (vname){e->v[j].name, vs->items[j].line, j};
  qsort(nm, (size_t)e->nvariants, sizeof *nm, cmp_vname);
  for (int j = 1; j < e->nvariants; j++)
    if (!strcmp(nm[j].name, nm[j - 1].name)) {
      snprintf(err, errlen, "line %d: %s variant %d repeats variant %s (line %d)", nm[j].line, where, nm[j].j + 1,
               nm[j].name, nm[j - 1].line);
      free(nm);
      return 1;
    }
  free(nm);
  qsort(e->v, (size_t)e->nvariants, sizeof *e->v, cmp_variant);
  return 0;
}

int dsv4_lock_parse(const char *text, size_t len, dsv4_lock *out, char *err, size_t errlen)
{
  char jerr[160];
  memset(out, 0, sizeof *out);
  if (len > DSV4_LOCK_MAX_BYTES) {
    snprintf(err, errlen, "%zu bytes; a lockfile is at most %zu MiB", len, DSV4_LOCK_MAX_BYTES >> 20);
    return -1;
  }
  dsv4_json *root = dsv4_json_parse(text, len, jerr, sizeof jerr);
  if (!root) {
    snprintf(err, errlen, "not JSON: %s", jerr);
    return -1;
  }
  int rc = -1;
  const char *fmt = dsv4_json_str(root, "format", NULL);
  const dsv4_json *entries = dsv4_json_get(root, "entries");
  if (!fmt || strcmp(fmt, DSV4_LOCK_FORMAT)) {
    const dsv4_json *f = dsv4_json_get(root, "format");
    snprintf(err, errlen, "line %d: format is '%s', not '%s'", f ? f->line : root->line, fmt ? fmt : "(missing)",
             DSV4_LOCK_FORMAT);
    goto done;
  }
  if (!entries || entries->type != DSV4_JSON_ARR) {
    snprintf(err, errlen, "line %d: 'entries' is %s, not a list", entries ? entries->line : root->line,
             entries ? jtype(entries) : "missing");
    goto done;
  }
  for (int i = 0; i < entries->n; i++) {
    const dsv4_json *o = &entries->items[i];
    char where[64];
    snprintf(where, sizeof where, "entry %d", i + 1);
    dsv4_lock_key k;
    memset(&k, 0, sizeof k);
    if (o->type != DSV4_JSON_OBJ) {
      snprintf(err, errlen, "line %d: %s is %s, not an object", o->line, where, jtype(o));
      goto done;
    }
    if (take_str(o, "kernel", k.kernel, sizeof k.kernel, 1, where, err, errlen) ||
        take_str(o, "op", k.op, sizeof k.op, 1, where, err, errlen) ||
        take_str(o, "target", k.target, sizeof k.target, 1, where, err, errlen) ||
        take_str(o, "arch", k.arch, sizeof k.arch, 1, where, err, errlen) ||
        take_str(o, "device", k.device, sizeof k.device, 1, where, err, errlen) ||
        take_str(o, "toolchain", k.toolchain, sizeof k.toolchain, 1, where, err, errlen) ||
        take_str(o, "spec_hash", k.spec_hash, sizeof k.spec_hash, 1, where, err, errlen) ||
        take_str(o, "bucket", k.bucket, sizeof k.bucket, 1, where, err, errlen))
      goto done;
    /* a known op's bucket: the runtime's check, and one text a bucket (two
     * spellings of one bucket would be two entries) */
    int op = dsv4_tune_op_from_name(k.op);
    if (op) {
      dsv4_shape s;
      char why[300], canon[DSV4_LOCK_TEXT];
      int bl = dsv4_json_get(o, "bucket")->line;
      if (dsv4_shape_parse(op, k.bucket, &s)) {
        const char *const *names;
        int m = dsv4_shape_names(op, &names);
        char form[120] = "";
        for (int d = 0, at = 0; d < m; d++)
          at += snprintf(form + at, sizeof form - (size_t)at, "%s%s=N", d ? "," : "", names[d]);
        snprintf(err, errlen, "line %d: %s: bucket '%s' is not op %s's %s", bl, where, k.bucket, k.op, form);
        goto done;
      }
      if (dsv4_shape_check_bucket(&s, why, sizeof why)) {
        snprintf(err, errlen, "line %d: %s: bucket '%s': %s", bl, where, k.bucket, why);
        goto done;
      }
      dsv4_shape_format(&s, canon, sizeof canon);
      if (strcmp(canon, k.bucket)) {
        snprintf(err, errlen, "line %d: %s: bucket '%s' is written '%s'", bl, where, k.bucket, canon);
        goto done;
      }
    }
    int before = out->n;
    dsv4_lock_entry *e = dsv4_lock_find(out, &k, 1);
    if (!e) {
      snprintf(err, errlen, "out of memory");
      goto done;
    }
    if (out->n == before) {
      snprintf(err, errlen, "line %d: %s repeats the key of an earlier entry (kernel %s, bucket %s)", o->line, where,
               k.kernel, k.bucket);
      goto done;
    }
    double seed = 0;
    if (take_str(o, "shape", e->shape, sizeof e->shape, 0, where, err, errlen) ||
        take_num(o, "seed", 0, SEED_MAX, 1, 0, where, &seed, err, errlen))
      goto done;
    e->seed = (long long)seed;
    const dsv4_json *vs = dsv4_json_get(o, "variants");
    if (!vs || vs->type != DSV4_JSON_ARR) {
      if (vs)
        snprintf(err, errlen, "line %d: %s: 'variants' is %s, not a list", vs->line, where, jtype(vs));
      else
        snprintf(err, errlen, "line %d: %s: 'variants' is missing", o->line, where);
      goto done;
    }
    if (parse_variants(e, vs, where, err, errlen))
      goto done;
    dsv4_lock_decide(e);
  }
  rc = 0;
done:
  dsv4_json_free(root);
  if (rc)
    dsv4_lock_free(out);
  return rc;
}

int dsv4_tune_read_file(const char *path, char **text, size_t *len)
{
  FILE *f = fopen(path, "rb");
  if (!f)
    return -1;
  size_t n = 0, cap = 4096;
  char *s = malloc(cap);
  size_t r;
  while (s && (r = fread(s + n, 1, cap - n - 1, f)) > 0) {
    n += r;
    if (cap - n - 1 == 0) {
      char *t = realloc(s, cap *= 2);
      if (!t)
        free(s);
      s = t;
    }
  }
  int bad = ferror(f);
  fclose(f);
  if (!s || bad) {
    free(s);
    return -1;
  }
  s[n] = 0;
  *text = s, *len = n;
  return 0;
}

int dsv4_tune_read_file_max(const char *path, size_t max, char **text, size_t *len)
{
  /* O_NONBLOCK: opening a FIFO would wait for a writer (for ever) */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return -1;
  struct stat st;
  int why = fstat(fd, &st) ? errno : !S_ISREG(st.st_mode) ? EINVAL : (uint64_t)st.st_size > max ? EFBIG : 0;
  FILE *f = why ? NULL : fdopen(fd, "rb");
  if (!f) { /* a FIFO or /dev/zero would be read for ever; a huge file needs no reading to refuse */
    why = why ? why : errno;
    close(fd);
    errno = why;
    return -1;
  }
  /* the size may change under us: read at most max + 1 bytes, refuse more */
  size_t cap = (size_t)st.st_size + 1, n = 0;
  char *s = malloc(cap + 1);
  size_t r;
  while (s && (r = fread(s + n, 1, cap - n, f)) > 0)
    if ((n += r) == cap) {
      if (n > max)
        break;
      size_t c2 = cap * 2 > max + 1 ? max + 1 : cap * 2;
      char *t = realloc(s, c2 + 1);
      if (!t)
        free(s);
      s = t, cap = c2;
    }
  int bad = ferror(f);
  fclose(f);
  if (!s || bad || n > max) {
    free(s);
    errno = !s ? ENOMEM : bad ? EIO : EFBIG;
    return -1;
  }
  s[n] = 0;
  *text = s, *len = n;
  return 0;
}

int dsv4_tune_write_file(const char *path, const void *p, size_t n)
{
  /* a path that is not a regular file (/dev/null, a FIFO, a terminal) is
   * written as it is: the rename below would replace it, a device node
   * included, with a regular file */
  struct stat st;
  if (!stat(path, &st) && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) {
      errno = EISDIR;
      return -1;
    }
    FILE *d = fopen(path, "wb");
    if (!d)
      return -1;
    size_t w = fwrite(p, 1, n, d);
    int bad = fclose(d) || w != n;
    if (bad && !errno)
      errno = EIO;
    return bad ? -1 : 0;
  }
  char tmp[4200];
  snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f)
    return -1;
  size_t w = fwrite(p, 1, n, f);
  if (fclose(f) || w != n || rename(tmp, path)) {
    int e = errno;
    unlink(tmp);
    errno = e;
    return -1;
  }
  return 0;
}

int dsv4_lock_read(const char *path, dsv4_lock *out, char *err, size_t errlen)
{
  char *text;
  size_t len;
  memset(out, 0, sizeof *out);
  if (dsv4_tune_read_file_max(path, DSV4_LOCK_MAX_BYTES, &text, &len)) {
    if (errno == EFBIG)
      snprintf(err, errlen, "%s: larger than a lockfile may be (%zu MiB)", path, DSV4_LOCK_MAX_BYTES >> 20);
    else if (errno == EINVAL)
      snprintf(err, errlen, "%s: not a regular file", path);
    else
      snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
    return -1;
  }
  char e2[400];
  int rc = dsv4_lock_parse(text, len, out, e2, sizeof e2);
  if (rc)
    snprintf(err, errlen, "%s: %s", path, e2);
  free(text);
  return rc;
}

int dsv4_lock_write(const char *path, dsv4_lock *l)
{
  size_t n;
  char *s = dsv4_lock_format(l, &n);
  if (!s) {
    errno = ENOMEM;
    return -1;
  }
  int rc = dsv4_tune_write_file(path, s, n);
  free(s);
  return rc;
}

/* ---- merging ------------------------------------------------------------------------- */

/* The variant merging keeps of a and b (see lock.h). */
static const dsv4_lock_variant *pick(const dsv4_lock_variant *a, const dsv4_lock_variant *b)
{
  int ra = gate_rank(a->gate), rb = gate_rank(b->gate);
  if (ra != rb)
    return ra > rb ? a : b;
  dsv4_text ta = {0}, tb = {0};
  dsv4_lock_variant_text(a, &ta);
  dsv4_lock_variant_text(b, &tb);
  int c = ta.s && tb.s ? strcmp(ta.s, tb.s) : 0;
  free(ta.s), free(tb.s);
  return c <= 0 ? a : b;
}

static int cmp_variant_pick(const void *a, const void *b)
{
  const dsv4_lock_variant *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  if (c)
    return c;
  const dsv4_lock_variant *p = pick(x, y); /* one name: the kept one first */
  return p == x ? (pick(y, x) == y ? 0 : -1) : 1;
}

/* f's variants into e: both lists sorted by name together, each name kept
 * once (pick), so an entry of m variants merges in O(m log m), not m^2. */
static int merge_variants(dsv4_lock_entry *e, const dsv4_lock_entry *f)
{
  if (!f->nvariants)
    return 0;
  if (variant_room(e, f->nvariants))
    return -1;
  for (int k = 0; k < f->nvariants; k++)
    variant_set(&e->v[e->nvariants++], &f->v[k]);
  qsort(e->v, (size_t)e->nvariants, sizeof *e->v, cmp_variant_pick);
  int m = 0;
  for (int k = 0; k < e->nvariants; k++)
    if (!m || strcmp(e->v[m - 1].name, e->v[k].name))
      e->v[m++] = e->v[k]; /* the first of a name is the one pick keeps */
  e->nvariants = m;
  return 0;
}

int dsv4_lock_merge(dsv4_lock *into, const dsv4_lock *from)
{
  for (int i = 0; i < from->n; i++) {
    const dsv4_lock_entry *f = &from->e[i];
    int before = into->n;
    dsv4_lock_entry *e = dsv4_lock_find(into, &f->key, 1);
    if (!e)
      return -1;
    if (into->n > before) {
      snprintf(e->shape, sizeof e->shape, "%s", f->shape);
      e->seed = f->seed;
    } else {
      if (f->seed < e->seed)
        e->seed = f->seed;
      if (strcmp(f->shape, e->shape) < 0)
        snprintf(e->shape, sizeof e->shape, "%s", f->shape);
    }
    if (merge_variants(e, f))
      return -1;
    dsv4_lock_decide(e);
  }
  return 0;
}
