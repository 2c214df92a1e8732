/* test_srcpos.c -- unit tests for dsv4_srcpos_find and _find_col
 * (compiler/srcpos.c), and the caret excerpt of diag.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag.h"
#include "srcpos.h"

static int passed, failed;

/* Run one lookup and compare with the expected line. */
static void check(const char *name, const char *src, int start,
                  const char *const *path, int npath, int want) {
  int got = dsv4_srcpos_find(src, strlen(src), start, path, npath);
  if (got == want) {
    passed++;
  } else {
    failed++;
    printf("FAIL %s: got line %d, want %d\n", name, got, want);
  }
}

/* Run one lookup and compare line and column with the expected ones. */
static void check_col(const char *name, const char *src, int start, const char *const *path, int npath, int want_line,
                      int want_col) {
  int col = -1, got = dsv4_srcpos_find_col(src, strlen(src), start, path, npath, &col);
  if (got == want_line && col == want_col) {
    passed++;
  } else {
    failed++;
    printf("FAIL %s: got %d:%d, want %d:%d\n", name, got, col, want_line, want_col);
  }
}

/* The excerpt of a diagnostic at line:col of src against the expected text. */
static void check_excerpt(const char *name, const char *src, int line, int col, const char *want) {
  dsv4_diag g = {.line = line, .col = col};
  char buf[256];
  dsv4_diag_excerpt(&g, src, strlen(src), buf, sizeof buf);
  if (!strcmp(buf, want)) {
    passed++;
  } else {
    failed++;
    printf("FAIL %s: got '%s', want '%s'\n", name, buf, want);
  }
}

#define PATH(...) ((const char *const[]){__VA_ARGS__})
#define NP(...) ((int)(sizeof(PATH(__VA_ARGS__)) / sizeof(const char *)))
#define CHECK(name, src, start, want, ...) \
  check(name, src, start, PATH(__VA_ARGS__), NP(__VA_ARGS__), want)
#define CHECK_COL(name, src, start, want_line, want_col, ...) \
  check_col(name, src, start, PATH(__VA_ARGS__), NP(__VA_ARGS__), want_line, want_col)

static const char *const SPEC =
    "-- spec file\n"                                        /* 1 */
    "local f = require 'x'\n"                               /* 2 */
    "layout {\n"                                            /* 3 */
    "  name = \"kv\",\n"                                    /* 4 */
    "  segments = {\n"                                      /* 5 */
    "    { dims = {0,448}, type = \"e4m3\" },\n"            /* 6 */
    "    { type = \"bf16\" } },\n"                          /* 7 */
    "}\n"                                                   /* 8 */
    "kernel {\n"                                            /* 9 */
    "  -- a comment with braces } { and tile = 9\n"         /* 10 */
    "  --[[ block { comment\n"                              /* 11 */
    "       tile = { } ]]\n"                                /* 12 */
    "  desc = \"string with { brace and = sign }\",\n"      /* 13 */
    "  quoted = 'it\\'s { } \\\" x',\n"                     /* 14 */
    "  long = [[ long { string\n"                           /* 15 */
    "   } ]],\n"                                            /* 16 */
    "  level = [==[ ]] } { ]==];\n"                         /* 17 */
    "  tile = {\n"                                          /* 18 */
    "    values_per_thread = 8,\n"                          /* 19 */
    "    tokens_per_cta = 4 },\n"                           /* 20 */
    "  ok = a == b, after = 1,\n"                           /* 21 */
    "  [\"key with space\"] = 3,\n"                         /* 22 */
    "  targets = {\n"                                       /* 23 */
    "    amdgcn = target { arch = \"gfx942\" },\n"          /* 24 */
    "    ptx = target( {\n"                                 /* 25 */
    "      arch = \"sm_90a\" } ),\n"                        /* 26 */
    "  },\n"                                                /* 27 */
    "}\n";                                                  /* 28 */

/* Run every case; exit status 1 when any failed. */
int main(void) {
  /* Named fields at the root, skipping comments and strings with braces. */
  CHECK("root name", SPEC, 3, 4, "name");
  CHECK("root segments", SPEC, 3, 5, "segments");
  CHECK("comments with braces", SPEC, 9, 18, "tile");
  CHECK("nested named", SPEC, 9, 19, "tile", "values_per_thread");
  CHECK("nested named 2", SPEC, 9, 20, "tile", "tokens_per_cta");
  /* Positional items inside arrays of tables. */
  CHECK("segments #2 type", SPEC, 3, 7, "segments", "#2", "type");
  CHECK("segments #1 type", SPEC, 3, 6, "segments", "#1", "type");
  CHECK("segments #1 dims #2", SPEC, 3, 6, "segments", "#1", "dims", "#2");
  CHECK("segments #2 item", SPEC, 3, 7, "segments", "#2");
  /* Missing keys: deepest found, or start_line. */
  CHECK("missing root", SPEC, 9, 9, "nope");
  CHECK("missing nested", SPEC, 9, 18, "tile", "nope");
  CHECK("missing positional", SPEC, 3, 5, "segments", "#3", "type");
  CHECK("missing in #2", SPEC, 3, 7, "segments", "#2", "dims");
  CHECK("no descend into scalar", SPEC, 3, 4, "name", "x");
  /* `==` is not `=`; `after` follows an `a == b` value. */
  CHECK("== in value", SPEC, 9, 21, "after");
  CHECK("positional a==b is not key a", SPEC, 9, 9, "a");
  /* ["key"] = and values that are calls with table arguments. */
  CHECK("string key", SPEC, 9, 22, "key with space");
  CHECK("call f {}", SPEC, 9, 24, "targets", "amdgcn", "arch");
  CHECK("call f({})", SPEC, 9, 26, "targets", "ptx", "arch");
  CHECK("long string level", SPEC, 9, 17, "level");
  CHECK("escaped quote string", SPEC, 9, 14, "quoted");
  /* Keys inside strings and comments are never matched. */
  CHECK("string content not key", SPEC, 9, 9, "sign");
  CHECK("comment content not key", SPEC, 3, 3, "tile");

  {
    static const char *const src2 =
        "return kernel { -- } {\n"                       /* 1 */
        "  \"first\"; 'second' ; {\n"                    /* 2 */
        "    x = 1 },\n"                                 /* 3 */
        "  n = 1, [2] = 'k', [\"s\\x74r\"] = 5,\n"       /* 4 */
        "  f(x, {1})\n"                                  /* 5 */
        "  ,   \n"                                       /* 6 */
        "  last = --[==[ ]] ]==] {\n"                    /* 7 */
        "    deep = { [[\n"                              /* 8 */
        "]], z = 1 } },\n"                               /* 9 */
        "  dup = 1,\n"                                   /* 10 */
        "  dup = 2 }\n";                                 /* 11 */
    CHECK("#1 on line 2", src2, 1, 2, "#1");
    CHECK("; separators #2", src2, 1, 2, "#2");
    CHECK("#3 table then x", src2, 1, 3, "#3", "x");
    CHECK("#4 after keyed items", src2, 1, 5, "#4");
    CHECK("#4 call arg table", src2, 1, 5, "#4", "#1");
    CHECK("escaped string key", src2, 1, 4, "str");
    CHECK("block comment before value", src2, 1, 9, "last", "deep", "z");
    CHECK("duplicate: last wins", src2, 1, 11, "dup");
    CHECK("#5 missing", src2, 1, 1, "#5");
    CHECK("bad index #0", src2, 1, 1, "#0");
  }
  {
    static const char *const fn =
        "kernel {\n"                                          /* 1 */
        "  check = function(k) local a, b = 1, 2\n"           /* 2 */
        "    if a then for i = 1, 2 do b = i end end\n"       /* 3 */
        "    repeat a = a + 1 until a > 3 return {x = a, y = b} end,\n" /* 4 */
        "  tile = { vpt = 4 },\n"                             /* 5 */
        "}\n";
    CHECK("function value with commas", fn, 1, 5, "tile", "vpt");
    CHECK("function value's inner table is not a field", fn, 1, 1, "x");
  }
  {
    static const char *const crlf = "k {\r\n a = 1,\r\n\r\n b = { c = 2 }\r\n}\r\n";
    CHECK("crlf", crlf, 1, 4, "b", "c");
    CHECK("lone cr", "k {\r a = 1,\r b = 2 }", 1, 3, "b");
  }
  {
    static const char *const trunc = "k { a = { b = \"unterminated\n , c = 1";
    CHECK("unterminated string stops at newline", trunc, 1, 2, "a", "c");
    CHECK("unterminated 2", trunc, 1, 1, "a");
    CHECK("no table", "local x = 1\n", 1, 1, "a");
    CHECK("start past eof", "k { a = 1 }", 5, 5, "a");
    if (dsv4_srcpos_find("k { a = 1 }", 11, 1, NULL, 0) == 1) passed++;
    else { failed++; printf("FAIL empty path\n"); }
    if (dsv4_srcpos_find(NULL, 0, 3, PATH("a"), 1) == 3) passed++;
    else { failed++; printf("FAIL null src\n"); }
    /* Every prefix of SPEC must be handled without reading past len. */
    {
      size_t n = strlen(SPEC), k;
      int bad = 0;
      for (k = 0; k <= n; k++) {
        char *copy = malloc(k ? k : 1); /* exact size: ASan sees overreads */
        int r;
        if (!copy) return 1;
        memcpy(copy, SPEC, k);
        r = dsv4_srcpos_find(copy, k, 9, PATH("targets", "ptx", "arch"), 3);
        if (r < 9 || r > 26) bad++;
        free(copy);
      }
      if (bad == 0) passed++;
      else { failed++; printf("FAIL prefixes: %d out of range\n", bad); }
    }
  }
  /* Columns: of the key, the positional item, the bracketed key, the
   * deepest element found, and the constructor's `{` for the table. */
  CHECK_COL("col root name", SPEC, 3, 4, 3, "name");
  CHECK_COL("col nested", SPEC, 9, 19, 5, "tile", "values_per_thread");
  CHECK_COL("col positional", SPEC, 3, 7, 5, "segments", "#2");
  CHECK_COL("col in positional", SPEC, 3, 6, 23, "segments", "#1", "type");
  CHECK_COL("col bracket key", SPEC, 9, 22, 3, "key with space");
  CHECK_COL("col call argument", SPEC, 9, 24, 23, "targets", "amdgcn", "arch");
  CHECK_COL("col missing leaf: its parent", SPEC, 9, 18, 3, "tile", "nope");
  CHECK_COL("col table itself", SPEC, 9, 9, 8);
  check_col("col no constructor", "x = 1\n", 1, NULL, 0, 1, 0);
  /* Excerpts: the line and a caret under the column, tabs kept. */
  check_excerpt("excerpt", "a\n  tile = 1\n", 2, 3, "    tile = 1\n    ^\n");
  check_excerpt("excerpt tab", "\ttile = x\n", 1, 8, "  \ttile = x\n  \t      ^\n");
  check_excerpt("excerpt crlf", "a\r\nb = 2\r\n", 2, 1, "  b = 2\n  ^\n");
  check_excerpt("excerpt no column", "a = 1\n", 1, 0, "");
  check_excerpt("excerpt past the line", "a = 1\n", 1, 9, "");
  check_excerpt("excerpt past the file", "a = 1\n", 3, 1, "");
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
