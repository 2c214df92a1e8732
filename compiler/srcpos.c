/* srcpos.c -- find the source line of a field inside a Lua table constructor.
 *
 * A minimal Lua lexer (names, numbers, short and long strings with escapes,
 * line and block comments, multi-character operators so `==` is never read
 * as `=`) feeds a walker that understands table-constructor fields:
 * `name = v`, `[k] = v` and positional `v`, separated by `,` or `;`.  The
 * lexer always runs from the start of the file so a `{` inside a string or
 * comment that began on an earlier line is never mistaken for a table.
 * Nothing here allocates, prints or exits.
 */
#include "srcpos.h"

#include <string.h>

enum { T_EOF, T_NAME, T_NUMBER, T_STRING, T_PUNCT };

typedef struct {
  const char *s; /* whole file text */
  size_t n;      /* its length */
  size_t i;      /* next byte to read */
  int line;      /* 1-based line of s[i] */
} lexer;

typedef struct {
  int kind;      /* T_* */
  int line;      /* line of the token's first byte */
  size_t start;  /* token bytes [start, end) */
  size_t end;
  size_t cstart; /* T_STRING: content bytes [cstart, cend) */
  size_t cend;
  int is_long;   /* T_STRING: long-bracket string (no escapes) */
  char op[4];    /* T_PUNCT: the operator text, NUL-terminated */
} token;

/* Byte at offset i, or 0 past the end: lets look-ahead stay bounded. */
static int at(const lexer *lx, size_t i) {
  return i < lx->n ? (unsigned char)lx->s[i] : 0;
}

/* Consume one byte, counting \n, \r, \r\n and \n\r as one newline like Lua. */
static void adv(lexer *lx) {
  int c = at(lx, lx->i);
  lx->i++;
  if (c == '\n' || c == '\r') {
    int d = at(lx, lx->i);
    if ((d == '\n' || d == '\r') && d != c) lx->i++;
    lx->line++;
  }
}

/* Level of a long bracket `[==[` opening at i (number of '='), or -1. */
static int long_open_level(const lexer *lx, size_t i) {
  size_t j = i + 1;
  int level = 0;
  if (at(lx, i) != '[') return -1;
  while (j < lx->n && lx->s[j] == '=') {
    j++;
    level++;
  }
  return (j < lx->n && lx->s[j] == '[') ? level : -1;
}

/* Skip a long bracket body up to its `]==]`; *body_end gets where the body
 * stops (the closing bracket, or EOF when unterminated). */
static void skip_long_body(lexer *lx, int level, size_t *body_end) {
  while (lx->i < lx->n) {
    if (lx->s[lx->i] == ']') {
      size_t j = lx->i + 1;
      int k = 0;
      while (j < lx->n && lx->s[j] == '=' && k < level) {
        j++;
        k++;
      }
      if (k == level && j < lx->n && lx->s[j] == ']') {
        *body_end = lx->i;
        lx->i = j + 1;
        return;
      }
    }
    adv(lx);
  }
  *body_end = lx->n;
}

/* Consume a long bracket opener `[==[` at lx->i and its body; Lua drops a
 * newline that directly follows the opener, so the content starts after it. */
static void lex_long(lexer *lx, int level, size_t *cstart, size_t *cend) {
  lx->i += (size_t)level + 2;
  if (at(lx, lx->i) == '\n' || at(lx, lx->i) == '\r') adv(lx);
  *cstart = lx->i;
  skip_long_body(lx, level, cend);
}

/* Is c a letter, digit or underscore (a Lua name byte)? */
static int is_name_char(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_';
}

/* Is c an ASCII decimal digit? */
static int is_digit(int c) { return c >= '0' && c <= '9'; }

/* Is c Lua whitespace (newlines are handled by adv)? */
static int is_space(int c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
         c == '\v';
}

/* Scan a short string opened by quote q at lx->i; an unterminated string ends
 * at the newline so one bad literal cannot swallow the rest of the file. */
static void lex_short_string(lexer *lx, int q, token *t) {
  lx->i++;
  t->cstart = lx->i;
  while (lx->i < lx->n) {
    int c = at(lx, lx->i);
    if (c == q) {
      t->cend = lx->i;
      lx->i++;
      return;
    }
    if (c == '\n' || c == '\r') break;
    if (c == '\\') {
      lx->i++;
      if (lx->i >= lx->n) break;
      if (at(lx, lx->i) == 'z') {
        lx->i++;
        while (lx->i < lx->n && is_space(at(lx, lx->i))) adv(lx);
        continue;
      }
      adv(lx); /* escaped byte, possibly an escaped newline */
      continue;
    }
    lx->i++;
  }
  t->cend = lx->i;
}

/* Scan a number: digits, '.', hex digits and a signed exponent. */
static void lex_number(lexer *lx) {
  int hex = at(lx, lx->i) == '0' &&
            (at(lx, lx->i + 1) == 'x' || at(lx, lx->i + 1) == 'X');
  if (hex) lx->i += 2;
  for (;;) {
    int c = at(lx, lx->i);
    int e = hex ? (c == 'p' || c == 'P') : (c == 'e' || c == 'E');
    if (e && (at(lx, lx->i + 1) == '+' || at(lx, lx->i + 1) == '-')) {
      lx->i += 2;
    } else if (is_name_char(c) || c == '.') {
      lx->i++;
    } else {
      return;
    }
  }
}

/* Read the next token, skipping whitespace and comments. */
static void next_token(lexer *lx, token *t) {
  static const char *const ops[] = {"...", "==", "~=", "<=", ">=", "//",
                                    "::",  "<<", ">>", ".."};
  memset(t, 0, sizeof *t);
  for (;;) {
    int c;
    while (lx->i < lx->n && is_space(at(lx, lx->i))) adv(lx);
    t->line = lx->line;
    t->start = lx->i;
    if (lx->i >= lx->n) {
      t->kind = T_EOF;
      t->end = lx->i;
      return;
    }
    c = at(lx, lx->i);
    if (c == '-' && at(lx, lx->i + 1) == '-') {
      int level;
      lx->i += 2;
      level = long_open_level(lx, lx->i);
      if (level >= 0) {
        size_t cs, ce;
        lex_long(lx, level, &cs, &ce);
      } else {
        while (lx->i < lx->n && at(lx, lx->i) != '\n' && at(lx, lx->i) != '\r')
          lx->i++;
      }
      continue;
    }
    if (is_name_char(c) && !is_digit(c)) {
      while (lx->i < lx->n && is_name_char(at(lx, lx->i))) lx->i++;
      t->kind = T_NAME;
    } else if (is_digit(c) || (c == '.' && is_digit(at(lx, lx->i + 1)))) {
      lex_number(lx);
      t->kind = T_NUMBER;
    } else if (c == '"' || c == '\'') {
      lex_short_string(lx, c, t);
      t->kind = T_STRING;
    } else if (c == '[' && long_open_level(lx, lx->i) >= 0) {
      lex_long(lx, long_open_level(lx, lx->i), &t->cstart, &t->cend);
      t->kind = T_STRING;
      t->is_long = 1;
    } else {
      size_t k, len = 1;
      for (k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        size_t ol = strlen(ops[k]);
        if (lx->n - lx->i >= ol && memcmp(lx->s + lx->i, ops[k], ol) == 0) {
          len = ol;
          break;
        }
      }
      memcpy(t->op, lx->s + lx->i, len);
      t->op[len] = '\0';
      lx->i += len;
      t->kind = T_PUNCT;
    }
    t->end = lx->i;
    return;
  }
}

/* Is t the punctuation token op? */
static int is_op(const token *t, const char *op) {
  return t->kind == T_PUNCT && strcmp(t->op, op) == 0;
}

/* Value of hex digit c, or -1. */
static int hex_val(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Append byte b to buf (capacity cap); returns 0 when it does not fit. */
static int put(char *buf, size_t cap, size_t *len, unsigned b) {
  if (*len >= cap) return 0;
  buf[(*len)++] = (char)b;
  return 1;
}

/* Decode a short string's escapes into buf; returns 0 if it does not fit or
 * an escape is malformed (the key then simply does not match). */
static int decode_short(const char *s, size_t a, size_t b, char *buf,
                        size_t cap, size_t *len) {
  size_t i = a;
  *len = 0;
  while (i < b) {
    int c = (unsigned char)s[i++];
    if (c != '\\') {
      if (!put(buf, cap, len, (unsigned)c)) return 0;
      continue;
    }
    if (i >= b) return 0;
    c = (unsigned char)s[i++];
    switch (c) {
      case 'a': c = '\a'; break;
      case 'b': c = '\b'; break;
      case 'f': c = '\f'; break;
      case 'n': c = '\n'; break;
      case 'r': c = '\r'; break;
      case 't': c = '\t'; break;
      case 'v': c = '\v'; break;
      case '\\': case '"': case '\'': break;
      case '\n': case '\r':
        if (i < b && (s[i] == '\n' || s[i] == '\r') && s[i] != c) i++;
        c = '\n';
        break;
      case 'z':
        while (i < b && is_space((unsigned char)s[i])) i++;
        continue;
      case 'x': {
        int h1 = i < b ? hex_val((unsigned char)s[i]) : -1;
        int h2 = i + 1 < b ? hex_val((unsigned char)s[i + 1]) : -1;
        if (h1 < 0 || h2 < 0) return 0;
        c = h1 * 16 + h2;
        i += 2;
        break;
      }
      case 'u': {
        unsigned long cp = 0;
        int nd = 0;
        if (i >= b || s[i] != '{') return 0;
        i++;
        while (i < b && hex_val((unsigned char)s[i]) >= 0 && nd < 8) {
          cp = cp * 16 + (unsigned long)hex_val((unsigned char)s[i++]);
          nd++;
        }
        if (nd == 0 || i >= b || s[i] != '}' || cp > 0x10FFFFul) return 0;
        i++;
        if (cp < 0x80) {
          if (!put(buf, cap, len, (unsigned)cp)) return 0;
        } else if (cp < 0x800) {
          if (!put(buf, cap, len, 0xC0u | (unsigned)(cp >> 6)) ||
              !put(buf, cap, len, 0x80u | (unsigned)(cp & 0x3F)))
            return 0;
        } else if (cp < 0x10000) {
          if (!put(buf, cap, len, 0xE0u | (unsigned)(cp >> 12)) ||
              !put(buf, cap, len, 0x80u | (unsigned)((cp >> 6) & 0x3F)) ||
              !put(buf, cap, len, 0x80u | (unsigned)(cp & 0x3F)))
            return 0;
        } else {
          if (!put(buf, cap, len, 0xF0u | (unsigned)(cp >> 18)) ||
              !put(buf, cap, len, 0x80u | (unsigned)((cp >> 12) & 0x3F)) ||
              !put(buf, cap, len, 0x80u | (unsigned)((cp >> 6) & 0x3F)) ||
              !put(buf, cap, len, 0x80u | (unsigned)(cp & 0x3F)))
            return 0;
        }
        continue;
      }
      default:
        if (is_digit(c)) {
          int v = c - '0', nd = 1;
          while (nd < 3 && i < b && is_digit((unsigned char)s[i])) {
            v = v * 10 + (s[i++] - '0');
            nd++;
          }
          if (v > 255) return 0;
          c = v;
        } else {
          return 0;
        }
    }
    if (!put(buf, cap, len, (unsigned)c)) return 0;
  }
  return 1;
}

/* Does string token t (a `["key"]` key) spell exactly name? */
static int string_equals(const lexer *lx, const token *t, const char *name) {
  char buf[256];
  size_t len, nl = strlen(name);
  if (t->is_long) {
    return t->cend - t->cstart == nl &&
           memcmp(lx->s + t->cstart, name, nl) == 0;
  }
  if (!decode_short(lx->s, t->cstart, t->cend, buf, sizeof buf, &len))
    return 0;
  return len == nl && memcmp(buf, name, nl) == 0;
}

/* Does name token t spell exactly name? */
static int name_equals(const lexer *lx, const token *t, const char *name) {
  size_t nl = strlen(name);
  return t->end - t->start == nl && memcmp(lx->s + t->start, name, nl) == 0;
}

/* Parse "#N" (N >= 1, decimal) into *n; 0 when elem is not positional. */
static int parse_positional(const char *elem, long *n) {
  long v = 0;
  const char *p = elem + 1;
  if (elem[0] != '#' || !is_digit((unsigned char)*p)) return 0;
  while (is_digit((unsigned char)*p)) {
    if (v > 100000000L) return 0;
    v = v * 10 + (*p++ - '0');
  }
  if (*p != '\0' || v < 1) return 0;
  *n = v;
  return 1;
}

/* Does name token t open a block closed by `end`/`until`?  `while` and `for`
 * open through their `do`, `elseif`/`else` do not nest. */
static int keyword_opens(const lexer *lx, const token *t) {
  return name_equals(lx, t, "function") || name_equals(lx, t, "do") ||
         name_equals(lx, t, "if") || name_equals(lx, t, "repeat");
}

/* Does name token t close a block (`end`, `until`)? */
static int keyword_closes(const lexer *lx, const token *t) {
  return name_equals(lx, t, "end") || name_equals(lx, t, "until");
}

enum { V_SEP, V_CLOSE, V_EOF, V_BRACE };

/* Skip one field value up to its separator at bracket depth 0.  Returns
 * V_SEP after `,`/`;`, V_CLOSE after the enclosing table's `}`, V_EOF, or,
 * when descend is set, V_BRACE right after the value's first `{`. */
static int skip_value(lexer *lx, int descend) {
  int depth = 0;
  for (;;) {
    token t;
    next_token(lx, &t);
    if (t.kind == T_EOF) return V_EOF;
    if (t.kind == T_NAME) { /* function bodies may hold `,` at depth 0 */
      if (keyword_opens(lx, &t)) depth++;
      else if (keyword_closes(lx, &t) && depth > 0) depth--;
      continue;
    }
    if (t.kind != T_PUNCT) continue;
    if (is_op(&t, "{")) {
      if (descend) return V_BRACE;
      depth++;
    } else if (is_op(&t, "(") || is_op(&t, "[")) {
      depth++;
    } else if (is_op(&t, "}") || is_op(&t, ")") || is_op(&t, "]")) {
      if (depth == 0) {
        if (is_op(&t, "}")) return V_CLOSE;
      } else {
        depth--;
      }
    } else if (depth == 0 && (is_op(&t, ",") || is_op(&t, ";"))) {
      return V_SEP;
    }
  }
}

/* Skip the rest of a `[key]` up to its matching `]`; first is the token
 * already read after `[`. */
static void skip_bracket_key(lexer *lx, const token *first) {
  int depth = 1;
  token t = *first;
  for (;;) {
    if (t.kind == T_EOF) return;
    if (is_op(&t, "(") || is_op(&t, "[") || is_op(&t, "{")) depth++;
    if (is_op(&t, ")") || is_op(&t, "]") || is_op(&t, "}")) {
      if (--depth == 0) return;
    }
    next_token(lx, &t);
  }
}

/* Walk the table whose `{` was just consumed, looking for elem.  On a match
 * *key_line gets its line, *key_at its byte offset, and *value the lexer
 * state at the start of its value; the table is always consumed to its end
 * so a later duplicate name wins.  Returns 1 when found. */
static int find_field(lexer *lx, const char *elem, int *key_line,
                      size_t *key_at, lexer *value) {
  long want = 0, pos = 0;
  int positional = parse_positional(elem, &want);
  int found = 0;
  for (;;) {
    lexer before = *lx;
    token t;
    int match = 0, line = 0, is_pos = 0;
    size_t at_ = 0;
    next_token(lx, &t);
    if (t.kind == T_EOF || is_op(&t, "}")) return found;
    if (is_op(&t, ",") || is_op(&t, ";")) continue; /* tolerate stray seps */
    if (t.kind == T_NAME) {
      lexer after_name = *lx;
      token u;
      next_token(lx, &u);
      if (is_op(&u, "=")) {
        match = !positional && name_equals(lx, &t, elem);
        line = t.line;
        at_ = t.start;
      } else {
        *lx = after_name;
        is_pos = 1; /* a name not followed by `=` starts an expression */
      }
    } else if (is_op(&t, "[")) {
      token k, u;
      lexer after_key;
      next_token(lx, &k);
      if (k.kind == T_STRING) {
        next_token(lx, &u);
        if (is_op(&u, "]")) {
          match = !positional && string_equals(lx, &k, elem);
          line = k.line;
          at_ = t.start; /* the key's `[` */
        } else {
          skip_bracket_key(lx, &u);
        }
      } else {
        skip_bracket_key(lx, &k);
      }
      after_key = *lx;
      next_token(lx, &u);
      if (!is_op(&u, "=")) *lx = after_key;
    } else {
      is_pos = 1;
    }
    if (is_pos) { /* positional item: its value starts at its first token */
      *lx = before;
      pos++;
      if (positional && pos == want) {
        match = 1;
        line = t.line;
        at_ = t.start;
      }
    }
    if (match) {
      found = 1;
      *key_line = line;
      *key_at = at_;
      *value = *lx;
    }
    switch (skip_value(lx, 0)) {
      case V_CLOSE:
      case V_EOF:
        return found;
      default:
        break;
    }
  }
}

/* 1-based column of byte offset at: bytes since the line's start. */
static int column_of(const char *src, size_t at) {
  size_t b = at;
  while (b > 0 && src[b - 1] != '\n' && src[b - 1] != '\r') b--;
  return (int)(at - b) + 1;
}

/* See srcpos.h. */
int dsv4_srcpos_find_col(const char *src, size_t len, int start_line,
                         const char *const *path, int npath, int *col) {
  lexer lx;
  token t;
  int best = start_line, d;
  *col = 0;
  if (src == NULL || start_line < 1 || npath < 0 || (npath > 0 && !path))
    return start_line;
  lx.s = src;
  lx.n = len;
  lx.i = 0;
  lx.line = 1;
  if (len > 0 && src[0] == '#') { /* shebang line, skipped like lua.c does */
    while (lx.i < lx.n && src[lx.i] != '\n' && src[lx.i] != '\r') lx.i++;
  }
  for (;;) {
    next_token(&lx, &t);
    if (t.kind == T_EOF) return start_line;
    if (t.line >= start_line && is_op(&t, "{")) break;
  }
  if (t.line == start_line) /* the constructor's `{`, for the table itself */
    *col = column_of(src, t.start);
  for (d = 0; d < npath; d++) {
    int line = 0;
    size_t at = 0;
    lexer value;
    if (path[d] == NULL || !find_field(&lx, path[d], &line, &at, &value))
      return best;
    best = line;
    *col = column_of(src, at);
    if (d == npath - 1) return best;
    lx = value;
    if (skip_value(&lx, 1) != V_BRACE) return best;
  }
  return best;
}

/* See srcpos.h. */
int dsv4_srcpos_find(const char *src, size_t len, int start_line,
                     const char *const *path, int npath) {
  int col;
  return dsv4_srcpos_find_col(src, len, start_line, path, npath, &col);
}
