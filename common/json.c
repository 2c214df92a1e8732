/* json.c -- the small JSON reader (see json.h). */
#include "json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
