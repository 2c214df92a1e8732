/* text.h -- a growing text buffer: the lockfile's canonical text, dsv4c
 * --emit plan and --emit c, the sweep manifest and dsv4c-tune's reports. */
#ifndef DSV4_TEXT_H
#define DSV4_TEXT_H

#include <stddef.h>

/* A growing buffer (s NUL-terminated; zero-initialised to start). */
typedef struct {
  char *s;
  size_t n, cap;
  int failed; /* out of memory: the text is incomplete */
} dsv4_text;
void dsv4_text_printf(dsv4_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s as a JSON string literal (quotes, escapes) appended to t. */
void dsv4_text_json_str(dsv4_text *t, const char *s);

#endif
