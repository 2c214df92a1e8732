/* text.c -- the growing text buffer (see text.h). */
#include "text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
