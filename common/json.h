/* json.h -- a small JSON reader: the tuning lockfile (lock.c) and the
 * sweep manifest dsv4c-tune reads.  Never prints, never exits. */
#ifndef DSV4_JSON_H
#define DSV4_JSON_H

#include <stddef.h>

enum { DSV4_JSON_NULL, DSV4_JSON_BOOL, DSV4_JSON_NUM, DSV4_JSON_STR, DSV4_JSON_ARR, DSV4_JSON_OBJ };
typedef struct dsv4_json {
  int type;
  int line;          /* the line the value starts on (1 the first) */
  double num;        /* NUM; BOOL: 0 or 1 */
  char *str;         /* STR (NUL-terminated, escapes decoded; \u00XX only) */
  char **keys;       /* OBJ: n keys */
  struct dsv4_json *items; /* ARR, OBJ: n values */
  int n;
} dsv4_json;
/* Parse text (at most 64 levels deep, at most DSV4_JSON_MAX_VALUES values);
 * NULL with the reason and the line in err on a syntax error, past those
 * limits or when memory runs out. */
#define DSV4_JSON_MAX_VALUES (1 << 21)
dsv4_json *dsv4_json_parse(const char *text, size_t len, char *err, size_t errlen);
void dsv4_json_free(dsv4_json *j);
/* Member key of an object (NULL if absent or j is not an object). */
const dsv4_json *dsv4_json_get(const dsv4_json *j, const char *key);
/* Member key as a string / number, or def when absent or of another type. */
const char *dsv4_json_str(const dsv4_json *j, const char *key, const char *def);
double dsv4_json_num(const dsv4_json *j, const char *key, double def);

#endif
